//! At-least-once delivery, Kafka Connect's `WorkerSourceTask`: a record is tracked once the sink
//! accepted it, acknowledged when the sink confirms delivery, and the offsets of acknowledged records
//! are committed every `offset.flush.interval.ms` and at stop (`AckTracker` → [`Committer`] →
//! `OffsetWriter` → store). A crash between delivery and commit delivers those records again.

use std::sync::Arc;

use async_trait::async_trait;
use ferry_api::SourceRecord;
use ferry_offsets::{AckTracker, SubmittedBatch, SubmittedRecord};

use crate::worker::commit::{CommitOutcome, Committer};
use crate::worker::task::semantics::{
    Commit, DeliverySemantics, DynTaskHooks, TaskCommitParts, TaskHooks,
};

/// At-least-once delivery: the default, and today the only one.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AtLeastOnce;

impl AtLeastOnce {
    /// The hooks of one task, as a concrete type: the task loop calls them without dynamic dispatch.
    pub(crate) fn task_hooks(parts: TaskCommitParts) -> AtLeastOnceHooks {
        let committer = Committer {
            task: parts.task,
            acks: parts.acks.clone(),
            writer: parts.writer,
            flush_timeout: parts.settings.flush_timeout,
            metrics: parts.metrics,
            health: parts.health,
            continuous: parts.settings.commit_interval().is_zero(),
            covered: tokio::sync::watch::Sender::new(0),
        };
        AtLeastOnceHooks {
            acks: parts.acks,
            committer: Arc::new(committer),
        }
    }
}

impl DeliverySemantics for AtLeastOnce {
    fn name(&self) -> &'static str {
        "at-least-once"
    }

    fn hooks(&self, task: TaskCommitParts) -> Box<dyn DynTaskHooks> {
        Box::new(Self::task_hooks(task))
    }
}

/// One task's at-least-once hooks.
pub(crate) struct AtLeastOnceHooks {
    acks: AckTracker,
    committer: Arc<Committer>,
}

impl TaskHooks for AtLeastOnceHooks {
    fn record_dispatched(&mut self, record: &SourceRecord) -> Option<SubmittedRecord> {
        // Submitted only after `send` returned: a record the sink never accepted is never tracked,
        // so its offset can never be committed.
        Some(self.acks.submit_record(record))
    }

    fn record_dropped(&mut self, record: &SourceRecord) -> Option<SubmittedRecord> {
        self.record_dispatched(record)
    }

    fn records_dispatched(&mut self, records: &mut [SourceRecord]) -> Option<SubmittedBatch> {
        // The loop drops the records once the sink has them: their offsets move, not copied.
        Some(self.acks.submit_batch(
            records,
            |record| record.source_partition.as_ref(),
            |record| record.source_offset.take(),
        ))
    }

    fn tracks_batches(&self) -> bool {
        true
    }

    fn periodic_committer(&self) -> Option<Arc<dyn Commit>> {
        Some(self.committer.clone())
    }

    async fn final_commit(&mut self, _failed: bool) -> CommitOutcome {
        // A failed task's acknowledged records were delivered: their offsets are committed too
        // (Kafka Connect's WorkerSourceTask commits in finalOffsetCommit whether or not it failed).
        self.committer.commit().await
    }
}

#[async_trait]
impl Commit for Committer {
    async fn commit(&self) -> CommitOutcome {
        Committer::commit(self).await
    }

    fn covered(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.covered.subscribe())
    }
}
