//! JSON text exactly as Kafka Connect's JsonConverter (Jackson, schemas disabled) writes it.
//!
//! Jackson differs from serde_json in ways that change bytes: control characters are escaped with
//! upper-case hex (`\u001F`), and doubles print like Java's `Double.toString` (`1.0`, `1.0E10`,
//! `1.0E-5`). Byte-identical output matters because Kafka Connect looks partitions up by key bytes.

use base64::Engine as _;
use ferry_api::{ConnectMap, Value};

/// Appends `map` as a compact JSON object; `sorted` orders fields by key (the canonical form).
pub(crate) fn write_map(out: &mut Vec<u8>, map: &ConnectMap, sorted: bool) {
    out.push(b'{');
    if sorted {
        let mut fields: Vec<(&str, &Value)> = map.iter().collect();
        fields.sort_unstable_by(|a, b| a.0.cmp(b.0));
        write_fields(out, fields.into_iter());
    } else {
        write_fields(out, map.iter());
    }
    out.push(b'}');
}

fn write_fields<'a>(out: &mut Vec<u8>, fields: impl Iterator<Item = (&'a str, &'a Value)>) {
    for (i, (key, value)) in fields.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(out, key);
        out.push(b':');
        write_value(out, value);
    }
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Int8(v) => out.extend_from_slice(v.to_string().as_bytes()),
        Value::Int16(v) => out.extend_from_slice(v.to_string().as_bytes()),
        Value::Int32(v) => out.extend_from_slice(v.to_string().as_bytes()),
        Value::Int64(v) => out.extend_from_slice(v.to_string().as_bytes()),
        Value::Float32(v) => crate::jackson::write_f32(out, *v),
        Value::Float64(v) => crate::jackson::write_f64(out, *v),
        Value::String(s) => write_string(out, s),
        Value::Bytes(b) => {
            out.push(b'"');
            out.extend_from_slice(
                base64::engine::general_purpose::STANDARD
                    .encode(b)
                    .as_bytes(),
            );
            out.push(b'"');
        }
    }
}

/// Appends a JSON string the way Jackson escapes it.
pub(crate) use crate::jackson::write_string;
