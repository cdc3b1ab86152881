//! The Kafka sink against a real broker (Apache Kafka): what reaches the topic, read back with a plain
//! rdkafka consumer, and how deliveries resolve.
#![cfg(test)]

use std::time::{Duration, Instant};

use ferry_api::{Field, Schema, SourceRecord};
use ferry_kafka::convert::Converter;
use ferry_kafka::{KafkaSink, KafkaSinkConfig, RecordConverters};
use ferry_plugin::sink::{Delivery, PendingDelivery, RecordSink, SinkError};
use ferry_testkit::KafkaBroker;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message, OwnedMessage};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde_json::json;

/// How long anything may take before a test gives up. Generous: the machine may be loaded.
const DEADLINE: Duration = Duration::from_secs(60);

/// A broker of the test's own, for the tests that stop it.
fn own_broker() -> KafkaBroker {
    KafkaBroker::start().unwrap()
}

/// The broker the tests of this binary share; each names its topics with [`unique`].
fn shared() -> &'static KafkaBroker {
    KafkaBroker::shared().unwrap()
}

/// A topic name no other test of this run uses.
fn unique(name: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{name}-{}-{n}", std::process::id())
}

/// Creates `topic` with `partitions` partitions (the tests choose their partition counts).
async fn create_topic(bootstrap: &str, topic: &str, partitions: i32) {
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
}

/// Reads `count` messages of `topic` (every partition, from the beginning) with a plain consumer.
async fn read(bootstrap: &str, topic: &str, count: usize) -> Vec<OwnedMessage> {
    let (bootstrap, topic) = (bootstrap.to_owned(), topic.to_owned());
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", "ferry-sink-test")
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
        let metadata = consumer
            .fetch_metadata(Some(&topic), DEADLINE)
            .expect("metadata");
        let partitions = metadata.topics()[0].partitions().len();
        let mut assignment = TopicPartitionList::new();
        for p in 0..partitions {
            assignment
                .add_partition_offset(&topic, p as i32, Offset::Beginning)
                .expect("assignment");
        }
        consumer.assign(&assignment).expect("assign");
        let start = Instant::now();
        let mut messages = Vec::new();
        while messages.len() < count {
            assert!(
                start.elapsed() < DEADLINE,
                "read {} of {count} messages of {topic}",
                messages.len()
            );
            if let Some(message) = consumer.poll(Duration::from_millis(200)) {
                messages.push(message.expect("consume").detach());
            }
        }
        messages
    })
    .await
    .expect("reader thread")
}

async fn resolve(pending: PendingDelivery) -> Delivery {
    tokio::time::timeout(DEADLINE, pending)
        .await
        .expect("the delivery resolves within the deadline")
}

fn sink(bootstrap: &str) -> KafkaSink {
    KafkaSink::new(&KafkaSinkConfig::new(bootstrap)).expect("sink")
}

fn headers(message: &OwnedMessage) -> Vec<(String, Option<Vec<u8>>)> {
    message
        .headers()
        .map(|h| {
            h.iter()
                .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                .collect()
        })
        .unwrap_or_default()
}

fn text(bytes: Option<&[u8]>) -> Option<String> {
    bytes.map(|b| String::from_utf8_lossy(b).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_arrive_with_converted_keys_values_headers_partitions_and_timestamps() {
    let broker = shared();
    let bootstrap = broker.bootstrap_servers();
    let lines = unique("lines");
    create_topic(&bootstrap, &lines, 3).await;
    let sink = KafkaSink::new(
        &KafkaSinkConfig::new(&bootstrap)
            .with_producer_setting("linger.ms", "5")
            .with_converters(RecordConverters {
                key: Converter::string(),
                value: Converter::json(true),
            }),
    )
    .expect("sink");

    let line = |n: i64| {
        SourceRecord::new(
            &json!({"filename": "/tmp/in.txt"}),
            &json!({"position": n}),
            &lines,
            json!(format!("line {n}")),
        )
        .expect("record")
        .with_value_schema(Schema::string())
    };
    let records = vec![
        line(1)
            .with_key(json!("k1"))
            .with_kafka_partition(2)
            .with_timestamp(1_700_000_000_000),
        line(2)
            .with_kafka_partition(0)
            .with_header("trace", json!("abc"))
            .with_header("n", json!(1))
            .with_header("none", json!(null)),
        line(3).with_kafka_partition(2),
    ];
    let mut pending = Vec::new();
    for record in &records {
        pending.push(sink.send(record).await.expect("send"));
    }
    let mut metadata = Vec::new();
    for p in pending {
        metadata.push(resolve(p).await.expect("delivered"));
    }
    assert_eq!(metadata[0].topic, lines);
    assert_eq!(
        (metadata[0].partition, metadata[0].offset),
        (Some(2), Some(0))
    );
    assert_eq!(
        (metadata[1].partition, metadata[1].offset),
        (Some(0), Some(0))
    );
    assert_eq!(
        (metadata[2].partition, metadata[2].offset),
        (Some(2), Some(1))
    );

    let mut messages = read(&bootstrap, &lines, 3).await;
    messages.sort_by_key(|m| (m.partition(), m.offset()));
    let first = &messages[1];
    assert_eq!((first.partition(), first.offset()), (2, 0));
    assert_eq!(text(first.key()).as_deref(), Some("k1"));
    assert_eq!(
        text(first.payload()).as_deref(),
        Some(r#"{"schema":{"type":"string","optional":false},"payload":"line 1"}"#)
    );
    assert_eq!(first.timestamp().to_millis(), Some(1_700_000_000_000));
    assert!(headers(first).is_empty());

    let second = &messages[0];
    assert_eq!(second.partition(), 0);
    assert_eq!(second.key(), None, "no key: a null key");
    assert_eq!(
        headers(second),
        vec![
            ("trace".to_owned(), Some(b"abc".to_vec())),
            ("n".to_owned(), Some(b"1".to_vec())),
            ("none".to_owned(), None),
        ]
    );
    assert_eq!(
        text(messages[2].payload()).as_deref(),
        Some(r#"{"schema":{"type":"string","optional":false},"payload":"line 3"}"#)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connectors_share_the_producer_with_their_own_converters() {
    let broker = shared();
    let bootstrap = broker.bootstrap_servers();
    let rows = unique("rows");
    create_topic(&bootstrap, &rows, 1).await;
    let json_sink = sink(&bootstrap);
    let string_sink = json_sink.with_converters(RecordConverters {
        key: Converter::json(false),
        value: Converter::string(),
    });
    let schema = Schema::unnamed_struct([
        Field::new("partition", Schema::int32()),
        Field::new("seq", Schema::int64()),
    ]);
    let row = SourceRecord::from_maps(None, None, &rows, Some(json!({"seq": 7, "partition": 1})))
        .with_value_schema(schema)
        .with_key(json!({"id": 7}));
    let line = SourceRecord::from_maps(None, None, &rows, Some(json!("plain text")))
        .with_key(json!({"id": 8}));
    let first = json_sink.send(&row).await.expect("send");
    let second = string_sink.send(&line).await.expect("send");
    // A null value without a schema: a tombstone (null payload), as Kafka Connect's JsonConverter writes.
    let tombstone = SourceRecord::from_maps(None, None, &rows, None).with_key(json!("gone"));
    let third = json_sink.send(&tombstone).await.expect("send");
    for p in [first, second, third] {
        resolve(p).await.expect("delivered");
    }
    let messages = read(&bootstrap, &rows, 3).await;
    assert_eq!(
        text(messages[0].payload()).as_deref(),
        Some(concat!(
            r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"partition"},"#,
            r#"{"type":"int64","optional":false,"field":"seq"}],"optional":false},"payload":{"partition":1,"seq":7}}"#
        ))
    );
    assert_eq!(
        text(messages[0].key()).as_deref(),
        Some(r#"{"schema":null,"payload":{"id":7}}"#)
    );
    assert_eq!(text(messages[1].payload()).as_deref(), Some("plain text"));
    assert_eq!(text(messages[1].key()).as_deref(), Some(r#"{"id":8}"#));
    assert_eq!(messages[2].payload(), None);
    assert_eq!(
        text(messages[2].key()).as_deref(),
        Some(r#"{"schema":null,"payload":"gone"}"#)
    );
    json_sink.flush(DEADLINE).await.expect("flush");
    assert_eq!(json_sink.in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_records_resolve_in_order_per_partition() {
    let broker = shared();
    let bootstrap = broker.bootstrap_servers();
    let seq = unique("seq");
    create_topic(&bootstrap, &seq, 2).await;
    let sink = sink(&bootstrap);
    let mut pending = Vec::new();
    for n in 0..2_000_i64 {
        let record = SourceRecord::from_maps(None, None, &seq, Some(json!(n)))
            .with_value_schema(Schema::int64())
            .with_kafka_partition(i32::from(n % 2 == 1));
        pending.push(sink.send(&record).await.expect("send"));
    }
    let mut last = [-1_i64; 2];
    for (n, p) in pending.into_iter().enumerate() {
        let metadata = resolve(p).await.expect("delivered");
        let partition =
            usize::try_from(metadata.partition.expect("partition")).expect("partition ≥ 0");
        assert_eq!(partition, n % 2);
        let offset = metadata.offset.expect("offset");
        assert_eq!(
            offset,
            last[partition] + 1,
            "offsets of a partition follow send order"
        );
        last[partition] = offset;
    }
    assert_eq!(last, [999, 999]);
}

/// A batch goes to librdkafka in one call while every record can go at once, in order, with one
/// delivery for all; it stops before a record it cannot convert (which `send` then refuses) and
/// takes what came before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_produced_in_order_with_one_delivery_and_stops_before_a_bad_record() {
    let broker = shared();
    let bootstrap = broker.bootstrap_servers();
    let topic = unique("batch");
    create_topic(&bootstrap, &topic, 1).await;
    let sink = sink(&bootstrap);
    let mut records: Vec<SourceRecord> = (0..500_i64)
        .map(|n| {
            SourceRecord::from_maps(None, None, &topic, Some(json!(n)))
                .with_value_schema(Schema::int64())
        })
        .collect();
    records.push(
        SourceRecord::from_maps(None, None, &topic, Some(json!("not a number")))
            .with_value_schema(Schema::int32()),
    );
    let sent = sink.try_send_batch(&records);
    assert_eq!(sent.accepted, 500, "every record before the bad one");
    let outcome = tokio::time::timeout(DEADLINE, sent.delivery.expect("a delivery"))
        .await
        .expect("the batch is acknowledged in time");
    assert!(outcome.failed.is_empty(), "{:?}", outcome.failed);
    let rest = sink.try_send_batch(&records[500..]);
    assert_eq!(
        rest.accepted, 0,
        "the record that cannot be converted is left to send"
    );
    assert!(sink.send(&records[500]).await.is_err());
    let messages = read(&bootstrap, &topic, 500).await;
    let values: Vec<_> = messages.iter().map(|m| text(m.payload())).collect();
    let expected: Vec<_> = (0..500)
        .map(|n| {
            Some(format!(
                r#"{{"schema":{{"type":"int64","optional":false}},"payload":{n}}}"#
            ))
        })
        .collect();
    assert_eq!(values, expected);
}

/// A batch takes no more records than the producer's local queue has room for; the rest are left
/// to `send`, which waits for room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_takes_only_what_the_producer_queue_has_room_for() {
    let broker = shared();
    let bootstrap = broker.bootstrap_servers();
    let topic = unique("batch-full");
    create_topic(&bootstrap, &topic, 1).await;
    // Records linger in the queue for a second: none leaves it while the batch is handed over.
    let sink = KafkaSink::new(
        &KafkaSinkConfig::new(&bootstrap)
            .with_producer_setting("queue.buffering.max.messages", "5")
            .with_producer_setting("linger.ms", "1000"),
    )
    .expect("sink");
    let records: Vec<SourceRecord> = (0..20)
        .map(|n| SourceRecord::from_maps(None, None, &topic, Some(json!(n))))
        .collect();
    let sent = sink.try_send_batch(&records);
    assert_eq!(sent.accepted, 5);
    assert_eq!(
        sink.try_send_batch(&records[5..]).accepted,
        0,
        "nothing while the queue is full"
    );
    let mut pending = Vec::new();
    for record in &records[5..] {
        pending.push(sink.send(record).await.expect("send waits for room"));
    }
    let outcome = tokio::time::timeout(DEADLINE, sent.delivery.expect("a delivery"))
        .await
        .expect("delivered in time");
    assert!(outcome.failed.is_empty(), "{:?}", outcome.failed);
    for p in pending {
        resolve(p).await.expect("delivered");
    }
    // librdkafka frees a delivered record's queue slot just after reporting its delivery.
    let drained = Instant::now();
    while sink.in_flight() > 0 {
        assert!(
            drained.elapsed() < DEADLINE,
            "the producer's queue never drained"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Drained, the queue has room again: the next batch is taken whole.
    let more: Vec<SourceRecord> = (20..24)
        .map(|n| SourceRecord::from_maps(None, None, &topic, Some(json!(n))))
        .collect();
    let sent = sink.try_send_batch(&more);
    assert_eq!(sent.accepted, 4, "batches resume once the queue drained");
    let outcome = tokio::time::timeout(DEADLINE, sent.delivery.expect("a delivery"))
        .await
        .expect("delivered in time");
    assert!(outcome.failed.is_empty(), "{:?}", outcome.failed);
    assert_eq!(read(&bootstrap, &topic, 24).await.len(), 24);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_topic_fails_delivery_after_the_message_timeout() {
    // Kafka creates a topic on first use by default; this broker, like many in production, does not.
    let broker = KafkaBroker::start_with(&[("auto.create.topics.enable", "false")]).unwrap();
    let sink = KafkaSink::new(
        &KafkaSinkConfig::new(broker.bootstrap_servers())
            .with_producer_setting("message.timeout.ms", "3000"),
    )
    .expect("sink");
    let record = SourceRecord::from_maps(None, None, "no-such-topic", Some(json!("x")));
    let started = Instant::now();
    // librdkafka may refuse at once (the topic is known not to exist) or fail the delivery later.
    let error: SinkError = match sink.send(&record).await {
        Err(e) => e,
        Ok(pending) => resolve(pending)
            .await
            .expect_err("delivery to a missing topic must fail"),
    };
    assert!(started.elapsed() < DEADLINE);
    let message = error.to_string();
    eprintln!(
        "delivery to a missing topic: {message} (after {:?})",
        started.elapsed()
    );
    assert!(message.contains("no-such-topic"), "{message}");
    assert!(
        message.starts_with(&format!("kafka {}: ", broker.bootstrap_servers())),
        "{message}"
    );
    // Timeouts and unknown topics are retriable in Kafka (TimeoutException, UnknownTopicOrPartitionException).
    assert!(error.is_retriable(), "{message}");
    assert!(
        message.contains("timed out") || message.contains("Unknown topic"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_cannot_be_converted_is_refused_without_retry() {
    let broker = shared();
    let sink = sink(&broker.bootstrap_servers());
    let record = SourceRecord::from_maps(None, None, "t", Some(json!("not a number")))
        .with_value_schema(Schema::int32());
    let Err(error) = sink.send(&record).await else {
        panic!("a value that does not fit its schema was accepted");
    };
    assert!(!error.is_retriable());
    assert!(
        error
            .to_string()
            .contains("JsonConverter cannot convert the value: expected an integer (int32)"),
        "{error}"
    );
}

#[test]
fn an_unknown_producer_setting_names_its_key() {
    let config = KafkaSinkConfig::new("127.0.0.1:1").with_producer_setting("no.such.setting", "1");
    let error = KafkaSink::new(&config).expect_err("unknown setting");
    assert!(!error.is_retriable());
    let message = error.to_string();
    assert!(
        message.contains("invalid producer setting producer.no.such.setting"),
        "{message}"
    );
}

#[test]
fn secrets_never_show_in_debug() {
    let config = KafkaSinkConfig::new("b:9092")
        .with_producer_setting("sasl.password", "hunter2")
        .with_producer_setting("sasl.jaas.config", "x password=\"hunter2\";")
        .with_producer_setting("linger.ms", "5");
    let debug = format!("{config:?}");
    assert!(!debug.contains("hunter2"), "{debug}");
    assert!(
        debug.contains("linger.ms") && debug.contains("sasl.password"),
        "{debug}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_sent_while_the_broker_is_down_are_delivered_when_it_returns() {
    let mut broker = own_broker();
    let bootstrap = broker.bootstrap_servers();
    create_topic(&bootstrap, "outage", 1).await;
    let sink = KafkaSink::new(
        &KafkaSinkConfig::new(&bootstrap).with_producer_setting("reconnect.backoff.max.ms", "500"),
    )
    .expect("sink");
    let before = SourceRecord::from_maps(None, None, "outage", Some(json!("before")));
    resolve(sink.send(&before).await.expect("send"))
        .await
        .expect("delivered");

    broker.stop();
    let during = SourceRecord::from_maps(None, None, "outage", Some(json!("during")));
    let mut pending = sink
        .send(&during)
        .await
        .expect("enqueued while the broker is down");
    // Nothing can acknowledge it: it stays pending (no timeout drops it).
    assert!(
        tokio::time::timeout(Duration::from_secs(3), &mut pending)
            .await
            .is_err(),
        "a record was acknowledged while the broker was down"
    );
    broker.restart().unwrap();
    let metadata = resolve(pending).await;
    assert_eq!(
        metadata.expect("delivered after the restart").offset,
        Some(1)
    );
    let messages = read(&bootstrap, "outage", 2).await;
    assert_eq!(
        text(messages[1].payload()).as_deref(),
        Some(r#"{"schema":null,"payload":"during"}"#)
    );
}

/// A full producer queue is back-pressure, as in Kafka Connect (`max.block.ms=Long.MAX_VALUE`): `send`
/// waits for room, however long the brokers take, instead of refusing the record (which made the task
/// back off for 100 ms or more each time the queue filled), and completes once a delivery frees a slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_producer_queue_makes_send_wait_for_room() {
    let mut broker = own_broker();
    let bootstrap = broker.bootstrap_servers();
    create_topic(&bootstrap, "full", 1).await;
    let sink = KafkaSink::new(
        &KafkaSinkConfig::new(&bootstrap)
            .with_producer_setting("queue.buffering.max.messages", "1")
            .with_producer_setting("reconnect.backoff.max.ms", "500"),
    )
    .expect("sink");
    let record = |text: &str| SourceRecord::from_maps(None, None, "full", Some(json!(text)));
    resolve(sink.send(&record("before")).await.expect("send"))
        .await
        .expect("delivered");

    // With the broker away the first record stays queued and the queue has no room for a second.
    broker.stop();
    let first = sink
        .send(&record("first"))
        .await
        .expect("the first record is queued");
    let sending = {
        let sink = sink.clone();
        tokio::spawn(async move { sink.send(&record("second")).await })
    };
    // Longer than the old 200 ms patience and the task's first backoffs.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !sending.is_finished(),
        "send returned while the queue was full: {:?}",
        sending.await.map(|sent| sent.err())
    );
    broker.restart().unwrap();
    let second = tokio::time::timeout(DEADLINE, sending)
        .await
        .expect("send completes once the broker frees room")
        .expect("the send task did not panic")
        .expect("the second record is accepted, not refused");
    assert_eq!(resolve(first).await.expect("delivered").offset, Some(1));
    assert_eq!(resolve(second).await.expect("delivered").offset, Some(2));
    let messages = read(&bootstrap, "full", 3).await;
    let texts: Vec<_> = messages.iter().map(|m| text(m.payload())).collect();
    assert_eq!(
        texts,
        ["before", "first", "second"]
            .map(|t| Some(format!(r#"{{"schema":null,"payload":"{t}"}}"#)))
    );
}

/// Records waiting in the producer are bounded by their bytes (32 MiB by default, as Kafka Connect's
/// `buffer.memory`), not only by their count: with no broker to take them, 512 KiB records stop
/// being accepted after about 64, and `send` waits instead of holding gigabytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_producer_queue_is_bounded_by_bytes_by_default() {
    // A port nothing listens on: every record stays queued.
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let bootstrap = format!("127.0.0.1:{}", free.local_addr().expect("address").port());
    drop(free);
    let sink = KafkaSink::new(
        &KafkaSinkConfig::new(&bootstrap).with_producer_setting("message.timeout.ms", "8000"),
    )
    .expect("sink");
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let sending = {
        let (sink, accepted) = (sink.clone(), accepted.clone());
        tokio::spawn(async move {
            let big = "x".repeat(512 * 1024);
            let mut pending = Vec::new();
            for _ in 0..128 {
                let record = SourceRecord::from_maps(None, None, "bounded", Some(json!(big)));
                match sink.send(&record).await {
                    Ok(delivery) => pending.push(delivery),
                    Err(_) => break,
                }
                accepted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            pending.len()
        })
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    let queued = accepted.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        (40..=64).contains(&queued),
        "{queued} records of 512 KiB accepted with no broker (expected about 32 MiB of them)"
    );
    assert!(!sending.is_finished(), "send stopped waiting for room");
    sending.abort();
}
