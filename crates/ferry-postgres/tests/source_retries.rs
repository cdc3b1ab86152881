//! Transient database failures are retried as Kafka Connect's JDBC source does (`connection.attempts`
//! tries, `connection.backoff.ms` apart): a terminated backend is reconnected and reading continues
//! after the last returned row; a permanent error (a dropped table) fails the task clearly, and so do
//! transient ones that outlast the attempts.

mod source_support;

use std::time::{Duration, Instant};

use source_support::{
    Logs, Offsets, Table, TestResult, client, first_batch, ids, poll_n, table_config, unique_name,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_backend_is_reconnected_and_reading_continues_without_loss() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "reconnect", "id int primary key").await?;
    db.batch_execute(&format!(
        "INSERT INTO {} SELECT generate_series(1, 10)",
        t.name
    ))
    .await?;
    let app = unique_name("app");
    let url = format!("jdbc:postgresql://127.0.0.1:5432/test?ApplicationName={app}");
    let config = table_config(
        &t.name,
        "incrementing",
        &[
            ("incrementing.column.name", "id"),
            ("connection.url", &url),
            ("batch.max.rows", "4"),
            ("connection.backoff.ms", "100"),
        ],
    );
    let (mut task, _) = Offsets::new().start(config).await?;
    assert_eq!(
        ids(&first_batch(task.as_mut()).await?, "id"),
        vec![1, 2, 3, 4]
    );
    let killed = db
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .await?;
    assert_eq!(killed, 1);
    let rest = poll_n(task.as_mut(), 6).await?;
    assert_eq!(
        ids(&rest, "id"),
        (5..=10).collect::<Vec<_>>(),
        "no loss, no duplicate"
    );
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_table_fails_the_task_with_a_clear_message() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "dropped", "id int primary key").await?;
    db.batch_execute(&format!("INSERT INTO {} VALUES (1)", t.name))
        .await?;
    let config = table_config(
        &t.name,
        "incrementing",
        &[
            ("incrementing.column.name", "id"),
            ("connection.backoff.ms", "100"),
        ],
    );
    let (mut task, _) = Offsets::new().start(config).await?;
    assert_eq!(ids(&poll_n(task.as_mut(), 1).await?, "id"), vec![1]);
    // The round's transaction may still hold the table: drop it concurrently while polling.
    let name = t.name.clone();
    let dropper = tokio::spawn(async move {
        let db = client().await.map_err(|e| e.to_string())?;
        db.batch_execute(&format!("DROP TABLE public.{name}"))
            .await
            .map_err(|e| e.to_string())
    });
    // A whitelisted table dropped while it is read is a permanent error: the task fails, naming it,
    // and is not retried (connection.backoff.ms is short, so retries would show as more polls).
    let deadline = Instant::now() + Duration::from_secs(20);
    let error = loop {
        assert!(
            Instant::now() < deadline,
            "the task did not fail after the drop"
        );
        match task.poll().await {
            Ok(records) => assert!(
                records.is_empty(),
                "rows after the drop: {:?}",
                ids(&records, "id")
            ),
            Err(e) => break e,
        }
    };
    dropper.await??;
    let message = error.to_string();
    assert!(
        message.contains(&t.name) && message.contains("dropped"),
        "the failure names the table and says it was dropped: {message}"
    );
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_is_tried_connection_attempts_times_then_fails() -> TestResult {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.local_addr()?.port()
    };
    let url = format!("jdbc:postgresql://127.0.0.1:{port}/test");
    let config = table_config(
        "orders",
        "incrementing",
        &[
            ("incrementing.column.name", "id"),
            ("connection.url", &url),
            ("connection.attempts", "2"),
            ("connection.backoff.ms", "300"),
        ],
    );
    let started = Instant::now();
    let Err(e) = Offsets::new().start(config).await else {
        panic!("started without a database");
    };
    let message = e.to_string();
    assert!(!e.is_retriable(), "{message}");
    assert!(
        message.contains("Connection refused") && message.contains("2 attempts"),
        "{message}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "the attempts are connection.backoff.ms apart"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_denied_fails_at_once_with_a_clear_message() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "noperm", "id int primary key").await?;
    let role = unique_name("role");
    db.batch_execute(&format!("CREATE ROLE {role} LOGIN"))
        .await?;
    let config = table_config(
        &t.name,
        "incrementing",
        &[
            ("incrementing.column.name", "id"),
            ("connection.user", &role),
            ("connection.backoff.ms", "5000"),
        ],
    );
    let started = Instant::now();
    let result = Offsets::new().start(config).await;
    db.batch_execute(&format!("DROP ROLE {role}")).await?;
    let Err(e) = result else {
        panic!("started without the SELECT privilege");
    };
    let message = e.to_string();
    assert!(!e.is_retriable(), "{message}");
    assert!(
        message.contains("permission denied") && message.contains(&t.name),
        "{message}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "not retried: a permission does not come back by waiting"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serialization_failure_is_retried_and_reading_goes_on() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "conflict", "id int primary key").await?;
    let flag = Table::create(&db, "conflict_flag", "on_ boolean").await?;
    let function = unique_name("conflict_fn");
    db.batch_execute(&format!(
        "INSERT INTO {t} SELECT generate_series(1, 5); INSERT INTO {flag} VALUES (true); \
         CREATE FUNCTION {function}() RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN \
           IF EXISTS (SELECT 1 FROM {flag}) THEN \
             RAISE EXCEPTION 'simulated conflict' USING ERRCODE = 'serialization_failure'; \
           END IF; RETURN true; END $$",
        t = t.name,
        flag = flag.name
    ))
    .await?;
    let query = format!("SELECT * FROM {} WHERE {function}()", t.name);
    let mut config = table_config("", "incrementing", &[("incrementing.column.name", "id")]);
    config.remove("table.whitelist");
    config.insert("query".to_owned(), query);
    config.insert("connection.backoff.ms".to_owned(), "100".to_owned());
    config.insert("connection.attempts".to_owned(), "1000".to_owned());
    let (logs, _guard) = Logs::capture();
    let (mut task, _) = Offsets::new().start(config).await?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !logs.text().contains("simulated conflict") {
        assert!(
            Instant::now() < deadline,
            "no retry logged: {}",
            logs.text()
        );
        assert!(task.poll().await?.is_empty());
    }
    assert!(
        logs.text().contains("reconnecting in 100 ms"),
        "{}",
        logs.text()
    );
    db.batch_execute(&format!("DELETE FROM {}", flag.name))
        .await?;
    let records = poll_n(task.as_mut(), 5).await?;
    assert_eq!(ids(&records, "id"), (1..=5).collect::<Vec<_>>());
    task.stop().await?;
    db.batch_execute(&format!("DROP FUNCTION {function}()"))
        .await?;
    Ok(())
}
