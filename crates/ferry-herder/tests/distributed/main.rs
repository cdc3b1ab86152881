//! The distributed herder without Kafka: several `DistributedHerder`s in one process share a
//! `MemoryConfigStore`, a `MemoryStatusStore` and an offset store, and form a simulated cooperative
//! group (`support::group`: revoke first, then assign; a crashed member vanishes and its slots are
//! reassigned without a revoke; a lost member is told `lost`). A sequence connector whose offsets
//! name the task instance that committed them lets every test check the ownership guarantees from
//! what reached the store and the sink.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod handoff;
mod hold;
mod ownership;
mod scenarios;
mod support;
