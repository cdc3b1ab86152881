//! Moving offsets between stores and checking them: the versioned export document, the Kafka Connect
//! offsets-topic dump, and the doctor's analysis. Pure: no store and no I/O here, so every rule is
//! unit-tested; the `ferry offsets export|import|doctor` commands read and write the stores.
//!
//! # The export document (`"format":"ferry-offsets"`, version 1)
//!
//! ```json
//! {
//!   "format": "ferry-offsets",
//!   "version": 1,
//!   "source": "file /var/lib/ferry/offsets",
//!   "exported_at": "2025-03-01T12:00:00Z",
//!   "offsets": [
//!     {"connector":"src","partition":{"filename":"/in.txt"},"offset":{"position":42},"key":"[\"src\",{\"filename\":\"/in.txt\"}]","value":"{\"position\":42}"}
//!   ]
//! }
//! ```
//!
//! `key` and `value` are the stored bytes as JSON strings, verbatim: an import writes exactly these
//! bytes, so keys stay byte-identical to what Kafka Connect (or another writer) wrote, whatever their
//! field order or number spelling. `connector`, `partition` and `offset` are the decoded forms, for
//! people. An entry may leave out `key` (then it is encoded from `connector` and `partition`) or
//! `value` (encoded from `offset`); when both forms are present they must agree, so an edit of one
//! and not the other is refused rather than guessed. `offset: null` (or `value: null`) is a tombstone:
//! the import removes that partition's offset. One entry per partition.
//!
//! # The Kafka Connect dump
//!
//! One record per line, `key<TAB>value`, as `kafka-console-consumer --property print.key=true` prints
//! an offsets topic; a value `null` is a tombstone. Later lines win (they are later records of the
//! topic); lines of one partition with different key bytes (field order) count as one partition,
//! and the last line's bytes are written. Empty lines and lines starting with `#` are skipped.
//!
//! # Validation
//!
//! [`parse_import`] checks the whole input before anything is written: every key must decode as a
//! Kafka Connect offset key and every value as an offset map or a tombstone. Every problem is
//! reported with its entry or line; an input with any problem yields no writes at all.

mod doctor;
mod document;
mod dump;
mod time;

use std::collections::BTreeSet;
use std::fmt;
use std::hash::{BuildHasher, Hasher, RandomState};

use hashbrown::HashTable;

use ferry_api::ConnectMap;

use crate::codec::{canonical_partition, decode_key};
use crate::store::{OffsetWrite, Span, WriteBatch};

pub use doctor::{
    ConnectorHealth, DoctorReport, KeyVariant, KeyVariants, LivePartition, NearDuplicate,
    Undecodable, diagnose,
};
pub use document::{
    DOCUMENT_FORMAT, DOCUMENT_VERSION, ExportDocument, ExportReport, ExportWriter, Skipped,
    export_document,
};
pub use time::rfc3339_utc;

/// The format of an import input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    /// Ferry's export document.
    Ferry,
    /// A Kafka Connect offsets topic printed as `key<TAB>value` lines.
    KafkaConnectDump,
}

impl fmt::Display for InputFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InputFormat::Ferry => "Ferry offsets document",
            InputFormat::KafkaConnectDump => "Kafka Connect offsets dump",
        })
    }
}

/// Where a record of an import input came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Entry `index` (1-based) of a document's `offsets`, starting on `line` (1-based).
    Entry {
        /// 1-based position in `offsets`.
        index: usize,
        /// 1-based line of the input where the entry starts.
        line: usize,
    },
    /// A line (1-based) of a dump.
    Line(usize),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Entry { index, line } => write!(f, "entry {index} (line {line})"),
            Origin::Line(line) => write!(f, "line {line}"),
        }
    }
}

/// One validated write of an import: the exact bytes to write and their decoded forms (a copy, made
/// on demand by [`ImportPlan::record`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ImportRecord {
    /// Where it came from.
    pub origin: Origin,
    /// The key bytes to write.
    pub key: Vec<u8>,
    /// The value bytes to write; `None` writes a tombstone.
    pub value: Option<Vec<u8>>,
    /// The connector (decoded from the key).
    pub connector: String,
}

/// A whole import input, validated: exactly what the import writes, one record per partition.
///
/// Held compactly, as a plan of a million records must stay close to the size of its bytes: the
/// keys and values in one [`WriteBatch`] arena, an origin per record, and the connectors only
/// counted (each record's is in its key).
#[derive(Debug, Clone, PartialEq)]
pub struct ImportPlan {
    /// The format the input was read as.
    pub format: InputFormat,
    /// The writes, in input order of each partition's first appearance.
    batch: WriteBatch,
    /// Where each write came from.
    origins: Origins,
    /// Distinct connectors among the writes.
    connectors: usize,
    /// Dump lines replaced by a later line of the same partition (always 0 for a document).
    pub superseded: usize,
}

impl ImportPlan {
    /// The number of records (one per partition).
    pub fn len(&self) -> usize {
        self.batch.len()
    }

    /// Whether the plan writes nothing.
    pub fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }

    /// Record `index` (in plan order), copied out.
    ///
    /// # Panics
    /// `index` is out of range.
    pub fn record(&self, index: usize) -> ImportRecord {
        let (key, value) = self.batch.get(index);
        ImportRecord {
            origin: self.origins.get(index),
            key: key.to_vec(),
            value: value.map(<[u8]>::to_vec),
            // Every key in a plan decoded when it was added.
            connector: decode_key(key).map(|k| k.connector).unwrap_or_default(),
        }
    }

    /// Every record, in plan order, copied out one at a time.
    pub fn records(&self) -> impl Iterator<Item = ImportRecord> + '_ {
        (0..self.len()).map(|i| self.record(i))
    }

    /// Where each record came from, in plan order.
    pub fn origins(&self) -> &Origins {
        &self.origins
    }

    /// The writes as one store batch of owned writes (a copy of every key and value).
    pub fn writes(&self) -> Vec<OffsetWrite> {
        self.batch.to_writes()
    }

    /// The writes as one compact store batch, moved out of the plan, with the origin of each (for
    /// messages): no copy of the bytes.
    pub fn into_batch(self) -> (WriteBatch, Origins) {
        (self.batch, self.origins)
    }

    /// Counts for the import's summary line.
    pub fn summary(&self) -> ImportSummary {
        let offsets = self.batch.iter().filter(|(_, v)| v.is_some()).count();
        ImportSummary {
            offsets,
            tombstones: self.len() - offsets,
            connectors: self.connectors,
        }
    }
}

/// The origin of each record of a plan, held compactly: a dump's are line numbers, 8 bytes each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origins {
    /// Every origin is a [`Origin::Line`].
    Lines(Vec<u64>),
    /// Any origins.
    Any(Vec<Origin>),
}

impl Default for Origins {
    fn default() -> Self {
        Origins::Lines(Vec::new())
    }
}

impl Origins {
    /// Origin `index`.
    ///
    /// # Panics
    /// `index` is out of range.
    pub fn get(&self, index: usize) -> Origin {
        match self {
            // A line number as `usize` was stored: it fits back.
            Origins::Lines(lines) => {
                Origin::Line(usize::try_from(lines[index]).unwrap_or(usize::MAX))
            }
            Origins::Any(origins) => origins[index],
        }
    }

    /// The number of origins.
    pub fn len(&self) -> usize {
        match self {
            Origins::Lines(lines) => lines.len(),
            Origins::Any(origins) => origins.len(),
        }
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn push(&mut self, origin: Origin) {
        match (&mut *self, origin) {
            (Origins::Lines(lines), Origin::Line(line)) => lines.push(line as u64),
            (Origins::Any(origins), origin) => origins.push(origin),
            (Origins::Lines(_), origin) => {
                let mut all: Vec<Origin> = (0..self.len()).map(|i| self.get(i)).collect();
                all.push(origin);
                *self = Origins::Any(all);
            }
        }
    }

    fn replace(&mut self, index: usize, origin: Origin) -> Origin {
        let earlier = self.get(index);
        match (&mut *self, origin) {
            (Origins::Lines(lines), Origin::Line(line)) => lines[index] = line as u64,
            (Origins::Any(origins), origin) => origins[index] = origin,
            (Origins::Lines(_), origin) => {
                let mut all: Vec<Origin> = (0..self.len()).map(|i| self.get(i)).collect();
                all[index] = origin;
                *self = Origins::Any(all);
            }
        }
        earlier
    }
}

/// What an import writes, counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportSummary {
    /// Offsets written.
    pub offsets: usize,
    /// Tombstones written (partitions whose offset is removed).
    pub tombstones: usize,
    /// Connectors concerned.
    pub connectors: usize,
}

impl fmt::Display for ImportSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        write!(
            f,
            "{} for {}, {}",
            plural(self.offsets, "offset", "offsets"),
            plural(self.connectors, "connector", "connectors"),
            plural(self.tombstones, "tombstone", "tombstones"),
        )
    }
}

/// One problem found in an import input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The entry or line; `None` for the input as a whole.
    pub origin: Option<Origin>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            Some(origin) => write!(f, "{origin}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Problems shown in an error message; the rest are counted.
const SHOWN_PROBLEMS: usize = 20;

/// Why an import input was refused. Nothing may be written when parsing fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    /// The input as a whole cannot be read (empty, not UTF-8, not JSON, not a Ferry document).
    #[error("{0}")]
    Unreadable(String),
    /// A Ferry document of a version this build does not read.
    #[error(
        "the document is version {found} of the {DOCUMENT_FORMAT:?} format, but this build of Ferry \
         reads only version {DOCUMENT_VERSION}; import it with the Ferry release that exported it (or a \
         newer one)"
    )]
    UnsupportedVersion {
        /// The version found, as written.
        found: String,
    },
    /// Entries or lines that are not valid offsets.
    #[error("{}", render_problems(.0))]
    Invalid(Vec<Problem>),
}

fn render_problems(problems: &[Problem]) -> String {
    let lines = problems
        .iter()
        .any(|p| matches!(p.origin, Some(Origin::Line(_))));
    let what = match (lines, problems.len()) {
        (true, 1) => "line",
        (true, _) => "lines",
        (false, 1) => "entry",
        (false, _) => "entries",
    };
    let mut out = format!("{} invalid {what}:", problems.len());
    for problem in problems.iter().take(SHOWN_PROBLEMS) {
        out.push_str("\n  ");
        out.push_str(&problem.to_string());
    }
    if problems.len() > SHOWN_PROBLEMS {
        out.push_str(&format!(
            "\n  … and {} more",
            problems.len() - SHOWN_PROBLEMS
        ));
    }
    out
}

/// Guesses the format of an input: a Ferry document is a JSON object (`{`); a dump line starts with a
/// key array (`[`), possibly after comment lines.
pub fn detect_format(text: &str) -> InputFormat {
    match text
        .trim_start_matches('\u{feff}')
        .trim_start()
        .as_bytes()
        .first()
    {
        Some(b'{') => InputFormat::Ferry,
        _ => InputFormat::KafkaConnectDump,
    }
}

/// Parses and validates a whole import input, as `format` or, when `None`, as [`detect_format`]
/// guesses.
///
/// # Errors
/// The input is unreadable, of an unsupported version, or has invalid entries; every invalid entry is
/// listed. The caller must then write nothing.
pub fn parse_import(input: &[u8], format: Option<InputFormat>) -> Result<ImportPlan, ImportError> {
    parse_import_owned(input.to_vec(), format)
}

/// [`parse_import`] of an input the plan may keep: a dump's plan holds its keys and values where
/// they are in the input (no copy), so an import of a million offsets holds their bytes once.
///
/// # Errors
/// As [`parse_import`].
pub fn parse_import_owned(
    input: Vec<u8>,
    format: Option<InputFormat>,
) -> Result<ImportPlan, ImportError> {
    let text = std::str::from_utf8(&input).map_err(|e| {
        ImportError::Unreadable(format!(
            "the input is not UTF-8 text (invalid byte at offset {})",
            e.valid_up_to()
        ))
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Err(ImportError::Unreadable(
            "the input is empty: there is nothing to import".to_owned(),
        ));
    }
    match format.unwrap_or_else(|| detect_format(text)) {
        InputFormat::Ferry => document::parse(text),
        InputFormat::KafkaConnectDump => {
            let (builder, superseded) = dump::parse(&input, text)?;
            // The TAB between key and value.
            Ok(builder.finish(input, 1, InputFormat::KafkaConnectDump, superseded))
        }
    }
}

/// Whether two maps are logically equal (field order and integer width aside).
fn same_map(a: &ConnectMap, b: &ConnectMap) -> bool {
    canonical_partition(Some(a)) == canonical_partition(Some(b))
}

/// The records of a plan being built, one per partition, as spans of a byte buffer the caller holds
/// (the input itself for a dump, parsed in place), and an index of them by the hash of (connector,
/// canonical partition): positions only (no copy of the key per record), so a plan of a million
/// records costs little more than its bytes. A hash match is confirmed by decoding the earlier
/// record's key again, which happens only for real duplicates (or a rare collision).
#[derive(Default)]
struct PlanBuilder {
    spans: Vec<Span>,
    origins: Origins,
    connectors: BTreeSet<String>,
    index: HashTable<usize>,
    hasher: RandomState,
}

/// Connector and canonical partition of a key already in the plan (every one decoded when added).
fn identity(key: &[u8]) -> (String, Vec<u8>) {
    decode_key(key)
        .map(|k| (k.connector, canonical_partition(k.partition.as_ref())))
        .unwrap_or_default()
}

impl PlanBuilder {
    fn hash(hasher: &RandomState, connector: &str, canonical: &[u8]) -> u64 {
        let mut h = hasher.build_hasher();
        h.write(connector.as_bytes());
        h.write_u8(0xff);
        h.write(canonical);
        h.finish()
    }

    /// Adds the record `span` locates in `bytes` (the buffer every span of this builder points
    /// into), of `connector`, whose decoded partition is `partition`; returns the origin of an
    /// earlier record of the same partition, which it replaced.
    fn upsert(
        &mut self,
        bytes: &[u8],
        origin: Origin,
        span: Span,
        connector: &str,
        partition: Option<&ConnectMap>,
    ) -> Option<Origin> {
        let canonical = canonical_partition(partition);
        let hash = Self::hash(&self.hasher, connector, &canonical);
        let spans = &self.spans;
        let same = |&at: &usize| {
            decode_key(spans[at].key(bytes)).is_ok_and(|k| {
                k.connector == connector && canonical_partition(k.partition.as_ref()) == canonical
            })
        };
        if let Some(&at) = self.index.find(hash, same) {
            self.spans[at] = span;
            return Some(self.origins.replace(at, origin));
        }
        let at = self.spans.len();
        self.spans.push(span);
        self.origins.push(origin);
        if !self.connectors.contains(connector) {
            self.connectors.insert(connector.to_owned());
        }
        let (spans, hasher) = (&self.spans, &self.hasher);
        self.index.insert_unique(hash, at, |&i| {
            let (connector, canonical) = identity(spans[i].key(bytes));
            Self::hash(hasher, &connector, &canonical)
        });
        None
    }

    /// The plan built, over `bytes` (each value `gap` bytes after its key).
    fn finish(
        self,
        bytes: Vec<u8>,
        gap: usize,
        format: InputFormat,
        superseded: usize,
    ) -> ImportPlan {
        ImportPlan {
            format,
            batch: WriteBatch::from_parts(bytes, self.spans, gap),
            origins: self.origins,
            connectors: self.connectors.len(),
            superseded,
        }
    }
}

/// Text of bytes for messages, shortened.
fn preview(bytes: &[u8]) -> String {
    const MAX: usize = 200;
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX)]).into_owned();
    if bytes.len() > MAX {
        format!("{text}…")
    } else {
        text
    }
}

#[cfg(test)]
mod tests;
