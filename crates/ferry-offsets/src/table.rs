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
}

/// A slot with where it lives: `Some((connector, canonical partition))`, or `None` for an undecodable
/// key.
type LocatedSlot<'a> = (Option<(&'a str, &'a [u8])>, &'a Slot);

/// Index of live offsets: connector → canonical partition → slot.
#[derive(Debug, Default)]
pub(crate) struct OffsetTable {
    connectors: HashMap<Box<str>, HashMap<Box<[u8]>, Slot>>,
    /// Keys that are not valid offset keys (another writer's garbage): kept byte-exact, never looked up
    /// logically.
    undecodable: HashMap<Box<[u8]>, Slot>,
    next_seq: u64,
    live: usize,
}

/// Where a raw key lives in the table.
enum Location {
    Decoded { connector: String, canonical: Vec<u8>, raw_is_canonical: bool },
    Raw,
}

fn locate(raw_key: &[u8]) -> Location {
    match codec::decode_key(raw_key) {
        Ok(key) => {
            let raw_is_canonical = codec::is_canonical(raw_key, &key);
            let OffsetKey { connector, partition } = key;
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
    pub(crate) fn apply(&mut self, raw_key: &[u8], value: Option<&[u8]>) {
        self.apply_sized(raw_key, value);
    }

    /// [`apply`](Self::apply), returning the length of the value the write replaced or removed (`None`
    /// when the partition had no live value). Stores use it to track how many bytes are live.
    pub(crate) fn apply_sized(&mut self, raw_key: &[u8], value: Option<&[u8]>) -> Option<usize> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let slot = value.map(|v| Slot { raw_key: None, value: v.into(), seq });
        let previous = match locate(raw_key) {
            Location::Decoded { connector, canonical, raw_is_canonical } => match slot {
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
            },
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

    /// The live value of the partition `raw_key` names, found logically.
    pub(crate) fn get(&self, raw_key: &[u8]) -> Option<&[u8]> {
        match locate(raw_key) {
            Location::Decoded { connector, canonical, .. } => self
                .connectors
                .get(connector.as_str())
                .and_then(|p| p.get(canonical.as_slice()))
                .map(|s| &*s.value),
            Location::Raw => self.undecodable.get(raw_key).map(|s| &*s.value),
        }
    }

    /// The live offsets of one connector as (raw key, value), in store order of their last write.
    pub(crate) fn connector_entries(&self, connector: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
        let Some(partitions) = self.connectors.get(connector) else {
            return Vec::new();
        };
        let mut slots: Vec<(&[u8], &Slot)> = partitions.iter().map(|(c, s)| (&**c, s)).collect();
        slots.sort_unstable_by_key(|(_, s)| s.seq);
        slots
            .into_iter()
            .map(|(canonical, slot)| (Self::raw_key(connector, canonical, slot), slot.value.to_vec()))
            .collect()
    }

    /// Every live offset as (raw key, value), in store order of the last write.
    pub(crate) fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut slots: Vec<LocatedSlot<'_>> = Vec::with_capacity(self.live);
        for (connector, partitions) in &self.connectors {
            slots.extend(partitions.iter().map(|(c, s)| (Some((&**connector, &**c)), s)));
        }
        slots.extend(self.undecodable.values().map(|s| (None, s)));
        slots.sort_unstable_by_key(|(_, s)| s.seq);
        slots
            .into_iter()
            .map(|(loc, slot)| {
                let key = match (loc, &slot.raw_key) {
                    (_, Some(raw)) => raw.to_vec(),
                    (Some((connector, canonical)), None) => Self::raw_key(connector, canonical, slot),
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
            slots.extend(partitions.iter().map(|(c, s)| (Some((&**connector, &**c)), s)));
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

    /// The number of live offsets.
    pub(crate) fn len(&self) -> usize {
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
