//! The FileStreamSource configuration, parsed once for `validate`, `task_configs` and the task.

use ferry_api::{Config, ConfigIssue, ConfigKey, ConfigType};

use super::TASK_FILES;
use ferry_api::config::{Issues, int_in_range, optional_string, required_string};

pub(crate) const FILE: &str = "file";
pub(crate) const FILES: &str = "files";
pub(crate) const TOPIC: &str = "topic";
pub(crate) const BATCH_SIZE: &str = "batch.size";
pub(crate) const TRUNCATION_POLICY: &str = "file.truncation.policy";
pub(crate) const MAX_LINE_BYTES: &str = "max.line.bytes";

const DEFAULT_BATCH_SIZE: i64 = 2000;
/// 1 MiB: far above any log line, small enough that a file without newlines costs little memory.
const DEFAULT_MAX_LINE_BYTES: i64 = 1024 * 1024;
/// The largest limit: past it a single line would be a memory problem of its own.
const MAX_MAX_LINE_BYTES: i64 = 1024 * 1024 * 1024;

pub(crate) fn keys() -> Vec<ConfigKey> {
    vec![
        ConfigKey::optional(
            FILE,
            None,
            "The file to read. Exactly one of `file` and `files` must be set.",
        ),
        ConfigKey::optional(
            FILES,
            None,
            "A glob of files to read (e.g. `/var/log/app/*.log`), expanded when the tasks are configured and \
             spread over up to `tasks.max` tasks. Exactly one of `file` and `files` must be set.",
        ),
        ConfigKey::required(TOPIC, "The topic to write the lines to."),
        ConfigKey::optional(BATCH_SIZE, Some("2000"), "The most lines one poll returns.").of_type(ConfigType::Int),
        ConfigKey::optional(
            TRUNCATION_POLICY,
            Some("restart"),
            "What to do when a file was truncated in place (it is the same file, but shorter than the position \
             to read from or with other first bytes, as after logrotate's `copytruncate`): `restart` reading \
             that file from its beginning with a warning (the default), or `fail` the task. A file replaced by another one \
             (rotated with `mv`) is always read from its beginning, after the old one was read to its end.",
        ),
        ConfigKey::optional(
            MAX_LINE_BYTES,
            Some("1048576"),
            "The longest line, in bytes without its terminator (1 to 1073741824). A longer line is skipped \
             whole with a warning, and reading goes on at the next line; it is never emitted in pieces.",
        ).of_type(ConfigType::Int),
    ]
}

/// What to do when a file became shorter than the position to read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TruncationPolicy {
    /// Fail the task with an error explaining how to recover.
    Fail,
    /// Read the file again from byte 0, with a WARN.
    Restart,
}

/// Where the files come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// `file`: one path.
    File(String),
    /// `files`: a glob pattern.
    Glob(String),
}

/// A parsed connector configuration.
#[derive(Debug, Clone)]
pub(crate) struct FileSourceConfig {
    pub(crate) source: Source,
    pub(crate) topic: String,
    pub(crate) batch_size: usize,
    pub(crate) policy: TruncationPolicy,
    pub(crate) max_line_bytes: usize,
}

impl FileSourceConfig {
    /// Parses a connector (or task) configuration; one issue per bad key. Does not touch the disk.
    pub(crate) fn parse(config: &Config) -> Result<Self, Vec<ConfigIssue>> {
        let mut issues = Issues::default();
        let file = optional_string(config, FILE, &mut issues);
        let files = optional_string(config, FILES, &mut issues);
        let source = match (file, files) {
            (Some(file), None) => Some(Source::File(file)),
            (None, Some(pattern)) => match glob::Pattern::new(&pattern) {
                Ok(_) => Some(Source::Glob(pattern)),
                Err(e) => {
                    issues.push(
                        FILES,
                        format!("{pattern:?} is not a valid glob pattern: {e}"),
                    );
                    None
                }
            },
            (Some(_), Some(_)) => {
                issues.push(
                    FILES,
                    "set either `file` (one file) or `files` (a glob), not both",
                );
                None
            }
            (None, None) => {
                if !issues.has(FILE) && !issues.has(FILES) {
                    issues.push(
                        FILE,
                        "one of `file` (one file) or `files` (a glob) is required",
                    );
                }
                None
            }
        };
        let topic = required_string(config, TOPIC, &mut issues);
        let batch_size = int_in_range(
            config,
            BATCH_SIZE,
            Some(DEFAULT_BATCH_SIZE),
            1,
            i64::from(i32::MAX),
            &mut issues,
        );
        let policy = match config
            .get(TRUNCATION_POLICY)
            .map(|p| p.trim().to_ascii_lowercase())
            .as_deref()
        {
            Some("fail") => Some(TruncationPolicy::Fail),
            None | Some("restart") => Some(TruncationPolicy::Restart),
            Some(other) => {
                issues.push(
                    TRUNCATION_POLICY,
                    format!("{other:?} is not a policy: use `fail` or `restart`"),
                );
                None
            }
        };
        let max_line_bytes = int_in_range(
            config,
            MAX_LINE_BYTES,
            Some(DEFAULT_MAX_LINE_BYTES),
            1,
            MAX_MAX_LINE_BYTES,
            &mut issues,
        );
        let (Some(source), Some(topic), Some(batch_size), Some(policy), Some(max_line_bytes)) =
            (source, topic, batch_size, policy, max_line_bytes)
        else {
            return Err(issues.into_vec());
        };
        let batch_size = usize::try_from(batch_size).unwrap_or(usize::MAX);
        let max_line_bytes = usize::try_from(max_line_bytes).unwrap_or(usize::MAX);
        issues.finish(|| Self {
            source,
            topic,
            batch_size,
            policy,
            max_line_bytes,
        })
    }
}

/// A task's configuration: the connector's plus its share of the files.
#[derive(Debug, Clone)]
pub(crate) struct FileTaskConfig {
    pub(crate) files: Vec<String>,
    pub(crate) topic: String,
    pub(crate) batch_size: usize,
    pub(crate) policy: TruncationPolicy,
    pub(crate) max_line_bytes: usize,
}

impl FileTaskConfig {
    /// Parses a task configuration made by `task_configs` (`task.files`); a configuration with `file`
    /// and no `task.files` reads that one file.
    pub(crate) fn parse(config: &Config) -> Result<Self, Vec<ConfigIssue>> {
        let base = FileSourceConfig::parse(config)?;
        let files = match (config.get(TASK_FILES), &base.source) {
            (Some(json), _) => serde_json::from_str::<Vec<String>>(json).map_err(|e| {
                vec![ConfigIssue {
                    key: TASK_FILES.to_owned(),
                    message: format!("{json:?} is not a JSON array of file paths: {e}"),
                }]
            })?,
            (None, Source::File(file)) => vec![file.clone()],
            (None, Source::Glob(_)) => {
                return Err(vec![ConfigIssue {
                    key: TASK_FILES.to_owned(),
                    message: "is missing: a task of a `files` glob needs its share of the files, which the \
                              connector's task_configs sets"
                        .to_owned(),
                }]);
            }
        };
        Ok(Self {
            files,
            topic: base.topic,
            batch_size: base.batch_size,
            policy: base.policy,
            max_line_bytes: base.max_line_bytes,
        })
    }
}

/// Why a `files` glob cannot be expanded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GlobError {
    /// The pattern does not parse.
    #[error("{pattern:?} is not a valid glob pattern: {source}")]
    Pattern {
        /// The pattern.
        pattern: String,
        /// Why.
        source: glob::PatternError,
    },
    /// A directory on the way cannot be read.
    #[error(
        "cannot read {} while expanding {pattern:?}: {}; fix its permissions or narrow the pattern",
        source.path().display(),
        source.error()
    )]
    Read {
        /// The pattern.
        pattern: String,
        /// The path and the OS error.
        source: glob::GlobError,
    },
    /// A match cannot be a partition's `filename`.
    #[error(
        "the matched path {} is not valid UTF-8; rename it or narrow the pattern",
        path.display()
    )]
    NotUtf8 {
        /// The path.
        path: std::path::PathBuf,
    },
}

/// Expands a glob into the sorted, de-duplicated paths of the files (not directories) it matches.
///
/// # Errors
/// The pattern is invalid, a directory cannot be read, or a matched path is not valid UTF-8 (it could
/// not be stored as the partition's `filename`).
pub(crate) fn expand_glob(pattern: &str) -> Result<Vec<String>, GlobError> {
    let paths = glob::glob(pattern).map_err(|source| GlobError::Pattern {
        pattern: pattern.to_owned(),
        source,
    })?;
    let mut files = Vec::new();
    for entry in paths {
        let path = entry.map_err(|source| GlobError::Read {
            pattern: pattern.to_owned(),
            source,
        })?;
        if path.is_dir() {
            continue;
        }
        let name = path
            .to_str()
            .ok_or_else(|| GlobError::NotUtf8 { path: path.clone() })?;
        files.push(name.to_owned());
    }
    files.sort();
    files.dedup();
    Ok(files)
}
