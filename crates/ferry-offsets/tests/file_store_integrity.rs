//! Damage the file store must refuse rather than explain away, the version-1 upgrade, and opening
//! read-only.
//!
//! - A copy of an earlier frame appended to the file has valid checksums; its sequence number gives
//!   it away, so the open is refused instead of moving offsets back (also across a compaction).
//! - A flipped bit in the file header's version field is damage (the checksum says so), not a file of
//!   another release; damaged magic bytes are named by their offset.
//! - A version-1 file (`fixtures/v1.ferry`, written by the version-1 code) reads as it did; a
//!   writable open upgrades it to version 2, a read-only open leaves it alone.
//! - A read-only open creates, truncates and locks nothing, and refuses writes.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use ferry_api::ConnectMap;
use ferry_offsets::{
    FileStore, OffsetBackingStore, OffsetWrite, StoreError, decode_value, encode_key, encode_value,
};
use tempfile::TempDir;

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

fn put(p: i64, v: i64) -> OffsetWrite {
    OffsetWrite {
        key: key(p),
        value: Some(encode_value(
            &ConnectMap::new().with("position", v).unwrap_or_default(),
        )),
    }
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

fn file_len(path: &Path) -> u64 {
    fs::metadata(path)
        .map(|m| m.len())
        .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
}

fn lock_of(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}.lock", path.display()))
}

/// Every file in `dir` with its bytes.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("list {}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let bytes = read(&path);
            (path, bytes)
        })
        .collect();
    files.sort();
    files
}

/// A store written by one `set` per batch; returns the file length after the header and each set.
fn store_with(dir: &TempDir, batches: &[Vec<OffsetWrite>]) -> (PathBuf, Vec<u64>) {
    let path = dir.path().join("offsets.ferry");
    let rt = runtime();
    let store = FileStore::open(&path).unwrap_or_else(|e| panic!("open: {e}"));
    let mut boundaries = vec![file_len(&path)];
    for batch in batches {
        rt.block_on(store.set(batch))
            .unwrap_or_else(|e| panic!("set: {e}"));
        boundaries.push(file_len(&path));
    }
    (path, boundaries)
}

/// Every live offset as (partition number, position), sorted.
fn positions(store: &FileStore) -> Vec<(i64, i64)> {
    let entries = runtime()
        .block_on(store.entries())
        .unwrap_or_else(|e| panic!("entries: {e}"));
    let mut out: Vec<(i64, i64)> = entries
        .into_iter()
        .map(|(k, v)| {
            let p = (0..10)
                .find(|p| key(*p) == k)
                .unwrap_or_else(|| panic!("unexpected key {}", String::from_utf8_lossy(&k)));
            let value = decode_value(&v).unwrap();
            let position = value
                .get("position")
                .and_then(ferry_api::Value::as_i64)
                .unwrap_or(-1);
            (p, position)
        })
        .collect();
    out.sort_unstable();
    out
}

fn refused(path: &Path) -> StoreError {
    let before = read(path);
    let err = match FileStore::open(path) {
        Ok(_) => panic!("{} must not open", path.display()),
        Err(e) => e,
    };
    assert_eq!(read(path), before, "a refused file is not modified");
    err
}

fn assert_corrupt_at(err: &StoreError, path: &Path, offset: u64, says: &str) {
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
    assert!(message.contains(&format!("byte {offset}")), "{message}");
    assert!(message.contains(says), "{message}");
}

// ---- replayed frames (sequence numbers) ----------------------------------------------------------

#[test]
fn a_copy_of_an_earlier_frame_appended_to_the_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (path, b) = store_with(&dir, &[vec![put(0, 1)], vec![put(0, 2)], vec![put(0, 3)]]);
    let bytes = read(&path);
    let first_frame = bytes[b[0] as usize..b[1] as usize].to_vec();
    append(&path, &first_frame);

    let err = refused(&path);
    assert_corrupt_at(&err, &path, b[3], "copy of an earlier frame");
    assert!(err.to_string().contains("sequence number 1"), "{err}");

    // The last frame repeated is refused too.
    write(&path, &bytes);
    append(&path, &bytes[b[2] as usize..b[3] as usize]);
    assert_corrupt_at(&refused(&path), &path, b[3], "sequence number 3");
}

#[test]
fn a_frame_from_before_a_compaction_cannot_be_replayed_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let batches: Vec<Vec<OffsetWrite>> = (0..5).map(|i| vec![put(0, i), put(1, i)]).collect();
    let (path, b) = store_with(&dir, &batches);
    let old = read(&path);
    let rt = runtime();
    {
        let store = FileStore::open(&path).unwrap();
        store.compact().unwrap_or_else(|e| panic!("compact: {e}"));
        rt.block_on(store.set(&[put(0, 100)]))
            .unwrap_or_else(|e| panic!("set: {e}"));
    }
    let compacted = read(&path);
    // Every frame of the old file, appended to the new one, is out of sequence.
    for i in 0..5 {
        write(&path, &compacted);
        append(&path, &old[b[i] as usize..b[i + 1] as usize]);
        assert_corrupt_at(
            &refused(&path),
            &path,
            compacted.len() as u64,
            "sequence number",
        );
    }
    write(&path, &compacted);
    let store = FileStore::open(&path).unwrap();
    assert_eq!(positions(&store), vec![(0, 100), (1, 4)]);
}

// ---- the file header -------------------------------------------------------------------------

#[test]
fn a_flipped_bit_in_the_version_field_is_damage_not_another_release() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = store_with(&dir, &[vec![put(0, 1)]]);
    let mut bytes = read(&path);
    bytes[9] ^= 0x04;
    write(&path, &bytes);
    let err = refused(&path);
    assert_corrupt_at(&err, &path, 0, "header checksum");
    assert!(!err.to_string().contains("release"), "{err}");
}

#[test]
fn damaged_magic_bytes_are_refused_with_their_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = store_with(&dir, &[vec![put(0, 1)]]);
    let mut bytes = read(&path);
    bytes[3] ^= 0x01;
    write(&path, &bytes);
    assert_corrupt_at(&refused(&path), &path, 3, "magic");
}

// ---- version 1 -------------------------------------------------------------------------------

fn v1_fixture(dir: &TempDir) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1.ferry");
    let path = dir.path().join("v1.ferry");
    fs::copy(&fixture, &path).unwrap_or_else(|e| panic!("copy {}: {e}", fixture.display()));
    path
}

const V1_LIVE: [(i64, i64); 3] = [(0, 2), (2, 5), (3, 30)];

#[test]
fn a_version_1_file_is_read_and_upgraded_to_version_2_by_a_writable_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = v1_fixture(&dir);
    assert_eq!(
        &read(&path)[8..10],
        &1u16.to_le_bytes(),
        "the fixture is v1"
    );

    let store = FileStore::open(&path).unwrap_or_else(|e| panic!("open v1: {e}"));
    assert_eq!(positions(&store), V1_LIVE);
    assert_eq!(&read(&path)[8..10], &2u16.to_le_bytes(), "rewritten as v2");
    let rt = runtime();
    rt.block_on(store.set(&[put(4, 40)]))
        .unwrap_or_else(|e| panic!("set after the upgrade: {e}"));
    drop(store);

    let store = FileStore::open(&path).unwrap_or_else(|e| panic!("reopen: {e}"));
    assert_eq!(positions(&store), vec![(0, 2), (2, 5), (3, 30), (4, 40)]);
    let history = rt
        .block_on(store.history())
        .unwrap_or_else(|e| panic!("history: {e}"));
    assert_eq!(history.len(), 4, "the upgrade kept only live offsets");
}

#[test]
fn a_version_1_file_opened_read_only_is_read_and_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let path = v1_fixture(&dir);
    let before = snapshot(dir.path());
    let store = FileStore::open_read_only(&path).unwrap_or_else(|e| panic!("open v1: {e}"));
    assert_eq!(positions(&store), V1_LIVE);
    let history = runtime()
        .block_on(store.history())
        .unwrap_or_else(|e| panic!("history: {e}"));
    assert_eq!(history.len(), 6, "every write of the three frames");
    drop(store);
    assert_eq!(snapshot(dir.path()), before, "nothing changed");
}

#[test]
fn a_version_1_file_keeps_the_torn_tail_and_bit_rot_rules() {
    let dir = tempfile::tempdir().unwrap();
    let path = v1_fixture(&dir);
    let fixture = read(&path);

    // A torn final write (a cut-short frame header) is dropped, then the file is upgraded.
    append(&path, &[0x2a, 0x01, 0x00, 0x00, 0x9c]);
    let store = FileStore::open(&path).unwrap_or_else(|e| panic!("open torn v1: {e}"));
    assert_eq!(positions(&store), V1_LIVE);
    drop(store);

    // A flipped bit in the complete last frame (bytes 315..385) is refused, not dropped.
    let mut rotten = fixture;
    rotten[380] ^= 0x02;
    write(&path, &rotten);
    assert_corrupt_at(&refused(&path), &path, 315, "not a torn final write");
}

// ---- read-only opens -------------------------------------------------------------------------

#[test]
fn a_read_only_open_of_a_missing_store_is_an_error_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mistyped.ferry");
    let err = match FileStore::open_read_only(&path) {
        Ok(_) => panic!("a missing store must not open read-only"),
        Err(e) => e,
    };
    assert!(
        matches!(&err, StoreError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("no offset store file at this path"),
        "{err}"
    );
    assert_eq!(snapshot(dir.path()), vec![], "no store, no lock file");
}

#[test]
fn a_read_only_open_reports_a_torn_tail_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = store_with(&dir, &[vec![put(0, 1)], vec![put(0, 2), put(1, 7)]]);
    fs::remove_file(lock_of(&path)).unwrap();
    append(&path, &[0x11; 7]);
    write(
        &PathBuf::from(format!("{}.compact-tmp", path.display())),
        b"x",
    );
    let before = snapshot(dir.path());

    let store = FileStore::open_read_only(&path).unwrap_or_else(|e| panic!("open: {e}"));
    assert_eq!(positions(&store), vec![(0, 2), (1, 7)]);
    let err = runtime()
        .block_on(store.set(&[put(0, 9)]))
        .err()
        .unwrap_or_else(|| panic!("a read-only store refuses writes"));
    assert!(err.to_string().contains("read-only"), "{err}");
    assert!(store.compact().is_err(), "and compactions");
    drop(store);
    assert_eq!(
        snapshot(dir.path()),
        before,
        "no truncation, no lock file, no cleanup"
    );
}

#[test]
#[cfg(unix)]
fn a_read_only_store_in_a_read_only_directory_opens_read_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = store_with(&dir, &[vec![put(0, 1)]]);
    let set_mode = |p: &Path, mode: u32| {
        fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
    };
    set_mode(&path, 0o444);
    set_mode(&lock_of(&path), 0o444);
    set_mode(dir.path(), 0o555);
    let before = snapshot(dir.path());
    let opened = FileStore::open_read_only(&path).map(|store| positions(&store));
    set_mode(dir.path(), 0o755);
    assert_eq!(opened.unwrap_or_else(|e| panic!("open: {e}")), vec![(0, 1)]);
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn read_only_and_writable_opens_exclude_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = store_with(&dir, &[vec![put(0, 1)]]);
    let writer = FileStore::open(&path).unwrap();
    assert!(
        matches!(
            FileStore::open_read_only(&path),
            Err(StoreError::Locked { .. })
        ),
        "not while a writer holds the store"
    );
    drop(writer);
    let reader = FileStore::open_read_only(&path).unwrap();
    let second = FileStore::open_read_only(&path).unwrap();
    assert!(
        matches!(FileStore::open(&path), Err(StoreError::Locked { .. })),
        "no writer while readers hold it"
    );
    drop((reader, second));
}
