//! The conformance suite every [`OffsetBackingStore`] must pass (feature `conformance`).
//!
//! A store crate plugs its store in with a [`StoreHarness`] and calls [`run_conformance`] from a test.
//! Each case gets a fresh, empty store location from the factory and may open it several times to
//! check what survives a reopen. The suite panics with a message naming the case on the first failure.

use async_trait::async_trait;

use crate::codec::{decode_value, encode_key, encode_value};
use crate::error::StoreError;
use crate::store::{OffsetBackingStore, OffsetWrite};
use ferry_api::ConnectMap;

/// Opens one store location. `open` may be called again after the previous store was dropped and must
/// then show everything the previous instance durably accepted.
#[async_trait]
pub trait StoreHarness: Send {
    /// Opens (or reopens) the store.
    async fn open(&mut self) -> Result<Box<dyn OffsetBackingStore>, StoreError>;
}

fn map(fields: &[(&str, i64)]) -> ConnectMap {
    let mut m = ConnectMap::new();
    for (k, v) in fields {
        m.insert(*k, *v).unwrap_or_else(|e| panic!("{e}"));
    }
    m
}

fn key(connector: &str, fields: &[(&str, i64)]) -> Vec<u8> {
    encode_key(connector, Some(&map(fields)))
}

fn value(v: i64) -> Vec<u8> {
    encode_value(&map(&[("position", v)]))
}

fn put(key: &[u8], v: i64) -> OffsetWrite {
    OffsetWrite {
        key: key.to_vec(),
        value: Some(value(v)),
    }
}

fn tombstone(key: &[u8]) -> OffsetWrite {
    OffsetWrite {
        key: key.to_vec(),
        value: None,
    }
}

async fn open<H: StoreHarness>(h: &mut H, case: &str) -> Box<dyn OffsetBackingStore> {
    h.open()
        .await
        .unwrap_or_else(|e| panic!("[{case}] opening the store failed: {e}"))
}

async fn set(store: &dyn OffsetBackingStore, batch: &[OffsetWrite], case: &str) {
    store
        .set(batch)
        .await
        .unwrap_or_else(|e| panic!("[{case}] set failed on {}: {e}", store.describe()));
}

async fn get_one(store: &dyn OffsetBackingStore, k: &[u8], case: &str) -> Option<i64> {
    let got = store
        .get(&[k.to_vec()])
        .await
        .unwrap_or_else(|e| panic!("[{case}] get failed: {e}"));
    assert_eq!(got.len(), 1, "[{case}] get must return one entry per key");
    got.into_iter().next().flatten().map(|bytes| {
        let offset = decode_value(&bytes)
            .unwrap_or_else(|e| panic!("[{case}] stored value undecodable: {e}"));
        offset
            .get("position")
            .and_then(ferry_api::Value::as_i64)
            .unwrap_or_else(|| panic!("[{case}] stored value lost its position: {offset}"))
    })
}

/// Runs every case against fresh stores from `new_harness`.
pub async fn run_conformance<H, F>(mut new_harness: F)
where
    H: StoreHarness,
    F: FnMut() -> H,
{
    empty_store(&mut new_harness()).await;
    round_trip(&mut new_harness()).await;
    overwrite_and_batch_order(&mut new_harness()).await;
    tombstones(&mut new_harness()).await;
    connector_isolation(&mut new_harness()).await;
    logical_lookup(&mut new_harness()).await;
    null_partition_and_foreign_keys(&mut new_harness()).await;
    reopen_keeps_everything(&mut new_harness()).await;
    large_batch(&mut new_harness()).await;
}

async fn empty_store<H: StoreHarness>(h: &mut H) {
    let case = "empty store";
    let store = open(h, case).await;
    assert_eq!(
        get_one(&*store, &key("c", &[("p", 1)]), case).await,
        None,
        "[{case}]"
    );
    assert!(
        store
            .connector_offsets("c")
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_empty(),
        "[{case}]"
    );
    assert!(
        store
            .entries()
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_empty(),
        "[{case}]"
    );
    set(&*store, &[], case).await;
}

async fn round_trip<H: StoreHarness>(h: &mut H) {
    let case = "round trip";
    let store = open(h, case).await;
    let (a, b, missing) = (
        key("c", &[("p", 1)]),
        key("c", &[("p", 2)]),
        key("c", &[("p", 3)]),
    );
    set(&*store, &[put(&a, 10), put(&b, 20)], case).await;
    let got = store
        .get(&[a.clone(), missing.clone(), b.clone()])
        .await
        .unwrap_or_else(|e| panic!("[{case}] {e}"));
    assert_eq!(
        got,
        vec![Some(value(10)), None, Some(value(20))],
        "[{case}] get is aligned with its keys"
    );
}

async fn overwrite_and_batch_order<H: StoreHarness>(h: &mut H) {
    let case = "overwrite";
    let store = open(h, case).await;
    let a = key("c", &[("p", 1)]);
    set(&*store, &[put(&a, 1)], case).await;
    set(&*store, &[put(&a, 2)], case).await;
    assert_eq!(
        get_one(&*store, &a, case).await,
        Some(2),
        "[{case}] the newer value wins"
    );
    set(&*store, &[put(&a, 3), put(&a, 4)], case).await;
    assert_eq!(
        get_one(&*store, &a, case).await,
        Some(4),
        "[{case}] the later write in a batch wins"
    );
    assert_eq!(
        store
            .connector_offsets("c")
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .len(),
        1,
        "[{case}]"
    );
}

async fn tombstones<H: StoreHarness>(h: &mut H) {
    let case = "tombstones";
    let store = open(h, case).await;
    let (a, b) = (key("c", &[("p", 1)]), key("c", &[("p", 2)]));
    set(&*store, &[put(&a, 1), put(&b, 2)], case).await;
    set(
        &*store,
        &[tombstone(&a), tombstone(&key("c", &[("never", 0)]))],
        case,
    )
    .await;
    assert_eq!(
        get_one(&*store, &a, case).await,
        None,
        "[{case}] a tombstone removes the key"
    );
    assert_eq!(
        get_one(&*store, &b, case).await,
        Some(2),
        "[{case}] other keys stay"
    );
    let known = store
        .connector_offsets("c")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        known,
        vec![(b.clone(), value(2))],
        "[{case}] tombstoned partitions are not known"
    );
    set(&*store, &[tombstone(&b), put(&b, 5)], case).await;
    assert_eq!(
        get_one(&*store, &b, case).await,
        Some(5),
        "[{case}] a value after a tombstone in one batch wins"
    );
    drop(store);
    let store = open(h, case).await;
    assert_eq!(
        get_one(&*store, &a, case).await,
        None,
        "[{case}] a tombstone survives a reopen"
    );
    assert_eq!(get_one(&*store, &b, case).await, Some(5), "[{case}]");
}

async fn connector_isolation<H: StoreHarness>(h: &mut H) {
    let case = "connector isolation";
    let store = open(h, case).await;
    let fields = [("p", 1)];
    set(
        &*store,
        &[
            put(&key("a", &fields), 1),
            put(&key("ab", &fields), 2),
            put(&key("a\"", &fields), 3),
        ],
        case,
    )
    .await;
    assert_eq!(
        get_one(&*store, &key("a", &fields), case).await,
        Some(1),
        "[{case}]"
    );
    assert_eq!(
        get_one(&*store, &key("ab", &fields), case).await,
        Some(2),
        "[{case}]"
    );
    let a = store
        .connector_offsets("a")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        a,
        vec![(key("a", &fields), value(1))],
        "[{case}] only connector a's partitions"
    );
    set(&*store, &[tombstone(&key("a", &fields))], case).await;
    assert_eq!(
        get_one(&*store, &key("ab", &fields), case).await,
        Some(2),
        "[{case}] other connector untouched"
    );
}

async fn logical_lookup<H: StoreHarness>(h: &mut H) {
    let case = "logical lookup";
    let store = open(h, case).await;
    let ab = key("c", &[("a", 1), ("b", 2)]);
    let ba = key("c", &[("b", 2), ("a", 1)]);
    set(&*store, &[put(&ab, 1)], case).await;
    assert_eq!(
        get_one(&*store, &ba, case).await,
        Some(1),
        "[{case}] field order does not matter"
    );
    set(&*store, &[put(&ba, 2)], case).await;
    assert_eq!(
        get_one(&*store, &ab, case).await,
        Some(2),
        "[{case}] the last write of either form wins"
    );
    let known = store
        .connector_offsets("c")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        known,
        vec![(ba.clone(), value(2))],
        "[{case}] one partition, raw key as last written"
    );
    let float_key = encode_key(
        "c",
        Some(
            &ConnectMap::new()
                .with("a", 1.0)
                .and_then(|m| m.with("b", 2))
                .unwrap_or_default(),
        ),
    );
    assert_eq!(
        get_one(&*store, &float_key, case).await,
        None,
        "[{case}] 1.0 is not 1"
    );
    drop(store);
    let store = open(h, case).await;
    assert_eq!(
        get_one(&*store, &ab, case).await,
        Some(2),
        "[{case}] last write still wins after reopen"
    );
}

async fn null_partition_and_foreign_keys<H: StoreHarness>(h: &mut H) {
    let case = "null partition and foreign keys";
    let store = open(h, case).await;
    let null_key = encode_key("c", None);
    let foreign = b"not json at all".to_vec();
    set(
        &*store,
        &[
            put(&null_key, 7),
            OffsetWrite {
                key: foreign.clone(),
                value: Some(b"x".to_vec()),
            },
        ],
        case,
    )
    .await;
    assert_eq!(
        get_one(&*store, &null_key, case).await,
        Some(7),
        "[{case}] the null partition is a partition"
    );
    let got = store
        .get(std::slice::from_ref(&foreign))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        got,
        vec![Some(b"x".to_vec())],
        "[{case}] undecodable keys are kept byte-exact"
    );
    drop(store);
    let store = open(h, case).await;
    let all = store.entries().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        all,
        vec![(null_key, value(7)), (foreign, b"x".to_vec())],
        "[{case}] entries in store order"
    );
}

async fn reopen_keeps_everything<H: StoreHarness>(h: &mut H) {
    let case = "reopen";
    let store = open(h, case).await;
    for round in 0..5 {
        let batch: Vec<OffsetWrite> = (0..20)
            .map(|p| put(&key("c", &[("p", p)]), round * 100 + p))
            .collect();
        set(&*store, &batch, case).await;
    }
    set(&*store, &[tombstone(&key("c", &[("p", 3)]))], case).await;
    drop(store);
    let store = open(h, case).await;
    for p in 0..20 {
        let expected = if p == 3 { None } else { Some(400 + p) };
        assert_eq!(
            get_one(&*store, &key("c", &[("p", p)]), case).await,
            expected,
            "[{case}] partition {p}"
        );
    }
    assert_eq!(
        store
            .connector_offsets("c")
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .len(),
        19,
        "[{case}]"
    );
}

async fn large_batch<H: StoreHarness>(h: &mut H) {
    let case = "large batch";
    let store = open(h, case).await;
    let batch: Vec<OffsetWrite> = (0..5000)
        .map(|p| put(&key("big", &[("p", p)]), p))
        .collect();
    set(&*store, &batch, case).await;
    let keys: Vec<Vec<u8>> = batch.iter().map(|w| w.key.clone()).collect();
    let got = store.get(&keys).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        got.iter().zip(&batch).all(|(g, w)| *g == w.value),
        "[{case}] every key of the batch is visible"
    );
}
