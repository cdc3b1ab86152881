//! `ferry offsets doctor` through the real binary, on a file store: a clean store (tombstones
//! included) passes with exit status 0; planted partition-key mismatches — a value-type drift
//! (`1` vs `"1"`) and a field-order variant — exit 1 with a report naming both maps of each.

mod support;

use std::path::Path;

use support::{Finished, Workspace, path_str, run};

fn doctor(ws: &Workspace, worker: &Path) -> Finished {
    run(
        ws.path(),
        &["offsets", "doctor", "--worker", &path_str(worker)],
    )
}

fn set(ws: &Workspace, worker: &Path, connector: &str, partition: &str, offset: &str) {
    ws.offsets_ok(&[
        "set",
        "--worker",
        &path_str(worker),
        "--connector",
        connector,
        "--partition",
        partition,
        "--offset",
        offset,
    ]);
}

#[test]
fn doctor_passes_a_clean_store_and_finds_planted_mismatches() {
    let ws = Workspace::new();
    let worker = ws.worker(1000, &[]);

    // Clean: several connectors, rewrites of one partition, a tombstone.
    set(&ws, &worker, "seq", r#"{"partition":0}"#, r#"{"seq":1}"#);
    set(&ws, &worker, "seq", r#"{"partition":0}"#, r#"{"seq":2}"#);
    set(&ws, &worker, "seq", r#"{"partition":2}"#, r#"{"seq":1}"#);
    set(
        &ws,
        &worker,
        "files",
        r#"{"filename":"/a"}"#,
        r#"{"position":5}"#,
    );
    ws.offsets_ok(&[
        "reset",
        "--worker",
        &path_str(&worker),
        "--connector",
        "seq",
        "--partition",
        r#"{"partition":2}"#,
    ]);
    let clean = doctor(&ws, &worker);
    assert_eq!(
        clean.status.code(),
        Some(0),
        "{}\n{}",
        clean.stdout,
        clean.stderr
    );
    for needle in [
        "connector \"seq\": 1 live partition, 4 records, 1 tombstone — OK",
        "connector \"files\": 1 live partition, 1 record, 0 tombstones — OK",
        "RESULT: no mismatch found",
    ] {
        assert!(
            clean.stdout.contains(needle),
            "{needle:?} missing from:\n{}",
            clean.stdout
        );
    }

    // Planted: the partition number drifted to a string, and a map built in another field order.
    set(&ws, &worker, "seq", r#"{"partition":1}"#, r#"{"seq":5}"#);
    set(&ws, &worker, "seq", r#"{"partition":"1"}"#, r#"{"seq":9}"#);
    set(&ws, &worker, "multi", r#"{"a":1,"b":2}"#, r#"{"seq":1}"#);
    set(&ws, &worker, "multi", r#"{"b":2,"a":1}"#, r#"{"seq":2}"#);
    let sick = doctor(&ws, &worker);
    assert_eq!(
        sick.status.code(),
        Some(1),
        "{}\n{}",
        sick.stdout,
        sick.stderr
    );
    for needle in [
        "NEAR-DUPLICATES",
        r#"{"partition":1}  offset {"seq":5}"#,
        r#"{"partition":"1"}  offset {"seq":9}"#,
        "KEY VARIANTS",
        r#"["multi",{"a":1,"b":2}]  1 record"#,
        r#"["multi",{"b":2,"a":1}]  1 record  <- last write"#,
        "RESULT: 2 likely mismatches found",
    ] {
        assert!(
            sick.stdout.contains(needle),
            "{needle:?} missing from:\n{}",
            sick.stdout
        );
    }
    // The store itself reads the field-order variants as one partition.
    assert_eq!(ws.list_offsets(&worker, "multi").len(), 1);
}
