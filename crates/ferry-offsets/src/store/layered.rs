//! A connector's own offset store over the worker's (Kafka Connect's `ConnectorOffsetBackingStore`,
//! KIP-618): a connector with `offsets.storage.topic` reads from its own store first and falls back
//! to the worker's for partitions its own store does not hold (offsets committed before the
//! connector had a topic of its own), and writes to its own store first.
//!
//! Tombstones are written in Kafka Connect's three phases (KAFKA-15018): a tombstone written only to
//! the connector's store would let the worker's older value show through the fallback and bring a
//! deleted offset back. So a batch with tombstones writes (1) its tombstones to the worker's store,
//! then (2) the whole batch to the connector's store, then (3) its values to the worker's store; a
//! failure of (1) or (2) fails the write, one of (3) is only logged (the connector's store has it).
//! A batch without tombstones skips (1).

use std::sync::Arc;

use async_trait::async_trait;

use crate::error::StoreError;
use crate::store::{NamedStore, OffsetBackingStore, OffsetWrite, StoredOffset, StoredRecord};
use crate::table::OffsetTable;

/// A connector's own store (`primary`) over the worker's (`secondary`).
pub struct LayeredStore {
    primary: Arc<dyn OffsetBackingStore>,
    secondary: Arc<dyn OffsetBackingStore>,
}

impl LayeredStore {
    /// Reads `primary` first and falls back to `secondary`; writes as the module says.
    pub fn new(
        primary: Arc<dyn OffsetBackingStore>,
        secondary: Arc<dyn OffsetBackingStore>,
    ) -> Self {
        Self { primary, secondary }
    }

    /// Both stores' live offsets in one table, the primary's winning.
    fn merge(secondary: Vec<StoredOffset>, primary: Vec<StoredOffset>) -> OffsetTable {
        let mut table = OffsetTable::default();
        for (key, value) in secondary.iter().chain(&primary) {
            table.apply(key, Some(value));
        }
        table
    }
}

impl std::fmt::Debug for LayeredStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

#[async_trait]
impl OffsetBackingStore for LayeredStore {
    fn describe(&self) -> String {
        format!(
            "{} (falling back to {})",
            self.primary.describe(),
            self.secondary.describe()
        )
    }

    async fn get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let (primary, secondary) =
            tokio::try_join!(self.primary.get(keys), self.secondary.get(keys))?;
        Ok(primary
            .into_iter()
            .zip(secondary)
            .map(|(own, worker)| own.or(worker))
            .collect())
    }

    async fn set(&self, batch: &[OffsetWrite]) -> Result<(), StoreError> {
        let (tombstones, values): (Vec<&OffsetWrite>, Vec<&OffsetWrite>) =
            batch.iter().partition(|w| w.value.is_none());
        if !tombstones.is_empty() {
            let tombstones: Vec<OffsetWrite> = tombstones.into_iter().cloned().collect();
            self.secondary.set(&tombstones).await?;
        }
        self.primary.set(batch).await?;
        if !values.is_empty() {
            let values: Vec<OffsetWrite> = values.into_iter().cloned().collect();
            if let Err(e) = self.secondary.set(&values).await {
                // As Kafka Connect: the connector's store holds them, and it is read first.
                tracing::warn!(
                    "offsets committed to {} could not be copied to {}: {e}",
                    self.primary.describe(),
                    self.secondary.describe()
                );
            }
        }
        Ok(())
    }

    async fn connector_offsets(&self, connector: &str) -> Result<Vec<StoredOffset>, StoreError> {
        let (primary, secondary) = tokio::try_join!(
            self.primary.connector_offsets(connector),
            self.secondary.connector_offsets(connector)
        )?;
        Ok(Self::merge(secondary, primary).connector_entries(connector))
    }

    async fn entries(&self) -> Result<Vec<StoredOffset>, StoreError> {
        let (primary, secondary) =
            tokio::try_join!(self.primary.entries(), self.secondary.entries())?;
        Ok(Self::merge(secondary, primary).entries())
    }

    /// The task's writer is the connector store's (fenced there); the worker's store gets its copy
    /// unfenced, as Kafka Connect's secondary writes are — a fenced task's commit fails on the
    /// connector's store first, so no copy of it is made.
    async fn open_task_writer(
        &self,
        fencing_id: &str,
    ) -> Result<Option<Arc<dyn OffsetBackingStore>>, StoreError> {
        Ok(self
            .primary
            .open_task_writer(fencing_id)
            .await?
            .map(|writer| {
                Arc::new(Self::new(writer, self.secondary.clone())) as Arc<dyn OffsetBackingStore>
            }))
    }

    async fn open_named(&self, name: &str) -> Result<NamedStore, StoreError> {
        self.secondary.open_named(name).await
    }

    /// The connector's own store's history (the worker's is the worker's).
    async fn history(&self) -> Result<Vec<StoredRecord>, StoreError> {
        self.primary.history().await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::store::memory::MemoryStore;

    fn key(p: &str) -> Vec<u8> {
        format!(r#"["c",{{"p":"{p}"}}]"#).into_bytes()
    }

    fn value(n: u32) -> Vec<u8> {
        format!(r#"{{"n":{n}}}"#).into_bytes()
    }

    fn put(p: &str, n: u32) -> OffsetWrite {
        OffsetWrite {
            key: key(p),
            value: Some(value(n)),
        }
    }

    fn tombstone(p: &str) -> OffsetWrite {
        OffsetWrite {
            key: key(p),
            value: None,
        }
    }

    /// A memory store whose writes can be made to fail.
    #[derive(Default)]
    struct Flaky {
        inner: MemoryStore,
        fail: AtomicBool,
    }

    #[async_trait]
    impl OffsetBackingStore for Flaky {
        fn describe(&self) -> String {
            "flaky".to_owned()
        }
        async fn get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
            self.inner.get(keys).await
        }
        async fn set(&self, batch: &[OffsetWrite]) -> Result<(), StoreError> {
            if self.fail.load(Ordering::SeqCst) {
                return Err(StoreError::backend("flaky", "down", true));
            }
            self.inner.set(batch).await
        }
        async fn connector_offsets(&self, c: &str) -> Result<Vec<StoredOffset>, StoreError> {
            self.inner.connector_offsets(c).await
        }
        async fn entries(&self) -> Result<Vec<StoredOffset>, StoreError> {
            self.inner.entries().await
        }
    }

    fn stores() -> (Arc<Flaky>, Arc<Flaky>, LayeredStore) {
        let (own, worker) = (Arc::new(Flaky::default()), Arc::new(Flaky::default()));
        let layered = LayeredStore::new(own.clone(), worker.clone());
        (own, worker, layered)
    }

    #[tokio::test]
    async fn reads_prefer_the_connector_store_and_fall_back_to_the_worker_store() {
        let (own, worker, layered) = stores();
        worker.set(&[put("a", 1), put("b", 1)]).await.unwrap();
        own.set(&[put("a", 2)]).await.unwrap();
        let got = layered.get(&[key("a"), key("b"), key("c")]).await.unwrap();
        assert_eq!(got, vec![Some(value(2)), Some(value(1)), None]);
        let mut listed = layered.connector_offsets("c").await.unwrap();
        listed.sort();
        assert_eq!(listed, vec![(key("a"), value(2)), (key("b"), value(1))]);
        assert_eq!(layered.entries().await.unwrap().len(), 2);
    }

    #[tokio::test]
    async fn values_go_to_both_stores_and_a_failed_copy_to_the_worker_store_is_only_logged() {
        let (own, worker, layered) = stores();
        layered.set(&[put("a", 1)]).await.unwrap();
        assert_eq!(own.get(&[key("a")]).await.unwrap(), vec![Some(value(1))]);
        assert_eq!(worker.get(&[key("a")]).await.unwrap(), vec![Some(value(1))]);
        worker.fail.store(true, Ordering::SeqCst);
        layered.set(&[put("a", 2)]).await.unwrap();
        assert_eq!(
            layered.get(&[key("a")]).await.unwrap(),
            vec![Some(value(2))]
        );
    }

    /// KAFKA-15018: a tombstone that reached only the connector's store would let the worker's older
    /// value show through. Tombstones go to the worker's store first; if that fails, nothing is
    /// written and the write fails.
    #[tokio::test]
    async fn a_tombstone_never_lets_the_worker_stores_older_value_come_back() {
        let (own, worker, layered) = stores();
        layered.set(&[put("a", 1), put("b", 1)]).await.unwrap();

        worker.fail.store(true, Ordering::SeqCst);
        let failed = layered.set(&[tombstone("a"), put("b", 2)]).await;
        assert!(failed.is_err(), "phase 1 failed: the write fails");
        assert_eq!(
            own.get(&[key("a"), key("b")]).await.unwrap(),
            vec![Some(value(1)), Some(value(1))],
            "nothing reached the connector's store"
        );

        worker.fail.store(false, Ordering::SeqCst);
        own.fail.store(true, Ordering::SeqCst);
        assert!(
            layered.set(&[tombstone("a")]).await.is_err(),
            "phase 2 failed"
        );
        own.fail.store(false, Ordering::SeqCst);
        // The worker's copy is gone already, the connector's still there: reads still see it, and
        // the retried delete removes it for good.
        assert_eq!(
            layered.get(&[key("a")]).await.unwrap(),
            vec![Some(value(1))]
        );
        layered.set(&[tombstone("a"), put("b", 3)]).await.unwrap();
        assert_eq!(
            layered.get(&[key("a"), key("b")]).await.unwrap(),
            vec![None, Some(value(3))]
        );
        assert_eq!(worker.get(&[key("a")]).await.unwrap(), vec![None]);
        assert_eq!(layered.connector_offsets("c").await.unwrap().len(), 1);
    }
}
