//! Double assignment (a coordinator giving a slot to a second worker without revoking it from the
//! first, as tansu 0.6 can): ownership is settled through the status store (`fence`). The new owner
//! claims the task and waits; the old owner sees the claim, stops the task with its final commit and
//! releases it; the new owner resumes exactly after that commit. When the group takes the slot back
//! from the claimant — after it ran the task or before — the worker the group kept it at runs it
//! again. Slot 0 moves the connector instance with its task.
//!
//! The handoff timeout is set far beyond what the tests wait, so a task can only start on its new
//! owner through the release: a start before the timeout proves the handoff, not the timeout.
//! (A dead previous owner, which never releases, is `hold.rs`'s
//! `with_no_delay_a_crashed_workers_tasks_wait_only_the_handoff_timeout`.)

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use ferry_plugin::Slot;
use ferry_runtime::TaskId;
use ferry_runtime::stores::{State, StatusBackingStore};

use crate::support::connector::Start;
use crate::support::{Cluster, DEADLINE, Delivered, assert_no_gap, eventually, lock, seq};

/// Longer than any test here waits for a handoff.
const HANDOFF: Duration = Duration::from_secs(20);

/// The task most tests double-assign: not task 0, whose slot also carries the connector instance.
const TASK: usize = 1;

fn slot(task: usize) -> Slot {
    Slot::Task(TaskId::new("seq", task))
}

/// No `n` of partition `p` delivered twice.
fn assert_no_duplicate(p: usize, delivered: &[Delivered]) {
    let mut seen = BTreeSet::new();
    let duplicates: Vec<i64> = delivered
        .iter()
        .map(|d| d.n)
        .filter(|n| !seen.insert(*n))
        .collect();
    assert!(
        duplicates.is_empty(),
        "partition {p}: {duplicates:?} delivered twice"
    );
}

/// Waits until `task` runs on worker `on` alone, failing if it ever runs on two workers at once
/// (sampled: the deliveries, checked at the end, are the exhaustive check).
async fn wait_moved(cluster: &Cluster, task: usize, on: usize) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let owners = cluster.owners("seq", task);
        assert!(owners.len() <= 1, "task {task} runs on {owners:?} at once");
        if owners == [on] {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {DEADLINE:?} waiting for task {task} on worker {on} alone (on {owners:?})"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The instance that committed last for `task`, and its last committed `n`.
fn last_commit(cluster: &Cluster, task: usize) -> (i64, i64) {
    let (n, instance) = *cluster
        .offsets
        .commits(task)
        .last()
        .expect("the task committed");
    (instance, n)
}

/// The starts of `task` since `from` (an index into the cluster's starts).
fn starts_since(cluster: &Cluster, task: usize, from: usize) -> Vec<Start> {
    lock(&cluster.starts)[from..]
        .iter()
        .filter(|s| s.task == task.to_string())
        .cloned()
        .collect()
}

/// Checks a handoff of `task` that began at `began` (`starts` from index `starts_before`): the
/// previous instance's last delivery was its final commit, and the one new instance, on `to`,
/// started before the handoff timeout and resumed right after that commit. Returns the new start.
async fn assert_handed_over(
    cluster: &Cluster,
    task: usize,
    starts_before: usize,
    previous: i64,
    to: usize,
    began: Instant,
) -> Start {
    // A task is listed as running before its `start` (which records it) returned.
    eventually("the new instance's start", || {
        !starts_since(cluster, task, starts_before).is_empty()
    })
    .await;
    let starts = starts_since(cluster, task, starts_before);
    assert_eq!(starts.len(), 1, "task {task} started once: {starts:?}");
    let start = starts[0].clone();
    assert!(
        start.at < began + HANDOFF,
        "the new owner started {:?} after the handoff began: the handoff timeout, not the release",
        start.at - began
    );
    let final_commit = cluster
        .offsets
        .commits(task)
        .iter()
        .filter(|(_, i)| *i == previous)
        .map(|(n, _)| *n)
        .next_back()
        .expect("the previous instance committed");
    assert_eq!(
        start.resumed_after,
        Some(final_commit),
        "the new owner resumed after the previous owner's final commit"
    );
    eventually("the new instance delivering", || {
        cluster
            .delivered(task)
            .iter()
            .any(|d| d.instance == start.instance)
    })
    .await;
    let delivered = cluster.delivered(task);
    let last_before = delivered
        .iter()
        .filter(|d| d.instance == previous)
        .map(|d| d.n)
        .max();
    assert_eq!(
        last_before,
        Some(final_commit),
        "the previous owner delivered nothing after its final commit"
    );
    let first_after = delivered
        .iter()
        .find(|d| d.instance == start.instance)
        .expect("the new instance delivered");
    assert_eq!(first_after.n, final_commit + 1);
    assert_eq!(first_after.worker, cluster.nodes[to].worker_id);
    start
}

/// Waits until `task`'s status says RUNNING on worker `on` and its newest instance committed.
async fn runs_and_commits_on(cluster: &Cluster, task: usize, on: usize) {
    let id = TaskId::new("seq", task);
    let worker = cluster.nodes[on].worker_id.clone();
    eventually(&format!("task {task} RUNNING on worker {on}"), || {
        cluster
            .statuses
            .task(&id)
            .is_some_and(|s| s.state == State::Running && s.worker_id == worker)
    })
    .await;
    let newest = starts_since(cluster, task, 0)
        .last()
        .expect("a start")
        .instance;
    eventually(&format!("task {task} committing on worker {on}"), || {
        last_commit(cluster, task).0 == newest
    })
    .await;
}

/// Stops every worker, then checks what reached the store and the sink: no commit of records an
/// instance had not delivered, and every partition exactly once.
async fn shut_down_exactly_once(mut cluster: Cluster) {
    cluster.shutdown().await;
    assert_eq!(cluster.offsets.violations(), Vec::<String>::new());
    for p in 0..3 {
        let delivered = cluster.delivered(p);
        assert_no_gap(p, &delivered);
        assert_no_duplicate(p, &delivered);
    }
}

/// Three workers run `seq`'s three tasks; returns the cluster, the worker running `task` (A) and
/// another worker (B).
async fn running(task: usize) -> (Cluster, usize, usize) {
    running_with(task, HANDOFF).await
}

/// [`running`] with another handoff timeout.
async fn running_with(task: usize, handoff: Duration) -> (Cluster, usize, usize) {
    let mut cluster = Cluster::new();
    cluster.handoff = handoff;
    for _ in 0..3 {
        cluster.join().await;
    }
    cluster.create(seq("seq", 3, "")).await;
    cluster.wait_running("seq", 3).await;
    let a = cluster.owners("seq", task)[0];
    let b = *cluster
        .live()
        .iter()
        .find(|&&i| i != a)
        .expect("another worker");
    (cluster, a, b)
}

/// Injects the double assignment of `task` to `b` and waits for its handoff from `a`; returns the
/// instance `b` started.
async fn double_assign(cluster: &Cluster, task: usize, a: usize, b: usize) -> Start {
    let starts_before = lock(&cluster.starts).len();
    let previous = starts_since(cluster, task, 0)
        .last()
        .expect("the task started")
        .instance;
    let began = Instant::now();
    cluster.coordinator.double_assign(b, slot(task)).await;
    assert!(
        cluster.coordinator.owned(a).contains(&slot(task)),
        "the group's view still gives the slot to A"
    );
    wait_moved(cluster, task, b).await;
    assert_eq!(
        cluster
            .delivered(task)
            .iter()
            .find(|d| d.instance == previous)
            .map(|d| d.worker.clone()),
        Some(cluster.nodes[a].worker_id.clone()),
        "the instance B took over from ran on A"
    );
    let start = assert_handed_over(cluster, task, starts_before, previous, b, began).await;
    let b_id = cluster.nodes[b].worker_id.clone();
    eventually("the task's status RUNNING on B", || {
        cluster
            .statuses
            .task(&TaskId::new("seq", task))
            .is_some_and(|s| s.state == State::Running && s.worker_id == b_id)
    })
    .await;
    start
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_double_assignment_hands_the_task_over_without_duplicates_or_gaps() {
    let (cluster, a, b) = running(TASK).await;
    let start = double_assign(&cluster, TASK, a, b).await;
    // B keeps running it (A does not claim it back: B has not released it) and commits.
    eventually("B committing the task", || {
        last_commit(&cluster, TASK).0 == start.instance
    })
    .await;
    // Not a synchronization: a window of a few fence periods (250 ms) in which nothing may change.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(cluster.owners("seq", TASK), [b]);
    assert!(
        cluster.coordinator.owned(a).contains(&slot(TASK)),
        "nothing rebalanced"
    );
    shut_down_exactly_once(cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slot_taken_back_from_the_claimant_runs_again_at_its_group_owner() {
    let (cluster, a, b) = running(TASK).await;
    let on_b = double_assign(&cluster, TASK, a, b).await;
    eventually("B committing the task", || {
        last_commit(&cluster, TASK).0 == on_b.instance
    })
    .await;

    // The group takes the slot back from B (A still holds it in the group's view): B stops the
    // task with its final commit (a revocation), A sees B's STOPPED and claims the task again.
    let starts_before = lock(&cluster.starts).len();
    let began = Instant::now();
    cluster.coordinator.take_back(b, slot(TASK)).await;
    assert_eq!(
        cluster.owners("seq", TASK),
        Vec::<usize>::new(),
        "the revocation returned with B's instance stopped"
    );
    wait_moved(&cluster, TASK, a).await;
    let on_a = assert_handed_over(&cluster, TASK, starts_before, on_b.instance, a, began).await;
    let a_id = cluster.nodes[a].worker_id.clone();
    eventually("the task's status RUNNING on A", || {
        cluster
            .statuses
            .task(&TaskId::new("seq", TASK))
            .is_some_and(|s| s.state == State::Running && s.worker_id == a_id)
    })
    .await;
    eventually("A committing the task again", || {
        last_commit(&cluster, TASK).0 == on_a.instance
    })
    .await;
    shut_down_exactly_once(cluster).await;
}

/// When the group takes the slot back from B before B started the task.
#[derive(Debug, Clone, Copy)]
enum TakenBack {
    /// Right after B's claim: A most likely has not seen it yet (it looks every 250 ms).
    AfterTheClaim,
    /// As soon as A released the task to B: B most likely has not seen the release yet.
    AfterTheRelease,
}

/// A double assignment the group ends before B started the task: whichever way the race between
/// the revocation and the fence goes, the task runs again on A, the worker the group kept it at.
async fn taken_back_before_the_start(when: TakenBack) {
    let (cluster, a, b) = running(TASK).await;
    let id = TaskId::new("seq", TASK);
    let a_id = cluster.nodes[a].worker_id.clone();
    cluster.coordinator.double_assign(b, slot(TASK)).await;
    if let TakenBack::AfterTheRelease = when {
        eventually("A releasing the task", || {
            cluster
                .statuses
                .task(&id)
                .is_some_and(|s| s.state == State::Stopped && s.worker_id == a_id)
        })
        .await;
    }
    cluster.coordinator.take_back(b, slot(TASK)).await;
    wait_moved(&cluster, TASK, a).await;
    runs_and_commits_on(&cluster, TASK, a).await;
    shut_down_exactly_once(cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slot_taken_back_right_after_the_claim_runs_again_at_its_group_owner() {
    taken_back_before_the_start(TakenBack::AfterTheClaim).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slot_taken_back_right_after_the_release_runs_again_at_its_group_owner() {
    taken_back_before_the_start(TakenBack::AfterTheRelease).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_double_assigned_slot_0_moves_the_connector_instance_with_its_task() {
    let (cluster, a, b) = running(0).await;
    let b_id = cluster.nodes[b].worker_id.clone();
    let starts_before = lock(&cluster.starts).len();
    let start = double_assign(&cluster, 0, a, b).await;
    eventually("the connector RUNNING on B", || {
        cluster
            .statuses
            .connector("seq")
            .is_some_and(|s| s.state == State::Running && s.worker_id == b_id)
    })
    .await;
    eventually("B committing task 0", || {
        last_commit(&cluster, 0).0 == start.instance
    })
    .await;
    // Not a synchronization: a window of a few fence periods (250 ms) in which nothing may change.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(cluster.owners("seq", 0), [b]);
    let connector = cluster.statuses.connector("seq").expect("a status");
    assert_eq!(
        connector.worker_id, b_id,
        "the connector instance stayed on B"
    );
    // The connector instance moved without rewriting the task configurations: no other task restarted.
    let restarted: Vec<Start> = lock(&cluster.starts)[starts_before..]
        .iter()
        .filter(|s| s.instance != start.instance)
        .cloned()
        .collect();
    assert_eq!(restarted.len(), 0, "{restarted:?}");
    shut_down_exactly_once(cluster).await;
}

/// A claimant whose session expires before it started the task (`lost`) releases it back after
/// its abort, so the worker the group kept the slot at runs it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slot_whose_claimant_was_lost_before_the_start_runs_again_at_its_group_owner() {
    let (mut cluster, a, b) = running(TASK).await;
    cluster.coordinator.double_assign(b, slot(TASK)).await;
    cluster.lose_and_rejoin(b).await;
    assert!(
        cluster.coordinator.owned(a).contains(&slot(TASK)),
        "the scenario needs the group to keep the slot at A"
    );
    wait_moved(&cluster, TASK, a).await;
    let a_id = cluster.nodes[a].worker_id.clone();
    eventually("the task's status RUNNING on A", || {
        cluster
            .statuses
            .task(&TaskId::new("seq", TASK))
            .is_some_and(|s| s.state == State::Running && s.worker_id == a_id)
    })
    .await;
    cluster.shutdown().await;
    assert_eq!(cluster.offsets.violations(), Vec::<String>::new());
}

/// When a third worker gets the slot during a handoff (tansu can give one slot to three members in
/// a row): it must not start the task while either earlier holder may still run it.
#[derive(Debug, Clone, Copy)]
enum Third {
    /// Right after B's claim, while B still waits for A's release.
    WhileTheClaimantWaits,
    /// Right after A released the task to B, before B started it (B looks every 250 ms).
    AfterTheReleaseToTheClaimant,
}

/// A runs the task; B, then C get its slot without a revocation. Whatever the order of the fences,
/// the task never runs on two workers at once and no record is delivered twice.
async fn a_third_owner_waits(when: Third) {
    let (cluster, a, b) = running(TASK).await;
    let c = *cluster
        .live()
        .iter()
        .find(|&&i| i != a && i != b)
        .expect("a third worker");
    let id = TaskId::new("seq", TASK);
    let a_id = cluster.nodes[a].worker_id.clone();
    cluster.coordinator.double_assign(b, slot(TASK)).await;
    if let Third::AfterTheReleaseToTheClaimant = when {
        eventually("A releasing the task to B", || {
            cluster
                .statuses
                .task(&id)
                .is_some_and(|s| s.state == State::Stopped && s.worker_id == a_id)
        })
        .await;
    }
    let starts_before = lock(&cluster.starts).len();
    let began = Instant::now();
    cluster.coordinator.double_assign(c, slot(TASK)).await;
    wait_moved(&cluster, TASK, c).await;
    // Through the releases, not the handoff timeout: every earlier holder had stopped or released.
    eventually("C's start", || {
        !starts_since(&cluster, TASK, starts_before).is_empty()
    })
    .await;
    let started = starts_since(&cluster, TASK, starts_before)[0].at;
    assert!(
        started < began + HANDOFF / 2,
        "C started {:?} after its claim: the handoff timeout, not the releases",
        started - began
    );
    runs_and_commits_on(&cluster, TASK, c).await;
    shut_down_exactly_once(cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_third_owner_during_a_handoff_waits_for_the_claimant_and_the_old_owner() {
    a_third_owner_waits(Third::WhileTheClaimantWaits).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_third_owner_right_after_a_release_waits_for_the_claimant_it_was_released_to() {
    a_third_owner_waits(Third::AfterTheReleaseToTheClaimant).await;
}

/// A stale RUNNING — the old owner's status write, delayed until it lands right after the new
/// owner's claim, over it — changes nothing: statuses are a report. The handoff completes through
/// the release (before the handoff timeout), nothing is delivered twice or lost, and the status ends
/// RUNNING on the new owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stale_running_written_after_the_claim_neither_stalls_nor_doubles_the_task() {
    let (cluster, a, b) = running(TASK).await;
    let id = TaskId::new("seq", TASK);
    let (a_id, b_id) = (
        cluster.nodes[a].worker_id.clone(),
        cluster.nodes[b].worker_id.clone(),
    );
    let stale = cluster.statuses.task(&id).expect("A's status");
    assert_eq!(
        (stale.state, stale.worker_id.as_str()),
        (State::Running, a_id.as_str())
    );
    let claimant = b_id.clone();
    cluster.statuses.write_after(
        move |_, s| s.state == State::Unassigned && s.worker_id == claimant,
        id.clone(),
        stale,
    );
    double_assign(&cluster, TASK, a, b).await;
    assert!(
        cluster.statuses.wrote_after(),
        "the stale RUNNING was written after the claim"
    );
    shut_down_exactly_once(cluster).await;
}

/// The old owner's release (its STOPPED for the claimant) is lost on its way to the status store:
/// the claimant cannot know the task stopped, so it starts only once the handoff timeout passed —
/// and still resumes right after the old owner's final commit, with nothing delivered twice or lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_release_delays_the_handoff_to_its_timeout_and_loses_nothing() {
    let handoff = Duration::from_secs(2);
    let (cluster, a, b) = running_with(TASK, handoff).await;
    let id = TaskId::new("seq", TASK);
    let a_id = cluster.nodes[a].worker_id.clone();
    cluster
        .statuses
        .drop_when(move |task, s| *task == id && s.state == State::Stopped && s.worker_id == a_id);
    let starts_before = lock(&cluster.starts).len();
    let previous = starts_since(&cluster, TASK, 0)
        .last()
        .expect("the task started")
        .instance;
    let began = Instant::now();
    cluster.coordinator.double_assign(b, slot(TASK)).await;
    wait_moved(&cluster, TASK, b).await;
    eventually("the new instance's start", || {
        !starts_since(&cluster, TASK, starts_before).is_empty()
    })
    .await;
    let starts = starts_since(&cluster, TASK, starts_before);
    assert_eq!(starts.len(), 1, "started once: {starts:?}");
    assert!(
        !cluster.statuses.dropped().is_empty(),
        "the old owner's release was written, and dropped"
    );
    assert!(
        starts[0].at >= began + handoff,
        "the claimant started {:?} after the claim, before the handoff timeout ({handoff:?}): it \
         cannot have seen the release",
        starts[0].at - began
    );
    let final_commit = cluster
        .offsets
        .commits(TASK)
        .iter()
        .filter(|(_, i)| *i == previous)
        .map(|(n, _)| *n)
        .next_back()
        .expect("the old owner committed");
    assert_eq!(
        starts[0].resumed_after,
        Some(final_commit),
        "the claimant resumed right after the old owner's final commit"
    );
    cluster.statuses.heal();
    runs_and_commits_on(&cluster, TASK, b).await;
    shut_down_exactly_once(cluster).await;
}
