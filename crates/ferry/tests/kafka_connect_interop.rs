//! Interoperability with the real Kafka Connect 4.4 (a distributed worker run from Maven Central's jars
//! by `ferry_testkit::ConnectWorker`), both ways, on one Apache Kafka 4.4 broker:
//!
//! - Kafka Connect runs FileStreamSource, is stopped (KIP-875); `ferry distributed` on the same three
//!   internal topics shows the connector STOPPED, resumes it, and continues right after Kafka Connect's
//!   last committed line;
//! - the reverse: Ferry runs it and stops it; Kafka Connect resumes it from Ferry's offsets;
//! - `ferry standalone` with `offset.storage=kafka` resumes from the offsets topic Kafka Connect wrote;
//! - Debezium's PostgreSQL connector 3.6 runs in that Kafka Connect on the test PostgreSQL (logical
//!   replication with pgoutput), the peer of Ferry's CDC work.
//!
//! Every line reaches the topic exactly once, in order. The files hold multi-byte UTF-8 lines: Kafka
//! Connect counts its positions in Java chars but skips bytes when it resumes; Ferry reads Kafka
//! Connect's positions as Kafka Connect counted them (see `file/kafka_connect.rs`).
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod kafka_support;
mod postgres_support;
mod rest_support;
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use ferry_testkit::{ConnectOptions, ConnectWorker};
use kafka_support::{
    SLOW, TopicReader, create_topic, distributed_worker, shared_broker, unique, wait_for,
};
use rest_support::Api;
use serde_json::{Value, json};
use support::{DEADLINE, Ferry, Workspace, path_str};

const CONNECTOR: &str = "file-source";
const FILE_SOURCE: &str = "org.apache.kafka.connect.file.FileStreamSourceConnector";

/// Line `n` of the test files: every third one has multi-byte UTF-8 (two-, three- and four-byte
/// characters; the last is two Java chars).
fn line(n: usize) -> String {
    if n.is_multiple_of(3) {
        format!("line-{n:04} çé€😀")
    } else {
        format!("line-{n:04} plain")
    }
}

fn lines(range: std::ops::Range<usize>) -> String {
    range.map(|n| format!("{}\n", line(n))).collect()
}

/// The connector's state in `GET /connectors/<name>/status`.
fn connector_state(api: &Api) -> Option<String> {
    let reply = api.get(&format!("/connectors/{CONNECTOR}/status"));
    (reply.status == 200)
        .then(|| {
            reply.json()["connector"]["state"]
                .as_str()
                .map(str::to_owned)
        })
        .flatten()
}

/// The committed `position` of `file` in `GET /connectors/<name>/offsets` (KIP-875).
fn committed_position(api: &Api, file: &Path) -> Option<i64> {
    let reply = api.get(&format!("/connectors/{CONNECTOR}/offsets"));
    if reply.status != 200 {
        return None;
    }
    reply.json()["offsets"]
        .as_array()?
        .iter()
        .find(|o| o["partition"]["filename"] == json!(path_str(file)))
        .and_then(|o| o["offset"]["position"].as_i64())
}

/// The text payloads of the topic's records (JsonConverter with schemas: `{"schema":…,"payload":…}`).
fn payloads(reader: &TopicReader) -> Vec<String> {
    reader
        .messages
        .iter()
        .map(|m| {
            let value: Value =
                serde_json::from_slice(rdkafka::Message::payload(m).unwrap_or_default())
                    .unwrap_or_else(|e| panic!("a record that is not JSON: {e}"));
            value["payload"]
                .as_str()
                .unwrap_or_else(|| panic!("no text payload in {value}"))
                .to_owned()
        })
        .collect()
}

/// Reads the topic until it holds `count` records, failing after `within`.
fn read_until(reader: &mut TopicReader, count: usize, within: Duration) {
    wait_for(&format!("{count} records in the topic"), within, || {
        reader.read_to_end();
        (reader.messages.len() >= count).then_some(())
    });
}

fn assert_exactly(reader: &TopicReader, range: std::ops::Range<usize>, context: &str) {
    let expected: Vec<String> = range.map(line).collect();
    let got = payloads(reader);
    assert_eq!(
        got,
        expected,
        "{context}: every line exactly once, in order (got {} records for {} lines)",
        got.len(),
        expected.len()
    );
}

fn start_ferry_distributed(ws: &Workspace, worker: &Path) -> (Ferry, Api) {
    let mut ferry = Ferry::spawn(
        ws.path(),
        [std::ffi::OsStr::new("distributed"), worker.as_os_str()],
        &ws.file("ferry.stdout"),
        &ws.file("ferry.stderr"),
    );
    let api = Api::new(&ferry.rest_url());
    (ferry, api)
}

/// A Kafka Connect worker of `group` that ran FileStreamSource on `input` (lines `0..count`) into
/// `topic` until every line is in the topic and its offset committed (Java chars of the whole file).
fn kafka_connect_read_all(
    group: &str,
    input: &Path,
    topic: &str,
    count: usize,
) -> (ConnectWorker, Api, TopicReader) {
    let broker = shared_broker();
    let connect = ConnectWorker::start(broker, ConnectOptions::new(group)).unwrap();
    let kc = Api::new(&connect.rest_url());
    let config = json!({
        "connector.class": FILE_SOURCE,
        "tasks.max": "1",
        "file": path_str(input),
        "topic": topic,
    });
    kc.put(
        &format!("/connectors/{CONNECTOR}/config"),
        Some(&config.to_string()),
    )
    .expect(201);
    let mut reader = TopicReader::new(&broker.bootstrap_servers(), topic);
    read_until(&mut reader, count, SLOW);
    // Kafka Connect's own count: Java chars of the whole file.
    let chars = lines(0..count).encode_utf16().count() as i64;
    wait_for("Kafka Connect's commit of the whole file", SLOW, || {
        (committed_position(&kc, input) == Some(chars)).then_some(())
    });
    (connect, kc, reader)
}

/// Kafka Connect → Ferry: a connector Kafka Connect ran and stopped continues in `ferry distributed`
/// right after Kafka Connect's last committed line.
#[test]
fn ferry_distributed_resumes_a_connector_kafka_connect_stopped() {
    let broker = shared_broker();
    let group = unique("kc-to-ferry");
    let topic = unique("kc-to-ferry-lines");
    create_topic(&broker.bootstrap_servers(), &topic, 1);
    let ws = Workspace::new();
    let input = ws.write("input.txt", lines(0..40));
    let (mut connect, kc, mut reader) = kafka_connect_read_all(&group, &input, &topic, 40);
    assert!(
        lines(0..40).encode_utf16().count() < lines(0..40).len(),
        "the file must hold multi-byte lines"
    );
    let stop = kc.put(&format!("/connectors/{CONNECTOR}/stop"), None);
    assert!(matches!(stop.status, 202 | 204), "stop: {}", stop.status);
    wait_for("Kafka Connect to show STOPPED", SLOW, || {
        (connector_state(&kc).as_deref() == Some("STOPPED")).then_some(())
    });
    assert!(connect.stop(), "Kafka Connect did not stop on SIGTERM");

    let worker = distributed_worker(&ws, &broker.bootstrap_servers(), &group);
    let (mut ferry, api) = start_ferry_distributed(&ws, &worker);
    ferry.wait_until("Ferry to show the connector STOPPED", || {
        (connector_state(&api).as_deref() == Some("STOPPED")).then_some(())
    });
    support::append(&input, lines(40..70).as_bytes());
    api.put(&format!("/connectors/{CONNECTOR}/resume"), None)
        .expect(202);
    ferry.wait_until("Ferry to show the connector RUNNING", || {
        (connector_state(&api).as_deref() == Some("RUNNING")).then_some(())
    });
    let total = lines(0..70).len() as i64;
    ferry.wait_until("Ferry's commit of the whole file (bytes)", || {
        reader.read_to_end();
        (committed_position(&api, &input) == Some(total)).then_some(())
    });
    reader.read_to_end();
    assert_exactly(&reader, 0..70, "Kafka Connect then Ferry");
    ferry.terminate_cleanly();
}

/// Ferry → Kafka Connect: a connector Ferry ran and stopped continues in Kafka Connect from Ferry's
/// offsets (whose extra fields Kafka Connect ignores).
#[test]
fn kafka_connect_resumes_a_connector_ferry_stopped() {
    let broker = shared_broker();
    let group = unique("ferry-to-kc");
    let topic = unique("ferry-to-kc-lines");
    create_topic(&broker.bootstrap_servers(), &topic, 1);
    let ws = Workspace::new();
    let input = ws.write("input.txt", lines(0..40));
    let worker = distributed_worker(&ws, &broker.bootstrap_servers(), &group);
    let (mut ferry, api) = start_ferry_distributed(&ws, &worker);
    let config = json!({
        "connector.class": FILE_SOURCE,
        "tasks.max": "1",
        "file": path_str(&input),
        "topic": topic,
    });
    // A worker that has not joined its group yet answers 409 (no leader known), as Kafka Connect does.
    ferry.wait_until("Ferry to create the connector", || {
        let reply = api.put(
            &format!("/connectors/{CONNECTOR}/config"),
            Some(&config.to_string()),
        );
        match reply.status {
            201 => Some(()),
            409 => None,
            other => panic!("creating the connector on Ferry: {other} {}", reply.body),
        }
    });
    let mut reader = TopicReader::new(&broker.bootstrap_servers(), &topic);
    let bytes = lines(0..40).len() as i64;
    ferry.wait_until("Ferry's commit of the whole file", || {
        (committed_position(&api, &input) == Some(bytes)).then_some(())
    });
    api.put(&format!("/connectors/{CONNECTOR}/stop"), None)
        .expect(204);
    ferry.wait_until("Ferry to show STOPPED", || {
        (connector_state(&api).as_deref() == Some("STOPPED")).then_some(())
    });
    ferry.terminate_cleanly();
    read_until(&mut reader, 40, DEADLINE);

    let connect = ConnectWorker::start(broker, ConnectOptions::new(&group)).unwrap();
    let kc = Api::new(&connect.rest_url());
    wait_for("Kafka Connect to show the connector STOPPED", SLOW, || {
        (connector_state(&kc).as_deref() == Some("STOPPED")).then_some(())
    });
    support::append(&input, lines(40..60).as_bytes());
    let resume = kc.put(&format!("/connectors/{CONNECTOR}/resume"), None);
    assert_eq!(resume.status, 202, "resume on Kafka Connect");
    read_until(&mut reader, 60, SLOW);
    // Kafka Connect resumed by skipping Ferry's byte position, then counted chars of what it read.
    let expected = bytes + lines(40..60).encode_utf16().count() as i64;
    wait_for(
        "Kafka Connect's commit after the appended lines",
        SLOW,
        || {
            reader.read_to_end();
            (committed_position(&kc, &input) == Some(expected)).then_some(())
        },
    );
    reader.read_to_end();
    assert_exactly(&reader, 0..60, "Ferry then Kafka Connect");
    drop(connect);
}

/// `ferry standalone` with `offset.storage=kafka` resumes from the offsets topic a Kafka Connect
/// worker wrote.
#[test]
fn ferry_standalone_resumes_from_kafka_connects_offsets_topic() {
    let broker = shared_broker();
    let group = unique("kc-standalone");
    let topic = unique("kc-standalone-lines");
    create_topic(&broker.bootstrap_servers(), &topic, 1);
    let ws = Workspace::new();
    let input = ws.write("input.txt", lines(0..30));
    let (mut connect, _kc, mut reader) = kafka_connect_read_all(&group, &input, &topic, 30);
    // Kafka Connect goes away with its connector still configured (a crash or a decommission).
    assert!(connect.stop(), "Kafka Connect did not stop on SIGTERM");

    support::append(&input, lines(30..50).as_bytes());
    let worker = ws.properties(
        "standalone.properties",
        &[
            ("listeners", "http://127.0.0.1:0"),
            ("bootstrap.servers", &broker.bootstrap_servers()),
            ("offset.storage", "kafka"),
            ("offset.storage.topic", &format!("{group}-offsets")),
            ("offset.storage.replication.factor", "1"),
            ("offset.flush.interval.ms", "200"),
        ],
    );
    let connector = ws.properties(
        "connector.properties",
        &[
            ("name", CONNECTOR),
            ("connector.class", FILE_SOURCE),
            ("tasks.max", "1"),
            ("file", &path_str(&input)),
            ("topic", &topic),
        ],
    );
    let mut ferry = Ferry::standalone(&ws, "standalone", &worker, &[&connector]);
    let api = Api::new(&ferry.rest_url());
    let total = lines(0..50).len() as i64;
    ferry.wait_until("Ferry's commit of the whole file", || {
        reader.read_to_end();
        (committed_position(&api, &input) == Some(total)).then_some(())
    });
    reader.read_to_end();
    ferry.terminate_cleanly();
    assert_exactly(&reader, 0..50, "Kafka Connect then ferry standalone");
}

/// Whether the broker has `topic` (asked without creating it).
fn topic_exists(bootstrap: &str, topic: &str) -> bool {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("allow.auto.create.topics", "false")
        .create()
        .unwrap();
    consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .is_ok_and(|m| {
            m.topics()
                .iter()
                .any(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty())
        })
}

/// Drops a Debezium test's replication slot, publication and table, whatever the test did.
struct PgCleanup {
    slot: String,
    publication: String,
    table: String,
}

impl Drop for PgCleanup {
    fn drop(&mut self) {
        // A slot still active (the connector not yet gone) cannot be dropped: end its backend first.
        let _ = std::panic::catch_unwind(|| {
            postgres_support::psql(&format!(
                "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots \
                 WHERE slot_name = '{}' AND active_pid IS NOT NULL",
                self.slot
            ));
        });
        let _ = std::panic::catch_unwind(|| {
            postgres_support::psql(&format!(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
                 WHERE slot_name = '{}'",
                self.slot
            ));
        });
        let _ = std::panic::catch_unwind(|| {
            postgres_support::psql(&format!(
                "DROP PUBLICATION IF EXISTS {}; DROP TABLE IF EXISTS {}",
                self.publication, self.table
            ));
        });
    }
}

/// Debezium's PostgreSQL connector, installed by `scripts/install-test-deps` on Kafka Connect's plugin
/// path, snapshots a table and streams changes through a logical replication slot (pgoutput) of the
/// test PostgreSQL: Debezium's envelope reaches the topic, and its offsets (`lsn`, …) show through
/// KIP-875 under the partition `{"server": <topic.prefix>}`.
#[test]
fn debezium_streams_postgres_changes_in_kafka_connect() {
    let broker = shared_broker();
    let name = unique("dbz").replace('-', "_");
    let cleanup = PgCleanup {
        slot: format!("{name}_slot"),
        publication: format!("{name}_pub"),
        table: format!("public.{name}_orders"),
    };
    postgres_support::psql(&format!(
        "CREATE TABLE {} (id int PRIMARY KEY, item text NOT NULL); INSERT INTO {} VALUES (1, 'tea')",
        cleanup.table, cleanup.table
    ));
    let connect = ConnectWorker::start(broker, ConnectOptions::new(unique("dbz-group"))).unwrap();
    let kc = Api::new(&connect.rest_url());
    let prefix = name.replace('_', "-");
    let config = json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput",
        "database.hostname": "127.0.0.1",
        "database.port": "5432",
        "database.user": "postgres",
        "database.password": "",
        "database.dbname": "test",
        "topic.prefix": prefix,
        "slot.name": cleanup.slot,
        "publication.name": cleanup.publication,
        "publication.autocreate.mode": "filtered",
        "table.include.list": cleanup.table,
        "snapshot.mode": "initial",
    });
    kc.put("/connectors/dbz/config", Some(&config.to_string()))
        .expect(201);
    let topic = format!("{prefix}.{}", cleanup.table);
    let started = Instant::now();
    while !topic_exists(&broker.bootstrap_servers(), &topic) {
        assert!(
            started.elapsed() < SLOW,
            "Debezium's snapshot did not reach topic {topic}; connector status: {}\nworker log:\n{}",
            kc.get("/connectors/dbz/status").body,
            connect.log_tail()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    postgres_support::psql(&format!(
        "INSERT INTO {t} VALUES (2, 'scones'); UPDATE {t} SET item = 'jam' WHERE id = 1",
        t = cleanup.table
    ));
    let mut reader = TopicReader::new(&broker.bootstrap_servers(), &topic);
    read_until(&mut reader, 3, SLOW);
    let ops: Vec<String> = reader
        .messages
        .iter()
        .map(|m| {
            let value: Value =
                serde_json::from_slice(rdkafka::Message::payload(m).unwrap_or_default()).unwrap();
            format!(
                "{}:{}",
                value["payload"]["op"].as_str().unwrap_or("?"),
                value["payload"]["after"]["item"].as_str().unwrap_or("?")
            )
        })
        .collect();
    assert_eq!(
        ops,
        ["r:tea", "c:scones", "u:jam"],
        "Debezium's change events"
    );
    wait_for("Debezium's committed offsets", SLOW, || {
        let reply = kc.get("/connectors/dbz/offsets");
        let body = reply.json();
        let offsets = body["offsets"].as_array()?.first()?.clone();
        (offsets["partition"] == json!({"server": prefix}) && offsets["offset"]["lsn"].is_number())
            .then_some(())
    });
    kc.delete("/connectors/dbz").expect(204);
    drop(connect);
    drop(cleanup);
}
