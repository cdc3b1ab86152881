//! Kafka Connect's JsonConverter: schemas in Kafka Connect's JSON schema form, and payloads written
//! as the schema says.
//!
//! A schema becomes
//! `{"type":…,<parts>,"optional":…[,"name":…][,"version":…][,"doc":…][,"parameters":{…}][,"default":…]}`
//! where the
//! parts are `"items"` (array), `"keys"`,`"values"` (map) or `"fields"` (struct: each field's own schema
//! object followed by `"field":<name>`), in exactly that order — the order of Kafka Connect's
//! `JsonConverter.asJsonSchema`. Type names: `int8` … `int64`, `float` (float32), `double` (float64),
//! `boolean`, `string`, `bytes`, `array`, `map`, `struct`.
//!
//! A payload with a schema is checked against it and written as Kafka Connect writes the matching Java
//! value: integers as digits (in the type's range), `float`/`double` like Java's `Float.toString` /
//! `Double.toString` (so `1` for a double field is written `1.0`; the strings `"NaN"`, `"Infinity"` and
//! `"-Infinity"` are written quoted, as Jackson writes non-finite numbers), bytes (a base64 string in the
//! record) as standard base64, struct fields in schema order (unknown fields refused), maps with string
//! keys as objects and other maps as arrays of `[key, value]` pairs. A null where the schema has a
//! default is written as the default (Kafka Connect's `replace.null.with.default=true`, its default);
//! otherwise a null is allowed only where the schema is optional. A default is written as a payload
//! of its schema would be.

use std::sync::Arc;

use base64::Engine as _;
use ferry_api::{Field, Schema, SchemaKind};
use serde_json::Value;

use ferry_offsets::jackson::{write_f32, write_f64, write_string, write_value};

/// Appends the schema's JSON form.
///
/// # Errors
/// A default value that does not fit its schema, and where.
pub(crate) fn write_schema(out: &mut Vec<u8>, schema: &Schema) -> Result<(), PayloadError> {
    write_schema_cached(out, schema, || Arc::new(schema.clone()))
}

/// [`write_schema`] for a schema records share: found in the cache by pointer while the cache holds
/// it, without comparing it field by field.
pub(crate) fn write_shared_schema(
    out: &mut Vec<u8>,
    schema: &Arc<Schema>,
) -> Result<(), PayloadError> {
    write_schema_cached(out, schema, || Arc::clone(schema))
}

fn write_schema_cached(
    out: &mut Vec<u8>,
    schema: &Schema,
    keep: impl FnOnce() -> Arc<Schema>,
) -> Result<(), PayloadError> {
    let hit = RECENT_SCHEMAS.with(|recent| {
        recent
            .borrow()
            .iter()
            // The cache holds its schemas alive, so an equal address is the same schema.
            .find(|(known, _)| std::ptr::eq(Arc::as_ptr(known), schema) || **known == *schema)
            .map(|(_, json)| out.extend_from_slice(json))
            .is_some()
    });
    if hit {
        return Ok(());
    }
    let start = out.len();
    write_schema_uncached(out, schema)?;
    let json = &out[start..];
    if json.len() <= CACHED_SCHEMA_MAX_BYTES {
        RECENT_SCHEMAS.with(|recent| {
            let mut recent = recent.borrow_mut();
            if recent.len() >= CACHED_SCHEMAS {
                recent.pop_back();
            }
            recent.push_front((keep(), json.to_vec()));
        });
    }
    Ok(())
}

/// How many schemas' JSON forms each thread keeps, and the largest kept.
const CACHED_SCHEMAS: usize = 8;
const CACHED_SCHEMA_MAX_BYTES: usize = 64 * 1024;

thread_local! {
    /// The JSON form of the schemas this thread wrote last. A source's records share a few schemas
    /// (a CDC table's envelope is kilobytes of JSON, written for every change): comparing a schema
    /// with a known one is much cheaper than writing it again, as Kafka Connect's JsonConverter
    /// caches its converted schemas.
    static RECENT_SCHEMAS: std::cell::RefCell<std::collections::VecDeque<(Arc<Schema>, Vec<u8>)>> =
        const { std::cell::RefCell::new(std::collections::VecDeque::new()) };
}

fn write_schema_uncached(out: &mut Vec<u8>, schema: &Schema) -> Result<(), PayloadError> {
    let mut path = Vec::new();
    write_schema_object(out, schema, None, &mut path).map_err(|problem| PayloadError {
        path: render(&path),
        problem,
    })
}

/// One step of the path to a part of a schema or value. Kept as borrowed steps and rendered only
/// when a write fails: a record's schema and value are walked for every record, and formatting each
/// field's step up front cost more than writing the field.
#[derive(Debug)]
enum Step<'a> {
    /// A struct field: `field "a"` first, `.a` after.
    Field(&'a str),
    /// An array element: `[2]`.
    Index(usize),
    /// A part of a schema: `items`, `keys`, `values`.
    Part(&'static str),
    /// A map entry, already rendered (maps are rare).
    Entry(String),
}

fn render(path: &[Step<'_>]) -> String {
    let mut text = String::new();
    for (i, step) in path.iter().enumerate() {
        match step {
            Step::Field(name) if i == 0 => text.push_str(&format!("field {name:?}")),
            Step::Field(name) => {
                text.push('.');
                text.push_str(name);
            }
            Step::Index(n) => text.push_str(&format!("[{n}]")),
            Step::Part(part) => text.push_str(part),
            Step::Entry(entry) => text.push_str(entry),
        }
    }
    text
}

/// Writes one schema object; on error `path` is left pointing at the schema whose default fails.
fn write_schema_object<'a>(
    out: &mut Vec<u8>,
    schema: &'a Schema,
    field: Option<&str>,
    path: &mut Vec<Step<'a>>,
) -> Result<(), PayloadProblem> {
    out.extend_from_slice(b"{\"type\":");
    write_string(out, schema.type_name());
    match &schema.kind {
        SchemaKind::Array { items } => {
            out.extend_from_slice(b",\"items\":");
            path.push(Step::Part("items"));
            write_schema_object(out, items, None, path)?;
            path.pop();
        }
        SchemaKind::Map { keys, values } => {
            out.extend_from_slice(b",\"keys\":");
            path.push(Step::Part("keys"));
            write_schema_object(out, keys, None, path)?;
            path.pop();
            out.extend_from_slice(b",\"values\":");
            path.push(Step::Part("values"));
            write_schema_object(out, values, None, path)?;
            path.pop();
        }
        SchemaKind::Struct { fields } => {
            out.extend_from_slice(b",\"fields\":[");
            for (i, f) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                path.push(Step::Field(&f.name));
                write_schema_object(out, &f.schema, Some(&f.name), path)?;
                path.pop();
            }
            out.push(b']');
        }
        _ => {}
    }
    out.extend_from_slice(if schema.optional {
        b",\"optional\":true"
    } else {
        b",\"optional\":false"
    });
    if let Some(name) = &schema.name {
        out.extend_from_slice(b",\"name\":");
        write_string(out, name);
    }
    if let Some(version) = schema.version {
        out.extend_from_slice(b",\"version\":");
        out.extend_from_slice(itoa::Buffer::new().format(version).as_bytes());
    }
    if let Some(doc) = &schema.doc {
        out.extend_from_slice(b",\"doc\":");
        write_string(out, doc);
    }
    if !schema.parameters.is_empty() {
        out.extend_from_slice(b",\"parameters\":{");
        for (i, (key, value)) in schema.parameters.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_string(out, key);
            out.push(b':');
            write_string(out, value);
        }
        out.push(b'}');
    }
    // After the parameters and before the field name, as `asJsonSchema` puts it.
    if let Some(default) = &schema.default {
        out.extend_from_slice(b",\"default\":");
        write_default(out, schema, default)?;
    }
    if let Some(field) = field {
        out.extend_from_slice(b",\"field\":");
        write_string(out, field);
    }
    out.push(b'}');
    Ok(())
}

/// Writes a schema's default value as a payload of that schema.
fn write_default(
    out: &mut Vec<u8>,
    schema: &Schema,
    default: &ferry_api::Value,
) -> Result<(), PayloadProblem> {
    use ferry_api::Value as V;
    let json = match default {
        V::Null => Value::Null,
        V::Bool(b) => Value::Bool(*b),
        V::Int8(_) | V::Int16(_) | V::Int32(_) | V::Int64(_) => {
            Value::from(default.as_i64().unwrap_or_default())
        }
        V::Float32(f) => Value::from(f64::from(*f)),
        V::Float64(f) => Value::from(*f),
        V::String(s) => Value::String(s.clone()),
        V::Bytes(b) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
    };
    // A null default is checked against the schema itself (a non-null value never reaches the
    // schema's default, so the write below cannot come back here).
    if json.is_null() {
        if schema.optional {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        return Err(PayloadProblem::Default(Box::new(
            PayloadProblem::NullForRequired {
                type_name: schema.type_name(),
            },
        )));
    }
    write_with_schema(out, schema, &json, &mut Vec::new())
        .map_err(|p| PayloadProblem::Default(Box::new(p)))
}

/// A value that does not fit its schema, and where (`field "seq"`, `[2]`; empty: the value itself).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{problem}", at(path))]
pub struct PayloadError {
    /// Where in the value: `field "seq"`, `field "a".b`, `[2]`, `[key 1]`; empty for the value itself.
    pub path: String,
    /// What does not fit.
    #[source]
    pub problem: PayloadProblem,
}

/// `path: `, or nothing for the value itself.
fn at(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("{path}: ")
    }
}

/// What in a value does not fit its schema.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PayloadProblem {
    /// Null where the schema is required and has no default.
    #[error("null for a required {type_name} (the schema is not optional and has no default)")]
    NullForRequired {
        /// The schema's type.
        type_name: &'static str,
    },
    /// An integer beyond its schema's type.
    #[error("{value} is outside the range of an {type_name} ({min} to {max})")]
    IntegerOutOfRange {
        /// The value.
        value: i64,
        /// The schema's type.
        type_name: &'static str,
        /// The type's smallest value.
        min: i64,
        /// The type's largest value.
        max: i64,
    },
    /// A finite number beyond a float32.
    #[error("{0} is outside the range of a float32")]
    Float32OutOfRange(f64),
    /// A value of another JSON type than the schema's.
    #[error("expected {expected}, got {kind} {shown}")]
    Mismatch {
        /// What the schema takes (`an integer (int32)`).
        expected: String,
        /// The JSON type given (`a string`).
        kind: &'static str,
        /// The value given, cut at 60 characters.
        shown: String,
    },
    /// A bytes value that is not base64.
    #[error("bytes must be a base64 string in the record; {text:?} is not ({source})")]
    NotBase64 {
        /// The string given.
        text: String,
        /// Why it does not decode.
        #[source]
        source: base64::DecodeError,
    },
    /// An entry of a map given as an array that is not a pair.
    #[error("map entry [{0}] must be a [key, value] pair")]
    MapEntry(usize),
    /// A schema's default value that does not fit the schema.
    #[error("the schema's default value does not fit it: {0}")]
    Default(Box<PayloadProblem>),
    /// A struct value with a field its schema does not have.
    #[error("field {field:?} is not in the struct schema (its fields: {})", known.join(", "))]
    UnknownField {
        /// The unknown field.
        field: String,
        /// The schema's fields.
        known: Vec<String>,
    },
}

/// Appends `value` (`None`: null) as the payload for `schema` (`None`: schemaless).
///
/// # Errors
/// The value does not fit the schema: says where (`field "seq"`, `[2]`) and what was expected.
pub(crate) fn write_payload(
    out: &mut Vec<u8>,
    schema: Option<&Schema>,
    value: Option<&Value>,
) -> Result<(), PayloadError> {
    let mut path = Vec::new();
    match schema {
        None => {
            write_value(out, value.unwrap_or(&Value::Null));
            Ok(())
        }
        Some(schema) => write_with_schema(out, schema, value.unwrap_or(&Value::Null), &mut path)
            .map_err(|problem| PayloadError {
                path: render(&path),
                problem,
            }),
    }
}

/// Writes `value` as `schema` says; on error `path` is left pointing at the failing part.
fn write_with_schema<'a>(
    out: &mut Vec<u8>,
    schema: &'a Schema,
    value: &'a Value,
    path: &mut Vec<Step<'a>>,
) -> Result<(), PayloadProblem> {
    if value.is_null() {
        if let Some(default) = &schema.default {
            return write_default(out, schema, default);
        }
        if schema.optional {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        return Err(PayloadProblem::NullForRequired {
            type_name: schema.type_name(),
        });
    }
    match &schema.kind {
        SchemaKind::Int8 => write_int(out, value, i64::from(i8::MIN), i64::from(i8::MAX), "int8"),
        SchemaKind::Int16 => write_int(
            out,
            value,
            i64::from(i16::MIN),
            i64::from(i16::MAX),
            "int16",
        ),
        SchemaKind::Int32 => write_int(
            out,
            value,
            i64::from(i32::MIN),
            i64::from(i32::MAX),
            "int32",
        ),
        SchemaKind::Int64 => write_int(out, value, i64::MIN, i64::MAX, "int64"),
        SchemaKind::Float32 | SchemaKind::Float64 if non_finite(value).is_some() => {
            // Jackson's QUOTE_NON_NUMERIC_NUMBERS (on by default): "NaN", "Infinity", "-Infinity".
            write_string(out, non_finite(value).unwrap_or_default());
            Ok(())
        }
        SchemaKind::Float32 => write_float32(out, value),
        SchemaKind::Float64 => {
            write_f64(out, number(value, "float64")?);
            Ok(())
        }
        SchemaKind::Boolean => match value {
            Value::Bool(b) => {
                out.extend_from_slice(if *b { b"true" } else { b"false" });
                Ok(())
            }
            other => Err(mismatch("a boolean", other)),
        },
        SchemaKind::String => match value {
            Value::String(s) => {
                write_string(out, s);
                Ok(())
            }
            other => Err(mismatch("a string", other)),
        },
        SchemaKind::Bytes => write_bytes(out, value),
        SchemaKind::Array { items } => write_array(out, items, value, path),
        SchemaKind::Map { keys, values } => write_map(out, keys, values, value, path),
        SchemaKind::Struct { fields } => write_struct(out, fields, value, path),
    }
}

/// A float32: the number rounded to the nearest f32, refused beyond its range.
fn write_float32(out: &mut Vec<u8>, value: &Value) -> Result<(), PayloadProblem> {
    let v = number(value, "float32")?;
    // `as` rounds to the nearest f32; a finite f64 beyond f32's range becomes infinite.
    #[allow(clippy::cast_possible_truncation)]
    let f = v as f32;
    if !f.is_finite() {
        return Err(PayloadProblem::Float32OutOfRange(v));
    }
    write_f32(out, f);
    Ok(())
}

/// Bytes: a base64 string, checked and written in its canonical (padded) form.
fn write_bytes(out: &mut Vec<u8>, value: &Value) -> Result<(), PayloadProblem> {
    match value {
        Value::String(s) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|source| PayloadProblem::NotBase64 {
                    text: s.clone(),
                    source,
                })?;
            out.push(b'"');
            out.extend_from_slice(
                base64::engine::general_purpose::STANDARD
                    .encode(bytes)
                    .as_bytes(),
            );
            out.push(b'"');
            Ok(())
        }
        other => Err(mismatch("a base64 string (bytes)", other)),
    }
}

/// An array: each element as `items` says, its index on `path`.
fn write_array<'a>(
    out: &mut Vec<u8>,
    items: &'a Schema,
    value: &'a Value,
    path: &mut Vec<Step<'a>>,
) -> Result<(), PayloadProblem> {
    match value {
        Value::Array(elements) => {
            out.push(b'[');
            for (i, element) in elements.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                path.push(Step::Index(i));
                write_with_schema(out, items, element, path)?;
                path.pop();
            }
            out.push(b']');
            Ok(())
        }
        other => Err(mismatch("an array", other)),
    }
}

/// A struct: an object with only the schema's fields, written in the schema's order (a missing
/// field as null), each field's name on `path`.
fn write_struct<'a>(
    out: &mut Vec<u8>,
    fields: &'a [Field],
    value: &'a Value,
    path: &mut Vec<Step<'a>>,
) -> Result<(), PayloadProblem> {
    match value {
        Value::Object(object) => {
            if let Some(unknown) = object
                .keys()
                .find(|k| !fields.iter().any(|f| f.name == **k))
            {
                return Err(PayloadProblem::UnknownField {
                    field: unknown.clone(),
                    known: fields.iter().map(|f| f.name.clone()).collect(),
                });
            }
            out.push(b'{');
            for (i, field) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(out, &field.name);
                out.push(b':');
                path.push(Step::Field(&field.name));
                write_with_schema(
                    out,
                    &field.schema,
                    object.get(&field.name).unwrap_or(&Value::Null),
                    path,
                )?;
                path.pop();
            }
            out.push(b'}');
            Ok(())
        }
        other => Err(mismatch("an object (struct)", other)),
    }
}

/// A map: an object when the keys are strings, else an array of `[key, value]` pairs. The record may
/// hold a non-string-keyed map as an object (keys parsed as JSON: `{"1":"a"}` for int keys) or as an
/// array of pairs.
fn write_map<'a>(
    out: &mut Vec<u8>,
    keys: &'a Schema,
    values: &'a Schema,
    value: &'a Value,
    path: &mut Vec<Step<'a>>,
) -> Result<(), PayloadProblem> {
    let string_keys = matches!(keys.kind, SchemaKind::String);
    let entries: Vec<(Value, &Value)> = match value {
        Value::Object(object) => object
            .iter()
            .map(|(k, v)| {
                let key = if string_keys {
                    Value::String(k.clone())
                } else {
                    serde_json::from_str(k).unwrap_or_else(|_| Value::String(k.clone()))
                };
                (key, v)
            })
            .collect(),
        Value::Array(pairs) if !string_keys => {
            let mut entries = Vec::with_capacity(pairs.len());
            for (i, pair) in pairs.iter().enumerate() {
                match pair.as_array().map(Vec::as_slice) {
                    Some([k, v]) => entries.push((k.clone(), v)),
                    _ => return Err(PayloadProblem::MapEntry(i)),
                }
            }
            entries
        }
        other => return Err(mismatch("an object (map)", other)),
    };
    out.push(if string_keys { b'{' } else { b'[' });
    for (i, (key, item)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if string_keys {
            path.push(Step::Entry(format!("[{key}]")));
            write_with_schema(out, keys, key, &mut Vec::new())?;
            out.push(b':');
        } else {
            out.push(b'[');
            path.push(Step::Entry(format!("[key {key}]")));
            write_with_schema(out, keys, key, &mut Vec::new())?;
            out.push(b',');
        }
        write_with_schema(out, values, item, path)?;
        if !string_keys {
            out.push(b']');
        }
        path.pop();
    }
    out.push(if string_keys { b'}' } else { b']' });
    Ok(())
}

fn write_int(
    out: &mut Vec<u8>,
    value: &Value,
    min: i64,
    max: i64,
    type_name: &'static str,
) -> Result<(), PayloadProblem> {
    match value.as_i64() {
        Some(v) if (min..=max).contains(&v) => {
            out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
            Ok(())
        }
        Some(v) => Err(PayloadProblem::IntegerOutOfRange {
            value: v,
            type_name,
            min,
            max,
        }),
        None => Err(mismatch(&format!("an integer ({type_name})"), value)),
    }
}

/// The text of a non-finite float as a record carries it (`"NaN"`, `"Infinity"`, `"-Infinity"`).
fn non_finite(value: &Value) -> Option<&'static str> {
    match value.as_str()? {
        "NaN" => Some("NaN"),
        "Infinity" => Some("Infinity"),
        "-Infinity" => Some("-Infinity"),
        _ => None,
    }
}

fn number(value: &Value, type_name: &str) -> Result<f64, PayloadProblem> {
    value
        .as_f64()
        .ok_or_else(|| mismatch(&format!("a number ({type_name})"), value))
}

fn mismatch(expected: &str, got: &Value) -> PayloadProblem {
    let kind = match got {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a floating-point number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    let mut shown = got.to_string();
    if shown.len() > 60 {
        let mut end = 57;
        while !shown.is_char_boundary(end) {
            end -= 1;
        }
        shown.truncate(end);
        shown.push_str("...");
    }
    PayloadProblem::Mismatch {
        expected: expected.to_owned(),
        kind,
        shown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested() -> Schema {
        Schema::struct_(
            "outer",
            [Field::new(
                "a",
                Schema::struct_("inner", [Field::new("b", Schema::array(Schema::int32()))]),
            )],
        )
    }

    /// A failure names where it is, as before the steps were kept unrendered.
    #[test]
    fn a_value_that_does_not_fit_names_its_path() {
        let value = serde_json::json!({"a": {"b": [1, "two"]}});
        let err = write_payload(&mut Vec::new(), Some(&nested()), Some(&value))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("field \"a\".b[1]: expected an integer (int32), got a string \"two\"")
        );
        let fits = serde_json::json!({"a": {"b": [1, 2]}});
        let mut out = Vec::new();
        assert!(write_payload(&mut out, Some(&nested()), Some(&fits)).is_ok());
        assert_eq!(out, br#"{"a":{"b":[1,2]}}"#);
    }

    #[test]
    fn a_default_that_does_not_fit_its_schema_names_the_schema() {
        let schema = Schema::struct_(
            "s",
            [Field::new("n", Schema::int8().with_default(1000_i64))],
        );
        let err = write_schema(&mut Vec::new(), &schema)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.starts_with("field \"n\": the schema's default"),
            "{err}"
        );
        let fine = Schema::struct_("s", [Field::new("n", Schema::int8().with_default(7_i64))]);
        let mut out = Vec::new();
        assert!(write_schema(&mut out, &fine).is_ok());
        // Written again from the cache: the same bytes; a schema that differs only in its
        // default is not mistaken for it.
        let mut again = Vec::new();
        assert!(write_schema(&mut again, &fine).is_ok());
        assert_eq!(again, out);
        let other = Schema::struct_("s", [Field::new("n", Schema::int8().with_default(8_i64))]);
        let mut third = Vec::new();
        assert!(write_schema(&mut third, &other).is_ok());
        assert!(String::from_utf8_lossy(&third).contains(r#""default":8"#));
        assert!(
            String::from_utf8_lossy(&out).contains(r#""default":7,"field":"n""#),
            "{}",
            String::from_utf8_lossy(&out)
        );
    }

    /// Past the cache's limits (a 9th schema evicts the oldest; a schema over 64 KiB is not kept)
    /// the bytes are still those written without a cache, and a shared schema found by pointer
    /// gives the same bytes as an equal one that is not shared.
    #[test]
    fn schemas_past_the_cache_limits_are_written_the_same() {
        let uncached = |schema: &Schema| {
            let mut out = Vec::new();
            assert!(write_schema_uncached(&mut out, schema).is_ok());
            out
        };
        let schemas: Vec<Arc<Schema>> = (0..CACHED_SCHEMAS + 1)
            .map(|i| {
                Arc::new(Schema::struct_(
                    format!("s{i}"),
                    [Field::new("n", Schema::int32())],
                ))
            })
            .collect();
        for _ in 0..2 {
            for schema in &schemas {
                let mut shared = Vec::new();
                assert!(write_shared_schema(&mut shared, schema).is_ok());
                let mut plain = Vec::new();
                assert!(write_schema(&mut plain, &Schema::clone(schema)).is_ok());
                assert_eq!(shared, uncached(schema));
                assert_eq!(plain, shared);
            }
        }
        let huge = Arc::new(Schema::struct_(
            "huge",
            (0..4000).map(|i| Field::new(format!("column_{i:05}"), Schema::string().optional())),
        ));
        let expected = uncached(&huge);
        assert!(expected.len() > CACHED_SCHEMA_MAX_BYTES);
        for _ in 0..2 {
            let mut out = Vec::new();
            assert!(write_shared_schema(&mut out, &huge).is_ok());
            assert_eq!(out, expected);
        }
        let kept = RECENT_SCHEMAS.with(|recent| recent.borrow().len());
        assert_eq!(kept, CACHED_SCHEMAS);
        let huge_kept = RECENT_SCHEMAS.with(|recent| {
            recent
                .borrow()
                .iter()
                .any(|(known, _)| Arc::ptr_eq(known, &huge))
        });
        assert!(!huge_kept, "a schema over the size limit is not kept");
    }
}
