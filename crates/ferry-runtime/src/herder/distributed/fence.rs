//! Handoff and self-fencing through the status store.
//!
//! The group should never give a slot to two live workers, but a worker cannot prove it still holds a
//! slot: its session may have expired unnoticed (Kafka Connect's zombie workers, KAFKA-9184 and
//! KAFKA-16056), and a broker's coordinator may give a slot to a new member before its old owner
//! revoked it (tansu 0.6 answers a JoinGroup without waiting for the other members, so the assignor
//! works from their previous subscriptions). So ownership is also settled in the status store:
//!
//! - every new owner writes a **claim** — an UNASSIGNED status one generation above every stored
//!   one — when it gets the slot; if the stored status showed another worker still running the task,
//!   it starts nothing until that worker **releases** it (writes STOPPED) or the handoff timeout (or
//!   the longer `scheduled.rebalance.max.delay.ms`) passed (see `handler`);
//! - every worker checks every [`FENCE_EVERY`] whether a task it holds was claimed by another worker
//!   with a newer generation; if so it stops the task **with its final commit** (the claimant has not
//!   started it: it waits for the release) and then releases it: STOPPED at the claim's generation,
//!   which the claimant reads as its go. The new owner then resumes exactly after that commit.
//!
//! A fenced slot stays fenced while the group still gives it to this worker, until its claimant
//! releases it in turn (a STOPPED status written by another worker: the group took the slot back from
//! whoever held it — after running the task, or before, then one generation above its claim), or
//! this worker's own release stayed untaken for twice the handoff timeout (the claimant's release
//! raced with it); then this worker claims it again, holding it for a second so that of two workers
//! claiming it back at once, the one whose claim the store did not keep steps back. Without that, a
//! slot the group kept here while it also gave it to another worker, then took back from that
//! worker, would run nowhere.
//!
//! Limits: a worker that died cannot release, so its tasks start after the hold (duplicates of what it
//! delivered after its last commit, as any crash); a stop slower than the handoff timeout overlaps the
//! new owner briefly (duplicates, never a gap: every commit either makes is of records it delivered).
//! A lost slot is released too (after its abort), with `put_task_safe` and never over another
//! worker's live status; if the broker cannot be reached the write is lost, and a worker that fenced
//! the slot for it claims it back once its own release stayed untaken (above).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::DistributedHerder;
use super::ownership::Fenced;
use crate::state::TaskId;
use crate::stores::{State, StatusEntry};

/// How often this worker looks for newer claims on its tasks and for releases it waits for.
pub(super) const FENCE_EVERY: Duration = Duration::from_millis(250);

/// How long a slot claimed back waits before it starts (see `reclaim_released`).
const RECLAIM_SETTLE: Duration = Duration::from_secs(1);

/// A task another worker claimed: who, at which generation, and this worker's generation.
struct Superseded {
    id: TaskId,
    claimant: String,
    claim: u32,
    mine: u32,
    /// The claimant released it already (its STOPPED): the group took the slot back from it before
    /// it ran the task. Nothing to release; it is claimed again here once stopped.
    released: bool,
}

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
            let mut changed = self.released_holds();
            changed |= self.reclaim_released();
            let superseded = self.superseded();
            if !superseded.is_empty() {
                self.hand_over(superseded).await;
                changed = true;
            }
            if changed {
                self.kick.notify_one();
            }
        }
    }

    /// Ends the holds whose previous owner released the task; whether any ended.
    fn released_holds(&self) -> bool {
        let mut owned = self.owned();
        let mut any = false;
        for (id, claim) in &mut owned.slots {
            let Some(previous) = &claim.waits_for else {
                continue;
            };
            if claim.hold_until.is_none() {
                continue;
            }
            if self
                .statuses
                .task(id)
                .is_some_and(|s| s.state == State::Stopped && s.worker_id == *previous)
            {
                tracing::info!(task = %id, "task {id} was released by {previous}; starting it here");
                claim.hold_until = None;
                claim.waits_for = None;
                any = true;
            }
        }
        any
    }

    /// The slots held here that another worker claimed since: forgotten here (nothing starts them
    /// again until they are released or assigned anew) and returned.
    fn superseded(&self) -> Vec<Superseded> {
        let mut owned = self.owned();
        let superseded: Vec<Superseded> = owned
            .slots
            .iter()
            .filter_map(|(id, mine)| {
                let stored = self.statuses.task(id)?;
                (stored.worker_id != self.settings.worker_id && stored.generation > mine.generation)
                    .then(|| Superseded {
                        id: id.clone(),
                        claimant: stored.worker_id,
                        claim: stored.generation,
                        mine: mine.generation,
                        released: stored.state == State::Stopped,
                    })
            })
            .collect();
        for s in &superseded {
            owned.slots.remove(&s.id);
            owned.running.remove(&s.id);
            owned.fenced.insert(
                s.id.clone(),
                Fenced {
                    claimant: s.claimant.clone(),
                    since: Instant::now(),
                },
            );
        }
        superseded
    }

    /// Stops the superseded tasks (final commits included), then releases each to its claimant.
    async fn hand_over(self: &Arc<Self>, superseded: Vec<Superseded>) {
        for s in &superseded {
            tracing::warn!(
                task = %s.id,
                "task {} was claimed by worker {} (status generation {}) while this worker held it \
                 (generation {}): the group gave it to two workers; stopping it here (final commit \
                 included) and releasing it to that worker",
                s.id,
                s.claimant,
                s.claim,
                s.mine
            );
        }
        // Like a revocation: wait (bounded) for a start or stop under way in the loop.
        let applied =
            tokio::time::timeout(self.worker.graceful_timeout(), self.applied.lock()).await;
        let mut stops = JoinSet::new();
        for s in &superseded {
            let (this, id) = (self.clone(), s.id.clone());
            stops.spawn(async move {
                let _ = this.worker.stop_task(&id).await;
            });
        }
        while stops.join_next().await.is_some() {}
        drop(applied);
        // Anything of them still running (a stop past its graceful timeout) never commits again.
        self.abort_all(superseded.iter().map(|s| s.id.clone()).collect())
            .await;
        for s in superseded.iter().filter(|s| !s.released) {
            // `put_task_safe`: a release back by the claimant (one generation above its claim, see
            // `handler`'s `release`) written meanwhile is not overwritten.
            let release =
                StatusEntry::new(State::Stopped, self.settings.worker_id.as_str(), s.claim);
            self.statuses.put_task_safe(&s.id, release);
        }
    }

    /// Claims again the fenced slots whose claimant released them (see the module docs); whether
    /// any was.
    fn reclaim_released(&self) -> bool {
        let mut owned = self.owned();
        let now = Instant::now();
        // Our own release left untaken this long: the claimant gave the slot up meanwhile (its own
        // release was overwritten or not seen), so the task would run nowhere.
        let untaken = self
            .settings
            .handoff_timeout
            .saturating_mul(2)
            .max(FENCE_EVERY * 8);
        let released: Vec<(TaskId, u32)> = owned
            .fenced
            .iter()
            .filter_map(|(id, fenced)| match self.statuses.task(id) {
                None => Some((id.clone(), 0)),
                // Released by whoever held it last (the claimant, or a later claimant of its own),
                // or this worker's own release left untaken.
                Some(stored)
                    if stored.state == State::Stopped
                        && (stored.worker_id != self.settings.worker_id
                            || now.duration_since(fenced.since) > untaken) =>
                {
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
            // Held briefly: another fenced worker may claim it back at the same generation from the
            // same view; the one whose claim the store does not keep steps back (`superseded`).
            owned.slots.insert(
                id.clone(),
                super::ownership::Claim {
                    generation: *generation,
                    hold_until: Some(now + RECLAIM_SETTLE),
                    waits_for: None,
                },
            );
            tracing::info!(
                task = %id,
                "task {id} was released by the worker that claimed it; this worker, which still holds its \
                 slot, claims it again (status generation {generation})"
            );
        }
        !released.is_empty()
    }
}
