//! Unit tests that need to reach inside the store: injected write failures (poisoning) and a
//! compaction paused at its catch-up step. Black-box tests live in `tests/file_store_*.rs`.

use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

use super::*;
use crate::codec::{encode_key, encode_value};
use ferry_api::ConnectMap;

/// A failure to inject into the next `set`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fault {
    /// Half the frame is written, then the write fails.
    Append,
    /// The frame is written, then `fdatasync` fails.
    Sync,
}

type Hook = Box<dyn FnOnce() + Send>;

/// Test-only hooks inside the store.
#[derive(Default)]
pub(super) struct Hooks {
    fault: Mutex<Option<Fault>>,
    before_catch_up: Mutex<Option<Hook>>,
}

impl Hooks {
    pub(super) fn take_fault(&self) -> Option<Fault> {
        self.fault
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    pub(super) fn before_catch_up(&self) {
        let hook = self
            .before_catch_up
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(hook) = hook {
            hook();
        }
    }

    fn inject(&self, fault: Fault) {
        *self.fault.lock().unwrap_or_else(PoisonError::into_inner) = Some(fault);
    }
}

fn key(p: i64) -> Vec<u8> {
    let partition = ConnectMap::new().with("p", p).unwrap();
    encode_key("c", Some(&partition))
}

fn value(v: i64) -> Vec<u8> {
    encode_value(&ConnectMap::new().with("position", v).unwrap())
}

fn put(p: i64, v: i64) -> OffsetWrite {
    OffsetWrite {
        key: key(p),
        value: Some(value(v)),
    }
}

fn open(path: &Path, options: FileStoreOptions) -> FileStore {
    FileStore::open_with(path, options).unwrap_or_else(|e| panic!("open: {e}"))
}

async fn get(store: &FileStore, p: i64) -> Option<Vec<u8>> {
    let got = store
        .get(&[key(p)])
        .await
        .unwrap_or_else(|e| panic!("get: {e}"));
    got.into_iter().next().flatten()
}

async fn assert_poisoned(store: &FileStore) {
    assert!(
        matches!(store.get(&[key(0)]).await, Err(StoreError::Poisoned { .. })),
        "get"
    );
    assert!(
        matches!(
            store.set(&[put(0, 9)]).await,
            Err(StoreError::Poisoned { .. })
        ),
        "set"
    );
    assert!(
        matches!(store.set(&[]).await, Err(StoreError::Poisoned { .. })),
        "empty set"
    );
    assert!(
        matches!(store.entries().await, Err(StoreError::Poisoned { .. })),
        "entries"
    );
    assert!(
        matches!(
            store.connector_offsets("c").await,
            Err(StoreError::Poisoned { .. })
        ),
        "connector"
    );
    assert!(
        matches!(store.compact(), Err(StoreError::Poisoned { .. })),
        "compact"
    );
}

#[tokio::test]
async fn a_failed_append_poisons_and_reopen_drops_the_torn_frame() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets");
    let store = open(&path, FileStoreOptions::default());
    store.set(&[put(0, 1), put(1, 1)]).await.unwrap();
    let good_len = std::fs::metadata(&path).map(|m| m.len()).unwrap();

    store.inner.test_hooks.inject(Fault::Append);
    let err = store.set(&[put(0, 2)]).await.err();
    assert!(
        matches!(err, Some(StoreError::Io { op: "append", .. })),
        "{err:?}"
    );
    assert_poisoned(&store).await;
    let message = store
        .get(&[key(0)])
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        message.contains("injected append failure") && message.contains("restart"),
        "{message}"
    );
    drop(store);

    let store = open(&path, FileStoreOptions::default());
    assert_eq!(
        get(&store, 0).await,
        Some(value(1)),
        "the failed batch is gone, the earlier one stays"
    );
    let len = std::fs::metadata(&path).map(|m| m.len()).unwrap();
    assert_eq!(len, good_len, "the half-written frame was truncated");
    store
        .set(&[put(0, 3)])
        .await
        .unwrap_or_else(|e| panic!("a reopened store accepts writes: {e}"));
}

#[tokio::test]
async fn a_failed_fdatasync_poisons() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets");
    let store = open(&path, FileStoreOptions::default());
    store.set(&[put(0, 1)]).await.unwrap();

    store.inner.test_hooks.inject(Fault::Sync);
    let err = store.set(&[put(0, 2)]).await.err();
    assert!(
        matches!(
            err,
            Some(StoreError::Io {
                op: "fdatasync",
                ..
            })
        ),
        "{err:?}"
    );
    assert_poisoned(&store).await;
    drop(store);

    // The frame reached the page cache, so it may be visible after a reopen: either outcome is allowed
    // for a `set` that did not return Ok, and here it is the whole batch.
    let store = open(&path, FileStoreOptions::default());
    assert_eq!(get(&store, 0).await, Some(value(2)));
}

#[tokio::test]
async fn writes_during_a_compaction_are_carried_into_the_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets");
    let options = FileStoreOptions {
        compact_min_bytes: 0,
        compact_ratio: 1.0,
    };
    let store = open(&path, options.clone());

    let (reached_tx, reached_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    *store
        .inner
        .test_hooks
        .before_catch_up
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(Box::new(move || {
        let _ = reached_tx.send(());
        let _ = go_rx.recv();
    }));

    let batch = |v: i64| (0..10).map(|p| put(p, v)).collect::<Vec<_>>();
    store.set(&batch(1)).await.unwrap();
    // Overwrites every partition: the file is now twice its live size, so this starts a compaction.
    store.set(&batch(2)).await.unwrap();
    // Generous bound so a stuck compaction fails the test instead of hanging it; not a timing check.
    reached_rx
        .recv_timeout(Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("the compaction did not reach its catch-up step: {e}"));

    // The snapshot is written; these land in the old file after it.
    let late = [
        put(0, 3),
        OffsetWrite {
            key: key(1),
            value: None,
        },
        put(10, 1),
    ];
    store.set(&late).await.unwrap();
    let before = std::fs::metadata(&path).map(|m| m.len()).unwrap();
    let _ = go_tx.send(());
    {
        // Wait for the compaction to finish.
        let mut writer = store.inner.writer().unwrap();
        while writer.compacting {
            writer = store
                .inner
                .compaction_done
                .wait(writer)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
    let after = std::fs::metadata(&path).map(|m| m.len()).unwrap();
    assert!(
        after < before,
        "compaction shrank the file ({before} → {after} bytes)"
    );
    assert_eq!(get(&store, 0).await, Some(value(3)));
    store
        .set(&[put(11, 1)])
        .await
        .unwrap_or_else(|e| panic!("appends go to the new file: {e}"));
    drop(store);

    // The old file's frames were 1 and 2 at the snapshot and 3 (the late batch) after it. The new
    // file numbers the snapshot from 3, the late batch after it (4), then the next append (5): the
    // next number (6) is above every number the old file used.
    let bytes = std::fs::read(&path).unwrap();
    let header =
        format::check_header(&bytes[..format::HEADER_LEN]).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(header.first_seq, Some(3));
    let mut seqs = Vec::new();
    let mut at = format::HEADER_LEN;
    while at < bytes.len() {
        let frame = format::decode_frame_header(header, &bytes[at..at + format::FRAME_HEADER_LEN])
            .unwrap_or_else(|| panic!("frame header at {at}"));
        seqs.push(frame.seq.unwrap_or_default());
        at += format::FRAME_HEADER_LEN + frame.payload_len as usize;
    }
    assert_eq!(seqs, vec![3, 4, 5], "renumbered, consecutive");

    let store = open(&path, options);
    assert_eq!(
        get(&store, 0).await,
        Some(value(3)),
        "a write made during the compaction survives"
    );
    assert_eq!(
        get(&store, 1).await,
        None,
        "a tombstone made during the compaction survives"
    );
    for p in 2..10 {
        assert_eq!(get(&store, p).await, Some(value(2)), "partition {p}");
    }
    assert_eq!(get(&store, 10).await, Some(value(1)));
    assert_eq!(
        get(&store, 11).await,
        Some(value(1)),
        "a write after the switch survives"
    );
    assert_eq!(store.len(), 11);
    assert!(!lock::sidecar(&path, ".compact-tmp").exists());
}

#[test]
fn ratio_below_one_counts_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets");
    let store = open(
        &path,
        FileStoreOptions {
            compact_min_bytes: 0,
            compact_ratio: f64::NAN,
        },
    );
    let writer = store.inner.writer().unwrap();
    assert!(
        !store.inner.wants_compaction(&writer),
        "an empty, compact file never needs compaction"
    );
}

#[tokio::test]
async fn history_returns_every_raw_write_in_file_order_until_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets");
    let ab = br#"["c",{"a":1,"b":2}]"#.to_vec();
    let ba = br#"["c",{"b":2,"a":1}]"#.to_vec();
    let store = open(&path, FileStoreOptions::default());
    let batches = [
        vec![put(1, 10), put(2, 20)],
        vec![OffsetWrite {
            key: ab.clone(),
            value: Some(b"{\"x\":1}".to_vec()),
        }],
        vec![
            OffsetWrite {
                key: ba.clone(),
                value: Some(b"{\"x\":2}".to_vec()),
            },
            OffsetWrite {
                key: key(2),
                value: None,
            },
        ],
    ];
    for batch in &batches {
        store.set(batch).await.unwrap();
    }
    let expected: Vec<StoredRecord> = batches
        .iter()
        .flatten()
        .map(|w| (w.key.clone(), w.value.clone()))
        .collect();
    assert_eq!(store.history().await.unwrap(), expected);
    assert_eq!(
        store.entries().await.unwrap().len(),
        2,
        "the field-order variants are one live partition"
    );
    // After a reopen the same history; after a compaction only the live offsets, as live values.
    drop(store);
    let store = open(&path, FileStoreOptions::default());
    assert_eq!(store.history().await.unwrap(), expected);
    store.compact().unwrap();
    let live: Vec<StoredRecord> = store
        .entries()
        .await
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, Some(v)))
        .collect();
    assert_eq!(store.history().await.unwrap(), live);
}

/// A batch larger than `replay::STREAM_PAYLOAD` (an import) is replayed in two streaming passes:
/// every write comes back, its history too, and a torn copy of it is still dropped as torn.
#[tokio::test]
async fn a_frame_larger_than_the_streaming_threshold_replays_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets");
    let long = |p: i64| vec![b'7'; 100 + (p % 50) as usize];
    let batch: Vec<OffsetWrite> = (0..100_000i64)
        .map(|p| OffsetWrite {
            key: key(p % 90_000),
            value: (p % 1000 != 999).then(|| long(p)),
        })
        .collect();
    let frame_len = format::encode_batch(&batch).unwrap().len() as u64;
    assert!(frame_len > replay::STREAM_PAYLOAD, "{frame_len}");
    {
        let store = open(&path, FileStoreOptions::default());
        store.set(&batch).await.unwrap();
    }
    let expected = {
        let mut table = OffsetTable::default();
        for w in &batch {
            table.apply(&w.key, w.value.as_deref());
        }
        table.entries()
    };
    let store = FileStore::open_read_only(&path).unwrap();
    assert_eq!(store.entries().await.unwrap(), expected);
    assert_eq!(store.history().await.unwrap().len(), batch.len());
    drop(store);

    // The frame's last sector never reached the disk: a torn write, dropped at the next open.
    let len = std::fs::metadata(&path).unwrap().len();
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    use std::os::unix::fs::FileExt;
    file.write_all_at(&[0u8; 512], (len - 512) / 512 * 512 - 512)
        .unwrap();
    drop(file);
    let store = open(&path, FileStoreOptions::default());
    assert!(
        store.entries().await.unwrap().is_empty(),
        "the torn batch is dropped"
    );
}

#[tokio::test]
async fn a_large_batch_into_an_empty_store_then_small_ones_read_back_and_replay() {
    // Over LARGE_BATCH: the table is sized up front, then grows the usual way.
    let n = i64::try_from(LARGE_BATCH).unwrap() + 10;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets");
    let store = open(&path, FileStoreOptions::default());
    let batch: Vec<OffsetWrite> = (0..n).map(|p| put(p, p)).collect();
    store.set(&batch).await.unwrap();
    for p in n..n + 100 {
        store.set(&[put(p, p), put(p - n, -1)]).await.unwrap();
    }
    let expected = |p: i64| if p < 100 { value(-1) } else { value(p) };
    let keys: Vec<Vec<u8>> = (0..n + 100).map(key).collect();
    let got = store.get(&keys).await.unwrap();
    assert!((0..n + 100).all(|p| got[p as usize] == Some(expected(p))));
    drop(store);
    let again = open(&path, FileStoreOptions::default());
    assert_eq!(again.get(&keys).await.unwrap(), got);
}

fn batch_of(writes: &[OffsetWrite]) -> WriteBatch {
    WriteBatch::from_writes(writes).unwrap()
}

/// `set_batch` writes the very bytes `set` writes (old files and old code read it), a large batch
/// included (over LARGE_BATCH and the streaming threshold, with overwrites and tombstones), and
/// what it indexed (read back through the file) is what a reopen replays.
#[tokio::test]
async fn set_batch_writes_the_bytes_set_writes_and_replays_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let long = |p: i64| vec![b'7'; 100 + (p % 50) as usize];
    let large: Vec<OffsetWrite> = (0..100_000i64)
        .map(|p| OffsetWrite {
            key: key(p % 90_000),
            value: (p % 1000 != 999).then(|| long(p)),
        })
        .collect();
    assert!(format::encode_batch(&large).unwrap().len() as u64 > replay::STREAM_PAYLOAD);
    let small = vec![
        put(5, 50),
        OffsetWrite {
            key: key(6),
            value: None,
        },
    ];
    let by_set = dir.path().join("by-set");
    let by_batch = dir.path().join("by-batch");
    let set_store = open(&by_set, FileStoreOptions::default());
    let batch_store = open(&by_batch, FileStoreOptions::default());
    for writes in [&small, &large, &small] {
        set_store.set(writes).await.unwrap();
        let written = batch_store.set_batch(batch_of(writes)).await.unwrap();
        assert!(matches!(written, BatchWritten::ReadBack), "{written:?}");
    }
    assert_eq!(
        std::fs::read(&by_batch).unwrap(),
        std::fs::read(&by_set).unwrap(),
        "byte-identical files"
    );
    let entries = set_store.entries().await.unwrap();
    assert_eq!(batch_store.entries().await.unwrap(), entries);
    assert_eq!(batch_store.len(), set_store.len());
    assert!(
        matches!(
            batch_store.set_batch(WriteBatch::default()).await,
            Ok(BatchWritten::ReadBack)
        ),
        "an empty batch writes nothing"
    );
    drop((set_store, batch_store));
    let reopened = open(&by_batch, FileStoreOptions::default());
    assert_eq!(reopened.entries().await.unwrap(), entries);
    reopened
        .set(&[put(7, 70)])
        .await
        .unwrap_or_else(|e| panic!("the frame sequence goes on: {e}"));
}

/// A `set_batch` cut short (header and half the payload written, as on a full disk) poisons the
/// store, and the next open drops the torn frame: the store holds what it held before.
#[tokio::test]
async fn a_failed_set_batch_changes_nothing_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets");
    let store = open(&path, FileStoreOptions::default());
    store.set(&[put(0, 1), put(1, 1)]).await.unwrap();
    let good = std::fs::read(&path).unwrap();

    let import: Vec<OffsetWrite> = (0..5000).map(|p| put(p, 2)).collect();
    store.inner.test_hooks.inject(Fault::Append);
    let err = store.set_batch(batch_of(&import)).await.err();
    assert!(
        matches!(err, Some(StoreError::Io { op: "append", .. })),
        "{err:?}"
    );
    assert!(std::fs::metadata(&path).unwrap().len() > good.len() as u64);
    assert_poisoned(&store).await;
    assert!(matches!(
        store.set_batch(batch_of(&[put(0, 3)])).await,
        Err(StoreError::Poisoned { .. })
    ));
    drop(store);

    let store = open(&path, FileStoreOptions::default());
    assert_eq!(
        std::fs::read(&path).unwrap(),
        good,
        "the torn frame was dropped"
    );
    assert_eq!(get(&store, 0).await, Some(value(1)));
    assert_eq!(get(&store, 4999).await, None, "nothing of the batch");
}

/// A read-only store refuses `set_batch` like `set`.
#[tokio::test]
async fn a_read_only_store_refuses_set_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets");
    drop(open(&path, FileStoreOptions::default()));
    let store = FileStore::open_read_only(&path).unwrap();
    let err = store.set_batch(batch_of(&[put(0, 1)])).await.err();
    assert!(
        matches!(err, Some(StoreError::Io { op: "append", .. })),
        "{err:?}"
    );
}

/// The header a compaction writes says how many offsets the file starts with and whether their keys
/// are all canonical; a reopen trusts that only as far as it goes: keys written in another field
/// order, and connector names with escapes, are still found by every spelling of their partition.
#[tokio::test]
async fn compaction_records_the_live_count_and_whether_every_key_is_canonical() {
    let compacted_header = |path: &Path| {
        let bytes = std::fs::read(path).unwrap();
        format::check_header(&bytes[..format::HEADER_LEN])
            .unwrap_or_else(|e| panic!("{e:?}"))
            .compacted
    };
    let dir = tempfile::tempdir().unwrap();

    // Ferry's own keys, one connector name with an escape: all canonical.
    let path = dir.path().join("canonical");
    let store = open(&path, FileStoreOptions::default());
    let quoted = encode_key("say \"hi\"", Some(&ConnectMap::new().with("p", 1).unwrap()));
    let mut writes: Vec<OffsetWrite> = (0..100).map(|p| put(p, p)).collect();
    writes.push(OffsetWrite {
        key: quoted.clone(),
        value: Some(value(7)),
    });
    store.set(&writes).await.unwrap();
    store.set(&[put(5, 500)]).await.unwrap();
    store.compact().unwrap();
    assert_eq!(
        compacted_header(&path),
        format::Compacted {
            writes: 101,
            canonical_keys: true
        }
    );
    store.set(&[put(5, 501), put(200, 1)]).await.unwrap();
    drop(store);
    let store = open(&path, FileStoreOptions::default());
    assert_eq!(store.len(), 102);
    assert_eq!(get(&store, 5).await, Some(value(501)), "a later frame wins");
    assert_eq!(get(&store, 99).await, Some(value(99)));
    assert_eq!(get(&store, 200).await, Some(value(1)));
    let got = store.get(&[quoted]).await.unwrap();
    assert_eq!(got, vec![Some(value(7))], "the escaped connector name");
    drop(store);

    // A key another writer printed with its fields out of order keeps its bytes, so the compacted
    // file is not all canonical, and the reopened store still finds it by the sorted spelling.
    let path = dir.path().join("mixed");
    let store = open(&path, FileStoreOptions::default());
    let unsorted = br#"["c",{"z":1,"a":2}]"#.to_vec();
    let sorted = br#"["c",{"a":2,"z":1}]"#.to_vec();
    store
        .set(&[
            put(1, 1),
            OffsetWrite {
                key: unsorted.clone(),
                value: Some(value(3)),
            },
        ])
        .await
        .unwrap();
    store.compact().unwrap();
    assert_eq!(
        compacted_header(&path),
        format::Compacted {
            writes: 2,
            canonical_keys: false
        }
    );
    drop(store);
    let store = open(&path, FileStoreOptions::default());
    assert_eq!(
        store.get(&[sorted]).await.unwrap(),
        vec![Some(value(3))],
        "found by the canonical spelling"
    );
    let entries = store.entries().await.unwrap();
    assert!(
        entries.iter().any(|(key, _)| *key == unsorted),
        "the raw bytes are kept: {entries:?}"
    );
}
