//! Nullable cursor columns: `validate.non.null` (Kafka Connect's key, default true) refuses at start a
//! nullable incrementing column, or timestamp columns that are all nullable, naming them; with
//! `validate.non.null=false` a row whose timestamp columns are all NULL is not read, exactly as Kafka
//! Connect's JDBC source (its `WHERE` never matches NULL), and the README says so.

mod source_support;

use std::time::Duration;

use source_support::{Offsets, Table, TestResult, client, ids, poll_for, poll_n, table_config};

async fn start_error(config: ferry_api::Config) -> String {
    match Offsets::new().start(config).await {
        Ok(_) => "started".to_owned(),
        Err(e) => e.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nullable_timestamp_column_is_refused_at_start_with_its_name() -> TestResult {
    let db = client().await?;
    let t = Table::create(
        &db,
        "nullts",
        "id bigserial primary key, ts timestamptz, v text",
    )
    .await?;
    for mode in ["timestamp", "timestamp+incrementing"] {
        let config = table_config(
            &t.name,
            mode,
            &[
                ("timestamp.column.name", "ts"),
                ("incrementing.column.name", "id"),
            ],
        );
        let message = start_error(config).await;
        assert!(
            message.contains("\"ts\"")
                && message.contains("nullable")
                && message.contains("validate.non.null"),
            "{mode}: {message}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nullable_incrementing_column_is_refused_at_start_with_its_name() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "nullinc", "seq bigint, v text").await?;
    let config = table_config(
        &t.name,
        "incrementing",
        &[("incrementing.column.name", "seq")],
    );
    let message = start_error(config).await;
    assert!(
        message.contains("\"seq\"")
            && message.contains("nullable")
            && message.contains("validate.non.null"),
        "{message}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_not_null_column_in_the_coalesce_list_is_enough_and_null_rows_are_read_by_it()
-> TestResult {
    let db = client().await?;
    let t = Table::create(
        &db,
        "coalesce",
        "id int, updated timestamptz, created timestamptz not null",
    )
    .await?;
    db.batch_execute(&format!(
        "INSERT INTO {} VALUES (1, now() - interval '2 hours', now() - interval '3 hours'), \
         (2, NULL, now() - interval '90 minutes'), (3, now() - interval '1 hour', now() - interval '3 hours')",
        t.name
    ))
    .await?;
    let config = table_config(
        &t.name,
        "timestamp",
        &[("timestamp.column.name", "updated,created")],
    );
    let (mut task, _) = Offsets::new().start(config).await?;
    let records = poll_n(task.as_mut(), 3).await?;
    assert_eq!(ids(&records, "id"), vec![1, 2, 3]);
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_validation_off_rows_with_a_null_timestamp_are_not_read_as_in_kafka_connect()
-> TestResult {
    let db = client().await?;
    let t = Table::create(
        &db,
        "nulloff",
        "id bigserial primary key, ts timestamptz, v text",
    )
    .await?;
    db.batch_execute(&format!(
        "INSERT INTO {0} (ts, v) VALUES (now() - interval '1 hour', 'a'); \
         INSERT INTO {0} (ts, v) VALUES (NULL, 'x'); \
         INSERT INTO {0} (ts, v) VALUES (now() - interval '30 minutes', 'c')",
        t.name
    ))
    .await?;
    for (mode, extra) in [
        ("timestamp", vec![]),
        (
            "timestamp+incrementing",
            vec![("incrementing.column.name", "id")],
        ),
    ] {
        let mut pairs = vec![
            ("timestamp.column.name", "ts"),
            ("validate.non.null", "false"),
        ];
        pairs.extend(extra);
        let (mut task, _) = Offsets::new()
            .start(table_config(&t.name, mode, &pairs))
            .await?;
        let records = poll_n(task.as_mut(), 2).await?;
        let more = poll_for(task.as_mut(), Duration::from_millis(500)).await?;
        assert_eq!(ids(&[records, more].concat(), "id"), vec![1, 3], "{mode}");
        task.stop().await?;
    }
    Ok(())
}
