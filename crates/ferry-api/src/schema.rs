//! Kafka Connect schemas for record keys and values.
//!
//! A connector may declare the schema of its record keys and values ([`SourceRecord::key_schema`],
//! [`SourceRecord::value_schema`]). Converters that write schemas (Kafka Connect's `JsonConverter` with
//! `schemas.enable=true`) put it next to the data; converters that do not (`StringConverter`) ignore it.
//! A record without a schema is schemaless, as in Kafka Connect.
//!
//! The model is Kafka Connect's `Schema`: a type, whether a null is allowed (`optional`), the
//! optional `name`, `version` and `doc`, string `parameters` in insertion order (Kafka Connect's
//! `SchemaBuilder` keeps them in a `LinkedHashMap`), and an optional `default` value of a primitive
//! type ([`Schema::with_default`]; defaults of arrays, maps and structs are not modelled). Kafka Connect's logical types are
//! named schemas over a primitive type: [`Schema::decimal`], [`Schema::date`], [`Schema::time`] and
//! [`Schema::timestamp`]. Structs have ordered
//! fields; arrays an item schema; maps a key and a value schema.
//!
//! ```
//! use ferry_api::{Field, Schema};
//!
//! // Kafka Connect's Schema.STRING_SCHEMA: a required string.
//! assert_eq!(Schema::string(), Schema::string().required());
//! // A row of two typed columns.
//! let row = Schema::struct_("com.example.Row", [
//!     Field::new("id", Schema::int64()),
//!     Field::new("note", Schema::string().optional()),
//! ]);
//! assert_eq!(row.field("note").map(|f| f.schema.optional), Some(true));
//! ```
//!
//! [`SourceRecord::key_schema`]: crate::SourceRecord::key_schema
//! [`SourceRecord::value_schema`]: crate::SourceRecord::value_schema

use std::fmt;

use crate::value::Value;

/// The type of a schema, with the schemas of its parts for arrays, maps and structs.
#[derive(Debug, Clone, PartialEq)]
pub enum SchemaKind {
    /// An 8-bit signed integer (`INT8`).
    Int8,
    /// A 16-bit signed integer (`INT16`).
    Int16,
    /// A 32-bit signed integer (`INT32`).
    Int32,
    /// A 64-bit signed integer (`INT64`).
    Int64,
    /// A 32-bit IEEE 754 float (`FLOAT32`).
    Float32,
    /// A 64-bit IEEE 754 float (`FLOAT64`).
    Float64,
    /// A boolean (`BOOLEAN`).
    Boolean,
    /// A UTF-8 string (`STRING`).
    String,
    /// A byte array (`BYTES`). In a record's JSON value, bytes are a base64 string.
    Bytes,
    /// A list of values of one schema (`ARRAY`).
    Array {
        /// The schema of every element.
        items: Box<Schema>,
    },
    /// A map (`MAP`).
    Map {
        /// The schema of the keys.
        keys: Box<Schema>,
        /// The schema of the values.
        values: Box<Schema>,
    },
    /// A struct of named, ordered fields (`STRUCT`).
    Struct {
        /// The fields, in order.
        fields: Vec<Field>,
    },
}

/// One field of a struct schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The field's name.
    pub name: String,
    /// The field's schema.
    pub schema: Schema,
}

impl Field {
    /// A field.
    pub fn new(name: impl Into<String>, schema: Schema) -> Self {
        Self {
            name: name.into(),
            schema,
        }
    }
}

/// A Kafka Connect schema: a type, whether null is allowed, and optional name, version and doc.
///
/// Built with the constructors ([`Schema::string`], [`Schema::struct_`], …), which make required
/// (non-optional) schemas like Kafka Connect's `SchemaBuilder`, and the builder methods
/// ([`Schema::optional`], [`Schema::named`], …).
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    /// The type, and the schemas of its parts.
    pub kind: SchemaKind,
    /// Whether a null value is allowed.
    pub optional: bool,
    /// The schema's name (for structs usually a fully qualified record name).
    pub name: Option<String>,
    /// The schema's version.
    pub version: Option<i32>,
    /// Documentation.
    pub doc: Option<String>,
    /// String parameters, in the order they were set (a Decimal's `scale`, …).
    pub parameters: Vec<(String, String)>,
    /// The default value (Kafka Connect's `Schema.defaultValue()`): JsonConverter writes it in the
    /// schema as `"default"` and writes it in place of a null value. A primitive of the schema's
    /// type (bytes as [`Value::Bytes`]); never [`Value::Null`] (no default is `None`).
    pub default: Option<Value>,
}

/// The name of Kafka Connect's `Decimal` logical type (bytes: the unscaled two's-complement value).
pub const DECIMAL_LOGICAL_NAME: &str = "org.apache.kafka.connect.data.Decimal";
/// The name of Kafka Connect's `Date` logical type (int32: days since the Unix epoch).
pub const DATE_LOGICAL_NAME: &str = "org.apache.kafka.connect.data.Date";
/// The name of Kafka Connect's `Time` logical type (int32: milliseconds since midnight).
pub const TIME_LOGICAL_NAME: &str = "org.apache.kafka.connect.data.Time";
/// The name of Kafka Connect's `Timestamp` logical type (int64: milliseconds since the Unix epoch).
pub const TIMESTAMP_LOGICAL_NAME: &str = "org.apache.kafka.connect.data.Timestamp";

impl Schema {
    /// A required schema of `kind`, without name, version or doc.
    pub fn new(kind: SchemaKind) -> Self {
        Self {
            kind,
            optional: false,
            name: None,
            version: None,
            doc: None,
            parameters: Vec::new(),
            default: None,
        }
    }

    /// Kafka Connect's `Decimal.builder(scale)`: required bytes named
    /// `org.apache.kafka.connect.data.Decimal`, version 1, parameter `scale`. The record's JSON value
    /// holds the unscaled value's big-endian two's-complement bytes as a base64 string.
    pub fn decimal(scale: i32) -> Self {
        Self::bytes()
            .named(DECIMAL_LOGICAL_NAME)
            .with_parameter("scale", scale.to_string())
            .with_version(1)
    }

    /// Kafka Connect's `Date.SCHEMA`: required int32 (days since 1970-01-01), version 1.
    pub fn date() -> Self {
        Self::int32().named(DATE_LOGICAL_NAME).with_version(1)
    }

    /// Kafka Connect's `Time.SCHEMA`: required int32 (milliseconds since midnight), version 1.
    pub fn time() -> Self {
        Self::int32().named(TIME_LOGICAL_NAME).with_version(1)
    }

    /// Kafka Connect's `Timestamp.SCHEMA`: required int64 (milliseconds since 1970-01-01T00:00Z),
    /// version 1.
    pub fn timestamp() -> Self {
        Self::int64().named(TIMESTAMP_LOGICAL_NAME).with_version(1)
    }

    /// Adds (or replaces, keeping its place) a parameter, builder style.
    pub fn with_parameter(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let (key, value) = (key.into(), value.into());
        match self.parameters.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.parameters.push((key, value)),
        }
        self
    }

    /// The value of parameter `key`.
    pub fn parameter(&self, key: &str) -> Option<&str> {
        self.parameters
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A required 8-bit integer (`Schema.INT8_SCHEMA`).
    pub fn int8() -> Self {
        Self::new(SchemaKind::Int8)
    }

    /// A required 16-bit integer (`Schema.INT16_SCHEMA`).
    pub fn int16() -> Self {
        Self::new(SchemaKind::Int16)
    }

    /// A required 32-bit integer (`Schema.INT32_SCHEMA`).
    pub fn int32() -> Self {
        Self::new(SchemaKind::Int32)
    }

    /// A required 64-bit integer (`Schema.INT64_SCHEMA`).
    pub fn int64() -> Self {
        Self::new(SchemaKind::Int64)
    }

    /// A required 32-bit float (`Schema.FLOAT32_SCHEMA`).
    pub fn float32() -> Self {
        Self::new(SchemaKind::Float32)
    }

    /// A required 64-bit float (`Schema.FLOAT64_SCHEMA`).
    pub fn float64() -> Self {
        Self::new(SchemaKind::Float64)
    }

    /// A required boolean (`Schema.BOOLEAN_SCHEMA`).
    pub fn boolean() -> Self {
        Self::new(SchemaKind::Boolean)
    }

    /// A required string (`Schema.STRING_SCHEMA`).
    pub fn string() -> Self {
        Self::new(SchemaKind::String)
    }

    /// Required bytes (`Schema.BYTES_SCHEMA`). The record's JSON value holds them as a base64 string.
    pub fn bytes() -> Self {
        Self::new(SchemaKind::Bytes)
    }

    /// A required array of `items`.
    pub fn array(items: Schema) -> Self {
        Self::new(SchemaKind::Array {
            items: Box::new(items),
        })
    }

    /// A required map from `keys` to `values`.
    pub fn map(keys: Schema, values: Schema) -> Self {
        Self::new(SchemaKind::Map {
            keys: Box::new(keys),
            values: Box::new(values),
        })
    }

    /// A required struct named `name` with `fields` in order.
    pub fn struct_(name: impl Into<String>, fields: impl IntoIterator<Item = Field>) -> Self {
        Self::unnamed_struct(fields).named(name)
    }

    /// A required struct without a name, with `fields` in order.
    pub fn unnamed_struct(fields: impl IntoIterator<Item = Field>) -> Self {
        Self::new(SchemaKind::Struct {
            fields: fields.into_iter().collect(),
        })
    }

    /// Allows null, builder style.
    pub fn optional(mut self) -> Self {
        self.optional = true;
        self
    }

    /// Refuses null (the default), builder style.
    pub fn required(mut self) -> Self {
        self.optional = false;
        self
    }

    /// Sets the name, builder style.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the version, builder style.
    pub fn with_version(mut self, version: i32) -> Self {
        self.version = Some(version);
        self
    }

    /// Sets the default value, builder style (Kafka Connect's `SchemaBuilder.defaultValue`), e.g.
    /// `Schema::string().optional().with_default("false")`. The value must be of the schema's type;
    /// a converter refuses a record whose schema's default does not fit.
    pub fn with_default(mut self, value: impl Into<Value>) -> Self {
        self.default = Some(value.into());
        self
    }

    /// Sets the documentation, builder style.
    pub fn with_doc(mut self, doc: impl Into<String>) -> Self {
        self.doc = Some(doc.into());
        self
    }

    /// The fields of a struct schema (empty for other types).
    pub fn fields(&self) -> &[Field] {
        match &self.kind {
            SchemaKind::Struct { fields } => fields,
            _ => &[],
        }
    }

    /// The field called `name` of a struct schema.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields().iter().find(|f| f.name == name)
    }

    /// The type's name as Kafka Connect's JSON schemas write it: `int8` … `int64`, `float` (32-bit),
    /// `double` (64-bit), `boolean`, `string`, `bytes`, `array`, `map`, `struct`.
    pub fn type_name(&self) -> &'static str {
        match self.kind {
            SchemaKind::Int8 => "int8",
            SchemaKind::Int16 => "int16",
            SchemaKind::Int32 => "int32",
            SchemaKind::Int64 => "int64",
            SchemaKind::Float32 => "float",
            SchemaKind::Float64 => "double",
            SchemaKind::Boolean => "boolean",
            SchemaKind::String => "string",
            SchemaKind::Bytes => "bytes",
            SchemaKind::Array { .. } => "array",
            SchemaKind::Map { .. } => "map",
            SchemaKind::Struct { .. } => "struct",
        }
    }
}

/// A short form for messages: `string`, `optional int32`, `struct com.example.Row`.
impl fmt::Display for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.optional {
            f.write_str("optional ")?;
        }
        f.write_str(self.type_name())?;
        if let Some(name) = &self.name {
            write!(f, " {name}")?;
        }
        Ok(())
    }
}
