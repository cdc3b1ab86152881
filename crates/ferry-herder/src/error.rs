//! Why a herder refused a request: a kind (which the REST API maps to Kafka Connect's HTTP status), the
//! message answered to the client, and, when another error caused it, that error as its source.

use std::error::Error;
use std::fmt;

/// Why a herder did not start: the worker is not started either.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The config store could not be read.
    #[error("cannot read the connector configurations from {store}: {source}")]
    ConfigStore {
        /// The store, as it describes itself.
        store: String,
        /// Why it could not be read.
        source: ferry_runtime::stores::ConfigStoreError,
    },
    /// A connector given on the command line was refused (its configuration could not be kept, or
    /// it cannot make its task configurations).
    #[error("connector {name:?}: {reason}")]
    Connector {
        /// The connector's name.
        name: String,
        /// Why it was refused.
        reason: String,
    },
    /// `start` was called twice.
    #[error("the distributed herder was already started")]
    AlreadyStarted,
}

/// Why a connector is FAILED: it could not make, keep or start its task configurations. Its
/// `Display` is the connector status's trace (and, for a command-line connector, why the start is
/// refused).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectorFailure {
    /// Its configuration is invalid: Kafka Connect's `400` message, listing every error.
    #[error(transparent)]
    Invalid(HerderError),
    /// The connector could not make its task configurations.
    #[error("the connector could not create its task configurations: {reason}")]
    TaskConfigs {
        /// The connector's error, its resolved secrets scrubbed. Kept as text only: the
        /// connector's error (and its causes) may carry a resolved secret.
        reason: String,
    },
    /// A placeholder of a stored task configuration cannot be resolved.
    #[error(transparent)]
    Placeholders(#[from] crate::validate::UnresolvedPlaceholders),
    /// Its task configurations could not be written to its config store.
    #[error("its task configurations could not be written to {store}: {source}")]
    WriteTaskConfigs {
        /// The store, as it describes itself.
        store: String,
        /// Why it refused.
        source: ferry_runtime::stores::ConfigStoreError,
    },
    /// Its task configurations could not be read back from its config store.
    #[error("its task configurations could not be read from {store}: {source}")]
    ReadTaskConfigs {
        /// The store, as it describes itself.
        store: String,
        /// Why it could not be read.
        source: ferry_runtime::stores::ConfigStoreError,
    },
    /// Its config store holds no task configurations for it.
    #[error("{store} holds no task configurations for it; restart it")]
    NoTaskConfigs {
        /// The store, as it describes itself.
        store: String,
    },
    /// The worker refused to start its tasks.
    #[error(transparent)]
    StartTasks(#[from] ferry_runtime::WorkerError),
}

/// What went wrong, independent of the transport; [`HerderError::status`] maps it to HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HerderErrorKind {
    /// 404: no such connector or task.
    NotFound,
    /// 409: the connector already exists.
    AlreadyExists,
    /// 400: the request is invalid (bad configuration, wrong state, rejected offsets).
    BadRequest,
    /// 409: the request conflicts with work in progress (distributed mode: a rebalance).
    Conflict,
    /// 503: the herder cannot answer now (distributed mode: not the leader, or no leader yet).
    Unavailable,
    /// 500: the request was valid but could not be carried out (an I/O error).
    Internal,
}

/// Why the herder refused a request. Its `Display` is the message the REST API answers with.
#[derive(Debug)]
#[non_exhaustive]
pub struct HerderError {
    /// What went wrong.
    pub kind: HerderErrorKind,
    /// The message for the client.
    pub message: String,
    source: Option<Box<dyn Error + Send + Sync>>,
}

impl HerderError {
    /// An error of `kind` answering `message`.
    pub fn new(kind: HerderErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// 404: no such connector or task.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(HerderErrorKind::NotFound, message)
    }

    /// 409: the connector already exists.
    pub fn already_exists(message: impl Into<String>) -> Self {
        Self::new(HerderErrorKind::AlreadyExists, message)
    }

    /// 400: the request is invalid.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(HerderErrorKind::BadRequest, message)
    }

    /// 409: conflicts with work in progress.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(HerderErrorKind::Conflict, message)
    }

    /// 503: cannot answer now.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(HerderErrorKind::Unavailable, message)
    }

    /// 500: valid but could not be carried out.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(HerderErrorKind::Internal, message)
    }

    /// Keeps `source` as the cause (the message stays what the client is told).
    pub fn with_source(mut self, source: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// The HTTP status Kafka Connect answers with.
    pub fn status(&self) -> u16 {
        match self.kind {
            HerderErrorKind::NotFound => 404,
            HerderErrorKind::AlreadyExists | HerderErrorKind::Conflict => 409,
            HerderErrorKind::BadRequest => 400,
            HerderErrorKind::Unavailable => 503,
            HerderErrorKind::Internal => 500,
        }
    }
}

impl fmt::Display for HerderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Error for HerderError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_kafka_connects_status_codes_and_the_cause_is_kept() {
        let codes: Vec<u16> = [
            HerderError::not_found("x"),
            HerderError::already_exists("x"),
            HerderError::bad_request("x"),
            HerderError::conflict("x"),
            HerderError::unavailable("x"),
            HerderError::internal("x"),
        ]
        .iter()
        .map(HerderError::status)
        .collect();
        assert_eq!(codes, [404, 409, 400, 409, 503, 500]);

        let cause = std::io::Error::other("disk full");
        let error = HerderError::internal("Failed to modify offsets: disk full").with_source(cause);
        assert_eq!(error.to_string(), "Failed to modify offsets: disk full");
        assert_eq!(error.kind, HerderErrorKind::Internal);
        let source = error.source().expect("kept");
        assert_eq!(source.to_string(), "disk full");
    }

    #[test]
    fn connector_failures_say_what_the_trace_said() {
        use ferry_runtime::stores::ConfigStoreError;
        let store = || "the connectors file /tmp/c.json".to_owned();
        let cases = [
            (
                ConnectorFailure::TaskConfigs {
                    reason: "no tables".to_owned(),
                },
                "the connector could not create its task configurations: no tables",
            ),
            (
                ConnectorFailure::WriteTaskConfigs {
                    store: store(),
                    source: ConfigStoreError::new("disk full"),
                },
                "its task configurations could not be written to the connectors file /tmp/c.json: \
                 disk full",
            ),
            (
                ConnectorFailure::ReadTaskConfigs {
                    store: store(),
                    source: ConfigStoreError::new("gone"),
                },
                "its task configurations could not be read from the connectors file /tmp/c.json: gone",
            ),
            (
                ConnectorFailure::NoTaskConfigs { store: store() },
                "the connectors file /tmp/c.json holds no task configurations for it; restart it",
            ),
            (
                ConnectorFailure::Invalid(HerderError::bad_request(
                    "Connector configuration is invalid",
                )),
                "Connector configuration is invalid",
            ),
            (
                ConnectorFailure::Placeholders(crate::validate::UnresolvedPlaceholders {
                    errors: vec![
                        ("a".to_owned(), "key a: no provider x".to_owned()),
                        ("b".to_owned(), "key b: no provider y".to_owned()),
                    ],
                }),
                "key a: no provider x; key b: no provider y",
            ),
        ];
        for (failure, message) in cases {
            assert_eq!(failure.to_string(), message);
        }
        let written = ConnectorFailure::WriteTaskConfigs {
            store: store(),
            source: ConfigStoreError::new("disk full"),
        };
        assert_eq!(
            written.source().map(ToString::to_string).as_deref(),
            Some("disk full")
        );
    }
}
