//! Case 4: FileStreamSource → Kafka with the worker as a process of its own: Ferry (`ferry
//! distributed`, the `ferry` binary next to this one) against Kafka Connect 4.4 (its distributed worker
//! from Maven Central's jars, Kafka's stock JVM flags), on the broker every Kafka case uses, reading
//! the input the FileStreamSource → Kafka case reads, in the same run.
//!
//! Both workers run the same way: distributed mode (configurations, statuses and offsets in their own
//! Kafka topics, one worker in its group), FileStreamSource created by the same `PUT
//! /connectors/<name>/config` body (`tasks.max=1`, `batch.size=2000`, StringConverter for key and
//! value: each record's value is the line, its key null), into a new one-partition topic per run, and
//! the producer settings Kafka Connect forces on its producers (acks=all, one request in flight, no
//! idempotence, no delivery deadline) with the Java client's `linger.ms=5` and `batch.size=16384`
//! ([`CONNECT_PRODUCER`]; Ferry's own defaults are idempotent with five requests in flight). Offsets:
//! Ferry commits continuously (`offset.flush.interval.ms=0`, the README example's), Kafka Connect every
//! 60 s (its default; it has no continuous mode).
//!
//! A timed run: spawn the worker (Kafka Connect's start returns once its log says it joined its
//! group), wait until its `GET /health` answers 200, send the connector's configuration (retried
//! while the worker answers 409), then watch the topic's end offset (ListOffsets every [`POLL`]) until it is the input's
//! line count. Measured per run: the time from the request to the last record (the rate), the
//! worker's CPU seconds over the same span and before it (`/proc/<pid>/stat`, every thread), its peak
//! RSS at the end (`VmHWM`), and the start-up: spawn → first record in the topic. Then the topic must
//! hold exactly the input's lines, the first line first.
//!
//! Duplicates per SIGKILL: a fresh worker, group and topic; the worker is SIGKILLed once the topic
//! holds a share of the input, restarted (the connector comes back from its config topic and resumes
//! from its last committed offset), and watched until the last line is the topic's last record; the
//! topic's records are then compared with the input's lines (duplicates = records beyond the input,
//! lost = lines missing).
//!
//! Kafka's own `ProducerPerformance` sends as many records of the input's mean line length with the
//! same producer settings: what the broker takes from a Java producer configured like Kafka Connect's.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ferry_testkit::{ConnectOptions, ConnectWorker, Jvm, KafkaBroker};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::{ClientConfig, Message};

use super::lines::{self, Input};
use super::{RunDir, Runner, rounds};
use crate::BenchResult;
use crate::kafka::create_topic;
use crate::measure::{human_bytes, human_count, human_duration};
use crate::results::{Case, Contender, ProcessCost, Work};

pub const FERRY: &str = "Ferry (`ferry distributed`)";
pub const CONNECT: &str = "Kafka Connect 4.4 (distributed worker)";
pub const PRODUCER_PERF: &str =
    "Kafka's ProducerPerformance (Java producer, Kafka Connect's producer settings)";
/// The exactly-once comparison's contenders.
pub const FERRY_ALO: &str = "Ferry, at least once (`ferry distributed`)";
pub const FERRY_EOS: &str = "Ferry, exactly once (`ferry distributed`)";
pub const CONNECT_ALO: &str = "Kafka Connect 4.4, at least once";
pub const CONNECT_EOS: &str = "Kafka Connect 4.4, exactly once";

/// What Kafka Connect sets on its source tasks' producers (`acks`, one request in flight, no
/// idempotence; `delivery.timeout.ms` and `max.block.ms` at their maximum are Ferry's default
/// `message.timeout.ms=0` and its wait for room in the queue) and the Java client's defaults it keeps
/// (`linger.ms`, `batch.size`), in librdkafka's names (the same as Java's for these): Ferry's
/// producer gets them as `producer.*`, ProducerPerformance as `--producer-props`.
pub const CONNECT_PRODUCER: &[(&str, &str)] = &[
    ("acks", "all"),
    ("max.in.flight.requests.per.connection", "1"),
    ("enable.idempotence", "false"),
    ("linger.ms", "5"),
    ("batch.size", "16384"),
];
/// Ferry's `offset.flush.interval.ms`: continuous commits (the README example's).
pub const FERRY_FLUSH_MS: u64 = 0;
/// Kafka Connect's `offset.flush.interval.ms`: its default. It has no continuous mode (its committer
/// is a fixed-delay schedule, which refuses 0).
pub const CONNECT_FLUSH_MS: u64 = 60_000;
/// FileStreamSource's `batch.size` (records per poll; Kafka Connect's default, set on both sides).
const BATCH_SIZE: u64 = 2000;
const CONNECTOR: &str = "bench-file-source";
/// How often the topic's end offset is asked for while a timed run lasts (the times' granularity).
const POLL: Duration = Duration::from_millis(10);
/// How long one run (or one kill's restart) may take before the bench gives up.
const DEADLINE: Duration = Duration::from_secs(900);
/// How long the bench waits after a SIGKILL before counting what reached the topic.
const SETTLE: Duration = Duration::from_millis(500);
/// Client timeout of ListOffsets and fetches.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Which worker a run starts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ferry,
    Connect,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Ferry => FERRY,
            Kind::Connect => CONNECT,
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Kind::Ferry => "ferry",
            Kind::Connect => "connect",
        }
    }
}

/// How a timed run delivers, and how the bench sees its records.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Delivery {
    /// At least once, watched by the topic's end offset (the worker-process case).
    EndOffsets,
    /// Watched by counting the records a `read_committed` consumer reads (end offsets count
    /// transaction markers too); exactly once (`exactly.once.source.support=enabled` on the worker,
    /// `exactly.once.support=required` on the connector) or at least once.
    Committed { exactly_once: bool },
}

impl Delivery {
    fn exactly_once(self) -> bool {
        matches!(self, Delivery::Committed { exactly_once: true })
    }

    fn slug(self) -> &'static str {
        match self {
            Delivery::EndOffsets => "",
            Delivery::Committed {
                exactly_once: false,
            } => "-alo",
            Delivery::Committed { exactly_once: true } => "-eos",
        }
    }
}

/// The case: `runs` timed rounds (Ferry, Kafka Connect, ProducerPerformance in turn), then `kills`
/// SIGKILL runs per worker. `input_path` holds `input` (the FileStreamSource → Kafka case's file).
pub fn case(
    runtime: &tokio::runtime::Runtime,
    work_dir: &Path,
    broker: &KafkaBroker,
    input_path: &Path,
    input: Input,
    runs: usize,
    kills: usize,
) -> BenchResult<Case> {
    let run = Run::prepare(runtime, work_dir, broker, input_path, input)?;
    let record_size = run.record_size;
    let work = Work {
        records: input.lines,
        bytes: input.bytes,
    };
    let perf_work = Work {
        records: input.lines,
        bytes: input.lines * record_size,
    };
    let costs = [
        RefCell::new(ProcessCost {
            flush_interval_ms: FERRY_FLUSH_MS,
            ..ProcessCost::default()
        }),
        RefCell::new(ProcessCost {
            flush_interval_ms: CONNECT_FLUSH_MS,
            ..ProcessCost::default()
        }),
    ];
    let timed = |kind: Kind, round: usize, cost: &RefCell<ProcessCost>| {
        let measured = run.timed(kind, Delivery::EndOffsets, round)?;
        record_cost(kind.name(), &measured, cost);
        Ok(measured.took)
    };
    let mut contenders = [
        Runner {
            name: FERRY,
            work,
            run: Box::new(|round| timed(Kind::Ferry, round, &costs[0])),
        },
        Runner {
            name: CONNECT,
            work,
            run: Box::new(|round| timed(Kind::Connect, round, &costs[1])),
        },
        Runner {
            name: PRODUCER_PERF,
            work: perf_work,
            run: Box::new(|round| run.producer_performance(round)),
        },
    ];
    let samples = rounds("worker processes", runs, &mut contenders)?;
    drop(contenders);
    for k in 0..kills {
        // Spread over the file: a third of the way, then up to two thirds.
        let share = if kills > 1 {
            1.0 / 3.0 + (k as f64) / ((kills - 1) as f64) / 3.0
        } else {
            0.5
        };
        for (kind, cost) in [(Kind::Ferry, &costs[0]), (Kind::Connect, &costs[1])] {
            let mut cost = cost.borrow_mut();
            match run.kill_run(kind, k + 1, share) {
                Ok(killed) => {
                    eprintln!(
                        "    {} SIGKILL {}/{kills} at {} records: {} duplicates, {} lost",
                        kind.name(),
                        k + 1,
                        human_count(killed.at_kill),
                        human_count(killed.duplicates),
                        human_count(killed.lost)
                    );
                    cost.records_at_kill.push(killed.at_kill);
                    cost.duplicates_per_kill.push(killed.duplicates);
                    cost.lost += killed.lost;
                }
                Err(e) => {
                    eprintln!("    {} SIGKILL {}/{kills}: {e}", kind.name(), k + 1);
                    cost.notes.push(format!("SIGKILL {}: {e}", k + 1));
                }
            }
        }
    }
    std::fs::remove_dir_all(&run.plugins).map_err(|e| {
        crate::BenchError::from(format!("cannot remove {}: {e}", run.plugins.display()))
    })?;
    let [ferry_cost, connect_cost] = costs;
    let contender = |name: &str, i: usize, work: Work, cost: Option<ProcessCost>| {
        let mut c = Contender::timed(name, &samples[i], Some(work));
        c.process = cost;
        c
    };
    Ok(Case {
        name: format!(
            "FileStreamSource {} ({} lines of {}–{} B) → Kafka topic of 1 partition (Apache Kafka 4.4 \
             on this machine, stock JVM flags), worker processes in distributed mode, value = the line \
             (StringConverter), batch.size {BATCH_SIZE}, Kafka Connect's producer settings on both \
             (acks=all, 1 request in flight, no idempotence, linger.ms 5, batch.size 16384); offsets \
             in the workers' Kafka topics, Ferry offset.flush.interval.ms={FERRY_FLUSH_MS}, Kafka \
             Connect {CONNECT_FLUSH_MS}; ProducerPerformance: {} records of {record_size} B",
            human_bytes(input.bytes as f64),
            human_count(input.lines),
            lines::MIN_LINE,
            lines::MAX_LINE,
            human_count(input.lines),
        ),
        reference: CONNECT.to_owned(),
        contenders: vec![
            contender(FERRY, 0, work, Some(ferry_cost.into_inner())),
            contender(CONNECT, 1, work, Some(connect_cost.into_inner())),
            contender(PRODUCER_PERF, 2, perf_work, None),
        ],
        store_size: None,
        changed: None,
    })
}

/// The exactly-once comparison: the worker-process case's input through both workers, each at least
/// once and exactly once (`exactly.once.source.support=enabled`, the connector
/// `exactly.once.support=required`, one transaction per poll batch of [`BATCH_SIZE`] lines), every
/// run watched the same way — a `read_committed` consumer counting the topic's records — in turn,
/// `runs` timed rounds.
pub fn exactly_once_case(
    runtime: &tokio::runtime::Runtime,
    work_dir: &Path,
    broker: &KafkaBroker,
    input_path: &Path,
    input: Input,
    runs: usize,
) -> BenchResult<Case> {
    let run = Run::prepare(runtime, work_dir, broker, input_path, input)?;
    let work = Work {
        records: input.lines,
        bytes: input.bytes,
    };
    let contenders: [(&'static str, Kind, bool, u64); 4] = [
        (FERRY_ALO, Kind::Ferry, false, FERRY_FLUSH_MS),
        (FERRY_EOS, Kind::Ferry, true, FERRY_FLUSH_MS),
        (CONNECT_ALO, Kind::Connect, false, CONNECT_FLUSH_MS),
        (CONNECT_EOS, Kind::Connect, true, CONNECT_FLUSH_MS),
    ];
    let costs: Vec<RefCell<ProcessCost>> = contenders
        .iter()
        .map(|(_, _, _, flush_interval_ms)| {
            RefCell::new(ProcessCost {
                flush_interval_ms: *flush_interval_ms,
                ..ProcessCost::default()
            })
        })
        .collect();
    let timed = |i: usize, round: usize| {
        let (name, kind, exactly_once, _) = contenders[i];
        let measured = run.timed(kind, Delivery::Committed { exactly_once }, round)?;
        record_cost(name, &measured, &costs[i]);
        Ok(measured.took)
    };
    let timed = &timed;
    let mut runners: Vec<Runner<'_>> = contenders
        .iter()
        .enumerate()
        .map(|(i, (name, ..))| Runner {
            name,
            work,
            run: Box::new(move |round| timed(i, round)),
        })
        .collect();
    let samples = rounds("exactly once vs at least once", runs, &mut runners)?;
    drop(runners);
    std::fs::remove_dir_all(&run.plugins).map_err(|e| {
        crate::BenchError::from(format!("cannot remove {}: {e}", run.plugins.display()))
    })?;
    let contenders = contenders
        .iter()
        .zip(costs)
        .zip(&samples)
        .map(|(((name, ..), cost), samples)| {
            let mut c = Contender::timed(*name, samples, Some(work));
            c.process = Some(cost.into_inner());
            c
        })
        .collect();
    Ok(Case {
        name: format!(
            "FileStreamSource {} ({} lines) → Kafka topic of 1 partition, worker processes in \
             distributed mode, at least once and exactly once (one transaction per poll batch of \
             {BATCH_SIZE} lines), value = the line (StringConverter), Kafka Connect's producer \
             settings on both; every run watched by a read_committed consumer",
            human_bytes(input.bytes as f64),
            human_count(input.lines),
        ),
        reference: CONNECT_EOS.to_owned(),
        contenders,
        store_size: None,
        changed: None,
    })
}

/// Keeps a timed run's process measurements in `cost`, and prints them.
fn record_cost(name: &str, measured: &Measured, cost: &RefCell<ProcessCost>) {
    let mut cost = cost.borrow_mut();
    cost.cpu_seconds.push(measured.cpu);
    cost.ready_cpu_seconds.push(measured.ready_cpu);
    cost.peak_rss_bytes.push(measured.peak_rss);
    cost.startup_seconds.push(measured.startup.as_secs_f64());
    cost.plugin_scan_seconds.extend(measured.plugin_scan);
    eprintln!(
        "    {}: start-up {}{}, CPU {:.2} s ({:.2} s before the request), peak RSS {}",
        name,
        human_duration(measured.startup.as_secs_f64()),
        measured.plugin_scan.map_or(String::new(), |s| format!(
            " (plugin scan {})",
            human_duration(s)
        )),
        measured.cpu,
        measured.ready_cpu,
        human_bytes(measured.peak_rss as f64)
    );
}

/// What every run of the case shares.
struct Run<'a> {
    runtime: &'a tokio::runtime::Runtime,
    work_dir: &'a Path,
    broker: &'a KafkaBroker,
    bootstrap: String,
    ferry: PathBuf,
    plugins: PathBuf,
    input_path: &'a Path,
    input: Input,
    first_line: Vec<u8>,
    last_line: Vec<u8>,
    record_size: u64,
    /// Makes topic and group names unique to this bench process.
    tag: String,
}

impl<'a> Run<'a> {
    /// What every run shares: the `ferry` binary next to this one, Kafka Connect's plugin path, the
    /// input's first and last lines.
    fn prepare(
        runtime: &'a tokio::runtime::Runtime,
        work_dir: &'a Path,
        broker: &'a KafkaBroker,
        input_path: &'a Path,
        input: Input,
    ) -> BenchResult<Self> {
        let ferry = crate::crash::require_ferry_binary()?;
        let plugins = connect_plugin_path(work_dir, broker.kafka_home())?;
        let (first_line, last_line) = first_and_last_line(input_path)?;
        let record_size = (input.bytes / input.lines.max(1)).saturating_sub(1).max(1);
        eprintln!(
            "  FileStreamSource → Kafka, worker processes: {} lines; Ferry {}, Kafka Connect {}",
            human_count(input.lines),
            ferry.display(),
            broker.kafka_home().display()
        );
        Ok(Run {
            runtime,
            work_dir,
            broker,
            bootstrap: broker.bootstrap_servers(),
            ferry,
            plugins,
            input_path,
            input,
            first_line,
            last_line,
            record_size,
            tag: format!("{}-{}", std::process::id(), unique()),
        })
    }
}

/// One timed run's measurements.
struct Measured {
    took: Duration,
    plugin_scan: Option<f64>,
    cpu: f64,
    ready_cpu: f64,
    peak_rss: u64,
    startup: Duration,
}

/// One SIGKILL's outcome.
struct Killed {
    at_kill: u64,
    duplicates: u64,
    lost: u64,
}

impl Run<'_> {
    fn lines(&self) -> i64 {
        i64::try_from(self.input.lines).unwrap_or(i64::MAX)
    }

    /// A new one-partition topic and a watch on it.
    fn topic(&self, name: &str) -> BenchResult<(String, TopicWatch)> {
        let topic = format!("ferry-bench-{name}-{}", self.tag);
        self.runtime
            .block_on(create_topic(&self.bootstrap, &topic, 1, &[]))?;
        let watch = TopicWatch::new(&self.bootstrap, &topic)?;
        Ok((topic, watch))
    }

    fn start(
        &self,
        kind: Kind,
        group: &str,
        dir: &RunDir,
        delivery: Delivery,
    ) -> BenchResult<Worker> {
        let exactly_once: &[(&str, &str)] = if delivery.exactly_once() {
            &[("exactly.once.source.support", "enabled")]
        } else {
            &[]
        };
        match kind {
            Kind::Ferry => FerryWorker::start(
                &self.ferry,
                &self.bootstrap,
                group,
                dir,
                FERRY_FLUSH_MS,
                CONNECT_PRODUCER,
                exactly_once,
            )
            .map(Worker::Ferry),
            Kind::Connect => {
                let mut options = ConnectOptions::new(group);
                options.offset_flush_interval_ms = CONNECT_FLUSH_MS;
                options.jvm = Jvm::Shipped;
                options = options.with("plugin.path", self.plugins.display().to_string());
                for (key, value) in exactly_once {
                    options = options.with(*key, *value);
                }
                ConnectWorker::start(self.broker, options)
                    .map(Worker::Connect)
                    .map_err(|e| {
                        crate::BenchError::from(format!(
                            "the Kafka Connect worker did not start: {e}"
                        ))
                    })
            }
        }
    }

    /// The connector's configuration, the same for both workers.
    fn connector_config(&self, topic: &str, delivery: Delivery) -> String {
        let mut config = serde_json::json!({
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "tasks.max": "1",
            "file": self.input_path.display().to_string(),
            "topic": topic,
            "batch.size": BATCH_SIZE.to_string(),
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        });
        if delivery.exactly_once() {
            config["exactly.once.support"] = serde_json::json!("required");
        }
        config.to_string()
    }

    fn timed(&self, kind: Kind, delivery: Delivery, round: usize) -> BenchResult<Measured> {
        let slug = format!("{}{}", kind.slug(), delivery.slug());
        let (topic, watch) = self.topic(&format!("{slug}-{round}"))?;
        let dir = RunDir::create(self.work_dir, &format!("e2e-{slug}-{round}"))?;
        let group = format!("ferry-bench-{slug}-{round}-{}", self.tag);
        let committed = match delivery {
            Delivery::EndOffsets => None,
            Delivery::Committed { .. } => Some(CommittedWatch::new(&self.bootstrap, &topic)?),
        };
        let spawned = Instant::now();
        let mut worker = self.start(kind, &group, &dir, delivery)?;
        let pid = worker.pid()?;
        let measured = (|| {
            let (requested, ready_cpu) = worker
                .create_connector(&self.connector_config(&topic, delivery), || {
                    cpu_seconds(pid)
                })?;
            let (first, last) = match &committed {
                None => (
                    watch.wait(&mut worker, "the first record", |end| end >= 1)?,
                    watch.wait(&mut worker, "the last record", |end| end >= self.lines())?,
                ),
                Some(committed) => (
                    committed.wait(&mut worker, 1)?,
                    committed.wait(&mut worker, self.lines())?,
                ),
            };
            Ok::<_, crate::BenchError>(Measured {
                plugin_scan: worker.plugin_scan(),
                took: last.duration_since(requested),
                cpu: cpu_seconds(pid)? - ready_cpu,
                ready_cpu,
                peak_rss: peak_rss(pid)?,
                startup: first.duration_since(spawned),
            })
        })();
        worker.kill();
        let measured = measured.map_err(|e| {
            format!(
                "{} round {round}: {e}; its log ends:\n{}",
                kind.name(),
                worker.log_tail()
            )
        })?;
        drop(worker);
        match &committed {
            None => self.check_topic(&watch, kind.name())?,
            Some(committed) => self.check_committed(committed, kind.name())?,
        }
        dir.remove()?;
        Ok(measured)
    }

    /// A `read_committed` reader must see exactly the input's lines, the first one first.
    fn check_committed(&self, committed: &CommittedWatch, who: &str) -> BenchResult<()> {
        std::thread::sleep(SETTLE);
        let (count, first) = committed.read_to_end()?;
        if count != self.lines() {
            return Err(crate::BenchError::from(format!(
                "{who}: a read_committed reader sees {count} records in {}, the input has {} lines",
                committed.topic, self.input.lines
            )));
        }
        if first.as_deref() != Some(&self.first_line[..]) {
            return Err(crate::BenchError::from(format!(
                "{who}: the first committed record of {} is {:?}, expected the first line {:?}",
                committed.topic,
                first.map(|v| String::from_utf8_lossy(&v).into_owned()),
                String::from_utf8_lossy(&self.first_line)
            )));
        }
        Ok(())
    }

    /// The topic must hold exactly the input's lines, the first one first (with a null key).
    fn check_topic(&self, watch: &TopicWatch, who: &str) -> BenchResult<()> {
        // A retried request would add records a moment later.
        std::thread::sleep(SETTLE);
        let held = watch.end()?;
        if held != self.lines() {
            return Err(crate::BenchError::from(format!(
                "{who}: topic {} holds {held} records, the input has {} lines",
                watch.topic, self.input.lines
            )));
        }
        let (key, value) = watch.record_at(0)?;
        if key.is_some() || value.as_deref() != Some(&self.first_line[..]) {
            return Err(crate::BenchError::from(format!(
                "{who}: the first record of {} is key {:?} value {:?}, expected a null key and the first \
                 line {:?}",
                watch.topic,
                key.map(|k| String::from_utf8_lossy(&k).into_owned()),
                value.map(|v| String::from_utf8_lossy(&v).into_owned()),
                String::from_utf8_lossy(&self.first_line)
            )));
        }
        Ok(())
    }

    /// Starts a worker, SIGKILLs it once the topic holds `share` of the input, restarts it, waits until
    /// the last line is in the topic, and compares the topic's records with the input's lines.
    fn kill_run(&self, kind: Kind, kill: usize, share: f64) -> BenchResult<Killed> {
        let (topic, watch) = self.topic(&format!("{}-kill{kill}", kind.slug()))?;
        let dir = RunDir::create(self.work_dir, &format!("e2e-{}-kill{kill}", kind.slug()))?;
        let group = format!("ferry-bench-{}-kill{kill}-{}", kind.slug(), self.tag);
        let kill_at = ((self.lines() as f64 * share).ceil() as i64).clamp(1, self.lines());
        let mut worker = self.start(kind, &group, &dir, Delivery::EndOffsets)?;
        let outcome = (|| {
            worker
                .create_connector(&self.connector_config(&topic, Delivery::EndOffsets), || {
                    Ok(())
                })?;
            watch.wait(&mut worker, "the kill point", |end| end >= kill_at)?;
            worker.kill();
            std::thread::sleep(SETTLE);
            let at_kill = watch.end()?;
            if at_kill >= self.lines() {
                return Err(crate::BenchError::from(format!(
                    "not measured: the whole input ({at_kill} records) was in the topic when the kill \
                     landed (the input is too small for this worker's rate)"
                )));
            }
            worker.restart()?;
            // Before the kill the topic held the input's first lines in order, without the last one:
            // the last line at the end means the restarted worker reached the end of the file.
            let started = Instant::now();
            let mut checked = -1;
            loop {
                let end = watch.end()?;
                if end >= self.lines() && end != checked {
                    checked = end;
                    if watch.record_at(end - 1)?.1.as_deref() == Some(&self.last_line[..]) {
                        break;
                    }
                }
                worker.check_alive()?;
                if started.elapsed() > DEADLINE {
                    return Err(crate::BenchError::from(format!(
                        "the last line was not in the topic {DEADLINE:?} after the restart ({end} records)"
                    )));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            std::thread::sleep(SETTLE);
            let end = watch.end()?;
            worker.kill();
            if let Some(resumed) = worker.resumed_from() {
                eprintln!("    after the restart: {resumed}");
            }
            let (duplicates, lost) = self.compare(&watch, end)?;
            Ok(Killed {
                at_kill: u64::try_from(at_kill).unwrap_or(0),
                duplicates,
                lost,
            })
        })();
        worker.kill();
        let outcome = outcome.map_err(|e| {
            if e.to_string().starts_with("not measured") {
                e
            } else {
                crate::BenchError::from(format!(
                    "{e}; the worker's log ends:\n{}",
                    worker.log_tail()
                ))
            }
        });
        drop(worker);
        dir.remove()?;
        outcome
    }

    /// (records beyond the input's lines, input lines missing) in the first `end` records of the topic.
    fn compare(&self, watch: &TopicWatch, end: i64) -> BenchResult<(u64, u64)> {
        let mut counts: HashMap<u64, i64> = HashMap::new();
        let reading = |e: std::io::Error| format!("cannot read {}: {e}", self.input_path.display());
        let mut reader = BufReader::with_capacity(
            1 << 16,
            std::fs::File::open(self.input_path).map_err(reading)?,
        );
        let mut line = Vec::with_capacity(256);
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line).map_err(reading)? == 0 {
                break;
            }
            *counts.entry(hash(strip_terminator(&line))).or_default() += 1;
        }
        watch.read_all(end, |value| {
            *counts.entry(hash(value)).or_default() -= 1;
        })?;
        let (mut duplicates, mut lost) = (0u64, 0u64);
        for n in counts.into_values() {
            if n < 0 {
                duplicates += n.unsigned_abs();
            } else {
                lost += n.unsigned_abs();
            }
        }
        Ok((duplicates, lost))
    }

    /// One run of Kafka's ProducerPerformance into a new topic; its own time (first send to the last
    /// acknowledgement, from the records/s it prints), not the JVM's start.
    fn producer_performance(&self, round: usize) -> BenchResult<Duration> {
        let (topic, watch) = self.topic(&format!("perf-{round}"))?;
        let dir = RunDir::create(self.work_dir, &format!("e2e-perf-{round}"))?;
        let log_config = dir.join("log4j2.properties");
        std::fs::write(
            &log_config,
            "status = error\nappender.err.type = Console\nappender.err.name = STDERR\n\
             appender.err.target = SYSTEM_ERR\nappender.err.layout.type = PatternLayout\n\
             appender.err.layout.pattern = [%d] %p %m (%c)%n\nrootLogger.level = WARN\n\
             rootLogger.appenderRef.err.ref = STDERR\n",
        )
        .map_err(|e| {
            crate::BenchError::from(format!("cannot write {}: {e}", log_config.display()))
        })?;
        // kafka-producer-perf-test.sh: a 512 MiB heap and kafka-run-class.sh's JVM options.
        let mut args: Vec<String> = Jvm::Shipped
            .flags(false)
            .into_iter()
            .filter(|f| !f.starts_with("-Xm"))
            .collect();
        args.push("-Xmx512M".to_owned());
        args.push(format!(
            "-Dlog4j2.configurationFile={}",
            log_config.display()
        ));
        args.extend([
            "-cp".to_owned(),
            format!("{}/lib/*", self.broker.kafka_home().display()),
            "org.apache.kafka.tools.ProducerPerformance".to_owned(),
            "--topic".to_owned(),
            topic.clone(),
            "--num-records".to_owned(),
            self.input.lines.to_string(),
            "--record-size".to_owned(),
            self.record_size.to_string(),
            "--throughput".to_owned(),
            "-1".to_owned(),
            "--producer-props".to_owned(),
            format!("bootstrap.servers={}", self.bootstrap),
        ]);
        args.extend(CONNECT_PRODUCER.iter().map(|(k, v)| format!("{k}={v}")));
        args.extend([
            format!("delivery.timeout.ms={}", i32::MAX),
            format!("max.block.ms={}", i64::MAX),
        ]);
        let output = Command::new(java())
            .args(&args)
            .current_dir(dir.join("."))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| {
                crate::BenchError::from(format!("cannot run {}: {e}", java().display()))
            })?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            return Err(crate::BenchError::from(format!(
                "ProducerPerformance failed ({}): {stdout}{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )));
        }
        let per_second = producer_performance_rate(&stdout).ok_or_else(|| {
            format!("ProducerPerformance printed no total (records/sec): {stdout}")
        })?;
        let held = watch.end()?;
        if held != self.lines() {
            return Err(crate::BenchError::from(format!(
                "ProducerPerformance: topic {topic} holds {held} records, expected {}",
                self.input.lines
            )));
        }
        dir.remove()?;
        Ok(Duration::from_secs_f64(
            self.input.lines as f64 / per_second,
        ))
    }
}

/// The records/s of ProducerPerformance's total line (`N records sent, R records/sec (…`).
fn producer_performance_rate(stdout: &str) -> Option<f64> {
    stdout
        .lines()
        .rev()
        .filter(|l| l.contains("records sent,"))
        .find_map(|l| {
            let (_, rest) = l.split_once("records sent,")?;
            let (rate, _) = rest.split_once("records/sec")?;
            rate.trim().parse::<f64>().ok()
        })
        .filter(|r| *r > 0.0)
}

/// A worker process of either kind.
pub(crate) enum Worker {
    Ferry(FerryWorker),
    Connect(ConnectWorker),
}

impl Worker {
    pub(crate) fn pid(&self) -> BenchResult<u32> {
        match self {
            Worker::Ferry(w) => w.child.as_ref().map(Child::id),
            Worker::Connect(w) => w.pid(),
        }
        .ok_or_else(|| crate::BenchError::from("the worker is not running".to_owned()))
    }

    /// `host:port` of the REST API.
    pub(crate) fn rest(&self) -> String {
        match self {
            Worker::Ferry(w) => format!("127.0.0.1:{}", w.port),
            Worker::Connect(w) => w
                .rest_url()
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .to_owned(),
        }
    }

    pub(crate) fn kill(&mut self) {
        match self {
            Worker::Ferry(w) => w.kill(),
            Worker::Connect(w) => w.kill(),
        }
    }

    fn restart(&mut self) -> BenchResult<()> {
        match self {
            Worker::Ferry(w) => {
                w.kill();
                w.spawn()
            }
            Worker::Connect(w) => w.restart().map_err(|e| {
                crate::BenchError::from(format!("the Kafka Connect worker did not restart: {e}"))
            }),
        }
    }

    /// An error once the worker process has exited.
    pub(crate) fn check_alive(&mut self) -> BenchResult<()> {
        let alive = match self {
            Worker::Ferry(w) => match w.child.as_mut().map(Child::try_wait) {
                Some(Ok(None)) => true,
                Some(Ok(Some(status))) => {
                    return Err(crate::BenchError::from(format!("ferry exited ({status})")));
                }
                _ => false,
            },
            Worker::Connect(w) => w.pid().is_some_and(running),
        };
        if alive {
            Ok(())
        } else {
            Err(crate::BenchError::from(
                "the worker process is gone".to_owned(),
            ))
        }
    }

    /// Kafka Connect's plugin scan at its start, in seconds, from its log (the log is in the
    /// worker's working directory).
    fn plugin_scan(&self) -> Option<f64> {
        let Worker::Connect(w) = self else {
            return None;
        };
        let cwd = std::fs::read_link(format!("/proc/{}/cwd", w.pid()?)).ok()?;
        let log = std::fs::read_to_string(cwd.join("connect.log")).ok()?;
        let millis: u64 = log
            .lines()
            .filter_map(|l| {
                let (_, rest) = l.split_once("Scanning plugins with ")?;
                let (_, took) = rest.split_once(" took ")?;
                took.split_once(" ms")?.0.trim().parse::<u64>().ok()
            })
            .sum();
        (millis > 0).then(|| millis as f64 / 1000.0)
    }

    /// What the restarted Ferry worker's log says about where its task resumed.
    fn resumed_from(&self) -> Option<String> {
        let Worker::Ferry(w) = self else {
            return None;
        };
        let log = std::fs::read_to_string(&w.log).ok()?;
        log.lines()
            .rev()
            .find(|l| {
                l.contains("resumes from committed offset") || l.contains("has no committed offset")
            })
            .map(|l| l.split_once("INFO ").map_or(l, |(_, m)| m).to_owned())
    }

    pub(crate) fn log_tail(&self) -> String {
        match self {
            Worker::Ferry(w) => log_tail(&w.log),
            Worker::Connect(w) => w.log_tail(),
        }
    }

    /// Waits until `GET /health` answers 200, then sends `PUT /connectors/<name>/config`, retried while
    /// the worker answers 409 (no leader yet, a rebalance), 503 (starting) or, for a minute, 404 (Kafka
    /// Connect's REST resources not up yet). Returns when the request that was accepted was sent, and
    /// what `before` (called just before each attempt) said then.
    fn create_connector<T>(
        &mut self,
        config: &str,
        before: impl Fn() -> BenchResult<T>,
    ) -> BenchResult<(Instant, T)> {
        self.create_named(CONNECTOR, config, before)
    }

    /// [`create_connector`](Self::create_connector) for a connector called `name`.
    pub(crate) fn create_named<T>(
        &mut self,
        name: &str,
        config: &str,
        before: impl Fn() -> BenchResult<T>,
    ) -> BenchResult<(Instant, T)> {
        let rest = self.rest();
        let started = Instant::now();
        // Ready first (a request sent earlier would wait inside the worker for its start).
        loop {
            match http(&rest, "GET", "/health", "") {
                Ok((200, _)) => break,
                Ok((404 | 503, _)) | Err(_) if started.elapsed() < DEADLINE => {}
                Ok((status, body)) => {
                    return Err(crate::BenchError::from(format!(
                        "GET /health answered {status}: {body}"
                    )));
                }
                Err(e) => {
                    return Err(crate::BenchError::from(format!(
                        "GET /health from {rest}: {e}"
                    )));
                }
            }
            self.check_alive()?;
            std::thread::sleep(Duration::from_millis(5));
        }
        let path = format!("/connectors/{name}/config");
        loop {
            let value = before()?;
            let sent = Instant::now();
            match http(&rest, "PUT", &path, config) {
                Ok((200 | 201, _)) => return Ok((sent, value)),
                Ok((409 | 503, _)) | Err(_) if started.elapsed() < DEADLINE => {}
                // Kafka Connect's REST server answers 404 until its resources are registered, a
                // moment after the log line its start waits for.
                Ok((404, _)) if started.elapsed() < Duration::from_secs(60) => {}
                Ok((status, body)) => {
                    return Err(crate::BenchError::from(format!(
                        "PUT {path} answered {status}: {body}"
                    )));
                }
                Err(e) => {
                    return Err(crate::BenchError::from(format!(
                        "PUT {path} to {rest}: {e}"
                    )));
                }
            }
            self.check_alive()?;
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A `ferry distributed` process; killed on drop.
pub(crate) struct FerryWorker {
    binary: PathBuf,
    properties: PathBuf,
    dir: PathBuf,
    log: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl FerryWorker {
    /// Writes the worker file into `dir` and spawns the worker (it is not waited for: the connector
    /// request waits). `flush_ms`: its `offset.flush.interval.ms`; `producer`: settings for its producer
    /// (`producer.<key>`).
    pub(crate) fn start(
        binary: &Path,
        bootstrap: &str,
        group: &str,
        dir: &RunDir,
        flush_ms: u64,
        producer: &[(&str, &str)],
        extra: &[(&str, &str)],
    ) -> BenchResult<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| crate::BenchError::from(format!("no free port on 127.0.0.1: {e}")))?;
        let mut properties = format!(
            "bootstrap.servers={bootstrap}\n\
             group.id={group}\n\
             config.storage.topic={group}-configs\n\
             offset.storage.topic={group}-offsets\n\
             status.storage.topic={group}-status\n\
             config.storage.replication.factor=1\n\
             offset.storage.replication.factor=1\n\
             status.storage.replication.factor=1\n\
             listeners=http://127.0.0.1:{port}\n\
             offset.flush.interval.ms={flush_ms}\n\
             scheduled.rebalance.max.delay.ms=0\n"
        );
        for (key, value) in producer {
            properties.push_str(&format!("producer.{key}={value}\n"));
        }
        for (key, value) in extra {
            properties.push_str(&format!("{key}={value}\n"));
        }
        let path = dir.join("worker.properties");
        std::fs::write(&path, properties).map_err(|e| {
            crate::BenchError::from(format!("cannot write {}: {e}", path.display()))
        })?;
        let mut worker = Self {
            binary: binary.to_owned(),
            properties: path,
            dir: dir.join("."),
            log: dir.join("ferry.log"),
            port,
            child: None,
        };
        worker.spawn()?;
        Ok(worker)
    }

    fn spawn(&mut self) -> BenchResult<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| {
                crate::BenchError::from(format!("cannot open {}: {e}", self.log.display()))
            })?;
        let child = Command::new(&self.binary)
            .arg("distributed")
            .arg(&self.properties)
            .current_dir(&self.dir)
            // Its own default log level (info), whatever the bench runs with.
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| {
                crate::BenchError::from(format!("cannot start {}: {e}", self.binary.display()))
            })?;
        self.child = Some(child);
        Ok(())
    }

    /// SIGKILL, and waits for the exit.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for FerryWorker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last 40 lines of a log file.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// A record's key and value.
type KeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);

/// A consumer watching a topic (one partition unless made [`TopicWatch::partitions`]).
pub(crate) struct TopicWatch {
    consumer: BaseConsumer,
    pub(crate) topic: String,
    partitions: i32,
    /// How often [`wait`](Self::wait) looks ([`POLL`] unless made [`TopicWatch::partitions`]).
    poll: Duration,
}

impl TopicWatch {
    /// Watches `partitions` partitions: [`end`](Self::end) is their summed end offsets. Reading
    /// records ([`record_at`](Self::record_at), [`read_all`](Self::read_all)) reads partition 0.
    /// `poll`: how often [`wait`](Self::wait) looks.
    pub(crate) fn partitions(
        bootstrap: &str,
        topic: &str,
        partitions: i32,
        poll: Duration,
    ) -> BenchResult<Self> {
        let mut watch = Self::new(bootstrap, topic)?;
        watch.partitions = partitions;
        watch.poll = poll;
        Ok(watch)
    }

    pub(crate) fn new(bootstrap: &str, topic: &str) -> BenchResult<Self> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", "ferry-bench-connect-watch")
            .set("enable.auto.commit", "false")
            .create()
            .map_err(|e| crate::BenchError::from(format!("consumer watching {topic}: {e}")))?;
        Ok(Self {
            consumer,
            topic: topic.to_owned(),
            partitions: 1,
            poll: POLL,
        })
    }

    /// The end offset (high watermark) of partition 0, or the sum over the watched partitions:
    /// ListOffsets.
    pub(crate) fn end(&self) -> BenchResult<i64> {
        (0..self.partitions)
            .map(|p| {
                self.consumer
                    .fetch_watermarks(&self.topic, p, REQUEST_TIMEOUT)
                    .map(|(_, high)| high)
                    .map_err(|e| {
                        crate::BenchError::from(format!(
                            "ListOffsets for {} partition {p}: {e}",
                            self.topic
                        ))
                    })
            })
            .sum()
    }

    /// Polls the end offset every [`POLL`] until `done` holds; returns when the answer came.
    pub(crate) fn wait(
        &self,
        worker: &mut Worker,
        what: &str,
        done: impl Fn(i64) -> bool,
    ) -> BenchResult<Instant> {
        self.wait_all(std::slice::from_mut(worker), what, done)
            .map(|_| Instant::now())
    }

    /// [`wait`](Self::wait) while every one of `workers` runs; returns the end offset that did.
    pub(crate) fn wait_all(
        &self,
        workers: &mut [Worker],
        what: &str,
        done: impl Fn(i64) -> bool,
    ) -> BenchResult<i64> {
        let started = Instant::now();
        loop {
            let end = self.end()?;
            if done(end) {
                return Ok(end);
            }
            for worker in workers.iter_mut() {
                worker.check_alive()?;
            }
            if started.elapsed() > DEADLINE {
                return Err(crate::BenchError::from(format!(
                    "{what} was not in {} within {DEADLINE:?} ({end} records)",
                    self.topic
                )));
            }
            std::thread::sleep(self.poll);
        }
    }

    fn assign(&self, offset: Offset) -> BenchResult<()> {
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(&self.topic, 0, offset)
            .map_err(|e| crate::BenchError::from(format!("assigning {}: {e}", self.topic)))?;
        self.consumer
            .assign(&assignment)
            .map_err(|e| crate::BenchError::from(format!("assigning {}: {e}", self.topic)))
    }

    /// The key and value of the record at `offset`.
    fn record_at(&self, offset: i64) -> BenchResult<KeyValue> {
        self.assign(Offset::Offset(offset))?;
        let started = Instant::now();
        while started.elapsed() < REQUEST_TIMEOUT {
            match self.consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => {
                    return Ok((
                        message.key().map(<[u8]>::to_vec),
                        message.payload().map(<[u8]>::to_vec),
                    ));
                }
                Some(Err(e)) => {
                    return Err(crate::BenchError::from(format!(
                        "reading {}: {e}",
                        self.topic
                    )));
                }
                None => {}
            }
        }
        Err(crate::BenchError::from(format!(
            "reading {} at {offset}: no record within {REQUEST_TIMEOUT:?}",
            self.topic
        )))
    }

    /// Hands every value of the first `end` records to `each`.
    fn read_all(&self, end: i64, mut each: impl FnMut(&[u8])) -> BenchResult<()> {
        self.assign(Offset::Beginning)?;
        let mut last_progress = Instant::now();
        let mut next = 0;
        while next < end {
            match self.consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => {
                    last_progress = Instant::now();
                    next = message.offset() + 1;
                    if message.offset() < end {
                        each(message.payload().unwrap_or_default());
                    }
                }
                Some(Err(e)) => {
                    return Err(crate::BenchError::from(format!(
                        "reading {}: {e}",
                        self.topic
                    )));
                }
                None if last_progress.elapsed() > REQUEST_TIMEOUT => {
                    return Err(crate::BenchError::from(format!(
                        "reading {}: no progress for {REQUEST_TIMEOUT:?} at offset {next} of {end}",
                        self.topic
                    )));
                }
                None => {}
            }
        }
        Ok(())
    }
}

/// A `read_committed` consumer counting one one-partition topic's records from its beginning (what
/// a downstream consumer sees: aborted records and transaction markers are not counted).
struct CommittedWatch {
    consumer: BaseConsumer,
    topic: String,
    seen: std::cell::Cell<i64>,
    first: RefCell<Option<Vec<u8>>>,
}

impl CommittedWatch {
    fn new(bootstrap: &str, topic: &str) -> BenchResult<Self> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", "ferry-bench-committed-watch")
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed")
            .set("enable.partition.eof", "true")
            .create()
            .map_err(|e| crate::BenchError::from(format!("consumer watching {topic}: {e}")))?;
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(topic, 0, Offset::Beginning)
            .map_err(|e| crate::BenchError::from(format!("assigning {topic}: {e}")))?;
        consumer
            .assign(&assignment)
            .map_err(|e| crate::BenchError::from(format!("assigning {topic}: {e}")))?;
        Ok(Self {
            consumer,
            topic: topic.to_owned(),
            seen: std::cell::Cell::new(0),
            first: RefCell::new(None),
        })
    }

    /// Reads what is there within `POLL`; returns whether it reached the end of the partition.
    fn advance(&self) -> BenchResult<bool> {
        let until = Instant::now() + POLL;
        while Instant::now() < until {
            match self.consumer.poll(POLL) {
                Some(Ok(message)) => {
                    if self.seen.get() == 0 {
                        *self.first.borrow_mut() = message.payload().map(<[u8]>::to_vec);
                    }
                    self.seen.set(self.seen.get() + 1);
                }
                Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => return Ok(true),
                Some(Err(e)) => {
                    return Err(crate::BenchError::from(format!(
                        "reading {}: {e}",
                        self.topic
                    )));
                }
                None => {}
            }
        }
        Ok(false)
    }

    /// Reads until `count` records were seen; returns when.
    fn wait(&self, worker: &mut Worker, count: i64) -> BenchResult<Instant> {
        let started = Instant::now();
        while self.seen.get() < count {
            self.advance()?;
            worker.check_alive()?;
            if started.elapsed() > DEADLINE {
                return Err(crate::BenchError::from(format!(
                    "{count} committed records were not in {} within {DEADLINE:?} ({} seen)",
                    self.topic,
                    self.seen.get()
                )));
            }
        }
        Ok(Instant::now())
    }

    /// Reads to the end of the partition; returns the records seen and the first one's value.
    fn read_to_end(&self) -> BenchResult<(i64, Option<Vec<u8>>)> {
        let started = Instant::now();
        while !self.advance()? {
            if started.elapsed() > REQUEST_TIMEOUT {
                return Err(crate::BenchError::from(format!(
                    "reading {}: no end within {REQUEST_TIMEOUT:?}",
                    self.topic
                )));
            }
        }
        Ok((self.seen.get(), self.first.borrow().clone()))
    }
}

/// A plugin path holding FileStreamSource alone (what a user running it sets up; the testkit's also
/// holds Debezium's connector, whose scan would lengthen Kafka Connect's start): a copy of
/// `plugins/connect-file` under `work_dir`.
fn connect_plugin_path(work_dir: &Path, kafka_home: &Path) -> BenchResult<PathBuf> {
    let from = kafka_home.join("plugins/connect-file");
    let path = work_dir.join("connect-plugins");
    let to = path.join("connect-file");
    std::fs::create_dir_all(&to)
        .map_err(|e| crate::BenchError::from(format!("cannot create {}: {e}", to.display())))?;
    let entries = std::fs::read_dir(&from)
        .map_err(|e| crate::BenchError::from(format!("cannot list {}: {e}", from.display())))?;
    for entry in entries {
        let entry = entry
            .map_err(|e| crate::BenchError::from(format!("cannot list {}: {e}", from.display())))?;
        std::fs::copy(entry.path(), to.join(entry.file_name())).map_err(|e| {
            crate::BenchError::from(format!("cannot copy {}: {e}", entry.path().display()))
        })?;
    }
    Ok(path)
}

/// The `java` the testkit runs: `$JAVA_HOME/bin/java` when set, else `java` on PATH.
fn java() -> PathBuf {
    std::env::var_os("JAVA_HOME")
        .map(|home| PathBuf::from(home).join("bin/java"))
        .filter(|java| java.is_file())
        .unwrap_or_else(|| PathBuf::from("java"))
}

/// One HTTP/1.1 request with a JSON body; returns the status and the body. Blocking.
pub(crate) fn http(
    rest: &str,
    method: &str,
    path: &str,
    body: &str,
) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(rest)?;
    stream.set_read_timeout(Some(Duration::from_secs(180)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {rest}\r\nContent-Type: application/json\r\n\
         Accept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let answer = String::from_utf8_lossy(&answer);
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {answer:?}")))?;
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    Ok((status, body))
}

/// Clock ticks per second of `/proc/<pid>/stat` times (`getconf CLK_TCK`, 100 on Linux).
fn clock_ticks() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .filter(|t| *t > 0.0)
            .unwrap_or(100.0)
    })
}

/// The fields of `/proc/<pid>/stat` after the command name (the first is the state).
fn stat_fields(pid: u32) -> BenchResult<Vec<String>> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path)
        .map_err(|e| crate::BenchError::from(format!("cannot read {path}: {e}")))?;
    let (_, rest) = stat
        .rsplit_once(')')
        .ok_or_else(|| crate::BenchError::from(format!("{path}: no command name in {stat:?}")))?;
    Ok(rest.split_whitespace().map(str::to_owned).collect())
}

/// User + system CPU seconds of every thread of process `pid` so far.
pub(crate) fn cpu_seconds(pid: u32) -> BenchResult<f64> {
    let fields = stat_fields(pid)?;
    // utime and stime are the 14th and 15th fields; `fields` starts at the 3rd.
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .ok_or_else(|| crate::BenchError::from(format!("/proc/{pid}/stat: no field {}", i + 3)))
    };
    Ok((tick(11)? + tick(12)?) as f64 / clock_ticks())
}

/// Whether process `pid` runs (exists and is not a zombie).
fn running(pid: u32) -> bool {
    stat_fields(pid).is_ok_and(|f| f.first().is_some_and(|s| s != "Z" && s != "X"))
}

/// `VmHWM` of process `pid`, in bytes.
pub(crate) fn peak_rss(pid: u32) -> BenchResult<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path)
        .map_err(|e| crate::BenchError::from(format!("cannot read {path}: {e}")))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|kib| kib.trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .ok_or_else(|| crate::BenchError::from(format!("no VmHWM line in {path}")))
}

fn hash(bytes: &[u8]) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    bytes.hash(&mut hasher);
    hasher.finish()
}

/// A line without `\n` or `\r\n`, as FileStreamSource emits it.
fn strip_terminator(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn first_and_last_line(path: &Path) -> BenchResult<(Vec<u8>, Vec<u8>)> {
    let bytes = std::fs::read(path).map_err(|e| {
        crate::BenchError::from(format!("cannot read the input {}: {e}", path.display()))
    })?;
    let mut lines = bytes.split_inclusive(|&b| b == b'\n').map(strip_terminator);
    let first = lines.next().unwrap_or_default().to_vec();
    let last = lines
        .next_back()
        .map_or_else(|| first.clone(), <[u8]>::to_vec);
    Ok((first, last))
}

/// A number unlikely to repeat between bench runs on one broker.
pub(crate) fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_line_of_producer_performance_gives_the_rate() {
        let out = "50003 records sent, 10000.6 records/sec (1.19 MB/sec), 2.1 ms avg latency, 200.0 ms max latency.\n\
                   100000 records sent, 54347.8 records/sec (6.48 MB/sec), 3.20 ms avg latency, 210.00 ms max latency, 2 ms 50th, 5 ms 95th, 20 ms 99th, 100 ms 99.9th.\n";
        assert_eq!(producer_performance_rate(out), Some(54347.8));
        assert_eq!(producer_performance_rate("nothing"), None);
    }

    #[test]
    fn this_process_has_cpu_time_and_a_peak() {
        let pid = std::process::id();
        assert!(cpu_seconds(pid).expect("cpu") >= 0.0);
        assert!(peak_rss(pid).expect("rss") > 1 << 20);
        assert!(running(pid));
    }
}
