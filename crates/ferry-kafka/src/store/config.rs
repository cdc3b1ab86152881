//! The Kafka offset store's configuration, and the librdkafka settings built from it.

use std::fmt;
use std::time::Duration;

use rdkafka::ClientConfig;

/// Configuration of a [`KafkaOffsetStore`](super::KafkaOffsetStore): Kafka Connect's
/// `offset.storage=kafka` worker settings.
#[derive(Clone, PartialEq, Eq)]
pub struct KafkaOffsetStoreConfig {
    /// `bootstrap.servers`: the brokers to contact first (`host:port,host:port`).
    pub bootstrap_servers: String,
    /// `offset.storage.topic` (required): the compacted topic that holds the offsets.
    pub topic: String,
    /// `offset.storage.partitions` (default 25): the partition count used when the topic is created.
    pub partitions: i32,
    /// `offset.storage.replication.factor` (default 3; `-1` = the broker's default): used when the topic
    /// is created.
    pub replication_factor: i16,
    /// librdkafka properties applied to the store's admin client, producer and consumer (security
    /// settings, timeouts such as `message.timeout.ms`). Properties the store relies on for
    /// correctness (`partitioner`, `acks`, `enable.idempotence`, …) are refused.
    pub client_overrides: Vec<(String, String)>,
    /// How long opening the topic, and each read of the topic to its end, may wait for the broker
    /// without progress before failing (default 60 s).
    pub timeout: Duration,
}

/// Kafka Connect's default `offset.storage.partitions`.
pub const DEFAULT_PARTITIONS: i32 = 25;
/// Kafka Connect's default `offset.storage.replication.factor`.
pub const DEFAULT_REPLICATION_FACTOR: i16 = 3;

/// Client properties the store sets itself, because its guarantees depend on them.
const RESERVED: &[(&str, &str)] = &[
    ("bootstrap.servers", "set bootstrap_servers instead"),
    ("metadata.broker.list", "set bootstrap_servers instead"),
    (
        "partitioner",
        "the store uses murmur2_random, Kafka's Java partitioner, so Ferry and Kafka Connect put a key on \
         the same partition",
    ),
    (
        "acks",
        "offsets are only acknowledged once every in-sync replica has them (acks=all)",
    ),
    (
        "request.required.acks",
        "offsets are only acknowledged once every in-sync replica has them (acks=all)",
    ),
    (
        "enable.idempotence",
        "the producer must be idempotent so retries neither duplicate nor reorder offsets",
    ),
    (
        "group.id",
        "the store's consumer reads by assignment and never joins or commits to a group",
    ),
    ("enable.auto.commit", "the store's consumer never commits"),
    (
        "transactional.id",
        "the store does not write transactionally",
    ),
    (
        "isolation.level",
        "the store reads committed offsets only, as Kafka Connect does",
    ),
    (
        "allow.auto.create.topics",
        "the offsets topic must be created compacted, never by a produce or a lookup",
    ),
];

/// An offset store setting that is invalid, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StoreConfigError {
    #[error("bootstrap.servers is empty; set it to the brokers' host:port list")]
    NoBootstrapServers,
    #[error(
        "offset.storage.topic is required; set it to the name of the offsets topic \
                        (Kafka Connect's default is connect-offsets)"
    )]
    NoTopic,
    #[error("offset.storage.partitions is {0}; it must be at least 1")]
    Partitions(i32),
    #[error(
        "offset.storage.replication.factor is {0}; it must be at least 1, or -1 for the broker's default"
    )]
    ReplicationFactor(i16),
    #[error("the offset store timeout is zero; give the broker at least a few seconds")]
    ZeroTimeout,
    /// A client property the store sets itself.
    #[error("client property {key} cannot be overridden for the offset store: {why}")]
    Reserved { key: String, why: &'static str },
}

impl KafkaOffsetStoreConfig {
    /// A configuration with Kafka Connect's defaults (25 partitions, replication factor 3).
    pub fn new(bootstrap_servers: impl Into<String>, topic: impl Into<String>) -> Self {
        Self {
            bootstrap_servers: bootstrap_servers.into(),
            topic: topic.into(),
            partitions: DEFAULT_PARTITIONS,
            replication_factor: DEFAULT_REPLICATION_FACTOR,
            client_overrides: Vec::new(),
            timeout: Duration::from_secs(60),
        }
    }

    /// Checks the settings before any client is created. Returns what is wrong and how to fix it.
    pub(crate) fn validate(&self) -> Result<(), StoreConfigError> {
        if self.bootstrap_servers.trim().is_empty() {
            return Err(StoreConfigError::NoBootstrapServers);
        }
        if self.topic.trim().is_empty() {
            return Err(StoreConfigError::NoTopic);
        }
        if self.partitions < 1 {
            return Err(StoreConfigError::Partitions(self.partitions));
        }
        if self.replication_factor < 1 && self.replication_factor != -1 {
            return Err(StoreConfigError::ReplicationFactor(self.replication_factor));
        }
        if self.timeout.is_zero() {
            return Err(StoreConfigError::ZeroTimeout);
        }
        for (key, _) in &self.client_overrides {
            let normalized = key.trim().to_ascii_lowercase();
            if let Some((_, why)) = RESERVED.iter().find(|(k, _)| *k == normalized) {
                return Err(StoreConfigError::Reserved {
                    key: key.clone(),
                    why,
                });
            }
        }
        Ok(())
    }

    fn base(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap_servers);
        config.set("client.id", format!("ferry-offsets-{}", self.topic));
        for (key, value) in &self.client_overrides {
            config.set(key.trim(), value);
        }
        crate::settings::client_settings(&mut config, &self.client_overrides);
        config
    }

    /// Settings for the admin client.
    pub(crate) fn admin(&self) -> ClientConfig {
        let mut config = self.base();
        config.set("allow.auto.create.topics", "false");
        config
    }

    /// Settings for the producer: every write acknowledged by all in-sync replicas, idempotent, and
    /// partitioned like Kafka's Java client.
    pub(crate) fn producer(&self) -> ClientConfig {
        let mut config = self.base();
        config
            .set("acks", "all")
            .set("enable.idempotence", "true")
            // librdkafka's default partitioner hashes keys with CRC32; Kafka's Java client (and so Kafka
            // Connect) with murmur2. On a compacted topic a key must always land on the same partition,
            // whoever writes it.
            .set("partitioner", "murmur2_random")
            // A produce must never create the topic with the broker's default (delete) policy.
            .set("allow.auto.create.topics", "false");
        config
    }

    /// Settings for the consumer: assignment only (no group, no commits), committed data only, and an
    /// event at the end of each partition (see `log.rs`).
    pub(crate) fn consumer(&self) -> ClientConfig {
        let mut config = self.base();
        config
            // librdkafka needs a group id for assign(); the consumer never joins the group (no
            // subscribe) and never commits, so the name is only a label.
            .set("group.id", "ferry-offset-store-reader")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("isolation.level", "read_committed")
            .set("allow.auto.create.topics", "false")
            .set("enable.partition.eof", "true");
        crate::settings::reader_settings(&mut config, &self.client_overrides);
        config
    }
}

/// Whether an override's value is hidden: a client key declared sensitive
/// ([`crate::secret::is_sensitive_client_key`]); nothing is guessed from a key's name.
fn is_secret(key: &str) -> bool {
    crate::secret::is_sensitive_client_key(key)
}

impl fmt::Debug for KafkaOffsetStoreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let overrides: Vec<(&str, &str)> = self
            .client_overrides
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str(),
                    if is_secret(k) {
                        "<redacted>"
                    } else {
                        v.as_str()
                    },
                )
            })
            .collect();
        f.debug_struct("KafkaOffsetStoreConfig")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("topic", &self.topic)
            .field("partitions", &self.partitions)
            .field("replication_factor", &self.replication_factor)
            .field("client_overrides", &overrides)
            .field("timeout", &self.timeout)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> KafkaOffsetStoreConfig {
        KafkaOffsetStoreConfig::new("127.0.0.1:9092", "connect-offsets")
    }

    #[test]
    fn defaults_are_kafka_connects() {
        let c = config();
        assert_eq!((c.partitions, c.replication_factor), (25, 3));
        assert!(c.client_overrides.is_empty());
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn invalid_settings_are_refused_with_what_to_do() {
        let mut c = config();
        c.topic = " ".to_owned();
        assert!(
            c.validate()
                .expect_err("must be refused")
                .to_string()
                .contains("offset.storage.topic is required")
        );
        let mut c = config();
        c.partitions = 0;
        assert!(
            c.validate()
                .expect_err("must be refused")
                .to_string()
                .contains("offset.storage.partitions")
        );
        let mut c = config();
        c.replication_factor = 0;
        assert!(
            c.validate()
                .expect_err("must be refused")
                .to_string()
                .contains("-1 for the broker's default")
        );
        c.replication_factor = -1;
        assert_eq!(c.validate(), Ok(()));
        let mut c = config();
        c.bootstrap_servers.clear();
        assert!(
            c.validate()
                .expect_err("must be refused")
                .to_string()
                .contains("bootstrap.servers")
        );
    }

    #[test]
    fn overrides_of_correctness_settings_are_refused() {
        for key in [
            "partitioner",
            " ACKS",
            "enable.idempotence",
            "group.id",
            "bootstrap.servers",
        ] {
            let mut c = config();
            c.client_overrides.push((key.to_owned(), "x".to_owned()));
            let err = c.validate().expect_err("must be refused");
            assert!(
                err.to_string().contains("cannot be overridden"),
                "{key}: {err}"
            );
        }
        let mut c = config();
        c.client_overrides
            .push(("message.timeout.ms".to_owned(), "5000".to_owned()));
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn client_settings_carry_the_guarantees_and_the_overrides() {
        let mut c = config();
        c.client_overrides
            .push(("message.timeout.ms".to_owned(), "5000".to_owned()));
        let p = c.producer();
        assert_eq!(p.get("partitioner"), Some("murmur2_random"));
        assert_eq!(p.get("acks"), Some("all"));
        assert_eq!(p.get("enable.idempotence"), Some("true"));
        assert_eq!(p.get("message.timeout.ms"), Some("5000"));
        assert_eq!(p.get("bootstrap.servers"), Some("127.0.0.1:9092"));
        let k = c.consumer();
        assert_eq!(k.get("group.id"), Some("ferry-offset-store-reader"));
        assert_eq!(k.get("enable.auto.commit"), Some("false"));
        assert_eq!(k.get("isolation.level"), Some("read_committed"));
        assert_eq!(k.get("fetch.queue.backoff.ms"), Some("10"));
        assert_eq!(p.get("enable.sparse.connections"), Some("false"));
        assert_eq!(k.get("enable.sparse.connections"), Some("false"));
        assert_eq!(c.admin().get("enable.sparse.connections"), Some("false"));
    }

    /// A user's own connection setting and fetch backoff are kept: Ferry's are only defaults.
    #[test]
    fn client_overrides_win_over_ferrys_client_and_reader_settings() {
        let mut c = config();
        c.client_overrides
            .push(("enable.sparse.connections".to_owned(), "true".to_owned()));
        c.client_overrides
            .push(("fetch.queue.backoff.ms".to_owned(), "250".to_owned()));
        assert_eq!(c.producer().get("enable.sparse.connections"), Some("true"));
        assert_eq!(c.consumer().get("enable.sparse.connections"), Some("true"));
        assert_eq!(c.admin().get("enable.sparse.connections"), Some("true"));
        assert_eq!(c.consumer().get("fetch.queue.backoff.ms"), Some("250"));
    }

    #[test]
    fn debug_hides_declared_sensitive_keys_whatever_their_name() {
        let mut c = config();
        // librdkafka declares these sensitive though their names say neither password nor secret.
        c.client_overrides
            .push(("sasl.username".to_owned(), "alice-user".to_owned()));
        c.client_overrides
            .push(("ssl.key.location".to_owned(), "/etc/keys/k.pem".to_owned()));
        c.client_overrides.push((
            "ssl.endpoint.identification.algorithm".to_owned(),
            "https".to_owned(),
        ));
        let text = format!("{c:?}");
        assert!(
            !text.contains("alice-user") && !text.contains("/etc/keys"),
            "{text}"
        );
        assert!(text.contains("\"https\""), "{text}");
    }

    #[test]
    fn debug_redacts_secrets() {
        let mut c = config();
        c.client_overrides
            .push(("sasl.password".to_owned(), "hunter2".to_owned()));
        c.client_overrides
            .push(("sasl.jaas.config".to_owned(), "secret-jaas".to_owned()));
        c.client_overrides
            .push(("security.protocol".to_owned(), "SASL_SSL".to_owned()));
        let text = format!("{c:?}");
        assert!(
            !text.contains("hunter2") && !text.contains("secret-jaas"),
            "{text}"
        );
        assert!(
            text.contains("SASL_SSL") && text.contains("<redacted>"),
            "{text}"
        );
    }
}
