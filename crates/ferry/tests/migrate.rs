//! `ferry migrate` against the real Kafka Connect 4.4 (one worker shared by this binary's tests, on
//! the shared Apache Kafka 4.4 broker; each test its own connector and topic names):
//!
//! - FileStreamSource moved from Kafka Connect to `ferry standalone`, and from `ferry distributed`
//!   to Kafka Connect, while lines are being appended to its file: every line exactly once in the
//!   topic across the move (each side has its own offsets store: the offsets travel over KIP-875);
//! - a connector Ferry cannot run is refused before anything stops;
//! - Ferry becoming unreachable right after Kafka Connect stopped the connector: the move rolls
//!   back, Kafka Connect resumes it, and no line is lost or repeated;
//! - `ferry migrate check` on a cluster with a supported and an unsupported connector;
//! - Debezium's PostgreSQL connector moved from Kafka Connect to Ferry's PostgresCdcSource and back
//!   while rows change: the same replication slot, Debezium's offsets carried both ways, every change
//!   once in the topic, and Ferry's records under Debezium's schemas.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod kafka_support;
mod pg_source_support;
mod rest_support;
mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_support::{
    SLOW, TopicReader, create_topic, distributed_worker, kafka_connect, shared_broker, unique,
    wait_for,
};
use pg_source_support::{Pg, SlotGuard};
use rest_support::Api;
use serde_json::{Value, json};
use support::{FERRY, Ferry, Workspace, path_str};

const FILE_SOURCE: &str = "org.apache.kafka.connect.file.FileStreamSourceConnector";

/// Line `n`: every third one has multi-byte UTF-8 (Kafka Connect counts chars, Ferry bytes).
fn line(n: usize) -> String {
    if n.is_multiple_of(3) {
        format!("line-{n:05} çé€😀")
    } else {
        format!("line-{n:05} plain")
    }
}

/// Line `n` in ASCII only: for a test where Kafka Connect stops and resumes FileStreamSource
/// itself, which counts its positions in Java chars but skips bytes when it resumes, so a
/// multi-byte line before the position makes it resume inside a line (seen: a record " plain",
/// then lines repeated) — Kafka Connect's own behaviour, not the move's.
fn ascii_line(n: usize) -> String {
    format!("line-{n:05} plain")
}

/// Appends lines to a file, one every few milliseconds, until stopped; returns how many it wrote.
struct Writer {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<usize>,
}

impl Writer {
    fn start(path: &Path, line: fn(usize) -> String) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let path = path.to_owned();
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut n = 0;
            while !flag.load(Ordering::Relaxed) {
                support::append(&path, format!("{}\n", line(n)).as_bytes());
                n += 1;
                std::thread::sleep(Duration::from_millis(4));
            }
            n
        });
        Self { stop, thread }
    }

    /// Stops the writer; the number of lines the file holds.
    fn finish(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("the writer thread")
    }
}

/// The text payloads of the topic's records (JsonConverter with schemas, or plain strings).
fn payloads(reader: &TopicReader) -> Vec<String> {
    reader
        .messages
        .iter()
        .map(|m| {
            let bytes = rdkafka::Message::payload(m).unwrap_or_default();
            match serde_json::from_slice::<Value>(bytes) {
                Ok(value) if value["payload"].is_string() => {
                    value["payload"].as_str().unwrap_or_default().to_owned()
                }
                _ => String::from_utf8_lossy(bytes).into_owned(),
            }
        })
        .collect()
}

/// Reads `topic` until it holds `count` records, then asserts they are lines `0..count` once each,
/// in order.
fn assert_every_line_once(
    reader: &mut TopicReader,
    count: usize,
    line: fn(usize) -> String,
    context: &str,
) {
    wait_for(&format!("{count} records ({context})"), SLOW, || {
        reader.read_to_end();
        (reader.messages.len() >= count).then_some(())
    });
    // Anything repeated would arrive right behind: a moment more, then read again.
    std::thread::sleep(Duration::from_secs(2));
    reader.read_to_end();
    let got = payloads(reader);
    let expected: Vec<String> = (0..count).map(line).collect();
    if got != expected {
        let first_bad = got
            .iter()
            .zip(&expected)
            .position(|(g, e)| g != e)
            .unwrap_or(got.len().min(expected.len()));
        panic!(
            "{context}: every line exactly once, in order: {} records for {count} lines; first difference at {first_bad}: {:?} vs {:?}",
            got.len(),
            got.get(first_bad),
            expected.get(first_bad)
        );
    }
}

fn connector_state(api: &Api, name: &str) -> Option<String> {
    let reply = api.get(&format!("/connectors/{name}/status"));
    (reply.status == 200)
        .then(|| {
            reply.json()["connector"]["state"]
                .as_str()
                .map(str::to_owned)
        })
        .flatten()
}

fn migrate(args: &[&str]) -> Output {
    let output = Command::new(FERRY)
        .arg("migrate")
        .args(args)
        .output()
        .expect("running ferry migrate");
    eprintln!(
        "ferry migrate {args:?} → {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn file_source(name: &str, input: &Path, topic: &str) -> Value {
    json!({
        "name": name,
        "connector.class": FILE_SOURCE,
        "tasks.max": "1",
        "file": path_str(input),
        "topic": topic,
    })
}

/// A connector created on Kafka Connect, running, with its first lines in the topic.
fn running_on_kafka_connect(name: &str, config: &Value) -> Api {
    let kc = Api::new(kafka_connect("migrate-kc"));
    kc.put(
        &format!("/connectors/{name}/config"),
        Some(&config.to_string()),
    )
    .expect(201);
    wait_for("the connector to run on Kafka Connect", SLOW, || {
        (connector_state(&kc, name).as_deref() == Some("RUNNING")).then_some(())
    });
    kc
}

fn standalone_ferry(ws: &Workspace) -> (Ferry, Api) {
    standalone_ferry_with(ws, &[])
}

/// `ferry standalone` with a Kafka sink, an offsets file, a REST listener and `extra` settings.
fn standalone_ferry_with(ws: &Workspace, extra: &[(&str, &str)]) -> (Ferry, Api) {
    let bootstrap = shared_broker().bootstrap_servers();
    let offsets = path_str(&ws.file("offsets.bin"));
    let mut settings = vec![
        ("listeners", "http://127.0.0.1:0"),
        ("bootstrap.servers", bootstrap.as_str()),
        ("offset.storage.file.filename", offsets.as_str()),
        ("offset.flush.interval.ms", "200"),
    ];
    settings.extend_from_slice(extra);
    let worker = ws.properties("standalone.properties", &settings);
    let mut ferry = Ferry::standalone(ws, "standalone", &worker, &[]);
    let api = match extra.iter().find(|(k, _)| *k == "rest.auth.token") {
        Some((_, token)) => Api::with_token(&ferry.rest_url(), token),
        None => Api::new(&ferry.rest_url()),
    };
    (ferry, api)
}

/// Kafka Connect → `ferry standalone` while lines are appended: every line once in the topic.
#[test]
fn a_file_source_moves_from_kafka_connect_to_ferry_while_lines_are_written() {
    let name = unique("kc-to-ferry");
    let topic = unique("kc-to-ferry-lines");
    create_topic(&shared_broker().bootstrap_servers(), &topic, 1);
    let ws = Workspace::new();
    let input = ws.write("input.txt", "");
    let writer = Writer::start(&input, line);
    let kc = running_on_kafka_connect(&name, &file_source(&name, &input, &topic));
    let mut reader = TopicReader::new(&shared_broker().bootstrap_servers(), &topic);
    wait_for("Kafka Connect to deliver lines", SLOW, || {
        reader.read_to_end();
        (reader.messages.len() >= 100).then_some(())
    });
    // Ferry's REST API asks for a bearer token: the move reads it from a file.
    let (mut ferry, api) = standalone_ferry_with(&ws, &[("rest.auth.token", "s3cret-t0ken")]);
    let token_file = ws.write("token", "s3cret-t0ken\n");
    let to = ferry.rest_url();
    let move_args = [
        "connector",
        &name,
        "--from",
        kafka_connect("migrate-kc"),
        "--to",
        &to,
        "--to-token-file",
        &path_str(&token_file),
        "--delete-source",
    ];

    // A dry run checks both ends and changes nothing.
    let dry = migrate(&[&move_args[..], &["--dry-run"]].concat());
    assert!(dry.status.success(), "the dry run failed");
    assert!(String::from_utf8_lossy(&dry.stdout).contains("nothing was changed"));
    assert_eq!(connector_state(&kc, &name).as_deref(), Some("RUNNING"));
    assert_eq!(api.get(&format!("/connectors/{name}")).status, 404);

    let output = migrate(&move_args);
    assert!(output.status.success(), "the move failed");
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        said.contains("created STOPPED") && said.contains("moved"),
        "{said}"
    );
    assert_eq!(
        kc.get(&format!("/connectors/{name}")).status,
        404,
        "deleted on Kafka Connect"
    );
    assert_eq!(connector_state(&api, &name).as_deref(), Some("RUNNING"));
    std::thread::sleep(Duration::from_secs(1));
    let lines = writer.finish();
    assert_every_line_once(&mut reader, lines, line, "Kafka Connect, then Ferry");
    ferry.terminate_cleanly();
}

/// `ferry distributed` → Kafka Connect while lines are appended (`ferry migrate` the other way).
#[test]
fn a_file_source_moves_from_ferry_back_to_kafka_connect_while_lines_are_written() {
    let name = unique("ferry-to-kc");
    let topic = unique("ferry-to-kc-lines");
    create_topic(&shared_broker().bootstrap_servers(), &topic, 1);
    let ws = Workspace::new();
    let input = ws.write("input.txt", "");
    let writer = Writer::start(&input, line);
    let worker = distributed_worker(
        &ws,
        &shared_broker().bootstrap_servers(),
        &unique("ferry-group"),
    );
    let mut ferry = Ferry::spawn(
        ws.path(),
        [std::ffi::OsStr::new("distributed"), worker.as_os_str()],
        &ws.file("ferry.stdout"),
        &ws.file("ferry.stderr"),
    );
    let ferry_url = ferry.rest_url();
    let api = Api::new(&ferry_url);
    let config = file_source(&name, &input, &topic);
    ferry.wait_until("Ferry to create the connector", || {
        let reply = api.put(
            &format!("/connectors/{name}/config"),
            Some(&config.to_string()),
        );
        match reply.status {
            201 => Some(()),
            409 => None,
            other => panic!("creating the connector on Ferry: {other} {}", reply.body),
        }
    });
    let mut reader = TopicReader::new(&shared_broker().bootstrap_servers(), &topic);
    ferry.wait_until("Ferry to deliver lines", || {
        reader.read_to_end();
        (reader.messages.len() >= 100).then_some(())
    });

    let output = migrate(&[
        "connector",
        &name,
        "--from",
        &ferry_url,
        "--to",
        kafka_connect("migrate-kc"),
    ]);
    assert!(output.status.success(), "the move failed");
    let kc = Api::new(kafka_connect("migrate-kc"));
    assert_eq!(connector_state(&kc, &name).as_deref(), Some("RUNNING"));
    assert_eq!(
        connector_state(&api, &name).as_deref(),
        Some("STOPPED"),
        "left STOPPED on Ferry without --delete-source"
    );
    std::thread::sleep(Duration::from_secs(1));
    let lines = writer.finish();
    assert_every_line_once(&mut reader, lines, line, "Ferry, then Kafka Connect");
    kc.delete(&format!("/connectors/{name}")).expect(204);
    ferry.terminate_cleanly();
}

/// A connector with a transformation Ferry does not have is refused by Ferry's validation before
/// Kafka Connect is asked to stop it.
#[test]
fn a_connector_ferry_cannot_run_is_refused_before_anything_stops() {
    let name = unique("unsupported");
    let topic = unique("unsupported-lines");
    let ws = Workspace::new();
    let input = ws.write("input.txt", "one\n");
    let mut config = file_source(&name, &input, &topic);
    config["transforms"] = json!("unwrap");
    config["transforms.unwrap.type"] = json!("io.debezium.transforms.ExtractNewRecordState");
    let kc = running_on_kafka_connect(&name, &config);
    let (mut ferry, api) = standalone_ferry(&ws);

    let output = migrate(&[
        "connector",
        &name,
        "--from",
        kafka_connect("migrate-kc"),
        "--to",
        &ferry.rest_url(),
    ]);
    assert_eq!(output.status.code(), Some(1), "refused");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("refuses") && said.contains("nothing was changed"),
        "{said}"
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("transforms.unwrap.type"),
        "the refused key is named"
    );
    assert_eq!(connector_state(&kc, &name).as_deref(), Some("RUNNING"));
    assert_eq!(api.get(&format!("/connectors/{name}")).status, 404);
    kc.delete(&format!("/connectors/{name}")).expect(204);
    ferry.terminate_cleanly();
}

/// A proxy in front of a REST API that passes every request up to and including the first
/// validation, then refuses every connection: "Ferry unreachable" right after the checks.
struct CutAfterValidation {
    url: String,
    cut: Arc<AtomicBool>,
}

impl CutAfterValidation {
    fn start(upstream: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a proxy port");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let cut = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cut);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(mut client) = client else { return };
                if flag.load(Ordering::SeqCst) {
                    continue; // dropped: the client sees the connection closed
                }
                let mut head = [0u8; 4096];
                let n = client.read(&mut head).unwrap_or(0);
                if String::from_utf8_lossy(&head[..n]).contains("/config/validate") {
                    flag.store(true, Ordering::SeqCst);
                }
                let Ok(mut server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let _ = server.write_all(&head[..n]);
                let (Ok(mut client_back), Ok(mut server_back)) =
                    (client.try_clone(), server.try_clone())
                else {
                    continue;
                };
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut client, &mut server);
                    let _ = server.shutdown(std::net::Shutdown::Write);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut server_back, &mut client_back);
                });
            }
        });
        Self { url, cut }
    }
}

/// Ferry answers the checks, then cannot be reached once Kafka Connect stopped the connector: the
/// move fails, rolls back, and Kafka Connect resumes the connector from its own offsets — every
/// line once.
#[test]
fn ferry_unreachable_after_the_stop_rolls_back_and_kafka_connect_resumes() {
    let name = unique("rollback");
    let topic = unique("rollback-lines");
    create_topic(&shared_broker().bootstrap_servers(), &topic, 1);
    let ws = Workspace::new();
    let input = ws.write("input.txt", "");
    let writer = Writer::start(&input, ascii_line);
    let kc = running_on_kafka_connect(&name, &file_source(&name, &input, &topic));
    let mut reader = TopicReader::new(&shared_broker().bootstrap_servers(), &topic);
    wait_for("Kafka Connect to deliver lines", SLOW, || {
        reader.read_to_end();
        (reader.messages.len() >= 50).then_some(())
    });
    let (mut ferry, api) = standalone_ferry(&ws);
    let proxy = CutAfterValidation::start(&ferry.rest_url());

    let output = migrate(&[
        "connector",
        &name,
        "--from",
        kafka_connect("migrate-kc"),
        "--to",
        &proxy.url,
        "--timeout",
        "60",
    ]);
    assert!(proxy.cut.load(Ordering::SeqCst), "the proxy cut Ferry off");
    assert_eq!(output.status.code(), Some(1), "the move failed");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("Rollback") && said.contains("the source resumed"),
        "{said}"
    );
    wait_for("Kafka Connect to run the connector again", SLOW, || {
        (connector_state(&kc, &name).as_deref() == Some("RUNNING")).then_some(())
    });
    assert_eq!(
        api.get(&format!("/connectors/{name}")).status,
        404,
        "nothing on Ferry"
    );
    std::thread::sleep(Duration::from_secs(1));
    let lines = writer.finish();
    assert_every_line_once(
        &mut reader,
        lines,
        ascii_line,
        "Kafka Connect, a failed move, Kafka Connect",
    );
    kc.delete(&format!("/connectors/{name}")).expect(204);
    ferry.terminate_cleanly();
}

/// `ferry migrate check --json` on a cluster with one connector Ferry runs unchanged and one it
/// does not (this binary's other connectors may be listed too).
#[test]
fn check_reports_which_connectors_ferry_runs_unchanged() {
    let ws = Workspace::new();
    let input = ws.write("input.txt", "one\n");
    let plain = unique("check-plain");
    let unsupported = unique("check-unwrap");
    let mut config = file_source(&unsupported, &input, &unique("check-lines"));
    config["transforms"] = json!("unwrap");
    config["transforms.unwrap.type"] = json!("io.debezium.transforms.ExtractNewRecordState");
    let kc = running_on_kafka_connect(&plain, &file_source(&plain, &input, &unique("check-lines")));
    running_on_kafka_connect(&unsupported, &config);

    let output = migrate(&["check", "--from", kafka_connect("migrate-kc"), "--json"]);
    assert!(output.status.success());
    let report: Value = serde_json::from_slice(&output.stdout).expect("a JSON report");
    let entry = |name: &str| -> Value {
        report
            .as_array()
            .and_then(|all| all.iter().find(|c| c["name"] == json!(name)).cloned())
            .unwrap_or_else(|| panic!("{name} missing from {report}"))
    };
    assert_eq!(entry(&plain)["runs_unchanged"], json!(true), "{report}");
    let refused = entry(&unsupported);
    assert_eq!(refused["runs_unchanged"], json!(false));
    assert!(
        refused["problems"].as_array().is_some_and(|p| p
            .iter()
            .any(|p| p["key"] == json!("transforms.unwrap.type"))),
        "{refused}"
    );
    let table = migrate(&["check", "--from", kafka_connect("migrate-kc")]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains(&plain) && table.contains("transforms.unwrap.type"),
        "{table}"
    );
    for name in [&plain, &unsupported] {
        kc.delete(&format!("/connectors/{name}")).expect(204);
    }
}

/// Inserts a row every few milliseconds and updates every third one, until stopped; returns the
/// changes it made, as (op, id), in order.
struct RowWriter {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<(String, i64)>>,
}

impl RowWriter {
    fn start(table: &str, from: i64) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let table = table.to_owned();
        let thread = std::thread::spawn(move || {
            let pg = Pg::connect();
            let mut changes = Vec::new();
            let mut id = from;
            while !flag.load(Ordering::Relaxed) {
                pg.execute(&format!(
                    "INSERT INTO public.{table} VALUES ({id}, 0, 'row {id}')"
                ));
                changes.push(("c".to_owned(), id));
                if id % 3 == 0 {
                    pg.execute(&format!(
                        "UPDATE public.{table} SET qty = 1 WHERE id = {id}"
                    ));
                    changes.push(("u".to_owned(), id));
                }
                id += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            changes
        });
        Self { stop, thread }
    }

    fn finish(self) -> Vec<(String, i64)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("the row writer")
    }
}

/// A change record of the topic: (op, id, who wrote it: Debezium's `source.version` or Ferry's),
/// `None` for a tombstone.
fn change(message: &rdkafka::message::OwnedMessage) -> Option<(String, i64, String)> {
    let value: Value = serde_json::from_slice(rdkafka::Message::payload(message)?).ok()?;
    let payload = &value["payload"];
    let op = payload["op"].as_str()?.to_owned();
    let row = if op == "d" {
        &payload["before"]
    } else {
        &payload["after"]
    };
    Some((
        op,
        row["id"].as_i64()?,
        payload["source"]["version"]
            .as_str()
            .unwrap_or("?")
            .to_owned(),
    ))
}

/// Debezium's PostgreSQL connector runs in Kafka Connect, is moved to `ferry standalone` (its
/// PostgresCdcSource answers to Debezium's class and keys) and then back, while rows are inserted
/// and updated: the same slot and publication throughout, Debezium's offsets read by Ferry and
/// Ferry's by Debezium, every change exactly once in the topic, and Ferry's change records with
/// exactly Debezium's key and value schemas.
#[test]
fn debezium_postgres_moves_to_ferry_and_back_while_rows_change() {
    let pg = Pg::connect();
    let table = pg.table("dbzmove", "id int primary key, qty int not null, note text");
    let _guard = SlotGuard {
        name: table.name.clone(),
    };
    for id in 0..10 {
        pg.execute(&format!(
            "INSERT INTO public.{} VALUES ({id}, 0, 'row {id}')",
            table.name
        ));
    }
    let name = unique("dbz-move");
    let prefix = unique("dbzmove");
    let topic = format!("{prefix}.public.{}", table.name);
    create_topic(&shared_broker().bootstrap_servers(), &topic, 1);
    let config = json!({
        "name": name,
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput",
        "database.hostname": "127.0.0.1",
        "database.port": "5432",
        "database.user": "postgres",
        "database.password": "",
        "database.dbname": "test",
        "topic.prefix": prefix,
        "slot.name": table.name,
        "publication.name": table.name,
        "publication.autocreate.mode": "filtered",
        "table.include.list": format!("public.{}", table.name),
        "snapshot.mode": "initial",
    });
    let kc = running_on_kafka_connect(&name, &config);
    let mut reader = TopicReader::new(&shared_broker().bootstrap_servers(), &topic);
    wait_for("Debezium's snapshot in the topic", SLOW, || {
        reader.read_to_end();
        (reader.messages.len() >= 10).then_some(())
    });
    let writer = RowWriter::start(&table.name, 10);
    wait_for("Debezium to stream changes", SLOW, || {
        reader.read_to_end();
        (reader.messages.len() >= 40).then_some(())
    });

    let ws = Workspace::new();
    let (mut ferry, api) = standalone_ferry(&ws);
    let ferry_url = ferry.rest_url();
    let to_ferry = migrate(&[
        "connector",
        &name,
        "--from",
        kafka_connect("migrate-kc"),
        "--to",
        &ferry_url,
        "--delete-source",
    ]);
    assert!(to_ferry.status.success(), "the move to Ferry failed");
    let moved_at = reader.messages.len();
    wait_for("Ferry to stream changes", SLOW, || {
        reader.read_to_end();
        (reader.messages.len() >= moved_at + 60).then_some(())
    });
    let back = migrate(&[
        "connector",
        &name,
        "--from",
        &ferry_url,
        "--to",
        kafka_connect("migrate-kc"),
        "--delete-source",
    ]);
    assert!(
        back.status.success(),
        "the move back to Kafka Connect failed"
    );
    assert_eq!(api.get(&format!("/connectors/{name}")).status, 404);
    let back_at = reader.messages.len();
    wait_for("Debezium to stream changes again", SLOW, || {
        reader.read_to_end();
        (reader.messages.len() >= back_at + 40).then_some(())
    });
    let written = writer.finish();

    let mut expected: Vec<(String, i64)> = (0..10).map(|id| ("r".to_owned(), id)).collect();
    expected.extend(written);
    wait_for("every change in the topic", SLOW, || {
        reader.read_to_end();
        (reader.messages.iter().filter_map(change).count() >= expected.len()).then_some(())
    });
    std::thread::sleep(Duration::from_secs(2));
    reader.read_to_end();
    let seen: Vec<(String, i64, String)> = reader.messages.iter().filter_map(change).collect();
    let ops: Vec<(String, i64)> = seen.iter().map(|(op, id, _)| (op.clone(), *id)).collect();
    assert_eq!(
        ops.len(),
        expected.len(),
        "every change once: {} records for {} changes",
        ops.len(),
        expected.len()
    );
    if ops != expected {
        // Around each hand-over: who wrote what, at which LSN.
        for (i, m) in reader.messages.iter().enumerate() {
            let Some(value) =
                rdkafka::Message::payload(m).and_then(|p| serde_json::from_slice::<Value>(p).ok())
            else {
                continue;
            };
            let source = &value["payload"]["source"];
            eprintln!(
                "{i}: {} {} by {} lsn {} txId {} sequence {}",
                value["payload"]["op"],
                value["payload"]["after"]["id"],
                source["version"],
                source["lsn"],
                source["txId"],
                source["sequence"]
            );
        }
    }
    assert_eq!(ops, expected, "every change once, in commit order");
    let writers: std::collections::BTreeSet<&str> =
        seen.iter().map(|(_, _, who)| who.as_str()).collect();
    assert!(
        writers.len() >= 2,
        "both runtimes wrote changes: {writers:?}"
    );

    // Ferry's records under Debezium's schemas: a create of each, compared field by field.
    let record = |debezium: bool| {
        reader
            .messages
            .iter()
            .find(|m| {
                change(m)
                    .is_some_and(|(op, _, who)| op == "c" && who.ends_with(".Final") == debezium)
            })
            .map(|m| {
                let key: Value =
                    serde_json::from_slice(rdkafka::Message::key(m).unwrap_or_default()).unwrap();
                let value: Value =
                    serde_json::from_slice(rdkafka::Message::payload(m).unwrap_or_default())
                        .unwrap();
                (key, value)
            })
            .expect("a create record")
    };
    let (dbz_key, dbz_value) = record(true);
    let (ferry_key, ferry_value) = record(false);
    assert_eq!(ferry_key["schema"], dbz_key["schema"], "the key schema");
    assert_eq!(
        ferry_value["schema"], dbz_value["schema"],
        "the value schema"
    );
    let fields = |v: &Value| -> Vec<String> {
        v["payload"]["source"]
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    };
    assert_eq!(fields(&ferry_value), fields(&dbz_value), "source's fields");
    kc.delete(&format!("/connectors/{name}")).expect(204);
    ferry.terminate_cleanly();
}

/// A fake worker holding connector `fake` that accepts the stop request but never reports it
/// STOPPED; records the requests it answered.
struct StuckSource {
    url: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl StuckSource {
    fn start(config: Value) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(mut client) = client else { return };
                let mut head = [0u8; 8192];
                let n = client.read(&mut head).unwrap_or(0);
                let text = String::from_utf8_lossy(&head[..n]).to_string();
                let line = text.lines().next().unwrap_or("").to_owned();
                let mut parts = line.split(' ');
                let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                let (status, body) = match (method, path) {
                    ("GET", "/connectors/fake") => (
                        200,
                        json!({"name": "fake", "type": "source", "config": config, "tasks": []}),
                    ),
                    ("GET", "/connectors/fake/status") => (
                        200,
                        json!({"name": "fake", "type": "source",
                               "connector": {"state": "RUNNING", "worker_id": "stuck:8083"},
                               "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "stuck:8083"}]}),
                    ),
                    ("PUT", "/connectors/fake/stop" | "/connectors/fake/resume") => {
                        (202, Value::Null)
                    }
                    _ => (404, json!({"error_code": 404, "message": "not here"})),
                };
                seen.lock()
                    .expect("requests")
                    .push(format!("{method} {path}"));
                let body = if body.is_null() {
                    String::new()
                } else {
                    body.to_string()
                };
                let reason = if status == 404 { "Not Found" } else { "OK" };
                let _ = write!(
                    client,
                    "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Self { url, requests }
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().expect("requests").clone()
    }
}

/// A source that never reports STOPPED: `--timeout` ends the wait with an error naming the
/// timeout and what was awaited, the source is resumed (rollback), and nothing is created on the
/// target.
#[test]
fn a_source_that_never_stops_times_out_and_is_resumed() {
    let ws = Workspace::new();
    let input = ws.file("input.txt");
    std::fs::write(&input, "one\n").expect("input");
    let source = StuckSource::start(file_source("fake", &input, "stuck"));
    let worker = ws.worker(200, &[]);
    let mut ferry = Ferry::standalone(&ws, "target", &worker, &[]);
    let target = ferry.rest_url();
    let started = Instant::now();
    let output = migrate(&[
        "connector",
        "fake",
        "--from",
        &source.url,
        "--to",
        &target,
        "--timeout",
        "2",
    ]);
    let elapsed = started.elapsed();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("STOPPED") && stderr.contains("2s"),
        "the error names the wait and its limit: {stderr}"
    );
    assert!(
        elapsed < Duration::from_secs(30),
        "gave up after {elapsed:?}, not about --timeout 2"
    );
    let requests = source.requests();
    assert!(
        requests.contains(&"PUT /connectors/fake/stop".to_owned())
            && requests.contains(&"PUT /connectors/fake/resume".to_owned()),
        "stopped, then resumed by the rollback: {requests:?}"
    );
    Api::new(&target).get("/connectors/fake").expect(404);
    ferry.terminate_cleanly();
}
