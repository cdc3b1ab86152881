//! # ferry-postgres
//!
//! Ferry and PostgreSQL: the PostgresSource connector ([`source`]) and the Postgres offset store
//! ([`store`], `offset.storage=postgres`), registered with a worker as [`PostgresStorePlugin`].

mod plugin;
mod redact;
pub mod source;
pub mod store;
mod tls;

pub use plugin::{
    DEFAULT_OFFSET_STORAGE_POSTGRES_TABLE, OFFSET_STORAGE_POSTGRES_TABLE,
    OFFSET_STORAGE_POSTGRES_URL, PostgresStorePlugin, PostgresStoreSpec, PostgresUrl,
};
pub use redact::{CONNECTION_STRING_REDACTOR, JDBC_URL_REDACTOR};
