//! The published Python clients of the Kafka Connect REST API, from PyPI, against `ferry standalone`
//! with HTTP Basic authentication: `kafka-connect-py` (its Python API and its `kc` command line) and
//! `kafka-connect-api`, each running the operations of its README (plugins, create, get, update,
//! pause, resume, restart, tasks, status, delete) as a user of the credentials file.
//!
//! Needs `python3` with `venv` and `pip` (Debian: python3-venv) and access to PyPI (pip's cache,
//! ~/.cache/pip, is reused across runs). The venv is created in a temporary directory each run.

mod support;

use std::path::Path;
use std::process::Command;

use serde_json::json;
use support::{Ferry, Workspace, path_str};

/// The client versions tested (pinned: a new release is a new test).
const PACKAGES: &[&str] = &["kafka-connect-py==1.0.0", "kafka-connect-api==0.5.10"];

/// The script's last step: it ran to the end when this one reports.
const LAST_STEP: &str = "api.delete";

fn run(command: &mut Command, what: &str) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {command:?}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// A venv with the clients installed, in `dir`; its python.
fn venv_with_clients(dir: &Path) -> std::path::PathBuf {
    let python3 = Command::new("python3").arg("--version").output();
    assert!(
        python3.is_ok_and(|o| o.status.success()),
        "python3 is missing: the PyPI clients test needs python3 with venv and pip (Debian: apt-get \
         install python3 python3-venv; scripts/install-test-deps installs them)"
    );
    let venv = dir.join("venv");
    let created = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .expect("python3 runs");
    assert!(
        created.status.success(),
        "python3 -m venv failed: venv or ensurepip is missing (Debian: apt-get install python3-venv; \
         scripts/install-test-deps installs it):\n{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let python = venv.join("bin").join("python");
    run(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(PACKAGES),
        "pip install of the clients from PyPI (is PyPI reachable?)",
    );
    python
}

#[test]
fn the_pypi_clients_readme_operations_succeed_with_basic_auth() {
    let ws = Workspace::new();
    let python = venv_with_clients(ws.path());
    let users = ws.write(
        "users.properties",
        "# Kafka Connect's JAAS PropertyFileLoginModule file\nalice: s3cret\nbob: other\n",
    );
    let worker = ws.worker(
        100,
        &[("rest.basic.auth.credentials.file", &path_str(&users))],
    );
    let mut ferry = Ferry::standalone(&ws, "ferry", &worker, &[]);
    let base = ferry.rest_url();
    let config = json!({
        "connector.class": "SequenceSource",
        "topic": "numbers",
        "partitions": "1",
        "tasks.max": "1",
        "records.per.partition": "5",
    });
    let script = ws.write("clients.py", include_str!("pypi_clients/clients.py"));
    let out = run(
        Command::new(&python)
            .arg(&script)
            .args([base.as_str(), "alice", "s3cret", &config.to_string()])
            .current_dir(ws.path()),
        "the clients script",
    );
    ferry.terminate_cleanly();

    let failed: Vec<&str> = out
        .lines()
        .filter_map(|line| line.strip_prefix("FAIL "))
        .collect();
    assert!(
        out.lines().any(|l| l == format!("OK {LAST_STEP}")
            || l.starts_with(&format!("FAIL {LAST_STEP}:"))),
        "the script stopped before its last step:\n{out}"
    );
    assert!(
        failed.is_empty(),
        "client calls failed:\n{}\n\nfull output:\n{out}",
        failed.join("\n")
    );
}
