//! Connectors created or changed over REST survive a restart of `ferry standalone` (kept in
//! `<offsets file>.connectors.json`, with their target state); connectors from command-line files are
//! never written there and win a name collision; a damaged connectors file is refused and left as it
//! is.

mod rest_support;
mod support;

use std::fs;

use rest_support::Api;
use serde_json::{Value, json};
use support::{Ferry, SinkTail, Workspace, path_str, run};

fn connectors_file(ws: &Workspace) -> std::path::PathBuf {
    ws.file("offsets.ferry.connectors.json")
}

fn stored(ws: &Workspace) -> Value {
    let text = fs::read_to_string(connectors_file(ws)).expect("the connectors file exists");
    serde_json::from_str(&text).expect("the connectors file is JSON")
}

fn wait_running(ferry: &mut Ferry, api: &Api, name: &str) {
    ferry.wait_until(format!("{name} RUNNING"), || {
        let status = api.get(&format!("/connectors/{name}/status")).json();
        (status["tasks"][0]["state"] == "RUNNING").then_some(())
    });
}

#[test]
fn rest_connectors_and_their_state_survive_a_restart_and_the_command_line_wins() {
    let ws = Workspace::new();
    let cli_input = ws.write("cli.txt", "c1\nc2\n");
    let rest_input = ws.write("rest.txt", "r1\nr2\n");
    let worker = ws.worker(100, &[]);
    let cli = ws.properties(
        "cli.properties",
        &[
            ("name", "cli"),
            ("connector.class", "FileStreamSource"),
            ("file", &path_str(&cli_input)),
            ("topic", "cli"),
        ],
    );

    let mut ferry = Ferry::standalone(&ws, "first", &worker, &[&cli]);
    let api = Api::new(&ferry.rest_url());
    let rest_config = json!({
        "connector.class": "FileStreamSource",
        "file": path_str(&rest_input),
        "topic": "rest",
    });
    api.post(
        "/connectors",
        Some(&json!({"name": "rest", "config": rest_config}).to_string()),
    )
    .expect(201);
    api.post(
        "/connectors",
        Some(&json!({"name": "cli", "config": rest_config}).to_string()),
    )
    .expect_error(409, "Connector cli already exists");
    let mut sink = SinkTail::new(&ws.sink_path());
    sink.wait_for(&mut ferry, 4);
    ferry.wait_until("rest's offsets committed", || {
        let offsets = api.get("/connectors/rest/offsets").json();
        (offsets["offsets"][0]["offset"]["position"] == 6).then_some(())
    });
    // Stopped over REST: it stays stopped after the restart.
    assert_eq!(api.put("/connectors/rest/stop", None).status, 204);
    // A change to a command-line connector is not written to the file.
    assert_eq!(api.put("/connectors/cli/pause", None).status, 202);
    let file = stored(&ws);
    assert_eq!(file["version"], 1);
    assert_eq!(
        file["connectors"]
            .as_object()
            .map(|c| c.keys().collect::<Vec<_>>()),
        Some(vec![&"rest".to_owned()]),
        "only REST connectors are kept: {file}"
    );
    assert_eq!(file["connectors"]["rest"]["state"], "STOPPED");
    ferry.terminate_cleanly();

    // Restart with the same command line: both come back, rest still STOPPED, cli RUNNING again.
    let mut ferry = Ferry::standalone(&ws, "second", &worker, &[&cli]);
    let api = Api::new(&ferry.rest_url());
    assert_eq!(api.get("/connectors").expect(200), json!(["cli", "rest"]));
    let mut expected = rest_config.clone();
    expected["name"] = json!("rest");
    assert_eq!(api.get("/connectors/rest/config").expect(200), expected);
    assert_eq!(
        api.get("/connectors/rest/status").json()["connector"]["state"],
        "STOPPED"
    );
    wait_running(&mut ferry, &api, "cli");
    // Resumed, it continues from its committed offset: nothing is read twice.
    ws.append("rest.txt", "r3\n");
    assert_eq!(api.put("/connectors/rest/resume", None).status, 202);
    sink.wait_for(&mut ferry, 5);
    assert_eq!(stored(&ws)["connectors"]["rest"]["state"], "RUNNING");
    ferry.terminate_cleanly();
    let values: Vec<String> = sink
        .lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON")["value"].to_string())
        .collect();
    assert_eq!(values.len(), 5, "every line exactly once: {values:?}");

    // A stored connector with a command-line connector's name: the command-line file wins (WARN).
    let mut file = stored(&ws);
    let mut shadow = rest_config.clone();
    shadow["name"] = json!("cli");
    shadow["topic"] = json!("shadow");
    file["connectors"]["cli"] = json!({"config": shadow, "state": "RUNNING"});
    fs::write(connectors_file(&ws), file.to_string()).expect("write");
    let mut ferry = Ferry::standalone(&ws, "third", &worker, &[&cli]);
    let api = Api::new(&ferry.rest_url());
    ferry.wait_for_log("the command-line file wins");
    assert_eq!(
        api.get("/connectors/cli/config").expect(200)["topic"],
        "cli"
    );
    // Deleting a connector removes it from the file; its offsets stay.
    assert_eq!(api.delete("/connectors/rest").status, 204);
    assert!(stored(&ws)["connectors"].get("rest").is_none());
    ferry.terminate_cleanly();

    // Without command-line files: only what the file keeps, and no connector file is needed.
    let mut ferry = Ferry::standalone(&ws, "fourth", &worker, &[]);
    let api = Api::new(&ferry.rest_url());
    assert_eq!(api.get("/connectors").expect(200), json!(["cli"]));
    assert_eq!(
        api.get("/connectors/cli/config").expect(200)["topic"],
        "shadow"
    );
    ferry.terminate_cleanly();
}

#[test]
fn a_damaged_connectors_file_is_refused_and_left_as_it_is() {
    let ws = Workspace::new();
    let worker = ws.worker(100, &[]);
    let damaged = b"{\"version\":1,\"connectors\":{\"x\":";
    fs::write(connectors_file(&ws), damaged).expect("write");
    let out = run(ws.path(), &["standalone", &path_str(&worker)]);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        out.stderr.contains("offsets.ferry.connectors.json") && out.stderr.contains("not valid"),
        "the error names the file: {}",
        out.stderr
    );
    assert_eq!(fs::read(connectors_file(&ws)).expect("read"), damaged);
    assert!(!ws.offsets_path().exists(), "nothing was started");
}
