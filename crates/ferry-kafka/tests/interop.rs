//! Interop with Kafka Connect's offsets topic (`offset.storage.topic`).
//!
//! `tests/fixtures/kafka-connect-offsets.txt` holds offsets-topic records exactly as Kafka Connect's
//! JsonConverter (schemas disabled) writes them, in the order they were written: one `key<TAB>value`
//! per line, `null` for a tombstone. They cover several field orders of one partition (the swapped
//! form written later), integer widths (int8 … int64 all print as digits), floats (`1.5`, `1.0E20`,
//! `1.0E-5`, `2.0`), a base64 bytes value, booleans and nulls, Jackson's escapes, a null partition,
//! tombstones, and three connectors (`jdbc_src`, `file-src`, `c`).
//!
//! 1. The records are produced raw to a 25-partition topic, partitioned like Kafka's Java producer
//!    (murmur2), and a `KafkaOffsetStore` opened on it returns the right offset for each partition
//!    through `StoreOffsetReader`: last write wins (across field orders too), a tombstone reads `None`.
//! 2. Ferry writes the same maps, in the same field order, through `OffsetWriter` to a second topic;
//!    read back raw, every partition of that topic holds byte-for-byte the records of the same
//!    partition of the fixture topic, in the same order — the same bytes on the same Kafka partition.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod store_support;

use std::sync::Arc;

use ferry_api::{ConnectMap, OffsetStorageReader, Value};
use ferry_kafka::{KafkaOffsetStore, java_partition};
use ferry_offsets::{
    OffsetBackingStore, OffsetWriter, StoreOffsetReader, decode_value, encode_key,
};
use store_support::{
    RawRecord, create_topic, java_like_producer, produce_raw, read_raw, shared_broker,
    store_config, unique_topic,
};

const FIXTURE: &str = include_str!("fixtures/kafka-connect-offsets.txt");
const PARTITIONS: i32 = 25;

/// The fixture's records: (key bytes, value bytes or `None` for a tombstone).
fn fixture() -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    FIXTURE
        .lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let (key, value) = line
                .split_once('\t')
                .unwrap_or_else(|| panic!("fixture line without a tab: {line}"));
            let value = (value != "null").then(|| value.as_bytes().to_vec());
            (key.as_bytes().to_vec(), value)
        })
        .collect()
}

fn map(fields: Vec<(&str, Value)>) -> ConnectMap {
    let mut m = ConnectMap::new();
    for (k, v) in fields {
        m.insert(k, v).unwrap();
    }
    m
}

fn s(v: &str) -> Value {
    Value::String(v.to_owned())
}

/// The fixture as a connector would hand it to Ferry: (connector, partition, offset) with the value
/// types the connector uses, in the fixture's field order and write order.
fn fixture_as_maps() -> Vec<(&'static str, Option<ConnectMap>, Option<ConnectMap>)> {
    let accounts = || map(vec![("protocol", s("1")), ("table", s("demo.accounts"))]);
    let orders = || map(vec![("protocol", s("1")), ("table", s("demo.orders"))]);
    let file = |name: &str| map(vec![("filename", s(name))]);
    let position = |p: i64| Some(map(vec![("position", Value::Int64(p))]));
    vec![
        (
            "jdbc_src",
            Some(accounts()),
            Some(map(vec![
                ("timestamp_nanos", Value::Int32(0)),
                ("timestamp", Value::Int64(1_547_030_056_000)),
            ])),
        ),
        ("file-src", Some(file("/tmp/test.txt")), position(1234)),
        (
            "jdbc_src",
            Some(orders()),
            Some(map(vec![("incrementing", Value::Int64(42))])),
        ),
        ("file-src", Some(file("/tmp/other.txt")), position(99)),
        (
            "c",
            None,
            Some(map(vec![
                ("ratio", Value::Float64(1.5)),
                ("big", Value::Float64(1.0e20)),
                ("tiny", Value::Float64(1.0e-5)),
                ("whole", Value::Float32(2.0)),
            ])),
        ),
        (
            "c",
            Some(map(vec![("shard", Value::Int32(7))])),
            Some(map(vec![
                ("seq", Value::Int64(i64::MAX)),
                ("small", Value::Int32(i32::MIN)),
                ("byte", Value::Int8(i8::MIN)),
            ])),
        ),
        (
            "c",
            Some(map(vec![("shard", Value::Float64(7.0))])),
            Some(map(vec![("seq", Value::Int16(1))])),
        ),
        (
            "c",
            Some(map(vec![("blob", s("AQID"))])),
            Some(map(vec![
                ("checksum", Value::Bytes(vec![0xde, 0xad, 0xbe, 0xef])),
                ("ok", Value::Bool(true)),
                ("note", Value::Null),
            ])),
        ),
        (
            "file-src",
            Some(file(r#"C:\logs\app "1".log"#)),
            position(5),
        ),
        (
            "jdbc_src",
            Some(map(vec![
                ("table", s("demo.accounts")),
                ("protocol", s("1")),
            ])),
            Some(map(vec![
                ("timestamp_nanos", Value::Int32(500)),
                ("timestamp", Value::Int64(1_547_030_099_000)),
            ])),
        ),
        ("file-src", Some(file("/tmp/other.txt")), None),
        (
            "jdbc_src",
            Some(orders()),
            Some(map(vec![("incrementing", Value::Int64(43))])),
        ),
        ("c", Some(map(vec![("shard", Value::Float64(7.0))])), None),
    ]
}

/// Produces the fixture to a fresh compacted topic as Kafka Connect would have; returns the topic.
async fn fixture_topic(broker: &ferry_testkit::KafkaBroker) -> (String, Vec<i32>) {
    let topic = unique_topic("kc-offsets");
    create_topic(broker, &topic, PARTITIONS, &[("cleanup.policy", "compact")]).await;
    let placed = produce_raw(&java_like_producer(broker), &topic, &fixture()).await;
    (topic, placed)
}

async fn offsets(reader: &StoreOffsetReader, partitions: &[ConnectMap]) -> Vec<Option<ConnectMap>> {
    reader
        .offsets(partitions)
        .await
        .unwrap_or_else(|e| panic!("reader: {e}"))
        .into_iter()
        .map(|(_, o)| o)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferry_reads_the_offsets_kafka_connect_wrote() {
    let broker = shared_broker();
    let (topic, placed) = fixture_topic(broker).await;
    for ((key, _), partition) in fixture().iter().zip(&placed) {
        assert_eq!(
            *partition,
            java_partition(key, PARTITIONS),
            "the fixture is placed like Kafka's Java producer"
        );
    }
    let store: Arc<dyn OffsetBackingStore> = Arc::new(
        KafkaOffsetStore::open(store_config(broker, &topic, PARTITIONS))
            .await
            .unwrap_or_else(|e| panic!("open: {e}")),
    );

    let jdbc = StoreOffsetReader::new("jdbc_src", store.clone());
    let accounts = map(vec![("protocol", s("1")), ("table", s("demo.accounts"))]);
    let accounts_swapped = map(vec![("table", s("demo.accounts")), ("protocol", s("1"))]);
    let orders = map(vec![("table", s("demo.orders")), ("protocol", s("1"))]);
    let newest_accounts = map(vec![
        ("timestamp_nanos", Value::Int64(500)),
        ("timestamp", Value::Int64(1_547_030_099_000)),
    ]);
    assert_eq!(
        offsets(&jdbc, &[accounts, accounts_swapped, orders]).await,
        vec![
            Some(newest_accounts.clone()),
            Some(newest_accounts),
            Some(map(vec![("incrementing", Value::Int64(43))])),
        ],
        "last write wins, whichever field order wrote it and whichever is asked"
    );

    let file = StoreOffsetReader::new("file-src", store.clone());
    let f = |name: &str| map(vec![("filename", s(name))]);
    assert_eq!(
        offsets(
            &file,
            &[
                f("/tmp/test.txt"),
                f("/tmp/other.txt"),
                f(r#"C:\logs\app "1".log"#),
                f("/tmp/never.txt")
            ]
        )
        .await,
        vec![
            Some(map(vec![("position", Value::Int64(1234))])),
            None,
            Some(map(vec![("position", Value::Int64(5))])),
            None,
        ],
        "file-src: the stored position, a tombstone reads None, escapes decode"
    );

    let c = StoreOffsetReader::new("c", store.clone());
    assert_eq!(
        offsets(
            &c,
            &[
                map(vec![("shard", Value::Int64(7))]),
                map(vec![("shard", Value::Float64(7.0))]),
                map(vec![("blob", s("AQID"))]),
            ]
        )
        .await,
        vec![
            Some(map(vec![
                ("seq", Value::Int64(i64::MAX)),
                ("small", Value::Int64(i64::from(i32::MIN))),
                ("byte", Value::Int64(-128)),
            ])),
            None,
            Some(map(vec![
                ("checksum", s("3q2+7w==")),
                ("ok", Value::Bool(true)),
                ("note", Value::Null)
            ])),
        ],
        "integers read back as 64-bit, 7.0 is not 7 (and was tombstoned), bytes read back as base64 strings"
    );
    // The null partition is not reachable through a task's reader (it asks with a map); read the store.
    let null_partition = store.get(&[encode_key("c", None)]).await.unwrap();
    let value = null_partition[0]
        .as_deref()
        .unwrap_or_else(|| panic!("the null partition has an offset"));
    assert_eq!(
        decode_value(value).unwrap(),
        map(vec![
            ("ratio", Value::Float64(1.5)),
            ("big", Value::Float64(1.0e20)),
            ("tiny", Value::Float64(1.0e-5)),
            ("whole", Value::Float64(2.0)),
        ])
    );
    let known_files = store.connector_offsets("file-src").await.unwrap();
    assert_eq!(
        known_files.len(),
        2,
        "file-src knows two live partitions: {known_files:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferry_writes_the_bytes_kafka_connect_writes_on_the_same_partitions() {
    let broker = shared_broker();
    let (kc_topic, _) = fixture_topic(broker).await;
    let ferry_topic = unique_topic("ferry-offsets");
    let store: Arc<dyn OffsetBackingStore> = Arc::new(
        KafkaOffsetStore::open(store_config(broker, &ferry_topic, PARTITIONS))
            .await
            .unwrap_or_else(|e| panic!("open: {e}")),
    );
    // One flush per fixture record, in the fixture's order (a writer keeps only the newest offset of a
    // partition per flush, and the fixture writes some partitions twice).
    for (connector, partition, offset) in fixture_as_maps() {
        let writer = OffsetWriter::new(connector, store.clone());
        writer.stage(partition, offset);
        let flush = writer
            .begin_flush(std::time::Duration::from_secs(5))
            .await
            .unwrap();
        assert!(flush.is_some());
        flush
            .expect("staged")
            .flush()
            .await
            .unwrap_or_else(|e| panic!("flush: {e}"));
    }

    let by_partition = |records: Vec<RawRecord>| -> Vec<(i32, Vec<u8>, Option<Vec<u8>>)> {
        records
            .into_iter()
            .map(|r| (r.partition, r.key.unwrap_or_default(), r.value))
            .collect()
    };
    let kafka_connect = by_partition(read_raw(broker, &kc_topic, PARTITIONS));
    let ferry = by_partition(read_raw(broker, &ferry_topic, PARTITIONS));
    assert_eq!(kafka_connect.len(), fixture().len());
    for (mine, theirs) in ferry.iter().zip(&kafka_connect) {
        assert_eq!(
            (
                mine.0,
                String::from_utf8_lossy(&mine.1),
                mine.2.as_deref().map(String::from_utf8_lossy)
            ),
            (
                theirs.0,
                String::from_utf8_lossy(&theirs.1),
                theirs.2.as_deref().map(String::from_utf8_lossy)
            ),
            "Ferry's record differs from Kafka Connect's (partition, key, value)"
        );
    }
    assert_eq!(
        ferry, kafka_connect,
        "every partition holds the same bytes in the same order"
    );
}
