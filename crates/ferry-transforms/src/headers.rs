//! Header transforms: `InsertHeader`, `DropHeaders` and `HeaderFrom$Key` / `HeaderFrom$Value`, as
//! Kafka Connect's. Ferry headers carry a JSON value without a schema, so a header made from a
//! schemaful field keeps the field's value but not its schema.

use std::sync::Arc;

use crate::fields_common::Side;
use std::collections::HashSet;

use ferry_api::config::Issues;
use ferry_api::transform::{Transformation, TransformationPlugin};
use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConnectError, Header, Schema, SchemaKind, SourceRecord,
};
use serde_json::{Map, Value};

use crate::PACKAGE;
use crate::routing_config::{
    boolean_or, java_class_name, required_non_empty_list, required_string,
};

pub(crate) fn plugins() -> Vec<TransformationPlugin> {
    vec![
        TransformationPlugin::new([format!("{PACKAGE}.InsertHeader")], || {
            Box::new(InsertHeader::default()) as Box<dyn Transformation>
        }),
        TransformationPlugin::new([format!("{PACKAGE}.DropHeaders")], || {
            Box::new(DropHeaders::default()) as Box<dyn Transformation>
        }),
        TransformationPlugin::new([format!("{PACKAGE}.HeaderFrom$Key")], || {
            Box::new(HeaderFrom::new(Side::Key)) as Box<dyn Transformation>
        }),
        TransformationPlugin::new([format!("{PACKAGE}.HeaderFrom$Value")], || {
            Box::new(HeaderFrom::new(Side::Value)) as Box<dyn Transformation>
        }),
    ]
}

const HEADER: &str = "header";
const VALUE_LITERAL: &str = "value.literal";
const HEADERS: &str = "headers";
const FIELDS: &str = "fields";
const OPERATION: &str = "operation";
const REPLACE_NULL_WITH_DEFAULT: &str = "replace.null.with.default";

/// Kafka Connect's `InsertHeader`: adds header `header` with `value.literal` (parsed as Kafka's
/// `Values.parseString` does) to every record, after any header of the same name.
#[derive(Default)]
struct InsertHeader {
    header: Option<Header>,
}

impl Transformation for InsertHeader {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![
            ConfigKey::required(HEADER, "The name of the header."),
            ConfigKey::required(
                VALUE_LITERAL,
                "The literal value that is to be set as the header value on all records.",
            ),
        ]
    }

    fn configure(&mut self, config: &Config) -> Result<(), Vec<ConfigIssue>> {
        let mut issues = Issues::default();
        let key = required_string(config, HEADER, &mut issues);
        let literal = required_string(config, VALUE_LITERAL, &mut issues);
        self.header = issues.finish(|| {
            key.zip(literal).map(|(key, literal)| Header {
                key,
                value: parse_literal(&literal),
            })
        })?;
        Ok(())
    }

    fn apply(&mut self, mut record: SourceRecord) -> Result<Option<SourceRecord>, ConnectError> {
        let Some(header) = &self.header else {
            return Err(not_configured("InsertHeader"));
        };
        record.headers.push(header.clone());
        Ok(Some(record))
    }
}

/// The value Kafka's `Values.parseString` gives a literal, in JSON: `null`, `true`/`false`,
/// numbers (integral ones as integers, "1.0" included), JSON arrays and objects; anything else
/// (dates included) stays the string.
fn parse_literal(text: &str) -> Value {
    match text {
        "null" => return Value::Null,
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        _ => {}
    }
    if text.starts_with(['[', '{']) {
        if let Ok(v @ (Value::Array(_) | Value::Object(_))) = serde_json::from_str(text) {
            return v;
        }
    } else if is_decimal(text) {
        if let Ok(i) = text.parse::<i64>() {
            return Value::from(i);
        }
        if let Ok(f) = text.parse::<f64>() {
            // 2^63: above it an integral double no longer fits an i64.
            if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.223_372_036_854_775e18 {
                // Integral and in range, so the conversion is exact.
                #[allow(clippy::cast_possible_truncation)]
                return Value::from(f as i64);
            }
            // An integer too large for an i64 is a Decimal to Kafka; the text keeps its digits.
            if text.contains(['.', 'e', 'E'])
                && let Some(n) = serde_json::Number::from_f64(f)
            {
                return Value::Number(n);
            }
        }
    }
    Value::String(text.to_owned())
}

/// Whether `text` is a `java.math.BigDecimal` literal: sign, digits, optional fraction and
/// exponent (".5" is not: Kafka parses only tokens starting with a digit or a sign).
fn is_decimal(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = usize::from(matches!(bytes.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while bytes.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    if digits(&mut i) == 0 {
        return false;
    }
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        digits(&mut i);
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == bytes.len()
}

/// Kafka Connect's `DropHeaders`: removes every header whose name is in `headers`.
#[derive(Default)]
struct DropHeaders {
    headers: HashSet<String>,
}

impl Transformation for DropHeaders {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![ConfigKey::required(
            HEADERS,
            "The name of the headers to be removed.",
        )]
    }

    fn configure(&mut self, config: &Config) -> Result<(), Vec<ConfigIssue>> {
        let mut issues = Issues::default();
        let headers = required_non_empty_list(config, HEADERS, &mut issues);
        self.headers = issues
            .finish(|| headers)?
            .unwrap_or_default()
            .into_iter()
            .collect();
        Ok(())
    }

    fn apply(&mut self, mut record: SourceRecord) -> Result<Option<SourceRecord>, ConnectError> {
        record.headers.retain(|h| !self.headers.contains(&h.key));
        Ok(Some(record))
    }
}

/// `HeaderFrom`'s `operation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operation {
    Move,
    Copy,
}

impl Operation {
    fn name(self) -> &'static str {
        match self {
            Operation::Move => "move",
            Operation::Copy => "copy",
        }
    }
}

/// Kafka Connect's `HeaderFrom$Key` / `HeaderFrom$Value`: `fields[i]` of the key or value is
/// added as header `headers[i]` (after existing headers); `move` also removes the fields (from
/// the struct schema too), `copy` leaves them.
struct HeaderFrom {
    side: Side,
    fields: Vec<String>,
    headers: Vec<String>,
    operation: Operation,
    /// The last schema moved from and the schema without the moved fields (Kafka caches these).
    moved_schema: Option<(Schema, Schema)>,
}

impl HeaderFrom {
    fn new(side: Side) -> Self {
        Self {
            side,
            fields: Vec::new(),
            headers: Vec::new(),
            operation: Operation::Copy,
            moved_schema: None,
        }
    }

    fn schema_without_fields(&mut self, schema: &Schema) -> Schema {
        if let Some((from, to)) = &self.moved_schema
            && from == schema
        {
            return to.clone();
        }
        let fields = schema
            .fields()
            .iter()
            .filter(|f| !self.fields.contains(&f.name))
            .cloned();
        // Kafka copies name, version, doc and parameters into a new struct builder, which is
        // required (not optional) whatever the original was.
        let mut moved = Schema::unnamed_struct(fields);
        moved.name.clone_from(&schema.name);
        moved.version = schema.version;
        moved.doc.clone_from(&schema.doc);
        moved.parameters.clone_from(&schema.parameters);
        self.moved_schema = Some((schema.clone(), moved.clone()));
        moved
    }

    fn new_headers(&self, map: &Map<String, Value>) -> Vec<Header> {
        self.fields
            .iter()
            .zip(&self.headers)
            .map(|(field, header)| Header {
                key: header.clone(),
                value: map.get(field).cloned().unwrap_or(Value::Null),
            })
            .collect()
    }

    /// Adds the headers of a schemaless value, which must be a map; returns the map, without the
    /// fields when they move.
    fn headers_of_map(
        &self,
        value: Option<Value>,
        headers: &mut Vec<Header>,
        purpose: &str,
    ) -> Result<Value, ConnectError> {
        let Some(Value::Object(mut map)) = value else {
            return Err(ConnectError::fatal(format!(
                "Only Map objects supported in absence of schema for [{purpose}], found: {}",
                java_class_name(value.as_ref(), None)
            )));
        };
        // Values are read before any field is removed, so one field can feed two headers.
        let new = self.new_headers(&map);
        if self.operation == Operation::Move {
            for field in &self.fields {
                map.remove(field);
            }
        }
        headers.extend(new);
        Ok(Value::Object(map))
    }

    /// Adds the headers of a value with a schema, which must be a struct having the fields;
    /// returns the struct and its schema, both without the fields when they move.
    fn headers_of_struct(
        &mut self,
        value: Option<Value>,
        schema: Schema,
        headers: &mut Vec<Header>,
        purpose: &str,
    ) -> Result<(Value, Option<Schema>), ConnectError> {
        let map = match value {
            Some(Value::Object(map)) if matches!(schema.kind, SchemaKind::Struct { .. }) => map,
            other => {
                return Err(ConnectError::fatal(format!(
                    "Only Struct objects supported for [{purpose}], found: {}",
                    java_class_name(other.as_ref(), Some(&schema))
                )));
            }
        };
        if let Some(unknown) = self.fields.iter().find(|f| schema.field(f).is_none()) {
            // Kafka fails here with a NullPointerException; Struct's own message instead.
            return Err(ConnectError::fatal(format!(
                "{unknown} is not a valid field name: the record's {} schema ({schema}) has no such field; fix the transform's '{FIELDS}'",
                if self.side == Side::Key {
                    "key"
                } else {
                    "value"
                },
            )));
        }
        headers.extend(self.new_headers(&map));
        Ok(match self.operation {
            Operation::Copy => (Value::Object(map), Some(schema)),
            Operation::Move => {
                let moved = self.schema_without_fields(&schema);
                let kept: Map<String, Value> = moved
                    .fields()
                    .iter()
                    .filter_map(|f| map.get(&f.name).map(|v| (f.name.clone(), v.clone())))
                    .collect();
                (Value::Object(kept), Some(moved))
            }
        })
    }
}

impl Transformation for HeaderFrom {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![
            ConfigKey::required(
                FIELDS,
                "Field names in the record whose values are to be copied or moved to headers.",
            ),
            ConfigKey::required(
                HEADERS,
                "Header names, in the same order as the field names listed in the fields configuration property.",
            ),
            ConfigKey::required(
                OPERATION,
                "Either move if the fields are to be moved to the headers (removed from the key/value), or copy if the fields are to be copied to the headers (retained in the key/value).",
            ),
            ConfigKey::optional(
                REPLACE_NULL_WITH_DEFAULT,
                Some("true"),
                "Whether to replace fields that have a default value and that are null to the default value. Ferry's transforms do not apply schema default values yet, so a null stays null either way.",
            ),
        ]
    }

    fn configure(&mut self, config: &Config) -> Result<(), Vec<ConfigIssue>> {
        let mut issues = Issues::default();
        let fields = required_non_empty_list(config, FIELDS, &mut issues);
        let headers = required_non_empty_list(config, HEADERS, &mut issues);
        if let (Some(f), Some(h)) = (&fields, &headers)
            && f.len() != h.len()
        {
            issues.push(
                HEADERS,
                format!(
                    "'{FIELDS}' config must have the same number of elements as '{HEADERS}' config."
                ),
            );
        }
        let operation =
            required_string(config, OPERATION, &mut issues).and_then(|op| match op.as_str() {
                "move" => Some(Operation::Move),
                "copy" => Some(Operation::Copy),
                _ => {
                    issues.push(OPERATION, "String must be one of: move, copy");
                    None
                }
            });
        // Accepted for Kafka's configurations; without schema defaults it changes nothing.
        boolean_or(config, REPLACE_NULL_WITH_DEFAULT, true, &mut issues);
        let (fields, headers, operation) = issues.finish(|| (fields, headers, operation))?;
        self.fields = fields.unwrap_or_default();
        self.headers = headers.unwrap_or_default();
        self.operation = operation.unwrap_or(Operation::Copy);
        self.moved_schema = None;
        Ok(())
    }

    fn apply(&mut self, mut record: SourceRecord) -> Result<Option<SourceRecord>, ConnectError> {
        if self.fields.is_empty() {
            return Err(not_configured(match self.side {
                Side::Key => "HeaderFrom$Key",
                Side::Value => "HeaderFrom$Value",
            }));
        }
        let (value, schema) = match self.side {
            Side::Key => (record.key.take(), record.key_schema.take()),
            Side::Value => (record.value.take(), record.value_schema.take()),
        };
        let purpose = format!("header {}", self.operation.name());
        let (value, schema) = match schema {
            None => (
                self.headers_of_map(value, &mut record.headers, &purpose)?,
                None,
            ),
            Some(schema) => self.headers_of_struct(
                value,
                Arc::unwrap_or_clone(schema),
                &mut record.headers,
                &purpose,
            )?,
        };
        match self.side {
            Side::Key => {
                record.key = Some(value);
                record.key_schema = schema.map(Arc::new);
            }
            Side::Value => {
                record.value = Some(value);
                record.value_schema = schema.map(Arc::new);
            }
        }
        Ok(Some(record))
    }
}

fn not_configured(name: &str) -> ConnectError {
    ConnectError::fatal(format!(
        "{name} was applied before it was configured; configure it first"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields_common::test_support::config;
    use ferry_api::Field;
    use serde_json::json;

    fn make(
        class: &str,
        pairs: &[(&str, &str)],
    ) -> Result<Box<dyn Transformation>, Vec<ConfigIssue>> {
        let plugin = plugins()
            .into_iter()
            .find(|p| p.answers_to(&format!("org.apache.kafka.connect.transforms.{class}")))
            .unwrap();
        let mut t = plugin.make();
        t.configure(&config(pairs))?;
        Ok(t)
    }

    fn header(key: &str, value: Value) -> Header {
        Header {
            key: key.to_owned(),
            value,
        }
    }

    fn base() -> SourceRecord {
        SourceRecord::builder("topic")
            .kafka_partition(0)
            .key(json!("key"))
            .value(json!("value"))
            .timestamp(0)
            .build()
    }

    // InsertHeaderTest.
    #[test]
    fn insert_header_after_existing_ones() {
        let mut t = make(
            "InsertHeader",
            &[(HEADER, "inserted"), (VALUE_LITERAL, "inserted-value")],
        )
        .unwrap();
        let record = base().with_header("existing", json!("existing-value"));
        let out = t.apply(record.clone()).unwrap().unwrap();
        assert_eq!(
            out.headers,
            vec![
                header("existing", json!("existing-value")),
                header("inserted", json!("inserted-value"))
            ]
        );
        let mut rest = out;
        rest.headers.clone_from(&record.headers);
        assert_eq!(rest, record);

        // The same name is added again, not replaced.
        let mut t = make(
            "InsertHeader",
            &[(HEADER, "existing"), (VALUE_LITERAL, "inserted-value")],
        )
        .unwrap();
        let out = t
            .apply(base().with_header("existing", json!("preexisting-value")))
            .unwrap()
            .unwrap();
        assert_eq!(
            out.headers,
            vec![
                header("existing", json!("preexisting-value")),
                header("existing", json!("inserted-value"))
            ]
        );
    }

    #[test]
    fn insert_header_parses_the_literal_like_kafka_values() {
        for (literal, expected) in [
            ("1", json!(1)),
            ("-300", json!(-300)),
            ("1.0", json!(1)),
            ("1.5", json!(1.5)),
            ("2e3", json!(2000)),
            ("true", json!(true)),
            ("false", json!(false)),
            ("null", Value::Null),
            ("", json!("")),
            ("  padded  ", json!("padded")),
            ("[1,2]", json!([1, 2])),
            ("{\"a\":1}", json!({"a": 1})),
            ("[unclosed", json!("[unclosed")),
            ("true}", json!("true}")),
            (".5", json!(".5")),
            ("12abc", json!("12abc")),
            ("2017-01-03", json!("2017-01-03")),
            ("99999999999999999999", json!("99999999999999999999")),
        ] {
            let mut t = make("InsertHeader", &[(HEADER, "h"), (VALUE_LITERAL, literal)]).unwrap();
            let out = t.apply(base()).unwrap().unwrap();
            assert_eq!(out.headers, vec![header("h", expected)], "{literal:?}");
        }
    }

    #[test]
    fn insert_header_config_errors() {
        let issues = make("InsertHeader", &[]).err().unwrap();
        let keys: Vec<&str> = issues.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(keys, [HEADER, VALUE_LITERAL]);
        assert!(
            issues[0]
                .message
                .starts_with("Missing required configuration")
        );
    }

    // DropHeadersTest.
    #[test]
    fn drop_headers_removes_every_value_of_the_names() {
        let mut t = make("DropHeaders", &[(HEADERS, "to-drop, other")]).unwrap();
        let record = base()
            .with_header("existing", json!("existing-value"))
            .with_header("to-drop", json!("existing-value"))
            .with_header("other", json!(1))
            .with_header("to-drop", json!("existing-other-value"));
        let out = t.apply(record.clone()).unwrap().unwrap();
        assert_eq!(
            out.headers,
            vec![header("existing", json!("existing-value"))]
        );
        let mut rest = out;
        rest.headers.clone_from(&record.headers);
        assert_eq!(rest, record);
        // Nothing to drop.
        let record = base().with_header("existing", json!("existing-value"));
        assert_eq!(t.apply(record.clone()).unwrap().unwrap(), record);
    }

    #[test]
    fn drop_headers_rejects_an_empty_list() {
        let issues = make("DropHeaders", &[(HEADERS, " ")]).err().unwrap();
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].key, HEADERS);
        assert_eq!(issues[0].message, "Empty list");
        let issues = make("DropHeaders", &[]).err().unwrap();
        assert_eq!(issues[0].key, HEADERS);
    }

    fn header_from(
        side: Side,
        fields: &str,
        headers: &str,
        operation: &str,
    ) -> Box<dyn Transformation> {
        let class = match side {
            Side::Key => "HeaderFrom$Key",
            Side::Value => "HeaderFrom$Value",
        };
        make(
            class,
            &[(FIELDS, fields), (HEADERS, headers), (OPERATION, operation)],
        )
        .unwrap()
    }

    /// A record whose key or value (by `side`) is `part` with `schema`; the other is a string.
    fn record_with(side: Side, part: Value, schema: Option<Schema>) -> SourceRecord {
        let mut r = base().with_header("header1", json!("existing-value"));
        match side {
            Side::Key => {
                r.key = Some(part);
                r.key_schema = schema.map(Arc::new);
            }
            Side::Value => {
                r.value = Some(part);
                r.value_schema = schema.map(Arc::new);
            }
        }
        r
    }

    fn two_field_schema(field1: Schema) -> Schema {
        Schema::struct_(
            "com.example.Row",
            [
                Field::new("field1", field1),
                Field::new("field2", Schema::string()),
            ],
        )
        .with_version(3)
        .with_doc("a row")
        .with_parameter("p", "v")
    }

    // HeaderFromTest's cases, schemaful and schemaless, key and value.
    #[test]
    fn header_from_kafka_cases() {
        let nested_schema = Schema::unnamed_struct([Field::new("foo", Schema::string())]);
        let nested = json!({"foo": "foo-value"});
        struct Case {
            name: &'static str,
            field1: (Schema, Value),
            fields: &'static str,
            headers: &'static str,
            operation: &'static str,
            kept: &'static [&'static str],
            added: Vec<Header>,
        }
        let s = || (Schema::string(), json!("field1-value"));
        let cases = [
            Case {
                name: "basic copy",
                field1: s(),
                fields: "field1",
                headers: "inserted1",
                operation: "copy",
                kept: &["field1", "field2"],
                added: vec![header("inserted1", json!("field1-value"))],
            },
            Case {
                name: "basic move",
                field1: s(),
                fields: "field1",
                headers: "inserted1",
                operation: "move",
                kept: &["field2"],
                added: vec![header("inserted1", json!("field1-value"))],
            },
            Case {
                name: "copy with preexisting header",
                field1: s(),
                fields: "field1",
                headers: "header1",
                operation: "copy",
                kept: &["field1", "field2"],
                added: vec![header("header1", json!("field1-value"))],
            },
            Case {
                name: "copy with struct value",
                field1: (nested_schema.clone(), nested.clone()),
                fields: "field1",
                headers: "inserted1",
                operation: "copy",
                kept: &["field1", "field2"],
                added: vec![header("inserted1", nested.clone())],
            },
            Case {
                name: "move with struct value",
                field1: (nested_schema.clone(), nested.clone()),
                fields: "field1",
                headers: "inserted1",
                operation: "move",
                kept: &["field2"],
                added: vec![header("inserted1", nested.clone())],
            },
            Case {
                name: "two headers from same field",
                field1: s(),
                fields: "field1,field1",
                headers: "inserted1,inserted2",
                operation: "move",
                kept: &["field2"],
                added: vec![
                    header("inserted1", json!("field1-value")),
                    header("inserted2", json!("field1-value")),
                ],
            },
            Case {
                name: "two fields to same header",
                field1: s(),
                fields: "field1,field2",
                headers: "inserted1,inserted1",
                operation: "move",
                kept: &[],
                added: vec![
                    header("inserted1", json!("field1-value")),
                    header("inserted1", json!("field2-value")),
                ],
            },
            Case {
                name: "move null field",
                field1: (Schema::string().optional(), Value::Null),
                fields: "field1",
                headers: "inserted1",
                operation: "move",
                kept: &["field2"],
                added: vec![header("inserted1", Value::Null)],
            },
        ];
        for side in [Side::Key, Side::Value] {
            for case in &cases {
                let schema = two_field_schema(case.field1.0.clone());
                let part = json!({"field1": case.field1.1, "field2": "field2-value"});
                let kept_part: Map<String, Value> = case
                    .kept
                    .iter()
                    .map(|f| ((*f).to_owned(), part[*f].clone()))
                    .collect();
                let mut expected_headers = vec![header("header1", json!("existing-value"))];
                expected_headers.extend(case.added.iter().cloned());

                // Schemaful: a move removes the fields from the struct schema too.
                let mut t = header_from(side, case.fields, case.headers, case.operation);
                let out = t
                    .apply(record_with(side, part.clone(), Some(schema.clone())))
                    .unwrap()
                    .unwrap();
                let kept_schema = if case.operation == "move" {
                    let mut s = Schema::struct_(
                        "com.example.Row",
                        schema
                            .fields()
                            .iter()
                            .filter(|f| case.kept.contains(&f.name.as_str()))
                            .cloned(),
                    )
                    .with_version(3)
                    .with_doc("a row")
                    .with_parameter("p", "v");
                    s.optional = false;
                    s
                } else {
                    schema.clone()
                };
                let mut expected =
                    record_with(side, Value::Object(kept_part.clone()), Some(kept_schema));
                expected.headers.clone_from(&expected_headers);
                assert_eq!(out, expected, "{} ({side:?}, schemaful)", case.name);

                // Schemaless.
                let mut t = header_from(side, case.fields, case.headers, case.operation);
                let out = t
                    .apply(record_with(side, part.clone(), None))
                    .unwrap()
                    .unwrap();
                let mut expected = record_with(side, Value::Object(kept_part), None);
                expected.headers = expected_headers;
                assert_eq!(out, expected, "{} ({side:?}, schemaless)", case.name);
            }
        }
    }

    #[test]
    fn header_from_move_twice_uses_the_same_schema() {
        let mut t = header_from(Side::Value, "field1", "h", "move");
        let schema = two_field_schema(Schema::string());
        let part = json!({"field1": "a", "field2": "b"});
        let first = t
            .apply(record_with(Side::Value, part.clone(), Some(schema.clone())))
            .unwrap()
            .unwrap();
        let second = t
            .apply(record_with(Side::Value, part, Some(schema)))
            .unwrap()
            .unwrap();
        assert_eq!(first.value_schema, second.value_schema);
        assert_eq!(
            first.value_schema.as_ref().map(|s| s.fields().len()),
            Some(1)
        );
    }

    #[test]
    fn header_from_schemaless_missing_field_gives_a_null_header() {
        let mut t = header_from(Side::Value, "absent", "h", "move");
        let out = t
            .apply(record_with(Side::Value, json!({"a": 1}), None))
            .unwrap()
            .unwrap();
        assert_eq!(out.value, Some(json!({"a": 1})));
        assert_eq!(out.headers.last(), Some(&header("h", Value::Null)));
    }

    #[test]
    fn header_from_refuses_values_that_are_not_structs_or_maps() {
        let mut t = header_from(Side::Value, "f", "h", "copy");
        let err = t.apply(base()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Only Map objects supported in absence of schema for [header copy], found: java.lang.String"
        );
        let mut t = header_from(Side::Key, "f", "h", "move");
        let mut record = base();
        record.key = None;
        assert_eq!(
            t.apply(record).unwrap_err().to_string(),
            "Only Map objects supported in absence of schema for [header move], found: null"
        );
        let record = record_with(Side::Value, json!("x"), Some(Schema::string()));
        let mut t = header_from(Side::Value, "f", "h", "copy");
        assert_eq!(
            t.apply(record).unwrap_err().to_string(),
            "Only Struct objects supported for [header copy], found: java.lang.String"
        );
        // A tombstone with an optional struct schema is not a struct either.
        let mut record = base();
        record.value = None;
        record.value_schema = Some(Arc::new(two_field_schema(Schema::string()).optional()));
        assert_eq!(
            t.apply(record).unwrap_err().to_string(),
            "Only Struct objects supported for [header copy], found: null"
        );
    }

    #[test]
    fn header_from_refuses_a_field_missing_from_the_schema() {
        let mut t = header_from(Side::Value, "nope", "h", "copy");
        let record = record_with(
            Side::Value,
            json!({"field1": "a", "field2": "b"}),
            Some(two_field_schema(Schema::string())),
        );
        let err = t.apply(record).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("nope is not a valid field name"),
            "{err}"
        );
    }

    #[test]
    fn header_from_config_errors() {
        for class in ["HeaderFrom$Key", "HeaderFrom$Value"] {
            // invalidConfigExtraHeaderConfig / invalidConfigExtraFieldConfig.
            for (fields, headers) in [("foo,bar", "foo"), ("foo", "foo,bar")] {
                let issues = make(
                    class,
                    &[(FIELDS, fields), (HEADERS, headers), (OPERATION, "copy")],
                )
                .err()
                .unwrap();
                assert_eq!(issues.len(), 1);
                assert_eq!(
                    issues[0].message,
                    "'fields' config must have the same number of elements as 'headers' config."
                );
            }
            // invalidConfigEmptyHeadersAndFieldsConfig.
            let issues = make(class, &[(FIELDS, ""), (HEADERS, ""), (OPERATION, "copy")])
                .err()
                .unwrap();
            let keys: Vec<&str> = issues.iter().map(|i| i.key.as_str()).collect();
            assert_eq!(keys, [FIELDS, HEADERS]);
            assert!(issues.iter().all(|i| i.message == "Empty list"));

            let issues = make(
                class,
                &[
                    (FIELDS, "a"),
                    (HEADERS, "b"),
                    (OPERATION, "Move"),
                    (REPLACE_NULL_WITH_DEFAULT, "maybe"),
                ],
            )
            .err()
            .unwrap();
            assert_eq!(issues.len(), 2);
            assert_eq!(issues[0].key, OPERATION);
            assert_eq!(issues[0].message, "String must be one of: move, copy");
            assert_eq!(issues[1].key, REPLACE_NULL_WITH_DEFAULT);

            let issues = make(class, &[]).err().unwrap();
            let keys: Vec<&str> = issues.iter().map(|i| i.key.as_str()).collect();
            assert_eq!(keys, [FIELDS, HEADERS, OPERATION]);

            make(
                class,
                &[
                    (FIELDS, "a"),
                    (HEADERS, "b"),
                    (OPERATION, " move "),
                    (REPLACE_NULL_WITH_DEFAULT, "false"),
                ],
            )
            .unwrap();
        }
    }
}
