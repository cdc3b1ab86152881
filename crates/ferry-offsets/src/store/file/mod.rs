//! The crash-safe standalone file store: an append-only log of `set` batches, replayed into memory
//! at open and compacted in the background.
//!
//! Where Kafka Connect's standalone store rewrites its whole map in place after every flush, without
//! `fsync`, and starts empty when it finds a torn file, this store:
//!
//! - appends one checksummed frame per `set` and `fdatasync`s it once, so a flush costs what it
//!   writes, never what the store holds ([`format`](mod@format) documents the bytes); `set_batch`
//!   (an import) writes the same frame straight from its batch, never holding it in memory;
//! - numbers its frames, so a copied or lost frame is found, not applied ([`format`](mod@format));
//! - on open, drops only a torn final write (a `set` that never returned `Ok`) and refuses any other
//!   damage, bit rot in the last frame included, without touching the file ([`replay`]);
//! - opens version-1 files (no sequence numbers) and upgrades them to version 2 with one compaction
//!   on the first writable open;
//! - compacts by writing a new file and renaming it into place, with every crash window written down
//!   ([`compaction`]);
//! - allows one opener at a time ([`lock`]), or any number of read-only openers
//!   ([`FileStore::open_read_only`]), which change nothing on disk;
//! - refuses all work after a failed write or `fdatasync`, because what is durable is then unknown.
//!
//! Creating a store writes the header to `<file>.create-tmp`, syncs it, renames it to `<file>` and
//! syncs the directory: a crash leaves either no store file (the next open starts again) or a
//! complete, empty one. The sidecar files are `<file>.lock` (kept), and `<file>.create-tmp` and
//! `<file>.compact-tmp`, which exist only while being written and are removed on open if a crash left
//! them behind.

mod compaction;
mod format;
mod lock;
mod replay;

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, RwLock, RwLockReadGuard};
use std::thread::JoinHandle;

use async_trait::async_trait;

use crate::error::StoreError;
use crate::store::{
    BatchWritten, OffsetBackingStore, OffsetWrite, StoredOffset, StoredRecord, WriteBatch,
};
use crate::table::OffsetTable;
use compaction::Trigger;
use format::{FRAME_HEADER_LEN, FRAME_OVERHEAD, HEADER_LEN};

/// When the [`FileStore`] compacts its log.
///
/// After each `set`, the store compacts in the background when the file is larger than
/// `compact_min_bytes` **and** larger than `compact_ratio` × the estimated size of a compacted file.
#[derive(Debug, Clone)]
pub struct FileStoreOptions {
    /// Never compact a file smaller than this. Default 64 MiB.
    pub compact_min_bytes: u64,
    /// Compact when the file is this many times larger than its live offsets. Default 2.0; values
    /// below 1.0 (and NaN) count as 1.0.
    pub compact_ratio: f64,
}

impl Default for FileStoreOptions {
    fn default() -> Self {
        Self {
            compact_min_bytes: 64 << 20,
            compact_ratio: 2.0,
        }
    }
}

/// A crash-safe [`OffsetBackingStore`] in one local file (`offset.storage.file.filename`).
///
/// Durability, per operation:
/// - [`set`](OffsetBackingStore::set): the whole batch is durable when it returns `Ok` (appended as
///   one frame, then `fdatasync`). After a crash the batch is either entirely visible or entirely
///   absent, and a batch whose `set` did not return `Ok` may be either.
/// - Reads ([`get`](OffsetBackingStore::get), [`entries`](OffsetBackingStore::entries), …) see only
///   batches whose `set` completed: a batch is applied in memory after its `fdatasync`.
/// - [`open`](Self::open) of a new file: the empty store is durable (file and directory entry) when
///   it returns.
/// - [`compact`](Self::compact) changes the file, never the offsets; a crash at any point keeps them.
///
/// Failures: if an append or `fdatasync` fails, the store is poisoned — every later call returns
/// [`StoreError::Poisoned`] until the store is reopened, which checks the file again.
///
/// Thread-safety: `FileStore` is `Send + Sync`; calls may overlap. `set`s are serialized and their
/// blocking I/O runs on tokio's blocking pool. Reads take a short in-memory lock and never wait for a
/// disk write. One process and one `FileStore` hold a file at a time (`<file>.lock`). Dropping the
/// store cancels a running background compaction and waits for its thread to stop.
pub struct FileStore {
    inner: Arc<Inner>,
}

/// State shared between the store, its blocking tasks and the compaction thread.
struct Inner {
    path: PathBuf,
    options: FileStoreOptions,
    /// The append side. Lock order: `writer`, then `table`.
    writer: Mutex<Writer>,
    /// Signalled when a compaction ends.
    compaction_done: Condvar,
    /// Every live offset; only durable writes are applied.
    table: RwLock<OffsetTable>,
    /// The first write failure; once set, the store refuses all work.
    poison: OnceLock<String>,
    /// Set when the store is dropped: a running compaction stops.
    cancel: AtomicBool,
    /// The background compaction thread, if one was started.
    compactor: Mutex<Option<JoinHandle<()>>>,
    #[cfg(test)]
    test_hooks: tests::Hooks,
    /// Opened with [`FileStore::open_read_only`]: every write is refused.
    read_only: bool,
    /// Held for the store's lifetime; dropped last. A read-only store may hold none (see
    /// [`lock`]).
    _lock: Option<File>,
}

struct Writer {
    /// The store file; its cursor is at `len`.
    file: File,
    /// Bytes of header and complete frames.
    len: u64,
    /// Estimated bytes of the live offsets' writes in a compacted file.
    live_bytes: u64,
    /// A compaction is running.
    compacting: bool,
    /// After a failed background compaction: do not try again before the file reaches this length.
    retry_at: u64,
    /// The sequence number of the next frame appended.
    next_seq: u64,
}

impl FileStore {
    /// Opens the store at `path` with default options, creating it if missing. Blocking.
    ///
    /// # Errors
    /// See [`open_with`](Self::open_with).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, FileStoreOptions::default())
    }

    /// Opens the store at `path`, creating it if missing (its directory must exist). Blocking: it
    /// replays the whole file.
    ///
    /// A torn final write (from a crash during a `set` that never returned `Ok`) is truncated, with a
    /// WARN naming the file, the byte offset and the bytes dropped. Leftover temporary files from a
    /// crash are removed. A file of format version 1 is upgraded to version 2 by one compaction
    /// before this returns (crash-safe like any compaction; if it fails before its rename, the open
    /// fails and the file is unchanged).
    ///
    /// # Errors
    /// - [`StoreError::Locked`]: another process or `FileStore` holds the store.
    /// - [`StoreError::Corrupt`]: damage other than a torn final write (including a frame out of
    ///   sequence and bit rot in a complete last frame); the file is not modified.
    /// - [`StoreError::UnsupportedFormat`]: not a Ferry store of a version this build reads (including
    ///   an empty file and a Kafka Connect standalone offsets file); the file is not modified.
    /// - [`StoreError::Io`]: the file, its directory or the lock file could not be used.
    pub fn open_with(
        path: impl AsRef<Path>,
        options: FileStoreOptions,
    ) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        if path.file_name().is_none() {
            return Err(StoreError::Io {
                path,
                op: "open",
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the path does not name a file",
                ),
            });
        }
        let lock = lock::acquire(&path)?;
        let io_err = |op: &'static str| {
            let path = path.clone();
            move |source: io::Error| StoreError::Io { path, op, source }
        };
        let mut file = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => create(&path)?,
            Err(source) => {
                return Err(StoreError::Io {
                    path,
                    op: "open",
                    source,
                });
            }
        };
        let replayed = replay::replay(&path, &file)?;
        if let Some(torn) = &replayed.torn {
            file.set_len(torn.offset)
                .and_then(|()| file.sync_all())
                .map_err(io_err("truncate a torn final write"))?;
            tracing::warn!(
                path = %path.display(),
                byte_offset = torn.offset,
                dropped_bytes = torn.dropped,
                reason = %torn.reason,
                "offset store {}: dropped a torn final write of {} bytes at byte {}: {}. It is the batch \
                 that was being written when the process or machine stopped; its flush never \
                 completed, so no acknowledged offset is lost",
                path.display(),
                torn.dropped,
                torn.offset,
                torn.reason,
            );
        }
        file.seek(SeekFrom::Start(replayed.valid_len))
            .map_err(io_err("seek to the end"))?;
        for suffix in [".compact-tmp", ".create-tmp"] {
            remove_stale(&lock::sidecar(&path, suffix))?;
        }
        let version = replayed.header.version;
        let store = Self::assemble(path, options, file, replayed, false, Some(lock));
        if version < format::FORMAT_VERSION {
            // Frames are appended only to files of the current version: upgrade by compacting, which
            // is crash-safe like any compaction (a crash leaves the old file, read again next time).
            store.compact()?;
            tracing::info!(
                path = %store.path().display(),
                "offset store {}: upgraded from format version {version} to {}",
                store.path().display(),
                format::FORMAT_VERSION
            );
        }
        Ok(store)
    }

    /// Opens the store at `path` for reading only, changing nothing on disk. Blocking.
    ///
    /// For commands that only look (`ferry offsets list`, `get`, `export`, `doctor`): the file and
    /// its directory may be read-only. Unlike [`open_with`](Self::open_with) it creates no store (a
    /// missing file is an error), no lock file, truncates no torn final write (it is reported with a
    /// WARN and left for the next writable open to drop), removes no leftover temporary file and
    /// does not upgrade an older format version. If `<file>.lock` exists and can be opened, a shared
    /// lock is taken on it, so the store cannot be read while a worker holds it; otherwise no lock is
    /// taken (the file is then read as it is, which is safe: nothing is written). Every write
    /// ([`set`](OffsetBackingStore::set), [`compact`](Self::compact)) is refused.
    ///
    /// # Errors
    /// As [`open_with`](Self::open_with); a missing file is [`StoreError::Io`] with
    /// [`io::ErrorKind::NotFound`].
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        if path.file_name().is_none() {
            return Err(StoreError::Io {
                path,
                op: "open read-only",
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the path does not name a file",
                ),
            });
        }
        let lock = lock::acquire_shared(&path)?;
        let file = File::open(&path).map_err(|source| StoreError::Io {
            op: "open read-only",
            source: if source.kind() == io::ErrorKind::NotFound {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    "there is no offset store file at this path (a read-only command does not create \
                     one; check offset.storage.file.filename)",
                )
            } else {
                source
            },
            path: path.clone(),
        })?;
        let replayed = replay::replay(&path, &file)?;
        if let Some(torn) = &replayed.torn {
            tracing::warn!(
                path = %path.display(),
                byte_offset = torn.offset,
                torn_bytes = torn.dropped,
                reason = %torn.reason,
                "offset store {}: ends with a torn final write of {} bytes at byte {}: {}. Opened \
                 read-only, so it is left in place and ignored; the next writable open drops it (its \
                 flush never completed)",
                path.display(),
                torn.dropped,
                torn.offset,
                torn.reason,
            );
        }
        Ok(Self::assemble(
            path,
            FileStoreOptions::default(),
            file,
            replayed,
            true,
            lock,
        ))
    }

    fn assemble(
        path: PathBuf,
        options: FileStoreOptions,
        file: File,
        replayed: replay::Replayed,
        read_only: bool,
        lock: Option<File>,
    ) -> Self {
        let writer = Writer {
            file,
            len: replayed.valid_len,
            live_bytes: replayed.live_bytes,
            compacting: false,
            retry_at: 0,
            next_seq: replayed.next_seq,
        };
        Self {
            inner: Arc::new(Inner {
                path,
                options,
                writer: Mutex::new(writer),
                compaction_done: Condvar::new(),
                table: RwLock::new(replayed.table),
                poison: OnceLock::new(),
                cancel: AtomicBool::new(false),
                compactor: Mutex::new(None),
                #[cfg(test)]
                test_hooks: tests::Hooks::default(),
                read_only,
                _lock: lock,
            }),
        }
    }

    /// Compacts the file now, waiting for a running background compaction first. Blocking. The
    /// offsets do not change; a crash at any point keeps them.
    ///
    /// # Errors
    /// [`StoreError::Poisoned`] after an earlier failure; [`StoreError::Io`] if writing the new file
    /// failed (the store file is then untouched and the store still usable), or if the directory
    /// could not be synced after the rename (the store is then poisoned).
    pub fn compact(&self) -> Result<(), StoreError> {
        self.inner.check_writable("compact")?;
        {
            let mut writer = self.inner.writer()?;
            while writer.compacting {
                writer = self
                    .inner
                    .compaction_done
                    .wait(writer)
                    .map_err(|_| self.inner.poisoned_by_panic())?;
            }
            writer.compacting = true;
        }
        compaction::run(&self.inner, Trigger::Explicit)
    }

    /// The store file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The number of live offsets (partitions with a value).
    pub fn len(&self) -> usize {
        self.inner
            .table
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether no offset is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs a blocking write on tokio's blocking pool (or in place, outside tokio); a panic in it
    /// poisons the store.
    async fn blocking(
        &self,
        work: impl FnOnce(&Arc<Inner>) -> Result<(), StoreError> + Send + 'static,
    ) -> Result<(), StoreError> {
        let inner = Arc::clone(&self.inner);
        if tokio::runtime::Handle::try_current().is_err() {
            // Polled outside tokio (another executor): no blocking pool to move the work to.
            return work(&inner);
        }
        match tokio::task::spawn_blocking(move || work(&inner)).await {
            Ok(result) => result,
            Err(e) if e.is_panic() => {
                self.inner.poison(format!("the write task panicked: {e}"));
                Err(self.inner.poisoned_error())
            }
            Err(e) => Err(StoreError::Io {
                path: self.inner.path.clone(),
                op: "append",
                source: io::Error::other(format!("the blocking write task did not run: {e}")),
            }),
        }
    }
}

impl fmt::Debug for FileStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileStore")
            .field("path", &self.inner.path)
            .field("options", &self.inner.options)
            .field("live", &self.len())
            .field("poisoned", &self.inner.poison.get())
            .finish_non_exhaustive()
    }
}

impl Drop for FileStore {
    fn drop(&mut self) {
        self.inner.cancel.store(true, Ordering::Relaxed);
        let handle = self.inner.compactor_slot().take();
        if let Some(handle) = handle {
            // Releases the lock only once no thread can touch the file any more.
            let _ = handle.join();
        }
    }
}

#[async_trait]
impl OffsetBackingStore for FileStore {
    fn describe(&self) -> String {
        format!("file {}", self.inner.path.display())
    }

    async fn get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.inner.check_poison()?;
        let table = self.inner.table_read()?;
        Ok(keys
            .iter()
            .map(|k| table.get(k).map(<[u8]>::to_vec))
            .collect())
    }

    /// Durable when it returns `Ok`: one frame appended, then one `fdatasync`, then applied in memory.
    /// An empty batch writes nothing.
    async fn set(&self, batch: &[OffsetWrite]) -> Result<(), StoreError> {
        self.inner.check_writable("append")?;
        if batch.is_empty() {
            return Ok(());
        }
        let frame = format::encode_batch(batch).map_err(|e| StoreError::BatchTooLarge {
            path: self.inner.path.clone(),
            bytes: e.bytes,
            limit: format::MAX_PAYLOAD_LEN as u64,
        })?;
        self.blocking(move |inner| Inner::append(inner, frame))
            .await
    }

    /// One frame, like [`set`](OffsetBackingStore::set), but encoded straight into the file: its
    /// checksum is computed in a first pass over the batch, so the frame header (length and
    /// checksum, which come first) is written before the payload, and the bytes on disk are exactly
    /// those `set` writes for the same writes. The frame is never held in memory, the batch is freed
    /// once the frame is durable, and the writes are then applied by reading the frame back through
    /// the file, its checksum compared with the batch's: an import of a million offsets never holds
    /// the batch and the index together.
    async fn set_batch(&self, batch: WriteBatch) -> Result<BatchWritten, StoreError> {
        self.inner.check_writable("append")?;
        if batch.is_empty() {
            return Ok(BatchWritten::ReadBack);
        }
        let payload_len =
            format::batch_payload_len(&batch).map_err(|e| StoreError::BatchTooLarge {
                path: self.inner.path.clone(),
                bytes: e.bytes,
                limit: format::MAX_PAYLOAD_LEN as u64,
            })?;
        self.blocking(move |inner| Inner::append_batch(inner, batch, payload_len))
            .await
            .map(|()| BatchWritten::ReadBack)
    }

    async fn connector_offsets(&self, connector: &str) -> Result<Vec<StoredOffset>, StoreError> {
        self.inner.check_poison()?;
        Ok(self.inner.table_read()?.connector_entries(connector))
    }

    async fn entries(&self) -> Result<Vec<StoredOffset>, StoreError> {
        self.inner.check_poison()?;
        Ok(self.inner.table_read()?.entries())
    }

    /// Visits the offsets in place, under the read lock: `set`s wait until the visit ends.
    async fn visit_sorted(
        &self,
        connector: Option<&str>,
        f: &mut (dyn for<'k, 'v> FnMut(&'k [u8], &'v [u8]) + Send),
    ) -> Result<(), StoreError> {
        self.inner.check_poison()?;
        self.inner.table_read()?.visit_sorted(connector, f);
        Ok(())
    }

    /// Every write in the log since the last compaction, in file order, tombstones included (a
    /// compaction keeps only the live offsets). Re-reads the file; `set`s wait meanwhile.
    async fn history(&self) -> Result<Vec<StoredRecord>, StoreError> {
        self.inner.check_poison()?;
        let inner = Arc::clone(&self.inner);
        if tokio::runtime::Handle::try_current().is_err() {
            return inner.history();
        }
        tokio::task::spawn_blocking(move || inner.history())
            .await
            .map_err(|e| StoreError::Io {
                path: self.inner.path.clone(),
                op: "read the history",
                source: io::Error::other(format!("the blocking read task failed: {e}")),
            })?
    }
}

/// Batches of at least this many writes reserve the table's room before they are applied.
const LARGE_BATCH: usize = 64 * 1024;

impl Inner {
    /// The blocking half of `history`: holding the writer lock, so that no `set` appends and no
    /// compaction replaces the file meanwhile, re-reads its valid prefix.
    fn history(&self) -> Result<Vec<StoredRecord>, StoreError> {
        let writer = self.writer()?;
        self.check_poison()?;
        let records = replay::history(&self.path, writer.len);
        drop(writer);
        records
    }

    /// The blocking half of `set`: append, `fdatasync`, apply, maybe start a compaction.
    fn append(self: &Arc<Self>, mut frame: Vec<u8>) -> Result<(), StoreError> {
        let mut writer = self.writer()?;
        self.check_poison()?;
        let at = writer.len;
        let seq = writer.next_seq;
        format::stamp_seq(&mut frame, seq);
        if let Err((op, source)) = self.write_durably(&mut writer.file, &frame) {
            self.poison(format!(
                "{op} of a {}-byte batch at byte {at} failed: {source}",
                frame.len()
            ));
            return Err(StoreError::Io {
                path: self.path.clone(),
                op,
                source,
            });
        }
        writer.len += frame.len() as u64;
        // u64 sequence numbers do not run out: one per flush.
        writer.next_seq = seq.saturating_add(1);
        let writes = match format::decode_payload(&frame[FRAME_HEADER_LEN..]) {
            Ok(writes) => writes,
            Err(e) => {
                // Unreachable: the frame was encoded by this process. Memory would miss a durable batch.
                let cause = format!("a batch this process encoded does not decode: {}", e.reason);
                self.poison(cause);
                return Err(self.poisoned_error());
            }
        };
        {
            let mut table = self.table.write().map_err(|_| self.poisoned_by_panic())?;
            // A large batch into an empty table (an import into a new store) is sized up front:
            // growing by doubling would leave the outgrown buffers resident (see
            // `OffsetTable::reserve_hint`). Not into a full table: a batch of overwrites needs no
            // room, and reserving would copy the table. Small batches grow the usual way, so steady
            // flushes keep amortized growth.
            if writes.len() >= LARGE_BATCH && table.is_empty() {
                table.reserve_hint(writes.len(), frame.len());
            }
            for (key, value) in writes {
                writer.live_bytes = replay::apply_write(&mut table, writer.live_bytes, key, value);
            }
        }
        self.compact_if_due(writer);
        Ok(())
    }

    /// The blocking half of `set_batch`: checksum, append header and payload, `fdatasync`, free the
    /// batch, apply by reading the frame back, maybe start a compaction.
    fn append_batch(
        self: &Arc<Self>,
        batch: WriteBatch,
        payload_len: u32,
    ) -> Result<(), StoreError> {
        let mut writer = self.writer()?;
        self.check_poison()?;
        let at = writer.len;
        let seq = writer.next_seq;
        let crc = format::payload_crc(&batch);
        let header = format::frame_header(payload_len, crc, seq);
        let frame_len = FRAME_HEADER_LEN as u64 + u64::from(payload_len);
        if let Err((op, source)) = self.write_batch_durably(&mut writer.file, &header, &batch) {
            self.poison(format!(
                "{op} of a {frame_len}-byte batch at byte {at} failed: {source}"
            ));
            return Err(StoreError::Io {
                path: self.path.clone(),
                op,
                source,
            });
        }
        writer.len += frame_len;
        // u64 sequence numbers do not run out: one per flush.
        writer.next_seq = seq.saturating_add(1);
        let count = batch.len();
        // Durable: the bytes are in the file, and the index is built from there.
        drop(batch);
        {
            let mut table = self.table.write().map_err(|_| self.poisoned_by_panic())?;
            if count >= LARGE_BATCH && table.is_empty() {
                table.reserve_hint(count, frame_len as usize);
            }
            let mut live_bytes = writer.live_bytes;
            let read = read_back(
                &mut writer.file,
                at + FRAME_HEADER_LEN as u64,
                u64::from(payload_len),
                |key, value| {
                    live_bytes = replay::apply_write(&mut table, live_bytes, key, value);
                },
            );
            writer.live_bytes = live_bytes;
            let failure = match read {
                Ok(read_crc) if read_crc == crc => None,
                Ok(read_crc) => Some(format!(
                    "its payload reads back with checksum {read_crc:#010x}, not the {crc:#010x} \
                     written"
                )),
                Err(e) => Some(e.to_string()),
            };
            if let Some(failure) = failure {
                // Memory may hold part of the batch: only a reopen, which checks the file, can tell
                // what is durable.
                self.poison(format!(
                    "the {frame_len}-byte batch at byte {at} was written and synced, but reading it \
                     back failed: {failure}"
                ));
                return Err(self.poisoned_error());
            }
        }
        self.compact_if_due(writer);
        Ok(())
    }

    /// Writes the frame header and `batch`'s payload at the file's cursor, then `fdatasync`s; on
    /// failure, which step failed.
    fn write_batch_durably(
        &self,
        file: &mut File,
        header: &[u8],
        batch: &WriteBatch,
    ) -> Result<(), (&'static str, io::Error)> {
        let mut out = BufWriter::with_capacity(1 << 20, &mut *file);
        out.write_all(header).map_err(|e| ("append", e))?;
        #[cfg(test)]
        let fault = self.test_hooks.take_fault();
        #[cfg(test)]
        if fault == Some(tests::Fault::Append) {
            // A write cut short, as on a full disk: the header and half the payload.
            let mut payload = Vec::new();
            let _ = format::write_payload(batch, &mut payload);
            let _ = out.write_all(&payload[..payload.len() / 2]);
            let _ = out.flush();
            return Err(("append", io::Error::other("injected append failure")));
        }
        format::write_payload(batch, &mut out).map_err(|e| ("append", e))?;
        out.flush().map_err(|e| ("append", e))?;
        drop(out);
        #[cfg(test)]
        if fault == Some(tests::Fault::Sync) {
            return Err(("fdatasync", io::Error::other("injected fdatasync failure")));
        }
        file.sync_data().map_err(|e| ("fdatasync", e))
    }

    /// Appends and `fdatasync`s; on failure, which step failed.
    fn write_durably(
        &self,
        file: &mut File,
        frame: &[u8],
    ) -> Result<(), (&'static str, io::Error)> {
        #[cfg(test)]
        let fault = self.test_hooks.take_fault();
        #[cfg(test)]
        if fault == Some(tests::Fault::Append) {
            // A write cut short, as on a full disk.
            let _ = file.write_all(&frame[..frame.len() / 2]);
            return Err(("append", io::Error::other("injected append failure")));
        }
        file.write_all(frame).map_err(|e| ("append", e))?;
        #[cfg(test)]
        if fault == Some(tests::Fault::Sync) {
            return Err(("fdatasync", io::Error::other("injected fdatasync failure")));
        }
        file.sync_data().map_err(|e| ("fdatasync", e))
    }

    /// After an append: starts a background compaction when one is due (the writer lock released
    /// first).
    fn compact_if_due(self: &Arc<Self>, mut writer: MutexGuard<'_, Writer>) {
        let start = self.wants_compaction(&writer);
        if start {
            writer.compacting = true;
        }
        drop(writer);
        if start {
            compaction::spawn_background(self);
        }
    }

    fn wants_compaction(&self, writer: &Writer) -> bool {
        if writer.compacting
            || writer.len < writer.retry_at
            || writer.len <= self.options.compact_min_bytes
            || self.cancel.load(Ordering::Relaxed)
        {
            return false;
        }
        let ratio = self.options.compact_ratio.max(1.0);
        let compacted = (HEADER_LEN + FRAME_OVERHEAD) as f64 + writer.live_bytes as f64;
        writer.len as f64 > ratio * compacted
    }

    /// Clears `compacting` and wakes `compact()` callers; after a failed background compaction, waits
    /// for the file to grow before the next one.
    fn finish_compaction(&self, failed_in_background: bool) {
        let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        writer.compacting = false;
        if failed_in_background {
            writer.retry_at = writer.len + (writer.len / 2).max(1 << 20);
        }
        drop(writer);
        self.compaction_done.notify_all();
    }

    fn writer(&self) -> Result<MutexGuard<'_, Writer>, StoreError> {
        self.writer.lock().map_err(|_| self.poisoned_by_panic())
    }

    fn table_read(&self) -> Result<RwLockReadGuard<'_, OffsetTable>, StoreError> {
        self.table.read().map_err(|_| self.poisoned_by_panic())
    }

    fn compactor_slot(&self) -> MutexGuard<'_, Option<JoinHandle<()>>> {
        // Holds only a join handle: consistent even if a holder panicked.
        self.compactor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Refuses `op` on a read-only or poisoned store.
    fn check_writable(&self, op: &'static str) -> Result<(), StoreError> {
        if self.read_only {
            return Err(StoreError::Io {
                path: self.path.clone(),
                op,
                source: io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "the store was opened read-only",
                ),
            });
        }
        self.check_poison()
    }

    fn check_poison(&self) -> Result<(), StoreError> {
        match self.poison.get() {
            None => Ok(()),
            Some(_) => Err(self.poisoned_error()),
        }
    }

    /// Records the first failure; later ones are consequences.
    fn poison(&self, cause: String) {
        let _ = self.poison.set(cause);
    }

    fn poisoned_error(&self) -> StoreError {
        StoreError::Poisoned {
            path: self.path.clone(),
            cause: self.poison.get().cloned().unwrap_or_default(),
        }
    }

    /// A thread panicked while holding a lock: memory may no longer match the file.
    fn poisoned_by_panic(&self) -> StoreError {
        self.poison("a thread panicked while updating the store".to_owned());
        self.poisoned_error()
    }
}

/// Reading a batch back after writing it failed.
#[derive(Debug, thiserror::Error)]
enum ReadBackError {
    #[error("finding the end of the file failed: {0}")]
    FindEnd(#[source] io::Error),
    #[error("seeking to byte {at} failed: {source}")]
    Seek {
        at: u64,
        #[source]
        source: io::Error,
    },
    #[error("seeking back to the end of the file failed: {0}")]
    SeekBack(#[source] io::Error),
    #[error("reading failed: {0}")]
    Read(#[source] io::Error),
    #[error("the payload does not parse at payload byte {at}: {reason}")]
    Payload { at: usize, reason: String },
}

/// Reads the payload of `len` bytes at byte `at` of `file`, calling `on_write` for every write, and
/// gives its CRC32C; the file's cursor is put back at its end. The error says what failed.
fn read_back(
    file: &mut File,
    at: u64,
    len: u64,
    on_write: impl FnMut(&[u8], Option<&[u8]>),
) -> Result<u32, ReadBackError> {
    let end = file.stream_position().map_err(ReadBackError::FindEnd)?;
    file.seek(SeekFrom::Start(at))
        .map_err(|source| ReadBackError::Seek { at, source })?;
    let mut payload = format::Crc::reading(BufReader::with_capacity(1 << 20, &mut *file).take(len));
    let streamed = format::stream_payload(&mut payload, len, on_write);
    let crc = payload.value;
    // Put back before anything else: the next append writes at the cursor.
    file.seek(SeekFrom::Start(end))
        .map_err(ReadBackError::SeekBack)?;
    match streamed {
        Ok(()) => Ok(crc),
        Err(format::StreamError::Io(e)) => Err(ReadBackError::Read(e)),
        Err(format::StreamError::Payload(e)) => Err(ReadBackError::Payload {
            at: e.at,
            reason: e.reason,
        }),
    }
}

/// Creates an empty store at `path` atomically (see the module docs) and opens it.
fn create(path: &Path) -> Result<File, StoreError> {
    let tmp = lock::sidecar(path, ".create-tmp");
    let tmp_io = |op: &'static str| {
        let tmp = tmp.clone();
        move |source: io::Error| StoreError::Io {
            path: tmp,
            op,
            source,
        }
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(tmp_io("create the new store file"))?;
    file.write_all(&format::encode_header(1, format::Compacted::default()))
        .and_then(|()| file.sync_all())
        .map_err(tmp_io("write the new store file"))?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(tmp_io("rename the new store file into place"))?;
    let store_io = |op: &'static str| {
        move |source: io::Error| StoreError::Io {
            path: path.to_path_buf(),
            op,
            source,
        }
    };
    sync_dir(path).map_err(store_io("fsync the directory of the new store file"))?;
    tracing::info!(path = %path.display(), "offset store {}: created a new, empty store", path.display());
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(store_io("open"))
}

/// Removes a temporary file a crash left behind.
fn remove_stale(tmp: &Path) -> Result<(), StoreError> {
    match std::fs::remove_file(tmp) {
        Ok(()) => {
            tracing::info!(
                path = %tmp.display(),
                "offset store: removed {}, left behind by a crash during compaction or creation; the \
                 store file itself is complete",
                tmp.display()
            );
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(StoreError::Io {
            path: tmp.to_path_buf(),
            op: "remove a stale temporary file",
            source,
        }),
    }
}

/// `fsync`s the directory holding `path`, making a rename or creation in it durable.
fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        // Windows cannot open a directory as a file; renames there are made durable by the OS.
        let _ = dir;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
