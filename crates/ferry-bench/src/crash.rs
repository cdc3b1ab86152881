//! Duplicates after SIGKILL: the real `ferry standalone` binary (built next to this one) tails a
//! generated file into the file sink with the README example's settings (FileStore, JSON lines),
//! is SIGKILLed mid-file several times (each run killed 0.2–1.2 s after a commit interval's worth of
//! running) and restarted, then run until the last line is in the sink.
//! Each kill's duplicates are the lines the next run wrote that were already in the sink before it
//! started (the sink is cut at its last complete line at each kill: the next run's sink drops a torn
//! line). Three modes: continuous commits (`offset.flush.interval.ms=0`, the README example's), the
//! same with `offset.flush.strict.bound=true` (each poll waits for the last batch's commit), and
//! commits every second. Before its kills, each mode moves the whole input three times,
//! uninterrupted, each into a sink and store of its own: what the mode costs in throughput.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::e2e::lines;
use crate::results::Crash;
use crate::{BenchResult, Plan};

/// The README example's `offset.flush.interval.ms` (`examples/standalone/worker.properties`).
pub const README_INTERVAL_MS: u64 = 0;
/// The interval mode measured beside it: commits every second.
pub const INTERVAL_MS: u64 = 1000;
/// FileStreamSource's default `batch.size` (the README example sets none).
pub const BATCH_SIZE: u64 = 2000;
const POLL: Duration = Duration::from_millis(2);
/// Uninterrupted runs per mode (one sample of a disk-bound run swings by half either way here).
const UNINTERRUPTED_RUNS: usize = 3;
const DEADLINE: Duration = Duration::from_secs(600);

/// The `ferry` binary next to this one (`cargo build --release -p ferry`), if built.
pub fn ferry_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let ferry = exe.parent()?.join("ferry");
    ferry.is_file().then_some(ferry)
}

/// [`ferry_binary`], or an error saying how to build it.
pub fn require_ferry_binary() -> BenchResult<PathBuf> {
    ferry_binary().ok_or_else(|| {
        crate::BenchError::from(
            "no `ferry` binary next to ferry-bench (build it with `cargo build --release -p \
             ferry`, as scripts/bench does)"
                .to_owned(),
        )
    })
}

/// Both modes; `Err` names why nothing ran.
pub fn run(plan: &Plan) -> BenchResult<Vec<Crash>> {
    let ferry = require_ferry_binary()
        .map_err(|e| format!("duplicates after SIGKILL not measured: {e}"))?;
    let input_path = plan.work_dir.join("crash-input.log");
    let input = lines::write(&input_path, plan.crash_bytes)?;
    let mut out = Vec::new();
    for (interval, strict) in [
        (README_INTERVAL_MS, false),
        (README_INTERVAL_MS, true),
        (INTERVAL_MS, false),
    ] {
        let started = Instant::now();
        let crash = mode(&ferry, plan, &input_path, input, interval, strict);
        let crash = match crash {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_file(&input_path);
                return Err(e);
            }
        };
        eprintln!(
            "  offset.flush.interval.ms={interval}, offset.flush.strict.bound={strict}: duplicates \
             per kill {:?}, lost {} ({:.1?})",
            crash.duplicates_per_kill,
            crash.lost,
            started.elapsed()
        );
        out.push(crash);
    }
    std::fs::remove_file(&input_path).map_err(|e| {
        crate::BenchError::from(format!("cannot remove {}: {e}", input_path.display()))
    })?;
    Ok(out)
}

fn mode(
    ferry: &Path,
    plan: &Plan,
    input_path: &Path,
    input: lines::Input,
    interval: u64,
    strict: bool,
) -> BenchResult<Crash> {
    let started = Instant::now();
    let dir = crate::e2e::RunDir::create(&plan.work_dir, &format!("crash-{interval}-{strict}"))?;
    let sink = dir.join("out.jsonl");
    let worker = dir.join("worker.properties");
    let connector = dir.join("file-source.properties");
    write(
        &worker,
        &worker_properties(&dir.join("offsets.ferry"), &sink, interval, strict),
    )?;
    write(
        &connector,
        &format!(
            "name=example-file-source\nconnector.class=FileStreamSource\nfile={}\ntopic=example-lines\n",
            input_path.display()
        ),
    )?;
    // The record of the last line (its offset is the file's end).
    let end_marker = format!("\"source_offset\":{{\"position\":{}", input.bytes);
    // First uninterrupted runs over the whole input, each into its own sink and store: what the
    // mode costs in throughput (spawn → the last line's record in the sink).
    let mut clean_run_seconds = Vec::with_capacity(UNINTERRUPTED_RUNS);
    for run in 0..UNINTERRUPTED_RUNS {
        let clean = crate::e2e::RunDir::create(
            &plan.work_dir,
            &format!("crash-{interval}-{strict}-uninterrupted-{run}"),
        )?;
        let (clean_worker, clean_connector) = (clean.join("worker.properties"), connector.clone());
        let clean_sink = clean.join("out.jsonl");
        write(
            &clean_worker,
            &worker_properties(&clean.join("offsets.ferry"), &clean_sink, interval, strict),
        )?;
        let spawned = Instant::now();
        let mut child = spawn(ferry, &clean, &clean_worker, &clean_connector, 0)?;
        let reached = wait_for(&mut child, || last_line_has(&clean_sink, &end_marker));
        let took = spawned.elapsed();
        let _ = child.kill();
        let _ = child.wait();
        reached.map_err(|e| crate::BenchError::from(format!("an uninterrupted run: {e}")))?;
        clean.remove()?;
        clean_run_seconds.push(took.as_secs_f64());
    }
    let mut boundaries = Vec::with_capacity(plan.kills);
    let mut complete = 0u64;
    for kill in 0..plan.kills {
        let mut child = spawn(ferry, &dir, &worker, &connector, kill)?;
        // Once this run writes (or the whole file is already in the sink: a small input), let it run
        // past a commit interval and then some (200 ms to 1.2 s, spread over the kills) so the kill
        // lands at a different moment of the commit cycle each time.
        let reached = wait_for(&mut child, || {
            size(&sink) > complete || last_line_has(&sink, &end_marker)
        });
        if reached.is_ok() {
            std::thread::sleep(Duration::from_millis(
                interval + 200 + (kill as u64 * 397) % 1000,
            ));
        }
        let _ = child.kill();
        let _ = child.wait();
        reached.map_err(|e| crate::BenchError::from(format!("run {kill} before its kill: {e}")))?;
        complete = complete_len(&sink)?;
        boundaries.push(complete);
    }
    // The last run: until the record of the last line is in the sink.
    let mut child = spawn(ferry, &dir, &worker, &connector, plan.kills)?;
    let reached = wait_for(&mut child, || last_line_has(&sink, &end_marker));
    let _ = child.kill();
    let _ = child.wait();
    reached.map_err(|e| crate::BenchError::from(format!("the last run: {e}")))?;
    let (duplicates_per_kill, distinct) = duplicates(&sink, &boundaries)?;
    dir.remove()?;
    Ok(Crash {
        flush_interval_ms: interval,
        strict_bound: strict,
        clean_run_seconds,
        input_bytes: input.bytes,
        input_lines: input.lines,
        batch_size: BATCH_SIZE,
        duplicates_per_kill,
        lost: input.lines.saturating_sub(distinct),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The worker file of every run: the README example's, with the mode's commit settings.
fn worker_properties(offsets: &Path, sink: &Path, interval: u64, strict: bool) -> String {
    format!(
        "listeners=http://127.0.0.1:0\noffset.storage.file.filename={}\nsink=file:{}\n\
         offset.flush.interval.ms={interval}\noffset.flush.strict.bound={strict}\n",
        offsets.display(),
        sink.display()
    )
}

fn write(path: &Path, text: &str) -> BenchResult<()> {
    std::fs::write(path, text)
        .map_err(|e| crate::BenchError::from(format!("cannot write {}: {e}", path.display())))
}

fn spawn(
    ferry: &Path,
    dir: &crate::e2e::RunDir,
    worker: &Path,
    connector: &Path,
    run: usize,
) -> BenchResult<Child> {
    let log_path = dir.join(&format!("ferry-{run}.log"));
    let log = std::fs::File::create(&log_path).map_err(|e| {
        crate::BenchError::from(format!("cannot create {}: {e}", log_path.display()))
    })?;
    Command::new(ferry)
        .arg("standalone")
        .arg(worker)
        .arg(connector)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| crate::BenchError::from(format!("cannot start {}: {e}", ferry.display())))
}

/// Polls `done` until it holds, the process exits or the deadline passes.
fn wait_for(child: &mut Child, done: impl Fn() -> bool) -> BenchResult<()> {
    let started = Instant::now();
    loop {
        if done() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(crate::BenchError::from(format!(
                "ferry exited early ({status})"
            )));
        }
        if started.elapsed() > DEADLINE {
            return Err(crate::BenchError::from(format!(
                "not done within {DEADLINE:?}"
            )));
        }
        std::thread::sleep(POLL);
    }
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// The sink's length up to its last complete line.
fn complete_len(path: &Path) -> BenchResult<u64> {
    let bytes = std::fs::read(path)
        .map_err(|e| crate::BenchError::from(format!("cannot read {}: {e}", path.display())))?;
    Ok(bytes
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i as u64 + 1))
}

/// Whether the last complete line of `path` holds `needle` followed by `,` or `}` (the file
/// source's offset also carries the file's identity: `{"position":N,"dev":…}`).
fn last_line_has(path: &Path, needle: &str) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    const TAIL: u64 = 8 << 10;
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let len = size(path);
    if file
        .seek(SeekFrom::Start(len.saturating_sub(TAIL)))
        .is_err()
    {
        return false;
    }
    let mut tail = Vec::with_capacity(TAIL as usize);
    if file.read_to_end(&mut tail).is_err() {
        return false;
    }
    let Some(end) = tail.iter().rposition(|&b| b == b'\n') else {
        return false;
    };
    let start = tail[..end]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let line = String::from_utf8_lossy(&tail[start..end]);
    line.match_indices(needle)
        .any(|(i, m)| matches!(line.as_bytes().get(i + m.len()), Some(b',' | b'}')))
}

/// Per kill, the lines after its boundary (up to the next) already seen before it; and the distinct
/// lines in all.
fn duplicates(sink: &Path, boundaries: &[u64]) -> BenchResult<(Vec<u64>, u64)> {
    let bytes = std::fs::read(sink)
        .map_err(|e| crate::BenchError::from(format!("cannot read {}: {e}", sink.display())))?;
    let mut seen: HashSet<&[u8]> = HashSet::new();
    let mut per_kill = vec![0u64; boundaries.len()];
    let mut position = 0u64;
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        // The run a line belongs to: how many kills happened before its start.
        let run = boundaries.partition_point(|&b| b <= position);
        if !seen.insert(line) && run > 0 {
            per_kill[run - 1] += 1;
        }
        position += line.len() as u64;
    }
    Ok((per_kill, seen.len() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_is_the_last_complete_line_with_the_exact_position() {
        let dir = tempfile::tempdir().expect("temp dir");
        let sink = dir.path().join("sink");
        let needle = "\"source_offset\":{\"position\":20";
        std::fs::write(&sink, "{\"source_offset\":{\"position\":20,\"dev\":1}}\n").expect("write");
        assert!(last_line_has(&sink, needle));
        std::fs::write(&sink, "{\"source_offset\":{\"position\":200}}\n").expect("write");
        assert!(!last_line_has(&sink, needle), "200 is not 20");
        std::fs::write(&sink, "{\"source_offset\":{\"position\":20}}\n{\"torn").expect("write");
        assert!(
            last_line_has(&sink, needle),
            "a torn line after it does not count"
        );
    }

    #[test]
    fn duplicates_are_counted_against_the_kill_before_them() {
        let dir = tempfile::tempdir().expect("temp dir");
        let sink = dir.path().join("sink");
        // Run 0 wrote a b c; killed at 6 (after c); run 1 wrote b c d (2 again); killed at 12; run 2: d e.
        std::fs::write(&sink, "a\nb\nc\nb\nc\nd\nd\ne\n").expect("write");
        let (per_kill, distinct) = duplicates(&sink, &[6, 12]).expect("count");
        assert_eq!(per_kill, vec![2, 1]);
        assert_eq!(distinct, 5);
    }
}
