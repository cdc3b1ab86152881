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
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CommitOutcome {
    /// Offsets were flushed durably.
    Committed {
        partitions: usize,
        records: usize,
        elapsed: Duration,
    },
    /// Nothing new was acknowledged.
    NothingToCommit,
    /// The flush failed or timed out; it will be retried.
    Failed(String),
    /// The store failed for good (see [`StoreHealth`]); nothing will be retried.
    StoreFailed(String),
}

/// Everything one commit needs.
pub(crate) struct Committer {
    pub(crate) task: String,
    pub(crate) acks: AckTracker,
    pub(crate) writer: std::sync::Arc<OffsetWriter>,
    pub(crate) flush_timeout: Duration,
    pub(crate) metrics: std::sync::Arc<TaskMetrics>,
    pub(crate) health: std::sync::Arc<StoreHealth>,
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
            Ok(false) => CommitOutcome::NothingToCommit,
            Ok(true) => {
                let remaining = self.flush_timeout.saturating_sub(started.elapsed());
                match tokio::time::timeout(remaining, self.writer.flush()).await {
                    Ok(Ok(())) => CommitOutcome::Committed {
                        partitions,
                        records,
                        elapsed: started.elapsed(),
                    },
                    Ok(Err(FlushError::Store { source, .. })) if cannot_commit(&source) => {
                        let trace = store_failure_trace(&source.to_string());
                        self.health.fail(trace.clone());
                        CommitOutcome::StoreFailed(trace)
                    }
                    Ok(Err(e)) => CommitOutcome::Failed(e.to_string()),
                    Err(_) => {
                        self.writer.cancel_flush();
                        CommitOutcome::Failed(format!(
                            "flush did not complete within offset.flush.timeout.ms={} ms; cancelled, retrying next interval",
                            self.flush_timeout.as_millis()
                        ))
                    }
                }
            }
            Err(e) => CommitOutcome::Failed(e.to_string()),
        };
        match &outcome {
            CommitOutcome::Committed { elapsed, .. } => self.metrics.commit_succeeded(*elapsed),
            CommitOutcome::NothingToCommit => self.metrics.commit_skipped(),
            CommitOutcome::Failed(_) | CommitOutcome::StoreFailed(_) => {
                self.metrics.commit_failed()
            }
        }
        match &outcome {
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
            CommitOutcome::Failed(reason) | CommitOutcome::StoreFailed(reason) => tracing::error!(
                task = %self.task,
                "offset commit failed: {reason}; {} records pending acknowledgement",
                committable.pending_records
            ),
        }
        outcome
    }
}

/// Whether a store error means the store will not commit again in this process. A batch too large
/// is about this one writer's batch, not the store: it keeps being reported at every commit.
fn cannot_commit(error: &StoreError) -> bool {
    !error.is_retriable() && !matches!(error, StoreError::BatchTooLarge { .. })
}
