//! # ferry-connectors
//!
//! Ferry's built-in source connectors that need no server. They depend on `ferry-api` only.
//!
//! - [`FileStreamSourceConnector`]: Kafka Connect's file source (`file` or a `files` glob), tailing the
//!   files, with byte-exact positions, log rotation followed by file identity (device, inode and a
//!   fingerprint of the first bytes, kept in the offset), detection of files truncated in place, a
//!   bounded line length (`max.line.bytes`), and regular files only.
//! - [`SequenceSourceConnector`]: a data generator of `{"partition": p, "seq": n}` records whose output
//!   can be checked exactly for loss and duplicates, for crash tests and benchmarks.
//!
//! [`builtin_connectors`] maps their class names to constructors for the runtime's registry.

#![deny(missing_docs)]

mod file;
mod pace;
mod registry;
mod sequence;

pub use file::{
    FileOffset, FilePartition, FileStreamSourceConnector, FileStreamSourceTask, TASK_FILES,
};
pub use registry::{builtin_connector, builtin_connectors};
pub use sequence::{
    SequenceOffset, SequencePartition, SequenceSourceConnector, SequenceSourceTask, TASK_PARTITIONS,
};
