//! # ferry-runtime
//!
//! The worker that runs source tasks: it starts each task with its connector's committed offsets,
//! sends its records to a [`sink::RecordSink`], acknowledges them on delivery, and commits offsets
//! only for what was acknowledged, every `offset.flush.interval.ms` and once more at stop.
//!
//! Over the worker, the [`herder`] keeps connectors' configurations and target states (Kafka Connect's
//! standalone herder, with KIP-875 offset management); `ferry-rest` serves Kafka Connect's REST API over it.

mod builtin;
pub mod config;
pub mod herder;
pub mod metrics;
pub mod sink;
mod state;
mod status;
pub mod stores;
pub mod transforms;
mod worker;

pub use builtin::{
    FileSinkPlugin, FileSinkSpec, FileStorePlugin, FileStoreSpec, StdoutSinkPlugin, StdoutSinkSpec,
};
pub use state::{TargetState, TaskId};
pub use status::{TaskState, TaskStatus};
pub use worker::{ConnectorSpec, TaskSpec, TopicTracking, Worker, WorkerError, WorkerSettings};
