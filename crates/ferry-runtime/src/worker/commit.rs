//! One offset commit: take what the sink acknowledged, stage it, flush it within a deadline.
//!
//! Called every `offset.flush.interval.ms` by the task's own committer and once more at stop. Each task
//! has its own writer, so commits of one task never wait for another task's. On failure or timeout the
//! flush is cancelled, its offsets go back to the writer under newer ones, and the next commit retries.
//! A non-retriable store error is different: the store will not commit again in this process, so it is
//! reported to the worker's [`StoreHealth`], which stops every task.

use std::time::{Duration, Instant};

use ferry_offsets::{AckTracker, FlushError, OffsetWriter, StoreError};

use crate::metrics::TaskMetrics;
use crate::worker::health::{StoreHealth, store_failure_trace};

/// What a commit did.
#[derive(Debug)]
pub(crate) enum CommitOutcome {
    /// Offsets were flushed durably.
    Committed {
        partitions: usize,
        records: usize,
        elapsed: Duration,
    },
    /// Nothing new was acknowledged.
    NothingToCommit,
    /// Nothing was committed: see [`CommitError::is_retriable`] for whether a later commit may be.
    Failed(CommitError),
}

/// Why a commit failed. The texts are the ones the commit log line has always shown.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum CommitError {
    /// The flush did not complete within `offset.flush.timeout.ms`; it was cancelled (its offsets go
    /// back to the writer) and the next interval retries.
    #[error(
        "flush did not complete within offset.flush.timeout.ms={timeout_ms} ms; cancelled, retrying next interval"
    )]
    Timeout { timeout_ms: u128 },
    /// The flush could not start or the store refused it; the next interval retries.
    #[error("{0}")]
    Flush(#[from] FlushError),
    /// The store failed for good (see [`StoreHealth`]); nothing will be retried. `trace` is the task
    /// trace every task fails with.
    #[error("{trace}")]
    StoreFailed {
        trace: String,
        #[source]
        source: FlushError,
    },
    /// A newer instance of the task fenced this one's writer (Kafka: its transactional id was taken
    /// over): nothing was committed, and the task stops without committing or reporting a status.
    #[error("{0}")]
    Fenced(#[source] FlushError),
    /// Exactly-once: the task's transaction could not be committed (or begun); it was aborted, and
    /// the task fails — or, when the producer was fenced ([`crate::sink::SinkErrorKind::Fenced`]),
    /// stops without reporting.
    #[error("{0}")]
    Transaction(#[source] crate::sink::SinkError),
    /// Exactly-once with `transaction.boundary=connector`: the task's transaction requests contradict
    /// each other (or overflow); it fails.
    #[error(transparent)]
    Boundary(#[from] super::task::transaction_context::BoundaryError),
}

impl CommitError {
    /// Whether a later commit may succeed (the periodic committer keeps going).
    pub(crate) fn is_retriable(&self) -> bool {
        matches!(self, CommitError::Timeout { .. } | CommitError::Flush(_))
    }
}

/// Everything one commit needs.
pub(crate) struct Committer {
    pub(crate) task: String,
    pub(crate) acks: AckTracker,
    pub(crate) writer: std::sync::Arc<OffsetWriter>,
    pub(crate) flush_timeout: Duration,
    pub(crate) metrics: std::sync::Arc<TaskMetrics>,
    pub(crate) health: std::sync::Arc<StoreHealth>,
    /// `offset.flush.interval.ms=0`: commits follow each other, so each is logged at DEBUG.
    pub(crate) continuous: bool,
    /// The records a successful commit covered: the tracker's
    /// [`submitted_through`](ferry_offsets::CommittableOffsets::submitted_through) of a commit that
    /// left nothing pending (every record submitted until then is committed or was never sent).
    /// `offset.flush.strict.bound` holds the next poll until it reaches the last batch.
    pub(crate) covered: tokio::sync::watch::Sender<u64>,
}

impl Committer {
    pub(crate) async fn commit(&self) -> CommitOutcome {
        let started = Instant::now();
        let committable = self.acks.committable();
        let records = committable.committable_records;
        for (partition, offset) in committable.offsets {
            self.writer.stage(partition, Some(offset));
        }
        let partitions = self.writer.staged_len();
        let outcome = match self.writer.begin_flush(self.flush_timeout).await {
            Ok(None) => CommitOutcome::NothingToCommit,
            Ok(Some(flush)) => {
                let remaining = self.flush_timeout.saturating_sub(started.elapsed());
                match tokio::time::timeout(remaining, flush.flush()).await {
                    Ok(Ok(())) => CommitOutcome::Committed {
                        partitions,
                        records,
                        elapsed: started.elapsed(),
                    },
                    Ok(Err(e)) if is_fenced(&e) => CommitOutcome::Failed(CommitError::Fenced(e)),
                    Ok(Err(e)) => match failed_for_good(&e) {
                        Some(store) => {
                            let trace = store_failure_trace(&store.to_string());
                            self.health.fail(trace.clone());
                            CommitOutcome::Failed(CommitError::StoreFailed { trace, source: e })
                        }
                        None => CommitOutcome::Failed(e.into()),
                    },
                    // The timeout dropped the flush future, and with it the guard: the flush is
                    // cancelled, its offsets staged again for the next interval.
                    Err(_) => CommitOutcome::Failed(CommitError::Timeout {
                        timeout_ms: self.flush_timeout.as_millis(),
                    }),
                }
            }
            Err(e) => CommitOutcome::Failed(e.into()),
        };
        if committable.pending_records == 0
            && matches!(
                outcome,
                CommitOutcome::Committed { .. } | CommitOutcome::NothingToCommit
            )
        {
            self.covered.send_if_modified(|covered| {
                let advanced = committable.submitted_through > *covered;
                *covered = (*covered).max(committable.submitted_through);
                advanced
            });
        }
        match &outcome {
            CommitOutcome::Committed { elapsed, .. } => self.metrics.commit_succeeded(*elapsed),
            CommitOutcome::NothingToCommit => self.metrics.commit_skipped(),
            CommitOutcome::Failed(_) => self.metrics.commit_failed(),
        }
        match &outcome {
            CommitOutcome::Committed {
                partitions,
                records,
                elapsed,
            } if self.continuous => tracing::debug!(
                task = %self.task,
                "committed offsets of {partitions} partitions ({records} records acknowledged since the last commit) in {elapsed:.1?}; {} records pending",
                committable.pending_records
            ),
            CommitOutcome::Committed {
                partitions,
                records,
                elapsed,
            } => tracing::info!(
                task = %self.task,
                "committed offsets of {partitions} partitions ({records} records acknowledged since the last commit) in {elapsed:.1?}; {} records pending",
                committable.pending_records
            ),
            CommitOutcome::NothingToCommit => tracing::debug!(
                task = %self.task,
                "nothing to commit; {} records pending acknowledgement",
                committable.pending_records
            ),
            CommitOutcome::Failed(reason) => tracing::error!(
                task = %self.task,
                "offset commit failed: {reason}; {} records pending acknowledgement",
                committable.pending_records
            ),
        }
        outcome
    }
}

/// Whether a newer instance of the task fenced this one's writer.
fn is_fenced(error: &FlushError) -> bool {
    matches!(error, FlushError::Store { source, .. } if source.is_fenced())
}

/// The store's error when it means the store will not commit again in this process. A batch too
/// large is about this one writer's batch, not the store: it keeps being reported at every commit.
fn failed_for_good(error: &FlushError) -> Option<&StoreError> {
    match error {
        FlushError::Store { source, .. }
            if !source.is_retriable()
                && !matches!(
                    source,
                    StoreError::BatchTooLarge { .. } | StoreError::Fenced { .. }
                ) =>
        {
            Some(source)
        }
        _ => None,
    }
}
