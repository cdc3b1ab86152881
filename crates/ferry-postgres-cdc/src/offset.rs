//! Debezium's partition and offset, written and read.
//!
//! Partition `{"server": <topic.prefix>}`. Offset (all JSON longs except `messageType` and
//! `snapshot`): `ts_usec`, `txId`, `lsn`, `lsn_proc`, `lsn_commit`, `messageType`, during the
//! snapshot `snapshot`, `last_snapshot_record`, `snapshot_completed`; plus Ferry's
//! `ferry_tx_events` and, during the snapshot, `ferry_snapshot_schema`, `ferry_snapshot_table` and
//! `ferry_snapshot_key`, which Debezium ignores.
//!
//! Snapshot progress: the snapshot reads tables in a fixed order and each table in primary-key
//! order, so a snapshot record's offset says "every row before this table, and every row of it up
//! to this key, was emitted". A task killed mid-snapshot resumes after the committed key instead of
//! starting over (Debezium starts over).
//!
//! Resume rule (transaction granularity, never LSN heuristics): START_REPLICATION at `lsn_commit`,
//! the end LSN of the last transaction every record of which is committed; PostgreSQL then sends
//! every transaction committed after it, from its BEGIN. An offset written inside a transaction
//! also holds `ferry_tx_events` = how many change messages of transaction `txId` were processed:
//! the replayed transaction skips exactly those. The last record of a transaction carries the
//! offset *after* its COMMIT (no `ferry_tx_events`), so a clean restart replays nothing.

use ferry_api::{ConnectMap, SourceOffset, SourcePartition, Value};

use crate::error::CdcError;

/// The partition of every record: `{"server": prefix}`.
pub fn partition(prefix: &str) -> SourcePartition {
    let mut map = ConnectMap::new();
    // A string value is always valid.
    let _ = map.insert("server", prefix);
    map
}

/// Where a resumed task starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// No committed offset: snapshot (per `snapshot.mode`) or stream from the slot.
    Fresh,
    /// An initial snapshot was started and not finished: resume it from its progress, or (no
    /// progress: Debezium's offset, or Ferry's before its first committed row) start it again.
    SnapshotUnfinished(Option<SnapshotProgress>),
    /// Stream from `lsn_commit`, skipping what the offset says was already processed.
    Stream {
        /// START_REPLICATION here.
        lsn_commit: u64,
        /// A partially emitted transaction.
        partial: Option<Partial>,
    },
}

/// A transaction the committed offset is inside of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partial {
    /// Ferry's offset (`ferry_tx_events`): the first `processed` change messages of `xid` were
    /// emitted. The resumed stream must begin with `xid` (else the slot moved past the offset).
    Events {
        /// The transaction.
        xid: u32,
        /// Change messages already emitted.
        processed: u64,
    },
    /// Debezium's offset (a change message type, no `ferry_tx_events`): Debezium emitted every
    /// change of `xid` up to `lsn_proc` — it counts positions by LSN, and its `lsn_commit` is the
    /// last such LSN, not a commit's. Streaming from there, PostgreSQL sends every transaction
    /// committing after it: those that arrive before `xid` committed before it, so Debezium had
    /// emitted them whole (it emits in commit order) and they are skipped; inside `xid`, changes at
    /// or before `lsn_proc` are skipped.
    UpTo {
        /// The transaction.
        xid: u32,
        /// Its last change Debezium emitted.
        lsn_proc: u64,
    },
}

/// How far an unfinished snapshot got: every row of the tables read before `table`, and every
/// row of `table` with a primary key up to `key`, was emitted (and committed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotProgress {
    /// The slot's consistent point: the stream starts here once the snapshot is done.
    pub point: u64,
    /// (schema, table) of the last committed snapshot row.
    pub table: (String, String),
    /// That row's primary-key values in PostgreSQL's text form, in column order; `None` for a
    /// table without a primary key (whose rows are read again).
    pub key: Option<Vec<String>>,
}

/// Where a snapshot record was read: its table and its primary-key values (text form).
#[derive(Debug, Clone, Copy)]
pub struct SnapshotAt<'a> {
    /// The schema.
    pub schema: &'a str,
    /// The table.
    pub table: &'a str,
    /// The primary-key values, `None` without a primary key.
    pub key: Option<&'a [&'a str]>,
}

/// The offset fields of one streamed record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamPosition {
    /// Commit time of the transaction, µs since the Unix epoch.
    pub ts_usec: i64,
    /// The transaction's xid.
    pub xid: u32,
    /// The change message's LSN.
    pub lsn: u64,
    /// Last completely processed LSN.
    pub lsn_proc: u64,
    /// End LSN of the last transaction fully emitted.
    pub lsn_commit: u64,
    /// `INSERT`, `UPDATE`, `DELETE`, `TRUNCATE` or `COMMIT`.
    pub message_type: &'static str,
    /// Change messages of `xid` processed so far; `None` once the transaction is complete.
    pub tx_events: Option<u64>,
}

/// A streamed record's offset map, in Debezium's field order.
pub fn stream_offset(p: &StreamPosition) -> SourceOffset {
    // Every change has an offset: its keys are allocated once and shared by every copy.
    static KEYS: std::sync::LazyLock<ConnectMap> = std::sync::LazyLock::new(|| {
        let mut map = ConnectMap::new();
        for key in [
            "ts_usec",
            "txId",
            "lsn",
            "lsn_proc",
            "lsn_commit",
            "messageType",
        ] {
            let _ = map.insert(key, Value::Null);
        }
        map
    });
    let mut map = KEYS.clone();
    let _ = map.insert("ts_usec", p.ts_usec);
    let _ = map.insert("txId", i64::from(p.xid));
    let _ = map.insert("lsn", lsn_long(p.lsn));
    let _ = map.insert("lsn_proc", lsn_long(p.lsn_proc));
    let _ = map.insert("lsn_commit", lsn_long(p.lsn_commit));
    let _ = map.insert("messageType", p.message_type);
    if let Some(events) = p.tx_events {
        let _ = map.insert("ferry_tx_events", i64::try_from(events).unwrap_or(i64::MAX));
    }
    map
}

/// A snapshot record's offset: the consistent point, whether the snapshot is complete, and (until
/// it is) where the record was read.
pub fn snapshot_offset(
    ts_usec: i64,
    txid: i64,
    lsn: u64,
    last: bool,
    at: Option<SnapshotAt<'_>>,
) -> SourceOffset {
    let mut map = ConnectMap::new();
    let _ = map.insert("ts_usec", ts_usec);
    let _ = map.insert("txId", txid);
    let _ = map.insert("lsn", lsn_long(lsn));
    let _ = map.insert("snapshot", "INITIAL");
    let _ = map.insert("last_snapshot_record", last);
    if last {
        // The stream starts at the consistent point: nothing of it is processed yet.
        let _ = map.insert("lsn_proc", lsn_long(lsn));
        let _ = map.insert("lsn_commit", lsn_long(lsn));
    }
    let _ = map.insert("snapshot_completed", last);
    if let (false, Some(at)) = (last, at) {
        let _ = map.insert("ferry_snapshot_schema", at.schema);
        let _ = map.insert("ferry_snapshot_table", at.table);
        // Kafka Connect's offsets hold only primitives: the key is one JSON text.
        if let Some(key) = at.key
            && let Ok(text) = serde_json::to_string(key)
        {
            let _ = map.insert("ferry_snapshot_key", text);
        }
    }
    map
}

/// The progress an unfinished snapshot's offset records, `None` when it records none (Debezium's
/// offset, or one without the consistent point).
fn snapshot_progress(offset: &SourceOffset) -> Result<Option<SnapshotProgress>, CdcError> {
    let text = |key: &str| offset.get(key).and_then(Value::as_str).map(str::to_owned);
    let (Some(schema), Some(table), Some(point)) = (
        text("ferry_snapshot_schema"),
        text("ferry_snapshot_table"),
        long(offset, "lsn")?,
    ) else {
        return Ok(None);
    };
    let bad = |reason: String| CdcError::Offset {
        offset: offset.to_string(),
        reason,
    };
    let point = u64::try_from(point).map_err(|_| bad("a negative LSN".into()))?;
    let key = match text("ferry_snapshot_key") {
        None => None,
        Some(json) => Some(serde_json::from_str::<Vec<String>>(&json).map_err(|e| {
            bad(format!(
                "ferry_snapshot_key is not a JSON array of strings ({e})"
            ))
        })?),
    };
    Ok(Some(SnapshotProgress {
        point,
        table: (schema, table),
        key,
    }))
}

/// LSNs are u64; Debezium writes them as JSON longs.
fn lsn_long(lsn: u64) -> i64 {
    i64::try_from(lsn).unwrap_or(i64::MAX)
}

fn long(offset: &SourceOffset, key: &str) -> Result<Option<i64>, CdcError> {
    match offset.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_i64() {
            Some(n) => Ok(Some(n)),
            None => Err(CdcError::Offset {
                offset: offset.to_string(),
                reason: format!("{key} is a {}, not a long", v.type_name()),
            }),
        },
    }
}

/// Reads a committed offset (Ferry's or Debezium's).
///
/// # Errors
/// An offset of an in-flight Debezium incremental snapshot, or fields of the wrong type.
pub fn resume_from(offset: Option<&SourceOffset>) -> Result<Resume, CdcError> {
    let Some(offset) = offset else {
        return Ok(Resume::Fresh);
    };
    if let Some((key, _)) = offset
        .iter()
        .find(|(k, _)| k.starts_with("incremental_snapshot"))
    {
        return Err(CdcError::Offset {
            offset: offset.to_string(),
            reason: format!(
                "it holds {key}: Debezium was running an incremental snapshot, whose state is a \
                 Java-serialized object Ferry cannot continue. Let Debezium finish the incremental \
                 snapshot (or stop it with a stop-snapshot signal) before moving the connector to \
                 Ferry, or reset the offsets to start over"
            ),
        });
    }
    let in_snapshot = match offset.get("snapshot") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::String(s)) if s == "false" => false,
        Some(_) => true,
    };
    let completed = matches!(offset.get("snapshot_completed"), Some(Value::Bool(true)))
        || matches!(offset.get("last_snapshot_record"), Some(Value::Bool(true)));
    if in_snapshot && !completed {
        return Ok(Resume::SnapshotUnfinished(snapshot_progress(offset)?));
    }
    let lsn_commit = match (
        long(offset, "lsn_commit")?,
        long(offset, "lsn_proc")?,
        long(offset, "lsn")?,
    ) {
        (Some(c), _, _) => c,
        // Offsets of Debezium before 1.3 have no lsn_commit.
        (None, Some(p), _) => p,
        (None, None, Some(l)) => l,
        (None, None, None) => {
            return Err(CdcError::Offset {
                offset: offset.to_string(),
                reason: "it has no lsn_commit, lsn_proc or lsn".into(),
            });
        }
    };
    let lsn_commit = u64::try_from(lsn_commit).map_err(|_| CdcError::Offset {
        offset: offset.to_string(),
        reason: "a negative LSN".into(),
    })?;
    let xid = || {
        long(offset, "txId")?
            .and_then(|x| u32::try_from(x).ok())
            .ok_or_else(|| CdcError::Offset {
                offset: offset.to_string(),
                reason: "a position inside a transaction without a 32-bit txId".into(),
            })
    };
    let change = matches!(
        offset.get("messageType").and_then(Value::as_str),
        Some("INSERT" | "UPDATE" | "DELETE" | "TRUNCATE")
    );
    let partial = match (long(offset, "ferry_tx_events")?, long(offset, "lsn_proc")?) {
        (Some(events), _) => Some(Partial::Events {
            xid: xid()?,
            processed: u64::try_from(events).unwrap_or(0),
        }),
        (None, Some(lsn_proc)) if change => Some(Partial::UpTo {
            xid: xid()?,
            lsn_proc: u64::try_from(lsn_proc).unwrap_or(0),
        }),
        // After a COMMIT (Ferry's last record of a transaction, or Debezium's heartbeat or
        // commit), or an offset without a message type: the stream resumes after whole
        // transactions.
        _ => None,
    };
    Ok(Resume::Stream {
        lsn_commit,
        partial,
    })
}

/// `X/Y`, PostgreSQL's text form of an LSN.
pub fn lsn_text(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF)
}

/// Parses PostgreSQL's `X/Y`.
pub fn parse_lsn(text: &str) -> Option<u64> {
    let (hi, lo) = text.split_once('/')?;
    Some((u64::from_str_radix(hi, 16).ok()? << 32) | u64::from_str_radix(lo, 16).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsns_round_trip_through_text() {
        assert_eq!(parse_lsn("16/B374D848"), Some(0x16_B374_D848));
        assert_eq!(lsn_text(0x16_B374_D848), "16/B374D848");
    }

    #[test]
    fn a_debezium_offset_without_lsn_commit_falls_back_to_lsn_proc() {
        let offset = ConnectMap::new()
            .with("lsn_proc", 100_i64)
            .and_then(|m| m.with("lsn", 120_i64))
            .and_then(|m| m.with("txId", 7_i64))
            .unwrap_or_default();
        assert_eq!(
            resume_from(Some(&offset)).ok(),
            Some(Resume::Stream {
                lsn_commit: 100,
                partial: None
            })
        );
    }

    /// Debezium 3.6's offset after a change (its `lsn_commit` is the change's LSN, as seen in
    /// Kafka Connect): resume inside that transaction, after that LSN.
    #[test]
    fn a_debezium_offset_after_a_change_resumes_after_its_lsn() {
        let offset = ConnectMap::new()
            .with("lsn", 936_590_896_i64)
            .and_then(|m| m.with("lsn_commit", 936_590_896_i64))
            .and_then(|m| m.with("lsn_proc", 936_590_896_i64))
            .and_then(|m| m.with("messageType", "INSERT"))
            .and_then(|m| m.with("txId", 25_356_i64))
            .unwrap_or_default();
        assert_eq!(
            resume_from(Some(&offset)).ok(),
            Some(Resume::Stream {
                lsn_commit: 936_590_896,
                partial: Some(Partial::UpTo {
                    xid: 25_356,
                    lsn_proc: 936_590_896
                })
            })
        );
        let after_commit = ConnectMap::new()
            .with("lsn_commit", 1_000_i64)
            .and_then(|m| m.with("lsn_proc", 1_000_i64))
            .and_then(|m| m.with("messageType", "COMMIT"))
            .and_then(|m| m.with("txId", 9_i64))
            .unwrap_or_default();
        assert_eq!(
            resume_from(Some(&after_commit)).ok(),
            Some(Resume::Stream {
                lsn_commit: 1_000,
                partial: None
            })
        );
    }

    #[test]
    fn an_incremental_snapshot_offset_is_refused_by_name() {
        let offset = ConnectMap::new()
            .with("lsn", 1_i64)
            .and_then(|m| m.with("incremental_snapshot_primary_key", "aced0005"))
            .unwrap_or_default();
        let message = resume_from(Some(&offset))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            message.contains("incremental_snapshot_primary_key"),
            "{message}"
        );
    }

    #[test]
    fn a_snapshot_offset_records_its_table_and_key_until_the_last_row() {
        let key = ["7", "o'neil"];
        let at = SnapshotAt {
            schema: "public",
            table: "orders",
            key: Some(&key),
        };
        let offset = snapshot_offset(1, 2, 300, false, Some(at));
        assert_eq!(
            resume_from(Some(&offset)).ok(),
            Some(Resume::SnapshotUnfinished(Some(SnapshotProgress {
                point: 300,
                table: ("public".into(), "orders".into()),
                key: Some(vec!["7".into(), "o'neil".into()]),
            })))
        );
        let keyless = SnapshotAt { key: None, ..at };
        let offset = snapshot_offset(1, 2, 300, false, Some(keyless));
        assert!(matches!(
            resume_from(Some(&offset)),
            Ok(Resume::SnapshotUnfinished(Some(SnapshotProgress {
                key: None,
                ..
            })))
        ));
        // The last row completes the snapshot: the stream resumes at the consistent point.
        let last = snapshot_offset(1, 2, 300, true, Some(at));
        assert!(last.get("ferry_snapshot_table").is_none());
        assert_eq!(
            resume_from(Some(&last)).ok(),
            Some(Resume::Stream {
                lsn_commit: 300,
                partial: None
            })
        );
    }

    /// Debezium's mid-snapshot offset has no progress Ferry can use: the snapshot starts over.
    #[test]
    fn debeziums_unfinished_snapshot_starts_over() {
        let offset = ConnectMap::new()
            .with("lsn", 300_i64)
            .and_then(|m| m.with("snapshot", "INITIAL"))
            .and_then(|m| m.with("last_snapshot_record", false))
            .unwrap_or_default();
        assert_eq!(
            resume_from(Some(&offset)).ok(),
            Some(Resume::SnapshotUnfinished(None))
        );
        let broken = offset
            .with("ferry_snapshot_schema", "public")
            .and_then(|m| m.with("ferry_snapshot_table", "t"))
            .and_then(|m| m.with("ferry_snapshot_key", "not json"))
            .unwrap_or_default();
        let message = resume_from(Some(&broken))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(message.contains("ferry_snapshot_key"), "{message}");
    }

    #[test]
    fn a_mid_transaction_offset_resumes_inside_its_transaction() {
        let p = StreamPosition {
            ts_usec: 1,
            xid: 42,
            lsn: 300,
            lsn_proc: 300,
            lsn_commit: 200,
            message_type: "INSERT",
            tx_events: Some(3),
        };
        assert_eq!(
            resume_from(Some(&stream_offset(&p))).ok(),
            Some(Resume::Stream {
                lsn_commit: 200,
                partial: Some(Partial::Events {
                    xid: 42,
                    processed: 3
                })
            })
        );
    }
}
