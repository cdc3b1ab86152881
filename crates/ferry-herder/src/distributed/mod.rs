//! The distributed herder: Kafka Connect's `DistributedHerder`, with ownership by group slots. What it
//! does and guarantees is documented on [`DistributedHerder`]; one job per module: `handler` (the
//! group's calls), `ownership` (the slots held), `reconcile` (the loop), `rest` (reads, routing),
//! `writes` (leader writes, restarts, offsets).

mod fence;
mod handler;
mod ownership;
mod reconcile;
mod rest;
mod writes;
mod zombies;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use ferry_api::Config;
use ferry_offsets::OffsetBackingStore;
use ferry_plugin::{GroupHandler, WorkerGroup};
use tokio::runtime::Handle;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use super::validate::{Plugin, Plugins};
use crate::StartError;
use ferry_runtime::TaskId;
use ferry_runtime::Worker;
use ferry_runtime::stores::{ConfigBackingStore, StatusBackingStore};
use ownership::Ownership;
use reconcile::{Applied, GroupSync};

/// Who this worker is in the cluster.
#[derive(Debug, Clone)]
pub struct DistributedSettings {
    /// The worker id written in statuses: the advertised REST `host:port`.
    pub worker_id: String,
    /// The REST base URL other workers forward to: `http://host:port`.
    pub rest_url: String,
    /// `scheduled.rebalance.max.delay.ms` (Kafka Connect's KIP-415 delay): how long a task slot this
    /// worker gets is held back when its previous owner departed with the task still running (a
    /// crash, a lost session) — that worker may come back. Zero: never held.
    pub scheduled_rebalance_max_delay: Duration,
    /// How long a new owner waits for a previous owner that still ran the task to release it (see
    /// `fence`) before starting it anyway (when the delay above is shorter): long enough for a live
    /// worker to see the claim and stop the task, short enough not to keep a dead worker's tasks
    /// waiting.
    pub handoff_timeout: Duration,
    /// The worker's config providers: `${provider:path:key}` in connector configurations is resolved
    /// with them when a connector or task starts here (the config topic keeps the placeholders).
    pub config_providers: ferry_runtime::config::ConfigProviders,
    /// The transformations and predicates connectors may use (default: the built-in ones).
    pub transforms: ferry_runtime::transforms::TransformRegistry,
    /// The worker's sink, if connector configurations are checked with it: the connector keys it
    /// reads itself (Kafka's `topic.creation.*`, `producer.override.*`) are accepted and checked by it.
    pub sink: Option<Arc<dyn ferry_plugin::DynSinkSpec>>,
}

impl DistributedSettings {
    /// The default [`handoff_timeout`](Self::handoff_timeout).
    pub const DEFAULT_HANDOFF_TIMEOUT: Duration = Duration::from_secs(2);

    /// Kafka Connect's default `scheduled.rebalance.max.delay.ms`: 5 minutes.
    pub const DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY: Duration = Duration::from_secs(300);

    /// Settings for worker `worker_id` reached at `rest_url`, with Kafka Connect's default delay.
    pub fn new(worker_id: impl Into<String>, rest_url: impl Into<String>) -> Self {
        Self {
            worker_id: worker_id.into(),
            rest_url: rest_url.into(),
            scheduled_rebalance_max_delay: Self::DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY,
            handoff_timeout: Self::DEFAULT_HANDOFF_TIMEOUT,
            config_providers: ferry_runtime::config::ConfigProviders::default(),
            transforms: ferry_runtime::transforms::TransformRegistry::default(),
            sink: None,
        }
    }
}

/// The distributed herder: Kafka Connect's `DistributedHerder`, with ownership by group **slots**.
///
/// Several workers share one [config store](ConfigBackingStore), one
/// [status store](StatusBackingStore) and one offset store, and form a [`WorkerGroup`] whose slots
/// say who runs what: slot `Task(c, p)` is task `p` of connector `c` (the owner of slot 0 also runs the
/// connector instance), and the single `Leader` slot serves the cluster's REST writes. The group
/// moves slots through the [`GroupHandler`] this herder gives it ([`DistributedHerder::handler`]).
///
/// - **Config** is the config store's: a background loop (`reconcile.rs`) wakes on the store's
///   `updates()`, on every change of this worker's slots, and every few seconds, takes a snapshot and
///   makes this worker match it. It keeps the group's slots in step with the connectors
///   (`add_connector(c, tasks.max)` — by `tasks.max`, since a slot topic cannot shrink and some brokers
///   cannot grow one; `remove_connector` for removed ones; failed calls retried with backoff).
/// - **Connector instance** (owner of slot 0): made from the plugins as standalone does; it computes
///   the task configurations and writes them only when they differ from the committed ones (no
///   rebalance or config storm from rewriting equal sets); a STOPPED connector gets an empty set
///   (Kafka Connect does so, and KIP-875 offset changes require it). It writes the connector's status.
/// - **Tasks** (owner of slot p): task p runs iff the committed set has index p and the target is not
///   STOPPED, with that configuration; it restarts when its committed configuration changes, stops
///   (final commit) when it goes away, pauses and resumes with the target state.
/// - **Revoked** slots are stopped — final commits included — before the handler returns, so the next
///   owner starts after them. **Lost** slots are aborted ([`Worker::abort_task`]): no commit of them
///   can happen once the handler returned. A new owner simply starts the task: its offset reader reads
///   the offset store at start, and the offset store is relied on to return every completed write
///   (the Kafka offset store reads its topic to the end on every get), so the task resumes after the
///   previous owner's final commit.
/// - **Hold-back** (`scheduled.rebalance.max.delay.ms`, KIP-415's delay done by the new owner): on
///   getting a task slot the worker first catches up with the status store
///   ([`StatusBackingStore::catch_up`]), then looks at the task's status. RUNNING, PAUSED or
///   RESTARTING under another worker means that worker departed without stopping it (a graceful
///   revocation leaves STOPPED or UNASSIGNED, written and made durable before the handler returns):
///   the slot is held — claimed (UNASSIGNED) but nothing of it, nor slot 0's connector instance,
///   starts until the delay has passed since the assignment. A zero delay never holds (KAFKA-15693).
///   A slot revoked or lost while held had nothing started. The group, not this herder, picks the
///   next owner, so a returning worker does not get its old slots back: the hold only keeps the
///   tasks from starting elsewhere for that long; and a held slot revoked again passes to its next
///   owner as STOPPED (released back, see `fence`), which starts it at once (the remaining hold is
///   not carried over).
/// - **Status generations**: the group's generation is not readable through librdkafka, so each
///   worker claims one per task when it gets the slot: one above the highest stored in the task's
///   status (written at once as `UNASSIGNED`, which reserves it); every status it writes for that
///   task carries it (`put_task_safe`), so a worker that lost the task cannot overwrite its new
///   owner's status.
/// - **REST** (`rest.rs`, `writes.rs`): reads answer from the latest snapshot and the status store;
///   writes go to the leader (cluster writes, serialized under one lock after reading the store to its
///   end) or to the owner (restarts) through [`Herder::route_write`](super::Herder::route_write).
///   KIP-875 offset changes (leader) need STOPPED and an empty committed task set (Kafka Connect's
///   rule, 400) and every task's status no longer RUNNING/PAUSED (409, retry): a task still stopping
///   could otherwise commit over the change.
///
/// Limits: `restart?includeTasks=true` restarts the connector and the matching tasks that run on the
/// worker holding slot 0 only (others are restarted one by one on their owners); a write routed by a
/// status whose worker died is forwarded to that dead worker until the slot's new owner writes its
/// status; the per-task generation claim reads the status store, so two claims made before either
/// was visible (a status store lagging behind) can be equal — `put_task_safe` then lets either win.
pub struct DistributedHerder {
    worker: Worker,
    offsets: Arc<dyn OffsetBackingStore>,
    plugins: Plugins,
    settings: DistributedSettings,
    config_store: Arc<dyn ConfigBackingStore>,
    statuses: Arc<dyn StatusBackingStore>,
    /// The slots this worker holds and the tasks it started in them. A std mutex, never held across
    /// an await: the group's handler thread and the loop both take it briefly, and a task is started
    /// only under it after checking its slot, so a slot revoked or lost meanwhile is never started.
    owned: Mutex<Ownership>,
    /// Held by every change to what runs here (the loop's pass, restarts, revocations): a revocation
    /// waits for a stop or start under way, so the next owner never overlaps this one.
    applied: tokio::sync::Mutex<Applied>,
    /// The connectors registered with the group (outside `applied`: a group call may wait for a
    /// rebalance, whose revocation needs `applied`).
    group_sync: tokio::sync::Mutex<GroupSync>,
    /// Serializes the cluster writes this worker serves as the leader.
    writes: tokio::sync::Mutex<()>,
    group: OnceLock<Arc<dyn WorkerGroup>>,
    /// Wakes the requests waiting for the start (`wait_ready`).
    started: tokio::sync::Notify,
    /// The runtime the handler's calls run on (the handler runs on a plain thread).
    runtime: OnceLock<Handle>,
    /// Wakes the loop.
    kick: Notify,
    stop: watch::Sender<bool>,
    reconciler: Mutex<Option<JoinHandle<()>>>,
    /// The fenced task-configuration writers of the connectors whose slot 0 is held here
    /// (`reconcile`'s `config_writer`).
    config_writers: Mutex<std::collections::BTreeMap<String, reconcile::ConfigWriter>>,
    /// The self-fencing loop ([`fence`]).
    fencer: Mutex<Option<JoinHandle<()>>>,
}

impl DistributedHerder {
    /// Where connector `config`'s offsets live (`offsets::store_for`).
    fn offset_store_for(&self, config: &ferry_api::Config) -> Arc<dyn OffsetBackingStore> {
        super::offsets::store_for(&self.worker, &self.offsets, config)
    }

    /// A herder running tasks on `worker` (whose status store should be `statuses`), reading and
    /// altering offsets in `offsets`, with `plugins`, as `settings` says, over the shared
    /// `config_store` and `statuses`.
    pub fn new(
        worker: Worker,
        offsets: Arc<dyn OffsetBackingStore>,
        plugins: Vec<Plugin>,
        settings: DistributedSettings,
        config_store: Arc<dyn ConfigBackingStore>,
        statuses: Arc<dyn StatusBackingStore>,
    ) -> Arc<Self> {
        let exactly_once = worker.exactly_once_source();
        let herder = Arc::new(Self {
            worker,
            offsets,
            plugins: {
                let mut plugins = Plugins::new(plugins);
                plugins.set_exactly_once(exactly_once);
                plugins.set_providers(settings.config_providers.clone());
                plugins.set_transforms(settings.transforms.clone());
                if let Some(sink) = &settings.sink {
                    plugins.set_sink(sink.clone());
                }
                plugins
            },
            settings,
            config_store,
            statuses,
            owned: Mutex::default(),
            applied: tokio::sync::Mutex::default(),
            group_sync: tokio::sync::Mutex::default(),
            writes: tokio::sync::Mutex::new(()),
            group: OnceLock::new(),
            started: tokio::sync::Notify::new(),
            runtime: OnceLock::new(),
            kick: Notify::new(),
            stop: watch::Sender::new(false),
            reconciler: Mutex::new(None),
            config_writers: Mutex::default(),
            fencer: Mutex::new(None),
        });
        if let Ok(handle) = Handle::try_current() {
            let _ = herder.runtime.set(handle);
        }
        herder
    }

    /// The handler to pass to the group when joining it (events may arrive before
    /// [`DistributedHerder::start`]: they are recorded, and acted on once started).
    pub fn handler(self: &Arc<Self>) -> Arc<dyn GroupHandler> {
        Arc::new(handler::SlotHandler::new(self))
    }

    /// Attaches the joined group and starts the background loop on the current tokio runtime.
    ///
    /// # Errors
    /// Already started, or the config store cannot be read.
    pub async fn start(self: &Arc<Self>, group: Arc<dyn WorkerGroup>) -> Result<(), StartError> {
        let _ = self.runtime.set(Handle::current());
        self.config_store
            .snapshot()
            .await
            .map_err(|source| StartError::ConfigStore {
                store: self.config_store.describe(),
                source,
            })?;
        let description = group.describe();
        if self.group.set(group).is_err() {
            return Err(StartError::AlreadyStarted);
        }
        tracing::info!(
            "worker {} joined {description}; reconciling with {}",
            self.settings.worker_id,
            self.config_store.describe()
        );
        let this = self.clone();
        let stop = self.stop.subscribe();
        *lock(&self.reconciler) = Some(tokio::spawn(async move { this.run(stop).await }));
        let (this, stop) = (self.clone(), self.stop.subscribe());
        *lock(&self.fencer) = Some(tokio::spawn(async move { this.fence(stop).await }));
        self.kick.notify_one();
        self.started.notify_waiters();
        Ok(())
    }

    /// Stops the background loop, leaves the group (every slot is revoked through the handler: tasks
    /// stop with their final commits), then stops the worker (whatever still runs).
    pub async fn shutdown(&self, timeout: Duration) {
        self.stop.send_replace(true);
        let reconciler = lock(&self.reconciler).take();
        if let Some(reconciler) = reconciler {
            let _ = reconciler.await;
        }
        let fencer = lock(&self.fencer).take();
        if let Some(fencer) = fencer {
            let _ = fencer.await;
        }
        if let Some(group) = self.group.get()
            && let Err(e) = group.leave(timeout).await
        {
            tracing::error!(
                "leaving {} failed: {e}; the remaining tasks are stopped anyway",
                group.describe()
            );
        }
        let _applied = self.applied.lock().await;
        self.worker.shutdown().await;
        lock(&self.owned).clear();
    }

    /// The worker.
    pub fn worker(&self) -> &Worker {
        &self.worker
    }

    /// The task slots held back here now (`scheduled.rebalance.max.delay.ms`), each with when it
    /// may start.
    pub fn held_back(&self) -> Vec<(TaskId, Instant)> {
        let now = Instant::now();
        self.owned()
            .slots
            .iter()
            .filter_map(|(id, claim)| {
                claim
                    .hold_until
                    .filter(|&until| now < until)
                    .map(|until| (id.clone(), until))
            })
            .collect()
    }

    /// Whether this worker holds the leader slot.
    pub fn is_leader(&self) -> bool {
        lock(&self.owned).leader
    }

    fn owned(&self) -> MutexGuard<'_, Ownership> {
        lock(&self.owned)
    }
}

/// `tasks.max` of a connector configuration (1 when absent or not a positive number: the
/// configuration check reports it; here it only sizes the group's slots).
fn tasks_max(config: &Config) -> usize {
    config
        .get(ferry_runtime::config::TASKS_MAX)
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(1)
        .max(1)
}

/// A poisoned lock still holds consistent data here (every change is a few map operations).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The connectors of a snapshot by name, with `tasks.max`.
type Sizes = BTreeMap<String, usize>;
