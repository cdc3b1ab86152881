//! Interop with Kafka Connect: a FileStreamSource resumes from the position Kafka Connect stored in
//! its offsets topic, and Ferry's commits to that topic are the bytes Kafka Connect would write.
//!
//! The offsets topic is prepared exactly as a Kafka Connect worker leaves it: a compacted topic with 25
//! partitions, records keyed `["<connector>",{"filename":"<path>"}]` with JsonConverter values
//! `{"position":N}`, placed by Java's murmur2 partitioner. The file connector then starts under Ferry
//! with `offset.storage=kafka` on that topic.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod kafka_support;
mod support;

use kafka_support::{LINE_LEN, TopicReader, broker, create_topic, numbered_lines};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use support::{DEADLINE, Ferry, Workspace, path_str};

const CONNECTOR: &str = "local-file-source";
const TOPIC: &str = "connect-test";
const OFFSETS_TOPIC: &str = "connect-offsets";

/// Creates the offsets topic as Kafka Connect does and produces `records` (key, value-or-tombstone)
/// raw, with Java's key placement.
fn prepare_kafka_connect_offsets(bootstrap: &str, records: &[(String, Option<String>)]) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .create()
            .expect("admin client");
        let topic = NewTopic::new(OFFSETS_TOPIC, 25, TopicReplication::Fixed(1))
            .set("cleanup.policy", "compact");
        for result in admin
            .create_topics(
                &[topic],
                &AdminOptions::new().operation_timeout(Some(DEADLINE)),
            )
            .await
            .expect("create the offsets topic")
        {
            result.unwrap_or_else(|(t, code)| panic!("creating {t}: {code}"));
        }
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("acks", "all")
            .set("partitioner", "murmur2_random")
            .create()
            .expect("producer");
        for (key, value) in records {
            let mut record = FutureRecord::<str, str>::to(OFFSETS_TOPIC).key(key);
            if let Some(value) = value {
                record = record.payload(value);
            }
            producer
                .send(record, DEADLINE)
                .await
                .unwrap_or_else(|(e, _)| panic!("producing {key}: {e}"));
        }
    });
}

#[test]
fn file_source_resumes_from_the_position_kafka_connect_stored() {
    let broker = broker();
    let bootstrap = broker.bootstrap_servers();
    create_topic(&bootstrap, TOPIC, 1);
    let ws = Workspace::new();
    let input = ws.write("test.txt", numbered_lines(0..100));
    let key = format!(r#"["{CONNECTOR}",{{"filename":"{}"}}]"#, path_str(&input));
    // Kafka Connect's history for this file: an early commit, a later one (the newest wins), and
    // another connector's offsets, one of them tombstoned.
    prepare_kafka_connect_offsets(
        &bootstrap,
        &[
            (
                key.clone(),
                Some(format!(r#"{{"position":{}}}"#, 5 * LINE_LEN)),
            ),
            (
                r#"["other-source",{"filename":"/tmp/other.txt"}]"#.to_owned(),
                Some(r#"{"position":7}"#.to_owned()),
            ),
            (
                key.clone(),
                Some(format!(r#"{{"position":{}}}"#, 30 * LINE_LEN)),
            ),
            (
                r#"["other-source",{"filename":"/tmp/other.txt"}]"#.to_owned(),
                None,
            ),
        ],
    );

    let worker = ws.properties(
        "worker.properties",
        &[
            ("listeners", "http://127.0.0.1:0"),
            ("bootstrap.servers", &bootstrap),
            ("offset.storage", "kafka"),
            ("offset.storage.topic", OFFSETS_TOPIC),
            ("offset.storage.replication.factor", "1"),
            ("offset.flush.interval.ms", "200"),
            (
                "value.converter",
                "org.apache.kafka.connect.storage.StringConverter",
            ),
        ],
    );
    let connector = ws.properties(
        "connect-file-source.properties",
        &[
            ("name", CONNECTOR),
            (
                "connector.class",
                "org.apache.kafka.connect.file.FileStreamSourceConnector",
            ),
            ("tasks.max", "1"),
            ("file", &path_str(&input)),
            ("topic", TOPIC),
        ],
    );

    let mut lines = TopicReader::new(&bootstrap, TOPIC);
    let mut ferry = Ferry::standalone(&ws, "resume-from-kafka-connect", &worker, &[&connector]);
    lines.wait_for(&mut ferry, 70);
    ferry.terminate_cleanly();
    let expected: Vec<String> = (30..100).map(|n| format!("line-{n:05}")).collect();
    assert_eq!(
        lines.values(),
        expected,
        "Ferry must resume at Kafka Connect's newest stored position (line 30), not from scratch"
    );
    assert!(
        ferry.log().contains(&format!(
            "resumes from committed offset {{\"position\":{}}}",
            30 * LINE_LEN
        )),
        "the log names the resumed position:\n{}",
        ferry.log()
    );

    // Ferry's own commit, read back raw: Kafka Connect's key bytes and value format.
    let mut offsets = TopicReader::new(&bootstrap, OFFSETS_TOPIC);
    offsets.read_to_end();
    let newest = offsets
        .messages
        .iter()
        .filter(|m| m.key() == Some(key.as_bytes()))
        .max_by_key(|m| m.offset())
        .expect("Ferry's commit is in the offsets topic");
    // The file identity FileStreamSource adds follows the position.
    let payload = String::from_utf8_lossy(newest.payload().unwrap_or_default()).into_owned();
    assert!(
        payload.starts_with(&format!(r#"{{"position":{},"dev":"#, 100 * LINE_LEN)),
        "Ferry's newest commit: {payload}"
    );
    let first = offsets
        .messages
        .iter()
        .find(|m| m.key() == Some(key.as_bytes()))
        .expect("Kafka Connect's record");
    assert_eq!(
        newest.partition(),
        first.partition(),
        "Ferry places the key on the partition Kafka Connect's producer chose"
    );
}
