//! Test support: ferry-testkit's task harness (a real offset reader over a memory store, offsets
//! written through the real `OffsetWriter`), with this crate's connector name and poll deadline, and
//! helpers for the values and offsets of the built-in connectors' records.

#![allow(dead_code, unused_imports)] // each test file uses a different part (and re-export)

use std::ops::Deref;
use std::time::Duration;

use ferry_api::{SourceRecord, SourceTask};
pub use ferry_testkit::{CountingReader, TaskHarness, config, poll_times};

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

pub const CONNECTOR: &str = "test-connector";

/// One connector's offsets in a memory store: [`TaskHarness`] under [`CONNECTOR`].
#[derive(Clone)]
pub struct Offsets(TaskHarness);

impl Offsets {
    pub fn new() -> Self {
        Self(TaskHarness::new(CONNECTOR))
    }
}

impl Deref for Offsets {
    type Target = TaskHarness;

    fn deref(&self) -> &TaskHarness {
        &self.0
    }
}

/// Polls until `n` records arrived (fails after 10 s), returning exactly what the polls returned.
pub async fn poll_n(
    task: &mut dyn SourceTask,
    n: usize,
) -> Result<Vec<SourceRecord>, Box<dyn std::error::Error>> {
    Ok(ferry_testkit::poll_n(task, n, Duration::from_secs(10)).await?)
}

/// The values of records as strings (the JSON string for a file line, the JSON text otherwise).
pub fn values(records: &[SourceRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| match &r.value {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => "<null>".to_owned(),
        })
        .collect()
}

/// The integer field `key` of each record's offset.
pub fn offset_field(records: &[SourceRecord], key: &str) -> Vec<i64> {
    records
        .iter()
        .map(|r| {
            r.source_offset
                .as_ref()
                .and_then(|o| o.get(key))
                .and_then(|v| v.as_i64())
                .unwrap_or(i64::MIN)
        })
        .collect()
}
