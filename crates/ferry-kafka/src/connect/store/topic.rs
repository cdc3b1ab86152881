//! One internal topic: created or checked at open, a producer that returns once the broker
//! acknowledged, and a reader that reads to the end.

use std::sync::{Arc, Mutex, PoisonError};

use ferry_offsets::StoreError;
use rdkafka::ClientConfig;
use rdkafka::admin::AdminClient;
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};

use super::reader::{TopicReader, kafka};
use super::{ConnectStoreError, InternalTopicConfig};
use crate::admin::{self, OffsetsTopic, TopicKind, TopicState};
use crate::client::{StoreConsumer, StoreContext};

/// The topic's clients.
pub(crate) struct InternalTopic {
    pub(crate) describe: String,
    topic: String,
    producer: FutureProducer<StoreContext>,
    reader: Arc<Mutex<TopicReader>>,
    timeout: std::time::Duration,
}

/// The admin module speaks the offset store's error; its message is kept, its prefix replaced.
fn from_store(store: &str, error: StoreError) -> ConnectStoreError {
    let retriable = error.is_retriable();
    match error {
        StoreError::Backend { message, .. } => ConnectStoreError::new(store, message, retriable),
        other => ConnectStoreError::new(store, other.to_string(), retriable),
    }
}

async fn blocking<T: Send + 'static>(
    store: &str,
    work: impl FnOnce() -> Result<T, ConnectStoreError> + Send + 'static,
) -> Result<T, ConnectStoreError> {
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        ConnectStoreError::new(
            store,
            format!("the store's reader thread failed: {e}"),
            false,
        )
    })?
}

fn base(config: &InternalTopicConfig, role: &str) -> ClientConfig {
    let mut client = ClientConfig::new();
    client.set("bootstrap.servers", &config.bootstrap_servers);
    client.set("client.id", format!("ferry-{role}-{}", config.topic));
    for (key, value) in &config.client_overrides {
        client.set(key.trim(), value);
    }
    client.set("allow.auto.create.topics", "false");
    client
}

impl InternalTopic {
    /// Creates the topic compacted when it is missing (`exact_partitions`, else `config.partitions`),
    /// refuses it when it is not compacted or (with `exact_partitions`) has another partition count,
    /// and assigns a reader to every partition. Reads nothing.
    pub(crate) async fn open(
        kind: TopicKind,
        config: &InternalTopicConfig,
        exact_partitions: Option<i32>,
    ) -> Result<Self, ConnectStoreError> {
        let store = format!(
            "kafka {} {} at {}",
            kind.name(),
            config.topic,
            config.bootstrap_servers
        );
        if config.topic.trim().is_empty() {
            return Err(ConnectStoreError::new(
                &store,
                format!("{} is required", kind.setting()),
                false,
            ));
        }
        let partitions = exact_partitions.unwrap_or(config.partitions);
        if partitions < 1 {
            return Err(ConnectStoreError::new(
                &store,
                format!(
                    "the {} needs at least 1 partition, not {partitions}",
                    kind.name()
                ),
                false,
            ));
        }
        if config.replication_factor < 1 && config.replication_factor != -1 {
            return Err(ConnectStoreError::new(
                &store,
                format!(
                    "the replication factor of the {} is {}; it must be at least 1, or -1 for the broker's default",
                    kind.name(),
                    config.replication_factor
                ),
                false,
            ));
        }
        if config.timeout.is_zero() {
            return Err(ConnectStoreError::new(
                &store,
                "the timeout is zero; give the broker at least a few seconds",
                false,
            ));
        }
        let context = StoreContext {
            store: store.clone(),
        };
        let admin: AdminClient<StoreContext> = base(config, "admin")
            .create_with_context(context.clone())
            .map_err(|e| kafka(&store, "creating the admin client", &e))?;
        let offsets_client: Arc<StoreConsumer> = Arc::new(
            consumer_config(config)
                .create_with_context(context.clone())
                .map_err(|e| kafka(&store, "creating the consumer", &e))?,
        );
        let spec = OffsetsTopic {
            kind,
            topic: &config.topic,
            bootstrap_servers: &config.bootstrap_servers,
            partitions,
            replication_factor: config.replication_factor,
            timeout: config.timeout,
        };
        let (c, topic, timeout, s) = (
            offsets_client.clone(),
            config.topic.clone(),
            config.timeout,
            store.clone(),
        );
        let existing = blocking(&store, move || {
            admin::topic_state(&c, &topic, timeout, &s).map_err(|e| from_store(&s, e))
        })
        .await?;
        if let TopicState::Missing = existing {
            tracing::info!(
                topic = %config.topic,
                "creating the {} {} ({partitions} partitions, replication factor {}, cleanup.policy=compact)",
                kind.name(),
                config.topic,
                config.replication_factor
            );
            admin::create_topic(&admin, &spec, &store)
                .await
                .map_err(|e| from_store(&store, e))?;
        }
        let found = match existing {
            TopicState::Exists(found) => found,
            TopicState::Missing => {
                let (c, topic, s) = (offsets_client.clone(), config.topic.clone(), store.clone());
                blocking(&store, move || {
                    admin::await_topic(&c, &topic, timeout, &s).map_err(|e| from_store(&s, e))
                })
                .await?
            }
        };
        // Checked once the broker shows the topic: right after another worker created it, the broker
        // may not know it yet and answers DescribeConfigs without its configuration.
        admin::verify_compacted(&admin, &spec, &store)
            .await
            .map_err(|e| from_store(&store, e))?;
        let _ = tokio::task::spawn_blocking(move || drop(admin)).await;
        if let Some(exact) = exact_partitions
            && found != exact
        {
            // Kafka Connect refuses it too: records of one topic are ordered only within a partition,
            // and the config topic's fold depends on that order.
            return Err(ConnectStoreError::new(
                &store,
                format!(
                    "topic {} has {found} partitions, but the {} must have exactly {exact}: its records are \
                     applied in order, and Kafka orders records only within one partition. Ferry will not use \
                     this topic. Set {} to a topic that does not exist yet (Ferry creates it with 1 \
                     partition, compacted), or create one yourself with 1 partition and cleanup.policy=compact",
                    config.topic,
                    kind.name(),
                    kind.setting()
                ),
                false,
            ));
        }

        let producer: FutureProducer<StoreContext> = base(config, "producer")
            .set("acks", "all")
            .set("enable.idempotence", "true")
            // The Java client's placement, so Kafka Connect workers put a key on the same partition.
            .set("partitioner", "murmur2_random")
            .set("message.timeout.ms", timeout.as_millis().to_string())
            .create_with_context(context.clone())
            .map_err(|e| kafka(&store, "creating the producer", &e))?;
        let consumer: StoreConsumer = consumer_config(config)
            .create_with_context(context)
            .map_err(|e| kafka(&store, "creating the consumer", &e))?;
        let (topic, s) = (config.topic.clone(), store.clone());
        let reader = blocking(&store, move || {
            TopicReader::new(consumer, offsets_client, &topic, found, &s, timeout)
        })
        .await?;
        Ok(Self {
            describe: store,
            topic: config.topic.clone(),
            producer,
            reader: Arc::new(Mutex::new(reader)),
            timeout,
        })
    }

    /// Sends `records` in order (key, value; `None`: a tombstone) and returns once every one is
    /// acknowledged by all in-sync replicas. On an error, an earlier record of the batch may be durable.
    pub(crate) async fn send(
        &self,
        records: &[(String, Option<Vec<u8>>)],
    ) -> Result<(), ConnectStoreError> {
        let deliveries = self.enqueue(records)?;
        self.acknowledged(deliveries).await
    }

    /// Hands `records` to the producer in order, without waiting for the broker: what was enqueued
    /// before is sent before (the idempotent producer keeps the order).
    pub(crate) fn enqueue(
        &self,
        records: &[(String, Option<Vec<u8>>)],
    ) -> Result<Vec<(String, DeliveryFuture)>, ConnectStoreError> {
        let mut deliveries = Vec::with_capacity(records.len());
        for (key, value) in records {
            let mut record = FutureRecord::<str, [u8]>::to(&self.topic).key(key.as_str());
            if let Some(value) = value {
                record = record.payload(value.as_slice());
            }
            let delivery = self
                .producer
                .send_result(record)
                .map_err(|(e, _)| kafka(&self.describe, &format!("sending record {key}"), &e))?;
            deliveries.push((key.clone(), delivery));
        }
        Ok(deliveries)
    }

    /// Waits until every enqueued record is acknowledged; the first failure is the error.
    pub(crate) async fn acknowledged(
        &self,
        deliveries: Vec<(String, DeliveryFuture)>,
    ) -> Result<(), ConnectStoreError> {
        for (key, delivery) in deliveries {
            match tokio::time::timeout(self.timeout * 2, delivery).await {
                Ok(Ok(Ok(_))) => {}
                Ok(Ok(Err((e, _)))) => {
                    return Err(kafka(&self.describe, &format!("writing record {key}"), &e));
                }
                Ok(Err(_)) | Err(_) => {
                    return Err(ConnectStoreError::new(
                        &self.describe,
                        format!(
                            "record {key} was not acknowledged within {:?}; check that the brokers are \
                             reachable",
                            self.timeout * 2
                        ),
                        true,
                    ));
                }
            }
        }
        Ok(())
    }

    /// Waits (at most the store's timeout, on a blocking thread) until every record enqueued so far
    /// was acknowledged or failed.
    pub(crate) async fn flush(&self) -> Result<(), ConnectStoreError> {
        let (producer, timeout, describe) =
            (self.producer.clone(), self.timeout, self.describe.clone());
        blocking(&self.describe, move || {
            producer.flush(timeout).map_err(|e| {
                ConnectStoreError::new(
                    &describe,
                    format!(
                        "records were still unacknowledged after {timeout:?} ({e}); check that the \
                         brokers are reachable"
                    ),
                    true,
                )
            })
        })
        .await
    }

    /// Reads the topic to its end as of now, applying each record with `apply`, on a blocking thread.
    /// Returns the records read.
    pub(crate) async fn read_to_end<S: Send + 'static>(
        &self,
        state: Arc<Mutex<S>>,
        apply: fn(&mut S, &str, Option<&[u8]>, i64),
    ) -> Result<u64, ConnectStoreError> {
        let reader = self.reader.clone();
        blocking(&self.describe, move || {
            let mut reader = reader.lock().unwrap_or_else(PoisonError::into_inner);
            reader.read_to_end(|key, value, offset| {
                let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
                apply(&mut state, key, value, offset);
            })
        })
        .await
    }
}

fn consumer_config(config: &InternalTopicConfig) -> ClientConfig {
    let mut client = base(config, "reader");
    client
        .set("group.id", "ferry-internal-topic-reader")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true");
    client
}
