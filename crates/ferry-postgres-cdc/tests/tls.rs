//! TLS on both connections, against the test PostgreSQL's TLS setup (`scripts/install-test-deps`
//! puts its CA in `FERRY_TEST_PG_TLS_DIR`, default `/var/lib/ferry-test/postgres-tls`).

#![cfg(test)]

mod support;

use std::path::PathBuf;

use ferry_postgres_cdc::PostgresCdcConnector;
use support::*;

fn tls_dir() -> PathBuf {
    PathBuf::from(
        std::env::var("FERRY_TEST_PG_TLS_DIR")
            .unwrap_or_else(|_| "/var/lib/ferry-test/postgres-tls".to_owned()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_encrypts_the_sql_and_the_replication_connection() -> TestResult {
    let ca = tls_dir().join("ca.crt");
    assert!(
        ca.is_file(),
        "{} is missing: run scripts/install-test-deps",
        ca.display()
    );
    let db = client().await?;
    let fx = Fixture::new(&db, "tls", "id int PRIMARY KEY").await?;
    let ca = ca.display().to_string();
    // A host name: the replication client refuses verify-full with an IP address.
    let config = fx.config(&[
        ("database.hostname", "localhost"),
        ("snapshot.mode", "no_data"),
        ("database.sslmode", "verify-full"),
        ("database.sslrootcert", &ca),
    ]);
    let harness = TaskHarness::new("cdc");
    let (mut task, _) = harness.start(&PostgresCdcConnector, config).await?;
    db.batch_execute(&format!("INSERT INTO public.{} VALUES (1)", fx.name))
        .await?;
    let records = poll_n(task.as_mut(), 1).await?;
    assert_eq!(after(&records[0], "id").as_i64(), Some(1));
    let rows = db
        .query(
            "SELECT a.application_name::text, s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.application_name IN ($1, $2)",
            &[&format!("ferry-cdc-sql-{}", fx.name), &format!("ferry-cdc-{}", fx.name)],
        )
        .await?;
    let mut seen: Vec<(String, bool)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    seen.sort();
    assert_eq!(seen.len(), 2, "both connections are open: {seen:?}");
    assert!(
        seen.iter().all(|(_, ssl)| *ssl),
        "both connections use TLS: {seen:?}"
    );
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_from_another_ca_is_refused() -> TestResult {
    let db = client().await?;
    let fx = Fixture::new(&db, "tlsbad", "id int PRIMARY KEY").await?;
    // The client certificate is no CA of the server's certificate.
    let wrong = tls_dir().join("client.crt").display().to_string();
    let config = fx.config(&[
        ("snapshot.mode", "no_data"),
        ("database.sslmode", "verify-ca"),
        ("database.sslrootcert", &wrong),
    ]);
    let harness = TaskHarness::new("cdc");
    let Err(error) = harness.start(&PostgresCdcConnector, config).await else {
        return Err("connected although the server's certificate is not from the given CA".into());
    };
    assert!(error.to_string().contains("connecting"), "{error}");
    Ok(())
}
