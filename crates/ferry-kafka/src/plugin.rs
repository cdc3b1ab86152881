//! Kafka as a worker backend: `offset.storage=kafka` ([`KafkaStorePlugin`]) and `sink=kafka`
//! ([`KafkaSinkPlugin`]). Each reads its own worker keys; the runtime knows neither.

use std::any::Any;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use async_trait::async_trait;
use ferry_api::{Config, ConfigIssue, ConfigKey, ConfigType, Importance};
use ferry_offsets::{OffsetBackingStore, StoreError};
use ferry_plugin::{
    ClientOverrides, ConfigError, ConverterSpec, DynSinkSpec, DynStoreSpec, OffsetStorePlugin,
    OpenMode, PRODUCER_PREFIX, Properties, RecordSink, SinkError, SinkErrorKind, SinkPlugin,
    SinkProvider, TaskSinkContext, TransactionalOffsets, TransactionalSink, TransactionsError,
};

use crate::connector_keys::{
    CONNECTOR_CLIENT_CONFIG_OVERRIDE_POLICY, OVERRIDE_POLICY_VALUES, OverridePolicy,
    TOPIC_CREATION_ENABLE, TopicCreation, check_producer_overrides, is_kafka_connector_key,
    producer_overrides,
};
use crate::secret::is_sensitive_client_key;
use crate::sink::WeakSink;
use crate::topics::TopicCreator;
use crate::transactional::TransactionalKafkaSink;
use crate::{
    DEFAULT_PARTITIONS, DEFAULT_REPLICATION_FACTOR, KafkaOffsetStore, KafkaOffsetStoreConfig,
    KafkaSink, KafkaSinkConfig, RecordConverters,
};

/// `bootstrap.servers`: the Kafka cluster records (and, with `offset.storage=kafka`, offsets) go to.
pub const BOOTSTRAP_SERVERS: &str = "bootstrap.servers";
/// `offset.storage.topic`: the compacted topic holding offsets; required with `offset.storage=kafka`.
pub const OFFSET_STORAGE_TOPIC: &str = "offset.storage.topic";
/// `offset.storage.partitions`: partitions of the offsets topic when Ferry creates it (default 25).
pub const OFFSET_STORAGE_PARTITIONS: &str = "offset.storage.partitions";
/// `offset.storage.replication.factor`: replication of the offsets topic when Ferry creates it
/// (default 3; -1: the broker's default).
pub const OFFSET_STORAGE_REPLICATION_FACTOR: &str = "offset.storage.replication.factor";

/// The runtime's offsets-file key, which has no effect with this store.
const OFFSET_STORAGE_FILE: &str = "offset.storage.file.filename";

/// Worker-level Kafka client settings (for the Kafka offset store's clients, as Kafka Connect uses the
/// worker's top-level settings for its internal clients): keys starting with these.
const CLIENT_SECURITY_PREFIXES: &[&str] = &["security.", "sasl.", "ssl."];

/// `offset.storage=kafka`: a compacted Kafka topic, byte-compatible with Kafka Connect's offsets topic.
#[derive(Debug, Clone, Copy, Default)]
pub struct KafkaStorePlugin;

impl OffsetStorePlugin for KafkaStorePlugin {
    fn name(&self) -> &'static str {
        "kafka"
    }

    fn description(&self) -> &'static str {
        "a Kafka topic (offset.storage=kafka)"
    }

    fn hint(&self) -> &'static str {
        "in Kafka with offset.storage=kafka and offset.storage.topic"
    }

    fn accepted(&self) -> &'static str {
        "kafka (offset.storage.topic)"
    }

    fn keys(&self) -> Vec<ConfigKey> {
        vec![
            ConfigKey::required(
                OFFSET_STORAGE_TOPIC,
                "the compacted topic holding offsets, e.g. connect-offsets",
            ),
            ConfigKey::optional(
                OFFSET_STORAGE_PARTITIONS,
                Some("25"),
                "partitions of the offsets topic when Ferry creates it",
            )
            .of_type(ConfigType::Int)
            .importance(Importance::Low),
            ConfigKey::optional(
                OFFSET_STORAGE_REPLICATION_FACTOR,
                Some("3"),
                "replication of the offsets topic when Ferry creates it (-1: the broker's default)",
            )
            .of_type(ConfigType::Int)
            .importance(Importance::Low),
        ]
    }

    fn prefixes(&self) -> &'static [&'static str] {
        CLIENT_SECURITY_PREFIXES
    }

    fn parse(
        &self,
        props: &Properties,
        _alternatives: &[&'static str],
        errors: &mut Vec<ConfigError>,
    ) -> Option<Arc<dyn DynStoreSpec>> {
        if props.get(OFFSET_STORAGE_FILE).is_some() {
            tracing::warn!(
                file = %props.path().display(),
                key = OFFSET_STORAGE_FILE,
                "{}: {OFFSET_STORAGE_FILE} has no effect with offset.storage=kafka; ignored",
                props.location(OFFSET_STORAGE_FILE)
            );
        }
        // An empty bootstrap.servers is reported by the sink plugin's check, whatever the sink.
        let bootstrap_servers = bootstrap_servers(props);
        if props.get(BOOTSTRAP_SERVERS).is_none() {
            errors.push(props.invalid(
                "offset.storage",
                "offset.storage=kafka needs bootstrap.servers (e.g. bootstrap.servers=localhost:9092)",
            ));
        }
        let topic = match props.get(OFFSET_STORAGE_TOPIC).map(str::trim) {
            None => {
                errors.push(ConfigError::Missing {
                    path: props.path().to_path_buf(),
                    key: OFFSET_STORAGE_TOPIC.to_owned(),
                    hint: "offset.storage=kafka needs the topic that holds the offsets, e.g. \
                           offset.storage.topic=connect-offsets (created compacted if missing)"
                        .to_owned(),
                });
                None
            }
            Some(topic) if !valid_topic(topic) => {
                errors.push(props.invalid(
                    OFFSET_STORAGE_TOPIC,
                    "must be a Kafka topic name: 1 to 249 characters of a-z, A-Z, 0-9, '.', '_', '-', \
                     and not \".\" or \"..\"",
                ));
                None
            }
            Some(topic) => Some(topic.to_owned()),
        };
        let partitions = int_setting(
            props,
            OFFSET_STORAGE_PARTITIONS,
            DEFAULT_PARTITIONS,
            |n| n >= 1 || n == -1,
            "must be a whole number of partitions, 1 or more, or -1 for the broker's default (default 25)",
            errors,
        );
        let replication_factor = int_setting(
            props,
            OFFSET_STORAGE_REPLICATION_FACTOR,
            DEFAULT_REPLICATION_FACTOR,
            |n| n >= 1 || n == -1,
            "must be a whole number of replicas, 1 or more, or -1 for the broker's default (default 3)",
            errors,
        );
        let mut client_overrides = ClientOverrides::default();
        for key in props
            .keys()
            .filter(|k| CLIENT_SECURITY_PREFIXES.iter().any(|p| k.starts_with(p)))
        {
            let value = props.get(key).unwrap_or_default().trim();
            if is_sensitive_client_key(key) {
                client_overrides.set_secret(key, value);
            } else {
                client_overrides.set(key, value);
            }
        }
        Some(Arc::new(KafkaStoreSpec {
            bootstrap_servers: bootstrap_servers?,
            topic: topic?,
            partitions,
            replication_factor,
            client_overrides,
        }))
    }
}

/// The settings of `offset.storage=kafka`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaStoreSpec {
    /// `bootstrap.servers`.
    pub bootstrap_servers: String,
    /// `offset.storage.topic` (required).
    pub topic: String,
    /// `offset.storage.partitions` (default 25): used when the topic is created.
    pub partitions: i32,
    /// `offset.storage.replication.factor` (default 3; -1: the broker's default): used when the topic
    /// is created.
    pub replication_factor: i16,
    /// The worker's Kafka client security settings (`security.protocol`, `sasl.*`, `ssl.*`), passed to
    /// the store's clients as they are.
    pub client_overrides: ClientOverrides,
}

impl fmt::Display for KafkaStoreSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kafka topic {} on {}",
            self.topic, self.bootstrap_servers
        )
    }
}

#[async_trait]
impl DynStoreSpec for KafkaStoreSpec {
    fn plugin(&self) -> &'static str {
        "kafka"
    }

    /// The offsets topic, created compacted when missing and read to its end.
    async fn open(&self, _mode: OpenMode) -> Result<Arc<dyn OffsetBackingStore>, StoreError> {
        let mut config =
            KafkaOffsetStoreConfig::new(self.bootstrap_servers.clone(), self.topic.clone());
        config.partitions = self.partitions;
        config.replication_factor = self.replication_factor;
        config.client_overrides = self.client_overrides.to_vec();
        Ok(Arc::new(KafkaOffsetStore::open(config).await?))
    }

    fn exclusive(&self) -> bool {
        false
    }

    fn atomic_batches(&self) -> bool {
        false
    }

    fn transactional_offsets(&self) -> Option<TransactionalOffsets> {
        Some(TransactionalOffsets {
            cluster: self.bootstrap_servers.clone(),
            topic: self.topic.clone(),
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Exactly-once delivery with the offsets topic on another cluster than the records: a transaction
/// writes only to its producer's cluster.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "exactly-once delivery writes each task's offsets in its records' transactions, so the \
     offsets topic must be on the records' cluster: the sink's bootstrap.servers are {sink} but \
     the offset store's are {offsets}"
)]
struct OffsetsElsewhere {
    /// The sink's `bootstrap.servers`.
    sink: String,
    /// The offset store's cluster.
    offsets: String,
}

/// The brokers of a `bootstrap.servers` list, for comparing two lists naming one cluster: trimmed,
/// lowercased, sorted, without duplicates.
fn brokers(list: &str) -> std::collections::BTreeSet<String> {
    list.split(',')
        .map(|b| b.trim().to_ascii_lowercase())
        .filter(|b| !b.is_empty())
        .collect()
}

/// `sink=kafka` (the default when `bootstrap.servers` is set): a Kafka producer, records acknowledged
/// on the broker's acknowledgement; keys and values made bytes by the converters.
#[derive(Debug, Clone, Copy, Default)]
pub struct KafkaSinkPlugin;

impl SinkPlugin for KafkaSinkPlugin {
    fn name(&self) -> &'static str {
        "kafka"
    }

    fn accepts(&self, value: &str) -> bool {
        value == "kafka"
    }

    fn accepted(&self) -> &'static str {
        "kafka (needs bootstrap.servers)"
    }

    fn keys(&self) -> Vec<ConfigKey> {
        vec![
            ConfigKey::optional(
                BOOTSTRAP_SERVERS,
                None,
                "the Kafka cluster records go to, e.g. localhost:9092",
            )
            .of_type(ConfigType::List)
            .importance(Importance::High),
            ConfigKey::optional(
                TOPIC_CREATION_ENABLE,
                Some("true"),
                "whether connectors with topic.creation.* settings have their missing topics created",
            )
            .of_type(ConfigType::Boolean)
            .importance(Importance::Low),
            ConfigKey::optional(
                CONNECTOR_CLIENT_CONFIG_OVERRIDE_POLICY,
                Some("All"),
                "which producer.override.* settings connectors may set: None, Principal or All",
            )
            .importance(Importance::Medium),
        ]
    }

    fn prefixes(&self) -> &'static [&'static str] {
        &[PRODUCER_PREFIX]
    }

    fn check(&self, props: &Properties, errors: &mut Vec<ConfigError>) {
        for key in props.keys().filter(|k| *k == PRODUCER_PREFIX) {
            errors
                .push(props.invalid(key, "names no producer setting (e.g. producer.linger.ms=5)"));
        }
        if props.get(BOOTSTRAP_SERVERS).map(str::trim) == Some("") {
            errors.push(props.invalid(
                BOOTSTRAP_SERVERS,
                "must list at least one broker, e.g. localhost:9092",
            ));
        }
    }

    fn is_default_for(&self, props: &Properties) -> bool {
        bootstrap_servers(props).is_some()
    }

    fn parse(
        &self,
        _value: Option<&str>,
        props: &Properties,
        converters: (ConverterSpec, ConverterSpec),
        errors: &mut Vec<ConfigError>,
    ) -> Option<Arc<dyn DynSinkSpec>> {
        let Some(bootstrap_servers) = bootstrap_servers(props) else {
            if props.get(BOOTSTRAP_SERVERS).is_none() {
                errors.push(props.invalid(
                    "sink",
                    "sink=kafka needs bootstrap.servers (e.g. bootstrap.servers=localhost:9092)",
                ));
            }
            return None;
        };
        let mut producer_overrides = ClientOverrides::default();
        for key in props.keys() {
            if let Some(setting) = key.strip_prefix(PRODUCER_PREFIX)
                && !setting.is_empty()
            {
                let value = props.get(key).unwrap_or_default().trim();
                if is_sensitive_client_key(setting) {
                    producer_overrides.set_secret(setting, value);
                } else {
                    producer_overrides.set(setting, value);
                }
            }
        }
        let (topic_creation_enable, override_policy) = connector_settings(props, errors);
        Some(Arc::new(KafkaSinkSpec {
            bootstrap_servers,
            producer_overrides,
            key_converter: converters.0,
            value_converter: converters.1,
            topic_creation_enable,
            override_policy,
            offsets_topic: None,
        }))
    }

    fn warn_unused(&self, props: &Properties, chosen: &dyn DynSinkSpec) {
        for key in props.keys().filter(|k| {
            k.starts_with(PRODUCER_PREFIX)
                || *k == TOPIC_CREATION_ENABLE
                || *k == CONNECTOR_CLIENT_CONFIG_OVERRIDE_POLICY
        }) {
            tracing::warn!(
                file = %props.path().display(),
                key = %key,
                "{}: {key} has no effect with sink={chosen} (producer settings apply to the Kafka sink); ignored",
                props.location(key)
            );
        }
    }
}

/// The settings of `sink=kafka`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaSinkSpec {
    /// `bootstrap.servers`.
    pub bootstrap_servers: String,
    /// `producer.*` with the prefix removed (`producer.linger.ms=5` → `linger.ms=5`).
    pub producer_overrides: ClientOverrides,
    /// The worker's `key.converter`, for connectors that do not set their own.
    pub key_converter: ConverterSpec,
    /// The worker's `value.converter`, for connectors that do not set their own.
    pub value_converter: ConverterSpec,
    /// `topic.creation.enable` (default true): connectors with `topic.creation.*` settings have
    /// their missing topics created.
    pub topic_creation_enable: bool,
    /// `connector.client.config.override.policy` (default `All`): which `producer.override.*`
    /// settings connectors may set.
    pub override_policy: OverridePolicy,
    /// The worker's offsets topic (`offset.storage.topic`), where exactly-once tasks write their
    /// offsets in their records' transactions; `None`: this sink opens no transactional sinks.
    pub offsets_topic: Option<String>,
}

/// The worker's `topic.creation.enable` and `connector.client.config.override.policy` (Kafka
/// Connect's worker keys governing the connector keys the Kafka sink reads), with their defaults.
/// Invalid values are pushed to `errors`.
pub fn connector_settings(
    props: &Properties,
    errors: &mut Vec<ConfigError>,
) -> (bool, OverridePolicy) {
    let enable = match props
        .get(TOPIC_CREATION_ENABLE)
        .map(|v| v.trim().to_ascii_lowercase())
        .as_deref()
    {
        None | Some("true") => true,
        Some("false") => false,
        Some(_) => {
            errors.push(props.invalid(
                TOPIC_CREATION_ENABLE,
                "accepted values: true (default), false",
            ));
            true
        }
    };
    let policy = match props.get(CONNECTOR_CLIENT_CONFIG_OVERRIDE_POLICY) {
        None => OverridePolicy::default(),
        Some(value) => OverridePolicy::parse(value).unwrap_or_else(|| {
            errors.push(props.invalid(
                CONNECTOR_CLIENT_CONFIG_OVERRIDE_POLICY,
                format!("accepted values: {OVERRIDE_POLICY_VALUES}"),
            ));
            OverridePolicy::default()
        }),
    };
    (enable, policy)
}

impl fmt::Display for KafkaSinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kafka {}", self.bootstrap_servers)
    }
}

#[async_trait]
impl DynSinkSpec for KafkaSinkSpec {
    fn plugin(&self) -> &'static str {
        "kafka"
    }

    /// Creates the one producer the tasks of connectors without `producer.override.*` share.
    async fn start(&self) -> Result<Arc<dyn SinkProvider>, SinkError> {
        let base = KafkaSinkConfig {
            bootstrap_servers: self.bootstrap_servers.clone(),
            producer_overrides: self.producer_overrides.clone(),
            converters: RecordConverters::new(self.key_converter, self.value_converter),
        };
        let sink = KafkaSink::new(&base)?;
        Ok(Arc::new(KafkaSinkProvider {
            sink,
            base,
            key_converter: self.key_converter,
            value_converter: self.value_converter,
            topic_creation_enable: self.topic_creation_enable,
            override_policy: self.override_policy,
            offsets_topic: self.offsets_topic.clone(),
            producers: Mutex::default(),
            creators: Mutex::default(),
            cluster_id: std::sync::OnceLock::new(),
        }))
    }

    fn uses_converters(&self) -> bool {
        true
    }

    /// The same sink, opening a transactional sink per exactly-once task that writes its offsets to
    /// `offsets.topic`. A transaction writes only to its producer's cluster, so the offsets topic
    /// must be on the records' cluster: the two `bootstrap.servers` lists must name the same brokers.
    fn with_transactional_offsets(
        &self,
        offsets: &TransactionalOffsets,
    ) -> Result<Arc<dyn DynSinkSpec>, TransactionsError> {
        if brokers(&offsets.cluster) != brokers(&self.bootstrap_servers) {
            return Err(TransactionsError::Refused(Box::new(OffsetsElsewhere {
                sink: self.bootstrap_servers.clone(),
                offsets: offsets.cluster.clone(),
            })));
        }
        Ok(Arc::new(Self {
            offsets_topic: Some(offsets.topic.clone()),
            ..self.clone()
        }))
    }

    fn handles_connector_key(&self, key: &str) -> bool {
        is_kafka_connector_key(key)
    }

    fn check_connector(&self, config: &Config) -> Vec<ConfigIssue> {
        let mut issues = check_producer_overrides(self.override_policy, config);
        // As Kafka Connect: with topic creation off on the worker, the keys are not used or checked.
        if self.topic_creation_enable
            && let Err(found) = TopicCreation::from_config(config)
        {
            issues.extend(found);
        }
        issues
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One producer shared by the connectors without `producer.override.*`; one per connector for the
/// others (the worker's settings plus its overrides), alive while its tasks' sinks are. Each task's
/// sink converts with its connector's converters where it sets them, else with the worker's, and
/// creates its connector's missing topics when the connector has `topic.creation.*` settings.
struct KafkaSinkProvider {
    sink: KafkaSink,
    /// The worker's producer settings.
    base: KafkaSinkConfig,
    key_converter: ConverterSpec,
    value_converter: ConverterSpec,
    topic_creation_enable: bool,
    override_policy: OverridePolicy,
    /// (connector, its overrides) → its producer, while any task uses it.
    producers: Mutex<Vec<(ConnectorKeys, WeakSink)>>,
    /// (connector, its `topic.creation.*` settings) → its topic creator, while any task uses it.
    creators: Mutex<Vec<(ConnectorKeys, Weak<TopicCreator>)>>,
    /// The cluster's id, once the broker told it.
    cluster_id: std::sync::OnceLock<String>,
    /// See [`KafkaSinkSpec::offsets_topic`].
    offsets_topic: Option<String>,
}

/// How long `initTransactions`, a commit or an abort of an exactly-once task may take.
const TRANSACTION_CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// `transaction.timeout.ms` of exactly-once tasks' producers (librdkafka's and Kafka's default): a
/// transaction left open longer (its worker died) is aborted by the coordinator.
const TRANSACTION_TIMEOUT_MS: &str = "60000";

/// How long `GET /` waits for the broker to tell the cluster id (Kafka Connect reads it at start).
const CLUSTER_ID_TIMEOUT: Duration = Duration::from_secs(5);

/// A connector's name and some of its settings: what a cached client was made for (a reconfigured
/// connector gets new clients; the old ones go with its old tasks).
type ConnectorKeys = (String, Vec<(String, String)>);

impl KafkaSinkProvider {
    /// The converters and `producer.override.*` settings of `task`, checked against the worker's
    /// policy.
    fn task_settings(
        &self,
        task: &TaskSinkContext<'_>,
    ) -> Result<(RecordConverters, Vec<(String, String)>), SinkError> {
        let converters = RecordConverters::new(
            task.key_converter.unwrap_or(self.key_converter),
            task.value_converter.unwrap_or(self.value_converter),
        );
        let empty = Config::new();
        let config = task.connector_config.unwrap_or(&empty);
        // Checked again here (as Kafka Connect does when a task starts): the worker's policy may
        // have changed since the configuration was stored.
        let refused = check_producer_overrides(self.override_policy, config);
        if !refused.is_empty() {
            return Err(self.refuse(task, "producer.override.* settings", refused));
        }
        Ok((converters, producer_overrides(config)))
    }

    fn refuse(
        &self,
        task: &TaskSinkContext<'_>,
        what: &str,
        issues: Vec<ConfigIssue>,
    ) -> SinkError {
        let issues: Vec<String> = issues
            .into_iter()
            .map(|i| format!("{}: {}", i.key, i.message))
            .collect();
        SinkError::new(
            self.sink.describe(),
            SinkErrorKind::Fatal,
            format!(
                "connector {}'s {what} are invalid: {}",
                task.connector,
                issues.join("; ")
            ),
        )
    }

    /// `sink`, creating the connector's missing topics first when it has `topic.creation.*`
    /// settings (and the worker allows it).
    fn with_topic_creation(
        &self,
        mut sink: KafkaSink,
        task: &TaskSinkContext<'_>,
        overrides: &[(String, String)],
    ) -> Result<KafkaSink, SinkError> {
        if !self.topic_creation_enable {
            return Ok(sink);
        }
        let empty = Config::new();
        let config = task.connector_config.unwrap_or(&empty);
        match TopicCreation::from_config(config) {
            Ok(None) => {}
            Ok(Some(rules)) => {
                let settings = config
                    .iter()
                    .filter(|(k, _)| k.starts_with(crate::connector_keys::TOPIC_CREATION_PREFIX))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let creator = self.connector_creator(task.connector, settings, rules, overrides)?;
                sink = sink.with_topic_creator(creator);
            }
            Err(issues) => return Err(self.refuse(task, "topic.creation.* settings", issues)),
        }
        Ok(sink)
    }

    /// The producer of a connector with `overrides`: cached while in use, else created.
    fn connector_producer(
        &self,
        connector: &str,
        overrides: Vec<(String, String)>,
    ) -> Result<KafkaSink, SinkError> {
        let mut producers = self
            .producers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        producers.retain(|(_, weak)| weak.upgrade().is_some());
        let key = (connector.to_owned(), overrides);
        if let Some(sink) = producers
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, weak)| weak.upgrade())
        {
            return Ok(sink);
        }
        let mut config = self.base.clone();
        for (setting, value) in &key.1 {
            config = config.with_producer_setting(setting.clone(), value.clone());
        }
        let describe = format!(
            "kafka {} (connector {connector}'s producer with producer.override.*)",
            self.base.bootstrap_servers
        );
        let sink = KafkaSink::with_description(&config, describe, &key.1)?;
        producers.push((key, sink.downgrade()));
        Ok(sink)
    }

    /// The topic creator of a connector with topic creation `rules` (from `settings`, its
    /// `topic.creation.*` keys), cached while in use.
    fn connector_creator(
        &self,
        connector: &str,
        settings: Vec<(String, String)>,
        rules: TopicCreation,
        overrides: &[(String, String)],
    ) -> Result<Arc<TopicCreator>, SinkError> {
        let mut creators = self.creators.lock().unwrap_or_else(PoisonError::into_inner);
        creators.retain(|(_, weak)| weak.strong_count() > 0);
        let key = (connector.to_owned(), settings);
        if let Some(creator) = creators
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, weak)| weak.upgrade())
        {
            return Ok(creator);
        }
        // The clients authenticate as the connector's producer does.
        let mut client_settings = self.base.producer_overrides.to_vec();
        client_settings.extend(overrides.iter().cloned());
        let creator = Arc::new(TopicCreator::new(
            connector,
            rules,
            &self.base.bootstrap_servers,
            &client_settings,
            &self.sink.describe(),
        )?);
        creators.push((key, Arc::downgrade(&creator)));
        Ok(creator)
    }

    /// Live producers besides the shared one.
    fn connector_producers(&self) -> Vec<KafkaSink> {
        self.producers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(|(_, weak)| weak.upgrade())
            .collect()
    }
}

impl fmt::Display for KafkaSinkProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.sink.describe())
    }
}

#[async_trait]
impl SinkProvider for KafkaSinkProvider {
    async fn open(&self, task: &TaskSinkContext<'_>) -> Result<Arc<dyn RecordSink>, SinkError> {
        let (converters, overrides) = self.task_settings(task)?;
        let sink = if overrides.is_empty() {
            self.sink.with_converters(converters)
        } else {
            self.connector_producer(task.connector, overrides.clone())?
                .with_converters(converters)
        };
        let sink = sink.with_lease(task.membership.cloned());
        Ok(Arc::new(self.with_topic_creation(sink, task, &overrides)?))
    }

    async fn open_transactional(
        &self,
        task: &TaskSinkContext<'_>,
        transactional_id: &str,
    ) -> Result<Option<Arc<dyn TransactionalSink>>, SinkError> {
        let Some(worker_topic) = &self.offsets_topic else {
            return Ok(None);
        };
        // A connector with its own offsets topic (`offsets.storage.topic`, KIP-618) commits its
        // offsets there, in its records' transactions, with a copy to the worker's topic in the same
        // transactions; the runtime opened (created) it first.
        let offsets_topic = task
            .connector_config
            .and_then(|c| c.get("offsets.storage.topic"))
            .map(|t| t.trim())
            .filter(|t| !t.is_empty())
            .map_or_else(|| worker_topic.clone(), str::to_owned);
        let (converters, overrides) = self.task_settings(task)?;
        let mut config = self.base.clone().with_converters(converters);
        for (key, value) in &overrides {
            config = config.with_producer_setting(key.clone(), value.clone());
        }
        let times_out = config
            .producer_overrides
            .iter()
            .any(|(k, _)| k == "message.timeout.ms" || k == "delivery.timeout.ms");
        // What Kafka Connect forces on exactly-once tasks' producers: a transactional producer is
        // idempotent and waits for every in-sync replica (librdkafka refuses a transactional id
        // with idempotence turned off). A worker setting otherwise is overridden here, with a WARN.
        for (key, forced) in [("enable.idempotence", "true"), ("acks", "all")] {
            if let Some((_, set)) = config.producer_overrides.iter().find(|(k, v)| {
                *k == key && !v.eq_ignore_ascii_case(forced) && !(key == "acks" && *v == "-1")
            }) {
                tracing::warn!(
                    transactional_id,
                    "{key}={set} is overridden with {key}={forced} for exactly-once delivery (as Kafka \
                     Connect does)"
                );
            }
            config = config.with_producer_setting(key, forced);
        }
        config = config
            .with_producer_setting("transactional.id", transactional_id)
            .with_producer_setting("transaction.timeout.ms", TRANSACTION_TIMEOUT_MS);
        if !times_out {
            // librdkafka requires a record's timeout within the transaction's (Ferry's default, 0,
            // waits forever): a record not delivered while its transaction may live fails it.
            config = config.with_producer_setting("message.timeout.ms", TRANSACTION_TIMEOUT_MS);
        }
        let describe = self.sink.describe();
        let sink = KafkaSink::with_description(&config, describe, &overrides)?
            .with_lease(task.membership.cloned());
        let sink = self.with_topic_creation(sink, task, &overrides)?;
        let sink = TransactionalKafkaSink::open(
            sink,
            transactional_id,
            offsets_topic,
            Some(worker_topic.clone()),
            TRANSACTION_CALL_TIMEOUT,
        )
        .await?;
        Ok(Some(Arc::new(sink)))
    }

    fn uses_converters(&self) -> bool {
        true
    }

    async fn cluster_id(&self) -> Option<String> {
        // Asked once and kept: a cluster's id does not change, and `GET /` must not wait on the broker.
        if let Some(id) = self.cluster_id.get() {
            return Some(id.clone());
        }
        let id = self.sink.cluster_id(CLUSTER_ID_TIMEOUT).await?;
        Some(self.cluster_id.get_or_init(|| id).clone())
    }

    async fn flush(&self, timeout: Duration) -> Result<(), SinkError> {
        let shared = self.sink.flush(timeout).await;
        for sink in self.connector_producers() {
            sink.flush(timeout).await?;
        }
        shared
    }
}

/// `bootstrap.servers`, trimmed, if set and not empty.
fn bootstrap_servers(props: &Properties) -> Option<String> {
    props
        .get(BOOTSTRAP_SERVERS)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// Kafka's topic name rules: 1..=249 chars of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn valid_topic(topic: &str) -> bool {
    (1..=249).contains(&topic.len())
        && topic != "."
        && topic != ".."
        && topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// An integer setting (Java's `int`/`short` parsing: trimmed digits with an optional sign).
fn int_setting<T: FromStr + Copy>(
    props: &Properties,
    key: &str,
    default: T,
    accept: impl Fn(T) -> bool,
    message: &str,
    errors: &mut Vec<ConfigError>,
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
