//! Tailing one file: byte-exact line splitting, truncation and replacement detection.
//!
//! All I/O here is synchronous and bounded by the poll's line budget, so a poll never holds a line
//! across an `.await`: the state below is always consistent, whatever the caller drops.

use std::fs::{File, Metadata};
use std::io::{self, Read, Seek, SeekFrom};

use ferry_api::{ConnectError, ConnectMap, SourceOffset, SourcePartition, SourceRecord};

use super::config::TruncationPolicy;
use super::{FileOffset, FilePartition};

/// How many bytes one `read` asks for.
const CHUNK: usize = 64 * 1024;
/// Most records reserved at once for a poll's batch (more grow it as usual).
const MAX_RESERVE: usize = 4096;

/// What the truncation check is about, for the error message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Resuming at the committed offset in `start()`.
    Start,
    /// Reading on while the task runs.
    Tailing,
}

/// An open file and the identity it had when opened, to notice a replacement at the same path.
struct OpenFile {
    file: File,
    id: Option<FileId>,
}

/// One file of a task and how far it has been read.
///
/// Invariant: `emitted` is the byte position right after the last line returned by a poll (the offset
/// of that record), and `pending` holds the bytes read after it — complete lines not yet returned, then
/// at most one partial line. The open file's read position is `emitted + pending.len()`.
pub(crate) struct TailedFile {
    name: String,
    partition: SourcePartition,
    emitted: u64,
    pending: Vec<u8>,
    /// `pending[..scanned]` holds no `\n` past the last returned line.
    scanned: usize,
    open: Option<OpenFile>,
    /// Whether "waiting for the file to appear" was logged since it was last seen.
    waiting_logged: bool,
}

impl TailedFile {
    /// A file to read from byte `position` on.
    pub(crate) fn new(name: String, position: u64) -> Result<Self, ConnectError> {
        let partition = ConnectMap::from_serde(&FilePartition {
            filename: name.clone(),
        })
        .map_err(|e| {
            ConnectError::fatal(format!(
                "FileStreamSource: file {name:?} cannot be used as a partition: {e}"
            ))
        })?;
        Ok(Self {
            name,
            partition,
            emitted: position,
            pending: Vec::new(),
            scanned: 0,
            open: None,
            waiting_logged: false,
        })
    }

    /// The byte position the next read starts at.
    fn read_pos(&self) -> u64 {
        self.emitted + self.pending.len() as u64
    }

    /// Appends up to `budget - out.len()` complete lines to `out`, reading more of the file as needed.
    ///
    /// # Errors
    /// An I/O error, or the file became shorter than the read position under
    /// [`TruncationPolicy::Fail`]. Lines appended to `out` before the error are accounted for.
    pub(crate) fn poll(
        &mut self,
        budget: usize,
        topic: &str,
        policy: TruncationPolicy,
        out: &mut Vec<SourceRecord>,
    ) -> Result<(), ConnectError> {
        self.take_lines(budget, topic, out)?;
        // Each poll reopens a file at most twice (after a replacement or a truncation restart), so a file
        // that keeps being rewritten cannot keep the task in here.
        let mut reopens = 0;
        while out.len() < budget {
            if self.open.is_none() && (reopens >= 2 || !self.open_file(Phase::Tailing, policy)?) {
                return Ok(());
            }
            let n = self.read_chunk()?;
            if n == 0 {
                if self.check_at_eof(policy)? {
                    reopens += 1;
                    continue;
                }
                return Ok(());
            }
            self.take_lines(budget, topic, out)?;
        }
        Ok(())
    }

    /// Opens the file at the read position. Returns `false` when it does not exist (yet).
    ///
    /// # Errors
    /// It cannot be opened or read, or it is shorter than the read position under
    /// [`TruncationPolicy::Fail`].
    pub(crate) fn open_file(
        &mut self,
        phase: Phase,
        policy: TruncationPolicy,
    ) -> Result<bool, ConnectError> {
        let file = match File::open(&self.name) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if !self.waiting_logged {
                    tracing::info!(
                        file = %self.name,
                        position = self.read_pos(),
                        "FileStreamSource: the file does not exist (yet); waiting for it to appear"
                    );
                    self.waiting_logged = true;
                }
                return Ok(false);
            }
            Err(e) => return Err(self.io_error("open", &e)),
        };
        let meta = file
            .metadata()
            .map_err(|e| self.io_error("read the metadata of", &e))?;
        if self.waiting_logged {
            tracing::info!(file = %self.name, position = self.read_pos(), "FileStreamSource: the file appeared");
            self.waiting_logged = false;
        }
        if meta.len() < self.read_pos() {
            self.truncated(meta.len(), phase, policy)?;
        }
        let mut open = OpenFile {
            file,
            id: file_id(&meta),
        };
        let pos = self.read_pos();
        open.file
            .seek(SeekFrom::Start(pos))
            .map_err(|e| self.io_error(&format!("seek to byte {pos} of"), &e))?;
        self.open = Some(open);
        Ok(true)
    }

    /// Reads the next chunk into `pending`; 0 at the end of the file (or when it is not open).
    fn read_chunk(&mut self) -> Result<usize, ConnectError> {
        let Some(open) = self.open.as_mut() else {
            return Ok(0);
        };
        let len = self.pending.len();
        self.pending.resize(len + CHUNK, 0);
        let result = loop {
            match open.file.read(&mut self.pending[len..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        let n = *result.as_ref().unwrap_or(&0);
        self.pending.truncate(len + n);
        result.map_err(|e| self.io_error("read", &e))
    }

    /// At the end of the open file: checks the path for truncation, replacement or removal.
    /// Returns `true` when the file must be (and may at once be) opened again.
    fn check_at_eof(&mut self, policy: TruncationPolicy) -> Result<bool, ConnectError> {
        let meta = match std::fs::metadata(&self.name) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Removed (or rotated away). Wait for the path to appear again; whatever appears is
                // checked against the read position like a file at start.
                self.open = None;
                return Ok(false);
            }
            Err(e) => return Err(self.io_error("read the metadata of", &e)),
        };
        if meta.len() < self.read_pos() {
            self.truncated(meta.len(), Phase::Tailing, policy)?;
            return Ok(true);
        }
        let replaced = match (self.open.as_ref().and_then(|o| o.id), file_id(&meta)) {
            (Some(open), Some(now)) => open != now,
            _ => false,
        };
        if replaced {
            // Same as a restart would do: read the file now at this path from the read position.
            tracing::info!(
                file = %self.name,
                position = self.read_pos(),
                "FileStreamSource: the file was replaced; reading the new file from the current position"
            );
            self.open = None;
        }
        Ok(replaced)
    }

    /// The file is `len` bytes, shorter than the read position: fail, or start it over.
    fn truncated(
        &mut self,
        len: u64,
        phase: Phase,
        policy: TruncationPolicy,
    ) -> Result<(), ConnectError> {
        let position = self.read_pos();
        if policy == TruncationPolicy::Fail {
            let what = match phase {
                Phase::Start => "its committed offset",
                Phase::Tailing => "how far the task had read it",
            };
            return Err(ConnectError::fatal(format!(
                "FileStreamSource: file {name:?} is {len} bytes long, shorter than position {position} ({what}): \
                 it was truncated or replaced, and reading on would skip or repeat lines. To read it again from \
                 the beginning, set file.truncation.policy=restart; or stop the connector, reset this file's \
                 offset with `ferry offsets reset` and start it again.",
                name = self.name
            )));
        }
        tracing::warn!(
            file = %self.name,
            position,
            length = len,
            "FileStreamSource: the file is shorter than the position to read from (truncated or replaced); \
             file.truncation.policy=restart, so reading it again from byte 0"
        );
        self.emitted = 0;
        self.pending.clear();
        self.scanned = 0;
        self.open = None;
        Ok(())
    }

    /// Moves complete lines from `pending` to `out`, up to `budget` records in `out`.
    fn take_lines(
        &mut self,
        budget: usize,
        topic: &str,
        out: &mut Vec<SourceRecord>,
    ) -> Result<(), ConnectError> {
        let mut consumed = 0;
        let mut error = None;
        while out.len() < budget {
            let Some(i) = self.pending[self.scanned..]
                .iter()
                .position(|&b| b == b'\n')
            else {
                self.scanned = self.pending.len();
                break;
            };
            let end = self.scanned + i;
            let mut line = &self.pending[consumed..end];
            if let [rest @ .., b'\r'] = line {
                line = rest;
            }
            let offset = match self.offset_after(end + 1) {
                Ok(offset) => offset,
                Err(e) => {
                    error = Some(e);
                    break;
                }
            };
            let value = serde_json::Value::String(String::from_utf8_lossy(line).into_owned());
            if out.capacity() == 0 {
                // Records are large (hundreds of bytes): growing the batch by doubling would copy it
                // several times over.
                out.reserve_exact(budget.min(MAX_RESERVE));
            }
            out.push(SourceRecord::from_maps(
                Some(self.partition.clone()),
                Some(offset),
                topic,
                Some(value),
            ));
            consumed = end + 1;
            self.scanned = consumed;
        }
        if consumed > 0 {
            self.pending.drain(..consumed);
            self.emitted += consumed as u64;
            self.scanned -= consumed;
        }
        error.map_or(Ok(()), Err)
    }

    /// The offset map of the position `len` bytes into `pending`.
    fn offset_after(&self, len: usize) -> Result<SourceOffset, ConnectError> {
        let position = i64::try_from(self.emitted + len as u64).map_err(|_| {
            ConnectError::fatal(format!(
                "FileStreamSource: file {:?} is too large for a 64-bit position",
                self.name
            ))
        })?;
        ConnectMap::from_serde(&FileOffset { position }).map_err(ConnectError::from)
    }

    fn io_error(&self, op: &str, e: &io::Error) -> ConnectError {
        let message = format!(
            "FileStreamSource: cannot {op} file {:?} (at byte {}): {e}; check the path and its permissions",
            self.name,
            self.read_pos()
        );
        let transient = matches!(
            e.kind(),
            io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        );
        if transient {
            ConnectError::retriable(message)
        } else {
            ConnectError::fatal(message)
        }
    }
}

/// A file's identity on disk, when the platform exposes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
}

#[cfg(unix)]
fn file_id(meta: &Metadata) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    Some(FileId {
        dev: meta.dev(),
        ino: meta.ino(),
    })
}

#[cfg(not(unix))]
fn file_id(_meta: &Metadata) -> Option<FileId> {
    None
}
