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

use ferry_api::{ConnectMap, SourceRecord};

/// Formats `record` as one JSON line, including the terminating `\n`.
pub fn record_json_line(record: &SourceRecord) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(b"{\"topic\":");
    write_json(&mut out, &record.topic);
    out.extend_from_slice(b",\"key\":");
    write_optional_json(&mut out, record.key.as_ref());
    out.extend_from_slice(b",\"value\":");
    write_optional_json(&mut out, record.value.as_ref());
    out.extend_from_slice(b",\"headers\":[");
    for (i, header) in record.headers.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"key\":");
        write_json(&mut out, &header.key);
        out.extend_from_slice(b",\"value\":");
        write_json(&mut out, &header.value);
        out.push(b'}');
    }
    out.extend_from_slice(b"],\"timestamp\":");
    match record.timestamp {
        Some(millis) => out.extend_from_slice(millis.to_string().as_bytes()),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"source_partition\":");
    write_map(&mut out, record.source_partition.as_ref());
    out.extend_from_slice(b",\"source_offset\":");
    write_map(&mut out, record.source_offset.as_ref());
    out.extend_from_slice(b"}\n");
    out
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

fn write_map(out: &mut Vec<u8>, map: Option<&ConnectMap>) {
    match map {
        Some(map) => out.extend_from_slice(&ferry_offsets::encode_value(map)),
        None => out.extend_from_slice(b"null"),
    }
}
