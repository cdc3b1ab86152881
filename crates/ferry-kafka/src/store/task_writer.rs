//! One task's own offset writer ([`OffsetBackingStore::open_task_writer`]): a transactional producer
//! whose `transactional.id` is the task's fencing id (`<group.id>-<connector>-<task>`, Kafka Connect's
//! exactly-once `transactional.id`).
//!
//! Opening it runs `initTransactions`, which bumps the id's producer epoch at the transaction
//! coordinator: every earlier producer with the same id — the task's previous instance, on a worker
//! that was frozen, cut off or is still stopping — is fenced (its open transaction aborted, its next
//! send or commit refused with `PRODUCER_FENCED`). Each batch of offsets is then written in one
//! transaction and is visible to the store's `read_committed` readers only once committed. So a task
//! that lost its assignment can never commit offsets over its successor's, whatever it was doing when
//! the successor started, and a task's committed offsets never move backwards.
//!
//! Why by hand: this is what Ferry is about (fencing offset commits), and rdkafka's transactional API
//! is the well-kept piece it is built on.

use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use ferry_offsets::{OffsetBackingStore, OffsetWrite, StoreError, StoredOffset};
use rdkafka::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, Producer};

use super::log::OffsetLog;
use super::{batch_timestamp, blocking, read_log, send_all};
use crate::client::{StoreConsumer, StoreContext, backend};
use crate::transactional::is_fencing;

/// What a task writer shares with its store.
pub(super) struct Parts {
    pub(super) describe: String,
    pub(super) topic: String,
    /// The store's producer settings (idempotent, `acks=all`, murmur2).
    pub(super) producer_config: ClientConfig,
    pub(super) log: Arc<Mutex<OffsetLog>>,
    /// Asks for the topic's high watermarks (`read_uncommitted`): the task's reads go past every
    /// transaction open when they start ([`super::log::OffsetLog::read_past_open_transactions`]).
    pub(super) watermarks: Arc<StoreConsumer>,
    pub(super) last_timestamp: Arc<AtomicI64>,
    /// Bound of `initTransactions` and of each commit or abort.
    pub(super) timeout: Duration,
}

/// Where the writer's transactions stand between batches.
#[derive(Debug, Default)]
struct State {
    /// A newer instance fenced this one: every later write is refused without a broker call.
    fenced: Option<String>,
    /// The producer failed for good for another reason: this instance writes nothing more (a new
    /// instance of the task opens a new producer).
    broken: Option<String>,
    /// A transaction whose commit failed retriably and whose abort failed too: aborted first by the
    /// next batch.
    must_abort: bool,
}

/// A task's fenced offset writer. Reads go to the store's log, like the store's own, and past every
/// transaction open when they start.
pub(super) struct TaskWriter {
    parts: Parts,
    fencing_id: String,
    /// `None` once dropped (on a blocking thread: dropping a producer joins its threads).
    producer: Option<FutureProducer<StoreContext>>,
    state: tokio::sync::Mutex<State>,
}

/// What became of a transactional call that failed.
enum Failure {
    Fenced(String),
    Fatal(String),
    /// Abort the transaction, then the batch may be retried.
    Abortable(String),
    Retriable(String),
}

fn classify(what: &str, error: &KafkaError) -> Failure {
    let message = format!("{what} failed: {error}");
    if is_fencing(error) {
        return Failure::Fenced(message);
    }
    match error {
        KafkaError::Transaction(e) if e.is_fatal() => Failure::Fatal(message),
        KafkaError::Transaction(e) if e.txn_requires_abort() => Failure::Abortable(message),
        _ => Failure::Retriable(message),
    }
}

impl TaskWriter {
    /// Creates the producer and runs `initTransactions` (fencing every earlier holder of the id).
    ///
    /// # Errors
    /// The producer cannot be created (a bad setting), or the transaction coordinator did not answer
    /// within the store's timeout (retriable: a later start of the task tries again).
    pub(super) async fn open(parts: Parts, fencing_id: &str) -> Result<Self, StoreError> {
        let describe = parts.describe.clone();
        let mut config = parts.producer_config.clone();
        config.set("transactional.id", fencing_id);
        let producer: FutureProducer<StoreContext> = config
            .create_with_context(StoreContext {
                store: describe.clone(),
            })
            .map_err(|e| {
                backend(
                    &describe,
                    format!("creating the transactional producer {fencing_id:?} failed: {e}"),
                    false,
                )
            })?;
        let (init, timeout, id) = (producer.clone(), parts.timeout, fencing_id.to_owned());
        let store = describe.clone();
        let initialized = blocking(&describe, move || {
            init.init_transactions(timeout).map_err(|e| {
                let retriable = !matches!(&e, KafkaError::Transaction(t) if t.is_fatal());
                backend(
                    &store,
                    format!(
                        "initTransactions of transactional.id {id:?} failed: {e}; check that the brokers \
                         are reachable and that this worker may use transactional ids (ACL TransactionalId \
                         Write, and transaction.state.log.replication.factor within the number of brokers)"
                    ),
                    retriable,
                )
            })
        })
        .await;
        if let Err(e) = initialized {
            drop_off_runtime(producer);
            return Err(e);
        }
        tracing::debug!(store = %describe, transactional_id = %fencing_id, "task offset writer opened; earlier holders are fenced");
        Ok(Self {
            parts,
            fencing_id: fencing_id.to_owned(),
            producer: Some(producer),
            state: tokio::sync::Mutex::new(State::default()),
        })
    }

    fn producer(&self) -> Result<&FutureProducer<StoreContext>, StoreError> {
        self.producer.as_ref().ok_or_else(|| {
            backend(
                &self.parts.describe,
                "the task offset writer is closed",
                false,
            )
        })
    }

    fn fenced(&self, message: &str) -> StoreError {
        StoreError::Fenced {
            store: self.parts.describe.clone(),
            fencing_id: self.fencing_id.clone(),
            message: message.to_owned(),
        }
    }

    /// Runs a blocking transactional call (commit or abort) off the runtime's threads.
    async fn end_transaction(&self, commit: bool) -> Result<(), KafkaError> {
        let Some(producer) = self.producer.clone() else {
            return Err(KafkaError::Canceled);
        };
        crate::transactional::end_transaction(producer, commit, self.parts.timeout).await
    }

    /// Turns a failure into the error `set` returns, updating `state`; aborts when the failure asks
    /// for it.
    async fn settle(&self, state: &mut State, failure: Failure) -> StoreError {
        match failure {
            Failure::Fenced(message) => {
                tracing::warn!(store = %self.parts.describe, transactional_id = %self.fencing_id, "{message}: a newer instance of the task fenced this one");
                state.fenced = Some(message.clone());
                self.fenced(&message)
            }
            Failure::Fatal(message) => {
                state.broken = Some(message.clone());
                backend(&self.parts.describe, message, false)
            }
            Failure::Abortable(message) | Failure::Retriable(message) => {
                match self.end_transaction(false).await {
                    Ok(()) => state.must_abort = false,
                    Err(e) => match classify("aborting the transaction", &e) {
                        Failure::Fenced(m) => {
                            state.fenced = Some(m.clone());
                            return self.fenced(&m);
                        }
                        Failure::Fatal(m) => {
                            state.broken = Some(m.clone());
                            return backend(&self.parts.describe, m, false);
                        }
                        Failure::Abortable(_) | Failure::Retriable(_) => state.must_abort = true,
                    },
                }
                backend(
                    &self.parts.describe,
                    format!(
                        "{message}; the transaction was aborted and the offsets will be retried"
                    ),
                    true,
                )
            }
        }
    }
}

/// Drops a producer on a blocking thread when a runtime is there (dropping joins librdkafka's threads).
fn drop_off_runtime(producer: FutureProducer<StoreContext>) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn_blocking(move || drop(producer))),
        Err(_) => drop(producer),
    }
}

impl Drop for TaskWriter {
    fn drop(&mut self) {
        if let Some(producer) = self.producer.take() {
            drop_off_runtime(producer);
        }
    }
}

#[async_trait]
impl OffsetBackingStore for TaskWriter {
    fn describe(&self) -> String {
        self.parts.describe.clone()
    }

    async fn get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let keys = keys.to_vec();
        read_log(
            &self.parts.log,
            &self.parts.describe,
            self.parts.watermarks.clone(),
            move |table| {
                keys.iter()
                    .map(|k| table.get(k).map(<[u8]>::to_vec))
                    .collect()
            },
        )
        .await
    }

    /// Writes the batch in one transaction: all of it is committed, or none of it.
    async fn set(&self, batch: &[OffsetWrite]) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut state = self.state.lock().await;
        if let Some(message) = &state.fenced {
            return Err(self.fenced(message));
        }
        if let Some(message) = &state.broken {
            return Err(backend(
                &self.parts.describe,
                format!(
                    "the task's transactional producer failed earlier ({message}); restart the task"
                ),
                false,
            ));
        }
        if state.must_abort {
            if let Err(e) = self.end_transaction(false).await {
                let failure = classify("aborting the previous transaction", &e);
                return Err(self.settle(&mut state, failure).await);
            }
            state.must_abort = false;
        }
        let producer = self.producer()?;
        if let Err(e) = producer.begin_transaction() {
            let failure = classify("beginning a transaction", &e);
            return Err(self.settle(&mut state, failure).await);
        }
        let timestamp = batch_timestamp(&self.parts.last_timestamp);
        let sent = send_all(
            producer,
            &self.parts.topic,
            &self.parts.describe,
            batch,
            timestamp,
        )
        .await;
        if let Err(e) = sent {
            {
                // The commit reports what the failed sends did to the transaction (fenced, abortable);
                // without it a fenced producer would look like a broker outage.
                let failure = match self.end_transaction(false).await {
                    Ok(()) => return Err(e),
                    Err(abort) => classify("aborting after a failed send", &abort),
                };
                return Err(self.settle(&mut state, failure).await);
            }
        };
        // Readers see the transaction once its commit markers are written, after this returns: every
        // read waits for them (`read_past_open_transactions`), so a read after a commit sees it.
        match self.end_transaction(true).await {
            Ok(()) => Ok(()),
            Err(e) => {
                let failure = classify("committing the offsets' transaction", &e);
                Err(self.settle(&mut state, failure).await)
            }
        }
    }

    async fn connector_offsets(&self, connector: &str) -> Result<Vec<StoredOffset>, StoreError> {
        let connector = connector.to_owned();
        read_log(
            &self.parts.log,
            &self.parts.describe,
            self.parts.watermarks.clone(),
            move |table| table.connector_entries(&connector),
        )
        .await
    }

    async fn entries(&self) -> Result<Vec<StoredOffset>, StoreError> {
        read_log(
            &self.parts.log,
            &self.parts.describe,
            self.parts.watermarks.clone(),
            |table| table.entries(),
        )
        .await
    }
}
