//! `MaskField$Key` / `MaskField$Value`: replace fields with their type's empty value, or with
//! `replacement` converted to the field's type, as Kafka Connect's `MaskField`.
//!
//! Empty values: `false`, `0` (every integer and float type, Date/Time/Timestamp: the epoch,
//! Decimal: zero), `""`, `[]`, `{}`. A replacement applies to numbers (Kafka Connect's
//! `new BigDecimal(replacement).longValue()` for integers: a fraction is cut off) and strings;
//! other types fail ("Cannot mask value of type … with custom replacement."). Without a schema a
//! JSON integer is a `Long` and another number a `Double`, as Kafka Connect's `JsonConverter` reads
//! them; a listed field the map lacks is added as null (Kafka Connect puts every listed field). A
//! null field stays null. A null key/value fails, as in Kafka Connect.

use std::collections::HashSet;
use std::sync::LazyLock;

use base64::Engine as _;
use ferry_api::config::Issues;
use ferry_api::transform::{Transformation, TransformationPlugin};
use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConnectError, DATE_LOGICAL_NAME, DECIMAL_LOGICAL_NAME, Schema,
    SchemaKind, SourceRecord, TIME_LOGICAL_NAME, TIMESTAMP_LOGICAL_NAME,
};
use regex::Regex;
use serde_json::Value as Json;

use crate::fields_common::{
    REPLACE_NULL_WITH_DEFAULT, REPLACE_NULL_WITH_DEFAULT_DOC, Side, boolean, json_class,
    key_and_value, require_map, require_struct, required_non_empty_list, schema_class, struct_get,
};

const FIELDS: &str = "fields";
const REPLACEMENT: &str = "replacement";
const PURPOSE: &str = "mask fields";

pub(crate) fn plugins() -> Vec<TransformationPlugin> {
    key_and_value("MaskField", MaskField::new)
}

/// What Java's `new BigDecimal(String)` accepts.
static BIG_DECIMAL: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$").ok());

/// The Java type of a value to mask, which decides its empty value and whether a replacement fits.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Bool,
    Byte,
    Short,
    Int,
    Long,
    Float,
    Double,
    Str,
    Decimal(i32),
    Date,
    List,
    Map,
    /// Bytes or a struct: cannot be masked. The Java class name.
    Other(&'static str),
}

impl Kind {
    fn of_schema(schema: &Schema) -> Self {
        let name = schema.name.as_deref();
        match &schema.kind {
            SchemaKind::Int8 => Kind::Byte,
            SchemaKind::Int16 => Kind::Short,
            SchemaKind::Int32 if matches!(name, Some(DATE_LOGICAL_NAME | TIME_LOGICAL_NAME)) => {
                Kind::Date
            }
            SchemaKind::Int32 => Kind::Int,
            SchemaKind::Int64 if name == Some(TIMESTAMP_LOGICAL_NAME) => Kind::Date,
            SchemaKind::Int64 => Kind::Long,
            SchemaKind::Float32 => Kind::Float,
            SchemaKind::Float64 => Kind::Double,
            SchemaKind::Boolean => Kind::Bool,
            SchemaKind::String => Kind::Str,
            SchemaKind::Bytes if name == Some(DECIMAL_LOGICAL_NAME) => Kind::Decimal(
                schema
                    .parameter("scale")
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0),
            ),
            SchemaKind::Array { .. } => Kind::List,
            SchemaKind::Map { .. } => Kind::Map,
            SchemaKind::Bytes | SchemaKind::Struct { .. } => Kind::Other(schema_class(schema)),
        }
    }

    fn of_json(value: &Json) -> Self {
        match value {
            Json::Bool(_) => Kind::Bool,
            Json::Number(n) if n.is_f64() => Kind::Double,
            Json::Number(_) => Kind::Long,
            Json::String(_) => Kind::Str,
            Json::Array(_) => Kind::List,
            Json::Object(_) => Kind::Map,
            Json::Null => Kind::Other(json_class(value)),
        }
    }

    fn class(self) -> &'static str {
        match self {
            Kind::Bool => "java.lang.Boolean",
            Kind::Byte => "java.lang.Byte",
            Kind::Short => "java.lang.Short",
            Kind::Int => "java.lang.Integer",
            Kind::Long => "java.lang.Long",
            Kind::Float => "java.lang.Float",
            Kind::Double => "java.lang.Double",
            Kind::Str => "java.lang.String",
            Kind::Decimal(_) => "java.math.BigDecimal",
            Kind::Date => "java.util.Date",
            Kind::List => "java.util.ArrayList",
            Kind::Map => "java.util.HashMap",
            Kind::Other(class) => class,
        }
    }
}

struct MaskField {
    side: Side,
    fields: HashSet<String>,
    replacement: Option<String>,
}

impl MaskField {
    fn new(side: Side) -> Self {
        Self {
            side,
            fields: HashSet::new(),
            replacement: None,
        }
    }

    fn masked(&self, kind: Kind, value: &Json) -> Result<Json, ConnectError> {
        if value.is_null() {
            return Ok(Json::Null);
        }
        match &self.replacement {
            None => empty(kind, value),
            Some(replacement) => replaced(kind, replacement),
        }
    }
}

/// Kafka Connect's `maskWithNullValue`.
fn empty(kind: Kind, value: &Json) -> Result<Json, ConnectError> {
    Ok(match kind {
        Kind::Bool => Json::Bool(false),
        Kind::Byte | Kind::Short | Kind::Int | Kind::Long | Kind::Date => Json::from(0),
        Kind::Float | Kind::Double => Json::from(0.0),
        Kind::Str => Json::from(""),
        Kind::Decimal(_) => Json::from(decimal_bytes(0)),
        Kind::List => Json::Array(Vec::new()),
        // A map whose keys are not strings is a list of pairs in JSON.
        Kind::Map if value.is_array() => Json::Array(Vec::new()),
        Kind::Map => Json::Object(serde_json::Map::new()),
        Kind::Other(class) => {
            return Err(ConnectError::fatal(format!(
                "Cannot mask value of type: class {class}"
            )));
        }
    })
}

/// Kafka Connect's `maskWithCustomReplacement`.
fn replaced(kind: Kind, replacement: &str) -> Result<Json, ConnectError> {
    Ok(match kind {
        // Java narrows a long to byte/short/int by keeping its low bits; so does `as`.
        Kind::Byte => Json::from(as_long(replacement)? as i8),
        Kind::Short => Json::from(as_long(replacement)? as i16),
        Kind::Int => Json::from(as_long(replacement)? as i32),
        Kind::Long => Json::from(as_long(replacement)?),
        Kind::Float => {
            // Through the float's shortest text, so 0.1f is written 0.1 (as Java prints it).
            let float = as_double(replacement)? as f32;
            Json::from(float.to_string().parse::<f64>().unwrap_or(f64::from(float)))
        }
        Kind::Double => Json::from(as_double(replacement)?),
        Kind::Str => Json::from(replacement),
        Kind::Decimal(scale) => Json::from(decimal_replacement(replacement, scale)?),
        Kind::Bool | Kind::Date | Kind::List | Kind::Map | Kind::Other(_) => {
            return Err(ConnectError::fatal(format!(
                "Cannot mask value of type class {} with custom replacement.",
                kind.class()
            )));
        }
    })
}

fn not_a_number(replacement: &str) -> ConnectError {
    ConnectError::fatal(format!(
        "Unable to convert {replacement} (class java.lang.String) to a number"
    ))
}

fn check_big_decimal(text: &str) -> Result<(), ConnectError> {
    match &*BIG_DECIMAL {
        Some(re) if re.is_match(text) => Ok(()),
        _ => Err(not_a_number(text)),
    }
}

/// Java's `new BigDecimal(text).longValue()` (beyond the `long` range it saturates where Java
/// keeps the low 64 bits).
fn as_long(text: &str) -> Result<i64, ConnectError> {
    check_big_decimal(text)?;
    if let Ok(v) = text.parse::<i64>() {
        return Ok(v);
    }
    let v: f64 = text.parse().map_err(|_| not_a_number(text))?;
    // Truncation toward zero, as BigDecimal.longValue.
    Ok(v.trunc() as i64)
}

/// Java's `new BigDecimal(text).doubleValue()`.
fn as_double(text: &str) -> Result<f64, ConnectError> {
    check_big_decimal(text)?;
    text.parse().map_err(|_| not_a_number(text))
}

/// `new BigDecimal(replacement)` written under a Decimal schema of `scale`: its scale must be the
/// schema's (Kafka Connect's `Decimal.fromLogical` refuses another).
fn decimal_replacement(text: &str, scale: i32) -> Result<String, ConnectError> {
    check_big_decimal(text)?;
    let overflow = || {
        ConnectError::fatal(format!(
            "Unable to convert {text} (class java.lang.String) to number: too many digits for Ferry's 128-bit decimals"
        ))
    };
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (
            &text[..at],
            text[at + 1..].parse::<i32>().map_err(|_| overflow())?,
        ),
        None => (text, 0),
    };
    let (negative, digits) = match mantissa.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, mantissa.trim_start_matches('+')),
    };
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    let fraction_len = i32::try_from(frac_part.len()).map_err(|_| overflow())?;
    let value_scale = fraction_len - exponent;
    if value_scale != scale {
        return Err(ConnectError::fatal(format!(
            "BigDecimal has mismatching scale value for given Decimal schema: {text} has scale {value_scale}, the schema {scale}; write the replacement with {scale} decimal places"
        )));
    }
    let all: String = format!("{int_part}{frac_part}");
    let mut unscaled: i128 = if all.is_empty() {
        0
    } else {
        all.parse().map_err(|_| overflow())?
    };
    if negative {
        unscaled = -unscaled;
    }
    Ok(decimal_bytes(unscaled))
}

/// An unscaled decimal as Kafka Connect writes it: Java's `BigInteger.toByteArray` (minimal
/// big-endian two's complement), base64.
fn decimal_bytes(unscaled: i128) -> String {
    let bytes = unscaled.to_be_bytes();
    let mut start = 0;
    // Drop a leading byte that only repeats the sign of the next one.
    while start + 1 < bytes.len() {
        let (b, next_high) = (bytes[start], bytes[start + 1] & 0x80);
        if (b == 0x00 && next_high == 0) || (b == 0xff && next_high != 0) {
            start += 1;
        } else {
            break;
        }
    }
    base64::engine::general_purpose::STANDARD.encode(&bytes[start..])
}

impl Transformation for MaskField {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![
            ConfigKey::required(FIELDS, "Names of fields to mask."),
            ConfigKey::optional(
                REPLACEMENT,
                None,
                "Custom value replacement, that will be applied to all 'fields' values (numeric or non-empty string values only).",
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
        // ConfigDef.NonEmptyString: a set replacement must not be empty (after trimming).
        let replacement = config.get(REPLACEMENT).map(|r| r.trim().to_owned());
        if replacement.as_deref() == Some("") {
            issues.push(REPLACEMENT, "String must be non-empty");
        }
        boolean(config, REPLACE_NULL_WITH_DEFAULT, true, &mut issues);
        issues.finish(|| {
            self.fields = fields.unwrap_or_default().into_iter().collect();
            self.replacement = replacement;
        })
    }

    fn apply(&mut self, mut record: SourceRecord) -> Result<Option<SourceRecord>, ConnectError> {
        let side = self.side;
        let value = side.value(&record);
        let updated = match side.schema(&record) {
            None => {
                let mut map = require_map(value, PURPOSE)?.clone();
                for name in &self.fields {
                    let current = struct_get(&map, name);
                    let masked = self.masked(Kind::of_json(&current), &current)?;
                    map.insert(name.clone(), masked);
                }
                map
            }
            Some(schema) => {
                let (fields, map) = require_struct(schema, value, PURPOSE)?;
                let mut out = serde_json::Map::new();
                for field in fields {
                    let current = struct_get(map, &field.name);
                    let data = if self.fields.contains(&field.name) {
                        self.masked(Kind::of_schema(&field.schema), &current)?
                    } else {
                        current
                    };
                    out.insert(field.name.clone(), data);
                }
                out
            }
        };
        // MaskField keeps the schema.
        side.set_value(&mut record, Some(Json::Object(updated)));
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PACKAGE;
    use crate::fields_common::test_support::{config, has_issue, plugin};
    use ferry_api::Field;
    use serde_json::json;

    fn make(variant: &str, pairs: &[(&str, &str)]) -> Box<dyn Transformation> {
        let mut t = plugin(&plugins(), &format!("{PACKAGE}.MaskField${variant}")).make();
        t.configure(&config(pairs)).expect("valid config");
        t
    }

    fn schema() -> Schema {
        Schema::struct_(
            "s",
            [
                Field::new("magic", Schema::int32()),
                Field::new("bool", Schema::boolean()),
                Field::new("byte", Schema::int8()),
                Field::new("short", Schema::int16()),
                Field::new("int", Schema::int32()),
                Field::new("long", Schema::int64()),
                Field::new("float", Schema::float32()),
                Field::new("double", Schema::float64()),
                Field::new("string", Schema::string()),
                Field::new("date", Schema::date()),
                Field::new("time", Schema::time()),
                Field::new("timestamp", Schema::timestamp()),
                Field::new("decimal", Schema::decimal(0)),
                Field::new("array", Schema::array(Schema::int32())),
                Field::new("map", Schema::map(Schema::string(), Schema::string())),
                Field::new("opt", Schema::string().optional()),
            ],
        )
    }

    fn struct_value() -> Json {
        json!({
            "magic": 42, "bool": true, "byte": 42, "short": 42, "int": 42, "long": 42,
            "float": 42.0, "double": 42.0, "string": "hmm", "date": 17000, "time": 1000,
            "timestamp": 1_700_000_000_000_i64, "decimal": "Kg==", "array": [1, 2, 3],
            "map": {"what": "what"}, "opt": null
        })
    }

    #[test]
    fn value_schemaful_masks_with_empty_values() {
        let fields: Vec<String> = schema()
            .fields()
            .iter()
            .map(|f| f.name.clone())
            .filter(|n| n != "magic")
            .collect();
        let mut t = make("Value", &[("fields", &fields.join(","))]);
        let record = SourceRecord::builder("t")
            .value_schema(schema())
            .value(struct_value())
            .build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(out.value_schema.as_deref().cloned(), Some(schema()));
        assert_eq!(
            out.value,
            Some(json!({
                "magic": 42, "bool": false, "byte": 0, "short": 0, "int": 0, "long": 0,
                "float": 0.0, "double": 0.0, "string": "", "date": 0, "time": 0,
                "timestamp": 0, "decimal": "AA==", "array": [], "map": {}, "opt": null
            }))
        );
    }

    #[test]
    fn value_schemaless_masks_by_json_type_and_adds_absent_fields() {
        let mut t = make(
            "Value",
            &[("fields", "bool,long,double,string,list,map,absent")],
        );
        let record = SourceRecord::builder("t")
            .value(json!({
                "magic": 42, "bool": true, "long": 42, "double": 4.2, "string": "55.121.20.20",
                "list": [42], "map": {"key": "value"}
            }))
            .build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(
            out.value,
            Some(json!({
                "magic": 42, "bool": false, "long": 0, "double": 0.0, "string": "",
                "list": [], "map": {}, "absent": null
            }))
        );
    }

    #[test]
    fn replacement_is_converted_to_the_field_type() {
        let cases: &[(&str, &str, Json)] = &[
            ("byte", "123", json!(123)),
            ("short", "123", json!(123)),
            ("int", "123", json!(123)),
            ("long", "123", json!(123)),
            ("int", "123.9", json!(123)),
            ("float", "123", json!(123.0)),
            ("float", "0.1", json!(0.1)),
            ("double", "123", json!(123.0)),
            ("string", "123", json!("123")),
            ("decimal", "123", json!("ew==")),
        ];
        for (field, replacement, expected) in cases {
            let mut t = make("Value", &[("fields", field), ("replacement", replacement)]);
            let record = SourceRecord::builder("t")
                .value_schema(schema())
                .value(struct_value())
                .build();
            let out = t.apply(record).unwrap().unwrap().value.unwrap();
            assert_eq!(&out[field], expected, "{field} with {replacement}");
        }
        let mut t = make(
            "Value",
            &[("fields", "long,double,string"), ("replacement", "123")],
        );
        let record = SourceRecord::builder("t")
            .value(json!({"long": 1, "double": 1.5, "string": "x"}))
            .build();
        assert_eq!(
            t.apply(record).unwrap().unwrap().value,
            Some(json!({"long": 123, "double": 123.0, "string": "123"}))
        );
    }

    #[test]
    fn unsupported_replacements_fail() {
        for field in ["bool", "date", "array", "map"] {
            let mut t = make("Value", &[("fields", field), ("replacement", "123")]);
            let record = SourceRecord::builder("t")
                .value_schema(schema())
                .value(struct_value())
                .build();
            let err = t.apply(record).unwrap_err().to_string();
            assert!(err.starts_with("Cannot mask value of type class"), "{err}");
        }
        let mut t = make("Value", &[("fields", "int"), ("replacement", "abc")]);
        let record = SourceRecord::builder("t")
            .value_schema(schema())
            .value(struct_value())
            .build();
        assert_eq!(
            t.apply(record).unwrap_err().to_string(),
            "Unable to convert abc (class java.lang.String) to a number"
        );
    }

    #[test]
    fn bytes_and_structs_cannot_be_masked() {
        let schema = Schema::struct_("s", [Field::new("b", Schema::bytes())]);
        let mut t = make("Value", &[("fields", "b")]);
        let record = SourceRecord::builder("t")
            .value_schema(schema)
            .value(json!({"b": "AQI="}))
            .build();
        assert_eq!(
            t.apply(record).unwrap_err().to_string(),
            "Cannot mask value of type: class [B"
        );
    }

    #[test]
    fn key_variant_masks_the_key() {
        let mut t = make("Key", &[("fields", "secret")]);
        let record = SourceRecord::builder("t")
            .key(json!({"id": 1, "secret": "pw"}))
            .value(json!({"secret": "pw"}))
            .build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(out.key, Some(json!({"id": 1, "secret": ""})));
        assert_eq!(out.value, Some(json!({"secret": "pw"})));
    }

    #[test]
    fn key_schemaful_masks_the_key_struct() {
        let mut t = make("Key", &[("fields", "ssn"), ("replacement", "***")]);
        let schema = Schema::struct_(
            "k",
            [
                Field::new("id", Schema::int32()),
                Field::new("ssn", Schema::string()),
            ],
        );
        let record = SourceRecord::builder("t")
            .key_schema(schema.clone())
            .key(json!({"id": 1, "ssn": "123-45-6789"}))
            .build();
        let out = t.apply(record).unwrap().unwrap();
        assert_eq!(out.key_schema.as_deref().cloned(), Some(schema));
        assert_eq!(out.key, Some(json!({"id": 1, "ssn": "***"})));
    }

    #[test]
    fn null_value_fails_as_in_kafka_connect() {
        let mut t = make("Value", &[("fields", "a")]);
        let err = t.apply(SourceRecord::builder("t").build()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Only Map objects supported in absence of schema for [mask fields], found: null"
        );
    }

    #[test]
    fn config_issues_name_their_key() {
        let p = plugin(&plugins(), &format!("{PACKAGE}.MaskField$Value"));
        let issues = p.make().configure(&config(&[])).unwrap_err();
        assert!(has_issue(
            &issues,
            FIELDS,
            "Missing required configuration \"fields\""
        ));
        let issues = p.make().configure(&config(&[("fields", " ")])).unwrap_err();
        assert!(has_issue(&issues, FIELDS, "Empty list"));
        let issues = p
            .make()
            .configure(&config(&[("fields", "a"), ("replacement", "")]))
            .unwrap_err();
        assert!(has_issue(&issues, REPLACEMENT, "must be non-empty"));
    }

    #[test]
    fn decimal_bytes_are_java_big_integer_bytes() {
        assert_eq!(decimal_bytes(0), "AA==");
        assert_eq!(decimal_bytes(42), "Kg==");
        assert_eq!(decimal_bytes(128), "AIA="); // 0x00 0x80
        assert_eq!(decimal_bytes(-1), "/w==");
        assert_eq!(decimal_bytes(-129), "/38="); // 0xff 0x7f
        assert!(decimal_replacement("1.5", 2).is_err());
        assert_eq!(decimal_replacement("1.50", 2).unwrap(), decimal_bytes(150));
        assert_eq!(
            decimal_replacement("-15e-1", 1).unwrap(),
            decimal_bytes(-15)
        );
    }
}
