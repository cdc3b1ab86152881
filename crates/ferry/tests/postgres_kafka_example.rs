//! The README's PostgreSQL-to-Kafka example (`examples/postgres/*.properties`), run against a real
//! broker (Apache Kafka 4.4) and the test PostgreSQL: the shipped files, with only the broker address, the
//! database and the table replaced. Rows arrive in Kafka as JsonConverter envelopes whose schema is the
//! table's struct, and a row committed later arrives once `timestamp.delay.interval.ms` has passed.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod kafka_support;
mod pg_source_support;
mod support;

use std::fs;
use std::path::Path;

use kafka_support::{TopicReader, broker, create_topic};
use pg_source_support::{JDBC_URL, Pg};
use rdkafka::message::Message;
use serde_json::{Value, json};
use support::{Ferry, Workspace};

/// An example file with `overrides` appended (a key set twice keeps its last value).
fn example(ws: &Workspace, file: &str, overrides: &[(&str, &str)]) -> std::path::PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/postgres")
        .join(file);
    let mut text =
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    for (k, v) in overrides {
        text.push_str(&format!("{k}={v}\n"));
    }
    ws.write(file, text)
}

fn envelope(bytes: Option<&[u8]>) -> Value {
    serde_json::from_slice(bytes.expect("a value")).expect("a JSON value")
}

#[test]
fn readme_postgres_to_kafka_example_delivers_rows_with_their_schema() {
    let pg = Pg::connect();
    let table = pg.table(
        "orders",
        "id bigserial primary key, updated_at timestamptz not null default now(), total numeric(10, 2), \
         note text",
    );
    pg.execute(&format!(
        "INSERT INTO {} (updated_at, total, note) VALUES ('2024-05-01 12:00:00+00', 19.90, 'first')",
        table.name
    ));
    let mut kafka = broker();
    let bootstrap = kafka.bootstrap_servers();
    let topic = format!("shop.{}", table.name);
    create_topic(&bootstrap, &topic, 1);

    let ws = Workspace::new();
    let offsets = ws.offsets_path().display().to_string();
    let worker = example(
        &ws,
        "worker.properties",
        &[
            ("bootstrap.servers", &bootstrap),
            ("offset.storage.file.filename", &offsets),
            ("listeners", "http://127.0.0.1:0"),
            ("offset.flush.interval.ms", "500"),
        ],
    );
    let whitelist = format!("public.{}", table.name);
    let connector = example(
        &ws,
        "postgres-source.properties",
        &[
            ("connection.url", JDBC_URL),
            ("connection.user", "postgres"),
            ("table.whitelist", &whitelist),
        ],
    );
    let mut ferry = Ferry::standalone(&ws, "example", &worker, &[&connector]);
    let mut reader = TopicReader::new(&bootstrap, &topic);
    reader.wait_for(&mut ferry, 1);
    let first = envelope(reader.messages[0].payload());
    assert_eq!(
        first["payload"],
        // Kafka Connect's logical types: Timestamp in ms, Decimal 19.90 (unscaled 1990) as base64.
        json!({"id": 1, "updated_at": 1_714_564_800_000i64, "total": "B8Y=", "note": "first"})
    );
    assert_eq!(
        first["schema"],
        json!({
            "type": "struct",
            "fields": [
                {"type": "int64", "optional": false, "field": "id"},
                {"type": "int64", "optional": false, "name": "org.apache.kafka.connect.data.Timestamp",
                 "version": 1, "field": "updated_at"},
                {"type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal",
                 "version": 1, "parameters": {"scale": "2", "connect.decimal.precision": "10"},
                 "field": "total"},
                {"type": "string", "optional": true, "field": "note"}
            ],
            "optional": false,
            "name": table.name
        })
    );

    // A row stamped now by the database: read once it is older than the 2 s delay.
    pg.execute(&format!("INSERT INTO {} (total) VALUES (5)", table.name));
    reader.wait_for(&mut ferry, 2);
    let second = envelope(reader.messages[1].payload());
    assert_eq!(second["payload"]["id"], json!(2));
    // 5.00: unscaled 500 = 0x01F4.
    assert_eq!(second["payload"]["total"], json!("AfQ="));
    ferry.terminate_cleanly();
    let listed = ws.list_offsets(&worker, "postgres-orders");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        listed[0]["partition"],
        json!({"protocol": "1", "table": whitelist})
    );
    assert_eq!(listed[0]["offset"]["incrementing"], json!(2));
    kafka.stop();
}
