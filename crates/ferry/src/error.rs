//! Why a worker (`ferry standalone`, `ferry distributed`) did not start or stopped badly:
//! [`RunError`], what the command prints after `ferry: `.

use std::path::PathBuf;

use ferry_herder::StartError;
use ferry_offsets::StoreError;
use ferry_plugin::sink::SinkError;
use ferry_plugin::{ConfigError, ConfigErrors};
use ferry_rest::BindError;
use ferry_runtime::stores::ConnectorsFileError;

/// Why a worker did not start, or stopped badly. Each says what failed and, through its source,
/// why; nothing was started when it is one of the checks that run before anything is created.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The worker file cannot be read or parsed.
    #[error("{0}")]
    WorkerFile(#[from] ConfigError),
    /// The worker file is refused: every problem, each naming file, key and line.
    #[error("{0}")]
    Config(#[from] ConfigErrors),
    /// Connector files are refused: every file's problems, one per line, with no secret resolved from
    /// a config provider shown.
    #[error("{}", .0.join("\n"))]
    ConnectorFiles(Vec<String>),
    /// Two connector files name the same connector.
    #[error(
        "{} and {} both use the connector name {name:?}; names must be unique (they key the offsets)",
        first.display(),
        second.display()
    )]
    DuplicateName {
        /// The first file with the name.
        first: PathBuf,
        /// The second.
        second: PathBuf,
        /// The name.
        name: String,
    },
    /// The connectors file of REST-created connectors cannot be read (it is never overwritten).
    #[error("{0}")]
    ConnectorsFile(#[from] ConnectorsFileError),
    /// The REST listeners cannot be bound.
    #[error("{0}")]
    Rest(#[from] BindError),
    /// The offset store cannot be opened.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// The sink cannot be started.
    #[error("{0}")]
    Sink(#[from] SinkError),
    /// SIGTERM or SIGINT cannot be listened for.
    #[error("cannot listen for {signal}: {source}")]
    Signal {
        /// `SIGTERM` or `SIGINT`.
        signal: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// A Kafka piece of a distributed worker (its config or status topic, its offset store and sink,
    /// its group) cannot be set up.
    #[error("{0}")]
    Kafka(Box<dyn std::error::Error + Send + Sync>),
    /// The herder refused to start (a connector of the command line, the stored connectors).
    #[error("{0}")]
    Start(#[from] StartError),
    /// The worker ran, but its offset store failed: records delivered after the failure have no
    /// committed offsets, so this is not a clean exit. Holds the store's failure as the worker
    /// recorded it.
    #[error("stopped after the offset store failed: {0}")]
    StoreFailed(String),
}
