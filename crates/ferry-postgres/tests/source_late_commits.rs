//! Rows committed late — by a transaction that was open while rows with higher keys were read — are
//! read exactly once in every mode, without a guessed `timestamp.delay.interval.ms`: the source does
//! not move past a key that a transaction still open could yet write below. An idle transaction that
//! holds the source back is named in a WARN; after `ferry.late.commit.max.wait.ms` the source stops
//! waiting for it (Kafka Connect's behaviour).

mod source_support;

use std::time::Duration;

use source_support::{
    Logs, Offsets, Table, TestResult, client, ids, poll_for, poll_n, poll_up_to, table_config,
};

/// A session holding an open transaction that wrote `insert` (SQL), not yet committed.
async fn open_transaction(
    insert: &str,
) -> Result<tokio_postgres::Client, Box<dyn std::error::Error>> {
    let late = client().await?;
    late.batch_execute(&format!("BEGIN; {insert}")).await?;
    Ok(late)
}

/// Reads with the late transaction open (nothing past it may arrive yet), commits it, and checks that
/// every row then arrives exactly once in key order.
async fn late_row_is_read_once(
    mode: &str,
    columns: &str,
    extra: &[(&str, &str)],
    late_insert: &str,
    other_insert: &str,
) -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "latec", columns).await?;
    let late = open_transaction(&late_insert.replace("{t}", &t.name)).await?;
    db.batch_execute(&other_insert.replace("{t}", &t.name))
        .await?;
    let config = table_config(&t.name, mode, extra);
    let (mut task, _) = Offsets::new().start(config).await?;
    let early = poll_for(task.as_mut(), Duration::from_millis(800)).await?;
    assert!(
        early.is_empty(),
        "no row may be passed while a transaction that could write below it is open: {:?}",
        ids(&early, "id")
    );
    late.batch_execute("COMMIT").await?;
    let records = poll_n(task.as_mut(), 2).await?;
    let more = poll_for(task.as_mut(), Duration::from_millis(500)).await?;
    assert_eq!(
        ids(&[records, more].concat(), "id"),
        vec![1, 2],
        "the late row 1 and row 2, each once, in key order"
    );
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incrementing_a_lower_id_committed_after_a_higher_one_is_read_once() -> TestResult {
    // The late transaction takes id 1 from the sequence first; id 2 commits first.
    late_row_is_read_once(
        "incrementing",
        "id bigserial primary key, v text",
        &[("incrementing.column.name", "id")],
        "INSERT INTO {t} (v) VALUES ('late')",
        "INSERT INTO {t} (v) VALUES ('early')",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamp_a_lower_timestamp_committed_after_a_higher_one_is_read_once() -> TestResult {
    late_row_is_read_once(
        "timestamp",
        "id int, ts timestamptz not null",
        &[("timestamp.column.name", "ts")],
        "INSERT INTO {t} (id, ts) VALUES (1, now())",
        "INSERT INTO {t} (id, ts) VALUES (2, now())",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamp_incrementing_a_lower_timestamp_and_id_committed_late_is_read_once() -> TestResult
{
    late_row_is_read_once(
        "timestamp+incrementing",
        "id bigserial primary key, ts timestamptz not null default now()",
        &[
            ("timestamp.column.name", "ts"),
            ("incrementing.column.name", "id"),
        ],
        "INSERT INTO {t} DEFAULT VALUES",
        "INSERT INTO {t} DEFAULT VALUES",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_transaction_holding_progress_back_is_named_then_released() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "idletx", "id bigserial primary key, v text").await?;
    // An unrelated session, idle in a transaction that wrote nothing (it could still write below).
    let idle = client().await?;
    let idle_pid: i32 = idle.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
    idle.batch_execute("BEGIN; SELECT 1 AS ferry_idle_marker")
        .await?;
    db.batch_execute(&format!("INSERT INTO {} (v) VALUES ('a'), ('b')", t.name))
        .await?;
    let (logs, _guard) = Logs::capture();
    let config = table_config(
        &t.name,
        "incrementing",
        &[("incrementing.column.name", "id")],
    );
    let (mut task, _) = Offsets::new().start(config).await?;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let pid_text = format!("pid {idle_pid}");
    while !logs.text().contains(&pid_text) {
        assert!(
            std::time::Instant::now() < deadline,
            "no WARN naming the idle backend: {}",
            logs.text()
        );
        let held = task.poll().await?;
        assert!(
            held.is_empty(),
            "rows passed the open transaction: {:?}",
            ids(&held, "id")
        );
    }
    let text = logs.text();
    assert!(
        text.contains("WARN") && text.contains("ferry_idle_marker"),
        "the WARN names the backend's query: {text}"
    );
    idle.batch_execute("COMMIT").await?;
    let records = poll_n(task.as_mut(), 2).await?;
    assert_eq!(ids(&records, "id"), vec![1, 2]);
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_maximum_wait_the_source_stops_waiting_for_an_open_transaction() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "maxwait", "id bigserial primary key, v text").await?;
    let idle = client().await?;
    idle.batch_execute("BEGIN; SELECT 1").await?;
    db.batch_execute(&format!("INSERT INTO {} (v) VALUES ('a')", t.name))
        .await?;
    let (logs, _guard) = Logs::capture();
    let config = table_config(
        &t.name,
        "incrementing",
        &[
            ("incrementing.column.name", "id"),
            ("ferry.late.commit.max.wait.ms", "1500"),
        ],
    );
    let (mut task, _) = Offsets::new().start(config).await?;
    let records = poll_up_to(task.as_mut(), 1, Duration::from_secs(20)).await?;
    assert_eq!(ids(&records, "id"), vec![1], "{}", logs.text());
    assert!(
        logs.text().contains("ferry.late.commit.max.wait.ms"),
        "the fallback is logged: {}",
        logs.text()
    );
    idle.batch_execute("COMMIT").await?;
    task.stop().await?;
    Ok(())
}

/// Writers in concurrent transactions of random length, committing out of key order, while the
/// source reads: every row arrives exactly once.
async fn concurrent_writers_lose_nothing(mode: &str, extra: &[(&str, &str)]) -> TestResult {
    const WRITERS: u64 = 6;
    const TRANSACTIONS: u64 = 15;
    let db = client().await?;
    let t = Table::create(
        &db,
        "concurrent",
        "id bigserial primary key, ts timestamptz not null default now(), w int not null",
    )
    .await?;
    let mut config = table_config(&t.name, mode, extra);
    config.insert("poll.interval.ms".to_owned(), "10".to_owned());
    config.insert("batch.max.rows".to_owned(), "7".to_owned());
    let (mut task, _) = Offsets::new().start(config).await?;
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let table = t.name.clone();
            tokio::spawn(async move {
                let db = client().await.map_err(|e| e.to_string())?;
                for n in 0..TRANSACTIONS {
                    // Deterministic "random" lengths and row counts: commits interleave out of order.
                    let rows = 1 + (w * 7 + n * 3) % 3;
                    let pause = Duration::from_millis((w * 13 + n * 29) % 40);
                    db.batch_execute(&format!(
                        "BEGIN; INSERT INTO {table} (w) SELECT {w} FROM generate_series(1, {rows})"
                    ))
                    .await
                    .map_err(|e| e.to_string())?;
                    tokio::time::sleep(pause).await;
                    db.batch_execute("COMMIT")
                        .await
                        .map_err(|e| e.to_string())?;
                }
                Ok::<(), String>(())
            })
        })
        .collect();
    let mut got = Vec::new();
    for writer in writers {
        while !writer.is_finished() {
            got.extend(ids(&task.poll().await?, "id"));
        }
        writer.await??;
    }
    let total = usize::try_from(
        db.query_one(&format!("SELECT count(*) FROM {}", t.name), &[])
            .await?
            .get::<_, i64>(0),
    )?;
    let rest = poll_n(task.as_mut(), total.saturating_sub(got.len())).await?;
    got.extend(ids(&rest, "id"));
    got.extend(ids(
        &poll_for(task.as_mut(), Duration::from_millis(300)).await?,
        "id",
    ));
    let mut sorted = got.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), got.len(), "{mode}: a row arrived twice");
    let all: Vec<i64> = db
        .query(&format!("SELECT id FROM {} ORDER BY id", t.name), &[])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(sorted, all, "{mode}: every committed row, once");
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_out_of_order_commits_incrementing() -> TestResult {
    concurrent_writers_lose_nothing("incrementing", &[("incrementing.column.name", "id")]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_out_of_order_commits_timestamp_incrementing() -> TestResult {
    concurrent_writers_lose_nothing(
        "timestamp+incrementing",
        &[
            ("incrementing.column.name", "id"),
            ("timestamp.column.name", "ts"),
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_out_of_order_commits_timestamp() -> TestResult {
    concurrent_writers_lose_nothing("timestamp", &[("timestamp.column.name", "ts")]).await
}
