//! A token bucket that paces records to a rate, without busy-waiting.
//!
//! Record `k` (from 0) since the bucket's origin is due `k / rate` seconds after it, so the first
//! record is due at once and a caller who asks late gets every record that came due meanwhile, up to
//! one batch. Backlog beyond one batch (a consumer that stalled) is forgotten rather than burst out
//! later: the rate is a ceiling, never a debt.

use std::time::Duration;

use tokio::time::Instant;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Paces to `rate` records per second.
#[derive(Debug)]
pub(crate) struct Pacer {
    rate: u64,
    origin: Instant,
    /// Records taken since `origin`.
    taken: u64,
}

impl Pacer {
    /// A pacer of `rate` (≥ 1) records per second, starting now.
    pub(crate) fn new(rate: u64) -> Self {
        Self {
            rate: rate.max(1),
            origin: Instant::now(),
            taken: 0,
        }
    }

    /// Records due since the origin at `now`, counting the first one, due at the origin.
    fn earned(&self, now: Instant) -> u128 {
        let elapsed = now.saturating_duration_since(self.origin).as_nanos();
        elapsed * u128::from(self.rate) / NANOS_PER_SEC + 1
    }

    /// How many records may be emitted at `now`, at most `cap` (≥ 1); 0 means "wait until
    /// [`Pacer::next_due`]".
    pub(crate) fn available(&mut self, now: Instant, cap: usize) -> usize {
        let cap = cap.max(1);
        let free = self.earned(now).saturating_sub(u128::from(self.taken));
        if free > cap as u128 {
            // More than a batch is owed: start over so the excess never comes out as a burst.
            self.origin = now;
            self.taken = 0;
            return cap;
        }
        usize::try_from(free).unwrap_or(cap)
    }

    /// Records that `n` records were emitted.
    pub(crate) fn take(&mut self, n: usize) {
        self.taken = self
            .taken
            .saturating_add(u64::try_from(n).unwrap_or(u64::MAX));
    }

    /// When the next record is due.
    pub(crate) fn next_due(&self) -> Instant {
        // Record number `taken` is due at origin + taken / rate, rounded up to the nanosecond so
        // that waking at this instant always finds it due.
        let nanos = (u128::from(self.taken) * NANOS_PER_SEC).div_ceil(u128::from(self.rate));
        let nanos = u64::try_from(nanos).unwrap_or(u64::MAX);
        self.origin
            .checked_add(Duration::from_nanos(nanos))
            .unwrap_or_else(|| self.origin + Duration::from_secs(86_400))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_record_at_once_then_one_per_period() {
        let start = Instant::now();
        let mut p = Pacer {
            rate: 4,
            origin: start,
            taken: 0,
        };
        assert_eq!(p.available(start, 100), 1);
        p.take(1);
        assert_eq!(p.available(start, 100), 0);
        assert_eq!(p.next_due(), start + Duration::from_millis(250));
        let later = start + Duration::from_millis(1000);
        assert_eq!(p.available(later, 100), 4, "records 1..=4 came due");
        p.take(4);
        assert_eq!(p.next_due(), start + Duration::from_millis(1250));
    }

    #[test]
    fn a_backlog_beyond_one_batch_is_forgotten() {
        let start = Instant::now();
        let mut p = Pacer {
            rate: 10,
            origin: start,
            taken: 0,
        };
        let late = start + Duration::from_secs(100);
        assert_eq!(p.available(late, 5), 5);
        p.take(5);
        assert_eq!(
            p.available(late, 5),
            0,
            "the other 996 due records are not owed"
        );
        assert_eq!(p.next_due(), late + Duration::from_millis(500));
    }
}
