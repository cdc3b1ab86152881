//! PostgresSource backfilling 100 000 rows through the real `ferry` binary, SIGKILLed again and again
//! in the middle of the backfill, then run to the end: every row arrives at least once.
//!
//! The table is read in `timestamp+incrementing` mode and every row has the same timestamp (one
//! `INSERT … SELECT generate_series`, one `now()`), so every resume lands inside that group and relies
//! on `(ts = ? AND id > ?) OR ts > ?`. Each run is killed once it has written a random number of rows
//! (so always during the backfill, whatever the machine's speed). After each kill the committed offset
//! is read with `ferry offsets list`; the checks:
//!
//! - every run starts right after the offset committed when it started and writes ids without gaps;
//! - a committed offset never goes backwards and never points past what the sink holds;
//! - in the end every id 1..=100 000 is in the sink, and the final offset is the last row.
//!
//! Set `FERRY_TEST_SEED` to replay a run's kill points.

mod pg_source_support;
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use pg_source_support::{Pg, connector, offset_incrementing, value_i64};
use serde_json::Value;
use support::{Ferry, SinkTail, Workspace, complete_len, killed_by_sigkill, run};

const ROWS: i64 = 100_000;
const KILLS: usize = 6;
const NAME: &str = "pg-backfill";

/// xorshift64*, reproducible from the printed seed.
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
    (nanos as u64) | 1
}

/// The committed `incrementing` offset (None before any commit); checks the store opened cleanly.
fn committed(ws: &Workspace, worker: &Path) -> Option<i64> {
    let out = run(
        ws.path(),
        &[
            "offsets",
            "list",
            "--worker",
            &support::path_str(worker),
            "--connector",
            NAME,
        ],
    );
    assert!(
        out.status.success(),
        "`ferry offsets list` after a SIGKILL exited {}:\n{}",
        out.status,
        out.stderr
    );
    let offsets = support::offsets_of(&out.stdout);
    assert!(offsets.len() <= 1, "one table, one partition: {offsets:?}");
    offsets.first().map(|entry| {
        let offset = &entry["offset"];
        offset["incrementing"]
            .as_i64()
            .unwrap_or_else(|| panic!("unexpected offset {entry}"))
    })
}

/// The id of a sink line, checking its offset is the position right after it.
fn id_of(line: &str) -> i64 {
    let value: Value = support::parse_line(line);
    let id = value_i64(&value, "id");
    assert_eq!(
        offset_incrementing(&value),
        id,
        "the offset of row {id}: {line}"
    );
    id
}

#[test]
fn sigkill_during_a_100k_row_backfill_loses_no_row() {
    let seed = seed();
    eprintln!("postgres_sigkill: seed {seed} (rerun with FERRY_TEST_SEED={seed})");
    let mut rng = Rng(seed);
    let pg = Pg::connect();
    let table = pg.table(
        "backfill",
        "id bigint primary key, updated timestamptz not null default now(), payload text",
    );
    pg.execute(&format!(
        "INSERT INTO {} (id, payload) SELECT n, md5(n::text) FROM generate_series(1, {ROWS}) n",
        table.name
    ));
    assert_eq!(
        pg.scalar(&format!(
            "SELECT count(DISTINCT updated) FROM {}",
            table.name
        )),
        1,
        "all rows share one timestamp"
    );
    let ws = Workspace::new();
    let worker = ws.worker(50, &[]);
    let sink = ws.sink_path();
    let connector = connector(
        &ws,
        NAME,
        &table.name,
        "timestamp+incrementing",
        &[
            ("incrementing.column.name", "id"),
            ("timestamp.column.name", "updated"),
            ("batch.max.rows", "500"),
        ],
    );

    // starts[k]: where run k's lines begin in the sink; offsets[k]: the offset run k started from.
    let mut starts: Vec<u64> = vec![0];
    let mut offsets: Vec<Option<i64>> = vec![None];
    for round in 0..KILLS {
        let from = *starts.last().unwrap_or(&0);
        let target = 4000 + (rng.next() % 8000) as usize;
        let mut ferry = Ferry::standalone(&ws, &format!("run{round}"), &worker, &[&connector]);
        let mut tail = SinkTail::from(&sink, from);
        ferry.spin_until(format!("round {round}: {target} rows in the sink"), || {
            tail.read_new();
            (tail.lines.len() >= target).then_some(())
        });
        let status = ferry.kill();
        assert!(
            killed_by_sigkill(status),
            "round {round}: ferry exited by itself ({status}); log:\n{}",
            ferry.log()
        );
        let now = committed(&ws, &worker);
        let before = *offsets.last().unwrap_or(&None);
        assert!(
            now >= before,
            "round {round}: the committed offset went backwards: {before:?} -> {now:?}"
        );
        starts.push(complete_len(&sink));
        offsets.push(now);
    }
    let last_kill_offset = offsets.last().copied().flatten().unwrap_or(0);
    assert!(
        last_kill_offset < ROWS,
        "every kill happened during the backfill (last committed offset {last_kill_offset})"
    );

    // The final run reads to the end.
    let from = *starts.last().unwrap_or(&0);
    let mut ferry = Ferry::standalone(&ws, "final", &worker, &[&connector]);
    let mut tail = SinkTail::from(&sink, from);
    ferry.wait_until(format!("row {ROWS} in the sink"), || {
        let before = tail.lines.len();
        tail.read_new();
        tail.lines[before..]
            .iter()
            .any(|l| id_of(l) == ROWS)
            .then_some(())
    });
    ferry.terminate_cleanly();
    starts.push(complete_len(&sink));
    assert_eq!(
        committed(&ws, &worker),
        Some(ROWS),
        "the final clean stop commits the last row"
    );

    // Each run's segment: starts right after its starting offset, contiguous.
    let content = std::fs::read_to_string(&sink).expect("read the sink");
    let mut seen = vec![0u32; usize::try_from(ROWS).expect("fits") + 1];
    let mut per_run = BTreeMap::new();
    for run in 0..starts.len() - 1 {
        let (from, to) = (starts[run] as usize, starts[run + 1] as usize);
        let mut expected = offsets.get(run).copied().flatten().unwrap_or(0) + 1;
        let mut count = 0usize;
        for line in content[from..to].lines() {
            let id = id_of(line);
            assert_eq!(
                id,
                expected,
                "run {run} (seed {seed}): expected id {expected} (started from offset {:?})",
                offsets.get(run)
            );
            expected += 1;
            seen[usize::try_from(id).expect("positive")] += 1;
            count += 1;
        }
        // What was committed when this run was killed had been written by then.
        if let Some(Some(next)) = offsets.get(run + 1) {
            assert!(
                *next < expected,
                "after run {run} (seed {seed}) offset {next} is committed but the sink holds only up to {}",
                expected - 1
            );
        }
        per_run.insert(run, count);
    }
    if let Some(missing) = (1..seen.len()).find(|&id| seen[id] == 0) {
        panic!("row {missing} never arrived (seed {seed})");
    }
    let duplicates: u32 = seen.iter().map(|n| n.saturating_sub(1)).sum();
    eprintln!(
        "postgres_sigkill: {KILLS} kills, {ROWS} rows, lines per run {per_run:?}, {duplicates} duplicates"
    );
}
