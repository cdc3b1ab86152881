//! Which Kafka Connect converter turns a record's key or value into bytes (the `*.converter` settings
//! are read in [`crate::converter_config`]); the backends that convert (the Kafka sink) see this.

use std::fmt;

const JSON_CLASS: &str = "org.apache.kafka.connect.json.JsonConverter";
const STRING_CLASS: &str = "org.apache.kafka.connect.storage.StringConverter";
const BYTE_ARRAY_CLASS: &str = "org.apache.kafka.connect.converters.ByteArrayConverter";

/// A converter: how a record's key or value (JSON, with an optional Kafka Connect schema) becomes the
/// bytes of a Kafka record. Only records sent to Kafka are converted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConverterSpec {
    /// `org.apache.kafka.connect.json.JsonConverter`: JSON text; with `schemas_enable`, Kafka Connect's
    /// `{"schema":…,"payload":…}` envelope.
    Json {
        /// `schemas.enable` (default `true`).
        schemas_enable: bool,
    },
    /// `org.apache.kafka.connect.storage.StringConverter`: a string as its UTF-8 text.
    String,
    /// `org.apache.kafka.connect.converters.ByteArrayConverter`: bytes as they are.
    ByteArray,
}

impl Default for ConverterSpec {
    /// `JsonConverter` with `schemas.enable=true`, as in `connect-standalone.properties`.
    fn default() -> Self {
        ConverterSpec::Json {
            schemas_enable: true,
        }
    }
}

impl ConverterSpec {
    /// Kafka Connect's class name.
    pub const fn class_name(&self) -> &'static str {
        match self {
            ConverterSpec::Json { .. } => JSON_CLASS,
            ConverterSpec::String => STRING_CLASS,
            ConverterSpec::ByteArray => BYTE_ARRAY_CLASS,
        }
    }
}

/// `JsonConverter schemas.enable=true`, `StringConverter`, `ByteArrayConverter`.
impl fmt::Display for ConverterSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConverterSpec::Json { schemas_enable } => {
                write!(f, "JsonConverter schemas.enable={schemas_enable}")
            }
            ConverterSpec::String => f.write_str("StringConverter"),
            ConverterSpec::ByteArray => f.write_str("ByteArrayConverter"),
        }
    }
}
