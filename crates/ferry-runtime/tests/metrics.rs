//! `Worker::metrics().render()` against a running worker over a `MemoryStore` (behind the worker tests'
//! failure-injecting wrapper) and a sink whose deliveries the test controls: per-task record and
//! commit series, outstanding records, store latency, and series going away with their connector;
//! Kafka Connect's series under the Prometheus JMX exporter's names.

// The worker tests' support, shared; this binary uses only part of what it re-exports.
#[allow(unused_imports)]
#[path = "worker/support/mod.rs"]
mod support;

use std::sync::Arc;

use ferry_runtime::metrics::Metrics;
use ferry_runtime::{Worker, WorkerSettings};
use support::{Harness, Probe, TestConnector, TestSink, TestStore, eventually, fast, partition};

/// One scrape.
struct Scrape(String);

impl Scrape {
    fn of(worker: &Worker) -> Self {
        let text = worker.metrics().render();
        check_shape(&text);
        Self(text)
    }

    /// The value of the series `name{labels}`, if present.
    fn get(&self, name: &str, labels: &str) -> Option<f64> {
        let prefix = format!("{name}{{{labels}}} ");
        self.0.lines().find_map(|l| {
            l.strip_prefix(&prefix)
                .map(|v| v.parse().expect("sample values parse"))
        })
    }

    /// A per-task series of task `task` of `connector`; 0 when absent.
    fn task(&self, name: &str, connector: &str, task: usize) -> f64 {
        self.get(name, &format!("connector=\"{connector}\",task=\"{task}\""))
            .unwrap_or(0.0)
    }

    fn store(&self, name: &str) -> f64 {
        self.get(name, "store=\"test store\"").unwrap_or(0.0)
    }
}

/// Every line is a `# HELP`/`# TYPE` comment or `name[{labels}] value` with a parsable value (the full
/// format check is the crate's unit test).
fn check_shape(text: &str) {
    for line in text.lines() {
        if line.starts_with("# HELP ") || line.starts_with("# TYPE ") {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value: {line:?}"));
        assert!(
            value == "+Inf" || value.parse::<f64>().is_ok(),
            "bad value in {line:?}"
        );
        assert!(
            (series.starts_with("ferry_") || series.starts_with("kafka_connect_"))
                && (!series.contains('{') || series.ends_with('}')),
            "bad series in {line:?}"
        );
    }
}

const POLLED: &str = "ferry_source_records_polled_total";
const ACKED: &str = "ferry_source_records_acknowledged_total";
const OUTSTANDING: &str = "ferry_source_records_outstanding";
const COMMITS: &str = "ferry_offset_commits_total";
const FAILURES: &str = "ferry_offset_commit_failures_total";
const LAST: &str = "ferry_offset_commit_last_duration_seconds";
const DURATION_COUNT: &str = "ferry_offset_commit_duration_seconds_count";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_acks_commits_and_store_calls_are_counted_per_task() {
    let h = Harness::new(fast());
    let probe = Probe::new();
    probe.look_up(vec![partition("a")]);
    h.start("metered", false, &probe);

    probe.push(support::records("a", 1..=5));
    h.wait_committed("metered", "a", 5).await;
    let w = &h.worker;
    eventually(
        "5 polled, 5 acknowledged, none outstanding, a commit",
        || {
            let s = Scrape::of(w);
            s.task(POLLED, "metered", 0) == 5.0
                && s.task(ACKED, "metered", 0) == 5.0
                && s.task(OUTSTANDING, "metered", 0) == 0.0
                && s.task(COMMITS, "metered", 0) >= 1.0
                && s.task(DURATION_COUNT, "metered", 0) >= 1.0
        },
    )
    .await;
    let s = Scrape::of(w);
    assert_eq!(s.task(FAILURES, "metered", 0), 0.0, "{}", s.0);
    assert!(s.task(LAST, "metered", 0) > 0.0, "{}", s.0);
    assert_eq!(
        s.get(
            "ferry_task_state",
            r#"connector="metered",task="0",state="RUNNING""#
        ),
        Some(1.0)
    );
    assert!(s.store("ferry_offset_store_set_duration_seconds_count") >= 1.0);
    assert!(
        s.store("ferry_offset_store_get_duration_seconds_count") >= 1.0,
        "start() looked up a partition"
    );
    assert_eq!(
        s.get(
            "ferry_offset_store_errors_total",
            r#"store="test store",operation="set""#
        ),
        Some(0.0)
    );

    // A record the sink holds stays outstanding across commits.
    h.sink.hold(&["b:1"]);
    probe.push(vec![support::record("b", 1)]);
    eventually("b:1 polled and outstanding", || {
        let s = Scrape::of(w);
        s.task(POLLED, "metered", 0) == 6.0 && s.task(OUTSTANDING, "metered", 0) == 1.0
    })
    .await;
    probe.wait_commits(2).await;
    let s = Scrape::of(w);
    assert_eq!(s.task(OUTSTANDING, "metered", 0), 1.0, "{}", s.0);
    assert_eq!(s.task(ACKED, "metered", 0), 5.0, "{}", s.0);

    h.sink.resolve("b:1");
    eventually("b:1 acknowledged", || {
        let s = Scrape::of(w);
        s.task(ACKED, "metered", 0) == 6.0 && s.task(OUTSTANDING, "metered", 0) == 0.0
    })
    .await;

    // Stopping the connector removes its series once its tasks are gone; the store's stay.
    h.stop("metered").await;
    let s = Scrape::of(w);
    assert!(!s.0.contains("connector=\"metered\""), "{}", s.0);
    assert!(s.store("ferry_offset_store_set_duration_seconds_count") >= 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_commits_are_counted_and_not_timed() {
    let h = Harness::new(fast());
    let probe = Probe::new();
    h.store.fail_sets(true);
    h.start("failing", false, &probe);
    probe.push(support::records("a", 1..=3));
    let w = &h.worker;
    eventually("commit failures and store set errors", || {
        let s = Scrape::of(w);
        s.task(ACKED, "failing", 0) == 3.0
            && s.task(FAILURES, "failing", 0) >= 2.0
            && s.get(
                "ferry_offset_store_errors_total",
                r#"store="test store",operation="set""#,
            )
            .is_some_and(|v| v >= 2.0)
    })
    .await;
    let s = Scrape::of(w);
    assert_eq!(s.task(COMMITS, "failing", 0), 0.0, "{}", s.0);
    assert_eq!(s.task(DURATION_COUNT, "failing", 0), 0.0, "{}", s.0);
    assert_eq!(s.task(LAST, "failing", 0), 0.0, "{}", s.0);

    h.store.fail_sets(false);
    h.wait_committed("failing", "a", 3).await;
    eventually("a successful commit", || {
        Scrape::of(w).task(COMMITS, "failing", 0) >= 1.0
    })
    .await;
    h.worker.shutdown().await;
    assert!(!Scrape::of(w).0.contains("connector=\"failing\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_task_has_its_own_series_and_a_shared_registry_is_used() {
    support::init_logs();
    let metrics = Arc::new(Metrics::new());
    let settings = WorkerSettings {
        metrics: metrics.clone(),
        ..fast()
    };
    let store = TestStore::new();
    let worker = Arc::new(Worker::new(settings, store, TestSink::new()));
    assert!(Arc::ptr_eq(&worker.metrics(), &metrics));

    let probes = vec![Probe::new(), Probe::new()];
    let spec = ferry_runtime::ConnectorSpec {
        name: "two".to_owned(),
        tasks_max: 2,
        tolerate_delivery_errors: false,
        transforms: Default::default(),
        error_handling: Default::default(),
        secrets: Vec::new(),
        config: ferry_api::Config::new(),
    };
    worker
        .start_connector(spec, &TestConnector::with_tasks(probes.clone()))
        .expect("connector starts");
    probes[0].push(support::records("x", 1..=2));
    probes[1].push(support::records("y", 1..=3));
    eventually("each task's own counts", || {
        let s = Scrape::of(&worker);
        s.task(POLLED, "two", 0) + s.task(POLLED, "two", 1) == 5.0
            && s.task(ACKED, "two", 0) + s.task(ACKED, "two", 1) == 5.0
    })
    .await;
    let s = Scrape::of(&worker);
    let mut polled = [s.task(POLLED, "two", 0), s.task(POLLED, "two", 1)];
    polled.sort_by(f64::total_cmp);
    assert_eq!(polled, [2.0, 3.0], "{}", s.0);
    assert_eq!(
        metrics
            .render()
            .matches("ferry_source_records_polled_total{")
            .count(),
        2
    );
    worker.shutdown().await;
    assert!(!metrics.render().contains("connector=\"two\""));
}

/// Kafka Connect's series as the JMX exporter names them (`kafka_connect_<group>_<metric>`).
const POLL_TOTAL: &str = "kafka_connect_source_task_metrics_source_record_poll_total";
const WRITE_TOTAL: &str = "kafka_connect_source_task_metrics_source_record_write_total";
const ACTIVE: &str = "kafka_connect_source_task_metrics_source_record_active_count";
const FAILED_RECORDS: &str = "kafka_connect_task_error_metrics_total_record_failures";
const SKIPPED: &str = "kafka_connect_task_error_metrics_total_records_skipped";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_task_shows_up_under_kafka_connect_names() {
    let h = Harness::new(fast());
    let probe = Probe::new();
    h.start("kc", true, &probe);
    let w = &h.worker;

    // The dashboards' query: kafka_connect_source_task_metrics_source_record_poll_total finds the task.
    probe.push(support::records("a", 1..=4));
    eventually("4 polled and written under Kafka Connect's names", || {
        let s = Scrape::of(w);
        s.task(POLL_TOTAL, "kc", 0) == 4.0 && s.task(WRITE_TOTAL, "kc", 0) == 4.0
    })
    .await;
    let s = Scrape::of(w);
    assert!(
        s.0.lines().any(|l| l.starts_with(
            r#"kafka_connect_source_task_metrics_source_record_poll_total{connector="kc",task="0"} "#
        )),
        "{}",
        s.0
    );
    assert!(
        s.task(
            "kafka_connect_source_task_metrics_source_record_poll_rate",
            "kc",
            0
        ) > 0.0
    );
    assert_eq!(
        s.task(
            "kafka_connect_connector_task_metrics_batch_size_max",
            "kc",
            0
        ),
        4.0
    );
    assert_eq!(
        s.get(
            "kafka_connect_connector_task_metrics_status",
            r#"connector="kc",task="0",status="running""#
        ),
        Some(1.0),
        "{}",
        s.0
    );
    let worker_metric = |s: &Scrape, name: &str| -> f64 {
        let prefix = format!("kafka_connect_connect_worker_metrics_{name} ");
        s.0.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no worker metric {name} in\n{}", s.0))
    };
    assert_eq!(worker_metric(&s, "task_count"), 1.0);
    assert_eq!(worker_metric(&s, "connector_count"), 1.0);
    assert_eq!(worker_metric(&s, "task_startup_success_total"), 1.0);
    assert_eq!(worker_metric(&s, "task_startup_failure_total"), 0.0);
    eventually("an offset commit counted as a success", || {
        Scrape::of(w).task(
            "kafka_connect_connector_task_metrics_offset_commit_success_percentage",
            "kc",
            0,
        ) == 1.0
    })
    .await;

    // A delivery failure tolerated (errors.tolerance=all): a failure and a skipped record, not a write.
    h.sink.hold(&["b:1"]);
    probe.push(vec![support::record("b", 1)]);
    eventually("b:1 active", || Scrape::of(w).task(ACTIVE, "kc", 0) == 1.0).await;
    h.sink.fail("b:1", "refused");
    eventually("b:1 skipped", || {
        let s = Scrape::of(w);
        s.task(SKIPPED, "kc", 0) == 1.0 && s.task(ACTIVE, "kc", 0) == 0.0
    })
    .await;
    let s = Scrape::of(w);
    assert_eq!(s.task(FAILED_RECORDS, "kc", 0), 1.0, "{}", s.0);
    assert_eq!(s.task(POLL_TOTAL, "kc", 0), 5.0, "{}", s.0);
    assert_eq!(s.task(WRITE_TOTAL, "kc", 0), 4.0, "{}", s.0);
    assert!(
        s.task(
            "kafka_connect_task_error_metrics_last_error_timestamp",
            "kc",
            0
        ) > 0.0,
        "{}",
        s.0
    );

    h.stop("kc").await;
    let s = Scrape::of(w);
    assert!(!s.0.contains("connector=\"kc\""), "{}", s.0);
    assert_eq!(worker_metric(&s, "task_count"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tolerated_transform_errors_are_counted_as_kafka_connect_counts_them() {
    use ferry_runtime::transforms::{ErrorHandling, TransformRegistry, Transforms};

    let h = Harness::new(fast());
    let probe = Probe::new();
    // The second step needs a map and gets the string the first extracted: every record fails there.
    let config = ferry_api::Config::from([
        ("transforms".to_owned(), "first,second".to_owned()),
        (
            "transforms.first.type".to_owned(),
            "org.apache.kafka.connect.transforms.ExtractField$Value".to_owned(),
        ),
        ("transforms.first.field".to_owned(), "p".to_owned()),
        (
            "transforms.second.type".to_owned(),
            "org.apache.kafka.connect.transforms.ExtractField$Value".to_owned(),
        ),
        ("transforms.second.field".to_owned(), "x".to_owned()),
    ]);
    let transforms =
        Transforms::parse(&config, &TransformRegistry::default()).expect("transforms parse");
    let spec = ferry_runtime::ConnectorSpec {
        name: "bad".to_owned(),
        tasks_max: 1,
        tolerate_delivery_errors: true,
        transforms,
        error_handling: ErrorHandling {
            log: true,
            ..ErrorHandling::default()
        },
        secrets: Vec::new(),
        config,
    };
    h.worker
        .start_connector(spec, &TestConnector::new(&probe))
        .expect("connector starts");
    probe.push(support::records("a", 1..=3));
    let w = &h.worker;
    eventually("3 records skipped", || {
        Scrape::of(w).task(SKIPPED, "bad", 0) == 3.0
    })
    .await;
    let s = Scrape::of(w);
    assert_eq!(s.task(FAILED_RECORDS, "bad", 0), 3.0, "{}", s.0);
    assert_eq!(
        s.task(
            "kafka_connect_task_error_metrics_total_errors_logged",
            "bad",
            0
        ),
        3.0,
        "{}",
        s.0
    );
    assert_eq!(
        s.task(
            "kafka_connect_task_error_metrics_total_record_errors",
            "bad",
            0
        ),
        0.0,
        "tolerated: {}",
        s.0
    );
    assert_eq!(s.task(POLL_TOTAL, "bad", 0), 3.0, "{}", s.0);
    assert_eq!(
        s.task(WRITE_TOTAL, "bad", 0),
        0.0,
        "nothing written: {}",
        s.0
    );
    h.stop("bad").await;
}
