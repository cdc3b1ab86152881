//! Test doubles for herder tests that need a connector but no running task: `Idle` (a connector that
//! makes no task configurations) and `NoSink` (a sink no record ever reaches).

use std::time::Duration;

use ferry_api::{Config, ConfigIssue, ConfigKey, ConnectError, SourceConnector, SourceTask};
use ferry_runtime::sink::{PendingDelivery, RecordSink, SinkError, SinkErrorKind};

/// A connector with no tasks: its status is the herder's alone.
pub struct Idle;

impl SourceConnector for Idle {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![ConfigKey::required("topic", "the topic")]
    }

    fn validate(&self, _config: &Config) -> Vec<ConfigIssue> {
        Vec::new()
    }

    fn task_configs(&self, _config: &Config, _max: usize) -> Result<Vec<Config>, ConnectError> {
        Ok(Vec::new())
    }

    fn create_task(&self) -> Box<dyn SourceTask> {
        unreachable!("Idle makes no task configurations")
    }
}

/// A sink no record reaches (Idle runs no task).
pub struct NoSink;

#[ferry_api::async_trait]
impl RecordSink for NoSink {
    fn describe(&self) -> String {
        "nothing".into()
    }

    async fn send(&self, _: &ferry_api::SourceRecord) -> Result<PendingDelivery, SinkError> {
        Err(SinkError::new("nothing", SinkErrorKind::Fatal, "unused"))
    }

    async fn flush(&self, _: Duration) -> Result<(), SinkError> {
        Ok(())
    }
}
