//! Kafka Connect's KIP-415 delay (`scheduled.rebalance.max.delay.ms`) through static membership, on
//! a real broker (Apache Kafka): member `a` runs in a child process (this test binary, re-run as
//! `static_member_child`) so it can be killed with SIGKILL — no LeaveGroup, no revoke. Rejoining with
//! the same instance id within the hold gives `a` its slots back, and member `b` never gets them;
//! without a rejoin, `b` gets them once the hold passed.
//!
//! tansu 0.6, the broker of earlier rounds, could not run these (its coordinator never ran the
//! assignor again on the cooperative protocol's second round with static members); Apache Kafka can.
#![cfg(test)]

mod store_support;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_kafka::connect::slots::{SlotsConfig, TaskSlots};
use ferry_plugin::{GroupHandler, Slot, TaskId};
use ferry_testkit::KafkaBroker;
use store_support::{own_broker, unique_topic};

/// `bootstrap|group|instance id|hold ms` for the child.
const CHILD_ENV: &str = "FERRY_STATIC_SLOTS_CHILD";
const TASKS: usize = 4;

fn config(bootstrap: &str, group: &str, instance: &str, hold: Duration) -> SlotsConfig {
    let mut config = SlotsConfig::new(bootstrap, group, format!("http://{instance}.example:8083"));
    config.heartbeat_interval = Duration::from_millis(500);
    config.rebalance_timeout = Duration::from_secs(30);
    config.revoke_timeout = Duration::from_secs(20);
    config.replication_factor = 1;
    config.static_member = Some((instance.to_owned(), hold));
    config
}

fn tasks_of(slots: &[Slot]) -> Vec<TaskId> {
    slots
        .iter()
        .filter_map(|s| match s {
            Slot::Task(t) => Some(t.clone()),
            Slot::Leader => None,
        })
        .collect()
}

/// The child's handler: every call on stdout, one line each.
struct Printer;

impl Printer {
    fn print(what: &str, slots: &[Slot]) {
        let tasks: Vec<String> = tasks_of(slots).iter().map(|t| t.task.to_string()).collect();
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "SLOTS {what} {}", tasks.join(","));
        let _ = out.flush();
    }
}

impl GroupHandler for Printer {
    fn assigned(&self, slots: &[Slot]) {
        Self::print("assigned", slots);
    }
    fn revoked(&self, slots: &[Slot]) {
        Self::print("revoked", slots);
    }
    fn lost(&self, slots: &[Slot]) {
        Self::print("lost", slots);
    }
}

#[test]
#[ignore = "the child process of the static membership tests; does nothing on its own"]
fn static_member_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let hold = Duration::from_millis(parts[3].parse().unwrap());
    let config = config(parts[0], parts[1], parts[2], hold);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let slots = TaskSlots::join(config, Arc::new(Printer)).await.unwrap();
        slots.add_connector("c", TASKS).await.unwrap();
        // Runs until the parent kills this process.
        loop {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
    });
}

/// Member `a` in a child process, and what its handler runs (from the child's stdout).
struct ChildMember {
    process: Child,
    running: Arc<Mutex<BTreeSet<usize>>>,
}

impl ChildMember {
    fn spawn(broker: &KafkaBroker, group: &str, hold: Duration) -> Self {
        let mut process = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "static_member_child", "--ignored", "--nocapture"])
            .env(
                CHILD_ENV,
                format!(
                    "{}|{group}|a|{}",
                    broker.bootstrap_servers(),
                    hold.as_millis()
                ),
            )
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = process.stdout.take().unwrap();
        let running = Arc::new(Mutex::new(BTreeSet::new()));
        let seen = Arc::clone(&running);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Some(rest) = line.strip_prefix("SLOTS ") else {
                    continue;
                };
                let (what, list) = rest.split_once(' ').unwrap_or((rest, ""));
                let tasks = list.split(',').filter_map(|t| t.parse::<usize>().ok());
                let mut running = seen.lock().unwrap();
                match what {
                    "assigned" => running.extend(tasks),
                    _ => {
                        for t in tasks {
                            running.remove(&t);
                        }
                    }
                }
            }
        });
        Self { process, running }
    }

    fn running(&self) -> BTreeSet<usize> {
        self.running.lock().unwrap().clone()
    }

    /// SIGKILL: the member neither revokes nor leaves the group.
    fn kill(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

impl Drop for ChildMember {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Member `b`, in this process: its handler's calls, in order, with when they happened.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<(Instant, &'static str, Vec<usize>)>>,
}

impl Recorder {
    fn record(&self, what: &'static str, slots: &[Slot]) {
        let tasks = tasks_of(slots).iter().map(|t| t.task).collect();
        self.events
            .lock()
            .unwrap()
            .push((Instant::now(), what, tasks));
    }

    fn running(&self) -> BTreeSet<usize> {
        let mut running = BTreeSet::new();
        for (_, what, tasks) in self.events.lock().unwrap().iter() {
            match *what {
                "assigned" => running.extend(tasks.iter().copied()),
                _ => {
                    for t in tasks {
                        running.remove(t);
                    }
                }
            }
        }
        running
    }

    /// The tasks `b` was assigned after `since`, and when first.
    fn assigned_since(&self, since: Instant) -> (BTreeSet<usize>, Option<Instant>) {
        let events = self.events.lock().unwrap();
        let mut got = BTreeSet::new();
        let mut first = None;
        for (at, what, tasks) in events.iter() {
            if *at >= since && *what == "assigned" && !tasks.is_empty() {
                got.extend(tasks.iter().copied());
                first.get_or_insert(*at);
            }
        }
        (got, first)
    }
}

impl GroupHandler for Recorder {
    fn assigned(&self, slots: &[Slot]) {
        self.record("assigned", slots);
    }
    fn revoked(&self, slots: &[Slot]) {
        self.record("revoked", slots);
    }
    fn lost(&self, slots: &[Slot]) {
        self.record("lost", slots);
    }
}

async fn wait_for(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    wait_for_or(what, within, &mut done, String::new).await;
}

/// As `wait_for`; a failure also says `state()`.
async fn wait_for_or(
    what: &str,
    within: Duration,
    mut done: impl FnMut() -> bool,
    state: impl Fn() -> String,
) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; {}",
            state()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `a` (a child) and `b` (here) share the connector's slots; returns what `a` runs.
async fn split(
    broker: &KafkaBroker,
    group: &str,
    hold: Duration,
) -> (ChildMember, TaskSlots, Arc<Recorder>, BTreeSet<usize>) {
    let all: BTreeSet<usize> = (0..TASKS).collect();
    let a = ChildMember::spawn(broker, group, hold);
    wait_for("a to run every task", Duration::from_secs(90), || {
        a.running() == all
    })
    .await;
    let recorder = Arc::new(Recorder::default());
    let b = TaskSlots::join(
        config(&broker.bootstrap_servers(), group, "b", hold),
        recorder.clone(),
    )
    .await
    .unwrap();
    b.add_connector("c", TASKS).await.unwrap();
    wait_for_or(
        "a and b to share the tasks",
        Duration::from_secs(90),
        || {
            let (ra, rb) = (a.running(), recorder.running());
            !ra.is_empty() && !rb.is_empty() && ra.is_disjoint(&rb) && (&ra | &rb) == all
        },
        || {
            format!(
                "a runs {:?}; b's handler calls: {:?}",
                a.running(),
                recorder.events.lock().unwrap()
            )
        },
    )
    .await;
    let a_had = a.running();
    (a, b, recorder, a_had)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_static_member_that_rejoins_within_the_hold_gets_its_slots_back() {
    let broker = own_broker();
    let group = unique_topic("static-rejoin");
    let hold = Duration::from_secs(20);
    let (mut a, b, recorder, a_had) = split(&broker, &group, hold).await;

    a.kill();
    let killed = Instant::now();
    let a = ChildMember::spawn(&broker, &group, hold);
    wait_for("a to run its tasks again", hold, || a.running() == a_had).await;
    // Past the hold: b never got a's tasks, a kept them.
    while killed.elapsed() < hold + Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (b_got, _) = recorder.assigned_since(killed);
    assert!(
        b_got.is_disjoint(&a_had),
        "b got {b_got:?} of a's {a_had:?} although a rejoined within the hold"
    );
    assert_eq!(a.running(), a_had);
    drop(a);
    let _ = tokio::task::spawn_blocking(move || b.close(Duration::from_secs(60))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_static_member_that_stays_away_loses_its_slots_after_the_hold() {
    let broker = own_broker();
    let group = unique_topic("static-gone");
    let hold = Duration::from_secs(10);
    let (mut a, b, recorder, a_had) = split(&broker, &group, hold).await;

    a.kill();
    let killed = Instant::now();
    let all: BTreeSet<usize> = (0..TASKS).collect();
    wait_for(
        "b to run every task after the hold",
        hold + Duration::from_secs(60),
        || recorder.running() == all,
    )
    .await;
    let (b_got, first) = recorder.assigned_since(killed);
    assert_eq!(b_got, a_had);
    let waited = first.map(|at| at - killed).unwrap_or_default();
    // The group noticed a's absence only once its session (the hold) expired.
    assert!(
        waited + Duration::from_secs(1) >= hold,
        "b got a's tasks {waited:?} after the kill, before the {hold:?} hold"
    );
    let _ = tokio::task::spawn_blocking(move || b.close(Duration::from_secs(60))).await;
}
