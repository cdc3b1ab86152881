//! Rows committed late with an older timestamp, and `timestamp.delay.interval.ms` (Kafka Connect's
//! documented behaviour, which is Ferry's with `ferry.late.commit.max.wait.ms=0`, or once a
//! transaction has been waited for that long): the timestamp modes read only rows older than the
//! database's time minus the delay, and never go back. A transaction that commits after the position
//! passed its rows' timestamps is skipped; a delay longer than the transaction lets it commit before
//! its rows are due. (The default, which waits for open transactions: source_late_commits.rs.)

mod source_support;

use std::time::Duration;

use source_support::{Offsets, Table, TestResult, client, ids, poll_for, poll_n, table_config};

/// Starts a transaction that inserts row `id` with `ts = now()` (the transaction's start time) and
/// keeps it open; returns the client holding it.
async fn open_transaction(
    table: &str,
    id: i64,
) -> Result<tokio_postgres::Client, Box<dyn std::error::Error>> {
    let late = client().await?;
    late.batch_execute(&format!(
        "BEGIN; INSERT INTO {table} (id, ts) VALUES ({id}, now())"
    ))
    .await?;
    Ok(late)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_guard_or_a_delay_a_row_committed_after_a_newer_one_was_read_is_skipped()
-> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "late0", "id int, ts timestamptz not null").await?;
    let offsets = Offsets::new();
    let config = table_config(
        &t.name,
        "timestamp",
        &[
            ("timestamp.column.name", "ts"),
            ("ferry.late.commit.max.wait.ms", "0"),
        ],
    );
    let (mut task, _) = offsets.start(config).await?;

    let late = open_transaction(&t.name, 1).await?;
    tokio::time::sleep(Duration::from_millis(50)).await;
    db.batch_execute(&format!(
        "INSERT INTO {} (id, ts) VALUES (2, now())",
        t.name
    ))
    .await?;
    assert_eq!(ids(&poll_n(task.as_mut(), 1).await?, "id"), vec![2]);
    // Row 1 commits now, with a timestamp older than the position (row 2's).
    late.batch_execute("COMMIT").await?;
    db.batch_execute(&format!(
        "INSERT INTO {} (id, ts) VALUES (3, now())",
        t.name
    ))
    .await?;
    let later = poll_n(task.as_mut(), 1).await?;
    let more = poll_for(task.as_mut(), Duration::from_millis(500)).await?;
    assert_eq!(
        ids(&[later, more].concat(), "id"),
        vec![3],
        "the late row 1 is skipped (documented JDBC source behaviour)"
    );
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delay_longer_than_the_transaction_delivers_the_late_row_in_timestamp_order() -> TestResult
{
    let db = client().await?;
    let t = Table::create(&db, "late1", "id int, ts timestamptz not null").await?;
    let offsets = Offsets::new();
    let config = table_config(
        &t.name,
        "timestamp",
        &[
            ("timestamp.column.name", "ts"),
            ("timestamp.delay.interval.ms", "1500"),
            ("ferry.late.commit.max.wait.ms", "0"),
        ],
    );
    let (mut task, _) = offsets.start(config).await?;

    let late = open_transaction(&t.name, 1).await?;
    tokio::time::sleep(Duration::from_millis(50)).await;
    db.batch_execute(&format!(
        "INSERT INTO {} (id, ts) VALUES (2, now())",
        t.name
    ))
    .await?;
    // Row 2 is committed but younger than the delay: not read yet.
    let early = poll_for(task.as_mut(), Duration::from_millis(300)).await?;
    assert!(
        early.is_empty(),
        "rows younger than the delay wait: {:?}",
        ids(&early, "id")
    );
    late.batch_execute("COMMIT").await?;
    let records = poll_n(task.as_mut(), 2).await?;
    assert_eq!(
        ids(&records, "id"),
        vec![1, 2],
        "the late row arrives, in timestamp order"
    );
    task.stop().await?;

    // A row committed with a timestamp older than the stored position is skipped, delay or not;
    // a current one arrives once the delay has passed.
    offsets.commit(&records).await?;
    db.batch_execute(&format!(
        "INSERT INTO {0} (id, ts) VALUES (3, now() - interval '1 hour'), (4, now())",
        t.name
    ))
    .await?;
    let config = table_config(
        &t.name,
        "timestamp",
        &[
            ("timestamp.column.name", "ts"),
            ("timestamp.delay.interval.ms", "1500"),
            ("ferry.late.commit.max.wait.ms", "0"),
        ],
    );
    let (mut task, _) = offsets.start(config).await?;
    let records = poll_n(task.as_mut(), 1).await?;
    let more = poll_for(task.as_mut(), Duration::from_millis(300)).await?;
    assert_eq!(ids(&[records, more].concat(), "id"), vec![4]);
    task.stop().await?;
    Ok(())
}
