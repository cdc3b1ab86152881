//! FileStreamSource: Kafka Connect's file source, with byte-exact positions and truncation detection.
//!
//! Configuration (Kafka Connect's names): exactly one of `file` (one path) or `files` (a glob), `topic`,
//! `batch.size` (most lines one poll returns, default 2000), `file.truncation.policy` (`fail`, the
//! default, or `restart`) and `max.line.bytes` (default 1 MiB).
//!
//! Offsets are Kafka Connect's: partition `{"filename": <path as configured or as the glob expanded
//! it>}`, offset `{"position": <byte offset right after the line terminator>}`, plus the identity of the
//! file the position is in (`dev`, `ino`, `fp`, `fp_len`), so that a rotated file is never read from
//! another file's position. Unlike Kafka Connect, positions count bytes, so multi-byte UTF-8 never
//! makes them drift, and a file that became shorter than its committed position is reported instead
//! of silently read from a wrong place. Only regular files are read.

mod config;
mod identity;
mod kafka_connect;
mod tail;
mod task;

use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConnectError, SourceConnector, SourceOffset, SourcePartition,
    SourceTask,
};
use serde::{Deserialize, Serialize};

pub use task::FileStreamSourceTask;
pub(crate) use task::IDLE_SLEEP;

use self::config::{FileSourceConfig, Source, expand_glob};
use ferry_api::config::invalid_config;

/// The source partition of one file: `{"filename": <path>}`, Kafka Connect's key. `filename` is the
/// path exactly as configured in `file`, or as the `files` glob expanded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilePartition {
    /// The path of the file.
    pub filename: String,
}

/// The source offset of one file: `{"position": <bytes>}`, the byte offset right after the line
/// terminator of the last line emitted (0: nothing read yet), then the identity of the file it is a
/// position in. Offsets without the identity (Kafka Connect's own) apply to whatever file is at the
/// path, and their `position` is read as Kafka Connect counts it: UTF-16 code units from the file's
/// start, converted to bytes (the same number for ASCII; see `kafka_connect.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileOffset {
    /// Byte position to resume reading at.
    pub position: i64,
    /// The file's device number (its bits as a signed 64-bit integer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<i64>,
    /// The file's inode number (its bits as a signed 64-bit integer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ino: Option<i64>,
    /// CRC-32C of the file's first `fp_len` bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp: Option<i64>,
    /// How many leading bytes `fp` covers: `min(position, 1024)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp_len: Option<i64>,
}

/// The identity fields of an offset, besides `position`, and the range each must be in.
const IDENTITY_FIELDS: [(&str, i64, i64); 4] = [
    ("dev", i64::MIN, i64::MAX),
    ("ino", i64::MIN, i64::MAX),
    ("fp", 0, u32::MAX as i64),
    ("fp_len", 0, i64::MAX),
];

/// The name of the task-config key holding a task's share of the files, as a JSON array of strings.
pub const TASK_FILES: &str = "task.files";

/// Kafka Connect's FileStreamSource connector: streams the lines of text files, tailing them.
///
/// Class names: `FileStreamSource` and `org.apache.kafka.connect.file.FileStreamSourceConnector`.
/// With `file`, one task reads the file. With `files`, the glob is expanded (sorted) when the task
/// configurations are made, and the files are spread round-robin over `min(tasks.max, files)` tasks;
/// files created later are not picked up until the connector is reconfigured.
#[derive(Debug, Default, Clone, Copy)]
pub struct FileStreamSourceConnector;

impl FileStreamSourceConnector {
    /// The connector.
    pub fn new() -> Self {
        Self
    }
}

impl SourceConnector for FileStreamSourceConnector {
    fn config_keys(&self) -> Vec<ConfigKey> {
        config::keys()
    }

    /// Supported when reading files, as Kafka Connect's: a file's byte position is its offset, so a
    /// task resumes exactly after the last committed line (as long as files are only appended to,
    /// or rotated as the `files` mode expects).
    fn exactly_once_support(&self, config: &Config) -> ferry_api::ExactlyOnceSupport {
        match FileSourceConfig::parse(config) {
            Ok(_) => ferry_api::ExactlyOnceSupport::Supported,
            Err(_) => ferry_api::ExactlyOnceSupport::Unsupported,
        }
    }

    /// Returns one issue per bad key. Setting both `file` and `files` is reported on `files`, setting
    /// neither on `file`; a `files` glob that matches no file is reported on `files`; a `file` that
    /// exists but is not a regular file (a FIFO, a device, a directory) on `file`.
    fn validate(&self, config: &Config) -> Vec<ConfigIssue> {
        let mut issues = FileSourceConfig::parse(config).err().unwrap_or_default();
        let file = config
            .get(config::FILE)
            .map(|p| p.trim())
            .filter(|p| !p.is_empty());
        if let Some(file) = file
            && !issues.iter().any(|i| i.key == config::FILE)
            && let Ok(meta) = std::fs::metadata(file)
            && let Err(identity::OpenError::NotRegular(kind)) = identity::check_regular(&meta)
        {
            issues.push(ConfigIssue {
                key: config::FILE.to_owned(),
                message: format!(
                    "{file:?} is {kind}, not a regular file; FileStreamSource reads regular files only"
                ),
            });
        }
        let pattern = config
            .get(config::FILES)
            .map(|p| p.trim())
            .filter(|p| !p.is_empty());
        if let Some(pattern) = pattern
            && !issues.iter().any(|i| i.key == config::FILES)
        {
            match expand_glob(pattern) {
                Ok(files) if files.is_empty() => issues.push(ConfigIssue {
                    key: config::FILES.to_owned(),
                    message: format!("the glob {pattern:?} matches no file; create the files first or fix the pattern"),
                }),
                Ok(_) => {}
                Err(error) => issues.push(ConfigIssue {
                    key: config::FILES.to_owned(),
                    message: error.to_string(),
                }),
            }
        }
        issues
    }

    fn task_configs(&self, config: &Config, max_tasks: usize) -> Result<Vec<Config>, ConnectError> {
        let parsed = FileSourceConfig::parse(config).map_err(|issues| {
            invalid_config("FileStreamSource", "connector configuration", &issues)
        })?;
        let files = match &parsed.source {
            Source::File(file) => vec![file.clone()],
            Source::Glob(pattern) => {
                let files = expand_glob(pattern).map_err(|message| {
                    ConnectError::fatal(format!(
                        "FileStreamSource: cannot expand files={pattern:?}: {message}"
                    ))
                })?;
                if files.is_empty() {
                    return Err(ConnectError::fatal(format!(
                        "FileStreamSource: the glob files={pattern:?} matches no file; create the files first or \
                         fix the pattern"
                    )));
                }
                files
            }
        };
        let tasks = max_tasks.clamp(1, files.len());
        let mut shares: Vec<Vec<String>> = vec![Vec::new(); tasks];
        for (i, file) in files.into_iter().enumerate() {
            shares[i % tasks].push(file);
        }
        shares
            .into_iter()
            .map(|share| {
                let json = serde_json::to_string(&share).map_err(|e| {
                    ConnectError::fatal(format!(
                        "FileStreamSource: cannot encode the task's file list: {e}"
                    ))
                })?;
                let mut task = config.clone();
                task.insert(TASK_FILES.to_owned(), json);
                // Kafka Connect's worker adds the task's class to every task configuration and
                // refuses one without it: with it, a Kafka Connect worker can start the tasks
                // Ferry's config topic holds (`task.files` it ignores).
                task.insert(
                    "task.class".to_owned(),
                    "org.apache.kafka.connect.file.FileStreamSourceTask".to_owned(),
                );
                Ok(task)
            })
            .collect()
    }

    fn create_task(&self) -> Box<dyn SourceTask> {
        Box::new(FileStreamSourceTask::new())
    }

    /// Validates like Kafka Connect's FileStreamSourceConnector: every partition must hold a string
    /// `filename`; every offset that is not a reset (`None`) must hold `position`, a non-negative
    /// integer. The identity fields (`dev`, `ino`, `fp`, `fp_len`) are optional, but integers when
    /// set. Returns `Ok(true)` when all entries are valid.
    fn alter_offsets(
        &self,
        _config: &Config,
        offsets: &[(SourcePartition, Option<SourceOffset>)],
    ) -> Result<bool, ConnectError> {
        for (partition, offset) in offsets {
            if partition.get("filename").and_then(|v| v.as_str()).is_none() {
                return Err(ConnectError::fatal(format!(
                    "FileStreamSource: partition {partition} must contain the key \"filename\" with a string value \
                     (the path of the file), like {{\"filename\":\"/var/log/app.log\"}}"
                )));
            }
            let Some(offset) = offset else { continue };
            for (key, min, max) in IDENTITY_FIELDS {
                let Some(value) = offset.get(key) else {
                    continue;
                };
                if !value.as_i64().is_some_and(|v| (min..=max).contains(&v)) {
                    return Err(ConnectError::fatal(format!(
                        "FileStreamSource: offset {offset} of partition {partition}: \"{key}\" must be an integer \
                         between {min} and {max}, not {value}; leave it out to resume at \"position\" in whatever \
                         file is at the path"
                    )));
                }
            }
            match offset.get("position").map(|v| (v, v.as_i64())) {
                Some((_, Some(position))) if position >= 0 => {}
                Some((_, Some(position))) => {
                    return Err(ConnectError::fatal(format!(
                        "FileStreamSource: offset {offset} of partition {partition}: \"position\" must be a \
                         non-negative byte position, not {position}"
                    )));
                }
                Some((value, None)) => {
                    return Err(ConnectError::fatal(format!(
                        "FileStreamSource: offset {offset} of partition {partition}: \"position\" must be an \
                         integer byte position, not a {} ({value})",
                        value.type_name()
                    )));
                }
                None => {
                    return Err(ConnectError::fatal(format!(
                        "FileStreamSource: offset {offset} of partition {partition} must be null (a reset) or \
                         contain the key \"position\", like {{\"position\":0}}"
                    )));
                }
            }
        }
        Ok(true)
    }
}
