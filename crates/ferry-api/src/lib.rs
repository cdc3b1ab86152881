//! # ferry-api
//!
//! What a Ferry source connector author sees, and nothing else: no store, no Kafka client, no HTTP.
//!
//! A task reads its committed offsets in `start()` through [`OffsetStorageReader`] and emits
//! [`SourceRecord`]s carrying the same partition type. Using one serde type for the partition in both
//! places ([`ConnectMap::from_serde`], [`OffsetStorageReaderExt::offset_of`]) makes the classic
//! partition-key mismatch — a lookup that silently misses and re-reads everything — hard to write:
//!
//! ```
//! use ferry_api::{ConnectMap, SourceRecord};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize, Clone)]
//! struct FilePartition { filename: String }
//! #[derive(Serialize, Deserialize)]
//! struct FileOffset { position: i64 }
//!
//! let partition = FilePartition { filename: "/tmp/in.txt".into() };
//! let record = SourceRecord::new(&partition, &FileOffset { position: 12 }, "lines", "hello".into())?;
//! assert_eq!(record.source_partition, Some(ConnectMap::from_serde(&partition)?));
//! # Ok::<(), ferry_api::ValueError>(())
//! ```

pub mod config;
mod connector;
mod error;
mod plugin;
mod record;
mod schema;
pub mod transform;
mod typed;
mod value;

pub use connector::{
    Config, ConfigIssue, ConfigKey, ConfigType, DeliveredRecord, ExactlyOnceSupport, HIDDEN,
    Importance, OffsetStorageReader, OffsetStorageReaderExt, Redactor, Secrecy, SourceConnector,
    SourceTask, SourceTaskContext, TransactionBoundaries, TransactionContext,
};
pub use error::{ConnectError, OffsetReadError, ValueError};
pub use plugin::ConnectorPlugin;
pub use record::{Header, RecordMetadata, SourceRecord, SourceRecordBuilder};
pub use schema::{
    DATE_LOGICAL_NAME, DECIMAL_LOGICAL_NAME, Field, Schema, SchemaKind, TIME_LOGICAL_NAME,
    TIMESTAMP_LOGICAL_NAME,
};
pub use value::{ConnectMap, SourceOffset, SourcePartition, Value};

/// Re-exported so connector crates use the same `async_trait` as the traits.
pub use async_trait::async_trait;
