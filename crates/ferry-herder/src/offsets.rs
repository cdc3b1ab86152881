//! KIP-875: reading, altering and resetting a connector's offsets.
//!
//! Reading works in any state. Altering and resetting need the connector STOPPED with no tasks (so no
//! task commits over the change). The given offsets are normalized by a JSON round trip (integers come
//! back as 64-bit, as a task reads them), handed to the connector's
//! [`alter_offsets`](ferry_api::SourceConnector::alter_offsets) hook — which may refuse them, and
//! then nothing is written — and written to the offset store in one batch (a `null` offset is a
//! tombstone). A connector resumed afterwards starts from the new offsets: its tasks read them at
//! start.
//!
//! The checks and writes are free functions over a store and the plugins, shared by the standalone
//! and the distributed herder (each checks STOPPED its own way).

use ferry_api::{Config, ConnectMap, SourceOffset, SourcePartition};
use ferry_offsets::{
    OffsetBackingStore, OffsetWrite, decode_key, decode_value, encode_key, encode_value,
};
use serde_json::value::RawValue;

use super::entities::{ConnectorOffset, ConnectorOffsets, Message};
use super::validate::Plugins;
use super::{HerderError, StandaloneHerder, State, TargetState, not_found};
use ferry_runtime::config::CONNECTOR_CLASS;

/// One entry of a `PATCH /connectors/{name}/offsets` body, as received.
#[derive(Debug, Clone)]
pub struct OffsetInput {
    /// The partition (a JSON object).
    pub partition: serde_json::Value,
    /// The offset (a JSON object), or `null` to remove the partition's offset.
    pub offset: serde_json::Value,
}

impl StandaloneHerder {
    /// `GET /connectors/{name}/offsets`: every partition's committed offset.
    ///
    /// # Errors
    /// 404: unknown connector; 500: the store cannot be read or holds undecodable offsets.
    pub async fn connector_offsets(&self, name: &str) -> Result<ConnectorOffsets, HerderError> {
        let state = self.lock().await;
        let Some(entry) = state.connectors.get(name) else {
            return Err(not_found(name));
        };
        let store = self.offset_store_for(&entry.config);
        read_offsets(store.as_ref(), name).await
    }

    /// `PATCH /connectors/{name}/offsets`: sets (or, for a `null` offset, removes) the offsets of the
    /// given partitions; other partitions keep theirs.
    ///
    /// # Errors
    /// 404: unknown connector; 400: not STOPPED, an entry is not a partition/offset map, or the
    /// connector refuses the offsets (nothing is written); 500: the store write failed.
    pub async fn alter_offsets(
        &self,
        name: &str,
        entries: Vec<OffsetInput>,
    ) -> Result<Message, HerderError> {
        let state = self.lock().await;
        let config = self.check_stopped(&state, name)?;
        let store = self.offset_store_for(config);
        alter_offsets(store.as_ref(), &self.plugins, name, config, &entries).await
    }

    /// `DELETE /connectors/{name}/offsets`: removes the offsets of every partition of the connector.
    ///
    /// # Errors
    /// 404: unknown connector; 400: not STOPPED or the connector refuses (nothing is written); 500: the
    /// store cannot be read or written.
    pub async fn reset_offsets(&self, name: &str) -> Result<Message, HerderError> {
        let state = self.lock().await;
        let config = self.check_stopped(&state, name)?;
        let store = self.offset_store_for(config);
        reset_offsets(store.as_ref(), &self.plugins, name, config).await
    }

    /// Where connector `config`'s offsets live ([`store_for`]).
    fn offset_store_for(&self, config: &Config) -> std::sync::Arc<dyn OffsetBackingStore> {
        store_for(&self.worker, &self.store, config)
    }

    /// The connector's configuration, if it is STOPPED with no task in the worker.
    fn check_stopped<'a>(&self, state: &'a State, name: &str) -> Result<&'a Config, HerderError> {
        let entry = state.connectors.get(name).ok_or_else(|| not_found(name))?;
        if entry.target != TargetState::Stopped || self.worker.task_statuses(name).is_some() {
            return Err(not_stopped(name));
        }
        Ok(&entry.config)
    }
}

/// Where connector `config`'s offsets live: the herder's `store`, or the connector's own offsets
/// topic over the worker's ([`crate::Worker::offset_store_for`]). Shared by both herders.
pub(crate) fn store_for(
    worker: &crate::Worker,
    store: &std::sync::Arc<dyn OffsetBackingStore>,
    config: &Config,
) -> std::sync::Arc<dyn OffsetBackingStore> {
    if config
        .get(ferry_runtime::OFFSETS_STORAGE_TOPIC)
        .is_some_and(|t| !t.trim().is_empty())
    {
        worker.offset_store_for(config)
    } else {
        store.clone()
    }
}

/// Kafka Connect's answer to an offsets change of a connector that is not STOPPED (or still has tasks).
pub(crate) fn not_stopped(name: &str) -> HerderError {
    HerderError::bad_request(format!(
        "Connectors must be in the STOPPED state before their offsets can be modified. This can be done \
         for the specified connector by issuing a 'PUT' request to the '/connectors/{name}/stop' endpoint"
    ))
}

/// Every partition's committed offset of connector `name`, as `GET /connectors/{name}/offsets` answers.
///
/// # Errors
/// 500: the store cannot be read or holds undecodable offsets.
pub(crate) async fn read_offsets(
    store: &dyn OffsetBackingStore,
    name: &str,
) -> Result<ConnectorOffsets, HerderError> {
    let stored = read_stored(store, name).await?;
    let mut offsets = Vec::with_capacity(stored.len());
    for (key, value) in stored {
        let undecodable = |e: ferry_offsets::CodecError| {
            HerderError::internal(format!(
                "Failed to read the offsets of connector {name}: {e}"
            ))
        };
        let partition = decode_key(&key).map_err(undecodable)?.partition;
        let offset = decode_value(&value).map_err(undecodable)?;
        offsets.push(ConnectorOffset {
            partition: raw(partition.as_ref().map(encode_value))?,
            offset: raw(Some(encode_value(&offset)))?,
        });
    }
    Ok(ConnectorOffsets { offsets })
}

/// Alters the offsets of a connector whose caller checked it is STOPPED: normalizes `entries`, asks
/// the connector's `alter_offsets` hook, writes them in one batch.
///
/// # Errors
/// 400: no entries, an entry is not a partition/offset map, or the connector refuses; 500: the store
/// write failed. Nothing is written on error.
pub(crate) async fn alter_offsets(
    store: &dyn OffsetBackingStore,
    plugins: &Plugins,
    name: &str,
    config: &Config,
    entries: &[OffsetInput],
) -> Result<Message, HerderError> {
    if entries.is_empty() {
        return Err(HerderError::bad_request(
            "Partitions / offsets need to be provided for an alter offsets request".to_owned(),
        ));
    }
    let normalized = entries
        .iter()
        .enumerate()
        .map(|(i, entry)| normalize(i, entry))
        .collect::<Result<Vec<_>, _>>()?;
    let confirmed = call_hook(plugins, name, config, &normalized)?;
    let batch: Vec<OffsetWrite> = normalized
        .iter()
        .map(|(partition, offset)| OffsetWrite {
            key: encode_key(name, Some(partition)),
            value: offset.as_ref().map(encode_value),
        })
        .collect();
    write(store, name, &batch).await?;
    tracing::info!(connector = %name, "offsets of {} partition(s) of connector {name:?} altered over REST", batch.len());
    Ok(message(confirmed, "altered"))
}

/// Removes every offset of a connector whose caller checked it is STOPPED.
///
/// # Errors
/// 400: the connector refuses (nothing is written); 500: the store cannot be read or written.
pub(crate) async fn reset_offsets(
    store: &dyn OffsetBackingStore,
    plugins: &Plugins,
    name: &str,
    config: &Config,
) -> Result<Message, HerderError> {
    let stored = read_stored(store, name).await?;
    // The connector sees the partitions it can be shown; every stored key gets its tombstone.
    let resets: Vec<(SourcePartition, Option<SourceOffset>)> = stored
        .iter()
        .filter_map(|(key, _)| decode_key(key).ok()?.partition)
        .map(|partition| (partition, None))
        .collect();
    let confirmed = call_hook(plugins, name, config, &resets)?;
    let batch: Vec<OffsetWrite> = stored
        .into_iter()
        .map(|(key, _)| OffsetWrite { key, value: None })
        .collect();
    write(store, name, &batch).await?;
    tracing::info!(connector = %name, "offsets of {} partition(s) of connector {name:?} reset over REST", batch.len());
    Ok(message(confirmed, "reset"))
}

async fn read_stored(
    store: &dyn OffsetBackingStore,
    name: &str,
) -> Result<Vec<ferry_offsets::StoredOffset>, HerderError> {
    store.connector_offsets(name).await.map_err(|e| {
        HerderError::internal(format!(
            "Failed to read the offsets of connector {name}: {e}"
        ))
        .with_source(e)
    })
}

fn call_hook(
    plugins: &Plugins,
    name: &str,
    config: &Config,
    offsets: &[(SourcePartition, Option<SourceOffset>)],
) -> Result<bool, HerderError> {
    let class = config.get(CONNECTOR_CLASS).map_or("", |c| c.trim());
    let connector = plugins.resolve(class).ok_or_else(|| {
        HerderError::internal(format!(
            "Failed to modify offsets for source connector {name}: its connector class {class:?} is unknown"
        ))
    })?;
    connector
        .alter_offsets(config, offsets)
        .map_err(|e| HerderError::bad_request(chain(&e)))
}

async fn write(
    store: &dyn OffsetBackingStore,
    name: &str,
    batch: &[OffsetWrite],
) -> Result<(), HerderError> {
    if batch.is_empty() {
        return Ok(());
    }
    store.set(batch).await.map_err(|e| {
        HerderError::internal(format!(
            "Failed to modify offsets for source connector {name}: {e}"
        ))
        .with_source(e)
    })
}

/// An entry's partition and offset as a task would read them back from the store.
fn normalize(
    index: usize,
    entry: &OffsetInput,
) -> Result<(SourcePartition, Option<SourceOffset>), HerderError> {
    let map = |what: &str, value: &serde_json::Value| -> Result<ConnectMap, HerderError> {
        if !value.is_object() {
            return Err(HerderError::bad_request(format!(
                "offsets[{index}].{what} must be a JSON object of primitive values, not {value}"
            )));
        }
        decode_value(value.to_string().as_bytes()).map_err(|e| {
            HerderError::bad_request(format!(
                "offsets[{index}].{what} is not a valid Kafka Connect {what}: {}",
                e.reason()
            ))
        })
    };
    let partition = map("partition", &entry.partition)?;
    let offset = match &entry.offset {
        serde_json::Value::Null => None,
        value => Some(map("offset", value)?),
    };
    Ok((partition, offset))
}

fn raw(bytes: Option<Vec<u8>>) -> Result<Box<RawValue>, HerderError> {
    let text = bytes.map_or_else(
        || "null".to_owned(),
        |b| String::from_utf8_lossy(&b).into_owned(),
    );
    RawValue::from_string(text)
        .map_err(|e| HerderError::internal(format!("cannot encode an offset as JSON: {e}")))
}

/// Kafka Connect's answer to an offsets change the connector confirmed (`true`) or did not.
fn message(confirmed: bool, done: &str) -> Message {
    let message = if confirmed {
        format!("The offsets for this connector have been {done} successfully")
    } else {
        format!(
            "The Connect framework-managed offsets for this connector have been {done} successfully. However, if \
             this connector manages offsets externally, they will need to be manually {done} in the system that \
             the connector uses."
        )
    };
    Message { message }
}

/// An error with its causes.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
