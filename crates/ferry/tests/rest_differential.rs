//! Kafka Connect's REST API, differentially: the same requests go to a real Kafka Connect 4.4
//! distributed worker and to `ferry distributed`, each on its own group of one Apache Kafka 4.4 broker,
//! and their status codes and JSON shapes are compared step by step.
//!
//! A shape is the JSON with every scalar replaced by its type and every array by the union of its
//! elements' shapes, so values that differ by nature (worker ids, versions, offsets) do not count, but
//! a missing or extra field, a field of another type or another status code does. The differences
//! Ferry keeps on purpose are listed in [`DELIBERATE`] with the reason; README's "REST API" section
//! lists them too. Any other difference fails the test.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod kafka_support;
mod rest_support;
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ferry_testkit::{ConnectOptions, ConnectWorker, KafkaBroker};
use rest_support::{Api, Reply};
use serde_json::{Value, json};
use support::{Ferry, Workspace, path_str};

/// Differences kept on purpose: (step, JSON path of the difference, why).
const DELIBERATE: &[(&str, &str, &str)] = &[
    (
        "create with a body that is not JSON",
        "status",
        "a request body that is not JSON is the client's error: 400, where Kafka Connect answers 500",
    ),
    (
        "alter offsets with a bad body",
        "status",
        "an offsets body of the wrong shape is the client's error: 400, where Kafka Connect answers 500",
    ),
    (
        "validate an unknown plugin",
        "status",
        "an unknown plugin is the client's error: 400, where Kafka Connect answers 500 (wrapping a \
         BadRequestException)",
    ),
    (
        "tasks",
        "$[].config.task.files",
        "FileStreamSource's task configuration names its share of the files (Ferry reads several files \
         per connector); Kafka Connect ignores the key",
    ),
    (
        "offsets while running",
        "$.offsets[].offset.dev",
        "FileStreamSource's offsets carry the file's identity (dev, ino, fp, fp_len) besides position, \
         so a rotated or replaced file is never read from another file's position; Kafka Connect \
         ignores the extra fields",
    ),
    (
        "offsets while running",
        "$.offsets[].offset.ino",
        "as above",
    ),
    ("offsets while running", "$.offsets[].offset.fp", "as above"),
    (
        "offsets while running",
        "$.offsets[].offset.fp_len",
        "as above",
    ),
    ("offsets", "$.offsets[].offset.dev", "as above"),
    ("offsets", "$.offsets[].offset.ino", "as above"),
    ("offsets", "$.offsets[].offset.fp", "as above"),
    ("offsets", "$.offsets[].offset.fp_len", "as above"),
    (
        "validate without a topic",
        "$.error_count",
        "FileStreamSource without `file` is an error in Ferry (3 errors: name, file, topic); Kafka \
         Connect's reads the worker's standard input then, which cannot be resumed (2 errors)",
    ),
    (
        "status stopped",
        "$.tasks",
        "a STOPPED connector has no tasks: Ferry lists none, where Kafka Connect 4.4 still lists the last \
         status its tasks wrote (RUNNING)",
    ),
];

const CONNECTOR: &str = "diff-source";

/// How long a step may wait for a state (a JVM on a busy two-core machine).
const SLOW: Duration = Duration::from_secs(120);

/// The shape of a JSON value (see the module doc). An array's shape is the merge of its elements'
/// shapes ([`merge`]), so lists whose items differ in which optional fields they fill still compare.
fn shape(value: &Value) -> Value {
    match value {
        Value::Null => json!("null"),
        Value::Bool(_) => json!("bool"),
        Value::Number(_) => json!("number"),
        Value::String(_) => json!("string"),
        Value::Array(items) => match items.iter().map(shape).reduce(merge) {
            Some(item) => json!([item]),
            None => json!([]),
        },
        Value::Object(fields) => {
            Value::Object(fields.iter().map(|(k, v)| (k.clone(), shape(v))).collect())
        }
    }
}

/// Two shapes as one: objects by the union of their fields, a `null` gives way to the other type.
fn merge(a: Value, b: Value) -> Value {
    match (a, b) {
        (Value::Object(mut a), Value::Object(b)) => {
            for (key, value) in b {
                let merged = match a.remove(&key) {
                    Some(existing) => merge(existing, value),
                    None => value,
                };
                a.insert(key, merged);
            }
            Value::Object(a)
        }
        (Value::Array(a), Value::Array(b)) => match (a.into_iter().next(), b.into_iter().next()) {
            (Some(a), Some(b)) => json!([merge(a, b)]),
            (Some(x), None) | (None, Some(x)) => json!([x]),
            (None, None) => json!([]),
        },
        (a, b) if a == json!("null") => b,
        (a, _) => a,
    }
}

/// Where two shapes differ, as JSON paths with what each side has. `null` matches any type (a field
/// one side leaves empty here and the other fills), and an empty list matches any list.
fn differences(path: &str, kc: &Value, ferry: &Value, out: &mut Vec<(String, String)>) {
    match (kc, ferry) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                let here = format!("{path}.{key}");
                match b.get(key) {
                    Some(other) => differences(&here, value, other, out),
                    None => out.push((here, format!("Kafka Connect has {value}, Ferry nothing"))),
                }
            }
            for (key, value) in b {
                if !a.contains_key(key) {
                    out.push((
                        format!("{path}.{key}"),
                        format!("Ferry has {value}, Kafka Connect nothing"),
                    ));
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if let (Some(a), Some(b)) = (a.first(), b.first()) {
                differences(&format!("{path}[]"), a, b, out);
            }
        }
        (a, b) if a == b || *a == json!("null") || *b == json!("null") => {}
        (a, b) => out.push((path.to_owned(), format!("Kafka Connect {a}, Ferry {b}"))),
    }
}

/// One side of the comparison: a REST API and what each step answered.
struct Side {
    name: &'static str,
    api: Api,
    steps: Vec<(String, u16, Value, String)>,
}

impl Side {
    fn record(&mut self, step: &str, reply: &Reply) -> Value {
        let body: Value = if reply.body.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&reply.body).unwrap_or(json!({"not json": reply.body}))
        };
        let mut shape = shape(&body);
        // A validation's error count is compared by value: both must find the same problems.
        if let (Some(count), Value::Object(fields)) = (body.get("error_count"), &mut shape) {
            fields.insert("error_count".to_owned(), count.clone());
        }
        self.steps
            .push((step.to_owned(), reply.status, shape, reply.body.clone()));
        body
    }

    fn step(&mut self, step: &str, method: &str, path: &str, body: Option<&str>) -> Value {
        let reply = self.api.send(method, path, body, &[]);
        self.record(step, &reply)
    }

    /// Polls `GET /connectors/<c>/status` until the connector (and its task, when `with_task`) shows
    /// `state`; not a recorded step.
    fn wait_state(&self, state: &str, with_task: bool) {
        let start = Instant::now();
        loop {
            let reply = self.api.get(&format!("/connectors/{CONNECTOR}/status"));
            if reply.status == 200 {
                let status: Value = serde_json::from_str(&reply.body).unwrap_or(Value::Null);
                let tasks_ok = !with_task
                    || status["tasks"]
                        .as_array()
                        .is_some_and(|t| !t.is_empty() && t.iter().all(|t| t["state"] == state));
                if status["connector"]["state"] == state && tasks_ok {
                    return;
                }
            }
            assert!(
                start.elapsed() < SLOW,
                "{}: the connector did not reach {state}: {} {}",
                self.name,
                reply.status,
                reply.body
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Polls until `GET /connectors/<c>/offsets` lists an offset.
    fn wait_offsets(&self) {
        let start = Instant::now();
        loop {
            let reply = self.api.get(&format!("/connectors/{CONNECTOR}/offsets"));
            let body: Value = serde_json::from_str(&reply.body).unwrap_or(Value::Null);
            if body["offsets"].as_array().is_some_and(|o| !o.is_empty()) {
                return;
            }
            assert!(
                start.elapsed() < SLOW,
                "{}: no committed offsets: {} {}",
                self.name,
                reply.status,
                reply.body
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The same sequence of requests, with waits between them that let both reach the same state.
fn scenario(side: &mut Side, file: &str, topic: &str) {
    let config = json!({
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "tasks.max": "1",
        "file": file,
        "topic": topic,
    })
    .to_string();
    let path = format!("/connectors/{CONNECTOR}");
    side.step("root", "GET", "/", None);
    side.step("missing connector", "GET", "/connectors/no-such", None);
    side.step("missing status", "GET", "/connectors/no-such/status", None);
    side.step(
        "create with a body that is not JSON",
        "PUT",
        &format!("{path}/config"),
        Some("{not json"),
    );
    side.step("create", "PUT", &format!("{path}/config"), Some(&config));
    side.wait_state("RUNNING", true);
    side.step("list", "GET", "/connectors", None);
    side.step(
        "list expanded",
        "GET",
        "/connectors?expand=status&expand=info",
        None,
    );
    side.step("info", "GET", &path, None);
    side.step("config", "GET", &format!("{path}/config"), None);
    side.step("status", "GET", &format!("{path}/status"), None);
    side.step("tasks", "GET", &format!("{path}/tasks"), None);
    side.step(
        "task status",
        "GET",
        &format!("{path}/tasks/0/status"),
        None,
    );
    side.step(
        "missing task status",
        "GET",
        &format!("{path}/tasks/7/status"),
        None,
    );
    side.step("topics", "GET", &format!("{path}/topics"), None);
    side.step("update", "PUT", &format!("{path}/config"), Some(&config));
    side.wait_state("RUNNING", true);
    side.step("pause", "PUT", &format!("{path}/pause"), None);
    side.wait_state("PAUSED", true);
    side.step("status paused", "GET", &format!("{path}/status"), None);
    side.step("resume", "PUT", &format!("{path}/resume"), None);
    side.wait_state("RUNNING", true);
    side.step(
        "restart with tasks",
        "POST",
        &format!("{path}/restart?includeTasks=true&onlyFailed=false"),
        None,
    );
    side.wait_state("RUNNING", true);
    side.step("restart", "POST", &format!("{path}/restart"), None);
    side.wait_state("RUNNING", true);
    side.wait_offsets();
    side.step(
        "offsets while running",
        "GET",
        &format!("{path}/offsets"),
        None,
    );
    side.step(
        "alter offsets while running",
        "PATCH",
        &format!("{path}/offsets"),
        Some(r#"{"offsets":[]}"#),
    );
    side.step("stop", "PUT", &format!("{path}/stop"), None);
    side.wait_state("STOPPED", false);
    side.step("status stopped", "GET", &format!("{path}/status"), None);
    side.step("offsets", "GET", &format!("{path}/offsets"), None);
    let alter = json!({"offsets": [{"partition": {"filename": file}, "offset": {"position": 0}}]})
        .to_string();
    side.step(
        "alter offsets",
        "PATCH",
        &format!("{path}/offsets"),
        Some(&alter),
    );
    side.step(
        "alter offsets with a bad body",
        "PATCH",
        &format!("{path}/offsets"),
        Some(r#"{"offsets":"nope"}"#),
    );
    side.step("reset offsets", "DELETE", &format!("{path}/offsets"), None);
    side.step(
        "validate",
        "PUT",
        "/connector-plugins/FileStreamSourceConnector/config/validate",
        Some(&config),
    );
    side.step(
        "validate without a topic",
        "PUT",
        "/connector-plugins/FileStreamSourceConnector/config/validate",
        Some(r#"{"connector.class":"org.apache.kafka.connect.file.FileStreamSourceConnector"}"#),
    );
    side.step(
        "validate an unknown plugin",
        "PUT",
        "/connector-plugins/NoSuchConnector/config/validate",
        Some(r#"{"connector.class":"NoSuchConnector"}"#),
    );
    side.step(
        "create with an unknown class",
        "PUT",
        "/connectors/broken/config",
        Some(r#"{"connector.class":"NoSuchConnector"}"#),
    );
    side.step("delete", "DELETE", &path, None);
    side.step("delete again", "DELETE", &path, None);
}

#[test]
fn kafka_connect_and_ferry_answer_the_same_requests_alike() {
    let broker = KafkaBroker::shared().unwrap_or_else(|e| panic!("{e}"));
    let ws = Workspace::new();
    let input = ws.write("input.txt", "one\ntwo\nthree\n");
    let file = path_str(&input);
    let pid = std::process::id();

    let connect = ConnectWorker::start(broker, ConnectOptions::new(format!("diff-kc-{pid}")))
        .unwrap_or_else(|e| panic!("{e}"));
    let group = format!("diff-ferry-{pid}");
    let worker = kafka_support::distributed_worker(&ws, &broker.bootstrap_servers(), &group);
    let mut ferry = Ferry::spawn(
        ws.path(),
        [std::ffi::OsStr::new("distributed"), worker.as_os_str()],
        &ws.file("ferry.stdout"),
        &ws.file("ferry.stderr"),
    );
    let ferry_api = Api::new(&ferry.rest_url());
    // Ferry answers 409 until it joined its group; so does Kafka Connect, whose start waited for that.
    ferry.wait_until("Ferry to join its group", || {
        (ferry_api.get("/connectors").status == 200 && ferry_api.get("/").status == 200)
            .then_some(())
    });

    let mut kc = Side {
        name: "Kafka Connect",
        api: Api::new(&connect.rest_url()),
        steps: Vec::new(),
    };
    let mut fe = Side {
        name: "Ferry",
        api: ferry_api,
        steps: Vec::new(),
    };
    scenario(&mut kc, &file, &format!("diff-kc-lines-{pid}"));
    scenario(&mut fe, &file, &format!("diff-ferry-lines-{pid}"));

    let deliberate: BTreeMap<(&str, &str), &str> = DELIBERATE
        .iter()
        .map(|(s, p, why)| ((*s, *p), *why))
        .collect();
    let mut report = Vec::new();
    for ((step, kc_status, kc_shape, kc_body), (_, fe_status, fe_shape, fe_body)) in
        kc.steps.iter().zip(&fe.steps)
    {
        let mut found = Vec::new();
        if kc_status != fe_status {
            found.push((
                "status".to_owned(),
                format!("Kafka Connect {kc_status}, Ferry {fe_status}"),
            ));
        }
        differences("$", kc_shape, fe_shape, &mut found);
        let unexplained: Vec<String> = found
            .into_iter()
            .filter(|(path, _)| !deliberate.contains_key(&(step.as_str(), path.as_str())))
            .map(|(path, what)| format!("  {path}: {what}"))
            .collect();
        if !unexplained.is_empty() {
            report.push(format!(
                "{step}:\n{}\n  Kafka Connect said: {kc_body}\n  Ferry said: {fe_body}",
                unexplained.join("\n")
            ));
        }
    }
    ferry.terminate_cleanly();
    assert!(
        report.is_empty(),
        "{} differences between Kafka Connect 4.4 and Ferry:\n{}",
        report.len(),
        report.join("\n")
    );
}
