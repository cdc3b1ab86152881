//! Records a source task produces.

use std::sync::Arc;

use crate::error::ValueError;
use crate::schema::Schema;
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
///
/// The fields are public to read; a record is made with [`SourceRecord::new`],
/// [`SourceRecord::from_maps`] or [`SourceRecord::builder`] (the struct is `#[non_exhaustive]`, so
/// fields can be added without breaking connectors).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
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
    /// The Kafka Connect schema of the key; `None`: schemaless (the default). Shared: a connector
    /// builds each schema once and every record holds a reference, which converters also recognise
    /// by pointer.
    pub key_schema: Option<Arc<Schema>>,
    /// Record value as JSON; `None` for a null value.
    pub value: Option<serde_json::Value>,
    /// The Kafka Connect schema of the value; `None`: schemaless (the default). Converters that write
    /// schemas (`JsonConverter` with `schemas.enable=true`) write it with the value.
    /// Shared like [`SourceRecord::key_schema`].
    pub value_schema: Option<Arc<Schema>>,
    /// Headers.
    pub headers: Vec<Header>,
    /// Timestamp in milliseconds since the epoch.
    pub timestamp: Option<i64>,
    /// Only moves its partition's offset ([`SourceRecord::offset_only`]): nothing is sent.
    pub offset_only: bool,
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

    /// A record from already built maps, without key, schemas, headers or timestamp.
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
            key_schema: None,
            value,
            value_schema: None,
            headers: Vec::new(),
            timestamp: None,
            offset_only: false,
        }
    }

    /// A record that sends nothing and only moves `partition`'s committed offset to `offset`: the
    /// framework commits it like a delivered record's, in order — once every record the task
    /// returned before it was acknowledged. For a source whose position advances while nothing it
    /// captures changes (a replication slot that must be acknowledged so the server can free its
    /// log), without writing heartbeat records anywhere. Transformations never see it, and
    /// `commit_record` is not called for it.
    pub fn offset_only(partition: SourcePartition, offset: SourceOffset) -> Self {
        Self {
            offset_only: true,
            ..Self::from_maps(Some(partition), Some(offset), String::new(), None)
        }
    }

    /// A builder for a record to `topic`, for setting every field at once:
    ///
    /// ```
    /// use ferry_api::{ConnectMap, SourceRecord};
    /// let record = SourceRecord::builder("orders")
    ///     .source_partition(ConnectMap::from_serde(&serde_json::json!({"table": "orders"}))?)
    ///     .source_offset(ConnectMap::from_serde(&serde_json::json!({"id": 7}))?)
    ///     .key(serde_json::json!(7))
    ///     .value(serde_json::json!({"id": 7}))
    ///     .timestamp(1_700_000_000_000)
    ///     .build();
    /// assert_eq!(record.topic, "orders");
    /// # Ok::<(), ferry_api::ValueError>(())
    /// ```
    pub fn builder(topic: impl Into<String>) -> SourceRecordBuilder {
        SourceRecordBuilder {
            record: Self::from_maps(None, None, topic, None),
        }
    }

    /// Sets the key, builder style.
    pub fn with_key(mut self, key: serde_json::Value) -> Self {
        self.key = Some(key);
        self
    }

    /// Sets the key's schema, builder style.
    pub fn with_key_schema(mut self, schema: impl Into<Arc<Schema>>) -> Self {
        self.key_schema = Some(schema.into());
        self
    }

    /// Sets the value's schema, builder style.
    pub fn with_value_schema(mut self, schema: impl Into<Arc<Schema>>) -> Self {
        self.value_schema = Some(schema.into());
        self
    }

    /// Adds a header, builder style.
    pub fn with_header(mut self, key: impl Into<String>, value: serde_json::Value) -> Self {
        self.headers.push(Header {
            key: key.into(),
            value,
        });
        self
    }

    /// Sets the destination Kafka partition, builder style.
    pub fn with_kafka_partition(mut self, partition: i32) -> Self {
        self.kafka_partition = Some(partition);
        self
    }

    /// Sets the timestamp, builder style.
    pub fn with_timestamp(mut self, millis: i64) -> Self {
        self.timestamp = Some(millis);
        self
    }
}

/// Builds a [`SourceRecord`] field by field; see [`SourceRecord::builder`]. Unset fields are
/// absent (`None`, no headers).
#[derive(Debug, Clone)]
#[must_use]
pub struct SourceRecordBuilder {
    record: SourceRecord,
}

impl SourceRecordBuilder {
    /// The stream the record came from.
    pub fn source_partition(mut self, partition: SourcePartition) -> Self {
        self.record.source_partition = Some(partition);
        self
    }

    /// The position after the record.
    pub fn source_offset(mut self, offset: SourceOffset) -> Self {
        self.record.source_offset = Some(offset);
        self
    }

    /// The destination Kafka partition.
    pub fn kafka_partition(mut self, partition: i32) -> Self {
        self.record.kafka_partition = Some(partition);
        self
    }

    /// The key.
    pub fn key(mut self, key: serde_json::Value) -> Self {
        self.record.key = Some(key);
        self
    }

    /// The key's schema.
    pub fn key_schema(mut self, schema: impl Into<Arc<Schema>>) -> Self {
        self.record.key_schema = Some(schema.into());
        self
    }

    /// The value.
    pub fn value(mut self, value: serde_json::Value) -> Self {
        self.record.value = Some(value);
        self
    }

    /// The value's schema.
    pub fn value_schema(mut self, schema: impl Into<Arc<Schema>>) -> Self {
        self.record.value_schema = Some(schema.into());
        self
    }

    /// Adds a header.
    pub fn header(mut self, key: impl Into<String>, value: serde_json::Value) -> Self {
        self.record.headers.push(Header {
            key: key.into(),
            value,
        });
        self
    }

    /// The timestamp, in milliseconds since the epoch.
    pub fn timestamp(mut self, millis: i64) -> Self {
        self.record.timestamp = Some(millis);
        self
    }

    /// The record.
    pub fn build(self) -> SourceRecord {
        self.record
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
