//! `ferry offsets` through the real binary, on a file store: the commands that only read (`list`,
//! `get`, `export`, `doctor`) change nothing on disk — no store or lock file created for a mistyped
//! path, no torn tail truncated (it is reported), and a read-only store works; `import --dry-run`
//! neither — and `set` refuses an empty connector name and says which argument is not valid.

mod support;

use std::fs;
use std::path::{Path, PathBuf};

use support::{Finished, Workspace, path_str, run};

fn offsets(ws: &Workspace, args: &[&str]) -> Finished {
    let mut full = vec!["offsets"];
    full.extend_from_slice(args);
    run(ws.path(), &full)
}

/// Every file under `dir` with its bytes, sorted.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("list {}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("directory entry").path();
            let bytes = fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            (path, bytes)
        })
        .collect();
    files.sort();
    files
}

/// The read-only commands, for the worker file `worker` and connector `conn`.
fn read_only_commands(worker: &str) -> Vec<Vec<String>> {
    let args = |list: &[&str]| list.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
    vec![
        args(&["list", "--worker", worker, "--connector", "conn"]),
        args(&[
            "get",
            "--worker",
            worker,
            "--connector",
            "conn",
            "--partition",
            r#"{"p":0}"#,
        ]),
        args(&["export", "--worker", worker]),
        args(&["doctor", "--worker", worker]),
    ]
}

fn set(ws: &Workspace, worker: &Path, partition: &str, offset: &str) {
    ws.offsets_ok(&[
        "set",
        "--worker",
        &path_str(worker),
        "--connector",
        "conn",
        "--partition",
        partition,
        "--offset",
        offset,
    ]);
}

#[test]
fn read_only_commands_on_a_mistyped_path_fail_and_create_nothing() {
    let ws = Workspace::new();
    let store = ws.file("store");
    fs::create_dir(&store).expect("create the store directory");
    let worker = ws.properties(
        "worker.properties",
        &[(
            "offset.storage.file.filename",
            &path_str(&store.join("ofsets.ferry")),
        )],
    );
    for args in read_only_commands(&path_str(&worker)) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = offsets(&ws, &args);
        assert!(!out.status.success(), "`ferry offsets {args:?}` must fail");
        assert!(
            out.stderr.contains("no offset store file at this path"),
            "{args:?}: {}",
            out.stderr
        );
        assert_eq!(
            snapshot(&store),
            vec![],
            "`ferry offsets {args:?}` created files"
        );
    }
}

#[test]
fn read_only_commands_report_a_torn_tail_and_leave_it() {
    let ws = Workspace::new();
    let worker = ws.worker(1000, &[]);
    set(&ws, &worker, r#"{"p":0}"#, r#"{"position":5}"#);
    // A flush cut short by a crash: the start of a frame header.
    support::append(&ws.offsets_path(), &[0x2a, 0x01, 0x00]);
    let before = snapshot(ws.path());
    for args in read_only_commands(&path_str(&worker)) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = ws.offsets_ok(&args);
        assert!(
            out.stderr.contains("torn final write") && out.stderr.contains("left in place"),
            "{args:?} reports the torn tail: {}",
            out.stderr
        );
        if args[0] != "doctor" && args[0] != "export" {
            assert!(
                out.stdout.contains(r#""position":5"#),
                "{args:?}: {}",
                out.stdout
            );
        }
        assert_eq!(
            snapshot(ws.path()),
            before,
            "`ferry offsets {args:?}` changed files"
        );
    }
    let export = ws.offsets_ok(&["export", "--worker", &path_str(&worker)]);
    let doc: serde_json::Value = serde_json::from_str(&export.stdout).expect("export prints JSON");
    assert_eq!(
        doc["offsets"][0]["offset"],
        serde_json::json!({"position": 5}),
        "export reads the valid prefix: {doc}"
    );
}

#[test]
#[cfg(unix)]
fn read_only_commands_work_on_a_read_only_store() {
    use std::os::unix::fs::PermissionsExt;
    let ws = Workspace::new();
    let dir = ws.file("ro");
    fs::create_dir(&dir).expect("create the store directory");
    let store = dir.join("offsets.ferry");
    let worker = ws.properties(
        "worker.properties",
        &[("offset.storage.file.filename", &path_str(&store))],
    );
    set(&ws, &worker, r#"{"p":0}"#, r#"{"position":5}"#);
    let mode = |p: &Path, mode: u32| {
        fs::set_permissions(p, fs::Permissions::from_mode(mode)).expect("chmod");
    };
    for file in snapshot(&dir) {
        mode(&file.0, 0o444);
    }
    mode(&dir, 0o555);
    let before = snapshot(&dir);
    let results: Vec<(Vec<String>, Finished)> = read_only_commands(&path_str(&worker))
        .into_iter()
        .map(|args| {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = offsets(&ws, &refs);
            (args, out)
        })
        .collect();
    let after = snapshot(&dir);
    mode(&dir, 0o755);
    for (args, out) in results {
        assert!(out.status.success(), "{args:?}: {}", out.stderr);
    }
    assert_eq!(after, before);
}

#[test]
fn set_refuses_an_empty_connector_name_and_names_a_bad_partition() {
    let ws = Workspace::new();
    let worker = ws.worker(1000, &[]);
    let worker = path_str(&worker);
    let out = offsets(
        &ws,
        &[
            "set",
            "--worker",
            &worker,
            "--connector",
            "",
            "--partition",
            r#"{"p":0}"#,
            "--offset",
            r#"{"position":1}"#,
        ],
    );
    assert!(!out.status.success(), "an empty connector name is refused");
    assert!(out.stderr.contains("connector name"), "{}", out.stderr);
    assert!(!ws.offsets_path().exists(), "nothing was written");

    let out = offsets(
        &ws,
        &[
            "set",
            "--worker",
            &worker,
            "--connector",
            "conn",
            "--partition",
            "{p:0}",
            "--offset",
            r#"{"position":1}"#,
        ],
    );
    assert!(!out.status.success());
    assert!(
        out.stderr.contains("--partition") && out.stderr.contains("not a valid partition"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("offset value"), "{}", out.stderr);

    let out = offsets(
        &ws,
        &[
            "set",
            "--worker",
            &worker,
            "--connector",
            "conn",
            "--partition",
            r#"{"p":0}"#,
            "--offset",
            "[1]",
        ],
    );
    assert!(!out.status.success());
    assert!(
        out.stderr.contains("--offset") && out.stderr.contains("not a valid offset"),
        "{}",
        out.stderr
    );
}

#[test]
fn import_dry_run_changes_nothing_even_for_a_missing_store() {
    let ws = Workspace::new();
    let worker = ws.worker(1000, &[]);
    let worker = path_str(&worker);
    let dump = ws.write("dump.txt", "[\"conn\",{\"p\":0}]\t{\"position\":3}\n");
    let before = snapshot(ws.path());
    let out = ws.offsets_ok(&["import", "--dry-run", "--worker", &worker, &path_str(&dump)]);
    assert!(
        out.stderr.contains("does not exist yet") && out.stderr.contains("would write"),
        "{}",
        out.stderr
    );
    assert_eq!(snapshot(ws.path()), before, "no store or lock file created");

    set(&ws, Path::new(&worker), r#"{"p":0}"#, r#"{"position":1}"#);
    support::append(&ws.offsets_path(), &[0x2a, 0x01, 0x00]);
    let before = snapshot(ws.path());
    let out = ws.offsets_ok(&["import", "--dry-run", "--worker", &worker, &path_str(&dump)]);
    assert!(out.stderr.contains("would write"), "{}", out.stderr);
    assert_eq!(
        snapshot(ws.path()),
        before,
        "the torn tail is left in place"
    );
}
