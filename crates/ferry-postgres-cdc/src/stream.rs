//! The replication transport, behind [`ReplicationStream`] so the decoder and record building are
//! tested without a server; [`PgWireStream`] implements it with `pgwire-replication`.

use async_trait::async_trait;
use pgwire_replication::{Lsn, ReplicationClient, ReplicationConfig, ReplicationEvent};

use crate::config::CdcConfig;
use crate::error::CdcError;
use crate::types::SESSION_OPTIONS;

/// One event of the replication stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalEvent {
    /// BEGIN of a transaction.
    Begin {
        /// The xid.
        xid: u32,
        /// Commit time, µs since the Unix epoch.
        commit_time_us: i64,
        /// The LSN of its commit record.
        final_lsn: u64,
    },
    /// A pgoutput message inside the transaction (Relation, Insert, …) at `lsn`.
    Data {
        /// Where in the WAL.
        lsn: u64,
        /// The pgoutput message.
        data: Vec<u8>,
    },
    /// COMMIT.
    Commit {
        /// End LSN of the commit record: where a restart resumes after this transaction.
        end_lsn: u64,
        /// Commit time, µs since the Unix epoch.
        commit_time_us: i64,
    },
    /// The server's keepalive with its WAL end.
    KeepAlive {
        /// The server's WAL end.
        wal_end: u64,
    },
}

/// A logical replication stream that is acknowledged explicitly.
#[async_trait]
pub trait ReplicationStream: Send {
    /// The next event; `None` when the stream ended. Cancel-safe.
    async fn recv(&mut self) -> Result<Option<WalEvent>, CdcError>;
    /// Reports `lsn` as flushed: the server may discard WAL before it. Only ever a committed
    /// offset's `lsn_commit`.
    fn acknowledge(&self, lsn: u64);
    /// Ends the stream.
    async fn close(&mut self);
}

/// Microseconds between 1970-01-01 and PostgreSQL's epoch 2000-01-01.
const PG_EPOCH_US: i64 = 946_684_800_000_000;

/// `pgwire-replication`'s client.
pub struct PgWireStream {
    client: ReplicationClient,
    slot: String,
    server: String,
}

impl PgWireStream {
    fn config(config: &CdcConfig, start: u64, ack: u64) -> ReplicationConfig {
        ReplicationConfig::new(
            config.host.clone(),
            config.user.clone(),
            config.password.clone(),
            config.dbname.clone(),
            config.slot.clone(),
            config.publication.clone(),
        )
        .with_port(config.port)
        .with_tls(config.tls.wire())
        .with_start_lsn(Lsn::from_u64(start))
        .with_ack_lsn(Lsn::from_u64(ack))
        .with_status_interval(std::time::Duration::from_millis(config.status_interval_ms))
        .with_wakeup_interval(std::time::Duration::from_millis(config.status_interval_ms))
        .with_options(SESSION_OPTIONS)
        .with_application_name(format!("ferry-cdc-{}", config.slot))
    }

    fn error(config: &CdcConfig, e: impl std::fmt::Display) -> CdcError {
        CdcError::Replication {
            slot: config.slot.clone(),
            server: config.server(),
            message: e.to_string(),
        }
    }

    /// Creates the slot on a replication session and returns it still gated, with the exported
    /// snapshot's name and the consistent point: the snapshot stays valid until [`Self::start`].
    ///
    /// # Errors
    /// Connecting or creating the slot failed.
    pub async fn create_slot(config: &CdcConfig) -> Result<(GatedSession, String, u64), CdcError> {
        let mut client = ReplicationClient::connect_gated(Self::config(config, 0, 0))
            .await
            .map_err(|e| Self::error(config, e))?;
        let rows = client
            .simple_query(&format!(
                "CREATE_REPLICATION_SLOT {} LOGICAL pgoutput EXPORT_SNAPSHOT",
                config.slot
            ))
            .await
            .map_err(|e| Self::error(config, format!("CREATE_REPLICATION_SLOT failed: {e}")))?;
        let row = rows
            .first()
            .ok_or_else(|| Self::error(config, "CREATE_REPLICATION_SLOT returned no row"))?;
        let text = |i: usize| {
            row.get(i)
                .and_then(|c| c.as_ref())
                .map(|b| String::from_utf8_lossy(b).into_owned())
        };
        let point = text(1)
            .and_then(|t| crate::offset::parse_lsn(&t))
            .ok_or_else(|| {
                Self::error(
                    config,
                    "CREATE_REPLICATION_SLOT returned no consistent point",
                )
            })?;
        let snapshot = text(2)
            .ok_or_else(|| Self::error(config, "CREATE_REPLICATION_SLOT exported no snapshot"))?;
        Ok((
            GatedSession {
                client,
                server: config.server(),
                slot: config.slot.clone(),
            },
            snapshot,
            point,
        ))
    }

    /// Opens the stream at `start`, reporting `ack` as flushed until told more.
    ///
    /// # Errors
    /// Connecting or START_REPLICATION failed.
    pub async fn open(config: &CdcConfig, start: u64, ack: u64) -> Result<Self, CdcError> {
        // The walsender of a task that just stopped may hold the slot a moment longer.
        let mut attempts = 0;
        loop {
            match Self::try_open(config, start, ack).await {
                Err(e) if attempts < 20 && e.to_string().contains("is active for PID") => {
                    attempts += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                }
                other => return other,
            }
        }
    }

    async fn try_open(config: &CdcConfig, start: u64, ack: u64) -> Result<Self, CdcError> {
        let mut client = ReplicationClient::connect_gated(Self::config(config, start, ack))
            .await
            .map_err(|e| Self::error(config, e))?;
        client.start().await.map_err(|e| Self::error(config, e))?;
        client
            .wait_started()
            .await
            .map_err(|e| Self::error(config, format!("START_REPLICATION failed: {e}")))?;
        Ok(Self {
            client,
            slot: config.slot.clone(),
            server: config.server(),
        })
    }
}

/// A replication session that created the slot and holds its exported snapshot until started.
pub struct GatedSession {
    client: ReplicationClient,
    slot: String,
    server: String,
}

impl GatedSession {
    /// Starts streaming from the slot's consistent point (the exported snapshot ends here).
    ///
    /// # Errors
    /// START_REPLICATION failed.
    pub async fn start(mut self) -> Result<PgWireStream, CdcError> {
        let err = |e: pgwire_replication::PgWireError| CdcError::Replication {
            slot: self.slot.clone(),
            server: self.server.clone(),
            message: format!("START_REPLICATION failed: {e}"),
        };
        self.client.start().await.map_err(err)?;
        self.client.wait_started().await.map_err(err)?;
        Ok(PgWireStream {
            client: self.client,
            slot: self.slot,
            server: self.server,
        })
    }
}

#[async_trait]
impl ReplicationStream for PgWireStream {
    async fn recv(&mut self) -> Result<Option<WalEvent>, CdcError> {
        loop {
            let event = self
                .client
                .recv()
                .await
                .map_err(|e| CdcError::Replication {
                    slot: self.slot.clone(),
                    server: self.server.clone(),
                    message: e.to_string(),
                })?;
            return Ok(Some(match event {
                None => return Ok(None),
                Some(ReplicationEvent::Begin {
                    final_lsn,
                    xid,
                    commit_time_micros,
                }) => WalEvent::Begin {
                    xid,
                    commit_time_us: commit_time_micros + PG_EPOCH_US,
                    final_lsn: final_lsn.as_u64(),
                },
                Some(ReplicationEvent::XLogData {
                    wal_start, data, ..
                }) => WalEvent::Data {
                    lsn: wal_start.as_u64(),
                    data: data.to_vec(),
                },
                Some(ReplicationEvent::Commit {
                    end_lsn,
                    commit_time_micros,
                    ..
                }) => WalEvent::Commit {
                    end_lsn: end_lsn.as_u64(),
                    commit_time_us: commit_time_micros + PG_EPOCH_US,
                },
                Some(ReplicationEvent::KeepAlive { wal_end, .. }) => WalEvent::KeepAlive {
                    wal_end: wal_end.as_u64(),
                },
                // Logical decoding messages are not captured in this version.
                Some(ReplicationEvent::Message { .. }) => continue,
                Some(ReplicationEvent::StoppedAt { .. }) => return Ok(None),
            }));
        }
    }

    fn acknowledge(&self, lsn: u64) {
        self.client.update_applied_lsn(Lsn::from_u64(lsn));
    }

    async fn close(&mut self) {
        let _ = self.client.shutdown().await;
    }
}
