//! The schemas the built-in connectors declare for their record values (what JsonConverter writes
//! with `schemas.enable=true`).

mod common;

use common::{Offsets, TestResult, config, poll_n};
use ferry_api::{Field, Schema};
use ferry_connectors::{FileStreamSourceConnector, SequenceSourceConnector};

#[tokio::test]
async fn file_stream_source_lines_are_required_strings_without_key() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("in.txt");
    std::fs::write(&path, "a\nb\n")?;
    let cfg = config(&[
        ("file", path.to_str().unwrap_or_default()),
        ("topic", "lines"),
    ]);
    let (mut task, _) = Offsets::new()
        .start(&FileStreamSourceConnector, cfg)
        .await?;
    let records = poll_n(task.as_mut(), 2).await?;
    for record in &records {
        // Kafka Connect's FileStreamSourceTask: Schema.STRING_SCHEMA, no key schema, no key.
        assert_eq!(record.value_schema.as_deref(), Some(&Schema::string()));
        assert!(!Schema::string().optional);
        assert_eq!((&record.key, &record.key_schema), (&None, &None));
    }
    Ok(())
}

#[tokio::test]
async fn sequence_source_values_are_structs_of_partition_and_seq() -> TestResult {
    let cfg = config(&[
        ("partitions", "2"),
        ("records.per.partition", "2"),
        ("topic", "seq"),
    ]);
    let (mut task, _) = Offsets::new().start(&SequenceSourceConnector, cfg).await?;
    let records = poll_n(task.as_mut(), 4).await?;
    let expected = Schema::unnamed_struct([
        Field::new("partition", Schema::int32()),
        Field::new("seq", Schema::int64()),
    ]);
    assert_eq!(SequenceSourceConnector::value_schema(), expected);
    for record in &records {
        assert_eq!(record.value_schema.as_deref(), Some(&expected));
    }
    Ok(())
}
