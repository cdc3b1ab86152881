//! A memory store whose writes fail or hang on demand.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use ferry_api::async_trait;
use ferry_offsets::{
    MemoryStore, OffsetBackingStore, OffsetWrite, StoreError, StoredOffset, decode_key,
};
use tokio::sync::watch;

/// Which `set` batches hang.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hang {
    /// None.
    Nothing,
    /// Every batch.
    All,
    /// Batches holding an offset of this connector.
    Connector(String),
}

impl Hang {
    fn applies(&self, connectors: &[String]) -> bool {
        match self {
            Hang::Nothing => false,
            Hang::All => true,
            Hang::Connector(c) => connectors.iter().any(|x| x == c),
        }
    }
}

/// A [`MemoryStore`] whose writes fail or hang on demand. Reads are never affected.
pub struct TestStore {
    /// The real store; clone it to "reopen" the same offsets.
    pub inner: MemoryStore,
    fail_set: AtomicBool,
    /// `set` fails with a non-retriable error (a poisoned store) while set.
    fail_fatally: AtomicBool,
    /// `set` refuses the batch as too large (non-retriable, but the store stays usable) while set.
    too_large: AtomicBool,
    hang: watch::Sender<Hang>,
    /// `set` calls.
    pub set_calls: AtomicUsize,
    /// `set` calls that applied their batch.
    pub applied_sets: AtomicUsize,
    /// `set` calls that failed.
    pub failed_sets: AtomicUsize,
    /// `set` calls that entered a hang.
    pub hung_sets: AtomicUsize,
    /// `set` calls whose future was dropped while hanging (their caller gave up on them).
    pub abandoned_sets: Arc<AtomicUsize>,
}

impl TestStore {
    /// A new, empty store.
    pub fn new() -> Arc<Self> {
        Self::over(MemoryStore::new())
    }

    /// A store over existing offsets.
    pub fn over(inner: MemoryStore) -> Arc<Self> {
        Arc::new(Self {
            inner,
            fail_set: AtomicBool::new(false),
            fail_fatally: AtomicBool::new(false),
            too_large: AtomicBool::new(false),
            hang: watch::Sender::new(Hang::Nothing),
            set_calls: AtomicUsize::new(0),
            applied_sets: AtomicUsize::new(0),
            failed_sets: AtomicUsize::new(0),
            hung_sets: AtomicUsize::new(0),
            abandoned_sets: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Makes `set` fail (`true`) or work (`false`).
    pub fn fail_sets(&self, fail: bool) {
        self.fail_set.store(fail, Ordering::SeqCst);
    }

    /// Makes `set` fail as a poisoned file store does (`true`): not retriable, nothing written.
    pub fn fail_sets_fatally(&self, fail: bool) {
        self.fail_fatally.store(fail, Ordering::SeqCst);
    }

    /// Makes `set` refuse every batch as too large (`true`).
    pub fn refuse_batches_as_too_large(&self, refuse: bool) {
        self.too_large.store(refuse, Ordering::SeqCst);
    }

    /// Makes the matching `set` calls hang until this is changed.
    pub fn hang_sets(&self, hang: Hang) {
        self.hang.send_replace(hang);
    }

    /// A shorthand for counters.
    pub fn count(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::SeqCst)
    }
}

/// Counts a hanging `set` whose future is dropped before the hang ends.
struct AbandonGuard {
    counter: Arc<AtomicUsize>,
    armed: bool,
}

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        if self.armed {
            self.counter.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[async_trait]
impl OffsetBackingStore for TestStore {
    fn describe(&self) -> String {
        "test store".to_owned()
    }

    async fn get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.inner.get(keys).await
    }

    async fn set(&self, batch: &[OffsetWrite]) -> Result<(), StoreError> {
        self.set_calls.fetch_add(1, Ordering::SeqCst);
        let connectors: Vec<String> = batch
            .iter()
            .filter_map(|w| decode_key(&w.key).ok().map(|k| k.connector))
            .collect();
        let mut hang = self.hang.subscribe();
        let hangs = hang.borrow_and_update().applies(&connectors);
        if hangs {
            self.hung_sets.fetch_add(1, Ordering::SeqCst);
            let mut guard = AbandonGuard {
                counter: self.abandoned_sets.clone(),
                armed: true,
            };
            let _ = hang.wait_for(|h| !h.applies(&connectors)).await;
            guard.armed = false;
        }
        if self.too_large.load(Ordering::SeqCst) {
            self.failed_sets.fetch_add(1, Ordering::SeqCst);
            return Err(StoreError::BatchTooLarge {
                path: "/test/offsets.ferry".into(),
                bytes: 1 << 30,
                limit: 1 << 20,
            });
        }
        if self.fail_fatally.load(Ordering::SeqCst) {
            self.failed_sets.fetch_add(1, Ordering::SeqCst);
            return Err(StoreError::Poisoned {
                path: "/test/offsets.ferry".into(),
                cause: "append of a 64-byte batch at byte 4096 failed: No space left on device (os error 28)"
                    .to_owned(),
            });
        }
        if self.fail_set.load(Ordering::SeqCst) {
            self.failed_sets.fetch_add(1, Ordering::SeqCst);
            return Err(StoreError::backend(
                "test store",
                "injected set failure",
                true,
            ));
        }
        self.inner.set(batch).await?;
        self.applied_sets.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    async fn connector_offsets(&self, connector: &str) -> Result<Vec<StoredOffset>, StoreError> {
        self.inner.connector_offsets(connector).await
    }

    async fn entries(&self) -> Result<Vec<StoredOffset>, StoreError> {
        self.inner.entries().await
    }
}
