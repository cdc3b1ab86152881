//! [`ConnectWorker`]: a real Kafka Connect 4.4 distributed worker, with FileStreamSource and
//! Debezium's PostgreSQL connector on its plugin path, for the tests that prove Ferry interoperates with
//! it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::TestkitError;
use crate::java::{JavaProcess, Jvm, free_port, log_tail, lost_port_race, write_log_config};
use crate::kafka::KafkaBroker;

/// How long a worker may take to start and join its group.
const START_TIMEOUT: Duration = Duration::from_secs(180);
/// How many times a start tries another REST port after losing one to another process.
const PORT_TRIES: usize = 5;

/// How to run a worker.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// `group.id`; the internal topics are `<group>-configs`, `<group>-offsets`, `<group>-status`.
    pub group: String,
    /// `offset.flush.interval.ms`.
    pub offset_flush_interval_ms: u64,
    /// More worker properties, written after the defaults (a key given twice: the last wins).
    pub extra: Vec<(String, String)>,
    /// The JVM's flags.
    pub jvm: Jvm,
}

impl ConnectOptions {
    /// A worker of group `group` committing offsets every second.
    pub fn new(group: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            offset_flush_interval_ms: 1000,
            extra: Vec::new(),
            jvm: Jvm::Test,
        }
    }

    /// Adds a worker property.
    #[must_use]
    pub fn with(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.extra.push((key.into(), value.into()));
        self
    }
}

/// A Kafka Connect distributed worker process, its REST API on `127.0.0.1:<port>`; killed on drop.
pub struct ConnectWorker {
    process: Option<JavaProcess>,
    dir: tempfile::TempDir,
    rest_port: u16,
    options: ConnectOptions,
    bootstrap: String,
    kafka_home: PathBuf,
}

impl ConnectWorker {
    /// Starts a worker against `broker` and waits until it has joined its group and serves its REST
    /// resources (its log says `Finished starting connectors and tasks` and `REST resources
    /// initialized`), so requests that need the leader work at once.
    ///
    /// # Errors
    /// The worker exited or did not join within three minutes.
    pub fn start(broker: &KafkaBroker, options: ConnectOptions) -> Result<Self, TestkitError> {
        let dir = tempfile::Builder::new()
            .prefix("ferry-connect-")
            .tempdir()
            .map_err(|e| TestkitError::io("creating a temporary folder", Path::new("/tmp"), e))?;
        let mut worker = Self {
            process: None,
            dir,
            rest_port: 0,
            options,
            bootstrap: broker.bootstrap_servers(),
            kafka_home: broker.kafka_home().to_path_buf(),
        };
        let mut tries = 0;
        loop {
            tries += 1;
            worker.rest_port = free_port()?;
            match worker.spawn() {
                Ok(()) => return Ok(worker),
                Err(e) if tries < PORT_TRIES && lost_port_race(&e) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The REST API's base URL, `http://127.0.0.1:<port>` (no trailing slash).
    pub fn rest_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.rest_port)
    }

    /// The worker's `group.id`.
    pub fn group(&self) -> &str {
        &self.options.group
    }

    /// `config.storage.topic`.
    pub fn config_topic(&self) -> String {
        format!("{}-configs", self.options.group)
    }

    /// `offset.storage.topic`.
    pub fn offset_topic(&self) -> String {
        format!("{}-offsets", self.options.group)
    }

    /// `status.storage.topic`.
    pub fn status_topic(&self) -> String {
        format!("{}-status", self.options.group)
    }

    /// Stops the worker as an operator would (SIGTERM: it stops its tasks and commits their offsets),
    /// waiting up to 60 s before SIGKILL. Returns whether it stopped by itself.
    pub fn stop(&mut self) -> bool {
        self.process
            .take()
            .is_none_or(|mut p| p.terminate(Duration::from_secs(60)))
    }

    /// Kills the worker (SIGKILL, as a crash would).
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// Starts the worker again with the same REST port and settings.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub fn restart(&mut self) -> Result<(), TestkitError> {
        self.stop();
        self.spawn()
    }

    /// The worker process's id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(JavaProcess::id)
    }

    /// The last lines of the worker's log.
    pub fn log_tail(&self) -> String {
        log_tail(&self.log_path())
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("connect.log")
    }

    fn write_config(&self) -> Result<PathBuf, TestkitError> {
        let group = &self.options.group;
        let mut config = format!(
            "bootstrap.servers={bootstrap}\n\
             group.id={group}\n\
             config.storage.topic={group}-configs\n\
             offset.storage.topic={group}-offsets\n\
             status.storage.topic={group}-status\n\
             config.storage.replication.factor=1\n\
             offset.storage.replication.factor=1\n\
             status.storage.replication.factor=1\n\
             key.converter=org.apache.kafka.connect.json.JsonConverter\n\
             value.converter=org.apache.kafka.connect.json.JsonConverter\n\
             listeners=http://127.0.0.1:{port}\n\
             plugin.path={plugins}\n\
             offset.flush.interval.ms={flush}\n\
             scheduled.rebalance.max.delay.ms=0\n",
            bootstrap = self.bootstrap,
            port = self.rest_port,
            plugins = self.kafka_home.join("plugins").display(),
            flush = self.options.offset_flush_interval_ms,
        );
        for (key, value) in &self.options.extra {
            config.push_str(&format!("{key}={value}\n"));
        }
        let path = self.dir.path().join("connect-distributed.properties");
        std::fs::write(&path, config).map_err(|e| TestkitError::io("writing", &path, e))?;
        Ok(path)
    }

    fn spawn(&mut self) -> Result<(), TestkitError> {
        let config = self.write_config()?;
        let log_config = write_log_config(self.dir.path())?;
        let mut args = self.options.jvm.flags(false);
        args.push(format!(
            "-Dlog4j2.configurationFile={}",
            log_config.display()
        ));
        args.extend([
            "-cp".to_owned(),
            format!("{}/lib/*", self.kafka_home.display()),
            "org.apache.kafka.connect.cli.ConnectDistributed".to_owned(),
            config.display().to_string(),
        ]);
        let mut process = JavaProcess::spawn(
            "the Kafka Connect worker",
            self.dir.path(),
            &self.log_path(),
            &args,
            // Joined its group, and the REST resources are up (the second may come a little later).
            &[
                "Finished starting connectors and tasks",
                "REST resources initialized",
            ],
        )?;
        process.wait_ready("the Kafka Connect worker", START_TIMEOUT)?;
        self.process = Some(process);
        Ok(())
    }
}

impl Drop for ConnectWorker {
    fn drop(&mut self) {
        self.kill();
    }
}
