//! Fencing the task numbers a connector no longer has.
//!
//! Every task instance is fenced by its next instance, which opens the same `transactional.id`
//! (`<group.id>-<connector>-<task>`) before it reads its offsets. A task number that disappears —
//! `tasks.max` shrunk, the connector stopped or deleted — has no next instance: a zombie still running
//! it (a frozen or cut-off worker) could go on committing offsets of source partitions that other tasks
//! now own. So whoever removes task numbers opens each removed number's id once afterwards —
//! `initTransactions` bumps its epoch, fencing the old holder and aborting its open transaction: Kafka
//! Connect's zombie fencing of a task-count change, here for every task whatever its delivery
//! semantics.
//!
//! Why afterwards, and not before the change is written: a live owner stops a removed task
//! gracefully, with a final commit, once it reads the change — a connector stopped for a move (KIP-875)
//! must keep everything its tasks delivered. Fenced first, those tasks would stop without it and their
//! last records come again. So the fence runs once the graceful stop had its time
//! (`task.shutdown.graceful.timeout.ms` plus [`MARGIN`]); only a zombie that wakes inside that window
//! can still commit, and only until the fence.
//!
//! A number the connector has again by then (resumed, `tasks.max` grown back, recreated) is not
//! fenced: its new instance fenced its zombies when it opened the id, and fencing it would stop that
//! instance. The configuration is read right before each fence; a new instance starting within the
//! few milliseconds between that read and the fence would be stopped (a known, narrow window).

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use ferry_offsets::OffsetBackingStore;
use ferry_plugin::ConfigBackingStore;

use super::DistributedHerder;

/// Time for a live owner to read the change, on top of the graceful stop's.
const MARGIN: Duration = Duration::from_secs(2);
/// Attempts of a fence that fails (the broker unreachable), a doubling pause apart.
const ATTEMPTS: u32 = 8;

impl DistributedHerder {
    /// Fences task numbers `range` of `connector` once their graceful stop had its time, in the
    /// background (nothing when tasks are not fenced).
    pub(super) fn fence_removed_tasks(&self, connector: &str, range: Range<usize>) {
        let Some(prefix) = self.worker.task_fencing() else {
            return;
        };
        if range.is_empty() {
            return;
        }
        let count_record = self.records_task_counts();
        let delay = self.worker.graceful_timeout() + MARGIN;
        let (offsets, configs, prefix, connector) = (
            self.offsets.clone(),
            self.config_store.clone(),
            prefix.to_owned(),
            connector.to_owned(),
        );
        tracing::info!(connector = %connector, "fencing removed tasks {connector}-{}..{connector}-{} in {delay:?}", range.start, range.end - 1);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            fence(&offsets, &configs, &prefix, &connector, range).await;
            if count_record {
                match configs.snapshot().await {
                    Ok(snapshot) => {
                        if let Some(tasks) = snapshot
                            .connectors
                            .get(&connector)
                            .and_then(|entry| entry.tasks.as_ref().map(Vec::len))
                        {
                            write_task_count(configs.as_ref(), &connector, tasks).await;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(connector = %connector, "the task count record of {connector} is not written: reading the configuration failed: {e}")
                    }
                }
            }
        });
    }

    /// Whether task count records are written: with exactly-once delivery, as Kafka Connect does.
    fn records_task_counts(&self) -> bool {
        self.worker.exactly_once_source()
            == ferry_runtime::config::exactly_once::ExactlyOnceSource::Enabled
    }

    /// Writes `connector`'s task count record (Kafka Connect's `tasks-fencing-<c>`, KIP-618) when
    /// its task configurations changed and every earlier task number is fenced: the numbers it still
    /// has are fenced by their own next instances as they start (before reading offsets), so the
    /// record follows the configurations at once unless numbers were removed (then
    /// [`fence_removed_tasks`](Self::fence_removed_tasks) writes it after fencing them).
    pub(super) async fn record_task_count(
        &self,
        connector: &str,
        tasks: usize,
        writer: Option<&dyn ferry_plugin::TaskConfigWriter>,
    ) {
        if !self.records_task_counts() {
            return;
        }
        match writer {
            // Through the owner's fenced writer: a previous owner cannot write one any more.
            Some(writer) => match writer.put_task_count(tasks).await {
                Ok(()) => {
                    tracing::debug!(connector = %connector, "task count record of {connector}: {tasks}")
                }
                Err(e) => {
                    tracing::warn!(connector = %connector, "the task count record of {connector} ({tasks}) was not written: {e}")
                }
            },
            None => write_task_count(self.config_store.as_ref(), connector, tasks).await,
        }
    }
}

/// Writes the task count record; a failure is logged (Kafka Connect workers reading the topic then
/// run a fencing round of their own, which is harmless).
async fn write_task_count(configs: &dyn ConfigBackingStore, connector: &str, tasks: usize) {
    match configs.put_task_count(connector, tasks).await {
        Ok(()) => {
            tracing::debug!(connector = %connector, "task count record of {connector}: {tasks}")
        }
        Err(e) => {
            tracing::warn!(connector = %connector, "the task count record of {connector} ({tasks}) was not written: {e}")
        }
    }
}

/// Opens the id of each task number in `range` that the connector does not have (again), once,
/// retrying a failed one.
async fn fence(
    offsets: &Arc<dyn OffsetBackingStore>,
    configs: &Arc<dyn ConfigBackingStore>,
    prefix: &str,
    connector: &str,
    range: Range<usize>,
) {
    for task in range {
        let id = format!("{prefix}-{connector}-{task}");
        let mut pause = Duration::from_millis(500);
        for attempt in 1..=ATTEMPTS {
            let tasks = match configs.snapshot().await {
                Ok(snapshot) => snapshot
                    .connectors
                    .get(connector)
                    .and_then(|entry| entry.tasks.as_ref().map(Vec::len))
                    .unwrap_or(0),
                Err(e) if attempt < ATTEMPTS => {
                    tracing::warn!(connector = %connector, "fencing removed task {connector}-{task}: reading the configuration failed: {e}; retrying in {pause:?}");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(30));
                    continue;
                }
                Err(e) => {
                    tracing::error!(connector = %connector, "fencing removed task {connector}-{task}: reading the configuration failed {ATTEMPTS} times, last: {e}; a zombie of it is not fenced until the id is used again");
                    break;
                }
            };
            if task < tasks {
                tracing::info!(connector = %connector, "task {connector}-{task} exists again: its new instance fenced its zombies");
                break;
            }
            match offsets.open_task_writer(&id).await {
                // Opening fenced every earlier holder; the writer itself is never used.
                Ok(_writer) => {
                    tracing::info!(connector = %connector, "removed task {connector}-{task} fenced (transactional.id {id})");
                    break;
                }
                Err(e) if attempt < ATTEMPTS => {
                    tracing::warn!(connector = %connector, "fencing removed task {connector}-{task} (transactional.id {id}) failed: {e}; retrying in {pause:?}");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(30));
                }
                Err(e) => {
                    tracing::error!(connector = %connector, "fencing removed task {connector}-{task} (transactional.id {id}) failed {ATTEMPTS} times, last: {e}; a zombie of it is not fenced until the id is used again");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use ferry_offsets::{OffsetWrite, StoreError, StoredOffset};

    use super::*;
    use ferry_runtime::stores::MemoryConfigStore;

    /// A store whose task writers never open (the brokers stay unreachable).
    #[derive(Default)]
    struct Unreachable {
        opens: AtomicUsize,
    }

    #[async_trait]
    impl OffsetBackingStore for Unreachable {
        fn describe(&self) -> String {
            "unreachable".to_owned()
        }
        async fn get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
            Ok(vec![None; keys.len()])
        }
        async fn set(&self, _batch: &[OffsetWrite]) -> Result<(), StoreError> {
            Ok(())
        }
        async fn connector_offsets(&self, _c: &str) -> Result<Vec<StoredOffset>, StoreError> {
            Ok(Vec::new())
        }
        async fn entries(&self) -> Result<Vec<StoredOffset>, StoreError> {
            Ok(Vec::new())
        }
        async fn open_task_writer(
            &self,
            _fencing_id: &str,
        ) -> Result<Option<Arc<dyn OffsetBackingStore>>, StoreError> {
            self.opens.fetch_add(1, Ordering::SeqCst);
            Err(StoreError::backend(
                "unreachable",
                "brokers unreachable",
                true,
            ))
        }
    }

    /// Past [`ATTEMPTS`] failed fences of one removed task number, the fence gives that number up
    /// (with an ERROR) and goes on with the next; it never retries without end.
    #[tokio::test(start_paused = true)]
    async fn a_fence_that_keeps_failing_is_given_up_after_its_attempts() {
        let store = Arc::new(Unreachable::default());
        let offsets: Arc<dyn OffsetBackingStore> = store.clone();
        let configs: Arc<dyn ConfigBackingStore> = Arc::new(MemoryConfigStore::new());
        let started = tokio::time::Instant::now();
        fence(&offsets, &configs, "grp", "c", 0..2).await;
        assert_eq!(
            store.opens.load(Ordering::SeqCst),
            2 * ATTEMPTS as usize,
            "each removed number is tried {ATTEMPTS} times, then given up"
        );
        // The pauses double from 500 ms, capped at 30 s, between attempts (none after the last).
        let per_number: Duration = (0..ATTEMPTS - 1)
            .map(|n| (Duration::from_millis(500) * 2u32.pow(n)).min(Duration::from_secs(30)))
            .sum();
        assert_eq!(started.elapsed(), per_number * 2);
    }
}
