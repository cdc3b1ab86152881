//! Status topic records (`KafkaStatusBackingStore`): keys, values, and the status view.

use std::collections::BTreeMap;

use ferry_offsets::jackson;
use ferry_plugin::{Handoff, MAX_ACTIVE_TOPICS_PER_CONNECTOR, TopicStatus};
use serde_json::Value;

use super::{RecordError, int32_field, object, parse_json, write_field_name};

const CONNECTOR_STATUS_PREFIX: &str = "status-connector-";
const TASK_STATUS_PREFIX: &str = "status-task-";
const TOPIC_STATUS_PREFIX: &str = "status-topic-";
const TOPIC_STATUS_SEPARATOR: &str = ":connector-";

/// What a status-topic key names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StatusKey {
    /// `status-connector-<c>` (the name must not be empty).
    Connector(String),
    /// `status-task-<c>-<n>`.
    Task {
        /// The connector (may contain `-`).
        connector: String,
        /// The task index.
        task: i32,
    },
    /// `status-topic-<t>:connector-<c>` (KIP-558 active topics; values are not decoded here).
    Topic {
        /// The topic.
        topic: String,
        /// The connector.
        connector: String,
    },
}

impl StatusKey {
    /// Parses a key as Kafka Connect does; `None` for a key it discards.
    pub fn parse(key: &str) -> Option<Self> {
        if let Some(c) = key.strip_prefix(CONNECTOR_STATUS_PREFIX) {
            (!c.is_empty()).then(|| Self::Connector(c.to_owned()))
        } else if let Some(rest) = key.strip_prefix(TASK_STATUS_PREFIX) {
            let (connector, task) = rest.rsplit_once('-')?;
            Some(Self::Task {
                connector: connector.to_owned(),
                task: task.parse().ok()?,
            })
        } else if let Some(rest) = key.strip_prefix(TOPIC_STATUS_PREFIX) {
            let (topic, connector) = rest.split_once(':')?;
            let connector = format!(":{connector}");
            let connector = connector.strip_prefix(TOPIC_STATUS_SEPARATOR)?;
            (!topic.is_empty() && !connector.is_empty()).then(|| Self::Topic {
                topic: topic.to_owned(),
                connector: connector.to_owned(),
            })
        } else {
            None
        }
    }

    /// The key's text.
    pub fn to_key(&self) -> String {
        match self {
            Self::Connector(c) => format!("{CONNECTOR_STATUS_PREFIX}{c}"),
            Self::Task { connector, task } => format!("{TASK_STATUS_PREFIX}{connector}-{task}"),
            Self::Topic { topic, connector } => {
                format!("{TOPIC_STATUS_PREFIX}{topic}{TOPIC_STATUS_SEPARATOR}{connector}")
            }
        }
    }
}

/// A connector's or task's state (`AbstractStatus.State`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusState {
    /// Not assigned to a worker.
    Unassigned,
    /// Running.
    Running,
    /// Paused.
    Paused,
    /// Failed (see the trace).
    Failed,
    /// Deleted: never written as a value, a tombstone instead.
    Destroyed,
    /// Being restarted.
    Restarting,
    /// Stopped (connectors only).
    Stopped,
}

impl StatusState {
    /// The name Kafka writes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Unassigned => "UNASSIGNED",
            Self::Running => "RUNNING",
            Self::Paused => "PAUSED",
            Self::Failed => "FAILED",
            Self::Destroyed => "DESTROYED",
            Self::Restarting => "RESTARTING",
            Self::Stopped => "STOPPED",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        [
            Self::Unassigned,
            Self::Running,
            Self::Paused,
            Self::Failed,
            Self::Destroyed,
            Self::Restarting,
            Self::Stopped,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }
}

/// A status value: `{"state":…,"trace":…,"worker_id":…,"generation":…}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The state.
    pub state: StatusState,
    /// The failure's stack trace (FAILED), else `None`.
    pub trace: Option<String>,
    /// The worker that wrote it (`host:port`).
    pub worker_id: String,
    /// The group generation it was written in.
    pub generation: i32,
    /// A distributed Ferry worker's hand-over step (`"ferry_handoff"`, Ferry's own field: Kafka
    /// Connect reads status values as maps and ignores fields it does not know).
    pub handoff: Option<Handoff>,
}

/// The field Ferry adds to a status value taking part in a hand-over.
const HANDOFF_FIELD: &str = "ferry_handoff";

fn decode_handoff(key: &str, value: Option<&Value>) -> Result<Option<Handoff>, RecordError> {
    let map = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(map)) => map,
        Some(other) => {
            return Err(RecordError::new(
                key,
                format!("{HANDOFF_FIELD} must be an object, not {other}"),
            ));
        }
    };
    let worker = |field: &str| map.get(field).and_then(Value::as_str).map(str::to_owned);
    match (worker("released_to"), worker("claimed_after")) {
        (Some(to), None) => Ok(Some(Handoff::ReleasedTo(to))),
        (None, Some(after)) => Ok(Some(Handoff::ClaimedAfter(after))),
        _ => Err(RecordError::new(
            key,
            format!(
                "{HANDOFF_FIELD} must hold exactly one of \"released_to\" or \"claimed_after\" \
                 (a worker id string), not {}",
                Value::Object(map.clone())
            ),
        )),
    }
}

impl Status {
    /// Decodes a (non-null) status value.
    pub fn decode(key: &str, value: &[u8]) -> Result<Self, RecordError> {
        let json = parse_json(key, value)?;
        let map = object(key, &json)?;
        let string = |field: &str| map.get(field).and_then(Value::as_str);
        let state = string("state")
            .and_then(StatusState::from_name)
            .ok_or_else(|| {
                RecordError::new(
                    key,
                    format!("unknown or missing state {:?}", map.get("state")),
                )
            })?;
        let trace = match map.get("trace") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                return Err(RecordError::new(
                    key,
                    format!("trace must be a string, not {other}"),
                ));
            }
        };
        let worker_id = string("worker_id")
            .ok_or_else(|| RecordError::new(key, "field \"worker_id\" must be a string"))?
            .to_owned();
        let generation = int32_field(key, map, "generation")?;
        let handoff = decode_handoff(key, map.get(HANDOFF_FIELD))?;
        Ok(Self {
            state,
            trace,
            worker_id,
            generation,
            handoff,
        })
    }
}

/// The value to write for `status`; `None` (a tombstone) for DESTROYED, as Kafka writes it.
pub fn encode_status(status: &Status) -> Option<Vec<u8>> {
    if status.state == StatusState::Destroyed {
        return None;
    }
    let mut out = Vec::with_capacity(64);
    out.push(b'{');
    write_field_name(&mut out, "state", true);
    jackson::write_string(&mut out, status.state.name());
    write_field_name(&mut out, "trace", false);
    match &status.trace {
        Some(trace) => jackson::write_string(&mut out, trace),
        None => out.extend_from_slice(b"null"),
    }
    write_field_name(&mut out, "worker_id", false);
    jackson::write_string(&mut out, &status.worker_id);
    write_field_name(&mut out, "generation", false);
    out.extend_from_slice(status.generation.to_string().as_bytes());
    if let Some(handoff) = &status.handoff {
        write_field_name(&mut out, HANDOFF_FIELD, false);
        out.push(b'{');
        let (field, worker) = match handoff {
            Handoff::ReleasedTo(worker) => ("released_to", worker),
            Handoff::ClaimedAfter(worker) => ("claimed_after", worker),
        };
        write_field_name(&mut out, field, true);
        jackson::write_string(&mut out, worker);
        out.push(b'}');
    }
    out.push(b'}');
    Some(out)
}

/// Encodes an active topic (`serializeTopicStatus`): `{"topic":{"name":…,"connector":…,"task":…,
/// "discoverTimestamp":…}}` (a map holding one struct, fields in schema order).
pub fn encode_topic_status(status: &TopicStatus) -> Vec<u8> {
    let mut out = Vec::with_capacity(96);
    out.push(b'{');
    write_field_name(&mut out, "topic", true);
    out.push(b'{');
    write_field_name(&mut out, "name", true);
    jackson::write_string(&mut out, &status.topic);
    write_field_name(&mut out, "connector", false);
    jackson::write_string(&mut out, &status.connector);
    write_field_name(&mut out, "task", false);
    out.extend_from_slice(status.task.to_string().as_bytes());
    write_field_name(&mut out, "discoverTimestamp", false);
    out.extend_from_slice(status.discover_timestamp.to_string().as_bytes());
    out.extend_from_slice(b"}}");
    out
}

/// Decodes a (non-null) active-topic value (`parseTopicStatus`).
pub fn decode_topic_status(key: &str, value: &[u8]) -> Result<TopicStatus, RecordError> {
    let json = parse_json(key, value)?;
    let outer = object(key, &json)?;
    let inner = outer
        .get("topic")
        .ok_or_else(|| RecordError::new(key, "field \"topic\" is missing"))?;
    let map = object(key, inner)?;
    let string = |field: &str| {
        map.get(field)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| RecordError::new(key, format!("field {field:?} must be a string")))
    };
    let task = int32_field(key, map, "task")?;
    let discover_timestamp = map
        .get("discoverTimestamp")
        .and_then(Value::as_i64)
        .ok_or_else(|| RecordError::new(key, "field \"discoverTimestamp\" must be an integer"))?;
    Ok(TopicStatus {
        topic: string("name")?,
        connector: string("connector")?,
        task: u32::try_from(task)
            .map_err(|_| RecordError::new(key, format!("task {task} is negative")))?,
        discover_timestamp,
    })
}

/// Kafka's `putSafe` rule for a writer: write only if nothing is known, the known status is the
/// same worker's, or it is from this generation or an older one.
pub fn can_write_safely(current: Option<&Status>, new: &Status) -> bool {
    current.is_none_or(|c| c.worker_id == new.worker_id || c.generation <= new.generation)
}

/// The status topic folded in topic order (`KafkaStatusBackingStore.read`).
///
/// Every readable status replaces the previous one, except that a task's UNASSIGNED never replaces
/// its RUNNING of the same or a newer generation (KAFKA-12525: a worker that missed the newer
/// RUNNING still reports the task unassigned). Kafka deliberately accepts other statuses of older
/// generations, because generations start again from 1 when the whole group is recreated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatusView {
    connectors: BTreeMap<String, Status>,
    tasks: BTreeMap<String, BTreeMap<i32, Status>>,
    /// Active topics (KIP-558) by connector, then topic; at most
    /// [`MAX_ACTIVE_TOPICS_PER_CONNECTOR`] per connector (a newer one is skipped).
    topics: BTreeMap<String, BTreeMap<String, TopicStatus>>,
}

impl StatusView {
    /// An empty view.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one record. An unreadable key or value changes nothing and is returned as the error
    /// (Kafka logs and skips it). A topic-status record is kept under the connector and topic its
    /// key names (as Kafka does); past [`MAX_ACTIVE_TOPICS_PER_CONNECTOR`] a new topic is an error.
    pub fn apply_raw(&mut self, key: &str, value: Option<&[u8]>) -> Result<(), RecordError> {
        let parsed = StatusKey::parse(key)
            .ok_or_else(|| RecordError::new(key, "not a key of the status topic"))?;
        let status = value.map(|v| Status::decode(key, v)).transpose();
        match parsed {
            StatusKey::Connector(c) => match status? {
                // A connector's tombstone removes its tasks' statuses too.
                None => {
                    self.connectors.remove(&c);
                    self.tasks.remove(&c);
                }
                Some(s) => {
                    self.connectors.insert(c, s);
                }
            },
            StatusKey::Task { connector, task } => match status? {
                None => {
                    if let Some(tasks) = self.tasks.get_mut(&connector) {
                        tasks.remove(&task);
                    }
                }
                Some(s) => self.put_task(connector, task, s),
            },
            StatusKey::Topic { topic, connector } => match value {
                None => {
                    if let Some(topics) = self.topics.get_mut(&connector) {
                        topics.remove(&topic);
                        if topics.is_empty() {
                            self.topics.remove(&connector);
                        }
                    }
                }
                Some(v) => {
                    let status = decode_topic_status(key, v)?;
                    let topics = self.topics.entry(connector).or_default();
                    if !topics.contains_key(&topic)
                        && topics.len() >= MAX_ACTIVE_TOPICS_PER_CONNECTOR
                    {
                        return Err(RecordError::new(
                            key,
                            format!(
                                "the connector already has {MAX_ACTIVE_TOPICS_PER_CONNECTOR} active topics; \
                                 not kept (reset them with PUT /connectors/<name>/topics/reset)"
                            ),
                        ));
                    }
                    topics.insert(topic, status);
                }
            },
        }
        Ok(())
    }

    fn put_task(&mut self, connector: String, task: i32, status: Status) {
        let tasks = self.tasks.entry(connector).or_default();
        let stale = tasks.get(&task).is_some_and(|current| {
            status.state == StatusState::Unassigned
                && current.state == StatusState::Running
                && current.generation >= status.generation
        });
        if !stale {
            tasks.insert(task, status);
        }
    }

    /// A connector's active topic.
    pub fn topic(&self, connector: &str, topic: &str) -> Option<&TopicStatus> {
        self.topics.get(connector).and_then(|t| t.get(topic))
    }

    /// A connector's active topics, by topic name.
    pub fn topics(&self, connector: &str) -> impl Iterator<Item = &TopicStatus> {
        self.topics
            .get(connector)
            .into_iter()
            .flat_map(|t| t.values())
    }

    /// A connector's status.
    pub fn connector(&self, connector: &str) -> Option<&Status> {
        self.connectors.get(connector)
    }

    /// A task's status.
    pub fn task(&self, connector: &str, task: i32) -> Option<&Status> {
        self.tasks.get(connector).and_then(|t| t.get(&task))
    }

    /// A connector's task statuses, by task index.
    pub fn tasks(&self, connector: &str) -> impl Iterator<Item = (i32, &Status)> {
        self.tasks
            .get(connector)
            .into_iter()
            .flat_map(|t| t.iter().map(|(i, s)| (*i, s)))
    }
}
