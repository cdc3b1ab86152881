//! Sink backends: the values of the worker's `sink` key and the worker keys of that sink.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use ferry_api::{Config, ConfigIssue, ConfigKey};

use crate::{ConfigError, ConverterSpec, Properties, SinkError, SinkProvider};

/// Why a sink cannot write exactly-once tasks' records and offsets in one transaction
/// ([`DynSinkSpec::with_transactional_offsets`]).
#[derive(Debug, thiserror::Error)]
pub enum TransactionsError {
    /// The sink does not write transactions.
    #[error(
        "the {plugin} sink does not write transactions (exactly-once delivery needs sink=kafka)"
    )]
    Unsupported {
        /// The sink's name ([`DynSinkSpec::plugin`]).
        plugin: &'static str,
    },
    /// The sink writes transactions, but not with these offsets; the sink's own error says why.
    #[error(transparent)]
    Refused(Box<dyn std::error::Error + Send + Sync>),
}

/// One kind of sink (`sink=kafka`, `sink=stdout`, `sink=file:PATH`). It parses only its own keys and
/// never connects while parsing.
pub trait SinkPlugin: Send + Sync {
    /// The name of the sink (`kafka`, `stdout`, `file`).
    fn name(&self) -> &'static str;

    /// Whether the value of `sink` (trimmed) chooses this sink (`file:` chooses `file`).
    fn accepts(&self, value: &str) -> bool;

    /// This sink in the "accepted values:" list of `sink`, e.g. `kafka (needs bootstrap.servers)`.
    fn accepted(&self) -> &'static str;

    /// The worker keys this sink reads, with their secrecy; accepted in any worker file.
    fn keys(&self) -> Vec<ConfigKey> {
        Vec::new()
    }

    /// Key prefixes this sink reads (`producer.`).
    fn prefixes(&self) -> &'static [&'static str] {
        &[]
    }

    /// Checks this sink's keys whatever sink is chosen (an empty `bootstrap.servers` is wrong either
    /// way), pushing problems to `errors`.
    fn check(&self, _props: &Properties, _errors: &mut Vec<ConfigError>) {}

    /// Whether this sink is chosen when `sink` is not set (Kafka: `bootstrap.servers` is set).
    fn is_default_for(&self, _props: &Properties) -> bool {
        false
    }

    /// Reads the sink's settings; `value` is the trimmed value of `sink` (`None` when chosen by
    /// default), `converters` the worker's key and value converters.
    fn parse(
        &self,
        value: Option<&str>,
        props: &Properties,
        converters: (ConverterSpec, ConverterSpec),
        errors: &mut Vec<ConfigError>,
    ) -> Option<Arc<dyn DynSinkSpec>>;

    /// Logs that this sink's keys have no effect because `chosen` is the sink (called for every
    /// sink but the chosen one).
    fn warn_unused(&self, _props: &Properties, _chosen: &dyn DynSinkSpec) {}
}

/// A parsed `sink` choice with its settings. `Display` is how the worker names it (`stdout`,
/// `file:/x`, `kafka host:9092`).
#[async_trait]
pub trait DynSinkSpec: fmt::Debug + fmt::Display + Send + Sync + Any {
    /// The name of the plugin that parsed it.
    fn plugin(&self) -> &'static str;

    /// Creates the sink's shared resources (the Kafka producer, the open file): at start, after the
    /// REST server is bound, never while parsing.
    ///
    /// # Errors
    /// The sink cannot be created.
    async fn start(&self) -> Result<Arc<dyn SinkProvider>, SinkError>;

    /// Whether the sink applies `key.converter` / `value.converter` (Kafka does; JSON-line sinks do not).
    fn uses_converters(&self) -> bool;

    /// Whether `key` is a connector key this sink reads itself (Kafka: `topic.creation.*`,
    /// `producer.override.*`): the runtime accepts it in every connector configuration and leaves its
    /// checks to [`check_connector`](Self::check_connector). None by default.
    fn handles_connector_key(&self, _key: &str) -> bool {
        false
    }

    /// Checks a connector configuration's keys of this sink against the worker's settings (a refused
    /// client override, an invalid topic creation group), one issue per problem, naming its key.
    fn check_connector(&self, _config: &Config) -> Vec<ConfigIssue> {
        Vec::new()
    }

    /// This sink, writing exactly-once tasks' records and their offsets into `offsets` in one
    /// transaction per task ([`SinkProvider::open_transactional`](crate::sink::SinkProvider)).
    ///
    /// # Errors
    /// Why this sink cannot (the default: it does not write transactions; Kafka: the offsets topic
    /// is on another cluster than the records).
    fn with_transactional_offsets(
        &self,
        _offsets: &crate::store::TransactionalOffsets,
    ) -> Result<Arc<dyn DynSinkSpec>, TransactionsError> {
        Err(TransactionsError::Unsupported {
            plugin: self.plugin(),
        })
    }

    /// The typed settings, for tests and tools.
    fn as_any(&self) -> &dyn Any;
}
