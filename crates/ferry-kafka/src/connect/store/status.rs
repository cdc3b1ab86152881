//! [`KafkaStatusBackingStore`]: connector and task statuses in the status topic
//! (`KafkaStatusBackingStore.java`).

use std::sync::{Arc, Mutex, PoisonError};

use super::topic::InternalTopic;
use super::{ConnectStoreError, InternalTopicConfig};
use crate::admin::TopicKind;
use crate::connect::{Status, StatusKey, StatusView, can_write_safely, encode_status};

/// The status topic: compacted, `config.partitions` partitions when created. Reads fold the topic with
/// [`StatusView`]'s rule; [`put_task_safe`](Self::put_task_safe) writes with Kafka Connect's `putSafe`
/// rule ([`can_write_safely`]).
pub struct KafkaStatusBackingStore {
    topic: InternalTopic,
    state: Arc<Mutex<StatusView>>,
}

impl std::fmt::Debug for KafkaStatusBackingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaStatusBackingStore")
            .field("store", &self.topic.describe)
            .finish_non_exhaustive()
    }
}

fn apply(view: &mut StatusView, key: &str, value: Option<&[u8]>, _offset: i64) {
    if let Err(e) = view.apply_raw(key, value) {
        tracing::warn!("skipping a status topic record: {e}");
    }
}

fn task_key(connector: &str, task: i32) -> String {
    StatusKey::Task {
        connector: connector.to_owned(),
        task,
    }
    .to_key()
}

impl KafkaStatusBackingStore {
    /// Opens the store: creates the topic when missing (compacted, `config.partitions` ×
    /// `config.replication_factor`), refuses one that is not compacted, then reads the whole topic.
    ///
    /// # Errors
    /// The topic is refused (not retriable), or the brokers did not answer (retriable).
    pub async fn open(config: &InternalTopicConfig) -> Result<Self, ConnectStoreError> {
        let topic = InternalTopic::open(TopicKind::Status, config, None).await?;
        let store = Self {
            topic,
            state: Arc::new(Mutex::new(StatusView::new())),
        };
        store.refresh().await?;
        Ok(store)
    }

    /// `kafka status topic T at B`.
    pub fn describe(&self) -> &str {
        &self.topic.describe
    }

    /// Reads the topic to its current end; returns the number of records read.
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
    pub async fn view(&self) -> Result<StatusView, ConnectStoreError> {
        self.refresh().await?;
        Ok(self.cached())
    }

    /// The view as of the last read, without reading.
    pub fn cached(&self) -> StatusView {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Writes `status-connector-<name>` (DESTROYED: a tombstone, which removes the connector's task
    /// statuses from every reader's view too).
    ///
    /// # Errors
    /// The broker did not acknowledge the record.
    pub async fn put_connector(
        &self,
        name: &str,
        status: &Status,
    ) -> Result<(), ConnectStoreError> {
        let key = StatusKey::Connector(name.to_owned()).to_key();
        self.topic.send(&[(key, encode_status(status))]).await
    }

    /// Writes `status-task-<connector>-<task>` unconditionally.
    ///
    /// # Errors
    /// The broker did not acknowledge the record.
    pub async fn put_task(
        &self,
        connector: &str,
        task: i32,
        status: &Status,
    ) -> Result<(), ConnectStoreError> {
        self.topic
            .send(&[(task_key(connector, task), encode_status(status))])
            .await
    }

    /// Writes the task's status only if [`can_write_safely`] allows it against the status read from
    /// the topic's current end (none yet, the same worker's, or one of this generation or older);
    /// returns whether it wrote. Kafka Connect checks its cached view; reading to the end first
    /// narrows the window in which another worker's newer status goes unseen.
    ///
    /// # Errors
    /// The read or the write failed.
    pub async fn put_task_safe(
        &self,
        connector: &str,
        task: i32,
        status: &Status,
    ) -> Result<bool, ConnectStoreError> {
        self.refresh().await?;
        let allowed = {
            let view = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            can_write_safely(view.task(connector, task), status)
        };
        if allowed {
            self.put_task(connector, task, status).await?;
        }
        Ok(allowed)
    }
}
