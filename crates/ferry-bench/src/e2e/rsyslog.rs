//! The rsyslog contender for file → file: `rsyslogd -n` with its own configuration, work dir and pid
//! file, only `imfile` (no system logging), tailing the input from its start into `omfile` with the raw
//! line as template, so it writes exactly the input's bytes. A run is timed from spawning `rsyslogd`
//! until its output holds as many bytes as the input (polled, with a deadline).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::lines::{self, Input};
use super::worker::RunDir;
use crate::BenchResult;

pub const DEFAULT: &str = "rsyslog imfile → omfile (default: no fsync)";
pub const SYNC: &str = "rsyslog imfile → omfile (sync=\"on\")";

/// The omfile settings every run states (and uses); `sync` is added for the [`SYNC`] contender.
pub const SETTINGS: &str = "asyncWriting=\"off\" flushOnTXEnd=\"on\" ioBufferSize=\"64k\"";
/// How often the output's size is checked.
const POLL: Duration = Duration::from_millis(2);
/// How long one run may take.
const DEADLINE: Duration = Duration::from_secs(900);

/// Whether `rsyslogd` can be run.
pub fn available() -> bool {
    Command::new("rsyslogd")
        .arg("-v")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// rsyslogd's version line (e.g. `rsyslogd  8.2302.0 (aka 2023.02) …`), for the report.
pub fn version() -> String {
    Command::new("rsyslogd")
        .arg("-v")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
        })
        .unwrap_or_else(|| "rsyslogd (version unknown)".to_owned())
}

/// The configuration of one run.
fn config(work: &Path, input: &Path, output: &Path, sync: bool) -> String {
    format!(
        "global(workDirectory=\"{work}\" maxMessageSize=\"64k\")\n\
         module(load=\"imfile\" mode=\"inotify\")\n\
         template(name=\"raw\" type=\"string\" string=\"%rawmsg%\\n\")\n\
         input(type=\"imfile\" file=\"{input}\" tag=\"bench\" freshStartTail=\"off\" readMode=\"0\" \
         ruleset=\"out\")\n\
         ruleset(name=\"out\") {{ action(type=\"omfile\" file=\"{output}\" template=\"raw\" {SETTINGS}{sync}) }}\n",
        work = work.display(),
        input = input.display(),
        output = output.display(),
        sync = if sync { " sync=\"on\"" } else { "" },
    )
}

/// One timed run of rsyslog copying `input_path` (`input`) to a new file.
pub fn run(
    work_dir: &Path,
    input_path: &Path,
    input: Input,
    round: usize,
    sync: bool,
) -> BenchResult<Duration> {
    const { assert!(lines::MAX_LINE < 64 << 10) };
    let dir = RunDir::create(work_dir, &format!("e2e-rsyslog-{round}-{sync}"))?;
    let spool = dir.join("spool");
    std::fs::create_dir_all(&spool)
        .map_err(|e| crate::BenchError::from(format!("cannot create {}: {e}", spool.display())))?;
    let out_path = dir.join("out.log");
    let conf = dir.join("rsyslog.conf");
    std::fs::write(&conf, config(&spool, input_path, &out_path, sync))
        .map_err(|e| crate::BenchError::from(format!("cannot write {}: {e}", conf.display())))?;
    let log_path = dir.join("rsyslogd.log");
    let log = std::fs::File::create(&log_path).map_err(|e| {
        crate::BenchError::from(format!("cannot create {}: {e}", log_path.display()))
    })?;
    let started = Instant::now();
    let mut child = Command::new("rsyslogd")
        .arg("-n")
        .arg("-f")
        .arg(&conf)
        .arg("-i")
        .arg(dir.join("rsyslogd.pid"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| crate::BenchError::from(format!("cannot start rsyslogd: {e}")))?;
    let outcome = loop {
        let len = std::fs::metadata(&out_path).map_or(0, |m| m.len());
        if len >= input.bytes {
            break Ok(started.elapsed());
        }
        if let Ok(Some(status)) = child.try_wait() {
            break Err(crate::BenchError::from(format!(
                "rsyslogd exited ({status}) after writing {len} of {} bytes",
                input.bytes
            )));
        }
        if started.elapsed() > DEADLINE {
            break Err(crate::BenchError::from(format!(
                "rsyslogd wrote {len} of {} bytes within {DEADLINE:?}",
                input.bytes
            )));
        }
        std::thread::sleep(POLL);
    };
    // The output is complete: stopping it is not timed.
    let _ = child.kill();
    let status = child.wait();
    let took = match outcome {
        Ok(took) => took,
        Err(e) => {
            let stderr = std::fs::read_to_string(&log_path).unwrap_or_default();
            return Err(crate::BenchError::from(format!(
                "{e} ({status:?}): {}",
                stderr.trim()
            )));
        }
    };
    let written = lines::count_lines(&out_path)?;
    if written != input.lines {
        return Err(crate::BenchError::from(format!(
            "rsyslog wrote {written} lines, the input has {}",
            input.lines
        )));
    }
    dir.remove()?;
    Ok(took)
}
