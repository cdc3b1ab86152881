//! The keys of the distributed worker file: Kafka Connect's names (`DistributedConfig.java`).

pub use ferry_kafka::{
    BOOTSTRAP_SERVERS, OFFSET_STORAGE_PARTITIONS, OFFSET_STORAGE_REPLICATION_FACTOR,
    OFFSET_STORAGE_TOPIC,
};
pub use ferry_runtime::config::LISTENERS;
use ferry_runtime::config::{
    OFFSET_FLUSH_INTERVAL_MS, OFFSET_FLUSH_TIMEOUT_MS, TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS,
};

/// `group.id`: the group the cluster's workers join (required).
pub const GROUP_ID: &str = "group.id";
/// `config.storage.topic`: the compacted, one-partition topic of connector configurations (required).
pub const CONFIG_STORAGE_TOPIC: &str = "config.storage.topic";
/// `config.storage.replication.factor` (default 3; -1: the broker's default).
pub const CONFIG_STORAGE_REPLICATION_FACTOR: &str = "config.storage.replication.factor";
/// `status.storage.topic`: the compacted topic of connector and task statuses (required).
pub const STATUS_STORAGE_TOPIC: &str = "status.storage.topic";
/// `status.storage.partitions` (default 5; -1: the broker's default).
pub const STATUS_STORAGE_PARTITIONS: &str = "status.storage.partitions";
/// `status.storage.replication.factor` (default 3; -1: the broker's default).
pub const STATUS_STORAGE_REPLICATION_FACTOR: &str = "status.storage.replication.factor";
/// `session.timeout.ms` (default 10000).
pub const SESSION_TIMEOUT_MS: &str = "session.timeout.ms";
/// `heartbeat.interval.ms` (default 3000).
pub const HEARTBEAT_INTERVAL_MS: &str = "heartbeat.interval.ms";
/// `rebalance.timeout.ms` (default 60000).
pub const REBALANCE_TIMEOUT_MS: &str = "rebalance.timeout.ms";
/// `scheduled.rebalance.max.delay.ms` (default 300000).
pub const SCHEDULED_REBALANCE_MAX_DELAY_MS: &str = "scheduled.rebalance.max.delay.ms";
/// `rest.advertised.host.name`: the host other workers reach this one at.
pub const REST_ADVERTISED_HOST_NAME: &str = "rest.advertised.host.name";
/// `rest.advertised.port`: the port other workers reach this one at.
pub const REST_ADVERTISED_PORT: &str = "rest.advertised.port";
/// `rest.advertised.listener`: `http` or `https`, the protocol of the listener other workers forward
/// to.
pub const REST_ADVERTISED_LISTENER: &str = "rest.advertised.listener";

/// Every plain key read here (the REST keys and converter keys are read by their own parsers).
pub(super) const KEYS: &[&str] = &[
    BOOTSTRAP_SERVERS,
    GROUP_ID,
    CONFIG_STORAGE_TOPIC,
    CONFIG_STORAGE_REPLICATION_FACTOR,
    OFFSET_STORAGE_TOPIC,
    OFFSET_STORAGE_PARTITIONS,
    OFFSET_STORAGE_REPLICATION_FACTOR,
    STATUS_STORAGE_TOPIC,
    STATUS_STORAGE_PARTITIONS,
    STATUS_STORAGE_REPLICATION_FACTOR,
    SESSION_TIMEOUT_MS,
    HEARTBEAT_INTERVAL_MS,
    REBALANCE_TIMEOUT_MS,
    SCHEDULED_REBALANCE_MAX_DELAY_MS,
    REST_ADVERTISED_HOST_NAME,
    REST_ADVERTISED_PORT,
    REST_ADVERTISED_LISTENER,
    OFFSET_FLUSH_INTERVAL_MS,
    OFFSET_FLUSH_TIMEOUT_MS,
    TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS,
    ferry_runtime::config::TOPIC_TRACKING_ENABLE,
    ferry_runtime::config::TOPIC_TRACKING_ALLOW_RESET,
    ferry_plugin::KEY_CONVERTER,
    ferry_plugin::VALUE_CONVERTER,
    ferry_plugin::HEADER_CONVERTER,
    ferry_kafka::connector_keys::TOPIC_CREATION_ENABLE,
    ferry_kafka::connector_keys::CONNECTOR_CLIENT_CONFIG_OVERRIDE_POLICY,
    ferry_runtime::config::exactly_once::EXACTLY_ONCE_SOURCE_SUPPORT,
];

/// The required keys, with what to set them to.
pub(super) const REQUIRED: &[(&str, &str)] = &[
    (
        BOOTSTRAP_SERVERS,
        "the Kafka cluster the workers coordinate through, e.g. bootstrap.servers=localhost:9092",
    ),
    (
        GROUP_ID,
        "the group every worker of this cluster joins, e.g. group.id=connect-cluster",
    ),
    (
        CONFIG_STORAGE_TOPIC,
        "the compacted topic of connector configurations, e.g. config.storage.topic=connect-configs",
    ),
    (
        OFFSET_STORAGE_TOPIC,
        "the compacted topic of source offsets, e.g. offset.storage.topic=connect-offsets",
    ),
    (
        STATUS_STORAGE_TOPIC,
        "the compacted topic of statuses, e.g. status.storage.topic=connect-status",
    ),
];

/// Librdkafka settings for the worker's clients of one role: `producer.linger.ms` → `linger.ms`.
pub(super) const CLIENT_ROLE_PREFIXES: &[&str] = &["producer.", "consumer.", "admin."];
/// Top-level security settings, for every client (as Kafka Connect uses the worker's own settings
/// for its internal clients).
pub(super) const SECURITY_PREFIXES: &[&str] = &["security.", "sasl.", "ssl."];
/// Every client prefix.
pub(super) const CLIENT_PREFIXES: &[&str] = &[
    "producer.",
    "consumer.",
    "admin.",
    "security.",
    "sasl.",
    "ssl.",
];
/// How the prefixes are listed in "accepted keys" hints.
pub(super) const LISTED_PREFIXES: &[&str] = &[
    "key.converter.*",
    "value.converter.*",
    "producer.*",
    "consumer.*",
    "admin.*",
    "security.*",
    "sasl.*",
    "ssl.*",
];

/// Kafka Connect keys accepted so an existing file runs, but that do nothing in Ferry.
pub(super) const IGNORED_KEYS: &[&str] = &[
    "internal.key.converter",
    "internal.value.converter",
    "plugin.path",
];

/// Standalone worker keys, with what replaces them in distributed mode.
pub(super) const STANDALONE_ONLY: &[(&str, &str)] = &[
    (
        "offset.storage.file.filename",
        "distributed workers keep offsets in offset.storage.topic",
    ),
    (
        "offset.storage",
        "distributed workers keep offsets in offset.storage.topic",
    ),
    (
        "sink",
        "distributed workers send records to bootstrap.servers",
    ),
    (
        "ferry.connectors.file",
        "distributed workers keep connectors in config.storage.topic",
    ),
];
