//! `OffsetWriter`: Kafka Connect's OffsetStorageWriter checklist — stage, begin, flush, fail, cancel.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod core_support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use core_support::{TestStore, file, map, position, position_of};
use ferry_api::{ConnectMap, OffsetStorageReader};
use ferry_offsets::{
    FlushError, MemoryStore, OffsetBackingStore, OffsetWriter, StoreOffsetReader, encode_key,
};

const CONNECTOR: &str = "file-src";
const LONG: Duration = Duration::from_secs(5);
const SHORT: Duration = Duration::from_millis(50);

/// What the store holds for `partition`, by exact key lookup through the backing store.
async fn stored(store: &dyn OffsetBackingStore, partition: Option<&ConnectMap>) -> Option<i64> {
    let key = encode_key(CONNECTOR, partition);
    let values = store.get(&[key]).await.expect("get");
    values.into_iter().next().flatten().map(|bytes| {
        position_of(&ferry_offsets::decode_value(&bytes).expect("stored value decodes"))
    })
}

async fn flush_all(writer: &OffsetWriter) {
    let flush = writer
        .begin_flush(LONG)
        .await
        .expect("begin_flush")
        .expect("something was staged");
    flush.flush().await.expect("flush");
}

fn new_writer(store: Arc<dyn OffsetBackingStore>) -> Arc<OffsetWriter> {
    Arc::new(OffsetWriter::new(CONNECTOR, store))
}

#[tokio::test]
async fn write_and_flush() {
    let store = Arc::new(MemoryStore::new());
    let writer = new_writer(store.clone());
    writer.stage(Some(file("/a")), Some(position(1)));
    writer.stage(Some(file("/b")), Some(position(2)));
    writer.stage(Some(file("/a")), Some(position(3)));
    assert_eq!(writer.staged_len(), 2, "last write per partition wins");
    assert!(!writer.is_flushing());

    let flush = writer
        .begin_flush(LONG)
        .await
        .expect("begin")
        .expect("something was staged");
    assert!(writer.is_flushing());
    assert_eq!(writer.staged_len(), 0, "the snapshot left the staging area");
    flush.flush().await.expect("flush");
    assert!(!writer.is_flushing());

    assert_eq!(stored(store.as_ref(), Some(&file("/a"))).await, Some(3));
    assert_eq!(stored(store.as_ref(), Some(&file("/b"))).await, Some(2));
    let reader = StoreOffsetReader::new(CONNECTOR, store.clone());
    assert_eq!(
        reader.offset(&file("/a")).await.expect("read"),
        Some(position(3))
    );

    // The bytes written are Kafka Connect's.
    let entries = store.entries().await.expect("entries");
    assert!(entries.contains(&(
        br#"["file-src",{"filename":"/a"}]"#.to_vec(),
        br#"{"position":3}"#.to_vec()
    )));
}

#[tokio::test]
async fn logically_equal_partitions_stage_as_one() {
    let store = Arc::new(MemoryStore::new());
    let writer = new_writer(store.clone());
    writer.stage(Some(map([("a", 1i64), ("b", 2i64)])), Some(position(1)));
    writer.stage(Some(map([("b", 2i64), ("a", 1i64)])), Some(position(2)));
    writer.stage(Some(map([("a", 1i32), ("b", 2i32)])), Some(position(3)));
    assert_eq!(writer.staged_len(), 1);
    flush_all(&writer).await;
    assert_eq!(
        stored(store.as_ref(), Some(&map([("b", 2i64), ("a", 1i64)]))).await,
        Some(3)
    );
    assert_eq!(store.entries().await.expect("entries").len(), 1);
}

#[tokio::test]
async fn null_offset_is_a_tombstone() {
    let store = Arc::new(MemoryStore::new());
    let writer = new_writer(store.clone());
    writer.stage(Some(file("/a")), Some(position(1)));
    writer.stage(Some(file("/b")), Some(position(2)));
    flush_all(&writer).await;
    assert_eq!(stored(store.as_ref(), Some(&file("/a"))).await, Some(1));

    writer.stage(Some(file("/a")), None);
    flush_all(&writer).await;
    assert_eq!(
        stored(store.as_ref(), Some(&file("/a"))).await,
        None,
        "the tombstone removed the offset"
    );
    assert_eq!(
        stored(store.as_ref(), Some(&file("/b"))).await,
        Some(2),
        "other partitions untouched"
    );
    let reader = StoreOffsetReader::new(CONNECTOR, store.clone());
    assert_eq!(reader.offset(&file("/a")).await.expect("read"), None);

    // A tombstone for a partition never stored is fine too.
    writer.stage(Some(file("/never")), None);
    flush_all(&writer).await;
    assert_eq!(store.entries().await.expect("entries").len(), 1);
}

#[tokio::test]
async fn null_offset_staged_last_wins_over_an_earlier_value() {
    let store = Arc::new(MemoryStore::new());
    let writer = new_writer(store.clone());
    writer.stage(Some(file("/a")), Some(position(1)));
    flush_all(&writer).await;
    writer.stage(Some(file("/a")), Some(position(2)));
    writer.stage(Some(file("/a")), None);
    flush_all(&writer).await;
    assert_eq!(stored(store.as_ref(), Some(&file("/a"))).await, None);
}

#[tokio::test]
async fn null_partition() {
    let store = Arc::new(MemoryStore::new());
    let writer = new_writer(store.clone());
    writer.stage(None, Some(position(7)));
    writer.stage(Some(file("/a")), Some(position(1)));
    flush_all(&writer).await;
    assert_eq!(stored(store.as_ref(), None).await, Some(7));
    let entries = store.entries().await.expect("entries");
    assert!(
        entries.contains(&(
            br#"["file-src",null]"#.to_vec(),
            br#"{"position":7}"#.to_vec()
        )),
        "{entries:?}"
    );
    assert_eq!(
        stored(store.as_ref(), Some(&ConnectMap::new())).await,
        None,
        "null is not the empty map"
    );

    writer.stage(None, None);
    flush_all(&writer).await;
    assert_eq!(stored(store.as_ref(), None).await, None);
    assert_eq!(stored(store.as_ref(), Some(&file("/a"))).await, Some(1));
}

#[tokio::test]
async fn nothing_to_flush() {
    let store = TestStore::new();
    let writer = new_writer(store.clone());
    assert!(writer.begin_flush(LONG).await.expect("begin").is_none());
    assert!(!writer.is_flushing());
    // No guard, so nothing to flush: a flush without a begun one cannot be written any more.
    // Nothing held: the next begin_flush does not wait.
    assert!(
        writer
            .begin_flush(Duration::ZERO)
            .await
            .expect("not blocked by an empty flush")
            .is_none()
    );

    writer.stage(Some(file("/a")), Some(position(1)));
    flush_all(&writer).await;
    assert!(
        writer
            .begin_flush(Duration::ZERO)
            .await
            .expect("flushed: nothing left")
            .is_none()
    );
    assert_eq!(
        store.applied_sets.load(Ordering::SeqCst),
        1,
        "empty flushes do not touch the store"
    );
}

#[tokio::test]
async fn store_failure_restages_the_same_data() {
    let store = TestStore::new();
    let writer = new_writer(store.clone());
    writer.stage(Some(file("/a")), Some(position(1)));
    writer.stage(Some(file("/b")), Some(position(2)));
    writer.stage(None, Some(position(3)));
    let flush = writer
        .begin_flush(LONG)
        .await
        .expect("begin")
        .expect("something was staged");

    store.fail_set.store(true, Ordering::SeqCst);
    let err = flush.flush().await.expect_err("store down");
    assert!(
        matches!(&err, FlushError::Store { connector, .. } if connector == CONNECTOR),
        "{err:?}"
    );
    assert!(err.to_string().contains("injected set failure"), "{err}");
    assert!(!writer.is_flushing(), "a failed flush ends the flush");
    assert_eq!(writer.staged_len(), 3, "the snapshot was staged again");
    assert_eq!(stored(store.as_ref(), Some(&file("/a"))).await, None);

    store.fail_set.store(false, Ordering::SeqCst);
    flush_all(&writer).await;
    assert_eq!(stored(store.as_ref(), Some(&file("/a"))).await, Some(1));
    assert_eq!(stored(store.as_ref(), Some(&file("/b"))).await, Some(2));
    assert_eq!(stored(store.as_ref(), None).await, Some(3));
}

#[tokio::test]
async fn newer_staged_values_win_over_restaged_ones() {
    let store = TestStore::new();
    let writer = new_writer(store.clone());
    writer.stage(Some(file("/a")), Some(position(1)));
    writer.stage(Some(file("/b")), Some(position(1)));
    writer.stage(Some(file("/c")), Some(position(1)));
    let flush = writer
        .begin_flush(LONG)
        .await
        .expect("begin")
        .expect("something was staged");
    // Staged while the flush is in progress: newer.
    writer.stage(Some(file("/a")), Some(position(2)));
    writer.stage(Some(file("/c")), None);
    writer.stage(Some(file("/d")), Some(position(2)));

    store.fail_set.store(true, Ordering::SeqCst);
    flush.flush().await.expect_err("store down");
    assert_eq!(writer.staged_len(), 4);

    store.fail_set.store(false, Ordering::SeqCst);
    flush_all(&writer).await;
    assert_eq!(
        stored(store.as_ref(), Some(&file("/a"))).await,
        Some(2),
        "newer wins"
    );
    assert_eq!(
        stored(store.as_ref(), Some(&file("/b"))).await,
        Some(1),
        "restaged, not lost"
    );
    assert_eq!(
        stored(store.as_ref(), Some(&file("/c"))).await,
        None,
        "a newer tombstone wins too"
    );
    assert_eq!(stored(store.as_ref(), Some(&file("/d"))).await, Some(2));
}

#[tokio::test]
async fn second_begin_flush_fails_after_its_timeout() {
    let store = TestStore::new();
    let writer = new_writer(store.clone());
    writer.stage(Some(file("/a")), Some(position(1)));
    let flush = writer
        .begin_flush(LONG)
        .await
        .expect("first")
        .expect("something was staged");
    writer.stage(Some(file("/a")), Some(position(2)));

    let started = Instant::now();
    let err = writer
        .begin_flush(SHORT)
        .await
        .expect_err("one flush at a time");
    assert!(
        started.elapsed() >= SHORT,
        "it waited its timeout: {:?}",
        started.elapsed()
    );
    assert!(
        matches!(&err, FlushError::FlushInProgress { connector, waited_ms } if connector == CONNECTOR && *waited_ms == 50),
        "{err:?}"
    );
    assert_eq!(writer.staged_len(), 1, "the failed begin took nothing");

    // The first flush is intact and writes its own snapshot.
    flush.flush().await.expect("first flush");
    assert_eq!(stored(store.as_ref(), Some(&file("/a"))).await, Some(1));
    flush_all(&writer).await;
    assert_eq!(stored(store.as_ref(), Some(&file("/a"))).await, Some(2));
}

#[tokio::test]
async fn second_begin_flush_succeeds_when_the_first_completes_in_time() {
    let store = TestStore::new();
    let writer = new_writer(store.clone());
    writer.stage(Some(file("/a")), Some(position(1)));
    let flush = writer
        .begin_flush(LONG)
        .await
        .expect("first")
        .expect("something was staged");
    writer.stage(Some(file("/b")), Some(position(2)));

    let first = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        flush.flush().await
    });
    let started = Instant::now();
    let flush = writer
        .begin_flush(LONG)
        .await
        .expect("waits for the first, then begins")
        .expect("something was staged");
    assert!(started.elapsed() < LONG);
    first.await.expect("join").expect("first flush");
    flush.flush().await.expect("second flush");
    assert_eq!(stored(store.as_ref(), Some(&file("/a"))).await, Some(1));
    assert_eq!(stored(store.as_ref(), Some(&file("/b"))).await, Some(2));
}

#[tokio::test]
async fn second_begin_flush_succeeds_when_the_first_fails_in_time() {
    let store = TestStore::new();
    let writer = new_writer(store.clone());
    writer.stage(Some(file("/a")), Some(position(1)));
    let flush = writer
        .begin_flush(LONG)
        .await
        .expect("first")
        .expect("something was staged");
    store.fail_set.store(true, Ordering::SeqCst);
    let first = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        flush.flush().await
    });
    let flush = writer
        .begin_flush(LONG)
        .await
        .expect("begins after the failure, with the restaged data")
        .expect("something was staged");
    assert!(matches!(
        first.await.expect("join"),
        Err(FlushError::Store { .. })
    ));
    store.fail_set.store(false, Ordering::SeqCst);
    flush.flush().await.expect("second flush");
    assert_eq!(stored(store.as_ref(), Some(&file("/a"))).await, Some(1));
}

#[tokio::test]
async fn cancel_before_flush() {
    let store = TestStore::new();
    let writer = new_writer(store.clone());
    writer.stage(Some(file("/a")), Some(position(1)));
    writer.stage(Some(file("/b")), Some(position(1)));
    let flush = writer
        .begin_flush(LONG)
        .await
        .expect("begin")
        .expect("something was staged");
    writer.stage(Some(file("/a")), Some(position(2)));

    flush.canceller().cancel();
    assert!(!writer.is_flushing());
    assert!(
        matches!(flush.flush().await, Err(FlushError::NotBegun { .. })),
        "nothing to flush after a cancel"
    );
    assert_eq!(store.applied_sets.load(Ordering::SeqCst), 0);
    assert_eq!(writer.staged_len(), 2, "the snapshot is staged again");

    // The flush slot is free again, and the next flush writes the newest values.
    let flush = writer
        .begin_flush(Duration::ZERO)
        .await
        .expect("not blocked by the cancelled flush")
        .expect("something was staged");
    flush.flush().await.expect("flush");
    assert_eq!(stored(store.as_ref(), Some(&file("/a"))).await, Some(2));
    assert_eq!(stored(store.as_ref(), Some(&file("/b"))).await, Some(1));
}

#[tokio::test]
async fn cancel_without_a_flush_does_nothing() {
    let store = TestStore::new();
    let writer = new_writer(store.clone());
    // Without a begun flush there is no guard to cancel with: only a late cancel can be tried.
    writer.stage(Some(file("/a")), Some(position(1)));
    assert_eq!(writer.staged_len(), 1);
    let flush = writer
        .begin_flush(LONG)
        .await
        .expect("begin")
        .expect("something was staged");
    let late_cancel = flush.canceller();
    flush.flush().await.expect("flush");
    late_cancel.cancel();
    assert_eq!(
        writer.staged_len(),
        0,
        "a completed flush is not restaged by a late cancel"
    );
    assert_eq!(stored(store.as_ref(), Some(&file("/a"))).await, Some(1));
}

#[tokio::test]
async fn cancel_while_awaiting_then_late_completion_is_harmless() {
    let store = TestStore::new();
    let writer = new_writer(store.clone());
    writer.stage(Some(file("/a")), Some(position(1)));
    writer.stage(Some(file("/b")), Some(position(1)));
    let flush = writer
        .begin_flush(LONG)
        .await
        .expect("begin")
        .expect("something was staged");

    store.block_set.store(true, Ordering::SeqCst);
    let canceller = flush.canceller();
    let late = tokio::spawn(async move { flush.flush().await });
    store.wait_entered().await;
    // The committer gives up (its timeout) and cancels; the task stages newer offsets meanwhile.
    canceller.cancel();
    assert!(!writer.is_flushing());
    writer.stage(Some(file("/a")), Some(position(2)));
    assert_eq!(
        writer.staged_len(),
        2,
        "the cancelled snapshot is staged again under the newer value"
    );

    // The store finally completes the cancelled write.
    store.block_set.store(false, Ordering::SeqCst);
    store.release_one();
    late.await
        .expect("join")
        .expect("a late completion is not an error");
    assert_eq!(
        writer.staged_len(),
        2,
        "the late completion did not clear the staged data"
    );
    assert!(!writer.is_flushing());

    flush_all(&writer).await;
    assert_eq!(
        stored(store.as_ref(), Some(&file("/a"))).await,
        Some(2),
        "the newest value wins"
    );
    assert_eq!(
        stored(store.as_ref(), Some(&file("/b"))).await,
        Some(1),
        "nothing lost"
    );
}

#[tokio::test]
async fn late_completion_of_a_cancelled_flush_does_not_overwrite_a_newer_flush() {
    let store = TestStore::new();
    let writer = new_writer(store.clone());
    writer.stage(Some(file("/a")), Some(position(1)));
    let flush = writer
        .begin_flush(LONG)
        .await
        .expect("begin")
        .expect("something was staged");

    store.block_set.store(true, Ordering::SeqCst);
    let canceller = flush.canceller();
    let late = tokio::spawn(async move { flush.flush().await });
    store.wait_entered().await;
    canceller.cancel();
    store.block_set.store(false, Ordering::SeqCst);
    writer.stage(Some(file("/a")), Some(position(2)));

    // The next commit: either it waits for the stuck write (and times out, to be retried), or it
    // writes the newer offset; whatever happens, the old write must not land after the newer one.
    let next = tokio::spawn({
        let writer = writer.clone();
        async move {
            if let Some(flush) = writer.begin_flush(SHORT).await? {
                flush.flush().await?;
            }
            Ok::<(), FlushError>(())
        }
    });
    tokio::time::sleep(SHORT * 2).await;
    store.release_one();
    late.await.expect("join").expect("late completion");
    let next_result = next.await.expect("join");

    if next_result.is_err() || writer.staged_len() > 0 {
        flush_all(&writer).await;
    }
    assert_eq!(
        stored(store.as_ref(), Some(&file("/a"))).await,
        Some(2),
        "the late write of the cancelled flush went backwards over a newer flush (next flush: {next_result:?})"
    );
}

#[tokio::test]
async fn dropped_flush_future_loses_nothing_after_cancel() {
    // The committer's timeout drops the flush future, then cancels.
    let store = TestStore::new();
    let writer = new_writer(store.clone());
    writer.stage(Some(file("/a")), Some(position(1)));
    let flush = writer
        .begin_flush(LONG)
        .await
        .expect("begin")
        .expect("something was staged");
    store.block_set.store(true, Ordering::SeqCst);
    let canceller = flush.canceller();
    assert!(
        tokio::time::timeout(SHORT, flush.flush()).await.is_err(),
        "the store is stuck"
    );
    canceller.cancel();
    store.block_set.store(false, Ordering::SeqCst);

    writer.stage(Some(file("/b")), Some(position(1)));
    flush_all(&writer).await;
    assert_eq!(stored(store.as_ref(), Some(&file("/a"))).await, Some(1));
    assert_eq!(stored(store.as_ref(), Some(&file("/b"))).await, Some(1));
}

#[tokio::test]
async fn dropped_flush_future_without_cancel_loses_nothing() {
    let store = TestStore::new();
    let writer = new_writer(store.clone());
    writer.stage(Some(file("/a")), Some(position(1)));
    let flush = writer
        .begin_flush(LONG)
        .await
        .expect("begin")
        .expect("something was staged");
    store.block_set.store(true, Ordering::SeqCst);
    assert!(
        tokio::time::timeout(SHORT, flush.flush()).await.is_err(),
        "the store is stuck"
    );
    store.block_set.store(false, Ordering::SeqCst);

    // No explicit cancel: the abandoned snapshot must still not be lost or block the writer forever.
    writer.stage(Some(file("/b")), Some(position(1)));
    flush_all(&writer).await;
    assert_eq!(stored(store.as_ref(), Some(&file("/a"))).await, Some(1));
    assert_eq!(stored(store.as_ref(), Some(&file("/b"))).await, Some(1));
}

#[tokio::test]
async fn flush_is_one_batch() {
    let store = TestStore::new();
    let writer = new_writer(store.clone());
    for i in 0..10 {
        writer.stage(Some(file(&format!("/{i}"))), Some(position(i)));
    }
    flush_all(&writer).await;
    assert_eq!(store.applied_sets.load(Ordering::SeqCst), 1);
    assert_eq!(store.entries().await.expect("entries").len(), 10);
}
