//! `ferry standalone worker.properties conn.json`: a JSON connector file, in either of Kafka Connect's
//! shapes, runs a FileStreamSource; malformed ones are refused before anything starts, naming the file.

mod support;

use std::path::Path;

use support::{Ferry, SinkTail, Workspace, parse_line, path_str};

/// Runs the connector file `name` (with `text`) and checks both input lines arrive in the sink.
fn delivers(text_for: impl Fn(&str) -> String) {
    let ws = Workspace::new();
    let input = ws.write("input.txt", "one\ntwo\n");
    let worker = ws.worker(200, &[]);
    let connector = ws.write("conn.json", text_for(&path_str(&input)));
    let mut ferry = Ferry::standalone(&ws, "run", &worker, &[connector.as_path()]);
    let mut sink = SinkTail::new(&ws.sink_path());
    let lines = sink.wait_for(&mut ferry, 2).to_vec();
    ferry.terminate_cleanly();
    let values: Vec<_> = lines
        .iter()
        .map(|l| {
            let record = parse_line(l);
            assert_eq!(record["topic"], "lines", "{l}");
            record["value"].as_str().expect("a string").to_owned()
        })
        .collect();
    assert_eq!(values, ["one", "two"]);
}

#[test]
fn a_create_request_shaped_json_file_runs() {
    delivers(|input| {
        serde_json::json!({
            "name": "json-source",
            "config": {
                "connector.class": "FileStreamSource",
                "tasks.max": 1,
                "file": input,
                "topic": "lines"
            }
        })
        .to_string()
    });
}

#[test]
fn a_flat_json_map_runs() {
    delivers(|input| {
        serde_json::json!({
            "name": "json-source",
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "tasks.max": "1",
            "file": input,
            "topic": "lines"
        })
        .to_string()
    });
}

/// Runs `ferry standalone` with a connector file holding `text`; it must exit non-zero with a message
/// naming the file and containing each of `needles`.
fn refused(text: &str, needles: &[&str]) {
    let ws = Workspace::new();
    let worker = ws.worker(200, &[]);
    ws.write("bad.json", text);
    let out = support::run(ws.path(), &["standalone", &path_str(&worker), "bad.json"]);
    assert!(!out.status.success(), "refused: {text}");
    assert!(
        out.stderr.contains("bad.json"),
        "names the file:\n{}",
        out.stderr
    );
    for needle in needles {
        assert!(
            out.stderr.contains(needle),
            "{needle:?} in:\n{}",
            out.stderr
        );
    }
    assert!(
        !Path::new(&ws.sink_path()).exists() || support::read_lossy(&ws.sink_path()).is_empty()
    );
}

#[test]
fn malformed_json_is_refused_with_line_and_column() {
    refused(
        "{\n  \"name\": \"a\",\n  \"topic\": ,\n}",
        &["bad.json:3", "column 12"],
    );
}

#[test]
fn disagreeing_names_are_refused() {
    refused(
        r#"{"name": "a", "config": {"name": "b", "connector.class": "FileStreamSource", "topic": "t"}}"#,
        &["\"a\"", "\"b\"", "must agree"],
    );
}

#[test]
fn a_null_or_nested_value_is_refused_with_its_key() {
    refused(
        r#"{"name": "a", "connector.class": "FileStreamSource", "topic": null}"#,
        &["\"topic\"", "null"],
    );
    refused(
        r#"{"name": "a", "config": {"connector.class": "FileStreamSource", "topic": ["t"]}}"#,
        &["config.\"topic\"", "array"],
    );
}
