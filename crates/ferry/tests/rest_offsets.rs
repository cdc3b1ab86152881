//! KIP-875 over HTTP against a running `ferry standalone`, as a script written for Kafka Connect does
//! it: create a FileStreamSource → records flow → stop → read the offsets → PATCH them to an earlier
//! position → resume → the connector re-reads from there; DELETE the offsets → resume → it re-reads from
//! the beginning. Refused changes (connector not STOPPED, a negative position, an empty list) change
//! nothing.

mod rest_support;
mod support;

use rest_support::Api;
use serde_json::{Value, json};
use support::{Ferry, SinkTail, Workspace, path_str, without_file_identity};

const ALTERED: &str = "The offsets for this connector have been altered successfully";
const RESET: &str = "The offsets for this connector have been reset successfully";
const NOT_STOPPED: &str = "Connectors must be in the STOPPED state before their offsets can be modified. This can be \
     done for the specified connector by issuing a 'PUT' request to the '/connectors/lines/stop' endpoint";

/// The committed offsets, positions only (without the file identity the source adds).
fn offsets(api: &Api) -> Value {
    without_file_identity(&api.get("/connectors/lines/offsets").expect(200))
}

fn position_json(input: &str, position: u64) -> Value {
    json!({"offsets": [{"partition": {"filename": input}, "offset": {"position": position}}]})
}

/// Waits until the committed offset is `position`.
fn wait_committed(ferry: &mut Ferry, api: &Api, input: &str, position: u64) {
    ferry.wait_until(format!("position {position} committed"), || {
        (offsets(api) == position_json(input, position)).then_some(())
    });
}

fn values(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|l| {
            let record: Value = serde_json::from_str(l).expect("a JSON line");
            record["value"].as_str().expect("a string value").to_owned()
        })
        .collect()
}

fn status_of(api: &Api) -> Value {
    api.get("/connectors/lines/status").expect(200)
}

#[test]
fn stop_alter_resume_rereads_from_the_altered_position_and_reset_from_the_beginning() {
    let ws = Workspace::new();
    let lines = ["alpha", "bravo", "charlie", "delta", "echo"];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let input_path = ws.write("input.txt", &text);
    let input = path_str(&input_path);
    let total = text.len() as u64;
    let after_bravo = "alpha\nbravo\n".len() as u64;

    let worker = ws.worker(100, &[]);
    let mut ferry = Ferry::standalone(&ws, "ferry", &worker, &[]);
    let api = Api::new(&ferry.rest_url());
    let create = json!({
        "name": "lines",
        "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "tasks.max": "1",
            "file": input,
            "topic": "lines",
        }
    });
    api.post("/connectors", Some(&create.to_string()))
        .expect(201);

    // Records flow and their offsets are committed.
    let mut sink = SinkTail::new(&ws.sink_path());
    sink.wait_for(&mut ferry, 5);
    wait_committed(&mut ferry, &api, &input, total);

    // PATCH and DELETE while RUNNING, or merely PAUSED: 400, nothing changed.
    let to_bravo = position_json(&input, after_bravo).to_string();
    api.patch("/connectors/lines/offsets", &to_bravo)
        .expect_error(400, NOT_STOPPED);
    api.delete("/connectors/lines/offsets")
        .expect_error(400, NOT_STOPPED);
    assert_eq!(api.put("/connectors/lines/pause", None).status, 202);
    api.patch("/connectors/lines/offsets", &to_bravo)
        .expect_error(400, NOT_STOPPED);
    assert_eq!(offsets(&api), position_json(&input, total));

    // Stop: STOPPED with no tasks; the offsets can be read.
    assert_eq!(api.put("/connectors/lines/stop", None).status, 204);
    let status = status_of(&api);
    assert_eq!(status["connector"]["state"], "STOPPED", "{status}");
    assert_eq!(status["tasks"], json!([]), "{status}");
    assert_eq!(offsets(&api), position_json(&input, total));

    // Refused by the connector (a negative position) or by the framework (no entries): nothing changed.
    let negative = r#"{"offsets":[{"partition":{"filename":"INPUT"},"offset":{"position":-1}}]}"#
        .replace("INPUT", &input);
    let refused = api
        .patch("/connectors/lines/offsets", &negative)
        .expect_error(400, "position");
    assert!(refused.contains("non-negative"), "{refused}");
    for empty in [r#"{"offsets":[]}"#, "{}", ""] {
        api.patch("/connectors/lines/offsets", empty).expect_error(
            400,
            "Partitions / offsets need to be provided for an alter offsets request",
        );
    }
    assert_eq!(offsets(&api), position_json(&input, total));

    // PATCH to the position after "bravo": 200, and GET shows it.
    let altered = api
        .patch("/connectors/lines/offsets", &to_bravo)
        .expect(200);
    assert_eq!(altered, json!({"message": ALTERED}));
    assert_eq!(offsets(&api), position_json(&input, after_bravo));

    // Resume: the task starts from the altered position and re-reads charlie, delta, echo.
    assert_eq!(api.put("/connectors/lines/resume", None).status, 202);
    sink.wait_for(&mut ferry, 8);
    assert_eq!(
        values(&sink.lines[5..]),
        ["charlie", "delta", "echo"],
        "re-read from the altered position"
    );
    wait_committed(&mut ferry, &api, &input, total);

    // A null offset removes one partition; partitions not named keep theirs.
    assert_eq!(api.put("/connectors/lines/stop", None).status, 204);
    let other =
        json!({"offsets": [{"partition": {"filename": "/elsewhere"}, "offset": {"position": 7}}]});
    api.patch("/connectors/lines/offsets", &other.to_string())
        .expect(200);
    assert_eq!(offsets(&api)["offsets"].as_array().map(Vec::len), Some(2));
    let remove = json!({"offsets": [{"partition": {"filename": "/elsewhere"}, "offset": null}]});
    api.patch("/connectors/lines/offsets", &remove.to_string())
        .expect(200);
    assert_eq!(offsets(&api), position_json(&input, total));

    // DELETE: every partition reset; GET shows none; resume re-reads from the beginning.
    let reset = api.delete("/connectors/lines/offsets").expect(200);
    assert_eq!(reset, json!({"message": RESET}));
    assert_eq!(offsets(&api), json!({"offsets": []}));
    assert_eq!(
        api.delete("/connectors/lines/offsets").expect(200),
        json!({"message": RESET}),
        "resetting again is fine"
    );
    assert_eq!(api.put("/connectors/lines/resume", None).status, 202);
    sink.wait_for(&mut ferry, 13);
    assert_eq!(
        values(&sink.lines[8..]),
        lines,
        "re-read from the beginning"
    );
    wait_committed(&mut ferry, &api, &input, total);

    // Integers are normalized: a position sent as 3.0 is refused by FileStreamSource (not an
    // integer), one sent as 3 is stored and read back as the integer 3.
    assert_eq!(api.put("/connectors/lines/stop", None).status, 204);
    let float = r#"{"offsets":[{"partition":{"filename":"INPUT"},"offset":{"position":3.0}}]}"#
        .replace("INPUT", &input);
    api.patch("/connectors/lines/offsets", &float)
        .expect_error(400, "integer");
    ferry.terminate_cleanly();
    let log = ferry.log();
    assert!(log.contains("resumes from committed offset"), "{log}");
}
