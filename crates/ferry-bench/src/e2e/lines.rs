//! The FileStreamSource input: deterministic, varied application-log lines of 100–150 bytes, and
//! counting lines of a file.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::Path;

use crate::BenchResult;

/// The shortest and longest line, without the `\n`.
pub const MIN_LINE: usize = 100;
pub const MAX_LINE: usize = 150;

/// An input file that was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Input {
    /// Its size in bytes (every line terminated).
    pub bytes: u64,
    /// Its lines.
    pub lines: u64,
}

/// SplitMix64: tiny, fast and the same on every platform, so every run reads the same file.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const LEVELS: &[&str] = &["INFO ", "INFO ", "INFO ", "DEBUG", "WARN ", "ERROR"];
const THREADS: &[&str] = &["http", "producer", "sched", "worker"];
const LOGGERS: &[&str] = &["orders", "payments", "auth", "stock", "kafka.client"];
const ACTIONS: &[&str] = &[
    "accepted",
    "rejected",
    "shipped",
    "refunded",
    "queued for review",
];
const PATHS: &[&str] = &["/api/orders", "/api/cart/items", "/login", "/api/search"];

/// Appends one line (with its `\n`) to `out`.
fn line(rng: &mut Rng, n: u64, out: &mut Vec<u8>) {
    let start = out.len();
    // Seconds advance with the line number, so timestamps are ordered like a real log.
    let secs = 1_714_560_000 + n / 50;
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    let _ = write!(
        out,
        "2024-05-01 {h:02}:{m:02}:{s:02}.{:03} {} [{}-{}] {}: ",
        rng.below(1000),
        rng.pick(LEVELS),
        rng.pick(THREADS),
        rng.below(16),
        rng.pick(LOGGERS),
    );
    let _ = match rng.below(3) {
        0 => write!(
            out,
            "order {} {} for customer {} ({} items, {}.{:02} EUR) in {} ms",
            rng.below(10_000_000),
            rng.pick(ACTIONS),
            rng.below(1_000_000),
            1 + rng.below(20),
            rng.below(2_000),
            rng.below(100),
            rng.below(500),
        ),
        1 => write!(
            out,
            "GET {}?page={} status={} bytes={}",
            rng.pick(PATHS),
            rng.below(50),
            [200, 200, 200, 304, 404, 500][rng.below(6) as usize],
            rng.below(100_000),
        ),
        _ => write!(
            out,
            "retrying request {} to broker {} in {} ms",
            rng.below(1 << 20),
            rng.below(3),
            rng.below(1_000),
        ),
    };
    // A request id of varied length brings lines to a target length; the few long ones are cut.
    let target = MIN_LINE + rng.below((MAX_LINE - MIN_LINE + 1) as u64) as usize;
    let len = out.len() - start;
    if len < target {
        out.extend_from_slice(b" req=");
        let mut id = rng.next();
        while out.len() - start < target.max(len + 9) {
            out.push(b"0123456789abcdef"[(id & 15) as usize]);
            id = id.rotate_right(4) ^ n;
        }
    }
    out.truncate(start + (out.len() - start).min(MAX_LINE));
    out.push(b'\n');
}

/// Writes whole lines to `path` until the next one would pass `bytes` (so the file is at most
/// `bytes` long). Blocking.
pub fn write(path: &Path, bytes: u64) -> BenchResult<Input> {
    let file = File::create(path).map_err(|e| {
        crate::BenchError::from(format!("cannot create the input {}: {e}", path.display()))
    })?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut rng = Rng(0x00F3_22B3_E2E0_0001);
    let mut buf = Vec::with_capacity(256);
    let mut written = Input { bytes: 0, lines: 0 };
    loop {
        buf.clear();
        line(&mut rng, written.lines, &mut buf);
        if written.bytes + buf.len() as u64 > bytes {
            break;
        }
        out.write_all(&buf).map_err(|e| {
            crate::BenchError::from(format!("cannot write the input {}: {e}", path.display()))
        })?;
        written.bytes += buf.len() as u64;
        written.lines += 1;
    }
    out.into_inner()
        .map_err(|e| {
            crate::BenchError::from(format!("cannot write the input {}: {e}", path.display()))
        })?
        .sync_all()
        .map_err(|e| {
            crate::BenchError::from(format!("cannot sync the input {}: {e}", path.display()))
        })?;
    Ok(written)
}

/// The number of `\n` in a file. Blocking.
pub fn count_lines(path: &Path) -> BenchResult<u64> {
    let mut file = File::open(path).map_err(|e| {
        crate::BenchError::from(format!(
            "cannot open {} to count lines: {e}",
            path.display()
        ))
    })?;
    let mut buf = vec![0u8; 1 << 20];
    let mut lines = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(|e| {
            crate::BenchError::from(format!(
                "cannot read {} to count lines: {e}",
                path.display()
            ))
        })?;
        if n == 0 {
            return Ok(lines);
        }
        lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_varied_deterministic_and_in_range() {
        let (mut a, mut b) = (Rng(7), Rng(7));
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for n in 0..5_000 {
            line(&mut a, n, &mut x);
            line(&mut b, n, &mut y);
        }
        assert_eq!(x, y);
        let lengths: Vec<usize> = x
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(<[u8]>::len)
            .collect();
        assert_eq!(lengths.len(), 5_000);
        assert!(lengths.iter().all(|l| (MIN_LINE..=MAX_LINE).contains(l)));
        let distinct: std::collections::BTreeSet<usize> = lengths.iter().copied().collect();
        assert!(distinct.len() > 30, "line lengths vary: {distinct:?}");
        assert!(x.is_ascii());
    }
}
