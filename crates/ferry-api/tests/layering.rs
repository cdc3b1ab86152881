//! The layering rule of `docs/design.md`: connectors see only `ferry-api`, and `ferry-api` depends on
//! no store, no Kafka client, no HTTP crate. This test keeps it so.

use std::path::Path;

/// The `[dependencies]` names of a manifest next to this crate.
fn dependencies(manifest: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(manifest)
        .unwrap_or_else(|e| panic!("read {}: {e}", manifest.display()));
    let mut in_deps = false;
    let mut names = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if !in_deps || line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some((name, _)) = line.split_once(['=', '.']) {
            names.push(name.trim().to_owned());
        }
    }
    names
}

#[test]
fn ferry_api_depends_on_no_store_client_or_server_crate() {
    let allowed = ["async-trait", "base64", "serde", "serde_json", "thiserror"];
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    for dep in dependencies(&manifest) {
        assert!(
            allowed.contains(&dep.as_str()),
            "ferry-api must stay free of {dep:?}: connector authors see only the API"
        );
    }
}

#[test]
fn connectors_depend_only_on_the_api_among_ferry_crates() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ferry-connectors/Cargo.toml");
    let deps = dependencies(&manifest);
    let ferry: Vec<&String> = deps.iter().filter(|d| d.starts_with("ferry")).collect();
    assert_eq!(
        ferry,
        vec!["ferry-api"],
        "connectors must not see stores, sinks or the runtime"
    );
    for forbidden in [
        "rdkafka",
        "tokio-postgres",
        "sqlx",
        "axum",
        "hyper",
        "reqwest",
    ] {
        assert!(
            !deps.iter().any(|d| d == forbidden),
            "ferry-connectors must not depend on {forbidden}"
        );
    }
}
