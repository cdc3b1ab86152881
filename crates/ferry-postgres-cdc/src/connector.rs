//! The connector: configuration, one task, registration.

use ferry_api::config::invalid_config;
use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConnectError, ConnectorPlugin, SourceConnector, SourceTask,
};

use crate::config::{CdcConfig, keys};
use crate::task::PostgresCdcTask;

/// The class names PostgresCdcSource answers to.
pub const CLASS_NAMES: &[&str] = &[
    "PostgresCdcSource",
    "io.debezium.connector.postgresql.PostgresConnector",
];

/// The PostgresCdcSource connector. One slot is read by one task, so it always runs one task.
#[derive(Debug, Default, Clone, Copy)]
pub struct PostgresCdcConnector;

/// The connectors of this crate for a runtime's registry.
pub fn connectors() -> Vec<ConnectorPlugin> {
    vec![ConnectorPlugin::new(CLASS_NAMES.iter().copied(), || {
        Box::new(PostgresCdcConnector) as Box<dyn SourceConnector>
    })]
}

impl SourceConnector for PostgresCdcConnector {
    fn config_keys(&self) -> Vec<ConfigKey> {
        keys()
    }

    /// One issue per bad or refused key; never connects.
    fn validate(&self, config: &Config) -> Vec<ConfigIssue> {
        CdcConfig::parse(config).err().unwrap_or_default()
    }

    fn task_configs(
        &self,
        config: &Config,
        _max_tasks: usize,
    ) -> Result<Vec<Config>, ConnectError> {
        CdcConfig::parse(config).map_err(|issues| {
            invalid_config("PostgresCdcSource", "connector configuration", &issues)
        })?;
        Ok(vec![config.clone()])
    }

    fn create_task(&self) -> Box<dyn SourceTask> {
        Box::new(PostgresCdcTask::new())
    }
}
