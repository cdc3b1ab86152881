//! A full disk under a running `ferry standalone`, for real: the offsets file or the sink file lives on
//! a small tmpfs that the test fills (ENOSPC), then frees.
//!
//! - Offsets: the store is poisoned, so the task fails with the store error as its trace, stops
//!   polling, and SIGTERM exits non-zero; after space returns, a restarted worker resumes from the last
//!   committed offset and loses nothing.
//! - Sink: the task fails with the sink error (each cause once) without waiting out
//!   `offset.flush.timeout.ms` for acknowledgements a failed sink can never give; after space returns,
//!   a task restart over REST reopens the sink and delivery goes on.
//!
//! Mounting a tmpfs needs CAP_SYS_ADMIN: run as root, or inside a user and mount namespace
//! (`unshare -rm cargo test -p ferry --test disk_full`). Without it the tests fail, saying so: a
//! skipped test would pass without testing anything.

mod rest_support;
mod support;

use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use rest_support::Api;
use serde_json::Value;
use support::{Ferry, SinkTail, Workspace, path_str, read_sink};

/// A tmpfs mounted on a directory of the workspace; unmounted when dropped.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    fn mount(dir: PathBuf, bytes: u64) -> Tmpfs {
        fs::create_dir_all(&dir).expect("create the mount point");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(&dir)
            .output()
            .unwrap_or_else(|e| panic!("cannot run mount: {e}"));
        assert!(
            out.status.success(),
            "this test needs a small tmpfs it can fill, for a real ENOSPC, but `mount -t tmpfs` failed: {}\
             Run it as root, or in a user and mount namespace: unshare -rm cargo test -p ferry --test disk_full",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs { dir }
    }

    fn filler(&self) -> PathBuf {
        self.dir.join("filler")
    }

    /// Writes a file until the file system is full.
    fn fill(&self) {
        let mut file = File::create(self.filler()).expect("create the filler");
        let block = vec![0_u8; 4096];
        loop {
            match file.write(&block) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(28) => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => panic!("filling the tmpfs: {e}"),
            }
        }
        // Small writes may still fit in a partly used page: fill those too.
        let _ = file.write_all(&block[..1]);
        let _ = file.sync_all();
    }

    /// Frees the space [`Tmpfs::fill`] took.
    fn free(&self) {
        fs::remove_file(self.filler()).expect("remove the filler");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazy: a process still holding a file in it must not keep the mount (or the test) alive.
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

fn lines(range: std::ops::Range<usize>) -> String {
    range.map(|i| format!("line {i:05}\n")).collect()
}

fn file_source(ws: &Workspace, input: &Path) -> PathBuf {
    let file = path_str(input);
    ws.properties(
        "file-source.properties",
        &[
            ("name", "files"),
            ("connector.class", "FileStreamSource"),
            ("file", file.as_str()),
            ("topic", "lines"),
        ],
    )
}

/// The first task's status once `check` accepts it.
fn wait_task(ferry: &mut Ferry, api: &Api, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    ferry.wait_until(format!("task files-0 {what}"), || {
        let status = api.get("/connectors/files/tasks/0/status").json();
        check(&status).then_some(status)
    })
}

fn payloads(path: &Path) -> Vec<String> {
    read_sink(path)
        .iter()
        .map(|v| v["value"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_full_offsets_disk_fails_the_task_and_the_exit_and_a_restart_resumes_without_loss() {
    let ws = Workspace::new();
    let disk = Tmpfs::mount(ws.file("disk"), 1 << 20);
    let offsets = disk.dir.join("offsets.ferry");
    let offsets_name = path_str(&offsets);
    let input = ws.write("input.txt", lines(0..50));
    let worker = ws.worker(
        50,
        &[("offset.storage.file.filename", offsets_name.as_str())],
    );
    let connector = file_source(&ws, &input);

    let mut ferry = Ferry::standalone(&ws, "full", &worker, &[&connector]);
    let api = Api::new(&ferry.rest_url());
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, 50);
    let end = lines(0..50).len() as u64;
    ferry.wait_until("the 50 lines committed", || {
        let offsets = api.get("/connectors/files/offsets").json();
        (offsets["offsets"][0]["offset"]["position"].as_u64() == Some(end)).then_some(())
    });

    disk.fill();
    // Appends fit in the last page the file already has; keep lines coming until one does not.
    let status = append_until_failed(&mut ferry, &api, &ws, 50);
    let appended = lines_in(&input);
    let trace = status["trace"].as_str().unwrap_or_default();
    assert!(
        trace.contains(&offsets_name)
            && trace.contains("No space left on device")
            && trace.contains("restart the worker"),
        "the trace names the store, the error and the way out: {trace}"
    );
    assert_eq!(
        trace.matches("No space left on device").count(),
        1,
        "each cause once: {trace}"
    );
    ferry.wait_for_log("task stopped (FAILED)");
    let status = api.get("/connectors/files/status").json();
    assert_eq!(
        status["connector"]["state"], "FAILED",
        "a connector whose offsets cannot be committed is not RUNNING: {status}"
    );
    let exit = ferry.terminate();
    assert_ne!(
        exit.code(),
        Some(0),
        "a worker whose store failed must not exit as if all was well; log:\n{}",
        ferry.log()
    );
    assert!(
        ferry.log().contains("offset store"),
        "the exit says why; log:\n{}",
        ferry.log()
    );

    disk.free();
    let total = appended + 20;
    ws.append("input.txt", lines(appended..total));
    let delivered = payloads(&ws.sink_path()).len();
    let mut again = Ferry::standalone(&ws, "after", &worker, &[&connector]);
    let last = format!("line {:05}", total - 1);
    again.wait_until("every line delivered", || {
        payloads(&ws.sink_path()).contains(&last).then_some(())
    });
    again.terminate_cleanly();
    let got = payloads(&ws.sink_path());
    for i in 0..total {
        let line = format!("line {i:05}");
        assert!(got.contains(&line), "{line} is lost");
    }
    // Re-delivered: only what was delivered after the last commit that worked (at most the lines
    // appended once the disk was full), never the lines committed before.
    assert!(
        got.len() <= total + (delivered - 50),
        "{} lines for {total} in the input",
        got.len()
    );
}

fn lines_in(input: &Path) -> usize {
    fs::read_to_string(input)
        .expect("read the input")
        .lines()
        .count()
}

/// Appends a few lines at a time to `input.txt` (from line `from`) until the task is FAILED.
fn append_until_failed(ferry: &mut Ferry, api: &Api, ws: &Workspace, from: usize) -> Value {
    let mut next = from;
    ferry.wait_until("task files-0 FAILED", || {
        let status = api.get("/connectors/files/tasks/0/status").json();
        if status["state"] == "FAILED" {
            return Some(status);
        }
        ws.append("input.txt", lines(next..next + 5));
        next += 5;
        None
    })
}

#[test]
fn a_full_sink_disk_fails_the_task_and_a_task_restart_reopens_the_sink() {
    let ws = Workspace::new();
    let disk = Tmpfs::mount(ws.file("disk"), 1 << 20);
    let sink_path = disk.dir.join("sink.jsonl");
    let sink = format!("file:{}", path_str(&sink_path));
    let input = ws.write("input.txt", lines(0..50));
    // A flush timeout longer than the test's deadline: a stop that waited it out would fail the test.
    let worker = ws.worker(
        50,
        &[
            ("sink", sink.as_str()),
            ("offset.flush.timeout.ms", "120000"),
        ],
    );
    let connector = file_source(&ws, &input);

    let mut ferry = Ferry::standalone(&ws, "full", &worker, &[&connector]);
    let api = Api::new(&ferry.rest_url());
    SinkTail::new(&sink_path).wait_for(&mut ferry, 50);

    disk.fill();
    let status = append_until_failed(&mut ferry, &api, &ws, 50);
    let appended = lines_in(&input);
    let trace = status["trace"].as_str().unwrap_or_default();
    assert!(
        trace.contains(&path_str(&sink_path)) && trace.contains("No space left on device"),
        "{trace}"
    );
    assert_eq!(
        trace.matches("No space left on device").count(),
        1,
        "each cause once: {trace}"
    );

    // Wound down (final commit, stop()) without waiting for acknowledgements that cannot come.
    ferry.wait_for_log("task stopped (FAILED)");

    disk.free();
    api.post("/connectors/files/tasks/0/restart", None)
        .expect(204);
    wait_task(&mut ferry, &api, "RUNNING", |s| s["state"] == "RUNNING");
    let total = appended + 20;
    ws.append("input.txt", lines(appended..total));
    ferry.wait_until("every line in the reopened sink", || {
        let got = payloads(&sink_path);
        (0..total)
            .all(|i| got.contains(&format!("line {i:05}")))
            .then_some(())
    });
    ferry.terminate_cleanly();
}
