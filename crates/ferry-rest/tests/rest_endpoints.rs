//! Kafka Connect's newer endpoints over HTTP against a standalone herder: `GET /health` (starting,
//! healthy, unhealthy while the herder is stuck), `PATCH /connectors/{c}/config`, the deprecated
//! `tasks-config`, `GET /connector-plugins/{p}/config` with typed keys, trailing slashes, `415` for a
//! body that is not JSON, and every error answered as `{"error_code":…,"message":…}`.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod http_support;
#[path = "../../ferry-runtime/tests/idle_support/mod.rs"]
mod idle_support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConfigType, ConnectError, SourceConnector, SourceTask,
};
use ferry_herder::{Plugin, StandaloneHerder};
use ferry_offsets::MemoryStore;
use ferry_rest::{HEALTH_CHECK_TIMEOUT, RestServer};
use ferry_runtime::config::{Listener, RestConfig};
use ferry_runtime::sink::RecordSink;
use ferry_runtime::stores::{MemoryConfigStore, MemoryStatusStore};
use ferry_runtime::{Worker, WorkerSettings};
use http_support::{Answer, JSON, send};
use idle_support::{Idle, NoSink};
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// While set, `Typed`'s `task_configs` blocks for a configuration with `block` (the herder's lock is
/// held meanwhile).
static BLOCK: AtomicBool = AtomicBool::new(false);
/// Set once such a `task_configs` is blocking.
static BLOCKING: AtomicBool = AtomicBool::new(false);

/// Clears [`BLOCK`] when dropped, so a failing test never leaves a thread blocked (which would keep
/// the test's runtime from shutting down).
struct Unblock;

impl Drop for Unblock {
    fn drop(&mut self) {
        BLOCK.store(false, Ordering::Release);
    }
}

/// A connector with typed keys and one task per `tasks.max`.
struct Typed;

impl SourceConnector for Typed {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![
            ConfigKey::required("topic", "the topic"),
            ConfigKey::optional("batch.size", Some("100"), "records per poll")
                .of_type(ConfigType::Int),
            ConfigKey::optional("verbose", Some("false"), "log more").of_type(ConfigType::Boolean),
            ConfigKey::optional("token", None, "the API token").secret(),
            ConfigKey::optional("block", None, "block in task_configs while BLOCK is set"),
        ]
    }

    fn validate(&self, config: &Config) -> Vec<ConfigIssue> {
        match config.get("batch.size") {
            Some(v) if v.parse::<i32>().is_err() => {
                vec![ConfigIssue {
                    key: "batch.size".to_owned(),
                    message: "must be an integer".to_owned(),
                }]
            }
            _ => Vec::new(),
        }
    }

    fn task_configs(&self, config: &Config, max: usize) -> Result<Vec<Config>, ConnectError> {
        if config.get("block").is_some() {
            BLOCKING.store(true, Ordering::Release);
            while BLOCK.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Ok((0..max)
            .map(|i| {
                let mut task = Config::new();
                task.insert("topic".into(), config["topic"].clone());
                task.insert("task.index".into(), i.to_string());
                task
            })
            .collect())
    }

    fn create_task(&self) -> Box<dyn SourceTask> {
        Box::new(Quiet)
    }
}

/// A task that produces nothing.
struct Quiet;

#[ferry_api::async_trait]
impl SourceTask for Quiet {
    async fn start(
        &mut self,
        _context: Arc<dyn ferry_api::SourceTaskContext>,
    ) -> Result<(), ConnectError> {
        Ok(())
    }
    async fn poll(&mut self) -> Result<Vec<ferry_api::SourceRecord>, ConnectError> {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(Vec::new())
    }
    async fn stop(&mut self) -> Result<(), ConnectError> {
        Ok(())
    }
}

struct Server {
    herder: Arc<StandaloneHerder>,
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<()>,
}

impl Server {
    /// A REST server over a standalone herder; `started`: whether the herder's `start` ran.
    async fn start(started: bool) -> Self {
        let config = RestConfig {
            listeners: vec![Listener::http("127.0.0.1", 0)],
            ..RestConfig::default()
        };
        let rest = RestServer::bind(&config).await.unwrap();
        let addr = rest.local_addrs()[0];
        let offsets = Arc::new(MemoryStore::new());
        let sink: Arc<dyn RecordSink> = Arc::new(NoSink);
        let worker = Worker::with_status(
            WorkerSettings::default(),
            offsets.clone(),
            sink,
            Arc::new(MemoryStatusStore::new()),
            addr.to_string(),
        );
        let herder = Arc::new(StandaloneHerder::new(
            worker,
            offsets,
            vec![
                Plugin::new(["com.example.Typed", "Typed"], || {
                    Box::new(Typed) as Box<dyn SourceConnector>
                }),
                Plugin::new(["Idle"], || Box::new(Idle) as Box<dyn SourceConnector>),
            ],
            addr.to_string(),
            Arc::new(MemoryConfigStore::new()),
        ));
        if started {
            herder.start(Vec::new()).await.unwrap();
        }
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = rest.serve(herder.clone(), async move {
            let _ = stopped.await;
        });
        Self {
            herder,
            addr,
            stop,
            serving,
        }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.serving.await.unwrap();
        self.herder.shutdown().await;
    }

    async fn send(
        &self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        send(self.addr, method, target, headers, body).await
    }

    async fn json(&self, method: &str, target: &str, body: Value) -> Answer {
        self.send(method, target, &[JSON], &body.to_string()).await
    }
}

impl Answer {
    /// Asserts the status and that the body is JSON; returns it.
    fn expect(&self, status: u16) -> Value {
        assert_eq!(self.status, status, "{}", self.body);
        assert_eq!(
            self.header("content-type"),
            Some("application/json"),
            "{}",
            self.body
        );
        self.json()
    }

    /// Asserts Kafka Connect's error body with `status`; returns the message.
    fn error(&self, status: u16) -> String {
        let body = self.expect(status);
        assert_eq!(body["error_code"], status, "{body}");
        body["message"].as_str().unwrap().to_owned()
    }
}

fn typed(name: &str) -> Value {
    json!({"connector.class": "Typed", "name": name, "topic": "t", "tasks.max": "2", "batch.size": "10"})
}

#[tokio::test]
async fn health_is_starting_before_the_herder_started_and_healthy_after() {
    let server = Server::start(false).await;
    let starting = server.send("GET", "/health", &[], "").await.expect(503);
    assert_eq!(starting["status"], "starting");
    assert_eq!(starting["message"], "Worker is still starting up.");
    // Any other request waits for the start, then is answered.
    let addr = server.addr;
    let listed = tokio::spawn(async move { send(addr, "GET", "/connectors", &[], "").await });
    // Not a synchronization: time for the request to arrive and be held.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !listed.is_finished(),
        "a request before the start waits for it"
    );
    server.herder.start(Vec::new()).await.unwrap();
    let listed = tokio::time::timeout(Duration::from_secs(30), listed)
        .await
        .expect("answered once started")
        .unwrap();
    assert_eq!(listed.expect(200), json!([]));
    let healthy = server.send("GET", "/health", &[], "").await.expect(200);
    assert_eq!(
        healthy,
        json!({"status": "healthy", "message": "Worker has completed startup and is ready to handle requests."})
    );
    // With a trailing slash too.
    server.send("GET", "/health/", &[], "").await.expect(200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn health_is_unhealthy_while_a_request_holds_the_herder() {
    let server = Server::start(true).await;
    BLOCK.store(true, Ordering::Release);
    let unblock = Unblock;
    let mut config = typed("stuck");
    config["block"] = json!("yes");
    let addr = server.addr;
    // The create blocks in the connector's task_configs, holding the herder's lock.
    let create = tokio::spawn(async move {
        send(
            addr,
            "PUT",
            "/connectors/stuck/config",
            &[JSON],
            &config.to_string(),
        )
        .await
    });
    // Wait until the create holds the lock: its connector is making task configurations.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !BLOCKING.load(Ordering::Acquire) {
        if create.is_finished() {
            panic!("the create finished: {}", create.await.unwrap().body);
        }
        assert!(
            Instant::now() < deadline,
            "the create never reached task_configs"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = Instant::now();
    let answer = server.send("GET", "/health", &[], "").await;
    let elapsed = started.elapsed();
    let body = answer.expect(500);
    assert_eq!(body["status"], "unhealthy", "{body}");
    assert!(
        body["message"].as_str().unwrap().starts_with(
            "Worker was unable to handle this request and may be unable to handle other requests."
        ),
        "{body}"
    );
    assert!(elapsed >= HEALTH_CHECK_TIMEOUT, "{elapsed:?}");
    drop(unblock);
    assert_eq!(create.await.unwrap().status, 201);
    server.send("GET", "/health", &[], "").await.expect(200);
    server.stop().await;
}

#[tokio::test]
async fn patch_merges_into_the_config_and_null_removes_a_key() {
    let server = Server::start(true).await;
    server
        .json(
            "POST",
            "/connectors",
            json!({"name": "c", "config": typed("c")}),
        )
        .await
        .expect(201);

    let patched = server
        .json(
            "PATCH",
            "/connectors/c/config",
            json!({"batch.size": 20, "verbose": "true", "tasks.max": null}),
        )
        .await
        .expect(200);
    assert_eq!(patched["name"], "c");
    assert_eq!(patched["type"], "source");
    assert_eq!(
        patched["config"],
        json!({"connector.class": "Typed", "name": "c", "topic": "t", "batch.size": "20", "verbose": "true"})
    );
    let config = server
        .send("GET", "/connectors/c/config", &[], "")
        .await
        .expect(200);
    assert_eq!(config, patched["config"]);

    // Unknown connector: 404; an invalid result: 400 and nothing changed; a different name: 400.
    let missing = server
        .json("PATCH", "/connectors/nope/config", json!({"topic": "u"}))
        .await
        .error(404);
    assert_eq!(missing, "Connector nope not found");
    let invalid = server
        .json(
            "PATCH",
            "/connectors/c/config",
            json!({"batch.size": "many"}),
        )
        .await
        .error(400);
    assert!(invalid.contains("batch.size"), "{invalid}");
    let renamed = server
        .json("PATCH", "/connectors/c/config", json!({"name": "d"}))
        .await
        .error(400);
    assert_eq!(
        renamed,
        "Connector name configuration (d) doesn't match connector name in the URL (c)"
    );
    let nested = server
        .json("PATCH", "/connectors/c/config", json!({"topic": {"a": 1}}))
        .await
        .error(400);
    assert!(nested.contains("\"topic\""), "{nested}");
    let not_object = server
        .json("PATCH", "/connectors/c/config", json!(["topic"]))
        .await
        .error(400);
    assert!(not_object.contains("an array"), "{not_object}");
    let config = server
        .send("GET", "/connectors/c/config", &[], "")
        .await
        .expect(200);
    assert_eq!(config, patched["config"]);
    server.stop().await;
}

#[tokio::test]
async fn tasks_config_maps_each_task_id_to_its_config() {
    let server = Server::start(true).await;
    server
        .json("PUT", "/connectors/c/config", typed("c"))
        .await
        .expect(201);
    let tasks = server
        .send("GET", "/connectors/c/tasks-config", &[], "")
        .await
        .expect(200);
    assert_eq!(
        tasks,
        json!({
            "c-0": {"topic": "t", "task.index": "0"},
            "c-1": {"topic": "t", "task.index": "1"},
        })
    );
    let missing = server
        .send("GET", "/connectors/nope/tasks-config", &[], "")
        .await
        .error(404);
    assert_eq!(missing, "Connector nope not found");
    server.stop().await;
}

#[tokio::test]
async fn plugin_config_lists_the_connector_keys_with_their_types() {
    let server = Server::start(true).await;
    for plugin in ["com.example.Typed", "Typed"] {
        let keys = server
            .send(
                "GET",
                &format!("/connector-plugins/{plugin}/config"),
                &[],
                "",
            )
            .await
            .expect(200);
        let keys = keys.as_array().unwrap();
        // The connector's own keys first, then the framework's.
        let types: Vec<(&str, &str, bool, &Value)> = keys[..5]
            .iter()
            .map(|k| {
                (
                    k["name"].as_str().unwrap(),
                    k["type"].as_str().unwrap(),
                    k["required"].as_bool().unwrap(),
                    &k["default_value"],
                )
            })
            .collect();
        assert_eq!(
            types,
            [
                ("topic", "STRING", true, &Value::Null),
                ("batch.size", "INT", false, &json!("100")),
                ("verbose", "BOOLEAN", false, &json!("false")),
                ("token", "PASSWORD", false, &Value::Null),
                ("block", "STRING", false, &Value::Null),
            ]
        );
        let common: Vec<(&str, &str, &Value)> = keys[5..]
            .iter()
            .map(|k| {
                (
                    k["name"].as_str().unwrap(),
                    k["type"].as_str().unwrap(),
                    &k["group"],
                )
            })
            .collect();
        assert!(
            common.contains(&("connector.class", "STRING", &json!("Common"))),
            "{common:?}"
        );
        assert!(
            common.contains(&("tasks.max", "INT", &json!("Common"))),
            "{common:?}"
        );
        assert!(
            common
                .iter()
                .any(|(name, _, _)| *name == "errors.tolerance"),
            "{common:?}"
        );
        // Kafka Connect's exactly-once keys of source connectors (KIP-618).
        for (key, kind) in [
            ("exactly.once.support", "STRING"),
            ("transaction.boundary", "STRING"),
            ("transaction.boundary.interval.ms", "LONG"),
        ] {
            assert!(
                common.contains(&(key, kind, &json!("Exactly Once Support"))),
                "{key} missing: {common:?}"
            );
        }
        assert!(
            common.contains(&("offsets.storage.topic", "STRING", &json!("offsets.topic"))),
            "offsets.storage.topic missing: {common:?}"
        );
        let first = &keys[0];
        for field in [
            "documentation",
            "importance",
            "group",
            "order_in_group",
            "width",
            "display_name",
            "dependents",
        ] {
            assert!(first.get(field).is_some(), "{field} missing: {first}");
        }
    }
    // A transformation's own keys.
    let insert = server
        .send(
            "GET",
            "/connector-plugins/org.apache.kafka.connect.transforms.InsertField$Value/config",
            &[],
            "",
        )
        .await
        .expect(200);
    assert!(
        insert
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["name"] == "static.field"),
        "{insert}"
    );
    let unknown = server
        .send("GET", "/connector-plugins/Nope/config", &[], "")
        .await
        .error(404);
    assert_eq!(unknown, "Unknown plugin Nope.");

    // The validate endpoint types the connector's keys the same way.
    let validated = server
        .json(
            "PUT",
            "/connector-plugins/Typed/config/validate",
            typed("v"),
        )
        .await
        .expect(200);
    let batch = validated["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["definition"]["name"] == "batch.size")
        .unwrap();
    assert_eq!(batch["definition"]["type"], "INT", "{batch}");
    // And the transformation keys as Kafka Connect types them.
    let mut config = typed("v");
    config["transforms"] = json!("a");
    config["transforms.a.type"] = json!("org.apache.kafka.connect.transforms.InsertField$Value");
    config["transforms.a.static.field"] = json!("f");
    config["transforms.a.static.value"] = json!("v");
    let validated = server
        .json("PUT", "/connector-plugins/Typed/config/validate", config)
        .await
        .expect(200);
    let type_of = |name: &str| {
        validated["configs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["definition"]["name"] == name)
            .map(|c| c["definition"]["type"].clone())
            .unwrap_or_else(|| panic!("no {name} in {validated}"))
    };
    assert_eq!(type_of("transforms.a.type"), "CLASS");
    assert_eq!(type_of("transforms.a.negate"), "BOOLEAN");
    assert_eq!(type_of("transforms.a.static.field"), "STRING");
    server.stop().await;
}

#[tokio::test]
async fn trailing_slashes_are_accepted_on_every_path() {
    let server = Server::start(true).await;
    server
        .json("PUT", "/connectors/c/config/", typed("c"))
        .await
        .expect(201);
    for path in [
        "/connectors/c/",
        "/connectors/c/config/",
        "/connectors/c/status/",
        "/connectors/c/tasks/",
        "/connectors/c/tasks-config/",
        "/connectors/",
        "/connectors/?expand=status",
        "/connector-plugins/",
        "/connector-plugins/Typed/config/",
        "/health/",
    ] {
        server.send("GET", path, &[], "").await.expect(200);
    }
    let info = server
        .send("GET", "/connectors/c/", &[], "")
        .await
        .expect(200);
    assert_eq!(info["name"], "c");
    let expanded = server
        .send("GET", "/connectors/?expand=status", &[], "")
        .await
        .expect(200);
    assert!(expanded["c"]["status"].is_object(), "{expanded}");
    server.send("PUT", "/connectors/c/pause/", &[], "").await;
    server.send("DELETE", "/connectors/c/", &[], "").await;
    server
        .send("GET", "/connectors/c/", &[], "")
        .await
        .error(404);
    server.stop().await;
}

#[tokio::test]
async fn a_body_that_is_not_json_is_refused_with_415() {
    let server = Server::start(true).await;
    let body = typed("c").to_string();
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/xml",
    ] {
        let message = server
            .send(
                "PUT",
                "/connectors/c/config",
                &[("content-type", content_type)],
                &body,
            )
            .await
            .error(415);
        assert_eq!(message, "HTTP 415 Unsupported Media Type");
    }
    assert!(server.herder.connectors().await.is_empty());
    // JSON with parameters, and a body without a content type, are read as JSON.
    server
        .send(
            "PUT",
            "/connectors/c/config",
            &[("content-type", "application/json; charset=utf-8")],
            &body,
        )
        .await
        .expect(201);
    server
        .send("PUT", "/connectors/d/config", &[], &typed("d").to_string())
        .await
        .expect(201);
    // A request without a body is not refused for its content type.
    server
        .send(
            "PUT",
            "/connectors/c/pause",
            &[("content-type", "text/plain")],
            "",
        )
        .await;
    let status = server
        .send("GET", "/connectors/c/status", &[], "")
        .await
        .expect(200);
    assert_eq!(status["connector"]["state"], "PAUSED");
    server.stop().await;
}

#[tokio::test]
async fn every_error_is_answered_in_kafka_connect_shape() {
    let server = Server::start(true).await;
    assert_eq!(
        server.send("GET", "/nowhere", &[], "").await.error(404),
        "HTTP 404 Not Found"
    );
    assert_eq!(
        server
            .send("POST", "/connectors/c/config", &[JSON], "{}")
            .await
            .error(405),
        "HTTP 405 Method Not Allowed"
    );
    let bad_json = server
        .send("PUT", "/connectors/c/config", &[JSON], "{")
        .await
        .error(400);
    assert!(bad_json.contains("not valid JSON"), "{bad_json}");
    let huge = format!("{{\"topic\":\"{}\"}}", "x".repeat(2 * 1024 * 1024));
    let too_large = server
        .send("PUT", "/connectors/c/config", &[JSON], &huge)
        .await;
    assert!(too_large.error(413).contains("larger than the limit"));
    server
        .send("PATCH", "/connectors/c/config", &[JSON], "{")
        .await
        .error(400);
    server.stop().await;
}

#[tokio::test]
async fn root_has_kafka_connects_fields_and_no_cluster_id_without_kafka() {
    let server = Server::start(true).await;
    let root = server.send("GET", "/", &[], "").await.expect(200);
    assert!(root["version"].is_string(), "{root}");
    assert!(root["commit"].is_string(), "{root}");
    assert!(
        root.get("kafka_cluster_id").is_some_and(Value::is_null),
        "{root}"
    );
    server.stop().await;
}

/// Kafka Connect's preflight checks of `exactly.once.support=required`: a connector that cannot be
/// given exactly-once delivery is refused when it is created or validated (here a standalone worker,
/// which has no exactly-once source support, and a connector that does not say whether it
/// supports it), in Kafka Connect's words; `requested` is accepted and runs at least once.
#[tokio::test]
async fn exactly_once_required_is_refused_before_the_connector_is_created() {
    let server = Server::start(true).await;
    let mut config = typed("eos");
    config["exactly.once.support"] = json!("required");
    let message = server
        .json("PUT", "/connectors/eos/config", config.clone())
        .await
        .error(400);
    assert!(
        message.contains("This worker does not have exactly-once source support enabled."),
        "{message}"
    );
    assert!(
        message.contains("does not implement the API required for preflight validation"),
        "{message}"
    );
    server
        .send("GET", "/connectors/eos", &[], "")
        .await
        .error(404);

    let validated = server
        .json("PUT", "/connector-plugins/Typed/config/validate", config)
        .await
        .expect(200);
    assert_eq!(validated["error_count"], 2, "{validated}");
    let key = validated["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["value"]["name"] == "exactly.once.support")
        .unwrap_or_else(|| panic!("no exactly.once.support in {validated}"));
    assert_eq!(
        key["value"]["errors"].as_array().map(Vec::len),
        Some(2),
        "{key}"
    );

    let mut requested = typed("eos");
    requested["exactly.once.support"] = json!("requested");
    server
        .json("PUT", "/connectors/eos/config", requested)
        .await
        .expect(201);
    server.stop().await;
}
