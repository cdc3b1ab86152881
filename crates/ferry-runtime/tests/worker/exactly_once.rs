//! Exactly-once delivery's hooks in the one task loop, against a transactional sink that logs what
//! the runtime asks of it: transactions begin before a batch's first record and commit with the
//! offsets of their records; `transaction.boundary=connector` commits and aborts where the task asks
//! through its `TransactionContext` (Kafka Connect's `WorkerTransactionContext` semantics), an abort
//! discards the transaction's offsets, and `commit_record` is called only for the records of
//! committed transactions. The real broker's side is in `crates/ferry/tests/distributed.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConnectError, ExactlyOnceSupport, RecordMetadata,
    SourceConnector, SourceRecord, SourceTask, SourceTaskContext, TransactionBoundaries,
};
use ferry_offsets::{MemoryStore, OffsetWrite};
use ferry_plugin::sink::{
    PendingDelivery, RecordSink, SinkError, SinkErrorKind, SinkProvider, TaskSinkContext,
    TransactionalSink,
};
use ferry_runtime::config::exactly_once::ExactlyOnceSource;
use ferry_runtime::stores::MemoryStatusStore;
use ferry_runtime::{ConnectorSpec, TaskState, Worker, WorkerSettings};

use crate::support::{eventually, key_of, lock, record, settings};

type Log = Arc<Mutex<Vec<String>>>;

/// Logs `begin`, `send p:n`, `commit [offsets]` and `abort`; refuses records outside a transaction.
struct TxnSink {
    log: Log,
    open: Mutex<bool>,
}

#[async_trait]
impl RecordSink for TxnSink {
    fn describe(&self) -> String {
        "test transactional sink".into()
    }

    async fn send(&self, record: &SourceRecord) -> Result<PendingDelivery, SinkError> {
        if !*lock(&self.open) {
            return Err(SinkError::new(
                self.describe(),
                SinkErrorKind::Fatal,
                "a record was sent with no transaction open",
            ));
        }
        lock(&self.log).push(format!("send {}", key_of(record)));
        Ok(PendingDelivery::ready(Ok(RecordMetadata {
            topic: record.topic.clone(),
            partition: Some(0),
            offset: None,
        })))
    }

    async fn flush(&self, _timeout: Duration) -> Result<(), SinkError> {
        Ok(())
    }
}

#[async_trait]
impl TransactionalSink for TxnSink {
    fn begin(&self) -> Result<(), SinkError> {
        let mut open = lock(&self.open);
        if !*open {
            *open = true;
            lock(&self.log).push("begin".into());
        }
        Ok(())
    }

    fn in_transaction(&self) -> bool {
        *lock(&self.open)
    }

    async fn commit(&self, offsets: &[OffsetWrite]) -> Result<(), SinkError> {
        let values: Vec<String> = offsets
            .iter()
            .map(|w| String::from_utf8_lossy(w.value.as_deref().unwrap_or(b"null")).into_owned())
            .collect();
        lock(&self.log).push(format!("commit [{}]", values.join(",")));
        *lock(&self.open) = false;
        Ok(())
    }

    async fn abort(&self) -> Result<(), SinkError> {
        lock(&self.log).push("abort".into());
        *lock(&self.open) = false;
        Ok(())
    }
}

struct Provider(Arc<TxnSink>);

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("test transactional sinks")
    }
}

#[async_trait]
impl SinkProvider for Provider {
    async fn open(&self, _task: &TaskSinkContext<'_>) -> Result<Arc<dyn RecordSink>, SinkError> {
        Ok(self.0.clone())
    }

    async fn open_transactional(
        &self,
        _task: &TaskSinkContext<'_>,
        _transactional_id: &str,
    ) -> Result<Option<Arc<dyn TransactionalSink>>, SinkError> {
        Ok(Some(self.0.clone()))
    }

    async fn flush(&self, _timeout: Duration) -> Result<(), SinkError> {
        Ok(())
    }
}

/// A poll batch and the requests the task makes with it.
#[derive(Clone)]
enum Ask {
    CommitAt(i64),
    AbortAt(i64),
    CommitBatch,
    AbortBatch,
}

/// Record `n`: of partition `q` from 100 on, else of partition `p`.
fn rec(n: i64) -> SourceRecord {
    if n >= 100 {
        record("q", n)
    } else {
        record("p", n)
    }
}

/// A connector that defines its transaction boundaries; its one task plays `script` (records
/// [`rec`]`(n)`, with the requests made before `poll` returns them).
#[derive(Clone)]
struct Boundaries {
    log: Log,
    script: Arc<Vec<(Vec<i64>, Vec<Ask>)>>,
    /// Whether the task was given a transaction context.
    had_context: Arc<AtomicUsize>,
}

impl SourceConnector for Boundaries {
    fn config_keys(&self) -> Vec<ConfigKey> {
        Vec::new()
    }
    fn validate(&self, _config: &Config) -> Vec<ConfigIssue> {
        Vec::new()
    }
    fn task_configs(&self, _config: &Config, _max: usize) -> Result<Vec<Config>, ConnectError> {
        Ok(vec![Config::new()])
    }
    fn create_task(&self) -> Box<dyn SourceTask> {
        Box::new(BoundaryTask {
            connector: self.clone(),
            step: 0,
            context: None,
        })
    }
    fn exactly_once_support(&self, _config: &Config) -> ExactlyOnceSupport {
        ExactlyOnceSupport::Supported
    }
    fn can_define_transaction_boundaries(&self, _config: &Config) -> TransactionBoundaries {
        TransactionBoundaries::Supported
    }
}

struct BoundaryTask {
    connector: Boundaries,
    step: usize,
    context: Option<Arc<dyn ferry_api::TransactionContext>>,
}

#[async_trait]
impl SourceTask for BoundaryTask {
    async fn start(&mut self, context: Arc<dyn SourceTaskContext>) -> Result<(), ConnectError> {
        self.context = context.transaction_context();
        if self.context.is_some() {
            self.connector.had_context.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }

    async fn poll(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        let Some((numbers, asks)) = self.connector.script.get(self.step).cloned() else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            return Ok(Vec::new());
        };
        self.step += 1;
        if let Some(context) = &self.context {
            for ask in asks {
                match ask {
                    Ask::CommitAt(n) => context.commit_transaction_at(&rec(n)),
                    Ask::AbortAt(n) => context.abort_transaction_at(&rec(n)),
                    Ask::CommitBatch => context.commit_transaction(),
                    Ask::AbortBatch => context.abort_transaction(),
                }
            }
        }
        Ok(numbers.into_iter().map(rec).collect())
    }

    async fn commit_record(
        &mut self,
        record: &SourceRecord,
        _metadata: Option<&RecordMetadata>,
    ) -> Result<(), ConnectError> {
        lock(&self.connector.log).push(format!("commit_record {}", key_of(record)));
        Ok(())
    }

    async fn stop(&mut self) -> Result<(), ConnectError> {
        Ok(())
    }
}

fn exactly_once_settings() -> WorkerSettings {
    WorkerSettings {
        task_fencing: Some("grp".into()),
        exactly_once_source: ExactlyOnceSource::Enabled,
        ..settings(25, 2_000, 5_000)
    }
}

/// Runs `script` with `transaction.boundary=boundary` until the sink's log holds `until` entries
/// (or the task failed); returns the sink's and the task's logs and the task's final state.
async fn run(
    boundary: &str,
    script: Vec<(Vec<i64>, Vec<Ask>)>,
    until: usize,
) -> (Vec<String>, Vec<String>, TaskState, usize) {
    let sink_log: Log = Arc::default();
    let task_log: Log = Arc::default();
    let sink = Arc::new(TxnSink {
        log: sink_log.clone(),
        open: Mutex::new(false),
    });
    let worker = Worker::with_sinks(
        exactly_once_settings(),
        Arc::new(MemoryStore::new()),
        Arc::new(Provider(sink)),
        Arc::new(MemoryStatusStore::new()),
        "w1:8083",
    );
    let connector = Boundaries {
        log: task_log.clone(),
        script: Arc::new(script),
        had_context: Arc::default(),
    };
    let mut config = Config::new();
    config.insert("transaction.boundary".into(), boundary.into());
    let spec = ConnectorSpec {
        name: "c".into(),
        tasks_max: 1,
        tolerate_delivery_errors: false,
        transforms: Default::default(),
        error_handling: Default::default(),
        secrets: Vec::new(),
        config,
    };
    worker.start_connector(spec, &connector).expect("starts");
    let state = |worker: &Worker| {
        worker
            .task_statuses("c")
            .and_then(|statuses| statuses.first().map(|(_, s)| s.state))
            .unwrap_or(TaskState::Unassigned)
    };
    eventually("the script to play out", || {
        lock(&sink_log).len() >= until || state(&worker) == TaskState::Failed
    })
    .await;
    // Records of committed transactions get `commit_record` before the next poll.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let final_state = state(&worker);
    worker.shutdown().await;
    let sink_log = lock(&sink_log).clone();
    let task_log = lock(&task_log).clone();
    (
        sink_log,
        task_log,
        final_state,
        connector.had_context.load(Ordering::SeqCst),
    )
}

/// `transaction.boundary=connector`: a commit requested at a record ends the transaction right after
/// it, mid-batch, and the next record begins a new one; an abort of the batch discards that
/// transaction's records (no `commit_record`) and its offsets (the next commit carries no offset of
/// partition `q`, whose only record was aborted); a batch commit commits after the batch's last
/// record. Without requests the transaction
/// stays open across polls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connector_defined_boundaries_commit_and_abort_where_the_task_asks() {
    let (sink, task, state, had_context) = run(
        "connector",
        vec![
            (vec![0, 1, 102], vec![Ask::CommitAt(1), Ask::AbortBatch]),
            (vec![3], vec![]),
            (vec![4], vec![Ask::CommitBatch]),
        ],
        11,
    )
    .await;
    assert_eq!(had_context, 1, "the task was given a transaction context");
    assert_eq!(state, TaskState::Running, "{sink:?}");
    assert_eq!(
        sink,
        [
            "begin",
            "send p:0",
            "send p:1",
            r#"commit [{"n":1}]"#,
            "begin",
            "send q:102",
            "abort",
            "begin",
            "send p:3",
            "send p:4",
            r#"commit [{"n":4}]"#,
        ],
        "the transactions end where the task asked"
    );
    assert_eq!(
        task,
        [
            "commit_record p:0",
            "commit_record p:1",
            "commit_record p:3",
            "commit_record p:4"
        ],
        "commit_record only for the records of committed transactions, in order"
    );
}

/// A record-level abort ends the transaction right after that record, discarding it with the
/// transaction; a commit and an abort asked at the same record fail the task (Kafka Connect's
/// rule: the alternative could lose data), with nothing of that transaction committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_level_abort_discards_up_to_that_record_and_contradictions_fail_the_task() {
    let (sink, task, state, _) = run(
        "connector",
        vec![
            (vec![0, 1, 2], vec![Ask::AbortAt(1), Ask::CommitAt(2)]),
            (vec![3], vec![Ask::CommitAt(3), Ask::AbortAt(3)]),
        ],
        usize::MAX,
    )
    .await;
    assert_eq!(state, TaskState::Failed, "{sink:?}");
    assert_eq!(
        &sink[..7],
        [
            "begin",
            "send p:0",
            "send p:1",
            "abort",
            "begin",
            "send p:2",
            r#"commit [{"n":2}]"#,
        ],
        "{sink:?}"
    );
    assert!(
        !sink.iter().skip(7).any(|e| e.starts_with("commit")),
        "nothing of the contradicted transaction is committed: {sink:?}"
    );
    assert_eq!(task, ["commit_record p:2"], "{task:?}");
}

/// Without `transaction.boundary=connector` the task gets no transaction context (Kafka Connect's
/// `null`), and each poll batch is one transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_boundaries_give_no_context_and_commit_each_batch() {
    let (sink, task, state, had_context) =
        run("poll", vec![(vec![0, 1], vec![]), (vec![2], vec![])], 7).await;
    assert_eq!(had_context, 0);
    assert_eq!(state, TaskState::Running);
    assert_eq!(
        sink,
        [
            "begin",
            "send p:0",
            "send p:1",
            r#"commit [{"n":1}]"#,
            "begin",
            "send p:2",
            r#"commit [{"n":2}]"#,
        ]
    );
    assert_eq!(
        task,
        [
            "commit_record p:0",
            "commit_record p:1",
            "commit_record p:2"
        ]
    );
}
