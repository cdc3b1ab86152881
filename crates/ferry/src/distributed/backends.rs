//! The distributed worker's offset store and sink, taken from the same plugin registry as the
//! standalone worker's ([`WorkerPlugins`]): the plugins named `kafka`. Distributed mode needs Kafka
//! for both — every worker of the group must read the offsets any of them committed, and each task's
//! offset commits go through its transactional producer, which only a Kafka offsets topic on the
//! records' cluster can take — so a program that registers no Kafka store or sink is refused with
//! that reason, never silently given one.

use std::sync::Arc;

use ferry_plugin::{
    ConfigErrors, ConverterSpec, DynSinkSpec, DynStoreSpec, Properties, WorkerPlugins,
};

/// The plugin name distributed mode needs for its offset store and its sink.
const KAFKA: &str = "kafka";
/// Top-level client settings the worker applies to every Kafka client, task producers included;
/// a `producer.`-prefixed setting overrides them.
const SECURITY_PREFIXES: &[&str] = &["security.", "sasl.", "ssl."];

/// The distributed worker's offset store and sink, as their plugins parsed them.
pub(crate) type Backends = (Arc<dyn DynStoreSpec>, Arc<dyn DynSinkSpec>);

/// Why the distributed worker cannot have its offset store or sink.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BackendError {
    /// No `kafka` plugin of this kind is registered.
    #[error(
        "distributed mode keeps offsets in a Kafka topic and sends records to Kafka, but this \
         program registers no `{KAFKA}` {kind}: register ferry_kafka's plugins \
         (Ferry::standard() does), or run `ferry standalone` for other stores and sinks"
    )]
    NotRegistered {
        /// `offset store` or `sink`.
        kind: &'static str,
    },
    /// The plugin refused the worker file (which the distributed parser accepted).
    #[error("{0}")]
    Refused(ConfigErrors),
    /// The offset store cannot take transactions.
    #[error("the {0} cannot take transactions")]
    NoTransactions(String),
    /// The sink cannot write the offsets into its transactions.
    #[error("{0}")]
    Transactions(ferry_plugin::TransactionsError),
}

/// The offset store and the sink, parsed by the registry's `kafka` plugins from the worker file.
///
/// The sink's producers get the worker's top-level `security.*`, `sasl.*` and `ssl.*` settings
/// (a `producer.` one overrides), as every other Kafka client of a distributed worker does, and
/// write each task's offsets to the worker's offsets topic in the task's transactions.
///
/// # Errors
/// A `kafka` plugin is not registered, or refuses the file.
pub(crate) fn kafka_backends(
    plugins: &WorkerPlugins,
    props: &Properties,
    converters: (ConverterSpec, ConverterSpec),
) -> Result<Backends, BackendError> {
    let store_plugin =
        plugins
            .stores()
            .iter()
            .find(|p| p.name() == KAFKA)
            .ok_or(BackendError::NotRegistered {
                kind: "offset store",
            })?;
    let sink_plugin = plugins
        .sinks()
        .iter()
        .find(|p| p.name() == KAFKA)
        .ok_or(BackendError::NotRegistered { kind: "sink" })?;
    let mut errors = Vec::new();
    let store = store_plugin.parse(props, &[], &mut errors);
    let sink = sink_plugin.parse(
        Some(KAFKA),
        &with_producer_security(props),
        converters,
        &mut errors,
    );
    let (Some(store), Some(sink), true) = (store, sink, errors.is_empty()) else {
        return Err(BackendError::Refused(ConfigErrors::in_file_order(errors)));
    };
    let offsets = store
        .transactional_offsets()
        .ok_or_else(|| BackendError::NoTransactions(store.to_string()))?;
    let sink = sink
        .with_transactional_offsets(&offsets)
        .map_err(BackendError::Transactions)?;
    Ok((store, sink))
}

/// `props` with every top-level security setting also given to the producer, unless the file sets
/// the producer's own.
fn with_producer_security(props: &Properties) -> Properties {
    let mut pairs: Vec<(String, String)> = props
        .iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    for (key, value) in props.iter() {
        let producer_key = format!("producer.{key}");
        if SECURITY_PREFIXES.iter().any(|p| key.starts_with(p))
            && props.get(&producer_key).is_none()
        {
            pairs.push((producer_key, value.to_owned()));
        }
    }
    Properties::from_pairs(props.path(), pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker_file() -> Properties {
        Properties::from_pairs(
            "worker.properties",
            [
                ("bootstrap.servers", "localhost:9092"),
                ("group.id", "g"),
                ("offset.storage.topic", "offsets"),
                ("security.protocol", "SSL"),
                ("ssl.ca.location", "/ca.pem"),
                ("producer.ssl.ca.location", "/producer-ca.pem"),
            ],
        )
    }

    #[test]
    fn a_program_without_the_kafka_plugins_is_refused_with_the_reason() {
        let error = kafka_backends(
            &WorkerPlugins::default(),
            &worker_file(),
            Default::default(),
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(
            error.contains("registers no `kafka` offset store")
                && error.contains("run `ferry standalone` for other stores and sinks"),
            "{error}"
        );
    }

    #[test]
    fn producers_get_the_top_level_security_settings_unless_their_own_are_set() {
        let derived = with_producer_security(&worker_file());
        assert_eq!(derived.get("producer.security.protocol"), Some("SSL"));
        assert_eq!(
            derived.get("producer.ssl.ca.location"),
            Some("/producer-ca.pem")
        );
        assert_eq!(derived.get("group.id"), Some("g"));
    }
}
