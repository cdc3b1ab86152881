//! The standalone herder keeps REST connectors in its config store and writes connector statuses
//! to the worker's status store; a delete removes both.

use std::sync::Arc;
use std::time::Duration;

use ferry_api::{Config, ConfigIssue, ConfigKey, ConnectError, SourceConnector, SourceTask};
use ferry_offsets::MemoryStore;
use ferry_runtime::herder::{Herder, Plugin, StandaloneHerder};
use ferry_runtime::sink::{PendingDelivery, RecordSink, SinkError, SinkErrorKind};
use ferry_runtime::stores::{
    ConfigBackingStore, MemoryConfigStore, MemoryStatusStore, State, StatusBackingStore,
};
use ferry_runtime::{TargetState, Worker, WorkerSettings};

/// A connector with no tasks: its status is the herder's alone.
struct Idle;

impl SourceConnector for Idle {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![ConfigKey::required("topic", "the topic")]
    }

    fn validate(&self, _config: &Config) -> Vec<ConfigIssue> {
        Vec::new()
    }

    fn task_configs(&self, _config: &Config, _max: usize) -> Result<Vec<Config>, ConnectError> {
        Ok(Vec::new())
    }

    fn create_task(&self) -> Box<dyn SourceTask> {
        unreachable!("Idle makes no task configurations")
    }
}

struct NoSink;

#[ferry_api::async_trait]
impl RecordSink for NoSink {
    fn describe(&self) -> String {
        "nothing".into()
    }

    async fn send(&self, _: &ferry_api::SourceRecord) -> Result<PendingDelivery, SinkError> {
        Err(SinkError::new("nothing", SinkErrorKind::Fatal, "unused"))
    }

    async fn flush(&self, _: Duration) -> Result<(), SinkError> {
        Ok(())
    }
}

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
