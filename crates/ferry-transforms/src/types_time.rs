//! UTC dates without a date library: civil-date arithmetic, and the subset of
//! `java.text.SimpleDateFormat` patterns TimestampConverter and Cast need, formatted and parsed in
//! UTC as Kafka Connect's TimestampConverter does.
//!
//! Supported pattern letters: `G y M d H k K h m s S E a D u z Z X` and quoted literals (`'T'`,
//! `''` for a quote). Parsing is lenient like `SimpleDateFormat`'s default (`13` as a month rolls
//! into the next year), skips spaces before a field, and ignores text after the pattern (as
//! `DateFormat.parse(String)` does). The calendar is the proleptic Gregorian one (Java switches
//! to the Julian calendar before 1582-10-15).

/// Milliseconds per day.
pub(crate) const MILLIS_PER_DAY: i64 = 86_400_000;

/// Days since 1970-01-01 of a proleptic Gregorian date (`month` 1..=12, `day` may overflow).
pub(crate) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    // Howard Hinnant's algorithm: count from 0000-03-01 so leap days end each cycle.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian (year, month 1..=12, day 1..=31) of a day count since 1970-01-01.
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// English month names, January first.
pub(crate) const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// Every letter `SimpleDateFormat` accepts; other unquoted ASCII letters are illegal.
const JAVA_LETTERS: &str = "GyMdkHmsSEDFwWahKzZYuXL";
/// The letters implemented here.
const SUPPORTED_LETTERS: &str = "GyMdkHmsSEDahKzZuX";

#[derive(Debug, Clone, PartialEq)]
enum Item {
    Literal(String),
    Field { letter: char, count: usize },
}

/// A compiled `SimpleDateFormat` pattern, working in UTC.
#[derive(Debug, Clone)]
pub(crate) struct DatePattern {
    pattern: String,
    items: Vec<Item>,
}

/// The broken-down UTC fields of an instant.
struct Fields {
    year: i64,
    month: i64,
    day: i64,
    day_of_year: i64,
    /// 1 = Monday … 7 = Sunday.
    weekday: i64,
    hour: i64,
    minute: i64,
    second: i64,
    milli: i64,
}

impl Fields {
    fn of(millis: i64) -> Self {
        let days = millis.div_euclid(MILLIS_PER_DAY);
        let in_day = millis.rem_euclid(MILLIS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        Self {
            year,
            month,
            day,
            day_of_year: days - days_from_civil(year, 1, 1) + 1,
            // 1970-01-01 was a Thursday.
            weekday: (days + 3).rem_euclid(7) + 1,
            hour: in_day / 3_600_000,
            minute: in_day / 60_000 % 60,
            second: in_day / 1000 % 60,
            milli: in_day % 1000,
        }
    }
}

/// A `SimpleDateFormat` pattern Java refuses (Java's `IllegalArgumentException` text), or a letter
/// Ferry does not implement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PatternError {
    #[error("Unterminated quote")]
    UnterminatedQuote,
    #[error("Illegal pattern character '{0}'")]
    IllegalCharacter(char),
    #[error("invalid ISO 8601 format: length={0}")]
    IsoLength(usize),
    #[error(
        "pattern letter '{letter}' is not supported by Ferry (supported: {supported} and quoted literals)"
    )]
    Unsupported {
        letter: char,
        /// The letters Ferry implements.
        supported: &'static str,
    },
}

impl DatePattern {
    /// Compiles `pattern` as `new SimpleDateFormat(pattern)` does.
    ///
    /// # Errors
    /// The reason, worded like Java's `IllegalArgumentException` where Java refuses the pattern,
    /// or naming the letter Ferry does not implement.
    pub(crate) fn compile(pattern: &str) -> Result<Self, PatternError> {
        let mut items: Vec<Item> = Vec::new();
        let mut literal = String::new();
        let mut chars = pattern.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\'' {
                if chars.peek() == Some(&'\'') {
                    chars.next();
                    literal.push('\'');
                    continue;
                }
                // A quoted run; `''` inside it is one quote.
                loop {
                    match chars.next() {
                        None => return Err(PatternError::UnterminatedQuote),
                        Some('\'') if chars.peek() == Some(&'\'') => {
                            chars.next();
                            literal.push('\'');
                        }
                        Some('\'') => break,
                        Some(q) => literal.push(q),
                    }
                }
            } else if c.is_ascii_alphabetic() {
                if !JAVA_LETTERS.contains(c) {
                    return Err(PatternError::IllegalCharacter(c));
                }
                if !SUPPORTED_LETTERS.contains(c) {
                    return Err(PatternError::Unsupported {
                        letter: c,
                        supported: SUPPORTED_LETTERS,
                    });
                }
                let mut count = 1;
                while chars.peek() == Some(&c) {
                    chars.next();
                    count += 1;
                }
                if c == 'X' && count > 3 {
                    return Err(PatternError::IsoLength(count));
                }
                if !literal.is_empty() {
                    items.push(Item::Literal(std::mem::take(&mut literal)));
                }
                items.push(Item::Field { letter: c, count });
            } else {
                literal.push(c);
            }
        }
        if !literal.is_empty() {
            items.push(Item::Literal(literal));
        }
        Ok(Self {
            pattern: pattern.to_owned(),
            items,
        })
    }

    /// The pattern as given (Java's `toPattern()`).
    pub(crate) fn pattern(&self) -> &str {
        &self.pattern
    }

    /// Formats an instant (milliseconds since the epoch) in UTC.
    pub(crate) fn format(&self, millis: i64) -> String {
        let f = Fields::of(millis);
        let mut out = String::new();
        for item in &self.items {
            let (letter, count) = match item {
                Item::Literal(text) => {
                    out.push_str(text);
                    continue;
                }
                Item::Field { letter, count } => (*letter, *count),
            };
            // Java's year is the year of the era: 1 BC is year 0.
            let year_of_era = if f.year > 0 { f.year } else { 1 - f.year };
            match letter {
                'G' => out.push_str(if f.year > 0 { "AD" } else { "BC" }),
                'y' if count == 2 => pad(&mut out, year_of_era % 100, 2),
                'y' => pad(&mut out, year_of_era, count),
                'M' if count >= 4 => out.push_str(MONTHS[index(f.month - 1)]),
                'M' if count == 3 => out.push_str(&MONTHS[index(f.month - 1)][..3]),
                'M' => pad(&mut out, f.month, count),
                'd' => pad(&mut out, f.day, count),
                'D' => pad(&mut out, f.day_of_year, count),
                'E' if count >= 4 => out.push_str(DAYS[index(f.weekday - 1)]),
                'E' => out.push_str(&DAYS[index(f.weekday - 1)][..3]),
                'u' => pad(&mut out, f.weekday, count),
                'a' => out.push_str(if f.hour < 12 { "AM" } else { "PM" }),
                'H' => pad(&mut out, f.hour, count),
                'k' => pad(&mut out, if f.hour == 0 { 24 } else { f.hour }, count),
                'K' => pad(&mut out, f.hour % 12, count),
                'h' => pad(
                    &mut out,
                    if f.hour % 12 == 0 { 12 } else { f.hour % 12 },
                    count,
                ),
                'm' => pad(&mut out, f.minute, count),
                's' => pad(&mut out, f.second, count),
                'S' => pad(&mut out, f.milli, count),
                'z' if count >= 4 => out.push_str("Coordinated Universal Time"),
                'z' => out.push_str("UTC"),
                'Z' => out.push_str("+0000"),
                'X' => out.push('Z'),
                _ => {}
            }
        }
        out
    }

    /// Parses `text` as a UTC instant (milliseconds since the epoch); `None` when it does not
    /// match. Text after the pattern is ignored, as Java's `DateFormat.parse(String)` does.
    pub(crate) fn parse(&self, text: &str) -> Option<i64> {
        let mut p = Parsed::default();
        let mut rest = text;
        for (i, item) in self.items.iter().enumerate() {
            match item {
                Item::Literal(lit) => rest = rest.strip_prefix(lit.as_str())?,
                Item::Field { letter, count } => {
                    rest = rest.trim_start_matches([' ', '\t']);
                    // A numeric field followed directly by another takes exactly `count` digits.
                    let abutting = matches!(
                        self.items.get(i + 1),
                        Some(Item::Field { letter: next, count: next_count }) if is_numeric(*next, *next_count)
                    );
                    rest = p.field(*letter, *count, rest, abutting)?;
                }
            }
        }
        if rest.len() == text.len() {
            return None;
        }
        p.millis()
    }
}

fn index(i: i64) -> usize {
    usize::try_from(i).unwrap_or(0)
}

fn pad(out: &mut String, value: i64, width: usize) {
    if value < 0 {
        out.push('-');
    }
    let digits = value.unsigned_abs().to_string();
    for _ in digits.len()..width {
        out.push('0');
    }
    out.push_str(&digits);
}

fn is_numeric(letter: char, count: usize) -> bool {
    match letter {
        'M' => count <= 2,
        'y' | 'd' | 'D' | 'u' | 'H' | 'k' | 'K' | 'h' | 'm' | 's' | 'S' => true,
        _ => false,
    }
}

/// Fields read so far; unset ones take Java's defaults (1970-01-01T00:00:00.000Z).
#[derive(Default)]
struct Parsed {
    year: Option<i64>,
    bc: bool,
    month: Option<i64>,
    day: Option<i64>,
    day_of_year: Option<i64>,
    hour_of_day: Option<i64>,
    hour12: Option<i64>,
    pm: bool,
    minute: i64,
    second: i64,
    milli: i64,
    offset_millis: i64,
}

impl Parsed {
    fn field<'t>(
        &mut self,
        letter: char,
        count: usize,
        text: &'t str,
        abutting: bool,
    ) -> Option<&'t str> {
        if is_numeric(letter, count) {
            let (value, digits, rest) = number(text, abutting.then_some(count))?;
            match letter {
                'y' => {
                    self.year = Some(if count <= 2 && digits == 2 && value >= 0 {
                        two_digit_year(value)
                    } else {
                        value
                    });
                }
                'M' => self.month = Some(value),
                'd' => self.day = Some(value),
                'D' => self.day_of_year = Some(value),
                'H' => self.hour_of_day = Some(value),
                'k' => self.hour_of_day = Some(if value == 24 { 0 } else { value }),
                'K' => self.hour12 = Some(value),
                'h' => self.hour12 = Some(if value == 12 { 0 } else { value }),
                'm' => self.minute = value,
                's' => self.second = value,
                'S' => self.milli = value,
                // 'u': the day of the week does not move a date given by its fields.
                _ => {}
            }
            return Some(rest);
        }
        match letter {
            'G' => {
                let (i, rest) = one_of(text, &["AD", "BC"])?;
                self.bc = i == 1;
                Some(rest)
            }
            'M' => {
                let short: Vec<&str> = MONTHS.iter().map(|m| &m[..3]).collect();
                let (i, rest) = one_of(text, &MONTHS).or_else(|| one_of(text, &short))?;
                self.month = Some(i64::try_from(i).ok()? + 1);
                Some(rest)
            }
            'E' => {
                let short: Vec<&str> = DAYS.iter().map(|d| &d[..3]).collect();
                let (_, rest) = one_of(text, &DAYS).or_else(|| one_of(text, &short))?;
                Some(rest)
            }
            'a' => {
                let (i, rest) = one_of(text, &["AM", "PM"])?;
                self.pm = i == 1;
                Some(rest)
            }
            'z' | 'Z' | 'X' => {
                let (offset, rest) = zone(text)?;
                self.offset_millis = offset;
                Some(rest)
            }
            _ => None,
        }
    }

    fn millis(&self) -> Option<i64> {
        let year = self.year.unwrap_or(1970);
        let year = if self.bc { 1 - year } else { year };
        let days = match (self.month, self.day, self.day_of_year) {
            (None, None, Some(doy)) => days_from_civil(year, 1, 1).checked_add(doy - 1)?,
            (month, day, _) => {
                // Lenient: month 13 is January of the next year, day 32 rolls into the next month.
                let month0 = month.unwrap_or(1).checked_sub(1)?;
                let year = year.checked_add(month0.div_euclid(12))?;
                if year.abs() > 300_000_000 {
                    return None;
                }
                days_from_civil(year, month0.rem_euclid(12) + 1, 1)
                    .checked_add(day.unwrap_or(1).checked_sub(1)?)?
            }
        };
        let hour = match (self.hour_of_day, self.hour12) {
            (Some(h), _) => h,
            (None, Some(h)) => h + if self.pm { 12 } else { 0 },
            (None, None) => 0,
        };
        let millis = days
            .checked_mul(MILLIS_PER_DAY)?
            .checked_add(hour.checked_mul(3_600_000)?)?
            .checked_add(self.minute.checked_mul(60_000)?)?
            .checked_add(self.second.checked_mul(1000)?)?
            .checked_add(self.milli)?;
        millis.checked_sub(self.offset_millis)
    }
}

/// A signed decimal number: exactly `width` characters when given, else every digit there is.
/// Returns the value, the number of digits and the rest.
fn number(text: &str, width: Option<usize>) -> Option<(i64, usize, &str)> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let available = body.bytes().take_while(u8::is_ascii_digit).count();
    let take = match width {
        Some(w) => available.min(w.saturating_sub(usize::from(negative))),
        None => available,
    };
    if take == 0 || take > 18 {
        return None;
    }
    let value: i64 = body[..take].parse().ok()?;
    Some((if negative { -value } else { value }, take, &body[take..]))
}

/// Which of `names` `text` starts with (case-insensitive, longest first as Java picks the
/// longest match), and the rest.
fn one_of<'t>(text: &'t str, names: &[&str]) -> Option<(usize, &'t str)> {
    let mut best: Option<(usize, usize)> = None;
    for (i, name) in names.iter().enumerate() {
        let n = name.len();
        if text.len() >= n
            && text.is_char_boundary(n)
            && text[..n].eq_ignore_ascii_case(name)
            && best.is_none_or(|(_, len)| n > len)
        {
            best = Some((i, n));
        }
    }
    best.map(|(i, n)| (i, &text[n..]))
}

/// A UTC offset: `Z`, `UTC`, `GMT`, `UT`, optionally followed by (or just) `+hh`, `+hhmm` or
/// `+hh:mm`. Returns the offset in milliseconds and the rest.
fn zone(text: &str) -> Option<(i64, &str)> {
    let mut rest = text;
    let mut named = false;
    for name in ["UTC", "GMT", "UT", "Z"] {
        if rest
            .get(..name.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(name))
        {
            rest = &rest[name.len()..];
            named = true;
            break;
        }
    }
    let sign = match rest.as_bytes().first() {
        Some(b'+') => 1,
        Some(b'-') => -1,
        _ if named => return Some((0, rest)),
        _ => return None,
    };
    let body = &rest[1..];
    let digits = body.bytes().take_while(u8::is_ascii_digit).count();
    let (hours, minutes, rest) = match digits {
        1 | 2 if body.as_bytes().get(digits) == Some(&b':') => {
            let after = &body[digits + 1..];
            let m = after.bytes().take_while(u8::is_ascii_digit).count();
            if m != 2 {
                return None;
            }
            (
                body[..digits].parse::<i64>().ok()?,
                after[..2].parse::<i64>().ok()?,
                &after[2..],
            )
        }
        1 | 2 => (body[..digits].parse::<i64>().ok()?, 0, &body[digits..]),
        4 => (
            body[..2].parse::<i64>().ok()?,
            body[2..4].parse::<i64>().ok()?,
            &body[4..],
        ),
        _ => return None,
    };
    if hours > 23 || minutes > 59 {
        return None;
    }
    Some((sign * (hours * 3_600_000 + minutes * 60_000), rest))
}

/// Java's two-digit year: within 80 years before and 20 years after now.
fn two_digit_year(yy: i64) -> i64 {
    let now_millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let (year, _, _) = civil_from_days(now_millis.div_euclid(MILLIS_PER_DAY));
    let start = year - 80;
    let candidate = start.div_euclid(100) * 100 + yy;
    if candidate < start {
        candidate + 100
    } else {
        candidate
    }
}

/// Kafka Connect's `Values.dateFormatFor(date).format(date)` (in UTC): a time of day before
/// 1970-01-02, a date at midnight, a timestamp otherwise.
pub(crate) fn connect_date_string(millis: i64) -> String {
    let pattern = if millis < MILLIS_PER_DAY {
        "HH:mm:ss.SSS'Z'"
    } else if millis % MILLIS_PER_DAY == 0 {
        "yyyy-MM-dd"
    } else {
        "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
    };
    DatePattern::compile(pattern)
        .map(|p| p.format(millis))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(p: &str) -> DatePattern {
        DatePattern::compile(p).unwrap()
    }

    #[test]
    fn civil_dates_round_trip_across_eras_and_leap_days() {
        for days in [
            -800_000, -719_468, -1, 0, 1, 59, 365, 11_016, 19_000, 2_932_896,
        ] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2000, 2, 29), 11_016);
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(days_from_civil(2017, 1, 1), 17_167);
    }

    #[test]
    fn formats_kafka_connect_test_pattern() {
        // TimestampConverterTest: 1970-01-02 00:00:01.234 UTC.
        let p = pattern("yyyy MM dd HH mm ss SSS z");
        assert_eq!(p.format(86_401_234), "1970 01 02 00 00 01 234 UTC");
        assert_eq!(p.parse("1970 01 02 00 00 01 234 UTC"), Some(86_401_234));
    }

    #[test]
    fn formats_and_parses_iso_like_patterns_with_quoted_literals() {
        let p = pattern("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'");
        let millis = 1_483_228_800_000 + 3_723_004; // 2017-01-01T01:02:03.004Z
        assert_eq!(p.format(millis), "2017-01-01T01:02:03.004Z");
        assert_eq!(p.parse("2017-01-01T01:02:03.004Z"), Some(millis));
        let p = pattern("yyyy-MM-dd HH:mm:ss");
        assert_eq!(p.parse("2017-01-01 00:00:00"), Some(1_483_228_800_000));
        assert_eq!(p.format(1_483_228_800_000), "2017-01-01 00:00:00");
        assert_eq!(pattern("''yy''").format(0), "'70'");
        assert_eq!(
            pattern("'o''clock' h a").format(13 * 3_600_000),
            "o'clock 1 PM"
        );
    }

    #[test]
    fn formats_names_and_negative_instants() {
        let p = pattern("EEE, d MMM yyyy HH:mm:ss Z");
        assert_eq!(p.format(0), "Thu, 1 Jan 1970 00:00:00 +0000");
        assert_eq!(p.format(-1), "Wed, 31 Dec 1969 23:59:59 +0000");
        assert_eq!(
            pattern("EEEE MMMM D").format(1_483_228_800_000),
            "Sunday January 1"
        );
        assert_eq!(p.parse("thu, 1 jan 1970 00:00:00 +0100"), Some(-3_600_000));
    }

    #[test]
    fn parsing_is_lenient_and_ignores_trailing_text_like_simple_date_format() {
        let p = pattern("yyyy-MM-dd");
        assert_eq!(p.parse("2016-13-01"), p.parse("2017-01-01"));
        assert_eq!(p.parse("2017-1-1"), p.parse("2017-01-01"));
        assert_eq!(p.parse("2017-01-01 and more"), p.parse("2017-01-01"));
        assert_eq!(p.parse("2017/01/01"), None);
        assert_eq!(p.parse(""), None);
        // Non-ASCII text where a number, a name or a zone is expected does not match.
        assert_eq!(pattern("yyyy z").parse("2017 é€"), None);
        assert_eq!(pattern("MMM").parse("é€"), None);
        assert_eq!(pattern("d").parse("€"), None);
        let abutting = pattern("yyyyMMddHHmm");
        assert_eq!(
            abutting.parse("201701010102"),
            Some(1_483_228_800_000 + 3_720_000)
        );
        let offset = pattern("yyyy-MM-dd'T'HH:mmXXX");
        assert_eq!(
            offset.parse("2017-01-01T02:00+02:00"),
            Some(1_483_228_800_000)
        );
        assert_eq!(offset.parse("2017-01-01T00:00Z"), Some(1_483_228_800_000));
    }

    #[test]
    fn format_then_parse_gives_the_instant_back_from_year_1_to_9999() {
        let p = pattern("yyyy-MM-dd'T'HH:mm:ss.SSS");
        let first = days_from_civil(1, 1, 1) * MILLIS_PER_DAY;
        let last = days_from_civil(9999, 12, 31) * MILLIS_PER_DAY;
        // A stride that is not a multiple of a day, a second or a millisecond pattern.
        let mut millis = first;
        while millis <= last {
            assert_eq!(
                p.parse(&p.format(millis)),
                Some(millis),
                "{}",
                p.format(millis)
            );
            millis += 7_777_777_777;
        }
    }

    #[test]
    fn refuses_patterns_java_refuses_and_letters_not_implemented() {
        assert_eq!(
            DatePattern::compile("bad-format").unwrap_err().to_string(),
            "Illegal pattern character 'b'"
        );
        assert_eq!(
            DatePattern::compile("yyyy'T").unwrap_err().to_string(),
            "Unterminated quote"
        );
        assert!(
            DatePattern::compile("YYYY-ww")
                .unwrap_err()
                .to_string()
                .contains("not supported by Ferry")
        );
        assert!(DatePattern::compile("XXXX").is_err());
    }

    #[test]
    fn connect_date_strings_follow_values_date_format_for() {
        assert_eq!(connect_date_string(3_600_000), "01:00:00.000Z");
        assert_eq!(connect_date_string(MILLIS_PER_DAY), "1970-01-02");
        assert_eq!(
            connect_date_string(MILLIS_PER_DAY + 1),
            "1970-01-02T00:00:00.001Z"
        );
    }
}
