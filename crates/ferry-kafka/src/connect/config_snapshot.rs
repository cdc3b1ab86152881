//! The config topic folded in topic order, with `KafkaConfigBackingStore`'s rules.

use std::collections::{BTreeMap, BTreeSet};

use super::RecordError;
use super::config_records::{ConfigRecord, RestartRequest, TargetState};

type Properties = BTreeMap<String, String>;

/// What a config-topic reader knows after applying records in topic order (Kafka's
/// `ClusterConfigState`).
///
/// Rules, from `KafkaConfigBackingStore`'s consume callback:
/// - a task config is buffered until a `commit-<c>` follows; the commit applies the buffered configs
///   only if they include tasks `0..N-1` (after compaction they may not: the connector is then
///   *inconsistent*, keeps its previously applied tasks hidden, and waits for a complete commit);
///   the buffer is cleared either way;
/// - a commit for a connector without config (deleted, then compacted) drops that connector's state;
/// - a connector tombstone removes its config, tasks and buffered task configs;
/// - a connector without a target state is STARTED; a target-state tombstone resets an existing
///   connector to STARTED.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigSnapshot {
    connectors: BTreeMap<String, Properties>,
    target_states: BTreeMap<String, TargetState>,
    task_configs: BTreeMap<(String, i32), Properties>,
    task_counts: BTreeMap<String, i32>,
    deferred: BTreeMap<String, BTreeMap<i32, Properties>>,
    inconsistent: BTreeSet<String>,
    task_count_records: BTreeMap<String, i32>,
    pending_fencing: BTreeSet<String>,
}

impl ConfigSnapshot {
    /// An empty snapshot (an empty topic).
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes and applies one record; a record that cannot be decoded changes nothing and is
    /// returned as the error (Kafka logs and skips it). A restart request is returned to act on.
    pub fn apply_raw(
        &mut self,
        key: &str,
        value: Option<&[u8]>,
    ) -> Result<Option<RestartRequest>, RecordError> {
        let record = ConfigRecord::decode(key, value)?;
        Ok(self.apply(record))
    }

    /// Applies one decoded record; returns the restart request it carries, if any.
    pub fn apply(&mut self, record: ConfigRecord) -> Option<RestartRequest> {
        match record {
            ConfigRecord::Connector(c, None) => self.remove_connector(&c),
            ConfigRecord::Connector(c, Some(props)) => {
                self.target_states
                    .entry(c.clone())
                    .or_insert(TargetState::Started);
                self.connectors.insert(c, props);
            }
            // Kafka ignores a null task config.
            ConfigRecord::Task(_, _, None) => {}
            ConfigRecord::Task(c, task, Some(props)) => {
                self.deferred.entry(c).or_default().insert(task, props);
            }
            ConfigRecord::Commit(c, count) => self.commit(c, count),
            ConfigRecord::TargetState(c, None) => {
                self.target_states.remove(&c);
                if self.connectors.contains_key(&c) {
                    self.target_states.insert(c, TargetState::Started);
                }
            }
            ConfigRecord::TargetState(c, Some(state)) => {
                self.target_states.insert(c, state);
            }
            ConfigRecord::TaskCount(_, None) => {}
            ConfigRecord::TaskCount(c, Some(count)) => {
                self.pending_fencing.remove(&c);
                self.task_count_records.insert(c, count);
            }
            ConfigRecord::Restart(request) => return request,
            ConfigRecord::Other(_) => {}
        }
        None
    }

    fn remove_connector(&mut self, connector: &str) {
        self.connectors.remove(connector);
        self.task_counts.remove(connector);
        self.task_configs.retain(|(c, _), _| c != connector);
        self.deferred.remove(connector);
    }

    fn commit(&mut self, connector: String, count: Option<i32>) {
        if !self.connectors.contains_key(&connector) {
            // Deleted before these task configs, and compaction removed both config and tombstone.
            self.remove_connector(&connector);
            return;
        }
        let Some(count) = count else {
            return; // a commit without a count: Kafka ignores it and keeps the buffer
        };
        let deferred = self.deferred.remove(&connector).unwrap_or_default();
        // Tasks 0..count must all be buffered; extra, higher ones may remain from compaction.
        let complete = (0..count).all(|t| deferred.contains_key(&t));
        if complete {
            for (task, props) in deferred {
                self.task_configs.insert((connector.clone(), task), props);
            }
            self.inconsistent.remove(&connector);
        } else {
            self.inconsistent.insert(connector.clone());
        }
        self.task_counts.insert(connector.clone(), count);
        // New task configs need a round of zombie fencing before tasks start (KIP-618).
        self.pending_fencing.insert(connector);
    }

    /// The connectors with a configuration, in name order.
    pub fn connectors(&self) -> impl Iterator<Item = &str> {
        self.connectors.keys().map(String::as_str)
    }

    /// A connector's configuration.
    pub fn connector_config(&self, connector: &str) -> Option<&Properties> {
        self.connectors.get(connector)
    }

    /// A connector's target state (`None` for an unknown connector).
    pub fn target_state(&self, connector: &str) -> Option<TargetState> {
        self.target_states.get(connector).copied()
    }

    /// The task indexes `0..N` of the last complete commit; none while inconsistent (as Kafka's
    /// `ClusterConfigState.tasks`).
    pub fn tasks(&self, connector: &str) -> Vec<i32> {
        if self.inconsistent.contains(connector) {
            return Vec::new();
        }
        self.task_counts
            .get(connector)
            .map_or_else(Vec::new, |&n| (0..n).collect())
    }

    /// The task count of the last complete commit; `None` before any commit, or while inconsistent
    /// (a commit of 0 tasks is `Some(0)`, unlike [`tasks`](Self::tasks)' empty list).
    pub fn committed_task_count(&self, connector: &str) -> Option<i32> {
        if self.inconsistent.contains(connector) {
            return None;
        }
        self.task_counts.get(connector).copied()
    }

    /// A task's applied configuration.
    pub fn task_config(&self, connector: &str, task: i32) -> Option<&Properties> {
        self.task_configs.get(&(connector.to_owned(), task))
    }

    /// Connectors whose last commit did not carry all its task configs (compaction, or a leader that
    /// died mid-write): their tasks must be regenerated and committed again.
    pub fn inconsistent(&self) -> impl Iterator<Item = &str> {
        self.inconsistent.iter().map(String::as_str)
    }

    /// The last `tasks-fencing-<c>` count (KIP-618).
    pub fn task_count_record(&self, connector: &str) -> Option<i32> {
        self.task_count_records.get(connector).copied()
    }

    /// Whether task configs were committed after the last `tasks-fencing-<c>` record.
    pub fn pending_fencing(&self, connector: &str) -> bool {
        self.pending_fencing.contains(connector)
    }
}
