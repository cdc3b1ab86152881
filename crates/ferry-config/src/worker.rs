//! The worker configuration: Kafka Connect's `connect-standalone.properties`, as far as Ferry uses it.
//!
//! The runtime reads its own keys and those of its built-in backends (the offsets file, the stdout
//! and file sinks); the keys of other offset stores and sinks are read by their plugins
//! ([`WorkerPlugins`]), registered by the program that runs the worker.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ferry_api::{ConfigKey, ConfigType, Importance};
use ferry_plugin::framework_key::names;
use ferry_plugin::{
    ConfigError, ConfigErrors, DynSinkSpec, DynStoreSpec, OffsetStorePlugin, Properties,
    SinkPlugin, UnknownKeyHints, WorkerPlugins,
};

use super::rest::{self, RestConfig};
use ferry_builtin::{
    FileSinkPlugin, FileSinkSpec, FileStorePlugin, FileStoreSpec, StdoutSinkPlugin, StdoutSinkSpec,
};
use ferry_plugin::ConverterSpec;
use ferry_plugin::converter_config::{self as converter, OrphanSettings};

/// `offset.flush.interval.ms`: how often acknowledged offsets are committed.
pub const OFFSET_FLUSH_INTERVAL_MS: &str = "offset.flush.interval.ms";
/// `offset.flush.timeout.ms`: how long one offset commit may take.
pub const OFFSET_FLUSH_TIMEOUT_MS: &str = "offset.flush.timeout.ms";
/// `offset.flush.strict.bound` (Ferry only, default `false`): each task polls its next batch only
/// once the previous one is acknowledged and its offsets committed, so a crash delivers at most one
/// poll batch again.
pub const OFFSET_FLUSH_STRICT_BOUND: &str = "offset.flush.strict.bound";
/// `task.shutdown.graceful.timeout.ms`: how long a stopping task may wait for outstanding deliveries.
pub const TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS: &str = "task.shutdown.graceful.timeout.ms";
pub use ferry_builtin::{OFFSET_STORAGE_FILE, SINK};
/// `offset.storage` (Ferry-only key): `file` (default), or a registered store's name.
pub const OFFSET_STORAGE: &str = "offset.storage";

/// `topic.tracking.enable` (default `true`): tasks record the topics they write to (KIP-558).
pub const TOPIC_TRACKING_ENABLE: &str = "topic.tracking.enable";
/// `topic.tracking.allow.reset` (default `true`): `PUT /connectors/<c>/topics/reset` is allowed.
pub const TOPIC_TRACKING_ALLOW_RESET: &str = "topic.tracking.allow.reset";

/// Kafka Connect's default `offset.flush.interval.ms`.
pub const DEFAULT_OFFSET_FLUSH_INTERVAL_MS: u64 = 60_000;
/// Kafka Connect's default `offset.flush.timeout.ms`.
pub const DEFAULT_OFFSET_FLUSH_TIMEOUT_MS: u64 = 5_000;
/// Kafka Connect's default `task.shutdown.graceful.timeout.ms`.
pub const DEFAULT_TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS: u64 = 5_000;

/// The keys both workers (standalone and distributed) read the same way, with Kafka Connect's
/// types, defaults and importance ([`CommonWorkerConfig`] reads them).
pub const COMMON_WORKER_KEYS: &[ConfigKey] = &[
    ConfigKey::optional(
        OFFSET_FLUSH_INTERVAL_MS,
        Some("60000"),
        "How often acknowledged offsets are committed.",
    )
    .of_type(ConfigType::Long)
    .importance(Importance::Low),
    ConfigKey::optional(
        OFFSET_FLUSH_TIMEOUT_MS,
        Some("5000"),
        "How long one offset commit may take.",
    )
    .of_type(ConfigType::Long)
    .importance(Importance::Low),
    ConfigKey::optional(
        OFFSET_FLUSH_STRICT_BOUND,
        Some("false"),
        "Ferry only, at-least-once: each task polls its next batch only once every record of the \
         previous one is acknowledged and its offsets committed (commits then follow \
         acknowledgements at once, whatever offset.flush.interval.ms says), so a crash delivers at \
         most one poll batch again. It serialises polling with the sink's and the store's round \
         trips; exactly-once needs none of it.",
    )
    .of_type(ConfigType::Boolean)
    .importance(Importance::Low),
    ConfigKey::optional(
        TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS,
        Some("5000"),
        "How long a stopping task may wait for its outstanding deliveries.",
    )
    .of_type(ConfigType::Long)
    .importance(Importance::Low),
    ConfigKey::optional(
        TOPIC_TRACKING_ENABLE,
        Some("true"),
        "Tasks record the topics they write to (KIP-558), for `GET /connectors/<c>/topics`.",
    )
    .of_type(ConfigType::Boolean)
    .importance(Importance::Low),
    ConfigKey::optional(
        TOPIC_TRACKING_ALLOW_RESET,
        Some("true"),
        "`PUT /connectors/<c>/topics/reset` is allowed.",
    )
    .of_type(ConfigType::Boolean)
    .importance(Importance::Low),
    ConfigKey::optional(
        super::exactly_once::EXACTLY_ONCE_SOURCE_SUPPORT,
        Some("disabled"),
        "`disabled`, `preparing` (behaves as `disabled`) or `enabled`: whether source tasks write \
         their records and offsets in transactions (KIP-618).",
    )
    .importance(Importance::High),
    ConfigKey::optional(
        converter::KEY_CONVERTER,
        Some("org.apache.kafka.connect.json.JsonConverter"),
        "How record keys become bytes in Kafka (with `key.converter.*` settings; JsonConverter \
         has `schemas.enable=true` by default).",
    )
    .of_type(ConfigType::Class)
    .importance(Importance::High),
    ConfigKey::optional(
        converter::VALUE_CONVERTER,
        Some("org.apache.kafka.connect.json.JsonConverter"),
        "How record values become bytes in Kafka (with `value.converter.*` settings; JsonConverter \
         has `schemas.enable=true` by default).",
    )
    .of_type(ConfigType::Class)
    .importance(Importance::High),
    ConfigKey::optional(
        converter::HEADER_CONVERTER,
        Some("org.apache.kafka.connect.storage.SimpleHeaderConverter"),
        "How header values become bytes in Kafka (`SimpleHeaderConverter` only).",
    )
    .of_type(ConfigType::Class)
    .importance(Importance::Low),
    super::providers::CONFIG_PROVIDERS_KEY,
];

/// The keys only the standalone worker reads (besides [`COMMON_WORKER_KEYS`], the REST keys and the
/// keys of the registered offset stores and sinks).
pub const STANDALONE_KEYS: &[ConfigKey] = &[
    ConfigKey::optional(
        OFFSET_STORAGE,
        Some("file"),
        "Where offsets are stored (Ferry-only key): `file`, or a registered store's name \
         (`kafka`, `postgres`).",
    )
    .importance(Importance::High),
    ConfigKey::optional(
        OFFSET_STORAGE_FILE,
        None,
        "Where the standalone worker stores source offsets. Required with `offset.storage=file`.",
    )
    .importance(Importance::High),
    ConfigKey::optional(
        SINK,
        None,
        "Where records go (Ferry-only key): `stdout`, `file:PATH`, or a registered sink's name \
         (`kafka`). Default: `kafka` when `bootstrap.servers` is set, else `stdout`.",
    )
    .importance(Importance::High),
    super::rest::CONNECTORS_FILE_KEY,
];

/// The names of the keys the standalone worker reads itself.
fn own_keys() -> impl Iterator<Item = &'static str> {
    names(COMMON_WORKER_KEYS).chain(names(STANDALONE_KEYS))
}

/// How the converter settings are listed in "accepted keys" hints.
const PREFIXED_KEYS: &[&str] = &["key.converter.*", "value.converter.*"];

/// Kafka Connect worker keys that are accepted so an existing file runs, but do nothing in Ferry.
const IGNORED_KEYS: &[&str] = &[
    "internal.key.converter",
    "internal.value.converter",
    "plugin.path",
];

/// The standalone worker's configuration.
///
/// `Debug` never shows the values of secret settings (`producer.sasl.password`, a password in a
/// connection string, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// Where offsets are stored: `offset.storage` with its settings.
    pub offset_storage: OffsetStorageSpec,
    /// `offset.flush.interval.ms` (default 60000, > 0): how often acknowledged offsets are committed.
    pub offset_flush_interval: Duration,
    /// `offset.flush.timeout.ms` (default 5000, > 0): how long one offset commit may take.
    pub offset_flush_timeout: Duration,
    /// `offset.flush.strict.bound` (default `false`): the next poll waits for the last batch's commit.
    pub offset_flush_strict_bound: bool,
    /// `task.shutdown.graceful.timeout.ms` (default 5000, ≥ 0): how long a stopping task may wait.
    pub task_shutdown_graceful_timeout: Duration,
    /// Where records go: `sink` (default: the first registered sink that is a default for the file,
    /// else `stdout`).
    pub sink: SinkSpec,
    /// `key.converter` (+ `key.converter.*`), default JsonConverter with `schemas.enable=true`.
    pub key_converter: ConverterSpec,
    /// `value.converter` (+ `value.converter.*`), default JsonConverter with `schemas.enable=true`.
    pub value_converter: ConverterSpec,
    /// The REST server: `listeners` (default `http://127.0.0.1:8083`) and `rest.auth.token`.
    pub rest: RestConfig,
    /// `ferry.connectors.file`: where connectors created or changed over REST are kept (default
    /// `<offset.storage.file.filename>.connectors.json`, or `ferry-connectors.json` with a store
    /// that is not a file).
    pub connectors_file: PathBuf,
    /// `config.providers` and `config.providers.<name>.*`: how `${provider:path:key}` placeholders
    /// of connector configurations are resolved (none by default).
    pub config_providers: super::ConfigProviders,
    /// `topic.tracking.enable` and `topic.tracking.allow.reset` (both default `true`).
    pub topic_tracking: crate::TopicTracking,
    /// `exactly.once.source.support` (default `disabled`; `preparing` behaves as `disabled`). With
    /// `enabled`, the offset store must be one records' transactions can write to and the sink one
    /// that writes transactions, on the same cluster (`offset.storage=kafka` and `sink=kafka`).
    pub exactly_once_source: super::exactly_once::ExactlyOnceSource,
    /// With exactly-once enabled, the prefix of the tasks' transactional ids
    /// (`<prefix>-<connector>-<task>`): the offsets topic's name, where a distributed worker uses its
    /// `group.id` (a standalone worker has none). Two workers running a connector of the same name
    /// on one offsets topic fence each other.
    pub transactional_id_prefix: Option<String>,
}

impl WorkerConfig {
    /// The offsets file, with `offset.storage=file`.
    pub fn offset_storage_file(&self) -> Option<&std::path::Path> {
        self.offset_storage
            .downcast_ref::<FileStoreSpec>()
            .map(|spec| spec.path.as_path())
    }
}

/// Where the worker sends records: the parsed `sink` of a registered [`SinkPlugin`] (or a built-in).
#[derive(Clone)]
pub struct SinkSpec(Arc<dyn DynSinkSpec>);

impl SinkSpec {
    /// A sink parsed by a plugin.
    pub fn new(spec: Arc<dyn DynSinkSpec>) -> Self {
        Self(spec)
    }

    /// `file:PATH`: JSON lines appended to `PATH`, acknowledged once synced. A relative path is
    /// relative to the process's working directory.
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self(Arc::new(FileSinkSpec {
            path: path.into(),
            format: ferry_builtin::sink::line::LineFormat::Json,
        }))
    }

    /// `stdout`: JSON lines on standard output.
    pub fn stdout() -> Self {
        Self(Arc::new(StdoutSinkSpec {
            format: ferry_builtin::sink::line::LineFormat::Json,
        }))
    }

    /// The plugin's settings.
    pub fn spec(&self) -> &Arc<dyn DynSinkSpec> {
        &self.0
    }

    /// The plugin's typed settings, if they are a `T`.
    pub fn downcast_ref<T: 'static>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref::<T>()
    }
}

impl Default for SinkSpec {
    fn default() -> Self {
        Self::stdout()
    }
}

impl fmt::Debug for SinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for SinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

/// Equal when the same plugin parsed the same settings (compared by their `Debug` text).
impl PartialEq for SinkSpec {
    fn eq(&self, other: &Self) -> bool {
        self.0.plugin() == other.0.plugin() && format!("{:?}", self.0) == format!("{:?}", other.0)
    }
}

impl Eq for SinkSpec {}

/// Where the worker stores offsets: the `offset.storage` key and its settings, parsed by a registered
/// [`OffsetStorePlugin`] (or the built-in offsets file).
#[derive(Clone)]
pub struct OffsetStorageSpec(Arc<dyn DynStoreSpec>);

impl OffsetStorageSpec {
    /// A store parsed by a plugin.
    pub fn new(spec: Arc<dyn DynStoreSpec>) -> Self {
        Self(spec)
    }

    /// `offset.storage=file` (the default): Ferry's crash-safe offsets file. A relative path is
    /// relative to the process's working directory, as in Kafka Connect.
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self(Arc::new(FileStoreSpec { path: path.into() }))
    }

    /// The plugin's settings: how to open the store and what it guarantees.
    pub fn spec(&self) -> &Arc<dyn DynStoreSpec> {
        &self.0
    }

    /// The plugin's typed settings, if they are a `T`.
    pub fn downcast_ref<T: 'static>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref::<T>()
    }
}

impl fmt::Debug for OffsetStorageSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for OffsetStorageSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

/// Equal when the same plugin parsed the same settings (compared by their `Debug` text).
impl PartialEq for OffsetStorageSpec {
    fn eq(&self, other: &Self) -> bool {
        self.0.plugin() == other.0.plugin() && format!("{:?}", self.0) == format!("{:?}", other.0)
    }
}

impl Eq for OffsetStorageSpec {}

/// The backends of one parse: the built-ins around the registered plugins.
struct Backends {
    /// The offsets file first, then the registered stores.
    stores: Vec<Arc<dyn OffsetStorePlugin>>,
    /// The registered sinks, then stdout and file (the order of "accepted values").
    sinks: Vec<Arc<dyn SinkPlugin>>,
    /// The sink when `sink` is unset and no registered sink is a default.
    stdout: Arc<dyn SinkPlugin>,
}

impl Backends {
    fn new(plugins: &WorkerPlugins) -> Self {
        let mut stores: Vec<Arc<dyn OffsetStorePlugin>> = vec![Arc::new(FileStorePlugin)];
        stores.extend(plugins.stores().iter().cloned());
        let stdout: Arc<dyn SinkPlugin> = Arc::new(StdoutSinkPlugin);
        let mut sinks: Vec<Arc<dyn SinkPlugin>> = plugins.sinks().to_vec();
        sinks.push(stdout.clone());
        sinks.push(Arc::new(FileSinkPlugin));
        Self {
            stores,
            sinks,
            stdout,
        }
    }

    fn keys(&self) -> impl Iterator<Item = &'static str> + '_ {
        let stores = self.stores.iter().flat_map(|p| p.keys());
        let sinks = self.sinks.iter().flat_map(|p| p.keys());
        stores.chain(sinks).map(|key| key.name)
    }

    fn prefixes(&self) -> impl Iterator<Item = &'static str> + '_ {
        let stores = self
            .stores
            .iter()
            .flat_map(|p| p.prefixes().iter().copied());
        let sinks = self.sinks.iter().flat_map(|p| p.prefixes().iter().copied());
        stores.chain(sinks)
    }
}

impl WorkerConfig {
    /// Reads the worker configuration with the runtime's built-in backends only (the offsets file,
    /// the stdout and file sinks); see [`WorkerConfig::from_properties_with`].
    ///
    /// # Errors
    /// Every unknown key, missing required key and invalid value, each naming the file, key and line.
    pub fn from_properties(props: &Properties) -> Result<WorkerConfig, ConfigErrors> {
        Self::from_properties_with(props, &WorkerPlugins::default())
    }

    /// Reads the worker configuration, reporting every problem of the file at once; the keys of the
    /// offset stores and sinks in `plugins` are read by them.
    ///
    /// Unknown keys are errors, except Kafka Connect's plugin and internal converter keys
    /// (`plugin.path`, …), which are accepted with a WARN that they have no effect. The REST keys
    /// (`listeners`, `rest.auth.token`, the deprecated `rest.host.name` / `rest.port` fallbacks) and
    /// `ferry.connectors.file` are read into [`WorkerConfig::rest`] and
    /// [`WorkerConfig::connectors_file`].
    ///
    /// # Errors
    /// Every unknown key, missing required key and invalid value, each naming the file, key and line.
    pub fn from_properties_with(
        props: &Properties,
        plugins: &WorkerPlugins,
    ) -> Result<WorkerConfig, ConfigErrors> {
        let backends = Backends::new(plugins);
        let mut errors = Vec::new();
        check_keys(props, &backends, &mut errors);
        for sink in &backends.sinks {
            sink.check(props, &mut errors);
        }

        let offset_storage = offset_storage(props, &backends, &mut errors);
        let common = CommonWorkerConfig::from_properties(props, &mut errors);
        let converters = (common.key_converter, common.value_converter);
        let mut sink = sink(props, &backends, converters, &mut errors);
        let transactional_id_prefix = exactly_once(
            props,
            common.exactly_once_source,
            offset_storage.as_ref(),
            &mut sink,
            &mut errors,
        );
        let connectors_file = rest::connectors_file(
            props,
            offset_storage.as_ref().map(OffsetStorageSpec::spec),
            &mut errors,
        );
        warn_unused_converters(props, &sink);

        match offset_storage {
            Some(offset_storage) if errors.is_empty() => Ok(WorkerConfig {
                offset_storage,
                offset_flush_interval: common.offset_flush_interval,
                offset_flush_timeout: common.offset_flush_timeout,
                offset_flush_strict_bound: common.offset_flush_strict_bound,
                task_shutdown_graceful_timeout: common.task_shutdown_graceful_timeout,
                sink,
                key_converter: converters.0,
                value_converter: converters.1,
                rest: common.rest,
                connectors_file,
                config_providers: common.config_providers,
                topic_tracking: common.topic_tracking,
                exactly_once_source: common.exactly_once_source,
                transactional_id_prefix,
            }),
            _ => Err(ConfigErrors::in_file_order(errors)),
        }
    }
}

/// Every key of the file is one the worker, a backend or a prefix reads; Kafka Connect's plugin
/// keys are accepted with a WARN; the rest are errors with a hint.
fn check_keys(props: &Properties, backends: &Backends, errors: &mut Vec<ConfigError>) {
    let path = props.path();
    let prefixes: Vec<&str> = backends.prefixes().collect();
    let known: Vec<&str> = own_keys()
        .chain(backends.keys())
        .chain(names(rest::REST_KEYS))
        .collect();
    // The deprecated rest.host.name / rest.port are accepted but not advertised.
    let listed_prefixes: Vec<String> = prefixes.iter().map(|p| format!("{p}*")).collect();
    let mut listed: Vec<&str> = own_keys()
        .chain(backends.keys())
        .chain(rest::listed_keys())
        .chain(PREFIXED_KEYS.iter().copied())
        .chain(super::ConfigProviders::LISTED.iter().copied())
        .collect();
    listed.extend(listed_prefixes.iter().map(String::as_str));
    let mut hints = UnknownKeyHints::new(&listed);
    for key in props.keys() {
        let line = props.line_of(key);
        if known.contains(&key)
            || super::ConfigProviders::is_key(key)
            || converter::is_converter_key(key)
            || RestConfig::is_key(key)
            || prefixes.iter().any(|p| key.starts_with(p))
        {
            continue;
        }
        if IGNORED_KEYS.contains(&key) {
            tracing::warn!(
                file = %path.display(),
                key = %key,
                "{}: {key} has no effect in this build (Ferry has no plugin path or internal converter \
                 settings); ignored",
                props.location(key)
            );
        } else if let Some(what) = ferry_plugin::not_implemented_worker_key(key) {
            errors.push(props.not_implemented(key, what));
        } else {
            let candidates = known.iter().chain(IGNORED_KEYS).copied();
            errors.push(ConfigError::UnknownKey {
                path: path.to_path_buf(),
                key: key.to_owned(),
                line,
                hint: hints.hint(key, candidates),
            });
        }
    }
}

/// WARNs for converter keys a sink without converters ignores.
fn warn_unused_converters(props: &Properties, sink: &SinkSpec) {
    if sink.spec().uses_converters() {
        return;
    }
    for key in converter::converter_keys(props) {
        tracing::warn!(
            file = %props.path().display(),
            key = %key,
            "{}: {key} has no effect with sink={sink} (converters apply to records sent to Kafka; \
             the {sink} sink writes JSON lines); ignored",
            props.location(key)
        );
    }
}

/// With `exactly.once.source.support=enabled`, the sink made to write each task's offsets into its
/// records' transactions, and the tasks' transactional id prefix.
fn exactly_once(
    props: &Properties,
    support: super::exactly_once::ExactlyOnceSource,
    offset_storage: Option<&OffsetStorageSpec>,
    sink: &mut SinkSpec,
    errors: &mut Vec<ConfigError>,
) -> Option<String> {
    use super::exactly_once::{EXACTLY_ONCE_SOURCE_SUPPORT, ExactlyOnceSource};
    if support != ExactlyOnceSource::Enabled {
        return None;
    }
    // The store is checked only once it parsed (its own errors are reported already).
    let offset_storage = offset_storage?;
    let Some(offsets) = offset_storage.spec().transactional_offsets() else {
        errors.push(props.invalid(
            EXACTLY_ONCE_SOURCE_SUPPORT,
            format!(
                "exactly-once delivery writes each task's offsets in its records' transactions, which \
                 the offsets in {} cannot take; use offset.storage=kafka (and sink=kafka), or \
                 exactly.once.source.support=disabled",
                offset_storage.spec()
            ),
        ));
        return None;
    };
    match sink.spec().with_transactional_offsets(&offsets) {
        Ok(transactional) => *sink = SinkSpec::new(transactional),
        Err(reason) => {
            errors.push(props.invalid(EXACTLY_ONCE_SOURCE_SUPPORT, reason.to_string()));
            return None;
        }
    }
    Some(offsets.topic)
}

/// `sink`, defaulting to the first sink that is a default for this file, else stdout.
fn sink(
    props: &Properties,
    backends: &Backends,
    converters: (ConverterSpec, ConverterSpec),
    errors: &mut Vec<ConfigError>,
) -> SinkSpec {
    let value = props.get(SINK).map(str::trim);
    let chosen = match value {
        None => backends
            .sinks
            .iter()
            .find(|p| p.is_default_for(props))
            .unwrap_or(&backends.stdout),
        Some(text) => match backends.sinks.iter().find(|p| p.accepts(text)) {
            Some(plugin) => plugin,
            None => {
                let accepted: Vec<&str> = backends.sinks.iter().map(|p| p.accepted()).collect();
                let list = match accepted.split_last() {
                    Some((last, rest)) if !rest.is_empty() => {
                        format!("{}, or {last}", rest.join(", "))
                    }
                    _ => accepted.join(", "),
                };
                errors.push(props.invalid(SINK, format!("accepted values: {list}")));
                return SinkSpec::stdout();
            }
        },
    };
    let Some(spec) = chosen.parse(value, props, converters, errors) else {
        return SinkSpec::stdout();
    };
    for other in backends.sinks.iter().filter(|p| p.name() != chosen.name()) {
        other.warn_unused(props, &*spec);
    }
    SinkSpec(spec)
}

/// `offset.storage` and the keys of the chosen store.
fn offset_storage(
    props: &Properties,
    backends: &Backends,
    errors: &mut Vec<ConfigError>,
) -> Option<OffsetStorageSpec> {
    let storage = props
        .get(OFFSET_STORAGE)
        .map(|s| s.trim().to_ascii_lowercase());
    let name = storage.as_deref().unwrap_or("file");
    let Some(chosen) = backends.stores.iter().find(|p| p.name() == name) else {
        let accepted: Vec<&str> = backends.stores.iter().map(|p| p.accepted()).collect();
        errors.push(props.invalid(
            OFFSET_STORAGE,
            format!("accepted values: {}", accepted.join(", ")),
        ));
        return None;
    };
    // Keys of another store than the chosen one are errors: the file would not mean what it says.
    for other in backends.stores.iter().filter(|p| p.name() != name) {
        for key in other
            .keys()
            .into_iter()
            .filter(|k| props.get(k.name).is_some())
        {
            // The store declares its keys' secrecy (a connection string's password stays hidden).
            errors.push(props.invalid_secret(
                &key,
                format!(
                    "is a setting of offset.storage={owner}, but offsets are stored in {chosen}; set \
                     offset.storage={owner} to keep them there, or remove this key",
                    owner = other.name(),
                    chosen = chosen.description(),
                ),
            ));
        }
    }
    let alternatives: Vec<&'static str> = backends
        .stores
        .iter()
        .filter(|p| p.name() != name)
        .map(|p| p.hint())
        .collect();
    chosen
        .parse(props, &alternatives, errors)
        .map(OffsetStorageSpec)
}

/// What both workers, standalone and distributed, read the same way from their file: the keys of
/// [`COMMON_WORKER_KEYS`] and the REST keys. One reader, so the two workers cannot drift apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommonWorkerConfig {
    /// `offset.flush.interval.ms` (default 60000, ≥ 0).
    pub offset_flush_interval: Duration,
    /// `offset.flush.timeout.ms` (default 5000, > 0).
    pub offset_flush_timeout: Duration,
    /// `offset.flush.strict.bound` (default `false`).
    pub offset_flush_strict_bound: bool,
    /// `task.shutdown.graceful.timeout.ms` (default 5000, ≥ 0).
    pub task_shutdown_graceful_timeout: Duration,
    /// `key.converter` (+ `key.converter.*`), default JsonConverter with `schemas.enable=true`.
    pub key_converter: ConverterSpec,
    /// `value.converter` (+ `value.converter.*`), default JsonConverter with `schemas.enable=true`.
    pub value_converter: ConverterSpec,
    /// `topic.tracking.enable` and `topic.tracking.allow.reset` (both default `true`).
    pub topic_tracking: crate::TopicTracking,
    /// `exactly.once.source.support` (default `disabled`).
    pub exactly_once_source: super::exactly_once::ExactlyOnceSource,
    /// The REST server: `listeners`, `rest.auth.token`, ….
    pub rest: RestConfig,
    /// `config.providers` and `config.providers.<name>.*`.
    pub config_providers: super::ConfigProviders,
}

impl CommonWorkerConfig {
    /// Reads the keys both workers share; every problem goes to `errors`, naming file, key and line,
    /// and the key's default is used in its place.
    pub fn from_properties(props: &Properties, errors: &mut Vec<ConfigError>) -> Self {
        let offset_flush_interval = millis(
            props,
            OFFSET_FLUSH_INTERVAL_MS,
            DEFAULT_OFFSET_FLUSH_INTERVAL_MS,
            0,
            errors,
        );
        let offset_flush_timeout = millis(
            props,
            OFFSET_FLUSH_TIMEOUT_MS,
            DEFAULT_OFFSET_FLUSH_TIMEOUT_MS,
            1,
            errors,
        );
        let task_shutdown_graceful_timeout = millis(
            props,
            TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS,
            DEFAULT_TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS,
            0,
            errors,
        );
        let offset_flush_strict_bound = flag(props, OFFSET_FLUSH_STRICT_BOUND, false, errors);
        let (key_converter, value_converter) =
            converter::parse_converters(props, OrphanSettings::ApplyToDefault, errors);
        Self {
            offset_flush_interval,
            offset_flush_timeout,
            offset_flush_strict_bound,
            task_shutdown_graceful_timeout,
            key_converter: key_converter.unwrap_or_default(),
            value_converter: value_converter.unwrap_or_default(),
            topic_tracking: topic_tracking(props, errors),
            exactly_once_source: exactly_once_source(props, errors),
            rest: RestConfig::from_properties(props, errors),
            config_providers: super::ConfigProviders::from_properties(props, errors),
        }
    }
}

/// `exactly.once.source.support` (default `disabled`; an invalid value is an error and reads as
/// `disabled`).
fn exactly_once_source(
    props: &Properties,
    errors: &mut Vec<ConfigError>,
) -> super::exactly_once::ExactlyOnceSource {
    use super::exactly_once::{EXACTLY_ONCE_SOURCE_SUPPORT, ExactlyOnceSource};
    match props.get(EXACTLY_ONCE_SOURCE_SUPPORT) {
        None => ExactlyOnceSource::Disabled,
        Some(value) => ExactlyOnceSource::parse(value).unwrap_or_else(|message| {
            errors.push(props.invalid(EXACTLY_ONCE_SOURCE_SUPPORT, message));
            ExactlyOnceSource::Disabled
        }),
    }
}

/// `topic.tracking.enable` and `topic.tracking.allow.reset` (Kafka Connect's booleans: `true` or
/// `false`, any case).
pub fn topic_tracking(props: &Properties, errors: &mut Vec<ConfigError>) -> crate::TopicTracking {
    crate::TopicTracking {
        enable: flag(props, TOPIC_TRACKING_ENABLE, true, errors),
        allow_reset: flag(props, TOPIC_TRACKING_ALLOW_RESET, true, errors),
    }
}

/// A boolean key (`true` or `false`, any case, Java's `Boolean` config type); `default` when unset
/// or invalid (an invalid value is pushed to `errors`).
fn flag(props: &Properties, key: &str, default: bool, errors: &mut Vec<ConfigError>) -> bool {
    match props.get(key).map(|v| v.trim().to_ascii_lowercase()) {
        None => default,
        Some(v) if v == "true" => true,
        Some(v) if v == "false" => false,
        Some(_) => {
            errors.push(props.invalid(key, format!("must be true or false (default {default})")));
            default
        }
    }
}

/// A duration in milliseconds: an integer from `min` to `i64::MAX` (Java's `long`), `default` if unset;
/// a bad value is pushed to `errors` (naming file, key and line) and `default` returned. Shared by the
/// standalone and distributed worker files.
pub fn millis(
    props: &Properties,
    key: &str,
    default: u64,
    min: u64,
    errors: &mut Vec<ConfigError>,
) -> Duration {
    let Some(text) = props.get(key) else {
        return Duration::from_millis(default);
    };
    match text.trim().parse::<u64>() {
        Ok(ms) if ms >= min && i64::try_from(ms).is_ok() => Duration::from_millis(ms),
        _ => {
            let lowest = if min == 0 {
                "0 or more"
            } else {
                "greater than 0"
            };
            let message =
                format!("must be a whole number of milliseconds, {lowest} (default {default})");
            errors.push(props.invalid(key, message));
            Duration::from_millis(default)
        }
    }
}
