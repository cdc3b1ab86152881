//! Worker keys of `offset.storage=postgres`: `offset.storage.postgres.url` and
//! `offset.storage.postgres.table`.

use ferry::Ferry;
use ferry_postgres::{PostgresStoreSpec, PostgresUrl};
use ferry_runtime::config::{ConfigError, ConfigErrors, Properties, WorkerConfig};

/// The `ferry` binary's worker backends.
fn ferry() -> Ferry {
    Ferry::builder()
        .offset_store(ferry_kafka::KafkaStorePlugin)
        .sink(ferry_kafka::KafkaSinkPlugin)
        .offset_store(ferry_postgres::PostgresStorePlugin)
}

fn props(pairs: &[(&str, &str)]) -> Properties {
    Properties::from_pairs("worker.properties", pairs.iter().copied())
}

fn worker(pairs: &[(&str, &str)]) -> WorkerConfig {
    ferry()
        .parse_worker(&props(pairs))
        .unwrap_or_else(|e| panic!("valid worker config refused:\n{e}"))
}

fn worker_errors(pairs: &[(&str, &str)]) -> ConfigErrors {
    match ferry().parse_worker(&props(pairs)) {
        Ok(config) => panic!("config should be refused: {config:?}"),
        Err(errors) => errors,
    }
}

/// The one error about `key`, as text.
fn error_for(errors: &ConfigErrors, key: &str) -> String {
    let found: Vec<&ConfigError> = errors.iter().filter(|e| e.key() == Some(key)).collect();
    assert_eq!(
        found.len(),
        1,
        "expected one error for {key:?} in:\n{errors}"
    );
    found[0].to_string()
}

const POSTGRES: (&str, &str) = ("offset.storage", "postgres");
const URL: &str = "postgresql://ferry:s3cret@db.example:5432/ferry";

#[test]
fn postgres_storage_with_the_default_table() {
    let config = worker(&[POSTGRES, ("offset.storage.postgres.url", URL)]);
    assert_eq!(
        config.offset_storage.downcast_ref::<PostgresStoreSpec>(),
        Some(&PostgresStoreSpec {
            url: PostgresUrl::new(URL),
            table: "ferry_offsets".to_owned(),
        })
    );
    assert_eq!(config.offset_storage_file(), None);
    assert_eq!(
        config.offset_storage.to_string(),
        "postgres table ferry_offsets at postgresql://ferry:[hidden]@db.example:5432/ferry"
    );
    assert_eq!(
        config.connectors_file,
        std::path::PathBuf::from("ferry-connectors.json")
    );
    let Some(spec) = config.offset_storage.downcast_ref::<PostgresStoreSpec>() else {
        panic!("not postgres: {:?}", config.offset_storage);
    };
    assert_eq!(
        spec.url.expose(),
        URL,
        "the store connects with the password"
    );
    let debug = format!("{config:?}");
    assert!(!debug.contains("s3cret"), "{debug}");
    assert!(debug.contains("db.example:5432/ferry"), "{debug}");
}

#[test]
fn postgres_storage_with_a_schema_qualified_table_and_key_value_url() {
    let url = "host=127.0.0.1 port=5432 user=postgres password='p w' dbname=test";
    let config = worker(&[
        ("offset.storage", " Postgres "),
        ("offset.storage.postgres.url", url),
        ("offset.storage.postgres.table", "ops.connect_offsets"),
    ]);
    let Some(spec) = config.offset_storage.downcast_ref::<PostgresStoreSpec>() else {
        panic!("not postgres");
    };
    assert_eq!(spec.table, "ops.connect_offsets");
    assert_eq!(spec.url.expose(), url);
    assert_eq!(
        spec.url.redacted(),
        "host=127.0.0.1 port=5432 user=postgres password=[hidden] dbname=test"
    );
}

#[test]
fn postgres_storage_needs_a_url() {
    let errors = worker_errors(&[POSTGRES]);
    let text = error_for(&errors, "offset.storage.postgres.url");
    assert!(text.contains("missing required key"), "{text}");
    assert!(text.contains("postgresql://"), "{text}");
}

#[test]
fn bad_postgres_values_are_refused_without_showing_the_password() {
    let errors = worker_errors(&[
        POSTGRES,
        (
            "offset.storage.postgres.url",
            "jdbc:postgresql://ferry:s3cret@db:5432/ferry",
        ),
        ("offset.storage.postgres.table", "Ferry-Offsets"),
    ]);
    let url = error_for(&errors, "offset.storage.postgres.url");
    assert!(url.contains("without the jdbc: prefix"), "{url}");
    assert!(!url.contains("s3cret"), "{url}");
    assert!(!errors.to_string().contains("s3cret"), "{errors}");
    let table = error_for(&errors, "offset.storage.postgres.table");
    assert!(table.contains("lower-case SQL name"), "{table}");

    let errors = worker_errors(&[POSTGRES, ("offset.storage.postgres.url", "db.example")]);
    assert!(
        error_for(&errors, "offset.storage.postgres.url").contains("accepted: a URL"),
        "{errors}"
    );
    let errors = worker_errors(&[POSTGRES, ("offset.storage.postgres.url", " ")]);
    assert!(
        error_for(&errors, "offset.storage.postgres.url").contains("must name the database"),
        "{errors}"
    );
}

#[test]
fn keys_of_another_store_are_refused() {
    // Postgres keys with the file store (the default) or the Kafka store.
    let errors = worker_errors(&[
        ("offset.storage.file.filename", "/tmp/o"),
        ("offset.storage.postgres.url", URL),
    ]);
    let text = error_for(&errors, "offset.storage.postgres.url");
    assert!(
        text.contains("is a setting of offset.storage=postgres, but offsets are stored in a file"),
        "{text}"
    );
    assert!(!text.contains("s3cret"), "{text}");
    // verify-full needs a CA certificate (libpq's default one, ~/.postgresql/root.crt, when present).
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    if home.is_some_and(|h| h.join(".postgresql/root.crt").exists()) {
        return;
    }
    let errors = worker_errors(&[
        ("offset.storage", "kafka"),
        ("bootstrap.servers", "k:9092"),
        ("offset.storage.topic", "connect-offsets"),
        ("offset.storage.postgres.table", "t"),
    ]);
    assert!(
        error_for(&errors, "offset.storage.postgres.table").contains("stored in a Kafka topic"),
        "{errors}"
    );
    // Kafka keys with the Postgres store.
    let errors = worker_errors(&[
        POSTGRES,
        ("offset.storage.postgres.url", URL),
        ("offset.storage.topic", "connect-offsets"),
    ]);
    assert!(
        error_for(&errors, "offset.storage.topic").contains(
            "is a setting of offset.storage=kafka, but offsets are stored in a PostgreSQL table"
        ),
        "{errors}"
    );
}

#[test]
fn unknown_storage_lists_postgres() {
    let errors = worker_errors(&[("offset.storage", "mysql")]);
    let text = error_for(&errors, "offset.storage");
    assert!(
        text.contains("postgres (offset.storage.postgres.url)"),
        "{text}"
    );
    // A misspelt key is suggested.
    let errors = worker_errors(&[POSTGRES, ("offset.storage.postgres.uri", URL)]);
    let text = errors.to_string();
    assert!(text.contains("offset.storage.postgres.url"), "{text}");
}

#[test]
fn postgres_storage_tls_settings_are_checked_with_the_worker_config() {
    let url = "postgresql://ferry:s3cret@db.example/ferry?sslmode=require";
    let config = worker(&[POSTGRES, ("offset.storage.postgres.url", url)]);
    assert_eq!(
        config.offset_storage.to_string(),
        "postgres table ferry_offsets at postgresql://ferry:[hidden]@db.example/ferry?sslmode=require"
    );
    let errors = worker_errors(&[
        POSTGRES,
        (
            "offset.storage.postgres.url",
            "postgresql://ferry:s3cret@db.example/ferry?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
        ),
    ]);
    let text = error_for(&errors, "offset.storage.postgres.url");
    assert!(
        text.contains("sslrootcert=/nonexistent/ca.pem: cannot be read"),
        "{text}"
    );
    assert!(!text.contains("s3cret"), "{text}");
    // verify-full needs a CA certificate (libpq's default one, ~/.postgresql/root.crt, when present).
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    if home.is_some_and(|h| h.join(".postgresql/root.crt").exists()) {
        return;
    }
    let errors = worker_errors(&[
        POSTGRES,
        (
            "offset.storage.postgres.url",
            "host=db.example user=ferry password=s3cret sslmode=verify-full",
        ),
    ]);
    let text = error_for(&errors, "offset.storage.postgres.url");
    assert!(text.contains("sslmode=verify-full"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
}
