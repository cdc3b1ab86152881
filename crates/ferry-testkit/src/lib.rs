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
//! [`TansuBroker`] runs a real Kafka-compatible broker (tansu, with its SQLite storage engine) on a
//! free loopback port in a fresh temporary directory, and stops it when dropped. Its data survives
//! [`TansuBroker::restart`], so tests can take the broker away mid-run and bring it back.

mod harness;

pub use harness::{
    CountingReader, HarnessError, Resumed, TaskHarness, config, poll_for, poll_n, poll_times,
    poll_up_to,
};

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Why the broker could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestkitError {
    /// The `tansu` binary is not installed.
    #[error(
        "the `tansu` broker binary was not found on PATH (looked for {binary:?}). Install it with \
         ./scripts/install-test-deps (cargo install tansu --locked --version 0.6.0 --features libsql), \
         or point FERRY_TANSU_BIN at it"
    )]
    TansuMissing {
        /// The binary that was looked for.
        binary: String,
    },
    /// Starting or waiting for the broker failed.
    #[error("tansu broker: {0}")]
    Broker(String),
}

/// A tansu broker process serving `127.0.0.1:<port>`; killed on drop.
pub struct TansuBroker {
    child: Option<Child>,
    dir: tempfile::TempDir,
    port: u16,
    binary: PathBuf,
}

fn tansu_binary() -> Result<PathBuf, TestkitError> {
    let name = std::env::var("FERRY_TANSU_BIN").unwrap_or_else(|_| "tansu".to_owned());
    let candidate = Path::new(&name);
    if candidate.components().count() > 1 {
        return if candidate.is_file() {
            Ok(candidate.to_path_buf())
        } else {
            Err(TestkitError::TansuMissing { binary: name })
        };
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    // cargo install puts binaries here, and a test's PATH may not include it.
    if let Some(home) = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
    {
        dirs.push(home.join("bin"));
    }
    dirs.into_iter()
        .map(|d| d.join(&name))
        .find(|p| p.is_file())
        .ok_or(TestkitError::TansuMissing { binary: name })
}

fn free_port() -> Result<u16, TestkitError> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| TestkitError::Broker(format!("no free port: {e}")))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| TestkitError::Broker(e.to_string()))
}

impl TansuBroker {
    /// Starts a broker with empty storage on a free loopback port and waits until it accepts
    /// connections.
    ///
    /// # Errors
    /// `tansu` is missing, or the broker did not come up within 60 s.
    pub fn start() -> Result<Self, TestkitError> {
        let binary = tansu_binary()?;
        let dir = tempfile::Builder::new()
            .prefix("ferry-tansu-")
            .tempdir()
            .map_err(|e| TestkitError::Broker(format!("temp dir: {e}")))?;
        let mut broker = Self {
            child: None,
            dir,
            port: free_port()?,
            binary,
        };
        broker.spawn()?;
        Ok(broker)
    }

    /// `bootstrap.servers` for clients.
    pub fn bootstrap_servers(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The broker's working directory (its SQLite database lives here).
    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Stops the broker (SIGKILL). Its data stays for [`restart`](Self::restart).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the broker again on the same port with the same data.
    ///
    /// # Errors
    /// The broker did not come back within 60 s.
    pub fn restart(&mut self) -> Result<(), TestkitError> {
        self.stop();
        self.spawn()
    }

    fn spawn(&mut self) -> Result<(), TestkitError> {
        let url = format!("tcp://127.0.0.1:{}", self.port);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("tansu.log"))
            .map_err(|e| TestkitError::Broker(format!("log file: {e}")))?;
        let log_err = log
            .try_clone()
            .map_err(|e| TestkitError::Broker(e.to_string()))?;
        let child = Command::new(&self.binary)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", "sqlite://tansu.db"])
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| {
                TestkitError::Broker(format!("cannot run {}: {e}", self.binary.display()))
            })?;
        self.child = Some(child);
        self.wait_ready(Duration::from_secs(60))
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), TestkitError> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                return Err(TestkitError::Broker(format!(
                    "exited during start-up ({status}); log:\n{}",
                    self.log_tail()
                )));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(TestkitError::Broker(format!(
                    "not listening on {addr} after {timeout:?}; log:\n{}",
                    self.log_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last lines of the broker's log, for failure messages.
    pub fn log_tail(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(self.dir.path().join("tansu.log")) {
            let _ = f.read_to_string(&mut text);
        }
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for TansuBroker {
    fn drop(&mut self) {
        self.stop();
    }
}
