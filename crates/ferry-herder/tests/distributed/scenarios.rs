//! Scenarios of a three-worker cluster: tasks spread, a crash, a graceful leave, reconfiguration,
//! STOPPED, and the leader's serialized writes.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_herder::{Herder, HerderErrorKind, OffsetInput, Route, WriteScope};
use ferry_runtime::stores::{ConfigBackingStore, State, StatusBackingStore, StatusEntry};
use ferry_runtime::{TargetState, TaskId};
use serde_json::json;

use crate::support::{Cluster, assert_no_gap, eventually, eventually_async, lock, seq};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tasks_spread_over_three_workers_and_writes_go_to_the_leader() {
    let mut cluster = Cluster::new();
    for _ in 0..3 {
        cluster.join().await;
    }
    let leader = cluster.wait_leader().await;
    let follower = cluster.follower();

    // Creating the same name twice: one success, one 409 (the second concurrently with the first).
    let (a, b) = tokio::join!(
        leader.create_connector("seq", seq("seq", 6, ""), TargetState::Running),
        leader.create_connector("seq", seq("seq", 6, ""), TargetState::Running),
    );
    let errors: Vec<_> = [a, b].into_iter().filter_map(Result::err).collect();
    assert_eq!(errors.len(), 1, "exactly one create fails: {errors:?}");
    assert_eq!(errors[0].kind, HerderErrorKind::AlreadyExists);
    assert_eq!(errors[0].status(), 409);

    cluster.wait_running("seq", 6).await;
    let spread = cluster.spread("seq");
    assert!(
        spread.values().all(|&n| n == 2),
        "6 tasks over 3 workers: {spread:?}"
    );

    // The status shows who runs each task, read on any worker.
    let status = follower.connector_status("seq").await.expect("status");
    assert_eq!(status.connector.state, "RUNNING");
    assert_eq!(status.tasks.len(), 6);
    for task in &status.tasks {
        assert_eq!(task.state, "RUNNING", "{task:?}");
        let owner = cluster.owners("seq", task.id)[0];
        assert_eq!(task.worker_id, cluster.nodes[owner].worker_id);
    }
    let owner0 = &cluster.nodes[cluster.owners("seq", 0)[0]];
    assert_eq!(
        status.connector.worker_id, owner0.worker_id,
        "the connector runs where task 0 does"
    );

    // Routing: cluster writes go to the leader, restarts to the owner; a forwarded request that
    // lands on the wrong worker is a 409.
    assert_eq!(
        leader
            .route_write(WriteScope::Cluster, false)
            .await
            .expect("route"),
        Route::Local
    );
    let leader_url = format!("http://{}", leader.worker_id());
    assert_eq!(
        follower
            .route_write(WriteScope::Cluster, false)
            .await
            .expect("route"),
        Route::Forward(leader_url)
    );
    let refused = follower
        .route_write(WriteScope::Cluster, true)
        .await
        .expect_err("forwarded to a non-leader");
    assert_eq!(refused.status(), 409);
    let create = follower
        .create_connector("other", seq("other", 1, ""), TargetState::Running)
        .await
        .expect_err("not the leader");
    assert_eq!(create.kind, HerderErrorKind::Conflict);
    let task1 = TaskId::new("seq", 1);
    let owner1 = cluster.owners("seq", 1)[0];
    for node in &cluster.nodes {
        let route = node
            .herder
            .route_write(WriteScope::Task(&task1), false)
            .await
            .expect("route");
        if node.id == owner1 {
            assert_eq!(route, Route::Local);
        } else {
            assert_eq!(
                route,
                Route::Forward(format!("http://{}", cluster.nodes[owner1].worker_id))
            );
        }
    }
    let owner0_url = format!("http://{}", owner0.worker_id);
    for node in &cluster.nodes {
        let route = node
            .herder
            .route_write(WriteScope::Connector("seq"), false)
            .await
            .expect("route");
        if node.worker_id == owner0.worker_id {
            assert_eq!(route, Route::Local);
        } else {
            assert_eq!(route, Route::Forward(owner0_url.clone()));
            let refused = node
                .herder
                .route_write(WriteScope::Connector("seq"), true)
                .await
                .expect_err("forwarded to a worker that does not run it");
            assert_eq!(refused.status(), 409);
        }
    }
    // The owner restarts its task: it resumes from its committed offset.
    let starts = lock(&cluster.starts).len();
    cluster.nodes[owner1]
        .herder
        .restart_task(&task1)
        .await
        .expect("restart");
    eventually("task 1 restarted", || {
        lock(&cluster.starts)[starts..]
            .iter()
            .any(|s| s.task == "1")
    })
    .await;

    cluster.shutdown().await;
    assert_eq!(cluster.offsets.violations(), Vec::<String>::new());
    for p in 0..6 {
        assert_no_gap(p, &cluster.delivered(p));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crashed_workers_tasks_move_and_resume_from_the_last_commit() {
    let mut cluster = Cluster::new();
    for _ in 0..3 {
        cluster.join().await;
    }
    cluster.create(seq("seq", 3, "")).await;
    cluster.wait_running("seq", 3).await;
    // Crash the worker running task 0 (and so the connector instance).
    let victim = cluster.owners("seq", 0)[0];
    let moved: Vec<usize> = (0..3)
        .filter(|&t| cluster.owners("seq", t) == [victim])
        .collect();
    let generation = |t: usize| {
        cluster
            .statuses
            .task(&TaskId::new("seq", t))
            .expect("a status")
            .generation
    };
    let old_generations: Vec<u32> = moved.iter().map(|&t| generation(t)).collect();
    let starts_before = lock(&cluster.starts).len();
    cluster.crash(victim).await;
    cluster.wait_running("seq", 3).await;
    for &task in &moved {
        assert_ne!(cluster.owners("seq", task), [victim]);
        let start = lock(&cluster.starts)[starts_before..]
            .iter()
            .find(|s| s.task == task.to_string())
            .cloned()
            .expect("the task started again elsewhere");
        // It resumed from the last offset committed before it (its crashed owner's last commit),
        // and its first commit is the first after that one: the crashed owner never committed again.
        let commits = cluster.offsets.commits(task);
        let first_own = commits
            .iter()
            .position(|&(_, i)| i == start.instance)
            .expect("the new instance committed");
        let before = first_own.checked_sub(1).map(|k| commits[k]);
        assert_eq!(
            start.resumed_after,
            before.map(|(n, _)| n),
            "task {task} resumed from the last offset committed before it"
        );
        assert!(
            commits[first_own..]
                .iter()
                .all(|&(_, i)| i == start.instance || Some(i) != before.map(|(_, i)| i)),
            "the crashed owner committed task {task} after the new owner started"
        );
        // The new instance's first record follows that offset: no gap.
        let first = cluster
            .delivered(task)
            .into_iter()
            .find(|d| d.instance == start.instance)
            .expect("the new instance delivered");
        assert_eq!(first.n, start.resumed_after.map_or(0, |n| n + 1));
    }
    // The new owners write their statuses in a newer generation: a late write of the crashed
    // owner's generation does not hide them.
    for (&task, old) in moved.iter().zip(old_generations) {
        let id = TaskId::new("seq", task);
        eventually("the new owner's RUNNING", || {
            cluster
                .statuses
                .task(&id)
                .is_some_and(|s| s.state == State::Running && s.generation > old)
        })
        .await;
        let stale = StatusEntry::new(
            State::Unassigned,
            cluster.nodes[victim].worker_id.as_str(),
            old,
        );
        cluster.statuses.put_task_safe(&id, stale);
        assert_eq!(
            cluster.statuses.task(&id).map(|s| s.state),
            Some(State::Running)
        );
    }
    let status = cluster.nodes[cluster.live()[0]]
        .herder
        .connector_status("seq")
        .await
        .expect("status");
    eventually("statuses name the new owners", || {
        (0..3).all(|t| {
            cluster
                .statuses
                .task(&TaskId::new("seq", t))
                .is_some_and(|s| {
                    s.state == State::Running && s.worker_id != cluster.nodes[victim].worker_id
                })
        })
    })
    .await;
    drop(status);
    cluster.shutdown().await;
    assert_eq!(cluster.offsets.violations(), Vec::<String>::new());
    for p in 0..3 {
        assert_no_gap(p, &cluster.delivered(p));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_graceful_leave_redelivers_nothing() {
    let mut cluster = Cluster::new();
    for _ in 0..3 {
        cluster.join().await;
    }
    cluster.create(seq("seq", 4, "")).await;
    cluster.wait_running("seq", 4).await;
    let leaving = cluster.owners("seq", 0)[0];
    cluster.leave(leaving).await;
    cluster.wait_running("seq", 4).await;
    cluster.join().await; // a joining worker gets a share
    eventually("the new worker runs a task", || {
        cluster.spread("seq").get(&3).is_some_and(|&n| n > 0)
    })
    .await;
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
async fn reconfiguring_through_the_config_store_changes_the_tasks() {
    let mut cluster = Cluster::new();
    for _ in 0..3 {
        cluster.join().await;
    }
    cluster.create(seq("seq", 2, "v1")).await;
    cluster.wait_running("seq", 2).await;
    // Another worker's write, seen through the store's updates: more tasks, a new tag.
    cluster
        .configs
        .put_connector_config("seq", &seq("seq", 4, "v2"), TargetState::Running)
        .await
        .expect("write");
    eventually_async("4 task configurations committed", || async {
        cluster.task_count("seq").await == Some(4)
    })
    .await;
    cluster.wait_running("seq", 4).await;
    eventually("every task runs with tag v2", || {
        let starts = lock(&cluster.starts);
        (0..4).all(|t| {
            starts
                .iter()
                .rev()
                .find(|s| s.task == t.to_string())
                .is_some_and(|s| s.tag == "v2")
        })
    })
    .await;
    let infos = cluster.leader().task_configs("seq").await.expect("tasks");
    assert!(infos.iter().all(|t| t.config["tag"] == "v2"));
    cluster.shutdown().await;
    assert_eq!(cluster.offsets.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stopped_connectors_get_an_empty_task_set_and_then_their_offsets_can_change() {
    let mut cluster = Cluster::new();
    for _ in 0..2 {
        cluster.join().await;
    }
    cluster.create(seq("seq", 2, "")).await;
    cluster.wait_running("seq", 2).await;
    let leader = cluster.leader();
    let patch = || {
        vec![OffsetInput {
            partition: json!({"p": "0"}),
            offset: json!({"n": 1000, "i": 0}),
        }]
    };
    let refused = leader
        .alter_offsets("seq", patch())
        .await
        .expect_err("running");
    assert_eq!(refused.status(), 400);
    assert!(refused.message.contains("STOPPED"), "{}", refused.message);

    leader
        .set_target_state("seq", TargetState::Stopped)
        .await
        .expect("stop");
    eventually_async("an empty task set is committed", || async {
        cluster.task_count("seq").await == Some(0)
    })
    .await;
    eventually("no task runs", || {
        (0..2).all(|t| cluster.owners("seq", t).is_empty())
    })
    .await;
    eventually("the connector is STOPPED", || {
        cluster
            .statuses
            .connector("seq")
            .is_some_and(|s| s.state == State::Stopped)
    })
    .await;
    let not_leader = cluster
        .follower()
        .alter_offsets("seq", patch())
        .await
        .expect_err("follower");
    assert_eq!(not_leader.status(), 409);
    // Accepted once every task reported its stop (409 while a final commit may be under way).
    eventually_async("the offsets are altered", || async {
        match leader.alter_offsets("seq", patch()).await {
            Ok(_) => true,
            Err(e) if e.kind == HerderErrorKind::Conflict => false,
            Err(e) => panic!("{e}"),
        }
    })
    .await;
    assert_eq!(cluster.offsets.committed("seq", 0).await, Some(1000));

    let starts = lock(&cluster.starts).len();
    leader
        .set_target_state("seq", TargetState::Running)
        .await
        .expect("resume");
    eventually("task 0 resumes after the altered offset", || {
        lock(&cluster.starts)[starts..]
            .iter()
            .any(|s| s.task == "0" && s.resumed_after == Some(1000))
    })
    .await;
    leader.delete_connector("seq").await.expect("deleted");
    eventually("no task runs after the delete", || {
        (0..2).all(|t| cluster.owners("seq", t).is_empty())
    })
    .await;
    eventually("its statuses are gone", || {
        cluster.statuses.tasks("seq").is_empty() && cluster.statuses.connector("seq").is_none()
    })
    .await;
    assert!(leader.connectors().await.is_empty());
    cluster.shutdown().await;
    assert_eq!(cluster.offsets.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failed_group_calls_are_retried_and_pause_and_resume_reach_every_owner() {
    let mut cluster = Cluster::new();
    for _ in 0..2 {
        cluster.join().await;
    }
    cluster
        .coordinator
        .failing_adds
        .store(3, std::sync::atomic::Ordering::SeqCst);
    cluster.create(seq("seq", 2, "")).await;
    cluster.wait_running("seq", 2).await;
    assert_eq!(
        cluster
            .coordinator
            .failing_adds
            .load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the failed calls were retried"
    );
    let leader = cluster.leader();
    leader
        .set_target_state("seq", TargetState::Paused)
        .await
        .expect("pause");
    eventually("every task PAUSED", || {
        (0..2).all(|t| {
            cluster
                .statuses
                .task(&TaskId::new("seq", t))
                .is_some_and(|s| s.state == State::Paused)
        })
    })
    .await;
    let paused_at: Vec<Option<i64>> = {
        let mut v = Vec::new();
        for t in 0..2 {
            v.push(cluster.offsets.committed("seq", t).await);
        }
        v
    };
    let status = cluster
        .follower()
        .connector_status("seq")
        .await
        .expect("status");
    assert_eq!(status.connector.state, "PAUSED");
    leader
        .set_target_state("seq", TargetState::Running)
        .await
        .expect("resume");
    for (t, before) in paused_at.into_iter().enumerate() {
        eventually_async("the task polls again", || async {
            cluster.offsets.committed("seq", t).await > before
        })
        .await;
    }
    cluster.shutdown().await;
    assert_eq!(cluster.offsets.violations(), Vec::<String>::new());
}

/// KAFKA-9184's rule for the connector's owner: while the coordinator has not confirmed the worker
/// lately (its membership lease is not valid: frozen, cut off, maybe no longer the owner of slot 0),
/// it writes no task configurations made from its view; it writes them once confirmed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn task_configurations_wait_for_a_valid_membership_lease() {
    let mut cluster = Cluster::new();
    let lease = Arc::new(ferry_plugin::MembershipLease::new(Duration::from_millis(
        300,
    )));
    cluster.lease = Some(lease.clone());
    cluster.join().await;
    lease.confirm(Instant::now());
    cluster.create(seq("seq", 2, "v1")).await;
    cluster.wait_running("seq", 2).await;

    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!lease.is_valid());
    cluster
        .configs
        .put_connector_config("seq", &seq("seq", 3, "v2"), TargetState::Running)
        .await
        .expect("write");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_ne!(
        cluster.task_count("seq").await,
        Some(3),
        "no task configurations written while the lease is not valid"
    );
    lease.confirm(Instant::now());
    eventually_async("3 task configurations once confirmed", || async {
        cluster.task_count("seq").await == Some(3)
    })
    .await;
    cluster.shutdown().await;
}
