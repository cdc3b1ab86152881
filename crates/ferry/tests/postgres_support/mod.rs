//! Support for the `offset.storage=postgres` process tests: the test server (127.0.0.1:5432, database
//! `test`, user `postgres`), offsets tables named per test and dropped afterwards, and `psql` to look
//! at them.
//!
//! (Reconstructed after it was overwritten by mistake; the PostgresSource process tests have their own
//! `pg_source_support`.)

#![allow(dead_code)] // each test file uses a different part

use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The test server as the worker's `offset.storage.postgres.url`.
pub const URL: &str = "postgresql://postgres@127.0.0.1:5432/test";

/// Runs one SQL statement with `psql -At` on the test database; returns its output without the
/// trailing newline (rows on lines, columns separated by `|`). Panics if psql fails.
pub fn psql(sql: &str) -> String {
    let out = Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            "5432",
            "-U",
            "postgres",
            "-d",
            "test",
            "-X",
            "-A",
            "-t",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            sql,
        ])
        .output()
        .unwrap_or_else(|e| panic!("run psql (is PostgreSQL's client installed?): {e}"));
    assert!(
        out.status.success(),
        "psql -c {sql:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
}

/// An offsets table name owned by one test (lower case, unique); the table is dropped with the guard.
pub struct PgTable {
    pub name: String,
}

impl PgTable {
    /// A fresh name `prefix_<pid>_<time>_<n>`; the table itself is created by the store.
    pub fn new(prefix: &str) -> PgTable {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() % 1_000_000_000_000);
        PgTable {
            name: format!(
                "{prefix}_{}_{nanos}_{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ),
        }
    }

    /// The worker entries keeping offsets in this table.
    pub fn worker_entries(&self) -> Vec<(&'static str, String)> {
        vec![
            ("offset.storage", "postgres".to_owned()),
            ("offset.storage.postgres.url", URL.to_owned()),
            ("offset.storage.postgres.table", self.name.clone()),
        ]
    }
}

impl Drop for PgTable {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                "5432",
                "-U",
                "postgres",
                "-d",
                "test",
                "-X",
                "-q",
                "-c",
                &format!("DROP TABLE IF EXISTS \"{}\"", self.name),
            ])
            .output();
    }
}
