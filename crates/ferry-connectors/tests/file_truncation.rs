//! FileStreamSource: files that became shorter than the position to read from, and files replaced
//! by another one.

mod common;

use std::path::Path;

use common::{Offsets, TestResult, config, offset_field, poll_n, poll_times, values};
use ferry_api::{Config, ConnectMap};
use ferry_connectors::FileStreamSourceConnector;

fn file_config(path: &Path, policy: Option<&str>) -> Config {
    let mut cfg = config(&[
        ("file", path.to_str().unwrap_or_default()),
        ("topic", "lines"),
    ]);
    if let Some(policy) = policy {
        cfg.insert("file.truncation.policy".into(), policy.into());
    }
    cfg
}

async fn offsets_at(path: &Path, position: i64) -> Result<Offsets, Box<dyn std::error::Error>> {
    let offsets = Offsets::new();
    let partition = ConnectMap::new().with("filename", path.to_str().unwrap_or_default())?;
    offsets
        .write(vec![(
            partition,
            Some(ConnectMap::new().with("position", position)?),
        )])
        .await?;
    Ok(offsets)
}

fn assert_explains_truncation(message: &str, path: &Path, position: u64, length: u64) {
    for needle in [
        path.to_str().unwrap_or_default().to_owned(),
        format!("position {position}"),
        format!("{length} bytes"),
        "file.truncation.policy=restart".to_owned(),
        "ferry offsets reset".to_owned(),
    ] {
        assert!(
            message.contains(&needle),
            "{needle:?} missing from: {message}"
        );
    }
}

#[tokio::test]
async fn start_fails_clearly_on_a_file_shorter_than_its_committed_position() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("in.txt");
    std::fs::write(&path, "short\n")?; // 6 bytes
    let offsets = offsets_at(&path, 50).await?;

    let Err(error) = offsets
        .start(&FileStreamSourceConnector, file_config(&path, Some("fail")))
        .await
    else {
        return Err("start must fail".into());
    };
    assert!(!error.is_retriable());
    assert_explains_truncation(&error.to_string(), &path, 50, 6);
    Ok(())
}

#[tokio::test]
async fn restart_policy_reads_a_truncated_file_again_from_zero() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("in.txt");
    std::fs::write(&path, "new\nlines\n")?;
    let offsets = offsets_at(&path, 50).await?;

    let (mut task, _) = offsets
        .start(
            &FileStreamSourceConnector,
            file_config(&path, Some("restart")),
        )
        .await?;
    let records = poll_n(task.as_mut(), 2).await?;
    assert_eq!(values(&records), ["new", "lines"]);
    assert_eq!(offset_field(&records, "position"), [4, 10]);
    Ok(())
}

#[tokio::test]
async fn a_position_equal_to_the_length_is_not_truncation() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("in.txt");
    std::fs::write(&path, "done\n")?;
    let offsets = offsets_at(&path, 5).await?;

    let (mut task, _) = offsets
        .start(&FileStreamSourceConnector, file_config(&path, None))
        .await?;
    assert!(poll_times(task.as_mut(), 2).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn truncation_while_tailing_fails_the_task() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("in.txt");
    std::fs::write(&path, "first line\nsecond line\n")?; // 23 bytes

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path, Some("fail")))
        .await?;
    assert_eq!(poll_n(task.as_mut(), 2).await?.len(), 2);

    std::fs::File::options()
        .write(true)
        .open(&path)?
        .set_len(4)?;
    let error = match task.poll().await {
        Err(e) => e,
        Ok(records) => {
            return Err(format!("expected a truncation error, got {:?}", values(&records)).into());
        }
    };
    assert_explains_truncation(&error.to_string(), &path, 23, 4);
    Ok(())
}

#[tokio::test]
async fn truncation_while_tailing_with_restart_policy_reads_from_zero() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("in.txt");
    std::fs::write(&path, "first line\nsecond line\n")?;

    let (mut task, _) = Offsets::new()
        .start(
            &FileStreamSourceConnector,
            file_config(&path, Some("restart")),
        )
        .await?;
    assert_eq!(poll_n(task.as_mut(), 2).await?.len(), 2);

    std::fs::write(&path, "again\n")?; // truncates in place, then writes 6 bytes
    let records = poll_n(task.as_mut(), 1).await?;
    assert_eq!(values(&records), ["again"]);
    assert_eq!(offset_field(&records, "position"), [6]);
    Ok(())
}

#[tokio::test]
async fn a_file_replaced_by_a_shorter_one_while_tailing_is_read_from_zero() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("in.txt");
    std::fs::write(&path, "a long first line\n")?; // 18 bytes

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path, None))
        .await?;
    assert_eq!(poll_n(task.as_mut(), 1).await?.len(), 1);

    // Another file (another inode), not a truncation: even under the `fail` policy it is read from 0.
    let replacement = dir.path().join("in.txt.new");
    std::fs::write(&replacement, "short\n")?;
    std::fs::rename(&replacement, &path)?;
    let records = poll_n(task.as_mut(), 1).await?;
    assert_eq!(values(&records), ["short"]);
    assert_eq!(offset_field(&records, "position"), [6]);
    Ok(())
}

#[tokio::test]
async fn a_file_replaced_by_a_longer_one_is_read_from_zero() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("in.txt");
    std::fs::write(&path, "one\n")?;

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path, None))
        .await?;
    assert_eq!(poll_n(task.as_mut(), 1).await?.len(), 1);

    // Never read from the old file's position: the new file's lines start at its byte 0.
    let replacement = dir.path().join("in.txt.new");
    std::fs::write(&replacement, "uno\ntwo\n")?;
    std::fs::rename(&replacement, &path)?;
    let records = poll_n(task.as_mut(), 2).await?;
    assert_eq!(values(&records), ["uno", "two"]);
    assert_eq!(offset_field(&records, "position"), [4, 8]);
    Ok(())
}

#[tokio::test]
async fn a_deleted_and_recreated_file_restarts_under_the_restart_policy() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("in.txt");
    std::fs::write(&path, "before rotation\n")?;

    let (mut task, _) = Offsets::new()
        .start(
            &FileStreamSourceConnector,
            file_config(&path, Some("restart")),
        )
        .await?;
    assert_eq!(poll_n(task.as_mut(), 1).await?.len(), 1);

    std::fs::remove_file(&path)?;
    assert!(
        poll_times(task.as_mut(), 2).await?.is_empty(),
        "a removed file is waited for"
    );
    std::fs::write(&path, "after\n")?;
    assert_eq!(values(&poll_n(task.as_mut(), 1).await?), ["after"]);
    Ok(())
}
