//! A scriptable connector: each task is driven and observed through a [`Probe`].

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConnectError, RecordMetadata, SourceConnector, SourceOffset,
    SourcePartition, SourceRecord, SourceTask, SourceTaskContext, async_trait,
};
use tokio::sync::mpsc;

use super::{DEADLINE, eventually, key_of, lock};

/// Blocks the thread that calls [`Gate::block`] (as a synchronous `open()` of a FIFO without a writer
/// does) until [`Gate::open`], or [`DEADLINE`] at the latest so that no test leaves a thread behind.
#[derive(Default)]
pub struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
    /// Threads that entered [`Gate::block`].
    pub entered: AtomicUsize,
    /// Threads that left it.
    pub returned: AtomicUsize,
}

impl Gate {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    pub fn open(&self) {
        *lock(&self.open) = true;
        self.opened.notify_all();
    }

    fn block(&self) {
        self.entered.fetch_add(1, Ordering::SeqCst);
        let guard = lock(&self.open);
        let _ = self
            .opened
            .wait_timeout_while(guard, DEADLINE, |open| !*open);
        self.returned.fetch_add(1, Ordering::SeqCst);
    }
}

/// What the next `poll()` returns.
pub enum Step {
    /// These records.
    Records(Vec<SourceRecord>),
    /// This error.
    Fail(ConnectError),
}

/// What a lookup of committed offsets returned.
pub type Resumed = Vec<(SourcePartition, Option<SourceOffset>)>;

/// The test's remote control of one task, and what the runtime did to it.
pub struct Probe {
    feed_tx: mpsc::UnboundedSender<Step>,
    feed_rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<Step>>,
    /// `start()` calls.
    pub starts: AtomicUsize,
    /// `poll()` calls.
    pub polls: AtomicUsize,
    /// `commit()` calls.
    pub commits: AtomicUsize,
    /// `stop()` calls (counted on entry).
    pub stops: AtomicUsize,
    /// `stop()` never returns while set.
    pub stop_hangs: AtomicBool,
    /// `poll()` returns at once, never awaiting, while set (an empty `Vec` when nothing is fed).
    pub busy_poll: AtomicBool,
    /// `commit()` and `commit_record()` return errors while set.
    pub fail_commit_calls: AtomicBool,
    /// `start()` blocks its thread on this gate (never awaiting) while set.
    pub block_start: Mutex<Option<Arc<Gate>>>,
    /// `poll()` panics while set.
    pub panic_poll: AtomicBool,
    /// `poll()` blocks its thread on this gate (never awaiting) while set.
    pub block_poll: Mutex<Option<Arc<Gate>>>,
    /// `start()` fails with this error, once.
    pub start_error: Mutex<Option<ConnectError>>,
    /// Partitions `start()` looks up through the offset reader.
    pub lookups: Mutex<Vec<SourcePartition>>,
    /// What the lookup in `start()` returned.
    pub resumed: Mutex<Option<Resumed>>,
    /// Every `commit_record()` call: record key and metadata.
    pub committed_records: Mutex<Vec<(String, Option<RecordMetadata>)>>,
    /// `wants_delivered_records()` answers `false` (asked once per task start).
    pub refuse_delivered: AtomicBool,
}

impl Probe {
    /// A probe for a task that polls nothing until fed.
    pub fn new() -> Arc<Self> {
        let (feed_tx, feed_rx) = mpsc::unbounded_channel();
        Arc::new(Self {
            feed_tx,
            feed_rx: tokio::sync::Mutex::new(feed_rx),
            starts: AtomicUsize::new(0),
            polls: AtomicUsize::new(0),
            commits: AtomicUsize::new(0),
            stops: AtomicUsize::new(0),
            stop_hangs: AtomicBool::new(false),
            busy_poll: AtomicBool::new(false),
            fail_commit_calls: AtomicBool::new(false),
            block_start: Mutex::new(None),
            block_poll: Mutex::new(None),
            panic_poll: AtomicBool::new(false),
            start_error: Mutex::new(None),
            lookups: Mutex::new(Vec::new()),
            resumed: Mutex::new(None),
            committed_records: Mutex::new(Vec::new()),
            refuse_delivered: AtomicBool::new(false),
        })
    }

    /// The next poll returns these records (one batch).
    pub fn push(&self, records: Vec<SourceRecord>) {
        self.feed_tx
            .send(Step::Records(records))
            .expect("task feed open");
    }

    /// The next poll fails with `error`.
    pub fn push_error(&self, error: ConnectError) {
        self.feed_tx
            .send(Step::Fail(error))
            .expect("task feed open");
    }

    /// `start()` will look up these partitions.
    pub fn look_up(&self, partitions: Vec<SourcePartition>) {
        *lock(&self.lookups) = partitions;
    }

    /// `commit()` calls so far.
    pub fn commits(&self) -> usize {
        self.commits.load(Ordering::SeqCst)
    }

    /// `poll()` calls so far.
    pub fn polls(&self) -> usize {
        self.polls.load(Ordering::SeqCst)
    }

    /// `stop()` calls so far.
    pub fn stops(&self) -> usize {
        self.stops.load(Ordering::SeqCst)
    }

    /// The metadata of every `commit_record()` call for `key` (one entry per call).
    pub fn commit_records_of(&self, key: &str) -> Vec<Option<RecordMetadata>> {
        lock(&self.committed_records)
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, m)| m.clone())
            .collect()
    }

    /// Whether `commit_record()` was called for `key`.
    pub fn has_commit_record(&self, key: &str) -> bool {
        !self.commit_records_of(key).is_empty()
    }

    /// Waits for `n` more `commit()` calls than now: at least one whole commit cycle has run since.
    pub async fn wait_commits(&self, n: usize) {
        let target = self.commits() + n;
        eventually(&format!("{target} task.commit() calls"), || {
            self.commits() >= target
        })
        .await;
    }
}

/// A connector with one task per probe (as many as `tasks.max` allows), task `i` driven by probe `i`.
pub struct TestConnector {
    probes: Vec<Arc<Probe>>,
    created: AtomicUsize,
}

impl TestConnector {
    /// A connector whose single task is driven by `probe`.
    pub fn new(probe: &Arc<Probe>) -> Self {
        Self::with_tasks(vec![probe.clone()])
    }

    /// A connector with one task per probe.
    pub fn with_tasks(probes: Vec<Arc<Probe>>) -> Self {
        Self {
            probes,
            created: AtomicUsize::new(0),
        }
    }
}

impl SourceConnector for TestConnector {
    fn config_keys(&self) -> Vec<ConfigKey> {
        Vec::new()
    }

    fn validate(&self, _config: &Config) -> Vec<ConfigIssue> {
        Vec::new()
    }

    fn task_configs(&self, config: &Config, max_tasks: usize) -> Result<Vec<Config>, ConnectError> {
        Ok(vec![config.clone(); max_tasks.min(self.probes.len())])
    }

    fn create_task(&self) -> Box<dyn SourceTask> {
        let i = self.created.fetch_add(1, Ordering::SeqCst);
        Box::new(TestTask {
            probe: self.probes[i % self.probes.len()].clone(),
        })
    }
}

struct TestTask {
    probe: Arc<Probe>,
}

#[async_trait]
impl SourceTask for TestTask {
    async fn start(&mut self, context: Arc<dyn SourceTaskContext>) -> Result<(), ConnectError> {
        self.probe.starts.fetch_add(1, Ordering::SeqCst);
        let gate = lock(&self.probe.block_start).clone();
        if let Some(gate) = gate {
            gate.block();
        }
        if let Some(e) = lock(&self.probe.start_error).take() {
            return Err(e);
        }
        let lookups = lock(&self.probe.lookups).clone();
        if !lookups.is_empty() {
            let found = context.offset_storage_reader().offsets(&lookups).await?;
            *lock(&self.probe.resumed) = Some(found);
        }
        Ok(())
    }

    async fn poll(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        self.probe.polls.fetch_add(1, Ordering::SeqCst);
        assert!(
            !self.probe.panic_poll.load(Ordering::SeqCst),
            "injected poll() panic"
        );
        let gate = lock(&self.probe.block_poll).clone();
        if let Some(gate) = gate {
            gate.block();
        }
        if self.probe.busy_poll.load(Ordering::SeqCst) {
            let Ok(mut feed) = self.probe.feed_rx.try_lock() else {
                return Ok(Vec::new());
            };
            return match feed.try_recv() {
                Ok(Step::Records(records)) => Ok(records),
                Ok(Step::Fail(e)) => Err(e),
                Err(_) => Ok(Vec::new()),
            };
        }
        // Both the lock and `recv` are cancel-safe: a dropped poll loses nothing.
        let mut feed = self.probe.feed_rx.lock().await;
        match tokio::time::timeout(Duration::from_millis(10), feed.recv()).await {
            Ok(Some(Step::Records(records))) => Ok(records),
            Ok(Some(Step::Fail(e))) => Err(e),
            Ok(None) | Err(_) => Ok(Vec::new()),
        }
    }

    async fn commit(&mut self) -> Result<(), ConnectError> {
        self.probe.commits.fetch_add(1, Ordering::SeqCst);
        if self.probe.fail_commit_calls.load(Ordering::SeqCst) {
            return Err(ConnectError::fatal("injected commit() failure"));
        }
        Ok(())
    }

    fn wants_delivered_records(&self) -> bool {
        !self.probe.refuse_delivered.load(Ordering::SeqCst)
    }

    async fn commit_record(
        &mut self,
        record: &SourceRecord,
        metadata: Option<&RecordMetadata>,
    ) -> Result<(), ConnectError> {
        lock(&self.probe.committed_records).push((key_of(record), metadata.cloned()));
        if self.probe.fail_commit_calls.load(Ordering::SeqCst) {
            return Err(ConnectError::fatal("injected commit_record() failure"));
        }
        Ok(())
    }

    async fn stop(&mut self) -> Result<(), ConnectError> {
        self.probe.stops.fetch_add(1, Ordering::SeqCst);
        if self.probe.stop_hangs.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}
