//! The suite's command runs end to end with shrunk sizes and writes a report, a PNG and results JSON
//! that agree with each other, so `scripts/bench` cannot rot unnoticed between published runs.

use std::path::Path;
use std::process::Command;

fn ferry_bench(args: &[&str], dir: &Path) -> std::process::Output {
    match Command::new(env!("CARGO_BIN_EXE_ferry-bench"))
        .args(args)
        .current_dir(dir)
        .output()
    {
        Ok(output) => output,
        Err(e) => panic!("cannot run ferry-bench: {e}"),
    }
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{} was not written: {e}", path.display()))
}

#[test]
fn a_quick_run_writes_the_report_the_plot_and_the_results() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let work = dir.path().join("work");
    let output = ferry_bench(
        &[
            "--quick",
            "--no-kafka",
            "--work-dir",
            &work.to_string_lossy(),
            "--out",
            "out/benchmarks.md",
            "--plot",
            "out/benchmarks-flush.png",
            "--json",
            "out/benchmarks.json",
        ],
        dir.path(),
    );
    assert!(
        output.status.success(),
        "ferry-bench --quick failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );

    let report = String::from_utf8_lossy(&read(&dir.path().join("out/benchmarks.md"))).into_owned();
    for expected in [
        "This is a `--quick` smoke run",
        "## Targets",
        "## Offset flush",
        "![flush latency against store size](benchmarks-flush.png)",
        "| 10 000 | 100 |",
        "## Start-up",
        "## Lookup",
        "## End to end",
        "## Memory",
        "Kafka cases not run (--no-kafka)",
    ] {
        assert!(
            report.contains(expected),
            "the report lacks {expected:?}:\n{report}"
        );
    }
    let png = read(&dir.path().join("out/benchmarks-flush.png"));
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "the plot is not a PNG"
    );

    let json: serde_json::Value =
        serde_json::from_slice(&read(&dir.path().join("out/benchmarks.json")))
            .unwrap_or_else(|e| panic!("the results are not JSON: {e}"));
    // Two store sizes × three changed counts, each with four contenders and real samples.
    let flush = json["flush"].as_array().map_or(0, Vec::len);
    assert_eq!(flush, 6, "flush cases: {}", json["flush"]);
    for case in json["flush"].as_array().into_iter().flatten() {
        assert_eq!(case["contenders"].as_array().map_or(0, Vec::len), 4);
        for contender in case["contenders"].as_array().into_iter().flatten() {
            let samples = contender["stats"]["samples"].as_array().map_or(0, Vec::len);
            assert!(samples >= 5, "too few samples: {contender}");
        }
    }
    let peak = json["memory"][0]["contenders"][0]["quantity"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(
        peak > 1e6,
        "a peak RSS under 1 MB is not a measurement: {peak}"
    );
    assert!(
        !work.exists() || std::fs::read_dir(&work).map_or(0, Iterator::count) == 0,
        "the run left files in its work dir"
    );

    // `render` rebuilds the same report from the JSON alone.
    std::fs::remove_file(dir.path().join("out/benchmarks.md")).ok();
    let output = ferry_bench(
        &[
            "render",
            "out/benchmarks.json",
            "--out",
            "out/benchmarks.md",
            "--plot",
            "out/benchmarks-flush.png",
        ],
        dir.path(),
    );
    assert!(
        output.status.success(),
        "render failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let again = String::from_utf8_lossy(&read(&dir.path().join("out/benchmarks.md"))).into_owned();
    assert_eq!(
        again, report,
        "render must reproduce the report from the JSON"
    );
}

#[test]
fn an_unknown_section_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let output = ferry_bench(&["--quick", "--only", "flush,warp"], dir.path());
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("\"warp\"")
            && stderr.contains("flush, startup, lookup, e2e, eos, scale-out, memory"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("docs").exists(),
        "nothing is written on bad input"
    );
}
