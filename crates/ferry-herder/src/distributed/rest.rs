//! The [`Herder`] trait over the distributed herder: reads from the latest snapshot and the status
//! store, and where each write is served ([`Herder::route_write`]).

use std::sync::Arc;

use async_trait::async_trait;
use ferry_api::Config;
use ferry_plugin::{ConfigSnapshot, ConnectorEntry};

use super::DistributedHerder;
use crate::entities::{
    ConfigInfos, ConnectorInfo, ConnectorOffsets, ConnectorStateInfo, Message, PluginInfo,
    StateInfo, TaskInfo, TaskStateInfo,
};
use crate::{
    Herder, HerderError, OffsetInput, Route, WriteScope, off_thread, offsets, store_error, validate,
};
use ferry_runtime::metrics::Metrics;
use ferry_runtime::stores::{State, StatusEntry};
use ferry_runtime::{TargetState, TaskId};

type R<T> = Result<T, HerderError>;

/// The 409 a write gets when it cannot be served here and must not be forwarded.
pub(super) fn not_here(what: &str) -> HerderError {
    HerderError::conflict(format!(
        "Cannot complete request: {what}; a rebalance may be in progress or this worker is not the leader, retry"
    ))
}

impl DistributedHerder {
    /// The latest snapshot of the config store.
    pub(super) async fn snapshot(&self) -> R<ConfigSnapshot> {
        self.config_store.snapshot().await.map_err(store_error)
    }

    pub(super) async fn entry(&self, name: &str) -> R<ConnectorEntry> {
        self.snapshot()
            .await?
            .connectors
            .remove(name)
            .ok_or_else(|| HerderError::not_found(format!("Connector {name} not found")))
    }

    pub(super) fn status(&self, name: &str, entry: &ConnectorEntry) -> ConnectorStateInfo {
        let version = entry
            .config
            .get(ferry_runtime::config::CONNECTOR_CLASS)
            .and_then(|class| self.plugins.version_of(class));
        let connector = match self.statuses.connector(name) {
            Some(status) => StateInfo {
                state: state_name(status.state).to_owned(),
                worker_id: status.worker_id,
                version: version.clone(),
                trace: status.trace,
            },
            None => StateInfo {
                state: "UNASSIGNED".to_owned(),
                worker_id: String::new(),
                version: version.clone(),
                trace: None,
            },
        };
        let count = entry.tasks.as_ref().map_or(0, Vec::len);
        let tasks = (0..count)
            .map(|task| {
                let status = self.statuses.task(&TaskId::new(name, task));
                task_state(task, status, version.clone())
            })
            .collect();
        ConnectorStateInfo {
            name: name.to_owned(),
            connector,
            tasks,
            kind: "source",
        }
    }

    /// Where a write on a slot is served: here if this worker holds it, else the worker whose status
    /// says it runs it (`http://` + its worker id).
    fn route_to_owner(
        &self,
        id: &TaskId,
        status: Option<StatusEntry>,
        forwarded: bool,
    ) -> R<Route> {
        if self.owned().owns(id) {
            return Ok(Route::Local);
        }
        let owner = status
            .map(|s| s.worker_id)
            .filter(|w| !w.is_empty() && *w != self.settings.worker_id);
        match owner {
            Some(worker) if !forwarded => Ok(Route::Forward(format!("http://{worker}"))),
            _ => Err(not_here(&format!("{id} is not running on this worker"))),
        }
    }
}

/// `GET /connectors/{name}`'s answer from the snapshot's entry.
pub(super) fn connector_info(name: &str, entry: &ConnectorEntry) -> ConnectorInfo {
    ConnectorInfo {
        name: name.to_owned(),
        config: entry.config.clone(),
        tasks: (0..entry.tasks.as_ref().map_or(0, Vec::len))
            .map(|task| TaskId::new(name, task))
            .collect(),
        kind: "source",
    }
}

/// A task's status entry; `version` is its connector plugin's.
fn task_state(task: usize, status: Option<StatusEntry>, version: Option<String>) -> TaskStateInfo {
    match status {
        Some(status) => TaskStateInfo {
            id: task,
            state: state_name(status.state).to_owned(),
            worker_id: status.worker_id,
            version,
            trace: status.trace.filter(|_| status.state == State::Failed),
        },
        None => TaskStateInfo {
            id: task,
            state: "UNASSIGNED".to_owned(),
            worker_id: String::new(),
            version,
            trace: None,
        },
    }
}

/// Kafka Connect's name of a state.
pub(super) fn state_name(state: State) -> &'static str {
    match state {
        State::Unassigned => "UNASSIGNED",
        State::Running => "RUNNING",
        State::Paused => "PAUSED",
        State::Failed => "FAILED",
        State::Stopped => "STOPPED",
        State::Restarting => "RESTARTING",
        State::Destroyed => "DESTROYED",
        _ => "UNASSIGNED",
    }
}

#[async_trait]
impl Herder for DistributedHerder {
    fn worker_id(&self) -> &str {
        &self.settings.worker_id
    }

    fn plugins(&self) -> Vec<PluginInfo> {
        self.plugins.infos()
    }

    fn transform_plugins(&self) -> Vec<PluginInfo> {
        self.plugins.transform_infos()
    }

    fn metrics(&self) -> Arc<Metrics> {
        self.worker.metrics()
    }

    fn active_topics(
        &self,
    ) -> Option<(
        Arc<dyn ferry_runtime::stores::StatusBackingStore>,
        ferry_runtime::TopicTracking,
    )> {
        Some((self.statuses.clone(), self.worker.topic_tracking()))
    }

    async fn connectors(&self) -> Vec<String> {
        match self.snapshot().await {
            Ok(snapshot) => snapshot.connectors.into_keys().collect(),
            Err(e) => {
                tracing::error!("cannot list the connectors: {e}");
                Vec::new()
            }
        }
    }

    async fn connector_info(&self, name: &str) -> R<ConnectorInfo> {
        Ok(connector_info(name, &self.entry(name).await?))
    }

    async fn connector_config(&self, name: &str) -> R<Config> {
        Ok(self.entry(name).await?.config)
    }

    async fn connector_status(&self, name: &str) -> R<ConnectorStateInfo> {
        let entry = self
            .snapshot()
            .await?
            .connectors
            .remove(name)
            .ok_or_else(|| {
                HerderError::not_found(format!("No status found for connector {name}"))
            })?;
        Ok(self.status(name, &entry))
    }

    async fn task_configs(&self, name: &str) -> R<Vec<TaskInfo>> {
        let entry = self.entry(name).await?;
        Ok(entry
            .tasks
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(task, config)| TaskInfo {
                id: TaskId::new(name, task),
                config,
            })
            .collect())
    }

    async fn task_status(&self, id: &TaskId) -> R<TaskStateInfo> {
        let missing = || HerderError::not_found(format!("No status found for task {id}"));
        let entry = self
            .snapshot()
            .await?
            .connectors
            .remove(&id.connector)
            .ok_or_else(missing)?;
        if id.task >= entry.tasks.as_ref().map_or(0, Vec::len) {
            return Err(missing());
        }
        let version = entry
            .config
            .get(ferry_runtime::config::CONNECTOR_CLASS)
            .and_then(|class| self.plugins.version_of(class));
        Ok(task_state(id.task, self.statuses.task(id), version))
    }

    async fn create_connector(
        &self,
        name: &str,
        config: Config,
        initial: TargetState,
    ) -> R<ConnectorInfo> {
        self.create(name, config, initial).await
    }

    async fn put_connector_config(&self, name: &str, config: Config) -> R<(bool, ConnectorInfo)> {
        self.put_config(name, config).await
    }

    async fn patch_connector_config(
        &self,
        name: &str,
        patch: crate::ConfigPatch,
    ) -> R<ConnectorInfo> {
        self.patch_config(name, patch).await
    }

    fn plugin_config(&self, plugin: &str) -> R<Vec<crate::entities::ConfigKeyInfo>> {
        self.plugins.config_keys(plugin)
    }

    fn is_ready(&self) -> bool {
        // Started: the config store was read and the group joined.
        self.group.get().is_some()
    }

    async fn wait_ready(&self) {
        loop {
            // Registered before the check, so a start finishing in between is not missed.
            let started = self.started.notified();
            if self.is_ready() {
                return;
            }
            started.await;
        }
    }

    async fn health_check(&self) -> R<()> {
        // What Kafka Connect's herder thread does is split here between the loop's passes (under
        // `applied`) and the leader's writes: both must be free to take a request.
        drop(self.applied.lock().await);
        drop(self.writes.lock().await);
        Ok(())
    }

    async fn kafka_cluster_id(&self) -> Option<String> {
        self.worker.kafka_cluster_id().await
    }

    async fn delete_connector(&self, name: &str) -> R<()> {
        self.delete(name).await
    }

    async fn restart_connector(&self, name: &str) -> R<()> {
        self.restart_instance(name).await
    }

    async fn restart_connector_and_tasks(
        &self,
        name: &str,
        include_tasks: bool,
        only_failed: bool,
    ) -> R<ConnectorStateInfo> {
        self.restart_all(name, include_tasks, only_failed).await
    }

    async fn restart_task(&self, id: &TaskId) -> R<()> {
        self.restart_one(id).await
    }

    async fn set_target_state(&self, name: &str, target: TargetState) -> R<()> {
        self.set_target(name, target).await
    }

    async fn connector_offsets(&self, name: &str) -> R<ConnectorOffsets> {
        let entry = self.entry(name).await?;
        offsets::read_offsets(self.offset_store_for(&entry.config).as_ref(), name).await
    }

    async fn alter_offsets(&self, name: &str, entries: Vec<OffsetInput>) -> R<Message> {
        self.modify_offsets(name, Some(entries)).await
    }

    async fn reset_offsets(&self, name: &str) -> R<Message> {
        self.modify_offsets(name, None).await
    }

    async fn validate(&self, plugin: &str, config: Config) -> R<ConfigInfos> {
        let plugins = self.plugins.clone();
        let plugin = plugin.to_owned();
        off_thread(move || validate::validate(&plugins, &plugin, &config)).await
    }

    async fn route_write(&self, scope: WriteScope<'_>, forwarded: bool) -> R<Route> {
        match scope {
            WriteScope::Cluster => {
                if self.is_leader() {
                    return Ok(Route::Local);
                }
                if forwarded {
                    return Err(not_here("this worker is not the leader"));
                }
                let Some(group) = self.group.get() else {
                    return Err(not_here("this worker has not joined the group yet"));
                };
                match group.leader_url().await {
                    Ok(Some(url)) if url != self.settings.rest_url => Ok(Route::Forward(url)),
                    Ok(_) => Err(not_here("no leader is known")),
                    Err(e) => Err(not_here(&format!("the leader cannot be found ({e})"))),
                }
            }
            WriteScope::Connector(name) => {
                let id = TaskId::new(name, 0);
                self.route_to_owner(&id, self.statuses.connector(name), forwarded)
            }
            WriteScope::Task(id) => self.route_to_owner(id, self.statuses.task(id), forwarded),
        }
    }
}
