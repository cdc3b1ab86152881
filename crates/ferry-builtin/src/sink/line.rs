//! The JSON line the file and stdout sinks write for one record.
//!
//! ```text
//! {"topic":"lines","key":null,"value":"hello","headers":[],"timestamp":null,"source_partition":{"filename":"/tmp/in.txt"},"source_offset":{"position":6}}
//! ```
//!
//! Fields always appear, in this order: `topic`, `key`, `value`, `headers`, `timestamp`,
//! `source_partition`, `source_offset`. `key` and `value` are the record's JSON (`null` when absent; a
//! `FileStreamSource` line is a JSON string), `headers` an array of `{"key":…,"value":…}`, `timestamp`
//! milliseconds since the epoch or `null`. `source_partition` and `source_offset` are the bytes Kafka
//! Connect's JsonConverter writes for those maps (see [`ferry_offsets::encode_value`]), or `null`.
//!
//! The output never contains a raw newline, so one record is exactly one line.

use std::io::Write as _;

use ferry_api::{ConnectMap, SourceRecord, Value};
use ferry_offsets::jackson;

/// The bytes of a line besides its values (field names, brackets, separators: 90) and room for a
/// timestamp.
const FRAME_LEN: usize = 104;

/// What the file and stdout sinks write for each record (the worker key `sink.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LineFormat {
    /// `json` (default): the JSON envelope above, with the record's source partition and offset.
    #[default]
    Json,
    /// `value`: the value alone, as Kafka Connect's FileStreamSink writes it — a string as it is,
    /// any other value as compact JSON, no value as `null`. A string holding a newline spans lines,
    /// as in Kafka Connect.
    Value,
}

impl LineFormat {
    /// The worker key choosing the format.
    pub const KEY: &'static str = "sink.format";

    /// `json` or `value` (any case, trimmed).
    pub fn parse(text: &str) -> Option<LineFormat> {
        match text.trim().to_ascii_lowercase().as_str() {
            "json" => Some(LineFormat::Json),
            "value" => Some(LineFormat::Value),
            _ => None,
        }
    }

    /// Its name in the worker file.
    pub fn name(self) -> &'static str {
        match self {
            LineFormat::Json => "json",
            LineFormat::Value => "value",
        }
    }
}

/// Formats `record` as one line in `format`, including the terminating `\n`.
pub fn record_line(record: &SourceRecord, format: LineFormat) -> Vec<u8> {
    let mut out = Vec::new();
    append_record_line(&mut out, record, format);
    out
}

/// Appends `record`'s line in `format` (with its `\n`) to `out`: the writer formats straight into
/// its queue, with no buffer per record.
pub fn append_record_line(out: &mut Vec<u8>, record: &SourceRecord, format: LineFormat) {
    match format {
        LineFormat::Json => append_json_line(out, record),
        LineFormat::Value => append_value_line(out, record),
    }
}

/// The value alone (see [`LineFormat::Value`]), including the terminating `\n`.
pub fn record_value_line(record: &SourceRecord) -> Vec<u8> {
    record_line(record, LineFormat::Value)
}

fn append_value_line(out: &mut Vec<u8>, record: &SourceRecord) {
    match &record.value {
        Some(serde_json::Value::String(text)) => out.extend_from_slice(text.as_bytes()),
        value => write_optional_json(out, value.as_ref()),
    }
    out.push(b'\n');
}

/// Formats `record` as one JSON line, including the terminating `\n`.
pub fn record_json_line(record: &SourceRecord) -> Vec<u8> {
    record_line(record, LineFormat::Json)
}

fn append_json_line(out: &mut Vec<u8>, record: &SourceRecord) {
    // Reserved up front: growing the buffer line by line would reallocate it more often.
    out.reserve(estimated_len(record));
    out.extend_from_slice(b"{\"topic\":");
    write_json(out, &record.topic);
    out.extend_from_slice(b",\"key\":");
    write_optional_json(out, record.key.as_ref());
    out.extend_from_slice(b",\"value\":");
    write_optional_json(out, record.value.as_ref());
    out.extend_from_slice(b",\"headers\":[");
    for (i, header) in record.headers.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"key\":");
        write_json(out, &header.key);
        out.extend_from_slice(b",\"value\":");
        write_json(out, &header.value);
        out.push(b'}');
    }
    out.extend_from_slice(b"],\"timestamp\":");
    match record.timestamp {
        // Formatted in place (writing into a Vec cannot fail).
        Some(millis) => {
            let _ = write!(out, "{millis}");
        }
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"source_partition\":");
    write_map(out, record.source_partition.as_ref());
    out.extend_from_slice(b",\"source_offset\":");
    write_map(out, record.source_offset.as_ref());
    out.extend_from_slice(b"}\n");
}

fn write_optional_json(out: &mut Vec<u8>, value: Option<&serde_json::Value>) {
    match value {
        Some(value) => write_json(out, value),
        None => out.extend_from_slice(b"null"),
    }
}

/// Appends compact JSON. Serializing a string or a `serde_json::Value` into a `Vec` cannot fail (its
/// map keys are strings, its numbers finite); should it ever, the field is written as `null` rather
/// than leaving half a value in the line.
fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    let start = out.len();
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.truncate(start);
        out.extend_from_slice(b"null");
    }
}

/// Writes `map` as [`ferry_offsets::encode_value`] does (Kafka Connect's JsonConverter bytes), without
/// its intermediate buffers; a map holding bytes (base64) is left to `encode_value` itself.
fn write_map(out: &mut Vec<u8>, map: Option<&ConnectMap>) {
    let Some(map) = map else {
        out.extend_from_slice(b"null");
        return;
    };
    if map.iter().any(|(_, v)| matches!(v, Value::Bytes(_))) {
        out.extend_from_slice(&ferry_offsets::encode_value(map));
        return;
    }
    out.push(b'{');
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        jackson::write_string(out, key);
        out.push(b':');
        match value {
            Value::Null => out.extend_from_slice(b"null"),
            Value::Bool(true) => out.extend_from_slice(b"true"),
            Value::Bool(false) => out.extend_from_slice(b"false"),
            // Writing into a Vec cannot fail.
            Value::Int8(v) => drop(write!(out, "{v}")),
            Value::Int16(v) => drop(write!(out, "{v}")),
            Value::Int32(v) => drop(write!(out, "{v}")),
            Value::Int64(v) => drop(write!(out, "{v}")),
            Value::Float32(v) => jackson::write_f32(out, *v),
            Value::Float64(v) => jackson::write_f64(out, *v),
            Value::String(s) => jackson::write_string(out, s),
            // Handled above.
            Value::Bytes(_) => out.extend_from_slice(b"null"),
        }
    }
    out.push(b'}');
}

/// About the length of the record's line: exact for string values and plain maps, a guess otherwise.
fn estimated_len(record: &SourceRecord) -> usize {
    fn json_len(value: Option<&serde_json::Value>) -> usize {
        match value {
            None => 4,
            Some(serde_json::Value::String(s)) => s.len() + 2,
            Some(_) => 64,
        }
    }
    fn map_len(map: Option<&ConnectMap>) -> usize {
        map.map_or(4, |map| {
            map.iter()
                .map(|(key, value)| {
                    key.len()
                        + match value {
                            Value::String(s) => s.len() + 2,
                            _ => 20,
                        }
                        + 4
                })
                .sum::<usize>()
                + 2
        })
    }
    FRAME_LEN
        + record.topic.len()
        + json_len(record.key.as_ref())
        + json_len(record.value.as_ref())
        + record
            .headers
            .iter()
            .map(|h| h.key.len() + json_len(Some(&h.value)) + 20)
            .sum::<usize>()
        + map_len(record.source_partition.as_ref())
        + map_len(record.source_offset.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_are_written_exactly_as_the_offset_codec_writes_them() {
        let maps = [
            Ok(ConnectMap::new()),
            ConnectMap::new()
                .with("filename", "/var/log/a \"b\"\\c\u{1}\n.log")
                .and_then(|m| m.with("position", 9_007_199_254_740_993_i64)),
            ConnectMap::new()
                .with("z", 1_i8)
                .and_then(|m| m.with("a", -2_i16))
                .and_then(|m| m.with("m", i32::MIN))
                .and_then(|m| m.with("f", 1.0e10_f64))
                .and_then(|m| m.with("g", 0.1_f32))
                .and_then(|m| m.with("t", true))
                .and_then(|m| m.with("n", Value::Null))
                .and_then(|m| m.with("u", "ünïcödé/€")),
            ConnectMap::new()
                .with("bytes", Value::Bytes(vec![0, 255, 7]))
                .and_then(|m| m.with("x", 1.5_f64)),
        ];
        for map in maps {
            let map = map.expect("a valid map");
            let mut out = Vec::new();
            write_map(&mut out, Some(&map));
            assert_eq!(
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&ferry_offsets::encode_value(&map)),
            );
        }
        let mut out = Vec::new();
        write_map(&mut out, None);
        assert_eq!(out, b"null");
    }

    #[test]
    fn strings_are_escaped_exactly_as_jackson_escapes_them() {
        let mut samples: Vec<String> = (0u8..=0x7F).map(|b| char::from(b).to_string()).collect();
        samples.push((0u8..=0x7F).map(char::from).collect());
        samples.push("/var/log/app-1.log".to_owned());
        samples.push("ünïcödé € \u{10FFFF} \\\"\n".to_owned());
        samples.push(String::new());
        for sample in samples {
            let (mut ours, mut theirs) = (b"x".to_vec(), b"x".to_vec());
            jackson::write_string(&mut ours, &sample);
            jackson_reference(&mut theirs, &sample);
            assert_eq!(ours, theirs, "{sample:?}");
        }
    }

    /// Jackson's escaping, one byte at a time: the sink's lines use the shared, run-copying writer.
    fn jackson_reference(out: &mut Vec<u8>, s: &str) {
        out.push(b'"');
        for c in s.chars() {
            match c {
                '"' => out.extend_from_slice(b"\\\""),
                '\\' => out.extend_from_slice(b"\\\\"),
                '\u{8}' => out.extend_from_slice(b"\\b"),
                '\t' => out.extend_from_slice(b"\\t"),
                '\n' => out.extend_from_slice(b"\\n"),
                '\u{c}' => out.extend_from_slice(b"\\f"),
                '\r' => out.extend_from_slice(b"\\r"),
                c if u32::from(c) < 0x20 => {
                    out.extend_from_slice(format!("\\u{:04X}", u32::from(c)).as_bytes());
                }
                c => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
            }
        }
        out.push(b'"');
    }

    #[test]
    fn the_estimate_is_close_for_a_file_line() {
        let partition = ConnectMap::new()
            .with("filename", "/var/log/app.log")
            .expect("partition");
        let offset = ConnectMap::new()
            .with("position", 123_456_i64)
            .expect("offset");
        let record = SourceRecord::from_maps(
            Some(partition),
            Some(offset),
            "lines",
            Some(serde_json::Value::String("x".repeat(120))),
        );
        let line = record_json_line(&record);
        let estimate = estimated_len(&record);
        assert!(
            estimate >= line.len() && estimate < line.len() + 64,
            "estimate {estimate}, line {}",
            line.len()
        );
    }
}
