//! Kafka Connect's `SingleFieldPath` (KIP-821).
