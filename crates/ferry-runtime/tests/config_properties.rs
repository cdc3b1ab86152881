//! Properties syntax against Java: every input of `fixtures/properties/java-table.jsonl` — hand-picked
//! corners and random ones — reads as `java.util.Properties.load` (JDK 17) read it when the table was
//! made (`fixtures/properties/JavaParse.java`; Java is not needed to run this test). Property tests
//! add that any text parses without panicking and that any keys and values, written as Java's
//! `Properties.store` escapes them, read back unchanged.

use std::collections::BTreeMap;

use ferry_runtime::config::Properties;
use proptest::prelude::*;
use serde_json::Value;

const TABLE: &str = include_str!("fixtures/properties/java-table.jsonl");

fn parsed(input: &str) -> Result<BTreeMap<String, String>, String> {
    Properties::parse("table", input.as_bytes())
        .map(|p| {
            p.iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
        .map_err(|e| e.to_string())
}

#[test]
fn every_input_of_the_table_reads_as_java_reads_it() {
    let mut checked = 0;
    let mut refused = 0;
    for (number, line) in TABLE.lines().enumerate() {
        let case: Value = serde_json::from_str(line).expect("a JSON line");
        let input = case["input"].as_str().expect("an input");
        let got = parsed(input);
        match case.get("entries") {
            Some(entries) => {
                let expected: BTreeMap<String, String> = entries
                    .as_array()
                    .expect("entries")
                    .iter()
                    .map(|pair| {
                        (
                            pair[0].as_str().expect("key").to_owned(),
                            pair[1].as_str().expect("value").to_owned(),
                        )
                    })
                    .collect();
                assert_eq!(
                    got.as_ref(),
                    Ok(&expected),
                    "line {} of the table, input {input:?}",
                    number + 1
                );
            }
            None => {
                assert!(
                    got.as_ref().is_err_and(|e| e.contains("\\uxxxx")),
                    "line {}: Java refused {input:?} ({}), Ferry read {got:?}",
                    number + 1,
                    case["error"]
                );
                refused += 1;
            }
        }
        checked += 1;
    }
    assert!(
        checked > 1000 && refused > 0 && refused < checked / 2,
        "{checked} {refused}"
    );
}

#[test]
fn a_continuation_at_the_end_of_the_file_keeps_its_key_with_line_numbers() {
    let props = Properties::parse("f", b"a=1\r\n\r\n# c\nlast=value\\").expect("parses");
    assert_eq!(props.get("a"), Some("1"));
    assert_eq!(props.get("last"), Some("value"));
    assert_eq!(props.line_of("last"), Some(4));
}

/// Java's `Properties.saveConvert`: how `store` writes a key (`key`: spaces escaped everywhere) or a
/// value (only a leading space), with `\uXXXX` for anything outside printable ASCII.
fn java_escape(text: &str, key: bool) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        match c {
            ' ' if i == 0 || key => out.push_str("\\ "),
            ' ' => out.push(' '),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\x0c' => out.push_str("\\f"),
            '=' | ':' | '#' | '!' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if (' '..='~').contains(&c) => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04X}"));
                }
            }
        }
    }
    out
}

proptest! {
    #[test]
    fn any_text_parses_without_panicking(text in "[ab=: \\t\\x0c\\\\\\n\\r#!u0-9é]{0,60}") {
        let _ = Properties::parse("any", text.as_bytes());
    }

    #[test]
    fn what_java_stores_reads_back_unchanged(
        entries in proptest::collection::btree_map(any::<String>(), any::<String>(), 0..8),
        crlf in any::<bool>(),
    ) {
        let newline = if crlf { "\r\n" } else { "\n" };
        let mut text = format!("#comment{newline}");
        for (key, value) in &entries {
            text.push_str(&format!("{}={}{newline}", java_escape(key, true), java_escape(value, false)));
        }
        let props = Properties::parse("stored", text.as_bytes()).expect("parses");
        let read: BTreeMap<String, String> =
            props.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
        prop_assert_eq!(read, entries);
    }
}
