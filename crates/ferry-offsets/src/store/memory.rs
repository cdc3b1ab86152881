//! An in-memory store, for tests and embedding. Nothing survives the process.

use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use crate::error::StoreError;
use crate::store::{OffsetBackingStore, OffsetWrite, StoredOffset};
use crate::table::OffsetTable;

/// An in-memory [`OffsetBackingStore`]. Clones share the same offsets, so a clone is a "reopen".
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    table: Arc<Mutex<OffsetTable>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn table(&self) -> MutexGuard<'_, OffsetTable> {
        // A panic while holding the lock cannot leave the table half-updated (apply is one call per
        // write and the batch is applied under one guard), so a poisoned lock is still consistent.
        self.table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl OffsetBackingStore for MemoryStore {
    fn describe(&self) -> String {
        "memory".to_owned()
    }

    async fn get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let table = self.table();
        Ok(keys
            .iter()
            .map(|k| table.get(k).map(<[u8]>::to_vec))
            .collect())
    }

    async fn set(&self, batch: &[OffsetWrite]) -> Result<(), StoreError> {
        let mut table = self.table();
        for write in batch {
            table.apply(&write.key, write.value.as_deref());
        }
        Ok(())
    }

    async fn connector_offsets(&self, connector: &str) -> Result<Vec<StoredOffset>, StoreError> {
        Ok(self.table().connector_entries(connector))
    }

    async fn entries(&self) -> Result<Vec<StoredOffset>, StoreError> {
        Ok(self.table().entries())
    }

    async fn visit_sorted(
        &self,
        connector: Option<&str>,
        f: &mut (dyn for<'k, 'v> FnMut(&'k [u8], &'v [u8]) + Send),
    ) -> Result<(), StoreError> {
        self.table().visit_sorted(connector, f);
        Ok(())
    }
}
