//! Exactly-once delivery, Kafka Connect's `ExactlyOnceWorkerSourceTask` (KIP-618): the task's records
//! and the offsets that cover them go through the task's own transactional sink in one transaction.
//! A transaction begins before the first record of a batch ([`TaskHooks::prepare_to_send`]) and
//! commits, with the offsets of every record sent in it, at the end of each poll batch
//! (`transaction.boundary=poll`) or before the first poll after the interval passed (`interval`);
//! a pause and a graceful stop commit the open one, a failure aborts it. Nothing is tracked per
//! record and nothing commits periodically: the transaction's commit is the offset commit.
//! `commit_record` is called only once the record's transaction committed
//! ([`TaskHooks::take_settled_records`]). With `transaction.boundary=connector` the task ends
//! transactions itself through its `TransactionContext` (see `transaction_context`).
//!
//! A commit refused because a newer instance of the task fenced the producer marks the task
//! superseded ([`TaskFence::supersede`]): it stops without committing or reporting a status; its
//! open transaction was aborted by the coordinator, so `read_committed` readers never see its
//! records.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ferry_api::SourceRecord;
use ferry_offsets::{
    BatchWritten, OffsetBackingStore, OffsetWrite, OffsetWriter, StoreError, StoredOffset,
    SubmittedRecord, WriteBatch,
};
use ferry_plugin::sink::{SinkError, SinkErrorKind, TransactionalSink};

use crate::config::exactly_once::TransactionBoundary;
use crate::metrics::TaskMetrics;
use crate::worker::commit::{CommitError, CommitOutcome};
use crate::worker::fence::TaskFence;
use crate::worker::task::semantics::{Boundary, Commit, Settled, TaskHooks};
use crate::worker::task::transaction_context::{BoundaryError, WorkerTransactionContext};

/// One task's exactly-once hooks.
pub(crate) struct ExactlyOnceHooks {
    task: String,
    sink: Arc<dyn TransactionalSink>,
    /// Stages the offsets of the records sent in the open transaction; its flush writes them into
    /// the transaction and commits it ([`IntoTransaction`]).
    writer: OffsetWriter,
    /// `None`: every poll batch; else the interval.
    interval: Option<Duration>,
    flush_timeout: Duration,
    /// When the open transaction began.
    began: Option<Instant>,
    /// Records sent in the open transaction.
    in_transaction: usize,
    /// Transactions ended and not yet handed to the loop, in order.
    settled: Vec<Settled>,
    /// `transaction.boundary=connector`: the task's requests.
    context: Option<Arc<WorkerTransactionContext>>,
    fence: Arc<TaskFence>,
    metrics: Arc<TaskMetrics>,
}

/// Parts of an exactly-once task.
pub(crate) struct ExactlyOnceParts {
    pub(crate) task: String,
    pub(crate) connector: String,
    pub(crate) sink: Arc<dyn TransactionalSink>,
    pub(crate) boundary: TransactionBoundary,
    /// `offset.flush.interval.ms`: the interval of `transaction.boundary=interval` without its own.
    pub(crate) flush_interval: Duration,
    pub(crate) flush_timeout: Duration,
    pub(crate) fence: Arc<TaskFence>,
    pub(crate) metrics: Arc<TaskMetrics>,
    /// The context given to the task (`transaction.boundary=connector` only).
    pub(crate) context: Option<Arc<WorkerTransactionContext>>,
}

impl ExactlyOnceHooks {
    pub(crate) fn new(parts: ExactlyOnceParts) -> Self {
        let store: Arc<dyn OffsetBackingStore> = Arc::new(IntoTransaction {
            sink: parts.sink.clone(),
        });
        let interval = match parts.boundary {
            TransactionBoundary::Poll => None,
            TransactionBoundary::Interval(interval) => {
                Some(interval.unwrap_or(parts.flush_interval))
            }
            TransactionBoundary::Connector => None,
        };
        Self {
            task: parts.task,
            sink: parts.sink,
            writer: OffsetWriter::new(parts.connector, store),
            interval,
            flush_timeout: parts.flush_timeout,
            began: None,
            in_transaction: 0,
            settled: Vec::new(),
            context: parts.context,
            fence: parts.fence,
            metrics: parts.metrics,
        }
    }

    /// Aborts the open transaction at the task's request: its records and offsets are discarded.
    /// Its records are first written (so their deliveries report them sent, and the loop drops them
    /// without `commit_record`), then the abort marks them aborted.
    async fn abort(&mut self) -> Result<(), CommitError> {
        if !self.sink.in_transaction() {
            return Ok(());
        }
        let records = std::mem::take(&mut self.in_transaction);
        self.began = None;
        let offsets = self.writer.discard_staged();
        if let Err(e) = self.sink.flush(self.flush_timeout).await {
            tracing::warn!(task = %self.task, "the records of the transaction the task aborts were not all written: {e}");
        }
        let aborted = self.sink.abort().await;
        self.settled.push(Settled {
            records,
            committed: false,
        });
        match aborted {
            Ok(()) => {
                tracing::info!(task = %self.task, "aborted a transaction of {records} records and {offsets} offsets at the task's request");
                Ok(())
            }
            Err(e) => Err(self.failed(e)),
        }
    }

    /// The failure of a transactional call: fenced marks the task superseded.
    fn failed(&self, e: SinkError) -> CommitError {
        if e.kind == SinkErrorKind::Fenced {
            self.fence.supersede();
        }
        CommitError::Transaction(e)
    }

    /// Commits the open transaction with the offsets of its records.
    async fn commit(&mut self) -> CommitOutcome {
        if !self.sink.in_transaction() {
            return CommitOutcome::NothingToCommit;
        }
        let started = Instant::now();
        let partitions = self.writer.staged_len();
        let flushed = match self.writer.begin_flush(self.flush_timeout).await {
            Ok(Some(flush)) => flush.flush().await.map_err(|e| match e {
                ferry_offsets::FlushError::Store {
                    source:
                        StoreError::Backend {
                            source: Some(s), ..
                        },
                    ..
                } => match s.downcast::<SinkError>() {
                    Ok(sink) => *sink,
                    Err(other) => SinkError::new(
                        self.sink.describe(),
                        SinkErrorKind::Fatal,
                        other.to_string(),
                    ),
                },
                other => SinkError::new(
                    self.sink.describe(),
                    SinkErrorKind::Fatal,
                    other.to_string(),
                ),
            }),
            // Records whose offsets are not tracked (none): the transaction commits without offsets.
            Ok(None) => self.sink.commit(&[]).await,
            Err(e) => Err(SinkError::new(
                self.sink.describe(),
                SinkErrorKind::Fatal,
                e.to_string(),
            )),
        };
        self.began = None;
        let records = std::mem::take(&mut self.in_transaction);
        match flushed {
            Ok(()) => {
                self.settled.push(Settled {
                    records,
                    committed: true,
                });
                let elapsed = started.elapsed();
                self.metrics.commit_succeeded(elapsed);
                tracing::debug!(task = %self.task, "committed a transaction of {records} records and {partitions} offsets in {elapsed:.1?}");
                CommitOutcome::Committed {
                    partitions,
                    records,
                    elapsed,
                }
            }
            Err(e) => {
                self.metrics.commit_failed();
                if e.kind != SinkErrorKind::Fenced {
                    tracing::error!(task = %self.task, "the transaction of {records} records was not committed: {e}");
                }
                CommitOutcome::Failed(self.failed(e))
            }
        }
    }
}

impl TaskHooks for ExactlyOnceHooks {
    async fn prepare_to_poll(&mut self) -> Result<(), CommitError> {
        if let (Some(interval), Some(began)) = (self.interval, self.began)
            && began.elapsed() >= interval
        {
            return into_result(self.commit().await);
        }
        Ok(())
    }

    async fn prepare_to_send(&mut self, _batch: &[SourceRecord]) -> Result<(), CommitError> {
        if self.sink.in_transaction() {
            return Ok(());
        }
        self.sink.begin().map_err(|e| self.failed(e))?;
        self.began = Some(Instant::now());
        Ok(())
    }

    fn record_dispatched(&mut self, record: &SourceRecord) -> Option<SubmittedRecord> {
        self.writer.stage(
            record.source_partition.clone(),
            record.source_offset.clone(),
        );
        self.in_transaction += 1;
        None
    }

    fn record_dropped(&mut self, record: &SourceRecord) -> Option<SubmittedRecord> {
        // Its offset commits with the transaction; `commit_record` was called for it already.
        self.writer.stage(
            record.source_partition.clone(),
            record.source_offset.clone(),
        );
        None
    }

    async fn batch_dispatched(&mut self) -> Result<(), CommitError> {
        if let Some(context) = &self.context {
            return match context.after_batch().map_err(CommitError::Boundary)? {
                Some(boundary) => self.end_transaction(boundary).await,
                None => Ok(()),
            };
        }
        if self.interval.is_some() {
            return Ok(());
        }
        into_result(self.commit().await)
    }

    fn boundary_at(&mut self, record: &SourceRecord) -> Result<Option<Boundary>, BoundaryError> {
        match &self.context {
            Some(context) => context.at_record(record),
            None => Ok(None),
        }
    }

    async fn end_transaction(&mut self, boundary: Boundary) -> Result<(), CommitError> {
        match boundary {
            Boundary::Commit => into_result(self.commit().await),
            Boundary::Abort => self.abort().await,
        }
    }

    fn periodic_committer(&self) -> Option<Arc<dyn Commit>> {
        None
    }

    async fn paused(&mut self) -> Result<(), CommitError> {
        into_result(self.commit().await)
    }

    fn defers_commit_record(&self) -> bool {
        true
    }

    fn take_settled_records(&mut self) -> Vec<Settled> {
        std::mem::take(&mut self.settled)
    }

    async fn final_commit(&mut self, failed: bool) -> CommitOutcome {
        if self.fence.is_superseded() || !self.sink.in_transaction() {
            return CommitOutcome::NothingToCommit;
        }
        if failed {
            let records = std::mem::take(&mut self.in_transaction);
            self.began = None;
            if let Err(e) = self.sink.abort().await {
                tracing::warn!(task = %self.task, "aborting the open transaction of the failed task failed: {e}; the broker aborts it after transaction.timeout.ms");
            } else {
                tracing::info!(task = %self.task, "aborted the open transaction of {records} records (the task failed)");
            }
            return CommitOutcome::NothingToCommit;
        }
        self.commit().await
    }
}

// The hooks' own error type, made once per transaction: its size costs nothing here.
#[allow(clippy::result_large_err)]
fn into_result(outcome: CommitOutcome) -> Result<(), CommitError> {
    match outcome {
        CommitOutcome::Failed(e) => Err(e),
        CommitOutcome::Committed { .. } | CommitOutcome::NothingToCommit => Ok(()),
    }
}

/// The offset writer's "store" of an exactly-once task: a flush writes the offsets into the open
/// transaction and commits it. Reads are not served (the task reads through the worker's store).
struct IntoTransaction {
    sink: Arc<dyn TransactionalSink>,
}

#[async_trait]
impl OffsetBackingStore for IntoTransaction {
    fn describe(&self) -> String {
        self.sink.describe()
    }

    async fn get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        Ok(vec![None; keys.len()])
    }

    async fn set(&self, batch: &[OffsetWrite]) -> Result<(), StoreError> {
        self.sink.commit(batch).await.map_err(|e| {
            StoreError::backend(self.sink.describe(), e.to_string(), false).with_source(e)
        })
    }

    async fn set_batch(&self, batch: WriteBatch) -> Result<BatchWritten, StoreError> {
        self.set(&batch.to_writes()).await?;
        Ok(BatchWritten::Returned(batch))
    }

    async fn connector_offsets(&self, _connector: &str) -> Result<Vec<StoredOffset>, StoreError> {
        Ok(Vec::new())
    }

    async fn entries(&self) -> Result<Vec<StoredOffset>, StoreError> {
        Ok(Vec::new())
    }
}
