//! The shared status store, with faults a test injects: task status writes dropped (a write lost on
//! its way to the status topic) while a filter says so.

use std::sync::{Arc, Mutex};

use ferry_runtime::TaskId;
use ferry_runtime::stores::{MemoryStatusStore, StatusBackingStore, StatusEntry, TopicStatus};

use super::lock;

type Filter = Box<dyn Fn(&TaskId, &StatusEntry) -> bool + Send>;

/// A [`MemoryStatusStore`] whose task writes a filter may drop.
#[derive(Default)]
pub struct FaultyStatuses {
    inner: MemoryStatusStore,
    drop_when: Mutex<Option<Filter>>,
    /// The writes dropped, in order.
    dropped: Mutex<Vec<(TaskId, StatusEntry)>>,
    /// Once a write the filter matches lands, this entry is written right after it (once): a write
    /// that was delayed until then.
    after: Mutex<Option<(Filter, TaskId, StatusEntry)>>,
}

impl FaultyStatuses {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Drops every task status write `filter` matches, from now on.
    pub fn drop_when(&self, filter: impl Fn(&TaskId, &StatusEntry) -> bool + Send + 'static) {
        *lock(&self.drop_when) = Some(Box::new(filter));
    }

    /// Writes `late` for `id` right after the first task write `filter` matches lands, as a write
    /// delayed until then would.
    pub fn write_after(
        &self,
        filter: impl Fn(&TaskId, &StatusEntry) -> bool + Send + 'static,
        id: TaskId,
        late: StatusEntry,
    ) {
        *lock(&self.after) = Some((Box::new(filter), id, late));
    }

    /// Whether the delayed write of [`write_after`](Self::write_after) was made.
    pub fn wrote_after(&self) -> bool {
        lock(&self.after).is_none()
    }

    fn write_late(&self, id: &TaskId, status: &StatusEntry) {
        let late = {
            let mut after = lock(&self.after);
            if after
                .as_ref()
                .is_some_and(|(filter, _, _)| filter(id, status))
            {
                after.take()
            } else {
                None
            }
        };
        if let Some((_, id, late)) = late {
            self.inner.put_task(&id, late);
        }
    }

    /// Drops nothing any more.
    pub fn heal(&self) {
        *lock(&self.drop_when) = None;
    }

    pub fn dropped(&self) -> Vec<(TaskId, StatusEntry)> {
        lock(&self.dropped).clone()
    }

    fn dropped_write(&self, id: &TaskId, status: &StatusEntry) -> bool {
        let drop = lock(&self.drop_when)
            .as_ref()
            .is_some_and(|filter| filter(id, status));
        if drop {
            lock(&self.dropped).push((id.clone(), status.clone()));
        }
        drop
    }
}

impl StatusBackingStore for FaultyStatuses {
    fn put_connector(&self, name: &str, status: StatusEntry) {
        self.inner.put_connector(name, status);
    }

    fn put_task(&self, id: &TaskId, status: StatusEntry) {
        if !self.dropped_write(id, &status) {
            self.inner.put_task(id, status.clone());
            self.write_late(id, &status);
        }
    }

    fn put_task_safe(&self, id: &TaskId, status: StatusEntry) {
        if !self.dropped_write(id, &status) {
            self.inner.put_task_safe(id, status.clone());
            self.write_late(id, &status);
        }
    }

    fn connector(&self, name: &str) -> Option<StatusEntry> {
        self.inner.connector(name)
    }

    fn task(&self, id: &TaskId) -> Option<StatusEntry> {
        self.inner.task(id)
    }

    fn tasks(&self, connector: &str) -> Vec<(TaskId, StatusEntry)> {
        self.inner.tasks(connector)
    }

    fn remove_connector(&self, name: &str) {
        self.inner.remove_connector(name);
    }

    fn put_topic(&self, status: TopicStatus) -> bool {
        self.inner.put_topic(status)
    }

    fn topic(&self, connector: &str, topic: &str) -> Option<TopicStatus> {
        self.inner.topic(connector, topic)
    }

    fn topics(&self, connector: &str) -> Vec<TopicStatus> {
        self.inner.topics(connector)
    }

    fn delete_topic(&self, connector: &str, topic: &str) {
        self.inner.delete_topic(connector, topic);
    }
}
