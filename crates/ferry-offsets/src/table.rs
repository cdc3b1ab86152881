//! The in-memory index shared by stores that hold every offset in memory (memory, file, Kafka).
//!
//! Offsets are found by *logical* partition: a key is decoded and indexed by its connector and the
//! canonical form of its partition, so keys that differ only in field order (or in how another writer
//! printed numbers and escapes) are one partition; the last write in store order wins. The raw key
//! bytes of that last write are kept, so exports reproduce exactly what was written.

use std::borrow::{Borrow, Cow};
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher, RandomState};

use crate::codec::{self, OffsetKey};
use crate::key_scan::{self, ScannedKey};

/// One live offset.
#[derive(Debug, Clone)]
struct Slot {
    /// Raw key bytes as last written; `None` when they equal the canonical key (saves memory).
    raw_key: Option<Box<[u8]>>,
    value: Bytes<INLINE_VALUE>,
    /// Store order of the last write.
    seq: u64,
    /// Where the last write sits in a multi-lane log ([`OffsetTable::apply_at`]); `None` for
    /// [`OffsetTable::apply`].
    at: MaybeAt,
}

impl Slot {
    fn new(raw_key: Option<&[u8]>, value: &[u8], seq: u64, at: Option<LogOrder>) -> Self {
        Self {
            raw_key: raw_key.map(Into::into),
            value: Bytes::new(value),
            seq,
            at: MaybeAt::new(at),
        }
    }

    /// Makes this slot hold a new write, as [`Slot::new`] would, and returns the length of the value
    /// it replaced. Reuses the buffers when the bytes fit, so updating a live partition usually does
    /// not allocate.
    fn overwrite(
        &mut self,
        raw_key: Option<&[u8]>,
        value: &[u8],
        seq: u64,
        at: Option<LogOrder>,
    ) -> usize {
        let replaced = self.value.len();
        self.value.set(value);
        match raw_key {
            None => self.raw_key = None,
            Some(raw) if self.raw_key.as_deref() == Some(raw) => {}
            Some(raw) => self.raw_key = Some(raw.into()),
        }
        self.seq = seq;
        self.at = MaybeAt::new(at);
        replaced
    }
}

/// An `Option<LogOrder>` in 16 bytes rather than 24 (`LogOrder` has no spare bit pattern for
/// `None`), which keeps a table entry at two cache lines.
#[derive(Clone, Copy)]
struct MaybeAt {
    order: i64,
    lane: i32,
    some: bool,
}

impl MaybeAt {
    fn new(at: Option<LogOrder>) -> Self {
        match at {
            Some(LogOrder { lane, order }) => Self {
                order,
                lane,
                some: true,
            },
            None => Self {
                order: 0,
                lane: 0,
                some: false,
            },
        }
    }

    fn get(self) -> Option<LogOrder> {
        self.some.then_some(LogOrder {
            lane: self.lane,
            order: self.order,
        })
    }
}

impl fmt::Debug for MaybeAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.get(), f)
    }
}

/// Bytes kept inline when at most `N` long, else on the heap. Most values are short
/// (`{"position":1234}`) and so are most canonical partitions, so a million partitions cost far fewer
/// allocations to build and to free, and a lookup reads its key from the table itself instead of
/// following a pointer.
#[derive(Clone)]
enum Bytes<const N: usize> {
    Inline { len: u8, buf: [u8; N] },
    Heap(Box<[u8]>),
}

/// Values up to this length are stored inline: with the length and the tag, 8 bytes more than a
/// boxed slice.
const INLINE_VALUE: usize = 22;
/// Canonical partitions up to this length are stored inline (typical ones, such as
/// `{"filename":"/var/log/app/events.log"}` or `{"protocol":"1","table":"public.orders"}`, fit).
const INLINE_PARTITION: usize = 54;

impl<const N: usize> Bytes<N> {
    fn new(bytes: &[u8]) -> Self {
        match u8::try_from(bytes.len()) {
            Ok(len) if bytes.len() <= N => {
                let mut buf = [0; N];
                buf[..bytes.len()].copy_from_slice(bytes);
                Self::Inline { len, buf }
            }
            _ => Self::Heap(bytes.into()),
        }
    }

    /// Replaces the bytes, in place when they fit.
    fn set(&mut self, bytes: &[u8]) {
        match self {
            Self::Heap(heap) if heap.len() == bytes.len() => heap.copy_from_slice(bytes),
            _ => *self = Self::new(bytes),
        }
    }
}

impl<const N: usize> std::ops::Deref for Bytes<N> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Self::Inline { len, buf } => &buf[..usize::from(*len)],
            Self::Heap(heap) => heap,
        }
    }
}

impl<const N: usize> fmt::Debug for Bytes<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

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

/// A slot with where it lives: `Some((connector, canonical partition))`, or `None` for an undecodable
/// key.
type LocatedSlot<'a> = (Option<(&'a str, &'a [u8])>, &'a Slot);

/// A canonical partition stored with its hash (computed once, by the table's keyed hasher). Maps of
/// partitions hash an entry by the stored value, so growing a map of a million partitions does not
/// re-read and re-hash every key, and one write hashes its partition once for all lookups.
struct PartitionKey {
    hash: u64,
    bytes: Bytes<INLINE_PARTITION>,
}

impl fmt::Debug for PartitionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.bytes, f)
    }
}

/// A canonical partition and its hash, borrowed from the key being looked up when possible.
#[derive(Debug)]
struct PartitionRef<'a> {
    hash: u64,
    bytes: Cow<'a, [u8]>,
}

impl PartitionRef<'_> {
    /// The form maps of [`PartitionKey`]s are searched with.
    fn view(&self) -> &dyn PartitionView {
        self
    }

    fn to_key(&self) -> PartitionKey {
        PartitionKey {
            hash: self.hash,
            bytes: Bytes::new(&self.bytes),
        }
    }
}

/// What [`PartitionKey`] and [`PartitionRef`] have in common: lets a map keyed by `PartitionKey` be
/// searched without building one (std's `HashMap` looks up through `Borrow`).
trait PartitionView {
    fn hash(&self) -> u64;
    fn bytes(&self) -> &[u8];
}

impl PartitionView for PartitionKey {
    fn hash(&self) -> u64 {
        self.hash
    }
    fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl PartitionView for PartitionRef<'_> {
    fn hash(&self) -> u64 {
        self.hash
    }
    fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl<'a> Borrow<dyn PartitionView + 'a> for PartitionKey {
    fn borrow(&self) -> &(dyn PartitionView + 'a) {
        self
    }
}

// `Hash` and `Eq` of `PartitionKey` and of the view must agree, as `Borrow` requires.
impl Hash for dyn PartitionView + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(PartitionView::hash(self));
    }
}

impl PartialEq for dyn PartitionView + '_ {
    fn eq(&self, other: &Self) -> bool {
        PartitionView::hash(self) == PartitionView::hash(other) && self.bytes() == other.bytes()
    }
}

impl Eq for dyn PartitionView + '_ {}

impl Hash for PartitionKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl PartialEq for PartitionKey {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && *self.bytes == *other.bytes
    }
}

impl Eq for PartitionKey {}

/// The hasher of maps keyed by [`PartitionKey`]: passes the stored hash through. The stored hash
/// comes from a keyed SipHash ([`RandomState`]), so the maps keep std's resistance to crafted keys.
#[derive(Debug, Default)]
struct StoredHash(u64);

impl Hasher for StoredHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not reached (keys hash through `write_u64`); mixes the bytes in rather than ignore them.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
}

/// A map keyed by canonical partition.
type PartitionMap<V> = HashMap<PartitionKey, V, BuildHasherDefault<StoredHash>>;

/// The in-memory index of live offsets (connector → canonical partition → last write), for stores
/// that replay a log into memory (file, Kafka). Lookups are logical: keys that differ only in field
/// order are one partition, and the last applied write wins. Not thread-safe by itself.
#[derive(Default)]
pub struct OffsetTable {
    connectors: HashMap<Box<str>, PartitionMap<Slot>>,
    /// Keys that are not valid offset keys (another writer's garbage): kept byte-exact, never looked up
    /// logically.
    undecodable: HashMap<Box<[u8]>, Slot>,
    /// Where the last tombstone of each removed partition sits ([`OffsetTable::apply_at`] only), so a
    /// stale value read later from another lane does not bring the partition back.
    graves: HashMap<Box<str>, PartitionMap<LogOrder>>,
    /// Hashes canonical partitions into [`PartitionKey`]s.
    hasher: RandomState,
    next_seq: u64,
    live: usize,
}

impl fmt::Debug for OffsetTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The hasher's keys are not state worth showing.
        f.debug_struct("OffsetTable")
            .field("connectors", &self.connectors)
            .field("undecodable", &self.undecodable)
            .field("graves", &self.graves)
            .field("next_seq", &self.next_seq)
            .field("live", &self.live)
            .finish()
    }
}

/// Where a raw key lives in the table. The parts borrow from the raw key when the fast path
/// ([`key_scan`]) found them, so locating a key usually allocates nothing.
enum Location<'a> {
    Decoded {
        connector: Cow<'a, str>,
        partition: PartitionRef<'a>,
        raw_is_canonical: bool,
    },
    Raw,
}

/// Locates `raw_key`, hashing its canonical partition with `hasher`.
fn locate<'a>(hasher: &RandomState, raw_key: &'a [u8]) -> Location<'a> {
    let (connector, canonical, raw_is_canonical) = match key_scan::scan_key(raw_key) {
        Some(ScannedKey {
            connector,
            canonical,
            raw_is_canonical,
        }) => (Cow::Borrowed(connector), canonical, raw_is_canonical),
        None => match decode_location(raw_key) {
            Some((connector, canonical, raw_is_canonical)) => (
                Cow::Owned(connector),
                Cow::Owned(canonical),
                raw_is_canonical,
            ),
            None => return Location::Raw,
        },
    };
    Location::Decoded {
        connector,
        partition: PartitionRef {
            hash: hasher.hash_one(&*canonical),
            bytes: canonical,
        },
        raw_is_canonical,
    }
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

impl OffsetTable {
    /// Applies one write: a value, or a tombstone (`None`).
    pub fn apply(&mut self, raw_key: &[u8], value: Option<&[u8]>) {
        self.apply_sized(raw_key, value);
    }

    /// [`apply`](Self::apply), returning the length of the value the write replaced or removed (`None`
    /// when the partition had no live value). Stores use it to track how many bytes are live.
    pub(crate) fn apply_sized(&mut self, raw_key: &[u8], value: Option<&[u8]>) -> Option<usize> {
        let location = locate(&self.hasher, raw_key);
        self.apply_located(location, raw_key, value, None)
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
        let location = locate(&self.hasher, raw_key);
        if let Location::Decoded {
            connector,
            partition,
            ..
        } = &location
        {
            let current = self
                .connectors
                .get(&**connector)
                .and_then(|p| p.get(partition.view()))
                .and_then(|slot| slot.at.get())
                .or_else(|| {
                    self.graves
                        .get(&**connector)
                        .and_then(|g| g.get(partition.view()))
                        .copied()
                });
            if let Some(current) = current
                && current.lane != at.lane
                && current.order > at.order
            {
                return false;
            }
        }
        self.apply_located(location, raw_key, value, Some(at));
        true
    }

    /// Applies a located write; returns the length of the value it replaced or removed.
    fn apply_located(
        &mut self,
        location: Location<'_>,
        raw_key: &[u8],
        value: Option<&[u8]>,
        at: Option<LogOrder>,
    ) -> Option<usize> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let previous = match location {
            Location::Decoded {
                connector,
                partition,
                raw_is_canonical,
            } => {
                self.bury(
                    &connector,
                    &partition,
                    if value.is_none() { at } else { None },
                );
                let raw = (!raw_is_canonical).then_some(raw_key);
                match value {
                    Some(value) => {
                        // Look up before inserting: the keys are usually borrowed from `raw_key`, and
                        // an owned copy is only needed for a new connector or partition.
                        let partitions = match self.connectors.get_mut(&*connector) {
                            Some(partitions) => partitions,
                            None => self.connectors.entry(connector.into()).or_default(),
                        };
                        match partitions.get_mut(partition.view()) {
                            Some(slot) => Some(slot.overwrite(raw, value, seq, at)),
                            None => {
                                partitions
                                    .insert(partition.to_key(), Slot::new(raw, value, seq, at));
                                None
                            }
                        }
                    }
                    None => {
                        let mut removed = None;
                        if let Some(partitions) = self.connectors.get_mut(&*connector) {
                            removed = partitions.remove(partition.view());
                            if partitions.is_empty() {
                                self.connectors.remove(&*connector);
                            }
                        }
                        removed.map(|slot| slot.value.len())
                    }
                }
            }
            Location::Raw => match value {
                Some(value) => match self.undecodable.get_mut(raw_key) {
                    Some(slot) => Some(slot.overwrite(Some(raw_key), value, seq, at)),
                    None => {
                        let slot = Slot::new(Some(raw_key), value, seq, at);
                        self.undecodable.insert(raw_key.into(), slot);
                        None
                    }
                },
                None => self
                    .undecodable
                    .remove(raw_key)
                    .map(|slot| slot.value.len()),
            },
        };
        match (previous.is_some(), value.is_some()) {
            (false, true) => self.live += 1,
            (true, false) => self.live -= 1,
            _ => {}
        }
        previous
    }

    /// Records (`Some`) or forgets (`None`) where the tombstone of a partition sits.
    fn bury(&mut self, connector: &str, partition: &PartitionRef<'_>, tombstone: Option<LogOrder>) {
        match tombstone {
            Some(at) => {
                let graves = match self.graves.get_mut(connector) {
                    Some(graves) => graves,
                    None => self.graves.entry(connector.into()).or_default(),
                };
                match graves.get_mut(partition.view()) {
                    Some(grave) => *grave = at,
                    None => {
                        graves.insert(partition.to_key(), at);
                    }
                }
            }
            None => {
                if let Some(graves) = self.graves.get_mut(connector) {
                    graves.remove(partition.view());
                    if graves.is_empty() {
                        self.graves.remove(connector);
                    }
                }
            }
        }
    }

    /// The live value of the partition `raw_key` names, found logically.
    pub fn get(&self, raw_key: &[u8]) -> Option<&[u8]> {
        match locate(&self.hasher, raw_key) {
            Location::Decoded {
                connector,
                partition,
                ..
            } => self
                .connectors
                .get(&*connector)
                .and_then(|p| p.get(partition.view()))
                .map(|s| &*s.value),
            Location::Raw => self.undecodable.get(raw_key).map(|s| &*s.value),
        }
    }

    /// The live offsets of one connector as (raw key, value), in store order of their last write.
    pub fn connector_entries(&self, connector: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
        let Some(partitions) = self.connectors.get(connector) else {
            return Vec::new();
        };
        let mut slots: Vec<(&[u8], &Slot)> =
            partitions.iter().map(|(c, s)| (&*c.bytes, s)).collect();
        slots.sort_unstable_by_key(|(_, s)| s.seq);
        slots
            .into_iter()
            .map(|(canonical, slot)| {
                (
                    Self::raw_key(connector, canonical, slot),
                    slot.value.to_vec(),
                )
            })
            .collect()
    }

    /// Every live offset as (raw key, value), in store order of the last write.
    pub fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut slots: Vec<LocatedSlot<'_>> = Vec::with_capacity(self.live);
        for (connector, partitions) in &self.connectors {
            slots.extend(
                partitions
                    .iter()
                    .map(|(c, s)| (Some((&**connector, &*c.bytes)), s)),
            );
        }
        slots.extend(self.undecodable.values().map(|s| (None, s)));
        slots.sort_unstable_by_key(|(_, s)| s.seq);
        slots
            .into_iter()
            .map(|(loc, slot)| {
                let key = match (loc, &slot.raw_key) {
                    (_, Some(raw)) => raw.to_vec(),
                    (Some((connector, canonical)), None) => {
                        Self::raw_key(connector, canonical, slot)
                    }
                    (None, None) => Vec::new(),
                };
                (key, slot.value.to_vec())
            })
            .collect()
    }

    /// Calls `f(raw key, value)` for every live offset, in store order of the last write: the same
    /// sequence as [`entries`](Self::entries) without copying each entry (for snapshots of large
    /// stores). The key slice is only valid during the call.
    pub(crate) fn visit_entries(&self, mut f: impl FnMut(&[u8], &[u8])) {
        let mut slots: Vec<LocatedSlot<'_>> = Vec::with_capacity(self.live);
        for (connector, partitions) in &self.connectors {
            slots.extend(
                partitions
                    .iter()
                    .map(|(c, s)| (Some((&**connector, &*c.bytes)), s)),
            );
        }
        slots.extend(self.undecodable.values().map(|s| (None, s)));
        slots.sort_unstable_by_key(|(_, s)| s.seq);
        let mut scratch = Vec::new();
        for (loc, slot) in slots {
            let key: &[u8] = match (loc, &slot.raw_key) {
                (_, Some(raw)) => raw,
                (Some((connector, canonical)), None) => {
                    scratch.clear();
                    scratch.push(b'[');
                    crate::json::write_string(&mut scratch, connector);
                    scratch.push(b',');
                    scratch.extend_from_slice(canonical);
                    scratch.push(b']');
                    &scratch
                }
                (None, None) => &[],
            };
            f(key, &slot.value);
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

    fn raw_key(connector: &str, canonical: &[u8], slot: &Slot) -> Vec<u8> {
        if let Some(raw) = &slot.raw_key {
            return raw.to_vec();
        }
        // The raw key equals the canonical key: rebuild it from its parts.
        let mut key = Vec::with_capacity(connector.len() + canonical.len() + 8);
        key.push(b'[');
        crate::json::write_string(&mut key, connector);
        key.push(b',');
        key.extend_from_slice(canonical);
        key.push(b']');
        key
    }
}

// A table entry (key and slot) fills two cache lines; growing it costs memory at every partition.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<(PartitionKey, Slot)>() == 128);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A location as comparable parts: `None` for an undecodable key.
    fn parts(location: Location<'_>) -> Option<(String, Vec<u8>, bool)> {
        match location {
            Location::Decoded {
                connector,
                partition,
                raw_is_canonical,
            } => Some((
                connector.into_owned(),
                partition.bytes.into_owned(),
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
        prop_assert_eq!(parts(locate(&RandomState::new(), raw)), slow);
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
            table.visit_entries(|k, v| visited.push((k.to_vec(), v.to_vec())));
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
        assert!(t.graves.is_empty(), "a later value forgets the tombstone");
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
        assert!(t.graves.is_empty());
        assert_eq!(t.len(), 1);
    }
}
