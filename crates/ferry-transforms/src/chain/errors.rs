//! A connector's error-handling keys for its transforms: `errors.retry.timeout`,
//! `errors.retry.delay.max.ms`, `errors.log.enable`, `errors.log.include.messages` (Kafka Connect's
//! names and defaults; `errors.tolerance` is read with the other common keys).

use std::time::Duration;

use ferry_api::Config;

/// `errors.retry.timeout`.
pub const ERRORS_RETRY_TIMEOUT: &str = "errors.retry.timeout";
/// `errors.retry.delay.max.ms`.
pub const ERRORS_RETRY_DELAY_MAX_MS: &str = "errors.retry.delay.max.ms";
/// `errors.log.enable`.
pub const ERRORS_LOG_ENABLE: &str = "errors.log.enable";
/// `errors.log.include.messages`.
pub const ERRORS_LOG_INCLUDE_MESSAGES: &str = "errors.log.include.messages";

/// How a task retries and reports a failing transform before `errors.tolerance` applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorHandling {
    /// `errors.retry.timeout` (default 0: no retry); `None`: `-1`, retry forever.
    pub retry_timeout: Option<Duration>,
    /// `errors.retry.delay.max.ms` (default 60000): the longest wait between two tries.
    pub retry_delay_max: Duration,
    /// `errors.log.enable` (default false): log every tolerated error.
    pub log: bool,
    /// `errors.log.include.messages` (default false): with the record's topic, key and value.
    pub log_messages: bool,
}

impl Default for ErrorHandling {
    fn default() -> Self {
        Self {
            retry_timeout: Some(Duration::ZERO),
            retry_delay_max: Duration::from_millis(60_000),
            log: false,
            log_messages: false,
        }
    }
}

impl ErrorHandling {
    /// Reads the keys from a connector configuration.
    ///
    /// # Errors
    /// One `(key, message)` per bad value.
    pub fn parse(config: &Config) -> Result<Self, Vec<(String, String)>> {
        let mut issues = Vec::new();
        let mut handling = Self::default();
        if let Some(v) = config.get(ERRORS_RETRY_TIMEOUT) {
            match v.trim().parse::<i64>() {
                Ok(-1) => handling.retry_timeout = None,
                Ok(ms) if ms >= 0 => {
                    handling.retry_timeout = Some(Duration::from_millis(ms.unsigned_abs()));
                }
                _ => issues.push((
                    ERRORS_RETRY_TIMEOUT.to_owned(),
                    "must be -1 (retry forever), 0 (no retry, the default) or a number of milliseconds"
                        .to_owned(),
                )),
            }
        }
        if let Some(v) = config.get(ERRORS_RETRY_DELAY_MAX_MS) {
            match v.trim().parse::<u64>() {
                Ok(ms) if ms >= 1 => handling.retry_delay_max = Duration::from_millis(ms),
                _ => issues.push((
                    ERRORS_RETRY_DELAY_MAX_MS.to_owned(),
                    "must be a number of milliseconds of at least 1 (default 60000)".to_owned(),
                )),
            }
        }
        for (key, slot) in [
            (ERRORS_LOG_ENABLE, &mut handling.log),
            (ERRORS_LOG_INCLUDE_MESSAGES, &mut handling.log_messages),
        ] {
            if let Some(v) = config.get(key) {
                match v.trim().to_ascii_lowercase().as_str() {
                    "true" => *slot = true,
                    "false" => *slot = false,
                    _ => issues.push((
                        key.to_owned(),
                        "must be true or false (default false)".to_owned(),
                    )),
                }
            }
        }
        if issues.is_empty() {
            Ok(handling)
        } else {
            Err(issues)
        }
    }

    /// The keys it reads.
    pub const KEYS: [&'static str; 4] = [
        ERRORS_RETRY_TIMEOUT,
        ERRORS_RETRY_DELAY_MAX_MS,
        ERRORS_LOG_ENABLE,
        ERRORS_LOG_INCLUDE_MESSAGES,
    ];
}
