//! The slot consumer's rebalance hooks. librdkafka runs them on the thread that polls the consumer
//! (the slots' own poll thread), so they hand each event to the handler thread and, for a revocation,
//! block until the handler returns (bounded): the cooperative protocol gives revoked partitions to
//! another member only after this member's callback returned and it rejoined, so the worker's stop and
//! final commit finish before any new owner starts.
//!
//! The handler thread also publishes this worker's URL when it gets the leader slot, and tells the
//! handler `assigned([Leader])` only once the broker acknowledged it, so a worker acts as leader only
//! when the others can find it.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry_plugin::{GroupHandler, Slot, TaskId};
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use rdkafka::topic_partition_list::TopicPartitionList;

use super::leader::LeaderTopic;
use super::topic::connector_of;

/// An event for the handler thread.
pub(super) enum Job {
    Assigned(Vec<Slot>),
    /// The sender is told when the handler returned.
    Revoked(Vec<Slot>, SyncSender<()>),
    Lost(Vec<Slot>),
}

/// What the handler thread needs besides the handler.
pub(super) struct HandlerThread {
    pub(super) handler: Arc<dyn GroupHandler>,
    pub(super) leader: Arc<LeaderTopic>,
    /// Runs the leader topic's (async) producer from this plain thread.
    pub(super) runtime: tokio::runtime::Handle,
    /// Whether the group still gives this worker the leader slot (set by the rebalance hooks before
    /// they queue the job), so a publish that keeps failing stops retrying once the slot moved on.
    pub(super) leader_held: Arc<AtomicBool>,
    /// Set when the slots close.
    pub(super) stop: Arc<AtomicBool>,
    /// This worker's URL, as published.
    pub(super) own_url: String,
}

/// Pause between attempts to publish the leader's URL.
const PUBLISH_RETRY: Duration = Duration::from_millis(500);

/// How often the leader checks that the leader topic still names it.
const LEADER_CHECK: Duration = Duration::from_secs(5);

impl HandlerThread {
    /// Runs the handler's calls one after another, in rebalance order, until the job channel closes.
    pub(super) fn run(self, jobs: Receiver<Job>) {
        // Whether the handler was told `assigned([Leader])` (and not yet revoked or lost).
        let mut leading = false;
        loop {
            let job = match jobs.recv_timeout(LEADER_CHECK) {
                Ok(job) => job,
                Err(RecvTimeoutError::Timeout) => {
                    if leading {
                        self.check_published();
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            };
            match job {
                Job::Assigned(slots) => {
                    let (leader, tasks) = split(slots);
                    if !tasks.is_empty() {
                        self.handler.assigned(&tasks);
                    }
                    if leader && !leading && self.announce() {
                        leading = true;
                        self.handler.assigned(&[Slot::Leader]);
                    }
                }
                Job::Revoked(slots, done) => {
                    let slots = self.known(slots, &mut leading);
                    if !slots.is_empty() {
                        self.handler.revoked(&slots);
                    }
                    // The waiter may have given up (timeout); nothing to do then.
                    let _ = done.send(());
                }
                Job::Lost(slots) => {
                    let slots = self.known(slots, &mut leading);
                    if !slots.is_empty() {
                        self.handler.lost(&slots);
                    }
                }
            }
        }
    }

    /// `slots` without the leader slot unless the handler was told it got it (a leader whose URL
    /// was never published did not act as leader, so it has nothing to stop).
    fn known(&self, slots: Vec<Slot>, leading: &mut bool) -> Vec<Slot> {
        if !slots.contains(&Slot::Leader) || std::mem::replace(leading, false) {
            return slots;
        }
        slots.into_iter().filter(|s| *s != Slot::Leader).collect()
    }

    /// Republishes this worker's URL when the leader topic's newest record is another worker's: a
    /// former leader's write that landed late (it lost the slot while the write was under way) must
    /// not leave the others forwarding to it until the next rebalance.
    fn check_published(&self) {
        if !self.leader_held.load(Ordering::Acquire) || self.stop.load(Ordering::Acquire) {
            return;
        }
        match self.runtime.block_on(self.leader.newest()) {
            Ok(Some(record)) if record.url == self.own_url => {}
            Ok(newest) => {
                tracing::warn!(
                    "the leader topic names {newest:?}, but this worker holds the leader slot; \
                     publishing its URL again"
                );
                if let Err(e) = self.runtime.block_on(self.leader.publish()) {
                    tracing::warn!("republishing the leader's URL failed (tried again later): {e}");
                }
            }
            Err(e) => tracing::warn!("checking the leader topic failed (tried again later): {e}"),
        }
    }

    /// Publishes this worker's URL, retrying while the slot is still this worker's; whether it was
    /// acknowledged.
    fn announce(&self) -> bool {
        let mut failures = 0u32;
        loop {
            if !self.leader_held.load(Ordering::Acquire) || self.stop.load(Ordering::Acquire) {
                return false;
            }
            match self.runtime.block_on(self.leader.publish()) {
                Ok(()) => {
                    tracing::info!(
                        "this worker is the leader; its URL is published in {}",
                        self.leader.describe()
                    );
                    return true;
                }
                Err(e) => {
                    failures += 1;
                    // Not retried forever in silence: each failure says what and where.
                    tracing::warn!(
                        "this worker holds the leader slot but publishing its URL failed (attempt \
                         {failures}); it acts as leader only once the URL is published, retrying: {e}"
                    );
                }
            }
            std::thread::sleep(PUBLISH_RETRY);
        }
    }
}

/// Whether `slots` hold the leader slot, and its task slots.
fn split(slots: Vec<Slot>) -> (bool, Vec<Slot>) {
    let leader = slots.contains(&Slot::Leader);
    let tasks = slots.into_iter().filter(|s| *s != Slot::Leader).collect();
    (leader, tasks)
}

/// The slot consumer's context.
pub(super) struct SlotsContext {
    /// The consumer's group (the task group, or the leader group).
    pub(super) group_id: String,
    /// The task group, which names the slot topics.
    pub(super) slots_group: String,
    pub(super) leader_topic: String,
    pub(super) jobs: SyncSender<Job>,
    pub(super) revoke_timeout: Duration,
    pub(super) owned: Arc<Mutex<BTreeSet<Slot>>>,
    pub(super) leader_held: Arc<AtomicBool>,
}

impl SlotsContext {
    fn slots(&self, tpl: &TopicPartitionList) -> Vec<Slot> {
        let mut slots = Vec::new();
        for element in tpl.elements() {
            if element.topic() == self.leader_topic && element.partition() == 0 {
                slots.push(Slot::Leader);
                continue;
            }
            match (
                connector_of(&self.slots_group, element.topic()),
                usize::try_from(element.partition()),
            ) {
                (Some(connector), Ok(task)) => slots.push(Slot::Task(TaskId::new(connector, task))),
                _ => tracing::warn!(
                    group = %self.group_id,
                    "slot consumer: ignoring partition {}/{} that is not a slot",
                    element.topic(),
                    element.partition()
                ),
            }
        }
        slots.sort();
        slots
    }

    fn owned(&self) -> std::sync::MutexGuard<'_, BTreeSet<Slot>> {
        self.owned.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn disown(&self, slots: &[Slot]) {
        let mut owned = self.owned();
        for slot in slots {
            owned.remove(slot);
        }
    }

    fn send(&self, job: Job) {
        if self.jobs.send(job).is_err() {
            tracing::error!(group = %self.group_id, "slot handler thread has stopped; event dropped");
        }
    }
}

impl ClientContext for SlotsContext {
    fn error(&self, error: KafkaError, reason: &str) {
        tracing::warn!(group = %self.group_id, "task slot consumer: {error}: {reason}");
    }
}

impl ConsumerContext for SlotsContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(tpl) = rebalance else {
            return;
        };
        let slots = self.slots(tpl);
        if slots.is_empty() {
            return;
        }
        if slots.contains(&Slot::Leader) {
            self.leader_held.store(false, Ordering::Release);
        }
        if consumer.assignment_lost() {
            self.disown(&slots);
            // The group may already have given these slots away: stop at once, commit nothing.
            tracing::warn!(group = %self.group_id, ?slots, "slots lost (session expired or fenced)");
            self.send(Job::Lost(slots));
            return;
        }
        let (done_tx, done_rx) = sync_channel(1);
        self.send(Job::Revoked(slots.clone(), done_tx));
        match done_rx.recv_timeout(self.revoke_timeout) {
            Ok(()) => {}
            Err(RecvTimeoutError::Timeout) => tracing::error!(
                group = %self.group_id,
                ?slots,
                "the revoke handler did not finish within {:?}; giving the slots up anyway, so their new \
                 owner may start before these tasks stopped. Raise the revoke timeout (it must stay below \
                 the rebalance timeout) or make task stop faster",
                self.revoke_timeout
            ),
            Err(RecvTimeoutError::Disconnected) => {
                tracing::error!(group = %self.group_id, "slot handler thread has stopped");
            }
        }
        self.disown(&slots);
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                // Nothing is read through the group: no fetches, so no records to skip and no
                // position worth committing (auto-commit is off too).
                if let Err(e) = consumer.pause(tpl) {
                    tracing::warn!(group = %self.group_id, "pausing the assigned slot partitions failed: {e}");
                }
                let slots = self.slots(tpl);
                if slots.is_empty() {
                    return;
                }
                if slots.contains(&Slot::Leader) {
                    self.leader_held.store(true, Ordering::Release);
                }
                self.owned().extend(slots.iter().cloned());
                self.send(Job::Assigned(slots));
            }
            Rebalance::Revoke(_) => {}
            Rebalance::Error(e) => {
                tracing::warn!(group = %self.group_id, "slot rebalance failed: {e}");
            }
        }
    }
}
