//! The group's calls: slots assigned, revoked (stop with final commits before returning) or lost
//! (abort, nothing committed).

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ferry_plugin::{GroupHandler, Slot};
use tokio::runtime::Handle;
use tokio::task::JoinSet;

use super::DistributedHerder;
use super::ownership::Claim;
use ferry_runtime::TaskId;
use ferry_runtime::stores::{State, StatusEntry};

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
    fn assigned(self: &Arc<Self>, slots: &[Slot]) {
        // A graceful revocation's STOPPED may not have reached this worker's view yet: catch up
        // first, or the task would be held back for nothing.
        if slots.iter().any(|s| matches!(s, Slot::Task(_))) {
            self.catch_up_statuses("assigned");
        }
        let now = Instant::now();
        let delay = self.settings.scheduled_rebalance_max_delay;
        let mut owned = self.owned();
        for slot in slots {
            match slot {
                Slot::Leader => {
                    owned.leader = true;
                    tracing::info!(worker = %self.settings.worker_id, "this worker is now the leader");
                }
                Slot::Task(id) => {
                    let stored = self.statuses.task(id);
                    // The claim: one above every generation stored for the task, written now so that
                    // a later claim by another worker is above this one (see the module docs).
                    let generation = stored
                        .as_ref()
                        .map_or(0, |s| s.generation.saturating_add(1));
                    let departed = stored.as_ref().and_then(|s| self.departed(s));
                    // Another worker may run it (it still ran it — no revocation reached it, or it
                    // died —, or it claimed it, or it was released to it): wait for its release (it
                    // sees this claim and stops, see `fence`) or, if it never comes, for the longer
                    // of the handoff timeout and the rebalance delay.
                    let hold = delay.max(self.settings.handoff_timeout);
                    let hold_until = match departed {
                        Some(departed) if !hold.is_zero() => {
                            tracing::info!(
                                task = %id,
                                "task {id} waits for its previous owner {departed}, which still ran it, to \
                                 release it; it starts here then, or at {} at the latest \
                                 (scheduled.rebalance.max.delay.ms={} ms) if that worker is gone",
                                utc_clock(SystemTime::now().checked_add(hold)),
                                delay.as_millis(),
                            );
                            // A delay beyond the clock's range (absurd) holds for a century.
                            now.checked_add(hold).or_else(|| now.checked_add(FOREVER))
                        }
                        _ => None,
                    };
                    let waits_for = hold_until.and(departed.map(str::to_owned));
                    // Over a release, the claim says who released: a claimant still waiting for
                    // that worker learns it stopped (see `fence`'s deferred releases).
                    let after = stored
                        .as_ref()
                        .filter(|s| s.state == State::Stopped)
                        .map(|s| s.worker_id.as_str());
                    let status = super::ownership::claim(
                        self.settings.worker_id.as_str(),
                        generation,
                        after,
                    );
                    self.statuses.put_task_safe(id, status.clone());
                    owned.fenced.remove(id);
                    owned.deferred.remove(id);
                    owned.slots.insert(
                        id.clone(),
                        Claim {
                            generation,
                            hold_until,
                            waits_for,
                            written: status,
                        },
                    );
                    tracing::info!(task = %id, "slot {id} assigned to this worker (status generation {generation})");
                }
            }
        }
        drop(owned);
        self.kick.notify_one();
    }

    /// The other worker that may run the task, if `stored` says so: RUNNING, PAUSED or RESTARTING
    /// under it (it departed with the task running, or no revocation reached it), its UNASSIGNED
    /// claim (it may have started the task already: its RUNNING comes after the start), or a
    /// release to it (it starts the task as soon as it sees the release). A revocation's STOPPED,
    /// without an addressee, leaves the task running nowhere.
    fn departed<'a>(&self, stored: &'a StatusEntry) -> Option<&'a str> {
        let me = self.settings.worker_id.as_str();
        let holder = if is_live(stored) || stored.state == State::Unassigned {
            Some(stored.worker_id.as_str())
        } else {
            super::ownership::released_to(stored)
        };
        holder.filter(|holder| *holder != me)
    }

    /// Catches the status store up (bounded by [`CATCH_UP`]); on failure the decisions use what it
    /// had read before.
    fn catch_up_statuses(&self, when: &str) {
        let statuses = self.statuses.clone();
        let caught_up = self.block_on(when, async move {
            tokio::time::timeout(CATCH_UP, statuses.catch_up()).await
        });
        match caught_up {
            Some(Ok(Ok(()))) | None => {}
            Some(Ok(Err(e))) => tracing::warn!(
                "slots {when}: the status store could not catch up ({e}); going on with the statuses read before"
            ),
            Some(Err(_)) => tracing::warn!(
                "slots {when}: the status store did not catch up within {CATCH_UP:?}; going on with the statuses read before"
            ),
        }
    }

    /// Stops what runs in `slots` — final commits included — before returning.
    fn revoked(self: &Arc<Self>, slots: &[Slot]) {
        let ids = tasks(slots);
        let claims: Vec<(TaskId, u32)> = {
            let mut owned = self.owned();
            if slots.contains(&Slot::Leader) {
                owned.leader = false;
                tracing::info!(worker = %self.settings.worker_id, "this worker is no longer the leader");
            }
            for id in &ids {
                owned.fenced.remove(id);
            }
            ids.iter()
                .filter_map(|id| owned.slots.remove(id).map(|c| (id.clone(), c.generation)))
                .collect()
        };
        if ids.is_empty() {
            return;
        }
        tracing::info!("slots revoked: stopping {ids:?} (final commits included)");
        let this = self.clone();
        self.block_on("revoked", async move {
            // Waits for a start or stop under way in the loop (nothing can start these afterwards:
            // the slots are gone from `owned`), but not longer than a graceful stop may take, so the
            // whole revocation stays within graceful timeout + stop (below the revoke timeout), plus
            // at most `CATCH_UP` to make the final statuses durable (`release`).
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
        self.release(&claims);
        self.kick.notify_one();
    }

    /// After a revocation: each task is **released** — a STOPPED status, which tells its next owner
    /// it may start at once (no hold-back) and a worker the group kept the slot at that it may claim
    /// it again (see `fence`) — then the status writes are made durable (bounded) before the handler
    /// returns, so the next owner, which catches up first, sees them.
    fn release(&self, claims: &[(TaskId, u32)]) {
        if claims.is_empty() {
            return;
        }
        self.write_releases(claims);
        self.catch_up_statuses("revoked");
    }

    /// Writes the release of each task given up here, unless another worker already runs it (its
    /// live status is never overwritten):
    /// - a claim never started here (this worker's UNASSIGNED claim, or the previous owner's release
    ///   to it) is released one generation above it, so that a late release to this worker
    ///   (`put_task_safe`, at the claim's generation) cannot hide it;
    /// - a task whose status still says it runs here (a stop cut short: an abort writes no status);
    /// - another worker's claim that waits for this worker: released at that claim's generation.
    fn write_releases(&self, claims: &[(TaskId, u32)]) {
        let me = self.settings.worker_id.as_str();
        for (id, generation) in claims {
            let Some(stored) = self.statuses.task(id) else {
                self.statuses
                    .put_task_safe(id, StatusEntry::new(State::Stopped, me, *generation));
                continue;
            };
            let never_started = stored.generation == *generation
                && match stored.state {
                    State::Unassigned => stored.worker_id == me,
                    State::Stopped => stored.worker_id != me,
                    _ => false,
                };
            let release = if never_started {
                generation.saturating_add(1)
            } else if stored.worker_id == me && is_live(&stored) {
                stored.generation.max(*generation)
            } else if stored.worker_id != me && stored.state == State::Unassigned {
                // Addressed to the claimant, so that a worker getting the slot after it waits for
                // the claimant (see `departed`).
                self.statuses.put_task_safe(
                    id,
                    super::ownership::release_to(me, &stored.worker_id, stored.generation),
                );
                continue;
            } else {
                continue;
            };
            self.statuses
                .put_task_safe(id, StatusEntry::new(State::Stopped, me, release));
        }
    }

    /// Aborts what runs in `slots`: nothing of them commits once this returns.
    fn lost(self: &Arc<Self>, slots: &[Slot]) {
        let ids = tasks(slots);
        let claims: Vec<(TaskId, u32)> = {
            let mut owned = self.owned();
            if slots.contains(&Slot::Leader) {
                owned.leader = false;
            }
            for id in &ids {
                owned.running.remove(id);
                owned.fenced.remove(id);
            }
            ids.iter()
                .filter_map(|id| owned.slots.remove(id).map(|c| (id.clone(), c.generation)))
                .collect()
        };
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
        // Nothing of them commits any more: a next owner waiting for them may start (if the broker
        // is reachable at all; the writes are not waited for).
        self.write_releases(&claims);
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
    /// inside a runtime by mistake, it runs on a thread of its own rather than panic. `None`: no
    /// runtime yet (nothing ran), or the work panicked.
    fn block_on<T: Send>(
        &self,
        what: &str,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Option<T> {
        let Some(runtime) = self.runtime.get() else {
            tracing::error!(
                "slots {what} before the herder was created inside a tokio runtime: nothing ran yet, nothing to stop"
            );
            return None;
        };
        if Handle::try_current().is_ok() {
            std::thread::scope(|scope| scope.spawn(|| runtime.block_on(work)).join().ok())
        } else {
            Some(runtime.block_on(work))
        }
    }
}

/// Whether a stored status says the task runs (or is about to run again).
fn is_live(status: &StatusEntry) -> bool {
    matches!(
        status.state,
        State::Running | State::Paused | State::Restarting
    )
}

/// How long a catch-up with the status store may take in a handler call (it delays the
/// revocation's return and the assignment's decisions).
const CATCH_UP: Duration = Duration::from_secs(5);

/// A hold no delay reaches in practice (`scheduled.rebalance.max.delay.ms` is at most ~25 days).
const FOREVER: Duration = Duration::from_secs(100 * 365 * 86_400);

/// `HH:MM:SS.mmm UTC` of `at`, for logs.
fn utc_clock(at: Option<SystemTime>) -> String {
    let Some(at) = at else {
        return "never".to_owned();
    };
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs() % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{:03} UTC",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        since.subsec_millis()
    )
}
