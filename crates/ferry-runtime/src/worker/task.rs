//! The loop that runs one source task.
//!
//! `start(context)` → repeated `poll` → each record is sent to the sink, then handed to the delivery
//! semantics' [`TaskHooks::record_dispatched`] (at-least-once: submitted to the `AckTracker`); a
//! delivery watcher acknowledges it when the sink confirms delivery (and the loop calls
//! `commit_record`). The task's own committer ([`TaskHooks::periodic_committer`]) commits acknowledged
//! offsets every `offset.flush.interval.ms`. On stop: wait until every outstanding delivery has
//! resolved (bounded by `offset.flush.timeout.ms`; a failed one is never acknowledged, so there is
//! nothing to wait for), commit one last time ([`TaskHooks::final_commit`]), `stop()`. When the
//! worker's offset store fails for good ([`StoreHealth`]), the task fails with the store's error and
//! stops, without a final commit.
//!
//! The loop is generic over its hooks: at-least-once, today's only semantics, is called without
//! dynamic dispatch (see [`semantics`] for where each hook runs).

mod at_least_once;
mod exactly_once;
#[cfg(test)]
mod hooks_order;
mod semantics;
pub(crate) mod transaction_context;
mod transform;

use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use ferry_api::{ConnectError, DeliveredRecord, RecordMetadata, SourceRecord, SourceTask};
use ferry_offsets::{
    AckTracker, OffsetWriter, StoreOffsetReader, SubmittedBatch, SubmittedRecord,
    canonical_partition,
};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;

use crate::metrics::TaskMetrics;
use crate::sink::{BatchDelivery, Delivery, PendingBatch, PendingDelivery, RecordSink, SinkError};
use crate::worker::commit::{CommitError, CommitOutcome};
use crate::worker::context::{PartitionWatch, TaskContext};
use crate::worker::deliveries::DeliverySet;
use crate::worker::health::StoreHealth;
use crate::worker::status::{StatusCell, TaskState};
use crate::worker::task::at_least_once::AtLeastOnce;
use crate::worker::task::semantics::{Commit, TaskCommitParts, TaskHooks};
use crate::worker::thread::Helpers;

/// What the worker wants a task to do: the one `TargetState` the herder and the stores use too.
pub(crate) use crate::state::TargetState;

/// Per-task settings from the worker and connector configs.
#[derive(Debug, Clone)]
pub(crate) struct TaskSettings {
    pub(crate) flush_interval: Duration,
    pub(crate) flush_timeout: Duration,
    /// `offset.flush.strict.bound` (at-least-once): the next poll waits until the previous batch is
    /// committed, and commits follow acknowledgements at once.
    pub(crate) strict_bound: bool,
    /// `errors.tolerance=all`: a failed delivery counts as delivered.
    pub(crate) tolerate_delivery_errors: bool,
    /// The connector's transforms: each task builds its own chain from them.
    pub(crate) transforms: crate::transforms::Transforms,
    /// `errors.retry.*`, `errors.log.*`.
    pub(crate) error_handling: crate::transforms::ErrorHandling,
    /// Values resolved from config providers: scrubbed from failure traces and retry logs.
    pub(crate) secrets: Arc<Vec<String>>,
}

impl TaskSettings {
    /// How long the at-least-once committer waits between commits: none with a strict bound (a
    /// held poll waits for the commit that follows its batch's acknowledgements).
    pub(crate) fn commit_interval(&self) -> Duration {
        if self.strict_bound {
            Duration::ZERO
        } else {
            self.flush_interval
        }
    }
}

/// Records the watcher found delivered together: each with its metadata (`None`: failed and tolerated).
type Delivered = Vec<(Box<SourceRecord>, Option<RecordMetadata>)>;

enum LoopEvent {
    Delivered(Delivered),
    /// The topics records were acknowledged to, each run of one topic once (KIP-558); sent with
    /// every group of acknowledgements, whether or not the records go back to the loop.
    Acknowledged(Vec<String>),
    Committed,
}

struct InFlight {
    pending: Watched,
    tracking: Tracking,
}

/// What the watcher awaits: one record's delivery, or a batch's.
enum Watched {
    Record(PendingDelivery),
    Batch(PendingBatch),
}

/// What a [`Watched`] delivery resolved to.
enum WatchedOutcome {
    Record(Delivery),
    Batch(BatchDelivery),
}

impl std::future::Future for Watched {
    type Output = WatchedOutcome;
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<WatchedOutcome> {
        match self.get_mut() {
            Self::Record(pending) => std::pin::Pin::new(pending)
                .poll(cx)
                .map(WatchedOutcome::Record),
            Self::Batch(pending) => std::pin::Pin::new(pending)
                .poll(cx)
                .map(WatchedOutcome::Batch),
        }
    }
}

/// What the watcher acknowledges once a delivery resolves.
enum Tracking {
    Record {
        /// `None`: the semantics tracks nothing per record (see [`TaskHooks::record_dispatched`]).
        submitted: Option<SubmittedRecord>,
        /// The record, for a loop that gets its delivered records back
        /// ([`Outgoing::keeps_records`]); boxed once when polled: it moves through the channel,
        /// the watcher and the loop's events. `None` otherwise: the loop dropped it after `send`,
        /// on its own thread (freeing it here, on another, cost more than the watcher's own work in
        /// the profile).
        record: Option<Box<SourceRecord>>,
    },
    /// Records the sink accepted together ([`RecordSink::try_send_batch`]); the loop kept none.
    Batch {
        submitted: SubmittedBatch,
        /// The batch's topics, each run of one topic once with how many records it holds.
        topics: Vec<(String, usize)>,
    },
}

/// A delivery that resolved: what it tracked, and the outcome.
type Resolved = (Tracking, WatchedOutcome);

/// Most records handed to the delivery watcher as one message (and taken by it at a time).
const WATCH_BATCH: usize = 1024;
/// Messages of at most [`WATCH_BATCH`] records that may wait for the watcher: 65 536 records.
const WATCH_QUEUE: usize = 64;

/// The loop's side of the channel to the delivery watcher. Sent records are handed over a batch at a
/// time (a poll's records, at most [`WATCH_BATCH`]), so the watcher wakes once per batch rather than
/// once per record; [`Outgoing::flush`] hands over what is held.
struct Outgoing {
    tx: mpsc::Sender<Vec<InFlight>>,
    /// Records and batches, each one item.
    held: Vec<InFlight>,
    /// Whether delivered records go back to the loop (for `commit_records`, and under exactly-once,
    /// where the loop counts them per transaction); when not, the watcher gets none of them.
    keeps_records: bool,
    /// Whether the task gets its delivered records back: then the record kept is the one the task
    /// returned, before the transformations (Kafka Connect's `commitRecord` gets that one).
    keeps_originals: bool,
}

impl Outgoing {
    fn new(tx: mpsc::Sender<Vec<InFlight>>, keeps_records: bool, keeps_originals: bool) -> Self {
        Self {
            tx,
            held: Vec::new(),
            keeps_records,
            keeps_originals,
        }
    }

    /// Holds `item` for the watcher, handing the batch over once it is full.
    async fn push(&mut self, item: InFlight) -> Result<(), WatcherStopped> {
        self.held.push(item);
        if self.held.len() >= WATCH_BATCH {
            self.flush().await?;
        }
        Ok(())
    }

    /// Hands every held record to the watcher (waits while its queue is full).
    async fn flush(&mut self) -> Result<(), WatcherStopped> {
        if self.held.is_empty() {
            return Ok(());
        }
        // The next one sized as this one was: a poll's records one by one fill it again, a batch
        // handed over whole is one item (a 1024-item buffer per batch, freed on the watcher's
        // thread, showed in the profile).
        let capacity = self.held.len();
        let batch = std::mem::replace(&mut self.held, Vec::with_capacity(capacity));
        self.tx.send(batch).await.map_err(|_| WatcherStopped)
    }
}

/// A record handed to [`TaskRunner::send`], and what of it goes to the delivery watcher.
trait Outbound: std::ops::Deref<Target = SourceRecord> {
    /// The record to keep until its delivery resolved (see [`Tracking::Record`]).
    fn kept(self) -> Option<Box<SourceRecord>>;
}

/// A record kept for the loop's `commit_records`.
impl Outbound for Box<SourceRecord> {
    fn kept(self) -> Option<Box<SourceRecord>> {
        Some(self)
    }
}

/// A record the loop does not get back: borrowed for `send`, and dropped by its owner.
struct Unkept<'a>(&'a SourceRecord);

impl std::ops::Deref for Unkept<'_> {
    type Target = SourceRecord;
    fn deref(&self) -> &SourceRecord {
        self.0
    }
}

impl Outbound for Unkept<'_> {
    fn kept(self) -> Option<Box<SourceRecord>> {
        None
    }
}

/// A transformed record sent, and the record as the task returned it, kept for `commit_records`.
struct Transformed {
    sent: SourceRecord,
    original: Box<SourceRecord>,
}

impl std::ops::Deref for Transformed {
    type Target = SourceRecord;
    fn deref(&self) -> &SourceRecord {
        &self.sent
    }
}

impl Outbound for Transformed {
    fn kept(self) -> Option<Box<SourceRecord>> {
        Some(self.original)
    }
}

/// The delivery watcher is gone (it ends only with the loop, or by a panic): records handed to it
/// would never be acknowledged, so the task fails.
#[derive(Debug, thiserror::Error)]
#[error("the delivery watcher stopped")]
struct WatcherStopped;

/// Why a record could not be sent, and the task fails.
#[derive(Debug, thiserror::Error)]
enum SendFailure {
    /// See [`WatcherStopped`].
    #[error(transparent)]
    WatcherStopped(#[from] WatcherStopped),
    /// The sink refused the record for good, and no error is tolerated.
    #[error("the sink refused a record and errors.tolerance=none: {0}")]
    Refused(SinkError),
}

/// A spawned helper of the task loop, aborted when dropped: cancelling the loop (a task that did not
/// stop in time) cancels its delivery watcher and committer too, so nothing of it lives on or commits.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What became of one record handed to [`TaskRunner::send`].
enum Sent {
    /// Accepted by the sink (or dropped under `errors.tolerance=all`).
    Done,
    /// Not accepted because the task is stopping: the rest of the batch must not be sent either.
    Stopping,
}

/// Set once when the task must fail; wakes the loop even while it waits in `poll`.
#[derive(Default)]
struct Failure {
    reason: Mutex<Option<String>>,
    wake: Notify,
}

impl Failure {
    fn set(&self, reason: String) {
        let mut slot = self.reason.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(reason);
        }
        drop(slot);
        self.wake.notify_one();
    }
    fn get(&self) -> Option<String> {
        self.reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Exponential backoff for retriable errors: 100 ms doubling up to 10 s.
struct Backoff(Duration);

impl Backoff {
    fn new() -> Self {
        Self(Duration::from_millis(100))
    }
    fn next(&mut self) -> Duration {
        let current = self.0;
        self.0 = (self.0 * 2).min(Duration::from_secs(10));
        current
    }
    fn reset(&mut self) {
        self.0 = Duration::from_millis(100);
    }
}

/// The delivery watcher and the periodic committer of one run of the loop.
struct LoopHelpers {
    watcher: AbortOnDrop<()>,
    periodic: Option<AbortOnDrop<()>>,
    /// Tells the committer to stop after its current commit.
    stop_committer: watch::Sender<bool>,
}

/// What the poll loop works with besides `self`, borrowed apart from it so that a send waiting for
/// room can let the loop handle its events meanwhile.
struct LoopState<'a> {
    failure: &'a Failure,
    /// The worker's offset store health: a failure trace once it failed for good.
    store: &'a mut watch::Receiver<Option<String>>,
    outgoing: &'a mut Outgoing,
    events: &'a mut mpsc::UnboundedReceiver<LoopEvent>,
    chain: &'a mut crate::transforms::Chain,
    /// The wait before retrying a failed poll or send.
    backoff: Backoff,
    sink: Arc<dyn RecordSink>,
    /// `offset.flush.strict.bound`: the records the commits have covered (see
    /// [`Committer::covered`](crate::worker::commit::Committer::covered)); `None` without the bound.
    covered: Option<watch::Receiver<u64>>,
}

/// How one record of a batch ended, for the rest of the batch.
enum BatchStep {
    /// Sent or skipped: the batch goes on; `begin` when a transaction ended after the record (one
    /// begins before the next).
    Next { begin: bool },
    /// The batch ends here: its later records are not sent (they are polled again after a restart).
    Ended,
    /// The task failed or was fenced: the loop ends.
    Stop,
}

/// One task and everything its loop needs.
pub(crate) struct TaskRunner {
    pub(crate) name: String,
    pub(crate) task: Box<dyn SourceTask>,
    pub(crate) context: Arc<TaskContext>,
    pub(crate) store_reader: Arc<StoreOffsetReader>,
    pub(crate) watch: PartitionWatch,
    pub(crate) sink: Arc<dyn RecordSink>,
    pub(crate) acks: AckTracker,
    pub(crate) metrics: Arc<TaskMetrics>,
    pub(crate) writer: Arc<OffsetWriter>,
    pub(crate) status: StatusCell,
    pub(crate) control: watch::Receiver<TargetState>,
    pub(crate) settings: TaskSettings,
    pub(crate) health: Arc<StoreHealth>,
    /// Aborted by a stop that gives up on the task (its thread may be blocked in connector code).
    pub(crate) helpers: Arc<Helpers>,
    /// Records the topics acknowledged records went to (KIP-558).
    pub(crate) topics: super::topics::TopicTracker,
    /// The task instance's fence: superseded when the store fenced its writer (a newer instance
    /// runs the task), then the loop stops without a final commit or status.
    pub(crate) fence: Arc<super::fence::TaskFence>,
    /// Distributed mode's membership lease: batches are sent only while it is valid.
    pub(crate) membership: Option<Arc<ferry_plugin::MembershipLease>>,
    /// At least once, or exactly once through the task's transactional sink.
    pub(crate) delivery: TaskDelivery,
    /// Delivered records waiting for their transaction's commit before `commit_record` (exactly
    /// once), in delivery order.
    pub(crate) deferred: std::collections::VecDeque<(Box<SourceRecord>, Option<RecordMetadata>)>,
}

/// How a task delivers.
pub(crate) enum TaskDelivery {
    AtLeastOnce,
    ExactlyOnce {
        /// The task's transactional sink (also its `sink`).
        sink: Arc<dyn ferry_plugin::TransactionalSink>,
        boundary: crate::config::exactly_once::TransactionBoundary,
        /// The connector's name (its offsets' namespace).
        connector: String,
    },
}

impl TaskRunner {
    /// Runs the task until it is stopped or fails, with its delivery semantics.
    pub(crate) async fn run(self) {
        match &self.delivery {
            TaskDelivery::AtLeastOnce => {
                let mut hooks = AtLeastOnce::task_hooks(self.commit_parts());
                self.run_with(&mut hooks).await;
            }
            TaskDelivery::ExactlyOnce {
                sink,
                boundary,
                connector,
            } => {
                let mut hooks =
                    exactly_once::ExactlyOnceHooks::new(exactly_once::ExactlyOnceParts {
                        task: self.name.clone(),
                        connector: connector.clone(),
                        sink: sink.clone(),
                        boundary: *boundary,
                        flush_interval: self.settings.flush_interval,
                        flush_timeout: self.settings.flush_timeout,
                        fence: self.fence.clone(),
                        metrics: self.metrics.clone(),
                        context: self.context.transaction.clone(),
                    });
                self.run_with(&mut hooks).await;
            }
        }
    }

    /// What the delivery semantics' hooks work with.
    fn commit_parts(&self) -> TaskCommitParts {
        TaskCommitParts {
            task: self.name.clone(),
            acks: self.acks.clone(),
            writer: self.writer.clone(),
            metrics: self.metrics.clone(),
            health: self.health.clone(),
            settings: self.settings.clone(),
        }
    }

    /// Runs the task with `hooks` around its polls, sends and commits.
    async fn run_with<H: TaskHooks>(mut self, hooks: &mut H) {
        let Some(mut chain) = self.start_task(hooks).await else {
            return;
        };
        let failure = Arc::new(Failure::default());
        let (mut outgoing, mut events, helpers) = self.spawn_helpers(hooks, &failure);
        let mut store = self.health.subscribe();
        // Exactly-once has no periodic committer: its transactions bound what a crash redelivers.
        let covered = hooks
            .periodic_committer()
            .filter(|_| self.settings.strict_bound)
            .and_then(|committer| committer.covered());
        self.poll_until_stopped(
            hooks,
            &mut LoopState {
                failure: &failure,
                store: &mut store,
                outgoing: &mut outgoing,
                events: &mut events,
                chain: &mut chain,
                backoff: Backoff::new(),
                // The sink, held apart from `self` so that a send waiting for room can let the loop
                // handle its events meanwhile (one clone per run, not per record).
                sink: Arc::clone(&self.sink),
                covered,
            },
        )
        .await;
        self.drain(helpers, outgoing).await;
        // Every acknowledged record's event is queued before its ack (see `deliver`), so none is lost.
        self.handle_events(&mut events).await;
        self.finish(hooks, &failure, &mut events).await;
    }

    /// Starts the task: checks the offset store and the sink, prepares the hooks, builds the
    /// transform chain and calls `start()`. `None` when it did not start (it is stopped, and failed).
    async fn start_task<H: TaskHooks>(
        &mut self,
        hooks: &mut H,
    ) -> Option<crate::transforms::Chain> {
        if let Some(trace) = self.health.failure() {
            // Started (e.g. restarted over REST) after the store failed: it could never commit.
            self.fail(trace);
            self.store_reader.close();
            self.status.set(TaskState::Stopped);
            return None;
        }
        match self.sink.reopen_if_failed().await {
            Ok(false) => {}
            Ok(true) => tracing::info!(
                task = %self.name,
                "the sink {} had failed; reopened it for this task",
                self.sink.describe()
            ),
            Err(e) => {
                self.fail(format!(
                    "the sink failed earlier and cannot be reopened: {e}"
                ));
                self.store_reader.close();
                self.status.set(TaskState::Stopped);
                return None;
            }
        }
        if let Err(e) = hooks.prepare_to_initialize().await {
            self.fail(e.to_string());
            self.stop_task().await;
            return None;
        }
        let chain = match self.settings.transforms.chain() {
            Ok(chain) => chain,
            Err(e) => {
                self.fail(e.to_string());
                self.store_reader.close();
                self.status.set(TaskState::Stopped);
                return None;
            }
        };
        let context = self.context.clone();
        if let Err(e) = self.task.start(context).await {
            self.fail(format!("start() failed: {}", describe(&e)));
            self.stop_task().await;
            return None;
        }
        tracing::info!(task = %self.name, "task started");
        Some(chain)
    }

    /// Spawns the delivery watcher and the periodic committer (when the semantics has one). Returns
    /// the loop's ends of their channels, and the helpers.
    fn spawn_helpers<H: TaskHooks>(
        &self,
        hooks: &mut H,
        failure: &Arc<Failure>,
    ) -> (Outgoing, mpsc::UnboundedReceiver<LoopEvent>, LoopHelpers) {
        let (events_tx, events) = mpsc::unbounded_channel();
        let (inflight_tx, inflight_rx) = mpsc::channel(WATCH_QUEUE);
        // Records go back to the loop only for a task that wants them, and under exactly-once (the
        // loop counts them per transaction).
        let wants = self.task.wants_delivered_records();
        let hand_back = wants || matches!(self.delivery, TaskDelivery::ExactlyOnce { .. });
        let outgoing = Outgoing::new(inflight_tx, hand_back, wants);
        let watcher = AbortOnDrop(tokio::spawn(watch_deliveries(
            inflight_rx,
            events_tx.clone(),
            failure.clone(),
            self.settings.tolerate_delivery_errors,
            self.name.clone(),
            self.metrics.clone(),
        )));
        let (stop_committer_tx, stop_committer) = watch::channel(false);
        let periodic = hooks.periodic_committer().map(|committer| {
            AbortOnDrop(tokio::spawn(commit_periodically(
                committer,
                self.settings.commit_interval(),
                self.acks.clone(),
                stop_committer,
                events_tx,
            )))
        });
        self.helpers.register(watcher.0.abort_handle());
        if let Some(periodic) = &periodic {
            self.helpers.register(periodic.0.abort_handle());
        }
        let helpers = LoopHelpers {
            watcher,
            periodic,
            stop_committer: stop_committer_tx,
        };
        (outgoing, events, helpers)
    }

    /// Stops the committer once its current commit is done, then waits (at most
    /// `offset.flush.timeout.ms`) until every outstanding delivery has resolved.
    async fn drain(&mut self, helpers: LoopHelpers, outgoing: Outgoing) {
        let LoopHelpers {
            mut watcher,
            mut periodic,
            stop_committer,
        } = helpers;
        // Stop: no new records; let the committer finish its current commit, then drain.
        let _ = stop_committer.send(true);
        if let Some(periodic) = &mut periodic {
            let _ = (&mut periodic.0).await;
        }
        // Every batch ends with a flush, so nothing is held here.
        drop(outgoing);
        // The watcher ends once every delivery has resolved: a failed one (a poisoned sink) is never
        // acknowledged, so waiting for acknowledgements instead would take the whole timeout.
        let resolved = tokio::time::timeout(self.settings.flush_timeout, &mut watcher.0).await;
        if resolved.is_err() {
            tracing::warn!(
                task = %self.name,
                "{} records were not acknowledged within offset.flush.timeout.ms={} ms; their offsets are not committed and they will be delivered again after a restart",
                self.acks.unacked(),
                self.settings.flush_timeout.as_millis()
            );
        }
        drop(watcher);
    }

    /// Ends the run: records the loop's failure, commits one last time (unless a newer instance
    /// fenced this one, the store failed, or the stop gave up on the task), and stops the task.
    async fn finish<H: TaskHooks>(
        &mut self,
        hooks: &mut H,
        failure: &Failure,
        events: &mut mpsc::UnboundedReceiver<LoopEvent>,
    ) {
        if let Some(reason) = failure.get() {
            self.fail(reason);
        }
        if self.fence.is_superseded() {
            // A newer instance runs the task (it reads the committed offsets): nothing to commit,
            // nothing to report.
            tracing::warn!(task = %self.name, "task stopped without a final commit: a newer instance of it fenced this one (it runs on another worker, or restarted here)");
        } else if let Some(trace) = self.health.failure() {
            // No final commit: it would only fail (and log) once more.
            self.fail(trace);
        } else if self.helpers.is_cancelled() {
            // Given up on by the stop: whatever it acknowledged late is committed by no one.
        } else {
            let failed = self.status.get().state == TaskState::Failed;
            match hooks.final_commit(failed).await {
                CommitOutcome::Committed { .. } | CommitOutcome::NothingToCommit => {
                    self.release_committed(hooks, events).await;
                    self.call_commit().await;
                }
                // The store failed at this very commit: the task's last offsets are lost with it.
                CommitOutcome::Failed(CommitError::StoreFailed { trace, .. }) => self.fail(trace),
                CommitOutcome::Failed(_) => {}
            }
        }
        self.stop_task().await;
    }

    /// Polls and sends until the task is stopped, fails or is fenced.
    async fn poll_until_stopped<H: TaskHooks>(&mut self, hooks: &mut H, state: &mut LoopState<'_>) {
        loop {
            self.handle_events(state.events).await;
            if self.must_stop(state.failure, state.store) {
                return;
            }
            let target = *self.control.borrow_and_update();
            match target {
                TargetState::Stopped => return,
                TargetState::Paused => {
                    if !self.wait_paused(hooks, state).await {
                        return;
                    }
                    continue;
                }
                TargetState::Running => self.status.set(TaskState::Running),
            }
            // `offset.flush.strict.bound`: no poll until the last batch is committed. Checked here,
            // after a pause or a wake-up too, so two batches are never uncommitted at once.
            if let Some(covered) = state.covered.as_mut()
                && *covered.borrow_and_update() < self.acks.submitted_total()
            {
                tokio::select! {
                    biased;
                    changed = self.control.changed() => if changed.is_err() { return },
                    _ = state.failure.wake.notified() => {}
                    () = self.fence.woken() => {}
                    _ = state.store.changed() => {}
                    // The committer lives as long as the loop: an error cannot come first.
                    _ = covered.changed() => {}
                    Some(event) = state.events.recv() => self.handle_event(event).await,
                }
                continue;
            }
            if let Err(e) = hooks.prepare_to_poll().await {
                self.fail_unless_fenced(e);
                return;
            }
            self.release_committed(hooks, state.events).await;
            let poll_started = std::time::Instant::now();
            let polled = tokio::select! {
                biased;
                changed = self.control.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    continue;
                }
                _ = state.failure.wake.notified() => continue,
                () = self.fence.woken() => continue,
                _ = state.store.changed() => continue,
                polled = self.task.poll() => polled,
            };
            // A poll may return at once without awaiting (an empty Vec is allowed): yield now and then,
            // or such a task would never let its committer, its delivery watcher or other tasks run.
            tokio::task::coop::consume_budget().await;
            match polled {
                Ok(records) => {
                    state.backoff.reset();
                    self.metrics.polled(records.len(), poll_started.elapsed());
                    if records.is_empty() {
                        continue;
                    }
                    if !self.send_batch(hooks, records, state).await {
                        return;
                    }
                }
                Err(e) if e.is_retriable() => {
                    let delay = state.backoff.next();
                    let e = crate::config::scrub(e.to_string(), &self.settings.secrets);
                    tracing::warn!(task = %self.name, "poll failed, retrying in {} ms: {e}", delay.as_millis());
                    self.sleep_unless_stopped(delay).await;
                }
                Err(e) => {
                    self.fail(format!("poll() failed: {}", describe(&e)));
                    return;
                }
            }
        }
    }

    /// Whether the loop must end before the next poll: a newer instance fenced this one, the task
    /// failed (its status is set now), or the worker's offset store failed.
    fn must_stop(&self, failure: &Failure, store: &mut watch::Receiver<Option<String>>) -> bool {
        if self.fence.is_superseded() {
            return true;
        }
        if let Some(reason) = failure.get().or_else(|| self.fence.writer_failure()) {
            self.fail(reason);
            return true;
        }
        if let Some(trace) = store.borrow_and_update().clone() {
            self.fail(trace);
            return true;
        }
        false
    }

    /// Pauses the task (once) and waits until the target state changes or something wakes the
    /// loop; returns whether the loop goes on.
    async fn wait_paused<H: TaskHooks>(
        &mut self,
        hooks: &mut H,
        state: &mut LoopState<'_>,
    ) -> bool {
        if self.status.get().state != TaskState::Paused {
            // Exactly-once: a paused task holds no transaction open.
            if let Err(e) = hooks.paused().await {
                self.fail_unless_fenced(e);
                return false;
            }
            self.release_committed(hooks, state.events).await;
        }
        self.status.set(TaskState::Paused);
        tokio::select! {
            // The worker dropped its handle: nobody can resume or stop us any more.
            changed = self.control.changed() => if changed.is_err() { return false },
            _ = state.failure.wake.notified() => {}
            () = self.fence.woken() => {}
            _ = state.store.changed() => {}
            Some(event) = state.events.recv() => self.handle_event(event).await,
        }
        true
    }

    /// Sends a polled batch once the group confirms this worker, and hands what was sent to the
    /// delivery watcher; returns whether the loop goes on.
    async fn send_batch<H: TaskHooks>(
        &mut self,
        hooks: &mut H,
        records: Vec<SourceRecord>,
        state: &mut LoopState<'_>,
    ) -> bool {
        if !self.hold_while_unconfirmed(state.failure).await {
            // Stopping, failed, or the task runs elsewhere now: the batch was never sent,
            // so its records are polled again from the committed offsets by the task's
            // next instance. This instance polls no more (its connector state is past them).
            return false;
        }
        if let Err(e) = hooks.prepare_to_send(&records).await {
            self.fail_unless_fenced(e);
            return false;
        }
        let Some(dispatched) = self.send_records(hooks, records, state).await else {
            return false;
        };
        // Whatever ended the batch, the records sent so far are watched.
        if let Err(e) = state.outgoing.flush().await {
            state.failure.set(e.to_string());
            return true;
        }
        if dispatched && let Err(e) = hooks.batch_dispatched().await {
            self.fail_unless_fenced(e);
            return false;
        }
        self.release_committed(hooks, state.events).await;
        true
    }

    /// Sends a batch's records in order. Returns whether all of them were dispatched (`false`: the
    /// batch ended early), or `None` when the loop must end.
    async fn send_records<H: TaskHooks>(
        &mut self,
        hooks: &mut H,
        records: Vec<SourceRecord>,
        state: &mut LoopState<'_>,
    ) -> Option<bool> {
        if hooks.tracks_batches() && !state.outgoing.keeps_records && state.chain.is_empty() {
            return self.send_batched(hooks, records, state).await;
        }
        // A transaction ended inside the batch (the task asked): one begins before
        // the next record.
        let mut begin = false;
        for record in records {
            match self
                .send_record(hooks, record, std::mem::take(&mut begin), state)
                .await
            {
                BatchStep::Next { begin: next } => begin = next,
                BatchStep::Ended => return Some(false),
                BatchStep::Stop => return None,
            }
        }
        Some(true)
    }

    /// [`Self::send_records`] for a task whose records go to the sink as polled (no transformations)
    /// and whose semantics track batches, with nothing kept for `commit_records`: the records go
    /// over with as few [`RecordSink::try_send_batch`] calls as the sink allows, each accepted run
    /// tracked and watched as one item. What the sink does not take at once (a full queue, an
    /// error) and offset-only records go one by one, the way [`Self::send_record`] sends them, so
    /// waiting, retries, tolerance and a stop keep their exact rules: a record is tracked once the
    /// sink accepted it, and nothing after a record that was not sent is sent.
    async fn send_batched<H: TaskHooks>(
        &mut self,
        hooks: &mut H,
        mut records: Vec<SourceRecord>,
        state: &mut LoopState<'_>,
    ) -> Option<bool> {
        let mut next = 0;
        while next < records.len() {
            let end = records[next..]
                .iter()
                .position(|record| record.offset_only)
                .map_or(records.len(), |at| next + at);
            if end > next {
                // The lease before the records reach the client, as for every record sent alone.
                if !self.hold_while_unconfirmed(state.failure).await {
                    return Some(false);
                }
                let sent = state.sink.try_send_batch(&records[next..end]);
                let accepted = sent.accepted.min(end - next);
                if let Some(delivery) = sent.delivery
                    && accepted > 0
                {
                    let taken = &mut records[next..next + accepted];
                    let topics = topic_runs(taken);
                    let Some(submitted) = hooks.records_dispatched(taken) else {
                        // Cannot be (the semantics said it tracks batches); failing stops every
                        // later send, so nothing after these untracked records is committed.
                        state.failure.set(
                            "internal error: the delivery semantics did not track a batch the \
                             sink accepted"
                                .to_owned(),
                        );
                        return Some(false);
                    };
                    for (key, at) in submitted.partition_keys() {
                        let partition = taken.get(at).and_then(|r| r.source_partition.as_ref());
                        self.watch.observe(key, partition);
                    }
                    let item = InFlight {
                        pending: Watched::Batch(delivery),
                        tracking: Tracking::Batch { submitted, topics },
                    };
                    if let Err(e) = state.outgoing.push(item).await {
                        state.failure.set(e.to_string());
                        return Some(false);
                    }
                    next += accepted;
                    if next == end {
                        continue;
                    }
                    // The sink could not take the next record at once: asking again at once
                    // would only repeat its work on that record (a conversion) to be refused.
                }
            }
            // An offset-only record, or one the sink did not take at once: alone.
            let record = &records[next];
            if record.offset_only {
                self.checkpoint(hooks, record);
                next += 1;
                continue;
            }
            match self.send_in(hooks, Unkept(record), state).await {
                Ok(Sent::Done) => next += 1,
                // The unsent record's offset must never be committed, so no later record of the
                // batch may be sent: they are all polled again after a restart.
                Ok(Sent::Stopping) => return Some(false),
                Err(e) => {
                    state.failure.set(e.to_string());
                    return Some(false);
                }
            }
        }
        Some(true)
    }

    /// Sends one polled record through the transforms to the sink: begins a transaction first when
    /// `begin`, and ends one after it where the task asks.
    async fn send_record<H: TaskHooks>(
        &mut self,
        hooks: &mut H,
        record: SourceRecord,
        begin: bool,
        state: &mut LoopState<'_>,
    ) -> BatchStep {
        // `transaction.boundary=connector`: whether the transaction ends after this
        // record, asked of the record as the task returned it.
        let boundary = match hooks.boundary_at(&record) {
            Ok(boundary) => boundary,
            Err(e) => {
                state.failure.set(e.to_string());
                return BatchStep::Ended;
            }
        };
        if begin && let Err(e) = hooks.prepare_to_send(&[]).await {
            self.fail_unless_fenced(e);
            return BatchStep::Stop;
        }
        // An offset-only record: nothing to transform or send, its offset committed in order.
        if record.offset_only {
            self.checkpoint(hooks, &record);
            return self
                .end_transaction_at(hooks, boundary, state.outgoing)
                .await;
        }
        // The task gets back the record it returned, not the transformed one (a copy, made only
        // for a task that wants its records and has transformations).
        let original = (state.outgoing.keeps_originals && !state.chain.is_empty())
            .then(|| Box::new(record.clone()));
        let record = if state.chain.is_empty() {
            record
        } else {
            match self.transform(state.chain, record, state.outgoing).await {
                transform::Transformed::Record(record) => record,
                transform::Transformed::Skipped(polled) => {
                    self.skip(hooks, &polled).await;
                    return self
                        .end_transaction_at(hooks, boundary, state.outgoing)
                        .await;
                }
                transform::Transformed::Stopping => return BatchStep::Ended,
                transform::Transformed::Failed(reason) => {
                    state.failure.set(reason);
                    return BatchStep::Ended;
                }
            }
        };
        let sent = match original {
            Some(original) => {
                let transformed = Transformed {
                    sent: record,
                    original,
                };
                self.send_in(hooks, transformed, state).await
            }
            // Boxed once: it moves through the channel, the watcher and the loop's events.
            None if state.outgoing.keeps_records => {
                self.send_in(hooks, Box::new(record), state).await
            }
            // Sent from here and dropped here once the sink has it, on this thread.
            None => self.send_in(hooks, Unkept(&record), state).await,
        };
        match sent {
            Ok(Sent::Done) => {
                self.end_transaction_at(hooks, boundary, state.outgoing)
                    .await
            }
            // The unsent record's offset must never be committed, so no later record
            // of the batch may be sent: they are all polled again after a restart.
            Ok(Sent::Stopping) => BatchStep::Ended,
            Err(e) => {
                state.failure.set(e.to_string());
                BatchStep::Ended
            }
        }
    }

    /// Ends the transaction after a sent or skipped record when the task asked for it there.
    async fn end_transaction_at<H: TaskHooks>(
        &mut self,
        hooks: &mut H,
        boundary: Option<semantics::Boundary>,
        outgoing: &mut Outgoing,
    ) -> BatchStep {
        let Some(boundary) = boundary else {
            return BatchStep::Next { begin: false };
        };
        if self.end_transaction(hooks, boundary, outgoing).await {
            BatchStep::Next { begin: true }
        } else {
            BatchStep::Stop
        }
    }

    /// Waits while the worker's membership lease is not valid (KAFKA-9184: the group may have given
    /// this task away while the worker could not hear from it). Returns whether the batch may be
    /// sent: `false` when a stop, a failure or a fencing came first.
    async fn hold_while_unconfirmed(&mut self, failure: &Failure) -> bool {
        let Some(lease) = self.membership.clone() else {
            return true;
        };
        if lease.is_valid() {
            return true;
        }
        tracing::warn!(
            task = %self.name,
            "holding polled records: the group coordinator has not confirmed this worker for {:.1?} \
             (limit {:.1?}); they are sent once it does, and dropped (to be polled again by the task's \
             next owner) if the task is taken away",
            lease.age(),
            lease.validity()
        );
        let held = std::time::Instant::now();
        tokio::select! {
            () = lease.valid() => {
                tracing::info!(task = %self.name, "the group confirmed this worker again after {:.1?}; sending", held.elapsed());
                true
            }
            _ = self.control.wait_for(|t| *t == TargetState::Stopped) => false,
            _ = failure.wake.notified() => false,
            () = self.fence.woken() => false,
        }
    }

    /// [`TaskRunner::send`] with the loop's state.
    async fn send_in<H: TaskHooks, R: Outbound>(
        &mut self,
        hooks: &mut H,
        record: R,
        state: &mut LoopState<'_>,
    ) -> Result<Sent, SendFailure> {
        self.send(
            hooks,
            &*state.sink,
            record,
            state.outgoing,
            state.events,
            &mut state.backoff,
            state.failure,
        )
        .await
    }

    /// Sends one record, retrying retriable send errors. `Err` means the task must fail.
    #[expect(
        clippy::too_many_arguments,
        reason = "the loop's state is borrowed apart from `self`, so a waiting send can handle events"
    )]
    async fn send<H: TaskHooks, R: Outbound>(
        &mut self,
        hooks: &mut H,
        sink: &dyn RecordSink,
        record: R,
        outgoing: &mut Outgoing,
        events: &mut mpsc::UnboundedReceiver<LoopEvent>,
        backoff: &mut Backoff,
        failure: &Failure,
    ) -> Result<Sent, SendFailure> {
        loop {
            // The lease again, right before the record reaches the client (and before each retry):
            // a freeze can land anywhere in a batch, and on waking the rest of it must not go out
            // before the coordinator confirmed this worker. Checked per batch only, a SIGSTOP
            // between that check and a send let one record out as a zombie.
            if !self.hold_while_unconfirmed(failure).await {
                return Ok(Sent::Stopping);
            }
            let Some(sent) = self.sink_send(sink, &record, outgoing, events).await? else {
                return Ok(Sent::Stopping);
            };
            match sent {
                Err(e) if e.kind == crate::sink::SinkErrorKind::Fenced => {
                    // A newer instance of the task took its transactional id over: stop quietly.
                    tracing::warn!(task = %self.name, "the sink refused a record as fenced: {e}");
                    self.fence.supersede();
                    return Ok(Sent::Stopping);
                }
                Ok(pending) => {
                    let submitted = hooks.record_dispatched(&record);
                    self.observe(&record, submitted.as_ref());
                    let item = InFlight {
                        pending: Watched::Record(pending),
                        tracking: Tracking::Record {
                            submitted,
                            record: record.kept(),
                        },
                    };
                    outgoing.push(item).await?;
                    return Ok(Sent::Done);
                }
                Err(e) if e.is_retriable() => {
                    let delay = backoff.next();
                    tracing::warn!(task = %self.name, "sending a record failed, retrying in {} ms: {e}", delay.as_millis());
                    // The records accepted before this one are acknowledged (and committed) while
                    // this one waits.
                    outgoing.flush().await?;
                    if !self.sleep_unless_stopped(delay).await {
                        // Stopping: the record was never accepted, so its offset is never committed;
                        // it is polled again after a restart.
                        return Ok(Sent::Stopping);
                    }
                }
                Err(e) if self.settings.tolerate_delivery_errors => {
                    tracing::warn!(task = %self.name, "dropping a record the sink refused (errors.tolerance=all): {e}");
                    self.metrics.record_failure();
                    self.metrics.record_skipped();
                    self.skip(hooks, &record).await;
                    return Ok(Sent::Done);
                }
                Err(e) => {
                    self.metrics.record_failure();
                    self.metrics.record_error();
                    return Err(SendFailure::Refused(e));
                }
            }
        }
    }

    /// Hands `record` to the sink. When the sink makes the task wait (a full queue), what it
    /// accepted before is watched and the loop's events are handled meanwhile. `Ok(None)`: a stop
    /// came first.
    async fn sink_send(
        &mut self,
        sink: &dyn RecordSink,
        record: &SourceRecord,
        outgoing: &mut Outgoing,
        events: &mut mpsc::UnboundedReceiver<LoopEvent>,
    ) -> Result<Option<Result<PendingDelivery, SinkError>>, WatcherStopped> {
        let mut sending = sink.send(record);
        match std::future::poll_fn(|cx| Poll::Ready(sending.as_mut().poll(cx))).await {
            Poll::Ready(sent) => Ok(Some(sent)),
            // The sink makes us wait (a full queue): what it accepted before is watched
            // meanwhile, whatever its deliveries need to make progress.
            Poll::Pending => {
                outgoing.flush().await?;
                loop {
                    tokio::select! {
                        sent = &mut sending => return Ok(Some(sent)),
                        // The wait may last as long as the brokers are away: a stop gives
                        // the record up. It was never accepted, so its offset is never
                        // committed and it is polled again after a restart.
                        // (The `Ref` the wait returns is dropped inside, so that the
                        // event handler below may borrow `self`.)
                        () = async {
                            let _ = self.control.wait_for(|t| *t == TargetState::Stopped).await;
                        } => return Ok(None),
                        // Records acknowledged meanwhile get their `commit_record` now, as
                        // between polls, however long the sink makes us wait.
                        Some(event) = events.recv() => self.handle_event(event).await,
                    }
                }
            }
        }
    }

    /// A record that goes nowhere (a transform dropped it, or its error was tolerated): counted as
    /// delivered, so its offset is committed like a delivered record's (as Kafka Connect's).
    async fn skip<H: TaskHooks>(&mut self, hooks: &mut H, record: &SourceRecord) {
        let submitted = hooks.record_dropped(record);
        self.observe(record, submitted.as_ref());
        self.metrics.acknowledged();
        if let Some(submitted) = submitted {
            submitted.ack();
        }
        self.call_commit_record(record).await;
    }

    /// An offset-only record ([`SourceRecord::offset_only`]): delivered at once as far as the
    /// offsets go (committed once everything before it is), counted in no record metric, and not
    /// given to `commit_record` (the task made it; there is nothing it was delivered as).
    fn checkpoint<H: TaskHooks>(&mut self, hooks: &mut H, record: &SourceRecord) {
        let submitted = hooks.record_dropped(record);
        self.observe(record, submitted.as_ref());
        if let Some(submitted) = submitted {
            submitted.ack();
        }
    }

    /// Tells the partition watch about a sent record's partition, by the key the semantics already
    /// computed when it tracks the record.
    fn observe(&mut self, record: &SourceRecord, submitted: Option<&SubmittedRecord>) {
        let partition = record.source_partition.as_ref();
        match submitted {
            Some(submitted) => self.watch.observe(submitted.partition_key(), partition),
            None => self
                .watch
                .observe(&canonical_partition(partition), partition),
        }
    }

    /// Sleeps unless a stop arrives first; returns whether it slept the whole time.
    async fn sleep_unless_stopped(&mut self, delay: Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(delay) => true,
            // A closed channel (the worker is gone) counts as a stop.
            _ = self.control.wait_for(|t| *t == TargetState::Stopped) => false,
        }
    }

    async fn handle_events(&mut self, events: &mut mpsc::UnboundedReceiver<LoopEvent>) {
        while let Ok(event) = events.try_recv() {
            self.handle_event(event).await;
        }
    }

    async fn handle_event(&mut self, event: LoopEvent) {
        match event {
            LoopEvent::Delivered(delivered) => {
                if matches!(self.delivery, TaskDelivery::ExactlyOnce { .. }) {
                    // `commit_records` once the transaction committed (see `release_committed`).
                    self.deferred.extend(delivered);
                    return;
                }
                self.call_commit_records(delivered.iter()).await;
            }
            LoopEvent::Acknowledged(topics) => {
                self.topics.record(topics.iter().map(String::as_str))
            }
            LoopEvent::Committed => self.call_commit().await,
        }
    }

    /// Calls `commit_record` for the records whose transaction committed since the last call, once
    /// their deliveries are reported (they are: the commit waited for them), waiting at most
    /// `offset.flush.timeout.ms` for the reports.
    async fn release_committed<H: TaskHooks>(
        &mut self,
        hooks: &mut H,
        events: &mut mpsc::UnboundedReceiver<LoopEvent>,
    ) {
        let settled = hooks.take_settled_records();
        let ended: usize = settled.iter().map(|s| s.records).sum();
        if ended == 0 {
            return;
        }
        let deadline = tokio::time::Instant::now() + self.settings.flush_timeout;
        while self.deferred.len() < ended {
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Some(event)) => self.handle_event(event).await,
                Ok(None) | Err(_) => break,
            }
        }
        for transaction in settled {
            let ready = transaction.records.min(self.deferred.len());
            let records: Vec<_> = self.deferred.drain(..ready).collect();
            if !transaction.committed {
                // Aborted at the task's request: never delivered to committed readers.
                continue;
            }
            self.call_commit_records(records.iter()).await;
        }
    }

    /// Ends the open transaction where the task asked (after a record), once the records sent so far
    /// are watched. Returns whether the task goes on (`false`: it failed or was fenced).
    async fn end_transaction<H: TaskHooks>(
        &mut self,
        hooks: &mut H,
        boundary: semantics::Boundary,
        outgoing: &mut Outgoing,
    ) -> bool {
        if let Err(e) = outgoing.flush().await {
            self.fail(e.to_string());
            return false;
        }
        match hooks.end_transaction(boundary).await {
            Ok(()) => true,
            Err(e) => {
                self.fail_unless_fenced(e);
                false
            }
        }
    }

    /// Fails the task with `e`, unless a newer instance fenced it (it then stops quietly).
    fn fail_unless_fenced(&self, e: CommitError) {
        if !self.fence.is_superseded() {
            self.fail(e.to_string());
        }
    }

    /// `commit_records` for records the task gets back (see `wants_delivered_records`).
    async fn call_commit_records<'a>(
        &mut self,
        delivered: impl Iterator<Item = &'a (Box<SourceRecord>, Option<RecordMetadata>)>,
    ) {
        let batch: Vec<DeliveredRecord<'_>> = delivered
            .map(|(record, metadata)| DeliveredRecord::new(record, metadata.as_ref()))
            .collect();
        if batch.is_empty() {
            return;
        }
        if let Err(e) = self.task.commit_records(&batch).await {
            tracing::warn!(task = %self.name, "commit_records() failed (ignored): {e}");
        }
    }

    /// `commit_records` for one record a transformation or a tolerated error dropped.
    async fn call_commit_record(&mut self, record: &SourceRecord) {
        if !self.task.wants_delivered_records() {
            return;
        }
        if let Err(e) = self
            .task
            .commit_records(&[DeliveredRecord::new(record, None)])
            .await
        {
            tracing::warn!(task = %self.name, "commit_records() failed (ignored): {e}");
        }
    }

    async fn call_commit(&mut self) {
        if let Err(e) = self.task.commit().await {
            tracing::warn!(task = %self.name, "commit() failed (ignored): {e}");
        }
    }

    fn fail(&self, reason: String) {
        // A connector's error may quote its configuration (a connection string with a password).
        let reason = crate::config::scrub(reason, &self.settings.secrets);
        let message = format!("task failed: {reason}");
        if self.status.fail(reason) {
            tracing::error!(task = %self.name, "{message}");
        }
    }

    async fn stop_task(&mut self) {
        if let Err(e) = self.task.stop().await {
            tracing::warn!(task = %self.name, "stop() failed: {e}");
        }
        self.store_reader.close();
        self.status.set(TaskState::Stopped);
        tracing::info!(task = %self.name, "task stopped ({})", self.status.get().state);
    }
}

fn describe(e: &ConnectError) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let cause = s.to_string();
        // Many messages already embed their cause (`ConnectError::from(OffsetReadError)` does):
        // one chain, each cause once.
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
        source = s.source();
    }
    text
}

/// Resolves deliveries and acknowledges them. Deliveries are awaited concurrently, each acknowledged as
/// soon as it resolves: a slow delivery must not hold back the acknowledgement of another partition's
/// records (partitions are independent). All of them are polled from this one task (see
/// [`DeliverySet`]); the deliveries found resolved together are reported to the loop as one event.
/// Dropping (aborting) the watcher drops every pending delivery.
async fn watch_deliveries(
    mut inflight: mpsc::Receiver<Vec<InFlight>>,
    events: mpsc::UnboundedSender<LoopEvent>,
    failure: Arc<Failure>,
    tolerate: bool,
    task: String,
    metrics: Arc<TaskMetrics>,
) {
    let mut set = DeliverySet::new();
    let mut received = Vec::with_capacity(WATCH_QUEUE);
    let mut resolved = Vec::new();
    let mut open = true;
    loop {
        std::future::poll_fn(|cx| {
            loop {
                let mut took = false;
                if open {
                    // A few batches at a time: the set is polled between them, so a long queue does
                    // not delay acknowledging what already resolved.
                    match inflight.poll_recv_many(cx, &mut received, 4) {
                        Poll::Ready(0) => open = false,
                        Poll::Ready(_) => {
                            took = true;
                            for InFlight { pending, tracking } in received.drain(..).flatten() {
                                set.push(tracking, pending);
                            }
                        }
                        Poll::Pending => {}
                    }
                }
                set.poll_resolved(cx, &mut resolved);
                if !resolved.is_empty() || (!open && set.is_empty()) {
                    return Poll::Ready(());
                }
                // Pending only once both the channel and the set have registered a wake-up.
                if !took {
                    return Poll::Pending;
                }
            }
        })
        .await;
        if !resolved.is_empty() {
            let acks = Acks {
                events: &events,
                failure: &failure,
                tolerate,
                task: &task,
                metrics: &metrics,
            };
            acknowledge(&mut resolved, &acks);
        }
        if !open && set.is_empty() {
            return;
        }
    }
}

/// The topics of the acknowledged deliveries among `outcomes`, each run of one topic once. A failed
/// delivery (even one counted as delivered under `errors.tolerance=all`) names no active topic, as in
/// Kafka Connect.
#[cfg(test)]
fn acknowledged_topics<'a>(outcomes: impl Iterator<Item = &'a Delivery>) -> Vec<String> {
    let mut topics: Vec<String> = Vec::new();
    for metadata in outcomes.filter_map(|outcome| outcome.as_ref().ok()) {
        push_topic(&mut topics, &metadata.topic);
    }
    topics
}

/// The topics of `records`, each run of one topic once with its length.
fn topic_runs(records: &[SourceRecord]) -> Vec<(String, usize)> {
    let mut runs: Vec<(String, usize)> = Vec::new();
    for record in records {
        match runs.last_mut() {
            Some((topic, n)) if *topic == record.topic => *n += 1,
            _ => runs.push((record.topic.clone(), 1)),
        }
    }
    runs
}

/// Adds `topic` to the acknowledged topics unless it is the last one named (a run is named once).
fn push_topic(topics: &mut Vec<String>, topic: &str) {
    if topics.last().is_none_or(|last| last != topic) {
        topics.push(topic.to_owned());
    }
}

/// Where the watcher reports acknowledgements.
struct Acks<'a> {
    events: &'a mpsc::UnboundedSender<LoopEvent>,
    failure: &'a Failure,
    tolerate: bool,
    task: &'a str,
    metrics: &'a TaskMetrics,
}

/// Acknowledges resolved deliveries, or records the failure.
fn acknowledge(resolved: &mut Vec<Resolved>, to: &Acks<'_>) {
    // The records the loop kept go back to it (for `commit_records`); their topics are reported
    // either way. A failed delivery (even one counted as delivered under `errors.tolerance=all`)
    // names no active topic, as in Kafka Connect.
    let keeps = resolved.iter().any(|(tracking, _)| {
        matches!(
            tracking,
            Tracking::Record {
                record: Some(_),
                ..
            }
        )
    });
    let mut delivered: Delivered = Vec::with_capacity(if keeps { resolved.len() } else { 0 });
    let mut topics: Vec<String> = Vec::new();
    let mut acks = Vec::with_capacity(resolved.len());
    let mut batches = Vec::new();
    let (mut acknowledged, mut written) = (0, 0);
    for (tracking, outcome) in resolved.drain(..) {
        match (tracking, outcome) {
            (Tracking::Record { submitted, record }, WatchedOutcome::Record(outcome)) => {
                let ok = acknowledge_record(outcome, record, &mut delivered, &mut topics, to);
                if ok.is_some() {
                    acknowledged += 1;
                    acks.extend(submitted);
                }
                if ok == Some(true) {
                    written += 1;
                }
            }
            (
                Tracking::Batch {
                    submitted,
                    topics: runs,
                },
                WatchedOutcome::Batch(outcome),
            ) => {
                let (acked, wrote, except) = acknowledge_batch(outcome, &runs, &mut topics, to);
                acknowledged += acked;
                written += wrote;
                batches.push((submitted, except));
            }
            // Built together in `send` and `send_batched`: a record's delivery with a record's
            // tracking, a batch's with a batch's.
            _ => to
                .failure
                .set("internal error: a delivery resolved with another kind's tracking".to_owned()),
        }
    }
    // The event is queued before the acks: once every record is acknowledged, a stopping task finds
    // every `commit_record` event already queued.
    if !delivered.is_empty() {
        let _ = to.events.send(LoopEvent::Delivered(delivered));
    }
    if !topics.is_empty() {
        let _ = to.events.send(LoopEvent::Acknowledged(topics));
    }
    // Counted before the acks: once nothing is outstanding, the count is final.
    to.metrics.acknowledged_many(acknowledged);
    to.metrics.written(written);
    // One wake-up of the committer for the whole group, not one per record.
    SubmittedRecord::ack_all(acks);
    for (batch, except) in batches {
        batch.ack_except(&except);
    }
    to.metrics.sample_active();
}

/// One record's outcome: `Some(true)` delivered, `Some(false)` failed and counted as delivered
/// (`errors.tolerance=all`), `None` failed (the task fails; its partition does not advance past it).
fn acknowledge_record(
    outcome: Delivery,
    record: Option<Box<SourceRecord>>,
    delivered: &mut Delivered,
    topics: &mut Vec<String>,
    to: &Acks<'_>,
) -> Option<bool> {
    match outcome {
        Ok(metadata) => {
            push_topic(topics, &metadata.topic);
            if let Some(record) = record {
                delivered.push((record, Some(metadata)));
            }
            Some(true)
        }
        Err(e) => {
            to.metrics.record_failure();
            if !to.tolerate {
                to.metrics.record_error();
                to.failure
                    .set(format!("delivery failed and errors.tolerance=none: {e}"));
                return None;
            }
            tracing::warn!(task = %to.task, "delivery failed; counted as delivered (errors.tolerance=all): {e}");
            to.metrics.record_skipped();
            if let Some(record) = record {
                delivered.push((record, None));
            }
            Some(false)
        }
    }
}

/// A batch's outcome, as [`acknowledge_record`] for each of its records: returns how many count as
/// acknowledged and as written, and the positions to leave unacknowledged.
fn acknowledge_batch(
    outcome: BatchDelivery,
    runs: &[(String, usize)],
    topics: &mut Vec<String>,
    to: &Acks<'_>,
) -> (usize, usize, Vec<usize>) {
    let records: usize = runs.iter().map(|(_, n)| n).sum();
    if outcome.failed.is_empty() {
        for (topic, _) in runs {
            push_topic(topics, topic);
        }
        return (records, records, Vec::new());
    }
    let mut failed: Vec<usize> = outcome.failed.iter().map(|(at, _)| *at).collect();
    failed.sort_unstable();
    failed.dedup();
    let mut start = 0;
    for (topic, n) in runs {
        if (start..start + n).any(|at| failed.binary_search(&at).is_err()) {
            push_topic(topics, topic);
        }
        start += n;
    }
    for (_, e) in &outcome.failed {
        to.metrics.record_failure();
        if to.tolerate {
            tracing::warn!(task = %to.task, "delivery failed; counted as delivered (errors.tolerance=all): {e}");
            to.metrics.record_skipped();
        } else {
            to.metrics.record_error();
            to.failure
                .set(format!("delivery failed and errors.tolerance=none: {e}"));
        }
    }
    let written = records.saturating_sub(failed.len());
    if to.tolerate {
        (records, written, Vec::new())
    } else {
        (written, written, failed)
    }
}

/// How long continuous commits pause after a failed one (the store is unreachable or slow).
const CONTINUOUS_RETRY: Duration = Duration::from_millis(100);

/// Commits every `interval` until told to stop; never interrupts a commit in progress. A zero
/// interval commits continuously: the next commit starts as soon as the previous one finished and
/// something new was acknowledged, so a crash re-delivers only what was in flight.
async fn commit_periodically(
    committer: Arc<dyn Commit>,
    interval: Duration,
    acks: AckTracker,
    mut stop: watch::Receiver<bool>,
    events: mpsc::UnboundedSender<LoopEvent>,
) {
    let continuous = interval.is_zero();
    let mut wait = interval;
    loop {
        // Registered before the commit: an acknowledgement during it starts the next one.
        let acked = acks.next_ack();
        tokio::pin!(acked);
        acked.as_mut().enable();
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let outcome = committer.commit().await;
        if continuous {
            wait = Duration::ZERO;
            match &outcome {
                // Nothing new: wait for the next acknowledgement.
                CommitOutcome::NothingToCommit => tokio::select! {
                    () = &mut acked => {}
                    _ = stop.wait_for(|s| *s) => return,
                },
                CommitOutcome::Failed(e) if e.is_retriable() => wait = CONTINUOUS_RETRY,
                _ => {}
            }
        }
        match outcome {
            CommitOutcome::Committed { .. } | CommitOutcome::NothingToCommit => {
                let _ = events.send(LoopEvent::Committed);
            }
            CommitOutcome::Failed(e) if e.is_retriable() => {}
            // The task loop stops on it (see `StoreHealth`); no point in failing every interval.
            CommitOutcome::Failed(_) => return,
        }
    }
}

#[cfg(test)]
mod acknowledged_topics_tests {
    use super::*;
    use crate::sink::SinkErrorKind;

    fn acked(topic: &str) -> Delivery {
        Ok(RecordMetadata {
            topic: topic.to_owned(),
            partition: None,
            offset: None,
        })
    }

    #[test]
    fn a_failed_delivery_names_no_active_topic_and_runs_are_named_once() {
        let failed: Delivery = Err(SinkError::new("test", SinkErrorKind::Fatal, "refused"));
        // The failure may be counted as delivered (errors.tolerance=all): still not an active topic.
        let outcomes = [acked("a"), acked("a"), failed, acked("b"), acked("a")];
        assert_eq!(acknowledged_topics(outcomes.iter()), ["a", "b", "a"]);
        let none: [Delivery; 0] = [];
        assert!(acknowledged_topics(none.iter()).is_empty());
    }
}
