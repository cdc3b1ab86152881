//! Task and connector states, as Kafka Connect reports them.

use std::fmt;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

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

/// Told every status a task takes (the worker writes it to the status store).
pub type StatusListener = Arc<dyn Fn(&TaskStatus) + Send + Sync>;

/// A task's status, shared between the task loop and whoever reports it.
#[derive(Clone)]
pub struct StatusCell {
    status: Arc<RwLock<TaskStatus>>,
    listener: Option<StatusListener>,
    /// Time spent in each state, for the `running-ratio` and `pause-ratio` metrics.
    times: Arc<Mutex<StateTimes>>,
}

/// Time spent running and paused since the cell was made (as Kafka Connect's `StateTracker`).
#[derive(Debug)]
struct StateTimes {
    created: Instant,
    since: Instant,
    current: TaskState,
    running: Duration,
    paused: Duration,
}

impl StateTimes {
    fn new() -> Self {
        let now = Instant::now();
        Self {
            created: now,
            since: now,
            current: TaskState::Unassigned,
            running: Duration::ZERO,
            paused: Duration::ZERO,
        }
    }

    /// Time in RUNNING and PAUSED up to `now`, with the current state's time so far.
    fn totals(&self, now: Instant) -> (Duration, Duration, Duration) {
        let current = now.saturating_duration_since(self.since);
        let (mut running, mut paused) = (self.running, self.paused);
        match self.current {
            TaskState::Running => running += current,
            TaskState::Paused => paused += current,
            _ => {}
        }
        (running, paused, now.saturating_duration_since(self.created))
    }

    fn enter(&mut self, state: TaskState, now: Instant) {
        let (running, paused, _) = self.totals(now);
        (self.running, self.paused) = (running, paused);
        self.current = state;
        self.since = now;
    }
}

impl fmt::Debug for StatusCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("StatusCell").field(&self.get()).finish()
    }
}

impl Default for StatusCell {
    fn default() -> Self {
        Self::new()
    }
}

impl StatusCell {
    /// A task's status cell, UNASSIGNED, telling no one.
    pub fn new() -> Self {
        Self {
            status: Arc::new(RwLock::new(TaskStatus {
                state: TaskState::Unassigned,
                trace: None,
            })),
            listener: None,
            times: Arc::new(Mutex::new(StateTimes::new())),
        }
    }

    /// The fractions of its life the task has spent RUNNING and PAUSED (0 to 1 each).
    pub fn ratios(&self) -> (f64, f64) {
        let times = self.times.lock().unwrap_or_else(|p| p.into_inner());
        let (running, paused, total) = times.totals(Instant::now());
        if total.is_zero() {
            return (0.0, 0.0);
        }
        let total = total.as_secs_f64();
        (running.as_secs_f64() / total, paused.as_secs_f64() / total)
    }

    fn entered(&self, state: TaskState) {
        let mut times = self.times.lock().unwrap_or_else(|p| p.into_inner());
        times.enter(state, Instant::now());
    }

    /// A cell that tells `listener` its first status (UNASSIGNED) now and every change after.
    pub fn watched(listener: StatusListener) -> Self {
        let cell = Self {
            listener: Some(listener),
            ..Self::new()
        };
        cell.tell(&cell.get());
        cell
    }

    // Called with the cell's lock held, so the listener sees changes in the order they were made.
    fn tell(&self, status: &TaskStatus) {
        if let Some(listener) = &self.listener {
            listener(status);
        }
    }

    /// The task's status now.
    pub fn get(&self) -> TaskStatus {
        self.status
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Moves the task to `state`, unless it failed (a failure is final).
    pub fn set(&self, state: TaskState) {
        let mut status = self.status.write().unwrap_or_else(|p| p.into_inner());
        // A failure is final: a later stop keeps FAILED and its reason.
        if status.state != TaskState::Failed && status.state != state {
            status.state = state;
            self.entered(state);
            self.tell(&status);
        }
    }

    /// Marks the task FAILED with `trace`; returns `false` if it had already failed (the first reason
    /// is kept).
    pub fn fail(&self, trace: String) -> bool {
        let mut status = self.status.write().unwrap_or_else(|p| p.into_inner());
        if status.state == TaskState::Failed {
            return false;
        }
        *status = TaskStatus {
            state: TaskState::Failed,
            trace: Some(trace),
        };
        self.entered(TaskState::Failed);
        self.tell(&status);
        true
    }
}
