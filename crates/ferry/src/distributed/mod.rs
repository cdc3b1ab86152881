//! `ferry distributed WORKER.properties`: Kafka Connect's distributed mode (issue 13).
//!
//! Only the configuration exists so far: the command reads and checks the worker file, then stops
//! with an error saying the group runtime is not implemented yet, rather than pretend to run.

mod config;
mod keys;

use std::path::Path;

use ferry_runtime::config::Properties;

pub use config::{DistributedConfig, InternalTopic};
pub use keys::*;

/// Runs `ferry distributed WORKER`: today, validates the file and refuses to start.
pub(crate) fn run(worker: &Path) -> Result<(), String> {
    let props = Properties::load(worker).map_err(|e| e.to_string())?;
    let config = DistributedConfig::from_properties(&props).map_err(|e| e.to_string())?;
    let id = match config.advertised_port {
        Some(port) => config.worker_id(port),
        None => format!("{}:<listener port>", config.advertised_host),
    };
    Err(format!(
        "distributed mode: configuration valid; the group runtime is not implemented yet, so no worker \
         was started ({}: group {}, worker id {id}). Run connectors with `ferry standalone` for now.",
        worker.display(),
        config.group_id
    ))
}
