//! PostgresSource: Kafka Connect's JDBC source connector for PostgreSQL.
//!
//! Class names: `PostgresSource`, and `io.confluent.connect.jdbc.JdbcSourceConnector` (its
//! `connection.url` must be `jdbc:postgresql://…`), so a Kafka Connect JDBC source configuration for
//! PostgreSQL runs unchanged. Configuration keys, partitions, offsets and queries are the JDBC
//! source's:
//!
//! - `mode=incrementing`: `WHERE inc > ? ORDER BY inc`, offset `{"incrementing":N}`;
//! - `mode=timestamp`: `WHERE ts > ? AND ts < now - delay ORDER BY ts`, offset
//!   `{"timestamp_nanos":ns,"timestamp":ms}`;
//! - `mode=timestamp+incrementing`: `WHERE ts < now - delay AND ((ts = ? AND inc > ?) OR ts > ?)
//!   ORDER BY ts, inc`, offset with all three fields;
//! - `mode=bulk`: the whole table every `poll.interval.ms`, no offsets (a restart reads it all again).
//!
//! Tables: `table.whitelist`, or every table of `table.types` in the schemas matching `schema.pattern`
//! except `table.blacklist`, listed by each task at start and every `table.poll.interval.ms`
//! (module `discovery`): tables created later are read, dropped ones left. Values are Kafka Connect's
//! logical types (modules `numeric` and `logical`).
//!
//! Partitions are `{"protocol":"1","table":"schema.table"}` per table (at start the legacy
//! `{"table":"table"}` is looked up too, in the same `offsets()` call, for offsets written by JDBC
//! source versions before protocol 1) and `{"query":"query"}` with `query`. Each record's offset is
//! the position right after its row, so a restart resumes after the last committed row.
//!
//! Late commits: before each round the task reads the open transactions (`pg_stat_activity`) and never
//! reads past a key one of them could still write below, so a row committed late is read once in every
//! mode (`source/guard.rs` has the argument); a transaction open longer than `ferry.late.commit.max.wait.ms` is
//! no longer waited for (WARN), as Kafka Connect never waits. `timestamp.delay.interval.ms` still
//! applies. `validate.non.null` refuses nullable cursor columns at start; `db.timezone` is the zone of
//! `timestamp without time zone` columns, in the bounds, the offsets and the record values (`zone.rs`).
//!
//! A transient database failure (connection lost or refused, server restarting, serialization failure,
//! deadlock) is retried on a new connection, `connection.attempts` times `connection.backoff.ms` apart;
//! then, or at once for a permanent error (missing table, permission), the task fails with a message
//! naming the server and the cause.

mod columns;
mod config;
mod conn;
mod decode;
mod discovery;
mod guard;
mod logical;
mod numeric;
mod offset;
mod options;
mod sql;
mod task;
mod time;
mod url;
mod zone;

use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConnectError, ConnectorPlugin, SourceConnector, SourceOffset,
    SourcePartition, SourceTask,
};

pub use config::{TASK_SHARE, TASK_TABLES};
pub use guard::held_back_rounds;
pub use offset::{
    JdbcOffset, LegacyTablePartition, PROTOCOL_VERSION, QueryPartition, TablePartition,
};
pub use task::PostgresSourceTask;

use config::{Source, SourceConfig};
use ferry_api::config::invalid_config;

/// The class names PostgresSource answers to.
pub const CLASS_NAMES: &[&str] = &[
    "PostgresSource",
    "io.confluent.connect.jdbc.JdbcSourceConnector",
];

/// The PostgresSource connector. See the [module documentation](self).
#[derive(Debug, Default, Clone, Copy)]
pub struct PostgresSourceConnector;

impl PostgresSourceConnector {
    /// The connector.
    pub fn new() -> Self {
        Self
    }
}

/// The connectors of this module for a runtime's registry: class names and constructor.
pub fn connectors() -> Vec<ConnectorPlugin> {
    vec![ConnectorPlugin::new(CLASS_NAMES.iter().copied(), || {
        Box::new(PostgresSourceConnector::new()) as Box<dyn SourceConnector>
    })]
}

impl SourceConnector for PostgresSourceConnector {
    fn config_keys(&self) -> Vec<ConfigKey> {
        let mut keys = config::keys();
        keys.extend(config::safety_keys());
        keys
    }

    /// One issue per bad key; never connects (an unreachable database fails the task instead).
    fn validate(&self, config: &Config) -> Vec<ConfigIssue> {
        SourceConfig::parse(config).err().unwrap_or_default()
    }

    /// Spreads the whitelisted tables round-robin over `min(tasks.max, tables)` tasks (in
    /// [`TASK_TABLES`]); a query runs in one task; without a whitelist `tasks.max` tasks each read
    /// their share ([`TASK_SHARE`]) of the tables they find.
    fn task_configs(&self, config: &Config, max_tasks: usize) -> Result<Vec<Config>, ConnectError> {
        let parsed = SourceConfig::parse(config).map_err(|issues| {
            invalid_config("PostgresSource", "connector configuration", &issues)
        })?;
        let tables = match parsed.source {
            Source::Query(_) => return Ok(vec![config.clone()]),
            Source::Tables(tables) => tables,
            // Each task finds the tables itself and keeps its share (see discovery).
            Source::Discover(_) => {
                let tasks = max_tasks.max(1);
                return Ok((0..tasks)
                    .map(|i| {
                        let mut task = config.clone();
                        task.insert(TASK_SHARE.to_owned(), format!("{i}/{tasks}"));
                        task
                    })
                    .collect());
            }
        };
        let tasks = max_tasks.clamp(1, tables.len());
        let mut shares = vec![Vec::new(); tasks];
        for (i, table) in tables.into_iter().enumerate() {
            shares[i % tasks].push(table);
        }
        shares
            .into_iter()
            .map(|share| {
                let json = serde_json::to_string(&share).map_err(|e| {
                    ConnectError::fatal(format!(
                        "PostgresSource: cannot encode a task's tables: {e}"
                    ))
                })?;
                let mut task = config.clone();
                task.insert(TASK_TABLES.to_owned(), json);
                Ok(task)
            })
            .collect()
    }

    fn create_task(&self) -> Box<dyn SourceTask> {
        Box::new(PostgresSourceTask::new())
    }

    /// Accepts resets (null offsets) of any partition, and offsets that fit the configured mode:
    /// `{"incrementing":N}`, `{"timestamp":ms,"timestamp_nanos":ns}` (nanos optional, within the second)
    /// or all three, integers, under a JDBC source partition. `mode=bulk` keeps no offsets and accepts
    /// only resets.
    fn alter_offsets(
        &self,
        config: &Config,
        offsets: &[(SourcePartition, Option<SourceOffset>)],
    ) -> Result<bool, ConnectError> {
        let parsed = SourceConfig::parse(config).map_err(|issues| {
            invalid_config("PostgresSource", "connector configuration", &issues)
        })?;
        for (partition, offset) in offsets {
            if let Some(offset) = offset {
                offset::validate_alter(parsed.mode, partition, offset)?;
            }
        }
        Ok(true)
    }
}
