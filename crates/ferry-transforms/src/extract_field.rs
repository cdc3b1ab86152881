//! `ExtractField$Key` / `ExtractField$Value`: replace the key/value with one of its fields, as
//! Kafka Connect's `ExtractField`.
//!
//! With a schema, the result has the field's schema (an unknown field fails: "Unknown field: …");
//! without one, the map entry (an absent entry is null). A null key/value stays null (with a schema:
//! under the field's schema). `field.syntax.version=V2` reads nested fields by a dotted path.

use ferry_api::config::Issues;
use ferry_api::transform::{Transformation, TransformationPlugin};
use ferry_api::{Config, ConfigIssue, ConfigKey, ConnectError, SourceRecord};
use serde_json::Value as Json;

use crate::fields_common::{
    REPLACE_NULL_WITH_DEFAULT, REPLACE_NULL_WITH_DEFAULT_DOC, Side, boolean, key_and_value,
    require_map, require_struct, required_field_name,
};
use crate::fields_path::{FIELD_SYNTAX_VERSION, FIELD_SYNTAX_VERSION_DOC, FieldPath, is_v2};

const FIELD: &str = "field";
const PURPOSE: &str = "field extraction";

pub(crate) fn plugins() -> Vec<TransformationPlugin> {
    key_and_value("ExtractField", ExtractField::new)
}

struct ExtractField {
    side: Side,
    /// The path as configured, for messages.
    original: String,
    path: FieldPath,
}

impl ExtractField {
    fn new(side: Side) -> Self {
        Self {
            side,
            original: String::new(),
            path: FieldPath::default(),
        }
    }
}

impl Transformation for ExtractField {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![
            ConfigKey::required(FIELD, "Field name to extract."),
            ConfigKey::optional(
                REPLACE_NULL_WITH_DEFAULT,
                Some("true"),
                REPLACE_NULL_WITH_DEFAULT_DOC,
            ),
            ConfigKey::optional(FIELD_SYNTAX_VERSION, Some("V1"), FIELD_SYNTAX_VERSION_DOC),
        ]
    }

    fn configure(&mut self, config: &Config) -> Result<(), Vec<ConfigIssue>> {
        let mut issues = Issues::default();
        let field = required_field_name(config, FIELD, &mut issues);
        boolean(config, REPLACE_NULL_WITH_DEFAULT, true, &mut issues);
        let v2 = is_v2(config, &mut issues);
        let path = field
            .as_deref()
            .and_then(|f| match FieldPath::parse(f, v2) {
                Ok(path) => Some(path),
                Err(e) => {
                    issues.push(FIELD, e.to_string());
                    None
                }
            });
        issues.finish(|| {
            if let (Some(field), Some(path)) = (field, path) {
                self.original = field;
                self.path = path;
            }
        })
    }

    fn apply(&mut self, mut record: SourceRecord) -> Result<Option<SourceRecord>, ConnectError> {
        let side = self.side;
        let value = side.value(&record).filter(|v| !v.is_null());
        let (schema, extracted) = match side.schema(&record) {
            None => {
                let extracted = match value {
                    None => Json::Null,
                    Some(_) => self.path.value_from_map(require_map(value, PURPOSE)?)?,
                };
                (None, extracted)
            }
            Some(schema) => {
                let map = match value {
                    None => None,
                    Some(_) => Some(require_struct(schema, value, PURPOSE)?.1),
                };
                let field = self.path.field_from(schema)?.ok_or_else(|| {
                    ConnectError::fatal(format!("Unknown field: {}", self.original))
                })?;
                let extracted = match map {
                    None => Json::Null,
                    Some(map) => self.path.value_from_struct(schema, map)?,
                };
                (Some(field.schema.clone()), extracted)
            }
        };
        let extracted = Some(extracted).filter(|v| !v.is_null());
        side.set(&mut record, schema, extracted);
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PACKAGE;
    use crate::fields_common::test_support::{config, has_issue, plugin};
    use ferry_api::{Field, Schema};
    use serde_json::json;

    fn make(variant: &str, pairs: &[(&str, &str)]) -> Box<dyn Transformation> {
        let mut t = plugin(&plugins(), &format!("{PACKAGE}.ExtractField${variant}")).make();
        t.configure(&config(pairs)).expect("valid config");
        t
    }

    #[test]
    fn key_schemaless_takes_the_entry() {
        let mut t = make("Key", &[("field", "magic")]);
        let record = SourceRecord::builder("t").key(json!({"magic": 42})).build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(out.key, Some(json!(42)));
        assert_eq!(out.key_schema.as_deref().cloned(), None);

        let record = SourceRecord::builder("t").key(json!({"other": 1})).build();
        assert_eq!(t.apply(record).unwrap().unwrap().key, None);
        // A null key stays null.
        let record = SourceRecord::builder("t").value(json!("v")).build();
        assert_eq!(t.apply(record.clone()).unwrap().unwrap(), record);
    }

    #[test]
    fn value_schemaful_takes_the_field_and_its_schema() {
        let mut t = make("Value", &[("field", "magic")]);
        let schema = Schema::struct_("s", [Field::new("magic", Schema::int32().optional())]);
        let record = SourceRecord::builder("t")
            .value_schema(schema.clone())
            .value(json!({"magic": 42}))
            .build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(
            out.value_schema.as_deref().cloned(),
            Some(Schema::int32().optional())
        );
        assert_eq!(out.value, Some(json!(42)));

        // A null value keeps the field's schema.
        let record = SourceRecord::builder("t")
            .value_schema(schema.clone().optional())
            .build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(
            out.value_schema.as_deref().cloned(),
            Some(Schema::int32().optional())
        );
        assert_eq!(out.value, None);

        let mut t = make("Value", &[("field", "nonexistent")]);
        let record = SourceRecord::builder("t")
            .value_schema(schema)
            .value(json!({"magic": 42}))
            .build();
        assert_eq!(
            t.apply(record).unwrap_err().to_string(),
            "Unknown field: nonexistent"
        );
    }

    #[test]
    fn wrong_data_fails_with_kafka_connect_messages() {
        let mut t = make("Value", &[("field", "f")]);
        let record = SourceRecord::builder("t").value(json!("text")).build();
        assert_eq!(
            t.apply(record).unwrap_err().to_string(),
            "Only Map objects supported in absence of schema for [field extraction], found: java.lang.String"
        );
        let record = SourceRecord::builder("t")
            .value_schema(Schema::string())
            .value(json!("text"))
            .build();
        assert_eq!(
            t.apply(record).unwrap_err().to_string(),
            "Only Struct objects supported for [field extraction], found: java.lang.String"
        );
    }

    #[test]
    fn v2_reads_nested_fields_and_v1_does_not() {
        let mut t = make(
            "Value",
            &[("field", "magic.foo"), ("field.syntax.version", "v2")],
        );
        let inner = Schema::struct_("in", [Field::new("foo", Schema::string())]);
        let schema = Schema::struct_("s", [Field::new("magic", inner)]);
        let record = SourceRecord::builder("t")
            .value_schema(schema.clone())
            .value(json!({"magic": {"foo": "bar"}}))
            .build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(out.value_schema.as_deref().cloned(), Some(Schema::string()));
        assert_eq!(out.value, Some(json!("bar")));

        let record = SourceRecord::builder("t")
            .value(json!({"magic": {"foo": "bar"}, "magic.foo": "flat"}))
            .build();
        assert_eq!(
            t.apply(record.clone()).unwrap().unwrap().value,
            Some(json!("bar"))
        );
        let mut v1 = make("Value", &[("field", "magic.foo")]);
        assert_eq!(
            v1.apply(record).unwrap().unwrap().value,
            Some(json!("flat"))
        );
    }

    #[test]
    fn key_schemaful_null_and_unknown_nested_field() {
        let mut t = make("Key", &[("field", "magic")]);
        let schema = Schema::unnamed_struct([Field::new("magic", Schema::int32())]).optional();
        let record = SourceRecord::builder("t")
            .key_schema(schema)
            .value(json!("v"))
            .build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(out.key_schema.as_deref().cloned(), Some(Schema::int32()));
        assert_eq!(out.key, None);
        assert_eq!(out.value, Some(json!("v")));

        let mut t = make(
            "Key",
            &[
                ("field", "magic.nonexistent"),
                ("field.syntax.version", "V2"),
            ],
        );
        let foo = Schema::unnamed_struct([Field::new("foo", Schema::int32())]);
        let record = SourceRecord::builder("t")
            .key_schema(Schema::unnamed_struct([Field::new("magic", foo)]))
            .key(json!({"magic": {"foo": 42}}))
            .build();
        assert_eq!(
            t.apply(record).unwrap_err().to_string(),
            "Unknown field: magic.nonexistent"
        );
    }

    #[test]
    fn config_issues_name_their_key() {
        let p = plugin(&plugins(), &format!("{PACKAGE}.ExtractField$Value"));
        let issues = p.make().configure(&config(&[])).unwrap_err();
        assert!(has_issue(
            &issues,
            "field",
            "Missing required configuration \"field\""
        ));
        let issues = p
            .make()
            .configure(&config(&[("field", "a"), ("field.syntax.version", "V3")]))
            .unwrap_err();
        assert!(has_issue(&issues, FIELD_SYNTAX_VERSION, "V1, V2"));
        let issues = p
            .make()
            .configure(&config(&[
                ("field", "`a.b"),
                ("field.syntax.version", "V2"),
            ]))
            .unwrap_err();
        assert!(has_issue(&issues, "field", "Incomplete backtick pair"));
    }
}
