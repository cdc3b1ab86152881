//! Tasks started, paused and stopped one at a time by id (what distributed mode's assign and revoke
//! use): stopping one task commits its offsets and leaves the others running; every status a task
//! takes is also written to the status store.

use std::sync::Arc;

use ferry_api::Config;
use ferry_plugin::sink::{SinkProvider, TaskSinkContext};
use ferry_runtime::sink::{RecordSink, SinkError, SinkErrorKind};
use ferry_runtime::stores::{MemoryStatusStore, State, StatusBackingStore};
use ferry_runtime::{TargetState, TaskId, TaskSpec, TaskState, Worker, WorkerError};

use crate::support::{
    Harness, Probe, TestConnector, TestSink, TestStore, bounded, eventually, record, settings,
};

/// One hour: no periodic commit happens during the test, only the final one at stop.
const HOUR: u64 = 3_600_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_start_pause_and_stop_one_at_a_time() {
    let h = Harness::new(settings(HOUR, 30_000, 30_000));
    let (p0, p1) = (Probe::new(), Probe::new());
    let connector = TestConnector::with_tasks(vec![p0.clone(), p1.clone()]);
    let spec = TaskSpec::default();
    let (t0, t1) = (TaskId::new("c", 0), TaskId::new("c", 1));
    h.worker
        .start_task(
            t0.clone(),
            &spec,
            Config::new(),
            &connector,
            TargetState::Running,
        )
        .expect("task 0 starts");
    h.worker
        .start_task(
            t1.clone(),
            &spec,
            Config::new(),
            &connector,
            TargetState::Paused,
        )
        .expect("task 1 starts");
    let again = h
        .worker
        .start_task(
            t0.clone(),
            &spec,
            Config::new(),
            &connector,
            TargetState::Running,
        )
        .expect_err("task 0 already runs");
    assert!(
        matches!(again, WorkerError::TaskExists(ref id) if *id == t0),
        "{again}"
    );
    assert_eq!(h.worker.tasks("c"), [t0.clone(), t1.clone()]);

    p0.push(vec![record("a", 1)]);
    p1.push(vec![record("b", 1)]);
    eventually("a:1 delivered", || p0.has_commit_record("a:1")).await;
    let state_of = |task: usize| h.worker.task_statuses("c").expect("known")[task].1.state;
    eventually("task 1 paused", || state_of(1) == TaskState::Paused).await;
    assert!(!p1.has_commit_record("b:1"), "a paused task is not polled");

    h.worker
        .set_target(&t1, TargetState::Running)
        .expect("task 1 exists");
    eventually("b:1 delivered after resume", || p1.has_commit_record("b:1")).await;

    let last = bounded("stop_task(c-0)", h.worker.stop_task(&t0))
        .await
        .expect("task 0 exists");
    assert_eq!(last.state, TaskState::Stopped);
    assert_eq!(h.committed("c", "a").await, Some(1), "its final commit");
    assert_eq!(h.committed("c", "b").await, None, "task 1 did not commit");
    assert_eq!(h.worker.tasks("c"), std::slice::from_ref(&t1));
    assert!(matches!(
        h.worker.stop_task(&t0).await,
        Err(WorkerError::TaskNotFound { task: 0, .. })
    ));

    p1.push(vec![record("b", 2)]);
    eventually("task 1 still runs", || p1.has_commit_record("b:2")).await;
    bounded("shutdown", h.worker.shutdown()).await;
    assert_eq!(h.committed("c", "b").await, Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_task_status_is_written_to_the_status_store() {
    let statuses = Arc::new(MemoryStatusStore::new());
    let worker = Worker::with_status(
        settings(HOUR, 30_000, 30_000),
        TestStore::new(),
        TestSink::new(),
        statuses.clone(),
        "127.0.0.1:8083",
    );
    let probe = Probe::new();
    let connector = TestConnector::new(&probe);
    let id = TaskId::new("s", 0);
    worker
        .start_task(
            id.clone(),
            &TaskSpec::default(),
            Config::new(),
            &connector,
            TargetState::Running,
        )
        .expect("starts");
    let state = || statuses.task(&id).map(|e| e.state);
    eventually("RUNNING in the store", || state() == Some(State::Running)).await;
    let entry = statuses.task(&id).expect("written");
    assert_eq!(
        (entry.worker_id.as_str(), entry.generation),
        ("127.0.0.1:8083", 0)
    );

    worker.set_target(&id, TargetState::Paused).expect("exists");
    eventually("PAUSED in the store", || state() == Some(State::Paused)).await;
    bounded("stop_task", worker.stop_task(&id))
        .await
        .expect("exists");
    assert_eq!(state(), Some(State::Stopped));
}

/// A provider that gives the first task a sink and refuses the second.
struct FirstOnly(Arc<TestSink>);

impl std::fmt::Display for FirstOnly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("first-only")
    }
}

#[async_trait::async_trait]
impl SinkProvider for FirstOnly {
    async fn open(&self, task: &TaskSinkContext<'_>) -> Result<Arc<dyn RecordSink>, SinkError> {
        if task.task == 0 {
            return Ok(self.0.clone());
        }
        // The connector's configuration reaches the provider (for the keys a sink reads itself).
        let setting = task
            .connector_config
            .and_then(|c| c.get("sink.setting"))
            .map_or("unset", String::as_str);
        Err(SinkError::new(
            "first-only",
            SinkErrorKind::Fatal,
            format!("no sink for task {} (sink.setting={setting})", task.task),
        ))
    }

    async fn flush(&self, _: std::time::Duration) -> Result<(), SinkError> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_task_opens_its_sink_and_a_refused_sink_fails_only_that_task() {
    let sink = TestSink::new();
    let worker = Worker::with_sinks(
        settings(HOUR, 30_000, 30_000),
        TestStore::new(),
        Arc::new(FirstOnly(sink.clone())),
        Arc::new(MemoryStatusStore::new()),
        "w",
    );
    let (p0, p1) = (Probe::new(), Probe::new());
    let connector = TestConnector::with_tasks(vec![p0.clone(), p1.clone()]);
    let spec = TaskSpec {
        connector_config: Config::from([("sink.setting".to_owned(), "7".to_owned())]),
        ..TaskSpec::default()
    };
    for task in 0..2 {
        worker
            .start_task(
                TaskId::new("o", task),
                &spec,
                Config::new(),
                &connector,
                TargetState::Running,
            )
            .expect("starts");
    }
    let status = |task: usize| worker.task_statuses("o").expect("known")[task].1.clone();
    eventually("task 1 failed", || status(1).state == TaskState::Failed).await;
    let trace = status(1).trace.expect("a reason");
    assert!(
        trace.contains("cannot open the sink first-only")
            && trace.contains("no sink for task 1 (sink.setting=7)"),
        "{trace}"
    );
    p0.push(vec![record("a", 1)]);
    eventually("task 0 delivers", || p0.has_commit_record("a:1")).await;
    assert_eq!(status(0).state, TaskState::Running);
    bounded("shutdown", worker.shutdown()).await;
}

/// A lost assignment: `abort_task` stops the task without its final commit, and once it returned no
/// commit of that task reaches the store — not even one that was in flight when it was called — and
/// the task writes no status any more (its new owner's are not overwritten).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_task_never_commits_again() {
    let statuses = Arc::new(MemoryStatusStore::new());
    let store = TestStore::new();
    let sink: Arc<dyn RecordSink> = TestSink::new();
    let worker = Worker::with_status(
        settings(25, 30_000, 30_000),
        store.clone(),
        sink,
        statuses.clone(),
        "w1:8083",
    );
    let probe = Probe::new();
    let connector = TestConnector::new(&probe);
    let id = TaskId::new("c", 0);
    let spec = TaskSpec {
        generation: 4,
        ..TaskSpec::default()
    };
    worker
        .start_task(
            id.clone(),
            &spec,
            Config::new(),
            &connector,
            TargetState::Running,
        )
        .expect("starts");
    probe.push(vec![record("a", 1)]);
    crate::support::wait_committed(&store.inner, "c", "a", 1).await;
    assert_eq!(
        statuses.task(&id).map(|s| (s.state, s.generation)),
        Some((State::Running, 4)),
        "statuses carry the task's generation"
    );

    // A periodic commit of a:2 is in flight (the store hangs) when the assignment is lost.
    store.hang_sets(crate::support::Hang::All);
    let hung = TestStore::count(&store.hung_sets);
    probe.push(vec![record("a", 2)]);
    eventually("a commit of a:2 in flight", || {
        TestStore::count(&store.hung_sets) > hung
    })
    .await;
    assert!(
        bounded("abort_task", worker.abort_task(&id)).await,
        "it ran"
    );
    let applied = TestStore::count(&store.applied_sets);
    let status = statuses.task(&id);
    store.hang_sets(crate::support::Hang::Nothing);
    probe.push(vec![record("a", 3)]);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        TestStore::count(&store.applied_sets),
        applied,
        "no commit after abort_task returned"
    );
    assert_eq!(
        crate::support::committed(&store.inner, "c", "a").await,
        Some(1)
    );
    assert_eq!(
        statuses.task(&id),
        status,
        "no status written after the abort"
    );
    assert!(worker.tasks("c").is_empty());
    assert!(!worker.abort_task(&id).await, "nothing left to abort");

    // The slot can be taken again: a new instance resumes from the last commit.
    let resumed = Probe::new();
    resumed.look_up(vec![crate::support::partition("a")]);
    worker
        .start_task(
            id.clone(),
            &spec,
            Config::new(),
            &TestConnector::new(&resumed),
            TargetState::Running,
        )
        .expect("starts again");
    eventually("the new instance read its offsets", || {
        crate::support::lock(&resumed.resumed).is_some()
    })
    .await;
    bounded("shutdown", worker.shutdown()).await;
}
