//! # ferry-testkit
//!
//! Test support usable by connector authors too.
//!
//! [`TaskHarness`] runs a source connector's task as the runtime would — started with a context whose
//! offset reader reads a memory store, its records' offsets committed through the real
//! `OffsetWriter` — with nothing but `ferry-api` and `ferry-offsets` underneath: no worker, no sink,
//! no process. The test every connector wants, "after a restart it resumes from its committed
//! offset", is one call:
//!
//! ```
//! use ferry_api::{Config, ConfigIssue, ConfigKey, ConnectError, OffsetStorageReaderExt,
//!     SourceConnector, SourceRecord, SourceTask, SourceTaskContext, async_trait};
//! use ferry_testkit::{TaskHarness, config};
//! # use std::sync::Arc;
//! # #[derive(serde::Serialize)] struct Counter { counter: &'static str }
//! # #[derive(serde::Serialize, serde::Deserialize)] struct At { n: i64 }
//! # struct CounterSource;
//! # impl SourceConnector for CounterSource {
//! #     fn config_keys(&self) -> Vec<ConfigKey> { Vec::new() }
//! #     fn validate(&self, _: &Config) -> Vec<ConfigIssue> { Vec::new() }
//! #     fn task_configs(&self, c: &Config, _: usize) -> Result<Vec<Config>, ConnectError> { Ok(vec![c.clone()]) }
//! #     fn create_task(&self) -> Box<dyn SourceTask> { Box::new(CounterTask { n: 0 }) }
//! # }
//! # struct CounterTask { n: i64 }
//! # #[async_trait]
//! # impl SourceTask for CounterTask {
//! #     async fn start(&mut self, cx: Arc<dyn SourceTaskContext>) -> Result<(), ConnectError> {
//! #         let at: Option<At> = cx.offset_storage_reader().offset_of(&Counter { counter: "main" }).await?;
//! #         self.n = at.map_or(0, |a| a.n);
//! #         Ok(())
//! #     }
//! #     async fn poll(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
//! #         self.n += 1;
//! #         let r = SourceRecord::new(&Counter { counter: "main" }, &At { n: self.n }, "t", self.n.into());
//! #         Ok(vec![r?])
//! #     }
//! #     async fn stop(&mut self) -> Result<(), ConnectError> { Ok(()) }
//! # }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let harness = TaskHarness::new("counter");
//! // Polls 5 records, commits them, restarts the task, polls again: errors if a committed record
//! // comes again.
//! let resumed = harness.assert_resumes(&CounterSource, config(&[("topic", "t")]), 5).await?;
//! assert_eq!(resumed.first_after_restart.value, Some(6.into()));
//! # Ok(())
//! # }
//! ```
//!
//! The steps are there on their own too: [`TaskHarness::start`], [`poll_n`], [`TaskHarness::commit`],
//! [`TaskHarness::restart`], [`TaskHarness::offset`], and the [`CountingReader`] that shows what a
//! task asked for.
//!
//! [`KafkaBroker`] runs a real Apache Kafka 4.4 broker (single-node KRaft, from the jars
//! `scripts/install-test-deps` copies out of Maven Central) on free loopback ports and stops it when
//! dropped; [`KafkaBroker::shared`] gives every test of a binary the same one. Its data survives
//! [`KafkaBroker::restart`], so tests can take the broker away mid-run and bring it back.
//! [`ConnectWorker`] runs a real Kafka Connect 4.4 distributed worker against it, with
//! FileStreamSource and Debezium's PostgreSQL connector on its plugin path.

mod connect;
mod harness;
mod java;
mod kafka;
mod wait;

pub use connect::{ConnectOptions, ConnectWorker};
pub use harness::{
    CountingReader, HarnessError, Resumed, TaskHarness, config, poll_for, poll_n, poll_times,
    poll_up_to,
};
pub use java::{Jvm, KAFKA_VERSION, kafka_home};
pub use kafka::KafkaBroker;
pub use wait::{eventually, eventually_async};

use std::path::{Path, PathBuf};

/// Why a broker or a Kafka Connect worker could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestkitError {
    /// The Kafka jars are not where `scripts/install-test-deps` puts them.
    #[error(
        "Apache Kafka {version}'s jars were not found ({looked_for:?} is missing). Run \
         ./scripts/install-test-deps, which copies them from Maven Central, or point FERRY_KAFKA_HOME \
         at a folder with lib/ and plugins/",
        version = java::KAFKA_VERSION
    )]
    KafkaMissing {
        /// The jar that was looked for.
        looked_for: PathBuf,
    },
    /// The process exited before it was ready.
    #[error("{what} exited during start-up ({status}); its log ends:\n{log_tail}")]
    Exited {
        /// Which process.
        what: String,
        /// Its exit status.
        status: String,
        /// The last lines of its log.
        log_tail: String,
    },
    /// Starting or waiting for a process failed.
    #[error("{0}")]
    Start(String),
    /// A file or folder could not be written.
    #[error("{what} {path:?} failed: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl TestkitError {
    fn io(what: &'static str, path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    }
}
