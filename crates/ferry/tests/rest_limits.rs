//! The REST API's limits, against a running `ferry standalone`: oversized configurations are refused
//! with a short answer, many unknown keys make an answer that lists the accepted keys once, slow,
//! idle and excess connections are closed, hyper's own error answers are JSON, and a POSTed name is
//! trimmed as Java trims it.

mod rest_support;
mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use rest_support::{Api, Reply};
use serde_json::{Map, Value, json};
use support::{Ferry, Workspace, wait_until};

/// A FileStreamSource configuration with `extra` unknown keys `unknown.0`, `unknown.1`, ….
fn config_with_unknown_keys(ws: &Workspace, extra: usize) -> Map<String, Value> {
    let input = ws.write("input.txt", "one\n");
    let mut config = Map::new();
    config.insert("connector.class".into(), json!("FileStreamSource"));
    config.insert("file".into(), json!(input.display().to_string()));
    config.insert("topic".into(), json!("lines"));
    for i in 0..extra {
        config.insert(format!("unknown.{i}"), json!("x"));
    }
    config
}

fn start(ws: &Workspace, extra: &[(&str, &str)]) -> (Ferry, Api) {
    let worker = ws.worker(100, extra);
    let mut ferry = Ferry::standalone(ws, "ferry", &worker, &[]);
    let api = Api::new(&ferry.rest_url());
    (ferry, api)
}

#[test]
fn a_configuration_past_the_key_limit_is_refused_with_a_short_answer() {
    let ws = Workspace::new();
    let (mut ferry, api) = start(&ws, &[]);
    let config = Value::Object(config_with_unknown_keys(&ws, 20_000));
    let create = json!({"name": "big", "config": config}).to_string();

    let reply = api.post("/connectors", Some(&create));
    let message = reply.expect_error(400, "at most 1000");
    assert!(message.contains("20003 keys"), "{message}");
    assert!(reply.body.len() < 1024, "a short answer: {reply:?}");

    let reply = api.put(
        "/connector-plugins/FileStreamSource/config/validate",
        Some(&config.to_string()),
    );
    reply.expect_error(400, "at most 1000");
    assert!(reply.body.len() < 1024, "a short answer: {reply:?}");

    let reply = api.put("/connectors/big/config", Some(&config.to_string()));
    reply.expect_error(400, "at most 1000");
    assert_eq!(api.get("/connectors").expect(200), json!([]));
    ferry.terminate_cleanly();
}

#[test]
fn many_unknown_keys_list_the_accepted_keys_once() {
    let ws = Workspace::new();
    let (mut ferry, api) = start(&ws, &[]);
    let config = Value::Object(config_with_unknown_keys(&ws, 990));
    let create = json!({"name": "wide", "config": config}).to_string();

    let reply = api.post("/connectors", Some(&create));
    let message = reply.expect_error(400, "unknown.989");
    assert_eq!(
        message.matches("accepted keys:").count(),
        1,
        "the accepted keys are listed once: {}",
        &message[..message.len().min(2000)]
    );
    assert!(message.contains("990 error(s)"), "every key is reported");

    // Named, so that the unknown keys are the only errors (a missing name is one too).
    let mut named = config.clone();
    named["name"] = json!("wide");
    let validation = api
        .put(
            "/connector-plugins/FileStreamSource/config/validate",
            Some(&named.to_string()),
        )
        .expect(200);
    assert_eq!(validation["error_count"], 990);
    assert_eq!(
        validation.to_string().matches("accepted keys:").count(),
        1,
        "the accepted keys are listed once"
    );
    ferry.terminate_cleanly();
}

#[test]
fn an_error_about_many_long_keys_stays_short() {
    let ws = Workspace::new();
    let (mut ferry, api) = start(&ws, &[]);
    let mut config = config_with_unknown_keys(&ws, 0);
    // 900 keys of 1000 characters each, just under the 1 MiB body limit.
    for i in 0..900 {
        config.insert(format!("{i:04}{}", "x".repeat(996)), json!("x"));
    }
    let create = json!({"name": "long", "config": config}).to_string();
    assert!(create.len() < 1024 * 1024, "{}", create.len());
    let reply = api.post("/connectors", Some(&create));
    let message = reply.expect_error(400, "the message was cut here");
    assert!(message.contains("900 error(s)"), "{}", &message[..200]);
    assert!(reply.body.len() < 300 * 1024, "{}", reply.body.len());
    ferry.terminate_cleanly();
}

/// Reads until the server closes the connection (or `limit` passes: then the connection was left
/// open); returns what was read and whether it was closed.
fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> (String, bool) {
    stream.set_read_timeout(Some(limit)).expect("timeout");
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return (String::from_utf8_lossy(&answer).into_owned(), true),
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                return (String::from_utf8_lossy(&answer).into_owned(), true);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return (String::from_utf8_lossy(&answer).into_owned(), false);
            }
            Err(e) => panic!("read: {e}"),
        }
    }
}

fn connect(api: &Api) -> TcpStream {
    TcpStream::connect(api.base().trim_start_matches("http://")).expect("connect")
}

#[test]
fn slow_and_idle_connections_are_closed_after_the_read_timeout() {
    let ws = Workspace::new();
    let (mut ferry, api) = start(&ws, &[("rest.read.timeout.ms", "300")]);

    // Half a request head, never finished.
    let mut partial = connect(&api);
    partial
        .write_all(b"GET /connectors HTTP/1.1\r\nHost: x\r\n")
        .expect("write");
    // A connection that sends nothing.
    let mut idle = connect(&api);
    // Far longer than the timeout: reaching it means the server kept the connection open.
    let (_, closed) = read_until_closed(&mut partial, Duration::from_secs(15));
    assert!(closed, "the half-sent request's connection is closed");
    let (_, closed) = read_until_closed(&mut idle, Duration::from_secs(15));
    assert!(closed, "the idle connection is closed");

    // A keep-alive connection is closed once idle after its answer.
    let mut kept = connect(&api);
    kept.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    let (answer, closed) = read_until_closed(&mut kept, Duration::from_secs(15));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(closed, "the idle keep-alive connection is closed");

    // Requests sent in time are answered.
    api.get("/connectors").expect(200);
    ferry.terminate_cleanly();
}

#[test]
fn a_stalled_request_body_is_answered_and_closed_after_the_read_timeout() {
    let ws = Workspace::new();
    let (mut ferry, api) = start(&ws, &[("rest.read.timeout.ms", "300")]);
    let mut stalled = connect(&api);
    stalled
        .write_all(
            b"POST /connectors HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
              Content-Length: 100\r\n\r\n{\"name\":",
        )
        .expect("write");
    let (answer, closed) = read_until_closed(&mut stalled, Duration::from_secs(15));
    assert!(closed, "the stalled connection is closed: {answer}");
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(head.starts_with("HTTP/1.1 4"), "{answer}");
    let body: Value = serde_json::from_str(body).expect("a JSON body");
    assert!(body["message"].is_string(), "{body}");
    assert_eq!(api.get("/connectors").expect(200), json!([]));
    ferry.terminate_cleanly();
}

#[test]
fn past_the_connection_cap_a_new_connection_is_refused_and_open_ones_are_served() {
    let ws = Workspace::new();
    let (mut ferry, api) = start(
        &ws,
        &[
            ("rest.max.connections", "2"),
            ("rest.read.timeout.ms", "60000"),
        ],
    );
    let mut first = connect(&api);
    let _second = connect(&api);
    // The first answers, so it is accepted (and the second, queued before the third, is too).
    first
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    let mut buf = [0u8; 4096];
    first
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let n = first
        .read(&mut buf)
        .expect("the first connection is served");
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));

    let mut third = connect(&api);
    let (answer, closed) = read_until_closed(&mut third, Duration::from_secs(30));
    assert!(closed, "the connection past the cap is closed: {answer}");
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(head.starts_with("HTTP/1.1 503"), "{answer}");
    let body: Value = serde_json::from_str(body).expect("a JSON body");
    assert_eq!(body["error_code"], 503);
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("rest.max.connections")),
        "{body}"
    );

    ferry.wait_for_log("new ones are answered 503");

    // The open connections are still served.
    first
        .write_all(b"GET /connectors HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    let n = first.read(&mut buf).expect("still served");
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));

    // A closed connection frees its place.
    drop(first);
    wait_until("a new connection served", || {
        let mut stream = connect(&api);
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .ok()?;
        let (answer, _) = read_until_closed(&mut stream, Duration::from_secs(30));
        answer.starts_with("HTTP/1.1 200").then_some(())
    });
    ferry.terminate_cleanly();
}

fn check_json_error(reply: &Reply, status: u16) {
    assert_eq!(reply.status, status, "{reply:?}");
    assert_eq!(
        reply.content_type.as_deref(),
        Some("application/json"),
        "{reply:?}"
    );
    let body: Value = serde_json::from_str(&reply.body)
        .unwrap_or_else(|e| panic!("the body is not JSON ({e}): {reply:?}"));
    assert_eq!(body["error_code"], status, "{reply:?}");
    assert!(body["message"].is_string(), "{reply:?}");
}

#[test]
fn requests_hyper_cannot_parse_get_json_errors() {
    let ws = Workspace::new();
    let (mut ferry, api) = start(&ws, &[]);

    check_json_error(&api.raw("GET / HTTP/1.1\r\nBad Header Line", b""), 400);
    let long = format!("GET /{} HTTP/1.1", "a".repeat(70_000));
    check_json_error(&api.raw(&long, b""), 414);
    let many: String = (0..150).map(|i| format!("\r\nX-Header-{i}: v")).collect();
    check_json_error(&api.raw(&format!("GET / HTTP/1.1{many}"), b""), 431);

    // The API still answers.
    api.get("/connectors").expect(200);
    ferry.terminate_cleanly();
}

#[test]
fn a_posted_name_is_trimmed_as_java_trims_it() {
    let ws = Workspace::new();
    let (mut ferry, api) = start(&ws, &[]);
    let input = ws.write("input.txt", "one\n");
    let config = json!({
        "connector.class": "FileStreamSource",
        "file": input.display().to_string(),
        "topic": "lines",
    });

    // U+00A0 is not trimmed by Java's String.trim(): the name keeps it and is refused for its
    // surrounding whitespace, never silently turned into another connector's name.
    let create = json!({"name": "\u{a0}src", "config": config}).to_string();
    api.post("/connectors", Some(&create))
        .expect_error(400, "whitespace");
    assert_eq!(api.get("/connectors").expect(200), json!([]));

    // Spaces, tabs and other characters up to U+0020 are trimmed, as Kafka Connect does.
    let create = json!({"name": " \t\u{1}src \n", "config": config}).to_string();
    let created = api.post("/connectors", Some(&create)).expect(201);
    assert_eq!(created["name"], "src");
    assert_eq!(api.get("/connectors").expect(200), json!(["src"]));
    ferry.terminate_cleanly();
}
