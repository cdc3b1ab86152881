//! A task's transactional sink (exactly-once source delivery, KIP-618): the task's own producer, with
//! `transactional.id = <group.id>-<connector>-<task>` as Kafka Connect names it, writes the task's
//! records and the offset records that cover them (to the worker's offsets topic) in one transaction.
//!
//! Opening it runs `initTransactions`, which fences every earlier producer of the id — the task's
//! previous instance, wherever it runs — before the task reads its offsets. A fenced producer's
//! sends and commits fail with `PRODUCER_FENCED` ([`SinkErrorKind::Fenced`]); its open transaction
//! was aborted by the coordinator, so nothing it wrote since its last commit is visible to
//! `read_committed` readers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use ferry_api::SourceRecord;
use ferry_offsets::OffsetWrite;
use ferry_plugin::sink::{
    PendingDelivery, RecordSink, SinkError, SinkErrorKind, TransactionalSink,
};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{DeliveryFuture, FutureRecord, Producer};

use crate::sink::{KafkaSink, kind_of};

/// Whether `error` is the broker (or librdkafka) saying a newer producer took the transactional id
/// over. Shared by the task's transactional sink and the store's task offset writer.
pub(crate) fn is_fencing(error: &KafkaError) -> bool {
    matches!(
        error.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::ProducerFenced
                | RDKafkaErrorCode::InvalidProducerEpoch
                | RDKafkaErrorCode::Fenced
                | RDKafkaErrorCode::TransactionCoordinatorFenced
        )
    )
}

/// Commits (`true`) or aborts the open transaction of `producer`, off the runtime's threads (both
/// calls block until the coordinator answers, at most `timeout`).
pub(crate) async fn end_transaction<C: rdkafka::client::ClientContext + 'static>(
    producer: rdkafka::producer::FutureProducer<C>,
    commit: bool,
    timeout: Duration,
) -> Result<(), KafkaError> {
    tokio::task::spawn_blocking(move || {
        if commit {
            producer.commit_transaction(timeout)
        } else {
            producer.abort_transaction(timeout)
        }
    })
    .await
    .unwrap_or(Err(KafkaError::Canceled))
}

/// A task's transactional producer and the offsets topics its offsets go to.
pub(crate) struct TransactionalKafkaSink {
    sink: KafkaSink,
    describe: String,
    /// The connector's offsets topic, then (for a connector with a topic of its own) the worker's:
    /// every offset goes to each, in the same transaction (see [`Self::open`]).
    offsets_topics: Vec<String>,
    /// Bound of `initTransactions`, a commit and an abort.
    timeout: Duration,
    open: AtomicBool,
}

impl TransactionalKafkaSink {
    /// Runs `initTransactions` on `sink`'s producer (fencing earlier holders of its transactional id).
    /// Offsets go to `offsets_topic` and, when `copy_to` names another topic (a connector with its
    /// own `offsets.storage.topic`), to it as well: Kafka Connect also writes such a connector's
    /// offsets to the worker's topic, best effort and outside the transaction. Here the copy is in the
    /// transaction, so the worker's topic never holds an offset whose records were aborted, a fenced
    /// zombie cannot write a stale copy there, and a tombstone lands in both topics at once (Kafka
    /// Connect needs its three-phase order, KAFKA-15018, because its two writes are separate).
    ///
    /// # Errors
    /// The coordinator did not answer within `timeout` (retriable), or refused the id.
    pub(crate) async fn open(
        sink: KafkaSink,
        transactional_id: &str,
        offsets_topic: String,
        copy_to: Option<String>,
        timeout: Duration,
    ) -> Result<Self, SinkError> {
        let describe = format!("{} (transactional.id {transactional_id})", sink.describe());
        let producer = sink.producer().clone();
        let initialized = tokio::task::spawn_blocking(move || producer.init_transactions(timeout))
            .await
            .unwrap_or(Err(KafkaError::Canceled));
        if let Err(e) = initialized {
            return Err(SinkError::new(
                describe,
                kind_of(&e),
                format!(
                    "initTransactions failed: {e}; check that the brokers are reachable and that this worker \
                     may use transactional ids (ACL TransactionalId Write)"
                ),
            )
            .with_source(e));
        }
        Ok(Self {
            sink,
            describe,
            offsets_topics: std::iter::once(offsets_topic.clone())
                .chain(copy_to.filter(|t| *t != offsets_topic))
                .collect(),
            timeout,
            open: AtomicBool::new(false),
        })
    }

    fn error(&self, what: &str, e: &KafkaError) -> SinkError {
        let kind = if is_fencing(e) {
            SinkErrorKind::Fenced
        } else {
            kind_of(e)
        };
        SinkError::new(self.describe.as_str(), kind, format!("{what} failed: {e}"))
    }

    /// Commits (`true`) or aborts the open transaction, off the runtime's threads.
    async fn end(&self, commit: bool) -> Result<(), KafkaError> {
        end_transaction(self.sink.producer().clone(), commit, self.timeout).await
    }

    /// Waits, without blocking a thread and at most the call timeout, until no record of the producer
    /// is in flight, then commits. rdkafka's `commit_transaction` first flushes, and its flush polls
    /// in rounds of 100 ms while any record is in flight: called with the batch's last records still
    /// on their way, every transaction took at least 100 ms (18 000 records/s at 2 000 records per
    /// transaction, measured by `scripts/bench --only eos`). With nothing in flight it returns at
    /// once.
    async fn drain_then_end(&self) -> Result<(), KafkaError> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut pause = Duration::from_micros(250);
        while self.sink.producer().in_flight_count() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(5));
        }
        self.end(true).await
    }

    /// Sends the offset records; returns their deliveries.
    async fn send_offsets(
        &self,
        offsets: &[OffsetWrite],
    ) -> Result<Vec<DeliveryFuture>, SinkError> {
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let mut pending = Vec::with_capacity(offsets.len() * self.offsets_topics.len());
        for topic in &self.offsets_topics {
            for write in offsets {
                self.send_offset(topic, write, timestamp, &mut pending)
                    .await?;
            }
        }
        Ok(pending)
    }

    /// Sends one offset record to `topic`, waiting while the producer's queue is full.
    async fn send_offset(
        &self,
        topic: &str,
        write: &OffsetWrite,
        timestamp: i64,
        pending: &mut Vec<DeliveryFuture>,
    ) -> Result<(), SinkError> {
        loop {
            let mut record = FutureRecord::<[u8], [u8]>::to(topic)
                .key(&write.key[..])
                .timestamp(timestamp);
            if let Some(value) = &write.value {
                record = record.payload(&value[..]);
            }
            match self.sink.producer().send_result(record) {
                Ok(future) => {
                    pending.push(future);
                    return Ok(());
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Err((e, _)) => return Err(self.error("sending the offset records", &e)),
            }
        }
    }
}

#[async_trait]
impl RecordSink for TransactionalKafkaSink {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    async fn send(&self, record: &SourceRecord) -> Result<PendingDelivery, SinkError> {
        if !self.in_transaction() {
            return Err(SinkError::new(
                self.describe.as_str(),
                SinkErrorKind::Fatal,
                "a record was sent with no transaction open",
            ));
        }
        self.sink.send(record).await.map_err(|e| {
            if e.kind == SinkErrorKind::Fenced {
                SinkError::new(self.describe.as_str(), SinkErrorKind::Fenced, e.message)
            } else {
                e
            }
        })
    }

    async fn flush(&self, timeout: Duration) -> Result<(), SinkError> {
        self.sink.flush(timeout).await
    }
}

#[async_trait]
impl TransactionalSink for TransactionalKafkaSink {
    fn begin(&self) -> Result<(), SinkError> {
        if self.in_transaction() {
            return Ok(());
        }
        self.sink
            .producer()
            .begin_transaction()
            .map_err(|e| self.error("beginning a transaction", &e))?;
        self.open.store(true, Ordering::Release);
        Ok(())
    }

    fn in_transaction(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    async fn commit(&self, offsets: &[OffsetWrite]) -> Result<(), SinkError> {
        if !self.in_transaction() {
            return Ok(());
        }
        let sent = self.send_offsets(offsets).await;
        let result = match sent {
            Ok(pending) => match self.drain_then_end().await {
                Ok(()) => {
                    // Resolved by the commit (which flushes): a failure here cannot happen once the
                    // commit succeeded, but is reported rather than assumed away.
                    for delivery in pending {
                        if let Ok(Err((e, _))) = delivery.await {
                            self.open.store(false, Ordering::Release);
                            return Err(
                                self.error("an offset record of the committed transaction", &e)
                            );
                        }
                    }
                    Ok(())
                }
                Err(e) => Err(self.error("committing the transaction", &e)),
            },
            Err(e) => Err(e),
        };
        if let Err(e) = &result
            && e.kind != SinkErrorKind::Fenced
        {
            // Whatever was under way is aborted, so that the producer can begin again (a fatal
            // error leaves it unusable: the task fails and its restart opens a new one).
            if let Err(abort) = self.end(false).await {
                tracing::debug!(sink = %self.describe, "aborting after a failed commit: {abort}");
            }
        }
        self.open.store(false, Ordering::Release);
        result
    }

    async fn abort(&self) -> Result<(), SinkError> {
        if !self.in_transaction() {
            return Ok(());
        }
        let result = self
            .end(false)
            .await
            .map_err(|e| self.error("aborting the transaction", &e));
        self.open.store(false, Ordering::Release);
        result
    }
}
