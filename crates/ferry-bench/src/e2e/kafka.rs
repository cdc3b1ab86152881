//! Case 3: FileStreamSource → Kafka vs a plain rdkafka producer sending the same lines.
//!
//! **Ferry** ([`FERRY`]): a worker with a FileStore and a [`KafkaSink`] with Ferry's producer defaults
//! (acks=all, idempotence, unbounded delivery timeout, murmur2_random) and StringConverter for key and
//! value (so each record's value is the line's bytes, its key null), FileStreamSource reading the
//! input into a new topic; timed from opening the store and creating the sink until the committed
//! offset reaches the end of the file (every line acknowledged by the broker, offset durable).
//!
//! **Plain** ([`PLAIN`]): a `FutureProducer` with exactly the KafkaSink's client settings
//! ([`KafkaSinkConfig::client_config`]) reading the same file with a `BufReader` and sending each
//! line (without its newline) as the value, null key, into another new topic; timed from creating the
//! producer until every delivery was acknowledged.
//!
//! After each run the topic's end offsets must add up to the input's line count, and its first
//! record must be the first line.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_connectors::FileStreamSourceConnector;
use ferry_kafka::{Converter, KafkaSink, KafkaSinkConfig, RecordConverters};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{DeliveryFuture, FutureProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::{ClientConfig, Message};

use super::connect::cpu_seconds;
use super::lines::{self, Input};
use super::worker::{FLUSH_INTERVAL, RunDir, connector_config, offset_field, open_store};
use super::{Runner, rounds};
use crate::BenchResult;
use crate::kafka::{create_topic, delivered, end_offsets, send};
use crate::measure::{human_bytes, human_count, human_duration};
use crate::results::{Case, ProcessCost, Work};

pub const FERRY: &str = "Ferry worker → KafkaSink";
pub const PLAIN: &str = "plain rdkafka producer";

const CONNECTOR: &str = "bench-kafka";
/// Partitions of each run's topic.
const PARTITIONS: i32 = 1;
/// How long reading back a topic's first record may take.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// The case on the input at `input_path` (written by [`lines::write`]), against the broker at
/// `bootstrap`.
pub fn case(
    runtime: &tokio::runtime::Runtime,
    work_dir: &Path,
    bootstrap: &str,
    input_path: &Path,
    input: Input,
    runs: usize,
) -> BenchResult<Case> {
    let first_line = first_line(input_path)?;
    eprintln!(
        "  FileStreamSource → Kafka: input {} ({} lines)",
        human_bytes(input.bytes as f64),
        human_count(input.lines)
    );
    let work = Work {
        records: input.lines,
        bytes: input.bytes,
    };
    let run = Run {
        runtime,
        work_dir,
        bootstrap,
        input_path,
        input,
        first_line: &first_line,
    };
    // The broker is a fresh JVM: the first input it takes runs while its JIT compiles (a quarter of
    // the two cores in a profile of the first run), which slowed whichever contender ran first.
    // One untimed run of the plain producer warms it for both.
    let warm = run.plain(0)?;
    eprintln!(
        "  kafka: the broker warmed up by one untimed plain-producer run ({})",
        human_duration(warm.as_secs_f64())
    );
    // The CPU each run cost the bench process: the in-process worker's, or the plain producer's (the
    // broker's is its own process).
    let costs = [
        RefCell::new(ProcessCost::default()),
        RefCell::new(ProcessCost::default()),
    ];
    let timed = |round: usize, ferry: bool| -> BenchResult<Duration> {
        let pid = std::process::id();
        let before = cpu_seconds(pid)?;
        let took = if ferry {
            run.ferry(round)?
        } else {
            run.plain(round)?
        };
        let cpu = cpu_seconds(pid)? - before;
        costs[usize::from(!ferry)]
            .borrow_mut()
            .cpu_seconds
            .push(cpu);
        eprintln!("    CPU of the bench process over the run: {cpu:.2} s");
        Ok(took)
    };
    let mut contenders = [
        Runner {
            name: FERRY,
            work,
            run: Box::new(|round| timed(round, true)),
        },
        Runner {
            name: PLAIN,
            work,
            run: Box::new(|round| timed(round, false)),
        },
    ];
    let samples = rounds("kafka", runs, &mut contenders)?;
    drop(contenders);
    let mut case = Case::pair(
        format!(
            "FileStreamSource {} ({} lines of {}–{} B) → Kafka topic of {PARTITIONS} partition (Apache Kafka 4.4 \
             on this machine, stock JVM flags, warmed by one untimed plain-producer run), value = the line \
             (StringConverter), acks=all, idempotent; Ferry: FileStore, offset.flush.interval.ms={}",
            human_bytes(input.bytes as f64),
            human_count(input.lines),
            lines::MIN_LINE,
            lines::MAX_LINE,
            FLUSH_INTERVAL.as_millis()
        ),
        FERRY,
        PLAIN,
        &samples,
        work,
    );
    for (name, cost) in [FERRY, PLAIN].into_iter().zip(costs) {
        if let Some(contender) = case.contenders.iter_mut().find(|c| c.name == name) {
            contender.process = Some(cost.into_inner());
        }
    }
    Ok(case)
}

/// What every run of the case shares.
struct Run<'a> {
    runtime: &'a tokio::runtime::Runtime,
    work_dir: &'a Path,
    bootstrap: &'a str,
    input_path: &'a Path,
    input: Input,
    first_line: &'a [u8],
}

impl Run<'_> {
    fn ferry(&self, round: usize) -> BenchResult<Duration> {
        let topic = format!("ferry-bench-e2e-ferry-{round}");
        let dir = RunDir::create(self.work_dir, &format!("e2e-kafka-{round}"))?;
        let config = connector_config(
            CONNECTOR,
            &[
                ("connector.class", "FileStreamSource".to_owned()),
                ("file", self.input_path.to_string_lossy().into_owned()),
                ("topic", topic.clone()),
            ],
        );
        let end = i64::try_from(self.input.bytes).map_err(|e| e.to_string())?;
        let took = self.runtime.block_on(async {
            create_topic(self.bootstrap, &topic, PARTITIONS, &[]).await?;
            let started = Instant::now();
            let store = open_store(&dir.join("offsets.ferry"))?;
            let sink_config =
                KafkaSinkConfig::new(self.bootstrap).with_converters(RecordConverters {
                    key: Converter::string(),
                    value: Converter::string(),
                });
            let sink = KafkaSink::new(&sink_config)
                .map_err(|e| crate::BenchError::from(format!("creating the Kafka sink: {e}")))?;
            let worker = super::worker::run_until_committed(
                store,
                Arc::new(sink),
                &FileStreamSourceConnector::new(),
                CONNECTOR,
                config,
                |committed| {
                    committed.len() == 1 && offset_field(&committed[0].1, "position") == Some(end)
                },
            )
            .await?;
            let took = started.elapsed();
            worker.shutdown().await;
            // Dropping the last sink handle closes its producer, which blocks.
            tokio::task::spawn_blocking(move || drop(worker))
                .await
                .map_err(|e| crate::BenchError::from(format!("dropping the worker: {e}")))?;
            Ok::<_, crate::BenchError>(took)
        })?;
        self.check_topic(&topic, "Ferry")?;
        dir.remove()?;
        Ok(took)
    }

    fn plain(&self, round: usize) -> BenchResult<Duration> {
        let topic = format!("ferry-bench-e2e-plain-{round}");
        self.runtime
            .block_on(create_topic(self.bootstrap, &topic, PARTITIONS, &[]))?;
        let (bootstrap, path, task_topic) = (
            self.bootstrap.to_owned(),
            self.input_path.to_owned(),
            topic.clone(),
        );
        // Spawned like the worker's task loop, so it runs on a runtime worker thread.
        let took = self
            .runtime
            .block_on(self.runtime.spawn(async move {
                let started = Instant::now();
                let producer: FutureProducer = KafkaSinkConfig::new(&bootstrap)
                    .client_config()
                    .create()
                    .map_err(|e| crate::BenchError::from(format!("plain producer: {e}")))?;
                produce_lines(&producer, &path, &task_topic).await?;
                let took = started.elapsed();
                tokio::task::spawn_blocking(move || drop(producer))
                    .await
                    .map_err(|e| {
                        crate::BenchError::from(format!("dropping the plain producer: {e}"))
                    })?;
                Ok::<_, crate::BenchError>(took)
            }))
            .map_err(|e| {
                crate::BenchError::from(format!("the plain producer task panicked: {e}"))
            })??;
        self.check_topic(&topic, "plain")?;
        Ok(took)
    }

    /// The topic must hold exactly the input's lines, the first one first.
    fn check_topic(&self, topic: &str, who: &str) -> BenchResult<()> {
        let ends = self.runtime.block_on(end_offsets(self.bootstrap, topic))?;
        let held: i64 = ends.iter().sum();
        if u64::try_from(held).ok() != Some(self.input.lines) {
            return Err(crate::BenchError::from(format!(
                "{who}: topic {topic} holds {held} records, the input has {} lines",
                self.input.lines
            )));
        }
        let (bootstrap, topic_owned) = (self.bootstrap.to_owned(), topic.to_owned());
        let (key, value) = self
            .runtime
            .block_on(
                self.runtime
                    .spawn_blocking(move || first_record(&bootstrap, &topic_owned)),
            )
            .map_err(|e| crate::BenchError::from(format!("reading back {topic}: {e}")))??;
        if key.is_some() || value.as_deref() != Some(self.first_line) {
            return Err(crate::BenchError::from(format!(
                "{who}: the first record of {topic} is key {:?} value {:?}, expected a null key and the first \
                 line {:?}",
                key.map(|k| String::from_utf8_lossy(&k).into_owned()),
                value.map(|v| String::from_utf8_lossy(&v).into_owned()),
                String::from_utf8_lossy(self.first_line)
            )));
        }
        Ok(())
    }
}

/// Sends every line of `path` (without its terminator) as a value with a null key, then awaits every
/// delivery. A full local queue waits for the oldest delivery, as the KafkaSink's caller backs off.
async fn produce_lines(producer: &FutureProducer, path: &Path, topic: &str) -> BenchResult<()> {
    let reading =
        |e: std::io::Error| format!("plain producer: cannot read {}: {e}", path.display());
    let mut reader = BufReader::with_capacity(64 << 10, File::open(path).map_err(reading)?);
    let mut pending: VecDeque<DeliveryFuture> = VecDeque::new();
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(reading)? == 0 {
            break;
        }
        send(producer, &mut pending, topic, None, strip_terminator(&line)).await?;
    }
    for future in pending {
        delivered(future, topic).await?;
    }
    Ok(())
}

/// A line without `\n` or `\r\n`, as FileStreamSource emits it.
fn strip_terminator(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn first_line(path: &Path) -> BenchResult<Vec<u8>> {
    let mut line = Vec::new();
    BufReader::new(File::open(path).map_err(|e| {
        crate::BenchError::from(format!("cannot open the input {}: {e}", path.display()))
    })?)
    .read_until(b'\n', &mut line)
    .map_err(|e| {
        crate::BenchError::from(format!("cannot read the input {}: {e}", path.display()))
    })?;
    Ok(strip_terminator(&line).to_vec())
}

type KeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);

/// The key and value of the record at offset 0 of partition 0. Blocking.
fn first_record(bootstrap: &str, topic: &str) -> BenchResult<KeyValue> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "ferry-bench-e2e-check")
        .set("enable.auto.commit", "false")
        .create()
        .map_err(|e| crate::BenchError::from(format!("consumer reading back {topic}: {e}")))?;
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Beginning)
        .map_err(|e| crate::BenchError::from(format!("assigning {topic}: {e}")))?;
    consumer
        .assign(&assignment)
        .map_err(|e| crate::BenchError::from(format!("assigning {topic}: {e}")))?;
    let started = Instant::now();
    while started.elapsed() < READ_TIMEOUT {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(message)) => {
                return Ok((
                    message.key().map(<[u8]>::to_vec),
                    message.payload().map(<[u8]>::to_vec),
                ));
            }
            Some(Err(e)) => {
                return Err(crate::BenchError::from(format!(
                    "reading back {topic}: {e}"
                )));
            }
            None => {}
        }
    }
    Err(crate::BenchError::from(format!(
        "reading back {topic}: no record within {READ_TIMEOUT:?}"
    )))
}
