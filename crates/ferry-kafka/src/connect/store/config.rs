//! [`KafkaConfigBackingStore`]: connector configurations, task configurations and target states in
//! the config topic (`KafkaConfigBackingStore.java`), behind the runtime's [`ConfigBackingStore`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use ferry_plugin::{ConfigBackingStore, ConfigStoreError, ConnectorEntry};

use super::topic::InternalTopic;
use super::{ConnectStoreError, InternalTopicConfig};
use crate::admin::TopicKind;
use crate::connect::{
    ConfigRecordKey, ConfigSnapshot, TargetState, decode_logger_level, encode_commit,
    encode_logger_level, encode_properties, encode_target_state,
};

type Properties = BTreeMap<String, String>;

/// The config topic: one partition, compacted. Every write returns once the broker acknowledged it;
/// [`ConfigBackingStore::snapshot`] and [`refresh`](Self::refresh) first read the topic to the end it
/// had when they were called, so they see every write acknowledged before — this worker's and
/// others'.
///
/// A write of several records (task configs and their commit; a removal's two tombstones) that fails
/// may have made its first records durable: task configs without their commit stay invisible, and a
/// connector tombstone without its target-state tombstone removes the connector all the same.
pub struct KafkaConfigBackingStore {
    topic: InternalTopic,
    state: Arc<Mutex<Folded>>,
    /// The snapshot version after every read ([`ConfigBackingStore::updates`]).
    versions: tokio::sync::watch::Sender<u64>,
    /// Cluster log levels read after opening, until taken ([`Self::take_logger_levels`]).
    logger_levels: Mutex<Option<tokio::sync::mpsc::Receiver<(String, String)>>>,
}

/// The most cluster log-level changes waiting to be applied; past it one is dropped with a WARN.
const MAX_PENDING_LOGGER_LEVELS: usize = 1024;

/// The topic folded so far.
#[derive(Default)]
struct Folded {
    snapshot: ConfigSnapshot,
    /// The offset after the last record read: the snapshot's version.
    next_offset: i64,
    /// Where `logger-cluster-<namespace>` records read after opening go (Kafka Connect ignores those
    /// written before the worker started); `None` while opening.
    logger_levels: Option<tokio::sync::mpsc::Sender<(String, String)>>,
}

impl std::fmt::Debug for KafkaConfigBackingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaConfigBackingStore")
            .field("store", &self.topic.describe)
            .finish_non_exhaustive()
    }
}

fn apply(folded: &mut Folded, key: &str, value: Option<&[u8]>, offset: i64) {
    folded.next_offset = folded.next_offset.max(offset + 1);
    if let (Some(ConfigRecordKey::LoggerCluster(namespace)), Some(sender)) =
        (ConfigRecordKey::parse(key), &folded.logger_levels)
    {
        match value.map(|v| decode_logger_level(key, v)) {
            Some(Ok(level)) => {
                if sender.try_send((namespace, level)).is_err() {
                    tracing::warn!(
                        "a cluster log level for {key} was not applied: {MAX_PENDING_LOGGER_LEVELS} are \
                         already waiting"
                    );
                }
            }
            Some(Err(e)) => tracing::warn!("skipping a config topic record: {e}"),
            None => tracing::warn!("ignoring the null cluster log level of {key}"),
        }
    }
    // Kafka Connect logs and skips a record it cannot read; so does the store.
    if let Err(e) = folded.snapshot.apply_raw(key, value) {
        tracing::warn!("skipping a config topic record: {e}");
    }
}

fn to_plugin(state: TargetState) -> ferry_plugin::TargetState {
    match state {
        TargetState::Started => ferry_plugin::TargetState::Running,
        TargetState::Paused => ferry_plugin::TargetState::Paused,
        TargetState::Stopped => ferry_plugin::TargetState::Stopped,
    }
}

fn from_plugin(state: ferry_plugin::TargetState) -> TargetState {
    match state {
        ferry_plugin::TargetState::Running => TargetState::Started,
        ferry_plugin::TargetState::Paused => TargetState::Paused,
        ferry_plugin::TargetState::Stopped => TargetState::Stopped,
    }
}

fn store_error(error: ConnectStoreError) -> ConfigStoreError {
    ConfigStoreError::new(error.to_string())
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
            state: Arc::new(Mutex::new(Folded::default())),
            versions: tokio::sync::watch::Sender::new(0),
            logger_levels: Mutex::new(None),
        };
        store.refresh().await?;
        // Only levels written from now on are applied, as in Kafka Connect.
        let (sender, receiver) = tokio::sync::mpsc::channel(MAX_PENDING_LOGGER_LEVELS);
        store
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .logger_levels = Some(sender);
        *store
            .logger_levels
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(receiver);
        Ok(store)
    }

    /// Reads the topic to its current end; returns the number of records read. What the herder calls
    /// when it learns of (or suspects) other workers' writes.
    ///
    /// # Errors
    /// The read made no progress within the timeout (retriable).
    pub async fn refresh(&self) -> Result<u64, ConnectStoreError> {
        let read = self.topic.read_to_end(self.state.clone(), apply).await?;
        let version = self.version();
        self.versions.send_if_modified(|current| {
            let changed = *current != version;
            *current = version;
            changed
        });
        Ok(read)
    }

    fn version(&self) -> u64 {
        let folded = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        u64::try_from(folded.next_offset).unwrap_or(0)
    }

    /// Refreshes every `interval` in the background (on the current runtime) until the store is
    /// dropped, so [`ConfigBackingStore::updates`] signals other workers' writes without the herder
    /// asking. A failed refresh is logged and tried again at the next interval.
    pub fn spawn_refresher(self: &Arc<Self>, interval: std::time::Duration) {
        let store = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(store) = store.upgrade() else {
                    return;
                };
                if let Err(e) = store.refresh().await {
                    tracing::warn!("refreshing the config topic failed (retried): {e}");
                }
            }
        });
    }

    /// The topic's fold (Kafka Connect's view, with restart requests, fencing records and
    /// inconsistent connectors) after reading to the current end.
    ///
    /// # Errors
    /// As [`refresh`](Self::refresh).
    pub async fn topic_snapshot(&self) -> Result<ConfigSnapshot, ConnectStoreError> {
        self.refresh().await?;
        Ok(self.cached())
    }

    /// The topic's fold as of the last read, without reading.
    pub fn cached(&self) -> ConfigSnapshot {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .snapshot
            .clone()
    }

    /// Writes `logger-cluster-<namespace>` → `{"level":…}` (Kafka Connect's `putLoggerLevel`, KIP-976):
    /// every worker reading it later applies the level.
    ///
    /// # Errors
    /// The broker did not acknowledge the record.
    pub async fn put_logger_level(
        &self,
        namespace: &str,
        level: &str,
    ) -> Result<(), ConnectStoreError> {
        let key = ConfigRecordKey::LoggerCluster(namespace.to_owned()).to_key();
        self.topic
            .send(&[(key, Some(encode_logger_level(level)))])
            .await
    }

    /// The `(namespace, level)` of every `logger-cluster-…` record read after the store was opened,
    /// in topic order (the first call takes them; later calls get `None`).
    pub fn take_logger_levels(&self) -> Option<tokio::sync::mpsc::Receiver<(String, String)>> {
        self.logger_levels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
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

    fn runtime_snapshot(&self) -> ferry_plugin::ConfigSnapshot {
        let folded = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let snapshot = &folded.snapshot;
        let connectors = snapshot
            .connectors()
            .filter_map(|name| {
                let config = snapshot.connector_config(name)?.clone();
                let target = snapshot
                    .target_state(name)
                    .map_or(ferry_plugin::TargetState::Running, to_plugin);
                let tasks = snapshot.committed_task_count(name).map(|count| {
                    (0..count)
                        .filter_map(|t| snapshot.task_config(name, t).cloned())
                        .collect()
                });
                Some((
                    name.to_owned(),
                    ConnectorEntry {
                        config,
                        target,
                        tasks,
                    },
                ))
            })
            .collect();
        ferry_plugin::ConfigSnapshot {
            version: u64::try_from(folded.next_offset).unwrap_or(0),
            connectors,
        }
    }
}

#[async_trait]
impl ConfigBackingStore for KafkaConfigBackingStore {
    fn describe(&self) -> String {
        self.topic.describe.clone()
    }

    /// Reads the topic to its current end; the version is the offset after the last record read.
    async fn snapshot(&self) -> Result<ferry_plugin::ConfigSnapshot, ConfigStoreError> {
        self.refresh().await.map_err(store_error)?;
        Ok(self.runtime_snapshot())
    }

    /// Writes `target-state-<name>` then `connector-<name>`, as Kafka Connect does.
    async fn put_connector_config(
        &self,
        name: &str,
        config: &Properties,
        target: ferry_plugin::TargetState,
    ) -> Result<(), ConfigStoreError> {
        self.topic
            .send(&[
                (
                    ConfigRecordKey::TargetState(name.to_owned()).to_key(),
                    Some(encode_target_state(from_plugin(target))),
                ),
                (
                    ConfigRecordKey::Connector(name.to_owned()).to_key(),
                    Some(encode_properties(config)),
                ),
            ])
            .await
            .map_err(store_error)
    }

    /// Tombstones for `connector-<name>` and `target-state-<name>`, as Kafka Connect writes them.
    async fn remove_connector_config(&self, name: &str) -> Result<(), ConfigStoreError> {
        self.topic
            .send(&[
                (ConfigRecordKey::Connector(name.to_owned()).to_key(), None),
                (ConfigRecordKey::TargetState(name.to_owned()).to_key(), None),
            ])
            .await
            .map_err(store_error)
    }

    /// Writes `target-state-<name>` once the topic, read to its end, holds the connector.
    async fn put_target_state(
        &self,
        name: &str,
        target: ferry_plugin::TargetState,
    ) -> Result<(), ConfigStoreError> {
        self.refresh().await.map_err(store_error)?;
        if self.cached().connector_config(name).is_none() {
            return Err(ConfigStoreError::new(format!(
                "{}: connector {name:?} is not stored",
                self.topic.describe
            )));
        }
        let key = ConfigRecordKey::TargetState(name.to_owned()).to_key();
        self.topic
            .send(&[(key, Some(encode_target_state(from_plugin(target))))])
            .await
            .map_err(store_error)
    }

    /// The version after every read of the topic: by the herder's own calls, and by
    /// [`spawn_refresher`](KafkaConfigBackingStore::spawn_refresher) when running.
    fn updates(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.versions.subscribe())
    }

    /// `tasks-fencing-<name>` with the task count, as Kafka Connect's leader writes it once a round of
    /// zombie fencing is done.
    async fn put_task_count(&self, name: &str, tasks: usize) -> Result<(), ConfigStoreError> {
        let count = i32::try_from(tasks).map_err(|_| {
            ConfigStoreError::new(format!(
                "{}: connector {name:?} has {tasks} tasks; at most {} fit",
                self.topic.describe,
                i32::MAX
            ))
        })?;
        let key = ConfigRecordKey::TaskCount(name.to_owned()).to_key();
        self.topic
            .send(&[(key, Some(crate::connect::encode_task_count(count)))])
            .await
            .map_err(store_error)
    }

    /// Writes `task-<name>-<n>` for every task, then `commit-<name>` with their count: readers apply
    /// the task configurations only once the commit is read, all together.
    async fn put_task_configs(
        &self,
        name: &str,
        tasks: &[Properties],
    ) -> Result<(), ConfigStoreError> {
        let records = task_config_records(&self.topic.describe, name, tasks)?;
        self.topic.send(&records).await.map_err(store_error)
    }

    /// A transactional producer with `transactional.id = fencing_id`: the connector's next owner
    /// opening one fences this one, whose open transaction the coordinator aborts (the topic is read
    /// `read_committed`, so none of its records is seen) and whose later writes are refused.
    async fn open_task_config_writer(
        &self,
        connector: &str,
        fencing_id: &str,
    ) -> Result<Option<Arc<dyn ferry_plugin::TaskConfigWriter>>, ConfigStoreError> {
        let writer = self
            .topic
            .open_transactional(fencing_id)
            .await
            .map_err(store_error)?;
        Ok(Some(Arc::new(KafkaTaskConfigWriter {
            describe: self.topic.describe.clone(),
            connector: connector.to_owned(),
            writer,
        })))
    }
}

/// A config topic record: its key, and its value (`None`: a tombstone).
type Record = (String, Option<Vec<u8>>);

/// The records of `name`'s task configurations: `task-<name>-<n>` for every task, then
/// `commit-<name>` with their count.
fn task_config_records(
    store: &str,
    name: &str,
    tasks: &[Properties],
) -> Result<Vec<Record>, ConfigStoreError> {
    let count = i32::try_from(tasks.len()).map_err(|_| {
        ConfigStoreError::new(format!(
            "{store}: connector {name:?} has {} task configurations; at most {} fit",
            tasks.len(),
            i32::MAX
        ))
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
    Ok(records)
}

/// One connector's fenced task-configuration writer
/// ([`ConfigBackingStore::open_task_config_writer`]).
struct KafkaTaskConfigWriter {
    describe: String,
    connector: String,
    writer: super::topic::TransactionalWriter,
}

impl KafkaTaskConfigWriter {
    async fn write(&self, records: Vec<Record>) -> Result<(), ConfigStoreError> {
        use super::topic::TransactionFailed;
        match self.writer.write(records).await {
            Ok(()) => Ok(()),
            Err(TransactionFailed::Fenced(reason)) => Err(ConfigStoreError::fenced(format!(
                "the task configurations of connector {:?} were not written: {reason}; another worker \
                 owns the connector now",
                self.connector
            ))),
            Err(TransactionFailed::Failed(e)) => Err(store_error(e)),
        }
    }
}

#[async_trait]
impl ferry_plugin::TaskConfigWriter for KafkaTaskConfigWriter {
    async fn put_task_configs(&self, tasks: &[Properties]) -> Result<(), ConfigStoreError> {
        self.write(task_config_records(&self.describe, &self.connector, tasks)?)
            .await
    }

    async fn put_task_count(&self, tasks: usize) -> Result<(), ConfigStoreError> {
        let count = i32::try_from(tasks).map_err(|_| {
            ConfigStoreError::new(format!(
                "{}: connector {:?} has {tasks} tasks; at most {} fit",
                self.describe,
                self.connector,
                i32::MAX
            ))
        })?;
        let key = ConfigRecordKey::TaskCount(self.connector.clone()).to_key();
        self.write(vec![(key, Some(crate::connect::encode_task_count(count)))])
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::{Folded, apply};

    /// Past the pending limit a cluster log level is dropped (with a WARN) and reading goes on: the
    /// levels already waiting stay, and the topic's position still advances.
    #[test]
    fn cluster_log_levels_past_the_pending_limit_are_dropped_and_reading_goes_on() {
        // The limit is the channel's capacity: 1 here instead of MAX_PENDING_LOGGER_LEVELS.
        let (sender, mut receiver) = tokio::sync::mpsc::channel(1);
        let mut folded = Folded {
            logger_levels: Some(sender),
            ..Folded::default()
        };
        apply(
            &mut folded,
            "logger-cluster-org.example",
            Some(br#"{"level":"DEBUG"}"#),
            0,
        );
        apply(
            &mut folded,
            "logger-cluster-org.other",
            Some(br#"{"level":"INFO"}"#),
            1,
        );
        assert_eq!(
            receiver.try_recv().ok(),
            Some(("org.example".to_owned(), "DEBUG".to_owned()))
        );
        assert!(
            receiver.try_recv().is_err(),
            "the level past the limit was dropped"
        );
        assert_eq!(folded.next_offset, 2, "both records were read");
    }
}
