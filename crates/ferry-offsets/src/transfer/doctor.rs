//! The doctor's analysis of a store: partition-key mismatches that make a task silently re-read its
//! data, tombstones, and records that cannot be decoded.
//!
//! Findings, per connector:
//! - **key variants**: one logical partition written under different key bytes (field order, number
//!   or escape spelling). Ferry's stores read them as one partition (the last write wins); Kafka
//!   Connect compares key bytes and reads them as different partitions. Only a store's raw history
//!   shows them ([`OffsetBackingStore::history`](crate::OffsetBackingStore::history)).
//! - **near-duplicates**: live partitions whose maps are equal once key names are lower-cased and
//!   numbers and numeric strings are reduced to one form ([`loose_partition`]) but which are
//!   different partitions (`{"partition":1}` and `{"partition":"1"}`): the signature of a task whose
//!   partition map drifted between versions.
//! - **undecodable** keys and values.
//!
//! Tombstones are counted, not findings.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use ferry_api::ConnectMap;

use super::preview;
use crate::codec::{canonical_partition, decode_key, decode_value, encode_value, loose_partition};
use crate::store::{StoredOffset, StoredRecord};

/// What the doctor found in a store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DoctorReport {
    /// Records in the history.
    pub records: usize,
    /// Tombstones in the history.
    pub tombstones: usize,
    /// Live offsets.
    pub live: usize,
    /// Every connector with a record, by name.
    pub connectors: Vec<ConnectorHealth>,
    /// Records whose key is not an offset key (they belong to no connector).
    pub undecodable_keys: Vec<Undecodable>,
}

/// One connector's part of the report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectorHealth {
    /// The connector.
    pub connector: String,
    /// Records of the connector in the history.
    pub records: usize,
    /// Tombstones of the connector in the history.
    pub tombstones: usize,
    /// Live partitions.
    pub live: usize,
    /// Partitions written under more than one key.
    pub key_variants: Vec<KeyVariants>,
    /// Groups of live partitions that are likely one partition written in drifting forms.
    pub near_duplicates: Vec<NearDuplicate>,
    /// Records of the connector whose value cannot be decoded.
    pub undecodable_values: Vec<Undecodable>,
}

impl ConnectorHealth {
    /// Likely mismatches found for this connector.
    pub fn findings(&self) -> usize {
        self.key_variants.len() + self.near_duplicates.len() + self.undecodable_values.len()
    }
}

/// One logical partition written under different key bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyVariants {
    /// The partition in canonical form (fields sorted).
    pub partition: String,
    /// Each distinct key, in order of first appearance.
    pub variants: Vec<KeyVariant>,
    /// Whether the partition's last write is a value (not a tombstone).
    pub live: bool,
}

/// One key of a partition with [`KeyVariants`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyVariant {
    /// The key bytes, as text.
    pub key: String,
    /// Records written with this key.
    pub records: usize,
    /// Of which tombstones.
    pub tombstones: usize,
    /// Whether the partition's last write used this key.
    pub last: bool,
}

/// Live partitions that differ only in key-name case, value type or number form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NearDuplicate {
    /// The partitions, by partition text.
    pub members: Vec<LivePartition>,
}

/// A live partition and its offset, as text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LivePartition {
    /// The partition map as JSON.
    pub partition: String,
    /// The offset as stored.
    pub offset: String,
}

/// A record that cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undecodable {
    /// The key, as text (shortened).
    pub key: String,
    /// The value, as text (shortened); `None` for a tombstone.
    pub value: Option<String>,
    /// What is wrong.
    pub reason: String,
}

impl DoctorReport {
    /// Likely mismatches found: key variants, near-duplicates and undecodable records.
    pub fn findings(&self) -> usize {
        self.connectors
            .iter()
            .map(ConnectorHealth::findings)
            .sum::<usize>()
            + self.undecodable_keys.len()
    }
}

/// Per-partition state while reading the history.
struct PartitionHistory {
    variants: Vec<(Vec<u8>, KeyVariant)>,
    last: usize,
    live: bool,
}

/// Analyses a store: `history` is every raw record in store order
/// ([`OffsetBackingStore::history`](crate::OffsetBackingStore::history)), `live` its live offsets
/// ([`OffsetBackingStore::entries`](crate::OffsetBackingStore::entries)).
pub fn diagnose(history: &[StoredRecord], live: &[StoredOffset]) -> DoctorReport {
    let mut report = DoctorReport {
        records: history.len(),
        tombstones: history.iter().filter(|(_, v)| v.is_none()).count(),
        ..DoctorReport::default()
    };
    let mut connectors: BTreeMap<String, ConnectorHealth> = BTreeMap::new();
    // Per connector, per canonical partition, in order of first appearance.
    let mut partitions: HashMap<String, Vec<(Vec<u8>, PartitionHistory)>> = HashMap::new();
    for (key, value) in history {
        let decoded = match decode_key(key) {
            Ok(decoded) => decoded,
            Err(e) => {
                report
                    .undecodable_keys
                    .push(undecodable(key, value.as_deref(), e.reason()));
                continue;
            }
        };
        count_record(&mut connectors, &decoded.connector, key, value.as_deref());
        let canonical = canonical_partition(decoded.partition.as_ref());
        let list = partitions.entry(decoded.connector).or_default();
        partition_of(list, canonical).add(key, value.is_some());
    }
    add_key_variants(&mut connectors, partitions);
    add_live(&mut report, &mut connectors, live);
    report.connectors = connectors.into_values().collect();
    report
}

/// Counts a record (and a tombstone) of `connector`, noting a value that does not decode.
fn count_record(
    connectors: &mut BTreeMap<String, ConnectorHealth>,
    connector: &str,
    key: &[u8],
    value: Option<&[u8]>,
) {
    let health = connectors
        .entry(connector.to_owned())
        .or_insert_with(|| ConnectorHealth {
            connector: connector.to_owned(),
            ..ConnectorHealth::default()
        });
    health.records += 1;
    if value.is_none() {
        health.tombstones += 1;
    }
    if let Some(value) = value
        && let Err(e) = decode_value(value)
    {
        health
            .undecodable_values
            .push(undecodable(key, Some(value), e.reason()));
    }
}

/// The history of the `canonical` partition in `list`, added when it is new.
fn partition_of(
    list: &mut Vec<(Vec<u8>, PartitionHistory)>,
    canonical: Vec<u8>,
) -> &mut PartitionHistory {
    let at = match list.iter().position(|(c, _)| *c == canonical) {
        Some(at) => at,
        None => {
            list.push((
                canonical,
                PartitionHistory {
                    variants: Vec::new(),
                    last: 0,
                    live: false,
                },
            ));
            list.len() - 1
        }
    };
    &mut list[at].1
}

impl PartitionHistory {
    /// Counts a record of the partition under `key` (a new key variant when it is new); `live`:
    /// it is not a tombstone.
    fn add(&mut self, key: &[u8], live: bool) {
        let variant = match self.variants.iter().position(|(k, _)| k == key) {
            Some(v) => v,
            None => {
                self.variants.push((
                    key.to_vec(),
                    KeyVariant {
                        key: preview(key),
                        records: 0,
                        tombstones: 0,
                        last: false,
                    },
                ));
                self.variants.len() - 1
            }
        };
        let entry = &mut self.variants[variant].1;
        entry.records += 1;
        entry.tombstones += usize::from(!live);
        self.last = variant;
        self.live = live;
    }
}

/// Reports, per connector, the partitions stored under more than one key.
fn add_key_variants(
    connectors: &mut BTreeMap<String, ConnectorHealth>,
    partitions: HashMap<String, Vec<(Vec<u8>, PartitionHistory)>>,
) {
    for (connector, list) in partitions {
        let Some(health) = connectors.get_mut(&connector) else {
            continue;
        };
        for (canonical, partition) in list {
            if partition.variants.len() < 2 {
                continue;
            }
            let last = partition.last;
            health.key_variants.push(KeyVariants {
                partition: String::from_utf8_lossy(&canonical).into_owned(),
                variants: partition
                    .variants
                    .into_iter()
                    .enumerate()
                    .map(|(i, (_, v))| KeyVariant {
                        last: i == last,
                        ..v
                    })
                    .collect(),
                live: partition.live,
            });
        }
    }
}

/// A partition's [`loose_partition`] form.
type Loose = Vec<(String, String)>;
/// A live partition of a loose group: its canonical form and how it is shown.
type LooseMember = (Vec<u8>, LivePartition);

/// Counts live partitions and finds near-duplicates among them.
fn add_live(
    report: &mut DoctorReport,
    connectors: &mut BTreeMap<String, ConnectorHealth>,
    live: &[StoredOffset],
) {
    let mut groups: BTreeMap<String, HashMap<Loose, Vec<LooseMember>>> = BTreeMap::new();
    report.live = live.len();
    for (key, value) in live {
        let Ok(decoded) = decode_key(key) else {
            continue; // reported from the history
        };
        let health = connectors
            .entry(decoded.connector.clone())
            .or_insert_with(|| ConnectorHealth {
                connector: decoded.connector.clone(),
                ..ConnectorHealth::default()
            });
        health.live += 1;
        let Some(loose) = loose_partition(decoded.partition.as_ref()) else {
            continue;
        };
        let canonical = canonical_partition(decoded.partition.as_ref());
        let member = LivePartition {
            partition: map_text(decoded.partition.as_ref()),
            offset: preview(value),
        };
        let group = groups
            .entry(decoded.connector)
            .or_default()
            .entry(loose)
            .or_default();
        if !group.iter().any(|(c, _)| *c == canonical) {
            group.push((canonical, member));
        }
    }
    for (connector, by_loose) in groups {
        let Some(health) = connectors.get_mut(&connector) else {
            continue;
        };
        let mut found: Vec<NearDuplicate> = by_loose
            .into_values()
            .filter(|group| group.len() > 1)
            .map(|group| {
                let mut members: Vec<LivePartition> = group.into_iter().map(|(_, m)| m).collect();
                members.sort();
                NearDuplicate { members }
            })
            .collect();
        found.sort_by(|a, b| a.members.cmp(&b.members));
        health.near_duplicates = found;
    }
}

fn undecodable(key: &[u8], value: Option<&[u8]>, reason: &str) -> Undecodable {
    Undecodable {
        key: preview(key),
        value: value.map(preview),
        reason: reason.to_owned(),
    }
}

fn map_text(map: Option<&ConnectMap>) -> String {
    map.map_or_else(
        || "null".to_owned(),
        |m| String::from_utf8_lossy(&encode_value(m)).into_owned(),
    )
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The readable report.
impl fmt::Display for DoctorReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} read ({}); {} in {}",
            plural(self.records, "record", "records"),
            plural(self.tombstones, "tombstone", "tombstones"),
            plural(self.live, "live offset", "live offsets"),
            plural(self.connectors.len(), "connector", "connectors"),
        )?;
        for health in &self.connectors {
            writeln!(f)?;
            write!(
                f,
                "connector {:?}: {}, {}, {}",
                health.connector,
                plural(health.live, "live partition", "live partitions"),
                plural(health.records, "record", "records"),
                plural(health.tombstones, "tombstone", "tombstones"),
            )?;
            if health.findings() == 0 {
                writeln!(f, " — OK")?;
                continue;
            }
            writeln!(f)?;
            write_connector_findings(f, health)?;
        }
        if !self.undecodable_keys.is_empty() {
            writeln!(f)?;
            writeln!(
                f,
                "UNDECODABLE KEYS: {} not Kafka Connect offset keys (no connector can read them):",
                plural(
                    self.undecodable_keys.len(),
                    "record's key is",
                    "records' keys are"
                )
            )?;
            for bad in &self.undecodable_keys {
                writeln!(f, "    {}: {}", bad.key, bad.reason)?;
            }
        }
        writeln!(f)?;
        match self.findings() {
            0 => writeln!(f, "RESULT: no mismatch found"),
            n => writeln!(
                f,
                "RESULT: {} found",
                plural(n, "likely mismatch", "likely mismatches")
            ),
        }
    }
}

fn write_connector_findings(f: &mut fmt::Formatter<'_>, health: &ConnectorHealth) -> fmt::Result {
    for group in &health.key_variants {
        writeln!(
            f,
            "  KEY VARIANTS: partition {} was written under {} ({}). Ferry reads them as one \
             partition, the last write winning; Kafka Connect compares key bytes and reads them as \
             different partitions, so a worker there may resume from the wrong one. Make the task \
             build its partition map in one field order.",
            group.partition,
            plural(group.variants.len(), "key", "different keys"),
            if group.live {
                "live"
            } else {
                "removed by its last write"
            },
        )?;
        for variant in &group.variants {
            writeln!(
                f,
                "    {}  {}{}{}",
                variant.key,
                plural(variant.records, "record", "records"),
                if variant.tombstones > 0 {
                    format!(
                        " ({})",
                        plural(variant.tombstones, "tombstone", "tombstones")
                    )
                } else {
                    String::new()
                },
                if variant.last { "  <- last write" } else { "" },
            )?;
        }
    }
    for group in &health.near_duplicates {
        writeln!(
            f,
            "  NEAR-DUPLICATES: {} live partitions differ only in value type, number form or key case; \
             a task whose partition map drifted starts over under the new form instead of resuming. \
             Once the task uses one form, remove the stale one with `ferry offsets reset --partition`:",
            group.members.len()
        )?;
        for member in &group.members {
            writeln!(f, "    {}  offset {}", member.partition, member.offset)?;
        }
    }
    for bad in &health.undecodable_values {
        writeln!(
            f,
            "  UNDECODABLE VALUE of {}: {} ({})",
            bad.key,
            bad.value.as_deref().unwrap_or("null"),
            bad.reason
        )?;
    }
    Ok(())
}
