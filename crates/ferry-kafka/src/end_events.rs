//! When a partition of an internal topic counts as read to the end offsets a read listed at its
//! start, given librdkafka's end-of-partition events. The rules of the stores' topic reader
//! ([`crate::topic_log`]); pure (time is passed in), so they are tested without a broker.
//!
//! Compaction can leave no record below a partition's end offset, so the position alone never
//! reaches it and the end-of-partition event must count. But such an event may be stale: the
//! consumer reached the *old* end, the event waited in its queue (between reads, or across a broker
//! outage while the consumer reconnects), and the records written since are still to come. An event
//! is therefore never trusted as it arrives: once it stood for the grace period without a record of
//! its partition, the reader seeks the partition to its position — which drops every queued event and
//! record of it (librdkafka's fetch version barrier) — and only an event that arrives after that seek
//! marks the partition as read.
//!
//! librdkafka emits one end-of-partition event per end offset: a reader that consumed it in an
//! earlier read (the consumer lives as long as the store) never gets it again for the same end. So
//! a partition still behind that got neither a record nor an event for the grace period is sought
//! too — a seek resets librdkafka's event, so reaching the end offset again emits a fresh one. This
//! is what a transactional offsets topic needs: aborted records and transaction markers below the end
//! offset are never delivered, so the consumer's position can stop short of the end.

use std::time::{Duration, Instant};

/// How long an end-of-partition event must stand, unfollowed by records, before the reader checks
/// it with a seek. Records normally follow a stale event within one fetch.
pub(crate) const EOF_GRACE: Duration = Duration::from_secs(1);

/// What one read knows about a partition's end-of-partition events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EndEvent {
    /// None since the last record.
    None,
    /// One arrived at this instant; it may predate the end offsets of the read.
    Unchecked(Instant),
    /// The partition was sought back to its position (dropping queued events); waiting for a fresh one.
    Sought,
    /// A fresh one arrived after the seek: no record is left below the end offset.
    Fresh,
}

/// What the reader does about a partition still below its end offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Keep reading it.
    Behind,
    /// Seek it to its current position, then call [`EndEvents::sought`]; keep reading it.
    Seek,
    /// No record is left below its end offset (removed by compaction): it is read.
    Read,
}

/// Per partition of one read, its end-of-partition events.
#[derive(Debug)]
pub(crate) struct EndEvents {
    events: Vec<EndEvent>,
    /// Per partition: since when neither a record nor an event of it arrived.
    quiet_since: Vec<Instant>,
    grace: Duration,
}

impl EndEvents {
    /// A read of `partitions` partitions starting now, checking events that stood for `grace`.
    pub(crate) fn new(partitions: usize, grace: Duration) -> Self {
        Self::starting(partitions, grace, Instant::now())
    }

    /// A read of `partitions` partitions that started at `start`.
    pub(crate) fn starting(partitions: usize, grace: Duration, start: Instant) -> Self {
        Self {
            events: vec![EndEvent::None; partitions],
            quiet_since: vec![start; partitions],
            grace,
        }
    }

    /// A record of partition `p` arrived: an unchecked event before it was stale.
    pub(crate) fn record(&mut self, p: usize) {
        self.record_at(p, Instant::now());
    }

    /// [`record`](Self::record) at `now`.
    pub(crate) fn record_at(&mut self, p: usize, now: Instant) {
        if let Some(event @ EndEvent::Unchecked(_)) = self.events.get_mut(p) {
            *event = EndEvent::None;
        }
        if let Some(since) = self.quiet_since.get_mut(p) {
            *since = now;
        }
    }

    /// An end-of-partition event of partition `p` arrived at `now`.
    pub(crate) fn end_event(&mut self, p: usize, now: Instant) {
        if let Some(since) = self.quiet_since.get_mut(p) {
            *since = now;
        }
        if let Some(event) = self.events.get_mut(p) {
            *event = match *event {
                // The seek dropped every older event: this one is from a later fetch.
                EndEvent::Sought | EndEvent::Fresh => EndEvent::Fresh,
                EndEvent::Unchecked(at) => EndEvent::Unchecked(at),
                EndEvent::None => EndEvent::Unchecked(now),
            };
        }
    }

    /// The verdict at `now` on partition `p`, which is below its end offset.
    pub(crate) fn verdict(&self, p: usize, now: Instant) -> Verdict {
        match self.events.get(p) {
            Some(EndEvent::Fresh) => Verdict::Read,
            Some(EndEvent::Unchecked(at)) if now.saturating_duration_since(*at) >= self.grace => {
                Verdict::Seek
            }
            // Its event may have been consumed by an earlier read: a seek brings a fresh one.
            Some(EndEvent::None)
                if self
                    .quiet_since
                    .get(p)
                    .is_some_and(|since| now.saturating_duration_since(*since) >= self.grace) =>
            {
                Verdict::Seek
            }
            _ => Verdict::Behind,
        }
    }

    /// Partition `p` was sought to its position: events queued before are gone.
    pub(crate) fn sought(&mut self, p: usize) {
        if let Some(event) = self.events.get_mut(p) {
            *event = EndEvent::Sought;
        }
    }

    /// Partition `p` was sought at `now` ([`sought`](Self::sought)); a seek that brings neither a
    /// record nor an event within the grace period is repeated.
    pub(crate) fn sought_at(&mut self, p: usize, now: Instant) {
        self.sought(p);
        if let Some(since) = self.quiet_since.get_mut(p) {
            *since = now;
        }
    }
}

/// The first partition of a read not yet read up to its end offset (`ends`), given how far each
/// is read (`next`, one entry per partition). A partition judged read ([`Verdict::Read`]) has its
/// `next` moved to its end; one to check is sought through `seek(partition, next)` (which must drop
/// the partition's queued events) and marked [`EndEvents::sought`].
pub(crate) fn first_behind<E>(
    next: &mut [i64],
    ends: &[i64],
    events: &mut EndEvents,
    mut seek: impl FnMut(i32, i64) -> Result<(), E>,
) -> Result<Option<i32>, E> {
    let now = Instant::now();
    let mut first = None;
    for (p, (next, end)) in next.iter_mut().zip(ends).enumerate() {
        if *next >= *end {
            continue;
        }
        // `p` came from enumerating `next`, which has one entry per partition (an i32).
        let partition = i32::try_from(p).unwrap_or(i32::MAX);
        match events.verdict(p, now) {
            Verdict::Read => {
                tracing::debug!(
                    partition,
                    "partition {p} has no records from offset {next} to its end offset {end} (removed by compaction)"
                );
                *next = *end;
                continue;
            }
            Verdict::Seek => {
                seek(partition, *next)?;
                events.sought_at(p, now);
            }
            Verdict::Behind => {}
        }
        first.get_or_insert(partition);
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(1);

    /// The failure behind the reverted start-up fix, replayed: the consumer reached the end of
    /// partition 0 at offset 5 and its end event waited in the queue; a write then went to offset 5,
    /// the broker restarted, and the next read listed end offset 6. While the consumer reconnected,
    /// no record came for seconds, only the stale event. Trusting it after the grace period (the old
    /// rule) marked the partition read and the store missed its own write.
    #[test]
    fn a_stale_end_event_is_never_trusted_however_long_no_record_follows() {
        let start = Instant::now();
        let mut events = EndEvents::new(1, GRACE);
        events.end_event(0, start); // the stale one
        assert_eq!(events.verdict(0, start), Verdict::Behind);
        for waited in [1, 2, 10, 600] {
            assert_eq!(
                events.verdict(0, start + Duration::from_secs(waited)),
                Verdict::Seek,
                "after {waited} s without a record the event is checked, not trusted"
            );
        }
        // The reader seeks; until an event arrives after that, the partition is not read, however
        // long the broker takes to come back.
        events.sought(0);
        assert_eq!(
            events.verdict(0, start + Duration::from_secs(3600)),
            Verdict::Behind
        );
        // The write arrives: the reader's position passes the end offset (it stops asking).
        events.record(0);
        assert_eq!(
            events.verdict(0, start + Duration::from_secs(3601)),
            Verdict::Behind
        );
    }

    /// A partition whose last records were removed by compaction: the event after the seek is
    /// fresh, and the partition is read although the position never reaches the end offset.
    #[test]
    fn an_end_event_after_the_seek_marks_a_compacted_partition_read() {
        let start = Instant::now();
        let mut events = EndEvents::new(2, GRACE);
        events.end_event(1, start);
        assert_eq!(events.verdict(1, start + GRACE), Verdict::Seek);
        events.sought(1);
        events.end_event(1, start + GRACE);
        assert_eq!(events.verdict(1, start + GRACE), Verdict::Read);
        assert_eq!(
            events.verdict(0, start + GRACE),
            Verdict::Behind,
            "partitions are independent"
        );
    }

    /// A record after an unchecked event shows the event was stale: the grace period starts again
    /// with the next event, not with the first.
    #[test]
    fn a_record_after_an_event_restarts_the_grace_period() {
        let start = Instant::now();
        let mut events = EndEvents::starting(1, GRACE, start);
        events.end_event(0, start);
        events.record_at(0, start + 5 * GRACE - GRACE / 2);
        assert_eq!(events.verdict(0, start + 5 * GRACE), Verdict::Behind);
        let later = start + 5 * GRACE;
        events.end_event(0, later);
        events.end_event(0, later + GRACE / 2); // a second event keeps the first one's instant
        assert_eq!(events.verdict(0, later + GRACE / 2), Verdict::Behind);
        assert_eq!(events.verdict(0, later + GRACE), Verdict::Seek);
    }

    /// A partition behind its end with neither a record nor an event for the grace period — its end
    /// event was consumed by an earlier read, and aborted records below the end offset are never
    /// delivered — is sought, which brings a fresh event.
    #[test]
    fn a_quiet_partition_without_an_event_is_sought_after_the_grace_period() {
        let start = Instant::now();
        let mut events = EndEvents::starting(2, GRACE, start);
        assert_eq!(events.verdict(0, start + GRACE / 2), Verdict::Behind);
        events.record_at(1, start + GRACE / 2);
        assert_eq!(events.verdict(0, start + GRACE), Verdict::Seek);
        assert_eq!(
            events.verdict(1, start + GRACE),
            Verdict::Behind,
            "a partition whose records still come is not sought"
        );
        events.sought_at(0, start + GRACE);
        assert_eq!(
            events.verdict(0, start + GRACE + GRACE / 2),
            Verdict::Behind
        );
        events.end_event(0, start + GRACE + GRACE / 2);
        assert_eq!(events.verdict(0, start + 2 * GRACE), Verdict::Read);
    }

    /// Partitions outside the read (a broker answering for more) change nothing.
    #[test]
    fn unknown_partitions_are_ignored() {
        let start = Instant::now();
        let mut events = EndEvents::new(1, GRACE);
        events.end_event(7, start);
        events.record(7);
        events.sought(7);
        assert_eq!(events.verdict(7, start + GRACE), Verdict::Behind);
        assert_eq!(events.verdict(0, start + GRACE), Verdict::Behind);
    }
}
