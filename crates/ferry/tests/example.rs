//! The shipped standalone example, run exactly as documented, from the repository root:
//!
//! ```sh
//! cargo run --release -p ferry -- standalone examples/standalone/worker.properties examples/standalone/file-source.properties
//! ```
//!
//! The example's tracked files (as a fresh clone has them) are copied into a temporary directory that
//! serves as the working directory, so the repository is never written to. The lines of `input.txt`
//! arrive in the sink; after a restart, a line appended in between is the only new record.

mod support;

use std::fs;
use std::path::{Path, PathBuf};

use support::{Ferry, SinkTail, Workspace, parse_line};

const WORKER: &str = "examples/standalone/worker.properties";
const CONNECTOR: &str = "examples/standalone/file-source.properties";
const INPUT: &str = "examples/standalone/input.txt";
const SINK: &str = "examples/standalone/data/out.jsonl";
const OFFSETS: &str = "examples/standalone/data/offsets.ferry";
/// What git tracks of the example: a fresh clone has exactly these files.
const TRACKED: &[&str] = &[
    WORKER,
    CONNECTOR,
    INPUT,
    "examples/standalone/data/.gitkeep",
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `value`s of the sink's records.
fn values(tail: &SinkTail) -> Vec<String> {
    tail.lines
        .iter()
        .map(|l| {
            let record = parse_line(l);
            assert_eq!(record["topic"], "example-lines", "{l}");
            assert_eq!(record["source_partition"]["filename"], INPUT, "{l}");
            record["value"]
                .as_str()
                .expect("a line is a string")
                .to_owned()
        })
        .collect()
}

#[test]
fn standalone_example_delivers_the_input_and_resumes_after_a_restart() {
    let ws = Workspace::new();
    for file in TRACKED {
        let from = repo_root().join(file);
        let bytes = fs::read(&from)
            .unwrap_or_else(|e| panic!("the example file {} is missing: {e}", from.display()));
        ws.write(file, bytes);
    }
    let worker_text = support::read_lossy(&ws.file(WORKER));
    assert!(
        worker_text.contains(&format!("offset.storage.file.filename={OFFSETS}"))
            && worker_text.contains(&format!("sink=file:{SINK}")),
        "the test reads the files the example configures:\n{worker_text}"
    );
    let input_text = support::read_lossy(&ws.file(INPUT));
    let mut expected: Vec<String> = input_text.lines().map(str::to_owned).collect();
    assert!(
        expected.len() >= 3 && !input_text.is_ascii(),
        "a few lines, some non-ASCII"
    );

    let worker = Path::new(WORKER);
    let connector = Path::new(CONNECTOR);
    let mut first = Ferry::standalone(&ws, "run1", worker, &[connector]);
    let mut sink = SinkTail::new(&ws.file(SINK));
    sink.wait_for(&mut first, expected.len());
    first.terminate_cleanly();
    assert_eq!(values(&sink), expected, "every line of input.txt, in order");

    let appended = "appended between runs: ça marche ✓";
    support::append(&ws.file(INPUT), format!("{appended}\n").as_bytes());
    expected.push(appended.to_owned());
    let mut second = Ferry::standalone(&ws, "run2", worker, &[connector]);
    sink.wait_for(&mut second, expected.len());
    second.terminate_cleanly();
    sink.read_new();
    assert_eq!(
        values(&sink),
        expected,
        "after the restart only the appended line is new"
    );
    let log = second.log();
    assert!(
        log.contains(&format!(
            "partition {{\"filename\":\"{INPUT}\"}} resumes from committed offset"
        )),
        "the restart resumes from the committed position; log:\n{log}"
    );
}
