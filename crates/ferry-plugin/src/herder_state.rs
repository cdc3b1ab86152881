//! What a connector or task is asked to be, and how a task is named: shared by the herder, the worker
//! and the config stores (one enum, so what the connectors file stores is what the worker obeys).
//! Here, not in the runtime, so a backend crate (ferry-kafka) can implement the stores.

use serde::{Deserialize, Serialize};

/// What a connector (and so each of its tasks) is asked to be. Serialized as Kafka Connect writes it
/// (`RUNNING`, `PAUSED`, `STOPPED`), which is also the connectors file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TargetState {
    /// Tasks run.
    Running,
    /// Tasks exist but do not poll (deliveries and commits go on).
    Paused,
    /// No tasks; the configuration is kept. Offsets can be altered only in this state.
    Stopped,
}

/// One task's id: `{"connector":…,"task":…}` in REST answers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct TaskId {
    /// The connector.
    pub connector: String,
    /// The task number, from 0.
    pub task: usize,
}

impl TaskId {
    /// The id of task `task` of `connector`.
    pub fn new(connector: impl Into<String>, task: usize) -> Self {
        Self {
            connector: connector.into(),
            task,
        }
    }
}

impl std::fmt::Display for TaskId {
    /// `<connector>-<task>`, the name Kafka Connect logs a task by.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.connector, self.task)
    }
}
