//! How PostgresSource writes column values (JSON) and their Kafka Connect schema.

mod source_support;

use ferry_api::{Schema, SchemaKind};
use serde_json::json;
use source_support::{Offsets, Table, TestResult, client, poll_n, table_config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_and_schemas_of_common_types() -> TestResult {
    let db = client().await?;
    let enum_name = format!("{}_mood", source_support::unique_name("t"));
    db.batch_execute(&format!("CREATE TYPE {enum_name} AS ENUM ('sad', 'happy')"))
        .await?;
    let t = Table::create(
        &db,
        "types",
        &format!(
            "id bigserial primary key, i2 smallint not null, i4 integer, f4 real, f8 double precision, \
             num numeric(10, 3), num_free numeric, flag boolean, txt text not null, vc varchar(10), ch char(3), \
             bin bytea, uid uuid, doc_json json, doc_jsonb jsonb, ts timestamp, tstz timestamptz, d date, \
             tm time, tmtz timetz, iv interval, ip inet, net cidr, mac macaddr, tags text[], grid int[], \
             mood {enum_name}, pt point"
        ),
    )
    .await?;
    db.batch_execute(&format!(
        "INSERT INTO {} (i2, i4, f4, f8, num, num_free, flag, txt, vc, ch, bin, uid, doc_json, doc_jsonb, ts, tstz, \
         d, tm, tmtz, iv, ip, net, mac, tags, grid, mood, pt) VALUES \
         (-2, 2147483647, 0.1, 'NaN', -1234.5, 0, true, 'héllo \"x\"', 'v', 'ab', '\\x00ff10', \
          'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{{\"a\": [1, 2]}}', '{{\"b\": {{\"c\": null}}}}', \
          '2024-02-29 23:59:59.123456', '2024-01-01 12:00:00+02', '1999-12-31', '08:30:00.5', '08:30:00+05:30', \
          '1 year 2 months 3 days 04:05:06.5', '192.168.1.1', '10.0.0.0/8', '08:00:2b:01:02:03', \
          ARRAY['a', NULL, 'c'], '{{{{1,2}},{{3,4}}}}', 'happy', '(1,2)'); \
         INSERT INTO {0} (i2, txt) VALUES (0, '')",
        t.name
    ))
    .await?;
    let offsets = Offsets::new();
    let config = table_config(
        &t.name,
        "incrementing",
        &[("incrementing.column.name", "id")],
    );
    let (mut task, _) = offsets.start(config).await?;
    let records = poll_n(task.as_mut(), 2).await?;
    task.stop().await?;
    db.batch_execute(&format!("DROP TABLE {}; DROP TYPE {enum_name}", t.name))
        .await?;

    assert_eq!(
        records[0].value,
        Some(json!({
            "id": 1, "i2": -2, "i4": 2147483647, "f4": 0.1, "f8": "NaN", "num": "7Sm8", "num_free": "AA==",
            "flag": true, "txt": "héllo \"x\"", "vc": "v", "ch": "ab ", "bin": "AP8Q",
            "uid": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "doc_json": "{\"a\": [1, 2]}",
            "doc_jsonb": "{\"b\": {\"c\": null}}", "ts": 1_709_251_199_123i64,
            "tstz": 1_704_103_200_000i64, "d": 10_956, "tm": 30_600_500, "tmtz": 10_800_000,
            "iv": "P1Y2M3DT4H5M6.5S", "ip": "192.168.1.1", "net": "10.0.0.0/8", "mac": "08:00:2b:01:02:03",
            "tags": ["a", null, "c"], "grid": [[1, 2], [3, 4]], "mood": "happy"
        })),
        "the point column (unsupported) is left out"
    );
    assert_eq!(
        records[1].value.as_ref().and_then(|v| v.get("txt")),
        Some(&json!(""))
    );
    assert_eq!(
        records[1].value.as_ref().and_then(|v| v.get("num")),
        Some(&json!(null))
    );
    // json columns are strings (as the JDBC source's PostgreSQL dialect): the record keeps its schema.
    assert!(records[0].value_schema.is_some());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn value_schema_is_a_struct_named_after_the_table_with_not_null_columns_required()
-> TestResult {
    let db = client().await?;
    let t = Table::create(
        &db,
        "schema",
        "id integer primary key, name text not null, score numeric, raw bytea, seen timestamptz, \
         weight double precision not null, tags int[]",
    )
    .await?;
    db.batch_execute(&format!(
        "INSERT INTO {} VALUES (1, 'a', 1.5, '\\x01', now(), 2.5, '{{1}}')",
        t.name
    ))
    .await?;
    let (mut task, _) = Offsets::new()
        .start(table_config(
            &t.name,
            "incrementing",
            &[("incrementing.column.name", "id")],
        ))
        .await?;
    let records = poll_n(task.as_mut(), 1).await?;
    task.stop().await?;
    let schema = records[0].value_schema.clone().ok_or("a value schema")?;
    assert_eq!(schema.name.as_deref(), Some(t.name.as_str()));
    assert!(!schema.optional);
    let field = |name: &str| schema.field(name).map(|f| f.schema.clone());
    assert_eq!(field("id"), Some(Schema::int32()));
    assert_eq!(field("name"), Some(Schema::string()));
    assert_eq!(
        field("score"),
        Some(
            Schema::decimal(127)
                .with_parameter("connect.decimal.precision", "0")
                .optional()
        )
    );
    assert_eq!(field("raw"), Some(Schema::bytes().optional()));
    assert_eq!(field("seen"), Some(Schema::timestamp().optional()));
    // NOT NULL floats are required, as in the JDBC source (NaN is written "NaN", as Jackson does).
    assert_eq!(field("weight"), Some(Schema::float64()));
    assert!(matches!(
        field("tags").map(|s| s.kind),
        Some(SchemaKind::Array { items }) if *items == Schema::int32().optional()
    ));
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["id", "name", "score", "raw", "seen", "weight", "tags"]
    );
    Ok(())
}
