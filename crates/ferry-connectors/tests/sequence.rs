//! SequenceSource: exact values and offsets, resuming, bounds, task spreading, validation.

mod common;

use std::time::Duration;

use common::{Offsets, TestResult, config, offset_field, poll_n, poll_times};
use ferry_api::{ConfigIssue, ConnectMap, SourceConnector, SourceRecord, Value};
use ferry_connectors::{SequenceSourceConnector, TASK_PARTITIONS};
use serde_json::json;

fn keys(issues: &[ConfigIssue]) -> Vec<&str> {
    issues.iter().map(|i| i.key.as_str()).collect()
}

/// (partition, seq) of each record, from its value.
fn pairs(records: &[SourceRecord]) -> Vec<(i64, i64)> {
    records
        .iter()
        .map(|r| {
            let v = r.value.clone().unwrap_or_default();
            (
                v["partition"].as_i64().unwrap_or(-9),
                v["seq"].as_i64().unwrap_or(-9),
            )
        })
        .collect()
}

#[tokio::test]
async fn records_values_offsets_and_partitions_are_exact() -> TestResult {
    let cfg = config(&[
        ("partitions", "3"),
        ("records.per.partition", "4"),
        ("topic", "seq"),
        ("batch.size", "5"),
    ]);
    let (mut task, reader) = Offsets::new().start(&SequenceSourceConnector, cfg).await?;
    assert_eq!(reader.calls(), 1);

    let mut sizes = Vec::new();
    let mut records = Vec::new();
    for _ in 0..4 {
        let batch = task.poll().await?;
        sizes.push(batch.len());
        records.extend(batch);
    }
    assert_eq!(
        sizes,
        [5, 5, 2, 0],
        "batch.size per poll, then nothing once every partition is done"
    );
    let expected: Vec<(i64, i64)> = (0..4).flat_map(|n| (0..3).map(move |p| (p, n))).collect();
    assert_eq!(pairs(&records), expected, "round-robin over the partitions");
    for record in &records {
        let value = record.value.clone().unwrap_or_default();
        let (p, n) = (
            value["partition"].as_i64().unwrap_or(-1),
            value["seq"].as_i64().unwrap_or(-1),
        );
        assert_eq!(value, json!({"partition": p, "seq": n}));
        assert_eq!(
            record.source_partition,
            Some(ConnectMap::new().with("partition", p as i32)?)
        );
        assert_eq!(
            record.source_offset,
            Some(ConnectMap::new().with("seq", n)?)
        );
        assert_eq!(record.topic, "seq");
        assert_eq!(record.key, None);
    }
    Ok(())
}

#[tokio::test]
async fn resumes_each_partition_at_its_committed_seq_plus_one() -> TestResult {
    let offsets = Offsets::new();
    // Stored the way a JSON round trip returns them (64-bit), and as 32-bit: both must match.
    offsets
        .write(vec![
            (
                ConnectMap::new().with("partition", 0i64)?,
                Some(ConnectMap::new().with("seq", 2i64)?),
            ),
            (
                ConnectMap::new().with("partition", 1i32)?,
                Some(ConnectMap::new().with("seq", 0i32)?),
            ),
        ])
        .await?;
    let cfg = config(&[
        ("partitions", "3"),
        ("records.per.partition", "5"),
        ("topic", "seq"),
    ]);
    let (mut task, reader) = offsets.start(&SequenceSourceConnector, cfg).await?;
    assert_eq!(reader.calls(), 1, "one offsets() call for all partitions");

    let records = poll_times(task.as_mut(), 2).await?;
    let of = |p: i64| {
        pairs(&records)
            .into_iter()
            .filter(|(q, _)| *q == p)
            .map(|(_, n)| n)
            .collect::<Vec<_>>()
    };
    assert_eq!(of(0), [3, 4]);
    assert_eq!(of(1), [1, 2, 3, 4]);
    assert_eq!(of(2), [0, 1, 2, 3, 4]);
    Ok(())
}

#[tokio::test]
async fn a_restart_after_a_commit_continues_without_gap_or_duplicate() -> TestResult {
    let offsets = Offsets::new();
    let cfg = config(&[("partitions", "2"), ("topic", "seq"), ("batch.size", "7")]);
    let (mut task, _) = offsets.start(&SequenceSourceConnector, cfg.clone()).await?;
    let first = task.poll().await?;
    offsets.commit(&first).await?;
    task.stop().await?;

    let (mut task, _) = offsets.start(&SequenceSourceConnector, cfg).await?;
    let second = poll_n(task.as_mut(), 7).await?;
    let mut all = pairs(&first);
    all.extend(pairs(&second));
    for p in 0..2 {
        let seqs: Vec<i64> = all
            .iter()
            .filter(|(q, _)| *q == p)
            .map(|(_, n)| *n)
            .collect();
        assert_eq!(
            seqs,
            (0..seqs.len() as i64).collect::<Vec<_>>(),
            "partition {p}"
        );
    }
    assert_eq!(offset_field(&second, "seq"), [4, 3, 5, 4, 6, 5, 7]);
    Ok(())
}

#[tokio::test]
async fn unbounded_keeps_emitting() -> TestResult {
    let cfg = config(&[("topic", "seq"), ("batch.size", "100")]);
    let (mut task, _) = Offsets::new().start(&SequenceSourceConnector, cfg).await?;
    let records = poll_times(task.as_mut(), 5).await?;
    assert_eq!(offset_field(&records, "seq"), (0..500).collect::<Vec<_>>());
    Ok(())
}

#[tokio::test]
async fn zero_records_per_partition_emits_nothing() -> TestResult {
    let cfg = config(&[("topic", "seq"), ("records.per.partition", "0")]);
    let (mut task, _) = Offsets::new().start(&SequenceSourceConnector, cfg).await?;
    assert!(poll_times(task.as_mut(), 2).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn tasks_spread_partitions_round_robin_and_emit_only_their_own() -> TestResult {
    let cfg = config(&[
        ("partitions", "5"),
        ("records.per.partition", "2"),
        ("topic", "seq"),
    ]);
    let tasks = SequenceSourceConnector.task_configs(&cfg, 2)?;
    let shares: Vec<&str> = tasks.iter().map(|t| t[TASK_PARTITIONS].as_str()).collect();
    assert_eq!(shares, ["[0,2,4]", "[1,3]"]);
    assert_eq!(
        SequenceSourceConnector.task_configs(&cfg, 10)?.len(),
        5,
        "at most one task per partition"
    );
    assert_eq!(SequenceSourceConnector.task_configs(&cfg, 0)?.len(), 1);

    let offsets = Offsets::new();
    for (task_config, own) in tasks.into_iter().zip([vec![0, 2, 4], vec![1, 3]]) {
        let (mut task, reader) = offsets.start(&SequenceSourceConnector, task_config).await?;
        assert_eq!(reader.calls(), 1);
        let records = poll_times(task.as_mut(), 2).await?;
        let expected: Vec<(i64, i64)> = (0..2)
            .flat_map(|n| own.iter().map(move |&p| (p, n)))
            .collect();
        assert_eq!(pairs(&records), expected);
    }
    Ok(())
}

#[test]
fn validate_names_each_bad_key() {
    let c = SequenceSourceConnector;
    assert_eq!(c.validate(&config(&[("topic", "t")])), []);
    assert_eq!(keys(&c.validate(&config(&[]))), ["topic"]);
    assert_eq!(
        keys(&c.validate(&config(&[("topic", "t"), ("partitions", "0")]))),
        ["partitions"]
    );
    assert_eq!(
        keys(&c.validate(&config(&[("topic", "t"), ("partitions", "many")]))),
        ["partitions"]
    );
    assert_eq!(
        keys(&c.validate(&config(&[("topic", "t"), ("records.per.partition", "-1")]))),
        ["records.per.partition"]
    );
    assert_eq!(
        keys(&c.validate(&config(&[("topic", "t"), ("batch.size", "0")]))),
        ["batch.size"]
    );
    let mut all =
        keys(&c.validate(&config(&[("partitions", "-2"), ("batch.size", "z")]))).join(",");
    all.push(',');
    assert_eq!(all, "partitions,topic,batch.size,");
}

#[test]
fn alter_offsets_accepts_integers_and_rejects_the_rest() -> TestResult {
    let c = SequenceSourceConnector;
    let cfg = config(&[("topic", "t")]);
    let p = |v: Value| ConnectMap::new().with("partition", v);
    let seq = |v: Value| ConnectMap::new().with("seq", v).map(Some);
    let ok = vec![
        (p(Value::Int32(0))?, seq(Value::Int64(41))?),
        (p(Value::Int64(1))?, seq(Value::Int32(-1))?),
        (p(Value::Int8(2))?, None),
    ];
    assert!(c.alter_offsets(&cfg, &ok)?);
    let bad = vec![
        (ConnectMap::new().with("p", 0i32)?, None),
        (p(Value::String("0".into()))?, seq(Value::Int64(1))?),
        (p(Value::Int32(-1))?, seq(Value::Int64(1))?),
        (p(Value::Int32(0))?, seq(Value::Float64(1.0))?),
        (p(Value::Int32(0))?, seq(Value::Int64(-2))?),
        (
            p(Value::Int32(0))?,
            Some(ConnectMap::new().with("position", 1i64)?),
        ),
    ];
    for entry in bad {
        let shown = format!("{} {:?}", entry.0, entry.1);
        let Err(error) = c.alter_offsets(&cfg, std::slice::from_ref(&entry)) else {
            return Err(format!("{shown} must be rejected").into());
        };
        assert!(
            error.to_string().contains(&entry.0.to_string()),
            "{shown}: {error}"
        );
    }
    Ok(())
}

// ---- throughput (paused tokio time: exact and instant, no wall-clock timing) ----

#[test]
fn throughput_must_be_an_integer_and_any_sign_is_valid() {
    let c = SequenceSourceConnector;
    for bad in ["fast", "1.5", ""] {
        assert_eq!(
            keys(&c.validate(&config(&[("topic", "t"), ("throughput", bad)]))),
            ["throughput"],
            "{bad:?}"
        );
    }
    for good in ["-1", "-1000", "0", "1", "1000000"] {
        assert!(
            c.validate(&config(&[("topic", "t"), ("throughput", good)]))
                .is_empty(),
            "{good:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn records_at_a_throughput_take_their_time_and_every_poll_brings_records() -> TestResult {
    let cfg = config(&[
        ("partitions", "2"),
        ("topic", "seq"),
        ("batch.size", "1000"),
        ("throughput", "100"),
    ]);
    let (mut task, _) = Offsets::new().start(&SequenceSourceConnector, cfg).await?;
    let start = tokio::time::Instant::now();
    let (mut records, mut polls) = (0, 0);
    while records < 501 {
        let batch = task.poll().await?;
        assert!(
            !batch.is_empty(),
            "a paced poll waits for its record instead of returning none"
        );
        records += batch.len();
        polls += 1;
    }
    let elapsed = start.elapsed();
    // Record k is due k/100 s after the first: 501 records need 5 s, and no more when polled eagerly.
    assert_eq!(records, 501, "one record per poll when polled eagerly");
    assert_eq!(polls, 501);
    assert!(
        elapsed >= Duration::from_secs(5) && elapsed < Duration::from_millis(5_100),
        "{elapsed:?}"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_late_poll_gets_the_records_that_came_due_in_one_batch_up_to_batch_size() -> TestResult {
    let cfg = config(&[
        ("topic", "seq"),
        ("batch.size", "250"),
        ("throughput", "100"),
    ]);
    let (mut task, _) = Offsets::new().start(&SequenceSourceConnector, cfg).await?;
    assert_eq!(
        task.poll().await?.len(),
        1,
        "the first record is due at once"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(task.poll().await?.len(), 100, "a second's worth came due");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        task.poll().await?.len(),
        250,
        "a stalled consumer gets one batch, not the 1000 records of its stall"
    );
    let start = tokio::time::Instant::now();
    let next = task.poll().await?;
    assert_eq!(next.len(), 1);
    assert!(
        start.elapsed() >= Duration::from_millis(2_500),
        "the batch is paid for before the next record: {:?}",
        start.elapsed()
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn throughput_zero_emits_nothing_and_negative_is_unbounded() -> TestResult {
    let (mut stopped, _) = Offsets::new()
        .start(
            &SequenceSourceConnector,
            config(&[("topic", "seq"), ("throughput", "0")]),
        )
        .await?;
    for _ in 0..5 {
        assert!(stopped.poll().await?.is_empty());
    }
    let (mut unbounded, _) = Offsets::new()
        .start(
            &SequenceSourceConnector,
            config(&[
                ("topic", "seq"),
                ("batch.size", "300"),
                ("throughput", "-1"),
            ]),
        )
        .await?;
    let start = tokio::time::Instant::now();
    for _ in 0..3 {
        assert_eq!(unbounded.poll().await?.len(), 300);
    }
    assert_eq!(start.elapsed(), Duration::ZERO, "no pacing at all");
    Ok(())
}
