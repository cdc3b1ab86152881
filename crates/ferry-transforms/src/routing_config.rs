//! Kafka Connect's `ConfigDef` parsing rules and validator messages, for the routers, the header
//! transforms and the predicates: strings are trimmed, a `LIST` splits on commas (keeping empty
//! entries, as Kafka does), and the issues carry Kafka's texts so users recognise them.

use ferry_api::config::Issues;
use ferry_api::{Config, Schema, SchemaKind};
use regex::Regex;
use serde_json::Value;

/// Kafka's text for a key without default that is absent.
fn missing(key: &str) -> String {
    format!("Missing required configuration \"{key}\" which has no default value.")
}

/// A `STRING` key without default: its trimmed value (Kafka's `ConfigDef` trims strings), or an
/// issue when absent. An empty value is allowed (Kafka's `NonNullValidator` allows it).
pub(crate) fn required_string(config: &Config, key: &str, issues: &mut Issues) -> Option<String> {
    match config.get(key) {
        Some(v) => Some(v.trim().to_owned()),
        None => {
            issues.push(key, missing(key));
            None
        }
    }
}

/// A `STRING` key without default checked by Kafka's `NonEmptyString` validator.
pub(crate) fn required_non_empty_string(
    config: &Config,
    key: &str,
    issues: &mut Issues,
) -> Option<String> {
    let value = required_string(config, key, issues)?;
    if value.is_empty() {
        issues.push(key, "String must be non-empty");
        return None;
    }
    Some(value)
}

/// A `STRING` key with a default.
pub(crate) fn string_or(config: &Config, key: &str, default: &str) -> String {
    config
        .get(key)
        .map_or_else(|| default.to_owned(), |v| v.trim().to_owned())
}

/// A `LIST` key without default checked by Kafka's `NonEmptyListValidator` ("Empty list").
pub(crate) fn required_non_empty_list(
    config: &Config,
    key: &str,
    issues: &mut Issues,
) -> Option<Vec<String>> {
    let raw = required_string(config, key, issues)?;
    // Kafka splits on `\s*,\s*` and keeps empty entries ("a,,b" has three), so a list's length
    // is what the user wrote, which HeaderFrom's fields/headers pairing relies on.
    let list: Vec<String> = if raw.is_empty() {
        Vec::new()
    } else {
        raw.split(',').map(|s| s.trim().to_owned()).collect()
    };
    if list.is_empty() {
        issues.push(key, "Empty list");
        return None;
    }
    Some(list)
}

/// A `BOOLEAN` key with a default (`true`/`false`, any case, as Kafka accepts); `None` when invalid
/// (the issue is recorded).
pub(crate) fn boolean_or(
    config: &Config,
    key: &str,
    default: bool,
    issues: &mut Issues,
) -> Option<bool> {
    let had_issue = issues.has(key);
    let value = crate::types_common::boolean(config, key, default, issues);
    (had_issue || !issues.has(key)).then_some(value)
}

/// Compiles `value` as Kafka's `RegexValidator` checks it ("Invalid regex: …"). Rust's regex
/// syntax is Java's without look-around and backreferences, which are refused here.
pub(crate) fn regex(key: &str, value: &str, issues: &mut Issues) -> Option<Regex> {
    match Regex::new(value) {
        Ok(re) => Some(re),
        Err(e) => {
            issues.push(key, format!("Invalid regex: {e}"));
            None
        }
    }
}

/// `pattern` compiled twice: as written, and anchored at both ends for Java's
/// `Matcher.matches()` (a match of the whole text, not only of a prefix). Issues as [`regex`].
pub(crate) fn regex_and_full_match(
    key: &str,
    pattern: &str,
    issues: &mut Issues,
) -> Option<(Regex, Regex)> {
    let re = regex(key, pattern, issues)?;
    // A pattern ending in an `(?x)` comment would comment out the closing `)` (the wrapped
    // pattern then fails to compile); a newline ends the comment and is whitespace in that mode.
    let full = Regex::new(&format!(r"\A(?:{pattern})\z"))
        .or_else(|_| Regex::new(&format!("\\A(?:{pattern}\n)\\z")));
    match full {
        Ok(full) => Some((re, full)),
        Err(e) => {
            issues.push(key, format!("Invalid regex: {e}"));
            None
        }
    }
}

/// The Java class Kafka Connect would name in a `DataException` for `value` (the JSON form of a
/// Connect value, read with its schema when it has one): `null`, `java.lang.String`, …
pub(crate) fn java_class_name(value: Option<&Value>, schema: Option<&Schema>) -> &'static str {
    let value = match value {
        None | Some(Value::Null) => return "null",
        Some(v) => v,
    };
    if let Some(schema) = schema {
        return match schema.kind {
            SchemaKind::Int8 => "java.lang.Byte",
            SchemaKind::Int16 => "java.lang.Short",
            SchemaKind::Int32 => "java.lang.Integer",
            SchemaKind::Int64 => "java.lang.Long",
            SchemaKind::Float32 => "java.lang.Float",
            SchemaKind::Float64 => "java.lang.Double",
            SchemaKind::Boolean => "java.lang.Boolean",
            SchemaKind::String => "java.lang.String",
            SchemaKind::Bytes => "[B",
            SchemaKind::Array { .. } => "java.util.ArrayList",
            SchemaKind::Map { .. } => "java.util.HashMap",
            SchemaKind::Struct { .. } => "org.apache.kafka.connect.data.Struct",
        };
    }
    match value {
        Value::Null => "null",
        Value::Bool(_) => "java.lang.Boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "java.lang.Long",
        Value::Number(_) => "java.lang.Double",
        Value::String(_) => "java.lang.String",
        Value::Array(_) => "java.util.ArrayList",
        Value::Object(_) => "java.util.HashMap",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields_common::test_support::config;

    #[test]
    fn lists_keep_empty_entries_like_kafka() {
        let mut issues = Issues::default();
        let c = config(&[("l", " a , ,b "), ("e", "  ")]);
        assert_eq!(
            required_non_empty_list(&c, "l", &mut issues),
            Some(vec!["a".to_owned(), String::new(), "b".to_owned()])
        );
        assert_eq!(required_non_empty_list(&c, "e", &mut issues), None);
        assert_eq!(required_non_empty_list(&c, "absent", &mut issues), None);
        let issues = issues.into_vec();
        assert_eq!(issues[0].key, "e");
        assert_eq!(issues[0].message, "Empty list");
        assert_eq!(issues[1].key, "absent");
        assert_eq!(
            issues[1].message,
            "Missing required configuration \"absent\" which has no default value."
        );
    }

    #[test]
    fn full_match_regexes_match_the_whole_text() {
        let mut issues = Issues::default();
        for (pattern, text, full) in [
            ("a|ab", "ab", true),
            ("foo", "foo-x", false),
            ("foo", "x-foo", false),
            ("(?x) foo \\- bar  # a comment", "foo-bar", true),
            ("(?x) foo \\- bar  # a comment", "foo-bar-x", false),
            ("(?i)FOO", "foo", true),
        ] {
            let (_, re) = regex_and_full_match("k", pattern, &mut issues).unwrap();
            assert_eq!(re.is_match(text), full, "{pattern} on {text}");
        }
        assert!(issues.is_empty());
        assert!(regex_and_full_match("k", "(", &mut issues).is_none());
        assert!(issues.has("k"));
    }

    #[test]
    fn booleans_accept_any_case_and_refuse_others() {
        let mut issues = Issues::default();
        let c = config(&[("t", " TRUE "), ("x", "yes")]);
        assert_eq!(boolean_or(&c, "t", false, &mut issues), Some(true));
        assert_eq!(boolean_or(&c, "absent", false, &mut issues), Some(false));
        assert_eq!(boolean_or(&c, "x", true, &mut issues), None);
        assert!(issues.has("x"));
    }
}
