//! The offsets every store case uses: Kafka Connect's bytes for a file source's partitions,
//! `["bench",{"filename":"/var/log/app/partition-0000042.log"}]` → `{"position":N}`.

use ferry_api::ConnectMap;
use ferry_offsets::{OffsetWrite, encode_key, encode_value};

/// The connector every fixture offset belongs to.
pub const CONNECTOR: &str = "bench";

/// The source partition of fixture entry `i`.
pub fn partition(i: usize) -> ConnectMap {
    let mut map = ConnectMap::new();
    // Only a non-finite float can be refused; a string never is.
    let _ = map.insert("filename", format!("/var/log/app/partition-{i:07}.log"));
    map
}

/// The offset key bytes of entry `i`.
pub fn key(i: usize) -> Vec<u8> {
    encode_key(CONNECTOR, Some(&partition(i)))
}

/// The offset value bytes `{"position":position}`.
pub fn value(position: i64) -> Vec<u8> {
    let mut map = ConnectMap::new();
    // Only a non-finite float can be refused; an integer never is.
    let _ = map.insert("position", position);
    encode_value(&map)
}

/// Which entries the `round`-th flush of `changed` partitions in a store of `size` touches: spread
/// over the whole store (a stride coprime with the sizes used), different each round.
pub fn changed_entries(size: usize, changed: usize, round: usize) -> impl Iterator<Item = usize> {
    let start = round.wrapping_mul(changed);
    (0..changed).map(move |i| (start + i).wrapping_mul(7919) % size)
}

/// The stores of `size` offsets that the start-up, lookup and memory sections load, built once per run.
pub struct Loaded {
    /// Ferry's file store.
    pub ferry: std::path::PathBuf,
    /// The SQLite database.
    pub sqlite: std::path::PathBuf,
    /// The full-rewrite file.
    pub rewrite: std::path::PathBuf,
}

/// Builds (or finds, when an earlier section built them) the three stores of `size` offsets under
/// `dir`.
pub fn loaded(
    dir: &std::path::Path,
    size: usize,
    runtime: &tokio::runtime::Runtime,
) -> crate::BenchResult<Loaded> {
    let loaded = Loaded {
        ferry: dir.join("offsets.ferry"),
        sqlite: dir.join("offsets.sqlite"),
        rewrite: dir.join("offsets.rewrite"),
    };
    let done = dir.join("complete");
    if done.exists() {
        return Ok(loaded);
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| crate::BenchError::from(format!("cannot create {}: {e}", dir.display())))?;
    let started = std::time::Instant::now();
    let ferry = ferry_offsets::FileStore::open(&loaded.ferry).map_err(|e| e.to_string())?;
    let mut sqlite = super::sqlite::SqliteStore::open(&loaded.sqlite)?;
    let mut rewrite = super::rewrite::RewriteStore::new(&loaded.rewrite);
    fill(
        &ferry,
        &mut sqlite,
        &mut rewrite,
        size,
        |i| i as i64,
        runtime,
    )?;
    // A store as a long-running worker leaves it: compacted, one frame per live offset.
    ferry.compact().map_err(|e| e.to_string())?;
    drop(ferry);
    std::fs::write(&done, b"")
        .map_err(|e| crate::BenchError::from(format!("cannot write {}: {e}", done.display())))?;
    eprintln!(
        "  {} offsets written to a FileStore, SQLite and a rewrite file in {:.1?}",
        crate::measure::human_count(size as u64),
        started.elapsed()
    );
    Ok(loaded)
}

/// Writes entries `0..size` (entry `i` at `position(i)`) into the three stores, in chunks, untimed.
pub fn fill(
    ferry: &ferry_offsets::FileStore,
    sqlite: &mut super::sqlite::SqliteStore,
    rewrite: &mut super::rewrite::RewriteStore,
    size: usize,
    position: impl Fn(usize) -> i64,
    runtime: &tokio::runtime::Runtime,
) -> crate::BenchResult<()> {
    use ferry_offsets::OffsetBackingStore;

    const CHUNK: usize = 50_000;
    for start in (0..size).step_by(CHUNK) {
        let entries: Vec<(Vec<u8>, Vec<u8>)> = (start..(start + CHUNK).min(size))
            .map(|i| (key(i), value(position(i))))
            .collect();
        runtime
            .block_on(ferry.set(&writes(&entries)))
            .map_err(|e| {
                crate::BenchError::from(format!("filling {}: {e}", ferry.path().display()))
            })?;
        sqlite.flush(&entries)?;
        for (k, v) in entries {
            rewrite.flush_later(k, v);
        }
    }
    // The rewrite store writes its whole map at each flush: one flush at the end.
    rewrite.flush(&[])
}

/// The store writes of `entries`.
pub fn writes(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<OffsetWrite> {
    entries
        .iter()
        .map(|(key, value)| OffsetWrite {
            key: key.clone(),
            value: Some(value.clone()),
        })
        .collect()
}

/// A compacted FileStore and a full-rewrite file of `size` offsets under `dir` (no SQLite: the
/// scaling curves go to sizes SQLite would take minutes to fill). The rewrite file is streamed, so the
/// bench never holds its map. Returns (FileStore path, rewrite path).
pub fn ferry_and_rewrite(
    dir: &std::path::Path,
    size: usize,
    runtime: &tokio::runtime::Runtime,
) -> crate::BenchResult<(std::path::PathBuf, std::path::PathBuf)> {
    use ferry_offsets::OffsetBackingStore;
    use std::io::Write;

    const CHUNK: usize = 100_000;
    std::fs::create_dir_all(dir)
        .map_err(|e| crate::BenchError::from(format!("cannot create {}: {e}", dir.display())))?;
    let (ferry_path, rewrite_path) = (dir.join("offsets.ferry"), dir.join("offsets.rewrite"));
    let started = std::time::Instant::now();
    let failed = |e: std::io::Error| format!("writing {}: {e}", rewrite_path.display());
    let mut rewrite = std::io::BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(&rewrite_path).map_err(failed)?,
    );
    rewrite
        .write_all(&(size as u64).to_le_bytes())
        .map_err(failed)?;
    let ferry = ferry_offsets::FileStore::open(&ferry_path).map_err(|e| e.to_string())?;
    for start in (0..size).step_by(CHUNK) {
        let entries: Vec<(Vec<u8>, Vec<u8>)> = (start..(start + CHUNK).min(size))
            .map(|i| (key(i), value(i as i64)))
            .collect();
        runtime
            .block_on(ferry.set(&writes(&entries)))
            .map_err(|e| {
                crate::BenchError::from(format!("filling {}: {e}", ferry_path.display()))
            })?;
        for (k, v) in &entries {
            for bytes in [k, v] {
                rewrite
                    .write_all(&(bytes.len() as u32).to_le_bytes())
                    .map_err(failed)?;
                rewrite.write_all(bytes).map_err(failed)?;
            }
        }
    }
    rewrite.flush().map_err(failed)?;
    ferry.compact().map_err(|e| e.to_string())?;
    drop(ferry);
    eprintln!(
        "  {} offsets written to a FileStore and a rewrite file in {:.1?}",
        crate::measure::human_count(size as u64),
        started.elapsed()
    );
    Ok((ferry_path, rewrite_path))
}
