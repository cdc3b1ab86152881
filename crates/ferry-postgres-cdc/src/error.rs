//! The crate's one error type: what failed, where, and what to do.

use ferry_api::ConnectError;

/// What went wrong in the CDC source. Converted to a [`ConnectError`] at the task boundary:
/// [`CdcError::is_retriable`] decides whether the runtime retries.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CdcError {
    /// A SQL statement on the ordinary connection failed.
    #[error("PostgresCdcSource: {what} failed on {server}: {source}")]
    Sql {
        /// What the statement was for.
        what: String,
        /// `host:port/db`.
        server: String,
        /// The driver's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The replication connection failed or the server ended the stream.
    #[error("PostgresCdcSource: replication stream of slot {slot:?} on {server}: {message}")]
    Replication {
        /// The slot.
        slot: String,
        /// `host:port/db`.
        server: String,
        /// What the protocol client reported.
        message: String,
    },
    /// A pgoutput message could not be decoded.
    #[error("PostgresCdcSource: undecodable pgoutput message at LSN {lsn}: {reason}")]
    Decode {
        /// Where in the WAL.
        lsn: String,
        /// What is wrong.
        reason: String,
    },
    /// A column value could not be converted to its Connect type.
    #[error(
        "PostgresCdcSource: column {column:?} of {table} (type oid {type_oid}): value {value:?} cannot be converted: {reason}"
    )]
    Value {
        /// `schema.table`.
        table: String,
        /// The column.
        column: String,
        /// Its type OID.
        type_oid: u32,
        /// The text value (truncated).
        value: String,
        /// Why.
        reason: String,
    },
    /// Changes would be lost or repeated: the slot, the offsets or the stream disagree. Never retried.
    #[error("PostgresCdcSource: {0}")]
    Unsafe(String),
    /// A committed offset Ferry cannot resume from.
    #[error("PostgresCdcSource: the committed offset {offset} cannot be resumed from: {reason}")]
    Offset {
        /// The offset as stored.
        offset: String,
        /// Why.
        reason: String,
    },
}

impl CdcError {
    /// Whether a new connection may succeed: a lost SQL connection or a transient server state. A
    /// broken replication stream is not retried in place: the task fails and a restart resumes from
    /// the committed offsets.
    pub fn is_retriable(&self) -> bool {
        match self {
            CdcError::Sql { source, .. } => match source.as_db_error() {
                Some(db) => {
                    let code = db.code().code();
                    code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03" | "53300")
                }
                None => true,
            },
            _ => false,
        }
    }
}

impl From<CdcError> for ConnectError {
    fn from(e: CdcError) -> Self {
        let message = e.to_string();
        let error = if e.is_retriable() {
            ConnectError::retriable(message)
        } else {
            ConnectError::fatal(message)
        };
        error.with_source(e)
    }
}
