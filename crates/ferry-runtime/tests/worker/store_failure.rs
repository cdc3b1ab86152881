//! A store that can no longer commit (a non-retriable error, e.g. a file store poisoned by a full
//! disk) must not look healthy: every task depending on it fails with the store error as its trace and
//! stops polling, and the worker reports the failure (the process exits non-zero on it).

use ferry_runtime::TaskState;

use crate::support::{Harness, Probe, TestConnector, fast, records, wait_log};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_can_no_longer_commit_fails_every_task_and_stops_polling() {
    let h = Harness::new(fast());
    let (writer, idle) = (Probe::new(), Probe::new());
    h.start("poisoned-w", false, &writer);
    h.start("poisoned-i", false, &idle);
    writer.push(records("a", 1..=3));
    h.wait_committed("poisoned-w", "a", 3).await;
    assert!(h.worker.store_failure().is_none());

    h.store.fail_sets_fatally(true);
    writer.push(records("a", 4..=6));
    // The writing task finds out at its next commit; the idle one (nothing to commit) with it.
    h.wait_state("poisoned-w", TaskState::Failed).await;
    h.wait_state("poisoned-i", TaskState::Failed).await;
    for name in ["poisoned-w", "poisoned-i"] {
        let trace = h.status(name).trace.unwrap_or_default();
        assert!(
            trace.contains("No space left on device") && trace.contains("restart the worker"),
            "{name}: the store error and the way out are the trace: {trace}"
        );
        // Stopped, not just marked: its loop ended (no more polls, no more records delivered).
        wait_log(&format!("{name}-0"), "INFO", &["task stopped (FAILED)"]).await;
    }
    let polls = writer.polls();
    writer.push(records("a", 7..=9));
    assert_eq!(writer.polls(), polls, "a failed task does not poll");
    assert!(!h.sink.accepted().contains(&"a:7".to_owned()));
    assert_eq!(h.committed("poisoned-w", "a").await, Some(3));
    let failure = h.worker.store_failure().unwrap_or_default();
    assert!(failure.contains("No space left on device"), "{failure}");
    h.worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_restarted_after_the_store_failed_fails_at_once_with_the_store_error() {
    let h = Harness::new(fast());
    let probe = Probe::new();
    h.start("poisoned-r", false, &probe);
    h.store.fail_sets_fatally(true);
    probe.push(records("a", 1..=2));
    h.wait_state("poisoned-r", TaskState::Failed).await;
    let starts = probe.starts.load(std::sync::atomic::Ordering::SeqCst);

    h.worker
        .restart_task("poisoned-r", 0, &TestConnector::new(&probe))
        .await
        .expect("the task exists");
    h.wait_state("poisoned-r", TaskState::Failed).await;
    let trace = h.status("poisoned-r").trace.unwrap_or_default();
    assert!(trace.contains("No space left on device"), "{trace}");
    assert_eq!(
        probe.starts.load(std::sync::atomic::Ordering::SeqCst),
        starts,
        "the new instance is not started against a store that cannot commit"
    );
    h.worker.shutdown().await;
}

/// A batch too large is refused without being retriable, but the store is fine: only that commit
/// fails, the task keeps running, and the store is not declared failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_too_large_does_not_fail_the_store() {
    let h = Harness::new(fast());
    let probe = Probe::new();
    h.start("toolarge", false, &probe);
    h.store.refuse_batches_as_too_large(true);
    probe.push(records("a", 1..=2));
    crate::support::eventually("commits refused twice", || {
        crate::support::TestStore::count(&h.store.failed_sets) >= 2
    })
    .await;
    assert_eq!(h.status("toolarge").state, TaskState::Running);
    assert!(h.worker.store_failure().is_none());
    h.store.refuse_batches_as_too_large(false);
    h.wait_committed("toolarge", "a", 2).await;
    h.worker.shutdown().await;
}

/// The store fails at the final commit of a stop (no periodic commit ran): the task's final status
/// is FAILED with the store error, and the worker reports the failure (the process exits non-zero).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_failing_at_the_final_commit_fails_the_task_and_the_worker() {
    let h = Harness::new(crate::support::settings(3_600_000, 2_000, 10_000));
    let probe = Probe::new();
    h.start("poisoned-final", false, &probe);
    probe.push(records("a", 1..=2));
    crate::support::eventually("a:2 delivered", || probe.has_commit_record("a:2")).await;
    h.store.fail_sets_fatally(true);
    let finals = h
        .worker
        .stop_connector("poisoned-final")
        .await
        .expect("the connector exists");
    let status = &finals[0].1;
    assert_eq!(status.state, TaskState::Failed);
    assert!(
        status
            .trace
            .as_deref()
            .is_some_and(|t| t.contains("No space left on device")),
        "{status:?}"
    );
    assert!(h.worker.store_failure().is_some());
}
