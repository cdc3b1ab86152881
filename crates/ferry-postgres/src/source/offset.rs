//! Source partitions and offsets, exactly as Kafka Connect's JDBC source writes them.
//!
//! - Table partition (offset protocol 1): `{"protocol":"1","table":"schema.table"}`.
//! - Legacy table partition (protocol 0, JDBC source before 10.x): `{"table":"table"}`; read at start
//!   when no protocol-1 offset exists ("helps with upgrades"), never written.
//! - Query partition: `{"query":"query"}`.
//! - Offsets: `{"incrementing":N}`, `{"timestamp_nanos":ns,"timestamp":ms}` or all three, in the field
//!   order Kafka Connect's `HashMap` gives them (`timestamp_nanos`, `incrementing`, `timestamp`), so
//!   the stored bytes are Kafka Connect's.

use ferry_api::{ConnectError, ConnectMap, SourceOffset, SourcePartition, Value};
use serde::{Deserialize, Serialize};

use super::config::{Mode, TableId};
use super::time::{Micros, NanosOutOfRange};

/// A stored offset that is not a JDBC source offset.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum OffsetError {
    #[error(
        "has the unknown key {0:?}; a JDBC source offset holds only incrementing, timestamp and \
         timestamp_nanos"
    )]
    UnknownKey(String),
    #[error("\"{key}\" must be an integer, not a {} ({value})", value.type_name())]
    NotInteger { key: &'static str, value: Value },
    #[error("has timestamp_nanos without timestamp")]
    NanosWithoutTimestamp,
    #[error(transparent)]
    Nanos(#[from] NanosOutOfRange),
}

/// A partition that is not one of a JDBC source's three shapes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PartitionError {
    #[error("\"table\" must be schema.table with protocol 1, not {0:?}")]
    TableNotQualified(String),
    #[error("\"protocol\" must be \"1\", not {0:?}")]
    Protocol(String),
    #[error("\"protocol\" and \"table\" must be strings")]
    NotStrings,
    #[error("\"table\" must be a string")]
    TableNotString,
    #[error("\"query\" must be the string \"query\"")]
    Query,
    #[error(
        "is not a JDBC source partition: use {{\"protocol\":\"1\",\"table\":\"schema.table\"}}, the legacy \
         {{\"table\":\"table\"}} or {{\"query\":\"query\"}}"
    )]
    Shape,
}

/// The JDBC source's offset protocol version written in table partitions.
pub const PROTOCOL_VERSION: &str = "1";

/// A table's partition: `{"protocol":"1","table":"schema.table"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TablePartition {
    /// Always [`PROTOCOL_VERSION`].
    pub protocol: String,
    /// `schema.table`, unquoted.
    pub table: String,
}

impl TablePartition {
    /// The partition of `schema.table`.
    pub fn new(schema: &str, table: &str) -> Self {
        Self {
            protocol: PROTOCOL_VERSION.to_owned(),
            table: format!("{schema}.{table}"),
        }
    }
}

/// A table's partition before offset protocol 1: `{"table":"table"}` (the unqualified name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LegacyTablePartition {
    /// The table's name without its schema.
    pub table: String,
}

/// The partition of `query` mode: `{"query":"query"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryPartition {
    /// Always `"query"`.
    pub query: String,
}

impl Default for QueryPartition {
    fn default() -> Self {
        Self {
            query: "query".to_owned(),
        }
    }
}

/// A JDBC source offset. Fields absent in the mode are absent from the map.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JdbcOffset {
    /// Nanoseconds within the second of the timestamp (Java's `Timestamp.getNanos()`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_nanos: Option<i64>,
    /// The incrementing column's value of the last row read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incrementing: Option<i64>,
    /// The timestamp of the last row read, in ms since the Unix epoch (Java's `Timestamp.getTime()`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
}

/// Where a table's next query starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cursor {
    /// The last timestamp read (timestamp modes).
    pub(crate) timestamp: Option<Micros>,
    /// The last incrementing value read (incrementing modes).
    pub(crate) incrementing: Option<i64>,
}

impl Cursor {
    /// The offset map of this cursor.
    pub(crate) fn to_offset(self) -> JdbcOffset {
        let (timestamp, timestamp_nanos) = match self.timestamp.map(Micros::to_offset) {
            Some((ms, ns)) => (Some(ms), Some(ns)),
            None => (None, None),
        };
        JdbcOffset {
            timestamp_nanos,
            incrementing: self.incrementing,
            timestamp,
        }
    }
}

/// The name of a partition for messages: its JSON.
fn describe(partition: &SourcePartition) -> String {
    partition.to_string()
}

/// An integer field of an offset map: `Ok(None)` when absent.
fn int_field(offset: &SourceOffset, key: &'static str) -> Result<Option<i64>, OffsetError> {
    match offset.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or_else(|| OffsetError::NotInteger {
            key,
            value: v.clone(),
        }),
    }
}

/// Decodes a stored offset into a cursor for `mode`. Missing fields are the JDBC source's defaults
/// (incrementing -1, timestamp the Unix epoch), as when a connector changes mode.
///
/// # Errors
/// A field of the wrong type, an unknown field, or `timestamp_nanos` out of range.
pub(crate) fn decode_offset(offset: &SourceOffset) -> Result<JdbcOffset, OffsetError> {
    for (key, _) in offset.iter() {
        if !matches!(key, "incrementing" | "timestamp" | "timestamp_nanos") {
            return Err(OffsetError::UnknownKey(key.to_owned()));
        }
    }
    let decoded = JdbcOffset {
        timestamp_nanos: int_field(offset, "timestamp_nanos")?,
        incrementing: int_field(offset, "incrementing")?,
        timestamp: int_field(offset, "timestamp")?,
    };
    if let Some(ms) = decoded.timestamp {
        Micros::from_offset(ms, decoded.timestamp_nanos)?;
    } else if decoded.timestamp_nanos.is_some() {
        return Err(OffsetError::NanosWithoutTimestamp);
    }
    Ok(decoded)
}

/// What kind of partition a map is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PartitionKind {
    Table(String),
    LegacyTable(String),
    Query,
}

/// Recognizes a JDBC source partition.
///
/// # Errors
/// The map is not one of the three shapes.
pub(crate) fn classify_partition(
    partition: &SourcePartition,
) -> Result<PartitionKind, PartitionError> {
    let keys: Vec<&str> = partition.iter().map(|(k, _)| k).collect();
    let string = |key: &str| partition.get(key).and_then(Value::as_str);
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    match sorted.as_slice() {
        ["protocol", "table"] => match (string("protocol"), string("table")) {
            (Some(PROTOCOL_VERSION), Some(table)) if table.contains('.') => {
                Ok(PartitionKind::Table(table.to_owned()))
            }
            (Some(PROTOCOL_VERSION), Some(table)) => {
                Err(PartitionError::TableNotQualified(table.to_owned()))
            }
            (Some(p), _) => Err(PartitionError::Protocol(p.to_owned())),
            _ => Err(PartitionError::NotStrings),
        },
        ["table"] => string("table")
            .map(|t| PartitionKind::LegacyTable(t.to_owned()))
            .ok_or(PartitionError::TableNotString),
        ["query"] => match string("query") {
            Some("query") => Ok(PartitionKind::Query),
            _ => Err(PartitionError::Query),
        },
        _ => Err(PartitionError::Shape),
    }
}

/// Checks one offset given to `alter_offsets` for `mode`.
///
/// # Errors
/// Says which partition and what is wrong.
pub(crate) fn validate_alter(
    mode: Mode,
    partition: &SourcePartition,
    offset: &SourceOffset,
) -> Result<(), ConnectError> {
    let fail = |message: String| {
        ConnectError::fatal(format!(
            "PostgresSource: partition {}: {message}",
            describe(partition)
        ))
    };
    classify_partition(partition).map_err(|e| fail(e.to_string()))?;
    let decoded = decode_offset(offset).map_err(|e| fail(format!("offset {offset} {e}")))?;
    let example = match mode {
        Mode::Bulk => {
            return Err(fail(
                "mode=bulk reads whole tables and keeps no offsets; only a reset (null offset) is accepted"
                    .to_owned(),
            ));
        }
        Mode::Incrementing => "{\"incrementing\":42}",
        Mode::Timestamp => "{\"timestamp_nanos\":0,\"timestamp\":1700000000000}",
        Mode::TimestampIncrementing => {
            "{\"timestamp_nanos\":0,\"incrementing\":42,\"timestamp\":1700000000000}"
        }
    };
    let missing = (mode.uses_incrementing() && decoded.incrementing.is_none())
        || (mode.uses_timestamp() && decoded.timestamp.is_none());
    let extra = (!mode.uses_incrementing() && decoded.incrementing.is_some())
        || (!mode.uses_timestamp() && decoded.timestamp.is_some());
    if missing || extra {
        return Err(fail(format!(
            "offset {offset} does not fit mode={}: use an offset like {example} (or null to reset)",
            mode.name()
        )));
    }
    Ok(())
}

/// The partitions a task asks for at start: for each table its protocol-1 partition, then its legacy
/// one; in query mode the query partition.
pub(crate) fn lookup_partitions(tables: &[TableId]) -> Result<Vec<SourcePartition>, ConnectError> {
    let mut out = Vec::with_capacity(tables.len() * 2);
    for t in tables {
        out.push(ConnectMap::from_serde(&TablePartition::new(
            &t.schema, &t.table,
        ))?);
        out.push(ConnectMap::from_serde(&LegacyTablePartition {
            table: t.table.clone(),
        })?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(json: &str) -> ConnectMap {
        let value: serde_json::Map<String, serde_json::Value> = match serde_json::from_str(json) {
            Ok(v) => v,
            Err(e) => panic!("{json}: {e}"),
        };
        let mut out = ConnectMap::new();
        for (k, v) in value {
            let v: Value = match v {
                serde_json::Value::String(s) => Value::String(s),
                serde_json::Value::Number(n) => n.as_i64().map_or(Value::Null, Value::Int64),
                _ => Value::Null,
            };
            if let Err(e) = out.insert(k, v) {
                panic!("{e}");
            }
        }
        out
    }

    #[test]
    fn offsets_serialize_in_kafka_connects_order() {
        let cursor = Cursor {
            timestamp: Some(Micros(1_547_030_056_000_000)),
            incrementing: Some(7),
        };
        let offset = ConnectMap::from_serde(&cursor.to_offset()).map(|m| m.to_string());
        assert_eq!(
            offset.as_deref(),
            Ok("{\"timestamp_nanos\":0,\"incrementing\":7,\"timestamp\":1547030056000}")
        );
        let partition =
            ConnectMap::from_serde(&TablePartition::new("demo", "accounts")).map(|m| m.to_string());
        assert_eq!(
            partition.as_deref(),
            Ok("{\"protocol\":\"1\",\"table\":\"demo.accounts\"}")
        );
    }

    #[test]
    fn alter_validation() {
        let table = map(r#"{"protocol":"1","table":"public.t"}"#);
        let ok = |mode, o: &str| validate_alter(mode, &table, &map(o)).is_ok();
        assert!(ok(Mode::Incrementing, r#"{"incrementing":5}"#));
        assert!(!ok(Mode::Incrementing, r#"{"incrementing":"5"}"#));
        assert!(!ok(Mode::Incrementing, r#"{"timestamp":5}"#));
        assert!(ok(
            Mode::Timestamp,
            r#"{"timestamp":5,"timestamp_nanos":5000000}"#
        ));
        assert!(ok(Mode::Timestamp, r#"{"timestamp":5}"#));
        assert!(!ok(
            Mode::Timestamp,
            r#"{"timestamp":5,"timestamp_nanos":1000000000}"#
        ));
        assert!(!ok(Mode::Timestamp, r#"{"timestamp":5,"position":1}"#));
        assert!(ok(
            Mode::TimestampIncrementing,
            r#"{"timestamp":5,"timestamp_nanos":0,"incrementing":1}"#
        ));
        assert!(!ok(Mode::TimestampIncrementing, r#"{"timestamp":5}"#));
        assert!(!ok(Mode::Bulk, r#"{"incrementing":5}"#));
        let legacy = map(r#"{"table":"t"}"#);
        assert!(validate_alter(Mode::Incrementing, &legacy, &map(r#"{"incrementing":1}"#)).is_ok());
        let query = map(r#"{"query":"query"}"#);
        assert!(validate_alter(Mode::Incrementing, &query, &map(r#"{"incrementing":1}"#)).is_ok());
        for bad in [
            r#"{"protocol":"2","table":"public.t"}"#,
            r#"{"protocol":"1","table":"t"}"#,
            r#"{"query":"q"}"#,
            r#"{"filename":"x"}"#,
        ] {
            assert!(
                validate_alter(Mode::Incrementing, &map(bad), &map(r#"{"incrementing":1}"#))
                    .is_err(),
                "{bad}"
            );
        }
    }
}
