//! KIP-558 active topics: each task records, in the status store, every topic it had a record
//! acknowledged to, the first time (Kafka Connect's `WorkerTask.recordActiveTopic`).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::fence::TaskFence;
use crate::state::TaskId;
use crate::stores::{MAX_ACTIVE_TOPICS_PER_CONNECTOR, StatusBackingStore, TopicStatus};

pub use ferry_config::TopicTracking;

/// One task instance's recorder.
pub(crate) struct TopicTracker {
    /// `None`: tracking is disabled.
    statuses: Option<Arc<dyn StatusBackingStore>>,
    id: TaskId,
    /// A fenced (replaced or abandoned) instance records nothing more.
    fence: Arc<TaskFence>,
    /// The cap was hit and said so once.
    warned: bool,
}

impl TopicTracker {
    pub(crate) fn new(
        statuses: Option<Arc<dyn StatusBackingStore>>,
        id: TaskId,
        fence: Arc<TaskFence>,
    ) -> Self {
        Self {
            statuses,
            id,
            fence,
            warned: false,
        }
    }

    /// Records the topics of acknowledged records not yet recorded (records counted as delivered
    /// under `errors.tolerance=all` were not acknowledged and are left out by the caller, as in Kafka
    /// Connect).
    pub(crate) fn record<'a>(&mut self, acknowledged: impl Iterator<Item = &'a str>) {
        let Some(statuses) = &self.statuses else {
            return;
        };
        if self.fence.is_fenced() {
            return;
        }
        // Consecutive records mostly share a topic: look each run up once.
        let mut last: Option<&str> = None;
        for topic in acknowledged {
            if last == Some(topic) {
                continue;
            }
            last = Some(topic);
            if statuses.topic(&self.id.connector, topic).is_some() {
                continue;
            }
            let status = TopicStatus {
                topic: topic.to_owned(),
                connector: self.id.connector.clone(),
                task: u32::try_from(self.id.task).unwrap_or(u32::MAX),
                discover_timestamp: now_millis(),
            };
            if !statuses.put_topic(status) && !self.warned {
                self.warned = true;
                tracing::warn!(
                    task = %self.id,
                    "connector {:?} already has {MAX_ACTIVE_TOPICS_PER_CONNECTOR} active topics; topic {topic:?} \
                     and any newer one are not recorded (GET /connectors/{}/topics is incomplete until \
                     PUT /connectors/{}/topics/reset)",
                    self.id.connector,
                    self.id.connector,
                    self.id.connector
                );
            }
        }
    }
}

fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::MemoryStatusStore;

    fn names(store: &MemoryStatusStore, connector: &str) -> Vec<String> {
        store
            .topics(connector)
            .into_iter()
            .map(|t| t.topic)
            .collect()
    }

    #[test]
    fn acknowledged_topics_are_recorded_once_and_a_fenced_task_records_none() {
        let store = Arc::new(MemoryStatusStore::new());
        let fence = Arc::new(TaskFence::default());
        let mut tracker = TopicTracker::new(
            Some(store.clone() as Arc<dyn StatusBackingStore>),
            TaskId::new("c", 2),
            fence.clone(),
        );
        tracker.record(["a", "a", "b"].into_iter());
        assert_eq!(names(&store, "c"), ["a", "b"]);
        let first = store.topic("c", "a").expect("recorded");
        assert_eq!(first.task, 2);
        assert!(first.discover_timestamp > 0);
        tracker.record(["a"].into_iter());
        assert_eq!(
            store.topic("c", "a"),
            Some(first),
            "kept from the first time"
        );

        fence.close();
        tracker.record(["z"].into_iter());
        assert_eq!(names(&store, "c"), ["a", "b"]);

        // Disabled (topic.tracking.enable=false): nothing recorded.
        let mut off = TopicTracker::new(None, TaskId::new("d", 0), Arc::default());
        off.record(["a"].into_iter());
        assert!(store.topics("d").is_empty());
    }
}
