//! The JDBC source keys that choose which tables are read and how values are written: `table.blacklist`,
//! `table.types`, `schema.pattern`, `catalog.pattern`, `table.poll.interval.ms`, `numeric.mapping`
//! (and its deprecated `numeric.precision.mapping`), `timestamp.granularity`, `query.suffix`,
//! `transaction.isolation.mode` and `dialect.name`, with Kafka Connect's JDBC source defaults.

use std::time::Duration;

use ferry_api::config::text;
use ferry_api::{Config, ConfigIssue, ConfigKey, ConfigType};

use super::config::NameError;
use super::decode::ValueMapping;
use super::discovery::TableType;
use super::logical::Granularity;
use super::numeric::NumericMapping;
use super::url::ConnectionSpec;

pub(crate) const TABLE_BLACKLIST: &str = "table.blacklist";
pub(crate) const TABLE_TYPES: &str = "table.types";
pub(crate) const SCHEMA_PATTERN: &str = "schema.pattern";
pub(crate) const CATALOG_PATTERN: &str = "catalog.pattern";
pub(crate) const TABLE_POLL_INTERVAL_MS: &str = "table.poll.interval.ms";
pub(crate) const NUMERIC_MAPPING: &str = "numeric.mapping";
pub(crate) const NUMERIC_PRECISION_MAPPING: &str = "numeric.precision.mapping";
pub(crate) const TIMESTAMP_GRANULARITY: &str = "timestamp.granularity";
pub(crate) const QUERY_SUFFIX: &str = "query.suffix";
pub(crate) const TRANSACTION_ISOLATION_MODE: &str = "transaction.isolation.mode";
pub(crate) const DIALECT_NAME: &str = "dialect.name";
pub(crate) const QUOTE_SQL_IDENTIFIERS: &str = "quote.sql.identifiers";

const DEFAULT_TABLE_POLL_INTERVAL_MS: u64 = 60_000;

pub(crate) fn keys() -> Vec<ConfigKey> {
    vec![
        ConfigKey::optional(
            TABLE_BLACKLIST,
            Some(""),
            "Tables not to read, comma-separated: schema.table, or table (in any schema). Every other table of \
             table.types matching schema.pattern is read. Not together with table.whitelist.",
        ).of_type(ConfigType::List),
        ConfigKey::optional(
            TABLE_TYPES,
            Some("TABLE"),
            "The kinds of relation read, comma-separated: TABLE, VIEW, MATERIALIZED VIEW, FOREIGN TABLE, \
             PARTITIONED TABLE, SYSTEM TABLE, SYSTEM VIEW (PostgreSQL's JDBC driver's names).",
        ).of_type(ConfigType::List),
        ConfigKey::optional(
            SCHEMA_PATTERN,
            None,
            "Only tables whose schema matches this LIKE pattern (% and _); unset or empty: every schema.",
        ),
        ConfigKey::optional(
            CATALOG_PATTERN,
            None,
            "Accepted for compatibility; PostgreSQL's JDBC driver ignores it (the database is the one of \
             connection.url), and so does Ferry.",
        ),
        ConfigKey::optional(
            TABLE_POLL_INTERVAL_MS,
            Some("60000"),
            "How often a task looks for tables that were created or dropped, in ms.",
        ).of_type(ConfigType::Long),
        ConfigKey::optional(
            NUMERIC_MAPPING,
            None,
            "How numeric columns are written: none (Kafka Connect Decimal), precision_only (integers when the \
             scale is 0), best_fit (integers or double by precision and scale), best_fit_eager_double. Unset: \
             none, or precision_only with numeric.precision.mapping=true.",
        ),
        ConfigKey::optional(
            NUMERIC_PRECISION_MAPPING,
            Some("false"),
            "Deprecated: true is numeric.mapping=precision_only (numeric.mapping wins when set).",
        ).of_type(ConfigType::Boolean),
        ConfigKey::optional(
            TIMESTAMP_GRANULARITY,
            Some("connect_logical"),
            "How timestamp columns are written: connect_logical (Kafka Connect Timestamp, ms since the epoch), \
             micros_long, micros_string, micros_iso_datetime_string, nanos_long, nanos_string, \
             nanos_iso_datetime_string.",
        ),
        ConfigKey::optional(
            QUERY_SUFFIX,
            Some(""),
            "Text appended to the end of every generated query.",
        ),
        ConfigKey::optional(
            TRANSACTION_ISOLATION_MODE,
            Some("DEFAULT"),
            "The isolation level of the reads: DEFAULT (the database's), READ_UNCOMMITTED, READ_COMMITTED, \
             REPEATABLE_READ or SERIALIZABLE (SQL_SERVER_SNAPSHOT is SQL Server's).",
        ),
        ConfigKey::optional(
            QUOTE_SQL_IDENTIFIERS,
            Some("always"),
            "always: table and column names are quoted in queries (case-sensitive); never: they are not, so \
             PostgreSQL folds them to lower case.",
        ),
        ConfigKey::optional(
            DIALECT_NAME,
            Some(""),
            "The JDBC source's database dialect: empty (from connection.url) or PostgreSqlDatabaseDialect.",
        ),
    ]
}

/// `transaction.isolation.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Isolation {
    #[default]
    Default,
    ReadUncommitted,
    ReadCommitted,
    RepeatableRead,
    Serializable,
}

impl Isolation {
    /// Sets the level for every transaction of every session `spec` opens (reconnections too), as
    /// JDBC's `setTransactionIsolation` does for its connection: the `default_transaction_isolation`
    /// startup option, after any `options` of the URL.
    pub(crate) fn apply(self, spec: &mut ConnectionSpec) {
        let Some(level) = self.sql() else { return };
        let option = format!(
            "-c default_transaction_isolation={}",
            level.to_ascii_lowercase().replace(' ', "\\ ")
        );
        let options = match spec.config.get_options() {
            Some(existing) if !existing.trim().is_empty() => format!("{existing} {option}"),
            _ => option,
        };
        spec.config.options(options);
    }

    /// PostgreSQL's name of the level; `None` for the database's default.
    pub(crate) fn sql(self) -> Option<&'static str> {
        match self {
            Isolation::Default => None,
            Isolation::ReadUncommitted => Some("READ UNCOMMITTED"),
            Isolation::ReadCommitted => Some("READ COMMITTED"),
            Isolation::RepeatableRead => Some("REPEATABLE READ"),
            Isolation::Serializable => Some("SERIALIZABLE"),
        }
    }
}

/// The parsed keys of this module.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Options {
    pub(crate) blacklist: Vec<Vec<String>>,
    pub(crate) table_types: Vec<TableType>,
    pub(crate) schema_pattern: Option<String>,
    pub(crate) table_poll_interval: Duration,
    pub(crate) mapping: ValueMapping,
    pub(crate) query_suffix: Option<String>,
    pub(crate) isolation: Isolation,
    /// `quote.sql.identifiers=never`.
    pub(crate) fold_identifiers: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            blacklist: Vec::new(),
            table_types: vec![TableType::Table],
            schema_pattern: None,
            table_poll_interval: Duration::from_millis(DEFAULT_TABLE_POLL_INTERVAL_MS),
            mapping: ValueMapping::default(),
            query_suffix: None,
            isolation: Isolation::default(),
            fold_identifiers: false,
        }
    }
}

/// Records an issue about a key.
type Issue<'a> = dyn FnMut(&str, String) + 'a;

impl Options {
    /// Parses the keys; one issue per bad key. `split` splits a possibly quoted `schema.table`.
    pub(crate) fn parse(
        config: &Config,
        split: impl Fn(&str) -> Result<Vec<String>, NameError>,
    ) -> Result<Self, Vec<ConfigIssue>> {
        let mut issues = Vec::new();
        let mut issue = |key: &str, message: String| {
            issues.push(ConfigIssue {
                key: key.to_owned(),
                message,
            })
        };
        let mut out = Options {
            blacklist: parse_blacklist(config, split, &mut issue),
            ..Options::default()
        };
        if let Some(types) = text(config, TABLE_TYPES) {
            out.table_types = parse_table_types(types, &mut issue);
        }
        out.schema_pattern = text(config, SCHEMA_PATTERN).map(str::to_owned);
        match config
            .get(TABLE_POLL_INTERVAL_MS)
            .map(|v| v.trim().parse::<u64>())
        {
            None => {}
            Some(Ok(ms)) if ms >= 1 => out.table_poll_interval = Duration::from_millis(ms),
            Some(_) => issue(
                TABLE_POLL_INTERVAL_MS,
                "must be a whole number of milliseconds, at least 1".to_owned(),
            ),
        }
        out.mapping.numeric = parse_numeric_mapping(config, &mut issue);
        if let Some(v) = text(config, TIMESTAMP_GRANULARITY) {
            out.mapping.granularity = Granularity::parse(v).unwrap_or_else(|| {
                issue(
                    TIMESTAMP_GRANULARITY,
                    format!("{v:?} is not a granularity: use {}", Granularity::NAMES),
                );
                Granularity::ConnectLogical
            });
        }
        out.query_suffix = text(config, QUERY_SUFFIX).map(str::to_owned);
        if let Some(v) = text(config, TRANSACTION_ISOLATION_MODE) {
            out.isolation = parse_isolation(v, &mut issue);
        }
        match text(config, QUOTE_SQL_IDENTIFIERS)
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("always") => {}
            Some("never") => out.fold_identifiers = true,
            Some(other) => issue(
                QUOTE_SQL_IDENTIFIERS,
                format!("{other:?} is not a quote method: use always or never"),
            ),
        }
        match text(config, DIALECT_NAME) {
            None | Some("PostgreSqlDatabaseDialect") => {}
            Some(other) => issue(
                DIALECT_NAME,
                format!(
                    "{other:?}: Ferry's JDBC source reads PostgreSQL only; use PostgreSqlDatabaseDialect or leave \
                     it empty"
                ),
            ),
        }
        if issues.is_empty() {
            Ok(out)
        } else {
            Err(issues)
        }
    }
}

/// Parses `table.blacklist` into the split names of its entries.
fn parse_blacklist(
    config: &Config,
    split: impl Fn(&str) -> Result<Vec<String>, NameError>,
    issue: &mut Issue<'_>,
) -> Vec<Vec<String>> {
    let mut blacklist = Vec::new();
    for entry in text(config, TABLE_BLACKLIST)
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        match split(entry) {
            Ok(parts) if (1..=2).contains(&parts.len()) => blacklist.push(parts),
            Ok(_) => issue(
                TABLE_BLACKLIST,
                format!("{entry:?} is not a table name: use schema.table or table"),
            ),
            Err(e) => issue(TABLE_BLACKLIST, e.to_string()),
        }
    }
    blacklist
}

/// Parses `table.types`: each type once, at least one.
fn parse_table_types(types: &str, issue: &mut Issue<'_>) -> Vec<TableType> {
    let mut parsed = Vec::new();
    for name in types.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        match TableType::parse(name) {
            Some(t) if !parsed.contains(&t) => parsed.push(t),
            Some(_) => {}
            None => issue(
                TABLE_TYPES,
                format!(
                    "{name:?} is not a table type PostgreSQL has: use {}",
                    TableType::NAMES
                ),
            ),
        }
    }
    if parsed.is_empty() {
        issue(TABLE_TYPES, "names no table type".to_owned());
    }
    parsed
}

/// Parses `numeric.mapping`, defaulting by the older `numeric.precision.mapping`.
fn parse_numeric_mapping(config: &Config, issue: &mut Issue<'_>) -> NumericMapping {
    let precision_mapping = match text(config, NUMERIC_PRECISION_MAPPING) {
        None => false,
        Some(v) if v.eq_ignore_ascii_case("true") => true,
        Some(v) if v.eq_ignore_ascii_case("false") => false,
        Some(v) => {
            issue(
                NUMERIC_PRECISION_MAPPING,
                format!("{v:?} is not true or false"),
            );
            false
        }
    };
    match text(config, NUMERIC_MAPPING) {
        None if precision_mapping => NumericMapping::PrecisionOnly,
        None => NumericMapping::None,
        Some(v) => NumericMapping::parse(v).unwrap_or_else(|| {
            issue(
                NUMERIC_MAPPING,
                format!(
                    "{v:?} is not a numeric mapping: use {}",
                    NumericMapping::NAMES
                ),
            );
            NumericMapping::None
        }),
    }
}

/// Parses `transaction.isolation.mode`; SQL Server's snapshot is refused.
fn parse_isolation(v: &str, issue: &mut Issue<'_>) -> Isolation {
    match v.to_ascii_uppercase().as_str() {
        "DEFAULT" => Isolation::Default,
        "READ_UNCOMMITTED" => Isolation::ReadUncommitted,
        "READ_COMMITTED" => Isolation::ReadCommitted,
        "REPEATABLE_READ" => Isolation::RepeatableRead,
        "SERIALIZABLE" => Isolation::Serializable,
        "SQL_SERVER_SNAPSHOT" => {
            issue(
                TRANSACTION_ISOLATION_MODE,
                "SQL_SERVER_SNAPSHOT works with SQL Server only, not PostgreSQL: use DEFAULT, \
                 READ_COMMITTED, REPEATABLE_READ or SERIALIZABLE"
                    .to_owned(),
            );
            Isolation::Default
        }
        _ => {
            issue(
                TRANSACTION_ISOLATION_MODE,
                format!(
                    "{v:?} is not an isolation mode: use DEFAULT, READ_UNCOMMITTED, READ_COMMITTED, \
                     REPEATABLE_READ or SERIALIZABLE"
                ),
            );
            Isolation::Default
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::url::parse_connection;

    #[test]
    fn isolation_is_a_startup_option_after_the_urls_own() {
        let mut spec = parse_connection(
            "jdbc:postgresql://db:5432/shop?currentSchema=sales",
            Some("app"),
            None,
        )
        .unwrap();
        Isolation::RepeatableRead.apply(&mut spec);
        assert_eq!(
            spec.config.get_options(),
            Some("-c search_path=sales -c default_transaction_isolation=repeatable\\ read")
        );
        let mut plain = parse_connection("jdbc:postgresql://db/shop", Some("app"), None).unwrap();
        Isolation::Default.apply(&mut plain);
        assert_eq!(plain.config.get_options(), None);
    }
}
