//! Replaying a store file into memory at open, and deciding what damage is a torn final write.
//!
//! Only one kind of damage is expected and repaired: the tail of the file, when the process or the
//! machine stopped while the last `set` was being appended. That `set` never returned `Ok` (it returns
//! after its `fdatasync`), so dropping it loses nothing that was acknowledged.
//!
//! # What a torn append can leave, and what it cannot
//!
//! An append writes the whole frame at the end of the file, header first (one `write`, or for
//! `set_batch` a run of buffered `write`s of the same bytes, the header's length and checksum
//! computed beforehand), then one `fdatasync`; `set` returns `Ok` only after the `fdatasync`. A run
//! of writes cut short by a crash leaves a prefix of the frame, which is no other shape than one
//! write's unwritten sectors. Until then the kernel may have put any subset of the
//! frame's sectors on disk, and the file's length may already cover sectors that never got there.
//! Sectors are the unit (512 bytes, aligned to the file offset: disks write a sector whole or not at
//! all), and a sector that never reached the disk reads as zeros (the file systems Ferry supports
//! expose unwritten blocks of a file as zeros; one that exposes stale old data makes such a crash
//! fail closed below, never silently lose data). So after a crash the last frame is, window by window:
//!
//! 1. *Before any of it reached the disk*: the file ends at the previous frame, or is followed by
//!    zeros (length extended, data not written).
//! 2. *Header sector missing*: fewer bytes than a frame header, or a header that reads as zeros or
//!    fails its CRC, followed only by zeros.
//! 3. *Header written, later sectors missing, length not extended over them*: a valid header whose
//!    payload runs past the end of the file.
//! 4. *Header written, length extended, some later sector missing*: a valid header, the declared
//!    length ending exactly at the end of the file, a payload CRC that does not match, and at least
//!    one whole sector of the payload (from the first sector boundary after the header on) reading
//!    as zeros. A sector holding any header byte was written, or the header CRC would fail.
//! 5. *Everything written*: a valid frame (the `set` may or may not have returned `Ok`).
//!
//! The tail counts as torn when, and only when, it has one of the shapes 1 to 4. A complete last
//! frame whose payload CRC fails although none of its sectors reads as zeros fits no window: every
//! sector of it was written, so its bytes changed after they were written. That is bit rot in a
//! frame that may hold an acknowledged flush, and it is refused like damage anywhere else. The
//! price is that a damaged frame whose payload legitimately reads as zeros over a whole sector (512
//! zero bytes on a sector boundary, or zeros from the last sector boundary to its end, as an empty
//! last value's length could be) is taken for a torn write, as every damaged last frame was before;
//! Ferry's own offsets are JSON objects, whose bytes are never zero.
//!
//! One crash shape is refused although it is a torn write: a frame header cut by a sector that did
//! not reach the disk while a *later* sector of the frame did. The header cannot say how long the
//! frame was, so nothing tells this apart from damage to a frame followed by more frames, and the open
//! fails closed (the error names the byte offset; moving the bytes from there on aside recovers).
//!
//! Anything else is damage Ferry did not cause and cannot explain: the open is refused with
//! [`StoreError::Corrupt`] and the file is left exactly as it was. This includes a frame whose
//! sequence number does not follow its predecessor's (version 2): a copy of an earlier frame appended
//! to the file has valid checksums, but applying it would move offsets back. Replay only reads; the
//! caller truncates a torn tail after the whole file has been checked (or, opening read-only, only
//! reports it).

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::ops::ControlFlow;
use std::path::Path;

use super::format::{
    self, FORMAT_VERSION, FileHeader, FrameHeader, HEADER_LEN, HeaderError, MAX_PAYLOAD_LEN,
    OLDEST_VERSION, PayloadError, StreamError,
};
use crate::error::StoreError;
use crate::store::StoredRecord;
use crate::table::OffsetTable;

/// Read buffer for replay.
const READ_BUFFER: usize = 1 << 20;
/// Frame payloads larger than this are checked and then decoded in two streaming passes instead of
/// being read whole: an import writes all its offsets in one frame, and holding a million offsets'
/// bytes twice (frame and index) would double the memory of every command that opens the store.
pub(super) const STREAM_PAYLOAD: u64 = 8 << 20;
/// The unit a disk writes whole or not at all; see the module docs.
pub(super) const SECTOR: u64 = 512;

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
    /// What the file header says.
    pub header: FileHeader,
    /// The sequence number the next appended frame gets (1 for a version-1 file: its upgrade
    /// numbers frames from 1).
    pub next_seq: u64,
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
    apply_key_write(table, live_bytes, key, value, false)
}

/// [`apply_write`], for a key compaction wrote as canonical when `canonical`
/// ([`OffsetTable::apply_canonical`]).
fn apply_key_write(
    table: &mut OffsetTable,
    live_bytes: u64,
    key: &[u8],
    value: Option<&[u8]>,
    canonical: bool,
) -> u64 {
    let previous = if canonical {
        table.apply_canonical(key, value)
    } else {
        table.apply_sized(key, value)
    };
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
    let header = check_file_header(path, &mut reader, file_len)?;
    let mut table = OffsetTable::default();
    // The file bounds what it can hold: bytes of keys and values, and writes of at least a short key
    // and value each (typical ones are 3 times that).
    let hint = usize::try_from(file_len).unwrap_or(usize::MAX);
    table.reserve_hint(hint / (format::WRITE_OVERHEAD + 24), hint);
    let mut live_bytes = 0u64;
    // The smallest plausible write bounds every count the file claims or suggests.
    let most_writes = u128::from(file_len) / (format::WRITE_OVERHEAD as u128 + 24);
    let compacted = header.compacted;
    // The header of a compacted file says how many offsets it holds: the index is allocated once
    // instead of doubling (see `OffsetTable::reserve_index`).
    let mut sized = compacted.writes > 0;
    if sized {
        let count = u128::from(compacted.writes).min(most_writes);
        table.reserve_index(usize::try_from(count).unwrap_or(0));
    }
    // Writes left that compaction wrote with canonical keys (see `format::Compacted`).
    let mut canonical_left = if compacted.canonical_keys {
        compacted.writes
    } else {
        0
    };
    let scanned = scan_frames(path, header, &mut reader, file_len, |frame, key, value| {
        if let Some((frame_len, writes)) = frame.filter(|_| !sized) {
            sized = true;
            // A file of a build that did not record the count: compacted files are frames of the
            // same shape, so the first one tells how many offsets the file holds.
            let estimate = (file_len as u128 * u128::from(writes) / u128::from(frame_len.max(1)))
                .min(most_writes);
            table.reserve_index(usize::try_from(estimate).unwrap_or(0));
        }
        let canonical = canonical_left > 0;
        canonical_left = canonical_left.saturating_sub(1);
        live_bytes = apply_key_write(&mut table, live_bytes, key, value, canonical);
    })?;
    Ok(Replayed {
        table,
        live_bytes,
        valid_len: scanned.valid_len,
        torn: scanned.torn,
        header,
        next_seq: scanned.next_seq.unwrap_or(1),
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
    // Bounded by `len` in `scan_frames` (no `Take`: large payloads are read twice, by seeking).
    let mut reader = BufReader::with_capacity(READ_BUFFER, file);
    let header = check_file_header(path, &mut reader, len)?;
    let mut records = Vec::new();
    let scanned = scan_frames(path, header, &mut reader, len, |_, key, value| {
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
fn check_file_header(
    path: &Path,
    reader: &mut impl Read,
    file_len: u64,
) -> Result<FileHeader, StoreError> {
    let head_len = file_len.min(HEADER_LEN as u64) as usize;
    let mut head = [0u8; HEADER_LEN];
    reader
        .read_exact(&mut head[..head_len])
        .map_err(|source| StoreError::Io {
            path: path.to_path_buf(),
            op: "read the file header",
            source,
        })?;
    format::check_header(&head[..head_len]).map_err(|e| match e {
        HeaderError::NotAStore(reason) => StoreError::UnsupportedFormat {
            path: path.to_path_buf(),
            reason: format!("it is not a Ferry offset store: {reason}"),
        },
        HeaderError::Version(version) => StoreError::UnsupportedFormat {
            path: path.to_path_buf(),
            reason: format!(
                "it is a Ferry offset store of format version {version}, but this build of Ferry \
                 reads only versions {OLDEST_VERSION} to {FORMAT_VERSION}; open it with the Ferry \
                 release that wrote it (or a newer one)"
            ),
        },
        HeaderError::Damaged { at, reason } => StoreError::Corrupt {
            path: path.to_path_buf(),
            byte_offset: at,
            reason,
        },
    })
}

/// Where a scan of the frames stopped.
struct Scanned {
    /// Length of the valid prefix: header and complete frames.
    valid_len: u64,
    /// The torn final write, if any.
    torn: Option<TornTail>,
    /// The sequence number a frame appended after the valid prefix must carry (version 2).
    next_seq: Option<u64>,
}

/// Reads the frames that follow the header, up to `file_len`, calling `on_write` for every write in
/// file order. `reader` is positioned right after the header. The first write of a frame read whole
/// comes with the frame's length (header and payload) and write count.
fn scan_frames(
    path: &Path,
    file: FileHeader,
    reader: &mut (impl Read + Seek),
    file_len: u64,
    mut on_write: impl FnMut(Option<(u64, u32)>, &[u8], Option<&[u8]>),
) -> Result<Scanned, StoreError> {
    let scan = FrameScan {
        path,
        file,
        file_len,
        frame_header_len: file.frame_header_len(),
    };
    let frame_header_len = scan.frame_header_len;
    let mut next_seq = file.first_seq;
    let mut pos = HEADER_LEN as u64;
    let mut payload = Vec::new();
    let torn = loop {
        let remaining = file_len - pos;
        if remaining == 0 {
            break None;
        }
        let header = match scan.read_header(reader, pos)? {
            ControlFlow::Continue(header) => header,
            ControlFlow::Break(torn) => break Some(torn),
        };
        let following = scan.check_header(&header, pos, next_seq)?;
        let payload_len = header.payload_len as u64;
        let available = remaining - frame_header_len as u64;
        if payload_len > available {
            break Some(scan.torn_at(
                pos,
                format!(
                    "the last frame declares {payload_len} payload bytes but only {available} were written"
                ),
            ));
        }
        let streamed = payload_len > STREAM_PAYLOAD;
        let crc = scan.read_payload_crc(reader, &header, streamed, &mut payload)?;
        if crc != header.payload_crc {
            break Some(scan.checksum_mismatch(pos, payload_len, &payload)?);
        }
        scan.apply_frame(reader, pos, payload_len, streamed, &payload, &mut on_write)?;
        pos += frame_header_len as u64 + payload_len;
        next_seq = following;
    };
    Ok(Scanned {
        valid_len: pos,
        torn,
        next_seq,
    })
}

/// The file a frame scan reads: its path (for errors), header and length.
struct FrameScan<'a> {
    path: &'a Path,
    file: FileHeader,
    file_len: u64,
    frame_header_len: usize,
}

impl FrameScan<'_> {
    /// Turns an I/O error of `op` into the store's error.
    fn io_err(&self, op: &'static str) -> impl Fn(io::Error) -> StoreError + use<'_> {
        let path = self.path;
        move |source: io::Error| StoreError::Io {
            path: path.to_path_buf(),
            op,
            source,
        }
    }

    /// The error for damage at `byte_offset` that is not a torn write.
    fn corrupt(&self, byte_offset: u64, reason: String) -> StoreError {
        StoreError::Corrupt {
            path: self.path.to_path_buf(),
            byte_offset,
            reason,
        }
    }

    /// A torn final write from `pos` to the end of the file.
    fn torn_at(&self, pos: u64, reason: String) -> TornTail {
        TornTail {
            offset: pos,
            dropped: self.file_len - pos,
            reason,
        }
    }

    /// Reads the frame header at `pos`; a short or damaged header followed only by zeros is a torn
    /// write, any other damaged header is corruption.
    fn read_header(
        &self,
        reader: &mut impl Read,
        pos: u64,
    ) -> Result<ControlFlow<TornTail, FrameHeader>, StoreError> {
        let frame_header_len = self.frame_header_len;
        let remaining = self.file_len - pos;
        if remaining < frame_header_len as u64 {
            return Ok(ControlFlow::Break(self.torn_at(
                pos,
                format!("an incomplete frame header ({remaining} of {frame_header_len} bytes)"),
            )));
        }
        let mut header_bytes = [0u8; format::FRAME_HEADER_LEN];
        let header_bytes = &mut header_bytes[..frame_header_len];
        reader
            .read_exact(header_bytes)
            .map_err(self.io_err("read a frame header"))?;
        if let Some(header) = format::decode_frame_header(self.file, header_bytes) {
            return Ok(ControlFlow::Continue(header));
        }
        let after = remaining - frame_header_len as u64;
        if rest_is_zero(reader).map_err(self.io_err("read the end of the file"))? {
            let reason = if header_bytes.iter().all(|b| *b == 0) {
                "a zero-filled tail (the file was extended but the data never reached the disk)"
                    .to_owned()
            } else {
                format!(
                    "a damaged frame header followed only by {after} zero bytes (a write cut short)"
                )
            };
            return Ok(ControlFlow::Break(self.torn_at(pos, reason)));
        }
        Err(self.corrupt(
            pos,
            format!(
                "the frame header checksum does not match, and the {after} bytes after it are not \
                 all zero, so this is not a torn final write"
            ),
        ))
    }

    /// Checks the payload limit and the sequence number of the valid frame header at `pos`; returns
    /// the sequence number the next frame must carry. Checked before the torn-write checks: a frame
    /// out of sequence is never a torn write.
    fn check_header(
        &self,
        header: &FrameHeader,
        pos: u64,
        next_seq: Option<u64>,
    ) -> Result<Option<u64>, StoreError> {
        let payload_len = header.payload_len as u64;
        if payload_len > MAX_PAYLOAD_LEN as u64 {
            return Err(self.corrupt(
                pos,
                format!(
                    "a frame header declares a payload of {payload_len} bytes, more than the \
                     {MAX_PAYLOAD_LEN}-byte limit"
                ),
            ));
        }
        Ok(match (header.seq, next_seq) {
            (Some(seq), Some(expected)) if seq != expected => {
                return Err(self.corrupt(pos, out_of_sequence(pos, seq, expected)));
            }
            (Some(seq), Some(_)) => Some(seq.checked_add(1).ok_or_else(|| {
                self.corrupt(
                    pos,
                    format!("the frame at byte {pos} has sequence number {seq}, the last there is"),
                )
            })?),
            _ => next_seq,
        })
    }

    /// Reads the frame's payload and returns its CRC-32C. A `streamed` payload is only
    /// checksummed, and read whole into `payload` only when the checksum does not match.
    fn read_payload_crc(
        &self,
        reader: &mut (impl Read + Seek),
        header: &FrameHeader,
        streamed: bool,
        payload: &mut Vec<u8>,
    ) -> Result<u32, StoreError> {
        let payload_len = header.payload_len as u64;
        Ok(if streamed {
            // First pass: the checksum only; the writes are decoded once it matched.
            let crc =
                stream_crc(reader, payload_len).map_err(self.io_err("read a frame payload"))?;
            if crc != header.payload_crc {
                // Rare (damage or a torn write): read it whole for the checks below.
                seek_back(reader, payload_len).map_err(self.io_err("read a frame payload"))?;
                payload.clear();
                payload.resize(payload_len as usize, 0);
                reader
                    .read_exact(payload)
                    .map_err(self.io_err("read a frame payload"))?;
            }
            crc
        } else {
            read_payload(reader, payload, payload_len)
                .map_err(self.io_err("read a frame payload"))?;
            crc32c::crc32c(payload)
        })
    }

    /// Decides what a payload checksum mismatch of the frame at `pos` is: a torn write when the
    /// frame ends the file and one of its sectors reads as zeros, corruption otherwise.
    fn checksum_mismatch(
        &self,
        pos: u64,
        payload_len: u64,
        payload: &[u8],
    ) -> Result<TornTail, StoreError> {
        let file_len = self.file_len;
        let payload_start = pos + self.frame_header_len as u64;
        let end = payload_start + payload_len;
        if end == file_len {
            if let Some(zeros) = unwritten_sector(payload, payload_start) {
                return Ok(self.torn_at(
                    pos,
                    format!(
                        "the last frame's payload checksum does not match and its sector at byte \
                         {zeros} reads as zeros (its write was cut short before reaching the disk)"
                    ),
                ));
            }
            return Err(self.corrupt(
                pos,
                format!(
                    "the payload checksum of the last frame, at byte {pos} ({payload_len} payload \
                     bytes, ending exactly at the end of the file), does not match although every \
                     sector of it was written (none reads as zeros), so this is not a torn final \
                     write: the frame was damaged after it was written, and it may hold an \
                     acknowledged flush"
                ),
            ));
        }
        Err(self.corrupt(
            pos,
            format!(
                "the payload checksum of the frame at byte {pos} ({payload_len} payload bytes) does \
                 not match, and {} more bytes follow it, so this is not a torn final write",
                file_len - end
            ),
        ))
    }

    /// Decodes the checked frame at `pos` and calls `on_write` for each of its writes; a
    /// `streamed` payload is decoded while read again, one write at a time.
    fn apply_frame(
        &self,
        reader: &mut (impl Read + Seek),
        pos: u64,
        payload_len: u64,
        streamed: bool,
        payload: &[u8],
        on_write: &mut impl FnMut(Option<(u64, u32)>, &[u8], Option<&[u8]>),
    ) -> Result<(), StoreError> {
        let parse_failed = |e: PayloadError| {
            self.corrupt(
                pos,
                format!(
                    "the frame at byte {pos} has valid checksums but its payload does not parse (at \
                     payload byte {}): {}",
                    e.at, e.reason
                ),
            )
        };
        if streamed {
            // Second pass: decode while reading, holding one write at a time.
            seek_back(reader, payload_len).map_err(self.io_err("read a frame payload"))?;
            let visit = |key: &[u8], value: Option<&[u8]>| on_write(None, key, value);
            format::stream_payload(reader, payload_len, visit).map_err(|e| match e {
                StreamError::Io(source) => self.io_err("read a frame payload")(source),
                StreamError::Payload(e) => parse_failed(e),
            })?;
        } else {
            let writes = format::decode_payload(payload).map_err(parse_failed)?;
            let mut frame = Some((
                self.frame_header_len as u64 + payload_len,
                len32(writes.len()),
            ));
            for (key, value) in writes {
                on_write(frame.take(), key, value);
            }
        }
        Ok(())
    }
}

/// The CRC-32C of the next `len` bytes of `reader`, read in chunks.
fn stream_crc(reader: &mut impl Read, len: u64) -> io::Result<u32> {
    let mut chunk = vec![0u8; 64 * 1024];
    let mut crc = 0;
    let mut left = len;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        reader.read_exact(&mut chunk[..n])?;
        crc = crc32c::crc32c_append(crc, &chunk[..n]);
        left -= n as u64;
    }
    Ok(crc)
}

/// Reads exactly `len` bytes into `buf` (cleared first; `len` is at most [`MAX_PAYLOAD_LEN`]). Reads
/// into the buffer's spare capacity: resizing it first, for `read_exact`, would zero every payload
/// byte before the read overwrites it.
fn read_payload(reader: &mut impl Read, buf: &mut Vec<u8>, len: u64) -> io::Result<()> {
    buf.clear();
    buf.reserve(usize::try_from(len).map_err(io::Error::other)?);
    let read = reader.take(len).read_to_end(buf)?;
    if (read as u64) < len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// Moves `reader` back by `len` bytes (to the start of the payload just read).
fn seek_back(reader: &mut impl Seek, len: u64) -> io::Result<()> {
    let back = i64::try_from(len).map_err(io::Error::other)?;
    reader.seek(SeekFrom::Current(-back)).map(drop)
}

/// A write count as a frame holds it (a u32 in the payload).
fn len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Why a frame's sequence number is refused.
fn out_of_sequence(pos: u64, seq: u64, expected: u64) -> String {
    let what = if seq < expected {
        "it is a copy of an earlier frame (or the file was pieced together from several): \
         applying it would move offsets back to an earlier state"
            .to_owned()
    } else {
        format!(
            "{} frame(s) before it are missing (or the file was pieced together from several)",
            seq - expected
        )
    };
    format!(
        "the frame at byte {pos} has sequence number {seq}, but the frame in this place must have \
         {expected}; {what}"
    )
}

/// The file offset of the first sector, starting at or after `payload_start`, whose bytes in
/// `payload` (which starts at file offset `payload_start`) are all zero: a sector of a torn write
/// that never reached the disk. See the module docs.
pub(super) fn unwritten_sector(payload: &[u8], payload_start: u64) -> Option<u64> {
    let first = payload_start.div_ceil(SECTOR) * SECTOR;
    let end = payload_start + payload.len() as u64;
    (first..end).step_by(SECTOR as usize).find(|&sector| {
        let from = (sector - payload_start) as usize;
        let to = ((sector + SECTOR).min(end) - payload_start) as usize;
        payload[from..to].iter().all(|b| *b == 0)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_zero_sectors_after_the_header_count_as_unwritten() {
        // Payload at file offset 1000: sectors start at 1024 (payload index 24) and 1536 (536).
        let mut payload = vec![7u8; 700];
        assert_eq!(unwritten_sector(&payload, 1000), None);
        payload[..24].fill(0);
        assert_eq!(
            unwritten_sector(&payload, 1000),
            None,
            "shares a sector with the header"
        );
        payload[536..].fill(0);
        assert_eq!(
            unwritten_sector(&payload, 1000),
            Some(1536),
            "the last, partial sector"
        );
        payload[536..].fill(7);
        payload[24..536].fill(0);
        assert_eq!(
            unwritten_sector(&payload, 1000),
            Some(1024),
            "a whole sector"
        );
        payload[300] = 1;
        assert_eq!(
            unwritten_sector(&payload, 1000),
            None,
            "one byte was written"
        );
    }
}
