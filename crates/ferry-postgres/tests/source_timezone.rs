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

/// Wall-clock times (winter, summer, New York's spring-forward gap and fall-back overlap) in a
/// `timestamp` column, and one instant in a `timestamptz` column.
const WALLS: &str = "(1, '2024-01-01 10:00:00.123456', '2024-05-01 12:00:00.123456+00'), \
     (2, '2024-07-01 10:00:00', NULL), (3, '2024-03-10 02:30:00', NULL), (4, '2024-11-03 01:30:00', NULL)";

/// The `ts` and `tstz` values of the rows of [`WALLS`] read with `db.timezone=zone` and
/// `timestamp.granularity=granularity`.
async fn values_read_in(
    zone: &str,
    granularity: &str,
) -> Result<Vec<(serde_json::Value, serde_json::Value)>, Box<dyn std::error::Error>> {
    let db = client().await?;
    let t = Table::create(
        &db,
        "tzval",
        "id bigint not null, ts timestamp, tstz timestamptz",
    )
    .await?;
    db.batch_execute(&format!("INSERT INTO {} VALUES {WALLS}", t.name))
        .await?;
    let config = table_config(
        &t.name,
        "incrementing",
        &[
            ("incrementing.column.name", "id"),
            ("db.timezone", zone),
            ("timestamp.granularity", granularity),
        ],
    );
    let (mut task, _) = Offsets::new().start(config).await?;
    let records = poll_n(task.as_mut(), 4).await?;
    task.stop().await?;
    Ok(records
        .iter()
        .map(|r| {
            let v = r.value.clone().unwrap_or_default();
            (v["ts"].clone(), v["tstz"].clone())
        })
        .collect())
}

/// Kafka Connect's JDBC source reads a `timestamp` with a `Calendar` in `db.timezone`: the value is the
/// instant of that wall-clock time there. A time in the spring-forward gap is read as standard time
/// (02:30 EST, i.e. 03:30 EDT) and one in the fall-back overlap as standard time too (01:30 EST), as
/// `GregorianCalendar` (and PostgreSQL's `AT TIME ZONE`) resolve them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamp_values_are_wall_times_in_db_timezone() -> TestResult {
    let tstz = serde_json::json!(1_714_564_800_123i64);
    for (zone, expected) in [
        (
            "UTC",
            [
                1_704_103_200_123i64,
                1_719_828_000_000,
                1_710_037_800_000,
                1_730_597_400_000,
            ],
        ),
        (
            "America/New_York",
            [
                1_704_121_200_123,
                1_719_842_400_000,
                1_710_055_800_000,
                1_730_615_400_000,
            ],
        ),
        (
            "Asia/Kathmandu",
            [
                1_704_082_500_123,
                1_719_807_300_000,
                1_710_017_100_000,
                1_730_576_700_000,
            ],
        ),
    ] {
        let values = values_read_in(zone, "connect_logical").await?;
        let ts: Vec<serde_json::Value> = values.iter().map(|(ts, _)| ts.clone()).collect();
        let expected: Vec<serde_json::Value> =
            expected.iter().map(|ms| serde_json::json!(ms)).collect();
        assert_eq!(ts, expected, "{zone}: the instants of the wall-clock times");
        assert_eq!(
            values[0].1, tstz,
            "{zone}: a timestamptz is an instant already"
        );
    }
    Ok(())
}

/// `nanos_iso_datetime_string` formats the instant in `db.timezone` (the JDBC source's
/// `DateTimeUtils.toIsoDateTimeString(timestamp, tz)`): a `timestamp` shows its own wall-clock time
/// (a gap time moved forward), a `timestamptz` its instant's wall-clock time there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iso_strings_are_in_db_timezone() -> TestResult {
    let values = values_read_in("America/New_York", "nanos_iso_datetime_string").await?;
    let ts: Vec<serde_json::Value> = values.iter().map(|(ts, _)| ts.clone()).collect();
    assert_eq!(
        ts,
        vec![
            serde_json::json!("2024-01-01T10:00:00.123456000"),
            serde_json::json!("2024-07-01T10:00:00.000000000"),
            serde_json::json!("2024-03-10T03:30:00.000000000"),
            serde_json::json!("2024-11-03T01:30:00.000000000"),
        ]
    );
    assert_eq!(
        values[0].1,
        serde_json::json!("2024-05-01T08:00:00.123456000")
    );
    let utc = values_read_in("UTC", "nanos_iso_datetime_string").await?;
    assert_eq!(utc[2].0, serde_json::json!("2024-03-10T02:30:00.000000000"));
    assert_eq!(utc[0].1, serde_json::json!("2024-05-01T12:00:00.123456000"));
    Ok(())
}

/// Beyond the zone conversion's reach: `infinity` keeps the JDBC driver's value and the largest
/// `timestamp` (294276 AD) is converted exactly, not clamped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infinity_and_the_far_range_survive_the_zone() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "tzfar", "id bigint not null, ts timestamp").await?;
    db.batch_execute(&format!(
        "INSERT INTO {} VALUES (1, 'infinity'), (2, '-infinity'), (3, '294276-12-31 23:59:59.999999')",
        t.name
    ))
    .await?;
    let config = table_config(
        &t.name,
        "incrementing",
        &[
            ("incrementing.column.name", "id"),
            ("db.timezone", "America/New_York"),
        ],
    );
    let (mut task, _) = Offsets::new().start(config).await?;
    let records = poll_n(task.as_mut(), 3).await?;
    task.stop().await?;
    let ts: Vec<serde_json::Value> = records
        .iter()
        .map(|r| r.value.clone().unwrap_or_default()["ts"].clone())
        .collect();
    // 294276-12-31T23:59:59.999Z is 9_224_318_015_999_999 ms; New York is UTC-5 in December.
    assert_eq!(
        ts,
        vec![
            serde_json::json!(9_223_372_036_825_200_000i64),
            serde_json::json!(-9_223_372_036_832_400_000i64),
            serde_json::json!(9_224_318_015_999_999i64 + 18_000_000),
        ]
    );
    Ok(())
}

/// In `timestamp` mode the record's value and its offset name the same instant, for a table and for
/// a `query` (whose columns the catalog does not describe).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn value_and_offset_agree_in_timestamp_mode() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "tzagree", "id bigint not null, ts timestamp not null").await?;
    db.batch_execute(&format!(
        "INSERT INTO {} VALUES (1, '2024-01-01 10:00:00.5'), (2, '2024-07-01 10:00:00')",
        t.name
    ))
    .await?;
    let mut by_query = table_config(
        &t.name,
        "timestamp",
        &[
            ("timestamp.column.name", "ts"),
            ("db.timezone", "Asia/Kathmandu"),
        ],
    );
    by_query.remove("table.whitelist");
    by_query.insert("query".to_owned(), format!("SELECT * FROM {}", t.name));
    by_query.insert("topic.prefix".to_owned(), "pg-q".to_owned());
    let by_table = table_config(
        &t.name,
        "timestamp",
        &[
            ("timestamp.column.name", "ts"),
            ("db.timezone", "Asia/Kathmandu"),
        ],
    );
    for config in [by_table, by_query] {
        let (mut task, _) = Offsets::new().start(config).await?;
        let records = poll_n(task.as_mut(), 2).await?;
        task.stop().await?;
        let pairs: Vec<(Option<i64>, Option<i64>)> = records
            .iter()
            .map(|r| {
                (
                    r.value.as_ref().and_then(|v| v["ts"].as_i64()),
                    r.source_offset
                        .as_ref()
                        .and_then(|o| o.get("timestamp"))
                        .and_then(|v| v.as_i64()),
                )
            })
            .collect();
        assert_eq!(
            pairs,
            vec![
                (Some(1_704_082_500_500), Some(1_704_082_500_500)),
                (Some(1_719_807_300_000), Some(1_719_807_300_000)),
            ]
        );
    }
    Ok(())
}
