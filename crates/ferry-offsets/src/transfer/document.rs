//! The export document: writing it from a store's entries, and reading it back, validated.

use std::collections::BTreeSet;
use std::io::{self, Write};

use ferry_api::ConnectMap;
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::{
    ImportError, ImportPlan, InputFormat, Origin, PlanBuilder, Problem, preview, same_map,
};
use crate::codec::{
    CodecError, canonical_partition, decode_key, decode_value, encode_key, encode_value,
};
use crate::store::{Span, StoredOffset};

/// The `format` of the document.
pub const DOCUMENT_FORMAT: &str = "ferry-offsets";
/// The only `version` this build writes and reads.
pub const DOCUMENT_VERSION: u64 = 1;

/// Top-level fields of a version 1 document.
const FIELDS: &[&str] = &["format", "version", "source", "exported_at", "offsets"];

/// An export document, ready to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportDocument {
    /// The JSON text, one entry per line, ending with a newline.
    pub text: String,
    /// Offsets in the document.
    pub offsets: usize,
    /// Connectors in the document.
    pub connectors: usize,
    /// Stored records left out because they cannot be decoded (an import would refuse them).
    pub skipped: Vec<Skipped>,
}

/// A stored record the export left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The key, as text (shortened).
    pub key: String,
    /// Why it cannot be exported.
    pub reason: String,
}

/// Writes the document for `entries` (a store's live offsets), sorted by connector and key bytes so
/// two exports of the same offsets are equal whatever the store. `source` describes the store,
/// `exported_at` is an RFC 3339 time. The whole document in memory: for a store, stream it with
/// [`ExportWriter`] and [`OffsetBackingStore::visit_sorted`](crate::OffsetBackingStore::visit_sorted).
pub fn export_document(
    source: &str,
    exported_at: &str,
    mut entries: Vec<StoredOffset>,
) -> ExportDocument {
    crate::store::sort_for_export(&mut entries);
    let mut writer = ExportWriter::new(Vec::new(), source, exported_at);
    for (key, value) in &entries {
        writer.entry(key, value);
    }
    // Writing to a Vec cannot fail.
    let (text, report) = writer.finish().unwrap_or_default();
    ExportDocument {
        text: String::from_utf8_lossy(&text).into_owned(),
        offsets: report.offsets,
        connectors: report.connectors,
        skipped: report.skipped,
    }
}

/// What an [`ExportWriter`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportReport {
    /// Offsets in the document.
    pub offsets: usize,
    /// Connectors in the document.
    pub connectors: usize,
    /// Stored records left out because they cannot be decoded (an import would refuse them), in
    /// the order they came.
    pub skipped: Vec<Skipped>,
}

/// Writes an export document entry by entry, so a large store is exported without holding the
/// document (or a copy of the offsets) in memory. Entries must come sorted by connector and key
/// bytes ([`OffsetBackingStore::visit_sorted`](crate::OffsetBackingStore::visit_sorted)'s order)
/// for the document to equal [`export_document`]'s. The first write error is kept and returned by
/// [`finish`](Self::finish); later entries are then dropped.
pub struct ExportWriter<W: Write> {
    out: W,
    error: Option<io::Error>,
    report: ExportReport,
    /// Connector names seen (a store has few connectors).
    connectors: BTreeSet<String>,
    line: Vec<u8>,
}

impl<W: Write> ExportWriter<W> {
    /// Starts the document: writes its header to `out` (buffer it: entries are small writes).
    pub fn new(out: W, source: &str, exported_at: &str) -> Self {
        let mut writer = Self {
            out,
            error: None,
            report: ExportReport::default(),
            connectors: BTreeSet::new(),
            line: Vec::with_capacity(512),
        };
        let header = format!(
            "{{\n  \"format\": {},\n  \"version\": {DOCUMENT_VERSION},\n  \"source\": {},\n  \
             \"exported_at\": {},\n",
            json_string(DOCUMENT_FORMAT),
            json_string(source),
            json_string(exported_at)
        );
        writer.write(header.as_bytes());
        writer
    }

    fn write(&mut self, bytes: &[u8]) {
        if self.error.is_none()
            && let Err(e) = self.out.write_all(bytes)
        {
            self.error = Some(e);
        }
    }

    /// Adds one stored offset, or records it as skipped when it cannot be decoded.
    pub fn entry(&mut self, key: &[u8], value: &[u8]) {
        if self.error.is_some() {
            return;
        }
        let connector = match export_entry(key, value) {
            Ok((connector, line)) => {
                self.line.clear();
                self.line.extend_from_slice(if self.report.offsets == 0 {
                    b"  \"offsets\": [\n    "
                } else {
                    b",\n    "
                });
                self.line.extend_from_slice(line.as_bytes());
                connector
            }
            Err(e) => {
                self.report.skipped.push(Skipped {
                    key: preview(key),
                    reason: e.to_string(),
                });
                return;
            }
        };
        let line = std::mem::take(&mut self.line);
        self.write(&line);
        self.line = line;
        self.report.offsets += 1;
        if !self.connectors.contains(&connector) {
            self.connectors.insert(connector);
        }
    }

    /// Ends the document and flushes `out`.
    ///
    /// # Errors
    /// The first error writing to `out`.
    pub fn finish(mut self) -> io::Result<(W, ExportReport)> {
        let tail: &[u8] = if self.report.offsets == 0 {
            b"  \"offsets\": []\n}\n"
        } else {
            b"\n  ]\n}\n"
        };
        self.write(tail);
        if let Some(e) = self.error {
            return Err(e);
        }
        self.out.flush()?;
        self.report.connectors = self.connectors.len();
        Ok((self.out, self.report))
    }
}

/// Why a stored record cannot be exported.
#[derive(Debug, Clone, thiserror::Error)]
enum ExportEntryError {
    #[error(transparent)]
    Codec(#[from] CodecError),
    #[error("the key is not UTF-8: {0}")]
    KeyNotUtf8(#[source] std::str::Utf8Error),
    #[error("the value is not UTF-8: {0}")]
    ValueNotUtf8(#[source] std::str::Utf8Error),
}

/// One entry line: (connector, JSON), or why the record cannot be exported.
fn export_entry(key: &[u8], value: &[u8]) -> Result<(String, String), ExportEntryError> {
    let decoded = decode_key(key)?;
    let offset = decode_value(value)?;
    // Both decoded as JSON, so both are UTF-8.
    let key_text = std::str::from_utf8(key).map_err(ExportEntryError::KeyNotUtf8)?;
    let value_text = std::str::from_utf8(value).map_err(ExportEntryError::ValueNotUtf8)?;
    let partition = decoded.partition.as_ref().map_or_else(
        || "null".to_owned(),
        |p| String::from_utf8_lossy(&encode_value(p)).into_owned(),
    );
    let line = format!(
        "{{\"connector\":{},\"partition\":{partition},\"offset\":{},\"key\":{},\"value\":{}}}",
        json_string(&decoded.connector),
        String::from_utf8_lossy(&encode_value(&offset)),
        json_string(key_text),
        json_string(value_text),
    );
    Ok((decoded.connector, line))
}

/// serde_json's escaping, not Jackson's ([`crate::jackson::write_string`]): this is the `ferry offsets
/// export` format, whose bytes must not change (serde_json writes control characters as `\u001f`,
/// Jackson as `\u001F`). The line is not compared byte-wise with anything Kafka Connect writes.
fn json_string(s: &str) -> String {
    // Serializing a str cannot fail.
    serde_json::to_string(s).unwrap_or_default()
}

/// One entry as written. A field given as `null` is `Some(None)`; a missing one is `None`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    #[serde(default)]
    connector: Option<String>,
    #[serde(default, deserialize_with = "present")]
    partition: Option<Option<Box<RawValue>>>,
    #[serde(default, deserialize_with = "present")]
    offset: Option<Option<Box<RawValue>>>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default, deserialize_with = "present")]
    value: Option<Option<String>>,
}

/// Distinguishes a field present as `null` from a missing one.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Reads a document: the header first (so an unknown version is refused before anything else), then
/// every entry.
pub(super) fn parse(text: &str) -> Result<ImportPlan, ImportError> {
    let not_json = |e: serde_json::Error| {
        ImportError::Unreadable(format!(
            "the input starts like a Ferry offsets document (a JSON object) but is not valid JSON: {e}"
        ))
    };
    let fields: std::collections::BTreeMap<String, IgnoredAny> =
        serde_json::from_str(text).map_err(not_json)?;
    let top: TopBorrowed<'_> = serde_json::from_str(text).map_err(not_json)?;
    check_header(&top, &fields)?;
    let Some(entries) = top.offsets else {
        return Err(ImportError::Unreadable(
            "the document has no \"offsets\" array".to_owned(),
        ));
    };
    let lines = LineIndex::new(text);
    let mut builder = PlanBuilder::default();
    // The keys and values, each value right after its key (the entries' are JSON strings, unescaped).
    let mut bytes = Vec::new();
    let mut problems = Vec::new();
    for (i, raw) in entries.iter().enumerate() {
        let origin = Origin::Entry {
            index: i + 1,
            line: lines.line_of(text, raw.get()),
        };
        match parse_entry(raw.get()) {
            Ok((key, value, connector, partition)) => {
                let span = Span::new(bytes.len(), key.len(), value.as_ref().map(Vec::len));
                let span = span.inspect(|_| {
                    bytes.extend_from_slice(&key);
                    bytes.extend_from_slice(value.as_deref().unwrap_or_default());
                });
                let partition = partition.as_ref();
                match span.map(|span| builder.upsert(&bytes, origin, span, &connector, partition)) {
                    Ok(None) => {}
                    Ok(Some(earlier)) => problems.push(Problem {
                        origin: Some(origin),
                        message: format!(
                            "the same partition of connector {connector:?} as {earlier} (a document \
                             has one entry per partition; keys that differ only in field order are \
                             one partition)"
                        ),
                    }),
                    Err(e) => problems.push(Problem {
                        origin: Some(origin),
                        message: e.to_string(),
                    }),
                }
            }
            Err(e) => problems.push(Problem {
                origin: Some(origin),
                message: e.to_string(),
            }),
        }
    }
    if !problems.is_empty() {
        return Err(ImportError::Invalid(problems));
    }
    Ok(builder.finish(bytes, 0, InputFormat::Ferry, 0))
}

/// The top level of a document, fields kept raw so each is checked with its own message; the entries
/// borrow from the input, so each entry's position (its line) is known.
#[derive(Deserialize)]
struct TopBorrowed<'a> {
    format: Option<&'a RawValue>,
    version: Option<&'a RawValue>,
    source: Option<&'a RawValue>,
    exported_at: Option<&'a RawValue>,
    #[serde(borrow)]
    offsets: Option<Vec<&'a RawValue>>,
}

fn check_header(
    top: &TopBorrowed<'_>,
    fields: &std::collections::BTreeMap<String, IgnoredAny>,
) -> Result<(), ImportError> {
    let format: Option<String> = top.format.and_then(|f| serde_json::from_str(f.get()).ok());
    if format.as_deref() != Some(DOCUMENT_FORMAT) {
        return Err(ImportError::Unreadable(format!(
            "the input is a JSON object but not a Ferry offsets document: its \"format\" is {} where \
             {DOCUMENT_FORMAT:?} was expected (to import a Kafka Connect offsets topic, give its \
             key<TAB>value dump, or force the format with --format)",
            top.format.map_or("missing", |f| f.get())
        )));
    }
    let Some(version) = top.version else {
        return Err(ImportError::Unreadable(
            "the document has no \"version\"".to_owned(),
        ));
    };
    if version.get().parse::<u64>() != Ok(DOCUMENT_VERSION) {
        return Err(ImportError::UnsupportedVersion {
            found: version.get().to_owned(),
        });
    }
    let unknown: Vec<&str> = fields
        .keys()
        .map(String::as_str)
        .filter(|k| !FIELDS.contains(k))
        .collect();
    if !unknown.is_empty() {
        return Err(ImportError::Unreadable(format!(
            "the document has unknown top-level field(s) {unknown:?}; version {DOCUMENT_VERSION} has \
             only {FIELDS:?}"
        )));
    }
    for (name, field) in [("source", top.source), ("exported_at", top.exported_at)] {
        if let Some(field) = field
            && !field.get().starts_with('"')
        {
            return Err(ImportError::Unreadable(format!(
                "the document's \"{name}\" is {} where a string was expected",
                field.get()
            )));
        }
    }
    Ok(())
}

/// An entry of a document that is not a valid offset entry.
#[derive(Debug, thiserror::Error)]
enum EntryError {
    #[error("not a valid offset entry: a JSON object was expected, found {preview}")]
    NotObject {
        /// The start of the entry.
        preview: String,
    },
    /// serde's own text, without its line and column (of the entry, not of the document).
    #[error("not a valid offset entry: {}", without_position(.0))]
    Syntax(#[source] serde_json::Error),
    #[error("\"partition\" must be an object of Kafka Connect values or null: {}", .0.reason())]
    Partition(#[source] CodecError),
    #[error("\"key\" is not a Kafka Connect offset key: {0}")]
    Key(#[source] CodecError),
    #[error(
        "\"connector\" is {connector:?} but \"key\" names connector {key_connector:?}; edit both or \
         remove \"key\""
    )]
    ConnectorMismatch {
        connector: String,
        key_connector: String,
    },
    #[error(
        "\"partition\" is {partition} but \"key\" holds partition {key_partition}; edit both or remove \"key\""
    )]
    PartitionMismatch {
        /// The partition given, as JSON.
        partition: String,
        /// The key's partition, as JSON.
        key_partition: String,
    },
    #[error("no \"key\" and no \"connector\": one of them is required")]
    NoConnector,
    #[error("no \"key\" and no \"partition\": give the partition (an object, or null)")]
    NoPartition,
    #[error(
        "\"offset\" must be an object of Kafka Connect values, or null to remove the offset: {}",
        .0.reason()
    )]
    Offset(#[source] CodecError),
    #[error("\"value\" is not a Kafka Connect offset: {0}")]
    Value(#[source] CodecError),
    #[error("\"offset\" is {offset} but \"value\" holds {value}; edit both or remove \"value\"")]
    OffsetMismatch {
        /// The offset given, as JSON.
        offset: String,
        /// The value's offset, as JSON.
        value: String,
    },
    #[error(
        "no \"offset\" (or \"value\"): give the offset, or null to remove the partition's offset"
    )]
    NoOffset,
}

/// serde's message without its ` at line L column C`.
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    text.split(" at line ").next().unwrap_or(&text).to_owned()
}

/// Key bytes, value bytes (`None`: a tombstone), connector, partition.
type ParsedEntry = (Vec<u8>, Option<Vec<u8>>, String, Option<ConnectMap>);

/// Validates one entry: the bytes to write and their decoded forms, or what is wrong.
fn parse_entry(text: &str) -> Result<ParsedEntry, EntryError> {
    if !text.starts_with('{') {
        // serde would read an array as the fields in declaration order.
        return Err(EntryError::NotObject {
            preview: super::preview(text.as_bytes()),
        });
    }
    let entry: Entry = serde_json::from_str(text).map_err(EntryError::Syntax)?;
    let (key, connector, partition) = entry_key(&entry)?;
    let (value, _offset) = entry_value(&entry)?;
    Ok((key, value, connector, partition))
}

/// The key: `key` verbatim when given (checked against `connector` and `partition` when those are
/// given too), else encoded from `connector` and `partition`.
fn entry_key(entry: &Entry) -> Result<(Vec<u8>, String, Option<ConnectMap>), EntryError> {
    let partition = match &entry.partition {
        None => None,
        Some(None) => Some(None),
        Some(Some(raw)) => Some(Some(
            decode_value(raw.get().as_bytes()).map_err(EntryError::Partition)?,
        )),
    };
    match &entry.key {
        Some(key) => {
            let decoded = decode_key(key.as_bytes()).map_err(EntryError::Key)?;
            if let Some(connector) = &entry.connector
                && *connector != decoded.connector
            {
                return Err(EntryError::ConnectorMismatch {
                    connector: connector.clone(),
                    key_connector: decoded.connector,
                });
            }
            if let Some(partition) = &partition
                && canonical_partition(partition.as_ref())
                    != canonical_partition(decoded.partition.as_ref())
            {
                return Err(EntryError::PartitionMismatch {
                    partition: map_text(partition.as_ref()),
                    key_partition: map_text(decoded.partition.as_ref()),
                });
            }
            Ok((
                key.as_bytes().to_vec(),
                decoded.connector,
                decoded.partition,
            ))
        }
        None => {
            let Some(connector) = &entry.connector else {
                return Err(EntryError::NoConnector);
            };
            let Some(partition) = partition else {
                return Err(EntryError::NoPartition);
            };
            Ok((
                encode_key(connector, partition.as_ref()),
                connector.clone(),
                partition,
            ))
        }
    }
}

/// The value: `value` verbatim when given (checked against `offset` when given too), else encoded
/// from `offset`; `None` is a tombstone.
fn entry_value(entry: &Entry) -> Result<(Option<Vec<u8>>, Option<ConnectMap>), EntryError> {
    let offset = match &entry.offset {
        None => None,
        Some(None) => Some(None),
        Some(Some(raw)) => Some(Some(
            decode_value(raw.get().as_bytes()).map_err(EntryError::Offset)?,
        )),
    };
    match &entry.value {
        Some(value) => {
            let decoded = match value {
                Some(text) => Some(decode_value(text.as_bytes()).map_err(EntryError::Value)?),
                None => None,
            };
            if let Some(offset) = &offset {
                let agree = match (offset, &decoded) {
                    (Some(a), Some(b)) => same_map(a, b),
                    (None, None) => true,
                    _ => false,
                };
                if !agree {
                    return Err(EntryError::OffsetMismatch {
                        offset: map_text(offset.as_ref()),
                        value: map_text(decoded.as_ref()),
                    });
                }
            }
            Ok((value.as_ref().map(|v| v.as_bytes().to_vec()), decoded))
        }
        None => match offset {
            None => Err(EntryError::NoOffset),
            Some(offset) => Ok((offset.as_ref().map(encode_value), offset)),
        },
    }
}

fn map_text(map: Option<&ConnectMap>) -> String {
    map.map_or_else(
        || "null".to_owned(),
        |m| String::from_utf8_lossy(&encode_value(m)).into_owned(),
    )
}

/// Line numbers of byte positions in the input.
struct LineIndex {
    /// Byte offset of the start of every line after the first.
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> Self {
        Self {
            starts: text
                .bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i + 1)
                .collect(),
        }
    }

    /// The 1-based line where `part`, a slice of `text`, starts (1 if it is not a slice of `text`).
    fn line_of(&self, text: &str, part: &str) -> usize {
        let offset = (part.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
        if offset > text.len() {
            return 1;
        }
        self.starts.partition_point(|&start| start <= offset) + 1
    }
}
