//! `StoreOffsetReader`: the committed offsets a task sees, and how it reports what it cannot read.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod core_support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use core_support::{LogCapture, TestStore, file, map, position, position_of};
use ferry_api::{
    ConnectMap, OffsetReadError, OffsetStorageReader, OffsetStorageReaderExt, SourcePartition,
    Value,
};
use ferry_offsets::{
    MemoryStore, OffsetBackingStore, OffsetWrite, OffsetWriter, StoreOffsetReader, encode_key,
};
use serde::{Deserialize, Serialize};

const CONNECTOR: &str = "file-src";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct FilePartition {
    filename: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct FileOffset {
    position: i32,
}

/// Commits `offset` for `partition` the way the runtime does: stage, begin, flush.
async fn commit(
    store: Arc<dyn OffsetBackingStore>,
    connector: &str,
    partition: ConnectMap,
    offset: ConnectMap,
) {
    let writer = OffsetWriter::new(connector, store);
    writer.stage(Some(partition), Some(offset));
    let flush = writer
        .begin_flush(Duration::from_secs(1))
        .await
        .expect("begin")
        .expect("something was staged");
    flush.flush().await.expect("flush");
}

/// Writes raw bytes under the key of `partition`, bypassing the writer.
async fn plant(store: &dyn OffsetBackingStore, partition: &ConnectMap, value: &[u8]) {
    let write = OffsetWrite {
        key: encode_key(CONNECTOR, Some(partition)),
        value: Some(value.to_vec()),
    };
    store.set(&[write]).await.expect("set");
}

fn memory() -> Arc<MemoryStore> {
    Arc::new(MemoryStore::new())
}

async fn read(reader: &StoreOffsetReader, partition: &ConnectMap) -> Option<ConnectMap> {
    reader
        .offset(partition)
        .await
        .unwrap_or_else(|e| panic!("offset({partition}) failed: {e}"))
}

#[tokio::test]
async fn unknown_partition_reads_as_none() {
    let store = memory();
    let reader = StoreOffsetReader::new(CONNECTOR, store.clone());
    assert_eq!(read(&reader, &file("/a")).await, None);

    commit(store.clone(), CONNECTOR, file("/a"), position(10)).await;
    assert_eq!(read(&reader, &file("/b")).await, None);
    assert_eq!(read(&reader, &file("/a")).await, Some(position(10)));
}

#[tokio::test]
async fn offsets_answer_every_partition_in_request_order() {
    let store = memory();
    commit(store.clone(), CONNECTOR, file("/b"), position(2)).await;
    commit(store.clone(), CONNECTOR, file("/d"), position(4)).await;
    let reader = StoreOffsetReader::new(CONNECTOR, store);

    let request = vec![file("/d"), file("/a"), file("/b"), file("/c"), file("/d")];
    let answer = reader.offsets(&request).await.expect("offsets");
    let got: Vec<(ConnectMap, Option<i64>)> = answer
        .into_iter()
        .map(|(p, o)| (p, o.as_ref().map(position_of)))
        .collect();
    assert_eq!(
        got,
        vec![
            (file("/d"), Some(4)),
            (file("/a"), None),
            (file("/b"), Some(2)),
            (file("/c"), None),
            (file("/d"), Some(4))
        ]
    );
    assert!(reader.offsets(&[]).await.expect("empty request").is_empty());
}

#[tokio::test]
async fn offsets_belong_to_their_connector() {
    let store = memory();
    commit(store.clone(), "other", file("/a"), position(7)).await;
    let reader = StoreOffsetReader::new(CONNECTOR, store.clone());
    assert_eq!(read(&reader, &file("/a")).await, None);
    let other = StoreOffsetReader::new("other", store);
    assert_eq!(read(&other, &file("/a")).await, Some(position(7)));
}

#[tokio::test]
async fn only_committed_offsets_are_visible() {
    let store = memory();
    let reader = StoreOffsetReader::new(CONNECTOR, store.clone());
    let writer = OffsetWriter::new(CONNECTOR, store.clone());

    writer.stage(Some(file("/a")), Some(position(5)));
    assert_eq!(
        read(&reader, &file("/a")).await,
        None,
        "staged is not committed"
    );

    let flush = writer
        .begin_flush(Duration::from_secs(1))
        .await
        .expect("begin")
        .expect("something was staged");
    assert_eq!(
        read(&reader, &file("/a")).await,
        None,
        "begun is not committed"
    );

    flush.flush().await.expect("flush");
    assert_eq!(read(&reader, &file("/a")).await, Some(position(5)));

    // A newer staged offset does not shadow the committed one until it is flushed.
    writer.stage(Some(file("/a")), Some(position(9)));
    assert_eq!(read(&reader, &file("/a")).await, Some(position(5)));
}

#[tokio::test]
async fn in_flight_offsets_are_not_visible() {
    let store = TestStore::new();
    let reader = StoreOffsetReader::new(CONNECTOR, store.clone());
    let writer = Arc::new(OffsetWriter::new(CONNECTOR, store.clone()));
    writer.stage(Some(file("/a")), Some(position(5)));
    let flush = writer
        .begin_flush(Duration::from_secs(1))
        .await
        .expect("begin")
        .expect("something was staged");
    store.block_set.store(true, Ordering::SeqCst);
    let flush = tokio::spawn(async move { flush.flush().await });
    store.wait_entered().await;
    assert_eq!(
        read(&reader, &file("/a")).await,
        None,
        "the store has not accepted the write yet"
    );
    store.release_one();
    flush.await.expect("join").expect("flush");
    assert_eq!(read(&reader, &file("/a")).await, Some(position(5)));
}

#[tokio::test]
async fn undecodable_stored_value_is_an_error_naming_the_partition() {
    let store = memory();
    plant(store.as_ref(), &file("/broken"), b"{\"position\":").await;
    commit(store.clone(), CONNECTOR, file("/fine"), position(3)).await;
    let reader = StoreOffsetReader::new(CONNECTOR, store);

    let err = reader
        .offset(&file("/broken"))
        .await
        .expect_err("never None");
    match &err {
        OffsetReadError::Undecodable {
            connector,
            partition,
            reason,
        } => {
            assert_eq!(connector, CONNECTOR);
            assert!(partition.contains("/broken"), "{partition}");
            assert!(!reason.is_empty());
        }
        other => panic!("expected Undecodable, got {other:?}"),
    }
    assert!(err.to_string().contains("/broken"), "{err}");

    // The whole request fails rather than silently hiding one partition.
    let err = reader
        .offsets(&[file("/fine"), file("/broken")])
        .await
        .expect_err("one is undecodable");
    assert!(
        matches!(err, OffsetReadError::Undecodable { .. }),
        "{err:?}"
    );
    // Other partitions still read.
    assert_eq!(read(&reader, &file("/fine")).await, Some(position(3)));
}

#[tokio::test]
async fn stored_values_that_are_json_but_not_offsets_are_errors() {
    let store = memory();
    for (name, bytes) in [
        ("/nested", &br#"{"p":{"q":1}}"#[..]),
        ("/array", b"[1]"),
        ("/null", b"null"),
    ] {
        plant(store.as_ref(), &file(name), bytes).await;
    }
    let reader = StoreOffsetReader::new(CONNECTOR, store);
    for name in ["/nested", "/array", "/null"] {
        let err = reader
            .offset(&file(name))
            .await
            .expect_err("not an offset map");
        assert!(
            matches!(&err, OffsetReadError::Undecodable { partition, .. } if partition.contains(name)),
            "{err:?}"
        );
    }
}

#[tokio::test]
async fn store_failure_is_an_error() {
    let store = TestStore::new();
    commit(store.clone(), CONNECTOR, file("/a"), position(1)).await;
    let reader = StoreOffsetReader::new(CONNECTOR, store.clone());
    store.fail_get.store(true, Ordering::SeqCst);
    let err = reader.offset(&file("/a")).await.expect_err("store down");
    match &err {
        OffsetReadError::Store {
            connector,
            message,
            retriable,
        } => {
            assert_eq!(connector, CONNECTOR);
            assert!(message.contains("injected get failure"), "{message}");
            assert!(*retriable);
        }
        other => panic!("expected Store, got {other:?}"),
    }
    assert!(reader.offsets(&[file("/a"), file("/b")]).await.is_err());

    store.fail_get.store(false, Ordering::SeqCst);
    assert_eq!(
        read(&reader, &file("/a")).await,
        Some(position(1)),
        "recovers with the store"
    );
}

#[tokio::test]
async fn a_found_offset_does_not_depend_on_the_near_miss_scan() {
    // The near-miss scan only runs for misses: a hit never touches connector_offsets.
    let store = TestStore::new();
    commit(store.clone(), CONNECTOR, file("/a"), position(1)).await;
    store.fail_connector_offsets.store(true, Ordering::SeqCst);
    let reader = StoreOffsetReader::new(CONNECTOR, store);
    assert_eq!(read(&reader, &file("/a")).await, Some(position(1)));
}

#[tokio::test]
async fn a_miss_does_not_fail_when_only_the_near_miss_scan_fails() {
    // The scan is a diagnostic: the store answered the lookup, so the answer stands.
    let store = TestStore::new();
    commit(store.clone(), CONNECTOR, file("/a"), position(1)).await;
    store.fail_connector_offsets.store(true, Ordering::SeqCst);
    let reader = StoreOffsetReader::new(CONNECTOR, store);
    let (capture, _guard) = LogCapture::start();
    assert_eq!(read(&reader, &file("/b")).await, None);
    assert!(
        capture
            .text()
            .contains("injected connector_offsets failure"),
        "the skipped check is logged: {}",
        capture.text()
    );
    let answer = reader
        .offsets(&[file("/a"), file("/b")])
        .await
        .expect("offsets");
    assert_eq!(
        answer,
        vec![(file("/a"), Some(position(1))), (file("/b"), None)]
    );
}

#[tokio::test]
async fn closed_reader_fails() {
    let store = memory();
    commit(store.clone(), CONNECTOR, file("/a"), position(1)).await;
    let reader = StoreOffsetReader::new(CONNECTOR, store);
    assert_eq!(read(&reader, &file("/a")).await, Some(position(1)));
    reader.close();
    let err = reader.offset(&file("/a")).await.expect_err("closed");
    assert!(
        matches!(&err, OffsetReadError::Closed { connector } if connector == CONNECTOR),
        "{err:?}"
    );
    assert!(matches!(
        reader.offsets(&[file("/a")]).await,
        Err(OffsetReadError::Closed { .. })
    ));
    assert!(matches!(
        reader
            .offset_of::<FilePartition, FileOffset>(&FilePartition {
                filename: "/a".into()
            })
            .await,
        Err(OffsetReadError::Closed { .. })
    ));
}

#[tokio::test]
async fn lookup_is_by_logical_partition() {
    let store = memory();
    let stored_as = map([("b", Value::from("x")), ("a", Value::from(1i64))]);
    commit(store.clone(), CONNECTOR, stored_as, position(42)).await;
    let reader = StoreOffsetReader::new(CONNECTOR, store);

    let (capture, _guard) = LogCapture::start();
    let asked = map([("a", Value::from(1i32)), ("b", Value::from("x"))]);
    assert_eq!(
        read(&reader, &asked).await,
        Some(position(42)),
        "field order and integer width do not matter"
    );
    assert!(capture.warnings().is_empty(), "{}", capture.text());
}

#[tokio::test]
async fn lookup_finds_keys_written_by_kafka_connect() {
    // Raw bytes as Kafka Connect wrote them, other field order than the lookup.
    let store = memory();
    let key = br#"["jdbc_src",{"table":"demo.accounts","protocol":"1"}]"#.to_vec();
    let value = br#"{"timestamp_nanos":0,"timestamp":1547030056000}"#.to_vec();
    store
        .set(&[OffsetWrite {
            key,
            value: Some(value),
        }])
        .await
        .expect("set");
    let reader = StoreOffsetReader::new("jdbc_src", store);
    let offset = read(
        &reader,
        &map([("protocol", "1"), ("table", "demo.accounts")]),
    )
    .await
    .expect("found");
    assert_eq!(
        offset.get("timestamp"),
        Some(&Value::Int64(1_547_030_056_000))
    );
    assert_eq!(offset.get("timestamp_nanos"), Some(&Value::Int64(0)));
}

async fn near_miss_warnings(
    stored: SourcePartition,
    asked: SourcePartition,
) -> (Option<ConnectMap>, Vec<String>) {
    let store = memory();
    commit(store.clone(), CONNECTOR, stored, position(77)).await;
    let reader = StoreOffsetReader::new(CONNECTOR, store);
    let (capture, _guard) = LogCapture::start();
    let found = read(&reader, &asked).await;
    (found, capture.warnings())
}

#[tokio::test]
async fn near_miss_integer_vs_string_warns_naming_both() {
    let (found, warnings) =
        near_miss_warnings(map([("partition", 1i64)]), map([("partition", "1")])).await;
    assert_eq!(found, None, "1 and \"1\" are different partitions");
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].contains(r#"{"partition":1}"#),
        "names the stored map: {}",
        warnings[0]
    );
    assert!(
        warnings[0].contains(r#"{"partition":"1"}"#),
        "names the requested map: {}",
        warnings[0]
    );
    assert!(
        warnings[0].contains(CONNECTOR),
        "names the connector: {}",
        warnings[0]
    );
}

#[tokio::test]
async fn near_miss_float_vs_integer_warns_naming_both() {
    let (found, warnings) =
        near_miss_warnings(map([("partition", 1.0f64)]), map([("partition", 1i64)])).await;
    assert_eq!(found, None, "1.0 and 1 are different partitions");
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].contains(r#"{"partition":1.0}"#),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[0].contains(r#"{"partition":1}"#),
        "{}",
        warnings[0]
    );

    let (found, warnings) =
        near_miss_warnings(map([("partition", 1i64)]), map([("partition", 1.0f64)])).await;
    assert_eq!(found, None);
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
}

#[tokio::test]
async fn near_miss_key_case_warns_naming_both() {
    let (found, warnings) =
        near_miss_warnings(map([("Filename", "/tmp/a.txt")]), file("/tmp/a.txt")).await;
    assert_eq!(found, None);
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].contains(r#"{"Filename":"/tmp/a.txt"}"#),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[0].contains(r#"{"filename":"/tmp/a.txt"}"#),
        "{}",
        warnings[0]
    );
}

#[tokio::test]
async fn near_miss_in_a_batch_names_only_the_missed_partition() {
    let store = memory();
    commit(
        store.clone(),
        CONNECTOR,
        map([("partition", 1i64)]),
        position(1),
    )
    .await;
    commit(
        store.clone(),
        CONNECTOR,
        map([("partition", 2i64)]),
        position(2),
    )
    .await;
    let reader = StoreOffsetReader::new(CONNECTOR, store);
    let (capture, _guard) = LogCapture::start();
    let answer = reader
        .offsets(&[map([("partition", 2i64)]), map([("partition", "1")])])
        .await
        .expect("offsets");
    assert_eq!(answer[0].1, Some(position(2)));
    assert_eq!(answer[1].1, None);
    let warnings = capture.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].contains(r#"{"partition":"1"}"#) && warnings[0].contains(r#"{"partition":1}"#)
    );
}

#[tokio::test]
async fn no_warning_when_nothing_is_stored_or_nothing_is_similar() {
    // Nothing stored for the connector (another connector's near-twin does not count).
    let store = memory();
    commit(
        store.clone(),
        "other",
        map([("partition", 1i64)]),
        position(1),
    )
    .await;
    let reader = StoreOffsetReader::new(CONNECTOR, store.clone());
    let (capture, _guard) = LogCapture::start();
    assert_eq!(read(&reader, &map([("partition", "1")])).await, None);
    assert!(capture.warnings().is_empty(), "{}", capture.text());

    // Something stored, but nothing similar.
    commit(
        store.clone(),
        CONNECTOR,
        map([("partition", 1i64)]),
        position(1),
    )
    .await;
    assert_eq!(read(&reader, &map([("partition", 2i64)])).await, None);
    assert_eq!(read(&reader, &map([("shard", 1i64)])).await, None);
    assert_eq!(
        read(&reader, &map([("partition", 1i64), ("extra", 0i64)])).await,
        None
    );
    assert!(capture.warnings().is_empty(), "{}", capture.text());

    // And a hit never warns.
    assert_eq!(
        read(&reader, &map([("partition", 1i32)])).await,
        Some(position(1))
    );
    assert!(capture.warnings().is_empty(), "{}", capture.text());
}

#[tokio::test]
async fn typed_offset_of_reads_back_i32_fields() {
    let store = memory();
    let partition = FilePartition {
        filename: "/tmp/test.txt".into(),
    };
    let writer = OffsetWriter::new(CONNECTOR, store.clone());
    writer.stage(
        Some(ConnectMap::from_serde(&partition).expect("typed partition")),
        Some(ConnectMap::from_serde(&FileOffset { position: 1234 }).expect("typed offset")),
    );
    let flush = writer
        .begin_flush(Duration::from_secs(1))
        .await
        .expect("begin")
        .expect("something was staged");
    flush.flush().await.expect("flush");

    let reader = StoreOffsetReader::new(CONNECTOR, store.clone());
    let offset: Option<FileOffset> = reader.offset_of(&partition).await.expect("typed read");
    assert_eq!(offset, Some(FileOffset { position: 1234 }));

    let unknown = FilePartition {
        filename: "/nope".into(),
    };
    assert_eq!(
        reader
            .offset_of::<_, FileOffset>(&unknown)
            .await
            .expect("typed read"),
        None
    );

    let both: Vec<(FilePartition, Option<FileOffset>)> = reader
        .offsets_of(&[unknown.clone(), partition.clone()])
        .await
        .expect("typed batch");
    assert_eq!(
        both,
        vec![
            (unknown, None),
            (partition, Some(FileOffset { position: 1234 }))
        ]
    );
}

#[tokio::test]
async fn typed_offset_with_bytes_reads_back() {
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct StreamOffset {
        resume_token: Vec<u8>,
        lsn: u32,
    }
    let store = memory();
    let partition = FilePartition {
        filename: "/stream".into(),
    };
    let written = StreamOffset {
        resume_token: vec![0x82, 0x00, 0xff, 0x10],
        lsn: u32::MAX,
    };
    commit(
        store.clone(),
        CONNECTOR,
        ConnectMap::from_serde(&partition).expect("typed partition"),
        ConnectMap::from_serde(&written).expect("typed offset"),
    )
    .await;
    let reader = StoreOffsetReader::new(CONNECTOR, store);
    let read: Option<StreamOffset> = reader.offset_of(&partition).await.expect("typed read");
    assert_eq!(read, Some(written));
}

#[tokio::test]
async fn typed_offset_that_does_not_fit_is_a_type_error() {
    let store = memory();
    commit(
        store.clone(),
        CONNECTOR,
        file("/big"),
        position(i64::from(i32::MAX) + 1),
    )
    .await;
    let reader = StoreOffsetReader::new(CONNECTOR, store);
    let err = reader
        .offset_of::<_, FileOffset>(&FilePartition {
            filename: "/big".into(),
        })
        .await
        .expect_err("does not fit an i32");
    match &err {
        OffsetReadError::Type { partition, source } => {
            assert!(partition.contains("/big"), "{partition}");
            assert_eq!(source.key(), "position");
        }
        other => panic!("expected Type, got {other:?}"),
    }
}

#[tokio::test]
async fn typed_partition_that_is_not_a_map_is_rejected() {
    let reader = StoreOffsetReader::new(CONNECTOR, memory());
    let err = reader
        .offset_of::<_, FileOffset>(&"just a string")
        .await
        .expect_err("not a map");
    assert!(
        matches!(err, OffsetReadError::InvalidPartition { .. }),
        "{err:?}"
    );
}
