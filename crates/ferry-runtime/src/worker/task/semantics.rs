//! Delivery semantics as a seam: what happens around each poll, send and commit of a task, apart from
//! the loop that polls and sends ([`super`]).
//!
//! Kafka Connect's `AbstractWorkerSourceTask` runs one loop and calls hooks that its two subclasses
//! implement: `WorkerSourceTask` (at-least-once) and `ExactlyOnceWorkerSourceTask`. [`TaskHooks`] are
//! those hooks; [`super::at_least_once::AtLeastOnce`] and [`super::exactly_once::ExactlyOnceHooks`]
//! implement them — the latter begins a transaction before the first send, writes the offsets with
//! the records and commits the transaction at the batch boundary, with no periodic committer — in
//! the one loop.
//!
//! Per record, the loop makes one plain (not async) call, [`TaskHooks::record_dispatched`]: no
//! allocation beyond the hook's own work. The async hooks return `impl Future` rather than boxed
//! futures, and the loop is generic over the hooks, so at-least-once's no-op batch hooks cost nothing
//! either; semantics chosen at run time go through [`DynTaskHooks`], which boxes. Kafka Connect's per-record `prepareToSendRecord` is per
//! batch here ([`TaskHooks::prepare_to_send`], called once before the first record of a non-empty
//! batch is sent): exactly-once begins its transaction there, which is equivalent because a batch's
//! records are sent one after the other with nothing in between that could commit.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use ferry_api::SourceRecord;
use ferry_offsets::{AckTracker, OffsetWriter, SubmittedBatch, SubmittedRecord};

use crate::metrics::TaskMetrics;
use crate::worker::commit::{CommitError, CommitOutcome};
use crate::worker::health::StoreHealth;
use crate::worker::task::TaskSettings;
pub(crate) use crate::worker::task::transaction_context::{Boundary, BoundaryError};

/// How a connector's records and offsets are delivered: makes each task's [`TaskHooks`].
#[allow(dead_code)] // The worker picks the semantics once it can be configured (issue 12, step 6).
pub(crate) trait DeliverySemantics: Send + Sync {
    /// `"at-least-once"`.
    fn name(&self) -> &'static str;
    /// The hooks of one task run.
    fn hooks(&self, task: TaskCommitParts) -> Box<dyn DynTaskHooks>;
}

/// What a task's hooks work with: the task's offset bookkeeping, owned by its [`super::TaskRunner`].
pub(crate) struct TaskCommitParts {
    /// The task's name (`connector-0`), for logs.
    pub(crate) task: String,
    /// Records sent and not yet acknowledged, per partition.
    pub(crate) acks: AckTracker,
    /// The connector's offset writer (one per task).
    pub(crate) writer: Arc<OffsetWriter>,
    pub(crate) metrics: Arc<TaskMetrics>,
    pub(crate) health: Arc<StoreHealth>,
    pub(crate) settings: TaskSettings,
}

/// Kafka Connect's `AbstractWorkerSourceTask` hooks, called by the task loop only (`&mut`, one task at
/// a time). Each says which Kafka Connect hook it is, when it runs, and what exactly-once would do.
///
/// `recordSent` has no hook: it runs in the delivery watcher, a separate tokio task, which acknowledges
/// the [`SubmittedRecord`] returned by [`record_dispatched`](TaskHooks::record_dispatched); no hook is
/// ever called from there. `commitTaskRecord` is the loop's `commit_record` call, unchanged.
pub(crate) trait TaskHooks: Send {
    /// `prepareToInitializeTask`: before the connector's `start()`. Exactly-once: fence the task's
    /// earlier producers, `init_transactions`, read the offsets topic to its end.
    ///
    /// # Errors
    /// The task cannot run; it fails with this error.
    fn prepare_to_initialize(&mut self) -> impl Future<Output = Result<(), CommitError>> + Send {
        std::future::ready(Ok(()))
    }

    /// `prepareToPollTask`: before each `poll()` of a running task. Exactly-once with an interval
    /// boundary: commit the transaction if the interval passed.
    ///
    /// # Errors
    /// The task fails with this error.
    fn prepare_to_poll(&mut self) -> impl Future<Output = Result<(), CommitError>> + Send {
        std::future::ready(Ok(()))
    }

    /// `prepareToSendRecord`, once per non-empty batch, before its first record is sent.
    /// Exactly-once: begin a transaction if none is open.
    ///
    /// # Errors
    /// The task fails with this error; nothing of the batch is sent.
    fn prepare_to_send(
        &mut self,
        _batch: &[SourceRecord],
    ) -> impl Future<Output = Result<(), CommitError>> + Send {
        std::future::ready(Ok(()))
    }

    /// `recordDispatched`: the sink accepted `record`. Returns the handle the delivery watcher
    /// acknowledges once the sink confirms delivery, or `None` when nothing is tracked per record
    /// (exactly-once: the transaction's commit covers it). At-least-once: `AckTracker::submit`.
    fn record_dispatched(&mut self, record: &SourceRecord) -> Option<SubmittedRecord>;

    /// [`record_dispatched`](Self::record_dispatched) for records the sink accepted together
    /// ([`crate::sink::RecordSink::try_send_batch`]), under one call; their offsets may be moved
    /// out (the loop drops the records after this). `None`: these semantics track records one by
    /// one only, and the loop hands every record to the sink alone.
    fn records_dispatched(&mut self, _records: &mut [SourceRecord]) -> Option<SubmittedBatch> {
        None
    }

    /// Whether [`records_dispatched`](Self::records_dispatched) tracks batches.
    fn tracks_batches(&self) -> bool {
        false
    }

    /// `recordDropped`: the sink refused `record` and `errors.tolerance=all` drops it; it counts as
    /// delivered, so the returned handle is acknowledged at once.
    fn record_dropped(&mut self, record: &SourceRecord) -> Option<SubmittedRecord>;

    /// `batchDispatched`: every record of a poll's batch was sent (or the rest of it given up on
    /// because the task stops). Exactly-once with a poll boundary: write the batch's offsets on the
    /// same producer and commit the transaction.
    ///
    /// # Errors
    /// The task fails with this error.
    fn batch_dispatched(&mut self) -> impl Future<Output = Result<(), CommitError>> + Send {
        std::future::ready(Ok(()))
    }

    /// What commits every `offset.flush.interval.ms` on its own tokio task, if anything (at-least-once:
    /// the [`crate::worker::commit::Committer`]; exactly-once: `None`, the transactions commit).
    fn periodic_committer(&self) -> Option<Arc<dyn Commit>>;

    /// The task was paused (it polls no more until resumed). Exactly-once: commit the open
    /// transaction, so that a paused task holds none open.
    ///
    /// # Errors
    /// The task fails with this error.
    fn paused(&mut self) -> impl Future<Output = Result<(), CommitError>> + Send {
        std::future::ready(Ok(()))
    }

    /// Whether `commit_record` must wait until the record's offsets committed
    /// ([`take_settled_records`](Self::take_settled_records)) rather than follow its delivery
    /// (exactly-once: a delivered record's transaction may still abort).
    fn defers_commit_record(&self) -> bool {
        false
    }

    /// The transactions that ended since the last call, in send order, each with how many sent
    /// records it held: the loop calls `commit_record` for a committed one's records once their
    /// deliveries are reported, and drops an aborted one's. Always empty unless
    /// [`defers_commit_record`](Self::defers_commit_record).
    fn take_settled_records(&mut self) -> Vec<Settled> {
        Vec::new()
    }

    /// Whether the open transaction ends right after `record` (as the task returned it, before
    /// transformations) is sent or dropped: `transaction.boundary=connector`'s record-level requests
    /// (Kafka Connect's `shouldCommitOn`/`shouldAbortOn`). Called per record: at-least-once answers
    /// `None` at no cost.
    ///
    /// # Errors
    /// The task's requests contradict each other; it fails with this reason.
    fn boundary_at(&mut self, _record: &SourceRecord) -> Result<Option<Boundary>, BoundaryError> {
        Ok(None)
    }

    /// Ends the open transaction as [`boundary_at`](Self::boundary_at) asked, after that record.
    ///
    /// # Errors
    /// The commit or abort failed; the task fails (or, fenced, stops quietly).
    fn end_transaction(
        &mut self,
        _boundary: Boundary,
    ) -> impl Future<Output = Result<(), CommitError>> + Send {
        std::future::ready(Ok(()))
    }

    /// `finalOffsetCommit(failed)`: the last commit of a stopping task, after its deliveries resolved
    /// (or their wait timed out). `failed`: the task failed. At-least-once commits what was
    /// acknowledged either way; exactly-once commits an open transaction or aborts it if `failed`.
    fn final_commit(&mut self, failed: bool) -> impl Future<Output = CommitOutcome> + Send;
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// [`TaskHooks`] as a trait object, for semantics chosen at run time ([`DeliverySemantics::hooks`]):
/// every `TaskHooks` is one, and a `Box<dyn DynTaskHooks>` is a `TaskHooks` again. Its async hooks
/// box their futures (per batch, never per record).
#[allow(dead_code)] // Used once the worker can be given semantics (issue 12, step 6).
pub(crate) trait DynTaskHooks: Send {
    fn dyn_prepare_to_initialize(&mut self) -> BoxFuture<'_, Result<(), CommitError>>;
    fn dyn_prepare_to_poll(&mut self) -> BoxFuture<'_, Result<(), CommitError>>;
    fn dyn_prepare_to_send<'a>(
        &'a mut self,
        batch: &'a [SourceRecord],
    ) -> BoxFuture<'a, Result<(), CommitError>>;
    fn dyn_record_dispatched(&mut self, record: &SourceRecord) -> Option<SubmittedRecord>;
    fn dyn_record_dropped(&mut self, record: &SourceRecord) -> Option<SubmittedRecord>;
    fn dyn_records_dispatched(&mut self, records: &mut [SourceRecord]) -> Option<SubmittedBatch>;
    fn dyn_tracks_batches(&self) -> bool;
    fn dyn_batch_dispatched(&mut self) -> BoxFuture<'_, Result<(), CommitError>>;
    fn dyn_periodic_committer(&self) -> Option<Arc<dyn Commit>>;
    fn dyn_paused(&mut self) -> BoxFuture<'_, Result<(), CommitError>>;
    fn dyn_defers_commit_record(&self) -> bool;
    fn dyn_take_settled_records(&mut self) -> Vec<Settled>;
    fn dyn_boundary_at(&mut self, record: &SourceRecord)
    -> Result<Option<Boundary>, BoundaryError>;
    fn dyn_end_transaction(&mut self, boundary: Boundary)
    -> BoxFuture<'_, Result<(), CommitError>>;
    fn dyn_final_commit(&mut self, failed: bool) -> BoxFuture<'_, CommitOutcome>;
}

impl<H: TaskHooks> DynTaskHooks for H {
    fn dyn_prepare_to_initialize(&mut self) -> BoxFuture<'_, Result<(), CommitError>> {
        Box::pin(TaskHooks::prepare_to_initialize(self))
    }
    fn dyn_prepare_to_poll(&mut self) -> BoxFuture<'_, Result<(), CommitError>> {
        Box::pin(TaskHooks::prepare_to_poll(self))
    }
    fn dyn_prepare_to_send<'a>(
        &'a mut self,
        batch: &'a [SourceRecord],
    ) -> BoxFuture<'a, Result<(), CommitError>> {
        Box::pin(TaskHooks::prepare_to_send(self, batch))
    }
    fn dyn_record_dispatched(&mut self, record: &SourceRecord) -> Option<SubmittedRecord> {
        TaskHooks::record_dispatched(self, record)
    }
    fn dyn_record_dropped(&mut self, record: &SourceRecord) -> Option<SubmittedRecord> {
        TaskHooks::record_dropped(self, record)
    }
    fn dyn_records_dispatched(&mut self, records: &mut [SourceRecord]) -> Option<SubmittedBatch> {
        TaskHooks::records_dispatched(self, records)
    }
    fn dyn_tracks_batches(&self) -> bool {
        TaskHooks::tracks_batches(self)
    }
    fn dyn_batch_dispatched(&mut self) -> BoxFuture<'_, Result<(), CommitError>> {
        Box::pin(TaskHooks::batch_dispatched(self))
    }
    fn dyn_periodic_committer(&self) -> Option<Arc<dyn Commit>> {
        TaskHooks::periodic_committer(self)
    }
    fn dyn_paused(&mut self) -> BoxFuture<'_, Result<(), CommitError>> {
        Box::pin(TaskHooks::paused(self))
    }
    fn dyn_defers_commit_record(&self) -> bool {
        TaskHooks::defers_commit_record(self)
    }
    fn dyn_take_settled_records(&mut self) -> Vec<Settled> {
        TaskHooks::take_settled_records(self)
    }
    fn dyn_boundary_at(
        &mut self,
        record: &SourceRecord,
    ) -> Result<Option<Boundary>, BoundaryError> {
        TaskHooks::boundary_at(self, record)
    }
    fn dyn_end_transaction(
        &mut self,
        boundary: Boundary,
    ) -> BoxFuture<'_, Result<(), CommitError>> {
        Box::pin(TaskHooks::end_transaction(self, boundary))
    }
    fn dyn_final_commit(&mut self, failed: bool) -> BoxFuture<'_, CommitOutcome> {
        Box::pin(TaskHooks::final_commit(self, failed))
    }
}

impl TaskHooks for Box<dyn DynTaskHooks> {
    fn prepare_to_initialize(&mut self) -> impl Future<Output = Result<(), CommitError>> + Send {
        DynTaskHooks::dyn_prepare_to_initialize(&mut **self)
    }
    fn prepare_to_poll(&mut self) -> impl Future<Output = Result<(), CommitError>> + Send {
        DynTaskHooks::dyn_prepare_to_poll(&mut **self)
    }
    // An async fn (one future borrowing both arguments): the boxed future lives as long as the
    // shorter of the two borrows, which an `impl Future` return could not name.
    async fn prepare_to_send(&mut self, batch: &[SourceRecord]) -> Result<(), CommitError> {
        DynTaskHooks::dyn_prepare_to_send(&mut **self, batch).await
    }
    fn record_dispatched(&mut self, record: &SourceRecord) -> Option<SubmittedRecord> {
        DynTaskHooks::dyn_record_dispatched(&mut **self, record)
    }
    fn record_dropped(&mut self, record: &SourceRecord) -> Option<SubmittedRecord> {
        DynTaskHooks::dyn_record_dropped(&mut **self, record)
    }
    fn records_dispatched(&mut self, records: &mut [SourceRecord]) -> Option<SubmittedBatch> {
        DynTaskHooks::dyn_records_dispatched(&mut **self, records)
    }
    fn tracks_batches(&self) -> bool {
        DynTaskHooks::dyn_tracks_batches(&**self)
    }
    fn batch_dispatched(&mut self) -> impl Future<Output = Result<(), CommitError>> + Send {
        DynTaskHooks::dyn_batch_dispatched(&mut **self)
    }
    fn periodic_committer(&self) -> Option<Arc<dyn Commit>> {
        DynTaskHooks::dyn_periodic_committer(&**self)
    }
    fn paused(&mut self) -> impl Future<Output = Result<(), CommitError>> + Send {
        DynTaskHooks::dyn_paused(&mut **self)
    }
    fn defers_commit_record(&self) -> bool {
        DynTaskHooks::dyn_defers_commit_record(&**self)
    }
    fn take_settled_records(&mut self) -> Vec<Settled> {
        DynTaskHooks::dyn_take_settled_records(&mut **self)
    }
    fn boundary_at(&mut self, record: &SourceRecord) -> Result<Option<Boundary>, BoundaryError> {
        DynTaskHooks::dyn_boundary_at(&mut **self, record)
    }
    fn end_transaction(
        &mut self,
        boundary: Boundary,
    ) -> impl Future<Output = Result<(), CommitError>> + Send {
        DynTaskHooks::dyn_end_transaction(&mut **self, boundary)
    }
    fn final_commit(&mut self, failed: bool) -> impl Future<Output = CommitOutcome> + Send {
        DynTaskHooks::dyn_final_commit(&mut **self, failed)
    }
}

/// A transaction that ended: how many sent records it held, and whether it committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settled {
    pub(crate) records: usize,
    pub(crate) committed: bool,
}

/// One offset commit, run periodically by the task's committer.
#[async_trait]
pub(crate) trait Commit: Send + Sync {
    /// Commits what can be committed now.
    async fn commit(&self) -> CommitOutcome;

    /// How many submitted records the commits have covered so far (see
    /// [`crate::worker::commit::Committer::covered`]), for `offset.flush.strict.bound`; `None` when
    /// the committer does not track it.
    fn covered(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }
}
