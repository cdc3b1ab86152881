//! `offset.storage=kafka` end to end: records and offsets both in Kafka. A run is stopped, another
//! resumes from the offsets in the offsets topic (read with `ferry offsets list` on that topic too), and
//! one is killed (SIGKILL) and resumed from them. The offsets topic holds Kafka Connect's bytes.
//!
//! The connector sets its own `value.converter` (StringConverter), overriding the worker's JsonConverter.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod kafka_support;
mod support;

use std::collections::HashSet;
use std::path::Path;

use kafka_support::{LINE_LEN, TopicReader, broker, create_topic, line_at, numbered_lines};
use rdkafka::message::Message;
use support::{Ferry, Workspace, killed_by_sigkill, path_str};

const CONNECTOR: &str = "file-source";
const TOPIC: &str = "lines";
const OFFSETS_TOPIC: &str = "connect-offsets";

fn committed_position(ws: &Workspace, worker: &Path) -> u64 {
    match ws.list_offsets(worker, CONNECTOR).as_slice() {
        [] => 0,
        [entry] => entry["offset"]["position"]
            .as_u64()
            .unwrap_or_else(|| panic!("no position in {entry}")),
        more => panic!("one partition expected, got {more:?}"),
    }
}

#[test]
fn offsets_in_a_kafka_topic_survive_stops_and_kills() {
    let broker = broker();
    let bootstrap = broker.bootstrap_servers();
    create_topic(&bootstrap, TOPIC, 1);
    let ws = Workspace::new();
    let input = ws.file("input.txt");
    let worker = ws.properties(
        "worker.properties",
        &[
            ("listeners", "http://127.0.0.1:0"),
            ("bootstrap.servers", &bootstrap),
            ("offset.storage", "kafka"),
            ("offset.storage.topic", OFFSETS_TOPIC),
            ("offset.storage.partitions", "5"),
            ("offset.storage.replication.factor", "1"),
            ("offset.flush.interval.ms", "200"),
        ],
    );
    let connector = ws.properties(
        "source.properties",
        &[
            ("name", CONNECTOR),
            ("connector.class", "FileStreamSource"),
            ("file", &path_str(&input)),
            ("topic", TOPIC),
            (
                "value.converter",
                "org.apache.kafka.connect.storage.StringConverter",
            ),
        ],
    );
    let mut reader = TopicReader::new(&bootstrap, TOPIC);

    // Run 1 creates the offsets topic and stops cleanly.
    ws.append("input.txt", numbered_lines(0..100));
    let mut ferry = Ferry::standalone(&ws, "run-1", &worker, &[&connector]);
    reader.wait_for(&mut ferry, 100);
    ferry.terminate_cleanly();
    assert!(ferry.log().contains(OFFSETS_TOPIC), "{}", ferry.log());
    assert_eq!(committed_position(&ws, &worker), 100 * LINE_LEN);

    // Run 2 resumes after line 99: exactly the new lines arrive (a clean stop commits everything).
    ws.append("input.txt", numbered_lines(100..200));
    let mut ferry = Ferry::standalone(&ws, "run-2", &worker, &[&connector]);
    reader.wait_for(&mut ferry, 200);
    ferry.terminate_cleanly();
    let expected: Vec<String> = (0..200).map(|n| format!("line-{n:05}")).collect();
    assert_eq!(
        reader.values(),
        expected,
        "StringConverter writes the raw line, each once"
    );
    assert_eq!(committed_position(&ws, &worker), 200 * LINE_LEN);

    // Run 3 is killed after a commit; run 4 resumes from the committed position in the topic.
    ws.append("input.txt", numbered_lines(200..300));
    let mut ferry = Ferry::standalone(&ws, "run-3", &worker, &[&connector]);
    reader.wait_for(&mut ferry, 300);
    ferry.wait_for_log("committed offsets of");
    let status = ferry.kill();
    assert!(killed_by_sigkill(status), "{status}");
    let committed = committed_position(&ws, &worker);
    assert!(
        committed > 200 * LINE_LEN,
        "run 3 committed nothing before the kill"
    );
    ws.append("input.txt", numbered_lines(300..400));
    let before = reader.messages.len();
    let mut ferry = Ferry::standalone(&ws, "run-4", &worker, &[&connector]);
    reader.wait_for(&mut ferry, before + 1);
    assert_eq!(
        reader.values()[before],
        line_at(committed),
        "run 4 did not resume at the committed position"
    );
    ferry.wait_until("every line in the topic", || {
        reader.read_to_end();
        let lines: HashSet<String> = reader.values().into_iter().collect();
        (0..400)
            .all(|n| lines.contains(&format!("line-{n:05}")))
            .then_some(())
    });
    ferry.terminate_cleanly();
    assert_eq!(committed_position(&ws, &worker), 400 * LINE_LEN);

    // The offsets topic holds Kafka Connect's bytes: key ["connector",{partition}], value {offset}.
    let mut offsets = TopicReader::new(&bootstrap, OFFSETS_TOPIC);
    offsets.read_to_end();
    let last = offsets.messages.last().expect("offset records");
    let key = String::from_utf8_lossy(last.key().unwrap_or_default()).into_owned();
    let filename = serde_json::to_string(&path_str(&input)).expect("JSON string");
    assert_eq!(key, format!(r#"["{CONNECTOR}",{{"filename":{filename}}}]"#));
    // The file identity FileStreamSource adds follows the position.
    let value = offsets.values().last().cloned().unwrap_or_default();
    assert!(
        value.starts_with(r#"{"position":4400,"dev":"#),
        "the last offset: {value}"
    );
}
