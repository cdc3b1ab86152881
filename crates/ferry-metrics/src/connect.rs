//! Kafka Connect's metrics (`ConnectMetricsRegistry`), named as the Prometheus JMX exporter's usual
//! Kafka Connect rules name its JMX beans: `kafka.connect:type=<group>,connector=<c>,task=<t>`
//! attribute `<metric>` becomes `kafka_connect_<group>_<metric>{connector="<c>",task="<t>"}`, and
//! `kafka.connect:type=connect-worker-metrics` attribute `<metric>` becomes
//! `kafka_connect_connect_worker_metrics_<metric>`, each `-` turned into `_`; every family is a gauge
//! (as those rules type them), `_total` ones included.
//!
//! Windowed statistics (`-rate`, `-avg`, `-max`, `-percentage`) cover the last minute
//! ([`super::window`]). As in Kafka, the "percentages" are fractions from 0 to 1, and an average or
//! maximum without any sample in the window is NaN.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;

use super::window::{Stats, Window};
use super::{TaskMetrics, WorkerMetrics};
use crate::status::TaskState;

/// Kafka Connect's JMX group of the source task metrics.
pub const SOURCE_TASK: &str = "source-task-metrics";
/// Kafka Connect's JMX group of the metrics every task has.
pub const CONNECTOR_TASK: &str = "connector-task-metrics";
/// Kafka Connect's JMX group of the error handling metrics.
pub const TASK_ERROR: &str = "task-error-metrics";
/// Kafka Connect's JMX group of the worker metrics.
pub const WORKER: &str = "connect-worker-metrics";

/// The Prometheus name the JMX exporter's rules give `metric` of `group`.
pub fn prom_name(group: &str, metric: &str) -> String {
    format!("kafka_connect_{group}_{metric}").replace('-', "_")
}

/// One task's values, read once per scrape.
struct View<'a> {
    t: &'a TaskMetrics,
    state: TaskState,
    ratios: (f64, f64),
    poll_rate: Stats,
    write_rate: Stats,
    poll_time: Stats,
    batch_size: Stats,
    active: Stats,
    commit_time: Stats,
    commit_attempts: Stats,
}

impl<'a> View<'a> {
    fn of(t: &'a TaskMetrics) -> Self {
        Self {
            t,
            state: t.status.get().state,
            ratios: t.status.ratios(),
            poll_rate: t.poll_rate.stats(),
            write_rate: t.write_rate.stats(),
            poll_time: t.poll_time.stats(),
            batch_size: t.batch_size.stats(),
            active: t.active.stats(),
            commit_time: t.commit_time.stats(),
            commit_attempts: t.commit_attempts.stats(),
        }
    }

    /// The share of commit attempts that succeeded (`ok`) or failed; 0 without any attempt.
    fn commit_share(&self, ok: bool) -> f64 {
        let s = &self.commit_attempts;
        if s.count == 0 {
            return 0.0;
        }
        let succeeded = s.sum / s.count as f64;
        if ok { succeeded } else { 1.0 - succeeded }
    }
}

type Value = fn(&View) -> f64;

/// The per-task metrics: (group, metric, Kafka Connect's description, value).
const TASK_METRICS: &[(&str, &str, &str, Value)] = &[
    (
        SOURCE_TASK,
        "source-record-poll-total",
        "The total number of records produced/polled (before transformation) by this task belonging to the named source connector in this worker.",
        |v| v.t.polled.get() as f64,
    ),
    (
        SOURCE_TASK,
        "source-record-poll-rate",
        "The average per-second number of records produced/polled (before transformation) by this task belonging to the named source connector in this worker (over the last minute).",
        |v| v.poll_rate.rate(),
    ),
    (
        SOURCE_TASK,
        "source-record-write-total",
        "The number of records output from the transformations and written to Kafka (delivered by the sink) for this task belonging to the named source connector in this worker, since the task was last restarted.",
        |v| v.t.written.get() as f64,
    ),
    (
        SOURCE_TASK,
        "source-record-write-rate",
        "The average per-second number of records output from the transformations and written to Kafka (delivered by the sink) for this task; excludes records filtered out by the transformations (over the last minute).",
        |v| v.write_rate.rate(),
    ),
    (
        SOURCE_TASK,
        "source-record-active-count",
        "The number of records that have been produced by this task but not yet completely written to Kafka.",
        |v| v.t.acks.unacked() as f64,
    ),
    (
        SOURCE_TASK,
        "source-record-active-count-max",
        "The maximum number of records that have been produced by this task but not yet completely written to Kafka (sampled at each poll and delivery batch, over the last minute).",
        |v| v.active.max,
    ),
    (
        SOURCE_TASK,
        "source-record-active-count-avg",
        "The average number of records that have been produced by this task but not yet completely written to Kafka (sampled at each poll and delivery batch, over the last minute).",
        |v| v.active.avg(),
    ),
    (
        SOURCE_TASK,
        "poll-batch-avg-time-ms",
        "The average time in milliseconds taken by this task to poll for a batch of source records (over the last minute).",
        |v| v.poll_time.avg(),
    ),
    (
        SOURCE_TASK,
        "poll-batch-max-time-ms",
        "The maximum time in milliseconds taken by this task to poll for a batch of source records (over the last minute).",
        |v| v.poll_time.max,
    ),
    (
        CONNECTOR_TASK,
        "running-ratio",
        "The fraction of time this task has spent in the running state.",
        |v| v.ratios.0,
    ),
    (
        CONNECTOR_TASK,
        "pause-ratio",
        "The fraction of time this task has spent in the pause state.",
        |v| v.ratios.1,
    ),
    (
        CONNECTOR_TASK,
        "offset-commit-avg-time-ms",
        "The average time in milliseconds taken by this task to commit offsets (over the last minute).",
        |v| v.commit_time.avg(),
    ),
    (
        CONNECTOR_TASK,
        "offset-commit-max-time-ms",
        "The maximum time in milliseconds taken by this task to commit offsets (over the last minute).",
        |v| v.commit_time.max,
    ),
    (
        CONNECTOR_TASK,
        "offset-commit-success-percentage",
        "The average percentage of this task's offset commit attempts that succeeded, as a fraction from 0 to 1 (over the last minute).",
        |v| v.commit_share(true),
    ),
    (
        CONNECTOR_TASK,
        "offset-commit-failure-percentage",
        "The average percentage of this task's offset commit attempts that failed, as a fraction from 0 to 1 (over the last minute).",
        |v| v.commit_share(false),
    ),
    (
        CONNECTOR_TASK,
        "batch-size-avg",
        "The average size of the batches processed by the connector (over the last minute).",
        |v| v.batch_size.avg(),
    ),
    (
        CONNECTOR_TASK,
        "batch-size-max",
        "The maximum size of the batches processed by the connector (over the last minute).",
        |v| v.batch_size.max,
    ),
    (
        TASK_ERROR,
        "total-record-failures",
        "The number of record processing failures in this task.",
        |v| v.t.record_failures.get() as f64,
    ),
    (
        TASK_ERROR,
        "total-record-errors",
        "The number of record processing errors in this task.",
        |v| v.t.record_errors.get() as f64,
    ),
    (
        TASK_ERROR,
        "total-records-skipped",
        "The number of records skipped due to errors.",
        |v| v.t.records_skipped.get() as f64,
    ),
    (
        TASK_ERROR,
        "total-retries",
        "The number of operations retried.",
        |v| v.t.retries.get() as f64,
    ),
    (
        TASK_ERROR,
        "total-errors-logged",
        "The number of errors that were logged.",
        |v| v.t.errors_logged.get() as f64,
    ),
    // A source task has no dead letter queue (Kafka Connect's is for sink connectors only).
    (
        TASK_ERROR,
        "deadletterqueue-produce-requests",
        "The number of attempted writes to the dead letter queue.",
        |_| 0.0,
    ),
    (
        TASK_ERROR,
        "deadletterqueue-produce-failures",
        "The number of failed writes to the dead letter queue.",
        |_| 0.0,
    ),
    (
        TASK_ERROR,
        "last-error-timestamp",
        "The epoch timestamp when this task last encountered an error.",
        |v| v.t.last_error_ms.load(Ordering::Relaxed) as f64,
    ),
];

/// Kafka Connect's lower-case name of a task state (a stopped task is `destroyed` there).
fn state_name(state: TaskState) -> &'static str {
    match state {
        TaskState::Unassigned => "unassigned",
        TaskState::Running => "running",
        TaskState::Paused => "paused",
        TaskState::Failed => "failed",
        TaskState::Stopped => "destroyed",
    }
}

/// Per-connector task counts of `connect-worker-metrics` (labelled `connector`), by state.
const CONNECTOR_TASK_COUNTS: &[(&str, &str, Option<TaskState>)] = &[
    (
        "connector-total-task-count",
        "The number of tasks of the connector on the worker.",
        None,
    ),
    (
        "connector-running-task-count",
        "The number of running tasks of the connector on the worker.",
        Some(TaskState::Running),
    ),
    (
        "connector-paused-task-count",
        "The number of paused tasks of the connector on the worker.",
        Some(TaskState::Paused),
    ),
    (
        "connector-failed-task-count",
        "The number of failed tasks of the connector on the worker.",
        Some(TaskState::Failed),
    ),
    (
        "connector-unassigned-task-count",
        "The number of unassigned tasks of the connector on the worker.",
        Some(TaskState::Unassigned),
    ),
    (
        "connector-destroyed-task-count",
        "The number of destroyed (stopped) tasks of the connector on the worker.",
        Some(TaskState::Stopped),
    ),
];

fn gauge(
    encoder: &mut DescriptorEncoder,
    group: &str,
    metric: &str,
    help: &str,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let name = prom_name(group, metric);
    encoder
        .encode_descriptor(&name, help, None, MetricType::Gauge)?
        .encode_gauge(&value)
}

/// Encodes every Kafka Connect family.
pub fn encode(
    encoder: &mut DescriptorEncoder,
    tasks: &[Arc<TaskMetrics>],
    worker: &WorkerMetrics,
) -> Result<(), std::fmt::Error> {
    let views: Vec<View> = tasks.iter().map(|t| View::of(t)).collect();
    encode_task_families(encoder, &views)?;

    // connect-worker-metrics
    let mut connectors: BTreeMap<&str, Vec<TaskState>> = BTreeMap::new();
    for v in &views {
        connectors
            .entry(v.t.connector.as_str())
            .or_default()
            .push(v.state);
    }
    gauge(
        encoder,
        WORKER,
        "connector-count",
        "The number of connectors run in this worker (connectors with a task on this worker).",
        connectors.len() as f64,
    )?;
    gauge(
        encoder,
        WORKER,
        "task-count",
        "The number of tasks run in this worker.",
        views.len() as f64,
    )?;
    encode_startups(
        encoder,
        "connector",
        &worker.connector_startup_success,
        &worker.connector_startup_failure,
        &worker.connector_startups,
    )?;
    encode_startups(
        encoder,
        "task",
        &worker.task_startup_success,
        &worker.task_startup_failure,
        &worker.task_startups,
    )?;
    encode_connector_task_counts(encoder, &connectors)
}

/// Encodes the per-task families: [`TASK_METRICS`], and each task's status.
fn encode_task_families(
    encoder: &mut DescriptorEncoder,
    views: &[View],
) -> Result<(), std::fmt::Error> {
    for (group, metric, help, value) in TASK_METRICS {
        let name = prom_name(group, metric);
        let mut family = encoder.encode_descriptor(&name, help, None, MetricType::Gauge)?;
        for v in views {
            family
                .encode_family(&v.t.labels())?
                .encode_gauge(&value(v))?;
        }
    }
    // A JMX string attribute: the exporter's rules make it a label of a series valued 1.
    let name = prom_name(CONNECTOR_TASK, "status");
    let mut family = encoder.encode_descriptor(
        &name,
        "The status of the connector task. One of 'unassigned', 'running', 'paused', 'failed', or 'destroyed'.",
        None,
        MetricType::Gauge,
    )?;
    for v in views {
        let [connector, task] = v.t.labels();
        let labels = [connector, task, ("status", state_name(v.state))];
        family.encode_family(&labels)?.encode_gauge(&1u32)?;
    }
    Ok(())
}

/// Encodes the worker's startup counts and success and failure rates of `kind` (`connector` or
/// `task`).
fn encode_startups(
    encoder: &mut DescriptorEncoder,
    kind: &str,
    success: &Counter,
    failure: &Counter,
    window: &Window,
) -> Result<(), std::fmt::Error> {
    let (ok, failed) = (success.get(), failure.get());
    let plural = format!("{kind}s");
    gauge(
        encoder,
        WORKER,
        &format!("{kind}-startup-attempts-total"),
        &format!("The total number of {kind} startups that this worker has attempted."),
        (ok + failed) as f64,
    )?;
    gauge(
        encoder,
        WORKER,
        &format!("{kind}-startup-success-total"),
        &format!("The total number of {kind} starts that succeeded."),
        ok as f64,
    )?;
    gauge(
        encoder,
        WORKER,
        &format!("{kind}-startup-failure-total"),
        &format!("The total number of {kind} starts that failed."),
        failed as f64,
    )?;
    let startups = window.stats();
    let success = if startups.count == 0 {
        0.0
    } else {
        startups.avg()
    };
    gauge(
        encoder,
        WORKER,
        &format!("{kind}-startup-success-percentage"),
        &format!(
            "The average percentage of this worker's {plural} starts that succeeded, as a fraction from 0 to 1 (over the last minute)."
        ),
        success,
    )?;
    gauge(
        encoder,
        WORKER,
        &format!("{kind}-startup-failure-percentage"),
        &format!(
            "The average percentage of this worker's {plural} starts that failed, as a fraction from 0 to 1 (over the last minute)."
        ),
        if startups.count == 0 {
            0.0
        } else {
            1.0 - success
        },
    )
}

/// Encodes [`CONNECTOR_TASK_COUNTS`]: each connector's tasks (their states in `connectors`).
fn encode_connector_task_counts(
    encoder: &mut DescriptorEncoder,
    connectors: &BTreeMap<&str, Vec<TaskState>>,
) -> Result<(), std::fmt::Error> {
    for (metric, help, state) in CONNECTOR_TASK_COUNTS {
        let name = prom_name(WORKER, metric);
        let mut family = encoder.encode_descriptor(&name, help, None, MetricType::Gauge)?;
        for (connector, states) in connectors {
            let count = states
                .iter()
                .filter(|s| state.is_none_or(|want| **s == want))
                .count();
            family
                .encode_family(&[("connector", *connector)])?
                .encode_gauge(&(count as f64))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ferry_offsets::AckTracker;

    use super::super::Metrics;
    use super::super::tests::validate;
    use super::*;
    use crate::status::StatusCell;

    fn value(text: &str, series: &str) -> f64 {
        let prefix = format!("{series} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no series {series} in\n{text}"))
            .parse()
            .expect("a number")
    }

    #[test]
    fn names_follow_the_jmx_exporter_rules() {
        assert_eq!(
            prom_name(SOURCE_TASK, "source-record-poll-total"),
            "kafka_connect_source_task_metrics_source_record_poll_total"
        );
        assert_eq!(
            prom_name(WORKER, "task-count"),
            "kafka_connect_connect_worker_metrics_task_count"
        );
        assert_eq!(
            prom_name(TASK_ERROR, "total-records-skipped"),
            "kafka_connect_task_error_metrics_total_records_skipped"
        );
    }

    #[test]
    fn every_family_is_a_gauge_declared_even_without_tasks() {
        let text = Metrics::new().render();
        validate(&text);
        let mut families: Vec<String> = TASK_METRICS
            .iter()
            .map(|(group, metric, _, _)| prom_name(group, metric))
            .chain(
                CONNECTOR_TASK_COUNTS
                    .iter()
                    .map(|(metric, _, _)| prom_name(WORKER, metric)),
            )
            .collect();
        families.push(prom_name(CONNECTOR_TASK, "status"));
        families.push(prom_name(WORKER, "connector-count"));
        families.push(prom_name(WORKER, "task-count"));
        for kind in ["connector", "task"] {
            for metric in [
                "startup-attempts-total",
                "startup-success-total",
                "startup-failure-total",
                "startup-success-percentage",
                "startup-failure-percentage",
            ] {
                families.push(prom_name(WORKER, &format!("{kind}-{metric}")));
            }
        }
        assert_eq!(families.len(), 44);
        for family in families {
            assert!(
                text.lines().any(|l| l == format!("# TYPE {family} gauge")),
                "missing {family} in\n{text}"
            );
        }
        assert_eq!(
            value(&text, "kafka_connect_connect_worker_metrics_task_count"),
            0.0
        );
    }

    #[test]
    fn a_task_renders_its_kafka_connect_series() {
        let metrics = Arc::new(Metrics::new());
        let acks = AckTracker::new();
        let status = StatusCell::new();
        let series = metrics.register_task("c\"1", 0, acks.clone(), status.clone());
        let _other = metrics.register_task("d", 2, AckTracker::new(), StatusCell::new());
        let t = series.task();
        status.set(TaskState::Running);
        t.polled(4, Duration::from_millis(6));
        t.polled(2, Duration::from_millis(2));
        t.polled(0, Duration::from_millis(100)); // an empty poll is no batch
        let _outstanding = acks.submit(None, None);
        t.written(3);
        t.commit_succeeded(Duration::from_millis(10));
        t.commit_succeeded(Duration::from_millis(30));
        t.commit_skipped();
        t.commit_failed();
        t.record_failure();
        t.record_failure();
        t.record_retry();
        t.record_skipped();
        t.record_error();
        t.error_logged();
        metrics.task_startup(true);
        metrics.task_startup(true);
        metrics.task_startup(true);
        metrics.task_startup(false);
        metrics.connector_startup(true);

        let text = metrics.render();
        validate(&text);
        let l = r#"{connector="c\"1",task="0"}"#;
        let v =
            |group: &str, metric: &str| value(&text, &format!("{}{l}", prom_name(group, metric)));
        assert_eq!(v(SOURCE_TASK, "source-record-poll-total"), 6.0);
        assert_eq!(v(SOURCE_TASK, "source-record-write-total"), 3.0);
        assert_eq!(v(SOURCE_TASK, "source-record-active-count"), 1.0);
        // Sampled at the polls: 0 + 4, then 0 + 2 (nothing was submitted yet).
        assert_eq!(v(SOURCE_TASK, "source-record-active-count-max"), 4.0);
        assert_eq!(v(SOURCE_TASK, "source-record-active-count-avg"), 3.0);
        assert_eq!(v(SOURCE_TASK, "poll-batch-avg-time-ms"), 4.0);
        assert_eq!(v(SOURCE_TASK, "poll-batch-max-time-ms"), 6.0);
        // A task younger than a second: its rate is over one second.
        let rate = v(SOURCE_TASK, "source-record-poll-rate");
        assert!(rate > 0.0 && rate <= 6.0, "{rate}");
        assert!(v(SOURCE_TASK, "source-record-write-rate") > 0.0);
        assert_eq!(v(CONNECTOR_TASK, "batch-size-avg"), 3.0);
        assert_eq!(v(CONNECTOR_TASK, "batch-size-max"), 4.0);
        assert_eq!(v(CONNECTOR_TASK, "offset-commit-avg-time-ms"), 20.0);
        assert_eq!(v(CONNECTOR_TASK, "offset-commit-max-time-ms"), 30.0);
        assert_eq!(v(CONNECTOR_TASK, "offset-commit-success-percentage"), 0.75);
        assert_eq!(v(CONNECTOR_TASK, "offset-commit-failure-percentage"), 0.25);
        let running = v(CONNECTOR_TASK, "running-ratio");
        assert!(running > 0.0 && running <= 1.0, "{running}");
        assert_eq!(v(CONNECTOR_TASK, "pause-ratio"), 0.0);
        assert_eq!(v(TASK_ERROR, "total-record-failures"), 2.0);
        assert_eq!(v(TASK_ERROR, "total-retries"), 1.0);
        assert_eq!(v(TASK_ERROR, "total-records-skipped"), 1.0);
        assert_eq!(v(TASK_ERROR, "total-record-errors"), 1.0);
        assert_eq!(v(TASK_ERROR, "total-errors-logged"), 1.0);
        assert_eq!(v(TASK_ERROR, "deadletterqueue-produce-requests"), 0.0);
        assert!(v(TASK_ERROR, "last-error-timestamp") > 1.6e12);
        assert_eq!(
            value(
                &text,
                r#"kafka_connect_connector_task_metrics_status{connector="c\"1",task="0",status="running"}"#
            ),
            1.0
        );
        // The other task has neither polled nor committed: no average, no maximum.
        let idle = r#"{connector="d",task="2"}"#;
        let avg = value(
            &text,
            &format!(
                "{}{idle}",
                prom_name(CONNECTOR_TASK, "offset-commit-avg-time-ms")
            ),
        );
        assert!(avg.is_nan());
        assert_eq!(
            value(
                &text,
                &format!(
                    "{}{idle}",
                    prom_name(CONNECTOR_TASK, "offset-commit-success-percentage")
                )
            ),
            0.0
        );
        assert_eq!(
            value(
                &text,
                r#"kafka_connect_connector_task_metrics_status{connector="d",task="2",status="unassigned"}"#
            ),
            1.0
        );
        assert_eq!(
            text.matches("kafka_connect_connector_task_metrics_status{")
                .count(),
            2
        );

        let w = |metric: &str| value(&text, &prom_name(WORKER, metric));
        assert_eq!(w("task-count"), 2.0);
        assert_eq!(w("connector-count"), 2.0);
        assert_eq!(w("task-startup-attempts-total"), 4.0);
        assert_eq!(w("task-startup-success-total"), 3.0);
        assert_eq!(w("task-startup-failure-total"), 1.0);
        assert_eq!(w("task-startup-success-percentage"), 0.75);
        assert_eq!(w("task-startup-failure-percentage"), 0.25);
        assert_eq!(w("connector-startup-attempts-total"), 1.0);
        assert_eq!(w("connector-startup-success-percentage"), 1.0);
        assert_eq!(w("connector-startup-failure-total"), 0.0);
        let c = r#"{connector="c\"1"}"#;
        let count = |metric: &str| value(&text, &format!("{}{c}", prom_name(WORKER, metric)));
        assert_eq!(count("connector-total-task-count"), 1.0);
        assert_eq!(count("connector-running-task-count"), 1.0);
        assert_eq!(count("connector-paused-task-count"), 0.0);

        // A paused task counts as paused; a stopped one is Kafka Connect's `destroyed`.
        status.set(TaskState::Paused);
        let text = metrics.render();
        assert_eq!(
            value(
                &text,
                &format!("{}{c}", prom_name(WORKER, "connector-paused-task-count"))
            ),
            1.0
        );
        status.set(TaskState::Stopped);
        assert!(metrics.render().contains(
            r#"kafka_connect_connector_task_metrics_status{connector="c\"1",task="0",status="destroyed"} 1"#
        ));

        drop(series);
        let text = metrics.render();
        assert!(!text.contains(r#"connector="c\"1""#), "{text}");
        assert_eq!(
            value(&text, "kafka_connect_connect_worker_metrics_task_count"),
            1.0
        );
    }
}
