//! JSON text byte-for-byte as Kafka Connect's JsonConverter writes it (Jackson, compact): shared by
//! the offset codec and the Kafka converters, because partition lookups and interop compare bytes.
//!
//! Where Jackson and serde_json differ in bytes: control characters are escaped with upper-case hex
//! (`\u001F`), and floating-point numbers print like Java's `Double.toString` / `Float.toString`
//! (`1.0`, `1.0E10`, `1.0E-5`) instead of serde_json's `1.0`, `10000000000.0`, `1e-5`. Non-ASCII text
//! and `/` are written as they are by both.

use serde_json::Value;

/// Appends `s` as a JSON string, escaped the way Jackson escapes it. Runs of bytes that need no
/// escape are copied at once: the file sink writes a path into every line through this.
pub fn write_string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut run = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x09 => b"\\t",
            0x0A => b"\\n",
            0x0C => b"\\f",
            0x0D => b"\\r",
            0x00..=0x1F => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[run..i]);
        if escape.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xF)]);
        } else {
            out.extend_from_slice(escape);
        }
        run = i + 1;
    }
    out.extend_from_slice(&bytes[run..]);
    out.push(b'"');
}

/// Appends a schemaless JSON value: objects in their iteration order, numbers as Jackson prints a
/// Java `Long` (integers) or `Double` (anything else).
pub fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                out.extend_from_slice(i.to_string().as_bytes());
            } else if let Some(u) = n.as_u64() {
                out.extend_from_slice(u.to_string().as_bytes());
            } else {
                // serde_json numbers are always one of i64, u64 or a finite f64.
                write_f64(out, n.as_f64().unwrap_or(0.0));
            }
        }
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(fields) => {
            out.push(b'{');
            for (i, (key, item)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(out, key);
                out.push(b':');
                write_value(out, item);
            }
            out.push(b'}');
        }
    }
}

/// Appends a 64-bit float as Java's `Double.toString` prints it.
pub fn write_f64(out: &mut Vec<u8>, v: f64) {
    out.extend_from_slice(java_float_text(&format!("{v:e}")).as_bytes());
}

/// Appends a 32-bit float as Java's `Float.toString` prints it.
pub fn write_f32(out: &mut Vec<u8>, v: f32) {
    out.extend_from_slice(java_float_text(&format!("{v:e}")).as_bytes());
}

/// Turns Rust's shortest scientific form (`1.5e-7`, `-1e20`, `1.2345e3`) into Java's form: plain
/// decimal for 1e-3 ≤ |v| < 1e7 (`0.001`, `1234.5`, `1234567.0`), else `d.dddE±n` (`1.5E-7`, `1.0E20`).
fn java_float_text(rust_sci: &str) -> String {
    let (mantissa, exponent) = rust_sci.split_once('e').unwrap_or((rust_sci, "0"));
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
            if digits.len() > int_len {
                format!("{sign}{}.{}", &digits[..int_len], &digits[int_len..])
            } else {
                format!("{sign}{digits:0<int_len$}.0")
            }
        } else {
            let zeros = usize::try_from(-exponent - 1).unwrap_or(0);
            format!("{sign}0.{}{digits}", "0".repeat(zeros))
        }
    } else {
        let fraction = if digits.len() > 1 { &digits[1..] } else { "0" };
        format!("{sign}{}.{fraction}E{exponent}", &digits[..1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn double(v: f64) -> String {
        let mut out = Vec::new();
        write_f64(&mut out, v);
        String::from_utf8_lossy(&out).into_owned()
    }

    fn float(v: f32) -> String {
        let mut out = Vec::new();
        write_f32(&mut out, v);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn doubles_print_like_java_double_to_string() {
        assert_eq!(double(1.0), "1.0");
        assert_eq!(double(0.0), "0.0");
        assert_eq!(double(-0.0), "-0.0");
        assert_eq!(double(-2.25), "-2.25");
        assert_eq!(double(12.34), "12.34");
        assert_eq!(double(100.0), "100.0");
        assert_eq!(double(1234567.0), "1234567.0");
        assert_eq!(double(1.0e7), "1.0E7");
        assert_eq!(double(12345678.9), "1.23456789E7");
        assert_eq!(double(0.001), "0.001");
        assert_eq!(double(0.0001), "1.0E-4");
        assert_eq!(double(1.5e-7), "1.5E-7");
        assert_eq!(double(1e20), "1.0E20");
        assert_eq!(double(0.1), "0.1");
        assert_eq!(double(f64::MAX), "1.7976931348623157E308");
    }

    #[test]
    fn floats_print_like_java_float_to_string() {
        assert_eq!(float(12.34), "12.34");
        assert_eq!(float(0.1), "0.1");
        assert_eq!(float(1.0), "1.0");
        assert_eq!(float(3.4028235e38), "3.4028235E38");
    }

    #[test]
    fn strings_escape_like_jackson() {
        let mut out = Vec::new();
        write_string(&mut out, "a\"b\\c\n\t\u{1}\u{1f}é/\u{7f}");
        assert_eq!(
            out,
            "\"a\\\"b\\\\c\\n\\t\\u0001\\u001Fé/\u{7f}\"".as_bytes()
        );
    }

    #[test]
    fn schemaless_values_print_compact() {
        let mut out = Vec::new();
        write_value(
            &mut out,
            &serde_json::json!({"a": [1, -2, 1.5, 1e10, null, true, "x"], "b": {}, "c": u64::MAX}),
        );
        assert_eq!(
            String::from_utf8_lossy(&out),
            r#"{"a":[1,-2,1.5,1.0E10,null,true,"x"],"b":{},"c":18446744073709551615}"#
        );
    }
}
