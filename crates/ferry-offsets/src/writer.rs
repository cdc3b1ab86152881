//! The write side of offsets: stage, then flush in one batch, Kafka Connect's two-phase protocol.
//!
//! `stage` records the newest offset per partition. `begin_flush` moves everything staged into a
//! snapshot and returns a [`FlushGuard`] for it (only one flush at a time: a second `begin_flush`
//! waits up to its timeout, then fails). [`FlushGuard::flush`] writes the snapshot to the store. If the
//! store fails, the snapshot is merged back *under* whatever was staged since, so newer offsets win and
//! nothing is lost; cancelling does the same for a flush the caller gave up on — explicitly
//! ([`FlushGuard::cancel`], [`FlushCanceller`]) or by dropping the guard or the `flush` future (a
//! timeout), so an abandoned flush can no longer be forgotten. Each flush carries an id: a cancel only
//! ever cancels its own flush, and a late completion of a cancelled flush changes nothing (its write
//! is idempotent and will be repeated by the next flush).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ferry_api::{SourceOffset, SourcePartition};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::codec::{canonical_partition, encode_key, encode_value};
use crate::error::FlushError;
use crate::store::{OffsetBackingStore, OffsetWrite};

type Staged = HashMap<Vec<u8>, (Option<SourcePartition>, Option<SourceOffset>)>;

#[derive(Default)]
struct State {
    staged: Staged,
    to_flush: Option<Staged>,
    flush_id: u64,
    /// The flush slot between `begin_flush` and the start of `flush` (which then holds it until its
    /// store write returns).
    permit: Option<OwnedSemaphorePermit>,
}

/// Buffers one connector's offsets and flushes them to an [`OffsetBackingStore`]. Thread-safe.
pub struct OffsetWriter {
    inner: Arc<Inner>,
}

/// Shared with the writer's [`FlushGuard`]s, which may outlive a borrow of it (a flush spawned onto
/// another task).
struct Inner {
    connector: String,
    store: Arc<dyn OffsetBackingStore>,
    state: Mutex<State>,
    flush_slot: Arc<Semaphore>,
}

impl OffsetWriter {
    /// A writer of `connector`'s offsets into `store`.
    pub fn new(connector: impl Into<String>, store: Arc<dyn OffsetBackingStore>) -> Self {
        Self {
            inner: Arc::new(Inner {
                connector: connector.into(),
                store,
                state: Mutex::new(State::default()),
                flush_slot: Arc::new(Semaphore::new(1)),
            }),
        }
    }

    /// Stages the newest offset of a partition (logically equal partitions are one). `None` offset
    /// stages a tombstone. Not visible to readers until flushed.
    pub fn stage(&self, partition: Option<SourcePartition>, offset: Option<SourceOffset>) {
        let key = canonical_partition(partition.as_ref());
        self.inner.state().staged.insert(key, (partition, offset));
    }

    /// Drops every staged offset not yet in a flush (an aborted transaction's); returns how many.
    pub fn discard_staged(&self) -> usize {
        let mut state = self.inner.state();
        let discarded = state.staged.len();
        state.staged.clear();
        discarded
    }

    /// The number of staged partitions not yet in a flush.
    pub fn staged_len(&self) -> usize {
        self.inner.state().staged.len()
    }

    /// Whether a flush is in progress (begun, not completed or cancelled).
    pub fn is_flushing(&self) -> bool {
        self.inner.state().to_flush.is_some()
    }

    /// Snapshots everything staged for a flush, and returns the flush to run; `None` (holding
    /// nothing) when nothing is staged.
    ///
    /// # Errors
    /// [`FlushError::FlushInProgress`] when an earlier flush is still running after `timeout`.
    pub async fn begin_flush(&self, timeout: Duration) -> Result<Option<FlushGuard>, FlushError> {
        let inner = &self.inner;
        let permit =
            match tokio::time::timeout(timeout, inner.flush_slot.clone().acquire_owned()).await {
                Ok(Ok(permit)) => permit,
                _ => {
                    return Err(FlushError::FlushInProgress {
                        connector: inner.connector.clone(),
                        waited_ms: timeout.as_millis(),
                    });
                }
            };
        let mut state = inner.state();
        if state.to_flush.is_some() {
            // A flush whose guard was leaked (`mem::forget`): treat it as cancelled.
            Inner::restage(&mut state);
        }
        if state.staged.is_empty() {
            return Ok(None);
        }
        state.to_flush = Some(std::mem::take(&mut state.staged));
        state.flush_id += 1;
        state.permit = Some(permit);
        Ok(Some(FlushGuard {
            inner: Arc::clone(inner),
            id: state.flush_id,
            done: false,
        }))
    }
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the state consistent, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Cancels flush `id` if it is still the running one: its snapshot is staged again under newer
    /// values and a late completion of it is ignored.
    fn cancel(&self, id: u64) {
        let mut state = self.state();
        if state.flush_id == id && state.to_flush.is_some() {
            Self::restage(&mut state);
        }
    }

    fn restage(state: &mut State) {
        if let Some(snapshot) = state.to_flush.take() {
            for (key, entry) in snapshot {
                state.staged.entry(key).or_insert(entry);
            }
        }
        state.flush_id += 1;
        state.permit = None;
    }
}

/// One begun flush, from [`OffsetWriter::begin_flush`]: [`flush`](FlushGuard::flush) it or
/// [`cancel`](FlushGuard::cancel) it. Dropped without either (or with its `flush` future dropped
/// before completion, as a timeout does), it cancels the flush.
#[must_use = "a dropped FlushGuard cancels its flush"]
pub struct FlushGuard {
    inner: Arc<Inner>,
    id: u64,
    done: bool,
}

impl FlushGuard {
    /// Writes the snapshot to the store, as one batch. Durable when it returns `Ok`. On a store error
    /// the snapshot is staged again under newer values. While the store write runs, the flush slot
    /// stays taken even if the flush is cancelled meanwhile (its future dropped, or a
    /// [`FlushCanceller`]), so a later flush cannot overtake it (and have its newer offsets
    /// overwritten by the late write).
    ///
    /// # Errors
    /// [`FlushError::NotBegun`] when the flush was cancelled before it ran; [`FlushError::Store`] when
    /// the store failed.
    pub async fn flush(mut self) -> Result<(), FlushError> {
        let inner = Arc::clone(&self.inner);
        let (batch, _slot) = {
            let mut state = inner.state();
            let Some(to_flush) = state
                .to_flush
                .as_ref()
                .filter(|_| state.flush_id == self.id)
            else {
                self.done = true;
                return Err(FlushError::NotBegun {
                    connector: inner.connector.clone(),
                });
            };
            let batch: Vec<OffsetWrite> = to_flush
                .values()
                .map(|(partition, offset)| OffsetWrite {
                    key: encode_key(&inner.connector, partition.as_ref()),
                    value: offset.as_ref().map(encode_value),
                })
                .collect();
            (batch, state.permit.take())
        };
        // Not done until the write returned: a dropped future cancels through the guard's drop.
        let result = inner.store.set(&batch).await;
        self.done = true;
        let mut state = inner.state();
        if state.flush_id != self.id || state.to_flush.is_none() {
            // Cancelled meanwhile: the data was merged back and will be written again. Harmless.
            return Ok(());
        }
        match result {
            Ok(()) => {
                state.to_flush = None;
                state.permit = None;
                Ok(())
            }
            Err(source) => {
                Inner::restage(&mut state);
                Err(FlushError::Store {
                    connector: inner.connector.clone(),
                    source,
                })
            }
        }
    }

    /// Abandons the flush: its snapshot is staged again under newer values.
    pub fn cancel(mut self) {
        self.done = true;
        self.inner.cancel(self.id);
    }

    /// A handle that cancels this flush from elsewhere, e.g. while [`flush`](FlushGuard::flush) runs
    /// on another task: the snapshot is staged again and a late completion is ignored, but the
    /// running store write keeps the flush slot until it returns. Cancels only this flush; does
    /// nothing once it completed.
    pub fn canceller(&self) -> FlushCanceller {
        FlushCanceller {
            inner: Arc::clone(&self.inner),
            id: self.id,
        }
    }
}

impl std::fmt::Debug for FlushGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlushGuard")
            .field("connector", &self.inner.connector)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Drop for FlushGuard {
    fn drop(&mut self) {
        if !self.done {
            self.inner.cancel(self.id);
        }
    }
}

/// Cancels one flush from anywhere; see [`FlushGuard::canceller`].
#[derive(Clone)]
pub struct FlushCanceller {
    inner: Arc<Inner>,
    id: u64,
}

impl FlushCanceller {
    /// Cancels the flush if it is still running; otherwise does nothing.
    pub fn cancel(&self) {
        self.inner.cancel(self.id);
    }
}
