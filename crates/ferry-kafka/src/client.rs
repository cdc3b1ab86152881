//! The offset store's Kafka clients: their context, and turning their failures into [`StoreError`]s
//! that say what failed and what to do. Shared by the store and the topic administration
//! ([`crate::admin`]), which is why it is not inside `store`: `admin` needs it, and `store` needs `admin`.

use ferry_offsets::StoreError;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

/// The store's clients' context: librdkafka's asynchronous client errors (a broker connection
/// dropped, all brokers down) are logged at WARN with the store's name — librdkafka retries them, and
/// the store's operations return their own errors when they fail. End-of-partition events are
/// expected (the reader asks for them) and not logged at all; rust-rdkafka would otherwise log each at
/// ERROR.
#[derive(Debug, Clone)]
pub(crate) struct StoreContext {
    pub(crate) store: String,
}

impl ClientContext for StoreContext {
    fn error(&self, error: KafkaError, reason: &str) {
        if matches!(
            error.rdkafka_error_code(),
            Some(RDKafkaErrorCode::PartitionEOF)
        ) {
            return;
        }
        tracing::warn!(store = %self.store, "offset store client: {error}: {reason}");
    }
}

impl ConsumerContext for StoreContext {}

/// The consumer type of the store.
pub(crate) type StoreConsumer = BaseConsumer<StoreContext>;

/// `kafka topic T at B`: how the store names itself in logs and errors.
pub(crate) fn describe(topic: &str, bootstrap_servers: &str) -> String {
    format!("kafka topic {topic} at {bootstrap_servers}")
}

/// A [`StoreError::Backend`] of the store named `store`.
pub(crate) fn backend(store: &str, message: impl Into<String>, retriable: bool) -> StoreError {
    StoreError::backend(store, message, retriable)
}

/// A [`StoreError::Backend`] for a failed client call: `what` failed, the client's error, and whether a
/// retry may succeed.
pub(crate) fn kafka(store: &str, what: &str, error: &KafkaError) -> StoreError {
    let retriable = is_retriable(error);
    let hint = if retriable {
        "this is usually temporary (brokers unreachable or electing a leader); check that the brokers in \
         bootstrap.servers are running and reachable, the operation will be retried"
    } else {
        "this will not resolve by retrying; check the topic, the client settings and the broker's ACLs"
    };
    backend(store, format!("{what} failed: {error}; {hint}"), retriable).with_source(error.clone())
}

pub(crate) use crate::retriable::{is_retriable, is_retriable_code};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_and_leadership_errors_are_retriable_config_errors_are_not() {
        assert!(is_retriable(&KafkaError::MessageProduction(
            RDKafkaErrorCode::MessageTimedOut
        )));
        assert!(is_retriable(&KafkaError::MessageProduction(
            RDKafkaErrorCode::NotEnoughReplicas
        )));
        assert!(is_retriable(&KafkaError::MetadataFetch(
            RDKafkaErrorCode::AllBrokersDown
        )));
        assert!(!is_retriable(&KafkaError::MessageProduction(
            RDKafkaErrorCode::MessageSizeTooLarge
        )));
        assert!(!is_retriable(&KafkaError::MessageProduction(
            RDKafkaErrorCode::TopicAuthorizationFailed
        )));
        assert!(!is_retriable(&KafkaError::ClientCreation(
            "bad config".to_owned()
        )));
    }

    #[test]
    fn errors_name_the_store_and_what_to_do() {
        let store = describe("connect-offsets", "k1:9092");
        assert_eq!(store, "kafka topic connect-offsets at k1:9092");
        let err = kafka(
            &store,
            "sending 3 offset records",
            &KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut),
        );
        assert!(err.is_retriable());
        let text = err.to_string();
        assert!(
            text.starts_with("offset store kafka topic connect-offsets at k1:9092: sending 3 offset records failed"),
            "{text}"
        );
        assert!(text.contains("bootstrap.servers"), "{text}");
    }
}
