//! Start-up: loading every offset of a store of `plan.load_size` (warm page cache). Ferry opens its
//! file store (replay into the in-memory index); SQLite reads every row into a map; Kafka Connect's
//! standalone store reads its rewritten file into a map; the floor reads the file store's bytes.

use std::time::Instant;

use ferry_offsets::FileStore;

use super::rewrite::RewriteStore;
use super::sqlite::SqliteStore;
use super::{FERRY, REWRITE, SQLITE, fixture};
use crate::measure::{human_count, time_runs};
use crate::results::{Case, Contender, Work};
use crate::{BenchResult, Plan};

/// The floor: reading the bytes of Ferry's store file, parsing nothing.
pub const READ_FLOOR: &str = "read the store file (I/O floor)";
const RUNS: usize = 5;

/// The start-up case.
pub fn run(plan: &Plan, runtime: &tokio::runtime::Runtime) -> BenchResult<Vec<Case>> {
    let size = plan.load_size;
    let loaded = fixture::loaded(&plan.work_dir.join("loaded"), size, runtime)?;
    let label = |who: &str| format!("load {} offsets, {who}", human_count(size as u64));
    let ferry = time_runs(&label(FERRY), 1, RUNS, || {
        let started = Instant::now();
        let store = FileStore::open(&loaded.ferry).map_err(|e| e.to_string())?;
        let took = started.elapsed();
        check_count(FERRY, store.len(), size)?;
        Ok(took)
    })?;
    let sqlite = time_runs(&label(SQLITE), 1, RUNS, || {
        let started = Instant::now();
        let store = SqliteStore::open(&loaded.sqlite)?;
        let all = store.load_all()?;
        let took = started.elapsed();
        check_count(SQLITE, all.len(), size)?;
        Ok(took)
    })?;
    let rewrite = time_runs(&label(REWRITE), 1, RUNS, || {
        let started = Instant::now();
        let all = RewriteStore::load(&loaded.rewrite)?;
        let took = started.elapsed();
        check_count(REWRITE, all.len(), size)?;
        Ok(took)
    })?;
    let floor = time_runs(&label(READ_FLOOR), 1, RUNS, || {
        let started = Instant::now();
        let bytes = std::fs::read(&loaded.ferry)
            .map_err(|e| format!("reading {}: {e}", loaded.ferry.display()))?;
        let took = started.elapsed();
        drop(bytes);
        Ok(took)
    })?;
    let work = Some(Work {
        records: size as u64,
        bytes: 0,
    });
    Ok(vec![Case {
        name: format!(
            "{} offsets from a local store (warm page cache)",
            human_count(size as u64)
        ),
        reference: format!("{SQLITE} full scan"),
        contenders: vec![
            Contender::timed(format!("{FERRY} open"), &ferry, work),
            Contender::timed(format!("{SQLITE} full scan"), &sqlite, work),
            Contender::timed(format!("{REWRITE} load"), &rewrite, work),
            Contender::timed(READ_FLOOR, &floor, work),
        ],
        store_size: Some(size as u64),
        changed: None,
    }])
}

fn check_count(who: &str, got: usize, want: usize) -> BenchResult<()> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{who} loaded {got} offsets, expected {want}"))
    }
}
