//! `InsertField$Key` / `InsertField$Value`: insert fields from the record's metadata (topic,
//! partition, timestamp) or a static value, as Kafka Connect's `InsertField`.
//!
//! Each `*.field` names the field; a `!` suffix makes its schema required, `?` (the default) optional.
//! Schemaful data (a struct) gets a new struct schema with the fields appended (topic: string,
//! partition: int32, offset: int64, timestamp: Timestamp, static: string); schemaless data (a map)
//! gets the entries. A null key/value passes unchanged. `offset.field` is for sink records only:
//! on a source record Kafka Connect fails it ("Only SinkRecord supported for [field insertion]"),
//! and so does Ferry.

use ferry_api::config::Issues;
use ferry_api::transform::{Transformation, TransformationPlugin};
use ferry_api::{Config, ConfigIssue, ConfigKey, ConnectError, Field, Schema, SourceRecord};
use serde_json::Value as Json;

use crate::fields_common::{
    REPLACE_NULL_WITH_DEFAULT, REPLACE_NULL_WITH_DEFAULT_DOC, Side, boolean, key_and_value,
    optional_field_name, require_map, require_struct, struct_get, struct_like,
};

const TOPIC_FIELD: &str = "topic.field";
const PARTITION_FIELD: &str = "partition.field";
const OFFSET_FIELD: &str = "offset.field";
const TIMESTAMP_FIELD: &str = "timestamp.field";
const STATIC_FIELD: &str = "static.field";
const STATIC_VALUE: &str = "static.value";

const PURPOSE: &str = "field insertion";

pub(crate) fn plugins() -> Vec<TransformationPlugin> {
    key_and_value("InsertField", InsertField::new)
}

/// A field to insert: its name and whether its schema is optional.
#[derive(Debug, Clone)]
struct Spec {
    name: String,
    optional: bool,
}

impl Spec {
    /// Kafka Connect's `InsertionSpec.parse`: `name?` optional, `name!` required, `name` optional.
    fn parse(config: &Config, key: &str, issues: &mut Issues) -> Option<Self> {
        let raw = config.get(key)?;
        let raw = raw.trim();
        let (name, optional) = if let Some(name) = raw.strip_suffix('?') {
            (name, true)
        } else if let Some(name) = raw.strip_suffix('!') {
            (name, false)
        } else {
            (raw, true)
        };
        let name = optional_field_name(name, key, issues)?;
        Some(Self { name, optional })
    }

    fn schema(&self, schema: Schema) -> Schema {
        if self.optional {
            schema.optional()
        } else {
            schema
        }
    }
}

struct InsertField {
    side: Side,
    topic: Option<Spec>,
    partition: Option<Spec>,
    offset: Option<Spec>,
    timestamp: Option<Spec>,
    static_field: Option<Spec>,
    static_value: Option<String>,
}

impl InsertField {
    fn new(side: Side) -> Self {
        Self {
            side,
            topic: None,
            partition: None,
            offset: None,
            timestamp: None,
            static_field: None,
            static_value: None,
        }
    }

    /// The fields to add to `record`'s data, in Kafka Connect's order; `None` data: not added
    /// (no partition or timestamp on the record), except in a struct where the field stays null.
    fn insertions(&self, record: &SourceRecord, schemaful: bool) -> Vec<(&str, Option<Json>)> {
        let mut out = Vec::new();
        if let Some(spec) = &self.topic {
            out.push((spec.name.as_str(), Some(Json::from(record.topic.clone()))));
        }
        if let Some(spec) = &self.partition {
            out.push((spec.name.as_str(), record.kafka_partition.map(Json::from)));
        }
        if let Some(spec) = &self.timestamp {
            // A Timestamp is its epoch milliseconds in a record's JSON, with or without a schema.
            out.push((spec.name.as_str(), record.timestamp.map(Json::from)));
        }
        if let (Some(spec), Some(value)) = (&self.static_field, &self.static_value) {
            out.push((spec.name.as_str(), Some(Json::from(value.clone()))));
        }
        if schemaful {
            // The struct keeps every field of its schema; a field without data is null.
            for entry in &mut out {
                entry.1.get_or_insert(Json::Null);
            }
        }
        out
    }

    /// The updated struct schema: the original fields, then the inserted ones.
    fn updated_schema(&self, schema: &Schema, fields: &[Field]) -> Result<Schema, ConnectError> {
        let mut all = fields.to_vec();
        let added = [
            (&self.topic, Schema::string()),
            (&self.partition, Schema::int32()),
            (&self.offset, Schema::int64()),
            (&self.timestamp, Schema::timestamp()),
            (&self.static_field, Schema::string()),
        ];
        for (spec, field_schema) in added {
            if let Some(spec) = spec {
                all.push(Field::new(spec.name.clone(), spec.schema(field_schema)));
            }
        }
        struct_like(Some(schema), all)
    }
}

impl Transformation for InsertField {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![
            ConfigKey::optional(
                TOPIC_FIELD,
                None,
                "Field name for Kafka topic. Suffix with ! to make this a required field, or ? to keep it optional (the default).",
            ),
            ConfigKey::optional(
                PARTITION_FIELD,
                None,
                "Field name for Kafka partition. Suffix with ! to make this a required field, or ? to keep it optional (the default).",
            ),
            ConfigKey::optional(
                OFFSET_FIELD,
                None,
                "Field name for Kafka offset - only applicable to sink connectors (a source record with it fails). Suffix with ! to make this a required field, or ? to keep it optional (the default).",
            ),
            ConfigKey::optional(
                TIMESTAMP_FIELD,
                None,
                "Field name for record timestamp. Suffix with ! to make this a required field, or ? to keep it optional (the default).",
            ),
            ConfigKey::optional(
                STATIC_FIELD,
                None,
                "Field name for static data field. Suffix with ! to make this a required field, or ? to keep it optional (the default).",
            ),
            ConfigKey::optional(
                STATIC_VALUE,
                None,
                "Static field value, if field name configured.",
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
        let topic = Spec::parse(config, TOPIC_FIELD, &mut issues);
        let partition = Spec::parse(config, PARTITION_FIELD, &mut issues);
        let offset = Spec::parse(config, OFFSET_FIELD, &mut issues);
        let timestamp = Spec::parse(config, TIMESTAMP_FIELD, &mut issues);
        let static_field = Spec::parse(config, STATIC_FIELD, &mut issues);
        // ConfigDef trims a STRING value; an empty static value is a value.
        let static_value = config.get(STATIC_VALUE).map(|v| v.trim().to_owned());
        boolean(config, REPLACE_NULL_WITH_DEFAULT, true, &mut issues);

        let none_set = [
            TOPIC_FIELD,
            PARTITION_FIELD,
            OFFSET_FIELD,
            TIMESTAMP_FIELD,
            STATIC_FIELD,
        ]
        .iter()
        .all(|k| !config.contains_key(*k));
        if none_set {
            // Kafka Connect's ConfigException names no key; the first insertion key stands for all.
            issues.push(
                TOPIC_FIELD,
                "No field insertion configured: set at least one of topic.field, partition.field, timestamp.field, static.field",
            );
        }
        if let (Some(spec), None) = (&static_field, &static_value) {
            issues.push(
                STATIC_VALUE,
                format!("No value specified for static field: {}", spec.name),
            );
        }
        issues.finish(|| {
            self.topic = topic;
            self.partition = partition;
            self.offset = offset;
            self.timestamp = timestamp;
            self.static_field = static_field;
            self.static_value = static_value;
        })
    }

    fn apply(&mut self, mut record: SourceRecord) -> Result<Option<SourceRecord>, ConnectError> {
        let side = self.side;
        let value = side.value(&record);
        if value.is_none_or(Json::is_null) {
            return Ok(Some(record));
        }
        let (schema, updated) = match side.schema(&record) {
            None => {
                let mut map = require_map(value, PURPOSE)?.clone();
                self.refuse_offset()?;
                for (name, data) in self.insertions(&record, false) {
                    if let Some(data) = data {
                        map.insert(name.to_owned(), data);
                    }
                }
                (None, Json::Object(map))
            }
            Some(schema) => {
                let (fields, map) = require_struct(schema, value, PURPOSE)?;
                let updated_schema = self.updated_schema(schema, fields)?;
                self.refuse_offset()?;
                let mut out: serde_json::Map<String, Json> = fields
                    .iter()
                    .map(|f| (f.name.clone(), struct_get(map, &f.name)))
                    .collect();
                for (name, data) in self.insertions(&record, true) {
                    out.insert(name.to_owned(), data.unwrap_or(Json::Null));
                }
                (Some(updated_schema), Json::Object(out))
            }
        };
        side.set(&mut record, schema, Some(updated));
        Ok(Some(record))
    }
}

impl InsertField {
    /// Kafka Connect's `requireSinkRecord`: a source record has no Kafka offset to insert.
    fn refuse_offset(&self) -> Result<(), ConnectError> {
        if self.offset.is_some() {
            return Err(ConnectError::fatal(format!(
                "Only SinkRecord supported for [{PURPOSE}], found: org.apache.kafka.connect.source.SourceRecord \
                 (offset.field is only applicable to sink connectors: remove it from this source connector's transform)"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PACKAGE;
    use crate::fields_common::test_support::{config, has_issue, plugin};
    use serde_json::json;

    fn make(variant: &str, pairs: &[(&str, &str)]) -> Box<dyn Transformation> {
        let class = format!("{PACKAGE}.InsertField${variant}");
        let mut t = plugin(&plugins(), &class).make();
        t.configure(&config(pairs)).expect("valid config");
        t
    }

    fn all_fields() -> Vec<(&'static str, &'static str)> {
        vec![
            ("topic.field", "topic_field!"),
            ("partition.field", "partition_field"),
            ("timestamp.field", "timestamp_field?"),
            ("static.field", "instance_id"),
            ("static.value", "my-instance-id"),
        ]
    }

    #[test]
    fn value_schemaful_appends_fields_with_kafka_connect_schemas() {
        let mut t = make("Value", &all_fields());
        let schema = Schema::struct_("name", [Field::new("magic", Schema::int64())])
            .with_version(1)
            .with_doc("doc");
        let record = SourceRecord::builder("test")
            .kafka_partition(0)
            .timestamp(1_483_425_001_864)
            .value_schema(schema)
            .value(json!({"magic": 42}))
            .build();
        let out = t.apply(record).unwrap().unwrap();
        let s = out.value_schema.unwrap();
        assert_eq!(s.name.as_deref(), Some("name"));
        assert_eq!(s.version, Some(1));
        assert_eq!(s.doc.as_deref(), Some("doc"));
        assert_eq!(
            s.fields(),
            &[
                Field::new("magic", Schema::int64()),
                Field::new("topic_field", Schema::string()),
                Field::new("partition_field", Schema::int32().optional()),
                Field::new("timestamp_field", Schema::timestamp().optional()),
                Field::new("instance_id", Schema::string().optional()),
            ]
        );
        assert_eq!(
            out.value,
            Some(json!({
                "magic": 42, "topic_field": "test", "partition_field": 0,
                "timestamp_field": 1_483_425_001_864_i64, "instance_id": "my-instance-id"
            }))
        );
    }

    #[test]
    fn value_schemaless_inserts_map_entries() {
        let mut t = make("Value", &all_fields());
        let record = SourceRecord::builder("test")
            .kafka_partition(0)
            .timestamp(1_483_425_001_864)
            .value(json!({"magic": 42}))
            .build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(out.value_schema.as_deref().cloned(), None);
        assert_eq!(
            out.value,
            Some(json!({
                "magic": 42, "topic_field": "test", "partition_field": 0,
                "timestamp_field": 1_483_425_001_864_i64, "instance_id": "my-instance-id"
            }))
        );
    }

    #[test]
    fn schemaless_without_partition_or_timestamp_leaves_them_out() {
        let mut t = make("Value", &all_fields());
        let record = SourceRecord::builder("test").value(json!({})).build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(
            out.value,
            Some(json!({"topic_field": "test", "instance_id": "my-instance-id"}))
        );
    }

    #[test]
    fn key_variant_works_on_the_key_and_leaves_the_value() {
        let mut t = make("Key", &[("topic.field", "topic_field!")]);
        let schema = Schema::struct_("k", [Field::new("id", Schema::int32())]);
        let record = SourceRecord::builder("test")
            .key_schema(schema)
            .key(json!({"id": 1}))
            .value(json!("v"))
            .build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(out.key, Some(json!({"id": 1, "topic_field": "test"})));
        assert_eq!(
            out.key_schema.unwrap().fields()[1],
            Field::new("topic_field", Schema::string())
        );
        assert_eq!(out.value, Some(json!("v")));

        let mut t = make("Key", &[("static.field", "s"), ("static.value", "x")]);
        let record = SourceRecord::builder("t").key(json!({"id": 1})).build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(out.key, Some(json!({"id": 1, "s": "x"})));
    }

    #[test]
    fn null_value_passes_unchanged() {
        let mut t = make("Value", &all_fields());
        let record = SourceRecord::builder("test")
            .value_schema(Schema::struct_("n", []).optional())
            .build();
        let out = t.apply(record.clone()).unwrap().unwrap();
        assert_eq!(out, record);
        let record = SourceRecord::builder("test").build();
        assert_eq!(t.apply(record.clone()).unwrap().unwrap(), record);
    }

    #[test]
    fn non_struct_and_non_map_fail_with_kafka_connect_messages() {
        let mut t = make("Value", &[("topic.field", "t")]);
        let record = SourceRecord::builder("test")
            .value_schema(Schema::string())
            .value(json!("hello"))
            .build();
        let err = t.apply(record).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Only Struct objects supported for [field insertion], found: java.lang.String"
        );
        let record = SourceRecord::builder("test").value(json!(42)).build();
        let err = t.apply(record).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Only Map objects supported in absence of schema for [field insertion], found: java.lang.Long"
        );
    }

    #[test]
    fn offset_field_fails_on_a_source_record() {
        let mut t = make("Value", &[("offset.field", "offset")]);
        let record = SourceRecord::builder("test").value(json!({})).build();
        let err = t.apply(record).unwrap_err();
        assert!(err
            .to_string()
            .starts_with("Only SinkRecord supported for [field insertion], found: org.apache.kafka.connect.source.SourceRecord"));
        assert!(!err.is_retriable());
    }

    #[test]
    fn inserting_an_existing_field_into_a_struct_fails() {
        let mut t = make("Value", &[("topic.field", "id")]);
        let schema = Schema::struct_("s", [Field::new("id", Schema::int32())]);
        let record = SourceRecord::builder("test")
            .value_schema(schema)
            .value(json!({"id": 1}))
            .build();
        let err = t.apply(record).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Cannot create field because of field name duplication id"
        );
    }

    #[test]
    fn config_errors_name_their_key() {
        let p = plugin(&plugins(), &format!("{PACKAGE}.InsertField$Value"));
        let issues = p.make().configure(&config(&[])).unwrap_err();
        assert!(has_issue(
            &issues,
            TOPIC_FIELD,
            "No field insertion configured"
        ));
        let issues = p
            .make()
            .configure(&config(&[("static.field", "s")]))
            .unwrap_err();
        assert!(has_issue(
            &issues,
            STATIC_VALUE,
            "No value specified for static field: s"
        ));
        let issues = p
            .make()
            .configure(&config(&[
                ("topic.field", "t"),
                ("replace.null.with.default", "maybe"),
            ]))
            .unwrap_err();
        assert!(has_issue(
            &issues,
            REPLACE_NULL_WITH_DEFAULT,
            "true or false"
        ));
        let issues = p
            .make()
            .configure(&config(&[("topic.field", " ! ")]))
            .unwrap_err();
        assert!(has_issue(&issues, TOPIC_FIELD, "must not be empty"));
    }

    #[test]
    fn plugins_answer_to_the_class_names() {
        let names: Vec<String> = plugins()
            .iter()
            .flat_map(|p| p.names().map(str::to_owned).collect::<Vec<_>>())
            .collect();
        assert_eq!(
            names,
            [
                format!("{PACKAGE}.InsertField$Key"),
                format!("{PACKAGE}.InsertField$Value")
            ]
        );
    }
}
