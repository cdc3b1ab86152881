//! `db.timezone` (Kafka Connect's key, default UTC): the zone of `timestamp without time zone` values,
//! in the query's bounds and in the offsets (which hold instants, as Kafka Connect's do). One zone east
//! of UTC and one west, with rows written as local time an hour ago and an hour ahead.

mod source_support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use source_support::{Offsets, Table, TestResult, client, ids, poll_for, poll_n, table_config};

async fn local_rows_are_read_by_their_instant(zone: &str, mode: &str) -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "tz", "id bigint not null, ts timestamp not null").await?;
    let writer = client().await?;
    writer
        .batch_execute(&format!(
            "SET timezone = '{zone}'; INSERT INTO {0} VALUES (1, localtimestamp - interval '1 hour'), \
             (2, localtimestamp + interval '1 hour')",
            t.name
        ))
        .await?;
    let config = table_config(
        &t.name,
        mode,
        &[
            ("timestamp.column.name", "ts"),
            ("incrementing.column.name", "id"),
            ("db.timezone", zone),
        ],
    );
    let (mut task, _) = Offsets::new().start(config).await?;
    let records = poll_n(task.as_mut(), 1).await?;
    let more = poll_for(task.as_mut(), Duration::from_millis(500)).await?;
    assert_eq!(
        ids(&[records.clone(), more].concat(), "id"),
        vec![1],
        "{zone}: the row an hour ago is read, the one an hour ahead is not yet"
    );
    let offset_ms = records[0]
        .source_offset
        .as_ref()
        .and_then(|o| o.get("timestamp"))
        .and_then(|v| v.as_i64())
        .unwrap_or_default();
    let hour_ago =
        i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis())? - 3_600_000;
    assert!(
        (offset_ms - hour_ago).abs() < 120_000,
        "{zone}: the offset is the row's instant ({offset_ms} ms), an hour ago ({hour_ago} ms)"
    );
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn east_of_utc_kathmandu() -> TestResult {
    local_rows_are_read_by_their_instant("Asia/Kathmandu", "timestamp").await?;
    local_rows_are_read_by_their_instant("Asia/Kathmandu", "timestamp+incrementing").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn west_of_utc_new_york() -> TestResult {
    local_rows_are_read_by_their_instant("America/New_York", "timestamp").await?;
    local_rows_are_read_by_their_instant("America/New_York", "timestamp+incrementing").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_zone_fails_the_start_naming_it() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "tzbad", "id bigint not null, ts timestamp not null").await?;
    let config = table_config(
        &t.name,
        "timestamp",
        &[
            ("timestamp.column.name", "ts"),
            ("db.timezone", "Mars/Olympus"),
        ],
    );
    let message = match Offsets::new().start(config).await {
        Ok(_) => "started".to_owned(),
        Err(e) => e.to_string(),
    };
    assert!(
        message.contains("db.timezone") && message.contains("Mars/Olympus"),
        "{message}"
    );
    Ok(())
}
