//! Golden bytes: a PostgresSource row through Ferry's JsonConverter (`schemas.enable=true`) is what
//! Kafka Connect's JDBC source and JsonConverter write for the same row.
//!
//! The expected envelope follows the JDBC source's `GenericDatabaseDialect.addFieldToSchema`
//! (`Decimal.builder(scale)` plus parameter `connect.decimal.precision`, `Date`, `Timestamp`; NOT NULL
//! columns required; the struct named after the table) and Kafka Connect's `JsonConverter.asJsonSchema`
//! / `convertToJson` (field order `type`, `fields`, `optional`, `name`, `version`, `parameters`,
//! `field`; a Decimal's payload is its unscaled `BigInteger.toByteArray()` in base64).

use std::sync::Arc;

use ferry_api::{
    Config, OffsetReadError, OffsetStorageReader, SourceConnector, SourceOffset, SourcePartition,
    SourceTaskContext, async_trait,
};
use ferry_kafka::convert::{Converter, Role};
use ferry_postgres::source::PostgresSourceConnector;
use tokio_postgres::NoTls;

struct NoOffsets;

#[async_trait]
impl OffsetStorageReader for NoOffsets {
    async fn offsets(
        &self,
        partitions: &[SourcePartition],
    ) -> Result<Vec<(SourcePartition, Option<SourceOffset>)>, OffsetReadError> {
        Ok(partitions.iter().map(|p| (p.clone(), None)).collect())
    }
}

struct Context(Config);

impl SourceTaskContext for Context {
    fn configs(&self) -> &Config {
        &self.0
    }

    fn offset_storage_reader(&self) -> Arc<dyn OffsetStorageReader> {
        Arc::new(NoOffsets)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_is_the_jdbc_sources_json_converter_envelope_byte_for_byte() {
    let (db, connection) =
        tokio_postgres::connect("host=127.0.0.1 port=5432 user=postgres dbname=test", NoTls)
            .await
            .expect("the test PostgreSQL at 127.0.0.1:5432");
    tokio::spawn(connection);
    let table = format!("ferry_golden_{}", std::process::id());
    db.batch_execute(&format!(
        "DROP TABLE IF EXISTS {table}; \
         CREATE TABLE {table} (id serial primary key, amount numeric(10, 2), d date, \
         ts timestamptz not null, note text); \
         INSERT INTO {table} (amount, d, ts, note) VALUES (19.90, '2024-05-01', '2024-05-01 12:00:00+00', 'x'), \
         (-1.28, NULL, '1969-12-31 23:59:59.999+00', NULL)"
    ))
    .await
    .expect("the table");
    let config: Config = [
        ("connection.url", "jdbc:postgresql://127.0.0.1:5432/test"),
        ("connection.user", "postgres"),
        ("mode", "incrementing"),
        ("incrementing.column.name", "id"),
        ("table.whitelist", table.as_str()),
        ("topic.prefix", "pg-"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let mut task = PostgresSourceConnector::new().create_task();
    task.start(Arc::new(Context(config)))
        .await
        .expect("the task starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut records = Vec::new();
    while records.len() < 2 && std::time::Instant::now() < deadline {
        records.extend(task.poll().await.expect("a poll"));
    }
    task.stop().await.expect("the task stops");
    db.batch_execute(&format!("DROP TABLE {table}"))
        .await
        .expect("drop");
    assert_eq!(records.len(), 2);
    let json = |i: usize| {
        let r: &ferry_api::SourceRecord = &records[i];
        let bytes = Converter::json(true)
            .convert(Role::Value, r.value_schema.as_deref(), r.value.as_ref())
            .expect("converts")
            .expect("a value");
        String::from_utf8(bytes).expect("UTF-8")
    };
    let schema = format!(
        concat!(
            r#"{{"type":"struct","fields":[{{"type":"int32","optional":false,"field":"id"}},"#,
            r#"{{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"#,
            r#""parameters":{{"scale":"2","connect.decimal.precision":"10"}},"field":"amount"}},"#,
            r#"{{"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Date","version":1,"field":"d"}},"#,
            r#"{{"type":"int64","optional":false,"name":"org.apache.kafka.connect.data.Timestamp","version":1,"#,
            r#""field":"ts"}},{{"type":"string","optional":true,"field":"note"}}],"optional":false,"name":"{}"}}"#
        ),
        table
    );
    assert_eq!(
        json(0),
        format!(
            r#"{{"schema":{schema},"payload":{{"id":1,"amount":"B8Y=","d":19844,"ts":1714564800000,"note":"x"}}}}"#
        )
    );
    // -1.28: unscaled -128 is the single byte 0x80; 1 ms before the epoch is -1.
    assert_eq!(
        json(1),
        format!(
            r#"{{"schema":{schema},"payload":{{"id":2,"amount":"gA==","d":null,"ts":-1,"note":null}}}}"#
        )
    );
}
