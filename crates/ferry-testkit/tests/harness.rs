//! The harness itself: `assert_resumes` passes a task that resumes and catches one that starts over.

use std::sync::Arc;

use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConnectError, OffsetStorageReaderExt, SourceConnector,
    SourceRecord, SourceTask, SourceTaskContext, async_trait,
};
use ferry_testkit::{HarnessError, TaskHarness, config};
use serde::{Deserialize, Serialize};

#[derive(Serialize)]
struct Stream {
    stream: &'static str,
}

#[derive(Serialize, Deserialize)]
struct At {
    n: i64,
}

/// Counts from its committed offset, or (`resumes: false`) always from 1.
struct Counter {
    resumes: bool,
}

impl SourceConnector for Counter {
    fn config_keys(&self) -> Vec<ConfigKey> {
        Vec::new()
    }

    fn validate(&self, _: &Config) -> Vec<ConfigIssue> {
        Vec::new()
    }

    fn task_configs(&self, config: &Config, _: usize) -> Result<Vec<Config>, ConnectError> {
        Ok(vec![config.clone()])
    }

    fn create_task(&self) -> Box<dyn SourceTask> {
        Box::new(CounterTask {
            resumes: self.resumes,
            n: 0,
        })
    }
}

struct CounterTask {
    resumes: bool,
    n: i64,
}

#[async_trait]
impl SourceTask for CounterTask {
    async fn start(&mut self, context: Arc<dyn SourceTaskContext>) -> Result<(), ConnectError> {
        let at: Option<At> = context
            .offset_storage_reader()
            .offset_of(&Stream { stream: "s" })
            .await?;
        if self.resumes {
            self.n = at.map_or(0, |a| a.n);
        }
        Ok(())
    }

    async fn poll(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        self.n += 1;
        let record = SourceRecord::new(
            &Stream { stream: "s" },
            &At { n: self.n },
            "t",
            self.n.into(),
        )?;
        Ok(vec![record])
    }

    async fn stop(&mut self) -> Result<(), ConnectError> {
        Ok(())
    }
}

#[tokio::test]
async fn a_task_that_resumes_passes_and_its_offset_is_committed()
-> Result<(), Box<dyn std::error::Error>> {
    let harness = TaskHarness::new("counter");
    let resumed = harness
        .assert_resumes(&Counter { resumes: true }, config(&[]), 3)
        .await?;
    assert_eq!(resumed.committed.len(), 3);
    assert_eq!(resumed.first_after_restart.value, Some(4.into()));
    let committed = harness
        .offset(&ferry_api::ConnectMap::from_serde(&Stream { stream: "s" })?)
        .await?;
    assert_eq!(
        committed,
        Some(ferry_api::ConnectMap::from_serde(&At { n: 3 })?)
    );
    Ok(())
}

#[tokio::test]
async fn a_task_that_starts_over_is_caught() {
    let harness = TaskHarness::new("counter");
    let result = harness
        .assert_resumes(&Counter { resumes: false }, config(&[]), 3)
        .await;
    assert!(
        matches!(result, Err(HarnessError::NotResumed { .. })),
        "{result:?}"
    );
}
