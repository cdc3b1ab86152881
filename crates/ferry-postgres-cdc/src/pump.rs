//! The background loop that reads the snapshot and the replication stream and hands records to
//! `poll` through a bounded channel (so `poll` stays cancel-safe), and applies acknowledgements
//! from `commit` to the stream.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferry_api::{Field, Header, Schema, SourceRecord};
use tokio::sync::{mpsc, watch};
use tokio_postgres::SimpleQueryMessage;

use crate::catalog::{ColumnSource, Db, ident};
use crate::config::CdcConfig;
use crate::envelope::{Op, SourceInfo, TableSchema};
use crate::error::CdcError;
use crate::offset::{
    Partial, SnapshotAt, SnapshotProgress, StreamPosition, lsn_text, snapshot_offset, stream_offset,
};
use crate::pgoutput::{self, Datum, Message, Relation};
use crate::stream::{GatedSession, PgWireStream, ReplicationStream, WalEvent};
use crate::types::Column;

/// At most one offset-only checkpoint per this interval: each is an offset commit.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Rows fetched at a time from a table during the snapshot.
const SNAPSHOT_FETCH: usize = 1000;

/// One item for `poll`.
pub type Item = Result<SourceRecord, CdcError>;

/// What a snapshot reads under.
pub enum SnapshotFrom {
    /// The snapshot the slot exported when it was created: the exact state at its consistent point.
    Exported {
        /// The session that created the slot, holding the snapshot.
        session: GatedSession,
        /// The exported snapshot's name.
        name: String,
    },
    /// A snapshot killed part-way, resumed after its committed progress. The slot's exported
    /// snapshot died with the session that made it, so the rest is read as it is now: a change
    /// committed between the consistent point and now can show in a row read now and then come
    /// again from the stream (which starts at the consistent point). Applied in order, each row
    /// ends at its latest state; nothing is lost.
    Resumed(SnapshotProgress),
}

/// What the loop starts with.
pub enum Start {
    /// Read the tables, then stream from `point` (unless `stream_after` is false).
    Snapshot {
        /// What the tables are read under.
        from: SnapshotFrom,
        /// The slot's consistent point.
        point: u64,
        /// `false` for `initial_only`.
        stream_after: bool,
    },
    /// Nothing to do (`initial_only` after its snapshot): wait to be stopped.
    Idle,
    /// Stream (already started at `lsn_commit`).
    Stream {
        /// The open stream.
        stream: Box<dyn ReplicationStream>,
        /// Where it started.
        lsn_commit: u64,
        /// `lsn_commit` is a committed offset's (a resume), not a fresh slot's position.
        from_offset: bool,
        /// A partly emitted transaction.
        partial: Option<Partial>,
    },
}

/// The loop's handles.
pub struct Pump {
    /// The configuration.
    pub config: Arc<CdcConfig>,
    /// The SQL connection for snapshot reads (`None` only in tests of the stream).
    pub db: Option<Arc<Db>>,
    /// Table shapes for Relation messages (the same connection in production).
    pub catalog: Arc<dyn ColumnSource>,
    /// Records to `poll`.
    pub out: mpsc::Sender<Item>,
    /// Committed `lsn_commit` values from `commit`.
    pub acks: watch::Receiver<u64>,
    /// Set to end the loop.
    pub stop: watch::Receiver<bool>,
}

/// Runs until stopped or failed; a failure is sent to `poll`.
pub async fn run(mut pump: Pump, start: Start) {
    let out = pump.out.clone();
    if let Err(e) = run_inner(&mut pump, start).await {
        let _ = out.send(Err(e)).await;
    }
}

async fn run_inner(pump: &mut Pump, start: Start) -> Result<(), CdcError> {
    let (stream, lsn_commit, from_offset, partial) = match start {
        Start::Idle => {
            let _ = pump.stop.wait_for(|s| *s).await;
            return Ok(());
        }
        Start::Stream {
            stream,
            lsn_commit,
            from_offset,
            partial,
        } => (stream, lsn_commit, from_offset, partial),
        Start::Snapshot {
            from,
            point,
            stream_after,
        } => {
            let (session, exported, resume) = match from {
                SnapshotFrom::Exported { session, name } => (Some(session), Some(name), None),
                SnapshotFrom::Resumed(progress) => (None, None, Some(progress)),
            };
            if !snapshot_tables(pump, exported.as_deref(), point, resume.as_ref()).await? {
                return Ok(());
            }
            if !stream_after {
                tracing::info!(
                    "PostgresCdcSource: snapshot.mode=initial_only: the snapshot is complete, not streaming"
                );
                drop(session);
                let _ = pump.stop.wait_for(|s| *s).await;
                return Ok(());
            }
            let stream: Box<dyn ReplicationStream> = match session {
                Some(session) => Box::new(session.start().await?),
                None => Box::new(PgWireStream::open(&pump.config, point, point).await?),
            };
            (stream, point, false, None)
        }
    };
    let mut streamer = Streamer {
        stream,
        relations: HashMap::new(),
        last_commit: lsn_commit,
        sequence_commit: from_offset.then_some(lsn_commit),
        partial,
        tx: None,
        held: None,
        server_end: lsn_commit,
        checkpointed: lsn_commit,
        checkpoint_sent: None,
        last_xid: 0,
    };
    streamer.run(pump).await
}

/// Reads every captured table — under the slot's exported snapshot, or, resuming, the rest of
/// them as they are now — each in primary-key order. Returns `false` when stopped.
async fn snapshot_tables(
    pump: &mut Pump,
    exported: Option<&str>,
    point: u64,
    resume: Option<&SnapshotProgress>,
) -> Result<bool, CdcError> {
    let config = pump.config.clone();
    let sql_err = |what: String| {
        let server = config.server();
        move |source| CdcError::Sql {
            what,
            server,
            source,
        }
    };
    let db = pump
        .db
        .clone()
        .ok_or_else(|| CdcError::Unsafe("no SQL connection to read the snapshot with".into()))?;
    let client = &db.client;
    let begin = match exported {
        Some(name) => format!(
            "BEGIN ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT '{}'",
            name.replace('\'', "''")
        ),
        None => "BEGIN ISOLATION LEVEL REPEATABLE READ".to_owned(),
    };
    client
        .batch_execute(&begin)
        .await
        .map_err(sql_err("importing the slot's exported snapshot".into()))?;
    let txid: i64 = client
        .query_one("SELECT txid_current()", &[])
        .await
        .map_err(sql_err("reading the snapshot's transaction id".into()))?
        .get(0);
    let ts_us = now_us();
    let mut tables = db.captured_tables(&config).await?;
    // Resuming: the tables before the one in progress are done.
    let mut after_key = None;
    if let Some(progress) = resume {
        match tables.iter().position(|t| *t == progress.table) {
            Some(index) => {
                tables.drain(..index);
                after_key = progress.key.clone();
                tracing::info!(
                    "PostgresCdcSource: resuming the initial snapshot at {}.{}{} ({} table(s) left), \
                     then streaming from consistent point {}",
                    progress.table.0,
                    progress.table.1,
                    match &progress.key {
                        Some(key) => format!(" after primary key {key:?}"),
                        None => " (no primary key: from its first row)".into(),
                    },
                    tables.len(),
                    lsn_text(point)
                );
            }
            None => tracing::warn!(
                "PostgresCdcSource: the snapshot was in {}.{}, which is no longer captured: \
                 reading every captured table again",
                progress.table.0,
                progress.table.1
            ),
        }
    } else {
        tracing::info!(
            tables = tables.len(),
            "PostgresCdcSource: snapshot of {} table(s) at consistent point {}",
            tables.len(),
            lsn_text(point)
        );
    }
    // One row of lookahead: a row's snapshot marker depends on what follows it.
    // (table, row, first row of its table, first table); Debezium's markers: `last` for the
    // last row, `first` for the first row of the first table, then `last_in_data_collection`,
    // `first_in_data_collection`, else `true`.
    let mut held: Option<(Arc<TableSchema>, Vec<Datum>, bool, bool)> = None;
    for (index, (schema, table)) in tables.into_iter().enumerate() {
        let columns = db.columns(&schema, &table).await?;
        let shape = Arc::new(TableSchema::new(&schema, &table, columns, &config));
        let list: Vec<String> = shape.columns().iter().map(|c| ident(&c.name)).collect();
        let select = snapshot_select(&shape, &list, after_key.take().as_deref());
        // A cursor bounds memory: the table is fetched SNAPSHOT_FETCH rows at a time.
        client
            .batch_execute(&format!(
                "DECLARE ferry_snapshot NO SCROLL CURSOR FOR {select}"
            ))
            .await
            .map_err(sql_err(format!(
                "opening a snapshot cursor on {schema}.{table}"
            )))?;
        let mut first_in_table = true;
        loop {
            let rows = client
                .simple_query(&format!("FETCH {SNAPSHOT_FETCH} FROM ferry_snapshot"))
                .await
                .map_err(sql_err(format!(
                    "reading {schema}.{table} for the snapshot"
                )))?;
            let mut fetched = 0;
            for message in rows {
                let SimpleQueryMessage::Row(row) = message else {
                    continue;
                };
                fetched += 1;
                let datums: Vec<Datum> = (0..row.len())
                    .map(|i| {
                        row.get(i)
                            .map_or(Datum::Null, |t| Datum::Text(t.to_owned()))
                    })
                    .collect();
                if let Some((t, d, first, first_table)) = held.take() {
                    let last_in_table = !Arc::ptr_eq(&t, &shape);
                    let marker = marker(first && first_table, first, last_in_table, false);
                    if !send_snapshot(pump, &t, &d, marker, ts_us, txid, point, false).await? {
                        return Ok(false);
                    }
                }
                held = Some((shape.clone(), datums, first_in_table, index == 0));
                first_in_table = false;
            }
            if fetched < SNAPSHOT_FETCH {
                break;
            }
        }
        client
            .batch_execute("CLOSE ferry_snapshot")
            .await
            .map_err(sql_err(format!(
                "closing the snapshot cursor of {schema}.{table}"
            )))?;
    }
    if let Some((t, d, first, first_table)) = held.take() {
        let marker = marker(first && first_table, first, true, true);
        if !send_snapshot(pump, &t, &d, marker, ts_us, txid, point, true).await? {
            return Ok(false);
        }
    } else {
        // No row to carry the completion (empty tables, or none left when resuming): an
        // offset-only record commits it, so a restart streams instead of snapshotting again.
        let offset = snapshot_offset(ts_us, txid, point, true, None);
        let record = SourceRecord::offset_only(config.partition.clone(), offset);
        if pump.out.send(Ok(record)).await.is_err() {
            return Ok(false);
        }
    }
    let _ = client.batch_execute("COMMIT").await;
    tracing::info!(
        "PostgresCdcSource: snapshot complete; streaming from {}",
        lsn_text(point)
    );
    Ok(true)
}

/// The snapshot query of a table: its rows in primary-key order (the order its progress is
/// recorded in), after `after` when resuming inside it. A table without a primary key is read
/// whole, unordered.
fn snapshot_select(shape: &TableSchema, list: &[String], after: Option<&[String]>) -> String {
    let table = format!("{}.{}", ident(&shape.schema), ident(&shape.table));
    let keys: Vec<String> = shape
        .key_columns()
        .iter()
        .map(|&i| ident(&shape.columns()[i].name))
        .collect();
    if keys.is_empty() {
        return format!("SELECT {} FROM {table}", list.join(", "));
    }
    let filter = match after {
        // Untyped literals take the key columns' types; text round-trips exactly.
        Some(values) if values.len() == keys.len() => {
            let literals: Vec<String> = values
                .iter()
                .map(|v| format!("'{}'", v.replace('\'', "''")))
                .collect();
            format!(" WHERE ({}) > ({})", keys.join(", "), literals.join(", "))
        }
        _ => String::new(),
    };
    format!(
        "SELECT {} FROM {table}{filter} ORDER BY {}",
        list.join(", "),
        keys.join(", ")
    )
}

fn marker(first: bool, first_in_table: bool, last_in_table: bool, last: bool) -> &'static str {
    if last {
        "last"
    } else if first {
        "first"
    } else if last_in_table {
        "last_in_data_collection"
    } else if first_in_table {
        "first_in_data_collection"
    } else {
        "true"
    }
}

#[allow(clippy::too_many_arguments)]
async fn send_snapshot(
    pump: &Pump,
    table: &TableSchema,
    datums: &[Datum],
    marker: &'static str,
    ts_us: i64,
    txid: i64,
    point: u64,
    last: bool,
) -> Result<bool, CdcError> {
    let config = &pump.config;
    let source = SourceInfo {
        ts_us,
        snapshot: marker,
        lsn_commit: None,
        lsn: Some(point),
        tx_id: Some(txid),
    };
    let key = table.key(datums, config)?;
    let after = table.value(datums, config)?;
    let key_text: Vec<&str> = table
        .key_columns()
        .iter()
        .filter_map(|&i| match datums.get(i) {
            Some(Datum::Text(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    let complete_key = !key_text.is_empty() && key_text.len() == table.key_columns().len();
    let at = SnapshotAt {
        schema: &table.schema,
        table: &table.table,
        key: complete_key.then_some(key_text.as_slice()),
    };
    let offset = snapshot_offset(ts_us, txid, point, last, Some(at));
    for record in table.records(config, Op::Read, key, None, Some(after), &source, offset) {
        if pump.out.send(Ok(record)).await.is_err() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Runs `heartbeat.action.query`, if set. A failure is logged, not fatal: the heartbeat exists
/// to keep the slot moving, and stopping capture over it would retain more WAL, not less.
async fn heartbeat_action(pump: &Pump) {
    let (Some(query), Some(db)) = (&pump.config.heartbeat_query, &pump.db) else {
        return;
    };
    if let Err(e) = db.client.batch_execute(query).await {
        tracing::warn!(
            "PostgresCdcSource: heartbeat.action.query failed on {}: {e} (capture goes on)",
            pump.config.server()
        );
    }
}

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// The open transaction.
struct Tx {
    xid: u32,
    commit_time_us: i64,
    /// Change messages seen so far.
    events: u64,
    /// Change messages to skip (already emitted before a restart).
    skip: u64,
    /// Changes at or before this LSN are skipped (Debezium emitted them before a hand-over).
    skip_upto: Option<u64>,
    /// The whole transaction is skipped: it committed before the one a Debezium offset is inside.
    skip_all: bool,
}

/// Records of the last change, held until the next change or the COMMIT says which offset they
/// carry.
struct Held {
    records: Vec<SourceRecord>,
    position: StreamPosition,
}

struct Streamer {
    stream: Box<dyn ReplicationStream>,
    /// Relation OID → its schemas (`None`: not captured).
    relations: HashMap<u32, Option<Arc<TableSchema>>>,
    last_commit: u64,
    /// The first element of `source.sequence`: the end of the last COMMIT this run streamed, or
    /// the resumed offset's `lsn_commit`; none before either, as Debezium (its `lastCommitLsn`
    /// starts unset on a new slot and after a snapshot, and is read from a resumed offset).
    sequence_commit: Option<u64>,
    partial: Option<Partial>,
    tx: Option<Tx>,
    held: Option<Held>,
    /// The server's WAL position from its last keepalive: every transaction committed before it
    /// was sent.
    server_end: u64,
    /// The position of the last offset sent (a record's or a checkpoint's).
    checkpointed: u64,
    /// When the last offset-only checkpoint was sent.
    checkpoint_sent: Option<std::time::Instant>,
    /// The xid of the last transaction seen (for heartbeat offsets).
    last_xid: u32,
}

impl Streamer {
    async fn run(&mut self, pump: &mut Pump) -> Result<(), CdcError> {
        let heartbeats = pump.config.heartbeat_ms > 0;
        let mut tick =
            tokio::time::interval(Duration::from_millis(pump.config.heartbeat_ms.max(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let event = tokio::select! {
                event = self.stream.recv() => event?,
                _ = tick.tick(), if heartbeats => {
                    heartbeat_action(pump).await;
                    if !self.heartbeat(pump).await {
                        self.stream.close().await;
                        return Ok(());
                    }
                    continue;
                }
                Ok(()) = pump.acks.changed() => {
                    // `changed` marked the value seen: acknowledge it now.
                    let lsn = *pump.acks.borrow_and_update();
                    self.stream.acknowledge(lsn);
                    continue;
                }
                _ = pump.stop.changed() => {
                    self.stream.close().await;
                    return Ok(());
                }
            };
            let Some(event) = event else {
                return Err(CdcError::Replication {
                    slot: pump.config.slot.clone(),
                    server: pump.config.server(),
                    message: "the server ended the replication stream".into(),
                });
            };
            if !self.handle(pump, event).await? {
                self.stream.close().await;
                return Ok(());
            }
        }
    }

    /// Between transactions, a heartbeat record (Debezium's topic, key and value) whose offset is
    /// the server's last reported position: once committed, the slot advances there although no
    /// captured table changed (idle or filtered databases do not retain WAL). Returns `false` when
    /// `poll` is gone.
    async fn heartbeat(&mut self, pump: &Pump) -> bool {
        let Some(position) = self.idle_position() else {
            return true;
        };
        self.sent_at(position.lsn);
        let prefix = &pump.config.prefix;
        let record = SourceRecord::builder(format!("__debezium-heartbeat.{prefix}"))
            .source_partition(crate::offset::partition(prefix))
            .source_offset(stream_offset(&position))
            .key(serde_json::json!({ "serverName": prefix }))
            .key_schema(
                Schema::struct_(
                    "io.debezium.connector.common.ServerNameKey",
                    [Field::new("serverName", Schema::string())],
                )
                .with_version(1),
            )
            .value(serde_json::json!({ "ts_ms": now_us() / 1000 }))
            .value_schema(
                Schema::struct_(
                    "io.debezium.connector.common.Heartbeat",
                    [Field::new("ts_ms", Schema::int64())],
                )
                .with_version(1),
            )
            .build();
        Self::send(pump, vec![record]).await
    }

    /// Between transactions, when the server reports a position past the last offset sent: an
    /// offset-only record there (at most one a second). Once the commit cycle commits it, `commit`
    /// flushes it to the slot, so an idle or filtered database retains no WAL for this slot (from
    /// PostgreSQL 15 pgoutput sends nothing for transactions that touch no captured table, and
    /// without this only a captured change would move the slot). Returns `false` when `poll` is
    /// gone.
    async fn checkpoint(&mut self, pump: &Pump) -> bool {
        let Some(position) = self.idle_position() else {
            return true;
        };
        if position.lsn <= self.checkpointed
            || self
                .checkpoint_sent
                .is_some_and(|t| t.elapsed() < CHECKPOINT_EVERY)
        {
            return true;
        }
        self.sent_at(position.lsn);
        self.checkpoint_sent = Some(std::time::Instant::now());
        let record = SourceRecord::offset_only(
            crate::offset::partition(&pump.config.prefix),
            stream_offset(&position),
        );
        Self::send(pump, vec![record]).await
    }

    /// The position an offset sent between transactions holds: the server's last reported one,
    /// as after a COMMIT. `None` inside a transaction, or before the partly emitted one a resume
    /// replays (its offset must keep saying how much of it to skip).
    fn idle_position(&self) -> Option<StreamPosition> {
        if self.tx.is_some() || self.held.is_some() || self.partial.is_some() {
            return None;
        }
        let at = self.server_end.max(self.last_commit);
        Some(StreamPosition {
            ts_usec: now_us(),
            xid: self.last_xid,
            lsn: at,
            lsn_proc: at,
            lsn_commit: at,
            message_type: "COMMIT",
            tx_events: None,
        })
    }

    /// An offset at `at` was sent: a resume starts there.
    fn sent_at(&mut self, at: u64) {
        self.last_commit = at;
        self.checkpointed = self.checkpointed.max(at);
    }

    async fn send(pump: &Pump, records: Vec<SourceRecord>) -> bool {
        for record in records {
            if pump.out.send(Ok(record)).await.is_err() {
                return false;
            }
        }
        true
    }

    async fn handle(&mut self, pump: &Pump, event: WalEvent) -> Result<bool, CdcError> {
        match event {
            WalEvent::KeepAlive { wal_end } => {
                self.server_end = self.server_end.max(wal_end);
                if !self.checkpoint(pump).await {
                    return Ok(false);
                }
            }
            WalEvent::Begin {
                xid,
                commit_time_us,
                ..
            } => {
                let (skip, skip_upto, skip_all) = match self.partial.take() {
                    None => (0, None, false),
                    Some(Partial::Events {
                        xid: want,
                        processed,
                    }) if want == xid => (processed, None, false),
                    Some(Partial::Events {
                        xid: want,
                        processed: skip,
                    }) => {
                        return Err(CdcError::Unsafe(format!(
                            "the committed offset is inside transaction {want} ({skip} changes emitted), but the \
                             stream resumed at {} began with transaction {xid}: the slot moved past the \
                             committed offset and changes may be lost. Reset the connector's offsets and \
                             take a new snapshot",
                            lsn_text(self.last_commit)
                        )));
                    }
                    Some(Partial::UpTo {
                        xid: want,
                        lsn_proc,
                    }) if want == xid => (0, Some(lsn_proc), false),
                    Some(upto @ Partial::UpTo { xid: want, .. }) => {
                        // Committed before `want`, which Debezium was emitting: emitted whole.
                        tracing::info!(
                            "PostgresCdcSource: skipping transaction {xid}: it committed before transaction {want}, \
                             inside which the (Debezium) offset is"
                        );
                        self.partial = Some(upto);
                        (0, None, true)
                    }
                };
                self.tx = Some(Tx {
                    xid,
                    commit_time_us,
                    events: 0,
                    skip,
                    skip_upto,
                    skip_all,
                });
            }
            WalEvent::Commit {
                end_lsn,
                commit_time_us,
            } => {
                if let Some(mut held) = self.held.take() {
                    // The last record of the transaction carries the offset after its COMMIT,
                    // and says so: Debezium's WalPositionLocator, resuming from it, restarts at the
                    // next transaction's BEGIN only when the last message was a COMMIT (with a
                    // change type it skips the next transaction's first change, whose LSN is this
                    // commit's end: a change lost, seen in the hand-over test).
                    let position = StreamPosition {
                        lsn_proc: end_lsn,
                        lsn_commit: end_lsn,
                        message_type: "COMMIT",
                        tx_events: None,
                        ts_usec: commit_time_us,
                        ..held.position
                    };
                    let offset = stream_offset(&position);
                    for r in &mut held.records {
                        r.source_offset = Some(offset.clone());
                    }
                    if !Self::send(pump, held.records).await {
                        return Ok(false);
                    }
                    self.checkpointed = self.checkpointed.max(end_lsn);
                }
                self.last_commit = end_lsn;
                self.sequence_commit = Some(end_lsn);
                self.server_end = self.server_end.max(end_lsn);
                if let Some(tx) = self.tx.take() {
                    self.last_xid = tx.xid;
                }
            }
            WalEvent::Data { lsn, data } => {
                let message = pgoutput::decode(&data).map_err(|reason| CdcError::Decode {
                    lsn: lsn_text(lsn),
                    reason,
                })?;
                if let Message::Relation(rel) = &message {
                    let shape = relation(pump, rel).await?;
                    self.relations.insert(rel.oid, shape);
                    return Ok(true);
                }
                if !message.is_change() {
                    return Ok(true);
                }
                let Some(tx) = self.tx.as_mut() else {
                    return Err(CdcError::Decode {
                        lsn: lsn_text(lsn),
                        reason: "a change outside a transaction".into(),
                    });
                };
                tx.events += 1;
                if tx.skip_all || tx.events <= tx.skip || tx.skip_upto.is_some_and(|b| lsn <= b) {
                    return Ok(true);
                }
                let position = StreamPosition {
                    ts_usec: tx.commit_time_us,
                    xid: tx.xid,
                    lsn,
                    lsn_proc: lsn,
                    lsn_commit: self.last_commit,
                    message_type: "",
                    tx_events: Some(tx.events),
                };
                let records = self.records(pump, message, position)?;
                if let Some((records, position)) = records {
                    if let Some(prev) = self.held.take()
                        && !Self::send(pump, prev.records).await
                    {
                        return Ok(false);
                    }
                    self.held = Some(Held { records, position });
                }
            }
        }
        Ok(true)
    }
}

/// A primary-key change is, as in Debezium, a delete of the old key (and its tombstone) then a
/// create of the new one, each naming the other key in a header.
fn key_change(
    shape: &TableSchema,
    config: &CdcConfig,
    (old_key, new_key): (serde_json::Value, serde_json::Value),
    (before, after): (Option<serde_json::Value>, serde_json::Value),
    source: &SourceInfo,
    offset: ferry_api::SourceOffset,
) -> Vec<SourceRecord> {
    let mut records = shape.records(
        config,
        Op::Delete,
        Some(old_key.clone()),
        before,
        None,
        source,
        offset.clone(),
    );
    // The delete and its tombstone, before the context headers, as Debezium writes them.
    for record in &mut records {
        record.headers.insert(
            0,
            Header {
                key: "__debezium.newkey".into(),
                value: new_key.clone(),
            },
        );
    }
    let mut create = shape.records(
        config,
        Op::Create,
        Some(new_key),
        None,
        Some(after),
        source,
        offset,
    );
    if let Some(create) = create.first_mut() {
        create.headers.insert(
            0,
            Header {
                key: "__debezium.oldkey".into(),
                value: old_key,
            },
        );
    }
    records.extend(create);
    records
}

/// The schemas of a relation the stream announced, `None` when not captured. Types come from the
/// Relation message; nullability and the primary key from the catalog.
async fn relation(pump: &Pump, rel: &Relation) -> Result<Option<Arc<TableSchema>>, CdcError> {
    if !pump.config.captures_table(&rel.namespace, &rel.name) {
        return Ok(None);
    }
    let catalog = pump.catalog.columns(&rel.namespace, &rel.name).await?;
    let columns = rel
        .columns
        .iter()
        .map(|c| {
            let known = catalog.iter().find(|k| k.name == c.name);
            Column {
                name: c.name.clone(),
                type_oid: c.type_oid,
                typmod: c.typmod,
                nullable: known.is_none_or(|k| k.nullable),
                primary_key: known.is_some_and(|k| k.primary_key),
                enum_labels: known.and_then(|k| k.enum_labels.clone()),
                default_expr: known.and_then(|k| k.default_expr.clone()),
            }
        })
        .collect();
    Ok(Some(Arc::new(TableSchema::new(
        &rel.namespace,
        &rel.name,
        columns,
        &pump.config,
    ))))
}

impl Streamer {
    fn shape(&self, rel: u32, lsn: u64) -> Result<Option<Arc<TableSchema>>, CdcError> {
        self.relations
            .get(&rel)
            .cloned()
            .ok_or_else(|| CdcError::Decode {
                lsn: lsn_text(lsn),
                reason: format!("a change of relation {rel} before its Relation message"),
            })
    }

    #[allow(clippy::type_complexity)]
    fn records(
        &self,
        pump: &Pump,
        message: Message,
        mut position: StreamPosition,
    ) -> Result<Option<(Vec<SourceRecord>, StreamPosition)>, CdcError> {
        let config = &pump.config;
        let source = |shape: &TableSchema| {
            let _ = shape;
            SourceInfo {
                ts_us: position.ts_usec,
                snapshot: "false",
                lsn_commit: self.sequence_commit,
                lsn: Some(position.lsn),
                tx_id: Some(i64::from(position.xid)),
            }
        };
        let (shape, op, key, before, after) = match message {
            Message::Insert { rel, new } => {
                position.message_type = "INSERT";
                let Some(shape) = self.shape(rel, position.lsn)? else {
                    return Ok(None);
                };
                if config.skipped.create {
                    return Ok(None);
                }
                let key = shape.key(&new, config)?;
                let after = shape.value(&new, config)?;
                (shape, Op::Create, key, None, Some(after))
            }
            Message::Update { rel, old, mut new } => {
                position.message_type = "UPDATE";
                // An unchanged TOASTed value is not sent again; with REPLICA IDENTITY FULL the old
                // row has it (as Debezium does). Otherwise the placeholder stands in (envelope).
                if let Some(old) = &old {
                    for (n, o) in new.iter_mut().zip(old) {
                        if *n == Datum::Unchanged && matches!(o, Datum::Text(_)) {
                            *n = o.clone();
                        }
                    }
                }
                let Some(shape) = self.shape(rel, position.lsn)? else {
                    return Ok(None);
                };
                if config.skipped.update {
                    return Ok(None);
                }
                let key = shape.key(&new, config)?;
                let before = old.as_deref().map(|o| shape.value(o, config)).transpose()?;
                let after = shape.value(&new, config)?;
                let old_key = old
                    .as_deref()
                    .map(|o| shape.key(o, config))
                    .transpose()?
                    .flatten();
                if let (Some(old_key), Some(new_key)) = (old_key, key.clone())
                    && old_key != new_key
                {
                    let records = key_change(
                        &shape,
                        config,
                        (old_key, new_key),
                        (before, after),
                        &source(&shape),
                        stream_offset(&position),
                    );
                    return Ok(Some((records, position)));
                }
                (shape, Op::Update, key, before, Some(after))
            }
            Message::Delete { rel, old } => {
                position.message_type = "DELETE";
                let Some(shape) = self.shape(rel, position.lsn)? else {
                    return Ok(None);
                };
                if config.skipped.delete {
                    return Ok(None);
                }
                let key = shape.key(&old, config)?;
                let before = shape.value(&old, config)?;
                (shape, Op::Delete, key, Some(before), None)
            }
            Message::Truncate { rels } => {
                position.message_type = "TRUNCATE";
                if config.skipped.truncate {
                    return Ok(None);
                }
                let mut records = Vec::new();
                for rel in rels {
                    if let Some(shape) = self.shape(rel, position.lsn)? {
                        let offset = stream_offset(&position);
                        records.extend(shape.records(
                            config,
                            Op::Truncate,
                            None,
                            None,
                            None,
                            &source(&shape),
                            offset,
                        ));
                    }
                }
                return Ok((!records.is_empty()).then_some((records, position)));
            }
            Message::Relation(_) | Message::Other(_) => return Ok(None),
        };
        let offset = stream_offset(&position);
        let records = shape.records(config, op, key, before, after, &source(&shape), offset);
        Ok(Some((records, position)))
    }
}

#[cfg(test)]
#[path = "pump_tests.rs"]
mod tests;
