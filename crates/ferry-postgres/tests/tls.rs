//! TLS to the real PostgreSQL at 127.0.0.1:5432, which `scripts/install-test-deps` sets up with a test
//! CA: its certificate, the server's (for `localhost` and `127.0.0.1`) and a client certificate for the
//! role `ferry_tls_client` (allowed only over TLS with that certificate) are in
//! `FERRY_TEST_PG_TLS_DIR` (default `/var/lib/ferry-test/postgres-tls`). A second CA, which signed
//! nothing the server has, is made here with `openssl`.
//!
//! Whether a connection is encrypted is read on the server (`pg_stat_ssl`), found by the unique
//! `application_name` each test gives its connection.
#![cfg(test)]

mod source_support;
mod store_support;

use std::path::PathBuf;
use std::process::Command;

use ferry_offsets::{OffsetBackingStore, StoreError};
use ferry_postgres::store::{PostgresOffsetStore, PostgresOffsetStoreConfig};
use source_support::{Offsets, Table, TestResult, client, ids, poll_n, table_config, unique_name};
use store_support::{Scratch, key, put, value};

/// Where `scripts/install-test-deps` left the test CA and the client's certificate.
fn tls_dir() -> PathBuf {
    let dir = PathBuf::from(
        std::env::var("FERRY_TEST_PG_TLS_DIR")
            .unwrap_or_else(|_| "/var/lib/ferry-test/postgres-tls".to_owned()),
    );
    assert!(
        dir.join("ca.crt").is_file(),
        "{} has no ca.crt: run scripts/install-test-deps, which enables TLS on the test PostgreSQL",
        dir.display()
    );
    dir
}

fn ca() -> String {
    tls_dir().join("ca.crt").display().to_string()
}

/// Whether the server sees the connection of `application_name` as TLS (`None`: no such
/// connection).
async fn encrypted(application_name: &str) -> Result<Option<bool>, Box<dyn std::error::Error>> {
    let db = client().await?;
    let rows = db
        .query(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.application_name = $1",
            &[&application_name],
        )
        .await?;
    Ok(rows.first().map(|row| row.get::<_, bool>(0)))
}

/// A table of three rows `id` 1..3.
async fn three_rows(test: &str) -> Result<Table, Box<dyn std::error::Error>> {
    let db = client().await?;
    let t = Table::create(&db, test, "id bigint primary key, v text").await?;
    db.batch_execute(&format!(
        "INSERT INTO {} VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        t.name
    ))
    .await?;
    Ok(t)
}

/// Starts an incrementing source on `table` at `url`, reads the three rows, and says whether its
/// connection (`app`) is encrypted.
async fn read_three(url: &str, table: &str, app: &str, user: &str) -> Result<bool, String> {
    let mut config = table_config(table, "incrementing", &[("incrementing.column.name", "id")]);
    config.insert("connection.url".to_owned(), url.to_owned());
    config.insert("connection.user".to_owned(), user.to_owned());
    let offsets = Offsets::new();
    let (mut task, _reader) = offsets.start(config).await.map_err(|e| e.to_string())?;
    let records = poll_n(task.as_mut(), 3).await.map_err(|e| e.to_string())?;
    assert_eq!(ids(&records, "id"), vec![1, 2, 3]);
    let ssl = encrypted(app)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no server connection with application_name {app}"))?;
    task.stop().await.map_err(|e| e.to_string())?;
    Ok(ssl)
}

async fn start_error(url: &str, table: &str) -> String {
    start_error_as(url, table, "postgres").await
}

async fn start_error_as(url: &str, table: &str, user: &str) -> String {
    let mut config = table_config(table, "incrementing", &[("incrementing.column.name", "id")]);
    config.insert("connection.url".to_owned(), url.to_owned());
    config.insert("connection.user".to_owned(), user.to_owned());
    match Offsets::new().start(config).await {
        Ok(_) => "started".to_owned(),
        Err(e) => e.to_string(),
    }
}

/// A CA certificate (made now) that signed nothing the server has.
fn other_ca() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let cert = dir.path().join("other-ca.crt");
    let status = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args([
            "-subj",
            "/CN=Another CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
        ])
        .arg("-keyout")
        .arg(dir.path().join("other-ca.key"))
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap_or_else(|e| panic!("openssl (scripts/install-test-deps installs it): {e}"));
    assert!(
        status.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    let cert = cert.display().to_string();
    (dir, cert)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_reads_rows_over_tls_in_both_url_forms() -> TestResult {
    let t = three_rows("tls_full").await?;
    let app = unique_name("app");
    let jdbc = format!(
        "jdbc:postgresql://127.0.0.1:5432/test?sslmode=verify-full&sslrootcert={}&ApplicationName={app}",
        ca()
    );
    assert!(
        read_three(&jdbc, &t.name, &app, "postgres").await?,
        "{jdbc}: not TLS"
    );
    let app = unique_name("app");
    let libpq = format!(
        "postgresql://postgres@localhost:5432/test?sslmode=verify-full&sslrootcert={}&application_name={app}",
        ca()
    );
    assert!(
        read_three(&libpq, &t.name, &app, "postgres").await?,
        "{libpq}: not TLS"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_refuses_a_host_name_the_certificate_does_not_name_and_verify_ca_accepts_it()
-> TestResult {
    let t = three_rows("tls_name").await?;
    // TCP to 127.0.0.1, TLS checks the name db.invalid, which the server's certificate does not list.
    let url = |mode: &str, app: &str| {
        format!(
            "postgresql://postgres@db.invalid:5432/test?hostaddr=127.0.0.1&sslmode={mode}&sslrootcert={}&application_name={app}",
            ca()
        )
    };
    let message = start_error(&url("verify-full", "x"), &t.name).await;
    assert!(
        message.contains("does not name the host")
            && message.contains("sslmode=verify-full")
            && message.contains("db.invalid"),
        "{message}"
    );
    let app = unique_name("app");
    assert!(read_three(&url("verify-ca", &app), &t.name, &app, "postgres").await?);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_and_verify_ca_refuse_a_server_certificate_another_ca_did_not_sign()
-> TestResult {
    let t = three_rows("tls_ca").await?;
    let (_dir, other) = other_ca();
    // require with a root certificate checks the chain, as libpq.
    for mode in ["verify-full", "verify-ca", "require"] {
        let url =
            format!("jdbc:postgresql://127.0.0.1:5432/test?sslmode={mode}&sslrootcert={other}");
        let message = start_error(&url, &t.name).await;
        assert!(
            message.contains("not signed by a CA in sslrootcert")
                && message.contains(&format!("sslmode={mode} with sslrootcert={other}"))
                && message.contains("FAILED"),
            "{mode}: {message}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_encrypts_without_a_root_certificate_and_disable_is_plain_text() -> TestResult {
    let t = three_rows("tls_require").await?;
    let app = unique_name("app");
    let url =
        format!("jdbc:postgresql://127.0.0.1:5432/test?sslmode=require&ApplicationName={app}");
    assert!(
        read_three(&url, &t.name, &app, "postgres").await?,
        "require: not TLS"
    );
    let app = unique_name("app");
    let url =
        format!("jdbc:postgresql://127.0.0.1:5432/test?sslmode=disable&ApplicationName={app}");
    assert!(
        !read_three(&url, &t.name, &app, "postgres").await?,
        "disable: TLS"
    );
    // pgjdbc's default is prefer: TLS, as the server offers it.
    let app = unique_name("app");
    let url = format!("jdbc:postgresql://127.0.0.1:5432/test?ApplicationName={app}");
    assert!(
        read_three(&url, &t.name, &app, "postgres").await?,
        "prefer: not TLS"
    );
    // prefer after a refused certificate: plain text, as libpq.
    let (_dir, other) = other_ca();
    let app = unique_name("app");
    let url = format!(
        "jdbc:postgresql://127.0.0.1:5432/test?sslmode=prefer&sslrootcert={other}&ApplicationName={app}"
    );
    assert!(
        !read_three(&url, &t.name, &app, "postgres").await?,
        "prefer: TLS with a refused certificate"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslrootcert_system_means_verify_full_against_the_systems_cas() -> TestResult {
    let t = three_rows("tls_system").await?;
    // The test CA is not one of the system's: refused (verify-full, as libpq, without sslmode).
    let message = start_error(
        "jdbc:postgresql://localhost:5432/test?sslrootcert=system",
        &t.name,
    )
    .await;
    assert!(
        message.contains("sslmode=verify-full with sslrootcert=system")
            && (message.contains("not signed by a CA in sslrootcert")
                || message.contains("no system CA certificates were found")),
        "{message}"
    );
    let message = start_error(
        "jdbc:postgresql://localhost:5432/test?sslmode=require&sslrootcert=system",
        &t.name,
    )
    .await;
    assert!(
        message.contains("sslrootcert=system with sslmode=require"),
        "{message}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_without_a_root_certificate_says_to_set_sslrootcert() -> TestResult {
    let t = three_rows("tls_noroot").await?;
    if std::env::var_os("HOME")
        .is_some_and(|h| PathBuf::from(h).join(".postgresql/root.crt").exists())
    {
        // libpq's default root certificate is used then; nothing to check here.
        return Ok(());
    }
    let message = start_error(
        "jdbc:postgresql://127.0.0.1:5432/test?sslmode=verify-full",
        &t.name,
    )
    .await;
    assert!(
        message.contains("names no CA certificate") && message.contains("sslrootcert="),
        "{message}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_logs_in_where_the_server_demands_one() -> TestResult {
    let t = three_rows("tls_client").await?;
    client()
        .await?
        .batch_execute(&format!("GRANT SELECT ON {} TO ferry_tls_client", t.name))
        .await?;
    let dir = tls_dir();
    let app = unique_name("app");
    let url = format!(
        "jdbc:postgresql://localhost:5432/test?sslmode=verify-full&sslrootcert={}&sslcert={}&sslkey={}&ApplicationName={app}",
        ca(),
        dir.join("client.crt").display(),
        dir.join("client.key").display()
    );
    assert!(read_three(&url, &t.name, &app, "ferry_tls_client").await?);
    // Without the certificate the server refuses the role (pg_hba `hostssl … cert`).
    let url = format!(
        "jdbc:postgresql://localhost:5432/test?sslmode=verify-full&sslrootcert={}",
        ca()
    );
    let message = start_error_as(&url, &t.name, "ferry_tls_client").await;
    assert!(
        message.contains("connection requires a valid client certificate"),
        "{message}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offset_store_connects_over_tls() -> TestResult {
    let scratch = Scratch::table("ferry_tls");
    let app = unique_name("store");
    let url = format!(
        "postgresql://postgres@localhost:5432/test?sslmode=verify-full&sslrootcert={}&application_name={app}",
        ca()
    );
    let store =
        PostgresOffsetStore::open(PostgresOffsetStoreConfig::new(&url).with_table(&scratch.table))
            .await?;
    let k = key("tls-connector", &[("p", 1)]);
    store.set(&[put(&k, 7)]).await?;
    assert_eq!(
        store.get(std::slice::from_ref(&k)).await?,
        vec![Some(value(7))]
    );
    assert_eq!(
        encrypted(&app).await?,
        Some(true),
        "the store's connection is not TLS"
    );
    drop(store);

    // The key=value form, and a CA that did not sign the server's certificate: refused, not retried.
    let (_dir, other) = other_ca();
    let url = format!(
        "host=127.0.0.1 user=postgres dbname=test sslmode=verify-full sslrootcert='{other}'"
    );
    match PostgresOffsetStore::open(PostgresOffsetStoreConfig::new(&url).with_table(&scratch.table))
        .await
    {
        Ok(store) => panic!(
            "opened {} with a CA that did not sign the server",
            store.describe()
        ),
        Err(StoreError::Backend {
            message, retriable, ..
        }) => {
            assert!(
                !retriable && message.contains("not signed by a CA in sslrootcert"),
                "{message}"
            );
        }
        Err(other) => panic!("{other}"),
    }
    Ok(())
}
