//! One worker per connector on a PostgreSQL offsets table: the store that first reads or writes a
//! connector's offsets holds its advisory lock for its lifetime; another store (another worker) is
//! refused with an error naming the holder, until the first is gone. Other connectors, and reads for
//! inspection, are not blocked.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod store_support;

use std::time::{Duration, Instant};

use ferry_offsets::{OffsetBackingStore, OffsetWrite, StoreError, encode_key};
use store_support::{Scratch, map};

fn key(connector: &str) -> Vec<u8> {
    encode_key(connector, Some(&map(&[("p", 1)])))
}

fn write(connector: &str, value: &[u8]) -> Vec<OffsetWrite> {
    vec![OffsetWrite {
        key: key(connector),
        value: Some(value.to_vec()),
    }]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_store_is_refused_a_connector_the_first_one_uses_until_it_is_gone() {
    let scratch = Scratch::table("lock");
    let first = scratch.open().await;
    let second = scratch.open().await;
    first
        .set(&write("orders", b"1"))
        .await
        .expect("first writes");

    for refused in [
        second.get(&[key("orders")]).await.map(|_| ()),
        second.set(&write("orders", b"2")).await,
    ] {
        match refused {
            Err(StoreError::Backend {
                message, retriable, ..
            }) => {
                assert!(!retriable, "{message}");
                assert!(
                    message.contains("\"orders\"")
                        && message.contains("in use by another Ferry worker")
                        && message.contains("pid"),
                    "{message}"
                );
            }
            other => panic!("the second store used the connector: {other:?}"),
        }
    }
    // Another connector, and reading for inspection, are not blocked.
    second
        .set(&write("users", b"1"))
        .await
        .expect("another connector");
    assert_eq!(
        second
            .connector_offsets("orders")
            .await
            .expect("inspect")
            .len(),
        1
    );
    assert_eq!(
        first.get(&[key("orders")]).await.expect("the holder reads"),
        vec![Some(b"1".to_vec())]
    );

    drop(first);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match second.set(&write("orders", b"3")).await {
            Ok(()) => break,
            Err(e) if Instant::now() < deadline => {
                eprintln!("not yet: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("the lock was not released with the first store: {e}"),
        }
    }
    assert_eq!(
        second.get(&[key("orders")]).await.expect("now the holder"),
        vec![Some(b"3".to_vec())]
    );
}
