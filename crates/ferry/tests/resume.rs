//! FileStreamSource → file sink with the file offset store, through real `ferry standalone` processes:
//! a SIGTERM commits everything delivered, a restart resumes at the committed byte position (every
//! line exactly once, in order, byte-exact offsets with multi-byte UTF-8), and lines appended while
//! the worker runs are tailed.

mod support;

use serde_json::Value;
use support::{
    Ferry, SinkTail, Workspace, parse_line, path_str, read_sink, without_file_identities,
    without_file_identity,
};

/// One input line: its text and the terminator written after it.
struct Line {
    text: String,
    terminator: &'static str,
}

/// The `i`-th test line: mostly ASCII, with multi-byte UTF-8, JSON-escaped characters, empty lines
/// and a CRLF terminator mixed in.
fn line(i: usize) -> Line {
    let text = match i % 10 {
        _ if i == 17 || i == 150 => String::new(),
        1 => format!("línea {i}: ünïcödé ✓ — 渡し船"),
        4 => format!("{i} 🚢⛴️ emoji (4-byte UTF-8)"),
        6 => format!("{i} \"quoted\" back\\slash\ttab {{json}}"),
        _ => format!("line {i}"),
    };
    let terminator = if i % 50 == 42 { "\r\n" } else { "\n" };
    Line { text, terminator }
}

fn bytes_of(lines: &[Line]) -> String {
    lines
        .iter()
        .map(|l| format!("{}{}", l.text, l.terminator))
        .collect()
}

/// Checks the sink lines against the input: one record per line, in order, with the line's text as
/// value and the byte position after its terminator as offset.
fn assert_sink_matches(sink: &[Value], lines: &[Line], input: &str, topic: &str) {
    let values: Vec<&str> = sink
        .iter()
        .map(|r| {
            r["value"]
                .as_str()
                .unwrap_or_else(|| panic!("value is not a string: {r}"))
        })
        .collect();
    let expected: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(
        values.len(),
        expected.len(),
        "number of records in the sink"
    );
    for (i, (got, want)) in values.iter().zip(&expected).enumerate() {
        assert_eq!(got, want, "record {i}: every line exactly once, in order");
    }
    let mut position = 0;
    for (i, (record, line)) in sink.iter().zip(lines).enumerate() {
        position += line.text.len() + line.terminator.len();
        assert_eq!(record["topic"], topic, "record {i}");
        assert_eq!(
            record["source_partition"],
            serde_json::json!({ "filename": input }),
            "record {i}"
        );
        assert_eq!(
            without_file_identity(&record["source_offset"]),
            serde_json::json!({ "position": position }),
            "record {i}: the offset is the byte position after the line's terminator"
        );
    }
}

#[test]
fn file_source_resumes_from_the_committed_position_and_tails_appended_lines() {
    let ws = Workspace::new();
    let mut lines: Vec<Line> = (0..200).map(line).collect();
    let input = ws.write("input.txt", bytes_of(&lines));
    let input_name = path_str(&input);
    let worker = ws.worker(100, &[]);
    let connector = ws.properties(
        "file-source.properties",
        &[
            ("name", "local-file-source"),
            ("connector.class", "FileStreamSource"),
            ("file", &input_name),
            ("topic", "lines"),
            ("batch.size", "37"),
        ],
    );
    let sink_path = ws.sink_path();

    // Run 1: the 200 lines, then SIGTERM.
    let mut run1 = Ferry::standalone(&ws, "run1", &worker, &[&connector]);
    let mut sink = SinkTail::new(&sink_path);
    sink.wait_for(&mut run1, 200);
    run1.terminate_cleanly();
    let log1 = run1.log();
    assert!(
        log1.contains(&format!(
            "partition {{\"filename\":\"{input_name}\"}} has no committed offset: starting from the initial position"
        )),
        "the first run starts the file from the beginning; log:\n{log1}"
    );
    let after_200 = bytes_of(&lines).len();
    let records = read_sink(&sink_path);
    assert_sink_matches(&records, &lines, &input_name, "lines");

    // Stopped: append 100 lines; run 2 resumes at the committed position.
    let more: Vec<Line> = (200..300).map(line).collect();
    ws.append("input.txt", bytes_of(&more));
    lines.extend(more);
    let mut run2 = Ferry::standalone(&ws, "run2", &worker, &[&connector]);
    sink.wait_for(&mut run2, 300);
    let log2 = run2.log();
    assert!(
        log2.contains(&format!(
            // The file identity FileStreamSource adds follows the position.
            "partition {{\"filename\":\"{input_name}\"}} resumes from committed offset {{\"position\":{after_200},\"dev\":"
        )),
        "the second run resumes the file at its committed position {after_200} (everything run 1 \
         delivered was committed at SIGTERM); log:\n{log2}"
    );

    // Tailing: lines appended while the worker runs arrive; a line written in two parts arrives once,
    // whole (the source emits only complete lines).
    ws.append("input.txt", "a line written in two ");
    std::thread::sleep(std::time::Duration::from_millis(400)); // let the source see the partial line
    ws.append("input.txt", "parts, 終わり\n");
    lines.push(Line {
        text: "a line written in two parts, 終わり".to_owned(),
        terminator: "\n",
    });
    sink.wait_for(&mut run2, 301);
    let tail: Vec<Line> = (301..350).map(line).collect();
    ws.append("input.txt", bytes_of(&tail));
    lines.extend(tail);
    sink.wait_for(&mut run2, 350);
    run2.terminate_cleanly();

    // Every line exactly once, in order, nothing more.
    sink.read_new();
    assert_eq!(sink.lines.len(), 350, "no record after the last line");
    let records: Vec<Value> = sink.lines.iter().map(|l| parse_line(l)).collect();
    assert_sink_matches(&records, &lines, &input_name, "lines");

    // And the store holds the position after the last line.
    let total = bytes_of(&lines).len();
    let offsets = ws.list_offsets(&worker, "local-file-source");
    assert_eq!(
        without_file_identities(&offsets),
        vec![
            serde_json::json!({"partition": {"filename": input_name}, "offset": {"position": total}})
        ]
    );
}

/// SIGTERM at the earliest moment a record can be observed — the first line in the sink — is a clean
/// stop: exit 0, and every record delivered is committed. (`ferry standalone` used to listen for
/// signals only after starting its tasks, so such a SIGTERM killed it by the default action in about
/// a third of the runs.)
#[test]
fn sigterm_right_after_the_first_record_is_a_clean_stop_that_commits_everything_delivered() {
    let ws = Workspace::new();
    let worker = ws.worker(60_000, &[]);
    let connector = ws.properties(
        "sequence.properties",
        &[
            ("name", "sequence"),
            ("connector.class", "SequenceSource"),
            ("partitions", "2"),
            ("topic", "seq"),
            ("batch.size", "1"),
        ],
    );
    for round in 0..10 {
        let mut ferry = Ferry::standalone(&ws, &format!("run{round}"), &worker, &[&connector]);
        let sink = ws.sink_path();
        let before = support::complete_len(&sink);
        // Spin, not poll: the point is to signal as early as a record is visible.
        ferry.spin_until("the first record of the run in the sink", || {
            let len = std::fs::metadata(&sink).map_or(0, |m| m.len());
            (len > before).then_some(())
        });
        ferry.terminate_cleanly();

        // The last seq of each partition in the sink is exactly its committed offset.
        let mut last = std::collections::BTreeMap::new();
        for record in read_sink(&ws.sink_path()) {
            let p = record["source_partition"]["partition"]
                .as_i64()
                .expect("partition");
            last.insert(p, record["source_offset"]["seq"].as_i64().expect("seq"));
        }
        let committed: std::collections::BTreeMap<i64, i64> = ws
            .list_offsets(&worker, "sequence")
            .iter()
            .map(|e| {
                let p = e["partition"]["partition"].as_i64().expect("partition");
                (p, e["offset"]["seq"].as_i64().expect("seq"))
            })
            .collect();
        assert_eq!(
            committed, last,
            "round {round}: a clean stop commits everything delivered"
        );
    }
}
