//! FileStreamSource against the life of a real log file, through real `ferry standalone` processes:
//! rotation by `mv` + create while running and while stopped (every line exactly once after graceful
//! stops), rotation under repeated SIGKILLs (every line at least once, never a fragment), a FIFO as
//! the file (refused at start; appearing later, the task fails and the worker still stops on SIGTERM), and a line longer than
//! `max.line.bytes` (skipped with a WARN, memory bounded).

mod rest_support;
mod support;

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rest_support::Api;
use serde_json::Value;
use support::{Ferry, SinkTail, Workspace, append, killed_by_sigkill, path_str, read_sink, run};

const CONNECTOR: &str = "app-log";

fn file_source(ws: &Workspace, file: &Path, extra: &[(&str, &str)]) -> PathBuf {
    let file = path_str(file);
    let mut entries = vec![
        ("name", CONNECTOR),
        ("connector.class", "FileStreamSource"),
        ("file", file.as_str()),
        ("topic", "lines"),
    ];
    entries.extend_from_slice(extra);
    ws.properties("app-log.properties", &entries)
}

fn values(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .map(|r| r["value"].as_str().expect("a string value").to_owned())
        .collect()
}

/// Runs `ferry` until the sink holds `count` lines, then stops it with SIGTERM; returns its log.
fn run_until(ws: &Workspace, name: &str, worker: &Path, connector: &Path, count: usize) -> String {
    let mut ferry = Ferry::standalone(ws, name, worker, &[connector]);
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, count);
    ferry.terminate_cleanly();
    ferry.log()
}

#[test]
fn rotation_while_running_and_while_stopped_delivers_every_line_exactly_once() {
    let ws = Workspace::new();
    let log_path = ws.write("app.log", "old-1\nold-2\nold-3\n");
    let worker = ws.worker(50, &[]);
    let connector = file_source(&ws, &log_path, &[]);

    // The scenario: rotated by mv while the worker runs, the new file written at once.
    let mut ferry = Ferry::standalone(&ws, "run1", &worker, &[&connector]);
    let mut sink = SinkTail::new(&ws.sink_path());
    sink.wait_for(&mut ferry, 3);
    fs::rename(&log_path, ws.file("app.log.1")).expect("rotate");
    ws.write("app.log", "new-line-1\nnew-line-2\nnew-line-3\n");
    sink.wait_for(&mut ferry, 6);
    ferry.terminate_cleanly();

    // Stopped: the file gets one more line, then is rotated again.
    ws.append("app.log", "new-line-4\n");
    fs::rename(&log_path, ws.file("app.log.2")).expect("rotate");
    ws.write("app.log", "newer-1\n");
    let log = run_until(&ws, "run2", &worker, &connector, 8);
    assert!(
        log.contains("rotated while the task was stopped"),
        "the log says what happened; log:\n{log}"
    );

    // And a restart with nothing new repeats nothing.
    ws.append("app.log", "newer-2\n");
    run_until(&ws, "run3", &worker, &connector, 9);
    let records = read_sink(&ws.sink_path());
    assert_eq!(
        values(&records),
        [
            "old-1",
            "old-2",
            "old-3",
            "new-line-1",
            "new-line-2",
            "new-line-3",
            "new-line-4",
            "newer-1",
            "newer-2"
        ]
    );
    let offsets = ws.list_offsets(&worker, CONNECTOR);
    let ino = fs::metadata(&log_path).expect("app.log").ino();
    assert_eq!(offsets.len(), 1, "{offsets:?}");
    assert_eq!(offsets[0]["offset"]["position"], "newer-1\nnewer-2\n".len());
    assert_eq!(offsets[0]["offset"]["ino"], ino as i64, "{offsets:?}");
}

/// xorshift64*: enough randomness for kill times and write sizes, reproducible from the printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn seed() -> u64 {
    if let Ok(text) = std::env::var("FERRY_TEST_SEED") {
        return text.trim().parse().expect("FERRY_TEST_SEED is a u64");
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (nanos as u64) | 1
}

/// Writes numbered lines of varying length to the log, sometimes splitting a line over two writes,
/// and rotates it by `mv` + create; remembers every line written.
struct Writer {
    path: PathBuf,
    next: usize,
    rotations: usize,
    written: Vec<String>,
}

impl Writer {
    fn line(&mut self, rng: &mut Rng) -> String {
        let pad = "x".repeat(rng.below(60) as usize);
        let line = format!("line-{:06}-{pad}", self.next);
        self.next += 1;
        self.written.push(line.clone());
        line
    }

    fn write_lines(&mut self, rng: &mut Rng, count: usize) {
        for _ in 0..count {
            let line = format!("{}\n", self.line(rng));
            if rng.below(4) == 0 {
                // A line in two writes: the reader must never emit its first half.
                let cut = 1 + rng.below(line.len() as u64 - 1) as usize;
                append(&self.path, &line.as_bytes()[..cut]);
                thread::sleep(Duration::from_millis(rng.below(3)));
                append(&self.path, &line.as_bytes()[cut..]);
            } else {
                append(&self.path, line.as_bytes());
            }
        }
    }

    fn rotate(&mut self) {
        self.rotations += 1;
        let rotated = self.path.with_extension(format!("log.{}", self.rotations));
        fs::rename(&self.path, rotated).expect("rotate");
        fs::write(&self.path, "").expect("create the new file");
    }
}

/// The committed offset of the log as the REST API shows it: (ino, position).
fn committed(api: &Api) -> Option<(i64, u64)> {
    let offsets = api.get(&format!("/connectors/{CONNECTOR}/offsets")).json();
    let offset = &offsets["offsets"][0]["offset"];
    Some((offset["ino"].as_i64()?, offset["position"].as_u64()?))
}

/// Waits until everything in the log is delivered and committed: with at most one rotation between
/// two commits, a restart always finds the rotated file its offset is about.
/// The file must not be empty (an empty file has no offset to commit).
fn wait_caught_up(ferry: &mut Ferry, api: &Api, path: &Path) {
    let meta = fs::metadata(path).expect("the log");
    let want = (meta.ino() as i64, meta.len());
    assert!(want.1 > 0, "nothing to wait for in an empty file");
    ferry.wait_until(format!("offset {want:?} committed"), || {
        (committed(api) == Some(want)).then_some(())
    });
}

#[test]
fn rotation_under_repeated_sigkills_delivers_every_line_at_least_once_and_never_a_fragment() {
    const ROUNDS: usize = 12;
    let seed = seed();
    println!("FERRY_TEST_SEED={seed}");
    let mut rng = Rng(seed);
    let ws = Workspace::new();
    let log_path = ws.write("app.log", "");
    let worker = ws.worker(50, &[]);
    let connector = file_source(&ws, &log_path, &[("batch.size", "7")]);
    let mut writer = Writer {
        path: log_path.clone(),
        next: 0,
        rotations: 0,
        written: Vec::new(),
    };
    writer.write_lines(&mut rng, 20);

    let mut kills = 0;
    let mut found_rotated = 0;
    for round in 0..ROUNDS {
        let mut ferry = Ferry::standalone(&ws, &format!("round{round}"), &worker, &[&connector]);
        let api = Api::new(&ferry.rest_url());
        writer.write_lines(&mut rng, 1);
        wait_caught_up(&mut ferry, &api, &log_path);
        // Lines, one rotation, more lines; the kill lands anywhere in there or shortly after.
        let kill_after = rng.below(5);
        for step in 0..5 {
            if step == kill_after {
                break;
            }
            let count = rng.below(30) as usize;
            match step {
                0 | 3 => writer.write_lines(&mut rng, 1 + count),
                1 => writer.rotate(),
                2 => writer.write_lines(&mut rng, count),
                _ => thread::sleep(Duration::from_millis(rng.below(200))),
            }
            thread::sleep(Duration::from_millis(rng.below(20)));
        }
        if rng.below(2) == 0 {
            thread::sleep(Duration::from_millis(rng.below(100)));
        }
        let status = ferry.kill();
        assert!(killed_by_sigkill(status), "round {round}: {status}");
        kills += 1;
        if ferry.log().contains("rotated while the task was stopped") {
            found_rotated += 1;
        }
        // The kill may have come before the rotation: finish this round's rotation, so every round
        // rotates once.
        if writer.rotations <= round {
            writer.rotate();
            writer.write_lines(&mut rng, 5);
        }
    }

    // A last, graceful run delivers the rest.
    writer.write_lines(&mut rng, 10);
    let mut ferry = Ferry::standalone(&ws, "final", &worker, &[&connector]);
    let api = Api::new(&ferry.rest_url());
    wait_caught_up(&mut ferry, &api, &log_path);
    ferry.terminate_cleanly();

    let delivered = values(&read_sink(&ws.sink_path()));
    let written: BTreeSet<&str> = writer.written.iter().map(String::as_str).collect();
    let fragments: Vec<&String> = delivered
        .iter()
        .filter(|v| !written.contains(v.as_str()))
        .collect();
    assert!(
        fragments.is_empty(),
        "seed {seed}: delivered values that are no written line (fragments): {fragments:?}"
    );
    let got: BTreeSet<&str> = delivered.iter().map(String::as_str).collect();
    let missing: Vec<&&str> = written.iter().filter(|l| !got.contains(**l)).collect();
    assert!(
        missing.is_empty(),
        "seed {seed}: {} of {} lines lost after {kills} kills and {} rotations: {missing:?}",
        missing.len(),
        written.len(),
        writer.rotations
    );
    assert_eq!(writer.rotations, ROUNDS);
    println!(
        "{} lines written, {} delivered, {kills} kills, {} rotations, {found_rotated} restarts finished a \
         file rotated while stopped",
        written.len(),
        delivered.len(),
        writer.rotations
    );
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(status.success(), "mkfifo {} failed", path.display());
}

#[test]
fn a_fifo_is_refused_at_start_and_one_appearing_later_fails_the_task_without_blocking_sigterm() {
    let ws = Workspace::new();
    let fifo = ws.file("pipe");
    mkfifo(&fifo);
    let worker = ws.worker(100, &[]);

    // Configured on a FIFO: refused before anything starts, naming the file and what it is.
    let connector = file_source(&ws, &fifo, &[]);
    let out = run(
        ws.path(),
        &["standalone", &path_str(&worker), &path_str(&connector)],
    );
    assert!(
        !out.status.success()
            && out.stderr.contains(&path_str(&fifo))
            && out.stderr.contains("FIFO (named pipe), not a regular file"),
        "a FIFO is refused at start: {out:?}"
    );

    // A FIFO appearing at the path after the start: no writer ever opens it, yet the task fails
    // with a clear message instead of blocking, and SIGTERM stops the worker.
    let later = ws.file("later");
    let connector = file_source(&ws, &later, &[]);
    let mut ferry = Ferry::standalone(&ws, "ferry", &worker, &[&connector]);
    let api = Api::new(&ferry.rest_url());
    // After the task started: before, the connector's validation would refuse it instead.
    ferry.wait_for_log("task started");
    mkfifo(&later);
    let status = ferry.wait_until("the task FAILED", || {
        let status = api.get(&format!("/connectors/{CONNECTOR}/status")).json();
        (status["tasks"][0]["state"] == "FAILED").then_some(status)
    });
    let trace = status["tasks"][0]["trace"].as_str().unwrap_or_default();
    assert!(
        trace.contains(&path_str(&later)) && trace.contains("FIFO"),
        "the failure names the file and what it is: {status}"
    );
    ferry.terminate_cleanly();
}

/// The peak resident memory of a running process, from `/proc/PID/status` (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[test]
fn a_line_longer_than_max_line_bytes_is_skipped_with_a_warning_and_memory_stays_bounded() {
    const LONG: usize = 256 * 1024 * 1024;
    let ws = Workspace::new();
    let path = ws.write("big.log", "before\n");
    {
        // 256 MiB without a newline, written in 1 MiB pieces, then the rest of the file.
        let piece = vec![b'x'; 1024 * 1024];
        for _ in 0..LONG / piece.len() {
            append(&path, &piece);
        }
        append(&path, b"\nafter\n");
    }
    let worker = ws.worker(100, &[]);
    let connector = file_source(&ws, &path, &[]);

    let mut ferry = Ferry::standalone(&ws, "ferry", &worker, &[&connector]);
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, 2);
    let peak = peak_rss(ferry.pid()).expect("VmHWM of the running worker");
    println!("peak resident memory: {peak} bytes");
    let log = ferry.wait_for_log("skipped a line longer than max.line.bytes");
    ferry.terminate_cleanly();
    fs::remove_file(&path).expect("remove the big file");

    assert_eq!(values(&read_sink(&ws.sink_path())), ["before", "after"]);
    let warning = log
        .lines()
        .find(|l| l.contains("skipped a line longer than max.line.bytes"))
        .unwrap_or_default();
    assert!(
        warning.contains(" WARN ") && warning.contains(&format!("bytes={LONG}")),
        "a WARN with the line's length: {warning}"
    );
    // The line was never held: far less than its size (the limit is 1 MiB, the rest is the worker).
    assert!(
        peak < (LONG / 2) as u64,
        "peak resident memory {peak} bytes while skipping a {LONG}-byte line"
    );
}
