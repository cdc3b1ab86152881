//! # ferry-config
//!
//! Worker and connector configuration in Kafka Connect's properties syntax and key names, so an
//! existing `connect-standalone.properties` and connector file run unchanged where they can.
//!
//! [`Properties::load`] reads a file (keeping each key's line); [`WorkerConfig::from_properties`] and
//! [`ConnectorConfig::from_properties`] turn it into typed settings and report every problem of the
//! file at once as [`ConfigErrors`], each naming the file, key and line and saying what is accepted.
//!
//! ```
//! use ferry_config::{Properties, SinkSpec, WorkerConfig};
//!
//! let props = Properties::parse(
//!     "worker.properties",
//!     b"offset.storage.file.filename=/tmp/connect.offsets\nsink=file:/tmp/records.jsonl\n",
//! )?;
//! let worker = WorkerConfig::from_properties(&props)?;
//! assert_eq!(worker.sink, SinkSpec::file("/tmp/records.jsonl"));
//! assert_eq!(worker.offset_flush_interval.as_millis(), 60_000);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

//!
//! It owns the configuration of every room of a worker — the worker file (standalone and
//! distributed share [`CommonWorkerConfig`]), connector configurations, config providers, the REST
//! server's keys and TLS, exactly-once settings — and each key's one definition. It may use the
//! contracts (`ferry-plugin`), the built-in backends it chooses between (`ferry-builtin`) and the
//! transform chain a connector names (`ferry_transforms::chain`); the worker, the herders and the
//! REST server use it (`ferry_runtime::config` re-exports it).

mod connector;
mod connector_file;
pub mod exactly_once;
mod providers;
mod rest;
mod rest_security;
mod worker;

pub use connector::is_framework_key;
pub use connector::{
    CONNECTOR_CLASS, CONNECTOR_KEYS, ConnectorConfig, ERRORS_TOLERANCE, ErrorTolerance,
    MAX_CONNECTOR_KEYS, NAME, TASKS_MAX,
};
pub use connector_file::load_connector_file;
pub use ferry_plugin::{ClientOverrides, PRODUCER_PREFIX};
pub use ferry_plugin::{ConfigError, ConfigErrors, Properties};
pub use ferry_plugin::{ConverterSpec, HEADER_CONVERTER, KEY_CONVERTER, VALUE_CONVERTER};
pub use providers::{CONFIG_PROVIDERS, ConfigProviders, Resolved, scrub};
pub use rest::{
    CONNECTORS_FILE, CONNECTORS_FILE_KEY, LISTENERS, Listener, REST_AUTH_TOKEN, REST_HOST_NAME,
    REST_KEYS, REST_MAX_CONNECTIONS, REST_PORT, REST_READ_TIMEOUT_MS, RestConfig, Secret,
};
pub use rest_security::constant_time_eq;
pub use rest_security::{
    BasicCredentials, ClientAuth, CredentialsError, LISTENERS_HTTPS_PREFIX,
    REST_BASIC_AUTH_CREDENTIALS_FILE, RestTls,
};
pub use worker::{
    COMMON_WORKER_KEYS, CommonWorkerConfig, DEFAULT_OFFSET_FLUSH_INTERVAL_MS,
    DEFAULT_OFFSET_FLUSH_TIMEOUT_MS, DEFAULT_TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS,
    OFFSET_FLUSH_INTERVAL_MS, OFFSET_FLUSH_STRICT_BOUND, OFFSET_FLUSH_TIMEOUT_MS, OFFSET_STORAGE,
    OFFSET_STORAGE_FILE, OffsetStorageSpec, SINK, STANDALONE_KEYS, SinkSpec,
    TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS, TOPIC_TRACKING_ALLOW_RESET, TOPIC_TRACKING_ENABLE,
    WorkerConfig, millis, topic_tracking,
};

/// The connector key naming a connector's own offsets topic (KIP-618).
pub const OFFSETS_STORAGE_TOPIC: &str = "offsets.storage.topic";

/// `topic.tracking.enable` and `topic.tracking.allow.reset` (Kafka Connect's worker keys, both
/// default `true`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicTracking {
    /// `topic.tracking.enable`: tasks record the topics they write to, and
    /// `GET /connectors/<c>/topics` answers them (else 403).
    pub enable: bool,
    /// `topic.tracking.allow.reset`: `PUT /connectors/<c>/topics/reset` is allowed (else 403).
    pub allow_reset: bool,
}

impl Default for TopicTracking {
    fn default() -> Self {
        Self {
            enable: true,
            allow_reset: true,
        }
    }
}
