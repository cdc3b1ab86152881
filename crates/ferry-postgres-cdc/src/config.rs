//! The connector's configuration: Debezium's keys, parsed once into [`CdcConfig`].
//!
//! Every key Debezium's PostgreSQL connector documents is known: the ones implemented here are
//! parsed, the others are listed in [`REFUSED`] and refused by name (a silently ignored Debezium
//! setting would change what the user gets without saying so).

use std::fmt;

use ferry_api::config::{Issues, int_at_least, list, optional_string, required_string, text};
use ferry_api::{Config, ConfigIssue, ConfigKey, ConfigType, Header, SourcePartition};
use regex::Regex;

use crate::tls::{SslMode, Tls};

/// `publication.autocreate.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutocreateMode {
    /// The publication must exist.
    Disabled,
    /// Created with (or extended by) the captured tables only; tables others added are kept.
    Filtered,
    /// `CREATE PUBLICATION … FOR ALL TABLES` when missing.
    AllTables,
}

/// `snapshot.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotMode {
    /// Snapshot when no offset was committed, then stream.
    Initial,
    /// Snapshot when no offset was committed, then stop streaming (the task idles).
    InitialOnly,
    /// No snapshot: stream from the slot's consistent point (`never` is Debezium's old name).
    NoData,
    /// A snapshot at every start (on a new slot), then stream.
    Always,
    /// As `initial`, and also when the committed position can no longer be resumed (the slot is
    /// missing, lost, or past the offset): a new snapshot instead of failing.
    WhenNeeded,
}

/// `decimal.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecimalMode {
    /// Connect `Decimal`, or `VariableScaleDecimal` for an unconstrained NUMERIC.
    Precise,
    /// FLOAT64.
    Double,
    /// The text.
    String,
}

/// `time.precision.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeMode {
    /// Debezium's types by column precision (`io.debezium.time.*`).
    Adaptive,
    /// As adaptive, TIME always `MicroTime`.
    AdaptiveTimeMicroseconds,
    /// Kafka Connect's Date, Time and Timestamp (milliseconds).
    Connect,
}

/// `binary.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryMode {
    /// BYTES.
    Bytes,
    /// A base64 string.
    Base64,
    /// A URL-safe base64 string.
    Base64UrlSafe,
    /// A hex string.
    Hex,
}

/// `skipped.operations`: which change kinds are not emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Skipped {
    /// `c`
    pub create: bool,
    /// `u`
    pub update: bool,
    /// `d`
    pub delete: bool,
    /// `t`
    pub truncate: bool,
}

/// A parsed configuration. `Debug` hides the password.
#[derive(Clone)]
pub struct CdcConfig {
    /// `topic.prefix`: topic prefix, schema-name prefix and the `server` of the partition.
    pub prefix: String,
    /// `database.hostname`
    pub host: String,
    /// `database.port`
    pub port: u16,
    /// `database.user`
    pub user: String,
    /// `database.password`
    pub password: String,
    /// `database.dbname`
    pub dbname: String,
    /// `database.sslmode`, `database.sslrootcert`, `database.sslcert`, `database.sslkey`
    pub tls: Tls,
    /// `slot.name`
    pub slot: String,
    /// `slot.drop.on.stop`
    pub drop_slot_on_stop: bool,
    /// `publication.name`
    pub publication: String,
    /// `publication.autocreate.mode`
    pub autocreate: AutocreateMode,
    /// `table.include.list` (anchored)
    pub table_include: Vec<Regex>,
    /// `table.exclude.list` (anchored)
    pub table_exclude: Vec<Regex>,
    /// `column.include.list` (anchored, on `schema.table.column`)
    pub column_include: Vec<Regex>,
    /// `column.exclude.list`
    pub column_exclude: Vec<Regex>,
    /// `snapshot.mode`
    pub snapshot: SnapshotMode,
    /// `tombstones.on.delete`
    pub tombstones: bool,
    /// `skipped.operations`
    pub skipped: Skipped,
    /// `decimal.handling.mode`
    pub decimal: DecimalMode,
    /// `time.precision.mode`
    pub time: TimeMode,
    /// `binary.handling.mode`
    pub binary: BinaryMode,
    /// `status.update.interval.ms`: how often the standby status (and flushed LSN) is sent.
    pub status_interval_ms: u64,
    /// `heartbeat.interval.ms`: 0 for none.
    pub heartbeat_ms: u64,
    /// `heartbeat.action.query`: SQL run on the database at each heartbeat (so a database where
    /// nothing captured is written still has changes to stream).
    pub heartbeat_query: Option<String>,
    /// `extended.headers.enabled`: Debezium's `__debezium.context.*` headers on every record.
    pub extended_headers: bool,
    /// This run's id (header `__debezium.context.runId`): a UUIDv7, new each time the
    /// configuration is parsed (a task start), as Debezium's is new each task start.
    pub run_id: String,
    /// Built once from the fields above, as every record carries them: the source partition
    /// `{"server": <topic.prefix>}`, and the `__debezium.context.*` headers (none when
    /// `extended.headers.enabled=false`).
    pub(crate) partition: SourcePartition,
    /// See [`CdcConfig::partition`].
    pub(crate) context_headers: Vec<Header>,
}

impl fmt::Debug for CdcConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CdcConfig")
            .field("prefix", &self.prefix)
            .field("server", &self.server())
            .field("user", &self.user)
            .field("password", &ferry_api::HIDDEN)
            .field("slot", &self.slot)
            .field("publication", &self.publication)
            .field("autocreate", &self.autocreate)
            .field("snapshot", &self.snapshot)
            .finish_non_exhaustive()
    }
}

impl CdcConfig {
    /// `host:port/dbname`, for messages.
    pub fn server(&self) -> String {
        format!("{}:{}/{}", self.host, self.port, self.dbname)
    }

    /// Whether `schema.table` is captured: included (or no include list) and not excluded.
    pub fn captures_table(&self, schema: &str, table: &str) -> bool {
        let id = format!("{schema}.{table}");
        if matches!(schema, "pg_catalog" | "information_schema") || schema.starts_with("pg_") {
            return false;
        }
        (self.table_include.is_empty() || self.table_include.iter().any(|r| r.is_match(&id)))
            && !self.table_exclude.iter().any(|r| r.is_match(&id))
    }

    /// Whether `schema.table.column` is part of the value.
    pub fn captures_column(&self, schema: &str, table: &str, column: &str) -> bool {
        let id = format!("{schema}.{table}.{column}");
        (self.column_include.is_empty() || self.column_include.iter().any(|r| r.is_match(&id)))
            && !self.column_exclude.iter().any(|r| r.is_match(&id))
    }

    /// Parses a connector or task configuration; one issue per bad key.
    ///
    /// # Errors
    /// Every bad or refused key.
    pub fn parse(config: &Config) -> Result<Self, Vec<ConfigIssue>> {
        let mut issues = Issues::default();
        refuse(config, &mut issues);
        let prefix = required_string(config, "topic.prefix", &mut issues);
        let host = required_string(config, "database.hostname", &mut issues);
        let port = int_at_least(config, "database.port", Some(5432), 1, &mut issues)
            .and_then(|p| u16::try_from(p).ok());
        let user = required_string(config, "database.user", &mut issues);
        let password = config.get("database.password").cloned().unwrap_or_default();
        let dbname = required_string(config, "database.dbname", &mut issues);
        let tls = tls(config, &mut issues);
        let slot =
            optional_string(config, "slot.name", &mut issues).unwrap_or_else(|| "debezium".into());
        if !valid_slot_name(&slot) {
            issues.push(
                "slot.name",
                format!("{slot:?} is not a valid replication slot name: 1 to 63 characters of a-z, 0-9 and _"),
            );
        }
        let drop_slot_on_stop = boolean(config, "slot.drop.on.stop", false, &mut issues);
        let publication = optional_string(config, "publication.name", &mut issues)
            .unwrap_or_else(|| "dbz_publication".into());
        let autocreate = choice(
            config,
            "publication.autocreate.mode",
            "all_tables",
            &[
                ("disabled", AutocreateMode::Disabled),
                ("filtered", AutocreateMode::Filtered),
                ("all_tables", AutocreateMode::AllTables),
            ],
            &[],
            &mut issues,
        );
        let table_include = regexes(config, "table.include.list", &mut issues);
        let table_exclude = regexes(config, "table.exclude.list", &mut issues);
        if !table_include.is_empty() && !table_exclude.is_empty() {
            issues.push(
                "table.exclude.list",
                "cannot be set together with table.include.list",
            );
        }
        let column_include = regexes(config, "column.include.list", &mut issues);
        let column_exclude = regexes(config, "column.exclude.list", &mut issues);
        if !column_include.is_empty() && !column_exclude.is_empty() {
            issues.push(
                "column.exclude.list",
                "cannot be set together with column.include.list",
            );
        }
        let snapshot = choice(
            config,
            "snapshot.mode",
            "initial",
            &[
                ("initial", SnapshotMode::Initial),
                ("initial_only", SnapshotMode::InitialOnly),
                ("no_data", SnapshotMode::NoData),
                // Debezium maps the deprecated `never` to `no_data`.
                ("never", SnapshotMode::NoData),
                ("always", SnapshotMode::Always),
                ("when_needed", SnapshotMode::WhenNeeded),
            ],
            &["configuration_based", "custom", "recovery"],
            &mut issues,
        );
        let tombstones = boolean(config, "tombstones.on.delete", true, &mut issues);
        let extended_headers = boolean(config, "extended.headers.enabled", true, &mut issues);
        if let Some(mode) = text(config, "interval.handling.mode")
            && !mode.eq_ignore_ascii_case("numeric")
        {
            issues.push(
                "interval.handling.mode",
                format!("{mode:?} is not implemented yet: intervals are numeric (io.debezium.time.MicroDuration)"),
            );
        }
        let skipped = skipped_operations(
            text(config, "skipped.operations").unwrap_or("t"),
            &mut issues,
        );
        let (decimal, time, binary) = value_modes(config, &mut issues);
        let heartbeat_ms = int_at_least(config, "heartbeat.interval.ms", Some(0), 0, &mut issues)
            .and_then(|v| u64::try_from(v).ok())
            .unwrap_or(0);
        let heartbeat_query = text(config, "heartbeat.action.query")
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .map(str::to_owned);
        let status_interval_ms = int_at_least(
            config,
            "status.update.interval.ms",
            Some(10_000),
            1,
            &mut issues,
        )
        .and_then(|v| u64::try_from(v).ok());
        match (
            prefix,
            host,
            port,
            user,
            dbname,
            tls,
            autocreate,
            snapshot,
            decimal,
            time,
            binary,
            status_interval_ms,
        ) {
            (
                Some(prefix),
                Some(host),
                Some(port),
                Some(user),
                Some(dbname),
                Some(tls),
                Some(autocreate),
                Some(snapshot),
                Some(decimal),
                Some(time),
                Some(binary),
                Some(status_interval_ms),
            ) if issues.is_empty() => {
                let run_id = uuid_v7();
                Ok(Self {
                    partition: crate::offset::partition(&prefix),
                    context_headers: if extended_headers {
                        crate::envelope::context_headers(&prefix, &run_id)
                    } else {
                        Vec::new()
                    },
                    prefix,
                    host,
                    port,
                    user,
                    password,
                    dbname,
                    tls,
                    slot,
                    drop_slot_on_stop,
                    publication,
                    autocreate,
                    table_include,
                    table_exclude,
                    column_include,
                    column_exclude,
                    snapshot,
                    tombstones,
                    skipped,
                    decimal,
                    time,
                    binary,
                    status_interval_ms,
                    heartbeat_ms,
                    heartbeat_query,
                    extended_headers,
                    run_id,
                })
            }
            _ => Err(issues.into_vec()),
        }
    }
}

/// A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random bits, as Debezium's run ids.
fn uuid_v7() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::time::{SystemTime, UNIX_EPOCH};
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let millis = u64::try_from(now.as_millis()).unwrap_or(u64::MAX) & 0xffff_ffff_ffff;
    // Random enough for an id that only tells runs apart: std's randomly keyed hasher.
    let random = |salt: u64| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(salt ^ u64::from(now.subsec_nanos()));
        h.write_u32(std::process::id());
        h.finish()
    };
    let (a, b) = (random(1), random(2));
    format!(
        "{:08x}-{:04x}-7{:03x}-{:04x}-{:012x}",
        millis >> 16,
        millis & 0xffff,
        a & 0xfff,
        0x8000 | ((a >> 12) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}

/// Refuses, by name, every Debezium key not implemented, and any plugin but pgoutput.
fn refuse(config: &Config, issues: &mut Issues) {
    for (key, why) in REFUSED {
        if config.contains_key(*key) {
            issues.push(
                key,
                format!(
                    "is a Debezium setting Ferry's PostgresCdcSource does not implement yet \
                     ({why}); remove it"
                ),
            );
        }
    }
    if let Some(plugin) = text(config, "plugin.name")
        && plugin != "pgoutput"
    {
        issues.push(
            "plugin.name",
            format!("{plugin:?} is not supported: only pgoutput (built into PostgreSQL 10+)"),
        );
    }
}

/// `database.sslmode`, `sslrootcert`, `sslcert`, `sslkey`; the files are read once here so a
/// bad one is a configuration issue.
fn tls(config: &Config, issues: &mut Issues) -> Option<Tls> {
    let sslmode = choice(
        config,
        "database.sslmode",
        "prefer",
        &[
            ("disable", SslMode::Disable),
            ("prefer", SslMode::Prefer),
            ("require", SslMode::Require),
            ("verify-ca", SslMode::VerifyCa),
            ("verify-full", SslMode::VerifyFull),
        ],
        &[],
        issues,
    );
    let path = |key: &str| text(config, key).map(std::path::PathBuf::from);
    let tls = sslmode.map(|mode| Tls {
        mode,
        root_cert: path("database.sslrootcert"),
        cert: path("database.sslcert"),
        key: path("database.sslkey"),
    });
    if let Some(tls) = &tls
        && let Err(message) = tls.client_config()
    {
        issues.push("database.sslmode", message);
    }
    tls
}

/// `decimal.handling.mode`, `time.precision.mode`, `binary.handling.mode`.
fn value_modes(
    config: &Config,
    issues: &mut Issues,
) -> (Option<DecimalMode>, Option<TimeMode>, Option<BinaryMode>) {
    let decimal = choice(
        config,
        "decimal.handling.mode",
        "precise",
        &[
            ("precise", DecimalMode::Precise),
            ("double", DecimalMode::Double),
            ("string", DecimalMode::String),
        ],
        &[],
        issues,
    );
    let time = choice(
        config,
        "time.precision.mode",
        "adaptive",
        &[
            ("adaptive", TimeMode::Adaptive),
            (
                "adaptive_time_microseconds",
                TimeMode::AdaptiveTimeMicroseconds,
            ),
            ("connect", TimeMode::Connect),
        ],
        &["isostring", "microseconds", "nanoseconds"],
        issues,
    );
    let binary = choice(
        config,
        "binary.handling.mode",
        "bytes",
        &[
            ("bytes", BinaryMode::Bytes),
            ("base64", BinaryMode::Base64),
            ("base64-url-safe", BinaryMode::Base64UrlSafe),
            ("hex", BinaryMode::Hex),
        ],
        &[],
        issues,
    );
    (decimal, time, binary)
}

/// One of `options` (by name), `default` when absent; a value in `later` is Debezium's but not
/// implemented yet, said so.
fn choice<T: Copy>(
    config: &Config,
    key: &str,
    default: &str,
    options: &[(&str, T)],
    later: &[&str],
    issues: &mut Issues,
) -> Option<T> {
    let value = text(config, key).unwrap_or(default);
    if let Some((_, v)) = options.iter().find(|(name, _)| *name == value) {
        return Some(*v);
    }
    let names: Vec<&str> = options.iter().map(|(name, _)| *name).collect();
    let names = names.join(", ");
    if later.contains(&value) {
        issues.push(
            key,
            format!("{value:?} is not implemented yet by PostgresCdcSource: use one of {names}"),
        );
    } else {
        issues.push(key, format!("{value:?} is not one of {names}"));
    }
    None
}

fn valid_slot_name(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

fn boolean(config: &Config, key: &str, default: bool, issues: &mut Issues) -> bool {
    match text(config, key).map(str::to_ascii_lowercase).as_deref() {
        None => default,
        Some("true") => true,
        Some("false") => false,
        Some(other) => {
            issues.push(key, format!("{other:?} is not true or false"));
            default
        }
    }
}

/// A Debezium regex list: each entry must match the whole identifier, ignoring case (Debezium
/// compiles them with `CASE_INSENSITIVE` and matches them whole).
fn regexes(config: &Config, key: &str, issues: &mut Issues) -> Vec<Regex> {
    let mut out = Vec::new();
    for entry in list(config.get(key).map(String::as_str)) {
        match Regex::new(&format!("(?i)^(?:{entry})$")) {
            Ok(r) => out.push(r),
            Err(e) => issues.push(key, format!("{entry:?} is not a regular expression: {e}")),
        }
    }
    out
}

fn skipped_operations(value: &str, issues: &mut Issues) -> Skipped {
    let mut skipped = Skipped::default();
    for op in list(Some(value)) {
        match op.as_str() {
            "none" => {}
            "c" => skipped.create = true,
            "u" => skipped.update = true,
            "d" => skipped.delete = true,
            "t" => skipped.truncate = true,
            other => issues.push(
                "skipped.operations",
                format!("{other:?} is not one of c, u, d, t, none"),
            ),
        }
    }
    skipped
}

/// Debezium PostgreSQL keys Ferry knows but does not implement yet, with why; refused by name.
pub const REFUSED: &[(&str, &str)] = &[
    (
        "snapshot.select.statement.overrides",
        "snapshot query overrides",
    ),
    ("snapshot.include.collection.list", "partial snapshots"),
    (
        "snapshot.locking.mode",
        "snapshot locks; the exported snapshot needs none",
    ),
    (
        "snapshot.fetch.size",
        "chunked snapshots are a later version",
    ),
    ("snapshot.max.threads", "parallel snapshots"),
    ("snapshot.delay.ms", "delayed snapshots"),
    ("incremental.snapshot.chunk.size", "incremental snapshots"),
    ("signal.data.collection", "signals"),
    ("signal.enabled.channels", "signals"),
    ("schema.include.list", "use table.include.list"),
    ("schema.exclude.list", "use table.exclude.list"),
    ("message.key.columns", "custom keys"),
    ("message.prefix.include.list", "logical decoding messages"),
    ("message.prefix.exclude.list", "logical decoding messages"),
    ("column.mask.hash", "column masking"),
    ("column.truncate.to.length.chars", "column truncation"),
    ("column.propagate.source.type", "source type parameters"),
    ("datatype.propagate.source.type", "source type parameters"),
    ("hstore.handling.mode", "hstore columns"),
    ("include.unknown.datatypes", "unknown data types"),
    ("provide.transaction.metadata", "transaction metadata"),
    ("heartbeat.topics.prefix", "heartbeats"),
    ("xmin.fetch.interval.ms", "source.xmin"),
    ("slot.stream.params", "extra pgoutput parameters"),
    ("slot.failover", "failover slots"),
    ("publish.via.partition.root", "partitioned tables"),
    (
        "replica.identity.autoset.values",
        "REPLICA IDENTITY changes",
    ),
    ("flush.lsn.source", "Ferry flushes only committed offsets"),
    (
        "event.processing.failure.handling.mode",
        "tolerating bad events",
    ),
    ("converters", "custom converters"),
    ("unavailable.value.placeholder", "TOAST placeholders"),
    ("schema.name.adjustment.mode", "schema name adjustment"),
    ("field.name.adjustment.mode", "field name adjustment"),
    ("database.initial.statements", "initial statements"),
    ("database.tcpKeepAlive", "TCP keepalive settings"),
    ("database.sslpassword", "TLS"),
    ("database.sslfactory", "TLS"),
    ("topic.naming.strategy", "custom topic names"),
    ("topic.delimiter", "custom topic names"),
    ("topic.heartbeat.prefix", "heartbeats"),
    ("topic.transaction", "transaction metadata"),
    ("custom.metric.tags", "metrics"),
    (
        "errors.max.retries",
        "retries of a failed stream; the task fails and resumes on restart",
    ),
    ("max.batch.size", "the runtime batches"),
    ("max.queue.size", "the runtime batches"),
    ("poll.interval.ms", "the runtime polls"),
];

/// The keys for `config_keys`: every implemented key, and the refused ones (so the framework lets
/// them through to `validate`, which names them).
pub fn keys() -> Vec<ConfigKey> {
    let mut keys = vec![
        ConfigKey::required("topic.prefix", "prefix of topics and schema names, and the `server` of the offset partition"),
        ConfigKey::optional("plugin.name", Some("pgoutput"), "the logical decoding plugin: pgoutput only"),
        ConfigKey::required("database.hostname", "the PostgreSQL server"),
        ConfigKey::optional("database.port", Some("5432"), "its port").of_type(ConfigType::Int),
        ConfigKey::required("database.user", "a user with REPLICATION (and CREATE on the database for publication.autocreate.mode)"),
        ConfigKey::optional("database.password", None, "its password").secret(),
        ConfigKey::required("database.dbname", "the database to capture"),
        ConfigKey::optional(
            "database.sslmode",
            Some("prefer"),
            "disable | prefer | require | verify-ca | verify-full, as libpq",
        ),
        ConfigKey::optional(
            "database.sslrootcert",
            None,
            "PEM file of the CA certificates (verify-ca, verify-full)",
        ),
        ConfigKey::optional("database.sslcert", None, "PEM file of the client certificate"),
        ConfigKey::optional("database.sslkey", None, "PEM file of the client key"),
        ConfigKey::optional("slot.name", Some("debezium"), "the logical replication slot, created when missing"),
        ConfigKey::optional("slot.drop.on.stop", Some("false"), "drop the slot when the task stops (tests and demos only: changes made while stopped are lost)").of_type(ConfigType::Boolean),
        ConfigKey::optional("publication.name", Some("dbz_publication"), "the publication streamed"),
        ConfigKey::optional("publication.autocreate.mode", Some("all_tables"), "disabled | filtered | all_tables"),
        ConfigKey::optional("table.include.list", None, "regular expressions matching schema.table to capture").of_type(ConfigType::List),
        ConfigKey::optional("table.exclude.list", None, "regular expressions matching schema.table not to capture").of_type(ConfigType::List),
        ConfigKey::optional("column.include.list", None, "regular expressions matching schema.table.column to include").of_type(ConfigType::List),
        ConfigKey::optional("column.exclude.list", None, "regular expressions matching schema.table.column to leave out").of_type(ConfigType::List),
        ConfigKey::optional("snapshot.mode", Some("initial"), "initial | initial_only | no_data (never) | always | when_needed"),
        ConfigKey::optional("tombstones.on.delete", Some("true"), "a tombstone after each delete").of_type(ConfigType::Boolean),
        ConfigKey::optional("interval.handling.mode", Some("numeric"), "numeric (io.debezium.time.MicroDuration, microseconds, a month being 30.4375 days); string is not implemented yet"),
        ConfigKey::optional("extended.headers.enabled", Some("true"), "Debezium's context headers on every record: __debezium.context.connectorLogicalName (topic.prefix), taskId, connectorName (postgresql), runId (new each task start)").of_type(ConfigType::Boolean),
        ConfigKey::optional("skipped.operations", Some("t"), "operations not emitted: c, u, d, t or none").of_type(ConfigType::List),
        ConfigKey::optional("decimal.handling.mode", Some("precise"), "precise | double | string"),
        ConfigKey::optional("time.precision.mode", Some("adaptive"), "adaptive | adaptive_time_microseconds | connect"),
        ConfigKey::optional("binary.handling.mode", Some("bytes"), "bytes | base64 | base64-url-safe | hex"),
        ConfigKey::optional("heartbeat.interval.ms", Some("0"), "how often an idle stream emits a heartbeat record (topic __debezium-heartbeat.<prefix>) carrying the server's position, so the slot advances while captured tables are idle; 0: never").of_type(ConfigType::Int),
        ConfigKey::optional("heartbeat.action.query", None, "SQL run on the database at each heartbeat (heartbeat.interval.ms), e.g. an upsert into a captured heartbeat table, so the stream has changes to confirm on a database where nothing captured is written; runs only when heartbeat.interval.ms > 0 (as Debezium); a failure is logged and capture goes on"),
        ConfigKey::optional("status.update.interval.ms", Some("10000"), "how often the flushed (committed) LSN is sent to the server").of_type(ConfigType::Int),
    ];
    keys.extend(REFUSED.iter().map(|(key, _)| {
        ConfigKey::optional(key, None, "Debezium key not implemented by Ferry: refused")
    }));
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(extra: &[(&str, &str)]) -> Config {
        let mut config: Config = [
            ("topic.prefix", "srv"),
            ("database.hostname", "db"),
            ("database.user", "u"),
            ("database.dbname", "d"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        for (k, v) in extra {
            config.insert((*k).to_owned(), (*v).to_owned());
        }
        config
    }

    fn issues(extra: &[(&str, &str)]) -> Vec<ConfigIssue> {
        CdcConfig::parse(&base(extra)).err().unwrap_or_default()
    }

    #[test]
    fn debeziums_defaults_apply() {
        let Ok(config) = CdcConfig::parse(&base(&[])) else {
            panic!("the minimal configuration is valid")
        };
        assert_eq!(
            (config.slot.as_str(), config.publication.as_str()),
            ("debezium", "dbz_publication")
        );
        assert_eq!(config.autocreate, AutocreateMode::AllTables);
        assert_eq!(config.snapshot, SnapshotMode::Initial);
        assert!(config.tombstones && config.skipped.truncate && !config.skipped.delete);
        assert!(format!("{config:?}").contains("[hidden]"));
    }

    #[test]
    fn a_debezium_key_not_implemented_is_refused_by_name() {
        let found = issues(&[("provide.transaction.metadata", "true")]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].key, "provide.transaction.metadata");
        assert!(
            found[0].message.contains("does not implement"),
            "{}",
            found[0].message
        );
        assert_eq!(
            issues(&[("plugin.name", "decoderbufs")])[0].key,
            "plugin.name"
        );
        assert_eq!(
            issues(&[("snapshot.mode", "custom")])[0].key,
            "snapshot.mode"
        );
        assert_eq!(
            issues(&[("heartbeat.interval.ms", "-1")])[0].key,
            "heartbeat.interval.ms"
        );
    }

    #[test]
    fn never_is_no_data_and_lists_are_anchored() {
        let Ok(config) = CdcConfig::parse(&base(&[
            ("snapshot.mode", "never"),
            ("table.include.list", "public\\.orders"),
            ("column.exclude.list", "public\\.orders\\.secret"),
        ])) else {
            panic!("valid")
        };
        assert_eq!(config.snapshot, SnapshotMode::NoData);
        assert!(config.captures_table("public", "orders"));
        assert!(!config.captures_table("public", "orders_archive"));
        assert!(
            config.captures_table("Public", "ORDERS"),
            "case-insensitive, as Debezium"
        );
        assert!(!config.captures_column("public", "orders", "secret"));
        assert!(config.captures_column("public", "orders", "secret2"));
    }
}
