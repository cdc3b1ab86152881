//! # ferry
//!
//! The `ferry` program as a library: register connectors, offset stores and sinks with
//! [`Ferry::builder`], then run the command line ([`Ferry::run_cli`]) or a standalone worker
//! ([`Ferry::run_standalone`]). The `ferry` binary is such a program, registering the built-in
//! connectors, Kafka and PostgreSQL. [`DistributedConfig`] reads the worker file of `ferry distributed`.
//! [`docs`] writes the book's generated reference.

mod builder;
mod cli;
pub mod distributed;
pub mod docs;
mod error;
mod migrate;
mod offsets;
mod standalone;

pub use builder::Ferry;
pub use distributed::DistributedConfig;
pub use error::RunError;
