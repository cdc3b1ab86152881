//! [`DistributedConfig`]: the worker file of `ferry distributed`, Kafka Connect's
//! `connect-distributed.properties` with its key names and defaults (`DistributedConfig.java`).
//!
//! It lives in the `ferry` crate because it is the only crate that may name both halves: the worker
//! pieces (REST listeners, converters, flush and shutdown timing) are the runtime's, which must not
//! name Kafka, and the group, internal topics and client settings are Kafka's, whose crate must not
//! depend on the runtime's REST server (`ferry-plugin/tests/layering.rs`). So it reuses both —
//! `CommonWorkerConfig::from_properties` (the keys both workers read), `ferry_kafka::valid_topic` —
//! instead of copying them.

use std::time::Duration;

use ferry_kafka::{BOOTSTRAP_SERVERS, is_sensitive_client_key, valid_topic};
use ferry_plugin::converter_config as converter;
use ferry_plugin::{
    ClientOverrides, ConfigError, ConfigErrors, ConverterSpec, Properties, UnknownKeyHints,
};
use ferry_runtime::config::{
    CommonWorkerConfig, ConfigProviders, OFFSET_STORAGE, RestConfig,
    TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS,
};

use super::keys::*;

/// One internal topic: its name and how Ferry creates it when it is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalTopic {
    /// The topic name.
    pub name: String,
    /// Partitions when created (-1: the broker's default). The config topic always has one.
    pub partitions: i32,
    /// Replication factor when created (-1: the broker's default).
    pub replication_factor: i16,
}

/// The distributed worker's configuration. `Debug` hides the values of secret client settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistributedConfig {
    /// `bootstrap.servers` (required).
    pub bootstrap_servers: String,
    /// `group.id` (required): the workers of one cluster share it.
    pub group_id: String,
    /// `config.storage.topic` (required; one partition) and `config.storage.replication.factor`.
    pub config_topic: InternalTopic,
    /// `offset.storage.topic` (required), `offset.storage.partitions` (25),
    /// `offset.storage.replication.factor` (3).
    pub offset_topic: InternalTopic,
    /// `status.storage.topic` (required), `status.storage.partitions` (5),
    /// `status.storage.replication.factor` (3).
    pub status_topic: InternalTopic,
    /// `session.timeout.ms` (10000).
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms` (3000), below the session timeout.
    pub heartbeat_interval: Duration,
    /// `rebalance.timeout.ms` (60000): how long a member may take to rejoin in a rebalance, which
    /// includes stopping revoked tasks and committing their offsets.
    pub rebalance_timeout: Duration,
    /// `scheduled.rebalance.max.delay.ms` (300000): how long a departed worker's tasks are held back.
    pub scheduled_rebalance_max_delay: Duration,
    /// `offset.flush.interval.ms` (60000).
    pub offset_flush_interval: Duration,
    /// `offset.flush.timeout.ms` (5000).
    pub offset_flush_timeout: Duration,
    /// `offset.flush.strict.bound` (`false`).
    pub offset_flush_strict_bound: bool,
    /// `task.shutdown.graceful.timeout.ms` (5000).
    pub task_shutdown_graceful_timeout: Duration,
    /// `topic.tracking.enable` / `topic.tracking.allow.reset` (both `true`).
    pub topic_tracking: ferry_runtime::TopicTracking,
    /// `key.converter` (+ settings), default JsonConverter with schemas.
    pub key_converter: ConverterSpec,
    /// `value.converter` (+ settings), default JsonConverter with schemas.
    pub value_converter: ConverterSpec,
    /// The REST server: `listeners`, `rest.auth.token`, … (shared with the standalone worker).
    pub rest: RestConfig,
    /// `rest.advertised.host.name`, else the advertised listener's host.
    pub advertised_host: String,
    /// The index in `rest.listeners` of the advertised listener: the first with the
    /// `rest.advertised.listener` protocol, else (as Kafka Connect) the first `http://` one if there
    /// is one, else the first.
    pub advertised_listener: usize,
    /// `rest.advertised.port`, else the first listener's port; `None` when that is 0 (the port the
    /// listener is given is advertised).
    pub advertised_port: Option<u16>,
    /// Top-level `security.*`, `sasl.*`, `ssl.*`: for every Kafka client of the worker.
    pub client_overrides: ClientOverrides,
    /// `producer.*`, prefix removed.
    pub producer_overrides: ClientOverrides,
    /// `consumer.*`, prefix removed.
    pub consumer_overrides: ClientOverrides,
    /// `admin.*`, prefix removed.
    pub admin_overrides: ClientOverrides,
    /// `config.providers` and `config.providers.<name>.*`, as in standalone.
    pub config_providers: ConfigProviders,
    /// `topic.creation.enable` (default true).
    pub topic_creation_enable: bool,
    /// `connector.client.config.override.policy` (default `All`).
    pub override_policy: ferry_kafka::OverridePolicy,
    /// `exactly.once.source.support` (default `disabled`).
    pub exactly_once_source: ferry_runtime::config::exactly_once::ExactlyOnceSource,
}

impl DistributedConfig {
    /// This worker's id in the group and in status records: the advertised `host:port`, as Kafka
    /// Connect's (`[v6]:port` for an IPv6 host). `bound_port` is the listener's actual port, used
    /// when nothing fixed one (`listeners=http://host:0` without `rest.advertised.port`).
    pub fn worker_id(&self, bound_port: u16) -> String {
        let port = self.advertised_port.unwrap_or(bound_port);
        if self.advertised_host.contains(':') {
            format!("[{}]:{port}", self.advertised_host)
        } else {
            format!("{}:{port}", self.advertised_host)
        }
    }

    /// `http` or `https`: the scheme of the advertised REST URL, which other workers forward to.
    pub fn advertised_scheme(&self) -> &'static str {
        self.rest
            .listeners
            .get(self.advertised_listener)
            .map_or("http", |l| l.scheme())
    }

    /// Reads and checks a distributed worker file, reporting every problem at once.
    ///
    /// # Errors
    /// Every unknown key, missing required key, invalid value and inconsistent pair of settings,
    /// each naming the file, key and line.
    pub fn from_properties(props: &Properties) -> Result<DistributedConfig, ConfigErrors> {
        let mut errors = Vec::new();
        check_keys(props, &mut errors);
        let bootstrap_servers = required(props, BOOTSTRAP_SERVERS, &mut errors);
        let group_id = required(props, GROUP_ID, &mut errors);
        let topics = internal_topics(props, &mut errors);
        let session_timeout = int_ms(props, SESSION_TIMEOUT_MS, 10_000, 1, &mut errors);
        let heartbeat_interval = int_ms(props, HEARTBEAT_INTERVAL_MS, 3_000, 1, &mut errors);
        let rebalance_timeout = int_ms(props, REBALANCE_TIMEOUT_MS, 60_000, 1, &mut errors);
        let scheduled_rebalance_max_delay = int_ms(
            props,
            SCHEDULED_REBALANCE_MAX_DELAY_MS,
            300_000,
            0,
            &mut errors,
        );
        let common = CommonWorkerConfig::from_properties(props, &mut errors);
        let rest = common.rest;
        let (advertised_listener, advertised_host, advertised_port) =
            advertised(props, &rest, &mut errors);
        let clients = client_settings(props, &mut errors);
        let (topic_creation_enable, override_policy) =
            ferry_kafka::connector_settings(props, &mut errors);

        let config = DistributedConfig {
            bootstrap_servers: bootstrap_servers.unwrap_or_default(),
            group_id: group_id.unwrap_or_default(),
            config_topic: topics.0,
            offset_topic: topics.1,
            status_topic: topics.2,
            session_timeout,
            heartbeat_interval,
            rebalance_timeout,
            scheduled_rebalance_max_delay,
            offset_flush_interval: common.offset_flush_interval,
            offset_flush_timeout: common.offset_flush_timeout,
            offset_flush_strict_bound: common.offset_flush_strict_bound,
            task_shutdown_graceful_timeout: common.task_shutdown_graceful_timeout,
            topic_tracking: common.topic_tracking,
            key_converter: common.key_converter,
            value_converter: common.value_converter,
            rest,
            advertised_host,
            advertised_listener,
            advertised_port,
            client_overrides: clients.0,
            producer_overrides: clients.1,
            consumer_overrides: clients.2,
            admin_overrides: clients.3,
            config_providers: common.config_providers,
            topic_creation_enable,
            override_policy,
            exactly_once_source: common.exactly_once_source,
        };
        config.check_timeouts(props, &mut errors);
        if errors.is_empty() {
            Ok(config)
        } else {
            Err(ConfigErrors::in_file_order(errors))
        }
    }

    /// The cross-checks between timeouts: Kafka's (heartbeat below the session timeout) and Ferry's
    /// (a revoked task's stop and final commit fit in the rebalance).
    fn check_timeouts(&self, props: &Properties, errors: &mut Vec<ConfigError>) {
        let ms = |d: Duration| d.as_millis();
        if self.heartbeat_interval >= self.session_timeout {
            let key = set_one_of(props, HEARTBEAT_INTERVAL_MS, SESSION_TIMEOUT_MS);
            errors.push(props.invalid(
                key,
                format!(
                    "heartbeat.interval.ms ({}) must be lower than session.timeout.ms ({}), as Kafka \
                     requires (usually a third of it or less)",
                    ms(self.heartbeat_interval),
                    ms(self.session_timeout)
                ),
            ));
        }
        // A revoked task is stopped (up to the graceful timeout), then its offsets are committed (up to
        // the flush timeout), inside the revoke callback; the rebalance waits for that no longer than
        // rebalance.timeout.ms, after which the group may give the task to another worker while this
        // one still runs it.
        let revoke = self.task_shutdown_graceful_timeout + self.offset_flush_timeout;
        if revoke >= self.rebalance_timeout {
            let key = set_one_of(
                props,
                TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS,
                REBALANCE_TIMEOUT_MS,
            );
            errors.push(props.invalid(
                key,
                format!(
                    "task.shutdown.graceful.timeout.ms ({}) + offset.flush.timeout.ms ({}) must be below \
                     rebalance.timeout.ms ({}): a task whose assignment is revoked must stop and commit \
                     its final offsets within the rebalance, or another worker may start it while this \
                     one still runs it; lower the task timeouts or raise rebalance.timeout.ms",
                    ms(self.task_shutdown_graceful_timeout),
                    ms(self.offset_flush_timeout),
                    ms(self.rebalance_timeout)
                ),
            ));
        }
    }
}

/// The first of two related keys that is set (the error points at its line), else the first.
fn set_one_of<'a>(props: &Properties, first: &'a str, second: &'a str) -> &'a str {
    if props.get(first).is_none() && props.get(second).is_some() {
        second
    } else {
        first
    }
}

/// Unknown keys are errors; standalone-only keys get a hint saying what replaces them here.
fn check_keys(props: &Properties, errors: &mut Vec<ConfigError>) {
    let listed: Vec<&str> = plain_keys()
        .chain(LISTED_PREFIXES.iter().copied())
        .chain(ConfigProviders::LISTED.iter().copied())
        .collect();
    let mut hints = UnknownKeyHints::new(&listed);
    for key in props.keys() {
        if plain_keys().any(|k| k == key)
            || RestConfig::is_key(key)
            || ConfigProviders::is_key(key)
            || converter::is_converter_key(key)
            || CLIENT_PREFIXES.iter().any(|p| key.starts_with(p))
        {
            continue;
        }
        if IGNORED_KEYS.contains(&key) {
            tracing::warn!(
                file = %props.path().display(),
                key = %key,
                "{}: {key} has no effect in this build (Ferry has no plugin path or internal converter \
                 settings); ignored",
                props.location(key)
            );
            continue;
        }
        if key == OFFSET_STORAGE {
            // Distributed mode needs its offsets in Kafka; `kafka` says so and is accepted.
            let value = props.get(key).unwrap_or_default().trim();
            if !value.eq_ignore_ascii_case("kafka") {
                errors.push(props.invalid(
                    key,
                    format!(
                        "distributed workers keep offsets in a Kafka topic (offset.storage.topic), which \
                         every worker of the group reads and each task's transactional producer commits \
                         to; offset.storage={value} is for `ferry standalone` (remove the key, or set \
                         offset.storage=kafka)"
                    ),
                ));
            }
            continue;
        }
        if let Some(what) = ferry_plugin::not_implemented_worker_key(key) {
            errors.push(props.not_implemented(key, what));
            continue;
        }
        let hint = match STANDALONE_ONLY.iter().find(|(k, _)| *k == key) {
            Some((_, instead)) => format!("it is a standalone worker key; {instead}"),
            None => hints.hint(key, plain_keys()),
        };
        errors.push(ConfigError::UnknownKey {
            path: props.path().to_path_buf(),
            key: key.to_owned(),
            line: props.line_of(key),
            hint,
        });
    }
}

/// A required string: missing and empty are both reported.
fn required(props: &Properties, key: &str, errors: &mut Vec<ConfigError>) -> Option<String> {
    match props.get(key).map(str::trim) {
        None => {
            let hint = REQUIRED
                .iter()
                .find(|(k, _)| *k == key)
                .map_or("", |(_, hint)| hint);
            errors.push(ConfigError::Missing {
                path: props.path().to_path_buf(),
                key: key.to_owned(),
                hint: hint.to_owned(),
            });
            None
        }
        Some("") => {
            errors.push(props.invalid(key, "must not be empty"));
            None
        }
        Some(value) => Some(value.to_owned()),
    }
}

/// The config, offset and status topics, each required, valid and different from the others.
fn internal_topics(
    props: &Properties,
    errors: &mut Vec<ConfigError>,
) -> (InternalTopic, InternalTopic, InternalTopic) {
    let mut topic = |name_key: &str, partitions: Option<(&str, i32)>, rf_key: &str| {
        let name = required(props, name_key, errors).unwrap_or_default();
        if !name.is_empty() && !valid_topic(&name) {
            errors.push(props.invalid(
                name_key,
                "must be a Kafka topic name: 1 to 249 characters of a-z, A-Z, 0-9, '.', '_', '-', and \
                 not \".\" or \"..\"",
            ));
        }
        let partitions = match partitions {
            // Kafka Connect's config topic has exactly one partition, and no key to change it.
            None => 1,
            Some((key, default)) => int(
                props,
                key,
                default,
                errors,
                |n: i32| n >= 1 || n == -1,
                &format!(
                    "must be a whole number of partitions, 1 or more, or -1 for the broker's default (default {default})"
                ),
            ),
        };
        let replication_factor = int(
            props,
            rf_key,
            3,
            errors,
            |n: i16| n >= 1 || n == -1,
            "must be a whole number of replicas, 1 or more, or -1 for the broker's default (default 3)",
        );
        InternalTopic {
            name,
            partitions,
            replication_factor,
        }
    };
    let config = topic(
        CONFIG_STORAGE_TOPIC,
        None,
        CONFIG_STORAGE_REPLICATION_FACTOR,
    );
    let offset = topic(
        OFFSET_STORAGE_TOPIC,
        Some((OFFSET_STORAGE_PARTITIONS, 25)),
        OFFSET_STORAGE_REPLICATION_FACTOR,
    );
    let status = topic(
        STATUS_STORAGE_TOPIC,
        Some((STATUS_STORAGE_PARTITIONS, 5)),
        STATUS_STORAGE_REPLICATION_FACTOR,
    );
    // One topic for two stores would mix their records (and compaction would drop one's keys).
    let named = [
        (CONFIG_STORAGE_TOPIC, &config.name),
        (OFFSET_STORAGE_TOPIC, &offset.name),
        (STATUS_STORAGE_TOPIC, &status.name),
    ];
    for (i, (key, name)) in named.iter().enumerate() {
        if let Some((other, _)) = named[..i].iter().find(|(_, n)| !n.is_empty() && n == name) {
            errors.push(props.invalid(
                key,
                format!("is the same topic as {other}; each internal topic must be its own"),
            ));
        }
    }
    (config, offset, status)
}

/// An integer setting, as Java parses one (trimmed digits with an optional sign).
fn int<T: std::str::FromStr + Copy>(
    props: &Properties,
    key: &str,
    default: T,
    errors: &mut Vec<ConfigError>,
    accept: impl Fn(T) -> bool,
    message: &str,
) -> T {
    let Some(text) = props.get(key) else {
        return default;
    };
    match text.trim().parse::<T>() {
        Ok(n) if accept(n) => n,
        _ => {
            errors.push(props.invalid(key, message));
            default
        }
    }
}

/// A duration in milliseconds held in a Java `int` (the group settings), at least `min`.
fn int_ms(
    props: &Properties,
    key: &str,
    default: i32,
    min: i32,
    errors: &mut Vec<ConfigError>,
) -> Duration {
    let message = format!(
        "must be a whole number of milliseconds from {min} to {} (default {default})",
        i32::MAX
    );
    let ms = int(props, key, default, errors, |n: i32| n >= min, &message);
    Duration::from_millis(u64::try_from(ms).unwrap_or_default())
}

/// The advertised listener (its index), host and port (the worker id), from `rest.advertised.*` or
/// the advertised listener.
fn advertised(
    props: &Properties,
    rest: &RestConfig,
    errors: &mut Vec<ConfigError>,
) -> (usize, String, Option<u16>) {
    let wanted = match props.get(REST_ADVERTISED_LISTENER).map(str::trim) {
        None => None,
        Some(p) if p.eq_ignore_ascii_case("http") => Some(false),
        Some(p) if p.eq_ignore_ascii_case("https") => Some(true),
        Some(_) => {
            errors.push(props.invalid(
                REST_ADVERTISED_LISTENER,
                "must be http or https (the protocol of the listener other workers forward to)",
            ));
            None
        }
    };
    let index = match wanted {
        Some(https) => match rest.listeners.iter().position(|l| l.https == https) {
            Some(i) => i,
            None => {
                errors.push(props.invalid(
                    REST_ADVERTISED_LISTENER,
                    format!(
                        "no listener is {}://; add one to listeners or change {REST_ADVERTISED_LISTENER}",
                        if https { "https" } else { "http" }
                    ),
                ));
                0
            }
        },
        // Kafka Connect advertises http when any listener is http.
        None => rest.listeners.iter().position(|l| !l.https).unwrap_or(0),
    };
    let listener = rest.listeners.get(index);
    let host = match props.get(REST_ADVERTISED_HOST_NAME).map(str::trim) {
        Some("") => {
            errors.push(props.invalid(
                REST_ADVERTISED_HOST_NAME,
                "must not be empty; remove it to advertise the listener's host",
            ));
            String::new()
        }
        Some(host) => host.trim_matches(['[', ']']).to_owned(),
        None => {
            let host = listener.map(|l| l.host.clone()).unwrap_or_default();
            // Kafka Connect would advertise the machine's name; Ferry asks rather than guess it.
            if matches!(host.as_str(), "0.0.0.0" | "::" | "") {
                errors.push(props.invalid(
                    LISTENERS,
                    format!(
                        "binds every interface ({host}), which is no address other workers can reach; \
                         set {REST_ADVERTISED_HOST_NAME} to this worker's host name (it also makes the \
                         worker id)"
                    ),
                ));
            }
            host
        }
    };
    let port = match props.get(REST_ADVERTISED_PORT).map(str::trim) {
        Some(text) => match text.parse::<u16>() {
            Ok(port) if port > 0 => Some(port),
            _ => {
                errors.push(props.invalid(
                    REST_ADVERTISED_PORT,
                    "must be a port number, 1 to 65535; remove it to advertise the listener's port",
                ));
                None
            }
        },
        None => listener.map(|l| l.port).filter(|&port| port > 0),
    };
    (index, host, port)
}

/// The client settings: top-level security settings for every client, then each prefix's own.
fn client_settings(
    props: &Properties,
    errors: &mut Vec<ConfigError>,
) -> (
    ClientOverrides,
    ClientOverrides,
    ClientOverrides,
    ClientOverrides,
) {
    let mut all = ClientOverrides::default();
    let mut by_prefix = [
        ClientOverrides::default(),
        ClientOverrides::default(),
        ClientOverrides::default(),
    ];
    for key in props.keys() {
        let value = props.get(key).unwrap_or_default().trim();
        let (settings, name) = if SECURITY_PREFIXES.iter().any(|p| key.starts_with(p)) {
            (&mut all, key)
        } else if let Some(i) = CLIENT_ROLE_PREFIXES.iter().position(|p| key.starts_with(p)) {
            let name = &key[CLIENT_ROLE_PREFIXES[i].len()..];
            if name.is_empty() {
                errors.push(props.invalid(
                    key,
                    format!("names no client setting (e.g. {key}client.id=worker-1)"),
                ));
                continue;
            }
            (&mut by_prefix[i], name)
        } else {
            continue;
        };
        // ferry-kafka declares which librdkafka settings are secret; their values are never shown.
        if is_sensitive_client_key(name) {
            settings.set_secret(name, value);
        } else {
            settings.set(name, value);
        }
    }
    let [producer, consumer, admin] = by_prefix;
    (all, producer, consumer, admin)
}
