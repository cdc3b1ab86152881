//! The classic partition-key mismatch, made loud: the store holds an offset under `{"partition":"0"}`
//! (a string, as a buggy earlier connector version would have written it), SequenceSource looks up
//! `{"partition":0}`. Like Kafka Connect, the task starts that partition from its initial position
//! (seq 0); unlike Kafka Connect, the log has a WARN naming both partitions.

mod support;

use std::collections::BTreeMap;

use serde_json::json;
use support::{Ferry, SinkTail, Workspace, parse_line, path_str};

#[test]
fn near_identical_stored_partition_is_warned_about_and_the_task_starts_from_zero() {
    let ws = Workspace::new();
    let worker = ws.worker(100, &[]);
    let worker_arg = path_str(&worker);
    let set = ws.offsets_ok(&[
        "set",
        "--worker",
        &worker_arg,
        "--connector",
        "sequence",
        "--partition",
        r#"{"partition":"0"}"#,
        "--offset",
        r#"{"seq":41}"#,
    ]);
    assert_eq!(
        support::offsets_of(&set.stdout),
        vec![json!({"partition": {"partition": "0"}, "offset": {"seq": 41}})]
    );

    let connector = ws.properties(
        "sequence.properties",
        &[
            ("name", "sequence"),
            ("connector.class", "SequenceSource"),
            ("partitions", "2"),
            ("records.per.partition", "60"),
            ("topic", "seq"),
            ("batch.size", "25"),
        ],
    );
    let mut ferry = Ferry::standalone(&ws, "run", &worker, &[&connector]);
    let mut sink = SinkTail::new(&ws.sink_path());
    sink.wait_for(&mut ferry, 120);
    ferry.terminate_cleanly();

    let log = ferry.log();
    let warning = log.lines().find(|line| {
        line.contains(" WARN ")
            && line.contains(r#"{"partition":0}"#)
            && line.contains(r#"{"partition":"0"}"#)
    });
    assert!(
        warning.is_some(),
        "expected a WARN naming both {{\"partition\":0}} and {{\"partition\":\"0\"}}; log:\n{log}"
    );

    // Partition 0 started at seq 0 (the string-keyed offset did not apply), and so did partition 1.
    sink.read_new();
    let mut seqs: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for line in &sink.lines {
        let record = parse_line(line);
        let p = record["source_partition"]["partition"]
            .as_i64()
            .expect("integer partition");
        seqs.entry(p)
            .or_default()
            .push(record["value"]["seq"].as_i64().expect("seq"));
    }
    let expected: Vec<i64> = (0..60).collect();
    assert_eq!(seqs.get(&0), Some(&expected), "partition 0 starts at seq 0");
    assert_eq!(seqs.get(&1), Some(&expected), "partition 1 starts at seq 0");

    // Both keys are now stored: the old string-keyed one untouched, the integer one committed.
    let mut offsets: Vec<String> = ws
        .list_offsets(&worker, "sequence")
        .iter()
        .map(|entry| entry.to_string())
        .collect();
    offsets.sort();
    assert_eq!(
        offsets,
        vec![
            r#"{"offset":{"seq":41},"partition":{"partition":"0"}}"#.to_owned(),
            r#"{"offset":{"seq":59},"partition":{"partition":0}}"#.to_owned(),
            r#"{"offset":{"seq":59},"partition":{"partition":1}}"#.to_owned(),
        ]
    );
}
