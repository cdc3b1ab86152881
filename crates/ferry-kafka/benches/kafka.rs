#![allow(missing_docs)]
//! Ferry against a real Kafka-compatible broker (tansu, started by `ferry-testkit` on a free loopback
//! port), each side by side with plain rdkafka doing the same work:
//!
//! 1. **Offset store start-up.** [`KafkaOffsetStore::open`] (look the topic up, check it is compacted,
//!    create its clients, read every partition to its end into memory) on an offsets topic of 0,
//!    100 000 and 1 000 000 distinct Kafka Connect offset records (`["bench",{"filename":…}]` →
//!    `{"position":N}`, spread by murmur2 over 25 partitions), against a plain `BaseConsumer` that
//!    assigns every partition from the beginning and polls until each reaches its end offset, touching
//!    nothing.
//! 2. **SequenceSource → Kafka throughput.** A [`Worker`] with a [`KafkaSink`] (Ferry's defaults:
//!    acks=all, idempotence, JsonConverter with schemas) and a memory offset store runs SequenceSource
//!    (4 partitions × 250 000 records) until the topic holds every record (its end offsets sum to the
//!    record count) and until the committed offsets reach every partition's last seq; against a plain
//!    `FutureProducer` (acks=all, idempotence) sending records with the same bytes and awaiting every
//!    delivery.
//!
//! Each measurement is the median of a few runs, Ferry and plain alternating. Client and broker CPU
//! time (from /proc) are printed with them: broker and bench share the machine.
//!
//! Run: `cargo bench -p ferry-kafka --bench kafka` (add `-- startup` or `-- throughput` for one
//! part). `FERRY_BENCH_QUICK=1` shrinks every size 10× for a smoke run; `FERRY_BENCH_TASKS=N` sets the
//! SequenceSource connector's `tasks.max` (default 1). Needs `tansu` (./scripts/install-test-deps).
//! Under `cargo test --benches` (no `--bench` argument) it does nothing.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ferry_api::ConnectMap;
use ferry_connectors::SequenceSourceConnector;
use ferry_kafka::convert::{Converter, Role};
use ferry_kafka::{KafkaOffsetStore, KafkaOffsetStoreConfig, KafkaSink, KafkaSinkConfig};
use ferry_offsets::{MemoryStore, OffsetBackingStore, encode_key, encode_value};
use ferry_runtime::{ConnectorSpec, TaskState, Worker, WorkerSettings};
use ferry_testkit::TansuBroker;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::{ClientConfig, Message};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{EnvFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

type Result<T> = std::result::Result<T, String>;

/// The connector name in the offset records of the start-up fixture.
const FIXTURE_CONNECTOR: &str = "bench";
/// Kafka Connect's default `offset.storage.partitions`.
const OFFSET_PARTITIONS: i32 = 25;
/// SequenceSource partitions, and partitions of its destination topic.
const SEQ_PARTITIONS: i32 = 4;
const SEQ_CONNECTOR: &str = "bench-seq";
/// How long any single wait may take before the bench gives up.
const DEADLINE: Duration = Duration::from_secs(900);
/// Client timeouts for metadata and offset requests.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the end-offset watcher asks the broker during a throughput run.
const WATCH_INTERVAL: Duration = Duration::from_millis(20);
/// `offset.flush.interval.ms` of the worker in the throughput runs.
const FLUSH_INTERVAL: Duration = Duration::from_millis(1000);

struct Plan {
    quick: bool,
    /// (offset records in the topic, runs).
    startup: Vec<(usize, usize)>,
    records_per_partition: i64,
    throughput_runs: usize,
    tasks_max: usize,
    run_startup: bool,
    run_throughput: bool,
}

impl Plan {
    fn from_env(filters: &[String]) -> Result<Self> {
        let quick = std::env::var("FERRY_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        let scale = if quick { 10 } else { 1 };
        let tasks_max = match std::env::var("FERRY_BENCH_TASKS") {
            Ok(v) => v
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| format!("FERRY_BENCH_TASKS={v:?} is not a positive number"))?,
            Err(_) => 1,
        };
        let wants =
            |section: &str| filters.is_empty() || filters.iter().any(|f| section.contains(f));
        Ok(Self {
            quick,
            startup: vec![(0, 5), (100_000 / scale, 5), (1_000_000 / scale, 3)],
            records_per_partition: 250_000 / scale as i64,
            throughput_runs: 3,
            tasks_max,
            run_startup: wants("startup"),
            run_throughput: wants("throughput"),
        })
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes --bench; `cargo test --benches` / `--all-targets` does not. This bench
    // needs minutes and a broker, so under `cargo test` it only says how to run it.
    if !args.iter().any(|a| a == "--bench") {
        println!(
            "ferry-kafka kafka bench: not run under `cargo test`; run it with `cargo bench -p ferry-kafka --bench kafka`"
        );
        return;
    }
    let filters: Vec<String> = args.into_iter().filter(|a| !a.starts_with('-')).collect();
    let plan = match Plan::from_env(&filters) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("kafka bench: {e}");
            std::process::exit(2);
        }
    };
    let phases = ReadPhases::default();
    tracing_subscriber::registry()
        .with(
            phases
                .clone()
                .with_filter(Targets::new().with_target("ferry_kafka", tracing::Level::INFO)),
        )
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(
                    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
                ),
        )
        .init();

    let broker = match TansuBroker::start() {
        Ok(broker) => broker,
        Err(e) => {
            eprintln!("kafka bench: cannot start the tansu broker: {e}");
            std::process::exit(1);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kafka bench: tokio runtime: {e}");
            std::process::exit(1);
        }
    };
    let started = Instant::now();
    let outcome = runtime.block_on(run(&broker, &plan, &phases));
    drop(runtime);
    let log_tail = broker.log_tail();
    drop(broker);
    match outcome {
        Ok(report) => {
            println!("\n{report}");
            println!("bench wall time: {:.1?}", started.elapsed());
        }
        Err(e) => {
            eprintln!("kafka bench failed: {e}\n--- tansu log (tail) ---\n{log_tail}");
            std::process::exit(1);
        }
    }
}

async fn run(broker: &TansuBroker, plan: &Plan, phases: &ReadPhases) -> Result<String> {
    let bootstrap = broker.bootstrap_servers();
    let broker_pid = find_broker_pid();
    let mut report = String::new();
    let _ = writeln!(
        report,
        "ferry-kafka bench{}: tansu broker (sqlite storage) at {bootstrap} on this machine ({} CPUs, load average at start {}); \
         CPU = user+sys seconds of the bench process (client) and of the broker process",
        if plan.quick {
            " (FERRY_BENCH_QUICK: sizes / 10)"
        } else {
            ""
        },
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average(),
    );
    println!("{}", report.trim_end());
    if broker_pid.is_none() {
        println!("  (broker process not found in /proc: broker CPU not reported)");
    }
    if plan.run_startup {
        let table = startup_bench(&bootstrap, plan, phases, broker_pid).await?;
        report.push('\n');
        report.push_str(&table);
    }
    if plan.run_throughput {
        let table = throughput_bench(&bootstrap, plan, broker_pid).await?;
        report.push('\n');
        report.push_str(&table);
    }
    Ok(report)
}

// ---------------------------------------------------------------------------------------------
// Part 1: offset store start-up
// ---------------------------------------------------------------------------------------------

/// One measured run.
#[derive(Clone, Copy, Default)]
struct Sample {
    wall: Duration,
    client_cpu: Duration,
    broker_cpu: Duration,
    /// Ferry only: the store's own read-to-end time, from its log line.
    read_phase: Option<Duration>,
}

async fn startup_bench(
    bootstrap: &str,
    plan: &Plan,
    phases: &ReadPhases,
    broker_pid: Option<u32>,
) -> Result<String> {
    println!("\n== offset store start-up: fixtures ==");
    let mut fixtures = Vec::new();
    for &(records, runs) in &plan.startup {
        let topic = format!("bench-offsets-{records}");
        produce_offsets_fixture(bootstrap, &topic, records).await?;
        fixtures.push((topic, records, runs));
    }

    let mut rows = Vec::new();
    for (topic, records, runs) in fixtures {
        println!("\n== offset store start-up: {records} records, {runs} runs each ==");
        // One untimed read first, so neither side pays for a cold broker cache alone.
        let warm = plain_read_to_end(bootstrap.to_owned(), topic.clone(), broker_pid).await?;
        println!("  warm-up (plain consumer, untimed): {:.3?}", warm.0.wall);
        let (mut ferry, mut plain) = (Vec::new(), Vec::new());
        for run in 1..=runs {
            let f = ferry_open(bootstrap, &topic, records, phases, broker_pid).await?;
            println!(
                "  run {run}/{runs}: Ferry open {:>9.3?} (read phase {}, client CPU {:.2}s, broker CPU {:.2}s)",
                f.wall,
                f.read_phase.map_or("?".to_owned(), |d| format!("{d:.3?}")),
                f.client_cpu.as_secs_f64(),
                f.broker_cpu.as_secs_f64()
            );
            let (p, read) =
                plain_read_to_end(bootstrap.to_owned(), topic.clone(), broker_pid).await?;
            if read != records as u64 {
                return Err(format!(
                    "the plain consumer read {read} records of {topic}, expected {records}"
                ));
            }
            println!(
                "  run {run}/{runs}: plain read {:>9.3?} (client CPU {:.2}s, broker CPU {:.2}s)",
                p.wall,
                p.client_cpu.as_secs_f64(),
                p.broker_cpu.as_secs_f64()
            );
            ferry.push(f);
            plain.push(p);
        }
        rows.push((records, runs, ferry, plain));
    }

    let mut table = String::new();
    let _ = writeln!(
        table,
        "Offset store start-up: KafkaOffsetStore::open (topic lookup + DescribeConfigs + clients + read to end into memory)\n\
         vs plain rdkafka BaseConsumer (metadata + end offsets + assign from beginning + poll to end offsets, no processing).\n\
         Topic: {OFFSET_PARTITIONS} partitions, distinct keys [\"{FIXTURE_CONNECTOR}\",{{\"filename\":\"/var/log/app/partition-NNNNNNN.log\"}}] -> {{\"position\":N}}. Medians."
    );
    let _ = writeln!(
        table,
        "{:>9} | {:>4} | {:>10} | {:>10} | {:>10} | {:>10} | {:>11} | {:>9} | {:>9} | {:>10} | {:>10}",
        "records",
        "runs",
        "Ferry open",
        "read phase",
        "plain read",
        "Ferry/plain",
        "Ferry rec/s",
        "Ferry CPU",
        "plain CPU",
        "broker CPU",
        "broker CPU"
    );
    let _ = writeln!(
        table,
        "{:>9} | {:>4} | {:>10} | {:>10} | {:>10} | {:>10} | {:>11} | {:>9} | {:>9} | {:>10} | {:>10}",
        "", "", "", "(of open)", "", "", "", "client", "client", "(Ferry)", "(plain)"
    );
    for (records, runs, ferry, plain) in rows {
        let f = median(ferry.iter().map(|s| s.wall));
        let p = median(plain.iter().map(|s| s.wall));
        let read_phase = ferry
            .iter()
            .map(|s| s.read_phase)
            .collect::<Option<Vec<_>>>()
            .map_or("?".to_owned(), |v| secs(median(v.into_iter())));
        let rate = if records == 0 {
            "-".to_owned()
        } else {
            format!("{:.0}", records as f64 / f.as_secs_f64())
        };
        let _ = writeln!(
            table,
            "{:>9} | {:>4} | {:>10} | {:>10} | {:>10} | {:>10} | {:>11} | {:>9} | {:>9} | {:>10} | {:>10}",
            records,
            runs,
            secs(f),
            read_phase,
            secs(p),
            format!("{:.2}x", f.as_secs_f64() / p.as_secs_f64()),
            rate,
            secs(median(ferry.iter().map(|s| s.client_cpu))),
            secs(median(plain.iter().map(|s| s.client_cpu))),
            secs(median(ferry.iter().map(|s| s.broker_cpu))),
            secs(median(plain.iter().map(|s| s.broker_cpu))),
        );
    }
    Ok(table)
}

/// The offset record of fixture entry `i`: Kafka Connect's key and value bytes.
fn fixture_record(i: usize) -> Result<(Vec<u8>, Vec<u8>)> {
    let partition = ConnectMap::new()
        .with("filename", format!("/var/log/app/partition-{i:07}.log"))
        .map_err(|e| format!("fixture partition: {e}"))?;
    let offset = ConnectMap::new()
        .with("position", i as i64)
        .map_err(|e| format!("fixture offset: {e}"))?;
    Ok((
        encode_key(FIXTURE_CONNECTOR, Some(&partition)),
        encode_value(&offset),
    ))
}

/// Creates a compacted 25-partition topic and fills it with `count` distinct offset records with a
/// plain producer (acks=all, murmur2 partitioning like Kafka Connect's), then checks that the end
/// offsets add up to `count`.
async fn produce_offsets_fixture(bootstrap: &str, topic: &str, count: usize) -> Result<()> {
    create_topic(
        bootstrap,
        topic,
        OFFSET_PARTITIONS,
        &[("cleanup.policy", "compact")],
    )
    .await?;
    let started = Instant::now();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("partitioner", "murmur2_random")
        .set("linger.ms", "20")
        .create()
        .map_err(|e| format!("fixture producer: {e}"))?;
    let mut pending: VecDeque<DeliveryFuture> = VecDeque::new();
    let mut acked = 0usize;
    let mut last_report = Instant::now();
    for i in 0..count {
        let (key, value) = fixture_record(i)?;
        loop {
            let record = FutureRecord::to(topic).key(&key[..]).payload(&value[..]);
            match producer.send_result(record) {
                Ok(future) => {
                    pending.push_back(future);
                    break;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    match pending.pop_front() {
                        Some(oldest) => {
                            delivered(oldest, "fixture").await?;
                            acked += 1;
                        }
                        None => tokio::time::sleep(Duration::from_millis(5)).await,
                    }
                }
                Err((e, _)) => return Err(format!("producing the fixture {topic}: {e}")),
            }
        }
        while pending.len() > 50_000 {
            if let Some(oldest) = pending.pop_front() {
                delivered(oldest, "fixture").await?;
                acked += 1;
            }
        }
        if last_report.elapsed() >= Duration::from_secs(5) {
            println!(
                "  producing {topic}: {acked}/{count} acknowledged ({:.0} records/s)",
                acked as f64 / started.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
    }
    for future in pending {
        delivered(future, "fixture").await?;
    }
    tokio::task::spawn_blocking(move || drop(producer))
        .await
        .map_err(|e| e.to_string())?;
    let ends = end_offsets(bootstrap.to_owned(), topic.to_owned(), OFFSET_PARTITIONS).await?;
    let total: i64 = ends.iter().sum();
    if total != count as i64 {
        return Err(format!(
            "fixture {topic}: the end offsets add up to {total}, expected {count}"
        ));
    }
    let (min, max) = (
        ends.iter().min().copied().unwrap_or(0),
        ends.iter().max().copied().unwrap_or(0),
    );
    println!(
        "  fixture {topic}: {count} records written and acknowledged in {:.1?} ({min}..{max} per partition)",
        started.elapsed()
    );
    Ok(())
}

/// One timed `KafkaOffsetStore::open`; the store is dropped (which closes its clients) untimed.
async fn ferry_open(
    bootstrap: &str,
    topic: &str,
    records: usize,
    phases: &ReadPhases,
    broker_pid: Option<u32>,
) -> Result<Sample> {
    let mut config = KafkaOffsetStoreConfig::new(bootstrap, topic);
    config.partitions = OFFSET_PARTITIONS;
    config.replication_factor = 1;
    config.timeout = Duration::from_secs(120);
    phases.clear();
    let cpu = CpuClock::start(broker_pid);
    let started = Instant::now();
    let store = KafkaOffsetStore::open(config)
        .await
        .map_err(|e| format!("KafkaOffsetStore::open: {e}"))?;
    let wall = started.elapsed();
    let (client_cpu, broker_cpu) = cpu.stop();
    let read = store.records_read();
    tokio::task::spawn_blocking(move || drop(store))
        .await
        .map_err(|e| e.to_string())?;
    if read != records as u64 {
        return Err(format!(
            "the Ferry store read {read} records of {topic}, expected {records}"
        ));
    }
    Ok(Sample {
        wall,
        client_cpu,
        broker_cpu,
        read_phase: phases.last(),
    })
}

/// One timed plain read of the whole topic: create a consumer, ask for the partitions and their end
/// offsets, assign every partition from the beginning, poll until each reached its end offset.
/// Returns the sample and the number of records read.
async fn plain_read_to_end(
    bootstrap: String,
    topic: String,
    broker_pid: Option<u32>,
) -> Result<(Sample, u64)> {
    tokio::task::spawn_blocking(move || {
        let cpu = CpuClock::start(broker_pid);
        let started = Instant::now();
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", "ferry-bench-plain-reader")
            .set("enable.auto.commit", "false")
            .create()
            .map_err(|e| format!("plain consumer: {e}"))?;
        let metadata = consumer
            .fetch_metadata(Some(&topic), REQUEST_TIMEOUT)
            .map_err(|e| format!("plain consumer metadata: {e}"))?;
        let partitions = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .map_or(0, |t| t.partitions().len() as i32);
        if partitions == 0 {
            return Err(format!("topic {topic} has no partitions in the metadata"));
        }
        let ends = list_offsets(&consumer, &topic, partitions, Offset::End)?;
        let mut assignment = TopicPartitionList::new();
        for p in 0..partitions {
            assignment
                .add_partition_offset(&topic, p, Offset::Beginning)
                .map_err(|e| e.to_string())?;
        }
        consumer.assign(&assignment).map_err(|e| e.to_string())?;
        let mut behind: usize = ends.iter().filter(|e| **e > 0).count();
        let mut done: Vec<bool> = ends.iter().map(|e| *e == 0).collect();
        let mut read = 0u64;
        let mut last_progress = Instant::now();
        while behind > 0 {
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => {
                    read += 1;
                    last_progress = Instant::now();
                    let p = message.partition() as usize;
                    if !done[p] && message.offset() + 1 >= ends[p] {
                        done[p] = true;
                        behind -= 1;
                    }
                }
                Some(Err(e)) => return Err(format!("plain consumer: {e}")),
                None if last_progress.elapsed() > REQUEST_TIMEOUT => {
                    return Err(format!(
                        "plain consumer: no progress for {REQUEST_TIMEOUT:?} after {read} records"
                    ));
                }
                None => {}
            }
        }
        let wall = started.elapsed();
        let (client_cpu, broker_cpu) = cpu.stop();
        drop(consumer);
        Ok((
            Sample {
                wall,
                client_cpu,
                broker_cpu,
                read_phase: None,
            },
            read,
        ))
    })
    .await
    .map_err(|e| e.to_string())?
}

// ---------------------------------------------------------------------------------------------
// Part 2: SequenceSource -> Kafka throughput
// ---------------------------------------------------------------------------------------------

struct ThroughputSample {
    /// Until every record is in the topic (Ferry) / every delivery is reported (plain).
    acked: Duration,
    /// Ferry only: until the committed offsets reach every partition's last seq.
    committed: Option<Duration>,
    client_cpu: Duration,
    broker_cpu: Duration,
}

async fn throughput_bench(bootstrap: &str, plan: &Plan, broker_pid: Option<u32>) -> Result<String> {
    let per_partition = plan.records_per_partition;
    let total = per_partition * i64::from(SEQ_PARTITIONS);
    let prefix = value_prefix()?;
    let sample_size = sequence_value(&prefix, 0, per_partition - 1).len();
    println!(
        "\n== SequenceSource -> Kafka: {SEQ_PARTITIONS} partitions x {per_partition} records = {total}, \
         {} runs each, tasks.max={} ==",
        plan.throughput_runs, plan.tasks_max
    );
    let (mut ferry, mut plain) = (Vec::new(), Vec::new());
    for run in 1..=plan.throughput_runs {
        let f = ferry_throughput(bootstrap, run, plan, broker_pid).await?;
        println!(
            "  run {run}/{}: Ferry worker: all in topic {:>9.3?} ({:.0} records/s), committed {}, client CPU {:.2}s, broker CPU {:.2}s",
            plan.throughput_runs,
            f.acked,
            total as f64 / f.acked.as_secs_f64(),
            f.committed.map_or("?".to_owned(), |d| format!("{d:.3?}")),
            f.client_cpu.as_secs_f64(),
            f.broker_cpu.as_secs_f64()
        );
        if run == 1 {
            check_ferry_bytes(bootstrap, &format!("bench-seq-ferry-{run}"), &prefix).await?;
        }
        let p = plain_throughput(bootstrap, run, per_partition, &prefix, broker_pid).await?;
        println!(
            "  run {run}/{}: plain producer: all delivered {:>9.3?} ({:.0} records/s), client CPU {:.2}s, broker CPU {:.2}s",
            plan.throughput_runs,
            p.acked,
            total as f64 / p.acked.as_secs_f64(),
            p.client_cpu.as_secs_f64(),
            p.broker_cpu.as_secs_f64()
        );
        ferry.push(f);
        plain.push(p);
    }

    let rate = |d: Duration| total as f64 / d.as_secs_f64();
    let f_acked = median(ferry.iter().map(|s| s.acked));
    let f_committed = ferry
        .iter()
        .map(|s| s.committed)
        .collect::<Option<Vec<_>>>()
        .map(|v| median(v.into_iter()));
    let p_acked = median(plain.iter().map(|s| s.acked));
    let mut table = String::new();
    let _ = writeln!(
        table,
        "SequenceSource -> Kafka: {SEQ_PARTITIONS} source partitions x {per_partition} records = {total} records into a \
         {SEQ_PARTITIONS}-partition topic; null key, value {}-{sample_size} bytes (JsonConverter schemas.enable=true envelope);\n\
         acks=all, enable.idempotence=true, partitioner murmur2_random (keyless: sticky random), librdkafka defaults otherwise.\n\
         Ferry: Worker + KafkaSink + MemoryStore, tasks.max={}, offset.flush.interval.ms={}; timed from creating the sink\n\
         to the topic's end offsets summing to {total} (polled every {} ms), and to the committed offsets reaching every last seq.\n\
         Plain: FutureProducer, records built with format!, timed from creating the producer to the last delivery report. Medians.",
        sequence_value(&prefix, 0, 0).len(),
        plan.tasks_max,
        FLUSH_INTERVAL.as_millis(),
        WATCH_INTERVAL.as_millis(),
    );
    let _ = writeln!(
        table,
        "{:<35} | {:>4} | {:>9} | {:>10} | {:>10} | {:>10}",
        "", "runs", "time", "records/s", "client CPU", "broker CPU"
    );
    let _ = writeln!(
        table,
        "{:<35} | {:>4} | {:>9} | {:>10.0} | {:>10} | {:>10}",
        "Ferry worker, all records in topic",
        ferry.len(),
        secs(f_acked),
        rate(f_acked),
        secs(median(ferry.iter().map(|s| s.client_cpu))),
        secs(median(ferry.iter().map(|s| s.broker_cpu))),
    );
    if let Some(c) = f_committed {
        let _ = writeln!(
            table,
            "{:<35} | {:>4} | {:>9} | {:>10.0} | {:>10} | {:>10}",
            "Ferry worker, all offsets committed",
            ferry.len(),
            secs(c),
            rate(c),
            "",
            ""
        );
    }
    let _ = writeln!(
        table,
        "{:<35} | {:>4} | {:>9} | {:>10.0} | {:>10} | {:>10}",
        "plain FutureProducer, all acked",
        plain.len(),
        secs(p_acked),
        rate(p_acked),
        secs(median(plain.iter().map(|s| s.client_cpu))),
        secs(median(plain.iter().map(|s| s.broker_cpu))),
    );
    let _ = writeln!(
        table,
        "ratio Ferry/plain (records/s): {:.2} (in topic), {}",
        rate(f_acked) / rate(p_acked),
        f_committed.map_or("?".to_owned(), |c| format!(
            "{:.2} (committed)",
            rate(c) / rate(p_acked)
        ))
    );
    Ok(table)
}

/// The bytes Ferry's default value converter writes for a SequenceSource record, up to the payload.
fn value_prefix() -> Result<String> {
    let converter = Converter::json(true);
    let schema = SequenceSourceConnector::value_schema();
    let bytes = |p: i32, n: i64| -> Result<String> {
        let value = serde_json::json!({"partition": p, "seq": n});
        let out = converter
            .convert(Role::Value, Some(&schema), Some(&value))
            .map_err(|e| e.to_string())?
            .ok_or("the converter wrote a null value")?;
        String::from_utf8(out).map_err(|e| e.to_string())
    };
    let first = bytes(0, 0)?;
    let prefix = first
        .strip_suffix(r#"{"partition":0,"seq":0}}"#)
        .ok_or_else(|| format!("unexpected JsonConverter output {first}"))?
        .to_owned();
    for (p, n) in [(0, 0), (3, 249_999), (1, 12_345), (2, 9)] {
        if sequence_value(&prefix, p, n) != bytes(p, n)? {
            return Err(format!(
                "the plain producer's value for ({p}, {n}) differs from the JsonConverter's"
            ));
        }
    }
    Ok(prefix)
}

fn sequence_value(prefix: &str, partition: i32, seq: i64) -> String {
    format!("{prefix}{{\"partition\":{partition},\"seq\":{seq}}}}}")
}

async fn ferry_throughput(
    bootstrap: &str,
    run: usize,
    plan: &Plan,
    broker_pid: Option<u32>,
) -> Result<ThroughputSample> {
    let per_partition = plan.records_per_partition;
    let total = per_partition * i64::from(SEQ_PARTITIONS);
    let topic = format!("bench-seq-ferry-{run}");
    create_topic(bootstrap, &topic, SEQ_PARTITIONS, &[]).await?;
    let watcher = EndWatcher::start(bootstrap, &topic, SEQ_PARTITIONS, total)?;
    let store = Arc::new(MemoryStore::new());
    let mut config = BTreeMap::new();
    for (k, v) in [
        ("name", SEQ_CONNECTOR.to_owned()),
        ("connector.class", "SequenceSource".to_owned()),
        ("tasks.max", plan.tasks_max.to_string()),
        ("partitions", SEQ_PARTITIONS.to_string()),
        ("records.per.partition", per_partition.to_string()),
        ("topic", topic.clone()),
    ] {
        config.insert(k.to_owned(), v);
    }
    let spec = ConnectorSpec {
        name: SEQ_CONNECTOR.to_owned(),
        tasks_max: plan.tasks_max,
        tolerate_delivery_errors: false,
        config,
    };
    // The rest from the defaults, so settings the worker gains later need no change here.
    #[allow(clippy::needless_update)]
    let settings = WorkerSettings {
        offset_flush_interval: FLUSH_INTERVAL,
        offset_flush_timeout: Duration::from_secs(30),
        task_shutdown_graceful_timeout: Duration::from_secs(60),
        ..WorkerSettings::default()
    };

    let cpu = CpuClock::start(broker_pid);
    let started = Instant::now();
    let sink = KafkaSink::new(&KafkaSinkConfig::new(bootstrap)).map_err(|e| e.to_string())?;
    let worker = Worker::new(settings, store.clone(), Arc::new(sink.clone()));
    worker
        .start_connector(spec, &SequenceSourceConnector::new())
        .map_err(|e| e.to_string())?;
    let acked_at = loop {
        if let Some(at) = watcher.reached() {
            break at;
        }
        check_tasks(&worker)?;
        if started.elapsed() > DEADLINE {
            return Err(format!(
                "Ferry: not every record reached {topic} within {DEADLINE:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let acked = acked_at.saturating_duration_since(started);
    let (client_cpu, broker_cpu) = cpu.stop();
    let committed = loop {
        let entries = store
            .connector_offsets(SEQ_CONNECTOR)
            .await
            .map_err(|e| e.to_string())?;
        let done = entries.len() == SEQ_PARTITIONS as usize
            && entries.iter().all(|(_, value)| {
                serde_json::from_slice::<serde_json::Value>(value)
                    .ok()
                    .and_then(|v| v.get("seq").and_then(serde_json::Value::as_i64))
                    == Some(per_partition - 1)
            });
        if done {
            break started.elapsed();
        }
        check_tasks(&worker)?;
        if started.elapsed() > DEADLINE {
            return Err(format!(
                "Ferry: the offsets were not committed within {DEADLINE:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    worker.shutdown().await;
    drop(watcher);
    tokio::task::spawn_blocking(move || {
        drop(worker);
        drop(sink);
    })
    .await
    .map_err(|e| e.to_string())?;
    let ends = end_offsets(bootstrap.to_owned(), topic.clone(), SEQ_PARTITIONS).await?;
    let in_topic: i64 = ends.iter().sum();
    if in_topic != total {
        return Err(format!(
            "Ferry: {topic} holds {in_topic} records, expected {total}"
        ));
    }
    Ok(ThroughputSample {
        acked,
        committed: Some(committed),
        client_cpu,
        broker_cpu,
    })
}

fn check_tasks(worker: &Worker) -> Result<()> {
    for (name, status) in worker.task_statuses(SEQ_CONNECTOR).unwrap_or_default() {
        if status.state == TaskState::Failed {
            return Err(format!(
                "Ferry task {name} failed: {}",
                status.trace.unwrap_or_default()
            ));
        }
    }
    Ok(())
}

/// Reads the first record of partition 0 of Ferry's topic and checks its bytes are what the plain
/// producer sends (null key, the JsonConverter envelope).
async fn check_ferry_bytes(bootstrap: &str, topic: &str, prefix: &str) -> Result<()> {
    let (bootstrap, topic, prefix) = (bootstrap.to_owned(), topic.to_owned(), prefix.to_owned());
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", "ferry-bench-check")
            .set("enable.auto.commit", "false")
            .create()
            .map_err(|e| e.to_string())?;
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(&topic, 0, Offset::Beginning)
            .map_err(|e| e.to_string())?;
        consumer.assign(&assignment).map_err(|e| e.to_string())?;
        let started = Instant::now();
        loop {
            match consumer.poll(Duration::from_millis(200)) {
                Some(Ok(message)) => {
                    let payload = message.payload().map(String::from_utf8_lossy);
                    let ok = message.key().is_none()
                        && payload.as_deref().is_some_and(|p| {
                            p.starts_with(&prefix)
                                && p.ends_with("}}")
                                && p.contains(r#""payload":{"partition":"#)
                        });
                    if !ok {
                        return Err(format!(
                            "Ferry wrote key {:?} value {payload:?}, not what the plain producer sends",
                            message.key()
                        ));
                    }
                    return Ok(());
                }
                Some(Err(e)) => return Err(e.to_string()),
                None if started.elapsed() > REQUEST_TIMEOUT => {
                    return Err(format!("no record in partition 0 of {topic}"));
                }
                None => {}
            }
        }
    })
    .await
    .map_err(|e| e.to_string())?
}

async fn plain_throughput(
    bootstrap: &str,
    run: usize,
    per_partition: i64,
    prefix: &str,
    broker_pid: Option<u32>,
) -> Result<ThroughputSample> {
    let total = per_partition * i64::from(SEQ_PARTITIONS);
    let topic = format!("bench-seq-plain-{run}");
    create_topic(bootstrap, &topic, SEQ_PARTITIONS, &[]).await?;
    // Same broker load as in the Ferry runs.
    let watcher = EndWatcher::start(bootstrap, &topic, SEQ_PARTITIONS, total)?;

    let cpu = CpuClock::start(broker_pid);
    let started = Instant::now();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("partitioner", "murmur2_random")
        .create()
        .map_err(|e| format!("plain producer: {e}"))?;
    let mut pending: VecDeque<DeliveryFuture> = VecDeque::new();
    for seq in 0..per_partition {
        for partition in 0..SEQ_PARTITIONS {
            let value = sequence_value(prefix, partition, seq);
            loop {
                let record = FutureRecord::<[u8], [u8]>::to(&topic).payload(value.as_bytes());
                match producer.send_result(record) {
                    Ok(future) => {
                        pending.push_back(future);
                        break;
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                        match pending.pop_front() {
                            Some(oldest) => delivered(oldest, "plain").await?,
                            None => tokio::time::sleep(Duration::from_millis(1)).await,
                        }
                    }
                    Err((e, _)) => return Err(format!("plain producer: {e}")),
                }
            }
        }
    }
    for future in pending {
        delivered(future, "plain").await?;
    }
    let acked = started.elapsed();
    let (client_cpu, broker_cpu) = cpu.stop();
    drop(watcher);
    tokio::task::spawn_blocking(move || drop(producer))
        .await
        .map_err(|e| e.to_string())?;
    let ends = end_offsets(bootstrap.to_owned(), topic.clone(), SEQ_PARTITIONS).await?;
    let in_topic: i64 = ends.iter().sum();
    if in_topic != total {
        return Err(format!(
            "plain: {topic} holds {in_topic} records, expected {total}"
        ));
    }
    Ok(ThroughputSample {
        acked,
        committed: None,
        client_cpu,
        broker_cpu,
    })
}

/// Polls a topic's end offsets every [`WATCH_INTERVAL`] on its own thread and client, and notes
/// when they first add up to the target.
struct EndWatcher {
    reached: Arc<Mutex<Option<Instant>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EndWatcher {
    fn start(bootstrap: &str, topic: &str, partitions: i32, target: i64) -> Result<Self> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", "ferry-bench-watcher")
            .create()
            .map_err(|e| format!("end-offset watcher: {e}"))?;
        // Connected and answering before the clock starts.
        list_offsets(&consumer, topic, partitions, Offset::End)?;
        let reached = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, s, topic) = (reached.clone(), stop.clone(), topic.to_owned());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                if let Ok(ends) = list_offsets(&consumer, &topic, partitions, Offset::End)
                    && ends.iter().sum::<i64>() >= target
                {
                    *r.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
                    return;
                }
                std::thread::sleep(WATCH_INTERVAL);
            }
        });
        Ok(Self {
            reached,
            stop,
            thread: Some(thread),
        })
    }

    fn reached(&self) -> Option<Instant> {
        *self.reached.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for EndWatcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

async fn delivered(future: DeliveryFuture, who: &str) -> Result<()> {
    match future.await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err((e, _))) => Err(format!("{who}: delivery failed: {e}")),
        Err(_) => Err(format!(
            "{who}: the producer went away before the delivery report"
        )),
    }
}

async fn create_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .map_err(|e| format!("admin client: {e}"))?;
    let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for (k, v) in configs {
        new = new.set(k, v);
    }
    let results = admin
        .create_topics(
            [&new],
            &AdminOptions::new().operation_timeout(Some(REQUEST_TIMEOUT)),
        )
        .await
        .map_err(|e| format!("creating {topic}: {e}"))?;
    for result in results {
        result.map_err(|(t, code)| format!("creating {t}: {code}"))?;
    }
    tokio::task::spawn_blocking(move || drop(admin))
        .await
        .map_err(|e| e.to_string())?;
    // Wait until the metadata shows every partition.
    let (bootstrap, topic) = (bootstrap.to_owned(), topic.to_owned());
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .create()
            .map_err(|e| e.to_string())?;
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        loop {
            if let Ok(md) = consumer.fetch_metadata(Some(&topic), Duration::from_secs(5))
                && md.topics().iter().any(|t| {
                    t.name() == topic
                        && t.error().is_none()
                        && t.partitions().len() == partitions as usize
                })
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "topic {topic} did not show {partitions} partitions"
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    })
    .await
    .map_err(|e| e.to_string())?
}

/// One offset per partition (ListOffsets, one request).
fn list_offsets(
    consumer: &BaseConsumer,
    topic: &str,
    partitions: i32,
    which: Offset,
) -> Result<Vec<i64>> {
    let mut request = TopicPartitionList::with_capacity(partitions as usize);
    for p in 0..partitions {
        request
            .add_partition_offset(topic, p, which)
            .map_err(|e| e.to_string())?;
    }
    let answer = consumer
        .offsets_for_times(request, REQUEST_TIMEOUT)
        .map_err(|e| format!("ListOffsets for {topic}: {e}"))?;
    let mut offsets = vec![0; partitions as usize];
    for element in answer.elements() {
        element.error().map_err(|e| e.to_string())?;
        match (
            element.offset(),
            offsets.get_mut(element.partition() as usize),
        ) {
            (Offset::Offset(o), Some(slot)) => *slot = o,
            (other, _) => {
                return Err(format!(
                    "ListOffsets for {topic}: {other:?} for partition {}",
                    element.partition()
                ));
            }
        }
    }
    Ok(offsets)
}

async fn end_offsets(bootstrap: String, topic: String, partitions: i32) -> Result<Vec<i64>> {
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .create()
            .map_err(|e| e.to_string())?;
        list_offsets(&consumer, &topic, partitions, Offset::End)
    })
    .await
    .map_err(|e| e.to_string())?
}

fn median(values: impl Iterator<Item = Duration>) -> Duration {
    let mut v: Vec<Duration> = values.collect();
    v.sort_unstable();
    match v.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2,
    }
}

fn secs(d: Duration) -> String {
    format!("{:.3}s", d.as_secs_f64())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_owned())
}

/// user+sys CPU time of a process, from /proc/PID/stat (clock ticks of 1/100 s).
fn cpu_time(pid: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// The tansu process the testkit started: a child of this process named `tansu`.
fn find_broker_pid() -> Option<u32> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let (head, rest) = stat.rsplit_once(')')?;
            let comm = head.split_once('(')?.1;
            let ppid = rest.split_whitespace().nth(1)?;
            (comm == "tansu" && ppid == me).then_some(pid)
        })
}

/// CPU time of the bench process and the broker over a measurement.
struct CpuClock {
    broker: Option<String>,
    client_start: Duration,
    broker_start: Duration,
}

impl CpuClock {
    fn start(broker_pid: Option<u32>) -> Self {
        let broker = broker_pid.map(|p| p.to_string());
        Self {
            client_start: cpu_time("self").unwrap_or_default(),
            broker_start: broker.as_deref().and_then(cpu_time).unwrap_or_default(),
            broker,
        }
    }

    /// (client, broker) CPU time since `start`.
    fn stop(&self) -> (Duration, Duration) {
        let client = cpu_time("self").unwrap_or_default();
        let broker = self
            .broker
            .as_deref()
            .and_then(cpu_time)
            .unwrap_or_default();
        (
            client.saturating_sub(self.client_start),
            broker.saturating_sub(self.broker_start),
        )
    }
}

/// Collects the duration of the store's read-to-end from its log line ("read N offset records (M live
/// offsets) from topic T (P partitions) in 1.2s").
#[derive(Clone, Default)]
struct ReadPhases(Arc<Mutex<Vec<Duration>>>);

impl ReadPhases {
    fn clear(&self) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    fn last(&self) -> Option<Duration> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last()
            .copied()
    }
}

struct MessageText(String);

impl tracing::field::Visit for MessageText {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for ReadPhases {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut text = MessageText(String::new());
        event.record(&mut text);
        let line = text.0;
        if !(line.starts_with("read ") && line.contains(" live offsets) from topic ")) {
            return;
        }
        if let Some(d) = line
            .rsplit_once(" in ")
            .and_then(|(_, d)| parse_debug_duration(d))
        {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(d);
        }
    }
}

/// Parses `Duration`'s Debug output (`1.2s`, `812.3ms`, `45.0µs`, `12ns`).
fn parse_debug_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix("µs") {
        (n, 1e-6)
    } else if let Some(n) = text.strip_suffix("ns") {
        (n, 1e-9)
    } else {
        (text.strip_suffix('s')?, 1.0)
    };
    number
        .parse::<f64>()
        .ok()
        .map(|n| Duration::from_secs_f64(n * scale))
}
