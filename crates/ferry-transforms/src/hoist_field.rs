//! `HoistField$Key` / `HoistField$Value`: wrap the whole key/value in a struct (with a schema) or a
//! map (without) of one field, as Kafka Connect's `HoistField`.
//!
//! With a schema, the new schema is an unnamed required struct whose one field has the original
//! schema; a null under a required original schema fails as Kafka Connect's `Struct.put` does.
//! Without one, a null is wrapped too (`{"field": null}`).

use ferry_api::config::Issues;
use ferry_api::transform::{Transformation, TransformationPlugin};
use ferry_api::{Config, ConfigIssue, ConfigKey, ConnectError, Field, SourceRecord};
use serde_json::Value as Json;

use crate::fields_common::{Side, check_null, key_and_value, required_field_name, struct_like};

const FIELD: &str = "field";

pub(crate) fn plugins() -> Vec<TransformationPlugin> {
    key_and_value("HoistField", HoistField::new)
}

struct HoistField {
    side: Side,
    field: String,
}

impl HoistField {
    fn new(side: Side) -> Self {
        Self {
            side,
            field: String::new(),
        }
    }
}

impl Transformation for HoistField {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![ConfigKey::required(
            FIELD,
            "Field name for the single field that will be created in the resulting Struct or Map.",
        )]
    }

    fn configure(&mut self, config: &Config) -> Result<(), Vec<ConfigIssue>> {
        let mut issues = Issues::default();
        let field = required_field_name(config, FIELD, &mut issues);
        issues.finish(|| {
            if let Some(field) = field {
                self.field = field;
            }
        })
    }

    fn apply(&mut self, mut record: SourceRecord) -> Result<Option<SourceRecord>, ConnectError> {
        let side = self.side;
        let value = side.value(&record).cloned().unwrap_or(Json::Null);
        let schema = match side.schema(&record) {
            None => None,
            Some(schema) => {
                check_null(&self.field, schema, &value)?;
                Some(struct_like(
                    None,
                    vec![Field::new(self.field.clone(), schema.clone())],
                )?)
            }
        };
        let mut wrapped = serde_json::Map::new();
        wrapped.insert(self.field.clone(), value);
        side.set(&mut record, schema, Some(Json::Object(wrapped)));
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PACKAGE;
    use crate::fields_common::test_support::{config, has_issue, plugin};
    use ferry_api::Schema;
    use serde_json::json;

    fn make(variant: &str, field: &str) -> Box<dyn Transformation> {
        let mut t = plugin(&plugins(), &format!("{PACKAGE}.HoistField${variant}")).make();
        t.configure(&config(&[("field", field)]))
            .expect("valid config");
        t
    }

    #[test]
    fn key_schemaless_wraps_in_a_map() {
        let mut t = make("Key", "magic");
        let record = SourceRecord::builder("t")
            .key(json!(420))
            .value(json!("v"))
            .build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(out.key, Some(json!({"magic": 420})));
        assert_eq!(out.key_schema.as_deref().cloned(), None);
        assert_eq!(out.value, Some(json!("v")));
    }

    #[test]
    fn key_schemaful_wraps_in_a_struct() {
        let mut t = make("Key", "magic");
        let record = SourceRecord::builder("t")
            .key_schema(Schema::int32())
            .key(json!(420))
            .build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(
            out.key_schema.as_deref().cloned(),
            Some(Schema::unnamed_struct([Field::new(
                "magic",
                Schema::int32()
            )]))
        );
        assert_eq!(out.key, Some(json!({"magic": 420})));
    }

    #[test]
    fn value_schemaful_struct_is_nested() {
        let mut t = make("Value", "outer");
        let inner = Schema::struct_("in", [Field::new("a", Schema::string())]);
        let record = SourceRecord::builder("t")
            .value_schema(inner.clone())
            .value(json!({"a": "x"}))
            .build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(
            out.value_schema.as_deref().cloned(),
            Some(Schema::unnamed_struct([Field::new("outer", inner)]))
        );
        assert_eq!(out.value, Some(json!({"outer": {"a": "x"}})));
    }

    #[test]
    fn null_is_wrapped_when_allowed() {
        let mut t = make("Value", "f");
        let out = t
            .apply(SourceRecord::builder("t").build())
            .unwrap()
            .unwrap();
        assert_eq!(out.value, Some(json!({"f": null})));

        let record = SourceRecord::builder("t")
            .value_schema(Schema::string().optional())
            .build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(out.value, Some(json!({"f": null})));

        let record = SourceRecord::builder("t")
            .value_schema(Schema::string())
            .build();
        let err = t.apply(record).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Invalid value: null used for required field: \"f\", schema type: STRING"
        );
    }

    /// Kafka Connect's documented example: FileStreamSource lines hoisted into a `line` field,
    /// then tagged with a static `data_source` field.
    #[test]
    fn file_stream_source_example_hoists_then_inserts() {
        let all = crate::builtin_transformations();
        let mut hoist = plugin(&all, &format!("{PACKAGE}.HoistField$Value")).make();
        hoist.configure(&config(&[("field", "line")])).unwrap();
        let mut insert = plugin(&all, &format!("{PACKAGE}.InsertField$Value")).make();
        insert
            .configure(&config(&[
                ("static.field", "data_source"),
                ("static.value", "test-file-source"),
            ]))
            .unwrap();
        let mut chain = |record: SourceRecord| {
            let hoisted = hoist.apply(record).unwrap().unwrap();
            insert.apply(hoisted).unwrap().unwrap()
        };

        let out = chain(
            SourceRecord::builder("connect-test")
                .value(json!("hello"))
                .build(),
        );
        assert_eq!(
            out.value,
            Some(json!({"line": "hello", "data_source": "test-file-source"}))
        );
        assert_eq!(out.value_schema.as_deref().cloned(), None);

        let out = chain(
            SourceRecord::builder("connect-test")
                .value_schema(Schema::string())
                .value(json!("hello"))
                .build(),
        );
        assert_eq!(
            out.value,
            Some(json!({"line": "hello", "data_source": "test-file-source"}))
        );
        assert_eq!(
            out.value_schema.as_deref().cloned(),
            Some(Schema::unnamed_struct([
                Field::new("line", Schema::string()),
                Field::new("data_source", Schema::string().optional()),
            ]))
        );
    }

    #[test]
    fn missing_field_is_a_config_issue() {
        let p = plugin(&plugins(), &format!("{PACKAGE}.HoistField$Value"));
        let issues = p.make().configure(&config(&[])).unwrap_err();
        assert!(has_issue(
            &issues,
            "field",
            "Missing required configuration \"field\""
        ));
    }
}
