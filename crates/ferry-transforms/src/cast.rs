//! Kafka Connect's `Cast` (`org.apache.kafka.connect.transforms.Cast$Key` / `$Value`): casts
//! fields of a struct or map, or the whole key or value, to int8, int16, int32, int64, float32,
//! float64, boolean or string (bytes only to string, as base64).
//!
//! `spec` is `field:type,…` or a single `type` for the whole value. Conversions follow Java's:
//! numbers narrow by truncation (`300` as int8 is `44`), strings parse (`Integer.parseInt`),
//! booleans are 1/0, a number is true when its `long` value is not 0, a string is true when it is
//! `true` in any case. Date, Time and Timestamp cast to string as Kafka Connect's
//! `Values.dateFormatFor` formats them (in UTC), and to numbers as their int32/int64
//! representation; a Decimal casts as a `BigDecimal`. A null key or value passes through.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ferry_api::config::Issues;
use ferry_api::transform::{Transformation, TransformationPlugin};
use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConnectError, DECIMAL_LOGICAL_NAME, Field, Schema, SchemaKind,
    SourceRecord,
};
use serde_json::Value;

use crate::types_common::{
    Side, boolean, copy_schema_basics, field_value, is_date_like, key_and_value_plugins,
    require_map, require_struct, type_name,
};
use crate::types_number::{BigDecimal, float32_json, java_double_string, java_float_string};
use crate::types_time::{MILLIS_PER_DAY, connect_date_string};

const SPEC: &str = "spec";
const REPLACE_NULL_WITH_DEFAULT: &str = "replace.null.with.default";
const PURPOSE: &str = "cast types";
const SUPPORTED_INPUT: &str =
    "[INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES]";
const SUPPORTED_OUTPUT: &str = "[INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING]";

pub(crate) fn plugins() -> Vec<TransformationPlugin> {
    key_and_value_plugins("Cast", |side| Box::new(Cast::new(side)))
}

/// A type Cast can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Int8,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    Boolean,
    String,
}

impl Target {
    fn kind(self) -> SchemaKind {
        match self {
            Target::Int8 => SchemaKind::Int8,
            Target::Int16 => SchemaKind::Int16,
            Target::Int32 => SchemaKind::Int32,
            Target::Int64 => SchemaKind::Int64,
            Target::Float32 => SchemaKind::Float32,
            Target::Float64 => SchemaKind::Float64,
            Target::Boolean => SchemaKind::Boolean,
            Target::String => SchemaKind::String,
        }
    }

    /// Kafka Connect's `Schema.Type.valueOf(name.toUpperCase())` restricted to the output types.
    fn parse(name: &str) -> Result<Self, SpecError> {
        let upper = name.trim().to_ascii_uppercase();
        Ok(match upper.as_str() {
            "INT8" => Target::Int8,
            "INT16" => Target::Int16,
            "INT32" => Target::Int32,
            "INT64" => Target::Int64,
            "FLOAT32" => Target::Float32,
            "FLOAT64" => Target::Float64,
            "BOOLEAN" => Target::Boolean,
            "STRING" => Target::String,
            "BYTES" | "ARRAY" | "MAP" | "STRUCT" => {
                return Err(SpecError::UnsupportedType(upper));
            }
            _ => return Err(SpecError::InvalidType(name.trim().to_owned())),
        })
    }
}

/// A `spec` Kafka Connect's Cast refuses, with its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum SpecError {
    #[error(
        "Cast transformation does not support casting to {0}; supported types are {SUPPORTED_OUTPUT}"
    )]
    UnsupportedType(String),
    #[error("Invalid type found in casting spec: {0}")]
    InvalidType(String),
    #[error("Must specify at least one field to cast.")]
    Empty,
    #[error("Invalid cast mapping: {0} (expected field:type or a single type)")]
    InvalidMapping(String),
    #[error(
        "Cast transformations that specify a type to cast the entire value to may only specify a single cast in their spec"
    )]
    WholeAndMore,
}

/// What to cast: the whole value, or some fields (in spec order; a repeated field keeps its last
/// type, as Kafka Connect's map does).
#[derive(Debug, Clone, PartialEq)]
enum Spec {
    Whole(Target),
    Fields(Vec<(String, Target)>),
}

impl Spec {
    fn target_of(&self, field: &str) -> Option<Target> {
        match self {
            Spec::Whole(_) => None,
            Spec::Fields(fields) => fields.iter().find(|(f, _)| f == field).map(|(_, t)| *t),
        }
    }
}

/// Kafka Connect's `Cast.parseFieldTypes` over the `spec` list.
fn parse_spec(raw: &str) -> Result<Spec, SpecError> {
    let raw = raw.trim();
    let mappings: Vec<&str> = if raw.is_empty() {
        Vec::new()
    } else {
        raw.split(',').map(str::trim).collect()
    };
    if mappings.is_empty() {
        return Err(SpecError::Empty);
    }
    let mut whole = None;
    let mut fields: Vec<(String, Target)> = Vec::new();
    for mapping in &mappings {
        // Java's String.split drops trailing empty parts: "foo:" is one part.
        let mut parts: Vec<&str> = mapping.split(':').collect();
        while parts.len() > 1 && parts.last() == Some(&"") {
            parts.pop();
        }
        match parts.as_slice() {
            [target] => whole = Some(Target::parse(target)?),
            [field, target] => {
                let target = Target::parse(target)?;
                let field = field.trim().to_owned();
                match fields.iter_mut().find(|(f, _)| *f == field) {
                    Some(slot) => slot.1 = target,
                    None => fields.push((field, target)),
                }
            }
            _ => {
                // Kafka Connect says "Invalid rename mapping" here (a copy from ReplaceField).
                return Err(SpecError::InvalidMapping((*mapping).to_owned()));
            }
        }
    }
    match whole {
        Some(_) if mappings.len() > 1 => Err(SpecError::WholeAndMore),
        Some(target) => Ok(Spec::Whole(target)),
        None => Ok(Spec::Fields(fields)),
    }
}

/// A value as Kafka Connect holds it in Java, before casting.
#[derive(Debug, Clone, PartialEq)]
enum Input {
    Byte(i8),
    Short(i16),
    Int(i32),
    Long(i64),
    Float(f32),
    Double(f64),
    Bool(bool),
    Str(String),
    Bytes(Vec<u8>),
    Decimal(BigDecimal),
    /// A Date, Time or Timestamp on its way to a string (`java.util.Date`, milliseconds).
    Date(i64),
}

impl Input {
    /// The Java `Number.longValue()` of a number.
    fn long(&self) -> Option<i64> {
        Some(match self {
            Input::Byte(v) => i64::from(*v),
            Input::Short(v) => i64::from(*v),
            Input::Int(v) => i64::from(*v),
            Input::Long(v) => *v,
            Input::Float(v) => *v as i64,
            Input::Double(v) => *v as i64,
            Input::Decimal(d) => d.long_value(),
            _ => return None,
        })
    }

    /// The Java `Number.intValue()` of a number (floats saturate, integers and decimals wrap).
    fn int(&self) -> Option<i32> {
        Some(match self {
            Input::Float(v) => *v as i32,
            Input::Double(v) => *v as i32,
            Input::Decimal(d) => d.int_value(),
            other => other.long()? as i32,
        })
    }

    fn java_class(&self) -> &'static str {
        match self {
            Input::Byte(_) => "class java.lang.Byte",
            Input::Short(_) => "class java.lang.Short",
            Input::Int(_) => "class java.lang.Integer",
            Input::Long(_) => "class java.lang.Long",
            Input::Float(_) => "class java.lang.Float",
            Input::Double(_) => "class java.lang.Double",
            Input::Bool(_) => "class java.lang.Boolean",
            Input::Str(_) => "class java.lang.String",
            Input::Bytes(_) => "class [B",
            Input::Decimal(_) => "class java.math.BigDecimal",
            Input::Date(_) => "class java.util.Date",
        }
    }

    /// Java's `value.toString()` for the out-of-range message.
    fn java_string(&self) -> String {
        match self {
            Input::Str(s) => s.clone(),
            other => cast_to_string(other),
        }
    }
}

fn unexpected(input: &Input) -> ConnectError {
    ConnectError::fatal(format!(
        "Unexpected type in Cast transformation: {}",
        input.java_class()
    ))
}

fn out_of_range(input: &Input) -> ConnectError {
    ConnectError::fatal(format!(
        "Value ({}) was out of range for requested data type",
        input.java_string()
    ))
}

fn mismatch(value: &Value, schema: &Schema) -> ConnectError {
    ConnectError::fatal(format!(
        "Cast transformation: value {value} does not match its schema ({schema}); fix the connector's records"
    ))
}

/// Reads a non-null JSON value as Kafka Connect's Java value: by its schema when there is one,
/// else as `JsonConverter` would read it schemaless.
fn input_of(value: &Value, schema: Option<&Schema>, target: Target) -> Result<Input, ConnectError> {
    let Some(schema) = schema else {
        return schemaless_input(value);
    };
    match &schema.kind {
        SchemaKind::Array { .. } | SchemaKind::Map { .. } | SchemaKind::Struct { .. } => {
            return Err(unsupported_input(type_name(&schema.kind)));
        }
        _ => {}
    }
    let int = |min: i64, max: i64| {
        value
            .as_i64()
            .filter(|v| (min..=max).contains(v))
            .ok_or_else(|| mismatch(value, schema))
    };
    // Date, Time and Timestamp become a java.util.Date only on their way to a string; otherwise
    // Kafka Connect casts their int32/int64 representation.
    if is_date_like(schema) && target == Target::String {
        let raw = int(i64::MIN, i64::MAX)?;
        let millis = if schema.name.as_deref() == Some(ferry_api::DATE_LOGICAL_NAME) {
            raw.checked_mul(MILLIS_PER_DAY)
                .ok_or_else(|| mismatch(value, schema))?
        } else {
            raw
        };
        return Ok(Input::Date(millis));
    }
    Ok(match schema.kind {
        SchemaKind::Int8 => Input::Byte(int(i8::MIN.into(), i8::MAX.into())? as i8),
        SchemaKind::Int16 => Input::Short(int(i16::MIN.into(), i16::MAX.into())? as i16),
        SchemaKind::Int32 => Input::Int(int(i32::MIN.into(), i32::MAX.into())? as i32),
        SchemaKind::Int64 => Input::Long(int(i64::MIN, i64::MAX)?),
        // A float32 travels as the f64 of its decimal form; Java holds the float.
        SchemaKind::Float32 => {
            Input::Float(value.as_f64().ok_or_else(|| mismatch(value, schema))? as f32)
        }
        SchemaKind::Float64 => {
            Input::Double(value.as_f64().ok_or_else(|| mismatch(value, schema))?)
        }
        SchemaKind::Boolean => Input::Bool(value.as_bool().ok_or_else(|| mismatch(value, schema))?),
        SchemaKind::String => Input::Str(
            value
                .as_str()
                .ok_or_else(|| mismatch(value, schema))?
                .to_owned(),
        ),
        SchemaKind::Bytes => bytes_input(value, schema)?,
        SchemaKind::Array { .. } | SchemaKind::Map { .. } | SchemaKind::Struct { .. } => {
            return Err(unsupported_input(type_name(&schema.kind)));
        }
    })
}

/// Reads a value without schema as `JsonConverter` would: a boolean, a long, a double or a string.
fn schemaless_input(value: &Value) -> Result<Input, ConnectError> {
    match value {
        Value::Bool(b) => Ok(Input::Bool(*b)),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Ok(Input::Long(i))
            } else if n.is_u64() {
                Err(ConnectError::fatal(
                    "Cast transformation was passed a value of type class java.math.BigInteger which is not supported by Connect's data API",
                ))
            } else {
                Ok(Input::Double(n.as_f64().unwrap_or(f64::NAN)))
            }
        }
        Value::String(s) => Ok(Input::Str(s.clone())),
        Value::Array(_) => Err(unsupported_input("ARRAY")),
        Value::Object(_) => Err(unsupported_input("MAP")),
        Value::Null => Err(unsupported_input("NULL")),
    }
}

/// Reads a bytes value (base64): a Decimal when the schema is one, else the bytes.
fn bytes_input(value: &Value, schema: &Schema) -> Result<Input, ConnectError> {
    let bytes = value
        .as_str()
        .and_then(|s| BASE64.decode(s).ok())
        .ok_or_else(|| mismatch(value, schema))?;
    Ok(if schema.name.as_deref() == Some(DECIMAL_LOGICAL_NAME) {
        let scale = schema
            .parameter("scale")
            .and_then(|s| s.parse::<i32>().ok())
            .ok_or_else(|| {
                ConnectError::fatal("Invalid Decimal schema: scale parameter not found.")
            })?;
        Input::Decimal(
            BigDecimal::from_twos_complement(&bytes, scale)
                .map_err(|e| ConnectError::fatal(e.to_string()))?,
        )
    } else {
        Input::Bytes(bytes)
    })
}

fn unsupported_input(type_name: &str) -> ConnectError {
    ConnectError::fatal(format!(
        "Cast transformation does not support casting from {type_name}; supported types are {SUPPORTED_INPUT}"
    ))
}

/// Kafka Connect's `Cast.castValueToType`: null stays null.
fn cast_value(
    value: &Value,
    schema: Option<&Schema>,
    target: Target,
) -> Result<Value, ConnectError> {
    if value.is_null() {
        return Ok(Value::Null);
    }
    let input = input_of(value, schema, target)?;
    Ok(match target {
        Target::Int8 => Value::from(cast_to_int::<i8>(&input, |i| i64::from(i as i8))?),
        Target::Int16 => Value::from(cast_to_int::<i16>(&input, |i| i64::from(i as i16))?),
        Target::Int32 => Value::from(cast_to_int::<i32>(&input, i64::from)?),
        Target::Int64 => Value::from(match &input {
            Input::Bool(b) => i64::from(*b),
            Input::Str(s) => s.parse::<i64>().map_err(|_| out_of_range(&input))?,
            other => other.long().ok_or_else(|| unexpected(other))?,
        }),
        Target::Float32 => {
            let f = match &input {
                Input::Bool(b) => f32::from(u8::from(*b)),
                Input::Str(s) => java_float_text(s)
                    .and_then(|t| t.parse::<f32>().ok())
                    .ok_or_else(|| out_of_range(&input))?,
                Input::Byte(v) => f32::from(*v),
                Input::Short(v) => f32::from(*v),
                Input::Int(v) => *v as f32,
                Input::Long(v) => *v as f32,
                Input::Float(v) => *v,
                Input::Double(v) => *v as f32,
                Input::Decimal(d) => d.float_value(),
                other => return Err(unexpected(other)),
            };
            float32_json(f).ok_or_else(|| not_finite(&input))?
        }
        Target::Float64 => {
            let f = match &input {
                Input::Bool(b) => f64::from(u8::from(*b)),
                Input::Str(s) => java_float_text(s)
                    .and_then(|t| t.parse::<f64>().ok())
                    .ok_or_else(|| out_of_range(&input))?,
                Input::Byte(v) => f64::from(*v),
                Input::Short(v) => f64::from(*v),
                Input::Int(v) => f64::from(*v),
                Input::Long(v) => *v as f64,
                Input::Float(v) => f64::from(*v),
                Input::Double(v) => *v,
                Input::Decimal(d) => d.double_value(),
                other => return Err(unexpected(other)),
            };
            serde_json::Number::from_f64(f)
                .map(Value::Number)
                .ok_or_else(|| not_finite(&input))?
        }
        Target::Boolean => Value::Bool(match &input {
            Input::Bool(b) => *b,
            Input::Str(s) => s.eq_ignore_ascii_case("true"),
            other => other.long().ok_or_else(|| unexpected(other))? != 0,
        }),
        Target::String => Value::String(cast_to_string(&input)),
    })
}

/// Casts to int8/int16/int32: numbers narrow as Java's `byteValue()`/`shortValue()`/`intValue()`
/// (through `intValue()`), strings parse within the type's range.
fn cast_to_int<T: Into<i64> + std::str::FromStr>(
    input: &Input,
    narrow: fn(i32) -> i64,
) -> Result<i64, ConnectError> {
    match input {
        Input::Bool(b) => Ok(i64::from(*b)),
        Input::Str(s) => s
            .parse::<T>()
            .map(Into::into)
            .map_err(|_| out_of_range(input)),
        other => Ok(narrow(other.int().ok_or_else(|| unexpected(other))?)),
    }
}

fn not_finite(input: &Input) -> ConnectError {
    ConnectError::fatal(format!(
        "Cast transformation: {} cast to a float is not finite, which JSON cannot hold",
        input.java_string()
    ))
}

/// The text Java's `Float.parseFloat` / `Double.parseDouble` would read, ready for Rust's
/// parser (which rounds correctly, as Java does): surrounding whitespace and an `f`/`d` suffix
/// removed. `None` for what Rust reads but Java does not (`inf`, `nan`).
fn java_float_text(s: &str) -> Option<&str> {
    let t = s.trim();
    let t = t
        .strip_suffix(['f', 'F', 'd', 'D'])
        .filter(|rest| !rest.is_empty())
        .unwrap_or(t);
    let letters_ok = t
        .chars()
        .all(|c| !c.is_ascii_alphabetic() || matches!(c, 'e' | 'E'));
    letters_ok.then_some(t)
}

/// Kafka Connect's `Cast.castToString`.
fn cast_to_string(input: &Input) -> String {
    match input {
        Input::Byte(v) => v.to_string(),
        Input::Short(v) => v.to_string(),
        Input::Int(v) => v.to_string(),
        Input::Long(v) => v.to_string(),
        Input::Float(v) => java_float_string(*v),
        Input::Double(v) => java_double_string(*v),
        Input::Bool(b) => b.to_string(),
        Input::Str(s) => s.clone(),
        Input::Bytes(b) => BASE64.encode(b),
        Input::Decimal(d) => d.to_java_string(),
        Input::Date(millis) => connect_date_string(*millis),
    }
}

/// `Cast$Key` / `Cast$Value`.
struct Cast {
    side: Side,
    spec: Option<Spec>,
}

impl Cast {
    fn new(side: Side) -> Self {
        Self { side, spec: None }
    }

    /// Kafka Connect's `Cast.getOrBuildSchema`.
    fn updated_schema(spec: &Spec, schema: &Schema) -> Result<Schema, ConnectError> {
        let mut updated = match spec {
            Spec::Whole(target) => copy_schema_basics(schema, target.kind()),
            Spec::Fields(_) => {
                let SchemaKind::Struct { fields } = &schema.kind else {
                    return Err(ConnectError::fatal("Cannot list fields on non-struct type"));
                };
                let fields = fields
                    .iter()
                    .map(|field| match spec.target_of(&field.name) {
                        Some(target) => {
                            // A new SchemaBuilder: the type, and whether it is optional.
                            let mut cast = Schema::new(target.kind());
                            cast.optional = field.schema.optional;
                            Field::new(field.name.clone(), cast)
                        }
                        None => field.clone(),
                    })
                    .collect();
                copy_schema_basics(schema, SchemaKind::Struct { fields })
            }
        };
        updated.optional = schema.optional;
        Ok(updated)
    }
}

impl Transformation for Cast {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![
            ConfigKey::required(
                SPEC,
                "List of fields and the type to cast them to of the form field1:type,field2:type to cast fields of Maps or Structs. A single type to cast the entire value. Valid types are int8, int16, int32, int64, float32, float64, boolean, and string. Note that binary fields can only be cast to string.",
            ),
            ConfigKey::optional(
                REPLACE_NULL_WITH_DEFAULT,
                Some("true"),
                "Whether to replace fields that have a default value and that are null to the default value. When set to true, the default value is used, otherwise null is used. (Ferry's transforms do not apply schema default values yet: a null stays null.)",
            ),
        ]
    }

    fn configure(&mut self, config: &Config) -> Result<(), Vec<ConfigIssue>> {
        let mut issues = Issues::default();
        let spec = match config.get(SPEC) {
            None => {
                issues.push(
                    SPEC,
                    "Missing required configuration \"spec\" which has no default value.",
                );
                None
            }
            Some(raw) => match parse_spec(raw) {
                Ok(spec) => Some(spec),
                Err(e) => {
                    issues.push(SPEC, e.to_string());
                    None
                }
            },
        };
        // Accepted and checked for Kafka Connect compatibility; Ferry's schemas have no defaults.
        boolean(config, REPLACE_NULL_WITH_DEFAULT, true, &mut issues);
        issues.finish(|| ())?;
        self.spec = spec;
        Ok(())
    }

    fn apply(&mut self, mut record: SourceRecord) -> Result<Option<SourceRecord>, ConnectError> {
        let Some(spec) = &self.spec else {
            return Err(ConnectError::fatal(
                "Cast transformation used before it was configured",
            ));
        };
        let (value, schema) = self.side.get(&record);
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return Ok(Some(record));
        };
        let (new_value, new_schema) = match (schema, spec) {
            (None, Spec::Whole(target)) => (cast_value(value, None, *target)?, None),
            (None, Spec::Fields(fields)) => {
                let mut map = require_map(Some(value), PURPOSE)?.clone();
                for (field, target) in fields {
                    // A missing field is cast from null, so it appears as null (as in Java).
                    let cast = cast_value(field_value(&map, field), None, *target)?;
                    map.insert(field.clone(), cast);
                }
                (Value::Object(map), None)
            }
            (Some(schema), Spec::Whole(target)) => {
                let updated = Self::updated_schema(spec, schema)?;
                (cast_value(value, Some(schema), *target)?, Some(updated))
            }
            (Some(schema), Spec::Fields(_)) => {
                let updated = Self::updated_schema(spec, schema)?;
                let object = require_struct(Some(value), schema, PURPOSE)?;
                let mut out = serde_json::Map::new();
                for field in schema.fields() {
                    let original = field_value(object, &field.name);
                    let cast = match spec.target_of(&field.name) {
                        Some(target) => cast_value(original, Some(&field.schema), target)?,
                        None => original.clone(),
                    };
                    out.insert(field.name.clone(), cast);
                }
                (Value::Object(out), Some(updated))
            }
        };
        self.side.set(&mut record, new_schema, Some(new_value));
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn configured(side: Side, pairs: &[(&str, &str)]) -> Cast {
        let mut cast = Cast::new(side);
        let config: Config = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        cast.configure(&config).unwrap();
        cast
    }

    fn value_cast(spec: &str) -> Cast {
        configured(Side::Value, &[(SPEC, spec)])
    }

    fn issues(spec: &str) -> Vec<ConfigIssue> {
        let config: Config = [(SPEC.to_owned(), spec.to_owned())].into_iter().collect();
        Cast::new(Side::Value).configure(&config).unwrap_err()
    }

    fn apply(cast: &mut Cast, record: SourceRecord) -> SourceRecord {
        cast.apply(record).unwrap().unwrap()
    }

    fn decimal_json(unscaled: i64) -> Value {
        let bytes = unscaled.to_be_bytes();
        let start = bytes
            .windows(2)
            .position(|w| !((w[0] == 0 && w[1] & 0x80 == 0) || (w[0] == 0xff && w[1] & 0x80 != 0)))
            .unwrap_or(7);
        json!(BASE64.encode(&bytes[start..]))
    }

    #[test]
    fn plugins_answer_to_kafka_connect_class_names() {
        let names: Vec<String> = plugins().iter().map(|p| p.class().to_owned()).collect();
        assert_eq!(
            names,
            [
                "org.apache.kafka.connect.transforms.Cast$Key",
                "org.apache.kafka.connect.transforms.Cast$Value"
            ]
        );
    }

    #[test]
    fn bad_specs_are_config_issues_on_spec() {
        for (spec, message) in [
            ("", "Must specify at least one field to cast."),
            (
                "foo:faketype",
                "Invalid type found in casting spec: faketype",
            ),
            (
                "foo:array",
                "Cast transformation does not support casting to ARRAY; supported types are [INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING]",
            ),
            (
                "array",
                "Cast transformation does not support casting to ARRAY; supported types are [INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING]",
            ),
            (
                "foo:bytes",
                "Cast transformation does not support casting to BYTES; supported types are [INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING]",
            ),
            (
                "foo:int8:extra",
                "Invalid cast mapping: foo:int8:extra (expected field:type or a single type)",
            ),
            (
                "foo:int8,int32",
                "Cast transformations that specify a type to cast the entire value to may only specify a single cast in their spec",
            ),
        ] {
            let issues = issues(spec);
            assert_eq!(issues.len(), 1, "{spec}");
            assert_eq!(issues[0].key, "spec", "{spec}");
            assert_eq!(issues[0].message, message, "{spec}");
        }
        let missing = Cast::new(Side::Key).configure(&Config::new()).unwrap_err();
        assert_eq!(missing[0].key, "spec");
        let config: Config = [
            (SPEC.to_owned(), "int8".to_owned()),
            (REPLACE_NULL_WITH_DEFAULT.to_owned(), "maybe".to_owned()),
        ]
        .into_iter()
        .collect();
        let bad_bool = Cast::new(Side::Key).configure(&config).unwrap_err();
        assert_eq!(bad_bool[0].key, REPLACE_NULL_WITH_DEFAULT);
    }

    #[test]
    fn null_keys_and_values_pass_through() {
        let mut value = value_cast("foo:int64");
        let record = SourceRecord::builder("topic")
            .key_schema(Schema::string())
            .key(json!("key"))
            .value_schema(Schema::string().optional())
            .build();
        assert_eq!(apply(&mut value, record.clone()), record);
        let mut key = configured(Side::Key, &[(SPEC, "foo:int64")]);
        let record = SourceRecord::builder("topic").value(json!("value")).build();
        assert_eq!(apply(&mut key, record.clone()), record);
    }

    #[test]
    fn whole_key_with_schema_int32_to_int8() {
        let mut cast = configured(Side::Key, &[(SPEC, "int8")]);
        let record = SourceRecord::builder("topic")
            .key_schema(Schema::int32())
            .key(json!(42))
            .value_schema(Schema::string())
            .value(json!("bogus"))
            .build();
        let out = apply(&mut cast, record);
        assert_eq!(out.key_schema.as_deref().cloned(), Some(Schema::int8()));
        assert_eq!(out.key, Some(json!(42)));
        assert_eq!(out.value, Some(json!("bogus")));
    }

    #[test]
    fn whole_value_with_schema_to_every_type() {
        for (spec, input, expected, kind) in [
            ("int8", json!(42), json!(42), SchemaKind::Int8),
            ("int16", json!(42), json!(42), SchemaKind::Int16),
            ("int32", json!(42), json!(42), SchemaKind::Int32),
            ("int64", json!(42), json!(42), SchemaKind::Int64),
            ("float32", json!(42), json!(42.0), SchemaKind::Float32),
            ("float64", json!(42), json!(42.0), SchemaKind::Float64),
            ("boolean", json!(42), json!(true), SchemaKind::Boolean),
            ("boolean", json!(0), json!(false), SchemaKind::Boolean),
            ("string", json!(42), json!("42"), SchemaKind::String),
            ("int8", json!(300), json!(44), SchemaKind::Int8),
        ] {
            let mut cast = value_cast(spec);
            let record = SourceRecord::builder("topic")
                .value_schema(Schema::int32())
                .value(input)
                .build();
            let out = apply(&mut cast, record);
            assert_eq!(out.value, Some(expected), "{spec}");
            assert_eq!(
                out.value_schema.as_deref().cloned(),
                Some(Schema::new(kind)),
                "{spec}"
            );
        }
    }

    #[test]
    fn whole_value_schemaless_to_every_type() {
        for (spec, input, expected) in [
            ("int8", json!(42), json!(42)),
            ("int16", json!(42), json!(42)),
            ("int32", json!(42), json!(42)),
            ("int64", json!(42), json!(42)),
            ("float32", json!(42), json!(42.0)),
            ("float64", json!(42), json!(42.0)),
            ("boolean", json!(42), json!(true)),
            ("boolean", json!(0), json!(false)),
            ("string", json!(42), json!("42")),
            ("string", json!(42.5), json!("42.5")),
            ("string", json!(true), json!("true")),
            ("int32", json!("42"), json!(42)),
            ("int32", json!(42.9), json!(42)),
            ("boolean", json!("TRUE"), json!(true)),
            ("boolean", json!("yes"), json!(false)),
            ("float64", json!("1.5"), json!(1.5)),
            ("float32", json!("0.1"), json!(0.1)),
            ("float32", json!(" 2.5f "), json!(2.5)),
            ("int16", json!(70_000), json!(4464)),
        ] {
            let mut cast = value_cast(spec);
            let out = apply(
                &mut cast,
                SourceRecord::builder("t").value(input.clone()).build(),
            );
            assert_eq!(out.value, Some(expected), "{spec} {input}");
            assert_eq!(out.value_schema.as_deref().cloned(), None);
        }
    }

    #[test]
    fn whole_value_keeps_the_schema_name_version_and_optionality() {
        let mut cast = value_cast("int64");
        let schema = Schema::int32()
            .named("com.example.Id")
            .with_version(3)
            .optional();
        let out = apply(
            &mut cast,
            SourceRecord::builder("t")
                .value_schema(schema)
                .value(json!(7))
                .build(),
        );
        assert_eq!(
            out.value_schema.as_deref().cloned(),
            Some(
                Schema::int64()
                    .named("com.example.Id")
                    .with_version(3)
                    .optional()
            )
        );
    }

    #[test]
    fn unsupported_and_unparsable_values_fail_with_kafka_connect_messages() {
        let mut cast = value_cast("int8");
        let err = cast
            .apply(SourceRecord::builder("t").value(json!(["foo"])).build())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Cast transformation does not support casting from ARRAY; supported types are [INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES]"
        );
        let err = cast
            .apply(SourceRecord::builder("t").value(json!("300")).build())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Value (300) was out of range for requested data type"
        );
        let mut cast = value_cast("int32");
        let err = cast
            .apply(
                SourceRecord::builder("t")
                    .value_schema(Schema::bytes())
                    .value(json!("AAE="))
                    .build(),
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Unexpected type in Cast transformation: class [B"
        );
        let mut fields = value_cast("a:int8");
        let err = fields
            .apply(SourceRecord::builder("t").value(json!(42)).build())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Only Map objects supported in absence of schema for [cast types], found: java.lang.Long"
        );
        let err = fields
            .apply(
                SourceRecord::builder("t")
                    .value_schema(Schema::int32())
                    .value(json!(42))
                    .build(),
            )
            .unwrap_err();
        assert_eq!(err.to_string(), "Cannot list fields on non-struct type");
    }

    #[test]
    fn fields_with_schema_like_cast_test() {
        let mut cast = value_cast(
            "int8:int16,int16:int32,int32:int64,int64:boolean,float32:float64,float64:boolean,boolean:int8,string:int32,bigdecimal:string,date:string,optional:int32,bytes:string",
        );
        let schema = Schema::struct_(
            "com.example.Row",
            [
                Field::new("int8", Schema::int8()),
                Field::new("int16", Schema::int16().optional()),
                Field::new("int32", Schema::int32()),
                Field::new("int64", Schema::int64()),
                Field::new("float32", Schema::float32()),
                Field::new("float64", Schema::float64()),
                Field::new("boolean", Schema::boolean()),
                Field::new("string", Schema::string()),
                Field::new("bigdecimal", Schema::decimal(0)),
                Field::new("date", Schema::date()),
                Field::new("optional", Schema::float32().optional()),
                Field::new("timestamp", Schema::timestamp()),
                Field::new("bytes", Schema::bytes()),
            ],
        )
        .with_version(2);
        let value = json!({
            "int8": 8, "int16": 16, "int32": 32, "int64": 64, "float32": 32.0, "float64": -64.0,
            "boolean": true, "string": "42", "bigdecimal": decimal_json(42), "date": 1,
            "timestamp": 0, "bytes": BASE64.encode([0xFE, 0xDC, 0xBA, 0x98, 0x76, 0x54, 0x32, 0x10]),
        });
        let out = apply(
            &mut cast,
            SourceRecord::builder("t")
                .value_schema(schema)
                .value(value)
                .build(),
        );
        assert_eq!(
            out.value,
            Some(json!({
                "int8": 8, "int16": 16, "int32": 32, "int64": true, "float32": 32.0,
                "float64": true, "boolean": 1, "string": 42, "bigdecimal": "42",
                "date": "1970-01-02", "optional": null, "timestamp": 0, "bytes": "/ty6mHZUMhA=",
            }))
        );
        let schema = out.value_schema.unwrap();
        assert_eq!(schema.name.as_deref(), Some("com.example.Row"));
        assert_eq!(schema.version, Some(2));
        let kind = |name: &str| schema.field(name).unwrap().schema.clone();
        assert_eq!(kind("int8"), Schema::int16());
        assert_eq!(kind("int16"), Schema::int32().optional());
        assert_eq!(kind("int32"), Schema::int64());
        assert_eq!(kind("int64"), Schema::boolean());
        assert_eq!(kind("float32"), Schema::float64());
        assert_eq!(kind("boolean"), Schema::int8());
        assert_eq!(kind("string"), Schema::int32());
        // A cast field gets a fresh schema: the Decimal's name and scale are gone.
        assert_eq!(kind("bigdecimal"), Schema::string());
        assert_eq!(kind("date"), Schema::string());
        assert_eq!(kind("optional"), Schema::int32().optional());
        assert_eq!(kind("timestamp"), Schema::timestamp());
        assert_eq!(kind("bytes"), Schema::string());
    }

    #[test]
    fn logical_types_to_primitives_like_cast_test() {
        let mut cast = value_cast(
            "date_to_int32:int32,timestamp_to_int64:int64,time_to_int64:int64,decimal_to_int32:int32,timestamp_to_float64:float64,null_timestamp_to_int32:int32",
        );
        let schema = Schema::unnamed_struct([
            Field::new("date_to_int32", Schema::date()),
            Field::new("timestamp_to_int64", Schema::timestamp()),
            Field::new("time_to_int64", Schema::time()),
            Field::new("decimal_to_int32", Schema::decimal(0)),
            Field::new("timestamp_to_float64", Schema::timestamp()),
            Field::new("null_timestamp_to_int32", Schema::timestamp().optional()),
        ]);
        let value = json!({
            "date_to_int32": 1, "timestamp_to_int64": 0, "time_to_int64": 1,
            "decimal_to_int32": decimal_json(i64::from(i32::MAX) + 1),
            "timestamp_to_float64": i64::MAX, "null_timestamp_to_int32": null,
        });
        let out = apply(
            &mut cast,
            SourceRecord::builder("t")
                .value_schema(schema)
                .value(value)
                .build(),
        );
        assert_eq!(
            out.value,
            Some(json!({
                "date_to_int32": 1, "timestamp_to_int64": 0, "time_to_int64": 1,
                "decimal_to_int32": i32::MIN, "timestamp_to_float64": 9.223372036854776E18,
                "null_timestamp_to_int32": null,
            }))
        );
        assert_eq!(
            out.value_schema
                .unwrap()
                .field("null_timestamp_to_int32")
                .unwrap()
                .schema,
            Schema::int32().optional()
        );
    }

    #[test]
    fn logical_types_to_string_like_values_date_format_for() {
        let mut cast = value_cast("date:string,decimal:string,time:string,timestamp:string");
        let schema = Schema::unnamed_struct([
            Field::new("date", Schema::date()),
            Field::new("decimal", Schema::decimal(2)),
            Field::new("time", Schema::time()),
            Field::new("timestamp", Schema::timestamp()),
        ]);
        let value = json!({
            "date": 17_167, "decimal": decimal_json(-198_250), "time": 3_600_000,
            "timestamp": 1_483_228_800_123_i64,
        });
        let out = apply(
            &mut cast,
            SourceRecord::builder("t")
                .value_schema(schema)
                .value(value)
                .build(),
        );
        assert_eq!(
            out.value,
            Some(json!({
                "date": "2017-01-01", "decimal": "-1982.50", "time": "01:00:00.000Z",
                "timestamp": "2017-01-01T00:00:00.123Z",
            }))
        );
        // Whole value: CastTest.castWholeDateRecordValueWithSchemaString.
        let mut whole = value_cast("string");
        let out = apply(
            &mut whole,
            SourceRecord::builder("t")
                .value_schema(Schema::timestamp())
                .value(json!(MILLIS_PER_DAY + 1))
                .build(),
        );
        assert_eq!(out.value, Some(json!("1970-01-02T00:00:00.001Z")));
        assert_eq!(
            out.value_schema.map(|s| s.kind.clone()),
            Some(SchemaKind::String)
        );
    }

    #[test]
    fn fields_schemaless_like_cast_test() {
        let mut cast = value_cast(
            "int8:int16,int16:int32,int32:int64,int64:boolean,float32:float64,float64:boolean,boolean:int8,string:int32,missing:int8",
        );
        let value = json!({
            "int8": 8, "int16": 16, "int32": 32, "int64": 64, "float32": 32.0,
            "float64": -64.0, "boolean": true, "string": "42", "other": "kept",
        });
        let out = apply(&mut cast, SourceRecord::builder("t").value(value).build());
        assert_eq!(
            out.value,
            Some(json!({
                "int8": 8, "int16": 16, "int32": 32, "int64": true, "float32": 32.0,
                "float64": true, "boolean": 1, "string": 42, "other": "kept", "missing": null,
            }))
        );
        assert_eq!(out.value_schema.as_deref().cloned(), None);
    }

    #[test]
    fn key_variant_casts_struct_fields_and_leaves_the_value() {
        let mut cast = configured(Side::Key, &[(SPEC, "id:string")]);
        let schema = Schema::struct_("Key", [Field::new("id", Schema::int64())]);
        let out = apply(
            &mut cast,
            SourceRecord::builder("t")
                .key_schema(schema)
                .key(json!({"id": 7}))
                .value(json!({"id": 7}))
                .build(),
        );
        assert_eq!(out.key, Some(json!({"id": "7"})));
        assert_eq!(
            out.key_schema.as_deref().cloned(),
            Some(Schema::struct_("Key", [Field::new("id", Schema::string())]))
        );
        assert_eq!(out.value, Some(json!({"id": 7})));
    }

    #[test]
    fn float32_values_cast_as_java_floats() {
        let mut cast = value_cast("float64");
        let out = apply(
            &mut cast,
            SourceRecord::builder("t")
                .value_schema(Schema::float32())
                .value(json!(0.1))
                .build(),
        );
        // (double) 0.1f
        assert_eq!(out.value, Some(json!(f64::from(0.1_f32))));
        let mut cast = value_cast("string");
        let out = apply(
            &mut cast,
            SourceRecord::builder("t")
                .value_schema(Schema::float32())
                .value(json!(0.1))
                .build(),
        );
        assert_eq!(out.value, Some(json!("0.1")));
    }
}
