//! Streaming: Debezium's envelope for inserts, updates, deletes (with tombstones) and skipped
//! truncates, and the common types.

#![cfg(test)]

mod support;

use ferry_postgres_cdc::PostgresCdcConnector;
use serde_json::json;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_arrive_in_debeziums_envelope_with_tombstones_and_truncate_skipped() -> TestResult {
    let db = client().await?;
    let fx = Fixture::new(&db, "envelope", "id int PRIMARY KEY, note text").await?;
    let harness = TaskHarness::new("cdc");
    let (mut task, _) = harness
        .start(
            &PostgresCdcConnector,
            fx.config(&[("snapshot.mode", "no_data")]),
        )
        .await?;
    let t = &fx.name;
    db.batch_execute(&format!(
        "INSERT INTO public.{t} VALUES (1, 'one'); UPDATE public.{t} SET note = 'uno' WHERE id = 1; \
         DELETE FROM public.{t} WHERE id = 1; TRUNCATE public.{t}; INSERT INTO public.{t} VALUES (2, 'two');"
    ))
    .await?;
    let records = poll_n(task.as_mut(), 5).await?;
    let ops: Vec<Option<&str>> = records.iter().map(op).collect();
    assert_eq!(
        ops,
        [Some("c"), Some("u"), Some("d"), None, Some("c")],
        "{records:#?}"
    );
    for r in &records {
        assert_eq!(r.topic, fx.topic());
        assert_eq!(
            r.key,
            Some(json!({"id": if r == &records[4] { 2 } else { 1 }}))
        );
        assert_eq!(
            r.source_partition
                .as_ref()
                .map(ToString::to_string)
                .as_deref(),
            Some("{\"server\":\"srv\"}")
        );
    }
    let create = records[0].value.clone().unwrap_or_default();
    assert_eq!(create["after"], json!({"id": 1, "note": "one"}));
    assert_eq!(create["before"], json!(null));
    let source = &create["source"];
    assert_eq!(source["connector"], "postgresql");
    assert_eq!(source["name"], "srv");
    assert_eq!(source["db"], "test");
    assert_eq!(source["schema"], "public");
    assert_eq!(source["table"], json!(fx.name));
    assert_eq!(source["snapshot"], "false");
    assert!(
        source["txId"].is_i64() && source["lsn"].is_i64() && source["ts_us"].is_i64(),
        "{source}"
    );
    // The first transaction on a new slot: no commit streamed yet, so no lsn_commit (Debezium);
    // later ones the previous COMMIT's end (checked against Debezium in crates/ferry/tests/debezium_bytes.rs).
    let sequence: Vec<Option<String>> =
        serde_json::from_str(source["sequence"].as_str().unwrap_or("[]"))?;
    assert_eq!(
        sequence,
        [None, Some(source["lsn"].to_string())],
        "sequence is [lsn_commit, lsn]: {source}"
    );
    // Debezium's context headers, in its order.
    let keys: Vec<&str> = records[0].headers.iter().map(|h| h.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "__debezium.context.connectorLogicalName",
            "__debezium.context.taskId",
            "__debezium.context.connectorName",
            "__debezium.context.runId"
        ]
    );
    assert_eq!(records[0].headers[0].value, json!("srv"));
    let schema = records[0].value_schema.as_ref().ok_or("no value schema")?;
    assert_eq!(
        schema.name.as_deref(),
        Some(format!("srv.public.{t}.Envelope").as_str())
    );
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "before",
            "after",
            "source",
            "transaction",
            "op",
            "ts_ms",
            "ts_us",
            "ts_ns"
        ]
    );
    assert_eq!(
        records[0].key_schema.as_ref().and_then(|s| s.name.clone()),
        Some(format!("srv.public.{t}.Key"))
    );
    // The delete's before holds the key columns (REPLICA IDENTITY DEFAULT); the tombstone follows.
    let delete = records[2].value.clone().unwrap_or_default();
    assert_eq!(delete["before"]["id"], 1);
    assert_eq!(delete["after"], json!(null));
    assert!(records[3].value.is_none() && records[3].value_schema.is_none());
    // Offsets are Debezium's.
    let offset = records[4].source_offset.clone().ok_or("no offset")?;
    for key in [
        "ts_usec",
        "txId",
        "lsn",
        "lsn_proc",
        "lsn_commit",
        "messageType",
    ] {
        assert!(offset.get(key).is_some(), "{key} missing from {offset}");
    }
    // The last record of its transaction: the offset after the COMMIT, which it says (Debezium
    // resumes right at the next transaction only then).
    assert_eq!(
        offset.get("messageType").and_then(|v| v.as_str()),
        Some("COMMIT")
    );
    // Truncates are skipped by default (skipped.operations=t): nothing more arrives.
    assert!(
        poll_for(task.as_mut(), std::time::Duration::from_millis(700))
            .await?
            .is_empty()
    );
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn common_types_take_debeziums_logical_types() -> TestResult {
    let db = client().await?;
    let fx = Fixture::new(
        &db,
        "types",
        "id bigint PRIMARY KEY, s smallint, b boolean, f4 real, f8 double precision, v varchar(10), \
         n numeric(10,2), nv numeric, d date, t3 time(3), t6 time, ts3 timestamp(3), ts6 timestamp, \
         tz timestamptz, j jsonb, u uuid, by bytea",
    )
    .await?;
    let harness = TaskHarness::new("cdc");
    let (mut task, _) = harness
        .start(
            &PostgresCdcConnector,
            fx.config(&[("snapshot.mode", "no_data")]),
        )
        .await?;
    db.batch_execute(&format!(
        "INSERT INTO public.{} VALUES (1, 2, true, 1.5, 2.25, 'vv', 12.34, -1.5, '1970-01-02', '00:00:01.5', \
         '00:00:01.000001', '1970-01-01 00:00:01.5', '1970-01-01 00:00:00.000002', '2024-01-31 12:00:00.5+01', \
         '{{\"a\": 1}}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\\x0102')",
        fx.name
    ))
    .await?;
    let records = poll_n(task.as_mut(), 1).await?;
    let r = &records[0];
    let expected = json!({
        "id": 1, "s": 2, "b": true, "f4": 1.5, "f8": 2.25, "v": "vv", "n": "BNI=",
        "nv": {"scale": 1, "value": "8Q=="}, "d": 1, "t3": 1500, "t6": 1_000_001, "ts3": 1500, "ts6": 2,
        "tz": "2024-01-31T11:00:00.500000Z", "j": "{\"a\": 1}", "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "by": "AQI=",
    });
    assert_eq!(r.value.as_ref().map(|v| v["after"].clone()), Some(expected));
    let value = r
        .value_schema
        .as_ref()
        .ok_or("no schema")?
        .field("after")
        .ok_or("no after")?
        .schema
        .clone();
    let name = |f: &str| {
        value
            .field(f)
            .and_then(|f| f.schema.name.clone())
            .unwrap_or_default()
    };
    assert_eq!(name("n"), "org.apache.kafka.connect.data.Decimal");
    assert_eq!(
        value.field("n").and_then(|f| f.schema.parameter("scale")),
        Some("2")
    );
    assert_eq!(name("nv"), "io.debezium.data.VariableScaleDecimal");
    assert_eq!(name("d"), "io.debezium.time.Date");
    assert_eq!(name("t3"), "io.debezium.time.Time");
    assert_eq!(name("t6"), "io.debezium.time.MicroTime");
    assert_eq!(name("ts3"), "io.debezium.time.Timestamp");
    assert_eq!(name("ts6"), "io.debezium.time.MicroTimestamp");
    assert_eq!(name("tz"), "io.debezium.time.ZonedTimestamp");
    assert_eq!(name("j"), "io.debezium.data.Json");
    assert_eq!(name("u"), "io.debezium.data.Uuid");
    assert_eq!(value.field("id").map(|f| f.schema.optional), Some(false));
    assert_eq!(value.field("s").map(|f| f.schema.optional), Some(true));
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_key_change_is_a_delete_and_a_create_naming_each_other() -> TestResult {
    let db = client().await?;
    let fx = Fixture::new(&db, "pkchange", "id int PRIMARY KEY, note text").await?;
    let t = &fx.name;
    db.batch_execute(&format!("ALTER TABLE public.{t} REPLICA IDENTITY FULL"))
        .await?;
    let harness = TaskHarness::new("cdc");
    let (mut task, _) = harness
        .start(
            &PostgresCdcConnector,
            fx.config(&[("snapshot.mode", "no_data")]),
        )
        .await?;
    db.batch_execute(&format!("INSERT INTO public.{t} VALUES (1, 'x')"))
        .await?;
    db.batch_execute(&format!("UPDATE public.{t} SET note = 'y' WHERE id = 1"))
        .await?;
    db.batch_execute(&format!("UPDATE public.{t} SET id = 2 WHERE id = 1"))
        .await?;
    let records = poll_n(task.as_mut(), 5).await?;
    let ops: Vec<Option<&str>> = records.iter().map(op).collect();
    assert_eq!(
        ops,
        [Some("c"), Some("u"), Some("d"), None, Some("c")],
        "{records:#?}"
    );
    // REPLICA IDENTITY FULL: the update's before is the whole old row.
    let update = records[1].value.clone().unwrap_or_default();
    assert_eq!(update["before"], json!({"id": 1, "note": "x"}));
    assert_eq!(records[2].key, Some(json!({"id": 1})));
    assert_eq!(records[2].headers[0].key, "__debezium.newkey");
    assert_eq!(records[2].headers[0].value, json!({"id": 2}));
    assert_eq!(
        records[3].key,
        Some(json!({"id": 1})),
        "the old key's tombstone"
    );
    assert_eq!(records[4].key, Some(json!({"id": 2})));
    assert_eq!(records[4].headers[0].key, "__debezium.oldkey");
    assert_eq!(records[4].headers[0].value, json!({"id": 1}));
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_toasted_value_is_the_old_value_or_debeziums_placeholder() -> TestResult {
    let db = client().await?;
    let fx = Fixture::new(&db, "toast", "id int PRIMARY KEY, big text, n int").await?;
    let full = Fixture::new(&db, "toastfull", "id int PRIMARY KEY, big text, n int").await?;
    db.batch_execute(&format!(
        "ALTER TABLE public.{} REPLICA IDENTITY FULL",
        full.name
    ))
    .await?;
    let harness = TaskHarness::new("cdc");
    let include = format!("public\\.({}|{})", fx.name, full.name);
    let config = fx.config(&[
        ("snapshot.mode", "no_data"),
        ("table.include.list", &include),
    ]);
    let (mut task, _) = harness.start(&PostgresCdcConnector, config).await?;
    // Random text does not compress: stored out of line (TOAST).
    let big = "(SELECT string_agg(md5(g::text), '') FROM generate_series(1, 400) g)";
    for t in [&fx.name, &full.name] {
        db.batch_execute(&format!("INSERT INTO public.{t} VALUES (1, {big}, 0)"))
            .await?;
        db.batch_execute(&format!("UPDATE public.{t} SET n = 1 WHERE id = 1"))
            .await?;
    }
    let records = poll_n(task.as_mut(), 4).await?;
    let original = after(&records[0], "big")
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(original.len(), 400 * 32);
    assert_eq!(after(&records[1], "big"), "__debezium_unavailable_value");
    assert_eq!(
        after(&records[3], "big").as_str(),
        Some(original.as_str()),
        "FULL: the old row's value"
    );
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncate_is_emitted_when_not_skipped() -> TestResult {
    let db = client().await?;
    let fx = Fixture::new(&db, "truncate", "id int PRIMARY KEY").await?;
    let harness = TaskHarness::new("cdc");
    let config = fx.config(&[("snapshot.mode", "no_data"), ("skipped.operations", "none")]);
    let (mut task, _) = harness.start(&PostgresCdcConnector, config).await?;
    db.batch_execute(&format!("TRUNCATE public.{}", fx.name))
        .await?;
    let records = poll_n(task.as_mut(), 1).await?;
    let value = records[0].value.clone().unwrap_or_default();
    assert_eq!(
        (value["op"].as_str(), &value["before"], &value["after"]),
        (Some("t"), &json!(null), &json!(null))
    );
    assert_eq!(records[0].key, None);
    let offset = records[0].source_offset.clone().ok_or("no offset")?;
    assert_eq!(
        offset.get("messageType").and_then(|v| v.as_str()),
        Some("COMMIT"),
        "the truncate ends its transaction: the offset after the COMMIT"
    );
    task.stop().await?;
    Ok(())
}

/// A transaction of 20 000 inserts arrives whole and in order; only its last record carries the
/// offset after the COMMIT (every other one resumes inside the transaction).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_transaction_arrives_whole_and_in_order() -> TestResult {
    const ROWS: i64 = 20_000;
    let db = client().await?;
    let fx = Fixture::new(&db, "large", "id int PRIMARY KEY, note text").await?;
    let harness = TaskHarness::new("cdc");
    let (mut task, _) = harness
        .start(
            &PostgresCdcConnector,
            fx.config(&[("snapshot.mode", "no_data")]),
        )
        .await?;
    db.batch_execute(&format!(
        "INSERT INTO public.{} SELECT g, 'row ' || g FROM generate_series(1, {ROWS}) g",
        fx.name
    ))
    .await?;
    let records = poll_n(task.as_mut(), usize::try_from(ROWS)?).await?;
    let ids: Vec<i64> = records
        .iter()
        .map(|r| after(r, "id").as_i64().unwrap_or(-1))
        .collect();
    assert_eq!(
        ids,
        (1..=ROWS).collect::<Vec<_>>(),
        "every row once, in order"
    );
    let after_commit: Vec<usize> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            r.source_offset
                .as_ref()
                .and_then(|o| o.get("messageType"))
                .and_then(|v| v.as_str())
                == Some("COMMIT")
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        after_commit,
        [records.len() - 1],
        "only the last record ends the transaction"
    );
    task.stop().await?;
    Ok(())
}

/// Four connections write at once, one small transaction per row: every row arrives exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_lose_and_repeat_nothing() -> TestResult {
    const WRITERS: i64 = 4;
    const EACH: i64 = 250;
    let db = client().await?;
    let fx = Fixture::new(&db, "writers", "id int PRIMARY KEY").await?;
    let harness = TaskHarness::new("cdc");
    let (mut task, _) = harness
        .start(
            &PostgresCdcConnector,
            fx.config(&[("snapshot.mode", "no_data")]),
        )
        .await?;
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let table = fx.name.clone();
        writers.push(tokio::spawn(async move {
            let db = client().await.map_err(|e| e.to_string())?;
            for i in 0..EACH {
                db.batch_execute(&format!(
                    "INSERT INTO public.{table} VALUES ({})",
                    w * 10_000 + i
                ))
                .await
                .map_err(|e| e.to_string())?;
            }
            Ok::<(), String>(())
        }));
    }
    for writer in writers {
        writer.await??;
    }
    let records = poll_n(task.as_mut(), usize::try_from(WRITERS * EACH)?).await?;
    let mut ids: Vec<i64> = records
        .iter()
        .map(|r| after(r, "id").as_i64().unwrap_or(-1))
        .collect();
    ids.sort_unstable();
    let mut expected: Vec<i64> = (0..WRITERS)
        .flat_map(|w| (0..EACH).map(move |i| w * 10_000 + i))
        .collect();
    expected.sort_unstable();
    assert_eq!(ids, expected, "every row exactly once");
    assert!(
        poll_for(task.as_mut(), std::time::Duration::from_millis(500))
            .await?
            .is_empty(),
        "nothing more"
    );
    task.stop().await?;
    Ok(())
}
