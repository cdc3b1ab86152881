//! Case 2: FileStreamSource → file sink vs a plain buffered line copy.
//!
//! **Ferry** ([`FERRY`]): a worker with a FileStore and Ferry's [`FileSink`] (a JSON line per record,
//! one `fdatasync` per written batch), FileStreamSource reading the input; timed from opening the
//! store and the sink until the committed offset of the file reaches its end (so every line was read,
//! written, synced, acknowledged and its offset made durable). The output's line count is checked.
//!
//! **Copy** ([`PLAIN`]): `BufReader::read_until('\n')` → `BufWriter::write_all` of every line into a
//! new file (64 KiB buffers each, Ferry reads in 64 KiB chunks too), then one `fdatasync`: what a
//! durable copy of the lines costs, with no offsets, no records and no JSON.
//!
//! Rates are in input bytes/s; Ferry writes more bytes than it reads (each line wrapped in its JSON
//! record, about 2.2× the input).

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_connectors::FileStreamSourceConnector;
use ferry_runtime::sink::file::FileSink;

use super::lines::{self, Input};
use super::worker::{FLUSH_INTERVAL, RunDir, connector_config, offset_field, open_store};
use super::{Runner, rounds};
use crate::BenchResult;
use crate::measure::{human_bytes, human_count};
use crate::results::{Case, Work};

pub const FERRY: &str = "Ferry worker → FileSink";
pub const PLAIN: &str = "plain buffered copy";

const CONNECTOR: &str = "bench-file";
/// Buffer sizes of the plain copy.
const BUFFER: usize = 64 << 10;

/// The case on an input of at most `bytes` bytes.
pub fn case(
    runtime: &tokio::runtime::Runtime,
    work_dir: &Path,
    bytes: u64,
    runs: usize,
) -> BenchResult<Case> {
    let input_path = work_dir.join(format!("e2e-file-input-{bytes}.log"));
    let started = Instant::now();
    let input = lines::write(&input_path, bytes)?;
    eprintln!(
        "  FileStreamSource → file: input {} ({} lines) written in {:.1?}",
        human_bytes(input.bytes as f64),
        human_count(input.lines),
        started.elapsed()
    );
    let work = Work {
        records: input.lines,
        bytes: input.bytes,
    };
    let mut contenders = [
        Runner {
            name: FERRY,
            work,
            run: Box::new(|round| ferry_run(runtime, work_dir, &input_path, input, round)),
        },
        Runner {
            name: PLAIN,
            work,
            run: Box::new(|round| plain_run(work_dir, &input_path, input, round)),
        },
    ];
    let samples = rounds("file", runs, &mut contenders);
    std::fs::remove_file(&input_path)
        .map_err(|e| format!("cannot remove the input {}: {e}", input_path.display()))?;
    let samples = samples?;
    Ok(Case::pair(
        format!(
            "FileStreamSource {} ({} lines of {}–{} B) → file; Ferry: FileSink JSON lines, fdatasync per \
             batch, FileStore, offset.flush.interval.ms={}; copy: the lines, one fsync",
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

fn ferry_run(
    runtime: &tokio::runtime::Runtime,
    work_dir: &Path,
    input_path: &Path,
    input: Input,
    round: usize,
) -> BenchResult<Duration> {
    let dir = RunDir::create(work_dir, &format!("e2e-file-{round}"))?;
    let out_path = dir.join("out.jsonl");
    let config = connector_config(
        CONNECTOR,
        &[
            ("connector.class", "FileStreamSource".to_owned()),
            ("file", input_path.to_string_lossy().into_owned()),
            ("topic", "lines".to_owned()),
        ],
    );
    let end = i64::try_from(input.bytes).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let store = open_store(&dir.join("offsets.ferry"))?;
    let took = runtime.block_on(async {
        let sink = Arc::new(
            FileSink::open(&out_path)
                .await
                .map_err(|e| format!("opening the file sink: {e}"))?,
        );
        let worker = super::worker::run_until_committed(
            store,
            sink.clone(),
            &FileStreamSourceConnector::new(),
            CONNECTOR,
            config,
            |committed| {
                committed.len() == 1 && offset_field(&committed[0].1, "position") == Some(end)
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
                .map_err(|e| format!("closing the file sink: {e}"))?,
            Err(_) => return Err("the file sink is still in use after the worker stopped".into()),
        }
        Ok::<_, String>(took)
    })?;
    let written = lines::count_lines(&out_path)?;
    if written != input.lines {
        return Err(format!(
            "the file sink holds {written} lines, the input {} (Ferry lost or repeated lines)",
            input.lines
        ));
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
        return Err(format!(
            "the plain copy copied {copied} lines, the input has {}",
            input.lines
        ));
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
