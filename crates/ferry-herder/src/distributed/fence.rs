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
//! A release to a claimant names it (`ownership::release_to`, in the STOPPED status's trace): it
//! means "that claimant may run it now", unlike a revocation's STOPPED ("runs nowhere"). So a third
//! worker getting the slot during a handoff (a claim, or a release to a claimant, stored) waits
//! for that claimant's release as for a running owner's; and a claimant that still waited itself
//! when a newer claim came releases to it only once the worker it waited for released the task
//! (`deferred_releases`): the newest claimant starts only when no earlier holder may run it.
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
use super::ownership::{Deferred, Fenced, claimed_after, release_to, released_to};
use ferry_runtime::TaskId;
use ferry_runtime::stores::{State, StatusEntry};

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
    /// This worker had not started the task yet: it still waited for this worker's release.
    waiting_for: Option<(String, Instant)>,
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
            self.reassert_claims();
            let mut changed = self.released_holds();
            self.deferred_releases();
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

    /// Writes again this worker's statuses that a stale one replaced: another worker's status of an
    /// older generation than this worker's claim, stored after it (a write delayed on its way, such
    /// as the previous owner's RUNNING; Kafka Connect's fold takes an older generation's RUNNING).
    /// Left so, the previous owner would never see the claim and never release the task: the
    /// claimant would wait out the handoff timeout and then run it alongside. A slot still held gets
    /// its claim again; a task running here its current state, at the claim's generation.
    fn reassert_claims(&self) {
        let me = self.settings.worker_id.as_str();
        let now = Instant::now();
        let stale: Vec<(TaskId, StatusEntry)> = {
            let owned = self.owned();
            owned
                .slots
                .iter()
                .filter(|(id, claim)| {
                    self.statuses
                        .task(id)
                        .is_some_and(|s| s.worker_id != me && s.generation < claim.generation)
                })
                .filter_map(|(id, claim)| {
                    if claim.held(now) || !owned.running.contains_key(id) {
                        return Some((id.clone(), claim.written.clone()));
                    }
                    let state = self
                        .worker
                        .task_statuses(&id.connector)?
                        .into_iter()
                        .find(|(name, _)| *name == id.to_string())?
                        .1
                        .state;
                    let state = match state {
                        crate::TaskState::Running => State::Running,
                        crate::TaskState::Paused => State::Paused,
                        _ => return None,
                    };
                    Some((id.clone(), StatusEntry::new(state, me, claim.generation)))
                })
                .collect()
        };
        for (id, status) in stale {
            tracing::warn!(
                task = %id,
                "a stale status of another worker replaced this worker's (generation {}) for task {id}; \
                 writing it again",
                status.generation
            );
            self.statuses.put_task_safe(&id, status);
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
            // Its release: STOPPED by it, addressed to this worker or to no one (a revocation).
            let me = self.settings.worker_id.as_str();
            if self.statuses.task(id).is_some_and(|s| {
                s.state == State::Stopped
                    && s.worker_id == *previous
                    && released_to(&s).is_none_or(|to| to == me)
            }) {
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
                let addressee = released_to(&stored).map(str::to_owned);
                (stored.worker_id != self.settings.worker_id && stored.generation > mine.generation)
                    .then(|| Superseded {
                        id: id.clone(),
                        released: stored.state == State::Stopped && addressee.is_none(),
                        claimant: addressee.unwrap_or(stored.worker_id),
                        claim: stored.generation,
                        mine: mine.generation,
                        waiting_for: mine
                            .waits_for
                            .clone()
                            .zip(mine.hold_until.filter(|_| mine.held(Instant::now()))),
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
            if let Some((waits_for, until)) = &s.waiting_for {
                // Never started here, but the worker this one waited for may still run it: the
                // claimant waits for this worker's release, so it is written once that worker
                // released the task (see `deferred_releases`).
                self.owned().deferred.insert(
                    s.id.clone(),
                    Deferred {
                        claim: s.claim,
                        waits_for: waits_for.clone(),
                        until: *until,
                    },
                );
                continue;
            }
            self.release_to_newest(&s.id, s.claim, &s.claimant);
        }
    }

    /// Releases `id` to its newest claimant: the one stored now if a newer claim came meanwhile,
    /// else `claimant` at `claim`. `put_task_safe`: a release back by the claimant (one generation
    /// above its claim, see `handler`'s `release`) written meanwhile is not overwritten.
    fn release_to_newest(&self, id: &TaskId, claim: u32, claimant: &str) {
        let me = self.settings.worker_id.as_str();
        let (to, generation) = match self.statuses.task(id) {
            Some(stored)
                if stored.generation > claim
                    && stored.worker_id != me
                    && stored.state == State::Unassigned =>
            {
                (stored.worker_id, stored.generation)
            }
            _ => (claimant.to_owned(), claim),
        };
        self.statuses
            .put_task_safe(id, release_to(me, &to, generation));
    }

    /// Writes the deferred releases whose wait is over: the worker this one waited for released the
    /// task (its STOPPED, to anyone: it stopped), or this worker's hold ran out (that worker is
    /// presumed gone, as by the claimant's own hold).
    fn deferred_releases(&self) {
        let now = Instant::now();
        let due: Vec<(TaskId, Deferred)> = {
            let mut owned = self.owned();
            let due: Vec<TaskId> = owned
                .deferred
                .iter()
                .filter(|(id, d)| {
                    now >= d.until
                        || self.statuses.task(id).is_none_or(|s| {
                            (s.state == State::Stopped && s.worker_id == d.waits_for)
                                || claimed_after(&s) == Some(d.waits_for.as_str())
                        })
                })
                .map(|(id, _)| id.clone())
                .collect();
            due.into_iter()
                .filter_map(|id| owned.deferred.remove(&id).map(|d| (id, d)))
                .collect()
        };
        for (id, d) in due {
            let claimant = match self.statuses.task(&id) {
                Some(stored) => released_to(&stored)
                    .map(str::to_owned)
                    .unwrap_or(stored.worker_id),
                None => continue,
            };
            tracing::info!(
                task = %id,
                "task {id}: {} released it; releasing it to {claimant}, which claimed it while this worker waited",
                d.waits_for
            );
            self.release_to_newest(&id, d.claim, &claimant);
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
                // A release to another claimant is not one: that claimant runs it now.
                Some(stored)
                    if stored.state == State::Stopped
                        && released_to(&stored).is_none_or(|to| to == self.settings.worker_id)
                        && stored.worker_id != self.settings.worker_id =>
                {
                    Some((id.clone(), stored.generation.saturating_add(1)))
                }
                Some(stored)
                    if stored.state == State::Stopped
                        && stored.worker_id == self.settings.worker_id
                        && now.duration_since(fenced.since) > untaken =>
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
            self.statuses.put_task_safe(id, claim.clone());
            // Held briefly: another fenced worker may claim it back at the same generation from the
            // same view; the one whose claim the store does not keep steps back (`superseded`).
            owned.slots.insert(
                id.clone(),
                super::ownership::Claim {
                    generation: *generation,
                    hold_until: Some(now + RECLAIM_SETTLE),
                    waits_for: None,
                    written: claim,
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
