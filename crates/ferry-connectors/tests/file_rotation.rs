//! FileStreamSource and log rotation: a file moved away and replaced (`mv` + create), truncated and
//! rewritten in place (`copytruncate`), or rotated while the task was stopped.

mod common;

use std::io::Write;
use std::os::unix::fs::MetadataExt;
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

fn append(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(bytes)
}

/// Truncates `path` in place (same inode), as logrotate's `copytruncate` does after its copy.
fn truncate_in_place(path: &Path) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .set_len(0)
}

fn ino(path: &Path) -> std::io::Result<i64> {
    Ok(std::fs::metadata(path)?.ino() as i64)
}

#[tokio::test]
async fn mv_and_create_reads_the_new_file_from_its_beginning() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("app.log");
    std::fs::write(&path, "old-1\nold-2\nold-3\n")?;

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path, None))
        .await?;
    assert_eq!(
        values(&poll_n(task.as_mut(), 3).await?),
        ["old-1", "old-2", "old-3"]
    );

    std::fs::rename(&path, dir.path().join("app.log.1"))?;
    std::fs::write(&path, "new-line-1\nnew-line-2\nnew-line-3\n")?;
    let records = poll_n(task.as_mut(), 3).await?;
    assert_eq!(
        values(&records),
        ["new-line-1", "new-line-2", "new-line-3"],
        "the new file is read from byte 0: no line lost, no fragment"
    );
    assert_eq!(offset_field(&records, "position"), [11, 22, 33]);
    assert_eq!(offset_field(&records, "ino"), vec![ino(&path)?; 3]);
    assert!(poll_times(task.as_mut(), 2).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn the_rotated_file_is_read_to_its_end_before_the_new_one() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("app.log");
    let rotated = dir.path().join("app.log.1");
    std::fs::write(&path, "old-1\n")?;

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path, None))
        .await?;
    assert_eq!(values(&poll_n(task.as_mut(), 1).await?), ["old-1"]);

    // Written just before the rotation and not read yet; and a writer still holding the old file
    // finishes its last line after the move.
    append(&path, b"old-2\nold-")?;
    std::fs::rename(&path, &rotated)?;
    append(&rotated, b"3\n")?;
    std::fs::write(&path, "new-1\n")?;

    let records = poll_n(task.as_mut(), 3).await?;
    assert_eq!(values(&records), ["old-2", "old-3", "new-1"]);
    assert_eq!(offset_field(&records, "position"), [12, 18, 6]);
    let old_ino = ino(&rotated)?;
    let new_ino = ino(&path)?;
    assert_eq!(offset_field(&records, "ino"), [old_ino, old_ino, new_ino]);
    Ok(())
}

#[tokio::test]
async fn an_empty_new_file_waits_while_the_old_one_still_grows() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("app.log");
    let rotated = dir.path().join("app.log.1");
    std::fs::write(&path, "old-1\n")?;

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path, None))
        .await?;
    assert_eq!(values(&poll_n(task.as_mut(), 1).await?), ["old-1"]);

    // logrotate's `create`: the new file exists, empty, while the program still writes the old one
    // until it is told to reopen.
    std::fs::rename(&path, &rotated)?;
    std::fs::write(&path, "")?;
    assert!(poll_times(task.as_mut(), 2).await?.is_empty());
    append(&rotated, b"old-2\n")?;
    assert_eq!(values(&poll_n(task.as_mut(), 1).await?), ["old-2"]);
    append(&path, b"new-1\n")?;
    assert_eq!(values(&poll_n(task.as_mut(), 1).await?), ["new-1"]);
    Ok(())
}

#[tokio::test]
async fn a_file_moved_away_is_still_read_to_its_end() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("app.log");
    let rotated = dir.path().join("app.log.1");
    std::fs::write(&path, "old-1\n")?;

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path, None))
        .await?;
    assert_eq!(values(&poll_n(task.as_mut(), 1).await?), ["old-1"]);
    std::fs::rename(&path, &rotated)?;
    append(&rotated, b"old-2\n")?;
    assert_eq!(values(&poll_n(task.as_mut(), 1).await?), ["old-2"]);
    std::fs::write(&path, "new-1\n")?;
    assert_eq!(values(&poll_n(task.as_mut(), 1).await?), ["new-1"]);
    Ok(())
}

#[tokio::test]
async fn copytruncate_then_a_quick_rewrite_fails_clearly_under_the_fail_policy() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("app.log");
    std::fs::write(&path, "old-1\nold-2\nold-3\n")?;

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path, Some("fail")))
        .await?;
    assert_eq!(poll_n(task.as_mut(), 3).await?.len(), 3);

    std::fs::copy(&path, dir.path().join("app.log.1"))?;
    truncate_in_place(&path)?;
    append(&path, b"new-line-1\nnew-line-2\nnew-line-3\n")?;
    let error = match task.poll().await {
        Err(e) => e,
        Ok(records) => return Err(format!("expected an error, got {:?}", values(&records)).into()),
    };
    let message = error.to_string();
    for needle in ["app.log", "copytruncate", "file.truncation.policy=restart"] {
        assert!(
            message.contains(needle),
            "{needle:?} missing from: {message}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn copytruncate_then_a_quick_rewrite_restarts_from_zero_by_default() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("app.log");
    std::fs::write(&path, "old-1\nold-2\nold-3\n")?;

    // No `file.truncation.policy`: `restart` is the default (issue 11: a shrunk file restarts from 0).
    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path, None))
        .await?;
    assert_eq!(poll_n(task.as_mut(), 3).await?.len(), 3);

    std::fs::copy(&path, dir.path().join("app.log.1"))?;
    truncate_in_place(&path)?;
    append(&path, b"new-line-1\nnew-line-2\nnew-line-3\n")?;
    let records = poll_n(task.as_mut(), 3).await?;
    assert_eq!(values(&records), ["new-line-1", "new-line-2", "new-line-3"]);
    assert_eq!(offset_field(&records, "position"), [11, 22, 33]);
    Ok(())
}

#[tokio::test]
async fn offsets_carry_the_identity_of_the_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("app.log");
    std::fs::write(&path, "a\nbb\n")?;

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path, None))
        .await?;
    let records = poll_n(task.as_mut(), 2).await?;
    let meta = std::fs::metadata(&path)?;
    assert_eq!(offset_field(&records, "position"), [2, 5]);
    assert_eq!(offset_field(&records, "dev"), [meta.dev() as i64; 2]);
    assert_eq!(offset_field(&records, "ino"), [meta.ino() as i64; 2]);
    assert_eq!(
        offset_field(&records, "fp_len"),
        [2, 5],
        "the bytes read so far"
    );
    let fp = offset_field(&records, "fp");
    assert!(fp.iter().all(|&f| f >= 0) && fp[0] != fp[1], "{fp:?}");
    Ok(())
}

#[tokio::test]
async fn rotation_while_stopped_reads_the_rest_of_the_rotated_file_then_the_new_one() -> TestResult
{
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("app.log");
    std::fs::write(&path, "old-1\nold-2\n")?;
    let offsets = Offsets::new();
    {
        let (mut task, _) = offsets
            .start(&FileStreamSourceConnector, file_config(&path, None))
            .await?;
        let records = poll_n(task.as_mut(), 2).await?;
        // Only the first line was delivered before the stop.
        offsets.commit(&records[..1]).await?;
        task.stop().await?;
    }
    // While stopped: a line more, then rotated away and replaced by a longer file.
    append(&path, b"old-3\n")?;
    std::fs::rename(&path, dir.path().join("app.log.1"))?;
    std::fs::write(&path, "new-line-1\nnew-line-2\n")?;

    let (mut task, _) = offsets
        .start(&FileStreamSourceConnector, file_config(&path, None))
        .await?;
    let records = poll_n(task.as_mut(), 4).await?;
    assert_eq!(
        values(&records),
        ["old-2", "old-3", "new-line-1", "new-line-2"]
    );
    assert_eq!(offset_field(&records, "position"), [12, 18, 11, 22]);
    assert!(poll_times(task.as_mut(), 2).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn rotated_while_stopped_with_no_new_file_yet_the_rotated_file_is_finished_first()
-> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("app.log");
    std::fs::write(&path, "old-1\nold-2\n")?;
    let offsets = Offsets::new();
    {
        let (mut task, _) = offsets
            .start(&FileStreamSourceConnector, file_config(&path, None))
            .await?;
        let records = poll_n(task.as_mut(), 2).await?;
        offsets.commit(&records[..1]).await?;
        task.stop().await?;
    }
    std::fs::rename(&path, dir.path().join("app.log.1"))?;

    let (mut task, _) = offsets
        .start(&FileStreamSourceConnector, file_config(&path, None))
        .await?;
    assert_eq!(values(&poll_n(task.as_mut(), 1).await?), ["old-2"]);
    std::fs::write(&path, "new-1\n")?;
    assert_eq!(values(&poll_n(task.as_mut(), 1).await?), ["new-1"]);
    Ok(())
}

#[tokio::test]
async fn a_different_file_at_the_path_after_a_restart_is_read_from_zero() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("app.log");
    std::fs::write(&path, "old-1\nold-2\n")?;
    let offsets = Offsets::new();
    {
        let (mut task, _) = offsets
            .start(&FileStreamSourceConnector, file_config(&path, None))
            .await?;
        let records = poll_n(task.as_mut(), 2).await?;
        offsets.commit(&records).await?;
        task.stop().await?;
    }
    // Rotated away out of reach (compressed, moved elsewhere) and replaced by a longer file: never
    // read from the old position.
    let elsewhere = tempfile::tempdir()?;
    std::fs::rename(&path, elsewhere.path().join("app.log.1"))?;
    std::fs::write(&path, "new-line-1\nnew-line-2\n")?;

    let (mut task, _) = offsets
        .start(&FileStreamSourceConnector, file_config(&path, None))
        .await?;
    let records = poll_n(task.as_mut(), 2).await?;
    assert_eq!(values(&records), ["new-line-1", "new-line-2"]);
    Ok(())
}

#[tokio::test]
async fn a_kafka_connect_offset_without_identity_resumes_at_its_position() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("app.log");
    std::fs::write(&path, "one\ntwo\nthree\n")?;
    let offsets = Offsets::new();
    let partition = ConnectMap::new().with("filename", path.to_str().unwrap_or_default())?;
    offsets
        .write(vec![(
            partition,
            Some(ConnectMap::new().with("position", 4)?),
        )])
        .await?;

    let (mut task, _) = offsets
        .start(&FileStreamSourceConnector, file_config(&path, None))
        .await?;
    let records = poll_n(task.as_mut(), 2).await?;
    assert_eq!(values(&records), ["two", "three"]);
    assert_eq!(offset_field(&records, "position"), [8, 14]);
    assert_eq!(offset_field(&records, "ino"), [ino(&path)?; 2]);
    Ok(())
}

#[tokio::test]
async fn an_identity_offset_of_the_same_file_resumes_at_its_position() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("app.log");
    std::fs::write(&path, "one\ntwo\n")?;
    let offsets = Offsets::new();
    {
        let (mut task, _) = offsets
            .start(&FileStreamSourceConnector, file_config(&path, None))
            .await?;
        let records = poll_n(task.as_mut(), 2).await?;
        // Only the first line was delivered before the stop.
        offsets.commit(&records[..1]).await?;
        task.stop().await?;
    }
    append(&path, b"three\n")?;
    let (mut task, _) = offsets
        .start(&FileStreamSourceConnector, file_config(&path, None))
        .await?;
    assert_eq!(values(&poll_n(task.as_mut(), 2).await?), ["two", "three"]);
    Ok(())
}

#[tokio::test]
async fn a_deleted_and_recreated_file_is_read_from_zero_under_the_default_policy() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("app.log");
    std::fs::write(&path, "before deletion, a long line\n")?;

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path, None))
        .await?;
    assert_eq!(poll_n(task.as_mut(), 1).await?.len(), 1);
    std::fs::remove_file(&path)?;
    assert!(poll_times(task.as_mut(), 2).await?.is_empty());
    std::fs::write(&path, "after\n")?;
    let records = poll_n(task.as_mut(), 1).await?;
    assert_eq!(values(&records), ["after"]);
    assert_eq!(offset_field(&records, "position"), [6]);
    Ok(())
}

#[tokio::test]
async fn a_file_rewritten_in_place_while_stopped_is_a_truncation() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("app.log");
    std::fs::write(&path, "old-1\nold-2\n")?;
    let offsets = Offsets::new();
    {
        let (mut task, _) = offsets
            .start(&FileStreamSourceConnector, file_config(&path, None))
            .await?;
        let records = poll_n(task.as_mut(), 2).await?;
        offsets.commit(&records).await?;
        task.stop().await?;
    }
    // copytruncate and a rewrite longer than the committed position, while stopped: same inode.
    truncate_in_place(&path)?;
    append(&path, b"new-line-1\nnew-line-2\n")?;

    let Err(error) = offsets
        .start(&FileStreamSourceConnector, file_config(&path, Some("fail")))
        .await
    else {
        return Err("start must fail under the fail policy".into());
    };
    let message = error.to_string();
    assert!(
        message.contains("rewritten in place") && message.contains("position 12"),
        "{message}"
    );
    let (mut task, _) = offsets
        .start(
            &FileStreamSourceConnector,
            file_config(&path, Some("restart")),
        )
        .await?;
    assert_eq!(
        values(&poll_n(task.as_mut(), 2).await?),
        ["new-line-1", "new-line-2"]
    );
    Ok(())
}
