//! # ferry-plugin
//!
//! What a store, sink or converter backend implements to plug into Ferry's runtime: the sink contract
//! ([`RecordSink`], [`PendingDelivery`], [`SinkError`], and the per-task [`SinkProvider`]), the
//! converter choice ([`ConverterSpec`]), Kafka client settings ([`ClientOverrides`]) and [`Secret`],
//! and the configuration reading they share with the runtime ([`Properties`], [`ConfigError`]).
//!
//! A backend registers with the worker as a plugin: an offset store implements [`OffsetStorePlugin`]
//! (`offset.storage=<name>`: it reads its own worker keys into a [`DynStoreSpec`], which opens the
//! store), a sink [`SinkPlugin`] (`sink=<name>`: a [`DynSinkSpec`] that starts a [`SinkProvider`]);
//! [`WorkerPlugins`] holds the registered ones (`ferry::Ferry::builder().offset_store(…).sink(…)`).
//! The herder's stores are contracts too: [`ConfigBackingStore`] and [`StatusBackingStore`] (Kafka
//! Connect's two backing stores, with [`TargetState`] and [`TaskId`]), so a backend crate can keep them
//! in Kafka topics without depending on the runtime.
//!
//! Connectors are plugins too, but they see only `ferry-api` (their factory is
//! `ferry_api::ConnectorPlugin`); this crate is for backends the runtime drives. It depends on no
//! HTTP crate, store client or Kafka client, so a backend crate (`ferry-kafka`) does not pull in the
//! REST server by depending on it (`tests/layering.rs` keeps it so).

mod client;
mod config_error;
mod config_store;
mod converter;
pub mod converter_config;
pub mod framework_key;
mod group;
mod herder_state;
mod hint;
mod kafka_connect_keys;
mod properties;
mod registry;
mod secret;
pub mod sink;
mod sink_plugin;
mod status_store;
mod store;
mod syntax;

pub use client::{ClientOverrides, PRODUCER_PREFIX};
pub use config_error::{ConfigError, ConfigErrors};
pub use config_store::{
    ConfigBackingStore, ConfigSnapshot, ConfigStoreError, ConnectorEntry, TaskConfigWriter,
};
pub use converter::ConverterSpec;
pub use converter_config::{HEADER_CONVERTER, KEY_CONVERTER, VALUE_CONVERTER};
pub use framework_key::{FrameworkKey, Width};
pub use group::{GroupError, GroupHandler, MembershipLease, Slot, WorkerGroup};
pub use herder_state::{TargetState, TaskId};
pub use hint::{UnknownKeyHints, unknown_key_hint};
pub use kafka_connect_keys::{not_implemented_connector_key, not_implemented_worker_key};
pub use properties::Properties;
pub use registry::WorkerPlugins;
pub use secret::Secret;
pub use sink::{
    BatchDelivery, BatchSent, Delivery, PendingBatch, PendingDelivery, RecordSink, SharedSink,
    SinkError, SinkErrorKind, SinkProvider, TaskSinkContext, TransactionalSink,
};
pub use sink_plugin::{DynSinkSpec, SinkPlugin, TransactionsError};
pub use status_store::{
    CatchUp, Handoff, MAX_ACTIVE_TOPICS_PER_CONNECTOR, State, StatusBackingStore, StatusEntry,
    StatusStoreError, TopicStatus,
};
pub use store::{DynStoreSpec, OffsetStorePlugin, OpenMode, TransactionalOffsets};
