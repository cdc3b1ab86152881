//! The file and stdout sinks: exact JSON lines, acknowledgement only after the write, order, crash
//! repair on open, flush, poisoning after a failed write.

mod log_capture;
use log_capture::{Logs, SharedBuf};

use std::future::Future as _;
use std::io::{self, Write};
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use ferry_api::{ConnectMap, Header, SourceRecord, Value};
use ferry_runtime::sink::file::FileSink;
use ferry_runtime::sink::line::{LineFormat, record_json_line};
use ferry_runtime::sink::stdout::StdoutSink;
use ferry_runtime::sink::{Delivery, PendingDelivery, RecordSink};
use serde_json::json;

const LONG: Duration = Duration::from_secs(30);

/// A record as `FileStreamSource` emits it: value = the line, partition = file, offset = position.
fn file_stream_record(line: &str, position: i64) -> SourceRecord {
    let partition = ConnectMap::new()
        .with("filename", "/tmp/in.txt")
        .expect("partition");
    let offset = ConnectMap::new()
        .with("position", position)
        .expect("offset");
    SourceRecord::from_maps(Some(partition), Some(offset), "lines", Some(json!(line)))
}

fn numbered(task: usize, seq: usize) -> SourceRecord {
    let partition = ConnectMap::new()
        .with("task", task as i64)
        .expect("partition");
    let offset = ConnectMap::new().with("seq", seq as i64).expect("offset");
    SourceRecord::from_maps(
        Some(partition),
        Some(offset),
        "numbers",
        Some(json!({"task": task, "seq": seq})),
    )
}

fn line(record: &SourceRecord) -> String {
    String::from_utf8(record_json_line(record)).expect("utf-8")
}

fn read(path: &Path) -> String {
    String::from_utf8(std::fs::read(path).expect("read sink file")).expect("utf-8")
}

/// Polls a delivery once without waiting: `Some` if it is already resolved.
async fn poll_once(delivery: &mut PendingDelivery) -> Option<Delivery> {
    tokio::task::unconstrained(std::future::poll_fn(|cx| {
        Poll::Ready(match Pin::new(&mut *delivery).poll(cx) {
            Poll::Ready(d) => Some(d),
            Poll::Pending => None,
        })
    }))
    .await
}

const GOLDEN_FILE_STREAM: &str = concat!(
    r#"{"topic":"lines","key":null,"value":"hello \"world\"","headers":[],"timestamp":null,"#,
    r#""source_partition":{"filename":"/tmp/in.txt"},"source_offset":{"position":14}}"#,
    "\n"
);

const GOLDEN_FULL: &str = concat!(
    r#"{"topic":"events","key":{"id":7},"value":{"text":"a\nb é"},"#,
    r#""headers":[{"key":"trace","value":"abc"},{"key":"n","value":1}],"timestamp":1700000000000,"#,
    r#""source_partition":null,"source_offset":{"seq":3,"ratio":1.0,"tag":"x\u0001"}}"#,
    "\n"
);

fn full_record() -> SourceRecord {
    let offset = ConnectMap::new()
        .with("seq", 3_i64)
        .and_then(|m| m.with("ratio", Value::Float64(1.0)))
        .and_then(|m| m.with("tag", "x\u{1}"))
        .expect("offset");
    let mut record = SourceRecord::from_maps(
        None,
        Some(offset),
        "events",
        Some(json!({"text": "a\nb é"})),
    )
    .with_key(json!({"id": 7}))
    .with_timestamp(1_700_000_000_000);
    record.headers = vec![
        Header {
            key: "trace".into(),
            value: json!("abc"),
        },
        Header {
            key: "n".into(),
            value: json!(1),
        },
    ];
    record
}

#[test]
fn lines_are_exact() {
    assert_eq!(
        line(&file_stream_record("hello \"world\"", 14)),
        GOLDEN_FILE_STREAM
    );
    assert_eq!(line(&full_record()), GOLDEN_FULL);
    let bare = SourceRecord::from_maps(None, None, "t", None);
    assert_eq!(
        line(&bare),
        "{\"topic\":\"t\",\"key\":null,\"value\":null,\"headers\":[],\"timestamp\":null,\"source_partition\":null,\"source_offset\":null}\n"
    );
}

#[tokio::test]
async fn sink_format_value_writes_the_value_alone_as_kafka_connects_file_stream_sink() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("out.txt");
    let sink = FileSink::open_with(&path, LineFormat::Value)
        .await
        .expect("open sink");
    let records = [
        // A string as it is (quotes and all), anything else as compact JSON, no value as null.
        file_stream_record("hello \"world\"", 14),
        full_record(),
        SourceRecord::builder("t").build(),
    ];
    let mut offsets = Vec::new();
    for record in &records {
        let delivered = sink
            .send(record)
            .await
            .expect("send")
            .await
            .expect("delivery");
        offsets.push(delivered.offset);
    }
    let full_value =
        serde_json::to_string(full_record().value.as_ref().expect("a value")).expect("json");
    let expected = format!("hello \"world\"\n{full_value}\nnull\n");
    assert_eq!(read(&path), expected);
    // Offsets are byte positions of the lines, as in the JSON format.
    let second = i64::try_from("hello \"world\"\n".len()).expect("small");
    assert_eq!(
        offsets,
        [
            Some(0),
            Some(second),
            Some(second + full_value.len() as i64 + 1)
        ]
    );
    sink.close().await.expect("close");
    assert_eq!(
        LineFormat::parse(" VALUE "),
        Some(LineFormat::Value),
        "any case, trimmed"
    );
    assert_eq!(LineFormat::parse("text"), None);
}

#[tokio::test]
async fn file_sink_writes_golden_lines_with_byte_offsets() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("out.jsonl");
    let sink = FileSink::open(&path).await.expect("open sink");
    assert_eq!(sink.describe(), format!("file {}", path.display()));
    let first = sink
        .send(&file_stream_record("hello \"world\"", 14))
        .await
        .expect("send")
        .await
        .expect("delivery");
    let second = sink
        .send(&full_record())
        .await
        .expect("send")
        .await
        .expect("delivery");
    assert_eq!(read(&path), format!("{GOLDEN_FILE_STREAM}{GOLDEN_FULL}"));
    assert_eq!(
        (first.topic.as_str(), first.partition, first.offset),
        ("lines", None, Some(0))
    );
    assert_eq!(
        (second.topic.as_str(), second.partition, second.offset),
        ("events", None, Some(GOLDEN_FILE_STREAM.len() as i64))
    );
    sink.close().await.expect("close");

    // Reopening appends after what is there, with offsets continuing.
    let sink = FileSink::open(&path).await.expect("open sink");
    let third = sink
        .send(&file_stream_record("x", 1))
        .await
        .expect("send")
        .await
        .expect("delivery");
    assert_eq!(
        third.offset,
        Some((GOLDEN_FILE_STREAM.len() + GOLDEN_FULL.len()) as i64)
    );
}

#[tokio::test]
async fn a_delivery_resolves_only_once_its_line_is_in_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("out.jsonl");
    let sink = FileSink::open(&path).await.expect("open sink");
    let mut pending = Vec::new();
    for i in 0..2_000 {
        let record = file_stream_record(&format!("line {i}"), i);
        pending.push((
            record_json_line(&record),
            sink.send(&record).await.expect("send"),
        ));
    }
    let mut expected_offset = 0_i64;
    for (line, delivery) in pending {
        let metadata = delivery.await.expect("delivery");
        // Read the file the moment the delivery resolved: the line must already be there.
        let contents = std::fs::read(&path).expect("read sink file");
        let start =
            usize::try_from(metadata.offset.expect("file sink offset")).expect("offset fits usize");
        assert_eq!(metadata.offset, Some(expected_offset));
        assert_eq!(&contents[start..start + line.len()], &line[..]);
        expected_offset += line.len() as i64;
    }
    assert_eq!(
        std::fs::metadata(&path).expect("stat sink file").len(),
        expected_offset as u64
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_is_kept_across_10_000_concurrent_sends() {
    const TASKS: usize = 100;
    const PER_TASK: usize = 100;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("out.jsonl");
    let sink = Arc::new(FileSink::open(&path).await.expect("open sink"));
    let mut handles = Vec::new();
    for task in 0..TASKS {
        let sink = Arc::clone(&sink);
        handles.push(tokio::spawn(async move {
            let mut deliveries = Vec::new();
            for seq in 0..PER_TASK {
                deliveries.push((seq, sink.send(&numbered(task, seq)).await.expect("send")));
            }
            let mut offsets = Vec::new();
            for (seq, delivery) in deliveries {
                offsets.push((
                    task,
                    seq,
                    delivery
                        .await
                        .expect("delivery")
                        .offset
                        .expect("file sink offset"),
                ));
            }
            offsets
        }));
    }
    let mut acknowledged = Vec::new();
    for handle in handles {
        acknowledged.extend(handle.await.expect("task"));
    }
    let contents = read(&path);
    let lines: Vec<&str> = contents.lines().collect();
    assert_eq!(lines.len(), TASKS * PER_TASK);
    // Each task's records appear in its send order.
    let mut next_seq = vec![0_u64; TASKS];
    let mut offset_of_line = std::collections::HashMap::new();
    let mut position = 0_i64;
    for line in &lines {
        let value: serde_json::Value = serde_json::from_str(line).expect("line is JSON");
        let task = value["value"]["task"].as_u64().expect("number") as usize;
        let seq = value["value"]["seq"].as_u64().expect("number");
        assert_eq!(seq, next_seq[task], "task {task} out of order");
        next_seq[task] += 1;
        offset_of_line.insert((task, seq as usize), position);
        position += line.len() as i64 + 1;
    }
    // Every delivery's offset is where its line starts.
    assert_eq!(acknowledged.len(), TASKS * PER_TASK);
    for (task, seq, offset) in acknowledged {
        assert_eq!(offset_of_line[&(task, seq)], offset);
    }
}

#[tokio::test]
async fn a_torn_last_line_is_truncated_on_open() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("out.jsonl");
    let intact = format!("{GOLDEN_FILE_STREAM}{GOLDEN_FULL}");
    let torn = &GOLDEN_FILE_STREAM[..40];
    std::fs::write(&path, format!("{intact}{torn}")).expect("write fixture");

    let (logs, _guard) = Logs::capture();
    let sink = FileSink::open(&path).await.expect("open sink");
    let logs = logs.text();
    assert!(logs.contains("WARN"), "{logs}");
    assert!(
        logs.contains(&path.display().to_string()) && logs.contains("40 bytes"),
        "{logs}"
    );
    assert_eq!(read(&path), intact);

    let metadata = sink
        .send(&file_stream_record("next", 1))
        .await
        .expect("send")
        .await
        .expect("delivery");
    assert_eq!(metadata.offset, Some(intact.len() as i64));
    assert_eq!(
        read(&path),
        format!("{intact}{}", line(&file_stream_record("next", 1)))
    );
}

#[tokio::test]
async fn a_file_that_is_only_a_torn_line_becomes_empty() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("out.jsonl");
    std::fs::write(&path, "{\"top").expect("write fixture");
    let sink = FileSink::open(&path).await.expect("open sink");
    assert_eq!(read(&path), "");
    assert_eq!(
        sink.send(&file_stream_record("a", 1))
            .await
            .expect("send")
            .await
            .expect("delivery")
            .offset,
        Some(0)
    );
}

#[tokio::test]
async fn a_foreign_unterminated_file_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "my notes\nno newline at the end").expect("write fixture");
    let err = FileSink::open(&path).await.expect_err("should fail");
    assert!(!err.is_retriable());
    let message = err.to_string();
    assert!(
        message.contains(&path.display().to_string()) && message.contains("refusing to truncate"),
        "{message}"
    );
    assert_eq!(read(&path), "my notes\nno newline at the end");
}

#[tokio::test]
async fn flush_waits_for_every_record_sent() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("out.jsonl");
    let sink = FileSink::open(&path).await.expect("open sink");
    let mut pending = Vec::new();
    for i in 0..5_000 {
        pending.push(
            sink.send(&file_stream_record("flushed", i))
                .await
                .expect("send"),
        );
    }
    sink.flush(LONG).await.expect("flush");
    for delivery in &mut pending {
        assert!(
            matches!(poll_once(delivery).await, Some(Ok(_))),
            "a delivery was still pending after flush"
        );
    }
    assert_eq!(read(&path).lines().count(), 5_000);
    // Nothing pending: returns at once.
    sink.flush(Duration::from_millis(100))
        .await
        .expect("flush with nothing pending");
}

#[tokio::test]
async fn dropping_the_sink_drains_the_queue() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("out.jsonl");
    let sink = FileSink::open(&path).await.expect("open sink");
    let mut pending = Vec::new();
    for i in 0..500 {
        pending.push(
            sink.send(&file_stream_record("drained", i))
                .await
                .expect("send"),
        );
    }
    drop(sink);
    for delivery in pending {
        delivery.await.expect("delivery");
    }
    assert_eq!(read(&path).lines().count(), 500);
    // The writer released the file: it can be opened again.
    let reopened = tokio::time::timeout(LONG, async {
        loop {
            match FileSink::open(&path).await {
                Ok(sink) => break sink,
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    });
    reopened
        .await
        .expect("the writer thread never released the file")
        .close()
        .await
        .expect("close");
}

#[tokio::test]
async fn a_file_has_one_sink_at_a_time() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("out.jsonl");
    let first = FileSink::open(&path).await.expect("open sink");
    let err = FileSink::open(&path).await.expect_err("should fail");
    assert!(err.to_string().contains("another sink"), "{err}");
    tokio::time::timeout(LONG, first.close())
        .await
        .expect("close in time")
        .expect("close");
    FileSink::open(&path).await.expect("open sink");
}

#[tokio::test]
async fn opening_a_directory_fails_naming_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let err = FileSink::open(dir.path()).await.expect_err("should fail");
    assert!(
        err.to_string().contains(&dir.path().display().to_string()),
        "{err}"
    );
}

#[tokio::test]
async fn a_failed_write_poisons_the_sink() {
    let path = Path::new("/dev/full");
    // A test that passed without its device would test nothing.
    assert!(
        path.exists(),
        "this test needs Linux's full device /dev/full (create it with: mknod -m 666 /dev/full c 1 7)"
    );
    let sink = FileSink::open(path).await.expect("open sink");
    let first = sink
        .send(&file_stream_record("lost", 1))
        .await
        .expect("send")
        .await
        .expect_err("delivery should fail");
    assert!(!first.is_retriable());
    let message = first.to_string();
    assert!(
        message.contains("/dev/full") && message.contains("write failed"),
        "{message}"
    );

    let later = sink
        .send(&file_stream_record("refused", 2))
        .await
        .err()
        .expect("poisoned sink accepted a record");
    assert!(!later.is_retriable());
    assert!(later.to_string().contains("/dev/full"), "{later}");
    assert!(sink.flush(LONG).await.is_err());

    // Reopening (a task restart) gives a fresh writer, which /dev/full fails again.
    assert!(sink.reopen_if_failed().await.expect("reopen"), "reopened");
    assert!(
        !sink.reopen_if_failed().await.expect("reopen"),
        "a healthy sink is not reopened"
    );
    let again = sink
        .send(&file_stream_record("again", 3))
        .await
        .expect("the reopened sink accepts a record")
        .await
        .expect_err("delivery should fail");
    assert!(again.to_string().contains("write failed"), "{again}");
    assert!(sink.close().await.is_err());
}

#[tokio::test]
async fn stdout_sink_writes_the_same_lines_without_offsets() {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let sink =
        StdoutSink::with_writer("test output", SharedBuf(Arc::clone(&buffer))).expect("sink");
    assert_eq!(sink.describe(), "test output");
    let first = sink
        .send(&file_stream_record("hello \"world\"", 14))
        .await
        .expect("send")
        .await
        .expect("delivery");
    let second = sink
        .send(&full_record())
        .await
        .expect("send")
        .await
        .expect("delivery");
    assert_eq!(
        (first.topic.as_str(), first.partition, first.offset),
        ("lines", None, None)
    );
    assert_eq!(second.offset, None);
    sink.flush(LONG).await.expect("flush");
    let written = String::from_utf8(buffer.lock().expect("buffer").clone()).expect("utf-8");
    assert_eq!(written, format!("{GOLDEN_FILE_STREAM}{GOLDEN_FULL}"));
    sink.close().await.expect("close");
}

#[tokio::test]
async fn stdout_sink_is_poisoned_by_a_closed_output() {
    struct Closed;
    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let sink = StdoutSink::with_writer("stdout", Closed).expect("sink");
    let err = sink
        .send(&file_stream_record("x", 1))
        .await
        .expect("send")
        .await
        .expect_err("delivery should fail");
    assert!(
        !err.is_retriable() && err.to_string().starts_with("stdout: write failed"),
        "{err}"
    );
    assert!(sink.send(&file_stream_record("y", 2)).await.is_err());
}

#[tokio::test]
async fn real_stdout_sink_acknowledges() {
    let sink = StdoutSink::new().expect("sink");
    assert_eq!(sink.describe(), "stdout");
    let metadata = sink
        .send(&file_stream_record("to stdout", 1))
        .await
        .expect("send")
        .await
        .expect("delivery");
    assert_eq!(metadata.offset, None);
}
