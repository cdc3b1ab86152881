//! Case 2: FileStreamSource → file sink vs a plain buffered line copy, and vs rsyslog.
//!
//! **Ferry** ([`FERRY`], [`FERRY_JSON`]): a worker with a FileStore and Ferry's [`FileSink`] (the raw
//! line per record with `sink.format=value`, or its JSON envelope; one `fdatasync` per written batch),
//! FileStreamSource reading the input; timed from opening the store and the sink until the committed
//! offset of the file reaches its end (so every line was read, written, synced, acknowledged and its
//! offset made durable). The output's line count is checked.
//!
//! **Copy** ([`PLAIN`]): `BufReader::read_until('\n')` → `BufWriter::write_all` of every line into a
//! new file (64 KiB buffers each, Ferry reads in 64 KiB chunks too), then one `fdatasync`: what a
//! durable copy of the lines costs, with no offsets, no records.
//!
//! **rsyslog** ([`rsyslog`]): `imfile` → `omfile` tailing the same file, without and with fsync.
//!
//! Rates are in input bytes/s (records are lines).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_connectors::FileStreamSourceConnector;
use ferry_runtime::sink::file::FileSink;
use ferry_runtime::sink::line::LineFormat;

use super::lines::{self, Input};
use super::worker::{FLUSH_INTERVAL, RunDir, connector_config, offset_field, open_store};
use super::{Runner, rounds, rsyslog};
use crate::BenchResult;
use crate::measure::{human_bytes, human_count};
use crate::results::{Case, Contender, Work};

pub const FERRY: &str = "Ferry worker → FileSink (sink.format=value)";
pub const FERRY_JSON: &str = "Ferry worker → FileSink (JSON lines)";
pub const PLAIN: &str = "plain buffered copy";

const CONNECTOR: &str = "bench-file";
/// Buffer sizes of the plain copy.
const BUFFER: usize = 64 << 10;

/// Writes the input of at most `bytes` bytes, named by `tag`.
fn input(work_dir: &Path, tag: &str, bytes: u64) -> BenchResult<(PathBuf, Input)> {
    let input_path = work_dir.join(format!("e2e-{tag}-input-{bytes}.log"));
    let started = Instant::now();
    let input = lines::write(&input_path, bytes)?;
    eprintln!(
        "  {tag}: input {} ({} lines) written in {:.1?}",
        human_bytes(input.bytes as f64),
        human_count(input.lines),
        started.elapsed()
    );
    Ok((input_path, input))
}

/// Ferry (raw lines) against the plain copy, on an input of at most `bytes` bytes.
pub fn case(
    runtime: &tokio::runtime::Runtime,
    work_dir: &Path,
    bytes: u64,
    runs: usize,
) -> BenchResult<Case> {
    let (input_path, input) = input(work_dir, "file", bytes)?;
    let work = Work {
        records: input.lines,
        bytes: input.bytes,
    };
    let inputs = [(input_path.clone(), input)];
    let mut contenders = [
        Runner {
            name: FERRY,
            work,
            run: Box::new(|round| ferry_run(runtime, work_dir, &inputs, LineFormat::Value, round)),
        },
        Runner {
            name: PLAIN,
            work,
            run: Box::new(|round| plain_run(work_dir, &input_path, input, round)),
        },
    ];
    let samples = rounds("file", runs, &mut contenders);
    remove(&input_path)?;
    let samples = samples?;
    Ok(Case::pair(
        format!(
            "FileStreamSource {} ({} lines of {}–{} B) → file; Ferry: FileSink sink.format=value (the \
             raw lines), fdatasync per batch, FileStore, offset.flush.interval.ms={}; copy: the lines, \
             one fsync",
            human_bytes(input.bytes as f64),
            human_count(input.lines),
            lines::MIN_LINE,
            lines::MAX_LINE,
            FLUSH_INTERVAL.as_millis()
        ),
        FERRY,
        PLAIN,
        &samples,
        work,
    ))
}

/// Ferry (raw lines and JSON lines) against rsyslog without and with fsync, tailing the same file.
pub fn rsyslog_case(
    runtime: &tokio::runtime::Runtime,
    work_dir: &Path,
    bytes: u64,
    runs: usize,
) -> BenchResult<Case> {
    let (input_path, input) = input(work_dir, "rsyslog", bytes)?;
    let work = Work {
        records: input.lines,
        bytes: input.bytes,
    };
    let inputs = [(input_path.clone(), input)];
    let mut contenders = [
        Runner {
            name: FERRY,
            work,
            run: Box::new(|round| ferry_run(runtime, work_dir, &inputs, LineFormat::Value, round)),
        },
        Runner {
            name: FERRY_JSON,
            work,
            run: Box::new(|round| ferry_run(runtime, work_dir, &inputs, LineFormat::Json, round)),
        },
        Runner {
            name: rsyslog::DEFAULT,
            work,
            run: Box::new(|round| rsyslog::run(work_dir, &input_path, input, round, false)),
        },
        Runner {
            name: rsyslog::SYNC,
            work,
            run: Box::new(|round| rsyslog::run(work_dir, &input_path, input, round, true)),
        },
    ];
    let samples = rounds("rsyslog", runs, &mut contenders);
    remove(&input_path)?;
    let samples = samples?;
    let names = [FERRY, FERRY_JSON, rsyslog::DEFAULT, rsyslog::SYNC];
    Ok(Case {
        name: format!(
            "FileStreamSource vs {} tailing the same file of {} ({} lines of {}–{} B), from its start, \
             into a new file; Ferry: FileSink, fdatasync per batch, a line acknowledged once synced, \
             FileStore, offset.flush.interval.ms={}; rsyslog: omfile {}, template `%rawmsg%\\n` (the \
             raw lines, as sink.format=value)",
            rsyslog::version(),
            human_bytes(input.bytes as f64),
            human_count(input.lines),
            lines::MIN_LINE,
            lines::MAX_LINE,
            FLUSH_INTERVAL.as_millis(),
            rsyslog::SETTINGS,
        ),
        reference: rsyslog::DEFAULT.to_owned(),
        contenders: names
            .iter()
            .zip(&samples)
            .map(|(name, s)| Contender::timed(*name, s, Some(work)))
            .collect(),
        store_size: None,
        changed: None,
    })
}

/// Throughput of Ferry with `files` FileStreamSource connectors (one task each, one file each, of
/// `bytes / files` bytes) into one FileSink (raw lines): one run. Returns (lines, seconds).
pub fn tasks_point(
    runtime: &tokio::runtime::Runtime,
    work_dir: &Path,
    bytes: u64,
    files: usize,
) -> BenchResult<(u64, f64)> {
    let mut inputs = Vec::with_capacity(files);
    for i in 0..files {
        inputs.push(input(
            work_dir,
            &format!("scale-{files}-{i}"),
            bytes / files as u64,
        )?);
    }
    let took = ferry_run(runtime, work_dir, &inputs, LineFormat::Value, files);
    for (path, _) in &inputs {
        remove(path)?;
    }
    let lines = inputs.iter().map(|(_, i)| i.lines).sum();
    Ok((lines, took?.as_secs_f64()))
}

fn remove(path: &Path) -> BenchResult<()> {
    std::fs::remove_file(path).map_err(|e| {
        crate::BenchError::from(format!("cannot remove the input {}: {e}", path.display()))
    })
}

/// One Ferry run: one FileStreamSource connector per input, all into one FileSink writing `format`,
/// timed until every connector's committed position is its file's end.
fn ferry_run(
    runtime: &tokio::runtime::Runtime,
    work_dir: &Path,
    inputs: &[(PathBuf, Input)],
    format: LineFormat,
    round: usize,
) -> BenchResult<Duration> {
    let dir = RunDir::create(work_dir, &format!("e2e-file-{}-{round}", format.name()))?;
    let out_path = dir.join("out.log");
    let mut ends = HashMap::new();
    let mut connectors = Vec::with_capacity(inputs.len());
    for (i, (path, input)) in inputs.iter().enumerate() {
        let name = format!("{CONNECTOR}-{i}");
        let config = connector_config(
            &name,
            &[
                ("connector.class", "FileStreamSource".to_owned()),
                ("file", path.to_string_lossy().into_owned()),
                ("topic", "lines".to_owned()),
            ],
        );
        ends.insert(
            name.clone(),
            i64::try_from(input.bytes).map_err(|e| e.to_string())?,
        );
        connectors.push((name, config, 1));
    }
    let expected: u64 = inputs.iter().map(|(_, i)| i.lines).sum();
    let started = Instant::now();
    let store = open_store(&dir.join("offsets.ferry"))?;
    let took = runtime.block_on(async {
        let sink = Arc::new(
            FileSink::open_with(&out_path, format)
                .await
                .map_err(|e| crate::BenchError::from(format!("opening the file sink: {e}")))?,
        );
        let worker = super::worker::run_all_until_committed(
            store,
            sink.clone(),
            &FileStreamSourceConnector::new(),
            connectors,
            |name, committed| {
                committed.len() == 1
                    && offset_field(&committed[0].1, "position") == ends.get(name).copied()
            },
        )
        .await?;
        let took = started.elapsed();
        worker.shutdown().await;
        drop(worker);
        // The worker held the other handle; closing waits for the writer thread to exit.
        match Arc::try_unwrap(sink) {
            Ok(sink) => sink
                .close()
                .await
                .map_err(|e| crate::BenchError::from(format!("closing the file sink: {e}")))?,
            Err(_) => return Err("the file sink is still in use after the worker stopped".into()),
        }
        Ok::<_, crate::BenchError>(took)
    })?;
    let written = lines::count_lines(&out_path)?;
    if written != expected {
        return Err(crate::BenchError::from(format!(
            "the file sink holds {written} lines, the input {expected} (Ferry lost or repeated lines)"
        )));
    }
    dir.remove()?;
    Ok(took)
}

fn plain_run(
    work_dir: &Path,
    input_path: &Path,
    input: Input,
    round: usize,
) -> BenchResult<Duration> {
    let dir = RunDir::create(work_dir, &format!("e2e-copy-{round}"))?;
    let out_path = dir.join("out.log");
    let started = Instant::now();
    let copied = copy_lines(input_path, &out_path)?;
    let took = started.elapsed();
    if copied != input.lines {
        return Err(crate::BenchError::from(format!(
            "the plain copy copied {copied} lines, the input has {}",
            input.lines
        )));
    }
    dir.remove()?;
    Ok(took)
}

/// Copies `from` to a new file `to` line by line, then fdatasyncs it. Returns the lines copied.
fn copy_lines(from: &Path, to: &Path) -> BenchResult<u64> {
    let reading = |e: std::io::Error| format!("plain copy: cannot read {}: {e}", from.display());
    let writing = |e: std::io::Error| format!("plain copy: cannot write {}: {e}", to.display());
    let mut reader = BufReader::with_capacity(BUFFER, File::open(from).map_err(reading)?);
    let mut writer = BufWriter::with_capacity(BUFFER, File::create(to).map_err(writing)?);
    let mut line = Vec::with_capacity(256);
    let mut lines = 0u64;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(reading)? == 0 {
            break;
        }
        writer.write_all(&line).map_err(writing)?;
        lines += 1;
    }
    let file = writer.into_inner().map_err(|e| writing(e.into_error()))?;
    file.sync_data().map_err(writing)?;
    Ok(lines)
}
