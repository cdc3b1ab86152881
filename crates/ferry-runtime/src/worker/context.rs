//! What a task sees at start, and the runtime's watch over partition keys.
//!
//! The reader handed to a task is wrapped so the runtime can (1) log which partitions resumed from
//! which offsets and which started fresh, and (2) remember what was looked up, so that a task emitting a
//! partition it never looked up, while it did look up a near-identical one, gets a WARN at once — not
//! after the next restart silently re-reads everything.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ferry_api::{
    Config, OffsetReadError, OffsetStorageReader, SourceOffset, SourcePartition, SourceTaskContext,
};
use ferry_offsets::{StoreOffsetReader, canonical_partition, loose_partition};

/// Looked-up partitions above this count are summarized at INFO and listed at DEBUG.
const MAX_RESUME_LINES: usize = 20;

type LooseForm = Vec<(String, String)>;

/// The partitions a task looked up, by canonical key and by loose form.
#[derive(Debug, Default)]
pub(crate) struct LookedUp {
    canonical: HashSet<Vec<u8>>,
    loose: HashMap<LooseForm, SourcePartition>,
}

/// Checks each newly seen emitted partition against what the task looked up.
#[derive(Debug)]
pub(crate) struct PartitionWatch {
    task: String,
    looked_up: Arc<Mutex<LookedUp>>,
    /// Looked up for every sent record: foldhash, not SipHash.
    seen: HashSet<Vec<u8>, foldhash::fast::RandomState>,
}

impl PartitionWatch {
    pub(crate) fn new(task: String, looked_up: Arc<Mutex<LookedUp>>) -> Self {
        Self {
            task,
            looked_up,
            seen: HashSet::default(),
        }
    }

    /// Called for every emitted record with its partition's canonical key; cheap after the first time.
    pub(crate) fn observe(&mut self, canonical: &[u8], partition: Option<&SourcePartition>) {
        if self.seen.contains(canonical) {
            return;
        }
        self.seen.insert(canonical.to_vec());
        let looked_up = self.looked_up.lock().unwrap_or_else(|p| p.into_inner());
        if looked_up.canonical.contains(canonical) {
            return;
        }
        let Some(loose) = loose_partition(partition) else {
            return;
        };
        if let (Some(similar), Some(emitted)) = (looked_up.loose.get(&loose), partition) {
            tracing::warn!(
                task = %self.task,
                emitted = %emitted,
                looked_up = %similar,
                "the task emits a partition it never looked up, while it looked up a near-identical one \
                 (key-name case or value type differs: 1, 1.0 and \"1\" are different partitions). Offsets \
                 committed for the emitted partition will not be found by the lookup on restart, and the \
                 task will re-read from its initial position. Build both from one typed partition struct."
            );
        }
    }
}

/// Wraps the store reader: logs resumption and records lookups.
pub(crate) struct TaskReader {
    task: String,
    inner: Arc<StoreOffsetReader>,
    looked_up: Arc<Mutex<LookedUp>>,
}

impl TaskReader {
    pub(crate) fn new(
        task: String,
        inner: Arc<StoreOffsetReader>,
        looked_up: Arc<Mutex<LookedUp>>,
    ) -> Self {
        Self {
            task,
            inner,
            looked_up,
        }
    }
}

#[async_trait]
impl OffsetStorageReader for TaskReader {
    async fn offsets(
        &self,
        partitions: &[SourcePartition],
    ) -> Result<Vec<(SourcePartition, Option<SourceOffset>)>, OffsetReadError> {
        let found = self.inner.offsets(partitions).await?;
        // Whether each partition is looked up for the first time: a task that reads its committed
        // offsets again while it runs (a CDC source after every commit) is not logged each time.
        let first: Vec<bool> = {
            let mut looked_up = self.looked_up.lock().unwrap_or_else(|p| p.into_inner());
            partitions
                .iter()
                .map(|partition| {
                    if let Some(loose) = loose_partition(Some(partition)) {
                        looked_up.loose.insert(loose, partition.clone());
                    }
                    looked_up
                        .canonical
                        .insert(canonical_partition(Some(partition)))
                })
                .collect()
        };
        if !first.iter().any(|f| *f) {
            for (partition, offset) in &found {
                tracing::debug!(task = %self.task, "partition {partition} read again: {offset:?}");
            }
            return Ok(found);
        }
        let fresh = found.iter().filter(|(_, o)| o.is_none()).count();
        let verbose = found.len() <= MAX_RESUME_LINES;
        for (partition, offset) in &found {
            match (offset, verbose) {
                (Some(o), true) => {
                    tracing::info!(task = %self.task, "partition {partition} resumes from committed offset {o}")
                }
                (None, true) => {
                    tracing::info!(task = %self.task, "partition {partition} has no committed offset: starting from the initial position")
                }
                (Some(o), false) => {
                    tracing::debug!(task = %self.task, "partition {partition} resumes from committed offset {o}")
                }
                (None, false) => {
                    tracing::debug!(task = %self.task, "partition {partition} has no committed offset")
                }
            }
        }
        if !verbose {
            tracing::info!(
                task = %self.task,
                "{} partitions looked up: {} resume from committed offsets, {fresh} start from the initial position (DEBUG lists each)",
                found.len(),
                found.len() - fresh
            );
        }
        Ok(found)
    }
}

/// The [`SourceTaskContext`] a task gets.
pub(crate) struct TaskContext {
    pub(crate) config: Config,
    pub(crate) reader: Arc<TaskReader>,
    /// `transaction.boundary=connector` with exactly-once delivery only.
    pub(crate) transaction:
        Option<Arc<crate::worker::task::transaction_context::WorkerTransactionContext>>,
}

impl SourceTaskContext for TaskContext {
    fn configs(&self) -> &Config {
        &self.config
    }
    fn offset_storage_reader(&self) -> Arc<dyn OffsetStorageReader> {
        self.reader.clone()
    }
    fn transaction_context(&self) -> Option<Arc<dyn ferry_api::TransactionContext>> {
        self.transaction
            .clone()
            .map(|context| context as Arc<dyn ferry_api::TransactionContext>)
    }
}
