//! The worker: runs connectors' tasks against one offset store and one sink.

mod commit;
mod connector_store;
mod context;
mod deliveries;
mod fence;
mod health;
mod running;
mod task;
mod thread;
mod topics;

// The task states moved to `crate::status` (metrics reads them too); the old path stays for `task.rs`.
use crate::status;

pub use connector_store::OFFSETS_STORAGE_TOPIC;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use ferry_api::{Config, SourceConnector};
use ferry_offsets::{AckTracker, OffsetBackingStore, OffsetWriter, StoreOffsetReader};
use running::{Launch, Running, RunningTask, TaskHandle, send_target, stop_task, stop_tasks};
use thread::{Helpers, TaskThread};
use tokio::sync::watch;

use crate::config::ConverterSpec;
use crate::metrics::{MeteredStore, Metrics};
use crate::sink::{RecordSink, SharedSink, SinkProvider, TaskSinkContext};
use crate::state::{TargetState, TaskId};
use crate::status::{StatusCell, StatusListener};
pub use crate::status::{TaskState, TaskStatus};
use crate::stores::{MemoryStatusStore, State, StatusBackingStore, StatusEntry};
use crate::transforms::{ErrorHandling, Transforms};
use fence::{FencedStore, TaskFence};
use health::StoreHealth;
use task::{TaskRunner, TaskSettings};
pub use topics::TopicTracking;

/// Worker-wide timing settings (Kafka Connect's names).
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// `offset.flush.interval.ms`: how often each task commits.
    pub offset_flush_interval: Duration,
    /// `offset.flush.timeout.ms`: the deadline of one commit, and of waiting for acks at stop.
    pub offset_flush_timeout: Duration,
    /// `offset.flush.strict.bound` (Ferry only, at-least-once): each task polls its next batch only
    /// once every record of the previous one is acknowledged and its offset committed (commits then
    /// follow acknowledgements at once), so a crash delivers at most one poll batch again. Off by
    /// default: it serialises polling with the sink's and the store's round trips.
    pub offset_flush_strict_bound: bool,
    /// `task.shutdown.graceful.timeout.ms`: how long a stopping task may take before it is cancelled.
    pub task_shutdown_graceful_timeout: Duration,
    /// Where the worker's tasks and store record their metrics ([`Worker::metrics`]). The default is a
    /// fresh registry; pass a shared one to render several workers' series together.
    pub metrics: Arc<Metrics>,
    /// `topic.tracking.enable` / `topic.tracking.allow.reset` (KIP-558 active topics).
    pub topic_tracking: TopicTracking,
    /// Task fencing by the offset store: `Some(prefix)` makes every task write its offsets through its
    /// own writer in the store, `<prefix>-<connector>-<task>`
    /// ([`OffsetBackingStore::open_task_writer`]; Kafka: a transactional producer with that
    /// `transactional.id`, Kafka Connect's), opened before the task reads its offsets, so the store
    /// refuses every later commit of the task's previous instance wherever it runs. Distributed mode
    /// sets the worker group's `group.id`; standalone mode with exactly-once enabled the offsets
    /// topic's name. `None` (standalone otherwise): the store is one process's anyway; a store that
    /// cannot fence is used as it is.
    pub task_fencing: Option<String>,
    /// Distributed mode: the worker's membership lease ([`ferry_plugin::MembershipLease`]). A task
    /// sends a batch only while the lease is valid, and holds it otherwise (until the group confirms
    /// this worker again, or the task is stopped or aborted because its slot was lost). `None`: tasks
    /// send as soon as they polled.
    pub membership: Option<Arc<ferry_plugin::MembershipLease>>,
    /// `exactly.once.source.support` (needs [`task_fencing`](Self::task_fencing) and a sink that
    /// writes transactions).
    pub exactly_once_source: crate::config::exactly_once::ExactlyOnceSource,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        Self {
            offset_flush_interval: Duration::from_millis(60_000),
            offset_flush_timeout: Duration::from_millis(5_000),
            offset_flush_strict_bound: false,
            task_shutdown_graceful_timeout: Duration::from_millis(5_000),
            metrics: Arc::default(),
            topic_tracking: TopicTracking::default(),
            task_fencing: None,
            membership: None,
            exactly_once_source: crate::config::exactly_once::ExactlyOnceSource::Disabled,
        }
    }
}

/// What the worker needs to run one connector.
#[derive(Debug, Clone)]
pub struct ConnectorSpec {
    /// The connector name (the offsets namespace).
    pub name: String,
    /// `tasks.max`.
    pub tasks_max: usize,
    /// `errors.tolerance=all`.
    pub tolerate_delivery_errors: bool,
    /// The connector's transforms (`transforms=…`), checked.
    pub transforms: Transforms,
    /// `errors.retry.*`, `errors.log.*`.
    pub error_handling: ErrorHandling,
    /// Values resolved from config providers: never shown in a task's failure trace or logs.
    pub secrets: Vec<String>,
    /// The full connector configuration.
    pub config: Config,
}

/// What the worker needs to run one task of a connector (besides its configuration).
#[derive(Debug, Clone, Default)]
pub struct TaskSpec {
    /// `errors.tolerance=all`: a record the sink refuses is skipped instead of failing the task.
    pub tolerate_delivery_errors: bool,
    /// The connector's transforms (`transforms=…`), checked.
    pub transforms: Transforms,
    /// `errors.retry.*`, `errors.log.*`.
    pub error_handling: ErrorHandling,
    /// Values resolved from config providers: never shown in the task's failure trace or logs.
    pub secrets: Vec<String>,
    /// The connector's own `key.converter`, if it sets one (for sinks that convert).
    pub key_converter: Option<ConverterSpec>,
    /// The connector's own `value.converter`, if it sets one.
    pub value_converter: Option<ConverterSpec>,
    /// The connector's configuration (placeholders resolved), given to the sink provider for the
    /// connector keys a sink reads itself; empty when unknown.
    pub connector_config: Config,
    /// The generation the task's statuses are written with (`put_task_safe`): 0 in standalone; a
    /// distributed herder claims one above every stored status of the task when it gets the task.
    pub generation: u32,
}

/// Why the worker refused a request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// A connector of that name already runs.
    #[error("connector {0:?} already exists")]
    AlreadyExists(String),
    /// No connector of that name.
    #[error("connector {0:?} not found")]
    NotFound(String),
    /// The connector could not split its work into tasks.
    #[error("connector {name:?} could not create its task configurations: {reason}")]
    TaskConfigs {
        /// The connector.
        name: String,
        /// The connector's error.
        reason: String,
    },
    /// A task of that id already runs.
    #[error("task {0} already runs")]
    TaskExists(TaskId),
    /// The connector has no task of that number.
    #[error("connector {connector:?} has no task {task}")]
    TaskNotFound {
        /// The connector.
        connector: String,
        /// The task number.
        task: usize,
    },
}

/// Runs source tasks: start with committed offsets, deliver to the sink, commit what was acknowledged.
pub struct Worker {
    settings: WorkerSettings,
    store: Arc<dyn OffsetBackingStore>,
    /// Gives tasks started by id their sinks.
    sinks: Arc<dyn SinkProvider>,
    health: Arc<StoreHealth>,
    /// Where every task status is also written (generation 0: standalone has no rebalances).
    statuses: Arc<dyn StatusBackingStore>,
    worker_id: String,
    running: Mutex<Running>,
    /// The fences of every task instance that may still write offsets (running or stopping), so
    /// that [`Worker::abort_task`] reaches a stopping one too; dead entries are pruned as it goes.
    fences: Mutex<BTreeMap<TaskId, Vec<Weak<TaskFence>>>>,
    /// Connectors' own offsets stores (`offsets.storage.topic`), one per name, kept for the
    /// worker's life (a topic's clients are made once, whichever connectors name it).
    named_stores: Mutex<BTreeMap<String, Arc<connector_store::NamedOffsetStore>>>,
}

impl Worker {
    /// A worker over one store and one sink. The store is wrapped in a [`MeteredStore`] recording into
    /// `settings.metrics`.
    pub fn new(
        settings: WorkerSettings,
        store: Arc<dyn OffsetBackingStore>,
        sink: Arc<dyn RecordSink>,
    ) -> Self {
        Self::with_status(
            settings,
            store,
            sink,
            Arc::new(MemoryStatusStore::new()),
            "",
        )
    }

    /// A worker like [`Worker::new`] that also writes every task status to `statuses`, as
    /// `worker_id` (Kafka Connect's `host:port`).
    pub fn with_status(
        settings: WorkerSettings,
        store: Arc<dyn OffsetBackingStore>,
        sink: Arc<dyn RecordSink>,
        statuses: Arc<dyn StatusBackingStore>,
        worker_id: impl Into<String>,
    ) -> Self {
        Self::with_sinks(
            settings,
            store,
            Arc::new(SharedSink(sink)),
            statuses,
            worker_id,
        )
    }

    /// A worker whose tasks get their sinks from `sinks`, one [`SinkProvider::open`] per task
    /// (re)start, writing task statuses to `statuses` as `worker_id`.
    pub fn with_sinks(
        settings: WorkerSettings,
        store: Arc<dyn OffsetBackingStore>,
        sinks: Arc<dyn SinkProvider>,
        statuses: Arc<dyn StatusBackingStore>,
        worker_id: impl Into<String>,
    ) -> Self {
        let store = Arc::new(MeteredStore::new(store, &settings.metrics));
        Self {
            settings,
            store,
            sinks,
            health: Arc::new(StoreHealth::new()),
            statuses,
            worker_id: worker_id.into(),
            running: Mutex::new(Running::default()),
            fences: Mutex::default(),
            named_stores: Mutex::default(),
        }
    }

    /// The offset store of a connector configured with `config`: the worker's, or — when it names
    /// its own offsets topic (`offsets.storage.topic`, KIP-618) — that topic over the worker's store
    /// ([`ferry_offsets::LayeredStore`]: read first, falling back to the worker's; tombstones in
    /// Kafka Connect's three phases), opened on first use.
    pub fn offset_store_for(&self, config: &Config) -> Arc<dyn OffsetBackingStore> {
        let Some(name) = config
            .get(OFFSETS_STORAGE_TOPIC)
            .map(|t| t.trim())
            .filter(|t| !t.is_empty())
        else {
            return self.store.clone();
        };
        let mut stores = self.named_stores.lock().unwrap_or_else(|p| p.into_inner());
        stores
            .entry(name.to_owned())
            .or_insert_with(|| {
                Arc::new(connector_store::NamedOffsetStore::new(
                    name.to_owned(),
                    self.store.clone(),
                    self.settings.metrics.clone(),
                ))
            })
            .clone()
    }

    /// `topic.tracking.enable` / `topic.tracking.allow.reset`.
    pub fn topic_tracking(&self) -> TopicTracking {
        self.settings.topic_tracking
    }

    /// The status store the worker writes task statuses to.
    pub fn status_store(&self) -> Arc<dyn StatusBackingStore> {
        self.statuses.clone()
    }

    /// A status cell for task `id` whose every change is written to the status store with
    /// `generation`, until the task instance is fenced.
    fn status_cell(&self, id: &TaskId, generation: u32, fence: &Arc<TaskFence>) -> StatusCell {
        let (statuses, worker_id, id) = (self.statuses.clone(), self.worker_id.clone(), id.clone());
        let fence = fence.clone();
        let listener: StatusListener = Arc::new(move |status: &TaskStatus| {
            if fence.is_fenced() {
                return;
            }
            let mut entry =
                StatusEntry::new(state_of(status.state), worker_id.as_str(), generation);
            entry.trace = status.trace.clone();
            statuses.put_task_safe(&id, entry);
        });
        StatusCell::watched(listener)
    }

    /// The prefix of task fencing ids (`<prefix>-<connector>-<task>`), when tasks are fenced.
    pub fn task_fencing(&self) -> Option<&str> {
        self.settings.task_fencing.as_deref()
    }

    /// Distributed mode: the worker's membership lease ([`WorkerSettings::membership`]).
    pub fn membership(&self) -> Option<&Arc<ferry_plugin::MembershipLease>> {
        self.settings.membership.as_ref()
    }

    /// The worker's `exactly.once.source.support`.
    pub fn exactly_once_source(&self) -> crate::config::exactly_once::ExactlyOnceSource {
        self.settings.exactly_once_source
    }

    /// Why the offset store can no longer commit, once a commit failed with a non-retriable store
    /// error (e.g. a file store poisoned by a full disk). Every task has then failed with this as
    /// its trace, and tasks started later fail at once: only a new process (which reopens the store)
    /// can commit again, so the process should exit non-zero.
    pub fn store_failure(&self) -> Option<String> {
        self.health.failure()
    }

    /// `task.shutdown.graceful.timeout.ms`: how long a graceful stop of a task may take.
    pub fn graceful_timeout(&self) -> Duration {
        self.settings.task_shutdown_graceful_timeout
    }

    /// The id of the Kafka cluster the worker's sink writes to, if it writes to one (`GET /`).
    pub async fn kafka_cluster_id(&self) -> Option<String> {
        self.sinks.cluster_id().await
    }

    /// The worker's metrics; [`Metrics::render`] gives the Prometheus text for `GET /metrics`.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.settings.metrics.clone()
    }

    fn running(&self) -> std::sync::MutexGuard<'_, Running> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn launch(
        &self,
        (tolerate_delivery_errors, transforms, error_handling, secrets): (
            bool,
            Transforms,
            ErrorHandling,
            Vec<String>,
        ),
        sinks: Arc<dyn SinkProvider>,
        (key_converter, value_converter): (Option<ConverterSpec>, Option<ConverterSpec>),
        connector_config: Arc<Config>,
        paused: bool,
        generation: u32,
    ) -> Launch {
        Launch {
            settings: TaskSettings {
                flush_interval: self.settings.offset_flush_interval,
                flush_timeout: self.settings.offset_flush_timeout,
                strict_bound: self.settings.offset_flush_strict_bound,
                tolerate_delivery_errors,
                transforms,
                error_handling,
                secrets: Arc::new(secrets),
            },
            sinks,
            key_converter,
            value_converter,
            connector_config,
            target: if paused {
                TargetState::Paused
            } else {
                TargetState::Running
            },
            generation,
        }
    }

    /// Starts one task of a connector with `config` (made by [`SourceConnector::task_configs`]), from
    /// the connector's committed offsets, running or paused as `target` says (`Stopped` starts
    /// nothing). Its sink comes from the worker's [`SinkProvider`], told the connector's own
    /// converters from `spec`.
    ///
    /// # Errors
    /// A task of that id already runs.
    pub fn start_task(
        &self,
        id: TaskId,
        spec: &TaskSpec,
        config: Config,
        connector: &dyn SourceConnector,
        target: TargetState,
    ) -> Result<(), WorkerError> {
        if target == TargetState::Stopped {
            return Ok(());
        }
        let mut running = self.running();
        if running.tasks.contains_key(&id) {
            return Err(WorkerError::TaskExists(id));
        }
        let launch = self.launch(
            (
                spec.tolerate_delivery_errors,
                spec.transforms.clone(),
                spec.error_handling,
                spec.secrets.clone(),
            ),
            self.sinks.clone(),
            (spec.key_converter, spec.value_converter),
            Arc::new(spec.connector_config.clone()),
            target == TargetState::Paused,
            spec.generation,
        );
        let handle = self.spawn_task(&id, config.clone(), connector, &launch);
        running.tasks.insert(
            id,
            RunningTask {
                handle,
                config,
                launch,
            },
        );
        Ok(())
    }

    /// Stops one task: it waits for outstanding acknowledgements, commits and stops (cancelled
    /// without a final commit after `task.shutdown.graceful.timeout.ms`). Returns its final status.
    ///
    /// # Errors
    /// No such task.
    pub async fn stop_task(&self, id: &TaskId) -> Result<TaskStatus, WorkerError> {
        let task = self
            .running()
            .tasks
            .remove(id)
            .ok_or_else(|| WorkerError::TaskNotFound {
                connector: id.connector.clone(),
                task: id.task,
            })?;
        let status = task.handle.status.clone();
        stop_task(task.handle, self.settings.task_shutdown_graceful_timeout).await;
        Ok(status.get())
    }

    /// Tells one task to run or to pause (a paused task does not poll; deliveries and commits go
    /// on). `Stopped` tells it to stop (final commit included) without waiting; [`Worker::stop_task`]
    /// then waits for it and forgets it.
    ///
    /// # Errors
    /// No such task.
    pub fn set_target(&self, id: &TaskId, target: TargetState) -> Result<(), WorkerError> {
        let mut running = self.running();
        let task = running
            .tasks
            .get_mut(id)
            .ok_or_else(|| WorkerError::TaskNotFound {
                connector: id.connector.clone(),
                task: id.task,
            })?;
        if target != TargetState::Stopped {
            task.launch.target = target;
        }
        send_target(&task.handle, target);
        Ok(())
    }

    /// The ids of a connector's running tasks, in task order.
    pub fn tasks(&self, connector: &str) -> Vec<TaskId> {
        self.running().ids(connector)
    }

    /// Starts a connector's tasks. Each task starts from the connector's committed offsets.
    ///
    /// # Errors
    /// The name is taken, or the connector cannot create task configurations.
    pub fn start_connector(
        &self,
        spec: ConnectorSpec,
        connector: &dyn SourceConnector,
    ) -> Result<(), WorkerError> {
        let sinks = self.sinks.clone();
        self.start_connector_with(spec, connector, sinks)
    }

    /// Starts a connector's tasks like [`Worker::start_connector`], sending its records to `sink`
    /// instead of the worker's sink (e.g. a Kafka sink with the connector's own converters).
    ///
    /// # Errors
    /// The name is taken, or the connector cannot create task configurations.
    pub fn start_connector_with_sink(
        &self,
        spec: ConnectorSpec,
        connector: &dyn SourceConnector,
        sink: Arc<dyn RecordSink>,
    ) -> Result<(), WorkerError> {
        self.start_connector_with(spec, connector, Arc::new(SharedSink(sink)))
    }

    fn start_connector_with(
        &self,
        spec: ConnectorSpec,
        connector: &dyn SourceConnector,
        sinks: Arc<dyn SinkProvider>,
    ) -> Result<(), WorkerError> {
        if self.running().connectors.contains_key(&spec.name) {
            return Err(WorkerError::AlreadyExists(spec.name));
        }
        let task_configs = connector
            .task_configs(&spec.config, spec.tasks_max.max(1))
            .map_err(|e| WorkerError::TaskConfigs {
                name: spec.name.clone(),
                reason: e.to_string(),
            })?;
        self.start_tasks(spec, task_configs, connector, sinks, (None, None), false)
    }

    /// Starts a connector's tasks with task configurations made beforehand (by
    /// [`SourceConnector::task_configs`]), sending records to `sink`; with `paused` the tasks start
    /// (read their offsets) but do not poll until [`Worker::set_paused`] resumes them.
    ///
    /// # Errors
    /// The name is taken.
    pub fn start_connector_tasks(
        &self,
        spec: ConnectorSpec,
        task_configs: Vec<Config>,
        connector: &dyn SourceConnector,
        sink: Arc<dyn RecordSink>,
        paused: bool,
    ) -> Result<(), WorkerError> {
        let sinks = Arc::new(SharedSink(sink));
        self.start_tasks(spec, task_configs, connector, sinks, (None, None), paused)
    }

    /// Starts a connector's tasks as [`Worker::start_connector_tasks`] does, each opening its sink
    /// from the worker's [`SinkProvider`] with the connector's own converters.
    pub fn start_provided_tasks(
        &self,
        spec: ConnectorSpec,
        task_configs: Vec<Config>,
        connector: &dyn SourceConnector,
        converters: (Option<ConverterSpec>, Option<ConverterSpec>),
        paused: bool,
    ) -> Result<(), WorkerError> {
        let sinks = self.sinks.clone();
        self.start_tasks(spec, task_configs, connector, sinks, converters, paused)
    }

    fn start_tasks(
        &self,
        spec: ConnectorSpec,
        task_configs: Vec<Config>,
        connector: &dyn SourceConnector,
        sinks: Arc<dyn SinkProvider>,
        converters: (Option<ConverterSpec>, Option<ConverterSpec>),
        paused: bool,
    ) -> Result<(), WorkerError> {
        // Held until the tasks are registered: two concurrent starts of one name cannot both pass the check.
        let mut running = self.running();
        if running.connectors.contains_key(&spec.name) || !running.ids(&spec.name).is_empty() {
            return Err(WorkerError::AlreadyExists(spec.name));
        }
        tracing::info!(connector = %spec.name, "starting {} task(s)", task_configs.len());
        let errors = (
            spec.tolerate_delivery_errors,
            spec.transforms.clone(),
            spec.error_handling,
            spec.secrets.clone(),
        );
        let connector_config = Arc::new(spec.config.clone());
        let launch = self.launch(errors, sinks, converters, connector_config, paused, 0);
        for (i, config) in task_configs.into_iter().enumerate() {
            let id = TaskId::new(spec.name.as_str(), i);
            let handle = self.spawn_task(&id, config.clone(), connector, &launch);
            let task = RunningTask {
                handle,
                config,
                launch: launch.clone(),
            };
            running.tasks.insert(id, task);
        }
        running.connectors.insert(spec.name, launch);
        Ok(())
    }

    /// Starts task `id` on a thread of its own, which opens the task's sink and then runs it; a task
    /// whose thread cannot start is failed.
    fn spawn_task(
        &self,
        id: &TaskId,
        config: Config,
        connector: &dyn SourceConnector,
        launch: &Launch,
    ) -> TaskHandle {
        let (connector_name, index) = (id.connector.as_str(), id.task);
        let name = id.to_string();
        let store = self.offset_store_for(&launch.connector_config);
        let store_reader = Arc::new(StoreOffsetReader::new(connector_name, store.clone()));
        let (control, control_rx) = watch::channel(launch.target);
        let fence = self.new_fence(id);
        let status = self.status_cell(id, launch.generation, &fence);
        let acks = AckTracker::new();
        let metrics = self.settings.metrics.register_task(
            connector_name,
            index,
            acks.clone(),
            status.clone(),
        );
        let helpers = Arc::new(Helpers::default());
        let runner = RunnerParts {
            name: name.clone(),
            task: connector.create_task(),
            connector: connector_name.to_owned(),
            config,
            store_reader: store_reader.clone(),
            acks,
            metrics: metrics.task().clone(),
            status: status.clone(),
            control: control_rx,
            settings: launch.settings.clone(),
            health: self.health.clone(),
            helpers: helpers.clone(),
            topics: topics::TopicTracker::new(
                self.settings
                    .topic_tracking
                    .enable
                    .then(|| self.statuses.clone()),
                id.clone(),
                fence.clone(),
            ),
            fence,
            membership: self.settings.membership.clone(),
        };
        let run = self.open_and_run(id, connector, launch, store, runner);
        let panicked = fail_on_panic(name.clone(), status.clone(), store_reader.clone());
        let join = match TaskThread::spawn(&name, helpers, run, panicked) {
            Ok(thread) => Some(thread),
            Err(e) => {
                self.settings.metrics.task_startup(false);
                let reason = format!("cannot start a thread for the task: {e}");
                tracing::error!(task = %name, "task failed: {reason}");
                status.fail(reason);
                None
            }
        };
        TaskHandle {
            name,
            control,
            join,
            status,
            store_reader,
            _metrics: Some(metrics),
        }
    }

    /// What the task's thread runs: opens the task's sink and offset writes, then runs the task
    /// (or fails it when they cannot be opened).
    fn open_and_run(
        &self,
        id: &TaskId,
        connector: &dyn SourceConnector,
        launch: &Launch,
        store: Arc<dyn OffsetBackingStore>,
        runner: RunnerParts,
    ) -> impl Future<Output = ()> + Send + 'static {
        // The sink is opened on the task's own thread, at every (re)start: a provider may give each
        // task its own (a transactional producer per task); a failure fails only this task.
        let (sinks, id) = (launch.sinks.clone(), id.clone());
        let (key, value) = (launch.key_converter, launch.value_converter);
        let connector_config = launch.connector_config.clone();
        let (name, status, store_reader) = (
            runner.name.clone(),
            runner.status.clone(),
            runner.store_reader.clone(),
        );
        let registry = self.settings.metrics.clone();
        let fencing = self.settings.task_fencing.clone();
        let lease = self.settings.membership.clone();
        let delivery = crate::config::exactly_once::delivery(
            self.settings.exactly_once_source,
            connector,
            &launch.connector_config,
        );
        async move {
            let context = TaskSinkContext::new(&id.connector, id.task, key, value)
                .with_connector_config(&connector_config)
                .with_membership(lease.as_ref());
            match open_task_io(&sinks, &context, store, fencing, delivery).await {
                Ok(io) => {
                    registry.task_startup(true);
                    runner.into_runner(io).run().await
                }
                Err(e) => {
                    registry.task_startup(false);
                    let reason = e.to_string();
                    tracing::error!(task = %name, "task failed: {reason}");
                    status.fail(reason);
                    store_reader.close();
                }
            }
        }
    }

    /// A fence for a new instance of task `id`, registered for [`Worker::abort_task`].
    fn new_fence(&self, id: &TaskId) -> Arc<TaskFence> {
        let fence = Arc::new(TaskFence::default());
        let mut fences = self.fences.lock().unwrap_or_else(|p| p.into_inner());
        let live = fences.entry(id.clone()).or_default();
        live.retain(|f| f.strong_count() > 0);
        live.push(Arc::downgrade(&fence));
        fence
    }

    /// Stops one task **at once, without any final commit** (distributed mode: the assignment was
    /// lost, another worker may already run the task). Every instance of the task that may still
    /// write — the running one, and one still stopping (a restart, a graceful stop under way) — is
    /// fenced: when this returns, no offset write of it is in flight and none will reach the store
    /// again, and it writes no more statuses (they are the new owner's). The running instance's
    /// thread is cancelled as a graceful stop that timed out is; records it sent since its last
    /// commit are delivered again by the next owner. Returns whether the task ran here.
    ///
    /// An offset write already handed to the store when the fence closed is waited for (at most
    /// `offset.flush.timeout.ms`; a longer one is logged): it completes, or it is dropped with the
    /// cancelled task.
    pub async fn abort_task(&self, id: &TaskId) -> bool {
        let task = self.running().tasks.remove(id);
        let fences: Vec<Arc<TaskFence>> = {
            let mut all = self.fences.lock().unwrap_or_else(|p| p.into_inner());
            all.remove(id)
                .unwrap_or_default()
                .iter()
                .filter_map(Weak::upgrade)
                .collect()
        };
        for fence in &fences {
            fence.close();
        }
        let ran = task.is_some();
        if let Some(task) = task {
            let mut handle = task.handle;
            handle.control.send_replace(TargetState::Stopped);
            if let Some(mut thread) = handle.join.take() {
                thread.cancel();
            }
            handle.store_reader.close();
            tracing::warn!(task = %handle.name, "task aborted without a final commit (its assignment was lost)");
        }
        for fence in &fences {
            if !fence.fence(self.settings.offset_flush_timeout).await {
                tracing::error!(
                    task = %id,
                    "an offset write of aborted task {id} did not finish within offset.flush.timeout.ms={} ms",
                    self.settings.offset_flush_timeout.as_millis()
                );
            }
        }
        ran
    }

    /// The status of each task of a connector, in task order; `None` for a connector the worker
    /// does not know (neither started as a whole nor with a running task).
    pub fn task_statuses(&self, name: &str) -> Option<Vec<(String, TaskStatus)>> {
        let running = self.running();
        let ids = running.ids(name);
        if ids.is_empty() && !running.connectors.contains_key(name) {
            return None;
        }
        Some(
            ids.iter()
                .filter_map(|id| running.tasks.get(id))
                .map(|t| (t.handle.name.clone(), t.handle.status.get()))
                .collect(),
        )
    }

    /// The names of running connectors.
    pub fn connector_names(&self) -> Vec<String> {
        let running = self.running();
        let mut names: Vec<String> = running.connectors.keys().cloned().collect();
        names.extend(running.tasks.keys().map(|id| id.connector.clone()));
        names.sort();
        names.dedup();
        names
    }

    /// Pauses (`true`) or resumes (`false`) a connector's tasks: a paused task does not poll, but its
    /// deliveries and commits go on.
    ///
    /// # Errors
    /// Unknown connector.
    pub fn set_paused(&self, name: &str, paused: bool) -> Result<(), WorkerError> {
        let target = if paused {
            TargetState::Paused
        } else {
            TargetState::Running
        };
        let mut running = self.running();
        let ids = running.ids(name);
        match running.connectors.get_mut(name) {
            Some(launch) => launch.target = target,
            None if ids.is_empty() => return Err(WorkerError::NotFound(name.to_owned())),
            None => {}
        }
        for id in ids {
            if let Some(task) = running.tasks.get_mut(&id) {
                task.launch.target = target;
                send_target(&task.handle, target);
            }
        }
        Ok(())
    }

    /// Stops a connector: each task waits for outstanding acknowledgements, commits and stops; a task
    /// still running after `task.shutdown.graceful.timeout.ms` is cancelled without a final commit.
    /// Returns each task's final status, in task order; the worker then forgets the connector.
    ///
    /// # Errors
    /// Unknown connector.
    pub async fn stop_connector(
        &self,
        name: &str,
    ) -> Result<Vec<(String, TaskStatus)>, WorkerError> {
        let tasks = {
            let mut running = self.running();
            let known = running.connectors.remove(name).is_some();
            let tasks = running.take_connector(name);
            if !known && tasks.is_empty() {
                return Err(WorkerError::NotFound(name.to_owned()));
            }
            tasks
        };
        let statuses: Vec<(String, StatusCell)> = tasks
            .iter()
            .map(|t| (t.name.clone(), t.status.clone()))
            .collect();
        stop_tasks(tasks, self.settings.task_shutdown_graceful_timeout).await;
        Ok(statuses
            .into_iter()
            .map(|(name, status)| (name, status.get()))
            .collect())
    }

    /// Restarts one task: it stops as in [`Worker::stop_connector`] (final commit included), then a
    /// new instance made by `connector` starts with the same task configuration, from the committed
    /// offsets, paused if the connector is paused.
    ///
    /// # Errors
    /// Unknown connector or task.
    pub async fn restart_task(
        &self,
        name: &str,
        index: usize,
        connector: &dyn SourceConnector,
    ) -> Result<(), WorkerError> {
        self.restart(name, index, None, connector).await
    }

    /// Restarts one task as [`Worker::restart_task`] does, with `config` as its task configuration
    /// from now on (the herder passes the one in its config store).
    ///
    /// # Errors
    /// Unknown connector or task.
    pub async fn restart_task_with(
        &self,
        name: &str,
        index: usize,
        config: Config,
        connector: &dyn SourceConnector,
    ) -> Result<(), WorkerError> {
        self.restart(name, index, Some(config), connector).await
    }

    async fn restart(
        &self,
        name: &str,
        index: usize,
        config: Option<Config>,
        connector: &dyn SourceConnector,
    ) -> Result<(), WorkerError> {
        let id = TaskId::new(name, index);
        let (old, config, launch) = {
            let mut running = self.running();
            let known = running.connectors.contains_key(name);
            let Some(slot) = running.tasks.get_mut(&id) else {
                if known {
                    return Err(WorkerError::TaskNotFound {
                        connector: name.to_owned(),
                        task: index,
                    });
                }
                return Err(WorkerError::NotFound(name.to_owned()));
            };
            // Until the new instance runs, the slot reports UNASSIGNED.
            let fence = self.new_fence(&id);
            let placeholder = TaskHandle {
                name: slot.handle.name.clone(),
                control: watch::channel(TargetState::Stopped).0,
                join: None,
                status: self.status_cell(&id, slot.launch.generation, &fence),
                store_reader: Arc::new(StoreOffsetReader::new(
                    name,
                    self.offset_store_for(&slot.launch.connector_config),
                )),
                _metrics: None,
            };
            let old = std::mem::replace(&mut slot.handle, placeholder);
            if let Some(config) = config {
                slot.config = config;
            }
            (old, slot.config.clone(), slot.launch.clone())
        };
        tracing::info!(task = %old.name, "restarting task");
        stop_task(old, self.settings.task_shutdown_graceful_timeout).await;
        let new = self.spawn_task(&id, config, connector, &launch);
        let orphan = match self.running().tasks.get_mut(&id) {
            Some(slot) => {
                slot.handle = new;
                None
            }
            // Stopped meanwhile: the new instance must not outlive its connector.
            None => Some(new),
        };
        if let Some(orphan) = orphan {
            stop_task(orphan, self.settings.task_shutdown_graceful_timeout).await;
        }
        Ok(())
    }

    /// Stops every task, all in parallel.
    pub async fn shutdown(&self) {
        let all = std::mem::take(&mut *self.running());
        stop_tasks(
            all.tasks.into_values().map(|t| t.handle),
            self.settings.task_shutdown_graceful_timeout,
        )
        .await;
    }
}

/// What a task's runner is made of before its sink and offset writes are open (they are opened on
/// the task's own thread, see [`open_task_io`]).
struct RunnerParts {
    name: String,
    task: Box<dyn ferry_api::SourceTask>,
    /// The connector's name (its offsets' namespace).
    connector: String,
    /// The task's configuration.
    config: Config,
    store_reader: Arc<StoreOffsetReader>,
    acks: AckTracker,
    metrics: Arc<crate::metrics::TaskMetrics>,
    status: StatusCell,
    control: watch::Receiver<TargetState>,
    settings: TaskSettings,
    health: Arc<StoreHealth>,
    helpers: Arc<Helpers>,
    topics: topics::TopicTracker,
    fence: Arc<TaskFence>,
    membership: Option<Arc<ferry_plugin::MembershipLease>>,
}

impl RunnerParts {
    /// The task's runner, writing its offsets through `io`'s store behind the task's fence.
    fn into_runner(self, io: TaskIo) -> TaskRunner {
        let TaskIo {
            sink,
            writes: (store, task_writer),
            delivery,
        } = io;
        let fenced: Arc<dyn OffsetBackingStore> = Arc::new(FencedStore {
            inner: store,
            fence: self.fence.clone(),
            task: self.name.clone(),
            task_writer,
        });
        let writer = Arc::new(OffsetWriter::new(&self.connector, fenced));
        let transaction = matches!(
            delivery,
            task::TaskDelivery::ExactlyOnce {
                boundary: crate::config::exactly_once::TransactionBoundary::Connector,
                ..
            }
        )
        .then(|| Arc::new(task::transaction_context::WorkerTransactionContext::default()));
        let looked_up = Arc::default();
        let reader = Arc::new(context::TaskReader::new(
            self.name.clone(),
            self.store_reader.clone(),
            Arc::clone(&looked_up),
        ));
        TaskRunner {
            watch: context::PartitionWatch::new(self.name.clone(), looked_up),
            name: self.name,
            task: self.task,
            context: Arc::new(context::TaskContext {
                config: self.config,
                reader,
                transaction,
            }),
            store_reader: self.store_reader,
            sink,
            acks: self.acks,
            metrics: self.metrics,
            writer,
            status: self.status,
            control: self.control,
            settings: self.settings,
            health: self.health,
            helpers: self.helpers,
            topics: self.topics,
            fence: self.fence,
            membership: self.membership,
            delivery,
            deferred: std::collections::VecDeque::new(),
        }
    }
}

/// What a task's thread does when the task panics: fails it with the panic's message.
fn fail_on_panic(
    name: String,
    status: StatusCell,
    store_reader: Arc<StoreOffsetReader>,
) -> impl FnOnce(String) + Send + 'static {
    move |message: String| {
        let reason = format!("the task panicked: {message}");
        tracing::error!(task = %name, "task failed: {reason}");
        status.fail(reason);
        store_reader.close();
    }
}

/// What one task instance writes through.
struct TaskIo {
    sink: Arc<dyn RecordSink>,
    /// Where its offsets are written, and whether that is its own fenced writer.
    writes: (Arc<dyn OffsetBackingStore>, bool),
    delivery: task::TaskDelivery,
}

/// Why a task instance could not open what it writes through: its FAILED status says so, and the
/// task does not start.
#[derive(Debug, thiserror::Error)]
enum TaskIoError {
    /// The connector's exactly-once settings cannot be met on this worker.
    #[error(transparent)]
    Delivery(#[from] crate::config::exactly_once::DeliveryError),
    /// At least once with task fencing: the store refused the task's fenced writer.
    #[error("cannot open the task's fenced offset writer: {0}")]
    FencedWriter(#[source] ferry_offsets::StoreError),
    /// The sink did not open for this task.
    #[error("cannot open the sink {sink}: {source}")]
    Sink {
        sink: String,
        source: ferry_plugin::SinkError,
    },
    /// Exactly once outside distributed mode's `group.id`: no transactional id to fence with.
    #[error("exactly-once delivery needs a transactional id prefix (distributed mode's group.id)")]
    NoTransactionalIdPrefix,
    /// The task's transactional sink did not open (its `initTransactions` failed).
    #[error("cannot open the task's transactional sink {sink}: {source}")]
    TransactionalSink {
        sink: String,
        source: ferry_plugin::SinkError,
    },
    /// Exactly once over a sink that writes no transactions.
    #[error("exactly-once delivery needs a sink that writes transactions; {sink} does not")]
    NotTransactional { sink: String },
    /// The offset store did not open before the task's transactions write to it.
    #[error("cannot open the offset store {store}: {source}")]
    Store {
        store: String,
        source: ferry_offsets::StoreError,
    },
}

/// Opens what a task instance writes through, before the task reads its offsets, so that every
/// earlier instance of the task is fenced first and what it reads is final: at least once, the
/// sink and (with task fencing) the task's fenced offset writer; exactly once, the task's
/// transactional sink, which writes both records and offsets. Runs on the task's own thread, at
/// every (re)start; a failure fails this task only.
async fn open_task_io(
    sinks: &Arc<dyn SinkProvider>,
    context: &TaskSinkContext<'_>,
    store: Arc<dyn OffsetBackingStore>,
    fencing: Option<String>,
    delivery: Result<
        crate::config::exactly_once::Delivery,
        crate::config::exactly_once::DeliveryError,
    >,
) -> Result<TaskIo, TaskIoError> {
    use crate::config::exactly_once::Delivery;
    let fencing_id =
        fencing.map(|prefix| format!("{prefix}-{}-{}", context.connector, context.task));
    match delivery? {
        Delivery::AtLeastOnce => {
            let writes = match &fencing_id {
                None => (store, false),
                Some(id) => match store.open_task_writer(id).await {
                    Ok(Some(writer)) => (writer, true),
                    Ok(None) => (store, false),
                    Err(e) => return Err(TaskIoError::FencedWriter(e)),
                },
            };
            let sink = sinks
                .open(context)
                .await
                .map_err(|source| TaskIoError::Sink {
                    sink: sinks.to_string(),
                    source,
                })?;
            Ok(TaskIo {
                sink,
                writes,
                delivery: task::TaskDelivery::AtLeastOnce,
            })
        }
        Delivery::ExactlyOnce(boundary) => {
            let id = fencing_id.ok_or(TaskIoError::NoTransactionalIdPrefix)?;
            let sink = sinks
                .open_transactional(context, &id)
                .await
                .map_err(|source| TaskIoError::TransactionalSink {
                    sink: sinks.to_string(),
                    source,
                })?
                .ok_or_else(|| TaskIoError::NotTransactional {
                    sink: sinks.to_string(),
                })?;
            // A connector's own offsets topic is opened (created if missing) before the task's
            // transactions write offsets to it. Only now: a read waits for the transactions open on
            // the offsets topic, and the one this task's previous instance left open ends only once
            // the sink above fenced it (read first, the start waited for the transaction timeout).
            // Asking no key opens the store without reading it: the task's own start reads it.
            store.get(&[]).await.map_err(|source| TaskIoError::Store {
                store: store.describe(),
                source,
            })?;
            tracing::info!(task = %format!("{}-{}", context.connector, context.task), "exactly-once delivery through transactional.id {id}");
            Ok(TaskIo {
                sink: sink.clone(),
                // Offsets go in the transactions; the store is only read.
                writes: (store, false),
                delivery: task::TaskDelivery::ExactlyOnce {
                    sink,
                    boundary,
                    connector: context.connector.to_owned(),
                },
            })
        }
    }
}

/// The status store's name for a task state.
fn state_of(state: TaskState) -> State {
    match state {
        TaskState::Unassigned => State::Unassigned,
        TaskState::Running => State::Running,
        TaskState::Paused => State::Paused,
        TaskState::Failed => State::Failed,
        TaskState::Stopped => State::Stopped,
    }
}
