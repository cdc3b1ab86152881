//! Failures: delivery failures and refused sends under both `errors.tolerance` values, poll and start
//! failures.

use std::sync::atomic::Ordering;

use ferry_api::ConnectError;
use ferry_runtime::TaskState;

use crate::support::{Harness, Plan, Probe, eventually, fast, record, records, settings, wait_log};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delivery_without_tolerance_fails_the_task_and_blocks_its_partition() {
    // A short commit deadline: at stop the task waits that long for the failed record's ack.
    let h = Harness::new(settings(25, 300, 10_000));
    let probe = Probe::new();
    h.sink.set_policy(|key, _| {
        if key == "a:2" {
            Plan::FailDelivery("broker said no to a:2".into())
        } else {
            Plan::Ack
        }
    });
    h.start("deliveryfail", false, &probe);
    probe.push(vec![
        record("a", 1),
        record("a", 2),
        record("a", 3),
        record("b", 1),
    ]);

    h.wait_state("deliveryfail", TaskState::Failed).await;
    let trace = h
        .status("deliveryfail")
        .trace
        .expect("a FAILED task has a trace");
    assert!(
        trace.contains("broker said no to a:2") && trace.contains("errors.tolerance=none"),
        "trace: {trace}"
    );
    // The task winds down by itself: final commit, then stop().
    eventually("stop() after the failure", || probe.stops() == 1).await;
    assert_eq!(
        h.committed("deliveryfail", "a").await,
        Some(1),
        "a must not advance past the failed a:2"
    );
    assert_eq!(
        h.committed("deliveryfail", "b").await,
        Some(1),
        "other partitions' acknowledged offsets are committed"
    );
    assert!(
        !probe.has_commit_record("a:2"),
        "a failed delivery is not committed"
    );
    assert_eq!(
        h.status("deliveryfail").state,
        TaskState::Failed,
        "a stop keeps FAILED"
    );
    h.worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delivery_with_tolerance_counts_as_delivered() {
    let h = Harness::new(fast());
    let probe = Probe::new();
    h.sink.set_policy(|key, _| match key {
        "a:2" => Plan::FailDelivery("broker said no to a:2".into()),
        "a:3" => Plan::Hold,
        _ => Plan::Ack,
    });
    h.start("deliverytolerate", true, &probe);
    probe.push(records("a", 1..=3));
    h.wait_committed("deliverytolerate", "a", 2).await;
    eventually("commit_record(a:2)", || probe.has_commit_record("a:2")).await;
    assert_eq!(
        probe.commit_records_of("a:2"),
        vec![None],
        "a dropped record gets commit_record(record, None)"
    );
    assert!(probe.commit_records_of("a:1")[0].is_some());
    wait_log(
        "deliverytolerate-0",
        "WARN",
        &["delivery failed", "broker said no to a:2"],
    )
    .await;
    h.sink.resolve("a:3");
    h.wait_committed("deliverytolerate", "a", 3).await;
    assert_eq!(h.status("deliverytolerate").state, TaskState::Running);
    h.worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retriable_send_failure_is_retried_until_accepted() {
    let h = Harness::new(fast());
    let probe = Probe::new();
    h.sink.set_policy(|key, attempt| {
        if key == "a:2" && attempt < 2 {
            Plan::Refuse { retriable: true }
        } else {
            Plan::Ack
        }
    });
    h.start("sendretry", false, &probe);
    probe.push(records("a", 1..=3));
    h.wait_committed("sendretry", "a", 3).await;
    assert_eq!(h.sink.attempts("a:2"), 3);
    assert_eq!(
        h.sink.accepted(),
        ["a:1", "a:2", "a:3"],
        "each record accepted once, in order"
    );
    for key in ["a:1", "a:2", "a:3"] {
        eventually("commit_record", || probe.has_commit_record(key)).await;
        assert_eq!(probe.commit_records_of(key).len(), 1);
    }
    wait_log(
        "sendretry-0",
        "WARN",
        &["sending a record failed, retrying", "refused a:2"],
    )
    .await;
    assert_eq!(h.status("sendretry").state, TaskState::Running);
    h.worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_during_send_retries_does_not_skip_the_refused_record() {
    let h = Harness::new(settings(25, 2_000, 10_000));
    let probe = Probe::new();
    h.sink.set_policy(|key, _| {
        if key == "a:2" {
            Plan::Refuse { retriable: true }
        } else {
            Plan::Ack
        }
    });
    h.start("sendretrystop", false, &probe);
    probe.push(records("a", 1..=3));
    eventually("a:2 refused", || h.sink.attempts("a:2") >= 1).await;
    h.wait_committed("sendretrystop", "a", 1).await;
    h.stop("sendretrystop").await;
    // a:2 was never accepted, so nothing after it may be: a:3 committed would lose a:2 for good.
    assert!(
        !h.sink.accepted().contains(&"a:3".to_owned()),
        "accepted: {:?}",
        h.sink.accepted()
    );
    assert_eq!(h.committed("sendretrystop", "a").await, Some(1));
    assert_eq!(probe.stops(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_send_without_tolerance_fails_the_task() {
    let h = Harness::new(fast());
    let probe = Probe::new();
    h.sink.set_policy(|key, _| {
        if key == "a:2" {
            Plan::Refuse { retriable: false }
        } else {
            Plan::Ack
        }
    });
    h.start("sendfatal", false, &probe);
    probe.push(records("a", 1..=3));
    h.wait_state("sendfatal", TaskState::Failed).await;
    let trace = h.status("sendfatal").trace.expect("trace");
    assert!(
        trace.contains("refused a:2") && trace.contains("errors.tolerance=none"),
        "trace: {trace}"
    );
    eventually("stop() after the failure", || probe.stops() == 1).await;
    assert_eq!(h.committed("sendfatal", "a").await, Some(1));
    assert_eq!(
        h.sink.accepted(),
        ["a:1"],
        "nothing after the refused record is sent"
    );
    assert!(!probe.has_commit_record("a:2"));
    h.worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_send_with_tolerance_drops_the_record() {
    let h = Harness::new(fast());
    let probe = Probe::new();
    h.sink.set_policy(|key, _| match key {
        "a:2" => Plan::Refuse { retriable: false },
        "a:3" => Plan::Hold,
        _ => Plan::Ack,
    });
    h.start("sendtolerate", true, &probe);
    probe.push(records("a", 1..=3));
    h.wait_committed("sendtolerate", "a", 2).await;
    eventually("commit_record(a:2)", || probe.has_commit_record("a:2")).await;
    assert_eq!(probe.commit_records_of("a:2"), vec![None]);
    assert_eq!(
        h.sink.attempts("a:2"),
        1,
        "a non-retriable refusal is not retried"
    );
    h.sink.resolve("a:3");
    h.wait_committed("sendtolerate", "a", 3).await;
    assert_eq!(h.status("sendtolerate").state, TaskState::Running);
    h.worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fatal_poll_failure_fails_the_task_with_its_reason() {
    let h = Harness::new(fast());
    let probe = Probe::new();
    h.start("pollfatal", false, &probe);
    probe.push(records("a", 1..=2));
    h.wait_committed("pollfatal", "a", 2).await;
    let cause = std::io::Error::other("EIO on /data/in.txt");
    probe.push_error(ConnectError::fatal("cannot read the source file").with_source(cause));
    h.wait_state("pollfatal", TaskState::Failed).await;
    let trace = h.status("pollfatal").trace.expect("trace");
    assert!(
        trace.contains("cannot read the source file") && trace.contains("EIO on /data/in.txt"),
        "trace: {trace}"
    );
    wait_log(
        "pollfatal-0",
        "ERROR",
        &["task failed", "cannot read the source file"],
    )
    .await;
    eventually("stop()", || probe.stops() == 1).await;
    h.worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retriable_poll_failure_is_retried_and_records_keep_flowing() {
    let h = Harness::new(fast());
    let probe = Probe::new();
    h.start("pollretry", false, &probe);
    probe.push_error(ConnectError::retriable("source busy"));
    probe.push_error(ConnectError::retriable("source busy"));
    probe.push(records("a", 1..=2));
    h.wait_committed("pollretry", "a", 2).await;
    wait_log(
        "pollretry-0",
        "WARN",
        &["poll failed, retrying", "source busy"],
    )
    .await;
    assert_eq!(h.status("pollretry").state, TaskState::Running);
    probe.push(vec![record("a", 3)]);
    h.wait_committed("pollretry", "a", 3).await;
    h.worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_failure_fails_the_task_with_its_reason() {
    let h = Harness::new(fast());
    let probe = Probe::new();
    let cause = std::io::Error::other("connection refused");
    *crate::support::lock(&probe.start_error) =
        Some(ConnectError::fatal("cannot reach the source").with_source(cause));
    h.start("startfail", false, &probe);
    h.wait_state("startfail", TaskState::Failed).await;
    let trace = h.status("startfail").trace.expect("trace");
    assert!(
        trace.contains("cannot reach the source") && trace.contains("connection refused"),
        "trace: {trace}"
    );
    wait_log(
        "startfail-0",
        "ERROR",
        &["task failed", "cannot reach the source"],
    )
    .await;
    assert_eq!(
        probe.polls.load(Ordering::SeqCst),
        0,
        "a task that failed to start is never polled"
    );
    h.worker.shutdown().await;
}

/// A message that already embeds its cause (as `ConnectError::from(OffsetReadError)` and many
/// connectors' errors do) must not be followed by that cause again: one chain, each cause once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_trace_names_each_cause_once() {
    let h = Harness::new(fast());
    let probe = Probe::new();
    let read = ferry_api::OffsetReadError::Store {
        connector: "startonce".to_owned(),
        message: "offset store /x/offsets.ferry refuses writes after an earlier failure".to_owned(),
        retriable: false,
    };
    *crate::support::lock(&probe.start_error) = Some(ConnectError::from(read));
    h.start("startonce", false, &probe);
    h.wait_state("startonce", TaskState::Failed).await;
    let trace = h.status("startonce").trace.expect("trace");
    assert_eq!(
        trace
            .matches("refuses writes after an earlier failure")
            .count(),
        1,
        "trace: {trace}"
    );

    let poll = Probe::new();
    h.start("pollonce", false, &poll);
    let cause = std::io::Error::other("No space left on device (os error 28)");
    poll.push_error(
        ConnectError::fatal(format!("cannot read /in.txt: {cause}")).with_source(cause),
    );
    h.wait_state("pollonce", TaskState::Failed).await;
    let trace = h.status("pollonce").trace.expect("trace");
    assert_eq!(trace.matches("No space left").count(), 1, "trace: {trace}");
    h.worker.shutdown().await;
}

/// A failed delivery will never be acknowledged: the stopping task must not wait the whole
/// `offset.flush.timeout.ms` for it (here a minute, longer than the test's deadline) once every
/// delivery has resolved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_does_not_wait_for_acknowledgements_of_failed_deliveries() {
    let h = Harness::new(settings(25, 60_000, 120_000));
    let probe = Probe::new();
    h.sink
        .set_policy(|_, _| Plan::FailDelivery("No space left on device (os error 28)".into()));
    h.start("failedacks", false, &probe);
    probe.push(records("a", 1..=3));
    h.wait_state("failedacks", TaskState::Failed).await;
    eventually(
        "stop() after the failure, well before the flush timeout",
        || probe.stops() == 1,
    )
    .await;

    // The same for a stop requested while the failed deliveries are outstanding (SIGTERM).
    let stopped = Probe::new();
    h.sink.hold(&["b:2"]);
    h.start("failedacks-stop", false, &stopped);
    stopped.push(vec![record("b", 1), record("b", 2)]);
    eventually("b:2 held", || h.sink.is_held("b:2")).await;
    let worker = h.worker.clone();
    let stopping = tokio::spawn(async move { worker.stop_connector("failedacks-stop").await });
    eventually("the stop to begin", || {
        h.worker.task_statuses("failedacks-stop").is_none()
    })
    .await;
    h.sink.fail("b:2", "No space left on device (os error 28)");
    crate::support::bounded("the stop", stopping)
        .await
        .expect("the stop did not panic")
        .expect("the connector exists");
    h.worker.shutdown().await;
}

/// A sink that failed for good (a file sink poisoned by a full disk) is reopened when a task
/// restarts: the restarted task delivers again, from its committed offsets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_restart_reopens_a_sink_that_failed_for_good() {
    let h = Harness::new(fast());
    let probe = Probe::new();
    h.sink.set_policy(|key, _| {
        if key == "a:2" {
            Plan::FailDelivery("write failed: No space left on device (os error 28)".into())
        } else {
            Plan::Ack
        }
    });
    h.start("reopen", false, &probe);
    probe.push(records("a", 1..=2));
    h.wait_state("reopen", TaskState::Failed).await;
    h.sink
        .failed_for_good
        .store(true, std::sync::atomic::Ordering::SeqCst);
    h.sink.set_policy(|_, _| Plan::Ack);

    h.worker
        .restart_task("reopen", 0, &crate::support::TestConnector::new(&probe))
        .await
        .expect("the task exists");
    h.wait_state("reopen", TaskState::Running).await;
    assert_eq!(h.sink.reopens.load(Ordering::SeqCst), 1);
    probe.push(records("a", 2..=3));
    h.wait_committed("reopen", "a", 3).await;
    h.worker.shutdown().await;
}

/// A panic in the connector's code ends its task, which reports FAILED with the panic message (not
/// RUNNING forever); the other tasks go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_task_is_failed_with_the_panic_message() {
    let h = Harness::new(fast());
    let (panics, fine) = (Probe::new(), Probe::new());
    h.start("panics", false, &panics);
    h.start("panicsnot", false, &fine);
    panics.panic_poll.store(true, Ordering::SeqCst);
    h.wait_state("panics", TaskState::Failed).await;
    let trace = h.status("panics").trace.expect("trace");
    assert!(trace.contains("injected poll() panic"), "trace: {trace}");
    fine.push(records("a", 1..=2));
    h.wait_committed("panicsnot", "a", 2).await;
    crate::support::bounded("the shutdown", h.worker.shutdown()).await;
}

/// A transform failing retriably on a:2 (retried for `errors.retry.timeout`, 30 s here): the record
/// sent before it is acknowledged and committed while a:2 waits, as a record sent before a refused
/// send is (the task loop hands what it sent to the delivery watcher before it waits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_sent_before_a_retrying_transform_is_committed_while_it_waits() {
    use std::time::Duration;

    use ferry_api::transform::{Transformation, TransformationPlugin};
    use ferry_api::{ConfigIssue, ConfigKey, SourceRecord};
    use ferry_runtime::transforms::{ErrorHandling, TransformRegistry, Transforms};

    struct FailOnA2;
    impl Transformation for FailOnA2 {
        fn config_keys(&self) -> Vec<ConfigKey> {
            Vec::new()
        }
        fn configure(&mut self, _config: &ferry_api::Config) -> Result<(), Vec<ConfigIssue>> {
            Ok(())
        }
        fn apply(&mut self, record: SourceRecord) -> Result<Option<SourceRecord>, ConnectError> {
            if record.value == Some(serde_json::json!({"p": "a", "n": 2})) {
                return Err(ConnectError::retriable("a:2 cannot be transformed yet"));
            }
            Ok(Some(record))
        }
    }

    let h = Harness::new(settings(25, 2_000, 10_000));
    let probe = Probe::new();
    let config = ferry_api::Config::from([
        ("transforms".to_owned(), "wait".to_owned()),
        (
            "transforms.wait.type".to_owned(),
            "test.FailOnA2".to_owned(),
        ),
        ("errors.retry.timeout".to_owned(), "30000".to_owned()),
    ]);
    let mut registry = TransformRegistry::default();
    registry.add(
        [TransformationPlugin::new(["test.FailOnA2"], || {
            Box::new(FailOnA2) as Box<dyn Transformation>
        })],
        [],
    );
    let transforms = Transforms::parse(&config, &registry).expect("transforms parse");
    let spec = ferry_runtime::ConnectorSpec {
        name: "retrying".to_owned(),
        tasks_max: 1,
        tolerate_delivery_errors: false,
        transforms,
        error_handling: ErrorHandling {
            retry_timeout: Some(Duration::from_secs(30)),
            ..ErrorHandling::default()
        },
        secrets: Vec::new(),
        config,
    };
    h.worker
        .start_connector(spec, &crate::support::TestConnector::new(&probe))
        .expect("connector starts");
    probe.push(records("a", 1..=3));
    h.wait_committed("retrying", "a", 1).await;
    assert_eq!(h.sink.accepted(), ["a:1"], "nothing after a:2 is sent");
    h.stop("retrying").await;
    assert_eq!(h.committed("retrying", "a").await, Some(1));
}
