//! Records a source task produces.

use crate::error::ValueError;
use crate::value::{ConnectMap, SourceOffset, SourcePartition};

/// A record header.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// Header key.
    pub key: String,
    /// Header value as JSON.
    pub value: serde_json::Value,
}

/// One record read from the external system, with the position it was read at.
///
/// The framework commits `source_offset` for `source_partition` once the sink has acknowledged this
/// record and every earlier record of the same partition.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceRecord {
    /// The stream the record came from; `None` is allowed (Kafka Connect's null partition).
    pub source_partition: Option<SourcePartition>,
    /// The position after this record; `None` commits nothing for this record.
    pub source_offset: Option<SourceOffset>,
    /// Destination topic.
    pub topic: String,
    /// Destination Kafka partition; `None` lets the sink choose.
    pub kafka_partition: Option<i32>,
    /// Record key as JSON; `None` for no key.
    pub key: Option<serde_json::Value>,
    /// Record value as JSON; `None` for a null value.
    pub value: Option<serde_json::Value>,
    /// Headers.
    pub headers: Vec<Header>,
    /// Timestamp in milliseconds since the epoch.
    pub timestamp: Option<i64>,
}

impl SourceRecord {
    /// A record with a value and typed partition and offset (see [`ConnectMap::from_serde`]).
    ///
    /// # Errors
    /// The partition or offset type holds a value Kafka Connect does not allow.
    pub fn new<P: serde::Serialize, O: serde::Serialize>(
        partition: &P,
        offset: &O,
        topic: impl Into<String>,
        value: serde_json::Value,
    ) -> Result<Self, ValueError> {
        Ok(Self::from_maps(
            Some(ConnectMap::from_serde(partition)?),
            Some(ConnectMap::from_serde(offset)?),
            topic,
            Some(value),
        ))
    }

    /// A record from already built maps.
    pub fn from_maps(
        source_partition: Option<SourcePartition>,
        source_offset: Option<SourceOffset>,
        topic: impl Into<String>,
        value: Option<serde_json::Value>,
    ) -> Self {
        Self {
            source_partition,
            source_offset,
            topic: topic.into(),
            kafka_partition: None,
            key: None,
            value,
            headers: Vec::new(),
            timestamp: None,
        }
    }

    /// Sets the key, builder style.
    pub fn with_key(mut self, key: serde_json::Value) -> Self {
        self.key = Some(key);
        self
    }

    /// Sets the timestamp, builder style.
    pub fn with_timestamp(mut self, millis: i64) -> Self {
        self.timestamp = Some(millis);
        self
    }
}

/// Where the sink put a record, given to [`crate::SourceTask::commit_record`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordMetadata {
    /// Topic written to.
    pub topic: String,
    /// Kafka partition written to, when the sink has partitions.
    pub partition: Option<i32>,
    /// Offset inside that partition (or line number for a file sink), when known.
    pub offset: Option<i64>,
}
