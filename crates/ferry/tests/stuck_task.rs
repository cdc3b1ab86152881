//! A connector blocked in a system call (FileStreamSource opening a FIFO that has no writer: the
//! `open()` never returns) must not make the worker unstoppable: SIGTERM ends the process within
//! `task.shutdown.graceful.timeout.ms` (plus a moment), and the stuck task is reported.

mod support;

use std::process::Command;

use support::{Ferry, Workspace, path_str};

#[test]
fn sigterm_ends_a_worker_whose_task_is_stuck_in_a_blocking_call() {
    let ws = Workspace::new();
    let fifo = ws.file("input.fifo");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap_or_else(|e| panic!("cannot run mkfifo: {e}"));
    assert!(made.success(), "mkfifo {} failed", fifo.display());
    let worker = ws.worker(100, &[("task.shutdown.graceful.timeout.ms", "1000")]);
    let file = path_str(&fifo);
    let connector = ws.properties(
        "fifo.properties",
        &[
            ("name", "fifo"),
            ("connector.class", "FileStreamSource"),
            ("file", file.as_str()),
            ("topic", "lines"),
        ],
    );

    let mut ferry = Ferry::standalone(&ws, "stuck", &worker, &[&connector]);
    ferry.rest_url();
    // The lookup of committed offsets comes right before the open.
    ferry.wait_for_log("has no committed offset");
    // Whether the task is stuck or (once FileStreamSource refuses FIFOs) failed, the stop is bounded.
    let status = ferry.terminate();
    let log = ferry.log();
    assert!(
        status.code().is_some(),
        "ferry did not exit by itself ({status}); log:\n{log}"
    );
    assert!(
        log.contains("did not stop within task.shutdown.graceful.timeout.ms=1000")
            || log.contains("task failed"),
        "the stuck (or refused) task is reported; log:\n{log}"
    );
}
