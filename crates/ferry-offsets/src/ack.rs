//! Which offsets may be committed: Kafka Connect's `SubmittedRecords` rule (KAFKA-12226).
//!
//! Every record is submitted in poll order into one queue per source partition (logically equal
//! partitions share a queue). The sink acknowledges records in any order. The committable offset of a
//! partition is the offset of the last record of the fully acknowledged prefix of its queue; an
//! acknowledged record behind an unacknowledged one does not advance its partition. Partitions are
//! independent. A null partition is a partition; a record with a null offset commits nothing itself.
//!
//! The tracker is synchronous and cheap: records sit inline in their partition's queue (no
//! allocation per record), handles find them by queue and index, and [`SubmittedRecord::ack_all`]
//! acknowledges a group of deliveries under one lock. Only [`AckTracker::await_all`] is async.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ferry_api::{SourceOffset, SourcePartition, SourceRecord};
use tokio::sync::Notify;

use crate::codec::canonical_partition;

/// How many recently submitted partitions keep their canonical key at hand: a task usually polls
/// from a few partitions at a time, and a hit saves encoding the partition (and allocating its key)
/// for every record.
const RECENT_KEYS: usize = 8;

/// One submitted record, or a batch's records of one partition ([`AckTracker::submit_batch`]),
/// inline in its partition's queue (no allocation per record).
#[derive(Debug)]
struct Entry {
    offset: Option<SourceOffset>,
    /// How many records the entry stands for: 1, or a batch's records of this partition (acknowledged
    /// together, committed at the offset of the last of them).
    records: u64,
    acked: bool,
    /// Removed before it was sent ([`AckTracker::remove`]): done, but not a committed record.
    removed: bool,
}

#[derive(Debug)]
struct Queue {
    /// Tells this queue from an earlier one of the same partition that emptied and was dropped:
    /// a handle into that one refers to a record already acknowledged and popped.
    id: u64,
    partition: Option<SourcePartition>,
    /// The index (within this queue's life) of `records.front()`.
    first: u64,
    records: VecDeque<Entry>,
    /// The records the entries stand for.
    pending: u64,
    /// A record was submitted since the last [`AckTracker::committable`]: a drained queue is kept
    /// while its partition is in use, so that its buffer is not dropped and grown again from one
    /// entry after every commit (that regrowth was 8 % of a task's thread in the profile).
    submitted: bool,
}

impl Queue {
    /// The entry `index` refers to, or `None` once it was popped (it was acknowledged then).
    fn entry(&mut self, id: u64, index: u64) -> Option<&mut Entry> {
        if id != self.id {
            return None;
        }
        let at = usize::try_from(index.checked_sub(self.first)?).ok()?;
        self.records.get_mut(at)
    }
}

#[derive(Debug, Default)]
struct Queues {
    /// Hashed with foldhash: a lookup per submitted and per acknowledged record, where SipHash
    /// showed in the profile.
    by_key: HashMap<Arc<[u8]>, Queue, foldhash::fast::RandomState>,
    /// Recently submitted partitions and their canonical keys. A hit needs an equal map (`==`),
    /// and equal maps have equal canonical keys.
    recent: Vec<(Option<SourcePartition>, Arc<[u8]>)>,
    next_queue_id: u64,
    /// Records submitted since the tracker was made.
    submitted_total: u64,
}

impl Queues {
    /// The canonical key of `partition`, from the recent ones when it is there.
    fn key(&mut self, partition: Option<&SourcePartition>) -> Arc<[u8]> {
        // Clones of one map first (a pointer comparison each): a task usually emits one map per
        // partition, and comparing fields against the other recent partitions costs hashing.
        let same = |p: &Option<SourcePartition>| match (p, partition) {
            (Some(a), Some(b)) => a.shares_fields_with(b),
            (None, None) => true,
            _ => false,
        };
        let found = self.recent.iter().position(|(p, _)| same(p)).or_else(|| {
            self.recent
                .iter()
                .position(|(p, _)| p.as_ref() == partition)
        });
        if let Some(i) = found {
            // Moved up one place per hit, so the partitions in use are found after a comparison or
            // two, and one new partition does not push out a busy one.
            if i > 0 {
                self.recent.swap(i - 1, i);
                return Arc::clone(&self.recent[i - 1].1);
            }
            return Arc::clone(&self.recent[0].1);
        }
        let key: Arc<[u8]> = canonical_partition(partition).into();
        if self.recent.len() == RECENT_KEYS {
            self.recent.pop();
        }
        self.recent.insert(
            self.recent.len() / 2,
            (partition.cloned(), Arc::clone(&key)),
        );
        key
    }

    /// The entry a handle refers to, or `None` once it was popped (it was acknowledged then).
    fn entry(&mut self, record: &SubmittedRecord) -> Option<&mut Entry> {
        self.by_key
            .get_mut(&*record.queue_key)?
            .entry(record.queue_id, record.index)
    }
}

#[derive(Debug, Default)]
struct Shared {
    queues: Mutex<Queues>,
    unacked: AtomicUsize,
    acked: Notify,
}

impl Shared {
    fn queues(&self) -> MutexGuard<'_, Queues> {
        // Each critical section is a push, a flag change or a pop sequence that keeps the queues
        // consistent.
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts `n` new acknowledgements and wakes whoever waits for one.
    fn acknowledged(&self, n: usize) {
        if n > 0 {
            self.unacked.fetch_sub(n, Ordering::AcqRel);
            self.acked.notify_waiters();
        }
    }
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
    queue_id: u64,
    index: u64,
    shared: Arc<Shared>,
}

/// Marks an entry acknowledged; returns how many records that newly acknowledged.
fn acknowledge(entry: &mut Entry) -> usize {
    if std::mem::replace(&mut entry.acked, true) {
        0
    } else {
        usize::try_from(entry.records).unwrap_or(usize::MAX)
    }
}

impl SubmittedRecord {
    /// Acknowledges the record. Returns `false` if it was already acknowledged (acks are idempotent).
    pub fn ack(&self) -> bool {
        let newly = {
            let mut queues = self.shared.queues();
            queues.entry(self).map_or(0, acknowledge)
        };
        self.shared.acknowledged(newly);
        newly > 0
    }

    /// Acknowledges every record with one lock and one wake-up of the waiters per tracker, rather
    /// than one per record. Returns how many were not acknowledged before.
    pub fn ack_all(records: impl IntoIterator<Item = SubmittedRecord>) -> usize {
        let mut total = 0;
        let mut records = records.into_iter().peekable();
        while let Some(first) = records.next() {
            let shared = Arc::clone(&first.shared);
            let mut newly = 0;
            {
                let mut queues = shared.queues();
                // The queue of the previous record, reused while records share its key (the usual
                // run): one hash lookup per run rather than per record, under the lock the task's
                // submits wait for.
                let mut queue: Option<(Arc<[u8]>, Option<&mut Queue>)> = None;
                let mut record = Some(first);
                while let Some(current) = record {
                    if !queue
                        .as_ref()
                        .is_some_and(|(key, _)| Arc::ptr_eq(key, &current.queue_key))
                    {
                        let found = queues.by_key.get_mut(&*current.queue_key);
                        queue = Some((Arc::clone(&current.queue_key), found));
                    }
                    if let Some((_, Some(queue))) = &mut queue {
                        newly += queue
                            .entry(current.queue_id, current.index)
                            .map_or(0, acknowledge);
                    }
                    record = records.next_if(|next| Arc::ptr_eq(&next.shared, &shared));
                }
            }
            shared.acknowledged(newly);
            total += newly;
        }
        total
    }

    /// The canonical key of the record's partition (see [`crate::canonical_partition`]); logically
    /// equal partitions have equal keys.
    pub fn partition_key(&self) -> &[u8] {
        &self.queue_key
    }

    /// Whether the record has been acknowledged.
    pub fn is_acked(&self) -> bool {
        // Popped (committed or removed) records were acknowledged.
        self.shared
            .queues()
            .entry(self)
            .is_none_or(|entry| entry.acked)
    }
}

/// The records of one batch submitted together ([`AckTracker::submit_batch`]): one handle, one
/// lock and one wake-up to acknowledge them all, where [`SubmittedRecord`]s cost that per record.
#[derive(Debug)]
pub struct SubmittedBatch {
    /// One run per partition queue the batch went into: its records are one entry there.
    runs: Vec<BatchRun>,
    /// The run of each record, by its position in the batch (to find a failed one).
    run_of: Vec<usize>,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct BatchRun {
    queue_key: Arc<[u8]>,
    queue_id: u64,
    /// The index of the run's entry in its queue.
    index: u64,
    /// The position in the batch of the run's first record.
    at: usize,
}

impl SubmittedBatch {
    /// How many records the batch holds.
    pub fn len(&self) -> usize {
        self.run_of.len()
    }

    /// Whether the batch holds no record.
    pub fn is_empty(&self) -> bool {
        self.run_of.is_empty()
    }

    /// The canonical keys of the batch's partitions (see [`SubmittedRecord::partition_key`]), one
    /// per partition in the order the batch first used them, each with the position in the batch
    /// of its first record.
    pub fn partition_keys(&self) -> impl Iterator<Item = (&[u8], usize)> {
        self.runs.iter().map(|run| (&*run.queue_key, run.at))
    }

    /// Acknowledges every record of the batch but those of a partition with a record at one of the
    /// positions in `except` (a failed delivery): such a partition does not advance past the batch's
    /// start, its other records being one entry with it. One lock. Returns how many records were
    /// not acknowledged before.
    pub fn ack_except(&self, except: &[usize]) -> usize {
        let mut held = vec![
            false;
            if except.is_empty() {
                0
            } else {
                self.runs.len()
            }
        ];
        for &position in except {
            if let Some(&run) = self.run_of.get(position)
                && let Some(flag) = held.get_mut(run)
            {
                *flag = true;
            }
        }
        let mut newly = 0;
        {
            let mut queues = self.shared.queues();
            for (r, run) in self.runs.iter().enumerate() {
                if held.get(r).copied().unwrap_or(false) {
                    continue;
                }
                if let Some(queue) = queues.by_key.get_mut(&*run.queue_key) {
                    newly += queue.entry(run.queue_id, run.index).map_or(0, acknowledge);
                }
            }
        }
        self.shared.acknowledged(newly);
        newly
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
    /// Records submitted since the tracker was made, as of this call. With no pending records, a
    /// commit of these offsets covers every one of them (see [`AckTracker::submitted_total`]).
    pub submitted_through: u64,
}

impl AckTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Submits a record in poll order; acknowledge the returned handle on delivery.
    pub fn submit(
        &self,
        partition: Option<SourcePartition>,
        offset: Option<SourceOffset>,
    ) -> SubmittedRecord {
        self.submit_ref(partition.as_ref(), offset)
    }

    /// Submits `record`'s partition and offset in poll order (see [`AckTracker::submit`]); the
    /// partition is cloned only for a partition with no pending records.
    pub fn submit_record(&self, record: &SourceRecord) -> SubmittedRecord {
        self.submit_ref(
            record.source_partition.as_ref(),
            record.source_offset.clone(),
        )
    }

    /// Submits a batch of records in poll order under one lock, each with its partition; acknowledge
    /// the returned handle on delivery.
    ///
    /// A partition's records of the batch are one entry in its queue, with the offset of the last of
    /// them (`take_offset` moves it out of that record): acknowledged whole, the batch commits
    /// exactly what one record at a time would, each partition's last offset, and the tracker does
    /// no work per record. If a record fails, its partition commits no offset of this batch (its
    /// records before the failure are delivered again after a restart): never past a failure, and
    /// the one case that costs more duplicates than tracking every record is a task failing on a
    /// delivery error.
    pub fn submit_batch<R>(
        &self,
        records: &mut [R],
        partition: impl Fn(&R) -> Option<&SourcePartition>,
        mut take_offset: impl FnMut(&mut R) -> Option<SourceOffset>,
    ) -> SubmittedBatch {
        struct Group {
            key: Arc<[u8]>,
            /// The position of the group's first record (a clone of a task's one map per
            /// partition is recognised by pointer to its partition).
            at: usize,
            len: u64,
            last: usize,
        }
        let mut groups: Vec<Group> = Vec::new();
        let mut run_of = Vec::with_capacity(records.len());
        self.shared
            .unacked
            .fetch_add(records.len(), Ordering::AcqRel);
        let mut queues = self.shared.queues();
        queues.submitted_total += records.len() as u64;
        // The records' partitions, grouped by canonical key: first by pointer to a group's own
        // partition, else by key (logically equal partitions share a queue, and so a group).
        for (position, record) in records.iter().enumerate() {
            let own = partition(record);
            let same = |group: &Group| match (own, partition(&records[group.at])) {
                (Some(a), Some(b)) => a.shares_fields_with(b),
                (None, None) => true,
                _ => false,
            };
            let g = match groups.iter().position(same) {
                Some(g) => g,
                None => {
                    let key = queues.key(own);
                    match groups.iter().position(|g| g.key == key) {
                        Some(g) => g,
                        None => {
                            groups.push(Group {
                                key,
                                at: position,
                                len: 0,
                                last: position,
                            });
                            groups.len() - 1
                        }
                    }
                }
            };
            let group = &mut groups[g];
            group.len += 1;
            group.last = position;
            run_of.push(g);
        }
        let mut runs = Vec::with_capacity(groups.len());
        for group in groups {
            let entry = Entry {
                offset: take_offset(&mut records[group.last]),
                records: group.len,
                acked: false,
                removed: false,
            };
            let queue = match queues.by_key.get_mut(&*group.key) {
                Some(queue) => queue,
                None => {
                    let id = queues.next_queue_id;
                    queues.next_queue_id += 1;
                    let queue = Queue {
                        id,
                        partition: partition(&records[group.at]).cloned(),
                        first: 0,
                        records: VecDeque::new(),
                        pending: 0,
                        submitted: true,
                    };
                    queues.by_key.entry(Arc::clone(&group.key)).or_insert(queue)
                }
            };
            queue.submitted = true;
            queue.pending += group.len;
            let index = queue.first + queue.records.len() as u64;
            queue.records.push_back(entry);
            runs.push(BatchRun {
                queue_key: group.key,
                queue_id: queue.id,
                index,
                at: group.at,
            });
        }
        drop(queues);
        SubmittedBatch {
            runs,
            run_of,
            shared: self.shared.clone(),
        }
    }

    fn submit_ref(
        &self,
        partition: Option<&SourcePartition>,
        offset: Option<SourceOffset>,
    ) -> SubmittedRecord {
        let entry = Entry {
            offset,
            records: 1,
            acked: false,
            removed: false,
        };
        self.shared.unacked.fetch_add(1, Ordering::AcqRel);
        let mut queues = self.shared.queues();
        queues.submitted_total += 1;
        let queue_key = queues.key(partition);
        let (queue_id, index) = match queues.by_key.get_mut(&*queue_key) {
            Some(queue) => {
                queue.submitted = true;
                queue.pending += 1;
                queue.records.push_back(entry);
                (queue.id, queue.first + queue.records.len() as u64 - 1)
            }
            None => {
                let id = queues.next_queue_id;
                queues.next_queue_id += 1;
                let queue = Queue {
                    id,
                    partition: partition.cloned(),
                    first: 0,
                    records: VecDeque::from([entry]),
                    pending: 1,
                    submitted: true,
                };
                queues.by_key.insert(Arc::clone(&queue_key), queue);
                (id, 0)
            }
        };
        drop(queues);
        SubmittedRecord {
            queue_key,
            queue_id,
            index,
            shared: self.shared.clone(),
        }
    }

    /// Removes a record that was never sent (so it will be submitted again): its offset is never
    /// committed, and records behind it are not held back by it. Returns whether it was still
    /// tracked.
    pub fn remove(&self, record: &SubmittedRecord) -> bool {
        let newly = {
            let mut queues = self.shared.queues();
            let Some(entry) = queues.entry(record) else {
                return false;
            };
            if entry.removed {
                return false;
            }
            entry.removed = true;
            entry.offset = None;
            acknowledge(entry)
        };
        self.shared.acknowledged(newly);
        true
    }

    /// Takes the committable offsets: for every partition, pops its acknowledged prefix and reports
    /// the offset of the last popped record that has one (null offsets are skipped).
    pub fn committable(&self) -> CommittableOffsets {
        let mut queues = self.shared.queues();
        let mut result = CommittableOffsets {
            submitted_through: queues.submitted_total,
            ..CommittableOffsets::default()
        };
        queues.by_key.retain(|_, queue| {
            let mut last = None;
            while queue.records.front().is_some_and(|entry| entry.acked) {
                if let Some(entry) = queue.records.pop_front() {
                    queue.first += 1;
                    queue.pending = queue.pending.saturating_sub(entry.records);
                    if !entry.removed {
                        result.committable_records +=
                            usize::try_from(entry.records).unwrap_or(usize::MAX);
                    }
                    // A null offset commits nothing itself, and must not hide an earlier one.
                    if entry.offset.is_some() {
                        last = entry.offset;
                    }
                }
            }
            if let Some(offset) = last {
                result.offsets.push((queue.partition.clone(), offset));
            }
            let pending = usize::try_from(queue.pending).unwrap_or(usize::MAX);
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
            // A drained queue goes once a whole commit interval submitted nothing to it.
            let submitted = std::mem::replace(&mut queue.submitted, false);
            pending > 0 || submitted
        });
        result
    }

    /// Resolves at the next acknowledgement after it was first polled or enabled (`Notified::enable`):
    /// a committer enables it before it commits, so an acknowledgement during the commit is not missed.
    pub fn next_ack(&self) -> tokio::sync::futures::Notified<'_> {
        self.shared.acked.notified()
    }

    /// Records submitted since the tracker was made (removed ones included): a commit whose
    /// [`CommittableOffsets`] had no pending records and a `submitted_through` at least this covers
    /// every one of them.
    pub fn submitted_total(&self) -> u64 {
        self.shared.queues().submitted_total
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

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::Value;

    fn map(field: &str, n: i64) -> ferry_api::ConnectMap {
        let mut m = ferry_api::ConnectMap::new();
        m.insert(field, Value::Int64(n)).unwrap();
        m
    }

    /// (partition, offset) pairs for [`AckTracker::submit_batch`].
    type Pair = (Option<ferry_api::ConnectMap>, Option<ferry_api::ConnectMap>);

    fn submit_pairs(tracker: &AckTracker, pairs: &mut [Pair]) -> SubmittedBatch {
        tracker.submit_batch(pairs, |(p, _)| p.as_ref(), |(_, o)| o.take())
    }

    fn committed(tracker: &AckTracker) -> Vec<(i64, i64)> {
        let field = |m: &ferry_api::ConnectMap, name: &str| match m.get(name) {
            Some(Value::Int64(n)) => *n,
            other => panic!("{name}: {other:?}"),
        };
        let mut out: Vec<_> = tracker
            .committable()
            .offsets
            .iter()
            .map(|(p, o)| (field(p.as_ref().expect("partition"), "p"), field(o, "o")))
            .collect();
        out.sort_unstable();
        out
    }

    /// A batch interleaving partitions, between records submitted one by one: acknowledged with one
    /// call, it commits each partition's last offset, and the records after it still hold theirs.
    #[test]
    fn a_batch_acknowledged_at_once_commits_each_partitions_last_offset_in_order() {
        let tracker = AckTracker::new();
        let before = tracker.submit(Some(map("p", 1)), Some(map("o", 0)));
        let mut pairs: Vec<Pair> = (1..=6)
            .map(|n| (Some(map("p", n % 2)), Some(map("o", n))))
            .collect();
        let batch = submit_pairs(&tracker, &mut pairs);
        // Only each partition's last offset is tracked (moved out); the others stay with theirs.
        let taken: Vec<bool> = pairs.iter().map(|(_, o)| o.is_none()).collect();
        assert_eq!(taken, [false, false, false, false, true, true]);
        let after = tracker.submit(Some(map("p", 0)), Some(map("o", 7)));
        assert_eq!(batch.len(), 6);
        assert_eq!(batch.partition_keys().count(), 2);
        assert_eq!(tracker.submitted_total(), 8);
        assert_eq!(tracker.unacked(), 8);
        let before_ack = tracker.committable();
        assert_eq!(
            before_ack.pending_records, 8,
            "a batch's records count one by one"
        );
        assert_eq!(before_ack.largest_pending.map(|(_, n)| n), Some(4));
        assert_eq!(batch.ack_except(&[]), 6);
        assert_eq!(batch.ack_except(&[]), 0, "acknowledging twice counts once");
        // Partition 1 waits for the record submitted before the batch.
        assert_eq!(committed(&tracker), vec![(0, 6)]);
        assert!(before.ack());
        assert_eq!(committed(&tracker), vec![(1, 5)]);
        assert!(after.ack());
        assert_eq!(committed(&tracker), vec![(0, 7)]);
        assert_eq!(tracker.unacked(), 0);
    }

    /// A failed delivery inside a batch holds its partition back: it commits no offset of the batch
    /// (its earlier records are delivered again after a restart, never skipped); the batch's other
    /// partitions advance.
    #[test]
    fn a_failed_record_of_a_batch_holds_back_its_partition_only() {
        let tracker = AckTracker::new();
        // Positions: 0 p0/o0, 1 p1/o1, 2 p0/o2, 3 p1/o3, 4 p0/o4, 5 p1/o5.
        let mut pairs: Vec<Pair> = (0..6)
            .map(|n| (Some(map("p", n % 2)), Some(map("o", n))))
            .collect();
        let batch = submit_pairs(&tracker, &mut pairs);
        // Partition 0's three records are one entry: none of them counts as acknowledged.
        assert_eq!(batch.ack_except(&[2]), 3);
        assert_eq!(committed(&tracker), vec![(1, 5)]);
        assert_eq!(tracker.unacked(), 3);
        let pending = tracker.committable();
        assert_eq!(pending.pending_records, 3);
        assert_eq!(pending.pending_partitions, 1);
    }

    /// More partitions than the recent-key cache holds: each still gets one queue, and the batch's
    /// records in it are acknowledged in order.
    #[test]
    fn a_batch_over_more_partitions_than_the_key_cache_commits_every_one() {
        let tracker = AckTracker::new();
        let mut pairs: Vec<Pair> = (0..60)
            .map(|n| (Some(map("p", n % 20)), Some(map("o", n))))
            .collect();
        let batch = submit_pairs(&tracker, &mut pairs);
        assert_eq!(batch.partition_keys().count(), 20);
        assert_eq!(batch.ack_except(&[]), 60);
        let expected: Vec<_> = (0..20).map(|p| (p, p + 40)).collect();
        assert_eq!(committed(&tracker), expected);
    }

    /// Clones of a map find their key by pointer; an equal map built separately finds the same key.
    #[test]
    fn equal_partitions_share_a_queue_whether_cloned_or_rebuilt() {
        let tracker = AckTracker::new();
        let a = tracker.submit(Some(map("p", 1)), Some(map("o", 1)));
        let b = tracker.submit(Some(map("p", 2)), Some(map("o", 1)));
        let rebuilt = tracker.submit(Some(map("p", 1)), Some(map("o", 2)));
        assert_eq!(a.partition_key(), rebuilt.partition_key());
        assert_ne!(a.partition_key(), b.partition_key());
        let none = tracker.submit(None, Some(map("o", 3)));
        let none_again = tracker.submit(None, Some(map("o", 4)));
        assert_eq!(none.partition_key(), none_again.partition_key());
        assert_ne!(none.partition_key(), a.partition_key());
    }

    /// A drained queue keeps its buffer while its partition is in use, and goes once a whole commit
    /// interval submitted nothing to it (so a task's finished partitions cost nothing).
    #[test]
    fn a_drained_queue_stays_while_in_use_and_goes_after_an_idle_commit() {
        let tracker = AckTracker::new();
        let queues = |t: &AckTracker| t.shared.queues().by_key.len();
        for n in 0..1000 {
            assert!(tracker.submit(Some(map("p", 1)), Some(map("o", n))).ack());
        }
        assert_eq!(tracker.committable().offsets.len(), 1);
        assert_eq!(queues(&tracker), 1, "used since the last commit: kept");
        let capacity = |t: &AckTracker| {
            t.shared
                .queues()
                .by_key
                .values()
                .map(|q| q.records.capacity())
                .sum::<usize>()
        };
        assert!(capacity(&tracker) >= 1000, "its buffer is kept");
        let again = tracker.submit(Some(map("p", 1)), Some(map("o", 1000)));
        assert!(again.ack());
        assert_eq!(tracker.committable().offsets.len(), 1);
        assert_eq!(queues(&tracker), 1);
        // A commit interval with nothing submitted: the drained queue goes.
        assert!(tracker.committable().offsets.is_empty());
        assert_eq!(queues(&tracker), 0);
        // Its handles read as acknowledged; the partition gets a new queue when used again.
        assert!(again.is_acked());
        assert!(
            tracker
                .submit(Some(map("p", 1)), Some(map("o", 1001)))
                .ack()
        );
        assert_eq!(tracker.committable().offsets.len(), 1);
    }

    #[test]
    fn a_commit_with_nothing_pending_covers_every_record_submitted_before_it() {
        let acks = AckTracker::new();
        let first = acks.submit(Some(map("p", 1)), Some(map("n", 1)));
        let second = acks.submit(Some(map("q", 1)), Some(map("n", 1)));
        assert_eq!(acks.submitted_total(), 2);
        assert!(first.ack());
        let partial = acks.committable();
        assert_eq!((partial.pending_records, partial.submitted_through), (1, 2));
        assert!(second.ack());
        let whole = acks.committable();
        assert_eq!((whole.pending_records, whole.submitted_through), (0, 2));
        // A record removed before it was sent counts as submitted and covered.
        let removed = acks.submit(Some(map("p", 1)), Some(map("n", 2)));
        assert!(acks.remove(&removed));
        let after = acks.committable();
        assert_eq!((after.pending_records, after.submitted_through), (0, 3));
    }
}
