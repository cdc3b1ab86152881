//! Running the JVM processes of the Kafka distribution (a broker, a Kafka Connect worker) from the
//! jars `scripts/install-test-deps` copies out of Maven Central, and knowing when they are ready.
//!
//! - [`kafka_home`] finds the jars; [`java`] the JVM.
//! - [`JavaProcess`] runs one: every line it prints goes to a log file, and the line that says it is
//!   ready wakes the waiter (no polling, no fixed sleeps).
//! - Every process is spawned from one thread that lives as long as the test process, with
//!   `setpriv --pdeathsig KILL`: when the test binary exits, however it exits, the kernel kills its
//!   JVMs too (a parent-death signal follows the *thread* that spawned, so a test's own thread, or a
//!   runtime's worker thread, would kill it too early).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::TestkitError;

/// The Kafka version the jars are.
pub const KAFKA_VERSION: &str = "4.4.0";

/// The folder holding `lib/` (the broker's and Kafka Connect's jars) and `plugins/` (FileStreamSource,
/// Debezium's PostgreSQL connector): `FERRY_KAFKA_HOME`, else `$FERRY_DEPS_DIR/kafka-4.4.0`, else
/// `~/.cache/ferry-deps/kafka-4.4.0`, where `scripts/install-test-deps` puts them.
///
/// # Errors
/// [`TestkitError::KafkaMissing`] when the jars are not there.
pub fn kafka_home() -> Result<PathBuf, TestkitError> {
    let home = match std::env::var_os("FERRY_KAFKA_HOME") {
        Some(home) => PathBuf::from(home),
        None => {
            let deps = std::env::var_os("FERRY_DEPS_DIR")
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/ferry-deps"))
                })
                .unwrap_or_else(|| PathBuf::from("/root/.cache/ferry-deps"));
            deps.join(format!("kafka-{KAFKA_VERSION}"))
        }
    };
    let broker_jar = home
        .join("lib")
        .join(format!("kafka_2.13-{KAFKA_VERSION}.jar"));
    if broker_jar.is_file() {
        Ok(home)
    } else {
        Err(TestkitError::KafkaMissing {
            looked_for: broker_jar,
        })
    }
}

/// The `java` to run: `$JAVA_HOME/bin/java` when set, else `java` on PATH.
pub fn java() -> PathBuf {
    std::env::var_os("JAVA_HOME")
        .map(|home| PathBuf::from(home).join("bin/java"))
        .filter(|java| java.is_file())
        .unwrap_or_else(|| PathBuf::from("java"))
}

/// Which JVM flags a broker or worker runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Jvm {
    /// For tests: a small heap and quick start-up (C1 only, serial GC: two cores are shared by the
    /// test binary, the broker and maybe a Kafka Connect worker).
    #[default]
    Test,
    /// As Kafka's scripts start them (`kafka-run-class.sh`: G1 with its pause target, and the heap of
    /// `kafka-server-start.sh` or `connect-distributed.sh`), for the bench: the anchor must be Kafka as
    /// shipped.
    Shipped,
}

impl Jvm {
    /// The flags, for a broker (`server`) or a Kafka Connect worker.
    pub fn flags(self, server: bool) -> Vec<String> {
        let flags: &[&str] = match (self, server) {
            (Jvm::Test, _) => &[
                "-Xms128m",
                "-Xmx512m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-XX:+ExitOnOutOfMemoryError",
                "-Djava.awt.headless=true",
            ],
            (Jvm::Shipped, true) => &["-Xmx1G", "-Xms1G"],
            (Jvm::Shipped, false) => &["-Xms256M", "-Xmx2G"],
        };
        let mut all: Vec<String> = flags.iter().map(|f| (*f).to_owned()).collect();
        if self == Jvm::Shipped {
            all.extend(
                [
                    "-server",
                    "-XX:+UseG1GC",
                    "-XX:MaxGCPauseMillis=20",
                    "-XX:InitiatingHeapOccupancyPercent=35",
                    "-XX:+ExplicitGCInvokesConcurrent",
                    "-XX:MaxInlineLevel=15",
                    "-Djava.awt.headless=true",
                ]
                .map(str::to_owned),
            );
        }
        all
    }
}

/// A log4j2 configuration printing every line to stdout, where [`JavaProcess`] reads it.
pub fn write_log_config(dir: &Path) -> Result<PathBuf, TestkitError> {
    let path = dir.join("log4j2.properties");
    std::fs::write(
        &path,
        "status = error\n\
         appender.out.type = Console\n\
         appender.out.name = STDOUT\n\
         appender.out.layout.type = PatternLayout\n\
         appender.out.layout.pattern = [%d] %p %m (%c)%n\n\
         rootLogger.level = INFO\n\
         rootLogger.appenderRef.out.ref = STDOUT\n",
    )
    .map_err(|e| TestkitError::io("writing the log4j2 configuration", &path, e))?;
    Ok(path)
}

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawns `command` from the process-long spawner thread (see the module doc).
fn spawn_from_long_lived_thread(command: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (requests, incoming) = mpsc::channel::<SpawnRequest>();
        // The sender lives in this static, so the loop (and the thread) lasts as long as the process.
        std::thread::Builder::new()
            .name("ferry-testkit-spawner".into())
            .spawn(move || {
                for (mut command, reply) in incoming {
                    let _ = reply.send(command.spawn());
                }
            })
            .map_or_else(
                |e| {
                    // No thread: requests fail below with the reason.
                    eprintln!("ferry-testkit: cannot start the spawner thread: {e}");
                },
                drop,
            );
        Mutex::new(requests)
    });
    let (reply, answer) = mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .send((command, reply))
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
    answer
        .recv()
        .map_err(|_| std::io::Error::other("the spawner thread did not answer"))?
}

/// What the log reader saw.
enum Event {
    Ready,
    Exited,
}

/// One JVM process: its log file and the event of its ready line.
pub struct JavaProcess {
    child: Child,
    // In a mutex only so that a broker shared through a static is Sync; the methods take `&mut self`.
    events: Mutex<mpsc::Receiver<Event>>,
    log: PathBuf,
}

impl JavaProcess {
    /// Runs `java <flags> -cp <classpath> <main> <args>` in `dir` under `setpriv --pdeathsig KILL`,
    /// appending what it prints to `log`; it is ready once it printed a line containing each of
    /// `ready_lines`.
    pub fn spawn(
        what: &str,
        dir: &Path,
        log: &Path,
        args: &[String],
        ready_lines: &'static [&'static str],
    ) -> Result<Self, TestkitError> {
        let mut command = Command::new("setpriv");
        command
            .args(["--pdeathsig", "KILL", "--"])
            .arg(java())
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = spawn_from_long_lived_thread(command).map_err(|e| {
            TestkitError::Start(format!(
                "{what}: cannot run {} (setpriv from util-linux and a JDK are needed): {e}",
                java().display()
            ))
        })?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| TestkitError::io("opening the log", log, e))?;
        let file = std::sync::Arc::new(Mutex::new(file));
        let (events, receiver) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            copy_lines(out, file.clone(), Some((events.clone(), ready_lines)));
        }
        if let Some(err) = child.stderr.take() {
            copy_lines(err, file, None);
        }
        Ok(Self {
            child,
            events: Mutex::new(receiver),
            log: log.to_path_buf(),
        })
    }

    /// Waits for the ready line, the process's exit or the deadline, whichever comes first.
    pub fn wait_ready(&mut self, what: &str, timeout: Duration) -> Result<(), TestkitError> {
        match events(&mut self.events).recv_timeout(timeout) {
            Ok(Event::Ready) => Ok(()),
            Ok(Event::Exited) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
                Err(TestkitError::Exited {
                    what: what.to_owned(),
                    status,
                    log_tail: log_tail(&self.log),
                })
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Err(TestkitError::Start(format!(
                "{what} was not ready after {timeout:?}; log {}:\n{}",
                self.log.display(),
                log_tail(&self.log)
            ))),
        }
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and waits for the exit.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM (the JVM's orderly shutdown), then waits up to `grace` for the exit before SIGKILL.
    /// Returns whether it exited by itself.
    pub fn terminate(&mut self, grace: Duration) -> bool {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        // The log reader says when stdout closes, which is when the JVM is gone.
        let deadline = std::time::Instant::now() + grace;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match events(&mut self.events).recv_timeout(left) {
                Ok(Event::Ready) => continue,
                Ok(Event::Exited) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let _ = self.child.wait();
                    return true;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.kill();
                    return false;
                }
            }
        }
    }
}

impl Drop for JavaProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

fn events(events: &mut Mutex<mpsc::Receiver<Event>>) -> &mpsc::Receiver<Event> {
    events
        .get_mut()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Copies `from` line by line into `log`; with `ready`, sends [`Event::Ready`] once a line containing
/// each of the texts was printed (in any order) and [`Event::Exited`] at the end of the stream.
fn copy_lines(
    from: impl Read + Send + 'static,
    log: std::sync::Arc<Mutex<std::fs::File>>,
    ready: Option<(mpsc::Sender<Event>, &'static [&'static str])>,
) {
    let _ = std::thread::Builder::new()
        .name("ferry-testkit-log".into())
        .spawn(move || {
            // The ready lines not seen yet; the event goes out when the last one is.
            let mut waiting: Vec<&str> = ready.as_ref().map_or_else(Vec::new, |(_, l)| l.to_vec());
            let mut reader = BufReader::new(from);
            let mut line = Vec::new();
            while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                if let Ok(mut file) = log.lock() {
                    let _ = file.write_all(&line);
                }
                if let Some((events, _)) = &ready
                    && !waiting.is_empty()
                {
                    let text = String::from_utf8_lossy(&line);
                    waiting.retain(|wanted| !text.contains(wanted));
                    if waiting.is_empty() {
                        let _ = events.send(Event::Ready);
                    }
                }
                line.clear();
            }
            if let Some((events, _)) = ready {
                let _ = events.send(Event::Exited);
            }
        });
}

/// The last 40 lines of a log file, for failure messages.
pub fn log_tail(path: &Path) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Whether a failed start was a port taken by someone else between choosing it and binding it (the
/// caller then tries other ports).
pub fn lost_port_race(error: &TestkitError) -> bool {
    match error {
        TestkitError::Exited { log_tail, .. } => {
            log_tail.contains("Address already in use") || log_tail.contains("BindException")
        }
        _ => false,
    }
}

/// A port free right now on 127.0.0.1. Another process may take it before the JVM binds it: the
/// starts detect that ([`lost_port_race`]) and try other ports.
pub fn free_port() -> Result<u16, TestkitError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| TestkitError::Start(format!("no free port on 127.0.0.1: {e}")))
}

/// A temporary folder for a process that lives as long as the test binary: named after this process,
/// so that [`sweep_stale_dirs`] of a later run can remove it once this process is gone.
pub fn process_long_dir(prefix: &str) -> Result<PathBuf, TestkitError> {
    sweep_stale_dirs(prefix);
    let dir = std::env::temp_dir().join(format!("{prefix}{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| TestkitError::io("creating", &dir, e))?;
    Ok(dir)
}

/// Removes `<tmp>/<prefix><pid>` folders whose process is gone (a static broker is never dropped).
fn sweep_stale_dirs(prefix: &str) {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
