//! Kafka Connect JDBC source keys with their Confluent meaning: `table.blacklist`, `table.types`,
//! `schema.pattern`, `catalog.pattern`, `table.poll.interval.ms` (tables created while running),
//! `query.suffix`, `transaction.isolation.mode`, `dialect.name`, and the connector's task split
//! without a whitelist.

mod source_support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use ferry_api::{Config, SourceConnector, SourceTask};
use ferry_postgres::source::{PostgresSourceConnector, TASK_SHARE};
use source_support::{
    JDBC_URL, Offsets, SchemaGuard, TestResult, client, config, poll_for, poll_n, table_config,
};

/// A connector config reading the schema `schema` by discovery (no whitelist), bulk by default.
fn discover(schema: &str, extra: &[(&str, &str)]) -> Config {
    let mut c = config(&[
        ("connection.url", JDBC_URL),
        ("connection.user", "postgres"),
        ("mode", "bulk"),
        ("schema.pattern", schema),
        ("topic.prefix", "pg-"),
        ("poll.interval.ms", "50"),
    ]);
    for (k, v) in extra {
        c.insert((*k).to_owned(), (*v).to_owned());
    }
    c
}

fn topics(records: &[ferry_api::SourceRecord]) -> BTreeSet<String> {
    records.iter().map(|r| r.topic.clone()).collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// Polls until the records' topics are exactly `want` (fails after 20 s).
async fn poll_until_topics(
    task: &mut dyn SourceTask,
    want: &BTreeSet<String>,
) -> Result<Vec<ferry_api::SourceRecord>, Box<dyn std::error::Error>> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut out = Vec::new();
    while !topics(&out).is_superset(want) {
        if Instant::now() > deadline {
            return Err(format!("topics {:?}, expected {want:?}", topics(&out)).into());
        }
        out.extend(task.poll().await?);
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_whitelist_every_table_of_the_schema_but_the_blacklisted_is_read() -> TestResult {
    let db = client().await?;
    let s = SchemaGuard::create(&db, "black").await?;
    db.batch_execute(&format!(
        "CREATE TABLE {0}.a (id int); CREATE TABLE {0}.b (id int); CREATE TABLE {0}.c (id int); \
         CREATE VIEW {0}.v AS SELECT 1 AS id; INSERT INTO {0}.a VALUES (1); INSERT INTO {0}.b VALUES (2); \
         INSERT INTO {0}.c VALUES (3)",
        s.name
    ))
    .await?;
    let (mut task, _) = Offsets::new()
        .start(discover(
            &s.name,
            &[("table.blacklist", &format!("{}.b", s.name))],
        ))
        .await?;
    let mut records = poll_until_topics(task.as_mut(), &set(&["pg-a", "pg-c"])).await?;
    records.extend(poll_for(task.as_mut(), Duration::from_millis(300)).await?);
    task.stop().await?;
    assert_eq!(
        topics(&records),
        set(&["pg-a", "pg-c"]),
        "b is blacklisted, v is a view"
    );
    // A bare name blacklists the table in every schema.
    let (mut task, _) = Offsets::new()
        .start(discover(&s.name, &[("table.blacklist", "a, c")]))
        .await?;
    let records = poll_for(task.as_mut(), Duration::from_millis(500)).await?;
    task.stop().await?;
    assert_eq!(topics(&records), set(&["pg-b"]));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_types_view_reads_views_and_not_tables() -> TestResult {
    let db = client().await?;
    let s = SchemaGuard::create(&db, "types").await?;
    db.batch_execute(&format!(
        "CREATE TABLE {0}.t (id int); INSERT INTO {0}.t VALUES (1); \
         CREATE VIEW {0}.v AS SELECT id * 10 AS id FROM {0}.t",
        s.name
    ))
    .await?;
    let (mut task, _) = Offsets::new()
        .start(discover(&s.name, &[("table.types", "VIEW")]))
        .await?;
    let mut records = poll_n(task.as_mut(), 1).await?;
    records.extend(poll_for(task.as_mut(), Duration::from_millis(300)).await?);
    task.stop().await?;
    assert_eq!(topics(&records), set(&["pg-v"]));
    assert_eq!(records[0].value, Some(serde_json::json!({"id": 10})));
    // Both, and a whitelisted view is read only when VIEW is among the types (as the JDBC source).
    let (mut task, _) = Offsets::new()
        .start(discover(&s.name, &[("table.types", "TABLE,VIEW")]))
        .await?;
    let records = poll_until_topics(task.as_mut(), &set(&["pg-t", "pg-v"])).await?;
    task.stop().await?;
    assert_eq!(topics(&records), set(&["pg-t", "pg-v"]));
    let mut whitelisted = discover(&s.name, &[]);
    whitelisted.insert("table.whitelist".into(), format!("{}.v", s.name));
    let (mut task, _) = Offsets::new().start(whitelisted).await?;
    let records = poll_for(task.as_mut(), Duration::from_millis(400)).await?;
    task.stop().await?;
    assert!(records.is_empty(), "a view is not a TABLE: {records:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_created_after_start_are_read_within_table_poll_interval() -> TestResult {
    let db = client().await?;
    let s = SchemaGuard::create(&db, "late").await?;
    db.batch_execute(&format!(
        "CREATE TABLE {0}.first (id serial primary key); INSERT INTO {0}.first DEFAULT VALUES",
        s.name
    ))
    .await?;
    // No whitelist: any new table of the schema.
    let (mut task, _) = Offsets::new()
        .start(discover(
            &s.name,
            &[
                ("mode", "incrementing"),
                ("incrementing.column.name", "id"),
                ("table.poll.interval.ms", "200"),
            ],
        ))
        .await?;
    poll_until_topics(task.as_mut(), &set(&["pg-first"])).await?;
    db.batch_execute(&format!(
        "CREATE TABLE {0}.second (id serial primary key); INSERT INTO {0}.second DEFAULT VALUES",
        s.name
    ))
    .await?;
    let records = poll_until_topics(task.as_mut(), &set(&["pg-second"])).await?;
    assert_eq!(records.len(), 1);
    // A dropped table is no longer read (the task keeps running).
    db.batch_execute(&format!("DROP TABLE {0}.first", s.name))
        .await?;
    poll_for(task.as_mut(), Duration::from_millis(600)).await?;
    task.stop().await?;

    // A whitelisted table that does not exist yet is read once it does.
    let whitelist = format!("{0}.third", s.name);
    let (mut task, _) = Offsets::new()
        .start(table_config(
            &whitelist,
            "incrementing",
            &[
                ("incrementing.column.name", "id"),
                ("table.poll.interval.ms", "200"),
            ],
        ))
        .await?;
    assert!(
        poll_for(task.as_mut(), Duration::from_millis(300))
            .await?
            .is_empty()
    );
    db.batch_execute(&format!(
        "CREATE TABLE {whitelist} (id serial primary key); INSERT INTO {whitelist} DEFAULT VALUES"
    ))
    .await?;
    let records = poll_until_topics(task.as_mut(), &set(&["pg-third"])).await?;
    task.stop().await?;
    assert_eq!(records.len(), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_whitelist_tasks_share_the_tables_each_read_by_one() -> TestResult {
    let db = client().await?;
    let s = SchemaGuard::create(&db, "share").await?;
    let mut ddl = String::new();
    for i in 0..8 {
        ddl.push_str(&format!(
            "CREATE TABLE {0}.t{i} (id int); INSERT INTO {0}.t{i} VALUES ({i});",
            s.name
        ));
    }
    db.batch_execute(&ddl).await?;
    let connector = PostgresSourceConnector::new();
    let tasks = connector.task_configs(&discover(&s.name, &[]), 3)?;
    assert_eq!(tasks.len(), 3);
    assert_eq!(
        tasks
            .iter()
            .map(|t| t.get(TASK_SHARE).cloned())
            .collect::<Vec<_>>(),
        vec![Some("0/3".into()), Some("1/3".into()), Some("2/3".into())]
    );
    let mut seen = Vec::new();
    for task_config in tasks {
        let (mut task, _) = Offsets::new().start(task_config).await?;
        let records = poll_for(task.as_mut(), Duration::from_millis(400)).await?;
        task.stop().await?;
        seen.extend(topics(&records));
    }
    seen.sort();
    let expected: Vec<String> = (0..8).map(|i| format!("pg-t{i}")).collect();
    assert_eq!(seen, expected, "every table read by exactly one task");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_suffix_and_transaction_isolation_mode_reach_the_database() -> TestResult {
    let query = "SELECT current_setting('transaction_isolation') AS iso, n AS id FROM generate_series(1, 3) n";
    let mut c = config(&[
        ("connection.url", JDBC_URL),
        ("connection.user", "postgres"),
        ("mode", "bulk"),
        ("query", query),
        ("query.suffix", "LIMIT 2"),
        ("transaction.isolation.mode", "SERIALIZABLE"),
        ("topic.prefix", "q"),
        ("poll.interval.ms", "50"),
    ]);
    let (mut task, _) = Offsets::new().start(c.clone()).await?;
    let mut records = poll_n(task.as_mut(), 2).await?;
    records.extend(poll_for(task.as_mut(), Duration::from_millis(20)).await?);
    task.stop().await?;
    assert_eq!(
        records[0].value,
        Some(serde_json::json!({"iso": "serializable", "id": 1}))
    );
    // One round returns two rows (LIMIT 2), and rounds repeat in bulk mode.
    assert!(
        records
            .iter()
            .all(|r| r.value.as_ref().map(|v| v["id"] != 3).unwrap_or(false))
    );
    c.insert(
        "transaction.isolation.mode".into(),
        "REPEATABLE_READ".into(),
    );
    let (mut task, _) = Offsets::new().start(c).await?;
    let records = poll_n(task.as_mut(), 1).await?;
    task.stop().await?;
    assert_eq!(
        records[0].value.as_ref().map(|v| v["iso"].clone()),
        Some(serde_json::json!("repeatable read"))
    );
    Ok(())
}

#[test]
fn validate_refuses_what_the_jdbc_source_refuses_and_accepts_its_keys() {
    let connector = PostgresSourceConnector::new();
    let base = || discover("public", &[]);
    let issues = |extra: &[(&str, &str)]| {
        let mut c = base();
        for (k, v) in extra {
            c.insert((*k).to_owned(), (*v).to_owned());
        }
        connector
            .validate(&c)
            .into_iter()
            .map(|i| format!("{}: {}", i.key, i.message))
            .collect::<Vec<_>>()
    };
    assert_eq!(issues(&[]), Vec::<String>::new());
    let both = issues(&[("table.whitelist", "a"), ("table.blacklist", "b")]);
    assert!(
        both.iter()
            .any(|i| i.starts_with("table.blacklist:") && i.contains("not both")),
        "{both:?}"
    );
    let snapshot = issues(&[("transaction.isolation.mode", "SQL_SERVER_SNAPSHOT")]);
    assert!(
        snapshot.iter().any(|i| i.contains("SQL Server")),
        "{snapshot:?}"
    );
    let dialect = issues(&[("dialect.name", "MySqlDatabaseDialect")]);
    assert!(
        dialect
            .iter()
            .any(|i| i.starts_with("dialect.name:") && i.contains("PostgreSQL only")),
        "{dialect:?}"
    );
    assert_eq!(
        issues(&[
            ("dialect.name", "PostgreSqlDatabaseDialect"),
            ("catalog.pattern", "x")
        ]),
        Vec::<String>::new()
    );
    assert!(!issues(&[("numeric.mapping", "exact")]).is_empty());
    assert!(!issues(&[("timestamp.granularity", "seconds")]).is_empty());
    assert!(!issues(&[("table.types", "SYNONYM")]).is_empty());
    assert!(!issues(&[("table.poll.interval.ms", "0")]).is_empty());
    assert_eq!(
        issues(&[
            ("numeric.mapping", "BEST_FIT"),
            ("table.types", "table, view")
        ]),
        Vec::<String>::new()
    );
    let keys: Vec<&str> = connector.config_keys().iter().map(|k| k.name).collect();
    for key in [
        "table.blacklist",
        "table.types",
        "schema.pattern",
        "catalog.pattern",
        "table.poll.interval.ms",
        "numeric.mapping",
        "numeric.precision.mapping",
        "timestamp.granularity",
        "query.suffix",
        "transaction.isolation.mode",
        "dialect.name",
        "timestamp.initial",
    ] {
        assert!(keys.contains(&key), "{key} is a known key");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_incrementing_column_name_uses_the_tables_serial_or_identity_column() -> TestResult
{
    let db = client().await?;
    let s = SchemaGuard::create(&db, "autoinc").await?;
    db.batch_execute(&format!(
        "CREATE TABLE {0}.ser (note text, id serial); \
         CREATE TABLE {0}.ident (k int generated always as identity, note text); \
         CREATE TABLE {0}.plain (id int, note text); \
         INSERT INTO {0}.ser (note) VALUES ('a'), ('b'); INSERT INTO {0}.ident (note) VALUES ('c')",
        s.name
    ))
    .await?;
    for (table, column, count) in [("ser", "id", 2), ("ident", "k", 1)] {
        let offsets = Offsets::new();
        let (mut task, _) = offsets
            .start(table_config(
                &format!("{}.{table}", s.name),
                "incrementing",
                &[],
            ))
            .await?;
        let records = poll_n(task.as_mut(), count).await?;
        task.stop().await?;
        let last = records.last().ok_or("a record")?;
        assert_eq!(
            source_support::offset_text(last),
            format!("{{\"incrementing\":{count}}}"),
            "{table}: positioned by its {column} column"
        );
    }
    let error = match Offsets::new()
        .start(table_config(
            &format!("{}.plain", s.name),
            "incrementing",
            &[],
        ))
        .await
    {
        Ok((mut task, _)) => {
            let result = poll_for(task.as_mut(), Duration::from_millis(300)).await;
            task.stop().await?;
            result.err().map(|e| e.to_string()).unwrap_or_default()
        }
        Err(e) => e.to_string(),
    };
    assert!(
        error.contains("plain") && error.contains("incrementing.column.name"),
        "{error}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quote_sql_identifiers_never_lets_postgresql_fold_names_to_lower_case() -> TestResult {
    let db = client().await?;
    let s = SchemaGuard::create(&db, "quote").await?;
    db.batch_execute(&format!(
        "CREATE TABLE {0}.t (id serial, note text); INSERT INTO {0}.t (note) VALUES ('a')",
        s.name
    ))
    .await?;
    let with = |quote: &str| {
        table_config(
            &format!("{}.t", s.name),
            "incrementing",
            &[
                ("incrementing.column.name", "ID"),
                ("quote.sql.identifiers", quote),
            ],
        )
    };
    // never: ID is written unquoted, so PostgreSQL reads it as id.
    let (mut task, _) = Offsets::new().start(with("never")).await?;
    let records = poll_n(task.as_mut(), 1).await?;
    task.stop().await?;
    assert_eq!(
        source_support::offset_text(&records[0]),
        "{\"incrementing\":1}"
    );
    // always (the default): "ID" is a different column, which the table does not have.
    let error = match Offsets::new().start(with("always")).await {
        Ok((mut task, _)) => {
            let result = poll_for(task.as_mut(), Duration::from_millis(300)).await;
            task.stop().await?;
            result.err().map(|e| e.to_string()).unwrap_or_default()
        }
        Err(e) => e.to_string(),
    };
    assert!(error.contains("\"ID\""), "{error}");
    let issues = PostgresSourceConnector::new().validate(&with("sometimes"));
    assert_eq!(
        issues.iter().map(|i| i.key.as_str()).collect::<Vec<_>>(),
        vec!["quote.sql.identifiers"]
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_pattern_is_a_like_pattern_over_schema_names() -> TestResult {
    let db = client().await?;
    let s = SchemaGuard::create(&db, "pattern").await?;
    let other = SchemaGuard {
        name: format!("{}_two", s.name),
    };
    db.batch_execute(&format!(
        "CREATE SCHEMA {1}; CREATE TABLE {0}.one (id int); CREATE TABLE {1}.two (id int); \
         INSERT INTO {0}.one VALUES (1); INSERT INTO {1}.two VALUES (2)",
        s.name, other.name
    ))
    .await?;
    let (mut task, _) = Offsets::new()
        .start(discover(&format!("{}%", s.name), &[]))
        .await?;
    let records = poll_until_topics(task.as_mut(), &set(&["pg-one", "pg-two"])).await?;
    task.stop().await?;
    assert_eq!(topics(&records), set(&["pg-one", "pg-two"]));
    // Without the wildcard only the schema itself.
    let (mut task, _) = Offsets::new().start(discover(&other.name, &[])).await?;
    let records = poll_for(task.as_mut(), Duration::from_millis(400)).await?;
    task.stop().await?;
    assert_eq!(topics(&records), set(&["pg-two"]));
    Ok(())
}
