//! Whether the worker's offset store can still commit.
//!
//! A store that fails with a non-retriable error (a file store poisoned by a failed append or
//! `fdatasync`, e.g. on a full disk) will not commit again in this process. Tasks that kept running
//! would deliver records whose offsets are never committed — all of them delivered again after a
//! restart, without bound. So the first such failure is recorded here once, every task of the worker
//! is told (and fails with it as its trace), tasks started later fail at once, and the process exits
//! non-zero at shutdown ([`crate::Worker::store_failure`]).

use tokio::sync::watch;

/// The worker-wide verdict on its offset store: `None` while it commits.
#[derive(Debug)]
pub(crate) struct StoreHealth {
    failure: watch::Sender<Option<String>>,
}

impl StoreHealth {
    pub(crate) fn new() -> Self {
        Self {
            failure: watch::Sender::new(None),
        }
    }

    /// Records that the store can no longer commit; the first reason is kept. Returns whether this
    /// call recorded it.
    pub(crate) fn fail(&self, reason: String) -> bool {
        let recorded = self.failure.send_if_modified(|slot| {
            if slot.is_some() {
                return false;
            }
            *slot = Some(reason.clone());
            true
        });
        if recorded {
            tracing::error!("the offset store cannot commit any more; every task stops: {reason}");
        }
        recorded
    }

    /// Why the store can no longer commit, if it cannot.
    pub(crate) fn failure(&self) -> Option<String> {
        self.failure.borrow().clone()
    }

    /// Wakes on [`StoreHealth::fail`].
    pub(crate) fn subscribe(&self) -> watch::Receiver<Option<String>> {
        self.failure.subscribe()
    }
}

/// The task trace for a store failure: what failed, what the task did, and the way out.
pub(crate) fn store_failure_trace(error: &str) -> String {
    format!(
        "the offset store cannot commit any more: {error}. The task stopped polling, so that no more \
         records are delivered whose offsets cannot be committed; records delivered since the last \
         successful commit will be delivered again. Fix the cause (e.g. free disk space), then restart \
         the worker process: a task or connector restart does not reopen the store"
    )
}
