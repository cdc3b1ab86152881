//! Fencing one task's offset commits: locally, for [`Worker::abort_task`](super::Worker::abort_task),
//! and by the store, when the worker runs with task fencing ([`super::WorkerSettings::task_fencing`]).
//!
//! Distributed mode's *lost* assignment means another worker may already run the task: this worker
//! must never commit its offsets again, or a late commit could move the new owner's offsets
//! backwards. Cancelling the task's thread is not enough (its final commit or a periodic commit may be
//! under way on the runtime), so each task writes its offsets through a [`FencedStore`]: once
//! [`TaskFence::fence`] returned, no write of that task reaches the store any more and none is in
//! flight. Reads are not fenced. The task's status writes check the same fence (a lost task's
//! statuses are its new owner's to write).
//!
//! With task fencing, the writes go on to the task's own writer in the store
//! ([`OffsetBackingStore::open_task_writer`]), which the *store* fences when a newer instance of the
//! task opens its writer — on any worker, whatever this one knows. A write refused that way
//! ([`StoreError::Fenced`]) marks the fence *superseded*: the task loop stops at once, without a final
//! commit, and writes no status (its new owner reports it), as Kafka Connect's exactly-once tasks do
//! on `ProducerFencedException`. Any other non-retriable failure of the task's own writer fails this
//! task only, not the worker's store.

use std::sync::Mutex;
use tokio::sync::Notify;

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
    /// The store fenced the task's writer: a newer instance runs the task.
    superseded: AtomicBool,
    /// The task's own writer failed for good (not the store): the task fails with this.
    writer_failure: Mutex<Option<String>>,
    /// Wakes the task loop when the store superseded the task or its writer failed.
    wake: Notify,
}

impl TaskFence {
    /// The store fenced this instance's writer: refuses every later write and status, and wakes the
    /// task loop to stop.
    pub(crate) fn supersede(&self) {
        self.close();
        self.superseded.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// Whether the store fenced this instance (a newer one runs the task).
    pub(crate) fn is_superseded(&self) -> bool {
        self.superseded.load(Ordering::Acquire)
    }

    /// The task's own writer failed for good with `reason`; wakes the task loop to fail the task.
    pub(crate) fn writer_failed(&self, reason: String) {
        let mut slot = self
            .writer_failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        slot.get_or_insert(reason);
        drop(slot);
        self.wake.notify_one();
    }

    /// Why the task's own writer failed, if it did.
    pub(crate) fn writer_failure(&self) -> Option<String> {
        self.writer_failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Resolves once [`supersede`](Self::supersede) or [`writer_failed`](Self::writer_failed) was
    /// called (a call before the wait counts: one permit is kept).
    pub(crate) async fn woken(&self) {
        self.wake.notified().await;
    }

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
    /// `inner` is the task's own writer ([`OffsetBackingStore::open_task_writer`]), not the
    /// worker's store: its non-retriable failures fail this task, not the store.
    pub(crate) task_writer: bool,
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
        match self.inner.set(batch).await {
            Err(e) if e.is_fenced() => {
                self.fence.supersede();
                Err(e)
            }
            Err(e) if self.task_writer && !e.is_retriable() => {
                let reason = format!("the task's offset writer failed: {e}");
                self.fence.writer_failed(reason.clone());
                // Retriable to the committer: this task fails, the worker's store did not.
                Err(StoreError::backend(self.inner.describe(), reason, true))
            }
            other => other,
        }
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
