//! The real Apache Kafka broker and Kafka Connect worker the testkit runs: they start, serve, restart
//! on the same address, and stop.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use ferry_testkit::{ConnectOptions, ConnectWorker, KafkaBroker};

/// `GET <path>` over plain HTTP/1.1; the status line and body.
fn http_get(base: &str, path: &str) -> String {
    let address = base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn a_broker_restarts_on_its_address_and_a_connect_worker_serves_its_plugins() {
    let mut broker = KafkaBroker::start().unwrap();
    let address = broker.bootstrap_servers();
    assert!(TcpStream::connect(&address).is_ok());
    broker.stop();
    assert!(
        TcpStream::connect(&address).is_err(),
        "the broker still answers after stop"
    );
    broker.restart().unwrap();
    assert_eq!(broker.bootstrap_servers(), address);
    assert!(TcpStream::connect(&address).is_ok());

    let mut worker = ConnectWorker::start(&broker, ConnectOptions::new("testkit-connect")).unwrap();
    let root = http_get(&worker.rest_url(), "/");
    assert!(root.starts_with("HTTP/1.1 200"), "{root}");
    assert!(root.contains("\"version\":\"4.4.0\""), "{root}");
    let plugins = http_get(&worker.rest_url(), "/connector-plugins");
    for class in [
        "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "io.debezium.connector.postgresql.PostgresConnector",
    ] {
        assert!(plugins.contains(class), "{class} missing: {plugins}");
    }
    assert!(worker.stop(), "the worker did not stop on SIGTERM");
}

#[test]
fn the_shared_broker_is_one_broker() {
    let first = KafkaBroker::shared().unwrap();
    let second = KafkaBroker::shared().unwrap();
    assert!(std::ptr::eq(first, second));
    assert!(TcpStream::connect(first.bootstrap_servers()).is_ok());
}
