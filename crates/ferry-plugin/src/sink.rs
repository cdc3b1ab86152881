//! Where records go: one trait with asynchronous delivery acknowledgements, and how a task gets its
//! sink.
//!
//! `send` hands a record over and returns a [`PendingDelivery`] that resolves once the sink has made
//! the record durable (file: written and `fdatasync`ed; Kafka: acknowledged by the broker) or failed
//! to. The runtime acknowledges the record to the `AckTracker` only when its delivery resolves `Ok`, so
//! offsets never run ahead of delivered data.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use ferry_api::{Config, RecordMetadata, SourceRecord};

use crate::converter::ConverterSpec;

/// A delivery failed, or a record could not be handed over.
///
/// The [`kind`](SinkError::kind) says what the runtime may do about it (retry, fail the task, …); the
/// message says what failed, for people. The underlying client error, when there is one, is kept as
/// the [`source`](std::error::Error::source).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{sink}: {message}")]
#[non_exhaustive]
pub struct SinkError {
    /// Which sink (`file /tmp/out.jsonl`).
    pub sink: String,
    /// What kind of failure it is.
    pub kind: SinkErrorKind,
    /// What failed.
    pub message: String,
    /// The client's own error, if any. `Arc` so that the error stays `Clone`.
    #[source]
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

/// What kind of failure a [`SinkError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SinkErrorKind {
    /// Sending the same record again may succeed (a broker outage, a full queue, a flush timeout).
    Retriable,
    /// It will fail again the same way (a failed write poisoned the file; an invalid setting).
    Fatal,
    /// The sink was closed or its writer stopped; it accepts nothing more.
    Closed,
    /// The record could not be converted to what the sink writes (a converter refused it).
    Conversion,
    /// Another producer with the same transactional id took over (exactly-once; Kafka's
    /// `ProducerFencedException`). This task must stop without committing.
    Fenced,
    /// The sink's credentials were refused or lack a permission.
    Unauthorized,
}

impl SinkError {
    /// An error of `kind` from `sink`.
    pub fn new(sink: impl Into<String>, kind: SinkErrorKind, message: impl Into<String>) -> Self {
        Self {
            sink: sink.into(),
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// The same error, caused by `source` (the client's own error).
    #[must_use]
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// Whether sending the same record again may succeed.
    pub fn is_retriable(&self) -> bool {
        self.kind == SinkErrorKind::Retriable
    }
}

/// The outcome of one delivery.
pub type Delivery = Result<RecordMetadata, SinkError>;

/// Resolves when the sink has delivered (or failed to deliver) one record.
pub struct PendingDelivery(PendingOf<Delivery>);

/// A delivery's future, or its outcome when known at once.
enum PendingOf<T> {
    /// Resolved when created: no allocation, and nothing for another thread to free (the runtime
    /// resolves deliveries on its watcher thread, where freeing the sending thread's allocations
    /// measured as the watcher's largest cost with a sink that delivers at once).
    Ready(Option<T>),
    Future(Pin<Box<dyn Future<Output = T> + Send>>),
}

impl PendingDelivery {
    /// Wraps any delivery future.
    pub fn new(future: impl Future<Output = Delivery> + Send + 'static) -> Self {
        Self(PendingOf::Future(Box::pin(future)))
    }

    /// An already delivered record.
    pub fn ready(delivery: Delivery) -> Self {
        Self(PendingOf::Ready(Some(delivery)))
    }
}

impl Future for PendingDelivery {
    type Output = Delivery;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Delivery> {
        match &mut self.0 {
            PendingOf::Future(future) => future.as_mut().poll(cx),
            // Polled again after it resolved (a caller's bug): an error, not a second delivery.
            PendingOf::Ready(delivery) => Poll::Ready(delivery.take().unwrap_or_else(|| {
                Err(SinkError::new(
                    "delivery",
                    SinkErrorKind::Fatal,
                    "a resolved delivery was polled again",
                ))
            })),
        }
    }
}

/// The outcome of a batch's delivery ([`RecordSink::try_send_batch`]): every record of it was
/// delivered but the ones listed failed.
#[derive(Debug, Default)]
pub struct BatchDelivery {
    /// The records that failed, by position in the batch, with why.
    pub failed: Vec<(usize, SinkError)>,
}

impl BatchDelivery {
    /// Every record of the batch delivered.
    pub fn delivered() -> Self {
        Self::default()
    }

    /// Every one of `records` records failed with `error` (a failed write of the whole batch).
    pub fn all_failed(records: usize, error: &SinkError) -> Self {
        Self {
            failed: (0..records).map(|i| (i, error.clone())).collect(),
        }
    }
}

/// Resolves when the sink has delivered (or failed to deliver) every record of a batch.
pub struct PendingBatch(PendingOf<BatchDelivery>);

impl PendingBatch {
    /// Wraps any batch delivery future.
    pub fn new(future: impl Future<Output = BatchDelivery> + Send + 'static) -> Self {
        Self(PendingOf::Future(Box::pin(future)))
    }

    /// An already delivered batch.
    pub fn ready(delivery: BatchDelivery) -> Self {
        Self(PendingOf::Ready(Some(delivery)))
    }
}

impl Future for PendingBatch {
    type Output = BatchDelivery;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<BatchDelivery> {
        match &mut self.0 {
            PendingOf::Future(future) => future.as_mut().poll(cx),
            // Polled again after it resolved (a caller's bug): nothing more is delivered.
            PendingOf::Ready(delivery) => Poll::Ready(delivery.take().unwrap_or_default()),
        }
    }
}

/// What [`RecordSink::try_send_batch`] took.
pub struct BatchSent {
    /// How many records, from the first, the sink accepted.
    pub accepted: usize,
    /// The delivery of the accepted records; `None` when it accepted none.
    pub delivery: Option<PendingBatch>,
}

impl BatchSent {
    /// Nothing accepted: the caller sends the first record with [`RecordSink::send`].
    pub fn none() -> Self {
        Self {
            accepted: 0,
            delivery: None,
        }
    }

    /// The first `accepted` records accepted, delivered as `delivery` says.
    pub fn accepted(accepted: usize, delivery: PendingBatch) -> Self {
        if accepted == 0 {
            return Self::none();
        }
        Self {
            accepted,
            delivery: Some(delivery),
        }
    }
}

/// A destination for records. Thread-safe; `send` may be called from many tasks at once.
#[async_trait]
pub trait RecordSink: Send + Sync {
    /// A short description for logs and errors.
    fn describe(&self) -> String;

    /// Hands a record to the sink. `Err` means it was not accepted (retry if [`SinkError::is_retriable`]); `Ok` gives
    /// the pending delivery. Records of one source partition are delivered in `send` order.
    async fn send(&self, record: &SourceRecord) -> Result<PendingDelivery, SinkError>;

    /// Hands over as many of `records`, from the first and in order, as the sink can take at
    /// once, without waiting and without failing: one call, and one delivery for all of them,
    /// where [`send`](Self::send) costs that per record. It stops before the first record it
    /// cannot take at once (a full queue, an error); the runtime hands that one to `send`, which
    /// waits for room or reports the error. Being synchronous, it is never cancelled half-way: a
    /// record is either accepted and in the returned delivery, or not handed over at all.
    ///
    /// The default takes none: every record goes through `send`.
    fn try_send_batch(&self, _records: &[SourceRecord]) -> BatchSent {
        BatchSent::none()
    }

    /// Waits up to `timeout` until every record sent so far is delivered or failed.
    async fn flush(&self, timeout: Duration) -> Result<(), SinkError>;

    /// Makes a sink that failed for good usable again if it can (the file sink reopens its file
    /// after a failed write poisoned it), and says whether it did. The worker calls it before a
    /// task (re)starts, so restarting a task is the way back once the cause (a full disk) is fixed.
    /// The default does nothing: most sinks recover by themselves or never fail for good.
    ///
    /// # Errors
    /// The sink had failed and cannot be reopened.
    async fn reopen_if_failed(&self) -> Result<bool, SinkError> {
        Ok(false)
    }
}

/// A task's own transactional sink, for exactly-once source delivery (Kafka Connect's KIP-618): the
/// task's records and the offsets that cover them are written in one transaction, so a reader that
/// sees committed data only (`read_committed`) sees each record exactly once, and a restarted task
/// resumes exactly after the last committed record. Opened per task instance with a stable
/// transactional id ([`SinkProvider::open_transactional`]); opening it fences every earlier
/// instance of the id (its open transaction is aborted, its next send or commit refused with
/// [`SinkErrorKind::Fenced`]).
///
/// Records sent while no transaction is open are refused; the runtime begins one before the first
/// record of a transaction.
#[async_trait]
pub trait TransactionalSink: RecordSink {
    /// Begins a transaction, unless one is open.
    ///
    /// # Errors
    /// The producer was fenced ([`SinkErrorKind::Fenced`]) or failed.
    fn begin(&self) -> Result<(), SinkError>;

    /// Whether a transaction is open.
    fn in_transaction(&self) -> bool;

    /// Writes `offsets` (Kafka Connect offset records, encoded) to the offsets topic in the open
    /// transaction, waits for every record of it, and commits it; with no transaction open, it
    /// does nothing. On `Err` the transaction is aborted (or the producer is fenced): none of its
    /// records or offsets are visible to committed readers.
    ///
    /// # Errors
    /// Fenced, or the commit failed (the transaction was aborted).
    async fn commit(&self, offsets: &[ferry_offsets::OffsetWrite]) -> Result<(), SinkError>;

    /// Aborts the open transaction, if any: none of its records or offsets become visible.
    ///
    /// # Errors
    /// The abort failed (the broker aborts the transaction itself after its timeout).
    async fn abort(&self) -> Result<(), SinkError>;
}

/// What a [`SinkProvider`] knows about the task it opens a sink for.
#[derive(Debug, Clone, Copy)]
pub struct TaskSinkContext<'a> {
    /// The connector's name.
    pub connector: &'a str,
    /// The task's index within the connector.
    pub task: usize,
    /// The connector's own `key.converter`, if it sets one (else the worker's applies).
    pub key_converter: Option<ConverterSpec>,
    /// The connector's own `value.converter`, if it sets one (else the worker's applies).
    pub value_converter: Option<ConverterSpec>,
    /// The connector's configuration (placeholders resolved), for the connector keys the sink reads
    /// itself ([`DynSinkSpec::handles_connector_key`](crate::DynSinkSpec::handles_connector_key),
    /// e.g. Kafka's `topic.creation.*`); `None` when the task runs without one (a worker's own sink).
    pub connector_config: Option<&'a Config>,
    /// Distributed mode: the worker's membership lease. A sink that hands records to a client
    /// checks it right before each hand-over and refuses (retriably) while it is not valid: the
    /// runtime's own check comes before the record's conversion, and a worker frozen in between
    /// would let the record out as a zombie when it wakes.
    pub membership: Option<&'a std::sync::Arc<crate::MembershipLease>>,
}

impl<'a> TaskSinkContext<'a> {
    /// The context of task `task` of `connector`, with the connector's own converters if it sets them.
    pub fn new(
        connector: &'a str,
        task: usize,
        key_converter: Option<ConverterSpec>,
        value_converter: Option<ConverterSpec>,
    ) -> Self {
        Self {
            connector,
            task,
            key_converter,
            value_converter,
            connector_config: None,
            membership: None,
        }
    }

    /// The same context with the worker's membership lease, builder style.
    #[must_use]
    pub fn with_membership(
        mut self,
        lease: Option<&'a std::sync::Arc<crate::MembershipLease>>,
    ) -> Self {
        self.membership = lease;
        self
    }

    /// The same context with the connector's configuration, builder style.
    #[must_use]
    pub fn with_connector_config(mut self, config: &'a Config) -> Self {
        self.connector_config = Some(config);
        self
    }
}

/// Gives each task its sink. Per task rather than per worker so that a sink may hold per-task state
/// (a transactional producer per task for exactly-once delivery); [`SharedSink`] is today's
/// behaviour, one sink for every task.
///
/// The worker calls [`open`](Self::open) on each task's thread before the task starts; a refused
/// open fails that task alone, with the error as its trace.
#[async_trait]
pub trait SinkProvider: Send + Sync + fmt::Display {
    /// The sink of one task, called at every task (re)start.
    ///
    /// # Errors
    /// The sink cannot be opened; the task fails with this error.
    async fn open(&self, task: &TaskSinkContext<'_>) -> Result<Arc<dyn RecordSink>, SinkError>;

    /// The task's own transactional sink with `transactional_id` (exactly-once delivery), which
    /// fences every earlier holder of the id before it returns; `None` when this sink cannot write
    /// transactions (only Kafka can). Called at every (re)start of an exactly-once task, before the
    /// task reads its offsets.
    ///
    /// # Errors
    /// The sink cannot be opened (the broker refused the transactional id, or did not answer).
    async fn open_transactional(
        &self,
        _task: &TaskSinkContext<'_>,
        _transactional_id: &str,
    ) -> Result<Option<Arc<dyn TransactionalSink>>, SinkError> {
        Ok(None)
    }

    /// Whether the sink applies `key.converter` / `value.converter` (Kafka does; the file and stdout
    /// sinks write JSON lines, so a connector's converters have no effect there and the runtime warns).
    fn uses_converters(&self) -> bool {
        false
    }

    /// The id of the Kafka cluster the sink writes to (`GET /`'s `kafka_cluster_id`); `None` for a sink
    /// that is not a Kafka cluster, or when the cluster cannot be asked now.
    async fn cluster_id(&self) -> Option<String> {
        None
    }

    /// Waits up to `timeout` until every record sent through any opened sink is delivered or failed;
    /// called once, at shutdown.
    ///
    /// # Errors
    /// Some records were not delivered in time, or failed.
    async fn flush(&self, timeout: Duration) -> Result<(), SinkError>;
}

/// One sink shared by every task: each [`open`](SinkProvider::open) returns a clone of it.
#[derive(Clone)]
pub struct SharedSink(pub Arc<dyn RecordSink>);

impl fmt::Display for SharedSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.describe())
    }
}

impl fmt::Debug for SharedSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SharedSink")
            .field(&self.0.describe())
            .finish()
    }
}

#[async_trait]
impl SinkProvider for SharedSink {
    async fn open(&self, _task: &TaskSinkContext<'_>) -> Result<Arc<dyn RecordSink>, SinkError> {
        Ok(self.0.clone())
    }

    async fn flush(&self, timeout: Duration) -> Result<(), SinkError> {
        self.0.flush(timeout).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(topic: &str) -> RecordMetadata {
        RecordMetadata {
            topic: topic.to_owned(),
            partition: None,
            offset: None,
        }
    }

    #[test]
    fn a_ready_delivery_resolves_once_and_a_second_poll_is_an_error() {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut pending = PendingDelivery::ready(Ok(metadata("t")));
        match Pin::new(&mut pending).poll(&mut cx) {
            Poll::Ready(Ok(m)) => assert_eq!(m.topic, "t"),
            other => panic!("expected the delivery, got {:?}", other.map(|d| d.is_ok())),
        }
        match Pin::new(&mut pending).poll(&mut cx) {
            Poll::Ready(Err(e)) => assert_eq!(e.kind, SinkErrorKind::Fatal),
            other => panic!("expected an error, got {:?}", other.map(|d| d.is_ok())),
        }
    }

    #[test]
    fn a_delivery_future_is_polled_through() {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let (tx, rx) = tokio::sync::oneshot::channel::<Delivery>();
        let mut pending = PendingDelivery::new(async move {
            rx.await
                .unwrap_or_else(|_| Err(SinkError::new("s", SinkErrorKind::Closed, "gone")))
        });
        assert!(Pin::new(&mut pending).poll(&mut cx).is_pending());
        let _ = tx.send(Ok(metadata("u")));
        assert!(matches!(
            Pin::new(&mut pending).poll(&mut cx),
            Poll::Ready(Ok(RecordMetadata { ref topic, .. })) if topic == "u"
        ));
    }
}
