//! Offset store backends: `offset.storage=<name>` and the worker keys of that store.

use std::any::Any;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use ferry_api::ConfigKey;
use ferry_offsets::{OffsetBackingStore, StoreError};

use crate::{ConfigError, Properties};

/// How a command opens the offset store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// The worker and the commands that change offsets.
    ReadWrite,
    /// The commands that only read (`ferry offsets list|get|export|doctor`): a store that can be
    /// opened without creating, truncating or locking anything does so.
    ReadOnly,
}

/// One `offset.storage=<name>` backend. It parses only its own keys, and never opens anything while
/// parsing (the worker validates everything before it starts anything).
pub trait OffsetStorePlugin: Send + Sync {
    /// The value of `offset.storage` that chooses it (lower case): `file`, `kafka`, `postgres`.
    fn name(&self) -> &'static str;

    /// Where offsets are stored, for "is a setting of offset.storage=…, but offsets are stored in
    /// {description}": e.g. `a Kafka topic (offset.storage=kafka)`.
    fn description(&self) -> &'static str;

    /// The alternative offered when the offsets file is not set, e.g. `in Kafka with
    /// offset.storage=kafka and offset.storage.topic`.
    fn hint(&self) -> &'static str;

    /// This store in the "accepted values:" list of `offset.storage`, e.g. `kafka (offset.storage.topic)`.
    fn accepted(&self) -> &'static str;

    /// The worker keys only this store reads, with their secrecy: accepted in any worker file, and an
    /// error when another store is chosen (the file would not mean what it says).
    fn keys(&self) -> Vec<ConfigKey>;

    /// Key prefixes this store reads (the Kafka store's client settings: `security.`, `sasl.`, `ssl.`).
    fn prefixes(&self) -> &'static [&'static str] {
        &[]
    }

    /// Reads this store's settings from the worker file, pushing every problem to `errors`.
    /// `alternatives` are the [`hint`](OffsetStorePlugin::hint)s of the other registered stores.
    fn parse(
        &self,
        props: &Properties,
        alternatives: &[&'static str],
        errors: &mut Vec<ConfigError>,
    ) -> Option<Arc<dyn DynStoreSpec>>;
}

/// A parsed `offset.storage` choice with its settings. `Display` is how the worker names it
/// (`file /var/lib/ferry/connect.offsets`, `kafka topic connect-offsets on localhost:9092`).
#[async_trait]
pub trait DynStoreSpec: fmt::Debug + fmt::Display + Send + Sync + Any {
    /// The name of the plugin that parsed it (`offset.storage`).
    fn plugin(&self) -> &'static str;

    /// Opens the store.
    ///
    /// # Errors
    /// The store cannot be opened (damaged, locked, unreachable); the message says what to do.
    async fn open(&self, mode: OpenMode) -> Result<Arc<dyn OffsetBackingStore>, StoreError>;

    /// Whether a running worker locks the store, so that `ferry offsets set|reset` cannot change it
    /// under a running task (true for the offsets file; a Kafka topic or a table cannot be locked).
    fn exclusive(&self) -> bool;

    /// Whether one write of many offsets is atomic (an import is all or nothing).
    fn atomic_batches(&self) -> bool;

    /// Why a dry run cannot read the store because it does not exist yet (and must not be created),
    /// if so: the offsets file before the first run.
    fn not_created_yet(&self) -> Option<String> {
        None
    }

    /// Where connectors created over REST are kept when `ferry.connectors.file` is not set, if this
    /// store suggests a place (the offsets file: `<file>.connectors.json`).
    fn default_connectors_file(&self) -> Option<PathBuf> {
        None
    }

    /// Where exactly-once tasks may write their offsets inside their records' transactions (a
    /// standalone worker with `exactly.once.source.support=enabled`), if this store can be written
    /// that way: the Kafka store's topic. `None` (the default): exactly-once delivery is refused
    /// with this store.
    fn transactional_offsets(&self) -> Option<TransactionalOffsets> {
        None
    }

    /// The typed settings, for tests and tools: `spec.as_any().downcast_ref::<KafkaStoreSpec>()`.
    fn as_any(&self) -> &dyn Any;
}

/// An offset store that records' transactions can write to ([`DynStoreSpec::transactional_offsets`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionalOffsets {
    /// The cluster the offsets topic lives on, as the store names it (Kafka: `bootstrap.servers`):
    /// a transaction can only write to its producer's cluster.
    pub cluster: String,
    /// The offsets topic.
    pub topic: String,
}
