//! `sink=file:PATH`: records appended to a local file as JSON lines, acknowledged once `fdatasync`ed.
//!
//! # Durability
//!
//! A record's delivery resolves `Ok` only after the batch holding its line has been written and an
//! `fdatasync` that started after that write returned (group commit: one `fdatasync` covers every
//! batch written while the previous one ran; see [`super::writer`]), so an acknowledged record survives a crash or power loss (given a disk that
//! honours flushes). When the file is created, its directory is synced too, so the file itself
//! survives. The metadata's `offset` is the byte position where the record's line starts.
//!
//! # Crash windows
//!
//! - Crash before a batch's `write`: nothing of it is in the file, nothing was acknowledged.
//! - Crash during `write` or before `fdatasync` returns: any prefix of the batch may be in the file,
//!   possibly ending in a torn line. None of it was acknowledged, so the source sends it again after
//!   restart: whole lines may appear twice (at-least-once), and the torn last line is removed when the
//!   file is next opened (with a WARN naming the file and the bytes dropped).
//! - A failed `write` or `fdatasync` poisons the sink: what is durable is unknown, so that batch and
//!   every later record fail (not retriable) until the sink is reopened. The file is closed at once;
//!   [`RecordSink::reopen_if_failed`] (called when a task restarts) opens it again as at start,
//!   truncating a torn last line, so once the cause is fixed (disk space freed) a task restart resumes
//!   delivery without restarting the worker.
//!
//! Opening refuses a file whose unterminated tail cannot be a torn Ferry line (it does not start like
//! one): that is probably not a sink file, and truncating it would destroy someone's data. The file is
//! locked (advisory, `flock`) while open, so two sinks never interleave lines in one file.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use ferry_api::SourceRecord;

use super::line::LineFormat;
use super::writer::{Syncer, Target, TargetError, Writer};
use super::{BatchSent, PendingDelivery, RecordSink, SinkError, SinkErrorKind};

/// Every line the sinks write starts with this; a torn line starts with a prefix of it.
const LINE_START: &[u8] = b"{\"topic\":";
/// How much of the file is read at a time when looking for the last complete line.
const SCAN_CHUNK: u64 = 64 * 1024;

/// Appends records to a file as lines (see [`super::line`]), acknowledged once `fdatasync`ed.
///
/// Thread-safe: `send` may be called from many tasks; the file holds lines in the order the sends were
/// accepted, and records of one caller keep their `send` order. Dropping the sink lets its writer thread
/// write what is queued and exit; [`FileSink::close`] also waits for it.
pub struct FileSink {
    path: PathBuf,
    /// What each record is written as.
    format: LineFormat,
    /// Replaced by [`RecordSink::reopen_if_failed`] once poisoned; a send in progress keeps its own.
    writer: RwLock<Arc<Writer>>,
    /// One reopen at a time: tasks restarting together must not open the file twice.
    reopening: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for FileSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSink")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl FileSink {
    /// Opens (or creates) `path` for appending. A torn last line left by a crash is truncated away
    /// and synced, with a WARN naming the file and the number of bytes dropped.
    ///
    /// A relative path is relative to the process's working directory.
    ///
    /// # Errors
    /// The file cannot be opened, created, locked (another sink has it open), repaired or synced, or
    /// it ends in bytes that are not a torn Ferry line.
    pub async fn open(path: impl AsRef<Path>) -> Result<FileSink, SinkError> {
        Self::open_with(path, LineFormat::Json).await
    }

    /// [`open`](Self::open), writing each record as `format` (`sink.format`).
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn open_with(
        path: impl AsRef<Path>,
        format: LineFormat,
    ) -> Result<FileSink, SinkError> {
        let path = path.as_ref().to_path_buf();
        let writer = open_writer(&path, format).await?;
        Ok(FileSink {
            path,
            format,
            writer: RwLock::new(Arc::new(writer)),
            reopening: tokio::sync::Mutex::new(()),
        })
    }

    fn writer(&self) -> Arc<Writer> {
        // Only ever replaced whole: a poisoned lock still holds a usable writer.
        self.writer
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The file written to, as given to [`FileSink::open`].
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops accepting records, waits until everything sent is written and synced (or failed) and the
    /// writer thread has exited.
    ///
    /// # Errors
    /// The sink was poisoned by a failed write or sync: some records were not acknowledged.
    pub async fn close(self) -> Result<(), SinkError> {
        let writer = self
            .writer
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        match Arc::try_unwrap(writer) {
            Ok(writer) => writer.close().await,
            // Unreachable: sends borrow the sink, which `close` consumed. Dropping lets it drain.
            Err(shared) if shared.is_poisoned() => Err(error(
                &describe(&self.path),
                "the sink had failed; some records were not written",
            )),
            Err(_) => Ok(()),
        }
    }
}

/// Opens the file (see [`FileSink::open`]) and starts its writer thread.
async fn open_writer(path: &Path, format: LineFormat) -> Result<Writer, SinkError> {
    let path = path.to_path_buf();
    {
        let sink = describe(&path);
        let opened = {
            let path = path.clone();
            tokio::task::spawn_blocking(move || open_blocking(&path))
                .await
                .map_err(|e| error(&sink, format!("opening the file failed: {e}")))?
        };
        let Opened {
            file,
            position,
            dropped,
        } = opened.map_err(|e| error(&sink, e.to_string()))?;
        if dropped > 0 {
            tracing::warn!(
                file = %path.display(),
                bytes_dropped = dropped,
                "file sink {}: removed a torn last line of {dropped} bytes (a crash interrupted a write; \
                 those records were never acknowledged, so the source sends them again)",
                path.display()
            );
        }
        Writer::spawn(sink, "ferry-file-sink", FileTarget { file }, Some(position))
            .map(|writer| writer.with_format(format))
    }
}

#[async_trait]
impl RecordSink for FileSink {
    fn describe(&self) -> String {
        describe(&self.path)
    }

    async fn send(&self, record: &SourceRecord) -> Result<PendingDelivery, SinkError> {
        self.writer().send(record).await
    }

    fn try_send_batch(&self, records: &[SourceRecord]) -> BatchSent {
        self.writer().try_send_batch(records)
    }

    async fn flush(&self, timeout: Duration) -> Result<(), SinkError> {
        self.writer().flush(timeout).await
    }

    async fn reopen_if_failed(&self) -> Result<bool, SinkError> {
        let _one = self.reopening.lock().await;
        if !self.writer().is_poisoned() {
            return Ok(false);
        }
        // The poisoned writer closed the file before its poison became visible: no lock conflict.
        let writer = open_writer(&self.path, self.format).await?;
        *self.writer.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(writer);
        tracing::warn!(
            file = %self.path.display(),
            "file sink {}: reopened after an earlier write failure; records that were not acknowledged \
             are sent again by their tasks",
            self.path.display()
        );
        Ok(true)
    }
}

fn describe(path: &Path) -> String {
    format!("file {}", path.display())
}

fn error(sink: &str, message: impl Into<String>) -> SinkError {
    SinkError::new(sink, SinkErrorKind::Fatal, message)
}

struct FileTarget {
    file: File,
}

impl Target for FileTarget {
    fn write_batch(&mut self, batch: &[u8]) -> Result<(), TargetError> {
        self.file.write_all(batch).map_err(|source| TargetError {
            op: "write",
            source,
        })
    }

    fn syncer(&self) -> io::Result<Option<Box<dyn Syncer>>> {
        // A duplicate descriptor of the same open file: `fdatasync` on it covers every write made
        // through the writer's, so the next batch is written while this one is synced.
        Ok(Some(Box::new(FileSyncer {
            file: self.file.try_clone()?,
        })))
    }
}

/// The sync thread's handle on the sink's file.
struct FileSyncer {
    file: File,
}

impl Syncer for FileSyncer {
    fn sync(&mut self) -> Result<(), TargetError> {
        self.file.sync_data().map_err(|source| TargetError {
            op: "fdatasync",
            source,
        })
    }
}

/// Why the sink's file cannot be opened for appending; the sink's error shows it after the file.
#[derive(Debug, thiserror::Error)]
enum OpenError {
    /// An I/O step failed: what was being done, and the OS error.
    #[error("{step}: {source}")]
    Io {
        /// E.g. `cannot open the file`.
        step: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// Another writer holds the file's lock.
    #[error(
        "another sink (in this or another process) has the file open; two writers would interleave \
         their lines"
    )]
    Locked,
    /// The bytes after the last newline are not a torn line of this sink.
    #[error(
        "the file ends with {bytes} bytes after its last newline that do not start like a Ferry JSON \
         line ({start:?}); refusing to truncate a file Ferry may not have written — is this the right \
         file?"
    )]
    ForeignTail {
        /// How many bytes follow the last newline.
        bytes: u64,
        /// Their first bytes, lossily decoded.
        start: String,
    },
    /// The directory of a newly created file cannot be synced.
    #[error("created the file but cannot sync its directory {}: {source}", dir.display())]
    SyncDirectory {
        /// The directory.
        dir: std::path::PathBuf,
        /// The OS error.
        source: io::Error,
    },
}

/// An [`OpenError::Io`] for `step`.
fn step(step: &'static str) -> impl FnOnce(io::Error) -> OpenError {
    move |source| OpenError::Io { step, source }
}

struct Opened {
    file: File,
    /// Where the next line starts.
    position: u64,
    /// Bytes of a torn last line that were truncated away.
    dropped: u64,
}

fn open_blocking(path: &Path) -> Result<Opened, OpenError> {
    let mut options = OpenOptions::new();
    options.read(true).append(true);
    let (mut file, created) = match options.clone().create_new(true).open(path) {
        Ok(file) => (file, true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => (
            options.open(path).map_err(step("cannot open the file"))?,
            false,
        ),
        Err(e) => return Err(step("cannot create the file")(e)),
    };
    let metadata = file
        .metadata()
        .map_err(step("cannot read the file's metadata"))?;
    if !metadata.is_file() {
        // A device or pipe (e.g. /dev/null): nothing to lock or repair, positions count from 0.
        return Ok(Opened {
            file,
            position: 0,
            dropped: 0,
        });
    }
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Err(OpenError::Locked),
        // Some file systems cannot lock; writing without the lock is still correct.
        Err(TryLockError::Error(e)) => {
            tracing::debug!(file = %path.display(), "cannot lock the sink file: {e}")
        }
    }
    if created {
        sync_parent(path)?;
        return Ok(Opened {
            file,
            position: 0,
            dropped: 0,
        });
    }
    let len = metadata.len();
    let keep = complete_length(&mut file, len).map_err(step("cannot read the file"))?;
    if keep == len {
        return Ok(Opened {
            file,
            position: len,
            dropped: 0,
        });
    }
    let mut tail = vec![0; usize::try_from((len - keep).min(LINE_START.len() as u64)).unwrap_or(0)];
    file.seek(SeekFrom::Start(keep))
        .and_then(|_| file.read_exact(&mut tail))
        .map_err(step("cannot read the file"))?;
    if !is_torn_line(&tail) {
        return Err(OpenError::ForeignTail {
            bytes: len - keep,
            start: String::from_utf8_lossy(&tail).into_owned(),
        });
    }
    file.set_len(keep)
        .map_err(step("cannot truncate the torn last line"))?;
    file.sync_data().map_err(step(
        "cannot sync the file after truncating its torn last line",
    ))?;
    Ok(Opened {
        file,
        position: keep,
        dropped: len - keep,
    })
}

/// The length of the file up to and including its last `\n` (0 if it has none).
fn complete_length(file: &mut File, len: u64) -> io::Result<u64> {
    let mut end = len;
    let mut buf = vec![0; SCAN_CHUNK as usize];
    while end > 0 {
        let start = end.saturating_sub(SCAN_CHUNK);
        let chunk = &mut buf[..usize::try_from(end - start).unwrap_or(0)];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

/// Whether the bytes after the last newline can be the start of a line the sink wrote: a prefix of
/// [`LINE_START`], or zeros (file systems may show unwritten blocks of a crashed append as zeros).
fn is_torn_line(tail: &[u8]) -> bool {
    LINE_START.starts_with(tail) || tail.first() == Some(&0)
}

/// Syncs the directory holding a newly created file, so the file's name survives a crash.
fn sync_parent(path: &Path) -> Result<(), OpenError> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(parent)
        .and_then(|dir| dir.sync_all())
        .map_err(|source| OpenError::SyncDirectory {
            dir: parent.to_path_buf(),
            source,
        })
}
