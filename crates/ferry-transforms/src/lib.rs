//! # ferry-transforms
//!
//! Kafka Connect's Single Message Transforms (`org.apache.kafka.connect.transforms.*`) and
//! predicates (`org.apache.kafka.connect.transforms.predicates.*`), with Kafka Connect's class names,
//! config keys and behaviour, over schemaful structs (a value with a [`ferry_api::Schema`]) and
//! schemaless maps (a JSON object without one). Like connectors, they see only `ferry-api`.
//!
//! [`chain`] is how a connector's `transforms=…` and `predicates=…` keys become the chain its tasks
//! apply, with the connector's `errors.*` handling of transform failures.

mod cast;
pub mod chain;
mod extract_field;
mod fields_common;
mod fields_path;
mod filter;
mod flatten;
mod headers;
mod hoist_field;
mod insert_field;
mod mask_field;
mod predicates;
mod replace_field;
mod routers;
mod routing_config;
mod routing_date;
mod set_schema_metadata;
mod timestamp_converter;
mod types_common;
mod types_number;
mod types_time;
mod value_to_key;

use ferry_api::transform::{PredicatePlugin, TransformationPlugin};

/// The package every Kafka Connect transform's class lives in.
pub(crate) const PACKAGE: &str = "org.apache.kafka.connect.transforms";

/// Every built-in transformation, each variant (`$Key`, `$Value`) its own plugin.
pub fn builtin_transformations() -> Vec<TransformationPlugin> {
    let mut all = Vec::new();
    all.extend(insert_field::plugins());
    all.extend(replace_field::plugins());
    all.extend(mask_field::plugins());
    all.extend(value_to_key::plugins());
    all.extend(extract_field::plugins());
    all.extend(hoist_field::plugins());
    all.extend(cast::plugins());
    all.extend(timestamp_converter::plugins());
    all.extend(flatten::plugins());
    all.extend(routers::plugins());
    all.extend(filter::plugins());
    all.extend(set_schema_metadata::plugins());
    all.extend(headers::plugins());
    all
}

/// Every built-in predicate.
pub fn builtin_predicates() -> Vec<PredicatePlugin> {
    predicates::plugins()
}
