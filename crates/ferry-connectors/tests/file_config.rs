//! FileStreamSource: validate, task_configs, alter_offsets, and the connector registry.

mod common;

use common::{TestResult, config};
use ferry_api::{ConfigIssue, ConnectMap, SourceConnector, SourceOffset, SourcePartition};
use ferry_connectors::{
    FileStreamSourceConnector, TASK_FILES, builtin_connector, builtin_connectors,
};

fn keys(issues: &[ConfigIssue]) -> Vec<&str> {
    issues.iter().map(|i| i.key.as_str()).collect()
}

#[test]
fn a_valid_config_has_no_issues() -> TestResult {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("a.log"), "")?;
    let glob = dir.path().join("*.log");
    let c = FileStreamSourceConnector;
    assert_eq!(
        c.validate(&config(&[("file", "/does/not/exist/yet"), ("topic", "t")])),
        []
    );
    let full = config(&[
        ("files", glob.to_str().unwrap_or_default()),
        ("topic", "t"),
        ("batch.size", "10"),
        ("file.truncation.policy", "restart"),
    ]);
    assert_eq!(c.validate(&full), []);
    Ok(())
}

#[test]
fn each_bad_key_is_one_issue_naming_it() {
    let c = FileStreamSourceConnector;
    assert_eq!(
        keys(&c.validate(&config(&[("file", "/does/not/exist/x")]))),
        ["topic"]
    );
    assert_eq!(
        keys(&c.validate(&config(&[("file", "/does/not/exist/x"), ("topic", " ")]))),
        ["topic"]
    );
    assert_eq!(
        keys(&c.validate(&config(&[("topic", "t")]))),
        ["file"],
        "neither file nor files"
    );
    assert_eq!(
        keys(&c.validate(&config(&[
            ("file", "/does/not/exist/x"),
            ("files", "/tmp/*"),
            ("topic", "t")
        ]))),
        ["files"]
    );
    for bad in ["abc", "0", "-5", "1.5", "99999999999"] {
        let issues = c.validate(&config(&[
            ("file", "/does/not/exist/x"),
            ("topic", "t"),
            ("batch.size", bad),
        ]));
        assert_eq!(keys(&issues), ["batch.size"], "batch.size={bad}");
    }
    let issues = c.validate(&config(&[
        ("file", "/does/not/exist/x"),
        ("topic", "t"),
        ("file.truncation.policy", "ignore"),
    ]));
    assert_eq!(keys(&issues), ["file.truncation.policy"]);
    assert!(
        issues[0].message.contains("fail") && issues[0].message.contains("restart"),
        "{}",
        issues[0].message
    );

    let all_bad = config(&[("batch.size", "x"), ("file.truncation.policy", "y")]);
    let issues = c.validate(&all_bad);
    let mut found = keys(&issues);
    found.sort();
    assert_eq!(
        found,
        ["batch.size", "file", "file.truncation.policy", "topic"]
    );
}

#[test]
fn a_glob_that_matches_nothing_or_is_invalid_is_an_issue_on_files() -> TestResult {
    let dir = tempfile::tempdir()?;
    let c = FileStreamSourceConnector;
    let nothing = dir.path().join("*.log");
    let issues = c.validate(&config(&[
        ("files", nothing.to_str().unwrap_or_default()),
        ("topic", "t"),
    ]));
    assert_eq!(keys(&issues), ["files"]);
    assert!(
        issues[0].message.contains("matches no file"),
        "{}",
        issues[0].message
    );
    assert_eq!(
        keys(&c.validate(&config(&[("files", "/tmp/[oops"), ("topic", "t")]))),
        ["files"]
    );
    assert!(
        c.task_configs(
            &config(&[
                ("files", nothing.to_str().unwrap_or_default()),
                ("topic", "t")
            ]),
            2
        )
        .is_err()
    );
    Ok(())
}

#[test]
fn one_file_makes_one_task_whatever_tasks_max() -> TestResult {
    let cfg = config(&[("file", "/var/log/app.log"), ("topic", "t")]);
    let tasks = FileStreamSourceConnector.task_configs(&cfg, 4)?;
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0][TASK_FILES], r#"["/var/log/app.log"]"#);
    assert_eq!(tasks[0]["topic"], "t", "the connector config is passed on");
    assert!(
        FileStreamSourceConnector
            .task_configs(&config(&[("topic", "t")]), 1)
            .is_err()
    );
    Ok(())
}

#[test]
fn config_keys_list_the_kafka_connect_names() {
    let keys = FileStreamSourceConnector.config_keys();
    let names: Vec<_> = keys.iter().map(|k| k.name).collect();
    assert_eq!(
        names,
        [
            "file",
            "files",
            "topic",
            "batch.size",
            "file.truncation.policy",
            "max.line.bytes"
        ]
    );
    assert!(keys.iter().any(|k| k.name == "topic" && k.required));
    assert!(
        keys.iter()
            .any(|k| k.name == "batch.size" && k.default == Some("2000"))
    );
}

fn partition(
    filename: impl Into<ferry_api::Value>,
) -> Result<SourcePartition, ferry_api::ValueError> {
    ConnectMap::new().with("filename", filename)
}

fn position(
    value: impl Into<ferry_api::Value>,
) -> Result<Option<SourceOffset>, ferry_api::ValueError> {
    Ok(Some(ConnectMap::new().with("position", value)?))
}

#[test]
fn alter_offsets_accepts_valid_positions_and_resets() -> TestResult {
    let c = FileStreamSourceConnector;
    let cfg = config(&[("file", "/a"), ("topic", "t")]);
    let offsets = vec![
        (partition("/a")?, position(0i64)?),
        (partition("/b")?, position(42i32)?),
        (partition("/c")?, None),
    ];
    assert!(c.alter_offsets(&cfg, &offsets)?);
    Ok(())
}

#[test]
fn alter_offsets_rejects_bad_entries_naming_them() -> TestResult {
    let c = FileStreamSourceConnector;
    let cfg = config(&[("file", "/a"), ("topic", "t")]);
    let bad: Vec<(SourcePartition, Option<SourceOffset>, &str)> = vec![
        (
            ConnectMap::new().with("file", "/a")?,
            position(1i64)?,
            "filename",
        ),
        (ConnectMap::new().with("file", "/a")?, None, "filename"),
        (partition(7i64)?, position(1i64)?, "filename"),
        (
            partition("/a")?,
            Some(ConnectMap::new().with("offset", 1i64)?),
            "position",
        ),
        (partition("/a")?, position(-1i64)?, "non-negative"),
        (partition("/a")?, position("12")?, "integer"),
        (partition("/a")?, position(1.5f64)?, "integer"),
    ];
    for (p, o, needle) in bad {
        let shown = format!("{p} {o:?}");
        let Err(error) = c.alter_offsets(
            &cfg,
            &[(partition("/ok")?, position(1i64)?), (p.clone(), o)],
        ) else {
            return Err(format!("{shown} must be rejected").into());
        };
        let message = error.to_string();
        assert!(
            message.contains(needle) && message.contains(&p.to_string()),
            "{shown}: {message}"
        );
        assert!(!error.is_retriable());
    }
    Ok(())
}

#[test]
fn alter_offsets_accepts_the_file_identity_fields_and_checks_them() -> TestResult {
    let c = FileStreamSourceConnector;
    let cfg = config(&[("file", "/a"), ("topic", "t")]);
    let identity = |fp: ferry_api::Value| -> Result<_, ferry_api::ValueError> {
        ConnectMap::new()
            .with("position", 10i64)?
            .with("dev", 2049i64)?
            .with("ino", -5i64)?
            .with("fp", fp)?
            .with("fp_len", 10i64)
    };
    assert!(c.alter_offsets(&cfg, &[(partition("/a")?, Some(identity(7i64.into())?))])?);
    for bad in [
        ferry_api::Value::from(-1i64),
        "7".into(),
        (1i64 << 32).into(),
    ] {
        let Err(error) = c.alter_offsets(&cfg, &[(partition("/a")?, Some(identity(bad.clone())?))])
        else {
            return Err(format!("fp {bad:?} must be rejected").into());
        };
        assert!(error.to_string().contains("\"fp\""), "{error}");
    }
    Ok(())
}

#[test]
fn the_registry_maps_class_names_to_connectors() {
    let all = builtin_connectors();
    let names: Vec<&str> = all.iter().flat_map(|p| p.names()).collect();
    assert_eq!(
        names,
        [
            "FileStreamSource",
            "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "SequenceSource"
        ]
    );
    for class in names {
        assert!(builtin_connector(class).is_some(), "{class}");
    }
    let file = builtin_connector("org.apache.kafka.connect.file.FileStreamSourceConnector");
    assert!(file.is_some_and(|c| {
        c.config_keys()
            .iter()
            .any(|k| k.name == "file.truncation.policy")
    }));
    let sequence = builtin_connector("SequenceSource");
    assert!(sequence.is_some_and(|c| {
        c.config_keys()
            .iter()
            .any(|k| k.name == "records.per.partition")
    }));
    assert!(
        builtin_connector("filestreamsource").is_none(),
        "exact class names only"
    );
}
