//! Confirming the worker's [`MembershipLease`] (KAFKA-9184): a thread of its own commits offset 0 of
//! every owned slot partition through the slot consumer, synchronously, every confirm interval.
//! Nothing is read through the group, so the offsets mean nothing, but the coordinator accepts a
//! commit only from a current member of the current generation: an accepted one confirms the lease
//! from the moment it was sent. `REBALANCE_IN_PROGRESS` confirms it too (the coordinator knows the
//! member and only asks it to rejoin). With no slot owned there are no tasks to hold back, and the
//! lease is confirmed as it is.
//!
//! A thread of its own, not the poll thread: a synchronous commit waits for the coordinator (up to
//! `socket.timeout.ms` while the brokers are cut off), and the poll thread must keep serving the
//! rebalance callbacks meanwhile — including the one that reports the slots lost. (librdkafka
//! reports an asynchronous commit's outcome only to an `offset_commit_cb`, which rdkafka does not
//! set.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, sync_channel};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use ferry_plugin::MembershipLease;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::RDKafkaErrorCode;
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
    while !stop.load(Ordering::Acquire) {
        if Instant::now() < next {
            std::thread::sleep(tick);
            continue;
        }
        next = Instant::now() + every;
        let Some(consumer) = consumer.upgrade() else {
            return;
        };
        confirm(&consumer, lease);
    }
}

/// One confirmation round trip.
fn confirm(consumer: &BaseConsumer<SlotsContext>, lease: &MembershipLease) {
    let group = &consumer.context().group_id;
    let sent = Instant::now();
    let assignment = match consumer.assignment() {
        Ok(assignment) => assignment,
        Err(e) => {
            tracing::debug!(group = %group, "membership check: no assignment: {e}");
            return;
        }
    };
    if assignment.count() == 0 {
        lease.confirm(sent);
        return;
    }
    let mut offsets = TopicPartitionList::with_capacity(assignment.count());
    for element in assignment.elements() {
        if offsets
            .add_partition_offset(element.topic(), element.partition(), Offset::Offset(0))
            .is_err()
        {
            return;
        }
    }
    let committed = consumer.commit(&offsets, CommitMode::Sync);
    if sent.elapsed() > Duration::from_secs(1) {
        tracing::warn!(group = %group, "a membership check took {:.1?} ({committed:?})", sent.elapsed());
    }
    match committed {
        Ok(()) => lease.confirm(sent),
        Err(e) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::RebalanceInProgress) => {
            lease.confirm(sent);
        }
        Err(e) => tracing::debug!(
            group = %group,
            "membership check refused: {e} (last confirmed {:.1?} ago)",
            lease.age()
        ),
    }
}
