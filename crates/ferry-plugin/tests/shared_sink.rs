//! `SharedSink`, today's behaviour behind the per-task `SinkProvider` contract: every task gets the
//! same sink, and the shutdown flush reaches it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferry_api::{RecordMetadata, SourceRecord};
use ferry_plugin::{
    PendingDelivery, RecordSink, SharedSink, SinkError, SinkProvider, TaskSinkContext,
};

#[derive(Default)]
struct CountingSink {
    flushes: AtomicUsize,
}

#[ferry_api::async_trait]
impl RecordSink for CountingSink {
    fn describe(&self) -> String {
        "counting sink".to_owned()
    }
    async fn send(&self, record: &SourceRecord) -> Result<PendingDelivery, SinkError> {
        Ok(PendingDelivery::ready(Ok(RecordMetadata {
            topic: record.topic.clone(),
            partition: None,
            offset: None,
        })))
    }
    async fn flush(&self, _timeout: Duration) -> Result<(), SinkError> {
        self.flushes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test]
async fn every_task_gets_the_one_shared_sink_and_the_shutdown_flush_reaches_it()
-> Result<(), SinkError> {
    let sink = Arc::new(CountingSink::default());
    let provider = SharedSink(sink.clone());
    assert_eq!(provider.to_string(), "counting sink");
    assert!(!provider.uses_converters());

    let first = provider
        .open(&TaskSinkContext::new("c", 0, None, None))
        .await?;
    let second = provider
        .open(&TaskSinkContext::new("c", 1, None, None))
        .await?;
    let shared: Arc<dyn RecordSink> = sink.clone();
    assert!(Arc::ptr_eq(&first, &shared) && Arc::ptr_eq(&second, &shared));

    provider.flush(Duration::from_secs(1)).await?;
    assert_eq!(sink.flushes.load(Ordering::SeqCst), 1);
    Ok(())
}
