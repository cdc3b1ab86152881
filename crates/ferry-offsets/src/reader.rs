//! The [`OffsetStorageReader`] a task gets: committed offsets of one connector, read from a store.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use ferry_api::{ConnectMap, OffsetReadError, OffsetStorageReader, SourceOffset, SourcePartition};

use crate::codec::{self, canonical_partition, decode_key, decode_value, encode_key};
use crate::store::OffsetBackingStore;

/// The loose form of a partition ([`codec::loose_partition`]).
type LoosePartition = Vec<(String, String)>;

/// Reads one connector's committed offsets from an [`OffsetBackingStore`].
///
/// Semantics (Kafka Connect's, made strict): `None` for a partition with no offset; only what the store
/// made durable is visible (the writer's staged and in-flight offsets never are); a stored offset that
/// cannot be decoded is an error naming the partition, never `None`. When a lookup misses but the
/// connector has a stored partition that differs only in key-name case or value type (`1`, `1.0`,
/// `"1"`), a WARN names both: that is the classic partition-key mismatch that silently re-reads data.
///
/// Thread-safe. After [`close`](Self::close) every call fails.
pub struct StoreOffsetReader {
    connector: String,
    store: Arc<dyn OffsetBackingStore>,
    closed: AtomicBool,
}

impl StoreOffsetReader {
    /// A reader of `connector`'s offsets in `store`.
    pub fn new(connector: impl Into<String>, store: Arc<dyn OffsetBackingStore>) -> Self {
        Self {
            connector: connector.into(),
            store,
            closed: AtomicBool::new(false),
        }
    }

    /// Closes the reader (its task stopped or was cancelled); later calls fail.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    fn store_error(&self, e: &crate::StoreError) -> OffsetReadError {
        OffsetReadError::Store {
            connector: self.connector.clone(),
            message: e.to_string(),
            retriable: e.is_retriable(),
        }
    }

    /// Logs a WARN for every missed partition that has a near-identical stored partition. A diagnostic
    /// only: if the store cannot list the connector's offsets, the lookup's answer still stands.
    async fn warn_near_misses(&self, missed: &[&SourcePartition]) {
        let stored = match self.store.connector_offsets(&self.connector).await {
            Ok(stored) => stored,
            Err(e) => {
                tracing::warn!(
                    connector = %self.connector,
                    error = %e,
                    "could not check missed partitions for near-identical stored partitions"
                );
                return;
            }
        };
        if stored.is_empty() {
            return;
        }
        let mut by_loose: HashMap<LoosePartition, Vec<(ConnectMap, Vec<u8>)>> = HashMap::new();
        for (raw_key, value) in stored {
            if let Ok(key) = decode_key(&raw_key)
                && let Some(loose) = codec::loose_partition(key.partition.as_ref())
                && let Some(partition) = key.partition
            {
                by_loose.entry(loose).or_default().push((partition, value));
            }
        }
        for partition in missed {
            let Some(loose) = codec::loose_partition(Some(partition)) else {
                continue;
            };
            let wanted = canonical_partition(Some(partition));
            for (similar, value) in by_loose.get(&loose).into_iter().flatten() {
                if canonical_partition(Some(similar)) != wanted {
                    tracing::warn!(
                        connector = %self.connector,
                        requested = %partition,
                        stored = %similar,
                        stored_offset = %String::from_utf8_lossy(value),
                        "no committed offset for the requested partition, but a near-identical partition \
                         is stored (key-name case or value type differs: 1, 1.0 and \"1\" are different \
                         partitions). The task builds its partition maps differently from the records it \
                         emitted before, so it will start this partition from its initial position. Use one \
                         typed partition struct in start() and poll()."
                    );
                }
            }
        }
    }
}

#[async_trait]
impl OffsetStorageReader for StoreOffsetReader {
    async fn offsets(
        &self,
        partitions: &[SourcePartition],
    ) -> Result<Vec<(SourcePartition, Option<SourceOffset>)>, OffsetReadError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(OffsetReadError::Closed {
                connector: self.connector.clone(),
            });
        }
        let keys: Vec<Vec<u8>> = partitions
            .iter()
            .map(|p| encode_key(&self.connector, Some(p)))
            .collect();
        let values = self
            .store
            .get(&keys)
            .await
            .map_err(|e| self.store_error(&e))?;
        let mut result = Vec::with_capacity(partitions.len());
        let mut missed = Vec::new();
        for (partition, value) in partitions.iter().zip(values) {
            let offset = match value {
                None => {
                    missed.push(partition);
                    None
                }
                Some(bytes) => {
                    Some(
                        decode_value(&bytes).map_err(|e| OffsetReadError::Undecodable {
                            connector: self.connector.clone(),
                            partition: partition.to_string(),
                            reason: e.to_string(),
                        })?,
                    )
                }
            };
            result.push((partition.clone(), offset));
        }
        if !missed.is_empty() {
            self.warn_near_misses(&missed).await;
        }
        Ok(result)
    }
}
