//! What this worker holds in the group, and which tasks it started in those slots.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use ferry_api::Config;

use ferry_runtime::stores::{Handoff, State, StatusEntry};
use ferry_runtime::{TargetState, TaskId};

/// The release of a task by `me` to the worker `to` that claimed it: STOPPED at `generation`. A
/// release to a claimant means that claimant may now run the task, so a worker getting the slot next
/// must wait for that claimant, not take the STOPPED as "runs nowhere". The hand-over travels in the
/// status's own field ([`Handoff`]); the trace only tells a person reading the status.
pub(super) fn release_to(me: &str, to: &str, generation: u32) -> StatusEntry {
    StatusEntry::new(State::Stopped, me, generation)
        .with_trace(format!("released to worker {to} (handoff)"))
        .with_handoff(Handoff::ReleasedTo(to.to_owned()))
}

/// A claim of the task by `me` at `generation`; `after`: the worker whose release (STOPPED) the
/// claim overwrites. A claimant that waited for that worker learns it from the claim that overwrote
/// the release it had not seen yet.
pub(super) fn claim(me: &str, generation: u32, after: Option<&str>) -> StatusEntry {
    let claim = StatusEntry::new(State::Unassigned, me, generation);
    match after {
        Some(worker) => claim
            .with_trace(format!("claimed after worker {worker} released it"))
            .with_handoff(Handoff::ClaimedAfter(worker.to_owned())),
        None => claim,
    }
}

/// The worker that had released the task when this claim was made, if the status is such a claim.
pub(super) fn claimed_after(status: &StatusEntry) -> Option<&str> {
    match (&status.state, &status.handoff) {
        (State::Unassigned, Some(Handoff::ClaimedAfter(worker))) => Some(worker),
        _ => None,
    }
}

/// The worker a STOPPED status released the task to, if it is a release to a claimant.
pub(super) fn released_to(status: &StatusEntry) -> Option<&str> {
    match (&status.state, &status.handoff) {
        (State::Stopped, Some(Handoff::ReleasedTo(worker))) => Some(worker),
        _ => None,
    }
}

/// A task this worker started in one of its slots: with what, and in which state.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Started {
    pub(super) config: Config,
    pub(super) target: TargetState,
}

/// A task slot held here: the generation claimed for its statuses and, when its previous owner
/// departed with it still running, until when nothing of it starts (`scheduled.rebalance.max.delay.ms`).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Claim {
    pub(super) generation: u32,
    pub(super) hold_until: Option<Instant>,
    /// The worker whose release (its STOPPED status for the task) ends the hold early: the previous
    /// owner that still ran the task when this worker got the slot.
    pub(super) waits_for: Option<String>,
    /// The claim as written, to write again if a stale status replaces it (`fence`).
    pub(super) written: StatusEntry,
}

impl Claim {
    /// Whether nothing of the slot may start yet.
    pub(super) fn held(&self, now: Instant) -> bool {
        self.hold_until.is_some_and(|until| now < until)
    }
}

/// A slot fenced here: who claimed it, and since when.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Fenced {
    pub(super) claimant: String,
    pub(super) since: Instant,
}

/// A release this worker owes a newer claimant but may write only once the worker it waited for
/// itself released the task (or its hold ran out): until then that worker may still run it, and
/// the newer claimant waits for this worker's release, not that worker's.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Deferred {
    /// The newer claimant's generation.
    pub(super) claim: u32,
    /// The worker this one waited for.
    pub(super) waits_for: String,
    /// When this worker's own hold would have ended.
    pub(super) until: Instant,
}

/// The slots held and the tasks started in them (see `DistributedHerder::owned`).
#[derive(Debug, Default)]
pub(super) struct Ownership {
    /// Holds the leader slot.
    pub(super) leader: bool,
    /// The task slots held.
    pub(super) slots: BTreeMap<TaskId, Claim>,
    /// The tasks started here (a subset of `slots`).
    pub(super) running: BTreeMap<TaskId, Started>,
    /// Slots the group still gives this worker but another worker (the value) claimed with a newer
    /// status generation (see `fence`): nothing runs in them here until that worker releases them.
    pub(super) fenced: BTreeMap<TaskId, Fenced>,
    /// Releases owed to newer claimants once the worker this one waited for released the task.
    pub(super) deferred: BTreeMap<TaskId, Deferred>,
}

impl Ownership {
    /// Whether this worker holds task slot `id`.
    pub(super) fn owns(&self, id: &TaskId) -> bool {
        self.slots.contains_key(id)
    }

    /// Whether this worker holds slot 0 of `connector` (runs its connector instance).
    pub(super) fn owns_connector(&self, connector: &str) -> bool {
        self.owns(&TaskId::new(connector, 0))
    }

    /// Whether slot `id` is held here and may run now (not held back).
    pub(super) fn may_run(&self, id: &TaskId, now: Instant) -> bool {
        self.slots.get(id).is_some_and(|claim| !claim.held(now))
    }

    /// The connectors whose instance runs here: slot 0 held and not held back.
    pub(super) fn connectors(&self, now: Instant) -> BTreeSet<String> {
        self.slots
            .iter()
            .filter(|(id, claim)| id.task == 0 && !claim.held(now))
            .map(|(id, _)| id.connector.clone())
            .collect()
    }

    /// When the first slot held back here may run.
    pub(super) fn next_release(&self, now: Instant) -> Option<Instant> {
        self.slots
            .values()
            .filter_map(|claim| claim.hold_until.filter(|&until| now < until))
            .min()
    }

    /// Forgets everything (the worker stopped).
    pub(super) fn clear(&mut self) {
        *self = Self::default();
    }
}
