//! The Kafka sink (`sink=kafka`): records produced to Kafka, acknowledged on the broker's
//! acknowledgement.
//!
//! # Producer settings
//!
//! Ferry's defaults, then the worker's `producer.*` settings with the prefix removed (Kafka Connect's
//! `producer.` prefix: `producer.linger.ms=5` → `linger.ms=5`), which may override any default:
//!
//! | setting | default | why |
//! |---|---|---|
//! | `bootstrap.servers` | the worker's `bootstrap.servers` | |
//! | `acks` | `all` | a record counts as delivered once every in-sync replica has it |
//! | `enable.idempotence` | `true` | retries neither duplicate nor reorder records |
//! | `message.timeout.ms` | `0` (unbounded) | like Kafka Connect's `delivery.timeout.ms=Integer.MAX_VALUE`: while the brokers are away, records wait and are retried, never dropped; the task stops reading once the queue is full |
//! | `partitioner` | `murmur2_random` | keyed records land on the partition Kafka's Java producer (and so Kafka Connect) picks |
//! | `queue.buffering.max.kbytes` | `32768` | records waiting in the producer are bounded by their bytes as by Kafka Connect's `buffer.memory` (32 MiB), not librdkafka's 1 GiB: large records (a CDC change with its schema is kilobytes) otherwise held gigabytes while the brokers were slower than the source |
//! | `client.id` | `ferry-producer` | |
//! | `enable.sparse.connections` | `false` | connects to every broker at once: an exactly-once task's transactional producer otherwise waited for librdkafka's 500 ms retry timer in `initTransactions` about a third of the time ([`crate::CLIENT_SETTINGS`]) |
//!
//! Kafka Connect itself uses `enable.idempotence=false` with `max.in.flight.requests.per.connection=1`
//! for ordering; Ferry keeps ordering with the idempotent producer instead, which also allows
//! pipelining. Settings are librdkafka's (most Java producer names are accepted aliases, e.g.
//! `linger.ms`, `delivery.timeout.ms`, `batch.size`); an unknown one fails when the sink is created,
//! naming the `producer.` key.
//!
//! # Per-connector settings
//!
//! A connector with `producer.override.*` gets its own producer (the settings above, then its
//! overrides, as the worker's `connector.client.config.override.policy` allows); the others share
//! one. A connector with `topic.creation.*` settings has its missing topics created before their first
//! record (see [`crate::connector_keys`]).
//!
//! # Delivery
//!
//! [`RecordSink::send`] converts the key and value with the connector's converters (see
//! [`crate::convert`]) and headers like Kafka Connect's `SimpleHeaderConverter`, sets the timestamp and
//! the explicit partition when the record has them, and enqueues the record in librdkafka. The returned
//! [`PendingDelivery`] resolves with the topic, partition and offset once the broker acknowledged the
//! record, or with the delivery error (`retriable` as the Kafka error is). A conversion failure is not
//! retriable.
//!
//! A full local queue (`queue.buffering.max.messages` / `.kbytes`) makes `send` wait for room as long as
//! it takes, like Kafka Connect's producer (`max.block.ms=Long.MAX_VALUE`) and like a plain producer
//! awaiting its oldest delivery: the brokers being slower than the source is back-pressure, not an
//! error. A task that stops meanwhile drops the waiting `send`; that record was never accepted, so its
//! offset is never committed and it is polled again after a restart. A wait in which no delivery
//! completes for [`QUEUE_STALL_WARNING`] is logged at WARN once.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

pub use crate::retriable::is_retriable;
use async_trait::async_trait;
use ferry_api::{RecordMetadata, SourceRecord};
use ferry_plugin::sink::{
    BatchDelivery, BatchSent, PendingBatch, PendingDelivery, RecordSink, SinkError, SinkErrorKind,
};
use ferry_plugin::{ClientOverrides, PRODUCER_PREFIX};
use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};

use crate::convert::{RecordConverters, Role, header_value};
use crate::topics::TopicCreator;

/// Ferry's producer defaults (see the module docs), applied with [`crate::CLIENT_SETTINGS`] before
/// `producer.*`.
const DEFAULTS: &[(&str, &str)] = &[
    ("acks", "all"),
    ("enable.idempotence", "true"),
    ("message.timeout.ms", "0"),
    ("partitioner", "murmur2_random"),
    ("queue.buffering.max.kbytes", "32768"),
    ("client.id", "ferry-producer"),
];

/// How often a `send` waiting for room in the full local queue tries again. librdkafka reports no
/// event when room frees up, so the wait polls; 1 ms keeps the pipeline full (a batch of deliveries
/// frees thousands of slots at once) at the cost of one wake-up per millisecond while waiting.
const QUEUE_FULL_PAUSE: Duration = Duration::from_millis(1);
/// A wait for room in which no delivery completed for this long is logged at WARN (once per wait).
pub const QUEUE_STALL_WARNING: Duration = Duration::from_secs(30);

/// What a [`KafkaSink`] is built from.
#[derive(Clone, PartialEq, Eq)]
pub struct KafkaSinkConfig {
    /// `bootstrap.servers`.
    pub bootstrap_servers: String,
    /// Producer settings (`producer.*` without the prefix), applied over Ferry's defaults.
    pub producer_overrides: ClientOverrides,
    /// The key and value converters of the records sent through this sink; other connectors' converters
    /// are set with [`KafkaSink::with_converters`].
    pub converters: RecordConverters,
}

impl KafkaSinkConfig {
    /// A configuration with Ferry's defaults and the default converters (JsonConverter with schemas).
    pub fn new(bootstrap_servers: impl Into<String>) -> Self {
        Self {
            bootstrap_servers: bootstrap_servers.into(),
            producer_overrides: ClientOverrides::default(),
            converters: RecordConverters::default(),
        }
    }

    /// Adds a producer setting (without the `producer.` prefix), builder style. A key librdkafka
    /// declares sensitive (`sasl.password`, `ssl.key.password`, …) is kept as a secret: never shown.
    pub fn with_producer_setting(
        mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> Self {
        let key = key.into();
        if crate::secret::is_sensitive_client_key(&key) {
            self.producer_overrides.set_secret(key, value);
        } else {
            self.producer_overrides.set(key, value);
        }
        self
    }

    /// Sets the converters, builder style.
    pub fn with_converters(mut self, converters: RecordConverters) -> Self {
        self.converters = converters;
        self
    }

    /// The librdkafka settings: Ferry's defaults, then the overrides.
    pub fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap_servers);
        // The internal topics' clients' settings are defaults of the sink's producer too.
        for (key, value) in DEFAULTS.iter().chain(crate::CLIENT_SETTINGS) {
            config.set(*key, *value);
        }
        for (key, value) in self.producer_overrides.iter() {
            config.set(key, value);
        }
        config
    }
}

/// Shows the settings; secret producer settings show as `[hidden]`.
impl fmt::Debug for KafkaSinkConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaSinkConfig")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("producer_overrides", &self.producer_overrides)
            .field("converters", &self.converters)
            .finish()
    }
}

/// Forwards librdkafka's logs and errors to `tracing`, naming the sink. Warning and error log lines, and
/// client errors (a broker outage reports some at every reconnection attempt), are each logged at WARN
/// at most once per [`WARN_INTERVAL`], with the number held back since; the others go to DEBUG.
pub(crate) struct SinkContext {
    sink: String,
    /// For librdkafka's own warning and error log lines.
    logs: Throttle,
    /// For client errors (transport failures, all brokers down).
    errors: Throttle,
}

/// The most often librdkafka's warnings and errors are logged at WARN.
const WARN_INTERVAL: Duration = Duration::from_secs(30);

/// Lets one message through per interval and counts the others.
#[derive(Default)]
struct Throttle {
    state: Mutex<(Option<Instant>, u64)>,
}

impl Throttle {
    /// `Some(held back since the last one let through)` if a message may be logged now.
    fn allow(&self) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (last, held) = &mut *state;
        if last.is_some_and(|at| at.elapsed() < WARN_INTERVAL) {
            *held += 1;
            return None;
        }
        *last = Some(Instant::now());
        Some(std::mem::take(held))
    }
}

impl SinkContext {
    fn warn(&self, throttle: &Throttle, message: std::fmt::Arguments<'_>) {
        let sink = &self.sink;
        match throttle.allow() {
            Some(0) => tracing::warn!(target: "librdkafka", "{sink}: {message}"),
            Some(held) => tracing::warn!(
                target: "librdkafka",
                "{sink}: {message} ({held} similar messages in the last {}s were logged at DEBUG)",
                WARN_INTERVAL.as_secs()
            ),
            None => tracing::debug!(target: "librdkafka", "{sink}: {message}"),
        }
    }
}

impl ClientContext for SinkContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error
            | RDKafkaLogLevel::Warning => {
                self.warn(&self.logs, format_args!("librdkafka {fac}: {message}"))
            }
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(target: "librdkafka", "{}: librdkafka {fac}: {message}", self.sink)
            }
            RDKafkaLogLevel::Debug => {
                tracing::debug!(target: "librdkafka", "{}: librdkafka {fac}: {message}", self.sink)
            }
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        // Transport errors are expected while brokers are away; records wait and are retried.
        self.warn(
            &self.errors,
            format_args!("{error}: {reason} (records wait in the producer and are retried until the brokers answer)"),
        );
    }
}

struct Shared {
    producer: FutureProducer<SinkContext>,
    /// Shared with every pending delivery (which names the sink only if it fails).
    describe: Arc<str>,
}

/// Sends records to Kafka (see the [module docs](self)).
///
/// Cheap to clone with other converters ([`KafkaSink::with_converters`]): all clones share one producer.
#[derive(Clone)]
pub struct KafkaSink {
    shared: Arc<Shared>,
    converters: RecordConverters,
    /// Creates missing topics before their first record (the connector's `topic.creation.*`).
    topics: Option<Arc<TopicCreator>>,
    /// Distributed mode: no record is handed to the producer while this worker's membership is not
    /// confirmed (see `TaskSinkContext::membership`).
    lease: Option<Arc<ferry_plugin::MembershipLease>>,
}

/// A [`KafkaSink`]'s producer, not keeping it alive (a provider's cache of per-connector producers).
#[derive(Clone)]
pub(crate) struct WeakSink(Weak<Shared>);

impl WeakSink {
    /// The sink, if its producer is still in use.
    pub(crate) fn upgrade(&self) -> Option<KafkaSink> {
        self.0.upgrade().map(|shared| KafkaSink {
            shared,
            converters: RecordConverters::default(),
            topics: None,
            lease: None,
        })
    }
}

impl fmt::Debug for KafkaSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaSink")
            .field("sink", &self.shared.describe)
            .field("converters", &self.converters)
            .finish_non_exhaustive()
    }
}

impl KafkaSink {
    /// Creates the producer. It connects in the background: an unreachable cluster shows as WARNs and
    /// records waiting, not as an error here.
    ///
    /// # Errors
    /// A producer setting librdkafka does not accept (naming the `producer.` key), or the producer
    /// cannot be created.
    pub fn new(config: &KafkaSinkConfig) -> Result<KafkaSink, SinkError> {
        let describe = format!("kafka {}", config.bootstrap_servers);
        Self::with_description(config, describe, &[])
    }

    /// [`KafkaSink::new`], naming itself `describe`; an invalid setting among `connector_overrides`
    /// is named as the connector's `producer.override.` key.
    pub(crate) fn with_description(
        config: &KafkaSinkConfig,
        describe: String,
        connector_overrides: &[(String, String)],
    ) -> Result<KafkaSink, SinkError> {
        let context = SinkContext {
            sink: describe.clone(),
            logs: Throttle::default(),
            errors: Throttle::default(),
        };
        let producer: FutureProducer<SinkContext> = config
            .client_config()
            .create_with_context(context)
            .map_err(|e| creation_error(&describe, config, connector_overrides, &e))?;
        Ok(KafkaSink {
            shared: Arc::new(Shared {
                producer,
                describe: describe.into(),
            }),
            converters: config.converters,
            topics: None,
            lease: None,
        })
    }

    /// This sink creating missing topics with `creator` before their first record.
    pub(crate) fn with_topic_creator(mut self, creator: Arc<TopicCreator>) -> KafkaSink {
        self.topics = Some(creator);
        self
    }

    /// This sink handing no record to the producer while `lease` is not valid.
    pub(crate) fn with_lease(
        mut self,
        lease: Option<Arc<ferry_plugin::MembershipLease>>,
    ) -> KafkaSink {
        self.lease = lease;
        self
    }

    /// The producer, not kept alive.
    pub(crate) fn downgrade(&self) -> WeakSink {
        WeakSink(Arc::downgrade(&self.shared))
    }

    /// This sink with other converters (a connector's `key.converter` / `value.converter`), sharing the
    /// producer.
    pub fn with_converters(&self, converters: RecordConverters) -> KafkaSink {
        KafkaSink {
            shared: Arc::clone(&self.shared),
            converters,
            topics: self.topics.clone(),
            lease: self.lease.clone(),
        }
    }

    /// The converters records of this handle are converted with.
    pub fn converters(&self) -> RecordConverters {
        self.converters
    }

    /// The id of the cluster the producer writes to, asked of the broker (waiting at most `timeout`);
    /// `None` when it cannot be had in time.
    pub async fn cluster_id(&self, timeout: Duration) -> Option<String> {
        let shared = self.shared.clone();
        // librdkafka asks the broker synchronously: off the async threads.
        tokio::task::spawn_blocking(move || shared.producer.client().fetch_cluster_id(timeout))
            .await
            .ok()
            .flatten()
    }

    /// Records handed to librdkafka whose delivery has not been reported yet.
    pub fn in_flight(&self) -> i32 {
        self.shared.producer.in_flight_count()
    }

    fn error(&self, kind: SinkErrorKind, message: impl Into<String>) -> SinkError {
        SinkError::new(&*self.shared.describe, kind, message)
    }

    /// The record's key and value as the converters write them.
    fn convert(&self, record: &SourceRecord) -> Result<(Converted, Converted), SinkError> {
        let key = self
            .converters
            .key
            .convert_shared(Role::Key, record.key_schema.as_ref(), record.key.as_ref())
            .map_err(|e| {
                self.error(
                    SinkErrorKind::Conversion,
                    format!("record for topic {}: {e}", record.topic),
                )
            })?;
        let value = self
            .converters
            .value
            .convert_shared(
                Role::Value,
                record.value_schema.as_ref(),
                record.value.as_ref(),
            )
            .map_err(|e| {
                self.error(
                    SinkErrorKind::Conversion,
                    format!("record for topic {}: {e}", record.topic),
                )
            })?;
        Ok((key, value))
    }

    /// The producer (the transactional sink drives its transactions).
    pub(crate) fn producer(&self) -> &FutureProducer<SinkContext> {
        &self.shared.producer
    }
}

#[async_trait]
impl RecordSink for KafkaSink {
    fn describe(&self) -> String {
        self.shared.describe.to_string()
    }

    async fn send(&self, record: &SourceRecord) -> Result<PendingDelivery, SinkError> {
        if let Some(topics) = &self.topics {
            topics.ensure(&record.topic).await?;
        }
        let (key, value) = self.convert(record)?;
        let header_values: Vec<Option<Vec<u8>>> = record
            .headers
            .iter()
            .map(|h| header_value(&h.value))
            .collect();

        let mut full: Option<QueueFull> = None;
        let delivery = loop {
            // Checked right before the hand-over, after the conversion and any wait for room: a
            // worker frozen after the runtime's check must not let this record out on waking.
            if let Some(lease) = &self.lease
                && !lease.is_valid()
            {
                return Err(self.error(
                    SinkErrorKind::Retriable,
                    format!(
                        "the group has not confirmed this worker for {:.1?}: the record for topic {} is \
                         held until it does (or the task is taken away)",
                        lease.age(),
                        record.topic
                    ),
                ));
            }
            let out = future_record(record, key.as_deref(), value.as_deref(), &header_values);
            match self.shared.producer.send_result(out) {
                Ok(delivery) => break delivery,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    // Back-pressure: wait for room (see the module docs), as long as it takes.
                    let in_flight = self.in_flight();
                    let wait = full.get_or_insert_with(|| QueueFull::new(in_flight));
                    if wait.stalled(in_flight, Instant::now()) {
                        tracing::warn!(
                            sink = %self.shared.describe,
                            "the producer's queue is full (queue.buffering.max.messages / \
                             queue.buffering.max.kbytes) and no record was acknowledged for {} s; {in_flight} \
                             records wait for the brokers and the task waits with them",
                            QUEUE_STALL_WARNING.as_secs()
                        );
                    }
                    tokio::time::sleep(QUEUE_FULL_PAUSE).await;
                }
                Err((e, _)) => {
                    return Err(self
                        .error(
                            kind_of(&e),
                            format!("cannot send a record to topic {}: {e}", record.topic),
                        )
                        .with_source(e));
                }
            }
        };
        Ok(pending_delivery(
            Arc::clone(&self.shared.describe),
            record.topic.clone(),
            delivery,
        ))
    }

    /// Hands records to librdkafka while each can go at once: its topic known to exist, the lease
    /// valid, its conversion fine and room in the local queue. The first that cannot stops the
    /// batch; `send` then waits for it or reports its error. One delivery for the batch: it
    /// resolves once the broker acknowledged (or failed) every record of it.
    fn try_send_batch(&self, records: &[SourceRecord]) -> BatchSent {
        let mut deliveries = Vec::with_capacity(records.len());
        // The batch's topics, each run once with the position it starts at (for error messages).
        let mut topics: Vec<(usize, String)> = Vec::new();
        for (at, record) in records.iter().enumerate() {
            if self
                .topics
                .as_ref()
                .is_some_and(|topics| !topics.is_known(&record.topic))
                || self.lease.as_ref().is_some_and(|lease| !lease.is_valid())
            {
                break;
            }
            let Ok((key, value)) = self.convert(record) else {
                break;
            };
            let header_values: Vec<Option<Vec<u8>>> = record
                .headers
                .iter()
                .map(|h| header_value(&h.value))
                .collect();
            let out = future_record(record, key.as_deref(), value.as_deref(), &header_values);
            // A full queue or an error: `send` waits for room or reports it. The runtime sends
            // that record alone next, so its conversion here is the one repeated per refusal.
            let Ok(delivery) = self.shared.producer.send_result(out) else {
                break;
            };
            if topics
                .last()
                .is_none_or(|(_, topic)| *topic != record.topic)
            {
                topics.push((at, record.topic.clone()));
            }
            deliveries.push(delivery);
        }
        let accepted = deliveries.len();
        let sink = Arc::clone(&self.shared.describe);
        BatchSent::accepted(
            accepted,
            PendingBatch::new(async move {
                let mut failed = Vec::new();
                for (at, delivery) in deliveries.into_iter().enumerate() {
                    let error = match delivery.await {
                        Ok(Ok(_)) => continue,
                        Ok(Err((e, _))) => Some(e),
                        Err(_) => None,
                    };
                    let topic = topics
                        .iter()
                        .rev()
                        .find(|(start, _)| *start <= at)
                        .map_or("", |(_, topic)| topic.as_str());
                    failed.push((at, delivery_error(&sink, topic, error)));
                }
                BatchDelivery { failed }
            }),
        )
    }

    async fn flush(&self, timeout: Duration) -> Result<(), SinkError> {
        let shared = Arc::clone(&self.shared);
        let flushed = tokio::task::spawn_blocking(move || shared.producer.flush(timeout))
            .await
            .map_err(|e| {
                self.error(
                    SinkErrorKind::Fatal,
                    format!("flushing the producer failed: {e}"),
                )
            })?;
        match flushed {
            Ok(()) => Ok(()),
            Err(e) => Err(self
                .error(
                    SinkErrorKind::Retriable,
                    format!(
                        "{} records were still waiting for the brokers' acknowledgement after {timeout:?} ({e})",
                        self.in_flight()
                    ),
                )
                .with_source(e)),
        }
    }
}

/// One `send`'s wait for room in the full local queue: whether it has stalled, with no delivery
/// completing for [`QUEUE_STALL_WARNING`].
struct QueueFull {
    /// Records in flight when last seen.
    in_flight: i32,
    /// When a delivery last completed (or the wait began).
    progress_at: Instant,
    warned: bool,
}

impl QueueFull {
    fn new(in_flight: i32) -> Self {
        Self {
            in_flight,
            progress_at: Instant::now(),
            warned: false,
        }
    }

    /// Notes the records in flight `now`; true once per wait, when it first counts as stalled.
    fn stalled(&mut self, in_flight: i32, now: Instant) -> bool {
        if in_flight < self.in_flight {
            self.progress_at = now;
        }
        self.in_flight = in_flight;
        if self.warned || now.saturating_duration_since(self.progress_at) < QUEUE_STALL_WARNING {
            return false;
        }
        self.warned = true;
        true
    }
}

fn delivery_hint(error: &KafkaError) -> &'static str {
    match error.rdkafka_error_code() {
        Some(RDKafkaErrorCode::MessageTimedOut) => {
            " (not acknowledged within message.timeout.ms; Ferry's default 0 waits without limit — check \
             producer.message.timeout.ms / producer.delivery.timeout.ms, that the topic exists and the brokers \
             are reachable)"
        }
        Some(RDKafkaErrorCode::UnknownTopic | RDKafkaErrorCode::UnknownTopicOrPartition) => {
            " (the topic does not exist; create it, or enable auto-creation on the brokers)"
        }
        Some(RDKafkaErrorCode::UnknownPartition) => {
            " (the record names a partition the topic does not have)"
        }
        Some(RDKafkaErrorCode::MessageSizeTooLarge) => {
            " (the record is larger than the topic's max.message.bytes or the producer's message.max.bytes)"
        }
        Some(RDKafkaErrorCode::TopicAuthorizationFailed) => {
            " (the producer's principal may not write to the topic)"
        }
        _ => "",
    }
}

/// A producer that cannot be created: an invalid setting names its `producer.` key when it came from
/// the overrides.
fn creation_error(
    sink: &str,
    config: &KafkaSinkConfig,
    connector_overrides: &[(String, String)],
    error: &KafkaError,
) -> SinkError {
    let message = match error {
        KafkaError::ClientConfig(_, description, key, _) => {
            let origin = if connector_overrides.iter().any(|(k, _)| k == key) {
                format!("{}{key}", crate::connector_keys::PRODUCER_OVERRIDE_PREFIX)
            } else if config.producer_overrides.get(key).is_some() {
                format!("{PRODUCER_PREFIX}{key}")
            } else {
                key.clone()
            };
            format!(
                "invalid producer setting {origin}: {description} (Ferry's producer is librdkafka; see its \
                 CONFIGURATION.md for the settings it accepts)"
            )
        }
        other => format!("cannot create the Kafka producer: {other}"),
    };
    SinkError::new(sink, SinkErrorKind::Fatal, message).with_source(error.clone())
}

/// A converted key or value (`None`: null).
type Converted = Option<Vec<u8>>;

/// The librdkafka record of `record`, with its converted key and value and its header values.
fn future_record<'a>(
    record: &'a SourceRecord,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    header_values: &'a [Option<Vec<u8>>],
) -> FutureRecord<'a, [u8], [u8]> {
    let mut out: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&record.topic);
    // No header list for a record without headers: librdkafka allocates one per record.
    if !record.headers.is_empty() {
        let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
        for (header, value) in record.headers.iter().zip(header_values) {
            headers = headers.insert(Header {
                key: header.key.as_str(),
                value: value.as_deref(),
            });
        }
        out = out.headers(headers);
    }
    if let Some(key) = key {
        out = out.key(key);
    }
    if let Some(value) = value {
        out = out.payload(value);
    }
    if let Some(partition) = record.kafka_partition {
        out = out.partition(partition);
    }
    if let Some(timestamp) = record.timestamp {
        out = out.timestamp(timestamp);
    }
    out
}

/// The pending delivery of a record handed to librdkafka: its metadata once the broker
/// acknowledged it, else why not.
fn pending_delivery(sink: Arc<str>, topic: String, delivery: DeliveryFuture) -> PendingDelivery {
    PendingDelivery::new(async move {
        match delivery.await {
            Ok(Ok(delivered)) => Ok(RecordMetadata {
                topic,
                partition: Some(delivered.partition),
                offset: Some(delivered.offset),
            }),
            Ok(Err((e, _))) => Err(delivery_error(&sink, &topic, Some(e))),
            Err(_) => Err(delivery_error(&sink, &topic, None)),
        }
    })
}

/// A failed delivery to `topic`: the client's error, or `None` when the producer was closed first.
fn delivery_error(sink: &str, topic: &str, error: Option<KafkaError>) -> SinkError {
    match error {
        Some(e) => SinkError::new(
            sink,
            kind_of(&e),
            format!("delivery to topic {topic} failed: {e}{}", delivery_hint(&e)),
        )
        .with_source(e),
        // Retriable: the record was never acknowledged, so sending it again is what a restart does.
        None => SinkError::new(
            sink,
            SinkErrorKind::Retriable,
            format!(
                "the producer was closed before the broker acknowledged a record for topic {topic}; \
                 it was not committed and is sent again after a restart"
            ),
        ),
    }
}

/// The kind of a client error: retriable exactly when [`is_retriable`] says so (the rule the store and
/// the admin calls share); of the rest, a fenced producer and refused credentials are told apart
/// because a task reacts to them differently (exactly-once stops without committing; an operator
/// fixes ACLs).
pub(crate) fn kind_of(error: &KafkaError) -> SinkErrorKind {
    use RDKafkaErrorCode as C;
    if is_retriable(error) {
        return SinkErrorKind::Retriable;
    }
    match error.rdkafka_error_code() {
        Some(C::ProducerFenced | C::InvalidProducerEpoch | C::Fenced) => SinkErrorKind::Fenced,
        Some(
            C::TopicAuthorizationFailed
            | C::GroupAuthorizationFailed
            | C::ClusterAuthorizationFailed
            | C::TransactionalIdAuthorizationFailed
            | C::DelegationTokenAuthorizationFailed
            | C::SaslAuthenticationFailed
            | C::Authentication,
        ) => SinkErrorKind::Unauthorized,
        _ => SinkErrorKind::Fatal,
    }
}

#[cfg(test)]
mod tests {
    use rdkafka::error::{KafkaError, RDKafkaErrorCode as C};

    use std::time::Duration;

    use super::{QUEUE_STALL_WARNING, QueueFull, SinkErrorKind, is_retriable, kind_of};

    /// A record is not handed to the producer while the worker's membership is unconfirmed (the
    /// runtime checked before converting it; a freeze in between must not let it out), and is once
    /// the group confirms the worker again. No broker: the producer only queues.
    #[tokio::test]
    async fn no_record_reaches_the_producer_while_the_membership_is_unconfirmed() {
        use ferry_api::SourceRecord;
        use ferry_plugin::{MembershipLease, RecordSink};
        use rdkafka::producer::Producer as _;
        let lease = std::sync::Arc::new(MembershipLease::new(Duration::from_millis(20)));
        let sink = super::KafkaSink::new(&crate::KafkaSinkConfig::new("127.0.0.1:1"))
            .unwrap_or_else(|e| panic!("{e}"))
            .with_lease(Some(lease.clone()));
        let record = SourceRecord::builder("t")
            .value(serde_json::json!("v"))
            .build();
        tokio::time::sleep(Duration::from_millis(40)).await;
        let Err(held) = sink.send(&record).await else {
            panic!("sent while the membership was unconfirmed")
        };
        assert_eq!(held.kind, SinkErrorKind::Retriable);
        assert!(
            held.message.contains("has not confirmed"),
            "{}",
            held.message
        );
        assert_eq!(sink.producer().in_flight_count(), 0, "nothing queued");
        lease.confirm(std::time::Instant::now());
        assert!(sink.send(&record).await.is_ok(), "sent once confirmed");
        assert_eq!(sink.producer().in_flight_count(), 1);
    }

    /// Every broker is connected at once by default (an exactly-once task's `initTransactions`
    /// otherwise waited for a 500 ms retry timer); a worker's `producer.` setting wins.
    #[test]
    fn the_producer_connects_every_broker_unless_the_worker_says_otherwise() {
        let config = crate::KafkaSinkConfig::new("127.0.0.1:1");
        assert_eq!(
            config.client_config().get("enable.sparse.connections"),
            Some("false")
        );
        let config = config.with_producer_setting("enable.sparse.connections", "true");
        assert_eq!(
            config.client_config().get("enable.sparse.connections"),
            Some("true")
        );
    }

    #[test]
    fn a_full_queue_counts_as_stalled_once_no_delivery_completed_for_the_warning_period() {
        let mut wait = QueueFull::new(100);
        let start = wait.progress_at;
        let late = start + QUEUE_STALL_WARNING;
        // Deliveries completing (fewer in flight) keep the wait from counting as stalled.
        assert!(!wait.stalled(90, late - Duration::from_millis(1)));
        assert!(!wait.stalled(90, late), "a delivery completed 1 ms ago");
        let stalled_at = late - Duration::from_millis(1) + QUEUE_STALL_WARNING;
        assert!(!wait.stalled(95, stalled_at - Duration::from_millis(1)));
        assert!(
            wait.stalled(95, stalled_at),
            "nothing completed for the whole period"
        );
        assert!(
            !wait.stalled(95, stalled_at + QUEUE_STALL_WARNING),
            "said once per wait"
        );
    }

    #[test]
    fn client_errors_map_to_sink_error_kinds() {
        let delivery = |code| KafkaError::MessageProduction(code);
        assert_eq!(kind_of(&delivery(C::ProducerFenced)), SinkErrorKind::Fenced);
        assert_eq!(
            kind_of(&delivery(C::InvalidProducerEpoch)),
            SinkErrorKind::Fenced
        );
        assert_eq!(
            kind_of(&delivery(C::TopicAuthorizationFailed)),
            SinkErrorKind::Unauthorized
        );
        assert_eq!(
            kind_of(&delivery(C::SaslAuthenticationFailed)),
            SinkErrorKind::Unauthorized
        );
        assert_eq!(
            kind_of(&delivery(C::MessageSizeTooLarge)),
            SinkErrorKind::Fatal
        );
        assert_eq!(kind_of(&KafkaError::Canceled), SinkErrorKind::Retriable);
        // Retriable exactly when the shared rule says so: the task's retries are unchanged.
        for code in [
            C::MessageTimedOut,
            C::NotLeaderForPartition,
            C::QueueFull,
            C::MessageSizeTooLarge,
            C::ProducerFenced,
        ] {
            let error = delivery(code);
            assert_eq!(
                kind_of(&error) == SinkErrorKind::Retriable,
                is_retriable(&error),
                "{code:?}"
            );
        }
    }
}
