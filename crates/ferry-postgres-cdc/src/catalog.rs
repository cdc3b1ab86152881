//! The ordinary SQL connection: slot checks, publication management, table shapes.

use tokio_postgres::Client;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::config::{AutocreateMode, CdcConfig};
use crate::error::CdcError;
use crate::offset::parse_lsn;
use crate::types::{Column, SESSION_OPTIONS};

/// Where the stream looks up a table's columns when a Relation message announces it (the
/// catalog in production, a fixed answer in tests of the stream without a server).
#[async_trait::async_trait]
pub trait ColumnSource: Send + Sync {
    /// The columns of `schema.table` in table order, with nullability and primary key.
    async fn columns(&self, schema: &str, table: &str) -> Result<Vec<Column>, CdcError>;
}

#[async_trait::async_trait]
impl ColumnSource for Db {
    async fn columns(&self, schema: &str, table: &str) -> Result<Vec<Column>, CdcError> {
        Db::columns(self, schema, table).await
    }
}

/// A connected client; its connection task ends when the client is dropped.
pub struct Db {
    /// The client.
    pub client: Client,
    server: String,
}

/// What `pg_replication_slots` says of the slot.
#[derive(Debug, Clone)]
pub struct SlotInfo {
    /// The output plugin.
    pub plugin: Option<String>,
    /// The database the slot decodes.
    pub database: Option<String>,
    /// Up to where the slot's consumer confirmed.
    pub confirmed_flush: Option<u64>,
    /// `reserved`, `extended`, `unreserved` or `lost`.
    pub wal_status: Option<String>,
}

/// Quotes an identifier for SQL.
pub fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl Db {
    /// Connects with the session settings the value parsers expect.
    ///
    /// # Errors
    /// The server cannot be reached or refuses the user.
    pub async fn connect(config: &CdcConfig) -> Result<Self, CdcError> {
        let mut pg = tokio_postgres::Config::new();
        pg.host(&config.host)
            .port(config.port)
            .user(&config.user)
            .dbname(&config.dbname)
            .options(SESSION_OPTIONS)
            .application_name(format!("ferry-cdc-sql-{}", config.slot));
        if !config.password.is_empty() {
            pg.password(&config.password);
        }
        pg.ssl_mode(config.tls.postgres_mode());
        let server = config.server();
        // Checked when the configuration was parsed; a file changed since is reported here.
        let tls = config
            .tls
            .client_config()
            .map_err(|reason| CdcError::Unsafe(format!("TLS settings of {server}: {reason}")))?;
        let (client, connection) =
            pg.connect(MakeRustlsConnect::new(tls))
                .await
                .map_err(|source| CdcError::Sql {
                    what: format!("connecting (database.sslmode={:?})", config.tls.mode),
                    server: server.clone(),
                    source,
                })?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Self { client, server })
    }

    fn err(&self, what: impl Into<String>) -> impl FnOnce(tokio_postgres::Error) -> CdcError + '_ {
        let what = what.into();
        move |source| CdcError::Sql {
            what,
            server: self.server.clone(),
            source,
        }
    }

    /// The slot, `None` when it does not exist.
    ///
    /// # Errors
    /// The query failed.
    pub async fn slot(&self, slot: &str) -> Result<Option<SlotInfo>, CdcError> {
        let rows = self
            .client
            .query(
                "SELECT plugin::text, database::text, confirmed_flush_lsn::text, wal_status::text \
                 FROM pg_replication_slots WHERE slot_name = $1",
                &[&slot],
            )
            .await
            .map_err(self.err("reading pg_replication_slots"))?;
        Ok(rows.first().map(|row| SlotInfo {
            plugin: row.get(0),
            database: row.get(1),
            confirmed_flush: row.get::<_, Option<String>>(2).and_then(|t| parse_lsn(&t)),
            wal_status: row.get(3),
        }))
    }

    /// Whether a walsender still holds the slot (`false` when the slot does not exist).
    ///
    /// # Errors
    /// The query failed.
    pub async fn slot_active(&self, slot: &str) -> Result<bool, CdcError> {
        let row = self
            .client
            .query_opt(
                "SELECT active FROM pg_replication_slots WHERE slot_name = $1",
                &[&slot],
            )
            .await
            .map_err(self.err("reading pg_replication_slots"))?;
        Ok(row.is_some_and(|r| r.get::<_, bool>(0)))
    }

    /// Drops the slot (it must not be active).
    ///
    /// # Errors
    /// The statement failed.
    pub async fn drop_slot(&self, slot: &str) -> Result<(), CdcError> {
        self.client
            .execute("SELECT pg_drop_replication_slot($1)", &[&slot])
            .await
            .map_err(self.err(format!("dropping replication slot {slot}")))?;
        Ok(())
    }

    /// The tables `config` captures, as (schema, table), ordered.
    ///
    /// # Errors
    /// The query failed.
    pub async fn captured_tables(
        &self,
        config: &CdcConfig,
    ) -> Result<Vec<(String, String)>, CdcError> {
        let rows = self
            .client
            .query(
                "SELECT n.nspname::text, c.relname::text FROM pg_class c \
                 JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE c.relkind IN ('r', 'p') ORDER BY 1, 2",
                &[],
            )
            .await
            .map_err(self.err("listing tables"))?;
        Ok(rows
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
            .filter(|(s, t)| config.captures_table(s, t))
            .collect())
    }

    /// The columns of `schema.table` in table order, with nullability and primary key.
    ///
    /// # Errors
    /// The query failed.
    pub async fn columns(&self, schema: &str, table: &str) -> Result<Vec<Column>, CdcError> {
        let rows = self
            .client
            .query(
                "SELECT a.attname::text, a.atttypid::oid, a.atttypmod, NOT a.attnotnull, \
                        COALESCE(a.attnum = ANY(i.indkey), false), \
                        (SELECT string_agg(e.enumlabel::text, ',' ORDER BY e.enumsortorder) \
                         FROM pg_enum e WHERE e.enumtypid = a.atttypid), \
                        (SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d \
                         WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum \
                           AND a.attgenerated = '') \
                 FROM pg_attribute a \
                 JOIN pg_class c ON c.oid = a.attrelid \
                 JOIN pg_namespace n ON n.oid = c.relnamespace \
                 LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary \
                 WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped \
                 ORDER BY a.attnum",
                &[&schema, &table],
            )
            .await
            .map_err(self.err(format!("reading the columns of {schema}.{table}")))?;
        Ok(rows
            .iter()
            .map(|r| Column {
                name: r.get(0),
                type_oid: r.get(1),
                typmod: r.get(2),
                nullable: r.get(3),
                primary_key: r.get(4),
                enum_labels: r.get(5),
                default_expr: r.get(6),
            })
            .collect())
    }

    /// Creates or extends the publication per `publication.autocreate.mode`; returns the DDL run
    /// (each also logged). `filtered` only ever adds tables: tables someone else added stay.
    ///
    /// # Errors
    /// The publication is missing with `disabled`, or a statement failed.
    pub async fn ensure_publication(&self, config: &CdcConfig) -> Result<Vec<String>, CdcError> {
        let name = &config.publication;
        let row = self
            .client
            .query_opt(
                "SELECT puballtables FROM pg_publication WHERE pubname = $1",
                &[name],
            )
            .await
            .map_err(self.err("reading pg_publication"))?;
        let mut ddl = Vec::new();
        match (row.map(|r| r.get::<_, bool>(0)), config.autocreate) {
            (None, AutocreateMode::Disabled) => {
                return Err(CdcError::Unsafe(format!(
                    "publication {name:?} does not exist on {} and publication.autocreate.mode=disabled: \
                     create it (CREATE PUBLICATION {} FOR TABLE …) or set publication.autocreate.mode",
                    self.server,
                    ident(name)
                )));
            }
            (None, AutocreateMode::AllTables) => {
                ddl.push(format!("CREATE PUBLICATION {} FOR ALL TABLES", ident(name)));
            }
            (None, AutocreateMode::Filtered) => {
                let tables = self.captured_tables(config).await?;
                if tables.is_empty() {
                    return Err(CdcError::Unsafe(format!(
                        "no table of {} matches table.include.list/table.exclude.list: nothing to put in publication {name:?}",
                        self.server
                    )));
                }
                let list: Vec<String> = tables
                    .iter()
                    .map(|(s, t)| format!("{}.{}", ident(s), ident(t)))
                    .collect();
                ddl.push(format!(
                    "CREATE PUBLICATION {} FOR TABLE {}",
                    ident(name),
                    list.join(", ")
                ));
            }
            (Some(true), _) | (Some(_), AutocreateMode::Disabled | AutocreateMode::AllTables) => {}
            (Some(false), AutocreateMode::Filtered) => {
                let present = self
                    .client
                    .query("SELECT schemaname::text, tablename::text FROM pg_publication_tables WHERE pubname = $1", &[name])
                    .await
                    .map_err(self.err("reading pg_publication_tables"))?;
                let present: Vec<(String, String)> =
                    present.iter().map(|r| (r.get(0), r.get(1))).collect();
                for (s, t) in self.captured_tables(config).await? {
                    if !present.contains(&(s.clone(), t.clone())) {
                        ddl.push(format!(
                            "ALTER PUBLICATION {} ADD TABLE {}.{}",
                            ident(name),
                            ident(&s),
                            ident(&t)
                        ));
                    }
                }
            }
        }
        for statement in &ddl {
            tracing::info!(publication = %name, "PostgresCdcSource: running {statement}");
            self.client
                .batch_execute(statement)
                .await
                .map_err(self.err(format!("{statement} (the user needs CREATE on the database, and superuser for FOR ALL TABLES)")))?;
        }
        Ok(ddl)
    }
}
