//! The Worker against a real `MemoryStore` (behind a failure-injecting wrapper), scripted connectors
//! and a sink whose deliveries the tests control: Kafka Connect's worker test checklist (commit, commit
//! failure and timeout, delivery and send failures, poll and start failures, graceful stop, cancel,
//! pause/resume, restart from committed offsets, partition-key mismatch, task independence).
//!
//! Intervals are short and every wait polls for a condition up to a generous deadline; no assertion
//! depends on how long something took.

mod batches;
mod commit;
mod exactly_once;
mod failures;
mod fencing;
mod lifecycle;
mod resume;
mod store_failure;
mod support;
mod tasks;
