//! Slot topic names: one topic per connector, `<group>-slots-<connector>`, partition p = task p.
//!
//! A connector name may hold any character, a topic name only `[a-zA-Z0-9._-]`, so every other byte
//! (and `_` itself) is written as `_XX` (hex). The mapping is injective and reversible, which lets the
//! rebalance callback turn an assigned partition back into a task id without shared state.
//!
//! The group's leader slot is the single partition of `<group>-leader`: it does not start with the
//! slot prefix `<group>-slots-`, so no connector's slot topic can be named like it.

/// Kafka's limit on topic name length.
const MAX_TOPIC_LEN: usize = 249;

/// Why a group's slot or leader topic cannot be named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicNameError {
    /// The slot topic name would be longer than Kafka allows.
    #[error(
        "the slot topic name for connector {connector:?} in group {group_id:?} would be {len} characters \
         long, but Kafka allows at most {MAX_TOPIC_LEN}; use a shorter connector name or group.id"
    )]
    SlotTooLong {
        /// The group.
        group_id: String,
        /// The connector.
        connector: String,
        /// The name's length.
        len: usize,
    },
    /// The leader topic name would be longer than Kafka allows.
    #[error(
        "the leader topic name for group {group_id:?} would be {len} characters long, but Kafka allows \
         at most {MAX_TOPIC_LEN}; use a shorter group.id"
    )]
    LeaderTooLong {
        /// The group.
        group_id: String,
        /// The name's length.
        len: usize,
    },
    /// The group.id holds characters a topic name cannot.
    #[error(
        "group.id {0:?} holds characters a Kafka topic name cannot (allowed: a-z A-Z 0-9 . _ -), \
         so its slot topics cannot be named after it"
    )]
    GroupId(String),
}

/// The topic prefix of a group's slot topics.
pub(crate) fn prefix(group_id: &str) -> String {
    format!("{group_id}-slots-")
}

/// The slot topic of `connector` in `group_id`, or why there cannot be one.
pub(crate) fn slot_topic(group_id: &str, connector: &str) -> Result<String, TopicNameError> {
    let mut topic = prefix(group_id);
    for b in connector.bytes() {
        if b.is_ascii_alphanumeric() || b == b'.' || b == b'-' {
            topic.push(char::from(b));
        } else {
            topic.push_str(&format!("_{b:02x}"));
        }
    }
    if topic.len() > MAX_TOPIC_LEN {
        return Err(TopicNameError::SlotTooLong {
            group_id: group_id.to_owned(),
            connector: connector.to_owned(),
            len: topic.len(),
        });
    }
    if !group_id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    {
        return Err(TopicNameError::GroupId(group_id.to_owned()));
    }
    Ok(topic)
}

/// The leader topic of `group_id` (one partition, compacted), or why there cannot be one.
pub(crate) fn leader_topic(group_id: &str) -> Result<String, TopicNameError> {
    // The same checks as a slot topic's: a valid group.id makes valid topic names.
    slot_topic(group_id, "")?;
    let topic = format!("{group_id}-leader");
    if topic.len() > MAX_TOPIC_LEN {
        return Err(TopicNameError::LeaderTooLong {
            group_id: group_id.to_owned(),
            len: topic.len(),
        });
    }
    Ok(topic)
}

/// The slot topic of `connector` in the group `group_id` (what an operator looks for in the
/// broker), or why the names cannot make one.
///
/// # Errors
/// The name would be too long, or the group.id holds characters a topic name cannot.
pub fn slot_topic_name(group_id: &str, connector: &str) -> Result<String, TopicNameError> {
    slot_topic(group_id, connector)
}

/// The consumer group of `group_id`'s leader slot (the task slots' group is `group_id` itself).
pub(crate) fn leader_group(group_id: &str) -> String {
    format!("{group_id}-leader")
}

/// The leader topic of the group `group_id`, or why the name cannot make one.
///
/// # Errors
/// The name would be too long, or the group.id holds characters a topic name cannot.
pub fn leader_topic_name(group_id: &str) -> Result<String, TopicNameError> {
    leader_topic(group_id)
}

/// The connector whose slot topic `topic` is, if it is one of `group_id`'s.
pub(crate) fn connector_of(group_id: &str, topic: &str) -> Option<String> {
    let escaped = topic.strip_prefix(&prefix(group_id))?;
    let mut bytes = Vec::with_capacity(escaped.len());
    let raw = escaped.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'_' {
            let hex = escaped.get(i + 1..i + 3)?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            bytes.push(raw[i]);
            i += 1;
        }
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_never_collide() {
        for name in ["plain", "with_underscore", "a b/c", "ünï", "x_41", "A"] {
            let topic = slot_topic("g", name).unwrap();
            assert!(topic.starts_with("g-slots-"), "{topic}");
            assert!(
                topic
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')),
                "{topic}"
            );
            assert_eq!(connector_of("g", &topic).as_deref(), Some(name));
        }
        assert_ne!(
            slot_topic("g", "a_41").unwrap(),
            slot_topic("g", "aA").unwrap()
        );
        assert_eq!(connector_of("g", "other-topic"), None);
        assert_eq!(connector_of("g", "g-slots-bad_zz"), None);
    }

    #[test]
    fn the_leader_topic_is_no_connectors_slot_topic() {
        let leader = leader_topic("g").unwrap();
        assert_eq!(leader, "g-leader");
        assert_eq!(connector_of("g", &leader), None);
        for name in ["leader", "-leader", "", "g-leader"] {
            assert_ne!(slot_topic("g", name).unwrap(), leader);
        }
        assert!(leader_topic("a group").is_err());
    }

    #[test]
    fn overlong_names_and_bad_group_ids_are_refused() {
        let err = slot_topic("g", &"x".repeat(300)).unwrap_err();
        assert!(err.to_string().contains("at most 249"), "{err}");
        let err = slot_topic("a group", "c").unwrap_err();
        assert!(err.to_string().contains("group.id"), "{err}");
    }
}
