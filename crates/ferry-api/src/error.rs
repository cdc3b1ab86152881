//! Errors a connector author meets.

use std::fmt;

/// A partition or offset map holds a value Kafka Connect does not allow, or does not fit a typed struct.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct ValueError {
    key: String,
    reason: String,
}

impl ValueError {
    /// An error about the field `key` (empty when it concerns the whole map).
    pub fn new(key: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            reason: reason.into(),
        }
    }

    /// Puts `key` in front of the key path (`outer.inner`), for errors raised below a field.
    pub(crate) fn with_key(mut self, key: &str) -> Self {
        self.key = if self.key.is_empty() {
            key.to_owned()
        } else {
            format!("{key}.{}", self.key)
        };
        self
    }

    /// The field the error is about; empty when it concerns the whole map.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// What is wrong.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "invalid partition or offset map: {}", self.reason)
        } else {
            write!(f, "invalid value for key {:?}: {}", self.key, self.reason)
        }
    }
}

/// An [`crate::OffsetStorageReader`] could not answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OffsetReadError {
    /// The offset stored for a partition cannot be decoded. Ferry never treats this as "no offset":
    /// the task must not silently start over.
    #[error(
        "the offset stored for partition {partition} of connector {connector:?} cannot be decoded: {reason}; inspect it with `ferry offsets get` and fix or reset it"
    )]
    Undecodable {
        /// The connector whose offsets were read.
        connector: String,
        /// The partition, as the task asked for it.
        partition: String,
        /// Why decoding failed.
        reason: String,
    },
    /// The requested partition itself is not a valid Kafka Connect map.
    #[error("partition {partition} cannot be used as an offset key: {reason}")]
    InvalidPartition {
        /// The partition as given.
        partition: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A stored offset does not fit the type the task asked for.
    #[error(
        "the offset stored for partition {partition} does not fit the requested type: {source}"
    )]
    Type {
        /// The partition.
        partition: String,
        /// The conversion error.
        source: ValueError,
    },
    /// The offset store failed.
    #[error("reading offsets of connector {connector:?} failed: {message}")]
    Store {
        /// The connector whose offsets were read.
        connector: String,
        /// What the store reported.
        message: String,
        /// Whether trying again may succeed.
        retriable: bool,
    },
    /// The reader was closed because its task was stopped or cancelled.
    #[error("the offset reader of connector {connector:?} is closed (its task was stopped)")]
    Closed {
        /// The connector.
        connector: String,
    },
}

/// An error raised by a connector or task. The runtime fails the task unless it is retriable.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ConnectError {
    message: String,
    retriable: bool,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl ConnectError {
    /// A fatal error: the task fails with this message.
    pub fn fatal(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retriable: false,
            source: None,
        }
    }

    /// A transient error: the runtime backs off and tries again.
    pub fn retriable(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retriable: true,
            source: None,
        }
    }

    /// Attaches the underlying cause.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// Whether trying again may succeed.
    pub fn is_retriable(&self) -> bool {
        self.retriable
    }
}

impl From<OffsetReadError> for ConnectError {
    fn from(e: OffsetReadError) -> Self {
        let retriable = matches!(
            e,
            OffsetReadError::Store {
                retriable: true,
                ..
            }
        );
        Self {
            message: e.to_string(),
            retriable,
            source: Some(Box::new(e)),
        }
    }
}

impl From<ValueError> for ConnectError {
    fn from(e: ValueError) -> Self {
        Self::fatal(e.to_string()).with_source(e)
    }
}
