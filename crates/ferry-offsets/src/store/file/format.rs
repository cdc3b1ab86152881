//! The on-disk format of the file store, version 2 (written) and version 1 (still read): pure
//! encoding and decoding, no I/O.
//!
//! ```text
//! file      = header frame*
//! header    = magic "FERRYOFS" (8) | version u16 LE (2) | rest (18) | crc32c u32 LE (4)
//!             32 bytes in every version; the CRC covers the first 28 bytes, and is checked before
//!             the version is believed (a damaged version field is damage, not another release).
//!             version 1: rest = reserved, zero (18)
//!             version 2: rest = first_seq u64 LE (8) | compacted u64 LE (8) | flags u16 LE (2)
//!             compacted = how many writes the file starts with that compaction wrote: one per live
//!             offset, each a distinct partition (0 in a new store, and in files of builds before
//!             these fields, which wrote zeros here and ignore them). flags bit 0 (CANONICAL_KEYS):
//!             every one of those writes' keys is canonical (Ferry's bytes, fields sorted), so a
//!             replay may index them without reading their partitions; other bits are zero, and
//!             ignored when read.
//! frame v2  = payload_len u32 LE | payload_crc u32 LE | seq u64 LE | header_crc u32 LE | payload
//!             header_crc = crc32c of the first 16 bytes. The first frame's seq is the header's
//!             first_seq, every later frame's is its predecessor's + 1.
//! frame v1  = payload_len u32 LE | payload_crc u32 LE | header_crc u32 LE | payload
//!             header_crc = crc32c of the first 8 bytes.
//!             In both: payload_crc = crc32c of the payload; payload_len <= 1 GiB.
//! payload   = count u32 LE | write{count}
//! write     = key_len u32 LE | key | value_len u32 LE | value
//!             value_len = 0xFFFF_FFFF marks a tombstone (no value bytes follow).
//! ```
//!
//! One frame is one `set` batch: the unit of atomicity. A frame is valid only if both its CRCs match
//! and its payload parses completely, so a frame is either applied whole or not at all. Compaction
//! writes the live offsets as ordinary frames (of at most [`COMPACT_FRAME_WRITES`] writes each).
//! All integers are little-endian.
//!
//! The sequence number (version 2) makes every frame's place in the log part of the frame: a copy of
//! an earlier frame appended to the file, or a frame lost from the middle, breaks the chain and the
//! open is refused, instead of silently moving offsets back. Sequence numbers never repeat within a
//! store's life: compaction numbers the new file's frames after every number the old file used (see
//! [`compaction`](super::compaction)).
//!
//! A version-1 file is read as it is. A writable open upgrades it at once by compacting it into a
//! version-2 file (the ordinary crash-safe compaction; see [`FileStore::open`](super::FileStore::open)),
//! so frames are only ever appended to version-2 files; a read-only open leaves it version 1.

use std::io::{self, Read, Write};

use crate::store::{OffsetWrite, WriteBatch};

/// The first 8 bytes of every store file.
pub(super) const MAGIC: [u8; 8] = *b"FERRYOFS";
/// The format version this build writes.
pub(super) const FORMAT_VERSION: u16 = 2;
/// The oldest format version this build reads.
pub(super) const OLDEST_VERSION: u16 = 1;
/// Length of the file header.
pub(super) const HEADER_LEN: usize = 32;
/// Length of a version-2 frame header.
pub(super) const FRAME_HEADER_LEN: usize = 20;
/// Length of a version-1 frame header.
pub(super) const FRAME_HEADER_LEN_V1: usize = 12;
/// The largest payload a frame may declare; anything larger is damage, not data.
pub(super) const MAX_PAYLOAD_LEN: usize = 1 << 30;
/// `value_len` of a tombstone.
const TOMBSTONE: u32 = u32::MAX;
/// Bytes a write adds to a payload besides its key and value (the two lengths).
pub(super) const WRITE_OVERHEAD: usize = 8;
/// Bytes a frame adds besides its writes (frame header and count).
pub(super) const FRAME_OVERHEAD: usize = FRAME_HEADER_LEN + 4;
/// Writes per frame when compaction rewrites the live offsets.
pub(super) const COMPACT_FRAME_WRITES: u32 = 65_536;
/// Payload bytes after which compaction starts a new frame.
pub(super) const COMPACT_FRAME_BYTES: usize = 16 << 20;
/// How many of the 8 magic bytes may differ for the file to count as a damaged Ferry store rather
/// than another program's file.
const MAGIC_DAMAGE_MAX: usize = 2;

/// Where Java serialization streams start (Kafka Connect's standalone offsets file).
pub(super) const JAVA_SERIALIZATION_MAGIC: [u8; 2] = [0xAC, 0xED];

/// `flags` bit 0 of a version-2 header: the compacted writes' keys are all canonical.
const CANONICAL_KEYS: u16 = 1;

/// What a version-2 header says about the writes compaction put at the start of the file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Compacted {
    /// How many writes the file starts with that compaction wrote (one per live offset, each a
    /// distinct partition); 0 when the file was not made by compaction, or by a build before this
    /// field.
    pub writes: u64,
    /// Every one of those writes' keys is canonical: the replay may index them as they are
    /// ([`OffsetTable::apply_canonical`](crate::table::OffsetTable::apply_canonical)).
    pub canonical_keys: bool,
}

/// The file header of a new version-2 store whose first frame will carry `first_seq`, starting with
/// the writes `compacted` describes.
pub(super) fn encode_header(first_seq: u64, compacted: Compacted) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[..8].copy_from_slice(&MAGIC);
    header[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    header[10..18].copy_from_slice(&first_seq.to_le_bytes());
    header[18..26].copy_from_slice(&compacted.writes.to_le_bytes());
    let flags = if compacted.canonical_keys {
        CANONICAL_KEYS
    } else {
        0
    };
    header[26..28].copy_from_slice(&flags.to_le_bytes());
    let crc = crc32c::crc32c(&header[..HEADER_LEN - 4]);
    header[HEADER_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
    header
}

/// What a valid file header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileHeader {
    /// The format version ([`OLDEST_VERSION`]..=[`FORMAT_VERSION`]).
    pub version: u16,
    /// The sequence number of the first frame (version 2); `None` for version 1.
    pub first_seq: Option<u64>,
    /// The writes compaction put at the start of the file (none for version 1).
    pub compacted: Compacted,
}

impl FileHeader {
    /// Length of a frame header in this file.
    pub(super) fn frame_header_len(self) -> usize {
        if self.version == 1 {
            FRAME_HEADER_LEN_V1
        } else {
            FRAME_HEADER_LEN
        }
    }
}

/// Why a file header was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum HeaderError {
    /// Not a Ferry store at all (another program's file).
    NotAStore(String),
    /// A Ferry store of another format version (its header checksum matches).
    Version(u16),
    /// A Ferry store whose header is damaged, from byte `at` on.
    Damaged {
        /// Where the damage starts.
        at: u64,
        /// What was found.
        reason: String,
    },
}

/// Checks the file header. `bytes` holds the first `min(file length, HEADER_LEN)` bytes.
///
/// Order matters: the magic says whose file it is (a few damaged magic bytes are damage, named by
/// offset; a different magic is another program's file), then the checksum says whether the header
/// can be believed, and only then is the version read.
pub(super) fn check_header(bytes: &[u8]) -> Result<FileHeader, HeaderError> {
    if bytes.starts_with(&JAVA_SERIALIZATION_MAGIC) {
        return Err(HeaderError::NotAStore(
            "it starts with the Java serialization magic 0xACED, so it is most likely a Kafka Connect \
             standalone offsets file (offset.storage.file.filename). Ferry cannot read that format in \
             place; give Ferry's offset store a new file name (its offsets would have to be re-entered \
             with `ferry offsets set`)"
                .to_owned(),
        ));
    }
    let magic_len = bytes.len().min(MAGIC.len());
    let differing: Vec<usize> = (0..magic_len).filter(|&i| bytes[i] != MAGIC[i]).collect();
    if let Some(&first) = differing.first() {
        if magic_len < MAGIC.len() || differing.len() > MAGIC_DAMAGE_MAX {
            return Err(HeaderError::NotAStore(format!(
                "it does not start with Ferry's magic bytes \"FERRYOFS\" (it starts with {}, \
                 differing from byte {first} on)",
                hex_preview(bytes)
            )));
        }
        let found: Vec<String> = differing
            .iter()
            .map(|&i| format!("byte {i} is {:#04x} instead of {:#04x}", bytes[i], MAGIC[i]))
            .collect();
        return Err(HeaderError::Damaged {
            at: first as u64,
            reason: format!(
                "the magic bytes \"FERRYOFS\" that start every store file are damaged ({}); the \
                 other {} magic bytes match, so this is a damaged Ferry store, not another program's \
                 file",
                found.join(", "),
                MAGIC.len() - differing.len()
            ),
        });
    }
    if bytes.len() < HEADER_LEN {
        return Err(HeaderError::Damaged {
            at: bytes.len() as u64,
            reason: format!(
                "the file is {} bytes long, shorter than the {HEADER_LEN}-byte file header",
                bytes.len()
            ),
        });
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    let stored = read_u32(bytes, HEADER_LEN - 4);
    let computed = crc32c::crc32c(&bytes[..HEADER_LEN - 4]);
    if stored != computed {
        return Err(HeaderError::Damaged {
            at: 0,
            reason: format!(
                "file header checksum mismatch (stored {stored:#010x}, computed {computed:#010x}), so \
                 none of the header can be trusted (its version field reads {version})"
            ),
        });
    }
    match version {
        1 => Ok(FileHeader {
            version,
            first_seq: None,
            compacted: Compacted::default(),
        }),
        FORMAT_VERSION => Ok(FileHeader {
            version,
            first_seq: Some(read_u64(bytes, 10)),
            compacted: Compacted {
                writes: read_u64(bytes, 18),
                canonical_keys: u16::from_le_bytes([bytes[26], bytes[27]]) & CANONICAL_KEYS != 0,
            },
        }),
        other => Err(HeaderError::Version(other)),
    }
}

fn hex_preview(bytes: &[u8]) -> String {
    let shown: Vec<String> = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("0x{}", shown.concat())
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

fn read_u64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// A batch does not fit one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FrameTooLarge {
    /// Encoded payload bytes counted so far (at least the limit).
    pub bytes: u64,
}

/// Builds one version-2 frame in memory: push writes, then [`finish`](Self::finish).
#[derive(Debug)]
pub(super) struct FrameBuilder {
    buf: Vec<u8>,
    count: u32,
}

impl FrameBuilder {
    /// An empty frame with room for `capacity` payload bytes.
    pub(super) fn with_capacity(capacity: usize) -> Self {
        let mut buf = Vec::with_capacity(FRAME_OVERHEAD + capacity);
        buf.resize(FRAME_OVERHEAD, 0);
        Self { buf, count: 0 }
    }

    /// Appends one write (`None` = tombstone).
    pub(super) fn push(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), FrameTooLarge> {
        let added = WRITE_OVERHEAD + key.len() + value.map_or(0, <[u8]>::len);
        let payload = self.payload_len() + added;
        if payload > MAX_PAYLOAD_LEN {
            return Err(FrameTooLarge {
                bytes: payload as u64,
            });
        }
        // Both lengths fit a u32: each is below MAX_PAYLOAD_LEN (1 GiB) < u32::MAX.
        self.buf
            .extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(key);
        match value {
            Some(value) => {
                self.buf
                    .extend_from_slice(&(value.len() as u32).to_le_bytes());
                self.buf.extend_from_slice(value);
            }
            None => self.buf.extend_from_slice(&TOMBSTONE.to_le_bytes()),
        }
        self.count += 1;
        Ok(())
    }

    /// Writes pushed so far.
    pub(super) fn count(&self) -> u32 {
        self.count
    }

    /// Payload bytes so far (count included).
    pub(super) fn payload_len(&self) -> usize {
        self.buf.len() - FRAME_HEADER_LEN
    }

    /// The complete frame, header and payload, with sequence number `seq` (which
    /// [`stamp_seq`] may change later).
    pub(super) fn finish(mut self, seq: u64) -> Vec<u8> {
        self.buf[FRAME_HEADER_LEN..FRAME_OVERHEAD].copy_from_slice(&self.count.to_le_bytes());
        let payload_len = self.payload_len() as u32;
        let payload_crc = crc32c::crc32c(&self.buf[FRAME_HEADER_LEN..]);
        self.buf[0..4].copy_from_slice(&payload_len.to_le_bytes());
        self.buf[4..8].copy_from_slice(&payload_crc.to_le_bytes());
        stamp_seq(&mut self.buf, seq);
        self.buf
    }
}

/// Sets the sequence number of the version-2 frame (or frame header) in `frame`, and its header CRC.
pub(super) fn stamp_seq(frame: &mut [u8], seq: u64) {
    frame[8..16].copy_from_slice(&seq.to_le_bytes());
    let header_crc = crc32c::crc32c(&frame[0..16]);
    frame[16..20].copy_from_slice(&header_crc.to_le_bytes());
}

/// Encodes one `set` batch as one frame. Its sequence number is set later, with [`stamp_seq`], when
/// its place in the file is known.
pub(super) fn encode_batch(batch: &[OffsetWrite]) -> Result<Vec<u8>, FrameTooLarge> {
    let payload: usize = batch
        .iter()
        .map(|w| WRITE_OVERHEAD + w.key.len() + w.value.as_ref().map_or(0, Vec::len))
        .fold(4, usize::saturating_add);
    if payload > MAX_PAYLOAD_LEN {
        return Err(FrameTooLarge {
            bytes: payload as u64,
        });
    }
    let mut frame = FrameBuilder::with_capacity(payload);
    for write in batch {
        frame.push(&write.key, write.value.as_deref())?;
    }
    Ok(frame.finish(0))
}

/// The payload length of `batch` as one frame (count included), checked against the frame limit.
pub(super) fn batch_payload_len(batch: &WriteBatch) -> Result<u32, FrameTooLarge> {
    let payload = batch
        .iter()
        .map(|(key, value)| WRITE_OVERHEAD + key.len() + value.map_or(0, <[u8]>::len))
        .fold(4, usize::saturating_add);
    match u32::try_from(payload) {
        Ok(len) if payload <= MAX_PAYLOAD_LEN => Ok(len),
        _ => Err(FrameTooLarge {
            bytes: payload as u64,
        }),
    }
}

/// Writes the payload of `batch` to `out`: exactly the bytes [`encode_batch`] puts after the frame
/// header, for a batch that [`batch_payload_len`] accepted (so the count and every length fit a u32).
pub(super) fn write_payload(batch: &WriteBatch, out: &mut impl Write) -> io::Result<()> {
    out.write_all(&(batch.len() as u32).to_le_bytes())?;
    for (key, value) in batch.iter() {
        out.write_all(&(key.len() as u32).to_le_bytes())?;
        out.write_all(key)?;
        match value {
            Some(value) => {
                out.write_all(&(value.len() as u32).to_le_bytes())?;
                out.write_all(value)?;
            }
            None => out.write_all(&TOMBSTONE.to_le_bytes())?,
        }
    }
    Ok(())
}

/// The version-2 frame header of a payload of `payload_len` bytes with CRC `payload_crc`.
pub(super) fn frame_header(payload_len: u32, payload_crc: u32, seq: u64) -> [u8; FRAME_HEADER_LEN] {
    let mut header = [0u8; FRAME_HEADER_LEN];
    header[0..4].copy_from_slice(&payload_len.to_le_bytes());
    header[4..8].copy_from_slice(&payload_crc.to_le_bytes());
    stamp_seq(&mut header, seq);
    header
}

/// The CRC32C of what [`write_payload`] writes for `batch`, computed without holding the payload.
pub(super) fn payload_crc(batch: &WriteBatch) -> u32 {
    let mut crc = io::BufWriter::with_capacity(64 * 1024, Crc::default());
    // Writing to a `Crc` cannot fail.
    let _ = write_payload(batch, &mut crc).and_then(|()| crc.flush());
    crc.get_ref().value
}

/// A CRC32C of everything written to it (as a [`Write`]) or read through it (as a [`Read`] over
/// `inner`).
#[derive(Debug, Default)]
pub(super) struct Crc<R = ()> {
    /// The CRC so far.
    pub value: u32,
    inner: R,
}

impl<R> Crc<R> {
    /// Reads `inner`, checksumming what is read.
    pub(super) fn reading(inner: R) -> Self {
        Self { value: 0, inner }
    }
}

impl Write for Crc {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.value = crc32c::crc32c_append(self.value, buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<R: Read> Read for Crc<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.value = crc32c::crc32c_append(self.value, &buf[..n]);
        Ok(n)
    }
}

/// A frame header whose CRC matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FrameHeader {
    /// Payload bytes that follow the header.
    pub payload_len: u32,
    /// The payload's CRC32C.
    pub payload_crc: u32,
    /// The frame's sequence number; `None` in a version-1 file.
    pub seq: Option<u64>,
}

/// Parses a frame header of `file`'s version (`bytes` is [`FileHeader::frame_header_len`] long);
/// `None` when its CRC does not match.
pub(super) fn decode_frame_header(file: FileHeader, bytes: &[u8]) -> Option<FrameHeader> {
    let crc_at = file.frame_header_len() - 4;
    let stored = read_u32(bytes, crc_at);
    (crc32c::crc32c(&bytes[..crc_at]) == stored).then(|| FrameHeader {
        payload_len: read_u32(bytes, 0),
        payload_crc: read_u32(bytes, 4),
        seq: (file.version != 1).then(|| read_u64(bytes, 8)),
    })
}

/// One decoded write: key, and value or `None` for a tombstone.
pub(super) type DecodedWrite<'a> = (&'a [u8], Option<&'a [u8]>);

/// A payload that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PayloadError {
    /// Offset inside the payload where parsing failed.
    pub at: usize,
    /// What was wrong.
    pub reason: String,
}

/// Parses a payload completely; every byte must belong to a write.
pub(super) fn decode_payload(payload: &[u8]) -> Result<Vec<DecodedWrite<'_>>, PayloadError> {
    let mut at = 0usize;
    let take_u32 = |at: &mut usize, what: &str| -> Result<u32, PayloadError> {
        if payload.len() - *at < 4 {
            return Err(PayloadError {
                at: *at,
                reason: format!("the payload ends inside the {what}"),
            });
        }
        let v = read_u32(payload, *at);
        *at += 4;
        Ok(v)
    };
    let take_bytes = |at: &mut usize, len: u32, what: &str| -> Result<&[u8], PayloadError> {
        let len = len as usize;
        if payload.len() - *at < len {
            return Err(PayloadError {
                at: *at,
                reason: format!(
                    "the {what} is declared as {len} bytes but only {} remain",
                    payload.len() - *at
                ),
            });
        }
        let bytes = &payload[*at..*at + len];
        *at += len;
        Ok(bytes)
    };
    let count = take_u32(&mut at, "write count")?;
    // Each write takes at least WRITE_OVERHEAD bytes, which bounds a believable count.
    let max_count = (payload.len() - at) / WRITE_OVERHEAD;
    if count as usize > max_count {
        return Err(PayloadError {
            at: 0,
            reason: format!(
                "the write count {count} cannot fit in {} payload bytes",
                payload.len()
            ),
        });
    }
    let mut writes = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let key_len = take_u32(&mut at, "key length")?;
        let key = take_bytes(&mut at, key_len, "key")?;
        let value_len = take_u32(&mut at, "value length")?;
        let value = match value_len {
            TOMBSTONE => None,
            len => Some(take_bytes(&mut at, len, "value")?),
        };
        writes.push((key, value));
    }
    if at != payload.len() {
        return Err(PayloadError {
            at,
            reason: format!(
                "{} bytes follow the last of the {count} writes",
                payload.len() - at
            ),
        });
    }
    Ok(writes)
}

/// Why [`stream_payload`] stopped.
#[derive(Debug)]
pub(super) enum StreamError {
    /// Reading the payload failed.
    Io(std::io::Error),
    /// The payload does not parse, as [`decode_payload`] would report.
    Payload(PayloadError),
}

/// [`decode_payload`] for a payload of `len` bytes read from `reader`, write by write, so a frame of
/// a million writes (an import) is never held in memory whole. Calls `on_write` for each write as it
/// is read, so a payload that fails part-way has had its first writes visited: call it only on a
/// payload whose checksum matched, and discard what was built from it on error.
pub(super) fn stream_payload<R: std::io::Read>(
    reader: &mut R,
    len: u64,
    mut on_write: impl FnMut(&[u8], Option<&[u8]>),
) -> Result<(), StreamError> {
    let mut payload = StreamedPayload {
        reader,
        len,
        at: 0,
        word: [0; 4],
    };
    let count = payload.u32("write count")?;
    if u64::from(count) > (len - payload.at) / WRITE_OVERHEAD as u64 {
        return Err(payload_error(
            0,
            format!("the write count {count} cannot fit in {len} payload bytes"),
        ));
    }
    let (mut key, mut value) = (Vec::new(), Vec::new());
    for _ in 0..count {
        let key_len = payload.u32("key length")?;
        payload.bytes(&mut key, key_len, "key")?;
        match payload.u32("value length")? {
            TOMBSTONE => on_write(&key, None),
            value_len => {
                payload.bytes(&mut value, value_len, "value")?;
                on_write(&key, Some(&value));
            }
        }
    }
    if payload.at != len {
        return Err(payload_error(
            payload.at,
            format!(
                "{} bytes follow the last of the {count} writes",
                len - payload.at
            ),
        ));
    }
    Ok(())
}

fn payload_error(at: u64, reason: String) -> StreamError {
    StreamError::Payload(PayloadError {
        at: usize::try_from(at).unwrap_or(usize::MAX),
        reason,
    })
}

/// A payload being read by [`stream_payload`]: `at` of `len` bytes read so far.
struct StreamedPayload<'r, R> {
    reader: &'r mut R,
    len: u64,
    at: u64,
    word: [u8; 4],
}

impl<R: std::io::Read> StreamedPayload<'_, R> {
    fn u32(&mut self, what: &str) -> Result<u32, StreamError> {
        if self.len - self.at < 4 {
            return Err(payload_error(
                self.at,
                format!("the payload ends inside the {what}"),
            ));
        }
        self.reader
            .read_exact(&mut self.word)
            .map_err(StreamError::Io)?;
        self.at += 4;
        Ok(u32::from_le_bytes(self.word))
    }

    fn bytes(&mut self, buf: &mut Vec<u8>, n: u32, what: &str) -> Result<(), StreamError> {
        let n = u64::from(n);
        if self.len - self.at < n {
            return Err(payload_error(
                self.at,
                format!(
                    "the {what} is declared as {n} bytes but only {} remain",
                    self.len - self.at
                ),
            ));
        }
        buf.clear();
        buf.resize(n as usize, 0);
        self.reader.read_exact(buf).map_err(StreamError::Io)?;
        self.at += n;
        Ok(())
    }
}

/// The bytes one live offset takes in a compacted file, used to estimate live bytes.
pub(super) fn live_size(key_len: usize, value_len: usize) -> u64 {
    (WRITE_OVERHEAD + key_len + value_len) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str, value: &str) -> OffsetWrite {
        OffsetWrite {
            key: key.as_bytes().to_vec(),
            value: Some(value.as_bytes().to_vec()),
        }
    }

    const V2: FileHeader = FileHeader {
        version: 2,
        first_seq: Some(1),
        compacted: Compacted {
            writes: 0,
            canonical_keys: false,
        },
    };

    fn header_of(frame: &[u8]) -> FrameHeader {
        decode_frame_header(V2, &frame[..FRAME_HEADER_LEN])
            .unwrap_or_else(|| panic!("header CRC must match"))
    }

    #[test]
    fn frame_round_trip() {
        let batch = vec![
            put("[\"c\",{\"p\":1}]", "{\"position\":10}"),
            OffsetWrite {
                key: b"k".to_vec(),
                value: None,
            },
            put("", ""),
            OffsetWrite {
                key: vec![0xff; 300],
                value: Some(vec![0; 70_000]),
            },
        ];
        let frame = encode_batch(&batch).unwrap_or_else(|e| panic!("{e:?}"));
        let header = header_of(&frame);
        assert_eq!(header.seq, Some(0));
        assert_eq!(header.payload_len as usize, frame.len() - FRAME_HEADER_LEN);
        let payload = &frame[FRAME_HEADER_LEN..];
        assert_eq!(header.payload_crc, crc32c::crc32c(payload));
        let decoded = decode_payload(payload).unwrap_or_else(|e| panic!("{e:?}"));
        let expected: Vec<DecodedWrite<'_>> = batch
            .iter()
            .map(|w| (&w.key[..], w.value.as_deref()))
            .collect();
        assert_eq!(decoded, expected);
    }

    #[test]
    fn a_streamed_batch_frame_is_byte_identical_to_an_encoded_one() {
        let writes = vec![
            put("[\"c\",{\"p\":1}]", "{\"position\":10}"),
            OffsetWrite {
                key: b"k".to_vec(),
                value: None,
            },
            put("", ""),
            OffsetWrite {
                key: vec![0xff; 300],
                value: Some(vec![7; 70_000]),
            },
        ];
        let batch = WriteBatch::from_writes(&writes).unwrap_or_else(|e| panic!("{e}"));
        let mut encoded = encode_batch(&writes).unwrap_or_else(|e| panic!("{e:?}"));
        stamp_seq(&mut encoded, 9);
        let len = batch_payload_len(&batch).unwrap_or_else(|e| panic!("{e:?}"));
        let mut streamed = frame_header(len, payload_crc(&batch), 9).to_vec();
        write_payload(&batch, &mut streamed).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(streamed, encoded, "the same bytes on disk");
        assert_eq!(len as usize, encoded.len() - FRAME_HEADER_LEN);
        let mut reader = Crc::reading(&encoded[FRAME_HEADER_LEN..]);
        let mut read = Vec::new();
        reader
            .read_to_end(&mut read)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(reader.value, header_of(&encoded).payload_crc);
        assert_eq!(
            batch_payload_len(&WriteBatch::default()),
            Ok(4),
            "an empty batch is its count"
        );
    }

    #[test]
    fn empty_value_is_not_a_tombstone() {
        let frame = encode_batch(&[put("k", "")]).unwrap_or_else(|e| panic!("{e:?}"));
        let decoded =
            decode_payload(&frame[FRAME_HEADER_LEN..]).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(decoded, vec![(&b"k"[..], Some(&b""[..]))]);
    }

    #[test]
    fn builder_and_encode_batch_agree() {
        let batch = vec![
            put("a", "1"),
            OffsetWrite {
                key: b"b".to_vec(),
                value: None,
            },
        ];
        let mut builder = FrameBuilder::with_capacity(0);
        for w in &batch {
            builder
                .push(&w.key, w.value.as_deref())
                .unwrap_or_else(|e| panic!("{e:?}"));
        }
        assert_eq!(builder.count(), 2);
        assert_eq!(Ok(builder.finish(0)), encode_batch(&batch));
    }

    #[test]
    fn damaged_frame_header_is_detected() {
        let mut frame = encode_batch(&[put("a", "1")]).unwrap_or_else(|e| panic!("{e:?}"));
        stamp_seq(&mut frame, 41);
        assert_eq!(
            header_of(&frame).seq,
            Some(41),
            "the seq is stamped, CRC and all"
        );
        for bit in [0, 8 * 8 + 3] {
            let mut damaged = frame.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(
                decode_frame_header(V2, &damaged[..FRAME_HEADER_LEN]),
                None,
                "bit {bit} (length or seq) is covered by the header CRC"
            );
        }
        assert_eq!(
            decode_frame_header(V2, &[0; FRAME_HEADER_LEN]),
            None,
            "zeros are not a header"
        );
    }

    #[test]
    fn malformed_payloads_are_refused() {
        let frame = encode_batch(&[put("key", "value")]).unwrap_or_else(|e| panic!("{e:?}"));
        let payload = &frame[FRAME_HEADER_LEN..];
        assert!(
            decode_payload(&payload[..payload.len() - 1]).is_err(),
            "truncated value"
        );
        assert!(
            decode_payload(&payload[..6]).is_err(),
            "truncated key length"
        );
        assert!(decode_payload(&[]).is_err(), "no count");
        let mut trailing = payload.to_vec();
        trailing.push(0);
        assert!(decode_payload(&trailing).is_err(), "trailing byte");
        let mut huge_count = payload.to_vec();
        huge_count[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_payload(&huge_count).is_err(), "absurd count");
        assert_eq!(
            decode_payload(&0u32.to_le_bytes()),
            Ok(vec![]),
            "an empty batch parses"
        );
    }

    #[test]
    fn header_checks() {
        let header = encode_header(7, Compacted::default());
        assert_eq!(
            check_header(&header),
            Ok(FileHeader {
                version: 2,
                first_seq: Some(7),
                compacted: Compacted::default(),
            })
        );
        assert!(
            matches!(check_header(&[0xAC, 0xED, 0x00, 0x05]), Err(HeaderError::NotAStore(r)) if r.contains("Kafka Connect"))
        );
        assert!(matches!(
            check_header(b"hello world, not a store at all!"),
            Err(HeaderError::NotAStore(_))
        ));
        assert!(matches!(
            check_header(&header[..20]),
            Err(HeaderError::Damaged { at: 20, .. })
        ));
        let mut v3 = header;
        v3[8] = 3;
        let crc = crc32c::crc32c(&v3[..HEADER_LEN - 4]);
        v3[HEADER_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(check_header(&v3), Err(HeaderError::Version(3)));
        let mut flipped_version = header;
        flipped_version[9] ^= 0x10;
        assert!(
            matches!(check_header(&flipped_version), Err(HeaderError::Damaged { at: 0, reason }) if reason.contains("checksum")),
            "a damaged version field is damage, not another release"
        );
        let mut bad_crc = header;
        bad_crc[20] = 1;
        assert!(matches!(
            check_header(&bad_crc),
            Err(HeaderError::Damaged { at: 0, .. })
        ));
        let mut bad_magic = header;
        bad_magic[5] ^= 0x04;
        assert!(
            matches!(check_header(&bad_magic), Err(HeaderError::Damaged { at: 5, reason }) if reason.contains("byte 5")),
            "a damaged magic byte is named by its offset"
        );
        let mut v1 = [0u8; HEADER_LEN];
        v1[..8].copy_from_slice(&MAGIC);
        v1[8] = 1;
        let crc = crc32c::crc32c(&v1[..HEADER_LEN - 4]);
        v1[HEADER_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            check_header(&v1),
            Ok(FileHeader {
                version: 1,
                first_seq: None,
                compacted: Compacted::default(),
            })
        );
    }

    #[test]
    fn a_header_says_how_many_compacted_writes_start_the_file_and_whether_their_keys_are_canonical()
    {
        for compacted in [
            Compacted {
                writes: 1_000_000,
                canonical_keys: true,
            },
            Compacted {
                writes: 3,
                canonical_keys: false,
            },
        ] {
            let header = encode_header(9, compacted);
            assert_eq!(check_header(&header).map(|h| h.compacted), Ok(compacted));
        }
        // A version-2 header of a build before these fields: zeros there, so no compacted writes.
        let mut old = [0u8; HEADER_LEN];
        old[..8].copy_from_slice(&MAGIC);
        old[8] = 2;
        old[10] = 5;
        let crc = crc32c::crc32c(&old[..HEADER_LEN - 4]);
        old[HEADER_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            encode_header(5, Compacted::default()),
            old,
            "same bytes as before"
        );
        // Flag bits this build does not know are ignored, not refused (a later build may set them).
        let mut later = encode_header(
            5,
            Compacted {
                writes: 2,
                canonical_keys: false,
            },
        );
        later[26] = 0b10;
        let crc = crc32c::crc32c(&later[..HEADER_LEN - 4]);
        later[HEADER_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            check_header(&later).map(|h| h.compacted),
            Ok(Compacted {
                writes: 2,
                canonical_keys: false
            })
        );
    }

    #[test]
    fn streaming_decodes_what_decode_payload_decodes() {
        let batch: Vec<OffsetWrite> = (0..50u8)
            .map(|i| OffsetWrite {
                key: vec![i; usize::from(i)],
                value: (i % 3 != 0).then(|| vec![i; usize::from(i) * 2]),
            })
            .collect();
        let frame = encode_batch(&batch).unwrap_or_else(|e| panic!("{e:?}"));
        let payload = &frame[FRAME_HEADER_LEN..];
        let stream = |payload: &[u8]| {
            let mut writes = Vec::new();
            let result = stream_payload(&mut &payload[..], payload.len() as u64, |k, v| {
                writes.push((k.to_vec(), v.map(<[u8]>::to_vec)));
            });
            result.map(|()| writes)
        };
        let expected: Vec<_> = decode_payload(payload)
            .unwrap_or_else(|e| panic!("{e:?}"))
            .into_iter()
            .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
            .collect();
        assert_eq!(
            stream(payload).unwrap_or_else(|e| panic!("{e:?}")),
            expected
        );
        let mut trailing = payload.to_vec();
        trailing.push(0);
        for bad in [
            &payload[..payload.len() - 1],
            &payload[..6],
            &[],
            &trailing[..],
        ] {
            match (stream(bad), decode_payload(bad)) {
                (Err(StreamError::Payload(s)), Err(d)) => assert_eq!(s, d),
                (s, d) => panic!("stream {s:?}, decode {d:?}"),
            }
        }
    }
}
