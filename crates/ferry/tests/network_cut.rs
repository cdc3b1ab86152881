//! A distributed worker cut off from the broker by a real network cut: the worker runs in a network
//! namespace of its own, joined to this one by a veth pair the test makes (`ip netns`, `ip link`),
//! with addresses only on those two links; the broker listens on the host side of the pair. Taking
//! the host side down cuts the worker off; its tasks move to the other workers; bringing the link
//! back reconnects it. Nothing leaves the machine, and the test removes the namespace and the pair.
//!
//! Needs root (CAP_NET_ADMIN) and `ip`; without them the test says so and fails.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod kafka_support;
mod rest_support;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::process::Command;
use std::time::{Duration, Instant};

use ferry_testkit::KafkaBroker;
use kafka_support::{TopicReader, create_topic};
use rdkafka::Message;
use rest_support::Api;
use serde_json::{Value, json};
use support::{DEADLINE, Ferry, Workspace};

/// A network namespace and the veth pair to it; removed on drop.
struct Netns {
    name: String,
    host_if: String,
    host_addr: String,
    ns_addr: String,
}

fn ip(args: &[&str]) {
    let output = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running ip {args:?}: {e} (the test needs iproute2)"));
    assert!(
        output.status.success(),
        "ip {args:?} failed (the test needs root or CAP_NET_ADMIN): {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

impl Netns {
    /// A namespace `ferry-cut-<pid>` with a veth pair: the host side `10.213.<n>.1/30`, the
    /// namespace side `10.213.<n>.2/30` (and the namespace's own loopback).
    fn create() -> Self {
        let pid = std::process::id();
        let n = pid % 250 + 1;
        let netns = Self {
            name: format!("ferry-cut-{pid}"),
            host_if: format!("fc{}h", pid % 1_000_000),
            host_addr: format!("10.213.{n}.1"),
            ns_addr: format!("10.213.{n}.2"),
        };
        let ns_if = format!("fc{}n", pid % 1_000_000);
        ip(&["netns", "add", &netns.name]);
        ip(&[
            "link",
            "add",
            &netns.host_if,
            "type",
            "veth",
            "peer",
            "name",
            &ns_if,
        ]);
        ip(&["link", "set", &ns_if, "netns", &netns.name]);
        ip(&[
            "addr",
            "add",
            &format!("{}/30", netns.host_addr),
            "dev",
            &netns.host_if,
        ]);
        ip(&["link", "set", &netns.host_if, "up"]);
        let exec = |args: &[&str]| {
            let mut all = vec!["netns", "exec", netns.name.as_str(), "ip"];
            all.extend_from_slice(args);
            ip(&all);
        };
        exec(&[
            "addr",
            "add",
            &format!("{}/30", netns.ns_addr),
            "dev",
            &ns_if,
        ]);
        exec(&["link", "set", &ns_if, "up"]);
        exec(&["link", "set", "lo", "up"]);
        netns
    }

    /// Cuts the link (the host side goes down: nothing passes either way).
    fn cut(&self) {
        ip(&["link", "set", &self.host_if, "down"]);
    }

    /// Restores the link.
    fn restore(&self) {
        ip(&["link", "set", &self.host_if, "up"]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace deletes its end of the pair, and with it the host end.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        let _ = Command::new("ip")
            .args(["link", "del", &self.host_if])
            .output();
    }
}

/// Every `(partition, seq)` in the topic, in topic order.
fn sequences(reader: &mut TopicReader) -> Vec<(i64, i64)> {
    reader.read_to_end();
    reader
        .values()
        .iter()
        .map(|v| {
            let v: Value = serde_json::from_str(v).expect("a JSON record");
            (v["partition"].as_i64().unwrap(), v["seq"].as_i64().unwrap())
        })
        .collect()
}

/// Per partition, the highest seq, after asserting there is no gap below it.
fn no_gap(records: &[(i64, i64)]) -> BTreeMap<i64, i64> {
    let mut seen: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
    for (p, s) in records {
        seen.entry(*p).or_default().insert(*s);
    }
    seen.iter()
        .map(|(p, seqs)| {
            let max = *seqs.last().unwrap();
            assert_eq!(
                seqs.len() as i64,
                max + 1,
                "partition {p}: records lost below {max}"
            );
            (*p, max)
        })
        .collect()
}

fn wait<T>(what: &str, logs: &dyn Fn() -> String, mut check: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            start.elapsed() < DEADLINE * 2,
            "timed out waiting for {what}; logs:\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// task → worker id of the RUNNING tasks, as `api` reports them.
fn owners(api: &Api) -> BTreeMap<u64, String> {
    let reply = api.get("/connectors/seq/status");
    if reply.status != 200 {
        return BTreeMap::new();
    }
    reply.json()["tasks"]
        .as_array()
        .map(|tasks| {
            tasks
                .iter()
                .filter(|t| t["state"] == "RUNNING")
                .map(|t| {
                    (
                        t["id"].as_u64().unwrap_or(0),
                        t["worker_id"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A worker cut off from the broker loses its tasks to the others; when the link comes back it
/// commits nothing stale: every task's committed offsets, read in the offsets topic's order, never
/// decrease, and no record is lost.
#[test]
fn a_worker_cut_off_by_the_network_loses_its_tasks_and_commits_nothing_stale_on_reconnect() {
    let netns = Netns::create();
    let broker = KafkaBroker::start_on(&netns.host_addr, &[]).unwrap_or_else(|e| panic!("{e}"));
    let bootstrap = broker.bootstrap_servers();
    let topic = "cut-sequences";
    create_topic(&bootstrap, topic, 1);
    let ws = Workspace::new();
    let worker_file = |name: &str, listener: &str| {
        ws.properties(
            name,
            &[
                ("bootstrap.servers", bootstrap.as_str()),
                ("group.id", "cut"),
                ("config.storage.topic", "cut-configs"),
                ("offset.storage.topic", "cut-offsets"),
                ("status.storage.topic", "cut-status"),
                ("config.storage.replication.factor", "1"),
                ("offset.storage.replication.factor", "1"),
                ("status.storage.replication.factor", "1"),
                ("offset.storage.partitions", "5"),
                ("status.storage.partitions", "2"),
                ("listeners", listener),
                ("session.timeout.ms", "6000"),
                ("rebalance.timeout.ms", "120000"),
                ("heartbeat.interval.ms", "1000"),
                ("scheduled.rebalance.max.delay.ms", "0"),
                ("offset.flush.interval.ms", "300"),
                ("key.converter.schemas.enable", "false"),
                ("value.converter.schemas.enable", "false"),
            ],
        )
    };
    let host_file = worker_file("host.properties", "http://127.0.0.1:0");
    let cut_file = worker_file("cut.properties", &format!("http://{}:0", netns.ns_addr));
    let start_host = |n: usize| {
        Ferry::spawn(
            ws.path(),
            [OsStr::new("distributed"), host_file.as_os_str()],
            &ws.file(&format!("host-{n}.stdout")),
            &ws.file(&format!("host-{n}.stderr")),
        )
    };
    let mut a = start_host(0);
    let mut b = start_host(1);
    let api = Api::new(&a.rest_url());
    let _ = b.rest_url();
    let connector = json!({"name": "seq", "config": {
        "connector.class": "SequenceSource", "tasks.max": "6", "partitions": "6",
        "topic": topic, "throughput": "200"}})
    .to_string();
    let a_log = a.log();
    wait(
        "a leader to accept the connector",
        &|| a_log.clone(),
        || {
            let reply = api.post("/connectors", Some(&connector));
            match reply.status {
                201 => Some(()),
                409 => None,
                _ => panic!("creating the connector: {reply:?}"),
            }
        },
    );
    wait("6 running tasks", &|| a.log(), || {
        (owners(&api).len() == 6).then_some(())
    });

    // The third worker, in the namespace, takes a share.
    let mut cut = Ferry::spawn_in_netns(
        &netns.name,
        ws.path(),
        [OsStr::new("distributed"), cut_file.as_os_str()],
        &ws.file("cut.stdout"),
        &ws.file("cut.stderr"),
    );
    let cut_id = cut.rest_url().trim_start_matches("http://").to_owned();
    let logs = || {
        format!(
            "--- a:\n{}\n--- b:\n{}\n--- cut:\n{}",
            a.log(),
            b.log(),
            cut.log()
        )
    };
    wait("the namespaced worker to run tasks", &logs, || {
        let owners = owners(&api);
        (owners.len() == 6 && owners.values().any(|w| *w == cut_id)).then_some(())
    });
    let mut reader = TopicReader::new(&bootstrap, topic);
    let before = no_gap(&sequences(&mut reader));

    netns.cut();
    let cut_at = Instant::now();
    wait("its tasks to run on the others", &logs, || {
        let owners = owners(&api);
        (owners.len() == 6 && owners.values().all(|w| *w != cut_id)).then_some(())
    });
    eprintln!("tasks moved {:.1?} after the cut", cut_at.elapsed());
    // They go on there.
    let moved = no_gap(&sequences(&mut reader));
    wait("every partition to go on", &logs, || {
        let now = no_gap(&sequences(&mut reader));
        before
            .iter()
            .all(|(p, s)| now.get(p).is_some_and(|n| *n >= s + 100 && *n > moved[p]))
            .then_some(())
    });

    netns.restore();
    // Back in the group, it may get tasks again; every task goes on wherever it runs.
    let restored = no_gap(&sequences(&mut reader));
    wait(
        "every partition to go on after the reconnect",
        &logs,
        || {
            let now = no_gap(&sequences(&mut reader));
            restored
                .iter()
                .all(|(p, s)| now.get(p).is_some_and(|n| *n >= s + 200))
                .then_some(())
        },
    );
    // Cut off once more and stopped while cut off: SIGTERM ends it within seconds (its tasks stop,
    // their final commits give up after offset.flush.timeout.ms), not after the group leave's
    // rebalance.timeout.ms (120 s here), and it commits nothing stale on the way (checked below).
    netns.cut();
    let asked = Instant::now();
    let status = cut.terminate();
    let took = asked.elapsed();
    netns.restore();
    eprintln!("the cut-off worker stopped {took:.1?} after SIGTERM ({status})");
    assert!(
        took < Duration::from_secs(30),
        "the cut-off worker took {took:?} to stop after SIGTERM; its log:\n{}",
        cut.log()
    );
    for ferry in [&mut a, &mut b] {
        ferry.terminate_cleanly();
    }

    let records = sequences(&mut reader);
    no_gap(&records);
    let mut offsets = TopicReader::new(&bootstrap, "cut-offsets");
    offsets.read_to_end();
    let mut positions: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for m in &offsets.messages {
        let (Some(key), Some(value)) = (m.key(), m.payload()) else {
            continue;
        };
        let key: Value = serde_json::from_slice(key).unwrap();
        let value: Value = serde_json::from_slice(value).unwrap();
        let position = value
            .as_object()
            .and_then(|o| o.values().find_map(Value::as_i64))
            .unwrap();
        positions
            .entry(key[1].to_string())
            .or_default()
            .push(position);
    }
    assert_eq!(positions.len(), 6, "{positions:?}");
    for (partition, positions) in positions {
        assert!(
            positions.windows(2).all(|w| w[0] <= w[1]),
            "the committed offsets of {partition} moved backwards (a stale commit): {positions:?}"
        );
    }
    drop(broker);
    drop(netns);
}
