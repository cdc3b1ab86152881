//! Two `ferry` workers running the same connector on one PostgreSQL offsets table: the second one's
//! task is refused (FAILED, naming the other worker's session) instead of both reading and writing
//! everything; the first keeps running, and once it is gone the second can take over.

mod pg_source_support;
mod postgres_support;
mod rest_support;
mod support;

use std::path::PathBuf;

use pg_source_support::{Pg, connector, value_i64};
use postgres_support::PgTable;
use rest_support::Api;
use serde_json::Value;
use support::{Ferry, SinkTail, Workspace, read_sink};

/// A worker file of `ws` keeping its offsets in `offsets`.
fn worker(ws: &Workspace, offsets: &PgTable) -> PathBuf {
    let sink = format!("file:{}", ws.sink_path().display());
    let storage = offsets.worker_entries();
    let mut entries = vec![
        ("listeners", "http://127.0.0.1:0"),
        ("sink", sink.as_str()),
        ("offset.flush.interval.ms", "100"),
    ];
    entries.extend(storage.iter().map(|(k, v)| (*k, v.as_str())));
    ws.properties("worker.properties", &entries)
}

fn ids(ws: &Workspace) -> Vec<i64> {
    read_sink(&ws.sink_path())
        .iter()
        .map(|l| value_i64(l, "id"))
        .collect()
}

fn task_state(api: &Api, name: &str) -> Value {
    api.get(&format!("/connectors/{name}/status")).json()["tasks"][0].clone()
}

#[test]
fn a_second_worker_running_the_same_connector_is_refused() {
    let pg = Pg::connect();
    let table = pg.table("twoworkers", "id int primary key");
    pg.execute(&format!(
        "INSERT INTO {} SELECT generate_series(1, 5)",
        table.name
    ));
    let offsets = PgTable::new("ferry_two_workers");
    let (ws1, ws2) = (Workspace::new(), Workspace::new());
    let extra = [("incrementing.column.name", "id")];
    let props1 = connector(&ws1, "pg-twice", &table.name, "incrementing", &extra);
    let props2 = connector(&ws2, "pg-twice", &table.name, "incrementing", &extra);

    let mut first = Ferry::standalone(&ws1, "first", &worker(&ws1, &offsets), &[&props1]);
    SinkTail::new(&ws1.sink_path()).wait_for(&mut first, 5);

    let mut second = Ferry::standalone(&ws2, "second", &worker(&ws2, &offsets), &[&props2]);
    let api = Api::new(&second.rest_url());
    let task = second.wait_until("the second worker's task FAILED", || {
        let task = task_state(&api, "pg-twice");
        (task["state"] == "FAILED").then_some(task)
    });
    let trace = task["trace"].as_str().unwrap_or_default();
    assert!(
        trace.contains("\"pg-twice\"")
            && trace.contains("in use by another Ferry worker")
            && trace.contains("pid"),
        "the trace says why and who holds it: {trace}"
    );
    assert!(ids(&ws2).is_empty(), "the second worker read nothing");
    assert!(first.is_running() && second.is_running());

    // The first worker keeps reading.
    pg.execute(&format!("INSERT INTO {} VALUES (6)", table.name));
    SinkTail::new(&ws1.sink_path()).wait_for(&mut first, 6);
    first.terminate_cleanly();

    // Once the first is gone, a restart of the second's task takes over from the committed offsets.
    pg.execute(&format!("INSERT INTO {} VALUES (7)", table.name));
    let restarted = api.post("/connectors/pg-twice/restart?includeTasks=true", None);
    assert_eq!(restarted.status, 202, "{restarted:?}");
    SinkTail::new(&ws2.sink_path()).wait_for(&mut second, 1);
    second.terminate_cleanly();
    assert_eq!(ids(&ws1), (1..=6).collect::<Vec<_>>());
    assert_eq!(
        ids(&ws2),
        vec![7],
        "resumed after the first worker's last committed row"
    );
}
