//! `ferry standalone` with an HTTPS listener (a PEM keystore made in the test) and HTTP Basic
//! authentication (`rest.basic.auth.credentials.file`): the API answers over TLS to a client that
//! trusts the certificate (as `curl --cacert`), refuses missing or wrong credentials with `401`,
//! never logs a password, and a JKS keystore is refused at start with a hint to use PEM.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use support::{Ferry, Workspace, path_str, run};

/// Status, lower-cased head, body.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// `GET path` over TLS to `addr`, trusting only `cert` (PEM), with an optional `Authorization`.
fn get_tls(addr: &str, cert: &str, path: &str, authorization: Option<&str>) -> Answer {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(cert.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let host = addr.rsplit_once(':').unwrap().0.to_owned();
    let connection =
        rustls::ClientConnection::new(Arc::new(config), ServerName::try_from(host).unwrap())
            .unwrap();
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let mut tls = rustls::StreamOwned::new(connection, tcp);
    let auth = authorization
        .map(|a| format!("authorization: {a}\r\n"))
        .unwrap_or_default();
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n{auth}\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    // The server may close without close_notify after its answer; what was read is the answer.
    let _ = tls.read_to_end(&mut raw);
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP answer: {raw:?}"));
    Answer {
        status: head[9..12].parse().unwrap(),
        head: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

fn basic(user: &str, password: &str) -> String {
    // base64 by hand: the test needs it for two short strings only.
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let input = format!("{user}:{password}");
    let mut out = String::new();
    for chunk in input.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    format!("Basic {out}")
}

#[test]
fn a_standalone_worker_serves_https_and_checks_basic_credentials() {
    let ws = Workspace::new();
    let certified =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).expect("a certificate");
    let cert = certified.cert.pem();
    let keystore = ws.write(
        "keystore.pem",
        format!("{}{cert}", certified.key_pair.serialize_pem()),
    );
    let users = ws.write("users.properties", "alice: s3cret-pw\nbob=hunter2-pw\n");
    let worker = ws.worker(
        100,
        &[
            ("listeners", "https://127.0.0.1:0"),
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", &path_str(&keystore)),
            ("rest.basic.auth.credentials.file", &path_str(&users)),
        ],
    );
    let mut ferry = Ferry::standalone(&ws, "ferry", &worker, &[]);
    let log = ferry.wait_for_log("REST API listening on https://");
    let addr = log
        .split("REST API listening on https://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("an address follows")
        .to_owned();

    let root = get_tls(&addr, &cert, "/", Some(&basic("alice", "s3cret-pw")));
    assert_eq!(root.status, 200, "{}", root.body);
    assert!(root.body.contains("\"version\""), "{}", root.body);
    let bob = get_tls(
        &addr,
        &cert,
        "/connectors",
        Some(&basic("bob", "hunter2-pw")),
    );
    assert_eq!((bob.status, bob.body.as_str()), (200, "[]"));

    for (what, authorization) in [
        ("a wrong password", Some(basic("alice", "hunter2-pw"))),
        ("an unknown user", Some(basic("carol", "s3cret-pw"))),
        ("no credentials", None),
    ] {
        let refused = get_tls(&addr, &cert, "/connectors", authorization.as_deref());
        assert_eq!(refused.status, 401, "{what}: {}", refused.body);
        assert!(
            refused.head.contains("www-authenticate: basic realm="),
            "{what}: {}",
            refused.head
        );
        let body: serde_json::Value = serde_json::from_str(&refused.body).unwrap();
        assert_eq!(body["error_code"], 401, "{what}");
        assert!(body["message"].is_string(), "{what}");
    }
    ferry.terminate_cleanly();
    let log = ferry.log();
    assert!(
        !log.contains("s3cret-pw") && !log.contains("hunter2-pw"),
        "a password was logged:\n{log}"
    );
}

#[test]
fn a_jks_keystore_is_refused_at_start_with_a_hint_to_use_pem() {
    let ws = Workspace::new();
    let jks = ws.write("keystore.jks", [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]);
    let worker = ws.worker(
        100,
        &[
            ("listeners", "https://127.0.0.1:0"),
            ("ssl.keystore.type", "JKS"),
            ("ssl.keystore.location", &path_str(&jks)),
            ("ssl.keystore.password", "changeit"),
        ],
    );
    let done = run(ws.path(), &["standalone", &path_str(&worker)]);
    assert!(!done.status.success(), "{done:?}");
    assert!(
        done.stderr.contains("ssl.keystore.type") && done.stderr.contains("use PEM"),
        "{}",
        done.stderr
    );
    assert!(!done.stderr.contains("changeit"), "{}", done.stderr);
}
