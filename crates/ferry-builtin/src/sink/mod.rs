//! Where records go: one trait with asynchronous delivery acknowledgements.
//!
//! `send` hands a record over and returns a [`PendingDelivery`] that resolves once the sink has made
//! the record durable (file: written and `fdatasync`ed; Kafka: acknowledged by the broker) or failed
//! to. The runtime acknowledges the record to the `AckTracker` only when its delivery resolves `Ok`, so
//! offsets never run ahead of delivered data.
//!
//! Each task gets its sink from a [`SinkProvider`] at every (re)start; [`SharedSink`] gives every
//! task the same one.

pub use ferry_plugin::sink::{SharedSink, SinkProvider, TaskSinkContext};

pub mod file;
pub mod line;
pub mod stdout;
mod writer;

pub use ferry_plugin::sink::{
    BatchDelivery, BatchSent, Delivery, PendingBatch, PendingDelivery, RecordSink, SinkError,
    SinkErrorKind,
};
