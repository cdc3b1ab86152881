//! # ferry-builtin
//!
//! The backends every Ferry worker has without registering anything: the offsets file
//! (`offset.storage=file`, the default; the store itself is `ferry_offsets::FileStore`) and the
//! JSON-line sinks (`sink=stdout`, `sink=file:PATH`, written by one writer thread per file and
//! acknowledged once synced). They plug in through `ferry-plugin`'s contracts like any other
//! backend: this crate names no worker, herder or HTTP crate (`ferry-plugin/tests/layering.rs`).

mod plugins;
pub mod sink;

pub use plugins::{
    FileSinkPlugin, FileSinkSpec, FileStorePlugin, FileStoreSpec, StdoutSinkPlugin, StdoutSinkSpec,
};

/// `offset.storage.file.filename`: where the standalone worker stores source offsets. Required with
/// `offset.storage=file` (the default).
pub const OFFSET_STORAGE_FILE: &str = "offset.storage.file.filename";
/// `sink`: where records go (Ferry-only key): `stdout`, `file:PATH`, or a registered sink's name.
pub const SINK: &str = "sink";
