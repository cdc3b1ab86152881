//! The shared store conformance suite against `PostgresOffsetStore` on the real PostgreSQL server
//! (127.0.0.1:5432, started by scripts/install-test-deps): each case on a fresh table, dropped after.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod store_support;

use async_trait::async_trait;
use ferry_offsets::conformance::{StoreHarness, run_conformance};
use ferry_offsets::{OffsetBackingStore, StoreError};
use ferry_postgres::store::PostgresOffsetStore;
use store_support::Scratch;

/// One fresh table; `open` is a new store (a new connection) on it, so a "reopen" reads what the
/// previous store committed.
struct Harness {
    scratch: Scratch,
}

#[async_trait]
impl StoreHarness for Harness {
    async fn open(&mut self) -> Result<Box<dyn OffsetBackingStore>, StoreError> {
        Ok(Box::new(
            PostgresOffsetStore::open(self.scratch.config()).await?,
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance() {
    run_conformance(|| Harness {
        scratch: Scratch::table("ferry_conformance"),
    })
    .await;
}
