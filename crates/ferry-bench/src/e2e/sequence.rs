//! Case 1: SequenceSource → a discarding sink, offset machinery on vs off.
//!
//! **Offsets on** ([`FERRY`]): a real [`ferry_runtime::Worker`] with a FileStore in the run's directory,
//! offsets flushed every [`FLUSH_INTERVAL`], timed from opening the store until the committed offsets
//! of every partition reach its last seq (so every record was polled, sent, acknowledged and its
//! offset made durable).
//!
//! **Offsets off** ([`PLAIN`]): the same SequenceSource task (made by the same connector, same task
//! configuration), started through a context whose reader finds no offsets, driven on the same runtime
//! by a bare loop: `poll` → hand the records to the same sink as the worker does (one
//! `try_send_batch` for what it takes at once, `send` for the rest) → await the deliveries, until
//! every record was delivered. It includes generating the records, the sink's hand-over and its
//! (ready) delivery future. It excludes everything the worker adds for offsets: `AckTracker`
//! submit/ack, the delivery watcher and its futures, the `commit_record` events, the periodic
//! committer (offset encoding, one FileStore append + fdatasync per flush), the partition watch, task
//! metrics and status, and the final commit (none of which it needs: it never resumes).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_api::{
    Config, OffsetReadError, OffsetStorageReader, SourceConnector, SourceOffset, SourcePartition,
    SourceTaskContext, async_trait,
};
use ferry_connectors::SequenceSourceConnector;
use ferry_runtime::sink::RecordSink;

use super::discard::DiscardSink;
use super::worker::{FLUSH_INTERVAL, RunDir, connector_config, offset_field, open_store};
use super::{Runner, rounds};
use crate::BenchResult;
use crate::measure::human_count;
use crate::results::{Case, Work};

pub const FERRY: &str = "Ferry worker (offsets on)";
pub const PLAIN: &str = "same loop, offsets off";

/// Source partitions (sequences) the records are spread over, round-robin.
const PARTITIONS: u64 = 4;
const CONNECTOR: &str = "bench-seq";
const TOPIC: &str = "bench-seq";

/// The case with about `records` records (rounded up to a multiple of [`PARTITIONS`]).
pub fn case(
    runtime: &tokio::runtime::Runtime,
    work_dir: &Path,
    records: u64,
    runs: usize,
) -> BenchResult<Case> {
    let per_partition = records.div_ceil(PARTITIONS).max(1);
    let total = per_partition * PARTITIONS;
    let config = connector_config(
        CONNECTOR,
        &[
            ("connector.class", "SequenceSource".to_owned()),
            ("partitions", PARTITIONS.to_string()),
            ("records.per.partition", per_partition.to_string()),
            ("topic", TOPIC.to_owned()),
        ],
    );
    let work = Work {
        records: total,
        bytes: 0,
    };
    eprintln!(
        "  SequenceSource → discard: {} records over {PARTITIONS} partitions",
        human_count(total)
    );
    let mut contenders = [
        Runner {
            name: FERRY,
            work,
            run: Box::new(|round| ferry_run(runtime, work_dir, &config, per_partition, round)),
        },
        Runner {
            name: PLAIN,
            work,
            run: Box::new(|_| plain_run(runtime, &config, total)),
        },
    ];
    let samples = rounds("sequence", runs, &mut contenders)?;
    Ok(Case::pair(
        format!(
            "SequenceSource {} records ({PARTITIONS} partitions, batch.size 1000) → discarding sink; \
             offsets on: FileStore, offset.flush.interval.ms={}",
            human_count(total),
            FLUSH_INTERVAL.as_millis()
        ),
        FERRY,
        PLAIN,
        &samples,
        work,
    ))
}

fn ferry_run(
    runtime: &tokio::runtime::Runtime,
    work_dir: &Path,
    config: &Config,
    per_partition: u64,
    round: usize,
) -> BenchResult<Duration> {
    let dir = RunDir::create(work_dir, &format!("e2e-sequence-{round}"))?;
    run_worker(runtime, dir, config.clone(), 1, PARTITIONS, per_partition)
}

/// One timed run of a worker (offsets on) with `tasks` tasks over `partitions` partitions of
/// `per_partition` records, into the discarding sink, until every last offset is committed; checks
/// that every record was sent once, then removes `dir`.
fn run_worker(
    runtime: &tokio::runtime::Runtime,
    dir: RunDir,
    config: Config,
    tasks: usize,
    partitions: u64,
    per_partition: u64,
) -> BenchResult<Duration> {
    let sink = Arc::new(DiscardSink::default());
    let last_seq = i64::try_from(per_partition - 1).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let store = open_store(&dir.join("offsets.ferry"))?;
    let took = runtime.block_on(async {
        let worker = super::worker::run_all_until_committed(
            store,
            sink.clone(),
            &SequenceSourceConnector::new(),
            vec![(CONNECTOR.to_owned(), config, tasks)],
            |_, committed| {
                committed.len() as u64 == partitions
                    && committed
                        .iter()
                        .all(|(_, value)| offset_field(value, "seq") == Some(last_seq))
            },
        )
        .await?;
        let took = started.elapsed();
        worker.shutdown().await;
        Ok::<_, crate::BenchError>(took)
    })?;
    let expected = per_partition * partitions;
    if sink.accepted() != expected {
        return Err(crate::BenchError::from(format!(
            "Ferry sent {} records to the sink, expected {expected} (none twice, none missing)",
            sink.accepted()
        )));
    }
    dir.remove()?;
    Ok(took)
}

/// Throughput of the worker (offsets on) with `partitions` partitions spread over `tasks` tasks:
/// one run of about `records` records. Returns (records, seconds).
pub fn scaling_point(
    runtime: &tokio::runtime::Runtime,
    work_dir: &Path,
    records: u64,
    partitions: u64,
    tasks: usize,
) -> BenchResult<(u64, f64)> {
    let per_partition = records.div_ceil(partitions).max(1);
    let mut config = connector_config(
        CONNECTOR,
        &[
            ("connector.class", "SequenceSource".to_owned()),
            ("partitions", partitions.to_string()),
            ("records.per.partition", per_partition.to_string()),
            ("topic", TOPIC.to_owned()),
        ],
    );
    config.insert("tasks.max".to_owned(), tasks.to_string());
    let dir = RunDir::create(work_dir, &format!("scale-sequence-{partitions}-{tasks}"))?;
    let took = run_worker(runtime, dir, config, tasks, partitions, per_partition)?;
    let expected = per_partition * partitions;
    Ok((expected, took.as_secs_f64()))
}

/// Finds no committed offset for any partition: every run starts at seq 0 without a store.
struct NoOffsets;

#[async_trait]
impl OffsetStorageReader for NoOffsets {
    async fn offsets(
        &self,
        partitions: &[SourcePartition],
    ) -> Result<Vec<(SourcePartition, Option<SourceOffset>)>, OffsetReadError> {
        Ok(partitions.iter().map(|p| (p.clone(), None)).collect())
    }
}

struct PlainContext {
    config: Config,
    reader: Arc<NoOffsets>,
}

impl SourceTaskContext for PlainContext {
    fn configs(&self) -> &Config {
        &self.config
    }
    fn offset_storage_reader(&self) -> Arc<dyn OffsetStorageReader> {
        self.reader.clone()
    }
}

fn plain_run(
    runtime: &tokio::runtime::Runtime,
    config: &Config,
    total: u64,
) -> BenchResult<Duration> {
    let connector = SequenceSourceConnector::new();
    let task_config = connector
        .task_configs(config, 1)
        .map_err(|e| crate::BenchError::from(format!("SequenceSource task configs: {e}")))?
        .pop()
        .ok_or("SequenceSource made no task configuration")?;
    let sink = Arc::new(DiscardSink::default());
    let task_sink: Arc<dyn RecordSink> = sink.clone();
    let started = Instant::now();
    // Spawned like the worker's task loop, so it runs on a runtime worker thread under the same
    // scheduler.
    let outcome = runtime.block_on(runtime.spawn(async move {
        let mut task = connector.create_task();
        let context = Arc::new(PlainContext {
            config: task_config,
            reader: Arc::new(NoOffsets),
        });
        task.start(context)
            .await
            .map_err(|e| crate::BenchError::from(format!("SequenceSource start(): {e}")))?;
        let mut delivered = 0u64;
        let mut pending = Vec::new();
        // Stops at the last record: polling once more would only sleep (the source is exhausted).
        while delivered < total {
            let records = task
                .poll()
                .await
                .map_err(|e| crate::BenchError::from(format!("SequenceSource poll(): {e}")))?;
            // As the worker sends: the records the sink takes at once in one call, the rest one
            // by one.
            let mut next = 0;
            while next < records.len() {
                let sent = task_sink.try_send_batch(&records[next..]);
                if let Some(batch) = sent.delivery {
                    let accepted = sent.accepted.min(records.len() - next);
                    let outcome = batch.await;
                    if let Some((at, e)) = outcome.failed.first() {
                        return Err(crate::BenchError::from(format!("delivery of {at}: {e}")));
                    }
                    delivered += accepted as u64;
                    next += accepted;
                    continue;
                }
                pending.push(
                    task_sink
                        .send(&records[next])
                        .await
                        .map_err(|e| crate::BenchError::from(format!("send: {e}")))?,
                );
                next += 1;
            }
            for delivery in pending.drain(..) {
                delivery
                    .await
                    .map_err(|e| crate::BenchError::from(format!("delivery: {e}")))?;
                delivered += 1;
            }
        }
        task.stop()
            .await
            .map_err(|e| crate::BenchError::from(format!("SequenceSource stop(): {e}")))?;
        Ok::<_, crate::BenchError>(delivered)
    }));
    let took = started.elapsed();
    let delivered =
        outcome.map_err(|e| crate::BenchError::from(format!("the plain loop panicked: {e}")))??;
    if delivered != total || sink.accepted() != total {
        return Err(crate::BenchError::from(format!(
            "the plain loop delivered {delivered} records ({} sent), expected {total}",
            sink.accepted()
        )));
    }
    Ok(took)
}
