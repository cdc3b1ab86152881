//! The config and status stores: what is put is what a snapshot (or a reopened file) gives back, a
//! failed write changes nothing, and a status of an older generation never overwrites a newer one.

use std::sync::Arc;

use ferry_api::Config;
use ferry_runtime::stores::{
    ConfigBackingStore, FileConfigStore, MemoryConfigStore, MemoryStatusStore, State,
    StatusBackingStore, StatusEntry,
};
use ferry_runtime::{TargetState, TaskId};

fn config(name: &str, topic: &str) -> Config {
    Config::from([
        ("name".to_owned(), name.to_owned()),
        ("connector.class".to_owned(), "FileStreamSource".to_owned()),
        ("topic".to_owned(), topic.to_owned()),
    ])
}

/// Puts, changes and removes connectors; checks every step through `snapshot`.
async fn round_trip(store: &dyn ConfigBackingStore) {
    let empty = store.snapshot().await.expect("snapshot");
    assert!(empty.connectors.is_empty());

    store
        .put_connector_config("a", &config("a", "t1"), TargetState::Running)
        .await
        .expect("put a");
    store
        .put_connector_config("b", &config("b", "t2"), TargetState::Paused)
        .await
        .expect("put b");
    let tasks = vec![config("a", "t1"), config("a", "t1")];
    store.put_task_configs("a", &tasks).await.expect("tasks");
    store
        .put_target_state("b", TargetState::Stopped)
        .await
        .expect("target");
    let snapshot = store.snapshot().await.expect("snapshot");
    assert!(
        snapshot.version > empty.version,
        "every change moves the version"
    );
    assert_eq!(snapshot.connectors.keys().collect::<Vec<_>>(), ["a", "b"]);
    let a = &snapshot.connectors["a"];
    assert_eq!(a.config, config("a", "t1"));
    assert_eq!(a.target, TargetState::Running);
    assert_eq!(a.tasks.as_deref(), Some(tasks.as_slice()));
    assert_eq!(snapshot.connectors["b"].target, TargetState::Stopped);
    assert_eq!(snapshot.connectors["b"].tasks, None);

    // A new configuration makes the old task configurations stale.
    store
        .put_connector_config("a", &config("a", "t9"), TargetState::Running)
        .await
        .expect("reconfigure a");
    let snapshot = store.snapshot().await.expect("snapshot");
    assert_eq!(snapshot.connectors["a"].config, config("a", "t9"));
    assert_eq!(snapshot.connectors["a"].tasks, None);

    // An unchanged put is no change.
    let version = snapshot.version;
    store
        .put_connector_config("a", &config("a", "t9"), TargetState::Running)
        .await
        .expect("same again");
    assert_eq!(store.snapshot().await.expect("snapshot").version, version);

    let unknown = store
        .put_target_state("nope", TargetState::Paused)
        .await
        .expect_err("unknown connector");
    assert!(unknown.to_string().contains("nope"), "{unknown}");

    store.remove_connector_config("b").await.expect("remove");
    let snapshot = store.snapshot().await.expect("snapshot");
    assert_eq!(snapshot.connectors.keys().collect::<Vec<_>>(), ["a"]);
}

#[tokio::test]
async fn the_memory_config_store_gives_back_what_was_put() {
    round_trip(&MemoryConfigStore::new()).await;
}

#[tokio::test]
async fn the_file_config_store_gives_back_what_was_put_and_keeps_it_across_a_reopen() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("connectors.json");
    let store = FileConfigStore::open(&path).expect("open");
    assert_eq!(store.describe(), path.display().to_string());
    round_trip(&store).await;
    store
        .put_target_state("a", TargetState::Paused)
        .await
        .expect("pause a");

    // The file keeps configurations and target states in its v1 format; task configurations are
    // made again by the connector at start, so they are not in the file.
    let text = std::fs::read_to_string(&path).expect("read");
    let json: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(
        json,
        serde_json::json!({"version": 1, "connectors": {"a": {
            "config": {"connector.class": "FileStreamSource", "name": "a", "topic": "t9"},
            "state": "PAUSED"
        }}})
    );
    let reopened = FileConfigStore::open(&path).expect("reopen");
    let snapshot = reopened.snapshot().await.expect("snapshot");
    assert_eq!(snapshot.connectors.len(), 1);
    assert_eq!(snapshot.connectors["a"].config, config("a", "t9"));
    assert_eq!(snapshot.connectors["a"].target, TargetState::Paused);
    assert_eq!(snapshot.connectors["a"].tasks, None);
}

#[tokio::test]
async fn a_failed_file_write_changes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Its directory does not exist: opening reads nothing, every write fails.
    let path = dir.path().join("missing").join("connectors.json");
    let store = FileConfigStore::open(&path).expect("a missing file is an empty store");
    let error = store
        .put_connector_config("a", &config("a", "t"), TargetState::Running)
        .await
        .expect_err("cannot write");
    assert!(
        error.to_string().contains("connectors.json")
            && error
                .to_string()
                .contains("cannot write the connectors file"),
        "{error}"
    );
    let snapshot = store.snapshot().await.expect("snapshot");
    assert!(snapshot.connectors.is_empty(), "{snapshot:?}");
    assert_eq!(snapshot.version, 0);
}

#[test]
fn a_damaged_connectors_file_is_refused_at_open() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("connectors.json");
    std::fs::write(&path, b"{\"version\":1,\"connectors\":").expect("write");
    let error = FileConfigStore::open(&path)
        .expect_err("damaged")
        .to_string();
    assert!(
        error.contains("connectors.json") && error.contains("not valid"),
        "{error}"
    );
}

fn entry(state: State, worker: &str, generation: u32) -> StatusEntry {
    StatusEntry::new(state, worker, generation)
}

#[test]
fn an_older_generation_never_overwrites_a_newer_task_status() {
    let store = MemoryStatusStore::new();
    let id = TaskId::new("c", 0);
    // Nothing stored: any generation is written.
    store.put_task_safe(&id, entry(State::Running, "w1:8083", 5));
    assert_eq!(store.task(&id), Some(entry(State::Running, "w1:8083", 5)));

    // Another worker, older generation (it lost the task in a rebalance): refused.
    store.put_task_safe(&id, entry(State::Unassigned, "w2:8083", 4));
    assert_eq!(store.task(&id), Some(entry(State::Running, "w1:8083", 5)));

    // The same worker may always update its own status, whatever generation it gives.
    store.put_task_safe(&id, entry(State::Paused, "w1:8083", 3));
    assert_eq!(store.task(&id), Some(entry(State::Paused, "w1:8083", 3)));

    // Another worker of the same or a newer generation owns it now.
    store.put_task_safe(&id, entry(State::Failed, "w2:8083", 3).with_trace("boom"));
    assert_eq!(
        store.task(&id),
        Some(entry(State::Failed, "w2:8083", 3).with_trace("boom"))
    );
    store.put_task_safe(&id, entry(State::Running, "w3:8083", 7));
    assert_eq!(store.task(&id), Some(entry(State::Running, "w3:8083", 7)));

    // put_task is unconditional.
    store.put_task(&id, entry(State::Unassigned, "w2:8083", 1));
    assert_eq!(
        store.task(&id),
        Some(entry(State::Unassigned, "w2:8083", 1))
    );
}

#[test]
fn task_statuses_are_listed_per_connector_in_task_order_and_removed_with_it() {
    let store: Arc<dyn StatusBackingStore> = Arc::new(MemoryStatusStore::new());
    for (connector, task) in [("b", 1), ("a", 0), ("b", 0), ("b", 10), ("ba", 0)] {
        store.put_task(&TaskId::new(connector, task), entry(State::Running, "w", 0));
    }
    store.put_connector("b", entry(State::Running, "w", 0));
    let tasks: Vec<usize> = store
        .tasks("b")
        .into_iter()
        .map(|(id, _)| id.task)
        .collect();
    assert_eq!(tasks, [0, 1, 10]);
    assert_eq!(store.connector("b"), Some(entry(State::Running, "w", 0)));

    store.remove_connector("b");
    assert!(store.tasks("b").is_empty());
    assert_eq!(store.connector("b"), None);
    assert_eq!(store.tasks("a").len(), 1);
    assert_eq!(store.tasks("ba").len(), 1);
}
