//! The write side of offsets: stage, then flush in one batch, Kafka Connect's two-phase protocol.
//!
//! `stage` records the newest offset per partition. `begin_flush` moves everything staged into a
//! snapshot (only one flush at a time: a second `begin_flush` waits up to its timeout, then fails).
//! `flush` writes the snapshot to the store. If the store fails, the snapshot is merged back *under*
//! whatever was staged since, so newer offsets win and nothing is lost; `cancel_flush` does the same
//! for a flush the caller gave up on (a timeout). Each flush carries an id: a late completion of a
//! cancelled flush changes nothing (its write is idempotent and will be repeated by the next flush).

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
    connector: String,
    store: Arc<dyn OffsetBackingStore>,
    state: Mutex<State>,
    flush_slot: Arc<Semaphore>,
}

impl OffsetWriter {
    /// A writer of `connector`'s offsets into `store`.
    pub fn new(connector: impl Into<String>, store: Arc<dyn OffsetBackingStore>) -> Self {
        Self {
            connector: connector.into(),
            store,
            state: Mutex::new(State::default()),
            flush_slot: Arc::new(Semaphore::new(1)),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the state consistent, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stages the newest offset of a partition (logically equal partitions are one). `None` offset
    /// stages a tombstone. Not visible to readers until flushed.
    pub fn stage(&self, partition: Option<SourcePartition>, offset: Option<SourceOffset>) {
        let key = canonical_partition(partition.as_ref());
        self.state().staged.insert(key, (partition, offset));
    }

    /// The number of staged partitions not yet in a flush.
    pub fn staged_len(&self) -> usize {
        self.state().staged.len()
    }

    /// Whether a flush is in progress (begun, not completed or cancelled).
    pub fn is_flushing(&self) -> bool {
        self.state().to_flush.is_some()
    }

    /// Snapshots everything staged for a flush. Returns `false` (and holds nothing) when nothing is
    /// staged.
    ///
    /// # Errors
    /// [`FlushError::FlushInProgress`] when an earlier flush is still running after `timeout`.
    pub async fn begin_flush(&self, timeout: Duration) -> Result<bool, FlushError> {
        let permit =
            match tokio::time::timeout(timeout, self.flush_slot.clone().acquire_owned()).await {
                Ok(Ok(permit)) => permit,
                _ => {
                    return Err(FlushError::FlushInProgress {
                        connector: self.connector.clone(),
                        waited_ms: timeout.as_millis(),
                    });
                }
            };
        let mut state = self.state();
        if state.to_flush.is_some() {
            // A flush whose future was dropped without `cancel_flush`: treat it as cancelled.
            Self::restage(&mut state);
        }
        if state.staged.is_empty() {
            return Ok(false);
        }
        state.to_flush = Some(std::mem::take(&mut state.staged));
        state.flush_id += 1;
        state.permit = Some(permit);
        Ok(true)
    }

    /// Writes the snapshot taken by [`begin_flush`](Self::begin_flush) to the store, as one batch.
    /// Durable when it returns `Ok`. On a store error the snapshot is staged again under newer values.
    /// If the caller stops waiting (a timeout), it must call [`cancel_flush`](Self::cancel_flush).
    /// While the store write runs, the flush slot stays taken even if the flush is cancelled, so a later
    /// flush cannot overtake it (and have its newer offsets overwritten by the late write).
    ///
    /// # Errors
    /// [`FlushError::NotBegun`] without a begun flush; [`FlushError::Store`] when the store failed.
    pub async fn flush(&self) -> Result<(), FlushError> {
        let (id, batch, _slot) = {
            let mut state = self.state();
            let Some(to_flush) = &state.to_flush else {
                return Err(FlushError::NotBegun {
                    connector: self.connector.clone(),
                });
            };
            let batch: Vec<OffsetWrite> = to_flush
                .values()
                .map(|(partition, offset)| OffsetWrite {
                    key: encode_key(&self.connector, partition.as_ref()),
                    value: offset.as_ref().map(encode_value),
                })
                .collect();
            (state.flush_id, batch, state.permit.take())
        };
        let result = self.store.set(&batch).await;
        let mut state = self.state();
        if state.flush_id != id || state.to_flush.is_none() {
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
                Self::restage(&mut state);
                Err(FlushError::Store {
                    connector: self.connector.clone(),
                    source,
                })
            }
        }
    }

    /// Abandons the running flush: its snapshot is staged again under newer values, and a late
    /// completion of it is ignored. If its store write is still running, the next
    /// [`begin_flush`](Self::begin_flush) waits for it (up to its timeout). Does nothing when no flush
    /// is running.
    pub fn cancel_flush(&self) {
        let mut state = self.state();
        if state.to_flush.is_some() {
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
