//! [`TaskSlots`] as the distributed herder's [`WorkerGroup`]: its blocking work (leaving the group)
//! runs on a blocking thread.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ferry_plugin::{GroupError, WorkerGroup};

use super::{SlotsError, TaskSlots};
use crate::retriable::is_retriable;

impl From<SlotsError> for GroupError {
    fn from(error: SlotsError) -> Self {
        let retriable = match &error {
            SlotsError::Kafka { source, .. } => is_retriable(source),
            SlotsError::LeaderTopic { source, .. } => source.retriable,
            // Refusals (a topic that cannot be created or grown) and an unfinished leave.
            SlotsError::Broker { .. } | SlotsError::Config(_) | SlotsError::Closed(_) => false,
        };
        GroupError::new(error.to_string(), retriable)
    }
}

#[async_trait]
impl WorkerGroup for TaskSlots {
    fn describe(&self) -> String {
        format!(
            "consumer groups {} (task slots) and {} (leader slot) on {}",
            self.config.group_id,
            super::topic::leader_group(&self.config.group_id),
            self.config.bootstrap_servers
        )
    }

    async fn add_connector(&self, connector: &str, slots: usize) -> Result<(), GroupError> {
        Ok(TaskSlots::add_connector(self, connector, slots).await?)
    }

    async fn remove_connector(&self, connector: &str) -> Result<(), GroupError> {
        Ok(TaskSlots::remove_connector(self, connector).await?)
    }

    async fn leader_url(&self) -> Result<Option<String>, GroupError> {
        Ok(TaskSlots::leader_url(self).await?)
    }

    async fn leave(&self, timeout: Duration) -> Result<(), GroupError> {
        let closer = Arc::clone(&self.closer);
        let group = self.config.group_id.clone();
        tokio::task::spawn_blocking(move || closer.close(timeout))
            .await
            .map_err(|e| {
                GroupError::new(
                    format!(
                        "task slots of group {group}: the thread leaving the group failed: {e}"
                    ),
                    false,
                )
            })??;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::store::ConnectStoreError;

    #[test]
    fn group_errors_keep_the_message_and_say_whether_to_retry() {
        let config: GroupError = SlotsError::Config("bad group.id".to_owned()).into();
        assert!(!config.retriable);
        assert!(
            config.message.contains("bad group.id"),
            "{}",
            config.message
        );
        let source =
            ConnectStoreError::new("kafka leader topic g-leader at b:9092", "timed out", true);
        let leader: GroupError = SlotsError::LeaderTopic {
            group: "g".to_owned(),
            source,
        }
        .into();
        assert!(leader.retriable);
        assert!(
            leader.message.contains("group g") && leader.message.contains("g-leader"),
            "{}",
            leader.message
        );
        let closed: GroupError = SlotsError::Closed("g".to_owned()).into();
        assert!(!closed.retriable);
    }

    #[test]
    fn debug_hides_client_setting_values() {
        let mut config = super::super::SlotsConfig::new("b:9092", "g", "http://h:8083");
        config
            .client_settings
            .push(("sasl.password".to_owned(), "hunter2".to_owned()));
        let text = format!("{config:?}");
        assert!(
            text.contains("sasl.password") && !text.contains("hunter2"),
            "{text}"
        );
        assert_eq!(config.worker_id, "h:8083");
    }
}
