//! Kafka Connect's predicates (`org.apache.kafka.connect.transforms.predicates.*`):
//! `TopicNameMatches`, `HasHeaderKey` and `RecordIsTombstone`.

use ferry_api::config::Issues;
use ferry_api::transform::{Predicate, PredicatePlugin};
use ferry_api::{Config, ConfigIssue, ConfigKey, SourceRecord};
use regex::Regex;

use crate::PACKAGE;
use crate::routing_config::{regex_and_full_match, required_non_empty_string};

pub(crate) fn plugins() -> Vec<PredicatePlugin> {
    vec![
        PredicatePlugin::new([format!("{PACKAGE}.predicates.TopicNameMatches")], || {
            Box::new(TopicNameMatches::default()) as Box<dyn Predicate>
        }),
        PredicatePlugin::new([format!("{PACKAGE}.predicates.HasHeaderKey")], || {
            Box::new(HasHeaderKey::default()) as Box<dyn Predicate>
        }),
        PredicatePlugin::new([format!("{PACKAGE}.predicates.RecordIsTombstone")], || {
            Box::new(RecordIsTombstone) as Box<dyn Predicate>
        }),
    ]
}

const PATTERN: &str = "pattern";
const NAME: &str = "name";

/// True for records whose whole topic name matches `pattern`.
#[derive(Default)]
struct TopicNameMatches {
    /// `pattern` anchored at both ends (Java's `Matcher.matches()`); `None` until configured,
    /// when nothing matches.
    pattern: Option<Regex>,
}

impl Predicate for TopicNameMatches {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![ConfigKey::required(
            PATTERN,
            "A Java regular expression for matching against the name of a record's topic.",
        )]
    }

    fn configure(&mut self, config: &Config) -> Result<(), Vec<ConfigIssue>> {
        let mut issues = Issues::default();
        let pattern = required_non_empty_string(config, PATTERN, &mut issues)
            .and_then(|p| regex_and_full_match(PATTERN, &p, &mut issues))
            .map(|(_, full)| full);
        self.pattern = issues.finish(|| pattern)?;
        Ok(())
    }

    fn test(&self, record: &SourceRecord) -> bool {
        self.pattern
            .as_ref()
            .is_some_and(|p| p.is_match(&record.topic))
    }
}

/// True for records with at least one header called `name`.
#[derive(Default)]
struct HasHeaderKey {
    name: Option<String>,
}

impl Predicate for HasHeaderKey {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![ConfigKey::required(NAME, "The header name.")]
    }

    fn configure(&mut self, config: &Config) -> Result<(), Vec<ConfigIssue>> {
        let mut issues = Issues::default();
        let name = required_non_empty_string(config, NAME, &mut issues);
        self.name = issues.finish(|| name)?;
        Ok(())
    }

    fn test(&self, record: &SourceRecord) -> bool {
        self.name
            .as_deref()
            .is_some_and(|name| record.headers.iter().any(|h| h.key == name))
    }
}

/// True for tombstones: records with a null value.
struct RecordIsTombstone;

impl Predicate for RecordIsTombstone {
    fn config_keys(&self) -> Vec<ConfigKey> {
        Vec::new()
    }

    fn configure(&mut self, _config: &Config) -> Result<(), Vec<ConfigIssue>> {
        Ok(())
    }

    fn test(&self, record: &SourceRecord) -> bool {
        // A JSON null is the same null value to a converter as no value.
        matches!(record.value, None | Some(serde_json::Value::Null))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields_common::test_support::config;

    fn predicate(
        class: &str,
        pairs: &[(&str, &str)],
    ) -> Result<Box<dyn Predicate>, Vec<ConfigIssue>> {
        let plugin = plugins()
            .into_iter()
            .find(|p| {
                p.answers_to(&format!(
                    "org.apache.kafka.connect.transforms.predicates.{class}"
                ))
            })
            .unwrap();
        let mut p = plugin.make();
        p.configure(&config(pairs))?;
        Ok(p)
    }

    fn topic(t: &str) -> SourceRecord {
        SourceRecord::builder(t).build()
    }

    fn with_headers(keys: &[&str]) -> SourceRecord {
        keys.iter()
            .fold(SourceRecord::builder("t"), |b, k| {
                b.header(*k, serde_json::Value::Null)
            })
            .build()
    }

    #[test]
    fn topic_name_matches_the_whole_name() {
        // TopicNameMatchesTest.testTest.
        let p = predicate("TopicNameMatches", &[(PATTERN, "my-prefix-.*")]).unwrap();
        assert!(p.test(&topic("my-prefix-")));
        assert!(p.test(&topic("my-prefix-foo")));
        assert!(!p.test(&topic("x-my-prefix-")));
        assert!(!p.test(&topic("x-my-prefix-foo")));
        assert!(!p.test(&topic("your-prefix-")));
        assert!(!p.test(&topic("your-prefix-foo")));
        // An alternation must cover the whole name, not only its start.
        let p = predicate("TopicNameMatches", &[(PATTERN, "a|ab")]).unwrap();
        assert!(p.test(&topic("ab")));
        assert!(!p.test(&topic("abc")));
    }

    #[test]
    fn topic_name_matches_config_errors() {
        let missing = predicate("TopicNameMatches", &[]).err().unwrap();
        assert_eq!(missing[0].key, PATTERN);
        assert!(
            missing[0]
                .message
                .contains("Missing required configuration \"pattern\"")
        );
        let empty = predicate("TopicNameMatches", &[(PATTERN, "")])
            .err()
            .unwrap();
        assert_eq!(empty[0].message, "String must be non-empty");
        for bad in ["[", "*"] {
            let invalid = predicate("TopicNameMatches", &[(PATTERN, bad)])
                .err()
                .unwrap();
            assert_eq!(invalid.len(), 1);
            assert_eq!(invalid[0].key, PATTERN);
            assert!(
                invalid[0].message.starts_with("Invalid regex"),
                "{invalid:?}"
            );
        }
    }

    #[test]
    fn has_header_key() {
        // HasHeaderKeyTest.testTest.
        let p = predicate("HasHeaderKey", &[(NAME, "foo")]).unwrap();
        assert!(p.test(&with_headers(&["foo"])));
        assert!(p.test(&with_headers(&["foo", "bar"])));
        assert!(p.test(&with_headers(&["bar", "foo", "bar", "foo"])));
        assert!(!p.test(&with_headers(&["bar"])));
        assert!(!p.test(&with_headers(&["bar", "bar"])));
        assert!(!p.test(&with_headers(&[])));
        assert!(!p.test(&with_headers(&["Foo"])));
    }

    #[test]
    fn has_header_key_config_errors() {
        let missing = predicate("HasHeaderKey", &[]).err().unwrap();
        assert_eq!(missing[0].key, NAME);
        assert!(
            missing[0]
                .message
                .contains("Missing required configuration \"name\"")
        );
        let empty = predicate("HasHeaderKey", &[(NAME, " ")]).err().unwrap();
        assert_eq!(empty[0].key, NAME);
        assert_eq!(empty[0].message, "String must be non-empty");
    }

    #[test]
    fn record_is_tombstone() {
        let p = predicate("RecordIsTombstone", &[]).unwrap();
        assert!(p.test(&topic("t")));
        assert!(
            p.test(
                &SourceRecord::builder("t")
                    .value(serde_json::Value::Null)
                    .build()
            )
        );
        // A null key does not matter; a value, even an empty one, is not a tombstone.
        assert!(
            !p.test(
                &SourceRecord::builder("t")
                    .value(serde_json::json!(""))
                    .build()
            )
        );
        assert!(
            !p.test(
                &SourceRecord::builder("t")
                    .key(serde_json::json!(1))
                    .value(serde_json::json!({}))
                    .build()
            )
        );
    }
}
