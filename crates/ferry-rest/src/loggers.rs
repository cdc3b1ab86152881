//! `GET /admin/loggers`, `GET /admin/loggers/{name}`, `PUT /admin/loggers/{name}` (Kafka Connect's
//! `LoggingResource`, KIP-495): log levels changed at run time.
//!
//! Logger names are `tracing` targets: Rust module paths such as `ferry_runtime::worker`, matched by
//! prefix as `RUST_LOG` matches them (`ferry_runtime` covers `ferry_runtime::worker`). A Kafka-style
//! name (`org.apache.kafka.connect.runtime.WorkerSourceTask`) is accepted as an opaque target: it
//! changes nothing in Ferry's own log. `root` is the default level. The runtime keeps the levels
//! ([`LogLevels`]); the program applies them through [`LogFilterReload`] (in `ferry`: a
//! `tracing-subscriber` reload handle), so the runtime names no logging backend.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::{ApiError, json_response, parse_json};

/// The root logger's name.
pub const ROOT_LOGGER: &str = "root";
/// The most loggers with a level of their own (besides `root`); a `PUT` that would add another is
/// refused with `400`.
pub const MAX_LOGGERS: usize = 1_000;

/// Why log levels could not be applied to the process's log or written for the cluster. The
/// logging backend and the store are the program's, so their errors are kept boxed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogLevelError {
    /// The filter made from the levels is not valid for the logging backend.
    #[error("the filter {directives:?} is not valid: {source}")]
    InvalidFilter {
        /// The filter, in `RUST_LOG` syntax.
        directives: String,
        /// Why the backend refused it.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The process's log filter cannot be replaced.
    #[error("the log filter cannot be replaced: {source}")]
    Reload {
        /// Why the backend could not replace it.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A cluster-wide level could not be written where every worker reads it.
    #[error("{source}")]
    Write {
        /// The logger namespace.
        namespace: String,
        /// The level (a Kafka level name, upper case).
        level: String,
        /// Why the store could not write it (its message is the whole reason).
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Applies a filter, in `RUST_LOG` syntax (`info,ferry_runtime::worker=debug`), to the process's log.
pub trait LogFilterReload: Send + Sync {
    /// Replaces the filter with `directives`.
    ///
    /// # Errors
    /// The filter is not valid, or cannot be applied.
    fn reload(&self, directives: &str) -> Result<(), LogLevelError>;
}

/// Writes a cluster-wide log level (`PUT /admin/loggers/{name}?scope=cluster`) where every worker
/// reads and applies it (distributed: a `logger-cluster-<name>` record in the config topic).
pub trait ClusterLogLevels: Send + Sync {
    /// Writes `level` (a valid Kafka level name, upper case) for `namespace`.
    ///
    /// # Errors
    /// [`LogLevelError::Write`]: the level could not be written.
    fn put<'a>(
        &'a self,
        namespace: &'a str,
        level: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), LogLevelError>> + Send + 'a>>;
}

/// One logger's level: `{"level":"INFO","last_modified":…}` (milliseconds since the epoch of the last
/// change over REST; `null` if never changed).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LoggerLevel {
    /// Kafka Connect's level name (`TRACE`, `DEBUG`, `INFO`, `WARN`, `ERROR`, `FATAL`, `OFF`, `ALL`).
    pub level: String,
    /// When it was last changed over REST.
    pub last_modified: Option<i64>,
}

struct Levels {
    root: LoggerLevel,
    loggers: BTreeMap<String, LoggerLevel>,
    /// Directives of the starting filter that name no plain target (span or field filters): kept as
    /// they were.
    extra: Vec<String>,
}

/// The log levels of the process, and what changes them. See the [module documentation](self).
pub struct LogLevels {
    levels: Mutex<Levels>,
    reload: Box<dyn LogFilterReload>,
    cluster: std::sync::OnceLock<Arc<dyn ClusterLogLevels>>,
}

impl std::fmt::Debug for LogLevels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogLevels").finish_non_exhaustive()
    }
}

/// The `tracing` level a Kafka level name maps to (FATAL → error, ALL → trace); `None` if unknown.
fn tracing_level(kafka: &str) -> Option<&'static str> {
    Some(match kafka {
        "ALL" | "TRACE" => "trace",
        "DEBUG" => "debug",
        "INFO" => "info",
        "WARN" => "warn",
        "ERROR" | "FATAL" => "error",
        "OFF" => "off",
        _ => return None,
    })
}

/// Characters that would change the meaning of a `RUST_LOG` directive.
const RESERVED: &[char] = &[',', '=', '[', ']', '{', '}', '"', ' ', '\t', '\n', '\r'];

impl LogLevels {
    /// The levels of the filter the process started with (`RUST_LOG` syntax, e.g. `info` or
    /// `info,ferry_kafka=debug`), applied from now on through `reload`.
    pub fn new(initial: &str, reload: impl LogFilterReload + 'static) -> Self {
        let mut levels = Levels {
            root: LoggerLevel {
                level: "ERROR".to_owned(),
                last_modified: None,
            },
            loggers: BTreeMap::new(),
            extra: Vec::new(),
        };
        let parts: Vec<&str> = initial
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .collect();
        // RUST_LOG with directives but no bare level logs nothing else; an empty one logs errors.
        if !parts.is_empty() {
            levels.root.level = "OFF".to_owned();
        }
        for part in parts {
            let upper = part.to_ascii_uppercase();
            if tracing_level(&upper).is_some() {
                levels.root.level = upper;
                continue;
            }
            match part.split_once('=') {
                Some((target, level))
                    if !target.contains(RESERVED)
                        && tracing_level(&level.trim().to_ascii_uppercase()).is_some() =>
                {
                    levels.loggers.insert(
                        target.to_owned(),
                        LoggerLevel {
                            level: level.trim().to_ascii_uppercase(),
                            last_modified: None,
                        },
                    );
                }
                _ => levels.extra.push(part.to_owned()),
            }
        }
        Self {
            levels: Mutex::new(levels),
            reload: Box::new(reload),
            cluster: std::sync::OnceLock::new(),
        }
    }

    /// Where `?scope=cluster` levels are written (distributed mode); set once, later calls are
    /// ignored. Without it (standalone, the whole cluster) `scope=cluster` changes this worker.
    pub fn set_cluster(&self, cluster: Arc<dyn ClusterLogLevels>) {
        let _ = self.cluster.set(cluster);
    }

    fn lock(&self) -> MutexGuard<'_, Levels> {
        // A poisoned lock still holds levels that were applied (changes are committed after reload).
        self.levels.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `GET /admin/loggers`: `root` and every logger with a level of its own.
    pub fn all(&self) -> BTreeMap<String, LoggerLevel> {
        let levels = self.lock();
        let mut all = levels.loggers.clone();
        all.insert(ROOT_LOGGER.to_owned(), levels.root.clone());
        all
    }

    /// `GET /admin/loggers/{name}`: its own level, else (`last_modified` null) that of the longest
    /// logger naming a prefix of it, else root's.
    pub fn level(&self, logger: &str) -> LoggerLevel {
        let levels = self.lock();
        if logger.eq_ignore_ascii_case(ROOT_LOGGER) {
            return levels.root.clone();
        }
        if let Some(own) = levels.loggers.get(logger) {
            return own.clone();
        }
        let inherited = levels
            .loggers
            .iter()
            .filter(|(name, _)| logger.starts_with(name.as_str()))
            .max_by_key(|(name, _)| name.len())
            .map_or(&levels.root, |(_, level)| level);
        LoggerLevel {
            level: inherited.level.clone(),
            last_modified: None,
        }
    }

    /// `PUT /admin/loggers/{name}`: sets `logger` and every logger whose name starts with it (`root`:
    /// every logger) to `level`; answers their names, sorted.
    ///
    /// # Errors
    /// `404` for an unknown level (Kafka Connect's answer), `400` for a name that cannot be a target
    /// or one logger too many, `500` when the filter cannot be applied.
    pub fn set(&self, logger: &str, level: &str) -> Result<Vec<String>, ApiError> {
        let upper = valid_level(level)?;
        let is_root = logger.eq_ignore_ascii_case(ROOT_LOGGER);
        if !is_root && (logger.is_empty() || logger.contains(RESERVED)) {
            return Err(ApiError::bad_request(format!(
                "Logger name {logger:?} cannot be used: a logger is a tracing target (a Rust module path \
                 such as ferry_runtime::worker) and may not be empty or contain spaces or any of , = [ ] {{ }} \""
            )));
        }
        let mut levels = self.lock();
        if !is_root && !levels.loggers.contains_key(logger) && levels.loggers.len() >= MAX_LOGGERS {
            return Err(ApiError::bad_request(format!(
                "Cannot set the level of logger {logger}: {MAX_LOGGERS} loggers already have a level of \
                 their own; set the level of a common prefix (or root) instead"
            )));
        }
        let now = now_millis();
        let mut next = Levels {
            root: levels.root.clone(),
            loggers: levels.loggers.clone(),
            extra: levels.extra.clone(),
        };
        let mut changed = Vec::new();
        let mut put = |name: &str, entry: &mut LoggerLevel| {
            if entry.level != upper {
                entry.level.clone_from(&upper);
                entry.last_modified = Some(now);
            }
            changed.push(name.to_owned());
        };
        if is_root {
            put(ROOT_LOGGER, &mut next.root);
        } else {
            let inherited = self_level(&next, logger);
            let entry = next
                .loggers
                .entry(logger.to_owned())
                .or_insert(LoggerLevel {
                    level: inherited,
                    last_modified: None,
                });
            put(logger, entry);
        }
        for (name, entry) in next.loggers.iter_mut() {
            if name != logger && (is_root || name.starts_with(logger)) {
                put(name, entry);
            }
        }
        self.reload.reload(&directives(&next)).map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Cannot change the level of logger {logger}: {e}"),
            )
        })?;
        tracing::info!("set the level of logger {logger} and its children to {upper}");
        *levels = next;
        changed.sort();
        Ok(changed)
    }
}

/// The level in upper case; `404` (Kafka Connect's answer) when it is not one.
fn valid_level(level: &str) -> Result<String, ApiError> {
    let upper = level.to_ascii_uppercase();
    if tracing_level(&upper).is_none() {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("invalid log level '{level}'."),
        ));
    }
    Ok(upper)
}

/// The level a logger not yet listed has now (its longest listed prefix's, else root's).
fn self_level(levels: &Levels, logger: &str) -> String {
    levels
        .loggers
        .iter()
        .filter(|(name, _)| logger.starts_with(name.as_str()))
        .max_by_key(|(name, _)| name.len())
        .map_or(&levels.root, |(_, level)| level)
        .level
        .clone()
}

/// The `RUST_LOG` filter for `levels`.
fn directives(levels: &Levels) -> String {
    let level = |l: &LoggerLevel| tracing_level(&l.level).unwrap_or("info");
    let mut out = vec![level(&levels.root).to_owned()];
    out.extend(
        levels
            .loggers
            .iter()
            .map(|(name, l)| format!("{name}={}", level(l))),
    );
    out.extend(levels.extra.iter().cloned());
    out.join(",")
}

fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn levels(app: &AppState) -> Result<&Arc<LogLevels>, ApiError> {
    app.log_levels.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "Log levels cannot be changed in this process (no reloadable log filter was set up)",
        )
    })
}

/// `GET /admin/loggers`.
pub(crate) async fn list(State(app): State<AppState>) -> Result<Response, ApiError> {
    Ok(json_response(StatusCode::OK, &levels(&app)?.all()))
}

/// `GET /admin/loggers/{name}`.
pub(crate) async fn get(
    State(app): State<AppState>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    Ok(json_response(StatusCode::OK, &levels(&app)?.level(&name)))
}

/// `PUT /admin/loggers/{name}` with `{"level":"DEBUG"}` → `200` and the loggers changed. `?scope=`
/// `worker` (the default; an unknown scope is taken as it, with a WARN, as in Kafka Connect) or
/// `cluster` → `204`: written for every worker to apply (distributed), or applied here (standalone,
/// as Kafka Connect's standalone herder does).
pub(crate) async fn set(
    State(app): State<AppState>,
    Path(name): Path<String>,
    Query(params): Query<Vec<(String, String)>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let levels = levels(&app)?;
    let body = parse_json(body)?;
    let level = body
        .as_ref()
        .and_then(|b| b.get("level"))
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| {
            ApiError::bad_request("Desired 'level' parameter was not specified in request.")
        })?;
    let scope = params
        .iter()
        .rev()
        .find(|(k, _)| k == "scope")
        .map_or_else(|| "worker".to_owned(), |(_, v)| v.to_ascii_lowercase());
    if scope == "cluster" {
        let upper = valid_level(level)?;
        match levels.cluster.get() {
            Some(cluster) => cluster.put(&name, &upper).await.map_err(|e| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("Cannot write the cluster log level of {name}: {e}"),
                )
            })?,
            None => {
                levels.set(&name, &upper)?;
            }
        }
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    if scope != "worker" {
        tracing::warn!(
            "Received invalid scope '{scope}' in request to adjust logging level; will default to worker"
        );
    }
    let changed = levels.set(&name, level)?;
    Ok(json_response(StatusCode::OK, &changed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Default)]
    struct Applied(Arc<Mutex<Vec<String>>>);

    impl LogFilterReload for Applied {
        fn reload(&self, directives: &str) -> Result<(), LogLevelError> {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(directives.to_owned());
            Ok(())
        }
    }

    struct Refuses;

    impl LogFilterReload for Refuses {
        fn reload(&self, directives: &str) -> Result<(), LogLevelError> {
            Err(LogLevelError::InvalidFilter {
                directives: directives.to_owned(),
                source: "unknown level".into(),
            })
        }
    }

    #[test]
    fn a_filter_the_backend_refuses_is_a_500_saying_why_and_changes_nothing() {
        let levels = LogLevels::new("info", Refuses);
        let refused = levels.set("ferry", "DEBUG").expect_err("refused");
        assert_eq!(refused.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            refused.message,
            "Cannot change the level of logger ferry: the filter \"info,ferry=debug\" is not valid: \
             unknown level"
        );
        assert_eq!(levels.level("ferry").level, "INFO");
    }

    #[test]
    fn past_the_logger_limit_a_new_name_is_refused_and_set_ones_still_change() {
        let levels = LogLevels::new("info", Applied::default());
        for i in 0..MAX_LOGGERS {
            levels
                .set(&format!("target_{i}"), "DEBUG")
                .expect("under the limit");
        }
        let refused = levels.set("one_more", "DEBUG").expect_err("past the limit");
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert!(refused.message.contains("one_more"), "{}", refused.message);
        // A logger that has a level, and root, can still be changed.
        levels.set("target_0", "WARN").expect("already has a level");
        levels.set("root", "WARN").expect("root");
        assert_eq!(levels.level("target_0").level, "WARN");
    }

    #[test]
    fn levels_start_from_rust_log_and_change_with_their_children() {
        let applied = Applied::default();
        let levels = LogLevels::new("info,ferry_kafka=warn,[span]=trace", applied.clone());
        assert_eq!(levels.all()["root"].level, "INFO");
        assert_eq!(levels.all()["ferry_kafka"].level, "WARN");
        assert_eq!(levels.level("ferry_kafka::sink").level, "WARN");
        assert_eq!(levels.level("ferry_runtime").level, "INFO");

        let changed = levels.set("ferry", "debug").expect("valid");
        // `ferry` is a prefix of `ferry_kafka`, as RUST_LOG matches targets.
        assert_eq!(changed, vec!["ferry", "ferry_kafka"]);
        assert_eq!(levels.level("ferry_kafka").level, "DEBUG");
        assert!(levels.level("ferry").last_modified.is_some());
        let last = applied.0.lock().expect("lock").last().cloned();
        assert_eq!(
            last.as_deref(),
            Some("info,ferry=debug,ferry_kafka=debug,[span]=trace")
        );

        let changed = levels.set("root", "FATAL").expect("valid");
        assert_eq!(changed, vec!["ferry", "ferry_kafka", "root"]);
        let last = applied.0.lock().expect("lock").last().cloned();
        assert_eq!(
            last.as_deref(),
            Some("error,ferry=error,ferry_kafka=error,[span]=trace")
        );
        assert_eq!(levels.all()["root"].level, "FATAL");

        let refused = levels.set("x", "LOUD").expect_err("unknown level");
        assert_eq!(refused.status, StatusCode::NOT_FOUND);
        assert_eq!(refused.message, "invalid log level 'LOUD'.");
        let refused = levels.set("a,b", "INFO").expect_err("bad name");
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    }
}
