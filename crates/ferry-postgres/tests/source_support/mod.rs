//! Support for the PostgresSource tests against the real PostgreSQL at 127.0.0.1:5432 (database
//! `test`, user `postgres`, trust authentication): a client, tables that drop themselves, and
//! ferry-testkit's task harness (a memory offset store written through the real `OffsetWriter`)
//! under this crate's connector name and poll deadline.

#![allow(dead_code, unused_imports)] // each test file uses a different part (and re-export)

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ferry_api::{Config, ConnectError, SourceOffset, SourcePartition, SourceRecord, SourceTask};
use ferry_postgres::source::PostgresSourceConnector;
pub use ferry_testkit::{CountingReader, TaskHarness, config, poll_for, poll_up_to};
use tokio_postgres::{Client, NoTls};

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

pub const CONNECTOR: &str = "pg-source";
/// The test database as a JDBC URL.
pub const JDBC_URL: &str = "jdbc:postgresql://127.0.0.1:5432/test";
const LIBPQ: &str = "host=127.0.0.1 port=5432 user=postgres dbname=test";

/// A client of the test database; its connection runs on the current runtime.
pub async fn client() -> Result<Client, Box<dyn std::error::Error>> {
    let (client, connection) = tokio_postgres::connect(LIBPQ, NoTls).await.map_err(|e| {
        format!(
            "cannot connect to the test PostgreSQL at 127.0.0.1:5432 ({e}); start it with \
             `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`"
        )
    })?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// A unique table name for one test.
pub fn unique_name(test: &str) -> String {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "ferry_src_{test}_{}_{}_{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// A table (in schema `public`) dropped when the guard is dropped, even when the test panics.
pub struct Table {
    pub name: String,
}

impl Table {
    /// Creates `name` with the column definitions `columns` (SQL).
    pub async fn create(
        client: &Client,
        test: &str,
        columns: &str,
    ) -> Result<Table, Box<dyn std::error::Error>> {
        let name = unique_name(test);
        client
            .batch_execute(&format!("CREATE TABLE public.{name} ({columns})"))
            .await?;
        Ok(Table { name })
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // Bounded: a task that was never stopped may still hold a lock on the table.
        let sql = format!(
            "SET lock_timeout = '10s'; DROP TABLE IF EXISTS public.{}",
            self.name
        );
        // A thread of its own: Drop may run inside a runtime, which cannot be blocked on.
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                if let Ok((client, connection)) = tokio_postgres::connect(LIBPQ, NoTls).await {
                    tokio::spawn(connection);
                    let _ = client.batch_execute(&sql).await;
                }
            });
        })
        .join();
    }
}

/// A connector config for `table` in `mode`, polling every 50 ms, plus `extra` (which override).
pub fn table_config(table: &str, mode: &str, extra: &[(&str, &str)]) -> Config {
    let mut config = config(&[
        ("connection.url", JDBC_URL),
        ("connection.user", "postgres"),
        ("mode", mode),
        ("table.whitelist", table),
        ("topic.prefix", "pg-"),
        ("poll.interval.ms", "50"),
    ]);
    for (k, v) in extra {
        config.insert((*k).to_owned(), (*v).to_owned());
    }
    config
}

/// One connector's offsets in a memory store: [`TaskHarness`] under [`CONNECTOR`].
#[derive(Clone)]
pub struct Offsets(TaskHarness);

impl Offsets {
    pub fn new() -> Self {
        Self(TaskHarness::new(CONNECTOR))
    }

    /// The committed offset of `partition`.
    pub async fn get(
        &self,
        partition: &SourcePartition,
    ) -> Result<Option<SourceOffset>, Box<dyn std::error::Error>> {
        Ok(self.0.offset(partition).await?)
    }

    /// A started task of the PostgresSource connector with `config` (a task config), and its reader.
    pub async fn start(
        &self,
        config: Config,
    ) -> Result<(Box<dyn SourceTask>, Arc<CountingReader>), ConnectError> {
        self.0.start(&PostgresSourceConnector::new(), config).await
    }
}

impl Deref for Offsets {
    type Target = TaskHarness;

    fn deref(&self) -> &TaskHarness {
        &self.0
    }
}

/// Polls until `n` records arrived (fails after 20 s), returning exactly what the polls returned.
pub async fn poll_n(
    task: &mut dyn SourceTask,
    n: usize,
) -> Result<Vec<SourceRecord>, Box<dyn std::error::Error>> {
    Ok(ferry_testkit::poll_n(task, n, Duration::from_secs(20)).await?)
}

/// The record values as JSON.
pub fn values(records: &[SourceRecord]) -> Vec<serde_json::Value> {
    records
        .iter()
        .map(|r| r.value.clone().unwrap_or(serde_json::Value::Null))
        .collect()
}

/// The integer field `key` of each record's value.
pub fn ids(records: &[SourceRecord], key: &str) -> Vec<i64> {
    records
        .iter()
        .map(|r| {
            r.value
                .as_ref()
                .and_then(|v| v.get(key))
                .and_then(serde_json::Value::as_i64)
                .unwrap_or(i64::MIN)
        })
        .collect()
}

/// A record's offset as text (`{"incrementing":3}`), or `<none>`.
pub fn offset_text(record: &SourceRecord) -> String {
    record
        .source_offset
        .as_ref()
        .map_or_else(|| "<none>".to_owned(), ToString::to_string)
}

/// A schema (with whatever is created in it) dropped when the guard is dropped.
pub struct SchemaGuard {
    pub name: String,
}

impl SchemaGuard {
    /// Creates a schema with a unique name for `test`.
    pub async fn create(client: &Client, test: &str) -> Result<Self, Box<dyn std::error::Error>> {
        let name = unique_name(test);
        client
            .batch_execute(&format!("CREATE SCHEMA {name}"))
            .await?;
        Ok(Self { name })
    }
}

impl Drop for SchemaGuard {
    fn drop(&mut self) {
        let sql = format!(
            "SET lock_timeout = '10s'; DROP SCHEMA IF EXISTS {} CASCADE",
            self.name
        );
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                if let Ok((client, connection)) = tokio_postgres::connect(LIBPQ, NoTls).await {
                    tokio::spawn(connection);
                    let _ = client.batch_execute(&sql).await;
                }
            });
        })
        .join();
    }
}

/// The struct schema field `name` of a record's value schema.
pub fn field_schema(record: &SourceRecord, name: &str) -> Option<ferry_api::Schema> {
    record
        .value_schema
        .as_ref()
        .and_then(|s| s.field(name))
        .map(|f| f.schema.clone())
}

/// Log lines captured from the current thread (where a `#[tokio::test]` body and the task's polls
/// run), for asserting on WARNs.
#[derive(Clone, Default)]
pub struct Logs(Arc<std::sync::Mutex<Vec<u8>>>);

impl Logs {
    /// Captures everything at INFO and above on this thread until the guard is dropped.
    pub fn capture() -> (Logs, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .with_writer(logs.clone())
            .finish();
        (logs.clone(), tracing::subscriber::set_default(subscriber))
    }

    /// Everything logged so far.
    pub fn text(&self) -> String {
        self.0
            .lock()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut b) = self.0.lock() {
            b.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// The first non-empty poll (fails after 20 s): polls are empty while a transaction open elsewhere in
/// the database (another test's) could still commit rows below the ones waiting.
pub async fn first_batch(
    task: &mut dyn SourceTask,
) -> Result<Vec<SourceRecord>, Box<dyn std::error::Error>> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let batch = task.poll().await?;
        if !batch.is_empty() {
            return Ok(batch);
        }
        if Instant::now() > deadline {
            return Err("no records arrived in 20 s".into());
        }
    }
}
