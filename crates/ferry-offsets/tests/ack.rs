//! `AckTracker`: Kafka Connect's SubmittedRecords checklist — only acknowledged prefixes commit.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod core_support;

use std::time::{Duration, Instant};

use core_support::{file, map, position, position_of};
use ferry_api::{ConnectMap, SourcePartition};
use ferry_offsets::{AckTracker, CommittableOffsets};

/// The committed position per partition, sorted by partition display for stable comparison.
fn positions(c: &CommittableOffsets) -> Vec<(Option<String>, i64)> {
    let mut out: Vec<(Option<String>, i64)> = c
        .offsets
        .iter()
        .map(|(p, o)| (p.as_ref().map(ToString::to_string), position_of(o)))
        .collect();
    out.sort();
    out
}

fn part(p: &SourcePartition) -> Option<String> {
    Some(p.to_string())
}

#[test]
fn no_records_commit_nothing() {
    let acks = AckTracker::new();
    let c = acks.committable();
    assert_eq!(c, CommittableOffsets::default());
    assert_eq!(acks.unacked(), 0);
}

#[test]
fn nothing_acked_commits_nothing_and_counts_pending() {
    let acks = AckTracker::new();
    let _a1 = acks.submit(Some(file("/a")), Some(position(1)));
    let _a2 = acks.submit(Some(file("/a")), Some(position(2)));
    let _a3 = acks.submit(Some(file("/a")), Some(position(3)));
    let _b1 = acks.submit(Some(file("/b")), Some(position(1)));
    assert_eq!(acks.unacked(), 4);

    let c = acks.committable();
    assert!(c.offsets.is_empty());
    assert_eq!(c.committable_records, 0);
    assert_eq!(c.pending_records, 4);
    assert_eq!(c.pending_partitions, 2);
    assert_eq!(c.largest_pending, Some((Some(file("/a")), 3)));
    // Nothing was consumed: asking again gives the same answer.
    assert_eq!(acks.committable(), c);
}

#[test]
fn single_ack() {
    let acks = AckTracker::new();
    let r = acks.submit(Some(file("/a")), Some(position(1)));
    assert!(!r.is_acked());
    assert!(r.ack());
    assert!(r.is_acked());
    assert_eq!(acks.unacked(), 0);

    let c = acks.committable();
    assert_eq!(c.offsets, vec![(Some(file("/a")), position(1))]);
    assert_eq!(c.committable_records, 1);
    assert_eq!(c.pending_records, 0);
    assert_eq!(c.pending_partitions, 0);
    assert_eq!(c.largest_pending, None);
}

#[test]
fn acks_across_partitions_are_independent() {
    let acks = AckTracker::new();
    let a1 = acks.submit(Some(file("/a")), Some(position(1)));
    let b1 = acks.submit(Some(file("/b")), Some(position(10)));
    let a2 = acks.submit(Some(file("/a")), Some(position(2)));
    let b2 = acks.submit(Some(file("/b")), Some(position(20)));
    let _c1 = acks.submit(Some(file("/c")), Some(position(100)));

    // b's records are acked, a's first is not: b commits, a and c do not.
    b1.ack();
    b2.ack();
    a2.ack();
    let c = acks.committable();
    assert_eq!(positions(&c), vec![(part(&file("/b")), 20)]);
    assert_eq!(c.committable_records, 2);
    assert_eq!(c.pending_records, 3);
    assert_eq!(c.pending_partitions, 2);

    a1.ack();
    let c = acks.committable();
    assert_eq!(positions(&c), vec![(part(&file("/a")), 2)]);
    assert_eq!(c.pending_partitions, 1);
}

#[test]
fn out_of_order_ack_waits_for_the_gap_then_jumps_to_the_prefix_end() {
    let acks = AckTracker::new();
    let records: Vec<_> = (1..=5)
        .map(|i| acks.submit(Some(file("/a")), Some(position(i))))
        .collect();

    records[1].ack(); // 2
    records[2].ack(); // 3
    records[4].ack(); // 5
    let c = acks.committable();
    assert!(c.offsets.is_empty(), "record 1 is not acked: {c:?}");
    assert_eq!(c.committable_records, 0);
    assert_eq!(c.pending_records, 5);

    records[0].ack(); // the gap closes: 1, 2, 3 commit, 4 still blocks 5
    let c = acks.committable();
    assert_eq!(positions(&c), vec![(part(&file("/a")), 3)]);
    assert_eq!(c.committable_records, 3);
    assert_eq!(c.pending_records, 2);

    records[3].ack();
    let c = acks.committable();
    assert_eq!(positions(&c), vec![(part(&file("/a")), 5)]);
    assert_eq!(c.committable_records, 2);
    assert_eq!(c.pending_records, 0);
}

#[test]
fn null_partition_is_a_partition() {
    let acks = AckTracker::new();
    let n1 = acks.submit(None, Some(position(1)));
    let n2 = acks.submit(None, Some(position(2)));
    let e1 = acks.submit(Some(ConnectMap::new()), Some(position(7)));
    n2.ack();
    e1.ack();
    let c = acks.committable();
    assert_eq!(
        c.offsets,
        vec![(Some(ConnectMap::new()), position(7))],
        "null and {{}} are different partitions"
    );
    assert_eq!(c.largest_pending, Some((None, 2)));
    n1.ack();
    let c = acks.committable();
    assert_eq!(c.offsets, vec![(None, position(2))]);
}

#[test]
fn null_offset_advances_the_prefix_but_commits_nothing_itself() {
    let acks = AckTracker::new();
    let r = acks.submit(Some(file("/a")), None);
    r.ack();
    let c = acks.committable();
    assert!(
        c.offsets.is_empty(),
        "a null offset is not a tombstone: {c:?}"
    );
    assert_eq!(c.committable_records, 1);
    assert_eq!(c.pending_records, 0);

    // A null offset in the middle of the prefix: the prefix runs through it to the last offset.
    let r1 = acks.submit(Some(file("/a")), Some(position(1)));
    let r2 = acks.submit(Some(file("/a")), None);
    let r3 = acks.submit(Some(file("/a")), Some(position(3)));
    r1.ack();
    r2.ack();
    let c = acks.committable();
    assert_eq!(positions(&c), vec![(part(&file("/a")), 1)]);
    r3.ack();
    assert_eq!(positions(&acks.committable()), vec![(part(&file("/a")), 3)]);
}

#[test]
fn null_offset_last_in_the_prefix_keeps_the_earlier_offset() {
    // Committed together or one call at a time, the result must be the same: position 1.
    let one_call = AckTracker::new();
    let r1 = one_call.submit(Some(file("/a")), Some(position(1)));
    let r2 = one_call.submit(Some(file("/a")), None);
    r1.ack();
    r2.ack();
    let c = one_call.committable();
    assert_eq!(
        positions(&c),
        vec![(part(&file("/a")), 1)],
        "the acked offset of record 1 must not be dropped"
    );
    assert_eq!(c.committable_records, 2);

    let two_calls = AckTracker::new();
    let r1 = two_calls.submit(Some(file("/a")), Some(position(1)));
    let r2 = two_calls.submit(Some(file("/a")), None);
    r1.ack();
    assert_eq!(
        positions(&two_calls.committable()),
        vec![(part(&file("/a")), 1)]
    );
    r2.ack();
    assert!(two_calls.committable().offsets.is_empty());
}

#[test]
fn committable_pops_what_it_returns() {
    let acks = AckTracker::new();
    let r1 = acks.submit(Some(file("/a")), Some(position(1)));
    r1.ack();
    assert_eq!(acks.committable().offsets.len(), 1);
    let again = acks.committable();
    assert!(again.offsets.is_empty(), "{again:?}");
    assert_eq!(again.committable_records, 0);

    let r2 = acks.submit(Some(file("/a")), Some(position(2)));
    assert!(acks.committable().offsets.is_empty());
    r2.ack();
    assert_eq!(
        acks.committable().offsets,
        vec![(Some(file("/a")), position(2))]
    );
    assert!(acks.committable().offsets.is_empty());
}

#[test]
fn remove_an_unsent_record() {
    let acks = AckTracker::new();
    let r1 = acks.submit(Some(file("/a")), Some(position(1)));
    let r2 = acks.submit(Some(file("/a")), Some(position(2)));
    assert_eq!(acks.unacked(), 2);

    // r2 was never sent: it no longer blocks, and is not committed.
    assert!(acks.remove(&r2));
    assert_eq!(acks.unacked(), 1);
    assert!(!acks.remove(&r2), "already removed");
    r1.ack();
    let c = acks.committable();
    assert_eq!(c.offsets, vec![(Some(file("/a")), position(1))]);
    assert_eq!(c.committable_records, 1);
    assert_eq!(c.pending_records, 0);

    // Removing the head unblocks the acked records behind it, which commit their own offsets.
    let r3 = acks.submit(Some(file("/a")), Some(position(3)));
    let r4 = acks.submit(Some(file("/a")), Some(position(4)));
    r4.ack();
    assert!(acks.committable().offsets.is_empty());
    assert!(acks.remove(&r3));
    assert_eq!(
        acks.committable().offsets,
        vec![(Some(file("/a")), position(4))]
    );
    assert_eq!(acks.unacked(), 0);
    assert!(!acks.remove(&r4), "a committed record is no longer tracked");
}

#[test]
fn remove_then_resubmit() {
    let acks = AckTracker::new();
    let r1 = acks.submit(Some(file("/a")), Some(position(1)));
    assert!(acks.remove(&r1));
    let again = acks.submit(Some(file("/a")), Some(position(1)));
    assert!(
        !r1.ack() || r1.is_acked(),
        "acking a removed handle is harmless"
    );
    assert_eq!(acks.unacked(), 1);
    assert!(acks.committable().offsets.is_empty());
    again.ack();
    assert_eq!(
        acks.committable().offsets,
        vec![(Some(file("/a")), position(1))]
    );
}

#[test]
fn logically_equal_partitions_share_one_queue() {
    let acks = AckTracker::new();
    let r1 = acks.submit(Some(map([("a", 1i64), ("b", 2i64)])), Some(position(1)));
    let r2 = acks.submit(Some(map([("b", 2i64), ("a", 1i64)])), Some(position(2)));
    let r3 = acks.submit(Some(map([("a", 1i32), ("b", 2i32)])), Some(position(3)));
    r2.ack();
    r3.ack();
    let c = acks.committable();
    assert!(c.offsets.is_empty(), "r1 blocks the shared queue: {c:?}");
    assert_eq!(c.pending_partitions, 1);
    assert_eq!(c.pending_records, 3);
    r1.ack();
    let c = acks.committable();
    assert_eq!(c.offsets.len(), 1);
    assert_eq!(position_of(&c.offsets[0].1), 3);
}

#[test]
fn ack_is_idempotent() {
    let acks = AckTracker::new();
    let r1 = acks.submit(Some(file("/a")), Some(position(1)));
    let r2 = acks.submit(Some(file("/a")), Some(position(2)));
    assert!(r1.ack());
    assert!(!r1.ack());
    let clone = r1.clone();
    assert!(!clone.ack());
    assert_eq!(acks.unacked(), 1, "a repeated ack does not count twice");
    assert_eq!(positions(&acks.committable()), vec![(part(&file("/a")), 1)]);
    assert!(!r1.ack(), "acking a committed record changes nothing");
    assert_eq!(acks.unacked(), 1);
    assert!(acks.committable().offsets.is_empty());
    r2.ack();
    assert_eq!(acks.unacked(), 0);
}

#[test]
fn clones_share_state() {
    let acks = AckTracker::new();
    let other = acks.clone();
    let r = other.submit(Some(file("/a")), Some(position(1)));
    assert_eq!(acks.unacked(), 1);
    r.ack();
    assert_eq!(
        acks.committable().offsets,
        vec![(Some(file("/a")), position(1))]
    );
}

#[tokio::test]
async fn await_all_returns_true_when_everything_is_acked_from_another_task() {
    let acks = AckTracker::new();
    assert!(acks.await_all(Duration::ZERO).await, "nothing outstanding");

    let records: Vec<_> = (1..=3)
        .map(|i| acks.submit(Some(file("/a")), Some(position(i))))
        .collect();
    let acker = tokio::spawn(async move {
        for r in records.into_iter().rev() {
            tokio::time::sleep(Duration::from_millis(5)).await;
            r.ack();
        }
    });
    let started = Instant::now();
    assert!(acks.await_all(Duration::from_secs(5)).await);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(acks.unacked(), 0);
    acker.await.expect("join");
    assert_eq!(positions(&acks.committable()), vec![(part(&file("/a")), 3)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn await_all_sees_acks_from_other_threads() {
    let acks = AckTracker::new();
    let records: Vec<_> = (0..200)
        .map(|i| acks.submit(Some(file(&format!("/{}", i % 7))), Some(position(i))))
        .collect();
    let acker = std::thread::spawn(move || {
        for r in records {
            r.ack();
        }
    });
    assert!(acks.await_all(Duration::from_secs(5)).await);
    acker.join().expect("join");
    assert_eq!(acks.committable().offsets.len(), 7);
}

#[tokio::test]
async fn await_all_returns_false_after_the_timeout() {
    let acks = AckTracker::new();
    let r1 = acks.submit(Some(file("/a")), Some(position(1)));
    let _r2 = acks.submit(Some(file("/b")), Some(position(1)));
    r1.ack();
    let started = Instant::now();
    assert!(!acks.await_all(Duration::from_millis(50)).await);
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert_eq!(acks.unacked(), 1);
}

#[tokio::test]
async fn await_all_counts_removed_records_as_done() {
    let acks = AckTracker::new();
    let r = acks.submit(Some(file("/a")), Some(position(1)));
    let remover = tokio::spawn({
        let acks = acks.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            acks.remove(&r)
        }
    });
    assert!(acks.await_all(Duration::from_secs(5)).await);
    assert!(remover.await.expect("join"));
}

/// The tracker keeps the keys of a few recent partitions at hand; with many more partitions
/// interleaved (each submit evicting another's key) every partition still commits its own prefix.
#[test]
fn many_interleaved_partitions_each_commit_their_own_prefix() {
    let acks = AckTracker::new();
    let files: Vec<String> = (0..50).map(|i| format!("/f{i}")).collect();
    let mut handles = Vec::new();
    for round in 1..=3 {
        for f in &files {
            handles.push(acks.submit(Some(file(f)), Some(position(round))));
        }
    }
    // Rounds 1 and 2 acknowledged for every file, round 3 only for the even ones.
    for (i, h) in handles.iter().enumerate() {
        if i < 100 || (i - 100) % 2 == 0 {
            h.ack();
        }
    }
    let mut expected: Vec<(Option<String>, i64)> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (part(&file(f)), if i % 2 == 0 { 3 } else { 2 }))
        .collect();
    expected.sort();
    assert_eq!(positions(&acks.committable()), expected);
}

#[tokio::test]
async fn ack_all_acknowledges_each_record_once_and_wakes_a_waiter() {
    let acks = AckTracker::new();
    let handles: Vec<_> = (1..=5)
        .map(|i| acks.submit(Some(file("/a")), Some(position(i))))
        .collect();
    assert!(handles[1].ack());
    let waiter = {
        let acks = acks.clone();
        tokio::spawn(async move { acks.await_all(Duration::from_secs(10)).await })
    };
    let newly = ferry_offsets::SubmittedRecord::ack_all(handles.iter().cloned());
    assert_eq!(newly, 4, "the one acknowledged before is not counted again");
    assert_eq!(acks.unacked(), 0);
    assert!(waiter.await.unwrap());
    assert_eq!(positions(&acks.committable()), vec![(part(&file("/a")), 5)]);
}

/// `ack_all` over records of several partitions, interleaved and in runs, some already committed
/// (popped from their queue) and some acknowledged twice in the list: each record counts once, and
/// every partition's offset advances to its last record.
#[tokio::test]
async fn ack_all_over_interleaved_partitions_counts_each_record_once() {
    let acks = AckTracker::new();
    let committed = acks.submit(Some(file("/a")), Some(position(0)));
    assert!(committed.ack());
    assert_eq!(positions(&acks.committable()), vec![(part(&file("/a")), 0)]);
    let order = ["/a", "/a", "/b", "/a", "/b", "/b", "/c", "/a"];
    let handles: Vec<_> = order
        .iter()
        .enumerate()
        .map(|(i, f)| acks.submit(Some(file(f)), Some(position(i as i64 + 1))))
        .collect();
    let mut list = vec![committed.clone()];
    list.extend(handles.iter().cloned());
    list.push(handles[2].clone());
    let newly = ferry_offsets::SubmittedRecord::ack_all(list);
    assert_eq!(
        newly,
        order.len(),
        "each submitted record once; the committed one not again"
    );
    assert_eq!(acks.unacked(), 0);
    let mut expected = vec![
        (part(&file("/a")), 8),
        (part(&file("/b")), 6),
        (part(&file("/c")), 7),
    ];
    expected.sort();
    assert_eq!(positions(&acks.committable()), expected);
}
