//! `ferry distributed`: several worker processes on one real broker (Apache Kafka 4.4) share connectors and
//! tasks through a consumer group and Kafka Connect's config, status and offsets topics.
//!
//! Records come from SequenceSource (paced by `throughput`), one source partition per task, into a
//! Kafka topic; each record is `{"partition":p,"seq":n}`, so a reader checks every partition's
//! sequence for a gap (a record lost: never acceptable) and for repeats (duplicates: allowed only
//! where a worker died without committing).
//!
//! The tests share one broker (each cluster names its group, internal topics and records' topic after
//! itself) and each stops every worker it started.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod kafka_support;
mod rest_support;
mod support;
mod tls_support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ferry_testkit::KafkaBroker;
use kafka_support::{TopicReader, create_topic};
use rdkafka::Message;
use rest_support::Api as Client;
use serde_json::{Value, json};
use support::{DEADLINE, Ferry, Workspace, killed_by_sigkill};

/// One broker, one workspace, the workers of one group.
/// A cluster's broker: the test binary's shared one, or one of its own (a test that restarts it).
enum Broker {
    Shared(&'static KafkaBroker),
    Own(Box<KafkaBroker>),
}

impl std::ops::Deref for Broker {
    type Target = KafkaBroker;
    fn deref(&self) -> &KafkaBroker {
        match self {
            Broker::Shared(broker) => broker,
            Broker::Own(broker) => broker,
        }
    }
}

struct Cluster {
    broker: Broker,
    /// The records' topic, `<cluster>-sequences`.
    topic: String,
    ws: Workspace,
    worker_file: PathBuf,
    workers: Vec<Option<Worker>>,
}

struct Worker {
    ferry: Ferry,
    url: String,
}

impl Worker {
    fn client(&self) -> Client {
        Client::new(&self.url)
    }

    /// `host:port`, the worker id in statuses.
    fn id(&self) -> String {
        self.url.trim_start_matches("http://").to_owned()
    }
}

impl Cluster {
    fn new(extra: &[(&str, &str)]) -> Self {
        let broker = KafkaBroker::shared().unwrap_or_else(|e| panic!("{e}"));
        Self::on(Broker::Shared(broker), extra)
    }

    /// A cluster on a broker of its own, which the test may restart.
    fn with_own_broker(extra: &[(&str, &str)]) -> Self {
        let broker = KafkaBroker::start().unwrap_or_else(|e| panic!("{e}"));
        Self::on(Broker::Own(Box::new(broker)), extra)
    }

    fn on(broker: Broker, extra: &[(&str, &str)]) -> Self {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let name = format!(
            "cluster-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let topic = format!("{name}-sequences");
        let ws = Workspace::new();
        create_topic(&broker.bootstrap_servers(), &topic, 1);
        let mut entries = vec![
            ("bootstrap.servers", broker.bootstrap_servers().to_owned()),
            ("group.id", name.clone()),
            ("config.storage.topic", format!("{name}-configs")),
            ("offset.storage.topic", format!("{name}-offsets")),
            ("status.storage.topic", format!("{name}-status")),
            ("config.storage.replication.factor", "1".to_owned()),
            ("offset.storage.replication.factor", "1".to_owned()),
            ("status.storage.replication.factor", "1".to_owned()),
            ("offset.storage.partitions", "5".to_owned()),
            ("status.storage.partitions", "2".to_owned()),
            ("listeners", "http://127.0.0.1:0".to_owned()),
            ("session.timeout.ms", "6000".to_owned()),
            ("heartbeat.interval.ms", "1000".to_owned()),
            ("rebalance.timeout.ms", "30000".to_owned()),
            ("scheduled.rebalance.max.delay.ms", "0".to_owned()),
            ("offset.flush.interval.ms", "300".to_owned()),
            ("offset.flush.timeout.ms", "5000".to_owned()),
            ("task.shutdown.graceful.timeout.ms", "5000".to_owned()),
            ("key.converter.schemas.enable", "false".to_owned()),
            ("value.converter.schemas.enable", "false".to_owned()),
        ];
        for (k, v) in extra {
            entries.retain(|(key, _)| key != k);
            entries.push((k, (*v).to_owned()));
        }
        let entries: Vec<(&str, &str)> = entries.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let worker_file = ws.properties("worker.properties", &entries);
        Self {
            broker,
            topic,
            ws,
            worker_file,
            workers: Vec::new(),
        }
    }

    /// Starts one more worker; returns its index.
    fn start_worker(&mut self) -> usize {
        let n = self.workers.len();
        let mut ferry = Ferry::spawn(
            self.ws.path(),
            [
                std::ffi::OsStr::new("distributed"),
                self.worker_file.as_os_str(),
            ],
            &self.ws.file(&format!("worker-{n}.stdout")),
            &self.ws.file(&format!("worker-{n}.stderr")),
        );
        let url = ferry.rest_url();
        self.workers.push(Some(Worker { ferry, url }));
        n
    }

    fn worker(&mut self, n: usize) -> &mut Worker {
        self.workers[n].as_mut().expect("worker is running")
    }

    fn live(&self) -> impl Iterator<Item = &Worker> {
        self.workers.iter().flatten()
    }

    /// SIGKILL.
    fn kill(&mut self, n: usize) {
        let mut worker = self.workers[n].take().expect("worker is running");
        assert!(killed_by_sigkill(worker.ferry.kill()));
    }

    /// SIGTERM; asserts a clean exit.
    fn stop(&mut self, n: usize) {
        let mut worker = self.workers[n].take().expect("worker is running");
        worker.ferry.terminate_cleanly();
    }

    /// Every live worker's log, for failure messages.
    fn logs(&self) -> String {
        self.workers
            .iter()
            .enumerate()
            .filter_map(|(n, w)| {
                w.as_ref()
                    .map(|w| format!("--- worker {n}:\n{}", w.ferry.log()))
            })
            .collect()
    }

    /// Polls `check` on the first live worker's REST API until it returns `Some`.
    fn wait_until<T>(&self, what: &str, mut check: impl FnMut(&Client) -> Option<T>) -> T {
        let start = Instant::now();
        loop {
            let client = self.live().next().expect("a live worker").client();
            if let Some(value) = check(&client) {
                return value;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "timed out waiting for {what}; logs:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Creates a connector through worker `n`, retrying while the cluster has no leader yet (409
    /// "retry", as Kafka Connect answers during a rebalance).
    fn create(&mut self, n: usize, body: &str) {
        let client = self.worker(n).client();
        self.wait_until("a leader to accept the connector", |_| {
            let reply = client.post("/connectors", Some(body));
            match reply.status {
                201 => Some(()),
                409 if reply.body.contains("retry") => None,
                _ => panic!("creating a connector: {reply:?}"),
            }
        });
    }

    /// Waits until every task of `connector` is RUNNING on a live worker; returns task → worker id.
    fn running_tasks(&self, connector: &str, tasks: usize) -> BTreeMap<usize, String> {
        self.running_on(connector, tasks, 1)
    }

    /// Waits until every task of `connector` is RUNNING on a live worker, spread over at least
    /// `workers` workers; returns task → worker id.
    fn running_on(&self, connector: &str, tasks: usize, workers: usize) -> BTreeMap<usize, String> {
        let live: BTreeSet<String> = self.live().map(Worker::id).collect();
        let what = format!("{tasks} running tasks of {connector} on {workers} or more workers");
        self.wait_until(&what, |client| {
            let reply = client.get(&format!("/connectors/{connector}/status"));
            if reply.status != 200 {
                return None;
            }
            let status = reply.json();
            let owners: BTreeMap<usize, String> = status["tasks"]
                .as_array()?
                .iter()
                .filter(|t| t["state"] == "RUNNING")
                .filter(|t| live.contains(t["worker_id"].as_str().unwrap_or_default()))
                .map(|t| {
                    (
                        usize::try_from(t["id"].as_u64().unwrap_or(0)).unwrap_or(0),
                        t["worker_id"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect();
            let spread: BTreeSet<&String> = owners.values().collect();
            (owners.len() == tasks && spread.len() >= workers).then_some(owners)
        })
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for worker in self.workers.iter_mut().flatten() {
            worker.ferry.kill();
        }
    }
}

fn sequence_connector(name: &str, tasks: usize, throughput: u32, topic: &str) -> String {
    json!({
        "name": name,
        "config": {
            "connector.class": "SequenceSource",
            "tasks.max": tasks.to_string(),
            "partitions": tasks.to_string(),
            "topic": topic,
            "throughput": throughput.to_string(),
        }
    })
    .to_string()
}

/// Every `(partition, seq)` in the topic, in topic order.
fn sequences(reader: &mut TopicReader) -> Vec<(i64, i64)> {
    reader.read_to_end();
    reader
        .values()
        .iter()
        .map(|v| {
            let v: Value = serde_json::from_str(v).expect("a JSON record");
            (
                v["partition"].as_i64().expect("partition"),
                v["seq"].as_i64().expect("seq"),
            )
        })
        .collect()
}

/// Per partition: the highest seq seen, after asserting that every seq from 0 up to it is there.
fn assert_no_gap(records: &[(i64, i64)]) -> BTreeMap<i64, i64> {
    let mut seen: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
    for (p, seq) in records {
        seen.entry(*p).or_default().insert(*seq);
    }
    seen.iter()
        .map(|(p, seqs)| {
            let max = *seqs.last().expect("non-empty");
            let missing: Vec<i64> = (0..=max).filter(|s| !seqs.contains(s)).take(10).collect();
            assert!(
                missing.is_empty(),
                "partition {p}: records lost (gap), first missing seqs {missing:?} of 0..={max}"
            );
            (*p, max)
        })
        .collect()
}

/// Records repeated per partition.
fn duplicates(records: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut seen = BTreeSet::new();
    records
        .iter()
        .filter(|r| !seen.insert(**r))
        .copied()
        .collect()
}

/// Asserts every record is there exactly once: no gap, no repeat; `why` says what should have
/// prevented a repeat.
fn assert_exactly_once(records: &[(i64, i64)], why: &str) {
    assert_no_gap(records);
    let repeated = duplicates(records);
    assert!(
        repeated.is_empty(),
        "{why}, but {} records came again, e.g. {:?}",
        repeated.len(),
        &repeated[..repeated.len().min(10)]
    );
}

/// Waits until every partition `0..partitions` went `by` records past the highest seq read so far.
fn advance(cluster: &Cluster, reader: &mut TopicReader, partitions: i64, by: i64) {
    let max = assert_no_gap(&sequences(reader));
    let at_least = max.values().max().copied().unwrap_or(0) + by;
    wait_progress(cluster, reader, partitions, at_least);
}

/// Waits until every partition `0..partitions` reached at least `at_least` (and checks no gap).
fn wait_progress(cluster: &Cluster, reader: &mut TopicReader, partitions: i64, at_least: i64) {
    let start = Instant::now();
    loop {
        let max = assert_no_gap(&sequences(reader));
        if (0..partitions).all(|p| max.get(&p).is_some_and(|m| *m >= at_least)) {
            return;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "timed out waiting for every partition to reach seq {at_least}: {max:?}; logs:\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn three_workers_share_tasks_and_a_killed_workers_tasks_move_without_a_gap() {
    let mut cluster = Cluster::new(&[]);
    for _ in 0..3 {
        cluster.start_worker();
    }
    cluster.create(0, &sequence_connector("seq", 6, 50, &cluster.topic));
    // Every worker runs a share of the tasks (once the group has settled).
    cluster.running_on("seq", 6, 3);
    // Every worker answers the same status.
    for w in cluster.live() {
        let status = w.client().get("/connectors/seq/status").expect(200);
        assert_eq!(
            status["tasks"].as_array().map(Vec::len),
            Some(6),
            "{status}"
        );
    }

    let mut reader = TopicReader::new(&cluster.broker.bootstrap_servers(), &cluster.topic);
    wait_progress(&cluster, &mut reader, 6, 20);
    let victim = cluster.worker(1).id();
    cluster.kill(1);
    let owners = cluster.running_tasks("seq", 6);
    assert!(
        !owners.values().any(|w| *w == victim),
        "the killed worker's tasks moved: {owners:?}"
    );
    // Every partition goes on past where it was: the moved tasks resumed.
    advance(&cluster, &mut reader, 6, 20);

    // A joining worker gets a share.
    let joined = cluster.start_worker();
    let joined_id = cluster.worker(joined).id();
    cluster.wait_until("the joining worker to run a task", |client| {
        let status = client.get("/connectors/seq/status").json();
        status["tasks"]
            .as_array()?
            .iter()
            .any(|t| t["worker_id"] == joined_id.as_str() && t["state"] == "RUNNING")
            .then_some(())
    });
    advance(&cluster, &mut reader, 6, 10);
    for n in [0, 2, joined] {
        cluster.stop(n);
    }
    assert_no_gap(&sequences(&mut reader));
}

#[test]
fn graceful_stops_and_joins_redeliver_nothing() {
    let mut cluster = Cluster::new(&[]);
    cluster.start_worker();
    cluster.start_worker();
    cluster.create(0, &sequence_connector("seq", 4, 50, &cluster.topic));
    cluster.running_tasks("seq", 4);
    let mut reader = TopicReader::new(&cluster.broker.bootstrap_servers(), &cluster.topic);
    wait_progress(&cluster, &mut reader, 4, 20);
    // A third worker joins: tasks are revoked (stopped, committed) and move.
    cluster.start_worker();
    cluster.wait_until("the joining worker to run a task", |client| {
        let status = client.get("/connectors/seq/status").json();
        let owners: BTreeSet<&str> = status["tasks"]
            .as_array()?
            .iter()
            .filter_map(|t| t["worker_id"].as_str())
            .collect();
        (owners.len() == 3).then_some(())
    });
    cluster.running_tasks("seq", 4);
    advance(&cluster, &mut reader, 4, 20);
    // A worker stops gracefully: its tasks commit before they move.
    cluster.stop(0);
    cluster.running_tasks("seq", 4);
    advance(&cluster, &mut reader, 4, 20);
    let logs = cluster.logs();
    cluster.stop(1);
    cluster.stop(2);
    assert_exactly_once(
        &sequences(&mut reader),
        &format!("joins and graceful stops commit before tasks move; logs:\n{logs}"),
    );
}

#[test]
fn a_full_restart_keeps_connectors_target_states_and_offsets() {
    let mut cluster = Cluster::new(&[]);
    let paused_topic = format!("{}-paused", cluster.topic);
    create_topic(&cluster.broker.bootstrap_servers(), &paused_topic, 1);
    cluster.start_worker();
    cluster.start_worker();
    cluster.create(0, &sequence_connector("seq", 2, 50, &cluster.topic));
    let client = cluster.worker(0).client();
    // A second connector, paused: it must stay paused across the restart.
    let paused = json!({
        "name": "paused",
        "config": {
            "connector.class": "SequenceSource",
            "tasks.max": "1",
            "topic": paused_topic,
            "throughput": "1",
        }
    })
    .to_string();
    client.post("/connectors", Some(&paused)).expect(201);
    cluster.running_tasks("paused", 1);
    client.put("/connectors/paused/pause", None).expect(202);
    cluster.running_tasks("seq", 2);
    let mut reader = TopicReader::new(&cluster.broker.bootstrap_servers(), &cluster.topic);
    wait_progress(&cluster, &mut reader, 2, 20);
    cluster.stop(0);
    cluster.stop(1);
    let stopped_at = assert_no_gap(&sequences(&mut reader));

    cluster.start_worker();
    cluster.start_worker();
    let client = cluster.live().next().expect("a live worker").client();
    let mut names: Vec<String> =
        serde_json::from_value(client.get("/connectors").expect(200)).expect("a list of names");
    names.sort();
    assert_eq!(names, ["paused", "seq"]);
    cluster.running_tasks("seq", 2);
    cluster.wait_until("the paused connector to stay paused", |client| {
        let status = client.get("/connectors/paused/status").json();
        (status["connector"]["state"] == "PAUSED"
            && status["tasks"]
                .as_array()?
                .iter()
                .all(|t| t["state"] == "PAUSED"))
        .then_some(())
    });
    wait_progress(
        &cluster,
        &mut reader,
        2,
        stopped_at.values().max().copied().unwrap_or(0) + 20,
    );
    cluster.stop(2);
    cluster.stop(3);
    assert_exactly_once(
        &sequences(&mut reader),
        "a clean restart resumes after the committed offsets",
    );
}

#[test]
fn two_workers_creating_the_same_connector_get_one_201_and_one_409() {
    let mut cluster = Cluster::new(&[]);
    cluster.start_worker();
    cluster.start_worker();
    let clients: Vec<Client> = cluster.live().map(Worker::client).collect();
    // Wait until each worker's writes reach a leader (a rebalance may still be under way at first).
    // Any answer but 201 or "retry" fails at once: a lost 201 would make every retry a 409 "already
    // exists" (a leader's read-back once missed its own write behind another producer's transaction).
    for n in 0..clients.len() {
        let body = sequence_connector(&format!("warmup-{n}"), 1, 1, &cluster.topic);
        cluster.create(n, &body);
    }
    let body = sequence_connector("same", 1, 10, &cluster.topic);
    let replies: Vec<rest_support::Reply> = std::thread::scope(|s| {
        let handles: Vec<_> = clients
            .iter()
            .map(|c| s.spawn(|| c.post("/connectors", Some(&body))))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("request thread"))
            .collect()
    });
    let mut statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
    statuses.sort_unstable();
    assert_eq!(
        statuses,
        [201, 409],
        "{replies:?}; logs:\n{}",
        cluster.logs()
    );
    let conflict = replies.iter().find(|r| r.status == 409).expect("a 409");
    conflict.expect_error(409, "already exists");
    // Both workers see the one connector.
    for client in &clients {
        cluster.wait_until("the connector on every worker", |_| {
            (client.get("/connectors/same").status == 200).then_some(())
        });
    }
}

#[test]
fn offsets_are_altered_through_any_worker_once_the_connector_is_stopped() {
    let mut cluster = Cluster::new(&[]);
    cluster.start_worker();
    cluster.start_worker();
    cluster.create(0, &sequence_connector("seq", 1, 50, &cluster.topic));
    cluster.running_tasks("seq", 1);
    let mut reader = TopicReader::new(&cluster.broker.bootstrap_servers(), &cluster.topic);
    wait_progress(&cluster, &mut reader, 1, 20);
    let clients: Vec<Client> = cluster.live().map(Worker::client).collect();
    let patch = r#"{"offsets":[{"partition":{"partition":0},"offset":{"seq":99999}}]}"#;
    // Running: refused (Kafka Connect's rule), whichever worker is asked.
    let refused = clients[1].patch("/connectors/seq/offsets", patch);
    assert_eq!(refused.status, 400, "{refused:?}");
    clients[1].put("/connectors/seq/stop", None).expect(204);
    // Once every task reported stopped, the change goes through (served by the leader).
    cluster.wait_until("the offsets change to be accepted", |_| {
        let reply = clients[1].patch("/connectors/seq/offsets", patch);
        match reply.status {
            200 => Some(()),
            400 | 409 => None,
            _ => panic!("altering offsets: {reply:?}"),
        }
    });
    let stopped_at = assert_no_gap(&sequences(&mut reader))[&0];
    let offsets = clients[0].get("/connectors/seq/offsets").expect(200);
    assert_eq!(
        offsets["offsets"][0]["offset"]["seq"], 99999,
        "every worker reads the altered offset: {offsets}"
    );
    clients[0].put("/connectors/seq/resume", None).expect(202);
    cluster.running_tasks("seq", 1);
    cluster.wait_until("the task to resume after the altered offset", |_| {
        let records = sequences(&mut reader);
        records.iter().any(|(_, seq)| *seq >= 100_000).then_some(())
    });
    let records = sequences(&mut reader);
    let after: Vec<i64> = records
        .iter()
        .map(|(_, seq)| *seq)
        .filter(|seq| *seq > stopped_at)
        .collect();
    assert_eq!(
        after.first(),
        Some(&100_000),
        "the first record after the resume: {after:?}"
    );
    cluster.stop(0);
    cluster.stop(1);
}

#[test]
fn workers_with_https_listeners_and_basic_auth_forward_writes_to_each_other() {
    let dir = tempfile::tempdir().unwrap();
    // One certificate for every worker (they all run on 127.0.0.1): without a truststore, forwarding
    // trusts the listener's own chain.
    let (keystore, cert) = tls_support::self_signed(dir.path(), &["127.0.0.1"]);
    let users = dir.path().join("users.properties");
    std::fs::write(&users, "alice: s3cret\n").unwrap();
    let mut cluster = Cluster::new(&[
        ("listeners", "https://127.0.0.1:0"),
        ("listeners.https.ssl.keystore.type", "PEM"),
        (
            "listeners.https.ssl.keystore.location",
            keystore.to_str().unwrap(),
        ),
        ("rest.basic.auth.credentials.file", users.to_str().unwrap()),
    ]);
    cluster.start_worker();
    cluster.start_worker();
    let addrs: Vec<String> = cluster
        .live()
        .map(|w| {
            assert!(w.url.starts_with("https://"), "{}", w.url);
            w.url.trim_start_matches("https://").to_owned()
        })
        .collect();
    let alice = tls_support::basic("alice", "s3cret");
    // One connector created through each worker: one of them is not the leader and forwards it.
    for (n, addr) in addrs.iter().enumerate() {
        let body = sequence_connector(&format!("tls-{n}"), 1, 1, &cluster.topic);
        cluster.wait_until("a write through every worker", |_| {
            let reply = tls_support::request(
                addr,
                &cert,
                "POST",
                "/connectors",
                Some(&alice),
                Some(&body),
            );
            match reply.status {
                201 => Some(()),
                409 if reply.body.contains("retry") => None,
                _ => panic!("creating a connector through {addr}: {reply:?}"),
            }
        });
    }
    for addr in &addrs {
        let list = tls_support::request(addr, &cert, "GET", "/connectors", Some(&alice), None);
        let names: Value = serde_json::from_str(&list.body).unwrap();
        let mut names: Vec<&str> = names
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        names.sort_unstable();
        assert_eq!(names, ["tls-0", "tls-1"], "{list:?}");
        let refused = tls_support::request(addr, &cert, "GET", "/connectors", None, None);
        assert_eq!(refused.status, 401, "{refused:?}");
    }
    // Statuses name workers by their advertised https listener's host:port.
    let worker_id = cluster.wait_until("tls-0 running", |_| {
        let status = tls_support::request(
            &addrs[0],
            &cert,
            "GET",
            "/connectors/tls-0/status",
            Some(&alice),
            None,
        );
        let status: Value = serde_json::from_str(&status.body).unwrap();
        (status["connector"]["state"] == "RUNNING").then(|| {
            status["connector"]["worker_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
    });
    assert!(
        addrs.contains(&worker_id),
        "{worker_id} is not one of {addrs:?}"
    );
}

#[test]
fn patch_through_any_worker_reaches_the_tasks_and_every_worker_is_healthy_with_the_cluster_id() {
    let mut cluster = Cluster::new(&[]);
    cluster.start_worker();
    cluster.start_worker();
    cluster.create(0, &sequence_connector("seq", 2, 10, &cluster.topic));
    cluster.running_tasks("seq", 2);
    let clients: Vec<Client> = cluster.live().map(Worker::client).collect();
    let mut ids = BTreeSet::new();
    for client in &clients {
        let health = client.get("/health").expect(200);
        assert_eq!(health["status"], "healthy", "{health}");
        let root = client.get("/").expect(200);
        let id = root["kafka_cluster_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(!id.is_empty(), "the broker's cluster id: {root}");
        ids.insert(id);
    }
    assert_eq!(ids.len(), 1, "one cluster: {ids:?}");
    // Through each worker in turn (one of them forwards to the leader), retrying a rebalance's 409.
    for (n, client) in clients.iter().enumerate() {
        let throughput = (20 + n).to_string();
        let body = json!({"throughput": throughput}).to_string();
        let info = cluster.wait_until("the patch accepted", |_| {
            let reply = client.patch("/connectors/seq/config/", &body);
            match reply.status {
                200 => Some(reply.json()),
                409 if reply.body.contains("retry") => None,
                _ => panic!("patching through worker {n}: {reply:?}"),
            }
        });
        assert_eq!(info["config"]["throughput"], throughput.as_str(), "{info}");
        cluster.wait_until("the tasks configured with the patch", |c| {
            let tasks = c.get("/connectors/seq/tasks-config").json();
            (tasks["seq-0"]["throughput"] == throughput.as_str()
                && tasks["seq-1"]["throughput"] == throughput.as_str())
            .then_some(())
        });
    }
    let missing = clients[1].patch("/connectors/nope/config", "{}");
    missing.expect_error(404, "Connector nope not found");
}

/// Every `(partition, seq, timestamp ms)` in the topic, in topic order.
fn stamped_sequences(reader: &mut TopicReader) -> Vec<(i64, i64, i64)> {
    reader.read_to_end();
    reader
        .messages
        .iter()
        .map(|m| {
            let v: Value = serde_json::from_slice(m.payload().expect("a value")).expect("JSON");
            let ts = m.timestamp().to_millis().expect("a timestamp");
            (
                v["partition"].as_i64().expect("partition"),
                v["seq"].as_i64().expect("seq"),
                ts,
            )
        })
        .collect()
}

fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock after 1970")
            .as_millis(),
    )
    .expect("ms fit i64")
}

/// Per task partition, the positions committed in the offsets topic, in log order, as a
/// `read_committed` reader sees them.
fn committed_positions(cluster: &Cluster, connector: &str) -> BTreeMap<String, Vec<i64>> {
    let topic = format!("{}-offsets", cluster.topic.trim_end_matches("-sequences"));
    let mut reader = TopicReader::new(&cluster.broker.bootstrap_servers(), &topic);
    reader.read_to_end();
    let mut positions: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for m in &reader.messages {
        let Some(key) = m.key() else { continue };
        let key: Value = serde_json::from_slice(key).expect("a JSON key");
        if key[0] != connector {
            continue;
        }
        let Some(value) = m.payload() else { continue };
        let value: Value = serde_json::from_slice(value).expect("a JSON value");
        let position = value
            .as_object()
            .and_then(|o| o.values().find_map(Value::as_i64))
            .expect("a numeric offset");
        positions
            .entry(key[1].to_string())
            .or_default()
            .push(position);
    }
    positions
}

/// Every record's copies (their timestamps) by `(partition, seq)`, after asserting no gap and that no
/// record stamped at or after `woken_at` repeats an earlier one (what a zombie that woke would send).
fn assert_no_late_repeats(
    reader: &mut TopicReader,
    frozen_at: i64,
    woken_at: i64,
) -> BTreeMap<(i64, i64), Vec<i64>> {
    let records = stamped_sequences(reader);
    assert_no_gap(&records.iter().map(|(p, s, _)| (*p, *s)).collect::<Vec<_>>());
    let mut copies: BTreeMap<(i64, i64), Vec<i64>> = BTreeMap::new();
    for (p, seq, ts) in &records {
        copies.entry((*p, *seq)).or_default().push(*ts);
    }
    let late_repeats: Vec<_> = copies
        .iter()
        .filter(|(_, stamps)| stamps.len() > 1 && stamps.iter().skip(1).any(|ts| *ts >= woken_at))
        .take(10)
        .collect();
    assert!(
        late_repeats.is_empty(),
        "records sent after the frozen worker woke repeat earlier ones (it sent as a zombie): \
         {late_repeats:?} (frozen at {frozen_at}, woken at {woken_at})"
    );
    copies
}

/// Asserts that no committed offset of `connector` ever moved backwards; returns the partitions
/// committed.
fn assert_offsets_never_backwards(cluster: &Cluster, connector: &str) -> usize {
    let positions = committed_positions(cluster, connector);
    let committed = positions.len();
    for (partition, positions) in positions {
        assert!(
            positions.windows(2).all(|w| w[0] <= w[1]),
            "the committed offsets of {partition} moved backwards: {positions:?}"
        );
    }
    committed
}

/// A worker frozen (SIGSTOP) past its session timeout, whose tasks run on the other workers by the
/// time it wakes (SIGCONT): the broker fences it. It sends no record after waking (every record
/// stamped after the wake is new, never a repeat of one sent before it), its tasks' committed offsets
/// never move backwards, and no record is lost. Kafka Connect in at-least-once mode sends a burst of
/// duplicates here (the issue's hostile test measured ~1 100 per moved task).
#[test]
fn a_frozen_worker_whose_tasks_moved_sends_and_commits_nothing_when_it_wakes() {
    frozen_worker_sends_and_commits_nothing_when_it_wakes(false);
}

/// The same with exactly-once delivery: the frozen worker's open transactions were aborted when its
/// tasks' next owners started, and it commits none after waking.
#[test]
fn a_frozen_exactly_once_worker_sends_and_commits_nothing_when_it_wakes() {
    frozen_worker_sends_and_commits_nothing_when_it_wakes(true);
}

fn frozen_worker_sends_and_commits_nothing_when_it_wakes(exactly_once: bool) {
    let mut cluster = if exactly_once {
        Cluster::new(&[("exactly.once.source.support", "enabled")])
    } else {
        Cluster::new(&[])
    };
    for _ in 0..3 {
        cluster.start_worker();
    }
    cluster.create(0, &sequence_connector("seq", 6, 200, &cluster.topic));
    cluster.running_on("seq", 6, 3);
    let mut reader = TopicReader::new(&cluster.broker.bootstrap_servers(), &cluster.topic);
    wait_progress(&cluster, &mut reader, 6, 50);

    let victim = cluster.worker(1).id();
    let frozen_at = now_ms();
    cluster
        .worker(1)
        .ferry
        .signal(rustix::process::Signal::STOP);
    // Its tasks run elsewhere (after its session timed out) and make progress there.
    cluster.wait_until("the frozen worker's tasks to run on the others", |client| {
        let status = client.get("/connectors/seq/status").json();
        let tasks = status["tasks"].as_array()?;
        (tasks.len() == 6
            && tasks
                .iter()
                .all(|t| t["state"] == "RUNNING" && t["worker_id"] != victim.as_str()))
        .then_some(())
    });
    advance(&cluster, &mut reader, 6, 200);
    let woken_at = now_ms();
    cluster
        .worker(1)
        .ferry
        .signal(rustix::process::Signal::CONT);
    // It wakes, finds itself out of the group, rejoins; every task goes on.
    cluster.running_tasks("seq", 6);
    let before = assert_no_gap(&sequences(&mut reader));
    advance_each(&cluster, &mut reader, &before, 200);
    for n in 0..3 {
        cluster.stop(n);
    }

    let copies = assert_no_late_repeats(&mut reader, frozen_at, woken_at);
    // Repeats there may be only of what the frozen worker sent before it froze and had not committed.
    let repeats = copies.values().filter(|stamps| stamps.len() > 1).count();
    eprintln!(
        "records repeated after the handover (sent before the freeze, uncommitted): {repeats}"
    );

    assert_offsets_never_backwards(&cluster, "seq");
}

/// `tasks.max` shrunk while a frozen worker (SIGSTOP) runs a task number that disappears: no next
/// instance of that number opens its `transactional.id`, so the connector's owner fences it once the
/// graceful stop had its time. When the frozen worker wakes, the removed task commits nothing — no
/// partition's committed offsets move backwards, though the partitions it ran are committed further by
/// the tasks that took them over — and it sends nothing.
#[test]
fn a_zombie_of_a_task_removed_by_shrinking_tasks_max_commits_nothing_when_it_wakes() {
    let mut cluster = Cluster::new(&[]);
    cluster.start_worker();
    cluster.start_worker();
    let connector = json!({
        "name": "seq",
        "config": {
            "connector.class": "SequenceSource",
            "tasks.max": "4",
            "partitions": "4",
            "topic": cluster.topic,
            "throughput": "200",
        }
    })
    .to_string();
    cluster.create(0, &connector);
    let owners = cluster.running_on("seq", 4, 2);
    let mut reader = TopicReader::new(&cluster.broker.bootstrap_servers(), &cluster.topic);
    wait_progress(&cluster, &mut reader, 4, 50);

    let victim_id = owners[&3].clone();
    let victim = (0..2)
        .find(|n| cluster.worker(*n).id() == victim_id)
        .expect("task 3 runs on a worker of the cluster");
    let survivor = 1 - victim;
    let (client, survivor_id) = (
        cluster.worker(survivor).client(),
        cluster.worker(survivor).id(),
    );
    let frozen_at = now_ms();
    cluster
        .worker(victim)
        .ferry
        .signal(rustix::process::Signal::STOP);

    // Once the survivor runs all four tasks (the frozen worker left the group; the survivor leads,
    // so the change is not forwarded to the frozen worker), tasks.max shrinks to 2; both tasks run
    // there, and the removed numbers are fenced.
    let start = Instant::now();
    let all_on_survivor = |count: usize| {
        let status = client.get("/connectors/seq/status");
        status.status == 200
            && status.json()["tasks"].as_array().is_some_and(|tasks| {
                tasks.len() == count
                    && tasks
                        .iter()
                        .all(|t| t["state"] == "RUNNING" && t["worker_id"] == survivor_id.as_str())
            })
    };
    while !all_on_survivor(4) {
        assert!(
            start.elapsed() < DEADLINE,
            "the frozen worker's tasks did not move; logs:\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let body = json!({"tasks.max": "2"}).to_string();
    loop {
        if client.patch("/connectors/seq/config", &body).status == 200 {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "tasks.max was not changed; logs:\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    loop {
        let on_survivor = all_on_survivor(2);
        let log = cluster.worker(survivor).ferry.log();
        if on_survivor && log.contains("removed task seq-3 fenced") {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "the 2 tasks did not run on the survivor with the removed ones fenced; logs:\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    advance(&cluster, &mut reader, 4, 200);

    let woken_at = now_ms();
    cluster
        .worker(victim)
        .ferry
        .signal(rustix::process::Signal::CONT);
    // It wakes, finds itself out of the group and its tasks gone, rejoins; the two tasks go on.
    cluster.running_tasks("seq", 2);
    let before = assert_no_gap(&sequences(&mut reader));
    advance_each(&cluster, &mut reader, &before, 200);
    for n in 0..2 {
        cluster.stop(n);
    }

    assert_no_late_repeats(&mut reader, frozen_at, woken_at);
    assert_eq!(
        assert_offsets_never_backwards(&cluster, "seq"),
        4,
        "every partition was committed"
    );
}

/// The broker — this single-node cluster's group coordinator and transaction coordinator — is shut
/// down as an operator would (a controlled shutdown) and started again while an exactly-once
/// connector runs on two workers: the workers lose their coordinator mid-transaction, come back into
/// their group, the restarted coordinator completes or aborts the transactions that were open, the
/// tasks go on, and a `read_committed` reader sees every sequence number of every task exactly once,
/// no gap; no task's committed offsets move backwards.
///
/// Ignored since a fresh-clone CI run of 2026-12-07 (1 failure in 3 runs that day): after the
/// graceful restart too, an open transaction stayed on partition 0 of the offsets topic (last
/// stable offset stuck one below the high watermark), so the tasks' starts waited on it until the
/// deadline — the same symptom as the SIGKILL variant below, failing closed (no duplicate, no
/// loss). Run it with `cargo test -p ferry --test distributed -- --ignored coordinator_restart`.
#[test]
#[ignore = "an open transaction left on the offsets topic after the restart (1 run in 3) stalls task starts; see the comment"]
fn exactly_once_survives_a_coordinator_restart() {
    coordinator_restart(Restart::Graceful);
}

/// The same with the broker SIGKILLed, as a crash would stop it.
///
/// Ignored: it fails in about one run of eight because the restarted broker loses a transaction
/// marker. From a stalled run's data directory (`kafka-dump-log`): task seq-1's transaction
/// {sequences-0, offsets-0} reached PrepareCommit just before the SIGKILL; after the restart the
/// coordinator wrote CompleteCommit (it believed the markers written), but offsets-0 holds no commit
/// marker after that transaction's offset record (offset 96) — the next record is another producer's
/// marker in a later leader epoch. `kafka-transactions.sh` then shows the id Empty at the coordinator
/// and the partition's transaction open forever. Every read past open transactions waits on it and
/// fails retriably (naming the `kafka-transactions.sh abort` command), so no task starts: Ferry fails
/// closed rather than resume from an offset older than the task's own commit. An abort would not
/// restore exactly once either (the records' partition got its commit marker, the offset would be
/// aborted). Not the transaction version: the same stall comes with `transaction.version=1` (2 of 13
/// runs) as with Kafka 4.4's default 2 (2 of 12); both stalled runs on version 2, given 150 s,
/// stayed stalled for over two minutes, past the 60 s `transaction.timeout.ms` of every Ferry
/// producer. On version 1, one run also saw 11 records of one task twice (uninvestigated). Plain
/// librdkafka producers doing what the tasks do (`ferry-kafka/tests/broker_restart.rs`) have not
/// stalled (22 runs), so what of Ferry's pattern the broker trips on is not known yet: the
/// tasks' session expiry and reassignment, the internal topics' other clients, the offsets topic's
/// 5 partitions. Two Ferry bugs this test found are fixed (an exactly-once task reading the store before
/// fencing its previous instance; a read that did not stop at its end). Run it with
/// `cargo test -p ferry --test distributed -- --ignored coordinator_crash`.
#[test]
#[ignore = "a hanging transaction the restarted broker leaves on the offsets topic (1 run in ~8) stalls task starts; see the comment"]
fn exactly_once_survives_a_coordinator_crash() {
    coordinator_restart(Restart::Kill);
}

/// How the broker is restarted.
#[derive(Clone, Copy)]
enum Restart {
    /// A controlled shutdown (SIGTERM), then a start.
    Graceful,
    /// SIGKILL, then a start.
    Kill,
}

fn coordinator_restart(restart: Restart) {
    let mut cluster = Cluster::with_own_broker(&[("exactly.once.source.support", "enabled")]);
    cluster.start_worker();
    cluster.start_worker();
    let connector = json!({
        "name": "seq",
        "config": {
            "connector.class": "SequenceSource",
            "tasks.max": "4",
            "partitions": "4",
            "topic": cluster.topic,
            "throughput": "200",
            "exactly.once.support": "required",
        }
    })
    .to_string();
    cluster.create(0, &connector);
    cluster.running_on("seq", 4, 2);
    let mut reader = TopicReader::new(&cluster.broker.bootstrap_servers(), &cluster.topic);
    wait_progress(&cluster, &mut reader, 4, 50);

    let Broker::Own(broker) = &mut cluster.broker else {
        unreachable!("the cluster has a broker of its own")
    };
    match restart {
        Restart::Graceful => broker.restart_gracefully(),
        Restart::Kill => broker.restart(),
    }
    .unwrap_or_else(|e| panic!("the broker did not come back: {e}"));
    let before = assert_no_gap(&sequences(&mut reader));
    advance_each(&cluster, &mut reader, &before, 200);
    cluster.running_tasks("seq", 4);
    for n in 0..2 {
        cluster.stop(n);
    }
    let records = sequences(&mut reader);
    assert_exactly_once(
        &records,
        "exactly-once delivery across a coordinator restart: a read_committed reader must see each \
         record once",
    );
    assert_offsets_never_backwards(&cluster, "seq");
}

/// Waits until every partition of `before` went `by` records past where it was there (each at its
/// own pace: a task that moved lags the others by its downtime).
fn advance_each(cluster: &Cluster, reader: &mut TopicReader, before: &BTreeMap<i64, i64>, by: i64) {
    let start = Instant::now();
    loop {
        let now = assert_no_gap(&sequences(reader));
        if before
            .iter()
            .all(|(p, seq)| now.get(p).is_some_and(|n| *n >= seq + by))
        {
            return;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "the tasks did not go on: {before:?} → {now:?}; logs:\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// How many workers the exactly-once test SIGKILLs (the issue's 50).
const EXACTLY_ONCE_KILLS: usize = 50;

/// Exactly-once delivery (KIP-618) under SIGKILL: three workers with
/// `exactly.once.source.support=enabled`, SequenceSource with `exactly.once.support=required`; one
/// worker after another is killed and replaced, 50 times. A `read_committed` reader sees every
/// sequence number of every task exactly once — no gap, no duplicate — so each resumed task started
/// right after its last committed record, and nothing a killed worker sent after its last commit
/// became visible.
///
/// It once failed with ~200 records repeated: a task read its offsets only up to the topic's last
/// stable offset, and another task's transaction left open on the same offsets partition (its
/// worker was killed inside it) hid the commits written after it, the task's own last one among
/// them. Reads now wait for such transactions to end (`store_fencing.rs` reproduces it directly).
#[test]
fn exactly_once_survives_sigkills_with_every_record_once() {
    let mut cluster = Cluster::new(&[
        ("exactly.once.source.support", "enabled"),
        ("heartbeat.interval.ms", "500"),
    ]);
    for _ in 0..3 {
        cluster.start_worker();
    }
    let connector = json!({
        "name": "seq",
        "config": {
            "connector.class": "SequenceSource",
            "tasks.max": "6",
            "partitions": "6",
            "topic": cluster.topic,
            "throughput": "200",
            "exactly.once.support": "required",
        }
    })
    .to_string();
    cluster.create(0, &connector);
    cluster.running_on("seq", 6, 3);
    let mut reader = TopicReader::new(&cluster.broker.bootstrap_servers(), &cluster.topic);
    wait_progress(&cluster, &mut reader, 6, 20);
    let started = Instant::now();
    for kill in 0..EXACTLY_ONCE_KILLS {
        let live: Vec<usize> = (0..cluster.workers.len())
            .filter(|n| cluster.workers[*n].is_some())
            .collect();
        let victim = live[kill % live.len()];
        let before = assert_no_gap(&sequences(&mut reader));
        cluster.kill(victim);
        cluster.start_worker();
        // Every task goes on (wherever it runs now) before the next kill.
        advance_each(&cluster, &mut reader, &before, 10);
        eprintln!(
            "kill {}/{EXACTLY_ONCE_KILLS} after {:.0?}",
            kill + 1,
            started.elapsed()
        );
    }
    cluster.running_on("seq", 6, 3);
    let before = assert_no_gap(&sequences(&mut reader));
    advance_each(&cluster, &mut reader, &before, 20);
    let live: Vec<usize> = (0..cluster.workers.len())
        .filter(|n| cluster.workers[*n].is_some())
        .collect();
    for n in live {
        cluster.stop(n);
    }
    let records = sequences(&mut reader);
    assert_exactly_once(
        &records,
        "exactly-once delivery: a read_committed reader must see each record once",
    );
    eprintln!(
        "{} records, each once, across {EXACTLY_ONCE_KILLS} SIGKILLs",
        records.len()
    );
}

/// Per `(partition key, offset value or None for a tombstone)`: every record of `connector` in
/// offsets topic `topic`, in topic order.
fn offset_records(cluster: &Cluster, topic: &str, connector: &str) -> Vec<(String, Option<i64>)> {
    let mut reader = TopicReader::new(&cluster.broker.bootstrap_servers(), topic);
    reader.read_to_end();
    reader
        .messages
        .iter()
        .filter_map(|m| {
            let key: Value = serde_json::from_slice(m.key()?).expect("a JSON key");
            if key[0] != connector {
                return None;
            }
            let position = m.payload().map(|value| {
                let value: Value = serde_json::from_slice(value).expect("a JSON value");
                value
                    .as_object()
                    .and_then(|o| o.values().find_map(Value::as_i64))
                    .expect("a numeric offset")
            });
            Some((key[1].to_string(), position))
        })
        .collect()
}

/// KIP-618's `offsets.storage.topic`: a connector given its own offsets topic resumes from the
/// worker's topic (its own holds nothing yet), commits to its own topic from then on (copied to the
/// worker's, as Kafka Connect does), and a
/// `DELETE /connectors/{c}/offsets` removes the offsets from both topics — the worker's first
/// (KAFKA-15018), so the fallback cannot bring them back: the connector starts over from 0.
#[test]
fn a_connector_with_its_own_offsets_topic_falls_back_to_the_workers_and_a_reset_clears_both() {
    own_offsets_topic(false);
}

/// The same with exactly-once delivery: the offsets go into the connector's own topic, with a copy
/// to the worker's, inside the records' transactions.
#[test]
fn an_exactly_once_connector_commits_to_its_own_offsets_topic() {
    own_offsets_topic(true);
}

/// The task counts in `connector`'s `tasks-fencing-<c>` records (KIP-618), in config topic order.
fn task_count_records(cluster: &Cluster, connector: &str) -> Vec<i64> {
    let topic = format!("{}-configs", cluster.topic.trim_end_matches("-sequences"));
    let mut reader = TopicReader::new(&cluster.broker.bootstrap_servers(), &topic);
    reader.read_to_end();
    let key = format!("tasks-fencing-{connector}");
    reader
        .messages
        .iter()
        .filter(|m| m.key() == Some(key.as_bytes()))
        .filter_map(|m| {
            let value: Value = serde_json::from_slice(m.payload()?).expect("a JSON value");
            value["task-count"].as_i64()
        })
        .collect()
}

fn own_offsets_topic(exactly_once: bool) {
    let mut cluster = if exactly_once {
        Cluster::new(&[("exactly.once.source.support", "enabled")])
    } else {
        Cluster::new(&[])
    };
    cluster.start_worker();
    let client = cluster.worker(0).client();
    let worker_topic = format!("{}-offsets", cluster.topic.trim_end_matches("-sequences"));
    let own_topic = format!(
        "{}-seq-offsets",
        cluster.topic.trim_end_matches("-sequences")
    );
    cluster.create(0, &sequence_connector("seq", 1, 200, &cluster.topic));
    cluster.running_tasks("seq", 1);
    let mut reader = TopicReader::new(&cluster.broker.bootstrap_servers(), &cluster.topic);
    wait_progress(&cluster, &mut reader, 1, 30);

    // Stopped (final commit to the worker's topic), then given its own topic.
    client.put("/connectors/seq/stop", None).expect(204);
    let stopped_at = cluster.wait_until("the stopped task's final commit", |client| {
        let offsets = client.get("/connectors/seq/offsets").json();
        let committed = offsets["offsets"][0]["offset"]["seq"].as_i64()?;
        let sent = *assert_no_gap(&sequences(&mut reader)).get(&0)?;
        // SequenceSource's offset is the last seq sent.
        (committed == sent).then_some(committed)
    });
    let mut config = client.get("/connectors/seq/config").expect(200);
    config["offsets.storage.topic"] = json!(own_topic);
    client
        .put("/connectors/seq/config", Some(&config.to_string()))
        .expect(200);
    client.put("/connectors/seq/resume", None).expect(202);
    cluster.running_tasks("seq", 1);
    wait_progress(&cluster, &mut reader, 1, stopped_at + 50);
    assert_exactly_once(
        &sequences(&mut reader),
        "the task resumed from the worker's topic after a graceful stop",
    );
    let own = cluster.wait_until("commits in the connector's own topic", |_| {
        let own = offset_records(&cluster, &own_topic, "seq");
        own.iter()
            .any(|(_, p)| p.is_some_and(|p| p > stopped_at))
            .then_some(own)
    });
    assert!(
        own.iter().all(|(_, p)| p.is_some_and(|p| p >= stopped_at)),
        "the connector's topic holds only commits made after it was given: {own:?}"
    );
    // Kafka Connect copies such a connector's offsets to the worker's topic too (a fallback for
    // whoever reads that topic); with exactly once the copy is in the same transactions.
    cluster.wait_until("copies of the new commits in the worker's topic", |_| {
        offset_records(&cluster, &worker_topic, "seq")
            .iter()
            .any(|(_, p)| p.is_some_and(|p| p > stopped_at))
            .then_some(())
    });

    // A reset: stopped, then DELETE; the worker's topic gets its tombstone too.
    client.put("/connectors/seq/stop", None).expect(204);
    if exactly_once {
        // Kafka Connect's task count record follows every change of the task configurations: at
        // once when no task number was removed (created, resumed: 1), after the removed numbers
        // are fenced otherwise (each stop: the count then, 0 once stopped for good).
        cluster.wait_until(
            "a task count record for each of the 4 changes, the last 0",
            |_| {
                let counts = task_count_records(&cluster, "seq");
                (counts.first() == Some(&1) && counts.last() == Some(&0) && counts.len() >= 4)
                    .then_some(())
            },
        );
    } else {
        assert_eq!(
            task_count_records(&cluster, "seq"),
            Vec::<i64>::new(),
            "at least once, no task count record (as Kafka Connect)"
        );
    }
    cluster.wait_until("the offsets reset to be accepted", |client| {
        let reply = client.delete("/connectors/seq/offsets");
        match reply.status {
            200 => Some(()),
            400 | 409 => None,
            _ => panic!("resetting offsets: {reply:?}"),
        }
    });
    assert_eq!(
        client.get("/connectors/seq/offsets").expect(200)["offsets"],
        json!([]),
        "no offset shows through from either topic"
    );
    for topic in [&worker_topic, &own_topic] {
        let records = offset_records(&cluster, topic, "seq");
        assert_eq!(
            records.last().map(|(_, p)| *p),
            Some(None),
            "the last record of {topic} is a tombstone: {records:?}"
        );
    }
    let reset_at = assert_no_gap(&sequences(&mut reader))[&0];
    client.put("/connectors/seq/resume", None).expect(202);
    cluster.wait_until("the task to start over from seq 0", |_| {
        let records = sequences(&mut reader);
        let copies_of_0 = records.iter().filter(|r| **r == (0, 0)).count();
        (copies_of_0 == 2).then_some(())
    });
    let records = sequences(&mut reader);
    let restarted: Vec<i64> = records
        .iter()
        .skip_while(|r| r.1 != reset_at)
        .skip(1)
        .map(|r| r.1)
        .take(3)
        .collect();
    assert_eq!(
        restarted.first(),
        Some(&0),
        "after the reset: {restarted:?}"
    );
    cluster.stop(0);
}

/// A worker whose broker is gone still stops promptly on SIGTERM: its tasks stop (their final
/// commits cannot reach the offsets topic and are given up after `offset.flush.timeout.ms`), and
/// leaving a group whose coordinator cannot be reached is not waited on for the whole
/// `rebalance.timeout.ms` (here 120 s, Kafka Connect's operators raise it for slow tasks).
#[test]
fn a_worker_whose_broker_is_gone_stops_promptly_on_sigterm() {
    stops_promptly_without_its_broker(false);
}

/// The same with exactly-once delivery: the tasks' open transactions cannot be committed or
/// aborted either.
#[test]
fn an_exactly_once_worker_whose_broker_is_gone_stops_promptly_on_sigterm() {
    stops_promptly_without_its_broker(true);
}

fn stops_promptly_without_its_broker(exactly_once: bool) {
    let mut settings = vec![("rebalance.timeout.ms", "120000")];
    if exactly_once {
        settings.push(("exactly.once.source.support", "enabled"));
    }
    let mut cluster = Cluster::with_own_broker(&settings);
    cluster.start_worker();
    cluster.create(0, &sequence_connector("seq", 2, 100, &cluster.topic));
    cluster.running_tasks("seq", 2);
    let Broker::Own(broker) = &mut cluster.broker else {
        unreachable!("the cluster has a broker of its own")
    };
    broker.stop();
    let mut worker = cluster.workers[0].take().expect("worker 0 runs");
    let asked = Instant::now();
    let status = worker.ferry.terminate();
    let took = asked.elapsed();
    eprintln!("stopped {took:?} after SIGTERM ({status})");
    assert!(
        took < Duration::from_secs(30),
        "the worker took {took:?} to stop after SIGTERM with its broker gone ({status}); its log:\n{}",
        worker.ferry.log()
    );
}
