//! Test support: a real offset reader over a memory store, a task context, and poll helpers.

#![allow(dead_code)] // each test file uses a different part

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ferry_api::{
    Config, ConnectError, OffsetReadError, OffsetStorageReader, SourceConnector, SourceOffset,
    SourcePartition, SourceRecord, SourceTask, SourceTaskContext, async_trait,
};
use ferry_offsets::{MemoryStore, OffsetBackingStore, OffsetWriter, StoreOffsetReader};

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

pub const CONNECTOR: &str = "test-connector";

/// A [`StoreOffsetReader`] that counts its `offsets()` calls (the default `offset()` goes through it).
pub struct CountingReader {
    inner: StoreOffsetReader,
    calls: AtomicUsize,
}

impl CountingReader {
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl OffsetStorageReader for CountingReader {
    async fn offsets(
        &self,
        partitions: &[SourcePartition],
    ) -> Result<Vec<(SourcePartition, Option<SourceOffset>)>, OffsetReadError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.offsets(partitions).await
    }
}

/// The context a task is started with.
pub struct TestContext {
    config: Config,
    reader: Arc<CountingReader>,
}

impl SourceTaskContext for TestContext {
    fn configs(&self) -> &Config {
        &self.config
    }

    fn offset_storage_reader(&self) -> Arc<dyn OffsetStorageReader> {
        self.reader.clone()
    }
}

/// One connector's offsets in a memory store, written through the real [`OffsetWriter`].
#[derive(Clone)]
pub struct Offsets {
    store: MemoryStore,
}

impl Offsets {
    pub fn new() -> Self {
        Self {
            store: MemoryStore::new(),
        }
    }

    fn store(&self) -> Arc<dyn OffsetBackingStore> {
        Arc::new(self.store.clone())
    }

    /// Writes and flushes offsets, as the runtime's committer would.
    pub async fn write(
        &self,
        entries: Vec<(SourcePartition, Option<SourceOffset>)>,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let writer = OffsetWriter::new(CONNECTOR, self.store());
        for (partition, offset) in entries {
            writer.stage(Some(partition), offset);
        }
        if let Some(flush) = writer.begin_flush(Duration::from_secs(5)).await? {
            flush.flush().await?;
        }
        Ok(())
    }

    /// Commits the offsets of `records` (the last one per partition wins), as after their acks.
    pub async fn commit(&self, records: &[SourceRecord]) -> Result<(), Box<dyn std::error::Error>> {
        let entries = records
            .iter()
            .map(|r| {
                (
                    r.source_partition.clone().unwrap_or_default(),
                    r.source_offset.clone(),
                )
            })
            .collect();
        self.write(entries).await
    }

    pub fn reader(&self) -> Arc<CountingReader> {
        Arc::new(CountingReader {
            inner: StoreOffsetReader::new(CONNECTOR, self.store()),
            calls: AtomicUsize::new(0),
        })
    }

    /// A started task of `connector` with `config`, and its reader.
    pub async fn start(
        &self,
        connector: &dyn SourceConnector,
        config: Config,
    ) -> Result<(Box<dyn SourceTask>, Arc<CountingReader>), ConnectError> {
        let reader = self.reader();
        let mut task = connector.create_task();
        task.start(Arc::new(TestContext {
            config,
            reader: reader.clone(),
        }))
        .await?;
        Ok((task, reader))
    }
}

/// A config from `key=value` pairs.
pub fn config(pairs: &[(&str, &str)]) -> Config {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Polls until `n` records arrived (fails after 10 s), returning exactly what the polls returned.
pub async fn poll_n(
    task: &mut dyn SourceTask,
    n: usize,
) -> Result<Vec<SourceRecord>, Box<dyn std::error::Error>> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut out = Vec::new();
    while out.len() < n {
        if Instant::now() > deadline {
            return Err(format!(
                "only {} of {n} records arrived: {:?}",
                out.len(),
                values(&out)
            )
            .into());
        }
        out.extend(task.poll().await?);
    }
    Ok(out)
}

/// Polls `times` times and returns everything.
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

/// The values of records as strings (the JSON string for a file line, the JSON text otherwise).
pub fn values(records: &[SourceRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| match &r.value {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => "<null>".to_owned(),
        })
        .collect()
}

/// The integer field `key` of each record's offset.
pub fn offset_field(records: &[SourceRecord], key: &str) -> Vec<i64> {
    records
        .iter()
        .map(|r| {
            r.source_offset
                .as_ref()
                .and_then(|o| o.get(key))
                .and_then(|v| v.as_i64())
                .unwrap_or(i64::MIN)
        })
        .collect()
}
