//! PostgresSource through the real `ferry` binary when its database session is killed
//! (`pg_terminate_backend`) while it reads: the task reconnects after `connection.backoff.ms` and goes
//! on from the last row it returned — RUNNING throughout, every row in the sink exactly once.

mod pg_source_support;
mod rest_support;
mod support;

use pg_source_support::{JDBC_URL, Pg, connector, value_i64};
use rest_support::Api;
use support::{Ferry, SinkTail, Workspace, read_sink};

#[test]
fn a_terminated_session_is_reconnected_and_no_row_is_lost_or_repeated() {
    let pg = Pg::connect();
    let table = pg.table("reconnect", "id int primary key");
    pg.execute(&format!(
        "INSERT INTO {} SELECT generate_series(1, 2000)",
        table.name
    ));
    let app = format!("ferry_reconnect_{}", std::process::id());
    let url = format!("{JDBC_URL}?ApplicationName={app}");
    let ws = Workspace::new();
    let worker = ws.worker(100, &[]);
    let props = connector(
        &ws,
        "pg-reconnect",
        &table.name,
        "incrementing",
        &[
            ("incrementing.column.name", "id"),
            ("connection.url", url.as_str()),
            ("connection.backoff.ms", "200"),
            ("batch.max.rows", "10"),
        ],
    );
    let mut ferry = Ferry::standalone(&ws, "run", &worker, &[&props]);
    let api = Api::new(&ferry.rest_url());
    let mut tail = SinkTail::new(&ws.sink_path());
    tail.wait_for(&mut ferry, 1);
    // Kill the session while the backfill is under way; then more rows arrive.
    let killed = pg.scalar(&format!(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '{app}'"
    ));
    assert_eq!(killed, 1, "the source's session was terminated");
    pg.execute(&format!(
        "INSERT INTO {} SELECT generate_series(2001, 2100)",
        table.name
    ));
    SinkTail::new(&ws.sink_path()).wait_for(&mut ferry, 2100);
    let status = api.get("/connectors/pg-reconnect/status").json();
    assert_eq!(status["tasks"][0]["state"], "RUNNING", "{status}");
    ferry.wait_for_log("reconnected to PostgreSQL at 127.0.0.1:5432/test");
    ferry.terminate_cleanly();
    let ids: Vec<i64> = read_sink(&ws.sink_path())
        .iter()
        .map(|l| value_i64(l, "id"))
        .collect();
    assert_eq!(ids, (1..=2100).collect::<Vec<_>>(), "no loss, no duplicate");
}
