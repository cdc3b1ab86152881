//! Writes: the cluster's (leader only, serialized, after reading the config store to its end) and
//! the restarts (on the owner of the slot). The REST layer routes each request with
//! [`Herder::route_write`](crate::Herder::route_write) first; these check again, as the
//! slots may have moved in between.

use ferry_api::Config;

use super::DistributedHerder;
use super::reconcile::desired_task;
use super::rest::{connector_info, not_here};
use crate::entities::{ConnectorInfo, ConnectorStateInfo, Message};
use crate::{HerderError, OffsetInput, off_thread, offsets, store_error, validate};
use ferry_runtime::stores::State;
use ferry_runtime::{TargetState, TaskId};

type R<T> = Result<T, HerderError>;

impl DistributedHerder {
    fn check_leader(&self) -> R<()> {
        if self.is_leader() {
            Ok(())
        } else {
            Err(not_here("this worker is not the leader"))
        }
    }

    async fn check_config(&self, name: &str, config: &Config) -> R<()> {
        let plugins = self.plugins.clone();
        let (name, config) = (name.to_owned(), config.clone());
        off_thread(move || validate::check(&plugins, &name, &config).map(|_| ())).await
    }

    /// `POST /connectors`, on the leader.
    pub(super) async fn create(
        &self,
        name: &str,
        config: Config,
        initial: TargetState,
    ) -> R<ConnectorInfo> {
        self.check_config(name, &config).await?;
        let _serial = self.writes.lock().await;
        self.check_leader()?;
        let snapshot = self.snapshot().await?;
        if snapshot.connectors.contains_key(name) {
            return Err(HerderError::already_exists(format!(
                "Connector {name} already exists"
            )));
        }
        self.config_store
            .put_connector_config(name, &config, initial)
            .await
            .map_err(store_error)?;
        tracing::info!(connector = %name, "connector {name:?} created ({initial:?})");
        self.kick.notify_one();
        Ok(written(name, config, initial, None))
    }

    /// `PUT /connectors/{name}/config`, on the leader: `true` when created.
    pub(super) async fn put_config(&self, name: &str, config: Config) -> R<(bool, ConnectorInfo)> {
        self.check_config(name, &config).await?;
        let _serial = self.writes.lock().await;
        self.check_leader()?;
        let mut snapshot = self.snapshot().await?;
        let existing = snapshot.connectors.remove(name);
        let target = existing.as_ref().map_or(TargetState::Running, |e| e.target);
        self.config_store
            .put_connector_config(name, &config, target)
            .await
            .map_err(store_error)?;
        tracing::info!(connector = %name, "connector {name:?} configured");
        self.kick.notify_one();
        let created = existing.is_none();
        let tasks = existing.and_then(|e| e.tasks);
        Ok((created, written(name, config, target, tasks)))
    }

    /// `PATCH /connectors/{name}/config` (KIP-477), on the leader: merged into the configuration
    /// the config store holds, under the write lock, so a concurrent change is never lost.
    pub(super) async fn patch_config(
        &self,
        name: &str,
        patch: crate::ConfigPatch,
    ) -> R<ConnectorInfo> {
        let _serial = self.writes.lock().await;
        self.check_leader()?;
        let mut snapshot = self.snapshot().await?;
        let Some(existing) = snapshot.connectors.remove(name) else {
            return Err(HerderError::not_found(format!(
                "Connector {name} not found"
            )));
        };
        let config = crate::patched(name, &existing.config, &patch)?;
        self.check_config(name, &config).await?;
        self.config_store
            .put_connector_config(name, &config, existing.target)
            .await
            .map_err(store_error)?;
        tracing::info!(connector = %name, "connector {name:?} configured (patched)");
        self.kick.notify_one();
        Ok(written(name, config, existing.target, existing.tasks))
    }

    /// `DELETE /connectors/{name}`, on the leader: its offsets are kept, its statuses removed.
    pub(super) async fn delete(&self, name: &str) -> R<()> {
        let _serial = self.writes.lock().await;
        self.check_leader()?;
        let entry = self.entry(name).await?;
        self.config_store
            .remove_connector_config(name)
            .await
            .map_err(store_error)?;
        // Its task numbers have no next instance to fence their zombies.
        self.fence_removed_tasks(name, 0..entry.tasks.as_ref().map_or(0, Vec::len));
        self.statuses.remove_connector(name);
        tracing::info!(connector = %name, "connector {name:?} deleted (its offsets are kept)");
        self.kick.notify_one();
        Ok(())
    }

    /// `PUT /connectors/{name}/{pause,resume,stop}`, on the leader; the owners react to the change.
    pub(super) async fn set_target(&self, name: &str, target: TargetState) -> R<()> {
        let _serial = self.writes.lock().await;
        self.check_leader()?;
        let snapshot = self.snapshot().await?;
        if !snapshot.connectors.contains_key(name) {
            return Err(HerderError::not_found(format!("Unknown connector {name}")));
        }
        self.config_store
            .put_target_state(name, target)
            .await
            .map_err(store_error)?;
        tracing::info!(connector = %name, "connector {name:?}: target state {target:?}");
        self.kick.notify_one();
        Ok(())
    }

    /// `PATCH` (`Some`) or `DELETE` (`None`) `/connectors/{name}/offsets`, on the leader. As Kafka
    /// Connect, only for a STOPPED connector whose committed task set is empty (400 otherwise): its
    /// owners then run none of its tasks. Beyond Kafka Connect, the owners must also have reported
    /// every task stopped (its status written after its final commit): a task still stopping could
    /// otherwise commit over the change. Until then the answer is 409 (retry); a task whose worker
    /// died keeps its last status until its slot's new owner claims it.
    pub(super) async fn modify_offsets(
        &self,
        name: &str,
        entries: Option<Vec<OffsetInput>>,
    ) -> R<Message> {
        let _serial = self.writes.lock().await;
        self.check_leader()?;
        let entry = self.entry(name).await?;
        let no_tasks = entry.tasks.as_ref().is_none_or(Vec::is_empty);
        if entry.target != TargetState::Stopped || !no_tasks {
            return Err(offsets::not_stopped(name));
        }
        let stopping: Vec<String> = self
            .statuses
            .tasks(name)
            .into_iter()
            .filter(|(_, s)| matches!(s.state, State::Running | State::Paused | State::Restarting))
            .map(|(id, s)| format!("{id} on {}", s.worker_id))
            .collect();
        if !stopping.is_empty() {
            return Err(HerderError::conflict(format!(
                "Connector {name} is STOPPED but these tasks have not reported their stop yet (their final \
                 offset commits may be under way): {}; retry",
                stopping.join(", ")
            )));
        }
        let store = self.offset_store_for(&entry.config);
        let store = store.as_ref();
        match entries {
            Some(entries) => {
                offsets::alter_offsets(store, &self.plugins, name, &entry.config, &entries).await
            }
            None => offsets::reset_offsets(store, &self.plugins, name, &entry.config).await,
        }
    }

    /// `POST /connectors/{name}/restart`, on the owner of slot 0: the connector instance is made
    /// again (and its task configurations with it; they are written if they changed).
    pub(super) async fn restart_instance(&self, name: &str) -> R<()> {
        self.entry(name).await?;
        if !self.owned().owns_connector(name) {
            return Err(not_here(&format!(
                "connector {name} is not running on this worker"
            )));
        }
        self.applied.lock().await.instances.remove(name);
        tracing::info!(connector = %name, "restarting connector {name:?}");
        self.pass().await;
        Ok(())
    }

    /// `POST /connectors/{name}/tasks/{task}/restart`, on the owner: the task stops (final commit)
    /// and starts again with its committed configuration, from the committed offsets.
    pub(super) async fn restart_one(&self, id: &TaskId) -> R<()> {
        let snapshot = self.snapshot().await?;
        let missing = || HerderError::not_found(format!("Task {id} not found"));
        let entry = snapshot.connectors.get(&id.connector).ok_or_else(missing)?;
        if id.task >= entry.tasks.as_ref().map_or(0, Vec::len) {
            return Err(missing());
        }
        let _applied = self.applied.lock().await;
        if !self.owned().owns(id) {
            return Err(not_here(&format!(
                "task {id} is not running on this worker"
            )));
        }
        let Some(want) = desired_task(&snapshot, id) else {
            // STOPPED: nothing runs, nothing to restart.
            return Ok(());
        };
        self.owned().running.remove(id);
        tracing::info!(task = %id, "restarting task {id}");
        let _ = self.worker.stop_task(id).await;
        self.start_task(&snapshot, id, want);
        Ok(())
    }

    /// `POST /connectors/{name}/restart?includeTasks=…&onlyFailed=…`, on the owner of slot 0. Restarts
    /// the connector instance (unless `only_failed` and it did not fail) and, with `include_tasks`,
    /// the matching tasks **that run on this worker**; tasks on other workers are not restarted (each
    /// can be restarted on its owner with `POST /connectors/{name}/tasks/{task}/restart`). The answer
    /// marks what was restarted `RESTARTING`, as Kafka Connect does.
    pub(super) async fn restart_all(
        &self,
        name: &str,
        include_tasks: bool,
        only_failed: bool,
    ) -> R<ConnectorStateInfo> {
        let entry = self
            .entry(name)
            .await
            .map_err(|_| HerderError::not_found(format!("Unknown connector: {name}")))?;
        if !self.owned().owns_connector(name) {
            return Err(not_here(&format!(
                "connector {name} is not running on this worker"
            )));
        }
        let mut plan = self.status(name, &entry);
        let restart_connector = !only_failed || plan.connector.state == "FAILED";
        if restart_connector {
            plan.connector.state = "RESTARTING".to_owned();
        }
        let mut tasks = Vec::new();
        for task in &mut plan.tasks {
            let id = TaskId::new(name, task.id);
            let wanted = include_tasks && (!only_failed || task.state == "FAILED");
            if wanted && self.owned().running.contains_key(&id) {
                task.state = "RESTARTING".to_owned();
                tasks.push(id);
            }
        }
        tracing::info!(connector = %name, "restarting connector {name:?}: connector {restart_connector}, tasks here {tasks:?}");
        if restart_connector {
            self.restart_instance(name).await?;
        }
        for id in tasks {
            self.restart_one(&id).await?;
        }
        Ok(plan)
    }
}

/// The answer to a connector configuration just written: that configuration, with the task
/// configurations the store held before (none for a new connector), as Kafka Connect answers. Not
/// read back: the write is acknowledged, and a read-back could fail or wait on another producer's
/// open transaction although the connector is stored, making a retry answer 409 "already exists".
fn written(
    name: &str,
    config: Config,
    target: TargetState,
    tasks: Option<Vec<Config>>,
) -> ConnectorInfo {
    connector_info(
        name,
        &ferry_runtime::stores::ConnectorEntry {
            config,
            target,
            tasks,
        },
    )
}
