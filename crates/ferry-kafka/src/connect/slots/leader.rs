//! The leader topic `<group>-leader` (one partition, compacted): the owner of its partition — the
//! group's leader slot — publishes its REST URL there as the record `leader`, and any worker reads the
//! topic to its end to learn where to forward REST writes. The record is written by the new leader
//! after the group gave it the slot (so after the old leader revoked it), which makes the newest record
//! the current leader's, except while a rebalance is under way.

use std::sync::{Arc, Mutex, PoisonError};

use crate::admin::TopicKind;
use crate::connect::store::{ConnectStoreError, InternalTopic, InternalTopicConfig};

use super::SlotsConfig;

/// The record key (one key: compaction keeps only the newest leader).
const KEY: &str = "leader";

/// The newest leader record read so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LeaderRecord {
    pub(super) url: String,
    pub(super) worker_id: String,
}

/// The leader topic's clients, and this worker's own record.
pub(super) struct LeaderTopic {
    topic: InternalTopic,
    newest: Arc<Mutex<Option<LeaderRecord>>>,
    /// This worker's record value: `{"url":…,"worker_id":…}`.
    own: Vec<u8>,
}

fn apply(newest: &mut Option<LeaderRecord>, key: &str, value: Option<&[u8]>, offset: i64) {
    if key != KEY {
        return;
    }
    let Some(value) = value else {
        *newest = None;
        return;
    };
    match decode(value) {
        Ok(record) => *newest = Some(record),
        Err(e) => tracing::warn!(offset, "skipping a leader topic record: {e}"),
    }
}

pub(super) fn encode(url: &str, worker_id: &str) -> Vec<u8> {
    serde_json::json!({ "url": url, "worker_id": worker_id })
        .to_string()
        .into_bytes()
}

/// A leader topic record that is not one.
#[derive(Debug, thiserror::Error)]
pub(super) enum LeaderRecordError {
    #[error("the value is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("the value has no string field {field:?}: {json}")]
    NoField {
        field: &'static str,
        json: serde_json::Value,
    },
}

pub(super) fn decode(value: &[u8]) -> Result<LeaderRecord, LeaderRecordError> {
    let json: serde_json::Value =
        serde_json::from_slice(value).map_err(LeaderRecordError::NotJson)?;
    let field = |name: &'static str| {
        json.get(name)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| LeaderRecordError::NoField {
                field: name,
                json: json.clone(),
            })
    };
    Ok(LeaderRecord {
        url: field("url")?,
        worker_id: field("worker_id")?,
    })
}

impl LeaderTopic {
    /// Creates the topic (1 partition, compacted) when missing, refuses it when it is not compacted
    /// or has more partitions, and assigns a (non-group) reader to it.
    pub(super) async fn open(config: &SlotsConfig, topic: &str) -> Result<Self, ConnectStoreError> {
        let internal = InternalTopicConfig {
            bootstrap_servers: config.bootstrap_servers.clone(),
            topic: topic.to_owned(),
            partitions: 1,
            replication_factor: config.replication_factor,
            client_overrides: config.client_settings.clone(),
            timeout: config.admin_timeout,
        };
        Ok(Self {
            topic: InternalTopic::open(TopicKind::Leader, &internal, Some(1)).await?,
            newest: Arc::new(Mutex::new(None)),
            own: encode(&config.advertised_url, &config.worker_id),
        })
    }

    /// `kafka leader topic T at B`.
    pub(super) fn describe(&self) -> &str {
        &self.topic.describe
    }

    /// Writes this worker's record and returns once the broker acknowledged it.
    pub(super) async fn publish(&self) -> Result<(), ConnectStoreError> {
        self.topic
            .send(&[(KEY.to_owned(), Some(self.own.clone()))])
            .await
    }

    /// Reads the topic to its end; the newest leader record, if any.
    pub(super) async fn newest(&self) -> Result<Option<LeaderRecord>, ConnectStoreError> {
        self.topic
            .read_to_end(Arc::clone(&self.newest), apply)
            .await?;
        Ok(self
            .newest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_the_newest_wins() {
        let value = encode("http://h:8083", "h:8083");
        assert_eq!(
            String::from_utf8(value.clone()).unwrap(),
            r#"{"url":"http://h:8083","worker_id":"h:8083"}"#
        );
        let mut newest = None;
        apply(&mut newest, KEY, Some(&value), 0);
        apply(&mut newest, "other", Some(b"{}"), 1);
        apply(&mut newest, KEY, Some(b"not json"), 2);
        assert_eq!(
            newest.as_ref().map(|r| r.worker_id.as_str()),
            Some("h:8083")
        );
        apply(&mut newest, KEY, Some(&encode("http://k:1", "k:1")), 3);
        assert_eq!(newest.as_ref().map(|r| r.url.as_str()), Some("http://k:1"));
        apply(&mut newest, KEY, None, 4);
        assert_eq!(newest, None);
    }
}
