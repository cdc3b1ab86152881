//! Distributed mode's group membership, as the herder sees it: which **slots** this worker holds.
//!
//! A slot is either a connector's task (slot p of connector c = task p; the owner of slot 0 also runs
//! the connector instance) or the group's single **leader** slot, whose owner serializes the REST
//! writes of the whole cluster (as Kafka Connect's leader does). A backend (Kafka: a consumer group
//! whose partitions are the slots) implements [`WorkerGroup`] and calls a [`GroupHandler`] when the
//! slots move. Here, not in the runtime or in ferry-kafka, so that neither names the other.

use std::time::Duration;

use async_trait::async_trait;

use crate::herder_state::TaskId;

/// One unit of ownership in the group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Slot {
    /// The leader slot: its owner serves the cluster's REST writes (others forward to it).
    Leader,
    /// A connector's task slot (task 0 also means the connector instance).
    Task(TaskId),
}

/// What a worker does when its slots change. The group calls it from one thread, one call at a time,
/// in rebalance order; calls may block (they run off the async runtime).
pub trait GroupHandler: Send + Sync + 'static {
    /// These slots are now this worker's.
    fn assigned(&self, slots: &[Slot]);
    /// These slots move away: stop what runs in them and commit its offsets **before returning**.
    /// The group gives them to another worker only after this returns (or its timeout passed).
    fn revoked(&self, slots: &[Slot]);
    /// These slots were lost (this worker's session expired): stop at once and commit nothing —
    /// another worker may already own them.
    fn lost(&self, slots: &[Slot]);
}

/// A group call failed; the message says what, where and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct GroupError {
    /// What failed.
    pub message: String,
    /// Whether trying again may succeed (the broker did not answer, a rebalance is under way).
    pub retriable: bool,
}

impl GroupError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>, retriable: bool) -> Self {
        Self {
            message: message.into(),
            retriable,
        }
    }
}

/// This worker's membership in the group of workers.
#[async_trait]
pub trait WorkerGroup: Send + Sync {
    /// The group, for logs ("consumer group connect-cluster on localhost:9092").
    fn describe(&self) -> String;
    /// Makes `connector`'s task slots `0..slots` part of the group (idempotent; a larger `slots`
    /// grows them, a smaller one may leave extra slots the herder ignores).
    async fn add_connector(&self, connector: &str, slots: usize) -> Result<(), GroupError>;
    /// Drops `connector`'s slots from the group: their owners get [`GroupHandler::revoked`].
    async fn remove_connector(&self, connector: &str) -> Result<(), GroupError>;
    /// The REST base URL (`http://host:port`) the current leader published, if any. It can be stale
    /// during a rebalance: the worker forwarded to answers 409 when it is no longer the leader.
    async fn leader_url(&self) -> Result<Option<String>, GroupError>;
    /// Leaves the group: every slot is revoked through the handler first. Waits up to `timeout`.
    async fn leave(&self, timeout: Duration) -> Result<(), GroupError>;
}
