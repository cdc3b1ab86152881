//! The writer's group commit, with a target whose syncs the test holds and fails.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use ferry_api::SourceRecord;

use super::{Syncer, Target, TargetError, Writer};
use crate::sink::{PendingDelivery, SinkErrorKind};

const DEADLINE: Duration = Duration::from_secs(10);

/// What the fake target saw, shared with the test.
#[derive(Default)]
struct Log {
    /// Bytes written, in order.
    written: Vec<u8>,
    /// `write_batch` calls.
    writes: usize,
    /// Bytes written when each sync started (what it covers), once it returned.
    syncs: Vec<usize>,
    /// Syncs that started.
    entered: usize,
    /// Syncs that may still start (the test lets them through one at a time).
    allowed_syncs: usize,
    /// The sync with this number (1-based) fails.
    fail_sync: Option<usize>,
    /// The target (the writer's handle) was dropped.
    target_closed: bool,
}

#[derive(Clone, Default)]
struct Fake(Arc<(Mutex<Log>, Condvar)>);

impl Fake {
    fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.0.0.lock().unwrap()
    }

    /// Waits until `done` holds, up to the deadline.
    fn wait(&self, what: &str, done: impl Fn(&Log) -> bool) {
        let (log, changed) = &*self.0;
        let (log, timeout) = changed
            .wait_timeout_while(log.lock().unwrap(), DEADLINE, |l| !done(l))
            .unwrap();
        assert!(!timeout.timed_out(), "timed out waiting until {what}");
        drop(log);
    }

    fn update(&self, change: impl FnOnce(&mut Log)) {
        change(&mut self.log());
        self.0.1.notify_all();
    }
}

struct FakeTarget(Fake);

impl Target for FakeTarget {
    fn write_batch(&mut self, batch: &[u8]) -> Result<(), TargetError> {
        self.0.update(|l| {
            l.written.extend_from_slice(batch);
            l.writes += 1;
        });
        Ok(())
    }

    fn syncer(&self) -> std::io::Result<Option<Box<dyn Syncer>>> {
        Ok(Some(Box::new(FakeSyncer(self.0.clone()))))
    }
}

impl Drop for FakeTarget {
    fn drop(&mut self) {
        self.0.update(|l| l.target_closed = true);
    }
}

struct FakeSyncer(Fake);

impl Syncer for FakeSyncer {
    fn sync(&mut self) -> Result<(), TargetError> {
        // What this sync covers: the bytes written before it started.
        let mut covered = 0;
        self.0.update(|l| {
            covered = l.written.len();
            l.entered += 1;
        });
        self.0
            .wait("the test allows a sync", |l| l.allowed_syncs > 0);
        let mut failed = false;
        self.0.update(|l| {
            l.allowed_syncs -= 1;
            l.syncs.push(covered);
            failed = l.fail_sync == Some(l.syncs.len());
        });
        if failed {
            return Err(TargetError {
                op: "fdatasync",
                source: std::io::Error::other("injected"),
            });
        }
        Ok(())
    }
}

fn record(value: &str) -> SourceRecord {
    SourceRecord::builder("t")
        .value(serde_json::json!(value))
        .build()
}

fn spawn(fake: &Fake) -> Writer {
    Writer::spawn(
        "fake".to_owned(),
        "test-writer",
        FakeTarget(fake.clone()),
        Some(0),
    )
    .unwrap()
}

fn spawn_lingering(fake: &Fake, linger: Duration) -> Writer {
    Writer::spawn_lingering(
        "fake".to_owned(),
        "test-writer",
        FakeTarget(fake.clone()),
        Some(0),
        linger,
    )
    .unwrap()
}

/// Whether the delivery has resolved, without waiting for it.
fn resolved(delivery: &mut PendingDelivery) -> bool {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    std::pin::Pin::new(delivery).poll(&mut cx).is_ready()
}

use std::future::Future;

/// Polls `done` until it holds, up to the deadline (for state only the writer's threads change).
async fn wait_until(what: &str, done: impl Fn() -> bool) {
    let started = std::time::Instant::now();
    while !done() {
        assert!(
            started.elapsed() < DEADLINE,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test]
async fn batches_written_during_a_sync_are_made_durable_by_one_following_sync() {
    let fake = Fake::default();
    let writer = spawn(&fake);
    let mut first = writer.send(&record("a")).await.unwrap();
    // The first batch is written and its sync started (held by the test).
    fake.wait("the first sync started", |l| l.entered == 1);
    let one = fake.log().written.len();
    // While that sync is held, two more batches are written: writing does not wait for syncing.
    let mut second = writer.send(&record("b")).await.unwrap();
    fake.wait("the second batch is written", |l| l.written.len() > one);
    let two = fake.log().written.len();
    let mut third = writer.send(&record("c")).await.unwrap();
    fake.wait("the third batch is written", |l| l.written.len() > two);
    // Both handed to the sync thread before the first sync returns: the next sync takes them together.
    wait_until("both batches are handed over", || {
        writer.shared.handed_over() == 3
    })
    .await;
    assert!(
        !resolved(&mut first) && !resolved(&mut second) && !resolved(&mut third),
        "nothing may be acknowledged before a sync covering it returned"
    );
    fake.update(|l| l.allowed_syncs = 1);
    let first = tokio::time::timeout(DEADLINE, first)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.offset, Some(0));
    assert!(
        !resolved(&mut second) && !resolved(&mut third),
        "the first sync started before the later batches were written: it does not cover them"
    );
    fake.update(|l| l.allowed_syncs = 1);
    let second = tokio::time::timeout(DEADLINE, second)
        .await
        .unwrap()
        .unwrap();
    let third = tokio::time::timeout(DEADLINE, third)
        .await
        .unwrap()
        .unwrap();
    assert!(second.offset < third.offset);
    let (syncs, written) = {
        let log = fake.log();
        (log.syncs.clone(), log.written.len())
    };
    assert_eq!(
        syncs,
        vec![one, written],
        "one sync for the batch written first, one for the two written during it"
    );
    writer.close().await.unwrap();
    assert!(fake.log().target_closed);
}

#[tokio::test]
async fn a_failed_sync_fails_its_records_and_every_later_one_after_closing_the_target() {
    let fake = Fake::default();
    fake.update(|l| {
        l.fail_sync = Some(2);
        l.allowed_syncs = 10;
    });
    let writer = spawn(&fake);
    let ok = writer.send(&record("a")).await.unwrap();
    tokio::time::timeout(DEADLINE, ok).await.unwrap().unwrap();
    let failed = writer.send(&record("b")).await.unwrap();
    let error = tokio::time::timeout(DEADLINE, failed)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(error.kind, SinkErrorKind::Fatal);
    assert!(
        error.to_string().contains("fdatasync failed: injected"),
        "{error}"
    );
    // The target was closed before the failure became visible (a reopen finds the file unlocked).
    assert!(fake.log().target_closed);
    assert!(writer.is_poisoned());
    let Err(later) = writer.send(&record("c")).await else {
        panic!("a poisoned writer accepted a record");
    };
    assert!(
        later.to_string().contains("fdatasync failed: injected"),
        "{later}"
    );
    assert_eq!(
        fake.log().written.iter().filter(|b| **b == b'\n').count(),
        2,
        "nothing is written after the failure"
    );
}

/// Past [`super::SYNC_QUEUE`] written batches waiting for a held sync, the writer thread waits too:
/// writing runs at most that far ahead of durability. Released, every record is answered in order.
#[tokio::test]
async fn writing_waits_once_sync_queue_batches_wait_for_a_held_sync() {
    let fake = Fake::default();
    let writer = spawn(&fake);
    let lines = |fake: &Fake| fake.log().written.iter().filter(|b| **b == b'\n').count();
    // One batch in the held sync, SYNC_QUEUE handed over, one more written whose hand-over waits.
    let room = 1 + super::SYNC_QUEUE + 1;
    let mut pending = Vec::new();
    for n in 1..=room {
        pending.push(writer.send(&record(&n.to_string())).await.unwrap());
        fake.wait("the batch is written", |l| {
            l.written.iter().filter(|b| **b == b'\n').count() == n
        });
        if n == 1 {
            // The sync thread took the first batch alone and holds it.
            fake.wait("the first sync started", |l| l.entered == 1);
        }
    }
    pending.push(writer.send(&record("past")).await.unwrap());
    // A bounded look for something that must not happen: the next batch is not written.
    let written_anyway = tokio::time::timeout(Duration::from_millis(300), async {
        while lines(&fake) == room {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(
        written_anyway.is_err(),
        "a batch was written past the sync queue"
    );
    assert_eq!(writer.shared.handed_over(), 1 + super::SYNC_QUEUE);
    fake.update(|l| l.allowed_syncs = usize::MAX);
    let mut offsets = Vec::new();
    for delivery in pending {
        let metadata = tokio::time::timeout(DEADLINE, delivery)
            .await
            .unwrap()
            .unwrap();
        offsets.push(metadata.offset);
    }
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{offsets:?}");
    assert_eq!(lines(&fake), room + 1);
    writer.close().await.unwrap();
}

/// Records sent one at a time, as a task sends them, are written together: the writer, woken by the
/// first, waits (up to its linger) for [`super::LINGER_RECORDS`] of them, and the last one wakes it.
#[tokio::test]
async fn records_sent_one_at_a_time_are_written_as_one_batch_once_enough_are_queued() {
    let fake = Fake::default();
    fake.update(|l| l.allowed_syncs = usize::MAX);
    // A linger no test run reaches: only the count of queued records can end it.
    let writer = spawn_lingering(&fake, Duration::from_secs(3600));
    let mut deliveries = Vec::new();
    for i in 0..super::LINGER_RECORDS - 1 {
        deliveries.push(writer.send(&record(&format!("r{i}"))).await.unwrap());
    }
    // Time for a writer that does not linger to write some of them.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        fake.log().writes,
        0,
        "one record short: nothing written yet"
    );
    deliveries.push(writer.send(&record("last")).await.unwrap());
    for delivery in deliveries {
        tokio::time::timeout(DEADLINE, delivery)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(fake.log().writes, 1, "every record in one write");
    writer.close().await.unwrap();
}

/// A lingering writer writes at once for a flush (and for a close), and a lone record is written
/// once the linger has passed, with nothing else sent.
#[tokio::test]
async fn a_flush_ends_the_linger_and_a_lone_record_is_written_after_it() {
    let fake = Fake::default();
    fake.update(|l| l.allowed_syncs = usize::MAX);
    // A linger no test run reaches.
    let writer = spawn_lingering(&fake, Duration::from_secs(3600));
    let delivery = writer.send(&record("a")).await.unwrap();
    wait_until("the writer lingers", || {
        writer.shared.queue().writer == super::WriterState::Lingering
    })
    .await;
    writer.flush(DEADLINE).await.unwrap();
    tokio::time::timeout(DEADLINE, delivery)
        .await
        .unwrap()
        .unwrap();
    writer.close().await.unwrap();

    let fake = Fake::default();
    fake.update(|l| l.allowed_syncs = usize::MAX);
    let writer = spawn_lingering(&fake, Duration::from_millis(20));
    let delivery = writer.send(&record("b")).await.unwrap();
    tokio::time::timeout(DEADLINE, delivery)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(fake.log().writes, 1);
    writer.close().await.unwrap();
}

/// Records queued together go out in queue order with records sent alone, are answered with one
/// delivery once the sync covering them returns, and take no more room than the queue has.
#[tokio::test]
async fn a_batch_is_written_in_queue_order_and_answered_once_synced_within_the_queue_bound() {
    let fake = Fake::default();
    let writer = spawn(&fake);
    let alone = writer.send(&record("a")).await.unwrap();
    let records: Vec<SourceRecord> = (0..3).map(|i| record(&format!("b{i}"))).collect();
    let sent = writer.try_send_batch(&records);
    assert_eq!(sent.accepted, 3);
    let batch = sent.delivery.expect("a delivery for the batch");
    let after = writer.send(&record("c")).await.unwrap();
    fake.update(|l| l.allowed_syncs = 100);
    tokio::time::timeout(DEADLINE, alone)
        .await
        .unwrap()
        .unwrap();
    let outcome = tokio::time::timeout(DEADLINE, batch).await.unwrap();
    assert!(outcome.failed.is_empty(), "{:?}", outcome.failed);
    tokio::time::timeout(DEADLINE, after)
        .await
        .unwrap()
        .unwrap();
    let values: Vec<String> = String::from_utf8(fake.log().written.clone())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["value"].to_string())
        .collect();
    assert_eq!(values, ["\"a\"", "\"b0\"", "\"b1\"", "\"b2\"", "\"c\""]);
    // One call takes no more than the queue's room (the writer thread may drain the queue
    // meanwhile, so only a single call's bound is certain); the caller sends the rest alone.
    fake.update(|l| l.allowed_syncs = 0);
    let many: Vec<SourceRecord> = (0..super::QUEUE_CAPACITY + 10)
        .map(|i| record(&i.to_string()))
        .collect();
    let sent = writer.try_send_batch(&many);
    assert!(
        sent.accepted > 0 && sent.accepted <= super::QUEUE_CAPACITY,
        "took {} of {} records in one call",
        sent.accepted,
        many.len()
    );
    let deliveries: Vec<_> = sent.delivery.into_iter().collect();
    fake.update(|l| l.allowed_syncs = 1_000);
    for delivery in deliveries {
        let outcome = tokio::time::timeout(DEADLINE, delivery).await.unwrap();
        assert!(outcome.failed.is_empty());
    }
    writer.close().await.unwrap();
}

/// A failed sync fails every record of the batches it covered; a poisoned writer takes no batch.
#[tokio::test]
async fn a_failed_sync_fails_the_whole_batch_and_a_poisoned_writer_takes_none() {
    let fake = Fake::default();
    fake.update(|l| {
        l.fail_sync = Some(1);
        l.allowed_syncs = 10;
    });
    let writer = spawn(&fake);
    let records: Vec<SourceRecord> = (0..4).map(|i| record(&i.to_string())).collect();
    let sent = writer.try_send_batch(&records);
    assert_eq!(sent.accepted, 4);
    let outcome = tokio::time::timeout(DEADLINE, sent.delivery.expect("a delivery"))
        .await
        .unwrap();
    let failed: Vec<usize> = outcome.failed.iter().map(|(at, _)| *at).collect();
    assert_eq!(failed, [0, 1, 2, 3]);
    assert!(
        outcome.failed[0].1.to_string().contains("injected"),
        "{}",
        outcome.failed[0].1
    );
    assert!(writer.is_poisoned());
    let again = writer.try_send_batch(&records);
    assert_eq!(again.accepted, 0);
    assert!(again.delivery.is_none());
}
