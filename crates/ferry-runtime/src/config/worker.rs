//! The worker configuration: Kafka Connect's `connect-standalone.properties`, as far as Ferry uses it.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use super::error::{ConfigError, ConfigErrors};
use super::hint::unknown_key_hint;
use super::properties::Properties;

/// `offset.storage.file.filename`: where the standalone worker stores source offsets. Required.
pub const OFFSET_STORAGE_FILE: &str = "offset.storage.file.filename";
/// `offset.flush.interval.ms`: how often acknowledged offsets are committed.
pub const OFFSET_FLUSH_INTERVAL_MS: &str = "offset.flush.interval.ms";
/// `offset.flush.timeout.ms`: how long one offset commit may take.
pub const OFFSET_FLUSH_TIMEOUT_MS: &str = "offset.flush.timeout.ms";
/// `task.shutdown.graceful.timeout.ms`: how long a stopping task may wait for outstanding deliveries.
pub const TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS: &str = "task.shutdown.graceful.timeout.ms";
/// `sink`: where records go (Ferry-only key): `stdout` or `file:PATH`.
pub const SINK: &str = "sink";

const DEFAULT_OFFSET_FLUSH_INTERVAL_MS: u64 = 60_000;
const DEFAULT_OFFSET_FLUSH_TIMEOUT_MS: u64 = 5_000;
const DEFAULT_TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS: u64 = 5_000;

/// The keys Ferry's worker uses.
const KEYS: &[&str] = &[
    OFFSET_STORAGE_FILE,
    OFFSET_FLUSH_INTERVAL_MS,
    OFFSET_FLUSH_TIMEOUT_MS,
    TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS,
    SINK,
];

/// Kafka Connect worker keys that are accepted so an existing file runs, but do nothing in Ferry.
const IGNORED_KEYS: &[&str] = &[
    "key.converter",
    "value.converter",
    "key.converter.schemas.enable",
    "value.converter.schemas.enable",
    "internal.key.converter",
    "internal.value.converter",
    "plugin.path",
    "listeners",
    "rest.port",
    "rest.host.name",
];

const BOOTSTRAP_SERVERS: &str = "bootstrap.servers";

/// The standalone worker's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// `offset.storage.file.filename` (required): the offsets file. A relative path is relative to the
    /// process's working directory, as in Kafka Connect.
    pub offset_storage_file: PathBuf,
    /// `offset.flush.interval.ms` (default 60000, > 0): how often acknowledged offsets are committed.
    pub offset_flush_interval: Duration,
    /// `offset.flush.timeout.ms` (default 5000, > 0): how long one offset commit may take.
    pub offset_flush_timeout: Duration,
    /// `task.shutdown.graceful.timeout.ms` (default 5000, ≥ 0): how long a stopping task may wait.
    pub task_shutdown_graceful_timeout: Duration,
    /// `sink` (default `stdout`): where records go.
    pub sink: SinkSpec,
}

/// Where the worker sends records: the `sink` key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SinkSpec {
    /// `file:PATH`: JSON lines appended to `PATH`, acknowledged once synced. A relative path is
    /// relative to the process's working directory.
    File(PathBuf),
    /// `stdout`: JSON lines on standard output.
    #[default]
    Stdout,
}

impl FromStr for SinkSpec {
    type Err = String;

    /// Parses `stdout` or `file:PATH` (surrounding whitespace ignored); the error says what is accepted.
    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text == "stdout" {
            return Ok(SinkSpec::Stdout);
        }
        match text.strip_prefix("file:") {
            Some(path) if !path.is_empty() => Ok(SinkSpec::File(PathBuf::from(path))),
            Some(_) => Err("file: needs a path, e.g. sink=file:/var/lib/ferry/records.jsonl".to_owned()),
            None if text.starts_with("kafka") => {
                Err("the Kafka sink is not available in this build yet; use sink=file:PATH or sink=stdout".to_owned())
            }
            None => Err("accepted values: stdout, or file:PATH (e.g. file:/var/lib/ferry/records.jsonl)".to_owned()),
        }
    }
}

impl fmt::Display for SinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SinkSpec::File(path) => write!(f, "file:{}", path.display()),
            SinkSpec::Stdout => f.write_str("stdout"),
        }
    }
}

impl WorkerConfig {
    /// Reads the worker configuration, reporting every problem of the file at once.
    ///
    /// Unknown keys are errors, except Kafka Connect's converter, plugin and REST keys
    /// (`key.converter`, `plugin.path`, `listeners`, …), which are accepted with a WARN that they have
    /// no effect. `bootstrap.servers` is refused: the Kafka sink is not in this build yet.
    ///
    /// # Errors
    /// Every unknown key, missing required key and invalid value, each naming the file, key and line.
    pub fn from_properties(props: &Properties) -> Result<WorkerConfig, ConfigErrors> {
        let mut errors = Vec::new();
        let path = props.path();
        for key in props.keys() {
            let line = props.line_of(key);
            if KEYS.contains(&key) {
                continue;
            }
            if IGNORED_KEYS.contains(&key) {
                tracing::warn!(
                    file = %path.display(),
                    key = %key,
                    "{}: {key} has no effect in this build (Ferry writes record keys and values as JSON and \
                     has no plugin path or REST listener settings yet); ignored",
                    location(props, key)
                );
            } else if key == BOOTSTRAP_SERVERS {
                errors.push(ConfigError::Invalid {
                    path: path.to_path_buf(),
                    key: key.to_owned(),
                    line,
                    value: props.get(key).map(str::to_owned),
                    message: "the Kafka sink is not available in this build yet; use sink=file:PATH or sink=stdout"
                        .to_owned(),
                });
            } else {
                let candidates = KEYS.iter().chain(IGNORED_KEYS).copied();
                errors.push(ConfigError::UnknownKey {
                    path: path.to_path_buf(),
                    key: key.to_owned(),
                    line,
                    hint: unknown_key_hint(key, candidates, KEYS),
                });
            }
        }

        let offset_storage_file = match props.get(OFFSET_STORAGE_FILE).map(str::trim) {
            None => {
                errors.push(ConfigError::Missing {
                    path: path.to_path_buf(),
                    key: OFFSET_STORAGE_FILE.to_owned(),
                    hint: "set it to the file where source offsets are stored, e.g. \
                           offset.storage.file.filename=/var/lib/ferry/connect.offsets"
                        .to_owned(),
                });
                None
            }
            Some("") => {
                errors.push(invalid(
                    props,
                    OFFSET_STORAGE_FILE,
                    "must name a file, e.g. /var/lib/ferry/connect.offsets",
                ));
                None
            }
            Some(file) => Some(PathBuf::from(file)),
        };
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
        let sink = match props.get(SINK) {
            None => SinkSpec::Stdout,
            Some(text) => text.parse().unwrap_or_else(|message: String| {
                errors.push(invalid(props, SINK, &message));
                SinkSpec::Stdout
            }),
        };

        match offset_storage_file {
            Some(offset_storage_file) if errors.is_empty() => Ok(WorkerConfig {
                offset_storage_file,
                offset_flush_interval,
                offset_flush_timeout,
                task_shutdown_graceful_timeout,
                sink,
            }),
            _ => Err(ConfigErrors::in_file_order(errors)),
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
            errors.push(invalid(props, key, &message));
            Duration::from_millis(default)
        }
    }
}

fn invalid(props: &Properties, key: &str, message: &str) -> ConfigError {
    ConfigError::Invalid {
        path: props.path().to_path_buf(),
        key: key.to_owned(),
        line: props.line_of(key),
        value: props.get(key).map(str::to_owned),
        message: message.to_owned(),
    }
}

/// `path:line` of a key, for log messages.
pub(crate) fn location(props: &Properties, key: &str) -> String {
    match props.line_of(key) {
        Some(line) => format!("{}:{line}", props.path().display()),
        None => props.path().display().to_string(),
    }
}
