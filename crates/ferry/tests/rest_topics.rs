//! KIP-558 active topics and KIP-495 log levels over the REST API of a running `ferry standalone`:
//! a FileStreamSource writing to the file sink has the topic of its acknowledged records listed by
//! `GET /connectors/{name}/topics`, a reset clears it, deleting the connector clears it, and the
//! `topic.tracking.*` keys answer 403 as Kafka Connect does; `PUT /admin/loggers/{name}` makes debug
//! lines of that target appear and `GET /admin/loggers` shows the level.

mod rest_support;
mod support;

use rest_support::Api;
use serde_json::{Value, json};
use support::{Ferry, SinkTail, Workspace, path_str};

fn file_source(ws: &Workspace, api: &Api, name: &str, topic: &str) -> std::path::PathBuf {
    let input = ws.write(&format!("{name}.txt"), "a\nb\n");
    let config = json!({
        "connector.class": "FileStreamSource",
        "file": path_str(&input),
        "topic": topic,
    });
    api.post(
        "/connectors",
        Some(&json!({"name": name, "config": config}).to_string()),
    )
    .expect(201);
    input
}

fn topics(api: &Api, name: &str) -> Value {
    api.get(&format!("/connectors/{name}/topics")).expect(200)
}

#[test]
fn active_topics_are_listed_after_records_flow_and_reset_clears_them() {
    let ws = Workspace::new();
    let worker = ws.worker(100, &[]);
    let mut ferry = Ferry::standalone(&ws, "ferry", &worker, &[]);
    let api = Api::new(&ferry.rest_url());

    // Nothing written yet: an unknown connector has no active topics (Kafka Connect: 200, empty).
    assert_eq!(topics(&api, "lines"), json!({"lines": {"topics": []}}));

    let input = file_source(&ws, &api, "lines", "text-lines");
    let mut sink = SinkTail::new(&ws.sink_path());
    sink.wait_for(&mut ferry, 2);
    ferry.wait_until("the topic listed as active", || {
        (topics(&api, "lines") == json!({"lines": {"topics": ["text-lines"]}})).then_some(())
    });

    // Reset: 202, then nothing listed until a record is written to it again.
    assert_eq!(
        api.put("/connectors/lines/topics/reset", None).expect(202),
        Value::Null
    );
    assert_eq!(topics(&api, "lines"), json!({"lines": {"topics": []}}));
    support::append(&input, b"c\n");
    sink.wait_for(&mut ferry, 1);
    ferry.wait_until("the topic listed again", || {
        (topics(&api, "lines") == json!({"lines": {"topics": ["text-lines"]}})).then_some(())
    });

    // Deleting the connector forgets its topics.
    api.delete("/connectors/lines").expect(204);
    assert_eq!(topics(&api, "lines"), json!({"lines": {"topics": []}}));
    ferry.terminate_cleanly();
}

#[test]
fn topic_tracking_keys_disable_the_endpoints_with_kafka_connects_403() {
    let ws = Workspace::new();
    let worker = ws.worker(100, &[("topic.tracking.allow.reset", "false")]);
    let mut ferry = Ferry::standalone(&ws, "no-reset", &worker, &[]);
    let api = Api::new(&ferry.rest_url());
    file_source(&ws, &api, "lines", "t");
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, 2);
    ferry.wait_until("the topic listed", || {
        (topics(&api, "lines") == json!({"lines": {"topics": ["t"]}})).then_some(())
    });
    api.put("/connectors/lines/topics/reset", None)
        .expect_error(403, "Topic tracking reset is disabled.");
    assert_eq!(topics(&api, "lines"), json!({"lines": {"topics": ["t"]}}));
    ferry.terminate_cleanly();

    let ws = Workspace::new();
    let worker = ws.worker(100, &[("topic.tracking.enable", "false")]);
    let mut ferry = Ferry::standalone(&ws, "no-tracking", &worker, &[]);
    let api = Api::new(&ferry.rest_url());
    file_source(&ws, &api, "lines", "t");
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, 2);
    api.get("/connectors/lines/topics")
        .expect_error(403, "Topic tracking is disabled.");
    api.put("/connectors/lines/topics/reset", None)
        .expect_error(403, "Topic tracking is disabled.");
    ferry.terminate_cleanly();
}

#[test]
fn a_logger_set_to_debug_logs_debug_lines_and_is_listed() {
    let ws = Workspace::new();
    let worker = ws.worker(100, &[]);
    let input = ws.write("in.txt", "a\n");
    let connector = ws.properties(
        "c.properties",
        &[
            ("name", "c"),
            ("connector.class", "FileStreamSource"),
            ("file", &path_str(&input)),
            ("topic", "t"),
        ],
    );
    let mut ferry = Ferry::standalone(&ws, "ferry", &worker, &[&connector]);
    let api = Api::new(&ferry.rest_url());
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, 1);

    // The process runs at RUST_LOG=info: root is INFO, and the idle commits log nothing.
    let all = api.get("/admin/loggers").expect(200);
    assert_eq!(all["root"], json!({"level": "INFO", "last_modified": null}));
    assert!(!ferry.log().contains("nothing to commit"));

    let changed = api
        .put(
            "/admin/loggers/ferry_runtime::worker",
            Some(r#"{"level":"debug"}"#),
        )
        .expect(200);
    assert_eq!(changed, json!(["ferry_runtime::worker"]));
    // The commit loop (ferry_runtime::worker::commit) now logs its idle commits at DEBUG.
    ferry.wait_for_log("nothing to commit");

    let own = api.get("/admin/loggers/ferry_runtime::worker").expect(200);
    assert_eq!(own["level"], "DEBUG");
    assert!(
        own["last_modified"].as_i64().is_some_and(|t| t > 0),
        "{own}"
    );
    // A child inherits it; the list shows it with root.
    assert_eq!(
        api.get("/admin/loggers/ferry_runtime::worker::commit")
            .expect(200)["level"],
        "DEBUG"
    );
    let all = api.get("/admin/loggers").expect(200);
    assert_eq!(all["ferry_runtime::worker"]["level"], "DEBUG");
    assert_eq!(all["root"]["level"], "INFO");

    // Standalone is the whole cluster: scope=cluster changes this worker and answers 204.
    assert_eq!(
        api.put(
            "/admin/loggers/ferry_kafka?scope=cluster",
            Some(r#"{"level":"WARN"}"#)
        )
        .expect(204),
        Value::Null
    );
    assert_eq!(
        api.get("/admin/loggers/ferry_kafka").expect(200)["level"],
        "WARN"
    );

    // Kafka Connect's errors: no level → 400, an unknown level → 404.
    api.put("/admin/loggers/x", Some("{}")).expect_error(
        400,
        "Desired 'level' parameter was not specified in request.",
    );
    api.put("/admin/loggers/x", Some(r#"{"level":"LOUD"}"#))
        .expect_error(404, "invalid log level 'LOUD'.");
    ferry.terminate_cleanly();
}
