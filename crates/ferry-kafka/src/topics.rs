//! Creating a connector's topics before its first record goes to them (Kafka Connect's KIP-158): a
//! topic the sink has not seen is looked up; a missing one is created with its group's settings
//! ([`TopicCreation`]); existing topics are left alone. The answer is remembered per topic.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ferry_plugin::sink::{SinkError, SinkErrorKind};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::error::RDKafkaErrorCode;

use crate::admin::{TopicState, await_topic, topic_state};
use crate::client::{StoreConsumer, StoreContext, is_retriable_code};
use crate::connector_keys::TopicCreation;

/// Timeout of the metadata lookups and admin calls (Kafka's `default.api.timeout.ms`).
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The most topics remembered as present; past it the set starts over (a topic is then looked up
/// again, which is harmless), so a connector writing to ever new topics cannot grow it without bound.
const MAX_KNOWN_TOPICS: usize = 100_000;

/// Worker-level client settings the admin and lookup clients take from the producer's settings (so
/// that they authenticate as the producer does).
const CLIENT_PREFIXES: &[&str] = &["security.", "sasl.", "ssl."];

/// Creates a connector's missing topics. Shared by the connector's tasks.
pub(crate) struct TopicCreator {
    rules: TopicCreation,
    admin: AdminClient<StoreContext>,
    /// Looks topics up without creating them (a consumer does not ask the broker to auto-create).
    lookup: Arc<StoreConsumer>,
    known: Mutex<KnownTopics>,
    describe: String,
}

/// Topics known to exist, at most `limit`; past it the set starts over (see [`MAX_KNOWN_TOPICS`]).
#[derive(Debug)]
struct KnownTopics {
    topics: HashSet<String>,
    limit: usize,
}

impl KnownTopics {
    fn new(limit: usize) -> Self {
        Self {
            topics: HashSet::new(),
            limit,
        }
    }

    fn contains(&self, topic: &str) -> bool {
        self.topics.contains(topic)
    }

    fn insert(&mut self, topic: &str) {
        if self.topics.contains(topic) {
            // Two tasks found the same topic at once.
            return;
        }
        if self.topics.len() >= self.limit {
            self.topics.clear();
        }
        self.topics.insert(topic.to_owned());
    }
}

impl TopicCreator {
    /// The creator of connector `connector`'s topics with `rules`, its clients made from the
    /// producer's `settings` (bootstrap servers and security settings only).
    pub(crate) fn new(
        connector: &str,
        rules: TopicCreation,
        bootstrap_servers: &str,
        settings: &[(String, String)],
        sink: &str,
    ) -> Result<Self, SinkError> {
        let describe = format!("{sink} (topic creation for connector {connector})");
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", bootstrap_servers);
        for (key, value) in settings
            .iter()
            .filter(|(k, _)| CLIENT_PREFIXES.iter().any(|p| k.starts_with(p)))
        {
            config.set(key, value);
        }
        let context = || StoreContext {
            store: describe.clone(),
        };
        let fail = |what: &str, e: rdkafka::error::KafkaError| {
            SinkError::new(
                describe.as_str(),
                SinkErrorKind::Fatal,
                format!("cannot create the {what} that creates the connector's topics: {e}"),
            )
            .with_source(e)
        };
        let admin = config
            .create_with_context(context())
            .map_err(|e| fail("admin client", e))?;
        let lookup = config
            .clone()
            .set("allow.auto.create.topics", "false")
            .create_with_context(context())
            .map_err(|e| fail("metadata client", e))?;
        Ok(Self {
            rules,
            admin,
            lookup: Arc::new(lookup),
            known: Mutex::new(KnownTopics::new(MAX_KNOWN_TOPICS)),
            describe,
        })
    }

    /// Makes sure `topic` exists: known, found, or created with its group's settings.
    ///
    /// # Errors
    /// The lookup or the creation failed (retriable when the broker's answer is).
    pub(crate) async fn ensure(&self, topic: &str) -> Result<(), SinkError> {
        if self.is_known(topic) {
            return Ok(());
        }
        let state = self.state(topic).await?;
        if matches!(state, TopicState::Missing) {
            self.create(topic).await?;
        }
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(topic);
        Ok(())
    }

    pub(crate) fn is_known(&self, topic: &str) -> bool {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(topic)
    }

    /// The topic's metadata, looked up on a blocking thread.
    async fn state(&self, topic: &str) -> Result<TopicState, SinkError> {
        let (lookup, name, describe) = (
            Arc::clone(&self.lookup),
            topic.to_owned(),
            self.describe.clone(),
        );
        tokio::task::spawn_blocking(move || topic_state(&lookup, &name, ADMIN_TIMEOUT, &describe))
            .await
            .map_err(|e| self.error(SinkErrorKind::Fatal, format!("the lookup failed: {e}")))?
            .map_err(|e| {
                let kind = if e.is_retriable() {
                    SinkErrorKind::Retriable
                } else {
                    SinkErrorKind::Fatal
                };
                self.error(kind, format!("looking topic {topic} up failed: {e}"))
            })
    }

    async fn create(&self, topic: &str) -> Result<(), SinkError> {
        let group = self.rules.group_for(topic);
        let replication = TopicReplication::Fixed(group.replication_factor);
        let mut new_topic = NewTopic::new(topic, group.partitions, replication);
        for (key, value) in &group.topic_configs {
            new_topic = new_topic.set(key, value);
        }
        let options = AdminOptions::new()
            .operation_timeout(Some(ADMIN_TIMEOUT))
            .request_timeout(Some(ADMIN_TIMEOUT));
        let what = format!(
            "creating topic {topic} (group {}: {} partitions, replication factor {}{}{})",
            group.name,
            group.partitions,
            group.replication_factor,
            if group.topic_configs.is_empty() {
                ""
            } else {
                ", "
            },
            group
                .topic_configs
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let results = self
            .admin
            .create_topics([&new_topic], &options)
            .await
            .map_err(|e| {
                let kind = if crate::is_retriable(&e) {
                    SinkErrorKind::Retriable
                } else {
                    SinkErrorKind::Fatal
                };
                self.error(kind, format!("{what} failed: {e}"))
                    .with_source(e)
            })?;
        for result in results {
            match result {
                Ok(_) => {
                    tracing::info!(sink = %self.describe, "created topic {topic} ({what})");
                }
                // Another task or worker created it meanwhile: it exists, which is all that counts.
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => return Ok(()),
                Err((_, code)) => {
                    let kind = if is_retriable_code(code) {
                        SinkErrorKind::Retriable
                    } else {
                        SinkErrorKind::Fatal
                    };
                    return Err(self.error(
                        kind,
                        format!(
                            "{what} failed: {code}. Ensure that the task is authorized to create topics \
                             or that the topic exists, or fix the connector's topic.creation.* settings \
                             (-1 uses the broker's default), and restart the task"
                        ),
                    ));
                }
            }
        }
        // The producer looks the topic up itself; waiting here means its first lookup finds it.
        let (lookup, name, describe) = (
            Arc::clone(&self.lookup),
            topic.to_owned(),
            self.describe.clone(),
        );
        tokio::task::spawn_blocking(move || await_topic(&lookup, &name, ADMIN_TIMEOUT, &describe))
            .await
            .map_err(|e| self.error(SinkErrorKind::Fatal, format!("the lookup failed: {e}")))?
            .map_err(|e| self.error(SinkErrorKind::Retriable, e.to_string()))?;
        Ok(())
    }

    fn error(&self, kind: SinkErrorKind, message: impl Into<String>) -> SinkError {
        SinkError::new(self.describe.as_str(), kind, message)
    }
}

#[cfg(test)]
mod tests {
    use super::KnownTopics;

    #[test]
    fn known_topics_start_over_past_the_limit() {
        let mut known = KnownTopics::new(2);
        known.insert("a");
        known.insert("b");
        known.insert("b");
        assert!(known.contains("a") && known.contains("b"));
        known.insert("c");
        assert!(known.contains("c"), "the topic just found is remembered");
        assert!(
            !known.contains("a") && !known.contains("b"),
            "the others are forgotten (looked up again, which is harmless)"
        );
        assert_eq!(known.topics.len(), 1);
    }
}
