//! `ferry standalone` checks a connector's `producer.override.*` and `topic.creation.*` keys with the
//! Kafka sink before anything starts: a key the worker's `connector.client.config.override.policy`
//! refuses, or an invalid topic creation setting, is named with its file and line.

mod support;

use support::{Workspace, path_str, run};

#[test]
fn refused_overrides_and_invalid_topic_creation_settings_stop_the_start() {
    let ws = Workspace::new();
    let input = ws.write("input.txt", "a\n");
    let offsets = path_str(&ws.offsets_path());
    // Port 1: nothing listens; the configuration is refused before any client connects.
    let worker = ws.write(
        "worker.properties",
        format!(
            "offset.storage.file.filename={offsets}\nbootstrap.servers=127.0.0.1:1\n\
             connector.client.config.override.policy=None\n"
        ),
    );
    let connector = ws.write(
        "source.properties",
        format!(
            "name=files\nconnector.class=FileStreamSource\nfile={}\ntopic=t\n\
             producer.override.linger.ms=5\ntopic.creation.default.partitions=0\n",
            input.display()
        ),
    );
    let out = run(
        ws.path(),
        &["standalone", &path_str(&worker), &path_str(&connector)],
    );
    assert!(!out.status.success(), "must be refused: {out:?}");
    for fragment in [
        format!("{}:5", connector.display()),
        "The 'None' policy does not allow 'linger.ms' to be overridden".to_owned(),
        format!("{}:6", connector.display()),
        "topic.creation.default.replication.factor".to_owned(),
        "Value must be -1 or at least 1".to_owned(),
    ] {
        assert!(
            out.stderr.contains(&fragment),
            "stderr should contain {fragment:?}:\n{}",
            out.stderr
        );
    }
    assert!(!ws.offsets_path().exists());

    // With a sink that is not Kafka, the keys mean nothing: refused as unknown.
    let worker = ws.write(
        "worker-file.properties",
        format!(
            "offset.storage.file.filename={offsets}\nsink=file:{}\n",
            ws.sink_path().display()
        ),
    );
    let out = run(
        ws.path(),
        &["standalone", &path_str(&worker), &path_str(&connector)],
    );
    assert!(!out.status.success(), "must be refused: {out:?}");
    assert!(
        out.stderr
            .contains("unknown key \"producer.override.linger.ms\""),
        "{}",
        out.stderr
    );
}
