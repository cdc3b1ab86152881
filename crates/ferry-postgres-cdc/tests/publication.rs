//! Publications: `filtered` creates a publication of the captured tables and later only adds
//! tables; it never drops a table someone else added.

#![cfg(test)]

mod support;

use ferry_postgres_cdc::PostgresCdcConnector;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filtered_only_adds_tables_and_keeps_those_others_added() -> TestResult {
    let db = client().await?;
    let fx = Fixture::new(&db, "pub", "id int PRIMARY KEY").await?;
    // Another table someone else put in the (shared) publication.
    let other = Fixture::new(&db, "pubother", "id int PRIMARY KEY").await?;
    db.batch_execute(&format!(
        "CREATE PUBLICATION {} FOR TABLE public.{}",
        fx.name, other.name
    ))
    .await?;
    let harness = TaskHarness::new("cdc");
    let (mut task, _) = harness
        .start(
            &PostgresCdcConnector,
            fx.config(&[("snapshot.mode", "no_data")]),
        )
        .await?;
    let rows = db
        .query(
            "SELECT tablename::text FROM pg_publication_tables WHERE pubname = $1 ORDER BY 1",
            &[&fx.name],
        )
        .await?;
    let mut tables: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    tables.sort();
    let mut expected = vec![fx.name.clone(), other.name.clone()];
    expected.sort();
    assert_eq!(
        tables, expected,
        "the captured table was added, the other one kept"
    );
    // Only the captured table's changes are emitted, although the publication has both.
    db.batch_execute(&format!("INSERT INTO public.{} VALUES (7)", other.name))
        .await?;
    db.batch_execute(&format!("INSERT INTO public.{} VALUES (8)", fx.name))
        .await?;
    let records = poll_n(task.as_mut(), 1).await?;
    assert_eq!(after(&records[0], "id").as_i64(), Some(8));
    assert_eq!(records[0].topic, fx.topic());
    task.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_publication_with_autocreate_disabled_fails_with_the_ddl_to_run() -> TestResult {
    let db = client().await?;
    let fx = Fixture::new(&db, "nopub", "id int PRIMARY KEY").await?;
    let harness = TaskHarness::new("cdc");
    let Err(error) = harness
        .start(
            &PostgresCdcConnector,
            fx.config(&[("publication.autocreate.mode", "disabled")]),
        )
        .await
    else {
        return Err("started without its publication".into());
    };
    assert!(error.to_string().contains("CREATE PUBLICATION"), "{error}");
    Ok(())
}
