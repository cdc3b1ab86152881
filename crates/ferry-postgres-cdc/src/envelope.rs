//! Debezium's change events: key `<prefix>.<schema>.<table>.Key`, value
//! `<prefix>.<schema>.<table>.Envelope` (`before`, `after`, `source`, `transaction`, `op`,
//! `ts_ms`, `ts_us`, `ts_ns`), field order and schema names as Debezium 3.6.1 writes them (checked
//! against its records in Kafka Connect by `crates/ferry/tests/migrate.rs`: the source struct ends
//! with `origin` and `origin_lsn`).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use ferry_api::{Field, Header, Schema, SchemaKind, SourceOffset, SourceRecord};
use serde_json::{Map, Value as Json};

use crate::config::CdcConfig;
use crate::error::CdcError;
use crate::pgoutput::Datum;
use crate::types::{self, Column};

/// Debezium's placeholder for an unchanged TOASTed value that was not sent.
pub const UNAVAILABLE: &str = "__debezium_unavailable_value";

/// `op`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `r`: read by the snapshot.
    Read,
    /// `c`
    Create,
    /// `u`
    Update,
    /// `d`
    Delete,
    /// `t`
    Truncate,
}

impl Op {
    fn code(self) -> &'static str {
        match self {
            Op::Read => "r",
            Op::Create => "c",
            Op::Update => "u",
            Op::Delete => "d",
            Op::Truncate => "t",
        }
    }
}

/// The `source` block's changing fields.
#[derive(Debug, Clone)]
pub struct SourceInfo {
    /// Commit (or snapshot) time, µs since the epoch.
    pub ts_us: i64,
    /// `true|first|first_in_data_collection|last_in_data_collection|last|false`.
    pub snapshot: &'static str,
    /// `lsn_commit` of the sequence pair; `None` writes `null`.
    pub lsn_commit: Option<u64>,
    /// The change's LSN.
    pub lsn: Option<u64>,
    /// The transaction id.
    pub tx_id: Option<i64>,
}

/// The schemas of one captured table, and how to turn its tuples into structs.
#[derive(Debug, Clone)]
pub struct TableSchema {
    /// The table's schema.
    pub schema: String,
    /// The table's name.
    pub table: String,
    /// `<prefix>.<schema>.<table>`.
    pub topic: String,
    columns: Vec<Column>,
    /// Indexes of the columns in the value, in table order.
    value_columns: Vec<usize>,
    /// Indexes of the primary-key columns, in table order (Debezium's key order).
    key_columns: Vec<usize>,
    key_schema: Option<Arc<Schema>>,
    envelope: Arc<Schema>,
}

fn source_schema() -> Schema {
    let snapshot = Schema::string()
        .optional()
        .named("io.debezium.data.Enum")
        .with_version(1)
        .with_parameter(
            "allowed",
            "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental",
        )
        .with_default("false");
    Schema::struct_(
        "io.debezium.connector.postgresql.Source",
        [
            Field::new("version", Schema::string()),
            Field::new("connector", Schema::string()),
            Field::new("name", Schema::string()),
            Field::new("ts_ms", Schema::int64()),
            Field::new("snapshot", snapshot),
            Field::new("db", Schema::string()),
            Field::new("sequence", Schema::string().optional()),
            Field::new("ts_us", Schema::int64().optional()),
            Field::new("ts_ns", Schema::int64().optional()),
            Field::new("schema", Schema::string()),
            Field::new("table", Schema::string()),
            Field::new("txId", Schema::int64().optional()),
            Field::new("lsn", Schema::int64().optional()),
            Field::new("xmin", Schema::int64().optional()),
            Field::new("origin", Schema::string().optional()),
            Field::new("origin_lsn", Schema::int64().optional()),
        ],
    )
    .with_version(1)
}

fn transaction_schema() -> Schema {
    Schema::struct_(
        "event.block",
        [
            Field::new("id", Schema::string()),
            Field::new("total_order", Schema::int64()),
            Field::new("data_collection_order", Schema::int64()),
        ],
    )
    .with_version(1)
    .optional()
}

/// Debezium's context headers (`extended.headers.enabled`), in its order. The connector has one
/// task, `0`.
/// Built once per task start ([`CdcConfig`] keeps them); every record gets a copy.
pub(crate) fn context_headers(prefix: &str, run_id: &str) -> Vec<Header> {
    let header = |key: &str, value: &str| Header {
        key: format!("__debezium.context.{key}"),
        value: Json::String(value.to_owned()),
    };
    vec![
        header("connectorLogicalName", prefix),
        header("taskId", "0"),
        header("connectorName", "postgresql"),
        header("runId", run_id),
    ]
}

impl TableSchema {
    /// The schemas of `schema.table` with `columns` (in table order) under `config`.
    pub fn new(schema: &str, table: &str, columns: Vec<Column>, config: &CdcConfig) -> Self {
        let base = format!("{}.{schema}.{table}", config.prefix);
        let value_columns: Vec<usize> = (0..columns.len())
            .filter(|&i| config.captures_column(schema, table, &columns[i].name))
            .collect();
        let key_columns: Vec<usize> = (0..columns.len())
            .filter(|&i| columns[i].primary_key)
            .collect();
        let field = |i: &usize| {
            Field::new(
                columns[*i].name.clone(),
                types::schema(&columns[*i], config),
            )
        };
        let key_schema = (!key_columns.is_empty())
            .then(|| Schema::struct_(format!("{base}.Key"), key_columns.iter().map(field)));
        let value_schema =
            Schema::struct_(format!("{base}.Value"), value_columns.iter().map(field)).optional();
        let envelope = Schema::struct_(
            format!("{base}.Envelope"),
            [
                Field::new("before", value_schema.clone()),
                Field::new("after", value_schema.clone()),
                Field::new("source", source_schema()),
                Field::new("transaction", transaction_schema()),
                Field::new("op", Schema::string()),
                Field::new("ts_ms", Schema::int64().optional()),
                Field::new("ts_us", Schema::int64().optional()),
                Field::new("ts_ns", Schema::int64().optional()),
            ],
        )
        .with_version(2);
        Self {
            schema: schema.to_owned(),
            table: table.to_owned(),
            topic: base,
            columns,
            value_columns,
            key_columns,
            key_schema: key_schema.map(Arc::new),
            envelope: Arc::new(envelope),
        }
    }

    /// The columns, in table order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The indexes of the primary-key columns, in table order.
    pub fn key_columns(&self) -> &[usize] {
        &self.key_columns
    }

    fn convert(
        &self,
        i: usize,
        datum: Option<&Datum>,
        config: &CdcConfig,
    ) -> Result<Json, CdcError> {
        let column = &self.columns[i];
        let err = |value: &str, reason: String| CdcError::Value {
            table: format!("{}.{}", self.schema, self.table),
            column: column.name.clone(),
            type_oid: column.type_oid,
            value: value.chars().take(64).collect(),
            reason,
        };
        match datum {
            // A NOT NULL column without a value (left out of a key-only old tuple): Debezium's
            // fallback, as a null does not fit its required field.
            None | Some(Datum::Null) if !column.nullable => Ok(types::fallback(column, config)),
            None | Some(Datum::Null) => Ok(Json::Null),
            Some(Datum::Text(text)) => types::value(column, text, config).map_err(|r| err(text, r)),
            Some(Datum::Unchanged) => match types::schema(column, config).kind {
                SchemaKind::String => Ok(Json::String(UNAVAILABLE.to_owned())),
                SchemaKind::Bytes => Ok(Json::String(
                    base64::engine::general_purpose::STANDARD.encode(UNAVAILABLE),
                )),
                _ => Err(err(
                    "<unchanged TOAST>",
                    "an unchanged TOASTed value of this type has no placeholder yet: set REPLICA IDENTITY FULL on the table".into(),
                )),
            },
        }
    }

    fn row(
        &self,
        datums: &[Datum],
        indexes: &[usize],
        config: &CdcConfig,
    ) -> Result<Json, CdcError> {
        let mut map = Map::new();
        for &i in indexes {
            map.insert(
                self.columns[i].name.clone(),
                self.convert(i, datums.get(i), config)?,
            );
        }
        Ok(Json::Object(map))
    }

    /// The value struct of a tuple.
    pub fn value(&self, datums: &[Datum], config: &CdcConfig) -> Result<Json, CdcError> {
        self.row(datums, &self.value_columns, config)
    }

    /// The key struct of a tuple, `None` without a primary key.
    pub fn key(&self, datums: &[Datum], config: &CdcConfig) -> Result<Option<Json>, CdcError> {
        if self.key_schema.is_none() {
            return Ok(None);
        }
        self.row(datums, &self.key_columns, config).map(Some)
    }

    /// A change record (and, for a delete with `tombstones.on.delete`, its tombstone after it).
    #[allow(clippy::too_many_arguments)]
    pub fn records(
        &self,
        config: &CdcConfig,
        op: Op,
        key: Option<Json>,
        before: Option<Json>,
        after: Option<Json>,
        source: &SourceInfo,
        offset: SourceOffset,
    ) -> Vec<SourceRecord> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let now_ns = i64::try_from(now.as_nanos()).unwrap_or(i64::MAX);
        let sequence = serde_json::to_string(&[
            source.lsn_commit.map(|l| l.to_string()),
            source.lsn.map(|l| l.to_string()),
        ])
        .ok();
        // Built by moving each part in: `json!` would copy `before`, `after` and `source` again
        // through the serializer, which cost about a tenth of the worker's CPU per change.
        let mut source_value = Map::new();
        let mut put = |key: &str, value: Json| {
            source_value.insert(key.to_owned(), value);
        };
        put("version", Json::from(env!("CARGO_PKG_VERSION")));
        put("connector", Json::from("postgresql"));
        put("name", Json::from(config.prefix.as_str()));
        put("ts_ms", Json::from(source.ts_us.div_euclid(1000)));
        put("snapshot", Json::from(source.snapshot));
        put("db", Json::from(config.dbname.as_str()));
        put("sequence", sequence.map_or(Json::Null, Json::from));
        put("ts_us", Json::from(source.ts_us));
        put("ts_ns", Json::from(source.ts_us.saturating_mul(1000)));
        put("schema", Json::from(self.schema.as_str()));
        put("table", Json::from(self.table.as_str()));
        put("txId", source.tx_id.map_or(Json::Null, Json::from));
        put(
            "lsn",
            source
                .lsn
                .and_then(|l| i64::try_from(l).ok())
                .map_or(Json::Null, Json::from),
        );
        put("xmin", Json::Null);
        put("origin", Json::Null);
        put("origin_lsn", Json::Null);
        let mut value = Map::new();
        value.insert("before".to_owned(), before.unwrap_or(Json::Null));
        value.insert("after".to_owned(), after.unwrap_or(Json::Null));
        value.insert("source".to_owned(), Json::Object(source_value));
        value.insert("op".to_owned(), Json::from(op.code()));
        value.insert("ts_ms".to_owned(), Json::from(now_ns.div_euclid(1_000_000)));
        value.insert("ts_us".to_owned(), Json::from(now_ns.div_euclid(1000)));
        value.insert("ts_ns".to_owned(), Json::from(now_ns));
        value.insert("transaction".to_owned(), Json::Null);
        let value = Json::Object(value);
        let part = config.partition.clone();
        // Only a delete's tombstone needs the partition, offset and key a second time.
        let tombstone = (op == Op::Delete && config.tombstones).then(|| {
            let mut tombstone = SourceRecord::builder(self.topic.clone())
                .source_partition(part.clone())
                .source_offset(offset.clone());
            if let (Some(key), Some(schema)) = (key.clone(), self.key_schema.clone()) {
                tombstone = tombstone.key(key).key_schema(schema);
            }
            tombstone.build()
        });
        let mut record = SourceRecord::builder(self.topic.clone())
            .source_partition(part)
            .source_offset(offset)
            .value(value)
            .value_schema(self.envelope.clone());
        if let (Some(key), Some(schema)) = (key, self.key_schema.clone()) {
            record = record.key(key).key_schema(schema);
        }
        let mut out = Vec::with_capacity(2);
        out.push(record.build());
        out.extend(tombstone);
        for record in &mut out {
            record
                .headers
                .extend(config.context_headers.iter().cloned());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CdcConfig;
    use crate::offset::{StreamPosition, stream_offset};

    fn config() -> CdcConfig {
        let config: ferry_api::Config = [
            ("topic.prefix", "srv"),
            ("database.hostname", "db"),
            ("database.user", "u"),
            ("database.dbname", "shop"),
            ("database.sslmode", "disable"),
            ("column.exclude.list", "public\\.orders\\.secret"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        match CdcConfig::parse(&config) {
            Ok(config) => config,
            Err(issues) => panic!("{issues:?}"),
        }
    }

    fn column(name: &str, type_oid: u32, primary_key: bool) -> Column {
        Column {
            name: name.into(),
            type_oid,
            typmod: -1,
            nullable: !primary_key,
            primary_key,
            enum_labels: None,
            default_expr: None,
        }
    }

    #[test]
    fn a_delete_is_debeziums_envelope_then_a_tombstone_without_a_server() {
        let config = config();
        let table = TableSchema::new(
            "public",
            "orders",
            vec![
                column("id", 23, true),
                column("note", 25, false),
                column("secret", 25, false),
            ],
            &config,
        );
        let row = vec![
            Datum::Text("7".into()),
            Datum::Null,
            Datum::Text("s".into()),
        ];
        let key = table.key(&row, &config).ok().flatten();
        let before = table.value(&row, &config).ok();
        assert_eq!(key, Some(serde_json::json!({"id": 7})));
        assert_eq!(
            before,
            Some(serde_json::json!({"id": 7, "note": null})),
            "secret is excluded"
        );
        let position = StreamPosition {
            ts_usec: 1_700_000_000_123_456,
            xid: 9,
            lsn: 200,
            lsn_proc: 200,
            lsn_commit: 100,
            message_type: "DELETE",
            tx_events: Some(1),
        };
        let source = SourceInfo {
            ts_us: position.ts_usec,
            snapshot: "false",
            lsn_commit: Some(100),
            lsn: Some(200),
            tx_id: Some(9),
        };
        let records = table.records(
            &config,
            Op::Delete,
            key,
            before,
            None,
            &source,
            stream_offset(&position),
        );
        assert_eq!(records.len(), 2);
        let value = records[0].value.clone().unwrap_or_default();
        assert_eq!(value["op"], "d");
        assert_eq!(value["source"]["sequence"], "[\"100\",\"200\"]");
        assert_eq!(value["source"]["ts_ms"], 1_700_000_000_123_i64);
        assert_eq!(value["source"]["ts_ns"], 1_700_000_000_123_456_000_i64);
        assert_eq!(value["source"]["db"], "shop");
        assert_eq!(records[0].topic, "srv.public.orders");
        let envelope = records[0]
            .value_schema
            .clone()
            .unwrap_or_else(|| Arc::new(Schema::string()));
        assert_eq!(envelope.version, Some(2));
        let source_schema = envelope.field("source").map(|f| f.schema.clone());
        let names: Vec<String> = source_schema
            .iter()
            .flat_map(|s| s.fields().iter().map(|f| f.name.clone()))
            .collect();
        assert_eq!(
            names,
            [
                "version",
                "connector",
                "name",
                "ts_ms",
                "snapshot",
                "db",
                "sequence",
                "ts_us",
                "ts_ns",
                "schema",
                "table",
                "txId",
                "lsn",
                "xmin",
                "origin",
                "origin_lsn"
            ]
        );
        assert!(
            records[1].value.is_none() && records[1].key == records[0].key,
            "the tombstone"
        );
        assert_eq!(records[1].source_offset, records[0].source_offset);
    }
}
