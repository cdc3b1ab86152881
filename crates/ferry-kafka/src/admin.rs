//! Topic administration for the internal topics (the offsets topic, and Kafka Connect's config and
//! status topics): create a topic compacted, or check that an existing one is compacted.

use std::time::{Duration, Instant};

use ferry_offsets::StoreError;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::consumer::Consumer;
use rdkafka::error::RDKafkaErrorCode;

use crate::client::{StoreConsumer, StoreContext, backend, is_retriable_code, kafka};

/// Which internal topic is administered: it names the topic in errors and says why it must be
/// compacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TopicKind {
    /// `offset.storage.topic`.
    Offsets,
    /// `config.storage.topic`.
    Config,
    /// `status.storage.topic`.
    Status,
    /// The worker group's leader topic `<group.id>-leader` (distributed mode's leader slot).
    Leader,
}

impl TopicKind {
    /// "offsets topic", … (for messages).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Offsets => "offsets topic",
            Self::Config => "config topic",
            Self::Status => "status topic",
            Self::Leader => "leader topic",
        }
    }

    /// The worker key naming the topic.
    pub(crate) fn setting(self) -> &'static str {
        match self {
            Self::Offsets => "offset.storage.topic",
            Self::Config => "config.storage.topic",
            Self::Status => "status.storage.topic",
            // Named after the group: another group.id gives another leader topic.
            Self::Leader => "group.id",
        }
    }

    /// The worker key prefix of its partitions and replication factor.
    fn settings_prefix(self) -> &'static str {
        match self {
            Self::Offsets => "offset.storage",
            Self::Config => "config.storage",
            Self::Status => "status.storage",
            // It is created with the config topic's replication factor.
            Self::Leader => "config.storage",
        }
    }

    /// What deletion would lose.
    fn why_compacted(self) -> &'static str {
        match self {
            Self::Offsets => {
                "with deletion the broker drops the offsets of partitions idle longer than retention.ms, and \
                 their connectors silently start over"
            }
            Self::Config => {
                "with deletion the broker drops connector configurations older than retention.ms, and the \
                 connectors silently disappear"
            }
            Self::Status => {
                "with deletion the broker drops statuses older than retention.ms, and the REST API reports \
                 connectors and tasks as unknown"
            }
            Self::Leader => {
                "with deletion the broker drops the leader's URL once it is older than retention.ms, and \
                 the other workers cannot forward REST writes to it"
            }
        }
    }
}

/// What the topic administration needs to know about an internal topic (the store passes the parts of
/// its configuration, so this module does not depend on the store's).
pub(crate) struct OffsetsTopic<'a> {
    pub(crate) kind: TopicKind,
    pub(crate) topic: &'a str,
    pub(crate) bootstrap_servers: &'a str,
    pub(crate) partitions: i32,
    pub(crate) replication_factor: i16,
    /// Request and operation timeout of the admin calls.
    pub(crate) timeout: Duration,
}

/// What the topic's metadata says.
pub(crate) enum TopicState {
    /// The topic exists with this many partitions.
    Exists(i32),
    /// The broker does not know the topic.
    Missing,
}

/// Looks the topic up. Blocking: call from a blocking thread. The consumer must not auto-create
/// topics (its default), or the lookup itself would create a non-compacted topic.
pub(crate) fn topic_state(
    consumer: &StoreConsumer,
    topic: &str,
    timeout: Duration,
    store: &str,
) -> Result<TopicState, StoreError> {
    let metadata = consumer
        .fetch_metadata(Some(topic), timeout)
        .map_err(|e| kafka(store, "fetching the topic's metadata", &e))?;
    let Some(found) = metadata.topics().iter().find(|t| t.name() == topic) else {
        return Ok(TopicState::Missing);
    };
    match found.error() {
        None if !found.partitions().is_empty() => {
            Ok(TopicState::Exists(found.partitions().len() as i32))
        }
        None => Ok(TopicState::Missing),
        Some(code) => match RDKafkaErrorCode::from(code) {
            RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic => {
                Ok(TopicState::Missing)
            }
            other => Err(backend(
                store,
                format!("the broker reports an error for topic {topic}'s metadata: {other}"),
                is_retriable_code(other),
            )),
        },
    }
}

/// Waits until a just-created topic shows all its partitions in the metadata. Blocking.
pub(crate) fn await_topic(
    consumer: &StoreConsumer,
    topic: &str,
    timeout: Duration,
    store: &str,
) -> Result<i32, StoreError> {
    let deadline = Instant::now() + timeout;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match topic_state(
            consumer,
            topic,
            remaining.max(Duration::from_millis(100)),
            store,
        ) {
            Ok(TopicState::Exists(partitions)) => return Ok(partitions),
            Ok(TopicState::Missing) | Err(_) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Ok(TopicState::Missing) => {
                return Err(backend(
                    store,
                    format!(
                        "topic {topic} was created but did not appear in the metadata within {timeout:?}"
                    ),
                    true,
                ));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Creates the topic with `cleanup.policy=compact`. A topic created concurrently by another
/// worker is fine (its policy is checked afterwards).
pub(crate) async fn create_topic(
    admin: &AdminClient<StoreContext>,
    config: &OffsetsTopic<'_>,
    store: &str,
) -> Result<(), StoreError> {
    let topic = NewTopic::new(
        config.topic,
        config.partitions,
        TopicReplication::Fixed(i32::from(config.replication_factor)),
    )
    .set("cleanup.policy", "compact");
    let options = AdminOptions::new()
        .operation_timeout(Some(config.timeout))
        .request_timeout(Some(config.timeout));
    let results = admin
        .create_topics([&topic], &options)
        .await
        .map_err(|e| kafka(store, &format!("creating the {}", config.kind.name()), &e))?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((_, code)) => {
                return Err(backend(
                    store,
                    format!(
                        "creating the {kind} {topic} with {} partitions, replication factor {} and \
                         cleanup.policy=compact failed: {code}. Create it yourself with cleanup.policy=compact, \
                         or fix {prefix}.partitions / {prefix}.replication.factor (-1 uses the \
                         broker's default)",
                        config.partitions,
                        config.replication_factor,
                        kind = config.kind.name(),
                        topic = config.topic,
                        prefix = config.kind.settings_prefix(),
                    ),
                    is_retriable_code(code),
                ));
            }
        }
    }
    Ok(())
}

/// Refuses the topic unless its `cleanup.policy` is exactly `compact`.
pub(crate) async fn verify_compacted(
    admin: &AdminClient<StoreContext>,
    config: &OffsetsTopic<'_>,
    store: &str,
) -> Result<(), StoreError> {
    let options = AdminOptions::new().request_timeout(Some(config.timeout));
    let results = admin
        .describe_configs([&ResourceSpecifier::Topic(config.topic)], &options)
        .await
        .map_err(|e| {
            kafka(
                store,
                &format!(
                    "reading the {}'s configuration (DescribeConfigs)",
                    config.kind.name()
                ),
                &e,
            )
        })?;
    let resource = match results.into_iter().next() {
        Some(Ok(resource)) => resource,
        Some(Err(code)) => {
            return Err(backend(
                store,
                format!(
                    "reading the {kind}'s configuration (DescribeConfigs) failed: {code}. Ferry must see \
                     cleanup.policy=compact before it trusts the topic; grant DescribeConfigs on the topic",
                    kind = config.kind.name()
                ),
                is_retriable_code(code),
            ));
        }
        None => {
            return Err(backend(
                store,
                format!(
                    "DescribeConfigs returned no result for the {}",
                    config.kind.name()
                ),
                true,
            ));
        }
    };
    let policy = resource
        .get("cleanup.policy")
        .and_then(|e| e.value.as_deref());
    check_cleanup_policy(config.kind, config.topic, config.bootstrap_servers, policy)
        .map_err(|e| backend(store, e.to_string(), false))
}

/// An internal topic whose `cleanup.policy` is not exactly `compact`, or not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CleanupPolicyError {
    #[error(
        "the broker did not report cleanup.policy for topic {topic}, so Ferry cannot check that it is \
         compacted; grant DescribeConfigs on the topic"
    )]
    NotReported { topic: String },
    #[error(
        "topic {topic} has cleanup.policy={policy}, but {article} {kind_name} must have cleanup.policy=compact \
         (exactly): {why}. Ferry will not use this topic. Either make it compacted \
         (kafka-configs.sh --bootstrap-server {bootstrap} --alter --entity-type topics --entity-name {topic} \
         --add-config cleanup.policy=compact), or set {setting} to a topic that does not exist yet, \
         which Ferry creates compacted",
        article = if *kind == TopicKind::Offsets { "an" } else { "a" },
        kind_name = kind.name(),
        why = kind.why_compacted(),
        setting = kind.setting(),
    )]
    NotCompact {
        kind: TopicKind,
        topic: String,
        bootstrap: String,
        policy: String,
    },
}

/// The policy check itself: exactly `compact` (Kafka Connect refuses `compact,delete` too, because
/// deletion would drop offsets of partitions that are idle longer than `retention.ms`).
pub(crate) fn check_cleanup_policy(
    kind: TopicKind,
    topic: &str,
    bootstrap: &str,
    policy: Option<&str>,
) -> Result<(), CleanupPolicyError> {
    let Some(policy) = policy else {
        return Err(CleanupPolicyError::NotReported {
            topic: topic.to_owned(),
        });
    };
    let mut policies: Vec<&str> = policy
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    policies.sort_unstable();
    policies.dedup();
    if policies == ["compact"] {
        return Ok(());
    }
    Err(CleanupPolicyError::NotCompact {
        kind,
        topic: topic.to_owned(),
        bootstrap: bootstrap.to_owned(),
        policy: policy.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exactly_compact_is_accepted() {
        assert_eq!(
            check_cleanup_policy(TopicKind::Offsets, "t", "b:9092", Some("compact")),
            Ok(())
        );
        assert_eq!(
            check_cleanup_policy(TopicKind::Offsets, "t", "b:9092", Some(" compact ")),
            Ok(())
        );
        for bad in ["delete", "compact,delete", "delete,compact", "", "Compact"] {
            let err = check_cleanup_policy(TopicKind::Offsets, "offsets", "b:9092", Some(bad))
                .expect_err("must be refused");
            let err = err.to_string();
            assert!(
                err.contains(&format!("cleanup.policy={bad},")),
                "{bad}: {err}"
            );
            assert!(
                err.contains("topic offsets") && err.contains("--entity-name offsets"),
                "{err}"
            );
            assert!(err.contains("--bootstrap-server b:9092"), "{err}");
        }
        assert!(
            check_cleanup_policy(TopicKind::Offsets, "t", "b", None)
                .expect_err("must be refused")
                .to_string()
                .contains("DescribeConfigs")
        );
    }
}
