//! `offset.storage=postgres` through the real binary and the real PostgreSQL server: offsets move
//! file store → `ferry offsets export` → `ferry offsets import` into a Postgres table → export again
//! (and back into a file) with every key and value byte intact; and a `ferry standalone`
//! FileStreamSource keeping its offsets in Postgres stops and resumes from them.

mod postgres_support;
mod support;

use std::path::{Path, PathBuf};

use postgres_support::{PgTable, psql};
use serde_json::Value;
use support::{Ferry, SinkTail, Workspace, parse_line, path_str, read_sink};

/// Exports the store of `worker`; returns the parsed document and its text.
fn export(ws: &Workspace, worker: &Path) -> (Value, String) {
    let out = ws.offsets_ok(&["export", "--worker", &path_str(worker)]);
    let doc: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("export printed no JSON ({e}): {}", out.stdout));
    assert_eq!(doc["format"], "ferry-offsets");
    (doc, out.stdout)
}

/// The `offsets` array of an export document.
fn entries(doc: &Value) -> Vec<Value> {
    doc["offsets"]
        .as_array()
        .unwrap_or_else(|| panic!("no offsets array in {doc}"))
        .clone()
}

/// Imports `file` into the store of `worker`; panics unless it succeeds; returns its stderr.
fn import(ws: &Workspace, worker: &Path, file: &Path) -> String {
    ws.offsets_ok(&["import", "--worker", &path_str(worker), &path_str(file)])
        .stderr
}

/// A worker file keeping offsets in `table` (plus `extra` entries).
fn postgres_worker(ws: &Workspace, name: &str, table: &PgTable, extra: &[(&str, &str)]) -> PathBuf {
    let storage = table.worker_entries();
    let mut entries: Vec<(&str, &str)> = storage.iter().map(|(k, v)| (*k, v.as_str())).collect();
    entries.extend_from_slice(extra);
    ws.properties(&format!("{name}.properties"), &entries)
}

/// Records as other writers spell them: unsorted field order, a null partition, a Java double, an
/// escape, non-ASCII text, whitespace, two connectors; a tombstone and a superseded line.
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

#[test]
fn offsets_move_file_to_postgres_and_back_with_every_key_byte() {
    let ws = Workspace::new();
    let table = PgTable::new("ferry_transfer");

    // A file store holding other writers' bytes.
    let source = ws.properties(
        "source.properties",
        &[(
            "offset.storage.file.filename",
            &path_str(&ws.file("source.ferry")),
        )],
    );
    let stderr = import(&ws, &source, &ws.write("dump.txt", EXOTIC_DUMP));
    assert!(
        stderr.contains("6 offsets for 2 connectors, 1 tombstone written"),
        "{stderr}"
    );
    let (from_file, text) = export(&ws, &source);
    assert_eq!(entries(&from_file).len(), 6);
    let exported = ws.write("from-file.json", &text);

    // Into Postgres (the table is created), and out again: the same offsets, the same bytes, the
    // same order.
    let pg = postgres_worker(&ws, "pg", &table, &[]);
    let stderr = import(&ws, &pg, &exported);
    assert!(
        stderr.contains("6 offsets for 2 connectors, 0 tombstones written"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("not atomic"),
        "a Postgres import is one transaction: {stderr}"
    );
    let (from_pg, pg_text) = export(&ws, &pg);
    assert_eq!(
        from_pg["source"],
        format!("postgres table {} at 127.0.0.1:5432/test", table.name)
    );
    assert_eq!(entries(&from_pg), entries(&from_file));
    let spaced = entries(&from_pg)
        .into_iter()
        .find(|e| e["key"].as_str().is_some_and(|k| k.contains("spaced")))
        .unwrap_or_else(|| panic!("no /spaced entry in {pg_text}"));
    assert_eq!(
        spaced["key"],
        "[ \"file-source\" , {\"filename\":\"/spaced\"} ]"
    );
    assert_eq!(spaced["value"], "{ \"position\" : 9 }", "raw value bytes");
    assert_eq!(
        psql(&format!(
            "SELECT count(*), count(DISTINCT connector) FROM \"{}\"",
            table.name
        )),
        "6|2",
        "one row per partition"
    );

    // Importing the same document again changes nothing.
    import(&ws, &pg, &exported);
    assert_eq!(entries(&export(&ws, &pg).0), entries(&from_file));
    assert_eq!(
        psql(&format!("SELECT count(*) FROM \"{}\"", table.name)),
        "6"
    );

    // Postgres to a new file store: the same again.
    let back = ws.properties(
        "back.properties",
        &[(
            "offset.storage.file.filename",
            &path_str(&ws.file("back.ferry")),
        )],
    );
    import(&ws, &back, &ws.write("from-pg.json", &pg_text));
    assert_eq!(entries(&export(&ws, &back).0), entries(&from_file));

    // The other field order of a partition is the same row: set replaces it, get finds it either
    // way, and the doctor finds nothing wrong.
    ws.offsets_ok(&[
        "set",
        "--worker",
        &path_str(&pg),
        "--connector",
        "seq-source",
        "--partition",
        r#"{"a":1,"b":2}"#,
        "--offset",
        r#"{"seq":6}"#,
    ]);
    let listed = ws.list_offsets(&pg, "seq-source");
    assert_eq!(listed.len(), 3, "{listed:?}");
    let got = ws.offsets_ok(&[
        "get",
        "--worker",
        &path_str(&pg),
        "--connector",
        "seq-source",
        "--partition",
        r#"{"b":2,"a":1}"#,
    ]);
    assert!(
        got.stdout.contains(r#""offset":{"seq":6}"#),
        "{}",
        got.stdout
    );
    assert_eq!(
        psql(&format!("SELECT count(*) FROM \"{}\"", table.name)),
        "6"
    );
    let doctor = support::run(
        ws.path(),
        &["offsets", "doctor", "--worker", &path_str(&pg)],
    );
    assert_eq!(
        doctor.status.code(),
        Some(0),
        "{}\n{}",
        doctor.stdout,
        doctor.stderr
    );

    // Reset removes the connector's rows and only those.
    ws.offsets_ok(&[
        "reset",
        "--worker",
        &path_str(&pg),
        "--connector",
        "seq-source",
    ]);
    assert!(ws.list_offsets(&pg, "seq-source").is_empty());
    assert_eq!(ws.list_offsets(&pg, "file-source").len(), 3);
    assert_eq!(
        psql(&format!("SELECT count(*) FROM \"{}\"", table.name)),
        "3"
    );
}

#[test]
fn a_file_source_stops_and_resumes_from_the_offsets_in_postgres() {
    let ws = Workspace::new();
    let table = PgTable::new("ferry_resume");
    let text = |n: usize| format!("line-{n:05}\n");
    let input = ws.write("input.txt", (0..100).map(text).collect::<String>());
    let input_name = path_str(&input);
    let sink = format!("file:{}", path_str(&ws.sink_path()));
    let worker = postgres_worker(
        &ws,
        "worker",
        &table,
        &[
            ("listeners", "http://127.0.0.1:0"),
            ("sink", &sink),
            ("offset.flush.interval.ms", "100"),
        ],
    );
    let connector = ws.properties(
        "source.properties",
        &[
            ("name", "local-file-source"),
            ("connector.class", "FileStreamSource"),
            ("file", &input_name),
            ("topic", "lines"),
            ("batch.size", "7"),
        ],
    );

    // Run 1: the 100 lines, then SIGTERM, which commits what was delivered.
    let mut run1 = Ferry::standalone(&ws, "run1", &worker, &[&connector]);
    let mut tail = SinkTail::new(&ws.sink_path());
    tail.wait_for(&mut run1, 100);
    run1.terminate_cleanly();
    let log = run1.log();
    assert!(
        log.contains(&format!(
            "offsets in postgres table {} at 127.0.0.1:5432/test",
            table.name
        )),
        "{log}"
    );
    assert!(
        log.contains("created the offsets table"),
        "the first run creates the table: {log}"
    );
    let committed = 100 * text(0).len();
    // The file identity FileStreamSource adds follows the position.
    let row = psql(&format!(
        "SELECT connector, convert_from(raw_key, 'UTF8'), convert_from(value, 'UTF8') FROM \"{}\"",
        table.name
    ));
    assert!(
        row.starts_with(&format!(
            "local-file-source|[\"local-file-source\",{{\"filename\":\"{input_name}\"}}]|{{\"position\":{committed},\"dev\":"
        )),
        "one row: the committed position: {row}"
    );
    let listed = ws.list_offsets(&worker, "local-file-source");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["offset"]["position"], committed);

    // Stopped: 50 more lines. Run 2 resumes right after line 99.
    ws.append("input.txt", (100..150).map(text).collect::<String>());
    let mut run2 = Ferry::standalone(&ws, "run2", &worker, &[&connector]);
    tail.wait_for(&mut run2, 150);
    run2.terminate_cleanly();
    let log = run2.log();
    assert!(
        !log.contains("created the offsets table"),
        "the second run uses the table: {log}"
    );
    let records: Vec<Value> = read_sink(&ws.sink_path());
    let values: Vec<&str> = records
        .iter()
        .map(|r| r["value"].as_str().unwrap_or_default())
        .collect();
    let expected: Vec<String> = (0..150).map(|n| text(n).trim_end().to_owned()).collect();
    assert_eq!(values, expected, "every line exactly once, in order");
    assert_eq!(
        parse_line(&tail.lines[100])["source_offset"]["position"],
        serde_json::json!(committed + text(100).len()),
        "run 2 starts after the committed position"
    );
    let rows = psql(&format!(
        "SELECT count(*), max(convert_from(value, 'UTF8')) FROM \"{}\"",
        table.name
    ));
    assert!(
        rows.starts_with(&format!("1|{{\"position\":{},", 150 * text(0).len())),
        "still one row, now at the end of the file: {rows}"
    );
}
