//! One worker per connector: the session advisory lock of (table, connector) that a store takes the
//! first time it reads or writes a connector's offsets (see the module documentation of the store).

use std::time::Duration;

use ferry_offsets::StoreError;
use tokio::sync::MutexGuard;
use tokio_postgres::Client;

use super::{PostgresOffsetStore, connected};

/// The seed of `hashtextextended` for a connector's advisory lock key (a 64-bit lock, its own space).
const CONNECTOR_LOCK_SEED: i64 = 0x4665_7243; // "FerC"

/// How long a connector's lock is tried before another holder is reported.
const LOCK_GRACE: Duration = Duration::from_secs(2);

impl PostgresOffsetStore {
    pub(super) fn held_connectors(&self) -> Vec<String> {
        self.held
            .lock()
            .map(|h| h.iter().cloned().collect())
            .unwrap_or_default()
    }

    pub(super) fn forget(&self, connector: &str) {
        if let Ok(mut held) = self.held.lock() {
            held.remove(connector);
        }
    }

    /// Takes the advisory lock of each connector in `connectors` this store does not hold yet.
    pub(super) async fn claim(
        &self,
        guard: &mut MutexGuard<'_, Option<Client>>,
        connectors: impl Iterator<Item = &str>,
    ) -> Result<(), StoreError> {
        if !self.connector_locks {
            return Ok(());
        }
        let client = connected(guard, self)?;
        for connector in connectors {
            let known = self
                .held
                .lock()
                .map(|h| h.contains(connector))
                .unwrap_or(false);
            if !known {
                self.try_lock(client, connector).await?;
                if let Ok(mut held) = self.held.lock() {
                    held.insert(connector.to_owned());
                }
            }
        }
        Ok(())
    }

    /// Takes (table, `connector`)'s session advisory lock, or says who holds it.
    pub(super) async fn try_lock(
        &self,
        client: &Client,
        connector: &str,
    ) -> Result<(), StoreError> {
        let what = "locking the connector's offsets";
        // Unambiguous: a JSON array of the table and the connector.
        let key = serde_json::json!([self.table.quoted(), connector]).to_string();
        let row = client
            .query_one(
                "SELECT pg_try_advisory_lock(hashtextextended($1, $2)), hashtextextended($1, $2)",
                &[&key, &CONNECTOR_LOCK_SEED],
            )
            .await
            .map_err(|e| self.db_error(what, e))?;
        let mut taken: bool = row.try_get(0).map_err(|e| self.db_error(what, e))?;
        let lock: i64 = row.try_get(1).map_err(|e| self.db_error(what, e))?;
        // A store of this connector dropped a moment ago (a restart in the same process) may still
        // be closing its session: give it a little time.
        let deadline = std::time::Instant::now() + LOCK_GRACE;
        while !taken && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            taken = client
                .query_one("SELECT pg_try_advisory_lock($1)", &[&lock])
                .await
                .and_then(|row| row.try_get(0))
                .map_err(|e| self.db_error(what, e))?;
        }
        if taken {
            return Ok(());
        }
        let holder = client
            .query_opt(
                "SELECT a.pid, coalesce(host(a.client_addr), 'local'), a.application_name, \
                 to_char(a.backend_start, 'YYYY-MM-DD HH24:MI:SS TZ') \
                 FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid \
                 WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 \
                 AND l.classid::int8 = ($1::int8 >> 32) & 4294967295 AND l.objid::int8 = $1::int8 & 4294967295 \
                 LIMIT 1",
                &[&lock],
            )
            .await
            .ok()
            .flatten()
            .map(|r| {
                let text = |i: usize| r.try_get::<_, Option<String>>(i).ok().flatten().unwrap_or_default();
                format!(
                    " (held by the PostgreSQL session pid {} from {}, application {:?}, connected since {})",
                    r.try_get::<_, i32>(0).unwrap_or_default(),
                    text(1),
                    text(2),
                    text(3)
                )
            })
            .unwrap_or_default();
        Err(self.backend(
            format!(
                "the offsets of connector {connector:?} are in use by another Ferry worker or process{holder}. \
                 Two workers running one connector on one offsets table would both read and write \
                 everything; stop the other one, or give this connector another name"
            ),
            false,
        ))
    }
}
