//! The task: start-up checks, the background loop, and slot acknowledgement from `commit`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ferry_api::config::{invalid_config, offsets_read_error};
use ferry_api::{ConnectError, OffsetStorageReader, SourceRecord, SourceTask, SourceTaskContext};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;

use crate::catalog::{Db, SlotInfo};
use crate::config::{CdcConfig, SnapshotMode};
use crate::error::CdcError;
use crate::offset::{Resume, lsn_text, partition, resume_from};
use crate::pump::{self, Item, Pump, SnapshotFrom, Start};
use crate::stream::{PgWireStream, ReplicationStream};

/// Records handed to `poll` at most at once.
const BATCH: usize = 1024;
/// What `poll` waits for a first record.
const POLL_WAIT: Duration = Duration::from_millis(500);

/// A running PostgresCdcSource task. See the crate documentation.
#[derive(Default)]
pub struct PostgresCdcTask {
    running: Option<Running>,
}

struct Running {
    config: Arc<CdcConfig>,
    records: mpsc::Receiver<Item>,
    /// Wakes the read-back of the committed offset (see [`read_back`]).
    committed: Arc<Notify>,
    read_back: JoinHandle<()>,
    stop: watch::Sender<bool>,
    pump: JoinHandle<()>,
}

/// After each offset commit (woken by `commit`), reads the committed offset back and hands its
/// `lsn_commit` to the stream as flushed — the only way the slot advances. Off the task's loop: with
/// offsets in Kafka a read is a read to the end of the offsets topic, and commits in quick
/// succession (`offset.flush.interval.ms=0`) would otherwise pace `poll`. Wake-ups during a read
/// fold into one more read after it, so the slot never lags the last commit by more than one read.
async fn read_back(
    config: Arc<CdcConfig>,
    reader: Arc<dyn OffsetStorageReader>,
    committed: Arc<Notify>,
    acks: watch::Sender<u64>,
) {
    loop {
        committed.notified().await;
        match reader.offset(&partition(&config.prefix)).await {
            Ok(offset) => {
                if let Ok(Resume::Stream { lsn_commit, .. }) = resume_from(offset.as_ref()) {
                    acks.send_if_modified(|current| {
                        let raise = lsn_commit > *current;
                        if raise {
                            *current = lsn_commit;
                        }
                        raise
                    });
                }
            }
            // The next commit tries again; until then the slot keeps its older position.
            Err(e) => tracing::warn!(
                "PostgresCdcSource: reading the committed offset of server {:?} back failed, the slot \
                 is not acknowledged this time: {e}",
                config.prefix
            ),
        }
    }
}

impl PostgresCdcTask {
    /// A task, not started.
    pub fn new() -> Self {
        Self::default()
    }
}

fn recovery_hint(config: &CdcConfig) -> String {
    format!(
        "to recover, take a new snapshot: stop the connector, delete its offsets (`ferry offsets reset` \
         or the REST offsets API), drop the slot if it still exists (SELECT pg_drop_replication_slot('{}')) \
         and start it again with snapshot.mode=initial",
        config.slot
    )
}

/// Where to start, after checking the slot against the committed offset.
async fn prepare(config: &CdcConfig, db: &Db, resume: Resume) -> Result<Start, CdcError> {
    let slot = db.slot(&config.slot).await?;
    if let Some(info) = &slot {
        if info.plugin.as_deref() != Some("pgoutput") {
            return Err(CdcError::Unsafe(format!(
                "replication slot {:?} uses plugin {:?}, not pgoutput: choose another slot.name",
                config.slot, info.plugin
            )));
        }
        if info.database.as_deref() != Some(config.dbname.as_str()) {
            return Err(CdcError::Unsafe(format!(
                "replication slot {:?} decodes database {:?}, not {:?}: choose another slot.name",
                config.slot, info.database, config.dbname
            )));
        }
    }
    if config.snapshot == SnapshotMode::Always {
        tracing::warn!(slot = %config.slot, "PostgresCdcSource: snapshot.mode=always: taking a new snapshot");
        return resnapshot(config, db, slot.is_some()).await;
    }
    if let Some(lost) = lost_position(config, &resume, slot.as_ref()) {
        if config.snapshot != SnapshotMode::WhenNeeded {
            return Err(CdcError::Unsafe(lost));
        }
        // The user asked for a new snapshot whenever the committed position cannot be resumed.
        tracing::warn!(slot = %config.slot, "PostgresCdcSource: {lost}; snapshot.mode=when_needed: taking a new snapshot");
        return resnapshot(config, db, slot.is_some()).await;
    }
    if config.snapshot == SnapshotMode::InitialOnly && matches!(resume, Resume::Stream { .. }) {
        tracing::info!(
            "PostgresCdcSource: snapshot.mode=initial_only and the snapshot is complete: nothing to do"
        );
        return Ok(Start::Idle);
    }
    // The checks passed: only now change the publication.
    let ddl = db.ensure_publication(config).await?;
    if ddl.is_empty() {
        tracing::info!(publication = %config.publication, "PostgresCdcSource: publication up to date, no DDL run");
    }
    match (resume, slot) {
        (
            Resume::Stream {
                lsn_commit,
                partial,
            },
            Some(_),
        ) => {
            tracing::info!(
                slot = %config.slot,
                "PostgresCdcSource: resuming at lsn_commit {}{}",
                lsn_text(lsn_commit),
                match partial {
                    None => String::new(),
                    Some(crate::offset::Partial::Events { xid, processed }) => format!(", skipping the first {processed} change(s) of transaction {xid}"),
                    Some(crate::offset::Partial::UpTo { xid, lsn_proc }) => format!(", skipping what Debezium emitted: transactions before {xid}, and its changes up to {}", lsn_text(lsn_proc)),
                }
            );
            let stream = PgWireStream::open(config, lsn_commit, lsn_commit).await?;
            Ok(Start::Stream {
                stream: Box::new(stream) as Box<dyn ReplicationStream>,
                lsn_commit,
                from_offset: true,
                partial,
            })
        }
        (Resume::Fresh, Some(info)) if config.snapshot == SnapshotMode::NoData => {
            let from = info.confirmed_flush.unwrap_or(0);
            tracing::info!(slot = %config.slot, "PostgresCdcSource: no committed offset; streaming from the slot's confirmed_flush_lsn {}", lsn_text(from));
            let stream = PgWireStream::open(config, from, from).await?;
            Ok(Start::Stream {
                stream: Box::new(stream),
                lsn_commit: from,
                from_offset: false,
                partial: None,
            })
        }
        (Resume::Fresh, Some(_)) if config.snapshot == SnapshotMode::WhenNeeded => {
            tracing::warn!(slot = %config.slot, "PostgresCdcSource: no committed offset and slot {} exists; snapshot.mode=when_needed: dropping it for a new snapshot", config.slot);
            db.drop_slot(&config.slot).await?;
            create_and_snapshot(config).await
        }
        (Resume::Fresh, Some(_)) => Err(CdcError::Unsafe(format!(
            "replication slot {:?} already exists but no offset was committed: a consistent initial snapshot \
             needs a slot created with it. Drop the slot (SELECT pg_drop_replication_slot('{}')) if nobody \
             else uses it, or set snapshot.mode=no_data to stream from it without a snapshot",
            config.slot, config.slot
        ))),
        (Resume::SnapshotUnfinished(Some(progress)), Some(info))
            if config.snapshot != SnapshotMode::NoData
                && info.confirmed_flush.is_none_or(|f| f <= progress.point) =>
        {
            // The slot still stands at the snapshot's consistent point (nothing of the stream was
            // acknowledged): read the rest of the tables, then stream from that point.
            Ok(Start::Snapshot {
                point: progress.point,
                from: SnapshotFrom::Resumed(progress),
                stream_after: config.snapshot != SnapshotMode::InitialOnly,
            })
        }
        (Resume::SnapshotUnfinished(_), Some(_)) => {
            // Our own slot, created for the snapshot that did not finish, but without progress
            // Ferry can resume from (Debezium's offset): nothing of it was streamed.
            tracing::warn!(slot = %config.slot, "PostgresCdcSource: the initial snapshot did not finish and its offset records no progress to resume from; dropping slot {} and starting the snapshot again", config.slot);
            db.drop_slot(&config.slot).await?;
            create_and_snapshot(config).await
        }
        (Resume::Fresh | Resume::SnapshotUnfinished(_), None) => create_and_snapshot(config).await,
        // Refused above.
        (Resume::Stream { .. }, None) => Err(CdcError::Unsafe(format!(
            "replication slot {:?} is missing",
            config.slot
        ))),
    }
}

/// Why the committed position cannot be resumed from this slot (what was lost, how to recover),
/// `None` when it can.
fn lost_position(config: &CdcConfig, resume: &Resume, slot: Option<&SlotInfo>) -> Option<String> {
    if let Some(info) = slot
        && info.wal_status.as_deref() == Some("lost")
    {
        return Some(format!(
            "replication slot {:?} has wal_status=lost: PostgreSQL removed WAL the slot still needed \
             (max_slot_wal_keep_size), so changes were lost; {}",
            config.slot,
            recovery_hint(config)
        ));
    }
    let Resume::Stream { lsn_commit, .. } = resume else {
        return None;
    };
    match slot {
        None => Some(format!(
            "replication slot {:?} does not exist on {}, but offsets were committed up to LSN {}: every change \
             after that LSN is lost (the slot was dropped or never created here). Ferry will not \
             recreate it silently; {}",
            config.slot,
            config.server(),
            lsn_text(*lsn_commit),
            recovery_hint(config)
        )),
        Some(info) => match info.confirmed_flush {
            Some(flushed) if flushed > *lsn_commit => Some(format!(
                "replication slot {:?} has confirmed_flush_lsn {} past the committed offset's lsn_commit {}: \
                 the changes between them were acknowledged by someone else and can no longer be read \
                 (was the slot used by another consumer, or the offsets restored from an older backup?); {}",
                config.slot,
                lsn_text(flushed),
                lsn_text(*lsn_commit),
                recovery_hint(config)
            )),
            _ => None,
        },
    }
}

/// A new slot and snapshot, dropping the old slot first when there is one.
async fn resnapshot(config: &CdcConfig, db: &Db, slot_exists: bool) -> Result<Start, CdcError> {
    let ddl = db.ensure_publication(config).await?;
    if ddl.is_empty() {
        tracing::info!(publication = %config.publication, "PostgresCdcSource: publication up to date, no DDL run");
    }
    if slot_exists {
        tracing::warn!(slot = %config.slot, "PostgresCdcSource: dropping replication slot {} to take a new snapshot", config.slot);
        db.drop_slot(&config.slot).await?;
    }
    create_and_snapshot(config).await
}

async fn create_and_snapshot(config: &CdcConfig) -> Result<Start, CdcError> {
    let (session, snapshot, point) = PgWireStream::create_slot(config).await?;
    tracing::info!(slot = %config.slot, "PostgresCdcSource: created replication slot {} (pgoutput), consistent point {}", config.slot, lsn_text(point));
    if config.snapshot == SnapshotMode::NoData {
        let stream = session.start().await?;
        return Ok(Start::Stream {
            stream: Box::new(stream),
            lsn_commit: point,
            from_offset: false,
            partial: None,
        });
    }
    Ok(Start::Snapshot {
        from: SnapshotFrom::Exported {
            session,
            name: snapshot,
        },
        point,
        stream_after: config.snapshot == SnapshotMode::Initial,
    })
}

#[async_trait]
impl SourceTask for PostgresCdcTask {
    /// Its offsets are all it needs from a delivered record: no `commit_record`.
    fn wants_delivered_records(&self) -> bool {
        false
    }

    async fn start(&mut self, context: Arc<dyn SourceTaskContext>) -> Result<(), ConnectError> {
        let config = CdcConfig::parse(context.configs())
            .map_err(|issues| invalid_config("PostgresCdcSource", "task configuration", &issues))?;
        let config = Arc::new(config);
        let reader = context.offset_storage_reader();
        let committed = reader
            .offset(&partition(&config.prefix))
            .await
            .map_err(|e| {
                offsets_read_error(
                    format!(
                        "PostgresCdcSource: reading the offset of server {:?}",
                        config.prefix
                    ),
                    e,
                )
            })?;
        let resume = resume_from(committed.as_ref())?;
        let db = Arc::new(Db::connect(&config).await?);
        let start = prepare(&config, &db, resume).await?;
        let (out, records) = mpsc::channel(BATCH * 4);
        let (acks, acks_rx) = watch::channel(0);
        let committed = Arc::new(Notify::new());
        let read_back = tokio::spawn(read_back(config.clone(), reader, committed.clone(), acks));
        let (stop, stop_rx) = watch::channel(false);
        let pump = tokio::spawn(pump::run(
            Pump {
                config: config.clone(),
                catalog: db.clone(),
                db: Some(db),
                out,
                acks: acks_rx,
                stop: stop_rx,
            },
            start,
        ));
        self.running = Some(Running {
            config,
            records,
            committed,
            read_back,
            stop,
            pump,
        });
        Ok(())
    }

    async fn poll(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        let Some(running) = self.running.as_mut() else {
            return Err(ConnectError::fatal("PostgresCdcSource: poll before start"));
        };
        let mut batch = Vec::new();
        let first = match tokio::time::timeout(POLL_WAIT, running.records.recv()).await {
            Err(_) => return Ok(batch),
            Ok(None) => {
                return Err(ConnectError::fatal(
                    "PostgresCdcSource: the replication loop ended",
                ));
            }
            Ok(Some(item)) => item,
        };
        batch.push(first?);
        while batch.len() < BATCH {
            match running.records.try_recv() {
                Ok(item) => batch.push(item?),
                Err(_) => break,
            }
        }
        Ok(batch)
    }

    /// After an offset commit: wakes the read-back of the committed offset ([`read_back`]), which
    /// reports its `lsn_commit` to the slot as flushed.
    async fn commit(&mut self) -> Result<(), ConnectError> {
        if let Some(running) = self.running.as_ref() {
            running.committed.notify_one();
        }
        Ok(())
    }

    async fn stop(&mut self) -> Result<(), ConnectError> {
        let Some(running) = self.running.take() else {
            return Ok(());
        };
        let _ = running.stop.send(true);
        running.read_back.abort();
        drop(running.records);
        let mut pump = running.pump;
        if tokio::time::timeout(Duration::from_secs(5), &mut pump)
            .await
            .is_err()
        {
            pump.abort();
        }
        // The walsender releases the slot a moment after the stream closed: wait (bounded) so
        // that a task started right after this one finds the slot free.
        // A connection of its own: the loop's may have been cut inside the snapshot transaction.
        let db = Db::connect(&running.config).await;
        if let Ok(db) = &db {
            for _ in 0..50 {
                match db.slot_active(&running.config.slot).await {
                    Ok(true) => tokio::time::sleep(Duration::from_millis(100)).await,
                    _ => break,
                }
            }
        }
        if running.config.drop_slot_on_stop {
            let db = db?;
            let mut last = None;
            for _ in 0..50 {
                match db.drop_slot(&running.config.slot).await {
                    Ok(()) => {
                        tracing::warn!(slot = %running.config.slot, "PostgresCdcSource: slot.drop.on.stop=true: dropped replication slot {}", running.config.slot);
                        return Ok(());
                    }
                    Err(e) => last = Some(e),
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            if let Some(e) = last {
                return Err(e.into());
            }
        }
        Ok(())
    }
}
