//! The REST API of a running `ferry standalone`, over HTTP: every endpoint's status codes and bodies
//! in Kafka Connect's shapes, restart and pause/resume as the status shows them, errors (unknown
//! connector, bad JSON, oversize body, unknown path) in Kafka Connect's error body, and the optional
//! bearer token.

mod rest_support;
mod support;

use rest_support::{Api, Reply};
use serde_json::{Value, json};
use support::{Ferry, Workspace, wait_until};

/// Waits until the connector's status (and each task's) is `state`.
fn wait_state(ferry: &mut Ferry, api: &Api, name: &str, state: &str, tasks: usize) -> Value {
    ferry.wait_until(format!("{name} {state} with {tasks} task(s)"), || {
        let status = api.get(&format!("/connectors/{name}/status")).json();
        let all = status["tasks"]
            .as_array()
            .is_some_and(|t| t.len() == tasks && t.iter().all(|t| t["state"] == state));
        (status["connector"]["state"] == state && all).then_some(status)
    })
}

fn sequence_config(name: &str, partitions: u32) -> Value {
    json!({
        "connector.class": "SequenceSource",
        "name": name,
        "topic": "numbers",
        "partitions": partitions.to_string(),
        "tasks.max": partitions.to_string(),
        "records.per.partition": "5",
    })
}

#[test]
fn every_endpoint_answers_as_kafka_connect_does() {
    let ws = Workspace::new();
    let worker = ws.worker(100, &[]);
    // No connector file: everything is created over REST.
    let mut ferry = Ferry::standalone(&ws, "ferry", &worker, &[]);
    let base = ferry.rest_url();
    let api = Api::new(&base);
    let worker_id = base.trim_start_matches("http://").to_owned();

    // GET /
    let root = api.get("/").expect(200);
    assert!(
        root["version"].is_string() && root["commit"].is_string(),
        "{root}"
    );
    assert_eq!(api.get("/connectors").expect(200), json!([]));

    // Plugins.
    let plugins = api.get("/connector-plugins").expect(200);
    assert!(
        plugins.as_array().is_some_and(|p| p.contains(&json!({
            "class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "type": "source",
            "version": root["version"],
        }))),
        "{plugins}"
    );
    assert!(
        plugins
            .as_array()
            .is_some_and(|p| p.iter().all(|p| p["type"] == "source"))
    );
    let all = api
        .get("/connector-plugins?connectorsOnly=false")
        .expect(200);
    assert!(
        all.as_array()
            .is_some_and(|p| p.iter().any(|p| p["type"] == "converter")),
        "{all}"
    );
    // Transformations and predicates too, by Kafka Connect's class names.
    for (class, kind) in [
        (
            "org.apache.kafka.connect.transforms.InsertField$Value",
            "transformation",
        ),
        (
            "org.apache.kafka.connect.transforms.HoistField$Key",
            "transformation",
        ),
        (
            "org.apache.kafka.connect.transforms.Filter",
            "transformation",
        ),
        (
            "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
            "predicate",
        ),
    ] {
        assert!(
            all.as_array()
                .is_some_and(|p| p.iter().any(|p| p["class"] == class && p["type"] == kind)),
            "{class} listed as {kind}: {all}"
        );
    }

    // Validate: a valid configuration, then one with two errors.
    let input = ws.write("input.txt", "one\n");
    // Named: a validation without `name` reports it missing, as Kafka Connect 4.4's does.
    let file_config = json!({
        "name": "lines-source",
        "connector.class": "FileStreamSource",
        "file": input.display().to_string(),
        "topic": "lines",
    });
    let valid = api
        .put(
            "/connector-plugins/FileStreamSource/config/validate",
            Some(&file_config.to_string()),
        )
        .expect(200);
    assert_eq!(valid["name"], "FileStreamSource");
    assert_eq!(valid["error_count"], 0, "{valid}");
    let file_key = valid["configs"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["definition"]["name"] == "file"))
        .unwrap_or_else(|| panic!("no \"file\" key in {valid}"));
    assert_eq!(file_key["value"]["value"], input.display().to_string());
    assert_eq!(file_key["value"]["errors"], json!([]));
    let bad = json!({"name": "bad", "connector.class": "FileStreamSource", "file": "x", "batch.size": "-3"});
    let invalid = api
        .put(
            "/connector-plugins/FileStreamSourceConnector/config/validate",
            Some(&bad.to_string()),
        )
        .expect(200);
    assert_eq!(invalid["error_count"], 2, "{invalid}");
    for key in ["topic", "batch.size"] {
        let entry = invalid["configs"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["definition"]["name"] == key))
            .unwrap_or_else(|| panic!("no {key} in {invalid}"));
        assert_eq!(
            entry["value"]["errors"].as_array().map(Vec::len),
            Some(1),
            "{entry}"
        );
    }
    // A transform's keys are validated too, under their alias's prefix (as Kafka Connect's).
    let mut with_transform = file_config.clone();
    with_transform["transforms"] = json!("MakeMap");
    with_transform["transforms.MakeMap.type"] =
        json!("org.apache.kafka.connect.transforms.HoistField$Value");
    let checked = api
        .put(
            "/connector-plugins/FileStreamSource/config/validate",
            Some(&with_transform.to_string()),
        )
        .expect(200);
    assert_eq!(checked["error_count"], 1, "{checked}");
    let field = checked["configs"]
        .as_array()
        .and_then(|c| {
            c.iter()
                .find(|c| c["definition"]["name"] == "transforms.MakeMap.field")
        })
        .unwrap_or_else(|| panic!("no transforms.MakeMap.field in {checked}"));
    assert!(
        field["value"]["errors"][0]
            .as_str()
            .is_some_and(|e| e.contains("field")),
        "{field}"
    );
    with_transform["transforms.MakeMap.field"] = json!("line");
    let checked = api
        .put(
            "/connector-plugins/FileStreamSource/config/validate",
            Some(&with_transform.to_string()),
        )
        .expect(200);
    assert_eq!(checked["error_count"], 0, "{checked}");
    api.put(
        "/connector-plugins/SequenceSource/config/validate",
        Some(&file_config.to_string()),
    )
    .expect_error(
        400,
        "Included connector type FileStreamSource does not match request type SequenceSource",
    );
    api.put(
        "/connector-plugins/FileStreamSource/config/validate",
        Some("{\"topic\":\"t\"}"),
    )
    .expect_error(400, "contains no connector type");

    // Create: refused configurations change nothing.
    let invalid_create = json!({"name": "seq", "config": {"connector.class": "SequenceSource"}});
    api.post("/connectors", Some(&invalid_create.to_string())).expect_error(
        400,
        "Connector configuration is invalid and contains the following 1 error(s):\nMissing required configuration \"topic\"",
    );
    let unknown_class = json!({"name": "x", "config": {"connector.class": "NoSuchSource"}});
    api.post("/connectors", Some(&unknown_class.to_string()))
        .expect_error(400, "Failed to find any class that implements Connector and which name matches NoSuchSource");
    let mismatch = json!({"name": "seq", "config": {"name": "other", "connector.class": "SequenceSource", "topic": "t"}});
    api.post("/connectors", Some(&mismatch.to_string()))
        .expect_error(
            400,
            "Connector name configuration (other) doesn't match connector name in the URL (seq)",
        );
    assert_eq!(api.get("/connectors").expect(200), json!([]));

    // Create.
    let mut config = sequence_config("seq", 1);
    config.as_object_mut().map(|c| c.remove("name"));
    let created = api.post(
        "/connectors",
        Some(&json!({"name": " seq ", "config": config}).to_string()),
    );
    let info = created.expect(201);
    assert_eq!(created.location.as_deref(), Some("/connectors/seq"));
    assert_eq!(
        info,
        json!({
            "name": "seq",
            "config": sequence_config("seq", 1),
            "tasks": [{"connector": "seq", "task": 0}],
            "type": "source",
        })
    );
    api.post(
        "/connectors",
        Some(&json!({"name": "seq", "config": sequence_config("seq", 1)}).to_string()),
    )
    .expect_error(409, "Connector seq already exists");

    // Read it back.
    assert_eq!(api.get("/connectors").expect(200), json!(["seq"]));
    assert_eq!(api.get("/connectors/seq").expect(200), info);
    assert_eq!(
        api.get("/connectors/seq/config").expect(200),
        sequence_config("seq", 1)
    );
    let tasks = api.get("/connectors/seq/tasks").expect(200);
    assert_eq!(
        tasks[0]["id"],
        json!({"connector": "seq", "task": 0}),
        "{tasks}"
    );
    assert_eq!(
        tasks[0]["config"]["connector.class"], "SequenceSource",
        "{tasks}"
    );
    let status = wait_state(&mut ferry, &api, "seq", "RUNNING", 1);
    // The connector plugin's version, as Kafka Connect 4.x reports it (SequenceSource: Ferry's).
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        status,
        json!({
            "name": "seq",
            "connector": {"state": "RUNNING", "worker_id": worker_id, "version": version},
            "tasks": [{"id": 0, "state": "RUNNING", "worker_id": worker_id, "version": version}],
            "type": "source",
        })
    );
    assert_eq!(
        api.get("/connectors/seq/tasks/0/status").expect(200),
        json!({"id": 0, "state": "RUNNING", "worker_id": worker_id, "version": version})
    );
    api.get("/connectors/seq/tasks/7/status")
        .expect_error(404, "No status found for task seq-7");
    api.get("/connectors/seq/tasks/x/status")
        .expect_error(404, "HTTP 404 Not Found");
    let expanded = api.get("/connectors?expand=status").expect(200);
    assert_eq!(expanded, json!({"seq": {"status": status}}));
    let both = api.get("/connectors?expand=status&expand=info").expect(200);
    assert_eq!(both, json!({"seq": {"status": status, "info": info}}));
    assert_eq!(
        api.get("/connectors?expand=info").expect(200),
        json!({"seq": {"info": info}})
    );

    // Pause and resume, as the status shows them.
    assert_eq!(api.put("/connectors/seq/pause", None).status, 202);
    wait_state(&mut ferry, &api, "seq", "PAUSED", 1);
    assert_eq!(
        api.put("/connectors/seq/pause", None).status,
        202,
        "idempotent"
    );
    assert_eq!(api.put("/connectors/seq/resume", None).status, 202);
    wait_state(&mut ferry, &api, "seq", "RUNNING", 1);

    // Restarts.
    assert_eq!(
        api.post("/connectors/seq/restart", None).expect(204),
        Value::Null
    );
    let restarting = api
        .post("/connectors/seq/restart?includeTasks=true", None)
        .expect(202);
    assert_eq!(
        restarting["connector"]["state"], "RESTARTING",
        "{restarting}"
    );
    assert_eq!(
        restarting["tasks"][0]["state"], "RESTARTING",
        "{restarting}"
    );
    wait_state(&mut ferry, &api, "seq", "RUNNING", 1);
    let only_failed = api
        .post(
            "/connectors/seq/restart?includeTasks=true&onlyFailed=true",
            None,
        )
        .expect(202);
    assert_eq!(
        only_failed["connector"]["state"], "RUNNING",
        "nothing failed: {only_failed}"
    );
    assert_eq!(only_failed["tasks"][0]["state"], "RUNNING", "{only_failed}");
    assert_eq!(
        api.post("/connectors/seq/tasks/0/restart", None).status,
        204
    );
    wait_state(&mut ferry, &api, "seq", "RUNNING", 1);
    api.post("/connectors/seq/tasks/9/restart", None)
        .expect_error(404, "Task seq-9 not found");

    // PUT config: update (200, tasks restarted with the new configuration), and create (201).
    let updated = api
        .put(
            "/connectors/seq/config",
            Some(&sequence_config("seq", 2).to_string()),
        )
        .expect(200);
    assert_eq!(
        updated["tasks"].as_array().map(Vec::len),
        Some(2),
        "{updated}"
    );
    wait_state(&mut ferry, &api, "seq", "RUNNING", 2);
    let put_created = api.put(
        "/connectors/other/config",
        Some(&sequence_config("other", 1).to_string()),
    );
    assert_eq!(put_created.expect(201)["name"], "other");
    assert_eq!(put_created.location.as_deref(), Some("/connectors/other"));
    api.put(
        "/connectors/other/config",
        Some(&sequence_config("seq", 1).to_string()),
    )
    .expect_error(400, "doesn't match connector name in the URL (other)");
    // KIP-980's initial_state.
    let initially_stopped =
        json!({"name": "later", "config": sequence_config("later", 1), "initial_state": "STOPPED"});
    let later = api
        .post("/connectors", Some(&initially_stopped.to_string()))
        .expect(201);
    assert_eq!(later["tasks"], json!([]), "{later}");
    assert_eq!(
        api.get("/connectors/later/status").json()["connector"]["state"],
        "STOPPED"
    );
    assert_eq!(api.put("/connectors/later/pause", None).status, 202);
    wait_state(&mut ferry, &api, "later", "PAUSED", 1);
    assert_eq!(api.delete("/connectors/later").status, 204);
    let bad_state =
        json!({"name": "x", "config": sequence_config("x", 1), "initial_state": "ASLEEP"});
    api.post("/connectors", Some(&bad_state.to_string()))
        .expect_error(400, "initial_state");

    // Stop: tasks removed, configuration kept.
    assert_eq!(
        api.put("/connectors/seq/stop", None).expect(204),
        Value::Null
    );
    let stopped = api.get("/connectors/seq/status").expect(200);
    assert_eq!(stopped["connector"]["state"], "STOPPED");
    assert_eq!(stopped["tasks"], json!([]));
    assert_eq!(api.get("/connectors/seq/tasks").expect(200), json!([]));
    assert_eq!(
        api.get("/connectors/seq/config").expect(200),
        sequence_config("seq", 2)
    );
    assert_eq!(
        api.get("/connectors/seq/offsets").status,
        200,
        "offsets in any state"
    );

    // Delete: gone, its offsets kept.
    assert_eq!(api.delete("/connectors/seq").expect(204), Value::Null);
    api.get("/connectors/seq")
        .expect_error(404, "Connector seq not found");
    api.get("/connectors/seq/status")
        .expect_error(404, "No status found for connector seq");
    assert_eq!(api.get("/connectors").expect(200), json!(["other"]));

    // Unknown connector: 404 everywhere, with Kafka Connect's messages.
    let offsets_body = r#"{"offsets":[{"partition":{"p":1},"offset":null}]}"#;
    let cases: [(&str, &str, Option<&str>, &str); 15] = [
        ("GET", "/connectors/nope", None, "Connector nope not found"),
        (
            "GET",
            "/connectors/nope/config",
            None,
            "Connector nope not found",
        ),
        (
            "GET",
            "/connectors/nope/status",
            None,
            "No status found for connector nope",
        ),
        (
            "GET",
            "/connectors/nope/tasks",
            None,
            "Connector nope not found",
        ),
        (
            "GET",
            "/connectors/nope/tasks/0/status",
            None,
            "No status found for task nope-0",
        ),
        (
            "POST",
            "/connectors/nope/tasks/0/restart",
            None,
            "Connector nope not found",
        ),
        (
            "POST",
            "/connectors/nope/restart",
            None,
            "Connector nope not found",
        ),
        (
            "POST",
            "/connectors/nope/restart?includeTasks=true",
            None,
            "Unknown connector: nope",
        ),
        (
            "PUT",
            "/connectors/nope/pause",
            None,
            "Unknown connector nope",
        ),
        (
            "PUT",
            "/connectors/nope/resume",
            None,
            "Unknown connector nope",
        ),
        (
            "PUT",
            "/connectors/nope/stop",
            None,
            "Unknown connector nope",
        ),
        (
            "DELETE",
            "/connectors/nope",
            None,
            "Connector nope not found",
        ),
        (
            "GET",
            "/connectors/nope/offsets",
            None,
            "Connector nope not found",
        ),
        (
            "PATCH",
            "/connectors/nope/offsets",
            Some(offsets_body),
            "Connector nope not found",
        ),
        (
            "DELETE",
            "/connectors/nope/offsets",
            None,
            "Connector nope not found",
        ),
    ];
    for (method, path, body, message) in cases {
        api.send(method, path, body, &[]).expect_error(404, message);
    }

    // Unknown paths and methods, bad bodies.
    api.get("/no/such/path")
        .expect_error(404, "HTTP 404 Not Found");
    api.delete("/connector-plugins")
        .expect_error(405, "HTTP 405 Method Not Allowed");
    let malformed = api
        .post("/connectors", Some("{\"name\": \"m\", \"config\": {"))
        .expect_error(400, "Request body is not valid JSON");
    assert!(malformed.contains("line 1 column"), "{malformed}");
    api.post("/connectors", Some(r#"{"name":"m","config":"x"}"#))
        .expect_error(400, "config must be a JSON object of strings, not a string");
    api.put("/connectors/other/config", Some(r#"{"topic":null}"#))
        .expect_error(400, "Null value can not be supplied");
    api.patch("/connectors/other/offsets", "[1,")
        .expect_error(400, "line 1 column");
    assert_eq!(
        api.get("/connectors").expect(200),
        json!(["other"]),
        "failed requests changed nothing"
    );

    // Oversize bodies: refused with 413, announced (Content-Length, refused before it is sent) or
    // streamed (chunked, refused once past the limit).
    let announced = api.raw(
        &format!(
            "POST /connectors HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}",
            2 * 1024 * 1024
        ),
        &[],
    );
    check_oversize(&announced);
    let big = vec![b' '; 1024 * 1024 + 100];
    let mut chunked = format!("{:x}\r\n", big.len()).into_bytes();
    chunked.extend_from_slice(&big);
    chunked.extend_from_slice(b"\r\n0\r\n\r\n");
    let streamed = api.raw(
        "PUT /connectors/other/config HTTP/1.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked",
        &chunked,
    );
    check_oversize(&streamed);

    // Metrics, in the Prometheus text format.
    let metrics = api.get("/metrics");
    assert_eq!(metrics.status, 200, "{metrics:?}");
    assert!(
        metrics
            .content_type
            .as_deref()
            .is_some_and(|c| c.starts_with("text/plain")),
        "{metrics:?}"
    );
    assert!(metrics.body.contains("# TYPE"), "{metrics:?}");

    ferry.terminate_cleanly();
}

fn check_oversize(reply: &Reply) {
    assert_eq!(reply.status, 413, "{reply:?}");
    let body: Value = serde_json::from_str(&reply.body)
        .unwrap_or_else(|e| panic!("413 body is not JSON ({e}): {reply:?}"));
    assert_eq!(body["error_code"], 413, "{reply:?}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("1048576")),
        "{reply:?}"
    );
}

#[test]
fn a_failed_connector_shows_failed_and_restarts_with_only_failed() {
    let ws = Workspace::new();
    let worker = ws.worker(100, &[]);
    let mut ferry = Ferry::standalone(&ws, "ferry", &worker, &[]);
    let api = Api::new(&ferry.rest_url());
    // A file source whose file is truncated below its committed position fails its task.
    let input = ws.write("input.txt", "0123456789\nabcdefghij\n");
    let config = json!({
        "connector.class": "FileStreamSource",
        "file": input.display().to_string(),
        "topic": "lines",
        "file.truncation.policy": "fail",
    });
    api.post(
        "/connectors",
        Some(&json!({"name": "f", "config": config}).to_string()),
    )
    .expect(201);
    ferry.wait_until("both lines committed", || {
        let offsets = api.get("/connectors/f/offsets").json();
        (offsets["offsets"][0]["offset"]["position"] == 22).then_some(())
    });
    // Restarting the task makes it read the committed position again, against a shorter file.
    ws.write("input.txt", "short\n");
    assert_eq!(api.post("/connectors/f/tasks/0/restart", None).status, 204);
    let status = ferry.wait_until("the task FAILED", || {
        let status = api.get("/connectors/f/status").json();
        (status["tasks"][0]["state"] == "FAILED").then_some(status)
    });
    assert_eq!(status["connector"]["state"], "RUNNING");
    let trace = status["tasks"][0]["trace"].as_str().unwrap_or_default();
    assert!(trace.contains("22"), "the trace says why: {status}");
    assert_eq!(
        api.get("/connectors/f/tasks/0/status").json()["state"],
        "FAILED"
    );

    // onlyFailed restarts the failed task only (the connector did not fail).
    ws.write("input.txt", "0123456789\nabcdefghij\nmore\n");
    let plan = api
        .post(
            "/connectors/f/restart?includeTasks=true&onlyFailed=true",
            None,
        )
        .expect(202);
    assert_eq!(plan["connector"]["state"], "RUNNING", "{plan}");
    assert_eq!(plan["tasks"][0]["state"], "RESTARTING", "{plan}");
    wait_until("the task RUNNING again", || {
        (api.get("/connectors/f/status").json()["tasks"][0]["state"] == "RUNNING").then_some(())
    });
    ferry.terminate_cleanly();
}

#[test]
fn the_auth_token_is_required_on_every_request() {
    let ws = Workspace::new();
    let token = "s3cret-token-value";
    let worker = ws.worker(100, &[("rest.auth.token", token)]);
    let mut ferry = Ferry::standalone(&ws, "ferry", &worker, &[]);
    let base = ferry.rest_url();
    let open = Api::new(&base);
    let wrong = Api::with_token(&base, "not-the-token");
    let right = Api::with_token(&base, token);

    let config = json!({"name": "seq", "config": sequence_config("seq", 1)}).to_string();
    for api in [&open, &wrong] {
        api.get("/")
            .expect_error(401, "User cannot access the resource.");
        api.get("/connectors")
            .expect_error(401, "User cannot access the resource.");
        api.get("/no/such/path")
            .expect_error(401, "User cannot access the resource.");
        api.post("/connectors", Some(&config))
            .expect_error(401, "User cannot access the resource.");
    }
    open.send(
        "GET",
        "/connectors",
        None,
        &[("Authorization", &format!("Basic {token}"))],
    )
    .expect_error(401, "User cannot access the resource.");
    assert_eq!(
        right.get("/connectors").expect(200),
        json!([]),
        "nothing was created"
    );
    right.post("/connectors", Some(&config)).expect(201);
    assert_eq!(right.get("/connectors").expect(200), json!(["seq"]));
    ferry.terminate_cleanly();
    assert!(
        !ferry.log().contains(token),
        "the token never appears in the log"
    );
}

#[test]
fn health_patch_tasks_config_and_plugin_config_in_the_binary() {
    let ws = Workspace::new();
    let worker = ws.worker(100, &[]);
    let mut ferry = Ferry::standalone(&ws, "ferry", &worker, &[]);
    let api = Api::new(&ferry.rest_url());
    // The REST API listens before the herder finished starting (`GET /health` answers 503
    // "starting" meanwhile, as Kafka Connect's does).
    let health = ferry.wait_until("GET /health to answer 200", || {
        let reply = api.get("/health");
        (reply.status == 200).then(|| reply.json())
    });
    assert_eq!(health["status"], "healthy", "{health}");
    let root = api.get("/").expect(200);
    assert!(root["kafka_cluster_id"].is_null(), "no Kafka sink: {root}");

    let input = ws.write("input.txt", "a\nb\n");
    let config = json!({
        "connector.class": "FileStreamSource",
        "file": input.display().to_string(),
        "topic": "lines",
        "batch.size": "5",
    });
    api.put("/connectors/f/config/", Some(&config.to_string()))
        .expect(201);
    let info = api
        .patch(
            "/connectors/f/config",
            &json!({"topic": "renamed", "batch.size": null}).to_string(),
        )
        .expect(200);
    assert_eq!(info["config"]["topic"], "renamed", "{info}");
    assert!(info["config"].get("batch.size").is_none(), "{info}");
    assert_eq!(
        api.get("/connectors/f/").expect(200)["config"],
        info["config"]
    );
    let tasks = ferry.wait_until("the task configured with the new topic", || {
        let tasks = api.get("/connectors/f/tasks-config").json();
        (tasks["f-0"]["topic"] == "renamed").then_some(tasks)
    });
    assert_eq!(tasks.as_object().map(|t| t.len()), Some(1), "{tasks}");

    let keys = api
        .get("/connector-plugins/FileStreamSource/config")
        .expect(200);
    let batch = keys
        .as_array()
        .and_then(|k| k.iter().find(|k| k["name"] == "batch.size"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(batch["type"], "INT", "{keys}");
    assert_eq!(batch["default_value"], "2000", "{keys}");

    // As `curl -d` sends it.
    let refused = api.raw(
        "PATCH /connectors/f/config HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: 7",
        b"topic=x",
    );
    refused.expect_error(415, "HTTP 415 Unsupported Media Type");
    ferry.terminate_cleanly();
}
