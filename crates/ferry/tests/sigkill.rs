//! Crash-resume: `ferry standalone` running SequenceSource into the file sink is SIGKILLed at random
//! moments, round after round, then run to completion.
//!
//! After every kill (with the process dead) the committed offsets are read through `ferry offsets
//! list` (which must open the store cleanly) and the sink's length is recorded once a torn last line is
//! dropped (the next run's sink truncates it on open). The lines between two recorded lengths are what
//! one run wrote. The checks:
//!
//! - every run resumes each partition exactly at its committed seq + 1 (0 when nothing is committed)
//!   and writes it without gaps, so duplicates cover only records not yet committed;
//! - a committed offset is never ahead of what the sink holds, and never goes backwards;
//! - in the end every (partition, seq) below `records.per.partition` is in the sink.
//!
//! The kill rounds run with an effectively unbounded `records.per.partition`, so no run is over before
//! its kill whatever the machine's speed; the final run is given a limit a little past the highest
//! seq written, which it must reach. Set `FERRY_TEST_SEED` to replay a run's kill times.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use support::{Ferry, SinkTail, Workspace, complete_len, killed_by_sigkill, run};

const CONNECTOR: &str = "sequence-source";
const PARTITIONS: i64 = 4;
const ROUNDS: usize = 20;
/// How far past the highest seq written during the kill rounds the final run must go.
const FINAL_EXTRA: i64 = 500;

/// xorshift64*: enough randomness for kill times, reproducible from the printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn seed() -> u64 {
    if let Ok(text) = std::env::var("FERRY_TEST_SEED") {
        return text.trim().parse().expect("FERRY_TEST_SEED is a u64");
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    // Truncation is fine: any nonzero value seeds xorshift.
    (nanos as u64) | 1
}

fn connector_config(ws: &Workspace, records_per_partition: i64) -> std::path::PathBuf {
    let partitions = PARTITIONS.to_string();
    let records = records_per_partition.to_string();
    ws.properties(
        "sequence.properties",
        &[
            ("name", CONNECTOR),
            ("connector.class", "SequenceSource"),
            ("partitions", &partitions),
            ("records.per.partition", &records),
            ("topic", "seq"),
            ("batch.size", "16"),
        ],
    )
}

/// Partition → committed seq, from `ferry offsets list`; also checks the store opened cleanly.
fn committed_offsets(ws: &Workspace, worker: &std::path::Path) -> BTreeMap<i64, i64> {
    let out = run(
        ws.path(),
        &[
            "offsets",
            "list",
            "--worker",
            &support::path_str(worker),
            "--connector",
            CONNECTOR,
        ],
    );
    assert!(
        out.status.success() && !out.stderr.contains("ERROR") && !out.stderr.contains("corrupt"),
        "the offsets file must open cleanly after a SIGKILL; `ferry offsets list` exited {}:\n{}",
        out.status,
        out.stderr
    );
    support::offsets_of(&out.stdout)
        .iter()
        .map(|entry| {
            let p = entry["partition"]["partition"].as_i64();
            let seq = entry["offset"]["seq"].as_i64();
            match (p, seq) {
                (Some(p), Some(seq)) => (p, seq),
                _ => panic!("unexpected offsets entry {entry}"),
            }
        })
        .collect()
}

/// (partition, seq) of one sink line, checking the whole line is the record SequenceSource emits.
fn parse(line: &str) -> (i64, i64) {
    let value: Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("sink line is not JSON ({e}): {line:?}"));
    let p = value["value"]["partition"].as_i64();
    let seq = value["value"]["seq"].as_i64();
    let (Some(p), Some(seq)) = (p, seq) else {
        panic!("not a SequenceSource record: {line}")
    };
    let expected = format!(
        "{{\"topic\":\"seq\",\"key\":null,\"value\":{{\"partition\":{p},\"seq\":{seq}}},\"headers\":[],\
         \"timestamp\":null,\"source_partition\":{{\"partition\":{p}}},\"source_offset\":{{\"seq\":{seq}}}}}"
    );
    assert_eq!(line, expected, "the sink line of partition {p} seq {seq}");
    (p, seq)
}

#[test]
fn sigkill_at_random_moments_resumes_from_committed_offsets_without_loss() {
    sigkill_rounds(50);
}

/// The same with `offset.flush.interval.ms=0` (continuous commits): every guarantee holds as well.
#[test]
fn sigkill_with_continuous_commits_resumes_from_committed_offsets_without_loss() {
    sigkill_rounds(0);
}

/// The kill rounds and checks with commits every `flush_interval_ms` (0: continuous).
fn sigkill_rounds(flush_interval_ms: u64) {
    let seed = seed();
    eprintln!("sigkill: seed {seed} (rerun with FERRY_TEST_SEED={seed})");
    let mut rng = Rng(seed);
    let ws = Workspace::new();
    let worker = ws.worker(flush_interval_ms, &[]);
    let sink_path = ws.sink_path();
    let unbounded = connector_config(&ws, 1_000_000_000_000);

    // starts[k]: where run k's lines begin in the sink; committed[k]: the offsets run k started from.
    let mut starts: Vec<u64> = vec![0];
    let mut committed: Vec<BTreeMap<i64, i64>> = vec![BTreeMap::new()];
    for round in 0..ROUNDS {
        let mut ferry = Ferry::standalone(&ws, &format!("run{round}"), &worker, &[&unbounded]);
        let wait = Duration::from_millis(100 + rng.next() % 601);
        std::thread::sleep(wait);
        let status = ferry.kill();
        assert!(
            killed_by_sigkill(status),
            "round {round}: ferry was still running when killed after {wait:?} (it exited {status}); \
             log:\n{}",
            ferry.log()
        );
        let offsets = committed_offsets(&ws, &worker);
        let previous = committed.last().cloned().unwrap_or_default();
        for (p, seq) in &previous {
            let now = offsets.get(p).copied();
            assert!(
                now.is_some_and(|now| now >= *seq),
                "round {round}: the committed offset of partition {p} went backwards: {seq} -> {now:?}"
            );
        }
        starts.push(complete_len(&sink_path));
        committed.push(offsets);
    }

    // The final run: a limit past everything written so far, reached by every partition.
    let lines_so_far = {
        let mut tail = SinkTail::new(&sink_path);
        tail.read_new();
        tail.lines.truncate(
            tail.lines
                .iter()
                .scan(0u64, |at, l| {
                    *at += l.len() as u64 + 1;
                    Some(*at)
                })
                .take_while(|at| *at <= starts[ROUNDS])
                .count(),
        );
        tail.lines
    };
    let highest = lines_so_far.iter().map(|l| parse(l).1).max().unwrap_or(-1);
    let limit = highest + 1 + FINAL_EXTRA;
    let bounded = connector_config(&ws, limit);
    let mut ferry = Ferry::standalone(&ws, "final", &worker, &[&bounded]);
    let mut tail = SinkTail::from(&sink_path, starts[ROUNDS]);
    let mut last: BTreeMap<i64, i64> = BTreeMap::new();
    ferry.wait_until(
        format!("every partition to reach seq {}", limit - 1),
        || {
            let before = tail.lines.len();
            tail.read_new();
            for line in &tail.lines[before..] {
                let (p, seq) = parse(line);
                last.insert(p, seq);
            }
            (last.len() == PARTITIONS as usize && last.values().all(|s| *s == limit - 1))
                .then_some(())
        },
    );
    ferry.terminate_cleanly();

    // Split the sink into the runs' segments and check each against the offsets it started from.
    let content = std::fs::read_to_string(&sink_path).expect("read the sink");
    assert!(
        content.ends_with('\n'),
        "after a clean stop the sink ends with a complete line"
    );
    let total = content.len() as u64;
    starts.push(total);
    let mut present: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
    let mut highest_written: BTreeMap<i64, i64> = BTreeMap::new();
    let mut duplicates = 0u64;
    for run in 0..=ROUNDS {
        let (from, to) = (starts[run] as usize, starts[run + 1] as usize);
        assert!(from <= to, "run {run}: the sink shrank ({from} -> {to})");
        assert!(
            from == 0 || content.as_bytes()[from - 1] == b'\n',
            "run {run} starts at a line boundary"
        );
        let mut next: BTreeMap<i64, i64> = BTreeMap::new();
        for line in content[from..to].lines() {
            let (p, seq) = parse(line);
            let expected = match next.get(&p) {
                Some(n) => *n,
                // The run's first record of p: right after p's committed offset.
                None => committed[run].get(&p).map_or(0, |c| c + 1),
            };
            assert_eq!(
                seq,
                expected,
                "run {run} (seed {seed}), partition {p}: expected seq {expected} (committed at the run's \
                 start: {:?}), found {seq}",
                committed[run].get(&p)
            );
            next.insert(p, seq + 1);
            let seen = present.entry(p).or_default();
            let slot = usize::try_from(seq).expect("seq >= 0");
            if seen.len() <= slot {
                seen.resize(slot + 1, 0);
            }
            seen[slot] += 1;
            if seen[slot] > 1 {
                duplicates += 1;
            }
            let high = highest_written.entry(p).or_insert(-1);
            *high = (*high).max(seq);
        }
        // The offsets committed by the time this run was killed refer to records it had written.
        if run < ROUNDS {
            for (p, seq) in &committed[run + 1] {
                let high = highest_written.get(p).copied().unwrap_or(-1);
                assert!(
                    *seq <= high,
                    "after run {run} (seed {seed}) partition {p} has committed seq {seq}, but the sink holds \
                     only up to seq {high}: an offset was committed before its record was delivered"
                );
            }
        }
    }
    for p in 0..PARTITIONS {
        let seen = present.get(&p).map(Vec::as_slice).unwrap_or_default();
        let limit = usize::try_from(limit).expect("limit fits usize");
        assert_eq!(
            seen.len(),
            limit,
            "partition {p}: seqs beyond records.per.partition"
        );
        if let Some(missing) = seen.iter().position(|n| *n == 0) {
            panic!("partition {p}: seq {missing} is missing from the sink (seed {seed})");
        }
    }
    let final_offsets = committed_offsets(&ws, &worker);
    assert_eq!(
        final_offsets,
        (0..PARTITIONS)
            .map(|p| (p, limit - 1))
            .collect::<BTreeMap<_, _>>(),
        "after the final clean stop every partition is committed at its last seq"
    );
    eprintln!(
        "sigkill (offset.flush.interval.ms={flush_interval_ms}): {ROUNDS} kills, {} records per \
         partition, {} lines, {duplicates} duplicates",
        limit,
        content.lines().count()
    );
}
