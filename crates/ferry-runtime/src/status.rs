//! Task and connector states, as Kafka Connect reports them.

use std::fmt;
use std::sync::{Arc, RwLock};

/// The state of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TaskState {
    /// Created, `start()` not finished yet.
    Unassigned,
    /// Polling and delivering.
    Running,
    /// Not polling; deliveries and commits continue.
    Paused,
    /// Failed; the reason is kept in [`TaskStatus::trace`].
    Failed,
    /// Stopped cleanly (or cancelled after the graceful timeout).
    Stopped,
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            TaskState::Unassigned => "UNASSIGNED",
            TaskState::Running => "RUNNING",
            TaskState::Paused => "PAUSED",
            TaskState::Failed => "FAILED",
            TaskState::Stopped => "STOPPED",
        };
        f.write_str(s)
    }
}

/// A task's state and, when it failed, why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TaskStatus {
    /// The state.
    pub state: TaskState,
    /// The failure reason when FAILED.
    pub trace: Option<String>,
}

/// A task's status, shared between the task loop and whoever reports it.
#[derive(Debug, Clone)]
pub(crate) struct StatusCell(Arc<RwLock<TaskStatus>>);

impl StatusCell {
    pub(crate) fn new() -> Self {
        Self(Arc::new(RwLock::new(TaskStatus {
            state: TaskState::Unassigned,
            trace: None,
        })))
    }

    pub(crate) fn get(&self) -> TaskStatus {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn set(&self, state: TaskState) {
        let mut status = self.0.write().unwrap_or_else(|p| p.into_inner());
        // A failure is final: a later stop keeps FAILED and its reason.
        if status.state != TaskState::Failed {
            status.state = state;
        }
    }

    /// Marks the task FAILED with `trace`; returns `false` if it had already failed (the first reason
    /// is kept).
    pub(crate) fn fail(&self, trace: String) -> bool {
        let mut status = self.0.write().unwrap_or_else(|p| p.into_inner());
        if status.state == TaskState::Failed {
            return false;
        }
        *status = TaskStatus {
            state: TaskState::Failed,
            trace: Some(trace),
        };
        true
    }
}
