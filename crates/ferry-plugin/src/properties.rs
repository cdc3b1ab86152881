//! A properties file as Kafka Connect reads it, keeping each key's line for error messages.

use std::fmt;
use std::path::{Path, PathBuf};

use ferry_api::{Config, ConfigKey};
use indexmap::IndexMap;

use crate::config_error::ConfigError;
use crate::syntax;

/// The keys and values of one properties file (`java.util.Properties` syntax), with 1-based lines.
///
/// Syntax exactly as `java.util.Properties.load` reads it: `#` and `!` comments, `key=value`,
/// `key: value` and `key value`, `\` line continuations (also at the end of the file), `\uXXXX` and
/// `\t \n \r \f` escapes. A key set twice keeps its last value (as in Java)
/// and logs a WARN naming both lines.
///
/// Encoding: a file that is valid UTF-8 is read as UTF-8 (a leading byte-order mark is skipped);
/// anything else as ISO-8859-1, Java's encoding for properties files. ASCII files —
/// every file Kafka Connect reads correctly — read the same either way.
///
/// `Debug` shows the path and the keys, never the values (they may hold passwords).
#[derive(Clone)]
pub struct Properties {
    path: PathBuf,
    /// Key → value, 1-based line (0: unknown), in order of first appearance. A map, so that a request
    /// with many keys is read in linear time (a list made each insert scan every key before it).
    entries: IndexMap<String, (String, usize)>,
}

impl Properties {
    /// Reads and parses a properties file.
    ///
    /// # Errors
    /// [`ConfigError::Io`] if it cannot be read, [`ConfigError::Parse`] (with the line) for a malformed
    /// `\uXXXX` escape or half a surrogate pair.
    pub fn load(path: impl AsRef<Path>) -> Result<Properties, ConfigError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Properties::parse(path, &bytes)
    }

    /// Parses properties text; `path_label` names it in messages.
    ///
    /// # Errors
    /// [`ConfigError::Parse`] (with the line) for a malformed `\uXXXX` escape, or one that makes half
    /// of a UTF-16 surrogate pair (Java keeps it; a Rust string cannot).
    pub fn parse(path_label: impl Into<PathBuf>, text: &[u8]) -> Result<Properties, ConfigError> {
        let path = path_label.into();
        let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
        // Java reads the bytes as ISO-8859-1: each byte is the character of that code point.
        let decoded = match std::str::from_utf8(text) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => std::borrow::Cow::Owned(text.iter().map(|&b| char::from(b)).collect()),
        };
        let entries = syntax::parse(&decoded).map_err(|e| ConfigError::Parse {
            path: path.clone(),
            line: Some(e.line),
            message: e.problem.to_string(),
        })?;
        let mut properties = Properties {
            path,
            entries: IndexMap::new(),
        };
        for entry in entries {
            properties.insert(entry.key, entry.value, entry.line);
        }
        Ok(properties)
    }

    /// Properties from key/value pairs (a REST request body, a test); `path_label` names them in
    /// messages. Lines are unknown.
    pub fn from_pairs<K, V>(
        path_label: impl Into<PathBuf>,
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Properties
    where
        K: Into<String>,
        V: Into<String>,
    {
        let mut properties = Properties {
            path: path_label.into(),
            entries: IndexMap::new(),
        };
        for (key, value) in pairs {
            properties.insert(key.into(), value.into(), 0);
        }
        properties
    }

    fn insert(&mut self, key: String, value: String, line: usize) {
        match self.entries.get_mut(&key) {
            Some(entry) => {
                let path = self.path.display();
                if line > 0 {
                    tracing::warn!(
                        file = %path,
                        key = %key,
                        "{path}:{line}: key {key:?} was already set on line {}; the last value (line {line}) is used",
                        entry.1
                    );
                } else {
                    tracing::warn!(file = %path, key = %key, "{path}: key {key:?} is set twice; the last value is used");
                }
                *entry = (value, line);
            }
            None => {
                self.entries.insert(key, (value, line));
            }
        }
    }

    /// The value of `key`, as written (Java's parsing strips the whitespace before a value, not after).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.get(key).map(|(value, _)| value.as_str())
    }

    /// The 1-based line `key` is set on (its last occurrence); `None` if unset or the line is unknown.
    pub fn line_of(&self, key: &str) -> Option<usize> {
        self.entries
            .get(key)
            .map(|&(_, line)| line)
            .filter(|&line| line > 0)
    }

    /// The keys, each once, in order of first appearance.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// The keys and values, in order of first appearance.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries
            .iter()
            .map(|(key, (value, _))| (key.as_str(), value.as_str()))
    }

    /// How many distinct keys are set.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no key is set.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every key and value, as a connector configuration.
    pub fn to_config(&self) -> Config {
        self.iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    /// The file the properties came from (or the label given to [`Properties::from_pairs`]).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `path:line` of `key` (`path` when its line is unknown), for log messages.
    pub fn location(&self, key: &str) -> String {
        match self.line_of(key) {
            Some(line) => format!("{}:{line}", self.path.display()),
            None => self.path.display().to_string(),
        }
    }

    /// [`ConfigError::Invalid`] for a declared `key` as set here: its value only as the key's secrecy
    /// allows ([`ConfigKey::shown`]: `[hidden]` for a secret).
    pub fn invalid_secret(&self, key: &ConfigKey, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.clone(),
            key: key.name.to_owned(),
            line: self.line_of(key.name),
            value: self
                .get(key.name)
                .map(|value| key.shown(value).into_owned()),
            message: message.into(),
        }
    }

    /// [`ConfigError::Invalid`] for `key` as set here, with `message` saying what is accepted, showing
    /// the value as written: for a key its caller declares public (a port, a topic, a class name).
    /// A key declared secret goes through [`Properties::invalid_secret`], one nobody declares through
    /// [`Properties::invalid_undeclared`].
    pub fn invalid(&self, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.clone(),
            key: key.to_owned(),
            line: self.line_of(key),
            value: self.get(key).map(str::to_owned),
            message: message.into(),
        }
    }

    /// [`ConfigError::NotImplemented`] for `key` as set here: a Kafka Connect key Ferry does not
    /// implement, `what` saying what it would do.
    pub fn not_implemented(&self, key: &str, what: &str) -> ConfigError {
        ConfigError::NotImplemented {
            path: self.path.clone(),
            key: key.to_owned(),
            line: self.line_of(key),
            what: what.to_owned(),
        }
    }

    /// [`ConfigError::Invalid`] for a `key` that nobody declares (so nothing says whether its value is
    /// secret): its value is never shown, only `[hidden]` when it is set.
    pub fn invalid_undeclared(&self, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.clone(),
            key: key.to_owned(),
            line: self.line_of(key),
            value: self.get(key).map(|_| ferry_api::HIDDEN.to_owned()),
            message: message.into(),
        }
    }
}

impl fmt::Debug for Properties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Properties")
            .field("path", &self.path)
            .field("keys", &self.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_secret_with_an_ordinary_name_is_hidden_in_errors_and_debug() {
        let props = Properties::from_pairs("w", [("api.key", "hunter2")]);
        let key = ConfigKey::optional("api.key", None, "an API key").secret();
        let error = props.invalid_secret(&key, "too short");
        let shown = format!("{error} {error:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert_eq!(
            error.to_string(),
            "w: invalid value [hidden] for \"api.key\": too short"
        );
    }

    #[test]
    fn the_value_of_a_key_nobody_declares_is_never_echoed() {
        // An ordinary name: no guess would hide it, and no declaration says it is public.
        let props = Properties::from_pairs("w", [("endpoint", "https://u:hunter2@host")]);
        let error = props.invalid_undeclared("endpoint", "not a key of this connector");
        let shown = format!("{error} {error:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert_eq!(
            error.to_string(),
            "w: invalid value [hidden] for \"endpoint\": not a key of this connector"
        );
        let unset = props.invalid_undeclared("other", "required");
        assert_eq!(unset.to_string(), "w: invalid \"other\": required");
    }
}
