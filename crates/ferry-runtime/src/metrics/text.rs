//! Prometheus text exposition format 0.0.4: family headers, samples, escaping, and a lock-free
//! latency histogram.

use std::fmt::{Display, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The kind of a metric family, as written on its `# TYPE` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// Writes the `# HELP` and `# TYPE` lines of a family.
pub(crate) fn header(out: &mut String, name: &str, kind: Kind, help: &str) {
    out.push_str("# HELP ");
    out.push_str(name);
    out.push(' ');
    escape_help(out, help);
    out.push_str("\n# TYPE ");
    out.push_str(name);
    out.push(' ');
    out.push_str(kind.as_str());
    out.push('\n');
}

/// Writes one sample: `name{labels} value`. `extra` is appended after `labels` (a histogram's `le`).
pub(crate) fn sample(
    out: &mut String,
    name: &str,
    suffix: &str,
    labels: &[(&str, &str)],
    extra: Option<(&str, &str)>,
    value: impl Display,
) {
    out.push_str(name);
    out.push_str(suffix);
    let mut first = true;
    for (key, val) in labels.iter().copied().chain(extra) {
        out.push(if first { '{' } else { ',' });
        first = false;
        out.push_str(key);
        out.push_str("=\"");
        escape_label_value(out, val);
        out.push('"');
    }
    if !first {
        out.push('}');
    }
    // Writing to a String cannot fail.
    let _ = writeln!(out, " {value}");
}

/// A label value: backslash, double quote and line feed escaped.
fn escape_label_value(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A HELP text: backslash and line feed escaped.
fn escape_help(out: &mut String, help: &str) {
    for c in help.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Seconds, as Prometheus parses them (Rust's `Display` for `f64` never uses an exponent).
pub(crate) fn seconds(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

/// Saturating nanoseconds of a duration.
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Upper bounds of the latency buckets: nanoseconds, and the `le` label as written. 100 µs to 10 s
/// covers a memory store's microseconds, a file store's fsync and a Kafka round trip up to the default
/// `offset.flush.timeout.ms`.
const BUCKETS: [(u64, &str); 16] = [
    (100_000, "0.0001"),
    (250_000, "0.00025"),
    (500_000, "0.0005"),
    (1_000_000, "0.001"),
    (2_500_000, "0.0025"),
    (5_000_000, "0.005"),
    (10_000_000, "0.01"),
    (25_000_000, "0.025"),
    (50_000_000, "0.05"),
    (100_000_000, "0.1"),
    (250_000_000, "0.25"),
    (500_000_000, "0.5"),
    (1_000_000_000, "1"),
    (2_500_000_000, "2.5"),
    (5_000_000_000, "5"),
    (10_000_000_000, "10"),
];

/// A latency histogram over [`BUCKETS`]: one relaxed atomic add per bucket hit plus one for the sum;
/// never a lock. `_count` is derived from the buckets when rendered, so it always equals `+Inf`.
#[derive(Debug, Default)]
pub(crate) struct Histogram {
    /// Non-cumulative hit counts; the last slot is the `+Inf` overflow.
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Histogram {
    pub(crate) fn observe(&self, d: Duration) {
        let n = nanos(d);
        let slot = BUCKETS
            .iter()
            .position(|(bound, _)| n <= *bound)
            .unwrap_or(BUCKETS.len());
        self.buckets[slot].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(n, Ordering::Relaxed);
    }

    /// Observations so far.
    #[cfg(test)]
    pub(crate) fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// Writes `name_bucket{…,le=…}` for every bound and `+Inf`, then `name_sum` and `name_count`.
    pub(crate) fn render(&self, out: &mut String, name: &str, labels: &[(&str, &str)]) {
        let mut cumulative = 0u64;
        for (i, (_, le)) in BUCKETS.iter().enumerate() {
            cumulative += self.buckets[i].load(Ordering::Relaxed);
            sample(out, name, "_bucket", labels, Some(("le", le)), cumulative);
        }
        cumulative += self.buckets[BUCKETS.len()].load(Ordering::Relaxed);
        sample(
            out,
            name,
            "_bucket",
            labels,
            Some(("le", "+Inf")),
            cumulative,
        );
        let sum = seconds(self.sum_nanos.load(Ordering::Relaxed));
        sample(out, name, "_sum", labels, None, sum);
        sample(out, name, "_count", labels, None, cumulative);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_and_help_are_escaped() {
        let mut out = String::new();
        header(&mut out, "m", Kind::Gauge, "a \\ b\nc \"q\"");
        sample(&mut out, "m", "", &[("l", "x\\y\"z\nw")], None, 1);
        assert_eq!(
            out,
            "# HELP m a \\\\ b\\nc \"q\"\n# TYPE m gauge\nm{l=\"x\\\\y\\\"z\\nw\"} 1\n"
        );
    }

    #[test]
    fn a_sample_without_labels_has_no_braces() {
        let mut out = String::new();
        sample(&mut out, "m", "_total", &[], None, 3);
        assert_eq!(out, "m_total 3\n");
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_count_is_inf() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(50)); // <= 0.0001
        h.observe(Duration::from_millis(1)); // == 0.001, inclusive
        h.observe(Duration::from_millis(3)); // <= 0.005
        h.observe(Duration::from_secs(60)); // +Inf only
        assert_eq!(h.count(), 4);
        let mut out = String::new();
        h.render(&mut out, "d_seconds", &[("s", "x")]);
        let value = |le: &str| -> String {
            let prefix = format!("d_seconds_bucket{{s=\"x\",le=\"{le}\"}} ");
            out.lines()
                .find_map(|l| l.strip_prefix(&prefix))
                .unwrap_or_else(|| panic!("no bucket {le} in\n{out}"))
                .to_owned()
        };
        assert_eq!(value("0.0001"), "1");
        assert_eq!(value("0.0005"), "1");
        assert_eq!(value("0.001"), "2");
        assert_eq!(value("0.005"), "3");
        assert_eq!(value("10"), "3");
        assert_eq!(value("+Inf"), "4");
        assert!(out.contains("d_seconds_count{s=\"x\"} 4\n"), "{out}");
        assert!(out.contains("d_seconds_sum{s=\"x\"} 60.00405\n"), "{out}");
    }

    #[test]
    fn seconds_never_use_an_exponent() {
        assert_eq!(seconds(1).to_string(), "0.000000001");
        assert_eq!(seconds(1_500_000_000).to_string(), "1.5");
        assert_eq!(seconds(0).to_string(), "0");
    }
}
