//! `scheduled.rebalance.max.delay.ms` (KIP-415's delay, done by the new owner): a task whose worker
//! departed while running it is held back for the delay after its slot's reassignment, then starts
//! from the last commit; with a zero delay, or after a graceful leave, it starts at once; a slot
//! revoked or lost while held back started nothing on the worker that held it.
//!
//! Timing is asserted from instants, never with fixed sleeps: a held task's start is compared with
//! an instant taken before the crash (the assignment, and so the hold, began after it), so a slow
//! machine can only make the test wait longer, not fail.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use ferry_plugin::Slot;
use ferry_runtime::TaskId;
use ferry_runtime::stores::{State, StatusBackingStore};

use crate::support::connector::Start;
use crate::support::{Cluster, assert_no_gap, eventually, lock, seq};

/// A hold long enough to observe, short enough to wait for.
const HOLD: Duration = Duration::from_millis(1500);
/// A hold no test waits for: a task held this long never runs within the test's deadline.
const LONG_HOLD: Duration = Duration::from_secs(60);

/// The first start of `task` among `starts`.
fn first_start(starts: &[Start], task: usize) -> Option<Start> {
    starts.iter().find(|s| s.task == task.to_string()).cloned()
}

/// Every live node's held-back slots.
fn held_anywhere(cluster: &Cluster) -> Vec<TaskId> {
    cluster
        .live()
        .into_iter()
        .flat_map(|i| cluster.nodes[i].herder.held_back())
        .map(|(id, _)| id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crashed_workers_tasks_are_held_back_for_the_delay_then_resume_from_the_last_commit() {
    let mut cluster = Cluster::new();
    cluster.delay = HOLD;
    for _ in 0..3 {
        cluster.join().await;
    }
    cluster.create(seq("seq", 3, "")).await;
    cluster.wait_running("seq", 3).await;
    // Crash the worker running task 0 (and so the connector instance).
    let victim = cluster.owners("seq", 0)[0];
    let victim_id = cluster.nodes[victim].worker_id.clone();
    let moved: Vec<usize> = (0..3)
        .filter(|&t| cluster.owners("seq", t) == [victim])
        .collect();
    let starts_before = lock(&cluster.starts).len();
    let crash_began = Instant::now();
    cluster.crash(victim).await;
    let crash_done = Instant::now();
    // The crashed owner's last commits (its instances are fenced: nothing of them commits now).
    let mut last = Vec::new();
    for &task in &moved {
        last.push(cluster.offsets.committed("seq", task).await);
    }

    // During the hold: the moved tasks run nowhere, their statuses are the new owners' UNASSIGNED,
    // and the connector instance has not started again (its status is still the crashed worker's).
    // Checked only while the hold surely lasts (it began after `crash_began`).
    let mut checked = 0;
    while Instant::now() + Duration::from_millis(100) < crash_began + HOLD {
        for &task in &moved {
            let id = TaskId::new("seq", task);
            assert!(
                cluster.owners("seq", task).is_empty(),
                "task {task} runs during the hold"
            );
            let status = cluster.statuses.task(&id).expect("a status");
            assert_eq!(
                status.state,
                State::Unassigned,
                "task {task} during the hold"
            );
            assert_ne!(status.worker_id, victim_id);
            assert!(
                held_anywhere(&cluster).contains(&id),
                "task {task} is held back by its new owner"
            );
        }
        let connector = cluster.statuses.connector("seq").expect("a status");
        assert_eq!(
            connector.worker_id, victim_id,
            "the connector instance started again during the hold"
        );
        checked += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    cluster.wait_running("seq", 3).await;
    let starts = lock(&cluster.starts)[starts_before..].to_vec();
    for (&task, last) in moved.iter().zip(last) {
        let start = first_start(&starts, task).expect("the task started again elsewhere");
        assert!(
            start.at >= crash_began + HOLD,
            "task {task} started {:?} after the crash began, before the {HOLD:?} hold ended",
            start.at - crash_began
        );
        // Started when the hold ended, not at the loop's next periodic pass (5 s).
        assert!(
            start.at < crash_done + HOLD + Duration::from_millis(2500),
            "task {task} started {:?} after its hold ended",
            start.at - (crash_done + HOLD)
        );
        assert_eq!(
            start.resumed_after, last,
            "task {task} resumed from the crashed owner's last commit"
        );
        let first = cluster
            .delivered(task)
            .into_iter()
            .find(|d| d.instance == start.instance)
            .expect("the new instance delivered");
        assert_eq!(first.n, start.resumed_after.map_or(0, |n| n + 1));
    }
    // The connector instance runs again, where task 0 does.
    let owner0 = cluster.nodes[cluster.owners("seq", 0)[0]].worker_id.clone();
    eventually("the connector RUNNING on task 0's new owner", || {
        cluster
            .statuses
            .connector("seq")
            .is_some_and(|s| s.state == State::Running && s.worker_id == owner0)
    })
    .await;
    assert!(held_anywhere(&cluster).is_empty());
    println!("hold checked {checked} times during the window");
    cluster.shutdown().await;
    assert_eq!(cluster.offsets.violations(), Vec::<String>::new());
    for p in 0..3 {
        assert_no_gap(p, &cluster.delivered(p));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_no_delay_a_crashed_workers_tasks_wait_only_the_handoff_timeout() {
    let mut cluster = Cluster::new();
    cluster.delay = Duration::ZERO;
    for _ in 0..3 {
        cluster.join().await;
    }
    cluster.create(seq("seq", 3, "")).await;
    cluster.wait_running("seq", 3).await;
    let victim = cluster.owners("seq", 0)[0];
    let before = Instant::now();
    cluster.crash(victim).await;
    // The new owners decided when they got the slots (inside the crash's rebalance): a dead worker
    // cannot release its tasks, so they wait the handoff timeout (500 ms here), not more.
    let holds: Vec<(TaskId, Instant)> = cluster
        .live()
        .into_iter()
        .flat_map(|i| cluster.nodes[i].herder.held_back())
        .collect();
    let latest = Instant::now() + Duration::from_millis(500);
    assert!(
        holds
            .iter()
            .all(|(_, until)| *until <= latest && *until > before),
        "{holds:?}"
    );
    cluster.wait_running("seq", 3).await;
    cluster.shutdown().await;
    assert_eq!(cluster.offsets.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_graceful_leave_moves_tasks_at_once_despite_a_delay() {
    let mut cluster = Cluster::new();
    cluster.delay = LONG_HOLD;
    for _ in 0..3 {
        cluster.join().await;
    }
    cluster.create(seq("seq", 4, "")).await;
    cluster.wait_running("seq", 4).await;
    let leaving = cluster.owners("seq", 0)[0];
    cluster.leave(leaving).await;
    // Its tasks stopped with STOPPED statuses: the new owners hold nothing back …
    assert_eq!(held_anywhere(&cluster), Vec::<TaskId>::new());
    // … and run them well within the test's deadline, far below the 60 s delay.
    cluster.wait_running("seq", 4).await;
    cluster.shutdown().await;
    assert_eq!(cluster.offsets.violations(), Vec::<String>::new());
    for p in 0..4 {
        let delivered = cluster.delivered(p);
        assert_no_gap(p, &delivered);
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slot_revoked_during_its_hold_started_nothing_there() {
    let mut cluster = Cluster::new();
    cluster.delay = LONG_HOLD;
    for _ in 0..3 {
        cluster.join().await;
    }
    // Three workers, the leader slot and two task slots: one slot each.
    cluster.create(seq("seq", 2, "")).await;
    cluster.wait_running("seq", 2).await;
    let victim = cluster.owners("seq", 0)[0];
    let starts_before = lock(&cluster.starts).len();
    cluster.crash(victim).await;
    let task0 = TaskId::new("seq", 0);
    let holders: Vec<usize> = cluster
        .live()
        .into_iter()
        .filter(|&i| {
            cluster.nodes[i]
                .herder
                .held_back()
                .iter()
                .any(|(id, _)| *id == task0)
        })
        .collect();
    assert_eq!(holders.len(), 1, "task 0 is held back by its new owner");
    let holder = holders[0];
    let holder_id = cluster.nodes[holder].worker_id.clone();

    // A fourth worker joins: the holder (now with two slots) gives task 0's slot up to it.
    let join_began = Instant::now();
    let newcomer = cluster.join().await;
    assert!(
        !cluster
            .coordinator
            .owned(holder)
            .contains(&Slot::Task(task0.clone())),
        "the scenario needs task 0's slot revoked from the worker holding it back"
    );
    assert!(cluster.nodes[holder].herder.held_back().is_empty());

    // The newcomer got the slot STOPPED (released back) by the holder: it does not carry the hold
    // over (a documented limit) and runs the task, which resumes from the crashed owner's last
    // commit.
    cluster.wait_running("seq", 2).await;
    assert_eq!(cluster.owners("seq", 0), [newcomer]);
    let starts = lock(&cluster.starts)[starts_before..].to_vec();
    let task0_starts: Vec<&Start> = starts.iter().filter(|s| s.task == "0").collect();
    assert_eq!(
        task0_starts.len(),
        1,
        "task 0 started once, on the newcomer: {task0_starts:?}"
    );
    assert!(task0_starts[0].at >= join_began);
    let on_holder = cluster
        .delivered(0)
        .iter()
        .filter(|d| d.worker == holder_id)
        .count();
    assert_eq!(on_holder, 0, "the worker holding task 0 back never ran it");
    cluster.shutdown().await;
    assert_eq!(cluster.offsets.violations(), Vec::<String>::new());
    assert_no_gap(0, &cluster.delivered(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slot_lost_during_its_hold_started_nothing_there() {
    let mut cluster = Cluster::new();
    cluster.delay = LONG_HOLD;
    for _ in 0..3 {
        cluster.join().await;
    }
    cluster.create(seq("seq", 2, "")).await;
    cluster.wait_running("seq", 2).await;
    let victim = cluster.owners("seq", 0)[0];
    cluster.crash(victim).await;
    let task0 = TaskId::new("seq", 0);
    let holder = cluster
        .live()
        .into_iter()
        .find(|&i| {
            cluster.nodes[i]
                .herder
                .held_back()
                .iter()
                .any(|(id, _)| *id == task0)
        })
        .expect("task 0 is held back by its new owner");
    let holder_id = cluster.nodes[holder].worker_id.clone();

    // The holder's session expires during the hold: its slots are lost (nothing of task 0 ran
    // there to abort), then it comes back.
    cluster.lose_and_rejoin(holder).await;
    assert!(cluster.nodes[holder].herder.held_back().is_empty());
    cluster.wait_running("seq", 2).await;
    let on_holder = cluster
        .delivered(0)
        .iter()
        .filter(|d| d.worker == holder_id)
        .count();
    assert_eq!(on_holder, 0, "the worker holding task 0 back never ran it");
    cluster.shutdown().await;
    assert_eq!(cluster.offsets.violations(), Vec::<String>::new());
    assert_no_gap(0, &cluster.delivered(0));
}
