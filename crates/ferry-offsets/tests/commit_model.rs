//! A property test of the whole commit cycle against a naive model: random interleavings of submits,
//! acks, commits, flushes that succeed or fail, cancels, and commits during an in-flight flush.
//!
//! Invariants, checked after every step:
//! (a) the store never holds an offset whose record, or any earlier record of its partition, is not
//!     acknowledged;
//! (c) a partition's stored offset never goes backwards;
//!
//! and at the end, after "ack everything, commit, begin_flush, flush":
//! (b) the store holds, for every partition, exactly the offset of its last submitted record.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

mod core_support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use core_support::{TestStore, map};
use ferry_api::{ConnectMap, Value};
use ferry_offsets::{
    AckTracker, FlushError, FlushGuard, OffsetBackingStore, OffsetWriter, SubmittedRecord,
    decode_value, encode_key,
};
use proptest::prelude::*;

const CONNECTOR: &str = "model";
const PARTITIONS: usize = 4;

#[derive(Debug, Clone)]
enum Op {
    /// Submit the next record of partition `p`; `wide` picks the integer width of the partition map
    /// (logically the same partition either way).
    Submit {
        p: usize,
        wide: bool,
    },
    /// Acknowledge the n-th (mod count) unacknowledged record.
    Ack(usize),
    /// `committable()` → stage into the writer.
    Commit,
    BeginFlush,
    /// `flush()` with a working store.
    Flush,
    /// `flush()` with a failing store.
    FlushFail,
    CancelFlush,
    /// `flush()` whose store write is held while the task commits (stages newer offsets).
    FlushWithCommitDuring,
    /// `flush()` whose store write is held while the committer cancels it and commits again; the write
    /// then completes late.
    CancelDuringFlush,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..PARTITIONS, any::<bool>()).prop_map(|(p, wide)| Op::Submit { p, wide }),
        4 => any::<usize>().prop_map(Op::Ack),
        2 => Just(Op::Commit),
        2 => Just(Op::BeginFlush),
        2 => Just(Op::Flush),
        1 => Just(Op::FlushFail),
        1 => Just(Op::CancelFlush),
        1 => Just(Op::FlushWithCommitDuring),
        1 => Just(Op::CancelDuringFlush),
    ]
}

/// Partition 3 is Kafka Connect's null partition; the others are `{"partition": p}`.
fn partition(p: usize, wide: bool) -> Option<ConnectMap> {
    let n = i32::try_from(p).expect("small");
    match (p, wide) {
        (3, _) => None,
        (_, true) => Some(map([("partition", Value::Int64(n.into()))])),
        (_, false) => Some(map([("partition", Value::Int32(n))])),
    }
}

fn offset(seq: i64) -> ConnectMap {
    map([("seq", seq)])
}

struct Model {
    store: Arc<TestStore>,
    writer: Arc<OffsetWriter>,
    /// The begun flush, if any (`writer.is_flushing()` exactly when it is `Some`).
    flush: Option<FlushGuard>,
    acks: AckTracker,
    /// Per partition, the handles of submitted records in order; record i has seq i + 1.
    records: Vec<Vec<SubmittedRecord>>,
    /// Per partition, which records the model acknowledged.
    acked: Vec<Vec<bool>>,
    /// Per partition, the last stored seq seen.
    last_stored: Vec<Option<i64>>,
}

impl Model {
    fn new() -> Self {
        let store = TestStore::new();
        let dyn_store: Arc<dyn OffsetBackingStore> = store.clone();
        Self {
            writer: Arc::new(OffsetWriter::new(CONNECTOR, dyn_store)),
            flush: None,
            store,
            acks: AckTracker::new(),
            records: vec![Vec::new(); PARTITIONS],
            acked: vec![Vec::new(); PARTITIONS],
            last_stored: vec![None; PARTITIONS],
        }
    }

    fn commit(&self) {
        for (partition, offset) in self.acks.committable().offsets {
            self.writer.stage(partition, Some(offset));
        }
    }

    fn unacked(&self) -> Vec<(usize, usize)> {
        (0..PARTITIONS)
            .flat_map(|p| {
                self.acked[p]
                    .iter()
                    .enumerate()
                    .filter(|(_, a)| !**a)
                    .map(move |(i, _)| (p, i))
            })
            .collect()
    }

    fn ack(&mut self, p: usize, i: usize) {
        assert!(
            self.records[p][i].ack(),
            "first ack of a record returns true"
        );
        self.acked[p][i] = true;
    }

    /// Starts the begun flush with its store write held at the gate; returns its task.
    async fn held_flush(
        &self,
        flush: FlushGuard,
    ) -> tokio::task::JoinHandle<Result<(), FlushError>> {
        self.store.block_set.store(true, Ordering::SeqCst);
        let task = tokio::spawn(async move { flush.flush().await });
        self.store.wait_entered().await;
        self.store.block_set.store(false, Ordering::SeqCst);
        task
    }

    async fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let flushing = self.writer.is_flushing();
        match *op {
            Op::Submit { p, wide } => {
                let seq = i64::try_from(self.records[p].len()).expect("small") + 1;
                self.records[p].push(self.acks.submit(partition(p, wide), Some(offset(seq))));
                self.acked[p].push(false);
            }
            Op::Ack(n) => {
                let unacked = self.unacked();
                if !unacked.is_empty() {
                    let (p, i) = unacked[n % unacked.len()];
                    self.ack(p, i);
                }
            }
            Op::Commit => self.commit(),
            Op::BeginFlush => {
                let staged = self.writer.staged_len();
                match self.writer.begin_flush(Duration::ZERO).await {
                    Ok(begun) => {
                        prop_assert!(!flushing, "begin_flush succeeded while a flush was running");
                        prop_assert_eq!(begun.is_some(), staged > 0);
                        self.flush = begun;
                    }
                    Err(FlushError::FlushInProgress { .. }) => {
                        prop_assert!(flushing, "FlushInProgress without a flush")
                    }
                    Err(e) => return Err(TestCaseError::fail(format!("begin_flush: {e}"))),
                }
            }
            // Without a begun flush there is no guard to flush: the writer must agree it is idle.
            Op::Flush => match self.flush.take() {
                None => prop_assert!(!flushing),
                Some(flush) => match flush.flush().await {
                    Ok(()) => prop_assert!(flushing),
                    Err(e) => return Err(TestCaseError::fail(format!("flush: {e}"))),
                },
            },
            Op::FlushFail => {
                let Some(flush) = self.flush.take() else {
                    prop_assert!(!flushing);
                    return Ok(());
                };
                self.store.fail_set.store(true, Ordering::SeqCst);
                let result = flush.flush().await;
                self.store.fail_set.store(false, Ordering::SeqCst);
                match result {
                    Err(FlushError::Store { .. }) => prop_assert!(flushing),
                    other => {
                        return Err(TestCaseError::fail(format!(
                            "failing flush returned {other:?}"
                        )));
                    }
                }
                prop_assert!(!self.writer.is_flushing());
            }
            Op::CancelFlush => {
                if let Some(flush) = self.flush.take() {
                    flush.cancel();
                }
                prop_assert!(!self.writer.is_flushing());
            }
            Op::FlushWithCommitDuring => {
                if let Some(flush) = self.flush.take() {
                    let task = self.held_flush(flush).await;
                    self.commit();
                    self.store.release_one();
                    task.await
                        .map_err(|e| TestCaseError::fail(e.to_string()))?
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                }
            }
            Op::CancelDuringFlush => {
                if let Some(flush) = self.flush.take() {
                    let canceller = flush.canceller();
                    let task = self.held_flush(flush).await;
                    canceller.cancel();
                    self.commit();
                    // The cancelled write is still running: a new flush must not overtake it.
                    let overtaking = self.writer.begin_flush(Duration::ZERO).await;
                    prop_assert!(
                        matches!(overtaking, Err(FlushError::FlushInProgress { .. })),
                        "a flush began while a cancelled write was still running: {:?}",
                        overtaking
                    );
                    self.store.release_one();
                    task.await
                        .map_err(|e| TestCaseError::fail(e.to_string()))?
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert!(!self.writer.is_flushing());
                }
            }
        }
        Ok(())
    }

    async fn stored(&self, p: usize) -> Option<i64> {
        let key = encode_key(CONNECTOR, partition(p, true).as_ref());
        let value = self
            .store
            .inner
            .get(&[key])
            .await
            .expect("memory store get")
            .pop()
            .flatten()?;
        let offset = decode_value(&value).expect("stored offsets decode");
        offset.get("seq").and_then(Value::as_i64)
    }

    async fn check(&mut self, step: &str) -> Result<(), TestCaseError> {
        for p in 0..PARTITIONS {
            let stored = self.stored(p).await;
            if let Some(seq) = stored {
                let upto = usize::try_from(seq).expect("positive");
                prop_assert!(
                    upto <= self.records[p].len(),
                    "{}: partition {} stores seq {} never submitted",
                    step,
                    p,
                    seq
                );
                prop_assert!(
                    self.acked[p][..upto].iter().all(|a| *a),
                    "{}: partition {} stores seq {} but acked is {:?}",
                    step,
                    p,
                    seq,
                    self.acked[p]
                );
            }
            prop_assert!(
                stored >= self.last_stored[p],
                "{}: partition {} went backwards from {:?} to {:?}",
                step,
                p,
                self.last_stored[p],
                stored
            );
            self.last_stored[p] = stored;
        }
        Ok(())
    }

    async fn finish(&mut self) -> Result<(), TestCaseError> {
        // The committer gives up on a flush that is still begun, then the task stops cleanly.
        if let Some(flush) = self.flush.take() {
            flush.cancel();
        }
        for (p, i) in self.unacked() {
            self.ack(p, i);
        }
        let committable = self.acks.committable();
        prop_assert_eq!(committable.pending_records, 0);
        for (partition, offset) in committable.offsets {
            self.writer.stage(partition, Some(offset));
        }
        if let Some(flush) = self
            .writer
            .begin_flush(Duration::ZERO)
            .await
            .map_err(|e| TestCaseError::fail(e.to_string()))?
        {
            flush
                .flush()
                .await
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        self.check("final").await?;
        for p in 0..PARTITIONS {
            let last = i64::try_from(self.records[p].len()).expect("small");
            let want = (last > 0).then_some(last);
            prop_assert_eq!(
                self.stored(p).await,
                want,
                "partition {} lost its newest offset",
                p
            );
        }
        prop_assert_eq!(self.writer.staged_len(), 0);
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn commit_cycle_matches_the_model(ops in proptest::collection::vec(op(), 0..80)) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        runtime.block_on(async {
            let mut model = Model::new();
            for (i, op) in ops.iter().enumerate() {
                model.apply(op).await?;
                model.check(&format!("step {i} ({op:?})")).await?;
            }
            model.finish().await
        })?;
    }
}
