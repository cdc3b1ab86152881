//! # ferry-postgres
//!
//! Ferry and PostgreSQL: the PostgresSource connector ([`source`]) and the Postgres offset store
//! ([`store`], `offset.storage=postgres`).

pub mod source;
pub mod store;
