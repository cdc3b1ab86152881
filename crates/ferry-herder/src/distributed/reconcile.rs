//! The background loop: makes this worker match the config store's latest snapshot — the group's
//! slots, the connector instances of the slots 0 held here, and the tasks of the slots held here.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_api::{Config, SourceConnector};
use ferry_plugin::ConfigSnapshot;
use tokio::sync::watch;

use super::ownership::Started;
use super::{DistributedHerder, Sizes, tasks_max};
use crate::error::ConnectorFailure;
use crate::{HerderError, validate};
use ferry_runtime::TaskSpec;
use ferry_runtime::config::ErrorTolerance;
use ferry_runtime::stores::{State, StatusEntry};
use ferry_runtime::{TargetState, TaskId};

/// What became of writing a connector's new task configurations.
enum TaskConfigsWrite {
    /// Not written: the membership lease is not valid; tried again soon.
    Held,
    /// Not written: another worker owns the connector now.
    Fenced,
    /// Written.
    Written,
    /// Not written; the connector fails with this reason.
    Failed(ConnectorFailure),
}

/// Why a connector's task configuration writer is not available here (yet); tried again soon.
#[derive(Debug, thiserror::Error)]
enum ConfigWriterError {
    /// Another worker opened its own writer: it owns the connector now.
    #[error(
        "its task configuration writer was fenced by another worker, which owns the connector now"
    )]
    Fenced,
    /// The membership lease is not valid: a zombie must not fence the live owner.
    #[error(
        "the group coordinator has not confirmed this worker for {age:.1?}; its task \
         configuration writer is opened once it does"
    )]
    Unconfirmed {
        /// How long ago the coordinator last confirmed this worker.
        age: Duration,
    },
    /// The store could not open it.
    #[error("its task configuration writer ({id}) could not be opened: {source}")]
    Open {
        /// Its `transactional.id`: `<group.id>-<connector>-configs`.
        id: String,
        /// Why it could not be opened.
        source: ferry_runtime::stores::ConfigStoreError,
    },
}

/// How often the loop takes a snapshot even when nothing woke it: a missed update or a status
/// another worker overwrote is repaired within this time.
const RESYNC: Duration = Duration::from_secs(5);

/// First and largest delay between retries of a failed group call.
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(10);

/// One connector instance run here (this worker holds its slot 0).
pub(super) struct Instance {
    /// The configuration it was made from.
    config: Config,
    /// The task configurations it made, or why it failed.
    generated: Result<Vec<Config>, ConnectorFailure>,
}

/// What the loop applied: the connector instances run here.
#[derive(Default)]
pub(super) struct Applied {
    pub(super) instances: BTreeMap<String, Instance>,
    /// Connectors whose tasks stopped here since the last pass: if they were deleted, their statuses
    /// (which the stopping tasks wrote last) are removed, as Kafka Connect removes them.
    pub(super) retired: BTreeSet<String>,
}

/// The connectors registered with the group, and the retry schedule of failed calls.
#[derive(Default)]
pub(super) struct GroupSync {
    registered: Sizes,
    backoff: Option<Duration>,
    retry_at: Option<Instant>,
}

/// A connector's task-configuration writer, as held by its owner.
pub(super) enum ConfigWriter {
    /// Open: the store fences it when the connector's next owner opens its own.
    Open(Arc<dyn ferry_plugin::TaskConfigWriter>),
    /// Fenced by a newer owner: nothing is written from here until the slot is held anew.
    Fenced,
}

/// How soon task configurations held back by an invalid membership lease are tried again.
const FENCE_RECHECK: std::time::Duration = std::time::Duration::from_millis(250);

impl DistributedHerder {
    /// The loop: one pass at every wake-up, until `stop`.
    pub(super) async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut updates = self.config_store.updates();
        loop {
            if *stop.borrow_and_update() {
                return;
            }
            let retry_at = self.pass().await;
            let wait = retry_at.map_or(RESYNC, |at| at.saturating_duration_since(Instant::now()));
            let update = async {
                match updates.as_mut() {
                    Some(rx) => rx.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = stop.changed() => return,
                () = self.kick.notified() => {}
                alive = update => if !alive { updates = None },
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// One reconciliation; returns when the next one is due before the periodic one: a failed group
    /// call to retry, or a held-back slot to start.
    pub(super) async fn pass(&self) -> Option<Instant> {
        let retry_at = self.reconcile().await;
        let release = self.owned().next_release(Instant::now());
        match (retry_at, release) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// One reconciliation; returns when a failed group call should be retried.
    async fn reconcile(&self) -> Option<Instant> {
        let snapshot = match self.config_store.snapshot().await {
            Ok(snapshot) => snapshot,
            Err(e) => {
                tracing::error!(
                    "cannot read {}: {e}; retrying in {} s",
                    self.config_store.describe(),
                    RESYNC.as_secs()
                );
                return None;
            }
        };
        let retry_at = self.sync_group(&snapshot).await;
        let mut applied = self.applied.lock().await;
        let (wrote, held) = self.sync_connectors(&snapshot, &mut applied).await;
        let retry_at = match (retry_at, held) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let snapshot = if wrote {
            match self.config_store.snapshot().await {
                Ok(snapshot) => snapshot,
                Err(_) => return retry_at,
            }
        } else {
            snapshot
        };
        self.sync_tasks(&snapshot, &mut applied).await;
        for connector in std::mem::take(&mut applied.retired) {
            if !snapshot.connectors.contains_key(&connector) {
                self.statuses.remove_connector(&connector);
            }
        }
        retry_at
    }

    /// Registers the snapshot's connectors with the group (by `tasks.max`) and drops removed ones.
    async fn sync_group(&self, snapshot: &ConfigSnapshot) -> Option<Instant> {
        let group = self.group.get()?;
        let mut sync = self.group_sync.lock().await;
        if let Some(at) = sync.retry_at
            && Instant::now() < at
        {
            return Some(at);
        }
        let wanted: Sizes = snapshot
            .connectors
            .iter()
            .map(|(name, entry)| (name.clone(), tasks_max(&entry.config)))
            .collect();
        let mut failed = false;
        for (name, slots) in &wanted {
            if sync.registered.get(name) == Some(slots) {
                continue;
            }
            match group.add_connector(name, *slots).await {
                Ok(()) => {
                    tracing::info!(connector = %name, "connector {name:?}: {slots} task slot(s) in {}", group.describe());
                    sync.registered.insert(name.clone(), *slots);
                }
                Err(e) => {
                    tracing::warn!(connector = %name, "adding connector {name:?}'s {slots} slot(s) to {} failed: {e}; retrying", group.describe());
                    failed = true;
                }
            }
        }
        let removed: Vec<String> = sync
            .registered
            .keys()
            .filter(|name| !wanted.contains_key(*name))
            .cloned()
            .collect();
        for name in removed {
            match group.remove_connector(&name).await {
                Ok(()) => {
                    tracing::info!(connector = %name, "connector {name:?} removed from {}", group.describe());
                    sync.registered.remove(&name);
                }
                Err(e) => {
                    tracing::warn!(connector = %name, "removing connector {name:?} from {} failed: {e}; retrying", group.describe());
                    failed = true;
                }
            }
        }
        if failed {
            let delay = sync.backoff.map_or(RETRY_FIRST, |d| (d * 2).min(RETRY_MAX));
            sync.backoff = Some(delay);
            sync.retry_at = Some(Instant::now() + delay);
        } else {
            sync.backoff = None;
            sync.retry_at = None;
        }
        sync.retry_at
    }

    /// Runs the connector instances of the slots 0 held here: task configurations written when they
    /// changed (empty when STOPPED), the connector's status. Returns whether it wrote to the store,
    /// and when to try again writes held back because the membership lease is not valid.
    async fn sync_connectors(
        &self,
        snapshot: &ConfigSnapshot,
        applied: &mut Applied,
    ) -> (bool, Option<Instant>) {
        let mine = self.owned().connectors(Instant::now());
        let mut held = None;
        self.config_writers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|name, _| mine.contains(name));
        applied
            .instances
            .retain(|name, _| mine.contains(name) && snapshot.connectors.contains_key(name));
        let mut wrote = false;
        for name in mine {
            let Some(entry) = snapshot.connectors.get(&name) else {
                continue;
            };
            let stale = applied
                .instances
                .get(&name)
                .is_none_or(|instance| instance.config != entry.config);
            if stale {
                let instance = self.make_instance(&name, &entry.config);
                applied.instances.insert(name.clone(), instance);
            }
            let Some(instance) = applied.instances.get(&name) else {
                continue;
            };
            // Opened as soon as the slot is held here, written or not: it fences the connector's
            // previous owner, should that one wake up.
            let writer = match self.config_writer(&name).await {
                Ok(writer) => writer,
                Err(reason) => {
                    tracing::warn!(connector = %name, "connector {name:?}: {reason}; retrying");
                    held = Some(Instant::now() + FENCE_RECHECK);
                    continue;
                }
            };
            let desired = match (&instance.generated, entry.target) {
                (_, TargetState::Stopped) => Some(Vec::new()),
                (Ok(generated), _) => Some(generated.clone()),
                // A failed connector keeps its committed tasks, as in Kafka Connect.
                (Err(_), _) => None,
            };
            let mut failure = instance.generated.as_ref().err().map(ToString::to_string);
            if let Some(desired) = desired
                && entry.tasks.as_ref() != Some(&desired)
            {
                let previous = entry.tasks.as_ref().map_or(0, Vec::len);
                match self
                    .write_task_configs(&name, &desired, previous, writer.as_deref())
                    .await
                {
                    TaskConfigsWrite::Held => {
                        held = Some(Instant::now() + FENCE_RECHECK);
                        continue;
                    }
                    TaskConfigsWrite::Fenced => continue,
                    TaskConfigsWrite::Written => wrote = true,
                    TaskConfigsWrite::Failed(reason) => failure = Some(reason.to_string()),
                }
            }
            self.publish_connector(&name, entry.target, failure);
        }
        (wrote, held)
    }

    /// Writes connector `name`'s new task configurations (it had `previous` tasks) through its fenced
    /// writer, or through the store when it has none; then fences the zombies of removed tasks and
    /// records the task count.
    async fn write_task_configs(
        &self,
        name: &str,
        desired: &[Config],
        previous: usize,
        writer: Option<&dyn ferry_plugin::TaskConfigWriter>,
    ) -> TaskConfigsWrite {
        // KAFKA-9184's rule for the connector's owner too: a worker the coordinator has not
        // confirmed lately (frozen, cut off) may have lost slot 0 to another worker, and must
        // not write task configurations made from its stale view.
        if let Some(lease) = self.worker.membership()
            && !lease.is_valid()
        {
            tracing::warn!(
                connector = %name,
                "connector {name:?}: its task configurations changed, but the group coordinator \
                 has not confirmed this worker for {:.1?}; they are written once it does",
                lease.age()
            );
            return TaskConfigsWrite::Held;
        }
        let written = match writer {
            Some(writer) => writer.put_task_configs(desired).await,
            None => self.config_store.put_task_configs(name, desired).await,
        };
        if let Err(e) = &written
            && e.fenced
        {
            // Another worker owns the connector now: it writes them.
            tracing::warn!(connector = %name, "connector {name:?}: {e}");
            self.config_writers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(name.to_owned(), ConfigWriter::Fenced);
            return TaskConfigsWrite::Fenced;
        }
        let written = written.map_err(|source| ConnectorFailure::WriteTaskConfigs {
            store: self.config_store.describe(),
            source,
        });
        if written.is_ok() {
            // Task numbers that are gone have no next instance to fence their zombies; then
            // (exactly once) the task count record says the zombies are fenced.
            self.fence_removed_tasks(name, desired.len()..previous);
            if desired.len() >= previous {
                self.record_task_count(name, desired.len(), writer).await;
            }
        }
        match written {
            Ok(()) => {
                tracing::info!(connector = %name, "connector {name:?}: {} task configuration(s) written", desired.len());
                TaskConfigsWrite::Written
            }
            Err(reason) => {
                tracing::error!(connector = %name, "connector {name:?}: {reason}");
                TaskConfigsWrite::Failed(reason)
            }
        }
    }

    /// The fenced writer of `connector`'s task configurations, opened on first use while slot 0 is
    /// held here (`<group.id>-<connector>-configs`, which fences the connector's previous owner);
    /// `Ok(None)` for a store that has none (its task configurations go through the store). Not
    /// opened while the membership lease is not valid: a zombie must not fence the live owner.
    async fn config_writer(
        &self,
        connector: &str,
    ) -> Result<Option<Arc<dyn ferry_plugin::TaskConfigWriter>>, ConfigWriterError> {
        let cached = self
            .config_writers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(connector)
            .map(|w| match w {
                ConfigWriter::Open(writer) => Ok(writer.clone()),
                ConfigWriter::Fenced => Err(()),
            });
        match cached {
            Some(Ok(writer)) => return Ok(Some(writer)),
            Some(Err(())) => return Err(ConfigWriterError::Fenced),
            None => {}
        }
        let Some(prefix) = self.worker.task_fencing() else {
            return Ok(None);
        };
        if let Some(lease) = self.worker.membership()
            && !lease.is_valid()
        {
            return Err(ConfigWriterError::Unconfirmed { age: lease.age() });
        }
        let id = format!("{prefix}-{connector}-configs");
        let writer = self
            .config_store
            .open_task_config_writer(connector, &id)
            .await
            .map_err(|source| ConfigWriterError::Open {
                id: id.clone(),
                source,
            })?;
        if let Some(writer) = &writer {
            tracing::info!(connector = %connector, "connector {connector:?}: task configurations written through transactional.id {id}");
            self.config_writers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(connector.to_owned(), ConfigWriter::Open(writer.clone()));
        }
        Ok(writer)
    }

    /// A connector instance made from `config`, with its task configurations (or its failure).
    fn make_instance(&self, name: &str, config: &Config) -> Instance {
        // Made from the resolved configuration; written with the placeholders put back.
        let generated = validate::check_resolved(&self.plugins, name, config)
            .map_err(ConnectorFailure::Invalid)
            .and_then(|(checked, connector, secrets)| {
                connector
                    .task_configs(&checked.props, checked.tasks_max.max(1))
                    .map(|tasks| self.plugins.unresolve(config, &checked.props, tasks))
                    .map_err(|e| ConnectorFailure::TaskConfigs {
                        reason: ferry_runtime::config::scrub(e.to_string(), &secrets),
                    })
            });
        self.worker.metrics().connector_startup(generated.is_ok());
        match &generated {
            Ok(tasks) => {
                tracing::info!(connector = %name, "connector {name:?} started here: {} task configuration(s)", tasks.len())
            }
            Err(reason) => {
                tracing::error!(connector = %name, "connector {name:?} failed: {reason}")
            }
        }
        Instance {
            config: config.clone(),
            generated,
        }
    }

    /// Writes the connector's status when the stored one says otherwise.
    fn publish_connector(&self, name: &str, target: TargetState, failure: Option<String>) {
        let state = match (&failure, target) {
            (Some(_), _) => State::Failed,
            (None, TargetState::Running) => State::Running,
            (None, TargetState::Paused) => State::Paused,
            (None, TargetState::Stopped) => State::Stopped,
        };
        let mut status = StatusEntry::new(state, self.settings.worker_id.as_str(), 0);
        status.trace = failure;
        if self.statuses.connector(name).as_ref() != Some(&status) {
            self.statuses.put_connector(name, status);
        }
    }

    /// Starts, restarts, pauses, resumes and stops the tasks of the slots held here to match the
    /// committed task configurations.
    async fn sync_tasks(&self, snapshot: &ConfigSnapshot, applied: &mut Applied) {
        let (desired, running) = {
            let owned = self.owned();
            let now = Instant::now();
            // A held-back slot runs nothing yet (it cannot have started anything either).
            let desired: BTreeMap<TaskId, Started> = owned
                .slots
                .keys()
                .filter(|id| owned.may_run(id, now))
                .filter_map(|id| desired_task(snapshot, id).map(|s| (id.clone(), s)))
                .collect();
            (desired, owned.running.clone())
        };
        for (id, started) in &running {
            match desired.get(id) {
                Some(want) if want.config == started.config => {
                    if want.target != started.target {
                        let _ = self.worker.set_target(id, want.target);
                        if let Some(s) = self.owned().running.get_mut(id) {
                            s.target = want.target;
                        }
                    }
                }
                _ => {
                    self.owned().running.remove(id);
                    tracing::info!(task = %id, "stopping task {id}: its configuration changed or it is no longer wanted");
                    let _ = self.worker.stop_task(id).await;
                    applied.retired.insert(id.connector.clone());
                }
            }
        }
        for (id, want) in desired {
            if self.owned().running.contains_key(&id) {
                continue;
            }
            self.start_task(snapshot, &id, want);
        }
    }

    /// Starts task `id` if its slot is still held here and not held back (a held-back task starts
    /// when the loop reaches it after the hold).
    pub(super) fn start_task(&self, snapshot: &ConfigSnapshot, id: &TaskId, want: Started) {
        let Some(entry) = snapshot.connectors.get(&id.connector) else {
            return;
        };
        let checked =
            validate::check(&self.plugins, &id.connector, &entry.config).and_then(|checked| {
                // The task runs with its stored configuration's placeholders resolved.
                self.plugins
                    .resolve_task(&want.config)
                    .map(|task| (checked, task))
                    .map_err(|e| HerderError::bad_request(e.to_string()).with_source(e))
            });
        let mut owned = self.owned();
        let Some(claim) = owned.slots.get(id) else {
            return;
        };
        if claim.held(Instant::now()) {
            tracing::info!(task = %id, "task {id} not started yet: its slot is held back");
            return;
        }
        let generation = claim.generation;
        let ((config, connector), (task_config, secrets)) = match checked {
            Ok(checked) => checked,
            Err(e) => {
                let status =
                    StatusEntry::new(State::Failed, self.settings.worker_id.as_str(), generation)
                        .with_trace(format!("the connector configuration is invalid: {e}"));
                self.statuses.put_task_safe(id, status);
                return;
            }
        };
        let spec = TaskSpec {
            tolerate_delivery_errors: config.errors_tolerance == ErrorTolerance::All,
            transforms: config.transforms.clone(),
            error_handling: config.error_handling,
            secrets,
            key_converter: config.key_converter,
            value_converter: config.value_converter,
            connector_config: config.props.clone(),
            generation,
        };
        // Under `owned`: a slot revoked or lost meanwhile is not started.
        match self.worker.start_task(
            id.clone(),
            &spec,
            task_config,
            connector.as_ref() as &dyn SourceConnector,
            want.target,
        ) {
            Ok(()) => {
                tracing::info!(task = %id, "task {id} started here ({:?})", want.target);
                owned.running.insert(id.clone(), want);
            }
            Err(e) => tracing::warn!(task = %id, "task {id} not started: {e}"),
        }
    }
}

/// What task `id` should run as, per the snapshot: its committed configuration, unless STOPPED.
pub(super) fn desired_task(snapshot: &ConfigSnapshot, id: &TaskId) -> Option<Started> {
    let entry = snapshot.connectors.get(&id.connector)?;
    if entry.target == TargetState::Stopped {
        return None;
    }
    let config = entry.tasks.as_ref()?.get(id.task)?.clone();
    Some(Started {
        config,
        target: entry.target,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_writer_errors_say_what_the_warning_said() {
        let age = Duration::from_millis(12_345);
        assert_eq!(
            ConfigWriterError::Unconfirmed { age }.to_string(),
            format!(
                "the group coordinator has not confirmed this worker for {age:.1?}; its task \
                 configuration writer is opened once it does"
            )
        );
        assert_eq!(
            ConfigWriterError::Fenced.to_string(),
            "its task configuration writer was fenced by another worker, which owns the connector now"
        );
        let open = ConfigWriterError::Open {
            id: "g-c-configs".to_owned(),
            source: ferry_runtime::stores::ConfigStoreError::new("brokers unreachable"),
        };
        assert_eq!(
            open.to_string(),
            "its task configuration writer (g-c-configs) could not be opened: brokers unreachable"
        );
    }
}
