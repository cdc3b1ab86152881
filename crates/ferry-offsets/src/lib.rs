//! # ferry-offsets
//!
//! Ferry's source-offset subsystem: the Kafka Connect–compatible byte codec, the
//! [`StoreOffsetReader`] tasks read committed offsets through, the two-phase [`OffsetWriter`], the
//! [`AckTracker`] that decides which offsets may be committed, and the [`OffsetBackingStore`] trait with
//! its memory and crash-safe file stores.
//!
//! The flow: records are submitted to the [`AckTracker`]; on each commit its committable offsets are
//! staged in the [`OffsetWriter`], which flushes them in one batch to the store; the reader sees them
//! once the store has made them durable.

mod ack;
mod codec;
#[cfg(feature = "conformance")]
pub mod conformance;
mod error;
pub mod jackson;
mod json;
mod key_scan;
mod reader;
mod store;
mod table;
pub mod transfer;
mod writer;

pub use ack::{AckTracker, CommittableOffsets, SubmittedBatch, SubmittedRecord};
pub use codec::{
    CodecError, OffsetKey, canonical_partition, decode_key, decode_value, encode_key, encode_value,
    loose_partition,
};
pub use error::{FlushError, StoreError};
pub use reader::StoreOffsetReader;
pub use store::file::{FileStore, FileStoreOptions};
pub use store::layered::LayeredStore;
pub use store::memory::MemoryStore;
pub use store::{
    BatchWritten, NamedStore, OffsetBackingStore, OffsetWrite, StoredOffset, StoredRecord,
    WriteBatch, WriteTooLarge,
};
pub use table::{LogOrder, OffsetTable};
pub use writer::{FlushCanceller, FlushGuard, OffsetWriter};
