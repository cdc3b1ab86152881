//! The layering rule of `docs/design.md`: `ferry-plugin` holds the contracts backends implement and
//! depends on no HTTP crate, store client or Kafka client, so a backend crate (`ferry-kafka`) does not
//! pull in the REST server, nor one backend another. This test keeps it so.

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
fn ferry_plugin_depends_on_no_server_store_client_or_kafka_crate() {
    let allowed = [
        "ferry-api",
        "ferry-offsets",
        "async-trait",
        "thiserror",
        "indexmap",
        // The herder's store contracts: TargetState's and State's JSON names, and the updates channel.
        "serde",
        "tokio",
        "tracing",
        "java-properties",
        "encoding_rs",
    ];
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let deps = dependencies(&manifest);
    assert!(
        deps.iter().any(|d| d == "ferry-api"),
        "the manifest was read: {deps:?}"
    );
    for dep in deps {
        assert!(
            allowed.contains(&dep.as_str()),
            "ferry-plugin must stay free of {dep:?}: backends depend on it without the runtime's HTTP \
             server or each other's clients"
        );
    }
}

#[test]
fn the_kafka_backend_depends_on_the_contracts_not_the_runtime() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ferry-kafka/Cargo.toml");
    let deps = dependencies(&manifest);
    assert!(
        deps.iter().any(|d| d == "ferry-plugin"),
        "ferry-kafka implements the contracts of ferry-plugin: {deps:?}"
    );
    for forbidden in ["ferry-runtime", "axum", "tower-http", "hyper", "hyper-util"] {
        assert!(
            !deps.iter().any(|d| d == forbidden),
            "ferry-kafka must not depend on {forbidden}"
        );
    }
}

/// The rooms stack up: `ferry-runtime` (the worker) under `ferry-herder` (connectors and their
/// placement) under `ferry-rest` (the HTTP API). Neither the worker nor the herders serve HTTP, so an
/// embedder (the benchmarks, a test) runs tasks without a web server in its build; none of the three
/// names a backend.
#[test]
fn the_runtime_and_the_herders_depend_on_no_http_server_and_the_rest_layer_on_no_backend() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let runtime = dependencies(&crates.join("ferry-runtime/Cargo.toml"));
    assert!(
        runtime.iter().any(|d| d == "ferry-plugin"),
        "the manifest was read: {runtime:?}"
    );
    for forbidden in [
        "ferry-rest",
        "axum",
        "hyper",
        "hyper-util",
        "tower-http",
        "tokio-rustls",
    ] {
        assert!(
            !runtime.iter().any(|d| d == forbidden),
            "ferry-runtime must not depend on {forbidden}: the REST API is ferry-rest's"
        );
    }
    let rest = dependencies(&crates.join("ferry-rest/Cargo.toml"));
    assert!(
        rest.iter().any(|d| d == "ferry-runtime"),
        "ferry-rest serves the runtime's herder: {rest:?}"
    );
    for forbidden in [
        "ferry-kafka",
        "ferry-postgres",
        "ferry-postgres-cdc",
        "ferry-connectors",
        "rdkafka",
    ] {
        assert!(
            !rest.iter().any(|d| d == forbidden),
            "ferry-rest must not depend on {forbidden}: it sees backends only through the herder"
        );
    }
}

/// `ferry-metrics` (task states and the metrics a worker keeps) sits under the worker: it names no
/// other Ferry crate than the offsets it meters, and serves nothing itself (`ferry-rest` renders it).
#[test]
fn the_metrics_crate_sits_under_the_worker_and_serves_nothing() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let metrics = dependencies(&crates.join("ferry-metrics/Cargo.toml"));
    assert!(
        metrics.iter().any(|d| d == "prometheus-client"),
        "the manifest was read: {metrics:?}"
    );
    for dep in &metrics {
        assert!(
            !dep.starts_with("ferry-") || dep == "ferry-offsets",
            "ferry-metrics must not depend on {dep}: the worker depends on it, not the other way"
        );
        assert!(
            !["axum", "hyper", "tower-http", "rdkafka", "tokio-postgres"].contains(&dep.as_str()),
            "ferry-metrics must not depend on {dep}"
        );
    }
    let runtime = dependencies(&crates.join("ferry-runtime/Cargo.toml"));
    assert!(
        runtime.iter().any(|d| d == "ferry-metrics"),
        "the worker keeps its metrics in ferry-metrics: {runtime:?}"
    );
}

/// The rooms under the worker: `ferry-builtin` (the offsets file and JSON-line sinks) is a backend
/// like any other, on the contracts only; `ferry-config` reads every room's configuration, using
/// the built-in backends it chooses between and the transform chain, but never the worker, the
/// herders or the REST server that use it.
#[test]
fn the_builtin_backends_and_the_config_sit_under_the_worker() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let servers = ["axum", "hyper", "hyper-util", "tower-http", "tokio-rustls"];
    let clients = [
        "rdkafka",
        "tokio-postgres",
        "ferry-kafka",
        "ferry-postgres",
        "ferry-postgres-cdc",
    ];
    let above = ["ferry-runtime", "ferry-herder", "ferry-rest", "ferry"];
    let builtin = dependencies(&crates.join("ferry-builtin/Cargo.toml"));
    assert!(
        builtin.iter().any(|d| d == "ferry-plugin"),
        "the manifest was read: {builtin:?}"
    );
    for dep in &builtin {
        assert!(
            !servers.contains(&dep.as_str())
                && !clients.contains(&dep.as_str())
                && !above.contains(&dep.as_str())
                && dep != "ferry-config",
            "ferry-builtin must not depend on {dep}: it is a backend on the contracts"
        );
    }
    let config = dependencies(&crates.join("ferry-config/Cargo.toml"));
    assert!(
        config.iter().any(|d| d == "ferry-builtin"),
        "the manifest was read: {config:?}"
    );
    for dep in &config {
        assert!(
            !servers.contains(&dep.as_str())
                && !clients.contains(&dep.as_str())
                && !above.contains(&dep.as_str()),
            "ferry-config must not depend on {dep}: the worker, herders and REST server use it"
        );
    }
    let runtime = dependencies(&crates.join("ferry-runtime/Cargo.toml"));
    for room in ["ferry-builtin", "ferry-config", "ferry-metrics"] {
        assert!(
            runtime.iter().any(|d| d == room),
            "the worker is built on {room}: {runtime:?}"
        );
    }
}

/// A connector crate sees only `ferry-api`: `ferry-postgres-cdc` names no other Ferry crate but the
/// leaf `ferry-postgres-tls` (libpq's certificate checks, shared with `ferry-postgres`; it depends on
/// no Ferry crate itself).
#[test]
fn the_cdc_connector_sees_only_the_connector_api() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ferry-postgres-cdc/Cargo.toml");
    let deps = dependencies(&manifest);
    assert!(
        deps.iter().any(|d| d == "ferry-api"),
        "the manifest was read: {deps:?}"
    );
    for dep in deps {
        assert!(
            !dep.starts_with("ferry-") || dep == "ferry-api" || dep == "ferry-postgres-tls",
            "ferry-postgres-cdc must not depend on {dep}: connectors see only ferry-api"
        );
    }
    let tls = dependencies(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../ferry-postgres-tls/Cargo.toml"),
    );
    assert!(
        tls.iter().all(|d| !d.starts_with("ferry-")),
        "ferry-postgres-tls is a leaf: {tls:?}"
    );
}
