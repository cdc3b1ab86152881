//! `ReplaceField$Key` / `ReplaceField$Value`: filter and rename fields, as Kafka Connect's
//! `ReplaceField`.
//!
//! `exclude` wins over `include`; an empty `include` keeps every field. `renames` is a list of
//! `old:new` pairs. The deprecated `blacklist`/`whitelist` (Kafka Connect 3.x, removed in 4.0) are
//! read as `exclude`/`include` when those are not set, as Kafka Connect 3.x's
//! `ConfigUtils.translateDeprecatedConfigs` does. With a schema, the new struct schema keeps the
//! original's name, version, doc and parameters (not its optionality, as `copySchemaBasics`). A
//! null key/value passes unchanged.

use std::collections::{HashMap, HashSet};

use ferry_api::config::Issues;
use ferry_api::transform::{Transformation, TransformationPlugin};
use ferry_api::{Config, ConfigIssue, ConfigKey, ConnectError, Field, SourceRecord};
use serde_json::Value as Json;

use crate::fields_common::{
    REPLACE_NULL_WITH_DEFAULT, REPLACE_NULL_WITH_DEFAULT_DOC, Side, boolean, key_and_value, list,
    require_map, require_struct, struct_get, struct_like,
};

const EXCLUDE: &str = "exclude";
const INCLUDE: &str = "include";
const EXCLUDE_ALIAS: &str = "blacklist";
const INCLUDE_ALIAS: &str = "whitelist";
const RENAMES: &str = "renames";
const PURPOSE: &str = "field replacement";

pub(crate) fn plugins() -> Vec<TransformationPlugin> {
    key_and_value("ReplaceField", ReplaceField::new)
}

struct ReplaceField {
    side: Side,
    exclude: HashSet<String>,
    include: HashSet<String>,
    renames: HashMap<String, String>,
    reverse_renames: HashMap<String, String>,
}

impl ReplaceField {
    fn new(side: Side) -> Self {
        Self {
            side,
            exclude: HashSet::new(),
            include: HashSet::new(),
            renames: HashMap::new(),
            reverse_renames: HashMap::new(),
        }
    }

    fn filter(&self, name: &str) -> bool {
        !self.exclude.contains(name) && (self.include.is_empty() || self.include.contains(name))
    }

    fn renamed<'a>(&'a self, name: &'a str) -> &'a str {
        self.renames.get(name).map_or(name, String::as_str)
    }

    fn reverse_renamed<'a>(&'a self, name: &'a str) -> &'a str {
        self.reverse_renames.get(name).map_or(name, String::as_str)
    }
}

/// A list key, or its deprecated alias when the key itself is not set.
fn list_or_alias(config: &Config, key: &str, alias: &str) -> Vec<String> {
    list(config, key)
        .or_else(|| list(config, alias))
        .unwrap_or_default()
}

/// Kafka Connect's `parseRenameMappings`: each entry is `old:new` (Java's `split(":")`, which drops
/// trailing empty parts, must give exactly two parts). Later pairs win.
fn parse_renames(entries: &[String], issues: &mut Issues) -> Option<HashMap<String, String>> {
    let mut renames = HashMap::new();
    for entry in entries {
        let mut parts: Vec<&str> = entry.split(':').collect();
        while parts.last() == Some(&"") {
            parts.pop();
        }
        let [from, to] = parts[..] else {
            issues.push(
                RENAMES,
                format!(
                    "Invalid rename mapping: {entry} (expected a list of colon-delimited pairs, e.g. foo:bar,abc:xyz)"
                ),
            );
            return None;
        };
        renames.insert(from.to_owned(), to.to_owned());
    }
    Some(renames)
}

impl Transformation for ReplaceField {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![
            ConfigKey::optional(
                EXCLUDE,
                Some(""),
                "Fields to exclude. This takes precedence over the fields to include.",
            ),
            ConfigKey::optional(EXCLUDE_ALIAS, None, "Deprecated. Use exclude instead."),
            ConfigKey::optional(
                INCLUDE,
                Some(""),
                "Fields to include. If specified, only these fields will be used.",
            ),
            ConfigKey::optional(INCLUDE_ALIAS, None, "Deprecated. Use include instead."),
            ConfigKey::optional(
                RENAMES,
                Some(""),
                "Field rename mappings: a list of colon-delimited pairs, e.g. foo:bar,abc:xyz.",
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
        let exclude = list_or_alias(config, EXCLUDE, EXCLUDE_ALIAS);
        let include = list_or_alias(config, INCLUDE, INCLUDE_ALIAS);
        let renames = parse_renames(&list(config, RENAMES).unwrap_or_default(), &mut issues);
        boolean(config, REPLACE_NULL_WITH_DEFAULT, true, &mut issues);
        issues.finish(|| {
            let renames = renames.unwrap_or_default();
            self.reverse_renames = renames
                .iter()
                .map(|(from, to)| (to.clone(), from.clone()))
                .collect();
            self.renames = renames;
            self.exclude = exclude.into_iter().collect();
            self.include = include.into_iter().collect();
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
                let map = require_map(value, PURPOSE)?;
                let updated = map
                    .iter()
                    .filter(|(name, _)| self.filter(name))
                    .map(|(name, v)| (self.renamed(name).to_owned(), v.clone()))
                    .collect();
                (None, updated)
            }
            Some(schema) => {
                let (fields, map) = require_struct(schema, value, PURPOSE)?;
                let kept = fields
                    .iter()
                    .filter(|f| self.filter(&f.name))
                    .map(|f| Field::new(self.renamed(&f.name), f.schema.clone()))
                    .collect();
                let updated_schema = struct_like(Some(schema), kept)?;
                let updated = updated_schema
                    .fields()
                    .iter()
                    .map(|f| {
                        (
                            f.name.clone(),
                            struct_get(map, self.reverse_renamed(&f.name)),
                        )
                    })
                    .collect();
                (Some(updated_schema), updated)
            }
        };
        side.set(&mut record, schema, Some(Json::Object(updated)));
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

    fn make(variant: &str, pairs: &[(&str, &str)]) -> Box<dyn Transformation> {
        let mut t = plugin(&plugins(), &format!("{PACKAGE}.ReplaceField${variant}")).make();
        t.configure(&config(pairs)).expect("valid config");
        t
    }

    fn value_of(t: &mut Box<dyn Transformation>, value: Json) -> Json {
        let record = SourceRecord::builder("t").value(value).build();
        t.apply(record).unwrap().unwrap().value.unwrap()
    }

    #[test]
    fn value_schemaless_excludes_and_renames() {
        let mut t = make(
            "Value",
            &[("exclude", "dont"), ("renames", "abc:xyz,foo:bar")],
        );
        let out = value_of(
            &mut t,
            json!({"dont": "whatever", "abc": 42, "foo": true, "etc": "etc"}),
        );
        assert_eq!(out, json!({"xyz": 42, "bar": true, "etc": "etc"}));
    }

    #[test]
    fn include_keeps_only_listed_and_exclude_wins() {
        let mut t = make(
            "Value",
            &[
                ("include", "abc,foo"),
                ("exclude", "foo"),
                ("renames", "abc:xyz"),
            ],
        );
        let out = value_of(
            &mut t,
            json!({"dont": 1, "abc": 42, "foo": true, "etc": "etc"}),
        );
        assert_eq!(out, json!({"xyz": 42}));
    }

    #[test]
    fn deprecated_aliases_apply_unless_the_key_is_set() {
        let mut t = make(
            "Value",
            &[("blacklist", "dont"), ("renames", "abc:xyz,foo:bar")],
        );
        let out = value_of(
            &mut t,
            json!({"dont": "whatever", "abc": 42, "foo": true, "etc": "etc"}),
        );
        assert_eq!(out, json!({"xyz": 42, "bar": true, "etc": "etc"}));

        let mut t = make("Value", &[("whitelist", "abc")]);
        assert_eq!(
            value_of(&mut t, json!({"abc": 1, "d": 2})),
            json!({"abc": 1})
        );

        // The key wins over its alias.
        let mut t = make("Value", &[("include", "d"), ("whitelist", "abc")]);
        assert_eq!(value_of(&mut t, json!({"abc": 1, "d": 2})), json!({"d": 2}));
    }

    #[test]
    fn value_schemaful_builds_the_new_schema() {
        let mut t = make(
            "Value",
            &[("include", "abc,foo"), ("renames", "abc:xyz,foo:bar")],
        );
        let schema = Schema::struct_(
            "n",
            [
                Field::new("dont", Schema::string()),
                Field::new("abc", Schema::int32()),
                Field::new("foo", Schema::boolean()),
                Field::new("etc", Schema::string()),
            ],
        )
        .with_version(3)
        .optional();
        let record = SourceRecord::builder("t")
            .value_schema(schema)
            .value(json!({"dont": "whatever", "abc": 42, "foo": true, "etc": "etc"}))
            .build();
        let out = t.apply(record).unwrap().unwrap();
        // copySchemaBasics: name and version kept, optionality not.
        assert_eq!(
            out.value_schema.as_deref().cloned(),
            Some(
                Schema::struct_(
                    "n",
                    [
                        Field::new("xyz", Schema::int32()),
                        Field::new("bar", Schema::boolean()),
                    ]
                )
                .with_version(3)
            )
        );
        assert_eq!(out.value, Some(json!({"xyz": 42, "bar": true})));
    }

    #[test]
    fn key_variant_and_null_passthrough() {
        let mut t = make("Key", &[("exclude", "b")]);
        let record = SourceRecord::builder("t")
            .key(json!({"a": 1, "b": 2}))
            .value(json!({"b": 3}))
            .build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(out.key, Some(json!({"a": 1})));
        assert_eq!(out.value, Some(json!({"b": 3})));
        let record = SourceRecord::builder("t").value(json!(1)).build();
        assert_eq!(t.apply(record.clone()).unwrap().unwrap(), record);
    }

    #[test]
    fn key_schemaful_keeps_and_renames() {
        let mut t = make("Key", &[("include", "id"), ("renames", "id:key_id")]);
        let schema = Schema::struct_(
            "k",
            [
                Field::new("id", Schema::int64()),
                Field::new("x", Schema::string()),
            ],
        );
        let record = SourceRecord::builder("t")
            .key_schema(schema)
            .key(json!({"id": 7, "x": "y"}))
            .build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(
            out.key_schema.as_deref().cloned(),
            Some(Schema::struct_(
                "k",
                [Field::new("key_id", Schema::int64())]
            ))
        );
        assert_eq!(out.key, Some(json!({"key_id": 7})));
    }

    #[test]
    fn rename_onto_an_existing_struct_field_fails() {
        let mut t = make("Value", &[("renames", "a:b")]);
        let schema = Schema::struct_(
            "n",
            [
                Field::new("a", Schema::int32()),
                Field::new("b", Schema::int32()),
            ],
        );
        let record = SourceRecord::builder("t")
            .value_schema(schema)
            .value(json!({"a": 1, "b": 2}))
            .build();
        assert_eq!(
            t.apply(record).unwrap_err().to_string(),
            "Cannot create field because of field name duplication b"
        );
    }

    #[test]
    fn invalid_rename_is_a_config_issue() {
        let p = plugin(&plugins(), &format!("{PACKAGE}.ReplaceField$Value"));
        for bad in ["foo", "foo:", "a:b:c", "ok:fine,abc"] {
            let issues = p
                .make()
                .configure(&config(&[("renames", bad)]))
                .unwrap_err();
            assert!(
                has_issue(&issues, RENAMES, "Invalid rename mapping"),
                "{bad}"
            );
        }
    }
}
