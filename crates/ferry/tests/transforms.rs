//! Single Message Transforms in a running `ferry standalone`: Kafka Connect's documented example
//! runs unchanged, a filtered record's offset is committed (it is not read again after a restart),
//! a failing transform follows `errors.tolerance` (and `errors.log.*`), and a bad chain is refused
//! before anything starts.

mod support;

use serde_json::{Value, json};
use support::{Ferry, SinkTail, Workspace, parse_line, path_str};

/// The values of the sink's records.
fn values(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| parse_line(l)["value"].clone())
        .collect()
}

#[test]
fn kafka_connect_documented_example_hoists_the_line_and_inserts_a_static_field() {
    // https://kafka.apache.org/documentation/#connect_transforms, unchanged but for the paths.
    let ws = Workspace::new();
    let input = ws.write("test.txt", "hello\nworld\n");
    let worker = ws.worker(100, &[]);
    let connector = ws.properties(
        "connect-file-source.properties",
        &[
            ("name", "local-file-source"),
            ("connector.class", "FileStreamSource"),
            ("tasks.max", "1"),
            ("file", &path_str(&input)),
            ("topic", "connect-test"),
            ("transforms", "MakeMap, InsertSource"),
            (
                "transforms.MakeMap.type",
                "org.apache.kafka.connect.transforms.HoistField$Value",
            ),
            ("transforms.MakeMap.field", "line"),
            (
                "transforms.InsertSource.type",
                "org.apache.kafka.connect.transforms.InsertField$Value",
            ),
            ("transforms.InsertSource.static.field", "data_source"),
            ("transforms.InsertSource.static.value", "test-file-source"),
        ],
    );
    let mut ferry = Ferry::standalone(&ws, "run", &worker, &[connector.as_path()]);
    let mut sink = SinkTail::new(&ws.sink_path());
    let lines = sink.wait_for(&mut ferry, 2).to_vec();
    ferry.terminate_cleanly();
    assert_eq!(
        values(&lines),
        [
            json!({"line": "hello", "data_source": "test-file-source"}),
            json!({"line": "world", "data_source": "test-file-source"}),
        ]
    );
    assert_eq!(parse_line(&lines[0])["topic"], "connect-test");
}

#[test]
fn a_filtered_records_offset_is_committed_so_it_is_not_read_again() {
    let ws = Workspace::new();
    let input = ws.write("input.txt", "drop me\ndrop me too\n");
    let worker = ws.worker(100, &[]);
    // Filter with a predicate on the topic: records to `noise` go nowhere, those to `lines` pass.
    let entries = |topic: &'static str| {
        vec![
            ("name", "filtered".to_owned()),
            ("connector.class", "FileStreamSource".to_owned()),
            ("file", path_str(&input)),
            ("topic", topic.to_owned()),
            ("transforms", "dropNoise".to_owned()),
            (
                "transforms.dropNoise.type",
                "org.apache.kafka.connect.transforms.Filter".to_owned(),
            ),
            ("transforms.dropNoise.predicate", "isNoise".to_owned()),
            ("predicates", "isNoise".to_owned()),
            (
                "predicates.isNoise.type",
                "org.apache.kafka.connect.transforms.predicates.TopicNameMatches".to_owned(),
            ),
            ("predicates.isNoise.pattern", "noise".to_owned()),
        ]
    };
    let write = |topic: &'static str| {
        let e = entries(topic);
        let pairs: Vec<(&str, &str)> = e.iter().map(|(k, v)| (*k, v.as_str())).collect();
        ws.properties("filtered.properties", &pairs)
    };
    let connector = write("noise");
    let mut ferry = Ferry::standalone(&ws, "first", &worker, &[connector.as_path()]);
    // Both lines were read and filtered: their offset (the end of the file) is committed.
    let end = std::fs::metadata(&input).map(|m| m.len()).unwrap_or(0);
    let url = ferry.rest_url();
    ferry.wait_until("the filtered lines' offset committed", || {
        let body = ureq::get(format!("{url}/connectors/filtered/offsets"))
            .call()
            .ok()?
            .into_body()
            .read_to_string()
            .ok()?;
        let offsets: Value = serde_json::from_str(&body).ok()?;
        offsets["offsets"]
            .as_array()?
            .iter()
            .any(|o| o["offset"]["position"].as_u64() == Some(end))
            .then_some(())
    });
    ferry.terminate_cleanly();
    assert_eq!(
        support::read_sink(&ws.sink_path()).len(),
        0,
        "nothing delivered"
    );

    // The same connector now writes to `lines` (not filtered): only what is appended arrives.
    support::append(&input, b"kept\n");
    let connector = write("lines");
    let mut ferry = Ferry::standalone(&ws, "second", &worker, &[connector.as_path()]);
    let mut sink = SinkTail::new(&ws.sink_path());
    let lines = sink.wait_for(&mut ferry, 1).to_vec();
    ferry.terminate_cleanly();
    assert_eq!(values(&lines), [json!("kept")]);
    assert_eq!(
        support::read_sink(&ws.sink_path()).len(),
        1,
        "the filtered lines were not read again"
    );
}

/// A FileStreamSource casting each line to int32: `abc` cannot be cast.
fn casting(ws: &Workspace, tolerance: &str) -> std::path::PathBuf {
    let input = ws.write("numbers.txt", "1\nabc\n3\n");
    ws.properties(
        "cast.properties",
        &[
            ("name", "cast"),
            ("connector.class", "FileStreamSource"),
            ("file", &path_str(&input)),
            ("topic", "numbers"),
            ("transforms", "toInt"),
            (
                "transforms.toInt.type",
                "org.apache.kafka.connect.transforms.Cast$Value",
            ),
            ("transforms.toInt.spec", "int32"),
            ("errors.tolerance", tolerance),
            ("errors.log.enable", "true"),
            ("errors.log.include.messages", "true"),
        ],
    )
}

#[test]
fn a_failing_transform_is_skipped_and_logged_under_errors_tolerance_all() {
    let ws = Workspace::new();
    let worker = ws.worker(100, &[]);
    let connector = casting(&ws, "all");
    let mut ferry = Ferry::standalone(&ws, "run", &worker, &[connector.as_path()]);
    let mut sink = SinkTail::new(&ws.sink_path());
    let lines = sink.wait_for(&mut ferry, 2).to_vec();
    let log = ferry.wait_for_log("Error encountered in task");
    ferry.terminate_cleanly();
    assert_eq!(values(&lines), [json!(1), json!(3)]);
    assert!(
        log.contains("Executing stage 'TRANSFORMATION' with class 'org.apache.kafka.connect.transforms.Cast$Value'"),
        "{log}"
    );
    // errors.log.include.messages: the record is named.
    assert!(log.contains("value=\"abc\""), "{log}");
}

#[test]
fn a_failing_transform_fails_the_task_under_errors_tolerance_none() {
    let ws = Workspace::new();
    let worker = ws.worker(100, &[]);
    let connector = casting(&ws, "none");
    let mut ferry = Ferry::standalone(&ws, "run", &worker, &[connector.as_path()]);
    let log = ferry.wait_for_log("Tolerance exceeded in error handler");
    let url = ferry.rest_url();
    let status = ferry.wait_until("the task FAILED", || {
        let body = ureq::get(format!("{url}/connectors/cast/status"))
            .call()
            .ok()?
            .into_body()
            .read_to_string()
            .ok()?;
        let status: Value = serde_json::from_str(&body).ok()?;
        (status["tasks"][0]["state"] == "FAILED").then_some(status)
    });
    ferry.terminate();
    assert!(
        status["tasks"][0]["trace"]
            .as_str()
            .is_some_and(|t| t.contains("Cast$Value")),
        "{status}"
    );
    // Only the record before the failing one was delivered.
    assert_eq!(
        support::read_sink(&ws.sink_path())
            .iter()
            .map(|r| r["value"].clone())
            .collect::<Vec<_>>(),
        [json!(1)],
        "{log}"
    );
}

#[test]
fn a_bad_chain_is_refused_before_anything_starts() {
    let ws = Workspace::new();
    let worker = ws.worker(100, &[]);
    let input = ws.write("in.txt", "x\n");
    ws.properties(
        "bad.properties",
        &[
            ("name", "bad"),
            ("connector.class", "FileStreamSource"),
            ("file", &path_str(&input)),
            ("topic", "t"),
            ("transforms", "a,b"),
            (
                "transforms.a.type",
                "org.apache.kafka.connect.transforms.NoSuchThing",
            ),
            (
                "transforms.b.type",
                "org.apache.kafka.connect.transforms.HoistField$Value",
            ),
            ("transforms.c.field", "typo"),
        ],
    );
    let out = support::run(
        ws.path(),
        &["standalone", &path_str(&worker), "bad.properties"],
    );
    assert!(!out.status.success());
    for needle in [
        "transforms.a.type",
        "unknown transformation class",
        // HoistField's required key.
        "transforms.b.field",
        // A key of an alias that is not listed.
        "transforms.c.field",
    ] {
        assert!(
            out.stderr.contains(needle),
            "{needle:?} in:\n{}",
            out.stderr
        );
    }
}
