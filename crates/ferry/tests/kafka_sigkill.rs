//! File → Kafka with SIGKILL restarts: `ferry standalone` tails a file into a real broker's topic and is
//! killed (SIGKILL) mid-stream, round after round, while lines keep being appended (so every kill finds
//! lines delivered to Kafka but not yet committed: they arrive again after the restart).
//!
//! Between rounds, with the process dead, the committed position is read with `ferry offsets list`.
//! Checks:
//! - each run's first record in the topic is the line at the committed position (it resumes there, not
//!   from the beginning, and skips nothing);
//! - every line before the committed position is in the topic (nothing is committed before Kafka has
//!   acknowledged it), and the committed position never goes backwards;
//! - in the end, after a clean stop, every line is in the topic at least once and the committed
//!   position is the end of the file.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod kafka_support;
mod support;

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kafka_support::{LINE_LEN, TopicReader, broker, create_topic, line_at, numbered_lines};
use support::{Ferry, Workspace, killed_by_sigkill, path_str};

const CONNECTOR: &str = "file-to-kafka";
const TOPIC: &str = "lines";
const ROUNDS: u64 = 6;
/// Lines appended before each run starts.
const LINES_BEFORE_START: u64 = 100;
/// Lines appended every [`APPEND_EVERY`] while a run lasts.
const LINES_PER_APPEND: u64 = 4;
const APPEND_EVERY: Duration = Duration::from_millis(5);

/// Appends numbered lines to the input file from a thread until stopped.
struct Appender {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl Appender {
    /// Appends from line `next` on.
    fn start(input: &Path, mut next: u64) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let input = input.to_path_buf();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                support::append(
                    &input,
                    numbered_lines(next..next + LINES_PER_APPEND).as_bytes(),
                );
                next += LINES_PER_APPEND;
                std::thread::sleep(APPEND_EVERY);
            }
            next
        });
        Self { stop, thread }
    }

    /// Stops appending; returns the number of lines now in the file.
    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("appender thread")
    }
}

/// The committed `position` of the input file (0 when nothing is committed).
fn committed_position(ws: &Workspace, worker: &Path) -> u64 {
    // A kill before the worker opened its store leaves no store file, and read-only `offsets list`
    // refuses a missing store rather than creating one: nothing was committed.
    if !ws.offsets_path().exists() {
        return 0;
    }
    let offsets = ws.list_offsets(worker, CONNECTOR);
    match offsets.as_slice() {
        [] => 0,
        [entry] => entry["offset"]["position"]
            .as_u64()
            .unwrap_or_else(|| panic!("no position in {entry}")),
        more => panic!("one partition expected, got {more:?}"),
    }
}

#[test]
fn file_to_kafka_resumes_from_the_committed_position_after_every_sigkill() {
    let broker = broker();
    let bootstrap = broker.bootstrap_servers();
    create_topic(&bootstrap, TOPIC, 1);
    let ws = Workspace::new();
    let input = ws.file("input.txt");
    let offsets = ws.offsets_path();
    let worker = ws.properties(
        "worker.properties",
        &[
            ("listeners", "http://127.0.0.1:0"),
            ("bootstrap.servers", &bootstrap),
            ("offset.storage.file.filename", &path_str(&offsets)),
            ("offset.flush.interval.ms", "250"),
        ],
    );
    let connector = ws.properties(
        "source.properties",
        &[
            ("name", CONNECTOR),
            ("connector.class", "FileStreamSource"),
            ("file", &path_str(&input)),
            ("topic", TOPIC),
            ("batch.size", "25"),
        ],
    );
    let mut reader = TopicReader::new(&bootstrap, TOPIC);
    let mut written = 0;
    let mut last_committed = 0;

    for round in 0..ROUNDS {
        let committed = committed_position(&ws, &worker);
        assert!(
            committed >= last_committed,
            "round {round}: the committed position went back from {last_committed} to {committed}"
        );
        last_committed = committed;
        reader.read_to_end();
        let in_topic: HashSet<String> = reader.payloads().into_iter().collect();
        for position in (0..committed).step_by(LINE_LEN as usize) {
            assert!(
                in_topic.contains(&line_at(position)),
                "round {round}: {} is committed (position {committed}) but not in the topic",
                line_at(position)
            );
        }
        if round > 1 {
            assert!(committed > 0, "round {round}: nothing was ever committed");
        }

        // Some lines before the start; more are appended all through the run, so the kill always
        // finds lines delivered but not yet committed.
        ws.append(
            "input.txt",
            numbered_lines(written..written + LINES_BEFORE_START),
        );
        written += LINES_BEFORE_START;
        let before = reader.messages.len();
        let mut ferry = Ferry::standalone(&ws, &format!("round-{round}"), &worker, &[&connector]);
        let appender = Appender::start(&input, written);
        reader.wait_for(&mut ferry, before + 1);
        assert_eq!(
            reader.payloads()[before],
            line_at(committed),
            "round {round}: the run's first record is not the line at the committed position {committed}"
        );
        ferry.wait_for_log("committed offsets of");
        std::thread::sleep(Duration::from_millis(40 + 45 * round));
        let status = ferry.kill();
        written = appender.stop();
        assert!(
            killed_by_sigkill(status),
            "round {round}: ferry exited before the kill: {status}\n{}",
            ferry.log()
        );
    }

    // The final run delivers everything; a clean stop commits the end of the file.
    let total = written;
    let mut ferry = Ferry::standalone(&ws, "final", &worker, &[&connector]);
    ferry.wait_until("every line in the topic", || {
        reader.read_to_end();
        let in_topic: HashSet<String> = reader.payloads().into_iter().collect();
        (0..total)
            .all(|n| in_topic.contains(&format!("line-{n:05}")))
            .then_some(())
    });
    ferry.terminate_cleanly();
    assert_eq!(committed_position(&ws, &worker), total * LINE_LEN);
    reader.read_to_end();
    let payloads = reader.payloads();
    assert!(payloads.len() as u64 >= total);
    // The value is Kafka Connect's JsonConverter envelope of a required string (FileStreamSource's schema).
    let first = reader.values()[0].clone();
    assert_eq!(
        first,
        r#"{"schema":{"type":"string","optional":false},"payload":"line-00000"}"#
    );
    eprintln!(
        "{total} lines, {} records in the topic ({} duplicates from {ROUNDS} SIGKILLs)",
        payloads.len(),
        payloads.len() as u64 - total
    );
}

/// Exactly-once delivery in standalone mode (`exactly.once.source.support=enabled`,
/// `offset.storage=kafka`, the connector `exactly.once.support=required`), which Kafka Connect offers
/// only in distributed mode: the worker is SIGKILLed mid-stream round after round while lines keep
/// being appended, and a `read_committed` reader sees every line exactly once, in order — what a
/// killed run sent after its last commit was aborted, and each run resumed right after it.
#[test]
fn file_to_kafka_exactly_once_in_standalone_has_every_line_once_after_sigkills() {
    const EOS_TOPIC: &str = "eos-lines";
    let broker = broker();
    let bootstrap = broker.bootstrap_servers();
    create_topic(&bootstrap, EOS_TOPIC, 1);
    let ws = Workspace::new();
    let input = ws.file("input.txt");
    let worker = ws.properties(
        "worker.properties",
        &[
            ("listeners", "http://127.0.0.1:0"),
            ("bootstrap.servers", &bootstrap),
            ("offset.storage", "kafka"),
            ("offset.storage.topic", "eos-standalone-offsets"),
            ("offset.storage.replication.factor", "1"),
            ("offset.storage.partitions", "1"),
            ("exactly.once.source.support", "enabled"),
        ],
    );
    let connector = ws.properties(
        "source.properties",
        &[
            ("name", "eos-file"),
            ("connector.class", "FileStreamSource"),
            ("file", &path_str(&input)),
            ("topic", EOS_TOPIC),
            ("batch.size", "200"),
            ("exactly.once.support", "required"),
        ],
    );
    let mut reader = TopicReader::new(&bootstrap, EOS_TOPIC);
    let mut written = 0;
    for round in 0..ROUNDS {
        ws.append(
            "input.txt",
            numbered_lines(written..written + LINES_BEFORE_START),
        );
        written += LINES_BEFORE_START;
        reader.read_to_end();
        let before = reader.messages.len();
        let mut ferry = Ferry::standalone(&ws, &format!("eos-{round}"), &worker, &[&connector]);
        let appender = Appender::start(&input, written);
        reader.wait_for(&mut ferry, before + 1);
        assert_eq!(
            reader.payloads()[before],
            line_at(before as u64 * LINE_LEN),
            "round {round}: the run did not resume right after the last committed line"
        );
        std::thread::sleep(Duration::from_millis(40 + 45 * round));
        let status = ferry.kill();
        written = appender.stop();
        assert!(
            killed_by_sigkill(status),
            "round {round}: ferry exited before the kill: {status}\n{}",
            ferry.log()
        );
    }
    let total = written;
    let mut ferry = Ferry::standalone(&ws, "eos-final", &worker, &[&connector]);
    let started = std::time::Instant::now();
    reader.wait_for(&mut ferry, usize::try_from(total).expect("fits"));
    eprintln!(
        "the final run delivered the rest of {total} lines in {:?}",
        started.elapsed()
    );
    ferry.terminate_cleanly();
    reader.read_to_end();
    let expected: Vec<String> = (0..total).map(|n| format!("line-{n:05}")).collect();
    assert_eq!(
        reader.payloads(),
        expected,
        "a read_committed reader sees every line once, in order, across {ROUNDS} SIGKILLs"
    );
}
