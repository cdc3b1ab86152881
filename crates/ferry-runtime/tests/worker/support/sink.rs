//! A sink whose every send is decided by a policy, with deliveries the test resolves.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry_api::{RecordMetadata, SourceRecord, async_trait};
use ferry_runtime::sink::{
    BatchDelivery, BatchSent, Delivery, PendingBatch, PendingDelivery, RecordSink, SinkError,
    SinkErrorKind,
};
use tokio::sync::{oneshot, watch};

use super::{key_of, lock};

/// What the sink does with one `send` of a record.
#[derive(Debug, Clone)]
pub enum Plan {
    /// Accept and deliver at once.
    Ack,
    /// Accept; the delivery resolves when the test calls [`TestSink::resolve`] or [`TestSink::fail`].
    Hold,
    /// Accept; the delivery fails with this message.
    FailDelivery(String),
    /// Keep `send` waiting (a full queue) until [`TestSink::unblock`], then accept and deliver at once.
    Block,
    /// Refuse the send itself.
    Refuse {
        /// Whether the refusal is retriable.
        retriable: bool,
    },
}

type Policy = Arc<dyn Fn(&str, usize) -> Plan + Send + Sync>;

struct Held {
    tx: oneshot::Sender<Delivery>,
    metadata: RecordMetadata,
}

/// A sink whose every send is decided by a policy `(record key, attempt number from 0) -> Plan`.
pub struct TestSink {
    policy: Mutex<Policy>,
    attempts: Mutex<HashMap<String, usize>>,
    accepted: Mutex<Vec<String>>,
    held: Mutex<HashMap<String, Held>>,
    next_offset: AtomicI64,
    /// Set by the test: the sink failed for good until [`RecordSink::reopen_if_failed`].
    pub failed_for_good: AtomicBool,
    /// Reopens done.
    pub reopens: AtomicUsize,
    /// Opened by [`TestSink::unblock`]: releases every `send` of [`Plan::Block`].
    unblocked: watch::Sender<bool>,
    /// `send`s currently waiting under [`Plan::Block`].
    blocked: AtomicUsize,
    /// Set by the test: `try_send_batch` takes records (else it takes none, as the default).
    pub batches: AtomicBool,
    /// How many records each `try_send_batch` took, in order (calls that took none not listed).
    taken: Mutex<Vec<usize>>,
}

/// Counts a waiting `send` for as long as it waits, including when its caller drops it.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl TestSink {
    /// A sink that delivers everything at once.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            policy: Mutex::new(Arc::new(|_, _| Plan::Ack)),
            attempts: Mutex::new(HashMap::new()),
            accepted: Mutex::new(Vec::new()),
            held: Mutex::new(HashMap::new()),
            next_offset: AtomicI64::new(0),
            failed_for_good: AtomicBool::new(false),
            reopens: AtomicUsize::new(0),
            unblocked: watch::Sender::new(false),
            blocked: AtomicUsize::new(0),
            batches: AtomicBool::new(false),
            taken: Mutex::new(Vec::new()),
        })
    }

    /// Replaces the policy for later sends.
    pub fn set_policy(&self, policy: impl Fn(&str, usize) -> Plan + Send + Sync + 'static) {
        *lock(&self.policy) = Arc::new(policy);
    }

    /// Holds the listed keys, delivers everything else at once.
    pub fn hold(&self, keys: &[&str]) {
        let keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
        self.set_policy(move |key, _| {
            if keys.iter().any(|k| k == key) {
                Plan::Hold
            } else {
                Plan::Ack
            }
        });
    }

    /// How many `send`s wait under [`Plan::Block`] right now (a dropped one no longer counts).
    pub fn blocked(&self) -> usize {
        self.blocked.load(Ordering::SeqCst)
    }

    /// Releases every `send` waiting under [`Plan::Block`], and every later one.
    pub fn unblock(&self) {
        self.unblocked.send_replace(true);
    }

    /// How many records each `try_send_batch` that took some took, in order.
    pub fn batches_taken(&self) -> Vec<usize> {
        lock(&self.taken).clone()
    }

    /// How many times `key` was sent (accepted or refused).
    pub fn attempts(&self, key: &str) -> usize {
        lock(&self.attempts).get(key).copied().unwrap_or(0)
    }

    /// Keys accepted by `send`, in order.
    pub fn accepted(&self) -> Vec<String> {
        lock(&self.accepted).clone()
    }

    /// Whether `key`'s delivery is held and still awaited by someone.
    pub fn is_held(&self, key: &str) -> bool {
        lock(&self.held).get(key).is_some_and(|h| !h.tx.is_closed())
    }

    /// Whether `key` was held and whoever awaited its delivery has dropped it.
    pub fn is_abandoned(&self, key: &str) -> bool {
        lock(&self.held).get(key).is_some_and(|h| h.tx.is_closed())
    }

    /// Delivers a held record.
    pub fn resolve(&self, key: &str) {
        let held = lock(&self.held)
            .remove(key)
            .unwrap_or_else(|| panic!("{key} is not held"));
        let _ = held.tx.send(Ok(held.metadata));
    }

    /// Fails a held record's delivery.
    pub fn fail(&self, key: &str, message: &str) {
        let held = lock(&self.held)
            .remove(key)
            .unwrap_or_else(|| panic!("{key} is not held"));
        let _ = held.tx.send(Err(sink_error(message, false)));
    }
}

fn sink_error(message: &str, retriable: bool) -> SinkError {
    let kind = if retriable {
        SinkErrorKind::Retriable
    } else {
        SinkErrorKind::Fatal
    };
    SinkError::new("test sink", kind, message)
}

#[async_trait]
impl RecordSink for TestSink {
    fn describe(&self) -> String {
        "test sink".to_owned()
    }

    async fn send(&self, record: &SourceRecord) -> Result<PendingDelivery, SinkError> {
        let key = key_of(record);
        let attempt = {
            let mut attempts = lock(&self.attempts);
            let n = attempts.entry(key.clone()).or_insert(0);
            *n += 1;
            *n - 1
        };
        let policy = lock(&self.policy).clone();
        let mut plan = policy(&key, attempt);
        if let Plan::Block = plan {
            self.blocked.fetch_add(1, Ordering::SeqCst);
            let _waiting = Waiting(&self.blocked);
            let mut unblocked = self.unblocked.subscribe();
            let _ = unblocked.wait_for(|open| *open).await;
            plan = Plan::Ack;
        }
        if let Plan::Refuse { retriable } = plan {
            return Err(sink_error(
                &format!("refused {key} (attempt {attempt})"),
                retriable,
            ));
        }
        lock(&self.accepted).push(key.clone());
        let metadata = RecordMetadata {
            topic: record.topic.clone(),
            partition: Some(0),
            offset: Some(self.next_offset.fetch_add(1, Ordering::SeqCst)),
        };
        Ok(match plan {
            Plan::Ack | Plan::Block => PendingDelivery::ready(Ok(metadata)),
            Plan::FailDelivery(message) => PendingDelivery::ready(Err(sink_error(&message, false))),
            Plan::Hold | Plan::Refuse { .. } => {
                let (tx, rx) = oneshot::channel();
                lock(&self.held).insert(key, Held { tx, metadata });
                PendingDelivery::new(async move {
                    rx.await.unwrap_or_else(|_| {
                        Err(sink_error("the test dropped a held delivery", false))
                    })
                })
            }
        })
    }

    /// Takes records while their plan accepts them at once (`Ack`, `Hold`, `FailDelivery`), under the
    /// same policy and attempt count as `send`; stops before one it would block or refuse (that one
    /// is not counted as an attempt: it was not handed over). One delivery for all: it resolves once
    /// every held record of the batch is resolved, failing the positions that failed.
    fn try_send_batch(&self, records: &[SourceRecord]) -> BatchSent {
        if !self.batches.load(Ordering::SeqCst) {
            return BatchSent::none();
        }
        let policy = lock(&self.policy).clone();
        let mut waits = Vec::new();
        let mut failed = Vec::new();
        let mut taken = 0;
        for (at, record) in records.iter().enumerate() {
            let key = key_of(record);
            let attempt = lock(&self.attempts).get(&key).copied().unwrap_or(0);
            let plan = policy(&key, attempt);
            if matches!(plan, Plan::Block | Plan::Refuse { .. }) {
                break;
            }
            *lock(&self.attempts).entry(key.clone()).or_insert(0) += 1;
            lock(&self.accepted).push(key.clone());
            let metadata = RecordMetadata {
                topic: record.topic.clone(),
                partition: Some(0),
                offset: Some(self.next_offset.fetch_add(1, Ordering::SeqCst)),
            };
            match plan {
                Plan::FailDelivery(message) => failed.push((at, sink_error(&message, false))),
                Plan::Hold => {
                    let (tx, rx) = oneshot::channel();
                    lock(&self.held).insert(key, Held { tx, metadata });
                    waits.push((at, rx));
                }
                _ => {}
            }
            taken = at + 1;
        }
        if taken == 0 {
            return BatchSent::none();
        }
        lock(&self.taken).push(taken);
        BatchSent::accepted(
            taken,
            PendingBatch::new(async move {
                for (at, rx) in waits {
                    match rx.await {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => failed.push((at, e)),
                        Err(_) => {
                            failed.push((at, sink_error("the test dropped a held delivery", false)))
                        }
                    }
                }
                BatchDelivery { failed }
            }),
        )
    }

    async fn flush(&self, _timeout: Duration) -> Result<(), SinkError> {
        Ok(())
    }

    async fn reopen_if_failed(&self) -> Result<bool, SinkError> {
        let reopened = self.failed_for_good.swap(false, Ordering::SeqCst);
        if reopened {
            self.reopens.fetch_add(1, Ordering::SeqCst);
        }
        Ok(reopened)
    }
}
