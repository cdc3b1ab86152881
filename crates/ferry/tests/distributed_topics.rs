//! KIP-558 active topics in `ferry distributed`: a task's topic is written to the status topic as
//! Kafka Connect writes it (`status-topic-<topic>:connector-<connector>`), so every worker answers
//! `GET /connectors/{name}/topics` the same, and a reset through one worker (tombstones) clears it on
//! every worker. Real broker (Apache Kafka 4.4).
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod kafka_support;
mod rest_support;
mod support;

use std::time::{Duration, Instant};

use kafka_support::{TopicReader, broker, create_topic};
use rdkafka::Message as _;
use rest_support::Api;
use serde_json::{Value, json};
use support::{DEADLINE, Ferry, Workspace};

const TOPIC: &str = "sequences";

fn wait(what: &str, logs: &dyn Fn() -> String, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < DEADLINE,
            "timed out waiting for {what}; logs:\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A broker and two distributed workers of one group.
struct Cluster {
    broker: ferry_testkit::KafkaBroker,
    ws: Workspace,
    workers: Vec<(Ferry, Api)>,
}

impl Cluster {
    fn start() -> Self {
        let broker = broker();
        let ws = Workspace::new();
        create_topic(&broker.bootstrap_servers(), TOPIC, 1);
        let entries = [
            ("bootstrap.servers", broker.bootstrap_servers().to_owned()),
            ("group.id", "ferry-topics".to_owned()),
            ("config.storage.topic", "ferry-configs".to_owned()),
            ("offset.storage.topic", "ferry-offsets".to_owned()),
            ("status.storage.topic", "ferry-status".to_owned()),
            ("config.storage.replication.factor", "1".to_owned()),
            ("offset.storage.replication.factor", "1".to_owned()),
            ("status.storage.replication.factor", "1".to_owned()),
            ("offset.storage.partitions", "5".to_owned()),
            ("status.storage.partitions", "2".to_owned()),
            ("listeners", "http://127.0.0.1:0".to_owned()),
            ("session.timeout.ms", "6000".to_owned()),
            ("heartbeat.interval.ms", "1000".to_owned()),
            ("scheduled.rebalance.max.delay.ms", "0".to_owned()),
            ("offset.flush.interval.ms", "300".to_owned()),
            ("key.converter.schemas.enable", "false".to_owned()),
            ("value.converter.schemas.enable", "false".to_owned()),
        ];
        let entries: Vec<(&str, &str)> = entries.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let worker_file = ws.properties("worker.properties", &entries);
        let workers: Vec<(Ferry, Api)> = (0..2)
            .map(|n| {
                let mut ferry = Ferry::spawn(
                    ws.path(),
                    [std::ffi::OsStr::new("distributed"), worker_file.as_os_str()],
                    &ws.file(&format!("worker-{n}.stdout")),
                    &ws.file(&format!("worker-{n}.stderr")),
                );
                let api = Api::new(&ferry.rest_url());
                (ferry, api)
            })
            .collect();
        Self {
            broker,
            ws,
            workers,
        }
    }

    fn logs(&self) -> String {
        (0..self.workers.len())
            .map(|n| {
                format!(
                    "--- worker {n}:\n{}",
                    support::read_lossy(&self.ws.file(&format!("worker-{n}.stderr")))
                )
            })
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (ferry, _) in &mut self.workers {
            ferry.kill();
        }
    }
}

#[test]
fn every_worker_answers_the_same_active_topics_and_a_reset_clears_them_everywhere() {
    let mut cluster = Cluster::start();
    let broker = &cluster.broker;
    let logs = || cluster.logs();
    let workers = &cluster.workers;
    let body = json!({
        "name": "seq",
        "config": {
            "connector.class": "SequenceSource",
            "tasks.max": "1",
            "partitions": "1",
            "topic": TOPIC,
            "throughput": "20",
        }
    })
    .to_string();
    wait("a leader to accept the connector", &logs, || {
        let reply = workers[0].1.post("/connectors", Some(&body));
        match reply.status {
            201 => true,
            409 if reply.body.contains("retry") => false,
            _ => panic!("creating a connector: {reply:?}"),
        }
    });

    let expected = json!({"seq": {"topics": [TOPIC]}});
    for (n, (_, api)) in workers.iter().enumerate() {
        wait(
            &format!("worker {n} to list {TOPIC} as active"),
            &logs,
            || api.get("/connectors/seq/topics").expect(200) == expected,
        );
    }

    // The status topic holds Kafka Connect's record for it.
    let mut status = TopicReader::new(&broker.bootstrap_servers(), "ferry-status");
    status.read_to_end();
    let key = format!("status-topic-{TOPIC}:connector-seq");
    let record = status
        .messages
        .iter()
        .find(|m| m.key() == Some(key.as_bytes()))
        .unwrap_or_else(|| panic!("no {key} record in the status topic"));
    let value: Value = serde_json::from_slice(record.payload().unwrap_or_default()).expect("JSON");
    assert_eq!(value["topic"]["name"], TOPIC);
    assert_eq!(value["topic"]["connector"], "seq");
    assert_eq!(value["topic"]["task"], 0);
    assert!(
        value["topic"]["discoverTimestamp"]
            .as_i64()
            .is_some_and(|t| t > 0),
        "{value}"
    );

    // Stopped (else its task records the topic again at once), then reset through the other worker.
    wait("the connector to stop", &logs, || {
        let reply = workers[1].1.put("/connectors/seq/stop", None);
        match reply.status {
            202 | 204 => true,
            409 => false,
            _ => panic!("stopping the connector: {reply:?}"),
        }
    });
    wait("the connector to be STOPPED with no task", &logs, || {
        let status = workers[0].1.get("/connectors/seq/status").json();
        status["connector"]["state"] == "STOPPED"
            && status["tasks"].as_array().is_some_and(Vec::is_empty)
    });
    // As Kafka Connect's own test notes, a stopping task's last acknowledgements may still record
    // the topic just after a reset; the reset is sent again until both workers list nothing.
    let empty = json!({"seq": {"topics": []}});
    wait("both workers to list no active topic", &logs, || {
        workers[1]
            .1
            .put("/connectors/seq/topics/reset", None)
            .expect(202);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if workers
                .iter()
                .all(|(_, api)| api.get("/connectors/seq/topics").expect(200) == empty)
            {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    status.read_to_end();
    assert!(
        status
            .messages
            .iter()
            .rev()
            .find(|m| m.key() == Some(key.as_bytes()))
            .is_some_and(|m| m.payload().is_none()),
        "the reset writes a tombstone for {key}"
    );
    for (ferry, _) in &mut cluster.workers {
        ferry.terminate_cleanly();
    }
}

#[test]
fn a_cluster_scoped_log_level_reaches_every_worker_through_the_config_topic() {
    let mut cluster = Cluster::start();
    let logs = || cluster.logs();
    let workers = &cluster.workers;
    let logger = "/admin/loggers/ferry_runtime::worker";
    for (_, api) in workers {
        assert_eq!(api.get(logger).expect(200)["level"], "INFO");
    }
    // Written through worker 1, applied by both once read from the config topic: 204, as in Kafka
    // Connect.
    assert_eq!(
        workers[1]
            .1
            .put(
                &format!("{logger}?scope=cluster"),
                Some(r#"{"level":"DEBUG"}"#)
            )
            .expect(204),
        Value::Null
    );
    for (n, (_, api)) in workers.iter().enumerate() {
        wait(&format!("worker {n} to apply DEBUG"), &logs, || {
            api.get(logger).expect(200)["level"] == "DEBUG"
        });
    }
    let mut configs = TopicReader::new(&cluster.broker.bootstrap_servers(), "ferry-configs");
    configs.read_to_end();
    let record = configs
        .messages
        .iter()
        .find(|m| m.key() == Some(b"logger-cluster-ferry_runtime::worker".as_slice()))
        .expect("the logger-cluster record");
    assert_eq!(record.payload(), Some(br#"{"level":"DEBUG"}"#.as_slice()));
    for (ferry, _) in &mut cluster.workers {
        ferry.terminate_cleanly();
    }
}
