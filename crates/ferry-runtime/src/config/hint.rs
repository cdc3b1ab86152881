//! "Did you mean …?" for unknown keys.

/// The hint for an unknown `key`: the closest of `candidates` if it is close enough (a typo), else the
/// list of keys that are accepted (`listed`).
pub(crate) fn unknown_key_hint<'a>(
    key: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    listed: &[&str],
) -> String {
    match closest(key, candidates) {
        Some(best) => format!("did you mean {best:?}?"),
        None => {
            let mut listed = listed.to_vec();
            listed.sort_unstable();
            listed.dedup();
            format!("accepted keys: {}", listed.join(", "))
        }
    }
}

/// The candidate with the smallest edit distance to `key` (ignoring ASCII case), if that distance is
/// at most a third of the key's length, and never more than 3.
fn closest<'a>(key: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let key = key.to_ascii_lowercase();
    let limit = (key.chars().count() / 3).clamp(1, 3);
    candidates
        .into_iter()
        .map(|c| (edit_distance(&key, &c.to_ascii_lowercase()), c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// Edit distance over chars where swapping two neighbours counts as one edit, like inserting,
/// deleting or replacing one (optimal string alignment): `fiel` is one edit from `file`.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows of the distance table: two rows back (for swaps), the previous and the current row.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current: Vec<usize> = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        current[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (previous[j] + 1)
                .min(current[j - 1] + 1)
                .min(previous[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(before[j - 2] + 1);
            }
            current[j] = best;
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("task.max", "tasks.max"), 1);
        assert_eq!(edit_distance("same", "same"), 0);
        assert_eq!(edit_distance("fiel", "file"), 1);
        assert_eq!(edit_distance("ab", "ba"), 1);
    }

    #[test]
    fn suggests_close_keys_only() {
        let keys = [
            "offset.flush.interval.ms",
            "offset.flush.timeout.ms",
            "sink",
        ];
        assert_eq!(
            closest("offset.flush.interval", keys),
            Some("offset.flush.interval.ms")
        );
        assert_eq!(
            closest("Offset.Flush.Timeout.MS", keys),
            Some("offset.flush.timeout.ms")
        );
        assert_eq!(closest("snk", keys), Some("sink"));
        assert_eq!(closest("colour", keys), None);
        assert_eq!(
            unknown_key_hint("colour", keys, &["sink", "a"]),
            "accepted keys: a, sink"
        );
    }
}
