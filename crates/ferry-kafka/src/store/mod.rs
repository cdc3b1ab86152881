//! [`KafkaOffsetStore`]: Kafka Connect's `offset.storage=kafka` store, an [`OffsetBackingStore`] kept in
//! a compacted Kafka topic, byte-compatible with the offsets topic Kafka Connect writes.
//!
//! # Contract
//!
//! - **Format.** One record per offset: key `["connector",{partition}]`, value `{offset}` or null (a
//!   tombstone), exactly the bytes the writer encodes. Records are partitioned like Kafka's Java client
//!   (murmur2 of the key), so Ferry and Kafka Connect put a key on the same partition.
//! - **Durability.** [`set`](OffsetBackingStore::set) returns `Ok` once every record of the batch is
//!   acknowledged by all in-sync replicas (`acks=all`, idempotent producer). It fails if any record
//!   fails. A batch is *not* atomic: after a failure some of its records may be durable. For offsets
//!   this is safe — each record is a committed position of its own source partition — and it is what
//!   Kafka Connect does without exactly-once.
//! - **Visibility.** The in-memory view learns only from the topic: a write is visible once it is in
//!   the log. Every read first reads every partition to its current end, so a store sees the writes
//!   another worker's store made durable before the read began (read-your-writes across workers).
//!   Reads are `read_committed`, and every read after the open waits until no transaction open when
//!   it began is left (the high watermark then, reached by the last stable offsets): a task writer's
//!   commit is seen by every later read, and another task's transaction left open by a killed worker
//!   cannot hide later commits. A transaction open longer than the store's timeout fails the read
//!   (retriably) rather than let it answer older offsets.
//! - **Ordering.** Within a Kafka partition the log order wins. Logically equal keys with different
//!   bytes (field order) can sit on different partitions; between those the newer record timestamp
//!   wins ([`ferry_offsets::OffsetTable::apply_at`]). A store stamps its batches with strictly
//!   increasing timestamps, so its own successive writes order correctly; writers on different hosts
//!   rely on their clocks. Inside one batch, logically equal keys with different bytes are not ordered
//!   across partitions ([`ferry_offsets::OffsetWriter`] never sends such a batch).
//! - **Tombstones** remove a partition; the partitions a connector knows are the live ones in the
//!   topic. Known limitation: a tombstone removes only the key bytes it was written with. If a
//!   partition was also written under other bytes (another field order) on another Kafka partition,
//!   that older record stays in the topic; the store ignores it while the newer tombstone exists, but
//!   once the broker's compaction drops the tombstone (`delete.retention.ms`, default 24 h) a restart
//!   would see the older record again. Kafka Connect, which compares keys as bytes, has no such case.
//! - **Partitions** are looked up once, at open. Partitions added to the topic later are read after a
//!   restart (as in Kafka Connect); adding partitions to an offsets topic moves keys to other
//!   partitions, which the timestamp ordering above resolves on that restart.
//! - **Dropping** the store closes its clients, which blocks the dropping thread briefly (a few hundred
//!   ms, longer with records still in flight).
//!
//! Thread-safe: reads share one consumer under a lock and run on blocking threads; writes go through
//! one producer.

mod config;
mod log;
mod partition;
mod task_writer;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use ferry_offsets::{
    NamedStore, OffsetBackingStore, OffsetWrite, StoreError, StoredOffset, StoredRecord,
};
use rdkafka::ClientConfig;
use rdkafka::admin::AdminClient;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};

pub use config::{DEFAULT_PARTITIONS, DEFAULT_REPLICATION_FACTOR, KafkaOffsetStoreConfig};
pub use partition::{java_murmur2, java_partition};

use crate::admin::{self, OffsetsTopic, TopicState};
use crate::client::{StoreConsumer, StoreContext, backend, describe, is_retriable, kafka};
use log::OffsetLog;

/// An [`OffsetBackingStore`] in a compacted Kafka topic (`offset.storage.topic`). See the module
/// documentation for its guarantees.
pub struct KafkaOffsetStore {
    describe: String,
    topic: String,
    /// How it was opened: a connector's own topic is opened with the same settings.
    config: KafkaOffsetStoreConfig,
    /// The producer; replaced by a fresh one after a failed batch (see [`KafkaOffsetStore::renew_producer`]).
    producer: Mutex<FutureProducer<StoreContext>>,
    producer_config: ClientConfig,
    log: Arc<Mutex<OffsetLog>>,
    /// For [`OffsetBackingStore::history`], which reads the topic again with a consumer of its own.
    history_reader: HistoryReader,
    records_read: Arc<AtomicU64>,
    /// The timestamp of the last batch sent (by the store or a task writer), so the next one is
    /// strictly newer.
    last_timestamp: Arc<AtomicI64>,
    /// A `read_uncommitted` client asking for high watermarks: every read after the open goes past
    /// the transactions open when it starts ([`OffsetLog::read_past_open_transactions`]).
    watermarks: Arc<StoreConsumer>,
}

impl std::fmt::Debug for KafkaOffsetStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaOffsetStore")
            .field("store", &self.describe)
            .finish_non_exhaustive()
    }
}

/// What reading the whole topic again takes.
struct HistoryReader {
    consumer_config: ClientConfig,
    /// The log's ListOffsets client, shared.
    offsets_client: Arc<StoreConsumer>,
    partitions: i32,
    timeout: Duration,
}

/// Runs blocking client work off the async runtime's threads.
async fn blocking<T: Send + 'static>(
    store: &str,
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        backend(
            store,
            format!("the offset store's reader thread failed: {e}"),
            false,
        )
    })?
}

fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl KafkaOffsetStore {
    /// Opens the store: creates the topic (compacted, `partitions` × `replication_factor`) if it is
    /// missing, refuses an existing topic whose `cleanup.policy` is not exactly `compact`, then reads the
    /// whole topic into memory (logging progress for large topics) before returning.
    ///
    /// # Errors
    /// [`StoreError::Backend`]: the configuration is invalid, the topic is not compacted, or the
    /// brokers did not answer within `config.timeout` (retriable).
    pub async fn open(config: KafkaOffsetStoreConfig) -> Result<Self, StoreError> {
        let store = describe(&config.topic, &config.bootstrap_servers);
        config
            .validate()
            .map_err(|e| backend(&store, e.to_string(), false))?;
        let started = std::time::Instant::now();
        let phase = |what: &str| {
            tracing::debug!(store = %store, "open: {what} after {:.1?}", started.elapsed());
        };
        let context = StoreContext {
            store: store.clone(),
        };
        let admin: AdminClient<StoreContext> = config
            .admin()
            .create_with_context(context.clone())
            .map_err(|e| kafka(&store, "creating the admin client", &e))?;
        // Answers metadata and ListOffsets requests; the reading consumer has connections of its own.
        let offsets_client: Arc<StoreConsumer> = Arc::new(
            config
                .consumer()
                .create_with_context(context.clone())
                .map_err(|e| kafka(&store, "creating the consumer", &e))?,
        );

        let watermarks: Arc<StoreConsumer> = Arc::new(
            config
                .consumer()
                .set("isolation.level", "read_uncommitted")
                .create_with_context(context.clone())
                .map_err(|e| kafka(&store, "creating the high-watermark client", &e))?,
        );

        // Created first, so that their connections come up while the topic is looked up.
        let producer_config = config.producer();
        let producer: FutureProducer<StoreContext> = producer_config
            .create_with_context(context.clone())
            .map_err(|e| kafka(&store, "creating the producer", &e))?;
        let consumer_config = config.consumer();
        let consumer: StoreConsumer = consumer_config
            .create_with_context(context)
            .map_err(|e| kafka(&store, "creating the consumer", &e))?;

        let partitions = ensure_topic(&config, admin, &offsets_client, &store, phase).await?;
        let timeout = config.timeout;
        let log = read_at_open(
            &config,
            consumer,
            offsets_client,
            partitions,
            &store,
            started,
        )
        .await?;
        Ok(Self {
            describe: store,
            topic: config.topic.clone(),
            config,
            producer: Mutex::new(producer),
            producer_config,
            records_read: log.records(),
            history_reader: HistoryReader {
                consumer_config,
                offsets_client: log.offsets_client(),
                partitions,
                timeout,
            },
            log: Arc::new(Mutex::new(log)),
            last_timestamp: Arc::new(AtomicI64::new(0)),
            watermarks,
        })
    }

    /// Reads every partition to its current end, then answers `query` from the offsets read.
    async fn read<T: Send + 'static>(
        &self,
        query: impl FnOnce(&ferry_offsets::OffsetTable) -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        read_log(&self.log, &self.describe, self.watermarks.clone(), query).await
    }

    fn producer(&self) -> FutureProducer<StoreContext> {
        self.producer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the producer after a failed batch. An idempotent producer whose records timed out or
    /// failed may be left in a state it cannot leave by itself (librdkafka's fatal idempotence errors
    /// require a new producer, and some brokers reject its sequence numbers after a restart); a new
    /// producer gets a new producer id. The old one is dropped on a blocking thread (dropping flushes).
    async fn renew_producer(&self) {
        match self
            .producer_config
            .create_with_context::<_, FutureProducer<StoreContext>>(StoreContext {
                store: self.describe.clone(),
            }) {
            Ok(fresh) => {
                let old = std::mem::replace(
                    &mut *self.producer.lock().unwrap_or_else(PoisonError::into_inner),
                    fresh,
                );
                let _ = tokio::task::spawn_blocking(move || drop(old)).await;
            }
            // Keep the old producer; the next batch tries again.
            Err(e) => {
                tracing::warn!(store = %self.describe, error = %e, "could not create a new offset producer")
            }
        }
    }

    /// Records read from the topic since the store was opened (for tests and metrics).
    pub fn records_read(&self) -> u64 {
        self.records_read.load(Ordering::Relaxed)
    }
}

/// Waits for one delivery; returns the error text of a failed one.
async fn delivered(future: DeliveryFuture) -> Result<(), (String, bool)> {
    match future.await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err((error, _))) => Err((error.to_string(), is_retriable(&error))),
        Err(_canceled) => Err((
            "the producer was shut down before the broker answered".to_owned(),
            true,
        )),
    }
}

#[async_trait]
impl OffsetBackingStore for KafkaOffsetStore {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    async fn get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        // Nothing asked, nothing to read (a caller that only needs the store opened asks this).
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let keys = keys.to_vec();
        self.read(move |table| {
            keys.iter()
                .map(|k| table.get(k).map(<[u8]>::to_vec))
                .collect()
        })
        .await
    }

    /// Sends one record per write and waits until every one is acknowledged. The in-memory view is
    /// not updated here: it learns the writes from the topic on the next read.
    async fn set(&self, batch: &[OffsetWrite]) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        let timestamp = batch_timestamp(&self.last_timestamp);
        let producer = self.producer();
        let result = self.send_all(&producer, batch, timestamp).await;
        if result.is_err() {
            drop(producer);
            self.renew_producer().await;
        }
        result
    }

    async fn connector_offsets(&self, connector: &str) -> Result<Vec<StoredOffset>, StoreError> {
        let connector = connector.to_owned();
        self.read(move |table| table.connector_entries(&connector))
            .await
    }

    async fn entries(&self) -> Result<Vec<StoredOffset>, StoreError> {
        self.read(|table| table.entries()).await
    }

    /// A transactional producer with `transactional.id = fencing_id` (see [`task_writer`]).
    async fn open_task_writer(
        &self,
        fencing_id: &str,
    ) -> Result<Option<Arc<dyn OffsetBackingStore>>, StoreError> {
        let writer = task_writer::TaskWriter::open(
            task_writer::Parts {
                describe: self.describe.clone(),
                topic: self.topic.clone(),
                producer_config: self.producer_config.clone(),
                log: self.log.clone(),
                watermarks: self.watermarks.clone(),
                last_timestamp: self.last_timestamp.clone(),
                timeout: self.history_reader.timeout,
            },
            fencing_id,
        )
        .await?;
        Ok(Some(Arc::new(writer)))
    }

    /// Every record in the topic (what the broker's compaction has not removed), raw, read from the
    /// beginning of every partition by a consumer of its own: each partition in its log order, and
    /// across partitions by record timestamp, as the store applies them.
    /// A connector's own offsets topic (`offsets.storage.topic`) on this store's cluster, opened
    /// (and created when missing) with this store's settings, as Kafka Connect creates it with the
    /// worker's `offset.storage.*`.
    async fn open_named(&self, name: &str) -> Result<NamedStore, StoreError> {
        if name == self.topic {
            return Ok(NamedStore::This);
        }
        let config = KafkaOffsetStoreConfig {
            topic: name.to_owned(),
            ..self.config.clone()
        };
        Ok(NamedStore::Other(Arc::new(Self::open(config).await?)))
    }

    async fn history(&self) -> Result<Vec<StoredRecord>, StoreError> {
        let offsets_client = self.history_reader.offsets_client.clone();
        let consumer_config = self.history_reader.consumer_config.clone();
        let (partitions, timeout) = (self.history_reader.partitions, self.history_reader.timeout);
        let (topic, store) = (self.topic.clone(), self.describe.clone());
        blocking(&self.describe, move || {
            let consumer: StoreConsumer = consumer_config
                .create_with_context(StoreContext {
                    store: store.clone(),
                })
                .map_err(|e| kafka(&store, "creating the history consumer", &e))?;
            let mut log = OffsetLog::new(
                consumer,
                offsets_client,
                &topic,
                partitions,
                &store,
                timeout,
            )?
            .record_history();
            log.read_to_end()?;
            Ok(log.into_history())
        })
        .await
    }
}

/// Reads every partition of `log` to its current end, then answers `query` from the offsets read.
/// The read goes past every transaction open when it starts (`watermarks` is a `read_uncommitted`
/// client; [`OffsetLog::read_past_open_transactions`]).
async fn read_log<T: Send + 'static>(
    log: &Arc<Mutex<OffsetLog>>,
    describe: &str,
    watermarks: Arc<StoreConsumer>,
    query: impl FnOnce(&ferry_offsets::OffsetTable) -> T + Send + 'static,
) -> Result<T, StoreError> {
    let log = log.clone();
    let store = describe.to_owned();
    blocking(describe, move || {
        // A panic during a read leaves the table consistent (records are applied one by one), so a
        // poisoned lock is still usable.
        let mut log = log.lock().unwrap_or_else(PoisonError::into_inner);
        let read = log.read_past_open_transactions(&watermarks)?;
        if read.elapsed > Duration::from_secs(2) {
            let (records, elapsed) = (read.records, read.elapsed);
            tracing::info!(store = %store, "caught up with {records} offset records in {elapsed:.1?}");
        }
        Ok(query(log.table()))
    })
    .await
}

/// A timestamp strictly newer than the previous batch's (`last`), and not older than the clock.
fn batch_timestamp(last: &AtomicI64) -> i64 {
    let now = now_millis();
    let previous = last.fetch_max(now, Ordering::AcqRel);
    if previous >= now {
        // Same millisecond (or the clock went back): one past the previous batch.
        last.fetch_add(1, Ordering::AcqRel) + 1
    } else {
        now
    }
}

impl KafkaOffsetStore {
    /// Sends one record per write, all stamped `timestamp`, and waits for every delivery.
    async fn send_all(
        &self,
        producer: &FutureProducer<StoreContext>,
        batch: &[OffsetWrite],
        timestamp: i64,
    ) -> Result<(), StoreError> {
        send_all(producer, &self.topic, &self.describe, batch, timestamp).await
    }
}

/// Sends one record per write to `topic`, all stamped `timestamp`, and waits for every delivery.
async fn send_all(
    producer: &FutureProducer<StoreContext>,
    topic: &str,
    describe: &str,
    batch: &[OffsetWrite],
    timestamp: i64,
) -> Result<(), StoreError> {
    let mut pending: VecDeque<DeliveryFuture> = VecDeque::with_capacity(batch.len());
    let mut failures: Vec<(String, bool)> = Vec::new();
    let mut note = |result: Result<(), (String, bool)>| {
        if let Err(failure) = result {
            failures.push(failure);
        }
    };
    for write in batch {
        loop {
            let mut record = FutureRecord::<[u8], [u8]>::to(topic)
                .key(&write.key[..])
                .timestamp(timestamp);
            if let Some(value) = &write.value {
                record = record.payload(&value[..]);
            }
            match producer.send_result(record) {
                Ok(future) => {
                    pending.push_back(future);
                    break;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    // The producer's queue is full: wait for the oldest delivery, then try again.
                    match pending.pop_front() {
                        Some(oldest) => {
                            note(delivered(oldest).await);
                        }
                        None => tokio::time::sleep(Duration::from_millis(10)).await,
                    }
                }
                Err((error, _)) => {
                    // Not sent. Wait for what was sent, so no delivery outlives the call, then fail.
                    for future in pending {
                        let _ = delivered(future).await;
                    }
                    return Err(kafka(
                        describe,
                        &format!("sending {} offset records", batch.len()),
                        &error,
                    ));
                }
            }
        }
    }
    for future in pending {
        note(delivered(future).await);
    }
    match failures.first() {
        None => Ok(()),
        Some((first, _)) => {
            let retriable = failures.iter().all(|(_, r)| *r);
            Err(backend(
                describe,
                format!(
                    "{} of {} offset records were not acknowledged by the brokers (first error: {first}); \
                         the flush failed and will be retried. Check that the brokers in bootstrap.servers are \
                         running and that the topic accepts writes",
                    failures.len(),
                    batch.len()
                ),
                retriable,
            ))
        }
    }
}

/// Looks the offsets topic up (checking its compaction alongside), creates it compacted when it is
/// missing, and returns its partition count; `admin` is dropped on a blocking thread.
async fn ensure_topic(
    config: &KafkaOffsetStoreConfig,
    admin: AdminClient<StoreContext>,
    offsets_client: &Arc<StoreConsumer>,
    store: &str,
    phase: impl Fn(&str),
) -> Result<i32, StoreError> {
    let (c, topic, timeout, s) = (
        offsets_client.clone(),
        config.topic.clone(),
        config.timeout,
        store.to_owned(),
    );
    // Most opens find the topic: its compaction check runs alongside the lookup (for a missing
    // topic it fails, is ignored, and runs again after the topic is created; a failed check of a
    // topic found existing runs again too).
    let described = offsets_topic(config);
    let (existing, compacted) = tokio::join!(
        blocking(store, move || admin::topic_state(&c, &topic, timeout, &s)),
        admin::verify_compacted(&admin, &described, store)
    );
    let existing = existing?;
    phase("topic looked up and compaction checked");
    let partitions = match existing {
        TopicState::Exists(partitions) => {
            if compacted.is_err() {
                // The check may have run before another worker created the topic (two workers
                // starting together): only a check made once the topic exists counts.
                admin::verify_compacted(&admin, &described, store).await?;
            }
            partitions
        }
        TopicState::Missing => {
            tracing::info!(
                topic = %config.topic,
                "creating offsets topic {} ({} partitions, replication factor {}, cleanup.policy=compact)",
                config.topic,
                config.partitions,
                config.replication_factor
            );
            admin::create_topic(&admin, &offsets_topic(config), store).await?;
            let (c, topic, s) = (
                offsets_client.clone(),
                config.topic.clone(),
                store.to_owned(),
            );
            let partitions =
                blocking(store, move || admin::await_topic(&c, &topic, timeout, &s)).await?;
            // Checked once the broker shows the topic: right after another worker created it, the
            // broker may not know it yet and answers DescribeConfigs without its configuration.
            admin::verify_compacted(&admin, &offsets_topic(config), store).await?;
            partitions
        }
    };
    // Dropping a client joins its threads: on a blocking thread, and nothing waits for it.
    drop(tokio::task::spawn_blocking(move || drop(admin)));
    Ok(partitions)
}

/// Assigns `consumer` every partition of the topic and reads the whole topic into memory, logging
/// how much it read and how long it took since `started`.
async fn read_at_open(
    config: &KafkaOffsetStoreConfig,
    consumer: StoreConsumer,
    offsets_client: Arc<StoreConsumer>,
    partitions: i32,
    store: &str,
    started: std::time::Instant,
) -> Result<OffsetLog, StoreError> {
    let timeout = config.timeout;
    let (topic, s) = (config.topic.clone(), store.to_owned());
    blocking(store, move || {
        let mut log = OffsetLog::new(consumer, offsets_client, &topic, partitions, &s, timeout)?;
        tracing::debug!(store = %s, "open: partitions assigned after {:.1?}", started.elapsed());
        let read = log.read_to_end()?;
        tracing::info!(
            topic = %topic,
            "read {} offset records ({} live offsets) from topic {topic} ({partitions} partitions) in {:.1?}",
            read.records,
            log.table().len(),
            read.elapsed
        );
        Ok(log)
    })
    .await
}

/// The parts of the store's configuration the topic administration needs.
fn offsets_topic(config: &KafkaOffsetStoreConfig) -> OffsetsTopic<'_> {
    OffsetsTopic {
        kind: admin::TopicKind::Offsets,
        topic: &config.topic,
        bootstrap_servers: &config.bootstrap_servers,
        partitions: config.partitions,
        replication_factor: config.replication_factor,
        timeout: config.timeout,
    }
}
