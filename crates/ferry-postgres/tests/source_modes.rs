//! PostgresSource against the real PostgreSQL: each mode's rows, order, partitions, offsets and resume
//! from committed offsets (driven directly, with a memory offset store).

mod source_support;

use std::time::Duration;

use ferry_api::{ConnectMap, SourceConnector};
use ferry_postgres::source::{
    PostgresSourceConnector, QueryPartition, TASK_TABLES, TablePartition,
};
use source_support::{
    Offsets, Table, TestResult, client, first_batch, ids, offset_text, poll_for, poll_n,
    table_config,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incrementing_emits_rows_in_order_and_resumes_after_the_committed_row() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "inc", "id serial primary key, name text not null").await?;
    db.batch_execute(&format!(
        "INSERT INTO {} (name) SELECT 'row ' || n FROM generate_series(1, 25) n",
        t.name
    ))
    .await?;
    let offsets = Offsets::new();
    let config = table_config(
        &t.name,
        "incrementing",
        &[("incrementing.column.name", "id"), ("batch.max.rows", "10")],
    );
    let (mut task, reader) = offsets.start(config.clone()).await?;
    let first = first_batch(task.as_mut()).await?;
    assert_eq!(
        ids(&first, "id"),
        (1..=10).collect::<Vec<_>>(),
        "batch.max.rows per poll"
    );
    let records = [first, poll_n(task.as_mut(), 15).await?].concat();
    assert_eq!(ids(&records, "id"), (1..=25).collect::<Vec<_>>());
    let partition = ConnectMap::from_serde(&TablePartition::new("public", &t.name))?;
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.source_partition.as_ref(), Some(&partition));
        assert_eq!(offset_text(r), format!("{{\"incrementing\":{}}}", i + 1));
        assert_eq!(r.topic, format!("pg-{}", t.name));
        assert_eq!(r.key, None);
    }
    assert_eq!(
        records[0].value,
        Some(serde_json::json!({"id": 1, "name": "row 1"}))
    );
    assert_eq!(reader.calls(), 1, "one offsets() call at start");
    // Only the first 17 rows were acknowledged and committed.
    offsets.commit(&records[..17]).await?;
    task.stop().await?;

    db.batch_execute(&format!(
        "INSERT INTO {} (name) VALUES ('late 1'), ('late 2')",
        t.name
    ))
    .await?;
    let (mut task, reader) = offsets.start(config).await?;
    let resumed = poll_n(task.as_mut(), 10).await?;
    assert_eq!(ids(&resumed, "id"), (18..=27).collect::<Vec<_>>());
    let more = poll_for(task.as_mut(), Duration::from_millis(300)).await?;
    assert!(
        more.is_empty(),
        "nothing after the last row: {:?}",
        ids(&more, "id")
    );
    assert_eq!(reader.calls(), 1);
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamp_incrementing_resumes_inside_a_group_of_equal_timestamps() -> TestResult {
    let db = client().await?;
    let t = Table::create(
        &db,
        "tsinc",
        "id bigint primary key, updated timestamptz not null, v text",
    )
    .await?;
    // 30 rows share one timestamp (one statement's now()), then 5 later ones.
    db.batch_execute(&format!(
        "INSERT INTO {0} SELECT n, '2024-01-01 00:00:00+00', 'a' FROM generate_series(1, 30) n;
         INSERT INTO {0} SELECT 30 + n, '2024-01-01 00:00:01.5+00', 'b' FROM generate_series(1, 5) n",
        t.name
    ))
    .await?;
    let offsets = Offsets::new();
    let config = table_config(
        &t.name,
        "timestamp+incrementing",
        &[
            ("incrementing.column.name", "id"),
            ("timestamp.column.name", "updated"),
            ("batch.max.rows", "7"),
        ],
    );
    let (mut task, _) = offsets.start(config.clone()).await?;
    let records = poll_n(task.as_mut(), 12).await?;
    assert_eq!(ids(&records, "id")[..12], (1..=12).collect::<Vec<_>>());
    assert_eq!(
        offset_text(&records[11]),
        "{\"timestamp_nanos\":0,\"incrementing\":12,\"timestamp\":1704067200000}"
    );
    offsets.commit(&records[..12]).await?;
    task.stop().await?;

    // An update moves row 3 past everything: it is read again, after the rest.
    db.batch_execute(&format!(
        "UPDATE {} SET updated = '2024-01-01 00:00:02+00', v = 'updated' WHERE id = 3",
        t.name
    ))
    .await?;
    let (mut task, _) = offsets.start(config).await?;
    let resumed = poll_n(task.as_mut(), 24).await?;
    let expected: Vec<i64> = (13..=35).chain([3]).collect();
    assert_eq!(ids(&resumed, "id"), expected);
    assert_eq!(
        offset_text(&resumed[18]),
        "{\"timestamp_nanos\":500000000,\"incrementing\":31,\"timestamp\":1704067201500}"
    );
    assert_eq!(
        resumed[23].value.as_ref().and_then(|v| v.get("v")),
        Some(&serde_json::json!("updated"))
    );
    let more = poll_for(task.as_mut(), Duration::from_millis(300)).await?;
    assert!(more.is_empty());
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamp_mode_reads_new_and_updated_rows_after_the_committed_timestamp() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "ts", "id int, ts timestamp not null").await?;
    db.batch_execute(&format!(
        "INSERT INTO {} SELECT n, timestamp '2024-03-01 10:00:00' + n * interval '1 millisecond'
         FROM generate_series(1, 20) n",
        t.name
    ))
    .await?;
    let offsets = Offsets::new();
    let config = table_config(&t.name, "timestamp", &[("timestamp.column.name", "ts")]);
    let (mut task, _) = offsets.start(config.clone()).await?;
    let records = poll_n(task.as_mut(), 20).await?;
    assert_eq!(ids(&records, "id"), (1..=20).collect::<Vec<_>>());
    assert_eq!(
        records[0].value,
        // Kafka Connect's Timestamp: ms since the epoch (the timestamp taken as UTC).
        Some(serde_json::json!({"id": 1, "ts": 1_709_287_200_001i64}))
    );
    assert_eq!(
        offset_text(&records[19]),
        "{\"timestamp_nanos\":20000000,\"timestamp\":1709287200020}"
    );
    offsets.commit(&records).await?;
    task.stop().await?;

    db.batch_execute(&format!(
        "INSERT INTO {0} VALUES (21, '2024-03-01 10:00:01');
         UPDATE {0} SET ts = '2024-03-01 10:00:02' WHERE id = 5",
        t.name
    ))
    .await?;
    let (mut task, _) = offsets.start(config).await?;
    let resumed = poll_n(task.as_mut(), 2).await?;
    assert_eq!(ids(&resumed, "id"), vec![21, 5]);
    assert!(
        poll_for(task.as_mut(), Duration::from_millis(300))
            .await?
            .is_empty()
    );
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_mode_uses_the_query_partition_and_the_prefix_as_topic() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "query", "id int primary key, kind text").await?;
    db.batch_execute(&format!(
        "INSERT INTO {} SELECT n, CASE WHEN n % 2 = 0 THEN 'even' ELSE 'odd' END FROM generate_series(1, 10) n",
        t.name
    ))
    .await?;
    let offsets = Offsets::new();
    let mut config = table_config(
        "",
        "incrementing",
        &[
            ("incrementing.column.name", "id"),
            ("topic.prefix", "evens"),
        ],
    );
    config.remove("table.whitelist");
    config.insert(
        "query".into(),
        format!(
            "SELECT id, upper(kind) AS kind FROM {} WHERE kind = 'even';",
            t.name
        ),
    );
    let connector = PostgresSourceConnector::new();
    assert!(
        connector.validate(&config).is_empty(),
        "{:?}",
        connector.validate(&config)
    );
    let tasks = connector.task_configs(&config, 4)?;
    assert_eq!(tasks.len(), 1, "a query runs in one task");
    let (mut task, reader) = offsets.start(tasks[0].clone()).await?;
    let records = poll_n(task.as_mut(), 5).await?;
    assert_eq!(ids(&records, "id"), vec![2, 4, 6, 8, 10]);
    let partition = ConnectMap::from_serde(&QueryPartition::default())?;
    assert_eq!(partition.to_string(), "{\"query\":\"query\"}");
    assert!(
        records
            .iter()
            .all(|r| r.topic == "evens" && r.source_partition.as_ref() == Some(&partition))
    );
    assert_eq!(
        records[0].value,
        Some(serde_json::json!({"id": 2, "kind": "EVEN"}))
    );
    assert_eq!(reader.asked(), vec![vec![partition.clone()]]);
    offsets.commit(&records[..3]).await?;
    task.stop().await?;
    let (mut task, _) = offsets.start(tasks[0].clone()).await?;
    assert_eq!(ids(&poll_n(task.as_mut(), 2).await?, "id"), vec![8, 10]);
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_reads_the_whole_table_every_interval_without_offsets() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "bulk", "id int, note text").await?;
    db.batch_execute(&format!(
        "INSERT INTO {} VALUES (1, 'a'), (2, 'b'), (3, null)",
        t.name
    ))
    .await?;
    let offsets = Offsets::new();
    let config = table_config(&t.name, "bulk", &[("poll.interval.ms", "200")]);
    let (mut task, reader) = offsets.start(config).await?;
    assert_eq!(
        reader.calls(),
        0,
        "bulk mode keeps no offsets and reads none"
    );
    let records = poll_n(task.as_mut(), 6).await?;
    let mut seen = ids(&records, "id");
    seen.sort_unstable();
    assert_eq!(seen, vec![1, 1, 2, 2, 3, 3], "the whole table, twice");
    assert!(
        records
            .iter()
            .all(|r| r.source_offset.is_none() && r.source_partition.is_some())
    );
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_are_spread_over_tasks_and_one_task_reads_several_tables() -> TestResult {
    let db = client().await?;
    let a = Table::create(&db, "multi_a", "id int primary key").await?;
    let b = Table::create(&db, "multi_b", "id int primary key").await?;
    let c = Table::create(&db, "multi_c", "id int primary key").await?;
    for t in [&a, &b, &c] {
        db.batch_execute(&format!(
            "INSERT INTO {} SELECT generate_series(1, 3)",
            t.name
        ))
        .await?;
    }
    let whitelist = format!("{}, public.{}, {}", a.name, b.name, c.name);
    let config = table_config(
        &whitelist,
        "incrementing",
        &[("incrementing.column.name", "id")],
    );
    let connector = PostgresSourceConnector::new();
    let tasks = connector.task_configs(&config, 2)?;
    assert_eq!(tasks.len(), 2);
    let share = |i: usize| tasks[i].get(TASK_TABLES).cloned().unwrap_or_default();
    assert_eq!(
        share(0),
        format!(
            "[{{\"schema\":\"public\",\"table\":\"{}\"}},{{\"schema\":\"public\",\"table\":\"{}\"}}]",
            a.name, c.name
        )
    );
    assert_eq!(
        share(1),
        format!("[{{\"schema\":\"public\",\"table\":\"{}\"}}]", b.name)
    );
    let offsets = Offsets::new();
    let (mut task, reader) = offsets.start(tasks[0].clone()).await?;
    let records = poll_n(task.as_mut(), 6).await?;
    let topics: std::collections::BTreeSet<&str> =
        records.iter().map(|r| r.topic.as_str()).collect();
    assert_eq!(
        topics,
        [format!("pg-{}", a.name), format!("pg-{}", c.name)]
            .iter()
            .map(String::as_str)
            .collect()
    );
    assert_eq!(reader.calls(), 1);
    assert_eq!(
        reader.asked()[0].len(),
        4,
        "two partitions per table: protocol 1 and legacy"
    );
    task.stop().await?;
    assert_eq!(
        connector.task_configs(&config, 10)?.len(),
        3,
        "at most one task per table"
    );
    Ok(())
}
