//! A read must see a write even when the store's consumer reported the end of the partition before
//! the write and the record then takes longer than the reader's end-of-partition grace to arrive.
//!
//! The reader trusts an end-of-partition event (compaction can leave no record below the end offset)
//! once no record followed it for a grace period. An event from before the write stays in the
//! consumer's queue until the next read polls it; if the write's record then comes late (a broker
//! outage and the consumer's reconnect backoff; here tansu, which answers a fetch only after about
//! half of `fetch.wait.max.ms` even when it has data), that stale event must not end the read.
//!
//! Own binary: it installs a global log subscriber to see the consumer's fetch responses (librdkafka
//! `debug=msg` logs one line per partition of each), which is how it knows that the stale event is
//! queued before it writes.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod store_support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_api::ConnectMap;
use ferry_kafka::KafkaOffsetStore;
use ferry_offsets::{OffsetBackingStore, OffsetWrite, encode_key, encode_value};
use store_support::{own_broker, store_config, unique_topic};
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

/// Every librdkafka log line, as the `log` → `tracing` bridge hands them over.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> Layer<S> for Lines {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        struct Message(String);
        impl Visit for Message {
            fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        self.0.lock().unwrap().push(message.0);
    }
}

impl Lines {
    /// Waits until a line contains `needle`.
    fn wait_for(&self, needle: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.0.lock().unwrap().iter().any(|l| l.contains(needle)) {
            assert!(
                Instant::now() < deadline,
                "no librdkafka log line with {needle:?} within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn key(p: i64) -> Vec<u8> {
    encode_key("c", Some(&ConnectMap::new().with("p", p).unwrap()))
}

fn value(position: i64) -> Vec<u8> {
    encode_value(&ConnectMap::new().with("position", position).unwrap())
}

fn put(position: i64) -> OffsetWrite {
    OffsetWrite {
        key: key(1),
        value: Some(value(position)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_after_a_stale_end_of_partition_event_is_read() {
    let lines = Lines::default();
    tracing_subscriber::registry()
        .with(
            lines
                .clone()
                .with_filter(tracing_subscriber::EnvFilter::new("librdkafka=debug")),
        )
        .init();
    let broker = own_broker();
    let topic = unique_topic("stale-eof");
    // One partition, so every write lands where the consumer's end-of-partition event is.
    let mut config = store_config(&broker, &topic, 1);
    config.client_overrides.extend([
        ("debug".to_owned(), "msg".to_owned()),
        // tansu answers a fetch after about half of this, so a record written after a fetch began
        // reaches the consumer 2.5 s or more later: longer than the reader's grace.
        ("fetch.wait.max.ms".to_owned(), "5000".to_owned()),
    ]);
    let store = KafkaOffsetStore::open(config)
        .await
        .unwrap_or_else(|e| panic!("open: {e}"));
    store.set(&[put(1)]).await.unwrap();
    assert_eq!(store.get(&[key(1)]).await.unwrap(), vec![Some(value(1))]);

    // The consumer's next fetch comes back empty at the end (offset 1): librdkafka queues an
    // end-of-partition event for offset 1, which no read polls yet.
    lines.wait_for(
        &format!("Topic {topic} [0] MessageSet size 0, error \"Success\", MaxOffset 1,"),
        Duration::from_secs(30),
    );

    store.set(&[put(2)]).await.unwrap();
    assert_eq!(
        store.get(&[key(1)]).await.unwrap(),
        vec![Some(value(2))],
        "the read after the write must see it, not stop at the end-of-partition event from before it"
    );
}
