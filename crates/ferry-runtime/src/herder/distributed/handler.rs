//! The group's calls: slots assigned, revoked (stop with final commits before returning) or lost
//! (abort, nothing committed).

use std::sync::{Arc, Weak};

use ferry_plugin::{GroupHandler, Slot};
use tokio::runtime::Handle;
use tokio::task::JoinSet;

use super::DistributedHerder;
use crate::state::TaskId;
use crate::stores::{State, StatusEntry};

/// The herder's [`GroupHandler`]. It holds the herder weakly: the group (which holds the handler)
/// must not keep a shut-down herder alive.
pub(super) struct SlotHandler {
    herder: Weak<DistributedHerder>,
}

impl SlotHandler {
    pub(super) fn new(herder: &Arc<DistributedHerder>) -> Self {
        Self {
            herder: Arc::downgrade(herder),
        }
    }
}

impl GroupHandler for SlotHandler {
    fn assigned(&self, slots: &[Slot]) {
        if let Some(herder) = self.herder.upgrade() {
            herder.assigned(slots);
        }
    }

    fn revoked(&self, slots: &[Slot]) {
        if let Some(herder) = self.herder.upgrade() {
            herder.revoked(slots);
        }
    }

    fn lost(&self, slots: &[Slot]) {
        if let Some(herder) = self.herder.upgrade() {
            herder.lost(slots);
        }
    }
}

fn tasks(slots: &[Slot]) -> Vec<TaskId> {
    slots
        .iter()
        .filter_map(|slot| match slot {
            Slot::Task(id) => Some(id.clone()),
            Slot::Leader => None,
        })
        .collect()
}

impl DistributedHerder {
    fn assigned(&self, slots: &[Slot]) {
        let mut owned = self.owned();
        for slot in slots {
            match slot {
                Slot::Leader => {
                    owned.leader = true;
                    tracing::info!(worker = %self.settings.worker_id, "this worker is now the leader");
                }
                Slot::Task(id) => {
                    // The claim: one above every generation stored for the task, written now so that
                    // a later claim by another worker is above this one (see the module docs).
                    let generation = self
                        .statuses
                        .task(id)
                        .map_or(0, |s| s.generation.saturating_add(1));
                    let status = StatusEntry::new(
                        State::Unassigned,
                        self.settings.worker_id.as_str(),
                        generation,
                    );
                    self.statuses.put_task_safe(id, status);
                    owned.fenced.remove(id);
                    owned.slots.insert(id.clone(), generation);
                    tracing::info!(task = %id, "slot {id} assigned to this worker (status generation {generation})");
                }
            }
        }
        drop(owned);
        self.kick.notify_one();
    }

    /// Stops what runs in `slots` — final commits included — before returning.
    fn revoked(self: &Arc<Self>, slots: &[Slot]) {
        let ids = tasks(slots);
        {
            let mut owned = self.owned();
            if slots.contains(&Slot::Leader) {
                owned.leader = false;
                tracing::info!(worker = %self.settings.worker_id, "this worker is no longer the leader");
            }
            for id in &ids {
                owned.slots.remove(id);
                owned.fenced.remove(id);
            }
        }
        if ids.is_empty() {
            return;
        }
        tracing::info!("slots revoked: stopping {ids:?} (final commits included)");
        let this = self.clone();
        self.block_on("revoked", async move {
            // Waits for a start or stop under way in the loop (nothing can start these afterwards:
            // the slots are gone from `owned`), but not longer than a graceful stop may take, so the
            // whole revocation stays within graceful timeout + stop (below the revoke timeout).
            let waited = tokio::time::timeout(this.worker.graceful_timeout(), this.applied.lock());
            let Ok(mut applied) = waited.await else {
                tracing::error!(
                    "the revocation of {ids:?} waited task.shutdown.graceful.timeout.ms for a change under way; \
                     aborting them without final commits so that their next owner never overlaps them"
                );
                this.abort_all(ids).await;
                return;
            };
            let mut stops = JoinSet::new();
            for id in &ids {
                if id.task == 0 {
                    applied.instances.remove(&id.connector);
                }
                applied.retired.insert(id.connector.clone());
                if this.owned().running.remove(id).is_some() {
                    let (this, id) = (this.clone(), id.clone());
                    stops.spawn(async move {
                        let _ = this.worker.stop_task(&id).await;
                    });
                }
            }
            while stops.join_next().await.is_some() {}
            // A stop that outlasted its graceful timeout left its instance cancelled but maybe with
            // a write in flight: fence it, so nothing of it commits once the revocation returned.
            this.abort_all(ids).await;
        });
        self.kick.notify_one();
    }

    /// Aborts what runs in `slots`: nothing of them commits once this returns.
    fn lost(self: &Arc<Self>, slots: &[Slot]) {
        let ids = tasks(slots);
        {
            let mut owned = self.owned();
            if slots.contains(&Slot::Leader) {
                owned.leader = false;
            }
            for id in &ids {
                owned.slots.remove(id);
                owned.running.remove(id);
                owned.fenced.remove(id);
            }
        }
        if ids.is_empty() {
            return;
        }
        tracing::warn!(
            "slots lost (another worker may own them already): aborting {ids:?} without committing"
        );
        let this = self.clone();
        // Not under `applied`: a graceful stop under way there must not delay the abort, and the
        // abort reaches a stopping instance too (its fence).
        self.block_on("lost", async move { this.abort_all(ids).await });
    }

    /// Aborts every instance of `ids` (see [`crate::Worker::abort_task`]), all at once.
    pub(super) async fn abort_all(self: &Arc<Self>, ids: Vec<TaskId>) {
        let mut aborts = JoinSet::new();
        for id in ids {
            let this = self.clone();
            aborts.spawn(async move {
                this.worker.abort_task(&id).await;
            });
        }
        while aborts.join_next().await.is_some() {}
    }

    /// Runs `work` to its end on the herder's runtime from the group's (plain) thread. Called from
    /// inside a runtime by mistake, it runs on a thread of its own rather than panic.
    fn block_on(&self, what: &str, work: impl Future<Output = ()> + Send + 'static) {
        let Some(runtime) = self.runtime.get() else {
            tracing::error!(
                "slots {what} before the herder was created inside a tokio runtime: nothing ran yet, nothing to stop"
            );
            return;
        };
        if Handle::try_current().is_ok() {
            std::thread::scope(|scope| {
                let _ = scope.spawn(|| runtime.block_on(work)).join();
            });
        } else {
            runtime.block_on(work);
        }
    }
}
