//! One internal topic: created or checked at open, a producer that returns once the broker
//! acknowledged, and a reader that reads to the end.

use std::sync::{Arc, Mutex, PoisonError};

use ferry_offsets::StoreError;
use rdkafka::ClientConfig;
use rdkafka::Message;
use rdkafka::admin::AdminClient;
use rdkafka::consumer::Consumer;
use rdkafka::message::BorrowedMessage;
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};

use super::{ConnectStoreError, InternalTopicConfig, kafka};
use crate::admin::{self, OffsetsTopic, TopicKind, TopicState};
use crate::client::{StoreConsumer, StoreContext};
use crate::topic_log::{AssignFrom, TopicLog};

/// The topic's clients.
pub(crate) struct InternalTopic {
    pub(crate) describe: String,
    topic: String,
    producer: FutureProducer<StoreContext>,
    /// The producer's settings, for the transactional writers ([`InternalTopic::open_transactional`]).
    producer_config: ClientConfig,
    /// Lists the `read_committed` end offsets (the reader's client, shared).
    offsets_client: Arc<StoreConsumer>,
    reader: Arc<Mutex<TopicLog<ConnectStoreError>>>,
    /// Per partition: the offset after this topic's own last acknowledged write. A read goes at
    /// least this far, so a worker reads its own writes: the listed end is the last stable offset,
    /// which stays before another producer's open transaction (a connector owner writing task
    /// configurations) and so before every record written after it began.
    written: Arc<Mutex<Vec<i64>>>,
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
    crate::settings::client_settings(&mut client, &config.client_overrides);
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
        let partitions = exact_partitions.unwrap_or(config.partitions);
        check_settings(kind, config, partitions, &store)?;
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
        let found =
            ensure_compacted_topic(kind, config, partitions, admin, &offsets_client, &store)
                .await?;
        if let Some(exact) = exact_partitions
            && found != exact
        {
            return Err(wrong_partition_count(kind, config, found, exact, &store));
        }

        let timeout = config.timeout;
        let mut producer_config = base(config, "producer");
        producer_config
            .set("acks", "all")
            .set("enable.idempotence", "true")
            // The Java client's placement, so Kafka Connect workers put a key on the same partition.
            .set("partitioner", "murmur2_random")
            .set("message.timeout.ms", timeout.as_millis().to_string());
        let producer: FutureProducer<StoreContext> = producer_config
            .create_with_context(context.clone())
            .map_err(|e| kafka(&store, "creating the producer", &e))?;
        let reader = open_reader(config, context, offsets_client.clone(), found, &store).await?;
        Ok(Self {
            describe: store,
            topic: config.topic.clone(),
            producer,
            producer_config,
            offsets_client,
            reader: Arc::new(Mutex::new(reader)),
            written: Arc::new(Mutex::new(vec![0; usize::try_from(found).unwrap_or(0)])),
            timeout,
        })
    }

    /// Opens a writer whose batches are transactions of a producer with `transactional_id`: opening
    /// it (`initTransactions`) fences every earlier writer of that id, wherever it runs.
    ///
    /// # Errors
    /// The producer could not be made or initialized (e.g. brokers unreachable; retriable).
    pub(crate) async fn open_transactional(
        &self,
        transactional_id: &str,
    ) -> Result<TransactionalWriter, ConnectStoreError> {
        let mut config = self.producer_config.clone();
        config
            .set("transactional.id", transactional_id)
            .set("transaction.timeout.ms", "60000");
        let describe = self.describe.clone();
        let producer: FutureProducer<StoreContext> = config
            .create_with_context(StoreContext {
                store: describe.clone(),
            })
            .map_err(|e| kafka(&describe, "creating the transactional producer", &e))?;
        let (init, timeout, id) = (producer.clone(), self.timeout, transactional_id.to_owned());
        let in_thread = describe.clone();
        blocking(&describe, move || {
            init.init_transactions(timeout).map_err(|e| {
                kafka(
                    &in_thread,
                    &format!("initializing transactional.id {id}"),
                    &e,
                )
            })
        })
        .await?;
        Ok(TransactionalWriter {
            describe: self.describe.clone(),
            topic: self.topic.clone(),
            offsets_client: self.offsets_client.clone(),
            id: transactional_id.to_owned(),
            timeout: self.timeout,
            producer: Some(producer),
            fenced: tokio::sync::Mutex::new(None),
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
                Ok(Ok(Ok(delivery))) => {
                    let mut written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
                    if let Some(next) = usize::try_from(delivery.partition)
                        .ok()
                        .and_then(|p| written.get_mut(p))
                    {
                        *next = (*next).max(delivery.offset + 1);
                    }
                }
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

    /// Reads the topic to its end as of now, and at least past this topic's own acknowledged writes
    /// (waiting, up to the store's timeout without progress, for another producer's transaction
    /// begun before them to end), applying each record with `apply` (its key, its value — `None` for
    /// a tombstone — and its offset; records without a UTF-8 key are skipped) in partition order, on
    /// a blocking thread. Returns the records read.
    pub(crate) async fn read_to_end<S: Send + 'static>(
        &self,
        state: Arc<Mutex<S>>,
        apply: fn(&mut S, &str, Option<&[u8]>, i64),
    ) -> Result<u64, ConnectStoreError> {
        let reader = self.reader.clone();
        let written = self.written.clone();
        blocking(&self.describe, move || {
            let mut reader = reader.lock().unwrap_or_else(PoisonError::into_inner);
            let started = std::time::Instant::now();
            let mut ends = reader.end_offsets()?;
            // Taken after the listing: a write acknowledged before this read began is in it.
            let own = written
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            for (end, own) in ends.iter_mut().zip(own) {
                *end = (*end).max(own);
            }
            let mut visit = |message: &BorrowedMessage<'_>| {
                let Some(Ok(key)) = message.key().map(std::str::from_utf8) else {
                    tracing::warn!(
                        topic = %message.topic(),
                        offset = message.offset(),
                        "skipping a record without a UTF-8 key (Kafka Connect would skip it too)"
                    );
                    return;
                };
                let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
                apply(&mut state, key, message.payload(), message.offset());
            };
            Ok(reader.read_to(&ends, started, &mut visit)?.records)
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
    crate::settings::reader_settings(&mut client, &config.client_overrides);
    client
}

/// Why a transactional write failed.
pub(crate) enum TransactionFailed {
    /// A newer writer of the id took over: this one writes nothing more.
    Fenced(String),
    /// Anything else; the transaction was aborted, the write may be tried again.
    Failed(ConnectStoreError),
}

/// Batches written as transactions of one `transactional.id` ([`InternalTopic::open_transactional`]).
pub(crate) struct TransactionalWriter {
    describe: String,
    topic: String,
    offsets_client: Arc<StoreConsumer>,
    id: String,
    timeout: std::time::Duration,
    /// `None` once dropped (on a blocking thread: dropping a producer joins its threads).
    producer: Option<FutureProducer<StoreContext>>,
    /// Set once fenced: later writes fail without asking the broker. Held by every write, so the
    /// writer's transactions never overlap.
    fenced: tokio::sync::Mutex<Option<String>>,
}

impl TransactionalWriter {
    /// Writes `records` in order in one transaction: all visible to `read_committed` readers once it
    /// returns `Ok`, none otherwise.
    pub(crate) async fn write(
        &self,
        records: Vec<(String, Option<Vec<u8>>)>,
    ) -> Result<(), TransactionFailed> {
        let mut fenced = self.fenced.lock().await;
        if let Some(reason) = fenced.as_ref() {
            return Err(TransactionFailed::Fenced(reason.clone()));
        }
        let Some(producer) = self.producer.clone() else {
            return Err(TransactionFailed::Failed(ConnectStoreError::new(
                &self.describe,
                "the transactional writer is closed",
                false,
            )));
        };
        let (topic, timeout, id) = (self.topic.clone(), self.timeout, self.id.as_str());
        let outcome = tokio::task::spawn_blocking(move || {
            let failed = |what: &str, e: rdkafka::error::KafkaError| (what.to_owned(), e);
            let attempt = || {
                producer
                    .begin_transaction()
                    .map_err(|e| failed("beginning a transaction", e))?;
                let mut deliveries = Vec::with_capacity(records.len());
                for (key, value) in &records {
                    let mut record = FutureRecord::<str, [u8]>::to(&topic).key(key.as_str());
                    if let Some(value) = value {
                        record = record.payload(value.as_slice());
                    }
                    // Delivery is checked by the commit, which fails if any record failed.
                    deliveries.push(
                        producer
                            .send_result(record)
                            .map_err(|(e, _)| failed(&format!("sending record {key}"), e))?,
                    );
                }
                producer
                    .commit_transaction(timeout)
                    .map_err(|e| failed("committing the transaction", e))?;
                Ok(deliveries)
            };
            attempt().inspect_err(|(_, e)| {
                // A fenced producer's transaction was aborted by the coordinator; any other failure
                // is aborted here, so the next write can begin one.
                if !crate::transactional::is_fencing(e) {
                    let _ = producer.abort_transaction(timeout);
                }
            })
        })
        .await;
        match outcome {
            Ok(Ok(deliveries)) => {
                self.wait_visible(deliveries).await;
                Ok(())
            }
            Ok(Err((what, e))) if crate::transactional::is_fencing(&e) => {
                let reason = format!(
                    "{}: {what} of transactional.id {id} was refused: a newer writer of the id took over ({e})",
                    self.describe
                );
                *fenced = Some(reason.clone());
                Err(TransactionFailed::Fenced(reason))
            }
            Ok(Err((what, e))) => Err(TransactionFailed::Failed(kafka(
                &self.describe,
                &format!("{what} (transactional.id {id})"),
                &e,
            ))),
            Err(e) => Err(TransactionFailed::Failed(ConnectStoreError::new(
                &self.describe,
                format!("the transactional writer's thread failed: {e}"),
                false,
            ))),
        }
    }
}

impl TransactionalWriter {
    /// Waits (at most the store's timeout) until `read_committed` readers can read the committed
    /// records: the coordinator writes the commit markers after the commit returned, and a read of
    /// the topic right away would otherwise stop before them (the writer's own next read too).
    async fn wait_visible(&self, deliveries: Vec<DeliveryFuture>) {
        let mut last: std::collections::BTreeMap<i32, i64> = std::collections::BTreeMap::new();
        for delivery in deliveries {
            if let Ok(Ok(delivered)) = delivery.await {
                let entry = last.entry(delivered.partition).or_insert(delivered.offset);
                *entry = (*entry).max(delivered.offset);
            }
        }
        let (client, topic, timeout, describe) = (
            self.offsets_client.clone(),
            self.topic.clone(),
            self.timeout,
            self.describe.clone(),
        );
        let visible = tokio::task::spawn_blocking(move || {
            let deadline = std::time::Instant::now() + timeout;
            loop {
                // A `read_committed` client's end offset is the last stable offset.
                let seen = last.iter().all(|(partition, offset)| {
                    let mut request = rdkafka::TopicPartitionList::new();
                    request
                        .add_partition_offset(&topic, *partition, rdkafka::Offset::End)
                        .is_ok()
                        && client
                            .offsets_for_times(request, timeout)
                            .is_ok_and(|answer| {
                                answer.elements().iter().all(|e| {
                                    matches!(e.offset(), rdkafka::Offset::Offset(end) if end > *offset)
                                })
                            })
                });
                if seen {
                    return true;
                }
                if std::time::Instant::now() >= deadline {
                    return false;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        })
        .await
        .unwrap_or(false);
        if !visible {
            tracing::warn!(
                store = %describe,
                "a committed transaction was not readable within {:?}; readers see it once the \
                 coordinator wrote its commit marker",
                self.timeout
            );
        }
    }
}

impl Drop for TransactionalWriter {
    fn drop(&mut self) {
        if let Some(producer) = self.producer.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            drop(runtime.spawn_blocking(move || drop(producer)));
        }
    }
}

/// Refuses an empty topic name, fewer than 1 partition, a replication factor below 1 (other than
/// -1) and a zero timeout.
fn check_settings(
    kind: TopicKind,
    config: &InternalTopicConfig,
    partitions: i32,
    store: &str,
) -> Result<(), ConnectStoreError> {
    if config.topic.trim().is_empty() {
        return Err(ConnectStoreError::new(
            store,
            format!("{} is required", kind.setting()),
            false,
        ));
    }
    if partitions < 1 {
        return Err(ConnectStoreError::new(
            store,
            format!(
                "the {} needs at least 1 partition, not {partitions}",
                kind.name()
            ),
            false,
        ));
    }
    if config.replication_factor < 1 && config.replication_factor != -1 {
        return Err(ConnectStoreError::new(
            store,
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
            store,
            "the timeout is zero; give the broker at least a few seconds",
            false,
        ));
    }
    Ok(())
}

/// Creates the topic compacted with `partitions` when it is missing, waits until the broker shows
/// it, checks that it is compacted and returns its partition count. Drops `admin` off the runtime.
async fn ensure_compacted_topic(
    kind: TopicKind,
    config: &InternalTopicConfig,
    partitions: i32,
    admin: AdminClient<StoreContext>,
    offsets_client: &Arc<StoreConsumer>,
    store: &str,
) -> Result<i32, ConnectStoreError> {
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
        store.to_owned(),
    );
    let existing = blocking(store, move || {
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
        admin::create_topic(&admin, &spec, store)
            .await
            .map_err(|e| from_store(store, e))?;
    }
    let found = match existing {
        TopicState::Exists(found) => found,
        TopicState::Missing => {
            let (c, topic, s) = (
                offsets_client.clone(),
                config.topic.clone(),
                store.to_owned(),
            );
            blocking(store, move || {
                admin::await_topic(&c, &topic, timeout, &s).map_err(|e| from_store(&s, e))
            })
            .await?
        }
    };
    // Checked once the broker shows the topic: right after another worker created it, the broker
    // may not know it yet and answers DescribeConfigs without its configuration.
    admin::verify_compacted(&admin, &spec, store)
        .await
        .map_err(|e| from_store(store, e))?;
    let _ = tokio::task::spawn_blocking(move || drop(admin)).await;
    Ok(found)
}

/// The error for a topic with `found` partitions where the kind needs exactly `exact`.
fn wrong_partition_count(
    kind: TopicKind,
    config: &InternalTopicConfig,
    found: i32,
    exact: i32,
    store: &str,
) -> ConnectStoreError {
    // Kafka Connect refuses it too: records of one topic are ordered only within a partition,
    // and the config topic's fold depends on that order.
    ConnectStoreError::new(
        store,
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
    )
}

/// Makes the reader's consumer and assigns it every one of the topic's `found` partitions.
async fn open_reader(
    config: &InternalTopicConfig,
    context: StoreContext,
    reading: Arc<StoreConsumer>,
    found: i32,
    store: &str,
) -> Result<TopicLog<ConnectStoreError>, ConnectStoreError> {
    let timeout = config.timeout;
    let consumer: StoreConsumer = consumer_config(config)
        .create_with_context(context)
        .map_err(|e| kafka(store, "creating the consumer", &e))?;
    let (topic, s) = (config.topic.clone(), store.to_owned());
    blocking(store, move || {
        TopicLog::new(
            consumer,
            reading,
            &topic,
            found,
            &s,
            timeout,
            // The consumer finds each start itself (about half a second at open, which the
            // offset store saves with `ListedStart`).
            AssignFrom::Beginning,
        )
    })
    .await
}
