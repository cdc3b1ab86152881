//! The keys of the distributed worker file: Kafka Connect's names (`DistributedConfig.java`).

use ferry_api::{ConfigKey, ConfigType, Importance};
pub use ferry_kafka::{
    BOOTSTRAP_SERVERS, OFFSET_STORAGE_PARTITIONS, OFFSET_STORAGE_REPLICATION_FACTOR,
    OFFSET_STORAGE_TOPIC,
};
use ferry_plugin::framework_key::names;
pub use ferry_runtime::config::LISTENERS;
use ferry_runtime::config::{COMMON_WORKER_KEYS, REST_KEYS};

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

/// The keys only the distributed worker reads, with Kafka Connect's definitions
/// (`DistributedConfig.java`); it also reads [`COMMON_WORKER_KEYS`] and [`REST_KEYS`] as the
/// standalone worker does, and the Kafka keys of [`KAFKA_KEYS`].
pub const DISTRIBUTED_KEYS: &[ConfigKey] = &[
    ConfigKey::required(
        GROUP_ID,
        "A unique string that identifies the Connect cluster group this worker belongs to.",
    )
    .importance(Importance::High),
    ConfigKey::required(
        CONFIG_STORAGE_TOPIC,
        "The name of the compacted, one-partition Kafka topic where connector configurations are stored.",
    )
    .importance(Importance::High),
    ConfigKey::optional(
        CONFIG_STORAGE_REPLICATION_FACTOR,
        Some("3"),
        "Replication factor used when creating the configuration storage topic (-1: the broker's default).",
    )
    .of_type(ConfigType::Int)
    .importance(Importance::Low),
    ConfigKey::required(
        STATUS_STORAGE_TOPIC,
        "The name of the compacted Kafka topic where connector and task statuses are stored.",
    )
    .importance(Importance::High),
    ConfigKey::optional(
        STATUS_STORAGE_PARTITIONS,
        Some("5"),
        "The number of partitions used when creating the status storage topic (-1: the broker's default).",
    )
    .of_type(ConfigType::Int)
    .importance(Importance::Low),
    ConfigKey::optional(
        STATUS_STORAGE_REPLICATION_FACTOR,
        Some("3"),
        "Replication factor used when creating the status storage topic (-1: the broker's default).",
    )
    .of_type(ConfigType::Int)
    .importance(Importance::Low),
    ConfigKey::optional(
        SESSION_TIMEOUT_MS,
        Some("10000"),
        "The timeout used to detect worker failures: a worker that sends no heartbeat this long \
         leaves the group and its tasks are reassigned.",
    )
    .of_type(ConfigType::Int)
    .importance(Importance::High),
    ConfigKey::optional(
        HEARTBEAT_INTERVAL_MS,
        Some("3000"),
        "The expected time between heartbeats to the group coordinator; below session.timeout.ms.",
    )
    .of_type(ConfigType::Int)
    .importance(Importance::High),
    ConfigKey::optional(
        REBALANCE_TIMEOUT_MS,
        Some("60000"),
        "The most time each worker may take to join the group once a rebalance has begun, which \
         includes stopping revoked tasks and committing their offsets.",
    )
    .of_type(ConfigType::Int)
    .importance(Importance::High),
    ConfigKey::optional(
        SCHEDULED_REBALANCE_MAX_DELAY_MS,
        Some("300000"),
        "How long the tasks of a departed worker are held back, waiting for it to return, before \
         they are reassigned.",
    )
    .of_type(ConfigType::Int)
    .importance(Importance::Low),
    ConfigKey::optional(
        REST_ADVERTISED_HOST_NAME,
        None,
        "The host other workers reach this one at; default the advertised listener's host.",
    )
    .importance(Importance::Low),
    ConfigKey::optional(
        REST_ADVERTISED_PORT,
        None,
        "The port other workers reach this one at; default the advertised listener's port.",
    )
    .of_type(ConfigType::Int)
    .importance(Importance::Low),
    ConfigKey::optional(
        REST_ADVERTISED_LISTENER,
        None,
        "`http` or `https`: the protocol of the listener other workers forward requests to.",
    )
    .importance(Importance::Low),
];

/// The Kafka keys the distributed worker reads, defined by the Kafka offset store and sink plugins
/// (`ferry_kafka`'s `keys()`), where the standalone worker reads them too.
pub const KAFKA_KEYS: &[&str] = &[
    BOOTSTRAP_SERVERS,
    OFFSET_STORAGE_TOPIC,
    OFFSET_STORAGE_PARTITIONS,
    OFFSET_STORAGE_REPLICATION_FACTOR,
    ferry_kafka::connector_keys::TOPIC_CREATION_ENABLE,
    ferry_kafka::connector_keys::CONNECTOR_CLIENT_CONFIG_OVERRIDE_POLICY,
];

/// Every key the distributed worker reads by name (the REST security keys, converter settings and
/// client prefixes are matched by their parsers).
pub(super) fn plain_keys() -> impl Iterator<Item = &'static str> {
    names(DISTRIBUTED_KEYS)
        .chain(names(COMMON_WORKER_KEYS))
        .chain(names(REST_KEYS))
        .chain(KAFKA_KEYS.iter().copied())
}

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
        "sink",
        "distributed workers send records to bootstrap.servers",
    ),
    (
        "ferry.connectors.file",
        "distributed workers keep connectors in config.storage.topic",
    ),
];
