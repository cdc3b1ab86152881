//! Kafka Connect's `Flatten` (`org.apache.kafka.connect.transforms.Flatten$Key` / `$Value`):
//! flattens nested structs (with a schema) or nested maps (schemaless) into one level, naming
//! each field by joining the names on its path with `delimiter` (default `.`). Arrays and their
//! contents are left as they are. A field under an optional struct becomes optional. A null key
//! or value passes through unchanged.

use ferry_api::transform::{Transformation, TransformationPlugin};
use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConnectError, Field, Schema, SchemaKind, SourceRecord,
};
use serde_json::{Map, Value};

use crate::types_common::{
    Side, copy_schema_basics, field_value, key_and_value_plugins, require_map, require_struct,
    type_name,
};

const DELIMITER: &str = "delimiter";
const DELIMITER_DEFAULT: &str = ".";
const PURPOSE: &str = "flattening";

pub(crate) fn plugins() -> Vec<TransformationPlugin> {
    key_and_value_plugins("Flatten", |side| Box::new(Flatten::new(side)))
}

/// `Flatten$Key` / `Flatten$Value`.
struct Flatten {
    side: Side,
    delimiter: String,
}

impl Flatten {
    fn new(side: Side) -> Self {
        Self {
            side,
            delimiter: DELIMITER_DEFAULT.to_owned(),
        }
    }

    fn field_name(&self, prefix: &str, name: &str) -> String {
        if prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{prefix}{}{name}", self.delimiter)
        }
    }

    /// Kafka Connect's schemaless `applySchemaless`: nested maps are flattened, everything else
    /// (arrays included) is copied. A later duplicate name overwrites an earlier one.
    fn flatten_map(&self, map: &Map<String, Value>, prefix: &str, out: &mut Map<String, Value>) {
        for (key, value) in map {
            let name = self.field_name(prefix, key);
            match value {
                Value::Object(nested) => self.flatten_map(nested, &name, out),
                other => {
                    out.insert(name, other.clone());
                }
            }
        }
    }

    /// Kafka Connect's `buildUpdatedSchema`: a field is optional when it or any struct above it
    /// is.
    fn flatten_schema(
        &self,
        schema: &Schema,
        prefix: &str,
        optional: bool,
        out: &mut Vec<Field>,
    ) -> Result<(), ConnectError> {
        for field in schema.fields() {
            let name = self.field_name(prefix, &field.name);
            let field_optional = optional || field.schema.optional;
            match &field.schema.kind {
                SchemaKind::Struct { .. } => {
                    self.flatten_schema(&field.schema, &name, field_optional, out)?;
                }
                SchemaKind::Map { .. } => {
                    return Err(ConnectError::fatal(format!(
                        "Flatten transformation does not support {} for record with schemas (for field {name}).",
                        type_name(&field.schema.kind)
                    )));
                }
                _ => {
                    if out.iter().any(|f| f.name == name) {
                        return Err(ConnectError::fatal(format!(
                            "Cannot create field because of field name duplication {name}"
                        )));
                    }
                    let mut flat = field.schema.clone();
                    flat.optional = field_optional;
                    out.push(Field::new(name, flat));
                }
            }
        }
        Ok(())
    }

    /// Kafka Connect's `buildWithSchema`: the fields of a null nested struct stay null.
    fn flatten_struct(
        &self,
        schema: &Schema,
        object: &Map<String, Value>,
        prefix: &str,
        out: &mut Map<String, Value>,
    ) -> Result<(), ConnectError> {
        for field in schema.fields() {
            let name = self.field_name(prefix, &field.name);
            let value = field_value(object, &field.name);
            match (&field.schema.kind, value) {
                (SchemaKind::Struct { .. }, Value::Null) => {}
                (SchemaKind::Struct { .. }, Value::Object(nested)) => {
                    self.flatten_struct(&field.schema, nested, &name, out)?;
                }
                (SchemaKind::Struct { .. }, other) => {
                    return Err(ConnectError::fatal(format!(
                        "Flatten transformation: field {name} holds {other}, which does not match its schema ({}); fix the connector's records",
                        field.schema
                    )));
                }
                _ => {
                    out.insert(name, value.clone());
                }
            }
        }
        Ok(())
    }
}

impl Transformation for Flatten {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![ConfigKey::optional(
            DELIMITER,
            Some(DELIMITER_DEFAULT),
            "Delimiter to insert between field names from the input record when generating field names for the output record",
        )]
    }

    fn configure(&mut self, config: &Config) -> Result<(), Vec<ConfigIssue>> {
        // ConfigDef trims STRING values; an empty delimiter is allowed, as in Kafka Connect.
        self.delimiter = config
            .get(DELIMITER)
            .map_or(DELIMITER_DEFAULT, |d| d.trim())
            .to_owned();
        Ok(())
    }

    fn apply(&mut self, mut record: SourceRecord) -> Result<Option<SourceRecord>, ConnectError> {
        let (value, schema) = self.side.get(&record);
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return Ok(Some(record));
        };
        let mut out = Map::new();
        let new_schema = match schema {
            None => {
                let map = require_map(Some(value), PURPOSE)?;
                self.flatten_map(map, "", &mut out);
                None
            }
            Some(schema) => {
                let object = require_struct(Some(value), schema, PURPOSE)?;
                let mut fields = Vec::new();
                self.flatten_schema(schema, "", schema.optional, &mut fields)?;
                self.flatten_struct(schema, object, "", &mut out)?;
                // Every flattened field is present, null when its struct was.
                for field in &fields {
                    out.entry(field.name.clone()).or_insert(Value::Null);
                }
                // Kafka Connect's builder copies name, version, doc and parameters, not optionality.
                Some(copy_schema_basics(schema, SchemaKind::Struct { fields }))
            }
        };
        self.side
            .set(&mut record, new_schema, Some(Value::Object(out)));
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flatten(side: Side, delimiter: Option<&str>) -> Flatten {
        let mut xform = Flatten::new(side);
        let config: Config = delimiter
            .map(|d| (DELIMITER.to_owned(), d.to_owned()))
            .into_iter()
            .collect();
        xform.configure(&config).unwrap();
        xform
    }

    fn apply(xform: &mut Flatten, record: SourceRecord) -> SourceRecord {
        xform.apply(record).unwrap().unwrap()
    }

    fn supported_types_schema() -> Schema {
        Schema::unnamed_struct([
            Field::new("int8", Schema::int8()),
            Field::new("int16", Schema::int16()),
            Field::new("int32", Schema::int32()),
            Field::new("int64", Schema::int64()),
            Field::new("float32", Schema::float32()),
            Field::new("float64", Schema::float64()),
            Field::new("boolean", Schema::boolean()),
            Field::new("string", Schema::string()),
            Field::new("bytes", Schema::bytes()),
        ])
    }

    fn supported_types_value() -> Value {
        json!({
            "int8": 8, "int16": 16, "int32": 32, "int64": 64, "float32": 32.0, "float64": 64.0,
            "boolean": true, "string": "stringy", "bytes": "Ynl0ZXM=",
        })
    }

    #[test]
    fn plugins_answer_to_kafka_connect_class_names() {
        let names: Vec<String> = plugins().iter().map(|p| p.class().to_owned()).collect();
        assert_eq!(
            names,
            [
                "org.apache.kafka.connect.transforms.Flatten$Key",
                "org.apache.kafka.connect.transforms.Flatten$Value"
            ]
        );
    }

    #[test]
    fn top_level_struct_or_map_is_required() {
        let mut xform = flatten(Side::Value, None);
        let err = xform
            .apply(
                SourceRecord::builder("t")
                    .value_schema(Schema::int32())
                    .value(json!(42))
                    .build(),
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Only Struct objects supported for [flattening], found: java.lang.Integer"
        );
        let err = xform
            .apply(SourceRecord::builder("t").value(json!(42)).build())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Only Map objects supported in absence of schema for [flattening], found: java.lang.Long"
        );
    }

    #[test]
    fn nested_struct() {
        let mut xform = flatten(Side::Value, None);
        let one = Schema::unnamed_struct([Field::new("B", supported_types_schema())]);
        let two = Schema::struct_("com.example.Nested", [Field::new("A", one)]).with_doc("doc");
        let out = apply(
            &mut xform,
            SourceRecord::builder("t")
                .value_schema(two)
                .value(json!({"A": {"B": supported_types_value()}}))
                .build(),
        );
        let schema = out.value_schema.unwrap();
        assert_eq!(schema.name.as_deref(), Some("com.example.Nested"));
        assert_eq!(schema.doc.as_deref(), Some("doc"));
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "A.B.int8",
                "A.B.int16",
                "A.B.int32",
                "A.B.int64",
                "A.B.float32",
                "A.B.float64",
                "A.B.boolean",
                "A.B.string",
                "A.B.bytes"
            ]
        );
        assert_eq!(schema.field("A.B.bytes").unwrap().schema, Schema::bytes());
        assert_eq!(
            out.value,
            Some(json!({
                "A.B.int8": 8, "A.B.int16": 16, "A.B.int32": 32, "A.B.int64": 64,
                "A.B.float32": 32.0, "A.B.float64": 64.0, "A.B.boolean": true,
                "A.B.string": "stringy", "A.B.bytes": "Ynl0ZXM=",
            }))
        );
    }

    #[test]
    fn nested_map_with_delimiter() {
        let mut xform = flatten(Side::Value, Some("#"));
        let out = apply(
            &mut xform,
            SourceRecord::builder("t")
                .value(json!({"A": {"B": supported_types_value()}}))
                .build(),
        );
        assert_eq!(out.value_schema.as_deref().cloned(), None);
        let map = out.value.unwrap();
        let map = map.as_object().unwrap();
        assert_eq!(map.len(), 9);
        assert_eq!(map["A#B#int8"], json!(8));
        assert_eq!(map["A#B#string"], json!("stringy"));
        assert_eq!(map["A#B#bytes"], json!("Ynl0ZXM="));
    }

    #[test]
    fn optional_fields_and_structs() {
        let mut xform = flatten(Side::Value, None);
        // testOptionalFieldStruct
        let inner = Schema::unnamed_struct([Field::new("opt_int32", Schema::int32().optional())]);
        let schema = Schema::unnamed_struct([Field::new("B", inner.clone())]);
        let out = apply(
            &mut xform,
            SourceRecord::builder("t")
                .value_schema(schema)
                .value(json!({"B": {"opt_int32": null}}))
                .build(),
        );
        assert_eq!(out.value, Some(json!({"B.opt_int32": null})));
        // testOptionalStruct: a null value passes through.
        let optional = inner.clone().optional();
        let mut record = SourceRecord::builder("t")
            .value_schema(optional.clone())
            .build();
        record.value = None;
        assert_eq!(apply(&mut xform, record.clone()), record);
        // testOptionalNestedStruct: a null optional struct gives null, optional fields.
        let schema = Schema::unnamed_struct([Field::new(
            "B",
            Schema::unnamed_struct([Field::new("req", Schema::int32())]).optional(),
        )]);
        let out = apply(
            &mut xform,
            SourceRecord::builder("t")
                .value_schema(schema)
                .value(json!({"B": null}))
                .build(),
        );
        assert_eq!(out.value, Some(json!({"B.req": null})));
        assert_eq!(
            out.value_schema.as_deref().cloned(),
            Some(Schema::unnamed_struct([Field::new(
                "B.req",
                Schema::int32().optional()
            )]))
        );
        // The flattened struct itself is required, as Kafka Connect builds it.
        let out = apply(
            &mut xform,
            SourceRecord::builder("t")
                .value_schema(Schema::unnamed_struct([Field::new("x", Schema::int32())]).optional())
                .value(json!({"x": 1}))
                .build(),
        );
        assert_eq!(
            out.value_schema.as_deref().cloned(),
            Some(Schema::unnamed_struct([Field::new(
                "x",
                Schema::int32().optional()
            )]))
        );
        // testOptionalFieldMap
        let out = apply(
            &mut xform,
            SourceRecord::builder("t")
                .value(json!({"B": {"opt_int32": null}}))
                .build(),
        );
        assert_eq!(out.value, Some(json!({"B.opt_int32": null})));
    }

    #[test]
    fn key_variant_flattens_the_key() {
        let mut xform = flatten(Side::Key, None);
        let out = apply(
            &mut xform,
            SourceRecord::builder("t")
                .key(json!({"A": {"B": 12}}))
                .value(json!({"A": {"B": 12}}))
                .build(),
        );
        assert_eq!(out.key, Some(json!({"A.B": 12})));
        assert_eq!(out.key_schema.as_deref().cloned(), None);
        assert_eq!(out.value, Some(json!({"A": {"B": 12}})));
    }

    #[test]
    fn arrays_are_not_flattened() {
        let mut xform = flatten(Side::Value, None);
        let value = json!({"foo": ["bar", {"baz": {"lfg": "lfg"}}]});
        let out = apply(
            &mut xform,
            SourceRecord::builder("t").value(value.clone()).build(),
        );
        assert_eq!(out.value, Some(value));

        let nested = Schema::unnamed_struct([Field::new("lfg", Schema::string())]);
        let inner = Schema::unnamed_struct([Field::new("baz", nested)]);
        let schema =
            Schema::unnamed_struct([Field::new("foo", Schema::array(inner).with_doc("durk"))]);
        let value = json!({"foo": [{"baz": {"lfg": "lfg"}}]});
        let out = apply(
            &mut xform,
            SourceRecord::builder("t")
                .value_schema(schema.clone())
                .value(value.clone())
                .build(),
        );
        assert_eq!(out.value, Some(value));
        assert_eq!(out.value_schema.as_deref().cloned(), Some(schema));
    }

    #[test]
    fn tombstones_pass_through() {
        let mut xform = flatten(Side::Value, None);
        let record = SourceRecord::builder("t").build();
        assert_eq!(apply(&mut xform, record.clone()), record);
        let schema = Schema::struct_("name", [Field::new("magic", Schema::int64().optional())])
            .with_version(1)
            .with_doc("doc");
        let record = SourceRecord::builder("t").value_schema(schema).build();
        assert_eq!(apply(&mut xform, record.clone()), record);
    }

    #[test]
    fn null_fields_are_kept() {
        let mut xform = flatten(Side::Value, None);
        let value = json!({
            "firstNull": null, "firstNonNull": "nonNull", "secondNull": null,
            "secondNonNull": "alsoNonNull", "thirdNonNull": null,
        });
        let out = apply(
            &mut xform,
            SourceRecord::builder("t").value(value.clone()).build(),
        );
        assert_eq!(out.value, Some(value.clone()));
        let schema = Schema::unnamed_struct(
            [
                "firstNull",
                "firstNonNull",
                "secondNull",
                "secondNonNull",
                "thirdNonNull",
            ]
            .map(|n| Field::new(n, Schema::string().optional())),
        );
        let out = apply(
            &mut xform,
            SourceRecord::builder("t")
                .value_schema(schema.clone())
                .value(value.clone())
                .build(),
        );
        assert_eq!(out.value, Some(value));
        assert_eq!(out.value_schema.as_deref().cloned(), Some(schema));
    }

    #[test]
    fn maps_with_schemas_and_duplicate_names_are_refused() {
        let mut xform = flatten(Side::Value, None);
        let schema = Schema::unnamed_struct([Field::new(
            "m",
            Schema::map(Schema::string(), Schema::string()),
        )]);
        let err = xform
            .apply(
                SourceRecord::builder("t")
                    .value_schema(schema)
                    .value(json!({"m": {}}))
                    .build(),
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Flatten transformation does not support MAP for record with schemas (for field m)."
        );
        let schema = Schema::unnamed_struct([
            Field::new(
                "a",
                Schema::unnamed_struct([Field::new("b", Schema::int32())]),
            ),
            Field::new("a.b", Schema::int32()),
        ]);
        let err = xform
            .apply(
                SourceRecord::builder("t")
                    .value_schema(schema)
                    .value(json!({"a": {"b": 1}, "a.b": 2}))
                    .build(),
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Cannot create field because of field name duplication a.b"
        );
    }
}
