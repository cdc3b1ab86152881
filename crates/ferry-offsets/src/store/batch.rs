//! [`WriteBatch`]: a large batch of writes held compactly, for [`OffsetBackingStore::set_batch`]
//! (an import of a million offsets).
//!
//! [`OffsetBackingStore::set_batch`]: super::OffsetBackingStore::set_batch

use super::OffsetWrite;

/// `Span::value_len` of a tombstone.
const TOMBSTONE: u32 = u32::MAX;

/// Where one write's bytes sit in the arena: the key at `at`, the value `gap` bytes after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    at: u64,
    key_len: u32,
    value_len: u32,
}

impl Span {
    /// The write whose key is the `key_len` bytes at `at`, with a value of `value_len` bytes (`None`:
    /// a tombstone) after the batch's gap.
    pub(crate) fn new(
        at: usize,
        key_len: usize,
        value_len: Option<usize>,
    ) -> Result<Self, WriteTooLarge> {
        let len32 = |len: usize| match u32::try_from(len) {
            Ok(n) if n < TOMBSTONE => Ok(n),
            _ => Err(WriteTooLarge { bytes: len as u64 }),
        };
        Ok(Self {
            at: at as u64,
            key_len: len32(key_len)?,
            value_len: match value_len {
                Some(len) => len32(len)?,
                None => TOMBSTONE,
            },
        })
    }

    /// The key this span locates in `bytes`.
    ///
    /// # Panics
    /// The span reaches past `bytes` (a bug in the caller).
    pub(crate) fn key(self, bytes: &[u8]) -> &[u8] {
        &bytes[self.at as usize..self.at as usize + self.key_len as usize]
    }
}

/// A key or value of 4 GiB or more: no store takes one (file frames are capped at 1 GiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a key or value of {bytes} bytes is too large: the limit is 4 GiB minus 2 bytes")]
pub struct WriteTooLarge {
    /// The length refused.
    pub bytes: u64,
}

/// A batch of writes in one arena: every key and value in one `Vec<u8>` and 16 bytes of position per
/// write, instead of one or two allocations per write as in `Vec<OffsetWrite>`. A write may be
/// [`replace`](Self::replace)d in place (later writes of one partition, when a caller merges them);
/// the bytes it leaves behind stay in the arena until the batch is dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    bytes: Vec<u8>,
    spans: Vec<Span>,
    /// Bytes between each key and its value (1 for the TAB of a dump line parsed in place).
    gap: usize,
}

impl WriteBatch {
    /// An empty batch with room for `bytes` bytes of keys and values (reserved, not touched).
    pub fn with_capacity(bytes: usize) -> Self {
        Self {
            bytes: Vec::with_capacity(bytes),
            spans: Vec::new(),
            gap: 0,
        }
    }

    /// A batch of the writes `spans` locate in `bytes`, each value `gap` bytes after its key (an input
    /// parsed in place: no copy of its bytes).
    ///
    /// # Panics
    /// A span reaches past `bytes` (a bug in the caller); checked here, once, so reads need not.
    pub(crate) fn from_parts(bytes: Vec<u8>, spans: Vec<Span>, gap: usize) -> Self {
        let end = |s: &Span| {
            s.at as usize
                + s.key_len as usize
                + if s.value_len == TOMBSTONE {
                    0
                } else {
                    gap + s.value_len as usize
                }
        };
        assert!(
            spans.iter().all(|s| end(s) <= bytes.len()),
            "a write batch's span reaches past its bytes"
        );
        Self { bytes, spans, gap }
    }

    /// Appends a write (`None`: a tombstone).
    ///
    /// # Errors
    /// The key or value is 4 GiB or longer; the batch is unchanged.
    pub fn push(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), WriteTooLarge> {
        let span = self.store(key, value)?;
        self.spans.push(span);
        Ok(())
    }

    /// Replaces write `index` (which must exist) with `key` and `value`.
    ///
    /// # Errors
    /// The key or value is 4 GiB or longer; the batch is unchanged.
    ///
    /// # Panics
    /// `index` is out of range (a bug in the caller).
    pub fn replace(
        &mut self,
        index: usize,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), WriteTooLarge> {
        let span = self.store(key, value)?;
        self.spans[index] = span;
        Ok(())
    }

    fn store(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<Span, WriteTooLarge> {
        let span = Span::new(self.bytes.len(), key.len(), value.map(<[u8]>::len))?;
        self.bytes.extend_from_slice(key);
        if let Some(value) = value {
            self.bytes.resize(self.bytes.len() + self.gap, 0);
            self.bytes.extend_from_slice(value);
        }
        Ok(span)
    }

    /// Write `index`: key, and value or `None` for a tombstone.
    ///
    /// # Panics
    /// `index` is out of range (a bug in the caller).
    pub fn get(&self, index: usize) -> (&[u8], Option<&[u8]>) {
        self.write(self.spans[index])
    }

    fn write(&self, span: Span) -> (&[u8], Option<&[u8]>) {
        // Spans point inside `bytes`: `store` appended exactly these lengths.
        let at = span.at as usize;
        let key_end = at + span.key_len as usize;
        let key = &self.bytes[at..key_end];
        let value = (span.value_len != TOMBSTONE).then(|| {
            let at = key_end + self.gap;
            &self.bytes[at..at + span.value_len as usize]
        });
        (key, value)
    }

    /// The writes, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&[u8], Option<&[u8]>)> + '_ {
        self.spans.iter().map(|&span| self.write(span))
    }

    /// The number of writes.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether the batch holds no write.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// A batch of `writes`, in order.
    ///
    /// # Errors
    /// A key or value is 4 GiB or longer.
    pub fn from_writes(writes: &[OffsetWrite]) -> Result<Self, WriteTooLarge> {
        let mut batch = Self::default();
        for write in writes {
            batch.push(&write.key, write.value.as_deref())?;
        }
        Ok(batch)
    }

    /// The writes as owned [`OffsetWrite`]s (one allocation per key and value).
    pub fn to_writes(&self) -> Vec<OffsetWrite> {
        self.iter()
            .map(|(key, value)| OffsetWrite {
                key: key.to_vec(),
                value: value.map(<[u8]>::to_vec),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_come_back_as_pushed_and_replaced() {
        let mut batch = WriteBatch::with_capacity(64);
        batch.push(b"k1", Some(b"v1")).unwrap();
        batch.push(b"k2", None).unwrap();
        batch.push(b"", Some(b"")).unwrap();
        batch
            .replace(0, b"k1-again", Some(b"longer value"))
            .unwrap();
        assert_eq!(batch.len(), 3);
        let writes: Vec<_> = batch.iter().collect();
        assert_eq!(
            writes,
            vec![
                (&b"k1-again"[..], Some(&b"longer value"[..])),
                (&b"k2"[..], None),
                (&b""[..], Some(&b""[..])),
            ],
            "an empty value is not a tombstone"
        );
        assert_eq!(batch.get(1), (&b"k2"[..], None));
        let owned = batch.to_writes();
        assert_eq!(WriteBatch::from_writes(&owned).unwrap().to_writes(), owned);
        let in_place = WriteBatch::from_parts(
            b"key\tvalue\nk2\tnull".to_vec(),
            vec![
                Span::new(0, 3, Some(5)).unwrap(),
                Span::new(10, 2, None).unwrap(),
            ],
            1,
        );
        let mut more = in_place.clone();
        more.push(b"k3", Some(b"v3")).unwrap();
        assert_eq!(
            more.iter().collect::<Vec<_>>(),
            vec![
                (&b"key"[..], Some(&b"value"[..])),
                (&b"k2"[..], None),
                (&b"k3"[..], Some(&b"v3"[..])),
            ],
            "values sit one byte after their keys, pushed ones too"
        );
    }
}
