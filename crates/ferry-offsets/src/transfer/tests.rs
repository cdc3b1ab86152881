//! Unit tests of the document model, the dump parser and the doctor.

use super::*;
use crate::codec::{decode_key, decode_value};
use crate::store::{StoredOffset, StoredRecord};

fn stored(key: &str, value: &str) -> StoredOffset {
    (key.as_bytes().to_vec(), value.as_bytes().to_vec())
}

/// Keys and values as other writers spell them: field orders, escapes, Java number forms, a null
/// partition, non-ASCII text, two connectors.
fn exotic_entries() -> Vec<StoredOffset> {
    vec![
        stored(r#"["seq",{"b":2,"a":1}]"#, r#"{"seq":5}"#),
        stored(r#"["seq",null]"#, r#"{"seq":3}"#),
        stored(
            r#"["file",{"filename":"/tmp/caf\u00e9 \"q\".txt"}]"#,
            r#"{"position":1.0E10}"#,
        ),
        stored(
            r#"["file",{"filename":"/渡し船/✓"}]"#,
            r#"{"position":-9223372036854775808,"x":true,"y":null,"z":"s"}"#,
        ),
        stored(r#"[ "seq" , { "partition" : 7 } ]"#, r#"{ "seq" : 1.50 }"#),
    ]
}

fn parse_ok(text: &str) -> ImportPlan {
    parse_import(text.as_bytes(), None).unwrap_or_else(|e| panic!("{e}\n--- input:\n{text}"))
}

fn problems(text: &str, format: Option<InputFormat>) -> Vec<Problem> {
    match parse_import(text.as_bytes(), format) {
        Err(ImportError::Invalid(problems)) => problems,
        other => panic!("expected invalid entries, got {other:?}\n--- input:\n{text}"),
    }
}

fn doc(entries: &[&str]) -> String {
    format!(
        "{{\"format\":\"ferry-offsets\",\"version\":1,\"offsets\":[\n{}\n]}}",
        entries.join(",\n")
    )
}

// ---- the export document ----

#[test]
fn export_then_import_reproduces_every_key_and_value_byte_for_byte() {
    let entries = exotic_entries();
    let export = export_document("memory", "2025-01-02T03:04:05Z", entries.clone());
    assert_eq!(export.offsets, entries.len());
    assert_eq!(export.connectors, 2);
    assert!(export.skipped.is_empty());
    let plan = parse_ok(&export.text);
    assert_eq!(plan.format, InputFormat::Ferry);
    let mut got: Vec<StoredOffset> = plan
        .writes()
        .into_iter()
        .map(|w| {
            (
                w.key,
                w.value.unwrap_or_else(|| panic!("no tombstones exported")),
            )
        })
        .collect();
    let mut want = entries;
    got.sort();
    want.sort();
    assert_eq!(got, want, "exact key and value bytes");
    for record in plan.records() {
        let key = decode_key(&record.key).unwrap();
        assert_eq!(record.connector, key.connector);
        let value = record.value.as_deref().unwrap_or_default();
        decode_value(value).unwrap();
    }
    // Exporting the imported records gives the same document.
    let again = export_document("memory", "2025-01-02T03:04:05Z", got);
    assert_eq!(again.text, export.text);
}

#[test]
fn export_is_sorted_readable_and_one_entry_per_line() {
    let export = export_document(
        "file /x",
        "2025-01-02T03:04:05Z",
        vec![
            stored(r#"["b",{"p":1}]"#, r#"{"o":1}"#),
            stored(r#"["a",{"p":2}]"#, r#"{"o":2}"#),
        ],
    );
    let expected = concat!(
        "{\n",
        "  \"format\": \"ferry-offsets\",\n",
        "  \"version\": 1,\n",
        "  \"source\": \"file /x\",\n",
        "  \"exported_at\": \"2025-01-02T03:04:05Z\",\n",
        "  \"offsets\": [\n",
        r#"    {"connector":"a","partition":{"p":2},"offset":{"o":2},"key":"[\"a\",{\"p\":2}]","value":"{\"o\":2}"},"#,
        "\n",
        r#"    {"connector":"b","partition":{"p":1},"offset":{"o":1},"key":"[\"b\",{\"p\":1}]","value":"{\"o\":1}"}"#,
        "\n  ]\n}\n"
    );
    assert_eq!(export.text, expected);
    let empty = export_document("memory", "t", Vec::new());
    assert!(empty.text.contains("\"offsets\": []"), "{}", empty.text);
    let plan = parse_ok(&empty.text);
    assert!(plan.is_empty());
}

#[test]
fn export_skips_undecodable_records_and_says_why() {
    let export = export_document(
        "memory",
        "t",
        vec![
            stored("garbage", r#"{"o":1}"#),
            stored(r#"["c",{"p":1}]"#, "not json"),
            stored(r#"["c",{"p":2}]"#, r#"{"o":2}"#),
        ],
    );
    assert_eq!(export.offsets, 1);
    assert_eq!(export.skipped.len(), 2);
    // In export order: by connector and key, keys that do not decode last.
    assert_eq!(export.skipped[1].key, "garbage");
    assert!(
        export.skipped[0].reason.contains("offset value"),
        "{:?}",
        export.skipped
    );
    assert_eq!(parse_ok(&export.text).len(), 1);
}

#[test]
fn entries_may_leave_out_key_and_value_and_null_offset_is_a_tombstone() {
    let plan = parse_ok(&doc(&[
        r#"{"connector":"c","partition":{"b":1,"a":"x"},"offset":{"position":10}}"#,
        r#"{"connector":"c","partition":null,"offset":null}"#,
        r#"{"key":"[\"d\",{\"p\":1}]","value":null}"#,
        r#"{"key":"[\"d\",{\"p\":2}]","offset":{"q":1.5}}"#,
    ]));
    let writes = plan.writes();
    assert_eq!(
        writes[0].key,
        br#"["c",{"b":1,"a":"x"}]"#.to_vec(),
        "field order kept"
    );
    assert_eq!(writes[0].value.as_deref(), Some(&br#"{"position":10}"#[..]));
    assert_eq!(writes[1].key, br#"["c",null]"#.to_vec());
    assert_eq!(writes[1].value, None);
    assert_eq!(writes[2].value, None);
    assert_eq!(writes[3].value.as_deref(), Some(&br#"{"q":1.5}"#[..]));
    assert_eq!(
        plan.summary(),
        ImportSummary {
            offsets: 2,
            tombstones: 2,
            connectors: 2
        }
    );
    assert_eq!(
        plan.summary().to_string(),
        "2 offsets for 2 connectors, 2 tombstones"
    );
}

#[test]
fn unknown_versions_are_refused_before_anything_else() {
    for version in ["2", "0", "\"1\"", "1.0"] {
        let text = format!(
            r#"{{"format":"ferry-offsets","version":{version},"new_field":1,"offsets":[{{"whatever":1}}]}}"#
        );
        match parse_import(text.as_bytes(), None) {
            Err(ImportError::UnsupportedVersion { found }) => {
                assert_eq!(found, version);
                let message = ImportError::UnsupportedVersion { found }.to_string();
                assert!(message.contains("reads only version 1"), "{message}");
            }
            other => panic!("version {version}: {other:?}"),
        }
    }
}

#[test]
fn documents_that_are_not_ferry_documents_are_refused() {
    let unreadable = |text: &str| match parse_import(text.as_bytes(), None) {
        Err(ImportError::Unreadable(message)) => message,
        other => panic!("{text}: {other:?}"),
    };
    assert!(unreadable("").contains("empty"));
    assert!(unreadable("  \n ").contains("empty"));
    assert!(unreadable(r#"{"offsets":[]}"#).contains("\"format\" is missing"));
    assert!(unreadable(r#"{"format":"other","version":1,"offsets":[]}"#).contains("\"other\""));
    assert!(unreadable(r#"{"format":"ferry-offsets","offsets":[]}"#).contains("no \"version\""));
    assert!(unreadable(r#"{"format":"ferry-offsets","version":1}"#).contains("no \"offsets\""));
    assert!(
        unreadable(r#"{"format":"ferry-offsets","version":1,"offsets":[],"extra":0}"#)
            .contains("\"extra\"")
    );
    assert!(
        unreadable(r#"{"format":"ferry-offsets","version":1,"source":5,"offsets":[]}"#)
            .contains("\"source\"")
    );
    let not_json = unreadable("{\"format\":\"ferry-offsets\",\n\"version\":1,\n\"offsets\":[}");
    assert!(
        not_json.contains("not valid JSON") && not_json.contains("line 3"),
        "{not_json}"
    );
    match parse_import(&[b'{', 0xff, b'}'], None) {
        Err(ImportError::Unreadable(m)) => assert!(m.contains("not UTF-8"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_invalid_entry_is_named_with_its_line_and_problem() {
    let cases: &[(&str, &str)] = &[
        (
            r#"{"key":"[\"c\",{\"p\":1}"}"#,
            "\"key\" is not a Kafka Connect offset key",
        ),
        (
            r#"{"key":"[\"c\",{\"p\":{\"n\":1}}]","offset":{"o":1}}"#,
            "nested objects",
        ),
        (
            r#"{"connector":"x","key":"[\"c\",{\"p\":1}]","offset":{"o":1}}"#,
            "\"connector\" is \"x\" but \"key\" names connector \"c\"",
        ),
        (
            r#"{"partition":{"p":2},"key":"[\"c\",{\"p\":1}]","offset":{"o":1}}"#,
            "\"partition\" is {\"p\":2} but \"key\" holds partition {\"p\":1}",
        ),
        (
            r#"{"connector":"c","partition":[1],"offset":{"o":1}}"#,
            "\"partition\" must be an object",
        ),
        (
            r#"{"connector":"c","partition":{"p":1},"offset":7}"#,
            "\"offset\" must be an object",
        ),
        (
            r#"{"key":"[\"c\",{\"p\":1}]","value":"[1]"}"#,
            "\"value\" is not a Kafka Connect offset",
        ),
        (
            r#"{"key":"[\"c\",{\"p\":1}]","value":"{\"o\":1}","offset":{"o":2}}"#,
            "\"offset\" is {\"o\":2} but \"value\" holds {\"o\":1}",
        ),
        (
            r#"{"key":"[\"c\",{\"p\":1}]","value":"{\"o\":1}","offset":null}"#,
            "\"offset\" is null but \"value\" holds {\"o\":1}",
        ),
        (
            r#"{"partition":{"p":1},"offset":{"o":1}}"#,
            "no \"key\" and no \"connector\"",
        ),
        (
            r#"{"connector":"c","offset":{"o":1}}"#,
            "no \"key\" and no \"partition\"",
        ),
        (
            r#"{"connector":"c","partition":{"p":1}}"#,
            "no \"offset\" (or \"value\")",
        ),
        (
            r#"{"connector":"c","partition":{"p":1},"offset":{"o":1},"ofset":1}"#,
            "unknown field `ofset`",
        ),
        (
            r#"{"connector":"c","connector":"d","partition":null,"offset":null}"#,
            "duplicate field",
        ),
        (r#"["c",{"p":1}]"#, "not a valid offset entry"),
        (
            r#"{"connector":"c","partition":{"p":99999999999999999999},"offset":{"o":1}}"#,
            "does not fit 64 bits",
        ),
    ];
    let good = r#"{"connector":"ok","partition":{"p":1},"offset":{"o":1}}"#;
    for (entry, expected) in cases {
        let text = doc(&[good, entry]);
        let found = problems(&text, None);
        assert_eq!(found.len(), 1, "{entry}: {found:?}");
        assert_eq!(
            found[0].origin,
            Some(Origin::Entry { index: 2, line: 3 }),
            "{entry}"
        );
        assert!(
            found[0].to_string().starts_with("entry 2 (line 3): ")
                && found[0].message.contains(expected),
            "{entry}: expected {expected:?} in {:?}",
            found[0].to_string()
        );
    }
    // All problems at once, each with its own entry.
    let text = doc(&[cases[0].0, good, cases[5].0, cases[11].0]);
    let found = problems(&text, None);
    let origins: Vec<String> = found
        .iter()
        .filter_map(|p| p.origin.map(|o| o.to_string()))
        .collect();
    assert_eq!(
        origins,
        ["entry 1 (line 2)", "entry 3 (line 4)", "entry 4 (line 5)"]
    );
    let message = ImportError::Invalid(found).to_string();
    assert!(message.starts_with("3 invalid entries:"), "{message}");
}

#[test]
fn one_partition_twice_in_a_document_is_refused_even_in_another_field_order() {
    let found = problems(
        &doc(&[
            r#"{"key":"[\"c\",{\"a\":1,\"b\":2}]","offset":{"o":1}}"#,
            r#"{"connector":"c","partition":{"b":2,"a":1},"offset":{"o":2}}"#,
        ]),
        None,
    );
    assert_eq!(found.len(), 1);
    assert!(
        found[0].to_string().contains(
            "entry 2 (line 3): the same partition of connector \"c\" as entry 1 (line 2)"
        ),
        "{}",
        found[0]
    );
}

#[test]
fn many_problems_are_shortened_in_the_message() {
    let bad = r#"{"connector":"c"}"#;
    let entries: Vec<&str> = std::iter::repeat_n(bad, 25).collect();
    let found = problems(&doc(&entries), None);
    assert_eq!(found.len(), 25);
    let message = ImportError::Invalid(found).to_string();
    assert!(message.contains("… and 5 more"), "{message}");
}

// ---- the Kafka Connect dump ----

const DUMP: &str = "# kafka-console-consumer --topic connect-offsets --from-beginning --property print.key=true\n\
[\"local-file-source\",{\"filename\":\"/data/in.txt\"}]\t{\"position\":55}\n\
[\"seq-source\",{\"partition\":0}]\t{\"seq\":10}\r\n\
\n\
[\"seq-source\",null]\t{\"seq\":3}\n\
[\"local-file-source\",{\"filename\":\"/data/in.txt\"}]\t{\"position\":110}\n\
[\"seq-source\",{\"b\":2,\"a\":1}]\t{\"seq\":4}\n\
[\"seq-source\",{\"a\":1,\"b\":2}]\t{\"seq\":5}\n\
[\"seq-source\",{\"partition\":1}]\t{\"seq\":7}\n\
[\"seq-source\",{\"partition\":1}]\tnull\n\
[\"local-file-source\",{\"filename\":\"/data/gone.txt\"}]\tnull\n";

#[test]
fn a_kafka_connect_dump_is_read_with_later_lines_winning() {
    assert_eq!(detect_format(DUMP), InputFormat::KafkaConnectDump);
    let plan = parse_ok(DUMP);
    assert_eq!(plan.format, InputFormat::KafkaConnectDump);
    assert_eq!(plan.superseded, 3);
    let writes: Vec<(String, Option<String>)> = plan
        .writes()
        .into_iter()
        .map(|w| {
            (
                String::from_utf8_lossy(&w.key).into_owned(),
                w.value.map(|v| String::from_utf8_lossy(&v).into_owned()),
            )
        })
        .collect();
    let some = |s: &str| Some(s.to_owned());
    assert_eq!(
        writes,
        vec![
            (
                r#"["local-file-source",{"filename":"/data/in.txt"}]"#.to_owned(),
                some(r#"{"position":110}"#)
            ),
            (
                r#"["seq-source",{"partition":0}]"#.to_owned(),
                some(r#"{"seq":10}"#)
            ),
            (r#"["seq-source",null]"#.to_owned(), some(r#"{"seq":3}"#)),
            (
                r#"["seq-source",{"a":1,"b":2}]"#.to_owned(),
                some(r#"{"seq":5}"#)
            ),
            (r#"["seq-source",{"partition":1}]"#.to_owned(), None),
            (
                r#"["local-file-source",{"filename":"/data/gone.txt"}]"#.to_owned(),
                None
            ),
        ]
    );
    assert_eq!(plan.record(1).origin, Origin::Line(3));
    assert_eq!(
        plan.record(3).origin,
        Origin::Line(8),
        "the last line of the partition"
    );
    assert_eq!(
        plan.summary().to_string(),
        "4 offsets for 2 connectors, 2 tombstones"
    );
}

#[test]
fn dump_lines_keep_their_exact_bytes() {
    let plan = parse_ok("[ \"c\", {\"p\":1.0E3,\"s\":\"\\u00e9\"} ]\t{ \"o\" : 10 }\n");
    assert_eq!(
        plan.record(0).key,
        "[ \"c\", {\"p\":1.0E3,\"s\":\"\\u00e9\"} ]".as_bytes()
    );
    assert_eq!(
        plan.record(0).value.as_deref(),
        Some("{ \"o\" : 10 }".as_bytes())
    );
}

#[test]
fn invalid_dump_lines_are_named_and_nothing_is_planned() {
    let text = "[\"c\",{\"p\":1}]\t{\"o\":1}\n\
                [\"c\",{\"p\":2}] {\"o\":1}\n\
                [\"c\",{\"p\":3}\t{\"o\":1}\n\
                [\"c\",{\"p\":4}]\t\"text\"\n\
                [\"c\",{\"p\":5}]\t\n\
                [\"c\",{\"p\":6}]\tNULL\n";
    let found = problems(text, None);
    let rendered: Vec<String> = found.iter().map(ToString::to_string).collect();
    assert_eq!(rendered.len(), 5, "{rendered:#?}");
    assert!(rendered[0].starts_with("line 2: no TAB"), "{}", rendered[0]);
    assert!(
        rendered[1].starts_with("line 3: the key is not"),
        "{}",
        rendered[1]
    );
    assert!(
        rendered[2].starts_with("line 4: the value is neither"),
        "{}",
        rendered[2]
    );
    assert!(
        rendered[3].starts_with("line 5: the value is neither"),
        "{}",
        rendered[3]
    );
    assert!(
        rendered[4].starts_with("line 6: the value is neither"),
        "{}",
        rendered[4]
    );
}

#[test]
fn the_format_is_detected_and_can_be_forced() {
    assert_eq!(
        detect_format("\u{feff}  {\"format\":1}"),
        InputFormat::Ferry
    );
    assert_eq!(
        detect_format("[\"c\",null]\t{}"),
        InputFormat::KafkaConnectDump
    );
    assert_eq!(
        detect_format("# comment\n[\"c\",null]\tnull"),
        InputFormat::KafkaConnectDump
    );
    // A dump forced as a document, and a document forced as a dump.
    assert!(matches!(
        parse_import(DUMP.as_bytes(), Some(InputFormat::Ferry)),
        Err(ImportError::Unreadable(_))
    ));
    let found = problems(&doc(&[]), Some(InputFormat::KafkaConnectDump));
    assert!(found[0].message.contains("no TAB"));
}

// ---- the doctor ----

fn record(key: &str, value: Option<&str>) -> StoredRecord {
    (
        key.as_bytes().to_vec(),
        value.map(|v| v.as_bytes().to_vec()),
    )
}

#[test]
fn doctor_passes_a_clean_store_and_counts_tombstones() {
    let history = vec![
        record(r#"["c",{"p":1}]"#, Some(r#"{"o":1}"#)),
        record(r#"["c",{"p":1}]"#, Some(r#"{"o":2}"#)),
        record(r#"["c",{"p":2}]"#, Some(r#"{"o":1}"#)),
        record(r#"["c",{"p":2}]"#, None),
        record(r#"["d",null]"#, Some(r#"{"o":1}"#)),
    ];
    let live = vec![
        stored(r#"["c",{"p":1}]"#, r#"{"o":2}"#),
        stored(r#"["d",null]"#, r#"{"o":1}"#),
    ];
    let report = diagnose(&history, &live);
    assert_eq!(report.findings(), 0, "{report}");
    assert_eq!((report.records, report.tombstones, report.live), (5, 1, 2));
    let c = &report.connectors[0];
    assert_eq!(
        (c.connector.as_str(), c.records, c.tombstones, c.live),
        ("c", 4, 1, 1)
    );
    let text = report.to_string();
    assert!(
        text.contains("connector \"c\": 1 live partition, 4 records, 1 tombstone — OK"),
        "{text}"
    );
    assert!(text.contains("RESULT: no mismatch found"), "{text}");
}

#[test]
fn doctor_finds_key_variants_near_duplicates_and_undecodable_records() {
    let history = vec![
        record(r#"["c",{"a":1,"b":2}]"#, Some(r#"{"o":1}"#)),
        record(r#"["c",{"b":2,"a":1}]"#, Some(r#"{"o":2}"#)),
        record(r#"["c",{"partition":1}]"#, Some(r#"{"o":5}"#)),
        record(r#"["c",{"partition":"1"}]"#, Some(r#"{"o":9}"#)),
        record(r#"["c",{"Filename":"/x"}]"#, Some(r#"{"o":1}"#)),
        record(r#"["c",{"filename":"/x"}]"#, Some(r#"{"o":1}"#)),
        record(r#"["c",{"n":1.0}]"#, Some(r#"{"o":1}"#)),
        record(r#"["c",{"n":1.00}]"#, None),
        record(r#"["d",{"p":1}]"#, Some("not json")),
        record("junk", Some(r#"{"o":1}"#)),
    ];
    let live = vec![
        stored(r#"["c",{"b":2,"a":1}]"#, r#"{"o":2}"#),
        stored(r#"["c",{"partition":1}]"#, r#"{"o":5}"#),
        stored(r#"["c",{"partition":"1"}]"#, r#"{"o":9}"#),
        stored(r#"["c",{"Filename":"/x"}]"#, r#"{"o":1}"#),
        stored(r#"["c",{"filename":"/x"}]"#, r#"{"o":1}"#),
        stored(r#"["d",{"p":1}]"#, "not json"),
        stored("junk", r#"{"o":1}"#),
    ];
    let report = diagnose(&history, &live);
    let c = &report.connectors[0];
    assert_eq!(c.key_variants.len(), 2, "{report}");
    let ab = &c.key_variants[0];
    assert_eq!(ab.partition, r#"{"a":1,"b":2}"#);
    assert!(ab.live);
    assert_eq!(
        ab.variants
            .iter()
            .map(|v| (v.key.as_str(), v.last))
            .collect::<Vec<_>>(),
        [
            (r#"["c",{"a":1,"b":2}]"#, false),
            (r#"["c",{"b":2,"a":1}]"#, true)
        ]
    );
    let spelled = &c.key_variants[1];
    assert!(!spelled.live, "its last write is a tombstone");
    assert_eq!(spelled.variants[1].tombstones, 1);
    assert_eq!(c.near_duplicates.len(), 2, "{report}");
    let members = |i: usize| -> Vec<&str> {
        c.near_duplicates[i]
            .members
            .iter()
            .map(|m| m.partition.as_str())
            .collect()
    };
    assert_eq!(members(0), [r#"{"Filename":"/x"}"#, r#"{"filename":"/x"}"#]);
    assert_eq!(members(1), [r#"{"partition":"1"}"#, r#"{"partition":1}"#]);
    assert_eq!(report.connectors[1].undecodable_values.len(), 1);
    assert_eq!(report.undecodable_keys.len(), 1);
    assert_eq!(report.findings(), 2 + 2 + 1 + 1);
    let text = report.to_string();
    for needle in [
        r#"["c",{"a":1,"b":2}]"#,
        r#"["c",{"b":2,"a":1}]  1 record  <- last write"#,
        r#"{"partition":1}  offset {"o":5}"#,
        r#"{"partition":"1"}  offset {"o":9}"#,
        "UNDECODABLE VALUE of [\"d\",{\"p\":1}]: not json",
        "UNDECODABLE KEYS",
        "RESULT: 6 likely mismatches found",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
}

// ---- the streamed export ----

/// Streams `store` (all, or one connector) through [`ExportWriter`], as `ferry offsets export` does.
async fn streamed(
    store: &dyn crate::OffsetBackingStore,
    connector: Option<&str>,
) -> (String, ExportReport) {
    let mut writer = ExportWriter::new(Vec::new(), "memory", "2025-01-02T03:04:05Z");
    store
        .visit_sorted(connector, &mut |key, value| writer.entry(key, value))
        .await
        .unwrap();
    let (text, report) = writer.finish().unwrap();
    (String::from_utf8(text).unwrap(), report)
}

#[tokio::test]
async fn a_streamed_export_equals_the_whole_document_export_for_every_store() {
    let mut entries = exotic_entries();
    // Undecodable records (skipped, in store order) and an overwrite with other key bytes.
    entries.push(stored("not a key", r#"{"p":1}"#));
    entries.push(stored(r#"["seq",{"p":1}]"#, "not an offset"));
    entries.push(stored("[1,2]", r#"{"p":2}"#));
    entries.push(stored(r#"["seq",{"a":1,"b":2}]"#, r#"{"seq":6}"#));
    let batch: Vec<crate::OffsetWrite> = entries
        .iter()
        .map(|(key, value)| crate::OffsetWrite {
            key: key.clone(),
            value: Some(value.clone()),
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let file = crate::FileStore::open(dir.path().join("offsets")).unwrap();
    let memory = crate::MemoryStore::new();
    for store in [&file as &dyn crate::OffsetBackingStore, &memory] {
        store.set(&batch).await.unwrap();
        for connector in [None, Some("seq"), Some("file"), Some("absent")] {
            let live = match connector {
                Some(c) => store.connector_offsets(c).await.unwrap(),
                None => store.entries().await.unwrap(),
            };
            let whole = export_document("memory", "2025-01-02T03:04:05Z", live);
            let (text, report) = streamed(store, connector).await;
            assert_eq!(text, whole.text, "{} {connector:?}", store.describe());
            assert_eq!(report.offsets, whole.offsets);
            assert_eq!(report.connectors, whole.connectors);
            assert_eq!(report.skipped, whole.skipped);
        }
    }
}

#[test]
fn a_streamed_export_reports_a_write_error() {
    struct Broken;
    impl std::io::Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk full"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut writer = ExportWriter::new(Broken, "memory", "t");
    writer.entry(br#"["seq",{"p":1}]"#, br#"{"seq":1}"#);
    let err = writer.finish().err().map(|e| e.to_string());
    assert_eq!(err.as_deref(), Some("disk full"));
}

// ---- the compact import plan ----

#[test]
fn a_large_dump_keeps_one_record_per_partition_across_index_growth() {
    // Enough partitions for the plan's index to grow (and rehash) many times; every partition is
    // written again later with its fields in the other order, and once more as a tombstone for
    // every tenth one.
    const N: usize = 5000;
    let mut text = String::new();
    for i in 0..N {
        text.push_str(&format!("[\"c\",{{\"a\":{i},\"b\":\"x\"}}]\t{{\"o\":1}}\n"));
    }
    for i in 0..N {
        text.push_str(&format!("[\"c\",{{\"b\":\"x\",\"a\":{i}}}]\t{{\"o\":2}}\n"));
    }
    for i in (0..N).step_by(10) {
        text.push_str(&format!("[\"c\",{{\"a\":{i},\"b\":\"x\"}}]\tnull\n"));
    }
    let plan = parse_ok(&text);
    assert_eq!(plan.len(), N);
    assert_eq!(plan.superseded, N + N / 10);
    for (i, record) in plan.records().enumerate() {
        if i % 10 == 0 {
            assert_eq!(record.value, None, "partition {i}");
            assert_eq!(record.origin, Origin::Line(2 * N + i / 10 + 1));
        } else {
            assert_eq!(
                record.value.as_deref(),
                Some(&b"{\"o\":2}"[..]),
                "partition {i}"
            );
            assert_eq!(
                record.key,
                format!("[\"c\",{{\"b\":\"x\",\"a\":{i}}}]").into_bytes()
            );
        }
    }
    let summary = plan.summary();
    assert_eq!((summary.offsets, summary.tombstones), (N - N / 10, N / 10));
}

#[test]
fn a_document_with_a_duplicate_partition_far_apart_is_refused() {
    let mut entries: Vec<String> = (0..2000)
        .map(|i| format!(r#"{{"key":"[\"c\",{{\"p\":{i}}}]","value":"{{\"o\":1}}"}}"#))
        .collect();
    entries.push(r#"{"connector":"c","partition":{"p":7},"offset":{"o":2}}"#.to_owned());
    let err = parse_import(
        doc(&entries.iter().map(String::as_str).collect::<Vec<_>>()).as_bytes(),
        None,
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(err.contains("entry 2001"), "{err}");
    assert!(err.contains("as entry 8 "), "{err}");
}

/// A dump's plan keeps its keys and values where they are in the input: after a byte-order mark,
/// with CRLF line ends, tombstones and superseded lines, every write is the exact bytes of its line.
#[test]
fn a_dump_parsed_in_place_writes_the_exact_bytes_of_each_line() {
    let text = "\u{feff}[\"c\",{\"p\":1}]\t{\"o\":1}\r\n# comment\r\n[\"c\",{\"p\":2}]\tnull\r\n\
                [\"d\",{\"p\":1}]\t{\"o\":3}\n[\"c\",{\"p\":1}]\t{\"o\":4}";
    let plan = parse_import_owned(text.as_bytes().to_vec(), None).unwrap();
    assert_eq!(plan.superseded, 1);
    let writes: Vec<(String, Option<String>)> = plan
        .writes()
        .into_iter()
        .map(|w| {
            (
                String::from_utf8(w.key).unwrap(),
                w.value.map(|v| String::from_utf8(v).unwrap()),
            )
        })
        .collect();
    let owned = |k: &str, v: Option<&str>| (k.to_owned(), v.map(str::to_owned));
    assert_eq!(
        writes,
        vec![
            owned("[\"c\",{\"p\":1}]", Some("{\"o\":4}")),
            owned("[\"c\",{\"p\":2}]", None),
            owned("[\"d\",{\"p\":1}]", Some("{\"o\":3}")),
        ]
    );
    assert_eq!(plan.origins(), &Origins::Lines(vec![5, 3, 4]));
    assert_eq!(plan.record(0).origin, Origin::Line(5));
    let summary = plan.summary();
    assert_eq!(
        (summary.offsets, summary.tombstones, summary.connectors),
        (2, 1, 2)
    );
    assert_eq!(plan.record(2).connector, "d");
    assert_eq!(
        parse_import(text.as_bytes(), None).unwrap(),
        plan,
        "the borrowing parse gives the same plan"
    );
}

/// A document's entries keep both their index and their line.
#[test]
fn a_document_plan_keeps_entry_origins() {
    let plan = parse_ok(&doc(&[
        r#"{"key":"[\"c\",{\"p\":1}]","value":"{\"o\":1}"}"#,
        r#"{"key":"[\"c\",{\"p\":2}]","value":null}"#,
    ]));
    assert!(matches!(plan.origins(), Origins::Any(o) if o.len() == 2));
    assert!(matches!(
        plan.record(1).origin,
        Origin::Entry { index: 2, .. }
    ));
    assert_eq!(plan.record(1).value, None);
}
