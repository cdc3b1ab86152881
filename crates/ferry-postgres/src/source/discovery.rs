//! Which tables a task reads, found in the catalog as Kafka Connect's JDBC source does
//! (`TableMonitorThread`: `DatabaseMetaData.getTables(catalog.pattern, schema.pattern, "%",
//! table.types)`, then `table.whitelist` or `table.blacklist`), at start and every
//! `table.poll.interval.ms`, so tables created (or dropped) while the connector runs are noticed.
//!
//! Table types are PostgreSQL's JDBC driver's: `TABLE` is an ordinary table outside the `pg_*` and
//! `information_schema` schemas, `SYSTEM TABLE` one inside them, and so on. Without a whitelist the
//! tables are shared between the tasks by a stable hash of `schema.table` (the connector cannot list
//! them itself: a connector's `task_configs` does not reach the database), so a table keeps its task
//! when others come and go.

use super::config::TableId;
use super::conn::Db;
use ferry_api::ConnectError;

/// A kind of relation, by the name PostgreSQL's JDBC driver gives it in `getTables`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TableType {
    Table,
    View,
    MaterializedView,
    ForeignTable,
    PartitionedTable,
    SystemTable,
    SystemView,
}

/// Schemas PostgreSQL's JDBC driver calls system schemas.
const USER_SCHEMA: &str = "n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'";
const SYSTEM_SCHEMA: &str = "n.nspname IN ('pg_catalog', 'information_schema')";

impl TableType {
    pub(crate) const NAMES: &'static str = "TABLE, VIEW, MATERIALIZED VIEW, FOREIGN TABLE, PARTITIONED TABLE, \
        SYSTEM TABLE or SYSTEM VIEW";

    /// Parses a `table.types` entry (case-insensitive).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let normal = text.split_whitespace().collect::<Vec<_>>().join(" ");
        Some(match normal.to_ascii_uppercase().as_str() {
            "TABLE" => Self::Table,
            "VIEW" => Self::View,
            "MATERIALIZED VIEW" => Self::MaterializedView,
            "FOREIGN TABLE" => Self::ForeignTable,
            "PARTITIONED TABLE" => Self::PartitionedTable,
            "SYSTEM TABLE" => Self::SystemTable,
            "SYSTEM VIEW" => Self::SystemView,
            _ => return None,
        })
    }

    /// The catalog condition (fixed text, no input).
    fn condition(self) -> String {
        let (kind, schemas) = match self {
            Self::Table => ('r', USER_SCHEMA),
            Self::View => ('v', USER_SCHEMA),
            Self::MaterializedView => ('m', USER_SCHEMA),
            Self::ForeignTable => ('f', USER_SCHEMA),
            Self::PartitionedTable => ('p', USER_SCHEMA),
            Self::SystemTable => ('r', SYSTEM_SCHEMA),
            Self::SystemView => ('v', SYSTEM_SCHEMA),
        };
        format!("(c.relkind = '{kind}' AND {schemas})")
    }
}

/// What a task reads: the catalog query's criteria and the task's share.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Selection {
    /// `table.whitelist` (this task's part of it): only these.
    pub(crate) whitelist: Option<Vec<TableId>>,
    /// `table.blacklist` entries: `[table]` (any schema) or `[schema, table]`.
    pub(crate) blacklist: Vec<Vec<String>>,
    pub(crate) types: Vec<TableType>,
    pub(crate) schema_pattern: Option<String>,
    /// Without a whitelist: (this task's index, the number of tasks).
    pub(crate) share: (usize, usize),
}

impl Selection {
    /// The catalog query: every relation of the types whose schema matches `$1` (null: any).
    fn query(&self) -> String {
        let types = self
            .types
            .iter()
            .map(|t| t.condition())
            .collect::<Vec<_>>()
            .join(" OR ");
        format!(
            "SELECT n.nspname::text, c.relname::text FROM pg_catalog.pg_class c \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE ({types}) AND ($1::text IS NULL OR n.nspname LIKE $1::text) \
             ORDER BY n.nspname, c.relname"
        )
    }

    /// Whether this task reads `table`, one of the catalog's.
    pub(crate) fn keeps(&self, table: &TableId) -> bool {
        if let Some(whitelist) = &self.whitelist {
            return whitelist.contains(table);
        }
        let blacklisted = self.blacklist.iter().any(|entry| match entry.as_slice() {
            [name] => *name == table.table,
            [schema, name] => *schema == table.schema && *name == table.table,
            _ => false,
        });
        let (index, count) = self.share;
        !blacklisted && stable_hash(&table.to_string()) % count.max(1) as u64 == index as u64
    }

    /// The tables this task reads now, in catalog order (whitelist: in whitelist order).
    pub(crate) async fn tables(&self, db: &Db) -> Result<Vec<TableId>, ConnectError> {
        let rows = db
            .client
            .query(&self.query(), &[&self.schema_pattern])
            .await
            .map_err(|e| {
                db.error(
                    "listing the tables to read (table.types, schema.pattern)",
                    &e,
                )
            })?;
        let mut found = Vec::with_capacity(rows.len());
        for row in rows {
            let (Ok(schema), Ok(table)) =
                (row.try_get::<_, String>(0), row.try_get::<_, String>(1))
            else {
                continue;
            };
            let table = TableId { schema, table };
            if self.keeps(&table) {
                found.push(table);
            }
        }
        if let Some(whitelist) = &self.whitelist {
            return Ok(whitelist
                .iter()
                .filter(|t| found.contains(t))
                .cloned()
                .collect());
        }
        Ok(found)
    }
}

/// The first column of `table` (in column order) that PostgreSQL's JDBC driver reports as
/// auto-increment: an identity column or one whose default is `nextval(…)` (`serial`).
pub(crate) async fn auto_increment_column(
    db: &Db,
    table: &TableId,
) -> Result<Option<String>, ConnectError> {
    let row = db
        .client
        .query_opt(
            "SELECT a.attname::text FROM pg_catalog.pg_attribute a \
             JOIN pg_catalog.pg_class c ON c.oid = a.attrelid \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
             WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped \
             AND (a.attidentity IN ('a', 'd') OR pg_catalog.pg_get_expr(d.adbin, d.adrelid) LIKE 'nextval(%') \
             ORDER BY a.attnum LIMIT 1",
            &[&table.schema, &table.table],
        )
        .await
        .map_err(|e| db.error(&format!("looking for the auto-increment column of {table}"), &e))?;
    Ok(row.and_then(|r| r.try_get::<_, String>(0).ok()))
}

/// FNV-1a: the same on every platform and run, so a table's task never changes with the task count.
fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(schema: &str, table: &str) -> TableId {
        TableId {
            schema: schema.into(),
            table: table.into(),
        }
    }

    #[test]
    fn blacklist_matches_like_the_jdbc_source() {
        let s = Selection {
            whitelist: None,
            blacklist: vec![vec!["audit".into()], vec!["sales".into(), "tmp".into()]],
            types: vec![TableType::Table],
            schema_pattern: None,
            share: (0, 1),
        };
        assert!(!s.keeps(&t("public", "audit")));
        assert!(!s.keeps(&t("sales", "audit")));
        assert!(!s.keeps(&t("sales", "tmp")));
        assert!(s.keeps(&t("public", "tmp")));
        assert!(s.keeps(&t("public", "orders")));
    }

    #[test]
    fn shares_split_every_table_to_exactly_one_task() {
        let tables: Vec<TableId> = (0..50).map(|i| t("public", &format!("t{i}"))).collect();
        let share = |index| Selection {
            whitelist: None,
            blacklist: vec![],
            types: vec![TableType::Table],
            schema_pattern: None,
            share: (index, 3),
        };
        for table in &tables {
            let owners = (0..3).filter(|&i| share(i).keeps(table)).count();
            assert_eq!(owners, 1, "{table}");
        }
        assert!((0..3).all(|i| tables.iter().any(|t| share(i).keeps(t))));
        assert_eq!(
            TableType::parse("materialized  view"),
            Some(TableType::MaterializedView)
        );
        assert_eq!(TableType::parse("synonym"), None);
    }
}
