//! A connector name defined twice — in the connectors file kept for REST, or in two connector files
//! on the command line — refuses the start with an error naming both, instead of one silently
//! replacing the other.

mod support;

use std::fs;

use support::{Workspace, path_str, run};

#[test]
fn a_name_twice_in_the_connectors_file_is_refused() {
    let ws = Workspace::new();
    let worker = ws.worker(100, &[]);
    let file = ws.file("offsets.ferry.connectors.json");
    let twice = br#"{"version":1,"connectors":{
        "src":{"config":{"name":"src","connector.class":"SequenceSource","topic":"a"},"state":"RUNNING"},
        "src":{"config":{"name":"src","connector.class":"SequenceSource","topic":"b"},"state":"PAUSED"}
    }}"#;
    fs::write(&file, twice).expect("write");
    let out = run(ws.path(), &["standalone", &path_str(&worker)]);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        out.stderr.contains("offsets.ferry.connectors.json")
            && out.stderr.contains("\"src\" is defined twice")
            && out.stderr.contains("RUNNING")
            && out.stderr.contains("PAUSED"),
        "the error names the file and both entries: {}",
        out.stderr
    );
    assert_eq!(fs::read(&file).expect("read"), twice, "left as it is");
    assert!(!ws.offsets_path().exists(), "nothing was started");
}

#[test]
fn a_name_in_two_connector_files_is_refused_naming_both() {
    let ws = Workspace::new();
    let worker = ws.worker(100, &[]);
    let config = [
        ("name", "src"),
        ("connector.class", "SequenceSource"),
        ("topic", "t"),
    ];
    let first = ws.properties("first.properties", &config);
    let second = ws.properties("second.properties", &config);
    let out = run(
        ws.path(),
        &[
            "standalone",
            &path_str(&worker),
            &path_str(&first),
            &path_str(&second),
        ],
    );
    assert!(!out.status.success(), "{out:?}");
    assert!(
        out.stderr.contains("first.properties")
            && out.stderr.contains("second.properties")
            && out.stderr.contains("\"src\""),
        "the error names both files: {}",
        out.stderr
    );
    assert!(!ws.offsets_path().exists(), "nothing was started");
}
