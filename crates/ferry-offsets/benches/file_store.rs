#![allow(missing_docs)] // criterion_group! generates undocumented items
//! Flush and open cost of the file store against the number of stored partitions.
//!
//! The claim under test: a flush costs what it writes, not what the store holds. For stores of
//! 1 000, 100 000 and 1 000 000 partitions it measures a flush of 1, 100 and 10 000 changed
//! partitions, the open (replay) time of each store, and — as the floor — appending the same number
//! of bytes to a plain file followed by one `fdatasync`.
//!
//! Run: `cargo bench -p ferry-offsets --bench file_store`. Set `FERRY_BENCH_SIZES=1000,100000` to
//! limit the store sizes.

use std::fs::OpenOptions;
use std::io::Write;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use ferry_api::ConnectMap;
use ferry_offsets::{FileStore, OffsetBackingStore, OffsetWrite, encode_key, encode_value};

const CONNECTOR: &str = "bench-file-source";

fn sizes() -> Vec<usize> {
    std::env::var("FERRY_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 100_000, 1_000_000])
}

fn write(partition: usize, position: i64) -> OffsetWrite {
    let p = ConnectMap::new()
        .with(
            "filename",
            format!("/var/log/app/partition-{partition:07}.log"),
        )
        .unwrap_or_default();
    let o = ConnectMap::new()
        .with("position", position)
        .unwrap_or_default();
    OffsetWrite {
        key: encode_key(CONNECTOR, Some(&p)),
        value: Some(encode_value(&o)),
    }
}

fn fill(store: &FileStore, rt: &tokio::runtime::Runtime, size: usize) {
    for chunk_start in (0..size).step_by(50_000) {
        let batch: Vec<OffsetWrite> = (chunk_start..(chunk_start + 50_000).min(size))
            .map(|p| write(p, 0))
            .collect();
        if let Err(e) = rt.block_on(store.set(&batch)) {
            panic!("filling the bench store failed: {e}");
        }
    }
}

fn bench_flush_and_open(c: &mut Criterion) {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("tokio runtime: {e}"),
    };
    for size in sizes() {
        let dir = match tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")) {
            Ok(d) => d,
            Err(e) => panic!("temp dir: {e}"),
        };
        let path = dir.path().join("offsets.ferry");
        let store = match FileStore::open(&path) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        fill(&store, &rt, size);

        let mut group = c.benchmark_group(format!("flush/store={size}"));
        group
            .sample_size(30)
            .measurement_time(Duration::from_secs(4))
            .warm_up_time(Duration::from_secs(1));
        for changed in [1usize, 100, 10_000] {
            if changed > size {
                continue;
            }
            let mut round: i64 = 0;
            let mut cursor = 0usize;
            group.bench_with_input(
                BenchmarkId::new("file_store", changed),
                &changed,
                |b, &changed| {
                    b.iter(|| {
                        round += 1;
                        let batch: Vec<OffsetWrite> = (0..changed)
                            .map(|i| write((cursor + i * 7919) % size, round))
                            .collect();
                        cursor = (cursor + changed) % size;
                        if let Err(e) = rt.block_on(store.set(&batch)) {
                            panic!("flush failed: {e}");
                        }
                    });
                },
            );
            // The floor: the same number of bytes appended to a plain file, then one fdatasync.
            let bytes: usize = (0..changed).map(|i| write(i, 1).key.len() + 16).sum();
            let floor_path = dir.path().join(format!("floor-{changed}"));
            let mut floor = match OpenOptions::new()
                .create(true)
                .append(true)
                .open(&floor_path)
            {
                Ok(f) => f,
                Err(e) => panic!("{e}"),
            };
            let buf = vec![b'x'; bytes];
            group.bench_with_input(
                BenchmarkId::new("append_fdatasync_floor", changed),
                &changed,
                |b, _| {
                    b.iter(|| {
                        if let Err(e) = floor.write_all(&buf).and_then(|()| floor.sync_data()) {
                            panic!("floor write: {e}");
                        }
                    });
                },
            );
        }
        group.finish();
        if let Err(e) = store.compact() {
            panic!("compaction before the open bench failed: {e}");
        }
        drop(store);

        let mut group = c.benchmark_group("open");
        group
            .sample_size(10)
            .measurement_time(Duration::from_secs(5))
            .warm_up_time(Duration::from_secs(1));
        group.bench_with_input(BenchmarkId::new("file_store", size), &size, |b, &size| {
            b.iter(|| match FileStore::open(&path) {
                Ok(store) => assert_eq!(store.len(), size),
                Err(e) => panic!("open failed: {e}"),
            });
        });
        group.finish();
    }
}

criterion_group!(benches, bench_flush_and_open);
criterion_main!(benches);
