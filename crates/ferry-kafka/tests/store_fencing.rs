//! Task fencing by the offsets topic on a real broker (Apache Kafka 4.4): a task's offsets go through
//! its own transactional producer ([`OffsetBackingStore::open_task_writer`]), and opening the writer of
//! a newer instance of the task fences the older one — on another worker's store too — so a zombie
//! can never commit over its successor, and a task's committed offsets never move backwards.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod store_support;

use ferry_kafka::KafkaOffsetStore;
use ferry_offsets::{OffsetBackingStore, OffsetWrite, StoreError};
use store_support::{key, put, shared_broker, store_config, unique_topic, value};

/// Two workers' stores on one topic; the task moves from the first to the second while the first
/// still runs (a frozen or cut-off worker that wakes up): the old instance's writes are refused as
/// fenced, its earlier commits stay, and the new instance's commits win.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_task_writer_fences_the_older_one_on_another_store() {
    let broker = shared_broker();
    let topic = unique_topic("fencing");
    let config = store_config(broker, &topic, 5);
    let a = KafkaOffsetStore::open(config.clone()).await.unwrap();
    let b = KafkaOffsetStore::open(config).await.unwrap();
    let id = format!("{topic}-group-conn-0");
    let k = key("conn", 0);

    let old = a
        .open_task_writer(&id)
        .await
        .unwrap()
        .expect("the Kafka store fences task writers");
    old.set(&[put(&k, 10)]).await.unwrap();
    assert_eq!(
        b.get(std::slice::from_ref(&k)).await.unwrap(),
        vec![Some(value(10))]
    );

    // The task starts on the other worker: its writer is opened before it reads its offsets.
    let new = b.open_task_writer(&id).await.unwrap().unwrap();
    assert_eq!(
        new.get(std::slice::from_ref(&k)).await.unwrap(),
        vec![Some(value(10))],
        "the new instance reads what the old one committed"
    );
    new.set(&[put(&k, 20)]).await.unwrap();

    // The old instance wakes up and commits an older position: refused, whatever it sends.
    let refused = old.set(&[put(&k, 15)]).await.unwrap_err();
    assert!(
        matches!(refused, StoreError::Fenced { .. }),
        "the zombie's commit is refused as fenced: {refused}"
    );
    assert!(!refused.is_retriable(), "{refused}");
    assert!(refused.to_string().contains(&id), "{refused}");
    // And again, without asking the broker.
    assert!(old.set(&[put(&k, 16)]).await.unwrap_err().is_fenced());
    for store in [&a, &b] {
        assert_eq!(
            store.get(std::slice::from_ref(&k)).await.unwrap(),
            vec![Some(value(20))],
            "the committed offset is the new instance's, never moved back"
        );
    }
    // The store's history holds no record of the zombie's refused writes (read_committed).
    let history = a.history().await.unwrap();
    let values: Vec<Vec<u8>> = history
        .into_iter()
        .filter(|(key, _)| *key == k)
        .filter_map(|(_, v)| v)
        .collect();
    assert_eq!(values, vec![value(10), value(20)]);
}

/// A writer's batch is one transaction: a batch of many partitions is visible whole, and a reopened
/// writer of the same id (the task restarted on the same worker) goes on committing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_commits_as_one_transaction_and_a_restarted_task_commits_again() {
    let broker = shared_broker();
    let topic = unique_topic("fencing-batch");
    let store = KafkaOffsetStore::open(store_config(broker, &topic, 25))
        .await
        .unwrap();
    let id = format!("{topic}-group-conn-3");
    let keys: Vec<Vec<u8>> = (0..40).map(|p| key("conn", p)).collect();
    let first = store.open_task_writer(&id).await.unwrap().unwrap();
    let batch: Vec<OffsetWrite> = keys.iter().map(|k| put(k, 1)).collect();
    first.set(&batch).await.unwrap();
    assert_eq!(store.connector_offsets("conn").await.unwrap().len(), 40);
    drop(first);

    let second = store.open_task_writer(&id).await.unwrap().unwrap();
    let batch: Vec<OffsetWrite> = keys.iter().map(|k| put(k, 2)).collect();
    second.set(&batch).await.unwrap();
    let seen = store.get(&keys).await.unwrap();
    assert!(seen.iter().all(|v| *v == Some(value(2))), "{seen:?}");
}

/// Aborted transactions in the offsets topic — a fenced or killed exactly-once task's offset records,
/// aborted when its next instance starts — are skipped, and a read still reaches the end when they
/// are the last records of a partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_reach_the_end_past_aborted_transactions_at_a_partitions_tail() {
    use rdkafka::ClientConfig;
    use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
    let broker = shared_broker();
    let topic = unique_topic("fencing-aborted");
    let store = KafkaOffsetStore::open(store_config(broker, &topic, 1))
        .await
        .unwrap();
    let k = key("conn", 0);
    store.set(&[put(&k, 1)]).await.unwrap();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap_servers())
        .set("transactional.id", format!("{topic}-aborter"))
        .create()
        .unwrap();
    let p = producer.clone();
    tokio::task::spawn_blocking(move || p.init_transactions(std::time::Duration::from_secs(30)))
        .await
        .unwrap()
        .unwrap();
    producer.begin_transaction().unwrap();
    for position in [7, 8, 9] {
        producer
            .send(
                FutureRecord::to(&topic)
                    .key(&k[..])
                    .payload(&value(position)[..]),
                std::time::Duration::from_secs(10),
            )
            .await
            .unwrap();
    }
    let p = producer.clone();
    tokio::task::spawn_blocking(move || p.abort_transaction(std::time::Duration::from_secs(30)))
        .await
        .unwrap()
        .unwrap();
    let started = std::time::Instant::now();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        store.get(std::slice::from_ref(&k)),
    )
    .await
    .expect("the read reaches the end past the aborted records")
    .unwrap();
    assert_eq!(read, vec![Some(value(1))], "aborted offsets are never read");
    eprintln!("read past the aborted tail in {:?}", started.elapsed());
}

/// The known bug of the first exactly-once round, reproduced: a task killed right after a commit,
/// on a worker where another task (same offsets partition) was killed inside a transaction. That
/// open transaction holds the partition's last stable offset below the first task's last commit
/// until the second task's successor fences it. A restarted first task that read only to the last
/// stable offset resumed from an earlier commit (duplicates). The store's reads now wait for every
/// transaction open at the high watermark to end — as Kafka Connect reads its offsets topic to the
/// high watermark with a `read_committed` consumer — and fail (retriably) rather than return an
/// older offset when one stays open past the store's timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_task_reads_its_last_commit_behind_another_tasks_open_transaction() {
    use rdkafka::ClientConfig;
    use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
    use std::time::{Duration, Instant};
    let broker = shared_broker();
    let topic = unique_topic("fencing-open-txn");
    let mut config = store_config(broker, &topic, 1);
    config.timeout = Duration::from_secs(4);
    let store = KafkaOffsetStore::open(config).await.unwrap();
    let (first, second) = (format!("{topic}-g-c-0"), format!("{topic}-g-c-1"));
    let k = key("c", 0);

    let writer = store.open_task_writer(&first).await.unwrap().unwrap();
    writer.set(&[put(&k, 1)]).await.unwrap();

    // The second task's instance, killed inside a transaction: its record is written, never
    // committed nor aborted (the producer is leaked, as a killed process leaves it).
    let zombie: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap_servers())
        .set("transactional.id", &second)
        .create()
        .unwrap();
    let z = zombie.clone();
    tokio::task::spawn_blocking(move || z.init_transactions(Duration::from_secs(30)))
        .await
        .unwrap()
        .unwrap();
    zombie.begin_transaction().unwrap();
    let other = key("c", 1);
    zombie
        .send(
            FutureRecord::to(&topic)
                .key(&other[..])
                .payload(&value(5)[..]),
            Duration::from_secs(10),
        )
        .await
        .unwrap();

    // The first task commits once more (durable; not yet visible to read_committed readers behind
    // the open transaction), then its worker dies.
    writer.set(&[put(&k, 2)]).await.unwrap();
    drop(writer);

    // The first task restarts: its writer fences the old one, then it reads its offsets. The open
    // transaction is still there: the read fails rather than answer the older offset 1.
    let restarted = store.open_task_writer(&first).await.unwrap().unwrap();
    let started = Instant::now();
    let held = restarted.get(std::slice::from_ref(&k)).await;
    match &held {
        Err(e) => {
            assert!(e.is_retriable(), "{e}");
            assert!(e.to_string().contains("open transaction"), "{e}");
        }
        Ok(read) => panic!(
            "read {read:?} after {:?} while a transaction older than the last commit is open: \
             the restarted task would resume from before its last commit",
            started.elapsed()
        ),
    }

    // The second task's successor starts on some worker: opening its writer aborts the transaction.
    let successor = {
        let store = &store;
        let second = second.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            store.open_task_writer(&second).await.unwrap().unwrap()
        }
    };
    let (read, _successor) = tokio::join!(restarted.get(std::slice::from_ref(&k)), successor);
    assert_eq!(
        read.unwrap(),
        vec![Some(value(2))],
        "the restarted task reads its last commit"
    );
    assert_eq!(
        store.get(std::slice::from_ref(&other)).await.unwrap(),
        vec![None],
        "the killed task's open transaction was aborted"
    );
    std::mem::forget(zombie);
}
