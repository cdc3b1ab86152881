//! The shared store conformance suite against [`MemoryStore`]: a clone is a "reopen".

use async_trait::async_trait;
use ferry_offsets::conformance::{StoreHarness, run_conformance};
use ferry_offsets::{MemoryStore, OffsetBackingStore, StoreError};

struct MemoryHarness {
    store: MemoryStore,
}

#[async_trait]
impl StoreHarness for MemoryHarness {
    async fn open(&mut self) -> Result<Box<dyn OffsetBackingStore>, StoreError> {
        Ok(Box::new(self.store.clone()))
    }
}

#[tokio::test]
async fn memory_store_passes_the_conformance_suite() {
    run_conformance(|| MemoryHarness {
        store: MemoryStore::new(),
    })
    .await;
}
