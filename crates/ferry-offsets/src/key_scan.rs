//! A fast path for locating an offset key without decoding it: for the common key shape it computes
//! the connector and the canonical partition straight from the raw bytes, and it gives up (returns
//! `None`) on anything it cannot prove the decoder would read back to the same bytes, so callers fall
//! back to [`codec::decode_key`](crate::codec::decode_key).
//!
//! Accepted: `["<connector>",{flat object}]` and `["<connector>",null]`, with JSON whitespace between
//! tokens, where every string (connector, field names, string values) has no backslash escape, and
//! every field value is such a string, `true`, `false`, `null`, or an integer in plain form
//! (`-?(0|[1-9][0-9]*)`, not `-0`, within i64). For those, the decoder's result printed canonically
//! ([`json::write_map`](crate::json) with sorted fields) is exactly the raw token text:
//!
//! - strings: the decoder rejects raw control characters and invalid UTF-8 (so the scanner gives up on
//!   them), and `write_string` escapes only `"`, `\` and control characters, none of which can appear
//!   unescaped in a string without backslashes; non-ASCII, `/` and DEL are written as they are;
//! - integers: decoded as i64 and printed by `Display`, which gives back the same minimal text;
//! - `true`, `false`, `null`: printed as they are.
//!
//! Fields are sorted by their decoded names, which equal the raw names (no escapes), compared as bytes
//! like `str::cmp`. Duplicate names are an error for the decoder, so the scanner gives up on them.

use std::borrow::Cow;

/// The location of a key found by [`scan_key`]: what the slow path (decode, then
/// [`canonical_partition`](crate::codec::canonical_partition) and
/// [`is_canonical`](crate::codec::is_canonical)) would compute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScannedKey<'a> {
    pub connector: &'a str,
    pub canonical: Cow<'a, [u8]>,
    pub raw_is_canonical: bool,
}

/// Locates `raw` without decoding it, or `None` when the key is not of the shape the fast path
/// handles (see the module docs); `None` says nothing about whether the key is valid.
pub(crate) fn scan_key(raw: &[u8]) -> Option<ScannedKey<'_>> {
    let mut s = Scanner::new(raw);
    s.expect(b'[')?;
    let connector_token = s.string()?;
    let connector = token_str(connector_token)?;
    s.expect(b',')?;
    s.skip_ws();
    let partition_start = s.at;
    let null = s.peek() == Some(b'n');
    // Whether the fields are in canonical order (strictly increasing names, so no duplicates).
    let mut sorted = true;
    if null {
        s.literal(b"null")?;
    } else {
        let mut previous: Option<&[u8]> = None;
        s.object(|name, _| {
            // Names are compared without their quotes: as tokens, `"a!"` would sort before `"a"`.
            let name = unquote(name);
            sorted &= previous.is_none_or(|p| p < name);
            previous = Some(name);
        })?;
    }
    let partition = &raw[partition_start..s.at];
    let spaced = s.spaced;
    s.expect(b']')?;
    s.skip_ws();
    if s.at != raw.len() {
        return None;
    }
    let canonical = if null || (sorted && !spaced) {
        // Already canonical (`null`, or fields in order without whitespace): the partition's own
        // bytes are what sorting and printing would give.
        Cow::Borrowed(partition)
    } else {
        Cow::Owned(sorted_object(partition)?)
    };
    let raw_is_canonical = !s.spaced && is_key(raw, connector_token, &canonical);
    Some(ScannedKey {
        connector,
        canonical,
        raw_is_canonical,
    })
}

/// The canonical form of `object`, a flat object the scanner accepted: its fields sorted by name,
/// without whitespace. `None` if two fields have the same name (the decoder refuses the key).
fn sorted_object(object: &[u8]) -> Option<Vec<u8>> {
    // Collected only on this path: keys written in canonical order (the common case) skip it.
    let mut fields: Vec<(&[u8], &[u8])> = Vec::new();
    Scanner::new(object).object(|name, value| fields.push((name, value)))?;
    fields.sort_unstable_by(|a, b| unquote(a.0).cmp(unquote(b.0)));
    if fields
        .windows(2)
        .any(|w| unquote(w[0].0) == unquote(w[1].0))
    {
        return None;
    }
    let mut out = Vec::with_capacity(object.len());
    out.push(b'{');
    for (i, (name, value)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(name);
        out.push(b':');
        out.extend_from_slice(value);
    }
    out.push(b'}');
    Some(out)
}

/// The index of the first `"`, `\` or control character in `bytes`: where a string without escapes
/// ends; and whether every byte before it is ASCII (then it is valid UTF-8 without checking). Skips
/// eight bytes at a time while none of them is one (most of a key is string text).
fn special_byte(bytes: &[u8]) -> Option<(usize, bool)> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut at = 0;
    // The high bits of every word skipped: any set means a non-ASCII byte.
    let mut high = 0u64;
    while let Some(chunk) = bytes
        .get(at..at + 8)
        .and_then(|c| <[u8; 8]>::try_from(c).ok())
    {
        let word = u64::from_le_bytes(chunk);
        let quote = word ^ (ONES * u64::from(b'"'));
        let backslash = word ^ (ONES * u64::from(b'\\'));
        // The classic "has a zero byte" / "has a byte below n" tests: never miss a match (false
        // alarms are settled by the byte loop below).
        let found = (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | (word.wrapping_sub(ONES * 0x20) & !word);
        if found & HIGHS != 0 {
            break;
        }
        high |= word;
        at += 8;
    }
    let rest = bytes.get(at..)?;
    let i = rest
        .iter()
        .position(|&b| matches!(b, b'"' | b'\\' | 0x00..=0x1F))?;
    Some((at + i, high & HIGHS == 0 && rest[..i].is_ascii()))
}

/// Whether `raw` is exactly `[<connector token>,<canonical>]`.
fn is_key(raw: &[u8], connector_token: &[u8], canonical: &[u8]) -> bool {
    raw.len() == connector_token.len() + canonical.len() + 3
        && raw[0] == b'['
        && raw[1..].starts_with(connector_token)
        && raw[1 + connector_token.len()] == b','
        && raw[2 + connector_token.len()..raw.len() - 1] == *canonical
        && raw[raw.len() - 1] == b']'
}

/// A string token without its quotes.
fn unquote(token: &[u8]) -> &[u8] {
    &token[1..token.len() - 1]
}

/// A string token's text, if it is valid UTF-8 (the decoder refuses it otherwise).
fn token_str(token: &[u8]) -> Option<&str> {
    std::str::from_utf8(unquote(token)).ok()
}

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Whitespace was skipped somewhere: the raw key is not canonical.
    spaced: bool,
    /// The last string token read is all ASCII (so valid UTF-8).
    ascii: bool,
}

impl<'a> Scanner<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            at: 0,
            spaced: false,
            ascii: false,
        }
    }

    /// A flat object of accepted field values, calling `field(name token, value token)` for each
    /// field in order.
    fn object(&mut self, mut field: impl FnMut(&'a [u8], &'a [u8])) -> Option<()> {
        self.expect(b'{')?;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Some(());
        }
        loop {
            let name = self.string()?;
            // The decoder rejects names that are not valid UTF-8.
            self.check_utf8(name)?;
            self.expect(b':')?;
            let value = self.value()?;
            field(name, value);
            self.skip_ws();
            match self.next()? {
                b',' => {}
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    /// `Some` when the string `token` just read is valid UTF-8 (checked only when not all ASCII).
    fn check_utf8(&self, token: &[u8]) -> Option<()> {
        if !self.ascii {
            token_str(token)?;
        }
        Some(())
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        Some(b)
    }

    /// Skips JSON whitespace, exactly the four bytes serde_json skips.
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
            self.spaced = true;
        }
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        self.skip_ws();
        (self.next()? == byte).then_some(())
    }

    fn literal(&mut self, text: &[u8]) -> Option<&'a [u8]> {
        let start = self.at;
        let token = self.bytes.get(start..start + text.len())?;
        if token != text {
            return None;
        }
        self.at += text.len();
        Some(token)
    }

    /// A string token, quotes included, without backslashes or control characters (gives up on them).
    fn string(&mut self) -> Option<&'a [u8]> {
        self.skip_ws();
        let start = self.at;
        if self.next()? != b'"' {
            return None;
        }
        let (len, ascii) = special_byte(self.bytes.get(self.at..)?)?;
        self.at += len;
        self.ascii = ascii;
        if self.next()? != b'"' {
            return None;
        }
        Some(&self.bytes[start..self.at])
    }

    /// A field value token of an accepted kind.
    fn value(&mut self) -> Option<&'a [u8]> {
        self.skip_ws();
        match self.peek()? {
            b'"' => {
                let token = self.string()?;
                self.check_utf8(token)?;
                Some(token)
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.integer(),
            _ => None,
        }
    }

    /// An integer token `-?(0|[1-9][0-9]*)` that is not `-0` and fits i64. What follows is checked by
    /// the caller (`1.5`, `1e3` and `01` fail there, as the next byte is not `,` or `}`).
    fn integer(&mut self) -> Option<&'a [u8]> {
        let start = self.at;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.at += 1;
        }
        let digits_start = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        let digits = &self.bytes[digits_start..self.at];
        let token = &self.bytes[start..self.at];
        match digits {
            [] => None,
            // `-0` reads back as 0 and prints as `0`; `01` is refused by the decoder.
            [b'0'] if negative => None,
            [b'0', _, ..] => None,
            // Up to 18 digits always fit i64; longer ones must be checked (the decoder refuses them).
            _ if digits.len() <= 18 => Some(token),
            _ => std::str::from_utf8(token)
                .ok()?
                .parse::<i64>()
                .ok()
                .map(|_| token),
        }
    }
}

/// Offset keys of many shapes, for checking the fast path against the decoder.
#[cfg(test)]
pub(crate) mod strategies {
    use proptest::prelude::*;

    /// One character of a JSON string, as raw text: plain, escaped, or invalid.
    fn string_char() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            50 => prop::sample::select(vec!["a", "b", "z", "A", "0", "_", "-", ".", "/", " ", "!", "~"])
                .prop_map(|s| s.as_bytes().to_vec()),
            12 => prop::sample::select(vec!["é", "日", "😀", "\u{7f}", "\u{80}", "\u{2028}", "\u{a0}"])
                .prop_map(|s| s.as_bytes().to_vec()),
            8 => prop::sample::select(vec![
                r#"\""#, r"\\", r"\/", r"\n", r"\t", r"\b", r"\f", r"\r", r"\u0041", r"\u0061",
                r"\u00e9", r"\u00E9", r"\u001f", r"\u001F", r"\u0000", r"\u007f", r"\ud83d\ude00",
                r"\ud83d", r"\x", r"\u12",
            ])
            .prop_map(|s| s.as_bytes().to_vec()),
            // Raw bytes the decoder refuses inside strings (controls, invalid UTF-8) or that end it.
            // Rare, so that most keys stay decodable.
            1 => prop::sample::select(vec![
                vec![0x01], vec![0x1f], vec![b'\n'], vec![b'\t'], vec![0xff], vec![0xc3],
                vec![0xed, 0xa0, 0x80], vec![b'"'], vec![b'\\'],
            ]),
        ]
    }

    /// A JSON string token (quotes included), usually valid.
    fn string_token(max_len: usize) -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(string_char(), 0..max_len).prop_map(|chars| {
            let mut out = vec![b'"'];
            out.extend(chars.concat());
            out.push(b'"');
            out
        })
    }

    /// Field names from a small pool, so duplicates and near-duplicates (`a`, `a!`, `\u0061`) are
    /// common.
    fn name_token() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            6 => prop::sample::select(vec![
                r#""a""#, r#""b""#, r#""A""#, r#""ab""#, r#""a!""#, r#""a b""#, r#""""#, r#""é""#,
                r#""filename""#, r#""position""#, r#""\u0061""#, r#""a\"""#, r#""a\u0000""#,
                r#""Z""#, r#""~""#, r#""a ""#,
            ])
            .prop_map(|s| s.as_bytes().to_vec()),
            2 => string_token(5),
        ]
    }

    /// Field value tokens of every kind: the accepted ones, and the ones the fast path must refuse.
    fn value_token() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => string_token(24),
            3 => any::<i64>().prop_map(|i| i.to_string().into_bytes()),
            2 => (-1000i64..1000).prop_map(|i| i.to_string().into_bytes()),
            1 => any::<u64>().prop_map(|i| i.to_string().into_bytes()),
            1 => any::<f64>().prop_map(|f| format!("{f:?}").into_bytes()),
            // Valid, some on the fast path and some not.
            8 => prop::sample::select(vec![
                "0", "-0", "1", "-1", "123456789", "999999999999999999", "-999999999999999999",
                "1000000000000000000", "9223372036854775807", "-9223372036854775808", "1.0", "1.5",
                "-0.0", "0.0", "1e3", "1E3", "1e+3", "1e-3", "1.0E-5", "0.1", "-1E-0", "true",
                "false", "null", r#""""#,
            ])
            .prop_map(|s| s.as_bytes().to_vec()),
            // Invalid here: out of range, malformed or nested.
            1 => prop::sample::select(vec![
                "01", "-01", "00", "9223372036854775808", "-9223372036854775809",
                "18446744073709551615", "123456789012345678901234567890", "1e400", "-1e400", "1.",
                "-", ".5", "+1", "NaN", "Infinity", "0x10", "tru", "nul", "True", "falsey", "nulll",
                "[]", "[1]", "{}", r#"{"a":1}"#, "''", "",
            ])
            .prop_map(|s| s.as_bytes().to_vec()),
        ]
    }

    /// Whitespace between tokens: usually none, sometimes JSON whitespace, sometimes other bytes
    /// that look like it.
    fn gap() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            100 => Just(Vec::new()),
            12 => prop::sample::select(vec![" ", "\t", "\n", "\r", "\r\n  ", "  "])
                .prop_map(|s| s.as_bytes().to_vec()),
            1 => prop::sample::select(vec!["\u{a0}", "\x0c", "\x0b", "\u{feff}", "\0"])
                .prop_map(|s| s.as_bytes().to_vec()),
        ]
    }

    #[derive(Debug, Clone)]
    enum Partition {
        Null,
        Object(Vec<(Vec<u8>, Vec<u8>)>),
        Other(Vec<u8>),
    }

    fn partition() -> impl Strategy<Value = Partition> {
        prop_oneof![
            2 => Just(Partition::Null),
            12 => prop::collection::vec((name_token(), value_token()), 0..5).prop_map(Partition::Object),
            // Many fields, past the fast path's limit.
            1 => prop::collection::vec((name_token(), value_token()), 14..20).prop_map(Partition::Object),
            1 => prop::sample::select(vec![
                "[]", "1", r#""x""#, "nul", "nulll", "Null", "true", r#"{"a":{}}"#, r#"{"a":[1]}"#,
                "{,}", r#"{"a":1,}"#, r#"{"a"}"#, r#"{"a":}"#, r#"{"a" 1}"#, "{", "",
            ])
            .prop_map(|s| Partition::Other(s.as_bytes().to_vec())),
        ]
    }

    /// A byte-level edit: (position, kind, byte); kind 0 replaces, 1 inserts, 2 deletes.
    type Edit = (usize, u8, u8);

    fn edit() -> impl Strategy<Value = Option<Edit>> {
        prop_oneof![
            20 => Just(None),
            1 => (any::<usize>(), 0u8..3, any::<u8>()).prop_map(Some),
        ]
    }

    /// Keys of many shapes (see the module docs of the fast path): field orders, escapes, unicode,
    /// floats, big integers, nested values, whitespace, duplicates and garbage.
    pub(crate) fn any_key() -> impl Strategy<Value = Vec<u8>> {
        (
            prop_oneof![20 => string_token(24), 1 => value_token()],
            partition(),
            any::<bool>(),
            prop_oneof![
                20 => Just(""),
                1 => prop::sample::select(vec![",1", ",null", "]", "x", ",", " x"]),
            ],
            prop::collection::vec(gap(), 64),
            edit(),
        )
            .prop_map(|(connector, partition, sort, extra, gaps, edit)| {
                let mut gaps = gaps.into_iter().cycle();
                let mut out = Vec::new();
                let mut push = |out: &mut Vec<u8>, bytes: &[u8]| {
                    out.extend(gaps.next().unwrap_or_default());
                    out.extend_from_slice(bytes);
                };
                push(&mut out, b"[");
                push(&mut out, &connector);
                push(&mut out, b",");
                match partition {
                    Partition::Null => push(&mut out, b"null"),
                    Partition::Other(text) => push(&mut out, &text),
                    Partition::Object(mut fields) => {
                        if sort {
                            // Often canonical already: sorted as the decoder would sort them.
                            fields.sort_by(|a, b| a.0.cmp(&b.0));
                        }
                        push(&mut out, b"{");
                        for (i, (name, value)) in fields.iter().enumerate() {
                            if i > 0 {
                                push(&mut out, b",");
                            }
                            push(&mut out, name);
                            push(&mut out, b":");
                            push(&mut out, value);
                        }
                        push(&mut out, b"}");
                    }
                }
                if extra.starts_with(',') {
                    push(&mut out, extra.as_bytes());
                }
                push(&mut out, b"]");
                if !extra.starts_with(',') {
                    push(&mut out, extra.as_bytes());
                }
                push(&mut out, b"");
                if let Some((at, kind, byte)) = edit {
                    let at = at % (out.len() + 1);
                    match kind {
                        0 if at < out.len() => out[at] = byte,
                        1 => out.insert(at, byte),
                        _ if at < out.len() => {
                            out.remove(at);
                        }
                        _ => {}
                    }
                }
                out
            })
    }

    /// Keys of the shape the fast path handles: it must take them.
    pub(crate) fn fast_key() -> impl Strategy<Value = Vec<u8>> {
        let name = "[a-zA-Z0-9_./ !~é日😀\u{7f}-]{0,6}";
        let value = prop_oneof![
            "[a-zA-Z0-9_./ é日😀\u{7f}-]{0,40}".prop_map(|s| format!("\"{s}\"")),
            any::<i64>().prop_map(|i| i.to_string()),
            (-10i64..10).prop_map(|i| i.to_string()),
            prop::sample::select(vec!["true", "false", "null"]).prop_map(str::to_owned),
        ];
        (
            name,
            prop::option::of(prop::collection::btree_map(name, value, 0..6)),
            any::<bool>(),
            prop::sample::select(vec!["", "", " ", "\n", "\t", "\r"]),
        )
            .prop_map(|(connector, partition, reverse, ws)| {
                let partition = match partition {
                    None => "null".to_owned(),
                    Some(fields) => {
                        let mut fields: Vec<String> = fields
                            .iter()
                            .map(|(k, v)| format!("\"{k}\":{ws}{v}"))
                            .collect();
                        if reverse {
                            fields.reverse();
                        }
                        format!("{{{}}}", fields.join(","))
                    }
                };
                format!("{ws}[\"{connector}\",{ws}{partition}]").into_bytes()
            })
    }
}
