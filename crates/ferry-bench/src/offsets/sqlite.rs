//! The SQLite contender: one table of (key, value) blobs in WAL mode with `synchronous=FULL` (every
//! commit durable), one transaction of upserts per flush — what a careful user would build instead.

use std::collections::HashMap;
use std::path::Path;

use rusqlite::{Connection, params};

use crate::BenchResult;

/// An offsets table in one SQLite database file.
pub struct SqliteStore {
    conn: Connection,
}

fn sql_error(what: &str, path: &Path) -> impl Fn(rusqlite::Error) -> String {
    let path = path.display().to_string();
    let what = what.to_owned();
    move |e| format!("SQLite {what} on {path}: {e}")
}

impl SqliteStore {
    /// Opens (creating) the database at `path`.
    pub fn open(path: &Path) -> BenchResult<Self> {
        let conn = Connection::open(path).map_err(sql_error("open", path))?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             PRAGMA synchronous=FULL;
             CREATE TABLE IF NOT EXISTS offsets (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;",
        )
        .map_err(sql_error("set-up", path))?;
        Ok(Self { conn })
    }

    /// One durable transaction of upserts.
    pub fn flush(&mut self, entries: &[(Vec<u8>, Vec<u8>)]) -> BenchResult<()> {
        let tx = self
            .conn
            .transaction()
            .map_err(|e| crate::BenchError::from(format!("SQLite begin: {e}")))?;
        {
            let mut upsert = tx
                .prepare_cached(
                    "INSERT INTO offsets (key, value) VALUES (?1, ?2)
                     ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                )
                .map_err(|e| crate::BenchError::from(format!("SQLite prepare: {e}")))?;
            for (key, value) in entries {
                upsert
                    .execute(params![key, value])
                    .map_err(|e| crate::BenchError::from(format!("SQLite upsert: {e}")))?;
            }
        }
        tx.commit()
            .map_err(|e| crate::BenchError::from(format!("SQLite commit: {e}")))
    }

    /// Every row, read into memory (what a store that serves lookups from memory does at start-up).
    pub fn load_all(&self) -> BenchResult<HashMap<Vec<u8>, Vec<u8>>> {
        let mut select = self
            .conn
            .prepare("SELECT key, value FROM offsets")
            .map_err(|e| crate::BenchError::from(format!("SQLite prepare: {e}")))?;
        let rows = select
            .query_map([], |row| {
                Ok((row.get::<_, Vec<u8>>(0)?, row.get::<_, Vec<u8>>(1)?))
            })
            .map_err(|e| crate::BenchError::from(format!("SQLite scan: {e}")))?;
        let mut all = HashMap::new();
        for row in rows {
            let (key, value) =
                row.map_err(|e| crate::BenchError::from(format!("SQLite scan: {e}")))?;
            all.insert(key, value);
        }
        Ok(all)
    }

    /// Point lookups of `keys` in one read transaction, values in key order.
    pub fn lookup(&self, keys: &[Vec<u8>]) -> BenchResult<Vec<Option<Vec<u8>>>> {
        let mut select = self
            .conn
            .prepare_cached("SELECT value FROM offsets WHERE key = ?1")
            .map_err(|e| crate::BenchError::from(format!("SQLite prepare: {e}")))?;
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            let mut rows = select
                .query(params![key])
                .map_err(|e| crate::BenchError::from(format!("SQLite lookup: {e}")))?;
            let value = match rows
                .next()
                .map_err(|e| crate::BenchError::from(format!("SQLite lookup: {e}")))?
            {
                Some(row) => Some(row.get::<_, Vec<u8>>(0).map_err(|e| e.to_string())?),
                None => None,
            };
            out.push(value);
        }
        Ok(out)
    }
}
