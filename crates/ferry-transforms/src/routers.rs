//! Topic routers: `RegexRouter` (rename topics matching a regex) and `TimestampRouter` (append the
//! record's timestamp to its topic), as Kafka Connect's.

use ferry_api::config::Issues;
use ferry_api::transform::{Transformation, TransformationPlugin};
use ferry_api::{Config, ConfigIssue, ConfigKey, ConnectError, SourceRecord};
use regex::Regex;

use crate::PACKAGE;
use crate::routing_config::{regex_and_full_match, required_string, string_or};
use crate::routing_date::DatePattern;

pub(crate) fn plugins() -> Vec<TransformationPlugin> {
    vec![
        TransformationPlugin::new([format!("{PACKAGE}.RegexRouter")], || {
            Box::new(RegexRouter::default()) as Box<dyn Transformation>
        }),
        TransformationPlugin::new([format!("{PACKAGE}.TimestampRouter")], || {
            Box::new(TimestampRouter::default()) as Box<dyn Transformation>
        }),
    ]
}

const REGEX: &str = "regex";
const REPLACEMENT: &str = "replacement";

/// Kafka Connect's `RegexRouter`: when the whole topic matches `regex`, the topic becomes
/// `Matcher.replaceFirst(replacement)`; other records pass unchanged.
#[derive(Default)]
struct RegexRouter {
    /// `regex` and the same regex anchored at both ends (Java's `Matcher.matches()`).
    regex: Option<(Regex, Regex)>,
    /// The replacement in Rust's syntax (`${1}`, `$$`).
    replacement: String,
}

impl Transformation for RegexRouter {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![
            ConfigKey::required(REGEX, "Regular expression to use for matching."),
            ConfigKey::required(REPLACEMENT, "Replacement string."),
        ]
    }

    fn configure(&mut self, config: &Config) -> Result<(), Vec<ConfigIssue>> {
        let mut issues = Issues::default();
        let pattern = required_string(config, REGEX, &mut issues);
        let replacement = required_string(config, REPLACEMENT, &mut issues);
        let compiled = pattern
            .as_deref()
            .and_then(|p| regex_and_full_match(REGEX, p, &mut issues));
        // Java reports a bad replacement only when a topic matches; checking it here against the
        // regex's groups reports it before the first record.
        let translated = match (&compiled, replacement) {
            (Some((re, _)), Some(r)) => match java_replacement(&r, re) {
                Ok(t) => Some(t),
                Err(e) => {
                    issues.push(REPLACEMENT, e.to_string());
                    None
                }
            },
            _ => None,
        };
        let (regex, replacement) = issues.finish(|| (compiled, translated))?;
        self.regex = regex;
        self.replacement = replacement.unwrap_or_default();
        Ok(())
    }

    fn apply(&mut self, mut record: SourceRecord) -> Result<Option<SourceRecord>, ConnectError> {
        let Some((regex, full)) = &self.regex else {
            return Err(not_configured("RegexRouter"));
        };
        if full.is_match(&record.topic) {
            // Java's replaceFirst searches again from the start, so the first match (not the
            // full one) is replaced, as here.
            let topic = regex
                .replacen(&record.topic, 1, self.replacement.as_str())
                .into_owned();
            record.topic = topic;
        }
        Ok(Some(record))
    }
}

/// A `java.util.regex.Matcher` replacement Java refuses, with Java's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum ReplacementError {
    #[error("character to be escaped is missing")]
    EscapeMissing,
    #[error("Illegal group reference: group index is missing")]
    GroupIndexMissing,
    #[error("named capturing group is missing trailing '}}'")]
    NameUnclosed,
    #[error("named capturing group has 0 length name")]
    EmptyName,
    #[error("capturing group name {{{0}}} starts with digit character")]
    NameStartsWithDigit(String),
    #[error("No group with name {{{0}}}")]
    NoSuchName(String),
    #[error("No group {0}")]
    NoSuchGroup(usize),
    #[error("Illegal group reference")]
    IllegalReference,
}

/// Translates a `java.util.regex.Matcher` replacement (`$1`, `${name}`, `\$`) into Rust regex's
/// (`${1}`, `${name}`, `$$`), checked against `regex`'s groups.
///
/// # Errors
/// Java's message for the replacement's first problem.
fn java_replacement(replacement: &str, regex: &Regex) -> Result<String, ReplacementError> {
    let group_count = regex.captures_len() - 1;
    let mut out = String::with_capacity(replacement.len());
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(escaped) => out.push(escaped),
                None => return Err(ReplacementError::EscapeMissing),
            },
            '$' => match chars.next() {
                None => return Err(ReplacementError::GroupIndexMissing),
                Some('{') => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(ch) if ch.is_ascii_alphanumeric() => name.push(ch),
                            _ => {
                                return Err(ReplacementError::NameUnclosed);
                            }
                        }
                    }
                    if name.is_empty() {
                        return Err(ReplacementError::EmptyName);
                    }
                    if name.starts_with(|ch: char| ch.is_ascii_digit()) {
                        return Err(ReplacementError::NameStartsWithDigit(name));
                    }
                    if !regex.capture_names().flatten().any(|n| n == name) {
                        return Err(ReplacementError::NoSuchName(name));
                    }
                    out.push_str(&format!("${{{name}}}"));
                }
                Some(d) if d.is_ascii_digit() => {
                    let mut group = d.to_digit(10).map_or(0, |v| v as usize);
                    if group > group_count {
                        return Err(ReplacementError::NoSuchGroup(group));
                    }
                    // Java takes further digits while the number stays a group of the regex.
                    while let Some(next) = chars.peek().and_then(|ch| ch.to_digit(10)) {
                        let longer = group * 10 + next as usize;
                        if longer > group_count {
                            break;
                        }
                        group = longer;
                        chars.next();
                    }
                    out.push_str(&format!("${{{group}}}"));
                }
                Some(_) => return Err(ReplacementError::IllegalReference),
            },
            other => out.push(other),
        }
    }
    Ok(out)
}

const TOPIC_FORMAT: &str = "topic.format";
const TIMESTAMP_FORMAT: &str = "timestamp.format";
const DEFAULT_TOPIC_FORMAT: &str = "${topic}-${timestamp}";
const DEFAULT_TIMESTAMP_FORMAT: &str = "yyyyMMdd";

/// Kafka Connect's `TimestampRouter`: the topic becomes `topic.format` with `${topic}` and
/// `${timestamp}` (the record's timestamp in UTC, formatted with `timestamp.format`) replaced.
#[derive(Default)]
struct TimestampRouter {
    topic_format: String,
    timestamp_format: Option<DatePattern>,
}

impl Transformation for TimestampRouter {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![
            ConfigKey::optional(
                TOPIC_FORMAT,
                Some(DEFAULT_TOPIC_FORMAT),
                "Format string which can contain ${topic} and ${timestamp} as placeholders for the topic and timestamp, respectively.",
            ),
            ConfigKey::optional(
                TIMESTAMP_FORMAT,
                Some(DEFAULT_TIMESTAMP_FORMAT),
                "Format string for the timestamp that is compatible with java.text.SimpleDateFormat (formatted in UTC).",
            ),
        ]
    }

    fn configure(&mut self, config: &Config) -> Result<(), Vec<ConfigIssue>> {
        let mut issues = Issues::default();
        let topic_format = string_or(config, TOPIC_FORMAT, DEFAULT_TOPIC_FORMAT);
        // Java builds the SimpleDateFormat at the first record; a bad pattern is reported here.
        let pattern = string_or(config, TIMESTAMP_FORMAT, DEFAULT_TIMESTAMP_FORMAT);
        let timestamp_format = match DatePattern::parse(&pattern) {
            Ok(p) => Some(p),
            Err(e) => {
                issues.push(TIMESTAMP_FORMAT, e.to_string());
                None
            }
        };
        let timestamp_format = issues.finish(|| timestamp_format)?;
        self.topic_format = topic_format;
        self.timestamp_format = timestamp_format;
        Ok(())
    }

    fn apply(&mut self, mut record: SourceRecord) -> Result<Option<SourceRecord>, ConnectError> {
        let Some(format) = &self.timestamp_format else {
            return Err(not_configured("TimestampRouter"));
        };
        let Some(timestamp) = record.timestamp else {
            return Err(ConnectError::fatal(format!(
                "Timestamp missing on record: {}",
                describe(&record)
            )));
        };
        let formatted = format.format(timestamp);
        // The same order as Java: `${topic}` first, then `${timestamp}` in the result.
        record.topic = self
            .topic_format
            .replace("${topic}", &record.topic)
            .replace("${timestamp}", &formatted);
        Ok(Some(record))
    }
}

/// A record's identity for an error message, like Java's `SourceRecord.toString()` but without
/// key, value and headers (which may be large or sensitive).
fn describe(record: &SourceRecord) -> String {
    let map =
        |m: Option<&ferry_api::ConnectMap>| m.map_or_else(|| "null".to_owned(), |m| m.to_string());
    let partition = record
        .kafka_partition
        .map_or_else(|| "null".to_owned(), |p| p.to_string());
    format!(
        "SourceRecord{{sourcePartition={}, sourceOffset={}}} ConnectRecord{{topic='{}', kafkaPartition={partition}, timestamp=null}}",
        map(record.source_partition.as_ref()),
        map(record.source_offset.as_ref()),
        record.topic,
    )
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

    fn route(regex: &str, replacement: &str, topic: &str) -> String {
        let mut router = RegexRouter::default();
        router
            .configure(&config(&[(REGEX, regex), (REPLACEMENT, replacement)]))
            .unwrap();
        router
            .apply(SourceRecord::builder(topic).build())
            .unwrap()
            .unwrap()
            .topic
    }

    fn regex_issues(regex: Option<&str>, replacement: Option<&str>) -> Vec<ConfigIssue> {
        let mut pairs = Vec::new();
        if let Some(r) = regex {
            pairs.push((REGEX, r));
        }
        if let Some(r) = replacement {
            pairs.push((REPLACEMENT, r));
        }
        RegexRouter::default()
            .configure(&config(&pairs))
            .unwrap_err()
    }

    // The cases of Kafka's RegexRouterTest.
    #[test]
    fn regex_router_kafka_cases() {
        assert_eq!(route("foo", "bar", "foo"), "bar");
        assert_eq!(route("foo", "bar", "orig"), "orig");
        assert_eq!(route("(.*)", "$1", "orig"), "orig");
        assert_eq!(route("(.*)", "prefix-$1", "orig"), "prefix-orig");
        assert_eq!(route("(.*)", "$1-suffix", "orig"), "orig-suffix");
        assert_eq!(
            route(r"(.*)-(\d\d\d\d\d\d\d\d)", "$1", "index-20160117"),
            "index"
        );
    }

    #[test]
    fn regex_router_swaps_groups_and_needs_a_full_match() {
        assert_eq!(route("(.*)-(.*)", "$2", "a-b"), "b");
        assert_eq!(route("(.*)-(.*)", "$2_$1", "db-orders"), "orders_db");
        // `foo` is found inside `foo-x` but does not match all of it.
        assert_eq!(route("foo", "bar", "foo-x"), "foo-x");
        assert_eq!(route("foo", "bar", "x-foo"), "x-foo");
    }

    #[test]
    fn regex_router_replacement_syntax_is_javas() {
        // Named groups; `\$` is a literal dollar (Rust's `$$`), `\\` a backslash.
        assert_eq!(
            route("(?<db>[a-z]+)\\.(?<t>[a-z]+)", "${t}_${db}", "shop.orders"),
            "orders_shop"
        );
        assert_eq!(route("(.*)", r"\$$1", "t"), "$t");
        assert_eq!(route("(.*)", r"a\\b", "t"), r"a\b");
        // `$12` is group 1 then "2" when the regex has fewer than 12 groups (Java's rule).
        assert_eq!(route("(.*)", "$12", "t"), "t2");
        // `$1x` must not read as Rust's group named `1x`.
        assert_eq!(route("(.*)", "$1x", "t"), "tx");
        // Java's replaceFirst replaces the first match found, which may be shorter than the
        // full match that decided to route.
        assert_eq!(route("a|ab", "X", "ab"), "Xb");
    }

    #[test]
    fn regex_router_config_errors_name_the_key() {
        let issues = regex_issues(None, None);
        assert_eq!(issues.len(), 2);
        assert_eq!(issues[0].key, REGEX);
        assert_eq!(
            issues[0].message,
            "Missing required configuration \"regex\" which has no default value."
        );
        assert_eq!(issues[1].key, REPLACEMENT);

        let issues = regex_issues(Some("(unclosed"), Some("x"));
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].key, REGEX);
        assert!(
            issues[0].message.starts_with("Invalid regex: "),
            "{issues:?}"
        );

        for (replacement, message) in [
            ("$2", "No group 2"),
            ("$x", "Illegal group reference"),
            ("a$", "Illegal group reference: group index is missing"),
            ("a\\", "character to be escaped is missing"),
            ("${nope}", "No group with name {nope}"),
            ("${1", "named capturing group is missing trailing '}'"),
        ] {
            let issues = regex_issues(Some("(.*)"), Some(replacement));
            assert_eq!(issues.len(), 1, "{replacement}");
            assert_eq!(issues[0].key, REPLACEMENT);
            assert_eq!(issues[0].message, message);
        }
    }

    #[test]
    fn regex_router_trims_like_kafka_and_keeps_the_rest_of_the_record() {
        let mut router = RegexRouter::default();
        router
            .configure(&config(&[(REGEX, " (.*) "), (REPLACEMENT, " x-$1 ")]))
            .unwrap();
        let record = SourceRecord::builder("t")
            .key(serde_json::json!(1))
            .value(serde_json::json!({"a": 1}))
            .timestamp(5)
            .kafka_partition(2)
            .header("h", serde_json::json!("v"))
            .build();
        let out = router.apply(record.clone()).unwrap().unwrap();
        assert_eq!(out.topic, "x-t");
        let mut rest = out;
        rest.topic = "t".to_owned();
        assert_eq!(rest, record);
    }

    fn timestamp_router(pairs: &[(&str, &str)]) -> TimestampRouter {
        let mut router = TimestampRouter::default();
        router.configure(&config(pairs)).unwrap();
        router
    }

    #[test]
    fn timestamp_router_default_configuration() {
        // TimestampRouterTest.defaultConfiguration.
        let mut router = timestamp_router(&[]);
        let record = SourceRecord::builder("test")
            .timestamp(1_483_425_001_864)
            .build();
        assert_eq!(
            router.apply(record).unwrap().unwrap().topic,
            "test-20170103"
        );
    }

    #[test]
    fn timestamp_router_custom_formats() {
        let mut router = timestamp_router(&[
            (TOPIC_FORMAT, "${timestamp}.${topic}.${timestamp}"),
            (TIMESTAMP_FORMAT, "yyyy-MM-dd'T'HH'h'"),
        ]);
        let record = SourceRecord::builder("orders")
            .timestamp(1_483_425_001_864)
            .build();
        assert_eq!(
            router.apply(record).unwrap().unwrap().topic,
            "2017-01-03T06h.orders.2017-01-03T06h"
        );
    }

    #[test]
    fn timestamp_router_refuses_a_record_without_timestamp() {
        let mut router = timestamp_router(&[]);
        let err = router
            .apply(SourceRecord::builder("orders").build())
            .unwrap_err();
        assert!(!err.is_retriable());
        assert!(
            err.to_string().starts_with(
                "Timestamp missing on record: SourceRecord{sourcePartition=null, sourceOffset=null} ConnectRecord{topic='orders'"
            ),
            "{err}"
        );
    }

    #[test]
    fn timestamp_router_bad_pattern_names_the_key() {
        let issues = TimestampRouter::default()
            .configure(&config(&[(TIMESTAMP_FORMAT, "yyyy-q")]))
            .unwrap_err();
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].key, TIMESTAMP_FORMAT);
        assert_eq!(issues[0].message, "Illegal pattern character 'q'");
    }

    #[test]
    fn plugins_answer_to_kafka_class_names() {
        let plugins = plugins();
        assert!(plugins[0].answers_to("org.apache.kafka.connect.transforms.RegexRouter"));
        assert!(plugins[1].answers_to("org.apache.kafka.connect.transforms.TimestampRouter"));
    }
}
