//! The task loop calls the delivery semantics' hooks at the points `semantics.rs` documents, in
//! order: what an exactly-once implementation will rely on.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use ferry_api::{
    Config, ConnectError, ConnectMap, RecordMetadata, SourceRecord, SourceTask, SourceTaskContext,
};
use ferry_offsets::{AckTracker, MemoryStore, OffsetWriter, StoreOffsetReader, SubmittedRecord};
use tokio::sync::watch;

use super::Helpers;
use super::StatusCell;
use super::StoreHealth;
use super::semantics::{Commit, DynTaskHooks, TaskHooks};
use super::{PartitionWatch, TaskContext};
use super::{TargetState, TaskRunner, TaskSettings};
use crate::metrics::Metrics;
use crate::sink::{PendingDelivery, RecordSink, SinkError};
use crate::worker::commit::{CommitError, CommitOutcome};
use crate::worker::context::TaskReader;

type Log = Arc<Mutex<Vec<String>>>;

fn push(log: &Log, event: impl Into<String>) {
    log.lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(event.into());
}

/// Emits one batch of two records, then nothing (waits) until stopped.
struct TwoRecords {
    log: Log,
    polled: bool,
}

#[async_trait]
impl SourceTask for TwoRecords {
    async fn start(&mut self, _: Arc<dyn SourceTaskContext>) -> Result<(), ConnectError> {
        push(&self.log, "start");
        Ok(())
    }

    async fn poll(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        if std::mem::replace(&mut self.polled, true) {
            std::future::pending::<()>().await;
        }
        let record = |n: i64| {
            let partition = ConnectMap::new().with("p", "x").ok();
            let offset = ConnectMap::new().with("n", n).ok();
            SourceRecord::from_maps(partition, offset, "t", None)
        };
        Ok(vec![record(1), record(2)])
    }

    async fn stop(&mut self) -> Result<(), ConnectError> {
        push(&self.log, "stop");
        Ok(())
    }
}

struct LoggingSink(Log);

#[async_trait]
impl RecordSink for LoggingSink {
    fn describe(&self) -> String {
        "logging".into()
    }

    async fn send(&self, _: &SourceRecord) -> Result<PendingDelivery, SinkError> {
        push(&self.0, "send");
        Ok(PendingDelivery::ready(Ok(RecordMetadata {
            topic: "t".into(),
            partition: None,
            offset: None,
        })))
    }

    async fn flush(&self, _: Duration) -> Result<(), SinkError> {
        Ok(())
    }
}

/// Hooks that only record when they are called; they track records with a real `AckTracker`.
struct Recording {
    log: Log,
    acks: AckTracker,
}

impl TaskHooks for Recording {
    async fn prepare_to_initialize(&mut self) -> Result<(), CommitError> {
        push(&self.log, "prepare_to_initialize");
        Ok(())
    }
    async fn prepare_to_poll(&mut self) -> Result<(), CommitError> {
        push(&self.log, "prepare_to_poll");
        Ok(())
    }
    async fn prepare_to_send(&mut self, batch: &[SourceRecord]) -> Result<(), CommitError> {
        push(&self.log, format!("prepare_to_send({})", batch.len()));
        Ok(())
    }
    fn record_dispatched(&mut self, record: &SourceRecord) -> Option<SubmittedRecord> {
        push(&self.log, "record_dispatched");
        Some(self.acks.submit(
            record.source_partition.clone(),
            record.source_offset.clone(),
        ))
    }
    fn record_dropped(&mut self, _: &SourceRecord) -> Option<SubmittedRecord> {
        push(&self.log, "record_dropped");
        None
    }
    async fn batch_dispatched(&mut self) -> Result<(), CommitError> {
        push(&self.log, "batch_dispatched");
        Ok(())
    }
    fn periodic_committer(&self) -> Option<Arc<dyn Commit>> {
        None
    }
    async fn final_commit(&mut self, failed: bool) -> CommitOutcome {
        push(&self.log, format!("final_commit({failed})"));
        CommitOutcome::NothingToCommit
    }
}

#[tokio::test]
async fn hooks_run_around_start_poll_send_and_stop_in_order() {
    hooks_run_in_order(|log, acks| Recording { log, acks }).await;
}

/// The same through a trait object, as semantics chosen at run time are called.
#[tokio::test]
async fn boxed_hooks_run_in_the_same_order() {
    hooks_run_in_order(|log, acks| -> Box<dyn DynTaskHooks> { Box::new(Recording { log, acks }) })
        .await;
}

async fn hooks_run_in_order<H: TaskHooks + 'static>(hooks: impl FnOnce(Log, AckTracker) -> H) {
    let log: Log = Arc::default();
    let store = Arc::new(MemoryStore::new());
    let store_reader = Arc::new(StoreOffsetReader::new("c", store.clone()));
    let looked_up = Arc::default();
    let reader = Arc::new(TaskReader::new(
        "c-0".into(),
        store_reader.clone(),
        Arc::clone(&looked_up),
    ));
    let (control, control_rx) = watch::channel(TargetState::Running);
    let acks = AckTracker::new();
    let status = StatusCell::new();
    let metrics = Arc::new(Metrics::default()).register_task("c", 0, acks.clone(), status.clone());
    let runner = TaskRunner {
        name: "c-0".into(),
        task: Box::new(TwoRecords {
            log: log.clone(),
            polled: false,
        }),
        context: Arc::new(TaskContext {
            config: Config::new(),
            reader,
            transaction: None,
        }),
        store_reader,
        watch: PartitionWatch::new("c-0".into(), looked_up),
        sink: Arc::new(LoggingSink(log.clone())),
        acks: acks.clone(),
        metrics: metrics.task().clone(),
        writer: Arc::new(OffsetWriter::new("c", store)),
        status,
        control: control_rx,
        settings: TaskSettings {
            flush_interval: Duration::from_secs(60),
            flush_timeout: Duration::from_secs(5),
            strict_bound: false,
            tolerate_delivery_errors: false,
            transforms: Default::default(),
            error_handling: Default::default(),
            secrets: Default::default(),
        },
        health: Arc::new(StoreHealth::new()),
        helpers: Arc::new(Helpers::default()),
        topics: crate::worker::topics::TopicTracker::new(
            None,
            crate::state::TaskId::new("c", 0),
            Arc::default(),
        ),
        fence: Arc::default(),
        membership: None,
        delivery: super::TaskDelivery::AtLeastOnce,
        deferred: Default::default(),
    };
    let mut hooks = hooks(log.clone(), acks.clone());
    let run = tokio::spawn(async move { runner.run_with(&mut hooks).await });

    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let dispatched = log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|e| e == "batch_dispatched");
        if dispatched && acks.unacked() == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the batch was not dispatched and acknowledged: {:?}",
            log.lock().unwrap_or_else(|p| p.into_inner())
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    control
        .send(TargetState::Stopped)
        .expect("the loop listens");
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the task stops")
        .expect("no panic");

    let events = log.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(
        events,
        [
            "prepare_to_initialize",
            "start",
            "prepare_to_poll",
            "prepare_to_send(2)",
            "send",
            "record_dispatched",
            "send",
            "record_dispatched",
            "batch_dispatched",
            "prepare_to_poll",
            "final_commit(false)",
            "stop",
        ]
    );
}
