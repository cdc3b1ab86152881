//! # ferry-herder
//!
//! Connectors above the worker: their configurations, target states, task configurations and
//! placement, and offsets management (KIP-875), standalone and distributed. Owns the [`Herder`]
//! contract the REST layer (`ferry-rest`) serves, connector validation (`PUT …/config/validate`) and
//! the distributed herder's ownership and fencing protocol. May use: `ferry-runtime` (the worker, the
//! configs, the stores' contracts, the metrics), `ferry-plugin`, `ferry-offsets`, `ferry-api`; never
//! an HTTP crate nor a backend (`ferry-plugin/tests/layering.rs` keeps it so).
//!
//! ## The standalone herder
//!
//! What Kafka Connect's `StandaloneHerder` does, over Ferry's [`Worker`].
//!
//! It keeps every connector's configuration and **target state** — `RUNNING`, `PAUSED` or `STOPPED`
//! (tasks removed, configuration kept) — and derives the connector's state: `FAILED` (with its reason)
//! when the connector cannot make task configurations. It answers the REST API's questions in Kafka
//! Connect's shapes ([`entities`]) and manages offsets as KIP-875 does ([`StandaloneHerder::alter_offsets`],
//! [`StandaloneHerder::reset_offsets`]).
//!
//! Connectors created or changed over REST are kept in a [config store](ConfigBackingStore) (the
//! [connectors file](ferry_runtime::stores::FileConfigStore) when run by `ferry standalone`), so they
//! survive a restart; connectors from command-line properties files are never written there (on a name
//! collision the command-line file wins, with a WARN). Every change is checked first and written to
//! the file before it takes effect, so a request that fails changes nothing.
//!
//! Task configurations go through the config store too, as in Kafka Connect (`putTaskConfigs`): the
//! herder writes the set the connector makes, and starts and restarts tasks with the set the store
//! then holds (a distributed herder reads it from the config topic). Command-line connectors, which
//! never reach the connectors file, are kept in a [`MemoryConfigStore`] of their own, so their tasks
//! take the same path.
//!
//! All requests are serialized (one lock), as in Kafka Connect's standalone herder.
//!
//! [`DistributedHerder`] is the other [`Herder`]: several workers over shared config, status and
//! offset stores, sharing tasks through a group of slots (see its module, `distributed`).

mod api;
mod distributed;
pub mod entities;
mod error;
mod lifecycle;
mod offsets;
mod validate;

use std::collections::BTreeMap;
use std::sync::Arc;

use ferry_api::{Config, SourceConnector};
use ferry_offsets::OffsetBackingStore;
use tokio::sync::{Mutex, MutexGuard};

pub use api::{ConfigPatch, Herder, Route, WriteScope};
pub use distributed::{DistributedHerder, DistributedSettings};
use entities::{
    ConfigInfos, ConnectorInfo, ConnectorStateInfo, PluginInfo, StateInfo, TaskId, TaskInfo,
    TaskStateInfo,
};
use error::ConnectorFailure;
pub use error::{HerderError, HerderErrorKind, StartError};
use ferry_runtime::config::{ConfigProviders, ConnectorConfig, ErrorTolerance, scrub};
use ferry_runtime::stores::{
    ConfigBackingStore, ConfigStoreError, MemoryConfigStore, State as Status, StatusEntry,
};
use ferry_runtime::{ConnectorSpec, TaskState, Worker};
pub use offsets::OffsetInput;
pub use validate::Plugin;
use validate::Plugins;

pub use ferry_runtime::TargetState;

/// Checks connector configurations the way a worker's `PUT /connector-plugins/{p}/config/validate`
/// does, without a worker: what `ferry migrate check` asks of every connector of another cluster.
/// Built from a program's connectors, transformations and sink, with the worker's
/// `exactly.once.source.support` and config providers it assumes.
pub struct Validator(Plugins);

impl Validator {
    /// A validator for `plugins`, with the built-in transformations, no sink, no config provider
    /// and exactly-once support disabled until told otherwise.
    pub fn new(plugins: Vec<Plugin>) -> Self {
        Self(Plugins::new(plugins))
    }

    /// Checks transformations and predicates against `registry`.
    #[must_use]
    pub fn with_transforms(
        mut self,
        registry: ferry_runtime::transforms::TransformRegistry,
    ) -> Self {
        self.0.set_transforms(registry);
        self
    }

    /// Lets `sink` accept and check the connector keys it reads (`producer.override.*`,
    /// `topic.creation.*`, converters).
    #[must_use]
    pub fn with_sink(mut self, sink: Arc<dyn ferry_plugin::DynSinkSpec>) -> Self {
        self.0.set_sink(sink);
        self
    }

    /// The worker's `exactly.once.source.support`, for `exactly.once.support=required`.
    #[must_use]
    pub fn with_exactly_once(
        mut self,
        worker: ferry_runtime::config::exactly_once::ExactlyOnceSource,
    ) -> Self {
        self.0.set_exactly_once(worker);
        self
    }

    /// Resolves placeholders with `providers` before checking.
    #[must_use]
    pub fn with_config_providers(mut self, providers: ConfigProviders) -> Self {
        self.0.set_providers(providers);
        self
    }

    /// Checks `config` as its `connector.class` would be validated.
    ///
    /// # Errors
    /// No `connector.class`, or a class no plugin answers to.
    pub fn validate(&self, config: &Config) -> Result<ConfigInfos, HerderError> {
        let class = config
            .get(ferry_runtime::config::CONNECTOR_CLASS)
            .map(|c| c.trim().to_owned())
            .unwrap_or_default();
        validate::validate(&self.0, &class, config)
    }
}

/// Where a connector's configuration came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// A properties file on the command line: never written to the connectors file.
    CommandLine,
    /// Created (or loaded back) through REST: kept in the connectors file.
    Rest,
}

/// One connector the herder knows.
struct Entry {
    config: Config,
    target: TargetState,
    origin: Origin,
    /// The task configurations of the running (or paused) tasks, as read back from the config
    /// store when they started; empty when stopped or failed.
    task_configs: Vec<Config>,
    /// Why the connector is FAILED.
    failure: Option<String>,
}

struct State {
    connectors: BTreeMap<String, Entry>,
}

/// The standalone herder. See the [module documentation](self).
pub struct StandaloneHerder {
    worker: Worker,
    store: Arc<dyn OffsetBackingStore>,
    plugins: Plugins,
    worker_id: String,
    config_store: Arc<dyn ConfigBackingStore>,
    /// The command-line connectors (never written to `config_store`): their configurations, target
    /// states and task configurations, for this run only.
    command_line_store: MemoryConfigStore,
    state: Mutex<State>,
    /// Set once [`StandaloneHerder::start`] has finished (`GET /health`).
    started: std::sync::atomic::AtomicBool,
    /// Wakes the requests waiting for the start (`wait_ready`).
    started_notify: tokio::sync::Notify,
}

impl StandaloneHerder {
    /// A herder running connectors on `worker`, whose offsets are in `store`. `worker_id` is reported
    /// in statuses (`host:port` of the REST listener, as in Kafka Connect).
    pub fn new(
        worker: Worker,
        store: Arc<dyn OffsetBackingStore>,
        plugins: Vec<Plugin>,
        worker_id: impl Into<String>,
        config_store: Arc<dyn ConfigBackingStore>,
    ) -> Self {
        let mut plugins = Plugins::new(plugins);
        plugins.set_exactly_once(worker.exactly_once_source());
        Self {
            worker,
            store,
            plugins,
            worker_id: worker_id.into(),
            config_store,
            command_line_store: MemoryConfigStore::new(),
            state: Mutex::new(State {
                connectors: BTreeMap::new(),
            }),
            started: std::sync::atomic::AtomicBool::new(false),
            started_notify: tokio::sync::Notify::new(),
        }
    }

    /// Resolves `${provider:path:key}` placeholders of connector configurations with `providers`
    /// when connectors start (the stored configurations keep the placeholders).
    #[must_use]
    pub fn with_config_providers(mut self, providers: ConfigProviders) -> Self {
        self.plugins.set_providers(providers);
        self
    }

    /// The transformations and predicates connectors may use (default: the built-in ones).
    #[must_use]
    pub fn with_transforms(
        mut self,
        registry: ferry_runtime::transforms::TransformRegistry,
    ) -> Self {
        self.plugins.set_transforms(registry);
        self
    }

    /// Checks connector configurations with the worker's sink: the connector keys it reads itself
    /// (Kafka's `topic.creation.*`, `producer.override.*`) are accepted and checked by it.
    #[must_use]
    pub fn with_sink_spec(mut self, sink: Arc<dyn ferry_plugin::DynSinkSpec>) -> Self {
        self.plugins.set_sink(sink);
        self
    }

    /// The worker.
    pub fn worker(&self) -> &Worker {
        &self.worker
    }

    /// The worker id reported in statuses.
    pub fn worker_id(&self) -> &str {
        &self.worker_id
    }

    /// Starts the command-line connectors (already checked) and the connectors of the config store
    /// (created over REST by an earlier run). A stored connector whose name a command-line file also
    /// uses is not started (WARN); one whose configuration is no longer valid is FAILED.
    ///
    /// # Errors
    /// A command-line connector cannot make its task configurations (as before the herder existed, the
    /// worker refuses to start; call [`StandaloneHerder::shutdown`] then), or the config store cannot
    /// be read.
    pub async fn start(&self, command_line: Vec<Config>) -> Result<(), StartError> {
        let stored = self
            .config_store
            .snapshot()
            .await
            .map_err(|source| StartError::ConfigStore {
                store: self.config_store.describe(),
                source,
            })?
            .connectors;
        let mut state = self.lock().await;
        for config in command_line {
            let Some(name) = config.get(ferry_runtime::config::NAME).cloned() else {
                continue;
            };
            self.command_line_store
                .put_connector_config(&name, &config, TargetState::Running)
                .await
                .map_err(|e| StartError::Connector {
                    name: name.clone(),
                    reason: e.to_string(),
                })?;
            let mut entry = Entry::new(config, TargetState::Running, Origin::CommandLine);
            self.launch(&name, &mut entry).await;
            if let Some(reason) = &entry.failure {
                return Err(StartError::Connector {
                    name,
                    reason: reason.clone(),
                });
            }
            state.connectors.insert(name, entry);
        }
        for (name, connector) in &stored {
            if state.connectors.contains_key(name) {
                tracing::warn!(
                    connector = %name,
                    "connector {name:?} is defined both in a properties file on the command line and in {} \
                     (created over REST); the command-line file wins, the stored one is left as it is",
                    self.config_store.describe()
                );
                continue;
            }
            tracing::info!(
                connector = %name,
                "connector {name:?} restored from {} ({:?})",
                self.config_store.describe(),
                connector.target
            );
            let mut entry = Entry::new(connector.config.clone(), connector.target, Origin::Rest);
            self.launch(name, &mut entry).await;
            state.connectors.insert(name.clone(), entry);
        }
        self.started
            .store(true, std::sync::atomic::Ordering::Release);
        self.started_notify.notify_waiters();
        Ok(())
    }

    /// Stops every connector's tasks (final commits included).
    pub async fn shutdown(&self) {
        let _state = self.lock().await;
        self.worker.shutdown().await;
    }

    /// The names of all connectors.
    pub async fn connectors(&self) -> Vec<String> {
        self.lock().await.connectors.keys().cloned().collect()
    }

    /// A connector's configuration.
    ///
    /// # Errors
    /// 404: unknown connector.
    pub async fn connector_config(&self, name: &str) -> Result<Config, HerderError> {
        let state = self.lock().await;
        Ok(entry(&state, name)?.config.clone())
    }

    /// `GET /connectors/{name}`.
    ///
    /// # Errors
    /// 404: unknown connector.
    pub async fn connector_info(&self, name: &str) -> Result<ConnectorInfo, HerderError> {
        let state = self.lock().await;
        Ok(info(name, entry(&state, name)?))
    }

    /// `GET /connectors/{name}/status`.
    ///
    /// # Errors
    /// 404: unknown connector.
    pub async fn connector_status(&self, name: &str) -> Result<ConnectorStateInfo, HerderError> {
        let state = self.lock().await;
        self.status_of(&state, name)
            .ok_or_else(|| HerderError::not_found(format!("No status found for connector {name}")))
    }

    /// `GET /connectors/{name}/tasks/{task}/status`.
    ///
    /// # Errors
    /// 404: unknown connector or task.
    pub async fn task_status(&self, name: &str, task: usize) -> Result<TaskStateInfo, HerderError> {
        let state = self.lock().await;
        self.status_of(&state, name)
            .and_then(|s| s.tasks.into_iter().find(|t| t.id == task))
            .ok_or_else(|| {
                HerderError::not_found(format!("No status found for task {name}-{task}"))
            })
    }

    /// `GET /connectors/{name}/tasks`.
    ///
    /// # Errors
    /// 404: unknown connector.
    pub async fn task_configs(&self, name: &str) -> Result<Vec<TaskInfo>, HerderError> {
        let state = self.lock().await;
        let entry = entry(&state, name)?;
        Ok(entry
            .task_configs
            .iter()
            .enumerate()
            .map(|(task, config)| TaskInfo {
                id: TaskId {
                    connector: name.to_owned(),
                    task,
                },
                config: config.clone(),
            })
            .collect())
    }

    /// `GET /connector-plugins`.
    pub fn plugins(&self) -> Vec<PluginInfo> {
        self.plugins.infos()
    }

    /// `PUT /connector-plugins/{plugin}/config/validate`. Runs on a blocking thread without the
    /// herder's lock: a large validation delays neither other requests nor the tasks.
    ///
    /// # Errors
    /// 400: no or a mismatching `connector.class`, or an unknown class.
    pub async fn validate(&self, plugin: &str, config: Config) -> Result<ConfigInfos, HerderError> {
        let plugins = self.plugins.clone();
        let plugin = plugin.to_owned();
        off_thread(move || validate::validate(&plugins, &plugin, &config)).await
    }

    /// Checks a configuration as creating or changing a connector does, on a blocking thread; callers
    /// check before taking the herder's lock, so a large configuration never holds it.
    ///
    /// # Errors
    /// 400 with every problem of the configuration.
    pub(crate) async fn check_config(
        &self,
        name: &str,
        config: &Config,
    ) -> Result<(), HerderError> {
        let plugins = self.plugins.clone();
        let (name, config) = (name.to_owned(), config.clone());
        off_thread(move || validate::check(&plugins, &name, &config).map(|_| ())).await
    }

    async fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().await
    }

    fn status_of(&self, state: &State, name: &str) -> Option<ConnectorStateInfo> {
        let entry = state.connectors.get(name)?;
        // A store that can no longer commit fails every connector that runs tasks on it.
        let failure = match (&entry.failure, entry.target) {
            (None, TargetState::Running | TargetState::Paused) => self.worker.store_failure(),
            (failure, _) => failure.clone(),
        };
        let version = entry
            .config
            .get(ferry_runtime::config::CONNECTOR_CLASS)
            .and_then(|class| self.plugins.version_of(class));
        let connector = match (failure, entry.target) {
            (Some(trace), _) => self.state_info("FAILED", Some(trace)),
            (None, TargetState::Running) => self.state_info("RUNNING", None),
            (None, TargetState::Paused) => self.state_info("PAUSED", None),
            (None, TargetState::Stopped) => self.state_info("STOPPED", None),
        };
        let connector = StateInfo {
            version: version.clone(),
            ..connector
        };
        let tasks = self
            .worker
            .task_statuses(name)
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(id, (_, status))| TaskStateInfo {
                id,
                state: status.state.to_string(),
                worker_id: self.worker_id.clone(),
                version: version.clone(),
                trace: status.trace.filter(|_| status.state == TaskState::Failed),
            })
            .collect();
        Some(ConnectorStateInfo {
            name: name.to_owned(),
            connector,
            tasks,
            kind: "source",
        })
    }

    fn state_info(&self, state: &str, trace: Option<String>) -> StateInfo {
        StateInfo {
            state: state.to_owned(),
            worker_id: self.worker_id.clone(),
            version: None,
            trace,
        }
    }

    /// Makes the connector's task configurations and starts its tasks (paused if its target is
    /// PAUSED); nothing when STOPPED. A connector that cannot make task configurations is FAILED.
    /// The connector's status is written to the status store.
    async fn launch(&self, name: &str, entry: &mut Entry) {
        self.start_tasks(name, entry).await;
        self.publish(name, entry);
    }

    /// Writes the connector's status to the status store (REST still answers from the herder's own
    /// state, which also knows a failed offset store).
    fn publish(&self, name: &str, entry: &Entry) {
        let state = match (&entry.failure, entry.target) {
            (Some(_), _) => Status::Failed,
            (None, TargetState::Running) => Status::Running,
            (None, TargetState::Paused) => Status::Paused,
            (None, TargetState::Stopped) => Status::Stopped,
        };
        let mut status = StatusEntry::new(state, self.worker_id.as_str(), 0);
        status.trace = entry.failure.clone();
        self.worker.status_store().put_connector(name, status);
    }

    /// Makes the task configurations, writes them to the config store and starts the tasks with the
    /// set the store holds. A STOPPED connector's set is emptied, as Kafka Connect does.
    async fn start_tasks(&self, name: &str, entry: &mut Entry) {
        entry.task_configs.clear();
        entry.failure = None;
        if entry.target == TargetState::Stopped {
            self.clear_task_configs(name, entry.origin).await;
            return;
        }
        let plan = self.plan(name, &entry.config);
        self.worker.metrics().connector_startup(plan.is_ok());
        let planned = match plan {
            Err(reason) => Err(reason),
            Ok((config, connector, generated)) => self
                .store_task_configs(name, entry.origin, &generated)
                .await
                .map(|task_configs| (config, connector, task_configs)),
        };
        match planned {
            Err(failure) => self.fail(name, entry, &failure),
            Ok((config, connector, task_configs)) => {
                // The store keeps the placeholders; the tasks run with them resolved.
                let resolved: Result<Vec<(Config, Vec<String>)>, _> = task_configs
                    .iter()
                    .map(|t| self.plugins.resolve_task(t))
                    .collect();
                let (resolved, secrets): (Vec<Config>, Vec<Vec<String>>) = match resolved {
                    Ok(resolved) => resolved.into_iter().unzip(),
                    Err(unresolved) => return self.fail(name, entry, &unresolved.into()),
                };
                let spec = ConnectorSpec {
                    name: name.to_owned(),
                    tasks_max: config.tasks_max,
                    tolerate_delivery_errors: config.errors_tolerance == ErrorTolerance::All,
                    transforms: config.transforms.clone(),
                    error_handling: config.error_handling,
                    secrets: secrets.concat(),
                    config: config.props.clone(),
                };
                let converters = (config.key_converter, config.value_converter);
                let paused = entry.target == TargetState::Paused;
                match self.worker.start_provided_tasks(
                    spec,
                    resolved,
                    connector.as_ref(),
                    converters,
                    paused,
                ) {
                    Ok(()) => entry.task_configs = task_configs,
                    Err(e) => self.fail(name, entry, &e.into()),
                }
            }
        }
    }

    /// Marks the connector FAILED: `failure` becomes its status's trace.
    fn fail(&self, name: &str, entry: &mut Entry, failure: &ConnectorFailure) {
        tracing::error!(connector = %name, "connector {name:?} failed: {failure}");
        entry.failure = Some(failure.to_string());
    }

    /// The checked configuration, a connector instance and its task configurations; `Err` is the
    /// reason the connector is FAILED.
    #[allow(clippy::type_complexity)]
    fn plan(
        &self,
        name: &str,
        config: &Config,
    ) -> Result<(ConnectorConfig, Box<dyn SourceConnector>, Vec<Config>), ConnectorFailure> {
        let raw = config;
        let (config, connector, secrets) = validate::check_resolved(&self.plugins, name, raw)
            .map_err(ConnectorFailure::Invalid)?;
        let task_configs = connector
            .task_configs(&config.props, config.tasks_max.max(1))
            .map_err(|e| ConnectorFailure::TaskConfigs {
                reason: scrub(e.to_string(), &secrets),
            })?;
        let task_configs = self.plugins.unresolve(raw, &config.props, task_configs);
        Ok((config, connector, task_configs))
    }

    /// The config store holding `origin`'s connectors.
    fn store_for(&self, origin: Origin) -> &dyn ConfigBackingStore {
        match origin {
            Origin::CommandLine => &self.command_line_store,
            Origin::Rest => self.config_store.as_ref(),
        }
    }

    /// Writes the connector's task configurations to its config store and returns the set the store
    /// then holds (what its tasks run with); `Err` is the reason the connector is FAILED.
    async fn store_task_configs(
        &self,
        name: &str,
        origin: Origin,
        task_configs: &[Config],
    ) -> Result<Vec<Config>, ConnectorFailure> {
        let store = self.store_for(origin);
        store
            .put_task_configs(name, task_configs)
            .await
            .map_err(|source| ConnectorFailure::WriteTaskConfigs {
                store: store.describe(),
                source,
            })?;
        self.stored_task_configs(name, origin).await
    }

    /// The connector's task configurations as its config store holds them.
    async fn stored_task_configs(
        &self,
        name: &str,
        origin: Origin,
    ) -> Result<Vec<Config>, ConnectorFailure> {
        let store = self.store_for(origin);
        let snapshot =
            store
                .snapshot()
                .await
                .map_err(|source| ConnectorFailure::ReadTaskConfigs {
                    store: store.describe(),
                    source,
                })?;
        snapshot
            .connectors
            .get(name)
            .and_then(|c| c.tasks.clone())
            .ok_or_else(|| ConnectorFailure::NoTaskConfigs {
                store: store.describe(),
            })
    }

    /// Empties a stopped connector's task configurations in its config store (Kafka Connect writes
    /// an empty set on stop). The store can only refuse for a connector it does not hold, which a
    /// stopped connector cannot be; if it does, it is logged: the stopped connector runs nothing
    /// either way.
    async fn clear_task_configs(&self, name: &str, origin: Origin) {
        let store = self.store_for(origin);
        if let Err(e) = store.put_task_configs(name, &[]).await {
            tracing::error!(
                connector = %name,
                "the task configurations of stopped connector {name:?} could not be emptied in {}: {e}",
                store.describe()
            );
        }
    }

    /// Stops the connector's tasks, if it has any.
    async fn halt(&self, name: &str, entry: &mut Entry) {
        entry.task_configs.clear();
        if let Ok(finals) = self.worker.stop_connector(name).await {
            for (task, status) in finals {
                if status.state == TaskState::Failed {
                    tracing::info!(%task, "task stopped; it had failed: {}", status.trace.unwrap_or_default());
                }
            }
        }
    }

    /// Removes `name` (its configuration and task configurations) from the config store, before the
    /// change takes effect; on failure nothing changes.
    async fn unpersist(&self, name: &str) -> Result<(), HerderError> {
        self.config_store
            .remove_connector_config(name)
            .await
            .map_err(store_error)?;
        self.command_line_store
            .remove_connector_config(name)
            .await
            .map_err(store_error)
    }

    /// Persists a REST connector's configuration and target state (command-line connectors are not
    /// written to the config store, only to the in-memory one of this run).
    async fn persist_entry(
        &self,
        name: &str,
        config: &Config,
        origin: Origin,
        target: TargetState,
    ) -> Result<(), HerderError> {
        if origin == Origin::CommandLine {
            tracing::info!(
                connector = %name,
                "connector {name:?} comes from a properties file on the command line: this change lasts until \
                 the worker restarts"
            );
            return self
                .command_line_store
                .put_connector_config(name, config, target)
                .await
                .map_err(store_error);
        }
        self.config_store
            .put_connector_config(name, config, target)
            .await
            .map_err(store_error)
    }
}

impl Entry {
    fn new(config: Config, target: TargetState, origin: Origin) -> Self {
        Self {
            config,
            target,
            origin,
            task_configs: Vec::new(),
            failure: None,
        }
    }
}

/// Runs CPU-bound request work (validation) on tokio's blocking threads, so that it never occupies
/// the runtime's worker threads the task loops and committers run on.
async fn off_thread<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, HerderError> + Send + 'static,
) -> Result<T, HerderError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| HerderError::internal(format!("checking the configuration failed: {e}")))?
}

/// A config store write failed: 500 with the store's message.
fn store_error(e: ConfigStoreError) -> HerderError {
    HerderError::internal(e.message.clone()).with_source(e)
}

fn entry<'a>(state: &'a State, name: &str) -> Result<&'a Entry, HerderError> {
    state.connectors.get(name).ok_or_else(|| not_found(name))
}

/// `current` with `patch` merged in (KIP-477: a `None` value removes the key). As for `PUT`, a
/// `name` left in the result must be the connector's.
///
/// # Errors
/// 400 when the patched `name` differs from the connector's.
pub(crate) fn patched(
    name: &str,
    current: &Config,
    patch: &ConfigPatch,
) -> Result<Config, HerderError> {
    let mut config = current.clone();
    for (key, value) in patch {
        match value {
            Some(value) => {
                config.insert(key.clone(), value.clone());
            }
            None => {
                config.remove(key);
            }
        }
    }
    match config.get(ferry_runtime::config::NAME) {
        Some(included) if included != name => Err(HerderError::bad_request(format!(
            "Connector name configuration ({included}) doesn't match connector name in the URL ({name})"
        ))),
        _ => Ok(config),
    }
}

fn not_found(name: &str) -> HerderError {
    HerderError::not_found(format!("Connector {name} not found"))
}

fn info(name: &str, entry: &Entry) -> ConnectorInfo {
    ConnectorInfo {
        name: name.to_owned(),
        config: entry.config.clone(),
        tasks: (0..entry.task_configs.len())
            .map(|task| TaskId {
                connector: name.to_owned(),
                task,
            })
            .collect(),
        kind: "source",
    }
}
