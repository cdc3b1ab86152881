//! What the worker keeps of each running task, and how tasks are told to pause, resume and stop.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ferry_api::Config;
use ferry_offsets::StoreOffsetReader;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::task::TaskSettings;
use super::thread::TaskThread;
use crate::config::ConverterSpec;
use crate::metrics::TaskSeries;
use crate::sink::SinkProvider;
use crate::state::{TargetState, TaskId};
use crate::status::{StatusCell, TaskState};

pub(super) struct TaskHandle {
    pub(super) name: String,
    pub(super) control: watch::Sender<TargetState>,
    /// The thread running the task's loop; `None` for a placeholder (or a thread that never started).
    pub(super) join: Option<TaskThread>,
    pub(super) status: StatusCell,
    pub(super) store_reader: Arc<StoreOffsetReader>,
    /// Keeps the task's metric series rendered until the handle is dropped (after the task stopped);
    /// `None` for a placeholder that runs nothing.
    pub(super) _metrics: Option<TaskSeries>,
}

/// One task the worker runs.
pub(super) struct RunningTask {
    pub(super) handle: TaskHandle,
    /// Its configuration (kept to restart it).
    pub(super) config: Config,
    /// What it was started with (kept to restart it).
    pub(super) launch: Launch,
}

/// What the worker runs: tasks by id, and the connectors started as a whole (whose tasks are
/// started, paused and stopped together).
#[derive(Default)]
pub(super) struct Running {
    pub(super) tasks: BTreeMap<TaskId, RunningTask>,
    pub(super) connectors: BTreeMap<String, Launch>,
}

impl Running {
    pub(super) fn ids(&self, connector: &str) -> Vec<TaskId> {
        self.tasks
            .range(TaskId::new(connector, 0)..=TaskId::new(connector, usize::MAX))
            .map(|(id, _)| id.clone())
            .collect()
    }

    pub(super) fn take_connector(&mut self, connector: &str) -> Vec<TaskHandle> {
        self.ids(connector)
            .into_iter()
            .filter_map(|id| self.tasks.remove(&id))
            .map(|t| t.handle)
            .collect()
    }
}

/// What a task starts with.
#[derive(Clone)]
pub(super) struct Launch {
    pub(super) settings: TaskSettings,
    /// Opens the task's sink at every (re)start.
    pub(super) sinks: Arc<dyn SinkProvider>,
    /// The connector's own converters, given to the sink provider.
    pub(super) key_converter: Option<ConverterSpec>,
    pub(super) value_converter: Option<ConverterSpec>,
    /// The connector's configuration, given to the sink provider (for the keys a sink reads itself).
    pub(super) connector_config: Arc<Config>,
    /// What a (re)started task is told to do: run or stay paused.
    pub(super) target: TargetState,
    /// The generation its statuses are written with.
    pub(super) generation: u32,
}

/// Tells a task to run or pause; a task told to stop stays stopping.
pub(super) fn send_target(task: &TaskHandle, target: TargetState) {
    task.control.send_if_modified(|t| {
        let change = *t != TargetState::Stopped && *t != target;
        if change {
            *t = target;
        }
        change
    });
}

/// Stops tasks in parallel: each one's graceful timeout runs from the same moment, and a slow task never
/// delays the stop signal of the others.
pub(super) async fn stop_tasks(tasks: impl IntoIterator<Item = TaskHandle>, timeout: Duration) {
    let handles: Vec<JoinHandle<()>> = tasks
        .into_iter()
        .map(|task| tokio::spawn(stop_task(task, timeout)))
        .collect();
    for handle in handles {
        let _ = handle.await;
    }
}

pub(super) async fn stop_task(mut task: TaskHandle, timeout: Duration) {
    task.control.send_replace(TargetState::Stopped);
    let Some(mut thread) = task.join.take() else {
        return;
    };
    if tokio::time::timeout(timeout, thread.finished())
        .await
        .is_err()
    {
        // Its thread may be blocked in connector code, which nothing can interrupt: stop waiting.
        thread.cancel();
        task.store_reader.close();
        tracing::error!(
            task = %task.name,
            "task did not stop within task.shutdown.graceful.timeout.ms={} ms and was cancelled (if its \
             thread is blocked in the connector's code, it is left behind): offsets acknowledged since its \
             last commit were not committed, so those records will be delivered again after a restart",
            timeout.as_millis()
        );
        task.status.set(TaskState::Stopped);
    }
}
