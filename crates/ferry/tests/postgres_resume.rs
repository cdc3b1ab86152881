//! PostgresSource through the real `ferry` binary: in each incremental mode a graceful restart
//! resumes exactly after the last delivered row — rows inserted (or, in the timestamp modes, updated)
//! while ferry was stopped arrive, and nothing already delivered is emitted again.

mod pg_source_support;
mod support;

use std::path::Path;
use std::time::Duration;

use pg_source_support::{Pg, PgTable, connector, value_i64};
use serde_json::{Value, json};
use support::{Ferry, SinkTail, Workspace, complete_len};

/// 2024-01-01T00:00:00Z in ms: row n has the timestamp BASE_MS + n seconds.
const BASE_MS: i64 = 1_704_067_200_000;

fn insert(pg: &Pg, table: &PgTable, ids: std::ops::RangeInclusive<i64>) {
    pg.execute(&format!(
        "INSERT INTO {} SELECT n, timestamptz '2024-01-01 00:00:00+00' + n * interval '1 second', 'row ' || n \
         FROM generate_series({}, {}) n",
        table.name,
        ids.start(),
        ids.end()
    ));
}

/// The offset PostgresSource writes after row `id` whose timestamp is `ts_ms`.
fn expected_offset(mode: &str, id: i64, ts_ms: i64) -> Value {
    match mode {
        "incrementing" => json!({"incrementing": id}),
        "timestamp" => json!({"timestamp_nanos": 0, "timestamp": ts_ms}),
        _ => json!({"timestamp_nanos": 0, "incrementing": id, "timestamp": ts_ms}),
    }
}

/// Runs ferry until the sink holds `total` lines, then SIGTERM; returns the lines this run wrote.
fn run_until(
    ws: &Workspace,
    run: &str,
    worker: &Path,
    connector: &Path,
    total: usize,
) -> Vec<Value> {
    let start = complete_len(&ws.sink_path());
    let mut ferry = Ferry::standalone(ws, run, worker, &[connector]);
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, total);
    ferry.terminate_cleanly();
    let mut tail = SinkTail::from(&ws.sink_path(), start);
    tail.read_new();
    tail.lines.iter().map(|l| support::parse_line(l)).collect()
}

fn resume_test(mode: &str, class: &str, extra: &[(&str, &str)]) {
    let pg = Pg::connect();
    let table = pg.table(
        &mode.replace('+', "_"),
        "id bigint primary key, ts timestamptz not null, note text",
    );
    insert(&pg, &table, 1..=50);
    let ws = Workspace::new();
    let worker = ws.worker(100, &[]);
    let name = format!("pg-{}", mode.replace('+', "-"));
    let mut props = vec![("connector.class", class), ("batch.max.rows", "7")];
    props.extend_from_slice(extra);
    let connector = connector(&ws, &name, &table.name, mode, &props);
    let partition = json!({"protocol": "1", "table": format!("public.{}", table.name)});
    let topic = format!("pg.{}", table.name);

    // Run 1: the 50 rows, in order, each with the offset right after it.
    let first = run_until(&ws, "run1", &worker, &connector, 50);
    let ids: Vec<i64> = first.iter().map(|l| value_i64(l, "id")).collect();
    assert_eq!(ids, (1..=50).collect::<Vec<_>>(), "run 1 ({mode})");
    for line in &first {
        let id = value_i64(line, "id");
        assert_eq!(line["topic"], json!(topic));
        assert_eq!(line["source_partition"], partition);
        assert_eq!(
            line["source_offset"],
            expected_offset(mode, id, BASE_MS + id * 1000)
        );
        assert_eq!(line["value"]["note"], json!(format!("row {id}")));
    }
    assert_eq!(
        first[0]["value"]["ts"],
        json!(BASE_MS + 1_000),
        "timestamptz values are Kafka Connect Timestamps: ms since the epoch"
    );
    let offsets = ws.list_offsets(&worker, &name);
    assert_eq!(
        offsets,
        vec![
            json!({"partition": partition, "offset": expected_offset(mode, 50, BASE_MS + 50_000)})
        ],
        "the clean stop committed the last row"
    );

    // While stopped: 30 new rows, and row 10 updated to the newest timestamp.
    insert(&pg, &table, 51..=80);
    pg.execute(&format!(
        "UPDATE {} SET ts = timestamptz '2024-02-01 00:00:00+00', note = 'updated' WHERE id = 10",
        table.name
    ));
    let updates_seen = mode != "incrementing";
    let mut expected: Vec<i64> = (51..=80).collect();
    if updates_seen {
        expected.push(10);
    }
    let second = run_until(&ws, "run2", &worker, &connector, 50 + expected.len());
    let ids: Vec<i64> = second.iter().map(|l| value_i64(l, "id")).collect();
    assert_eq!(ids, expected, "run 2 ({mode}) resumes exactly after row 50");
    if updates_seen {
        let updated = second.last().expect("the updated row");
        assert_eq!(updated["value"]["note"], json!("updated"));
        assert_eq!(updated["value"]["ts"], json!(1_706_745_600_000i64));
    }

    // Run 3: nothing changed, nothing is emitted, however many polls it makes.
    let before = complete_len(&ws.sink_path());
    let mut ferry = Ferry::standalone(&ws, "run3", &worker, &[&connector]);
    ferry.wait_for_log("resumes after");
    // Several rounds at poll.interval.ms=100.
    std::thread::sleep(Duration::from_millis(1500));
    ferry.terminate_cleanly();
    assert_eq!(
        complete_len(&ws.sink_path()),
        before,
        "run 3 ({mode}) emitted rows again:\n{}",
        support::read_lossy(&ws.sink_path())
    );
    let log = support::read_lossy(&ws.file("run3.stderr"));
    assert!(
        log.contains(&format!(
            "PostgresSource: table public.{} resumes after",
            table.name
        )),
        "{log}"
    );
}

#[test]
fn incrementing_mode_resumes_exactly_after_a_graceful_restart() {
    resume_test(
        "incrementing",
        "PostgresSource",
        &[("incrementing.column.name", "id")],
    );
}

#[test]
fn timestamp_mode_resumes_exactly_after_a_graceful_restart() {
    resume_test(
        "timestamp",
        "PostgresSource",
        &[("timestamp.column.name", "ts")],
    );
}

#[test]
fn timestamp_incrementing_mode_under_the_confluent_class_resumes_exactly_after_a_graceful_restart()
{
    resume_test(
        "timestamp+incrementing",
        "io.confluent.connect.jdbc.JdbcSourceConnector",
        &[
            ("incrementing.column.name", "id"),
            ("timestamp.column.name", "ts"),
            // A Kafka Connect JDBC URL with the user inside.
            (
                "connection.url",
                "jdbc:postgresql://127.0.0.1:5432/test?user=postgres",
            ),
        ],
    );
}
