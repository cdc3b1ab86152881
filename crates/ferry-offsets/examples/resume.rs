//! Guarantee shown: a task resumes exactly after the last record whose offset was committed, because
//! offsets are committed only for acknowledged records and are durable in the file store before the
//! reader can see them.
//!
//! `cargo run -p ferry-offsets --example resume -- [OFFSETS_FILE] [RECORDS]` runs a tiny sequence
//! source for RECORDS records per partition (default 5) through the offset machinery into stdout and
//! commits. Run it again: each partition continues where the previous run stopped.

use std::sync::Arc;
use std::time::Duration;

use ferry_api::{
    Config, ConnectError, OffsetStorageReader, OffsetStorageReaderExt, SourceRecord, SourceTask,
    SourceTaskContext, async_trait,
};
use ferry_offsets::{AckTracker, FileStore, OffsetBackingStore, OffsetWriter, StoreOffsetReader};
use serde::{Deserialize, Serialize};

const CONNECTOR: &str = "example-sequence";

/// One partition type, used both to look offsets up and to emit records: keys cannot drift apart.
#[derive(Serialize, Deserialize, Clone, Debug)]
struct SequencePartition {
    partition: i32,
}

#[derive(Serialize, Deserialize, Debug)]
struct SequenceOffset {
    seq: i64,
}

struct SequenceTask {
    next: Vec<i64>,
    per_run: i64,
    emitted: i64,
}

#[async_trait]
impl SourceTask for SequenceTask {
    async fn start(&mut self, context: Arc<dyn SourceTaskContext>) -> Result<(), ConnectError> {
        let partitions: Vec<SequencePartition> = (0..2)
            .map(|partition| SequencePartition { partition })
            .collect();
        let reader = context.offset_storage_reader();
        for (p, offset) in reader.offsets_of::<_, SequenceOffset>(&partitions).await? {
            let next = offset.map_or(0, |o| o.seq + 1);
            println!(
                "partition {}: {}",
                p.partition,
                if next == 0 {
                    "no committed offset, starting at 0".to_owned()
                } else {
                    format!("resuming at seq {next}")
                }
            );
            self.next.push(next);
        }
        Ok(())
    }

    async fn poll(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        if self.emitted >= self.per_run {
            return Ok(Vec::new());
        }
        self.emitted += 1;
        let mut records = Vec::new();
        for (p, next) in self.next.iter_mut().enumerate() {
            let partition = SequencePartition {
                partition: p as i32,
            };
            let value = serde_json::json!({ "partition": p, "seq": *next });
            records.push(SourceRecord::new(
                &partition,
                &SequenceOffset { seq: *next },
                "sequence",
                value,
            )?);
            *next += 1;
        }
        Ok(records)
    }

    async fn stop(&mut self) -> Result<(), ConnectError> {
        Ok(())
    }
}

struct Context {
    config: Config,
    reader: Arc<StoreOffsetReader>,
}

impl SourceTaskContext for Context {
    fn configs(&self) -> &Config {
        &self.config
    }
    fn offset_storage_reader(&self) -> Arc<dyn OffsetStorageReader> {
        self.reader.clone()
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .unwrap_or_else(|| "ferry-example-offsets.ferry".to_owned());
    let per_run: i64 = args.next().map(|n| n.parse()).transpose()?.unwrap_or(5);

    let store: Arc<dyn OffsetBackingStore> = Arc::new(FileStore::open(&path)?);
    let reader = Arc::new(StoreOffsetReader::new(CONNECTOR, store.clone()));
    let writer = OffsetWriter::new(CONNECTOR, store.clone());
    let acks = AckTracker::new();

    let mut task = SequenceTask {
        next: Vec::new(),
        per_run,
        emitted: 0,
    };
    task.start(Arc::new(Context {
        config: Config::new(),
        reader: reader.clone(),
    }))
    .await?;
    loop {
        let records = task.poll().await?;
        if records.is_empty() {
            break;
        }
        for record in records {
            let submitted = acks.submit(
                record.source_partition.clone(),
                record.source_offset.clone(),
            );
            // The "sink" is stdout: printing is delivery, so the record is acknowledged right after.
            println!("{}", record.value.unwrap_or_default());
            submitted.ack();
        }
    }
    for (partition, offset) in acks.committable().offsets {
        writer.stage(partition, Some(offset));
    }
    if let Some(flush) = writer.begin_flush(Duration::from_secs(5)).await? {
        flush.flush().await?;
    }
    task.commit().await?;
    println!("committed to {path}; run again to resume");
    Ok(())
}
