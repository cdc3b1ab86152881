//! FileStreamSource reading: byte positions, partial lines, tailing, resuming, globs and batches.

mod common;

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use common::{Offsets, TestResult, config, offset_field, poll_n, poll_times, values};
use ferry_api::{ConnectMap, SourceConnector};
use ferry_connectors::{FileStreamSourceConnector, TASK_FILES};

fn append(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(bytes)
}

fn file_config(path: &Path) -> ferry_api::Config {
    config(&[
        ("file", path.to_str().unwrap_or_default()),
        ("topic", "lines"),
    ])
}

#[tokio::test]
async fn reads_lines_with_byte_positions_multibyte_utf8_and_crlf() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("in.txt");
    let lines = ["héllo", "wörld 🚀", "", "日本語", "last"];
    let content = "héllo\r\nwörld 🚀\n\n日本語\r\nlast\n";
    std::fs::write(&path, content)?;

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path))
        .await?;
    let records = poll_n(task.as_mut(), lines.len()).await?;

    assert_eq!(values(&records), lines);
    let mut expected = Vec::new();
    let mut pos = 0;
    for line in content.split_inclusive('\n') {
        pos += line.len() as i64;
        expected.push(pos);
    }
    assert_eq!(
        offset_field(&records, "position"),
        expected,
        "positions are bytes after each terminator"
    );
    assert_eq!(*expected.last().unwrap_or(&0), content.len() as i64);
    let partition = ConnectMap::new().with("filename", path.to_str().unwrap_or_default())?;
    for record in &records {
        assert_eq!(record.source_partition.as_ref(), Some(&partition));
        assert_eq!(record.topic, "lines");
        assert_eq!(record.key, None);
    }
    Ok(())
}

#[tokio::test]
async fn invalid_utf8_is_converted_lossily_and_positions_stay_exact() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("bin.txt");
    std::fs::write(&path, b"ok\n\xff\xfe bad\nnext\n")?;

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path))
        .await?;
    let records = poll_n(task.as_mut(), 3).await?;

    assert_eq!(values(&records), ["ok", "\u{fffd}\u{fffd} bad", "next"]);
    assert_eq!(offset_field(&records, "position"), [3, 10, 15]);
    Ok(())
}

#[tokio::test]
async fn partial_last_line_is_held_back_until_completed() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("in.txt");
    std::fs::write(&path, "a\nb")?;

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path))
        .await?;
    let records = poll_times(task.as_mut(), 3).await?;
    assert_eq!(values(&records), ["a"]);
    assert_eq!(offset_field(&records, "position"), [2]);

    append(&path, b"c\r")?; // still no terminator: "\r" alone does not end a line
    assert!(poll_times(task.as_mut(), 2).await?.is_empty());

    append(&path, b"\nd\n")?;
    let records = poll_n(task.as_mut(), 2).await?;
    assert_eq!(values(&records), ["bc", "d"]);
    assert_eq!(offset_field(&records, "position"), [6, 8]);
    Ok(())
}

#[tokio::test]
async fn tailing_picks_up_appended_lines() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("in.txt");
    std::fs::write(&path, "one\n")?;

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path))
        .await?;
    assert_eq!(values(&poll_n(task.as_mut(), 1).await?), ["one"]);

    let started = std::time::Instant::now();
    assert!(task.poll().await?.is_empty(), "nothing new: an empty batch");
    assert!(
        started.elapsed() >= Duration::from_millis(50),
        "an idle poll sleeps briefly"
    );

    append(&path, "two\nthree\n".as_bytes())?;
    let records = poll_n(task.as_mut(), 2).await?;
    assert_eq!(values(&records), ["two", "three"]);
    assert_eq!(offset_field(&records, "position"), [8, 14]);
    task.stop().await?;
    Ok(())
}

#[tokio::test]
async fn resumes_from_a_stored_position_with_exactly_the_remaining_lines() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("in.txt");
    std::fs::write(&path, "one\ntwo\nthree\n")?;
    let offsets = Offsets::new();
    let partition = ConnectMap::new().with("filename", path.to_str().unwrap_or_default())?;
    offsets
        .write(vec![(
            partition,
            Some(ConnectMap::new().with("position", 4i64)?),
        )])
        .await?;

    let (mut task, reader) = offsets
        .start(&FileStreamSourceConnector, file_config(&path))
        .await?;
    let records = poll_times(task.as_mut(), 3).await?;
    assert_eq!(values(&records), ["two", "three"]);
    assert_eq!(offset_field(&records, "position"), [8, 14]);
    assert_eq!(reader.calls(), 1);
    Ok(())
}

#[tokio::test]
async fn committed_offsets_survive_a_restart_without_loss_or_duplicates() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("in.txt");
    std::fs::write(&path, "α\nβ\nγ\nδ\n")?;
    let offsets = Offsets::new();
    let cfg = file_config(&path);

    let (mut task, _) = offsets
        .start(&FileStreamSourceConnector, cfg.clone())
        .await?;
    let first = poll_n(task.as_mut(), 4).await?;
    offsets.commit(&first[..2]).await?; // only the first two were acknowledged
    task.stop().await?;

    let (mut task, _) = offsets.start(&FileStreamSourceConnector, cfg).await?;
    let again = poll_n(task.as_mut(), 2).await?;
    assert_eq!(values(&again), ["γ", "δ"]);
    assert_eq!(
        offset_field(&again, "position"),
        offset_field(&first[2..], "position")
    );
    Ok(())
}

#[tokio::test]
async fn a_missing_file_is_waited_for() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("later.txt");

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, file_config(&path))
        .await?;
    assert!(poll_times(task.as_mut(), 2).await?.is_empty());

    std::fs::write(&path, "here\n")?;
    assert_eq!(values(&poll_n(task.as_mut(), 1).await?), ["here"]);
    Ok(())
}

#[tokio::test]
async fn batch_size_limits_each_poll() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("in.txt");
    let content: String = (0..10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&path, content)?;
    let mut cfg = file_config(&path);
    cfg.insert("batch.size".into(), "3".into());

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, cfg)
        .await?;
    let mut sizes = Vec::new();
    let mut all = Vec::new();
    for _ in 0..5 {
        let batch = task.poll().await?;
        sizes.push(batch.len());
        all.extend(batch);
    }
    assert_eq!(sizes, [3, 3, 3, 1, 0]);
    assert_eq!(
        values(&all),
        (0..10).map(|i| format!("line {i}")).collect::<Vec<_>>()
    );
    Ok(())
}

#[tokio::test]
async fn dropping_pending_polls_loses_and_repeats_nothing() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("in.txt");
    std::fs::write(&path, "")?;
    let mut cfg = file_config(&path);
    cfg.insert("batch.size".into(), "2".into());

    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, cfg)
        .await?;
    let mut got = Vec::new();
    for i in 0..40 {
        append(&path, format!("l{i}\n").as_bytes())?;
        // A timeout shorter than the idle sleep drops many polls while they are pending.
        if let Ok(batch) = tokio::time::timeout(Duration::from_millis(5), task.poll()).await {
            got.extend(batch?);
        }
    }
    got.extend(poll_n(task.as_mut(), 40 - got.len()).await?);
    assert_eq!(
        values(&got),
        (0..40).map(|i| format!("l{i}")).collect::<Vec<_>>()
    );
    Ok(())
}

#[tokio::test]
async fn glob_spreads_files_and_each_task_resumes_all_its_files_in_one_read() -> TestResult {
    let dir = tempfile::tempdir()?;
    let names = ["a", "b", "c", "d", "e"];
    for name in names {
        std::fs::write(
            dir.path().join(format!("{name}.log")),
            format!("{name}1\n{name}2\n{name}3\n"),
        )?;
    }
    std::fs::write(dir.path().join("ignored.txt"), "x\n")?;
    let pattern = dir.path().join("*.log");
    let cfg = config(&[
        ("files", pattern.to_str().unwrap_or_default()),
        ("topic", "logs"),
        ("batch.size", "4"),
    ]);
    let path_of = |name: &str| {
        dir.path()
            .join(format!("{name}.log"))
            .to_str()
            .unwrap_or_default()
            .to_owned()
    };

    let tasks = FileStreamSourceConnector.task_configs(&cfg, 2)?;
    let shares: Vec<Vec<String>> = tasks
        .iter()
        .map(|t| serde_json::from_str(&t[TASK_FILES]))
        .collect::<Result<_, _>>()?;
    assert_eq!(
        shares,
        [
            vec![path_of("a"), path_of("c"), path_of("e")],
            vec![path_of("b"), path_of("d")]
        ]
    );
    assert_eq!(
        FileStreamSourceConnector.task_configs(&cfg, 10)?.len(),
        5,
        "at most one task per file"
    );

    // a.log was read up to "a1", d.log completely.
    let offsets = Offsets::new();
    let partition = |name: &str| ConnectMap::new().with("filename", path_of(name));
    offsets
        .write(vec![
            (
                partition("a")?,
                Some(ConnectMap::new().with("position", 3i64)?),
            ),
            (
                partition("d")?,
                Some(ConnectMap::new().with("position", 9i64)?),
            ),
        ])
        .await?;

    let (mut first, reader) = offsets
        .start(&FileStreamSourceConnector, tasks[0].clone())
        .await?;
    assert_eq!(
        reader.calls(),
        1,
        "one offsets() call for all of the task's files"
    );
    let mut records = Vec::new();
    for _ in 0..4 {
        let batch = first.poll().await?;
        assert!(batch.len() <= 4, "batch.size is per poll, across files");
        records.extend(batch);
    }
    let mut got = values(&records);
    got.sort();
    assert_eq!(got, ["a2", "a3", "c1", "c2", "c3", "e1", "e2", "e3"]);
    for record in &records {
        let filename = record
            .source_partition
            .as_ref()
            .and_then(|p| p.get("filename"))
            .and_then(|v| v.as_str());
        let line = values(std::slice::from_ref(record)).concat();
        assert_eq!(
            filename,
            Some(path_of(&line[..1]).as_str()),
            "partition is the expanded path"
        );
    }

    let (mut second, reader) = offsets
        .start(&FileStreamSourceConnector, tasks[1].clone())
        .await?;
    assert_eq!(reader.calls(), 1);
    assert_eq!(
        values(&poll_times(second.as_mut(), 2).await?),
        ["b1", "b2", "b3"]
    );
    Ok(())
}
