//! # ferry-plugin
//!
//! What a store, sink or converter backend implements to plug into Ferry's runtime: the sink contract
//! ([`RecordSink`], [`PendingDelivery`], [`SinkError`], and the per-task [`SinkProvider`]), the
//! converter choice ([`ConverterSpec`]), Kafka client settings ([`ClientOverrides`]) and [`Secret`].
//!
//! Connectors are plugins too, but they see only `ferry-api` (their factory is
//! `ferry_api::ConnectorPlugin`); this crate is for backends the runtime drives. It depends on no
//! HTTP crate, store client or Kafka client, so a backend crate (`ferry-kafka`) does not pull in the
//! REST server by depending on it (`tests/layering.rs` keeps it so).

mod client;
mod converter;
mod secret;
pub mod sink;

pub use client::{ClientOverrides, PRODUCER_PREFIX};
pub use converter::ConverterSpec;
pub use secret::Secret;
pub use sink::{
    Delivery, PendingDelivery, RecordSink, SharedSink, SinkError, SinkErrorKind, SinkProvider,
    TaskSinkContext,
};
