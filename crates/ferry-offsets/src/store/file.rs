//! File store — placeholder being replaced by the real implementation (do not commit).
#![allow(missing_docs, dead_code)]
use std::path::{Path, PathBuf};

use crate::error::StoreError;

#[derive(Debug, Clone)]
pub struct FileStoreOptions {
    pub compact_min_bytes: u64,
    pub compact_ratio: f64,
}

pub struct FileStore {
    path: PathBuf,
}

impl FileStore {
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Err(StoreError::UnsupportedFormat { path: path.as_ref().to_path_buf(), reason: "placeholder".into() })
    }
}
