//! # ferry-runtime
//!
//! The worker that runs source tasks: it starts each task with its connector's committed offsets,
//! sends its records to a [`sink::RecordSink`], acknowledges them on delivery, and commits offsets
//! only for what was acknowledged, every `offset.flush.interval.ms` and once more at stop.
//!
//! Owns the task loop and its delivery semantics (at least once, exactly once), the commit cycle,
//! task fencing, and the stores of connectors' configurations and statuses. May use its rooms below:
//! `ferry-config` (re-exported as [`config`]), `ferry-builtin` (the built-in sinks, [`sink`]),
//! `ferry-metrics` ([`metrics`]), the transform chain (`ferry_transforms::chain`, [`transforms`]), the
//! contracts (`ferry-plugin`) and the offsets (`ferry-offsets`); never an HTTP crate nor a backend.
//!
//! Over the worker, `ferry-herder` keeps connectors' configurations and target states (Kafka
//! Connect's standalone and distributed herders, with KIP-875 offset management), and `ferry-rest`
//! serves Kafka Connect's REST API over a herder.

mod state;
pub mod stores;
mod worker;

/// The sinks: the contract (from `ferry-plugin`) and the built-in JSON-line sinks ([`ferry_builtin::sink`]).
pub use ferry_builtin::sink;
pub use ferry_builtin::{
    FileSinkPlugin, FileSinkSpec, FileStorePlugin, FileStoreSpec, StdoutSinkPlugin, StdoutSinkSpec,
};
/// The worker's and connectors' configuration ([`ferry_config`]).
pub use ferry_config as config;
/// The worker's metrics ([`ferry_metrics`]), where the worker's users have always found them.
pub use ferry_metrics as metrics;
pub(crate) use ferry_metrics::status;
pub use ferry_metrics::status::{TaskState, TaskStatus};
/// The transform chain ([`ferry_transforms::chain`]), where the worker's users have always found it.
pub use ferry_transforms::chain as transforms;
pub use state::{TargetState, TaskId};
pub use worker::{
    ConnectorSpec, OFFSETS_STORAGE_TOPIC, TaskSpec, TopicTracking, Worker, WorkerError,
    WorkerSettings,
};
