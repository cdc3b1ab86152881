//! Which offsets may be committed: Kafka Connect's `SubmittedRecords` rule (KAFKA-12226).
//!
//! Every record is submitted in poll order into one queue per source partition (logically equal
//! partitions share a queue). The sink acknowledges records in any order. The committable offset of a
//! partition is the offset of the last record of the fully acknowledged prefix of its queue; an
//! acknowledged record behind an unacknowledged one does not advance its partition. Partitions are
//! independent. A null partition is a partition; a record with a null offset commits nothing itself.
//!
//! The tracker is synchronous and cheap; only [`AckTracker::await_all`] is async.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ferry_api::{SourceOffset, SourcePartition};
use tokio::sync::Notify;

use crate::codec::canonical_partition;

#[derive(Debug)]
struct RecordState {
    offset: Option<SourceOffset>,
    acked: AtomicBool,
}

#[derive(Debug)]
struct Queue {
    partition: Option<SourcePartition>,
    records: VecDeque<Arc<RecordState>>,
}

#[derive(Debug, Default)]
struct Shared {
    queues: Mutex<HashMap<Vec<u8>, Queue>>,
    unacked: AtomicUsize,
    acked: Notify,
}

/// Tracks submitted records until they are acknowledged. Clones share state. Thread-safe.
#[derive(Debug, Clone, Default)]
pub struct AckTracker {
    shared: Arc<Shared>,
}

/// A handle to one submitted record; acknowledge it when the sink confirms delivery.
#[derive(Debug, Clone)]
pub struct SubmittedRecord {
    queue_key: Arc<[u8]>,
    state: Arc<RecordState>,
    shared: Arc<Shared>,
}

impl SubmittedRecord {
    /// Acknowledges the record. Returns `false` if it was already acknowledged (acks are idempotent).
    pub fn ack(&self) -> bool {
        if self.state.acked.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.shared.unacked.fetch_sub(1, Ordering::AcqRel);
        self.shared.acked.notify_waiters();
        true
    }

    /// The canonical key of the record's partition (see [`crate::canonical_partition`]); logically
    /// equal partitions have equal keys.
    pub fn partition_key(&self) -> &[u8] {
        &self.queue_key
    }

    /// Whether the record has been acknowledged.
    pub fn is_acked(&self) -> bool {
        self.state.acked.load(Ordering::Acquire)
    }
}

/// What a commit may write, from [`AckTracker::committable`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommittableOffsets {
    /// The offset to commit per partition that advanced.
    pub offsets: Vec<(Option<SourcePartition>, SourceOffset)>,
    /// Records whose acknowledgement became committable in this call.
    pub committable_records: usize,
    /// Records still waiting (unacknowledged, or behind an unacknowledged record).
    pub pending_records: usize,
    /// Partitions with pending records.
    pub pending_partitions: usize,
    /// The partition with the most pending records, and how many.
    pub largest_pending: Option<(Option<SourcePartition>, usize)>,
}

impl AckTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    fn queues(&self) -> MutexGuard<'_, HashMap<Vec<u8>, Queue>> {
        // Each critical section is a single push/pop sequence that keeps the queues consistent.
        self.shared.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Submits a record in poll order; acknowledge the returned handle on delivery.
    pub fn submit(
        &self,
        partition: Option<SourcePartition>,
        offset: Option<SourceOffset>,
    ) -> SubmittedRecord {
        let key = canonical_partition(partition.as_ref());
        let state = Arc::new(RecordState {
            offset,
            acked: AtomicBool::new(false),
        });
        self.shared.unacked.fetch_add(1, Ordering::AcqRel);
        let queue_key: Arc<[u8]> = key.as_slice().into();
        self.queues()
            .entry(key)
            .or_insert_with(|| Queue {
                partition,
                records: VecDeque::new(),
            })
            .records
            .push_back(state.clone());
        SubmittedRecord {
            queue_key,
            state,
            shared: self.shared.clone(),
        }
    }

    /// Removes a record that was never sent (so it will be submitted again). Returns whether it was
    /// still tracked. Only the last occurrence is searched, as it is normally the newest.
    pub fn remove(&self, record: &SubmittedRecord) -> bool {
        let mut queues = self.queues();
        let Some(queue) = queues.get_mut(&*record.queue_key) else {
            return false;
        };
        let Some(pos) = queue
            .records
            .iter()
            .rposition(|r| Arc::ptr_eq(r, &record.state))
        else {
            return false;
        };
        queue.records.remove(pos);
        if queue.records.is_empty() {
            queues.remove(&*record.queue_key);
        }
        drop(queues);
        if !record.state.acked.swap(true, Ordering::AcqRel) {
            self.shared.unacked.fetch_sub(1, Ordering::AcqRel);
            self.shared.acked.notify_waiters();
        }
        true
    }

    /// Takes the committable offsets: for every partition, pops its acknowledged prefix and reports
    /// the offset of the last popped record that has one (null offsets are skipped).
    pub fn committable(&self) -> CommittableOffsets {
        let mut result = CommittableOffsets::default();
        let mut queues = self.queues();
        queues.retain(|_, queue| {
            let mut last = None;
            while queue
                .records
                .front()
                .is_some_and(|r| r.acked.load(Ordering::Acquire))
            {
                if let Some(r) = queue.records.pop_front() {
                    result.committable_records += 1;
                    // A null offset commits nothing itself, and must not hide an earlier one.
                    if r.offset.is_some() {
                        last = Some(r);
                    }
                }
            }
            if let Some(offset) = last.and_then(|r| r.offset.clone()) {
                result.offsets.push((queue.partition.clone(), offset));
            }
            let pending = queue.records.len();
            if pending > 0 {
                result.pending_records += pending;
                result.pending_partitions += 1;
                if result
                    .largest_pending
                    .as_ref()
                    .is_none_or(|(_, n)| pending > *n)
                {
                    result.largest_pending = Some((queue.partition.clone(), pending));
                }
            }
            pending > 0
        });
        result
    }

    /// Resolves at the next acknowledgement after it was first polled or enabled (`Notified::enable`):
    /// a committer enables it before it commits, so an acknowledgement during the commit is not missed.
    pub fn next_ack(&self) -> tokio::sync::futures::Notified<'_> {
        self.shared.acked.notified()
    }

    /// The number of records not yet acknowledged.
    pub fn unacked(&self) -> usize {
        self.shared.unacked.load(Ordering::Acquire)
    }

    /// Waits until every submitted record is acknowledged, up to `timeout`. Returns whether all were.
    pub async fn await_all(&self, timeout: Duration) -> bool {
        let wait = async {
            loop {
                let notified = self.shared.acked.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.unacked() == 0 {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(timeout, wait).await.is_ok()
    }
}
