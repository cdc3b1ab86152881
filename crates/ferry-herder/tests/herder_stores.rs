//! The standalone herder keeps REST connectors in its config store and writes connector statuses
//! to the worker's status store; a delete removes both. Task configurations go through the config
//! store: the tasks run with what the store holds.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

#[path = "../../ferry-runtime/tests/idle_support/mod.rs"]
mod idle_support;

use idle_support::{Idle, NoSink};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_api::{Config, ConfigIssue, ConfigKey, ConnectError, SourceConnector, SourceTask};
use ferry_herder::{Herder, Plugin, StandaloneHerder};
use ferry_offsets::MemoryStore;
use ferry_runtime::sink::RecordSink;
use ferry_runtime::stores::{
    ConfigBackingStore, ConfigSnapshot, ConfigStoreError, FileConfigStore, MemoryConfigStore,
    MemoryStatusStore, State, StatusBackingStore,
};
use ferry_runtime::{TargetState, TaskId, Worker, WorkerSettings};

fn config() -> Config {
    Config::from([
        ("connector.class".to_owned(), "Idle".to_owned()),
        ("name".to_owned(), "idle".to_owned()),
        ("topic".to_owned(), "t".to_owned()),
    ])
}

#[tokio::test]
async fn rest_connectors_go_to_the_config_store_and_their_status_to_the_status_store() {
    let offsets = Arc::new(MemoryStore::new());
    let sink: Arc<dyn RecordSink> = Arc::new(NoSink);
    let statuses = Arc::new(MemoryStatusStore::new());
    let worker = Worker::with_status(
        WorkerSettings::default(),
        offsets.clone(),
        sink.clone(),
        statuses.clone(),
        "127.0.0.1:8083",
    );
    let configs = Arc::new(MemoryConfigStore::new());
    let herder: Arc<dyn Herder> = Arc::new(StandaloneHerder::new(
        worker,
        offsets,
        vec![Plugin::new(["Idle"], || {
            Box::new(Idle) as Box<dyn SourceConnector>
        })],
        "127.0.0.1:8083",
        configs.clone(),
    ));

    herder
        .create_connector("idle", config(), TargetState::Running)
        .await
        .expect("created");
    let stored = configs.snapshot().await.expect("snapshot");
    assert_eq!(stored.connectors["idle"].config, config());
    assert_eq!(stored.connectors["idle"].target, TargetState::Running);
    let status = statuses.connector("idle").expect("written");
    assert_eq!(status.state, State::Running);
    assert_eq!(status.worker_id, "127.0.0.1:8083");

    herder
        .set_target_state("idle", TargetState::Paused)
        .await
        .expect("paused");
    let stored = configs.snapshot().await.expect("snapshot");
    assert_eq!(stored.connectors["idle"].target, TargetState::Paused);
    assert_eq!(
        statuses.connector("idle").map(|s| s.state),
        Some(State::Paused)
    );
    assert_eq!(
        herder
            .connector_status("idle")
            .await
            .expect("known")
            .connector
            .state,
        "PAUSED"
    );

    herder
        .set_target_state("idle", TargetState::Stopped)
        .await
        .expect("stopped");
    assert_eq!(
        statuses.connector("idle").map(|s| s.state),
        Some(State::Stopped)
    );

    herder.delete_connector("idle").await.expect("deleted");
    assert!(
        configs
            .snapshot()
            .await
            .expect("snapshot")
            .connectors
            .is_empty()
    );
    assert_eq!(statuses.connector("idle"), None);
    let missing = herder.connector_status("idle").await.expect_err("gone");
    assert_eq!(missing.status(), 404);
}

/// The configurations the tasks were started with, in start order.
type Started = Arc<Mutex<Vec<Config>>>;

/// A connector making one task configuration per task (`topic` and the task number); its tasks
/// record the configuration they are started with and poll nothing.
struct Recording(Started);

impl SourceConnector for Recording {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![ConfigKey::required("topic", "the topic")]
    }

    fn validate(&self, _config: &Config) -> Vec<ConfigIssue> {
        Vec::new()
    }

    fn task_configs(&self, config: &Config, max: usize) -> Result<Vec<Config>, ConnectError> {
        Ok((0..max)
            .map(|task| {
                Config::from([
                    ("topic".to_owned(), config["topic"].clone()),
                    ("task".to_owned(), task.to_string()),
                ])
            })
            .collect())
    }

    fn create_task(&self) -> Box<dyn SourceTask> {
        Box::new(RecordingTask(self.0.clone()))
    }
}

struct RecordingTask(Started);

#[ferry_api::async_trait]
impl SourceTask for RecordingTask {
    async fn start(
        &mut self,
        context: Arc<dyn ferry_api::SourceTaskContext>,
    ) -> Result<(), ConnectError> {
        self.0.lock().unwrap().push(context.configs().clone());
        Ok(())
    }

    async fn poll(&mut self) -> Result<Vec<ferry_api::SourceRecord>, ConnectError> {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(Vec::new())
    }

    async fn stop(&mut self) -> Result<(), ConnectError> {
        Ok(())
    }
}

/// A config store that marks every task configuration it is given (`stored=<n>`, n counting the
/// writes): a task running with a marked configuration got it from the store, not from the
/// connector directly.
#[derive(Default)]
struct MarkingStore {
    inner: MemoryConfigStore,
    writes: Mutex<usize>,
}

#[ferry_api::async_trait]
impl ConfigBackingStore for MarkingStore {
    fn describe(&self) -> String {
        "marking".into()
    }

    async fn snapshot(&self) -> Result<ConfigSnapshot, ConfigStoreError> {
        self.inner.snapshot().await
    }

    async fn put_connector_config(
        &self,
        name: &str,
        config: &Config,
        target: TargetState,
    ) -> Result<(), ConfigStoreError> {
        self.inner.put_connector_config(name, config, target).await
    }

    async fn remove_connector_config(&self, name: &str) -> Result<(), ConfigStoreError> {
        self.inner.remove_connector_config(name).await
    }

    async fn put_target_state(
        &self,
        name: &str,
        target: TargetState,
    ) -> Result<(), ConfigStoreError> {
        self.inner.put_target_state(name, target).await
    }

    async fn put_task_configs(&self, name: &str, tasks: &[Config]) -> Result<(), ConfigStoreError> {
        let write = {
            let mut writes = self.writes.lock().unwrap();
            *writes += 1;
            *writes
        };
        let marked: Vec<Config> = tasks
            .iter()
            .map(|task| {
                let mut task = task.clone();
                task.insert("stored".to_owned(), write.to_string());
                task
            })
            .collect();
        self.inner.put_task_configs(name, &marked).await
    }
}

fn recording_config(topic: &str, tasks: usize) -> Config {
    Config::from([
        ("connector.class".to_owned(), "Recording".to_owned()),
        ("name".to_owned(), "rec".to_owned()),
        ("topic".to_owned(), topic.to_owned()),
        ("tasks.max".to_owned(), tasks.to_string()),
    ])
}

async fn stored_tasks(store: &dyn ConfigBackingStore, name: &str) -> Option<Vec<Config>> {
    let snapshot = store.snapshot().await.unwrap();
    snapshot.connectors.get(name).and_then(|c| c.tasks.clone())
}

/// Waits until the tasks recorded at least `count` starts; returns the starts from `from` on.
async fn starts(started: &Started, from: usize, count: usize) -> Vec<Config> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let all = started.lock().unwrap().clone();
        if all.len() >= from + count {
            return all[from..].to_vec();
        }
        assert!(
            Instant::now() < deadline,
            "only {} task starts: {all:?}",
            all.len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn sorted(mut configs: Vec<Config>) -> Vec<Config> {
    configs.sort_by(|a, b| a["task"].cmp(&b["task"]));
    configs
}

#[tokio::test]
async fn task_configurations_go_through_the_config_store_and_the_tasks_run_with_them() {
    let offsets = Arc::new(MemoryStore::new());
    let sink: Arc<dyn RecordSink> = Arc::new(NoSink);
    let worker = Worker::with_status(
        WorkerSettings::default(),
        offsets.clone(),
        sink,
        Arc::new(MemoryStatusStore::new()),
        "127.0.0.1:8083",
    );
    let store = Arc::new(MarkingStore::default());
    let started = Started::default();
    let plugin_started = started.clone();
    let herder = Arc::new(StandaloneHerder::new(
        worker,
        offsets,
        vec![Plugin::new(["Recording"], move || {
            Box::new(Recording(plugin_started.clone())) as Box<dyn SourceConnector>
        })],
        "127.0.0.1:8083",
        store.clone(),
    ));

    // Created: the store holds the connector's task configurations, and the tasks run with them.
    herder
        .create_connector("rec", recording_config("a", 2), TargetState::Running)
        .await
        .unwrap();
    let stored = stored_tasks(store.as_ref(), "rec")
        .await
        .expect("task configs stored");
    assert_eq!(stored.len(), 2);
    assert!(
        stored
            .iter()
            .all(|t| t["topic"] == "a" && t["stored"] == "1")
    );
    assert_eq!(sorted(starts(&started, 0, 2).await), stored);
    let answered: Vec<Config> = Herder::task_configs(herder.as_ref(), "rec")
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.config)
        .collect();
    assert_eq!(answered, stored);

    // A task restarts with its configuration as the store holds it.
    let mut changed = stored.clone();
    changed[1].insert("changed".to_owned(), "in the store".to_owned());
    store.inner.put_task_configs("rec", &changed).await.unwrap();
    Herder::restart_task(herder.as_ref(), &TaskId::new("rec", 1))
        .await
        .unwrap();
    assert_eq!(starts(&started, 2, 1).await, vec![changed[1].clone()]);
    let answered: Vec<Config> = Herder::task_configs(herder.as_ref(), "rec")
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.config)
        .collect();
    assert_eq!(answered, changed);

    // Reconfigured: the new task configurations replace the old ones, and the tasks run with them.
    Herder::put_connector_config(herder.as_ref(), "rec", recording_config("b", 1))
        .await
        .unwrap();
    let stored = stored_tasks(store.as_ref(), "rec")
        .await
        .expect("task configs stored");
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0]["topic"], "b");
    assert_eq!(stored[0]["stored"], "2");
    assert_eq!(starts(&started, 3, 1).await, stored);

    // Stopped: no task configurations (as Kafka Connect writes an empty set); resumed: made again.
    Herder::set_target_state(herder.as_ref(), "rec", TargetState::Stopped)
        .await
        .unwrap();
    assert_eq!(stored_tasks(store.as_ref(), "rec").await, Some(Vec::new()));
    Herder::set_target_state(herder.as_ref(), "rec", TargetState::Running)
        .await
        .unwrap();
    let stored = stored_tasks(store.as_ref(), "rec")
        .await
        .expect("task configs stored");
    assert_eq!(stored.len(), 1);
    assert_eq!(starts(&started, 4, 1).await, stored);

    // Deleted: its task configurations are gone with it.
    Herder::delete_connector(herder.as_ref(), "rec")
        .await
        .unwrap();
    assert!(store.snapshot().await.unwrap().connectors.is_empty());
    herder.shutdown().await;
}

#[tokio::test]
async fn command_line_connectors_run_their_tasks_without_reaching_the_config_store() {
    let offsets = Arc::new(MemoryStore::new());
    let sink: Arc<dyn RecordSink> = Arc::new(NoSink);
    let worker = Worker::with_status(
        WorkerSettings::default(),
        offsets.clone(),
        sink,
        Arc::new(MemoryStatusStore::new()),
        "127.0.0.1:8083",
    );
    let store = Arc::new(MarkingStore::default());
    let started = Started::default();
    let plugin_started = started.clone();
    let herder = Arc::new(StandaloneHerder::new(
        worker,
        offsets,
        vec![Plugin::new(["Recording"], move || {
            Box::new(Recording(plugin_started.clone())) as Box<dyn SourceConnector>
        })],
        "127.0.0.1:8083",
        store.clone(),
    ));

    herder.start(vec![recording_config("a", 2)]).await.unwrap();
    let expected = vec![
        Config::from([
            ("task".to_owned(), "0".to_owned()),
            ("topic".to_owned(), "a".to_owned()),
        ]),
        Config::from([
            ("task".to_owned(), "1".to_owned()),
            ("topic".to_owned(), "a".to_owned()),
        ]),
    ];
    assert_eq!(sorted(starts(&started, 0, 2).await), expected);
    let answered: Vec<Config> = Herder::task_configs(herder.as_ref(), "rec")
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.config)
        .collect();
    assert_eq!(answered, expected);
    assert!(store.snapshot().await.unwrap().connectors.is_empty());
    assert_eq!(*store.writes.lock().unwrap(), 0);

    Herder::restart_task(herder.as_ref(), &TaskId::new("rec", 0))
        .await
        .unwrap();
    assert_eq!(starts(&started, 2, 1).await, vec![expected[0].clone()]);
    Herder::put_connector_config(herder.as_ref(), "rec", recording_config("b", 1))
        .await
        .unwrap();
    assert_eq!(starts(&started, 3, 1).await[0]["topic"], "b");
    assert!(store.snapshot().await.unwrap().connectors.is_empty());
    herder.shutdown().await;
}

fn recording_herder(store: Arc<dyn ConfigBackingStore>, started: &Started) -> StandaloneHerder {
    let offsets = Arc::new(MemoryStore::new());
    let sink: Arc<dyn RecordSink> = Arc::new(NoSink);
    let worker = Worker::with_status(
        WorkerSettings::default(),
        offsets.clone(),
        sink,
        Arc::new(MemoryStatusStore::new()),
        "127.0.0.1:8083",
    );
    let plugin_started = started.clone();
    StandaloneHerder::new(
        worker,
        offsets,
        vec![Plugin::new(["Recording"], move || {
            Box::new(Recording(plugin_started.clone())) as Box<dyn SourceConnector>
        })],
        "127.0.0.1:8083",
        store,
    )
}

#[tokio::test]
async fn the_connectors_file_keeps_its_format_and_task_configurations_are_made_again_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("connectors.json");
    let started = Started::default();
    let store = Arc::new(FileConfigStore::open(&path).unwrap());
    let herder = recording_herder(store.clone(), &started);
    herder
        .create_connector("rec", recording_config("a", 2), TargetState::Running)
        .await
        .unwrap();
    assert_eq!(
        stored_tasks(store.as_ref(), "rec").await.map(|t| t.len()),
        Some(2)
    );
    // Task configurations live in memory only (as in Kafka Connect standalone): the file is v1.
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"version": 1, "connectors": {"rec": {
            "config": recording_config("a", 2),
            "state": "RUNNING"
        }}})
    );
    herder.shutdown().await;

    // Restarted: the connector makes its task configurations again and they go to the store.
    let store = Arc::new(FileConfigStore::open(&path).unwrap());
    assert_eq!(stored_tasks(store.as_ref(), "rec").await, None);
    let herder = recording_herder(store.clone(), &started);
    herder.start(Vec::new()).await.unwrap();
    let stored = stored_tasks(store.as_ref(), "rec")
        .await
        .expect("made again");
    assert_eq!(stored.len(), 2);
    assert_eq!(sorted(starts(&started, 2, 2).await), stored);
    herder.shutdown().await;
}
