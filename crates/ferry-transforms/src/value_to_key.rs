//! `ValueToKey`: replace the record key with one built from fields of the value, as Kafka Connect's
//! `ValueToKey` (one class, no `$Key`/`$Value`).
//!
//! With a value schema the key is an unnamed required struct of the listed fields with their
//! schemas, in the listed order (a field the value schema lacks fails: "Field does not exist: …");
//! without one, a map of the listed fields (an absent one is null). A null value fails, as in Kafka
//! Connect.

use std::sync::Arc;

use ferry_api::config::Issues;
use ferry_api::transform::{Transformation, TransformationPlugin};
use ferry_api::{Config, ConfigIssue, ConfigKey, ConnectError, Field, SourceRecord};
use serde_json::Value as Json;

use crate::PACKAGE;
use crate::fields_common::{
    REPLACE_NULL_WITH_DEFAULT, REPLACE_NULL_WITH_DEFAULT_DOC, boolean, require_map, require_struct,
    required_non_empty_list, struct_get, struct_like,
};

const FIELDS: &str = "fields";
const PURPOSE: &str = "copying fields from value to key";

pub(crate) fn plugins() -> Vec<TransformationPlugin> {
    vec![TransformationPlugin::new(
        [format!("{PACKAGE}.ValueToKey")],
        || Box::new(ValueToKey { fields: Vec::new() }) as Box<dyn Transformation>,
    )]
}

struct ValueToKey {
    fields: Vec<String>,
}

impl Transformation for ValueToKey {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![
            ConfigKey::required(
                FIELDS,
                "Field names on the record value to extract as the record key.",
            ),
            ConfigKey::optional(
                REPLACE_NULL_WITH_DEFAULT,
                Some("true"),
                REPLACE_NULL_WITH_DEFAULT_DOC,
            ),
        ]
    }

    fn configure(&mut self, config: &Config) -> Result<(), Vec<ConfigIssue>> {
        let mut issues = Issues::default();
        let fields = required_non_empty_list(config, FIELDS, &mut issues);
        boolean(config, REPLACE_NULL_WITH_DEFAULT, true, &mut issues);
        issues.finish(|| self.fields = fields.unwrap_or_default())
    }

    fn apply(&mut self, mut record: SourceRecord) -> Result<Option<SourceRecord>, ConnectError> {
        let (key_schema, key) = match &record.value_schema {
            None => {
                let map = require_map(record.value.as_ref(), PURPOSE)?;
                let key = self
                    .fields
                    .iter()
                    .map(|f| (f.clone(), struct_get(map, f)))
                    .collect();
                (None, key)
            }
            Some(schema) => {
                let (fields, map) = require_struct(schema, record.value.as_ref(), PURPOSE)?;
                let mut key_fields = Vec::with_capacity(self.fields.len());
                for name in &self.fields {
                    let field = fields.iter().find(|f| &f.name == name).ok_or_else(|| {
                        ConnectError::fatal(format!("Field does not exist: {name}"))
                    })?;
                    key_fields.push(Field::new(name.clone(), field.schema.clone()));
                }
                let key = self
                    .fields
                    .iter()
                    .map(|f| (f.clone(), struct_get(map, f)))
                    .collect();
                (Some(struct_like(None, key_fields)?), key)
            }
        };
        record.key_schema = key_schema.map(Arc::new);
        record.key = Some(Json::Object(key));
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields_common::test_support::{config, has_issue, plugin};
    use ferry_api::Schema;
    use serde_json::json;

    fn make(fields: &str) -> Box<dyn Transformation> {
        let mut t = plugin(&plugins(), &format!("{PACKAGE}.ValueToKey")).make();
        t.configure(&config(&[("fields", fields)]))
            .expect("valid config");
        t
    }

    #[test]
    fn schemaless_key_is_a_map_of_the_fields() {
        let mut t = make("a,b");
        let record = SourceRecord::builder("t")
            .key(json!("old"))
            .value(json!({"a": 1, "b": 2, "c": 3}))
            .build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(out.key, Some(json!({"a": 1, "b": 2})));
        assert_eq!(out.key_schema.as_deref().cloned(), None);
        assert_eq!(out.value, Some(json!({"a": 1, "b": 2, "c": 3})));

        let mut t = make("a,missing");
        let record = SourceRecord::builder("t").value(json!({"a": 1})).build();
        assert_eq!(
            t.apply(record).unwrap().unwrap().key,
            Some(json!({"a": 1, "missing": null}))
        );
    }

    #[test]
    fn schemaful_key_is_a_struct_of_the_fields() {
        let mut t = make("b,a");
        let schema = Schema::struct_(
            "v",
            [
                Field::new("a", Schema::int32()),
                Field::new("b", Schema::int32()),
                Field::new("c", Schema::int32()),
            ],
        );
        let record = SourceRecord::builder("t")
            .value_schema(schema.clone())
            .value(json!({"a": 1, "b": 2, "c": 3}))
            .build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(
            out.key_schema.as_deref().cloned(),
            Some(Schema::unnamed_struct([
                Field::new("b", Schema::int32()),
                Field::new("a", Schema::int32()),
            ]))
        );
        assert_eq!(out.key, Some(json!({"a": 1, "b": 2})));
        assert_eq!(out.value_schema.as_deref().cloned(), Some(schema.clone()));

        let mut t = make("not_exist");
        let record = SourceRecord::builder("t")
            .value_schema(schema)
            .value(json!({"a": 1, "b": 2, "c": 3}))
            .build();
        assert_eq!(
            t.apply(record).unwrap_err().to_string(),
            "Field does not exist: not_exist"
        );
    }

    #[test]
    fn non_map_value_fails() {
        let mut t = make("a");
        let err = t
            .apply(SourceRecord::builder("t").value(json!([1])).build())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Only Map objects supported in absence of schema for [copying fields from value to key], found: java.util.ArrayList"
        );
    }

    #[test]
    fn config_issues_name_their_key() {
        let p = plugin(&plugins(), &format!("{PACKAGE}.ValueToKey"));
        let issues = p.make().configure(&config(&[])).unwrap_err();
        assert!(has_issue(
            &issues,
            FIELDS,
            "Missing required configuration \"fields\""
        ));
        let issues = p.make().configure(&config(&[("fields", ",")])).unwrap_err();
        assert!(has_issue(&issues, FIELDS, "Empty list"));
    }
}
