//! Creating, changing, restarting, pausing, resuming, stopping and deleting connectors.

use ferry_api::Config;

use super::entities::{ConnectorInfo, ConnectorStateInfo};
use super::{Entry, HerderError, Origin, StandaloneHerder, State, TargetState, info, not_found};

impl StandaloneHerder {
    /// `POST /connectors`: creates a connector in `initial` state.
    ///
    /// # Errors
    /// 400: invalid configuration; 409: the name is taken; 500: the connectors file cannot be written.
    pub async fn create_connector(
        &self,
        name: &str,
        config: Config,
        initial: TargetState,
    ) -> Result<ConnectorInfo, HerderError> {
        // As in Kafka Connect, the configuration is validated before the name is looked up; it is
        // validated before the lock is taken, so a large one does not hold up other requests.
        self.check_config(name, &config).await?;
        let mut state = self.lock().await;
        if state.connectors.contains_key(name) {
            return Err(HerderError::already_exists(format!(
                "Connector {name} already exists"
            )));
        }
        self.add(&mut state, name, config, initial).await
    }

    /// `PUT /connectors/{name}/config`: creates the connector, or changes its configuration and
    /// restarts its tasks with it (a PAUSED connector's tasks restart paused; a STOPPED one keeps no
    /// tasks). Returns whether it was created.
    ///
    /// # Errors
    /// 400: invalid configuration; 500: the connectors file cannot be written.
    pub async fn put_connector_config(
        &self,
        name: &str,
        config: Config,
    ) -> Result<(bool, ConnectorInfo), HerderError> {
        self.check_config(name, &config).await?;
        let mut state = self.lock().await;
        if !state.connectors.contains_key(name) {
            let info = self
                .add(&mut state, name, config, TargetState::Running)
                .await?;
            return Ok((true, info));
        }
        Ok((false, self.replace_config(&mut state, name, config).await?))
    }

    /// `PATCH /connectors/{name}/config` (KIP-477): `patch` merged into the current configuration
    /// (a `None` value removes the key), then applied as `PUT` does, all under the herder's lock.
    ///
    /// # Errors
    /// 404: unknown connector; 400: the patched configuration is invalid; 500: the connectors file
    /// cannot be written.
    pub async fn patch_connector_config(
        &self,
        name: &str,
        patch: super::ConfigPatch,
    ) -> Result<ConnectorInfo, HerderError> {
        let mut state = self.lock().await;
        let current = &state
            .connectors
            .get(name)
            .ok_or_else(|| not_found(name))?
            .config;
        let config = super::patched(name, current, &patch)?;
        // Checked under the lock (unlike PUT): the merge must apply to the configuration it read.
        self.check_config(name, &config).await?;
        self.replace_config(&mut state, name, config).await
    }

    /// Replaces an existing connector's configuration and restarts it with it.
    async fn replace_config(
        &self,
        state: &mut State,
        name: &str,
        config: Config,
    ) -> Result<ConnectorInfo, HerderError> {
        let existing = state.connectors.get(name).ok_or_else(|| not_found(name))?;
        let (origin, target) = (existing.origin, existing.target);
        self.persist_entry(name, &config, origin, target).await?;
        let mut entry = state
            .connectors
            .remove(name)
            .ok_or_else(|| not_found(name))?;
        self.halt(name, &mut entry).await;
        entry.config = config;
        tracing::info!(connector = %name, "connector {name:?} reconfigured");
        self.launch(name, &mut entry).await;
        let info = info(name, &entry);
        state.connectors.insert(name.to_owned(), entry);
        Ok(info)
    }

    async fn add(
        &self,
        state: &mut State,
        name: &str,
        config: Config,
        target: TargetState,
    ) -> Result<ConnectorInfo, HerderError> {
        self.persist_entry(name, &config, Origin::Rest, target)
            .await?;
        let mut entry = Entry::new(config, target, Origin::Rest);
        tracing::info!(connector = %name, "connector {name:?} created ({target:?})");
        self.launch(name, &mut entry).await;
        let info = info(name, &entry);
        state.connectors.insert(name.to_owned(), entry);
        Ok(info)
    }

    /// `POST /connectors/{name}/restart` without `includeTasks` or `onlyFailed`: the connector makes
    /// its task configurations again; if they changed (or it had failed), its tasks restart with them.
    ///
    /// # Errors
    /// 404: unknown connector.
    pub async fn restart_connector(&self, name: &str) -> Result<(), HerderError> {
        let mut state = self.lock().await;
        if !state.connectors.contains_key(name) {
            return Err(not_found(name));
        }
        self.reconfigure(&mut state, name).await;
        Ok(())
    }

    /// `POST /connectors/{name}/restart?includeTasks=…&onlyFailed=…`: restarts the connector (unless
    /// `only_failed` and it did not fail) and, with `include_tasks`, its tasks (only the failed ones
    /// with `only_failed`). Returns the status with what is restarted marked `RESTARTING`, as Kafka
    /// Connect does.
    ///
    /// # Errors
    /// 404: unknown connector.
    pub async fn restart_connector_and_tasks(
        &self,
        name: &str,
        include_tasks: bool,
        only_failed: bool,
    ) -> Result<ConnectorStateInfo, HerderError> {
        let mut state = self.lock().await;
        let Some(mut plan) = self.status_of(&state, name) else {
            return Err(HerderError::not_found(format!("Unknown connector: {name}")));
        };
        let restart_connector = !only_failed || plan.connector.state == "FAILED";
        if restart_connector {
            plan.connector.state = "RESTARTING".to_owned();
        }
        let mut tasks = Vec::new();
        for task in &mut plan.tasks {
            if include_tasks && (!only_failed || task.state == "FAILED") {
                task.state = "RESTARTING".to_owned();
                tasks.push(task.id);
            }
        }
        tracing::info!(
            connector = %name,
            "restarting connector {name:?}: connector {restart_connector}, tasks {tasks:?}"
        );
        let relaunched = restart_connector && self.reconfigure(&mut state, name).await;
        if !relaunched {
            for task in tasks {
                self.restart_task_locked(&mut state, name, task).await?;
            }
        }
        Ok(plan)
    }

    /// `POST /connectors/{name}/tasks/{task}/restart`: the task stops (final commit included) and
    /// starts again from the committed offsets.
    ///
    /// # Errors
    /// 404: unknown connector or task.
    pub async fn restart_task(&self, name: &str, task: usize) -> Result<(), HerderError> {
        let mut state = self.lock().await;
        self.restart_task_locked(&mut state, name, task).await
    }

    async fn restart_task_locked(
        &self,
        state: &mut State,
        name: &str,
        task: usize,
    ) -> Result<(), HerderError> {
        let entry = state.connectors.get(name).ok_or_else(|| not_found(name))?;
        let task_missing = || HerderError::not_found(format!("Task {name}-{task} not found"));
        if task >= entry.task_configs.len() {
            return Err(task_missing());
        }
        let connector = entry
            .config
            .get(ferry_runtime::config::CONNECTOR_CLASS)
            .and_then(|class| self.plugins.resolve(class.trim()))
            .ok_or_else(task_missing)?;
        // The task restarts with its configuration as the config store holds it.
        let config = self
            .stored_task_configs(name, entry.origin)
            .await
            .map_err(|e| {
                HerderError::internal(format!("Failed to start task: {name}-{task}: {e}"))
                    .with_source(e)
            })?
            .into_iter()
            .nth(task)
            .ok_or_else(task_missing)?;
        self.worker
            .restart_task_with(name, task, config.clone(), connector.as_ref())
            .await
            .map_err(|e| {
                HerderError::internal(format!("Failed to start task: {name}-{task}: {e}"))
            })?;
        if let Some(slot) = state
            .connectors
            .get_mut(name)
            .and_then(|entry| entry.task_configs.get_mut(task))
        {
            *slot = config;
        }
        Ok(())
    }

    /// Makes the task configurations again and restarts the tasks if they changed or the connector
    /// had failed; returns whether the tasks were restarted.
    async fn reconfigure(&self, state: &mut State, name: &str) -> bool {
        let Some(entry) = state.connectors.get_mut(name) else {
            return false;
        };
        if entry.target == TargetState::Stopped {
            return false;
        }
        let unchanged = entry.failure.is_none()
            && matches!(self.plan(name, &entry.config),
                Ok((_, _, configs)) if configs == entry.task_configs);
        if unchanged {
            tracing::info!(connector = %name, "connector {name:?} restarted; its task configurations are unchanged");
            return false;
        }
        self.halt(name, entry).await;
        self.launch(name, entry).await;
        true
    }

    /// `PUT /connectors/{name}/pause`: tasks stop polling (a STOPPED connector's tasks start paused).
    ///
    /// # Errors
    /// 404: unknown connector; 500: the connectors file cannot be written.
    pub async fn pause_connector(&self, name: &str) -> Result<(), HerderError> {
        self.set_target(name, TargetState::Paused).await
    }

    /// `PUT /connectors/{name}/resume`: tasks poll again (a STOPPED or FAILED connector starts).
    ///
    /// # Errors
    /// 404: unknown connector; 500: the connectors file cannot be written.
    pub async fn resume_connector(&self, name: &str) -> Result<(), HerderError> {
        self.set_target(name, TargetState::Running).await
    }

    /// `PUT /connectors/{name}/stop`: its tasks stop (final commits included) and are removed; the
    /// configuration is kept.
    ///
    /// # Errors
    /// 404: unknown connector; 500: the connectors file cannot be written.
    pub async fn stop_connector(&self, name: &str) -> Result<(), HerderError> {
        self.set_target(name, TargetState::Stopped).await
    }

    pub(crate) async fn set_target(
        &self,
        name: &str,
        target: TargetState,
    ) -> Result<(), HerderError> {
        let mut state = self.lock().await;
        let entry = state
            .connectors
            .get(name)
            .ok_or_else(|| HerderError::not_found(format!("Unknown connector {name}")))?;
        let (config, origin) = (entry.config.clone(), entry.origin);
        self.persist_entry(name, &config, origin, target).await?;
        let entry = state
            .connectors
            .get_mut(name)
            .ok_or_else(|| not_found(name))?;
        entry.target = target;
        tracing::info!(connector = %name, "connector {name:?}: target state {target:?}");
        match target {
            TargetState::Stopped => {
                self.halt(name, entry).await;
                self.clear_task_configs(name, origin).await;
                entry.failure = None;
                self.publish(name, entry);
            }
            TargetState::Paused | TargetState::Running => {
                let paused = target == TargetState::Paused;
                if self.worker.set_paused(name, paused).is_err() {
                    // No tasks (stopped or failed): start them in the new state.
                    self.launch(name, entry).await;
                } else {
                    self.publish(name, entry);
                }
            }
        }
        Ok(())
    }

    /// `DELETE /connectors/{name}`: stops its tasks and forgets it; its offsets are kept (as in Kafka
    /// Connect), so a connector created again with the same name resumes from them.
    ///
    /// # Errors
    /// 404: unknown connector; 500: the connectors file cannot be written.
    pub async fn delete_connector(&self, name: &str) -> Result<(), HerderError> {
        let mut state = self.lock().await;
        if !state.connectors.contains_key(name) {
            return Err(not_found(name));
        }
        self.unpersist(name).await?;
        if let Some(mut entry) = state.connectors.remove(name) {
            self.halt(name, &mut entry).await;
        }
        self.worker.status_store().remove_connector(name);
        tracing::info!(connector = %name, "connector {name:?} deleted (its offsets are kept)");
        Ok(())
    }
}
