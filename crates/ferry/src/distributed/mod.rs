//! `ferry distributed WORKER.properties`: Kafka Connect's distributed mode (issue 13).
//!
//! The worker file ([`DistributedConfig`]) is checked whole before anything starts; [`run`] assembles
//! the worker.

mod backends;
mod config;
mod keys;
mod run;

use std::path::Path;

use ferry_runtime::config::Properties;

pub use config::{DistributedConfig, InternalTopic};
pub use keys::*;

/// Runs `ferry distributed WORKER` until SIGTERM or SIGINT.
pub(crate) async fn run(ferry: &crate::Ferry, worker: &Path) -> Result<(), crate::RunError> {
    let props = Properties::load(worker)?;
    let config = DistributedConfig::from_properties(&props)?;
    run::run(ferry, &props, config).await
}
