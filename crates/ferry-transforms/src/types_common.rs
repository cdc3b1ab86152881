//! Helpers shared by the type-changing transforms (Cast, TimestampConverter, Flatten,
//! SetSchemaMetadata): the `$Key`/`$Value` side a transform works on, Kafka Connect's
//! `Requirements` messages, boolean config parsing, and the Java class names Kafka Connect's
//! messages show for a value.

use ferry_api::config::Issues;
use ferry_api::transform::{Transformation, TransformationPlugin};
use ferry_api::{Config, ConnectError, Schema, SchemaKind};
use serde_json::Value;

use crate::PACKAGE;

/// Which part of the record a transform works on (Kafka Connect's nested `Key` and `Value` classes).
pub(crate) use crate::fields_common::Side;

/// The `$Key` and `$Value` plugins of the transform `class` (simple name, e.g. `Cast`).
pub(crate) fn key_and_value_plugins(
    class: &str,
    make: fn(Side) -> Box<dyn Transformation>,
) -> Vec<TransformationPlugin> {
    [(Side::Key, "Key"), (Side::Value, "Value")]
        .into_iter()
        .map(|(side, suffix)| {
            TransformationPlugin::new([format!("{PACKAGE}.{class}${suffix}")], move || make(side))
        })
        .collect()
}

/// Kafka Connect's `ConfigDef.Type.BOOLEAN`: `true`/`false` in any case, `default` when absent.
pub(crate) fn boolean(config: &Config, key: &str, default: bool, issues: &mut Issues) -> bool {
    let Some(raw) = config.get(key) else {
        return default;
    };
    match raw.trim().to_ascii_lowercase().as_str() {
        "true" => true,
        "false" => false,
        _ => {
            issues.push(
                key,
                format!("Expected value to be either true or false (got {raw:?})"),
            );
            default
        }
    }
}

/// Kafka Connect's `Requirements.requireSchema`.
pub(crate) fn require_schema<'a>(
    schema: Option<&'a Schema>,
    purpose: &str,
) -> Result<&'a Schema, ConnectError> {
    schema.ok_or_else(|| ConnectError::fatal(format!("Schema required for [{purpose}]")))
}

/// Kafka Connect's `Requirements.requireMap` for a schemaless value.
pub(crate) fn require_map<'a>(
    value: Option<&'a Value>,
    purpose: &str,
) -> Result<&'a serde_json::Map<String, Value>, ConnectError> {
    match value {
        Some(Value::Object(map)) => Ok(map),
        other => Err(ConnectError::fatal(format!(
            "Only Map objects supported in absence of schema for [{purpose}], found: {}",
            other.map_or("null", schemaless_class)
        ))),
    }
}

/// Kafka Connect's `Requirements.requireStruct` for a value with `schema`.
pub(crate) fn require_struct<'a>(
    value: Option<&'a Value>,
    schema: &Schema,
    purpose: &str,
) -> Result<&'a serde_json::Map<String, Value>, ConnectError> {
    match (value, &schema.kind) {
        (Some(Value::Object(map)), SchemaKind::Struct { .. }) => Ok(map),
        (other, _) => Err(ConnectError::fatal(format!(
            "Only Struct objects supported for [{purpose}], found: {}",
            other.map_or("null", |v| class_with_schema(v, schema))
        ))),
    }
}

/// The Java class Kafka Connect would hold for a schemaless JSON value (what `JsonConverter` reads
/// it as): integers are `Long`, other numbers `Double`, objects `HashMap`.
pub(crate) fn schemaless_class(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "java.lang.Boolean",
        Value::Number(n) if n.is_i64() => "java.lang.Long",
        Value::Number(n) if n.is_u64() => "java.math.BigInteger",
        Value::Number(_) => "java.lang.Double",
        Value::String(_) => "java.lang.String",
        Value::Array(_) => "java.util.ArrayList",
        Value::Object(_) => "java.util.HashMap",
    }
}

/// The Java class Kafka Connect holds for a value of `schema`.
pub(crate) fn class_with_schema(value: &Value, schema: &Schema) -> &'static str {
    if value.is_null() {
        return "null";
    }
    if is_date_like(schema) {
        return "java.util.Date";
    }
    if schema.name.as_deref() == Some(ferry_api::DECIMAL_LOGICAL_NAME) {
        return "java.math.BigDecimal";
    }
    match schema.kind {
        SchemaKind::Int8 => "java.lang.Byte",
        SchemaKind::Int16 => "java.lang.Short",
        SchemaKind::Int32 => "java.lang.Integer",
        SchemaKind::Int64 => "java.lang.Long",
        SchemaKind::Float32 => "java.lang.Float",
        SchemaKind::Float64 => "java.lang.Double",
        SchemaKind::Boolean => "java.lang.Boolean",
        SchemaKind::String => "java.lang.String",
        SchemaKind::Bytes => "[B",
        SchemaKind::Array { .. } => "java.util.ArrayList",
        SchemaKind::Map { .. } => "java.util.HashMap",
        SchemaKind::Struct { .. } => "org.apache.kafka.connect.data.Struct",
    }
}

/// Whether `schema` is Kafka Connect's Date, Time or Timestamp (a `java.util.Date` in Java).
pub(crate) fn is_date_like(schema: &Schema) -> bool {
    matches!(
        schema.name.as_deref(),
        Some(
            ferry_api::DATE_LOGICAL_NAME
                | ferry_api::TIME_LOGICAL_NAME
                | ferry_api::TIMESTAMP_LOGICAL_NAME
        )
    )
}

/// Kafka Connect's `Schema.Type` name (`INT32`, `STRUCT`, …) of `kind`.
pub(crate) fn type_name(kind: &SchemaKind) -> &'static str {
    match kind {
        SchemaKind::Int8 => "INT8",
        SchemaKind::Int16 => "INT16",
        SchemaKind::Int32 => "INT32",
        SchemaKind::Int64 => "INT64",
        SchemaKind::Float32 => "FLOAT32",
        SchemaKind::Float64 => "FLOAT64",
        SchemaKind::Boolean => "BOOLEAN",
        SchemaKind::String => "STRING",
        SchemaKind::Bytes => "BYTES",
        SchemaKind::Array { .. } => "ARRAY",
        SchemaKind::Map { .. } => "MAP",
        SchemaKind::Struct { .. } => "STRUCT",
    }
}

/// Kafka Connect's `ConnectSchema.toString()`: `Schema{INT32}`, `Schema{name:INT32}`.
pub(crate) fn java_schema_string(schema: &Schema) -> String {
    match &schema.name {
        Some(name) => format!("Schema{{{name}:{}}}", type_name(&schema.kind)),
        None => format!("Schema{{{}}}", type_name(&schema.kind)),
    }
}

/// A schema of `kind` with the name, version, doc and parameters of `source` (Kafka Connect's
/// `SchemaUtil.copySchemaBasics`); required and without a default, as a new `SchemaBuilder` is.
pub(crate) fn copy_schema_basics(source: &Schema, kind: SchemaKind) -> Schema {
    Schema {
        kind,
        optional: false,
        name: source.name.clone(),
        version: source.version,
        doc: source.doc.clone(),
        parameters: source.parameters.clone(),
        default: None,
    }
}

/// The value of field `name` of a struct's JSON object (absent reads as null, as an unset field
/// of a Kafka Connect `Struct`).
pub(crate) fn field_value<'a>(object: &'a serde_json::Map<String, Value>, name: &str) -> &'a Value {
    object.get(name).unwrap_or(&Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugins_are_named_like_kafka_connect_nested_classes() {
        fn make(_: Side) -> Box<dyn Transformation> {
            unreachable!("not made in this test")
        }
        let plugins = key_and_value_plugins("Cast", make);
        let names: Vec<_> = plugins.iter().map(|p| p.class().to_owned()).collect();
        assert_eq!(
            names,
            [
                "org.apache.kafka.connect.transforms.Cast$Key",
                "org.apache.kafka.connect.transforms.Cast$Value"
            ]
        );
    }

    #[test]
    fn boolean_config_is_case_insensitive_and_rejects_other_words() {
        let config: Config = [("b".to_owned(), " TRUE ".to_owned())]
            .into_iter()
            .collect();
        let mut issues = Issues::default();
        assert!(boolean(&config, "b", false, &mut issues));
        assert!(!boolean(&Config::new(), "b", false, &mut issues));
        assert!(issues.is_empty());
        let config: Config = [("b".to_owned(), "yes".to_owned())].into_iter().collect();
        boolean(&config, "b", true, &mut issues);
        assert!(issues.has("b"));
    }
}
