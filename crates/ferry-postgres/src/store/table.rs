//! The offsets table: its name, its shape, and the statements the store runs on it.

use std::fmt;

/// The columns of a Ferry offsets table, in order: (name, type as `format_type` prints it, NOT NULL,
/// has a default or is an identity column).
pub(crate) const COLUMNS: &[(&str, &str, bool, bool)] = &[
    ("logical_key", "bytea", true, false),
    ("connector", "text", false, false),
    ("raw_key", "bytea", true, false),
    ("value", "bytea", true, false),
    ("seq", "bigint", true, true),
    ("written_at", "timestamp with time zone", true, true),
];

/// The primary key as `pg_get_constraintdef` prints it.
pub(crate) const PRIMARY_KEY: &str = "PRIMARY KEY (logical_key)";

/// A validated table name, `table` or `schema.table`, each part a lower-case SQL identifier.
/// An `offset.storage.postgres.table` that is not a table name Ferry accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TableNameError {
    #[error(
        "{0:?} is not a table name: write table or schema.table (e.g. ferry_offsets or \
         ferry.offsets)"
    )]
    Shape(String),
    #[error("{text:?} is not a table name: {source}")]
    Part {
        text: String,
        #[source]
        source: IdentifierError,
    },
}

/// A part of a table name that is not a lower-case SQL identifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum IdentifierError {
    #[error("a part of the name is empty")]
    Empty,
    #[error("{0:?} is longer than PostgreSQL's 63-character limit")]
    TooLong(String),
    #[error(
        "{0:?} has upper-case letters; use lower case (PostgreSQL folds unquoted names to lower \
         case, so an upper-case name would mean another table in psql)"
    )]
    UpperCase(String),
    #[error("{0:?} must start with a-z or _ and contain only a-z, 0-9, _ and $")]
    Characters(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableName {
    schema: Option<String>,
    table: String,
}

impl TableName {
    /// Parses `offset.storage.postgres.table`.
    ///
    /// Accepted: `name` or `schema.name`, each part 1 to 63 characters of `a-z`, `0-9`, `_` and `$`,
    /// not starting with a digit or `$`. Upper case is refused rather than folded or quoted, so the
    /// name means the same table in Ferry and in `psql`.
    pub(crate) fn parse(text: &str) -> Result<TableName, TableNameError> {
        let text = text.trim();
        let parts: Vec<&str> = text.split('.').collect();
        let (schema, table) = match parts.as_slice() {
            [table] => (None, *table),
            [schema, table] => (Some(*schema), *table),
            _ => {
                return Err(TableNameError::Shape(text.to_owned()));
            }
        };
        for part in schema.iter().chain(std::iter::once(&table)) {
            check_identifier(part).map_err(|source| TableNameError::Part {
                text: text.to_owned(),
                source,
            })?;
        }
        Ok(TableName {
            schema: schema.map(str::to_owned),
            table: table.to_owned(),
        })
    }

    /// The name quoted for SQL (`"schema"."table"`).
    pub(crate) fn quoted(&self) -> String {
        match &self.schema {
            Some(schema) => format!("\"{schema}\".\"{}\"", self.table),
            None => format!("\"{}\"", self.table),
        }
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.schema {
            Some(schema) => write!(f, "{schema}.{}", self.table),
            None => f.write_str(&self.table),
        }
    }
}

fn check_identifier(part: &str) -> Result<(), IdentifierError> {
    if part.is_empty() {
        return Err(IdentifierError::Empty);
    }
    if part.len() > 63 {
        return Err(IdentifierError::TooLong(part.to_owned()));
    }
    if part.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(IdentifierError::UpperCase(part.to_owned()));
    }
    let mut bytes = part.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b == b'_');
    if !first_ok
        || !part
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'$')
    {
        return Err(IdentifierError::Characters(part.to_owned()));
    }
    Ok(())
}

/// The SQL the store runs, built once for its table.
#[derive(Debug, Clone)]
pub(crate) struct Statements {
    pub(crate) create_table: String,
    pub(crate) create_index: String,
    pub(crate) get: String,
    pub(crate) upsert: String,
    pub(crate) delete: String,
    pub(crate) connector_offsets: String,
    pub(crate) entries: String,
}

impl Statements {
    pub(crate) fn new(name: &TableName) -> Statements {
        let t = name.quoted();
        Statements {
            create_table: format!(
                "CREATE TABLE IF NOT EXISTS {t} (\n\
                 \x20   logical_key bytea NOT NULL PRIMARY KEY,\n\
                 \x20   connector text,\n\
                 \x20   raw_key bytea NOT NULL,\n\
                 \x20   value bytea NOT NULL,\n\
                 \x20   seq bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,\n\
                 \x20   written_at timestamp with time zone NOT NULL DEFAULT now()\n\
                 )"
            ),
            // Created only together with the table (under the creation lock); PostgreSQL picks a free
            // name (`<table>_connector_seq_idx`).
            create_index: format!("CREATE INDEX ON {t} (connector, seq)"),
            get: format!("SELECT logical_key, value FROM {t} WHERE logical_key = ANY($1::bytea[])"),
            // The rows are numbered in batch order and inserted in that order, so `seq` (the identity
            // default, taken per inserted row) follows the batch.
            upsert: format!(
                "INSERT INTO {t} (logical_key, connector, raw_key, value) \
                 SELECT w.logical_key, w.connector, w.raw_key, w.value \
                 FROM unnest($1::bytea[], $2::text[], $3::bytea[], $4::bytea[]) \
                 WITH ORDINALITY AS w(logical_key, connector, raw_key, value, n) \
                 ORDER BY w.n \
                 ON CONFLICT (logical_key) DO UPDATE SET \
                 connector = EXCLUDED.connector, raw_key = EXCLUDED.raw_key, value = EXCLUDED.value, \
                 seq = EXCLUDED.seq, written_at = EXCLUDED.written_at"
            ),
            delete: format!("DELETE FROM {t} WHERE logical_key = ANY($1::bytea[])"),
            connector_offsets: format!(
                "SELECT raw_key, value FROM {t} WHERE connector = $1 ORDER BY seq"
            ),
            entries: format!("SELECT raw_key, value FROM {t} ORDER BY seq"),
        }
    }
}

/// A column of an existing table, as the catalog describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FoundColumn {
    pub(crate) name: String,
    pub(crate) type_name: String,
    pub(crate) not_null: bool,
    pub(crate) has_default: bool,
}

/// What is wrong with an existing table's shape, or `None` when it is a Ferry offsets table.
pub(crate) fn shape_problems(columns: &[FoundColumn], primary_key: Option<&str>) -> Option<String> {
    let mut problems = Vec::new();
    for (name, type_name, not_null, has_default) in COLUMNS {
        match columns.iter().find(|c| c.name == *name) {
            None => problems.push(format!("column {name} ({type_name}) is missing")),
            Some(found) => {
                if found.type_name != *type_name {
                    problems.push(format!(
                        "column {name} is {}, expected {type_name}",
                        found.type_name
                    ));
                }
                if *not_null && !found.not_null {
                    problems.push(format!("column {name} is nullable, expected NOT NULL"));
                }
                if *has_default && !found.has_default {
                    problems.push(format!(
                        "column {name} has no default, expected {}",
                        if *name == "seq" {
                            "GENERATED BY DEFAULT AS IDENTITY"
                        } else {
                            "DEFAULT now()"
                        }
                    ));
                }
            }
        }
    }
    for extra in columns
        .iter()
        .filter(|c| !COLUMNS.iter().any(|(name, ..)| c.name == *name))
    {
        problems.push(format!(
            "unexpected column {} ({})",
            extra.name, extra.type_name
        ));
    }
    match primary_key {
        Some(PRIMARY_KEY) => {}
        Some(other) => problems.push(format!(
            "its primary key is {other}, expected {PRIMARY_KEY}"
        )),
        None => problems.push(format!("it has no primary key, expected {PRIMARY_KEY}")),
    }
    if problems.is_empty() {
        None
    } else {
        Some(problems.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names() {
        let plain = TableName::parse("ferry_offsets").unwrap();
        assert_eq!(plain.quoted(), "\"ferry_offsets\"");
        assert_eq!(plain.to_string(), "ferry_offsets");
        let qualified = TableName::parse(" ops.offsets$2 ").unwrap();
        assert_eq!(qualified.quoted(), "\"ops\".\"offsets$2\"");
        for bad in [
            "",
            "a.b.c",
            ".t",
            "Offsets",
            "1abc",
            "a-b",
            "t\"; drop table x; --",
            &"x".repeat(64),
        ] {
            assert!(TableName::parse(bad).is_err(), "{bad:?} must be refused");
        }
    }

    fn expected_columns() -> Vec<FoundColumn> {
        COLUMNS
            .iter()
            .map(|(name, type_name, not_null, has_default)| FoundColumn {
                name: (*name).to_owned(),
                type_name: (*type_name).to_owned(),
                not_null: *not_null,
                has_default: *has_default,
            })
            .collect()
    }

    #[test]
    fn shape_check() {
        let good = expected_columns();
        assert_eq!(shape_problems(&good, Some(PRIMARY_KEY)), None);
        let mut wrong = good.clone();
        wrong[3].type_name = "text".to_owned();
        wrong.remove(4);
        wrong.push(FoundColumn {
            name: "extra".to_owned(),
            type_name: "integer".to_owned(),
            not_null: false,
            has_default: false,
        });
        let problems = shape_problems(&wrong, None).unwrap_or_default();
        assert!(
            problems.contains("column value is text, expected bytea"),
            "{problems}"
        );
        assert!(
            problems.contains("column seq (bigint) is missing"),
            "{problems}"
        );
        assert!(problems.contains("unexpected column extra"), "{problems}");
        assert!(problems.contains("no primary key"), "{problems}");
    }
}
