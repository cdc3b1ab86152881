//! The task's [`TransactionContext`] (`transaction.boundary=connector`), Kafka Connect's
//! `WorkerTransactionContext`: the task records requests; the loop asks, at each record and at the
//! end of each batch, whether the open transaction ends there ([`super::exactly_once`] commits or
//! aborts it).
//!
//! Why a request at a record compares records by value: a task hands its records over when `poll`
//! returns, so it can only name one by an equal copy (Kafka Connect compares with `equals` too).

use std::sync::{Mutex, MutexGuard};

use ferry_api::{SourceRecord, TransactionContext};

/// Record-level requests a task may have pending at once. A task that names records it never returns
/// would otherwise grow the list forever; past the limit the task fails (dropping an abort request
/// would commit records the task wanted discarded).
pub(crate) const MAX_RECORD_REQUESTS: usize = 10_000;

/// How the open transaction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Boundary {
    Commit,
    Abort,
}

/// Why a task's transaction requests cannot be followed (`transaction.boundary=connector`): the task
/// fails with it. Its text starts with "invalid transaction boundaries", as the task's trace shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BoundaryError {
    /// A commit and an abort at the same record.
    #[error(
        "invalid transaction boundaries: the task requested both a commit and an abort of the \
         transaction at the same record (topic {topic}, partition {partition:?})"
    )]
    CommitAndAbortAtRecord {
        /// The record's topic.
        topic: String,
        /// The record's Kafka partition, if it names one.
        partition: Option<i32>,
    },
    /// A commit and an abort of the transaction of one batch.
    #[error(
        "invalid transaction boundaries: the task requested both a commit and an abort of the same \
         transaction"
    )]
    CommitAndAbort,
    /// More record-level requests than the limit, none matched by a sent record.
    #[error(
        "invalid transaction boundaries: the task made more than {limit} record-level transaction \
         requests that no sent record matched (a request names a record the task returns from poll, \
         equal to it)"
    )]
    TooManyRequests {
        /// [`MAX_RECORD_REQUESTS`], or a test's limit.
        limit: usize,
    },
}

#[derive(Default)]
struct Requests {
    batch_commit: bool,
    batch_abort: bool,
    commit_at: Vec<SourceRecord>,
    abort_at: Vec<SourceRecord>,
    /// A request past [`MAX_RECORD_REQUESTS`] was made.
    overflowed: bool,
}

/// One task instance's transaction context.
pub(crate) struct WorkerTransactionContext {
    requests: Mutex<Requests>,
    limit: usize,
}

impl Default for WorkerTransactionContext {
    fn default() -> Self {
        Self::with_limit(MAX_RECORD_REQUESTS)
    }
}

impl WorkerTransactionContext {
    pub(crate) fn with_limit(limit: usize) -> Self {
        Self {
            requests: Mutex::default(),
            limit,
        }
    }

    fn requests(&self) -> MutexGuard<'_, Requests> {
        // Every critical section leaves the requests consistent.
        self.requests.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn request_at(&self, record: &SourceRecord, abort: bool) {
        let mut requests = self.requests();
        if requests.commit_at.len() + requests.abort_at.len() >= self.limit {
            requests.overflowed = true;
            return;
        }
        let list = if abort {
            &mut requests.abort_at
        } else {
            &mut requests.commit_at
        };
        list.push(record.clone());
    }

    /// Whether the transaction ends right after `record` (as the task returned it) was sent or
    /// dropped; the request is consumed.
    ///
    /// # Errors
    /// The task asked for both a commit and an abort at this record, or made more record-level
    /// requests than [`MAX_RECORD_REQUESTS`]: it fails.
    pub(crate) fn at_record(
        &self,
        record: &SourceRecord,
    ) -> Result<Option<Boundary>, BoundaryError> {
        let mut requests = self.requests();
        self.check(&requests)?;
        if requests.commit_at.is_empty() && requests.abort_at.is_empty() {
            return Ok(None);
        }
        let commit = take(&mut requests.commit_at, record);
        let abort = take(&mut requests.abort_at, record);
        match (commit, abort) {
            (true, true) => Err(BoundaryError::CommitAndAbortAtRecord {
                topic: record.topic.clone(),
                partition: record.kafka_partition,
            }),
            (true, false) => Ok(Some(Boundary::Commit)),
            (false, true) => Ok(Some(Boundary::Abort)),
            (false, false) => Ok(None),
        }
    }

    /// Whether the transaction ends after the current batch; the request is consumed.
    ///
    /// # Errors
    /// The task asked for both a commit and an abort of the transaction, or made too many
    /// record-level requests: it fails.
    pub(crate) fn after_batch(&self) -> Result<Option<Boundary>, BoundaryError> {
        let mut requests = self.requests();
        self.check(&requests)?;
        let (commit, abort) = (requests.batch_commit, requests.batch_abort);
        requests.batch_commit = false;
        requests.batch_abort = false;
        match (commit, abort) {
            (true, true) => Err(BoundaryError::CommitAndAbort),
            (true, false) => Ok(Some(Boundary::Commit)),
            (false, true) => Ok(Some(Boundary::Abort)),
            (false, false) => Ok(None),
        }
    }

    fn check(&self, requests: &Requests) -> Result<(), BoundaryError> {
        if requests.overflowed {
            return Err(BoundaryError::TooManyRequests { limit: self.limit });
        }
        Ok(())
    }
}

/// Removes `record` from `list`; returns whether it was there.
fn take(list: &mut Vec<SourceRecord>, record: &SourceRecord) -> bool {
    match list.iter().position(|r| r == record) {
        Some(at) => {
            list.swap_remove(at);
            true
        }
        None => false,
    }
}

impl TransactionContext for WorkerTransactionContext {
    fn commit_transaction(&self) {
        self.requests().batch_commit = true;
    }

    fn commit_transaction_at(&self, record: &SourceRecord) {
        self.request_at(record, false);
    }

    fn abort_transaction(&self) {
        self.requests().batch_abort = true;
    }

    fn abort_transaction_at(&self, record: &SourceRecord) {
        self.request_at(record, true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(n: i64) -> SourceRecord {
        SourceRecord::builder("t")
            .value(serde_json::json!(n))
            .build()
    }

    #[test]
    fn requests_are_answered_once_and_a_contradiction_or_an_overflow_fails() {
        let context = WorkerTransactionContext::with_limit(2);
        assert_eq!(context.after_batch(), Ok(None));
        context.commit_transaction();
        assert_eq!(context.after_batch(), Ok(Some(Boundary::Commit)));
        assert_eq!(context.after_batch(), Ok(None), "consumed");
        context.abort_transaction();
        assert_eq!(context.after_batch(), Ok(Some(Boundary::Abort)));

        context.commit_transaction_at(&record(1));
        context.abort_transaction_at(&record(2));
        assert_eq!(context.at_record(&record(3)), Ok(None));
        assert_eq!(context.at_record(&record(2)), Ok(Some(Boundary::Abort)));
        assert_eq!(context.at_record(&record(1)), Ok(Some(Boundary::Commit)));
        assert_eq!(context.at_record(&record(1)), Ok(None), "consumed");

        context.commit_transaction();
        context.abort_transaction();
        assert_eq!(context.after_batch(), Err(BoundaryError::CommitAndAbort));
        context.commit_transaction_at(&record(4));
        context.abort_transaction_at(&record(4));
        let both = context.at_record(&record(4)).unwrap_err();
        assert!(
            matches!(both, BoundaryError::CommitAndAbortAtRecord { .. }),
            "{both}"
        );
        assert!(
            both.to_string().contains("both a commit and an abort"),
            "{both}"
        );

        // Past the limit: the task fails rather than lose a request.
        let context = WorkerTransactionContext::with_limit(2);
        for n in 0..3 {
            context.abort_transaction_at(&record(n));
        }
        let overflow = context.at_record(&record(0)).unwrap_err();
        assert_eq!(overflow, BoundaryError::TooManyRequests { limit: 2 });
        assert!(overflow.to_string().contains("more than 2"), "{overflow}");
        assert!(context.after_batch().is_err());
    }
}
