//! The sidecar lock that makes a store file single-writer.
//!
//! `<file>.lock` is created on first open and never deleted (deleting it would let a second opener
//! lock a fresh inode while the first still holds the old one). The store holds an exclusive
//! `try_lock` on it for its whole lifetime, so a second opener — another process, or another
//! `FileStore` in the same process — fails at once with [`StoreError::Locked`] instead of waiting. The
//! operating system releases the lock when the holder exits, however it exits, so a crash never
//! leaves a stale lock behind.

use std::ffi::OsString;
use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use crate::error::StoreError;

/// `path` with `suffix` appended to its file name (`offsets` → `offsets.lock`).
pub(super) fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(suffix);
    PathBuf::from(name)
}

/// Takes the store's lock, or says who holds it.
pub(super) fn acquire(path: &Path) -> Result<File, StoreError> {
    let lock = sidecar(path, ".lock");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock)
        .map_err(|source| StoreError::Io {
            path: lock.clone(),
            op: "create the lock file",
            source,
        })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(StoreError::Locked {
            path: path.to_path_buf(),
            lock,
        }),
        Err(TryLockError::Error(source)) => Err(StoreError::Io {
            path: lock,
            op: "lock the lock file",
            source,
        }),
    }
}
