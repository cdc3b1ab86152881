//! Distributed mode: a write sent to any worker is served by the worker the herder names (the leader
//! for connector changes, the owner for restarts). Two REST servers on 127.0.0.1, each over a herder
//! whose `route_write` is set by the test; the client sees the serving worker's status and body.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod http_support;
#[path = "../../ferry-runtime/tests/idle_support/mod.rs"]
mod idle_support;

use http_support::{Answer, JSON, send};
use idle_support::{Idle, NoSink};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_api::{Config, SourceConnector};
use ferry_herder::entities::{
    ConfigInfos, ConnectorInfo, ConnectorOffsets, ConnectorStateInfo, Message, PluginInfo,
    TaskInfo, TaskStateInfo,
};
use ferry_herder::{Herder, HerderError, OffsetInput, Plugin, Route, StandaloneHerder, WriteScope};
use ferry_offsets::MemoryStore;
use ferry_rest::RestServer;
use ferry_runtime::config::{Listener, Properties, RestConfig, Secret};
use ferry_runtime::metrics::Metrics;
use ferry_runtime::sink::RecordSink;
use ferry_runtime::stores::{MemoryConfigStore, MemoryStatusStore};
use ferry_runtime::{TargetState, TaskId, Worker, WorkerSettings};
use serde_json::json;
use tokio::sync::oneshot;

type Router = Box<dyn Fn(&WriteScope<'_>, bool) -> Result<Route, HerderError> + Send + Sync>;

/// A standalone herder whose writes are routed as the test says; every `route_write` is recorded.
struct Routed {
    inner: StandaloneHerder,
    router: Mutex<Router>,
    asked: Mutex<Vec<(String, bool)>>,
}

impl Routed {
    fn new() -> Arc<Self> {
        let offsets = Arc::new(MemoryStore::new());
        let sink: Arc<dyn RecordSink> = Arc::new(NoSink);
        let worker = Worker::with_status(
            WorkerSettings::default(),
            offsets.clone(),
            sink,
            Arc::new(MemoryStatusStore::new()),
            "127.0.0.1:8083",
        );
        let inner = StandaloneHerder::new(
            worker,
            offsets,
            vec![Plugin::new(["Idle"], || {
                Box::new(Idle) as Box<dyn SourceConnector>
            })],
            "127.0.0.1:8083",
            Arc::new(MemoryConfigStore::new()),
        );
        Arc::new(Self {
            inner,
            router: Mutex::new(Box::new(|_, _| Ok(Route::Local))),
            asked: Mutex::default(),
        })
    }

    fn route_with(
        &self,
        router: impl Fn(&WriteScope<'_>, bool) -> Result<Route, HerderError> + Send + Sync + 'static,
    ) {
        *self.router.lock().unwrap() = Box::new(router);
    }

    /// As a follower whose leader is `leader` does: forward, unless the request was forwarded already.
    fn follow(&self, leader: String) {
        self.route_with(move |_, forwarded| {
            if forwarded {
                Err(HerderError::conflict(
                    "Cannot complete request because of a conflicting operation (e.g. worker rebalance)",
                ))
            } else {
                Ok(Route::Forward(leader.clone()))
            }
        });
    }

    fn asked(&self) -> Vec<(String, bool)> {
        self.asked.lock().unwrap().clone()
    }
}

#[ferry_api::async_trait]
impl Herder for Routed {
    fn worker_id(&self) -> &str {
        self.inner.worker_id()
    }
    fn plugins(&self) -> Vec<PluginInfo> {
        self.inner.plugins()
    }
    fn metrics(&self) -> Arc<Metrics> {
        Herder::metrics(&self.inner)
    }
    async fn connectors(&self) -> Vec<String> {
        self.inner.connectors().await
    }
    async fn connector_info(&self, name: &str) -> Result<ConnectorInfo, HerderError> {
        self.inner.connector_info(name).await
    }
    async fn connector_config(&self, name: &str) -> Result<Config, HerderError> {
        self.inner.connector_config(name).await
    }
    async fn connector_status(&self, name: &str) -> Result<ConnectorStateInfo, HerderError> {
        self.inner.connector_status(name).await
    }
    async fn task_configs(&self, name: &str) -> Result<Vec<TaskInfo>, HerderError> {
        self.inner.task_configs(name).await
    }
    async fn task_status(&self, id: &TaskId) -> Result<TaskStateInfo, HerderError> {
        Herder::task_status(&self.inner, id).await
    }
    async fn create_connector(
        &self,
        name: &str,
        config: Config,
        initial: TargetState,
    ) -> Result<ConnectorInfo, HerderError> {
        self.inner.create_connector(name, config, initial).await
    }
    async fn put_connector_config(
        &self,
        name: &str,
        config: Config,
    ) -> Result<(bool, ConnectorInfo), HerderError> {
        self.inner.put_connector_config(name, config).await
    }
    async fn delete_connector(&self, name: &str) -> Result<(), HerderError> {
        self.inner.delete_connector(name).await
    }
    async fn restart_connector(&self, name: &str) -> Result<(), HerderError> {
        self.inner.restart_connector(name).await
    }
    async fn restart_connector_and_tasks(
        &self,
        name: &str,
        include_tasks: bool,
        only_failed: bool,
    ) -> Result<ConnectorStateInfo, HerderError> {
        self.inner
            .restart_connector_and_tasks(name, include_tasks, only_failed)
            .await
    }
    async fn restart_task(&self, id: &TaskId) -> Result<(), HerderError> {
        Herder::restart_task(&self.inner, id).await
    }
    async fn set_target_state(&self, name: &str, target: TargetState) -> Result<(), HerderError> {
        Herder::set_target_state(&self.inner, name, target).await
    }
    async fn connector_offsets(&self, name: &str) -> Result<ConnectorOffsets, HerderError> {
        self.inner.connector_offsets(name).await
    }
    async fn alter_offsets(
        &self,
        name: &str,
        offsets: Vec<OffsetInput>,
    ) -> Result<Message, HerderError> {
        self.inner.alter_offsets(name, offsets).await
    }
    async fn reset_offsets(&self, name: &str) -> Result<Message, HerderError> {
        self.inner.reset_offsets(name).await
    }
    async fn validate(&self, plugin: &str, config: Config) -> Result<ConfigInfos, HerderError> {
        self.inner.validate(plugin, config).await
    }
    async fn route_write(
        &self,
        scope: WriteScope<'_>,
        forwarded: bool,
    ) -> Result<Route, HerderError> {
        self.asked
            .lock()
            .unwrap()
            .push((format!("{scope:?}"), forwarded));
        (self.router.lock().unwrap())(&scope, forwarded)
    }
}

/// A REST server over a [`Routed`] herder; stopped by [`Server::stop`].
struct Server {
    herder: Arc<Routed>,
    addr: SocketAddr,
    scheme: &'static str,
    stop: oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start(token: Option<&str>) -> Self {
        let config = RestConfig {
            listeners: vec![Listener::http("127.0.0.1", 0)],
            auth_token: token.map(Secret::new),
            ..RestConfig::default()
        };
        Self::start_with(config).await
    }

    async fn start_with(config: RestConfig) -> Self {
        let scheme = config.listeners[0].scheme();
        let rest = RestServer::bind(&config).await.unwrap();
        let addr = rest.local_addrs()[0];
        let herder = Routed::new();
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = rest.serve(herder.clone(), async move {
            let _ = stopped.await;
        });
        Self {
            herder,
            addr,
            scheme,
            stop,
            serving,
        }
    }

    fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.serving.await.unwrap();
        self.herder.inner.shutdown().await;
    }
}

fn create_body(name: &str) -> String {
    json!({"name": name, "config": {"connector.class": "Idle", "topic": "t"}}).to_string()
}

#[tokio::test]
async fn a_write_sent_to_a_follower_is_served_by_the_leader_and_answered_as_the_leader_answers() {
    let leader = Server::start(None).await;
    let follower = Server::start(None).await;
    follower.herder.follow(leader.url());

    let created = send(
        follower.addr,
        "POST",
        "/connectors",
        &[JSON],
        &create_body("idle"),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.json()["name"], "idle");
    assert_eq!(created.header("content-type"), Some("application/json"));
    assert_eq!(created.header("location"), Some("/connectors/idle"));
    assert_eq!(leader.herder.connectors().await, ["idle"]);
    assert!(follower.herder.connectors().await.is_empty());
    // The follower asked once; the leader was asked for a request marked forwarded (forward=false).
    assert_eq!(follower.herder.asked(), [("Cluster".to_owned(), false)]);
    assert_eq!(leader.herder.asked(), [("Cluster".to_owned(), true)]);

    // A second create of the same name: the leader's 409, body and all.
    let again = send(
        follower.addr,
        "POST",
        "/connectors",
        &[JSON],
        &create_body("idle"),
    )
    .await;
    let direct = send(
        leader.addr,
        "POST",
        "/connectors",
        &[JSON],
        &create_body("idle"),
    )
    .await;
    assert_eq!(again.status, 409, "{}", again.body);
    assert_eq!(again.json(), direct.json());
    assert_eq!(again.json()["error_code"], 409);

    // Reads are served where they arrive: the follower's own herder knows no connector.
    let read = send(follower.addr, "GET", "/connectors/idle", &[], "").await;
    assert_eq!(read.status, 404, "{}", read.body);

    // Target states, with the leader's status code (202) and no body.
    let paused = send(follower.addr, "PUT", "/connectors/idle/pause", &[], "").await;
    assert_eq!(paused.status, 202, "{}", paused.body);
    let status = send(leader.addr, "GET", "/connectors/idle/status", &[], "").await;
    assert_eq!(status.json()["connector"]["state"], "PAUSED");

    // The body is validated by the worker that serves the write: the leader's 400.
    let bad = send(follower.addr, "POST", "/connectors", &[JSON], "{not json").await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(
        bad.json()["message"]
            .as_str()
            .unwrap()
            .contains("not valid JSON"),
        "{}",
        bad.body
    );

    // Restarts are routed by connector and task; the query goes along (includeTasks).
    let restarted = send(
        follower.addr,
        "POST",
        "/connectors/idle/restart?includeTasks=true",
        &[],
        "",
    )
    .await;
    assert_eq!(restarted.status, 202, "{}", restarted.body);
    assert_eq!(restarted.json()["name"], "idle");
    let task = send(
        follower.addr,
        "POST",
        "/connectors/idle/tasks/0/restart",
        &[],
        "",
    )
    .await;
    assert_eq!(task.status, 404, "{}", task.body);
    let asked: Vec<String> = follower
        .herder
        .asked()
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert!(
        asked.contains(&"Connector(\"idle\")".to_owned()),
        "{asked:?}"
    );
    assert!(
        asked
            .iter()
            .any(|s| s.starts_with("Task(") && s.contains("idle")),
        "{asked:?}"
    );

    // A method a path does not have is answered here, not routed.
    let asked = follower.herder.asked().len();
    let wrong = send(follower.addr, "GET", "/connectors/idle/pause", &[], "").await;
    assert_eq!(wrong.status, 405, "{}", wrong.body);
    assert_eq!(follower.herder.asked().len(), asked);

    let deleted = send(follower.addr, "DELETE", "/connectors/idle", &[], "").await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    assert!(leader.herder.connectors().await.is_empty());

    follower.stop().await;
    leader.stop().await;
}

#[tokio::test]
async fn the_bearer_token_goes_along_with_a_forwarded_write() {
    let leader = Server::start(Some("s3cret")).await;
    let follower = Server::start(Some("s3cret")).await;
    follower.herder.follow(leader.url());
    let auth = ("authorization", "Bearer s3cret");

    let created = send(
        follower.addr,
        "POST",
        "/connectors",
        &[JSON, auth],
        &create_body("idle"),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(leader.herder.connectors().await, ["idle"]);

    // Without the token the follower refuses it itself: nothing is asked, nothing forwarded.
    let refused = send(follower.addr, "DELETE", "/connectors/idle", &[], "").await;
    assert_eq!(refused.status, 401, "{}", refused.body);
    assert_eq!(follower.herder.asked().len(), 1);
    assert_eq!(leader.herder.asked().len(), 1);

    // A leader with another token refuses the forwarded request: its 401 comes back.
    let other = Server::start(Some("other")).await;
    follower.herder.follow(other.url());
    let refused = send(follower.addr, "DELETE", "/connectors/idle", &[auth], "").await;
    assert_eq!(refused.status, 401, "{}", refused.body);
    assert_eq!(refused.header("www-authenticate"), Some("Bearer"));
    assert_eq!(refused.json()["error_code"], 401);
    assert_eq!(leader.herder.connectors().await, ["idle"]);

    other.stop().await;
    follower.stop().await;
    leader.stop().await;
}

#[tokio::test]
async fn a_forwarded_write_is_never_forwarded_again() {
    let leader = Server::start(None).await;
    let follower = Server::start(None).await;
    follower.herder.follow(leader.url());

    // Marked forwarded: the herder's answer, nothing sent on.
    let refused = send(
        follower.addr,
        "POST",
        "/connectors?forward=false",
        &[JSON],
        &create_body("idle"),
    )
    .await;
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert!(
        refused.json()["message"]
            .as_str()
            .unwrap()
            .contains("conflicting operation"),
        "{}",
        refused.body
    );
    assert_eq!(follower.herder.asked(), [("Cluster".to_owned(), true)]);
    assert!(leader.herder.asked().is_empty());
    assert!(leader.herder.connectors().await.is_empty());

    // A herder that forwards even a forwarded request (here: to itself) is not obeyed twice.
    let url = follower.url();
    follower
        .herder
        .route_with(move |_, _| Ok(Route::Forward(url.clone())));
    let looped = send(
        follower.addr,
        "POST",
        "/connectors",
        &[JSON],
        &create_body("idle"),
    )
    .await;
    assert_eq!(looped.status, 409, "{}", looped.body);
    assert!(
        looped.json()["message"]
            .as_str()
            .unwrap()
            .contains("already forwarded once"),
        "{}",
        looped.body
    );
    assert_eq!(
        follower.herder.asked()[1..],
        [("Cluster".to_owned(), false), ("Cluster".to_owned(), true)]
    );

    follower.stop().await;
    leader.stop().await;
}

#[tokio::test]
async fn a_leader_that_cannot_be_reached_is_answered_503_at_once_naming_it() {
    // A port nobody listens on: bound, then released.
    let gone = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let follower = Server::start(None).await;
    follower.herder.follow(format!("http://{gone}"));

    let started = Instant::now();
    let answer = send(
        follower.addr,
        "POST",
        "/connectors",
        &[JSON],
        &create_body("idle"),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(answer.status, 503, "{}", answer.body);
    let body = answer.json();
    assert_eq!(body["error_code"], 503);
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "IO Error trying to forward REST request to http://{gone}/connectors?forward=false"
        )),
        "{message}"
    );
    assert!(message.contains("retry"), "{message}");
    assert!(follower.herder.connectors().await.is_empty());

    follower.stop().await;
}

/// A worker that takes one request and answers `response` as raw bytes; the request comes back
/// whole (head and body) through the handle.
fn one_shot_worker(response: Vec<u8>) -> (SocketAddr, std::thread::JoinHandle<String>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut raw = Vec::new();
        let mut chunk = [0u8; 4096];
        // Read the head, then as many body bytes as it announces.
        loop {
            let n = stream.read(&mut chunk).unwrap();
            assert!(n > 0, "the request ended early");
            raw.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&raw).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length: usize = head
                    .lines()
                    .filter_map(|l| l.split_once(':'))
                    .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                    .map_or(0, |(_, v)| v.trim().parse().unwrap());
                if body.len() >= length {
                    break;
                }
            }
        }
        stream.write_all(&response).unwrap();
        String::from_utf8(raw).unwrap()
    });
    (addr, handle)
}

#[tokio::test]
async fn the_forwarded_request_keeps_method_path_query_body_and_credentials_and_its_answer_comes_back()
 {
    let answer = "{\"message\":\"The offsets for this connector have been altered successfully\"}";
    let (leader, request) = one_shot_worker(
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-other: dropped\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{answer}",
            answer.len()
        )
        .into_bytes(),
    );
    let follower = Server::start(None).await;
    follower.herder.follow(format!("http://{leader}"));

    let body = r#"{"offsets":[{"partition":{"p":1},"offset":{"o":2}}]}"#;
    let altered = send(
        follower.addr,
        "PATCH",
        "/connectors/c%20d/offsets?x=1&forward=true",
        &[JSON, ("authorization", "Bearer t0ken")],
        body,
    )
    .await;
    assert_eq!(altered.status, 200);
    assert_eq!(altered.body, answer);
    assert_eq!(altered.header("content-type"), Some("application/json"));
    assert_eq!(altered.header("x-other"), None);

    let request = tokio::task::spawn_blocking(move || request.join().unwrap())
        .await
        .unwrap();
    let (head, sent) = request.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    assert_eq!(
        lines.next(),
        Some("PATCH /connectors/c%20d/offsets?x=1&forward=false HTTP/1.1")
    );
    let headers: Vec<String> = lines.map(str::to_ascii_lowercase).collect();
    assert!(
        headers.contains(&"content-type: application/json".to_owned()),
        "{head}"
    );
    assert!(
        headers.contains(&"authorization: bearer t0ken".to_owned()),
        "{head}"
    );
    assert!(headers.contains(&format!("host: {leader}")), "{head}");
    assert_eq!(sent, body);

    follower.stop().await;
}

#[tokio::test]
async fn an_answer_over_the_limit_is_not_passed_back() {
    let too_long = ferry_rest::MAX_FORWARDED_RESPONSE_BYTES + 1;
    let (leader, request) = one_shot_worker(
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {too_long}\r\n\r\n"
        )
        .into_bytes(),
    );
    let follower = Server::start(None).await;
    follower.herder.follow(format!("http://{leader}"));

    let answer = send(follower.addr, "DELETE", "/connectors/c", &[], "").await;
    assert_eq!(answer.status, 502, "{}", answer.body);
    assert!(
        answer.json()["message"]
            .as_str()
            .unwrap()
            .contains("send the request to that worker directly"),
        "{}",
        answer.body
    );

    tokio::task::spawn_blocking(move || request.join().unwrap())
        .await
        .unwrap();
    follower.stop().await;
}

/// `Basic base64(user:password)`.
fn basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {encoded}")
}

/// A worker file's REST keys read as the workers read them.
fn rest_config(pairs: &[(&str, &str)]) -> RestConfig {
    let props = Properties::from_pairs("worker.properties", pairs.iter().copied());
    let mut errors = Vec::new();
    let config = RestConfig::from_properties(&props, &mut errors);
    assert!(errors.is_empty(), "{errors:?}");
    config
}

#[tokio::test]
async fn basic_credentials_and_the_bearer_token_are_each_accepted_and_go_along_when_forwarded() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.properties");
    // Kafka Connect's JAAS PropertyFileLoginModule file, as is.
    std::fs::write(&users, "# user: password\nalice: s3cret\nbob=hunter2\n").unwrap();
    let users = users.to_str().unwrap();
    let both = || {
        rest_config(&[
            ("listeners", "http://127.0.0.1:0"),
            ("rest.basic.auth.credentials.file", users),
            ("rest.auth.token", "tok"),
        ])
    };
    let leader = Server::start_with(both()).await;
    let follower = Server::start_with(both()).await;
    follower.herder.follow(leader.url());

    let alice = basic("alice", "s3cret");
    for (what, header) in [
        ("alice", alice.as_str()),
        ("bob", &basic("bob", "hunter2")),
        ("the token", "Bearer tok"),
    ] {
        let got = send(
            leader.addr,
            "GET",
            "/connectors",
            &[("authorization", header)],
            "",
        )
        .await;
        assert_eq!(got.status, 200, "{what}: {}", got.body);
    }
    for (what, headers) in [
        (
            "a wrong password",
            vec![("authorization", basic("alice", "s3cre"))],
        ),
        (
            "an unknown user",
            vec![("authorization", basic("mallory", "s3cret"))],
        ),
        (
            "a password as token",
            vec![("authorization", "Bearer s3cret".to_owned())],
        ),
        ("no credentials", vec![]),
    ] {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let got = send(leader.addr, "GET", "/connectors", &headers, "").await;
        assert_eq!(got.status, 401, "{what}: {}", got.body);
        assert_eq!(got.json()["error_code"], 401, "{what}");
        assert_eq!(
            got.json()["message"],
            "User cannot access the resource.",
            "{what}"
        );
        let challenges: Vec<&str> = got
            .headers
            .iter()
            .filter(|(n, _)| n == "www-authenticate")
            .map(|(_, v)| v.as_str())
            .collect();
        assert!(
            challenges.iter().any(|c| c.starts_with("Basic realm="))
                && challenges.contains(&"Bearer"),
            "{what}: {challenges:?}"
        );
    }

    // A write sent to the follower with Basic credentials is served by the leader.
    let created = send(
        follower.addr,
        "POST",
        "/connectors",
        &[JSON, ("authorization", &alice)],
        &create_body("idle"),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(leader.herder.connectors().await, ["idle"]);
    assert_eq!(leader.herder.asked(), [("Cluster".to_owned(), true)]);

    follower.stop().await;
    leader.stop().await;
}

/// A self-signed certificate for 127.0.0.1 and localhost, written as one PEM keystore file (key and
/// chain, as Kafka Connect's `ssl.keystore.type=PEM` file) and as a certificate file.
fn self_signed(dir: &std::path::Path) -> (String, String) {
    let certified =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap();
    let keystore = dir.join("keystore.pem");
    let cert = dir.join("cert.pem");
    std::fs::write(
        &keystore,
        format!(
            "{}{}",
            certified.key_pair.serialize_pem(),
            certified.cert.pem()
        ),
    )
    .unwrap();
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    (
        keystore.to_str().unwrap().to_owned(),
        cert.to_str().unwrap().to_owned(),
    )
}

/// One HTTPS request (`curl --cacert cert.pem`): the client trusts `cert` only.
async fn send_tls(
    addr: SocketAddr,
    cert: &str,
    method: &str,
    target: &str,
    body: &str,
) -> Result<Answer, String> {
    send_tls_with(addr, cert, None, method, target, body).await
}

/// A client certificate chain and its key.
type ClientIdentity = (
    Vec<rustls::pki_types::CertificateDer<'static>>,
    rustls::pki_types::PrivateKeyDer<'static>,
);

async fn send_tls_with(
    addr: SocketAddr,
    cert: &str,
    identity: Option<ClientIdentity>,
    method: &str,
    target: &str,
    body: &str,
) -> Result<Answer, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(cert).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let config = match identity {
        None => config.with_no_client_auth(),
        Some((chain, key)) => config.with_client_auth_cert(chain, key).unwrap(),
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let request = format!(
        "{method} {target} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    // rustls reports a peer that closes without close_notify as an error after the data.
    let read = tls.read_to_end(&mut raw).await;
    if raw.is_empty() {
        return Err(format!("no answer: {read:?}"));
    }
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").ok_or(raw.clone())?;
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap()[9..12].parse().unwrap();
    Ok(Answer {
        status,
        headers: Vec::new(),
        body: body.to_owned(),
    })
}

#[tokio::test]
async fn https_listeners_serve_tls_with_a_pem_keystore_and_forward_to_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let (keystore, cert) = self_signed(dir.path());
    let https = || {
        rest_config(&[
            ("listeners", "https://127.0.0.1:0"),
            ("listeners.https.ssl.keystore.type", "PEM"),
            ("listeners.https.ssl.keystore.location", &keystore),
        ])
    };
    let leader = Server::start_with(https()).await;
    let follower = Server::start_with(https()).await;
    assert!(leader.url().starts_with("https://127.0.0.1:"));
    follower.herder.follow(leader.url());

    let root = send_tls(leader.addr, &cert, "GET", "/", "").await.unwrap();
    assert_eq!(root.status, 200, "{}", root.body);
    assert!(root.json()["version"].is_string(), "{}", root.body);

    // A write sent to the follower is forwarded to the leader over HTTPS (trusting the shared
    // certificate: no truststore is configured).
    let created = send_tls(
        follower.addr,
        &cert,
        "POST",
        "/connectors",
        &create_body("idle"),
    )
    .await
    .unwrap();
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(leader.herder.connectors().await, ["idle"]);
    assert_eq!(leader.herder.asked(), [("Cluster".to_owned(), true)]);

    follower.stop().await;
    leader.stop().await;
}

#[tokio::test]
async fn with_ssl_client_auth_required_only_clients_with_a_trusted_certificate_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let (keystore, cert) = self_signed(dir.path());
    // Workers share one certificate and trust it: forwarding presents it as the client certificate.
    let mtls = || {
        rest_config(&[
            ("listeners", "https://127.0.0.1:0"),
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", &keystore),
            ("ssl.truststore.type", "PEM"),
            ("ssl.truststore.location", &cert),
            ("ssl.client.auth", "required"),
        ])
    };
    let leader = Server::start_with(mtls()).await;
    let follower = Server::start_with(mtls()).await;
    follower.herder.follow(leader.url());

    // A client without a certificate is refused during the handshake (or sees the connection
    // closed right after it, TLS 1.3 reporting the refusal on the first read).
    let refused = send_tls(leader.addr, &cert, "GET", "/", "").await;
    assert!(refused.is_err(), "served without a client certificate");

    let created = send_tls_as_worker(
        follower.addr,
        &keystore,
        &cert,
        "POST",
        "/connectors",
        &create_body("idle"),
    )
    .await
    .unwrap();
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(leader.herder.connectors().await, ["idle"]);

    follower.stop().await;
    leader.stop().await;
}

/// [`send_tls`] presenting the keystore's certificate as the client certificate.
async fn send_tls_as_worker(
    addr: SocketAddr,
    keystore: &str,
    cert: &str,
    method: &str,
    target: &str,
    body: &str,
) -> Result<Answer, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(keystore)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(keystore).unwrap();
    send_tls_with(addr, cert, Some((chain, key)), method, target, body).await
}
