//! Kafka start-up: `KafkaOffsetStore::open` (look the topic up, check it is compacted, read every
//! partition to its end into memory) against a plain rdkafka consumer reading the same topic to its end
//! and touching nothing. Also the topic helpers the end-to-end Kafka case uses.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ferry_kafka::{KafkaOffsetStore, KafkaOffsetStoreConfig};
use rdkafka::ClientConfig;
use rdkafka::Message;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use crate::measure::human_count;
use crate::offsets::fixture;
use crate::results::{Case, Contender, Work};
use crate::{BenchResult, Plan};

/// Kafka Connect's default `offset.storage.partitions`.
const OFFSET_PARTITIONS: i32 = 25;
/// Client timeouts for metadata and offset requests.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Timed runs per contender (each reads the whole topic).
const RUNS: usize = 3;

pub const FERRY_STORE: &str = "Ferry KafkaOffsetStore::open";
/// The reference: a plain consumer with the fetch settings the store's reader sets beyond
/// librdkafka's defaults ([`ferry_kafka::READER_SETTINGS`]), so the row measures what the store does
/// beyond reading the bytes.
pub const PLAIN_CONSUMER: &str = "plain rdkafka consumer to end";
/// The same plain consumer with librdkafka's defaults only, for the effect of those settings.
pub const PLAIN_DEFAULTS: &str = "plain rdkafka consumer to end, librdkafka's defaults";

/// The start-up case: `plan.load_size` offset records in a compacted 25-partition topic.
pub async fn startup(plan: &Plan, bootstrap: &str) -> BenchResult<Case> {
    let records = plan.load_size;
    let topic = format!("ferry-bench-offsets-{records}");
    produce_fixture(bootstrap, &topic, records).await?;
    // One untimed read first, so neither side pays for a cold broker cache alone.
    plain_read_to_end(bootstrap, &topic, ferry_kafka::READER_SETTINGS).await?;
    let (mut ferry, mut plain, mut defaults) = (Vec::new(), Vec::new(), Vec::new());
    for run in 1..=RUNS {
        ferry.push(ferry_open(bootstrap, &topic, records).await?);
        for (settings, times) in [
            (ferry_kafka::READER_SETTINGS, &mut plain),
            (&[][..], &mut defaults),
        ] {
            let (took, read) = plain_read_to_end(bootstrap, &topic, settings).await?;
            if read != records as u64 {
                return Err(crate::BenchError::from(format!(
                    "the plain consumer read {read} records of {topic}, expected {records}"
                )));
            }
            times.push(took);
        }
        eprintln!(
            "  Kafka start-up run {run}/{RUNS}: Ferry {:.3?}, plain {:.3?}, plain with librdkafka's defaults {:.3?}",
            ferry[run - 1],
            plain[run - 1],
            defaults[run - 1]
        );
    }
    let work = Some(Work {
        records: records as u64,
        bytes: 0,
    });
    Ok(Case {
        name: format!(
            "{} offsets from a {OFFSET_PARTITIONS}-partition Kafka topic (Apache Kafka 4.4 on this \
             machine, stock JVM flags)",
            human_count(records as u64)
        ),
        reference: PLAIN_CONSUMER.to_owned(),
        contenders: vec![
            Contender::timed(FERRY_STORE, &ferry, work),
            Contender::timed(PLAIN_CONSUMER, &plain, work),
            Contender::timed(PLAIN_DEFAULTS, &defaults, work),
        ],
        store_size: Some(records as u64),
        changed: None,
    })
}

/// Creates a compacted topic and fills it with `count` distinct offset records (the fixture's key and
/// value bytes) with a plain producer, then checks the end offsets add up.
async fn produce_fixture(bootstrap: &str, topic: &str, count: usize) -> BenchResult<()> {
    create_topic(
        bootstrap,
        topic,
        OFFSET_PARTITIONS,
        &[("cleanup.policy", "compact")],
    )
    .await?;
    let started = Instant::now();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        // Kafka Connect's producer places keys with murmur2.
        .set("partitioner", "murmur2_random")
        .set("linger.ms", "20")
        .create()
        .map_err(|e| crate::BenchError::from(format!("fixture producer: {e}")))?;
    let mut pending: VecDeque<DeliveryFuture> = VecDeque::new();
    let mut last_report = Instant::now();
    for i in 0..count {
        let (key, value) = (fixture::key(i), fixture::value(i as i64));
        send(&producer, &mut pending, topic, Some(&key), &value).await?;
        if last_report.elapsed() >= Duration::from_secs(10) {
            eprintln!("  producing {topic}: {i}/{count} sent");
            last_report = Instant::now();
        }
    }
    for future in pending {
        delivered(future, topic).await?;
    }
    tokio::task::spawn_blocking(move || drop(producer))
        .await
        .map_err(|e| e.to_string())?;
    let total: i64 = end_offsets(bootstrap, topic).await?.iter().sum();
    if total != count as i64 {
        return Err(crate::BenchError::from(format!(
            "fixture {topic}: the end offsets add up to {total}, expected {count}"
        )));
    }
    eprintln!(
        "  fixture {topic}: {count} records in {:.1?}",
        started.elapsed()
    );
    Ok(())
}

/// Sends one record with a plain producer, adding its delivery to `pending`. A full local queue waits
/// for the oldest delivery (what a plain producer loop does); at most 50 000 deliveries stay pending.
pub async fn send(
    producer: &FutureProducer,
    pending: &mut VecDeque<DeliveryFuture>,
    topic: &str,
    key: Option<&[u8]>,
    value: &[u8],
) -> BenchResult<()> {
    loop {
        let mut record = FutureRecord::<[u8], [u8]>::to(topic).payload(value);
        if let Some(key) = key {
            record = record.key(key);
        }
        match producer.send_result(record) {
            Ok(future) => {
                pending.push_back(future);
                break;
            }
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                match pending.pop_front() {
                    Some(oldest) => delivered(oldest, topic).await?,
                    None => tokio::time::sleep(Duration::from_millis(1)).await,
                }
            }
            Err((e, _)) => {
                return Err(crate::BenchError::from(format!(
                    "plain producer to {topic}: {e}"
                )));
            }
        }
    }
    while pending.len() > 50_000 {
        if let Some(oldest) = pending.pop_front() {
            delivered(oldest, topic).await?;
        }
    }
    Ok(())
}

/// Awaits one delivery of a plain producer.
pub async fn delivered(future: DeliveryFuture, topic: &str) -> BenchResult<()> {
    match future.await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err((e, _))) => Err(crate::BenchError::from(format!(
            "a record to {topic} was not delivered: {e}"
        ))),
        Err(_) => Err(crate::BenchError::from(format!(
            "the producer to {topic} went away before the delivery report"
        ))),
    }
}

/// One timed `KafkaOffsetStore::open`; the store is dropped (closing its clients) untimed.
async fn ferry_open(bootstrap: &str, topic: &str, records: usize) -> BenchResult<Duration> {
    let mut config = KafkaOffsetStoreConfig::new(bootstrap, topic);
    config.partitions = OFFSET_PARTITIONS;
    config.replication_factor = 1;
    config.timeout = Duration::from_secs(120);
    let started = Instant::now();
    let store = KafkaOffsetStore::open(config)
        .await
        .map_err(|e| crate::BenchError::from(format!("KafkaOffsetStore::open on {topic}: {e}")))?;
    let took = started.elapsed();
    let read = store.records_read();
    tokio::task::spawn_blocking(move || drop(store))
        .await
        .map_err(|e| e.to_string())?;
    if read != records as u64 {
        return Err(crate::BenchError::from(format!(
            "the Ferry store read {read} records of {topic}, expected {records}"
        )));
    }
    Ok(took)
}

/// One timed plain read of the whole topic: create a consumer (librdkafka's defaults and `settings`),
/// list the end offsets, assign every partition from the beginning, poll until each reached its end.
/// Returns the time and records read.
async fn plain_read_to_end(
    bootstrap: &str,
    topic: &str,
    settings: &'static [(&'static str, &'static str)],
) -> BenchResult<(Duration, u64)> {
    let (bootstrap, topic) = (bootstrap.to_owned(), topic.to_owned());
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", "ferry-bench-plain-reader")
            .set("enable.auto.commit", "false");
        for (key, value) in settings {
            config.set(*key, *value);
        }
        let consumer: BaseConsumer = config
            .create()
            .map_err(|e| crate::BenchError::from(format!("plain consumer: {e}")))?;
        let ends = list_end_offsets(&consumer, &topic)?;
        let mut assignment = TopicPartitionList::new();
        for p in 0..ends.len() as i32 {
            assignment
                .add_partition_offset(&topic, p, Offset::Beginning)
                .map_err(|e| e.to_string())?;
        }
        consumer.assign(&assignment).map_err(|e| e.to_string())?;
        let mut done: Vec<bool> = ends.iter().map(|e| *e == 0).collect();
        let mut behind = done.iter().filter(|d| !**d).count();
        let mut read = 0u64;
        let mut last_progress = Instant::now();
        while behind > 0 {
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => {
                    read += 1;
                    last_progress = Instant::now();
                    let p = message.partition() as usize;
                    if p < done.len() && !done[p] && message.offset() + 1 >= ends[p] {
                        done[p] = true;
                        behind -= 1;
                    }
                }
                Some(Err(e)) => return Err(crate::BenchError::from(format!("plain consumer of {topic}: {e}"))),
                None if last_progress.elapsed() > REQUEST_TIMEOUT => {
                    return Err(crate::BenchError::from(format!(
                        "plain consumer of {topic}: no progress for {REQUEST_TIMEOUT:?} after {read} records"
                    )));
                }
                None => {}
            }
        }
        let took = started.elapsed();
        drop(consumer);
        Ok((took, read))
    })
    .await
    .map_err(|e| e.to_string())?
}

/// Creates `topic` (replication 1) with `configs` and waits until the metadata shows every partition.
pub async fn create_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> BenchResult<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .map_err(|e| crate::BenchError::from(format!("admin client: {e}")))?;
    let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for (k, v) in configs {
        new = new.set(k, v);
    }
    let results = admin
        .create_topics(
            [&new],
            &AdminOptions::new().operation_timeout(Some(REQUEST_TIMEOUT)),
        )
        .await
        .map_err(|e| crate::BenchError::from(format!("creating {topic}: {e}")))?;
    for result in results {
        result.map_err(|(t, code)| format!("creating {t}: {code}"))?;
    }
    tokio::task::spawn_blocking(move || drop(admin))
        .await
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    loop {
        match end_offsets(bootstrap, topic).await {
            Ok(ends) if ends.len() == partitions as usize => return Ok(()),
            _ if Instant::now() > deadline => {
                return Err(crate::BenchError::from(format!(
                    "topic {topic} did not show {partitions} partitions within {REQUEST_TIMEOUT:?}"
                )));
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The end offset of every partition of `topic`, in partition order.
pub async fn end_offsets(bootstrap: &str, topic: &str) -> BenchResult<Vec<i64>> {
    let (bootstrap, topic) = (bootstrap.to_owned(), topic.to_owned());
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .create()
            .map_err(|e| crate::BenchError::from(format!("consumer for end offsets: {e}")))?;
        list_end_offsets(&consumer, &topic)
    })
    .await
    .map_err(|e| e.to_string())?
}

fn list_end_offsets(consumer: &BaseConsumer, topic: &str) -> BenchResult<Vec<i64>> {
    let metadata = consumer
        .fetch_metadata(Some(topic), REQUEST_TIMEOUT)
        .map_err(|e| crate::BenchError::from(format!("metadata of {topic}: {e}")))?;
    let partitions = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic && t.error().is_none())
        .map_or(0, |t| t.partitions().len() as i32);
    if partitions == 0 {
        return Err(crate::BenchError::from(format!(
            "topic {topic} has no partitions in the metadata"
        )));
    }
    let mut request = TopicPartitionList::with_capacity(partitions as usize);
    for p in 0..partitions {
        request
            .add_partition_offset(topic, p, Offset::End)
            .map_err(|e| e.to_string())?;
    }
    let answer = consumer
        .offsets_for_times(request, REQUEST_TIMEOUT)
        .map_err(|e| crate::BenchError::from(format!("ListOffsets for {topic}: {e}")))?;
    let mut offsets = vec![0; partitions as usize];
    for element in answer.elements() {
        element.error().map_err(|e| e.to_string())?;
        match (
            element.offset(),
            offsets.get_mut(element.partition() as usize),
        ) {
            (Offset::Offset(o), Some(slot)) => *slot = o,
            (other, _) => {
                return Err(crate::BenchError::from(format!(
                    "ListOffsets for {topic}: {other:?} for partition {}",
                    element.partition()
                )));
            }
        }
    }
    Ok(offsets)
}
