//! What the file store does with damaged, foreign and locked files, and what compaction keeps.
//!
//! The rule under test: a torn final write (a `set` that never returned `Ok`) is truncated with a WARN;
//! any other damage refuses the open with the exact byte offset and leaves the file byte-for-byte as
//! it was. The store never starts empty on damage.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ferry_api::ConnectMap;
use ferry_offsets::{
    FileStore, FileStoreOptions, OffsetBackingStore, OffsetWrite, StoreError, encode_key,
    encode_value,
};
use tempfile::TempDir;

const HEADER_LEN: u64 = 32;
const FRAME_HEADER_LEN: u64 = 20;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"))
}

fn key(p: i64) -> Vec<u8> {
    let partition = ConnectMap::new()
        .with("file", format!("/data/{p}.log"))
        .unwrap_or_default();
    encode_key("conn", Some(&partition))
}

fn value(v: i64) -> Vec<u8> {
    encode_value(&ConnectMap::new().with("position", v).unwrap_or_default())
}

fn put(p: i64, v: i64) -> OffsetWrite {
    OffsetWrite {
        key: key(p),
        value: Some(value(v)),
    }
}

fn tombstone(p: i64) -> OffsetWrite {
    OffsetWrite {
        key: key(p),
        value: None,
    }
}

/// Batch `i` of a fixture: partitions 0..4, value `10 * i + p`.
fn batch(i: i64) -> Vec<OffsetWrite> {
    (0..4).map(|p| put(p, 10 * i + p)).collect()
}

fn file_len(path: &Path) -> u64 {
    fs::metadata(path)
        .map(|m| m.len())
        .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
}

fn read(path: &Path) -> Vec<u8> {
    fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn write(path: &Path, bytes: &[u8]) {
    fs::write(path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

fn append(path: &Path, bytes: &[u8]) {
    let mut file = fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    file.write_all(bytes)
        .unwrap_or_else(|e| panic!("append to {}: {e}", path.display()));
}

fn open(path: &Path) -> FileStore {
    FileStore::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

/// A store written by `batches` sets, closed, with the file length after the header and each set.
struct Fixture {
    _dir: TempDir,
    path: PathBuf,
    /// `boundaries[0]` is the end of the header, `boundaries[i]` the end of batch `i - 1`.
    boundaries: Vec<u64>,
}

fn fixture(batches: i64) -> Fixture {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let path = dir.path().join("offsets.ferry");
    let rt = runtime();
    let store = open(&path);
    let mut boundaries = vec![file_len(&path)];
    for i in 0..batches {
        rt.block_on(store.set(&batch(i)))
            .unwrap_or_else(|e| panic!("set: {e}"));
        boundaries.push(file_len(&path));
    }
    drop(store);
    assert_eq!(boundaries[0], HEADER_LEN);
    Fixture {
        _dir: dir,
        path,
        boundaries,
    }
}

/// The value of partition `p`, decoded.
fn position(store: &FileStore, p: i64) -> Option<i64> {
    let got = runtime()
        .block_on(store.get(&[key(p)]))
        .unwrap_or_else(|e| panic!("get: {e}"));
    got.into_iter().next().flatten().map(|bytes| {
        let map = ferry_offsets::decode_value(&bytes).unwrap();
        map.get("position")
            .and_then(ferry_api::Value::as_i64)
            .unwrap_or(-1)
    })
}

/// Asserts the store holds exactly batch `i` (the last applied).
fn assert_holds_batch(store: &FileStore, i: i64) {
    for p in 0..4 {
        assert_eq!(
            position(store, p),
            Some(10 * i + p),
            "partition {p} holds batch {i}"
        );
    }
}

/// Runs `f` with a subscriber that records this thread's log lines.
fn with_logs<R>(f: impl FnOnce() -> R) -> (R, String) {
    #[derive(Clone)]
    struct Capture(Arc<Mutex<Vec<u8>>>);
    impl Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let capture = Capture(Arc::default());
    let writer = capture.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let result = tracing::subscriber::with_default(subscriber, f);
    let logs =
        String::from_utf8_lossy(&capture.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned();
    (result, logs)
}

/// Opens a damaged file: it must open, truncated to `expected_len`, with a WARN that names the file,
/// the offset and the bytes dropped.
fn open_repaired(path: &Path, expected_len: u64) -> FileStore {
    let before = file_len(path);
    let (store, logs) = with_logs(|| FileStore::open(path));
    let store = store.unwrap_or_else(|e| panic!("a torn tail must not stop the open: {e}"));
    assert_eq!(
        file_len(path),
        expected_len,
        "the file is cut back to the last complete frame"
    );
    assert!(logs.contains("WARN"), "a WARN is logged: {logs}");
    assert!(
        logs.contains(&path.display().to_string()),
        "the WARN names the file: {logs}"
    );
    assert!(
        logs.contains(&format!("at byte {expected_len}")),
        "the WARN names the offset: {logs}"
    );
    assert!(
        logs.contains(&format!("{} bytes", before - expected_len)),
        "and what was dropped: {logs}"
    );
    store
}

/// Opens a damaged or foreign file: it must be refused, and the file must not change.
fn open_refused(path: &Path) -> StoreError {
    let before = read(path);
    let err = match FileStore::open(path) {
        Ok(_) => panic!("{} must not open", path.display()),
        Err(e) => e,
    };
    assert_eq!(read(path), before, "a refused file is not modified");
    err
}

fn assert_corrupt_at(err: &StoreError, path: &Path, offset: u64) {
    match err {
        StoreError::Corrupt {
            path: p,
            byte_offset,
            ..
        } => {
            assert_eq!(p, path);
            assert_eq!(*byte_offset, offset, "{err}");
        }
        other => panic!("expected Corrupt at byte {offset}, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains(&path.display().to_string()),
        "the message names the file: {message}"
    );
    assert!(
        message.contains(&format!("byte {offset}")),
        "and the offset: {message}"
    );
    assert!(
        message.contains("has not been modified"),
        "and says the file is untouched: {message}"
    );
}

/// A frame with sequence number `seq` and valid checksums around `payload`.
fn frame(seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    let header_crc = crc32c::crc32c(&out);
    out.extend_from_slice(&header_crc.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

// ---- torn final writes: repaired ------------------------------------------------------------

#[test]
fn torn_last_frame_mid_payload_is_truncated_with_a_warning() {
    let f = fixture(3);
    let last_good = f.boundaries[2];
    let file = fs::OpenOptions::new().write(true).open(&f.path).unwrap();
    file.set_len(last_good + FRAME_HEADER_LEN + 5).unwrap();
    drop(file);

    let store = open_repaired(&f.path, last_good);
    assert_holds_batch(&store, 1);
    runtime()
        .block_on(store.set(&batch(7)))
        .unwrap_or_else(|e| panic!("writes continue: {e}"));
    drop(store);
    assert_holds_batch(&open(&f.path), 7);
}

#[test]
fn torn_frame_header_at_the_tail_is_truncated() {
    let f = fixture(3);
    let last_good = f.boundaries[2];
    let file = fs::OpenOptions::new().write(true).open(&f.path).unwrap();
    file.set_len(last_good + 7).unwrap();
    drop(file);

    assert_holds_batch(&open_repaired(&f.path, last_good), 1);
}

#[test]
fn zero_filled_tail_is_truncated() {
    let f = fixture(3);
    append(&f.path, &[0u8; 5000]);
    assert_holds_batch(&open_repaired(&f.path, f.boundaries[3]), 2);
}

#[test]
fn complete_last_frame_with_an_unwritten_sector_is_truncated() {
    // Sector-aligned zeros inside the last frame: its length reached the disk, one sector did not.
    let f = fixture(5);
    let mut bytes = read(&f.path);
    let payload_start = f.boundaries[4] + FRAME_HEADER_LEN;
    let sector = payload_start.div_ceil(512) * 512;
    assert!(
        sector < f.boundaries[5],
        "the last frame crosses a sector boundary after its header"
    );
    let end = (sector + 512).min(f.boundaries[5]);
    bytes[sector as usize..end as usize].fill(0);
    write(&f.path, &bytes);
    assert_holds_batch(&open_repaired(&f.path, f.boundaries[4]), 3);
}

#[test]
fn bit_rot_in_a_complete_last_frame_is_refused_not_truncated() {
    // Every byte of the last frame is there, one bit flipped: the frame was written (perhaps
    // acknowledged) and damaged afterwards. Dropping it would lose a flush while claiming none was.
    let f = fixture(3);
    let mut bytes = read(&f.path);
    let last = bytes.len() - 3;
    bytes[last] ^= 0x40;
    write(&f.path, &bytes);
    let err = open_refused(&f.path);
    assert_corrupt_at(&err, &f.path, f.boundaries[2]);
    assert!(err.to_string().contains("not a torn final write"), "{err}");
}

#[test]
fn damaged_last_frame_header_followed_by_zeros_is_truncated() {
    let f = fixture(2);
    let mut tail = vec![0u8; 300];
    tail[..6].copy_from_slice(b"\x2a\x01\x00\x00\x9c\x11");
    append(&f.path, &tail);
    assert_holds_batch(&open_repaired(&f.path, f.boundaries[2]), 1);
}

// ---- other damage: refused, file untouched ---------------------------------------------------

#[test]
fn bad_checksum_in_a_frame_before_the_tail_is_refused_with_its_offset() {
    let f = fixture(3);
    let second = f.boundaries[1];
    let mut bytes = read(&f.path);
    bytes[(second + FRAME_HEADER_LEN + 9) as usize] ^= 0x01;
    write(&f.path, &bytes);
    // A stale compaction file is left alone too when the open is refused.
    let tmp = PathBuf::from(format!("{}.compact-tmp", f.path.display()));
    write(&tmp, b"partial");

    let err = open_refused(&f.path);
    assert_corrupt_at(&err, &f.path, second);
    assert!(err.to_string().contains("not a torn final write"), "{err}");
    assert_eq!(
        read(&tmp),
        b"partial",
        "nothing next to the store is touched either"
    );
}

#[test]
fn garbage_in_the_middle_is_refused() {
    let f = fixture(3);
    let second = f.boundaries[1];
    let mut bytes = read(&f.path);
    for b in &mut bytes[second as usize..second as usize + 20] {
        *b = 0x5A;
    }
    write(&f.path, &bytes);
    assert_corrupt_at(&open_refused(&f.path), &f.path, second);
}

#[test]
fn garbage_appended_after_valid_frames_is_refused() {
    let f = fixture(2);
    append(
        &f.path,
        b"this text was appended by someone else and is not a frame at all\n",
    );
    assert_corrupt_at(&open_refused(&f.path), &f.path, f.boundaries[2]);
}

#[test]
fn absurd_frame_length_is_refused() {
    let f = fixture(2);
    let mut header = Vec::new();
    header.extend_from_slice(&(3u32 << 30).to_le_bytes());
    header.extend_from_slice(&0u32.to_le_bytes());
    header.extend_from_slice(&3u64.to_le_bytes());
    let crc = crc32c::crc32c(&header);
    header.extend_from_slice(&crc.to_le_bytes());
    header.extend_from_slice(&[1u8; 64]);
    append(&f.path, &header);
    let err = open_refused(&f.path);
    assert_corrupt_at(&err, &f.path, f.boundaries[2]);
    assert!(err.to_string().contains("limit"), "{err}");
}

#[test]
fn payload_that_does_not_parse_is_refused_even_at_the_tail() {
    let f = fixture(2);
    // One write whose key claims 100 bytes, but only 3 follow: valid checksums, invalid structure.
    let mut payload = Vec::new();
    payload.extend_from_slice(&1u32.to_le_bytes());
    payload.extend_from_slice(&100u32.to_le_bytes());
    payload.extend_from_slice(b"abc");
    append(&f.path, &frame(3, &payload));
    let err = open_refused(&f.path);
    assert_corrupt_at(&err, &f.path, f.boundaries[2]);
    assert!(err.to_string().contains("does not parse"), "{err}");
}

#[test]
fn damaged_file_header_is_refused() {
    let f = fixture(1);
    let mut bytes = read(&f.path);
    bytes[20] = 0x77;
    write(&f.path, &bytes);
    let err = open_refused(&f.path);
    assert_corrupt_at(&err, &f.path, 0);
    assert!(err.to_string().contains("header checksum"), "{err}");
}

#[test]
fn truncated_file_header_is_refused() {
    let f = fixture(1);
    let bytes = read(&f.path);
    write(&f.path, &bytes[..20]);
    assert_corrupt_at(&open_refused(&f.path), &f.path, 20);
}

#[test]
fn unknown_format_version_is_refused() {
    let f = fixture(1);
    let mut bytes = read(&f.path);
    bytes[8..10].copy_from_slice(&3u16.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[..28]);
    bytes[28..32].copy_from_slice(&crc.to_le_bytes());
    write(&f.path, &bytes);
    let err = open_refused(&f.path);
    assert!(
        matches!(err, StoreError::UnsupportedFormat { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("format version 3"), "{err}");
}

#[test]
fn wrong_magic_is_refused() {
    let f = fixture(1);
    let mut bytes = read(&f.path);
    bytes[..8].copy_from_slice(b"NOTFERRY");
    write(&f.path, &bytes);
    let err = open_refused(&f.path);
    assert!(
        matches!(err, StoreError::UnsupportedFormat { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("not a Ferry offset store"),
        "{err}"
    );
}

#[test]
fn empty_file_is_refused_not_treated_as_a_new_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets.ferry");
    write(&path, b"");
    let err = open_refused(&path);
    assert!(
        matches!(err, StoreError::UnsupportedFormat { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("empty (0 bytes)"), "{err}");
}

#[test]
fn kafka_connect_standalone_file_is_refused_with_the_import_command() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("connect.offsets");
    // ObjectOutputStream of a java.util.HashMap: STREAM_MAGIC, STREAM_VERSION, TC_OBJECT, TC_CLASSDESC…
    let mut bytes = vec![0xAC, 0xED, 0x00, 0x05, 0x73, 0x72, 0x00, 0x11];
    bytes.extend_from_slice(b"java.util.HashMap");
    bytes.extend_from_slice(&[
        0x05, 0x07, 0xDA, 0xC1, 0xC3, 0x16, 0x60, 0xD1, 0x03, 0x00, 0x02,
    ]);
    write(&path, &bytes);
    let err = open_refused(&path);
    assert!(
        matches!(err, StoreError::UnsupportedFormat { .. }),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("Kafka Connect"), "{message}");
    assert!(message.contains("ferry offsets set"), "{message}");
    assert!(message.contains(&path.display().to_string()), "{message}");
}

// ---- locking ------------------------------------------------------------------------------------

#[test]
fn a_second_opener_gets_locked_naming_the_lock_file() {
    let f = fixture(1);
    let first = open(&f.path);
    let lock = PathBuf::from(format!("{}.lock", f.path.display()));
    let err = match FileStore::open(&f.path) {
        Ok(_) => panic!("a second FileStore on the same file must be refused"),
        Err(e) => e,
    };
    match &err {
        StoreError::Locked { path, lock: l } => {
            assert_eq!(path, &f.path);
            assert_eq!(l, &lock);
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    assert!(
        err.to_string().contains(&lock.display().to_string()),
        "{err}"
    );
    assert_holds_batch(&first, 0);
    drop(first);
    assert!(lock.exists(), "the lock file is never deleted");
    assert_holds_batch(&open(&f.path), 0);
}

// ---- creation and leftovers ---------------------------------------------------------------------

#[test]
fn a_new_store_is_a_bare_header_and_a_missing_directory_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets.ferry");
    let store = open(&path);
    assert!(store.is_empty());
    assert_eq!(store.path(), path);
    assert_eq!(&read(&path)[..8], b"FERRYOFS");
    assert_eq!(file_len(&path), HEADER_LEN);
    runtime().block_on(store.set(&[])).unwrap();
    assert_eq!(file_len(&path), HEADER_LEN, "an empty batch writes nothing");

    let missing = dir.path().join("no-such-dir").join("offsets.ferry");
    let err = match FileStore::open(&missing) {
        Ok(_) => panic!("a store in a missing directory must not open"),
        Err(e) => e,
    };
    assert!(matches!(err, StoreError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("no-such-dir"), "{err}");
}

#[test]
fn stale_temporary_files_are_removed_on_open() {
    let f = fixture(2);
    let compact_tmp = PathBuf::from(format!("{}.compact-tmp", f.path.display()));
    let create_tmp = PathBuf::from(format!("{}.create-tmp", f.path.display()));
    write(&compact_tmp, b"FERRYOFS half a compaction");
    write(&create_tmp, b"FERRY");
    let before = read(&f.path);

    let (store, logs) = with_logs(|| FileStore::open(&f.path));
    let store = store.unwrap();
    assert!(
        !compact_tmp.exists() && !create_tmp.exists(),
        "leftovers removed"
    );
    assert!(
        logs.contains("INFO") && logs.contains(".compact-tmp"),
        "an INFO says so: {logs}"
    );
    assert_eq!(read(&f.path), before, "the store file itself is untouched");
    assert_holds_batch(&store, 1);
}

// ---- compaction -----------------------------------------------------------------------------------

#[test]
fn compaction_keeps_every_live_offset_and_drops_tombstones_and_superseded_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets.ferry");
    let rt = runtime();
    let store = open(&path);
    for round in 0..20 {
        let writes: Vec<OffsetWrite> = (0..50).map(|p| put(p, round * 100 + p)).collect();
        rt.block_on(store.set(&writes)).unwrap();
    }
    let tombstones: Vec<OffsetWrite> = (0..50).filter(|p| p % 5 == 0).map(tombstone).collect();
    rt.block_on(store.set(&tombstones)).unwrap();
    // Some foreign keys and a null partition, kept byte-exact.
    let odd = vec![
        OffsetWrite {
            key: b"not json".to_vec(),
            value: Some(b"raw".to_vec()),
        },
        OffsetWrite {
            key: encode_key("conn", None),
            value: Some(value(1)),
        },
    ];
    rt.block_on(store.set(&odd)).unwrap();
    let expected = rt.block_on(store.entries()).unwrap();
    assert_eq!(expected.len(), 42);
    let before = file_len(&path);

    store.compact().unwrap_or_else(|e| panic!("compact: {e}"));
    let after = file_len(&path);
    assert!(
        after * 10 < before,
        "the file shrinks to its live offsets ({before} → {after} bytes)"
    );
    assert_eq!(rt.block_on(store.entries()).unwrap(), expected);
    rt.block_on(store.set(&[put(1, 7)]))
        .unwrap_or_else(|e| panic!("appends after compaction: {e}"));
    drop(store);

    let store = open(&path);
    let mut expected_after = expected;
    expected_after.retain(|(k, _)| *k != key(1));
    expected_after.push((key(1), value(7)));
    let got = rt.block_on(store.entries()).unwrap();
    assert_eq!(
        got, expected_after,
        "every live offset, in store order, after a reopen"
    );
    assert_eq!(position(&store, 5), None, "tombstones stay dropped");
    assert_eq!(store.len(), 42);
}

#[test]
fn writes_during_background_compactions_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets.ferry");
    let rt = runtime();
    let options = FileStoreOptions {
        compact_min_bytes: 8 << 10,
        compact_ratio: 1.5,
    };
    let store = FileStore::open_with(&path, options.clone()).unwrap();
    let mut model: HashMap<i64, i64> = HashMap::new();
    let mut previous_len = file_len(&path);
    let mut shrinks = 0;
    let mut n = 0i64;
    // Keep writing until background compactions have visibly finished a few times underneath the
    // writes (the file got shorter between two flushes without anyone calling compact()).
    while shrinks < 3 {
        n += 1;
        assert!(
            n < 20_000,
            "no background compaction finished after {n} flushes"
        );
        let mut writes: Vec<OffsetWrite> = (0..8).map(|i| put((n * 7 + i) % 60, n)).collect();
        if n % 11 == 0 {
            writes.push(tombstone(n % 60));
        }
        rt.block_on(store.set(&writes))
            .unwrap_or_else(|e| panic!("set {n}: {e}"));
        for w in &writes {
            let p = (0..60).find(|p| key(*p) == w.key).unwrap_or(-1);
            match w.value {
                Some(_) => model.insert(p, n),
                None => model.remove(&p),
            };
        }
        let len = file_len(&path);
        if len < previous_len {
            shrinks += 1;
        }
        previous_len = len;
    }
    drop(store);

    let store = FileStore::open_with(&path, options).unwrap_or_else(|e| panic!("reopen: {e}"));
    assert_eq!(store.len(), model.len());
    for p in 0..60 {
        assert_eq!(
            position(&store, p),
            model.get(&p).copied(),
            "partition {p} after {n} flushes"
        );
    }
    assert!(!PathBuf::from(format!("{}.compact-tmp", path.display())).exists());
}
