//! A sink's own connector keys (Kafka's `topic.creation.*`, `producer.override.*`): accepted in a
//! connector configuration only when the worker's sink reads them, and checked by that sink with the
//! worker's settings; the errors name the key (never its value: nobody declares it).

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConnectError, SourceConnector, SourceRecord, SourceTask,
    SourceTaskContext, async_trait,
};
use ferry_plugin::{DynSinkSpec, SinkError, SinkProvider};
use ferry_runtime::config::{ConfigError, ConnectorConfig, Properties};
use ferry_runtime::transforms::TransformRegistry;

/// A sink reading `fake.override.*`, refusing `fake.override.refused`.
#[derive(Debug)]
struct FakeSinkSpec;

impl fmt::Display for FakeSinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("fake")
    }
}

#[async_trait]
impl DynSinkSpec for FakeSinkSpec {
    fn plugin(&self) -> &'static str {
        "fake"
    }
    async fn start(&self) -> Result<Arc<dyn SinkProvider>, SinkError> {
        Err(SinkError::new(
            "fake",
            ferry_plugin::SinkErrorKind::Fatal,
            "not started in this test",
        ))
    }
    fn uses_converters(&self) -> bool {
        false
    }
    fn handles_connector_key(&self, key: &str) -> bool {
        key.starts_with("fake.override.")
    }
    fn check_connector(&self, config: &Config) -> Vec<ConfigIssue> {
        config
            .keys()
            .filter(|k| *k == "fake.override.refused")
            .map(|k| ConfigIssue {
                key: k.clone(),
                message: "the worker's policy does not allow it".into(),
            })
            .collect()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct Source;

impl SourceConnector for Source {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![ConfigKey::required("topic", "the topic to write to")]
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

fn resolve(class: &str) -> Option<Box<dyn SourceConnector>> {
    (class == "Source").then(|| Box::new(Source) as Box<dyn SourceConnector>)
}

fn props(extra: &[(&str, &str)]) -> Properties {
    let mut pairs = vec![("name", "c"), ("connector.class", "Source"), ("topic", "t")];
    pairs.extend_from_slice(extra);
    Properties::from_pairs("c.properties", pairs)
}

#[test]
fn the_sinks_own_connector_keys_are_accepted_and_checked_by_it() {
    let sink = FakeSinkSpec;
    let ok = props(&[("fake.override.linger.ms", "5")]);
    let (config, _) = ConnectorConfig::from_properties_with(
        &ok,
        resolve,
        &TransformRegistry::default(),
        Some(&sink),
    )
    .expect("the sink's key is accepted");
    assert_eq!(
        config
            .props
            .get("fake.override.linger.ms")
            .map(String::as_str),
        Some("5")
    );

    let refused = props(&[("fake.override.refused", "hunter2")]);
    let errors = ConnectorConfig::from_properties_with(
        &refused,
        resolve,
        &TransformRegistry::default(),
        Some(&sink),
    )
    .err()
    .expect("refused by the sink");
    let error = errors.iter().next().expect("one error");
    assert!(
        matches!(error, ConfigError::Invalid { key, .. } if key == "fake.override.refused"),
        "{error}"
    );
    let message = error.to_string();
    assert!(message.contains("the worker's policy"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");

    // Without a sink reading them (another sink, or none), they are unknown keys.
    let errors = ConnectorConfig::from_properties(&ok, resolve)
        .err()
        .expect("unknown without the sink");
    assert!(
        errors.iter().any(
            |e| matches!(e, ConfigError::UnknownKey { key, .. } if key == "fake.override.linger.ms")
        ),
        "{errors}"
    );
}
