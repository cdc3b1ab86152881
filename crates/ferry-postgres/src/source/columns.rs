//! Start-time checks of the cursor columns: their types (`timestamp` or `timestamptz`, which decides
//! how `db.timezone` applies), `validate.non.null` (Kafka Connect's check: a nullable incrementing
//! column, or timestamp columns that are all nullable, are refused for tables), and `db.timezone`.

use ferry_api::ConnectError;
use tokio_postgres::Row;
use tokio_postgres::types::{Kind, Type};

use super::config::{DB_TIMEZONE, Mode, SourceConfig, VALIDATE_NON_NULL};
use super::conn::Db;
use super::decode::{raw, timestamp_value};
use super::sql::{self, SourceItem, TsColumn};
use super::time::Micros;

/// Whether `ty` is `timestamp without time zone` (or a domain over it).
pub(crate) fn is_local(ty: &Type) -> bool {
    match *ty {
        Type::TIMESTAMP => true,
        _ => match ty.kind() {
            Kind::Domain(base) => is_local(base),
            _ => false,
        },
    }
}

fn is_timestamp(ty: &Type) -> bool {
    match *ty {
        Type::TIMESTAMP | Type::TIMESTAMPTZ => true,
        _ => match ty.kind() {
            Kind::Domain(base) => is_timestamp(base),
            _ => false,
        },
    }
}

/// Fails the start when the database does not know the zone `db.timezone` names.
pub(crate) async fn check_zone(db: &Db, zone: &str) -> Result<(), ConnectError> {
    db.client
        .query_one("SELECT now() AT TIME ZONE $1", &[&zone])
        .await
        .map(|_| ())
        .map_err(|e| {
            let inner = db.error(&format!("checking {DB_TIMEZONE}={zone:?}"), &e);
            ConnectError::fatal(format!(
                "PostgresSource: {DB_TIMEZONE} {zone:?} is not a time zone the database knows (see \
                 pg_timezone_names; e.g. UTC, Europe/Paris): {inner}"
            ))
        })
}

/// Checks the cursor columns of `item` (`name` for messages) and returns its timestamp columns with
/// their types.
pub(crate) async fn check(
    db: &Db,
    item: &SourceItem<'_>,
    name: &str,
    config: &SourceConfig,
) -> Result<Vec<TsColumn>, ConnectError> {
    if config.mode == Mode::Bulk {
        return Ok(Vec::new());
    }
    let fail = |m: String| ConnectError::fatal(format!("PostgresSource: {name}: {m}"));
    let statement = db
        .client
        .prepare(&sql::describe(item))
        .await
        .map_err(|e| db.error(&format!("reading the columns of {name}"), &e))?;
    // Executed (no rows: LIMIT 0) so that a missing privilege fails the start, not the first poll.
    db.client
        .query(&statement, &[])
        .await
        .map_err(|e| db.error(&format!("reading {name}"), &e))?;
    let columns = statement.columns();
    let find = |wanted: &str, key: &str| {
        columns.iter().find(|c| c.name() == wanted).ok_or_else(|| {
            fail(format!(
                "{key} {wanted:?} is not a column (columns: {})",
                columns
                    .iter()
                    .map(|c| c.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
    };
    let mut ts = Vec::with_capacity(config.timestamp_columns.len());
    let mut ts_cols = Vec::new();
    for wanted in &config.timestamp_columns {
        let c = find(wanted, "timestamp.column.name")?;
        if !is_timestamp(c.type_()) {
            return Err(fail(format!(
                "timestamp.column.name {wanted:?} has type {}; it must be timestamp or timestamptz",
                c.type_().name()
            )));
        }
        ts.push(TsColumn {
            name: wanted.clone(),
            local: is_local(c.type_()),
        });
        ts_cols.push(c);
    }
    let inc_col = match &config.incrementing_column {
        Some(wanted) => Some(find(wanted, "incrementing.column.name")?),
        None => None,
    };
    // Like Kafka Connect, only tables are checked: a query's column may come from an outer join or
    // an expression, whose nullability the catalog does not tell.
    if !config.safety.validate_non_null || matches!(item, SourceItem::Query(_)) {
        return Ok(ts);
    }
    check_not_null(db, name, inc_col, &ts_cols).await?;
    Ok(ts)
}

/// Refuses a nullable incrementing column, and timestamp columns that are all nullable: a row
/// with NULL there could not be read.
async fn check_not_null(
    db: &Db,
    name: &str,
    inc_col: Option<&tokio_postgres::Column>,
    ts_cols: &[&tokio_postgres::Column],
) -> Result<(), ConnectError> {
    let fail = |m: String| ConnectError::fatal(format!("PostgresSource: {name}: {m}"));
    if let Some(c) = inc_col
        && !column_not_null(db, c).await?
    {
        return Err(fail(format!(
            "the incrementing column {:?} is nullable, so a row with NULL there could not be read: make it \
                 NOT NULL, or set {VALIDATE_NON_NULL}=false (such a row then fails the task)",
            c.name()
        )));
    }
    if !ts_cols.is_empty() {
        let mut any = false;
        for c in ts_cols {
            any |= column_not_null(db, c).await?;
        }
        if !any {
            let names: Vec<String> = ts_cols.iter().map(|c| format!("{:?}", c.name())).collect();
            return Err(fail(format!(
                "the timestamp column{} {} {} nullable, so a row with NULL there would never be read: make one \
                 NOT NULL, or set {VALIDATE_NON_NULL}=false (such rows are then not read, as in Kafka Connect)",
                if names.len() > 1 { "s" } else { "" },
                names.join(", "),
                if names.len() > 1 { "are all" } else { "is" },
            )));
        }
    }
    Ok(())
}

/// Whether a result column is a table column declared `NOT NULL` (false when it is not a table's).
async fn column_not_null(db: &Db, c: &tokio_postgres::Column) -> Result<bool, ConnectError> {
    let (Some(table), Some(column)) = (c.table_oid(), c.column_id()) else {
        return Ok(false);
    };
    let row = db
        .client
        .query_opt(
            "SELECT attnotnull FROM pg_catalog.pg_attribute WHERE attrelid = $1 AND attnum = $2",
            &[&table, &column],
        )
        .await
        .map_err(|e| db.error("reading which columns are NOT NULL", &e))?;
    Ok(row.is_some_and(|r| r.try_get::<_, bool>(0).unwrap_or(false)))
}

/// Each row's timestamp: the first non-null timestamp column (COALESCE), as an instant; values
/// of `timestamp without time zone` columns are wall-clock times in `db.timezone`, which the
/// database turns into instants (one query per batch, in the round's transaction).
pub(crate) async fn row_timestamps(
    db: &Db,
    zone: &str,
    name: &str,
    columns: &[tokio_postgres::Column],
    ts_indexes: &[usize],
    rows: &[Row],
) -> Result<Vec<Micros>, ConnectError> {
    let fail = |m: String| ConnectError::fatal(format!("PostgresSource: {name}: {m}"));
    let mut out = Vec::with_capacity(rows.len());
    // (row, wall-clock value) of the values to convert.
    let mut local = Vec::new();
    for (n, row) in rows.iter().enumerate() {
        let mut found = None;
        for &i in ts_indexes {
            if let Some(bytes) = raw(row, i).map_err(|e| fail(e.to_string()))? {
                let ty = columns[i].type_();
                let value = timestamp_value(ty, bytes).map_err(|m| {
                    fail(format!(
                        "timestamp.column.name {:?}: {m}",
                        columns[i].name()
                    ))
                })?;
                if is_local(ty) {
                    local.push((n, value.to_system_time()));
                }
                found = Some(value);
                break;
            }
        }
        // The query's WHERE never matches a row whose timestamp columns are all NULL.
        out.push(found.ok_or_else(|| fail("a row has null in every timestamp column".to_owned()))?);
    }
    if !local.is_empty() {
        let walls: Vec<std::time::SystemTime> = local.iter().map(|(_, w)| *w).collect();
        let instants = db
            .client
            .query(sql::TO_INSTANTS, &[&walls, &zone.to_owned()])
            .await
            .map_err(|e| {
                db.error(
                    &format!("converting {name}'s timestamps from db.timezone"),
                    &e,
                )
            })?;
        if instants.len() != local.len() {
            return Err(fail(format!(
                "converting {} timestamps from db.timezone returned {} values",
                local.len(),
                instants.len()
            )));
        }
        for ((n, _), row) in local.iter().zip(&instants) {
            let instant = row
                .try_get::<_, std::time::SystemTime>(0)
                .map_err(|e| fail(format!("a timestamp in db.timezone {}: {e}", zone)))?;
            out[*n] = Micros::from_system_time(instant);
        }
    }
    Ok(out)
}
