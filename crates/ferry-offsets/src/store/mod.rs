//! The backing-store contract every offset store implements.
//!
//! A store works on bytes in batches; serialization and the connector namespace happen once, in the
//! writer. Every store passes the shared conformance suite (`conformance` feature).

mod batch;
pub(crate) mod file;
pub(crate) mod layered;
pub(crate) mod memory;

use async_trait::async_trait;

use crate::error::StoreError;

pub(crate) use batch::Span;
pub use batch::{WriteBatch, WriteTooLarge};

/// One write of a batch: a value, or a tombstone (`value: None`) that removes the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetWrite {
    /// Encoded key (`["connector",{partition}]`).
    pub key: Vec<u8>,
    /// Encoded offset, or `None` for a tombstone.
    pub value: Option<Vec<u8>>,
}

/// A live offset as stored: raw key bytes as last written, and the value.
pub type StoredOffset = (Vec<u8>, Vec<u8>);

/// One record of a store's raw history: key bytes as written, and the value bytes or `None` for a
/// tombstone.
pub type StoredRecord = (Vec<u8>, Option<Vec<u8>>);

/// What [`OffsetBackingStore::set_batch`] did with the batch once it was durable.
#[derive(Debug)]
pub enum BatchWritten {
    /// The store read the batch back from what it wrote (the file store: the frame, through the
    /// file, checksum compared with the batch's) and freed it.
    ReadBack,
    /// The batch, handed back for the caller to read the store back against it.
    Returned(WriteBatch),
}

/// What [`OffsetBackingStore::open_named`] found for a name.
pub enum NamedStore {
    /// The name is this store's own (a connector's `offsets.storage.topic` equal to the worker's).
    This,
    /// Another store of the same kind and settings under that name.
    Other(std::sync::Arc<dyn OffsetBackingStore>),
    /// This kind of store has no named stores (a file, a table).
    Unsupported,
}

/// Where offsets live durably.
///
/// Contract, shared by every implementation and checked by the conformance suite:
/// - Keys are compared **logically**: keys that decode to the same connector and partition (field
///   order aside) are one key, and the last write in store order wins.
/// - [`set`](Self::set) is atomic per batch and durable when it returns `Ok`: after a crash either the
///   whole batch is visible or none of it. Later writes of a key in one batch win.
/// - Reads see only what a completed `set` made durable.
/// - A store never logs an error and carries on: it returns the error.
#[async_trait]
pub trait OffsetBackingStore: Send + Sync {
    /// A short description for logs and errors (`file /var/lib/ferry/offsets`).
    fn describe(&self) -> String;

    /// The values of `keys`, aligned with `keys`: `None` where no live value exists.
    async fn get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError>;

    /// Durably applies a batch of writes, atomically.
    async fn set(&self, batch: &[OffsetWrite]) -> Result<(), StoreError>;

    /// Durably applies `batch`, atomically, as [`set`](Self::set) does; for large batches (an
    /// import), taken by value so that a store may write it without another copy and free it before
    /// it indexes what it wrote.
    ///
    /// The default calls [`set`](Self::set) with the writes as `OffsetWrite`s and hands the batch
    /// back, for the caller to read the store back against it.
    async fn set_batch(&self, batch: WriteBatch) -> Result<BatchWritten, StoreError> {
        self.set(&batch.to_writes()).await?;
        Ok(BatchWritten::Returned(batch))
    }

    /// The live offsets of one connector (its known partitions), in store order of their last write.
    async fn connector_offsets(&self, connector: &str) -> Result<Vec<StoredOffset>, StoreError>;

    /// Every live offset, in store order of the last write (for export and inspection).
    async fn entries(&self) -> Result<Vec<StoredOffset>, StoreError>;

    /// Calls `f(raw key, value)` for every live offset (of `connector` only, when given), sorted by
    /// connector and then raw key bytes, keys that do not decode last: the order of
    /// `ferry offsets export`, which streams it. The slices are only valid during the call.
    ///
    /// The default sorts [`entries`](Self::entries) (or
    /// [`connector_offsets`](Self::connector_offsets)); stores that hold their offsets in memory
    /// visit them in place, so an export of a million offsets copies none of them.
    async fn visit_sorted(
        &self,
        connector: Option<&str>,
        f: &mut (dyn for<'k, 'v> FnMut(&'k [u8], &'v [u8]) + Send),
    ) -> Result<(), StoreError> {
        let mut entries = match connector {
            Some(connector) => self.connector_offsets(connector).await?,
            None => self.entries().await?,
        };
        sort_for_export(&mut entries);
        for (key, value) in &entries {
            f(key, value);
        }
        Ok(())
    }

    /// Opens the offset writer of one task instance, fenced by the store: opening a writer with the same
    /// `fencing_id` again (the task's next owner, on this or another worker) makes every later
    /// [`set`](Self::set) of this one fail with [`StoreError::Fenced`], and completes or discards
    /// whatever this one had under way — so a task that lost its assignment (a frozen or cut-off
    /// worker) can never commit offsets over its successor's. The returned store reads like this one
    /// (reads are not fenced) and writes each batch atomically.
    ///
    /// Kafka: a transactional producer with `transactional.id = fencing_id`, whose
    /// `initTransactions` fences the previous holder (Kafka Connect's exactly-once fencing). The
    /// default, `None`, is for stores that cannot fence (file, memory: one process owns them anyway).
    ///
    /// # Errors
    /// The store could not open the writer (e.g. brokers unreachable; retriable).
    async fn open_task_writer(
        &self,
        _fencing_id: &str,
    ) -> Result<Option<std::sync::Arc<dyn OffsetBackingStore>>, StoreError> {
        Ok(None)
    }

    /// Opens a store of the same kind and settings under another name, for a connector's own offsets
    /// (`offsets.storage.topic`, KIP-618; Kafka: the topic `name` on the same cluster, created when
    /// missing as this store's topic was). The default: [`NamedStore::Unsupported`].
    ///
    /// # Errors
    /// The store could not be opened (e.g. brokers unreachable, a topic that is not compacted).
    async fn open_named(&self, _name: &str) -> Result<NamedStore, StoreError> {
        Ok(NamedStore::Unsupported)
    }

    /// Every record the store still holds, raw and unmerged, in store order, tombstones included (for
    /// diagnostics such as `ferry offsets doctor`): unlike [`entries`](Self::entries), writes of one
    /// partition under different key bytes (field order, number spelling) are all there, as written.
    ///
    /// What "still holds" means is the store's: a log store returns what compaction has not dropped
    /// yet. The default, for stores that keep no history, is [`entries`](Self::entries) as live
    /// values.
    async fn history(&self) -> Result<Vec<StoredRecord>, StoreError> {
        Ok(self
            .entries()
            .await?
            .into_iter()
            .map(|(key, value)| (key, Some(value)))
            .collect())
    }
}

/// Sorts offsets as [`OffsetBackingStore::visit_sorted`] visits them: by connector, then raw key
/// bytes; keys that do not decode last, in their given order (the sort is stable).
pub(crate) fn sort_for_export(entries: &mut [StoredOffset]) {
    entries.sort_by_cached_key(|(key, _)| {
        let sorted = crate::codec::decode_key(key)
            .ok()
            .map(|decoded| (decoded.connector, key.clone()));
        (sorted.is_none(), sorted)
    });
}
