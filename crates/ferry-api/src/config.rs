//! Helpers to read Kafka Connect's string configs into typed values, for connectors' `validate`,
//! `task_configs` and task `start` to share one parser.
//!
//! Every helper records at most one [`ConfigIssue`] for its key (in [`Issues`]) and returns `None` on
//! a bad value, so a parser collects one issue per bad key and reports them all at once.
//!
//! ```
//! use ferry_api::Config;
//! use ferry_api::config::{Issues, int_in_range, required_string};
//!
//! let config: Config = [("topic".to_owned(), " orders ".to_owned())].into_iter().collect();
//! let mut issues = Issues::default();
//! let topic = required_string(&config, "topic", &mut issues);
//! let batch = int_in_range(&config, "batch.size", Some(100), 1, 10_000, &mut issues);
//! assert_eq!(issues.finish(|| (topic, batch)), Ok((Some("orders".to_owned()), Some(100))));
//! ```

use crate::{Config, ConfigIssue, ConnectError, OffsetReadError};

/// Collects the issues found while parsing one configuration.
#[derive(Debug, Default)]
pub struct Issues(Vec<ConfigIssue>);

impl Issues {
    /// Records an issue about `key`.
    pub fn push(&mut self, key: &str, message: impl Into<String>) {
        self.0.push(ConfigIssue {
            key: key.to_owned(),
            message: message.into(),
        });
    }

    /// Records issues found elsewhere.
    pub fn extend(&mut self, issues: impl IntoIterator<Item = ConfigIssue>) {
        self.0.extend(issues);
    }

    /// Whether an issue about `key` was already recorded.
    pub fn has(&self, key: &str) -> bool {
        self.0.iter().any(|i| i.key == key)
    }

    /// Whether no issue was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The issues recorded (never empty when a parser gave up on a key).
    pub fn into_vec(self) -> Vec<ConfigIssue> {
        self.0
    }

    /// `Ok(value)` when no issue was recorded, the issues otherwise.
    ///
    /// # Errors
    /// At least one issue was recorded.
    pub fn finish<T>(self, value: impl FnOnce() -> T) -> Result<T, Vec<ConfigIssue>> {
        if self.0.is_empty() {
            Ok(value())
        } else {
            Err(self.0)
        }
    }
}

/// The trimmed value of `key`; `None` when absent or blank.
pub fn text<'a>(config: &'a Config, key: &str) -> Option<&'a str> {
    config.get(key).map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// A set, non-blank string value, trimmed like Kafka Connect's `ConfigDef` does; a blank value is an
/// issue ("must not be empty").
pub fn optional_string(config: &Config, key: &str, issues: &mut Issues) -> Option<String> {
    let value = config.get(key)?;
    let value = value.trim();
    if value.is_empty() {
        issues.push(key, "must not be empty");
        return None;
    }
    Some(value.to_owned())
}

/// A required, non-blank string value ("is required" when absent).
pub fn required_string(config: &Config, key: &str, issues: &mut Issues) -> Option<String> {
    if !config.contains_key(key) {
        issues.push(key, "is required");
        return None;
    }
    optional_string(config, key, issues)
}

/// An integer in `min..=max`, or `default` when the key is absent.
pub fn int_in_range(
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

/// An integer of at least `min`, or `default` when the key is absent.
pub fn int_at_least(
    config: &Config,
    key: &str,
    default: Option<i64>,
    min: i64,
    issues: &mut Issues,
) -> Option<i64> {
    let Some(raw) = config.get(key) else {
        return default;
    };
    match raw.trim().parse::<i64>() {
        Ok(v) if v >= min => Some(v),
        Ok(v) => {
            issues.push(key, format!("{v} is too small: must be at least {min}"));
            None
        }
        Err(_) => {
            issues.push(key, format!("{raw:?} is not an integer"));
            None
        }
    }
}

/// A comma-separated list: entries trimmed, blank ones dropped (Kafka Connect's `LIST` type).
pub fn list(value: Option<&str>) -> Vec<String> {
    value
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Turns the issues of a configuration the connector cannot run with into a fatal error:
/// `"<connector>: invalid <what>: <issues>; fix the connector configuration (check it with its validate)"`.
pub fn invalid_config(connector: &str, what: &str, issues: &[ConfigIssue]) -> ConnectError {
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
pub fn offsets_read_error(what: String, e: OffsetReadError) -> ConnectError {
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
