//! Kafka Connect's config and status backing stores over their Kafka topics:
//! [`KafkaConfigBackingStore`] (`config.storage.topic`) and [`KafkaStatusBackingStore`]
//! (`status.storage.topic`). Both read their topic to its end (the end as of the call) before they
//! answer, fold it with [`ConfigSnapshot`](super::ConfigSnapshot) / [`StatusView`](super::StatusView),
//! and write with an idempotent `acks=all` producer, returning once the broker acknowledged.
//!
//! These are ferry-kafka's own API; the runtime's `ConfigBackingStore` / `StatusBackingStore` traits
//! live in ferry-runtime, which ferry-kafka must not depend on, so the glue is the worker's.

mod config;
mod status;
mod topic;

use std::fmt;
use std::time::Duration;

use rdkafka::error::KafkaError;

pub use config::KafkaConfigBackingStore;
pub use status::KafkaStatusBackingStore;
pub(crate) use topic::InternalTopic;

use crate::client::is_retriable;
use crate::topic_log::{LogError, Progress};

/// Kafka Connect's default `status.storage.partitions`.
pub const DEFAULT_STATUS_PARTITIONS: i32 = 5;

/// Where an internal topic is and how to create it.
#[derive(Clone)]
pub struct InternalTopicConfig {
    /// `bootstrap.servers`.
    pub bootstrap_servers: String,
    /// The topic (`config.storage.topic` / `status.storage.topic`).
    pub topic: String,
    /// Partitions when the store creates the topic (the config topic always has exactly 1; this is
    /// ignored there).
    pub partitions: i32,
    /// Replication factor when the store creates the topic; -1: the broker's default.
    pub replication_factor: i16,
    /// librdkafka properties for every client of the store (security settings, …).
    pub client_overrides: Vec<(String, String)>,
    /// How long a broker call or a read may make no progress before it fails.
    pub timeout: Duration,
}

impl InternalTopicConfig {
    /// Kafka Connect's defaults: replication factor 3, 5 partitions (used by the status topic).
    pub fn new(bootstrap_servers: impl Into<String>, topic: impl Into<String>) -> Self {
        Self {
            bootstrap_servers: bootstrap_servers.into(),
            topic: topic.into(),
            partitions: DEFAULT_STATUS_PARTITIONS,
            replication_factor: 3,
            client_overrides: Vec::new(),
            timeout: Duration::from_secs(60),
        }
    }
}

// Client overrides may hold credentials: Debug shows their keys only.
impl fmt::Debug for InternalTopicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InternalTopicConfig")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("topic", &self.topic)
            .field("partitions", &self.partitions)
            .field("replication_factor", &self.replication_factor)
            .field(
                "client_overrides",
                &self
                    .client_overrides
                    .iter()
                    .map(|(k, _)| k)
                    .collect::<Vec<_>>(),
            )
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// A config or status store could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{store}: {message}")]
#[non_exhaustive]
pub struct ConnectStoreError {
    /// The store (`kafka config topic T at B`).
    pub store: String,
    /// What failed, and what to do.
    pub message: String,
    /// Whether the same call may succeed later (a broker outage) or not (a misconfigured topic).
    pub retriable: bool,
}

impl ConnectStoreError {
    pub(crate) fn new(store: &str, message: impl Into<String>, retriable: bool) -> Self {
        Self {
            store: store.to_owned(),
            message: message.into(),
            retriable,
        }
    }
}

/// A failed client call: what failed and whether a retry may succeed.
pub(crate) fn kafka(store: &str, what: &str, error: &KafkaError) -> ConnectStoreError {
    let retriable = is_retriable(error);
    let hint = if retriable {
        "this is usually temporary (brokers unreachable or electing a leader); check that the brokers in \
         bootstrap.servers are running and reachable"
    } else {
        "this will not resolve by retrying; check the topic, the client settings and the broker's ACLs"
    };
    ConnectStoreError::new(store, format!("{what} failed: {error}; {hint}"), retriable)
}

/// The config and status stores' errors when reading their topic ([`crate::topic_log`]).
impl LogError for ConnectStoreError {
    const TOPIC: &'static str = "topic";

    fn kafka(store: &str, what: &str, error: &KafkaError) -> Self {
        kafka(store, what, error)
    }

    fn backend(store: &str, message: String, retriable: bool) -> Self {
        ConnectStoreError::new(store, message, retriable)
    }

    fn is_retriable(&self) -> bool {
        self.retriable
    }

    fn stalled(store: &str, progress: &Progress, timeout: Duration, cause: &str) -> Self {
        let Progress {
            lagging,
            position,
            end,
            ..
        } = progress;
        ConnectStoreError::new(
            store,
            format!(
                "reading the topic to its end made no progress for {timeout:?}: partition {lagging} is at \
                 offset {position} of {end} ({cause}). Check that the brokers are reachable and that this worker \
                 may read the topic"
            ),
            true,
        )
    }
}
