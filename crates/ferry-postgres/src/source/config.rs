//! The PostgresSource configuration (Kafka Connect JDBC source names), parsed once for `validate`,
//! `task_configs` and the task's `start`.

use std::fmt;
use std::time::Duration;

use ferry_api::config::{Issues, int_at_least, list, text};
use ferry_api::{Config, ConfigIssue, ConfigKey, ConfigType};

use super::options::{Options, TABLE_BLACKLIST};
use super::url::{ConnectionSpec, parse_connection};

pub(crate) const CONNECTION_URL: &str = "connection.url";
pub(crate) const CONNECTION_USER: &str = "connection.user";
pub(crate) const CONNECTION_PASSWORD: &str = "connection.password";
pub(crate) const MODE: &str = "mode";
pub(crate) const INCREMENTING_COLUMN: &str = "incrementing.column.name";
pub(crate) const TIMESTAMP_COLUMN: &str = "timestamp.column.name";
pub(crate) const TABLE_WHITELIST: &str = "table.whitelist";
pub(crate) const QUERY: &str = "query";
pub(crate) const TOPIC_PREFIX: &str = "topic.prefix";
pub(crate) const POLL_INTERVAL_MS: &str = "poll.interval.ms";
pub(crate) const BATCH_MAX_ROWS: &str = "batch.max.rows";
pub(crate) const TIMESTAMP_INITIAL: &str = "timestamp.initial";
pub(crate) const TIMESTAMP_DELAY_MS: &str = "timestamp.delay.interval.ms";
/// The task-config key holding a task's share of the tables: a JSON array of `[schema, table]`.
pub const TASK_TABLES: &str = "task.tables";
/// The task-config key holding a task's share of the tables found in the catalog (no
/// `table.whitelist`): `index/count`.
pub const TASK_SHARE: &str = "task.share";

const DEFAULT_POLL_INTERVAL_MS: i64 = 5000;
const DEFAULT_BATCH_MAX_ROWS: i64 = 100;
/// `timestamp.initial=-1`: start at the database's current time.
pub(crate) const TIMESTAMP_INITIAL_CURRENT: i64 = -1;

pub(crate) fn keys() -> Vec<ConfigKey> {
    let mut keys = vec![
        // The URL may carry `?password=…`: messages, logs and REST bodies show it redacted.
        ConfigKey::required(
            CONNECTION_URL,
            "The database: jdbc:postgresql://host:port/database (parameters user, password, connectTimeout, \
             ApplicationName, currentSchema, options, and TLS's sslmode=disable|allow|prefer|require|verify-ca|verify-full, \
             sslrootcert, sslcert, sslkey) or postgresql://host:port/database.",
        )
        .embeds_secret(crate::JDBC_URL_REDACTOR),
        ConfigKey::optional(CONNECTION_USER, None, "The database user."),
        ConfigKey::optional(
            CONNECTION_PASSWORD,
            None,
            "The database user's password (never logged).",
        )
        .secret(),
        ConfigKey::required(
            MODE,
            "How rows are detected: bulk (the whole table every poll.interval.ms, no offsets), incrementing \
             (new rows by a strictly increasing column), timestamp (new and updated rows by a timestamp column) or \
             timestamp+incrementing (both: new and updated rows, with a unique position for each).",
        ),
        ConfigKey::optional(
            INCREMENTING_COLUMN,
            Some(""),
            "The strictly increasing integer column (modes incrementing and timestamp+incrementing). Empty: \
             each table's first serial or identity column, as the JDBC source's auto-increment detection.",
        ),
        ConfigKey::optional(
            TIMESTAMP_COLUMN,
            Some(""),
            "The timestamp or timestamptz column (modes timestamp and timestamp+incrementing); a comma-separated \
             list uses the first non-null one (COALESCE).",
        ).of_type(ConfigType::List),
        ConfigKey::optional(
            TABLE_WHITELIST,
            Some(""),
            "The tables to read, comma-separated: schema.table or table (schema public); those of table.types \
             that exist, now or later. Unset: every table (see table.blacklist, schema.pattern). Not together \
             with query or table.blacklist.",
        ).of_type(ConfigType::List),
        ConfigKey::optional(
            QUERY,
            Some(""),
            "A SELECT to read instead of tables; the mode's WHERE and ORDER BY are applied around it. Its \
             records go to the topic topic.prefix, its offsets to the partition {\"query\":\"query\"}.",
        ),
        ConfigKey::required(
            TOPIC_PREFIX,
            "Topic of a table: this prefix plus the table's name; with query: the topic itself.",
        ),
        ConfigKey::optional(
            POLL_INTERVAL_MS,
            Some("5000"),
            "How long to wait after reading a table to the end before querying it again, in ms.",
        ).of_type(ConfigType::Int),
        ConfigKey::optional(
            BATCH_MAX_ROWS,
            Some("100"),
            "The most rows one poll returns (rows are fetched this many at a time).",
        ).of_type(ConfigType::Int),
        ConfigKey::optional(
            TIMESTAMP_INITIAL,
            None,
            "Where a table without a stored offset starts in the timestamp modes, in ms since the Unix epoch; \
             -1: the database's current time. Unset: from the beginning.",
        ).of_type(ConfigType::Long),
        ConfigKey::optional(
            TIMESTAMP_DELAY_MS,
            Some("0"),
            "The timestamp modes read only rows whose timestamp is older than the database's time minus this \
             delay, in ms, so that transactions still open at that time can commit first. Ferry also waits for \
             open transactions by itself (ferry.late.commit.max.wait.ms); this delay matters once it stops waiting.",
        ).of_type(ConfigType::Long),
    ];
    keys.extend(super::options::keys());
    keys
}

/// How rows are detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Bulk,
    Incrementing,
    Timestamp,
    TimestampIncrementing,
}

impl Mode {
    pub(crate) fn uses_incrementing(self) -> bool {
        matches!(self, Mode::Incrementing | Mode::TimestampIncrementing)
    }

    pub(crate) fn uses_timestamp(self) -> bool {
        matches!(self, Mode::Timestamp | Mode::TimestampIncrementing)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Bulk => "bulk",
            Mode::Incrementing => "incrementing",
            Mode::Timestamp => "timestamp",
            Mode::TimestampIncrementing => "timestamp+incrementing",
        }
    }
}

/// A table: schema and name, exactly as in the catalog (case-sensitive; quoted in SQL).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct TableId {
    pub(crate) schema: String,
    pub(crate) table: String,
}

/// `schema.table`, unquoted: the JDBC source's `table` partition value.
impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.schema, self.table)
    }
}

/// What is read: tables or one query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    Tables(Vec<TableId>),
    Query(String),
    /// No whitelist: the catalog's tables (by table.types, schema.pattern, table.blacklist), this
    /// task's share (index, count) of them.
    Discover((usize, usize)),
}

/// A parsed connector (or task) configuration.
#[derive(Debug, Clone)]
pub(crate) struct SourceConfig {
    pub(crate) connection: ConnectionSpec,
    pub(crate) mode: Mode,
    pub(crate) incrementing_column: Option<String>,
    pub(crate) timestamp_columns: Vec<String>,
    pub(crate) source: Source,
    pub(crate) topic_prefix: String,
    pub(crate) poll_interval: Duration,
    pub(crate) batch_max_rows: usize,
    pub(crate) timestamp_initial: Option<i64>,
    pub(crate) timestamp_delay: Duration,
    /// table.blacklist, table.types, numeric.mapping, … (see [`Options`]).
    pub(crate) options: Options,
    pub(crate) safety: Safety,
}

impl SourceConfig {
    /// Parses a connector configuration; one issue per bad key. Does not touch the network.
    pub(crate) fn parse(config: &Config) -> Result<Self, Vec<ConfigIssue>> {
        let mut issues = Issues::default();
        let connection = parse_connection_key(config, &mut issues);
        let mode = parse_mode(config, &mut issues);
        let incrementing_column = text(config, INCREMENTING_COLUMN).map(str::to_owned);
        let timestamp_columns = list(text(config, TIMESTAMP_COLUMN));
        if let Some(mode) = mode {
            check_mode_columns(
                config,
                mode,
                incrementing_column.as_deref(),
                &timestamp_columns,
                &mut issues,
            );
        }
        let source = parse_source(config, &mut issues);
        let topic_prefix = parse_topic_prefix(config, source.as_ref(), &mut issues);
        let poll = int_at_least(
            config,
            POLL_INTERVAL_MS,
            Some(DEFAULT_POLL_INTERVAL_MS),
            1,
            &mut issues,
        );
        let batch = int_at_least(
            config,
            BATCH_MAX_ROWS,
            Some(DEFAULT_BATCH_MAX_ROWS),
            1,
            &mut issues,
        );
        let initial = int_at_least(config, TIMESTAMP_INITIAL, None, i64::MIN, &mut issues);
        let options = parse_options(config, &mut issues);
        check_blacklist(config, source.as_ref(), &mut issues);
        let delay = int_at_least(config, TIMESTAMP_DELAY_MS, Some(0), 0, &mut issues);
        let safety = Safety::parse(config, &mut issues);
        if !issues.is_empty() {
            return Err(issues.into_vec());
        }
        match (
            connection,
            mode,
            source,
            topic_prefix,
            poll,
            batch,
            delay,
            options,
        ) {
            (
                Some(connection),
                Some(mode),
                Some(source),
                Some(topic_prefix),
                Some(poll),
                Some(batch),
                Some(delay),
                Some(options),
            ) => Ok(Self {
                connection: {
                    let mut connection = connection;
                    options.isolation.apply(&mut connection);
                    connection
                },
                mode,
                incrementing_column: incrementing_column.filter(|_| mode.uses_incrementing()),
                timestamp_columns: if mode.uses_timestamp() {
                    timestamp_columns
                } else {
                    Vec::new()
                },
                source,
                topic_prefix,
                poll_interval: Duration::from_millis(u64::try_from(poll).unwrap_or(1)),
                batch_max_rows: usize::try_from(batch).unwrap_or(usize::MAX),
                timestamp_initial: initial,
                timestamp_delay: Duration::from_millis(u64::try_from(delay).unwrap_or(0)),
                options,
                safety,
            }),
            _ => Err(issues.into_vec()),
        }
    }

    /// Parses a task configuration: the connector's, with the task's share of the tables in
    /// [`TASK_TABLES`] (absent: every table of `table.whitelist`).
    pub(crate) fn parse_task(config: &Config) -> Result<Self, Vec<ConfigIssue>> {
        let mut parsed = Self::parse(config)?;
        if let (Some(json), Source::Tables(_)) = (config.get(TASK_TABLES), &parsed.source) {
            let tables: Vec<TableId> = serde_json::from_str(json).map_err(|e| {
                vec![ConfigIssue {
                    key: TASK_TABLES.to_owned(),
                    message: format!("is not the JSON list of tables task_configs makes: {e}"),
                }]
            })?;
            parsed.source = Source::Tables(tables);
        }
        if let (Some(share), Source::Discover(_)) = (config.get(TASK_SHARE), &parsed.source) {
            let parsed_share = share
                .split_once('/')
                .and_then(|(i, n)| Some((i.parse::<usize>().ok()?, n.parse::<usize>().ok()?)))
                .filter(|(i, n)| i < n);
            let Some(share) = parsed_share else {
                return Err(vec![ConfigIssue {
                    key: TASK_SHARE.to_owned(),
                    message: format!("{share:?} is not the index/count task_configs makes"),
                }]);
            };
            parsed.source = Source::Discover(share);
        }
        Ok(parsed)
    }
}

/// Parses `connection.url` (with `connection.user` and `connection.password`) into a connection.
fn parse_connection_key(config: &Config, issues: &mut Issues) -> Option<ConnectionSpec> {
    match text(config, CONNECTION_URL) {
        None => {
            issues.push(
                CONNECTION_URL,
                "is required, e.g. jdbc:postgresql://localhost:5432/mydb",
            );
            None
        }
        Some(url) => match parse_connection(
            url,
            text(config, CONNECTION_USER),
            config.get(CONNECTION_PASSWORD).map(String::as_str),
        ) {
            Ok(spec) => Some(spec),
            Err(e) => {
                issues.push(CONNECTION_URL, e.to_string());
                None
            }
        },
    }
}

/// Parses the required `mode`.
fn parse_mode(config: &Config, issues: &mut Issues) -> Option<Mode> {
    match text(config, MODE) {
        None => {
            issues.push(
                MODE,
                "is required: bulk, incrementing, timestamp or timestamp+incrementing",
            );
            None
        }
        Some("bulk") => Some(Mode::Bulk),
        Some("incrementing") => Some(Mode::Incrementing),
        Some("timestamp") => Some(Mode::Timestamp),
        Some("timestamp+incrementing") => Some(Mode::TimestampIncrementing),
        Some(other) => {
            issues.push(
                MODE,
                format!("{other:?} is not a mode: use bulk, incrementing, timestamp or timestamp+incrementing"),
            );
            None
        }
    }
}

/// Checks that the columns `mode` reads are named where they cannot be found.
fn check_mode_columns(
    config: &Config,
    mode: Mode,
    incrementing_column: Option<&str>,
    timestamp_columns: &[String],
    issues: &mut Issues,
) {
    // Tables without one use their serial/identity column (found by the task), as the JDBC
    // source's findDefaultAutoIncrementingColumn; a query has no table to look at.
    if mode.uses_incrementing() && incrementing_column.is_none() && text(config, QUERY).is_some() {
        issues.push(
            INCREMENTING_COLUMN,
            format!(
                "is required with mode={} and query: name the strictly increasing integer column",
                mode.name()
            ),
        );
    }
    if mode.uses_timestamp() && timestamp_columns.is_empty() {
        issues.push(
            TIMESTAMP_COLUMN,
            format!(
                "is required with mode={}: name the timestamp column",
                mode.name()
            ),
        );
    }
}

/// Parses what is read: `table.whitelist`, `query` (not both), or neither (discovery).
fn parse_source(config: &Config, issues: &mut Issues) -> Option<Source> {
    let tables = text(config, TABLE_WHITELIST);
    let query = text(config, QUERY);
    match (tables, query) {
        (Some(_), Some(_)) => {
            issues.push(QUERY, "set either table.whitelist or query, not both");
            None
        }
        (None, None) => Some(Source::Discover((0, 1))),
        (Some(tables), None) => match parse_tables(tables) {
            Ok(t) => Some(Source::Tables(t)),
            Err(e) => {
                issues.push(TABLE_WHITELIST, e.to_string());
                None
            }
        },
        (None, Some(query)) => {
            let query = query.trim_end_matches(';').trim();
            Some(Source::Query(query.to_owned()))
        }
    }
}

/// Parses the required `topic.prefix`, which a query needs non-empty.
fn parse_topic_prefix(
    config: &Config,
    source: Option<&Source>,
    issues: &mut Issues,
) -> Option<String> {
    match config.get(TOPIC_PREFIX) {
        None => {
            issues.push(
                TOPIC_PREFIX,
                "is required: the topic of a table is this prefix plus its name",
            );
            None
        }
        Some(p) if p.trim().is_empty() && matches!(source, Some(Source::Query(_))) => {
            issues.push(
                TOPIC_PREFIX,
                "must not be empty with query: it is the topic of the query's records",
            );
            None
        }
        Some(p) => Some(p.trim().to_owned()),
    }
}

/// Parses the keys of [`Options`] (table.blacklist, table.types, numeric.mapping, …).
fn parse_options(config: &Config, issues: &mut Issues) -> Option<Options> {
    match Options::parse(config, split_identifier) {
        Ok(options) => Some(options),
        Err(found) => {
            issues.extend(found);
            None
        }
    }
}

/// Refuses `table.blacklist` beside `table.whitelist` or `query`.
fn check_blacklist(config: &Config, source: Option<&Source>, issues: &mut Issues) {
    if text(config, TABLE_BLACKLIST).is_some() {
        match source {
            Some(Source::Tables(_)) => issues.push(
                TABLE_BLACKLIST,
                "set table.whitelist or table.blacklist, not both (as Kafka Connect's JDBC source)",
            ),
            Some(Source::Query(_)) => {
                issues.push(TABLE_BLACKLIST, "set query or table.blacklist, not both")
            }
            _ => {}
        }
    }
}

/// A `table.whitelist` that does not list tables.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TableListError {
    #[error(transparent)]
    Name(#[from] NameError),
    /// An entry of more than two parts.
    #[error(
        "{0:?} is not a table name: use schema.table or table (a database name cannot be given \
         here; it is part of connection.url)"
    )]
    NotTableName(String),
    #[error("lists the table {0} twice")]
    Twice(TableId),
    #[error("names no table")]
    Empty,
}

/// A dotted, possibly double-quoted name that does not split into identifiers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NameError {
    #[error("{0:?} has an empty name part")]
    EmptyPart(String),
    #[error("{0:?} has an unclosed double quote")]
    UnclosedQuote(String),
}

/// Parses `table.whitelist`: `schema.table` or `table` (schema `public`); either part may be
/// double-quoted (`"My Schema"."Orders"`), quotes inside doubled.
pub(crate) fn parse_tables(text: &str) -> Result<Vec<TableId>, TableListError> {
    let mut tables = Vec::new();
    for entry in list(Some(text)) {
        let parts = split_identifier(&entry)?;
        let table = match parts.as_slice() {
            [table] => TableId {
                schema: "public".to_owned(),
                table: table.clone(),
            },
            [schema, table] => TableId {
                schema: schema.clone(),
                table: table.clone(),
            },
            _ => {
                return Err(TableListError::NotTableName(entry));
            }
        };
        if tables.contains(&table) {
            return Err(TableListError::Twice(table));
        }
        tables.push(table);
    }
    if tables.is_empty() {
        return Err(TableListError::Empty);
    }
    Ok(tables)
}

/// Splits `a.b` into its identifiers, honouring double quotes.
fn split_identifier(text: &str) -> Result<Vec<String>, NameError> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut was_quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                current.push('"');
            }
            ('"', true) => quoted = false,
            ('"', false) if current.is_empty() => {
                quoted = true;
                was_quoted = true;
            }
            ('.', false) => {
                if current.is_empty() && !was_quoted {
                    return Err(NameError::EmptyPart(text.to_owned()));
                }
                parts.push(std::mem::take(&mut current));
                was_quoted = false;
            }
            (c, _) => current.push(c),
        }
    }
    if quoted {
        return Err(NameError::UnclosedQuote(text.to_owned()));
    }
    if current.is_empty() && !was_quoted {
        return Err(NameError::EmptyPart(text.to_owned()));
    }
    parts.push(current);
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_and_the_url_declare_their_secrets() {
        let keys = keys();
        let key = |name: &str| keys.iter().find(|k| k.name == name).cloned();
        let password = key(CONNECTION_PASSWORD).expect("connection.password is declared");
        assert_eq!(password.shown("s3cret"), ferry_api::HIDDEN);
        let url = key(CONNECTION_URL).expect("connection.url is declared");
        let shown = url.shown("jdbc:postgresql://db:5432/app?user=app&password=s3cret");
        assert!(
            !shown.contains("s3cret") && shown.contains("db:5432/app"),
            "{shown}"
        );
        let user = key(CONNECTION_USER).expect("connection.user is declared");
        assert_eq!(user.shown("app"), "app");
    }

    #[test]
    fn table_names() {
        assert_eq!(
            parse_tables("orders, sales.items ,\"My Schema\".\"Odd\"\"Name\""),
            Ok(vec![
                TableId {
                    schema: "public".into(),
                    table: "orders".into()
                },
                TableId {
                    schema: "sales".into(),
                    table: "items".into()
                },
                TableId {
                    schema: "My Schema".into(),
                    table: "Odd\"Name".into()
                },
            ])
        );
        assert!(parse_tables("a.b.c").is_err());
        assert!(parse_tables("a..b").is_err());
        assert!(parse_tables("t, public.t").is_err());
        assert!(parse_tables("\"open").is_err());
        assert!(parse_tables(" , ").is_err());
    }
}

// ---- Correctness keys: nullable cursor columns, time zone, retries, late commits. ----

pub(crate) const VALIDATE_NON_NULL: &str = "validate.non.null";
pub(crate) const DB_TIMEZONE: &str = "db.timezone";
pub(crate) const CONNECTION_ATTEMPTS: &str = "connection.attempts";
pub(crate) const CONNECTION_BACKOFF_MS: &str = "connection.backoff.ms";
pub(crate) const LATE_COMMIT_MAX_WAIT_MS: &str = "ferry.late.commit.max.wait.ms";

/// The keys of [`Safety`].
pub(crate) fn safety_keys() -> Vec<ConfigKey> {
    vec![
        ConfigKey::optional(
            VALIDATE_NON_NULL,
            Some("true"),
            "Refuse at start a table whose incrementing column is nullable, or whose timestamp columns are \
             all nullable (a row with NULL there would never be read). false: start anyway; such rows are \
             not read (timestamp modes) or fail the task (a NULL incrementing value).",
        ).of_type(ConfigType::Boolean),
        ConfigKey::optional(
            DB_TIMEZONE,
            Some("UTC"),
            "The time zone of `timestamp without time zone` columns (an IANA name the database knows, e.g. \
             Europe/Paris), used in the query's bounds and to turn their values into the offsets' instants.",
        ),
        ConfigKey::optional(
            CONNECTION_ATTEMPTS,
            Some("3"),
            "How many times a connection is tried (at start, and after a transient failure while reading) \
             before the task fails.",
        ).of_type(ConfigType::Int),
        ConfigKey::optional(
            CONNECTION_BACKOFF_MS,
            Some("10000"),
            "How long to wait between connection attempts, in ms.",
        ).of_type(ConfigType::Long),
        ConfigKey::optional(
            LATE_COMMIT_MAX_WAIT_MS,
            Some("300000"),
            "Ferry only (not a Kafka Connect key). The source never moves past a position that a \
             transaction still open in the database could yet write below; a transaction open longer than \
             this (ms) is no longer waited for (WARN), and rows it commits below the position are skipped, as \
             Kafka Connect would. 0: never wait (Kafka Connect's behaviour).",
        ).of_type(ConfigType::Long),
    ]
}

/// Kafka Connect's `validate.non.null`, `db.timezone`, `connection.attempts`,
/// `connection.backoff.ms`, and Ferry's late-commit bound.
#[derive(Debug, Clone)]
pub(crate) struct Safety {
    pub(crate) validate_non_null: bool,
    /// An IANA zone name; checked against the database at start.
    pub(crate) db_timezone: String,
    pub(crate) connection_attempts: u32,
    pub(crate) connection_backoff: Duration,
    /// `None`: the late-commit guard is off.
    pub(crate) late_commit_max_wait: Option<Duration>,
}

impl Safety {
    fn parse(config: &Config, issues: &mut Issues) -> Safety {
        let validate_non_null = match text(config, VALIDATE_NON_NULL).map(str::to_ascii_lowercase) {
            None => true,
            Some(v) if v == "true" => true,
            Some(v) if v == "false" => false,
            Some(v) => {
                issues.push(
                    VALIDATE_NON_NULL,
                    format!("{v:?} is not a boolean: use true or false"),
                );
                true
            }
        };
        let db_timezone = text(config, DB_TIMEZONE).unwrap_or("UTC").to_owned();
        let attempts = int_at_least(config, CONNECTION_ATTEMPTS, Some(3), 1, issues).unwrap_or(3);
        let backoff =
            int_at_least(config, CONNECTION_BACKOFF_MS, Some(10_000), 0, issues).unwrap_or(0);
        let wait =
            int_at_least(config, LATE_COMMIT_MAX_WAIT_MS, Some(300_000), 0, issues).unwrap_or(0);
        Safety {
            validate_non_null,
            db_timezone,
            connection_attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
            connection_backoff: Duration::from_millis(u64::try_from(backoff).unwrap_or(0)),
            late_commit_max_wait: (wait > 0)
                .then(|| Duration::from_millis(u64::try_from(wait).unwrap_or(u64::MAX))),
        }
    }
}
