//! Timing: warm up, then time a fixed number of runs, printing each so a long run shows progress.

use std::time::{Duration, Instant};

use crate::BenchResult;

/// Runs `f` `warmup` times untimed, then `runs` times timed; `f` returns the duration of the part it
/// wants timed (so set-up inside a run stays out of the number). Prints one progress line per case.
pub fn time_runs(
    label: &str,
    warmup: usize,
    runs: usize,
    mut f: impl FnMut() -> BenchResult<Duration>,
) -> BenchResult<Vec<Duration>> {
    for _ in 0..warmup {
        f()?;
    }
    let mut samples = Vec::with_capacity(runs);
    let started = Instant::now();
    for _ in 0..runs {
        samples.push(f()?);
    }
    let mut sorted = samples.clone();
    sorted.sort();
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
    eprintln!(
        "  {label}: median {} of {runs} runs ({:.1?} in all)",
        human_duration(median.as_secs_f64()),
        started.elapsed()
    );
    Ok(samples)
}

/// A duration for people: `812 µs`, `14.2 ms`, `1.61 s`.
pub fn human_duration(seconds: f64) -> String {
    if !seconds.is_finite() {
        return "–".to_owned();
    }
    let (value, unit) = if seconds >= 1.0 {
        (seconds, "s")
    } else if seconds >= 1e-3 {
        (seconds * 1e3, "ms")
    } else {
        (seconds * 1e6, "µs")
    };
    if value >= 100.0 {
        format!("{value:.0} {unit}")
    } else if value >= 10.0 {
        format!("{value:.1} {unit}")
    } else {
        format!("{value:.2} {unit}")
    }
}

/// A count for people with thin spaces: `1 000 000`.
pub fn human_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// Bytes for people: `1.00 GiB`, `312 MiB`.
pub fn human_bytes(bytes: f64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value >= 100.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_counts_read_like_a_person_wrote_them() {
        assert_eq!(human_duration(0.000_142), "142 µs");
        assert_eq!(human_duration(0.0142), "14.2 ms");
        assert_eq!(human_duration(1.61), "1.61 s");
        assert_eq!(human_count(1_000_000), "1 000 000");
        assert_eq!(human_count(999), "999");
        assert_eq!(human_bytes(1024.0 * 1024.0 * 1024.0), "1.00 GiB");
    }
}
