//! The byte format of offset keys and values, compatible with Kafka Connect's offsets topic and
//! standalone store.
//!
//! - key: `["<connector>",{partition}]` or `["<connector>",null]`
//! - value: `{offset}`; a tombstone is the absence of a value.
//!
//! Encoding keeps the map's field order, so bytes equal Kafka Connect's for the same map. Decoding
//! accepts any field order, any integer width (all integers come back as [`Value::Int64`]), floats
//! ([`Value::Float64`]), base64 strings (as strings, as Kafka Connect reads them) and a null partition.

use std::fmt;

use ferry_api::{ConnectMap, Value};
use serde::de::{self, Deserializer as _};
use serde_json::value::RawValue;

use crate::json::{write_map, write_string};

/// A decoded offset key.
#[derive(Debug, Clone, PartialEq)]
pub struct OffsetKey {
    /// The connector the offset belongs to.
    pub connector: String,
    /// The source partition; `None` is Kafka Connect's null partition.
    pub partition: Option<ConnectMap>,
}

/// Bytes that are not a valid offset key or value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} is not valid Kafka Connect offset JSON: {reason} (bytes: {preview})")]
pub struct CodecError {
    what: &'static str,
    reason: String,
    preview: String,
}

impl CodecError {
    fn new(what: &'static str, reason: impl fmt::Display, bytes: &[u8]) -> Self {
        const MAX: usize = 120;
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX)]).into_owned();
        let preview = if bytes.len() > MAX {
            format!("{text}…")
        } else {
            text
        };
        Self {
            what,
            reason: reason.to_string(),
            preview,
        }
    }

    /// What failed to decode and why.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// Encodes the key of `partition` for `connector`.
pub fn encode_key(connector: &str, partition: Option<&ConnectMap>) -> Vec<u8> {
    encode_key_with(connector, partition, false)
}

fn encode_key_with(connector: &str, partition: Option<&ConnectMap>, sorted: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + connector.len());
    out.push(b'[');
    write_string(&mut out, connector);
    out.push(b',');
    match partition {
        Some(map) => write_map(&mut out, map, sorted),
        None => out.extend_from_slice(b"null"),
    }
    out.push(b']');
    out
}

/// Encodes an offset value.
pub fn encode_value(offset: &ConnectMap) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    write_map(&mut out, offset, false);
    out
}

/// Decodes a key written by Ferry or Kafka Connect.
///
/// # Errors
/// The bytes are not `[string, object-or-null]` of allowed values.
pub fn decode_key(bytes: &[u8]) -> Result<OffsetKey, CodecError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let key = de
        .deserialize_seq(KeyVisitor)
        .and_then(|k| de.end().map(|()| k))
        .map_err(|e| CodecError::new("offset key", e, bytes))?;
    Ok(key)
}

/// Decodes an offset value written by Ferry or Kafka Connect.
///
/// # Errors
/// The bytes are not a JSON object of allowed values.
pub fn decode_value(bytes: &[u8]) -> Result<ConnectMap, CodecError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    de.deserialize_map(MapVisitor)
        .and_then(|m| de.end().map(|()| m))
        .map_err(|e| CodecError::new("offset value", e, bytes))
}

/// The logical identity of a partition: field order and integer width do not matter, but `1`, `1.0`
/// and `"1"` stay different. Two keys with the same canonical form are the same partition.
pub fn canonical_partition(partition: Option<&ConnectMap>) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    match partition {
        Some(map) => write_map(&mut out, map, true),
        None => out.extend_from_slice(b"null"),
    }
    out
}

/// Whether `raw_key` is already the canonical key of its decoded form (sorted fields, Ferry's bytes).
pub(crate) fn is_canonical(raw_key: &[u8], key: &OffsetKey) -> bool {
    encode_key_with(&key.connector, key.partition.as_ref(), true) == raw_key
}

/// A deliberately loose form of a partition, used only to explain a lookup miss: key names lower-cased,
/// numbers and numeric strings reduced to one text (`1`, `1.0`, `"1"` all become `1`). Two partitions
/// with equal loose forms but different [`canonical_partition`]s are a likely key mismatch.
pub fn loose_partition(partition: Option<&ConnectMap>) -> Option<Vec<(String, String)>> {
    let map = partition?;
    let mut fields: Vec<(String, String)> = map
        .iter()
        .map(|(k, v)| (k.to_lowercase(), loose_value(v)))
        .collect();
    fields.sort();
    Some(fields)
}

fn loose_value(v: &Value) -> String {
    let number = match v {
        Value::Float32(f) => Some(f64::from(*f)),
        Value::Float64(f) => Some(*f),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|f| f.is_finite()),
        other => other.as_i64().map(|i| i as f64),
    };
    match (v.as_i64(), number) {
        (Some(i), _) => i.to_string(),
        (None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => format!("{}", f as i64),
        (None, Some(f)) => format!("{f}"),
        (None, None) => match v {
            Value::String(s) => s.to_lowercase(),
            other => other.to_string(),
        },
    }
}

struct KeyVisitor;

impl<'de> de::Visitor<'de> for KeyVisitor {
    type Value = OffsetKey;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON array [connector name, partition object or null]")
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<OffsetKey, A::Error> {
        let connector: String = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let partition: Option<MapSeed> = seq
            .next_element_seed(OptionalMap)?
            .ok_or_else(|| de::Error::invalid_length(1, &self))?;
        if seq.next_element::<de::IgnoredAny>()?.is_some() {
            return Err(de::Error::custom(
                "the key array has more than two elements",
            ));
        }
        Ok(OffsetKey {
            connector,
            partition: partition.map(|m| m.0),
        })
    }
}

struct MapSeed(ConnectMap);
struct OptionalMap;

impl<'de> de::DeserializeSeed<'de> for OptionalMap {
    type Value = Option<MapSeed>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> de::Visitor<'de> for OptionalMap {
    type Value = Option<MapSeed>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a partition object or null")
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(MapVisitor).map(|m| Some(MapSeed(m)))
    }
}

struct MapVisitor;

impl<'de> de::Visitor<'de> for MapVisitor {
    type Value = ConnectMap;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut access: A) -> Result<ConnectMap, A::Error> {
        let mut map = ConnectMap::new();
        while let Some(key) = access.next_key::<String>()? {
            let value = access
                .next_value_seed(ValueSeed)
                .map_err(|e| de::Error::custom(format_args!("key {key:?}: {e}")))?;
            if map.get(&key).is_some() {
                return Err(de::Error::custom(format_args!("duplicate key {key:?}")));
            }
            map.insert(key, value).map_err(de::Error::custom)?;
        }
        Ok(map)
    }
}

struct ValueSeed;

impl<'de> de::DeserializeSeed<'de> for ValueSeed {
    type Value = Value;
    /// Takes the value's JSON text first and parses numbers from it: serde_json would turn an integer
    /// beyond 64 bits into a lossy float and may round a float off by one unit in the last place, and
    /// stored offsets must read back exactly as written.
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        let raw: &'de RawValue = de::Deserialize::deserialize(d)?;
        let text = raw.get();
        match text.as_bytes().first() {
            Some(b'-' | b'0'..=b'9') => parse_number(text).map_err(de::Error::custom),
            Some(b'[') => Err(de::Error::custom(
                "nested lists are not allowed in partitions or offsets",
            )),
            Some(b'{') => Err(de::Error::custom(
                "nested objects are not allowed in partitions or offsets",
            )),
            _ => serde_json::Deserializer::from_str(text)
                .deserialize_any(self)
                .map_err(de::Error::custom),
        }
    }
}

/// A JSON number Kafka Connect cannot hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum NumberError {
    #[error("number {0} is out of range")]
    OutOfRange(String),
    #[error("integer {0} does not fit 64 bits")]
    TooBig(String),
}

/// A JSON number as Kafka Connect reads it: without a fraction or exponent a 64-bit integer (larger
/// ones are rejected), otherwise a double, correctly rounded.
fn parse_number(text: &str) -> Result<Value, NumberError> {
    if text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(Value::Float64(v)),
            _ => Err(NumberError::OutOfRange(text.to_owned())),
        }
    } else {
        text.parse::<i64>()
            .map(Value::Int64)
            .map_err(|_| NumberError::TooBig(text.to_owned()))
    }
}

/// Reads the non-number primitives (numbers, lists and objects are handled from their text above).
impl<'de> de::Visitor<'de> for ValueSeed {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("null, a boolean, a number or a string")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
}
