//! PostgresSource failures and cancel safety: an unreachable database and a lost connection fail the
//! task with a message naming the server, the cause and what to do; polls dropped at any await lose
//! and repeat nothing.

mod source_support;

use std::future::Future;
use std::task::Poll;
use std::time::{Duration, Instant};

use source_support::{
    Offsets, Table, TestResult, client, first_batch, ids, table_config, unique_name,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_fails_the_start_with_the_server_and_the_cause() -> TestResult {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.local_addr()?.port()
    };
    let url = format!("jdbc:postgresql://127.0.0.1:{port}/test?password=hunter2");
    let config = table_config(
        "orders",
        "incrementing",
        &[
            ("incrementing.column.name", "id"),
            ("connection.url", &url),
            ("connection.attempts", "1"),
        ],
    );
    let Err(e) = Offsets::new().start(config).await else {
        panic!("started without a database");
    };
    let message = e.to_string();
    assert!(!e.is_retriable(), "fails the task: {message}");
    for fragment in [
        format!("cannot connect to PostgreSQL at 127.0.0.1:{port}/test as user postgres"),
        "Connection refused".to_owned(),
        "restart the connector".to_owned(),
    ] {
        assert!(message.contains(&fragment), "{fragment:?} in {message}");
    }
    assert!(!message.contains("hunter2"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_one_connection_attempt_a_connection_lost_while_reading_fails_the_poll_clearly()
-> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "lost", "id int primary key").await?;
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
            ("connection.attempts", "1"),
        ],
    );
    let (mut task, _) = Offsets::new().start(config).await?;
    assert_eq!(
        ids(&first_batch(task.as_mut()).await?, "id"),
        vec![1, 2, 3, 4]
    );
    db.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
        &[&app],
    )
    .await?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let error = loop {
        match task.poll().await {
            Err(e) => break e,
            Ok(_) if Instant::now() < deadline => continue,
            Ok(records) => panic!("still polling after the connection was terminated: {records:?}"),
        }
    };
    let message = error.to_string();
    assert!(!error.is_retriable());
    assert!(
        message.contains("PostgreSQL at 127.0.0.1:5432/test as user postgres")
            && (message.contains("lost the connection")
                || message.contains("terminating connection"))
            && message.contains("restart"),
        "{message}"
    );
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polls_dropped_at_any_await_neither_lose_nor_repeat_rows() -> TestResult {
    let db = client().await?;
    let t = Table::create(
        &db,
        "cancel",
        "id int primary key, ts timestamptz not null default now()",
    )
    .await?;
    db.batch_execute(&format!(
        "INSERT INTO {} (id) SELECT generate_series(1, 2000)",
        t.name
    ))
    .await?;
    // Whether polls get dropped at an await depends on how fast the database answers (a poll served
    // from rows already fetched finishes at once): checked over both modes together.
    let mut dropped_in_all = 0;
    for mode in ["incrementing", "timestamp+incrementing"] {
        let config = table_config(
            &t.name,
            mode,
            &[
                ("incrementing.column.name", "id"),
                ("timestamp.column.name", "ts"),
                ("batch.max.rows", "20"),
                ("poll.interval.ms", "10"),
            ],
        );
        let (mut task, _) = Offsets::new().start(config).await?;
        let mut got = Vec::new();
        let mut dropped = 0;
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut step = 0u64;
        let mut drop_next = false;
        while got.len() < 2000 {
            assert!(
                Instant::now() < deadline,
                "{mode}: only {} rows arrived",
                got.len()
            );
            step += 1;
            // Every other poll is polled only a few times, yielding in between, then dropped: at
            // whichever await it had reached (BEGIN, now(), prepare, DECLARE, FETCH, COMMIT). A poll
            // meant to be dropped that finished within its budget (a fast database, or a poll with
            // nothing to do) makes the next one a drop attempt too, so drops happen however fast the
            // database answers (the retry drops at the first await reached).
            let budget = if drop_next {
                1
            } else if step.is_multiple_of(2) {
                1 + step % 5
            } else {
                u64::MAX
            };
            let mut future = std::pin::pin!(task.poll());
            let mut finished = None;
            let mut polls = 0;
            while polls < budget {
                polls += 1;
                let poll = std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await;
                if let Poll::Ready(result) = poll {
                    finished = Some(result);
                    break;
                }
                tokio::task::yield_now().await;
            }
            drop_next = budget != u64::MAX && finished.is_some();
            match finished {
                Some(records) => got.extend(ids(&records?, "id")),
                None => dropped += 1,
            }
        }
        assert_eq!(
            got,
            (1..=2000).collect::<Vec<_>>(),
            "{mode}: every row once, in order"
        );
        eprintln!("{mode}: {dropped} polls dropped at an await");
        dropped_in_all += dropped;
        task.stop().await?;
    }
    assert!(
        dropped_in_all > 10,
        "the test dropped polls ({dropped_in_all} over both modes)"
    );
    Ok(())
}
