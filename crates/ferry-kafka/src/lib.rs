//! # ferry-kafka
//!
//! Ferry and Kafka: the Kafka offset store ([`KafkaOffsetStore`], Kafka Connect's
//! `offset.storage=kafka`, byte-compatible with its offsets topic); the Kafka sink ([`KafkaSink`],
//! `sink=kafka`) and the converters it writes keys and values with ([`convert`]: Kafka Connect's
//! JsonConverter, StringConverter and ByteArrayConverter).

mod admin;
mod client;
pub mod convert;
mod retriable;
pub mod sink;
mod store;

pub use store::{
    DEFAULT_PARTITIONS, DEFAULT_REPLICATION_FACTOR, KafkaOffsetStore, KafkaOffsetStoreConfig,
    java_murmur2, java_partition,
};

pub use convert::{ConvertError, Converter, RecordConverters};
pub use retriable::{is_retriable, is_retriable_code};
pub use sink::{KafkaSink, KafkaSinkConfig};
