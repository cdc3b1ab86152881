//! CounterSource under ferry-testkit's task harness: no worker, no process.

use custom_connector::CounterSource;
use ferry_api::SourceConnector;
use ferry_testkit::{TaskHarness, config};

#[tokio::test]
async fn counter_resumes_after_its_last_committed_number() -> Result<(), Box<dyn std::error::Error>>
{
    let harness = TaskHarness::new("counter");
    let settings = config(&[("topic", "counts"), ("interval.ms", "1")]);

    let resumed = harness.assert_resumes(&CounterSource, settings, 5).await?;

    let last = resumed.committed.last().and_then(|r| r.value.clone());
    let last = last
        .and_then(|v| v.as_i64())
        .ok_or("the last committed record has no number")?;
    assert!(
        last >= 5,
        "5 records were polled and committed, the last carried {last}"
    );
    assert_eq!(
        resumed.first_after_restart.value,
        Some((last + 1).into()),
        "the restarted task goes on right after the committed number"
    );
    Ok(())
}

#[test]
fn a_missing_topic_is_reported_by_validate() {
    let issues = CounterSource.validate(&config(&[("interval.ms", "10")]));
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].key, "topic");
    assert_eq!(issues[0].message, "is required");
}
