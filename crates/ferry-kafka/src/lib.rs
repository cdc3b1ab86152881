//! # ferry-kafka
//!
//! Ferry and Kafka: the Kafka offset store ([`KafkaOffsetStore`], Kafka Connect's
//! `offset.storage=kafka`, byte-compatible with its offsets topic); the Kafka sink ([`KafkaSink`],
//! `sink=kafka`) and the converters it writes keys and values with ([`convert`]: Kafka Connect's
//! JsonConverter, StringConverter and ByteArrayConverter). [`KafkaStorePlugin`] and [`KafkaSinkPlugin`]
//! register both with a worker, reading their own worker keys. [`connect`] holds Kafka Connect's
//! config- and status-topic record formats and the views a distributed worker folds them into.

mod admin;
mod client;
pub mod connect;
pub mod connector_keys;
pub mod convert;
mod end_events;
mod plugin;
mod retriable;
mod secret;
mod settings;
pub mod sink;
mod store;
mod topic_log;
mod topics;
mod transactional;

pub use store::{
    DEFAULT_PARTITIONS, DEFAULT_REPLICATION_FACTOR, KafkaOffsetStore, KafkaOffsetStoreConfig,
    java_murmur2, java_partition,
};

pub use connector_keys::OverridePolicy;
pub use convert::{
    ConvertError, ConvertReason, Converter, PayloadError, PayloadProblem, RecordConverters,
};
pub use plugin::{
    BOOTSTRAP_SERVERS, KafkaSinkPlugin, KafkaSinkSpec, KafkaStorePlugin, KafkaStoreSpec,
    OFFSET_STORAGE_PARTITIONS, OFFSET_STORAGE_REPLICATION_FACTOR, OFFSET_STORAGE_TOPIC,
    connector_settings, valid_topic,
};
pub use retriable::{is_retriable, is_retriable_code};
pub use secret::is_sensitive_client_key;
pub use settings::{CLIENT_SETTINGS, READER_SETTINGS};
pub use sink::{KafkaSink, KafkaSinkConfig};
