//! In-memory stores: what a process keeps for itself (tests, and statuses in standalone mode).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use ferry_api::Config;

use super::config::{Change, apply};
use super::{
    ConfigBackingStore, ConfigSnapshot, ConfigStoreError, StatusBackingStore, StatusEntry,
};
use crate::state::{TargetState, TaskId};
use ferry_plugin::{MAX_ACTIVE_TOPICS_PER_CONNECTOR, TopicStatus};

/// A config store in memory: gone when the process exits. Shared by several herders (tests of
/// distributed mode), it tells each of every change through [`ConfigBackingStore::updates`].
#[derive(Debug)]
pub struct MemoryConfigStore {
    snapshot: Mutex<ConfigSnapshot>,
    /// The version after each change.
    updates: tokio::sync::watch::Sender<u64>,
}

impl Default for MemoryConfigStore {
    fn default() -> Self {
        Self {
            snapshot: Mutex::default(),
            updates: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl MemoryConfigStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn change(&self, change: Change<'_>) -> Result<(), ConfigStoreError> {
        let mut snapshot = lock(&self.snapshot);
        if apply(&mut snapshot, change)? {
            self.updates.send_replace(snapshot.version);
        }
        Ok(())
    }
}

#[async_trait]
impl ConfigBackingStore for MemoryConfigStore {
    fn describe(&self) -> String {
        "memory".to_owned()
    }

    async fn snapshot(&self) -> Result<ConfigSnapshot, ConfigStoreError> {
        Ok(lock(&self.snapshot).clone())
    }

    async fn put_connector_config(
        &self,
        name: &str,
        config: &Config,
        target: TargetState,
    ) -> Result<(), ConfigStoreError> {
        self.change(Change::Connector(name, config, target))
    }

    async fn remove_connector_config(&self, name: &str) -> Result<(), ConfigStoreError> {
        self.change(Change::Remove(name))
    }

    async fn put_target_state(
        &self,
        name: &str,
        target: TargetState,
    ) -> Result<(), ConfigStoreError> {
        self.change(Change::Target(name, target))
    }

    async fn put_task_configs(&self, name: &str, tasks: &[Config]) -> Result<(), ConfigStoreError> {
        self.change(Change::Tasks(name, tasks))
    }

    fn updates(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.updates.subscribe())
    }
}

#[derive(Debug, Default)]
struct Statuses {
    connectors: BTreeMap<String, StatusEntry>,
    tasks: BTreeMap<TaskId, StatusEntry>,
    /// Active topics by connector, then topic.
    topics: BTreeMap<String, BTreeMap<String, TopicStatus>>,
}

/// A status store in memory (standalone: one worker, generation 0; the generation rule is enforced
/// anyway, so the store behaves as the distributed one will).
#[derive(Debug, Default)]
pub struct MemoryStatusStore {
    statuses: Mutex<Statuses>,
}

impl MemoryStatusStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl StatusBackingStore for MemoryStatusStore {
    fn put_connector(&self, name: &str, status: StatusEntry) {
        lock(&self.statuses)
            .connectors
            .insert(name.to_owned(), status);
    }

    fn put_task(&self, id: &TaskId, status: StatusEntry) {
        lock(&self.statuses).tasks.insert(id.clone(), status);
    }

    fn put_task_safe(&self, id: &TaskId, status: StatusEntry) {
        let mut statuses = lock(&self.statuses);
        match statuses.tasks.get(id) {
            Some(stored) if !status.may_replace(stored) => {
                tracing::debug!(
                    task = %id,
                    "status {:?} of generation {} from {} not written: generation {} from {} is newer",
                    status.state,
                    status.generation,
                    status.worker_id,
                    stored.generation,
                    stored.worker_id
                );
            }
            _ => {
                statuses.tasks.insert(id.clone(), status);
            }
        }
    }

    fn connector(&self, name: &str) -> Option<StatusEntry> {
        lock(&self.statuses).connectors.get(name).cloned()
    }

    fn task(&self, id: &TaskId) -> Option<StatusEntry> {
        lock(&self.statuses).tasks.get(id).cloned()
    }

    fn tasks(&self, connector: &str) -> Vec<(TaskId, StatusEntry)> {
        lock(&self.statuses)
            .tasks
            .range(TaskId::new(connector, 0)..=TaskId::new(connector, usize::MAX))
            .map(|(id, status)| (id.clone(), status.clone()))
            .collect()
    }

    fn remove_connector(&self, name: &str) {
        let mut statuses = lock(&self.statuses);
        statuses.connectors.remove(name);
        statuses.tasks.retain(|id, _| id.connector != name);
        statuses.topics.remove(name);
    }

    fn put_topic(&self, status: TopicStatus) -> bool {
        let mut statuses = lock(&self.statuses);
        let topics = statuses.topics.entry(status.connector.clone()).or_default();
        if !topics.contains_key(&status.topic) && topics.len() >= MAX_ACTIVE_TOPICS_PER_CONNECTOR {
            return false;
        }
        topics.insert(status.topic.clone(), status);
        true
    }

    fn topic(&self, connector: &str, topic: &str) -> Option<TopicStatus> {
        lock(&self.statuses)
            .topics
            .get(connector)
            .and_then(|t| t.get(topic))
            .cloned()
    }

    fn topics(&self, connector: &str) -> Vec<TopicStatus> {
        lock(&self.statuses)
            .topics
            .get(connector)
            .map(|t| t.values().cloned().collect())
            .unwrap_or_default()
    }

    fn delete_topic(&self, connector: &str, topic: &str) {
        let mut statuses = lock(&self.statuses);
        if let Some(topics) = statuses.topics.get_mut(connector) {
            topics.remove(topic);
            if topics.is_empty() {
                statuses.topics.remove(connector);
            }
        }
    }
}

/// A poisoned lock still holds consistent data here (every change is one insert or remove).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(connector: &str, topic: &str) -> TopicStatus {
        TopicStatus {
            topic: topic.to_owned(),
            connector: connector.to_owned(),
            task: 0,
            discover_timestamp: 1,
        }
    }

    #[test]
    fn active_topics_are_kept_per_connector_capped_and_forgotten_with_the_connector() {
        let store = MemoryStatusStore::new();
        for i in 0..MAX_ACTIVE_TOPICS_PER_CONNECTOR {
            assert!(store.put_topic(topic("a", &format!("t{i}"))));
        }
        // Past the cap a new topic is refused; one already kept may be written again.
        assert!(!store.put_topic(topic("a", "one-more")));
        assert!(store.put_topic(topic("a", "t0")));
        assert!(store.put_topic(topic("b", "t0")));
        assert_eq!(store.topics("a").len(), MAX_ACTIVE_TOPICS_PER_CONNECTOR);
        assert_eq!(store.topic("b", "t0"), Some(topic("b", "t0")));

        store.delete_topic("a", "t1");
        assert_eq!(store.topic("a", "t1"), None);
        assert!(store.put_topic(topic("a", "one-more")));

        store.remove_connector("a");
        assert!(store.topics("a").is_empty());
        assert_eq!(store.topics("b").len(), 1);
    }
}
