//! Peak memory with every offset loaded: each contender loads the store of `plan.load_size` offsets in
//! a fresh process of this binary (`ferry-bench rss-probe …`) that reports its peak RSS (`VmHWM`), so
//! no other section's allocations count. An empty probe gives the process's own baseline.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ferry_offsets::FileStore;

use crate::offsets::rewrite::RewriteStore;
use crate::offsets::sqlite::SqliteStore;
use crate::offsets::{FERRY, SQLITE, fixture};
use crate::results::{Case, Contender, Stats};
use crate::{BenchResult, Plan};

pub const BASELINE: &str = "process baseline (nothing loaded)";
const HASHMAP: &str = "HashMap<bytes, bytes> (Kafka Connect standalone's in-memory map)";

/// The memory case.
pub fn run(plan: &Plan, runtime: &tokio::runtime::Runtime) -> BenchResult<Vec<Case>> {
    let size = plan.load_size;
    let loaded = fixture::loaded(&plan.work_dir.join("loaded"), size, runtime)?;
    let data_bytes: u64 = (0..size)
        .map(|i| (fixture::key(i).len() + fixture::value(i as i64).len()) as u64)
        .sum();
    let mut contenders = Vec::new();
    for (name, what, path) in [
        (format!("{FERRY} open"), "file-store", &loaded.ferry),
        (HASHMAP.to_owned(), "hashmap", &loaded.rewrite),
        (
            format!("{SQLITE} rows in a HashMap"),
            "sqlite",
            &loaded.sqlite,
        ),
        (BASELINE.to_owned(), "baseline", &loaded.ferry),
    ] {
        let Probe { peak, took, .. } = run_probe(what, path)?;
        eprintln!(
            "  peak RSS, {name}: {}",
            crate::measure::human_bytes(peak as f64)
        );
        contenders.push(Contender {
            name,
            stats: Stats::from_durations(&[took]),
            work: None,
            quantity: Some(peak as f64),
            process: None,
        });
    }
    match crate::crash::ferry_binary() {
        Some(ferry) => contenders.extend(cli(&ferry, plan, size)?),
        None => eprintln!("  no `ferry` binary next to ferry-bench: the CLI rows are not measured"),
    }
    Ok(vec![Case {
        name: format!(
            "peak RSS with {} offsets loaded ({} of key and value bytes)",
            crate::measure::human_count(size as u64),
            crate::measure::human_bytes(data_bytes as f64)
        ),
        reference: HASHMAP.to_owned(),
        contenders,
        store_size: Some(size as u64),
        changed: None,
    }])
}

pub const CLI_IMPORT: &str = "`ferry offsets import` of them (a Kafka Connect offsets-topic dump)";
pub const CLI_GET: &str = "`ferry offsets get` of one partition, right after that import";

/// The real `ferry` binary: `offsets import` of `size` offsets into a new FileStore, then `offsets
/// get` of one partition; each one's peak RSS from GNU time's `%M` (wait4's `ru_maxrss`).
fn cli(ferry: &Path, plan: &Plan, size: usize) -> BenchResult<Vec<Contender>> {
    use std::io::Write;
    let dir = crate::e2e::RunDir::create(&plan.work_dir, "memory-cli")?;
    let dump = dir.join("connect-offsets.txt");
    let failed = |e: std::io::Error| format!("writing {}: {e}", dump.display());
    let mut out = std::io::BufWriter::new(std::fs::File::create(&dump).map_err(failed)?);
    for i in 0..size {
        out.write_all(&fixture::key(i)).map_err(failed)?;
        out.write_all(b"\t").map_err(failed)?;
        out.write_all(&fixture::value(i as i64)).map_err(failed)?;
        out.write_all(b"\n").map_err(failed)?;
    }
    out.flush().map_err(failed)?;
    drop(out);
    let worker = dir.join("worker.properties");
    std::fs::write(
        &worker,
        format!(
            "listeners=http://127.0.0.1:0\noffset.storage.file.filename={}\nsink=file:{}\n",
            dir.join("offsets.ferry").display(),
            dir.join("out.jsonl").display()
        ),
    )
    .map_err(|e| crate::BenchError::from(format!("writing {}: {e}", worker.display())))?;
    let worker_arg = worker.to_string_lossy().into_owned();
    let dump_arg = dump.to_string_lossy().into_owned();
    // fixture::partition's map, as JSON.
    let partition = format!(
        "{{\"filename\":\"/var/log/app/partition-{:07}.log\"}}",
        size / 2
    );
    let mut contenders = Vec::new();
    for (name, args) in [
        (
            CLI_IMPORT,
            vec![
                "offsets",
                "import",
                "--worker",
                worker_arg.as_str(),
                dump_arg.as_str(),
            ],
        ),
        (
            CLI_GET,
            vec![
                "offsets",
                "get",
                "--worker",
                worker_arg.as_str(),
                "--connector",
                fixture::CONNECTOR,
                "--partition",
                partition.as_str(),
            ],
        ),
    ] {
        let started = Instant::now();
        let output = Command::new("/usr/bin/time")
            .arg("-f")
            .arg("ferry-bench-maxrss-kib=%M")
            .arg(ferry)
            .args(&args)
            .output()
            .map_err(|e| {
                crate::BenchError::from(format!(
                    "cannot run /usr/bin/time {}: {e}",
                    ferry.display()
                ))
            })?;
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            return Err(crate::BenchError::from(format!(
                "ferry {} failed ({}): {}",
                args.join(" "),
                output.status,
                stderr.trim()
            )));
        }
        let kib: u64 = stderr
            .lines()
            .find_map(|l| {
                l.strip_prefix("ferry-bench-maxrss-kib=")?
                    .trim()
                    .parse()
                    .ok()
            })
            .ok_or_else(|| {
                crate::BenchError::from(format!("GNU time printed no peak RSS: {stderr}"))
            })?;
        eprintln!(
            "  peak RSS, {name}: {}",
            crate::measure::human_bytes((kib * 1024) as f64)
        );
        contenders.push(Contender {
            name: name.to_owned(),
            stats: Stats::from_durations(&[took]),
            work: None,
            quantity: Some((kib * 1024) as f64),
            process: None,
        });
    }
    dir.remove()?;
    Ok(contenders)
}

/// What one probe process measured.
pub struct Probe {
    /// Peak RSS, in bytes.
    pub peak: u64,
    /// How long loading took.
    pub took: Duration,
    /// Entries (or bytes, for `read-file`) loaded.
    pub loaded: u64,
}

/// Fresh-process loads timed per contender by [`time_loads`].
pub const LOAD_RUNS: usize = 5;

/// One contender of [`time_loads`]: the probe kind (see [`probe`]), its file, and what the probe must
/// report as loaded (offsets, or bytes for `read-file`).
pub struct Load<'a> {
    pub name: &'a str,
    pub kind: &'a str,
    pub path: &'a Path,
    pub expected: u64,
}

/// What [`time_loads`] measured for one contender.
pub struct Loads {
    /// The timed loads, in run order.
    pub took: Vec<Duration>,
    /// The highest peak RSS of those loads.
    pub peak: u64,
}

/// Times loads the one way every fresh-process load of the bench is timed (the start-up case and the
/// scaling curves): one untimed round warms the page cache, then [`LOAD_RUNS`] rounds in which the
/// contenders take turns, each load in a fresh probe process, so a slow spell of the machine hits
/// every contender alike. Results are in `loads` order.
pub fn time_loads(loads: &[Load<'_>]) -> BenchResult<Vec<Loads>> {
    let mut measured: Vec<Loads> = loads
        .iter()
        .map(|_| Loads {
            took: Vec::with_capacity(LOAD_RUNS),
            peak: 0,
        })
        .collect();
    for round in 0..=LOAD_RUNS {
        for (load, measured) in loads.iter().zip(&mut measured) {
            let probe = run_probe(load.kind, load.path)?;
            if probe.loaded != load.expected {
                return Err(crate::BenchError::from(format!(
                    "{} loaded {} (offsets or bytes), expected {}",
                    load.name, probe.loaded, load.expected
                )));
            }
            if round > 0 {
                measured.took.push(probe.took);
                measured.peak = measured.peak.max(probe.peak);
            }
        }
    }
    Ok(measured)
}

/// Runs one probe process loading `what` from `path`.
pub fn run_probe(what: &str, path: &Path) -> BenchResult<Probe> {
    let exe = std::env::current_exe()
        .map_err(|e| crate::BenchError::from(format!("cannot find this binary: {e}")))?;
    let output = Command::new(&exe)
        .arg("rss-probe")
        .arg(what)
        .arg(path)
        .output()
        .map_err(|e| {
            crate::BenchError::from(format!("cannot run {} rss-probe: {e}", exe.display()))
        })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(crate::BenchError::from(format!(
            "rss-probe {what} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    let field = |name: &str| -> BenchResult<u64> {
        stdout
            .split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.parse().ok())
            .ok_or_else(|| {
                crate::BenchError::from(format!("rss-probe {what} printed no {name}: {stdout:?}"))
            })
    };
    Ok(Probe {
        peak: field("peak_rss_bytes=")?,
        took: Duration::from_nanos(field("load_nanos=")?),
        loaded: field("loaded=")?,
    })
}

/// The probe: load `what` from `path`, then print the peak RSS and load time.
pub fn probe(what: &str, path: &Path) -> BenchResult<()> {
    let started = Instant::now();
    let (held, loaded): (Box<dyn std::any::Any>, usize) = match what {
        "file-store" => {
            let store = FileStore::open(path).map_err(|e| e.to_string())?;
            let len = store.len();
            (Box::new(store), len)
        }
        "hashmap" => {
            let map = RewriteStore::load(path)?;
            let len = map.len();
            (Box::new(map), len)
        }
        "sqlite" => {
            let map = SqliteStore::open(path)?.load_all()?;
            let len = map.len();
            (Box::new(map), len)
        }
        "read-file" => {
            let bytes = std::fs::read(path)
                .map_err(|e| crate::BenchError::from(format!("reading {}: {e}", path.display())))?;
            let len = bytes.len();
            (Box::new(bytes), len)
        }
        "baseline" => (Box::new(()), 0),
        other => {
            return Err(crate::BenchError::from(format!(
                "rss-probe: unknown {other:?} (file-store, hashmap, sqlite, read-file, baseline)"
            )));
        }
    };
    let took = started.elapsed();
    let peak = peak_rss_bytes()?;
    println!(
        "peak_rss_bytes={peak} load_nanos={} loaded={loaded}",
        took.as_nanos()
    );
    drop(held);
    Ok(())
}

/// `VmHWM` of this process, in bytes.
fn peak_rss_bytes() -> BenchResult<u64> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| crate::BenchError::from(format!("cannot read /proc/self/status: {e}")))?;
    status
        .lines()
        .find_map(|line| {
            let kib = line.strip_prefix("VmHWM:")?.trim().strip_suffix("kB")?;
            kib.trim().parse::<u64>().ok()
        })
        .map(|kib| kib * 1024)
        .ok_or_else(|| crate::BenchError::from("no VmHWM line in /proc/self/status".to_owned()))
}
