//! Shared by the offset-core tests: a store wrapper that can fail or block on demand, a WARN capture,
//! and map builders.

#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ferry_api::{ConnectMap, Value, async_trait};
use ferry_offsets::{MemoryStore, OffsetBackingStore, OffsetWrite, StoreError, StoredOffset};
use tokio::sync::Semaphore;

/// A map from `(key, value)` pairs; panics on an invalid value (tests only build valid ones).
pub fn map<V: Into<Value>>(fields: impl IntoIterator<Item = (&'static str, V)>) -> ConnectMap {
    let mut m = ConnectMap::new();
    for (k, v) in fields {
        m.insert(k, v).unwrap();
    }
    m
}

/// `{"position": n}`.
pub fn position(n: i64) -> ConnectMap {
    map([("position", n)])
}

/// `{"filename": name}`.
pub fn file(name: &str) -> ConnectMap {
    map([("filename", name.to_owned())])
}

/// The `position` of an offset.
pub fn position_of(offset: &ConnectMap) -> i64 {
    offset
        .get("position")
        .and_then(Value::as_i64)
        .unwrap_or_else(|| panic!("offset without an integer position: {offset}"))
}

fn failure(what: &str) -> StoreError {
    StoreError::backend("test", format!("injected {what} failure"), true)
}

/// A [`MemoryStore`] that fails or blocks on demand.
pub struct TestStore {
    /// The real store; write to it directly to plant raw bytes.
    pub inner: MemoryStore,
    /// `get` fails while set.
    pub fail_get: AtomicBool,
    /// `set` fails while set (checked after the gate, when the write would apply).
    pub fail_set: AtomicBool,
    /// `connector_offsets` fails while set.
    pub fail_connector_offsets: AtomicBool,
    /// `set` waits at the gate while set: it signals `entered` and waits for a `release` permit.
    pub block_set: AtomicBool,
    entered: Semaphore,
    release: Semaphore,
    /// Number of `set` calls that applied their batch.
    pub applied_sets: AtomicUsize,
}

impl TestStore {
    /// A new, empty store.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            inner: MemoryStore::new(),
            fail_get: AtomicBool::new(false),
            fail_set: AtomicBool::new(false),
            fail_connector_offsets: AtomicBool::new(false),
            block_set: AtomicBool::new(false),
            entered: Semaphore::new(0),
            release: Semaphore::new(0),
            applied_sets: AtomicUsize::new(0),
        })
    }

    /// Waits until a blocked `set` has reached the gate.
    pub async fn wait_entered(&self) {
        self.entered.acquire().await.expect("never closed").forget();
    }

    /// Lets one blocked `set` continue.
    pub fn release_one(&self) {
        self.release.add_permits(1);
    }
}

#[async_trait]
impl OffsetBackingStore for TestStore {
    fn describe(&self) -> String {
        "test store".to_owned()
    }

    async fn get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        if self.fail_get.load(Ordering::SeqCst) {
            return Err(failure("get"));
        }
        self.inner.get(keys).await
    }

    async fn set(&self, batch: &[OffsetWrite]) -> Result<(), StoreError> {
        if self.block_set.load(Ordering::SeqCst) {
            self.entered.add_permits(1);
            self.release.acquire().await.expect("never closed").forget();
        }
        if self.fail_set.load(Ordering::SeqCst) {
            return Err(failure("set"));
        }
        self.inner.set(batch).await?;
        self.applied_sets.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    async fn connector_offsets(&self, connector: &str) -> Result<Vec<StoredOffset>, StoreError> {
        if self.fail_connector_offsets.load(Ordering::SeqCst) {
            return Err(failure("connector_offsets"));
        }
        self.inner.connector_offsets(connector).await
    }

    async fn entries(&self) -> Result<Vec<StoredOffset>, StoreError> {
        self.inner.entries().await
    }
}

/// Collects formatted log lines of the current thread while the guard lives.
#[derive(Clone, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

/// Writes into a [`LogCapture`].
pub struct CaptureWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for CaptureWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogCapture {
    type Writer = CaptureWriter;
    fn make_writer(&'a self) -> CaptureWriter {
        CaptureWriter(self.0.clone())
    }
}

impl LogCapture {
    /// Captures WARN and above on this thread until the returned guard is dropped.
    pub fn start() -> (Self, tracing::subscriber::DefaultGuard) {
        let capture = Self::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(capture.clone())
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .finish();
        (capture, tracing::subscriber::set_default(subscriber))
    }

    /// Everything captured so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }

    /// The captured WARN lines.
    pub fn warnings(&self) -> Vec<String> {
        self.text()
            .lines()
            .filter(|l| l.contains("WARN"))
            .map(str::to_owned)
            .collect()
    }
}
