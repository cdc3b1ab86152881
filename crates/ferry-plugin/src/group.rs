//! Distributed mode's group membership, as the herder sees it: which **slots** this worker holds.
//!
//! A slot is either a connector's task (slot p of connector c = task p; the owner of slot 0 also runs
//! the connector instance) or the group's single **leader** slot, whose owner serializes the REST
//! writes of the whole cluster (as Kafka Connect's leader does). A backend (Kafka: a consumer group
//! whose partitions are the slots) implements [`WorkerGroup`] and calls a [`GroupHandler`] when the
//! slots move. Here, not in the runtime or in ferry-kafka, so that neither names the other.

use std::time::Duration;

use async_trait::async_trait;

use crate::herder_state::TaskId;

/// One unit of ownership in the group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Slot {
    /// The leader slot: its owner serves the cluster's REST writes (others forward to it).
    Leader,
    /// A connector's task slot (task 0 also means the connector instance).
    Task(TaskId),
}

/// What a worker does when its slots change. The group calls it from one thread, one call at a time,
/// in rebalance order; calls may block (they run off the async runtime).
pub trait GroupHandler: Send + Sync + 'static {
    /// These slots are now this worker's.
    fn assigned(&self, slots: &[Slot]);
    /// These slots move away: stop what runs in them and commit its offsets **before returning**.
    /// The group gives them to another worker only after this returns (or its timeout passed).
    fn revoked(&self, slots: &[Slot]);
    /// These slots were lost (this worker's session expired): stop at once and commit nothing —
    /// another worker may already own them.
    fn lost(&self, slots: &[Slot]);
}

/// A group call failed; the message says what, where and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct GroupError {
    /// What failed.
    pub message: String,
    /// Whether trying again may succeed (the broker did not answer, a rebalance is under way).
    pub retriable: bool,
}

impl GroupError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>, retriable: bool) -> Self {
        Self {
            message: message.into(),
            retriable,
        }
    }
}

/// This worker's membership in the group of workers.
#[async_trait]
pub trait WorkerGroup: Send + Sync {
    /// The group, for logs ("consumer group connect-cluster on localhost:9092").
    fn describe(&self) -> String;
    /// Makes `connector`'s task slots `0..slots` part of the group (idempotent; a larger `slots`
    /// grows them, a smaller one may leave extra slots the herder ignores).
    async fn add_connector(&self, connector: &str, slots: usize) -> Result<(), GroupError>;
    /// Drops `connector`'s slots from the group: their owners get [`GroupHandler::revoked`].
    async fn remove_connector(&self, connector: &str) -> Result<(), GroupError>;
    /// The REST base URL (`http://host:port`) the current leader published, if any. It can be stale
    /// during a rebalance: the worker forwarded to answers 409 when it is no longer the leader.
    async fn leader_url(&self) -> Result<Option<String>, GroupError>;
    /// Leaves the group: every slot is revoked through the handler first. Waits up to `timeout`.
    async fn leave(&self, timeout: Duration) -> Result<(), GroupError>;
}

/// How recently the group coordinator confirmed this worker's membership: the bound on how long a
/// worker that lost contact (frozen by SIGSTOP or a long pause, cut off from the brokers) goes on
/// acting on tasks the group may have given away meanwhile — Kafka Connect's KAFKA-9184 rule.
///
/// The group backend [`confirm`](Self::confirm)s it whenever the coordinator accepts a request that
/// only a current member may make, stamped with the time the request was *sent*; the lease is valid
/// for [`validity`](Self::validity) after that. Tasks check it before sending each record and hold
/// their records while it is not valid, so a worker waking from a freeze sends nothing before the
/// coordinator has either confirmed it or told it its tasks are lost. Offsets need no lease: the
/// store fences them ([`ferry_offsets::OffsetBackingStore::open_task_writer`]).
#[derive(Debug)]
pub struct MembershipLease {
    base: std::time::Instant,
    /// When the last confirmed request was sent, in microseconds since `base`.
    confirmed_us: std::sync::atomic::AtomicU64,
    validity: Duration,
    confirmed: tokio::sync::Notify,
}

impl MembershipLease {
    /// A lease valid for `validity` after each confirmation; valid now (a worker gets its first
    /// tasks from the coordinator, which confirms it).
    pub fn new(validity: Duration) -> Self {
        Self {
            base: std::time::Instant::now(),
            confirmed_us: std::sync::atomic::AtomicU64::new(0),
            validity,
            confirmed: tokio::sync::Notify::new(),
        }
    }

    /// How long a confirmation holds.
    pub fn validity(&self) -> Duration {
        self.validity
    }

    fn micros(&self, at: std::time::Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.base).as_micros()).unwrap_or(u64::MAX)
    }

    /// The coordinator accepted a request sent at `sent`: the lease runs from there (never backwards).
    pub fn confirm(&self, sent: std::time::Instant) {
        let at = self.micros(sent);
        self.confirmed_us
            .fetch_max(at, std::sync::atomic::Ordering::AcqRel);
        self.confirmed.notify_waiters();
    }

    /// Extends the lease from `now` if it was still valid at `now`: what a worker that owns no slot
    /// does, having no task to hold back. A lapsed lease is not revived this way: a worker woken
    /// from a freeze finds its slots gone while the tasks it ran are still stopping, and those must
    /// not send. Only a coordinator's [`confirm`](Self::confirm)ation revives it.
    pub fn extend(&self, now: std::time::Instant) {
        if self.age_at(now) < self.validity {
            self.confirm(now);
        }
    }

    /// How long ago the last confirmed request was sent.
    pub fn age(&self) -> Duration {
        self.age_at(std::time::Instant::now())
    }

    /// How long before `now` the last confirmed request was sent.
    fn age_at(&self, now: std::time::Instant) -> Duration {
        let now = self.micros(now);
        let at = self.confirmed_us.load(std::sync::atomic::Ordering::Acquire);
        Duration::from_micros(now.saturating_sub(at))
    }

    /// Whether the last confirmation is recent enough to act on the worker's tasks.
    pub fn is_valid(&self) -> bool {
        self.age() < self.validity
    }

    /// Resolves once the lease is valid (at once if it is).
    pub async fn valid(&self) {
        loop {
            let confirmed = self.confirmed.notified();
            tokio::pin!(confirmed);
            confirmed.as_mut().enable();
            if self.is_valid() {
                return;
            }
            confirmed.await;
        }
    }
}

#[cfg(test)]
mod lease_tests {
    use std::time::{Duration, Instant};

    use super::MembershipLease;

    #[tokio::test]
    async fn a_lease_expires_without_confirmation_and_a_confirmation_wakes_its_waiters() {
        let lease = std::sync::Arc::new(MembershipLease::new(Duration::from_millis(50)));
        assert!(lease.is_valid(), "valid when made");
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert!(!lease.is_valid(), "expired after its validity");
        let waiter = tokio::spawn({
            let lease = lease.clone();
            async move { lease.valid().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "waits while expired");
        // A confirmation of a request sent before the expiry does not revive it…
        lease.confirm(Instant::now() - Duration::from_millis(200));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "an old confirmation does not count");
        // …a fresh one does.
        lease.confirm(Instant::now());
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken by the confirmation")
            .expect("waiter");
        assert!(lease.is_valid());
    }

    /// A worker that owns no slot extends a valid lease, but one that lapsed (a worker frozen past
    /// it, whose slots were taken while its tasks still stop) stays lapsed until the coordinator
    /// confirms it. Extending it revived a frozen worker's lease as soon as it woke without its
    /// slots, and its stopping tasks sent records another worker had already sent
    /// (`a_frozen_worker_whose_tasks_moved_sends_and_commits_nothing_when_it_wakes`, 1 fresh-clone run).
    #[test]
    fn extending_keeps_a_valid_lease_and_never_revives_a_lapsed_one() {
        let lease = MembershipLease::new(Duration::from_millis(50));
        let start = Instant::now();
        lease.extend(start + Duration::from_millis(40));
        assert!(
            lease.age() < Duration::from_millis(40),
            "a valid lease is extended from the time given"
        );
        let lapsed = start + Duration::from_millis(40) + Duration::from_millis(60);
        lease.extend(lapsed);
        std::thread::sleep(Duration::from_millis(110).saturating_sub(start.elapsed()));
        assert!(
            !lease.is_valid(),
            "a lapsed lease is not revived by extending it"
        );
        lease.confirm(Instant::now());
        assert!(lease.is_valid(), "a confirmation revives it");
    }
}
