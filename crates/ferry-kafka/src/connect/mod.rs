//! Kafka Connect's config topic and status topic records, byte for byte, and the in-memory views a
//! reader folds them into (pure encode/decode, no I/O), and the stores that keep them in their Kafka
//! topics ([`store`]).
//!
//! Facts from Kafka's `connect/runtime/src/main/java/org/apache/kafka/connect/storage/`
//! `KafkaConfigBackingStore.java` and `KafkaStatusBackingStore.java`: keys are strings, values are
//! JsonConverter output with `schemas.enable=false` (compact Jackson JSON, struct fields in schema
//! order, a null optional field written as `null`), a null value is a tombstone.

mod config_records;
mod config_snapshot;
pub mod slots;
mod status_records;
pub mod store;

pub use config_records::{
    ConfigRecord, ConfigRecordKey, RestartRequest, TargetState, decode_logger_level, encode_commit,
    encode_logger_level, encode_properties, encode_restart, encode_target_state, encode_task_count,
};
pub use config_snapshot::ConfigSnapshot;
pub use status_records::{
    Status, StatusKey, StatusState, StatusView, can_write_safely, decode_topic_status,
    encode_status, encode_topic_status,
};
pub use store::{
    ConnectStoreError, DEFAULT_STATUS_PARTITIONS, InternalTopicConfig, KafkaConfigBackingStore,
    KafkaStatusBackingStore,
};

/// A config- or status-topic record that cannot be read: which key, and why. Kafka Connect logs such
/// a record and skips it; a reader here gets this error and its view stays as it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Kafka Connect internal-topic record with key {key:?}: {reason}")]
pub struct RecordError {
    /// The record's key.
    pub key: String,
    /// What is wrong with it.
    pub reason: String,
}

impl RecordError {
    fn new(key: &str, reason: impl Into<String>) -> Self {
        Self {
            key: key.to_owned(),
            reason: reason.into(),
        }
    }
}

/// Parses a value as JSON (what JsonConverter's `toConnectData` does with schemas disabled).
fn parse_json(key: &str, value: &[u8]) -> Result<serde_json::Value, RecordError> {
    serde_json::from_slice(value)
        .map_err(|e| RecordError::new(key, format!("the value is not JSON: {e}")))
}

/// The value as a JSON object, or an error naming what it is instead.
fn object<'a>(
    key: &str,
    value: &'a serde_json::Value,
) -> Result<&'a serde_json::Map<String, serde_json::Value>, RecordError> {
    value.as_object().ok_or_else(|| {
        RecordError::new(key, format!("the value must be a JSON object, not {value}"))
    })
}

/// An int32 field (Kafka reads Integer or Long; Ferry refuses values outside int32 rather than
/// truncating them as Java's `(int)` cast would).
fn int32_field(
    key: &str,
    map: &serde_json::Map<String, serde_json::Value>,
    field: &str,
) -> Result<i32, RecordError> {
    map.get(field)
        .and_then(serde_json::Value::as_i64)
        .and_then(|n| i32::try_from(n).ok())
        .ok_or_else(|| {
            RecordError::new(
                key,
                format!(
                    "field {field:?} must be a 32-bit integer, found {:?}",
                    map.get(field)
                ),
            )
        })
}

/// Appends `"name":` to a JSON object being written.
fn write_field_name(out: &mut Vec<u8>, name: &str, first: bool) {
    if !first {
        out.push(b',');
    }
    ferry_offsets::jackson::write_string(out, name);
    out.push(b':');
}

#[cfg(test)]
mod tests;
