//! Start-up: loading every offset of a store of `plan.load_size`, each load in a fresh process (as a
//! worker starting up: no memory the allocator already holds), with a warm page cache, timed by
//! [`time_loads`] like the scaling section's loads. Ferry opens its
//! file store (replay into the in-memory index); SQLite reads every row into a map; Kafka Connect's
//! standalone store reads its rewritten file into a map; the floor reads the file store's bytes.

use super::{FERRY, REWRITE, SQLITE, fixture};
use crate::measure::{human_count, human_duration};
use crate::memory::{Load, time_loads};
use crate::results::{Case, Contender, Work};
use crate::{BenchResult, Plan};

/// The floor: reading the bytes of Ferry's store file, parsing nothing.
pub const READ_FLOOR: &str = "read the store file (I/O floor)";

/// The start-up case.
pub fn run(plan: &Plan, runtime: &tokio::runtime::Runtime) -> BenchResult<Vec<Case>> {
    let size = plan.load_size;
    let loaded = fixture::loaded(&plan.work_dir.join("loaded"), size, runtime)?;
    let ferry_bytes = std::fs::metadata(&loaded.ferry)
        .map_err(|e| crate::BenchError::from(format!("{}: {e}", loaded.ferry.display())))?
        .len();
    let ferry_name = format!("{FERRY} open");
    let sqlite_name = format!("{SQLITE} full scan");
    let rewrite_name = format!("{REWRITE} load");
    let loads = [
        Load {
            name: &ferry_name,
            kind: "file-store",
            path: &loaded.ferry,
            expected: size as u64,
        },
        Load {
            name: &sqlite_name,
            kind: "sqlite",
            path: &loaded.sqlite,
            expected: size as u64,
        },
        Load {
            name: &rewrite_name,
            kind: "hashmap",
            path: &loaded.rewrite,
            expected: size as u64,
        },
        Load {
            name: READ_FLOOR,
            kind: "read-file",
            path: &loaded.ferry,
            expected: ferry_bytes,
        },
    ];
    let measured = time_loads(&loads)?;
    let work = Some(Work {
        records: size as u64,
        bytes: 0,
    });
    let contenders: Vec<Contender> = loads
        .iter()
        .zip(&measured)
        .map(|(load, measured)| Contender::timed(load.name.to_owned(), &measured.took, work))
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
