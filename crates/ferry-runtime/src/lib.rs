//! # ferry-runtime
//!
//! The worker that runs source tasks: it starts each task with its connector's committed offsets,
//! sends its records to a [`sink::RecordSink`], acknowledges them on delivery, and commits offsets
//! only for what was acknowledged, every `offset.flush.interval.ms` and once more at stop.
//!
//! Over the worker, `ferry-herder` keeps connectors' configurations and target states (Kafka
//! Connect's standalone and distributed herders, with KIP-875 offset management), and `ferry-rest`
//! serves Kafka Connect's REST API over a herder.

mod builtin;
pub mod config;
pub mod sink;
mod state;
pub mod stores;
pub mod transforms;
mod worker;

pub use builtin::{
    FileSinkPlugin, FileSinkSpec, FileStorePlugin, FileStoreSpec, StdoutSinkPlugin, StdoutSinkSpec,
};
/// The worker's metrics ([`ferry_metrics`]), where the worker's users have always found them.
pub use ferry_metrics as metrics;
pub(crate) use ferry_metrics::status;
pub use ferry_metrics::status::{TaskState, TaskStatus};
pub use state::{TargetState, TaskId};
pub use worker::{
    ConnectorSpec, OFFSETS_STORAGE_TOPIC, TaskSpec, TopicTracking, Worker, WorkerError,
    WorkerSettings,
};
