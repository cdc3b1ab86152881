//! A Kafka Connect offsets topic printed by `kafka-console-consumer --property print.key=true`: one
//! `key<TAB>value` line per record, `null` for a tombstone, later lines winning.

use super::{ImportError, ImportPlan, ImportRecord, InputFormat, Origin, PlanBuilder, Problem};
use ferry_api::ConnectMap;

use crate::codec::{decode_key, decode_value};

/// Reads every line; see the [module documentation](super) for the rules.
pub(super) fn parse(text: &str) -> Result<ImportPlan, ImportError> {
    let mut builder = PlanBuilder::default();
    let mut problems = Vec::new();
    let mut superseded = 0;
    for (i, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let origin = Origin::Line(i + 1);
        match parse_line(line, origin) {
            Ok((record, partition)) => {
                if builder.upsert(record, partition.as_ref()).is_some() {
                    superseded += 1;
                }
            }
            Err(message) => problems.push(Problem {
                origin: Some(origin),
                message,
            }),
        }
    }
    if !problems.is_empty() {
        return Err(ImportError::Invalid(problems));
    }
    Ok(ImportPlan {
        format: InputFormat::KafkaConnectDump,
        records: builder.records,
        superseded,
    })
}

/// One record. A valid key holds no raw TAB (JSON escapes control characters in strings), so the
/// first TAB ends the key; the key bytes are kept exactly as printed.
fn parse_line(line: &str, origin: Origin) -> Result<(ImportRecord, Option<ConnectMap>), String> {
    let Some((key, value)) = line.split_once('\t') else {
        return Err(
            "no TAB between key and value; print the offsets topic with kafka-console-consumer \
             --property print.key=true (key.separator is a TAB by default)"
                .to_owned(),
        );
    };
    let decoded = decode_key(key.as_bytes())
        .map_err(|e| format!("the key is not a Kafka Connect offset key: {e}"))?;
    let value = if value == "null" {
        None
    } else {
        decode_value(value.as_bytes()).map_err(|e| {
            format!("the value is neither a Kafka Connect offset (a JSON object) nor null: {e}")
        })?;
        Some(value.as_bytes().to_vec())
    };
    let record = ImportRecord {
        origin,
        key: key.as_bytes().to_vec(),
        value,
        connector: decoded.connector,
    };
    Ok((record, decoded.partition))
}
