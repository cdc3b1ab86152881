//! "Did you mean …?" for unknown keys.

/// The hints for the unknown keys of one configuration: a close accepted key when there is one (a
/// typo), else the list of accepted keys — given once, with the first such key, so that many unknown
/// keys make a message that grows with their number, not with their number times the list.
pub struct UnknownKeyHints<'a> {
    listed: Vec<&'a str>,
    list_given: bool,
}

impl<'a> UnknownKeyHints<'a> {
    /// Hints listing `listed` (sorted, each once) when no close key is found.
    pub fn new(listed: &[&'a str]) -> Self {
        let mut listed = listed.to_vec();
        listed.sort_unstable();
        listed.dedup();
        Self {
            listed,
            list_given: false,
        }
    }

    /// The hint for the unknown `key`, whose close matches are looked for in `candidates`.
    pub fn hint<'c>(&mut self, key: &str, candidates: impl IntoIterator<Item = &'c str>) -> String {
        match closest(key, candidates) {
            Some(best) => format!("did you mean {best:?}?"),
            None if self.list_given => {
                "not accepted either (the accepted keys are listed with the first unknown key)"
                    .to_owned()
            }
            None => {
                self.list_given = true;
                format!("accepted keys: {}", self.listed.join(", "))
            }
        }
    }
}

/// The hint for a single unknown `key`: the closest of `candidates` if it is close enough (a typo),
/// else the list of keys that are accepted (`listed`).
pub fn unknown_key_hint<'a>(
    key: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    listed: &[&str],
) -> String {
    UnknownKeyHints::new(listed).hint(key, candidates)
}

/// The candidate with the smallest edit distance to `key` (ignoring ASCII case), if that distance is
/// at most a third of the key's length, and never more than 3.
fn closest<'a>(key: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let length = key.chars().count();
    let limit = (length / 3).clamp(1, 3);
    // Keys whose lengths differ by more than the limit are further apart than it: skipping them keeps
    // a very long key from costing its length times each candidate's.
    let candidates: Vec<&str> = candidates
        .into_iter()
        .filter(|c| c.chars().count().abs_diff(length) <= limit)
        .collect();
    if candidates.is_empty() {
        return None;
    }
    let key = key.to_ascii_lowercase();
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

    #[test]
    fn the_accepted_keys_are_listed_once() {
        let mut hints = UnknownKeyHints::new(&["sink", "a"]);
        assert_eq!(hints.hint("colour", ["sink"]), "accepted keys: a, sink");
        assert_eq!(hints.hint("snk", ["sink"]), "did you mean \"sink\"?");
        let again = hints.hint("flavour", ["sink"]);
        assert!(!again.contains("sink"), "{again}");
        assert!(again.contains("first unknown key"), "{again}");
    }
}
