//! Errors of the offset subsystem.

use std::io;
use std::path::PathBuf;

/// An offset store failed. Every variant says which store and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// An I/O operation failed.
    #[error("offset store {path}: {op} failed: {source}", path = path.display())]
    Io {
        /// The file involved.
        path: PathBuf,
        /// What was being done ("open", "append", "fdatasync", …).
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// The store's content is damaged. Ferry refuses to open it rather than start from nothing.
    #[error(
        "offset store {path} is corrupt at byte {byte_offset}: {reason}. Ferry will not open it, \
         because starting without these offsets would silently re-read or skip data. The file has not \
         been modified. Keep a copy, then either restore it from a backup, or move it aside to start \
         every connector from its initial position.",
        path = path.display()
    )]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// Where the damage starts.
        byte_offset: u64,
        /// What was found.
        reason: String,
    },
    /// The file is not a Ferry offset store of a version this build reads.
    #[error("offset store {path} is not usable: {reason}. The file has not been modified.", path = path.display())]
    UnsupportedFormat {
        /// The file.
        path: PathBuf,
        /// What was found instead.
        reason: String,
    },
    /// Another process holds the store.
    #[error(
        "offset store {path} is in use by another process (lock {lock} is held). Stop the other Ferry \
         worker, or give this one another offset.storage.file.filename.",
        path = path.display(), lock = lock.display()
    )]
    Locked {
        /// The store file.
        path: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// An earlier write or fsync failed, so what is durable is unknown; the store refuses more work.
    #[error(
        "offset store {path} refuses writes after an earlier failure ({cause}); restart the worker to \
         reopen and verify it",
        path = path.display()
    )]
    Poisoned {
        /// The store file.
        path: PathBuf,
        /// The first failure.
        cause: String,
    },
    /// One batch is too large to be written as one atomic unit. Nothing was written; the store is
    /// still usable.
    #[error(
        "offset store {path}: a batch of {bytes} encoded bytes exceeds the limit of {limit} bytes for \
         one atomic write; nothing was written. Flush more often so each batch carries fewer offsets.",
        path = path.display()
    )]
    BatchTooLarge {
        /// The store file.
        path: PathBuf,
        /// The encoded size of the batch (at least; counting stopped at the limit).
        bytes: u64,
        /// The largest batch the store accepts.
        limit: u64,
    },
    /// A newer instance of the same task opened its writer ([`OffsetBackingStore::open_task_writer`]
    /// (crate::OffsetBackingStore::open_task_writer)) and the store refused this one's write: the task
    /// runs elsewhere now. Nothing of the batch was committed; the task must stop without committing
    /// or reporting anything (its new owner reports its status).
    #[error(
        "offset store {store}: task writer {fencing_id:?} was fenced by a newer instance of the same task \
         ({message}); nothing of the batch was committed and this instance must stop"
    )]
    Fenced {
        /// Which store.
        store: String,
        /// The task writer's fencing id (Kafka: the `transactional.id`).
        fencing_id: String,
        /// What the store reported.
        message: String,
    },
    /// A store backend (broker, database) failed. Build it with [`StoreError::backend`].
    #[error("offset store {store}: {message}")]
    Backend {
        /// Which store.
        store: String,
        /// What failed (the message already quotes the client's error, so `Display` shows it once).
        message: String,
        /// Whether trying again may succeed.
        retriable: bool,
        /// The client's own error (an rdkafka or tokio-postgres error), if any.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl StoreError {
    /// A [`StoreError::Backend`] of the store named `store`, without a source.
    pub fn backend(store: impl Into<String>, message: impl Into<String>, retriable: bool) -> Self {
        StoreError::Backend {
            store: store.into(),
            message: message.into(),
            retriable,
            source: None,
        }
    }

    /// The same error, caused by `error` (kept as the source of a [`StoreError::Backend`]; other
    /// variants carry their cause already and are returned unchanged).
    #[must_use]
    pub fn with_source(mut self, error: impl std::error::Error + Send + Sync + 'static) -> Self {
        if let StoreError::Backend { source, .. } = &mut self {
            *source = Some(Box::new(error));
        }
        self
    }

    /// Whether a newer instance of the task fenced this writer ([`StoreError::Fenced`]).
    pub fn is_fenced(&self) -> bool {
        matches!(self, StoreError::Fenced { .. })
    }

    /// Whether trying the same operation again may succeed.
    pub fn is_retriable(&self) -> bool {
        match self {
            StoreError::Backend { retriable, .. } => *retriable,
            StoreError::Io { source, .. } => matches!(
                source.kind(),
                io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            _ => false,
        }
    }
}

/// An offset flush failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FlushError {
    /// Another flush of the same writer did not finish within the timeout.
    #[error(
        "offset flush of connector {connector:?} not started: another flush is still running after {waited_ms} ms"
    )]
    FlushInProgress {
        /// The connector.
        connector: String,
        /// How long this flush waited.
        waited_ms: u128,
    },
    /// No flush was begun, or it was cancelled before `flush` ran.
    #[error(
        "offset flush of connector {connector:?}: no flush in progress (call begin_flush first)"
    )]
    NotBegun {
        /// The connector.
        connector: String,
    },
    /// The store failed; the offsets were staged again and the next flush retries them.
    #[error(
        "offset flush of connector {connector:?} failed; the offsets will be retried: {source}"
    )]
    Store {
        /// The connector.
        connector: String,
        /// The store's error.
        #[source]
        source: StoreError,
    },
}
