//! A Kafka Connect offsets topic printed by `kafka-console-consumer --property print.key=true`: one
//! `key<TAB>value` line per record, `null` for a tombstone, later lines winning.

use super::{ImportError, Origin, PlanBuilder, Problem};
use crate::store::Span;
use ferry_api::ConnectMap;

use crate::codec::{CodecError, decode_key, decode_value};

/// Reads every line of `text` (which lies inside `input`); see the [module documentation](super)
/// for the rules. The records are spans of `input`, each value one byte (the TAB) after its key;
/// gives them and the number of lines superseded.
pub(super) fn parse(input: &[u8], text: &str) -> Result<(PlanBuilder, usize), ImportError> {
    let mut builder = PlanBuilder::default();
    // Where a slice of `text` starts in `input`.
    let offset = |s: &str| s.as_ptr() as usize - input.as_ptr() as usize;
    let mut problems = Vec::new();
    let mut superseded = 0;
    for (i, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let origin = Origin::Line(i + 1);
        match parse_line(line) {
            Ok((key, value, connector, partition)) => {
                match Span::new(offset(key), key.len(), value.map(str::len)) {
                    Ok(span) => {
                        let partition = partition.as_ref();
                        if builder
                            .upsert(input, origin, span, &connector, partition)
                            .is_some()
                        {
                            superseded += 1;
                        }
                    }
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
    Ok((builder, superseded))
}

/// One record. A valid key holds no raw TAB (JSON escapes control characters in strings), so the
/// first TAB ends the key; the key bytes are kept exactly as printed.
/// Gives the key and value (`None`: a tombstone) as printed, the connector and the partition.
type Line<'a> = (&'a str, Option<&'a str>, String, Option<ConnectMap>);

/// A line of a topic dump that is not an offset record.
#[derive(Debug, Clone, thiserror::Error)]
enum LineError {
    #[error(
        "no TAB between key and value; print the offsets topic with kafka-console-consumer \
         --property print.key=true (key.separator is a TAB by default)"
    )]
    NoTab,
    #[error("the key is not a Kafka Connect offset key: {0}")]
    Key(#[source] CodecError),
    #[error("the value is neither a Kafka Connect offset (a JSON object) nor null: {0}")]
    Value(#[source] CodecError),
}

fn parse_line(line: &str) -> Result<Line<'_>, LineError> {
    let Some((key, value)) = line.split_once('\t') else {
        return Err(LineError::NoTab);
    };
    let decoded = decode_key(key.as_bytes()).map_err(LineError::Key)?;
    let value = if value == "null" {
        None
    } else {
        decode_value(value.as_bytes()).map_err(LineError::Value)?;
        Some(value)
    };
    Ok((key, value, decoded.connector, decoded.partition))
}
