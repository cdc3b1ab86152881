//! [`PostgresOffsetStore`]: `offset.storage=postgres`, an [`OffsetBackingStore`] in a PostgreSQL table.
//!
//! # Contract
//!
//! - **Layout.** One row per (connector, partition): the primary key `logical_key` is the partition's
//!   canonical key, `["connector",{partition}]` with the partition in
//!   [`ferry_offsets::canonical_partition`] form (fields sorted, integer width ignored), so keys that
//!   differ only in field order are one row, as in every other store; the last write wins. The row
//!   keeps the key bytes and the value bytes exactly as last written (`raw_key`, `value`, both
//!   `bytea`), the connector name (`connector`, for per-connector reads) and the store order of the
//!   last write (`seq`, an identity column; `written_at`, the time of the write, for people). A key
//!   that is not a valid offset key (another writer's garbage) is kept under its raw bytes as
//!   `logical_key`, with `connector` NULL; a raw key that does not decode can never equal a canonical
//!   key, which always decodes.
//! - **Writes.** Each [`set`](OffsetBackingStore::set) is one transaction: a `DELETE` of the
//!   tombstoned rows and one `INSERT … ON CONFLICT DO UPDATE` of the rest. Rows the batch does not
//!   name are never touched (unlike Debezium's JDBC store, which deletes every row and inserts them
//!   again). `Ok` means the transaction committed, durable as the server's `synchronous_commit` makes
//!   it. Within a batch the later write of a partition wins, and `seq` follows the batch order.
//! - **Reads** see what committed transactions wrote: [`get`](OffsetBackingStore::get) is one query
//!   for all its keys; [`connector_offsets`](OffsetBackingStore::connector_offsets) and
//!   [`entries`](OffsetBackingStore::entries) are ordered by `seq`.
//!   [`history`](OffsetBackingStore::history) is the trait's default, the live entries: the table
//!   keeps no overwritten values or tombstones.
//! - **The table** is created when missing (with an index on `(connector, seq)`). An existing table
//!   with another shape is refused, never changed.
//! - **Connection.** One connection, opened with the store and opened again by the next operation
//!   after it breaks. Connection failures are retriable [`StoreError::Backend`]s, except TLS failures
//!   (a refused certificate, a server without TLS under `sslmode=require`), which are permanent.
//! - **TLS** as libpq: `sslmode` (`disable`, `allow`, `prefer` — the default —, `require`, `verify-ca`,
//!   `verify-full`), `sslrootcert`, `sslcert` and `sslkey` in the URL or its `key=value` form.
//! - **One worker per connector.** The first [`get`](OffsetBackingStore::get) or
//!   [`set`](OffsetBackingStore::set) naming a connector takes a session advisory lock for (table,
//!   connector) on the store's connection, held for the store's lifetime (taken again after a
//!   reconnection). Another store — another worker — reading or writing the same connector's offsets in
//!   the same table is refused with an error naming the holder, so two workers running one connector
//!   cannot both read and write everything. Reading for inspection
//!   ([`connector_offsets`](OffsetBackingStore::connector_offsets), [`entries`](OffsetBackingStore::entries))
//!   takes no lock. Different connectors may share a table across workers.

mod lock;
mod table;

use std::collections::HashMap;
use std::error::Error as _;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use ferry_offsets::{
    OffsetBackingStore, OffsetWrite, StoreError, StoredOffset, canonical_partition, decode_key,
};
use tokio::sync::{Mutex, MutexGuard};
use tokio_postgres::config::Host;
use tokio_postgres::{Client, GenericClient};

use crate::tls::{TlsOptions, split_libpq};

use table::{FoundColumn, Statements, TableName, shape_problems};

/// The default `offset.storage.postgres.table`.
pub const DEFAULT_TABLE: &str = "ferry_offsets";

/// How long connecting may take when the URL sets no `connect_timeout`.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The `application_name` the store's connection reports when the URL sets none.
const APPLICATION_NAME: &str = "ferry-offset-store";

/// Rows per statement: a larger batch is written by several statements of the same transaction.
const ROWS_PER_STATEMENT: usize = 10_000;

/// The first key of the advisory lock taken while the table is created ("FerY"); the second is the
/// hash of the table name.
const CREATE_LOCK_KEY: i32 = 0x4665_7259;

/// Where a [`PostgresOffsetStore`] keeps its offsets.
///
/// `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresOffsetStoreConfig {
    /// `offset.storage.postgres.url`: a libpq connection string, as a URL
    /// (`postgresql://user:password@host:5432/db`) or as `key=value` pairs
    /// (`host=127.0.0.1 user=postgres dbname=test`).
    pub url: String,
    /// `offset.storage.postgres.table` (default `ferry_offsets`): `table` or `schema.table`, lower case.
    pub table: String,
    /// Whether the store takes each connector's advisory lock (see the module documentation); on
    /// by default. Off only for tools and tests that open several stores of one connector on purpose.
    pub connector_locks: bool,
}

impl PostgresOffsetStoreConfig {
    /// The store at `url`, in the default table.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            table: DEFAULT_TABLE.to_owned(),
            connector_locks: true,
        }
    }

    /// The same store, taking connectors' advisory locks or not.
    pub fn with_connector_locks(mut self, on: bool) -> Self {
        self.connector_locks = on;
        self
    }

    /// The same store in table `table`.
    pub fn with_table(mut self, table: impl Into<String>) -> Self {
        self.table = table.into();
        self
    }
}

impl fmt::Debug for PostgresOffsetStoreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target =
            match split_libpq(&self.url).map(|(url, _)| url.parse::<tokio_postgres::Config>()) {
                Ok(Ok(config)) => server(&config),
                _ => "[unparsable url]".to_owned(),
            };
        f.debug_struct("PostgresOffsetStoreConfig")
            .field("server", &target)
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

/// `host:port/db` (first host), without user or password.
fn server(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    let more = if config.get_hosts().len() > 1 {
        format!(" (+{} hosts)", config.get_hosts().len() - 1)
    } else {
        String::new()
    };
    format!("{host}:{port}/{db}{more}")
}

/// An [`OffsetBackingStore`] in a PostgreSQL table. See the module documentation for its guarantees.
pub struct PostgresOffsetStore {
    describe: String,
    table: TableName,
    connect: tokio_postgres::Config,
    /// `sslmode` and the certificates of the URL.
    tls: TlsOptions,
    sql: Statements,
    /// The connection; `None` after it broke, until the next operation connects again.
    client: Mutex<Option<Client>>,
    /// [`PostgresOffsetStoreConfig::connector_locks`].
    connector_locks: bool,
    /// The connectors whose advisory lock this store's connection holds.
    held: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

impl fmt::Debug for PostgresOffsetStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresOffsetStore")
            .field("store", &self.describe)
            .finish_non_exhaustive()
    }
}

/// The partition a raw key names: its canonical key and connector, or the raw bytes (and no connector)
/// for a key that does not decode.
fn identity(raw_key: &[u8]) -> (Vec<u8>, Option<String>) {
    match decode_key(raw_key) {
        Ok(key) => {
            let connector = serde_json::Value::String(key.connector.clone()).to_string();
            let partition = canonical_partition(key.partition.as_ref());
            let mut logical = Vec::with_capacity(connector.len() + partition.len() + 3);
            logical.push(b'[');
            logical.extend_from_slice(connector.as_bytes());
            logical.push(b',');
            logical.extend_from_slice(&partition);
            logical.push(b']');
            (logical, Some(key.connector))
        }
        Err(_) => (raw_key.to_vec(), None),
    }
}

/// An error and its causes, `: `-separated (tokio-postgres's `Display` leaves the cause out).
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Whether trying again may succeed: the connection broke, the server is starting or stopping, or the
/// transaction lost a conflict.
fn is_retriable(error: &tokio_postgres::Error) -> bool {
    match error.code() {
        // No SQLSTATE: retriable when the connection failed or broke (I/O, closed, timed out); not
        // for a configuration, authentication, TLS or type conversion problem.
        None => {
            error.is_closed()
                || error
                    .source()
                    .is_some_and(|cause| cause.is::<std::io::Error>())
                || error.to_string() == "timeout waiting for server"
        }
        // Connection exception, transaction rollback (serialization failure, deadlock), insufficient
        // resources, operator intervention (shutdown, cannot connect now, statement timeout).
        Some(code) => ["08", "40", "53", "57"]
            .iter()
            .any(|class| code.code().starts_with(class)),
    }
}

impl PostgresOffsetStore {
    /// Connects, creates the table (and its index) when it is missing, and checks the shape of an
    /// existing one.
    ///
    /// # Errors
    /// [`StoreError::Backend`]: the URL or table name is invalid; the server cannot be reached (retriable);
    /// the table cannot be created; or an existing table is not a Ferry offsets table (it is left as it
    /// is).
    pub async fn open(config: PostgresOffsetStoreConfig) -> Result<Self, StoreError> {
        let (url, tls) = split_libpq(&config.url).map_err(|message| {
            StoreError::backend(
                format!("postgres table {}", config.table.trim()),
                format!("offset.storage.postgres.url {message}"),
                false,
            )
        })?;
        let mut connect: tokio_postgres::Config = url.parse().map_err(|e| {
            StoreError::backend(
                format!("postgres table {}", config.table.trim()),
                format!(
                    "offset.storage.postgres.url is not a valid PostgreSQL connection string ({}); write \
                     it as postgresql://user@host:5432/dbname or as host=… user=… dbname=…",
                    chain(&e)
                ),
                false,
            )
            .with_source(e)
        })?;
        let table = TableName::parse(&config.table).map_err(|message| {
            StoreError::backend(
                format!("postgres at {}", server(&connect)),
                format!("offset.storage.postgres.table: {message}"),
                false,
            )
        })?;
        if connect.get_connect_timeout().is_none() {
            connect.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
        }
        if connect.get_application_name().is_none() {
            connect.application_name(APPLICATION_NAME);
        }
        let store = PostgresOffsetStore {
            describe: format!("postgres table {table} at {}", server(&connect)),
            sql: Statements::new(&table),
            table,
            connect,
            tls,
            client: Mutex::new(None),
            connector_locks: config.connector_locks,
            held: std::sync::Mutex::new(std::collections::BTreeSet::new()),
        };
        let mut client = store.client().await?;
        let result = store.prepare_table(&mut client).await;
        store.check(&mut client, result)?;
        drop(client);
        Ok(store)
    }

    fn backend(&self, message: impl Into<String>, retriable: bool) -> StoreError {
        StoreError::backend(self.describe.as_str(), message, retriable)
    }

    fn db_error(&self, what: &str, error: tokio_postgres::Error) -> StoreError {
        let retriable = is_retriable(&error);
        let hint = if retriable {
            "this is usually temporary (the server is unreachable, restarting, or the transaction \
             conflicted); it will be retried"
        } else {
            "retrying will not help; check the table and the privileges of the connecting user"
        };
        self.backend(
            format!("{what} failed: {}; {hint}", chain(&error)),
            retriable,
        )
        .with_source(error)
    }

    /// The connection, opened now if there is none or it broke.
    async fn client(&self) -> Result<MutexGuard<'_, Option<Client>>, StoreError> {
        let mut guard = self.client.lock().await;
        if guard.as_ref().is_none_or(Client::is_closed) {
            *guard = None;
            let (client, connection) = crate::tls::connect(&self.connect, &self.tls, |e| chain(e))
                .await
                .map_err(|failure| {
                    let retriable = !failure.permanent
                        && failure.error.as_ref().is_some_and(is_retriable);
                    let hint = if failure.permanent {
                        "fix the ssl settings of offset.storage.postgres.url (or the server's)"
                    } else if retriable {
                        "check that PostgreSQL is running and reachable at the host and port of \
                         offset.storage.postgres.url; it will be retried"
                    } else {
                        "the server refused the connection; check the user, password and database of \
                         offset.storage.postgres.url"
                    };
                    let error = self.backend(
                        format!(
                            "connecting failed ({}): {}; {hint}",
                            self.tls.describe(),
                            failure.message
                        ),
                        retriable,
                    );
                    match failure.error {
                        Some(e) => error.with_source(e),
                        None => error,
                    }
                })?;
            let describe = self.describe.clone();
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    // The next operation reports the failure; this only records when it happened.
                    tracing::debug!(store = %describe, "offset store connection closed: {}", chain(&e));
                }
            });
            // A new session: the connectors' locks went with the old one.
            let held = self.held_connectors();
            for connector in held {
                if let Err(e) = self.try_lock(&client, &connector).await {
                    self.forget(&connector);
                    tracing::error!(store = %self.describe, "after reconnecting: {e}");
                }
            }
            *guard = Some(client);
        }
        Ok(guard)
    }

    /// Passes `result` on; after an error, forgets a connection that broke so the next operation
    /// connects again.
    fn check<T>(
        &self,
        guard: &mut MutexGuard<'_, Option<Client>>,
        result: Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if result.is_err() && guard.as_ref().is_some_and(Client::is_closed) {
            **guard = None;
        }
        result
    }

    /// Creates the table if it is missing; checks the shape of one that exists.
    async fn prepare_table(
        &self,
        guard: &mut MutexGuard<'_, Option<Client>>,
    ) -> Result<(), StoreError> {
        let client = connected(guard, self)?;
        let quoted = self.table.quoted();
        let mut oid = self.table_oid(client).await?;
        if oid.is_none() {
            // Created under an advisory lock, so two workers starting together do not race on the
            // catalog; only when missing, so a user without CREATE privilege can use an existing table.
            let tx = client
                .transaction()
                .await
                .map_err(|e| self.db_error("creating the table", e))?;
            tx.execute(
                "SELECT pg_advisory_xact_lock($1, hashtext($2))",
                &[&CREATE_LOCK_KEY, &quoted],
            )
            .await
            .map_err(|e| self.db_error("creating the table", e))?;
            // Another store may have created it while this one waited for the lock.
            let created = self.table_oid(&tx).await?.is_none();
            if created {
                for statement in [&self.sql.create_table, &self.sql.create_index] {
                    tx.batch_execute(statement)
                        .await
                        .map_err(|e| self.db_error("creating the table", e))?;
                }
            }
            tx.commit()
                .await
                .map_err(|e| self.db_error("creating the table", e))?;
            if created {
                tracing::info!(store = %self.describe, "created the offsets table {}", self.table);
            }
            oid = self.table_oid(client).await?;
        }
        let Some(oid) = oid else {
            return Err(self.backend(
                "the table was created but cannot be found (is the schema on the search_path?)",
                false,
            ));
        };
        self.check_shape(client, oid).await
    }

    /// The table's OID, or `None` when it does not exist.
    ///
    /// Reads `pg_class` rather than only calling `to_regclass`: opening `pg_class` locks it, which
    /// makes the backend apply the catalog changes other sessions committed meanwhile (a bare
    /// `to_regclass` may answer from a stale cache entry saying the table does not exist, even after
    /// the advisory lock was granted to this session because another one created the table).
    async fn table_oid(&self, client: &impl GenericClient) -> Result<Option<u32>, StoreError> {
        client
            .query_opt(
                "SELECT c.oid FROM pg_catalog.pg_class c WHERE c.oid = to_regclass($1::text)",
                &[&self.table.quoted()],
            )
            .await
            .and_then(|row| row.map(|row| row.try_get::<_, u32>(0)).transpose())
            .map_err(|e| self.db_error("looking up the table", e))
    }

    async fn check_shape(&self, client: &Client, oid: u32) -> Result<(), StoreError> {
        let kind: i8 = client
            .query_one("SELECT relkind FROM pg_class WHERE oid = $1", &[&oid])
            .await
            .and_then(|row| row.try_get(0))
            .map_err(|e| self.db_error("checking the table", e))?;
        let kind = kind as u8 as char;
        if kind != 'r' && kind != 'p' {
            return Err(self.refused(&format!("it is not a table (pg_class.relkind {kind:?})")));
        }
        let columns: Vec<FoundColumn> = client
            .query(
                "SELECT attname::text, format_type(atttypid, atttypmod), attnotnull, \
                 (attidentity <> '' OR atthasdef) \
                 FROM pg_attribute WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped \
                 ORDER BY attnum",
                &[&oid],
            )
            .await
            .and_then(|rows| {
                rows.iter()
                    .map(|row| {
                        Ok(FoundColumn {
                            name: row.try_get(0)?,
                            type_name: row.try_get(1)?,
                            not_null: row.try_get(2)?,
                            has_default: row.try_get(3)?,
                        })
                    })
                    .collect()
            })
            .map_err(|e| self.db_error("checking the table's columns", e))?;
        let primary_key: Option<String> = client
            .query_opt(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint \
                 WHERE conrelid = $1 AND contype = 'p'",
                &[&oid],
            )
            .await
            .and_then(|row| row.map(|row| row.try_get(0)).transpose())
            .map_err(|e| self.db_error("checking the table's primary key", e))?;
        match shape_problems(&columns, primary_key.as_deref()) {
            None => Ok(()),
            Some(problems) => Err(self.refused(&problems)),
        }
    }

    fn refused(&self, problems: &str) -> StoreError {
        self.backend(
            format!(
                "table {} exists but is not a Ferry offsets table: {problems}. Ferry did not change it. \
                 Set offset.storage.postgres.table to another table (Ferry creates it), or rename or \
                 drop this one.",
                self.table
            ),
            false,
        )
    }

    async fn query_offsets(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<StoredOffset>, StoreError> {
        let mut guard = self.client().await?;
        let result = async {
            let client = connected(&mut guard, self)?;
            let rows = client
                .query(sql, params)
                .await
                .map_err(|e| self.db_error(what, e))?;
            rows.iter()
                .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
                .collect::<Result<Vec<StoredOffset>, tokio_postgres::Error>>()
                .map_err(|e| self.db_error(what, e))
        }
        .await;
        self.check(&mut guard, result)
    }

    async fn write(
        &self,
        guard: &mut MutexGuard<'_, Option<Client>>,
        deletes: &[Vec<u8>],
        upserts: &Upserts,
    ) -> Result<(), StoreError> {
        let client = connected(guard, self)?;
        let what = "writing the offsets (the transaction was rolled back)";
        let tx = client
            .transaction()
            .await
            .map_err(|e| self.db_error(what, e))?;
        for chunk in deletes.chunks(ROWS_PER_STATEMENT) {
            tx.execute(&self.sql.delete, &[&chunk])
                .await
                .map_err(|e| self.db_error(what, e))?;
        }
        let rows = upserts.logical.len();
        let mut start = 0;
        while start < rows {
            let end = (start + ROWS_PER_STATEMENT).min(rows);
            tx.execute(
                &self.sql.upsert,
                &[
                    &&upserts.logical[start..end],
                    &&upserts.connector[start..end],
                    &&upserts.raw_key[start..end],
                    &&upserts.value[start..end],
                ],
            )
            .await
            .map_err(|e| self.db_error(what, e))?;
            start = end;
        }
        tx.commit().await.map_err(|e| {
            self.db_error(
                "committing the offsets (whether the transaction committed is unknown; the next flush \
                 writes the same offsets again)",
                e,
            )
        })
    }
}

/// The connected client in `guard` ([`PostgresOffsetStore::client`] put it there).
fn connected<'g>(
    guard: &'g mut MutexGuard<'_, Option<Client>>,
    store: &PostgresOffsetStore,
) -> Result<&'g mut Client, StoreError> {
    guard
        .as_mut()
        .ok_or_else(|| store.backend("not connected; it will be retried", true))
}

/// The rows a batch upserts, column by column, in the order of their last write in the batch.
#[derive(Default)]
struct Upserts {
    logical: Vec<Vec<u8>>,
    connector: Vec<Option<String>>,
    raw_key: Vec<Vec<u8>>,
    value: Vec<Vec<u8>>,
}

#[async_trait]
impl OffsetBackingStore for PostgresOffsetStore {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    async fn get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let (logical, connectors): (Vec<Vec<u8>>, std::collections::BTreeSet<Option<String>>) =
            keys.iter().map(|k| identity(k)).unzip();
        let mut guard = self.client().await?;
        let result = async {
            self.claim(&mut guard, connectors.iter().flatten().map(String::as_str))
                .await?;
            let client = connected(&mut guard, self)?;
            let rows = client
                .query(&self.sql.get, &[&logical])
                .await
                .map_err(|e| self.db_error("reading offsets", e))?;
            let mut found: HashMap<Vec<u8>, Vec<u8>> = HashMap::with_capacity(rows.len());
            for row in &rows {
                let (key, value) = row
                    .try_get(0)
                    .and_then(|k| Ok((k, row.try_get(1)?)))
                    .map_err(|e| self.db_error("reading offsets", e))?;
                found.insert(key, value);
            }
            Ok(logical.iter().map(|k| found.get(k).cloned()).collect())
        }
        .await;
        self.check(&mut guard, result)
    }

    async fn set(&self, batch: &[OffsetWrite]) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        // One statement cannot update a row twice: keep each partition's last write, in batch order.
        let mut last: HashMap<Vec<u8>, (usize, Option<String>)> =
            HashMap::with_capacity(batch.len());
        for (i, write) in batch.iter().enumerate() {
            let (logical, connector) = identity(&write.key);
            last.insert(logical, (i, connector));
        }
        let mut finals: Vec<(usize, Vec<u8>, Option<String>)> = last
            .into_iter()
            .map(|(logical, (i, connector))| (i, logical, connector))
            .collect();
        finals.sort_unstable_by_key(|(i, ..)| *i);
        let mut deletes = Vec::new();
        let mut upserts = Upserts::default();
        let connectors: std::collections::BTreeSet<String> =
            finals.iter().filter_map(|(_, _, c)| c.clone()).collect();
        for (i, logical, connector) in finals {
            let write = &batch[i];
            match &write.value {
                None => deletes.push(logical),
                Some(value) => {
                    upserts.logical.push(logical);
                    upserts.connector.push(connector);
                    upserts.raw_key.push(write.key.clone());
                    upserts.value.push(value.clone());
                }
            }
        }
        let mut guard = self.client().await?;
        let result = async {
            self.claim(&mut guard, connectors.iter().map(String::as_str))
                .await?;
            self.write(&mut guard, &deletes, &upserts).await
        }
        .await;
        self.check(&mut guard, result)
    }

    async fn connector_offsets(&self, connector: &str) -> Result<Vec<StoredOffset>, StoreError> {
        self.query_offsets(
            "reading the connector's offsets",
            &self.sql.connector_offsets,
            &[&connector],
        )
        .await
    }

    async fn entries(&self) -> Result<Vec<StoredOffset>, StoreError> {
        self.query_offsets("reading every offset", &self.sql.entries, &[])
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_logical() {
        let (ab, c) = identity(br#"["c",{"a":1,"b":2}]"#);
        let (ba, _) = identity(br#"["c", {"b":2, "a":1}]"#);
        assert_eq!(ab, ba);
        assert_eq!(c.as_deref(), Some("c"));
        assert_eq!(ab, br#"["c",{"a":1,"b":2}]"#.to_vec());
        let (float, _) = identity(br#"["c",{"a":1.0,"b":2}]"#);
        assert_ne!(float, ab, "1.0 is not 1");
        let (null, c) = identity(br#"["c\"x",null]"#);
        assert_eq!(null, br#"["c\"x",null]"#.to_vec());
        assert_eq!(c.as_deref(), Some("c\"x"));
        let (raw, c) = identity(b"garbage");
        assert_eq!((raw, c), (b"garbage".to_vec(), None));
    }

    #[test]
    fn debug_hides_the_password() {
        let config =
            PostgresOffsetStoreConfig::new("postgresql://ferry:s3cret@db.example:6543/offsets");
        let shown = format!("{config:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("db.example:6543/offsets"), "{shown}");
        let kv = PostgresOffsetStoreConfig::new("host=h user=u password=s3cret dbname=d");
        let shown = format!("{kv:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("h:5432/d"), "{shown}");
    }
}
