//! A connector's own offsets store (`offsets.storage.topic`, KIP-618), opened on first use.
//!
//! Tasks and the connector's offset reader are made synchronously, but opening a store is not (Kafka:
//! clients, the topic created if missing, read to its end). So the worker hands out this store at once
//! and it opens the connector's store the first time it is used — at the latest when a task reads
//! its offsets at start — and then is a [`LayeredStore`] over the worker's. A failed open fails that
//! use (a task's start, a REST read) and is tried again by the next one.

use std::sync::Arc;

use async_trait::async_trait;
use ferry_offsets::{
    LayeredStore, NamedStore, OffsetBackingStore, OffsetWrite, StoreError, StoredOffset,
    StoredRecord,
};
use tokio::sync::OnceCell;

use crate::metrics::{MeteredStore, Metrics};

pub use ferry_config::OFFSETS_STORAGE_TOPIC;

/// The store of connectors whose `offsets.storage.topic` is `name`.
pub(crate) struct NamedOffsetStore {
    name: String,
    worker: Arc<dyn OffsetBackingStore>,
    metrics: Arc<Metrics>,
    opened: OnceCell<Arc<dyn OffsetBackingStore>>,
}

impl NamedOffsetStore {
    pub(crate) fn new(
        name: String,
        worker: Arc<dyn OffsetBackingStore>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            name,
            worker,
            metrics,
            opened: OnceCell::new(),
        }
    }

    async fn store(&self) -> Result<&Arc<dyn OffsetBackingStore>, StoreError> {
        self.opened
            .get_or_try_init(|| async {
                Ok(match self.worker.open_named(&self.name).await? {
                    NamedStore::This => self.worker.clone(),
                    NamedStore::Other(own) => {
                        tracing::info!(
                            "connector offsets topic {} opened, falling back to {} for partitions it lacks",
                            own.describe(),
                            self.worker.describe()
                        );
                        let own: Arc<dyn OffsetBackingStore> =
                            Arc::new(MeteredStore::new(own, &self.metrics));
                        Arc::new(LayeredStore::new(own, self.worker.clone()))
                    }
                    NamedStore::Unsupported => {
                        // Kafka Connect: "in standalone mode, setting this property will have no
                        // effect" — said out loud here.
                        tracing::warn!(
                            "{OFFSETS_STORAGE_TOPIC}={} has no effect: the worker's offset store ({}) \
                             has no per-connector topics (offset.storage=kafka has); the connector's \
                             offsets go to the worker's store",
                            self.name,
                            self.worker.describe()
                        );
                        self.worker.clone()
                    }
                })
            })
            .await
    }
}

#[async_trait]
impl OffsetBackingStore for NamedOffsetStore {
    fn describe(&self) -> String {
        match self.opened.get() {
            Some(store) => store.describe(),
            None => format!(
                "connector offsets topic {} (not opened yet) over {}",
                self.name,
                self.worker.describe()
            ),
        }
    }

    async fn get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.store().await?.get(keys).await
    }

    async fn set(&self, batch: &[OffsetWrite]) -> Result<(), StoreError> {
        self.store().await?.set(batch).await
    }

    async fn connector_offsets(&self, connector: &str) -> Result<Vec<StoredOffset>, StoreError> {
        self.store().await?.connector_offsets(connector).await
    }

    async fn entries(&self) -> Result<Vec<StoredOffset>, StoreError> {
        self.store().await?.entries().await
    }

    async fn open_task_writer(
        &self,
        fencing_id: &str,
    ) -> Result<Option<Arc<dyn OffsetBackingStore>>, StoreError> {
        self.store().await?.open_task_writer(fencing_id).await
    }

    async fn open_named(&self, name: &str) -> Result<NamedStore, StoreError> {
        self.worker.open_named(name).await
    }

    async fn history(&self) -> Result<Vec<StoredRecord>, StoreError> {
        self.store().await?.history().await
    }
}
