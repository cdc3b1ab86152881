//! The status store: Kafka Connect's `StatusBackingStore`. Every entry carries the id of the worker
//! that wrote it and the group generation it was written in, so that (in distributed mode) a worker
//! that lost a task cannot overwrite the status its new owner wrote.

use std::future::Future;
use std::pin::Pin;

use crate::herder_state::TaskId;

/// A connector's or task's state, as Kafka Connect reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
#[non_exhaustive]
pub enum State {
    /// Not started yet (or being restarted).
    Unassigned,
    /// Running.
    Running,
    /// Paused.
    Paused,
    /// Failed; the entry's trace says why.
    Failed,
    /// Stopped (target state STOPPED, or being shut down).
    Stopped,
    /// A restart was requested and is under way.
    Restarting,
    /// Removed (distributed: written before the tombstone).
    Destroyed,
}

/// One status, with who wrote it and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusEntry {
    /// The state.
    pub state: State,
    /// Why it failed, when FAILED.
    pub trace: Option<String>,
    /// The worker that wrote it (`host:port`).
    pub worker_id: String,
    /// The group generation it was written in (standalone: always 0).
    pub generation: u32,
    /// Where a distributed worker's hand-over of the task stands, when this entry is part of one
    /// (`None` for every other status). A structured field of its own, never parsed out of `trace`.
    pub handoff: Option<Handoff>,
}

/// The part of a task's hand-over between two distributed workers that a status records. The broker
/// fences a task's previous instance (its transactional producer); these only let the new owner start
/// as soon as the previous one stopped instead of waiting out `scheduled.rebalance.max.delay.ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handoff {
    /// A STOPPED status: the writer stopped the task for the worker named here, which claimed it.
    ReleasedTo(String),
    /// An UNASSIGNED status (a claim): it overwrote the release of the worker named here, which had
    /// stopped the task.
    ClaimedAfter(String),
}

impl StatusEntry {
    /// An entry without a trace.
    pub fn new(state: State, worker_id: impl Into<String>, generation: u32) -> Self {
        Self {
            state,
            trace: None,
            worker_id: worker_id.into(),
            generation,
            handoff: None,
        }
    }

    /// The same entry as part of a hand-over.
    pub fn with_handoff(mut self, handoff: Handoff) -> Self {
        self.handoff = Some(handoff);
        self
    }

    /// The same entry with `trace`.
    pub fn with_trace(mut self, trace: impl Into<String>) -> Self {
        self.trace = Some(trace.into());
        self
    }

    /// Whether `self` may replace `stored` under Kafka Connect's `putSafe` rule: the same worker
    /// wrote it, or `self` is of the same or a newer generation. An older generation never wins.
    pub fn may_replace(&self, stored: &StatusEntry) -> bool {
        self.worker_id == stored.worker_id || self.generation >= stored.generation
    }
}

/// The most active topics a status store keeps per connector (KIP-558). Kafka Connect has no cap; here a
/// connector that writes to more topics has the first ones recorded, and a newer one is not recorded
/// (its task logs a WARN once) until the set is reset (`PUT /connectors/<c>/topics/reset`).
pub const MAX_ACTIVE_TOPICS_PER_CONNECTOR: usize = 10_000;

/// One active topic of a connector (KIP-558, Kafka Connect's `TopicStatus`): a task of `connector`
/// had a record written to `topic` acknowledged, first at `discover_timestamp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicStatus {
    /// The topic.
    pub topic: String,
    /// The connector.
    pub connector: String,
    /// The task that first wrote to it.
    pub task: u32,
    /// When the task first wrote to it, in milliseconds since the Unix epoch.
    pub discover_timestamp: i64,
}

/// A status store could not catch up ([`StatusBackingStore::catch_up`]); its getters answer from
/// what it had read before.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct StatusStoreError {
    /// What failed, where, and what to do.
    pub message: String,
}

impl StatusStoreError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// What [`StatusBackingStore::catch_up`] returns (a boxed future: the trait stays object-safe and
/// synchronous everywhere else).
pub type CatchUp<'a> = Pin<Box<dyn Future<Output = Result<(), StatusStoreError>> + Send + 'a>>;

/// Connector and task statuses. Writes are fire-and-forget (as in Kafka Connect: a status is
/// advisory, and a lost write is repaired by the next one).
pub trait StatusBackingStore: Send + Sync {
    /// Sets a connector's status.
    fn put_connector(&self, name: &str, status: StatusEntry);
    /// Sets a task's status unconditionally.
    fn put_task(&self, id: &TaskId, status: StatusEntry);
    /// Sets a task's status unless the stored one is newer (Kafka Connect's `putSafe`): written only
    /// if none exists, the same worker wrote it, or `status.generation` ≥ the stored generation.
    fn put_task_safe(&self, id: &TaskId, status: StatusEntry);
    /// A connector's status.
    fn connector(&self, name: &str) -> Option<StatusEntry>;
    /// A task's status.
    fn task(&self, id: &TaskId) -> Option<StatusEntry>;
    /// Every task status of a connector, in task order.
    fn tasks(&self, connector: &str) -> Vec<(TaskId, StatusEntry)>;
    /// Forgets a connector, its tasks, and its active topics.
    fn remove_connector(&self, name: &str);
    /// Records an active topic (KIP-558); returns `false` when it was not recorded because the
    /// connector already has [`MAX_ACTIVE_TOPICS_PER_CONNECTOR`] others. The default keeps nothing.
    fn put_topic(&self, status: TopicStatus) -> bool {
        let _ = status;
        true
    }
    /// An active topic of a connector, if recorded.
    fn topic(&self, connector: &str, topic: &str) -> Option<TopicStatus> {
        let _ = (connector, topic);
        None
    }
    /// A connector's active topics, by topic name.
    fn topics(&self, connector: &str) -> Vec<TopicStatus> {
        let _ = connector;
        Vec::new()
    }
    /// Forgets one active topic of a connector (Kafka Connect: a tombstone).
    fn delete_topic(&self, connector: &str, topic: &str) {
        let _ = (connector, topic);
    }
    /// Brings the getters up to date with the shared store: when it returns `Ok`, every status this
    /// store wrote before the call is durable and every status another worker's store had durably
    /// written before the call is visible here. A store answering from a cache (the Kafka one)
    /// needs it; the default, for stores that are always current (memory), does nothing. Callers
    /// bound it with a timeout.
    fn catch_up(&self) -> CatchUp<'_> {
        Box::pin(std::future::ready(Ok(())))
    }
}
