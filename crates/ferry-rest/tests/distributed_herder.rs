//! The distributed herder behind the REST API: `PATCH /connectors/{c}/config` (KIP-477) served by
//! the leader, merged into the configuration the config store holds, and reaching the tasks;
//! refused by a follower's herder (the REST layer forwards it); `GET /health` on every worker.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ferry_herder::{ConfigPatch, DistributedHerder, Herder};
use ferry_rest::RestServer;
use ferry_runtime::config::{Listener, RestConfig};
use ferry_runtime::stores::ConfigBackingStore;
use serde_json::{Value, json};
use tokio::sync::oneshot;

// The distributed herder's simulated cluster (no Kafka), shared with ferry-runtime's own tests;
// this binary uses only part of it.
#[path = "../../ferry-herder/tests/distributed/support/mod.rs"]
mod support;

use support::{Cluster, eventually, lock, seq};

/// A REST server over `herder` on a free loopback port; stopped by sending on the returned channel.
async fn serve(herder: Arc<DistributedHerder>) -> (SocketAddr, oneshot::Sender<()>) {
    let config = RestConfig {
        listeners: vec![Listener::http("127.0.0.1", 0)],
        ..RestConfig::default()
    };
    let rest = RestServer::bind(&config).await.unwrap();
    let addr = rest.local_addrs()[0];
    let (stop, stopped) = oneshot::channel::<()>();
    let _serving = rest.serve(herder, async move {
        let _ = stopped.await;
    });
    (addr, stop)
}

/// One request (`Connection: close`); the status and the JSON body.
async fn send(addr: SocketAddr, method: &str, target: &str, body: &str) -> (u16, Value) {
    use std::io::{Read, Write};
    let request = format!(
        "{method} {target} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    let raw = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut raw = String::new();
        stream.read_to_string(&mut raw).unwrap();
        raw
    })
    .await
    .unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn patch_is_served_by_the_leader_and_reaches_the_tasks_and_every_worker_is_healthy() {
    let mut cluster = Cluster::new();
    for _ in 0..2 {
        cluster.join().await;
    }
    let mut config = seq("seq", 2, "v1");
    config.insert("topic".to_owned(), "unused".to_owned());
    cluster.create(config).await;
    cluster.wait_running("seq", 2).await;
    let leader = cluster.leader();
    let follower = cluster.follower();
    let (leader_addr, stop_leader) = serve(leader.clone()).await;
    let (follower_addr, stop_follower) = serve(follower.clone()).await;

    for addr in [leader_addr, follower_addr] {
        let (status, body) = send(addr, "GET", "/health", "").await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["status"], "healthy");
    }

    // A follower's herder does not serve it (its REST layer forwards it to the leader).
    let patch = ConfigPatch::from([("tag".to_owned(), Some("v0".to_owned()))]);
    let refused = follower
        .patch_connector_config("seq", patch)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("not the leader"), "{refused}");

    let (status, info) = send(
        leader_addr,
        "PATCH",
        "/connectors/seq/config",
        &json!({"tag": "v2", "topic": null}).to_string(),
    )
    .await;
    assert_eq!(status, 200, "{info}");
    assert_eq!(
        info["config"],
        json!({"name": "seq", "connector.class": "Seq", "tasks.max": "2", "tag": "v2"})
    );
    let stored = cluster.configs.snapshot().await.unwrap().connectors["seq"]
        .config
        .clone();
    assert_eq!(stored.get("tag").map(String::as_str), Some("v2"));
    assert!(!stored.contains_key("topic"));
    eventually("every task runs with tag v2", || {
        let starts = lock(&cluster.starts);
        (0..2).all(|t| {
            starts
                .iter()
                .rev()
                .find(|s| s.task == t.to_string())
                .is_some_and(|s| s.tag == "v2")
        })
    })
    .await;

    let (status, body) = send(leader_addr, "PATCH", "/connectors/nope/config", "{}").await;
    assert_eq!(
        (status, &body["message"]),
        (404, &json!("Connector nope not found"))
    );

    let _ = stop_leader.send(());
    let _ = stop_follower.send(());
    cluster.shutdown().await;
    assert_eq!(cluster.offsets.violations(), Vec::<String>::new());
}
