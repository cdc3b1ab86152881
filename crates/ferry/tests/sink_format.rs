//! `sink.format=value`: the file sink writes each record's value alone, as Kafka Connect's
//! FileStreamSink does, so FileStreamSource → file copies a file line for line.

mod support;

use support::{Ferry, Workspace, path_str, read_lossy, wait_until};

#[test]
fn sink_format_value_copies_a_file_line_for_line() {
    let ws = Workspace::new();
    let text = "first line\n{\"not\":\"parsed\"}\n  spaces kept  \n";
    let input = ws.write("input.txt", text);
    let worker = ws.worker(100, &[("sink.format", "value")]);
    let connector = ws.properties(
        "source.properties",
        &[
            ("name", "copy"),
            ("connector.class", "FileStreamSource"),
            ("file", &path_str(&input)),
            ("topic", "lines"),
        ],
    );
    let mut ferry = Ferry::standalone(&ws, "run", &worker, &[connector.as_path()]);
    let sink = ws.sink_path();
    wait_until("the three lines in the sink", || {
        (read_lossy(&sink).lines().count() >= 3).then_some(())
    });
    ferry.terminate_cleanly();
    assert_eq!(read_lossy(&sink), text);
}

#[test]
fn an_unknown_sink_format_is_refused_naming_the_key() {
    let ws = Workspace::new();
    let worker = ws.worker(100, &[("sink.format", "csv")]);
    let out = support::run(ws.path(), &["standalone", &path_str(&worker)]);
    assert!(!out.status.success());
    assert!(out.stderr.contains("sink.format"), "{}", out.stderr);
    assert!(out.stderr.contains("json"), "{}", out.stderr);
}
