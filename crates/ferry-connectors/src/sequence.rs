//! SequenceSource: a data generator with exactly checkable output, for crash tests and benchmarks.
//!
//! Each source partition `p` (`{"partition": p}`) emits the records `{"partition": p, "seq": n}` for
//! `n = 0, 1, 2, …` (value schema: a struct of `partition` int32 and `seq` int64) with the offset
//! `{"seq": n}`. After a restart a partition resumes at its committed
//! `seq + 1`, so a consumer can check for loss (a gap) and duplicates (a repeat) per partition.
//!
//! `throughput` paces each task to that many records per second, as Kafka Connect's
//! VerifiableSource does (negative or absent: unbounded; 0: no records at all).

use std::sync::Arc;

use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConfigType, ConnectError, ConnectMap, Field,
    OffsetStorageReaderExt, Schema, SourceConnector, SourceOffset, SourcePartition, SourceRecord,
    SourceTask, SourceTaskContext, async_trait,
};
use serde::{Deserialize, Serialize};

use crate::file::IDLE_SLEEP;
use crate::pace::Pacer;
use ferry_api::config::{
    Issues, int_in_range, invalid_config, offsets_read_error, required_string,
};

const PARTITIONS: &str = "partitions";
const RECORDS_PER_PARTITION: &str = "records.per.partition";
const TOPIC: &str = "topic";
const BATCH_SIZE: &str = "batch.size";
/// Records per second per task, as VerifiableSource's `throughput`: negative means unbounded.
const THROUGHPUT: &str = "throughput";
/// The name of the task-config key holding a task's share of the partitions, as a JSON array.
pub const TASK_PARTITIONS: &str = "task.partitions";
/// The most partitions one connector may generate.
const MAX_PARTITIONS: i64 = 1_000_000;

/// The source partition of one sequence: `{"partition": p}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequencePartition {
    /// The partition number, from 0.
    pub partition: i32,
}

/// The source offset of one sequence: `{"seq": n}`, the sequence number of the last record emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceOffset {
    /// The sequence number, from 0; a partition resumes at `seq + 1`.
    pub seq: i64,
}

/// The field of [`SequenceOffset`], set in each record's copy of the offset template.
const SEQ: &str = "seq";

/// The schema of every record value: a struct `{partition: int32, seq: int64}` (both required).
fn value_schema() -> Schema {
    Schema::unnamed_struct([
        Field::new("partition", Schema::int32()),
        Field::new("seq", Schema::int64()),
    ])
}

/// A parsed configuration (connector or task).
#[derive(Debug, Clone)]
struct SequenceConfig {
    partitions: i32,
    records_per_partition: Option<i64>,
    topic: String,
    batch_size: usize,
    throughput: Throughput,
}

/// The pace of a task: `throughput` parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Throughput {
    /// Absent or negative: as fast as polled.
    Unbounded,
    /// 0: no records at all (VerifiableSource blocks until stopped).
    Nothing,
    /// This many records per second per task.
    PerSecond(u64),
}

impl Throughput {
    fn from_config(value: i64) -> Self {
        match u64::try_from(value) {
            Err(_) => Self::Unbounded,
            Ok(0) => Self::Nothing,
            Ok(n) => Self::PerSecond(n),
        }
    }
}

impl SequenceConfig {
    fn parse(config: &Config) -> Result<Self, Vec<ConfigIssue>> {
        let mut issues = Issues::default();
        let partitions = int_in_range(config, PARTITIONS, Some(1), 1, MAX_PARTITIONS, &mut issues);
        let records = int_in_range(
            config,
            RECORDS_PER_PARTITION,
            None,
            0,
            i64::MAX,
            &mut issues,
        );
        let topic = required_string(config, TOPIC, &mut issues);
        let batch_size = int_in_range(
            config,
            BATCH_SIZE,
            Some(1000),
            1,
            i64::from(i32::MAX),
            &mut issues,
        );
        let throughput = int_in_range(
            config,
            THROUGHPUT,
            Some(-1),
            i64::MIN,
            i64::MAX,
            &mut issues,
        );
        let (Some(partitions), Some(topic), Some(batch_size), Some(throughput)) =
            (partitions, topic, batch_size, throughput)
        else {
            return Err(issues.into_vec());
        };
        issues.finish(|| Self {
            partitions: i32::try_from(partitions).unwrap_or(i32::MAX),
            records_per_partition: records,
            topic,
            batch_size: usize::try_from(batch_size).unwrap_or(usize::MAX),
            throughput: Throughput::from_config(throughput),
        })
    }
}

/// The SequenceSource connector (class name `SequenceSource`).
///
/// Configs: `partitions` (default 1), `records.per.partition` (absent: unbounded), `topic` (required),
/// `batch.size` (default 1000 records per poll), `throughput` (records per second per task; absent or
/// negative: unbounded, 0: none). The partitions are spread round-robin over
/// `min(tasks.max, partitions)` tasks.
#[derive(Debug, Default, Clone, Copy)]
pub struct SequenceSourceConnector;

impl SequenceSourceConnector {
    /// The connector.
    pub fn new() -> Self {
        Self
    }

    /// The schema of every record value: an unnamed struct `{partition: int32, seq: int64}`, both
    /// fields required.
    pub fn value_schema() -> Schema {
        value_schema()
    }
}

impl SourceConnector for SequenceSourceConnector {
    /// Supported: a task's next number follows from its committed offset alone.
    fn exactly_once_support(&self, _config: &Config) -> ferry_api::ExactlyOnceSupport {
        ferry_api::ExactlyOnceSupport::Supported
    }

    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![
            ConfigKey::optional(
                PARTITIONS,
                Some("1"),
                "The number of source partitions (sequences), at least 1.",
            )
            .of_type(ConfigType::Int),
            ConfigKey::optional(
                RECORDS_PER_PARTITION,
                None,
                "How many records each partition emits (seq 0 to n-1); absent: unbounded.",
            )
            .of_type(ConfigType::Long),
            ConfigKey::required(TOPIC, "The topic to write the records to."),
            ConfigKey::optional(
                BATCH_SIZE,
                Some("1000"),
                "The most records one poll returns.",
            )
            .of_type(ConfigType::Int),
            ConfigKey::optional(
                THROUGHPUT,
                Some("-1"),
                "Records per second per task (Kafka Connect VerifiableSource's key); negative: \
                 unbounded, 0: no records.",
            )
            .of_type(ConfigType::Long),
        ]
    }

    fn validate(&self, config: &Config) -> Vec<ConfigIssue> {
        SequenceConfig::parse(config).err().unwrap_or_default()
    }

    fn task_configs(&self, config: &Config, max_tasks: usize) -> Result<Vec<Config>, ConnectError> {
        let parsed = SequenceConfig::parse(config).map_err(|issues| {
            invalid_config("SequenceSource", "connector configuration", &issues)
        })?;
        let count = usize::try_from(parsed.partitions).unwrap_or(1);
        let tasks = max_tasks.clamp(1, count);
        let mut shares: Vec<Vec<i32>> = vec![Vec::new(); tasks];
        for p in 0..parsed.partitions {
            shares[usize::try_from(p).unwrap_or(0) % tasks].push(p);
        }
        Ok(shares
            .into_iter()
            .map(|share| {
                let mut task = config.clone();
                task.insert(
                    TASK_PARTITIONS.to_owned(),
                    serde_json::Value::from(share).to_string(),
                );
                task
            })
            .collect())
    }

    fn create_task(&self) -> Box<dyn SourceTask> {
        Box::new(SequenceSourceTask::new())
    }

    /// Every partition must hold an integer `partition` ≥ 0; every offset that is not a reset must hold
    /// an integer `seq` ≥ -1 (-1: the partition starts again at seq 0). Returns `Ok(true)` when valid.
    fn alter_offsets(
        &self,
        _config: &Config,
        offsets: &[(SourcePartition, Option<SourceOffset>)],
    ) -> Result<bool, ConnectError> {
        for (partition, offset) in offsets {
            if !partition
                .get("partition")
                .and_then(|v| v.as_i64())
                .is_some_and(|p| (0..=i64::from(i32::MAX)).contains(&p))
            {
                return Err(ConnectError::fatal(format!(
                    "SequenceSource: partition {partition} must contain the key \"partition\" with a non-negative \
                     integer value, like {{\"partition\":0}}"
                )));
            }
            let seq = offset
                .as_ref()
                .map(|o| o.get("seq").and_then(|v| v.as_i64()));
            if let (Some(offset), Some(None) | Some(Some(..-1))) = (offset, seq) {
                return Err(ConnectError::fatal(format!(
                    "SequenceSource: offset {offset} of partition {partition} must be null (a reset) or contain \
                     the key \"seq\" with an integer value ≥ -1 (the last seq emitted), like {{\"seq\":41}}"
                )));
            }
        }
        Ok(true)
    }
}

/// Generates the sequences of a share of a SequenceSource connector's partitions.
///
/// `poll` emits round-robin over the partitions, one record each per round, up to `batch.size`
/// records. It builds its batch synchronously and only awaits before taking any record (a short sleep
/// once every partition has reached `records.per.partition`, or until the next record is due under
/// `throughput`), so dropping a pending `poll` loses nothing.
pub struct SequenceSourceTask {
    running: Option<Running>,
}

struct Sequence {
    partition: i32,
    map: SourcePartition,
    next: i64,
}

struct Running {
    topic: String,
    batch_size: usize,
    limit: Option<i64>,
    sequences: Vec<Sequence>,
    /// [`value_schema`], cloned into every record.
    schema: Arc<Schema>,
    /// A [`SequenceOffset`] as a map, built once: each record's offset is a copy with its own
    /// `seq` (no serde per record).
    offset: SourceOffset,
    /// The sequence the next record comes from.
    cursor: usize,
    /// An error met after some records of the same poll were taken; returned by the next poll.
    deferred: Option<ConnectError>,
    throughput: Throughput,
    /// The pace under `throughput`, from the task's first poll.
    pacer: Option<Pacer>,
}

impl SequenceSourceTask {
    /// A task; it emits nothing until started.
    pub fn new() -> Self {
        Self { running: None }
    }
}

impl Default for SequenceSourceTask {
    fn default() -> Self {
        Self::new()
    }
}

/// The task's partitions: `task.partitions`, or all of them when the config has no share.
fn task_partitions(config: &Config, parsed: &SequenceConfig) -> Result<Vec<i32>, ConnectError> {
    let Some(json) = config.get(TASK_PARTITIONS) else {
        return Ok((0..parsed.partitions).collect());
    };
    let share: Vec<i32> = serde_json::from_str(json).map_err(|e| {
        ConnectError::fatal(format!(
            "SequenceSource task: {TASK_PARTITIONS}={json:?} is not a JSON array of partition numbers: {e}"
        ))
    })?;
    if let Some(bad) = share.iter().find(|p| !(0..parsed.partitions).contains(*p)) {
        return Err(ConnectError::fatal(format!(
            "SequenceSource task: partition {bad} in {TASK_PARTITIONS} is outside 0..{} (partitions={})",
            parsed.partitions, parsed.partitions
        )));
    }
    Ok(share)
}

impl Running {
    /// Builds one batch synchronously. Never returns an error together with lost records: an error met
    /// after some records were taken is returned by the next poll.
    fn poll_now(&mut self, max: usize) -> Result<Vec<SourceRecord>, ConnectError> {
        if let Some(e) = self.deferred.take() {
            return Err(e);
        }
        let count = self.sequences.len();
        let mut out = Vec::with_capacity(max.min(64 * 1024));
        let mut exhausted_in_a_row = 0;
        while out.len() < max && exhausted_in_a_row < count {
            let seq = &mut self.sequences[self.cursor];
            if self.limit.is_some_and(|limit| seq.next >= limit) {
                self.cursor = (self.cursor + 1) % count;
                exhausted_in_a_row += 1;
                continue;
            }
            exhausted_in_a_row = 0;
            match Self::record(seq, &self.topic, &self.schema, &self.offset) {
                Ok(record) => out.push(record),
                Err(e) if out.is_empty() => return Err(e),
                Err(e) => {
                    self.deferred = Some(e);
                    break;
                }
            }
            self.cursor = (self.cursor + 1) % count;
        }
        Ok(out)
    }

    /// The next record of `seq`, advancing it only on success.
    fn record(
        seq: &mut Sequence,
        topic: &str,
        schema: &Arc<Schema>,
        template: &SourceOffset,
    ) -> Result<SourceRecord, ConnectError> {
        let n = seq.next;
        let mut offset = template.clone();
        offset.insert(SEQ, n)?;
        let next = n.checked_add(1).ok_or_else(|| {
            ConnectError::fatal(format!(
                "SequenceSource: partition {} reached the largest seq",
                seq.partition
            ))
        })?;
        let value = serde_json::json!({ "partition": seq.partition, "seq": n });
        seq.next = next;
        Ok(
            SourceRecord::from_maps(Some(seq.map.clone()), Some(offset), topic, Some(value))
                .with_value_schema(schema.clone()),
        )
    }
}

#[async_trait]
impl SourceTask for SequenceSourceTask {
    /// Its offsets are all it needs from a delivered record: no `commit_record`.
    fn wants_delivered_records(&self) -> bool {
        false
    }

    async fn start(&mut self, context: Arc<dyn SourceTaskContext>) -> Result<(), ConnectError> {
        let config = context.configs();
        let parsed = SequenceConfig::parse(config)
            .map_err(|issues| invalid_config("SequenceSource task", "configuration", &issues))?;
        let partitions: Vec<SequencePartition> = task_partitions(config, &parsed)?
            .into_iter()
            .map(|partition| SequencePartition { partition })
            .collect();
        let reader = context.offset_storage_reader();
        let offsets = reader
            .offsets_of::<SequencePartition, SequenceOffset>(&partitions)
            .await
            .map_err(|e| {
                offsets_read_error(
                    format!(
                        "SequenceSource: reading the committed offsets of {} partition(s)",
                        partitions.len()
                    ),
                    e,
                )
            })?;
        let mut sequences = Vec::with_capacity(offsets.len());
        for (partition, offset) in offsets {
            let next = match offset {
                None => 0,
                Some(SequenceOffset { seq }) if (-1..i64::MAX).contains(&seq) => seq + 1,
                Some(SequenceOffset { seq }) => {
                    return Err(ConnectError::fatal(format!(
                        "SequenceSource: the committed offset of partition {} has seq {seq}, which cannot be \
                         resumed; reset it with `ferry offsets reset`",
                        partition.partition
                    )));
                }
            };
            let map = ConnectMap::from_serde(&partition)?;
            sequences.push(Sequence {
                partition: partition.partition,
                map,
                next,
            });
        }
        self.running = Some(Running {
            topic: parsed.topic,
            batch_size: parsed.batch_size,
            limit: parsed.records_per_partition,
            sequences,
            schema: Arc::new(value_schema()),
            offset: ConnectMap::from_serde(&SequenceOffset { seq: 0 })?,
            cursor: 0,
            deferred: None,
            throughput: parsed.throughput,
            pacer: None,
        });
        Ok(())
    }

    async fn poll(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        let Some(running) = self.running.as_mut() else {
            return Err(ConnectError::fatal(
                "SequenceSource: poll() called before start() or after stop()",
            ));
        };
        let max = match running.throughput {
            Throughput::Unbounded => running.batch_size,
            Throughput::Nothing => 0,
            Throughput::PerSecond(rate) => {
                let pacer = running.pacer.get_or_insert_with(|| Pacer::new(rate));
                let mut due = pacer.available(tokio::time::Instant::now(), running.batch_size);
                if due == 0 {
                    // Sleep until the next record is due rather than spinning; nothing is taken
                    // before this await, so a dropped poll loses nothing.
                    tokio::time::sleep_until(pacer.next_due()).await;
                    due = pacer.available(tokio::time::Instant::now(), running.batch_size);
                }
                due
            }
        };
        let records = if max == 0 {
            Vec::new()
        } else {
            running.poll_now(max)?
        };
        if let Some(pacer) = running.pacer.as_mut() {
            pacer.take(records.len());
        }
        if records.is_empty() {
            tokio::time::sleep(IDLE_SLEEP).await;
        }
        Ok(records)
    }

    async fn stop(&mut self) -> Result<(), ConnectError> {
        self.running = None;
        Ok(())
    }
}
