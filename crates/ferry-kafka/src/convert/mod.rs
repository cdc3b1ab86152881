//! Converters: how a record's key and value (JSON, with an optional Kafka Connect schema) become the
//! bytes of a Kafka record, as Kafka Connect's converters of the same class names write them.
//!
//! | class | null value | string value | other values |
//! |---|---|---|---|
//! | `org.apache.kafka.connect.json.JsonConverter`, `schemas.enable=true` | no schema: null (a tombstone); optional schema: `{"schema":…,"payload":null}` | `{"schema":{"type":"string","optional":false},"payload":"hello"}` (`"schema":null` without a schema) | the same envelope; the payload written as the schema says |
//! | `JsonConverter`, `schemas.enable=false` | no schema: null; optional schema: `null` | `"hello"` | the JSON text |
//! | `org.apache.kafka.connect.storage.StringConverter` | null | the raw UTF-8 text `hello` | the JSON text (`5`, `true`, `{"a":1}`) |
//! | `org.apache.kafka.connect.converters.ByteArrayConverter` | null | with a `bytes` schema: the base64-decoded bytes; else the UTF-8 text | refused |
//!
//! JSON text is byte-for-byte Jackson's (Kafka Connect's JSON library): compact, Java number formatting
//! (`1.0E10`), upper-case `\u001F` escapes, object fields in the record's order. Payloads with a schema
//! follow the schema (struct fields in schema order, `1.0` for a double field given `1`).
//!
//! Where Ferry differs from Kafka Connect, and why:
//! - StringConverter writes non-string values as JSON text; Kafka Connect calls Java's `toString()`
//!   (`Struct{a=1}`, `{a=1}`), which is identical for numbers and booleans and not JSON otherwise.
//! - ByteArrayConverter accepts a string value (its UTF-8 bytes) with no schema or a `string` schema;
//!   Kafka Connect refuses any schema but `bytes` and any value but a byte array, so it cannot carry a
//!   FileStreamSource line at all. Numbers, booleans, arrays and objects are refused, as in Kafka
//!   Connect.
//! - A value that does not fit its schema is refused with a message saying where, where Kafka Connect
//!   raises a `DataException` (often a `ClassCastException` inside it).
//!
//! Headers are converted like Kafka Connect's default `SimpleHeaderConverter`: a string as its UTF-8
//! text, null as a null header value, anything else as its JSON text.

mod json;

pub use json::{PayloadError, PayloadProblem};

use std::sync::Arc;

use ferry_api::{Schema, SchemaKind};
use ferry_plugin::ConverterSpec;
use serde_json::Value;

/// A conversion failed: the value does not fit its schema or the converter.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{converter} cannot convert the {role}: {reason}")]
pub struct ConvertError {
    /// The converter's Kafka Connect class name.
    pub converter: &'static str,
    /// `key` or `value`.
    pub role: &'static str,
    /// What does not fit, and where.
    #[source]
    pub reason: ConvertReason,
}

/// Why a converter cannot write a key or value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConvertReason {
    /// JsonConverter: the value does not fit its schema.
    #[error(transparent)]
    Payload(#[from] PayloadError),
    /// ByteArrayConverter: a schema other than bytes or string.
    #[error(
        "a {schema_type} schema cannot be written as raw bytes (ByteArrayConverter takes bytes or \
         strings); use JsonConverter or StringConverter for this connector"
    )]
    RawBytesSchema {
        /// The schema's type.
        schema_type: &'static str,
    },
    /// ByteArrayConverter: a bytes value that is not base64.
    #[error("bytes must be a base64 string in the record; {text:?} is not ({source})")]
    NotBase64 {
        /// The string given.
        text: String,
        /// Why it does not decode.
        #[source]
        source: base64::DecodeError,
    },
    /// ByteArrayConverter: a value that is neither bytes nor a string.
    #[error(
        "ByteArrayConverter writes bytes and strings only, not {kind}; use JsonConverter or \
         StringConverter for this connector"
    )]
    NotBytes {
        /// The JSON type given (`a number`).
        kind: &'static str,
    },
}

/// Whether a converter converts keys or values (only named in errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The record key.
    Key,
    /// The record value.
    Value,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Key => "key",
            Role::Value => "value",
        }
    }
}

/// One configured converter (see the [module docs](self) for what each class writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Converter {
    spec: ConverterSpec,
}

impl From<ConverterSpec> for Converter {
    fn from(spec: ConverterSpec) -> Self {
        Self { spec }
    }
}

impl Default for Converter {
    /// `JsonConverter` with `schemas.enable=true`, Kafka Connect's standalone default.
    fn default() -> Self {
        Self::json(true)
    }
}

impl Converter {
    /// `org.apache.kafka.connect.json.JsonConverter` with `schemas.enable`.
    pub fn json(schemas_enable: bool) -> Self {
        ConverterSpec::Json { schemas_enable }.into()
    }

    /// `org.apache.kafka.connect.storage.StringConverter`.
    pub fn string() -> Self {
        ConverterSpec::String.into()
    }

    /// `org.apache.kafka.connect.converters.ByteArrayConverter`.
    pub fn byte_array() -> Self {
        ConverterSpec::ByteArray.into()
    }

    /// The configuration this converter was built from.
    pub fn spec(&self) -> ConverterSpec {
        self.spec
    }

    /// Kafka Connect's class name.
    pub fn class_name(&self) -> &'static str {
        self.spec.class_name()
    }

    /// The bytes of a key or value (`None` / JSON null: a null value); `None` for null bytes.
    ///
    /// # Errors
    /// The value does not fit its schema, or this converter cannot write it (see the module docs).
    pub fn convert(
        &self,
        role: Role,
        schema: Option<&Schema>,
        value: Option<&Value>,
    ) -> Result<Option<Vec<u8>>, ConvertError> {
        self.convert_with(role, schema, None, value)
    }

    /// [`Converter::convert`] for a record's shared schema ([`ferry_api::SourceRecord::value_schema`]):
    /// the same bytes, and the JSON form of a schema written just before is found by pointer.
    ///
    /// # Errors
    /// As [`Converter::convert`].
    pub fn convert_shared(
        &self,
        role: Role,
        schema: Option<&Arc<Schema>>,
        value: Option<&Value>,
    ) -> Result<Option<Vec<u8>>, ConvertError> {
        self.convert_with(role, schema.map(|s| &**s), schema, value)
    }

    fn convert_with(
        &self,
        role: Role,
        schema: Option<&Schema>,
        shared: Option<&Arc<Schema>>,
        value: Option<&Value>,
    ) -> Result<Option<Vec<u8>>, ConvertError> {
        let value = value.filter(|v| !v.is_null());
        let error = |reason: ConvertReason| ConvertError {
            converter: self.class_name(),
            role: role.name(),
            reason,
        };
        match self.spec {
            ConverterSpec::Json { schemas_enable } => {
                if schema.is_none() && value.is_none() {
                    return Ok(None);
                }
                let mut out = Vec::with_capacity(64);
                if schemas_enable {
                    out.extend_from_slice(b"{\"schema\":");
                    match schema {
                        Some(schema) => match shared {
                            Some(shared) => json::write_shared_schema(&mut out, shared),
                            None => json::write_schema(&mut out, schema),
                        }
                        .map_err(|e| error(e.into()))?,
                        None => out.extend_from_slice(b"null"),
                    }
                    out.extend_from_slice(b",\"payload\":");
                    json::write_payload(&mut out, schema, value).map_err(|e| error(e.into()))?;
                    out.push(b'}');
                } else {
                    json::write_payload(&mut out, schema, value).map_err(|e| error(e.into()))?;
                }
                Ok(Some(out))
            }
            ConverterSpec::String => Ok(value.map(|value| match value {
                Value::String(s) => s.as_bytes().to_vec(),
                other => {
                    let mut out = Vec::new();
                    ferry_offsets::jackson::write_value(&mut out, other);
                    out
                }
            })),
            ConverterSpec::ByteArray => {
                let bytes_schema = match schema.map(|s| &s.kind) {
                    None | Some(SchemaKind::String) => false,
                    Some(SchemaKind::Bytes) => true,
                    Some(_) => {
                        return Err(error(ConvertReason::RawBytesSchema {
                            schema_type: schema.map_or("", Schema::type_name),
                        }));
                    }
                };
                match value {
                    None => Ok(None),
                    Some(Value::String(s)) if bytes_schema => {
                        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, s)
                            .map(Some)
                            .map_err(|source| {
                                error(ConvertReason::NotBase64 {
                                    text: s.clone(),
                                    source,
                                })
                            })
                    }
                    Some(Value::String(s)) => Ok(Some(s.as_bytes().to_vec())),
                    Some(other) => Err(error(ConvertReason::NotBytes {
                        kind: json_kind(other),
                    })),
                }
            }
        }
    }
}

/// The bytes of a header value, as Kafka Connect's `SimpleHeaderConverter` writes them: a string as its
/// UTF-8 text, null as a null value, anything else as its JSON text.
pub fn header_value(value: &Value) -> Option<Vec<u8>> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(s.as_bytes().to_vec()),
        other => {
            let mut out = Vec::new();
            ferry_offsets::jackson::write_value(&mut out, other);
            Some(out)
        }
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The key and value converters of one connector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordConverters {
    /// `key.converter`.
    pub key: Converter,
    /// `value.converter`.
    pub value: Converter,
}

impl RecordConverters {
    /// Converters from their configurations.
    pub fn new(key: ConverterSpec, value: ConverterSpec) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
        }
    }
}
