//! Config providers (KIP-297): a FileStreamSource whose `file` is `${file:<path>:<key>}` tails the
//! path that properties file names; the stored configuration, `GET …/config` and the task
//! configurations keep the placeholder; one that cannot be resolved is refused with its key named;
//! the resolved value shows in no REST response.

mod rest_support;
mod support;

use rest_support::Api;
use serde_json::json;
use support::{Ferry, SinkTail, Workspace, parse_line, path_str};

const PROVIDERS: &[(&str, &str)] = &[
    ("config.providers", "file,env"),
    (
        "config.providers.file.class",
        "org.apache.kafka.common.config.provider.FileConfigProvider",
    ),
    ("config.providers.env.class", "EnvVarConfigProvider"),
    ("config.providers.env.param.allowlist.pattern", "FERRY_.*"),
];

#[test]
fn a_file_placeholder_is_resolved_when_the_connector_starts_and_never_shown() {
    let ws = Workspace::new();
    // A distinctive name, so that finding it in a response means the secret leaked.
    let input = ws.write("hidden-input-7d3f.txt", "one\ntwo\n");
    let secrets = ws.properties(
        "secrets.properties",
        &[("input.path", &path_str(&input)), ("tasks", "1")],
    );
    let placeholder = format!("${{file:{}:input.path}}", path_str(&secrets));
    let worker = ws.worker(100, PROVIDERS);
    let connector = ws.properties(
        "source.properties",
        &[
            ("name", "from-cli"),
            ("connector.class", "FileStreamSource"),
            ("file", &placeholder),
            ("topic", "lines"),
            // A typed key too: the file is checked resolved before the worker starts.
            (
                "tasks.max",
                &format!("${{file:{}:tasks}}", path_str(&secrets)),
            ),
        ],
    );
    let mut ferry = Ferry::standalone(&ws, "run", &worker, &[connector.as_path()]);
    let mut sink = SinkTail::new(&ws.sink_path());
    let lines = sink.wait_for(&mut ferry, 2).to_vec();
    let values: Vec<_> = lines
        .iter()
        .map(|l| parse_line(l)["value"].as_str().expect("a line").to_owned())
        .collect();
    assert_eq!(
        values,
        ["one", "two"],
        "the file the placeholder names is read"
    );

    let api = Api::new(&ferry.rest_url());
    // Created over REST too: stored (connectors file) and shown with the placeholder.
    let config =
        json!({"connector.class": "FileStreamSource", "file": placeholder, "topic": "lines2"});
    api.put("/connectors/over-rest/config", Some(&config.to_string()))
        .expect(201);
    let records = sink.wait_for(&mut ferry, 4).to_vec();
    assert_eq!(
        records[2..]
            .iter()
            .map(|l| parse_line(l)["topic"].clone())
            .collect::<Vec<_>>(),
        ["lines2", "lines2"],
        "the connector created over REST reads the resolved path too"
    );
    for name in ["from-cli", "over-rest"] {
        let shown = api.get(&format!("/connectors/{name}/config")).expect(200);
        assert_eq!(shown["file"], placeholder, "{shown}");
        let tasks = api.get(&format!("/connectors/{name}/tasks")).expect(200);
        let text = tasks.to_string();
        assert!(
            !text.contains("hidden-input-7d3f"),
            "task configs keep the placeholder: {text}"
        );
    }
    let stored = support::read_lossy(&ws.file("offsets.ferry.connectors.json"));
    assert!(
        stored.contains("input.path") && !stored.contains("hidden-input-7d3f"),
        "the connectors file keeps the placeholder:\n{stored}"
    );

    // Unresolvable: refused with the key named, nothing created.
    for (file, why) in [
        (
            format!("${{file:{}:no.such.key}}", path_str(&secrets)),
            "has no key \"no.such.key\"",
        ),
        ("${vault:secret/db:path}".to_owned(), "no config provider"),
        ("${env:HOME}".to_owned(), "allowlist"),
    ] {
        let config = json!({"connector.class": "FileStreamSource", "file": file, "topic": "t"});
        let reply = api.put("/connectors/bad/config", Some(&config.to_string()));
        let body = reply.expect_error(400, "\"file\"");
        assert!(body.contains(why), "{why:?} in {body}");
        // Named, so that the placeholder is the only error (a validation reports a missing name).
        let mut named = config.clone();
        named["name"] = json!("bad");
        let validated = api
            .put(
                "/connector-plugins/FileStreamSource/config/validate",
                Some(&named.to_string()),
            )
            .expect(200);
        assert_eq!(validated["error_count"], 1, "{validated}");
    }
    api.get("/connectors/bad/config").expect(404);
    ferry.terminate_cleanly();
}

#[test]
fn an_unresolvable_placeholder_on_the_command_line_refuses_the_start_naming_the_key() {
    let ws = Workspace::new();
    let worker = ws.worker(100, PROVIDERS);
    ws.properties(
        "source.properties",
        &[
            ("name", "from-cli"),
            ("connector.class", "FileStreamSource"),
            ("file", "${file:/nonexistent/secrets.properties:path}"),
            ("topic", "lines"),
        ],
    );
    let out = support::run(
        ws.path(),
        &["standalone", &path_str(&worker), "source.properties"],
    );
    assert!(!out.status.success());
    assert!(
        out.stderr.contains("\"file\"") && out.stderr.contains("cannot read the file"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_unknown_provider_class_is_a_worker_file_error() {
    let ws = Workspace::new();
    let worker = ws.worker(
        100,
        &[
            ("config.providers", "vault"),
            (
                "config.providers.vault.class",
                "com.acme.VaultConfigProvider",
            ),
        ],
    );
    let out = support::run(ws.path(), &["standalone", &path_str(&worker)]);
    assert!(!out.status.success());
    assert!(
        out.stderr.contains("config.providers.vault.class")
            && out.stderr.contains("com.acme.VaultConfigProvider"),
        "{}",
        out.stderr
    );
}
