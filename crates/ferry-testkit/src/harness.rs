//! [`TaskHarness`]: run a connector's task the way the runtime does — started with a context whose
//! offset reader reads a memory store, its records' offsets committed through the real
//! [`OffsetWriter`] — without the runtime, a sink or a process.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_api::{
    Config, ConnectError, OffsetReadError, OffsetStorageReader, SourceConnector, SourceOffset,
    SourcePartition, SourceRecord, SourceTask, SourceTaskContext, async_trait,
};
use ferry_offsets::{FlushError, MemoryStore, OffsetBackingStore, OffsetWriter, StoreOffsetReader};

/// How long a flush may wait for an earlier one; the harness never has two at once.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// What went wrong while driving a task through the harness.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// The task (or connector) returned an error from `start`, `poll` or `stop`.
    #[error("the task failed: {0}")]
    Task(#[from] ConnectError),
    /// Writing offsets through the `OffsetWriter` failed.
    #[error("committing offsets failed: {0}")]
    Flush(#[from] FlushError),
    /// Reading committed offsets back failed.
    #[error("reading committed offsets failed: {0}")]
    Read(#[from] OffsetReadError),
    /// Fewer records than asked for arrived in time.
    #[error("only {got} of {wanted} records arrived within {within:?}; their values: {values:?}")]
    TooFewRecords {
        /// Records asked for.
        wanted: usize,
        /// Records that arrived.
        got: usize,
        /// How long the harness polled.
        within: Duration,
        /// The values that did arrive, as JSON text.
        values: Vec<String>,
    },
    /// After a restart the task delivered a record that had already been committed.
    #[error(
        "after the restart the task re-delivered a committed record (partition {partition}, offset \
         {offset}): it did not resume from its committed offset"
    )]
    NotResumed {
        /// The record's source partition, as JSON.
        partition: String,
        /// The record's source offset, as JSON.
        offset: String,
    },
}

/// An [`OffsetStorageReader`] over the harness's store that counts its `offsets()` calls and
/// remembers the partitions each call asked for (`offset()` goes through `offsets()`).
pub struct CountingReader {
    inner: StoreOffsetReader,
    calls: AtomicUsize,
    asked: Mutex<Vec<Vec<SourcePartition>>>,
}

impl CountingReader {
    /// How many times `offsets()` was called.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// The partitions of each call, in order.
    pub fn asked(&self) -> Vec<Vec<SourcePartition>> {
        self.asked.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

#[async_trait]
impl OffsetStorageReader for CountingReader {
    async fn offsets(
        &self,
        partitions: &[SourcePartition],
    ) -> Result<Vec<(SourcePartition, Option<SourceOffset>)>, OffsetReadError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut asked) = self.asked.lock() {
            asked.push(partitions.to_vec());
        }
        self.inner.offsets(partitions).await
    }
}

/// The context a task is started with: its config and a [`CountingReader`].
struct HarnessContext {
    config: Config,
    reader: Arc<CountingReader>,
}

impl SourceTaskContext for HarnessContext {
    fn configs(&self) -> &Config {
        &self.config
    }

    fn offset_storage_reader(&self) -> Arc<dyn OffsetStorageReader> {
        self.reader.clone()
    }
}

/// What [`TaskHarness::assert_resumes`] saw: the records committed before the restart and the first
/// record after it, for assertions of your own (e.g. "the counter went on at n + 1").
#[derive(Debug)]
pub struct Resumed {
    /// The records polled and committed before the restart.
    pub committed: Vec<SourceRecord>,
    /// The first record the restarted task produced.
    pub first_after_restart: SourceRecord,
}

/// One connector's offsets in a memory store, and the means to start, poll, commit and restart its
/// tasks against them. Clones share the store.
#[derive(Clone)]
pub struct TaskHarness {
    connector: String,
    store: MemoryStore,
}

impl TaskHarness {
    /// A harness for the connector named `connector_name` (the name offsets are stored under), with
    /// an empty store.
    pub fn new(connector_name: &str) -> Self {
        Self {
            connector: connector_name.to_owned(),
            store: MemoryStore::new(),
        }
    }

    fn store(&self) -> Arc<dyn OffsetBackingStore> {
        Arc::new(self.store.clone())
    }

    /// A fresh reader of the committed offsets; its counts start at zero.
    pub fn reader(&self) -> Arc<CountingReader> {
        Arc::new(CountingReader {
            inner: StoreOffsetReader::new(self.connector.clone(), self.store()),
            calls: AtomicUsize::new(0),
            asked: Mutex::new(Vec::new()),
        })
    }

    /// Starts `task` with `config` and a fresh reader, which is returned.
    ///
    /// # Errors
    /// The task's `start` failed.
    pub async fn start_task(
        &self,
        task: &mut dyn SourceTask,
        config: Config,
    ) -> Result<Arc<CountingReader>, ConnectError> {
        let reader = self.reader();
        task.start(Arc::new(HarnessContext {
            config,
            reader: reader.clone(),
        }))
        .await?;
        Ok(reader)
    }

    /// Creates a task of `connector` and starts it with `config` (a task config); returns it and its
    /// reader.
    ///
    /// # Errors
    /// The task's `start` failed.
    pub async fn start(
        &self,
        connector: &dyn SourceConnector,
        config: Config,
    ) -> Result<(Box<dyn SourceTask>, Arc<CountingReader>), ConnectError> {
        let mut task = connector.create_task();
        let reader = self.start_task(task.as_mut(), config).await?;
        Ok((task, reader))
    }

    /// Stages and flushes `entries` through the real [`OffsetWriter`], as the runtime's committer
    /// does (`None` deletes the partition's offset).
    ///
    /// # Errors
    /// The flush failed.
    pub async fn write(
        &self,
        entries: Vec<(SourcePartition, Option<SourceOffset>)>,
    ) -> Result<(), HarnessError> {
        let writer = OffsetWriter::new(self.connector.clone(), self.store());
        for (partition, offset) in entries {
            writer.stage(Some(partition), offset);
        }
        flush(&writer).await?;
        Ok(())
    }

    /// Commits the offsets of `records`, as after their acknowledgement: the last one per partition
    /// wins, and a record without an offset commits nothing.
    ///
    /// # Errors
    /// The flush failed.
    pub async fn commit(&self, records: &[SourceRecord]) -> Result<(), HarnessError> {
        let entries = records
            .iter()
            .filter(|r| r.source_offset.is_some())
            .map(|r| {
                (
                    r.source_partition.clone().unwrap_or_default(),
                    r.source_offset.clone(),
                )
            })
            .collect();
        self.write(entries).await
    }

    /// The committed offset of `partition`.
    ///
    /// # Errors
    /// The store could not be read.
    pub async fn offset(
        &self,
        partition: &SourcePartition,
    ) -> Result<Option<SourceOffset>, HarnessError> {
        let reader = StoreOffsetReader::new(self.connector.clone(), self.store());
        Ok(reader.offset(partition).await?)
    }

    /// Stops `old`, creates a new task of `connector` and starts it with `config`: it reads the
    /// offsets committed so far, as after a worker restart.
    ///
    /// # Errors
    /// Stopping the old task or starting the new one failed.
    pub async fn restart(
        &self,
        connector: &dyn SourceConnector,
        mut old: Box<dyn SourceTask>,
        config: Config,
    ) -> Result<Box<dyn SourceTask>, HarnessError> {
        old.stop().await?;
        drop(old);
        let (task, _) = self.start(connector, config).await?;
        Ok(task)
    }

    /// Polls `n` records, commits them, restarts the task and polls again: the first record after
    /// the restart must not be one already committed, i.e. the task resumed from its committed
    /// offset. Returns what it saw, for sharper assertions of the connector's own.
    ///
    /// # Errors
    /// The task failed, too few records arrived (10 s each), or a committed record came again
    /// ([`HarnessError::NotResumed`]).
    pub async fn assert_resumes(
        &self,
        connector: &dyn SourceConnector,
        config: Config,
        n: usize,
    ) -> Result<Resumed, HarnessError> {
        let within = Duration::from_secs(10);
        let (mut task, _) = self.start(connector, config.clone()).await?;
        let committed = poll_n(task.as_mut(), n, within).await?;
        self.commit(&committed).await?;
        let mut task = self.restart(connector, task, config).await?;
        let after = poll_n(task.as_mut(), 1, within).await;
        task.stop().await?;
        let first_after_restart = after?.swap_remove(0);
        if let Some(again) = committed.iter().find(|r| {
            r.source_offset.is_some()
                && r.source_partition == first_after_restart.source_partition
                && r.source_offset == first_after_restart.source_offset
        }) {
            return Err(HarnessError::NotResumed {
                partition: json(&again.source_partition),
                offset: json(&again.source_offset),
            });
        }
        Ok(Resumed {
            committed,
            first_after_restart,
        })
    }
}

/// The one place the harness flushes the writer (kept apart so a change of the writer's flush API
/// touches only this).
async fn flush(writer: &OffsetWriter) -> Result<(), FlushError> {
    if let Some(flush) = writer.begin_flush(FLUSH_TIMEOUT).await? {
        flush.flush().await?;
    }
    Ok(())
}

/// A partition, offset or value as text, `null` when absent.
fn json<T: std::fmt::Display>(value: &Option<T>) -> String {
    value
        .as_ref()
        .map_or_else(|| "null".to_owned(), ToString::to_string)
}

/// Polls until at least `n` records arrived, returning exactly what the polls returned (possibly
/// more than `n`).
///
/// # Errors
/// A poll failed, or fewer than `n` arrived `within` ([`HarnessError::TooFewRecords`]).
pub async fn poll_n(
    task: &mut dyn SourceTask,
    n: usize,
    within: Duration,
) -> Result<Vec<SourceRecord>, HarnessError> {
    let deadline = Instant::now() + within;
    let mut out = Vec::new();
    while out.len() < n {
        if Instant::now() > deadline {
            return Err(HarnessError::TooFewRecords {
                wanted: n,
                got: out.len(),
                within,
                values: out.iter().map(|r: &SourceRecord| json(&r.value)).collect(),
            });
        }
        out.extend(task.poll().await?);
    }
    Ok(out)
}

/// Polls `times` times and returns everything.
///
/// # Errors
/// A poll failed.
pub async fn poll_times(
    task: &mut dyn SourceTask,
    times: usize,
) -> Result<Vec<SourceRecord>, ConnectError> {
    let mut out = Vec::new();
    for _ in 0..times {
        out.extend(task.poll().await?);
    }
    Ok(out)
}

/// Polls for `duration` and returns everything.
///
/// # Errors
/// A poll failed.
pub async fn poll_for(
    task: &mut dyn SourceTask,
    duration: Duration,
) -> Result<Vec<SourceRecord>, ConnectError> {
    let deadline = Instant::now() + duration;
    let mut out = Vec::new();
    while Instant::now() < deadline {
        out.extend(task.poll().await?);
    }
    Ok(out)
}

/// Polls until `n` records arrived or `timeout` passed, returning what arrived.
///
/// # Errors
/// A poll failed.
pub async fn poll_up_to(
    task: &mut dyn SourceTask,
    n: usize,
    timeout: Duration,
) -> Result<Vec<SourceRecord>, ConnectError> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    while out.len() < n && Instant::now() < deadline {
        out.extend(task.poll().await?);
    }
    Ok(out)
}

/// A config from `key=value` pairs.
pub fn config(pairs: &[(&str, &str)]) -> Config {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}
