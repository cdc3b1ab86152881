//! PostgresSource offsets: the legacy-partition fallback (Kafka Connect's "helps with upgrades"), one
//! `offsets()` call at start, `timestamp.initial`, stored offsets it cannot use, and `alter_offsets`.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod source_support;

use ferry_api::{ConnectMap, SourceConnector, Value};
use ferry_postgres::source::{LegacyTablePartition, PostgresSourceConnector, TablePartition};
use source_support::{Offsets, Table, TestResult, client, ids, offset_text, poll_n, table_config};

fn map(pairs: &[(&str, Value)]) -> ConnectMap {
    let mut m = ConnectMap::new();
    for (k, v) in pairs {
        m.insert(*k, v.clone()).unwrap();
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumes_from_an_offset_stored_under_the_legacy_table_partition() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "legacy", "id int primary key").await?;
    db.batch_execute(&format!(
        "INSERT INTO {} SELECT generate_series(1, 10)",
        t.name
    ))
    .await?;
    let offsets = Offsets::new();
    // Written by a JDBC source before offset protocol 1: {"table":"<name>"}.
    let legacy = ConnectMap::from_serde(&LegacyTablePartition {
        table: t.name.clone(),
    })?;
    assert_eq!(legacy.to_string(), format!("{{\"table\":\"{}\"}}", t.name));
    offsets
        .write(vec![(
            legacy.clone(),
            Some(map(&[("incrementing", Value::Int64(6))])),
        )])
        .await?;
    let config = table_config(
        &t.name,
        "incrementing",
        &[("incrementing.column.name", "id")],
    );
    let (mut task, reader) = offsets.start(config.clone()).await?;
    let records = poll_n(task.as_mut(), 4).await?;
    assert_eq!(
        ids(&records, "id"),
        vec![7, 8, 9, 10],
        "resumed after the legacy offset"
    );
    // One call, asking for the protocol-1 partition first, then the legacy one.
    let current = ConnectMap::from_serde(&TablePartition::new("public", &t.name))?;
    assert_eq!(reader.calls(), 1);
    assert_eq!(reader.asked(), vec![vec![current.clone(), legacy.clone()]]);
    // New offsets are written under the protocol-1 partition only.
    assert!(
        records
            .iter()
            .all(|r| r.source_partition.as_ref() == Some(&current))
    );
    offsets.commit(&records).await?;
    task.stop().await?;

    // Both stored now: the protocol-1 offset wins.
    db.batch_execute(&format!("INSERT INTO {} VALUES (11)", t.name))
        .await?;
    let (mut task, _) = offsets.start(config).await?;
    assert_eq!(ids(&poll_n(task.as_mut(), 1).await?, "id"), vec![11]);
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamp_initial_sets_where_a_table_without_offset_starts() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "initial", "id int, ts timestamptz not null").await?;
    db.batch_execute(&format!(
        "INSERT INTO {} VALUES (1, '2020-01-01 00:00:00+00'), (2, '2023-01-01 00:00:00+00'), \
         (3, now() - interval '1 hour')",
        t.name
    ))
    .await?;
    let offsets = Offsets::new();
    // 2022-01-01T00:00:00Z
    let config = table_config(
        &t.name,
        "timestamp",
        &[
            ("timestamp.column.name", "ts"),
            ("timestamp.initial", "1640995200000"),
        ],
    );
    let (mut task, _) = offsets.start(config).await?;
    assert_eq!(ids(&poll_n(task.as_mut(), 2).await?, "id"), vec![2, 3]);
    task.stop().await?;

    // -1: the database's current time; only rows written after the start arrive.
    let config = table_config(
        &t.name,
        "timestamp",
        &[("timestamp.column.name", "ts"), ("timestamp.initial", "-1")],
    );
    let (mut task, _) = Offsets::new().start(config).await?;
    db.batch_execute(&format!("INSERT INTO {} VALUES (4, now())", t.name))
        .await?;
    let records = poll_n(task.as_mut(), 1).await?;
    assert_eq!(ids(&records, "id"), vec![4]);
    assert!(offset_text(&records[0]).starts_with("{\"timestamp_nanos\":"));
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_offset_of_the_wrong_type_fails_the_start_naming_it() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "badoffset", "id int primary key").await?;
    let offsets = Offsets::new();
    let partition = ConnectMap::from_serde(&TablePartition::new("public", &t.name))?;
    offsets
        .write(vec![(
            partition,
            Some(map(&[("incrementing", Value::String("7".into()))])),
        )])
        .await?;
    let config = table_config(
        &t.name,
        "incrementing",
        &[("incrementing.column.name", "id")],
    );
    let Err(e) = offsets.start(config).await else {
        panic!("a string offset was accepted");
    };
    let message = e.to_string();
    assert!(
        message.contains(&format!("table public.{}", t.name))
            && message.contains("\"incrementing\" must be an integer")
            && !e.is_retriable(),
        "{message}"
    );
    Ok(())
}

#[test]
fn alter_offsets_checks_the_offset_shape_of_the_mode() {
    let connector = PostgresSourceConnector::new();
    let partition = map(&[
        ("protocol", Value::String("1".into())),
        ("table", Value::String("public.orders".into())),
    ]);
    let config = |mode: &str| {
        table_config(
            "orders",
            mode,
            &[
                ("incrementing.column.name", "id"),
                ("timestamp.column.name", "ts"),
            ],
        )
    };
    let alter = |mode: &str, offset: Option<ConnectMap>| {
        connector.alter_offsets(&config(mode), &[(partition.clone(), offset)])
    };
    let inc = |v: Value| Some(map(&[("incrementing", v)]));
    assert_eq!(alter("incrementing", inc(Value::Int64(5))).ok(), Some(true));
    let e = alter("incrementing", inc(Value::String("5".into()))).err();
    assert!(e.is_some_and(|e| {
        e.to_string()
            .contains("\"incrementing\" must be an integer")
    }));
    let ts = Some(map(&[
        ("timestamp", Value::Int64(1_700_000_000_000)),
        ("timestamp_nanos", Value::Int64(0)),
    ]));
    assert_eq!(alter("timestamp", ts.clone()).ok(), Some(true));
    let e = alter("incrementing", ts).err();
    assert!(e.is_some_and(|e| e.to_string().contains("does not fit mode=incrementing")));
    let bad_nanos = Some(map(&[
        ("timestamp", Value::Int64(1)),
        ("timestamp_nanos", Value::Float64(0.5)),
    ]));
    assert!(alter("timestamp", bad_nanos).is_err());
    let all = Some(map(&[
        ("timestamp_nanos", Value::Int64(0)),
        ("incrementing", Value::Int64(3)),
        ("timestamp", Value::Int64(1)),
    ]));
    assert_eq!(
        alter("timestamp+incrementing", all.clone()).ok(),
        Some(true)
    );
    assert!(alter("bulk", all).is_err(), "bulk keeps no offsets");
    // Resets are always accepted, whatever the partition.
    let odd = map(&[("filename", Value::String("x".into()))]);
    assert_eq!(
        connector
            .alter_offsets(&config("incrementing"), &[(odd.clone(), None)])
            .ok(),
        Some(true)
    );
    let e = connector
        .alter_offsets(&config("incrementing"), &[(odd, inc(Value::Int64(1)))])
        .err();
    assert!(e.is_some_and(|e| e.to_string().contains("not a JDBC source partition")));
}

#[test]
fn validate_reports_one_issue_per_bad_key() {
    let connector = PostgresSourceConnector::new();
    let issues = |pairs: &[(&str, &str)]| {
        let mut config = table_config(
            "orders",
            "incrementing",
            &[("incrementing.column.name", "id")],
        );
        for (k, v) in pairs {
            if v.is_empty() {
                config.remove(*k);
            } else {
                config.insert((*k).to_owned(), (*v).to_owned());
            }
        }
        connector
            .validate(&config)
            .into_iter()
            .map(|i| format!("{}: {}", i.key, i.message))
            .collect::<Vec<_>>()
    };
    assert!(issues(&[]).is_empty(), "{:?}", issues(&[]));
    let found = issues(&[
        ("connection.url", "jdbc:mysql://localhost/db"),
        ("mode", "timestamp"),
        ("batch.max.rows", "0"),
        ("query", "SELECT 1"),
    ]);
    assert_eq!(found.len(), 4, "{found:?}");
    assert!(
        found[0].starts_with("connection.url: jdbc:mysql: is not supported"),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|i| i.starts_with("timestamp.column.name: is required with mode=timestamp"))
    );
    assert!(
        found
            .iter()
            .any(|i| i.starts_with("query: set either table.whitelist or query"))
    );
    assert!(
        found
            .iter()
            .any(|i| i.starts_with("batch.max.rows: 0 is too small"))
    );
    let found = issues(&[("table.whitelist", "a.b.c"), ("mode", "upsert")]);
    assert_eq!(found.len(), 2, "{found:?}");
    let found = issues(&[(
        "connection.url",
        "jdbc:postgresql://h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
    )]);
    assert!(
        found[0].contains("sslrootcert=/nonexistent/ca.pem: cannot be read"),
        "{found:?}"
    );
}
