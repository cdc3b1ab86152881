//! Fencing one task's offset commits, for [`Worker::abort_task`](super::Worker::abort_task).
//!
//! Distributed mode's *lost* assignment means another worker may already run the task: this worker
//! must never commit its offsets again, or a late commit could move the new owner's offsets
//! backwards. Cancelling the task's thread is not enough (its final commit or a periodic commit may be
//! under way on the runtime), so each task writes its offsets through a [`FencedStore`]: once
//! [`TaskFence::fence`] returned, no write of that task reaches the store any more and none is in
//! flight. Reads are not fenced. The task's status writes check the same fence (a lost task's
//! statuses are its new owner's to write).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use ferry_offsets::{OffsetBackingStore, OffsetWrite, StoreError, StoredOffset, StoredRecord};
use tokio::sync::RwLock;

/// Whether one task instance may still write offsets.
#[derive(Debug, Default)]
pub(crate) struct TaskFence {
    fenced: AtomicBool,
    /// Held (shared) by every write in flight; taken exclusively by [`TaskFence::fence`] to wait for them.
    gate: RwLock<()>,
}

impl TaskFence {
    /// Whether the task was fenced.
    pub(crate) fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::Acquire)
    }

    /// Refuses every later write (and status).
    pub(crate) fn close(&self) {
        self.fenced.store(true, Ordering::Release);
    }

    /// Closes the fence and waits (at most `timeout`) for the writes in flight. Returns whether none
    /// is left in flight.
    pub(crate) async fn fence(&self, timeout: Duration) -> bool {
        self.close();
        tokio::time::timeout(timeout, self.gate.write())
            .await
            .is_ok()
    }
}

/// The worker's store, as one task instance writes to it: writes pass until the task is fenced.
pub(crate) struct FencedStore {
    pub(crate) inner: Arc<dyn OffsetBackingStore>,
    pub(crate) fence: Arc<TaskFence>,
    /// The task, for the refusal's message.
    pub(crate) task: String,
}

#[async_trait]
impl OffsetBackingStore for FencedStore {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    async fn get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.inner.get(keys).await
    }

    async fn set(&self, batch: &[OffsetWrite]) -> Result<(), StoreError> {
        let _in_flight = self.fence.gate.read().await;
        if self.fence.is_fenced() {
            // Retriable, so that the worker does not take it for a failed store (which would fail
            // every other task): only this task instance is refused.
            return Err(StoreError::backend(
                self.inner.describe(),
                format!(
                    "task {} lost its assignment (another worker may own it now); its offsets are not committed",
                    self.task
                ),
                true,
            ));
        }
        self.inner.set(batch).await
    }

    async fn connector_offsets(&self, connector: &str) -> Result<Vec<StoredOffset>, StoreError> {
        self.inner.connector_offsets(connector).await
    }

    async fn entries(&self) -> Result<Vec<StoredOffset>, StoreError> {
        self.inner.entries().await
    }

    async fn history(&self) -> Result<Vec<StoredRecord>, StoreError> {
        self.inner.history().await
    }
}
