//! The connector keys the Kafka sink reads itself, with Kafka Connect's names and rules:
//!
//! - topic creation (KIP-158): `topic.creation.default.replication.factor` / `.partitions` and any
//!   other `topic.creation.default.<topic config>`, and named groups (`topic.creation.groups`) with
//!   `include` / `exclude` patterns, used when the worker's `topic.creation.enable` is true (default);
//! - per-connector producer settings `producer.override.<key>`, as the worker's
//!   `connector.client.config.override.policy` allows (`None`, `Principal`, `All`; default `All`).

use ferry_api::{Config, ConfigIssue};
use regex::Regex;

/// Worker key: whether connectors may have their topics created (default true).
pub const TOPIC_CREATION_ENABLE: &str = "topic.creation.enable";
/// Worker key: which `producer.override.*` keys connectors may set (default `All`).
pub const CONNECTOR_CLIENT_CONFIG_OVERRIDE_POLICY: &str = "connector.client.config.override.policy";
/// Connector key prefix of the topic creation settings.
pub const TOPIC_CREATION_PREFIX: &str = "topic.creation.";
/// Connector key: the named topic creation groups, in the order they are matched.
pub const TOPIC_CREATION_GROUPS: &str = "topic.creation.groups";
/// Connector key prefix of the connector's producer settings.
pub const PRODUCER_OVERRIDE_PREFIX: &str = "producer.override.";

/// The group every topic no named group matches belongs to.
const DEFAULT_GROUP: &str = "default";
const INCLUDE: &str = "include";
const EXCLUDE: &str = "exclude";
const REPLICATION_FACTOR: &str = "replication.factor";
const PARTITIONS: &str = "partitions";

/// The most topic creation groups a connector may define (Kafka Connect sets no limit; this keeps a
/// configuration's matching cost bounded).
pub const MAX_TOPIC_CREATION_GROUPS: usize = 100;

/// Whether `key` is a connector key the Kafka sink reads (`topic.creation.*`, `producer.override.*`).
pub fn is_kafka_connector_key(key: &str) -> bool {
    key.starts_with(TOPIC_CREATION_PREFIX) || key.starts_with(PRODUCER_OVERRIDE_PREFIX)
}

/// `connector.client.config.override.policy`: which producer settings a connector may override.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OverridePolicy {
    /// `None`: no override is allowed.
    None,
    /// `Principal`: only `sasl.jaas.config`, `sasl.mechanism` and `security.protocol`.
    Principal,
    /// `All` (Kafka Connect's default since 3.0): any override.
    #[default]
    All,
}

/// The settings `Principal` allows (Kafka's `PrincipalConnectorClientConfigOverridePolicy`).
const PRINCIPAL_KEYS: &[&str] = &["sasl.jaas.config", "sasl.mechanism", "security.protocol"];

impl OverridePolicy {
    /// The policy named by `value` (trimmed): its alias (`None`, `Principal`, `All`, case-sensitive as
    /// Kafka's plugin aliases) or Kafka's class name, simple or qualified.
    pub fn parse(value: &str) -> Option<Self> {
        let value = value.trim();
        let simple = value
            .strip_prefix("org.apache.kafka.connect.connector.policy.")
            .unwrap_or(value);
        let alias = simple
            .strip_suffix("ConnectorClientConfigOverridePolicy")
            .unwrap_or(simple);
        match alias {
            "None" => Some(Self::None),
            "Principal" => Some(Self::Principal),
            "All" => Some(Self::All),
            _ => None,
        }
    }

    /// Kafka's name of the policy, as its error messages say it.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "None",
            Self::Principal => "Principal",
            Self::All => "All",
        }
    }

    /// Whether a connector may override producer setting `key` (without the prefix).
    pub fn allows(self, key: &str) -> bool {
        match self {
            Self::None => false,
            Self::Principal => PRINCIPAL_KEYS.contains(&key),
            Self::All => true,
        }
    }
}

/// The accepted values of `connector.client.config.override.policy`, for messages.
pub const OVERRIDE_POLICY_VALUES: &str = "None, Principal, All (default), or their class names \
    org.apache.kafka.connect.connector.policy.<None|Principal|All>ConnectorClientConfigOverridePolicy";

/// The connector's `producer.override.*` settings, prefix removed, values trimmed, in key order.
pub fn producer_overrides(config: &Config) -> Vec<(String, String)> {
    config
        .iter()
        .filter_map(|(k, v)| {
            k.strip_prefix(PRODUCER_OVERRIDE_PREFIX)
                .filter(|s| !s.is_empty())
                .map(|s| (s.to_owned(), v.trim().to_owned()))
        })
        .collect()
}

/// The connector's `producer.override.*` keys the policy refuses, with Kafka Connect's message.
pub fn check_producer_overrides(policy: OverridePolicy, config: &Config) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    for key in config.keys() {
        let Some(setting) = key.strip_prefix(PRODUCER_OVERRIDE_PREFIX) else {
            continue;
        };
        if setting.is_empty() {
            issues.push(issue(
                key,
                "names no producer setting (e.g. producer.override.linger.ms=5)",
            ));
        } else if !policy.allows(setting) {
            issues.push(issue(
                key,
                format!(
                    "The '{}' policy does not allow '{setting}' to be overridden in the connector \
                     configuration. The worker's {CONNECTOR_CLIENT_CONFIG_OVERRIDE_POLICY} decides \
                     (Principal allows only {}; All allows any)",
                    policy.name(),
                    PRINCIPAL_KEYS.join(", ")
                ),
            ));
        }
    }
    issues
}

/// One topic creation group: which topics it applies to and how they are created.
#[derive(Debug, Clone)]
pub struct TopicGroup {
    /// The group's name (`default` for the default group).
    pub name: String,
    include: Vec<Regex>,
    exclude: Vec<Regex>,
    /// Replication factor (-1: the broker's default).
    pub replication_factor: i32,
    /// Partitions (-1: the broker's default).
    pub partitions: i32,
    /// Other topic configs (`cleanup.policy`, `compression.type`, …), in key order.
    pub topic_configs: Vec<(String, String)>,
}

impl TopicGroup {
    /// Kafka Connect's rule: a full match of an include pattern and of no exclude pattern.
    fn matches(&self, topic: &str) -> bool {
        !self.exclude.iter().any(|r| r.is_match(topic))
            && self.include.iter().any(|r| r.is_match(topic))
    }
}

/// A connector's topic creation rules (KIP-158).
#[derive(Debug, Clone)]
pub struct TopicCreation {
    groups: Vec<TopicGroup>,
    default: TopicGroup,
}

impl TopicCreation {
    /// The rules of a connector configuration: `Ok(None)` when it sets no `topic.creation.*` key
    /// (Kafka Connect then creates no topics for it).
    ///
    /// # Errors
    /// Every invalid key, as Kafka Connect validates them: the default group's replication factor and
    /// partitions are required; both must be -1 or at least 1; groups must be unique, have an
    /// `include` list, and their patterns must be valid; keys of groups not listed are refused.
    pub fn from_config(config: &Config) -> Result<Option<TopicCreation>, Vec<ConfigIssue>> {
        if !config.keys().any(|k| k.starts_with(TOPIC_CREATION_PREFIX)) {
            return Ok(None);
        }
        let mut issues = Vec::new();
        let names = group_names(config, &mut issues);
        check_group_keys(config, &names, &mut issues);
        let default = default_group(config, &mut issues);
        let mut groups = Vec::new();
        for name in &names {
            groups.push(named_group(config, name, &default, &mut issues));
        }
        if issues.is_empty() {
            Ok(Some(TopicCreation { groups, default }))
        } else {
            Err(issues)
        }
    }

    /// The group that decides how `topic` is created: the first named group (in listed order) that
    /// includes and does not exclude it, else the default group.
    pub fn group_for(&self, topic: &str) -> &TopicGroup {
        self.groups
            .iter()
            .find(|g| g.matches(topic))
            .unwrap_or(&self.default)
    }
}

/// The groups `topic.creation.groups` lists: each once, without the default group, at most
/// [`MAX_TOPIC_CREATION_GROUPS`].
fn group_names(config: &Config, issues: &mut Vec<ConfigIssue>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for name in list(config.get(TOPIC_CREATION_GROUPS).map(String::as_str)) {
        if names.contains(&name) {
            issues.push(issue(
                TOPIC_CREATION_GROUPS,
                format!("Duplicate alias provided ({name})."),
            ));
        } else if name != DEFAULT_GROUP {
            // Kafka Connect always has the default group; listing it changes nothing.
            names.push(name);
        }
    }
    if names.len() > MAX_TOPIC_CREATION_GROUPS {
        issues.push(issue(
            TOPIC_CREATION_GROUPS,
            format!("at most {MAX_TOPIC_CREATION_GROUPS} groups are accepted"),
        ));
        names.truncate(MAX_TOPIC_CREATION_GROUPS);
    }
    names
}

/// Refuses `topic.creation.*` keys that name no listed group or no setting.
fn check_group_keys(config: &Config, names: &[String], issues: &mut Vec<ConfigIssue>) {
    // Keys naming no group are refused: Kafka Connect ignores them silently, which hides typos.
    for key in config.keys() {
        let Some(rest) = key.strip_prefix(TOPIC_CREATION_PREFIX) else {
            continue;
        };
        if key == TOPIC_CREATION_GROUPS {
            continue;
        }
        match rest.split_once('.') {
            Some((group, setting))
                if !setting.is_empty()
                    && (group == DEFAULT_GROUP || names.iter().any(|n| n == group)) => {}
            Some((group, setting)) if !setting.is_empty() => issues.push(issue(
                key,
                format!(
                    "names topic creation group '{group}', which {TOPIC_CREATION_GROUPS} does not \
                     list; add it there, or use topic.creation.default.* for every topic"
                ),
            )),
            _ => issues.push(issue(
                key,
                "is not a topic creation setting: use topic.creation.groups or \
                 topic.creation.<group>.<setting>, e.g. topic.creation.default.partitions",
            )),
        }
    }
}

/// The default group: its replication factor and partitions are required.
fn default_group(config: &Config, issues: &mut Vec<ConfigIssue>) -> TopicGroup {
    let default_prefix = format!("{TOPIC_CREATION_PREFIX}{DEFAULT_GROUP}.");
    let replication_factor = required_count(
        config,
        &format!("{default_prefix}{REPLICATION_FACTOR}"),
        "replicas",
        issues,
    );
    let partitions = required_count(
        config,
        &format!("{default_prefix}{PARTITIONS}"),
        "partitions",
        issues,
    );
    TopicGroup {
        name: DEFAULT_GROUP.to_owned(),
        // The default group applies to whatever no named group matches; its include and
        // exclude are not consulted (as in Kafka Connect).
        include: Vec::new(),
        exclude: Vec::new(),
        replication_factor: replication_factor.unwrap_or(-1),
        partitions: partitions.unwrap_or(-1),
        topic_configs: topic_configs(config, &default_prefix),
    }
}

/// The group `name`: its required include patterns, its exclude patterns, and the default
/// group's counts where it sets none.
fn named_group(
    config: &Config,
    name: &str,
    default: &TopicGroup,
    issues: &mut Vec<ConfigIssue>,
) -> TopicGroup {
    let prefix = format!("{TOPIC_CREATION_PREFIX}{name}.");
    let include_key = format!("{prefix}{INCLUDE}");
    let include = match config.get(&include_key) {
        None => {
            issues.push(issue(
                &include_key,
                format!(
                    "Missing required configuration \"{include_key}\" which has no default \
                     value: group '{name}' needs the topics it applies to (comma-separated \
                     regular expressions matching whole topic names)"
                ),
            ));
            Vec::new()
        }
        Some(value) => patterns(&include_key, value, issues),
    };
    let exclude_key = format!("{prefix}{EXCLUDE}");
    let exclude = config
        .get(&exclude_key)
        .map(|v| patterns(&exclude_key, v, issues))
        .unwrap_or_default();
    let replication_factor = optional_count(
        config,
        &format!("{prefix}{REPLICATION_FACTOR}"),
        "replicas",
        issues,
    )
    .unwrap_or(default.replication_factor);
    let partitions = optional_count(
        config,
        &format!("{prefix}{PARTITIONS}"),
        "partitions",
        issues,
    )
    .unwrap_or(default.partitions);
    TopicGroup {
        name: name.to_owned(),
        include,
        exclude,
        replication_factor,
        partitions,
        topic_configs: topic_configs(config, &prefix),
    }
}

fn issue(key: &str, message: impl Into<String>) -> ConfigIssue {
    ConfigIssue {
        key: key.to_owned(),
        message: message.into(),
    }
}

/// Kafka's LIST type: comma-separated, trimmed, empty items dropped.
fn list(value: Option<&str>) -> Vec<String> {
    value
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The patterns of a list, each matching whole topic names only (Java's `Matcher.matches`).
fn patterns(key: &str, value: &str, issues: &mut Vec<ConfigIssue>) -> Vec<Regex> {
    let mut out = Vec::new();
    for pattern in list(Some(value)) {
        match Regex::new(&format!("^(?:{pattern})$")) {
            Ok(regex) => out.push(regex),
            Err(e) => issues.push(issue(
                key,
                format!("'{pattern}' is not a valid regular expression: {e}"),
            )),
        }
    }
    out
}

fn required_count(
    config: &Config,
    key: &str,
    what: &str,
    issues: &mut Vec<ConfigIssue>,
) -> Option<i32> {
    if config.get(key).is_none() {
        issues.push(issue(
            key,
            format!(
                "Missing required configuration \"{key}\" which has no default value: with \
                 topic.creation.* keys set, the default group needs its number of {what} (-1 for the \
                 broker's default)"
            ),
        ));
        return None;
    }
    optional_count(config, key, what, issues)
}

/// Kafka Connect's rule for replication factors and partitions: -1 (the broker's default) or at least 1.
fn optional_count(
    config: &Config,
    key: &str,
    what: &str,
    issues: &mut Vec<ConfigIssue>,
) -> Option<i32> {
    let value = config.get(key)?;
    match value.trim().parse::<i32>() {
        Ok(n) if n == -1 || n >= 1 => {
            if what == "replicas" && n > i32::from(i16::MAX) {
                issues.push(issue(key, format!("Value must be at most {}", i16::MAX)));
                return None;
            }
            Some(n)
        }
        Ok(_) => {
            issues.push(issue(
                key,
                format!(
                    "Value must be -1 or at least 1 (the number of {what}; -1 uses the broker's default)"
                ),
            ));
            None
        }
        Err(_) => {
            issues.push(issue(key, "Not a number of type INT"));
            None
        }
    }
}

/// `prefix<config>` keys other than include, exclude, replication.factor and partitions.
fn topic_configs(config: &Config, prefix: &str) -> Vec<(String, String)> {
    config
        .iter()
        .filter_map(|(k, v)| {
            let setting = k.strip_prefix(prefix)?;
            (![INCLUDE, EXCLUDE, REPLICATION_FACTOR, PARTITIONS].contains(&setting)
                && !setting.is_empty())
            .then(|| (setting.to_owned(), v.trim().to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Config {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn keys(issues: &[ConfigIssue]) -> Vec<&str> {
        issues.iter().map(|i| i.key.as_str()).collect()
    }

    #[test]
    fn more_groups_than_the_limit_are_refused_naming_the_key() {
        let names: Vec<String> = (0..=MAX_TOPIC_CREATION_GROUPS)
            .map(|i| format!("g{i}"))
            .collect();
        let list = names.join(",");
        let includes: Vec<(String, String)> = names
            .iter()
            .map(|g| (format!("topic.creation.{g}.include"), format!("{g}-.*")))
            .collect();
        let mut pairs = vec![
            ("topic.creation.default.replication.factor", "1"),
            ("topic.creation.default.partitions", "1"),
            ("topic.creation.groups", list.as_str()),
        ];
        pairs.extend(includes.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let issues = TopicCreation::from_config(&config(&pairs)).expect_err("too many groups");
        assert!(
            keys(&issues).contains(&"topic.creation.groups"),
            "{issues:?}"
        );
        // At the limit, accepted.
        let at_limit = names[..MAX_TOPIC_CREATION_GROUPS].join(",");
        pairs[2] = ("topic.creation.groups", at_limit.as_str());
        pairs.pop();
        assert!(TopicCreation::from_config(&config(&pairs)).is_ok());
    }

    #[test]
    fn no_topic_creation_key_means_no_topic_creation() {
        assert!(
            TopicCreation::from_config(&config(&[("topic", "t")]))
                .expect("valid")
                .is_none()
        );
    }

    #[test]
    fn the_first_matching_group_in_listed_order_decides_else_default() {
        let rules = TopicCreation::from_config(&config(&[
            ("topic.creation.default.replication.factor", "1"),
            ("topic.creation.default.partitions", "3"),
            ("topic.creation.default.cleanup.policy", "compact"),
            ("topic.creation.groups", "logs, audit"),
            ("topic.creation.logs.include", "logs-.*, .*-log"),
            ("topic.creation.logs.exclude", "logs-secret"),
            ("topic.creation.logs.partitions", "6"),
            ("topic.creation.logs.compression.type", "lz4"),
            ("topic.creation.audit.include", "logs-.*,audit"),
            ("topic.creation.audit.replication.factor", "-1"),
        ]))
        .expect("valid")
        .expect("topic creation on");
        let logs = rules.group_for("logs-a");
        assert_eq!(
            (logs.name.as_str(), logs.partitions, logs.replication_factor),
            ("logs", 6, 1)
        );
        // Group settings do not inherit the default group's topic configs (as Kafka Connect).
        assert_eq!(
            logs.topic_configs,
            vec![("compression.type".to_owned(), "lz4".to_owned())]
        );
        assert_eq!(rules.group_for("app-log").name, "logs");
        // Excluded from logs, so the next group that includes it decides.
        let secret = rules.group_for("logs-secret");
        assert_eq!(
            (
                secret.name.as_str(),
                secret.partitions,
                secret.replication_factor
            ),
            ("audit", 3, -1)
        );
        // Whole-name matches only.
        assert_eq!(rules.group_for("xlogs-a").name, "default");
        assert_eq!(rules.group_for("audit2").name, "default");
        let default = rules.group_for("other");
        assert_eq!((default.partitions, default.replication_factor), (3, 1));
        assert_eq!(
            default.topic_configs,
            vec![("cleanup.policy".to_owned(), "compact".to_owned())]
        );
    }

    #[test]
    fn invalid_topic_creation_settings_are_named() {
        let issues = TopicCreation::from_config(&config(&[
            ("topic.creation.default.partitions", "0"),
            ("topic.creation.groups", "g1,g2,g1"),
            ("topic.creation.g1.include", "a(,b"),
            ("topic.creation.g1.replication.factor", "-2"),
            ("topic.creation.g2.partitions", "x"),
            ("topic.creation.g3.partitions", "1"),
            ("topic.creation.oops", "1"),
        ]))
        .expect_err("invalid");
        let mut found = keys(&issues);
        found.sort_unstable();
        assert_eq!(
            found,
            vec![
                "topic.creation.default.partitions",
                "topic.creation.default.replication.factor",
                "topic.creation.g1.include",
                "topic.creation.g1.replication.factor",
                "topic.creation.g2.include",
                "topic.creation.g2.partitions",
                "topic.creation.g3.partitions",
                "topic.creation.groups",
                "topic.creation.oops",
            ]
        );
        let message = |key: &str| {
            issues
                .iter()
                .find(|i| i.key == key)
                .map(|i| i.message.clone())
                .unwrap_or_default()
        };
        assert!(
            message("topic.creation.default.partitions").contains("Value must be -1 or at least 1")
        );
        assert!(
            message("topic.creation.default.replication.factor")
                .starts_with("Missing required configuration")
        );
        assert!(message("topic.creation.g2.include").contains("group 'g2'"));
        assert!(message("topic.creation.groups").contains("Duplicate alias provided"));
        assert!(message("topic.creation.g2.partitions").contains("Not a number of type INT"));
    }

    #[test]
    fn override_policies_follow_kafka_connect() {
        for (value, policy) in [
            ("None", OverridePolicy::None),
            (" Principal ", OverridePolicy::Principal),
            ("All", OverridePolicy::All),
            (
                "org.apache.kafka.connect.connector.policy.NoneConnectorClientConfigOverridePolicy",
                OverridePolicy::None,
            ),
            (
                "PrincipalConnectorClientConfigOverridePolicy",
                OverridePolicy::Principal,
            ),
        ] {
            assert_eq!(OverridePolicy::parse(value), Some(policy), "{value}");
        }
        assert_eq!(OverridePolicy::parse("all"), None);
        assert_eq!(OverridePolicy::default(), OverridePolicy::All);

        let connector = config(&[
            ("producer.override.linger.ms", "5"),
            ("producer.override.sasl.jaas.config", "x"),
            ("producer.override.", "x"),
            ("name", "c"),
        ]);
        assert_eq!(
            keys(&check_producer_overrides(OverridePolicy::All, &connector)),
            vec!["producer.override."]
        );
        let principal = check_producer_overrides(OverridePolicy::Principal, &connector);
        assert_eq!(
            keys(&principal),
            vec!["producer.override.", "producer.override.linger.ms"]
        );
        assert!(
            principal[1].message.starts_with(
                "The 'Principal' policy does not allow 'linger.ms' to be overridden in the connector \
                 configuration."
            ),
            "{}",
            principal[1].message
        );
        assert_eq!(
            keys(&check_producer_overrides(OverridePolicy::None, &connector)),
            vec![
                "producer.override.",
                "producer.override.linger.ms",
                "producer.override.sasl.jaas.config"
            ]
        );
        assert_eq!(
            producer_overrides(&connector),
            vec![
                ("linger.ms".to_owned(), "5".to_owned()),
                ("sasl.jaas.config".to_owned(), "x".to_owned())
            ]
        );
    }
}
