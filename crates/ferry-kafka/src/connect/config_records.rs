//! Config topic records (`KafkaConfigBackingStore`): keys and values.

use std::collections::BTreeMap;

use ferry_offsets::jackson;
use serde_json::Value;

use super::{RecordError, int32_field, object, parse_json, write_field_name};

const TARGET_STATE_PREFIX: &str = "target-state-";
const CONNECTOR_PREFIX: &str = "connector-";
const TASK_PREFIX: &str = "task-";
const COMMIT_TASKS_PREFIX: &str = "commit-";
const TASK_COUNT_RECORD_PREFIX: &str = "tasks-fencing-";
const SESSION_KEY_KEY: &str = "session-key";
const RESTART_PREFIX: &str = "restart-connector-";
const LOGGER_CLUSTER_PREFIX: &str = "logger-cluster-";

/// What a config-topic key names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConfigRecordKey {
    /// `connector-<c>`: a connector's configuration.
    Connector(String),
    /// `task-<c>-<n>`: one task's configuration, applied only by a later commit.
    Task {
        /// The connector (may contain `-`).
        connector: String,
        /// The task index.
        task: i32,
    },
    /// `commit-<c>`: applies the buffered task configs of `<c>`.
    Commit(String),
    /// `target-state-<c>`.
    TargetState(String),
    /// `tasks-fencing-<c>` (KIP-618 task count record).
    TaskCount(String),
    /// `session-key` (KIP-507).
    SessionKey,
    /// `restart-connector-<c>`.
    Restart(String),
    /// `logger-cluster-<namespace>`.
    LoggerCluster(String),
}

impl ConfigRecordKey {
    /// Parses a key as Kafka Connect does, prefixes tested in its order; `None` for a key it discards
    /// (unknown prefix, or a `task-` key without `-<int>` at its end).
    pub fn parse(key: &str) -> Option<Self> {
        let own = |rest: &str| rest.to_owned();
        if let Some(rest) = key.strip_prefix(TARGET_STATE_PREFIX) {
            Some(Self::TargetState(own(rest)))
        } else if let Some(rest) = key.strip_prefix(CONNECTOR_PREFIX) {
            Some(Self::Connector(own(rest)))
        } else if let Some(rest) = key.strip_prefix(TASK_PREFIX) {
            // The index is after the last '-': connector names may contain '-'.
            let (connector, task) = rest.rsplit_once('-')?;
            let task = task.parse().ok()?;
            Some(Self::Task {
                connector: connector.to_owned(),
                task,
            })
        } else if let Some(rest) = key.strip_prefix(COMMIT_TASKS_PREFIX) {
            Some(Self::Commit(own(rest)))
        } else if let Some(rest) = key.strip_prefix(RESTART_PREFIX) {
            Some(Self::Restart(own(rest)))
        } else if let Some(rest) = key.strip_prefix(TASK_COUNT_RECORD_PREFIX) {
            Some(Self::TaskCount(own(rest)))
        } else if key == SESSION_KEY_KEY {
            Some(Self::SessionKey)
        } else {
            key.strip_prefix(LOGGER_CLUSTER_PREFIX)
                .map(|rest| Self::LoggerCluster(own(rest)))
        }
    }

    /// The key's text.
    pub fn to_key(&self) -> String {
        match self {
            Self::Connector(c) => format!("{CONNECTOR_PREFIX}{c}"),
            Self::Task { connector, task } => format!("{TASK_PREFIX}{connector}-{task}"),
            Self::Commit(c) => format!("{COMMIT_TASKS_PREFIX}{c}"),
            Self::TargetState(c) => format!("{TARGET_STATE_PREFIX}{c}"),
            Self::TaskCount(c) => format!("{TASK_COUNT_RECORD_PREFIX}{c}"),
            Self::SessionKey => SESSION_KEY_KEY.to_owned(),
            Self::Restart(c) => format!("{RESTART_PREFIX}{c}"),
            Self::LoggerCluster(ns) => format!("{LOGGER_CLUSTER_PREFIX}{ns}"),
        }
    }
}

/// A connector's target state (`TargetState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetState {
    /// Running.
    Started,
    /// Paused: tasks exist but do not poll.
    Paused,
    /// Stopped: no tasks (KIP-875; unknown to workers before Kafka 3.5).
    Stopped,
}

impl TargetState {
    /// The name Kafka writes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Started => "STARTED",
            Self::Paused => "PAUSED",
            Self::Stopped => "STOPPED",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        match name {
            "STARTED" => Some(Self::Started),
            "PAUSED" => Some(Self::Paused),
            "STOPPED" => Some(Self::Stopped),
            _ => None,
        }
    }
}

/// A `restart-connector-<c>` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartRequest {
    /// The connector.
    pub connector: String,
    /// Restart only the failed instances.
    pub only_failed: bool,
    /// Restart the tasks too.
    pub include_tasks: bool,
}

/// A decoded config-topic record; `None` payloads are tombstones.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigRecord {
    /// `connector-<c>`; `None`: the connector was deleted.
    Connector(String, Option<BTreeMap<String, String>>),
    /// `task-<c>-<n>`; Kafka ignores a null task config, so a tombstone is kept only to be ignored.
    Task(String, i32, Option<BTreeMap<String, String>>),
    /// `commit-<c>` with its task count; `None` for a null value (ignored, as in Kafka).
    Commit(String, Option<i32>),
    /// `target-state-<c>`; `None`: removed (written with the connector's deletion).
    TargetState(String, Option<TargetState>),
    /// `tasks-fencing-<c>` with its task count.
    TaskCount(String, Option<i32>),
    /// `restart-connector-<c>`; `None` for a null value.
    Restart(Option<RestartRequest>),
    /// A key Kafka Connect knows but Ferry does not fold (`session-key`, `logger-cluster-…`).
    Other(ConfigRecordKey),
}

impl ConfigRecord {
    /// Decodes a record as Kafka Connect reads it. An unknown key or unreadable value is an error;
    /// Kafka logs and skips such records, and so should the caller.
    pub fn decode(key: &str, value: Option<&[u8]>) -> Result<Self, RecordError> {
        let kind = ConfigRecordKey::parse(key)
            .ok_or_else(|| RecordError::new(key, "not a key of the config topic"))?;
        let json = value.map(|v| parse_json(key, v)).transpose()?;
        // JsonConverter reads JSON `null` as a null value too.
        let json = json.filter(|v| !v.is_null());
        Ok(match kind {
            ConfigRecordKey::Connector(c) => {
                let props = json.map(|v| properties(key, &v)).transpose()?;
                Self::Connector(c, props)
            }
            ConfigRecordKey::Task { connector, task } => {
                let props = json.map(|v| properties(key, &v)).transpose()?;
                Self::Task(connector, task, props)
            }
            ConfigRecordKey::Commit(c) => {
                let tasks = json
                    .map(|v| int32_field(key, object(key, &v)?, "tasks"))
                    .transpose()?;
                Self::Commit(c, tasks)
            }
            ConfigRecordKey::TargetState(c) => {
                let state = json.map(|v| target_state(key, &v)).transpose()?;
                Self::TargetState(c, state)
            }
            ConfigRecordKey::TaskCount(c) => {
                let count = json
                    .map(|v| int32_field(key, object(key, &v)?, "task-count"))
                    .transpose()?;
                Self::TaskCount(c, count)
            }
            ConfigRecordKey::Restart(c) => {
                let request = json.map(|v| restart(key, c, &v)).transpose()?;
                Self::Restart(request)
            }
            other @ (ConfigRecordKey::SessionKey | ConfigRecordKey::LoggerCluster(_)) => {
                Self::Other(other)
            }
        })
    }
}

/// A cluster log level's value (`LOGGER_LEVEL_V0`): `{"level":"DEBUG"}`.
pub fn encode_logger_level(level: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(24);
    out.push(b'{');
    write_field_name(&mut out, "level", true);
    ferry_offsets::jackson::write_string(&mut out, level);
    out.push(b'}');
    out
}

/// Reads a (non-null) cluster log level's value.
pub fn decode_logger_level(key: &str, value: &[u8]) -> Result<String, RecordError> {
    let json = parse_json(key, value)?;
    object(key, &json)?
        .get("level")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| RecordError::new(key, "field \"level\" must be a string"))
}

/// `{"properties":{…}}`: string values; a null value is dropped (Ferry's configs have no nulls).
fn properties(key: &str, value: &Value) -> Result<BTreeMap<String, String>, RecordError> {
    let props = object(key, value)?
        .get("properties")
        .and_then(Value::as_object)
        .ok_or_else(|| RecordError::new(key, "field \"properties\" must be a JSON object"))?;
    let mut out = BTreeMap::new();
    for (name, v) in props {
        match v {
            Value::String(s) => {
                out.insert(name.clone(), s.clone());
            }
            Value::Null => {}
            other => {
                return Err(RecordError::new(
                    key,
                    format!("property {name:?} must be a string, not {other}"),
                ));
            }
        }
    }
    Ok(out)
}

/// `state.v2` when it is a string, else `state` (records of workers before KIP-875).
fn target_state(key: &str, value: &Value) -> Result<TargetState, RecordError> {
    let map = object(key, value)?;
    let name = map
        .get("state.v2")
        .and_then(Value::as_str)
        .or_else(|| map.get("state").and_then(Value::as_str))
        .ok_or_else(|| RecordError::new(key, "neither \"state.v2\" nor \"state\" is a string"))?;
    TargetState::from_name(name)
        .ok_or_else(|| RecordError::new(key, format!("unknown target state {name:?}")))
}

/// Missing or non-boolean fields default to false, as in Kafka (which logs a warning).
fn restart(key: &str, connector: String, value: &Value) -> Result<RestartRequest, RecordError> {
    let map = object(key, value)?;
    let flag = |f: &str| map.get(f).and_then(Value::as_bool).unwrap_or(false);
    Ok(RestartRequest {
        connector,
        only_failed: flag("only-failed"),
        include_tasks: flag("include-tasks"),
    })
}

/// `{"properties":{…}}`, the value of `connector-<c>` and `task-<c>-<n>`. Properties are written in
/// key order (Kafka writes its map's order; readers never depend on it).
pub fn encode_properties(properties: &BTreeMap<String, String>) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    out.push(b'{');
    write_field_name(&mut out, "properties", true);
    out.push(b'{');
    for (i, (name, value)) in properties.iter().enumerate() {
        write_field_name(&mut out, name, i == 0);
        jackson::write_string(&mut out, value);
    }
    out.extend_from_slice(b"}}");
    out
}

/// `{"tasks":N}`, the value of `commit-<c>`.
pub fn encode_commit(tasks: i32) -> Vec<u8> {
    format!("{{\"tasks\":{tasks}}}").into_bytes()
}

/// `{"task-count":N}`, the value of `tasks-fencing-<c>`.
pub fn encode_task_count(tasks: i32) -> Vec<u8> {
    format!("{{\"task-count\":{tasks}}}").into_bytes()
}

/// `{"state":…,"state.v2":…}`; STOPPED is written as PAUSED in `state`, for workers that know
/// only STARTED and PAUSED.
pub fn encode_target_state(state: TargetState) -> Vec<u8> {
    let legacy = match state {
        TargetState::Stopped => TargetState::Paused,
        s => s,
    };
    format!(
        "{{\"state\":\"{}\",\"state.v2\":\"{}\"}}",
        legacy.name(),
        state.name()
    )
    .into_bytes()
}

/// `{"include-tasks":…,"only-failed":…}`, the value of `restart-connector-<c>`.
pub fn encode_restart(request: &RestartRequest) -> Vec<u8> {
    format!(
        "{{\"include-tasks\":{},\"only-failed\":{}}}",
        request.include_tasks, request.only_failed
    )
    .into_bytes()
}
