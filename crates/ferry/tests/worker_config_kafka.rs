//! Worker and connector keys for Kafka: `bootstrap.servers`, `sink=kafka`, `producer.*`, converters,
//! `offset.storage=kafka`.

mod log_capture;
use log_capture::Logs;

use std::sync::Arc;

use ferry::Ferry;
use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConnectError, SourceConnector, SourceRecord, SourceTask,
    SourceTaskContext, async_trait,
};
use ferry_kafka::{KafkaSinkSpec, KafkaStoreSpec};
use ferry_runtime::config::{
    ClientOverrides, ConfigError, ConfigErrors, ConnectorConfig, ConverterSpec, OffsetStorageSpec,
    Properties, SinkSpec, WorkerConfig,
};

/// The `ferry` binary's worker backends.
fn ferry() -> Ferry {
    Ferry::builder()
        .offset_store(ferry_kafka::KafkaStorePlugin)
        .sink(ferry_kafka::KafkaSinkPlugin)
        .offset_store(ferry_postgres::PostgresStorePlugin)
}

fn props(pairs: &[(&str, &str)]) -> Properties {
    Properties::from_pairs("worker.properties", pairs.iter().copied())
}

fn worker(pairs: &[(&str, &str)]) -> WorkerConfig {
    ferry()
        .parse_worker(&props(pairs))
        .unwrap_or_else(|e| panic!("valid worker config refused:\n{e}"))
}

fn worker_errors(pairs: &[(&str, &str)]) -> ConfigErrors {
    match ferry().parse_worker(&props(pairs)) {
        Ok(config) => panic!("config should be refused: {config:?}"),
        Err(errors) => errors,
    }
}

/// The one error about `key`, as text.
fn error_for(errors: &ConfigErrors, key: &str) -> String {
    let found: Vec<&ConfigError> = errors.iter().filter(|e| e.key() == Some(key)).collect();
    assert_eq!(
        found.len(),
        1,
        "expected one error for {key:?} in:\n{errors}"
    );
    found[0].to_string()
}

const FILE: (&str, &str) = ("offset.storage.file.filename", "/tmp/o");
const JSON_WITH_SCHEMAS: ConverterSpec = ConverterSpec::Json {
    schemas_enable: true,
};

// ---------------------------------------------------------------------------------------------
// Sink
// ---------------------------------------------------------------------------------------------

#[test]
fn bootstrap_servers_makes_kafka_the_default_sink_with_json_converters() {
    let config = worker(&[FILE, ("bootstrap.servers", " k1:9092,k2:9092 ")]);
    let sink = config.sink.downcast_ref::<KafkaSinkSpec>();
    assert_eq!(
        sink.map(|s| (s.bootstrap_servers.as_str(), &s.producer_overrides)),
        Some(("k1:9092,k2:9092", &ClientOverrides::default()))
    );
    assert_eq!(config.sink.to_string(), "kafka k1:9092,k2:9092");
    assert_eq!(
        (config.key_converter, config.value_converter),
        (JSON_WITH_SCHEMAS, JSON_WITH_SCHEMAS)
    );
    assert_eq!(config.offset_storage, OffsetStorageSpec::file("/tmp/o"));
}

#[test]
fn sink_kafka_needs_bootstrap_servers() {
    let errors = worker_errors(&[FILE, ("sink", "kafka")]);
    assert!(
        error_for(&errors, "sink").contains("sink=kafka needs bootstrap.servers"),
        "{errors}"
    );
    let explicit = worker(&[FILE, ("sink", "kafka"), ("bootstrap.servers", "k:9092")]);
    assert!(explicit.sink.downcast_ref::<KafkaSinkSpec>().is_some());
    let errors = worker_errors(&[FILE, ("bootstrap.servers", "")]);
    assert!(
        error_for(&errors, "bootstrap.servers").contains("at least one broker"),
        "{errors}"
    );
}

#[test]
fn an_explicit_file_sink_wins_and_producer_settings_then_warn() {
    let (logs, _guard) = Logs::capture();
    let config = worker(&[
        FILE,
        ("bootstrap.servers", "k:9092"),
        ("sink", "file:/tmp/out.jsonl"),
        ("producer.linger.ms", "5"),
        ("value.converter", "StringConverter"),
    ]);
    assert_eq!(config.sink, SinkSpec::file("/tmp/out.jsonl"));
    let logs = logs.text();
    assert!(
        logs.contains("producer.linger.ms has no effect with sink=file:/tmp/out.jsonl"),
        "{logs}"
    );
    assert!(
        logs.contains("value.converter has no effect with sink=file:/tmp/out.jsonl"),
        "{logs}"
    );
}

#[test]
fn client_keys_librdkafka_declares_sensitive_are_hidden_whatever_their_name() {
    // Neither name says password or secret; librdkafka declares both sensitive.
    let config = worker(&[
        FILE,
        ("bootstrap.servers", "k:9092"),
        ("producer.sasl.username", "alice-user"),
        ("producer.ssl.key.location", "/etc/keys/client.key"),
        ("producer.linger.ms", "5"),
    ]);
    let debug = format!("{config:?}");
    assert!(
        !debug.contains("alice-user") && !debug.contains("/etc/keys"),
        "{debug}"
    );
    assert!(
        debug.contains("sasl.username") && debug.contains("\"linger.ms\": \"5\""),
        "{debug}"
    );
}

#[test]
fn producer_settings_pass_through_without_the_prefix_and_hide_secrets() {
    let config = worker(&[
        FILE,
        ("bootstrap.servers", "k:9092"),
        ("producer.linger.ms", " 5 "),
        ("producer.sasl.password", "hunter2"),
        ("producer.compression.type", "lz4"),
    ]);
    let Some(KafkaSinkSpec {
        producer_overrides, ..
    }) = config.sink.downcast_ref::<KafkaSinkSpec>()
    else {
        panic!("not a Kafka sink: {:?}", config.sink);
    };
    assert_eq!(
        producer_overrides.iter().collect::<Vec<_>>(),
        vec![
            ("linger.ms", "5"),
            ("sasl.password", "hunter2"),
            ("compression.type", "lz4")
        ]
    );
    let debug = format!("{config:?}");
    assert!(
        !debug.contains("hunter2") && debug.contains("sasl.password"),
        "{debug}"
    );
    let errors = worker_errors(&[FILE, ("bootstrap.servers", "k:9092"), ("producer.", "x")]);
    assert!(
        error_for(&errors, "producer.").contains("names no producer setting"),
        "{errors}"
    );
}

// ---------------------------------------------------------------------------------------------
// Offset storage
// ---------------------------------------------------------------------------------------------

#[test]
fn offset_storage_kafka_needs_a_topic_and_no_file() {
    let (logs, _guard) = Logs::capture();
    let config = worker(&[
        ("bootstrap.servers", "k:9092"),
        ("offset.storage", "kafka"),
        ("offset.storage.topic", "connect-offsets"),
        ("security.protocol", "SASL_SSL"),
        ("sasl.password", "hunter2"),
    ]);
    assert_eq!(
        config.offset_storage.downcast_ref::<KafkaStoreSpec>(),
        Some(&KafkaStoreSpec {
            bootstrap_servers: "k:9092".to_owned(),
            topic: "connect-offsets".to_owned(),
            partitions: 25,
            replication_factor: 3,
            client_overrides: ClientOverrides::from_pairs([
                ("security.protocol", "SASL_SSL"),
                ("sasl.password", "hunter2")
            ]),
        })
    );
    assert_eq!(config.offset_storage_file(), None);
    assert!(!format!("{config:?}").contains("hunter2"));
    assert_eq!(
        config.offset_storage.to_string(),
        "kafka topic connect-offsets on k:9092"
    );
    assert!(logs.text().is_empty(), "{}", logs.text());

    let config = worker(&[
        ("bootstrap.servers", "k:9092"),
        ("offset.storage", "KAFKA"),
        ("offset.storage.topic", "o"),
        ("offset.storage.partitions", "1"),
        ("offset.storage.replication.factor", "-1"),
        FILE,
    ]);
    let Some(spec) = config.offset_storage.downcast_ref::<KafkaStoreSpec>() else {
        panic!("not Kafka");
    };
    assert_eq!((spec.partitions, spec.replication_factor), (1, -1));
    assert!(
        logs.text()
            .contains("offset.storage.file.filename has no effect with offset.storage=kafka"),
        "{}",
        logs.text()
    );
}

#[test]
fn offset_storage_kafka_problems_are_reported_together() {
    let errors = worker_errors(&[
        ("offset.storage", "kafka"),
        ("offset.storage.partitions", "0"),
        ("offset.storage.replication.factor", "0"),
    ]);
    assert_eq!(errors.len(), 4, "{errors}");
    assert!(
        error_for(&errors, "offset.storage").contains("needs bootstrap.servers"),
        "{errors}"
    );
    assert!(
        error_for(&errors, "offset.storage.topic").contains("missing required key"),
        "{errors}"
    );
    assert!(
        error_for(&errors, "offset.storage.partitions")
            .contains("1 or more, or -1 for the broker's default (default 25)"),
        "{errors}"
    );
    // -1 leaves the partition count to the broker, as in Kafka Connect and the distributed worker.
    let config = worker(&[
        ("bootstrap.servers", "k:9092"),
        ("offset.storage", "kafka"),
        ("offset.storage.topic", "connect-offsets"),
        ("offset.storage.partitions", "-1"),
    ]);
    assert!(
        format!("{:?}", config.offset_storage).contains("partitions: -1"),
        "{config:?}"
    );
    assert!(
        error_for(&errors, "offset.storage.replication.factor")
            .contains("-1 for the broker's default"),
        "{errors}"
    );
    let errors = worker_errors(&[
        ("bootstrap.servers", "k:9092"),
        ("offset.storage", "kafka"),
        ("offset.storage.topic", "bad topic"),
    ]);
    assert!(
        error_for(&errors, "offset.storage.topic").contains("must be a Kafka topic name"),
        "{errors}"
    );
}

#[test]
fn kafka_offset_settings_without_offset_storage_kafka_are_refused() {
    let errors = worker_errors(&[
        FILE,
        ("bootstrap.servers", "k:9092"),
        ("offset.storage.topic", "connect-offsets"),
    ]);
    assert!(
        error_for(&errors, "offset.storage.topic").contains("set offset.storage=kafka"),
        "{errors}"
    );
    let errors = worker_errors(&[FILE, ("offset.storage", "zookeeper")]);
    assert!(
        error_for(&errors, "offset.storage").contains("accepted values: file"),
        "{errors}"
    );
    // The file is required only with file storage, and says how to use Kafka instead.
    let errors = worker_errors(&[("bootstrap.servers", "k:9092")]);
    assert!(
        error_for(&errors, "offset.storage.file.filename").contains("offset.storage=kafka"),
        "{errors}"
    );
}

// ---------------------------------------------------------------------------------------------
// Converters
// ---------------------------------------------------------------------------------------------

#[test]
fn worker_converters_by_full_or_simple_class_name_with_settings() {
    let config = worker(&[
        FILE,
        ("bootstrap.servers", "k:9092"),
        (
            "key.converter",
            "org.apache.kafka.connect.json.JsonConverter",
        ),
        ("key.converter.schemas.enable", " FALSE "),
        ("value.converter", "ByteArrayConverter"),
        ("header.converter", "SimpleHeaderConverter"),
    ]);
    assert_eq!(
        config.key_converter,
        ConverterSpec::Json {
            schemas_enable: false
        }
    );
    assert_eq!(config.value_converter, ConverterSpec::ByteArray);
    // Settings of the default class apply to it.
    let config = worker(&[
        FILE,
        ("bootstrap.servers", "k:9092"),
        ("value.converter.schemas.enable", "false"),
    ]);
    assert_eq!(
        config.value_converter,
        ConverterSpec::Json {
            schemas_enable: false
        }
    );
    assert_eq!(config.key_converter, JSON_WITH_SCHEMAS);
    let config = worker(&[
        FILE,
        ("bootstrap.servers", "k:9092"),
        (
            "value.converter",
            "org.apache.kafka.connect.storage.StringConverter",
        ),
        ("value.converter.converter.encoding", "utf8"),
    ]);
    assert_eq!(config.value_converter, ConverterSpec::String);
    assert_eq!(
        config.value_converter.class_name(),
        "org.apache.kafka.connect.storage.StringConverter"
    );
}

#[test]
fn converter_problems_name_the_key() {
    let errors = worker_errors(&[
        FILE,
        ("bootstrap.servers", "k:9092"),
        ("key.converter", "io.confluent.connect.avro.AvroConverter"),
        ("value.converter.schemas.enable", "yes"),
        ("value.converter.schemas.enabel", "true"),
        ("header.converter", "JsonConverter"),
    ]);
    assert_eq!(errors.len(), 4, "{errors}");
    assert!(
        error_for(&errors, "key.converter").contains("unknown converter class; accepted:"),
        "{errors}"
    );
    assert!(
        error_for(&errors, "value.converter.schemas.enable").contains("must be true or false"),
        "{errors}"
    );
    assert!(
        error_for(&errors, "value.converter.schemas.enabel")
            .contains("did you mean \"value.converter.schemas.enable\"?"),
        "{errors}"
    );
    assert!(
        error_for(&errors, "header.converter").contains("SimpleHeaderConverter only"),
        "{errors}"
    );
    let errors = worker_errors(&[
        FILE,
        ("value.converter", "StringConverter"),
        ("value.converter.converter.encoding", "ISO-8859-1"),
    ]);
    assert!(
        error_for(&errors, "value.converter.converter.encoding").contains("UTF-8 only"),
        "{errors}"
    );
}

#[test]
fn settings_of_another_class_warn() {
    let (logs, _guard) = Logs::capture();
    let config = worker(&[
        FILE,
        ("bootstrap.servers", "k:9092"),
        ("value.converter", "StringConverter"),
        ("value.converter.schemas.enable", "true"),
        ("key.converter.schemas.cache.size", "10"),
    ]);
    assert_eq!(config.value_converter, ConverterSpec::String);
    let logs = logs.text();
    assert!(
        logs.contains(
            "value.converter.schemas.enable is not a setting of org.apache.kafka.connect.storage.StringConverter"
        ),
        "{logs}"
    );
    assert!(
        logs.contains("key.converter.schemas.cache.size has no effect in Ferry"),
        "{logs}"
    );
}

struct Source;

impl SourceConnector for Source {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![ConfigKey::required("topic", "the topic")]
    }
    fn validate(&self, _config: &Config) -> Vec<ConfigIssue> {
        Vec::new()
    }
    fn task_configs(&self, config: &Config, _max: usize) -> Result<Vec<Config>, ConnectError> {
        Ok(vec![config.clone()])
    }
    fn create_task(&self) -> Box<dyn SourceTask> {
        Box::new(Task)
    }
}

struct Task;

#[async_trait]
impl SourceTask for Task {
    async fn start(&mut self, _context: Arc<dyn SourceTaskContext>) -> Result<(), ConnectError> {
        Ok(())
    }
    async fn poll(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        Ok(Vec::new())
    }
    async fn stop(&mut self) -> Result<(), ConnectError> {
        Ok(())
    }
}

fn connector(pairs: &[(&str, &str)]) -> Result<ConnectorConfig, ConfigErrors> {
    let mut all = vec![
        ("name", "src"),
        ("connector.class", "Source"),
        ("topic", "t"),
    ];
    all.extend_from_slice(pairs);
    ConnectorConfig::from_properties(
        &Properties::from_pairs("connector.properties", all),
        |class| (class == "Source").then(|| Box::new(Source) as Box<dyn SourceConnector>),
    )
    .map(|(config, _)| config)
}

#[test]
fn a_connector_overrides_the_workers_converters_with_its_own_settings() {
    let Ok(config) = connector(&[
        ("value.converter", "JsonConverter"),
        ("value.converter.schemas.enable", "false"),
        ("key.converter", "StringConverter"),
    ]) else {
        panic!("valid converter overrides refused");
    };
    assert_eq!(
        config.value_converter,
        Some(ConverterSpec::Json {
            schemas_enable: false
        })
    );
    assert_eq!(config.key_converter, Some(ConverterSpec::String));
    // The connector's JsonConverter starts from Kafka Connect's default, not the worker's settings.
    let Ok(config) = connector(&[("value.converter", "JsonConverter")]) else {
        panic!("refused");
    };
    assert_eq!(config.value_converter, Some(JSON_WITH_SCHEMAS));
}

#[test]
fn connector_settings_without_their_class_are_ignored_with_a_warning() {
    let (logs, _guard) = Logs::capture();
    let Ok(config) = connector(&[("value.converter.schemas.enable", "false")]) else {
        panic!("refused");
    };
    assert_eq!(config.value_converter, None);
    let logs = logs.text();
    assert!(
        logs.contains(
            "value.converter.schemas.enable has no effect without value.converter in the same file"
        ),
        "{logs}"
    );
    let Err(errors) = connector(&[("value.converter", "AvroConverter")]) else {
        panic!("an unknown converter class was accepted");
    };
    assert!(
        error_for(&errors, "value.converter").contains("unknown converter class"),
        "{errors}"
    );
}

// ---------------------------------------------------------------------------------------------
// A whole worker file (moved from ferry-runtime's tests/config.rs: `bootstrap.servers` is a key of
// the Kafka sink plugin, which the runtime alone does not know)
// ---------------------------------------------------------------------------------------------

mod whole_file {
    use std::path::{Path, PathBuf};

    use ferry_runtime::config::{ConfigError, ConfigErrors, Properties};

    fn load(name: &str, text: &[u8]) -> (tempfile::TempDir, PathBuf, Properties) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write config");
        let props = Properties::load(&path).expect("parse config");
        (dir, path, props)
    }

    fn worker_errors(props: &Properties) -> ConfigErrors {
        super::ferry()
            .parse_worker(props)
            .expect_err("config should be refused")
    }

    /// The error about `key`; fails if there is not exactly one.
    fn error_for<'a>(errors: &'a ConfigErrors, key: &str) -> &'a ConfigError {
        let found: Vec<_> = errors.iter().filter(|e| e.key() == Some(key)).collect();
        assert_eq!(
            found.len(),
            1,
            "expected one error for {key:?} in:\n{errors}"
        );
        found[0]
    }

    /// Asserts the message names the file, the key and `file:line`.
    fn assert_names(error: &ConfigError, path: &Path, key: &str, line: usize) {
        let message = error.to_string();
        assert!(
            message.contains(&format!("{}:{line}:", path.display())),
            "no file:line in {message}"
        );
        assert!(message.contains(&format!("{key:?}")), "no key in {message}");
        assert_eq!(error.line(), Some(line), "{message}");
        assert_eq!(error.path(), path);
    }

    #[test]
    fn every_worker_problem_is_reported_at_once_with_file_key_and_line() {
        let text = "offset.storage.file.filename=/tmp/o\n\
                    offset.flush.interval.ms=soon\n\
                    offset.flush.timeout.ms=0\n\
                    offset.flush.interval=100\n\
                    sink=kafka:x\n\
                    bootstrap.servers= \n\
                    colour=blue\n\
                    task.shutdown.graceful.timeout.ms=-1\n";
        let (_dir, path, props) = load("worker.properties", text.as_bytes());
        let errors = worker_errors(&props);
        assert_eq!(errors.len(), 7, "{errors}");
        assert_eq!(
            errors.to_string().lines().count(),
            7,
            "one problem per line:\n{errors}"
        );

        let interval = error_for(&errors, "offset.flush.interval.ms");
        assert_names(interval, &path, "offset.flush.interval.ms", 2);
        assert!(
            interval.to_string().contains("\"soon\"") && interval.to_string().contains("0 or more"),
            "{interval}"
        );

        let timeout = error_for(&errors, "offset.flush.timeout.ms");
        assert_names(timeout, &path, "offset.flush.timeout.ms", 3);

        let typo = error_for(&errors, "offset.flush.interval");
        assert_names(typo, &path, "offset.flush.interval", 4);
        assert!(matches!(typo, ConfigError::UnknownKey { .. }));
        assert!(
            typo.to_string()
                .contains("did you mean \"offset.flush.interval.ms\"?"),
            "{typo}"
        );

        let sink = error_for(&errors, "sink");
        assert_names(sink, &path, "sink", 5);
        assert!(sink.to_string().contains("file:PATH"), "{sink}");

        let kafka = error_for(&errors, "bootstrap.servers");
        assert_names(kafka, &path, "bootstrap.servers", 6);
        assert!(
            kafka
                .to_string()
                .contains("must list at least one broker, e.g. localhost:9092"),
            "{kafka}"
        );

        let unknown = error_for(&errors, "colour");
        assert_names(unknown, &path, "colour", 7);
        assert!(
            unknown.to_string().contains(
                "accepted keys: bootstrap.servers, config.providers, config.providers.*, \
                 connector.client.config.override.policy, exactly.once.source.support, \
                 ferry.connectors.file, header.converter, key.converter, key.converter.*, listeners,"
            ),
            "{unknown}"
        );

        let grace = error_for(&errors, "task.shutdown.graceful.timeout.ms");
        assert_names(grace, &path, "task.shutdown.graceful.timeout.ms", 8);
        assert!(grace.to_string().contains("0 or more"), "{grace}");
    }
}

#[test]
fn topic_creation_and_override_policy_are_kafka_sink_worker_keys() {
    let config = worker(&[
        FILE,
        ("bootstrap.servers", "k:9092"),
        ("topic.creation.enable", " FALSE "),
        ("connector.client.config.override.policy", "Principal"),
    ]);
    let Some(spec) = config.sink.downcast_ref::<KafkaSinkSpec>() else {
        panic!("not a Kafka sink: {:?}", config.sink);
    };
    assert!(!spec.topic_creation_enable);
    assert_eq!(spec.override_policy, ferry_kafka::OverridePolicy::Principal);
    // Kafka Connect's defaults: topic creation on, every override allowed.
    let config = worker(&[FILE, ("bootstrap.servers", "k:9092")]);
    let Some(spec) = config.sink.downcast_ref::<KafkaSinkSpec>() else {
        panic!("not a Kafka sink: {:?}", config.sink);
    };
    assert!(spec.topic_creation_enable);
    assert_eq!(spec.override_policy, ferry_kafka::OverridePolicy::All);

    let errors = worker_errors(&[
        FILE,
        ("bootstrap.servers", "k:9092"),
        ("topic.creation.enable", "yes"),
        ("connector.client.config.override.policy", "Some"),
    ]);
    assert!(
        error_for(&errors, "topic.creation.enable").contains("true (default), false"),
        "{errors}"
    );
    assert!(
        error_for(&errors, "connector.client.config.override.policy")
            .contains("None, Principal, All (default)"),
        "{errors}"
    );
}

/// `exactly.once.source.support=enabled` in standalone mode: with `offset.storage=kafka` and
/// `sink=kafka` on the same brokers, the sink writes each task's offsets to the offsets topic in
/// its records' transactions, and the tasks' transactional ids start with the offsets topic's
/// name; a sink that writes no transactions is refused by name (a sink on other brokers than the
/// store's is refused too: `ferry-kafka`'s plugin tests).
#[test]
fn exactly_once_in_standalone_writes_offsets_in_the_records_transactions() {
    let base = [
        ("bootstrap.servers", "b1:9092, b2:9092"),
        ("offset.storage", "kafka"),
        ("offset.storage.topic", "connect-offsets"),
        ("exactly.once.source.support", "enabled"),
    ];
    let config = worker(&base);
    assert_eq!(
        config.exactly_once_source,
        ferry_runtime::config::exactly_once::ExactlyOnceSource::Enabled
    );
    assert_eq!(
        config.transactional_id_prefix.as_deref(),
        Some("connect-offsets")
    );
    let sink = config
        .sink
        .downcast_ref::<KafkaSinkSpec>()
        .expect("the Kafka sink");
    assert_eq!(sink.offsets_topic.as_deref(), Some("connect-offsets"));

    // Without exactly-once the sink opens no transactional sinks.
    let config = worker(&base[..3]);
    assert_eq!(config.transactional_id_prefix, None);
    let sink = config.sink.downcast_ref::<KafkaSinkSpec>().unwrap();
    assert_eq!(sink.offsets_topic, None);

    let to_a_file = [
        ("bootstrap.servers", "b1:9092"),
        ("offset.storage", "kafka"),
        ("offset.storage.topic", "connect-offsets"),
        ("sink", "file:/tmp/out.jsonl"),
        ("exactly.once.source.support", "enabled"),
    ];
    let error = error_for(&worker_errors(&to_a_file), "exactly.once.source.support");
    assert!(error.contains("does not write transactions"), "{error}");
}
