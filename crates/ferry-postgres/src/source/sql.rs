//! The SQL of each mode, with Kafka Connect JDBC source's predicates:
//!
//! - incrementing: `WHERE inc > ? ORDER BY inc ASC`;
//! - timestamp: `WHERE ts > ? AND ts < ? ORDER BY ts ASC` (`?`: the last timestamp read, then the
//!   database's current time minus `timestamp.delay.interval.ms`);
//! - timestamp+incrementing: `WHERE ts < ? AND ((ts = ? AND inc > ?) OR ts > ?) ORDER BY ts, inc ASC`;
//! - bulk: no predicate.
//!
//! `ts` is the timestamp column, or `COALESCE(a, b, …)` of several. Identifiers are always quoted, so
//! names are case-sensitive as in Kafka Connect's default `quote.sql.identifiers=always`. A `query` is
//! wrapped as a subquery (`SELECT * FROM (query) AS ferry_query WHERE …`) so it may have its own
//! `WHERE`.

use super::config::{Mode, Source, TableId};

/// The name of the server-side cursor a round reads through.
pub(crate) const CURSOR: &str = "ferry_cursor";

/// `"name"`, with embedded quotes doubled.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `"schema"."table"`.
pub(crate) fn quote_table(table: &TableId) -> String {
    format!(
        "{}.{}",
        quote_ident(&table.schema),
        quote_ident(&table.table)
    )
}

/// A timestamp column of a table (or the query), and whether it is `timestamp without time zone`
/// (its values are wall-clock times in `db.timezone`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TsColumn {
    pub(crate) name: String,
    pub(crate) local: bool,
}

/// `'text'` as an SQL string literal.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The timestamp key and how a `timestamptz` parameter compares with it.
///
/// Parameters are instants (`timestamptz`). One `timestamp` column is compared with the parameter
/// turned into `zone`'s wall clock (`$n AT TIME ZONE zone`), which keeps an index on the column usable;
/// otherwise every `timestamp` column is turned into an instant (`col AT TIME ZONE zone`) and the
/// key is `COALESCE` of the instants.
fn timestamp_key(columns: &[TsColumn], zone: &str) -> (String, Box<dyn Fn(u8) -> String>) {
    let zone = literal(zone);
    match columns {
        [one] if one.local => {
            let param_zone = zone.clone();
            let key = quote_ident(&one.name);
            (
                key,
                Box::new(move |n: u8| format!("(${n}::timestamptz AT TIME ZONE {param_zone})"))
                    as Box<dyn Fn(u8) -> String>,
            )
        }
        many => {
            let parts: Vec<String> = many
                .iter()
                .map(|c| {
                    if c.local {
                        format!("({} AT TIME ZONE {zone})", quote_ident(&c.name))
                    } else {
                        quote_ident(&c.name)
                    }
                })
                .collect();
            let key = match parts.as_slice() {
                [one] => one.clone(),
                _ => format!("COALESCE({})", parts.join(", ")),
            };
            (
                key,
                Box::new(|n: u8| format!("${n}::timestamptz")) as Box<dyn Fn(u8) -> String>,
            )
        }
    }
}

/// `SELECT * FROM` the table, or the query as a subquery.
fn base(source: &SourceItem<'_>, mode: Mode) -> String {
    match (source, mode) {
        (SourceItem::Table(t), _) => format!("SELECT * FROM {}", quote_table(t)),
        (SourceItem::Query(q), Mode::Bulk) => (*q).to_owned(),
        (SourceItem::Query(q), _) => format!("SELECT * FROM ({q}) AS ferry_query"),
    }
}

/// The `SELECT` of one table (or the query) in `mode`. Parameters (timestamps as `timestamptz`):
/// incrementing `$1` = last incrementing value, `$2` = the highest value safe to read (see `guard`);
/// timestamp `$1` = begin, `$2` = end;
/// timestamp+incrementing `$1` = end, `$2` = begin, `$3` = last incrementing value.
pub(crate) fn select(
    mode: Mode,
    source: &SourceItem<'_>,
    incrementing: Option<&str>,
    timestamps: &[TsColumn],
    zone: &str,
) -> String {
    let base = base(source, mode);
    let inc = incrementing.map(quote_ident).unwrap_or_default();
    let (ts, p) = timestamp_key(timestamps, zone);
    match mode {
        Mode::Bulk => base,
        Mode::Incrementing => {
            format!("{base} WHERE {inc} > $1::int8 AND {inc} <= $2::int8 ORDER BY {inc} ASC")
        }
        Mode::Timestamp => format!(
            "{base} WHERE {ts} > {} AND {ts} < {} ORDER BY {ts} ASC",
            p(1),
            p(2)
        ),
        Mode::TimestampIncrementing => format!(
            "{base} WHERE {ts} < {} AND (({ts} = {} AND {inc} > $3::int8) OR {ts} > {}) ORDER BY {ts}, {inc} ASC",
            p(1),
            p(2),
            p(2)
        ),
    }
}

/// A statement whose result columns are the source's (no rows): to learn their types at start.
pub(crate) fn describe(source: &SourceItem<'_>) -> String {
    format!(
        "SELECT * FROM ({}) AS ferry_describe LIMIT 0",
        base(source, Mode::Bulk)
    )
}

/// The highest incrementing value visible now, and the time right after the statement's snapshot.
pub(crate) fn max_incrementing(source: &SourceItem<'_>, incrementing: &str) -> String {
    format!(
        "SELECT (SELECT max({inc})::int8 FROM ({}) AS ferry_max), clock_timestamp()",
        base(source, Mode::Bulk),
        inc = quote_ident(incrementing)
    )
}

/// Instants of `timestamp` (wall-clock) values in zone `$2`, in the order of `$1`.
pub(crate) const TO_INSTANTS: &str = "SELECT v AT TIME ZONE $2 FROM unnest($1::timestamp[]) WITH ORDINALITY AS u(v, n) \
     ORDER BY n";

/// One thing a task reads.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SourceItem<'a> {
    Table(&'a TableId),
    Query(&'a str),
}

/// The items of a source.
pub(crate) fn items(source: &Source) -> Vec<SourceItem<'_>> {
    match source {
        Source::Tables(tables) => tables.iter().map(SourceItem::Table).collect(),
        Source::Query(q) => vec![SourceItem::Query(q)],
        Source::Discover(_) => Vec::new(),
    }
}

/// `DECLARE ferry_cursor NO SCROLL CURSOR FOR <select>`.
pub(crate) fn declare(select: &str) -> String {
    format!("DECLARE {CURSOR} NO SCROLL CURSOR FOR {select}")
}

/// `FETCH FORWARD n FROM ferry_cursor`.
pub(crate) fn fetch(rows: usize) -> String {
    format!("FETCH FORWARD {rows} FROM {CURSOR}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predicates() {
        let t = TableId {
            schema: "public".into(),
            table: "Orders".into(),
        };
        let table = SourceItem::Table(&t);
        assert_eq!(
            select(Mode::Incrementing, &table, Some("id"), &[], "UTC"),
            "SELECT * FROM \"public\".\"Orders\" WHERE \"id\" > $1::int8 AND \"id\" <= $2::int8 ORDER BY \"id\" ASC"
        );
        let tz = |name: &str, local| TsColumn {
            name: name.into(),
            local,
        };
        assert_eq!(
            select(
                Mode::Timestamp,
                &table,
                None,
                &[tz("a", true), tz("b", false)],
                "Asia/Kathmandu"
            ),
            "SELECT * FROM \"public\".\"Orders\" WHERE COALESCE((\"a\" AT TIME ZONE 'Asia/Kathmandu'), \"b\") > \
             $1::timestamptz AND COALESCE((\"a\" AT TIME ZONE 'Asia/Kathmandu'), \"b\") < $2::timestamptz \
             ORDER BY COALESCE((\"a\" AT TIME ZONE 'Asia/Kathmandu'), \"b\") ASC"
        );
        assert_eq!(
            select(
                Mode::TimestampIncrementing,
                &SourceItem::Query("SELECT 1 AS x"),
                Some("x"),
                &[tz("t", true)],
                "it's"
            ),
            "SELECT * FROM (SELECT 1 AS x) AS ferry_query WHERE \"t\" < ($1::timestamptz AT TIME ZONE 'it''s') AND \
             ((\"t\" = ($2::timestamptz AT TIME ZONE 'it''s') AND \"x\" > $3::int8) OR \"t\" > ($2::timestamptz AT \
             TIME ZONE 'it''s')) ORDER BY \"t\", \"x\" ASC"
        );
        assert_eq!(
            select(Mode::Timestamp, &table, None, &[tz("t", false)], "UTC"),
            "SELECT * FROM \"public\".\"Orders\" WHERE \"t\" > $1::timestamptz AND \"t\" < $2::timestamptz ORDER BY \"t\" ASC"
        );
        assert_eq!(
            select(Mode::Bulk, &SourceItem::Query("SELECT 1"), None, &[], "UTC"),
            "SELECT 1"
        );
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }
}
