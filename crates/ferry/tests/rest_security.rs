//! `ferry standalone` with an HTTPS listener (a PEM keystore made in the test) and HTTP Basic
//! authentication (`rest.basic.auth.credentials.file`): the API answers over TLS to a client that
//! trusts the certificate (as `curl --cacert`), refuses missing or wrong credentials with `401`,
//! never logs a password, and a JKS keystore is refused at start with a hint to use PEM.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod support;
mod tls_support;

use support::{Ferry, Workspace, path_str, run};
use tls_support::{Answer, basic, self_signed};

fn get_tls(addr: &str, cert: &str, path: &str, authorization: Option<&str>) -> Answer {
    tls_support::request(addr, cert, "GET", path, authorization, None)
}

#[test]
fn a_standalone_worker_serves_https_and_checks_basic_credentials() {
    let ws = Workspace::new();
    let (keystore, cert) = self_signed(ws.path(), &["127.0.0.1"]);
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

/// `ferry migrate` reaches a worker over HTTPS with Basic credentials (`--from-cacert`,
/// `--from-basic-auth-file`): the check lists its connectors; without the CA, or with wrong
/// credentials, it says so and exits 2.
#[test]
fn ferry_migrate_reaches_an_https_worker_with_basic_credentials() {
    let ws = Workspace::new();
    let (keystore, cert) = self_signed(ws.path(), &["127.0.0.1"]);
    let users = ws.write("users.properties", "alice: s3cret-pw\n");
    let input = ws.write("input.txt", "one\n");
    let connector = ws.properties(
        "file.properties",
        &[
            ("name", "lines"),
            ("connector.class", "FileStreamSource"),
            ("file", &path_str(&input)),
            ("topic", "lines"),
        ],
    );
    let worker = ws.worker(
        100,
        &[
            ("listeners", "https://127.0.0.1:0"),
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", &path_str(&keystore)),
            ("rest.basic.auth.credentials.file", &path_str(&users)),
        ],
    );
    let mut ferry = Ferry::standalone(&ws, "ferry", &worker, &[&connector]);
    let log = ferry.wait_for_log("REST API listening on https://");
    let addr = log
        .split("REST API listening on https://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("an address follows")
        .to_owned();
    let url = format!("https://{addr}");
    let ca = ws.write("ca.pem", &cert);
    let good = ws.write("alice", "alice:s3cret-pw\n");
    let bad = ws.write("mallory", "alice:wrong\n");
    let check = |extra: &[&str]| {
        let mut args = vec!["migrate", "check", "--from", url.as_str(), "--json"];
        args.extend_from_slice(extra);
        std::process::Command::new(support::FERRY)
            .args(&args)
            .output()
            .expect("running ferry migrate")
    };

    let ok = check(&[
        "--from-cacert",
        &path_str(&ca),
        "--from-basic-auth-file",
        &path_str(&good),
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(report[0]["name"], "lines", "{report}");
    assert_eq!(report[0]["runs_unchanged"], true, "{report}");

    let untrusted = check(&["--from-basic-auth-file", &path_str(&good)]);
    assert_eq!(untrusted.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&untrusted.stderr).contains("no answer"),
        "{}",
        String::from_utf8_lossy(&untrusted.stderr)
    );
    let refused = check(&[
        "--from-cacert",
        &path_str(&ca),
        "--from-basic-auth-file",
        &path_str(&bad),
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("401"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    ferry.terminate_cleanly();
}
