//! The status store: Kafka Connect's `StatusBackingStore`. The contract lives in `ferry-plugin` (so
//! backend crates implement it) and is re-exported here.

pub use ferry_plugin::{
    Handoff, MAX_ACTIVE_TOPICS_PER_CONNECTOR, State, StatusBackingStore, StatusEntry, TopicStatus,
};
