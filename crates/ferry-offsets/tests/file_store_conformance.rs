//! The shared store conformance suite against [`FileStore`]: each case gets a fresh file in a temp
//! dir; a reopen opens the same path again (the suite drops the previous store first).

use std::path::PathBuf;

use async_trait::async_trait;
use ferry_offsets::conformance::{StoreHarness, run_conformance};
use ferry_offsets::{FileStore, FileStoreOptions, OffsetBackingStore, StoreError};
use tempfile::TempDir;

struct FileHarness {
    // Keeps the directory alive for as long as the case runs.
    _dir: TempDir,
    path: PathBuf,
    options: FileStoreOptions,
    /// Compact explicitly on every open, so every reopen replays a compacted file.
    compact_on_open: bool,
}

impl FileHarness {
    fn new(options: FileStoreOptions, compact_on_open: bool) -> Self {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
        let path = dir.path().join("offsets.ferry");
        Self {
            _dir: dir,
            path,
            options,
            compact_on_open,
        }
    }
}

#[async_trait]
impl StoreHarness for FileHarness {
    async fn open(&mut self) -> Result<Box<dyn OffsetBackingStore>, StoreError> {
        let store = FileStore::open_with(&self.path, self.options.clone())?;
        if self.compact_on_open {
            store.compact()?;
        }
        Ok(Box::new(store))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_store_passes_the_conformance_suite() {
    run_conformance(|| FileHarness::new(FileStoreOptions::default(), false)).await;
}

/// A background compaction starts after nearly every `set` that leaves garbage, while the suite
/// keeps reading, writing and reopening (a reopen cancels or waits for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_store_passes_the_conformance_suite_while_compacting_constantly() {
    let options = FileStoreOptions {
        compact_min_bytes: 0,
        compact_ratio: 1.0,
    };
    run_conformance(|| FileHarness::new(options.clone(), false)).await;
}

/// Small thresholds for background compaction, plus a full compaction at every open: every reopen
/// in the suite replays a compacted file followed by the frames written after it.
#[tokio::test]
async fn file_store_passes_the_conformance_suite_with_compaction_at_every_open() {
    let options = FileStoreOptions {
        compact_min_bytes: 512,
        compact_ratio: 1.5,
    };
    run_conformance(|| FileHarness::new(options.clone(), true)).await;
}
