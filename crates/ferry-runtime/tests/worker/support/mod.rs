//! Shared by the worker tests: a scriptable connector and task ([`Probe`]), a sink whose deliveries the
//! test controls ([`TestSink`]), a failure-injecting store ([`TestStore`]), a global log capture, and
//! deadline-bounded polling helpers.

#![allow(dead_code)]

mod sink;
mod store;
mod task;

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use ferry_api::{
    Config, ConnectMap, OffsetStorageReader, SourceOffset, SourcePartition, SourceRecord, Value,
};
use ferry_offsets::{MemoryStore, StoreOffsetReader};
use ferry_runtime::{ConnectorSpec, TaskState, TaskStatus, Worker, WorkerSettings};
use serde_json::json;

pub use sink::{Plan, TestSink};
pub use store::{Hang, TestStore};
pub use task::{Gate, Probe, TestConnector};

/// How long any awaited condition may take before the test fails. Generous: the machine may be busy.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// A lock that ignores poisoning (a panicking test must not hide its first failure behind others).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

// ---------------------------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------------------------

/// `{"p": name}`.
pub fn partition(name: &str) -> SourcePartition {
    ConnectMap::new().with("p", name).expect("valid partition")
}

/// `{"n": n}`.
pub fn offset(n: i64) -> SourceOffset {
    ConnectMap::new().with("n", n).expect("valid offset")
}

/// Record `n` of partition `{"p": p}`, offset `{"n": n}`; its key ([`key_of`]) is `"p:n"`.
pub fn record(p: &str, n: i64) -> SourceRecord {
    record_in(partition(p), p, n)
}

/// A record with any partition map, offset `{"n": n}`, keyed `"label:n"`.
pub fn record_in(source_partition: SourcePartition, label: &str, n: i64) -> SourceRecord {
    SourceRecord::from_maps(
        Some(source_partition),
        Some(offset(n)),
        "test",
        Some(json!({"p": label, "n": n})),
    )
}

/// `"p:n"`, from the record's value.
pub fn key_of(record: &SourceRecord) -> String {
    let value = record.value.as_ref().expect("test records have a value");
    let p = value.get("p").and_then(|v| v.as_str()).expect("value.p");
    let n = value.get("n").and_then(|v| v.as_i64()).expect("value.n");
    format!("{p}:{n}")
}

/// `"p:1".."p:n"`-keyed records of one partition.
pub fn records(p: &str, range: std::ops::RangeInclusive<i64>) -> Vec<SourceRecord> {
    range.map(|n| record(p, n)).collect()
}

// ---------------------------------------------------------------------------------------------
// Waiting
// ---------------------------------------------------------------------------------------------

/// Waits until `cond` holds; fails the test after [`DEADLINE`].
pub async fn eventually(what: &str, cond: impl FnMut() -> bool) {
    ferry_testkit::eventually(what, DEADLINE, cond).await;
}

/// [`eventually`] for a condition that must be awaited.
pub async fn eventually_async<F, Fut>(what: &str, cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    ferry_testkit::eventually_async(what, DEADLINE, cond).await;
}

/// Awaits `fut`, failing the test if it takes longer than [`DEADLINE`] (a hang is a bug, not a wait).
pub async fn bounded<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {DEADLINE:?}"))
}

// ---------------------------------------------------------------------------------------------
// Offsets as committed
// ---------------------------------------------------------------------------------------------

/// The committed `n` of partition `{"p": p}` of `connector`, read back through a `StoreOffsetReader`.
pub async fn committed(store: &MemoryStore, connector: &str, p: &str) -> Option<i64> {
    committed_in(store, connector, &partition(p)).await
}

/// The committed `n` of any partition map.
pub async fn committed_in(
    store: &MemoryStore,
    connector: &str,
    source_partition: &SourcePartition,
) -> Option<i64> {
    let reader = StoreOffsetReader::new(connector, Arc::new(store.clone()));
    let found = reader
        .offset(source_partition)
        .await
        .expect("reading committed offsets");
    found.map(|o| {
        o.get("n")
            .and_then(Value::as_i64)
            .expect("test offsets have an integer n")
    })
}

/// Waits until partition `p` of `connector` has committed offset `n`.
pub async fn wait_committed(store: &MemoryStore, connector: &str, p: &str, n: i64) {
    let what = format!("{connector} partition {p} committed at {n}");
    let mut last = None;
    let deadline = Instant::now() + DEADLINE;
    loop {
        let now = committed(store, connector, p).await;
        if now == Some(n) {
            return;
        }
        if last != now {
            // Offsets never go backwards nor jump past what the test expects.
            assert!(
                now.is_none_or(|c| c < n),
                "{what}: found {now:?}, which is past {n}"
            );
            last = now;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {DEADLINE:?} waiting for: {what} (last seen {last:?})"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// The worker
// ---------------------------------------------------------------------------------------------

/// Worker settings in milliseconds: flush interval, flush timeout, graceful shutdown timeout.
pub fn settings(interval_ms: u64, timeout_ms: u64, graceful_ms: u64) -> WorkerSettings {
    WorkerSettings {
        offset_flush_interval: Duration::from_millis(interval_ms),
        offset_flush_timeout: Duration::from_millis(timeout_ms),
        task_shutdown_graceful_timeout: Duration::from_millis(graceful_ms),
        ..WorkerSettings::default()
    }
}

/// Commits every 25 ms, 2 s commit deadline, 10 s graceful stop.
pub fn fast() -> WorkerSettings {
    settings(25, 2_000, 10_000)
}

/// One worker over a [`TestStore`] and a [`TestSink`].
pub struct Harness {
    /// The worker, shareable with spawned stops.
    pub worker: Arc<Worker>,
    /// The store.
    pub store: Arc<TestStore>,
    /// The sink.
    pub sink: Arc<TestSink>,
}

impl Harness {
    /// A worker over a new store and an auto-acknowledging sink.
    pub fn new(settings: WorkerSettings) -> Self {
        Self::over(settings, TestStore::new())
    }

    /// A worker over `store` and an auto-acknowledging sink.
    pub fn over(settings: WorkerSettings, store: Arc<TestStore>) -> Self {
        init_logs();
        let sink = TestSink::new();
        let worker = Arc::new(Worker::new(settings, store.clone(), sink.clone()));
        Self {
            worker,
            store,
            sink,
        }
    }

    /// Starts connector `name` with a single task driven by `probe`.
    pub fn start(&self, name: &str, tolerate_delivery_errors: bool, probe: &Arc<Probe>) {
        self.start_with(name, tolerate_delivery_errors, TestConnector::new(probe), 1);
    }

    /// Starts a connector.
    pub fn start_with(
        &self,
        name: &str,
        tolerate_delivery_errors: bool,
        connector: TestConnector,
        tasks_max: usize,
    ) {
        let spec = ConnectorSpec {
            name: name.to_owned(),
            tasks_max,
            tolerate_delivery_errors,
            transforms: Default::default(),
            error_handling: Default::default(),
            secrets: Vec::new(),
            config: Config::new(),
        };
        self.worker
            .start_connector(spec, &connector)
            .expect("connector starts");
    }

    /// The status of the connector's first task.
    pub fn status(&self, name: &str) -> TaskStatus {
        let statuses = self
            .worker
            .task_statuses(name)
            .expect("the connector exists");
        statuses
            .first()
            .expect("the connector has a task")
            .1
            .clone()
    }

    /// Waits until the connector's first task is in `state`.
    pub async fn wait_state(&self, name: &str, state: TaskState) {
        eventually(&format!("{name} task {state}"), || {
            self.status(name).state == state
        })
        .await;
    }

    /// The committed `n` of partition `p`.
    pub async fn committed(&self, connector: &str, p: &str) -> Option<i64> {
        committed(&self.store.inner, connector, p).await
    }

    /// Waits until partition `p` is committed at `n`.
    pub async fn wait_committed(&self, connector: &str, p: &str, n: i64) {
        wait_committed(&self.store.inner, connector, p, n).await;
    }

    /// Stops a connector, failing the test if that hangs.
    pub async fn stop(&self, name: &str) {
        bounded(
            &format!("stop_connector({name})"),
            self.worker.stop_connector(name),
        )
        .await
        .expect("the connector exists");
    }
}

// ---------------------------------------------------------------------------------------------
// Logs
// ---------------------------------------------------------------------------------------------

static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();

#[derive(Clone)]
struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        lock(&self.0).extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;
    fn make_writer(&'a self) -> LogWriter {
        self.clone()
    }
}

/// Installs the process-wide INFO log capture (once). Worker tasks run on runtime threads, so a
/// thread-local subscriber would miss them; tests tell their lines apart by unique task names.
pub fn init_logs() {
    LOGS.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::fmt()
            .with_writer(LogWriter(buffer.clone()))
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("no other global subscriber");
        buffer
    });
}

/// Captured lines of task `task` (the `task=` field) at `level` (`"ERROR"`, `"WARN"`, `"INFO"`).
pub fn task_logs(task: &str, level: &str) -> Vec<String> {
    let field = format!("task={task}");
    let buffer = LOGS.get().expect("init_logs() was called");
    let text = String::from_utf8_lossy(&lock(buffer)).into_owned();
    text.lines()
        .filter(|l| l.split_whitespace().next() == Some(level))
        .filter(|l| l.split_whitespace().any(|w| w == field))
        .map(str::to_owned)
        .collect()
}

/// Waits until task `task` logged a `level` line containing every one of `parts`; returns it.
pub async fn wait_log(task: &str, level: &str, parts: &[&str]) -> String {
    let mut found = None;
    eventually(
        &format!("a {level} log of {task} containing {parts:?}"),
        || {
            found = task_logs(task, level)
                .into_iter()
                .find(|l| parts.iter().all(|p| l.contains(p)));
            found.is_some()
        },
    )
    .await;
    found.unwrap_or_default()
}
