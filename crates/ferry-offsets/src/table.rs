//! The in-memory index shared by stores that hold every offset in memory (memory, file, Kafka).
//!
//! Offsets are found by *logical* partition: a key is decoded and indexed by its connector and the
//! canonical form of its partition, so keys that differ only in field order (or in how another writer
//! printed numbers and escapes) are one partition; the last write in store order wins. The raw key
//! bytes of that last write are kept, so exports reproduce exactly what was written.

use std::collections::HashMap;

use crate::codec::{self, OffsetKey};

/// One live offset.
#[derive(Debug, Clone)]
struct Slot {
    /// Raw key bytes as last written; `None` when they equal the canonical key (saves memory).
    raw_key: Option<Box<[u8]>>,
    value: Box<[u8]>,
    /// Store order of the last write.
    seq: u64,
    /// Where the last write sits in a multi-lane log ([`OffsetTable::apply_at`]); `None` for
    /// [`OffsetTable::apply`].
    at: Option<LogOrder>,
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

/// The in-memory index of live offsets (connector → canonical partition → last write), for stores
/// that replay a log into memory (file, Kafka). Lookups are logical: keys that differ only in field
/// order are one partition, and the last applied write wins. Not thread-safe by itself.
#[derive(Debug, Default)]
pub struct OffsetTable {
    connectors: HashMap<Box<str>, HashMap<Box<[u8]>, Slot>>,
    /// Keys that are not valid offset keys (another writer's garbage): kept byte-exact, never looked up
    /// logically.
    undecodable: HashMap<Box<[u8]>, Slot>,
    /// Where the last tombstone of each removed partition sits ([`OffsetTable::apply_at`] only), so a
    /// stale value read later from another lane does not bring the partition back.
    graves: HashMap<Box<str>, HashMap<Box<[u8]>, LogOrder>>,
    next_seq: u64,
    live: usize,
}

/// Where a raw key lives in the table.
enum Location {
    Decoded {
        connector: String,
        canonical: Vec<u8>,
        raw_is_canonical: bool,
    },
    Raw,
}

fn locate(raw_key: &[u8]) -> Location {
    match codec::decode_key(raw_key) {
        Ok(key) => {
            let raw_is_canonical = codec::is_canonical(raw_key, &key);
            let OffsetKey {
                connector,
                partition,
            } = key;
            Location::Decoded {
                connector,
                canonical: codec::canonical_partition(partition.as_ref()),
                raw_is_canonical,
            }
        }
        Err(_) => Location::Raw,
    }
}

impl OffsetTable {
    /// Applies one write: a value, or a tombstone (`None`).
    pub fn apply(&mut self, raw_key: &[u8], value: Option<&[u8]>) {
        self.apply_sized(raw_key, value);
    }

    /// [`apply`](Self::apply), returning the length of the value the write replaced or removed (`None`
    /// when the partition had no live value). Stores use it to track how many bytes are live.
    pub(crate) fn apply_sized(&mut self, raw_key: &[u8], value: Option<&[u8]>) -> Option<usize> {
        self.apply_located(locate(raw_key), raw_key, value, None)
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
        if let Location::Decoded {
            connector,
            canonical,
            ..
        } = &location
        {
            let current = self
                .connectors
                .get(connector.as_str())
                .and_then(|p| p.get(canonical.as_slice()))
                .and_then(|slot| slot.at)
                .or_else(|| {
                    self.graves
                        .get(connector.as_str())
                        .and_then(|g| g.get(canonical.as_slice()))
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

    fn apply_located(
        &mut self,
        location: Location,
        raw_key: &[u8],
        value: Option<&[u8]>,
        at: Option<LogOrder>,
    ) -> Option<usize> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let slot = value.map(|v| Slot {
            raw_key: None,
            value: v.into(),
            seq,
            at,
        });
        let previous = match location {
            Location::Decoded {
                connector,
                canonical,
                raw_is_canonical,
            } => {
                self.bury(
                    &connector,
                    &canonical,
                    if slot.is_none() { at } else { None },
                );
                match slot {
                    Some(mut slot) => {
                        if !raw_is_canonical {
                            slot.raw_key = Some(raw_key.into());
                        }
                        self.connectors
                            .entry(connector.into_boxed_str())
                            .or_default()
                            .insert(canonical.into_boxed_slice(), slot)
                    }
                    None => {
                        let mut removed = None;
                        if let Some(partitions) = self.connectors.get_mut(connector.as_str()) {
                            removed = partitions.remove(canonical.as_slice());
                            if partitions.is_empty() {
                                self.connectors.remove(connector.as_str());
                            }
                        }
                        removed
                    }
                }
            }
            Location::Raw => match slot {
                Some(mut slot) => {
                    slot.raw_key = Some(raw_key.into());
                    self.undecodable.insert(raw_key.into(), slot)
                }
                None => self.undecodable.remove(raw_key),
            },
        };
        match (previous.is_some(), value.is_some()) {
            (false, true) => self.live += 1,
            (true, false) => self.live -= 1,
            _ => {}
        }
        previous.map(|slot| slot.value.len())
    }

    /// Records (`Some`) or forgets (`None`) where the tombstone of a partition sits.
    fn bury(&mut self, connector: &str, canonical: &[u8], tombstone: Option<LogOrder>) {
        match tombstone {
            Some(at) => {
                self.graves
                    .entry(connector.into())
                    .or_default()
                    .insert(canonical.into(), at);
            }
            None => {
                if let Some(graves) = self.graves.get_mut(connector) {
                    graves.remove(canonical);
                    if graves.is_empty() {
                        self.graves.remove(connector);
                    }
                }
            }
        }
    }

    /// The live value of the partition `raw_key` names, found logically.
    pub fn get(&self, raw_key: &[u8]) -> Option<&[u8]> {
        match locate(raw_key) {
            Location::Decoded {
                connector,
                canonical,
                ..
            } => self
                .connectors
                .get(connector.as_str())
                .and_then(|p| p.get(canonical.as_slice()))
                .map(|s| &*s.value),
            Location::Raw => self.undecodable.get(raw_key).map(|s| &*s.value),
        }
    }

    /// The live offsets of one connector as (raw key, value), in store order of their last write.
    pub fn connector_entries(&self, connector: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
        let Some(partitions) = self.connectors.get(connector) else {
            return Vec::new();
        };
        let mut slots: Vec<(&[u8], &Slot)> = partitions.iter().map(|(c, s)| (&**c, s)).collect();
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
                    .map(|(c, s)| (Some((&**connector, &**c)), s)),
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
                    .map(|(c, s)| (Some((&**connector, &**c)), s)),
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

#[cfg(test)]
mod tests {
    use super::*;

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
