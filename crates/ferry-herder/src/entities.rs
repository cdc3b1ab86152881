//! What the herder answers, in Kafka Connect's REST JSON shapes (field names and order as Kafka
//! Connect's Jackson output).

use ferry_api::Config;
use serde::Serialize;
use serde_json::value::RawValue;

/// `GET /`: the server's version.
#[derive(Debug, Clone, Serialize)]
pub struct ServerInfo {
    /// Ferry's version.
    pub version: String,
    /// The source revision, when known at build time.
    pub commit: String,
    /// The id of the Kafka cluster the worker's sink writes to; `null` without one.
    pub kafka_cluster_id: Option<String>,
}

pub use ferry_runtime::TaskId;

/// `GET /connectors/{name}`: the connector's configuration and its tasks.
#[derive(Debug, Clone, Serialize)]
pub struct ConnectorInfo {
    /// The connector.
    pub name: String,
    /// Its configuration, as given.
    pub config: Config,
    /// Its tasks (none while stopped or failed).
    pub tasks: Vec<TaskId>,
    /// Always `source`.
    #[serde(rename = "type")]
    pub kind: &'static str,
}

/// `GET /connectors/{name}/tasks`: one task's configuration.
#[derive(Debug, Clone, Serialize)]
pub struct TaskInfo {
    /// The task.
    pub id: TaskId,
    /// Its configuration.
    pub config: Config,
}

/// The state of a connector: `RUNNING`, `PAUSED`, `STOPPED`, `FAILED`, `RESTARTING`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateInfo {
    /// The state.
    pub state: String,
    /// The worker running it (`host:port` of the REST listener).
    pub worker_id: String,
    /// The connector plugin's version (Kafka Connect 4.x reports it); absent for an unknown class.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why it failed; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// The state of one task: `UNASSIGNED`, `RUNNING`, `PAUSED`, `FAILED`, `RESTARTING`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskStateInfo {
    /// The task number.
    pub id: usize,
    /// The state.
    pub state: String,
    /// The worker running it.
    pub worker_id: String,
    /// The connector plugin's version (Kafka Connect 4.x reports it); absent for an unknown class.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why it failed; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// `GET /connectors/{name}/status`.
#[derive(Debug, Clone, Serialize)]
pub struct ConnectorStateInfo {
    /// The connector.
    pub name: String,
    /// The connector's state.
    pub connector: StateInfo,
    /// Each task's state, by task number.
    pub tasks: Vec<TaskStateInfo>,
    /// Always `source`.
    #[serde(rename = "type")]
    pub kind: &'static str,
}

/// `GET /connector-plugins`: one plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginInfo {
    /// The class name (Kafka Connect's fully qualified name where there is one).
    #[serde(rename = "class")]
    pub class: String,
    /// `source`, `converter` or `header_converter`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The plugin's version.
    pub version: String,
}

/// `PUT /connector-plugins/{plugin}/config/validate`: the validation of one configuration.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigInfos {
    /// The connector class validated.
    pub name: String,
    /// How many errors were found, over all keys.
    pub error_count: usize,
    /// The groups of the keys.
    pub groups: Vec<String>,
    /// One entry per key: its definition and its value with errors.
    pub configs: Vec<ConfigInfo>,
}

/// One key of a [`ConfigInfos`].
#[derive(Debug, Clone, Serialize)]
pub struct ConfigInfo {
    /// What the key is.
    pub definition: ConfigKeyInfo,
    /// The value given (or the default) and its errors.
    pub value: ConfigValueInfo,
}

/// A key's definition, as Kafka Connect's `ConfigKeyInfo`.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigKeyInfo {
    /// The key.
    pub name: String,
    /// `STRING`, `INT`, `CLASS`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Whether it must be set.
    pub required: bool,
    /// The default, as text.
    pub default_value: Option<String>,
    /// `HIGH`, `MEDIUM`, `LOW`.
    pub importance: &'static str,
    /// What it does.
    pub documentation: String,
    /// Its group (`Common`, `Error Handling`; `null` for a connector's own keys).
    pub group: Option<&'static str>,
    /// Its place in the group (`-1` when ungrouped); Kafka Connect's JSON name.
    #[serde(rename = "order_in_group")]
    pub order: i32,
    /// `SHORT`, `MEDIUM`, `LONG`, `NONE`.
    pub width: &'static str,
    /// A display name.
    pub display_name: String,
    /// Keys whose validity depends on this one.
    pub dependents: Vec<String>,
}

/// A key's value and its errors, as Kafka Connect's `ConfigValueInfo`.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigValueInfo {
    /// The key.
    pub name: String,
    /// The value given, else the default, else `null`.
    pub value: Option<String>,
    /// Suggested values (none).
    pub recommended_values: Vec<String>,
    /// What is wrong with the value.
    pub errors: Vec<String>,
    /// Always `true`.
    pub visible: bool,
}

/// `GET /connectors/{name}/offsets`: `{"offsets":[{"partition":…,"offset":…}]}`.
#[derive(Debug, Serialize)]
pub struct ConnectorOffsets {
    /// One entry per partition with a live offset.
    pub offsets: Vec<ConnectorOffset>,
}

/// One partition and its offset, as JSON exactly as Ferry encodes them for the store.
#[derive(Debug, Serialize)]
pub struct ConnectorOffset {
    /// The partition map (`null` for Kafka Connect's null partition).
    pub partition: Box<RawValue>,
    /// The offset map.
    pub offset: Box<RawValue>,
}

/// `{"message":…}`: the answer to an offsets change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    /// What was done.
    pub message: String,
}
