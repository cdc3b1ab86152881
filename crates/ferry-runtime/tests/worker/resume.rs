//! Starting from committed offsets (the restart path), and the runtime's partition-key mismatch watch.

use ferry_api::{ConnectMap, SourcePartition};
use ferry_offsets::MemoryStore;

use crate::support::{
    Harness, Probe, TestStore, eventually, fast, lock, offset, partition, record, record_in,
    records, task_logs, wait_log,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_connector_resumes_from_its_committed_offsets() {
    let memory = MemoryStore::new();
    let first = Harness::over(fast(), TestStore::over(memory.clone()));
    let probe = Probe::new();
    first.start("restart", false, &probe);
    probe.push(records("a", 1..=5));
    first.wait_committed("restart", "a", 5).await;
    first.stop("restart").await;

    // A new worker over the same offsets (a MemoryStore clone is a reopen).
    let second = Harness::over(fast(), TestStore::over(memory.clone()));
    let probe = Probe::new();
    probe.look_up(vec![partition("a"), partition("b")]);
    second.start("restart", false, &probe);
    eventually("start() looked up its offsets", || {
        lock(&probe.resumed).is_some()
    })
    .await;
    let resumed = lock(&probe.resumed).clone().expect("looked up");
    assert_eq!(
        resumed,
        vec![(partition("a"), Some(offset(5))), (partition("b"), None)]
    );
    wait_log(
        "restart-0",
        "INFO",
        &[r#"partition {"p":"a"} resumes from committed offset {"n":5}"#],
    )
    .await;
    wait_log(
        "restart-0",
        "INFO",
        &[r#"partition {"p":"b"} has no committed offset"#],
    )
    .await;

    probe.push(vec![record("a", 6), record("b", 1)]);
    second.wait_committed("restart", "a", 6).await;
    second.wait_committed("restart", "b", 1).await;
    second.worker.shutdown().await;
}

fn map(key: &str, value: impl Into<ferry_api::Value>) -> SourcePartition {
    ConnectMap::new().with(key, value).expect("valid map")
}

/// Runs a task that looks up `looked_up` in `start()` and emits one record of `emitted`; returns the
/// runtime's WARN lines about the task.
async fn warnings_for(
    name: &str,
    looked_up: SourcePartition,
    emitted: SourcePartition,
) -> Vec<String> {
    let h = Harness::new(fast());
    let probe = Probe::new();
    probe.look_up(vec![looked_up]);
    h.start(name, false, &probe);
    probe.push(vec![record_in(emitted, "m", 1)]);
    eventually("the record delivered", || probe.has_commit_record("m:1")).await;
    h.worker.shutdown().await;
    task_logs(&format!("{name}-0"), "WARN")
}

fn assert_mismatch_warned(warnings: &[String], emitted: &str, looked_up: &str) {
    let emitted = format!("emitted={emitted}");
    let looked_up = format!("looked_up={looked_up}");
    assert!(
        warnings.iter().any(|w| w.contains("never looked up")
            && w.contains(&emitted)
            && w.contains(&looked_up)),
        "no mismatch WARN naming {emitted} and {looked_up}: {warnings:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_name_case_mismatch_is_warned() {
    let warnings = warnings_for("mismatchcase", map("filename", "a"), map("Filename", "a")).await;
    assert_mismatch_warned(&warnings, r#"{"Filename":"a"}"#, r#"{"filename":"a"}"#);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_type_mismatch_is_warned() {
    let warnings = warnings_for("mismatchtype", map("partition", 1), map("partition", "1")).await;
    assert_mismatch_warned(&warnings, r#"{"partition":"1"}"#, r#"{"partition":1}"#);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_emitting_what_it_looked_up_gets_no_warning() {
    let warnings = warnings_for("mismatchnone", map("filename", "a"), map("filename", "a")).await;
    assert!(warnings.is_empty(), "unexpected WARNs: {warnings:#?}");
}
