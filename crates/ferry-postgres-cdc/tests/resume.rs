//! Resume and acknowledgement: restart inside a transaction, the slot moves only with `commit()`,
//! a dropped slot fails loudly, and the snapshot hands off to the stream exactly.

#![cfg(test)]

mod support;

use std::time::Duration;

use ferry_postgres_cdc::{PostgresCdcConnector, partition};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_inside_a_transaction_resumes_with_nothing_lost_or_repeated() -> TestResult {
    let db = client().await?;
    let fx = Fixture::new(&db, "midtx", "id int PRIMARY KEY").await?;
    let config = fx.config(&[("snapshot.mode", "no_data")]);
    let harness = TaskHarness::new("cdc");
    let (mut task, _) = harness.start(&PostgresCdcConnector, config.clone()).await?;
    let t = &fx.name;
    db.batch_execute(&format!(
        "INSERT INTO public.{t} VALUES (1); \
         BEGIN; INSERT INTO public.{t} VALUES (2); INSERT INTO public.{t} VALUES (3); INSERT INTO public.{t} VALUES (4); COMMIT;"
    ))
    .await?;
    let records = poll_n(task.as_mut(), 4).await?;
    // Commit up to the middle of the second transaction (rows 1, 2, 3), as if the worker died
    // before row 4's offset was flushed.
    harness.commit(&records[..3]).await?;
    task.stop().await?;
    drop(task);
    db.batch_execute(&format!("INSERT INTO public.{t} VALUES (5)"))
        .await?;
    let (mut task, _) = harness.start(&PostgresCdcConnector, config).await?;
    let again = poll_n(task.as_mut(), 2).await?;
    let ids: Vec<i64> = again
        .iter()
        .map(|r| after(r, "id").as_i64().unwrap_or(-1))
        .collect();
    assert_eq!(
        ids,
        [4, 5],
        "exactly the uncommitted row of the partial transaction, then the new one"
    );
    assert!(
        poll_for(task.as_mut(), Duration::from_millis(700))
            .await?
            .is_empty(),
        "nothing repeated"
    );
    // A restart after a complete transaction replays nothing.
    harness.commit(&again).await?;
    task.stop().await?;
    drop(task);
    let (mut task, _) = harness
        .start(
            &PostgresCdcConnector,
            fx.config(&[("snapshot.mode", "no_data")]),
        )
        .await?;
    assert!(
        poll_for(task.as_mut(), Duration::from_millis(1500))
            .await?
            .is_empty(),
        "nothing repeated"
    );
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slot_advances_only_after_commit_and_only_to_the_committed_offset() -> TestResult {
    let db = client().await?;
    let fx = Fixture::new(&db, "ack", "id int PRIMARY KEY").await?;
    let harness = TaskHarness::new("cdc");
    let (mut task, _) = harness
        .start(
            &PostgresCdcConnector,
            fx.config(&[("snapshot.mode", "no_data")]),
        )
        .await?;
    let start = confirmed_flush(&db, &fx.name).await?.ok_or("no slot")?;
    let t = &fx.name;
    // Two transactions (one simple query with two statements would be one).
    db.batch_execute(&format!("INSERT INTO public.{t} VALUES (1)"))
        .await?;
    db.batch_execute(&format!("INSERT INTO public.{t} VALUES (2)"))
        .await?;
    let records = poll_n(task.as_mut(), 2).await?;
    // Acknowledged by the sink but not committed: the slot must not move.
    for r in &records {
        task.commit_record(r, None).await?;
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        confirmed_flush(&db, &fx.name).await?,
        Some(start),
        "acknowledged records moved the slot"
    );
    // Committed (the first transaction only), then commit(): the slot moves to that offset's
    // lsn_commit, not to the second transaction's.
    harness.commit(&records[..1]).await?;
    task.commit().await?;
    let committed = harness
        .offset(&partition("srv"))
        .await?
        .ok_or("no offset")?;
    let lsn_commit = committed
        .get("lsn_commit")
        .and_then(|v| v.as_i64())
        .ok_or("no lsn_commit")? as u64;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let flushed = confirmed_flush(&db, &fx.name).await?;
        if flushed == Some(lsn_commit) {
            break;
        }
        assert!(
            flushed <= Some(lsn_commit),
            "the slot went past the committed offset: {flushed:?} > {lsn_commit}"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "the slot never reached {lsn_commit}: {flushed:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(lsn_commit > start);
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_slot_with_committed_offsets_fails_the_task_loudly() -> TestResult {
    let db = client().await?;
    let fx = Fixture::new(&db, "lost", "id int PRIMARY KEY").await?;
    let config = fx.config(&[("snapshot.mode", "no_data")]);
    let harness = TaskHarness::new("cdc");
    let (mut task, _) = harness.start(&PostgresCdcConnector, config.clone()).await?;
    db.batch_execute(&format!("INSERT INTO public.{} VALUES (1)", fx.name))
        .await?;
    let records = poll_n(task.as_mut(), 1).await?;
    harness.commit(&records).await?;
    task.stop().await?;
    drop(task);
    db.execute("SELECT pg_drop_replication_slot($1)", &[&fx.name])
        .await?;
    let Err(error) = harness.start(&PostgresCdcConnector, config).await else {
        return Err("the task started although its slot is gone".into());
    };
    let message = error.to_string();
    assert!(!error.is_retriable(), "{message}");
    assert!(
        message.contains("does not exist")
            && message.contains("lost")
            && message.contains("recover"),
        "{message}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_initial_snapshot_hands_off_to_the_stream_without_gap_or_duplicate() -> TestResult {
    let db = client().await?;
    let fx = Fixture::new(&db, "snap", "id int PRIMARY KEY, note text").await?;
    let t = &fx.name;
    db.batch_execute(&format!(
        "INSERT INTO public.{t} SELECT g, 'snap' FROM generate_series(1, 2500) g"
    ))
    .await?;
    let harness = TaskHarness::new("cdc");
    let config = fx.config(&[]);
    let (mut task, _) = harness.start(&PostgresCdcConnector, config.clone()).await?;
    // Written while the snapshot may still be read: must come from the stream, exactly once.
    db.batch_execute(&format!("INSERT INTO public.{t} VALUES (2501, 'stream'); UPDATE public.{t} SET note = 'upd' WHERE id = 1")).await?;
    let records = poll_n(task.as_mut(), 2502).await?;
    let snapshot: Vec<_> = records.iter().filter(|r| op(r) == Some("r")).collect();
    assert_eq!(
        snapshot.len(),
        2500,
        "every row, across several cursor fetches"
    );
    let markers: Vec<&str> = snapshot
        .iter()
        .map(|r| {
            r.value
                .as_ref()
                .and_then(|v| v["source"]["snapshot"].as_str())
                .unwrap_or("")
        })
        .collect();
    assert_eq!((markers[0], markers[2499]), ("first", "last"));
    assert!(markers[1..2499].iter().all(|m| *m == "true"));
    let last = snapshot[2499].source_offset.clone().ok_or("no offset")?;
    assert_eq!(
        last.get("snapshot").and_then(|v| v.as_str()),
        Some("INITIAL")
    );
    assert_eq!(
        last.get("last_snapshot_record"),
        Some(&ferry_api::Value::Bool(true))
    );
    let streamed: Vec<_> = records.iter().filter(|r| op(r) != Some("r")).collect();
    let ops: Vec<(Option<&str>, i64)> = streamed
        .iter()
        .map(|r| (op(r), after(r, "id").as_i64().unwrap_or(-1)))
        .collect();
    assert_eq!(ops, [(Some("c"), 2501), (Some("u"), 1)]);
    assert!(
        poll_for(task.as_mut(), Duration::from_millis(700))
            .await?
            .is_empty()
    );
    // Committed through the snapshot: a restart streams on, with no new snapshot.
    harness.commit(&records).await?;
    task.stop().await?;
    drop(task);
    db.batch_execute(&format!("INSERT INTO public.{t} VALUES (2502, 'after')"))
        .await?;
    let (mut task, _) = harness.start(&PostgresCdcConnector, config).await?;
    let again = poll_n(task.as_mut(), 1).await?;
    assert_eq!(
        (op(&again[0]), after(&again[0], "id").as_i64()),
        (Some("c"), Some(2502))
    );
    assert!(
        poll_for(task.as_mut(), Duration::from_millis(700))
            .await?
            .is_empty()
    );
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_only_snapshots_once_then_streams_nothing() -> TestResult {
    let db = client().await?;
    let fx = Fixture::new(&db, "only", "id int PRIMARY KEY").await?;
    let t = &fx.name;
    db.batch_execute(&format!("INSERT INTO public.{t} VALUES (1), (2)"))
        .await?;
    let config = fx.config(&[("snapshot.mode", "initial_only")]);
    let harness = TaskHarness::new("cdc");
    let (mut task, _) = harness.start(&PostgresCdcConnector, config.clone()).await?;
    let records = poll_n(task.as_mut(), 2).await?;
    assert!(records.iter().all(|r| op(r) == Some("r")));
    db.batch_execute(&format!("INSERT INTO public.{t} VALUES (3)"))
        .await?;
    assert!(
        poll_for(task.as_mut(), Duration::from_millis(700))
            .await?
            .is_empty(),
        "no streaming"
    );
    harness.commit(&records).await?;
    task.stop().await?;
    drop(task);
    let (mut task, _) = harness.start(&PostgresCdcConnector, config).await?;
    assert!(
        poll_for(task.as_mut(), Duration::from_millis(700))
            .await?
            .is_empty(),
        "no second snapshot"
    );
    task.stop().await?;
    Ok(())
}

/// With heartbeats (`heartbeat.interval.ms`), Debezium's heartbeat records carry the server's
/// position between transactions: once committed, the slot advances although only a table that is
/// not captured is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_let_the_slot_advance_while_captured_tables_are_idle() -> TestResult {
    idle_slot_advances(true, false).await
}

/// Without heartbeats (the default), offset-only checkpoints (`SourceRecord::offset_only`, never
/// sent) do the same: an idle or filtered database does not make the slot retain WAL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_only_checkpoints_let_the_slot_advance_without_heartbeats() -> TestResult {
    idle_slot_advances(false, false).await
}

/// The same when only another database of the server writes: the slot (which decodes nothing of
/// it) must not retain that database's WAL either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slot_advances_while_only_another_database_writes() -> TestResult {
    idle_slot_advances(false, true).await
}

/// `elsewhere`: the busy writer writes in database `postgres` instead of a table of the captured
/// database that is not captured.
async fn idle_slot_advances(heartbeats: bool, elsewhere: bool) -> TestResult {
    let db = client().await?;
    let fx = Fixture::new(&db, "idle", "id int PRIMARY KEY").await?;
    // A busy table that is not captured (nor in the filtered publication).
    let busy = Fixture::new(&db, "busy", "id int PRIMARY KEY").await?;
    let other = if elsewhere {
        let (client, connection) = tokio_postgres::connect(
            "host=127.0.0.1 port=5432 user=postgres dbname=postgres",
            tokio_postgres::NoTls,
        )
        .await?;
        tokio::spawn(connection);
        Some(client)
    } else {
        None
    };
    let harness = TaskHarness::new("cdc");
    let mut settings = vec![("snapshot.mode", "no_data")];
    if heartbeats {
        settings.push(("heartbeat.interval.ms", "200"));
    }
    let config = fx.config(&settings);
    let (mut task, _) = harness.start(&PostgresCdcConnector, config).await?;
    let start = confirmed_flush(&db, &fx.name).await?.ok_or("no slot")?;
    for i in 0..20 {
        match &other {
            // One transaction that leaves nothing behind, even if the test fails.
            Some(other) => {
                other
                    .batch_execute(&format!(
                        "BEGIN; CREATE TABLE {0} (id int); INSERT INTO {0} SELECT generate_series(1, 100); \
                         DROP TABLE {0}; COMMIT",
                        busy.name
                    ))
                    .await?
            }
            None => {
                db.batch_execute(&format!("INSERT INTO public.{} VALUES ({i})", busy.name))
                    .await?
            }
        }
    }
    let written: String = db
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .await?
        .get(0);
    let (hi, lo) = written.split_once('/').ok_or("lsn")?;
    let written = (u64::from_str_radix(hi, 16)? << 32) | u64::from_str_radix(lo, 16)?;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let records = task.poll().await?;
        assert!(
            records.iter().all(|r| if heartbeats {
                r.topic == "__debezium-heartbeat.srv" || r.offset_only
            } else {
                r.offset_only
            }),
            "only heartbeats or checkpoints: {records:#?}"
        );
        if heartbeats && let Some(beat) = records.iter().find(|r| !r.offset_only) {
            assert_eq!(beat.value.as_ref().map(|v| v["ts_ms"].is_i64()), Some(true));
        }
        if !records.is_empty() {
            harness.commit(&records).await?;
            task.commit().await?;
        }
        let flushed = confirmed_flush(&db, &fx.name).await?.unwrap_or(0);
        if flushed >= written {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the slot stayed at {flushed} (start {start}) while the server wrote up to {written}"
        );
    }
    // And nothing was lost: a change after the heartbeats still arrives once.
    db.batch_execute(&format!("INSERT INTO public.{} VALUES (1)", fx.name))
        .await?;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let change = loop {
        let records = task.poll().await?;
        if let Some(r) = records.into_iter().find(|r| r.topic == fx.topic()) {
            break r;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the change never came"
        );
    };
    assert_eq!(after(&change, "id").as_i64(), Some(1));
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_needed_takes_a_new_snapshot_instead_of_failing_on_a_dropped_slot() -> TestResult {
    let db = client().await?;
    let fx = Fixture::new(&db, "needed", "id int PRIMARY KEY").await?;
    let t = &fx.name;
    db.batch_execute(&format!("INSERT INTO public.{t} VALUES (1)"))
        .await?;
    let config = fx.config(&[("snapshot.mode", "when_needed")]);
    let harness = TaskHarness::new("cdc");
    let (mut task, _) = harness.start(&PostgresCdcConnector, config.clone()).await?;
    let records = poll_n(task.as_mut(), 1).await?;
    harness.commit(&records).await?;
    task.stop().await?;
    drop(task);
    db.execute("SELECT pg_drop_replication_slot($1)", &[&fx.name])
        .await?;
    db.batch_execute(&format!("INSERT INTO public.{t} VALUES (2)"))
        .await?;
    let (mut task, _) = harness.start(&PostgresCdcConnector, config).await?;
    let again = poll_n(task.as_mut(), 2).await?;
    let read: Vec<(Option<&str>, Option<i64>)> = again
        .iter()
        .map(|r| (op(r), after(r, "id").as_i64()))
        .collect();
    assert_eq!(
        read,
        [(Some("r"), Some(1)), (Some("r"), Some(2))],
        "a new snapshot of the current rows"
    );
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_takes_a_snapshot_at_every_start() -> TestResult {
    let db = client().await?;
    let fx = Fixture::new(&db, "always", "id int PRIMARY KEY").await?;
    let t = &fx.name;
    db.batch_execute(&format!("INSERT INTO public.{t} VALUES (1)"))
        .await?;
    let config = fx.config(&[("snapshot.mode", "always")]);
    let harness = TaskHarness::new("cdc");
    for run in 0..2 {
        let (mut task, _) = harness.start(&PostgresCdcConnector, config.clone()).await?;
        let records = poll_n(task.as_mut(), 1).await?;
        assert_eq!(
            (op(&records[0]), after(&records[0], "id").as_i64()),
            (Some("r"), Some(1)),
            "run {run}"
        );
        harness.commit(&records).await?;
        task.stop().await?;
    }
    Ok(())
}

/// The `snapshot` marker of a record's `source`.
fn marker(record: &ferry_api::SourceRecord) -> &str {
    record
        .value
        .as_ref()
        .and_then(|v| v["source"]["snapshot"].as_str())
        .unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_snapshot_resumes_after_its_committed_composite_key() -> TestResult {
    let db = client().await?;
    let fx = Fixture::new(
        &db,
        "snapkey",
        "region text, n int, note text, PRIMARY KEY (region, n)",
    )
    .await?;
    let t = &fx.name;
    // A quote in a key value: the resume query must carry it intact.
    db.batch_execute(&format!(
        "INSERT INTO public.{t} SELECT r, g, 'x' FROM unnest(ARRAY['z', 'o''neil', 'a']) r, generate_series(1, 4) g"
    ))
    .await?;
    let key = |r: &ferry_api::SourceRecord| {
        (
            after(r, "region").as_str().unwrap_or("").to_owned(),
            after(r, "n").as_i64().unwrap_or(-1),
        )
    };
    let harness = TaskHarness::new("cdc");
    let config = fx.config(&[]);
    let (mut task, _) = harness.start(&PostgresCdcConnector, config.clone()).await?;
    let first = poll_n(task.as_mut(), 12).await?;
    let order: Vec<(String, i64)> = first.iter().map(key).collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted, "read in primary-key order");
    // Only the first five rows' offsets were committed when the task stopped.
    harness.commit(&first[..5]).await?;
    task.stop().await?;
    drop(task);
    let (mut task, _) = harness.start(&PostgresCdcConnector, config).await?;
    let rest = poll_n(task.as_mut(), 7).await?;
    assert_eq!(
        rest.iter().map(key).collect::<Vec<_>>(),
        order[5..],
        "the rows after the committed key, none before it"
    );
    assert_eq!(marker(&rest[6]), "last");
    assert!(
        poll_for(task.as_mut(), Duration::from_millis(700))
            .await?
            .is_empty(),
        "nothing repeated"
    );
    // Once the snapshot's end is committed, a restart streams.
    harness.commit(&rest).await?;
    task.stop().await?;
    drop(task);
    db.batch_execute(&format!("INSERT INTO public.{t} VALUES ('b', 9, 'new')"))
        .await?;
    let (mut task, _) = harness.start(&PostgresCdcConnector, fx.config(&[])).await?;
    let again = poll_n(task.as_mut(), 1).await?;
    assert_eq!(
        (op(&again[0]), key(&again[0])),
        (Some("c"), ("b".to_owned(), 9))
    );
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_stopped_in_a_table_without_primary_key_reads_that_table_again() -> TestResult {
    let db = client().await?;
    let fx = Fixture::new(&db, "snapnokey", "n int, note text").await?;
    let t = &fx.name;
    db.batch_execute(&format!(
        "INSERT INTO public.{t} SELECT g, 'x' FROM generate_series(1, 5) g"
    ))
    .await?;
    let harness = TaskHarness::new("cdc");
    let config = fx.config(&[]);
    let (mut task, _) = harness.start(&PostgresCdcConnector, config.clone()).await?;
    let first = poll_n(task.as_mut(), 5).await?;
    harness.commit(&first[..2]).await?;
    task.stop().await?;
    drop(task);
    let (mut task, _) = harness.start(&PostgresCdcConnector, config).await?;
    let again = poll_n(task.as_mut(), 5).await?;
    let mut ns: Vec<i64> = again
        .iter()
        .map(|r| after(r, "n").as_i64().unwrap_or(-1))
        .collect();
    ns.sort_unstable();
    assert_eq!(
        ns,
        [1, 2, 3, 4, 5],
        "every row again: no key to resume after"
    );
    task.stop().await?;
    Ok(())
}

/// `heartbeat.action.query` runs at each heartbeat: here it writes the captured table, whose
/// changes then stream although the test itself writes nothing; a failing query (a table that
/// does not exist) is logged and capture goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_action_query_runs_at_each_heartbeat() -> TestResult {
    let db = client().await?;
    let fx = Fixture::new(&db, "beatq", "id serial PRIMARY KEY").await?;
    let harness = TaskHarness::new("cdc");
    let query = format!("INSERT INTO public.{} DEFAULT VALUES", fx.name);
    let config = fx.config(&[
        ("snapshot.mode", "no_data"),
        ("heartbeat.interval.ms", "200"),
        ("heartbeat.action.query", &query),
    ]);
    let (mut task, _) = harness.start(&PostgresCdcConnector, config).await?;
    let mut created = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while created < 3 {
        created += task
            .poll()
            .await?
            .iter()
            .filter(|r| r.topic == fx.topic() && op(r) == Some("c"))
            .count();
        assert!(
            std::time::Instant::now() < deadline,
            "only {created} rows written by the heartbeat query arrived"
        );
    }
    task.stop().await?;
    drop(task);
    let broken = fx.config(&[
        ("snapshot.mode", "no_data"),
        ("heartbeat.interval.ms", "200"),
        (
            "heartbeat.action.query",
            "INSERT INTO no_such_table VALUES (1)",
        ),
    ]);
    let (mut task, _) = harness.start(&PostgresCdcConnector, broken).await?;
    db.batch_execute(&format!("INSERT INTO public.{} DEFAULT VALUES", fx.name))
        .await?;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let records = task.poll().await?;
        if records.iter().any(|r| r.topic == fx.topic()) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the change never came"
        );
    }
    task.stop().await?;
    Ok(())
}

/// An offset reader whose reads take `delay` once `slow` is set (with offsets in Kafka a read is a
/// read to the end of the offsets topic).
struct SlowReader {
    inner: std::sync::Arc<ferry_testkit::CountingReader>,
    slow: std::sync::atomic::AtomicBool,
    delay: Duration,
}

#[async_trait::async_trait]
impl ferry_api::OffsetStorageReader for SlowReader {
    async fn offsets(
        &self,
        partitions: &[ferry_api::SourcePartition],
    ) -> Result<
        Vec<(ferry_api::SourcePartition, Option<ferry_api::SourceOffset>)>,
        ferry_api::OffsetReadError,
    > {
        if self.slow.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(self.delay).await;
        }
        self.inner.offsets(partitions).await
    }
}

struct SlowContext {
    config: ferry_api::Config,
    reader: std::sync::Arc<SlowReader>,
}

impl ferry_api::SourceTaskContext for SlowContext {
    fn configs(&self) -> &ferry_api::Config {
        &self.config
    }

    fn offset_storage_reader(&self) -> std::sync::Arc<dyn ferry_api::OffsetStorageReader> {
        self.reader.clone()
    }
}

/// `commit()` runs on the task's loop after every offset commit; reading the committed offset back
/// must not hold it there (a slow read paced the stream with continuous commits), and the slot
/// still advances to the committed offset once the read is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_read_back_of_the_committed_offset_does_not_hold_commit() -> TestResult {
    use ferry_api::SourceConnector as _;
    let db = client().await?;
    let fx = Fixture::new(&db, "slowread", "id int PRIMARY KEY").await?;
    let harness = TaskHarness::new("cdc");
    let reader = std::sync::Arc::new(SlowReader {
        inner: harness.reader(),
        slow: std::sync::atomic::AtomicBool::new(false),
        delay: Duration::from_secs(3),
    });
    let mut task = PostgresCdcConnector.create_task();
    task.start(std::sync::Arc::new(SlowContext {
        config: fx.config(&[("snapshot.mode", "no_data")]),
        reader: reader.clone(),
    }))
    .await?;
    db.batch_execute(&format!("INSERT INTO public.{} VALUES (1)", fx.name))
        .await?;
    let records = poll_n(task.as_mut(), 1).await?;
    harness.commit(&records).await?;
    reader.slow.store(true, std::sync::atomic::Ordering::SeqCst);
    let began = std::time::Instant::now();
    task.commit().await?;
    task.commit().await?;
    assert!(
        began.elapsed() < Duration::from_secs(1),
        "commit() waited {:?} for the read-back",
        began.elapsed()
    );
    let lsn_commit = harness
        .offset(&partition("srv"))
        .await?
        .and_then(|o| o.get("lsn_commit").and_then(|v| v.as_i64()))
        .ok_or("no lsn_commit")? as u64;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while confirmed_flush(&db, &fx.name).await? != Some(lsn_commit) {
        assert!(
            std::time::Instant::now() < deadline,
            "the slot never reached the committed {lsn_commit}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    task.stop().await?;
    Ok(())
}
