//! The worker configuration: Kafka Connect's `connect-standalone.properties`, as far as Ferry uses it.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use super::converter::{self, ConverterSpec, OrphanSettings};
use super::postgres::{
    OFFSET_STORAGE_POSTGRES_TABLE, OFFSET_STORAGE_POSTGRES_URL, PostgresOffsetStorageSpec,
    postgres_storage,
};
use super::rest::{self, RestConfig};
use ferry_plugin::Properties;
use ferry_plugin::UnknownKeyHints;
use ferry_plugin::{ConfigError, ConfigErrors};

pub use ferry_plugin::{ClientOverrides, PRODUCER_PREFIX};

/// `offset.storage.file.filename`: where the standalone worker stores source offsets. Required with
/// `offset.storage=file` (the default).
pub const OFFSET_STORAGE_FILE: &str = "offset.storage.file.filename";
/// `offset.flush.interval.ms`: how often acknowledged offsets are committed.
pub const OFFSET_FLUSH_INTERVAL_MS: &str = "offset.flush.interval.ms";
/// `offset.flush.timeout.ms`: how long one offset commit may take.
pub const OFFSET_FLUSH_TIMEOUT_MS: &str = "offset.flush.timeout.ms";
/// `task.shutdown.graceful.timeout.ms`: how long a stopping task may wait for outstanding deliveries.
pub const TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS: &str = "task.shutdown.graceful.timeout.ms";
/// `sink`: where records go (Ferry-only key): `kafka`, `stdout` or `file:PATH`.
pub const SINK: &str = "sink";
/// `bootstrap.servers`: the Kafka cluster records (and, with `offset.storage=kafka`, offsets) go to.
pub const BOOTSTRAP_SERVERS: &str = "bootstrap.servers";
/// `offset.storage` (Ferry-only key): `file` (default), `kafka` or `postgres`.
pub const OFFSET_STORAGE: &str = "offset.storage";
/// `offset.storage.topic`: the compacted topic holding offsets; required with `offset.storage=kafka`.
pub const OFFSET_STORAGE_TOPIC: &str = "offset.storage.topic";
/// `offset.storage.partitions`: partitions of the offsets topic when Ferry creates it (default 25).
pub const OFFSET_STORAGE_PARTITIONS: &str = "offset.storage.partitions";
/// `offset.storage.replication.factor`: replication of the offsets topic when Ferry creates it
/// (default 3; -1: the broker's default).
pub const OFFSET_STORAGE_REPLICATION_FACTOR: &str = "offset.storage.replication.factor";

const DEFAULT_OFFSET_FLUSH_INTERVAL_MS: u64 = 60_000;
const DEFAULT_OFFSET_FLUSH_TIMEOUT_MS: u64 = 5_000;
const DEFAULT_TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS: u64 = 5_000;
const DEFAULT_OFFSET_STORAGE_PARTITIONS: i32 = 25;
const DEFAULT_OFFSET_STORAGE_REPLICATION_FACTOR: i16 = 3;

/// The keys Ferry's worker uses (besides `producer.*`, the converter keys and the Kafka client
/// security settings).
const KEYS: &[&str] = &[
    OFFSET_STORAGE_FILE,
    OFFSET_FLUSH_INTERVAL_MS,
    OFFSET_FLUSH_TIMEOUT_MS,
    TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS,
    SINK,
    BOOTSTRAP_SERVERS,
    OFFSET_STORAGE,
    OFFSET_STORAGE_TOPIC,
    OFFSET_STORAGE_PARTITIONS,
    OFFSET_STORAGE_REPLICATION_FACTOR,
    OFFSET_STORAGE_POSTGRES_URL,
    OFFSET_STORAGE_POSTGRES_TABLE,
    converter::KEY_CONVERTER,
    converter::VALUE_CONVERTER,
    converter::HEADER_CONVERTER,
];

/// Worker-level Kafka client settings (for the Kafka offset store's clients, as Kafka Connect uses the
/// worker's top-level settings for its internal clients): keys starting with these.
const CLIENT_SECURITY_PREFIXES: &[&str] = &["security.", "sasl.", "ssl."];

/// How the prefixed keys are listed in "accepted keys" hints.
const PREFIXED_KEYS: &[&str] = &[
    "producer.*",
    "key.converter.*",
    "value.converter.*",
    "security.*",
    "sasl.*",
    "ssl.*",
];

/// Kafka Connect worker keys that are accepted so an existing file runs, but do nothing in Ferry.
const IGNORED_KEYS: &[&str] = &[
    "internal.key.converter",
    "internal.value.converter",
    "plugin.path",
];

/// The standalone worker's configuration.
///
/// `Debug` never shows the values of secret client settings (`producer.sasl.password`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// Where offsets are stored: `offset.storage` with its settings.
    pub offset_storage: OffsetStorageSpec,
    /// `offset.flush.interval.ms` (default 60000, > 0): how often acknowledged offsets are committed.
    pub offset_flush_interval: Duration,
    /// `offset.flush.timeout.ms` (default 5000, > 0): how long one offset commit may take.
    pub offset_flush_timeout: Duration,
    /// `task.shutdown.graceful.timeout.ms` (default 5000, ≥ 0): how long a stopping task may wait.
    pub task_shutdown_graceful_timeout: Duration,
    /// Where records go: `sink` (default `kafka` when `bootstrap.servers` is set, else `stdout`).
    pub sink: SinkSpec,
    /// `key.converter` (+ `key.converter.*`), default JsonConverter with `schemas.enable=true`.
    pub key_converter: ConverterSpec,
    /// `value.converter` (+ `value.converter.*`), default JsonConverter with `schemas.enable=true`.
    pub value_converter: ConverterSpec,
    /// The REST server: `listeners` (default `http://127.0.0.1:8083`) and `rest.auth.token`.
    pub rest: RestConfig,
    /// `ferry.connectors.file`: where connectors created or changed over REST are kept (default
    /// `<offset.storage.file.filename>.connectors.json`, or `ferry-connectors.json` with
    /// `offset.storage=kafka` or `postgres`).
    pub connectors_file: PathBuf,
}

impl WorkerConfig {
    /// The offsets file, with `offset.storage=file`.
    pub fn offset_storage_file(&self) -> Option<&std::path::Path> {
        match &self.offset_storage {
            OffsetStorageSpec::File(path) => Some(path),
            OffsetStorageSpec::Kafka(_) | OffsetStorageSpec::Postgres(_) => None,
        }
    }
}

/// Where the worker sends records.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SinkSpec {
    /// `file:PATH`: JSON lines appended to `PATH`, acknowledged once synced. A relative path is
    /// relative to the process's working directory.
    File(PathBuf),
    /// `stdout`: JSON lines on standard output.
    #[default]
    Stdout,
    /// `kafka` (the default when `bootstrap.servers` is set): a Kafka producer, records acknowledged on
    /// the broker's acknowledgement; keys and values made bytes by the converters.
    Kafka {
        /// `bootstrap.servers`.
        bootstrap_servers: String,
        /// `producer.*` with the prefix removed (`producer.linger.ms=5` → `linger.ms=5`).
        producer_overrides: ClientOverrides,
    },
}

impl FromStr for SinkSpec {
    type Err = String;

    /// Parses `stdout` or `file:PATH` (surrounding whitespace ignored); the error says what is accepted.
    /// `kafka` takes its settings from other keys, so only [`WorkerConfig::from_properties`] builds it.
    fn from_str(text: &str) -> Result<Self, String> {
        match parse_sink(text)? {
            SinkChoice::Stdout => Ok(SinkSpec::Stdout),
            SinkChoice::File(path) => Ok(SinkSpec::File(path)),
            SinkChoice::Kafka => Err(
                "sink=kafka takes its settings from bootstrap.servers and producer.*; read it with \
                 WorkerConfig::from_properties"
                    .to_owned(),
            ),
        }
    }
}

/// The value of the `sink` key.
enum SinkChoice {
    Stdout,
    File(PathBuf),
    Kafka,
}

fn parse_sink(text: &str) -> Result<SinkChoice, String> {
    let text = text.trim();
    match text {
        "stdout" => return Ok(SinkChoice::Stdout),
        "kafka" => return Ok(SinkChoice::Kafka),
        _ => {}
    }
    match text.strip_prefix("file:") {
        Some(path) if !path.is_empty() => Ok(SinkChoice::File(PathBuf::from(path))),
        Some(_) => {
            Err("file: needs a path, e.g. sink=file:/var/lib/ferry/records.jsonl".to_owned())
        }
        None => Err(
            "accepted values: kafka (needs bootstrap.servers), stdout, or file:PATH (e.g. \
             file:/var/lib/ferry/records.jsonl)"
                .to_owned(),
        ),
    }
}

impl fmt::Display for SinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SinkSpec::File(path) => write!(f, "file:{}", path.display()),
            SinkSpec::Stdout => f.write_str("stdout"),
            SinkSpec::Kafka {
                bootstrap_servers, ..
            } => write!(f, "kafka {bootstrap_servers}"),
        }
    }
}

/// Where the worker stores offsets: the `offset.storage` key and its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetStorageSpec {
    /// `file` (default): Ferry's crash-safe offsets file, `offset.storage.file.filename`. A relative path
    /// is relative to the process's working directory, as in Kafka Connect.
    File(PathBuf),
    /// `kafka`: a compacted Kafka topic, byte-compatible with Kafka Connect's offsets topic.
    Kafka(KafkaOffsetStorageSpec),
    /// `postgres`: a PostgreSQL table, one row per partition (`offset.storage.postgres.url`,
    /// `offset.storage.postgres.table`).
    Postgres(PostgresOffsetStorageSpec),
}

/// The settings of `offset.storage=kafka`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaOffsetStorageSpec {
    /// `bootstrap.servers`.
    pub bootstrap_servers: String,
    /// `offset.storage.topic` (required).
    pub topic: String,
    /// `offset.storage.partitions` (default 25): used when the topic is created.
    pub partitions: i32,
    /// `offset.storage.replication.factor` (default 3; -1: the broker's default): used when the topic
    /// is created.
    pub replication_factor: i16,
    /// The worker's Kafka client security settings (`security.protocol`, `sasl.*`, `ssl.*`), passed to
    /// the store's clients as they are.
    pub client_overrides: ClientOverrides,
}

impl fmt::Display for OffsetStorageSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OffsetStorageSpec::File(path) => write!(f, "file {}", path.display()),
            OffsetStorageSpec::Kafka(spec) => write!(
                f,
                "kafka topic {} on {}",
                spec.topic, spec.bootstrap_servers
            ),
            OffsetStorageSpec::Postgres(spec) => {
                write!(
                    f,
                    "postgres table {} at {}",
                    spec.table,
                    spec.url.redacted()
                )
            }
        }
    }
}

impl WorkerConfig {
    /// Reads the worker configuration, reporting every problem of the file at once.
    ///
    /// Unknown keys are errors, except Kafka Connect's plugin and internal converter keys
    /// (`plugin.path`, …), which are accepted with a WARN that they have no effect. The REST keys
    /// (`listeners`, `rest.auth.token`, the deprecated `rest.host.name` / `rest.port` fallbacks) and
    /// `ferry.connectors.file` are read into [`WorkerConfig::rest`] and
    /// [`WorkerConfig::connectors_file`]. `producer.*` keys go to
    /// the Kafka producer as they are (librdkafka checks them when the producer is created);
    /// `security.*`, `sasl.*` and `ssl.*` to the Kafka offset store's clients.
    ///
    /// # Errors
    /// Every unknown key, missing required key and invalid value, each naming the file, key and line.
    pub fn from_properties(props: &Properties) -> Result<WorkerConfig, ConfigErrors> {
        let mut errors = Vec::new();
        let path = props.path();
        let mut producer_overrides = ClientOverrides::default();
        let mut client_settings = ClientOverrides::default();
        // The deprecated rest.host.name / rest.port are accepted but not advertised.
        let listed: Vec<&str> = KEYS
            .iter()
            .chain(rest::LISTED_KEYS)
            .chain(PREFIXED_KEYS)
            .copied()
            .collect();
        let mut hints = UnknownKeyHints::new(&listed);
        for key in props.keys() {
            let line = props.line_of(key);
            if KEYS.contains(&key) || rest::KEYS.contains(&key) || converter::is_converter_key(key)
            {
                continue;
            }
            if let Some(setting) = key.strip_prefix(PRODUCER_PREFIX) {
                if setting.is_empty() {
                    errors.push(
                        props.invalid(key, "names no producer setting (e.g. producer.linger.ms=5)"),
                    );
                } else {
                    producer_overrides.set(setting, props.get(key).unwrap_or_default().trim());
                }
            } else if CLIENT_SECURITY_PREFIXES.iter().any(|p| key.starts_with(p)) {
                client_settings.set(key, props.get(key).unwrap_or_default().trim());
            } else if IGNORED_KEYS.contains(&key) {
                tracing::warn!(
                    file = %path.display(),
                    key = %key,
                    "{}: {key} has no effect in this build (Ferry has no plugin path or internal converter \
                     settings); ignored",
                    props.location(key)
                );
            } else {
                let candidates = KEYS.iter().chain(rest::KEYS).chain(IGNORED_KEYS).copied();
                errors.push(ConfigError::UnknownKey {
                    path: path.to_path_buf(),
                    key: key.to_owned(),
                    line,
                    hint: hints.hint(key, candidates),
                });
            }
        }

        let bootstrap_servers = match props.get(BOOTSTRAP_SERVERS).map(str::trim) {
            None => None,
            Some("") => {
                errors.push(props.invalid(
                    BOOTSTRAP_SERVERS,
                    "must list at least one broker, e.g. localhost:9092",
                ));
                None
            }
            Some(servers) => Some(servers.to_owned()),
        };
        let offset_storage = offset_storage(
            props,
            bootstrap_servers.as_deref(),
            client_settings,
            &mut errors,
        );
        let offset_flush_interval = millis(
            props,
            OFFSET_FLUSH_INTERVAL_MS,
            DEFAULT_OFFSET_FLUSH_INTERVAL_MS,
            1,
            &mut errors,
        );
        let offset_flush_timeout = millis(
            props,
            OFFSET_FLUSH_TIMEOUT_MS,
            DEFAULT_OFFSET_FLUSH_TIMEOUT_MS,
            1,
            &mut errors,
        );
        let task_shutdown_graceful_timeout = millis(
            props,
            TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS,
            DEFAULT_TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS,
            0,
            &mut errors,
        );
        let sink = sink(props, bootstrap_servers, producer_overrides, &mut errors);
        let rest = rest::rest_config(props, &mut errors);
        let connectors_file = rest::connectors_file(props, offset_storage.as_ref(), &mut errors);
        let (key_converter, value_converter) =
            converter::parse_converters(props, OrphanSettings::ApplyToDefault, &mut errors);
        if !matches!(sink, SinkSpec::Kafka { .. }) {
            for key in converter::converter_keys(props) {
                tracing::warn!(
                    file = %path.display(),
                    key = %key,
                    "{}: {key} has no effect with sink={sink} (converters apply to records sent to Kafka; \
                     the {sink} sink writes JSON lines); ignored",
                    props.location(key)
                );
            }
        }

        match offset_storage {
            Some(offset_storage) if errors.is_empty() => Ok(WorkerConfig {
                offset_storage,
                offset_flush_interval,
                offset_flush_timeout,
                task_shutdown_graceful_timeout,
                sink,
                key_converter: key_converter.unwrap_or_default(),
                value_converter: value_converter.unwrap_or_default(),
                rest,
                connectors_file,
            }),
            _ => Err(ConfigErrors::in_file_order(errors)),
        }
    }
}

/// `sink`, defaulting to Kafka when `bootstrap.servers` is set.
fn sink(
    props: &Properties,
    bootstrap_servers: Option<String>,
    producer_overrides: ClientOverrides,
    errors: &mut Vec<ConfigError>,
) -> SinkSpec {
    let choice = match props.get(SINK) {
        None if bootstrap_servers.is_some() => SinkChoice::Kafka,
        None => SinkChoice::Stdout,
        Some(text) => match parse_sink(text) {
            Ok(choice) => choice,
            Err(message) => {
                errors.push(props.invalid(SINK, &message));
                return SinkSpec::Stdout;
            }
        },
    };
    let spec = match choice {
        SinkChoice::Stdout => SinkSpec::Stdout,
        SinkChoice::File(path) => SinkSpec::File(path),
        SinkChoice::Kafka => match bootstrap_servers {
            Some(bootstrap_servers) => {
                return SinkSpec::Kafka {
                    bootstrap_servers,
                    producer_overrides,
                };
            }
            None => {
                if props.get(BOOTSTRAP_SERVERS).is_none() {
                    errors.push(props.invalid(SINK,
                        "sink=kafka needs bootstrap.servers (e.g. bootstrap.servers=localhost:9092)",
                    ));
                }
                return SinkSpec::Stdout;
            }
        },
    };
    for key in props.keys().filter(|k| k.starts_with(PRODUCER_PREFIX)) {
        tracing::warn!(
            file = %props.path().display(),
            key = %key,
            "{}: {key} has no effect with sink={spec} (producer settings apply to the Kafka sink); ignored",
            props.location(key)
        );
    }
    spec
}

/// `offset.storage` and the keys of the chosen store.
fn offset_storage(
    props: &Properties,
    bootstrap_servers: Option<&str>,
    client_settings: ClientOverrides,
    errors: &mut Vec<ConfigError>,
) -> Option<OffsetStorageSpec> {
    let kafka_keys = [
        OFFSET_STORAGE_TOPIC,
        OFFSET_STORAGE_PARTITIONS,
        OFFSET_STORAGE_REPLICATION_FACTOR,
    ];
    let postgres_keys = [OFFSET_STORAGE_POSTGRES_URL, OFFSET_STORAGE_POSTGRES_TABLE];
    // Keys of another store than the chosen one are errors: the file would not mean what it says.
    let foreign = |keys: &[&str], owner: &str, chosen: &str, errors: &mut Vec<ConfigError>| {
        for key in keys.iter().filter(|k| props.get(k).is_some()) {
            errors.push(props.invalid(key,
                &format!(
                    "is a setting of offset.storage={owner}, but offsets are stored in {chosen}; set \
                     offset.storage={owner} to keep them there, or remove this key"
                ),
            ));
        }
    };
    let storage = props
        .get(OFFSET_STORAGE)
        .map(|s| s.trim().to_ascii_lowercase());
    let chosen = match storage.as_deref() {
        None | Some("file") => "a file (offset.storage=file, the default)",
        Some("kafka") => "a Kafka topic (offset.storage=kafka)",
        Some("postgres") => "a PostgreSQL table (offset.storage=postgres)",
        Some(_) => "",
    };
    if !chosen.is_empty() {
        if storage.as_deref() != Some("kafka") {
            foreign(&kafka_keys, "kafka", chosen, errors);
        }
        if storage.as_deref() != Some("postgres") {
            foreign(&postgres_keys, "postgres", chosen, errors);
        }
    }
    match storage.as_deref() {
        None | Some("file") => match props.get(OFFSET_STORAGE_FILE).map(str::trim) {
            None => {
                errors.push(ConfigError::Missing {
                        path: props.path().to_path_buf(),
                        key: OFFSET_STORAGE_FILE.to_owned(),
                        hint: "set it to the file where source offsets are stored, e.g. \
                               offset.storage.file.filename=/var/lib/ferry/connect.offsets (or keep offsets \
                               in Kafka with offset.storage=kafka and offset.storage.topic, or in \
                               PostgreSQL with offset.storage=postgres and offset.storage.postgres.url)"
                            .to_owned(),
                    });
                None
            }
            Some("") => {
                errors.push(props.invalid(
                    OFFSET_STORAGE_FILE,
                    "must name a file, e.g. /var/lib/ferry/connect.offsets",
                ));
                None
            }
            Some(file) => Some(OffsetStorageSpec::File(PathBuf::from(file))),
        },
        Some("kafka") => {
            if props.get(OFFSET_STORAGE_FILE).is_some() {
                tracing::warn!(
                    file = %props.path().display(),
                    key = OFFSET_STORAGE_FILE,
                    "{}: {OFFSET_STORAGE_FILE} has no effect with offset.storage=kafka; ignored",
                    props.location(OFFSET_STORAGE_FILE)
                );
            }
            if bootstrap_servers.is_none() && props.get(BOOTSTRAP_SERVERS).is_none() {
                errors.push(props.invalid(OFFSET_STORAGE,
                    "offset.storage=kafka needs bootstrap.servers (e.g. bootstrap.servers=localhost:9092)",
                ));
            }
            let topic = match props.get(OFFSET_STORAGE_TOPIC).map(str::trim) {
                None => {
                    errors.push(ConfigError::Missing {
                        path: props.path().to_path_buf(),
                        key: OFFSET_STORAGE_TOPIC.to_owned(),
                        hint: "offset.storage=kafka needs the topic that holds the offsets, e.g. \
                               offset.storage.topic=connect-offsets (created compacted if missing)"
                            .to_owned(),
                    });
                    None
                }
                Some(topic) if !valid_topic(topic) => {
                    errors.push(props.invalid(OFFSET_STORAGE_TOPIC,
                        "must be a Kafka topic name: 1 to 249 characters of a-z, A-Z, 0-9, '.', '_', '-', \
                         and not \".\" or \"..\"",
                    ));
                    None
                }
                Some(topic) => Some(topic.to_owned()),
            };
            let partitions = int_setting(
                props,
                OFFSET_STORAGE_PARTITIONS,
                DEFAULT_OFFSET_STORAGE_PARTITIONS,
                |n| n >= 1,
                "must be a whole number of partitions, 1 or more (default 25)",
                errors,
            );
            let replication_factor = int_setting(
                props,
                OFFSET_STORAGE_REPLICATION_FACTOR,
                DEFAULT_OFFSET_STORAGE_REPLICATION_FACTOR,
                |n| n >= 1 || n == -1,
                "must be a whole number of replicas, 1 or more, or -1 for the broker's default (default 3)",
                errors,
            );
            Some(OffsetStorageSpec::Kafka(KafkaOffsetStorageSpec {
                bootstrap_servers: bootstrap_servers?.to_owned(),
                topic: topic?,
                partitions,
                replication_factor,
                client_overrides: client_settings,
            }))
        }
        Some("postgres") => {
            if props.get(OFFSET_STORAGE_FILE).is_some() {
                tracing::warn!(
                    file = %props.path().display(),
                    key = OFFSET_STORAGE_FILE,
                    "{}: {OFFSET_STORAGE_FILE} has no effect with offset.storage=postgres; ignored",
                    props.location(OFFSET_STORAGE_FILE)
                );
            }
            postgres_storage(props, errors).map(OffsetStorageSpec::Postgres)
        }
        Some(_) => {
            errors.push(props.invalid(
                OFFSET_STORAGE,
                "accepted values: file (default; offset.storage.file.filename), kafka \
                 (offset.storage.topic), postgres (offset.storage.postgres.url)",
            ));
            None
        }
    }
}

/// Kafka's topic name rules: 1..=249 chars of `[a-zA-Z0-9._-]`, not `.` or `..`.
fn valid_topic(topic: &str) -> bool {
    (1..=249).contains(&topic.len())
        && topic != "."
        && topic != ".."
        && topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// An integer setting (Java's `int`/`short` parsing: trimmed digits with an optional sign).
fn int_setting<T: FromStr + Copy>(
    props: &Properties,
    key: &str,
    default: T,
    accept: impl Fn(T) -> bool,
    message: &str,
    errors: &mut Vec<ConfigError>,
) -> T {
    let Some(text) = props.get(key) else {
        return default;
    };
    match text.trim().parse::<T>() {
        Ok(n) if accept(n) => n,
        _ => {
            errors.push(props.invalid(key, message));
            default
        }
    }
}

/// A duration in milliseconds: an integer from `min` to `i64::MAX` (Java's `long`), `default` if unset.
fn millis(
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
            errors.push(props.invalid(key, &message));
            Duration::from_millis(default)
        }
    }
}
