//! Support for process tests that send records to a real broker (Apache Kafka 4.4, see `ferry_testkit`).
//!
//! - [`broker`] starts a broker; [`create_topic`] creates a topic (with the partitions a test wants).
//! - [`TopicReader`] reads a topic incrementally with a plain rdkafka consumer, up to the partitions'
//!   high watermarks, so a test can wait for what `ferry` delivered.
//! - [`numbered_lines`] and [`line_at`]: fixed-width input lines, so a byte position names a line.

#![allow(dead_code)] // each test file uses a different part

use std::time::{Duration, Instant};

use ferry_testkit::KafkaBroker;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde_json::Value;

use crate::support::{DEADLINE, Ferry, Workspace};

/// How long a Kafka Connect operation may take (a JVM on a busy two-core machine).
pub const SLOW: Duration = Duration::from_secs(120);

/// The broker this test binary shares (started on first use); tests keep apart by names.
pub fn shared_broker() -> &'static KafkaBroker {
    KafkaBroker::shared().unwrap_or_else(|e| panic!("{e}"))
}

/// The Kafka Connect worker this test binary shares, on the shared broker (started on first use,
/// killed with the binary: the testkit spawns it with a parent-death signal), and its REST URL.
/// `group` names its group; the process id is added.
pub fn kafka_connect(group: &str) -> &'static str {
    static WORKER: std::sync::OnceLock<(std::sync::Mutex<ferry_testkit::ConnectWorker>, String)> =
        std::sync::OnceLock::new();
    &WORKER
        .get_or_init(|| {
            let group = format!("{group}-{}", std::process::id());
            let worker = ferry_testkit::ConnectWorker::start(
                shared_broker(),
                ferry_testkit::ConnectOptions::new(group),
            )
            .unwrap_or_else(|e| panic!("Kafka Connect did not start: {e}"));
            let url = worker.rest_url();
            (std::sync::Mutex::new(worker), url)
        })
        .1
}

/// Names no other test of this run uses: `<prefix>-<pid>-<n>`.
pub fn unique(prefix: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{prefix}-{}-{n}", std::process::id())
}

/// Waits until `check` gives a value, polling every 100 ms, up to `within`.
pub fn wait_for<T>(what: &str, within: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(start.elapsed() < within, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Starts a broker with empty storage; fails the test with the install hint if Kafka's jars are missing.
pub fn broker() -> KafkaBroker {
    KafkaBroker::start().unwrap()
}

/// Creates `topic` with `partitions` partitions and replication factor 1.
pub fn create_topic(bootstrap: &str, topic: &str, partitions: i32) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the admin client");
    runtime.block_on(async {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .create()
            .expect("admin client");
        let results = admin
            .create_topics(
                &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
                &AdminOptions::new().operation_timeout(Some(DEADLINE)),
            )
            .await
            .expect("create topics");
        for result in results {
            result.unwrap_or_else(|(topic, code)| panic!("creating topic {topic}: {code}"));
        }
    });
}

/// Width of every line of [`numbered_lines`], terminator included.
pub const LINE_LEN: u64 = 11;

/// Lines `line-00000\n` … for `range`, each [`LINE_LEN`] bytes.
pub fn numbered_lines(range: std::ops::Range<u64>) -> String {
    range.map(|n| format!("line-{n:05}\n")).collect()
}

/// The line (without terminator) starting at byte `position` of a file of [`numbered_lines`].
pub fn line_at(position: u64) -> String {
    assert_eq!(
        position % LINE_LEN,
        0,
        "position {position} is not a line start"
    );
    format!("line-{:05}", position / LINE_LEN)
}

/// The `payload` of a JsonConverter envelope (`{"schema":…,"payload":"line-00001"}`) as text.
pub fn payload(bytes: Option<&[u8]>) -> String {
    let bytes = bytes.expect("a record with a value");
    let envelope: Value = serde_json::from_slice(bytes).unwrap_or_else(|e| {
        panic!(
            "value is not JSON ({e}): {:?}",
            String::from_utf8_lossy(bytes)
        )
    });
    envelope["payload"]
        .as_str()
        .unwrap_or_else(|| panic!("no string payload in {envelope}"))
        .to_owned()
}

/// Reads a topic from its beginning, incrementally, with a plain consumer (no group commits).
pub struct TopicReader {
    consumer: BaseConsumer,
    topic: String,
    /// Next offset to read per partition.
    next: Vec<i64>,
    /// Everything read, in the order read (per partition: in offset order).
    pub messages: Vec<OwnedMessage>,
}

impl TopicReader {
    /// A reader of every partition of `topic` (which must exist).
    pub fn new(bootstrap: &str, topic: &str) -> Self {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", "ferry-process-test-reader")
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "false")
            .create()
            .expect("consumer");
        let metadata = consumer
            .fetch_metadata(Some(topic), DEADLINE)
            .expect("topic metadata");
        let partitions = metadata.topics()[0].partitions().len();
        assert!(partitions > 0, "topic {topic} has no partitions");
        let mut assignment = TopicPartitionList::new();
        for p in 0..partitions {
            let p = i32::try_from(p).expect("partition fits i32");
            assignment
                .add_partition_offset(topic, p, Offset::Beginning)
                .expect("assignment");
        }
        consumer.assign(&assignment).expect("assign");
        Self {
            consumer,
            topic: topic.to_owned(),
            next: vec![0; partitions],
            messages: Vec::new(),
        }
    }

    /// Reads until every partition is read to its current high watermark; returns how many messages
    /// were added. The broker must be up.
    pub fn read_to_end(&mut self) -> usize {
        let before = self.messages.len();
        let mut high = Vec::with_capacity(self.next.len());
        for p in 0..self.next.len() {
            let partition = i32::try_from(p).expect("partition fits i32");
            // Right after a broker restart the partition may have no leader yet ("unknown
            // partition"): asked again until it has one.
            let asked = Instant::now();
            let (low, hi) = loop {
                match self
                    .consumer
                    .fetch_watermarks(&self.topic, partition, DEADLINE)
                {
                    Ok(marks) => break marks,
                    Err(e) if asked.elapsed() < DEADLINE => {
                        eprintln!("watermarks of {}/{p}: {e}; asking again", self.topic);
                        std::thread::sleep(Duration::from_millis(200));
                    }
                    Err(e) => panic!("watermarks of {}/{p}: {e}", self.topic),
                }
            };
            self.next[p] = self.next[p].max(low);
            high.push(hi);
        }
        let start = Instant::now();
        while self.next.iter().zip(&high).any(|(next, high)| next < high) {
            assert!(
                start.elapsed() < DEADLINE,
                "reading {} to its end: at {:?} of {high:?}",
                self.topic,
                self.next
            );
            match self.consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => {
                    let message = message.detach();
                    let p = usize::try_from(message.partition()).expect("partition ≥ 0");
                    self.next[p] = message.offset() + 1;
                    self.messages.push(message);
                }
                // Connection errors from a broker outage the test caused: the consumer reconnects.
                Some(Err(e)) => eprintln!("test reader of {}: {e}", self.topic),
                // Transactional topics end with commit markers, which are never delivered: the
                // consumer's position moves past them.
                None => self.catch_up_positions(),
            }
        }
        self.messages.len() - before
    }

    /// Moves `next` up to the consumer's positions (past transaction markers and aborted records).
    fn catch_up_positions(&mut self) {
        let Ok(positions) = self.consumer.position() else {
            return;
        };
        for element in positions.elements() {
            if let (Ok(p), Offset::Offset(position)) =
                (usize::try_from(element.partition()), element.offset())
                && let Some(next) = self.next.get_mut(p)
            {
                *next = (*next).max(position);
            }
        }
    }

    /// Reads until at least `count` messages were read in total, failing if `ferry` exits or the
    /// deadline passes first.
    pub fn wait_for(&mut self, ferry: &mut Ferry, count: usize) {
        let topic = self.topic.clone();
        ferry.wait_until(format!("{count} messages in topic {topic}"), || {
            self.read_to_end();
            (self.messages.len() >= count).then_some(())
        });
    }

    /// The JsonConverter payloads of the messages read, in order.
    pub fn payloads(&self) -> Vec<String> {
        self.messages.iter().map(|m| payload(m.payload())).collect()
    }

    /// The raw values of the messages read, in order, as text.
    pub fn values(&self) -> Vec<String> {
        self.messages
            .iter()
            .map(|m| String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned())
            .collect()
    }
}

/// Waits until `check` holds, polling; fails after `DEADLINE`.
pub fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A `ferry distributed` worker file in `ws` for group `group` on Kafka Connect's internal topics
/// `<group>-configs`, `-offsets`, `-status` (where a Kafka Connect worker of the same group keeps
/// them), JsonConverter for keys and values, a free REST port.
pub fn distributed_worker(ws: &Workspace, bootstrap: &str, group: &str) -> std::path::PathBuf {
    ws.properties(
        "ferry-distributed.properties",
        &[
            ("bootstrap.servers", bootstrap),
            ("group.id", group),
            ("config.storage.topic", &format!("{group}-configs")),
            ("offset.storage.topic", &format!("{group}-offsets")),
            ("status.storage.topic", &format!("{group}-status")),
            ("config.storage.replication.factor", "1"),
            ("offset.storage.replication.factor", "1"),
            ("status.storage.replication.factor", "1"),
            ("listeners", "http://127.0.0.1:0"),
            ("session.timeout.ms", "6000"),
            ("heartbeat.interval.ms", "1000"),
            ("scheduled.rebalance.max.delay.ms", "0"),
            ("offset.flush.interval.ms", "500"),
            (
                "key.converter",
                "org.apache.kafka.connect.json.JsonConverter",
            ),
            (
                "value.converter",
                "org.apache.kafka.connect.json.JsonConverter",
            ),
        ],
    )
}
