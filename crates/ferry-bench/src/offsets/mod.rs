//! The offset store contenders: Ferry's `FileStore`, SQLite, a Kafka Connect-style full rewrite and the
//! `fdatasync` floor, measured on the same fixture.

pub mod fixture;
pub mod flush;
pub mod lookup;
pub mod rewrite;
pub mod sqlite;
pub mod startup;

/// Contender names, as the report and the plot show them.
pub const FERRY: &str = "Ferry FileStore";
pub const SQLITE: &str = "SQLite (WAL, synchronous=FULL)";
pub const REWRITE: &str = "full rewrite (Kafka Connect style)";
pub const FLOOR: &str = "append + fdatasync floor";
