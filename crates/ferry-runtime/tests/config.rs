//! Worker and connector configs: Kafka Connect's properties syntax, defaults, and errors that name the
//! file, key and line — all of a file's problems at once.

mod log_capture;
use log_capture::Logs;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConnectError, SourceConnector, SourceRecord, SourceTask,
    SourceTaskContext, async_trait,
};
use ferry_runtime::config::{
    ConfigError, ConfigErrors, ConnectorConfig, ConverterSpec, ErrorTolerance, OffsetStorageSpec,
    Properties, RestConfig, SinkSpec, WorkerConfig,
};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Writes `text` to `name` in a fresh temp dir and loads it.
fn load(name: &str, text: &[u8]) -> (tempfile::TempDir, PathBuf, Properties) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write config");
    let props = Properties::load(&path).expect("parse config");
    (dir, path, props)
}

fn worker_errors(props: &Properties) -> ConfigErrors {
    WorkerConfig::from_properties(props).expect_err("config should be refused")
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

// ---------------------------------------------------------------------------------------------
// Properties syntax
// ---------------------------------------------------------------------------------------------

/// Shaped like Kafka's `config/connect-standalone.properties`, with every syntax form Java accepts.
const STANDALONE: &str = r"# Licensed to the Apache Software Foundation (ASF) under one or more
# contributor license agreements.

! These are defaults. This file just demonstrates how to override some settings.
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter: org.apache.kafka.connect.json.JsonConverter
# Converter-specific settings can be passed in by prefixing the Converter's setting with the converter
key.converter.schemas.enable true
value.converter.schemas.enable=true

offset.storage.file.filename=/tmp/connect\
                             .offsets
# Flush much faster than normal, which is useful for testing/debugging
offset.flush.interval.ms   =   10000
sink = file:/tmp/caf\u00e9\t.jsonl
#listeners=HTTP://:8083
plugin.path=/usr/local/share/java,\
        /opt/connectors
";

#[test]
fn a_connect_standalone_file_parses() {
    let (_dir, path, props) = load("connect-standalone.properties", STANDALONE.as_bytes());
    assert_eq!(props.path(), path);
    assert_eq!(
        props.get("value.converter"),
        Some("org.apache.kafka.connect.json.JsonConverter")
    );
    assert_eq!(props.get("key.converter.schemas.enable"), Some("true"));
    assert_eq!(
        props.get("offset.storage.file.filename"),
        Some("/tmp/connect.offsets")
    );
    assert_eq!(
        props.get("plugin.path"),
        Some("/usr/local/share/java,/opt/connectors")
    );
    assert_eq!(props.get("listeners"), None);
    // Lines are 1-based and a continued entry reports its first line.
    assert_eq!(props.line_of("key.converter"), Some(5));
    assert_eq!(props.line_of("offset.storage.file.filename"), Some(11));
    assert_eq!(props.line_of("offset.flush.interval.ms"), Some(14));
    assert_eq!(props.line_of("plugin.path"), Some(17));
    assert_eq!(props.keys().count(), 8);

    let (logs, _guard) = Logs::capture();
    let worker = WorkerConfig::from_properties(&props).expect("valid worker config");
    assert_eq!(
        worker.offset_storage_file(),
        Some(Path::new("/tmp/connect.offsets"))
    );
    assert_eq!(worker.offset_flush_interval, Duration::from_secs(10));
    assert_eq!(worker.offset_flush_timeout, Duration::from_secs(5));
    assert_eq!(
        worker.task_shutdown_graceful_timeout,
        Duration::from_secs(5)
    );
    assert_eq!(
        worker.sink,
        SinkSpec::file(PathBuf::from("/tmp/café\t.jsonl"))
    );

    assert_eq!(
        worker.value_converter,
        ConverterSpec::Json {
            schemas_enable: true
        }
    );

    // Ignored Kafka Connect keys: one WARN each, naming file, line and key. The converters are read,
    // but records go to a file, so they have no effect either.
    let logs = logs.text();
    assert_eq!(
        logs.matches("has no effect in this build").count(),
        1,
        "{logs}"
    );
    assert_eq!(
        logs.matches("has no effect with sink=file:").count(),
        4,
        "{logs}"
    );
    assert!(
        logs.contains(&format!("{}:17: plugin.path has no effect", path.display())),
        "{logs}"
    );
}

#[test]
fn defaults_apply_when_keys_are_absent() {
    let props = Properties::from_pairs(
        "worker.properties",
        [("offset.storage.file.filename", "offsets.dat")],
    );
    let worker = WorkerConfig::from_properties(&props).expect("valid");
    assert_eq!(
        worker,
        WorkerConfig {
            offset_storage: OffsetStorageSpec::file(PathBuf::from("offsets.dat")),
            offset_flush_interval: Duration::from_millis(60_000),
            offset_flush_timeout: Duration::from_millis(5_000),
            offset_flush_strict_bound: false,
            task_shutdown_graceful_timeout: Duration::from_millis(5_000),
            sink: SinkSpec::stdout(),
            key_converter: ConverterSpec::Json {
                schemas_enable: true
            },
            value_converter: ConverterSpec::Json {
                schemas_enable: true
            },
            rest: RestConfig::default(),
            connectors_file: PathBuf::from("offsets.dat.connectors.json"),
            topic_tracking: ferry_runtime::TopicTracking::default(),
            config_providers: Default::default(),
            exactly_once_source: Default::default(),
            transactional_id_prefix: None,
        }
    );
}

#[test]
fn the_strict_bound_is_a_boolean_and_anything_else_is_an_error_naming_it() {
    let with = |value: &str| {
        Properties::from_pairs(
            "worker.properties",
            [
                ("offset.storage.file.filename", "offsets.dat"),
                ("offset.flush.strict.bound", value),
            ],
        )
    };
    for (value, expected) in [("true", true), (" FALSE ", false)] {
        let worker = WorkerConfig::from_properties(&with(value)).expect("valid");
        assert_eq!(worker.offset_flush_strict_bound, expected, "{value:?}");
    }
    let errors = worker_errors(&with("yes"));
    let error = error_for(&errors, "offset.flush.strict.bound").to_string();
    assert!(
        error.contains("must be true or false (default false)"),
        "{error}"
    );
}

#[test]
fn relative_paths_stay_as_given_and_zero_grace_is_allowed() {
    let props = Properties::from_pairs(
        "w",
        [
            ("offset.storage.file.filename", "data/offsets"),
            ("sink", " file:out/records.jsonl "),
            ("task.shutdown.graceful.timeout.ms", "0"),
        ],
    );
    let worker = WorkerConfig::from_properties(&props).expect("valid");
    assert_eq!(
        worker.offset_storage_file(),
        Some(Path::new("data/offsets"))
    );
    assert_eq!(
        worker.sink,
        SinkSpec::file(PathBuf::from("out/records.jsonl"))
    );
    assert_eq!(worker.task_shutdown_graceful_timeout, Duration::ZERO);
    assert_eq!(worker.sink.to_string(), "file:out/records.jsonl");
}

#[test]
fn utf8_latin1_and_bom_are_read_as_meant() {
    let (_d, _p, latin1) = load("a.properties", b"sink=file:/tmp/caf\xe9.jsonl\n");
    assert_eq!(latin1.get("sink"), Some("file:/tmp/café.jsonl"));
    let (_d, _p, utf8) = load(
        "b.properties",
        "\u{feff}sink=file:/tmp/café.jsonl\n".as_bytes(),
    );
    assert_eq!(utf8.get("sink"), Some("file:/tmp/café.jsonl"));
}

#[test]
fn a_duplicate_key_keeps_the_last_value_and_warns_with_both_lines() {
    let (logs, _guard) = Logs::capture();
    let (_dir, path, props) = load(
        "dup.properties",
        b"sink=stdout\n# comment\nsink=file:/tmp/x\n",
    );
    assert_eq!(props.get("sink"), Some("file:/tmp/x"));
    assert_eq!(props.line_of("sink"), Some(3));
    let logs = logs.text();
    assert!(
        logs.contains(&format!("{}:3", path.display())) && logs.contains("line 1"),
        "{logs}"
    );
}

#[test]
fn a_malformed_escape_is_a_parse_error_with_its_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bad.properties");
    std::fs::write(&path, "a=1\nb=\\u12G4\n").expect("write");
    let err = Properties::load(&path).expect_err("malformed escape");
    assert!(
        matches!(err, ConfigError::Parse { line: Some(2), .. }),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.starts_with(&format!("{}:2: ", path.display()))
            && message.contains("four hex digits"),
        "{message}"
    );
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let err = Properties::load("/nonexistent/worker.properties").expect_err("no such file");
    assert!(matches!(err, ConfigError::Io { .. }));
    assert!(
        err.to_string()
            .starts_with("/nonexistent/worker.properties: cannot read"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// Worker config errors
// ---------------------------------------------------------------------------------------------

#[test]
fn the_offsets_file_is_required() {
    let (_dir, path, props) = load("worker.properties", b"sink=stdout\n");
    let errors = worker_errors(&props);
    let missing = error_for(&errors, "offset.storage.file.filename");
    assert!(matches!(missing, ConfigError::Missing { .. }));
    let message = missing.to_string();
    assert!(
        message.starts_with(&format!(
            "{}: missing required key \"offset.storage.file.filename\"",
            path.display()
        )),
        "{message}"
    );
}

#[test]
fn errors_without_lines_name_the_label() {
    let props = Properties::from_pairs(
        "REST request",
        [("offset.storage.file.filename", "/o"), ("sinkk", "stdout")],
    );
    let errors = worker_errors(&props);
    let typo = error_for(&errors, "sinkk");
    assert_eq!(typo.line(), None);
    assert_eq!(
        typo.to_string(),
        "REST request: unknown key \"sinkk\"; did you mean \"sink\"?"
    );
}

// ---------------------------------------------------------------------------------------------
// Connector config
// ---------------------------------------------------------------------------------------------

/// A connector shaped like FileStreamSource, with one validated key and one secret.
struct FakeSource;

impl SourceConnector for FakeSource {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![
            ConfigKey::required("file", "the file to read, e.g. file=/var/log/app.log"),
            ConfigKey::required("topic", "the topic to write to"),
            ConfigKey::optional("batch.size", Some("2000"), "lines per poll"),
            ConfigKey::optional("db.password", None, "a secret").secret(),
        ]
    }

    fn validate(&self, config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if config
            .get("batch.size")
            .is_some_and(|size| !size.parse::<u32>().is_ok_and(|n| n > 0))
        {
            issues.push(ConfigIssue {
                key: "batch.size".into(),
                message: "must be a positive integer".into(),
            });
        }
        if config.get("db.password").is_some_and(|p| p.len() < 8) {
            issues.push(ConfigIssue {
                key: "db.password".into(),
                message: "must be at least 8 characters".into(),
            });
        }
        issues
    }

    fn task_configs(
        &self,
        config: &Config,
        _max_tasks: usize,
    ) -> Result<Vec<Config>, ConnectError> {
        Ok(vec![config.clone()])
    }

    fn create_task(&self) -> Box<dyn SourceTask> {
        Box::new(FakeTask)
    }
}

struct FakeTask;

#[async_trait]
impl SourceTask for FakeTask {
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

fn resolve(class: &str) -> Option<Box<dyn SourceConnector>> {
    match class {
        "FileStreamSource" | "org.apache.kafka.connect.file.FileStreamSourceConnector" => {
            Some(Box::new(FakeSource))
        }
        _ => None,
    }
}

fn connector_errors(props: &Properties) -> ConfigErrors {
    match ConnectorConfig::from_properties(props, resolve) {
        Ok(_) => panic!("connector config should be refused"),
        Err(errors) => errors,
    }
}

#[test]
fn a_file_stream_source_config_is_accepted() {
    let text = "name=local-file-source\n\
                connector.class=org.apache.kafka.connect.file.FileStreamSourceConnector\n\
                tasks.max=1\n\
                file=test.txt\n\
                topic=connect-test\n";
    let (_dir, _path, props) = load("connect-file-source.properties", text.as_bytes());
    let Ok((config, connector)) = ConnectorConfig::from_properties(&props, resolve) else {
        panic!("valid connector config refused");
    };
    assert_eq!(config.name, "local-file-source");
    assert_eq!(
        config.class,
        "org.apache.kafka.connect.file.FileStreamSourceConnector"
    );
    assert_eq!(config.tasks_max, 1);
    assert_eq!(config.errors_tolerance, ErrorTolerance::None);
    assert_eq!(config.props.len(), 5);
    assert_eq!(
        config.props.get("name").map(String::as_str),
        Some("local-file-source")
    );
    assert_eq!(
        config.props.get("file").map(String::as_str),
        Some("test.txt")
    );
    assert_eq!(connector.config_keys().len(), 4);
}

#[test]
fn tolerance_tasks_and_converters() {
    let props = Properties::from_pairs(
        "c",
        [
            ("name", "src"),
            ("connector.class", "FileStreamSource"),
            ("tasks.max", " 4 "),
            ("errors.tolerance", "ALL"),
            ("file", "a"),
            ("topic", "t"),
            (
                "value.converter",
                "org.apache.kafka.connect.storage.StringConverter",
            ),
            (
                "header.converter",
                "org.apache.kafka.connect.storage.SimpleHeaderConverter",
            ),
        ],
    );
    let (logs, _guard) = Logs::capture();
    let Ok((config, _)) = ConnectorConfig::from_properties(&props, resolve) else {
        panic!("valid connector config refused");
    };
    assert_eq!(
        (config.tasks_max, config.errors_tolerance),
        (4, ErrorTolerance::All)
    );
    // The connector's value converter overrides the worker's; its key converter is the worker's.
    assert_eq!(config.value_converter, Some(ConverterSpec::String));
    assert_eq!(config.key_converter, None);
    assert_eq!(
        logs.text().matches("has no effect").count(),
        0,
        "{}",
        logs.text()
    );
    // Debug never shows values.
    let debug = format!("{config:?} {props:?}");
    assert!(!debug.contains("StringConverter"), "{debug}");
}

#[test]
fn unknown_and_missing_keys_and_bad_values_are_reported_together() {
    let text = "name=src\n\
                connector.class=FileStreamSource\n\
                tasks.max=0\n\
                fiel=/tmp/in.txt\n\
                topic=t\n\
                errors.tolerance=some\n\
                config.action.reload=restart\n\
                colour=red\n";
    let (_dir, path, props) = load("source.properties", text.as_bytes());
    let errors = connector_errors(&props);
    assert_eq!(errors.len(), 6, "{errors}");

    assert_names(error_for(&errors, "tasks.max"), &path, "tasks.max", 3);
    assert!(
        error_for(&errors, "tasks.max")
            .to_string()
            .contains("from 1 to"),
        "{errors}"
    );

    let typo = error_for(&errors, "fiel");
    assert_names(typo, &path, "fiel", 4);
    assert!(
        typo.to_string().contains("did you mean \"file\"?"),
        "{typo}"
    );

    let missing = error_for(&errors, "file");
    assert!(matches!(missing, ConfigError::Missing { .. }));
    assert!(
        missing.to_string().contains("the file to read"),
        "{missing}"
    );

    assert_names(
        error_for(&errors, "errors.tolerance"),
        &path,
        "errors.tolerance",
        6,
    );
    assert!(
        error_for(&errors, "errors.tolerance")
            .to_string()
            .contains("none (default), all"),
        "{errors}"
    );

    // A Kafka Connect setting Ferry lacks is named as such, not as an unknown key.
    let missing_feature = error_for(&errors, "config.action.reload");
    assert_names(missing_feature, &path, "config.action.reload", 7);
    assert!(matches!(
        missing_feature,
        ConfigError::NotImplemented { .. }
    ));
    assert!(
        missing_feature.to_string().contains(
            "\"config.action.reload\" is a Kafka Connect setting that Ferry does not implement yet \
             (restarting on a changed config provider value)"
        ),
        "{missing_feature}"
    );

    let unknown = error_for(&errors, "colour");
    assert_names(unknown, &path, "colour", 8);
    assert!(
        unknown
            .to_string()
            .contains("accepted keys: batch.size, connector.class,"),
        "{unknown}"
    );
}

#[test]
fn exactly_once_in_standalone_needs_a_store_that_transactions_can_write_to() {
    // topic.creation.enable and connector.client.config.override.policy are the Kafka sink's keys
    // (tested in ferry-kafka), as is exactly-once with offset.storage=kafka and sink=kafka (tested
    // in ferry's worker_config_kafka.rs): the offsets file cannot take offsets in a transaction.
    let text = "offset.storage.file.filename=/tmp/o\n\
                exactly.once.source.support=enabled\n";
    let (_dir, path, props) = load("worker.properties", text.as_bytes());
    let errors = worker_errors(&props);
    let key = "exactly.once.source.support";
    let error = error_for(&errors, key);
    assert_names(error, &path, key, 2);
    assert!(
        error
            .to_string()
            .contains("use offset.storage=kafka (and sink=kafka)"),
        "{error}"
    );
    // Disabled (or preparing) is accepted with any store; a bad value is refused.
    for (value, ok) in [("disabled", true), ("preparing", true), ("on", false)] {
        let text =
            format!("offset.storage.file.filename=/tmp/o\nexactly.once.source.support={value}\n");
        let (_dir, _path, props) = load("worker.properties", text.as_bytes());
        assert_eq!(WorkerConfig::from_properties(&props).is_ok(), ok, "{value}");
    }
}

#[test]
fn bad_tasks_max_values() {
    for bad in ["many", "-1", "1.5", "99999999999"] {
        let props = Properties::from_pairs(
            "c",
            [
                ("name", "n"),
                ("connector.class", "FileStreamSource"),
                ("file", "f"),
                ("topic", "t"),
                ("tasks.max", bad),
            ],
        );
        let errors = connector_errors(&props);
        assert_eq!(errors.len(), 1, "{bad}: {errors}");
        assert!(
            error_for(&errors, "tasks.max")
                .to_string()
                .contains(&format!("{bad:?}")),
            "{errors}"
        );
    }
}

#[test]
fn an_unknown_class_is_an_error_on_connector_class() {
    let (_dir, path, props) = load(
        "c.properties",
        b"name=src\nconnector.class=FileStreamSink\nfile=x\n",
    );
    let errors = connector_errors(&props);
    assert_eq!(errors.len(), 1, "{errors}");
    let class = error_for(&errors, "connector.class");
    assert_names(class, &path, "connector.class", 2);
    assert!(
        class.to_string().contains("\"FileStreamSink\"")
            && class.to_string().contains("unknown connector class")
    );
}

#[test]
fn name_and_class_are_required() {
    let (_dir, path, props) = load("c.properties", b"tasks.max=1\n");
    let errors = connector_errors(&props);
    assert_eq!(errors.len(), 2, "{errors}");
    for key in ["name", "connector.class"] {
        let error = error_for(&errors, key);
        assert!(matches!(error, ConfigError::Missing { .. }));
        assert!(
            error
                .to_string()
                .starts_with(&format!("{}: missing required key", path.display()))
        );
    }
    let blank = Properties::from_pairs(
        "c",
        [("name", " "), ("connector.class", "FileStreamSource")],
    );
    let errors = connector_errors(&blank);
    assert!(
        error_for(&errors, "name")
            .to_string()
            .contains("must not be empty"),
        "{errors}"
    );
}

#[test]
fn validate_issues_carry_file_line_and_value_but_never_a_secret() {
    let text = "name=src\n\
                connector.class=FileStreamSource\n\
                file=/tmp/in.txt\n\
                topic=t\n\
                batch.size=-5\n\
                db.password=hunter2\n";
    let (_dir, path, props) = load("source.properties", text.as_bytes());
    let errors = connector_errors(&props);
    assert_eq!(errors.len(), 2, "{errors}");

    let batch = error_for(&errors, "batch.size");
    assert_names(batch, &path, "batch.size", 5);
    assert!(matches!(batch, ConfigError::Invalid { value: Some(v), .. } if v == "-5"));
    assert_eq!(
        batch.to_string(),
        format!(
            "{}:5: invalid value \"-5\" for \"batch.size\": must be a positive integer",
            path.display()
        )
    );

    let password = error_for(&errors, "db.password");
    assert_names(password, &path, "db.password", 6);
    assert!(!errors.to_string().contains("hunter2"), "{errors}");
    assert!(password.to_string().contains("[hidden]"), "{password}");
}

/// A connector whose secret key has a name nothing would guess is secret: it declares it.
struct DeclaredSecretSource;

impl SourceConnector for DeclaredSecretSource {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![ConfigKey::required("api.key", "the service's API key").secret()]
    }

    fn validate(&self, config: &Config) -> Vec<ConfigIssue> {
        config
            .get("api.key")
            .filter(|k| k.len() < 8)
            .map(|_| ConfigIssue {
                key: "api.key".into(),
                message: "must be at least 8 characters".into(),
            })
            .into_iter()
            .collect()
    }

    fn task_configs(&self, config: &Config, _max: usize) -> Result<Vec<Config>, ConnectError> {
        Ok(vec![config.clone()])
    }

    fn create_task(&self) -> Box<dyn SourceTask> {
        Box::new(FakeTask)
    }
}

#[test]
fn a_declared_secret_is_never_shown_in_validate_issues() {
    let text = "name=src\n\
                connector.class=DeclaredSecret\n\
                api.key=s3cr3t\n";
    let (_dir, path, props) = load("source.properties", text.as_bytes());
    let errors = match ConnectorConfig::from_properties(&props, |_| {
        Some(Box::new(DeclaredSecretSource) as Box<dyn SourceConnector>)
    }) {
        Ok(_) => panic!("connector config should be refused"),
        Err(errors) => errors,
    };
    let key = error_for(&errors, "api.key");
    assert_names(key, &path, "api.key", 3);
    assert!(
        !format!("{errors} {errors:?}").contains("s3cr3t"),
        "{errors:?}"
    );
    assert_eq!(
        key.to_string(),
        format!(
            "{}:3: invalid value [hidden] for \"api.key\": must be at least 8 characters",
            path.display()
        )
    );
}

#[test]
fn validate_is_not_run_while_required_keys_are_missing() {
    // batch.size is invalid, but `file` is missing: only the missing key is reported.
    let props = Properties::from_pairs(
        "c",
        [
            ("name", "n"),
            ("connector.class", "FileStreamSource"),
            ("topic", "t"),
            ("batch.size", "x"),
        ],
    );
    let errors = connector_errors(&props);
    assert_eq!(errors.len(), 1, "{errors}");
    assert!(matches!(
        error_for(&errors, "file"),
        ConfigError::Missing { .. }
    ));
}

#[test]
fn many_keys_keep_their_order_and_past_the_limit_the_connector_is_refused() {
    // 200 000 keys: read in linear time (this took minutes when each insert scanned every key).
    let pairs: Vec<(String, String)> = (0..200_000)
        .map(|i| (format!("k{i}"), i.to_string()))
        .chain([("k7".to_owned(), "last".to_owned())])
        .collect();
    let props = Properties::from_pairs("many", pairs);
    assert_eq!(props.len(), 200_000);
    assert_eq!(props.keys().nth(1), Some("k1"));
    assert_eq!(props.get("k7"), Some("last"), "the last value wins");
    assert_eq!(props.keys().nth(7), Some("k7"), "at its first place");

    let errors = connector_errors(&props);
    assert_eq!(errors.len(), 1, "{errors}");
    let message = errors.to_string();
    assert!(
        message.contains("200000 keys") && message.contains("at most 1000"),
        "{message}"
    );
}

#[test]
fn many_unknown_keys_list_the_accepted_keys_once() {
    let mut pairs = vec![
        ("name".to_owned(), "n".to_owned()),
        ("connector.class".to_owned(), "FileStreamSource".to_owned()),
        ("file".to_owned(), "/does/not/exist/x".to_owned()),
        ("topic".to_owned(), "t".to_owned()),
        ("tpoic".to_owned(), "t".to_owned()),
    ];
    pairs.extend((0..500).map(|i| (format!("colour.{i}"), "red".to_owned())));
    let errors = connector_errors(&Properties::from_pairs("c", pairs));
    assert_eq!(errors.len(), 501, "{errors}");
    let message = errors.to_string();
    assert_eq!(message.matches("accepted keys:").count(), 1, "{message}");
    assert!(
        error_for(&errors, "tpoic")
            .to_string()
            .contains("did you mean \"topic\"?"),
        "{errors}"
    );
}
