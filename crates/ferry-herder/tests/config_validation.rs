//! Checking a connector configuration (the validate endpoint, and creating a connector) holds neither
//! the runtime's threads nor the herder's lock: on a single-threaded runtime, while a connector's
//! `validate` is stuck, another request is still answered.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConnectError, SourceConnector, SourceRecord, SourceTask,
    SourceTaskContext, async_trait,
};
use ferry_herder::{Plugin, StandaloneHerder, TargetState};
use ferry_offsets::MemoryStore;
use ferry_runtime::sink::{PendingDelivery, RecordSink, SinkError};
use ferry_runtime::stores::FileConfigStore;
use ferry_runtime::{Worker, WorkerSettings};

const DEADLINE: Duration = Duration::from_secs(20);

/// What happened, in order.
#[derive(Default)]
struct Events {
    list: Mutex<Vec<&'static str>>,
    open: Mutex<bool>,
    opened: Condvar,
}

impl Events {
    fn push(&self, event: &'static str) {
        self.list
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event);
    }

    fn list(&self) -> Vec<&'static str> {
        self.list.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Blocks the calling thread until the test opens the gate (or the deadline passes).
    fn wait_for_gate(&self) {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self
            .opened
            .wait_timeout_while(open, DEADLINE, |open| !*open)
            .unwrap_or_else(|p| p.into_inner());
    }

    fn open_gate(&self) {
        *self.open.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.opened.notify_all();
    }
}

/// A connector whose `validate` waits for the test, then reports one problem.
struct Stuck(Arc<Events>);

impl SourceConnector for Stuck {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![ConfigKey::required("topic", "the topic")]
    }

    fn validate(&self, _config: &Config) -> Vec<ConfigIssue> {
        self.0.push("validate started");
        self.0.wait_for_gate();
        self.0.push("validate done");
        vec![ConfigIssue {
            key: "topic".into(),
            message: "refused by the test".into(),
        }]
    }

    fn task_configs(&self, config: &Config, _max: usize) -> Result<Vec<Config>, ConnectError> {
        Ok(vec![config.clone()])
    }

    fn create_task(&self) -> Box<dyn SourceTask> {
        Box::new(NoTask)
    }
}

struct NoTask;

#[async_trait]
impl SourceTask for NoTask {
    async fn start(&mut self, _: Arc<dyn SourceTaskContext>) -> Result<(), ConnectError> {
        Ok(())
    }

    async fn poll(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        Ok(Vec::new())
    }

    async fn stop(&mut self) -> Result<(), ConnectError> {
        Ok(())
    }
}

struct NoSink;

#[async_trait]
impl RecordSink for NoSink {
    fn describe(&self) -> String {
        "nothing".into()
    }

    async fn send(&self, _: &SourceRecord) -> Result<PendingDelivery, SinkError> {
        Err(SinkError::new(
            "nothing",
            ferry_runtime::sink::SinkErrorKind::Fatal,
            "unused",
        ))
    }

    async fn flush(&self, _: Duration) -> Result<(), SinkError> {
        Ok(())
    }
}

fn herder(events: &Arc<Events>, dir: &tempfile::TempDir) -> Arc<StandaloneHerder> {
    let store = Arc::new(MemoryStore::new());
    let sink: Arc<dyn RecordSink> = Arc::new(NoSink);
    let worker = Worker::new(WorkerSettings::default(), store.clone(), sink.clone());
    let events = Arc::clone(events);
    let plugin = Plugin::new(["Stuck"], move || {
        Box::new(Stuck(Arc::clone(&events))) as Box<dyn SourceConnector>
    });
    Arc::new(StandaloneHerder::new(
        worker,
        store,
        vec![plugin],
        "test:0",
        Arc::new(FileConfigStore::open(dir.path().join("connectors.json")).expect("open")),
    ))
}

fn config() -> Config {
    Config::from([
        ("connector.class".to_owned(), "Stuck".to_owned()),
        ("name".to_owned(), "stuck".to_owned()),
        ("topic".to_owned(), "t".to_owned()),
    ])
}

/// Yields to the runtime until `validate` has started.
async fn until_started(events: &Events) {
    let start = Instant::now();
    while !events.list().contains(&"validate started") {
        assert!(start.elapsed() < DEADLINE, "validate never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn other_requests_are_answered_while_a_validation_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let events = Arc::new(Events::default());
    let herder = herder(&events, &dir);

    let validating = Arc::clone(&herder);
    let validation = tokio::spawn(async move { validating.validate("Stuck", config()).await });
    until_started(&events).await;
    assert_eq!(herder.connectors().await, Vec::<String>::new());
    events.push("answered");
    events.open_gate();
    let infos = validation.await.expect("joined").expect("validated");
    assert_eq!(infos.error_count, 1);
    assert_eq!(
        events.list(),
        ["validate started", "answered", "validate done"],
        "the request was answered while the validation ran"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn other_requests_are_answered_while_a_new_connector_is_checked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let events = Arc::new(Events::default());
    let herder = herder(&events, &dir);

    let creating = Arc::clone(&herder);
    let creation = tokio::spawn(async move {
        creating
            .create_connector("stuck", config(), TargetState::Running)
            .await
    });
    until_started(&events).await;
    assert_eq!(herder.connectors().await, Vec::<String>::new());
    events.push("answered");
    events.open_gate();
    let refused = creation.await.expect("joined").expect_err("refused");
    assert!(
        refused.to_string().contains("refused by the test"),
        "{refused}"
    );
    assert_eq!(
        events.list(),
        ["validate started", "answered", "validate done"],
        "the request was answered while the configuration was checked"
    );
}
