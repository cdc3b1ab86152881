//! `GET /metrics` of a running `ferry standalone`: a source task's Kafka Connect metrics are found
//! under the names the Prometheus JMX exporter's Kafka Connect rules give them, so a dashboard's query
//! for `kafka_connect_source_task_metrics_source_record_poll_total` finds Ferry's tasks; Ferry's own
//! series stay beside them.

mod rest_support;
mod support;

use rest_support::Api;
use serde_json::json;
use support::{Ferry, Workspace};

/// The value of the series `series` (name and labels as rendered) in a scrape.
fn sample(body: &str, series: &str) -> Option<f64> {
    let prefix = format!("{series} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.parse().ok())
}

#[test]
fn a_running_task_is_found_by_its_kafka_connect_metric_names() {
    let ws = Workspace::new();
    let worker = ws.worker(100, &[]);
    let mut ferry = Ferry::standalone(&ws, "ferry", &worker, &[]);
    let api = Api::new(&ferry.rest_url());
    let config = json!({
        "connector.class": "SequenceSource",
        "topic": "numbers",
        "partitions": "2",
        "tasks.max": "2",
        "records.per.partition": "5",
    });
    api.post(
        "/connectors",
        Some(&json!({"name": "seq", "config": config}).to_string()),
    )
    .expect(201);

    let body = ferry.wait_until("both tasks polled and wrote records", || {
        let reply = api.get("/metrics");
        assert_eq!(reply.status, 200, "{reply:?}");
        let body = reply.body;
        let all = (0..2).all(|task| {
            let labels = format!("{{connector=\"seq\",task=\"{task}\"}}");
            let polled = sample(
                &body,
                &format!("kafka_connect_source_task_metrics_source_record_poll_total{labels}"),
            );
            let written = sample(
                &body,
                &format!("kafka_connect_source_task_metrics_source_record_write_total{labels}"),
            );
            // Ferry's own series of the same scrape too (once seen at 0 in a CI run whose Kafka
            // Connect-named counter was already past 0; asked for here, not assumed).
            let own = sample(&body, &format!("ferry_source_records_polled_total{labels}"));
            polled.is_some_and(|v| v > 0.0)
                && written.is_some_and(|v| v > 0.0)
                && own.is_some_and(|v| v > 0.0)
        });
        all.then_some(body)
    });
    assert!(
        body.contains("# TYPE kafka_connect_source_task_metrics_source_record_poll_total gauge\n"),
        "{body}"
    );
    assert_eq!(
        sample(&body, "kafka_connect_connect_worker_metrics_task_count"),
        Some(2.0),
        "{body}"
    );
    assert_eq!(
        sample(
            &body,
            r#"kafka_connect_connector_task_metrics_status{connector="seq",task="0",status="running"}"#
        ),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        sample(
            &body,
            "kafka_connect_connect_worker_metrics_connector_startup_success_total"
        ),
        Some(1.0),
        "{body}"
    );
    // Ferry's own series are still there.
    assert!(
        sample(
            &body,
            r#"ferry_source_records_polled_total{connector="seq",task="0"}"#
        )
        .is_some_and(|v| v > 0.0),
        "{body}"
    );

    ferry.terminate_cleanly();
}
