//! The herder as the REST API sees it: one method per request. [`StandaloneHerder`] implements it
//! today; a distributed herder (config and status topics, task assignment by a consumer group) is
//! another implementation of the same trait, so the REST layer does not change with the mode.

use std::sync::Arc;

use async_trait::async_trait;
use ferry_api::Config;

use super::entities::{
    ConfigInfos, ConfigKeyInfo, ConnectorInfo, ConnectorOffsets, ConnectorStateInfo, Message,
    PluginInfo, TaskInfo, TaskStateInfo,
};
use super::{HerderError, OffsetInput, StandaloneHerder};
use ferry_runtime::TopicTracking;
use ferry_runtime::metrics::Metrics;
use ferry_runtime::stores::StatusBackingStore;
use ferry_runtime::{TargetState, TaskId};

type R<T> = Result<T, HerderError>;

/// A `PATCH /connectors/{name}/config` body: a key with `None` (JSON `null`) is removed.
pub type ConfigPatch = std::collections::BTreeMap<String, Option<String>>;

/// What a write request acts on, for [`Herder::route_write`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteScope<'a> {
    /// Creating, reconfiguring or deleting a connector, changing its target state or its offsets:
    /// serialized cluster-wide (distributed: by the leader).
    Cluster,
    /// Restarting a connector (and maybe its tasks): served where the connector runs.
    Connector(&'a str),
    /// Restarting one task: served where the task runs.
    Task(&'a TaskId),
}

/// Where a write request is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Here.
    Local,
    /// By the worker at this REST base URL (`http://host:port`): the REST layer forwards the request
    /// as it came (adding `forward=false`, so it is not forwarded again) and answers its response.
    Forward(String),
}

/// What the REST API asks of a herder (Kafka Connect's `Herder` interface, cut to Ferry's endpoints).
/// Messages and [kinds](super::HerderErrorKind) of the errors are what clients are answered.
#[async_trait]
pub trait Herder: Send + Sync {
    /// The worker id reported in statuses (`host:port` of the REST listener).
    fn worker_id(&self) -> &str;
    /// `GET /connector-plugins`.
    fn plugins(&self) -> Vec<PluginInfo>;
    /// The transformations and predicates `GET /connector-plugins?connectorsOnly=false` lists too.
    fn transform_plugins(&self) -> Vec<PluginInfo> {
        Vec::new()
    }
    /// The metrics served at `GET /metrics`.
    fn metrics(&self) -> Arc<Metrics>;
    /// Where KIP-558 active topics are kept (`GET /connectors/{name}/topics` reads this worker's
    /// view of it, as Kafka Connect does) and the worker's `topic.tracking.*` settings; `None` (the
    /// default): not tracked, answered as `topic.tracking.enable=false`.
    fn active_topics(&self) -> Option<(Arc<dyn StatusBackingStore>, TopicTracking)> {
        None
    }
    /// `GET /connectors`: the names of all connectors.
    async fn connectors(&self) -> Vec<String>;
    /// `GET /connectors/{name}`.
    async fn connector_info(&self, name: &str) -> R<ConnectorInfo>;
    /// `GET /connectors/{name}/config`.
    async fn connector_config(&self, name: &str) -> R<Config>;
    /// `GET /connectors/{name}/status`.
    async fn connector_status(&self, name: &str) -> R<ConnectorStateInfo>;
    /// `GET /connectors/{name}/tasks`.
    async fn task_configs(&self, name: &str) -> R<Vec<TaskInfo>>;
    /// `GET /connectors/{name}/tasks/{task}/status`.
    async fn task_status(&self, id: &TaskId) -> R<TaskStateInfo>;
    /// `POST /connectors`: creates a connector in `initial` state.
    async fn create_connector(
        &self,
        name: &str,
        config: Config,
        initial: TargetState,
    ) -> R<ConnectorInfo>;
    /// `PUT /connectors/{name}/config`: creates or reconfigures; `true` when created.
    async fn put_connector_config(&self, name: &str, config: Config) -> R<(bool, ConnectorInfo)>;
    /// `PATCH /connectors/{name}/config` (KIP-477): `patch` merged into the current configuration
    /// (`None` removes the key), then applied as `PUT` would. 404 for an unknown connector.
    ///
    /// The default reads, merges and puts in two steps; the built-in herders do it under their
    /// write serialization, so a concurrent change is never lost.
    async fn patch_connector_config(&self, name: &str, patch: ConfigPatch) -> R<ConnectorInfo> {
        let current = self.connector_config(name).await?;
        let patched = super::patched(name, &current, &patch)?;
        Ok(self.put_connector_config(name, patched).await?.1)
    }
    /// `DELETE /connectors/{name}`.
    async fn delete_connector(&self, name: &str) -> R<()>;
    /// `POST /connectors/{name}/restart` (the connector alone).
    async fn restart_connector(&self, name: &str) -> R<()>;
    /// `POST /connectors/{name}/restart?includeTasks=…&onlyFailed=…`.
    async fn restart_connector_and_tasks(
        &self,
        name: &str,
        include_tasks: bool,
        only_failed: bool,
    ) -> R<ConnectorStateInfo>;
    /// `POST /connectors/{name}/tasks/{task}/restart`.
    async fn restart_task(&self, id: &TaskId) -> R<()>;
    /// `PUT /connectors/{name}/{pause,resume,stop}`.
    async fn set_target_state(&self, name: &str, target: TargetState) -> R<()>;
    /// `GET /connectors/{name}/offsets`.
    async fn connector_offsets(&self, name: &str) -> R<ConnectorOffsets>;
    /// `PATCH /connectors/{name}/offsets`.
    async fn alter_offsets(&self, name: &str, offsets: Vec<OffsetInput>) -> R<Message>;
    /// `DELETE /connectors/{name}/offsets`.
    async fn reset_offsets(&self, name: &str) -> R<Message>;
    /// `PUT /connector-plugins/{plugin}/config/validate`.
    async fn validate(&self, plugin: &str, config: Config) -> R<ConfigInfos>;
    /// `GET /connector-plugins/{plugin}/config`: the plugin's own keys, as Kafka Connect lists them
    /// (404 for an unknown plugin).
    fn plugin_config(&self, plugin: &str) -> R<Vec<ConfigKeyInfo>> {
        Err(HerderError::not_found(format!("Unknown plugin {plugin}.")))
    }
    /// `GET /health`: whether the herder has finished starting (`false`: `503` "starting").
    fn is_ready(&self) -> bool {
        true
    }
    /// Returns once the herder has finished starting: every request but `GET /health` waits for it
    /// (bounded by the REST layer's timeouts), so the REST API can listen while the worker starts.
    async fn wait_ready(&self) {}
    /// `GET /health`: a no-op request through the point every request of this herder passes (its
    /// lock); the REST layer bounds how long it may take, so a herder stuck behind a request that never
    /// ends is reported unhealthy (Kafka Connect's herder-thread check).
    async fn health_check(&self) -> R<()> {
        Ok(())
    }
    /// `GET /`: the id of the Kafka cluster the worker writes to, if it has one.
    async fn kafka_cluster_id(&self) -> Option<String> {
        None
    }
    /// Where a write request (`POST`/`PUT`/`PATCH`/`DELETE`) acting on `scope` must be served. A
    /// standalone herder serves everything itself; a distributed one sends cluster writes to the
    /// leader and restarts to the owner. `forwarded`: the request was already forwarded once
    /// (`forward=false`), so it must not be forwarded again — answer an error (409, as Kafka Connect
    /// does during a rebalance) instead of [`Route::Forward`].
    ///
    /// # Errors
    /// The request cannot be served now (no leader known, a rebalance under way).
    async fn route_write(&self, _scope: WriteScope<'_>, _forwarded: bool) -> R<Route> {
        Ok(Route::Local)
    }
}

// Delegates to the inherent methods (which keep their names, so existing callers are unchanged).
#[async_trait]
impl Herder for StandaloneHerder {
    fn worker_id(&self) -> &str {
        StandaloneHerder::worker_id(self)
    }
    fn plugins(&self) -> Vec<PluginInfo> {
        StandaloneHerder::plugins(self)
    }
    fn transform_plugins(&self) -> Vec<PluginInfo> {
        self.plugins.transform_infos()
    }
    fn metrics(&self) -> Arc<Metrics> {
        self.worker().metrics()
    }
    fn active_topics(&self) -> Option<(Arc<dyn StatusBackingStore>, TopicTracking)> {
        Some((self.worker().status_store(), self.worker().topic_tracking()))
    }
    async fn connectors(&self) -> Vec<String> {
        StandaloneHerder::connectors(self).await
    }
    async fn connector_info(&self, name: &str) -> R<ConnectorInfo> {
        StandaloneHerder::connector_info(self, name).await
    }
    async fn connector_config(&self, name: &str) -> R<Config> {
        StandaloneHerder::connector_config(self, name).await
    }
    async fn connector_status(&self, name: &str) -> R<ConnectorStateInfo> {
        StandaloneHerder::connector_status(self, name).await
    }
    async fn task_configs(&self, name: &str) -> R<Vec<TaskInfo>> {
        StandaloneHerder::task_configs(self, name).await
    }
    async fn task_status(&self, id: &TaskId) -> R<TaskStateInfo> {
        StandaloneHerder::task_status(self, &id.connector, id.task).await
    }
    async fn create_connector(
        &self,
        name: &str,
        config: Config,
        initial: TargetState,
    ) -> R<ConnectorInfo> {
        StandaloneHerder::create_connector(self, name, config, initial).await
    }
    async fn put_connector_config(&self, name: &str, config: Config) -> R<(bool, ConnectorInfo)> {
        StandaloneHerder::put_connector_config(self, name, config).await
    }
    async fn delete_connector(&self, name: &str) -> R<()> {
        StandaloneHerder::delete_connector(self, name).await
    }
    async fn restart_connector(&self, name: &str) -> R<()> {
        StandaloneHerder::restart_connector(self, name).await
    }
    async fn restart_connector_and_tasks(
        &self,
        name: &str,
        include_tasks: bool,
        only_failed: bool,
    ) -> R<ConnectorStateInfo> {
        StandaloneHerder::restart_connector_and_tasks(self, name, include_tasks, only_failed).await
    }
    async fn restart_task(&self, id: &TaskId) -> R<()> {
        StandaloneHerder::restart_task(self, &id.connector, id.task).await
    }
    async fn set_target_state(&self, name: &str, target: TargetState) -> R<()> {
        StandaloneHerder::set_target(self, name, target).await
    }
    async fn connector_offsets(&self, name: &str) -> R<ConnectorOffsets> {
        StandaloneHerder::connector_offsets(self, name).await
    }
    async fn alter_offsets(&self, name: &str, offsets: Vec<OffsetInput>) -> R<Message> {
        StandaloneHerder::alter_offsets(self, name, offsets).await
    }
    async fn reset_offsets(&self, name: &str) -> R<Message> {
        StandaloneHerder::reset_offsets(self, name).await
    }
    async fn validate(&self, plugin: &str, config: Config) -> R<ConfigInfos> {
        StandaloneHerder::validate(self, plugin, config).await
    }
    async fn patch_connector_config(&self, name: &str, patch: ConfigPatch) -> R<ConnectorInfo> {
        StandaloneHerder::patch_connector_config(self, name, patch).await
    }
    fn plugin_config(&self, plugin: &str) -> R<Vec<ConfigKeyInfo>> {
        self.plugins.config_keys(plugin)
    }
    fn is_ready(&self) -> bool {
        self.started.load(std::sync::atomic::Ordering::Acquire)
    }
    async fn wait_ready(&self) {
        loop {
            // Registered before the check, so a start finishing in between is not missed.
            let started = self.started_notify.notified();
            if self.is_ready() {
                return;
            }
            started.await;
        }
    }
    async fn health_check(&self) -> R<()> {
        drop(self.lock().await);
        Ok(())
    }
    async fn kafka_cluster_id(&self) -> Option<String> {
        self.worker().kafka_cluster_id().await
    }
}
