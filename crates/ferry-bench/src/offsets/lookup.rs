//! Lookup: one `offsets()` call for `plan.lookup_count` partitions spread over a loaded store of
//! `plan.load_size`, the call a task makes in `start()`. Ferry's time includes what a task gets:
//! partitions encoded to keys, the logical lookup, offsets decoded to maps. SQLite and the in-memory
//! map are handed pre-encoded keys and return raw bytes, so they do less.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use ferry_api::OffsetStorageReader;
use ferry_offsets::{FileStore, StoreOffsetReader};

use super::rewrite::RewriteStore;
use super::sqlite::SqliteStore;
use super::{FERRY, SQLITE, fixture};
use crate::measure::{human_count, time_runs};
use crate::results::{Case, Contender, Work};
use crate::{BenchResult, Plan};

const HASHMAP: &str = "HashMap<bytes, bytes> get (floor)";
const RUNS: usize = 11;

/// The lookup case.
pub fn run(plan: &Plan, runtime: &tokio::runtime::Runtime) -> BenchResult<Vec<Case>> {
    let size = plan.load_size;
    let count = plan.lookup_count.min(size);
    let loaded = fixture::loaded(&plan.work_dir.join("loaded"), size, runtime)?;
    let wanted: Vec<usize> = fixture::changed_entries(size, count, 1).collect();
    let partitions: Vec<_> = wanted.iter().map(|&i| fixture::partition(i)).collect();
    let keys: Vec<Vec<u8>> = wanted.iter().map(|&i| fixture::key(i)).collect();
    let label = |who: &str| {
        format!(
            "offsets() for {} of {}, {who}",
            human_count(count as u64),
            human_count(size as u64)
        )
    };

    let store = Arc::new(FileStore::open(&loaded.ferry).map_err(|e| e.to_string())?);
    let reader = StoreOffsetReader::new(fixture::CONNECTOR, store);
    let ferry_name = format!("{FERRY} via OffsetStorageReader::offsets");
    let ferry = time_runs(&label(&ferry_name), 1, RUNS, || {
        let started = Instant::now();
        let found = runtime
            .block_on(reader.offsets(&partitions))
            .map_err(|e| e.to_string())?;
        let took = started.elapsed();
        check_found(
            &ferry_name,
            found.iter().filter(|(_, o)| o.is_some()).count(),
            count,
        )?;
        Ok(took)
    })?;
    drop(reader);

    let sqlite = SqliteStore::open(&loaded.sqlite)?;
    let sqlite_name = format!("{SQLITE} point SELECTs");
    let sqlite_runs = time_runs(&label(&sqlite_name), 1, RUNS, || {
        let started = Instant::now();
        let found = sqlite.lookup(&keys)?;
        let took = started.elapsed();
        check_found(&sqlite_name, found.iter().flatten().count(), count)?;
        Ok(took)
    })?;
    drop(sqlite);

    let map: HashMap<Vec<u8>, Vec<u8>> = RewriteStore::load(&loaded.rewrite)?;
    let map_runs = time_runs(&label(HASHMAP), 1, RUNS, || {
        let started = Instant::now();
        let found: Vec<Option<Vec<u8>>> = keys.iter().map(|k| map.get(k).cloned()).collect();
        let took = started.elapsed();
        check_found(HASHMAP, found.iter().flatten().count(), count)?;
        Ok(took)
    })?;

    let work = Some(Work {
        records: count as u64,
        bytes: 0,
    });
    Ok(vec![Case {
        name: format!(
            "offsets() for {} partitions of {} loaded",
            human_count(count as u64),
            human_count(size as u64)
        ),
        reference: sqlite_name.clone(),
        contenders: vec![
            Contender::timed(ferry_name, &ferry, work),
            Contender::timed(sqlite_name, &sqlite_runs, work),
            Contender::timed(HASHMAP, &map_runs, work),
        ],
        store_size: Some(size as u64),
        changed: None,
    }])
}

fn check_found(who: &str, found: usize, want: usize) -> BenchResult<()> {
    if found == want {
        Ok(())
    } else {
        Err(crate::BenchError::from(format!(
            "{who} found {found} of {want} offsets"
        )))
    }
}
