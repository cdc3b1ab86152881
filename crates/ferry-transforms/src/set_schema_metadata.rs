//! Kafka Connect's `SetSchemaMetadata` (`org.apache.kafka.connect.transforms.SetSchemaMetadata$Key`
//! / `$Value`): sets the name (`schema.name`), the version (`schema.version`) or both of the key's
//! or value's schema. The data is unchanged. A record whose key (value) and its schema are both
//! null passes through; a schemaless one fails ("Schema required").

use ferry_api::config::Issues;
use ferry_api::transform::{Transformation, TransformationPlugin};
use ferry_api::{Config, ConfigIssue, ConfigKey, ConnectError, SourceRecord};

use crate::types_common::{Side, boolean, key_and_value_plugins, require_schema};

const SCHEMA_NAME: &str = "schema.name";
const SCHEMA_VERSION: &str = "schema.version";
const REPLACE_NULL_WITH_DEFAULT: &str = "replace.null.with.default";
const PURPOSE: &str = "updating schema metadata";

pub(crate) fn plugins() -> Vec<TransformationPlugin> {
    key_and_value_plugins("SetSchemaMetadata", |side| {
        Box::new(SetSchemaMetadata::new(side))
    })
}

/// `SetSchemaMetadata$Key` / `SetSchemaMetadata$Value`.
struct SetSchemaMetadata {
    side: Side,
    name: Option<String>,
    version: Option<i32>,
}

impl SetSchemaMetadata {
    fn new(side: Side) -> Self {
        Self {
            side,
            name: None,
            version: None,
        }
    }
}

impl Transformation for SetSchemaMetadata {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![
            ConfigKey::optional(SCHEMA_NAME, None, "Schema name to set."),
            ConfigKey::optional(SCHEMA_VERSION, None, "Schema version to set."),
            ConfigKey::optional(
                REPLACE_NULL_WITH_DEFAULT,
                Some("true"),
                "Whether to replace fields that have a default value and that are null to the default value. When set to true, the default value is used, otherwise null is used. (Ferry's transforms do not apply schema default values yet: a null stays null.)",
            ),
        ]
    }

    fn configure(&mut self, config: &Config) -> Result<(), Vec<ConfigIssue>> {
        let mut issues = Issues::default();
        // ConfigDef trims STRING values; an empty name is still a name, as in Kafka Connect.
        let name = config.get(SCHEMA_NAME).map(|n| n.trim().to_owned());
        let version = config
            .get(SCHEMA_VERSION)
            .and_then(|raw| match raw.trim().parse::<i32>() {
                Ok(v) => Some(v),
                Err(_) => {
                    issues.push(SCHEMA_VERSION, format!("Not a number of type INT: {raw:?}"));
                    None
                }
            });
        boolean(config, REPLACE_NULL_WITH_DEFAULT, true, &mut issues);
        if name.is_none() && version.is_none() && !issues.has(SCHEMA_VERSION) {
            for key in [SCHEMA_NAME, SCHEMA_VERSION] {
                issues.push(key, "Neither schema name nor version configured");
            }
        }
        issues.finish(|| ())?;
        self.name = name;
        self.version = version;
        Ok(())
    }

    fn apply(&mut self, mut record: SourceRecord) -> Result<Option<SourceRecord>, ConnectError> {
        let (value, schema) = self.side.get(&record);
        if value.is_none_or(serde_json::Value::is_null) && schema.is_none() {
            return Ok(Some(record));
        }
        let mut updated = require_schema(schema, PURPOSE)?.clone();
        if let Some(name) = &self.name {
            updated.name = Some(name.clone());
        }
        if let Some(version) = self.version {
            updated.version = Some(version);
        }
        let value = value.cloned();
        self.side.set(&mut record, Some(updated), value);
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields_common::test_support::config;
    use ferry_api::{Field, Schema};
    use serde_json::json;

    fn configured(side: Side, pairs: &[(&str, &str)]) -> SetSchemaMetadata {
        let mut xform = SetSchemaMetadata::new(side);
        xform.configure(&config(pairs)).unwrap();
        xform
    }

    fn apply(xform: &mut SetSchemaMetadata, record: SourceRecord) -> SourceRecord {
        xform.apply(record).unwrap().unwrap()
    }

    fn empty_struct_record() -> SourceRecord {
        SourceRecord::builder("t")
            .value_schema(Schema::unnamed_struct([]))
            .build()
    }

    #[test]
    fn plugins_answer_to_kafka_connect_class_names() {
        let names: Vec<String> = plugins().iter().map(|p| p.class().to_owned()).collect();
        assert_eq!(
            names,
            [
                "org.apache.kafka.connect.transforms.SetSchemaMetadata$Key",
                "org.apache.kafka.connect.transforms.SetSchemaMetadata$Value"
            ]
        );
    }

    #[test]
    fn name_version_and_both_are_set() {
        let mut xform = configured(Side::Value, &[(SCHEMA_NAME, "foo")]);
        let out = apply(&mut xform, empty_struct_record());
        let schema = out.value_schema.unwrap();
        assert_eq!(
            (schema.name.as_deref(), schema.version),
            (Some("foo"), None)
        );

        let mut xform = configured(Side::Value, &[(SCHEMA_VERSION, "42")]);
        let out = apply(&mut xform, empty_struct_record());
        let schema = out.value_schema.unwrap();
        assert_eq!((schema.name.clone(), schema.version), (None, Some(42)));

        let mut xform = configured(Side::Value, &[(SCHEMA_NAME, "foo"), (SCHEMA_VERSION, "42")]);
        let out = apply(&mut xform, empty_struct_record());
        let schema = out.value_schema.unwrap();
        assert_eq!(
            (schema.name.as_deref(), schema.version),
            (Some("foo"), Some(42))
        );
    }

    #[test]
    fn struct_values_keep_their_fields_under_the_renamed_schema() {
        let mut xform = configured(Side::Value, &[(SCHEMA_NAME, "foo"), (SCHEMA_VERSION, "42")]);
        let schema = Schema::struct_(
            "my.orig.SchemaDefn",
            [
                Field::new("f1", Schema::string()),
                Field::new("f2", Schema::int32()),
            ],
        )
        .with_doc("kept");
        let value = json!({"f1": "value1", "f2": 1});
        let out = apply(
            &mut xform,
            SourceRecord::builder("t")
                .value_schema(schema.clone())
                .value(value.clone())
                .build(),
        );
        assert_eq!(out.value, Some(value));
        let mut expected = schema.with_version(42);
        expected.name = Some("foo".to_owned());
        assert_eq!(out.value_schema.as_deref().cloned(), Some(expected));
    }

    #[test]
    fn key_variant_updates_the_key_schema_only() {
        let mut xform = configured(Side::Key, &[(SCHEMA_NAME, "com.example.Key")]);
        let out = apply(
            &mut xform,
            SourceRecord::builder("t")
                .key_schema(Schema::int64())
                .key(json!(7))
                .value_schema(Schema::string())
                .value(json!("v"))
                .build(),
        );
        assert_eq!(
            out.key_schema.as_deref().cloned(),
            Some(Schema::int64().named("com.example.Key"))
        );
        assert_eq!(out.key, Some(json!(7)));
        assert_eq!(out.value_schema.as_deref().cloned(), Some(Schema::string()));
    }

    #[test]
    fn schemaless_values_fail_and_null_records_pass_through() {
        let mut xform = configured(Side::Value, &[(SCHEMA_NAME, "foo")]);
        let err = xform
            .apply(SourceRecord::builder("t").value(json!(42)).build())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Schema required for [updating schema metadata]"
        );
        let record = SourceRecord::builder("t").build();
        assert_eq!(apply(&mut xform, record.clone()), record);
    }

    #[test]
    fn config_errors_name_their_keys() {
        let issues = SetSchemaMetadata::new(Side::Value)
            .configure(&Config::new())
            .unwrap_err();
        let keys: Vec<&str> = issues.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(keys, [SCHEMA_NAME, SCHEMA_VERSION]);
        assert_eq!(
            issues[0].message,
            "Neither schema name nor version configured"
        );
        let issues = SetSchemaMetadata::new(Side::Value)
            .configure(&config(&[(SCHEMA_VERSION, "x")]))
            .unwrap_err();
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].key, SCHEMA_VERSION);
        assert_eq!(issues[0].message, "Not a number of type INT: \"x\"");
    }
}
