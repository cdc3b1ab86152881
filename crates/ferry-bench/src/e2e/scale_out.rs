//! Distributed scale-out: SequenceSource → Kafka through `ferry distributed` worker processes in one
//! group, one worker running one task against three workers running three tasks (one each), on the
//! broker every Kafka case uses, in turn, in the same run.
//!
//! A timed run: a new topic of [`PARTITIONS`] partitions, the workers spawned (their own directories,
//! one group, Ferry's default producer settings, continuous commits), the connector created through
//! the first worker (`tasks.max` = `partitions` = the worker count, so each task has one sequence),
//! then a wait until every task is RUNNING on its own worker. Then [`WARM_UP`] records, untimed; then
//! the run times the next `records` records by the topic's summed end offsets (ListOffsets every
//! [`POLL`]), and the time is scaled to exactly `records` from the records the last look found.
//! Measured per run over the same span: every worker's CPU seconds summed, the broker's CPU seconds,
//! and the workers' summed peak RSS at the end.
//!
//! On a machine with fewer cores than workers plus the broker need, the rate cannot grow with the
//! workers: the report says how many tasks share each core and what one core of worker CPU moves.

use std::time::{Duration, Instant};

use ferry_testkit::KafkaBroker;

use super::connect::{FerryWorker, TopicWatch, Worker, cpu_seconds, http, peak_rss, unique};
use super::{RunDir, Runner, rounds};
use crate::BenchResult;
use crate::kafka::create_topic;
use crate::measure::human_count;
use crate::results::{Case, Contender, ProcessCost, Work};

/// The contender with one worker and one task (the reference).
pub const ONE: &str = "Ferry, 1 worker, 1 task (`ferry distributed`)";
/// The contender with three workers and three tasks.
pub const THREE: &str = "Ferry, 3 workers, 3 tasks (`ferry distributed`)";
/// The topic's partitions in every run (the same for both contenders).
const PARTITIONS: i32 = 3;
/// Records moved before the timed span: the workers' producers and the broker's log warm up.
const WARM_UP: i64 = 200_000;
/// How often the bench lists the topic's end offsets.
const POLL: Duration = Duration::from_millis(5);
/// How long the tasks may take to start, and a timed span may take.
const DEADLINE: Duration = Duration::from_secs(300);
const CONNECTOR: &str = "bench-sequence";

/// The case: `runs` rounds of one worker and of three, in turn, each timing `records` records.
pub fn case(
    runtime: &tokio::runtime::Runtime,
    work_dir: &std::path::Path,
    broker: &KafkaBroker,
    records: u64,
    runs: usize,
) -> BenchResult<Case> {
    let ferry = crate::crash::require_ferry_binary()?;
    let run = Run {
        runtime,
        work_dir,
        broker,
        ferry,
        records: i64::try_from(records).unwrap_or(i64::MAX),
        tag: format!("{}-{}", std::process::id(), unique()),
    };
    let work = Work { records, bytes: 0 };
    let costs = [1usize, 3].map(|tasks| {
        std::cell::RefCell::new(ProcessCost {
            flush_interval_ms: super::connect::FERRY_FLUSH_MS,
            tasks,
            ..ProcessCost::default()
        })
    });
    let timed = |workers: usize, round: usize, cost: &std::cell::RefCell<ProcessCost>| {
        let measured = run.timed(workers, round)?;
        let mut cost = cost.borrow_mut();
        cost.cpu_seconds.push(measured.cpu);
        cost.broker_cpu_seconds.push(measured.broker_cpu);
        cost.peak_rss_bytes.push(measured.peak_rss);
        cost.startup_seconds.push(measured.startup.as_secs_f64());
        Ok(measured.took)
    };
    let mut contenders = [
        Runner {
            name: ONE,
            work,
            run: Box::new(|round| timed(1, round, &costs[0])),
        },
        Runner {
            name: THREE,
            work,
            run: Box::new(|round| timed(3, round, &costs[1])),
        },
    ];
    let samples = rounds("scale-out", runs, &mut contenders)?;
    drop(contenders);
    let contenders = [ONE, THREE]
        .into_iter()
        .zip(costs)
        .enumerate()
        .map(|(i, (name, cost))| {
            let mut c = Contender::timed(name, &samples[i], Some(work));
            c.process = Some(cost.into_inner());
            c
        })
        .collect();
    Ok(Case {
        name: format!(
            "SequenceSource → Kafka topic of {PARTITIONS} partitions (Apache Kafka 4.4 on this machine), \
             `ferry distributed` worker processes in one group, one task per worker (`tasks.max` = \
             `partitions` = workers), Ferry's default producer settings, continuous commits; {} \
             records timed after {} untimed",
            human_count(records),
            human_count(WARM_UP as u64),
        ),
        reference: ONE.to_owned(),
        contenders,
        store_size: None,
        changed: None,
    })
}

struct Run<'a> {
    runtime: &'a tokio::runtime::Runtime,
    work_dir: &'a std::path::Path,
    broker: &'a KafkaBroker,
    ferry: std::path::PathBuf,
    records: i64,
    tag: String,
}

/// One timed run's measurements.
struct Measured {
    took: Duration,
    cpu: f64,
    broker_cpu: f64,
    peak_rss: u64,
    /// Spawning the workers → every task RUNNING.
    startup: Duration,
}

impl Run<'_> {
    fn timed(&self, workers: usize, round: usize) -> BenchResult<Measured> {
        let bootstrap = self.broker.bootstrap_servers();
        let slug = format!("scale-{workers}-{round}");
        let topic = format!("ferry-bench-{slug}-{}", self.tag);
        self.runtime
            .block_on(create_topic(&bootstrap, &topic, PARTITIONS, &[]))?;
        let ends = TopicWatch::partitions(&bootstrap, &topic, PARTITIONS, POLL)?;
        let group = format!("ferry-bench-{slug}-{}", self.tag);
        let dirs = (0..workers)
            .map(|w| RunDir::create(self.work_dir, &format!("{slug}-worker-{w}")))
            .collect::<BenchResult<Vec<_>>>()?;
        let spawned = Instant::now();
        let mut running = Vec::with_capacity(workers);
        for dir in &dirs {
            running.push(Worker::Ferry(FerryWorker::start(
                &self.ferry,
                &bootstrap,
                &group,
                dir,
                super::connect::FERRY_FLUSH_MS,
                &[],
                &[],
            )?));
        }
        let measured = self.measure(&mut running, workers, &topic, &ends, spawned);
        let logs = running
            .iter()
            .enumerate()
            .map(|(w, worker)| format!("--- worker {w}:\n{}", worker.log_tail()))
            .collect::<Vec<_>>()
            .join("\n");
        for worker in &mut running {
            worker.kill();
        }
        drop(running);
        let measured = measured
            .map_err(|e| format!("{workers} worker(s), round {round}: {e}; logs:\n{logs}"))?;
        for dir in dirs {
            dir.remove()?;
        }
        Ok(measured)
    }

    fn measure(
        &self,
        running: &mut [Worker],
        workers: usize,
        topic: &str,
        ends: &TopicWatch,
        spawned: Instant,
    ) -> BenchResult<Measured> {
        let config = serde_json::json!({
            "connector.class": "SequenceSource",
            "tasks.max": workers.to_string(),
            "partitions": workers.to_string(),
            "topic": topic,
        })
        .to_string();
        let first = running
            .first_mut()
            .ok_or_else(|| crate::BenchError::from("no worker".to_owned()))?;
        first.create_named(CONNECTOR, &config, || Ok(()))?;
        let rest = first.rest();
        wait_spread(&rest, running, workers)?;
        let startup = spawned.elapsed();
        let pids = running
            .iter()
            .map(Worker::pid)
            .collect::<BenchResult<Vec<_>>>()?;
        let broker_pid = self
            .broker
            .pid()
            .ok_or_else(|| crate::BenchError::from("the broker is not running".to_owned()))?;
        let cpu = || -> BenchResult<f64> { pids.iter().map(|p| cpu_seconds(*p)).sum() };
        let warm = ends.end()? + WARM_UP;
        ends.wait_all(running, "the warm-up records", |end| end >= warm)?;
        let (from, cpu_from, broker_from) = (ends.end()?, cpu()?, cpu_seconds(broker_pid)?);
        let started = Instant::now();
        let goal = from + self.records;
        let to = ends.wait_all(running, "the timed records", |end| end >= goal)?;
        let elapsed = started.elapsed();
        let (cpu_to, broker_to) = (cpu()?, cpu_seconds(broker_pid)?);
        // The last look found a few more records than asked for: times and CPU for exactly
        // `records` at the rates measured over the span.
        let scale = self.records as f64 / (to - from).max(1) as f64;
        let took = elapsed.mul_f64(scale);
        let peak_rss = pids
            .iter()
            .map(|p| peak_rss(*p))
            .sum::<BenchResult<u64>>()?;
        Ok(Measured {
            took,
            cpu: (cpu_to - cpu_from) * scale,
            broker_cpu: (broker_to - broker_from) * scale,
            peak_rss,
            startup,
        })
    }
}

/// Waits until the connector's `workers` tasks are RUNNING, each on a worker of its own.
fn wait_spread(rest: &str, running: &mut [Worker], workers: usize) -> BenchResult<()> {
    let started = Instant::now();
    let path = format!("/connectors/{CONNECTOR}/status");
    loop {
        let mut last = String::new();
        if let Ok((200, body)) = http(rest, "GET", &path, "") {
            if let Ok(status) = serde_json::from_str::<serde_json::Value>(&body) {
                let tasks = status["tasks"].as_array().cloned().unwrap_or_default();
                let owners: std::collections::BTreeSet<&str> = tasks
                    .iter()
                    .filter(|t| t["state"] == "RUNNING")
                    .filter_map(|t| t["worker_id"].as_str())
                    .collect();
                if tasks.len() == workers && owners.len() == workers {
                    return Ok(());
                }
            }
            last = body;
        }
        for worker in running.iter_mut() {
            worker.check_alive()?;
        }
        if started.elapsed() > DEADLINE {
            return Err(crate::BenchError::from(format!(
                "the {workers} task(s) were not RUNNING on {workers} worker(s) within {DEADLINE:?}: \
                 {last}"
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
