//! Self-fencing through the status store: a worker stops a task at once, without committing, when
//! another worker has claimed it with a newer status generation.
//!
//! The group should never give a slot to two live workers, but a worker cannot prove it still holds a
//! slot: its session may have expired unnoticed (Kafka Connect's zombie workers, KAFKA-9184 and
//! KAFKA-16056), and a broker's coordinator may assign a slot again before the old owner revoked it
//! (seen with tansu 0.6 after a member's session expired). Every new owner writes a claim — an
//! UNASSIGNED status one generation above every stored one — before it starts the task, so a claim
//! above this worker's own, by another worker, means the task runs elsewhere now. The check runs every
//! [`FENCE_EVERY`] against the status store's view (refreshed by its owner), so an overlap lasts
//! about one refresh plus one check; what the old owner delivered meanwhile is delivered again by the
//! new one (duplicates, never a gap: every commit either made is of records it delivered).
//!
//! A fenced slot stays fenced while the group still gives it to this worker, until the claimant
//! releases the task (its last status is STOPPED: it stopped it on a revocation) or its status is
//! gone; then this worker claims it again and runs it. Without that, a slot the group kept here while
//! it also (wrongly) gave it to another worker, then took back from that worker, would run nowhere.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::DistributedHerder;
use crate::state::TaskId;
use crate::stores::{State, StatusEntry};

/// How often this worker looks for newer claims on the tasks it holds.
pub(super) const FENCE_EVERY: Duration = Duration::from_millis(250);

impl DistributedHerder {
    /// Checks every [`FENCE_EVERY`] until `stop`.
    pub(super) async fn fence(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut ticks = tokio::time::interval(FENCE_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                _ = ticks.tick() => {}
            }
            if *stop.borrow() {
                return;
            }
            if self.reclaim_released() {
                self.kick.notify_one();
            }
            let superseded = self.superseded();
            if superseded.is_empty() {
                continue;
            }
            for (id, claim) in &superseded {
                tracing::warn!(
                    task = %id,
                    "task {id} was claimed by worker {} (status generation {}) while this worker still held \
                     it (generation {}): the group gave it to two workers; stopping it here without \
                     committing",
                    claim.0,
                    claim.1,
                    claim.2
                );
            }
            let ids: Vec<TaskId> = superseded.into_iter().map(|(id, _)| id).collect();
            self.abort_all(ids).await;
            self.kick.notify_one();
        }
    }

    /// The slots held here that another worker claimed since (their slots and tasks are forgotten
    /// here, so nothing starts them again until the group assigns them anew), each with
    /// (claiming worker, its generation, this worker's generation).
    fn superseded(&self) -> Vec<(TaskId, (String, u32, u32))> {
        let mut owned = self.owned();
        let superseded: Vec<(TaskId, (String, u32, u32))> = owned
            .slots
            .iter()
            .filter_map(|(id, mine)| {
                let stored = self.statuses.task(id)?;
                (stored.worker_id != self.settings.worker_id && stored.generation > *mine)
                    .then(|| (id.clone(), (stored.worker_id, stored.generation, *mine)))
            })
            .collect();
        for (id, _) in &superseded {
            owned.slots.remove(id);
            owned.running.remove(id);
            owned.fenced.insert(id.clone());
        }
        superseded
    }

    /// Claims again the fenced slots whose claimant released them (see the module docs); whether
    /// any was.
    fn reclaim_released(&self) -> bool {
        let mut owned = self.owned();
        let released: Vec<(TaskId, u32)> = owned
            .fenced
            .iter()
            .filter_map(|id| match self.statuses.task(id) {
                None => Some((id.clone(), 0)),
                Some(stored) if stored.state == State::Stopped => {
                    Some((id.clone(), stored.generation.saturating_add(1)))
                }
                Some(_) => None,
            })
            .collect();
        for (id, generation) in &released {
            owned.fenced.remove(id);
            let claim = StatusEntry::new(
                State::Unassigned,
                self.settings.worker_id.as_str(),
                *generation,
            );
            self.statuses.put_task_safe(id, claim);
            owned.slots.insert(id.clone(), *generation);
            tracing::info!(
                task = %id,
                "task {id} was released by the worker that claimed it; this worker, which still holds its \
                 slot, claims it again (status generation {generation})"
            );
        }
        !released.is_empty()
    }
}
