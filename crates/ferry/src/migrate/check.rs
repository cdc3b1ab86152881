//! `ferry migrate check`: whether Ferry runs each connector of a cluster unchanged.
//!
//! Each configuration is checked as a Ferry worker's validation would check it (the same code:
//! [`ferry_herder::Validator`]), with this program's connectors, transformations, predicates,
//! converters and Kafka sink, assuming a worker that allows what Kafka Connect's defaults allow
//! (`connector.client.config.override.policy=All`, topic creation on, exactly-once source support
//! enabled). Config provider placeholders cannot be resolved here: a key that holds one is
//! reported as needing that provider on the Ferry worker, not as a problem.

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Arc;

use ferry_api::Config;
use ferry_herder::Validator;
use ferry_plugin::{ConverterSpec, DynSinkSpec, Properties};
use ferry_runtime::config::exactly_once::ExactlyOnceSource;
use serde_json::{Value, json};

use super::MigrateError;
use super::client::Rest;
use crate::Ferry;

/// What the check found for one connector.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub(crate) name: String,
    pub(crate) class: String,
    /// `source` or `sink`.
    pub(crate) kind: String,
    /// What stops Ferry from running it unchanged: (key, message); no key for the connector as a
    /// whole.
    pub(crate) problems: Vec<(Option<String>, String)>,
    /// Config providers its placeholders use (`${alias:…}`): the Ferry worker must define them.
    pub(crate) providers: BTreeSet<String>,
}

impl Verdict {
    pub(crate) fn runs_unchanged(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks every connector of `source`.
///
/// # Errors
/// The cluster cannot be listed.
pub(crate) fn check(ferry: &Ferry, source: &Rest) -> Result<Vec<Verdict>, MigrateError> {
    let path = "/connectors?expand=info";
    let reply = source.get(path)?;
    if reply.status != 200 {
        return Err(MigrateError::Refused {
            request: format!("GET {}{path}", source.url()),
            status: reply.status,
            message: reply.message(),
        });
    }
    let listed = reply.json();
    let Some(connectors) = listed.as_object() else {
        return Err(MigrateError::Move(format!(
            "GET {}{path} did not answer a JSON object of connectors: {}",
            source.url(),
            reply.body
        )));
    };
    let validator = validator(ferry);
    Ok(connectors
        .iter()
        .map(|(name, entry)| verdict(&validator, name, &entry["info"]))
        .collect())
}

/// The validator of this program's plugins with a permissive worker's settings.
fn validator(ferry: &Ferry) -> Validator {
    let validator = Validator::new(ferry.connector_plugins().to_vec())
        .with_transforms(ferry.transform_registry().clone())
        .with_exactly_once(ExactlyOnceSource::Enabled);
    match kafka_sink(ferry) {
        Some(sink) => validator.with_sink(sink),
        None => validator,
    }
}

/// The program's Kafka sink, as a worker with Kafka Connect's defaults would have it.
fn kafka_sink(ferry: &Ferry) -> Option<Arc<dyn DynSinkSpec>> {
    let plugin = ferry
        .worker_plugins()
        .sinks()
        .iter()
        .find(|p| p.name() == "kafka")?;
    let props = Properties::from_pairs(
        "ferry migrate check (a worker with Kafka Connect's defaults)",
        [
            ("bootstrap.servers", "localhost:9092"),
            ("connector.client.config.override.policy", "All"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned())),
    );
    let mut errors = Vec::new();
    plugin.parse(
        Some("kafka"),
        &props,
        (ConverterSpec::default(), ConverterSpec::default()),
        &mut errors,
    )
}

fn verdict(validator: &Validator, name: &str, info: &Value) -> Verdict {
    let config: Config = info["config"]
        .as_object()
        .map(|c| {
            c.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let class = config.get("connector.class").cloned().unwrap_or_default();
    let kind = info["type"].as_str().unwrap_or("unknown").to_owned();
    let providers = placeholder_providers(&config);
    let mut problems = Vec::new();
    if kind != "source" {
        problems.push((
            None,
            format!("a {kind} connector: Ferry runs source connectors only"),
        ));
        return Verdict {
            name: name.to_owned(),
            class,
            kind,
            problems,
            providers,
        };
    }
    match validator.validate(&config) {
        Err(e) => problems.push((None, e.message)),
        Ok(infos) => {
            for info in infos.configs {
                let key = info.value.name;
                // A key holding a placeholder is checked by the worker that resolves it.
                if config.get(&key).is_some_and(|v| v.contains("${")) {
                    continue;
                }
                for error in info.value.errors {
                    problems.push((Some(key.clone()), error));
                }
            }
        }
    }
    Verdict {
        name: name.to_owned(),
        class,
        kind,
        problems,
        providers,
    }
}

/// The aliases of the config providers `config`'s placeholders name (`${alias:path:key}`).
fn placeholder_providers(config: &Config) -> BTreeSet<String> {
    let mut providers = BTreeSet::new();
    for value in config.values() {
        let mut rest = value.as_str();
        while let Some(start) = rest.find("${") {
            let after = &rest[start + 2..];
            match (after.find(':'), after.find('}')) {
                (Some(colon), Some(end)) if colon < end => {
                    providers.insert(after[..colon].to_owned());
                    rest = &after[end + 1..];
                }
                _ => break,
            }
        }
    }
    providers
}

/// One line per connector, then its problems indented.
pub(crate) fn write_table(out: &mut impl Write, verdicts: &[Verdict]) -> std::io::Result<()> {
    let width = verdicts
        .iter()
        .map(|v| v.name.len())
        .max()
        .unwrap_or(4)
        .max(9);
    writeln!(out, "{:<width$}  {:<9}  CLASS", "CONNECTOR", "FERRY")?;
    for v in verdicts {
        let answer = if v.runs_unchanged() { "yes" } else { "no" };
        writeln!(out, "{:<width$}  {:<9}  {}", v.name, answer, v.class)?;
        for (key, message) in &v.problems {
            match key {
                Some(key) => writeln!(out, "{:<width$}    - {key}: {message}", "")?,
                None => writeln!(out, "{:<width$}    - {message}", "")?,
            }
        }
        if !v.providers.is_empty() {
            let aliases: Vec<&str> = v.providers.iter().map(String::as_str).collect();
            writeln!(
                out,
                "{:<width$}    needs config.providers={} on the Ferry worker (placeholders are kept, resolved there)",
                "",
                aliases.join(",")
            )?;
        }
    }
    let unchanged = verdicts.iter().filter(|v| v.runs_unchanged()).count();
    writeln!(
        out,
        "{unchanged} of {} connectors run on Ferry unchanged",
        verdicts.len()
    )
}

/// A JSON array, one object per connector.
pub(crate) fn write_json(out: &mut impl Write, verdicts: &[Verdict]) -> std::io::Result<()> {
    let report: Vec<Value> = verdicts
        .iter()
        .map(|v| {
            json!({
                "name": v.name,
                "class": v.class,
                "type": v.kind,
                "runs_unchanged": v.runs_unchanged(),
                "problems": v.problems.iter().map(|(key, message)| json!({"key": key, "message": message})).collect::<Vec<_>>(),
                "config_providers": v.providers,
            })
        })
        .collect();
    writeln!(out, "{}", Value::Array(report))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(config: Value) -> Value {
        json!({"name": "c", "type": "source", "tasks": [], "config": config})
    }

    #[test]
    fn a_supported_connector_runs_unchanged_and_an_unknown_class_or_transform_does_not() {
        let validator = validator(&Ferry::standard());
        let file = verdict(
            &validator,
            "file",
            &info(
                json!({"name": "file", "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                "tasks.max": "1", "file": "/tmp/in.txt", "topic": "t",
                "producer.override.linger.ms": "5", "transforms": "route",
                "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
                "transforms.route.regex": "(.*)", "transforms.route.replacement": "$1-copy"}),
            ),
        );
        assert!(file.runs_unchanged(), "{file:?}");

        let unknown = verdict(
            &validator,
            "mirror",
            &info(
                json!({"name": "mirror", "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector"}),
            ),
        );
        assert!(!unknown.runs_unchanged());
        assert!(
            unknown.problems[0].1.contains("MirrorSourceConnector"),
            "{unknown:?}"
        );

        let transform = verdict(
            &validator,
            "unwrap",
            &info(
                json!({"name": "unwrap", "connector.class": "FileStreamSource", "file": "/tmp/x", "topic": "t",
                "transforms": "unwrap", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState"}),
            ),
        );
        assert!(
            transform
                .problems
                .iter()
                .any(|(k, m)| k.as_deref() == Some("transforms.unwrap.type")
                    && m.contains("ExtractNewRecordState")),
            "{transform:?}"
        );
    }

    #[test]
    fn placeholders_name_their_providers_and_are_left_to_the_worker() {
        let validator = validator(&Ferry::standard());
        let v = verdict(
            &validator,
            "file",
            &info(
                json!({"name": "file", "connector.class": "FileStreamSource", "topic": "t",
                "file": "${file:/etc/ferry/secrets.properties:input}", "batch.size": "${env:BATCH}"}),
            ),
        );
        assert!(v.runs_unchanged(), "{v:?}");
        assert_eq!(
            v.providers,
            BTreeSet::from(["env".to_owned(), "file".to_owned()])
        );
    }

    #[test]
    fn a_sink_connector_is_not_for_ferry() {
        let validator = validator(&Ferry::standard());
        let v = verdict(
            &validator,
            "sink",
            &json!({"name": "sink", "type": "sink", "config": {"connector.class": "FileStreamSink"}}),
        );
        assert_eq!(
            v.problems,
            [(
                None,
                "a sink connector: Ferry runs source connectors only".to_owned()
            )]
        );
    }
}
