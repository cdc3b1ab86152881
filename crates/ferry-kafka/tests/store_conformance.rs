//! The shared store conformance suite against `KafkaOffsetStore` on a real broker (Apache Kafka), plus the
//! Kafka-specific behaviours on a topic with Kafka Connect's default 25 partitions.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod store_support;

use async_trait::async_trait;
use ferry_api::ConnectMap;
use ferry_kafka::{KafkaOffsetStore, KafkaOffsetStoreConfig};
use ferry_offsets::conformance::{StoreHarness, run_conformance};
use ferry_offsets::{OffsetBackingStore, OffsetWrite, StoreError, encode_key, encode_value};
use ferry_testkit::KafkaBroker;
use store_support::{read_raw, shared_broker, store_config, unique_topic};

/// Each harness is one fresh topic; `open` is a fresh store on it (a "reopen" replays the topic).
struct Harness {
    _broker: &'static KafkaBroker,
    config: KafkaOffsetStoreConfig,
}

#[async_trait]
impl StoreHarness for Harness {
    async fn open(&mut self) -> Result<Box<dyn OffsetBackingStore>, StoreError> {
        Ok(Box::new(KafkaOffsetStore::open(self.config.clone()).await?))
    }
}

/// The suite checks "store order" (last write wins, entries in write order). A Kafka topic orders
/// records totally only within one partition — across partitions the store orders by record timestamp
/// — so the suite runs on a one-partition topic, where the store order is exactly the log order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_on_a_one_partition_topic() {
    let broker = shared_broker();
    run_conformance(|| Harness {
        _broker: broker,
        config: store_config(broker, &unique_topic("conformance"), 1),
    })
    .await;
}

fn partition(fields: &[(&str, i64)]) -> ConnectMap {
    let mut m = ConnectMap::new();
    for (k, v) in fields {
        m.insert(*k, *v).unwrap();
    }
    m
}

fn key(connector: &str, p: i64) -> Vec<u8> {
    encode_key(connector, Some(&partition(&[("p", p)])))
}

fn value(position: i64) -> Vec<u8> {
    encode_value(&partition(&[("position", position)]))
}

fn put(k: &[u8], position: i64) -> OffsetWrite {
    OffsetWrite {
        key: k.to_vec(),
        value: Some(value(position)),
    }
}

fn tombstone(k: &[u8]) -> OffsetWrite {
    OffsetWrite {
        key: k.to_vec(),
        value: None,
    }
}

async fn open(config: &KafkaOffsetStoreConfig) -> KafkaOffsetStore {
    KafkaOffsetStore::open(config.clone())
        .await
        .unwrap_or_else(|e| panic!("open: {e}"))
}

async fn get(store: &KafkaOffsetStore, keys: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
    store.get(keys).await.unwrap_or_else(|e| panic!("get: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trip_on_25_partitions_spreads_keys_over_partitions() {
    let broker = shared_broker();
    let topic = unique_topic("rt25");
    let config = store_config(broker, &topic, 25);
    let store = open(&config).await;
    let keys: Vec<Vec<u8>> = (0..200).map(|p| key("c", p)).collect();
    let batch: Vec<OffsetWrite> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| put(k, i as i64 * 10))
        .collect();
    store
        .set(&batch)
        .await
        .unwrap_or_else(|e| panic!("set: {e}"));
    let got = get(&store, &keys).await;
    assert!(
        got.iter().zip(&batch).all(|(g, w)| *g == w.value),
        "every key reads back"
    );
    let raw = read_raw(broker, &topic, 25);
    assert_eq!(raw.len(), 200, "one record per write");
    let used: std::collections::BTreeSet<i32> = raw.iter().map(|r| r.partition).collect();
    assert!(
        used.len() > 10,
        "keys are spread over the partitions: {used:?}"
    );
    for r in &raw {
        let k = r.key.as_deref().unwrap_or_default();
        assert_eq!(
            r.partition,
            ferry_kafka::java_partition(k, 25),
            "placed like Kafka's Java client"
        );
    }
    assert_eq!(store.entries().await.unwrap().len(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tombstones_and_reopen_on_25_partitions() {
    let broker = shared_broker();
    let config = store_config(broker, &unique_topic("tomb25"), 25);
    let store = open(&config).await;
    let keys: Vec<Vec<u8>> = (0..50).map(|p| key("c", p)).collect();
    for round in 0..3 {
        let batch: Vec<OffsetWrite> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| put(k, round * 1000 + i as i64))
            .collect();
        store
            .set(&batch)
            .await
            .unwrap_or_else(|e| panic!("set: {e}"));
    }
    let dead: Vec<OffsetWrite> = keys.iter().step_by(5).map(|k| tombstone(k)).collect();
    store
        .set(&dead)
        .await
        .unwrap_or_else(|e| panic!("set: {e}"));
    let expect = |i: usize| {
        if i.is_multiple_of(5) {
            None
        } else {
            Some(value(2000 + i as i64))
        }
    };
    let got = get(&store, &keys).await;
    for (i, g) in got.iter().enumerate() {
        assert_eq!(*g, expect(i), "key {i} before reopen");
    }
    drop(store);
    let reopened = open(&config).await;
    assert_eq!(
        reopened.records_read(),
        50 * 3 + 10,
        "start replays the whole topic"
    );
    let got = get(&reopened, &keys).await;
    for (i, g) in got.iter().enumerate() {
        assert_eq!(*g, expect(i), "key {i} after reopen");
    }
    // A value after a tombstone brings the partition back, also after a reopen.
    reopened
        .set(&[put(&keys[0], 7)])
        .await
        .unwrap_or_else(|e| panic!("set: {e}"));
    drop(reopened);
    let again = open(&config).await;
    assert_eq!(get(&again, &keys[..1]).await, vec![Some(value(7))]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn known_partitions_per_connector_come_from_the_log() {
    let broker = shared_broker();
    let config = store_config(broker, &unique_topic("known25"), 25);
    let store = open(&config).await;
    let batch: Vec<OffsetWrite> = (0..10)
        .map(|p| put(&key("a", p), p))
        .chain((0..4).map(|p| put(&key("b", p), 100 + p)))
        .collect();
    store
        .set(&batch)
        .await
        .unwrap_or_else(|e| panic!("set: {e}"));
    store
        .set(&[
            tombstone(&key("a", 3)),
            tombstone(&key("a", 7)),
            tombstone(&key("b", 0)),
        ])
        .await
        .unwrap_or_else(|e| panic!("set: {e}"));
    let known = |offsets: Vec<(Vec<u8>, Vec<u8>)>| {
        let mut keys: Vec<Vec<u8>> = offsets.into_iter().map(|(k, _)| k).collect();
        keys.sort();
        keys
    };
    let mut expected_a: Vec<Vec<u8>> = [0, 1, 2, 4, 5, 6, 8, 9]
        .iter()
        .map(|p| key("a", *p))
        .collect();
    expected_a.sort();
    let mut expected_b: Vec<Vec<u8>> = [1, 2, 3].iter().map(|p| key("b", *p)).collect();
    expected_b.sort();
    assert_eq!(
        known(store.connector_offsets("a").await.unwrap()),
        expected_a
    );
    assert_eq!(
        known(store.connector_offsets("b").await.unwrap()),
        expected_b
    );
    drop(store);
    let reopened = open(&config).await;
    assert_eq!(
        known(reopened.connector_offsets("a").await.unwrap()),
        expected_a
    );
    assert_eq!(
        known(reopened.connector_offsets("b").await.unwrap()),
        expected_b
    );
    assert!(reopened.connector_offsets("c").await.unwrap().is_empty());
}

/// Logically equal keys whose bytes differ (field order) hash to different partitions: the newer
/// write wins by record timestamp, whichever partition is read first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn field_order_variants_on_different_partitions_resolve_by_time() {
    let broker = shared_broker();
    let config = store_config(broker, &unique_topic("order25"), 25);
    // Find a partition map whose two field orders land on different partitions.
    let (ab, ba) = (0..100)
        .map(|i| {
            let ab = encode_key("c", Some(&partition(&[("a", i), ("b", 2)])));
            let ba = encode_key("c", Some(&partition(&[("b", 2), ("a", i)])));
            (ab, ba)
        })
        .find(|(ab, ba)| ferry_kafka::java_partition(ab, 25) != ferry_kafka::java_partition(ba, 25))
        .unwrap_or_else(|| panic!("no key pair on different partitions"));
    let store = open(&config).await;
    store.set(&[put(&ab, 1)]).await.unwrap();
    store.set(&[put(&ba, 2)]).await.unwrap();
    assert_eq!(
        get(&store, std::slice::from_ref(&ab)).await,
        vec![Some(value(2))]
    );
    store.set(&[put(&ab, 3)]).await.unwrap();
    store.set(&[tombstone(&ba)]).await.unwrap();
    assert_eq!(
        get(&store, std::slice::from_ref(&ab)).await,
        vec![None],
        "the newer tombstone wins"
    );
    drop(store);
    let reopened = open(&config).await;
    assert_eq!(
        get(&reopened, &[ab.clone(), ba.clone()]).await,
        vec![None, None],
        "also on replay"
    );
    reopened.set(&[put(&ab, 4)]).await.unwrap();
    drop(reopened);
    let again = open(&config).await;
    assert_eq!(
        get(&again, std::slice::from_ref(&ba)).await,
        vec![Some(value(4))]
    );
    let known = again.connector_offsets("c").await.unwrap();
    assert_eq!(
        known,
        vec![(ab, value(4))],
        "one partition, raw key as last written"
    );
}
