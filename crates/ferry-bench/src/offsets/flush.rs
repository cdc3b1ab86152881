//! Flush latency: one durable write of `changed` partitions into a store holding `size` partitions,
//! for each contender. Every contender gets the same pre-encoded key/value bytes; building them is not
//! timed. The floor appends exactly those bytes to a plain file and calls `fdatasync` once.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use ferry_offsets::{FileStore, OffsetBackingStore};

use super::rewrite::RewriteStore;
use super::sqlite::SqliteStore;
use super::{FERRY, FLOOR, REWRITE, SQLITE, fixture};
use crate::measure::{human_count, human_duration};
use crate::results::{Case, Contender};
use crate::{BenchResult, Plan};

const MIN_RUNS: usize = 5;
const MAX_RUNS: usize = 40;

/// Runs every (store size, changed) case.
pub fn run(plan: &Plan, runtime: &tokio::runtime::Runtime) -> BenchResult<Vec<Case>> {
    let mut cases = Vec::new();
    for &size in &plan.store_sizes {
        let dir = plan.work_dir.join(format!("flush-{size}"));
        std::fs::create_dir_all(&dir).map_err(|e| {
            crate::BenchError::from(format!("cannot create {}: {e}", dir.display()))
        })?;
        let mut stores = Stores::filled(&dir, size, runtime)?;
        for &changed in plan.changed.iter().filter(|c| **c <= size) {
            cases.push(stores.case(size, changed, plan.flush_budget, runtime)?);
        }
        drop(stores);
        std::fs::remove_dir_all(&dir).map_err(|e| {
            crate::BenchError::from(format!("cannot remove {}: {e}", dir.display()))
        })?;
    }
    Ok(cases)
}

/// The four contenders over one store size.
struct Stores {
    ferry: FileStore,
    sqlite: SqliteStore,
    rewrite: RewriteStore,
    floor: File,
    /// Flushes done so far, so every flush writes new positions to new partitions.
    round: usize,
}

impl Stores {
    fn filled(dir: &Path, size: usize, runtime: &tokio::runtime::Runtime) -> BenchResult<Self> {
        let started = Instant::now();
        let ferry_path = dir.join("offsets.ferry");
        let ferry = FileStore::open(&ferry_path).map_err(|e| e.to_string())?;
        let mut sqlite = SqliteStore::open(&dir.join("offsets.sqlite"))?;
        let mut rewrite = RewriteStore::new(&dir.join("offsets.rewrite"));
        fixture::fill(&ferry, &mut sqlite, &mut rewrite, size, |_| 0, runtime)?;
        let floor_path = dir.join("floor.log");
        let floor = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&floor_path)
            .map_err(|e| {
                crate::BenchError::from(format!("cannot open {}: {e}", floor_path.display()))
            })?;
        eprintln!(
            "  stores of {} partitions filled in {:.1?}",
            human_count(size as u64),
            started.elapsed()
        );
        Ok(Self {
            ferry,
            sqlite,
            rewrite,
            floor,
            round: 0,
        })
    }

    fn next_entries(&mut self, size: usize, changed: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.round += 1;
        let position = self.round as i64;
        fixture::changed_entries(size, changed, self.round)
            .map(|i| (fixture::key(i), fixture::value(position)))
            .collect()
    }

    fn case(
        &mut self,
        size: usize,
        changed: usize,
        budget: Duration,
        runtime: &tokio::runtime::Runtime,
    ) -> BenchResult<Case> {
        let contenders = [FERRY, SQLITE, REWRITE, FLOOR];
        // One untimed warm-up flush each sizes the number of runs to the budget.
        let mut first = Duration::ZERO;
        for who in contenders {
            first += self.flush_once(who, size, changed, runtime)?;
        }
        let runs =
            ((budget.as_secs_f64() * contenders.len() as f64 / first.as_secs_f64().max(1e-6))
                as usize)
                .clamp(MIN_RUNS, MAX_RUNS);
        // Contenders take turns, so a slow spell of the disk or of a neighbour hits all of them alike.
        let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(runs); contenders.len()];
        for _ in 0..runs {
            for (who, samples) in contenders.iter().zip(&mut samples) {
                samples.push(self.flush_once(who, size, changed, runtime)?);
            }
        }
        let name = format!(
            "store {}, {} changed",
            human_count(size as u64),
            human_count(changed as u64)
        );
        let contenders: Vec<Contender> = contenders
            .iter()
            .zip(&samples)
            .map(|(who, samples)| Contender::timed(*who, samples, None))
            .collect();
        eprintln!(
            "  {name}: {} ({runs} runs each)",
            contenders
                .iter()
                .map(|c| format!("{} {}", c.name, human_duration(c.stats.median())))
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(Case {
            name,
            reference: FLOOR.to_owned(),
            contenders,
            store_size: Some(size as u64),
            changed: Some(changed as u64),
        })
    }

    /// One timed flush of fresh entries by contender `who`; building the entries is not timed.
    fn flush_once(
        &mut self,
        who: &str,
        size: usize,
        changed: usize,
        runtime: &tokio::runtime::Runtime,
    ) -> BenchResult<Duration> {
        let entries = self.next_entries(size, changed);
        match who {
            FERRY => {
                let batch = fixture::writes(&entries);
                let started = Instant::now();
                runtime
                    .block_on(self.ferry.set(&batch))
                    .map_err(|e| e.to_string())?;
                Ok(started.elapsed())
            }
            SQLITE => {
                let started = Instant::now();
                self.sqlite.flush(&entries)?;
                Ok(started.elapsed())
            }
            REWRITE => {
                let started = Instant::now();
                self.rewrite.flush(&entries)?;
                Ok(started.elapsed())
            }
            _ => {
                let bytes: Vec<u8> = entries
                    .iter()
                    .flat_map(|(k, v)| k.iter().chain(v.iter()).copied())
                    .collect();
                let started = Instant::now();
                self.floor
                    .write_all(&bytes)
                    .and_then(|()| self.floor.sync_data())
                    .map_err(|e| crate::BenchError::from(format!("floor append: {e}")))?;
                Ok(started.elapsed())
            }
        }
    }
}
