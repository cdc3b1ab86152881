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

/// The timestamp expression: the column, or `COALESCE` of the columns.
fn timestamp_expr(columns: &[String]) -> String {
    match columns {
        [one] => quote_ident(one),
        many => format!(
            "COALESCE({})",
            many.iter()
                .map(|c| quote_ident(c))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The `SELECT` of one table (or the query) in `mode`. Parameters:
/// incrementing `$1` = last incrementing value; timestamp `$1` = begin, `$2` = end;
/// timestamp+incrementing `$1` = end, `$2` = begin, `$3` = last incrementing value.
pub(crate) fn select(
    mode: Mode,
    source: &SourceItem<'_>,
    incrementing: Option<&str>,
    timestamps: &[String],
) -> String {
    let base = match (source, mode) {
        (SourceItem::Table(t), _) => format!("SELECT * FROM {}", quote_table(t)),
        (SourceItem::Query(q), Mode::Bulk) => (*q).to_owned(),
        (SourceItem::Query(q), _) => format!("SELECT * FROM ({q}) AS ferry_query"),
    };
    let inc = incrementing.map(quote_ident).unwrap_or_default();
    let ts = timestamp_expr(timestamps);
    match mode {
        Mode::Bulk => base,
        Mode::Incrementing => format!("{base} WHERE {inc} > $1::int8 ORDER BY {inc} ASC"),
        Mode::Timestamp => format!("{base} WHERE {ts} > $1 AND {ts} < $2 ORDER BY {ts} ASC"),
        Mode::TimestampIncrementing => format!(
            "{base} WHERE {ts} < $1 AND (({ts} = $2 AND {inc} > $3::int8) OR {ts} > $2) ORDER BY {ts}, {inc} ASC"
        ),
    }
}

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
            select(Mode::Incrementing, &table, Some("id"), &[]),
            "SELECT * FROM \"public\".\"Orders\" WHERE \"id\" > $1::int8 ORDER BY \"id\" ASC"
        );
        assert_eq!(
            select(Mode::Timestamp, &table, None, &["a".into(), "b".into()]),
            "SELECT * FROM \"public\".\"Orders\" WHERE COALESCE(\"a\", \"b\") > $1 AND COALESCE(\"a\", \"b\") < $2 \
             ORDER BY COALESCE(\"a\", \"b\") ASC"
        );
        assert_eq!(
            select(
                Mode::TimestampIncrementing,
                &SourceItem::Query("SELECT 1 AS x"),
                Some("x"),
                &["t".into()]
            ),
            "SELECT * FROM (SELECT 1 AS x) AS ferry_query WHERE \"t\" < $1 AND ((\"t\" = $2 AND \"x\" > $3::int8) \
             OR \"t\" > $2) ORDER BY \"t\", \"x\" ASC"
        );
        assert_eq!(
            select(Mode::Bulk, &SourceItem::Query("SELECT 1"), None, &[]),
            "SELECT 1"
        );
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }
}
