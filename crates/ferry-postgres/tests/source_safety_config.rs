//! The correctness keys are known to the connector (so the runtime no longer rejects Kafka Connect's
//! `validate.non.null`, `db.timezone`, `connection.attempts`, `connection.backoff.ms` as unknown), with
//! Kafka Connect's defaults, and bad values are reported one issue per key.

mod source_support;

use ferry_api::SourceConnector;
use ferry_postgres::source::PostgresSourceConnector;
use source_support::table_config;

#[test]
fn the_keys_are_declared_with_kafka_connects_defaults() {
    let keys = PostgresSourceConnector::new().config_keys();
    for (name, default) in [
        ("validate.non.null", "true"),
        ("db.timezone", "UTC"),
        ("connection.attempts", "3"),
        ("connection.backoff.ms", "10000"),
        ("ferry.late.commit.max.wait.ms", "300000"),
    ] {
        let key = keys
            .iter()
            .find(|k| k.name == name)
            .unwrap_or_else(|| panic!("{name} is not a key"));
        assert_eq!(key.default, Some(default), "{name}");
        assert!(!key.required, "{name}");
    }
}

#[test]
fn bad_values_are_one_issue_per_key() {
    let config = table_config(
        "orders",
        "incrementing",
        &[
            ("incrementing.column.name", "id"),
            ("validate.non.null", "maybe"),
            ("connection.attempts", "0"),
            ("connection.backoff.ms", "-1"),
            ("ferry.late.commit.max.wait.ms", "soon"),
        ],
    );
    let issues = PostgresSourceConnector::new().validate(&config);
    let keys: Vec<&str> = issues.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(
        keys,
        vec![
            "validate.non.null",
            "connection.attempts",
            "connection.backoff.ms",
            "ferry.late.commit.max.wait.ms"
        ],
        "{issues:?}"
    );
    let good = table_config(
        "orders",
        "incrementing",
        &[
            ("incrementing.column.name", "id"),
            ("validate.non.null", "FALSE"),
            ("db.timezone", "Asia/Kathmandu"),
            ("connection.attempts", "1"),
            ("connection.backoff.ms", "0"),
            ("ferry.late.commit.max.wait.ms", "0"),
        ],
    );
    let issues = PostgresSourceConnector::new().validate(&good);
    assert!(issues.is_empty(), "{issues:?}");
}
