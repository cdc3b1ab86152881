//! `CounterSource`: one task, one partition (`{"counter":"main"}`), offset `{"n":<last emitted>}`.

use std::sync::Arc;
use std::time::Duration;

use ferry_api::config::{Issues, int_in_range, invalid_config, required_string};
use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConnectError, OffsetStorageReaderExt, SourceConnector,
    SourceRecord, SourceTask, SourceTaskContext, async_trait,
};
use serde::{Deserialize, Serialize};

/// The topic the numbers are written to (required).
pub const TOPIC: &str = "topic";
/// The pause between two numbers, in milliseconds (optional, default 1000).
pub const INTERVAL_MS: &str = "interval.ms";

const DEFAULT_INTERVAL_MS: i64 = 1000;
const MAX_INTERVAL_MS: i64 = 3_600_000;

/// The one stream this connector reads: partition and offset are typed, so the key the task looks
/// its offset up by is the key its records carry.
#[derive(Serialize)]
struct Counter {
    counter: &'static str,
}

const MAIN: Counter = Counter { counter: "main" };

/// The position after a record: the number it carried.
#[derive(Serialize, Deserialize)]
struct Position {
    n: i64,
}

/// The connector's settings, read from a connector (or task) config.
struct Settings {
    topic: String,
    interval: Duration,
}

impl Settings {
    /// One issue per bad key, as `validate` reports them (ferry-api's helpers give Kafka Connect's
    /// trimming and the runtime's wording).
    fn parse(config: &Config) -> Result<Settings, Vec<ConfigIssue>> {
        let mut issues = Issues::default();
        let topic = required_string(config, TOPIC, &mut issues);
        let interval = int_in_range(
            config,
            INTERVAL_MS,
            Some(DEFAULT_INTERVAL_MS),
            0,
            MAX_INTERVAL_MS,
            &mut issues,
        );
        issues.finish(|| Settings {
            topic: topic.unwrap_or_default(),
            interval: Duration::from_millis(interval.map_or(0, i64::unsigned_abs)),
        })
    }
}

/// Counts 1, 2, 3, … into `topic`, one number every `interval.ms`; after a restart it goes on after
/// the last number whose offset was committed.
#[derive(Debug, Default, Clone, Copy)]
pub struct CounterSource;

impl SourceConnector for CounterSource {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![
            ConfigKey::required(TOPIC, "The topic the numbers are written to."),
            ConfigKey::optional(
                INTERVAL_MS,
                Some("1000"),
                "The pause between two numbers, in milliseconds.",
            ),
        ]
    }

    fn validate(&self, config: &Config) -> Vec<ConfigIssue> {
        Settings::parse(config).err().unwrap_or_default()
    }

    fn task_configs(
        &self,
        config: &Config,
        _max_tasks: usize,
    ) -> Result<Vec<Config>, ConnectError> {
        // One counter, so one task whatever tasks.max says.
        Ok(vec![config.clone()])
    }

    fn create_task(&self) -> Box<dyn SourceTask> {
        Box::new(CounterTask::default())
    }
}

#[derive(Default)]
struct CounterTask {
    settings: Option<Settings>,
    /// The last number emitted (or committed, right after `start`).
    last: i64,
}

#[async_trait]
impl SourceTask for CounterTask {
    async fn start(&mut self, context: Arc<dyn SourceTaskContext>) -> Result<(), ConnectError> {
        let settings = Settings::parse(context.configs())
            .map_err(|issues| invalid_config("CounterSource", "task configuration", &issues))?;
        let committed: Option<Position> = context.offset_storage_reader().offset_of(&MAIN).await?;
        self.last = committed.map_or(0, |p| p.n);
        self.settings = Some(settings);
        Ok(())
    }

    async fn poll(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        let Some(settings) = &self.settings else {
            return Err(ConnectError::fatal("CounterSource: poll before start"));
        };
        tokio::time::sleep(settings.interval).await;
        let n = self.last + 1;
        let record = SourceRecord::new(&MAIN, &Position { n }, settings.topic.clone(), n.into())?;
        self.last = n;
        Ok(vec![record])
    }

    async fn stop(&mut self) -> Result<(), ConnectError> {
        Ok(())
    }
}
