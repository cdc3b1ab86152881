//! Small helpers shared by the connectors to read Kafka Connect's string configs into typed values.
//!
//! Every helper records at most one [`ConfigIssue`] for its key and returns `None` on a bad value, so a
//! connector's `parse` collects one issue per bad key and the same parser serves `validate`,
//! `task_configs` and the task's `start`.

use ferry_api::{Config, ConfigIssue, ConnectError, OffsetReadError};

/// Collects the issues found while parsing one configuration.
#[derive(Debug, Default)]
pub(crate) struct Issues(Vec<ConfigIssue>);

impl Issues {
    /// Records an issue about `key`.
    pub(crate) fn push(&mut self, key: &str, message: impl Into<String>) {
        self.0.push(ConfigIssue {
            key: key.to_owned(),
            message: message.into(),
        });
    }

    /// Whether an issue about `key` was already recorded.
    pub(crate) fn has(&self, key: &str) -> bool {
        self.0.iter().any(|i| i.key == key)
    }

    /// The issues recorded (never empty when a parser gave up on a key).
    pub(crate) fn into_vec(self) -> Vec<ConfigIssue> {
        self.0
    }

    /// `Ok(value)` when no issue was recorded, the issues otherwise.
    pub(crate) fn finish<T>(self, value: impl FnOnce() -> T) -> Result<T, Vec<ConfigIssue>> {
        if self.0.is_empty() {
            Ok(value())
        } else {
            Err(self.0)
        }
    }
}

/// A set, non-blank string value, trimmed like Kafka Connect's `ConfigDef` does.
pub(crate) fn optional_string(config: &Config, key: &str, issues: &mut Issues) -> Option<String> {
    let value = config.get(key)?;
    let value = value.trim();
    if value.is_empty() {
        issues.push(key, "must not be empty");
        return None;
    }
    Some(value.to_owned())
}

/// A required, non-blank string value.
pub(crate) fn required_string(config: &Config, key: &str, issues: &mut Issues) -> Option<String> {
    if !config.contains_key(key) {
        issues.push(key, "is required");
        return None;
    }
    optional_string(config, key, issues)
}

/// An integer in `min..=max`, or `default` when the key is absent.
pub(crate) fn int_in_range(
    config: &Config,
    key: &str,
    default: Option<i64>,
    min: i64,
    max: i64,
    issues: &mut Issues,
) -> Option<i64> {
    let Some(raw) = config.get(key) else {
        return default;
    };
    match raw.trim().parse::<i64>() {
        Ok(v) if (min..=max).contains(&v) => Some(v),
        Ok(v) => {
            issues.push(
                key,
                format!("{v} is out of range: must be between {min} and {max}"),
            );
            None
        }
        Err(_) => {
            issues.push(key, format!("{raw:?} is not an integer"));
            None
        }
    }
}

/// Turns the issues of a configuration the connector cannot run with into a fatal error.
pub(crate) fn invalid_config(connector: &str, what: &str, issues: &[ConfigIssue]) -> ConnectError {
    let list = issues
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    ConnectError::fatal(format!(
        "{connector}: invalid {what}: {list}; fix the connector configuration (check it with its validate)"
    ))
}

/// Wraps a failed `offsets()` read at start: `what` names the read; retriable when the store says so.
pub(crate) fn offsets_read_error(what: String, e: OffsetReadError) -> ConnectError {
    let retriable = matches!(
        e,
        OffsetReadError::Store {
            retriable: true,
            ..
        }
    );
    let message = format!("{what} failed: {e}");
    let error = if retriable {
        ConnectError::retriable(message)
    } else {
        ConnectError::fatal(message)
    };
    error.with_source(e)
}
