//! Values and schemas as Kafka Connect's JDBC source writes them: `Decimal` (per `numeric.mapping`),
//! `Date`, `Time` and `Timestamp` (per `timestamp.granularity`).
//!
//! Expected values follow Kafka Connect's logical types (`Decimal.fromLogical`: the unscaled value's
//! `BigInteger.toByteArray()`, base64 in JSON; `Date`: days since 1970; `Time`: ms since midnight;
//! `Timestamp`: ms since 1970) and the JDBC source's `GenericDatabaseDialect.addFieldToSchema`
//! (the `Decimal` schema carries `scale` and `connect.decimal.precision`).

mod source_support;

use ferry_api::Schema;
use serde_json::json;
use source_support::{Offsets, Table, TestResult, client, field_schema, poll_n, table_config};

fn decimal(scale: i32, precision: i32) -> Schema {
    Schema::decimal(scale)
        .with_parameter("connect.decimal.precision", precision.to_string())
        .optional()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numerics_dates_times_and_timestamps_are_kafka_connect_logical_types() -> TestResult {
    let db = client().await?;
    let t = Table::create(
        &db,
        "logical",
        "id serial primary key, amount numeric(10, 2), free numeric, whole numeric(5, 0) not null, \
         d date, tm time, tmtz timetz, ts timestamp, tstz timestamptz not null",
    )
    .await?;
    db.batch_execute(&format!(
        "INSERT INTO {0} (amount, free, whole, d, tm, tmtz, ts, tstz) VALUES \
         (19.90, 1.5, -12345, '2024-05-01', '08:30:00.5', '08:30:00+05:30', '2024-05-01 12:00:00.123456', \
          '2024-05-01 12:00:00+00'), \
         (-1.28, 0, 0, '1969-12-31', '24:00:00', '01:00:00+02', '1969-12-31 23:59:59.9995', \
          '294276-12-31 23:59:59.999999+00'), \
         (NULL, NULL, 1, NULL, NULL, NULL, 'infinity', '-infinity')",
        t.name
    ))
    .await?;
    let offsets = Offsets::new();
    let (mut task, _) = offsets
        .start(table_config(
            &t.name,
            "incrementing",
            &[("incrementing.column.name", "id")],
        ))
        .await?;
    let records = poll_n(task.as_mut(), 3).await?;
    task.stop().await?;

    let r = &records[0];
    assert_eq!(field_schema(r, "amount"), Some(decimal(2, 10)));
    // PostgreSqlDatabaseDialect.decimalScale: an unconstrained numeric is scale 127, precision 0.
    assert_eq!(field_schema(r, "free"), Some(decimal(127, 0)));
    assert_eq!(
        field_schema(r, "whole"),
        Some(
            Schema::decimal(0)
                .with_parameter("connect.decimal.precision", "5")
                .required()
        )
    );
    assert_eq!(field_schema(r, "d"), Some(Schema::date().optional()));
    assert_eq!(field_schema(r, "tm"), Some(Schema::time().optional()));
    assert_eq!(field_schema(r, "tmtz"), Some(Schema::time().optional()));
    assert_eq!(field_schema(r, "ts"), Some(Schema::timestamp().optional()));
    assert_eq!(field_schema(r, "tstz"), Some(Schema::timestamp()));
    // 1.5 at scale 127: 15 followed by 126 zeros, as big-endian two's complement, base64.
    let free = records[0].value.as_ref().and_then(|v| v.get("free"));
    assert!(free.and_then(|v| v.as_str()).is_some_and(|s| s.len() > 50));
    assert_eq!(
        records[0].value,
        Some(json!({
            "id": 1, "amount": "B8Y=", "free": free, "whole": "z8c=", "d": 19844, "tm": 30_600_500,
            "tmtz": 10_800_000, "ts": 1_714_564_800_123i64, "tstz": 1_714_564_800_000i64
        }))
    );
    assert_eq!(
        records[1].value,
        Some(json!({
            "id": 2, "amount": "gA==", "free": "AA==", "whole": "AA==", "d": -1, "tm": 86_400_000,
            "tmtz": 82_800_000, "ts": -1i64,
            // PostgreSQL's largest timestamp: exact milliseconds, not "infinity".
            "tstz": 9_224_318_015_999_999i64
        }))
    );
    // ±infinity: what PostgreSQL's JDBC driver gives the JDBC source (PGStatement.DATE_*_INFINITY).
    assert_eq!(
        records[2].value,
        Some(json!({
            "id": 3, "amount": null, "free": null, "whole": "AQ==", "d": null, "tm": null, "tmtz": null,
            "ts": 9_223_372_036_825_200_000i64, "tstz": -9_223_372_036_832_400_000i64
        }))
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numeric_mapping_best_fit_and_precision_only_pick_ints_and_doubles() -> TestResult {
    let db = client().await?;
    let t = Table::create(
        &db,
        "mapping",
        "id serial primary key, tiny numeric(2, 0), small numeric(4), mid numeric(9, 0), big numeric(18, 0), \
         huge numeric(19, 0), money numeric(10, 2), free numeric",
    )
    .await?;
    db.batch_execute(&format!(
        "INSERT INTO {} (tiny, small, mid, big, huge, money, free) VALUES \
         (-99, 9999, 123456789, 123456789012345678, 1234567890123456789, 12.5, 2.25)",
        t.name
    ))
    .await?;
    for (mapping, money, money_value) in [
        ("best_fit", Schema::float64().optional(), json!(12.5)),
        ("precision_only", decimal(2, 10), json!("BOI=")),
    ] {
        let offsets = Offsets::new();
        let (mut task, _) = offsets
            .start(table_config(
                &t.name,
                "incrementing",
                &[
                    ("incrementing.column.name", "id"),
                    ("numeric.mapping", mapping),
                ],
            ))
            .await?;
        let records = poll_n(task.as_mut(), 1).await?;
        task.stop().await?;
        let r = &records[0];
        assert_eq!(
            field_schema(r, "tiny"),
            Some(Schema::int8().optional()),
            "{mapping}"
        );
        assert_eq!(field_schema(r, "small"), Some(Schema::int16().optional()));
        assert_eq!(field_schema(r, "mid"), Some(Schema::int32().optional()));
        assert_eq!(field_schema(r, "big"), Some(Schema::int64().optional()));
        assert_eq!(field_schema(r, "huge"), Some(decimal(0, 19)));
        assert_eq!(field_schema(r, "money"), Some(money), "{mapping}");
        // An unconstrained numeric stays a Decimal (the JDBC source would make it int8 and fail).
        assert_eq!(field_schema(r, "free"), Some(decimal(127, 0)));
        let value = r.value.clone().unwrap_or_default();
        assert_eq!(value["tiny"], json!(-99));
        assert_eq!(value["small"], json!(9999));
        assert_eq!(value["mid"], json!(123_456_789));
        assert_eq!(value["big"], json!(123_456_789_012_345_678i64));
        assert_eq!(value["money"], money_value, "{mapping}");
    }
    // The deprecated numeric.precision.mapping=true is precision_only.
    let offsets = Offsets::new();
    let (mut task, _) = offsets
        .start(table_config(
            &t.name,
            "incrementing",
            &[
                ("incrementing.column.name", "id"),
                ("numeric.precision.mapping", "true"),
            ],
        ))
        .await?;
    let records = poll_n(task.as_mut(), 1).await?;
    task.stop().await?;
    assert_eq!(
        field_schema(&records[0], "tiny"),
        Some(Schema::int8().optional())
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamp_granularity_writes_nanos_as_asked() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "granularity", "id serial primary key, ts timestamptz").await?;
    db.batch_execute(&format!(
        "INSERT INTO {} (ts) VALUES ('2024-05-01 12:00:00.123456+00')",
        t.name
    ))
    .await?;
    for (granularity, schema, value) in [
        (
            "nanos_long",
            Schema::int64().optional(),
            json!(1_714_564_800_123_456_000i64),
        ),
        (
            "nanos_string",
            Schema::string().optional(),
            json!("1714564800123456000"),
        ),
        (
            "nanos_iso_datetime_string",
            Schema::string().optional(),
            json!("2024-05-01T12:00:00.123456000"),
        ),
        (
            "micros_long",
            Schema::int64().optional(),
            json!(1_714_564_800_123_456i64),
        ),
    ] {
        let offsets = Offsets::new();
        let (mut task, _) = offsets
            .start(table_config(
                &t.name,
                "incrementing",
                &[
                    ("incrementing.column.name", "id"),
                    ("timestamp.granularity", granularity),
                ],
            ))
            .await?;
        let records = poll_n(task.as_mut(), 1).await?;
        task.stop().await?;
        assert_eq!(
            field_schema(&records[0], "ts"),
            Some(schema),
            "{granularity}"
        );
        assert_eq!(
            records[0].value.as_ref().map(|v| v["ts"].clone()),
            Some(value),
            "{granularity}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nan_numeric_or_an_infinite_date_fails_clearly_naming_the_column() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "nan", "id serial primary key, n numeric, d date").await?;
    db.batch_execute(&format!(
        "INSERT INTO {} (n, d) VALUES ('NaN', '2024-01-01')",
        t.name
    ))
    .await?;
    let config = |extra: &[(&str, &str)]| {
        let mut pairs = vec![("incrementing.column.name", "id")];
        pairs.extend_from_slice(extra);
        table_config(&t.name, "incrementing", &pairs)
    };
    let (mut task, _) = Offsets::new().start(config(&[])).await?;
    let error = poll_n(task.as_mut(), 1)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    task.stop().await?;
    assert!(
        error.contains("column \"n\"") && error.contains("NaN") && error.contains("Decimal"),
        "{error}"
    );
    // best_fit_eager_double writes it as a double: NaN as Jackson writes it.
    let (mut task, _) = Offsets::new()
        .start(config(&[("numeric.mapping", "best_fit_eager_double")]))
        .await?;
    let records = poll_n(task.as_mut(), 1).await?;
    task.stop().await?;
    assert_eq!(
        records[0].value.as_ref().map(|v| v["n"].clone()),
        Some(json!("NaN"))
    );
    db.batch_execute(&format!("UPDATE {} SET n = 1, d = 'infinity'", t.name))
        .await?;
    let (mut task, _) = Offsets::new().start(config(&[])).await?;
    let error = poll_n(task.as_mut(), 1)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    task.stop().await?;
    assert!(
        error.contains("column \"d\"") && error.contains("infinity"),
        "{error}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_and_jsonb_columns_are_strings_so_the_record_keeps_its_schema() -> TestResult {
    // PostgreSqlDatabaseDialect: json/jsonb are STRING fields read with getString.
    let db = client().await?;
    let t = Table::create(
        &db,
        "json",
        "id serial primary key, j json, jb jsonb not null",
    )
    .await?;
    db.batch_execute(&format!(
        "INSERT INTO {} (j, jb) VALUES ('{{\"a\":  [1, 2]}}', '{{\"b\": {{\"c\": null}}}}')",
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
    assert_eq!(
        field_schema(&records[0], "j"),
        Some(Schema::string().optional())
    );
    assert_eq!(field_schema(&records[0], "jb"), Some(Schema::string()));
    // json keeps its text as written; jsonb is PostgreSQL's normalized text.
    assert_eq!(
        records[0].value,
        Some(json!({"id": 1, "j": "{\"a\":  [1, 2]}", "jb": "{\"b\": {\"c\": null}}"}))
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_numeric_scale_changes_the_decimal_schema() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "rescale", "id serial primary key, n numeric(10, 2)").await?;
    db.batch_execute(&format!("INSERT INTO {} (n) VALUES (1.5)", t.name))
        .await?;
    let (mut task, _) = Offsets::new()
        .start(table_config(
            &t.name,
            "incrementing",
            &[("incrementing.column.name", "id")],
        ))
        .await?;
    let first = poll_n(task.as_mut(), 1).await?;
    // Another session: the ALTER waits for the task's open read, which the polls below end.
    let name = t.name.clone();
    let alter = tokio::spawn(async move {
        let db = client().await.map_err(|e| e.to_string())?;
        db.batch_execute(&format!(
            "ALTER TABLE {name} ALTER COLUMN n TYPE numeric(12, 4); INSERT INTO {name} (n) VALUES (1.5)"
        ))
        .await
        .map_err(|e| e.to_string())
    });
    let second = poll_n(task.as_mut(), 1).await?;
    task.stop().await?;
    alter.await??;
    assert_eq!(field_schema(&first[0], "n"), Some(decimal(2, 10)));
    assert_eq!(field_schema(&second[0], "n"), Some(decimal(4, 12)));
    // 1.5000 at scale 4: unscaled 15000 = 0x3A98.
    assert_eq!(
        second[0].value.as_ref().map(|v| v["n"].clone()),
        Some(json!("Opg="))
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bit_1_column_is_a_boolean_as_in_the_postgresql_dialect() -> TestResult {
    let db = client().await?;
    let t = Table::create(&db, "bit", "id serial primary key, b bit(1) not null").await?;
    db.batch_execute(&format!("INSERT INTO {} (b) VALUES (B'1'), (B'0')", t.name))
        .await?;
    let (mut task, _) = Offsets::new()
        .start(table_config(
            &t.name,
            "incrementing",
            &[("incrementing.column.name", "id")],
        ))
        .await?;
    let records = poll_n(task.as_mut(), 2).await?;
    task.stop().await?;
    assert_eq!(field_schema(&records[0], "b"), Some(Schema::boolean()));
    assert_eq!(
        records
            .iter()
            .map(|r| r.value.as_ref().map(|v| v["b"].clone()))
            .collect::<Vec<_>>(),
        vec![Some(json!(true)), Some(json!(false))]
    );
    Ok(())
}
