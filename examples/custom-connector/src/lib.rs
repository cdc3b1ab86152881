//! A third-party source connector for Ferry: [`CounterSource`] counts 1, 2, 3, … into a topic and
//! resumes after its last committed number. It uses `ferry-api` only; `src/main.rs` registers it with
//! `ferry::Ferry::builder()` to make a complete `ferry`-like program.

mod connector;

pub use connector::{CounterSource, INTERVAL_MS, TOPIC};
