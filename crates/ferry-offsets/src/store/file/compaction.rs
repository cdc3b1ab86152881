//! Compaction: rewriting the store file as its live offsets only, while `set` keeps appending.
//!
//! The log grows with every flush; compaction drops superseded values and tombstones. It runs in the
//! background once, after a `set`, the file exceeds both `compact_min_bytes` and `compact_ratio` ×
//! the estimated compacted size (at most one compaction at a time), or synchronously from
//! [`FileStore::compact`](super::FileStore::compact). Flushes wait only for the short final step.
//!
//! # Protocol and crash windows
//!
//! `F` is the store file, `T` is `F.compact-tmp`, `L0` the length of `F` when the snapshot is taken.
//!
//! 1. **Snapshot** (writer lock held, so no `set` is half done): encode every live offset, in store
//!    order, as frames in memory; remember `L0`. Nothing on disk changes.
//! 2. **Write `T`** (no lock; `set` keeps appending to `F` after `L0`): create `T` (truncating a stale
//!    one), write the header and the snapshot frames, `fdatasync`.
//!    *Crash:* `F` is intact and holds every acknowledged `set`. `T` is partial or complete but
//!    unused; the next open removes it and logs an INFO.
//! 3. **Catch up** (writer lock held from here on, so `set` waits): copy the frames appended to `F`
//!    since the snapshot, bytes `[L0, len(F))`, to the end of `T`; `fdatasync` `T`. Replaying `T` now
//!    gives exactly the state of `F`: the snapshot, then the same later frames in the same order.
//!    *Crash:* as in 2.
//! 4. **Rename `T` over `F`.** *Crash before the rename is durable:* the directory still names the old
//!    `F`, complete; the next open removes `T`. *Crash after:* `F` names the new file, which was
//!    complete and synced before the rename. Either way nothing acknowledged is lost.
//! 5. **`fsync` the directory**, then switch the append handle to the new file and release the lock.
//!    Later `set`s append to the new file. If the directory `fsync` fails the store is poisoned: the
//!    rename might not survive a crash, and then every `set` acknowledged on the new file would vanish
//!    with it.
//!
//! # Sequence numbers
//!
//! Frame sequence numbers never repeat and never go back (see [`format`](super::format)). If the
//! next frame appended to `F` at the snapshot would get `n`, the snapshot's `k` frames get
//! `n..n+k` (`T`'s header says its first frame is `n`), and the frames copied in step 3, which got
//! `n, n+1, …` in `F`, are renumbered to follow the snapshot: their headers are rewritten (with their
//! CRCs), their payloads copied unchanged. After the switch the next frame gets a number above every
//! number either file used, so no frame of the old file, copied into the new one, fits its sequence.
//!
//! A failure before the rename leaves `F` untouched and the store fully usable: `T` is removed, a
//! background compaction logs a WARN (nobody awaits it; the data is safe) and is tried again once the
//! file has grown further, and [`FileStore::compact`](super::FileStore::compact) returns the error.
//! Dropping the store cancels a background compaction still writing `T`.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::mem;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread;

use super::format::{
    self, COMPACT_FRAME_BYTES, COMPACT_FRAME_WRITES, Compacted, FRAME_HEADER_LEN, FileHeader,
    FrameBuilder, HEADER_LEN,
};
use super::{Inner, lock, sync_dir};
use crate::error::StoreError;

/// Who asked for a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Trigger {
    /// A `set` crossed the thresholds; runs on its own thread.
    Background,
    /// [`FileStore::compact`](super::FileStore::compact).
    Explicit,
}

/// How a compaction ended, when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Done,
    /// The store was dropped while the compaction was writing.
    Cancelled,
}

/// The live offsets, encoded, at one moment.
struct Snapshot {
    frames: Vec<Vec<u8>>,
    /// Length of the store file when the snapshot was taken.
    file_len: u64,
    /// The writer's live-bytes estimate at that moment.
    estimated_live: u64,
    /// The exact live bytes of the snapshot.
    exact_live: u64,
    /// The sequence number of the snapshot's first frame.
    first_seq: u64,
    /// What the new file's header says about the snapshot's writes.
    compacted: Compacted,
}

/// Starts a background compaction. The caller has set `compacting`.
pub(super) fn spawn_background(inner: &Arc<Inner>) {
    let worker = Arc::clone(inner);
    let spawned = thread::Builder::new()
        .name("ferry-offsets-compaction".to_owned())
        .spawn(move || {
            // Errors are reported inside `run`: nobody awaits this thread.
            let _ = run(&worker, Trigger::Background);
        });
    match spawned {
        Ok(handle) => {
            let previous = inner.compactor_slot().replace(handle);
            if let Some(previous) = previous {
                // It finished its work (only one compaction runs at a time); reap the thread.
                let _ = previous.join();
            }
        }
        Err(e) => {
            tracing::warn!(
                path = %inner.path.display(),
                error = %e,
                "offset store: could not start a background compaction thread; the store keeps \
                 appending and will try again after a later flush"
            );
            inner.finish_compaction(false);
        }
    }
}

/// Runs one full compaction. The caller has set `compacting`; this clears it, whatever happens.
pub(super) fn run(inner: &Inner, trigger: Trigger) -> Result<(), StoreError> {
    let tmp = lock::sidecar(&inner.path, ".compact-tmp");
    let result = compact(inner, &tmp);
    if !matches!(result, Ok(Outcome::Done)) {
        // Before the rename, or the rename failed: `T` is garbage. If removing it fails too, the next
        // open or compaction replaces it.
        let _ = fs::remove_file(&tmp);
    }
    inner.finish_compaction(result.is_err() && trigger == Trigger::Background);
    match (result, trigger) {
        (Ok(_), _) => Ok(()),
        (Err(e), Trigger::Explicit) => Err(e),
        (Err(e), Trigger::Background) => {
            if inner.poison.get().is_none() {
                tracing::warn!(
                    path = %inner.path.display(),
                    error = %e,
                    "offset store: background compaction failed; the store file is intact and flushes \
                     continue, compaction will be tried again once the file has grown further"
                );
            }
            Err(e)
        }
    }
}

fn compact(inner: &Inner, tmp_path: &std::path::Path) -> Result<Outcome, StoreError> {
    let snapshot = take_snapshot(inner)?;

    // Phase 2: write T without holding the lock.
    let mut next_seq = snapshot.first_seq + snapshot.frames.len() as u64;
    let Some((mut tmp, mut new_len)) = write_snapshot(
        inner,
        tmp_path,
        snapshot.first_seq,
        snapshot.compacted,
        snapshot.frames,
    )?
    else {
        return Ok(Outcome::Cancelled);
    };
    #[cfg(test)]
    inner.test_hooks.before_catch_up();

    // Phase 3: catch up and switch, holding the writer lock.
    let mut writer = inner.writer()?;
    inner.check_poison()?;
    let tail = writer.len - snapshot.file_len;
    if tail > 0 {
        next_seq = catch_up(inner, tmp_path, &mut tmp, snapshot.file_len, tail, next_seq)?;
        new_len += tail;
    }
    fs::rename(tmp_path, &inner.path).map_err(|source| StoreError::Io {
        path: tmp_path.to_path_buf(),
        op: "rename the compaction file over the store file",
        source,
    })?;
    // The new file is in place: appends must go to it from now on, whatever happens next.
    let old_file = mem::replace(&mut writer.file, tmp);
    drop(old_file);
    let previous_len = writer.len;
    writer.len = new_len;
    writer.next_seq = next_seq;
    writer.live_bytes =
        (snapshot.exact_live + writer.live_bytes).saturating_sub(snapshot.estimated_live);
    if let Err(source) = sync_dir(&inner.path) {
        let e = StoreError::Io {
            path: inner.path.clone(),
            op: "fsync the directory after compaction",
            source,
        };
        inner.poison(format!("{e}"));
        return Err(e);
    }
    tracing::debug!(
        path = %inner.path.display(),
        before = previous_len,
        after = new_len,
        "offset store compacted"
    );
    Ok(Outcome::Done)
}

/// Phase 2: writes the compaction file `tmp_path` (the store file's permissions, a header, the
/// snapshot's `frames`) and syncs it; returns it with its length, or `None` when cancelled.
fn write_snapshot(
    inner: &Inner,
    tmp_path: &std::path::Path,
    first_seq: u64,
    compacted: Compacted,
    frames: Vec<Vec<u8>>,
) -> Result<Option<(File, u64)>, StoreError> {
    let tmp_io = |op: &'static str| {
        move |source: io::Error| StoreError::Io {
            path: tmp_path.to_path_buf(),
            op,
            source,
        }
    };
    let mut tmp = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(tmp_path)
        .map_err(tmp_io("create the compaction file"))?;
    if let Ok(meta) = fs::metadata(&inner.path) {
        tmp.set_permissions(meta.permissions())
            .map_err(tmp_io("copy the store file's permissions"))?;
    }
    tmp.write_all(&format::encode_header(first_seq, compacted))
        .map_err(tmp_io("write the compaction file"))?;
    let mut new_len = HEADER_LEN as u64;
    for frame in &frames {
        if inner.cancel.load(Ordering::Relaxed) {
            return Ok(None);
        }
        tmp.write_all(frame)
            .map_err(tmp_io("write the compaction file"))?;
        new_len += frame.len() as u64;
    }
    drop(frames);
    tmp.sync_data()
        .map_err(tmp_io("fdatasync the compaction file"))?;
    if inner.cancel.load(Ordering::Relaxed) {
        return Ok(None);
    }
    Ok(Some((tmp, new_len)))
}

/// Phase 3's catch-up: copies the `tail` bytes appended to the store file after `from` (the
/// snapshot's length) to `tmp`, renumbered from `next_seq`, and syncs it; returns the next
/// sequence number.
fn catch_up(
    inner: &Inner,
    tmp_path: &std::path::Path,
    tmp: &mut File,
    from: u64,
    tail: u64,
    next_seq: u64,
) -> Result<u64, StoreError> {
    let store_io = |op: &'static str| {
        move |source: io::Error| StoreError::Io {
            path: inner.path.clone(),
            op,
            source,
        }
    };
    let mut old = File::open(&inner.path).map_err(store_io("reopen for compaction"))?;
    old.seek(SeekFrom::Start(from))
        .map_err(store_io("seek for compaction"))?;
    let next_seq = copy_renumbered(inner, &mut old.take(tail), tmp, next_seq)?;
    tmp.sync_data().map_err(|source| StoreError::Io {
        path: tmp_path.to_path_buf(),
        op: "fdatasync the compaction file",
        source,
    })?;
    Ok(next_seq)
}

/// Phase 1: encodes the live offsets under the writer lock.
fn take_snapshot(inner: &Inner) -> Result<Snapshot, StoreError> {
    let writer = inner.writer()?;
    inner.check_poison()?;
    let table = inner.table_read()?;
    let first_seq = writer.next_seq;
    let mut frames = Vec::new();
    let mut builder = FrameBuilder::with_capacity(0);
    let mut exact_live = 0u64;
    let mut too_large = None;
    let mut compacted = Compacted {
        writes: 0,
        canonical_keys: true,
    };
    table.visit_entries(|key, value, canonical| {
        compacted.writes += 1;
        compacted.canonical_keys &= canonical;
        if builder.count() >= COMPACT_FRAME_WRITES || builder.payload_len() >= COMPACT_FRAME_BYTES {
            let seq = first_seq + frames.len() as u64;
            frames.push(mem::replace(&mut builder, FrameBuilder::with_capacity(0)).finish(seq));
        }
        exact_live += format::live_size(key.len(), value.len());
        if let Err(e) = builder.push(key, Some(value)) {
            // One offset larger than a frame: impossible, as it arrived in a frame; kept as an error.
            too_large.get_or_insert(e);
        }
    });
    if let Some(e) = too_large {
        return Err(StoreError::BatchTooLarge {
            path: inner.path.clone(),
            bytes: e.bytes,
            limit: format::MAX_PAYLOAD_LEN as u64,
        });
    }
    if builder.count() > 0 {
        let seq = first_seq + frames.len() as u64;
        frames.push(builder.finish(seq));
    }
    Ok(Snapshot {
        frames,
        file_len: writer.len,
        estimated_live: writer.live_bytes,
        exact_live,
        first_seq,
        compacted,
    })
}

/// Phase 3's copy: the frames `old` holds (appended to the store file since the snapshot, complete
/// and synced, as the writer lock is held) go to `tmp` numbered from `next_seq` on; returns the
/// number after the last. Only the frame headers are rewritten.
fn copy_renumbered(
    inner: &Inner,
    old: &mut impl Read,
    tmp: &mut File,
    mut next_seq: u64,
) -> Result<u64, StoreError> {
    let failed = |reason: String| StoreError::Io {
        path: inner.path.clone(),
        op: "copy recent frames into the compaction file",
        source: io::Error::new(io::ErrorKind::InvalidData, reason),
    };
    let current = FileHeader {
        version: format::FORMAT_VERSION,
        first_seq: None,
        compacted: Compacted::default(),
    };
    loop {
        let mut header = [0u8; FRAME_HEADER_LEN];
        match read_full(old, &mut header) {
            Ok(0) => return Ok(next_seq),
            Ok(FRAME_HEADER_LEN) => {}
            Ok(n) => return Err(failed(format!("a frame header ends after {n} bytes"))),
            Err(e) => return Err(failed(format!("reading a frame header: {e}"))),
        }
        let Some(decoded) = format::decode_frame_header(current, &header) else {
            return Err(failed(
                "a frame this store appended has a damaged header".to_owned(),
            ));
        };
        format::stamp_seq(&mut header, next_seq);
        next_seq += 1;
        tmp.write_all(&header)
            .map_err(|e| failed(format!("writing a frame header: {e}")))?;
        let payload_len = u64::from(decoded.payload_len);
        let copied = io::copy(&mut old.take(payload_len), tmp)
            .map_err(|e| failed(format!("copying a payload: {e}")))?;
        if copied != payload_len {
            return Err(failed(format!(
                "a payload of {payload_len} bytes ends after {copied}"
            )));
        }
    }
}

/// Reads until `buf` is full or the input ends; the bytes read.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}
