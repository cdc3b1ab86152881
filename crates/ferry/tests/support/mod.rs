//! Support for tests that run the real `ferry` binary as a child process.
//!
//! - [`Workspace`]: a temporary directory holding a test's input, configuration, offsets and sink files.
//! - [`Ferry`]: a running `ferry` process whose stdout and stderr go to files in the workspace. It is
//!   stopped with SIGTERM ([`Ferry::terminate`]) or SIGKILL ([`Ferry::kill`]); a process still
//!   running when its `Ferry` is dropped (a failed assertion unwinding) is killed and reaped, so no
//!   test leaves a process behind.
//! - [`run`]: a `ferry` command that is expected to exit by itself (`ferry offsets …`, a refused
//!   start), waited for with a deadline.
//! - [`wait_until`] and [`Ferry::wait_until`]: poll a condition until a generous deadline. Tests never
//!   assert on timing; they wait for what must eventually happen.
//! - [`SinkTail`], [`read_sink`], [`complete_len`]: read the JSON-lines file sink, complete lines only.

#![allow(dead_code)] // each test file uses a different part

use std::ffi::OsStr;
use std::fmt::Display;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};
use serde_json::Value;
use tempfile::TempDir;

/// The `ferry` binary built for these tests.
pub const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

/// How long any condition may take before a test gives up. Generous: the machine may be loaded.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// How often conditions are polled.
const POLL: Duration = Duration::from_millis(20);

/// A temporary directory for one test; removed when dropped.
pub struct Workspace {
    dir: TempDir,
}

impl Default for Workspace {
    fn default() -> Self {
        Self::new()
    }
}

impl Workspace {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("ferry-process-test-")
            .tempdir()
            .expect("create a temporary directory");
        Self { dir }
    }

    /// The directory itself (the working directory of every process spawned for it).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A path inside the workspace.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes (replaces) a file in the workspace and returns its path.
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.file(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("create the parent directory");
        }
        fs::write(&path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    /// Appends to a file in the workspace (creating it) with one `write`.
    pub fn append(&self, name: &str, contents: impl AsRef<[u8]>) {
        append(&self.file(name), contents.as_ref());
    }

    /// Writes a properties file of `key=value` lines, in order, and returns its path.
    pub fn properties(&self, name: &str, entries: &[(&str, &str)]) -> PathBuf {
        let text: String = entries.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        self.write(name, text)
    }

    /// A worker file storing offsets in `offsets.ferry` and records in `sink.jsonl` of the workspace,
    /// committing every `flush_interval_ms`, plus `extra` entries.
    pub fn worker(&self, flush_interval_ms: u64, extra: &[(&str, &str)]) -> PathBuf {
        let offsets = self.offsets_path().display().to_string();
        let sink = format!("file:{}", self.sink_path().display());
        let interval = flush_interval_ms.to_string();
        let mut entries = vec![
            // A free port: tests run side by side, and 8083 may be taken.
            ("listeners", "http://127.0.0.1:0"),
            ("offset.storage.file.filename", offsets.as_str()),
            ("sink", sink.as_str()),
            ("offset.flush.interval.ms", interval.as_str()),
        ];
        entries.extend_from_slice(extra);
        self.properties("worker.properties", &entries)
    }

    /// The offsets file of [`Workspace::worker`].
    pub fn offsets_path(&self) -> PathBuf {
        self.file("offsets.ferry")
    }

    /// The sink file of [`Workspace::worker`].
    pub fn sink_path(&self) -> PathBuf {
        self.file("sink.jsonl")
    }

    /// Runs `ferry offsets list` for `connector` and returns its `offsets` array; panics unless it
    /// succeeds.
    pub fn list_offsets(&self, worker: &Path, connector: &str) -> Vec<Value> {
        let out = self.offsets_ok(&[
            "list",
            "--worker",
            &path_str(worker),
            "--connector",
            connector,
        ]);
        offsets_of(&out.stdout)
    }

    /// Runs `ferry offsets ARGS…` in the workspace; panics unless it exits 0.
    pub fn offsets_ok(&self, args: &[&str]) -> Finished {
        let mut full = vec!["offsets"];
        full.extend_from_slice(args);
        let out = run(self.path(), &full);
        assert!(
            out.status.success(),
            "`ferry {}` failed with {}:\nstdout: {}\nstderr: {}",
            full.join(" "),
            out.status,
            out.stdout,
            out.stderr
        );
        out
    }
}

/// The `offsets` array of `ferry offsets` output (`{"offsets":[…]}`).
pub fn offsets_of(stdout: &str) -> Vec<Value> {
    let value: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("`ferry offsets` printed no JSON ({e}): {stdout:?}"));
    value["offsets"]
        .as_array()
        .unwrap_or_else(|| panic!("no \"offsets\" array in {stdout:?}"))
        .clone()
}

/// Appends `bytes` to `path` with one `write` (creating the file).
pub fn append(path: &Path, bytes: &[u8]) {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open {} for appending: {e}", path.display()));
    file.write_all(bytes)
        .unwrap_or_else(|e| panic!("append to {}: {e}", path.display()));
}

/// A path as a `&str` argument.
pub fn path_str(path: &Path) -> String {
    path.to_str().expect("test paths are UTF-8").to_owned()
}

/// A `ferry` process that ran to completion.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `ferry ARGS…` with `cwd` as its working directory and waits (up to [`DEADLINE`]) for it to exit.
pub fn run(cwd: &Path, args: &[&str]) -> Finished {
    let out_dir = tempfile::tempdir().expect("create a directory for the output");
    let stdout = out_dir.path().join("stdout");
    let stderr = out_dir.path().join("stderr");
    let mut ferry = Ferry::spawn(cwd, args.iter().map(OsStr::new), &stdout, &stderr);
    let status = ferry.wait_exit();
    Finished {
        status,
        stdout: read_lossy(&stdout),
        stderr: read_lossy(&stderr),
    }
}

/// A running `ferry` process. Killed (SIGKILL) and reaped when dropped if still running.
pub struct Ferry {
    child: Child,
    /// Set once the child was reaped.
    exit: Option<ExitStatus>,
    /// What the process runs, for messages.
    what: String,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Ferry {
    /// Starts `ferry standalone WORKER CONNECTORS…` in the workspace; its stdout and stderr go to
    /// `<name>.stdout` and `<name>.stderr` there.
    pub fn standalone(ws: &Workspace, name: &str, worker: &Path, connectors: &[&Path]) -> Ferry {
        let mut args = vec![OsStr::new("standalone"), worker.as_os_str()];
        args.extend(connectors.iter().map(|c| c.as_os_str()));
        Ferry::spawn(
            ws.path(),
            args,
            &ws.file(&format!("{name}.stdout")),
            &ws.file(&format!("{name}.stderr")),
        )
    }

    /// Starts `ferry ARGS…` in `cwd` with stdout and stderr written to the given files. The log level
    /// is fixed at `info` so the tests see the same log whatever `RUST_LOG` the caller has.
    pub fn spawn<'a>(
        cwd: &Path,
        args: impl IntoIterator<Item = &'a OsStr>,
        stdout: &Path,
        stderr: &Path,
    ) -> Ferry {
        Ferry::spawn_command(Command::new(FERRY), "ferry", cwd, args, stdout, stderr)
    }

    /// As [`spawn`](Self::spawn), inside the network namespace `netns` (`ip netns exec`, which execs
    /// `ferry`: the child is the ferry process itself, so signals reach it).
    pub fn spawn_in_netns<'a>(
        netns: &str,
        cwd: &Path,
        args: impl IntoIterator<Item = &'a OsStr>,
        stdout: &Path,
        stderr: &Path,
    ) -> Ferry {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", netns, FERRY]);
        let what = format!("ferry (in network namespace {netns})");
        Ferry::spawn_command(command, &what, cwd, args, stdout, stderr)
    }

    fn spawn_command<'a>(
        mut command: Command,
        name: &str,
        cwd: &Path,
        args: impl IntoIterator<Item = &'a OsStr>,
        stdout: &Path,
        stderr: &Path,
    ) -> Ferry {
        let args: Vec<&OsStr> = args.into_iter().collect();
        let what = format!(
            "{name} {}",
            args.iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" ")
        );
        let out = File::create(stdout).expect("create the stdout file");
        let err = File::create(stderr).expect("create the stderr file");
        let child = command
            .args(&args)
            .current_dir(cwd)
            .env("RUST_LOG", "info")
            .env_remove("RUST_BACKTRACE")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("start {what}: {e}"));
        Ferry {
            child,
            exit: None,
            what,
            stdout: stdout.to_path_buf(),
            stderr: stderr.to_path_buf(),
        }
    }

    /// Everything the process wrote to stderr (its log) so far.
    pub fn log(&self) -> String {
        read_lossy(&self.stderr)
    }

    /// Everything the process wrote to stdout so far.
    pub fn stdout(&self) -> String {
        read_lossy(&self.stdout)
    }

    /// Whether the process is still running (reaps it if it exited).
    pub fn is_running(&mut self) -> bool {
        self.poll_exit().is_none()
    }

    fn poll_exit(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self
                .child
                .try_wait()
                .unwrap_or_else(|e| panic!("wait for {}: {e}", self.what));
        }
        self.exit
    }

    /// Polls `check` until it returns `Some`, failing the test if the process exits first or
    /// [`DEADLINE`] passes; the failure shows the process's log.
    pub fn wait_until<T>(&mut self, what: impl Display, check: impl FnMut() -> Option<T>) -> T {
        self.wait_until_every(POLL, what, check)
    }

    /// [`Ferry::wait_until`] without pausing between checks: for a test that must act the moment
    /// something happens.
    pub fn spin_until<T>(&mut self, what: impl Display, check: impl FnMut() -> Option<T>) -> T {
        self.wait_until_every(Duration::ZERO, what, check)
    }

    fn wait_until_every<T>(
        &mut self,
        poll: Duration,
        what: impl Display,
        mut check: impl FnMut() -> Option<T>,
    ) -> T {
        let start = Instant::now();
        loop {
            if let Some(value) = check() {
                return value;
            }
            if let Some(status) = self.poll_exit() {
                // One last look: the condition may have become true just before the exit.
                if let Some(value) = check() {
                    return value;
                }
                panic!(
                    "{} exited ({status}) while waiting for {what}; its log:\n{}",
                    self.what,
                    self.log()
                );
            }
            if start.elapsed() > DEADLINE {
                panic!(
                    "timed out after {DEADLINE:?} waiting for {what} from {}; its log:\n{}",
                    self.what,
                    self.log()
                );
            }
            if poll.is_zero() {
                thread::yield_now();
            } else {
                thread::sleep(poll);
            }
        }
    }

    /// Waits for the REST API's `REST API listening on http[s]://HOST:PORT` log line; returns the URL.
    pub fn rest_url(&mut self) -> String {
        let log = self.wait_for_log("REST API listening on http");
        let start = log
            .find("REST API listening on http")
            .expect("the line was found")
            + "REST API listening on ".len();
        log[start..]
            .split_whitespace()
            .next()
            .expect("a URL follows")
            .to_owned()
    }

    /// Waits until the log contains `needle`; returns the whole log.
    pub fn wait_for_log(&mut self, needle: &str) -> String {
        let stderr = self.stderr.clone();
        self.wait_until(format!("the log line {needle:?}"), || {
            let log = read_lossy(&stderr);
            log.contains(needle).then_some(log)
        })
    }

    /// Sends SIGTERM and waits (up to [`DEADLINE`]) for the process to exit; returns its status.
    pub fn terminate(&mut self) -> ExitStatus {
        self.signal(Signal::TERM);
        self.wait_exit()
    }

    /// SIGTERM, then asserts a clean exit (code 0).
    pub fn terminate_cleanly(&mut self) {
        let status = self.terminate();
        assert_eq!(
            status.code(),
            Some(0),
            "{} did not exit cleanly after SIGTERM ({status}); its log:\n{}",
            self.what,
            self.log()
        );
    }

    /// SIGKILL ([`Child::kill`]) and reap; returns the status.
    pub fn kill(&mut self) -> ExitStatus {
        if let Some(status) = self.poll_exit() {
            return status;
        }
        // Fails only if the process already exited, which `wait` then reports.
        let _ = self.child.kill();
        self.wait_exit()
    }

    /// Waits (up to [`DEADLINE`]) for the process to exit by itself; kills it and fails otherwise.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.poll_exit() {
                return status;
            }
            if start.elapsed() > DEADLINE {
                let _ = self.child.kill();
                let _ = self.child.wait().map(|s| self.exit = Some(s));
                panic!(
                    "{} did not exit within {DEADLINE:?}; its log:\n{}",
                    self.what,
                    self.log()
                );
            }
            thread::sleep(POLL);
        }
    }

    /// Sends `signal` to the process, which must still be running (never signal a reaped pid: it may
    /// have been reused).
    pub fn signal(&mut self, signal: Signal) {
        assert!(
            self.is_running(),
            "{} exited ({:?}) before it could be signalled; its log:\n{}",
            self.what,
            self.exit,
            self.log()
        );
        let raw = i32::try_from(self.child.id()).expect("pid fits an i32");
        let pid = Pid::from_raw(raw).expect("a child's pid is positive");
        kill_process(pid, signal).unwrap_or_else(|e| panic!("signal {}: {e}", self.what));
    }
}

impl Drop for Ferry {
    fn drop(&mut self) {
        if self.exit.is_none() && matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Whether `status` is a death by SIGKILL.
pub fn killed_by_sigkill(status: ExitStatus) -> bool {
    status.signal() == Some(Signal::KILL.as_raw())
}

/// Polls `check` until it returns `Some`, failing the test after [`DEADLINE`].
pub fn wait_until<T>(what: impl Display, mut check: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            start.elapsed() <= DEADLINE,
            "timed out after {DEADLINE:?} waiting for {what}"
        );
        thread::sleep(POLL);
    }
}

/// A file's content as text (empty if it does not exist).
pub fn read_lossy(path: &Path) -> String {
    match fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => panic!("read {}: {e}", path.display()),
    }
}

/// The length of `path` up to and including its last `\n`: what remains of a sink file once a torn
/// last line is dropped (0 if the file does not exist).
pub fn complete_len(path: &Path) -> u64 {
    match fs::read(path) {
        Ok(bytes) => bytes
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i as u64 + 1),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => panic!("read {}: {e}", path.display()),
    }
}

/// Every complete line of a sink file, parsed.
pub fn read_sink(path: &Path) -> Vec<Value> {
    let mut tail = SinkTail::new(path);
    tail.read_new();
    tail.lines.iter().map(|l| parse_line(l)).collect()
}

/// Parses one sink line, failing the test if it is not JSON.
pub fn parse_line(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("sink line is not JSON ({e}): {line:?}"))
}

/// Reads a sink file incrementally: each [`SinkTail::read_new`] adds the complete lines written since.
///
/// Only complete lines are consumed; the bytes of an unterminated last line are read again next
/// time, so a torn line that the sink truncates on open is never glued to a later line.
pub struct SinkTail {
    path: PathBuf,
    /// Byte position right after the last complete line read.
    pos: u64,
    /// Every complete line read, without its `\n`.
    pub lines: Vec<String>,
}

impl SinkTail {
    /// Reads `path` from its beginning.
    pub fn new(path: &Path) -> Self {
        Self::from(path, 0)
    }

    /// Reads `path` from byte `pos`, which must be the start of a line.
    pub fn from(path: &Path, pos: u64) -> Self {
        Self {
            path: path.to_path_buf(),
            pos,
            lines: Vec::new(),
        }
    }

    /// Reads the complete lines written since the last call; returns how many were added.
    pub fn read_new(&mut self) -> usize {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return 0,
            Err(e) => panic!("open {}: {e}", self.path.display()),
        };
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(self.pos))
            .and_then(|_| file.read_to_end(&mut bytes))
            .unwrap_or_else(|e| panic!("read {}: {e}", self.path.display()));
        let Some(end) = bytes.iter().rposition(|&b| b == b'\n') else {
            return 0;
        };
        let text = std::str::from_utf8(&bytes[..end])
            .unwrap_or_else(|e| panic!("{} is not UTF-8: {e}", self.path.display()));
        let before = self.lines.len();
        self.lines.extend(text.split('\n').map(str::to_owned));
        self.pos += end as u64 + 1;
        self.lines.len() - before
    }

    /// Reads until at least `count` lines were read in total; returns them.
    pub fn wait_for(&mut self, ferry: &mut Ferry, count: usize) -> &[String] {
        let path = self.path.display().to_string();
        ferry.wait_until(format!("{count} lines in the sink {path}"), || {
            self.read_new();
            (self.lines.len() >= count).then_some(())
        });
        &self.lines
    }
}

impl Ferry {
    /// The process id (for reading `/proc/PID/…`); only meaningful while the process runs.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// The fields FileStreamSource adds to its `{"position": …}` offset to identify the file.
pub const FILE_IDENTITY_FIELDS: [&str; 4] = ["dev", "ino", "fp", "fp_len"];

/// `value` with FileStreamSource's file identity fields removed from every object holding a
/// `position`: for tests that compare positions, not inode numbers.
pub fn without_file_identity(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let is_file_offset = map.contains_key("position");
            map.iter()
                .filter(|(k, _)| !(is_file_offset && FILE_IDENTITY_FIELDS.contains(&k.as_str())))
                .map(|(k, v)| (k.clone(), without_file_identity(v)))
                .collect::<serde_json::Map<_, _>>()
                .into()
        }
        Value::Array(items) => items.iter().map(without_file_identity).collect(),
        other => other.clone(),
    }
}

/// [`without_file_identity`] of each entry.
pub fn without_file_identities(values: &[Value]) -> Vec<Value> {
    values.iter().map(without_file_identity).collect()
}
