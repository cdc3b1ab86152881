//! The connector and task contracts, and the read side of offsets a task sees.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use crate::error::{ConnectError, OffsetReadError};
use crate::record::{RecordMetadata, SourceRecord};
use crate::value::{ConnectMap, SourceOffset, SourcePartition};

/// A connector or task configuration: Kafka Connect's string properties.
pub type Config = BTreeMap<String, String>;

/// A problem with one configuration key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value for config {key:?}: {message}")]
pub struct ConfigIssue {
    /// The key.
    pub key: String,
    /// What is wrong with it.
    pub message: String,
}

/// What messages, logs, REST bodies and `Debug` output show instead of a secret value.
pub const HIDDEN: &str = "[hidden]";

/// Whether a configuration value may be shown as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Secrecy {
    /// Shown as it is.
    #[default]
    Public,
    /// Never shown: [`HIDDEN`] instead.
    Secret,
    /// The value embeds a credential (a URL with a password): shown only through the redactor.
    Embedded(Redactor),
}

/// Removes the credential from a value that embeds one (e.g. the password of a URL).
///
/// Compares and prints by `name` only: function pointers do not compare reliably.
#[derive(Clone, Copy)]
pub struct Redactor {
    /// What the redactor is for, e.g. `jdbc-url`.
    pub name: &'static str,
    /// The value without its credential.
    pub redact: fn(&str) -> String,
}

impl PartialEq for Redactor {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Redactor {}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Redactor").field(&self.name).finish()
    }
}

/// A key's type, as Kafka Connect's `ConfigDef.Type` names it in `GET /connector-plugins/{p}/config`
/// and the validate endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigType {
    /// `STRING`: any text.
    String,
    /// `INT`: a 32-bit integer.
    Int,
    /// `LONG`: a 64-bit integer.
    Long,
    /// `DOUBLE`: a floating-point number.
    Double,
    /// `BOOLEAN`: `true` or `false`.
    Boolean,
    /// `LIST`: comma-separated values.
    List,
    /// `CLASS`: a class (plugin) name.
    Class,
    /// `PASSWORD`: a secret, never shown.
    Password,
}

impl ConfigType {
    /// Kafka Connect's name: `STRING`, `INT`, `LONG`, `DOUBLE`, `BOOLEAN`, `LIST`, `CLASS`, `PASSWORD`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::String => "STRING",
            Self::Int => "INT",
            Self::Long => "LONG",
            Self::Double => "DOUBLE",
            Self::Boolean => "BOOLEAN",
            Self::List => "LIST",
            Self::Class => "CLASS",
            Self::Password => "PASSWORD",
        }
    }
}

impl fmt::Display for ConfigType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How much a key matters to a user reading the configuration reference: Kafka Connect's
/// `ConfigDef.Importance`, as `GET /connector-plugins/{p}/config` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Importance {
    /// `HIGH`: most users set or check it.
    High,
    /// `MEDIUM`: some users tune it.
    Medium,
    /// `LOW`: rarely changed.
    Low,
}

impl Importance {
    /// Kafka Connect's name: `HIGH`, `MEDIUM`, `LOW`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::High => "HIGH",
            Self::Medium => "MEDIUM",
            Self::Low => "LOW",
        }
    }
}

impl fmt::Display for Importance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One configuration key a connector understands, for validation and documentation.
///
/// Built with [`required`](Self::required) or [`optional`](Self::optional), then
/// [`secret`](Self::secret) or [`embeds_secret`](Self::embeds_secret) for values that must not be shown,
/// [`of_type`](Self::of_type) for its type (default `STRING`, `PASSWORD` for a secret) and
/// [`importance`](Self::importance) (default `HIGH` when required, else `MEDIUM`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigKey {
    /// The key, e.g. `file`.
    pub name: &'static str,
    /// Whether the key must be set.
    pub required: bool,
    /// The default used when the key is absent, as text.
    pub default: Option<&'static str>,
    /// What the key does.
    pub doc: &'static str,
    secrecy: Secrecy,
    kind: Option<ConfigType>,
    importance: Option<Importance>,
}

impl ConfigKey {
    /// A required key.
    pub const fn required(name: &'static str, doc: &'static str) -> Self {
        Self {
            name,
            required: true,
            default: None,
            doc,
            secrecy: Secrecy::Public,
            kind: None,
            importance: None,
        }
    }

    /// An optional key with a default (`None`: absent means "not set").
    pub const fn optional(
        name: &'static str,
        default: Option<&'static str>,
        doc: &'static str,
    ) -> Self {
        Self {
            name,
            required: false,
            default,
            doc,
            secrecy: Secrecy::Public,
            kind: None,
            importance: None,
        }
    }

    /// The key's value is a secret (a password, a token): never shown.
    #[must_use]
    pub const fn secret(mut self) -> Self {
        self.secrecy = Secrecy::Secret;
        self
    }

    /// The key's value embeds a secret (a URL with a password): shown through `redactor`.
    #[must_use]
    pub const fn embeds_secret(mut self, redactor: Redactor) -> Self {
        self.secrecy = Secrecy::Embedded(redactor);
        self
    }

    /// The key's type (documentation only: the connector's `validate` checks values).
    #[must_use]
    pub const fn of_type(mut self, kind: ConfigType) -> Self {
        self.kind = Some(kind);
        self
    }

    /// How much the key matters (documentation only).
    #[must_use]
    pub const fn importance(mut self, importance: Importance) -> Self {
        self.importance = Some(importance);
        self
    }

    /// The key's importance: as set by [`importance`](Self::importance), else `HIGH` for a required
    /// key and `MEDIUM` for an optional one.
    pub fn config_importance(&self) -> Importance {
        match (self.importance, self.required) {
            (Some(importance), _) => importance,
            (None, true) => Importance::High,
            (None, false) => Importance::Medium,
        }
    }

    /// The key's type: as set by [`of_type`](Self::of_type), else `PASSWORD` for a
    /// [secret](Self::secret), else `STRING`.
    pub fn config_type(&self) -> ConfigType {
        match (self.kind, self.secrecy) {
            (Some(kind), _) => kind,
            (None, Secrecy::Secret) => ConfigType::Password,
            (None, _) => ConfigType::String,
        }
    }

    /// Whether the key's value may be shown.
    pub fn secrecy(&self) -> Secrecy {
        self.secrecy
    }

    /// What messages, logs, REST bodies and `Debug` output may show of `value`: [`HIDDEN`] for a
    /// secret, the redacted value when it embeds one, else the value.
    pub fn shown<'a>(&self, value: &'a str) -> Cow<'a, str> {
        match self.secrecy {
            Secrecy::Public => Cow::Borrowed(value),
            Secrecy::Secret => Cow::Borrowed(HIDDEN),
            Secrecy::Embedded(redactor) => Cow::Owned((redactor.redact)(value)),
        }
    }
}

/// Reads the last **committed** offsets of the task's connector. Read-only.
///
/// Only offsets that the store has durably accepted are visible, never those of records still in
/// flight. A partition with no stored offset reads as `None`: start from the configured initial
/// position. A stored offset that cannot be decoded is an error, never `None`.
///
/// Implementations are safe to share between threads.
#[async_trait]
pub trait OffsetStorageReader: Send + Sync {
    /// The committed offset of one partition, or `None` if none was ever committed.
    async fn offset(
        &self,
        partition: &SourcePartition,
    ) -> Result<Option<SourceOffset>, OffsetReadError> {
        let mut all = self.offsets(std::slice::from_ref(partition)).await?;
        Ok(all.pop().and_then(|(_, offset)| offset))
    }

    /// The committed offsets of many partitions in one store read: one entry per requested partition,
    /// in request order, `None` for those without a stored offset.
    async fn offsets(
        &self,
        partitions: &[SourcePartition],
    ) -> Result<Vec<(SourcePartition, Option<SourceOffset>)>, OffsetReadError>;
}

/// Typed lookups on any [`OffsetStorageReader`]: use the same partition type as in `poll()`.
#[async_trait]
pub trait OffsetStorageReaderExt: OffsetStorageReader {
    /// The committed offset of a typed partition, converted to the offset type.
    async fn offset_of<P, O>(&self, partition: &P) -> Result<Option<O>, OffsetReadError>
    where
        P: serde::Serialize + Sync,
        O: serde::de::DeserializeOwned,
    {
        let map =
            ConnectMap::from_serde(partition).map_err(|e| OffsetReadError::InvalidPartition {
                partition: "<typed partition>".to_owned(),
                reason: e.to_string(),
            })?;
        match self.offset(&map).await? {
            None => Ok(None),
            Some(offset) => offset
                .to_serde()
                .map(Some)
                .map_err(|source| OffsetReadError::Type {
                    partition: map.to_string(),
                    source,
                }),
        }
    }

    /// The committed offsets of typed partitions, in request order.
    async fn offsets_of<P, O>(
        &self,
        partitions: &[P],
    ) -> Result<Vec<(P, Option<O>)>, OffsetReadError>
    where
        P: serde::Serialize + Clone + Sync,
        O: serde::de::DeserializeOwned,
    {
        let maps = partitions
            .iter()
            .map(ConnectMap::from_serde)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| OffsetReadError::InvalidPartition {
                partition: "<typed partition>".to_owned(),
                reason: e.to_string(),
            })?;
        let found = self.offsets(&maps).await?;
        partitions
            .iter()
            .zip(found)
            .map(|(p, (map, offset))| match offset {
                None => Ok((p.clone(), None)),
                Some(o) => o
                    .to_serde()
                    .map(|o| (p.clone(), Some(o)))
                    .map_err(|source| OffsetReadError::Type {
                        partition: map.to_string(),
                        source,
                    }),
            })
            .collect()
    }
}

impl<T: OffsetStorageReader + ?Sized> OffsetStorageReaderExt for T {}

/// What the framework gives a task when it starts.
pub trait SourceTaskContext: Send + Sync {
    /// The task's configuration.
    fn configs(&self) -> &Config;
    /// The reader of the connector's committed offsets.
    fn offset_storage_reader(&self) -> Arc<dyn OffsetStorageReader>;
    /// Where the task says its transactions end: `Some` only when the task delivers exactly once
    /// with `transaction.boundary=connector` (Kafka Connect's `transactionContext()`, `null`
    /// otherwise).
    fn transaction_context(&self) -> Option<Arc<dyn TransactionContext>> {
        None
    }
}

/// Kafka Connect's `TransactionContext` (KIP-618): a task running with
/// `transaction.boundary=connector` says when the framework commits or aborts the open
/// transaction. A commit makes the transaction's records and their offsets visible together; an
/// abort discards both: `read_committed` consumers never see the records, and a restarted task
/// resumes before them (while the task runs on, it is up to it to send them again). Requests may be
/// made from `poll` or from any other thread. Asking for both a commit and an abort of the same
/// transaction (or at the same record) fails the task.
pub trait TransactionContext: Send + Sync {
    /// Commits the open transaction once every record of the current poll batch is sent.
    fn commit_transaction(&self);
    /// Commits the open transaction right after `record` — a record this task returns from `poll`,
    /// recognised by value (before transformations) — is sent or dropped by a transformation.
    fn commit_transaction_at(&self, record: &SourceRecord);
    /// Aborts the open transaction once every record of the current poll batch is sent.
    fn abort_transaction(&self);
    /// Aborts the open transaction right after `record` (as in
    /// [`commit_transaction_at`](Self::commit_transaction_at)) is sent; `record` is discarded with it.
    fn abort_transaction_at(&self, record: &SourceRecord);
}

/// A record the sink acknowledged, as [`SourceTask::commit_records`] gets it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct DeliveredRecord<'a> {
    /// The record as `poll` returned it, before the connector's transformations (as Kafka
    /// Connect's `commitRecord` gets it), whether the sink was given it or a transformation
    /// dropped it.
    pub record: &'a SourceRecord,
    /// Where the sink wrote it; `None` when it was dropped (by a transformation, or a delivery
    /// error tolerated by `errors.tolerance=all`).
    pub metadata: Option<&'a RecordMetadata>,
}

impl<'a> DeliveredRecord<'a> {
    /// A delivered record.
    pub fn new(record: &'a SourceRecord, metadata: Option<&'a RecordMetadata>) -> Self {
        Self { record, metadata }
    }
}

/// A source task: reads one share of the connector's partitions.
///
/// Lifecycle: `start` → repeated `poll` → `stop`. The framework owns the task and calls these from one
/// task loop, so they take `&mut self`. To stop a task the framework drops a pending `poll` future, so
/// `poll` must be cancel-safe (lose nothing when dropped at an `.await`) and should return within about
/// a second even when there is no data (an empty `Vec` is fine).
#[async_trait]
pub trait SourceTask: Send {
    /// Starts the task: read the committed offsets from `context.offset_storage_reader()` and resume.
    async fn start(&mut self, context: Arc<dyn SourceTaskContext>) -> Result<(), ConnectError>;

    /// Returns the next records, possibly none.
    async fn poll(&mut self) -> Result<Vec<SourceRecord>, ConnectError>;

    /// Called after every successful offset commit (also when there was nothing to commit).
    /// Errors are logged and ignored.
    async fn commit(&mut self) -> Result<(), ConnectError> {
        Ok(())
    }

    /// Called when the sink acknowledged `record`; `metadata` is `None` when the record was dropped
    /// (for example a delivery error tolerated by `errors.tolerance=all`). Errors are logged and ignored.
    ///
    /// Called by the default [`commit_records`](Self::commit_records) for each record of a batch.
    async fn commit_record(
        &mut self,
        _record: &SourceRecord,
        _metadata: Option<&RecordMetadata>,
    ) -> Result<(), ConnectError> {
        Ok(())
    }

    /// Called with the records the sink acknowledged together, in the order they were acknowledged
    /// (records of one source partition in the order they were polled). The default calls
    /// [`commit_record`](Self::commit_record) for each, goes on past a failed one and returns the
    /// first error. Errors are logged and ignored.
    async fn commit_records(
        &mut self,
        delivered: &[DeliveredRecord<'_>],
    ) -> Result<(), ConnectError> {
        let mut first_error = None;
        for d in delivered {
            if let Err(e) = self.commit_record(d.record, d.metadata).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Whether the framework hands acknowledged records back to this task (through
    /// [`commit_records`](Self::commit_records) and [`commit_record`](Self::commit_record)). A task
    /// that overrides neither should return `false`: its records are then freed where their delivery
    /// is confirmed instead of travelling back to the task's loop (one record's worth of work less per
    /// record on the task's thread). Offsets are committed the same either way. Under exactly-once
    /// delivery records always come back (the loop counts them per transaction).
    fn wants_delivered_records(&self) -> bool {
        true
    }

    /// Stops the task and releases its resources.
    async fn stop(&mut self) -> Result<(), ConnectError>;
}

/// A source connector: validates its configuration and splits the work into task configurations.
pub trait SourceConnector: Send + Sync {
    /// The connector's version.
    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").to_owned()
    }

    /// The connector-specific configuration keys it understands. The framework adds its own common keys
    /// (`name`, `connector.class`, `tasks.max`, `errors.tolerance`, …) and rejects any other key.
    fn config_keys(&self) -> Vec<ConfigKey>;

    /// Checks a configuration; returns one issue per bad key (empty = valid). Required keys and
    /// unknown keys are already checked by the framework against [`config_keys`](Self::config_keys).
    fn validate(&self, config: &Config) -> Vec<ConfigIssue>;

    /// Splits the work into at most `max_tasks` task configurations.
    ///
    /// # Errors
    /// The configuration cannot be split (it should have failed `validate`).
    fn task_configs(&self, config: &Config, max_tasks: usize) -> Result<Vec<Config>, ConnectError>;

    /// Creates a task; the framework then calls [`SourceTask::start`] with one of the task configs.
    fn create_task(&self) -> Box<dyn SourceTask>;

    /// Called before the framework alters or resets this connector's offsets (KIP-875). `None` offsets
    /// are resets. Return `Ok(true)` if the connector confirms the change, `Ok(false)` (the default) if
    /// it does not support or need confirming (the framework-managed offsets are still altered), or an
    /// error to refuse the change.
    fn alter_offsets(
        &self,
        _config: &Config,
        _offsets: &[(SourcePartition, Option<SourceOffset>)],
    ) -> Result<bool, ConnectError> {
        Ok(false)
    }

    /// Whether the connector can deliver exactly once with `config` when the worker runs
    /// exactly-once source support (Kafka Connect's `SourceConnector.exactlyOnceSupport`): its tasks
    /// resume exactly after the last committed record from their committed offsets alone. A
    /// connector with `exactly.once.support=required` that answers anything but
    /// [`ExactlyOnceSupport::Supported`] is refused; with `requested` (the default) it runs
    /// at-least-once. The default is [`ExactlyOnceSupport::Unknown`].
    fn exactly_once_support(&self, _config: &Config) -> ExactlyOnceSupport {
        ExactlyOnceSupport::Unknown
    }

    /// Whether the connector defines its own transaction boundaries with `config`
    /// (`transaction.boundary=connector`, Kafka Connect's `canDefineTransactionBoundaries`). The
    /// default is [`TransactionBoundaries::Unsupported`].
    fn can_define_transaction_boundaries(&self, _config: &Config) -> TransactionBoundaries {
        TransactionBoundaries::Unsupported
    }
}

/// A connector's answer to [`SourceConnector::exactly_once_support`] (Kafka Connect's
/// `ExactlyOnceSupport`, where `null` is [`Unknown`](Self::Unknown)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExactlyOnceSupport {
    /// Its tasks resume exactly after the last committed record.
    Supported,
    /// They cannot (e.g. a source that cannot seek).
    Unsupported,
    /// The connector does not say.
    Unknown,
}

/// A connector's answer to [`SourceConnector::can_define_transaction_boundaries`] (Kafka
/// Connect's `ConnectorTransactionBoundaries`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionBoundaries {
    /// Its tasks say where transactions end.
    Supported,
    /// They do not.
    Unsupported,
}

#[cfg(test)]
mod config_type_tests {
    use super::*;

    #[test]
    fn a_key_is_a_string_unless_typed_and_a_secret_is_a_password() {
        let plain = ConfigKey::required("topic", "the topic");
        assert_eq!(plain.config_type(), ConfigType::String);
        let typed = ConfigKey::optional("batch.size", Some("1"), "n").of_type(ConfigType::Int);
        assert_eq!(typed.config_type().name(), "INT");
        let secret = ConfigKey::optional("password", None, "p").secret();
        assert_eq!(secret.config_type(), ConfigType::Password);
        // An explicit type wins, and is kept whatever the secrecy set after it.
        let listed = ConfigKey::optional("hosts", None, "h")
            .of_type(ConfigType::List)
            .secret();
        assert_eq!(listed.config_type(), ConfigType::List);
        assert_eq!(listed.secrecy(), Secrecy::Secret);
    }

    #[test]
    fn a_required_key_is_high_an_optional_one_medium_unless_said() {
        assert_eq!(
            ConfigKey::required("topic", "t").config_importance(),
            Importance::High
        );
        assert_eq!(
            ConfigKey::optional("batch.size", Some("1"), "n").config_importance(),
            Importance::Medium
        );
        let low = ConfigKey::required("topic", "t").importance(Importance::Low);
        assert_eq!(low.config_importance().name(), "LOW");
    }
}
