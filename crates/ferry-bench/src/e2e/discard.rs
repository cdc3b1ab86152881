//! A sink that accepts every record and reports it delivered at once: what is left of the data path
//! when the destination costs nothing, so the worker's own cost shows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use ferry_api::{RecordMetadata, SourceRecord};
use ferry_runtime::sink::{
    BatchDelivery, BatchSent, PendingBatch, PendingDelivery, RecordSink, SinkError,
};

/// Counts and drops records; every delivery is ready when `send` returns.
#[derive(Debug, Default)]
pub struct DiscardSink {
    accepted: AtomicU64,
}

impl DiscardSink {
    /// Records accepted so far.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }
}

#[async_trait]
impl RecordSink for DiscardSink {
    fn describe(&self) -> String {
        "discard".to_owned()
    }

    async fn send(&self, record: &SourceRecord) -> Result<PendingDelivery, SinkError> {
        self.accepted.fetch_add(1, Ordering::Relaxed);
        // The metadata a real sink would return (topic owned), so both contenders pay for it alike.
        Ok(PendingDelivery::ready(Ok(RecordMetadata {
            topic: record.topic.clone(),
            partition: None,
            offset: None,
        })))
    }

    fn try_send_batch(&self, records: &[SourceRecord]) -> BatchSent {
        self.accepted
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        BatchSent::accepted(
            records.len(),
            PendingBatch::ready(BatchDelivery::delivered()),
        )
    }

    async fn flush(&self, _timeout: Duration) -> Result<(), SinkError> {
        Ok(())
    }
}
