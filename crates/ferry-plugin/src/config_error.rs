//! What can be wrong with a configuration file.

use std::fmt;
use std::path::{Path, PathBuf};

use ferry_api::HIDDEN;

/// One problem with a configuration file. Every message names the file, the key and (when known) the
/// line as `path:line`, and says what is accepted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("{}: cannot read the configuration file: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not valid properties syntax.
    #[error("{}: {message}", at(path, *line))]
    Parse {
        /// The file.
        path: PathBuf,
        /// The 1-based line, when known.
        line: Option<usize>,
        /// What is wrong and how to write it instead.
        message: String,
    },
    /// A key this configuration does not know.
    #[error("{}: unknown key {key:?}; {hint}", at(path, *line))]
    UnknownKey {
        /// The file.
        path: PathBuf,
        /// The key as written.
        key: String,
        /// The 1-based line, when known.
        line: Option<usize>,
        /// A close accepted key (`did you mean "tasks.max"?`) or the list of accepted keys.
        hint: String,
    },
    /// A Kafka Connect setting Ferry does not implement yet (see `not_implemented_connector_key`).
    #[error(
        "{}: {key:?} is a Kafka Connect setting that Ferry does not implement yet ({what}); remove it, \
         or keep this configuration on Kafka Connect",
        at(path, *line)
    )]
    NotImplemented {
        /// The file.
        path: PathBuf,
        /// The key as written.
        key: String,
        /// The 1-based line, when known.
        line: Option<usize>,
        /// The Kafka Connect feature the key belongs to.
        what: String,
    },
    /// A required key is not set.
    #[error("{}: missing required key {key:?}: {hint}", path.display())]
    Missing {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// What the key is for and what to set it to.
        hint: String,
    },
    /// A configuration has more keys than a connector may have.
    #[error(
        "{}: {count} keys are set; a connector configuration may have at most {limit} (this limit keeps \
         an oversized request from stalling the worker)",
        path.display()
    )]
    TooManyKeys {
        /// The file (or request).
        path: PathBuf,
        /// How many keys are set.
        count: usize,
        /// The most accepted.
        limit: usize,
    },
    /// A key's value is not accepted.
    #[error("{}: {} {key:?}: {message}", at(path, *line), shown(value.as_deref()))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// The 1-based line, when known.
        line: Option<usize>,
        /// The value as messages may show it, decided by whoever declares the key when the error is
        /// made: as written for a public key, `[hidden]` / redacted for a key declared secret
        /// (`ConfigKey::secret`, `embeds_secret`), `[hidden]` for a key nobody declares
        /// ([`Properties::invalid_secret`](crate::Properties::invalid_secret),
        /// [`Properties::invalid_undeclared`](crate::Properties::invalid_undeclared)); `None` when the
        /// key is not set. Shown as it is: nothing here guesses from the key's name.
        value: Option<String>,
        /// What is wrong and what is accepted.
        message: String,
    },
}

impl ConfigError {
    /// The configuration file the problem is in.
    pub fn path(&self) -> &Path {
        match self {
            ConfigError::Io { path, .. }
            | ConfigError::Parse { path, .. }
            | ConfigError::UnknownKey { path, .. }
            | ConfigError::NotImplemented { path, .. }
            | ConfigError::Missing { path, .. }
            | ConfigError::TooManyKeys { path, .. }
            | ConfigError::Invalid { path, .. } => path,
        }
    }

    /// The key the problem is about, if any.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Io { .. }
            | ConfigError::Parse { .. }
            | ConfigError::TooManyKeys { .. } => None,
            ConfigError::UnknownKey { key, .. }
            | ConfigError::NotImplemented { key, .. }
            | ConfigError::Missing { key, .. }
            | ConfigError::Invalid { key, .. } => Some(key),
        }
    }

    /// The 1-based line the problem is on, when known.
    pub fn line(&self) -> Option<usize> {
        match self {
            ConfigError::Parse { line, .. }
            | ConfigError::UnknownKey { line, .. }
            | ConfigError::NotImplemented { line, .. }
            | ConfigError::Invalid { line, .. } => *line,
            ConfigError::Io { .. }
            | ConfigError::Missing { .. }
            | ConfigError::TooManyKeys { .. } => None,
        }
    }
}

/// Every problem found in a configuration, reported together.
///
/// `Display` lists one problem per line.
#[derive(Debug)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    /// The problems in file order; those without a line (missing keys) last.
    pub fn in_file_order(mut errors: Vec<ConfigError>) -> Self {
        errors.sort_by_key(|e| (e.line().is_none(), e.line()));
        ConfigErrors(errors)
    }

    /// The problems, in file order (problems without a line last).
    pub fn iter(&self) -> std::slice::Iter<'_, ConfigError> {
        self.0.iter()
    }

    /// How many problems there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is no problem.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl From<ConfigError> for ConfigErrors {
    fn from(error: ConfigError) -> Self {
        ConfigErrors(vec![error])
    }
}

impl<'a> IntoIterator for &'a ConfigErrors {
    type Item = &'a ConfigError;
    type IntoIter = std::slice::Iter<'a, ConfigError>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// `path:line`, or `path` when the line is unknown.
fn at(path: &Path, line: Option<usize>) -> String {
    match line {
        Some(line) => format!("{}:{line}", path.display()),
        None => path.display().to_string(),
    }
}

/// `invalid value "x" for` (the value as its key's declaration lets it be shown), or `invalid` when
/// the key is not set.
fn shown(value: Option<&str>) -> String {
    match value {
        None => "invalid".to_owned(),
        // Hidden by its key's declared secrecy (or because nobody declares the key): shown unquoted.
        Some(HIDDEN) => format!("invalid value {HIDDEN} for"),
        Some(value) => format!("invalid value {value:?} for"),
    }
}
