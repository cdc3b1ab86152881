//! [`KafkaBroker`]: a real Apache Kafka 4.4 broker (single-node KRaft, broker and controller in one
//! JVM) on free loopback ports, for tests.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::TestkitError;
use crate::java::{
    JavaProcess, Jvm, free_port, kafka_home, log_tail, lost_port_race, process_long_dir,
    write_log_config,
};

/// How long a broker may take to start (a cold JVM on a busy two-core machine).
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// How many times a start tries other ports after losing a port to another process.
const PORT_TRIES: usize = 5;

/// Where a broker keeps its files: a temporary folder removed on drop, or (for the broker shared by a
/// test binary, which is never dropped) a folder the next run sweeps.
enum Home {
    Temp(tempfile::TempDir),
    ProcessLong(PathBuf),
}

impl Home {
    fn path(&self) -> &Path {
        match self {
            Home::Temp(dir) => dir.path(),
            Home::ProcessLong(dir) => dir,
        }
    }
}

/// An Apache Kafka broker serving `127.0.0.1:<port>`; killed on drop.
///
/// - [`KafkaBroker::start`]: a broker of the caller's own, for tests that stop or restart it.
/// - [`KafkaBroker::shared`]: one broker for every test of the binary that isolates itself by topic
///   and group names (a JVM start is seconds; a test binary needs one).
///
/// Topics are created on first use, as Kafka's default `auto.create.topics.enable=true` does.
pub struct KafkaBroker {
    process: Option<JavaProcess>,
    home: Home,
    settings: Vec<(String, String)>,
    jvm: Jvm,
    port: u16,
    controller_port: u16,
    kafka_home: PathBuf,
    /// The address clients reach the broker at (`127.0.0.1` unless [`KafkaBroker::start_on`]).
    host: String,
}

impl KafkaBroker {
    /// Starts a broker with empty storage on free loopback ports and waits until it serves.
    ///
    /// # Errors
    /// The jars are missing ([`TestkitError::KafkaMissing`]: run `./scripts/install-test-deps`), or
    /// the broker did not start within two minutes.
    pub fn start() -> Result<Self, TestkitError> {
        Self::start_with(&[])
    }

    /// As [`start`](Self::start), with broker settings added to (or replacing) the test defaults,
    /// e.g. `[("auto.create.topics.enable", "false")]`.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub fn start_with(settings: &[(&str, &str)]) -> Result<Self, TestkitError> {
        Self::start_jvm(settings, Jvm::Test)
    }

    /// As [`start_with`](Self::start_with), on the given JVM flags ([`Jvm::Shipped`] for the bench).
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub fn start_jvm(settings: &[(&str, &str)], jvm: Jvm) -> Result<Self, TestkitError> {
        Self::start_host("127.0.0.1", settings, jvm)
    }

    /// As [`start_with`](Self::start_with), listening for clients on `host` (an address of this
    /// machine, e.g. the host side of a test's veth pair, so that a process in another network
    /// namespace reaches it) instead of loopback; the controller stays on loopback.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub fn start_on(host: &str, settings: &[(&str, &str)]) -> Result<Self, TestkitError> {
        Self::start_host(host, settings, Jvm::Test)
    }

    fn start_host(host: &str, settings: &[(&str, &str)], jvm: Jvm) -> Result<Self, TestkitError> {
        let dir = tempfile::Builder::new()
            .prefix("ferry-kafka-")
            .tempdir()
            .map_err(|e| TestkitError::io("creating a temporary folder", Path::new("/tmp"), e))?;
        Self::start_in(Home::Temp(dir), settings, jvm, host)
    }

    /// The broker shared by the tests of this test binary, started by the first caller. It runs until
    /// the binary exits (the kernel then kills it: see the `java` module). Never stop it: tests that
    /// take the broker away use [`start`](Self::start).
    ///
    /// # Errors
    /// As [`start`](Self::start); every caller gets the first start's error.
    pub fn shared() -> Result<&'static KafkaBroker, TestkitError> {
        Self::shared_with(&[])
    }

    /// The broker shared by the tests of this binary that ask for the same `settings` (one broker
    /// per distinct list), as [`shared`](Self::shared).
    ///
    /// # Errors
    /// As [`start`](Self::start); every caller gets the first start's error.
    pub fn shared_with(settings: &[(&str, &str)]) -> Result<&'static KafkaBroker, TestkitError> {
        // The first start's error, shared by every caller (a `TestkitError` is not `Clone`).
        type Shared = Vec<(
            Vec<(String, String)>,
            Result<&'static KafkaBroker, Arc<TestkitError>>,
        )>;
        static SHARED: Mutex<Shared> = Mutex::new(Vec::new());
        let key: Vec<(String, String)> = settings
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        // Held while starting, so that concurrent first callers start one broker, not several.
        let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        let started = match shared.iter().find(|(k, _)| *k == key) {
            Some((_, started)) => started.clone(),
            None => {
                let prefix = format!("ferry-kafka-shared{}-", shared.len());
                let started = process_long_dir(&prefix)
                    .and_then(|dir| {
                        Self::start_in(Home::ProcessLong(dir), settings, Jvm::Test, "127.0.0.1")
                    })
                    // Leaked on purpose: it lives as long as the process.
                    .map(|broker| &*Box::leak(Box::new(broker)))
                    .map_err(Arc::new);
                shared.push((key, started.clone()));
                started
            }
        };
        started.map_err(|e| TestkitError::Start(format!("the shared broker did not start: {e}")))
    }

    fn start_in(
        home: Home,
        settings: &[(&str, &str)],
        jvm: Jvm,
        host: &str,
    ) -> Result<Self, TestkitError> {
        let kafka_home = kafka_home()?;
        let mut broker = Self {
            process: None,
            home,
            settings: settings
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            jvm,
            port: 0,
            controller_port: 0,
            kafka_home,
            host: host.to_owned(),
        };
        let mut tries = 0;
        loop {
            tries += 1;
            broker.port = free_port()?;
            broker.controller_port = free_port()?;
            if broker.controller_port == broker.port {
                continue;
            }
            let _ = std::fs::remove_dir_all(broker.data_path());
            broker.write_config()?;
            broker.format()?;
            match broker.spawn() {
                Ok(()) => return Ok(broker),
                Err(e) if tries < PORT_TRIES && lost_port_race(&e) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// `bootstrap.servers` for clients.
    pub fn bootstrap_servers(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The broker's folder (its configuration, `data/` and `kafka.log`).
    pub fn data_dir(&self) -> &Path {
        self.home.path()
    }

    /// The Kafka distribution's jars this broker runs (`lib/`, and `plugins/` for Kafka Connect).
    pub fn kafka_home(&self) -> &Path {
        &self.kafka_home
    }

    /// Stops the broker at once (SIGKILL, as a crash would). Its data stays for
    /// [`restart`](Self::restart).
    pub fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// Stops the broker as an operator would (SIGTERM: a controlled shutdown), up to 60 s.
    pub fn shut_down(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.terminate(Duration::from_secs(60));
        }
    }

    /// Starts the broker again on the same ports with the same data.
    ///
    /// # Errors
    /// The broker did not come back within two minutes.
    pub fn restart(&mut self) -> Result<(), TestkitError> {
        self.stop();
        self.spawn()
    }

    /// Stops the broker as an operator would ([`shut_down`](Self::shut_down)) and starts it again
    /// on the same ports with the same data.
    ///
    /// # Errors
    /// The broker did not come back within two minutes.
    pub fn restart_gracefully(&mut self) -> Result<(), TestkitError> {
        self.shut_down();
        self.spawn()
    }

    /// The broker process's id, while it runs (for tests that SIGSTOP it).
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(JavaProcess::id)
    }

    /// The last lines of the broker's log, for failure messages.
    pub fn log_tail(&self) -> String {
        log_tail(&self.log_path())
    }

    fn data_path(&self) -> PathBuf {
        self.home.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.home.path().join("kafka.log")
    }

    fn config_path(&self) -> PathBuf {
        self.home.path().join("server.properties")
    }

    fn classpath(&self) -> String {
        format!("{}/lib/*", self.kafka_home.display())
    }

    fn write_config(&self) -> Result<(), TestkitError> {
        let (port, cport) = (self.port, self.controller_port);
        let mut config = format!(
            "process.roles=broker,controller\n\
             node.id=1\n\
             controller.quorum.voters=1@127.0.0.1:{cport}\n\
             listeners=PLAINTEXT://{host}:{port},CONTROLLER://127.0.0.1:{cport}\n\
             advertised.listeners=PLAINTEXT://{host}:{port}\n\
             controller.listener.names=CONTROLLER\n\
             inter.broker.listener.name=PLAINTEXT\n\
             listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n\
             log.dirs={data}\n\
             offsets.topic.replication.factor=1\n\
             offsets.topic.num.partitions=1\n\
             transaction.state.log.replication.factor=1\n\
             transaction.state.log.min.isr=1\n\
             transaction.state.log.num.partitions=1\n\
             share.coordinator.state.topic.replication.factor=1\n\
             share.coordinator.state.topic.min.isr=1\n\
             share.coordinator.state.topic.num.partitions=1\n\
             group.initial.rebalance.delay.ms=0\n\
             num.network.threads=2\n\
             num.io.threads=2\n\
             num.recovery.threads.per.data.dir=1\n\
             log.cleaner.threads=1\n",
            data = self.data_path().display(),
            host = self.host,
        );
        for (key, value) in &self.settings {
            config.push_str(&format!("{key}={value}\n"));
        }
        let path = self.config_path();
        std::fs::write(&path, config).map_err(|e| TestkitError::io("writing", &path, e))
    }

    /// `kafka-storage format`, once per start with new storage.
    fn format(&self) -> Result<(), TestkitError> {
        let cluster_id = cluster_id();
        let output = Command::new(crate::java::java())
            .args(Jvm::Test.flags(true))
            .arg("-cp")
            .arg(self.classpath())
            // `--cluster-id=…` in one argument: an id may start with '-', which argparse would take for
            // an option.
            .args(["kafka.tools.StorageTool", "format"])
            .arg(format!("--cluster-id={cluster_id}"))
            .arg(format!("--config={}", self.config_path().display()))
            .current_dir(self.home.path())
            .output()
            .map_err(|e| {
                TestkitError::Start(format!(
                    "cannot run java to format the broker's storage: {e}"
                ))
            })?;
        if output.status.success() {
            Ok(())
        } else {
            Err(TestkitError::Start(format!(
                "formatting the broker's storage failed ({}): {}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )))
        }
    }

    fn spawn(&mut self) -> Result<(), TestkitError> {
        let log_config = write_log_config(self.home.path())?;
        let mut args = self.jvm.flags(true);
        args.push(format!(
            "-Dlog4j2.configurationFile={}",
            log_config.display()
        ));
        args.extend([
            "-cp".to_owned(),
            self.classpath(),
            "kafka.Kafka".to_owned(),
            self.config_path().display().to_string(),
        ]);
        let mut process = JavaProcess::spawn(
            "the Kafka broker",
            self.home.path(),
            &self.log_path(),
            &args,
            &["Kafka Server started"],
        )?;
        process.wait_ready("the Kafka broker", START_TIMEOUT)?;
        self.process = Some(process);
        Ok(())
    }
}

impl Drop for KafkaBroker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A KRaft cluster id: 16 random bytes, base64url without padding (22 characters), as
/// `kafka-storage random-uuid` prints.
fn cluster_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bytes = [0u8; 16];
    for chunk in bytes.chunks_mut(8) {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        hasher.write_u32(std::process::id());
        let n = hasher.finish().to_le_bytes();
        chunk.copy_from_slice(&n[..chunk.len()]);
    }
    // Unpadded base64url of the 16 bytes: two zero bytes make whole 3-byte groups, whose 24
    // characters' last two (the padding's) are dropped.
    let mut padded = [0u8; 18];
    padded[..16].copy_from_slice(&bytes);
    let mut text: String = padded
        .chunks(3)
        .flat_map(|g| {
            let n = (u32::from(g[0]) << 16) | (u32::from(g[1]) << 8) | u32::from(g[2]);
            [18, 12, 6, 0].map(|shift| ALPHABET[((n >> shift) & 63) as usize] as char)
        })
        .collect();
    text.truncate(22);
    text
}
