//! Where the herder keeps connector configurations, target states and task configurations
//! ([`ConfigBackingStore`]) and connector and task statuses ([`StatusBackingStore`]) — Kafka Connect's
//! two backing stores. Standalone uses a [`FileConfigStore`] (the connectors file) or a
//! [`MemoryConfigStore`], and a [`MemoryStatusStore`]; distributed mode (issue 13) implements the same
//! traits over the config and status topics.

mod config;
mod file;
mod memory;
mod status;

pub use config::{ConfigBackingStore, ConfigSnapshot, ConfigStoreError, ConnectorEntry};
pub use file::{ConnectorsFileError, FileConfigStore, StoredConnector};
pub use memory::{MemoryConfigStore, MemoryStatusStore};
pub use status::{
    Handoff, MAX_ACTIVE_TOPICS_PER_CONNECTOR, State, StatusBackingStore, StatusEntry, TopicStatus,
};
