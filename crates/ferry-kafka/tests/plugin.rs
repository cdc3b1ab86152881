//! The Kafka plugins read their own worker keys, and mark the client settings librdkafka calls
//! sensitive, so `Debug` hides them even when their names do not look secret (`ssl.key.location`);
//! the started sink tells the cluster id (Apache Kafka).

use ferry_kafka::{KafkaSinkPlugin, KafkaSinkSpec, KafkaStorePlugin, KafkaStoreSpec};
use ferry_plugin::{ConverterSpec, OffsetStorePlugin, Properties, SinkPlugin};

fn props(pairs: &[(&str, &str)]) -> Properties {
    Properties::from_pairs("worker.properties", pairs.iter().copied())
}

#[test]
fn the_store_plugin_reads_its_keys_and_marks_sensitive_client_settings() {
    let props = props(&[
        ("bootstrap.servers", "k:9092"),
        ("offset.storage.topic", "connect-offsets"),
        ("security.protocol", "SSL"),
        ("ssl.key.location", "/etc/ferry/client-key-4711.pem"),
    ]);
    let mut errors = Vec::new();
    let spec = KafkaStorePlugin
        .parse(&props, &[], &mut errors)
        .unwrap_or_else(|| panic!("refused: {errors:?}"));
    assert!(errors.is_empty(), "{errors:?}");
    let kafka = spec
        .as_any()
        .downcast_ref::<KafkaStoreSpec>()
        .unwrap_or_else(|| panic!("not a Kafka store: {spec:?}"));
    assert_eq!(kafka.topic, "connect-offsets");
    assert_eq!(
        kafka.client_overrides.get("ssl.key.location"),
        Some("/etc/ferry/client-key-4711.pem"),
        "the store's clients get the value"
    );
    let debug = format!("{spec:?}");
    assert!(
        !debug.contains("4711") && debug.contains("ssl.key.location") && debug.contains("SSL"),
        "{debug}"
    );
}

#[test]
fn the_sink_plugin_marks_sensitive_producer_settings() {
    let props = props(&[
        ("bootstrap.servers", "k:9092"),
        ("producer.sasl.username", "ferry-prod-user"),
        ("producer.linger.ms", "5"),
    ]);
    assert!(KafkaSinkPlugin.is_default_for(&props));
    let mut errors = Vec::new();
    let json = ConverterSpec::default();
    let spec = KafkaSinkPlugin
        .parse(None, &props, (json, json), &mut errors)
        .unwrap_or_else(|| panic!("refused: {errors:?}"));
    let kafka = spec
        .as_any()
        .downcast_ref::<KafkaSinkSpec>()
        .unwrap_or_else(|| panic!("not a Kafka sink: {spec:?}"));
    assert_eq!(
        kafka.producer_overrides.get("sasl.username"),
        Some("ferry-prod-user")
    );
    let debug = format!("{spec:?}");
    assert!(
        !debug.contains("ferry-prod-user") && debug.contains("\"linger.ms\": \"5\""),
        "{debug}"
    );
    assert_eq!(spec.to_string(), "kafka k:9092");
}

/// `GET /`'s `kafka_cluster_id`: the started sink asks the broker for its cluster's id.
#[tokio::test(flavor = "multi_thread")]
async fn the_started_sink_tells_the_cluster_id() {
    let broker = ferry_testkit::KafkaBroker::shared().unwrap();
    let bootstrap = broker.bootstrap_servers();
    let props = props(&[("bootstrap.servers", bootstrap.as_str())]);
    let mut errors = Vec::new();
    let json = ConverterSpec::default();
    let spec = KafkaSinkPlugin
        .parse(None, &props, (json, json), &mut errors)
        .unwrap_or_else(|| panic!("refused: {errors:?}"));
    let provider = spec.start().await.unwrap();
    let id = provider.cluster_id().await.expect("a cluster id");
    assert!(!id.is_empty());
    assert_eq!(provider.cluster_id().await, Some(id));
}

/// Exactly-once in standalone mode: the sink writes offsets into its records' transactions only
/// when the offsets topic is on the records' cluster (the same brokers, in any order or case).
#[test]
fn the_sink_takes_transactional_offsets_only_on_its_own_cluster() {
    use ferry_plugin::TransactionalOffsets;
    let json = ConverterSpec::Json {
        schemas_enable: false,
    };
    let mut errors = Vec::new();
    let sink = KafkaSinkPlugin
        .parse(
            None,
            &props(&[("bootstrap.servers", "B1:9092,b2:9092")]),
            (json, json),
            &mut errors,
        )
        .unwrap_or_else(|| panic!("refused: {errors:?}"));
    let offsets = |cluster: &str| TransactionalOffsets {
        cluster: cluster.to_owned(),
        topic: "connect-offsets".to_owned(),
    };
    let transactional = sink
        .with_transactional_offsets(&offsets(" b2:9092, b1:9092 "))
        .expect("the same brokers");
    let kafka = transactional
        .as_any()
        .downcast_ref::<KafkaSinkSpec>()
        .expect("a Kafka sink");
    assert_eq!(kafka.offsets_topic.as_deref(), Some("connect-offsets"));
    let refused = sink
        .with_transactional_offsets(&offsets("other:9092"))
        .expect_err("another cluster");
    assert!(
        refused
            .to_string()
            .contains("must be on the records' cluster"),
        "{refused}"
    );
}
