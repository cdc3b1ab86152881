//! Formatting a millisecond timestamp in UTC with a `java.text.SimpleDateFormat` pattern, for
//! TimestampRouter's `timestamp.format`. Hand-written civil-date arithmetic (no date crate):
//! the proleptic Gregorian calendar, English names and US week rules (weeks start on Sunday; week 1
//! holds January 1st), which is what a JVM with an English default locale does after 1582-10-15.

use std::fmt::Write as _;

use crate::types_time::{MILLIS_PER_DAY, MONTHS, PatternError};

/// Sunday first, as `(days since the epoch + 4) mod 7` counts (1970-01-01 was a Thursday).
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// One piece of a compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// Text copied as it is (quoted text, punctuation, `''`).
    Literal(String),
    /// A pattern letter repeated `count` times (`yyyy` is `('y', 4)`).
    Field(char, usize),
}

/// A compiled `SimpleDateFormat` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DatePattern(Vec<Token>);

/// Every letter `SimpleDateFormat` knows; any other ASCII letter outside quotes is an error.
const PATTERN_LETTERS: &str = "GyMdkHmsSEDFwWahKzZYuXL";

impl DatePattern {
    /// Compiles `pattern` as `SimpleDateFormat` does.
    ///
    /// # Errors
    /// Java's `IllegalArgumentException` text: an unknown letter, an unterminated quote, an `X`
    /// repeated more than three times.
    pub(crate) fn parse(pattern: &str) -> Result<Self, PatternError> {
        let mut tokens = Vec::new();
        let mut literal = String::new();
        let mut in_quote = false;
        let mut chars = pattern.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\'' {
                // `''` is one quote, inside or outside quoted text.
                if chars.peek() == Some(&'\'') {
                    chars.next();
                    literal.push('\'');
                } else {
                    in_quote = !in_quote;
                }
                continue;
            }
            if in_quote || !c.is_ascii_alphabetic() {
                literal.push(c);
                continue;
            }
            if !PATTERN_LETTERS.contains(c) {
                return Err(PatternError::IllegalCharacter(c));
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
                tokens.push(Token::Literal(std::mem::take(&mut literal)));
            }
            tokens.push(Token::Field(c, count));
        }
        if in_quote {
            return Err(PatternError::UnterminatedQuote);
        }
        if !literal.is_empty() {
            tokens.push(Token::Literal(literal));
        }
        Ok(Self(tokens))
    }

    /// `millis` (since the epoch) formatted in UTC.
    pub(crate) fn format(&self, millis: i64) -> String {
        let t = Civil::from_millis(millis);
        let mut out = String::new();
        for token in &self.0 {
            match token {
                Token::Literal(s) => out.push_str(s),
                Token::Field(c, n) => t.write_field(&mut out, *c, *n),
            }
        }
        out
    }
}

/// A UTC instant broken into calendar fields.
#[derive(Debug, Clone, Copy)]
struct Civil {
    days: i64,
    year: i64,
    month: u32,
    day: u32,
    millis_of_day: i64,
}

impl Civil {
    fn from_millis(millis: i64) -> Self {
        let days = millis.div_euclid(MILLIS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        Self {
            days,
            year,
            month,
            day,
            millis_of_day: millis.rem_euclid(MILLIS_PER_DAY),
        }
    }

    /// 0 = Sunday … 6 = Saturday.
    fn weekday(&self) -> usize {
        weekday(self.days)
    }

    fn day_of_year(&self) -> i64 {
        self.days - days_from_civil(self.year, 1, 1) + 1
    }

    /// The week-based year and week of year under US rules.
    fn week_of_year(&self) -> (i64, i64) {
        let week_start = self.days - self.weekday() as i64;
        let next_jan1 = days_from_civil(self.year + 1, 1, 1);
        if week_start + 6 >= next_jan1 {
            return (self.year + 1, 1);
        }
        let jan1 = days_from_civil(self.year, 1, 1);
        let first_week_start = jan1 - weekday(jan1) as i64;
        (self.year, (week_start - first_week_start) / 7 + 1)
    }

    fn write_field(&self, out: &mut String, letter: char, count: usize) {
        let hour = self.millis_of_day / 3_600_000;
        let text = |s: &str| -> String {
            if count >= 4 {
                s.to_owned()
            } else {
                s.chars().take(3).collect()
            }
        };
        match letter {
            'G' => out.push_str(if self.year > 0 { "AD" } else { "BC" }),
            'y' => year(out, era_year(self.year), count),
            'Y' => year(out, era_year(self.week_of_year().0), count),
            'M' | 'L' if count >= 3 => out.push_str(&text(month_name(self.month))),
            'M' | 'L' => pad(out, i64::from(self.month), count),
            'd' => pad(out, i64::from(self.day), count),
            'H' => pad(out, hour, count),
            'k' => pad(out, if hour == 0 { 24 } else { hour }, count),
            'K' => pad(out, hour % 12, count),
            'h' => pad(out, if hour % 12 == 0 { 12 } else { hour % 12 }, count),
            'm' => pad(out, self.millis_of_day / 60_000 % 60, count),
            's' => pad(out, self.millis_of_day / 1000 % 60, count),
            // Milliseconds as a number, not a fraction: `S` of 5 ms is "5", `SSS` is "005".
            'S' => pad(out, self.millis_of_day % 1000, count),
            'E' => out.push_str(&text(WEEKDAYS[self.weekday()])),
            'u' => pad(out, ((self.weekday() + 6) % 7 + 1) as i64, count),
            'D' => pad(out, self.day_of_year(), count),
            'F' => pad(out, i64::from((self.day - 1) / 7 + 1), count),
            'w' => pad(out, self.week_of_year().1, count),
            'W' => {
                let first = days_from_civil(self.year, self.month, 1);
                let first_week_start = first - weekday(first) as i64;
                let week_start = self.days - self.weekday() as i64;
                pad(out, (week_start - first_week_start) / 7 + 1, count);
            }
            'a' => out.push_str(if hour < 12 { "AM" } else { "PM" }),
            'z' => out.push_str(if count >= 4 {
                "Coordinated Universal Time"
            } else {
                "UTC"
            }),
            'Z' => out.push_str("+0000"),
            'X' => out.push('Z'),
            // `parse` admits only the letters above.
            _ => {}
        }
    }
}

/// `SimpleDateFormat`'s years: `yy` is the last two digits, any other count pads to that width.
fn year(out: &mut String, year: i64, count: usize) {
    if count == 2 {
        pad(out, year % 100, 2);
    } else {
        pad(out, year, count);
    }
}

/// The year of the era (1 BC is astronomical year 0), as Java's calendar reports it.
fn era_year(astronomical: i64) -> i64 {
    if astronomical > 0 {
        astronomical
    } else {
        1 - astronomical
    }
}

fn pad(out: &mut String, value: i64, width: usize) {
    // Writing to a String cannot fail.
    let _ = write!(out, "{value:0width$}");
}

fn month_name(month: u32) -> &'static str {
    MONTHS[(month as usize).saturating_sub(1) % 12]
}

fn weekday(days: i64) -> usize {
    // rem_euclid(7) is in 0..7, so the cast cannot truncate.
    (days + 4).rem_euclid(7) as usize
}

/// The date of a day count since 1970-01-01 (`types_time`'s arithmetic, with this module's types).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let (year, month, day) = crate::types_time::civil_from_days(days);
    // Month and day are within 1..=12 and 1..=31.
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

/// The inverse of [`civil_from_days`].
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    crate::types_time::days_from_civil(year, i64::from(month), i64::from(day))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format(pattern: &str, millis: i64) -> String {
        DatePattern::parse(pattern).unwrap().format(millis)
    }

    #[test]
    fn kafka_default_pattern() {
        // TimestampRouterTest.defaultConfiguration.
        assert_eq!(format("yyyyMMdd", 1_483_425_001_864), "20170103");
    }

    #[test]
    fn every_numeric_field() {
        // 2017-01-03T06:30:01.864Z, a Tuesday.
        let t = 1_483_425_001_864;
        assert_eq!(
            format("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'", t),
            "2017-01-03T06:30:01.864Z"
        );
        assert_eq!(format("yy M d H m s S", t), "17 1 3 6 30 1 864");
        assert_eq!(format("D F u w W k K h a", t), "3 1 2 1 1 6 6 6 AM");
        assert_eq!(
            format("EEE EEEE MMM MMMM G", t),
            "Tue Tuesday Jan January AD"
        );
        assert_eq!(
            format("z zzzz Z X", t),
            "UTC Coordinated Universal Time +0000 Z"
        );
    }

    #[test]
    fn quotes_and_literals() {
        assert_eq!(format("'year' yyyy", 0), "year 1970");
        assert_eq!(format("''yyyy''", 0), "'1970'");
        assert_eq!(format("'it''s' HH", 0), "it's 00");
        assert_eq!(format("yyyy_MM.dd/HH", 0), "1970_01.01/00");
    }

    #[test]
    fn dates_around_the_epoch_and_leap_days() {
        assert_eq!(
            format("yyyy-MM-dd HH:mm:ss.SSS", -1),
            "1969-12-31 23:59:59.999"
        );
        // 2000-02-29T12:00:00Z and 2100-03-01 (2100 is not a leap year).
        assert_eq!(format("yyyy-MM-dd HH", 951_825_600_000), "2000-02-29 12");
        assert_eq!(format("yyyy-MM-dd D", 4_107_542_400_000), "2100-03-01 60");
        for days in [-800_000, -1, 0, 59, 10_957, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn week_year_crosses_into_next_year() {
        // 2017-12-31 is a Sunday, in the week holding 2018-01-01: week 1 of 2018 (US rules).
        assert_eq!(format("yyyy YYYY ww", 1_514_678_400_000), "2017 2018 01");
        // 2016-12-31 is a Saturday, the last day of week 53 of 2016 (2017-01-01 is a Sunday).
        assert_eq!(format("yyyy YYYY ww", 1_483_142_400_000), "2016 2016 53");
        // 2017-01-08 (Sunday) starts week 2.
        assert_eq!(format("w", 1_483_833_600_000), "2");
    }

    #[test]
    fn hour_fields_at_midnight_and_noon() {
        assert_eq!(format("H k K h a", 0), "0 24 0 12 AM");
        assert_eq!(format("H k K h a", 12 * 3_600_000), "12 12 0 12 PM");
    }

    #[test]
    fn java_errors_for_bad_patterns() {
        assert_eq!(
            DatePattern::parse("yyyyMMdd-q").map_err(|e| e.to_string()),
            Err("Illegal pattern character 'q'".to_owned())
        );
        assert_eq!(
            DatePattern::parse("yyyy'abc").map_err(|e| e.to_string()),
            Err("Unterminated quote".to_owned())
        );
        assert_eq!(
            DatePattern::parse("XXXX").map_err(|e| e.to_string()),
            Err("invalid ISO 8601 format: length=4".to_owned())
        );
    }
}
