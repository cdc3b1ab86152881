//! A sink that takes a poll's records together (`RecordSink::try_send_batch`): one delivery for
//! the batch, offsets committed exactly as record by record, and what it does not take at once
//! sent alone with the per-record rules (waiting, retries, a stop).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use ferry_runtime::TaskState;

use crate::support::{Harness, Plan, Probe, eventually, fast, record};

/// A harness whose sink takes batches, and a probe for a task that wants no records back (so the
/// loop hands its records over in batches).
fn batching() -> (Harness, Arc<Probe>) {
    let h = Harness::new(fast());
    h.sink.batches.store(true, Ordering::SeqCst);
    let probe = Probe::new();
    probe.refuse_delivered.store(true, Ordering::SeqCst);
    (h, probe)
}

fn two_partitions() -> Vec<ferry_api::SourceRecord> {
    vec![
        record("a", 1),
        record("b", 1),
        record("a", 2),
        record("b", 2),
        record("a", 3),
    ]
}

/// The batch is one delivery: nothing of it is committed while one of its records is held, and
/// once it resolves each partition commits its last record, as record by record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_the_sink_took_at_once_commits_each_partitions_last_record_once_delivered() {
    let (h, probe) = batching();
    h.sink.hold(&["a:2"]);
    h.start("batch-held", false, &probe);
    probe.push(two_partitions());
    eventually("a:2 held", || h.sink.is_held("a:2")).await;
    assert_eq!(h.sink.batches_taken(), [5], "one call took the whole poll");
    probe.wait_commits(2).await;
    assert_eq!(h.committed("batch-held", "a").await, None);
    assert_eq!(h.committed("batch-held", "b").await, None);
    h.sink.resolve("a:2");
    h.wait_committed("batch-held", "a", 3).await;
    h.wait_committed("batch-held", "b", 2).await;
    assert_eq!(h.sink.attempts("a:3"), 1, "each record handed over once");
    h.worker.shutdown().await;
}

/// A failed record of a batch fails the task (errors.tolerance=none); its partition commits no
/// offset past it, the other partition's delivered records are committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_record_of_a_batch_fails_the_task_and_its_partition_does_not_pass_it() {
    let (h, probe) = batching();
    h.sink.set_policy(|key, _| {
        if key == "a:2" {
            Plan::FailDelivery("disk full".to_owned())
        } else {
            Plan::Ack
        }
    });
    h.start("batch-failed", false, &probe);
    probe.push(two_partitions());
    h.wait_state("batch-failed", TaskState::Failed).await;
    let trace = h.status("batch-failed").trace.unwrap_or_default();
    assert!(trace.contains("disk full"), "trace: {trace}");
    h.wait_committed("batch-failed", "b", 2).await;
    assert_eq!(
        h.committed("batch-failed", "a").await,
        None,
        "a:3 was delivered, but behind the failed a:2"
    );
    h.worker.shutdown().await;
}

/// Under errors.tolerance=all a failed record of a batch counts as delivered, as one sent alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_record_of_a_batch_is_counted_as_delivered_when_tolerated() {
    let (h, probe) = batching();
    h.sink.set_policy(|key, _| {
        if key == "a:2" {
            Plan::FailDelivery("refused".to_owned())
        } else {
            Plan::Ack
        }
    });
    h.start("batch-tolerated", true, &probe);
    probe.push(two_partitions());
    h.wait_committed("batch-tolerated", "a", 3).await;
    h.wait_committed("batch-tolerated", "b", 2).await;
    assert_eq!(h.status("batch-tolerated").state, TaskState::Running);
    h.worker.shutdown().await;
}

/// A record the sink refuses (retriably) is sent alone and retried; the records after it follow in
/// a batch, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_record_is_retried_alone_and_the_rest_follow_in_order() {
    let (h, probe) = batching();
    h.sink.set_policy(|key, attempt| {
        if key == "a:2" && attempt == 0 {
            Plan::Refuse { retriable: true }
        } else {
            Plan::Ack
        }
    });
    h.start("batch-retried", false, &probe);
    probe.push(two_partitions());
    h.wait_committed("batch-retried", "a", 3).await;
    h.wait_committed("batch-retried", "b", 2).await;
    assert_eq!(h.sink.accepted(), ["a:1", "b:1", "a:2", "b:2", "a:3"]);
    assert_eq!(h.sink.attempts("a:2"), 2, "refused once, then accepted");
    // b:1 came before the refusal (a batch of 2); a:2 went alone; b:2 and a:3 in a batch of 2.
    assert_eq!(h.sink.batches_taken(), [2, 2]);
    h.worker.shutdown().await;
}

/// A stop while the sink makes a record wait: what the batch took before is delivered and
/// committed, the waiting record and every one after it are never sent (they are polled again
/// after a restart).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_a_record_waits_sends_nothing_after_it_and_commits_what_went_before() {
    let (h, probe) = batching();
    h.sink
        .set_policy(|key, _| if key == "a:2" { Plan::Block } else { Plan::Ack });
    h.start("batch-stopped", false, &probe);
    probe.push(two_partitions());
    eventually("a:2 waits in send", || h.sink.blocked() == 1).await;
    h.stop("batch-stopped").await;
    assert_eq!(h.sink.accepted(), ["a:1", "b:1"]);
    assert_eq!(h.committed("batch-stopped", "a").await, Some(1));
    assert_eq!(h.committed("batch-stopped", "b").await, Some(1));
    assert_eq!(probe.stops.load(Ordering::SeqCst), 1);
    h.worker.shutdown().await;
}
