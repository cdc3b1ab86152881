//! What this worker holds in the group, and which tasks it started in those slots.

use std::collections::{BTreeMap, BTreeSet};

use ferry_api::Config;

use crate::state::{TargetState, TaskId};

/// A task this worker started in one of its slots: with what, and in which state.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Started {
    pub(super) config: Config,
    pub(super) target: TargetState,
}

/// The slots held and the tasks started in them (see `DistributedHerder::owned`).
#[derive(Debug, Default)]
pub(super) struct Ownership {
    /// Holds the leader slot.
    pub(super) leader: bool,
    /// The task slots held, each with the generation claimed for its statuses.
    pub(super) slots: BTreeMap<TaskId, u32>,
    /// The tasks started here (a subset of `slots`).
    pub(super) running: BTreeMap<TaskId, Started>,
    /// Slots the group still gives this worker but another worker claimed with a newer status
    /// generation (see `fence`): nothing runs in them here until that worker releases them.
    pub(super) fenced: BTreeSet<TaskId>,
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

    /// The connectors whose instance runs here.
    pub(super) fn connectors(&self) -> BTreeSet<String> {
        self.slots
            .keys()
            .filter(|id| id.task == 0)
            .map(|id| id.connector.clone())
            .collect()
    }

    /// Forgets everything (the worker stopped).
    pub(super) fn clear(&mut self) {
        *self = Self::default();
    }
}
