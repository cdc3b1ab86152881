//! `PostgresOffsetStore` against the real PostgreSQL server: the table it creates and the tables it
//! refuses, one transaction per flush (a failing batch leaves nothing behind, a concurrent reader
//! never sees half a batch, rows a batch does not name are not rewritten), logical lookups with one
//! row per partition, store order, and connection failures.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod store_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ferry_offsets::{OffsetBackingStore, OffsetWrite, StoreError, encode_key};
use ferry_postgres::store::{PostgresOffsetStore, PostgresOffsetStoreConfig};
use store_support::{Scratch, client, key, put, tombstone, unique_name, url, value};

fn backend(error: StoreError) -> (String, String, bool) {
    match error {
        StoreError::Backend {
            store,
            message,
            retriable,
            ..
        } => (store, message, retriable),
        other => panic!("expected a backend error, got {other:?}"),
    }
}

async fn open_err(config: PostgresOffsetStoreConfig) -> StoreError {
    match PostgresOffsetStore::open(config).await {
        Ok(store) => panic!("open should fail, opened {}", store.describe()),
        Err(e) => e,
    }
}

async fn set(store: &PostgresOffsetStore, batch: &[OffsetWrite]) {
    store
        .set(batch)
        .await
        .unwrap_or_else(|e| panic!("set on {}: {e}", store.describe()));
}

async fn get(store: &PostgresOffsetStore, keys: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
    store
        .get(keys)
        .await
        .unwrap_or_else(|e| panic!("get on {}: {e}", store.describe()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_table_is_created_with_its_index_and_an_existing_one_is_used() {
    let scratch = Scratch::schema_table("ferry_schema", "offsets").await;
    let store = scratch.open().await;
    let schema = scratch
        .table
        .split('.')
        .next()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        store.describe(),
        format!("postgres table {} at 127.0.0.1:5432/test", scratch.table)
    );
    let db = client().await;
    let columns: Vec<(String, String, String)> = db
        .query(
            "SELECT column_name::text, data_type::text, is_nullable::text \
             FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'offsets' \
             ORDER BY ordinal_position",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let expected: Vec<(String, String, String)> = [
        ("logical_key", "bytea", "NO"),
        ("connector", "text", "YES"),
        ("raw_key", "bytea", "NO"),
        ("value", "bytea", "NO"),
        ("seq", "bigint", "NO"),
        ("written_at", "timestamp with time zone", "NO"),
    ]
    .iter()
    .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
    .collect();
    assert_eq!(columns, expected);
    let indexes: Vec<String> = db
        .query(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = 'offsets' \
             ORDER BY indexname",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(
        indexes.iter().any(|i| i.contains("(connector, seq)")),
        "{indexes:?}"
    );
    assert!(
        indexes.iter().any(|i| i.contains("(logical_key)")),
        "{indexes:?}"
    );

    set(&store, &[put(&key("c", &[("p", 1)]), 5)]).await;
    drop(store);
    // An existing table of the right shape is used as it is, with what it holds.
    let reopened = scratch.open().await;
    assert_eq!(
        get(&reopened, &[key("c", &[("p", 1)])]).await,
        vec![Some(value(5))]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_opened_together_create_the_table_once() {
    let scratch = Arc::new(Scratch::table("ferry_together"));
    let opening: Vec<_> = (0..6)
        .map(|_| {
            let scratch = scratch.clone();
            // Several stores of one connector on purpose: without the per-connector lock.
            tokio::spawn(async move {
                PostgresOffsetStore::open(scratch.config().with_connector_locks(false)).await
            })
        })
        .collect();
    let mut stores = Vec::new();
    for task in opening {
        let store = task
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("a store opened alongside others failed: {e}"));
        stores.push(store);
    }
    let indexes = client()
        .await
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE tablename = $1",
            &[&scratch.table],
        )
        .await
        .unwrap()
        .get::<_, i64>(0);
    assert_eq!(indexes, 2, "the primary key and one (connector, seq) index");
    set(&stores[0], &[put(&key("c", &[("p", 1)]), 1)]).await;
    assert_eq!(
        get(&stores[5], &[key("c", &[("p", 1)])]).await,
        vec![Some(value(1))]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_of_another_shape_is_refused_and_left_as_it_is() {
    let db = client().await;

    // Columns of the wrong type and missing columns.
    let wrong = Scratch::table("ferry_wrong");
    db.batch_execute(&format!(
        "CREATE TABLE {t} (logical_key bytea PRIMARY KEY, connector text, value text); \
         INSERT INTO {t} VALUES ('\\x01', 'c', 'keep me')",
        t = wrong.quoted()
    ))
    .await
    .unwrap();
    let (store, message, retriable) = backend(open_err(wrong.config()).await);
    assert!(!retriable, "{message}");
    assert!(store.contains(&wrong.table), "{store}");
    for needle in [
        &format!(
            "table {} exists but is not a Ferry offsets table",
            wrong.table
        ),
        "column value is text, expected bytea",
        "column raw_key (bytea) is missing",
        "column seq (bigint) is missing",
        "Ferry did not change it",
        "offset.storage.postgres.table",
    ] {
        assert!(
            message.contains(needle),
            "{needle:?} missing from: {message}"
        );
    }
    let rows: Vec<String> = db
        .query(&format!("SELECT value FROM {}", wrong.quoted()), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(rows, vec!["keep me".to_owned()], "the table is untouched");

    // The right columns without the primary key.
    let keyless = Scratch::table("ferry_keyless");
    db.batch_execute(&format!(
        "CREATE TABLE {} (logical_key bytea NOT NULL, connector text, raw_key bytea NOT NULL, \
         value bytea NOT NULL, seq bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL, \
         written_at timestamptz NOT NULL DEFAULT now())",
        keyless.quoted()
    ))
    .await
    .unwrap();
    let (_, message, _) = backend(open_err(keyless.config()).await);
    assert!(
        message.contains("it has no primary key, expected PRIMARY KEY (logical_key)"),
        "{message}"
    );

    // A view is not a table.
    let view = Scratch::table("ferry_view");
    db.batch_execute(&format!("CREATE VIEW {} AS SELECT 1 AS x", view.quoted()))
        .await
        .unwrap();
    let (_, message, _) = backend(open_err(view.config()).await);
    assert!(message.contains("it is not a table"), "{message}");
    db.batch_execute(&format!("DROP VIEW {}", view.quoted()))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_fails_part_way_leaves_nothing_behind() {
    let scratch = Scratch::table("ferry_atomic");
    let store = scratch.open().await;
    let (a, b, c) = (
        key("c", &[("p", 1)]),
        key("c", &[("p", 2)]),
        key("c", &[("p", 3)]),
    );
    set(&store, &[put(&a, 1), put(&b, 1), put(&c, 1)]).await;
    // A trigger makes the server reject one row of the next batch: after the tombstone's DELETE and
    // the first rows of the INSERT have run.
    let function = unique_name("ferry_poison");
    client()
        .await
        .batch_execute(&format!(
            "CREATE FUNCTION \"{function}\"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
               IF position('poison' in convert_from(NEW.raw_key, 'UTF8')) > 0 THEN \
                 RAISE EXCEPTION 'poisoned row'; \
               END IF; RETURN NEW; END $$; \
             CREATE TRIGGER poison BEFORE INSERT OR UPDATE ON {t} \
               FOR EACH ROW EXECUTE FUNCTION \"{function}\"();",
            t = scratch.quoted()
        ))
        .await
        .unwrap();
    let poison = key("poison", &[("p", 1)]);
    let error = store
        .set(&[put(&a, 2), tombstone(&b), put(&poison, 9), put(&c, 2)])
        .await
        .err()
        .unwrap_or_else(|| panic!("the poisoned batch was accepted"));
    let (_, message, retriable) = backend(error);
    assert!(message.contains("poisoned row"), "{message}");
    assert!(message.contains("rolled back"), "{message}");
    assert!(!retriable, "the server refused the data: {message}");
    assert_eq!(
        get(&store, &[a.clone(), b.clone(), c.clone(), poison.clone()]).await,
        vec![Some(value(1)), Some(value(1)), Some(value(1)), None],
        "nothing of the failed batch is visible, the tombstone's DELETE included"
    );
    // The store (and its connection) is still usable.
    set(&store, &[put(&a, 3), tombstone(&b)]).await;
    assert_eq!(
        get(&store, &[a, b, c]).await,
        vec![Some(value(3)), None, Some(value(1))]
    );
    client()
        .await
        .batch_execute(&format!(
            "DROP TRIGGER poison ON {}; DROP FUNCTION \"{function}\"()",
            scratch.quoted()
        ))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_reader_never_sees_half_a_batch() {
    const PARTITIONS: i64 = 400;
    const ROUNDS: i64 = 25;
    let scratch = Scratch::table("ferry_concurrent");
    // A second store reading the writer's connector on purpose: without the per-connector lock.
    let unlocked = || async {
        PostgresOffsetStore::open(scratch.config().with_connector_locks(false))
            .await
            .unwrap()
    };
    let writer = unlocked().await;
    let reader = unlocked().await;
    let keys: Vec<Vec<u8>> = (0..PARTITIONS).map(|p| key("c", &[("p", p)])).collect();
    let batch = |round: i64| -> Vec<OffsetWrite> { keys.iter().map(|k| put(k, round)).collect() };
    set(&writer, &batch(0)).await;

    let done = Arc::new(AtomicBool::new(false));
    let read_keys = keys.clone();
    let reading = {
        let done = done.clone();
        tokio::spawn(async move {
            let (mut reads, mut rounds_seen) = (0u32, std::collections::BTreeSet::new());
            while !done.load(Ordering::Relaxed) || reads < 5 {
                // Both read paths: one query for a list of keys, and the whole table.
                let got = reader.get(&read_keys).await.unwrap();
                let distinct: std::collections::BTreeSet<&Option<Vec<u8>>> = got.iter().collect();
                assert_eq!(distinct.len(), 1, "get saw a mix of batches: {distinct:?}");
                let all = reader.entries().await.unwrap();
                assert_eq!(all.len(), PARTITIONS as usize);
                let distinct: std::collections::BTreeSet<&Vec<u8>> =
                    all.iter().map(|(_, v)| v).collect();
                assert_eq!(
                    distinct.len(),
                    1,
                    "entries saw a mix of batches: {distinct:?}"
                );
                rounds_seen.extend(distinct.into_iter().cloned());
                reads += 1;
            }
            (reads, rounds_seen.len())
        })
    };
    for round in 1..=ROUNDS {
        set(&writer, &batch(round)).await;
    }
    done.store(true, Ordering::Relaxed);
    let (reads, rounds_seen) = reading.await.unwrap_or_else(|e| panic!("reader: {e}"));
    assert!(reads >= 5, "{reads} reads");
    eprintln!("{reads} consistent reads saw {rounds_seen} different rounds");
    assert_eq!(
        get(&writer, &keys[..1]).await,
        vec![Some(value(ROUNDS))],
        "the last batch wins"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_touches_only_the_rows_it_names() {
    let scratch = Scratch::table("ferry_untouched");
    let store = scratch.open().await;
    let keys: Vec<Vec<u8>> = (0..10).map(|p| key("c", &[("p", p)])).collect();
    set(
        &store,
        &keys.iter().map(|k| put(k, 1)).collect::<Vec<OffsetWrite>>(),
    )
    .await;
    let db = client().await;
    let before = row_versions(&db, &scratch.quoted()).await;
    set(&store, &[put(&keys[3], 2), tombstone(&keys[7])]).await;
    let after = row_versions(&db, &scratch.quoted()).await;
    assert_eq!(after.len(), 9);
    for (raw_key, xmin, seq) in &after {
        let old = before
            .iter()
            .find(|(k, ..)| k == raw_key)
            .unwrap_or_else(|| panic!("a row appeared"));
        if *raw_key == keys[3] {
            assert_ne!((xmin, seq), (&old.1, &old.2), "the updated row is new");
        } else {
            assert_eq!(
                (xmin, seq),
                (&old.1, &old.2),
                "an untouched row was rewritten"
            );
        }
    }
}

/// (raw key, xmin, seq) of every row. xmin is the transaction that wrote a row version: a row
/// deleted and inserted again, or updated, gets a new one.
async fn row_versions(db: &tokio_postgres::Client, table: &str) -> Vec<(Vec<u8>, String, i64)> {
    db.query(
        &format!("SELECT raw_key, xmin::text, seq FROM {table} ORDER BY raw_key"),
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
    .collect()
}

/// A row of the offsets table: logical key, connector, raw key, value.
type Row = (Vec<u8>, Option<String>, Vec<u8>, Vec<u8>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_are_logical_with_one_row_per_partition() {
    let scratch = Scratch::table("ferry_logical");
    let store = scratch.open().await;
    let ab = key("c", &[("a", 1), ("b", 2)]);
    let ba = key("c", &[("b", 2), ("a", 1)]);
    set(&store, &[put(&ab, 1)]).await;
    assert_eq!(
        get(&store, std::slice::from_ref(&ba)).await,
        vec![Some(value(1))]
    );
    set(&store, &[put(&ba, 2)]).await;
    // Undecodable keys are kept under their raw bytes, apart from every real partition: the raw key
    // `null` is not connector ""'s null partition.
    let null_partition = encode_key("", None);
    set(
        &store,
        &[
            OffsetWrite {
                key: b"null".to_vec(),
                value: Some(b"raw".to_vec()),
            },
            put(&null_partition, 3),
        ],
    )
    .await;

    let db = client().await;
    let rows: Vec<Row> = db
        .query(
            &format!(
                "SELECT logical_key, connector, raw_key, value FROM {} ORDER BY seq",
                scratch.quoted()
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    assert_eq!(
        rows,
        vec![
            (ab.clone(), Some("c".to_owned()), ba.clone(), value(2)),
            (b"null".to_vec(), None, b"null".to_vec(), b"raw".to_vec()),
            (
                null_partition.clone(),
                Some(String::new()),
                null_partition.clone(),
                value(3)
            ),
        ],
        "one row per partition, keyed by the canonical key, raw key and value as last written"
    );
    assert_eq!(
        get(
            &store,
            &[ab.clone(), b"null".to_vec(), null_partition.clone()]
        )
        .await,
        vec![Some(value(2)), Some(b"raw".to_vec()), Some(value(3))]
    );
    assert_eq!(
        store.connector_offsets("c").await.unwrap(),
        vec![(ba.clone(), value(2))]
    );
    assert_eq!(
        store.connector_offsets("").await.unwrap(),
        vec![(null_partition.clone(), value(3))],
        "an undecodable key belongs to no connector"
    );
    // A tombstone under either field order removes the partition.
    set(&store, &[tombstone(&ab)]).await;
    assert_eq!(get(&store, &[ba]).await, vec![None]);
    assert_eq!(store.entries().await.unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_order_follows_the_batches_and_the_order_within_each() {
    let scratch = Scratch::table("ferry_order");
    let store = scratch.open().await;
    let k = |p: i64| key("c", &[("p", p)]);
    set(&store, &(0..6).map(|p| put(&k(p), p)).collect::<Vec<_>>()).await;
    // Within a batch the last write of a partition decides its place: 4, then 1, then 0.
    set(
        &store,
        &[
            put(&k(0), 10),
            put(&k(4), 14),
            put(&k(1), 11),
            put(&k(0), 20),
        ],
    )
    .await;
    let order: Vec<Vec<u8>> = store
        .connector_offsets("c")
        .await
        .unwrap()
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    assert_eq!(order, vec![k(2), k(3), k(5), k(4), k(1), k(0)]);
    assert_eq!(
        get(&store, &[k(0), k(1), k(4)]).await,
        vec![Some(value(20)), Some(value(11)), Some(value(14))]
    );
    // A batch larger than one statement (10 000 rows) keeps its order too.
    let big: Vec<OffsetWrite> = (0..12_000).rev().map(|p| put(&k(100 + p), p)).collect();
    set(&store, &big).await;
    let all = store.entries().await.unwrap();
    let tail: Vec<Vec<u8>> = all[6..].iter().map(|(key, _)| key.clone()).collect();
    let expected: Vec<Vec<u8>> = big.iter().map(|w| w.key.clone()).collect();
    assert_eq!(tail.len(), expected.len());
    assert!(tail == expected, "entries follow the batch order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_connection_is_a_retriable_error_and_is_reopened() {
    let scratch = Scratch::table("ferry_reconnect");
    let app = unique_name("ferry_test_app");
    let config = PostgresOffsetStoreConfig::new(format!("{}?application_name={app}", url()))
        .with_table(scratch.table.clone());
    let store = PostgresOffsetStore::open(config).await.unwrap();
    let a = key("c", &[("p", 1)]);
    set(&store, &[put(&a, 1)]).await;
    let db = client().await;
    for round in 2..5 {
        let killed: Vec<bool> = db
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                &[&app],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(killed, vec![true], "the store's one connection");
        // The first operation may see the broken connection (a retriable error); a retry reconnects.
        let mut attempts = 0;
        loop {
            attempts += 1;
            match store.set(&[put(&a, round)]).await {
                Ok(()) => break,
                Err(e) => {
                    assert!(e.is_retriable(), "not retriable: {e}");
                    assert!(attempts < 3, "still failing after {attempts} attempts: {e}");
                }
            }
        }
        assert_eq!(
            get(&store, std::slice::from_ref(&a)).await,
            vec![Some(value(round))]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_a_retriable_error() {
    let error = open_err(PostgresOffsetStoreConfig::new(
        "postgresql://postgres@127.0.0.1:1/test",
    ))
    .await;
    let (store, message, retriable) = backend(error);
    assert!(retriable, "{message}");
    assert_eq!(store, "postgres table ferry_offsets at 127.0.0.1:1/test");
    assert!(message.contains("connecting failed"), "{message}");
    assert!(message.contains("Connection refused"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_url_or_table_name_is_refused_without_showing_the_password() {
    let (_, message, retriable) = backend(
        open_err(PostgresOffsetStoreConfig::new(
            "postgresql://ferry:s3cret@127.0.0.1:5432/test?port=not-a-port",
        ))
        .await,
    );
    assert!(!retriable);
    assert!(
        message.contains("not a valid PostgreSQL connection string"),
        "{message}"
    );
    assert!(!message.contains("s3cret"), "{message}");
    let (store, message, retriable) =
        backend(open_err(PostgresOffsetStoreConfig::new(url()).with_table("Ferry-Offsets")).await);
    assert!(!retriable);
    assert!(
        message.contains("offset.storage.postgres.table"),
        "{message}"
    );
    assert_eq!(store, "postgres at 127.0.0.1:5432/test");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_database_is_not_retriable() {
    let database = unique_name("ferry_no_such_db");
    let error = open_err(PostgresOffsetStoreConfig::new(format!(
        "postgresql://postgres@127.0.0.1:5432/{database}"
    )))
    .await;
    let (_, message, retriable) = backend(error);
    assert!(!retriable, "{message}");
    assert!(message.contains("does not exist"), "{message}");
    assert!(
        message.contains("check the user, password and database"),
        "{message}"
    );
}
