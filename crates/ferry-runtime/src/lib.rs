//! # ferry-runtime
//!
//! The worker that runs source tasks: it starts each task with its connector's committed offsets,
//! sends its records to a [`sink::RecordSink`], acknowledges them on delivery, and commits offsets
//! only for what was acknowledged, every `offset.flush.interval.ms` and once more at stop.

pub mod config;
pub mod sink;
mod worker;

pub use worker::{ConnectorSpec, TaskState, TaskStatus, Worker, WorkerError, WorkerSettings};
