//! What `ferry` does when something is wrong, through real processes: a truncated source file fails
//! the task (or is re-read under `file.truncation.policy=restart`), malformed configuration is refused
//! before anything starts, a damaged offsets file is refused and left untouched, the offsets CLI is
//! refused while a worker holds the store, and `ferry offsets set/get/reset` round-trip into a resume.

mod support;

use std::fs;
use std::path::Path;

use serde_json::json;
use support::{
    Ferry, SinkTail, Workspace, offsets_of, path_str, read_sink, run, without_file_identities,
};

fn numbered_lines(range: std::ops::Range<usize>) -> String {
    range.map(|i| format!("line number {i} ✓\n")).collect()
}

fn file_source(ws: &Workspace, input: &Path, extra: &[(&str, &str)]) -> std::path::PathBuf {
    let file = path_str(input);
    let mut entries = vec![
        ("name", "files"),
        ("connector.class", "FileStreamSource"),
        ("file", file.as_str()),
        ("topic", "lines"),
    ];
    entries.extend_from_slice(extra);
    ws.properties("file-source.properties", &entries)
}

/// Runs the file source over `input` until the sink holds `count` lines in total, then SIGTERM.
fn run_until(ws: &Workspace, name: &str, worker: &Path, connector: &Path, count: usize) {
    let mut ferry = Ferry::standalone(ws, name, worker, &[connector]);
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, count);
    ferry.terminate_cleanly();
}

// (a) ---------------------------------------------------------------------------------------------

#[test]
fn truncated_source_file_fails_the_task_and_restart_policy_rereads_it() {
    let ws = Workspace::new();
    let input = ws.write("input.txt", numbered_lines(0..20));
    let input_name = path_str(&input);
    let committed = fs::metadata(&input).expect("input").len();
    let worker = ws.worker(100, &[]);
    let connector = file_source(&ws, &input, &[("file.truncation.policy", "fail")]);
    run_until(&ws, "run1", &worker, &connector, 20);

    // Replace the content with fewer bytes than the committed position.
    let shorter = "short 1\nshort 2\nshort 3\n";
    ws.write("input.txt", shorter);
    let length = shorter.len();
    let mut ferry = Ferry::standalone(&ws, "run2", &worker, &[&connector]);
    let log = ferry.wait_for_log("task stopped (FAILED)");
    let failure = log
        .lines()
        .find(|l| l.contains("ERROR") && l.contains("task failed"))
        .unwrap_or_else(|| panic!("no ERROR line for the failed task; log:\n{log}"));
    assert!(
        failure.contains(&format!("{input_name:?}"))
            && failure.contains(&format!(
                "is {length} bytes long, shorter than position {committed}"
            )),
        "the failure names the file, its length {length} and the committed position {committed}: {failure}"
    );
    // A task failure does not stop the worker: it still runs and holds the offset store.
    assert!(
        ferry.is_running(),
        "the worker exited after a task failure; log:\n{}",
        ferry.log()
    );
    let list = run(
        ws.path(),
        &[
            "offsets",
            "list",
            "--worker",
            &path_str(&worker),
            "--connector",
            "files",
        ],
    );
    assert!(
        !list.status.success() && list.stderr.contains("in use by another process"),
        "the running worker still holds the store: {list:?}"
    );
    ferry.terminate_cleanly();
    assert_eq!(
        read_sink(&ws.sink_path()).len(),
        20,
        "the failed task delivered nothing"
    );
    assert_eq!(
        without_file_identities(&ws.list_offsets(&worker, "files")),
        vec![json!({"partition": {"filename": input_name}, "offset": {"position": committed}})],
        "the failed task left the committed offset alone"
    );

    // With file.truncation.policy=restart the file is read again from byte 0, with a WARN.
    let connector = file_source(&ws, &input, &[("file.truncation.policy", "restart")]);
    let mut ferry = Ferry::standalone(&ws, "run3", &worker, &[&connector]);
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, 23);
    ferry.terminate_cleanly();
    let log = ferry.log();
    assert!(
        log.lines()
            .any(|l| l.contains(" WARN ") && l.contains("reading it again from byte 0")),
        "a WARN says the file is read again from byte 0; log:\n{log}"
    );
    let records = read_sink(&ws.sink_path());
    let reread: Vec<(&str, i64)> = records[20..]
        .iter()
        .map(|r| {
            (
                r["value"].as_str().expect("text"),
                r["source_offset"]["position"].as_i64().expect("pos"),
            )
        })
        .collect();
    assert_eq!(
        reread,
        vec![("short 1", 8), ("short 2", 16), ("short 3", 24)]
    );
    assert_eq!(records.len(), 23);
}

// (b) ---------------------------------------------------------------------------------------------

/// Runs `ferry standalone` on a bad configuration: it must exit non-zero having created nothing, and
/// its stderr must contain every `expected` fragment.
fn assert_refused(ws: &Workspace, worker: &Path, connector: &Path, expected: &[&str]) {
    let out = run(
        ws.path(),
        &["standalone", &path_str(worker), &path_str(connector)],
    );
    assert!(
        !out.status.success(),
        "a bad configuration must be refused: {out:?}"
    );
    for fragment in expected {
        assert!(
            out.stderr.contains(fragment),
            "stderr should contain {fragment:?}:\n{}",
            out.stderr
        );
    }
    for created in [
        ws.offsets_path(),
        ws.file("offsets.ferry.lock"),
        ws.sink_path(),
    ] {
        assert!(
            !created.exists(),
            "{} was created although the configuration was refused",
            created.display()
        );
    }
}

#[test]
fn malformed_properties_are_refused_before_anything_starts() {
    let ws = Workspace::new();
    let input = ws.write("input.txt", numbered_lines(0..3));
    let offsets = path_str(&ws.offsets_path());
    let sink = format!("file:{}", ws.sink_path().display());
    let good_connector = file_source(&ws, &input, &[]);

    // An unknown key in the worker file (line 4).
    let worker = ws.write(
        "worker-unknown.properties",
        format!("# worker\noffset.storage.file.filename={offsets}\nsink={sink}\noffset.flush.intervall.ms=100\n"),
    );
    let at = format!("{}:4", worker.display());
    assert_refused(
        &ws,
        &worker,
        &good_connector,
        &[&at, "unknown key \"offset.flush.intervall.ms\""],
    );

    // An invalid value (line 3).
    let worker = ws.write(
        "worker-invalid.properties",
        format!(
            "offset.storage.file.filename={offsets}\n\noffset.flush.interval.ms=abc\nsink={sink}\n"
        ),
    );
    let at = format!("{}:3", worker.display());
    assert_refused(
        &ws,
        &worker,
        &good_connector,
        &[&at, "\"offset.flush.interval.ms\"", "\"abc\""],
    );

    // A missing required connector key (no line to name: the file and the key).
    let good_worker = ws.write(
        "worker.properties",
        format!("offset.storage.file.filename={offsets}\nsink={sink}\n"),
    );
    let connector = ws.write(
        "missing-topic.properties",
        format!(
            "name=files\nconnector.class=FileStreamSource\nfile={}\n",
            input.display()
        ),
    );
    let file = connector.display().to_string();
    assert_refused(
        &ws,
        &good_worker,
        &connector,
        &[&file, "missing required key \"topic\""],
    );

    // An invalid connector value, found by the connector's own validation (line 5).
    let connector = ws.write(
        "bad-batch.properties",
        format!(
            "name=files\nconnector.class=FileStreamSource\nfile={}\ntopic=t\nbatch.size=-3\n",
            input.display()
        ),
    );
    let at = format!("{}:5", connector.display());
    assert_refused(&ws, &good_worker, &connector, &[&at, "\"batch.size\""]);

    // A missing connector file.
    let missing = ws.file("no-such.properties");
    let file = missing.display().to_string();
    assert_refused(&ws, &good_worker, &missing, &[&file, "cannot read"]);
}

// (c) ---------------------------------------------------------------------------------------------

/// Length of a frame header in a version-2 store file.
const FRAME_HEADER_LEN: usize = 20;

/// The byte offsets where the frames of a version-2 store file start (after its 32-byte header).
fn frame_starts(store: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut at = 32;
    while at + FRAME_HEADER_LEN <= store.len() {
        starts.push(at);
        let len = u32::from_le_bytes(store[at..at + 4].try_into().expect("4 bytes")) as usize;
        at += FRAME_HEADER_LEN + len;
    }
    assert_eq!(at, store.len(), "the store ends with a complete frame");
    starts
}

#[test]
fn damaged_offsets_file_is_refused_and_left_unchanged() {
    let ws = Workspace::new();
    let input = ws.write("input.txt", numbered_lines(0..5));
    let worker = ws.worker(100, &[]);
    let connector = file_source(&ws, &input, &[]);
    run_until(&ws, "run1", &worker, &connector, 5);
    ws.append("input.txt", numbered_lines(5..10));
    run_until(&ws, "run2", &worker, &connector, 10);
    let store = ws.offsets_path();
    let valid = fs::read(&store).expect("read the store");
    let frames = frame_starts(&valid);
    assert!(
        frames.len() >= 2,
        "two runs wrote at least two frames: {frames:?}"
    );
    let sink_before = fs::read(ws.sink_path()).expect("read the sink");

    let first_payload_middle =
        frames[0] + FRAME_HEADER_LEN + (frames[1] - frames[0] - FRAME_HEADER_LEN) / 2;
    let mut flipped = valid.clone();
    flipped[first_payload_middle] ^= 0x40;
    let garbage = b"this is not an offsets file\n\x00\x01\x02 just some bytes\n".to_vec();
    let store_name = store.display().to_string();
    let cases: [(&str, Vec<u8>, &[&str]); 3] = [
        (
            "a flipped byte",
            flipped,
            &["is corrupt at byte 32", "checksum"],
        ),
        (
            "garbage",
            garbage,
            &["is not usable", "not a Ferry offset store"],
        ),
        (
            "an empty file",
            Vec::new(),
            &["is not usable", "the file is empty (0 bytes)"],
        ),
    ];
    for (what, bytes, expected) in cases {
        fs::write(&store, &bytes).expect("damage the store");
        let out = run(
            ws.path(),
            &["standalone", &path_str(&worker), &path_str(&connector)],
        );
        assert!(
            !out.status.success(),
            "{what}: ferry must refuse to start: {out:?}"
        );
        assert!(
            out.stderr.contains(&store_name),
            "{what}: stderr names the file:\n{}",
            out.stderr
        );
        for fragment in expected {
            assert!(
                out.stderr.contains(fragment),
                "{what}: stderr should contain {fragment:?}:\n{}",
                out.stderr
            );
        }
        assert_eq!(
            fs::read(&store).expect("read the store"),
            bytes,
            "{what}: the offsets file is unchanged"
        );
        assert_eq!(
            fs::read(ws.sink_path()).expect("sink"),
            sink_before,
            "{what}: nothing was delivered"
        );

        // The offsets CLI refuses it the same way and does not touch it either.
        let out = run(
            ws.path(),
            &[
                "offsets",
                "list",
                "--worker",
                &path_str(&worker),
                "--connector",
                "files",
            ],
        );
        assert!(
            !out.status.success() && out.stderr.contains(&store_name),
            "{what}: {out:?}"
        );
        assert_eq!(
            fs::read(&store).expect("read the store"),
            bytes,
            "{what}: unchanged by the CLI"
        );
    }
}

// (d) ---------------------------------------------------------------------------------------------

#[test]
fn offsets_cli_is_refused_while_a_worker_runs_and_works_after_it_stops() {
    let ws = Workspace::new();
    let input = ws.write("input.txt", numbered_lines(0..7));
    let length = fs::metadata(&input).expect("input").len();
    let worker = ws.worker(100, &[]);
    let worker_arg = path_str(&worker);
    let connector = file_source(&ws, &input, &[]);
    let mut ferry = Ferry::standalone(&ws, "run", &worker, &[&connector]);
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, 7);

    let list = [
        "offsets",
        "list",
        "--worker",
        &worker_arg,
        "--connector",
        "files",
    ];
    let out = run(ws.path(), &list);
    assert!(
        !out.status.success(),
        "list must be refused while the worker runs: {out:?}"
    );
    assert!(
        out.stderr.contains("is in use by another process"),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.is_empty(),
        "nothing is printed: {:?}",
        out.stdout
    );
    let set = [
        "offsets",
        "set",
        "--worker",
        &worker_arg,
        "--connector",
        "files",
        "--partition",
        r#"{"filename":"x"}"#,
        "--offset",
        r#"{"position":0}"#,
    ];
    let out = run(ws.path(), &set);
    assert!(
        !out.status.success() && out.stderr.contains("is in use by another process"),
        "set must be refused while the worker runs: {out:?}"
    );

    ferry.terminate_cleanly();
    let out = run(ws.path(), &list);
    assert!(
        out.status.success(),
        "list works once the worker stopped: {out:?}"
    );
    assert_eq!(
        without_file_identities(&offsets_of(&out.stdout)),
        vec![json!({"partition": {"filename": path_str(&input)}, "offset": {"position": length}})]
    );
}

// (e) ---------------------------------------------------------------------------------------------

#[test]
fn offsets_set_get_reset_round_trip_and_a_run_resumes_at_the_set_position() {
    let ws = Workspace::new();
    let text = numbered_lines(0..10);
    let input = ws.write("input.txt", &text);
    let input_name = path_str(&input);
    let worker = ws.worker(100, &[]);
    let w = path_str(&worker);
    let partition = json!({ "filename": input_name }).to_string();
    // The position right after the third line.
    let position = numbered_lines(0..3).len();
    let offset = format!(r#"{{"position":{position}}}"#);
    let entry = json!({"partition": {"filename": input_name}, "offset": {"position": position}});

    let get = [
        "get",
        "--worker",
        &w,
        "--connector",
        "files",
        "--partition",
        &partition,
    ];
    let set = [
        "set",
        "--worker",
        &w,
        "--connector",
        "files",
        "--partition",
        &partition,
        "--offset",
        &offset,
    ];
    // `get` only reads: before anything created the store it says so, and creates nothing.
    let mut full = vec!["offsets"];
    full.extend_from_slice(&get);
    let missing = run(ws.path(), &full);
    assert!(
        !missing.status.success() && missing.stderr.contains("no offset store file"),
        "{missing:?}"
    );
    assert!(!ws.offsets_path().exists());
    assert_eq!(
        support::offsets_of(&ws.offsets_ok(&set).stdout),
        vec![entry.clone()]
    );
    assert_eq!(
        support::offsets_of(&ws.offsets_ok(&get).stdout),
        vec![entry.clone()]
    );
    assert_eq!(ws.list_offsets(&worker, "files"), vec![entry.clone()]);
    // Another connector's offsets are separate.
    assert_eq!(
        ws.list_offsets(&worker, "other"),
        Vec::<serde_json::Value>::new()
    );

    // Reset one partition.
    let reset = [
        "reset",
        "--worker",
        &w,
        "--connector",
        "files",
        "--partition",
        &partition,
    ];
    let out = ws.offsets_ok(&reset);
    assert_eq!(
        support::offsets_of(&out.stdout),
        Vec::<serde_json::Value>::new()
    );
    assert!(
        out.stderr.contains("reset 1 partition(s)"),
        "{}",
        out.stderr
    );
    assert_eq!(
        support::offsets_of(&ws.offsets_ok(&get).stdout),
        Vec::<serde_json::Value>::new()
    );

    // Reset every partition of the connector.
    ws.offsets_ok(&set);
    let other = [
        "set",
        "--worker",
        &w,
        "--connector",
        "files",
        "--partition",
        r#"{"filename":"/elsewhere.txt"}"#,
        "--offset",
        r#"{"position":5}"#,
    ];
    ws.offsets_ok(&other);
    assert_eq!(ws.list_offsets(&worker, "files").len(), 2);
    let out = ws.offsets_ok(&["reset", "--worker", &w, "--connector", "files"]);
    assert!(
        out.stderr.contains("reset 2 partition(s)"),
        "{}",
        out.stderr
    );
    assert_eq!(
        ws.list_offsets(&worker, "files"),
        Vec::<serde_json::Value>::new()
    );

    // Malformed JSON is refused, naming the argument.
    let bad = [
        "set",
        "--worker",
        &w,
        "--connector",
        "files",
        "--partition",
        "{not json",
        "--offset",
        &offset,
    ];
    let out = run(ws.path(), &[&["offsets"][..], &bad[..]].concat());
    assert!(
        !out.status.success() && out.stderr.contains("--partition"),
        "{out:?}"
    );

    // The CLI stores any offset map; one the connector cannot resume from fails the task, and the
    // message says how to fix it with commands that exist.
    let negative = [
        "set",
        "--worker",
        &w,
        "--connector",
        "files",
        "--partition",
        &partition,
        "--offset",
        r#"{"position":-5}"#,
    ];
    ws.offsets_ok(&negative);
    let connector = file_source(&ws, &input, &[]);
    let mut ferry = Ferry::standalone(&ws, "negative", &worker, &[&connector]);
    let log = ferry.wait_for_log("task stopped (FAILED)");
    ferry.terminate_cleanly();
    assert!(
        log.contains("has a negative position -5")
            && log.contains("`ferry offsets reset`")
            && log.contains("`ferry offsets set`"),
        "log:\n{log}"
    );
    assert!(
        !ws.sink_path().exists() || read_sink(&ws.sink_path()).is_empty(),
        "nothing delivered"
    );

    // Set it again; a run resumes right after the third line.
    ws.offsets_ok(&set);
    let mut ferry = Ferry::standalone(&ws, "run", &worker, &[&connector]);
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, 7);
    ferry.terminate_cleanly();
    let log = ferry.log();
    assert!(
        log.contains(&format!(
            "partition {{\"filename\":\"{input_name}\"}} resumes from committed offset {{\"position\":{position}}}"
        )),
        "log:\n{log}"
    );
    let values: Vec<String> = read_sink(&ws.sink_path())
        .iter()
        .map(|r| r["value"].as_str().expect("text").to_owned())
        .collect();
    let expected: Vec<String> = (3..10).map(|i| format!("line number {i} ✓")).collect();
    assert_eq!(values, expected, "the run starts at the set position");
    assert_eq!(
        without_file_identities(&ws.list_offsets(&worker, "files")),
        vec![json!({"partition": {"filename": input_name}, "offset": {"position": text.len()}})]
    );
}
