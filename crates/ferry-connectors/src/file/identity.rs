//! Which file a path holds: device and inode numbers plus a fingerprint of the first bytes, and
//! opening only regular files, without ever blocking.
//!
//! A path names a different file after a rotation (`mv app.log app.log.1` and a new `app.log`); the
//! device and inode numbers tell them apart. An inode keeps its number when a file is truncated and
//! rewritten in place (`copytruncate`), and a number may be reused by a new file once the old one is
//! deleted; the fingerprint (CRC-32C of the first bytes already read, as Vector's checksum
//! fingerprinter) tells those apart.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// How many leading bytes the fingerprint covers at most.
pub(crate) const FP_BYTES: usize = 1024;
/// Most directory entries looked at when searching for a rotated file, so a huge directory cannot
/// stall a start.
const MAX_DIR_ENTRIES: usize = 10_000;

/// A file's device and inode numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
}

impl FileId {
    pub(crate) fn of(meta: &Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }
}

/// The identity a committed offset recorded: the file's numbers and the fingerprint of its first
/// `fp_len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Identity {
    pub(crate) id: FileId,
    pub(crate) fp: u32,
    pub(crate) fp_len: u64,
}

/// How a file relates to a recorded identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Relation {
    /// The same file, its first bytes unchanged.
    Same,
    /// The same inode, but shorter than the fingerprinted bytes or with other first bytes: truncated
    /// (and perhaps rewritten) in place — or a reused inode number.
    Rewritten,
    /// Another file.
    Other,
}

impl Identity {
    /// How the open `file` (with metadata `meta`) relates to this identity. A changed device number
    /// with the same inode and first bytes counts as the same file: device numbers of some file
    /// systems change across reboots.
    pub(crate) fn relation(&self, file: &File, meta: &Metadata) -> io::Result<Relation> {
        let now = FileId::of(meta);
        if now.ino != self.id.ino {
            return Ok(Relation::Other);
        }
        let head = read_head(file, self.fp_len)?;
        let same_start = head.len() as u64 == self.fp_len && crc32c::crc32c(&head) == self.fp;
        Ok(match (same_start, now.dev == self.id.dev) {
            (true, _) => Relation::Same,
            (false, true) => Relation::Rewritten,
            (false, false) => Relation::Other,
        })
    }
}

/// The first up to `len` bytes of `file` (fewer when it is shorter).
pub(crate) fn read_head(file: &File, len: u64) -> io::Result<Vec<u8>> {
    let len = usize::try_from(len.min(FP_BYTES as u64)).unwrap_or(FP_BYTES);
    let mut head = vec![0; len];
    let mut filled = 0;
    while filled < len {
        match file.read_at(&mut head[filled..], filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    head.truncate(filled);
    Ok(head)
}

/// Why a path cannot be read.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// It is not a regular file; the kind, e.g. "a FIFO (named pipe)".
    NotRegular(&'static str),
    /// Opening or inspecting it failed.
    Io(&'static str, io::Error),
}

/// Opens `path` for reading if it is a regular file; `Ok(None)` when it does not exist.
///
/// The kind is checked before opening, and the open itself is non-blocking, so a FIFO swapped in
/// between can never block it (opening a FIFO without a writer blocks forever otherwise); it is
/// checked again on the open file. Reads of a regular file ignore `O_NONBLOCK`.
pub(crate) fn open_regular(path: &Path) -> Result<Option<(File, Metadata)>, OpenError> {
    match std::fs::metadata(path) {
        Ok(meta) => check_regular(&meta)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(OpenError::Io("read the metadata of", e)),
    }
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(OpenError::Io("open", e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| OpenError::Io("read the metadata of", e))?;
    check_regular(&meta)?;
    Ok(Some((file, meta)))
}

/// `Ok` for a regular file; the kind of anything else.
pub(crate) fn check_regular(meta: &Metadata) -> Result<(), OpenError> {
    let kind = meta.file_type();
    let name = if kind.is_file() {
        return Ok(());
    } else if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(OpenError::NotRegular(name))
}

/// Looks in the directory of `path` for the file a committed identity recorded, renamed by a
/// rotation while the task was stopped (`app.log.1`, or any other name in that directory). Returns
/// the open file and its path when one with the same numbers and first bytes, at least `min_len`
/// bytes long, is there.
pub(crate) fn find_rotated(
    path: &Path,
    identity: &Identity,
    min_len: u64,
) -> Option<(File, PathBuf)> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let entries = std::fs::read_dir(dir).ok()?;
    for entry in entries.take(MAX_DIR_ENTRIES).flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() || FileId::of(&meta) != identity.id || meta.len() < min_len {
            continue;
        }
        let candidate = entry.path();
        let Ok(Some((file, meta))) = open_regular(&candidate) else {
            continue;
        };
        if matches!(identity.relation(&file, &meta), Ok(Relation::Same)) {
            return Some((file, candidate));
        }
    }
    None
}
