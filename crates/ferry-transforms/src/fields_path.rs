//! Kafka Connect's `SingleFieldPath` and `field.syntax.version` (KIP-821): `V1` names a top-level
//! field as written; `V2` reads a dotted path to a nested field, with backticks around a name that
//! holds dots (`` `a.b`.c ``) and a backslash before a backtick that ends no name (`` \` ``).

use ferry_api::config::Issues;
use ferry_api::{Config, ConnectError, Field, Schema, SchemaKind};
use serde_json::{Map, Value as Json};

use crate::fields_common::{java_class, require_struct};

/// The config key choosing the syntax.
pub(crate) const FIELD_SYNTAX_VERSION: &str = "field.syntax.version";

/// Kafka Connect's documentation of [`FIELD_SYNTAX_VERSION`].
pub(crate) const FIELD_SYNTAX_VERSION_DOC: &str = "Defines the version of the syntax to access fields. If set to `V1`, then the field paths are limited to access the elements at the root level of the struct or map. If set to `V2`, the syntax will support accessing nested elements. To access nested elements, dotted notation is used. If dots are already included in the field name, then backtick pairs can be used to wrap field names containing dots. E.g. to access the subfield `baz` from a field named \"foo.bar\" in a struct/map the following format can be used to access its elements: \"`foo.bar`.baz\".";

/// A field path: one or more steps, the last naming the field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldPath {
    steps: Vec<String>,
}

/// Whether `field.syntax.version` is `V2` (`V1`, the default, otherwise); `V1`/`V2` in any case.
pub(crate) fn is_v2(config: &Config, issues: &mut Issues) -> bool {
    let Some(raw) = config.get(FIELD_SYNTAX_VERSION) else {
        return false;
    };
    match raw.trim().to_ascii_uppercase().as_str() {
        "V1" => false,
        "V2" => true,
        _ => {
            issues.push(
                FIELD_SYNTAX_VERSION,
                format!("String must be one of (case insensitive): V1, V2 (found {raw:?})"),
            );
            false
        }
    }
}

/// A field path that names no field (`field.syntax.version=V2`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FieldPathError {
    #[error("the field path has no field")]
    Empty,
    /// Kafka Connect's message for an unclosed backtick.
    #[error(
        "Incomplete backtick pair in path: [{path}], consider adding a backslash before backtick at position {at} to escape it"
    )]
    IncompleteBacktick { path: String, at: usize },
}

impl FieldPath {
    /// The path `text` under syntax `V1` (one step) or `V2`; a message when a backtick pair is
    /// incomplete.
    pub(crate) fn parse(text: &str, v2: bool) -> Result<Self, FieldPathError> {
        if !v2 {
            return Ok(Self {
                steps: vec![text.to_owned()],
            });
        }
        let steps = parse_v2(text)?;
        if steps.is_empty() {
            return Err(FieldPathError::Empty);
        }
        Ok(Self { steps })
    }

    fn split(&self) -> (&[String], &str) {
        match self.steps.split_last() {
            Some((last, parents)) => (parents, last.as_str()),
            None => (&[], ""),
        }
    }

    /// The field the path names in `schema` (`fieldFrom`), `None` when a step is missing.
    ///
    /// # Errors
    /// A step looks into a schema that is not a struct.
    pub(crate) fn field_from<'a>(
        &self,
        schema: &'a Schema,
    ) -> Result<Option<&'a Field>, ConnectError> {
        let (parents, last) = self.split();
        let mut current = schema;
        for step in parents {
            match struct_field(current, step)? {
                Some(field) => current = &field.schema,
                None => return Ok(None),
            }
        }
        struct_field(current, last)
    }

    /// The data at the path in a struct (`valueFrom(Struct)`); null when a step is missing or null.
    ///
    /// # Errors
    /// A parent step holds data that is not a struct.
    pub(crate) fn value_from_struct(
        &self,
        schema: &Schema,
        map: &Map<String, Json>,
    ) -> Result<Json, ConnectError> {
        let (parents, last) = self.split();
        let (mut schema, mut map) = (schema, map);
        for step in parents {
            let Some(field) = schema.field(step) else {
                return Ok(Json::Null);
            };
            let sub = map.get(step.as_str()).filter(|v| !v.is_null());
            if sub.is_none() {
                return Ok(Json::Null);
            }
            let (_, sub_map) = require_struct(&field.schema, sub, "nested field access")?;
            (schema, map) = (&field.schema, sub_map);
        }
        Ok(match schema.field(last) {
            Some(_) => map.get(last).cloned().unwrap_or(Json::Null),
            None => Json::Null,
        })
    }

    /// The data at the path in a map (`valueFrom(Map)`); null when a step is missing or null.
    ///
    /// # Errors
    /// A parent step holds data that is not a map.
    pub(crate) fn value_from_map(&self, map: &Map<String, Json>) -> Result<Json, ConnectError> {
        let (parents, last) = self.split();
        let mut map = map;
        for step in parents {
            match map.get(step.as_str()) {
                None | Some(Json::Null) => return Ok(Json::Null),
                Some(Json::Object(sub)) => map = sub,
                Some(other) => {
                    return Err(ConnectError::fatal(format!(
                        "Only Map objects supported in absence of schema for [nested field access], found: {}",
                        java_class(None, Some(other))
                    )));
                }
            }
        }
        Ok(map.get(last).cloned().unwrap_or(Json::Null))
    }
}

/// `Schema.field(name)`, which fails on a schema that is not a struct.
fn struct_field<'a>(schema: &'a Schema, name: &str) -> Result<Option<&'a Field>, ConnectError> {
    match &schema.kind {
        SchemaKind::Struct { fields } => Ok(fields.iter().find(|f| f.name == name)),
        _ => Err(ConnectError::fatal(format!(
            "Cannot look up fields on non-struct type (looking up field {name:?} in a {} schema)",
            schema.type_name()
        ))),
    }
}

/// Kafka Connect's `SingleFieldPath.buildFieldPathV2`, over characters.
fn parse_v2(path: &str) -> Result<Vec<String>, FieldPathError> {
    let p: Vec<char> = path.chars().collect();
    let n = p.len();
    let find = |ch: char, from: usize| -> Option<usize> {
        p.get(from..)
            .and_then(|rest| rest.iter().position(|&c| c == ch))
            .map(|i| i + from)
    };
    let incomplete = |at: usize| FieldPathError::IncompleteBacktick {
        path: path.to_owned(),
        at,
    };
    let mut steps = Vec::new();
    let mut idx = 0;
    while idx < n {
        if p[idx] != '`' {
            let start = idx;
            match find('.', idx) {
                Some(dot) => {
                    steps.push(p[start..dot].iter().collect());
                    idx = dot + 1;
                }
                None => {
                    steps.push(p[start..].iter().collect());
                    idx = n;
                }
            }
        } else {
            let backtick_at = idx;
            idx += 1;
            let mut field = String::new();
            let mut start = idx;
            loop {
                idx = find('`', idx).ok_or_else(|| incomplete(backtick_at))?;
                // idx > backtick_at, so idx - 1 is inside the path.
                let escaped = p[idx - 1] == '\\';
                if idx + 1 >= n {
                    if escaped {
                        return Err(incomplete(backtick_at));
                    }
                    field.extend(&p[start..idx]);
                    steps.push(field);
                    idx += 1;
                    break;
                }
                if p[idx + 1] != '.' {
                    // A backtick inside the name: keep looking for one followed by a dot.
                    idx += 1;
                    continue;
                }
                if escaped {
                    field.extend(&p[start..idx - 1]);
                    field.push('`');
                    idx += 1;
                    start = idx;
                    continue;
                }
                field.extend(&p[start..idx]);
                steps.push(field);
                idx += 2;
                break;
            }
        }
    }
    if path.ends_with('.') {
        steps.push(String::new());
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(path: &str) -> Vec<String> {
        FieldPath::parse(path, true).unwrap().steps
    }

    #[test]
    fn v2_paths_split_as_kafka_connect() {
        // The cases of Kafka Connect's SingleFieldPathTest.
        assert_eq!(v2("foo"), ["foo"]);
        assert_eq!(v2("foo.bar"), ["foo", "bar"]);
        assert_eq!(v2("foo.bar.baz"), ["foo", "bar", "baz"]);
        assert_eq!(v2("`foo.bar`.baz"), ["foo.bar", "baz"]);
        assert_eq!(v2("foo.`bar.baz`"), ["foo", "bar.baz"]);
        assert_eq!(v2("`foo.bar.baz`"), ["foo.bar.baz"]);
        assert_eq!(v2("foo.`bar`"), ["foo", "bar"]);
        assert_eq!(v2("`foo`.bar"), ["foo", "bar"]);
        assert_eq!(v2("foo.`b`ar`.baz"), ["foo", "b`ar", "baz"]);
        assert_eq!(v2("foo.`b\\`.ar`.baz"), ["foo", "b`.ar", "baz"]);
        assert_eq!(v2("foo."), ["foo", ""]);
        assert_eq!(v2(".foo"), ["", "foo"]);
        assert_eq!(v2("foo..bar"), ["foo", "", "bar"]);
        assert_eq!(
            FieldPath::parse("foo.bar", false).unwrap().steps,
            ["foo.bar"]
        );
    }

    #[test]
    fn v2_incomplete_backticks_are_refused() {
        let err = FieldPath::parse("`foo.bar.baz", true).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Incomplete backtick pair in path: [`foo.bar.baz], consider adding a backslash before backtick at position 0 to escape it"
        );
        assert!(FieldPath::parse("foo.`bar\\`", true).is_err());
    }
}
