//! The late-commit guard: the source never moves past a position that a transaction still open in
//! the database could yet write below, so a row committed late is read, once, in every mode — without
//! guessing a `timestamp.delay.interval.ms`.
//!
//! # Why not the snapshot's xmin
//!
//! Filtering rows by their `xmin` against `pg_snapshot_xmin(pg_current_snapshot())` bounds *which
//! transactions* are finished, not *which keys* they wrote: a transaction with a high xid can hold a
//! low sequence value (it called `nextval` before another transaction with a lower xid did), and a
//! transaction that has not written yet has no xid at all (it is in no snapshot) yet already owns its
//! `now()`. The guard therefore bounds keys by transaction *start times*.
//!
//! # The argument
//!
//! Assumption (what incrementing and timestamp sources rely on anyway): a row's key is generated when
//! the row is written, by a generator `G` that only grows with time — a sequence with `CACHE 1`
//! (`nextval` is strictly increasing), or the clock (`now()` is the writing transaction's start,
//! `clock_timestamp()` later). So a row written by a transaction `T` has a key `≥ G(start(T))` (`>` for
//! a sequence), and a row written before instant `t` has a key `≤ G(t)`.
//!
//! Each round first reads, in a statement of its own (its own transaction, so `pg_stat_activity` is
//! read fresh), `A = statement_timestamp()` and the start (`xact_start`) of every other transaction
//! open in the database; `B = min(A, those starts)`. The round's read then takes its snapshot `S`
//! after `A`. Any row not visible in `S` that will become visible later is written by a transaction
//! `T` that is open at `S` or starts after it. If `T` started before the activity was read it was open
//! then too (it is still open at `S`, later), so it was listed and `start(T) ≥ B`; otherwise
//! `start(T) ≥ A ≥ B`. (PostgreSQL sets a backend's `xact_start` when the transaction starts and clears
//! it only after its commit is visible, so no transaction is missed in between.) Hence every row that
//! can still appear has a key `≥ G(B)`:
//!
//! - timestamp modes: the key is the timestamp, `G(B) = B`: reading only rows with `ts < B` (the end
//!   bound, together with `now - timestamp.delay.interval.ms`) can never pass a row that appears later;
//! - incrementing: `G(B)` is not known directly, so a round also records `(t, V)`: `V` the highest key
//!   visible in a snapshot taken before instant `t`, so `V ≤ G(t)`. In a later (or the same) round
//!   with `t < B`, every row still to appear has a key `> G(B) ≥ G(t) ≥ V`: reading up to `V` is safe.
//!   The round reads `inc > position AND inc <= V` with the highest such `V`.
//!
//! What the guard cannot see: keys not generated at write time (an application that writes an old
//! timestamp or an explicit low id), sequences with `CACHE > 1` (a session hands out cached values
//! later), and transactions of other users when the connector's user may not read their
//! `pg_stat_activity` rows (superuser or `pg_read_all_stats` needed; a WARN at start says so).
//! Prepared (two-phase) transactions are not in `pg_stat_activity` and are not seen either.
//! PostgresSource's own read-only connections (application name `ferry PostgresSource`, no xid) and
//! autovacuum are not waited for.
//!
//! # Bounded waiting
//!
//! A transaction open longer than `ferry.late.commit.max.wait.ms` is no longer waited for (it is
//! left out of `B`, with a WARN): rows it commits later below the position are skipped, as Kafka
//! Connect's JDBC source would. Before that, a transaction holding the source back for a while is
//! named in a WARN (pid, user, state, age, query).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use ferry_api::ConnectError;

use super::conn::Db;
use super::time::Micros;

/// Rounds that found the source held back by an open transaction older than the warning threshold,
/// over the process. No metrics seam reaches connectors yet; this counter is what one would export.
static HELD_BACK_ROUNDS: AtomicU64 = AtomicU64::new(0);

/// How many rounds (process-wide) found the source held back by a transaction open for a while: the
/// gauge a metrics endpoint would export (none reaches connectors yet).
pub fn held_back_rounds() -> u64 {
    HELD_BACK_ROUNDS.load(Ordering::Relaxed)
}

/// The longest a transaction holds the source back before a WARN names it.
const WARN_AFTER: Duration = Duration::from_secs(5);
/// The most `(t, V)` candidates kept per table.
const MAX_CANDIDATES: usize = 64;

/// The other transactions open in the database: `A`, the oldest start still waited for, and the
/// [`REPORTED`] oldest transactions (one row each; one row of NULLs when none is open).
const HORIZON: &str = "WITH open AS ( \
       SELECT pid, xact_start, state, usename, left(query, 300) AS query \
       FROM pg_catalog.pg_stat_activity \
       WHERE xact_start IS NOT NULL AND pid <> pg_backend_pid() AND datname = current_database() \
         AND backend_type NOT IN ('autovacuum worker', 'autovacuum launcher', 'walsender') \
         AND NOT (application_name = 'ferry PostgresSource' AND backend_xid IS NULL)) \
     SELECT statement_timestamp(), \
       (SELECT min(xact_start) FROM open \
         WHERE xact_start >= statement_timestamp() - $1::int8 * interval '1 millisecond'), \
       o.pid, o.xact_start, o.state, o.usename, o.query \
     FROM (SELECT 1) AS one LEFT JOIN LATERAL (SELECT * FROM open ORDER BY xact_start LIMIT 3) AS o ON true";

/// How many of the oldest open transactions a round looks at for its WARNs (the `LIMIT` above).
const REPORTED: usize = 3;
/// How many transactions' WARNs are remembered, so each is named once.
const REMEMBERED: usize = 32;

/// Whether the connector's user may see every backend's transaction.
const CAN_SEE_ALL: &str = "SELECT r.rolsuper OR pg_has_role(current_user, 'pg_read_all_stats', 'MEMBER') \
     FROM pg_catalog.pg_roles r WHERE r.rolname = current_user";

/// One of the oldest other open transactions.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Blocker {
    pid: i32,
    start: Micros,
    state: String,
    user: String,
    query: String,
}

/// What the guard found before a round.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Horizon {
    /// `B`: no row that can still appear has a key below `G(B)`.
    pub(crate) bound: Micros,
}

/// The task's guard: its settings and the blockers it warned about.
pub(crate) struct Guard {
    max_wait: Duration,
    /// Transactions already named in a WARN: (pid, start, whether no longer waited for).
    warned: VecDeque<(i32, Micros, bool)>,
}

impl Guard {
    /// A guard that waits at most `max_wait` for a transaction; warns at start when the user cannot
    /// see other users' transactions.
    pub(crate) async fn new(max_wait: Duration, db: &Db) -> Result<Guard, ConnectError> {
        let all = db
            .client
            .query_one(CAN_SEE_ALL, &[])
            .await
            .map_err(|e| db.error("checking whether the user can see every transaction", &e))?;
        if !all.try_get::<_, bool>(0).unwrap_or(false) {
            tracing::warn!(
                "PostgresSource: the user of {} can see only its own transactions in pg_stat_activity, so \
                 rows committed late by other users' transactions can be skipped; grant it pg_read_all_stats \
                 (GRANT pg_read_all_stats TO <user>)",
                db.describe
            );
        }
        Ok(Guard {
            max_wait,
            warned: VecDeque::new(),
        })
    }

    /// Reads the horizon (one statement in its own transaction: call it outside a round).
    pub(crate) async fn horizon(&mut self, db: &Db, name: &str) -> Result<Horizon, ConnectError> {
        let wait_ms = i64::try_from(self.max_wait.as_millis()).unwrap_or(i64::MAX);
        let rows = db
            .client
            .query(HORIZON, &[&wait_ms])
            .await
            .map_err(|e| db.error("reading the open transactions (pg_stat_activity)", &e))?;
        let bad = |m: String| ConnectError::fatal(format!("PostgresSource: pg_stat_activity: {m}"));
        let Some(first) = rows.first() else {
            return Err(bad("no row".to_owned()));
        };
        let at = Micros::from_system_time(
            first
                .try_get::<_, SystemTime>(0)
                .map_err(|e| bad(e.to_string()))?,
        );
        let young = first
            .try_get::<_, Option<SystemTime>>(1)
            .map_err(|e| bad(e.to_string()))?
            .map(Micros::from_system_time);
        let mut held_back = false;
        for row in rows.iter().take(REPORTED) {
            let Some(pid) = row
                .try_get::<_, Option<i32>>(2)
                .map_err(|e| bad(e.to_string()))?
            else {
                continue;
            };
            let blocker = Blocker {
                pid,
                start: row
                    .try_get::<_, Option<SystemTime>>(3)
                    .ok()
                    .flatten()
                    .map_or(at, Micros::from_system_time),
                state: text(row, 4),
                user: text(row, 5),
                query: text(row, 6),
            };
            held_back |= self.report(name, at, &blocker);
        }
        if held_back {
            HELD_BACK_ROUNDS.fetch_add(1, Ordering::Relaxed);
        }
        let bound = young.map_or(at, |y| y.min(at));
        Ok(Horizon { bound })
    }

    /// Warns (once per transaction) about a transaction that holds the source back, and when it is no
    /// longer waited for. Returns whether it held the source back for a while.
    fn report(&mut self, name: &str, at: Micros, b: &Blocker) -> bool {
        let age = Duration::from_micros(u64::try_from(at.0.saturating_sub(b.start.0)).unwrap_or(0));
        let expired = age >= self.max_wait;
        if !expired && age < WARN_AFTER.min(self.max_wait / 2) {
            return false;
        }
        let id = (b.pid, b.start, expired);
        if !self.warned.contains(&id) {
            if self.warned.len() >= REMEMBERED {
                self.warned.pop_front();
            }
            self.warned.push_back(id);
            let describe = format!(
                "the transaction of backend pid {} (user {}, {}, open for {} s, query: {})",
                b.pid,
                b.user,
                b.state,
                age.as_secs(),
                b.query.replace('\n', " ")
            );
            let limit = self.max_wait.as_millis();
            if expired {
                tracing::warn!(
                    "PostgresSource: {name}: no longer waiting for {describe}: it has been open longer than \
                     ferry.late.commit.max.wait.ms={limit} ms; rows it commits below the position already read \
                     will be skipped (Kafka Connect's behaviour). End that transaction, or raise the limit"
                );
            } else {
                tracing::warn!(
                    "PostgresSource: {name}: rows newer than the start of {describe} are held until it ends, \
                     since it could still commit rows below them; after ferry.late.commit.max.wait.ms={limit} ms \
                     it is no longer waited for"
                );
            }
        }
        !expired
    }
}

/// A text column of the activity row; empty when NULL (hidden from this user).
fn text(row: &tokio_postgres::Row, index: usize) -> String {
    row.try_get::<_, Option<String>>(index)
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Incrementing mode: the candidates `(t, V)` of one table and the highest key proven safe.
#[derive(Debug, Default)]
pub(crate) struct IncLimit {
    candidates: VecDeque<(Micros, i64)>,
    safe: Option<i64>,
}

impl IncLimit {
    /// Adds the round's observation (`V` seen in a snapshot taken before `t`; `None`: empty table) and
    /// returns the highest key safe to read under `horizon` (`None`: none yet).
    pub(crate) fn update(&mut self, t: Micros, v: Option<i64>, horizon: &Horizon) -> Option<i64> {
        if let Some(v) = v {
            let full = self.candidates.len() >= MAX_CANDIDATES;
            match self.candidates.back_mut() {
                // The same key seen again: the earlier instant becomes safe sooner.
                Some(last) if last.1 == v => {}
                // Full: the newest is replaced; older ones become safe first anyway.
                Some(last) if full => *last = (t, v),
                _ => self.candidates.push_back((t, v)),
            }
        }
        while let Some(&(t, v)) = self.candidates.front() {
            if t >= horizon.bound {
                break;
            }
            self.safe = Some(self.safe.map_or(v, |s| s.max(v)));
            self.candidates.pop_front();
        }
        self.safe
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_candidate_becomes_safe_once_every_open_transaction_started_after_it() {
        let mut limit = IncLimit::default();
        let h = |bound| Horizon {
            bound: Micros(bound),
        };
        // Seen at 10 while a transaction that started at 5 is open: not safe.
        assert_eq!(limit.update(Micros(10), Some(7), &h(5)), None);
        // Seen again at 20; the old transaction ended, the oldest open one started at 15.
        assert_eq!(limit.update(Micros(20), Some(9), &h(15)), Some(7));
        // Nothing open: everything seen is safe.
        assert_eq!(limit.update(Micros(30), None, &h(1000)), Some(9));
        // An empty table keeps the limit.
        assert_eq!(limit.update(Micros(40), None, &h(1000)), Some(9));
    }

    #[test]
    fn candidates_are_bounded() {
        let mut limit = IncLimit::default();
        let blocked = Horizon { bound: Micros(0) };
        for i in 0..1000 {
            limit.update(Micros(i + 1), Some(i), &blocked);
        }
        assert_eq!(limit.candidates.len(), MAX_CANDIDATES);
        let free = Horizon {
            bound: Micros(i64::MAX),
        };
        assert_eq!(limit.update(Micros(2000), None, &free), Some(999));
    }
}
