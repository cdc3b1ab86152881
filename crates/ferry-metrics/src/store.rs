//! [`MeteredStore`]: times the calls to any [`OffsetBackingStore`] and counts its errors.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use ferry_offsets::{OffsetBackingStore, OffsetWrite, StoreError, StoredOffset, StoredRecord};
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;

use super::{Metrics, latency_histogram};

/// A store operation, as the `operation` label of `ferry_offset_store_errors_total` names it.
#[derive(Debug, Clone, Copy)]
enum Op {
    Get = 0,
    Set = 1,
    ConnectorOffsets = 2,
    Entries = 3,
    History = 4,
}

const OPS: [(Op, &str); 5] = [
    (Op::Get, "get"),
    (Op::Set, "set"),
    (Op::ConnectorOffsets, "connector_offsets"),
    (Op::Entries, "entries"),
    (Op::History, "history"),
];

/// The series of one store (label `store`, its [`OffsetBackingStore::describe`]).
#[derive(Debug)]
pub struct StoreMetrics {
    store: String,
    get: Histogram,
    set: Histogram,
    errors: [Counter; OPS.len()],
}

impl StoreMetrics {
    pub fn new(store: String) -> Self {
        Self {
            store,
            get: latency_histogram(),
            set: latency_histogram(),
            errors: Default::default(),
        }
    }

    fn error(&self, op: Op) {
        self.errors[op as usize].inc();
    }
}

pub const GET_DURATION: &str = "ferry_offset_store_get_duration_seconds";
pub const SET_DURATION: &str = "ferry_offset_store_set_duration_seconds";
/// Without `_total`: the encoder appends it to counters.
pub const ERRORS: &str = "ferry_offset_store_errors";

/// Encodes the store families.
pub fn encode(
    encoder: &mut DescriptorEncoder,
    stores: &[Arc<StoreMetrics>],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(
        GET_DURATION,
        "Duration of offset store get calls (committed-offset lookups), including failed and abandoned ones.",
        None,
        MetricType::Histogram,
    )?;
    for s in stores {
        s.get
            .encode(family.encode_family(&[("store", s.store.as_str())])?)?;
    }
    let mut family = encoder.encode_descriptor(
        SET_DURATION,
        "Duration of offset store set calls (durable batch writes of a commit), including failed and abandoned ones.",
        None,
        MetricType::Histogram,
    )?;
    for s in stores {
        s.set
            .encode(family.encode_family(&[("store", s.store.as_str())])?)?;
    }
    let mut family = encoder.encode_descriptor(
        ERRORS,
        "Offset store calls that returned an error, by operation.",
        None,
        MetricType::Counter,
    )?;
    for s in stores {
        for (op, name) in OPS {
            let labels = [("store", s.store.as_str()), ("operation", name)];
            s.errors[op as usize].encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

/// Observes a duration when dropped: a call whose future is dropped before it completes (a commit
/// that timed out and gave up on its flush) is timed up to that moment, not lost.
struct Timer<'a> {
    histogram: &'a Histogram,
    started: Instant,
}

impl<'a> Timer<'a> {
    fn start(histogram: &'a Histogram) -> Self {
        Self {
            histogram,
            started: Instant::now(),
        }
    }
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        self.histogram.observe(self.started.elapsed().as_secs_f64());
    }
}

/// An [`OffsetBackingStore`] that records the latency of `get` and `set` and counts errors of every
/// call, under the label `store=<inner.describe()>`, then delegates to the inner store unchanged.
///
/// `ferry_runtime::Worker::new` wraps the store it is given, so a worker's store is always metered; wrapping
/// it again yourself would count each call twice.
pub struct MeteredStore {
    inner: Arc<dyn OffsetBackingStore>,
    metrics: Arc<StoreMetrics>,
}

impl MeteredStore {
    /// Wraps `inner`, registering its series in `metrics` (stores with the same description share
    /// them). A store's series stay for the life of `metrics`.
    pub fn new(inner: Arc<dyn OffsetBackingStore>, metrics: &Metrics) -> Self {
        let metrics = metrics.store(inner.describe());
        Self { inner, metrics }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &Arc<dyn OffsetBackingStore> {
        &self.inner
    }

    fn count<T>(&self, op: Op, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if result.is_err() {
            self.metrics.error(op);
        }
        result
    }
}

impl std::fmt::Debug for MeteredStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeteredStore")
            .field("store", &self.metrics.store)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl OffsetBackingStore for MeteredStore {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    async fn get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let result = {
            let _timer = Timer::start(&self.metrics.get);
            self.inner.get(keys).await
        };
        self.count(Op::Get, result)
    }

    async fn set(&self, batch: &[OffsetWrite]) -> Result<(), StoreError> {
        let result = {
            let _timer = Timer::start(&self.metrics.set);
            self.inner.set(batch).await
        };
        self.count(Op::Set, result)
    }

    async fn connector_offsets(&self, connector: &str) -> Result<Vec<StoredOffset>, StoreError> {
        let result = self.inner.connector_offsets(connector).await;
        self.count(Op::ConnectorOffsets, result)
    }

    async fn entries(&self) -> Result<Vec<StoredOffset>, StoreError> {
        let result = self.inner.entries().await;
        self.count(Op::Entries, result)
    }

    async fn history(&self) -> Result<Vec<StoredRecord>, StoreError> {
        let result = self.inner.history().await;
        self.count(Op::History, result)
    }

    /// The inner store's named store, unmetered: the worker meters it under its own description.
    async fn open_named(&self, name: &str) -> Result<ferry_offsets::NamedStore, StoreError> {
        self.inner.open_named(name).await
    }

    /// The inner store's task writer, metered under the same series.
    async fn open_task_writer(
        &self,
        fencing_id: &str,
    ) -> Result<Option<Arc<dyn OffsetBackingStore>>, StoreError> {
        let writer = self.inner.open_task_writer(fencing_id).await?;
        Ok(writer.map(|inner| {
            Arc::new(MeteredStore {
                inner,
                metrics: self.metrics.clone(),
            }) as Arc<dyn OffsetBackingStore>
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use ferry_offsets::MemoryStore;

    use super::*;

    /// A memory store whose `set` can fail or hang.
    #[derive(Default)]
    struct Flaky {
        inner: MemoryStore,
        fail: AtomicBool,
        hang: AtomicBool,
    }

    #[async_trait]
    impl OffsetBackingStore for Flaky {
        fn describe(&self) -> String {
            "flaky \"store\"".to_owned()
        }
        async fn get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
            self.inner.get(keys).await
        }
        async fn set(&self, batch: &[OffsetWrite]) -> Result<(), StoreError> {
            if self.hang.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            if self.fail.load(Ordering::SeqCst) {
                return Err(StoreError::backend("flaky", "injected", true));
            }
            self.inner.set(batch).await
        }
        async fn connector_offsets(&self, c: &str) -> Result<Vec<StoredOffset>, StoreError> {
            self.inner.connector_offsets(c).await
        }
        async fn entries(&self) -> Result<Vec<StoredOffset>, StoreError> {
            self.inner.entries().await
        }
        async fn history(&self) -> Result<Vec<StoredRecord>, StoreError> {
            Ok(vec![(b"k".to_vec(), None)])
        }
    }

    fn write(k: &str, v: &str) -> OffsetWrite {
        OffsetWrite {
            key: k.as_bytes().to_vec(),
            value: Some(v.as_bytes().to_vec()),
        }
    }

    #[tokio::test]
    async fn delegates_and_times_every_call() {
        let metrics = Metrics::new();
        let flaky = Arc::new(Flaky::default());
        let store = MeteredStore::new(flaky.clone(), &metrics);
        assert_eq!(store.describe(), "flaky \"store\"");

        store.set(&[write("k", "1")]).await.expect("set works");
        let got = store
            .get(&[b"k".to_vec(), b"x".to_vec()])
            .await
            .expect("get works");
        assert_eq!(got, vec![Some(b"1".to_vec()), None]);
        assert_eq!(store.entries().await.expect("entries").len(), 1);
        // The inner store's own history, not the trait's default built from `entries`.
        assert_eq!(
            store.history().await.expect("history"),
            vec![(b"k".to_vec(), None)]
        );

        flaky.fail.store(true, Ordering::SeqCst);
        assert!(store.set(&[write("k", "2")]).await.is_err());

        // A set abandoned by its caller is timed up to the moment it was dropped.
        flaky.fail.store(false, Ordering::SeqCst);
        flaky.hang.store(true, Ordering::SeqCst);
        let abandoned =
            tokio::time::timeout(Duration::from_millis(20), store.set(&[write("k", "3")])).await;
        assert!(abandoned.is_err(), "the hanging set was abandoned");

        let s = &store.metrics;
        assert_eq!(s.errors[Op::Set as usize].get(), 1);
        assert_eq!(s.errors[Op::Get as usize].get(), 0);
        assert_eq!(
            flaky.inner.get(&[b"k".to_vec()]).await.ok(),
            Some(vec![Some(b"1".to_vec())])
        );

        let text = metrics.render();
        let labels = "store=\"flaky \\\"store\\\"\"";
        for line in [
            format!("ferry_offset_store_get_duration_seconds_count{{{labels}}} 1"),
            // Ok, failed and abandoned.
            format!("ferry_offset_store_set_duration_seconds_count{{{labels}}} 3"),
            format!("ferry_offset_store_set_duration_seconds_bucket{{{labels},le=\"+Inf\"}} 3"),
            format!("ferry_offset_store_errors_total{{{labels},operation=\"set\"}} 1"),
            format!("ferry_offset_store_errors_total{{{labels},operation=\"get\"}} 0"),
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        super::super::tests::validate(&text);
    }

    #[tokio::test]
    async fn stores_with_one_description_share_series() {
        let metrics = Metrics::new();
        let a = MeteredStore::new(Arc::new(MemoryStore::new()), &metrics);
        let b = MeteredStore::new(Arc::new(MemoryStore::new()), &metrics);
        a.get(&[]).await.expect("get");
        b.get(&[]).await.expect("get");
        assert!(Arc::ptr_eq(&a.metrics, &b.metrics));
        let text = metrics.render();
        assert_eq!(
            text.matches("ferry_offset_store_get_duration_seconds_count{")
                .count(),
            1,
            "{text}"
        );
        assert!(
            text.contains("ferry_offset_store_get_duration_seconds_count{store=\"memory\"} 2\n"),
            "{text}"
        );
    }
}
