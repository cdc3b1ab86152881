//! The Kafka-backed config and status stores on a real broker (Apache Kafka): what one worker writes, a
//! second worker's store reads from the same topic; task configs apply only with their commit; the
//! topic checks refuse a config topic with several partitions and a topic that is not compacted.
#![cfg(test)]

mod store_support;

use std::collections::BTreeMap;
use std::time::Duration;

use ferry_kafka::connect::{
    ConfigSnapshot, InternalTopicConfig, KafkaConfigBackingStore, KafkaStatusBackingStore, Status,
    StatusState, TargetState, encode_properties,
};
use ferry_plugin::{ConfigBackingStore, TargetState as Target};
use ferry_testkit::KafkaBroker;
use store_support::{
    cleanup_policy, create_topic, shared_broker, unique_topic, wait_for_partitions,
};

fn config(broker: &KafkaBroker, topic: &str) -> InternalTopicConfig {
    let mut config = InternalTopicConfig::new(broker.bootstrap_servers(), topic);
    config.replication_factor = 1;
    config.timeout = Duration::from_secs(30);
    config
}

fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn task_configs(snapshot: &ConfigSnapshot, connector: &str) -> Vec<BTreeMap<String, String>> {
    snapshot
        .tasks(connector)
        .into_iter()
        .map(|t| {
            snapshot
                .task_config(connector, t)
                .cloned()
                .unwrap_or_else(|| panic!("task {t} of {connector} has no config"))
        })
        .collect()
}

async fn open_config(config: &InternalTopicConfig) -> KafkaConfigBackingStore {
    KafkaConfigBackingStore::open(config)
        .await
        .unwrap_or_else(|e| panic!("open config store: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connector_and_task_configs_round_trip_and_a_second_worker_sees_them() {
    let broker = shared_broker();
    let topic = unique_topic("connect-configs");
    let cfg = config(broker, &topic);
    let a = open_config(&cfg).await;
    assert_eq!(
        cleanup_policy(broker, &topic).await.as_deref(),
        Some("compact"),
        "created compacted"
    );
    wait_for_partitions(broker, &topic, 1);
    let b = open_config(&cfg).await;

    let connector = props(&[("connector.class", "Datagen"), ("tasks.max", "2")]);
    let tasks = vec![props(&[("task", "0")]), props(&[("task", "1")])];
    a.put_connector_config("my-conn", &connector, Target::Running)
        .await
        .unwrap();
    a.put_task_configs("my-conn", &tasks).await.unwrap();

    for (who, store) in [("writer", &a), ("second worker", &b)] {
        let snapshot = store.topic_snapshot().await.unwrap();
        assert_eq!(
            snapshot.connectors().collect::<Vec<_>>(),
            ["my-conn"],
            "{who}"
        );
        assert_eq!(
            snapshot.connector_config("my-conn"),
            Some(&connector),
            "{who}"
        );
        assert_eq!(
            snapshot.target_state("my-conn"),
            Some(TargetState::Started),
            "{who}"
        );
        assert_eq!(task_configs(&snapshot, "my-conn"), tasks, "{who}");
    }
    assert_eq!(
        a.topic_snapshot().await.unwrap(),
        b.topic_snapshot().await.unwrap(),
        "both workers fold the same snapshot"
    );

    // The runtime's view of the same topic (the ConfigBackingStore contract).
    let (ra, rb) = (a.snapshot().await.unwrap(), b.snapshot().await.unwrap());
    assert_eq!(ra, rb, "both workers see the same runtime snapshot");
    assert_eq!(
        ra.version, 5,
        "the offset after the last record: target state, connector, 2 tasks, commit"
    );
    let entry = &ra.connectors["my-conn"];
    assert_eq!(entry.config, connector);
    assert_eq!(entry.target, Target::Running);
    assert_eq!(entry.tasks.as_deref(), Some(&tasks[..]));
    a.put_task_configs("my-conn", &[]).await.unwrap();
    assert_eq!(
        b.snapshot().await.unwrap().connectors["my-conn"]
            .tasks
            .as_deref(),
        Some(&[][..]),
        "an empty set (a stopped connector) is a stored set, not none"
    );

    // A store opened later reads the whole topic at open.
    let c = open_config(&cfg).await;
    assert_eq!(c.cached(), a.topic_snapshot().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_configs_are_invisible_until_their_commit_is_written() {
    let broker = shared_broker();
    let cfg = config(broker, &unique_topic("connect-commit"));
    let writer = open_config(&cfg).await;
    let reader = open_config(&cfg).await;
    writer
        .put_connector_config("c", &props(&[("k", "v")]), Target::Running)
        .await
        .unwrap();
    writer
        .put_task_configs("c", &[props(&[("gen", "1")])])
        .await
        .unwrap();
    // A leader that dies between the task records and the commit: the new task configs stay hidden.
    for task in 0..2 {
        writer
            .put_raw(
                &format!("task-c-{task}"),
                Some(encode_properties(&props(&[("gen", "2")]))),
            )
            .await
            .unwrap();
    }
    let snapshot = reader.topic_snapshot().await.unwrap();
    assert_eq!(
        task_configs(&snapshot, "c"),
        [props(&[("gen", "1")])],
        "uncommitted task configs are not visible"
    );
    writer
        .put_raw("commit-c", Some(br#"{"tasks":2}"#.to_vec()))
        .await
        .unwrap();
    let snapshot = reader.topic_snapshot().await.unwrap();
    assert_eq!(
        task_configs(&snapshot, "c"),
        [props(&[("gen", "2")]), props(&[("gen", "2")])],
        "the commit applies them together"
    );
}

/// Reproduces a forwarded `POST /connectors` answered 404 after the leader wrote the connector: a
/// read lists the topic's end as the last stable offset, which stops before another producer's open
/// transaction (a connector owner writing task configurations), so the leader's read-back missed its
/// own record written after that transaction began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_after_a_write_sees_it_while_another_producers_transaction_is_open() {
    use rdkafka::ClientConfig;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

    let broker = shared_broker();
    let topic = unique_topic("connect-read-own-write");
    let cfg = config(broker, &topic);
    let store = open_config(&cfg).await;
    wait_for_partitions(broker, &topic, 1);
    let owner: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap_servers())
        .set("transactional.id", format!("{topic}-owner"))
        .create()
        .expect("a transactional producer");
    owner
        .init_transactions(Duration::from_secs(30))
        .expect("init transactions");
    owner.begin_transaction().expect("begin");
    owner
        .send(
            BaseRecord::to(&topic)
                .key("task-other-0")
                .payload(&encode_properties(&props(&[("gen", "1")]))),
        )
        .map_err(|(e, _)| e)
        .expect("send in the transaction");
    owner.flush(Duration::from_secs(30)).expect("flush");

    store
        .put_connector_config("mine", &props(&[("k", "v")]), Target::Running)
        .await
        .unwrap();
    // The owner commits a moment later, while the read below waits for the store's own write.
    let committer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(1));
        owner
            .commit_transaction(Duration::from_secs(30))
            .expect("commit");
    });
    let snapshot = store.snapshot().await.unwrap();
    committer.join().expect("the committer thread");
    assert!(
        snapshot.connectors.contains_key("mine"),
        "the writer's own read misses its write: {:?}",
        snapshot.connectors.keys().collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_state_round_trips_and_a_tombstone_removes_the_connector() {
    let broker = shared_broker();
    let cfg = config(broker, &unique_topic("connect-target"));
    let a = open_config(&cfg).await;
    let b = open_config(&cfg).await;
    a.put_connector_config("c", &props(&[("k", "v")]), Target::Paused)
        .await
        .unwrap();
    assert_eq!(
        b.topic_snapshot().await.unwrap().target_state("c"),
        Some(TargetState::Paused),
        "written with its target state"
    );
    a.put_connector_config("other", &props(&[("k", "w")]), Target::Running)
        .await
        .unwrap();
    a.put_task_configs("c", &[props(&[("t", "0")])])
        .await
        .unwrap();
    for (target, state) in [
        (Target::Running, TargetState::Started),
        (Target::Stopped, TargetState::Stopped),
        (Target::Paused, TargetState::Paused),
    ] {
        a.put_target_state("c", target).await.unwrap();
        assert_eq!(
            b.topic_snapshot().await.unwrap().target_state("c"),
            Some(state)
        );
        assert_eq!(b.snapshot().await.unwrap().connectors["c"].target, target);
    }
    let err = a
        .put_target_state("never-created", Target::Paused)
        .await
        .err()
        .unwrap_or_else(|| panic!("an unknown connector's target state is refused"));
    assert!(
        err.to_string().contains("\"never-created\" is not stored"),
        "{err}"
    );

    a.remove_connector_config("c").await.unwrap();
    let snapshot = b.topic_snapshot().await.unwrap();
    assert_eq!(snapshot.connectors().collect::<Vec<_>>(), ["other"]);
    assert_eq!(snapshot.connector_config("c"), None);
    assert_eq!(snapshot.target_state("c"), None);
    assert!(snapshot.tasks("c").is_empty());
    assert!(snapshot.task_config("c", 0).is_none());

    // Reopened from the topic alone: the same.
    let reopened = open_config(&cfg).await;
    assert_eq!(reopened.cached(), snapshot);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_topic_with_several_partitions_is_refused() {
    let broker = shared_broker();
    let topic = unique_topic("connect-configs-multi");
    create_topic(broker, &topic, 3, &[("cleanup.policy", "compact")]).await;
    let err = KafkaConfigBackingStore::open(&config(broker, &topic))
        .await
        .err()
        .unwrap_or_else(|| panic!("a config topic with 3 partitions must be refused"));
    let text = err.to_string();
    assert!(!err.retriable, "{text}");
    assert!(
        text.contains(&format!("topic {topic} has 3 partitions")) && text.contains("exactly 1"),
        "{text}"
    );
    assert!(text.contains("config.storage.topic"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_that_are_not_compacted_are_refused() {
    let broker = shared_broker();
    let topic = unique_topic("connect-configs-delete");
    create_topic(broker, &topic, 1, &[("cleanup.policy", "delete")]).await;
    let err = KafkaConfigBackingStore::open(&config(broker, &topic))
        .await
        .err()
        .unwrap_or_else(|| panic!("a config topic with cleanup.policy=delete must be refused"));
    let text = err.to_string();
    assert!(!err.retriable, "{text}");
    assert!(
        text.contains(&format!("topic {topic} has cleanup.policy=delete,"))
            && text.contains("a config topic must have cleanup.policy=compact")
            && text.contains("config.storage.topic"),
        "{text}"
    );

    let topic = unique_topic("connect-status-delete");
    create_topic(broker, &topic, 2, &[("cleanup.policy", "compact,delete")]).await;
    let err = KafkaStatusBackingStore::open(&config(broker, &topic))
        .await
        .err()
        .unwrap_or_else(|| panic!("a status topic with compact,delete must be refused"));
    let text = err.to_string();
    assert!(
        text.contains("a status topic must have cleanup.policy=compact")
            && text.contains("status.storage.topic"),
        "{text}"
    );
    assert_eq!(
        cleanup_policy(broker, &topic).await.as_deref(),
        Some("compact,delete"),
        "the topic was not changed"
    );
}

fn status(state: StatusState, worker: &str, generation: i32) -> Status {
    Status {
        state,
        trace: None,
        worker_id: worker.to_owned(),
        generation,
        handoff: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_round_trip_and_an_older_generation_does_not_overwrite_a_newer_one() {
    let broker = shared_broker();
    let topic = unique_topic("connect-status");
    let cfg = config(broker, &topic);
    let a = KafkaStatusBackingStore::open(&cfg)
        .await
        .unwrap_or_else(|e| panic!("open a: {e}"));
    wait_for_partitions(broker, &topic, 5);
    assert_eq!(
        cleanup_policy(broker, &topic).await.as_deref(),
        Some("compact")
    );
    let b = KafkaStatusBackingStore::open(&cfg)
        .await
        .unwrap_or_else(|e| panic!("open b: {e}"));

    let failed = Status {
        trace: Some("java.lang.RuntimeException: boom\n\tat X".to_owned()),
        ..status(StatusState::Failed, "w1:8083", 3)
    };
    a.write_connector("c", &status(StatusState::Running, "w1:8083", 3))
        .await
        .unwrap();
    a.write_task("c", 0, &failed).await.unwrap();
    a.write_task("c", 1, &status(StatusState::Running, "w1:8083", 3))
        .await
        .unwrap();
    let view = b.view().await.unwrap();
    assert_eq!(
        view.connector("c"),
        Some(&status(StatusState::Running, "w1:8083", 3))
    );
    assert_eq!(view.task("c", 0), Some(&failed), "trace round trips");
    assert_eq!(view.tasks("c").count(), 2);

    // Worker w2, in the newer generation 4, took task 1 over.
    assert!(
        b.write_task_safe("c", 1, &status(StatusState::Running, "w2:8083", 4))
            .await
            .unwrap()
    );
    // w1, still in generation 3, must not overwrite it…
    assert!(
        !a.write_task_safe("c", 1, &status(StatusState::Paused, "w1:8083", 3))
            .await
            .unwrap(),
        "an older generation of another worker is refused"
    );
    assert_eq!(
        b.view().await.unwrap().task("c", 1),
        Some(&status(StatusState::Running, "w2:8083", 4))
    );
    // …while the same worker, or the same or a newer generation, may.
    assert!(
        b.write_task_safe("c", 1, &status(StatusState::Paused, "w2:8083", 4))
            .await
            .unwrap()
    );
    assert!(
        a.write_task_safe("c", 1, &status(StatusState::Running, "w1:8083", 5))
            .await
            .unwrap()
    );
    assert_eq!(
        b.view().await.unwrap().task("c", 1),
        Some(&status(StatusState::Running, "w1:8083", 5))
    );

    // DESTROYED is a tombstone: the connector and its tasks disappear from every reader.
    a.write_connector("c", &status(StatusState::Destroyed, "w1:8083", 5))
        .await
        .unwrap();
    let view = b.view().await.unwrap();
    assert_eq!(view.connector("c"), None);
    assert_eq!(view.tasks("c").count(), 0);
}

/// Refreshes `store` until `seen` holds, for at most 30 s (the writes under test are sent in the
/// background, so there is no acknowledgement to wait for).
async fn refresh_until(store: &KafkaStatusBackingStore, what: &str, seen: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        store.refresh().await.unwrap();
        if seen() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not seen within 30 s: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The runtime's `StatusBackingStore` contract: writes are visible to the writer at once and reach a
/// second worker through the topic; `put_task_safe` keeps an older generation from overwriting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_backing_store_contract_between_two_workers() {
    use ferry_plugin::{State, StatusBackingStore, StatusEntry, TaskId};
    let broker = shared_broker();
    let cfg = config(broker, &unique_topic("connect-status-trait"));
    let a = KafkaStatusBackingStore::open(&cfg).await.unwrap();
    let b = KafkaStatusBackingStore::open(&cfg).await.unwrap();
    let t0 = TaskId::new("c", 0);
    let t1 = TaskId::new("c", 1);

    a.put_connector("c", StatusEntry::new(State::Running, "w1:8083", 3));
    a.put_task(
        &t0,
        StatusEntry::new(State::Failed, "w1:8083", 3).with_trace("boom"),
    );
    a.put_task(&t1, StatusEntry::new(State::Running, "w1:8083", 3));
    assert_eq!(
        a.connector("c"),
        Some(StatusEntry::new(State::Running, "w1:8083", 3)),
        "the writer sees its write at once"
    );
    // The records may sit in different partitions of the status topic: wait for all three.
    refresh_until(&b, "a's three statuses on b", || {
        b.tasks("c").len() == 2 && b.connector("c").is_some()
    })
    .await;
    assert_eq!(
        b.connector("c"),
        Some(StatusEntry::new(State::Running, "w1:8083", 3))
    );
    assert_eq!(
        b.task(&t0),
        Some(StatusEntry::new(State::Failed, "w1:8083", 3).with_trace("boom"))
    );

    // b (w2) took task 1 over in generation 4; a, still in generation 3, may not overwrite it.
    b.put_task_safe(&t1, StatusEntry::new(State::Running, "w2:8083", 4));
    let newer = StatusEntry::new(State::Running, "w2:8083", 4);
    refresh_until(&a, "b's generation-4 status on a", || {
        a.task(&t1).as_ref() == Some(&newer)
    })
    .await;
    a.put_task_safe(&t1, StatusEntry::new(State::Paused, "w1:8083", 3));
    assert_eq!(a.task(&t1), Some(newer.clone()), "refused locally");
    // A later write reaches b; had the refused one been enqueued before it (same producer), it would
    // very likely have arrived too. (Other partition: a strong hint, not an ordering proof; the local
    // view above is the deterministic check.)
    a.put_connector("marker", StatusEntry::new(State::Running, "w1:8083", 3));
    refresh_until(&b, "a's marker on b", || b.connector("marker").is_some()).await;
    assert_eq!(b.task(&t1), Some(newer), "never sent");

    a.remove_connector("c");
    assert_eq!(a.connector("c"), None);
    assert!(a.tasks("c").is_empty());
    refresh_until(&b, "the removal on b", || b.connector("c").is_none()).await;
    assert!(b.tasks("c").is_empty(), "the task statuses went with it");
    let reopened = KafkaStatusBackingStore::open(&cfg).await.unwrap();
    assert!(
        reopened.tasks("c").is_empty() && reopened.connector("c").is_none(),
        "a worker started later does not see them either"
    );
}

/// `catch_up` (what the distributed herder calls around a rebalance): once the writer's catch-up
/// returned, its fire-and-forget writes are durable, and a reader's catch-up sees them — without
/// polling, as a new owner deciding whether to hold a task back needs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catch_up_makes_a_fire_and_forget_write_visible_to_another_worker() {
    use ferry_plugin::{State, StatusBackingStore, StatusEntry, TaskId};
    let broker = shared_broker();
    let cfg = config(broker, &unique_topic("connect-status-catch-up"));
    let a = KafkaStatusBackingStore::open(&cfg).await.unwrap();
    let b = KafkaStatusBackingStore::open(&cfg).await.unwrap();
    let t0 = TaskId::new("c", 0);
    b.catch_up().await.unwrap();
    assert_eq!(b.task(&t0), None);

    a.put_task(&t0, StatusEntry::new(State::Running, "w1:8083", 1));
    a.put_task(&t0, StatusEntry::new(State::Stopped, "w1:8083", 1));
    a.catch_up().await.unwrap();
    b.catch_up().await.unwrap();
    assert_eq!(
        b.task(&t0),
        Some(StatusEntry::new(State::Stopped, "w1:8083", 1)),
        "the writer's last status, seen by the reader's first catch-up after the writer's"
    );
}

/// With a background refresher, a worker learns of another worker's write through `updates()`
/// without asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_signal_another_workers_write() {
    let broker = shared_broker();
    let cfg = config(broker, &unique_topic("connect-updates"));
    let a = std::sync::Arc::new(open_config(&cfg).await);
    let b = open_config(&cfg).await;
    let mut updates = a
        .updates()
        .unwrap_or_else(|| panic!("the Kafka store has updates"));
    a.spawn_refresher(Duration::from_millis(100));
    b.put_connector_config("from-b", &props(&[("k", "v")]), Target::Running)
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(30), async {
        while *updates.borrow_and_update() < 2 {
            updates.changed().await.unwrap();
        }
    })
    .await
    .unwrap_or_else(|_| panic!("a was not told of b's write within 30 s"));
    assert!(
        a.cached().connector_config("from-b").is_some(),
        "the signalled version is already folded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_settings_fail_before_contacting_the_broker() {
    let mut cfg = InternalTopicConfig::new("127.0.0.1:1", "");
    let err = KafkaConfigBackingStore::open(&cfg).await.err().unwrap();
    assert!(
        err.to_string().contains("config.storage.topic is required"),
        "{err}"
    );
    cfg.topic = "t".to_owned();
    cfg.replication_factor = 0;
    let err = KafkaStatusBackingStore::open(&cfg).await.err().unwrap();
    assert!(
        !err.retriable
            && err
                .to_string()
                .contains("replication factor of the status topic is 0"),
        "{err}"
    );
    cfg.replication_factor = 1;
    cfg.partitions = 0;
    let err = KafkaStatusBackingStore::open(&cfg).await.err().unwrap();
    assert!(err.to_string().contains("at least 1 partition"), "{err}");
}

/// A connector's owner writes its task configurations through a writer fenced by the broker: once
/// the connector's next owner (another worker) opened its writer, the old owner — a zombie that woke
/// up — can write neither task configurations nor a task count record, and none of what it tried is
/// visible; the new owner's writes are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_connector_owner_writes_no_task_configurations() {
    let broker = shared_broker();
    let topic = unique_topic("connect-owner");
    let cfg = config(broker, &topic);
    let (a, b) = (open_config(&cfg).await, open_config(&cfg).await);
    a.put_connector_config("c", &props(&[("k", "v")]), Target::Running)
        .await
        .unwrap();
    let id = format!("{topic}-c-configs");
    let old = a.open_task_config_writer("c", &id).await.unwrap().unwrap();
    old.put_task_configs(&[props(&[("gen", "1")])])
        .await
        .unwrap();
    assert_eq!(
        task_configs(&b.topic_snapshot().await.unwrap(), "c"),
        [props(&[("gen", "1")])]
    );

    // The connector moved to the other worker: its writer fences the old one.
    let new = b.open_task_config_writer("c", &id).await.unwrap().unwrap();
    let refused = old
        .put_task_configs(&[props(&[("gen", "stale")])])
        .await
        .unwrap_err();
    assert!(refused.fenced, "refused as fenced: {refused}");
    assert!(refused.message.contains(&id), "{refused}");
    assert!(old.put_task_count(1).await.unwrap_err().fenced);
    new.put_task_configs(&[props(&[("gen", "2")]), props(&[("gen", "2")])])
        .await
        .unwrap();
    new.put_task_count(2).await.unwrap();
    for store in [&a, &b] {
        assert_eq!(
            task_configs(&store.topic_snapshot().await.unwrap(), "c"),
            [props(&[("gen", "2")]), props(&[("gen", "2")])],
            "only the new owner's task configurations"
        );
    }
}
