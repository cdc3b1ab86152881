//! # ferry-metrics
//!
//! What a worker measures and reports: the task and connector states (`status`), and the metrics,
//! rendered with the `prometheus-client` crate in the Prometheus text exposition format (0.0.4) for
//! `GET /metrics`. Owns the series and their names; may use `ferry-offsets` (the store it meters)
//! and no other Ferry crate: the worker feeds it, `ferry-rest` renders it
//! (`ferry-plugin/tests/layering.rs` keeps it so).
//!
//! One [`Metrics`] per worker (`ferry_runtime::WorkerSettings::metrics`,
//! `ferry_runtime::Worker::metrics`). The hot
//! path never takes a registry lock: each task holds its own series (atomic counters, and short
//! per-task locks for histograms and the sliding windows of rates and averages); the registry's lock
//! is taken only when a task starts or goes away and when [`Metrics::render`] runs. Gauges that mirror
//! runtime state (outstanding records, task state) are read at render time, so they cost nothing
//! between scrapes.
//!
//! Two sets of series are rendered:
//!
//! - Ferry's own, per task (labels `connector`, `task` = the task index):
//!   `ferry_source_records_polled_total`, `ferry_source_records_acknowledged_total` (delivered, or
//!   dropped or failed under `errors.tolerance=all`), `ferry_source_records_outstanding`,
//!   `ferry_offset_commits_total`, `ferry_offset_commit_failures_total`,
//!   `ferry_offset_commit_skipped_total`, `ferry_offset_commit_last_duration_seconds`,
//!   `ferry_offset_commit_duration_seconds` (histogram of successful commits) and `ferry_task_state`
//!   (extra label `state`); per store (label `store`, from [`MeteredStore`]):
//!   `ferry_offset_store_get_duration_seconds`, `ferry_offset_store_set_duration_seconds`
//!   (histograms) and `ferry_offset_store_errors_total` (extra label `operation`).
//! - Kafka Connect's ([`connect`]), named as the Prometheus JMX exporter's usual Kafka Connect rules
//!   name its JMX beans: `kafka.connect:type=<group>,connector=<c>,task=<t>` attribute `<metric>`
//!   becomes `kafka_connect_<group>_<metric>{connector="<c>",task="<t>"}` with `-` turned into `_`
//!   (e.g. `kafka_connect_source_task_metrics_source_record_poll_total`), typed gauge as those rules
//!   type them.
//!
//! A connector's series go away when it is stopped or deleted (once its tasks have finished stopping
//! and made their final commit), so neither stale gauges nor series of removed tasks stay forever; a
//! connector started again under the same name starts its counters from 0, which Prometheus treats as
//! a counter reset. A store's series and the worker's stay for the life of the [`Metrics`].

mod connect;
pub mod status;
mod store;
mod window;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferry_offsets::AckTracker;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeGaugeValue, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub use store::MeteredStore;
use store::StoreMetrics;
use window::Window;

use crate::status::{StatusCell, TaskState};

/// The `Content-Type` of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Every metric of one worker. Thread-safe; share it as `Arc<Metrics>`.
#[derive(Default)]
pub struct Metrics {
    tasks: Mutex<BTreeMap<(String, usize), Arc<TaskMetrics>>>,
    stores: Mutex<BTreeMap<String, Arc<StoreMetrics>>>,
    worker: Arc<WorkerMetrics>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("tasks", &lock(&self.tasks).len())
            .field("stores", &lock(&self.stores).len())
            .finish()
    }
}

/// Registry locks guard plain maps that every operation leaves consistent, so a poisoned lock is used.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Upper bounds of the latency buckets, in seconds: 100 µs to 10 s covers a memory store's
/// microseconds, a file store's fsync and a Kafka round trip up to the default `offset.flush.timeout.ms`.
const LATENCY_BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// A latency histogram over [`LATENCY_BUCKETS`].
fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// Milliseconds, as Kafka Connect's `-time-ms` metrics count them (fractions kept).
fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl Metrics {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every series, in the Prometheus text exposition format 0.0.4 (serve it as [`CONTENT_TYPE`]).
    /// Families appear in a fixed order, each with its `# HELP` and `# TYPE` lines even when it has no
    /// series yet; tasks in (connector, task) order.
    pub fn render(&self) -> String {
        // Snapshot the registries, then encode without holding their locks.
        let snapshot = Snapshot {
            tasks: lock(&self.tasks).values().cloned().collect(),
            stores: lock(&self.stores).values().cloned().collect(),
            worker: self.worker.clone(),
        };
        let mut registry = Registry::default();
        registry.register_collector(Box::new(snapshot));
        let mut out = String::new();
        // Writing to a String cannot fail, and the collector fails only when its writer does.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry);
        out
    }

    /// Registers the series of task `index` of `connector`; they are removed when the returned handle
    /// is dropped. A task registered again under the same name (a restart) replaces the earlier series.
    pub fn register_task(
        self: &Arc<Self>,
        connector: &str,
        index: usize,
        acks: AckTracker,
        status: StatusCell,
    ) -> TaskSeries {
        let task = Arc::new(TaskMetrics::new(connector, index, acks, status));
        lock(&self.tasks).insert((connector.to_owned(), index), task.clone());
        TaskSeries {
            registry: self.clone(),
            key: (connector.to_owned(), index),
            task,
        }
    }

    /// A task startup finished: its sink opened and its loop began (`ok`), or it could not start
    /// (Kafka Connect's `task-startup-success-total` / `task-startup-failure-total`).
    pub fn task_startup(&self, ok: bool) {
        let w = &self.worker;
        if ok {
            w.task_startup_success.inc();
        } else {
            w.task_startup_failure.inc();
        }
        w.task_startups.record(if ok { 1.0 } else { 0.0 });
    }

    /// A connector startup finished: its instance was made and gave its task configurations (`ok`),
    /// or it failed (Kafka Connect's `connector-startup-success-total` / `-failure-total`).
    pub fn connector_startup(&self, ok: bool) {
        let w = &self.worker;
        if ok {
            w.connector_startup_success.inc();
        } else {
            w.connector_startup_failure.inc();
        }
        w.connector_startups.record(if ok { 1.0 } else { 0.0 });
    }

    /// The series of the store described as `store`, created on first use.
    fn store(&self, store: String) -> Arc<StoreMetrics> {
        lock(&self.stores)
            .entry(store.clone())
            .or_insert_with(|| Arc::new(StoreMetrics::new(store)))
            .clone()
    }
}

/// The worker's own counters (Kafka Connect's `connect-worker-metrics`).
#[derive(Debug, Default)]
struct WorkerMetrics {
    connector_startup_success: Counter,
    connector_startup_failure: Counter,
    /// 1 per successful connector startup, 0 per failed one.
    connector_startups: Window,
    task_startup_success: Counter,
    task_startup_failure: Counter,
    /// 1 per successful startup, 0 per failed one: the percentages are its average.
    task_startups: Window,
}

/// What one scrape encodes.
#[derive(Debug)]
struct Snapshot {
    tasks: Vec<Arc<TaskMetrics>>,
    stores: Vec<Arc<StoreMetrics>>,
    worker: Arc<WorkerMetrics>,
}

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        encode_tasks(&mut encoder, &self.tasks)?;
        store::encode(&mut encoder, &self.stores)?;
        connect::encode(&mut encoder, &self.tasks, &self.worker)
    }
}

/// One task's series. The task loop updates them; outstanding records and the task state are read
/// from the task's own tracker and status cell at render time.
#[derive(Debug)]
pub struct TaskMetrics {
    connector: String,
    task: String,
    acks: AckTracker,
    status: StatusCell,
    polled: Counter,
    acknowledged: Counter,
    commits: Counter,
    commit_failures: Counter,
    commits_skipped: Counter,
    commit_last_nanos: AtomicU64,
    commit_duration: Histogram,
    /// Records the sink delivered (Kafka Connect's `source-record-write-total`).
    written: Counter,
    /// Records polled, per second.
    poll_rate: Window,
    /// Records written, per second.
    write_rate: Window,
    /// Milliseconds per non-empty `poll()`.
    poll_time: Window,
    /// Records per non-empty `poll()`.
    batch_size: Window,
    /// The active (polled, not yet acknowledged) record count, sampled at each poll and delivery batch.
    active: Window,
    /// Milliseconds per successful commit.
    commit_time: Window,
    /// 1 per successful commit cycle (nothing to commit included, as Kafka Connect), 0 per failed one.
    commit_attempts: Window,
    // Kafka Connect's `task-error-metrics`.
    record_failures: Counter,
    record_errors: Counter,
    records_skipped: Counter,
    retries: Counter,
    errors_logged: Counter,
    /// Epoch milliseconds of the last failed operation; 0 before one.
    last_error_ms: AtomicU64,
}

impl TaskMetrics {
    fn new(connector: &str, index: usize, acks: AckTracker, status: StatusCell) -> Self {
        Self {
            connector: connector.to_owned(),
            task: index.to_string(),
            acks,
            status,
            polled: Counter::default(),
            acknowledged: Counter::default(),
            commits: Counter::default(),
            commit_failures: Counter::default(),
            commits_skipped: Counter::default(),
            commit_last_nanos: AtomicU64::new(0),
            commit_duration: latency_histogram(),
            written: Counter::default(),
            poll_rate: Window::default(),
            write_rate: Window::default(),
            poll_time: Window::default(),
            batch_size: Window::default(),
            active: Window::default(),
            commit_time: Window::default(),
            commit_attempts: Window::default(),
            record_failures: Counter::default(),
            record_errors: Counter::default(),
            records_skipped: Counter::default(),
            retries: Counter::default(),
            errors_logged: Counter::default(),
            last_error_ms: AtomicU64::new(0),
        }
    }

    /// `n` records came back from one `poll()` that took `elapsed`. An empty poll is not a batch
    /// (Kafka Connect times only polls that returned records, a `null` being "nothing").
    pub fn polled(&self, n: usize, elapsed: Duration) {
        if n > 0 {
            self.polled.inc_by(n as u64);
            self.poll_rate.record_many(1, n as f64);
            self.poll_time.record(millis(elapsed));
            self.batch_size.record(n as f64);
            // Kafka Connect counts a batch active from the moment it is polled.
            self.active.record((self.acks.unacked() + n) as f64);
        }
    }

    /// Samples the active record count after a batch of deliveries was acknowledged.
    pub fn sample_active(&self) {
        self.active.record(self.acks.unacked() as f64);
    }

    /// One record was acknowledged.
    pub fn acknowledged(&self) {
        self.acknowledged_many(1);
    }

    /// `n` records were acknowledged.
    pub fn acknowledged_many(&self, n: usize) {
        if n > 0 {
            self.acknowledged.inc_by(n as u64);
        }
    }

    /// `n` records were delivered by the sink (acknowledged, not dropped nor failed).
    pub fn written(&self, n: usize) {
        if n > 0 {
            self.written.inc_by(n as u64);
            self.write_rate.record_many(1, n as f64);
        }
    }

    /// A commit flushed offsets durably in `elapsed`.
    pub fn commit_succeeded(&self, elapsed: Duration) {
        self.commits.inc();
        self.commit_last_nanos.store(
            u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        self.commit_duration.observe(elapsed.as_secs_f64());
        self.commit_time.record(millis(elapsed));
        self.commit_attempts.record(1.0);
    }

    /// A commit failed or timed out.
    pub fn commit_failed(&self) {
        self.commit_failures.inc();
        self.commit_attempts.record(0.0);
    }

    /// A commit cycle found nothing to commit (a success for Kafka Connect's percentages).
    pub fn commit_skipped(&self) {
        self.commits_skipped.inc();
        self.commit_attempts.record(1.0);
    }

    /// An operation on a record failed (one try: a transform, or a delivery).
    pub fn record_failure(&self) {
        self.record_failures.inc();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.last_error_ms.store(now, Ordering::Relaxed);
    }

    /// A failed operation is tried again (`errors.retry.timeout`).
    pub fn record_retry(&self) {
        self.retries.inc();
    }

    /// A record's error was tolerated (`errors.tolerance=all`): the record is skipped.
    pub fn record_skipped(&self) {
        self.records_skipped.inc();
    }

    /// A record's error exceeded `errors.tolerance`: the task fails.
    pub fn record_error(&self) {
        self.record_errors.inc();
    }

    /// An error was logged (`errors.log.enable`).
    pub fn error_logged(&self) {
        self.errors_logged.inc();
    }

    fn labels(&self) -> [(&str, &str); 2] {
        [("connector", &self.connector), ("task", &self.task)]
    }
}

/// A task's registration: keeps its series rendered until dropped (the worker drops it with the task's
/// handle, after the task stopped).
pub struct TaskSeries {
    registry: Arc<Metrics>,
    key: (String, usize),
    task: Arc<TaskMetrics>,
}

impl TaskSeries {
    /// The series the task loop updates.
    pub fn task(&self) -> &Arc<TaskMetrics> {
        &self.task
    }
}

impl Drop for TaskSeries {
    fn drop(&mut self) {
        let mut tasks = lock(&self.registry.tasks);
        // A task of the same name started since (a restart) keeps its own series.
        if tasks
            .get(&self.key)
            .is_some_and(|t| Arc::ptr_eq(t, &self.task))
        {
            tasks.remove(&self.key);
        }
    }
}

const STATES: [TaskState; 5] = [
    TaskState::Unassigned,
    TaskState::Running,
    TaskState::Paused,
    TaskState::Failed,
    TaskState::Stopped,
];

/// Encodes one per-task counter family (`name` without `_total`: the encoder appends it).
fn task_counter(
    encoder: &mut DescriptorEncoder,
    tasks: &[Arc<TaskMetrics>],
    name: &str,
    help: &str,
    counter: impl Fn(&TaskMetrics) -> &Counter,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for t in tasks {
        counter(t).encode(family.encode_family(&t.labels())?)?;
    }
    Ok(())
}

/// Encodes one per-task gauge family.
fn task_gauge<V: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    tasks: &[Arc<TaskMetrics>],
    name: &str,
    help: &str,
    value: impl Fn(&TaskMetrics) -> V,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for t in tasks {
        family.encode_family(&t.labels())?.encode_gauge(&value(t))?;
    }
    Ok(())
}

fn encode_tasks(
    encoder: &mut DescriptorEncoder,
    tasks: &[Arc<TaskMetrics>],
) -> Result<(), std::fmt::Error> {
    task_counter(
        encoder,
        tasks,
        "ferry_source_records_polled",
        "Records returned by the source task's poll().",
        |t| &t.polled,
    )?;
    task_counter(
        encoder,
        tasks,
        "ferry_source_records_acknowledged",
        "Records acknowledged: delivered by the sink, or dropped or failed under errors.tolerance=all.",
        |t| &t.acknowledged,
    )?;
    task_gauge(
        encoder,
        tasks,
        "ferry_source_records_outstanding",
        "Records sent to the sink and not yet acknowledged.",
        |t| t.acks.unacked() as u64,
    )?;
    task_counter(
        encoder,
        tasks,
        "ferry_offset_commits",
        "Offset commits that flushed acknowledged offsets durably.",
        |t| &t.commits,
    )?;
    task_counter(
        encoder,
        tasks,
        "ferry_offset_commit_failures",
        "Offset commits that failed or timed out (their offsets are retried at the next commit).",
        |t| &t.commit_failures,
    )?;
    task_counter(
        encoder,
        tasks,
        "ferry_offset_commit_skipped",
        "Offset commit cycles with nothing newly acknowledged to commit.",
        |t| &t.commits_skipped,
    )?;
    task_gauge(
        encoder,
        tasks,
        "ferry_offset_commit_last_duration_seconds",
        "Duration of the last successful offset commit (0 before the first one).",
        |t| t.commit_last_nanos.load(Ordering::Relaxed) as f64 / 1e9,
    )?;
    let mut family = encoder.encode_descriptor(
        "ferry_offset_commit_duration_seconds",
        "Duration of successful offset commits; the average is _sum / _count.",
        None,
        MetricType::Histogram,
    )?;
    for t in tasks {
        t.commit_duration
            .encode(family.encode_family(&t.labels())?)?;
    }
    let mut family = encoder.encode_descriptor(
        "ferry_task_state",
        "The task's state: 1 for the current one (UNASSIGNED, RUNNING, PAUSED, FAILED, STOPPED), 0 for the others.",
        None,
        MetricType::Gauge,
    )?;
    for t in tasks {
        let current = t.status.get().state;
        for state in STATES {
            let label = state.to_string();
            let [connector, task] = t.labels();
            let labels = [connector, task, ("state", label.as_str())];
            family
                .encode_family(&labels)?
                .encode_gauge(&u32::from(state == current))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use super::*;

    /// Checks `text` against the Prometheus text format 0.0.4 strictly enough to catch what a scraper
    /// would refuse: every sample belongs to the family whose `# TYPE` precedes it, families are
    /// contiguous and declared once, names and label names are valid, label values are properly
    /// escaped, values parse, a series appears once, and histogram buckets are cumulative with
    /// `+Inf == _count`.
    pub fn validate(text: &str) {
        assert!(text.ends_with('\n'), "the exposition ends with a line feed");
        let mut declared: HashMap<String, String> = HashMap::new();
        let mut helped: HashSet<String> = HashSet::new();
        let mut current: Option<(String, String)> = None;
        let mut series: HashSet<String> = HashSet::new();
        let mut buckets: HashMap<String, Vec<(f64, f64)>> = HashMap::new();
        let mut counts: HashMap<String, f64> = HashMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, _) = rest.split_once(' ').expect("HELP has a text");
                assert!(valid_name(name), "HELP of an invalid name: {line}");
                assert!(helped.insert(name.to_owned()), "second HELP for {name}");
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("TYPE has a kind");
                assert!(valid_name(name), "TYPE of an invalid name: {line}");
                assert!(
                    ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                    "unknown type: {line}"
                );
                assert!(helped.contains(name), "TYPE before HELP for {name}");
                assert!(
                    declared.insert(name.to_owned(), kind.to_owned()).is_none(),
                    "family {name} declared twice (families must be contiguous)"
                );
                current = Some((name.to_owned(), kind.to_owned()));
                continue;
            }
            assert!(!line.starts_with('#'), "unexpected comment: {line}");
            assert!(!line.is_empty(), "empty line");
            let (name, labels, value) = parse_sample(line);
            let (family, kind) = current
                .as_ref()
                .unwrap_or_else(|| panic!("sample before any TYPE: {line}"));
            let suffix = name
                .strip_prefix(family.as_str())
                .unwrap_or_else(|| panic!("sample {name} outside its family {family}"));
            match kind.as_str() {
                "histogram" => assert!(
                    ["_bucket", "_sum", "_count"].contains(&suffix),
                    "histogram sample {name}"
                ),
                _ => assert_eq!(suffix, "", "sample {name} in family {family}"),
            }
            let mut key_labels: Vec<(String, String)> = labels.clone();
            key_labels.retain(|(k, _)| k != "le");
            let id = format!("{family}{key_labels:?}");
            if kind == "counter" {
                assert!(value >= 0.0, "negative counter: {line}");
            }
            match suffix {
                "_bucket" => {
                    let le = labels
                        .iter()
                        .find(|(k, _)| k == "le")
                        .unwrap_or_else(|| panic!("bucket without le: {line}"));
                    let bound = if le.1 == "+Inf" {
                        f64::INFINITY
                    } else {
                        le.1.parse().expect("le parses")
                    };
                    buckets.entry(id.clone()).or_default().push((bound, value));
                }
                "_count" => {
                    counts.insert(id.clone(), value);
                }
                _ => {}
            }
            assert!(
                series.insert(format!("{name}{labels:?}")),
                "duplicate series: {line}"
            );
        }
        for (id, list) in &buckets {
            assert!(
                list.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
                "{id}: buckets not increasing and cumulative: {list:?}"
            );
            let last = list.last().expect("at least one bucket");
            assert_eq!(last.0, f64::INFINITY, "{id}: the last bucket is +Inf");
            assert_eq!(Some(&last.1), counts.get(id), "{id}: +Inf != _count");
        }
    }

    fn valid_name(name: &str) -> bool {
        let mut chars = name.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    }

    /// `name{k="v",...} value`, unescaping label values; panics on anything malformed.
    fn parse_sample(line: &str) -> (String, Vec<(String, String)>, f64) {
        let name_end = line
            .find(['{', ' '])
            .unwrap_or_else(|| panic!("no value: {line}"));
        let name = &line[..name_end];
        assert!(valid_name(name), "invalid metric name: {line}");
        let mut rest = &line[name_end..];
        let mut labels = Vec::new();
        if let Some(mut s) = rest.strip_prefix('{') {
            loop {
                if let Some(after) = s.strip_prefix('}') {
                    rest = after;
                    break;
                }
                let eq = s
                    .find('=')
                    .unwrap_or_else(|| panic!("label without =: {line}"));
                let key = &s[..eq];
                assert!(
                    valid_name(key) && !key.contains(':'),
                    "invalid label name {key:?}: {line}"
                );
                s = s[eq + 1..]
                    .strip_prefix('"')
                    .unwrap_or_else(|| panic!("label value not quoted: {line}"));
                let mut value = String::new();
                let mut chars = s.char_indices();
                let end = loop {
                    match chars.next() {
                        None => panic!("no closing quote: {line}"),
                        Some((_, '\\')) => match chars.next() {
                            Some((_, '\\')) => value.push('\\'),
                            Some((_, '"')) => value.push('"'),
                            Some((_, 'n')) => value.push('\n'),
                            other => panic!("invalid escape {other:?}: {line}"),
                        },
                        Some((i, '"')) => break i,
                        Some((_, c)) => value.push(c),
                    }
                };
                labels.push((key.to_owned(), value));
                s = &s[end + 1..];
                if let Some(after) = s.strip_prefix(',') {
                    s = after;
                } else {
                    assert!(s.starts_with('}'), "expected , or }} after a label: {line}");
                }
            }
        }
        let value = rest
            .strip_prefix(' ')
            .unwrap_or_else(|| panic!("one space before the value: {line}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("value {v:?} does not parse: {line}")),
        };
        (name.to_owned(), labels, value)
    }

    fn value_of(text: &str, series: &str) -> String {
        let prefix = format!("{series} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no series {series} in\n{text}"))
            .to_owned()
    }

    #[test]
    fn an_empty_registry_renders_every_family_header() {
        let text = Metrics::new().render();
        validate(&text);
        for family in [
            "ferry_source_records_polled_total counter",
            "ferry_source_records_acknowledged_total counter",
            "ferry_source_records_outstanding gauge",
            "ferry_offset_commits_total counter",
            "ferry_offset_commit_failures_total counter",
            "ferry_offset_commit_skipped_total counter",
            "ferry_offset_commit_last_duration_seconds gauge",
            "ferry_offset_commit_duration_seconds histogram",
            "ferry_task_state gauge",
            "ferry_offset_store_get_duration_seconds histogram",
            "ferry_offset_store_set_duration_seconds histogram",
            "ferry_offset_store_errors_total counter",
        ] {
            assert!(
                text.lines().any(|l| l == format!("# TYPE {family}")),
                "missing {family} in\n{text}"
            );
        }
    }

    #[test]
    fn task_series_render_and_go_away_when_dropped() {
        let metrics = Arc::new(Metrics::new());
        let acks = AckTracker::new();
        let status = StatusCell::new();
        // A connector name that needs escaping.
        let series = metrics.register_task("a\"b\\c", 0, acks.clone(), status.clone());
        let other = metrics.register_task("z", 1, AckTracker::new(), StatusCell::new());
        let t = series.task();
        t.polled(3, Duration::from_millis(4));
        t.polled(0, Duration::ZERO);
        let first = acks.submit(None, None);
        let _second = acks.submit(None, None);
        assert!(first.ack());
        t.acknowledged();
        t.commit_succeeded(Duration::from_millis(20));
        t.commit_succeeded(Duration::from_millis(10));
        t.commit_failed();
        t.commit_skipped();
        status.set(TaskState::Running);

        let text = metrics.render();
        validate(&text);
        let l = r#"connector="a\"b\\c",task="0""#;
        assert_eq!(
            value_of(&text, &format!("ferry_source_records_polled_total{{{l}}}")),
            "3"
        );
        assert_eq!(
            value_of(
                &text,
                &format!("ferry_source_records_acknowledged_total{{{l}}}")
            ),
            "1"
        );
        assert_eq!(
            value_of(&text, &format!("ferry_source_records_outstanding{{{l}}}")),
            "1"
        );
        assert_eq!(
            value_of(&text, &format!("ferry_offset_commits_total{{{l}}}")),
            "2"
        );
        assert_eq!(
            value_of(&text, &format!("ferry_offset_commit_failures_total{{{l}}}")),
            "1"
        );
        assert_eq!(
            value_of(&text, &format!("ferry_offset_commit_skipped_total{{{l}}}")),
            "1"
        );
        assert_eq!(
            value_of(
                &text,
                &format!("ferry_offset_commit_last_duration_seconds{{{l}}}")
            ),
            "0.01"
        );
        assert_eq!(
            value_of(
                &text,
                &format!("ferry_offset_commit_duration_seconds_count{{{l}}}")
            ),
            "2"
        );
        assert_eq!(
            value_of(
                &text,
                &format!("ferry_offset_commit_duration_seconds_sum{{{l}}}")
            ),
            "0.03"
        );
        assert_eq!(
            value_of(&text, &format!("ferry_task_state{{{l},state=\"RUNNING\"}}")),
            "1"
        );
        assert_eq!(
            value_of(&text, &format!("ferry_task_state{{{l},state=\"FAILED\"}}")),
            "0"
        );
        // Tasks render in (connector, task) order.
        let a = text.find(r#"polled_total{connector="a"#).expect("a");
        let z = text.find(r#"polled_total{connector="z""#).expect("z");
        assert!(a < z);

        drop(series);
        let text = metrics.render();
        validate(&text);
        assert!(!text.contains(r#"connector="a"#), "{text}");
        assert!(text.contains(r#"connector="z""#));
        drop(other);
        assert!(!metrics.render().contains("connector="));
    }

    #[test]
    fn a_restarted_task_keeps_its_series_when_the_old_one_goes_away() {
        let metrics = Arc::new(Metrics::new());
        let old = metrics.register_task("c", 0, AckTracker::new(), StatusCell::new());
        old.task().polled(5, Duration::ZERO);
        let new = metrics.register_task("c", 0, AckTracker::new(), StatusCell::new());
        new.task().polled(1, Duration::ZERO);
        drop(old);
        let text = metrics.render();
        assert_eq!(
            value_of(
                &text,
                r#"ferry_source_records_polled_total{connector="c",task="0"}"#
            ),
            "1"
        );
        drop(new);
        assert!(!metrics.render().contains("connector="));
    }

    #[test]
    fn the_validator_rejects_malformed_output() {
        let bad = [
            "m 1\n",                                         // no TYPE
            "# HELP m h\n# TYPE m gauge\nm{l=\"a\"b\"} 1\n", // unescaped quote
            "# HELP m h\n# TYPE m gauge\nm{l=\"a\\q\"} 1\n", // bad escape
            "# HELP m h\n# TYPE m gauge\nm x\n",             // bad value
            "# HELP m h\n# TYPE m gauge\nm 1\nm 2\n",        // duplicate series
            "# HELP m h\n# TYPE m counter\nm_total 1\n",     // counter named off-family
            "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",
            "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 1\n",
        ];
        for text in bad {
            let result = std::panic::catch_unwind(|| validate(text));
            assert!(result.is_err(), "accepted:\n{text}");
        }
    }
}
