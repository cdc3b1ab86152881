//! The ownership model under random membership changes: workers join, leave gracefully, crash, or
//! lose their session and rejoin, and the connector is paused and resumed, while a 4-task connector
//! runs. At every step, once the group settled, each task runs on exactly one live worker; while it
//! settles (sampled every few milliseconds), no task runs on two workers that were live when the change
//! began; throughout, the offset store sees, per source partition, offsets that never move backwards and
//! no commit from an instance after a newer one took over (what two live owners of one task would
//! produce); and no record is skipped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ferry_herder::{DistributedHerder, Herder};
use ferry_runtime::{TargetState, TaskId};
use proptest::prelude::*;

use crate::support::{Cluster, assert_no_gap, seq};

#[derive(Debug, Clone)]
enum Op {
    Join,
    Leave(usize),
    Crash(usize),
    Lose(usize),
    /// The connector is paused, then resumed after that many milliseconds.
    PauseResume(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Join),
        1 => any::<usize>().prop_map(Op::Leave),
        1 => any::<usize>().prop_map(Op::Crash),
        1 => any::<usize>().prop_map(Op::Lose),
        1 => (0u64..200).prop_map(Op::PauseResume),
    ]
}

/// Samples, until `done`, which of `herders` run each task; returns the first moment a task ran on
/// two of them.
async fn watch_owners(
    herders: &[(usize, Arc<DistributedHerder>)],
    done: &AtomicBool,
) -> Option<String> {
    while !done.load(Ordering::Acquire) {
        for task in 0..TASKS {
            let id = TaskId::new("seq", task);
            let owners: Vec<usize> = herders
                .iter()
                .filter(|(_, h)| h.worker().tasks("seq").contains(&id))
                .map(|(i, _)| *i)
                .collect();
            if owners.len() > 1 {
                return Some(format!("task {task} ran on workers {owners:?} at once"));
            }
        }
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    None
}

const TASKS: usize = 4;

async fn run(ops: Vec<Op>) {
    let mut cluster = Cluster::new();
    cluster.join().await;
    cluster.join().await;
    cluster.create(seq("seq", TASKS, "")).await;
    cluster.wait_running("seq", TASKS).await;
    for op in ops {
        let live = cluster.live();
        match op {
            Op::Join => {
                cluster.join().await;
            }
            // Never below one live worker: someone must run the tasks.
            Op::Leave(_) | Op::Crash(_) | Op::Lose(_)
                if live.len() < 2 && !matches!(op, Op::Lose(_)) =>
            {
                cluster.join().await;
            }
            Op::Leave(i) => cluster.leave(live[i % live.len()]).await,
            Op::Crash(i) => cluster.crash(live[i % live.len()]).await,
            Op::Lose(i) => cluster.lose_and_rejoin(live[i % live.len()]).await,
            Op::PauseResume(ms) => {
                let leader = cluster.wait_leader().await;
                leader
                    .set_target_state("seq", TargetState::Paused)
                    .await
                    .expect("paused");
                tokio::time::sleep(Duration::from_millis(ms)).await;
                leader
                    .set_target_state("seq", TargetState::Running)
                    .await
                    .expect("resumed");
            }
        }
        // While the group settles, no task may run on two workers at once.
        let herders = cluster.live_herders();
        let done = AtomicBool::new(false);
        let (_, doubled) = tokio::join!(
            async {
                cluster.wait_running("seq", TASKS).await;
                done.store(true, Ordering::Release);
            },
            watch_owners(&herders, &done)
        );
        assert_eq!(doubled, None, "while settling after {op:?}");
        for task in 0..TASKS {
            let owners = cluster.owners("seq", task);
            assert_eq!(
                owners.len(),
                1,
                "task {task} runs on {owners:?} after {op:?}"
            );
        }
        let violations = cluster.offsets.violations();
        assert!(violations.is_empty(), "after {op:?}: {violations:#?}");
    }
    cluster.shutdown().await;
    let violations = cluster.offsets.violations();
    assert!(violations.is_empty(), "{violations:#?}");
    for p in 0..TASKS {
        assert_no_gap(p, &cluster.delivered(p));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn at_most_one_live_owner_and_offsets_never_move_backwards(ops in prop::collection::vec(op(), 1..6)) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(run(ops));
    }
}
