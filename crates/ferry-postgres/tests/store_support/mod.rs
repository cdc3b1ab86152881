//! Shared by the offset store tests: the test server's URL, unique table names that are dropped when
//! the test ends (also when it fails), and a plain client for looking at the tables.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use ferry_api::ConnectMap;
use ferry_offsets::{OffsetWrite, encode_key, encode_value};
use ferry_postgres::store::{PostgresOffsetStore, PostgresOffsetStoreConfig};
use tokio_postgres::{Client, NoTls};

/// The test server: `FERRY_TEST_POSTGRES_URL`, default the local server's `test` database
/// (`scripts/install-test-deps` starts it).
pub fn url() -> String {
    std::env::var("FERRY_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgresql://postgres@127.0.0.1:5432/test".to_owned())
}

/// A name no other test (or earlier run) uses: `prefix_<pid>_<time>_<n>`, lower case.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() % 1_000_000_000_000);
    format!(
        "{prefix}_{}_{nanos}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A plain connection to the test server.
pub async fn client() -> Client {
    let url = url();
    let (client, connection) = tokio_postgres::connect(&url, NoTls)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "cannot connect to the test PostgreSQL at {url} ({e}); run scripts/install-test-deps, \
                 which starts it"
            )
        });
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// A table name (or schema) owned by one test: dropped (`DROP … IF EXISTS … CASCADE`) when this is
/// dropped, on a thread of its own so it also runs while a failed test unwinds.
pub struct Scratch {
    /// The table's name (`name` or `schema.name`), as the store is configured with it.
    pub table: String,
    drop_sql: String,
}

impl Scratch {
    /// A fresh table name in the default schema.
    pub fn table(prefix: &str) -> Scratch {
        let table = unique_name(prefix);
        Scratch {
            drop_sql: format!("DROP TABLE IF EXISTS \"{table}\" CASCADE"),
            table,
        }
    }

    /// A fresh schema (created now) and a table name in it; the schema is dropped with everything in
    /// it.
    pub async fn schema_table(prefix: &str, table: &str) -> Scratch {
        let schema = unique_name(prefix);
        client()
            .await
            .batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
            .await
            .unwrap_or_else(|e| panic!("create schema {schema}: {e}"));
        Scratch {
            table: format!("{schema}.{table}"),
            drop_sql: format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"),
        }
    }

    /// The table name quoted for SQL.
    pub fn quoted(&self) -> String {
        self.table
            .split('.')
            .map(|part| format!("\"{part}\""))
            .collect::<Vec<_>>()
            .join(".")
    }

    /// The store's configuration for this table.
    pub fn config(&self) -> PostgresOffsetStoreConfig {
        PostgresOffsetStoreConfig::new(url()).with_table(self.table.clone())
    }

    /// Opens a store on this table.
    pub async fn open(&self) -> PostgresOffsetStore {
        PostgresOffsetStore::open(self.config())
            .await
            .unwrap_or_else(|e| panic!("open {}: {e}", self.table))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let sql = self.drop_sql.clone();
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async {
                let (client, connection) = tokio_postgres::connect(&url(), NoTls)
                    .await
                    .map_err(|e| e.to_string())?;
                tokio::spawn(async move {
                    let _ = connection.await;
                });
                client.batch_execute(&sql).await.map_err(|e| e.to_string())
            })
        })
        .join();
        if let Ok(Err(e)) = dropped {
            eprintln!("cleanup failed ({}): {e}", self.drop_sql);
        }
    }
}

/// A partition map of integer fields, in the given order.
pub fn map(fields: &[(&str, i64)]) -> ConnectMap {
    let mut m = ConnectMap::new();
    for (k, v) in fields {
        m.insert(*k, *v).unwrap();
    }
    m
}

/// The key of `connector`'s partition with these fields, in this order.
pub fn key(connector: &str, fields: &[(&str, i64)]) -> Vec<u8> {
    encode_key(connector, Some(&map(fields)))
}

/// `{"position":v}`.
pub fn value(v: i64) -> Vec<u8> {
    encode_value(&map(&[("position", v)]))
}

/// A write of `{"position":v}`.
pub fn put(key: &[u8], v: i64) -> OffsetWrite {
    OffsetWrite {
        key: key.to_vec(),
        value: Some(value(v)),
    }
}

/// A tombstone.
pub fn tombstone(key: &[u8]) -> OffsetWrite {
    OffsetWrite {
        key: key.to_vec(),
        value: None,
    }
}
