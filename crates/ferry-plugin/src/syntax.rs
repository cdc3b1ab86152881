//! `java.util.Properties.load`, step for step (its `LineReader.readLine`, `load0` and
//! `loadConvert` of JDK 17), so that a file reads exactly as Kafka Connect reads it — including the
//! corners: a `\` continuation at the end of the file, whitespace at the start of continuation
//! lines, comments only at the start of a logical line, escaped separators, odd and even runs of
//! backslashes. `tests/fixtures/properties/` holds the Java program and the table of its results
//! that the tests compare against.

/// One `key=value` of the text, with the 1-based line its logical line starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) key: String,
    pub(crate) value: String,
    pub(crate) line: usize,
}

/// Text Java would refuse (a malformed `\uXXXX`), or that a Rust string cannot hold (an unpaired
/// UTF-16 surrogate made by `\uXXXX`, which Java would keep).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub(crate) line: usize,
    pub(crate) problem: EscapeError,
}

/// A `\uXXXX` escape Ferry cannot read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EscapeError {
    /// Fewer than four hex digits (Java refuses it).
    #[error(
        "Malformed \\uxxxx encoding. A \\u escape needs exactly four hex digits \
         (e.g. \\u00e9 for é); write \\\\u for a literal \\u."
    )]
    Malformed,
    /// Half of a UTF-16 surrogate pair (Java keeps it; a Rust string cannot).
    #[error(
        "a \\u escape makes half of a UTF-16 surrogate pair without its other half (e.g. \\uD83D \
         must be followed by \\uDE00-style low half); Ferry cannot keep such a value"
    )]
    UnpairedSurrogate,
}

/// Every entry of `text`, in order (a key set twice appears twice).
pub(crate) fn parse(text: &str) -> Result<Vec<Entry>, SyntaxError> {
    let chars: Vec<char> = text.chars().collect();
    let mut reader = LineReader {
        lines: line_numbers(&chars),
        chars,
        pos: 0,
        skip_lf: false,
    };
    let mut entries = Vec::new();
    while let Some((logical, line)) = reader.read_line() {
        let (key, value) = split(&logical);
        let error = |problem| SyntaxError { line, problem };
        entries.push(Entry {
            key: unescape(key).map_err(error)?,
            value: unescape(value).map_err(error)?,
            line,
        });
    }
    Ok(entries)
}

/// The 1-based line of each character; `\r\n`, `\r` and `\n` each end a line.
fn line_numbers(chars: &[char]) -> Vec<usize> {
    let mut line = 1;
    let mut lines = Vec::with_capacity(chars.len());
    for (i, &c) in chars.iter().enumerate() {
        lines.push(line);
        if c == '\n' || (c == '\r' && chars.get(i + 1) != Some(&'\n')) {
            line += 1;
        }
    }
    lines
}

struct LineReader {
    chars: Vec<char>,
    lines: Vec<usize>,
    pos: usize,
    /// A `\n` right after a continued line's `\r` belongs to that line's end.
    skip_lf: bool,
}

fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t' || c == '\x0c'
}

impl LineReader {
    /// The next logical line (continuations joined, their `\` and the next line's leading
    /// whitespace removed) and the line it starts on; `None` at the end.
    fn read_line(&mut self) -> Option<(Vec<char>, usize)> {
        let mut line: Vec<char> = Vec::new();
        let mut start = 0;
        let mut skip_white_space = true;
        let mut appended_line_begin = false;
        let mut preceding_backslash = false;
        loop {
            let Some(&c) = self.chars.get(self.pos) else {
                if line.is_empty() {
                    return None;
                }
                // A `\` at the very end is dropped, and the line read (Java does the same).
                if preceding_backslash {
                    line.pop();
                }
                return Some((line, start));
            };
            let here = self.pos;
            self.pos += 1;
            if self.skip_lf {
                self.skip_lf = false;
                if c == '\n' {
                    continue;
                }
            }
            if skip_white_space {
                if is_blank(c) || (!appended_line_begin && (c == '\r' || c == '\n')) {
                    continue;
                }
                skip_white_space = false;
                appended_line_begin = false;
            }
            if line.is_empty() && (c == '#' || c == '!') {
                // A comment runs to the end of its line; it cannot be continued.
                while let Some(&c) = self.chars.get(self.pos) {
                    self.pos += 1;
                    if c == '\r' || c == '\n' {
                        break;
                    }
                }
                skip_white_space = true;
                continue;
            }
            if c != '\n' && c != '\r' {
                if line.is_empty() {
                    start = self.lines.get(here).copied().unwrap_or(1);
                }
                line.push(c);
                preceding_backslash = c == '\\' && !preceding_backslash;
                continue;
            }
            if line.is_empty() {
                skip_white_space = true;
                continue;
            }
            if self.pos >= self.chars.len() {
                if preceding_backslash {
                    line.pop();
                }
                return Some((line, start));
            }
            if !preceding_backslash {
                return Some((line, start));
            }
            // A continuation: drop the `\`, skip the next line's leading whitespace.
            line.pop();
            skip_white_space = true;
            appended_line_begin = true;
            preceding_backslash = false;
            if c == '\r' {
                self.skip_lf = true;
            }
        }
    }
}

/// Splits a logical line into its raw key and value: the key ends at the first unescaped `=`, `:`
/// or whitespace; whitespace and one `=` or `:` are skipped before the value.
fn split(line: &[char]) -> (&[char], &[char]) {
    let limit = line.len();
    let mut key_len = 0;
    let mut value_start = limit;
    let mut has_sep = false;
    let mut preceding_backslash = false;
    while key_len < limit {
        let c = line[key_len];
        if (c == '=' || c == ':') && !preceding_backslash {
            value_start = key_len + 1;
            has_sep = true;
            break;
        } else if is_blank(c) && !preceding_backslash {
            value_start = key_len + 1;
            break;
        }
        preceding_backslash = c == '\\' && !preceding_backslash;
        key_len += 1;
    }
    while value_start < limit {
        let c = line[value_start];
        if !is_blank(c) {
            if !has_sep && (c == '=' || c == ':') {
                has_sep = true;
            } else {
                break;
            }
        }
        value_start += 1;
    }
    (&line[..key_len], &line[value_start..])
}

/// Resolves escapes: `\uXXXX` (a UTF-16 unit: pairs make one character), `\t \r \n \f`, and `\`
/// before any other character stands for that character.
fn unescape(text: &[char]) -> Result<String, EscapeError> {
    if !text.contains(&'\\') {
        return Ok(text.iter().collect());
    }
    let mut units: Vec<u16> = Vec::with_capacity(text.len());
    let mut chars = text.iter().copied();
    let mut buf = [0u16; 2];
    while let Some(c) = chars.next() {
        let c = if c == '\\' {
            // A line never ends in an odd `\` (see read_line), so one follows; keep the `\` if not.
            let Some(escaped) = chars.next() else {
                units.extend_from_slice('\\'.encode_utf16(&mut buf));
                break;
            };
            match escaped {
                'u' => {
                    let mut value: u16 = 0;
                    for _ in 0..4 {
                        let digit = chars
                            .next()
                            .and_then(|d| d.to_digit(16))
                            .ok_or(EscapeError::Malformed)?;
                        // `to_digit(16)` is below 16.
                        value = (value << 4) | u16::try_from(digit).unwrap_or(0);
                    }
                    units.push(value);
                    continue;
                }
                't' => '\t',
                'r' => '\r',
                'n' => '\n',
                'f' => '\x0c',
                other => other,
            }
        } else {
            c
        };
        units.extend_from_slice(c.encode_utf16(&mut buf));
    }
    String::from_utf16(&units).map_err(|_| EscapeError::UnpairedSurrogate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String, usize)> {
        parse(text)
            .expect("parses")
            .into_iter()
            .map(|e| (e.key, e.value, e.line))
            .collect()
    }

    #[test]
    fn a_continuation_at_the_end_keeps_the_key() {
        assert_eq!(
            pairs("a=1\nk=v\\"),
            [("a".into(), "1".into(), 1), ("k".into(), "v".into(), 2)]
        );
        assert_eq!(pairs("k=v\\\n"), [("k".into(), "v".into(), 1)]);
        assert_eq!(pairs("\\"), [(String::new(), String::new(), 1)]);
    }

    #[test]
    fn lines_are_where_the_logical_line_starts() {
        let got = pairs("# c\r\n\r\n  a = 1 \\\n   2\nb:3\rc 4");
        assert_eq!(
            got,
            [
                ("a".into(), "1 2".into(), 3),
                ("b".into(), "3".into(), 5),
                ("c".into(), "4".into(), 6)
            ]
        );
    }

    #[test]
    fn surrogate_pairs_join_and_halves_are_refused() {
        assert_eq!(pairs("k=\\uD83D\\uDE00")[0].1, "😀");
        assert!(parse("k=\\uD83D").is_err());
        assert_eq!(parse("a=1\nk=\\u12G4").map_err(|e| e.line), Err(2));
    }
}
