//! `ferry offsets export` / `import` through the real binary: offsets move between a file store and a
//! Kafka store (a real broker) with every key byte intact, a Kafka Connect offsets-topic dump imports
//! and a FileStreamSource resumes where it says, and an input with one bad entry writes nothing.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod kafka_support;
mod support;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use support::{
    Ferry, Finished, SinkTail, Workspace, parse_line, path_str, run, without_file_identity,
};

/// Runs `ferry offsets ARGS…` in the workspace (whatever its exit status).
fn offsets(ws: &Workspace, args: &[&str]) -> Finished {
    let mut full = vec!["offsets"];
    full.extend_from_slice(args);
    run(ws.path(), &full)
}

/// Exports the store of `worker`; returns the parsed document and its text.
fn export(ws: &Workspace, worker: &Path) -> (Value, String) {
    let out = ws.offsets_ok(&["export", "--worker", &path_str(worker)]);
    let doc: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("export printed no JSON ({e}): {}", out.stdout));
    assert_eq!(doc["format"], "ferry-offsets");
    assert_eq!(doc["version"], 1);
    (doc, out.stdout)
}

/// The `offsets` array of an export document.
fn entries(doc: &Value) -> Vec<Value> {
    doc["offsets"]
        .as_array()
        .unwrap_or_else(|| panic!("no offsets array in {doc}"))
        .clone()
}

/// The raw `key` strings of an export document.
fn keys(doc: &Value) -> Vec<String> {
    entries(doc)
        .iter()
        .map(|e| {
            e["key"]
                .as_str()
                .unwrap_or_else(|| panic!("no key in {e}"))
                .to_owned()
        })
        .collect()
}

/// Imports `file` into the store of `worker`; panics unless it succeeds; returns its stderr.
fn import(ws: &Workspace, worker: &Path, file: &Path) -> String {
    ws.offsets_ok(&["import", "--worker", &path_str(worker), &path_str(file)])
        .stderr
}

/// A worker file using the offsets file `name` (no sink: these tests run no connector).
fn file_worker(ws: &Workspace, name: &str) -> PathBuf {
    let store = path_str(&ws.file(&format!("{name}.ferry")));
    ws.properties(
        &format!("{name}.properties"),
        &[("offset.storage.file.filename", &store)],
    )
}

/// Records as other writers spell them: a field order that is not sorted, a null partition, a Java
/// double, an escape, non-ASCII text, whitespace, two connectors; a tombstone and a superseded line.
const EXOTIC_DUMP: &str = concat!(
    "[\"seq-source\",{\"b\":2,\"a\":1}]\t{\"seq\":4}\n",
    "[\"seq-source\",{\"b\":2,\"a\":1}]\t{\"seq\":5}\n",
    "[\"seq-source\",null]\t{\"seq\":3}\n",
    "[\"seq-source\",{\"partition\":0}]\t{\"seq\":1.0E10}\n",
    "[\"seq-source\",{\"partition\":9}]\tnull\n",
    "[\"file-source\",{\"filename\":\"/tmp/caf\\u00e9.txt\"}]\t{\"position\":42}\n",
    "[\"file-source\",{\"filename\":\"/渡し船/✓\"}]\t{\"position\":7,\"note\":\"x\"}\n",
    "[ \"file-source\" , {\"filename\":\"/spaced\"} ]\t{ \"position\" : 9 }\n",
);

/// The keys of [`EXOTIC_DUMP`] that stay live, verbatim.
const EXOTIC_KEYS: &[&str] = &[
    "[ \"file-source\" , {\"filename\":\"/spaced\"} ]",
    "[\"file-source\",{\"filename\":\"/tmp/caf\\u00e9.txt\"}]",
    "[\"file-source\",{\"filename\":\"/渡し船/✓\"}]",
    "[\"seq-source\",null]",
    "[\"seq-source\",{\"b\":2,\"a\":1}]",
    "[\"seq-source\",{\"partition\":0}]",
];

#[test]
fn offsets_move_file_to_kafka_to_file_with_every_key_byte() {
    let broker = kafka_support::broker();
    let bootstrap = broker.bootstrap_servers();
    let ws = Workspace::new();

    // A file store holding other writers' bytes.
    let source = file_worker(&ws, "source");
    let dump = ws.write("dump.txt", EXOTIC_DUMP);
    let stderr = import(&ws, &source, &dump);
    assert!(
        stderr.contains("6 offsets for 2 connectors, 1 tombstone written"),
        "{stderr}"
    );
    assert!(stderr.contains("1 earlier line was replaced"), "{stderr}");
    let (from_file, text) = export(&ws, &source);
    let mut expected_keys: Vec<String> = EXOTIC_KEYS.iter().map(|k| (*k).to_owned()).collect();
    expected_keys.sort();
    let mut exported_keys = keys(&from_file);
    exported_keys.sort();
    assert_eq!(exported_keys, expected_keys, "raw key bytes, verbatim");
    let spaced = entries(&from_file)
        .into_iter()
        .find(|e| e["key"].as_str().is_some_and(|k| k.contains("spaced")))
        .unwrap_or_else(|| panic!("no /spaced entry in {text}"));
    assert_eq!(spaced["value"], "{ \"position\" : 9 }", "raw value bytes");
    assert_eq!(spaced["offset"], serde_json::json!({"position": 9}));
    let exported = ws.write("from-file.json", &text);

    // Into Kafka, and out again: the same offsets, the same bytes.
    let kafka = ws.properties(
        "kafka.properties",
        &[
            ("bootstrap.servers", &bootstrap),
            ("offset.storage", "kafka"),
            ("offset.storage.topic", "connect-offsets"),
            ("offset.storage.partitions", "5"),
            ("offset.storage.replication.factor", "1"),
        ],
    );
    let stderr = import(&ws, &kafka, &exported);
    assert!(stderr.contains("not atomic across records"), "{stderr}");
    assert!(
        stderr.contains("6 offsets for 2 connectors, 0 tombstones written"),
        "{stderr}"
    );
    let (from_kafka, text) = export(&ws, &kafka);
    assert!(
        from_kafka["source"]
            .as_str()
            .is_some_and(|s| s.contains("kafka topic connect-offsets")),
        "{from_kafka}"
    );
    assert_eq!(entries(&from_kafka), entries(&from_file));
    let doctor = offsets(&ws, &["doctor", "--worker", &path_str(&kafka)]);
    assert_eq!(
        doctor.status.code(),
        Some(0),
        "{}\n{}",
        doctor.stdout,
        doctor.stderr
    );

    // Kafka to a new file store: the same again.
    let back = file_worker(&ws, "back");
    import(&ws, &back, &ws.write("from-kafka.json", &text));
    let (round_trip, _) = export(&ws, &back);
    assert_eq!(entries(&round_trip), entries(&from_file));

    // A field-order variant written to Kafka by a differently built task: the doctor reads the
    // topic raw and names both keys; the store itself reads them as one partition.
    ws.offsets_ok(&[
        "set",
        "--worker",
        &path_str(&kafka),
        "--connector",
        "seq-source",
        "--partition",
        r#"{"a":1,"b":2}"#,
        "--offset",
        r#"{"seq":6}"#,
    ]);
    let listed = ws.list_offsets(&kafka, "seq-source");
    assert_eq!(listed.len(), 3, "{listed:?}");
    let doctor = offsets(&ws, &["doctor", "--worker", &path_str(&kafka)]);
    assert_eq!(
        doctor.status.code(),
        Some(1),
        "{}\n{}",
        doctor.stdout,
        doctor.stderr
    );
    for key in [
        r#"["seq-source",{"b":2,"a":1}]"#,
        r#"["seq-source",{"a":1,"b":2}]"#,
    ] {
        assert!(
            doctor.stdout.contains(key),
            "{key} missing from:\n{}",
            doctor.stdout
        );
    }
}

/// Kafka Connect's offsets topic as kafka-console-consumer prints it (`{FILE}` is the input file):
/// the file's position committed twice (the later wins), another connector's partitions in several
/// field orders, a null partition and tombstones.
const KAFKA_CONNECT_DUMP: &str = "\
[\"local-file-source\",{\"filename\":\"{FILE}\"}]\t{\"position\":55}
[\"seq-source\",{\"partition\":0}]\t{\"seq\":10}
[\"seq-source\",null]\t{\"seq\":3}
[\"seq-source\",{\"b\":2,\"a\":1}]\t{\"seq\":4}
[\"local-file-source\",{\"filename\":\"{FILE}\"}]\t{\"position\":110}
[\"seq-source\",{\"a\":1,\"b\":2}]\t{\"seq\":5}
[\"seq-source\",{\"partition\":1}]\t{\"seq\":7}
[\"seq-source\",{\"partition\":1}]\tnull
[\"local-file-source\",{\"filename\":\"/gone.txt\"}]\tnull
";

#[test]
fn a_kafka_connect_dump_imports_and_the_file_source_resumes_at_the_dumped_position() {
    let ws = Workspace::new();
    let input = ws.write(
        "input.txt",
        (0..20)
            .map(|n| format!("line-{n:05}\n"))
            .collect::<String>(),
    );
    let input_name = path_str(&input);
    let dump = ws.write(
        "connect-offsets.txt",
        KAFKA_CONNECT_DUMP.replace("{FILE}", &input_name),
    );
    let worker = ws.worker(100, &[]);
    let stderr = ws
        .offsets_ok(&[
            "import",
            "--worker",
            &path_str(&worker),
            "--format",
            "kafka-connect-dump",
            &path_str(&dump),
        ])
        .stderr;
    assert!(stderr.contains("Kafka Connect offsets dump"), "{stderr}");
    assert!(
        stderr.contains("4 offsets for 2 connectors, 2 tombstones written"),
        "{stderr}"
    );

    let (doc, _) = export(&ws, &worker);
    let mut got: Vec<(String, String)> = entries(&doc)
        .iter()
        .map(|e| {
            (
                e["key"].as_str().unwrap_or_default().to_owned(),
                e["value"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    got.sort();
    let mut want = vec![
        (
            format!(r#"["local-file-source",{{"filename":"{input_name}"}}]"#),
            r#"{"position":110}"#.to_owned(),
        ),
        (
            r#"["seq-source",{"partition":0}]"#.to_owned(),
            r#"{"seq":10}"#.to_owned(),
        ),
        (
            r#"["seq-source",null]"#.to_owned(),
            r#"{"seq":3}"#.to_owned(),
        ),
        (
            r#"["seq-source",{"a":1,"b":2}]"#.to_owned(),
            r#"{"seq":5}"#.to_owned(),
        ),
    ];
    want.sort();
    assert_eq!(
        got, want,
        "the last line of each partition, with its key bytes"
    );

    // The connector resumes after line 9 (byte 110).
    let connector = ws.properties(
        "source.properties",
        &[
            ("name", "local-file-source"),
            ("connector.class", "FileStreamSource"),
            ("file", &input_name),
            ("topic", "lines"),
        ],
    );
    let mut ferry = Ferry::standalone(&ws, "run", &worker, &[&connector]);
    let mut sink = SinkTail::new(&ws.sink_path());
    sink.wait_for(&mut ferry, 10);
    ferry.terminate_cleanly();
    let records: Vec<Value> = sink.lines.iter().map(|l| parse_line(l)).collect();
    let values: Vec<&str> = records
        .iter()
        .map(|r| r["value"].as_str().unwrap_or_default())
        .collect();
    let expected: Vec<String> = (10..20).map(|n| format!("line-{n:05}")).collect();
    assert_eq!(values, expected, "starts right after the dumped position");
    assert_eq!(
        without_file_identity(&records[0]["source_offset"]),
        serde_json::json!({"position": 121})
    );
    let listed = ws.list_offsets(&worker, "local-file-source");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["offset"]["position"], 220);
}

#[test]
fn an_input_with_one_bad_entry_writes_nothing() {
    let ws = Workspace::new();
    let worker = file_worker(&ws, "store");
    let good = ws.write(
        "good.json",
        r#"{"format":"ferry-offsets","version":1,"offsets":[
{"connector":"c","partition":{"p":1},"offset":{"o":1}},
{"connector":"c","partition":{"p":2},"offset":{"o":2}}
]}"#,
    );
    import(&ws, &worker, &good);
    let (before, _) = export(&ws, &worker);
    assert_eq!(entries(&before).len(), 2);
    let store_bytes = || fs::read(ws.file("store.ferry")).unwrap();
    let bytes_before = store_bytes();

    let bad_document = ws.write(
        "bad.json",
        r#"{"format":"ferry-offsets","version":1,"offsets":[
{"connector":"c","partition":{"p":1},"offset":{"o":100}},
{"connector":"c","partition":{"p":3},"offset":{"o":3}},
{"key":"[\"c\",{\"p\":4}]","value":"{\"o\":[1]}"},
{"connector":"d","partition":null,"offset":null}
]}"#,
    );
    let bad_dump = ws.write(
        "bad-dump.txt",
        "[\"c\",{\"p\":1}]\t{\"o\":100}\n[\"c\",{\"p\":5}]\t{\"o\":oops}\n",
    );
    let future = ws.write(
        "future.json",
        r#"{"format":"ferry-offsets","version":2,"offsets":[]}"#,
    );
    let cases: [(&Path, &[&str]); 3] = [
        (
            &bad_document,
            &[
                "entry 3 (line 4)",
                "\"value\" is not a Kafka Connect offset",
                "nested lists",
            ],
        ),
        (&bad_dump, &["line 2: the value is neither"]),
        (&future, &["version 2", "reads only version 1"]),
    ];
    for (file, expected) in cases {
        let out = offsets(
            &ws,
            &["import", "--worker", &path_str(&worker), &path_str(file)],
        );
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}: {}",
            file.display(),
            out.stderr
        );
        for needle in expected.iter().chain(&["nothing was written"]) {
            assert!(
                out.stderr.contains(needle),
                "{needle:?} missing from:\n{}",
                out.stderr
            );
        }
    }
    // A dry run of a good input writes nothing either.
    let out = ws.offsets_ok(&[
        "import",
        "--dry-run",
        "--worker",
        &path_str(&worker),
        &path_str(&good),
    ]);
    assert!(out.stderr.contains("dry run"), "{}", out.stderr);

    let (after, _) = export(&ws, &worker);
    assert_eq!(entries(&after), entries(&before));
    assert_eq!(
        store_bytes(),
        bytes_before,
        "not one byte written to the store"
    );
}
