//! Replaying a store file into memory at open, and deciding what damage is a torn final write.
//!
//! Only one kind of damage is expected and repaired: the tail of the file, when the process or the
//! machine stopped while the last `set` was being appended. That `set` never returned `Ok` (it returns
//! after its `fdatasync`), so dropping it loses nothing that was acknowledged. The tail counts as torn
//! when, and only when, it is one of:
//!
//! - fewer bytes than a frame header;
//! - a frame header whose CRC does not match, followed only by zero bytes (a zero-filled tail, or a
//!   header cut by a page that never reached the disk);
//! - a frame header whose CRC matches but whose payload runs past the end of the file;
//! - a complete frame ending exactly at the end of the file whose payload CRC does not match.
//!
//! Anything else is damage Ferry did not cause and cannot explain: the open is refused with
//! [`StoreError::Corrupt`] and the file is left exactly as it was. Replay only reads; the caller
//! truncates a torn tail after the whole file has been checked.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use super::format::{
    self, FORMAT_VERSION, FRAME_HEADER_LEN, HEADER_LEN, HeaderError, MAX_PAYLOAD_LEN,
};
use crate::error::StoreError;
use crate::store::StoredRecord;
use crate::table::OffsetTable;

/// Read buffer for replay.
const READ_BUFFER: usize = 1 << 20;

/// The state a store file replays to.
#[derive(Debug)]
pub(super) struct Replayed {
    /// Every live offset.
    pub table: OffsetTable,
    /// Estimated bytes the live offsets take in a compacted file (writes only).
    pub live_bytes: u64,
    /// Length of the valid prefix: header and complete frames.
    pub valid_len: u64,
    /// The torn final write to truncate, if any.
    pub torn: Option<TornTail>,
}

/// A torn final write found at the end of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TornTail {
    /// Where it starts (the new file length).
    pub offset: u64,
    /// Bytes it takes up to the end of the file.
    pub dropped: u64,
    /// What was found.
    pub reason: String,
}

/// Applies one write to `table` and returns the new live-bytes estimate.
///
/// The estimate counts each live offset as its compacted size; a replaced offset's old key is assumed
/// to be as long as the new one (the same partition), so the estimate is approximate until the next
/// compaction measures it exactly.
pub(super) fn apply_write(
    table: &mut OffsetTable,
    live_bytes: u64,
    key: &[u8],
    value: Option<&[u8]>,
) -> u64 {
    let previous = table.apply_sized(key, value);
    let added = value.map_or(0, |v| format::live_size(key.len(), v.len()));
    let removed = previous.map_or(0, |len| format::live_size(key.len(), len));
    live_bytes.saturating_add(added).saturating_sub(removed)
}

/// Reads and checks the whole file. Never modifies it.
pub(super) fn replay(path: &Path, file: &File) -> Result<Replayed, StoreError> {
    let io_err = |op: &'static str| {
        move |source: io::Error| StoreError::Io {
            path: path.to_path_buf(),
            op,
            source,
        }
    };
    let file_len = file.metadata().map_err(io_err("read the file size"))?.len();
    if file_len == 0 {
        return Err(StoreError::UnsupportedFormat {
            path: path.to_path_buf(),
            reason: "the file is empty (0 bytes). Ferry creates its store files complete with a header, \
                     in one atomic rename, so this file was made by something else (for example a Kafka \
                     Connect standalone offsets file emptied by a crash during its rewrite, or a \
                     placeholder). Move it aside to let Ferry create a new store"
                .to_owned(),
        });
    }
    let mut reader = BufReader::with_capacity(READ_BUFFER, file);
    check_file_header(path, &mut reader, file_len)?;
    let mut table = OffsetTable::default();
    let mut live_bytes = 0u64;
    let scanned = scan_frames(path, &mut reader, file_len, |key, value| {
        live_bytes = apply_write(&mut table, live_bytes, key, value);
    })?;
    Ok(Replayed {
        table,
        live_bytes,
        valid_len: scanned.valid_len,
        torn: scanned.torn,
    })
}

/// Every write in the first `len` bytes of the store file at `path`, in file order, tombstones
/// included. `len` must be the length of the file's valid prefix (header and complete frames), read
/// while no `set` or compaction can change the file. Only reads.
pub(super) fn history(path: &Path, len: u64) -> Result<Vec<StoredRecord>, StoreError> {
    let file = File::open(path).map_err(|source| StoreError::Io {
        path: path.to_path_buf(),
        op: "open for reading its history",
        source,
    })?;
    let mut reader = BufReader::with_capacity(READ_BUFFER, file).take(len);
    check_file_header(path, &mut reader, len)?;
    let mut records = Vec::new();
    let scanned = scan_frames(path, &mut reader, len, |key, value| {
        records.push((key.to_vec(), value.map(<[u8]>::to_vec)));
    })?;
    match scanned.torn {
        None => Ok(records),
        // The store's own valid prefix does not read back: the file changed under the store.
        Some(torn) => Err(StoreError::Corrupt {
            path: path.to_path_buf(),
            byte_offset: torn.offset,
            reason: format!(
                "reading the store's history found {} at byte {}, inside what the store had \
                 already checked and written (was the file changed by another program?)",
                torn.reason, torn.offset
            ),
        }),
    }
}

/// Reads and checks the file header (`file_len` is the file's length, at least 1).
fn check_file_header(path: &Path, reader: &mut impl Read, file_len: u64) -> Result<(), StoreError> {
    let head_len = file_len.min(HEADER_LEN as u64) as usize;
    let mut head = [0u8; HEADER_LEN];
    reader
        .read_exact(&mut head[..head_len])
        .map_err(|source| StoreError::Io {
            path: path.to_path_buf(),
            op: "read the file header",
            source,
        })?;
    match format::check_header(&head[..head_len]) {
        Ok(()) => Ok(()),
        Err(HeaderError::NotAStore(reason)) => Err(StoreError::UnsupportedFormat {
            path: path.to_path_buf(),
            reason: format!("it is not a Ferry offset store: {reason}"),
        }),
        Err(HeaderError::Version(version)) => Err(StoreError::UnsupportedFormat {
            path: path.to_path_buf(),
            reason: format!(
                "it is a Ferry offset store of format version {version}, but this build of Ferry \
                 reads only version {FORMAT_VERSION}; open it with the Ferry release that wrote it \
                 (or a newer one)"
            ),
        }),
        Err(HeaderError::Damaged { at, reason }) => Err(StoreError::Corrupt {
            path: path.to_path_buf(),
            byte_offset: at,
            reason,
        }),
    }
}

/// Where a scan of the frames stopped.
struct Scanned {
    /// Length of the valid prefix: header and complete frames.
    valid_len: u64,
    /// The torn final write, if any.
    torn: Option<TornTail>,
}

/// Reads the frames that follow the header, up to `file_len`, calling `on_write` for every write in
/// file order. `reader` is positioned right after the header.
fn scan_frames(
    path: &Path,
    reader: &mut impl Read,
    file_len: u64,
    mut on_write: impl FnMut(&[u8], Option<&[u8]>),
) -> Result<Scanned, StoreError> {
    let io_err = |op: &'static str| {
        move |source: io::Error| StoreError::Io {
            path: path.to_path_buf(),
            op,
            source,
        }
    };
    let corrupt = |byte_offset: u64, reason: String| StoreError::Corrupt {
        path: path.to_path_buf(),
        byte_offset,
        reason,
    };
    let mut pos = HEADER_LEN as u64;
    let mut payload = Vec::new();
    let torn = loop {
        let remaining = file_len - pos;
        if remaining == 0 {
            break None;
        }
        let torn_here = |reason: String| TornTail {
            offset: pos,
            dropped: remaining,
            reason,
        };
        if remaining < FRAME_HEADER_LEN as u64 {
            break Some(torn_here(format!(
                "an incomplete frame header ({remaining} of {FRAME_HEADER_LEN} bytes)"
            )));
        }
        let mut header_bytes = [0u8; FRAME_HEADER_LEN];
        reader
            .read_exact(&mut header_bytes)
            .map_err(io_err("read a frame header"))?;
        let Some(header) = format::decode_frame_header(&header_bytes) else {
            let after = remaining - FRAME_HEADER_LEN as u64;
            if rest_is_zero(reader).map_err(io_err("read the end of the file"))? {
                let reason = if header_bytes.iter().all(|b| *b == 0) {
                    "a zero-filled tail (the file was extended but the data never reached the disk)"
                        .to_owned()
                } else {
                    format!(
                        "a damaged frame header followed only by {after} zero bytes (a write cut short)"
                    )
                };
                break Some(torn_here(reason));
            }
            return Err(corrupt(
                pos,
                format!(
                    "the frame header checksum does not match, and the {after} bytes after it are not \
                     all zero, so this is not a torn final write"
                ),
            ));
        };
        let payload_len = header.payload_len as u64;
        if payload_len > MAX_PAYLOAD_LEN as u64 {
            return Err(corrupt(
                pos,
                format!(
                    "a frame header declares a payload of {payload_len} bytes, more than the \
                     {MAX_PAYLOAD_LEN}-byte limit"
                ),
            ));
        }
        let available = remaining - FRAME_HEADER_LEN as u64;
        if payload_len > available {
            break Some(torn_here(format!(
                "the last frame declares {payload_len} payload bytes but only {available} were written"
            )));
        }
        payload.clear();
        payload.resize(payload_len as usize, 0);
        reader
            .read_exact(&mut payload)
            .map_err(io_err("read a frame payload"))?;
        let end = pos + FRAME_HEADER_LEN as u64 + payload_len;
        if crc32c::crc32c(&payload) != header.payload_crc {
            if end == file_len {
                break Some(torn_here(
                    "the last frame's payload checksum does not match (its write was cut short)"
                        .to_owned(),
                ));
            }
            return Err(corrupt(
                pos,
                format!(
                    "the payload checksum of the frame at byte {pos} ({payload_len} payload bytes) does \
                     not match, and {} more bytes follow it, so this is not a torn final write",
                    file_len - end
                ),
            ));
        }
        let writes = format::decode_payload(&payload).map_err(|e| {
            corrupt(
                pos,
                format!(
                    "the frame at byte {pos} has valid checksums but its payload does not parse (at \
                     payload byte {}): {}",
                    e.at, e.reason
                ),
            )
        })?;
        for (key, value) in writes {
            on_write(key, value);
        }
        pos = end;
    };
    Ok(Scanned {
        valid_len: pos,
        torn,
    })
}

/// Whether everything left to read is zero bytes.
fn rest_is_zero(reader: &mut impl Read) -> io::Result<bool> {
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => return Ok(true),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk[..n].iter().any(|b| *b != 0) {
            return Ok(false);
        }
    }
}
