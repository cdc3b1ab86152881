//! Tailing one file: byte-exact line splitting, rotation, truncation and over-long lines.
//!
//! All I/O here is synchronous and bounded by the poll's line budget, so a poll never holds a line
//! across an `.await`: the state below is always consistent, whatever the caller drops.
//!
//! Rotation (see docs/src/guide/standalone.md, "File rotation"): the open file is read to its end before the task
//! switches to the different file now at the path, which it reads from byte 0. Every offset records
//! the file's device and inode numbers and a fingerprint of its first bytes, so a restart knows
//! whether the file at the path is still the one its offset is about.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;

use ferry_api::{ConnectError, ConnectMap, SourceOffset, SourcePartition, SourceRecord};

use super::FilePartition;
use super::config::TruncationPolicy;
use super::identity::{
    FP_BYTES, FileId, Identity, OpenError, Relation, find_rotated, open_regular, read_head,
};

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

/// How a file that is still the same inode no longer holds what was read from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shrunk {
    /// It is shorter than the position.
    Shorter(u64),
    /// Its first bytes changed: truncated and rewritten in place.
    Rewritten,
}

/// An over-long line being skipped.
#[derive(Debug, Clone, Copy)]
struct Skip {
    /// Byte position where the line starts.
    start: u64,
    /// Its bytes dropped so far.
    len: u64,
}

/// One file of a task and how far it has been read.
///
/// Invariant: `base` is the byte position of `pending[0]` in the open file — right after the last
/// line returned (the offset of that record) or skipped — and `pending` holds the bytes read after it:
/// complete lines not yet returned, then at most one partial line. The open file's read position is
/// `base + pending.len()`. `head` holds the file's first `min(read position, FP_BYTES)` bytes.
pub(crate) struct TailedFile {
    name: String,
    partition: SourcePartition,
    base: u64,
    pending: Vec<u8>,
    /// `pending[..scanned]` holds no `\n` past the last returned line.
    scanned: usize,
    open: Option<File>,
    /// The numbers of the file the lines come from (the open one, or the last one opened).
    id: Option<FileId>,
    head: Vec<u8>,
    /// The fingerprint of `head` once it holds `FP_BYTES` bytes.
    head_fp: Option<u32>,
    /// The identity of the committed offset, until the file is first opened.
    expected: Option<Identity>,
    /// Whether "waiting for the file to appear" was logged since it was last seen.
    waiting_logged: bool,
    /// Whether the rotated file of `expected` was looked for while the path did not exist.
    searched_missing: bool,
    max_line: usize,
    skip: Option<Skip>,
    skipped_lines: u64,
    /// The last offset built in full: a later line of the same file with the same fingerprint gets
    /// a clone of it with its own position (cheap: the map is shared until changed), instead of a
    /// map built field by field for every line.
    template: Option<OffsetTemplate>,
}

/// An offset map and the identity fields it holds.
struct OffsetTemplate {
    id: FileId,
    fp: u32,
    fp_len: usize,
    map: SourceOffset,
}

impl TailedFile {
    /// A file to read from byte `position` on; `expected` is the identity its committed offset
    /// recorded (none for a fresh file or an offset without one, like Kafka Connect's).
    pub(crate) fn new(
        name: String,
        position: u64,
        expected: Option<Identity>,
        max_line: usize,
    ) -> Result<Self, ConnectError> {
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
            base: position,
            pending: Vec::new(),
            scanned: 0,
            open: None,
            id: None,
            head: Vec::new(),
            head_fp: None,
            expected,
            waiting_logged: false,
            searched_missing: false,
            template: None,
            max_line,
            skip: None,
            skipped_lines: 0,
        })
    }

    /// The byte position the next read starts at.
    fn read_pos(&self) -> u64 {
        self.base + self.pending.len() as u64
    }

    /// Appends up to `budget - out.len()` complete lines to `out`, reading more of the file as needed.
    ///
    /// # Errors
    /// An I/O error, the path is not a regular file, or the file was truncated or rewritten in place
    /// under [`TruncationPolicy::Fail`]. Lines appended to `out` before the error are accounted for.
    pub(crate) fn poll(
        &mut self,
        budget: usize,
        topic: &str,
        policy: TruncationPolicy,
        out: &mut Vec<SourceRecord>,
    ) -> Result<(), ConnectError> {
        self.take_lines(budget, topic, out)?;
        // Each poll switches files at most twice (after a rotation or a truncation restart), so a file
        // that keeps being rewritten cannot keep the task in here.
        let mut reopens = 0;
        while out.len() < budget {
            if self.open.is_none() && (reopens >= 2 || !self.open_file(Phase::Tailing, policy)?) {
                return Ok(());
            }
            let start = self.read_pos();
            let n = self.read_chunk()?;
            if n == 0 {
                if self.check_at_eof(policy)? {
                    reopens += 1;
                    continue;
                }
                return Ok(());
            }
            if !self.check_head(start, n, policy)? {
                reopens += 1;
                continue;
            }
            self.take_lines(budget, topic, out)?;
        }
        Ok(())
    }

    /// Opens the file at the path, at the read position — or, when the committed offset is about
    /// another file, the rotated file to finish first or the new file from byte 0. Returns `false`
    /// when the path does not exist (yet).
    ///
    /// # Errors
    /// It cannot be opened or read, is not a regular file, or was truncated or rewritten in place
    /// under [`TruncationPolicy::Fail`].
    pub(crate) fn open_file(
        &mut self,
        phase: Phase,
        policy: TruncationPolicy,
    ) -> Result<bool, ConnectError> {
        let Some((file, meta)) = self.open_at_path()? else {
            return Ok(false);
        };
        if self.waiting_logged {
            tracing::info!(file = %self.name, position = self.read_pos(), "FileStreamSource: the file appeared");
            self.waiting_logged = false;
        }
        let file = self.check_expected(file, &meta, phase, policy)?;
        let meta = file
            .metadata()
            .map_err(|e| self.io_error("read the metadata of", &e))?;
        if meta.len() < self.read_pos() {
            self.shrunk(Shrunk::Shorter(meta.len()), phase, policy)?;
        }
        let pos = self.read_pos();
        let mut file = file;
        file.seek(SeekFrom::Start(pos))
            .map_err(|e| self.io_error(&format!("seek to byte {pos} of"), &e))?;
        let id = FileId::of(&meta);
        if self.id != Some(id) || self.head.len() as u64 > pos {
            self.head.clear();
            self.head_fp = None;
        }
        if (self.head.len() as u64) < pos.min(FP_BYTES as u64) {
            self.head =
                read_head(&file, pos).map_err(|e| self.io_error("read the first bytes of", &e))?;
            self.head_fp = (self.head.len() == FP_BYTES).then(|| crc32c::crc32c(&self.head));
        }
        self.id = Some(id);
        self.open = Some(file);
        Ok(true)
    }

    /// Opens the regular file at the path or, when there is none, the rotated file of the
    /// committed offset (looked for once); `None` (logged once) when neither is there.
    fn open_at_path(&mut self) -> Result<Option<(File, std::fs::Metadata)>, ConnectError> {
        let opened =
            open_regular(std::path::Path::new(&self.name)).map_err(|e| self.open_error(e))?;
        Ok(Some(match opened {
            Some(opened) => opened,
            // Rotated away while stopped, nothing at the path yet: finish the rotated file meanwhile.
            // Looked for once: a stat per directory entry is too much for every idle poll.
            None => match self
                .expected
                .filter(|_| !std::mem::replace(&mut self.searched_missing, true))
                .and_then(|e| self.find_rotated_file(&e))
            {
                Some(old) => {
                    self.expected = None;
                    let meta = old
                        .metadata()
                        .map_err(|e| self.io_error("read the metadata of", &e))?;
                    (old, meta)
                }
                None => {
                    if !self.waiting_logged {
                        tracing::info!(
                            file = %self.name,
                            position = self.read_pos(),
                            "FileStreamSource: the file does not exist (yet); waiting for it to appear"
                        );
                        self.waiting_logged = true;
                    }
                    return Ok(None);
                }
            },
        }))
    }

    /// Checks `file` against the file of the committed offset (once): the same file goes on, a
    /// rewritten one is [`Self::shrunk`], another one gives way to the rotated file of the offset
    /// or is read from byte 0. Returns the file to read.
    fn check_expected(
        &mut self,
        file: File,
        meta: &std::fs::Metadata,
        phase: Phase,
        policy: TruncationPolicy,
    ) -> Result<File, ConnectError> {
        let Some(expected) = self.expected.take() else {
            return Ok(file);
        };
        let relation = expected
            .relation(&file, meta)
            .map_err(|e| self.io_error("read the first bytes of", &e))?;
        match relation {
            Relation::Same => {}
            Relation::Rewritten if meta.len() < self.read_pos() => {
                self.shrunk(Shrunk::Shorter(meta.len()), phase, policy)?;
            }
            Relation::Rewritten => self.shrunk(Shrunk::Rewritten, phase, policy)?,
            Relation::Other => {
                if let Some(old) = self.find_rotated_file(&expected) {
                    return Ok(old);
                }
                tracing::warn!(
                    file = %self.name,
                    position = self.read_pos(),
                    inode = meta.ino(),
                    committed_inode = expected.id.ino,
                    "FileStreamSource: the file at the path is not the file of the committed offset: it was \
                     rotated or replaced while the task was stopped, and the old file is no longer in the \
                     directory, so whatever it got after the committed position was not read; reading the \
                     new file from byte 0"
                );
                self.restart_from_zero();
            }
        }
        Ok(file)
    }

    /// The file of the committed offset, renamed in the same directory while the task was stopped.
    fn find_rotated_file(&self, expected: &Identity) -> Option<File> {
        let (old, path) =
            find_rotated(std::path::Path::new(&self.name), expected, self.read_pos())?;
        tracing::info!(
            file = %self.name,
            rotated_to = %path.display(),
            position = self.read_pos(),
            "FileStreamSource: the file was rotated while the task was stopped; reading the rest of the rotated \
             file first, then the new file from byte 0"
        );
        Some(old)
    }

    /// Reads the next chunk into `pending`; 0 at the end of the file (or when it is not open).
    fn read_chunk(&mut self) -> Result<usize, ConnectError> {
        let Some(file) = self.open.as_mut() else {
            return Ok(0);
        };
        let len = self.pending.len();
        self.pending.resize(len + CHUNK, 0);
        let result = loop {
            match file.read(&mut self.pending[len..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        let n = *result.as_ref().unwrap_or(&0);
        self.pending.truncate(len + n);
        result.map_err(|e| self.io_error("read", &e))
    }

    /// After reading `n` bytes at `start`: checks that the file still begins with the bytes read
    /// before — a file truncated and rewritten in place past the read position would otherwise hand
    /// out the middle of its new lines — then adds the new bytes to `head`. Returns `false` when the
    /// chunk was dropped and the file must be opened again (restarted from byte 0).
    fn check_head(
        &mut self,
        start: u64,
        n: usize,
        policy: TruncationPolicy,
    ) -> Result<bool, ConnectError> {
        let Some(file) = self.open.as_ref() else {
            return Ok(true);
        };
        if !self.head.is_empty() {
            let now = read_head(file, self.head.len() as u64)
                .map_err(|e| self.io_error("read the first bytes of", &e))?;
            if now != self.head {
                let len = self.pending.len() - n;
                self.pending.truncate(len);
                self.shrunk(Shrunk::Rewritten, Phase::Tailing, policy)?;
                return Ok(false);
            }
        }
        if self.head.len() as u64 == start && self.head.len() < FP_BYTES {
            let from = self.pending.len() - n;
            let take = n.min(FP_BYTES - self.head.len());
            self.head
                .extend_from_slice(&self.pending[from..from + take]);
            if self.head.len() == FP_BYTES {
                self.head_fp = Some(crc32c::crc32c(&self.head));
            }
        }
        Ok(true)
    }

    /// At the end of the open file: checks the path for truncation, rotation or removal. Returns
    /// `true` when the file must be (and may at once be) opened again.
    fn check_at_eof(&mut self, policy: TruncationPolicy) -> Result<bool, ConnectError> {
        let Some(file) = self.open.as_ref() else {
            return Ok(false);
        };
        let open_meta = file
            .metadata()
            .map_err(|e| self.io_error("read the metadata of", &e))?;
        let meta = match std::fs::metadata(&self.name) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if open_meta.nlink() == 0 {
                    // Deleted and read to its end: whatever appears at the path next is a new file.
                    tracing::info!(
                        file = %self.name,
                        position = self.read_pos(),
                        "FileStreamSource: the file was deleted after it was read to its end; waiting for a new \
                         file at the path, to read it from byte 0"
                    );
                    self.finish_old_file();
                    self.restart_from_zero();
                }
                // Moved away: keep reading it, its writer may not have moved on yet.
                return Ok(false);
            }
            Err(e) => return Err(self.io_error("read the metadata of", &e)),
        };
        if FileId::of(&meta) == FileId::of(&open_meta) {
            if meta.len() < self.read_pos() {
                self.shrunk(Shrunk::Shorter(meta.len()), Phase::Tailing, policy)?;
                return Ok(true);
            }
            return Ok(false);
        }
        if meta.len() == 0 && open_meta.nlink() > 0 {
            // A new, empty file (logrotate's `create`): the program may still be writing the old one
            // until it reopens; it writes the new one only after that.
            return Ok(false);
        }
        tracing::info!(
            file = %self.name,
            position = self.read_pos(),
            "FileStreamSource: the file was rotated; the old file was read to its end, reading the new file from \
             byte 0"
        );
        self.finish_old_file();
        self.restart_from_zero();
        Ok(true)
    }

    /// Reports what is left of the old file when switching away from it: an unterminated last line
    /// (it never got its `\n`) or the over-long line being skipped.
    fn finish_old_file(&mut self) {
        if let Some(skip) = self.skip.take() {
            self.skipped(skip.start, skip.len);
        } else if !self.pending.is_empty() {
            tracing::warn!(
                file = %self.name,
                position = self.base,
                bytes = self.pending.len(),
                "FileStreamSource: the old file ended with an unterminated line; it is not emitted"
            );
        }
    }

    /// Forgets the open file and reads the file at the path from byte 0.
    fn restart_from_zero(&mut self) {
        self.base = 0;
        self.pending.clear();
        self.scanned = 0;
        self.skip = None;
        self.open = None;
        self.id = None;
        self.head.clear();
        self.head_fp = None;
    }

    /// The same file no longer holds what was read from it: fail, or start it over.
    fn shrunk(
        &mut self,
        how: Shrunk,
        phase: Phase,
        policy: TruncationPolicy,
    ) -> Result<(), ConnectError> {
        let position = self.read_pos();
        if policy == TruncationPolicy::Fail {
            let what = match phase {
                Phase::Start => "its committed offset",
                Phase::Tailing => "how far the task had read it",
            };
            let name = &self.name;
            let state = match how {
                Shrunk::Shorter(len) => format!(
                    "is {len} bytes long, shorter than position {position} ({what}): it was truncated"
                ),
                Shrunk::Rewritten => format!(
                    "begins with other bytes than when it was read up to position {position} ({what}), yet is the \
                     same inode: it was truncated and rewritten in place"
                ),
            };
            return Err(ConnectError::fatal(format!(
                "FileStreamSource: file {name:?} {state}, and reading on would skip or repeat lines. To read it \
                 again from the beginning, set file.truncation.policy=restart (needed when the file is rotated by \
                 copytruncate); or stop the connector, reset this file's offset with `ferry offsets reset` and \
                 start it again."
            )));
        }
        match how {
            Shrunk::Shorter(len) => tracing::warn!(
                file = %self.name,
                position,
                length = len,
                "FileStreamSource: the file is shorter than the position to read from (truncated); \
                 file.truncation.policy=restart, so reading it again from byte 0"
            ),
            Shrunk::Rewritten => tracing::warn!(
                file = %self.name,
                position,
                "FileStreamSource: the file was truncated and rewritten in place (its first bytes changed); \
                 file.truncation.policy=restart, so reading it again from byte 0"
            ),
        }
        self.restart_from_zero();
        Ok(())
    }

    /// Logs a skipped over-long line.
    fn skipped(&mut self, start: u64, len: u64) {
        self.skipped_lines += 1;
        tracing::warn!(
            file = %self.name,
            position = start,
            bytes = len,
            max_line_bytes = self.max_line,
            skipped_lines = self.skipped_lines,
            "FileStreamSource: skipped a line longer than max.line.bytes; reading on at the next line"
        );
    }

    /// Moves complete lines from `pending` to `out`, up to `budget` records in `out`; drops lines
    /// longer than `max.line.bytes`, and the bytes of such a line still being written.
    fn take_lines(
        &mut self,
        budget: usize,
        topic: &str,
        out: &mut Vec<SourceRecord>,
    ) -> Result<(), ConnectError> {
        let mut consumed = 0;
        let mut error = None;
        while out.len() < budget {
            let Some(i) = memchr::memchr(b'\n', &self.pending[self.scanned..]) else {
                let partial = self.pending.len() - consumed;
                // One byte more than the limit may be a `\r` before the `\n` still to come.
                if self.skip.is_some() || partial > self.max_line.saturating_add(1) {
                    let start = self.base + consumed as u64;
                    let skip = self.skip.get_or_insert(Skip { start, len: 0 });
                    skip.len += partial as u64;
                    consumed = self.pending.len();
                }
                self.scanned = self.pending.len();
                break;
            };
            let end = self.scanned + i;
            // The line is `pending[consumed..line_end]`, without its `\r\n` or `\n`.
            let line_end = if end > consumed && self.pending[end - 1] == b'\r' {
                end - 1
            } else {
                end
            };
            let line_len = line_end - consumed;
            if let Some(skip) = self.skip.take() {
                self.skipped(skip.start, skip.len + (end - consumed) as u64);
                consumed = end + 1;
                self.scanned = consumed;
                continue;
            }
            if line_len > self.max_line {
                let (start, len) = (self.base + consumed as u64, line_len as u64);
                self.skipped(start, len);
                consumed = end + 1;
                self.scanned = consumed;
                continue;
            }
            let offset = match self.offset_after(end + 1) {
                Ok(offset) => offset,
                Err(e) => {
                    error = Some(e);
                    break;
                }
            };
            let line = &self.pending[consumed..line_end];
            // Malformed UTF-8 is replaced, as Kafka Connect's reader does; valid text (the usual
            // case) is checked by `from_utf8`, which is several times faster than the lossy scan.
            let text = match std::str::from_utf8(line) {
                Ok(text) => text.to_owned(),
                Err(_) => String::from_utf8_lossy(line).into_owned(),
            };
            let value = serde_json::Value::String(text);
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
            self.base += consumed as u64;
            self.scanned -= consumed;
        }
        error.map_or(Ok(()), Err)
    }

    /// The offset map of the position `len` bytes into `pending`: `position`, then the identity of
    /// the file (`dev`, `ino`, and `fp`, the CRC-32C of its first `fp_len` bytes).
    fn offset_after(&mut self, len: usize) -> Result<SourceOffset, ConnectError> {
        let too_large = || {
            ConnectError::fatal(format!(
                "FileStreamSource: file {:?} is too large for a 64-bit position",
                self.name
            ))
        };
        let end = self.base + len as u64;
        let position = i64::try_from(end).map_err(|_| too_large())?;
        let Some(id) = self.id else {
            return Ok(ConnectMap::new().with("position", position)?);
        };
        let fp_len = usize::try_from(end)
            .unwrap_or(usize::MAX)
            .min(self.head.len());
        let fp = match self.head_fp {
            Some(fp) if fp_len == FP_BYTES => fp,
            _ => crc32c::crc32c(&self.head[..fp_len]),
        };
        if let Some(t) = &self.template
            && (t.id, t.fp, t.fp_len) == (id, fp, fp_len)
        {
            let mut offset = t.map.clone();
            // Replaces the value in place: the fields keep their order.
            offset.insert("position", position)?;
            return Ok(offset);
        }
        let mut offset = ConnectMap::new().with("position", position)?;
        // Stored as Kafka Connect's 64-bit integers; the numbers are bit patterns, not amounts.
        offset.insert("dev", id.dev as i64)?;
        offset.insert("ino", id.ino as i64)?;
        offset.insert("fp", i64::from(fp))?;
        offset.insert("fp_len", fp_len as i64)?;
        self.template = Some(OffsetTemplate {
            id,
            fp,
            fp_len,
            map: offset.clone(),
        });
        Ok(offset)
    }

    fn open_error(&self, e: OpenError) -> ConnectError {
        match e {
            OpenError::NotRegular(kind) => ConnectError::fatal(format!(
                "FileStreamSource: {:?} is {kind}, not a regular file; FileStreamSource reads regular files only \
                 (a FIFO or device would block or never end): point `file`/`files` at regular files",
                self.name
            )),
            OpenError::Io(op, e) => self.io_error(op, &e),
        }
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
