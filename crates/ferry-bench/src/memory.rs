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
        });
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

/// What one probe process measured.
pub struct Probe {
    /// Peak RSS, in bytes.
    pub peak: u64,
    /// How long loading took.
    pub took: Duration,
    /// Entries (or bytes, for `read-file`) loaded.
    pub loaded: u64,
}

/// Runs one probe process loading `what` from `path`.
pub fn run_probe(what: &str, path: &Path) -> BenchResult<Probe> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let output = Command::new(&exe)
        .arg("rss-probe")
        .arg(what)
        .arg(path)
        .output()
        .map_err(|e| format!("cannot run {} rss-probe: {e}", exe.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "rss-probe {what} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let field = |name: &str| -> BenchResult<u64> {
        stdout
            .split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.parse().ok())
            .ok_or_else(|| format!("rss-probe {what} printed no {name}: {stdout:?}"))
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
            let bytes =
                std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
            let len = bytes.len();
            (Box::new(bytes), len)
        }
        "baseline" => (Box::new(()), 0),
        other => {
            return Err(format!(
                "rss-probe: unknown {other:?} (file-store, hashmap, sqlite, read-file, baseline)"
            ));
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
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    status
        .lines()
        .find_map(|line| {
            let kib = line.strip_prefix("VmHWM:")?.trim().strip_suffix("kB")?;
            kib.trim().parse::<u64>().ok()
        })
        .map(|kib| kib * 1024)
        .ok_or_else(|| "no VmHWM line in /proc/self/status".to_owned())
}
