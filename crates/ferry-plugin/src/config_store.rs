//! The config store's contract: Kafka Connect's `ConfigBackingStore`, cut to what standalone needs and
//! shaped for the config topic (`connector-<c>`, `task-<c>-<n>` + `commit-<c>`, `target-state-<c>`).

use std::collections::BTreeMap;
use std::fmt;

use async_trait::async_trait;
use ferry_api::Config;

use crate::herder_state::TargetState;

/// Everything the store holds, as of one version.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigSnapshot {
    /// Grows with every change (distributed: the config topic's offset).
    pub version: u64,
    /// The connectors by name.
    pub connectors: BTreeMap<String, ConnectorEntry>,
}

/// One connector in the store.
#[derive(Clone, PartialEq)]
pub struct ConnectorEntry {
    /// Its configuration.
    pub config: Config,
    /// Its target state.
    pub target: TargetState,
    /// Its task configurations, once a complete set was stored (distributed: after `commit-<c>`).
    pub tasks: Option<Vec<Config>>,
}

// The configuration may hold secrets: Debug shows its keys only.
impl fmt::Debug for ConnectorEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectorEntry")
            .field("config_keys", &self.config.keys().collect::<Vec<_>>())
            .field("target", &self.target)
            .field("tasks", &self.tasks.as_ref().map(Vec::len))
            .finish()
    }
}

/// A config store could not do what was asked; nothing changed.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct ConfigStoreError {
    /// What failed, where, and what to do (the REST API answers it as a 500).
    pub message: String,
    /// A newer writer of the same fencing id took over ([`TaskConfigWriter`]): this one writes
    /// nothing more.
    pub fenced: bool,
}

impl ConfigStoreError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            fenced: false,
        }
    }

    /// A [`TaskConfigWriter`] fenced by a newer one, saying `message`.
    pub fn fenced(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            fenced: true,
        }
    }
}

/// The writer of one connector's task configurations, held by the connector's owner and fenced by
/// the store ([`ConfigBackingStore::open_task_config_writer`]): once the connector's next owner
/// opened its own, every write of this one fails with [`ConfigStoreError::fenced`] and nothing of
/// it is visible — a worker that lost the connector (frozen, cut off) writes no task configurations
/// from its stale view.
#[async_trait]
pub trait TaskConfigWriter: Send + Sync {
    /// [`ConfigBackingStore::put_task_configs`] of the writer's connector, fenced.
    async fn put_task_configs(&self, tasks: &[Config]) -> Result<(), ConfigStoreError>;
    /// [`ConfigBackingStore::put_task_count`] of the writer's connector, fenced.
    async fn put_task_count(&self, tasks: usize) -> Result<(), ConfigStoreError>;
}

/// Connector configurations, target states and task configurations. Every `put_*` is durable when it
/// returns `Ok` (as durable as the store is) and changes nothing when it returns `Err`.
#[async_trait]
pub trait ConfigBackingStore: Send + Sync {
    /// Where the store is, for logs ("the connectors file /x", "memory").
    fn describe(&self) -> String;
    /// What the store holds now (distributed: after reading the config topic to its end).
    async fn snapshot(&self) -> Result<ConfigSnapshot, ConfigStoreError>;
    /// Creates or replaces a connector's configuration, with its target state.
    async fn put_connector_config(
        &self,
        name: &str,
        config: &Config,
        target: TargetState,
    ) -> Result<(), ConfigStoreError>;
    /// Removes a connector (distributed: a tombstone).
    async fn remove_connector_config(&self, name: &str) -> Result<(), ConfigStoreError>;
    /// Changes a stored connector's target state; an unknown name is an error.
    async fn put_target_state(
        &self,
        name: &str,
        target: TargetState,
    ) -> Result<(), ConfigStoreError>;
    /// Replaces a connector's task configurations; they apply together or not at all.
    async fn put_task_configs(&self, name: &str, tasks: &[Config]) -> Result<(), ConfigStoreError>;
    /// Opens the fenced writer of `connector`'s task configurations for its owner: opening one with
    /// the same `fencing_id` again (the connector's next owner, on any worker) fences every earlier
    /// one (Kafka: a transactional producer, `initTransactions`). The default, `None`, is for stores
    /// one process owns (a file, memory): the owner writes with [`Self::put_task_configs`].
    ///
    /// # Errors
    /// The writer could not be opened (e.g. brokers unreachable; try again).
    async fn open_task_config_writer(
        &self,
        _connector: &str,
        _fencing_id: &str,
    ) -> Result<Option<std::sync::Arc<dyn TaskConfigWriter>>, ConfigStoreError> {
        Ok(None)
    }
    /// Records that the zombies of `name`'s earlier task configurations are fenced, and how many
    /// tasks it has now (Kafka Connect's KIP-618 task count record, `tasks-fencing-<c>`; written with
    /// exactly-once delivery). The default, for stores Kafka Connect never reads, writes nothing.
    async fn put_task_count(&self, _name: &str, _tasks: usize) -> Result<(), ConfigStoreError> {
        Ok(())
    }
    /// Changes made by others (distributed: other workers' writes); `None` when only this process
    /// writes, as in standalone.
    fn updates(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }
}
