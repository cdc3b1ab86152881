//! Where records go: one trait with asynchronous delivery acknowledgements.
//!
//! `send` hands a record over and returns a [`PendingDelivery`] that resolves once the sink has made
//! the record durable (file: written and `fdatasync`ed; Kafka: acknowledged by the broker) or failed
//! to. The runtime acknowledges the record to the `AckTracker` only when its delivery resolves `Ok`, so
//! offsets never run ahead of delivered data.

pub mod file;
pub mod line;
pub mod stdout;
mod writer;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use ferry_api::{RecordMetadata, SourceRecord};

/// A delivery failed, or a record could not be handed over.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{sink}: {message}")]
pub struct SinkError {
    /// Which sink (`file /tmp/out.jsonl`).
    pub sink: String,
    /// What failed.
    pub message: String,
    /// Whether sending the same record again may succeed.
    pub retriable: bool,
}

/// The outcome of one delivery.
pub type Delivery = Result<RecordMetadata, SinkError>;

/// Resolves when the sink has delivered (or failed to deliver) one record.
pub struct PendingDelivery(Pin<Box<dyn Future<Output = Delivery> + Send>>);

impl PendingDelivery {
    /// Wraps any delivery future.
    pub fn new(future: impl Future<Output = Delivery> + Send + 'static) -> Self {
        Self(Box::pin(future))
    }

    /// An already delivered record.
    pub fn ready(delivery: Delivery) -> Self {
        Self::new(std::future::ready(delivery))
    }
}

impl Future for PendingDelivery {
    type Output = Delivery;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Delivery> {
        self.0.as_mut().poll(cx)
    }
}

/// A destination for records. Thread-safe; `send` may be called from many tasks at once.
#[async_trait]
pub trait RecordSink: Send + Sync {
    /// A short description for logs and errors.
    fn describe(&self) -> String;

    /// Hands a record to the sink. `Err` means it was not accepted (retry if `retriable`); `Ok` gives
    /// the pending delivery. Records of one source partition are delivered in `send` order.
    async fn send(&self, record: &SourceRecord) -> Result<PendingDelivery, SinkError>;

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
