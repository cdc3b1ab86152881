//! Support for the CDC tests against the real PostgreSQL at 127.0.0.1:5432 (database `test`, user
//! `postgres`, trust authentication, `wal_level=logical`): a client, a table, slot and publication
//! that drop themselves (also when a test fails), and ferry-testkit's task harness.

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ferry_api::{Config, SourceRecord, SourceTask};
pub use ferry_testkit::{TaskHarness, config};
use tokio_postgres::{Client, NoTls};

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

const LIBPQ: &str = "host=127.0.0.1 port=5432 user=postgres dbname=test";

pub async fn client() -> Result<Client, Box<dyn std::error::Error>> {
    let (client, connection) = tokio_postgres::connect(LIBPQ, NoTls).await.map_err(|e| {
        format!("cannot connect to the test PostgreSQL at 127.0.0.1:5432 ({e}); run ./scripts/install-test-deps")
    })?;
    tokio::spawn(connection);
    Ok(client)
}

/// A unique lower-case name (tables, slots and publications of parallel tests never collide).
pub fn unique(test: &str) -> String {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "cdc_{test}_{}_{}_{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// One test's table, slot and publication, all named `name`; dropped on drop.
pub struct Fixture {
    pub name: String,
}

impl Fixture {
    /// Creates table `public.<name>` with `columns`.
    pub async fn new(
        client: &Client,
        test: &str,
        columns: &str,
    ) -> Result<Self, Box<dyn std::error::Error>> {
        let name = unique(test);
        client
            .batch_execute(&format!("CREATE TABLE public.{name} ({columns})"))
            .await?;
        Ok(Self { name })
    }

    /// A connector config streaming this table through its own slot and publication.
    pub fn config(&self, extra: &[(&str, &str)]) -> Config {
        let include = format!("public.{}", self.name);
        let mut config = config(&[
            ("connector.class", "PostgresCdcSource"),
            ("topic.prefix", "srv"),
            ("database.hostname", "127.0.0.1"),
            ("database.port", "5432"),
            ("database.user", "postgres"),
            ("database.dbname", "test"),
            ("slot.name", &self.name),
            ("publication.name", &self.name),
            ("publication.autocreate.mode", "filtered"),
            ("table.include.list", &include),
            ("status.update.interval.ms", "100"),
        ]);
        for (k, v) in extra {
            config.insert((*k).to_owned(), (*v).to_owned());
        }
        config
    }

    pub fn topic(&self) -> String {
        format!("srv.public.{}", self.name)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            runtime.block_on(async {
                let Ok((client, connection)) = tokio_postgres::connect(LIBPQ, NoTls).await else { return };
                tokio::spawn(connection);
                // The slot may still be active for a moment after its task stopped.
                for _ in 0..50 {
                    let active = client
                        .query(
                            "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots \
                             WHERE slot_name = $1 AND active_pid IS NOT NULL",
                            &[&name],
                        )
                        .await;
                    let dropped = client
                        .execute(
                            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1",
                            &[&name],
                        )
                        .await;
                    if active.is_ok() && dropped.is_ok() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                let _ = client
                    .batch_execute(&format!(
                        "DROP PUBLICATION IF EXISTS {name}; SET lock_timeout = '10s'; DROP TABLE IF EXISTS public.{name}"
                    ))
                    .await;
            });
        })
        .join();
    }
}

/// Polls until `n` records arrived (fails after 20 s).
pub async fn poll_n(
    task: &mut dyn SourceTask,
    n: usize,
) -> Result<Vec<SourceRecord>, Box<dyn std::error::Error>> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut out = Vec::new();
    while out.len() < n {
        if Instant::now() > deadline {
            return Err(format!(
                "only {} of {n} records arrived within 20 s: {out:#?}",
                out.len()
            )
            .into());
        }
        out.extend(sent(task.poll().await?));
    }
    Ok(out)
}

/// The records the runtime would send: offset-only checkpoints (`SourceRecord::offset_only`) are
/// only committed, never sent.
fn sent(records: Vec<SourceRecord>) -> impl Iterator<Item = SourceRecord> {
    records.into_iter().filter(|r| !r.offset_only)
}

/// Polls for `wait` and returns everything (to check nothing more comes).
pub async fn poll_for(
    task: &mut dyn SourceTask,
    wait: Duration,
) -> Result<Vec<SourceRecord>, Box<dyn std::error::Error>> {
    let deadline = Instant::now() + wait;
    let mut out = Vec::new();
    while Instant::now() < deadline {
        out.extend(sent(task.poll().await?));
    }
    Ok(out)
}

/// `after.<field>` of a record's value.
pub fn after<'a>(record: &'a SourceRecord, field: &str) -> &'a serde_json::Value {
    &record.value.as_ref().unwrap_or(&serde_json::Value::Null)["after"][field]
}

/// `op` of a record's value (`None` for a tombstone).
pub fn op(record: &SourceRecord) -> Option<&str> {
    record.value.as_ref().and_then(|v| v["op"].as_str())
}

/// The slot's confirmed_flush_lsn as a number.
pub async fn confirmed_flush(
    client: &Client,
    slot: &str,
) -> Result<Option<u64>, Box<dyn std::error::Error>> {
    let row = client
        .query_opt(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await?;
    Ok(row
        .and_then(|r| r.get::<_, Option<String>>(0))
        .and_then(|t| {
            let (hi, lo) = t.split_once('/')?;
            Some((u64::from_str_radix(hi, 16).ok()? << 32) | u64::from_str_radix(lo, 16).ok()?)
        }))
}
