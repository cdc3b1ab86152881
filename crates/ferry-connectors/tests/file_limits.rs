//! FileStreamSource limits: over-long lines (`max.line.bytes`) and files that are not regular files.

mod common;

use std::io::Write;
use std::path::Path;

use common::{Offsets, TestResult, config, offset_field, poll_n, poll_times, values};
use ferry_api::{Config, SourceConnector};
use ferry_connectors::FileStreamSourceConnector;

fn file_config(path: &Path, max_line_bytes: Option<&str>) -> Config {
    let mut cfg = config(&[
        ("file", path.to_str().unwrap_or_default()),
        ("topic", "lines"),
    ]);
    if let Some(max) = max_line_bytes {
        cfg.insert("max.line.bytes".into(), max.into());
    }
    cfg
}

fn append(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(bytes)
}

#[tokio::test]
async fn a_line_longer_than_max_line_bytes_is_skipped_whole() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("in.txt");
    let long = "x".repeat(300_000);
    std::fs::write(&path, format!("before\n{long}\nafter\n"))?;

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path, Some("1000")))
        .await?;
    let records = poll_n(task.as_mut(), 2).await?;
    assert_eq!(values(&records), ["before", "after"]);
    let end = 7 + 300_001 + 6;
    assert_eq!(offset_field(&records, "position"), [7, end]);
    assert!(poll_times(task.as_mut(), 2).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn a_long_line_written_in_pieces_is_skipped_and_never_split() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("in.txt");
    std::fs::write(&path, "first\n")?;

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path, Some("100")))
        .await?;
    assert_eq!(values(&poll_n(task.as_mut(), 1).await?), ["first"]);
    // The over-long line arrives over several polls; its end and the next line come last.
    for _ in 0..5 {
        append(&path, "y".repeat(60).as_bytes())?;
        assert!(poll_times(task.as_mut(), 1).await?.is_empty());
    }
    append(&path, b"yyy\nshort\n")?;
    let records = poll_n(task.as_mut(), 1).await?;
    assert_eq!(values(&records), ["short"]);
    assert_eq!(offset_field(&records, "position"), [6 + 300 + 4 + 6]);
    Ok(())
}

#[tokio::test]
async fn a_line_of_exactly_max_line_bytes_is_kept() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("in.txt");
    let exact = "z".repeat(100);
    std::fs::write(&path, format!("{exact}\r\n{exact}z\nend\n"))?;

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path, Some("100")))
        .await?;
    let records = poll_n(task.as_mut(), 2).await?;
    assert_eq!(values(&records), [exact.as_str(), "end"]);
    Ok(())
}

#[test]
fn max_line_bytes_is_validated() {
    let connector = FileStreamSourceConnector;
    for bad in ["0", "-1", "lots", "2147483648"] {
        let issues = connector.validate(&file_config(Path::new("/does/not/exist/x"), Some(bad)));
        assert!(
            issues.iter().any(|i| i.key == "max.line.bytes"),
            "{bad:?} must be refused: {issues:?}"
        );
    }
    assert!(
        connector
            .validate(&file_config(Path::new("/does/not/exist/x"), Some("65536")))
            .is_empty()
    );
    let key = connector
        .config_keys()
        .into_iter()
        .find(|k| k.name == "max.line.bytes");
    assert!(key.is_some(), "max.line.bytes is a documented key");
}

async fn start_error(path: &Path) -> Result<String, Box<dyn std::error::Error>> {
    match Offsets::new()
        .start(&FileStreamSourceConnector, file_config(path, None))
        .await
    {
        Ok(_) => Err(format!("start on {} must fail", path.display()).into()),
        Err(e) => {
            assert!(!e.is_retriable(), "{e}");
            Ok(e.to_string())
        }
    }
}

#[tokio::test]
async fn a_fifo_is_refused_without_blocking() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("pipe");
    let status = std::process::Command::new("mkfifo").arg(&path).status()?;
    assert!(status.success(), "mkfifo failed");

    // No writer ever opens the FIFO: an open() that blocked would hang this test.
    let message = start_error(&path).await?;
    assert!(
        message.contains(path.to_str().unwrap_or_default())
            && message.contains("FIFO")
            && message.contains("regular file"),
        "{message}"
    );
    Ok(())
}

#[tokio::test]
async fn a_character_device_and_a_directory_are_refused() -> TestResult {
    let message = start_error(Path::new("/dev/zero")).await?;
    assert!(
        message.contains("/dev/zero") && message.contains("character device"),
        "{message}"
    );
    let dir = tempfile::tempdir()?;
    let message = start_error(dir.path()).await?;
    assert!(message.contains("directory"), "{message}");
    Ok(())
}

#[test]
fn validate_reports_a_file_that_is_not_a_regular_file() {
    let issues = FileStreamSourceConnector.validate(&file_config(Path::new("/dev/zero"), None));
    assert!(
        issues
            .iter()
            .any(|i| i.key == "file" && i.message.contains("character device")),
        "{issues:?}"
    );
    // A file that does not exist yet is fine: the task waits for it.
    let missing =
        FileStreamSourceConnector.validate(&file_config(Path::new("/nonexistent/x"), None));
    assert!(missing.is_empty(), "{missing:?}");
}

#[tokio::test]
async fn a_fifo_appearing_later_fails_the_poll() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("later");
    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path, None))
        .await?;
    assert!(poll_times(task.as_mut(), 1).await?.is_empty());
    let status = std::process::Command::new("mkfifo").arg(&path).status()?;
    assert!(status.success(), "mkfifo failed");
    match task.poll().await {
        Err(e) => assert!(e.to_string().contains("FIFO"), "{e}"),
        Ok(records) => return Err(format!("expected an error, got {:?}", values(&records)).into()),
    }
    Ok(())
}
