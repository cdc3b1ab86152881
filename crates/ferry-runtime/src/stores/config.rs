//! The config store: Kafka Connect's `ConfigBackingStore`, cut to what standalone needs and shaped
//! for the config topic (`connector-<c>`, `task-<c>-<n>` + `commit-<c>`, `target-state-<c>`). The
//! contract lives in `ferry-plugin` (so backend crates implement it) and is re-exported here; the fold
//! the runtime's own stores share stays here.

use ferry_api::Config;

pub use ferry_plugin::{ConfigBackingStore, ConfigSnapshot, ConfigStoreError, ConnectorEntry};

use crate::state::TargetState;

/// Applies one change to `snapshot`; `Ok(false)` when it changes nothing.
pub(super) fn apply(
    snapshot: &mut ConfigSnapshot,
    change: Change<'_>,
) -> Result<bool, ConfigStoreError> {
    let changed = match change {
        Change::Connector(name, config, target) => {
            let entry = ConnectorEntry {
                config: config.clone(),
                target,
                tasks: None,
            };
            match snapshot.connectors.get_mut(name) {
                Some(old) if old.config == entry.config && old.target == target => false,
                Some(old) => {
                    // A new configuration makes the old task configurations stale.
                    if old.config != entry.config {
                        old.tasks = None;
                    }
                    old.config = entry.config;
                    old.target = target;
                    true
                }
                None => {
                    snapshot.connectors.insert(name.to_owned(), entry);
                    true
                }
            }
        }
        Change::Remove(name) => snapshot.connectors.remove(name).is_some(),
        Change::Target(name, target) => {
            let entry = snapshot.connectors.get_mut(name).ok_or_else(|| {
                ConfigStoreError::new(format!("connector {name:?} is not stored"))
            })?;
            let changed = entry.target != target;
            entry.target = target;
            changed
        }
        Change::Tasks(name, tasks) => {
            let entry = snapshot.connectors.get_mut(name).ok_or_else(|| {
                ConfigStoreError::new(format!("connector {name:?} is not stored"))
            })?;
            let changed = entry.tasks.as_deref() != Some(tasks);
            entry.tasks = Some(tasks.to_vec());
            changed
        }
    };
    if changed {
        snapshot.version += 1;
    }
    Ok(changed)
}

/// One change to a config store.
#[derive(Clone, Copy)]
pub(super) enum Change<'a> {
    Connector(&'a str, &'a Config, TargetState),
    Remove(&'a str),
    Target(&'a str, TargetState),
    Tasks(&'a str, &'a [Config]),
}
