//! The worker's metrics, rendered in the Prometheus text exposition format (0.0.4) for `GET /metrics`.
//!
//! One [`Metrics`] per worker ([`crate::WorkerSettings::metrics`], [`crate::Worker::metrics`]). The hot
//! path never takes a lock: each task holds its own series (relaxed atomic counters); the registry's
//! lock is taken only when a task starts or goes away and when [`Metrics::render`] runs. Gauges that
//! mirror runtime state (outstanding records, task state) are read at render time, so they cost
//! nothing between scrapes.
//!
//! Per task (labels `connector`, `task` = the task index):
//! - `ferry_source_records_polled_total` (counter): records returned by `poll()`.
//! - `ferry_source_records_acknowledged_total` (counter): records acknowledged — delivered, or dropped
//!   or failed under `errors.tolerance=all`; their offsets may be committed.
//! - `ferry_source_records_outstanding` (gauge): records sent and not yet acknowledged.
//! - `ferry_offset_commits_total` (counter): commits that flushed offsets durably.
//! - `ferry_offset_commit_failures_total` (counter): commits that failed or timed out (retried later).
//! - `ferry_offset_commit_skipped_total` (counter): commit cycles with nothing new to commit.
//! - `ferry_offset_commit_last_duration_seconds` (gauge): the last successful commit; 0 before one.
//! - `ferry_offset_commit_duration_seconds` (histogram): successful commits (as Kafka Connect's
//!   `offset-commit-avg-time-ms`, failures are not timed); average = `_sum / _count`.
//! - `ferry_task_state` (gauge, extra label `state`): 1 for the task's current state, 0 for the others.
//!
//! Per store (label `store` = the store's description), from [`MeteredStore`]:
//! `ferry_offset_store_get_duration_seconds` and `ferry_offset_store_set_duration_seconds`
//! (histograms) and `ferry_offset_store_errors_total` (counter, extra label `operation`).
//!
//! A connector's series go away when it is stopped or deleted (once its tasks have finished stopping
//! and made their final commit), so neither stale gauges nor series of removed tasks stay forever; a
//! connector started again under the same name starts its counters from 0, which Prometheus treats as
//! a counter reset. A store's series stay for the life of the [`Metrics`].

mod store;
mod text;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ferry_offsets::AckTracker;

pub use store::MeteredStore;
use store::StoreMetrics;
use text::{Histogram, Kind};

use crate::status::{StatusCell, TaskState};

/// The `Content-Type` of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Every metric of one worker. Thread-safe; share it as `Arc<Metrics>`.
#[derive(Default)]
pub struct Metrics {
    tasks: Mutex<BTreeMap<(String, usize), Arc<TaskMetrics>>>,
    stores: Mutex<BTreeMap<String, Arc<StoreMetrics>>>,
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

impl Metrics {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every series, in the Prometheus text exposition format 0.0.4 (serve it as [`CONTENT_TYPE`]).
    /// Families appear in a fixed order, each with its `# HELP` and `# TYPE` lines even when it has no
    /// series yet; tasks in (connector, task) order.
    pub fn render(&self) -> String {
        // Snapshot the registries, then format without holding their locks.
        let tasks: Vec<Arc<TaskMetrics>> = lock(&self.tasks).values().cloned().collect();
        let stores: Vec<Arc<StoreMetrics>> = lock(&self.stores).values().cloned().collect();
        let mut out = String::with_capacity(2048 + tasks.len() * 4096 + stores.len() * 3072);
        render_tasks(&mut out, &tasks);
        store::render(&mut out, &stores);
        out
    }

    /// Registers the series of task `index` of `connector`; they are removed when the returned handle
    /// is dropped. A task registered again under the same name (a restart) replaces the earlier series.
    pub(crate) fn register_task(
        self: &Arc<Self>,
        connector: &str,
        index: usize,
        acks: AckTracker,
        status: StatusCell,
    ) -> TaskSeries {
        let task = Arc::new(TaskMetrics {
            connector: connector.to_owned(),
            task: index.to_string(),
            acks,
            status,
            polled: AtomicU64::new(0),
            acknowledged: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            commit_failures: AtomicU64::new(0),
            commits_skipped: AtomicU64::new(0),
            commit_last_nanos: AtomicU64::new(0),
            commit_duration: Histogram::default(),
        });
        lock(&self.tasks).insert((connector.to_owned(), index), task.clone());
        TaskSeries {
            registry: self.clone(),
            key: (connector.to_owned(), index),
            task,
        }
    }

    /// The series of the store described as `store`, created on first use.
    fn store(&self, store: String) -> Arc<StoreMetrics> {
        lock(&self.stores)
            .entry(store.clone())
            .or_insert_with(|| Arc::new(StoreMetrics::new(store)))
            .clone()
    }
}

/// One task's series. The task loop updates them with relaxed atomic adds; outstanding records and the
/// task state are read from the task's own tracker and status cell at render time.
#[derive(Debug)]
pub(crate) struct TaskMetrics {
    connector: String,
    task: String,
    acks: AckTracker,
    status: StatusCell,
    polled: AtomicU64,
    acknowledged: AtomicU64,
    commits: AtomicU64,
    commit_failures: AtomicU64,
    commits_skipped: AtomicU64,
    commit_last_nanos: AtomicU64,
    commit_duration: Histogram,
}

impl TaskMetrics {
    /// `n` records came back from one `poll()`.
    pub(crate) fn polled(&self, n: usize) {
        if n > 0 {
            self.polled.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// One record was acknowledged.
    pub(crate) fn acknowledged(&self) {
        self.acknowledged_many(1);
    }

    /// `n` records were acknowledged.
    pub(crate) fn acknowledged_many(&self, n: usize) {
        if n > 0 {
            self.acknowledged.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// A commit flushed offsets durably in `elapsed`.
    pub(crate) fn commit_succeeded(&self, elapsed: Duration) {
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.commit_last_nanos
            .store(text::nanos(elapsed), Ordering::Relaxed);
        self.commit_duration.observe(elapsed);
    }

    /// A commit failed or timed out.
    pub(crate) fn commit_failed(&self) {
        self.commit_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// A commit cycle found nothing to commit.
    pub(crate) fn commit_skipped(&self) {
        self.commits_skipped.fetch_add(1, Ordering::Relaxed);
    }

    fn labels(&self) -> [(&str, &str); 2] {
        [("connector", &self.connector), ("task", &self.task)]
    }
}

/// A task's registration: keeps its series rendered until dropped (the worker drops it with the task's
/// handle, after the task stopped).
pub(crate) struct TaskSeries {
    registry: Arc<Metrics>,
    key: (String, usize),
    task: Arc<TaskMetrics>,
}

impl TaskSeries {
    /// The series the task loop updates.
    pub(crate) fn task(&self) -> &Arc<TaskMetrics> {
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

/// Writes one per-task family: its header, then one sample per task.
fn task_family(
    out: &mut String,
    tasks: &[Arc<TaskMetrics>],
    name: &str,
    kind: Kind,
    help: &str,
    value: impl Fn(&TaskMetrics) -> u64,
) {
    text::header(out, name, kind, help);
    for t in tasks {
        text::sample(out, name, "", &t.labels(), None, value(t));
    }
}

fn render_tasks(out: &mut String, tasks: &[Arc<TaskMetrics>]) {
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    task_family(
        out,
        tasks,
        "ferry_source_records_polled_total",
        Kind::Counter,
        "Records returned by the source task's poll().",
        |t| load(&t.polled),
    );
    task_family(
        out,
        tasks,
        "ferry_source_records_acknowledged_total",
        Kind::Counter,
        "Records acknowledged: delivered by the sink, or dropped or failed under errors.tolerance=all.",
        |t| load(&t.acknowledged),
    );
    task_family(
        out,
        tasks,
        "ferry_source_records_outstanding",
        Kind::Gauge,
        "Records sent to the sink and not yet acknowledged.",
        |t| t.acks.unacked() as u64,
    );
    task_family(
        out,
        tasks,
        "ferry_offset_commits_total",
        Kind::Counter,
        "Offset commits that flushed acknowledged offsets durably.",
        |t| load(&t.commits),
    );
    task_family(
        out,
        tasks,
        "ferry_offset_commit_failures_total",
        Kind::Counter,
        "Offset commits that failed or timed out (their offsets are retried at the next commit).",
        |t| load(&t.commit_failures),
    );
    task_family(
        out,
        tasks,
        "ferry_offset_commit_skipped_total",
        Kind::Counter,
        "Offset commit cycles with nothing newly acknowledged to commit.",
        |t| load(&t.commits_skipped),
    );

    let name = "ferry_offset_commit_last_duration_seconds";
    text::header(
        out,
        name,
        Kind::Gauge,
        "Duration of the last successful offset commit (0 before the first one).",
    );
    for t in tasks {
        let last = text::seconds(load(&t.commit_last_nanos));
        text::sample(out, name, "", &t.labels(), None, last);
    }

    let name = "ferry_offset_commit_duration_seconds";
    text::header(
        out,
        name,
        Kind::Histogram,
        "Duration of successful offset commits; the average is _sum / _count.",
    );
    for t in tasks {
        t.commit_duration.render(out, name, &t.labels());
    }

    let name = "ferry_task_state";
    text::header(
        out,
        name,
        Kind::Gauge,
        "The task's state: 1 for the current one (UNASSIGNED, RUNNING, PAUSED, FAILED, STOPPED), 0 for the others.",
    );
    for t in tasks {
        let current = t.status.get().state;
        for state in STATES {
            let label = state.to_string();
            let value = u8::from(state == current);
            text::sample(out, name, "", &t.labels(), Some(("state", &label)), value);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::{HashMap, HashSet};

    use super::*;

    /// Checks `text` against the Prometheus text format 0.0.4 strictly enough to catch what a scraper
    /// would refuse: every sample belongs to the family whose `# TYPE` precedes it, families are
    /// contiguous and declared once, names and label names are valid, label values are properly
    /// escaped, values parse, a series appears once, and histogram buckets are cumulative with
    /// `+Inf == _count`.
    pub(crate) fn validate(text: &str) {
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
        t.polled(3);
        t.polled(0);
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
        old.task().polled(5);
        let new = metrics.register_task("c", 0, AckTracker::new(), StatusCell::new());
        new.task().polled(1);
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
