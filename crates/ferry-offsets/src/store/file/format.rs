//! The on-disk format of the file store, version 1: pure encoding and decoding, no I/O.
//!
//! ```text
//! file    = header frame*
//! header  = magic "FERRYOFS" (8) | version u16 LE = 1 (2) | reserved, zero (18) | crc32c u32 LE (4)
//!           32 bytes; the CRC covers the first 28 bytes. Version-1 readers ignore the reserved bytes
//!           (they are still covered by the CRC); a change of meaning gets a new version number.
//! frame   = payload_len u32 LE | payload_crc u32 LE | header_crc u32 LE | payload
//!           header_crc = crc32c of the first 8 bytes; payload_crc = crc32c of the payload;
//!           payload_len <= 1 GiB.
//! payload = count u32 LE | write{count}
//! write   = key_len u32 LE | key | value_len u32 LE | value
//!           value_len = 0xFFFF_FFFF marks a tombstone (no value bytes follow).
//! ```
//!
//! One frame is one `set` batch: the unit of atomicity. A frame is valid only if both its CRCs match
//! and its payload parses completely, so a frame is either applied whole or not at all. Compaction
//! writes the live offsets as ordinary frames (of at most [`COMPACT_FRAME_WRITES`] writes each).
//! All integers are little-endian.

use crate::store::OffsetWrite;

/// The first 8 bytes of every store file.
pub(super) const MAGIC: [u8; 8] = *b"FERRYOFS";
/// The format version this build writes and reads.
pub(super) const FORMAT_VERSION: u16 = 1;
/// Length of the file header.
pub(super) const HEADER_LEN: usize = 32;
/// Length of a frame header.
pub(super) const FRAME_HEADER_LEN: usize = 12;
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

/// Where Java serialization streams start (Kafka Connect's standalone offsets file).
pub(super) const JAVA_SERIALIZATION_MAGIC: [u8; 2] = [0xAC, 0xED];

/// The file header of a new store.
pub(super) fn encode_header() -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[..8].copy_from_slice(&MAGIC);
    header[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    let crc = crc32c::crc32c(&header[..HEADER_LEN - 4]);
    header[HEADER_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
    header
}

/// Why a file header was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum HeaderError {
    /// Not a Ferry store at all (another program's file).
    NotAStore(String),
    /// A Ferry store of another format version.
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
pub(super) fn check_header(bytes: &[u8]) -> Result<(), HeaderError> {
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
    if bytes[..magic_len] != MAGIC[..magic_len] {
        return Err(HeaderError::NotAStore(format!(
            "it does not start with Ferry's magic bytes \"FERRYOFS\" (it starts with {})",
            hex_preview(bytes)
        )));
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
    if version != FORMAT_VERSION {
        return Err(HeaderError::Version(version));
    }
    let stored = read_u32(bytes, HEADER_LEN - 4);
    let computed = crc32c::crc32c(&bytes[..HEADER_LEN - 4]);
    if stored != computed {
        return Err(HeaderError::Damaged {
            at: 0,
            reason: format!(
                "file header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
        });
    }
    Ok(())
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

/// A batch does not fit one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FrameTooLarge {
    /// Encoded payload bytes counted so far (at least the limit).
    pub bytes: u64,
}

/// Builds one frame in memory: push writes, then [`finish`](Self::finish).
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

    /// The complete frame: header and payload.
    pub(super) fn finish(mut self) -> Vec<u8> {
        self.buf[FRAME_HEADER_LEN..FRAME_OVERHEAD].copy_from_slice(&self.count.to_le_bytes());
        let payload_len = self.payload_len() as u32;
        let payload_crc = crc32c::crc32c(&self.buf[FRAME_HEADER_LEN..]);
        self.buf[0..4].copy_from_slice(&payload_len.to_le_bytes());
        self.buf[4..8].copy_from_slice(&payload_crc.to_le_bytes());
        let header_crc = crc32c::crc32c(&self.buf[0..8]);
        self.buf[8..12].copy_from_slice(&header_crc.to_le_bytes());
        self.buf
    }
}

/// Encodes one `set` batch as one frame.
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
    Ok(frame.finish())
}

/// A frame header whose CRC matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FrameHeader {
    /// Payload bytes that follow the header.
    pub payload_len: u32,
    /// The payload's CRC32C.
    pub payload_crc: u32,
}

/// Parses a frame header; `None` when its CRC does not match.
pub(super) fn decode_frame_header(bytes: &[u8; FRAME_HEADER_LEN]) -> Option<FrameHeader> {
    let stored = read_u32(bytes, 8);
    (crc32c::crc32c(&bytes[..8]) == stored).then(|| FrameHeader {
        payload_len: read_u32(bytes, 0),
        payload_crc: read_u32(bytes, 4),
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

    fn header_of(frame: &[u8]) -> FrameHeader {
        let mut h = [0u8; FRAME_HEADER_LEN];
        h.copy_from_slice(&frame[..FRAME_HEADER_LEN]);
        decode_frame_header(&h).unwrap_or_else(|| panic!("header CRC must match"))
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
        assert_eq!(Ok(builder.finish()), encode_batch(&batch));
    }

    #[test]
    fn damaged_frame_header_is_detected() {
        let mut frame = encode_batch(&[put("a", "1")]).unwrap_or_else(|e| panic!("{e:?}"));
        frame[0] ^= 1;
        let mut h = [0u8; FRAME_HEADER_LEN];
        h.copy_from_slice(&frame[..FRAME_HEADER_LEN]);
        assert_eq!(decode_frame_header(&h), None);
        assert_eq!(
            decode_frame_header(&[0; FRAME_HEADER_LEN]),
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
        let header = encode_header();
        assert_eq!(check_header(&header), Ok(()));
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
        let mut v2 = header;
        v2[8] = 2;
        assert_eq!(check_header(&v2), Err(HeaderError::Version(2)));
        let mut bad_crc = header;
        bad_crc[20] = 1;
        assert!(matches!(
            check_header(&bad_crc),
            Err(HeaderError::Damaged { at: 0, .. })
        ));
    }
}
