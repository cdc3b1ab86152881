//! The example's binary, run as a user would: `custom-connector standalone worker counter`. Its REST
//! API lists CounterSource, and after SIGTERM and a restart the counter goes on right after its
//! committed number.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};
use serde_json::Value;

const BINARY: &str = env!("CARGO_BIN_EXE_custom-connector");
/// How long anything may take on a loaded machine.
const DEADLINE: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(20);

/// A running `custom-connector` process; killed and reaped if still running when dropped.
struct Running {
    child: Child,
    stderr: PathBuf,
    exit: Option<ExitStatus>,
}

impl Running {
    fn start(dir: &Path, name: &str, args: &[&Path]) -> Running {
        let stderr = dir.join(format!("{name}.stderr"));
        let child = Command::new(BINARY)
            .args(args)
            .current_dir(dir)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&stderr).expect("create the stderr file"))
            .spawn()
            .unwrap_or_else(|e| panic!("start {BINARY}: {e}"));
        Running {
            child,
            stderr,
            exit: None,
        }
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Polls `check` until it gives a value; fails (with the log) if the process exits or the
    /// deadline passes first.
    fn wait_until<T>(&mut self, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
        let start = Instant::now();
        loop {
            if let Some(value) = check() {
                return value;
            }
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                self.exit = Some(status);
                panic!(
                    "exited ({status}) while waiting for {what}; log:\n{}",
                    self.log()
                );
            }
            assert!(
                start.elapsed() < DEADLINE,
                "timed out waiting for {what}; log:\n{}",
                self.log()
            );
            thread::sleep(POLL);
        }
    }

    /// The REST API's base URL, from its `REST API listening on http://…` log line.
    fn rest_url(&mut self) -> String {
        let stderr = self.stderr.clone();
        self.wait_until("the REST API", || {
            let log = fs::read_to_string(&stderr).ok()?;
            let at = log.find("REST API listening on http://")? + "REST API listening on ".len();
            log[at..].split_whitespace().next().map(str::to_owned)
        })
    }

    /// SIGTERM, and the exit code must be 0.
    fn terminate_cleanly(&mut self) {
        let raw = i32::try_from(self.child.id()).expect("pid fits an i32");
        let pid = Pid::from_raw(raw).expect("a child's pid is positive");
        kill_process(pid, Signal::TERM).expect("SIGTERM");
        let start = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            if start.elapsed() > DEADLINE {
                let _ = self.child.kill();
                let _ = self.child.wait();
                self.exit = self.child.try_wait().ok().flatten();
                panic!(
                    "no exit within {DEADLINE:?} after SIGTERM; log:\n{}",
                    self.log()
                );
            }
            thread::sleep(POLL);
        };
        self.exit = Some(status);
        assert_eq!(
            status.code(),
            Some(0),
            "exit after SIGTERM; log:\n{}",
            self.log()
        );
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.exit.is_none() && matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The numbers in the complete lines of the sink file.
fn numbers(sink: &Path) -> Vec<i64> {
    let text = fs::read_to_string(sink).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete
        .lines()
        .map(|line| {
            let record: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("sink line is not JSON ({e}): {line:?}"));
            record["value"]
                .as_i64()
                .unwrap_or_else(|| panic!("no number in {line:?}"))
        })
        .collect()
}

/// `custom-connector offsets list`: the committed `n` of the counter.
fn committed(dir: &Path, worker: &Path) -> i64 {
    let out = Command::new(BINARY)
        .args(["offsets", "list", "--connector", "counter", "--worker"])
        .arg(worker)
        .current_dir(dir)
        .output()
        .expect("run offsets list");
    assert!(out.status.success(), "offsets list failed: {out:?}");
    let listed: Value = serde_json::from_slice(&out.stdout).expect("offsets list prints JSON");
    assert_eq!(
        listed["offsets"][0]["partition"],
        serde_json::json!({"counter": "main"}),
        "{listed}"
    );
    listed["offsets"][0]["offset"]["n"]
        .as_i64()
        .unwrap_or_else(|| panic!("no committed n in {listed}"))
}

#[test]
fn the_binary_lists_counter_source_and_resumes_from_its_committed_offset() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let dir = dir.path();
    let worker = dir.join("worker.properties");
    let sink = dir.join("out.jsonl");
    fs::write(
        &worker,
        format!(
            "listeners=http://127.0.0.1:0\noffset.storage.file.filename={}\nsink=file:{}\n\
             offset.flush.interval.ms=100\n",
            dir.join("offsets.ferry").display(),
            sink.display()
        ),
    )
    .expect("write the worker file");
    let counter = dir.join("counter.properties");
    fs::write(
        &counter,
        "name=counter\nconnector.class=CounterSource\ntopic=counts\ninterval.ms=20\n",
    )
    .expect("write the connector file");
    let args = [Path::new("standalone"), &worker, &counter];

    let mut first = Running::start(dir, "first", &args);
    let url = first.rest_url();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(DEADLINE))
        .build()
        .into();
    let body = agent
        .get(format!("{url}/connector-plugins"))
        .call()
        .and_then(|mut r| r.body_mut().read_to_string())
        .unwrap_or_else(|e| panic!("GET {url}/connector-plugins: {e}"));
    let plugins: Value = serde_json::from_str(&body)
        .unwrap_or_else(|e| panic!("GET {url}/connector-plugins is not JSON ({e}): {body}"));
    assert!(
        plugins
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["class"] == "com.example.CounterSource")),
        "CounterSource is not listed: {plugins}"
    );
    first.wait_until("5 numbers in the sink", || {
        (numbers(&sink).len() >= 5).then_some(())
    });
    first.terminate_cleanly();
    let before = numbers(&sink);
    let last_committed = committed(dir, &worker);
    assert!(
        last_committed >= 5 && before.contains(&last_committed),
        "committed n = {last_committed}, the sink holds {before:?}"
    );

    let mut second = Running::start(dir, "second", &args);
    let first_new = second.wait_until("a number after the restart", || {
        numbers(&sink).get(before.len()).copied()
    });
    second.terminate_cleanly();
    assert_eq!(
        first_new,
        last_committed + 1,
        "after the restart the counter goes on right after its committed number (sink before: \
         {before:?})"
    );
}
