//! What the field transforms share: which side of a record they work on (`$Key`/`$Value`), Kafka
//! Connect's `Requirements` checks and messages, `SchemaUtil.copySchemaBasics`, and config parsing
//! with `ConfigDef`'s wording.

use std::sync::Arc;

use std::collections::HashSet;

use ferry_api::config::Issues;
use ferry_api::transform::{Transformation, TransformationPlugin};
use ferry_api::{
    Config, ConnectError, DATE_LOGICAL_NAME, DECIMAL_LOGICAL_NAME, Field, Schema, SchemaKind,
    SourceRecord, TIME_LOGICAL_NAME, TIMESTAMP_LOGICAL_NAME,
};
use serde_json::{Map, Value as Json};

use crate::PACKAGE;

/// The part of a record a `$Key` or `$Value` variant works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// The record key and its schema (`$Key`).
    Key,
    /// The record value and its schema (`$Value`).
    Value,
}

impl Side {
    /// The schema of this side.
    pub(crate) fn schema(self, record: &SourceRecord) -> Option<&Schema> {
        match self {
            Side::Key => record.key_schema.as_deref(),
            Side::Value => record.value_schema.as_deref(),
        }
    }

    /// The data of this side.
    pub(crate) fn value(self, record: &SourceRecord) -> Option<&Json> {
        match self {
            Side::Key => record.key.as_ref(),
            Side::Value => record.value.as_ref(),
        }
    }

    /// Replaces schema and data of this side (Kafka Connect's `newRecord`).
    pub(crate) fn set(
        self,
        record: &mut SourceRecord,
        schema: Option<Schema>,
        value: Option<Json>,
    ) {
        match self {
            Side::Key => {
                record.key_schema = schema.map(Arc::new);
                record.key = value;
            }
            Side::Value => {
                record.value_schema = schema.map(Arc::new);
                record.value = value;
            }
        }
    }

    /// The data and schema of this side.
    pub(crate) fn get(self, record: &SourceRecord) -> (Option<&Json>, Option<&Schema>) {
        (self.value(record), self.schema(record))
    }

    /// Replaces only the data of this side, keeping its schema.
    pub(crate) fn set_value(self, record: &mut SourceRecord, value: Option<Json>) {
        match self {
            Side::Key => record.key = value,
            Side::Value => record.value = value,
        }
    }
}

/// The `$Key` and `$Value` plugins of transform `name` (e.g. `InsertField`), each answering only to
/// its full Kafka Connect class name.
pub(crate) fn key_and_value<T: Transformation + 'static>(
    name: &str,
    make: fn(Side) -> T,
) -> Vec<TransformationPlugin> {
    [(Side::Key, "Key"), (Side::Value, "Value")]
        .into_iter()
        .map(|(side, suffix)| {
            TransformationPlugin::new([format!("{PACKAGE}.{name}${suffix}")], move || {
                Box::new(make(side)) as Box<dyn Transformation>
            })
        })
        .collect()
}

/// The Java class Kafka Connect would hold for `value` (typed by `schema` when there is one), as
/// `getClass().getName()` prints it: what its messages show after "found:".
pub(crate) fn java_class(schema: Option<&Schema>, value: Option<&Json>) -> &'static str {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return "null";
    };
    match schema {
        Some(schema) => schema_class(schema),
        None => json_class(value),
    }
}

/// The Java class of a value of `schema` (logical types included).
pub(crate) fn schema_class(schema: &Schema) -> &'static str {
    let name = schema.name.as_deref();
    match &schema.kind {
        SchemaKind::Int8 => "java.lang.Byte",
        SchemaKind::Int16 => "java.lang.Short",
        SchemaKind::Int32 if matches!(name, Some(DATE_LOGICAL_NAME | TIME_LOGICAL_NAME)) => {
            "java.util.Date"
        }
        SchemaKind::Int32 => "java.lang.Integer",
        SchemaKind::Int64 if name == Some(TIMESTAMP_LOGICAL_NAME) => "java.util.Date",
        SchemaKind::Int64 => "java.lang.Long",
        SchemaKind::Float32 => "java.lang.Float",
        SchemaKind::Float64 => "java.lang.Double",
        SchemaKind::Boolean => "java.lang.Boolean",
        SchemaKind::String => "java.lang.String",
        SchemaKind::Bytes if name == Some(DECIMAL_LOGICAL_NAME) => "java.math.BigDecimal",
        SchemaKind::Bytes => "[B",
        SchemaKind::Array { .. } => "java.util.ArrayList",
        SchemaKind::Map { .. } => "java.util.HashMap",
        SchemaKind::Struct { .. } => "org.apache.kafka.connect.data.Struct",
    }
}

/// The Java class of a schemaless value, as Kafka Connect's `JsonConverter` reads JSON without
/// schemas (integers are `Long`, other numbers `Double`).
pub(crate) fn json_class(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "java.lang.Boolean",
        Json::Number(n) if n.is_f64() => "java.lang.Double",
        Json::Number(_) => "java.lang.Long",
        Json::String(_) => "java.lang.String",
        Json::Array(_) => "java.util.ArrayList",
        Json::Object(_) => "java.util.HashMap",
    }
}

/// Kafka Connect's `Schema.Type` name (`STRING`, `INT32`, `FLOAT64`, `STRUCT`, …) of `schema`.
pub(crate) fn type_name(schema: &Schema) -> &'static str {
    crate::types_common::type_name(&schema.kind)
}

/// Kafka Connect's `Requirements.requireMap`: schemaless data must be a map (a JSON object).
pub(crate) fn require_map<'a>(
    value: Option<&'a Json>,
    purpose: &str,
) -> Result<&'a Map<String, Json>, ConnectError> {
    match value {
        Some(Json::Object(map)) => Ok(map),
        other => Err(ConnectError::fatal(format!(
            "Only Map objects supported in absence of schema for [{purpose}], found: {}",
            java_class(None, other)
        ))),
    }
}

/// Kafka Connect's `Requirements.requireStruct`: schemaful data must be a struct (a JSON object
/// with a struct schema). Returns the schema's fields and the data.
pub(crate) fn require_struct<'a>(
    schema: &'a Schema,
    value: Option<&'a Json>,
    purpose: &str,
) -> Result<(&'a [Field], &'a Map<String, Json>), ConnectError> {
    let found = match (&schema.kind, value) {
        (SchemaKind::Struct { fields }, Some(Json::Object(map))) => return Ok((fields, map)),
        // A struct schema over data that is not an object: name what the data is.
        (SchemaKind::Struct { .. }, Some(other)) if !other.is_null() => json_class(other),
        _ => java_class(Some(schema), value),
    };
    Err(ConnectError::fatal(format!(
        "Only Struct objects supported for [{purpose}], found: {found}"
    )))
}

/// A struct field's data; an absent key is a null, as an unset `Struct` field.
pub(crate) fn struct_get(map: &Map<String, Json>, name: &str) -> Json {
    map.get(name).cloned().unwrap_or(Json::Null)
}

/// A required struct schema of `fields` with the name, version, doc and parameters of `source`
/// (Kafka Connect's `SchemaUtil.copySchemaBasics(source, SchemaBuilder.struct())`: optionality is
/// not copied). Two fields of one name are refused as `SchemaBuilder` refuses them.
pub(crate) fn struct_like(
    source: Option<&Schema>,
    fields: Vec<Field>,
) -> Result<Schema, ConnectError> {
    let mut seen = HashSet::new();
    for field in &fields {
        if !seen.insert(field.name.as_str()) {
            return Err(ConnectError::fatal(format!(
                "Cannot create field because of field name duplication {}",
                field.name
            )));
        }
    }
    let mut schema = Schema::unnamed_struct(fields);
    if let Some(source) = source {
        schema.name.clone_from(&source.name);
        schema.version = source.version;
        schema.doc.clone_from(&source.doc);
        schema.parameters.clone_from(&source.parameters);
    }
    Ok(schema)
}

/// Kafka Connect's `ConnectSchema.validateValue` for a null put into a struct field.
pub(crate) fn check_null(field: &str, schema: &Schema, value: &Json) -> Result<(), ConnectError> {
    if value.is_null() && !schema.optional {
        return Err(ConnectError::fatal(format!(
            "Invalid value: null used for required field: \"{field}\", schema type: {}",
            type_name(schema)
        )));
    }
    Ok(())
}

/// `ConfigDef`'s message for a required key that is absent.
pub(crate) fn missing(issues: &mut Issues, key: &str) {
    issues.push(
        key,
        format!("Missing required configuration \"{key}\" which has no default value."),
    );
}

/// A required `STRING` key, trimmed as `ConfigDef` trims it. A blank value is refused: it would
/// name a field "" (Kafka Connect accepts it and fails on the first record, or inserts a field
/// without a name).
pub(crate) fn required_field_name(
    config: &Config,
    key: &str,
    issues: &mut Issues,
) -> Option<String> {
    let Some(raw) = config.get(key) else {
        missing(issues, key);
        return None;
    };
    optional_field_name(raw, key, issues)
}

/// A set field-name value, trimmed; blank is an issue.
pub(crate) fn optional_field_name(raw: &str, key: &str, issues: &mut Issues) -> Option<String> {
    let value = raw.trim();
    if value.is_empty() {
        issues.push(key, "must not be empty: it names a field");
        return None;
    }
    Some(value.to_owned())
}

/// A `LIST` key as `ConfigDef` parses it (comma separated, entries trimmed, blank entries dropped);
/// `None` when absent.
pub(crate) fn list(config: &Config, key: &str) -> Option<Vec<String>> {
    config
        .get(key)
        .map(|raw| ferry_api::config::list(Some(raw)))
}

/// A required `LIST` key with Kafka Connect's `NonEmptyListValidator`.
pub(crate) fn required_non_empty_list(
    config: &Config,
    key: &str,
    issues: &mut Issues,
) -> Option<Vec<String>> {
    let Some(items) = list(config, key) else {
        missing(issues, key);
        return None;
    };
    if items.is_empty() {
        issues.push(key, "Empty list");
        return None;
    }
    Some(items)
}

/// A `BOOLEAN` key (`true`/`false`, any case, trimmed), or `default` when absent.
pub(crate) use crate::types_common::boolean;

/// The key every field transform that reads struct fields has. Ferry's transforms do not apply
/// schema default values yet (only the JsonConverter writes them), so a null field stays null
/// either way; the key is accepted (and checked) so that Kafka Connect configurations keep working.
pub(crate) const REPLACE_NULL_WITH_DEFAULT: &str = "replace.null.with.default";

/// The documentation of [`REPLACE_NULL_WITH_DEFAULT`].
pub(crate) const REPLACE_NULL_WITH_DEFAULT_DOC: &str = "Whether to replace fields that have a default value and that are null to the default value. When set to true, the default value is used, otherwise null is used. (Ferry's transforms do not apply schema default values yet: a null stays null.)";

#[cfg(test)]
pub(crate) mod test_support {
    //! Shared test helpers.

    use ferry_api::transform::TransformationPlugin;
    use ferry_api::{Config, ConfigIssue};

    /// A config from pairs.
    pub(crate) fn config(pairs: &[(&str, &str)]) -> Config {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// The plugin answering to `class` among `plugins`.
    pub(crate) fn plugin(plugins: &[TransformationPlugin], class: &str) -> TransformationPlugin {
        plugins
            .iter()
            .find(|p| p.answers_to(class))
            .cloned()
            .unwrap_or_else(|| panic!("no plugin answers to {class}"))
    }

    /// Whether an issue names `key` and its message contains `text`.
    pub(crate) fn has_issue(issues: &[ConfigIssue], key: &str, text: &str) -> bool {
        issues
            .iter()
            .any(|i| i.key == key && i.message.contains(text))
    }
}
