//! PostgresCdcSource through the real `ferry` binary (standalone, JSON-lines sink), under
//! Debezium's class name: the initial snapshot, then streamed changes, then — after a graceful
//! stop and changes made while stopped — a restart that delivers exactly the new change.

mod pg_source_support;
mod support;

use pg_source_support::{Pg, SlotGuard};
use serde_json::Value;
use support::{Ferry, SinkTail, Workspace, read_sink};

fn ids(lines: &[Value]) -> Vec<(String, i64)> {
    lines
        .iter()
        .filter(|l| !l["value"].is_null())
        .map(|l| {
            (
                l["value"]["op"].as_str().unwrap_or("?").to_owned(),
                l["value"]["after"]["id"].as_i64().unwrap_or(-1),
            )
        })
        .collect()
}

#[test]
fn debeziums_class_snapshots_streams_and_resumes_into_a_json_lines_file() {
    let pg = Pg::connect();
    let table = pg.table("cdc", "id int primary key, note text");
    let _guard = SlotGuard {
        name: table.name.clone(),
    };
    pg.execute(&format!(
        "INSERT INTO public.{} VALUES (1, 'a'), (2, 'b')",
        table.name
    ));
    let ws = Workspace::new();
    let worker = ws.worker(100, &[]);
    let include = format!("public.{}", table.name);
    let connector = ws.properties(
        "cdc.properties",
        &[
            ("name", "cdc"),
            (
                "connector.class",
                "io.debezium.connector.postgresql.PostgresConnector",
            ),
            ("topic.prefix", "e2e"),
            ("database.hostname", "127.0.0.1"),
            ("database.port", "5432"),
            ("database.user", "postgres"),
            ("database.dbname", "test"),
            ("slot.name", &table.name),
            ("publication.name", &table.name),
            ("publication.autocreate.mode", "filtered"),
            ("table.include.list", &include),
            ("status.update.interval.ms", "200"),
        ],
    );

    let mut ferry = Ferry::standalone(&ws, "run1", &worker, &[&connector]);
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, 2);
    pg.execute(&format!(
        "INSERT INTO public.{} VALUES (3, 'c')",
        table.name
    ));
    pg.execute(&format!("DELETE FROM public.{} WHERE id = 1", table.name));
    // 2 snapshot rows, 1 insert, 1 delete and its tombstone.
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, 5);
    ferry.terminate_cleanly();

    pg.execute(&format!(
        "INSERT INTO public.{} VALUES (4, 'd')",
        table.name
    ));
    let mut ferry = Ferry::standalone(&ws, "run2", &worker, &[&connector]);
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, 6);
    // The worker's offset commits reach the slot: it advances past the change of row 4 (to its
    // commit), which only `commit()` after the offset flush can report.
    let change = read_sink(&ws.sink_path())
        .into_iter()
        .find(|l| l["value"]["after"]["id"] == 4)
        .and_then(|l| l["value"]["source"]["lsn"].as_i64())
        .expect("row 4 has a source.lsn");
    let flushed = format!(
        "SELECT COALESCE((confirmed_flush_lsn - '0/0')::bigint, 0) FROM pg_replication_slots \
         WHERE slot_name = '{}'",
        table.name
    );
    ferry.wait_until("the slot acknowledged through the commit cycle", || {
        (pg.scalar(&flushed) > change).then_some(())
    });
    ferry.terminate_cleanly();

    let lines = read_sink(&ws.sink_path());
    let topic = format!("e2e.public.{}", table.name);
    assert!(
        lines.iter().all(|l| l["topic"] == topic.as_str()),
        "{lines:#?}"
    );
    assert_eq!(
        ids(&lines),
        [
            ("r".into(), 1),
            ("r".into(), 2),
            ("c".into(), 3),
            ("d".into(), -1),
            ("c".into(), 4)
        ],
        "each change exactly once: {lines:#?}"
    );
    assert_eq!(
        lines.len(),
        6,
        "the delete's tombstone is the sixth line: {lines:#?}"
    );
    assert_eq!(
        lines[0]["source_partition"],
        serde_json::json!({"server": "e2e"})
    );
}

/// The `after.id` of a change line (`None` for tombstones and other ops).
fn change_id(line: &str) -> Option<i64> {
    let value: Value = serde_json::from_str(line).ok()?;
    (value["value"]["op"] == "c")
        .then(|| value["value"]["after"]["id"].as_i64())
        .flatten()
}

#[test]
fn sigkill_while_streaming_loses_no_change() {
    const ROUNDS: usize = 3;
    let pg = Pg::connect();
    let table = pg.table("cdckill", "id int primary key");
    let _guard = SlotGuard {
        name: table.name.clone(),
    };
    let ws = Workspace::new();
    let worker = ws.worker(50, &[]);
    let sink = ws.sink_path();
    let include = format!("public.{}", table.name);
    let connector = ws.properties(
        "cdc.properties",
        &[
            ("name", "cdc-kill"),
            ("connector.class", "PostgresCdcSource"),
            ("topic.prefix", "kill"),
            ("database.hostname", "127.0.0.1"),
            ("database.user", "postgres"),
            ("database.dbname", "test"),
            ("slot.name", &table.name),
            ("publication.name", &table.name),
            ("publication.autocreate.mode", "filtered"),
            ("table.include.list", &include),
            ("snapshot.mode", "no_data"),
            ("status.update.interval.ms", "100"),
        ],
    );
    let mut next_id = 1_i64;
    // Single-row transactions and 50-row ones, so kills land inside transactions too.
    let mut write = |pg: &Pg| {
        for _ in 0..5 {
            pg.execute(&format!(
                "INSERT INTO public.{} VALUES ({next_id})",
                table.name
            ));
            pg.execute(&format!(
                "INSERT INTO public.{} SELECT g FROM generate_series({}, {}) g",
                table.name,
                next_id + 1,
                next_id + 50
            ));
            next_id += 51;
        }
    };
    let slot_exists = |pg: &Pg| {
        pg.scalar(&format!(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{}'",
            table.name
        )) == 1
    };
    let mut starts = vec![0_u64];
    for round in 0..ROUNDS {
        let from = *starts.last().unwrap_or(&0);
        let mut ferry = Ferry::standalone(&ws, &format!("run{round}"), &worker, &[&connector]);
        ferry.wait_until("the replication slot", || slot_exists(&pg).then_some(()));
        if round == 0 {
            // The slot shows in pg_replication_slots while it is being created; rows committed
            // before its consistent point are not streamed (snapshot.mode=no_data), so the writes
            // wait for the point (a CI run wrote every row in between and waited forever).
            ferry.wait_for_log("consistent point");
        }
        write(&pg);
        let mut tail = SinkTail::from(&sink, from);
        ferry.spin_until(format!("round {round}: 100 new lines"), || {
            tail.read_new();
            (tail.lines.len() >= 100).then_some(())
        });
        let status = ferry.kill();
        assert!(
            support::killed_by_sigkill(status),
            "round {round}: {status}"
        );
        starts.push(support::complete_len(&sink));
    }
    let total = next_id - 1;
    let from = *starts.last().unwrap_or(&0);
    let mut ferry = Ferry::standalone(&ws, "final", &worker, &[&connector]);
    let mut tail = SinkTail::from(&sink, from);
    ferry.wait_until(format!("id {total} in the sink"), || {
        tail.read_new();
        tail.lines
            .iter()
            .any(|l| change_id(l) == Some(total))
            .then_some(())
    });
    ferry.terminate_cleanly();
    starts.push(support::complete_len(&sink));

    let content = std::fs::read_to_string(&sink).expect("read the sink");
    let mut seen = vec![0_u32; usize::try_from(total).expect("fits") + 1];
    for run in 0..starts.len() - 1 {
        let segment = &content[starts[run] as usize..starts[run + 1] as usize];
        let ids: Vec<i64> = segment.lines().filter_map(change_id).collect();
        // Within a run: the changes in commit order, none skipped.
        for pair in ids.windows(2) {
            assert_eq!(
                pair[1],
                pair[0] + 1,
                "run {run}: a gap or reordering: {pair:?}"
            );
        }
        for id in ids {
            seen[usize::try_from(id).expect("positive")] += 1;
        }
    }
    let missing: Vec<usize> = (1..seen.len()).filter(|&i| seen[i] == 0).collect();
    let repeated = (1..seen.len()).filter(|&i| seen[i] > 1).count();
    eprintln!(
        "{total} changes over {} runs; {repeated} delivered again after a kill (after the last commit)",
        starts.len() - 1
    );
    assert!(
        missing.is_empty(),
        "changes lost across SIGKILLs: {missing:?}"
    );
}

/// An example file of `examples/postgres-cdc` with `overrides` appended (a key set twice keeps its
/// last value).
fn example(ws: &Workspace, file: &str, overrides: &[(&str, &str)]) -> std::path::PathBuf {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/postgres-cdc")
        .join(file);
    let mut text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    for (k, v) in overrides {
        text.push_str(&format!("\n{k}={v}\n"));
    }
    ws.write(file, text)
}

/// The README's change data capture example on the embedded default (`examples/postgres-cdc`,
/// JSON lines in a file): the shipped files with only the database, table, slot and paths replaced.
/// The snapshot row, then an insert, an update and a delete with its tombstone, in Debezium's
/// envelope on topic `shop.public.<table>`.
#[test]
fn readme_cdc_example_captures_changes_into_json_lines() {
    let pg = Pg::connect();
    let table = pg.table(
        "orders",
        "id int primary key, total numeric(10, 2), note text",
    );
    let _guard = SlotGuard {
        name: table.name.clone(),
    };
    pg.execute(&format!(
        "INSERT INTO public.{} VALUES (1, 19.90, 'first')",
        table.name
    ));
    let ws = Workspace::new();
    let sink = format!("file:{}", ws.sink_path().display());
    let offsets = ws.offsets_path().display().to_string();
    let worker = example(
        &ws,
        "worker.properties",
        &[
            ("sink", &sink),
            ("offset.storage.file.filename", &offsets),
            ("listeners", "http://127.0.0.1:0"),
        ],
    );
    let include = format!("public.{}", table.name);
    let connector = example(
        &ws,
        "cdc.properties",
        &[
            ("database.hostname", "127.0.0.1"),
            ("database.password", ""),
            ("database.dbname", "test"),
            ("table.include.list", &include),
            ("slot.name", &table.name),
            ("publication.name", &table.name),
        ],
    );
    let mut ferry = Ferry::standalone(&ws, "example", &worker, &[&connector]);
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, 1);
    pg.execute(&format!(
        "INSERT INTO public.{t} VALUES (2, 5.00, 'second'); \
         UPDATE public.{t} SET note = 'changed' WHERE id = 1; DELETE FROM public.{t} WHERE id = 2",
        t = table.name
    ));
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, 5);
    ferry.terminate_cleanly();
    // The heartbeats (heartbeat.interval.ms) go to Debezium's heartbeat topic.
    let topic = format!("shop.public.{}", table.name);
    let (lines, heartbeats): (Vec<Value>, Vec<Value>) = read_sink(&ws.sink_path())
        .into_iter()
        .partition(|l| l["topic"] == topic.as_str());
    assert!(
        heartbeats
            .iter()
            .all(|l| l["topic"] == "__debezium-heartbeat.shop"),
        "{heartbeats:#?}"
    );
    assert_eq!(
        ids(&lines),
        [
            ("r".into(), 1),
            ("c".into(), 2),
            ("u".into(), 1),
            ("d".into(), -1)
        ],
        "{lines:#?}"
    );
    assert_eq!(lines[2]["value"]["after"]["note"], "changed");
}

/// The snapshot `op` and `after.id` of a line (`None` for anything but a snapshot read).
fn snapshot_id(line: &str) -> Option<i64> {
    let value: Value = serde_json::from_str(line).ok()?;
    (value["value"]["op"] == "r")
        .then(|| value["value"]["after"]["id"].as_i64())
        .flatten()
}

/// The `op` and `after` of an update line (`None` for any other line).
fn update(line: &str) -> Option<(i64, String)> {
    let value: Value = serde_json::from_str(line).ok()?;
    (value["value"]["op"] == "u").then(|| {
        let after = &value["value"]["after"];
        Some((after["id"].as_i64()?, after["note"].as_str()?.to_owned()))
    })?
}

/// SIGKILLed twice during the initial snapshot of 30 000 rows, then left to finish: each restart
/// resumes the snapshot after its last committed row instead of starting over (rows come again
/// only from after the last commit), every row reaches the sink, a row changed between a kill and
/// the restart — one already read, one not yet — arrives at its new value, and a change made after
/// the snapshot arrives once the stream takes over.
#[test]
fn sigkill_during_the_snapshot_resumes_it_and_loses_no_row() {
    const ROWS: i64 = 30_000;
    let pg = Pg::connect();
    let table = pg.table("cdcsnap", "id int primary key, note text");
    let _guard = SlotGuard {
        name: table.name.clone(),
    };
    pg.execute(&format!(
        "INSERT INTO public.{} SELECT g, repeat('x', 200) FROM generate_series(1, {ROWS}) g",
        table.name
    ));
    let ws = Workspace::new();
    let worker = ws.worker(50, &[]);
    let sink = ws.sink_path();
    let include = format!("public.{}", table.name);
    let connector = ws.properties(
        "cdc.properties",
        &[
            ("name", "cdc-snap"),
            ("connector.class", "PostgresCdcSource"),
            ("topic.prefix", "snap"),
            ("database.hostname", "127.0.0.1"),
            ("database.user", "postgres"),
            ("database.dbname", "test"),
            ("slot.name", &table.name),
            ("publication.name", &table.name),
            ("publication.autocreate.mode", "filtered"),
            ("table.include.list", &include),
            ("snapshot.mode", "initial"),
        ],
    );
    // The snapshot ids each run delivered, in order.
    let mut runs: Vec<Vec<i64>> = Vec::new();
    for round in 0..2 {
        let from = support::complete_len(&sink);
        let mut ferry = Ferry::standalone(&ws, &format!("run{round}"), &worker, &[&connector]);
        let mut tail = SinkTail::from(&sink, from);
        ferry.spin_until(format!("round {round}: snapshot rows in the sink"), || {
            tail.read_new();
            (tail
                .lines
                .iter()
                .filter(|l| snapshot_id(l).is_some())
                .count()
                >= 2_000)
                .then_some(())
        });
        let status = ferry.kill();
        assert!(
            support::killed_by_sigkill(status),
            "round {round}: {status}"
        );
        tail.read_new();
        let ids: Vec<i64> = tail.lines.iter().filter_map(|l| snapshot_id(l)).collect();
        assert!(
            !ids.contains(&ROWS),
            "round {round}: the snapshot had finished before the kill; the test needs more rows"
        );
        runs.push(ids);
        if round == 0 {
            // Changed while no task runs: row 1 was read already, row ROWS - 1 not yet.
            pg.execute(&format!(
                "UPDATE public.{} SET note = 'changed' WHERE id IN (1, {})",
                table.name,
                ROWS - 1
            ));
        }
    }
    let from = support::complete_len(&sink);
    let mut ferry = Ferry::standalone(&ws, "final", &worker, &[&connector]);
    let mut tail = SinkTail::from(&sink, from);
    ferry.wait_until("the whole snapshot", || {
        tail.read_new();
        tail.lines
            .iter()
            .any(|l| snapshot_id(l) == Some(ROWS))
            .then_some(())
    });
    pg.execute(&format!(
        "INSERT INTO public.{} VALUES ({}, 'after')",
        table.name,
        ROWS + 1
    ));
    ferry.wait_until("the change after the snapshot", || {
        tail.read_new();
        tail.lines
            .iter()
            .any(|l| change_id(l) == Some(ROWS + 1))
            .then_some(())
    });
    ferry.terminate_cleanly();
    runs.push(tail.lines.iter().filter_map(|l| snapshot_id(l)).collect());
    // Each restart went on from where the last one's commits stood: not from row 1, no gap.
    for (n, pair) in runs.windows(2).enumerate() {
        let before_max = pair[0].iter().copied().max().unwrap_or(0);
        let resumed_at = pair[1].first().copied().unwrap_or(0);
        assert!(
            resumed_at > 1,
            "run {}: the snapshot started over at row {resumed_at} instead of resuming",
            n + 1
        );
        assert!(
            resumed_at <= before_max + 1,
            "run {}: resumed at row {resumed_at}, but the run before it only reached {before_max}",
            n + 1
        );
    }
    let content = std::fs::read_to_string(&sink).expect("read the sink");
    let mut seen = vec![false; usize::try_from(ROWS).expect("fits") + 1];
    for id in content.lines().filter_map(snapshot_id) {
        seen[usize::try_from(id).expect("positive")] = true;
    }
    let missing: Vec<usize> = (1..seen.len()).filter(|&i| !seen[i]).collect();
    assert!(
        missing.is_empty(),
        "rows never delivered: {} of them",
        missing.len()
    );
    // Row 1 was read before the change: the stream (from the consistent point) brings it.
    let updates: Vec<(i64, String)> = content.lines().filter_map(update).collect();
    assert!(
        updates.contains(&(1, "changed".to_owned())),
        "the change to an already-read row never arrived: {updates:?}"
    );
    // Row ROWS - 1 was read after it: its last record, read or streamed, holds the new value.
    let last_note = content
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .rfind(|v| v["value"]["after"]["id"].as_i64() == Some(ROWS - 1))
        .and_then(|v| v["value"]["after"]["note"].as_str().map(str::to_owned));
    assert_eq!(last_note.as_deref(), Some("changed"));
}
