//! What one run of the suite measured: the data behind `docs/benchmarks.md` and its plot, also written
//! as JSON so a report can be re-rendered or compared without running again.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The timings of one contender in one case.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stats {
    /// Every timed run, in seconds, in the order they ran.
    pub samples: Vec<f64>,
}

impl Stats {
    /// Stats over `samples`.
    pub fn from_durations(samples: &[Duration]) -> Self {
        Self {
            samples: samples.iter().map(Duration::as_secs_f64).collect(),
        }
    }

    /// The median run, in seconds (the mean of the middle two for an even count).
    pub fn median(&self) -> f64 {
        let mut sorted = self.samples.clone();
        sorted.sort_by(f64::total_cmp);
        match sorted.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => sorted[n / 2],
            n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
        }
    }

    /// The fastest run, in seconds.
    pub fn min(&self) -> f64 {
        self.samples.iter().copied().fold(f64::NAN, f64::min)
    }

    /// The slowest run, in seconds.
    pub fn max(&self) -> f64 {
        self.samples.iter().copied().fold(f64::NAN, f64::max)
    }
}

/// How much work one timed run did, for rates (records/s, bytes/s).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Work {
    /// Records moved (0 when not applicable).
    pub records: u64,
    /// Bytes moved (input bytes for the data path; 0 when not applicable).
    pub bytes: u64,
}

/// One contender of a case.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Contender {
    /// Who ran, e.g. "Ferry FileStore" or "fdatasync floor".
    pub name: String,
    /// Its timed runs.
    pub stats: Stats,
    /// The work of each run, when the case compares rates.
    pub work: Option<Work>,
    /// A measured quantity that is not a time (peak RSS bytes for memory cases).
    pub quantity: Option<f64>,
    /// What its own process cost, when the contender ran as a process the bench watched (the worker
    /// processes of the Kafka Connect comparison).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessCost>,
}

/// A worker process's costs, per timed run (in run order) and per SIGKILL, read from `/proc/<pid>`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProcessCost {
    /// CPU seconds (user + system, every thread) the worker spent while it moved the input: from the
    /// connector creation request until the last record was in the topic.
    pub cpu_seconds: Vec<f64>,
    /// CPU seconds the worker spent before that request (its own start-up).
    pub ready_cpu_seconds: Vec<f64>,
    /// Peak resident memory (`VmHWM`) of the worker once the last record was in the topic, in bytes.
    pub peak_rss_bytes: Vec<u64>,
    /// Seconds from spawning the worker to the first record in the topic, the connector creation
    /// request included.
    pub startup_seconds: Vec<f64>,
    /// Kafka Connect only: the part of each start-up its log gives to scanning for plugins
    /// (`Scanning plugins with … took N ms`, summed), which `plugin.discovery=service_load` shortens.
    #[serde(default)]
    pub plugin_scan_seconds: Vec<f64>,
    /// The worker's `offset.flush.interval.ms` in every run.
    pub flush_interval_ms: u64,
    /// Per SIGKILL of the worker mid-file: records in the topic beyond the input's lines once the
    /// restarted worker reached the end of the file.
    pub duplicates_per_kill: Vec<u64>,
    /// Per SIGKILL: the records in the topic when it was killed.
    pub records_at_kill: Vec<u64>,
    /// Input lines missing from the topic after a kill and restart, summed over the kills (must be 0).
    pub lost: u64,
    /// Kills that could not be measured, and why.
    pub notes: Vec<String>,
    /// Scale-out runs: the tasks the contender's workers ran (one per worker).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tasks: usize,
    /// Scale-out runs: the broker's CPU seconds over the same span as `cpu_seconds`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub broker_cpu_seconds: Vec<f64>,
}

impl ProcessCost {
    /// The median of `values` (NaN when empty).
    pub fn median(values: &[f64]) -> f64 {
        Stats {
            samples: values.to_vec(),
        }
        .median()
    }
}

impl Contender {
    /// A timed contender.
    pub fn timed(name: impl Into<String>, samples: &[Duration], work: Option<Work>) -> Self {
        Self {
            name: name.into(),
            stats: Stats::from_durations(samples),
            work,
            quantity: None,
            process: None,
        }
    }
}

/// One case: several contenders doing the same work, the first being Ferry and `reference` naming the
/// one ratios are taken against.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Case {
    /// Short name, e.g. "store 1 000 000, 100 changed".
    pub name: String,
    /// The name of the contender ratios are computed against.
    pub reference: String,
    /// Every contender, Ferry first.
    pub contenders: Vec<Contender>,
    /// Store size for flush cases (the plot's x axis).
    pub store_size: Option<u64>,
    /// Changed partitions per flush for flush cases.
    pub changed: Option<u64>,
}

impl Case {
    /// Ferry against one reference, with the samples of each (`samples[0]` Ferry's) and the work of
    /// every run.
    pub fn pair(
        name: String,
        ferry: &str,
        reference: &str,
        samples: &[Vec<Duration>],
        work: Work,
    ) -> Self {
        let contender = |who: &str, i: usize| {
            Contender::timed(
                who,
                samples.get(i).map_or(&[][..], Vec::as_slice),
                Some(work),
            )
        };
        Self {
            name,
            reference: reference.to_owned(),
            contenders: vec![contender(ferry, 0), contender(reference, 1)],
            store_size: None,
            changed: None,
        }
    }

    /// The contender called `name`.
    pub fn contender(&self, name: &str) -> Option<&Contender> {
        self.contenders.iter().find(|c| c.name == name)
    }

    /// `name`'s median time divided by the reference's (how many times slower; < 1 is faster).
    pub fn time_ratio(&self, name: &str) -> Option<f64> {
        let c = self.contender(name)?;
        let r = self.contender(&self.reference)?;
        Some(c.stats.median() / r.stats.median())
    }
}

/// The machine the run measured, as the report states it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    /// CPU model from /proc/cpuinfo.
    pub cpu: String,
    /// Logical CPUs available to the process.
    pub cpus: usize,
    /// Total memory from /proc/meminfo, in bytes.
    pub memory_bytes: u64,
    /// Kernel release.
    pub kernel: String,
    /// The file system type and device of the directory the benches wrote to.
    pub disk: String,
    /// Load average when the run started.
    pub load_at_start: String,
    /// `rustc --version` of the toolchain that built the bench.
    pub rustc: String,
    /// When the run started (UTC, RFC 3339).
    pub started_at: String,
    /// The git commit measured, when known.
    pub commit: String,
}

/// Everything one run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    /// The machine.
    pub machine: Machine,
    /// Whether sizes were shrunk (`--quick`): such a run is a smoke test, not a result.
    pub quick: bool,
    /// Flush latency per store size and changed count.
    pub flush: Vec<Case>,
    /// Loading every offset at start-up.
    pub startup: Vec<Case>,
    /// `offsets()` after load.
    pub lookup: Vec<Case>,
    /// The data path, with and without Ferry.
    pub end_to_end: Vec<Case>,
    /// Exactly once against at least once, Ferry and Kafka Connect, worker processes.
    #[serde(default)]
    pub exactly_once: Vec<Case>,
    /// Peak RSS with the offsets loaded.
    pub memory: Vec<Case>,
    /// Distributed scale-out: one worker and one task against three of each, SequenceSource → Kafka.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scale_out: Vec<Case>,
    /// Scaling curves (tasks, partitions, stored offsets).
    #[serde(default)]
    pub scaling: Vec<Curve>,
    /// Duplicates after SIGKILL, per commit mode.
    #[serde(default)]
    pub crash: Vec<Crash>,
    /// PostgreSQL change data capture into Kafka: Ferry against Debezium 3.6 in Kafka Connect 4.4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdc: Option<Cdc>,
    /// Sections run later with `--only` and merged into this file: which, when, on which commit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged: Vec<String>,
    /// Sections that did not run, and why (e.g. no broker).
    pub skipped: Vec<String>,
    /// Wall time of the whole run, in seconds.
    pub wall_seconds: f64,
}

#[cfg(test)]
impl Machine {
    /// A made-up machine for tests, at `commit`.
    pub fn for_tests(commit: &str) -> Self {
        Self {
            cpu: "test CPU".into(),
            cpus: 2,
            memory_bytes: 1 << 30,
            kernel: "k".into(),
            disk: "ext4".into(),
            load_at_start: "0".into(),
            rustc: "rustc".into(),
            started_at: "now".into(),
            commit: commit.into(),
        }
    }
}

impl Results {
    /// A run on `machine` that has measured nothing yet.
    pub fn empty(machine: Machine, quick: bool) -> Self {
        Self {
            machine,
            quick,
            flush: Vec::new(),
            startup: Vec::new(),
            lookup: Vec::new(),
            end_to_end: Vec::new(),
            exactly_once: Vec::new(),
            memory: Vec::new(),
            scaling: Vec::new(),
            scale_out: Vec::new(),
            crash: Vec::new(),
            cdc: None,
            merged: Vec::new(),
            skipped: Vec::new(),
            wall_seconds: 0.0,
        }
    }
}

/// What a curve's y values are, for axis labels and tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unit {
    /// Records per second.
    PerSecond,
    /// Seconds.
    Seconds,
    /// Bytes.
    Bytes,
}

/// One line of a scaling plot: (x, y) points.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Series {
    /// What was measured, e.g. "SequenceSource → discard".
    pub name: String,
    /// The points, by increasing x.
    pub points: Vec<(f64, f64)>,
}

/// One scaling plot (`benchmarks-<id>.png`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Curve {
    /// File name part and anchor, e.g. "tasks".
    pub id: String,
    /// The plot's title.
    pub title: String,
    /// What x counts.
    pub x_label: String,
    /// What y is.
    pub unit: Unit,
    /// Whether x is drawn on a log scale.
    pub log_x: bool,
    /// Whether y is drawn on a log scale.
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
}

/// Duplicates after SIGKILLs of a real `ferry standalone` process, one commit mode.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Crash {
    /// `offset.flush.interval.ms` of the worker (0: continuous commits).
    pub flush_interval_ms: u64,
    /// `offset.flush.strict.bound` of the worker (each poll waits for the last batch's commit).
    #[serde(default)]
    pub strict_bound: bool,
    /// Seconds of each uninterrupted run over the whole input (spawn → the last line in the sink).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clean_run_seconds: Vec<f64>,
    /// Bytes of the input file.
    #[serde(default)]
    pub input_bytes: u64,
    /// Lines of the input file.
    pub input_lines: u64,
    /// The connector's `batch.size` (records per poll): the target's bound per kill.
    pub batch_size: u64,
    /// Lines written again by the run that followed each kill, in kill order.
    pub duplicates_per_kill: Vec<u64>,
    /// Input lines missing from the sink at the end (must be 0).
    pub lost: u64,
    /// Wall time of the whole mode (every run), in seconds.
    pub seconds: f64,
}

/// The CDC comparison: one table and one change stream through each contender in turn.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cdc {
    /// Rows of the table when the connector starts (its initial snapshot).
    pub snapshot_rows: u64,
    /// Rows inserted by the writers while the connector streams.
    pub inserts: u64,
    /// Rows updated by the writers (one change each).
    pub updates: u64,
    /// Writer connections, concurrently.
    pub writers: u64,
    /// Rows per writer transaction.
    pub rows_per_transaction: u64,
    /// Single-row transactions of the paced latency phase.
    pub latency_rows: u64,
    /// Their rate, rows per second.
    pub latency_rate: u64,
    /// Every contender, Ferry first.
    pub contenders: Vec<CdcContender>,
}

/// What one contender of the CDC comparison measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CdcContender {
    /// Who ran.
    pub name: String,
    /// From the connector creation request to the snapshot's last row in the topic.
    pub snapshot_seconds: f64,
    /// From the connector creation request to the snapshot's first row in the topic (slot creation
    /// and the connector's start).
    #[serde(default)]
    pub snapshot_first_seconds: f64,
    /// Worker CPU seconds over the snapshot.
    pub snapshot_cpu_seconds: f64,
    /// From the writers' first commit to their last change in the topic.
    pub streaming_seconds: f64,
    /// From the writers' first commit to their last commit (how fast the database took the stream).
    pub writers_seconds: f64,
    /// Worker CPU seconds over the streaming span.
    pub streaming_cpu_seconds: f64,
    /// Mean key + value bytes of the stream's last 1000 change records in the topic.
    #[serde(default)]
    pub record_bytes: f64,
    /// CPU seconds over the same span of the slot's walsender (PostgreSQL decoding the WAL for the
    /// connector) and of the broker: the machine's other work on the stream (NaN when unknown).
    #[serde(default)]
    pub walsender_cpu_seconds: f64,
    /// … of the broker.
    #[serde(default)]
    pub broker_cpu_seconds: f64,
    /// Commit → record read from Kafka over the latency rows, median, in milliseconds.
    pub latency_p50_ms: f64,
    /// … 99th percentile (nearest rank).
    pub latency_p99_ms: f64,
    /// … the slowest row.
    pub latency_max_ms: f64,
    /// `VmHWM` of the worker process at the end, in bytes.
    pub peak_rss_bytes: u64,
}

/// The `q` quantile (0..=1) of `sorted`, nearest rank (NaN when empty).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return f64::NAN;
    }
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    sorted[rank - 1]
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
