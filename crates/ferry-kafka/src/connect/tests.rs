//! Facts (keys, record sequences, expected results) from Kafka's
//! `connect/runtime/src/test/java/org/apache/kafka/connect/storage/KafkaConfigBackingStoreTest.java`
//! and `KafkaStatusBackingStoreFormatTest.java` / `KafkaStatusBackingStoreTest.java`. Those tests mock
//! the converter, so the value bytes below follow from the schemas in `KafkaConfigBackingStore` /
//! `KafkaStatusBackingStore` and JsonConverter's schemaless output (compact, fields in schema order,
//! an unset optional field as `null`).

use std::collections::BTreeMap;

use super::*;

fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap_or("<not UTF-8>")
}

// ---- config keys ----

#[test]
fn config_keys_of_kafkas_tests_parse_and_print_back() {
    let cases = [
        (
            "connector-connector1",
            ConfigRecordKey::Connector("connector1".into()),
        ),
        (
            "commit-connector2",
            ConfigRecordKey::Commit("connector2".into()),
        ),
        (
            "target-state-connector1",
            ConfigRecordKey::TargetState("connector1".into()),
        ),
        (
            "tasks-fencing-connector1",
            ConfigRecordKey::TaskCount("connector1".into()),
        ),
        (
            "restart-connector-connector1",
            ConfigRecordKey::Restart("connector1".into()),
        ),
        ("session-key", ConfigRecordKey::SessionKey),
        (
            "logger-cluster-org.apache",
            ConfigRecordKey::LoggerCluster("org.apache".into()),
        ),
        (
            "task-connector1-1",
            ConfigRecordKey::Task {
                connector: "connector1".into(),
                task: 1,
            },
        ),
    ];
    for (key, expected) in cases {
        assert_eq!(
            ConfigRecordKey::parse(key).as_ref(),
            Some(&expected),
            "{key}"
        );
        assert_eq!(expected.to_key(), key);
    }
}

#[test]
fn task_keys_take_the_index_after_the_last_dash_so_names_may_contain_dashes() {
    assert_eq!(
        ConfigRecordKey::parse("task-my-jdbc-source-12"),
        Some(ConfigRecordKey::Task {
            connector: "my-jdbc-source".into(),
            task: 12
        })
    );
    // A connector named "connector-x" still has a config key "connector-connector-x".
    assert_eq!(
        ConfigRecordKey::parse("connector-connector-x"),
        Some(ConfigRecordKey::Connector("connector-x".into()))
    );
    // Discarded by Kafka: no index, or not an integer; an unknown prefix.
    for bad in [
        "task-0",
        "task-foo-#",
        "task-foo-",
        "tasks",
        "status-connector-x",
        "other",
    ] {
        assert_eq!(ConfigRecordKey::parse(bad), None, "{bad}");
    }
}

// ---- config values, byte for byte ----

#[test]
fn config_values_are_jsonconverter_bytes() {
    assert_eq!(
        text(&encode_properties(&props(&[(
            "config-key-one",
            "config-value-one"
        )]))),
        r#"{"properties":{"config-key-one":"config-value-one"}}"#
    );
    assert_eq!(
        text(&encode_properties(&props(&[]))),
        r#"{"properties":{}}"#
    );
    assert_eq!(
        text(&encode_properties(&props(&[("a", "x\u{1f}\"\n/é")]))),
        "{\"properties\":{\"a\":\"x\\u001F\\\"\\n/é\"}}",
        "Jackson's escapes: upper-case hex, '/' and non-ASCII as they are"
    );
    assert_eq!(text(&encode_commit(2)), r#"{"tasks":2}"#);
    assert_eq!(text(&encode_commit(0)), r#"{"tasks":0}"#);
    assert_eq!(text(&encode_task_count(6)), r#"{"task-count":6}"#);
    assert_eq!(
        text(&encode_target_state(TargetState::Started)),
        r#"{"state":"STARTED","state.v2":"STARTED"}"#
    );
    assert_eq!(
        text(&encode_target_state(TargetState::Paused)),
        r#"{"state":"PAUSED","state.v2":"PAUSED"}"#
    );
    assert_eq!(
        text(&encode_target_state(TargetState::Stopped)),
        r#"{"state":"PAUSED","state.v2":"STOPPED"}"#,
        "STOPPED is PAUSED for workers that only read `state`"
    );
    let restart = RestartRequest {
        connector: "connector1".into(),
        only_failed: true,
        include_tasks: false,
    };
    assert_eq!(
        text(&encode_restart(&restart)),
        r#"{"include-tasks":false,"only-failed":true}"#
    );
}

#[test]
fn config_values_decode_like_kafka_reads_them() -> Result<(), RecordError> {
    let key = "connector-c";
    let decoded = ConfigRecord::decode(key, Some(&encode_properties(&props(&[("k", "v")]))))?;
    assert_eq!(
        decoded,
        ConfigRecord::Connector("c".into(), Some(props(&[("k", "v")])))
    );
    assert_eq!(
        ConfigRecord::decode(key, None)?,
        ConfigRecord::Connector("c".into(), None)
    );
    // A null property (optional string values in the schema) is dropped.
    assert_eq!(
        ConfigRecord::decode(key, Some(br#"{"properties":{"k":"v","n":null}}"#))?,
        ConfigRecord::Connector("c".into(), Some(props(&[("k", "v")])))
    );
    // Target states: v2 wins; an old worker's record has only `state`.
    for (bytes, state) in [
        (
            &br#"{"state":"PAUSED","state.v2":"STOPPED"}"#[..],
            TargetState::Stopped,
        ),
        (br#"{"state":"PAUSED"}"#, TargetState::Paused),
        (
            br#"{"state":"STARTED","state.v2":null}"#,
            TargetState::Started,
        ),
    ] {
        assert_eq!(
            ConfigRecord::decode("target-state-c", Some(bytes))?,
            ConfigRecord::TargetState("c".into(), Some(state))
        );
    }
    // Restart: a missing flag is false (Kafka's ONLY_FAILED_MISSING / INCLUDE_TASKS_MISSING structs).
    assert_eq!(
        ConfigRecord::decode("restart-connector-c", Some(br#"{"include-tasks":false}"#))?,
        ConfigRecord::Restart(Some(RestartRequest {
            connector: "c".into(),
            only_failed: false,
            include_tasks: false
        }))
    );
    assert_eq!(
        ConfigRecord::decode("restart-connector-c", Some(br#"{"only-failed":true}"#))?,
        ConfigRecord::Restart(Some(RestartRequest {
            connector: "c".into(),
            only_failed: true,
            include_tasks: false
        }))
    );
    assert_eq!(
        ConfigRecord::decode("commit-c", Some(br#"{"tasks":3}"#))?,
        ConfigRecord::Commit("c".into(), Some(3))
    );
    Ok(())
}

#[test]
fn unreadable_config_records_are_errors_that_name_the_key() {
    for (key, value) in [
        ("connector-c", &b"invalid"[..]),
        ("connector-c", br#"{"properties":7}"#),
        ("connector-c", br#"{"properties":{"k":1}}"#),
        ("commit-c", br#"{"tasks":"two"}"#),
        ("commit-c", br#"{"tasks":4294967296}"#),
        ("target-state-c", br#"{"state":"RUNNING"}"#),
        ("target-state-c", br#"{"state.v2":1}"#),
        ("nonsense", br#"{}"#),
    ] {
        let err = ConfigRecord::decode(key, Some(value)).err();
        assert_eq!(
            err.as_ref().map(|e| e.key.as_str()),
            Some(key),
            "{key} {value:?}"
        );
    }
}

// ---- the snapshot fold ----

fn apply(s: &mut ConfigSnapshot, key: &str, value: Option<Vec<u8>>) {
    let result = s.apply_raw(key, value.as_deref());
    assert!(result.is_ok(), "{key}: {result:?}");
}

fn conn(n: &str) -> Option<Vec<u8>> {
    Some(encode_properties(&props(&[("config-key", n)])))
}

#[test]
fn restore_applies_task_configs_only_with_their_commit() {
    // testRestore: a connector config after the commit goes through, a task config after it does not.
    let mut s = ConfigSnapshot::new();
    apply(
        &mut s,
        "tasks-fencing-connector1",
        Some(encode_task_count(6)),
    );
    apply(&mut s, "connector-connector1", conn("one"));
    apply(&mut s, "task-connector1-0", conn("t0"));
    apply(&mut s, "task-connector1-1", conn("t0"));
    apply(&mut s, "connector-connector1", conn("two"));
    apply(&mut s, "commit-connector1", Some(encode_commit(2)));
    apply(
        &mut s,
        "tasks-fencing-connector2",
        Some(encode_task_count(9)),
    );
    apply(&mut s, "connector-connector1", conn("three"));
    apply(&mut s, "task-connector1-0", conn("t1"));

    assert_eq!(s.connectors().collect::<Vec<_>>(), ["connector1"]);
    assert_eq!(s.target_state("connector1"), Some(TargetState::Started));
    assert_eq!(
        s.connector_config("connector1"),
        Some(&props(&[("config-key", "three")]))
    );
    assert_eq!(s.tasks("connector1"), [0, 1]);
    assert_eq!(
        s.task_config("connector1", 0),
        Some(&props(&[("config-key", "t0")]))
    );
    assert_eq!(
        s.task_config("connector1", 1),
        Some(&props(&[("config-key", "t0")]))
    );
    assert_eq!(s.task_count_record("connector2"), Some(9));
    assert_eq!(s.inconsistent().count(), 0);
    assert!(
        s.pending_fencing("connector1"),
        "configs committed after its fencing record"
    );
    assert!(!s.pending_fencing("connector2"));
}

#[test]
fn an_incomplete_commit_marks_the_connector_inconsistent_until_a_complete_one() {
    // testRestoreZeroTasks / compaction: task 0 of a 2-task commit was compacted away.
    let mut s = ConfigSnapshot::new();
    apply(&mut s, "connector-connector1", conn("one"));
    apply(&mut s, "task-connector1-1", conn("t1"));
    apply(&mut s, "commit-connector1", Some(encode_commit(2)));
    assert_eq!(s.inconsistent().collect::<Vec<_>>(), ["connector1"]);
    assert!(
        s.tasks("connector1").is_empty(),
        "no tasks while inconsistent"
    );
    assert_eq!(
        s.task_config("connector1", 1),
        None,
        "nothing of the incomplete set applied"
    );

    // The buffer was cleared: task 1 alone does not complete the next commit.
    apply(&mut s, "task-connector1-0", conn("t0"));
    apply(&mut s, "commit-connector1", Some(encode_commit(2)));
    assert_eq!(s.inconsistent().count(), 1);

    apply(&mut s, "task-connector1-0", conn("t0"));
    apply(&mut s, "task-connector1-1", conn("t1"));
    apply(&mut s, "commit-connector1", Some(encode_commit(2)));
    assert_eq!(s.inconsistent().count(), 0);
    assert_eq!(s.tasks("connector1"), [0, 1]);

    // Fewer tasks: extra buffered ones are allowed, only 0..N-1 count.
    apply(&mut s, "task-connector1-0", conn("u0"));
    apply(&mut s, "commit-connector1", Some(encode_commit(1)));
    assert_eq!(s.tasks("connector1"), [0]);
    assert_eq!(
        s.task_config("connector1", 0),
        Some(&props(&[("config-key", "u0")]))
    );

    apply(&mut s, "commit-connector1", Some(encode_commit(0)));
    assert!(s.tasks("connector1").is_empty());
    assert_eq!(
        s.inconsistent().count(),
        0,
        "zero tasks is a complete commit"
    );
}

#[test]
fn a_connector_tombstone_removes_its_tasks_and_buffered_configs() {
    // testRestoreConnectorDeletion.
    let mut s = ConfigSnapshot::new();
    apply(&mut s, "connector-connector1", conn("one"));
    apply(&mut s, "task-connector1-0", conn("t0"));
    apply(&mut s, "commit-connector1", Some(encode_commit(1)));
    apply(&mut s, "task-connector1-0", conn("t1"));
    apply(&mut s, "connector-connector1", None);
    apply(&mut s, "target-state-connector1", None);
    assert_eq!(s.connectors().count(), 0);
    assert!(s.tasks("connector1").is_empty());
    assert_eq!(s.task_config("connector1", 0), None);
    assert_eq!(s.target_state("connector1"), None);

    // Recreated: the task config buffered before the deletion must not resurface.
    apply(&mut s, "connector-connector1", conn("again"));
    apply(&mut s, "commit-connector1", Some(encode_commit(1)));
    assert_eq!(s.inconsistent().collect::<Vec<_>>(), ["connector1"]);
    assert_eq!(s.task_config("connector1", 0), None);
}

#[test]
fn a_commit_for_a_connector_compacted_away_is_ignored() {
    let mut s = ConfigSnapshot::new();
    apply(&mut s, "task-gone-0", conn("t0"));
    apply(&mut s, "commit-gone", Some(encode_commit(1)));
    assert!(s.tasks("gone").is_empty());
    apply(&mut s, "connector-gone", conn("back"));
    apply(&mut s, "commit-gone", Some(encode_commit(1)));
    assert_eq!(
        s.task_config("gone", 0),
        None,
        "its buffered task was dropped"
    );
}

#[test]
fn target_states_default_to_started_and_a_tombstone_resets_them() {
    // testRestoreTargetState and testRestoreTargetStateUnexpectedDeletion.
    let mut s = ConfigSnapshot::new();
    apply(&mut s, "connector-connector1", conn("one"));
    apply(
        &mut s,
        "target-state-connector1",
        Some(br#"{"state":"PAUSED"}"#.to_vec()),
    );
    apply(
        &mut s,
        "target-state-connector2",
        Some(encode_target_state(TargetState::Stopped)),
    );
    assert_eq!(s.target_state("connector1"), Some(TargetState::Paused));
    assert_eq!(s.target_state("connector2"), Some(TargetState::Stopped));
    apply(&mut s, "target-state-connector1", None);
    assert_eq!(s.target_state("connector1"), Some(TargetState::Started));
    apply(&mut s, "connector-connector1", conn("two"));
    assert_eq!(
        s.target_state("connector1"),
        Some(TargetState::Started),
        "kept"
    );
}

#[test]
fn restart_requests_are_returned_and_bad_records_change_nothing() -> Result<(), RecordError> {
    let mut s = ConfigSnapshot::new();
    apply(&mut s, "connector-c", conn("one"));
    let request = RestartRequest {
        connector: "c".into(),
        only_failed: true,
        include_tasks: true,
    };
    assert_eq!(
        s.apply_raw("restart-connector-c", Some(&encode_restart(&request)))?,
        Some(request)
    );
    let before = s.clone();
    assert!(s.apply_raw("connector-c", Some(b"{not json")).is_err());
    assert!(s.apply_raw("task-c-x", Some(b"{}")).is_err());
    assert_eq!(s, before);
    Ok(())
}

// ---- status records ----

fn status(state: StatusState, worker: &str, generation: i32) -> Status {
    Status {
        state,
        trace: None,
        worker_id: worker.into(),
        generation,
        handoff: None,
    }
}

/// A hand-over step travels in a field of its own that Kafka Connect ignores; the trace stays text
/// for people, and a malformed field is an error rather than a guess.
#[test]
fn a_handoff_is_a_structured_field_of_its_own() -> Result<(), RecordError> {
    let release = Status {
        trace: Some("released to worker b:8083".into()),
        handoff: Some(ferry_plugin::Handoff::ReleasedTo("b:8083".into())),
        ..status(StatusState::Stopped, "a:8083", 3)
    };
    let bytes = encode_status(&release).unwrap_or_default();
    assert_eq!(
        text(&bytes),
        r#"{"state":"STOPPED","trace":"released to worker b:8083","worker_id":"a:8083","generation":3,"ferry_handoff":{"released_to":"b:8083"}}"#
    );
    assert_eq!(Status::decode("status-task-c-0", &bytes)?, release);
    let claim = Status {
        handoff: Some(ferry_plugin::Handoff::ClaimedAfter("a:8083".into())),
        ..status(StatusState::Unassigned, "b:8083", 4)
    };
    let bytes = encode_status(&claim).unwrap_or_default();
    assert_eq!(Status::decode("status-task-c-0", &bytes)?, claim);
    // Only the trace says "released to": that is text, not a hand-over.
    let text_only = br#"{"state":"STOPPED","trace":"released to worker b:8083 (handoff)","worker_id":"a:8083","generation":3}"#;
    assert_eq!(Status::decode("status-task-c-0", text_only)?.handoff, None);
    for bad in [
        r#"{"state":"STOPPED","trace":null,"worker_id":"a","generation":3,"ferry_handoff":"b"}"#,
        r#"{"state":"STOPPED","trace":null,"worker_id":"a","generation":3,"ferry_handoff":{}}"#,
        r#"{"state":"STOPPED","trace":null,"worker_id":"a","generation":3,"ferry_handoff":{"released_to":"b","claimed_after":"c"}}"#,
    ] {
        assert!(
            Status::decode("status-task-c-0", bad.as_bytes()).is_err(),
            "{bad}"
        );
    }
    Ok(())
}

#[test]
fn status_keys_parse_like_kafka() {
    assert_eq!(
        StatusKey::parse("status-connector-foo-source"),
        Some(StatusKey::Connector("foo-source".into()))
    );
    assert_eq!(
        StatusKey::parse("status-task-foo-source-0"),
        Some(StatusKey::Task {
            connector: "foo-source".into(),
            task: 0
        })
    );
    assert_eq!(
        StatusKey::parse("status-topic-foo:connector-bar"),
        Some(StatusKey::Topic {
            topic: "foo".into(),
            connector: "bar".into()
        })
    );
    for key in [
        StatusKey::Connector("a-b".into()),
        StatusKey::Task {
            connector: "a-b".into(),
            task: 7,
        },
        StatusKey::Topic {
            topic: "t".into(),
            connector: "c".into(),
        },
    ] {
        assert_eq!(StatusKey::parse(&key.to_key()), Some(key));
    }
    // readInvalidStatus's keys are all discarded.
    for bad in [
        "status-unknown",
        "status-connector-",
        "status-task-",
        "status-task-foo-source-#",
        "status-topic-",
        "status-topic-:connector-",
        "status-topic-foo-topic:",
        "status-topic-foo-topic:connector-",
    ] {
        assert_eq!(StatusKey::parse(bad), None, "{bad}");
    }
}

#[test]
fn status_values_are_jsonconverter_bytes() -> Result<(), RecordError> {
    let running = status(StatusState::Running, "localhost:8083", 5);
    let bytes = encode_status(&running).unwrap_or_default();
    assert_eq!(
        text(&bytes),
        r#"{"state":"RUNNING","trace":null,"worker_id":"localhost:8083","generation":5}"#
    );
    assert_eq!(Status::decode("status-connector-c", &bytes)?, running);
    let failed = Status {
        trace: Some("java.lang.RuntimeException: boom\n\tat X".into()),
        ..status(StatusState::Failed, "w:1", 0)
    };
    let bytes = encode_status(&failed).unwrap_or_default();
    assert_eq!(
        text(&bytes),
        r#"{"state":"FAILED","trace":"java.lang.RuntimeException: boom\n\tat X","worker_id":"w:1","generation":0}"#
    );
    assert_eq!(Status::decode("status-task-c-0", &bytes)?, failed);
    assert_eq!(
        encode_status(&status(StatusState::Destroyed, "w", 1)),
        None,
        "a tombstone"
    );
    // readInvalidStatusValue.
    assert!(Status::decode("status-connector-c", b"invalid").is_err());
    // The maps of KafkaStatusBackingStoreTest have no "trace" at all.
    assert_eq!(
        Status::decode(
            "status-task-conn-0",
            br#"{"worker_id":"localhost:8083","state":"RUNNING","generation":0}"#
        )?,
        status(StatusState::Running, "localhost:8083", 0)
    );
    assert!(
        Status::decode(
            "status-connector-c",
            br#"{"state":"RUNNING","worker_id":"w"}"#
        )
        .is_err()
    );
    Ok(())
}

#[test]
fn put_safe_writes_only_over_nothing_the_same_worker_or_an_older_generation() {
    // putSafeWithNoPreviousValueIsPropagated / putSafeConnectorIgnoresStaleStatus /
    // putSafeOverridesValueSetBySameWorker of KafkaStatusBackingStoreTest.
    let new = status(StatusState::Unassigned, "localhost:8083", 0);
    assert!(can_write_safely(None, &new));
    assert!(!can_write_safely(
        Some(&status(StatusState::Running, "otherhost:8083", 1)),
        &new
    ));
    assert!(can_write_safely(
        Some(&status(StatusState::Running, "localhost:8083", 1)),
        &new
    ));
    assert!(can_write_safely(
        Some(&status(StatusState::Running, "otherhost:8083", 0)),
        &new
    ));
}

fn put(view: &mut StatusView, key: &str, s: &Status) {
    let result = view.apply_raw(key, encode_status(s).as_deref());
    assert!(result.is_ok(), "{key}: {result:?}");
}

#[test]
fn a_stale_unassigned_never_hides_a_newer_running_task() {
    // readTaskStateShouldIgnoreStaleStatusesFromOtherWorkers (KafkaStatusBackingStoreTest).
    let key = "status-task-conn-0";
    let mut view = StatusView::new();
    let running = status(StatusState::Running, "anotherhost:8083", 10);
    put(&mut view, key, &running);
    put(
        &mut view,
        key,
        &status(StatusState::Unassigned, "localhost:8083", 9),
    );
    assert_eq!(view.task("conn", 0), Some(&running));
    let other_group = status(StatusState::Running, "yetanotherhost:8083", 1);
    put(&mut view, key, &other_group);
    assert_eq!(
        view.task("conn", 0),
        Some(&other_group),
        "an older generation's RUNNING is taken"
    );
    put(&mut view, key, &status(StatusState::Running, "w1", 10));
    put(&mut view, key, &status(StatusState::Unassigned, "w2", 9));
    assert_eq!(
        view.task("conn", 0).map(|s| s.state),
        Some(StatusState::Running)
    );
    put(&mut view, key, &status(StatusState::Unassigned, "w2", 10));
    assert_eq!(view.task("conn", 0).map(|s| s.generation), Some(10));
    assert_eq!(
        view.task("conn", 0).map(|s| s.state),
        Some(StatusState::Running)
    );
    // Anything else is accepted, older generations too (a recreated group starts again at 1).
    put(&mut view, key, &status(StatusState::Failed, "w3", 1));
    assert_eq!(
        view.task("conn", 0).map(|s| s.state),
        Some(StatusState::Failed)
    );
    put(&mut view, key, &status(StatusState::Unassigned, "w2", 11));
    assert_eq!(
        view.task("conn", 0).map(|s| s.state),
        Some(StatusState::Unassigned)
    );
}

#[test]
fn status_tombstones_remove_and_a_connector_tombstone_removes_its_tasks() {
    // deleteConnectorState / deleteTaskState.
    let mut view = StatusView::new();
    put(
        &mut view,
        "status-connector-a-b",
        &status(StatusState::Running, "w", 1),
    );
    put(
        &mut view,
        "status-task-a-b-0",
        &status(StatusState::Running, "w", 1),
    );
    put(
        &mut view,
        "status-task-a-b-1",
        &status(StatusState::Running, "w", 1),
    );
    assert_eq!(view.tasks("a-b").count(), 2);
    assert!(view.apply_raw("status-task-a-b-1", None).is_ok());
    assert_eq!(view.tasks("a-b").map(|(i, _)| i).collect::<Vec<_>>(), [0]);
    assert!(view.apply_raw("status-connector-a-b", None).is_ok());
    assert_eq!(view.connector("a-b"), None);
    assert_eq!(view.tasks("a-b").count(), 0);
    let before = view.clone();
    assert!(
        view.apply_raw("status-task-a-b-0", Some(b"invalid"))
            .is_err()
    );
    assert!(view.apply_raw("status-unknown", Some(b"{}")).is_err());
    assert_eq!(view, before);
}

// KIP-558 active topics: `serializeTopicStatus` writes `Collections.singletonMap("topic", struct)` with
// TOPIC_STATUS_VALUE_SCHEMA_V0 (name, connector, task int32, discoverTimestamp int64).
const TOPIC_STATUS_BYTES: &[u8] =
    br#"{"topic":{"name":"foo","connector":"bar","task":0,"discoverTimestamp":1589286456791}}"#;

fn foo_bar() -> ferry_plugin::TopicStatus {
    ferry_plugin::TopicStatus {
        topic: "foo".into(),
        connector: "bar".into(),
        task: 0,
        discover_timestamp: 1_589_286_456_791,
    }
}

#[test]
fn topic_status_values_are_jsonconverter_bytes() -> Result<(), RecordError> {
    let bytes = encode_topic_status(&foo_bar());
    assert_eq!(text(&bytes), text(TOPIC_STATUS_BYTES));
    assert_eq!(
        decode_topic_status("status-topic-foo:connector-bar", TOPIC_STATUS_BYTES)?,
        foo_bar()
    );
    // A name needing escapes round-trips as Jackson writes it.
    let odd = ferry_plugin::TopicStatus {
        topic: "t\"\\".into(),
        connector: "c".into(),
        task: 3,
        discover_timestamp: -1,
    };
    let bytes = encode_topic_status(&odd);
    assert_eq!(
        text(&bytes),
        r#"{"topic":{"name":"t\"\\","connector":"c","task":3,"discoverTimestamp":-1}}"#
    );
    assert_eq!(decode_topic_status("k", &bytes)?, odd);
    Ok(())
}

#[test]
fn read_and_delete_topic_status() -> Result<(), RecordError> {
    // KafkaStatusBackingStoreFormatTest.readTopicStatus / deleteTopicStatus.
    let key = "status-topic-foo:connector-bar";
    let mut view = StatusView::new();
    view.apply_raw(key, Some(TOPIC_STATUS_BYTES))?;
    assert_eq!(view.topic("bar", "foo"), Some(&foo_bar()));
    assert_eq!(view.topics("bar").count(), 1);
    view.apply_raw(key, None)?;
    assert_eq!(view.topic("bar", "foo"), None);
    assert_eq!(view.topics("bar").count(), 0);
    // An unreadable value changes nothing.
    view.apply_raw(key, Some(TOPIC_STATUS_BYTES))?;
    assert!(view.apply_raw(key, Some(br#"{"topic":3}"#)).is_err());
    assert_eq!(view.topic("bar", "foo"), Some(&foo_bar()));
    Ok(())
}

#[test]
fn active_topics_are_capped_per_connector() -> Result<(), RecordError> {
    let mut view = StatusView::new();
    for i in 0..ferry_plugin::MAX_ACTIVE_TOPICS_PER_CONNECTOR {
        let status = ferry_plugin::TopicStatus {
            topic: format!("t{i}"),
            ..foo_bar()
        };
        let key = format!("status-topic-t{i}:connector-bar");
        view.apply_raw(&key, Some(&encode_topic_status(&status)))?;
    }
    let over = encode_topic_status(&foo_bar());
    assert!(
        view.apply_raw("status-topic-foo:connector-bar", Some(&over))
            .is_err()
    );
    assert_eq!(view.topic("bar", "foo"), None);
    // Rewriting a topic already kept is fine, and another connector has its own cap.
    let again = encode_topic_status(&ferry_plugin::TopicStatus {
        topic: "t0".into(),
        ..foo_bar()
    });
    view.apply_raw("status-topic-t0:connector-bar", Some(&again))?;
    view.apply_raw(
        "status-topic-foo:connector-baz",
        Some(&encode_topic_status(&ferry_plugin::TopicStatus {
            connector: "baz".into(),
            ..foo_bar()
        })),
    )?;
    assert_eq!(
        view.topics("bar").count(),
        ferry_plugin::MAX_ACTIVE_TOPICS_PER_CONNECTOR
    );
    Ok(())
}

#[test]
fn cluster_log_levels_are_jsonconverter_bytes() -> Result<(), RecordError> {
    // KafkaConfigBackingStore.putLoggerLevel: key `logger-cluster-<namespace>`, a LOGGER_LEVEL_V0
    // struct value.
    assert_eq!(
        ConfigRecordKey::LoggerCluster("org.apache.kafka.connect".into()).to_key(),
        "logger-cluster-org.apache.kafka.connect"
    );
    assert_eq!(text(&encode_logger_level("DEBUG")), r#"{"level":"DEBUG"}"#);
    assert_eq!(
        decode_logger_level("logger-cluster-x", br#"{"level":"WARN"}"#)?,
        "WARN"
    );
    assert!(decode_logger_level("logger-cluster-x", br#"{"level":3}"#).is_err());
    Ok(())
}
