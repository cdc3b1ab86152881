//! [`KafkaConfigBackingStore`]: connector configurations, task configurations and target states in
//! the config topic (`KafkaConfigBackingStore.java`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::topic::InternalTopic;
use super::{ConnectStoreError, InternalTopicConfig};
use crate::admin::TopicKind;
use crate::connect::{
    ConfigRecordKey, ConfigSnapshot, TargetState, encode_commit, encode_properties,
    encode_target_state,
};

type Properties = BTreeMap<String, String>;

/// The config topic: one partition, compacted. Every write returns once the broker acknowledged it;
/// [`snapshot`](Self::snapshot) and [`refresh`](Self::refresh) first read the topic to the end it had
/// when they were called, so they see every write acknowledged before — this worker's and others'.
pub struct KafkaConfigBackingStore {
    topic: InternalTopic,
    state: Arc<Mutex<ConfigSnapshot>>,
}

impl std::fmt::Debug for KafkaConfigBackingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaConfigBackingStore")
            .field("store", &self.topic.describe)
            .finish_non_exhaustive()
    }
}

fn apply(snapshot: &mut ConfigSnapshot, key: &str, value: Option<&[u8]>) {
    // Kafka Connect logs and skips a record it cannot read; so does the store.
    if let Err(e) = snapshot.apply_raw(key, value) {
        tracing::warn!("skipping a config topic record: {e}");
    }
}

impl KafkaConfigBackingStore {
    /// Opens the store: creates the topic when missing (1 partition, compacted,
    /// `config.replication_factor`), refuses a topic that is not compacted or has more than one
    /// partition, then reads the whole topic.
    ///
    /// # Errors
    /// The topic is refused (not retriable), or the brokers did not answer (retriable).
    pub async fn open(config: &InternalTopicConfig) -> Result<Self, ConnectStoreError> {
        let topic = InternalTopic::open(TopicKind::Config, config, Some(1)).await?;
        let store = Self {
            topic,
            state: Arc::new(Mutex::new(ConfigSnapshot::new())),
        };
        store.refresh().await?;
        Ok(store)
    }

    /// `kafka config topic T at B`.
    pub fn describe(&self) -> &str {
        &self.topic.describe
    }

    /// Reads the topic to its current end; returns the number of records read. What the herder calls
    /// when it learns of (or suspects) other workers' writes.
    ///
    /// # Errors
    /// The read made no progress within the timeout (retriable).
    pub async fn refresh(&self) -> Result<u64, ConnectStoreError> {
        self.topic.read_to_end(self.state.clone(), apply).await
    }

    /// The topic folded to its current end.
    ///
    /// # Errors
    /// As [`refresh`](Self::refresh).
    pub async fn snapshot(&self) -> Result<ConfigSnapshot, ConnectStoreError> {
        self.refresh().await?;
        Ok(self.cached())
    }

    /// The snapshot as of the last read, without reading.
    pub fn cached(&self) -> ConfigSnapshot {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Writes `connector-<name>`.
    ///
    /// # Errors
    /// The broker did not acknowledge the record.
    pub async fn put_connector_config(
        &self,
        name: &str,
        config: &Properties,
    ) -> Result<(), ConnectStoreError> {
        let key = ConfigRecordKey::Connector(name.to_owned()).to_key();
        self.topic
            .send(&[(key, Some(encode_properties(config)))])
            .await
    }

    /// Removes a connector: tombstones for `connector-<name>` and `target-state-<name>`, as Kafka
    /// Connect writes them.
    ///
    /// # Errors
    /// The broker did not acknowledge both records (the first may be durable).
    pub async fn remove_connector_config(&self, name: &str) -> Result<(), ConnectStoreError> {
        self.topic
            .send(&[
                (ConfigRecordKey::Connector(name.to_owned()).to_key(), None),
                (ConfigRecordKey::TargetState(name.to_owned()).to_key(), None),
            ])
            .await
    }

    /// Writes `task-<name>-<n>` for every task, then `commit-<name>` with their count: readers apply
    /// the task configurations only once the commit is read, all together.
    ///
    /// # Errors
    /// More tasks than an int32 counts, or the broker did not acknowledge every record (then the
    /// commit may be missing, and readers keep the previous task configurations).
    pub async fn put_task_configs(
        &self,
        name: &str,
        tasks: &[Properties],
    ) -> Result<(), ConnectStoreError> {
        let count = i32::try_from(tasks.len()).map_err(|_| {
            ConnectStoreError::new(
                &self.topic.describe,
                format!(
                    "connector {name:?} has {} task configurations; at most {} fit",
                    tasks.len(),
                    i32::MAX
                ),
                false,
            )
        })?;
        let mut records = Vec::with_capacity(tasks.len() + 1);
        for (task, config) in (0..count).zip(tasks) {
            let key = ConfigRecordKey::Task {
                connector: name.to_owned(),
                task,
            };
            records.push((key.to_key(), Some(encode_properties(config))));
        }
        records.push((
            ConfigRecordKey::Commit(name.to_owned()).to_key(),
            Some(encode_commit(count)),
        ));
        self.topic.send(&records).await
    }

    /// Writes `target-state-<name>`.
    ///
    /// # Errors
    /// The broker did not acknowledge the record.
    pub async fn put_target_state(
        &self,
        name: &str,
        state: TargetState,
    ) -> Result<(), ConnectStoreError> {
        let key = ConfigRecordKey::TargetState(name.to_owned()).to_key();
        self.topic
            .send(&[(key, Some(encode_target_state(state)))])
            .await
    }

    /// Writes one raw record (key and value bytes as given; `None`: a tombstone). For tests and
    /// tools that must write what Ferry itself never writes.
    ///
    /// # Errors
    /// The broker did not acknowledge the record.
    pub async fn put_raw(
        &self,
        key: &str,
        value: Option<Vec<u8>>,
    ) -> Result<(), ConnectStoreError> {
        self.topic.send(&[(key.to_owned(), value)]).await
    }
}
