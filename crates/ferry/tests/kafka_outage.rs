//! The broker goes away mid-run and comes back (Apache Kafka keeps its log across the restart).
//!
//! 1. While the broker is down the task keeps retrying (the process stays up, the task does not fail,
//!    the log says records wait); once the broker is back the same run delivers everything and a clean
//!    stop commits the end of the file.
//! 2. Records read while the broker is down are never committed: a run killed during the outage leaves
//!    the committed position where Kafka's acknowledgements left it, and every line before it is in the
//!    topic. The next run delivers the rest.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod kafka_support;
mod support;

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use kafka_support::{LINE_LEN, TopicReader, broker, create_topic, line_at, numbered_lines};
use support::{Ferry, Workspace, killed_by_sigkill, path_str};

const CONNECTOR: &str = "file-source";
const TOPIC: &str = "lines";

fn committed_position(ws: &Workspace, worker: &Path) -> u64 {
    match ws.list_offsets(worker, CONNECTOR).as_slice() {
        [] => 0,
        [entry] => entry["offset"]["position"]
            .as_u64()
            .unwrap_or_else(|| panic!("no position in {entry}")),
        more => panic!("one partition expected, got {more:?}"),
    }
}

fn lines_in(reader: &TopicReader) -> HashSet<String> {
    reader.payloads().into_iter().collect()
}

#[test]
fn a_broker_outage_delays_delivery_and_commits_but_loses_nothing() {
    let mut broker = broker();
    let bootstrap = broker.bootstrap_servers();
    create_topic(&bootstrap, TOPIC, 1);
    let ws = Workspace::new();
    let input = ws.file("input.txt");
    let worker = ws.properties(
        "worker.properties",
        &[
            ("listeners", "http://127.0.0.1:0"),
            ("bootstrap.servers", &bootstrap),
            (
                "offset.storage.file.filename",
                &path_str(&ws.offsets_path()),
            ),
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
        ],
    );
    let mut reader = TopicReader::new(&bootstrap, TOPIC);

    // 1. The same run survives the outage.
    ws.append("input.txt", numbered_lines(0..200));
    let mut ferry = Ferry::standalone(&ws, "run-1", &worker, &[&connector]);
    reader.wait_for(&mut ferry, 200);
    ferry.wait_for_log("committed offsets of");
    broker.stop();
    ws.append("input.txt", numbered_lines(200..400));
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        ferry.is_running(),
        "ferry exited during the outage:\n{}",
        ferry.log()
    );
    let log = ferry.log();
    assert!(
        !log.contains("task failed"),
        "the task failed during the outage:\n{log}"
    );
    assert!(
        log.contains("records wait in the producer and are retried"),
        "the log does not say records are waiting:\n{log}"
    );
    broker.restart().unwrap();
    ferry.wait_until("every line of run 1 in the topic", || {
        reader.read_to_end();
        let lines = lines_in(&reader);
        (0..400)
            .all(|n| lines.contains(&format!("line-{n:05}")))
            .then_some(())
    });
    ferry.terminate_cleanly();
    assert_eq!(committed_position(&ws, &worker), 400 * LINE_LEN);

    // 2. A run killed during an outage has committed nothing Kafka did not acknowledge.
    let mut ferry = Ferry::standalone(&ws, "run-2", &worker, &[&connector]);
    ferry.wait_for_log("task started");
    broker.stop();
    ws.append("input.txt", numbered_lines(400..600));
    // Several commit intervals pass while the lines are read but cannot be delivered.
    std::thread::sleep(Duration::from_secs(2));
    let status = ferry.kill();
    assert!(
        killed_by_sigkill(status),
        "ferry exited before the kill: {status}\n{}",
        ferry.log()
    );
    let committed = committed_position(&ws, &worker);
    broker.restart().unwrap();
    reader.read_to_end();
    let lines = lines_in(&reader);
    for position in (0..committed).step_by(LINE_LEN as usize) {
        assert!(
            lines.contains(&line_at(position)),
            "{} is committed (position {committed}) but not in the topic",
            line_at(position)
        );
    }
    assert_eq!(
        committed,
        400 * LINE_LEN,
        "records read during the outage were committed"
    );

    // 3. The next run delivers what the outage held back.
    let mut ferry = Ferry::standalone(&ws, "run-3", &worker, &[&connector]);
    ferry.wait_until("every line in the topic", || {
        reader.read_to_end();
        let lines = lines_in(&reader);
        (0..600)
            .all(|n| lines.contains(&format!("line-{n:05}")))
            .then_some(())
    });
    ferry.terminate_cleanly();
    assert_eq!(committed_position(&ws, &worker), 600 * LINE_LEN);
}
