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
        Value::Float32(v) => out.extend_from_slice(java_float_text(format!("{v:e}")).as_bytes()),
        Value::Float64(v) => out.extend_from_slice(java_float_text(format!("{v:e}")).as_bytes()),
        Value::String(s) => write_string(out, s),
        Value::Bytes(b) => {
            out.push(b'"');
            out.extend_from_slice(base64::engine::general_purpose::STANDARD.encode(b).as_bytes());
            out.push(b'"');
        }
    }
}

/// Appends a JSON string the way Jackson escapes it.
pub(crate) fn write_string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push(b'"');
    for &b in s.as_bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x09 => out.extend_from_slice(b"\\t"),
            0x0A => out.extend_from_slice(b"\\n"),
            0x0C => out.extend_from_slice(b"\\f"),
            0x0D => out.extend_from_slice(b"\\r"),
            0x00..=0x1F => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xF)]);
            }
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// Turns Rust's shortest scientific form (`1.5e-7`, `-1e20`) into Java's `Double.toString` form:
/// plain decimal for 1e-3 ≤ |v| < 1e7 (`0.001`, `1234567.0`), else `d.dddE±n` (`1.5E-7`, `1.0E20`).
fn java_float_text(rust_sci: String) -> String {
    let (mantissa, exponent) = rust_sci.split_once('e').unwrap_or((&rust_sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if digits.bytes().all(|d| d == b'0') {
        return format!("{sign}0.0");
    }
    if (-3..7).contains(&exponent) {
        if exponent >= 0 {
            let int_len = usize::try_from(exponent).unwrap_or(0) + 1;
            let (int_part, frac) = if digits.len() > int_len {
                (digits[..int_len].to_owned(), digits[int_len..].to_owned())
            } else {
                (format!("{digits:0<int_len$}"), "0".to_owned())
            };
            format!("{sign}{int_part}.{frac}")
        } else {
            let zeros = usize::try_from(-exponent - 1).unwrap_or(0);
            format!("{sign}0.{}{digits}", "0".repeat(zeros))
        }
    } else {
        let frac = if digits.len() > 1 { &digits[1..] } else { "0" };
        format!("{sign}{}.{frac}E{exponent}", &digits[..1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f64_text(v: f64) -> String {
        java_float_text(format!("{v:e}"))
    }

    #[test]
    fn doubles_print_like_java() {
        assert_eq!(f64_text(1.0), "1.0");
        assert_eq!(f64_text(0.0), "0.0");
        assert_eq!(f64_text(-0.0), "-0.0");
        assert_eq!(f64_text(1.5), "1.5");
        assert_eq!(f64_text(-2.25), "-2.25");
        assert_eq!(f64_text(100.0), "100.0");
        assert_eq!(f64_text(1234567.0), "1234567.0");
        assert_eq!(f64_text(1.0e7), "1.0E7");
        assert_eq!(f64_text(12345678.9), "1.23456789E7");
        assert_eq!(f64_text(0.001), "0.001");
        assert_eq!(f64_text(0.0001), "1.0E-4");
        assert_eq!(f64_text(1.5e-7), "1.5E-7");
        assert_eq!(f64_text(1e20), "1.0E20");
        assert_eq!(f64_text(0.1), "0.1");
        assert_eq!(f64_text(123.456), "123.456");
        assert_eq!(f64_text(f64::MAX), "1.7976931348623157E308");
    }

    #[test]
    fn floats_print_like_java_float_to_string() {
        assert_eq!(java_float_text(format!("{:e}", 0.1f32)), "0.1");
        assert_eq!(java_float_text(format!("{:e}", 3.4028235e38f32)), "3.4028235E38");
    }

    #[test]
    fn strings_escape_like_jackson() {
        let mut out = Vec::new();
        write_string(&mut out, "a\"b\\c\n\t\u{1}\u{1f}é/\u{7f}");
        assert_eq!(out, "\"a\\\"b\\\\c\\n\\t\\u0001\\u001Fé/\u{7f}\"".as_bytes());
    }
}
