//! The connector keys the Kafka sink reads itself, against a real broker (Apache Kafka, set not
//! to create topics on produce): `topic.creation.*` (KIP-158) creates a connector's missing topics with
//! its group's settings, and `producer.override.*` gives a connector its own producer, as the
//! worker's `topic.creation.enable` and `connector.client.config.override.policy` allow.

use std::sync::Arc;
use std::time::Duration;

use ferry_api::{Config, SourceRecord};
use ferry_kafka::KafkaSinkPlugin;
use ferry_plugin::sink::{RecordSink, SinkProvider, TaskSinkContext};
use ferry_plugin::{ConverterSpec, DynSinkSpec, Properties, SinkPlugin};
use ferry_testkit::KafkaBroker;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use serde_json::json;

/// How long anything may take before a test gives up. Generous: the machine may be loaded.
const DEADLINE: Duration = Duration::from_secs(60);

/// The Kafka sink a worker with `worker` settings (besides `bootstrap.servers`) would run.
fn spec(bootstrap: &str, worker: &[(&str, &str)]) -> Arc<dyn DynSinkSpec> {
    let mut pairs = vec![("bootstrap.servers", bootstrap)];
    pairs.extend_from_slice(worker);
    let props = Properties::from_pairs("worker.properties", pairs);
    let mut errors = Vec::new();
    let json = ConverterSpec::default();
    let spec = KafkaSinkPlugin
        .parse(None, &props, (json, json), &mut errors)
        .unwrap_or_else(|| panic!("refused: {errors:?}"));
    assert!(errors.is_empty(), "{errors:?}");
    spec
}

fn connector(pairs: &[(&str, &str)]) -> Config {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Task 0 of connector `name` with `config`, as the worker opens it.
async fn open(
    provider: &dyn SinkProvider,
    name: &str,
    config: &Config,
) -> Result<Arc<dyn RecordSink>, ferry_plugin::SinkError> {
    provider
        .open(&TaskSinkContext::new(name, 0, None, None).with_connector_config(config))
        .await
}

async fn deliver(sink: &dyn RecordSink, topic: &str) {
    // Keyed: some of these topics are compacted, and Kafka refuses a record without a key there.
    let record = SourceRecord::from_maps(None, None, topic, Some(json!("x"))).with_key(json!("k"));
    let pending = sink.send(&record).await.expect("send");
    tokio::time::timeout(DEADLINE, pending)
        .await
        .expect("the delivery resolves within the deadline")
        .unwrap_or_else(|e| panic!("delivery to {topic}: {e}"));
}

/// The topic's partition count, `None` when the broker does not know it (read without creating it).
async fn partitions(bootstrap: &str, topic: &str) -> Option<usize> {
    let (bootstrap, topic) = (bootstrap.to_owned(), topic.to_owned());
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("allow.auto.create.topics", "false")
            .create()
            .expect("consumer");
        let metadata = consumer
            .fetch_metadata(Some(&topic), DEADLINE)
            .expect("metadata");
        metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none())
            .map(|t| t.partitions().len())
            .filter(|n| *n > 0)
    })
    .await
    .expect("metadata thread")
}

/// The topic's `cleanup.policy` as the broker reports it.
async fn cleanup_policy(bootstrap: &str, topic: &str) -> Option<String> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client");
    let results = admin
        .describe_configs(
            [&ResourceSpecifier::Topic(topic)],
            &AdminOptions::new().request_timeout(Some(DEADLINE)),
        )
        .await
        .expect("describe configs");
    let resource = results
        .into_iter()
        .next()
        .expect("one result")
        .expect("described");
    resource.get("cleanup.policy").and_then(|e| e.value.clone())
}

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

/// The broker these tests share (their topic names differ): like many production clusters it does not
/// create a topic on first use (Kafka's default does), so what creates a topic here is Ferry or nobody.
fn broker() -> &'static KafkaBroker {
    KafkaBroker::shared_with(&[("auto.create.topics.enable", "false")])
        .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_topics_are_created_with_their_groups_settings_and_existing_ones_left_alone() {
    let broker = broker();
    let bootstrap = broker.bootstrap_servers();
    let provider = spec(&bootstrap, &[]).start().await.expect("start");
    let config = connector(&[
        ("name", "orders-source"),
        ("topic.creation.default.replication.factor", "1"),
        ("topic.creation.default.partitions", "3"),
        ("topic.creation.default.cleanup.policy", "compact"),
        ("topic.creation.groups", "wide"),
        ("topic.creation.wide.include", "wide-.*"),
        ("topic.creation.wide.exclude", "wide-but-not"),
        ("topic.creation.wide.partitions", "5"),
    ]);
    create_topic(&bootstrap, "existing", 2).await;
    let sink = open(provider.as_ref(), "orders-source", &config)
        .await
        .expect("open");

    assert_eq!(partitions(&bootstrap, "orders").await, None);
    deliver(sink.as_ref(), "orders").await;
    assert_eq!(partitions(&bootstrap, "orders").await, Some(3));
    assert_eq!(
        cleanup_policy(&bootstrap, "orders").await.as_deref(),
        Some("compact")
    );

    deliver(sink.as_ref(), "wide-events").await;
    assert_eq!(partitions(&bootstrap, "wide-events").await, Some(5));
    deliver(sink.as_ref(), "wide-but-not").await;
    assert_eq!(partitions(&bootstrap, "wide-but-not").await, Some(3));

    deliver(sink.as_ref(), "existing").await;
    assert_eq!(partitions(&bootstrap, "existing").await, Some(2));

    // A second task of the connector finds the topic (created by the first) and writes to it.
    let second = provider
        .open(&TaskSinkContext::new("orders-source", 1, None, None).with_connector_config(&config))
        .await
        .expect("open");
    deliver(second.as_ref(), "orders").await;
    assert_eq!(partitions(&bootstrap, "orders").await, Some(3));
    provider.flush(DEADLINE).await.expect("flush");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_topic_creation_a_missing_topic_is_left_to_the_broker() {
    let broker = broker();
    let bootstrap = broker.bootstrap_servers();
    let config = connector(&[
        ("name", "c"),
        ("topic.creation.default.replication.factor", "1"),
        ("topic.creation.default.partitions", "3"),
    ]);
    // The worker turns topic creation off: the connector's settings are not used (nor checked).
    let off = spec(
        &bootstrap,
        &[
            ("topic.creation.enable", "false"),
            ("producer.message.timeout.ms", "3000"),
        ],
    );
    assert!(
        off.check_connector(&connector(&[("topic.creation.default.partitions", "0")]))
            .is_empty()
    );
    let provider = off.start().await.expect("start");
    let sink = open(provider.as_ref(), "c", &config).await.expect("open");
    let record = SourceRecord::from_maps(None, None, "not-created", Some(json!("x")));
    // This broker does not create topics on produce, so the delivery fails as Kafka Connect's would.
    let error = match sink.send(&record).await {
        Err(e) => e,
        Ok(pending) => tokio::time::timeout(DEADLINE, pending)
            .await
            .expect("resolves")
            .expect_err("a missing topic must fail"),
    };
    assert!(error.to_string().contains("not-created"), "{error}");
    assert_eq!(partitions(&bootstrap, "not-created").await, None);

    // A connector without topic.creation.* keys gets no topic created either, even when enabled.
    let on = spec(&bootstrap, &[("producer.message.timeout.ms", "3000")]);
    let provider = on.start().await.expect("start");
    let sink = open(provider.as_ref(), "plain", &connector(&[("name", "plain")]))
        .await
        .expect("open");
    let record = SourceRecord::from_maps(None, None, "not-created-2", Some(json!("x")));
    if let Ok(pending) = sink.send(&record).await {
        tokio::time::timeout(DEADLINE, pending)
            .await
            .expect("resolves")
            .expect_err("a missing topic must fail");
    }
    assert_eq!(partitions(&bootstrap, "not-created-2").await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connector_with_producer_overrides_gets_its_own_producer() {
    let broker = broker();
    let bootstrap = broker.bootstrap_servers();
    create_topic(&bootstrap, "shared", 1).await;
    let provider = spec(&bootstrap, &[]).start().await.expect("start");

    let plain = open(provider.as_ref(), "plain", &connector(&[("name", "plain")]))
        .await
        .expect("open");
    assert_eq!(plain.describe(), format!("kafka {bootstrap}"));

    // The worker's producer waits without limit for a missing topic (message.timeout.ms=0); this
    // connector's own producer gives up after 2 s, which shows the override applies to it.
    let impatient_config = connector(&[
        ("name", "impatient"),
        ("producer.override.message.timeout.ms", "2000"),
        ("producer.override.client.id", "impatient-producer"),
    ]);
    let impatient = open(provider.as_ref(), "impatient", &impatient_config)
        .await
        .expect("open");
    assert!(
        impatient
            .describe()
            .contains("connector impatient's producer with producer.override.*"),
        "{}",
        impatient.describe()
    );
    let record = SourceRecord::from_maps(None, None, "missing", Some(json!("x")));
    if let Ok(pending) = impatient.send(&record).await {
        let error = tokio::time::timeout(DEADLINE, pending)
            .await
            .expect("the override's timeout ends the delivery")
            .expect_err("a missing topic must fail");
        assert!(error.is_retriable(), "{error}");
    }
    // Both producers deliver to topics that exist.
    deliver(plain.as_ref(), "shared").await;
    deliver(impatient.as_ref(), "shared").await;

    // A setting librdkafka does not know is refused when the task opens its sink, naming the key.
    let error = open(
        provider.as_ref(),
        "typo",
        &connector(&[("name", "typo"), ("producer.override.no.such.setting", "1")]),
    )
    .await
    .err()
    .expect("an unknown producer setting is refused");
    assert!(
        error
            .to_string()
            .contains("invalid producer setting producer.override.no.such.setting"),
        "{error}"
    );
    provider.flush(DEADLINE).await.expect("flush");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_override_policy_refuses_overrides_naming_the_key_and_the_policy() {
    // No broker is reached: the check and the refusal come before any client is created.
    let config = connector(&[
        ("name", "c"),
        ("producer.override.linger.ms", "5"),
        ("producer.override.security.protocol", "SASL_SSL"),
    ]);
    let none = spec(
        "127.0.0.1:1",
        &[("connector.client.config.override.policy", "None")],
    );
    let issues = none.check_connector(&config);
    let keys: Vec<&str> = issues.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(
        keys,
        vec![
            "producer.override.linger.ms",
            "producer.override.security.protocol"
        ]
    );
    assert!(
        issues[0]
            .message
            .starts_with("The 'None' policy does not allow 'linger.ms' to be overridden"),
        "{}",
        issues[0].message
    );
    // Checked again when a task starts (the policy may have changed since the config was stored).
    let provider = none.start().await.expect("start");
    let error = open(provider.as_ref(), "c", &config)
        .await
        .err()
        .expect("refused");
    assert!(
        error.to_string().contains("producer.override.linger.ms"),
        "{error}"
    );

    let principal = spec(
        "127.0.0.1:1",
        &[(
            "connector.client.config.override.policy",
            "org.apache.kafka.connect.connector.policy.PrincipalConnectorClientConfigOverridePolicy",
        )],
    );
    let keys: Vec<String> = principal
        .check_connector(&config)
        .into_iter()
        .map(|i| i.key)
        .collect();
    assert_eq!(keys, vec!["producer.override.linger.ms"]);
    // All (the default) allows any override.
    assert!(spec("127.0.0.1:1", &[]).check_connector(&config).is_empty());

    // An unknown policy is a worker configuration error naming the key.
    let props = Properties::from_pairs(
        "worker.properties",
        [
            ("bootstrap.servers", "127.0.0.1:1"),
            ("connector.client.config.override.policy", "Everything"),
        ],
    );
    let mut errors = Vec::new();
    let json = ConverterSpec::default();
    let _ = KafkaSinkPlugin.parse(None, &props, (json, json), &mut errors);
    assert_eq!(errors.len(), 1, "{errors:?}");
    let message = errors[0].to_string();
    assert!(
        message.contains("connector.client.config.override.policy")
            && message.contains("Principal"),
        "{message}"
    );
}

#[test]
fn invalid_topic_creation_settings_are_refused_when_the_connector_is_checked() {
    let spec = spec("127.0.0.1:1", &[]);
    let issues = spec.check_connector(&connector(&[
        ("topic.creation.default.partitions", "3"),
        ("topic.creation.groups", "g"),
        ("topic.creation.g.replication.factor", "0"),
    ]));
    let mut keys: Vec<&str> = issues.iter().map(|i| i.key.as_str()).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        vec![
            "topic.creation.default.replication.factor",
            "topic.creation.g.include",
            "topic.creation.g.replication.factor",
        ]
    );
    assert!(spec.handles_connector_key("topic.creation.anything"));
    assert!(spec.handles_connector_key("producer.override.linger.ms"));
    assert!(!spec.handles_connector_key("admin.override.linger.ms"));
}
