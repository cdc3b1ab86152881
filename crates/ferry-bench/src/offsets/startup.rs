//! Start-up: loading every offset of a store of `plan.load_size`, each load in a fresh process (as a
//! worker starting up: no memory the allocator already holds), with a warm page cache. Ferry opens its
//! file store (replay into the in-memory index); SQLite reads every row into a map; Kafka Connect's
//! standalone store reads its rewritten file into a map; the floor reads the file store's bytes.

use std::path::Path;
use std::time::Duration;

use super::{FERRY, REWRITE, SQLITE, fixture};
use crate::measure::{human_count, human_duration};
use crate::memory::run_probe;
use crate::results::{Case, Contender, Work};
use crate::{BenchResult, Plan};

/// The floor: reading the bytes of Ferry's store file, parsing nothing.
pub const READ_FLOOR: &str = "read the store file (I/O floor)";
const RUNS: usize = 5;

/// The start-up case.
pub fn run(plan: &Plan, runtime: &tokio::runtime::Runtime) -> BenchResult<Vec<Case>> {
    let size = plan.load_size;
    let loaded = fixture::loaded(&plan.work_dir.join("loaded"), size, runtime)?;
    let ferry_bytes = std::fs::metadata(&loaded.ferry)
        .map_err(|e| format!("{}: {e}", loaded.ferry.display()))?
        .len();
    // (name, probe kind, file, what the probe must report as loaded)
    let contenders: [(String, &str, &Path, u64); 4] = [
        (
            format!("{FERRY} open"),
            "file-store",
            &loaded.ferry,
            size as u64,
        ),
        (
            format!("{SQLITE} full scan"),
            "sqlite",
            &loaded.sqlite,
            size as u64,
        ),
        (
            format!("{REWRITE} load"),
            "hashmap",
            &loaded.rewrite,
            size as u64,
        ),
        (
            READ_FLOOR.to_owned(),
            "read-file",
            &loaded.ferry,
            ferry_bytes,
        ),
    ];
    // One untimed round warms the page cache; then the contenders take turns.
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); contenders.len()];
    for round in 0..=RUNS {
        for ((name, kind, path, expected), samples) in contenders.iter().zip(&mut samples) {
            let probe = run_probe(kind, path)?;
            if probe.loaded != *expected {
                return Err(format!(
                    "{name} loaded {} (offsets or bytes), expected {expected}",
                    probe.loaded
                ));
            }
            if round > 0 {
                samples.push(probe.took);
            }
        }
    }
    let work = Some(Work {
        records: size as u64,
        bytes: 0,
    });
    let contenders: Vec<Contender> = contenders
        .iter()
        .zip(&samples)
        .map(|((name, ..), samples)| Contender::timed(name.clone(), samples, work))
        .collect();
    eprintln!(
        "  load {} offsets in a fresh process: {}",
        human_count(size as u64),
        contenders
            .iter()
            .map(|c| format!("{} {}", c.name, human_duration(c.stats.median())))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(vec![Case {
        name: format!(
            "{} offsets from a local store, each load in a fresh process (warm page cache)",
            human_count(size as u64)
        ),
        reference: format!("{SQLITE} full scan"),
        contenders,
        store_size: Some(size as u64),
        changed: None,
    }])
}
