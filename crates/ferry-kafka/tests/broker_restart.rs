//! Apache Kafka alone, no Ferry code: do transactions survive a SIGKILL of the (single-node) broker
//! that is their coordinator? Exactly-once tasks write their records and their offsets in one
//! transaction; `exactly_once_survives_a_coordinator_crash` (crates/ferry/tests/distributed.rs)
//! stalls in about one run of eight on a transaction the restarted broker leaves open on the offsets
//! topic. This test does what those tasks do with plain librdkafka transactional producers, so a
//! stall here is the broker's, not Ferry's.
//!
//! So far it has not stalled: 10 runs with failed producers dropped, 12 with them left behind
//! retrying their commits (2026-12-06, Kafka 4.4, transaction version 2).
//!
//! Ignored: it is an investigation (a broker of its own, restarted), run with
//! `cargo test -p ferry-kafka --test broker_restart -- --ignored --nocapture`.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod store_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use store_support::{create_topic, own_broker, unique_topic};

/// Transactional producers, as exactly-once tasks: each its own records partition, all one offsets
/// partition.
const PRODUCERS: i32 = 4;
/// Records per transaction, besides its one offset record.
const RECORDS_PER_TRANSACTION: usize = 20;
/// Whether a producer whose call failed is left running, retrying its commit, while its successor
/// (same transactional id) starts — as a Ferry task thread left behind by a stop that timed out.
const LEAVE_BEHIND: bool = true;
/// Past every producer's `transaction.timeout.ms` (60 s) and the coordinator's check of timed-out
/// transactions (every 10 s): a transaction still open after this is one no client holds.
const SETTLE: Duration = Duration::from_secs(90);

fn producer(bootstrap: &str, id: &str) -> BaseProducer {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("transactional.id", id)
        .set("transaction.timeout.ms", "60000")
        .set("linger.ms", "5")
        .create()
        .unwrap();
    // After the broker's restart the coordinator may still be loading: retry until it answers.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match producer.init_transactions(Duration::from_secs(30)) {
            Ok(()) => return producer,
            Err(e) if Instant::now() < deadline => {
                eprintln!("{id}: init_transactions: {e}; retrying");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => panic!("{id}: init_transactions: {e}"),
        }
    }
}

/// One producer's loop: a transaction of records and one offset at a time until `stop`; on any
/// error the producer is dropped and a new one with the same id fences it (as a restarted task).
fn produce(
    bootstrap: String,
    records: String,
    offsets: String,
    n: i32,
    stop: Arc<AtomicBool>,
    committed: Arc<AtomicU64>,
) {
    let id = format!("{records}-producer-{n}");
    let mut p = producer(&bootstrap, &id);
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let attempt = (|| -> Result<(), rdkafka::error::KafkaError> {
            p.begin_transaction()?;
            for _ in 0..RECORDS_PER_TRANSACTION {
                seq += 1;
                let payload = seq.to_string();
                p.send(
                    BaseRecord::<str, str>::to(&records)
                        .partition(n)
                        .payload(&payload),
                )
                .map_err(|(e, _)| e)?;
            }
            let key = format!("task-{n}");
            let offset = seq.to_string();
            p.send(
                BaseRecord::to(&offsets)
                    .partition(0)
                    .key(&key)
                    .payload(&offset),
            )
            .map_err(|(e, _)| e)?;
            p.commit_transaction(Duration::from_secs(10))
        })();
        match attempt {
            Ok(()) => {
                committed.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                eprintln!("{id}: {e}; a new producer fences this one");
                let old = std::mem::replace(&mut p, producer(&bootstrap, &id));
                if LEAVE_BEHIND {
                    // As a task thread left behind by a stop: it keeps retrying its commit
                    // (librdkafka: "retry call to resume") while its successor runs.
                    std::thread::spawn(move || {
                        let until = Instant::now() + Duration::from_secs(60);
                        while Instant::now() < until {
                            match old.commit_transaction(Duration::from_secs(10)) {
                                Err(rdkafka::error::KafkaError::Transaction(e))
                                    if e.is_retriable() =>
                                {
                                    eprintln!("left behind: {e}; retrying its commit");
                                }
                                Ok(()) => break,
                                Err(e) => {
                                    eprintln!("left behind: {e}; given up");
                                    break;
                                }
                            }
                        }
                    });
                }
            }
        }
    }
    // A clean end: nothing of this producer stays open.
    let _ = p.abort_transaction(Duration::from_secs(10));
}

/// Asks a partition's last stable offset (a `read_committed` consumer's high offset) and its high
/// watermark (a `read_uncommitted` one's), with one consumer of each kind.
struct Watermarks {
    committed: BaseConsumer,
    uncommitted: BaseConsumer,
}

impl Watermarks {
    fn new(bootstrap: &str) -> Self {
        let consumer = |isolation: &str| -> BaseConsumer {
            ClientConfig::new()
                .set("bootstrap.servers", bootstrap)
                .set("isolation.level", isolation)
                .create()
                .unwrap()
        };
        Self {
            committed: consumer("read_committed"),
            uncommitted: consumer("read_uncommitted"),
        }
    }

    /// `(last stable offset, high watermark)`, or `None` while the broker does not answer.
    fn stable_and_high(&self, topic: &str, partition: i32) -> Option<(i64, i64)> {
        let timeout = Duration::from_secs(10);
        let (_, stable) = self
            .committed
            .fetch_watermarks(topic, partition, timeout)
            .ok()?;
        let (_, high) = self
            .uncommitted
            .fetch_watermarks(topic, partition, timeout)
            .ok()?;
        Some((stable, high))
    }
}

#[test]
#[ignore = "an investigation of the broker: a broker of its own, SIGKILLed and restarted"]
fn a_broker_sigkill_leaves_no_transaction_open_once_every_producer_is_done() {
    let mut broker = own_broker();
    let bootstrap = broker.bootstrap_servers();
    let records = unique_topic("restart-records");
    let offsets = unique_topic("restart-offsets");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        create_topic(&broker, &records, PRODUCERS, &[]).await;
        create_topic(&broker, &offsets, 1, &[("cleanup.policy", "compact")]).await;
    });

    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(AtomicU64::new(0));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|n| {
            let (b, r, o) = (bootstrap.clone(), records.clone(), offsets.clone());
            let (stop, committed) = (stop.clone(), committed.clone());
            std::thread::spawn(move || produce(b, r, o, n, stop, committed))
        })
        .collect();

    let wait_for = |count: u64, what: &str| {
        let deadline = Instant::now() + Duration::from_secs(180);
        while committed.load(Ordering::Relaxed) < count {
            assert!(
                Instant::now() < deadline,
                "{what}: {count} transactions not committed"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for(100, "before the restart");
    broker
        .restart()
        .unwrap_or_else(|e| panic!("the broker did not come back: {e}"));
    let at_restart = committed.load(Ordering::Relaxed);
    eprintln!("broker restarted after {at_restart} transactions");
    wait_for(at_restart + 100, "after the restart");
    stop.store(true, Ordering::Relaxed);
    for p in producers {
        p.join().unwrap();
    }

    let watermarks = Watermarks::new(&bootstrap);
    let started = Instant::now();
    let mut open = Vec::new();
    loop {
        open.clear();
        let partitions = (0..PRODUCERS)
            .map(|p| (records.as_str(), p))
            .chain(std::iter::once((offsets.as_str(), 0)));
        for (topic, partition) in partitions {
            match watermarks.stable_and_high(topic, partition) {
                Some((stable, high)) if stable == high => {}
                other => open.push(format!("{topic}[{partition}]: {other:?}")),
            }
        }
        if open.is_empty() || started.elapsed() > SETTLE {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    assert!(
        open.is_empty(),
        "{:?} after every producer ended, transactions are still open (last stable offset, high \
         watermark) — the broker lost track of them: {open:?}; broker log:\n{}",
        started.elapsed(),
        broker.log_tail()
    );
    eprintln!(
        "no transaction open {:?} after the producers ended",
        started.elapsed()
    );
}
