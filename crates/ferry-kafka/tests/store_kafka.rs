//! Kafka-specific behaviours of `KafkaOffsetStore` on a real broker (Apache Kafka): the topic policy check,
//! topic creation, read-your-writes across two workers' stores, and failures that must fail rather
//! than hang.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod store_support;

use std::time::{Duration, Instant};

use ferry_api::ConnectMap;
use ferry_kafka::KafkaOffsetStore;
use ferry_offsets::{OffsetBackingStore, OffsetWrite, StoreError, encode_key, encode_value};
use store_support::{
    cleanup_policy, create_topic, java_like_producer, own_broker, produce_raw, shared_broker,
    store_config, unique_topic, wait_for_partitions,
};

fn key(connector: &str, p: i64) -> Vec<u8> {
    encode_key(connector, Some(&ConnectMap::new().with("p", p).unwrap()))
}

fn value(position: i64) -> Vec<u8> {
    encode_value(&ConnectMap::new().with("position", position).unwrap())
}

fn put(k: &[u8], position: i64) -> OffsetWrite {
    OffsetWrite {
        key: k.to_vec(),
        value: Some(value(position)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_topic_that_is_not_compacted_is_refused() {
    let broker = shared_broker();
    for policy in ["delete", "compact,delete"] {
        let topic = unique_topic("not-compacted");
        create_topic(broker, &topic, 3, &[("cleanup.policy", policy)]).await;
        let err = KafkaOffsetStore::open(store_config(broker, &topic, 3))
            .await
            .err()
            .unwrap_or_else(|| panic!("a topic with cleanup.policy={policy} must be refused"));
        let text = err.to_string();
        assert!(
            matches!(
                err,
                StoreError::Backend {
                    retriable: false,
                    ..
                }
            ),
            "not retriable: {text}"
        );
        assert!(
            text.contains(&format!("topic {topic} has cleanup.policy={policy},")),
            "names topic and policy: {text}"
        );
        assert!(
            text.contains("must have cleanup.policy=compact"),
            "says what is required: {text}"
        );
        assert!(
            text.contains("--add-config cleanup.policy=compact"),
            "says how to fix it: {text}"
        );
        assert_eq!(
            cleanup_policy(broker, &topic).await.as_deref(),
            Some(policy),
            "the topic was not changed"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_topic_is_created_compacted_and_an_existing_compacted_one_is_used() {
    let broker = shared_broker();
    let topic = unique_topic("created");
    let store = KafkaOffsetStore::open(store_config(broker, &topic, 7))
        .await
        .unwrap_or_else(|e| panic!("open: {e}"));
    assert_eq!(
        cleanup_policy(broker, &topic).await.as_deref(),
        Some("compact")
    );
    wait_for_partitions(broker, &topic, 7);
    assert_eq!(
        store.describe(),
        format!("kafka topic {topic} at {}", broker.bootstrap_servers())
    );
    drop(store);

    // Created by someone else (Kafka Connect) with another partition count: used as it is.
    let existing = unique_topic("existing");
    create_topic(broker, &existing, 5, &[("cleanup.policy", "compact")]).await;
    let store = KafkaOffsetStore::open(store_config(broker, &existing, 25))
        .await
        .unwrap_or_else(|e| panic!("open existing: {e}"));
    let keys: Vec<Vec<u8>> = (0..20).map(|p| key("c", p)).collect();
    let batch: Vec<OffsetWrite> = keys.iter().map(|k| put(k, 1)).collect();
    store
        .set(&batch)
        .await
        .unwrap_or_else(|e| panic!("set: {e}"));
    assert!(store.get(&keys).await.unwrap().iter().all(Option::is_some));
    wait_for_partitions(broker, &existing, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_factor_minus_one_uses_the_brokers_default() {
    let broker = shared_broker();
    let topic = unique_topic("rf-default");
    let mut config = store_config(broker, &topic, 2);
    config.replication_factor = -1;
    let store = KafkaOffsetStore::open(config)
        .await
        .unwrap_or_else(|e| panic!("open: {e}"));
    store
        .set(&[put(&key("c", 1), 5)])
        .await
        .unwrap_or_else(|e| panic!("set: {e}"));
    assert_eq!(
        store.get(&[key("c", 1)]).await.unwrap(),
        vec![Some(value(5))]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_configuration_fails_before_contacting_the_broker() {
    let mut config = ferry_kafka::KafkaOffsetStoreConfig::new("127.0.0.1:1", "");
    let err = KafkaOffsetStore::open(config.clone())
        .await
        .err()
        .unwrap_or_else(|| panic!("must fail"));
    assert!(
        err.to_string().contains("offset.storage.topic is required"),
        "{err}"
    );
    assert!(!err.is_retriable());
    config.topic = "t".to_owned();
    config
        .client_overrides
        .push(("partitioner".to_owned(), "consistent_random".to_owned()));
    let err = KafkaOffsetStore::open(config)
        .await
        .err()
        .unwrap_or_else(|| panic!("must fail"));
    assert!(
        err.to_string().contains("partitioner cannot be overridden"),
        "{err}"
    );
}

/// Two workers' stores on one topic: what one flushes, the other reads without reopening.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_your_writes_between_two_stores_on_one_topic() {
    let broker = shared_broker();
    let config = store_config(broker, &unique_topic("ryw"), 25);
    let a = KafkaOffsetStore::open(config.clone())
        .await
        .unwrap_or_else(|e| panic!("open a: {e}"));
    let b = KafkaOffsetStore::open(config)
        .await
        .unwrap_or_else(|e| panic!("open b: {e}"));
    let keys: Vec<Vec<u8>> = (0..30).map(|p| key("c", p)).collect();
    assert!(b.get(&keys).await.unwrap().iter().all(Option::is_none));
    for round in 1..=3 {
        let batch: Vec<OffsetWrite> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| put(k, round * 100 + i as i64))
            .collect();
        a.set(&batch).await.unwrap_or_else(|e| panic!("a.set: {e}"));
        let seen = b.get(&keys).await.unwrap_or_else(|e| panic!("b.get: {e}"));
        for (i, s) in seen.iter().enumerate() {
            assert_eq!(
                *s,
                Some(value(round * 100 + i as i64)),
                "round {round}: b sees a's flush of key {i}"
            );
        }
    }
    // And the other way round, with a tombstone; connector_offsets and entries read to the end too.
    b.set(&[
        OffsetWrite {
            key: keys[0].clone(),
            value: None,
        },
        put(&keys[1], 7),
    ])
    .await
    .unwrap_or_else(|e| panic!("b.set: {e}"));
    let known = a.connector_offsets("c").await.unwrap();
    assert_eq!(known.len(), 29, "a knows the tombstone removed a partition");
    assert!(known.contains(&(keys[1].clone(), value(7))));
    let all = a.entries().await.unwrap();
    assert_eq!(all.len(), 29);
}

/// Records in the topic that are not offsets: a null key is skipped (with a WARN), an undecodable key
/// is kept byte-exact, as every store does. Kafka refuses a record without a key on a compacted topic,
/// so the null key comes from the topic's earlier life with `cleanup.policy=delete` (an operator made
/// it compacted later; the old record stays in the log).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_records_in_the_topic_do_not_break_the_start() {
    let broker = shared_broker();
    let topic = unique_topic("foreign");
    create_topic(broker, &topic, 3, &[("cleanup.policy", "delete")]).await;
    let producer = java_like_producer(broker);
    produce_raw(
        &producer,
        &topic,
        &[
            (b"not json".to_vec(), Some(b"x".to_vec())),
            (key("c", 1), Some(value(3))),
        ],
    )
    .await;
    // A null key (no key at all).
    producer
        .send(
            rdkafka::producer::FutureRecord::<[u8], [u8]>::to(&topic).payload(&b"orphan"[..]),
            Duration::from_secs(10),
        )
        .await
        .unwrap_or_else(|(e, _)| panic!("{e}"));
    make_compacted(broker, &topic).await;
    let store = KafkaOffsetStore::open(store_config(broker, &topic, 3))
        .await
        .unwrap_or_else(|e| panic!("open: {e}"));
    assert_eq!(store.records_read(), 3);
    let got = store
        .get(&[key("c", 1), b"not json".to_vec()])
        .await
        .unwrap();
    assert_eq!(got, vec![Some(value(3)), Some(b"x".to_vec())]);
    assert_eq!(store.entries().await.unwrap().len(), 2);
}

/// Sets `cleanup.policy=compact` on an existing topic, as `kafka-configs --alter` would, and waits
/// until the broker reports it.
async fn make_compacted(broker: &ferry_testkit::KafkaBroker, topic: &str) {
    use rdkafka::admin::{AdminOptions, AlterConfig, ResourceSpecifier};
    let results = store_support::admin(broker)
        .alter_configs(
            &[AlterConfig::new(ResourceSpecifier::Topic(topic)).set("cleanup.policy", "compact")],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    for result in results {
        result.unwrap_or_else(|(_, code)| panic!("altering {topic}: {code}"));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while cleanup_policy(broker, topic).await.as_deref() != Some("compact") {
        assert!(
            Instant::now() < deadline,
            "{topic} did not become compacted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A flush whose records the broker never acknowledges fails (retriable) instead of hanging, a read
/// fails the same way, and the store works again once the broker is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_send_fails_the_flush_and_the_store_recovers() {
    let mut broker = own_broker();
    let mut config = store_config(&broker, &unique_topic("failing"), 3);
    config
        .client_overrides
        .push(("message.timeout.ms".to_owned(), "3000".to_owned()));
    config.timeout = Duration::from_secs(5);
    let store = KafkaOffsetStore::open(config)
        .await
        .unwrap_or_else(|e| panic!("open: {e}"));
    store
        .set(&[put(&key("c", 1), 1)])
        .await
        .unwrap_or_else(|e| panic!("set: {e}"));

    broker.stop();
    let started = Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(30),
        store.set(&[put(&key("c", 1), 2), put(&key("c", 2), 2)]),
    )
    .await
    .unwrap_or_else(|_| panic!("set hung for 30 s with the broker down"));
    let err = result
        .err()
        .unwrap_or_else(|| panic!("set must fail while the broker is down"));
    let text = err.to_string();
    assert!(err.is_retriable(), "a broker outage is retriable: {text}");
    assert!(
        text.contains("2 of 2 offset records were not acknowledged"),
        "{text}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "failed after message.timeout.ms, not later: {:?}",
        started.elapsed()
    );

    let read = tokio::time::timeout(Duration::from_secs(60), store.get(&[key("c", 1)]))
        .await
        .unwrap_or_else(|_| panic!("get hung with the broker down"));
    let err = read
        .err()
        .unwrap_or_else(|| panic!("get must fail while the broker is down"));
    assert!(err.is_retriable(), "{err}");

    broker.restart().unwrap_or_else(|e| panic!("restart: {e}"));
    // The clients reconnect with backoff (up to reconnect.backoff.max.ms), so the first calls may still
    // fail, retriably, as the runtime's next commit would; within a minute both work again.
    let deadline = Instant::now() + Duration::from_secs(60);
    let got = loop {
        let attempt = match store.set(&[put(&key("c", 1), 3)]).await {
            Ok(()) => store.get(&[key("c", 1)]).await,
            Err(e) => Err(e),
        };
        match attempt {
            Ok(got) => break got,
            Err(e) if e.is_retriable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(500)).await
            }
            Err(e) => panic!(
                "the store did not recover after the broker came back: {e}\nbroker log:\n{}",
                broker.log_tail()
            ),
        }
    };
    assert_eq!(got, vec![Some(value(3))]);
}

/// A batch larger than the producer's queue is still sent whole: the store waits for earlier
/// deliveries when the queue is full, then goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_larger_than_the_producer_queue_is_sent_whole() {
    let broker = shared_broker();
    let mut config = store_config(broker, &unique_topic("queue-full"), 4);
    config
        .client_overrides
        .push(("queue.buffering.max.messages".to_owned(), "100".to_owned()));
    let store = KafkaOffsetStore::open(config.clone())
        .await
        .unwrap_or_else(|e| panic!("open: {e}"));
    let keys: Vec<Vec<u8>> = (0..2_000).map(|p| key("big", p)).collect();
    let batch: Vec<OffsetWrite> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| put(k, i as i64))
        .collect();
    store
        .set(&batch)
        .await
        .unwrap_or_else(|e| panic!("set: {e}"));
    let got = store
        .get(&keys)
        .await
        .unwrap_or_else(|e| panic!("get: {e}"));
    assert!(
        got.iter().zip(&batch).all(|(g, w)| *g == w.value),
        "every record of the batch arrived"
    );
    drop(store);
    let reopened = KafkaOffsetStore::open(config)
        .await
        .unwrap_or_else(|e| panic!("reopen: {e}"));
    assert_eq!(reopened.records_read(), 2_000, "start replays every record");
    assert_eq!(
        reopened.connector_offsets("big").await.unwrap().len(),
        2_000
    );
}

/// A read goes to the end it listed and stops there, even while other workers keep committing: the
/// records arriving behind that end are not waited for. (It used to check whether it had reached
/// the end only every 1 024 records while records streamed in, so a task start on a busy topic —
/// a few commits a second — waited for 1 024 more records, 11 to 13 s in a process test.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_stops_at_its_end_while_other_workers_keep_committing() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

    let broker = shared_broker();
    let topic = unique_topic("busy");
    let config = store_config(broker, &topic, 3);
    let writer = Arc::new(KafkaOffsetStore::open(config.clone()).await.unwrap());
    let reader = KafkaOffsetStore::open(config).await.unwrap();
    let (stop, written) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicI64::new(0)),
    );
    let commits = tokio::spawn({
        let (writer, stop, written) = (writer.clone(), stop.clone(), written.clone());
        async move {
            while !stop.load(Ordering::SeqCst) {
                let n = written.load(Ordering::SeqCst) + 1;
                // One partition, as fast as the broker acknowledges: a busy task's commits.
                writer.set(&[put(&key("c", 0), n)]).await.unwrap();
                written.store(n, Ordering::SeqCst);
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while written.load(Ordering::SeqCst) < 50 {
        assert!(Instant::now() < deadline, "the commits did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Several reads while the commits go on.
    let during = written.load(Ordering::SeqCst);
    for _ in 0..3 {
        let before = reader.records_read();
        reader.get(&[key("c", 0)]).await.unwrap();
        let read = reader.records_read() - before;
        assert!(
            read < 1000,
            "one read took {read} records: it went on past its end with the live commits"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        written.load(Ordering::SeqCst) > during,
        "the commits went on during the reads"
    );
    stop.store(true, Ordering::SeqCst);
    commits.await.unwrap();
}

/// A get of no key reads nothing (an exactly-once task start asks one only to open its store; the
/// read itself comes with the task's offsets).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_of_no_key_reads_nothing() {
    let broker = shared_broker();
    let topic = unique_topic("no-key");
    let config = store_config(broker, &topic, 3);
    let writer = KafkaOffsetStore::open(config.clone()).await.unwrap();
    let reader = KafkaOffsetStore::open(config).await.unwrap();
    writer.set(&[put(&key("c", 1), 1)]).await.unwrap();
    let before = reader.records_read();
    assert_eq!(
        reader.get(&[]).await.unwrap(),
        Vec::<Option<Vec<u8>>>::new()
    );
    assert_eq!(reader.records_read(), before, "nothing read");
    assert_eq!(
        reader.get(&[key("c", 1)]).await.unwrap(),
        vec![Some(value(1))]
    );
    assert_eq!(reader.records_read(), before + 1);
}
