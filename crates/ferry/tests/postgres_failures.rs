//! PostgresSource when the database cannot be reached, through the real `ferry` binary: after
//! `connection.attempts` tries the task FAILS with a message naming the server and the cause (in the log and the REST status), the worker
//! keeps running, the password never appears, and a restart once the database is reachable resumes
//! from the committed offsets without loss or duplicates.

mod pg_source_support;
mod rest_support;
mod support;

use pg_source_support::{Pg, Proxy, closed_port, connector, value_i64};
use rest_support::Api;
use serde_json::Value;
use support::{Ferry, SinkTail, Workspace, read_sink};

const PASSWORD: &str = "not-in-any-log-7f3a";

/// The status of the connector's only task, once it is FAILED.
fn failed_task(ferry: &mut Ferry, api: &Api, name: &str) -> Value {
    ferry.wait_until("the task to be FAILED in the REST status", || {
        let status = api.get(&format!("/connectors/{name}/status")).json();
        (status["tasks"][0]["state"] == "FAILED").then(|| status["tasks"][0].clone())
    })
}

fn ids(ws: &Workspace) -> Vec<i64> {
    read_sink(&ws.sink_path())
        .iter()
        .map(|l| value_i64(l, "id"))
        .collect()
}

#[test]
fn unreachable_database_fails_the_task_clearly_and_a_restart_with_the_right_url_recovers() {
    let pg = Pg::connect();
    let table = pg.table("unreachable", "id int primary key");
    pg.execute(&format!(
        "INSERT INTO {} SELECT generate_series(1, 5)",
        table.name
    ));
    let port = closed_port();
    let ws = Workspace::new();
    let worker = ws.worker(100, &[]);
    let url = format!("jdbc:postgresql://127.0.0.1:{port}/test");
    let extra = [
        ("incrementing.column.name", "id"),
        ("connection.url", url.as_str()),
        ("connection.password", PASSWORD),
        // Tried connection.attempts (3) times, this far apart, before the task fails.
        ("connection.backoff.ms", "200"),
    ];
    let props = connector(&ws, "pg-down", &table.name, "incrementing", &extra);
    let mut ferry = Ferry::standalone(&ws, "run1", &worker, &[&props]);
    let api = Api::new(&ferry.rest_url());
    let plugins = api.get("/connector-plugins").expect(200);
    assert!(
        plugins.as_array().is_some_and(|p| p
            .iter()
            .any(|p| p["class"] == "io.confluent.connect.jdbc.JdbcSourceConnector")),
        "PostgresSource is listed under its Kafka Connect class: {plugins}"
    );
    let task = failed_task(&mut ferry, &api, "pg-down");
    let trace = task["trace"].as_str().unwrap_or_default().to_owned();
    eprintln!("the failed task's trace: {trace}");
    let server = format!("PostgreSQL at 127.0.0.1:{port}/test as user postgres");
    for fragment in [
        server.as_str(),
        "Connection refused",
        "restart the connector",
    ] {
        assert!(
            trace.contains(fragment),
            "the REST trace names {fragment:?}: {trace}"
        );
    }
    let log = ferry.wait_for_log("task stopped (FAILED)");
    let failure = log
        .lines()
        .find(|l| l.contains("ERROR") && l.contains("task failed"))
        .unwrap_or_else(|| panic!("no ERROR line for the failed task; log:\n{log}"));
    assert!(
        failure.contains(&format!("cannot connect to {server}"))
            && failure.contains("Connection refused"),
        "the ERROR names the server and the cause: {failure}"
    );
    assert!(
        ferry.is_running(),
        "a task failure does not stop the worker"
    );
    ferry.terminate_cleanly();
    assert!(
        !support::read_lossy(&ws.file("run1.stderr")).contains(PASSWORD),
        "the password is never logged"
    );

    // The right URL: the rows arrive.
    let fixed = connector(
        &ws,
        "pg-down",
        &table.name,
        "incrementing",
        &[
            ("incrementing.column.name", "id"),
            ("connection.password", PASSWORD),
        ],
    );
    let mut ferry = Ferry::standalone(&ws, "run2", &worker, &[&fixed]);
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, 5);
    ferry.terminate_cleanly();
    assert_eq!(ids(&ws), vec![1, 2, 3, 4, 5]);
    assert!(!support::read_lossy(&ws.file("run2.stderr")).contains(PASSWORD));
}

#[test]
fn database_lost_while_running_fails_the_task_and_a_rest_restart_resumes_when_it_is_back() {
    let pg = Pg::connect();
    let table = pg.table("lost", "id int primary key");
    pg.execute(&format!(
        "INSERT INTO {} SELECT generate_series(1, 20)",
        table.name
    ));
    let proxy = Proxy::start();
    let port = proxy.port;
    let ws = Workspace::new();
    let worker = ws.worker(100, &[]);
    let url = format!("jdbc:postgresql://127.0.0.1:{port}/test");
    let props = connector(
        &ws,
        "pg-lost",
        &table.name,
        "incrementing",
        &[
            ("incrementing.column.name", "id"),
            ("connection.url", url.as_str()),
            ("connection.backoff.ms", "200"),
        ],
    );
    let mut ferry = Ferry::standalone(&ws, "run", &worker, &[&props]);
    let api = Api::new(&ferry.rest_url());
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, 20);
    // Let the committer commit row 20 before the database goes away.
    ferry.wait_until("row 20 committed", || {
        let offsets = api.get("/connectors/pg-lost/offsets").json();
        (offsets["offsets"][0]["offset"]["incrementing"] == 20).then_some(())
    });

    proxy.stop();
    let task = failed_task(&mut ferry, &api, "pg-lost");
    let trace = task["trace"].as_str().unwrap_or_default().to_owned();
    eprintln!("the failed task's trace: {trace}");
    assert!(
        trace.contains(&format!(
            "lost the connection to PostgreSQL at 127.0.0.1:{port}/test"
        )) && trace.contains("restart"),
        "the trace says the connection was lost, to which server, and what to do: {trace}"
    );
    assert!(ferry.is_running());

    // Rows written while the database was unreachable for ferry; then it is back.
    pg.execute(&format!(
        "INSERT INTO {} SELECT generate_series(21, 30)",
        table.name
    ));
    let _proxy = Proxy::start_on(port);
    let restarted = api.post("/connectors/pg-lost/restart?includeTasks=true", None);
    assert_eq!(restarted.status, 202, "{restarted:?}");
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, 30);
    ferry.wait_until("the task RUNNING again", || {
        let status = api.get("/connectors/pg-lost/status").json();
        (status["tasks"][0]["state"] == "RUNNING").then_some(())
    });
    ferry.terminate_cleanly();
    assert_eq!(
        ids(&ws),
        (1..=30).collect::<Vec<_>>(),
        "no loss, no duplicate"
    );
}
