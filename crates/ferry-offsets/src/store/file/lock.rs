//! The sidecar lock that makes a store file single-writer.
//!
//! `<file>.lock` is created on first open and never deleted (deleting it would let a second opener
//! lock a fresh inode while the first still holds the old one). The store holds an exclusive
//! `try_lock` on it for its whole lifetime, so a second opener — another process, or another
//! `FileStore` in the same process — fails at once with [`StoreError::Locked`] instead of waiting. The
//! operating system releases the lock when the holder exits, however it exits, so a crash never
//! leaves a stale lock behind.
//!
//! A read-only open ([`acquire_shared`]) creates nothing: it takes a shared lock on `<file>.lock` if
//! that file exists and can be opened for reading, so it is refused while a writer holds the store
//! (and a writer is refused while it reads), and takes no lock otherwise. Going without is safe: a
//! read-only store writes nothing, and at worst reads a state a writer is about to extend.

use std::ffi::OsString;
use std::fs::{File, OpenOptions, TryLockError};
use std::io;
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

/// Takes a shared lock for a read-only open if the lock file exists and can be read; `None` if it
/// cannot (see the module docs). Creates nothing.
pub(super) fn acquire_shared(path: &Path) -> Result<Option<File>, StoreError> {
    let lock = sidecar(path, ".lock");
    let file = match File::open(&lock) {
        Ok(file) => file,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied
            ) =>
        {
            return Ok(None);
        }
        Err(source) => {
            return Err(StoreError::Io {
                path: lock,
                op: "open the lock file for reading",
                source,
            });
        }
    };
    match file.try_lock_shared() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Err(StoreError::Locked {
            path: path.to_path_buf(),
            lock,
        }),
        // A file system without locks: read without one.
        Err(TryLockError::Error(_)) => Ok(None),
    }
}
