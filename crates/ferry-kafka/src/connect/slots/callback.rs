//! The slot consumer's rebalance hooks. librdkafka runs them on the thread that polls the consumer
//! (the slots' own poll thread), so they hand each event to the handler thread and, for a revocation,
//! block until the handler returns (bounded): the cooperative protocol gives revoked partitions to
//! another member only after this member's callback returned and it rejoined, so the worker's stop and
//! final commit finish before any new owner starts.

use std::collections::BTreeSet;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry_plugin::TaskId;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use rdkafka::topic_partition_list::TopicPartitionList;

use super::SlotHandler;
use super::topic::connector_of;

/// An event for the handler thread.
pub(super) enum Job {
    Assigned(Vec<TaskId>),
    /// The sender is told when the handler returned.
    Revoked(Vec<TaskId>, SyncSender<()>),
    Lost(Vec<TaskId>),
}

/// Runs the handler's calls one after another, in rebalance order, until the job channel closes.
pub(super) fn handler_loop(handler: Arc<dyn SlotHandler>, jobs: Receiver<Job>) {
    for job in jobs {
        match job {
            Job::Assigned(tasks) => handler.assigned(&tasks),
            Job::Revoked(tasks, done) => {
                handler.revoked(&tasks);
                // The waiter may have given up (timeout); nothing to do then.
                let _ = done.send(());
            }
            Job::Lost(tasks) => handler.lost(&tasks),
        }
    }
}

/// The slot consumer's context.
pub(super) struct SlotsContext {
    pub(super) group_id: String,
    pub(super) jobs: SyncSender<Job>,
    pub(super) revoke_timeout: Duration,
    pub(super) owned: Arc<Mutex<BTreeSet<TaskId>>>,
}

impl SlotsContext {
    fn tasks(&self, tpl: &TopicPartitionList) -> Vec<TaskId> {
        let mut tasks = Vec::new();
        for element in tpl.elements() {
            match (
                connector_of(&self.group_id, element.topic()),
                usize::try_from(element.partition()),
            ) {
                (Some(connector), Ok(task)) => tasks.push(TaskId::new(connector, task)),
                _ => tracing::warn!(
                    group = %self.group_id,
                    "slot consumer: ignoring partition {}/{} that is not a task slot",
                    element.topic(),
                    element.partition()
                ),
            }
        }
        tasks.sort();
        tasks
    }

    fn owned(&self) -> std::sync::MutexGuard<'_, BTreeSet<TaskId>> {
        self.owned.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn disown(&self, tasks: &[TaskId]) {
        let mut owned = self.owned();
        for task in tasks {
            owned.remove(task);
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
        let tasks = self.tasks(tpl);
        if tasks.is_empty() {
            return;
        }
        if consumer.assignment_lost() {
            self.disown(&tasks);
            // The group may already have given these slots away: stop at once, commit nothing.
            tracing::warn!(group = %self.group_id, ?tasks, "task slots lost (session expired or fenced)");
            self.send(Job::Lost(tasks));
            return;
        }
        let (done_tx, done_rx) = sync_channel(1);
        self.send(Job::Revoked(tasks.clone(), done_tx));
        match done_rx.recv_timeout(self.revoke_timeout) {
            Ok(()) => {}
            Err(RecvTimeoutError::Timeout) => tracing::error!(
                group = %self.group_id,
                ?tasks,
                "the revoke handler did not finish within {:?}; giving the slots up anyway, so their new \
                 owner may start before these tasks stopped. Raise the revoke timeout (it must stay below \
                 the rebalance timeout) or make task stop faster",
                self.revoke_timeout
            ),
            Err(RecvTimeoutError::Disconnected) => {
                tracing::error!(group = %self.group_id, "slot handler thread has stopped");
            }
        }
        self.disown(&tasks);
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                let tasks = self.tasks(tpl);
                if tasks.is_empty() {
                    return;
                }
                self.owned().extend(tasks.iter().cloned());
                self.send(Job::Assigned(tasks));
            }
            Rebalance::Revoke(_) => {}
            Rebalance::Error(e) => {
                tracing::warn!(group = %self.group_id, "task slot rebalance failed: {e}");
            }
        }
    }
}
