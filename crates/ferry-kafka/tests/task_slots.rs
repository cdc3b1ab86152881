//! Task ownership through the slot group on a real broker (Apache Kafka): one member owns every slot; a
//! second member gets a share only after the first revoked exactly those; a member that leaves hands
//! its slots to the survivor; a slow revoke (the final commit) delays the new owner; the leader slot
//! goes to exactly one member, which publishes its URL before it is told. Every handler call goes on
//! one shared timeline, which also checks that no slot (the leader slot included) ever has two live
//! owners.
#![cfg(test)]

mod store_support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_kafka::connect::slots::{SlotsConfig, SlotsError, TaskSlots};
use ferry_plugin::{GroupHandler, Slot, TaskId, WorkerGroup};
use ferry_testkit::KafkaBroker;
use store_support::{own_broker, shared_broker, unique_topic};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Assigned,
    /// The revoke handler started.
    Revoking,
    /// The revoke handler finished (the worker's final commit is done).
    Revoked,
    Lost,
}

#[derive(Debug, Clone)]
struct Event {
    member: &'static str,
    kind: Kind,
    slots: Vec<Slot>,
}

/// The shared timeline, and who runs each slot now.
#[derive(Default)]
struct Timeline {
    events: Vec<Event>,
    live: BTreeMap<Slot, &'static str>,
    overlaps: Vec<String>,
}

type Shared = Arc<Mutex<Timeline>>;

struct Member {
    name: &'static str,
    timeline: Shared,
    /// How long `revoked` takes (a slow stop and final commit).
    revoke_takes: Duration,
}

impl Member {
    fn record(&self, kind: Kind, slots: &[Slot]) {
        let mut t = self.timeline.lock().unwrap();
        for task in slots {
            match kind {
                Kind::Assigned => {
                    if let Some(other) = t.live.insert(task.clone(), self.name) {
                        let msg = format!(
                            "{task:?} assigned to {} while {other} still runs it",
                            self.name
                        );
                        t.overlaps.push(msg);
                    }
                }
                Kind::Revoked | Kind::Lost => {
                    t.live.remove(task);
                }
                Kind::Revoking => {}
            }
        }
        t.events.push(Event {
            member: self.name,
            kind,
            slots: slots.to_vec(),
        });
    }
}

impl GroupHandler for Member {
    fn assigned(&self, slots: &[Slot]) {
        self.record(Kind::Assigned, slots);
    }
    fn revoked(&self, slots: &[Slot]) {
        self.record(Kind::Revoking, slots);
        // Stands for the worker stopping its tasks and committing their offsets.
        std::thread::sleep(self.revoke_takes);
        self.record(Kind::Revoked, slots);
    }
    fn lost(&self, slots: &[Slot]) {
        self.record(Kind::Lost, slots);
    }
}

/// The REST URL member `name` advertises.
fn url_of(name: &str) -> String {
    format!("http://{name}.example:8083")
}

fn config(broker: &KafkaBroker, group: &str, name: &str) -> SlotsConfig {
    let mut config = SlotsConfig::new(broker.bootstrap_servers(), group, url_of(name));
    config.session_timeout = Duration::from_secs(10);
    config.heartbeat_interval = Duration::from_millis(500);
    config.rebalance_timeout = Duration::from_secs(30);
    config.revoke_timeout = Duration::from_secs(20);
    config.replication_factor = 1;
    config
}

async fn join(
    broker: &KafkaBroker,
    group: &str,
    name: &'static str,
    timeline: &Shared,
) -> TaskSlots {
    join_slow(broker, group, name, timeline, Duration::ZERO).await
}

async fn join_slow(
    broker: &KafkaBroker,
    group: &str,
    name: &'static str,
    timeline: &Shared,
    revoke_takes: Duration,
) -> TaskSlots {
    let handler = Arc::new(Member {
        name,
        timeline: Arc::clone(timeline),
        revoke_takes,
    });
    TaskSlots::join(config(broker, group, name), handler)
        .await
        .unwrap_or_else(|e| panic!("{name} join: {e}"))
}

fn tasks(connector: &str, n: usize) -> BTreeSet<TaskId> {
    (0..n).map(|t| TaskId::new(connector, t)).collect()
}

/// Waits (bounded) until `done` holds, then returns; panics with `what` and the timeline otherwise.
async fn wait_for(timeline: &Shared, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; timeline: {:?}",
            timeline.lock().unwrap().events
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The task slots of `slots`.
fn task_slots<'a>(slots: impl IntoIterator<Item = &'a Slot>) -> BTreeSet<TaskId> {
    slots
        .into_iter()
        .filter_map(|s| match s {
            Slot::Task(task) => Some(task.clone()),
            Slot::Leader => None,
        })
        .collect()
}

/// The task slots `member` holds in the group.
fn owned_tasks(slots: &TaskSlots) -> BTreeSet<TaskId> {
    task_slots(&slots.owned())
}

/// The task slots of each `kind` event of `member` that had some, and the index of each such event.
fn events_of(timeline: &Shared, member: &str, kind: Kind) -> Vec<(usize, Vec<TaskId>)> {
    timeline
        .lock()
        .unwrap()
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.member == member && e.kind == kind)
        .map(|(i, e)| (i, task_slots(&e.slots).into_iter().collect::<Vec<_>>()))
        .filter(|(_, tasks)| !tasks.is_empty())
        .collect()
}

/// The indexes of `member`'s `kind` events for the leader slot.
fn leader_events(timeline: &Shared, member: &str, kind: Kind) -> Vec<usize> {
    timeline
        .lock()
        .unwrap()
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.member == member && e.kind == kind && e.slots.contains(&Slot::Leader))
        .map(|(i, _)| i)
        .collect()
}

/// The member whose handler runs the leader slot now.
fn leader(timeline: &Shared) -> Option<&'static str> {
    timeline.lock().unwrap().live.get(&Slot::Leader).copied()
}

fn assert_no_overlap(timeline: &Shared) {
    let t = timeline.lock().unwrap();
    assert!(
        t.overlaps.is_empty(),
        "two live owners: {:?}; timeline: {:#?}",
        t.overlaps,
        t.events
    );
}

/// The task slots whose last handler call for `member` was `assigned` (the handler runs them now).
fn running(timeline: &Shared, member: &str) -> BTreeSet<TaskId> {
    let t = timeline.lock().unwrap();
    task_slots(
        t.live
            .iter()
            .filter(|(_, m)| **m == member)
            .map(|(slot, _)| slot),
    )
}

/// Every slot of `all` run by exactly one of the members, each running some, and each member's
/// `owned()` agreeing with what its handler runs.
fn split_between(timeline: &Shared, a: &TaskSlots, b: &TaskSlots, all: &BTreeSet<TaskId>) -> bool {
    let (ra, rb) = (running(timeline, "a"), running(timeline, "b"));
    !ra.is_empty()
        && !rb.is_empty()
        && ra.is_disjoint(&rb)
        && &(&ra | &rb) == all
        && owned_tasks(a) == ra
        && owned_tasks(b) == rb
}

/// `member` runs exactly `tasks`, and its `owned()` says so too.
fn runs(timeline: &Shared, member: &str, slots: &TaskSlots, tasks: &BTreeSet<TaskId>) -> bool {
    &running(timeline, member) == tasks && &owned_tasks(slots) == tasks
}

/// For every slot `to` got, `from` finished revoking it earlier on the timeline.
fn assert_moved_after_revoke(timeline: &Shared, from: &str, to: &str) -> BTreeSet<TaskId> {
    let revoked = events_of(timeline, from, Kind::Revoked);
    let mut moved = BTreeSet::new();
    for (at, got) in events_of(timeline, to, Kind::Assigned) {
        for task in got {
            let before = revoked.iter().any(|(i, ts)| *i < at && ts.contains(&task));
            let was_ever_from = events_of(timeline, from, Kind::Assigned)
                .iter()
                .any(|(i, ts)| *i < at && ts.contains(&task));
            if was_ever_from {
                assert!(
                    before,
                    "{to} got {task:?} before {from} finished revoking it"
                );
                moved.insert(task);
            }
        }
    }
    moved
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_member_owns_every_slot_of_every_connector() {
    let broker = shared_broker();
    let group = unique_topic("slots-one");
    let timeline = Shared::default();
    let a = join(broker, &group, "a", &timeline).await;
    a.add_connector("orders", 3).await.unwrap();
    wait_for(&timeline, "a to own orders' 3 slots", || {
        runs(&timeline, "a", &a, &tasks("orders", 3))
    })
    .await;
    // A connector created later: its slot topic joins the subscription.
    a.add_connector("users db", 2).await.unwrap();
    let all = &tasks("orders", 3) | &tasks("users db", 2);
    wait_for(&timeline, "a to own both connectors' slots", || {
        runs(&timeline, "a", &a, &all)
    })
    .await;
    assert!(
        events_of(&timeline, "a", Kind::Revoked).is_empty(),
        "nothing moved away from a"
    );
    // Removing a connector revokes its slots.
    a.remove_connector("orders").await.unwrap();
    wait_for(&timeline, "orders' slots revoked", || {
        runs(&timeline, "a", &a, &tasks("users db", 2))
    })
    .await;
    let revoked: BTreeSet<TaskId> = events_of(&timeline, "a", Kind::Revoked)
        .into_iter()
        .flat_map(|(_, t)| t)
        .collect();
    assert_eq!(revoked, tasks("orders", 3));
    a.close(Duration::from_secs(60)).unwrap();
    assert_no_overlap(&timeline);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_tasks_grow_the_slot_topic() {
    let broker = shared_broker();
    let group = unique_topic("slots-grow");
    let timeline = Shared::default();
    let a = join(broker, &group, "a", &timeline).await;
    a.add_connector("c", 2).await.unwrap();
    wait_for(&timeline, "a to own 2 slots", || {
        runs(&timeline, "a", &a, &tasks("c", 2))
    })
    .await;
    a.add_connector("c", 4)
        .await
        .unwrap_or_else(|e| panic!("growing the slot topic: {e}"));
    wait_for(&timeline, "a to own 4 slots", || {
        runs(&timeline, "a", &a, &tasks("c", 4))
    })
    .await;
    // Fewer tasks later: Kafka cannot shrink the topic, the slots stay.
    a.add_connector("c", 3).await.unwrap();
    assert_eq!(owned_tasks(&a), tasks("c", 4));
    a.close(Duration::from_secs(60)).unwrap();
    assert_no_overlap(&timeline);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_member_gets_a_share_only_after_the_first_revoked_exactly_those() {
    let broker = shared_broker();
    let group = unique_topic("slots-two");
    let timeline = Shared::default();
    let all = tasks("c", 4);
    let a = join(broker, &group, "a", &timeline).await;
    a.add_connector("c", 4).await.unwrap();
    wait_for(&timeline, "a to own all slots", || {
        runs(&timeline, "a", &a, &all)
    })
    .await;

    let b = join(broker, &group, "b", &timeline).await;
    b.add_connector("c", 4).await.unwrap();
    wait_for(&timeline, "the slots to be split", || {
        split_between(&timeline, &a, &b, &all)
    })
    .await;

    let moved = assert_moved_after_revoke(&timeline, "a", "b");
    assert_eq!(moved, running(&timeline, "b"), "b's slots all came from a");
    let revoked: BTreeSet<TaskId> = events_of(&timeline, "a", Kind::Revoked)
        .into_iter()
        .flat_map(|(_, t)| t)
        .collect();
    assert_eq!(revoked, owned_tasks(&b), "a revoked exactly what b got");
    assert_no_overlap(&timeline);
    b.close(Duration::from_secs(60)).unwrap();
    a.close(Duration::from_secs(60)).unwrap();
    assert_no_overlap(&timeline);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaving_member_hands_its_slots_to_the_survivor() {
    let broker = shared_broker();
    let group = unique_topic("slots-leave");
    let timeline = Shared::default();
    let all = tasks("c", 4);
    let a = join(broker, &group, "a", &timeline).await;
    a.add_connector("c", 4).await.unwrap();
    wait_for(&timeline, "a to own all slots", || {
        runs(&timeline, "a", &a, &all)
    })
    .await;
    let b = join(broker, &group, "b", &timeline).await;
    b.add_connector("c", 4).await.unwrap();
    wait_for(&timeline, "the slots to be split", || {
        split_between(&timeline, &a, &b, &all)
    })
    .await;
    let b_had = owned_tasks(&b);

    b.close(Duration::from_secs(60)).unwrap();
    let b_revoked: BTreeSet<TaskId> = events_of(&timeline, "b", Kind::Revoked)
        .into_iter()
        .flat_map(|(_, t)| t)
        .collect();
    assert_eq!(
        b_revoked, b_had,
        "closing revoked b's slots through its handler"
    );
    wait_for(&timeline, "a to own all slots again", || {
        runs(&timeline, "a", &a, &all)
    })
    .await;
    assert_eq!(assert_moved_after_revoke(&timeline, "b", "a"), b_had);
    assert!(events_of(&timeline, "a", Kind::Lost).is_empty());
    a.close(Duration::from_secs(60)).unwrap();
    assert_no_overlap(&timeline);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_revoke_delays_the_new_owner_until_it_finished() {
    let broker = shared_broker();
    let group = unique_topic("slots-slow");
    let timeline = Shared::default();
    let all = tasks("c", 2);
    let slow = Duration::from_secs(3);
    let a = join_slow(broker, &group, "a", &timeline, slow).await;
    a.add_connector("c", 2).await.unwrap();
    wait_for(&timeline, "a to own all slots", || {
        runs(&timeline, "a", &a, &all)
    })
    .await;

    let b = join(broker, &group, "b", &timeline).await;
    b.add_connector("c", 2).await.unwrap();
    wait_for(&timeline, "the slots to be split", || {
        split_between(&timeline, &a, &b, &all)
    })
    .await;

    assert_no_overlap(&timeline);
    // While a's handler was "committing", b got nothing: b's first assignment comes after a's revoke
    // finished, not merely after it started.
    let t = timeline.lock().unwrap().events.clone();
    let revoking = t
        .iter()
        .position(|e| e.member == "a" && e.kind == Kind::Revoking)
        .expect("a revoked something");
    let revoked = t
        .iter()
        .position(|e| e.member == "a" && e.kind == Kind::Revoked)
        .expect("a finished revoking");
    let b_assigned = t
        .iter()
        .position(|e| e.member == "b" && e.kind == Kind::Assigned)
        .expect("b got slots");
    assert!(
        revoking < revoked && revoked < b_assigned,
        "b was assigned before a's slow revoke finished: {t:#?}"
    );
    assert_no_overlap(&timeline);
    b.close(Duration::from_secs(60)).unwrap();
    a.close(Duration::from_secs(60)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoke_slower_than_the_revoke_timeout_gives_the_slots_up_at_the_timeout() {
    // The bound: a stuck stop must not hold the group's rebalance (and every other worker) forever.
    let broker = shared_broker();
    let group = unique_topic("slots-bound");
    let timeline = Shared::default();
    let all = tasks("c", 2);
    let mut slow = config(broker, &group, "a");
    slow.revoke_timeout = Duration::from_secs(2);
    let handler = Arc::new(Member {
        name: "a",
        timeline: Arc::clone(&timeline),
        revoke_takes: Duration::from_secs(8),
    });
    let a = TaskSlots::join(slow, handler).await.unwrap();
    a.add_connector("c", 2).await.unwrap();
    wait_for(&timeline, "a to own all slots", || {
        runs(&timeline, "a", &a, &all)
    })
    .await;
    let b = join(broker, &group, "b", &timeline).await;
    b.add_connector("c", 2).await.unwrap();
    wait_for(&timeline, "b to get a slot", || {
        !events_of(&timeline, "b", Kind::Assigned).is_empty()
    })
    .await;
    let b_first = events_of(&timeline, "b", Kind::Assigned)[0].0;
    assert!(
        events_of(&timeline, "a", Kind::Revoked)
            .iter()
            .all(|(i, _)| *i > b_first),
        "b got its slot only after a's handler returned, so the revoke timeout did not bound the wait"
    );
    assert!(!events_of(&timeline, "a", Kind::Revoking).is_empty());
    b.close(Duration::from_secs(60)).unwrap();
    a.close(Duration::from_secs(60)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_are_lost_without_a_revoke_when_the_session_expires() {
    // A member cut off from the coordinator longer than session.timeout.ms: librdkafka declares its
    // assignment lost, so the handler must stop the tasks without the revoke (final commit) path.
    let mut broker = own_broker();
    let group = unique_topic("slots-lost");
    let timeline = Shared::default();
    let all = tasks("c", 2);
    let mut config = config(&broker, &group, "a");
    config.session_timeout = Duration::from_secs(6);
    let handler = Arc::new(Member {
        name: "a",
        timeline: Arc::clone(&timeline),
        revoke_takes: Duration::ZERO,
    });
    let a = TaskSlots::join(config, handler).await.unwrap();
    a.add_connector("c", 2).await.unwrap();
    // The leader slot too: it can come in a later assignment than the task slots, and a broker
    // stopped before it came leaves nothing of it to lose.
    wait_for(&timeline, "a to own all slots, the leader slot too", || {
        runs(&timeline, "a", &a, &all) && !leader_events(&timeline, "a", Kind::Assigned).is_empty()
    })
    .await;

    broker.stop();
    wait_for(
        &timeline,
        "a to lose its slots, the leader slot too",
        || {
            !events_of(&timeline, "a", Kind::Lost).is_empty()
                && !leader_events(&timeline, "a", Kind::Lost).is_empty()
        },
    )
    .await;
    let lost: BTreeSet<TaskId> = events_of(&timeline, "a", Kind::Lost)
        .into_iter()
        .flat_map(|(_, t)| t)
        .collect();
    assert_eq!(lost, all);
    assert!(
        events_of(&timeline, "a", Kind::Revoking).is_empty()
            && leader_events(&timeline, "a", Kind::Revoking).is_empty(),
        "lost slots must not go through revoked (no final commit)"
    );
    assert_eq!(
        leader_events(&timeline, "a", Kind::Lost).len(),
        1,
        "the leader slot was lost too"
    );
    assert!(a.owned().is_empty(), "{:?}", a.owned());

    // Back with the broker, the member rejoins and gets its slots again, the leader slot included.
    broker.restart().unwrap();
    wait_for(&timeline, "a to own all slots again", || {
        runs(&timeline, "a", &a, &all) && leader(&timeline) == Some("a")
    })
    .await;
    a.close(Duration::from_secs(60)).unwrap();
    assert_no_overlap(&timeline);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_while_the_broker_is_down_still_stops_the_tasks_and_finishes() {
    let mut broker = own_broker();
    let group = unique_topic("slots-close-down");
    let timeline = Shared::default();
    let all = tasks("c", 2);
    let a = join(&broker, &group, "a", &timeline).await;
    a.add_connector("c", 2).await.unwrap();
    wait_for(&timeline, "a to own all slots", || {
        runs(&timeline, "a", &a, &all)
    })
    .await;
    broker.stop();
    let closing = tokio::task::spawn_blocking(move || a.close(Duration::from_secs(60)));
    closing.await.unwrap().unwrap();
    // Leaving is a revocation even without a broker: the worker stops its tasks and tries its final
    // commit (which fails while the broker is down; that is the worker's to report).
    let revoked: BTreeSet<TaskId> = events_of(&timeline, "a", Kind::Revoked)
        .into_iter()
        .flat_map(|(_, t)| t)
        .collect();
    assert_eq!(revoked, all);
    assert!(
        running(&timeline, "a").is_empty(),
        "every task stopped (revoked or lost): {:#?}",
        timeline.lock().unwrap().events
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_with_a_stuck_revoke_handler_returns_at_its_timeout() {
    let broker = shared_broker();
    let group = unique_topic("slots-stuck");
    let timeline = Shared::default();
    let mut stuck = config(broker, &group, "a");
    stuck.revoke_timeout = Duration::from_secs(1);
    let handler = Arc::new(Member {
        name: "a",
        timeline: Arc::clone(&timeline),
        revoke_takes: Duration::from_secs(60),
    });
    let a = TaskSlots::join(stuck, handler).await.unwrap();
    a.add_connector("c", 1).await.unwrap();
    wait_for(&timeline, "a to own its slot", || {
        runs(&timeline, "a", &a, &tasks("c", 1))
    })
    .await;
    let started = Instant::now();
    let closing = tokio::task::spawn_blocking(move || a.close(Duration::from_secs(5)));
    let err = closing.await.unwrap().expect_err("the handler is stuck");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "close waited {:?}",
        started.elapsed()
    );
    assert!(
        err.to_string().contains("still running its last call"),
        "{err}"
    );
}

#[tokio::test]
async fn impossible_settings_are_refused_before_joining() {
    struct Nop;
    impl GroupHandler for Nop {
        fn assigned(&self, _: &[Slot]) {}
        fn revoked(&self, _: &[Slot]) {}
        fn lost(&self, _: &[Slot]) {}
    }
    let refused = |config: SlotsConfig| async move {
        TaskSlots::join(config, Arc::new(Nop))
            .await
            .err()
            .expect("refused")
    };
    let new = || SlotsConfig::new("127.0.0.1:1", "g", "http://127.0.0.1:8083");
    let mut config = new();
    config.revoke_timeout = config.rebalance_timeout;
    let err = refused(config).await;
    assert!(
        matches!(err, SlotsError::Config(ref m) if m.contains("revoke timeout")),
        "{err}"
    );
    let mut config = new();
    config.heartbeat_interval = config.session_timeout;
    let err = refused(config).await;
    assert!(
        matches!(err, SlotsError::Config(ref m) if m.contains("heartbeat")),
        "{err}"
    );
    let err = refused(SlotsConfig::new("127.0.0.1:1", "g", "127.0.0.1:8083")).await;
    assert!(
        matches!(err, SlotsError::Config(ref m) if m.contains("http://host:port")),
        "{err}"
    );
    assert_eq!(new().worker_id, "127.0.0.1:8083");
}

/// Whether the group `group` has a committed offset for any of `partitions`.
fn committed_any(broker: &KafkaBroker, group: &str, partitions: &[(String, i32)]) -> bool {
    use rdkafka::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap_servers())
        .set("group.id", group)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for (topic, partition) in partitions {
        tpl.add_partition(topic, *partition);
    }
    let committed = consumer
        .committed_offsets(tpl, Duration::from_secs(30))
        .unwrap();
    committed
        .elements()
        .iter()
        .any(|e| e.offset() != Offset::Invalid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_slot_goes_to_one_member_and_moves_when_it_leaves() {
    let broker = shared_broker();
    let group = unique_topic("slots-leader");
    let timeline = Shared::default();
    let a = join(broker, &group, "a", &timeline).await;
    wait_for(&timeline, "a to become the leader", || {
        leader(&timeline) == Some("a") && a.owned().contains(&Slot::Leader)
    })
    .await;
    // The URL is published before the handler hears of the slot, so it is readable at once.
    assert_eq!(a.leader_url().await.unwrap(), Some(url_of("a")));
    assert!(a.describe().contains(&group), "{}", a.describe());

    let b = join(broker, &group, "b", &timeline).await;
    let all = tasks("c", 3);
    a.add_connector("c", 3).await.unwrap();
    b.add_connector("c", 3).await.unwrap();
    wait_for(&timeline, "the tasks split and one leader", || {
        split_between(&timeline, &a, &b, &all)
            && leader(&timeline).is_some()
            && (a.owned().contains(&Slot::Leader) != b.owned().contains(&Slot::Leader))
    })
    .await;
    let members = [("a", &a), ("b", &b)];
    let (leading, follower) = if leader(&timeline) == Some("a") {
        (members[0], members[1])
    } else {
        (members[1], members[0])
    };
    assert!(leading.1.owned().contains(&Slot::Leader));
    assert!(!follower.1.owned().contains(&Slot::Leader));
    for (name, member) in members {
        assert_eq!(
            member.leader_url().await.unwrap(),
            Some(url_of(leading.0)),
            "{name} reads the leader's URL"
        );
    }
    assert_no_overlap(&timeline);

    // The leader leaves: the other member becomes the leader and every task runs there.
    WorkerGroup::leave(leading.1, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(
        leader_events(&timeline, leading.0, Kind::Revoked).len(),
        1,
        "leaving revoked the leader slot through the handler"
    );
    wait_for(&timeline, "the survivor to lead and run every task", || {
        leader(&timeline) == Some(follower.0) && runs(&timeline, follower.0, follower.1, &all)
    })
    .await;
    assert_eq!(
        follower.1.leader_url().await.unwrap(),
        Some(url_of(follower.0))
    );
    assert_no_overlap(&timeline);

    // Nothing was ever committed through either group (the task group and the leader slot's
    // group): the leader topic's records and the slot partitions are never consumed as a group.
    let slot_topic = ferry_kafka::connect::slots::slot_topic_name(&group, "c").unwrap();
    let leader_topic = ferry_kafka::connect::slots::leader_topic_name(&group).unwrap();
    assert_eq!(leader_topic, format!("{group}-leader"));
    let mut partitions = vec![(leader_topic, 0)];
    partitions.extend((0..3).map(|p| (slot_topic.clone(), p)));
    for group_id in [group.clone(), format!("{group}-leader")] {
        let partitions = partitions.clone();
        let committed =
            tokio::task::spawn_blocking(move || committed_any(broker, &group_id, &partitions))
                .await
                .unwrap();
        assert!(!committed, "the slot groups committed consumer offsets");
    }
    WorkerGroup::leave(follower.1, Duration::from_secs(60))
        .await
        .unwrap();
    drop((a, b));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_leader_record_written_late_is_replaced_by_the_leader() {
    use rdkafka::ClientConfig;
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let broker = shared_broker();
    let group = unique_topic("slots-stale");
    let timeline = Shared::default();
    let a = join(broker, &group, "a", &timeline).await;
    wait_for(&timeline, "a to become the leader", || {
        leader(&timeline) == Some("a")
    })
    .await;
    // A former leader's write that lands after a's (it lost the slot while the write was under way).
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap_servers())
        .create()
        .unwrap();
    let stale = r#"{"url":"http://gone.example:8083","worker_id":"gone.example:8083"}"#;
    producer
        .send(
            FutureRecord::to(&format!("{group}-leader"))
                .key("leader")
                .payload(stale),
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let url = a.leader_url().await.unwrap();
        if url == Some(url_of("a")) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the leader topic still names {url:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    WorkerGroup::leave(&a, Duration::from_secs(60))
        .await
        .unwrap();
}

/// The membership lease (KAFKA-9184): confirmed by the coordinator while the member is in the group
/// (also while it owns slots and another member joins), and no longer once the broker is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_membership_lease_is_confirmed_while_in_the_group_and_expires_without_the_broker() {
    let mut broker = own_broker();
    let group = unique_topic("slots-lease");
    let timeline = Shared::default();
    let mut config = config(&broker, &group, "a");
    config.session_timeout = Duration::from_secs(6);
    let lease = Arc::new(config.membership_lease());
    config.lease = Some(lease.clone());
    assert_eq!(lease.validity(), Duration::from_secs(3));
    let handler = Arc::new(Member {
        name: "a",
        timeline: Arc::clone(&timeline),
        revoke_takes: Duration::ZERO,
    });
    let a = TaskSlots::join(config, handler).await.unwrap();
    a.add_connector("c", 2).await.unwrap();
    wait_for(&timeline, "a to own its slots", || {
        runs(&timeline, "a", &a, &tasks("c", 2))
    })
    .await;
    // Several validity periods: confirmed all along (one commit per heartbeat interval).
    let until = Instant::now() + Duration::from_secs(8);
    let mut oldest = Duration::ZERO;
    while Instant::now() < until {
        oldest = oldest.max(lease.age());
        assert!(
            lease.is_valid(),
            "the lease lapsed in the group: last confirmed {:?} ago",
            lease.age()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        oldest < Duration::from_secs(2),
        "confirmed every heartbeat: {oldest:?}"
    );
    // Another member joins: the rebalance does not make the lease lapse for the member that keeps slots.
    let b = join(&broker, &group, "b", &timeline).await;
    b.add_connector("c", 2).await.unwrap();
    wait_for(&timeline, "b to get a share", || {
        !events_of(&timeline, "b", Kind::Assigned).is_empty()
    })
    .await;
    assert!(lease.is_valid(), "last confirmed {:?} ago", lease.age());
    b.close(Duration::from_secs(60)).unwrap();

    broker.stop();
    let stopped = Instant::now();
    wait_for(&timeline, "the lease to lapse without the broker", || {
        !lease.is_valid()
    })
    .await;
    assert!(
        stopped.elapsed() < Duration::from_secs(6),
        "it lapsed before the session could expire"
    );
    broker.restart().unwrap();
    wait_for(&timeline, "the lease to be confirmed again", || {
        lease.is_valid()
    })
    .await;
    a.close(Duration::from_secs(60)).unwrap();
}
