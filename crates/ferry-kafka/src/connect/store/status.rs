//! [`KafkaStatusBackingStore`]: connector and task statuses in the status topic
//! (`KafkaStatusBackingStore.java`), behind the runtime's [`StatusBackingStore`].

use std::sync::{Arc, Mutex, PoisonError};

use ferry_plugin::{
    CatchUp, MAX_ACTIVE_TOPICS_PER_CONNECTOR, State, StatusBackingStore, StatusEntry,
    StatusStoreError, TaskId, TopicStatus,
};
use tokio::runtime::Handle;

use super::topic::InternalTopic;
use super::{ConnectStoreError, InternalTopicConfig};
use crate::admin::TopicKind;
use crate::connect::{
    Status, StatusKey, StatusState, StatusView, can_write_safely, encode_status,
    encode_topic_status,
};

/// The status topic: compacted, `config.partitions` partitions when created. Reads fold the topic with
/// [`StatusView`]'s rule; [`put_task_safe`](Self::put_task_safe) writes with Kafka Connect's `putSafe`
/// rule ([`can_write_safely`]).
///
/// Through [`StatusBackingStore`] (synchronous, fire-and-forget as in Kafka Connect) a write is applied
/// to this store's view at once and sent in the background, in call order; a failed send is logged at
/// WARN (a status is advisory, and the next write repairs it). Its getters answer from the view as of
/// the last read ([`refresh`](Self::refresh)) plus this store's own writes.
pub struct KafkaStatusBackingStore {
    topic: Arc<InternalTopic>,
    state: Arc<Mutex<StatusView>>,
    /// Where background sends run (the runtime the store was opened on).
    runtime: Handle,
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
            topic: Arc::new(topic),
            state: Arc::new(Mutex::new(StatusView::new())),
            runtime: Handle::current(),
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
    pub async fn write_connector(
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
    pub async fn write_task(
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
    pub async fn write_task_safe(
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
            self.write_task(connector, task, status).await?;
        }
        Ok(allowed)
    }
}

fn to_status(entry: &StatusEntry) -> Status {
    let state = match entry.state {
        State::Unassigned => StatusState::Unassigned,
        State::Running => StatusState::Running,
        State::Paused => StatusState::Paused,
        State::Failed => StatusState::Failed,
        State::Stopped => StatusState::Stopped,
        State::Restarting => StatusState::Restarting,
        // `State` is non-exhaustive; DESTROYED and anything newer removes the status.
        _ => StatusState::Destroyed,
    };
    Status {
        state,
        trace: entry.trace.clone(),
        worker_id: entry.worker_id.clone(),
        generation: i32::try_from(entry.generation).unwrap_or(i32::MAX),
        handoff: entry.handoff.clone(),
    }
}

fn to_entry(status: &Status) -> StatusEntry {
    let state = match status.state {
        StatusState::Unassigned => State::Unassigned,
        StatusState::Running => State::Running,
        StatusState::Paused => State::Paused,
        StatusState::Failed => State::Failed,
        StatusState::Destroyed => State::Destroyed,
        StatusState::Restarting => State::Restarting,
        StatusState::Stopped => State::Stopped,
    };
    StatusEntry {
        state,
        trace: status.trace.clone(),
        worker_id: status.worker_id.clone(),
        // Kafka's generations are never negative; a negative one reads as the oldest.
        generation: u32::try_from(status.generation).unwrap_or(0),
        handoff: status.handoff.clone(),
    }
}

fn task_index(id: &TaskId) -> i32 {
    i32::try_from(id.task).unwrap_or(i32::MAX)
}

impl KafkaStatusBackingStore {
    /// Applies `records` to the view now and sends them in the background, in order.
    fn fire_and_forget(&self, records: Vec<(String, Option<Vec<u8>>)>) {
        {
            let mut view = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            for (key, value) in &records {
                apply(&mut view, key, value.as_deref(), 0);
            }
        }
        let deliveries = match self.topic.enqueue(&records) {
            Ok(deliveries) => deliveries,
            Err(e) => {
                tracing::warn!("a status was not written: {e}");
                return;
            }
        };
        let topic = self.topic.clone();
        self.runtime.spawn(async move {
            if let Err(e) = topic.acknowledged(deliveries).await {
                tracing::warn!("a status was not written: {e}");
            }
        });
    }
}

fn topic_key(connector: &str, topic: &str) -> String {
    StatusKey::Topic {
        topic: topic.to_owned(),
        connector: connector.to_owned(),
    }
    .to_key()
}

impl StatusBackingStore for KafkaStatusBackingStore {
    /// Writes `status-topic-<topic>:connector-<connector>` unless the view already holds
    /// [`MAX_ACTIVE_TOPICS_PER_CONNECTOR`] other topics of the connector.
    fn put_topic(&self, status: TopicStatus) -> bool {
        {
            let view = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if view.topic(&status.connector, &status.topic).is_none()
                && view.topics(&status.connector).count() >= MAX_ACTIVE_TOPICS_PER_CONNECTOR
            {
                return false;
            }
        }
        let key = topic_key(&status.connector, &status.topic);
        self.fire_and_forget(vec![(key, Some(encode_topic_status(&status)))]);
        true
    }

    fn topic(&self, connector: &str, topic: &str) -> Option<TopicStatus> {
        let view = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        view.topic(connector, topic).cloned()
    }

    fn topics(&self, connector: &str) -> Vec<TopicStatus> {
        let view = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        view.topics(connector).cloned().collect()
    }

    /// A tombstone for `status-topic-<topic>:connector-<connector>`.
    fn delete_topic(&self, connector: &str, topic: &str) {
        self.fire_and_forget(vec![(topic_key(connector, topic), None)]);
    }

    fn put_connector(&self, name: &str, status: StatusEntry) {
        let key = StatusKey::Connector(name.to_owned()).to_key();
        self.fire_and_forget(vec![(key, encode_status(&to_status(&status)))]);
    }

    fn put_task(&self, id: &TaskId, status: StatusEntry) {
        let key = task_key(&id.connector, task_index(id));
        self.fire_and_forget(vec![(key, encode_status(&to_status(&status)))]);
    }

    /// Checks [`can_write_safely`] against the view as of the last read (as Kafka Connect checks its
    /// cache); call [`refresh`](KafkaStatusBackingStore::refresh) first to narrow the window.
    fn put_task_safe(&self, id: &TaskId, status: StatusEntry) {
        let new = to_status(&status);
        let allowed = {
            let view = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            can_write_safely(view.task(&id.connector, task_index(id)), &new)
        };
        if allowed {
            let key = task_key(&id.connector, task_index(id));
            self.fire_and_forget(vec![(key, encode_status(&new))]);
        }
    }

    fn connector(&self, name: &str) -> Option<StatusEntry> {
        let view = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        view.connector(name).map(to_entry)
    }

    fn task(&self, id: &TaskId) -> Option<StatusEntry> {
        let view = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        view.task(&id.connector, task_index(id)).map(to_entry)
    }

    fn tasks(&self, connector: &str) -> Vec<(TaskId, StatusEntry)> {
        let view = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        view.tasks(connector)
            .filter_map(|(task, status)| {
                let task = usize::try_from(task).ok()?;
                Some((TaskId::new(connector, task), to_entry(status)))
            })
            .collect()
    }

    /// Waits for this store's own writes to be acknowledged, then reads the topic to its end, so a
    /// status another worker wrote just before (a revoked task's STOPPED) is seen.
    fn catch_up(&self) -> CatchUp<'_> {
        Box::pin(async move {
            let caught_up = async {
                self.topic.flush().await?;
                self.refresh().await
            };
            caught_up
                .await
                .map(|_| ())
                .map_err(|e| StatusStoreError::new(e.to_string()))
        })
    }

    /// Tombstones for every task status and active topic the view holds, then the connector's: the
    /// task records sit on other partitions, which a reader may read after the connector's tombstone.
    fn remove_connector(&self, name: &str) {
        let (tasks, topics): (Vec<i32>, Vec<String>) = {
            let view = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            (
                view.tasks(name).map(|(task, _)| task).collect(),
                view.topics(name).map(|t| t.topic.clone()).collect(),
            )
        };
        let mut records: Vec<(String, Option<Vec<u8>>)> = tasks
            .into_iter()
            .map(|t| (task_key(name, t), None))
            .chain(topics.into_iter().map(|t| (topic_key(name, &t), None)))
            .collect();
        records.push((StatusKey::Connector(name.to_owned()).to_key(), None));
        self.fire_and_forget(records);
    }
}
