//! Shared helpers of the Kafka offset store tests: a broker shared by the tests of one binary, unique
//! topics, and plain rdkafka clients to look at the topic the way Kafka Connect would.

#![allow(dead_code)] // Each test binary uses a different subset.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ferry_api::ConnectMap;
use ferry_kafka::KafkaOffsetStoreConfig;
use ferry_offsets::{OffsetWrite, encode_key, encode_value};
use ferry_testkit::KafkaBroker;
use rdkafka::ClientConfig;
use rdkafka::Message;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

/// The broker shared by every test of this binary (they isolate themselves by topic and group names).
pub fn shared_broker() -> &'static KafkaBroker {
    KafkaBroker::shared().unwrap_or_else(|e| panic!("starting the Kafka broker failed: {e}"))
}

/// A broker of the caller's own (for tests that stop it).
pub fn own_broker() -> KafkaBroker {
    KafkaBroker::start().unwrap_or_else(|e| panic!("starting the Kafka broker failed: {e}"))
}

/// A topic name no other test uses.
pub fn unique_topic(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{prefix}-{}-{}-{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The store's configuration for a single-broker test cluster.
pub fn store_config(broker: &KafkaBroker, topic: &str, partitions: i32) -> KafkaOffsetStoreConfig {
    let mut config = KafkaOffsetStoreConfig::new(broker.bootstrap_servers(), topic);
    config.partitions = partitions;
    config.replication_factor = 1;
    config.timeout = Duration::from_secs(30);
    config
}

fn client(broker: &KafkaBroker) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", broker.bootstrap_servers());
    config
}

pub fn admin(broker: &KafkaBroker) -> AdminClient<DefaultClientContext> {
    client(broker)
        .create()
        .unwrap_or_else(|e| panic!("admin client: {e}"))
}

/// Creates a topic with the given configs (what an operator or Kafka Connect would have done).
pub async fn create_topic(
    broker: &KafkaBroker,
    topic: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) {
    let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for (k, v) in configs {
        new = new.set(k, v);
    }
    let results = admin(broker)
        .create_topics(
            [&new],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        )
        .await
        .unwrap_or_else(|e| panic!("create {topic}: {e}"));
    for r in results {
        r.unwrap_or_else(|(t, code)| panic!("create {t}: {code}"));
    }
    wait_for_partitions(broker, topic, partitions);
}

/// Waits until the topic's metadata shows all its partitions.
pub fn wait_for_partitions(broker: &KafkaBroker, topic: &str, partitions: i32) {
    let consumer: BaseConsumer = client(broker)
        .create()
        .unwrap_or_else(|e| panic!("consumer: {e}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(md) = consumer.fetch_metadata(Some(topic), Duration::from_secs(5))
            && md.topics().iter().any(|t| {
                t.name() == topic
                    && t.error().is_none()
                    && t.partitions().len() == partitions as usize
            })
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "topic {topic} did not get {partitions} partitions"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The topic's `cleanup.policy` as DescribeConfigs reports it.
pub async fn cleanup_policy(broker: &KafkaBroker, topic: &str) -> Option<String> {
    let results = admin(broker)
        .describe_configs([&ResourceSpecifier::Topic(topic)], &AdminOptions::new())
        .await
        .unwrap_or_else(|e| panic!("describe {topic}: {e}"));
    let resource = results.into_iter().next().and_then(Result::ok)?;
    resource.get("cleanup.policy").and_then(|e| e.value.clone())
}

/// A plain producer partitioning like Kafka's Java client (what Kafka Connect's producer does).
pub fn java_like_producer(broker: &KafkaBroker) -> FutureProducer {
    client(broker)
        .set("partitioner", "murmur2_random")
        .set("acks", "all")
        .create()
        .unwrap_or_else(|e| panic!("producer: {e}"))
}

/// Produces raw records in order (one at a time, each acknowledged before the next); returns the
/// partition each landed on.
pub async fn produce_raw(
    producer: &FutureProducer,
    topic: &str,
    records: &[(Vec<u8>, Option<Vec<u8>>)],
) -> Vec<i32> {
    let mut partitions = Vec::with_capacity(records.len());
    for (key, value) in records {
        let mut record = FutureRecord::<[u8], [u8]>::to(topic).key(&key[..]);
        if let Some(v) = value {
            record = record.payload(&v[..]);
        }
        let delivery = producer
            .send(record, Duration::from_secs(30))
            .await
            .unwrap_or_else(|(e, _)| panic!("produce to {topic}: {e}"));
        partitions.push(delivery.partition);
    }
    partitions
}

/// One record as read back raw from the topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRecord {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
}

/// Every record of the topic, read with a plain consumer to the end of each partition, sorted by
/// (partition, offset).
pub fn read_raw(broker: &KafkaBroker, topic: &str, partitions: i32) -> Vec<RawRecord> {
    let consumer: BaseConsumer = client(broker)
        .set("group.id", "ferry-test-raw-reader")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap_or_else(|e| panic!("consumer: {e}"));
    let mut ends = Vec::new();
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        let (_, high) = consumer
            .fetch_watermarks(topic, p, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("watermarks of {topic}/{p}: {e}"));
        ends.push(high);
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer
        .assign(&tpl)
        .unwrap_or_else(|e| panic!("assign: {e}"));
    let mut next = vec![0i64; partitions as usize];
    let mut records = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while next.iter().zip(&ends).any(|(n, e)| n < e) {
        assert!(
            Instant::now() < deadline,
            "reading {topic} raw: stuck at {next:?} of {ends:?}"
        );
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            next[m.partition() as usize] = m.offset() + 1;
            records.push(RawRecord {
                partition: m.partition(),
                offset: m.offset(),
                key: m.key().map(<[u8]>::to_vec),
                value: m.payload().map(<[u8]>::to_vec),
            });
        }
    }
    records.sort_by_key(|r| (r.partition, r.offset));
    records
}

/// The key of connector `connector`'s partition `{"p": p}`.
pub fn key(connector: &str, p: i64) -> Vec<u8> {
    encode_key(connector, Some(&ConnectMap::new().with("p", p).unwrap()))
}

/// The offset `{"position": position}`.
pub fn value(position: i64) -> Vec<u8> {
    encode_value(&ConnectMap::new().with("position", position).unwrap())
}

/// A write of `position` under `k`.
pub fn put(k: &[u8], position: i64) -> OffsetWrite {
    OffsetWrite {
        key: k.to_vec(),
        value: Some(value(position)),
    }
}
