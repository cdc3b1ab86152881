//! The in-memory index shared by stores that hold every offset in memory (memory, file, Kafka).
//!
//! Offsets are found by *logical* partition: a key is decoded and indexed by its connector and the
//! canonical form of its partition, so keys that differ only in field order (or in how another writer
//! printed numbers and escapes) are one partition; the last write in store order wins. The raw key
//! bytes of that last write are kept, so exports reproduce exactly what was written.
//!
//! # Layout
//!
//! A million partitions must fit in little more memory than their bytes, so the table holds no
//! allocation per offset: every byte lives in one arena (`Vec<u8>`), one record per partition
//! (canonical partition, then the raw key when it is not canonical, then the value); a dense
//! `Vec` of fixed-size [`Entry`]s (40 bytes) points into it; and a hash index of 32-bit entry
//! positions (4 bytes and a control byte per bucket, 8/7 to 16/7 buckets per entry as the
//! power-of-two table fills) finds an entry by connector and canonical partition. So an offset costs
//! its canonical partition, its value and its raw key when not canonical, plus 40 + 6 to 12 bytes
//! (16 more in a table fed by [`apply_at`](OffsetTable::apply_at), for where each write sits): for
//! the bench's 1M offsets (51-byte canonical partitions, ~15-byte values, canonical keys) about 117
//! bytes; a FileStore open of them peaks at about 141 MiB of RSS (155 MiB with the 56-byte entries
//! before, 163 MiB with 64-bit positions before that, each measured side by side) against 202 MiB
//! for a `HashMap` of the bytes.
//!
//! Overwrites reuse the record when the new bytes fit; the bytes they leave behind are counted and
//! the arena is compacted in place once they exceed the live bytes (and
//! [`COMPACT_MIN_DEAD`]), so dead bytes never exceed the live ones by more than that constant.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hasher, RandomState};

use hashbrown::HashTable;

use crate::codec::{self, OffsetKey};
use crate::key_scan::{self, ScannedKey};

/// Where a write sits in a log made of several independently ordered lanes, such as the partitions of
/// a Kafka topic: writes in one lane are applied in lane order; across lanes, `order` (the record
/// timestamp) decides which write is newer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogOrder {
    /// The lane (Kafka partition) the write was read from.
    pub lane: i32,
    /// The write's position in time across lanes (a record timestamp, in ms).
    pub order: i64,
}

/// The connector id of undecodable keys (another writer's garbage): their "canonical key" is their
/// raw bytes, matched byte-wise and never looked up logically.
const UNDECODABLE: u32 = u32::MAX;

/// Dead arena bytes below this are never compacted away: compacting a small arena often would cost
/// more than the bytes are worth.
/// (Tiny in tests, so they compact often.)
const COMPACT_MIN_DEAD: usize = if cfg!(test) { 64 } else { 64 * 1024 };

/// `Entry::flags`: `lane`/`order` hold where the last write sits ([`OffsetTable::apply_at`]).
const HAS_AT: u8 = 1;
/// `Entry::flags`: the partition was removed by a tombstone of a multi-lane log; the entry only
/// remembers where that tombstone sits, so a stale value from another lane does not bring the
/// partition back. Its record holds the canonical partition alone.
const GRAVE: u8 = 2;

/// [`Entry::seq_flags`]: the bits below hold the store order, the top byte the flags.
const SEQ_BITS: u32 = 56;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

/// One partition: where its bytes sit in the arena, and its order. Where a multi-lane log's last
/// write sits is kept apart ([`OffsetTable::ats`]): only the Kafka store needs it, and 16 bytes less
/// per entry is a tenth of a million offsets' memory (and of the time a fresh process spends having
/// the kernel zero it).
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Hash of (connector, canonical partition), by the table's keyed hasher.
    hash: u64,
    /// Store order of the last write (the low [`SEQ_BITS`] bits: a table applies far fewer than
    /// 2^56 writes in its life) and the flags ([`HAS_AT`], [`GRAVE`]) in the top byte.
    seq_flags: u64,
    /// Where the record starts in the arena: canonical partition, raw key, value.
    start: usize,
    /// Index into [`OffsetTable::connectors`], or [`UNDECODABLE`].
    connector: u32,
    key_len: u32,
    /// 0 when the raw key is the canonical key (rebuilt on export), or for an undecodable key
    /// (whose canonical key is its raw bytes).
    raw_len: u32,
    value_len: u32,
}

impl Entry {
    fn record_len(&self) -> usize {
        self.key_len as usize + self.raw_len as usize + self.value_len as usize
    }

    fn seq(&self) -> u64 {
        self.seq_flags & SEQ_MASK
    }

    fn set_seq(&mut self, seq: u64) {
        self.seq_flags = (self.seq_flags & !SEQ_MASK) | (seq & SEQ_MASK);
    }

    fn has(&self, flag: u8) -> bool {
        (self.seq_flags >> SEQ_BITS) as u8 & flag != 0
    }

    fn set(&mut self, flag: u8, on: bool) {
        let bit = u64::from(flag) << SEQ_BITS;
        if on {
            self.seq_flags |= bit;
        } else {
            self.seq_flags &= !bit;
        }
    }

    fn is_live(&self) -> bool {
        !self.has(GRAVE)
    }
}

// The per-offset overhead stated in the module docs.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Entry>() == 40);

/// A length as stored in an [`Entry`]. Every store caps keys and values far below 4 GiB (file frames
/// at 1 GiB, Kafka records at `i32::MAX`), so a longer one is a bug in the caller.
fn len32(len: usize) -> u32 {
    match u32::try_from(len) {
        Ok(len) => len,
        Err(_) => {
            panic!("an offset key or value of {len} bytes: the table holds at most 4 GiB - 1")
        }
    }
}

/// A position in [`OffsetTable::entries`] as the index holds it. Four billion partitions would take
/// over 200 GiB of entries alone, so reaching the limit is a bug (or a machine no store targets).
fn pos32(i: usize) -> u32 {
    match u32::try_from(i) {
        Ok(i) if i < u32::MAX => i,
        _ => panic!("offset table entry {i}: the table holds at most 4 Gi - 1 partitions"),
    }
}

/// The in-memory index of live offsets (connector → canonical partition → last write), for stores
/// that replay a log into memory (file, Kafka). Lookups are logical: keys that differ only in field
/// order are one partition, and the last applied write wins. Not thread-safe by itself. See the
/// module docs for the layout.
#[derive(Default)]
pub struct OffsetTable {
    /// Every record's bytes; see [`Entry::start`].
    arena: Vec<u8>,
    /// Bytes of `arena` no entry uses any more.
    dead: usize,
    /// Live partitions and graves, in no order.
    entries: Vec<Entry>,
    /// Where the last write of each entry sits in a multi-lane log, by entry position (meaningful
    /// where the entry has [`HAS_AT`]): empty until the first [`apply_at`](Self::apply_at), then as
    /// long as `entries`.
    ats: Vec<LogOrder>,
    /// Positions in `entries`, by [`Entry::hash`]. 32-bit, so the index (randomly accessed, once or
    /// twice per write) is 5 bytes a bucket instead of 9: less memory, fewer cache misses.
    index: HashTable<u32>,
    /// Connector names by id, and ids by name. Ids are never reused (a store has few connectors).
    connectors: Vec<Box<str>>,
    connector_ids: HashMap<Box<str>, u32>,
    /// The connector of the last write, checked first.
    last_connector: Option<u32>,
    /// Hashes (connector, canonical partition).
    hasher: RandomState,
    next_seq: u64,
    live: usize,
}

impl fmt::Debug for OffsetTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The bytes and the hasher's keys are not state worth showing.
        f.debug_struct("OffsetTable")
            .field("live", &self.live)
            .field("entries", &self.entries.len())
            .field("arena", &self.arena.len())
            .field("dead", &self.dead)
            .field("next_seq", &self.next_seq)
            .finish()
    }
}

/// Where a raw key lives in the table. The parts borrow from the raw key when the fast path
/// ([`key_scan`]) found them, so locating a key usually allocates nothing.
#[derive(Debug, PartialEq)]
enum Location<'a> {
    Decoded {
        connector: Cow<'a, str>,
        canonical: Cow<'a, [u8]>,
        raw_is_canonical: bool,
    },
    Raw,
}

/// Locates `raw_key`.
fn locate(raw_key: &[u8]) -> Location<'_> {
    match key_scan::scan_key(raw_key) {
        Some(ScannedKey {
            connector,
            canonical,
            raw_is_canonical,
        }) => Location::Decoded {
            connector: Cow::Borrowed(connector),
            canonical,
            raw_is_canonical,
        },
        None => match decode_location(raw_key) {
            Some((connector, canonical, raw_is_canonical)) => Location::Decoded {
                connector: Cow::Owned(connector),
                canonical: Cow::Owned(canonical),
                raw_is_canonical,
            },
            None => Location::Raw,
        },
    }
}

/// The location of a key known to be canonical, `["<connector>",<canonical partition>]`, cut at the
/// connector's closing quote; `None` when the connector name holds an escape (or the key is not of
/// that shape at all), where only a real scan finds the closing quote.
fn split_canonical(raw_key: &[u8]) -> Option<Location<'_>> {
    let rest = raw_key.strip_prefix(b"[\"")?.strip_suffix(b"]")?;
    let quote = rest.iter().position(|&b| b == b'"' || b == b'\\')?;
    let (connector, tail) = rest.split_at(quote);
    let partition = tail.strip_prefix(b"\",")?;
    Some(Location::Decoded {
        connector: Cow::Borrowed(std::str::from_utf8(connector).ok()?),
        canonical: Cow::Borrowed(partition),
        raw_is_canonical: true,
    })
}

/// The slow path of [`locate`], for every key: decode, then print canonically. Gives the connector,
/// the canonical partition and whether the raw key is canonical, or `None` for an undecodable key. The
/// fast path must always agree with it.
fn decode_location(raw_key: &[u8]) -> Option<(String, Vec<u8>, bool)> {
    let key = codec::decode_key(raw_key).ok()?;
    let raw_is_canonical = codec::is_canonical(raw_key, &key);
    let OffsetKey {
        connector,
        partition,
    } = key;
    Some((
        connector,
        codec::canonical_partition(partition.as_ref()),
        raw_is_canonical,
    ))
}

/// A located key with its connector id: what the index is searched with.
struct Probe<'a> {
    connector: u32,
    /// The canonical partition, or the raw bytes of an undecodable key.
    key: &'a [u8],
    /// The raw key to keep, when it differs from the canonical key.
    raw: Option<&'a [u8]>,
    hash: u64,
}

impl OffsetTable {
    /// Reserves room for `entries` more partitions holding `bytes` more bytes, if the allocator
    /// grants it (a hint: the table grows as needed anyway). A store that can bound its size up front
    /// (a file's length) should call it before loading: growing by doubling leaves every outgrown
    /// buffer below the allocator's mmap threshold (up to 32 MiB) behind as resident heap, which for
    /// a million offsets is about a third of the table again. Reserved and untouched memory costs
    /// no RSS, so an overestimate is cheap; the index is not reserved, as it is written whole when
    /// allocated ([`reserve_index`](Self::reserve_index)).
    pub fn reserve_hint(&mut self, entries: usize, bytes: usize) {
        // Failures leave the table as it was.
        let _ = self.entries.try_reserve_exact(entries);
        let _ = self.arena.try_reserve_exact(bytes);
    }

    /// Makes the index hold `entries` partitions without growing. Unlike
    /// [`reserve_hint`](Self::reserve_hint) this costs memory at once (about 1 to 2 bytes per
    /// partition reserved, 8 more per partition used), so `entries` must be a good estimate.
    pub fn reserve_index(&mut self, entries: usize) {
        let entries_now = &self.entries;
        self.index
            .reserve(entries, |&j| entries_now[j as usize].hash);
    }

    fn hash(&self, connector: u32, key: &[u8]) -> u64 {
        let mut h = self.hasher.build_hasher();
        h.write_u32(connector);
        h.write(key);
        h.finish()
    }

    /// The position in `entries` of the partition `probe` names.
    fn find(&self, probe: &Probe<'_>) -> Option<usize> {
        let (arena, entries) = (&self.arena, &self.entries);
        self.index
            .find(probe.hash, |&i| {
                let e = &entries[i as usize];
                e.hash == probe.hash
                    && e.connector == probe.connector
                    && arena[e.start..e.start + e.key_len as usize] == *probe.key
            })
            .map(|&i| i as usize)
    }

    /// The connector id of `name`, registering it when `register`.
    fn connector_id(&mut self, name: Cow<'_, str>, register: bool) -> Option<u32> {
        // Most writes in a row are one connector's: compare with the last one before hashing.
        if let Some(id) = self.last_connector
            && self
                .connectors
                .get(id as usize)
                .is_some_and(|c| **c == *name)
        {
            return Some(id);
        }
        if let Some(&id) = self.connector_ids.get(&*name) {
            self.last_connector = Some(id);
            return Some(id);
        }
        if !register {
            return None;
        }
        let id = len32(self.connectors.len());
        let name: Box<str> = name.into();
        self.connectors.push(name.clone());
        self.connector_ids.insert(name, id);
        self.last_connector = Some(id);
        Some(id)
    }

    /// Applies one write: a value, or a tombstone (`None`).
    pub fn apply(&mut self, raw_key: &[u8], value: Option<&[u8]>) {
        self.apply_sized(raw_key, value);
    }

    /// [`apply`](Self::apply), returning the length of the value the write replaced or removed (`None`
    /// when the partition had no live value). Stores use it to track how many bytes are live.
    pub(crate) fn apply_sized(&mut self, raw_key: &[u8], value: Option<&[u8]>) -> Option<usize> {
        self.apply_located(&locate(raw_key), raw_key, value)
    }

    /// [`apply_sized`](Self::apply_sized) for a key the caller knows is canonical, because Ferry wrote
    /// it as such ([`visit_entries`](Self::visit_entries) said so when the file was compacted): the
    /// connector and the partition are cut out of the key without reading the partition, which is
    /// most of the cost of indexing a key. A key whose connector name holds an escape is located the
    /// ordinary way. (Debug builds check the claim against the ordinary way.)
    pub(crate) fn apply_canonical(
        &mut self,
        raw_key: &[u8],
        value: Option<&[u8]>,
    ) -> Option<usize> {
        let Some(location) = split_canonical(raw_key) else {
            return self.apply_sized(raw_key, value);
        };
        debug_assert_eq!(
            location,
            locate(raw_key),
            "a key claimed canonical is not: {:?}",
            String::from_utf8_lossy(raw_key)
        );
        self.apply_located(&location, raw_key, value)
    }

    /// Applies one write to the partition `location` names (`raw_key` located).
    fn apply_located(
        &mut self,
        location: &Location<'_>,
        raw_key: &[u8],
        value: Option<&[u8]>,
    ) -> Option<usize> {
        let Some(probe) = self.probe(location, raw_key, value.is_some()) else {
            // A tombstone for a connector never seen: nothing to remove.
            self.next_seq += 1;
            return None;
        };
        let found = self.find(&probe);
        self.apply_found(&probe, found, value, None)
    }

    /// Applies one write read from lane `at.lane` of a multi-lane log (a Kafka partition), unless it is
    /// older than what the table holds. Returns whether it was applied.
    ///
    /// Within one lane, writes must be applied in lane order and each one wins. Across lanes there is
    /// no total order: logically equal keys with different bytes (field order) hash to different Kafka
    /// partitions. So a write is dropped when the partition's current state — its live value, or the
    /// tombstone that removed it — came from a *different* lane with a *greater* `order`. Equal orders
    /// across lanes: the write applied later wins. Undecodable keys are compared byte-wise, so they
    /// always apply. Do not mix with [`apply`](Self::apply) for one table.
    pub fn apply_at(&mut self, raw_key: &[u8], value: Option<&[u8]>, at: LogOrder) -> bool {
        let location = locate(raw_key);
        // A tombstone of a decoded key is remembered even for a partition never seen, as before.
        let decoded = matches!(location, Location::Decoded { .. });
        let Some(probe) = self.probe(&location, raw_key, value.is_some() || decoded) else {
            self.next_seq += 1;
            return true;
        };
        let found = self.find(&probe);
        if probe.connector != UNDECODABLE
            && let Some(current) = found.and_then(|i| self.at(i))
            && current.lane != at.lane
            && current.order > at.order
        {
            return false;
        }
        self.apply_found(&probe, found, value, Some(at));
        true
    }

    /// The probe for a located key; `None` when its connector is unknown and `register` is false.
    fn probe<'a>(
        &mut self,
        location: &'a Location<'a>,
        raw_key: &'a [u8],
        register: bool,
    ) -> Option<Probe<'a>> {
        let (connector, key, raw) = match location {
            Location::Decoded {
                connector,
                canonical,
                raw_is_canonical,
            } => {
                let id = self.connector_id(Cow::Borrowed(&**connector), register)?;
                (id, &**canonical, (!raw_is_canonical).then_some(raw_key))
            }
            Location::Raw => (UNDECODABLE, raw_key, None),
        };
        Some(Probe {
            connector,
            key,
            raw,
            hash: self.hash(connector, key),
        })
    }

    /// Applies a write to the entry `found` (or a new one); returns the length of the live value it
    /// replaced or removed.
    fn apply_found(
        &mut self,
        probe: &Probe<'_>,
        found: Option<usize>,
        value: Option<&[u8]>,
        at: Option<LogOrder>,
    ) -> Option<usize> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let previous = found
            .map(|i| self.entries[i])
            .filter(Entry::is_live)
            .map(|e| e.value_len as usize);
        // The entry the write leaves behind, if any, to stamp with its order.
        let stamped = match (found, value) {
            (Some(i), Some(value)) => {
                self.overwrite(i, probe.raw, value);
                Some(i)
            }
            (None, Some(value)) => {
                let i = self.insert(probe);
                self.overwrite(i, probe.raw, value);
                Some(i)
            }
            (Some(i), None) if at.is_some() && probe.connector != UNDECODABLE => {
                // Keep the canonical partition only, to remember where the tombstone sits.
                let e = &mut self.entries[i];
                self.dead += e.raw_len as usize + e.value_len as usize;
                e.raw_len = 0;
                e.value_len = 0;
                e.set(GRAVE, true);
                Some(i)
            }
            (Some(i), None) => {
                self.remove(i);
                None
            }
            (None, None) if at.is_some() && probe.connector != UNDECODABLE => {
                let i = self.insert(probe);
                self.entries[i].set(GRAVE, true);
                Some(i)
            }
            (None, None) => None,
        };
        if let Some(i) = stamped {
            let e = &mut self.entries[i];
            e.set_seq(seq);
            self.set_at(i, at);
        }
        match (previous.is_some(), value.is_some()) {
            (false, true) => self.live += 1,
            (true, false) => self.live -= 1,
            _ => {}
        }
        self.compact_if_wasteful();
        previous
    }

    /// Adds an entry holding the canonical partition alone (no raw key, empty value); returns its
    /// position.
    fn insert(&mut self, probe: &Probe<'_>) -> usize {
        let i = self.entries.len();
        let start = self.arena.len();
        self.arena.extend_from_slice(probe.key);
        self.entries.push(Entry {
            hash: probe.hash,
            seq_flags: 0,
            start,
            connector: probe.connector,
            key_len: len32(probe.key.len()),
            raw_len: 0,
            value_len: 0,
        });
        if !self.ats.is_empty() {
            self.ats.push(LogOrder { lane: 0, order: 0 });
        }
        let entries = &self.entries;
        self.index
            .insert_unique(probe.hash, pos32(i), |&j| entries[j as usize].hash);
        i
    }

    /// Makes entry `i` live with raw key `raw` (`None`: canonical) and `value`, in place when they fit
    /// in its record (or the record ends the arena), else in a new record at the end of the arena.
    fn overwrite(&mut self, i: usize, raw: Option<&[u8]>, value: &[u8]) {
        let e = self.entries[i];
        let key_len = e.key_len as usize;
        let raw = raw.unwrap_or(&[]);
        let old_tail = e.raw_len as usize + e.value_len as usize;
        let new_tail = raw.len() + value.len();
        let tail_start = e.start + key_len;
        let at_end = tail_start + old_tail == self.arena.len();
        let start = if new_tail <= old_tail || at_end {
            if at_end {
                self.arena.truncate(tail_start);
            } else {
                self.dead += old_tail - new_tail;
            }
            e.start
        } else {
            // Move the record to the end; its old bytes are dead.
            let start = self.arena.len();
            self.arena.extend_from_within(e.start..tail_start);
            self.dead += key_len + old_tail;
            start
        };
        let tail = start + key_len;
        if at_end {
            self.arena.extend_from_slice(raw);
            self.arena.extend_from_slice(value);
        } else if start == e.start {
            self.arena[tail..tail + raw.len()].copy_from_slice(raw);
            self.arena[tail + raw.len()..tail + new_tail].copy_from_slice(value);
        } else {
            self.arena.extend_from_slice(raw);
            self.arena.extend_from_slice(value);
        }
        let e = &mut self.entries[i];
        e.start = start;
        e.raw_len = len32(raw.len());
        e.value_len = len32(value.len());
        e.set(GRAVE, false);
    }

    /// Where entry `i`'s last write sits in a multi-lane log, if it came from one.
    fn at(&self, i: usize) -> Option<LogOrder> {
        if self.entries[i].has(HAS_AT) {
            self.ats.get(i).copied()
        } else {
            None
        }
    }

    /// Records where entry `i`'s last write sits (`None`: not in a multi-lane log).
    fn set_at(&mut self, i: usize, at: Option<LogOrder>) {
        self.entries[i].set(HAS_AT, at.is_some());
        if let Some(at) = at {
            if self.ats.is_empty() {
                self.ats
                    .resize(self.entries.len(), LogOrder { lane: 0, order: 0 });
            }
            self.ats[i] = at;
        }
    }

    /// Removes entry `i`: the last entry takes its position.
    fn remove(&mut self, i: usize) {
        let e = self.entries[i];
        self.dead += e.record_len();
        if let Ok(slot) = self.index.find_entry(e.hash, |&j| j as usize == i) {
            slot.remove();
        }
        let last = self.entries.len() - 1;
        self.entries.swap_remove(i);
        if !self.ats.is_empty() {
            self.ats.swap_remove(i);
        }
        if i != last {
            let moved = self.entries[i].hash;
            if let Some(slot) = self.index.find_mut(moved, |&j| j as usize == last) {
                *slot = pos32(i);
            }
        }
        if e.start + e.record_len() == self.arena.len() {
            // The record ended the arena: reclaim it now.
            self.arena.truncate(e.start);
            self.dead -= e.record_len();
        }
    }

    /// Compacts the arena once its dead bytes outweigh its live ones (see the module docs).
    fn compact_if_wasteful(&mut self) {
        if self.dead >= COMPACT_MIN_DEAD && self.dead > self.arena.len() - self.dead {
            self.compact_arena();
        }
    }

    /// Moves every record down over the dead bytes, in arena order, so it needs no second arena.
    fn compact_arena(&mut self) {
        let mut order: Vec<usize> = (0..self.entries.len()).collect();
        order.sort_unstable_by_key(|&i| self.entries[i].start);
        let mut cursor = 0;
        for i in order {
            let e = &mut self.entries[i];
            let len = e.record_len();
            self.arena.copy_within(e.start..e.start + len, cursor);
            e.start = cursor;
            cursor += len;
        }
        self.arena.truncate(cursor);
        if self.arena.capacity() > 2 * cursor {
            self.arena.shrink_to(cursor + cursor / 2);
        }
        self.dead = 0;
    }

    /// The live value of the partition `raw_key` names, found logically.
    pub fn get(&self, raw_key: &[u8]) -> Option<&[u8]> {
        let (connector, key) = match &locate(raw_key) {
            Location::Decoded {
                connector,
                canonical,
                ..
            } => (*self.connector_ids.get(&**connector)?, canonical.clone()),
            Location::Raw => (UNDECODABLE, Cow::Borrowed(raw_key)),
        };
        let probe = Probe {
            connector,
            key: &key,
            raw: None,
            hash: self.hash(connector, &key),
        };
        let e = &self.entries[self.find(&probe)?];
        e.is_live().then(|| self.value(e))
    }

    fn value(&self, e: &Entry) -> &[u8] {
        let start = e.start + e.key_len as usize + e.raw_len as usize;
        &self.arena[start..start + e.value_len as usize]
    }

    /// Writes the raw key of `e` to `out` (cleared first): the kept raw bytes, or the canonical key
    /// rebuilt from its parts.
    fn raw_key_into(&self, e: &Entry, out: &mut Vec<u8>) {
        out.clear();
        let key = &self.arena[e.start..e.start + e.key_len as usize];
        if e.connector == UNDECODABLE {
            out.extend_from_slice(key);
        } else if e.raw_len > 0 {
            let raw = e.start + e.key_len as usize;
            out.extend_from_slice(&self.arena[raw..raw + e.raw_len as usize]);
        } else {
            let connector = self.connectors.get(e.connector as usize).map_or("", |c| c);
            out.reserve(connector.len() + key.len() + 8);
            out.push(b'[');
            crate::json::write_string(out, connector);
            out.push(b',');
            out.extend_from_slice(key);
            out.push(b']');
        }
    }

    /// Positions of the live entries (of `connector`, or all), in store order of their last write.
    fn in_store_order(&self, connector: Option<u32>) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.entries.len())
            .filter(|&i| {
                let e = &self.entries[i];
                e.is_live() && connector.is_none_or(|c| c == e.connector)
            })
            .collect();
        order.sort_unstable_by_key(|&i| self.entries[i].seq());
        order
    }

    /// The live offsets of one connector as (raw key, value), in store order of their last write.
    pub fn connector_entries(&self, connector: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
        let Some(&id) = self.connector_ids.get(connector) else {
            return Vec::new();
        };
        self.collect(self.in_store_order(Some(id)))
    }

    /// Every live offset as (raw key, value), in store order of the last write.
    pub fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.collect(self.in_store_order(None))
    }

    fn collect(&self, order: Vec<usize>) -> Vec<(Vec<u8>, Vec<u8>)> {
        order
            .into_iter()
            .map(|i| {
                let e = &self.entries[i];
                let mut key = Vec::new();
                self.raw_key_into(e, &mut key);
                (key, self.value(e).to_vec())
            })
            .collect()
    }

    /// Calls `f(raw key, value, canonical)` for every live offset, in store order of the last write:
    /// the same sequence as [`entries`](Self::entries) without copying each entry (for snapshots of
    /// large stores). `canonical` says the key is its partition's canonical key, so
    /// [`apply_canonical`](Self::apply_canonical) may index it as it is. The key slice is only valid
    /// during the call.
    pub(crate) fn visit_entries(&self, mut f: impl FnMut(&[u8], &[u8], bool)) {
        let mut scratch = Vec::new();
        for i in self.in_store_order(None) {
            let e = &self.entries[i];
            self.raw_key_into(e, &mut scratch);
            f(
                &scratch,
                self.value(e),
                e.connector != UNDECODABLE && e.raw_len == 0,
            );
        }
    }

    /// Calls `f(raw key, value)` for every live offset (of `connector` only, when given), sorted by
    /// connector name and then raw key bytes, undecodable keys last in store order: the order of
    /// `ferry offsets export`, reached without copying the entries (a sort of positions). The
    /// key slice is only valid during the call.
    pub(crate) fn visit_sorted(&self, connector: Option<&str>, mut f: impl FnMut(&[u8], &[u8])) {
        let id = match connector {
            Some(name) => match self.connector_ids.get(name) {
                Some(&id) => Some(id),
                None => return,
            },
            None => None,
        };
        let mut order = self.in_store_order(id);
        let (mut a_key, mut b_key) = (Vec::new(), Vec::new());
        // Stable, so undecodable keys (all compared equal) keep store order.
        order.sort_by(|&a, &b| {
            let (a, b) = (&self.entries[a], &self.entries[b]);
            let name = |e: &Entry| {
                (e.connector != UNDECODABLE).then(|| {
                    self.connectors
                        .get(e.connector as usize)
                        .map_or("", |c| &**c)
                })
            };
            match (name(a), name(b)) {
                (None, None) => std::cmp::Ordering::Equal,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(_), None) => std::cmp::Ordering::Less,
                (Some(x), Some(y)) => x.cmp(y).then_with(|| {
                    self.raw_key_into(a, &mut a_key);
                    self.raw_key_into(b, &mut b_key);
                    a_key.cmp(&b_key)
                }),
            }
        });
        let mut scratch = Vec::new();
        for i in order {
            let e = &self.entries[i];
            self.raw_key_into(e, &mut scratch);
            f(&scratch, self.value(e));
        }
    }

    /// Whether no offset is live.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The number of live offsets.
    pub fn len(&self) -> usize {
        self.live
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A location as comparable parts: `None` for an undecodable key.
    fn parts(location: Location<'_>) -> Option<(String, Vec<u8>, bool)> {
        match location {
            Location::Decoded {
                connector,
                canonical,
                raw_is_canonical,
            } => Some((
                connector.into_owned(),
                canonical.into_owned(),
                raw_is_canonical,
            )),
            Location::Raw => None,
        }
    }

    fn fast_and_slow_agree(raw: &[u8]) -> Result<(), TestCaseError> {
        let slow = decode_location(raw);
        if let Some(scanned) = key_scan::scan_key(raw) {
            let fast = Some((
                scanned.connector.to_owned(),
                scanned.canonical.into_owned(),
                scanned.raw_is_canonical,
            ));
            prop_assert_eq!(
                &fast,
                &slow,
                "fast path disagrees on {:?}",
                String::from_utf8_lossy(raw)
            );
        }
        prop_assert_eq!(parts(locate(raw)), slow.clone());
        // A key the decoder finds canonical is cut the same way without reading its partition (or
        // left to the scan, when its connector name holds an escape).
        if let Some(canonical) = slow.filter(|(_, _, raw_is_canonical)| *raw_is_canonical)
            && let Some(cut) = split_canonical(raw)
        {
            prop_assert_eq!(
                parts(cut),
                Some(canonical),
                "split_canonical disagrees on {:?}",
                String::from_utf8_lossy(raw)
            );
        }
        Ok(())
    }

    proptest! {
        // Many cases: most generated keys are invalid or off the fast path.
        #![proptest_config(ProptestConfig::with_cases(4096))]

        #[test]
        fn locate_agrees_with_the_decoder(raw in key_scan::strategies::any_key()) {
            fast_and_slow_agree(&raw)?;
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn the_common_key_shape_takes_the_fast_path(raw in key_scan::strategies::fast_key()) {
            prop_assert!(
                key_scan::scan_key(&raw).is_some(),
                "not taken for {:?}",
                String::from_utf8_lossy(&raw)
            );
            fast_and_slow_agree(&raw)?;
        }
    }

    /// Variants of a few partitions (field order, spacing, escapes, number forms) and undecodable
    /// keys, for the model test.
    const POOL: &[&str] = &[
        r#"["c",{"a":1,"b":"x"}]"#,
        r#"["c",{"b":"x","a":1}]"#,
        r#" [ "c" , { "a" : 1 , "b" : "x" } ] "#,
        r#"["c",{"\u0061":1,"b":"x"}]"#,
        r#"["c",{"a":1}]"#,
        r#"["c",{"a":1.0}]"#,
        r#"["c",null]"#,
        r#"["c", null]"#,
        r#"["d",{"a":1}]"#,
        r#"["\u0064",{"a":1}]"#,
        r#"["c",{"a":01}]"#,
        "junk",
    ];

    /// A partition as the model knows it: logical (connector, canonical partition) or raw bytes.
    type Id = Result<(String, Vec<u8>), Vec<u8>>;

    /// The table as specified: the last write to a logical partition (per the decoder) wins and keeps
    /// its raw key; undecodable keys are matched byte-wise.
    #[derive(Default)]
    struct Model {
        live: HashMap<Id, (Vec<u8>, Vec<u8>, u64)>,
        seq: u64,
    }

    impl Model {
        fn id(raw: &[u8]) -> Id {
            decode_location(raw)
                .map(|(c, p, _)| (c, p))
                .ok_or_else(|| raw.to_vec())
        }

        fn apply(&mut self, raw: &[u8], value: Option<&[u8]>) -> Option<usize> {
            self.seq += 1;
            let previous = match value {
                Some(v) => self
                    .live
                    .insert(Self::id(raw), (raw.to_vec(), v.to_vec(), self.seq)),
                None => self.live.remove(&Self::id(raw)),
            };
            previous.map(|(_, v, _)| v.len())
        }

        fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
            let mut all: Vec<_> = self.live.values().cloned().collect();
            all.sort_by_key(|(_, _, seq)| *seq);
            all.into_iter().map(|(k, v, _)| (k, v)).collect()
        }
    }

    fn write() -> impl Strategy<Value = (usize, Option<Vec<u8>>)> {
        (
            0..POOL.len(),
            prop::option::weighted(0.8, prop::collection::vec(any::<u8>(), 0..40)),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn apply_matches_the_model(writes in prop::collection::vec(write(), 0..60)) {
            let mut table = OffsetTable::default();
            let mut model = Model::default();
            for (key, value) in &writes {
                let raw = POOL[*key].as_bytes();
                prop_assert_eq!(
                    table.apply_sized(raw, value.as_deref()),
                    model.apply(raw, value.as_deref())
                );
                prop_assert_eq!(table.len(), model.live.len());
            }
            prop_assert_eq!(table.entries(), model.entries());
            let mut visited = Vec::new();
            table.visit_entries(|k, v, _| visited.push((k.to_vec(), v.to_vec())));
            prop_assert_eq!(visited, model.entries());
            for raw in POOL {
                let expected = model
                    .live
                    .get(&Model::id(raw.as_bytes()))
                    .map(|(_, v, _)| v.as_slice());
                prop_assert_eq!(table.get(raw.as_bytes()), expected);
            }
            for connector in ["c", "d"] {
                let expected: Vec<_> = model
                    .entries()
                    .into_iter()
                    .filter(|(k, _)| {
                        decode_location(k).is_some_and(|(c, _, _)| c == connector)
                    })
                    .collect();
                prop_assert_eq!(table.connector_entries(connector), expected);
            }
        }
    }

    /// [`OffsetTable::apply_at`] as documented: a write is dropped when the partition's live value,
    /// or else the tombstone that removed it, came from another lane with a greater order.
    #[derive(Default)]
    struct LaneModel {
        table: Model,
        /// Where each partition's live value or last tombstone came from.
        last: HashMap<Id, LogOrder>,
    }

    impl LaneModel {
        fn apply_at(&mut self, raw: &[u8], value: Option<&[u8]>, at: LogOrder) -> bool {
            let id = Model::id(raw);
            if id.is_ok()
                && let Some(current) = self.last.get(&id)
                && current.lane != at.lane
                && current.order > at.order
            {
                return false;
            }
            if id.is_ok() {
                self.last.insert(id, at);
            }
            self.table.apply(raw, value);
            true
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn apply_at_matches_the_model(
            writes in prop::collection::vec((write(), 0..3i32, 0..8i64), 0..60),
        ) {
            let mut table = OffsetTable::default();
            let mut model = LaneModel::default();
            for ((key, value), lane, order) in &writes {
                let raw = POOL[*key].as_bytes();
                let at = LogOrder { lane: *lane, order: *order };
                prop_assert_eq!(
                    table.apply_at(raw, value.as_deref(), at),
                    model.apply_at(raw, value.as_deref(), at)
                );
            }
            prop_assert_eq!(table.len(), model.table.live.len());
            prop_assert_eq!(table.entries(), model.table.entries());
        }
    }

    #[test]
    fn values_are_replaced_whatever_their_length() {
        let mut t = OffsetTable::default();
        let long = [7u8; 40];
        let short = b"{\"position\":1}";
        for value in [
            &short[..],
            &long,
            &long[..22],
            &long[..23],
            &[],
            short,
            &long[..22],
        ] {
            t.apply(AB, Some(value));
            assert_eq!(t.get(BA), Some(value));
        }
        t.apply(BA, Some(&long[..5]));
        assert_eq!(t.entries(), vec![(BA.to_vec(), long[..5].to_vec())]);
        t.apply(AB, Some(&long[..5]));
        assert_eq!(t.entries(), vec![(AB.to_vec(), long[..5].to_vec())]);
    }

    #[test]
    fn locate_agrees_with_the_decoder_on_edge_cases() {
        let cases: &[&str] = &[
            r#"["c",{"a":1}]"#,
            r#"["c",{"b":1,"a":2}]"#,
            r#"["c",null]"#,
            r#" [ "c" , null ] "#,
            r#"["c",{}]"#,
            r#"["c",{ }]"#,
            r#"["",{"":""}]"#,
            r#"["c",{"a":-0}]"#,
            r#"["c",{"a":0}]"#,
            r#"["c",{"a":01}]"#,
            r#"["c",{"a":9223372036854775807}]"#,
            r#"["c",{"a":-9223372036854775808}]"#,
            r#"["c",{"a":9223372036854775808}]"#,
            r#"["c",{"a":-9223372036854775809}]"#,
            r#"["c",{"a":1.0}]"#,
            r#"["c",{"a":1e2}]"#,
            r#"["c",{"a":"x","a":"y"}]"#,
            r#"["c",{"a":"x","\u0061":"y"}]"#,
            r#"["c",{"a!":1,"a":2}]"#,
            r#"["c",{"a":1,"a!":2}]"#,
            r#"["c\/d",null]"#,
            r#"["c/d",null]"#,
            "[\"c\u{7f}é😀\",{\"é\":\"\u{7f}\"}]",
            "[\"c\u{1}\",null]",
            "[\"c\",{\"a\":\"\t\"}]",
            r#"["c",{"a":{"b":1}}]"#,
            r#"["c",{"a":[1]}]"#,
            r#"["c",{"a":true,"b":false,"c":null}]"#,
            r#"["c",{"a":1},1]"#,
            r#"["c",{"a":1}]x"#,
            r#"["c",[]]"#,
            r#"["c"]"#,
            r#"[]"#,
            "",
            "junk",
            // Found while checking that the tests catch deliberate bugs in the fast path.
            r#"["",{" ":"","":""}]"#,
            r#"["",{"0":"","a":""}]"#,
            r#"["",{"a":1 ,"a ":1}]"#,
            r#"["",{"a b":0,"a b":""}]"#,
            "\x0c[\"\",null]",
            "[\"\",\x0cnull]",
            "[\"\u{0}a\",{}]",
            "[\"aa\u{1}aaaaaaaa\",null]",
            "[\"a\u{2028}aaaaa日\u{80}a\u{1f}\",null]",
            "[\"aaaaaaaaaaaaaaaa\\\\aaaaaaa\",null]",
            "[\"aaaaaaaaaaaaaaaa\"aaaaaaa\",null]",
        ];
        for case in cases {
            if let Err(e) = fast_and_slow_agree(case.as_bytes()) {
                panic!("{case}: {e}");
            }
        }
        for at in [2, 7, 12] {
            let mut bad_utf8 = br#"["c",{"a":"x"}]"#.to_vec();
            bad_utf8[at] = 0xff;
            if let Err(e) = fast_and_slow_agree(&bad_utf8) {
                panic!("invalid UTF-8 at {at}: {e}");
            }
        }
    }

    const AB: &[u8] = br#"["c",{"a":1,"b":2}]"#;
    const BA: &[u8] = br#"["c",{"b":2,"a":1}]"#;

    fn at(lane: i32, order: i64) -> LogOrder {
        LogOrder { lane, order }
    }

    #[test]
    fn apply_at_same_lane_follows_lane_order_even_when_order_goes_back() {
        let mut t = OffsetTable::default();
        assert!(t.apply_at(AB, Some(b"1"), at(0, 100)));
        // A writer with a clock behind: same lane, so lane (log) order wins.
        assert!(t.apply_at(BA, Some(b"2"), at(0, 50)));
        assert_eq!(t.get(AB), Some(&b"2"[..]));
        assert!(t.apply_at(AB, None, at(0, 10)));
        assert_eq!(t.get(AB), None);
        assert!(t.is_empty());
    }

    #[test]
    fn apply_at_across_lanes_keeps_the_newer_write() {
        let mut t = OffsetTable::default();
        assert!(t.apply_at(BA, Some(b"new"), at(7, 200)));
        assert!(
            !t.apply_at(AB, Some(b"old"), at(3, 100)),
            "an older write from another lane is dropped"
        );
        assert_eq!(t.get(AB), Some(&b"new"[..]));
        assert_eq!(
            t.connector_entries("c"),
            vec![(BA.to_vec(), b"new".to_vec())],
            "raw key of the winner"
        );
        assert!(t.apply_at(AB, Some(b"newer"), at(3, 300)));
        assert_eq!(t.get(BA), Some(&b"newer"[..]));
        assert!(
            t.apply_at(BA, Some(b"tie"), at(7, 300)),
            "equal orders: the later applied wins"
        );
        assert_eq!(t.get(AB), Some(&b"tie"[..]));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn apply_at_tombstones_are_ordered_too() {
        let mut t = OffsetTable::default();
        assert!(t.apply_at(AB, Some(b"v"), at(1, 100)));
        assert!(
            !t.apply_at(BA, None, at(2, 50)),
            "an older tombstone from another lane is dropped"
        );
        assert_eq!(t.get(AB), Some(&b"v"[..]));
        assert!(t.apply_at(BA, None, at(2, 150)));
        assert_eq!(t.get(AB), None);
        assert!(
            !t.apply_at(AB, Some(b"stale"), at(1, 120)),
            "a removed partition is not resurrected by a stale value"
        );
        assert_eq!(t.get(AB), None);
        assert!(t.apply_at(AB, Some(b"back"), at(1, 160)));
        assert_eq!(t.get(BA), Some(&b"back"[..]));
        assert_eq!(t.len(), 1);
        assert!(
            t.entries.iter().all(Entry::is_live),
            "a later value forgets the tombstone"
        );
    }

    #[test]
    fn apply_at_undecodable_keys_apply_bytewise() {
        let mut t = OffsetTable::default();
        assert!(t.apply_at(b"junk", Some(b"1"), at(0, 100)));
        assert!(t.apply_at(b"junk", Some(b"2"), at(1, 5)));
        assert_eq!(t.get(b"junk"), Some(&b"2"[..]));
        assert!(t.apply_at(b"junk", None, at(1, 6)));
        assert!(t.is_empty());
    }

    #[test]
    fn apply_ignores_lanes_and_clears_tombstone_positions() {
        let mut t = OffsetTable::default();
        t.apply(AB, Some(b"1"));
        t.apply(BA, Some(b"2"));
        assert_eq!(t.get(AB), Some(&b"2"[..]));
        assert!(t.apply_at(AB, None, at(4, 10)));
        t.apply(BA, Some(b"3"));
        assert!(t.entries.iter().all(Entry::is_live));
        assert_eq!(t.len(), 1);
    }

    /// Checks the arena's bookkeeping: every entry's record lies in the arena, records do not
    /// overlap, the dead count is exact, and dead bytes stay bounded.
    fn check_arena(t: &OffsetTable) {
        let mut records: Vec<(usize, usize)> = t
            .entries
            .iter()
            .map(|e| (e.start, e.start + e.record_len()))
            .collect();
        records.sort_unstable();
        for pair in records.windows(2) {
            assert!(pair[0].1 <= pair[1].0, "records overlap: {pair:?}");
        }
        let used: usize = records.iter().map(|(a, b)| b - a).sum();
        assert!(records.last().is_none_or(|r| r.1 <= t.arena.len()));
        assert_eq!(
            t.arena.len() - used,
            t.dead,
            "dead bytes are counted exactly"
        );
        assert!(
            t.dead < COMPACT_MIN_DEAD || t.dead <= used,
            "dead {} live {used}",
            t.dead
        );
        assert_eq!(t.index.len(), t.entries.len());
        for (i, e) in t.entries.iter().enumerate() {
            assert_eq!(
                t.index.find(e.hash, |&j| j as usize == i),
                Some(&(i as u32)),
                "entry {i} indexed"
            );
        }
    }

    /// Keys of many partitions, some canonical and some not, and undecodable ones.
    fn many_key() -> impl Strategy<Value = Vec<u8>> {
        (0..40u32, 0..4u8).prop_map(|(n, shape)| match shape {
            0 => format!(r#"["c",{{"a":{n},"b":"x"}}]"#).into_bytes(),
            1 => format!(r#"["c",{{"b":"x","a":{n}}}]"#).into_bytes(),
            2 => format!(r#"["d{}",{{"file":"/f{n}"}}]"#, n % 3).into_bytes(),
            _ => format!("junk{n}").into_bytes(),
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Long runs of writes of varying lengths (growing, shrinking, removing), checked against the
        /// model and the arena's bookkeeping after every write: compactions keep every live entry.
        #[test]
        fn the_arena_keeps_every_live_entry(
            writes in prop::collection::vec(
                (many_key(), prop::option::weighted(0.85, prop::collection::vec(any::<u8>(), 0..64))),
                0..400,
            ),
        ) {
            let mut table = OffsetTable::default();
            let mut model = Model::default();
            for (raw, value) in &writes {
                prop_assert_eq!(
                    table.apply_sized(raw, value.as_deref()),
                    model.apply(raw, value.as_deref())
                );
                check_arena(&table);
            }
            prop_assert_eq!(table.len(), model.live.len());
            prop_assert_eq!(table.entries(), model.entries());
            for (raw, _) in &writes {
                let expected = model.live.get(&Model::id(raw)).map(|(_, v, _)| v.as_slice());
                prop_assert_eq!(table.get(raw), expected);
            }
        }

        /// The same with lanes: graves keep only their canonical partition, and compaction keeps
        /// them too.
        #[test]
        fn the_arena_keeps_graves_across_lanes(
            writes in prop::collection::vec(
                (
                    many_key(),
                    prop::option::weighted(0.6, prop::collection::vec(any::<u8>(), 0..64)),
                    0..3i32,
                    0..50i64,
                ),
                0..300,
            ),
        ) {
            let mut table = OffsetTable::default();
            let mut model = LaneModel::default();
            for (raw, value, lane, order) in &writes {
                let at = LogOrder { lane: *lane, order: *order };
                prop_assert_eq!(
                    table.apply_at(raw, value.as_deref(), at),
                    model.apply_at(raw, value.as_deref(), at)
                );
                check_arena(&table);
            }
            prop_assert_eq!(table.len(), model.table.live.len());
            prop_assert_eq!(table.entries(), model.table.entries());
        }
    }

    #[test]
    fn overwrites_reuse_the_record_when_the_value_fits() {
        let mut t = OffsetTable::default();
        t.apply(AB, Some(b"0123456789"));
        t.apply(br#"["c",{"z":1}]"#, Some(b"other"));
        let arena = t.arena.len();
        t.apply(AB, Some(b"01234"));
        assert_eq!(t.arena.len(), arena, "a shorter value: in place");
        assert_eq!(t.get(BA), Some(&b"01234"[..]));
        assert_eq!(t.dead, 5, "the 5 bytes it no longer uses");
        t.apply(AB, Some(b"01234"));
        assert_eq!(t.arena.len(), arena, "as long as the value: in place");
        assert_eq!(t.dead, 5);
        t.apply(BA, Some(b"0"));
        assert_eq!(t.get(AB), Some(&b"0"[..]));
        assert_eq!(
            t.entries(),
            vec![
                (br#"["c",{"z":1}]"#.to_vec(), b"other".to_vec()),
                (BA.to_vec(), b"0".to_vec())
            ],
            "a raw key kept"
        );
        check_arena(&t);
        t.apply(AB, Some(&[b'x'; 40]));
        assert!(
            t.arena.len() > arena,
            "a longer value moves the record to the end"
        );
        assert_eq!(t.get(BA), Some(&[b'x'; 40][..]));
        check_arena(&t);
        t.apply(AB, None);
        assert_eq!(t.get(AB), None);
        assert_eq!(t.len(), 1);
        check_arena(&t);
    }

    #[test]
    fn compaction_bounds_the_dead_bytes_of_many_overwrites() {
        let mut t = OffsetTable::default();
        let keys: Vec<Vec<u8>> = (0..100)
            .map(|i| format!(r#"["c",{{"file":"/f{i}"}}]"#).into_bytes())
            .collect();
        for round in 0..50usize {
            for key in &keys {
                // Each round's value is longer than the last: every overwrite moves the record.
                t.apply(key, Some(&vec![b'7'; round + 1]));
            }
            check_arena(&t);
        }
        let live: usize = t.entries.iter().map(Entry::record_len).sum();
        assert!(
            t.arena.len() <= 2 * live + COMPACT_MIN_DEAD,
            "{} > 2 x {live}",
            t.arena.len()
        );
        for key in &keys {
            assert_eq!(t.get(key), Some(&[b'7'; 50][..]));
        }
    }
}
