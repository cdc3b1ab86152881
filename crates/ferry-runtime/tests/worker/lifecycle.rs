//! Stopping, cancelling, pausing and dropping: graceful stops wait for acknowledgements and commit
//! once more; a task that does not stop in time is cancelled without a final commit.

use std::sync::atomic::Ordering;
use std::time::Duration;

use ferry_runtime::TaskState;

use crate::support::{
    Gate, Hang, Harness, Plan, Probe, TestConnector, TestStore, bounded, eventually, fast, record,
    records, settings, wait_log,
};

/// One hour: no periodic commit happens during a test, only the final one at stop.
const HOUR: u64 = 3_600_000;

async fn graceful_stop(name: &'static str, via_shutdown: bool) {
    let h = Harness::new(settings(HOUR, 30_000, 30_000));
    let probe = Probe::new();
    h.sink.hold(&["a:2", "b:1"]);
    h.start(name, false, &probe);
    probe.push(vec![record("a", 1), record("a", 2), record("b", 1)]);
    eventually("a:1 delivered, b:1 held", || {
        probe.has_commit_record("a:1") && h.sink.is_held("b:1")
    })
    .await;
    assert_eq!(
        h.committed(name, "a").await,
        None,
        "no periodic commit within an hour"
    );

    let worker = h.worker.clone();
    let stopping = tokio::spawn(async move {
        if via_shutdown {
            worker.shutdown().await;
        } else {
            worker
                .stop_connector(name)
                .await
                .expect("the connector exists");
        }
    });
    // Outstanding deliveries hold the stop (up to offset.flush.timeout.ms = 30 s). Giving the stop some
    // time first only makes it more likely that they resolve during the wait, which is the point.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !stopping.is_finished(),
        "the stop did not wait for outstanding acknowledgements"
    );
    h.sink.resolve("a:2");
    h.sink.resolve("b:1");
    bounded("the stop", stopping)
        .await
        .expect("the stop did not panic");

    assert_eq!(
        h.committed(name, "a").await,
        Some(2),
        "the final commit includes deliveries resolved during the wait"
    );
    assert_eq!(h.committed(name, "b").await, Some(1));
    for key in ["a:1", "a:2", "b:1"] {
        let calls = probe.commit_records_of(key);
        assert!(
            calls.len() == 1 && calls[0].is_some(),
            "commit_record({key}): {calls:?}"
        );
    }
    assert!(probe.commits() >= 1, "task.commit() after the final commit");
    assert_eq!(probe.stops(), 1, "stop() is called once");
    wait_log(&format!("{name}-0"), "INFO", &["task stopped (STOPPED)"]).await;
    assert!(h.worker.connector_names().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_connector_waits_for_acknowledgements_and_commits_once_more() {
    graceful_stop("gracefulstop", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_for_acknowledgements_and_commits_once_more() {
    graceful_stop("gracefulshutdown", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_commit_at_stop_leaves_the_offsets_uncommitted() {
    let h = Harness::new(settings(HOUR, 500, 10_000));
    let probe = Probe::new();
    h.start("stopcommitfail", false, &probe);
    probe.push(records("a", 1..=2));
    eventually("a:2 delivered", || probe.has_commit_record("a:2")).await;
    h.store.fail_sets(true);
    h.stop("stopcommitfail").await;
    assert_eq!(h.committed("stopcommitfail", "a").await, None);
    assert_eq!(probe.stops(), 1);
    wait_log(
        "stopcommitfail-0",
        "ERROR",
        &["offset commit failed", "injected set failure"],
    )
    .await;
    wait_log("stopcommitfail-0", "INFO", &["task stopped (STOPPED)"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_commit_at_stop_is_given_up_at_the_deadline() {
    let h = Harness::new(settings(HOUR, 300, 10_000));
    let probe = Probe::new();
    h.start("stopcommithang", false, &probe);
    probe.push(records("a", 1..=2));
    eventually("a:2 delivered", || probe.has_commit_record("a:2")).await;
    h.store.hang_sets(Hang::All);
    h.stop("stopcommithang").await;
    assert_eq!(
        TestStore::count(&h.store.abandoned_sets),
        1,
        "the final commit's write was given up"
    );
    h.store.hang_sets(Hang::Nothing);
    assert_eq!(h.committed("stopcommithang", "a").await, None);
    assert_eq!(probe.stops(), 1);
    wait_log(
        "stopcommithang-0",
        "ERROR",
        &["offset commit failed", "offset.flush.timeout.ms=300"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_stop_hangs_is_cancelled() {
    let h = Harness::new(settings(25, 2_000, 300));
    let probe = Probe::new();
    probe
        .stop_hangs
        .store(true, std::sync::atomic::Ordering::SeqCst);
    h.start("stophangs", false, &probe);
    probe.push(records("a", 1..=2));
    h.wait_committed("stophangs", "a", 2).await;
    h.stop("stophangs").await;
    assert_eq!(probe.stops(), 1, "stop() was called (and never returned)");
    wait_log(
        "stophangs-0",
        "ERROR",
        &["was cancelled", "task.shutdown.graceful.timeout.ms=300"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_acks_never_come_is_cancelled_without_a_final_commit() {
    // The wait for acknowledgements (30 s) outlasts the graceful timeout (300 ms).
    let h = Harness::new(settings(HOUR, 30_000, 300));
    let probe = Probe::new();
    h.sink.hold(&["a:1"]);
    h.start("acksnever", false, &probe);
    probe.push(vec![record("a", 1), record("b", 1)]);
    eventually("b:1 delivered, a:1 held", || {
        probe.has_commit_record("b:1") && h.sink.is_held("a:1")
    })
    .await;
    h.stop("acksnever").await;
    wait_log(
        "acksnever-0",
        "ERROR",
        &["was cancelled", "task.shutdown.graceful.timeout.ms=300"],
    )
    .await;
    assert_eq!(
        h.committed("acksnever", "b").await,
        None,
        "a cancelled task makes no final commit"
    );
    assert_eq!(h.committed("acksnever", "a").await, None);
    // Nothing of the cancelled task lives on: its delivery watcher let go of the pending delivery.
    eventually("the cancelled task drops its pending delivery", || {
        h.sink.is_abandoned("a:1")
    })
    .await;
}

/// A sink whose `send` waits (Kafka's producer queue is full while the brokers are away; Ferry waits
/// like Kafka Connect's `max.block.ms=MAX`) holds neither `commit_record` of what was delivered before
/// nor a stop: the waiting record is given up, never accepted, so it is polled again after a restart,
/// and what was delivered before it is committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_waiting_for_a_full_sink_stops_gracefully() {
    // Were the stop to wait for the send, the task would be cancelled at 5 s, without a final commit.
    let h = Harness::new(settings(HOUR, 30_000, 5_000));
    let probe = Probe::new();
    h.sink
        .set_policy(|key, _| if key == "a:2" { Plan::Block } else { Plan::Ack });
    h.start("sinkfull", false, &probe);
    probe.push(records("a", 1..=3));
    eventually("a:1 accepted, a:2 waiting in send", || {
        h.sink.accepted() == ["a:1"] && h.sink.blocked() == 1
    })
    .await;
    eventually("commit_record(a:1) while a:2 waits", || {
        probe.has_commit_record("a:1")
    })
    .await;
    h.stop("sinkfull").await;
    wait_log("sinkfull-0", "INFO", &["task stopped (STOPPED)"]).await;
    assert_eq!(h.sink.blocked(), 0, "the waiting send was dropped");
    assert_eq!(
        h.committed("sinkfull", "a").await,
        Some(1),
        "the final commit covers what was delivered before the waiting record, and nothing after"
    );
    assert_eq!(
        h.sink.accepted(),
        vec!["a:1".to_owned()],
        "a:3 was never sent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_running_when_its_task_is_cancelled_is_abandoned() {
    // The periodic commit hangs in the store (deadline 30 s) when the task is told to stop.
    let h = Harness::new(settings(25, 30_000, 300));
    let probe = Probe::new();
    h.store.hang_sets(Hang::All);
    h.start("cancelcommit", false, &probe);
    probe.push(records("a", 1..=2));
    eventually("a commit hangs", || {
        TestStore::count(&h.store.hung_sets) >= 1
    })
    .await;
    h.stop("cancelcommit").await;
    wait_log("cancelcommit-0", "ERROR", &["was cancelled"]).await;
    // The commit is cancelled with its task rather than completing after the cancellation.
    eventually("the hanging write is abandoned", || {
        TestStore::count(&h.store.abandoned_sets) >= 1
    })
    .await;
    h.store.hang_sets(Hang::Nothing);
    assert_eq!(h.committed("cancelcommit", "a").await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_connector_stops_all_its_tasks_at_once() {
    let h = Harness::new(settings(HOUR, 30_000, 30_000));
    let (slow, quick) = (Probe::new(), Probe::new());
    h.sink.hold(&["x:1"]);
    h.start_with(
        "alltasks",
        false,
        TestConnector::with_tasks(vec![slow.clone(), quick.clone()]),
        2,
    );
    slow.push(vec![record("x", 1)]);
    quick.push(vec![record("y", 1)]);
    eventually("x:1 held, y:1 delivered", || {
        h.sink.is_held("x:1") && quick.has_commit_record("y:1")
    })
    .await;
    let worker = h.worker.clone();
    let stopping = tokio::spawn(async move { worker.stop_connector("alltasks").await });
    // The first task waits for x:1; the second must not wait for the first.
    eventually("the second task stops while the first waits", || {
        quick.stops() == 1
    })
    .await;
    assert_eq!(h.committed("alltasks", "y").await, Some(1));
    h.sink.resolve("x:1");
    bounded("the stop", stopping)
        .await
        .expect("no panic")
        .expect("the connector exists");
    assert_eq!(h.committed("alltasks", "x").await, Some(1));
    assert_eq!(slow.stops(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_task_is_not_polled_but_its_commits_continue() {
    let h = Harness::new(fast());
    let probe = Probe::new();
    h.sink.hold(&["a:2"]);
    h.start("pause", false, &probe);
    probe.push(records("a", 1..=2));
    h.wait_committed("pause", "a", 1).await;
    eventually("a:2 held", || h.sink.is_held("a:2")).await;

    h.worker.set_paused("pause", true).expect("exists");
    h.wait_state("pause", TaskState::Paused).await;
    let polls = probe.polls();
    h.sink.resolve("a:2");
    h.wait_committed("pause", "a", 2).await;
    eventually("commit_record(a:2) while paused", || {
        probe.has_commit_record("a:2")
    })
    .await;
    probe.push(vec![record("a", 3)]);
    probe.wait_commits(3).await;
    assert_eq!(probe.polls(), polls, "a paused task is not polled");
    assert!(!h.sink.accepted().contains(&"a:3".to_owned()));
    assert_eq!(h.status("pause").state, TaskState::Paused);

    h.worker.set_paused("pause", false).expect("exists");
    h.wait_state("pause", TaskState::Running).await;
    h.wait_committed("pause", "a", 3).await;
    assert!(probe.polls() > polls);
    h.worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_worker_stops_its_tasks_gracefully() {
    let h = Harness::new(settings(HOUR, 2_000, 10_000));
    let probe = Probe::new();
    h.start("dropped", false, &probe);
    probe.push(records("a", 1..=2));
    eventually("a:2 delivered", || probe.has_commit_record("a:2")).await;
    let Harness {
        worker,
        store,
        sink: _sink,
    } = h;
    drop(worker);
    eventually("stop() after the worker is dropped", || probe.stops() == 1).await;
    crate::support::wait_committed(&store.inner, "dropped", "a", 2).await;
    wait_log("dropped-0", "INFO", &["task stopped (STOPPED)"]).await;
}

/// A task may return an empty `Vec` from `poll()` at once (the contract allows it). That must not
/// starve the task's own committer and delivery watcher, nor anything else on a one-thread runtime.
#[test]
fn a_task_polling_without_awaiting_does_not_starve_the_runtime() {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    // The runtime runs on its own thread so that a spinning task cannot also stall the watchdog below.
    let runtime_thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let h = Harness::new(fast());
            let probe = Probe::new();
            probe
                .busy_poll
                .store(true, std::sync::atomic::Ordering::SeqCst);
            h.start("busypoll", false, &probe);
            probe.push(records("a", 1..=3));
            h.wait_committed("busypoll", "a", 3).await;
            probe.wait_commits(2).await;
            h.worker.shutdown().await;
        });
        let _ = done_tx.send(());
    });
    if done_rx.recv_timeout(crate::support::DEADLINE).is_err() {
        assert!(
            runtime_thread.is_finished(),
            "a task whose poll() never awaits starved its one-thread runtime"
        );
    }
    runtime_thread.join().expect("the test body did not panic");
}

/// A connector whose `start()` blocks its thread (a synchronous `open()` of a FIFO without a writer)
/// cannot be cancelled, but must not make the worker unstoppable nor stop other connectors: here
/// more tasks block than the runtime has threads. The stop gives up on them after
/// `task.shutdown.graceful.timeout.ms`, reporting each, while they are still blocked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_blocking_their_threads_do_not_make_the_worker_unstoppable() {
    let h = Harness::new(settings(25, 2_000, 300));
    let gate = Gate::new();
    let blocked: Vec<_> = (0..3).map(|_| Probe::new()).collect();
    for probe in &blocked {
        *crate::support::lock(&probe.block_start) = Some(gate.clone());
    }
    h.start_with("blocked", false, TestConnector::with_tasks(blocked), 3);
    let entered = || gate.entered.load(Ordering::SeqCst);
    eventually("all three start() calls block", || entered() == 3).await;

    let probe = Probe::new();
    h.start("unblocked", false, &probe);
    probe.push(records("a", 1..=2));
    h.wait_committed("unblocked", "a", 2).await;

    bounded("the shutdown", h.worker.shutdown()).await;
    assert_eq!(
        gate.returned.load(Ordering::SeqCst),
        0,
        "the shutdown returned only once the blocked start() calls did"
    );
    for task in ["blocked-0", "blocked-1", "blocked-2"] {
        wait_log(
            task,
            "ERROR",
            &["was cancelled", "task.shutdown.graceful.timeout.ms=300"],
        )
        .await;
    }
    assert_eq!(h.committed("unblocked", "a").await, Some(2));
    gate.open();
}

/// A task whose `poll()` blocks its thread is given up on at the graceful timeout, and nothing of it
/// lives on: its delivery watcher lets go of the pending delivery (so nothing it acknowledges late
/// can be committed), although its loop is still blocked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_blocked_in_poll_is_given_up_on_and_its_helpers_end() {
    let h = Harness::new(settings(25, 2_000, 300));
    let probe = Probe::new();
    h.sink.hold(&["a:3"]);
    h.start("pollblocks", false, &probe);
    probe.push(records("a", 1..=3));
    h.wait_committed("pollblocks", "a", 2).await;
    eventually("a:3 held", || h.sink.is_held("a:3")).await;
    let gate = Gate::new();
    *crate::support::lock(&probe.block_poll) = Some(gate.clone());
    eventually("poll() blocks", || gate.entered.load(Ordering::SeqCst) == 1).await;

    h.stop("pollblocks").await;
    wait_log(
        "pollblocks-0",
        "ERROR",
        &["was cancelled", "task.shutdown.graceful.timeout.ms=300"],
    )
    .await;
    eventually(
        "the blocked task's watcher drops its pending delivery",
        || h.sink.is_abandoned("a:3"),
    )
    .await;
    assert_eq!(
        gate.returned.load(Ordering::SeqCst),
        0,
        "poll() is still blocked"
    );
    assert_eq!(h.committed("pollblocks", "a").await, Some(2));
    gate.open();
}
