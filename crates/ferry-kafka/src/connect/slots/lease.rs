//! Confirming the worker's [`MembershipLease`] (KAFKA-9184): a thread of its own commits offset 0 of
//! every owned slot partition through the slot consumer, every confirm interval, with a metadata
//! string unique to the commit. Nothing is read through the group, so the offsets mean nothing, but
//! the coordinator accepts a commit only from a current member of the current generation: when the
//! next round reads the committed offsets back and finds that commit's metadata, the lease is
//! confirmed from the moment the commit was sent. With no slot owned there are no tasks to hold
//! back, and a valid lease is extended as it is; a lapsed one is not (a worker woken from a freeze
//! finds its slots gone while its tasks still stop), and waits for the coordinator's confirmation
//! of a commit once the worker owns slots again.
//!
//! The commit is asynchronous and its outcome read back (bounded) rather than awaited: librdkafka
//! reports an asynchronous commit's outcome only to an `offset_commit_cb`, which rdkafka does not set,
//! and a synchronous commit waits for the coordinator as long as a rebalance or an outage lasts —
//! measured at over 4 s while other members left — which would hold the consumer's close. A thread
//! of its own, not the poll thread, which must keep serving the rebalance callbacks meanwhile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, sync_channel};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use ferry_plugin::MembershipLease;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::callback::SlotsContext;

/// How long closing the slots waits for a confirmation under way before it goes on.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// The confirming thread; [`Confirmer::stop`] ends it.
pub(super) struct Confirmer {
    stop: Arc<AtomicBool>,
    done: std::sync::mpsc::Receiver<()>,
}

impl Confirmer {
    /// Starts confirming `lease` every `every` through `consumer` (held weakly: the poll thread owns
    /// it and drops it when the slots close). `None` if the thread cannot start (logged: the lease
    /// then lapses and tasks hold their records, which is safe).
    pub(super) fn spawn(
        consumer: &Arc<BaseConsumer<SlotsContext>>,
        lease: Arc<MembershipLease>,
        every: Duration,
    ) -> Option<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let (done_tx, done) = sync_channel(1);
        let (consumer, flag) = (Arc::downgrade(consumer), Arc::clone(&stop));
        let group = consumer
            .upgrade()
            .map(|c| c.context().group_id.clone())
            .unwrap_or_default();
        let spawned = std::thread::Builder::new()
            .name(format!("slots-lease-{group}"))
            .spawn(move || {
                run(&consumer, &lease, every, &flag);
                let _ = done_tx.send(());
            });
        match spawned {
            Ok(_) => Some(Self { stop, done }),
            Err(e) => {
                tracing::error!(group = %group, "cannot start the membership lease thread: {e}; tasks will hold their records");
                None
            }
        }
    }

    /// Ends the thread, waiting (bounded) for a confirmation under way.
    pub(super) fn stop(self) {
        self.stop.store(true, Ordering::Release);
        if let Err(RecvTimeoutError::Timeout) = self.done.recv_timeout(STOP_WAIT) {
            tracing::warn!(
                "the membership lease thread is still waiting for the coordinator; not waiting for it"
            );
        }
    }
}

fn run(
    consumer: &Weak<BaseConsumer<SlotsContext>>,
    lease: &MembershipLease,
    every: Duration,
    stop: &AtomicBool,
) {
    let tick = Duration::from_millis(25).min(every);
    let mut next = Instant::now();
    let mut checks = Checks::default();
    while !stop.load(Ordering::Acquire) {
        if Instant::now() < next {
            std::thread::sleep(tick);
            continue;
        }
        next = Instant::now() + every;
        let Some(consumer) = consumer.upgrade() else {
            return;
        };
        checks.round(&consumer, lease, every);
    }
}

/// The commits sent to confirm the membership.
#[derive(Default)]
struct Checks {
    /// Distinguishes this member's commits (the metadata of the last one is this plus a counter).
    tag: Option<String>,
    sent: u64,
    /// The last commit sent: its metadata and when it was sent.
    pending: Option<(String, Instant)>,
}

impl Checks {
    /// One round: confirms the lease if the previous round's commit was accepted (the committed
    /// offsets carry its metadata), then sends the next commit.
    ///
    /// Both calls are bounded: the commit is asynchronous (a synchronous one waits for the
    /// coordinator as long as a rebalance or an outage lasts, seconds, and would hold the consumer's
    /// close), and reading the committed offsets back waits at most `every`.
    fn round(
        &mut self,
        consumer: &BaseConsumer<SlotsContext>,
        lease: &MembershipLease,
        every: Duration,
    ) {
        let group = &consumer.context().group_id;
        let now = Instant::now();
        let assignment = match consumer.assignment() {
            Ok(assignment) => assignment,
            Err(e) => {
                tracing::debug!(group = %group, "membership check: no assignment: {e}");
                return;
            }
        };
        if assignment.count() == 0 {
            // No task to hold back, so a valid lease is kept valid; a lapsed one is not revived
            // (its tasks may still be stopping after the slots were taken while it was frozen).
            lease.extend(now);
            self.pending = None;
            return;
        }
        if let Some((metadata, sent)) = self.pending.take() {
            match consumer.committed_offsets(assignment.clone(), every) {
                Ok(committed)
                    if committed
                        .elements()
                        .iter()
                        .all(|e| e.metadata() == metadata) =>
                {
                    lease.confirm(sent);
                }
                Ok(_) => tracing::debug!(
                    group = %group,
                    "membership check: the commit sent {:.1?} ago was not accepted (last confirmed {:.1?} ago)",
                    sent.elapsed(),
                    lease.age()
                ),
                Err(e) => {
                    tracing::debug!(group = %group, "membership check: reading the commits back failed: {e}")
                }
            }
        }
        let tag = self.tag.get_or_insert_with(|| {
            // Unique among this machine's members: the process, and the member within it.
            static MEMBERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let member = MEMBERS.fetch_add(1, Ordering::Relaxed);
            format!("ferry-lease-{}-{member}", std::process::id())
        });
        self.sent += 1;
        let metadata = format!("{tag}-{}", self.sent);
        let mut offsets = TopicPartitionList::with_capacity(assignment.count());
        for element in assignment.elements() {
            match offsets.add_partition_offset(
                element.topic(),
                element.partition(),
                Offset::Offset(0),
            ) {
                Ok(()) => {
                    if let Some(mut added) =
                        offsets.find_partition(element.topic(), element.partition())
                    {
                        added.set_metadata(metadata.as_str());
                    }
                }
                Err(_) => return,
            }
        }
        let sent = Instant::now();
        match consumer.commit(&offsets, CommitMode::Async) {
            Ok(()) => self.pending = Some((metadata, sent)),
            Err(e) => tracing::debug!(group = %group, "membership check not sent: {e}"),
        }
    }
}
