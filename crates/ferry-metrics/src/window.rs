//! [`Window`]: the sliding-window statistics behind Kafka Connect's `-rate`, `-avg`, `-max` and
//! `-percentage` metrics.
//!
//! Kafka's metrics library keeps `metrics.num.samples` (2) samples of `metrics.sample.window.ms`
//! (30 s) each, so a rate or average covers the last 30 to 60 seconds. Ferry keeps [`SLOTS`] slots of
//! [`SLOT`] each: every statistic covers the last [`SPAN`] (60 s), moving forward 5 s at a time.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One slot's length.
pub const SLOT: Duration = Duration::from_secs(5);
/// Slots kept.
const SLOTS: usize = 12;
/// What the window covers.
pub const SPAN: Duration = Duration::from_secs(5 * SLOTS as u64);

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// Which slot since the window's start this is (`elapsed / SLOT`); stale when older than the span.
    epoch: u64,
    count: u64,
    sum: f64,
    max: f64,
}

/// Values recorded over the last [`SPAN`]. A short lock per record (one `poll()`, one delivery
/// batch or one commit), never held while formatting.
#[derive(Debug)]
pub struct Window {
    started: Instant,
    slots: Mutex<[Slot; SLOTS]>,
}

/// What a [`Window`] holds now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    /// Values recorded in the window.
    pub count: u64,
    /// Their sum.
    pub sum: f64,
    /// The largest; NaN when none (as Kafka's `Max` without samples).
    pub max: f64,
    /// The time the window covers: the span, or the window's age while younger (at least 1 s).
    pub covered: Duration,
}

impl Stats {
    /// Sum per second over the covered time (Kafka's `Rate`).
    pub fn rate(&self) -> f64 {
        self.sum / self.covered.as_secs_f64()
    }

    /// The average value; NaN when none (as Kafka's `Avg` without samples).
    pub fn avg(&self) -> f64 {
        if self.count == 0 {
            f64::NAN
        } else {
            self.sum / self.count as f64
        }
    }
}

impl Default for Window {
    fn default() -> Self {
        Self::new(Instant::now())
    }
}

impl Window {
    pub fn new(started: Instant) -> Self {
        Self {
            started,
            slots: Mutex::new([Slot::default(); SLOTS]),
        }
    }

    fn epoch(&self, now: Instant) -> u64 {
        (now.saturating_duration_since(self.started).as_millis() / SLOT.as_millis()) as u64
    }

    /// Records `value` now.
    pub fn record(&self, value: f64) {
        self.record_at(Instant::now(), 1, value, value);
    }

    /// Records `count` events adding up to `sum` now (a rate's events: `sum` is what is counted).
    pub fn record_many(&self, count: u64, sum: f64) {
        if count > 0 {
            self.record_at(Instant::now(), count, sum, f64::NAN);
        }
    }

    pub fn record_at(&self, now: Instant, count: u64, sum: f64, max: f64) {
        let epoch = self.epoch(now);
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let slot = &mut slots[(epoch % SLOTS as u64) as usize];
        if slot.epoch != epoch || slot.count == 0 {
            *slot = Slot {
                epoch,
                count: 0,
                sum: 0.0,
                max: f64::NAN,
            };
        }
        slot.count += count;
        slot.sum += sum;
        // `f64::max` ignores a NaN operand.
        slot.max = slot.max.max(max);
    }

    /// The statistics of the last [`SPAN`].
    pub fn stats(&self) -> Stats {
        self.stats_at(Instant::now())
    }

    pub fn stats_at(&self, now: Instant) -> Stats {
        let epoch = self.epoch(now);
        let slots = *self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let mut stats = Stats {
            count: 0,
            sum: 0.0,
            max: f64::NAN,
            covered: now
                .saturating_duration_since(self.started)
                .clamp(Duration::from_secs(1), SPAN),
        };
        for slot in slots
            .iter()
            .filter(|s| s.count > 0 && epoch.saturating_sub(s.epoch) < SLOTS as u64)
        {
            stats.count += slot.count;
            stats.sum += slot.sum;
            stats.max = stats.max.max(slot.max);
        }
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_window_has_no_average_and_no_max() {
        let w = Window::default();
        let s = w.stats();
        assert_eq!(s.count, 0);
        assert!(s.avg().is_nan() && s.max.is_nan());
        assert_eq!(s.rate(), 0.0);
    }

    #[test]
    fn values_older_than_the_span_drop_out() {
        let t0 = Instant::now();
        let w = Window::new(t0);
        w.record_at(t0, 1, 10.0, 10.0);
        w.record_at(t0 + Duration::from_secs(30), 1, 2.0, 2.0);
        let s = w.stats_at(t0 + Duration::from_secs(40));
        assert_eq!((s.count, s.sum, s.max), (2, 12.0, 10.0));
        assert_eq!(s.avg(), 6.0);
        // 12 over the 40 s the window has existed.
        assert_eq!(s.rate(), 0.3);
        // 65 s on, the first value (slot 0) is out of the 60 s span; the second is still in.
        let s = w.stats_at(t0 + Duration::from_secs(65));
        assert_eq!((s.count, s.sum, s.max), (1, 2.0, 2.0));
        assert_eq!(s.covered, SPAN);
        // A slot reused 60 s later starts afresh.
        w.record_at(t0 + Duration::from_secs(61), 1, 5.0, 5.0);
        let s = w.stats_at(t0 + Duration::from_secs(62));
        assert_eq!((s.count, s.sum, s.max), (2, 7.0, 5.0));
    }

    #[test]
    fn rates_count_the_events_per_second() {
        let t0 = Instant::now();
        let w = Window::new(t0);
        for i in 0..60 {
            w.record_at(t0 + Duration::from_secs(i), 1, 100.0, f64::NAN);
        }
        let s = w.stats_at(t0 + Duration::from_millis(59_999));
        assert!((s.rate() - 100.0).abs() < 0.01, "{s:?}");
        assert!(s.max.is_nan());
    }
}
