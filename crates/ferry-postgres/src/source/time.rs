//! PostgreSQL's binary date/time values, Kafka Connect's `{"timestamp":ms,"timestamp_nanos":ns}`
//! offsets, and ISO-8601 text.
//!
//! PostgreSQL sends a `timestamp` / `timestamptz` as microseconds since 2000-01-01 00:00:00 (UTC for
//! `timestamptz`), a `date` as days since 2000-01-01 and a `time` as microseconds since midnight. The
//! JDBC source keeps a timestamp offset as Java's `java.sql.Timestamp`: `timestamp` is
//! `getTime()` (milliseconds since the Unix epoch) and `timestamp_nanos` is `getNanos()` (the
//! nanoseconds within the second, 0..=999 999 999), so the instant is
//! `floor(timestamp / 1000)` seconds plus `timestamp_nanos`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Microseconds from the Unix epoch to PostgreSQL's epoch (2000-01-01).
const PG_EPOCH_UNIX_MICROS: i64 = 946_684_800_000_000;
/// Days from the Unix epoch to PostgreSQL's epoch.
const PG_EPOCH_UNIX_DAYS: i64 = 10_957;
const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;

/// An instant with microsecond precision: PostgreSQL's `timestamp`/`timestamptz` resolution.
///
/// Built from a `timestamp` without time zone it holds the wall-clock time as if at UTC; the
/// database turns such values into instants in `db.timezone` (`columns::row_timestamps`, `zone`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Micros(pub(crate) i64);

/// An offset's `timestamp_nanos` outside 0..=999 999 999.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "timestamp_nanos must be between 0 and 999999999 (the nanoseconds within the second), not {0}"
)]
pub(crate) struct NanosOutOfRange(pub(crate) i64);

impl Micros {
    /// The Unix epoch: the JDBC source's position when neither an offset nor `timestamp.initial` is set.
    pub(crate) const UNIX_EPOCH: Micros = Micros(0);

    /// From PostgreSQL's binary value (microseconds since 2000-01-01); `None` for ±infinity.
    pub(crate) fn from_pg(pg: i64) -> Option<Self> {
        if pg == i64::MAX || pg == i64::MIN {
            return None;
        }
        pg.checked_add(PG_EPOCH_UNIX_MICROS).map(Micros)
    }

    /// From milliseconds since the Unix epoch (`timestamp.initial`, an offset without nanos).
    pub(crate) fn from_millis(ms: i64) -> Self {
        Micros(ms.saturating_mul(1000))
    }

    /// From a JDBC offset: whole seconds of `ms` plus `nanos` (when given) as the fraction.
    ///
    /// # Errors
    /// `nanos` is outside 0..=999 999 999.
    pub(crate) fn from_offset(ms: i64, nanos: Option<i64>) -> Result<Self, NanosOutOfRange> {
        let Some(nanos) = nanos else {
            return Ok(Self::from_millis(ms));
        };
        if !(0..=999_999_999).contains(&nanos) {
            return Err(NanosOutOfRange(nanos));
        }
        let seconds = ms.div_euclid(1000);
        Ok(Micros(
            seconds
                .saturating_mul(MICROS_PER_SECOND)
                .saturating_add(nanos / 1000),
        ))
    }

    /// The offset fields: (`timestamp` in ms since the Unix epoch, `timestamp_nanos` within the second).
    pub(crate) fn to_offset(self) -> (i64, i64) {
        let ms = self.0.div_euclid(1000);
        let nanos = self.0.rem_euclid(MICROS_PER_SECOND) * 1000;
        (ms, nanos)
    }

    /// As a `SystemTime`, to bind as a `timestamp` or `timestamptz` query parameter.
    pub(crate) fn to_system_time(self) -> SystemTime {
        let magnitude = Duration::from_micros(self.0.unsigned_abs());
        let time = if self.0 >= 0 {
            UNIX_EPOCH.checked_add(magnitude)
        } else {
            UNIX_EPOCH.checked_sub(magnitude)
        };
        // ±2^63 µs fits wherever `SystemTime` counts seconds in 64 bits (every supported target).
        time.unwrap_or(UNIX_EPOCH)
    }

    /// From a `SystemTime` (a `timestamptz` read from the database); saturates far outside ±292k years.
    pub(crate) fn from_system_time(time: SystemTime) -> Self {
        match time.duration_since(UNIX_EPOCH) {
            Ok(after) => Micros(i64::try_from(after.as_micros()).unwrap_or(i64::MAX)),
            Err(before) => {
                Micros(i64::try_from(before.duration().as_micros()).map_or(i64::MIN, |m| -m))
            }
        }
    }

    /// ISO-8601 text: `2024-05-01T12:00:00.123456` (`utc`: with a trailing `Z`).
    pub(crate) fn to_iso(self, utc: bool) -> String {
        let days = self.0.div_euclid(MICROS_PER_DAY);
        let micros_of_day = self.0.rem_euclid(MICROS_PER_DAY);
        let mut out = format_date(days);
        out.push('T');
        out.push_str(&format_time(micros_of_day));
        if utc {
            out.push('Z');
        }
        out
    }
}

/// A PostgreSQL `timestamp` value as ISO-8601 text (`utc` for `timestamptz`), or `infinity` /
/// `-infinity`.
pub(crate) fn timestamp_text(pg: i64, utc: bool) -> String {
    match pg {
        i64::MAX => "infinity".to_owned(),
        i64::MIN => "-infinity".to_owned(),
        // Split at PostgreSQL's epoch first: years past 262143 overflow Unix microseconds.
        pg => {
            let days = pg.div_euclid(MICROS_PER_DAY) + PG_EPOCH_UNIX_DAYS;
            let mut out = format_date(days);
            out.push('T');
            out.push_str(&format_time(pg.rem_euclid(MICROS_PER_DAY)));
            if utc {
                out.push('Z');
            }
            out
        }
    }
}

/// A PostgreSQL `date` value (days since 2000-01-01) as `YYYY-MM-DD`, or `infinity` / `-infinity`.
pub(crate) fn date_text(pg_days: i32) -> String {
    match pg_days {
        i32::MAX => "infinity".to_owned(),
        i32::MIN => "-infinity".to_owned(),
        d => format_date(i64::from(d) + PG_EPOCH_UNIX_DAYS),
    }
}

/// A time of day in microseconds as `HH:MM:SS[.fff[fff]]`.
pub(crate) fn format_time(micros_of_day: i64) -> String {
    let seconds = micros_of_day.div_euclid(MICROS_PER_SECOND);
    let fraction = micros_of_day.rem_euclid(MICROS_PER_SECOND);
    let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    let mut out = format!("{h:02}:{m:02}:{s:02}");
    push_fraction(&mut out, fraction);
    out
}

/// `.fff` for whole milliseconds, `.ffffff` otherwise, nothing for zero.
fn push_fraction(out: &mut String, micros: i64) {
    if micros == 0 {
        return;
    }
    if micros % 1000 == 0 {
        out.push_str(&format!(".{:03}", micros / 1000));
    } else {
        out.push_str(&format!(".{micros:06}"));
    }
}

/// A `timetz` value: microseconds since midnight and PostgreSQL's zone (seconds *west* of UTC).
pub(crate) fn timetz_text(micros_of_day: i64, zone_west_seconds: i32) -> String {
    let east = -i64::from(zone_west_seconds);
    let sign = if east < 0 { '-' } else { '+' };
    let east = east.abs();
    let mut out = format_time(micros_of_day);
    out.push_str(&format!("{sign}{:02}:{:02}", east / 3600, east / 60 % 60));
    if east % 60 != 0 {
        out.push_str(&format!(":{:02}", east % 60));
    }
    out
}

/// An `interval` as an ISO-8601 duration (`P1Y2M3DT4H5M6.5S`), each part with its own sign as
/// PostgreSQL's `intervalstyle=iso_8601` writes it; `PT0S` when zero.
pub(crate) fn interval_text(months: i32, days: i32, micros: i64) -> String {
    let mut out = String::from("P");
    let (years, months) = (months / 12, months % 12);
    for (value, unit) in [
        (i64::from(years), 'Y'),
        (i64::from(months), 'M'),
        (i64::from(days), 'D'),
    ] {
        if value != 0 {
            out.push_str(&format!("{value}{unit}"));
        }
    }
    if micros != 0 {
        out.push('T');
        let hours = micros / (3600 * MICROS_PER_SECOND);
        let minutes = micros / (60 * MICROS_PER_SECOND) % 60;
        let rest = micros % (60 * MICROS_PER_SECOND);
        if hours != 0 {
            out.push_str(&format!("{hours}H"));
        }
        if minutes != 0 {
            out.push_str(&format!("{minutes}M"));
        }
        if rest != 0 {
            if rest < 0 {
                out.push('-');
            }
            let rest = rest.abs();
            out.push_str(&(rest / MICROS_PER_SECOND).to_string());
            let fraction = rest % MICROS_PER_SECOND;
            if fraction != 0 {
                let digits = format!("{fraction:06}");
                out.push('.');
                out.push_str(digits.trim_end_matches('0'));
            }
            out.push('S');
        }
    }
    if out == "P" {
        out.push_str("T0S");
    }
    out
}

/// Days since the Unix epoch as `YYYY-MM-DD` (proleptic Gregorian; years outside 0..=9999 get a sign,
/// year 0 is 1 BC as in ISO-8601).
fn format_date(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    if (0..=9999).contains(&y) {
        format!("{y:04}-{m:02}-{d:02}")
    } else if y < 0 {
        format!("-{:04}-{m:02}-{d:02}", -y)
    } else {
        format!("+{y}-{m:02}-{d:02}")
    }
}

/// Howard Hinnant's `civil_from_days`: (year, month, day) of a day count since 1970-01-01.
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let d = doy - (153 * mp + 2) / 5 + 1; // [1, 31]
    let m = if mp < 10 { mp + 3 } else { mp - 9 }; // [1, 12]
    let year = if m <= 2 { y + 1 } else { y };
    // Both are in range by construction.
    (
        year,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_round_trip_like_java_timestamps() {
        // 2019-01-09T10:34:16Z, the reference's example offset.
        let m = Micros::from_millis(1_547_030_056_000);
        assert_eq!(m.to_offset(), (1_547_030_056_000, 0));
        let m = Micros(1_547_030_056_123_456);
        assert_eq!(m.to_offset(), (1_547_030_056_123, 123_456_000));
        assert_eq!(
            Micros::from_offset(1_547_030_056_123, Some(123_456_000)),
            Ok(m)
        );
        // Before 1970: Java's Timestamp keeps a positive nanos field.
        let m = Micros(-1_500_000); // 1969-12-31T23:59:58.5
        assert_eq!(m.to_offset(), (-1500, 500_000_000));
        assert_eq!(Micros::from_offset(-1500, Some(500_000_000)), Ok(m));
        assert_eq!(Micros::from_offset(-1500, None), Ok(m));
        assert!(Micros::from_offset(0, Some(1_000_000_000)).is_err());
        assert!(Micros::from_offset(0, Some(-1)).is_err());
    }

    #[test]
    fn iso_text() {
        assert_eq!(Micros(0).to_iso(true), "1970-01-01T00:00:00Z");
        assert_eq!(
            Micros(1_547_030_056_123_000).to_iso(false),
            "2019-01-09T10:34:16.123"
        );
        assert_eq!(
            Micros(1_547_030_056_000_001).to_iso(true),
            "2019-01-09T10:34:16.000001Z"
        );
        assert_eq!(Micros(-1).to_iso(true), "1969-12-31T23:59:59.999999Z");
        assert_eq!(timestamp_text(0, true), "2000-01-01T00:00:00Z");
        assert_eq!(timestamp_text(i64::MAX, true), "infinity");
        // 294276-12-31 23:59:59.999999, PostgreSQL's largest timestamp: a date, never "infinity".
        assert_eq!(
            timestamp_text(9_223_371_331_199_999_999, false),
            "+294276-12-31T23:59:59.999999"
        );
        assert_eq!(timestamp_text(i64::MIN, false), "-infinity");
        assert_eq!(date_text(0), "2000-01-01");
        assert_eq!(date_text(-1), "1999-12-31");
        assert_eq!(date_text(59), "2000-02-29");
        assert_eq!(format_date(-719_528), "0000-01-01");
        assert_eq!(format_date(2_932_897), "+10000-01-01");
        assert_eq!(format_time(45_296_789_000), "12:34:56.789");
        assert_eq!(timetz_text(0, -7200), "00:00:00+02:00");
        assert_eq!(timetz_text(0, 19800), "00:00:00-05:30");
        assert_eq!(interval_text(14, 3, 3_723_500_000), "P1Y2M3DT1H2M3.5S");
        assert_eq!(interval_text(0, 0, 0), "PT0S");
        assert_eq!(interval_text(0, -1, -1_000_000), "P-1DT-1S");
    }

    #[test]
    fn system_time_conversion() {
        assert_eq!(
            Micros(1_500_000).to_system_time(),
            UNIX_EPOCH + Duration::from_micros(1_500_000)
        );
        assert_eq!(
            Micros(-1_500_000).to_system_time(),
            UNIX_EPOCH - Duration::from_micros(1_500_000)
        );
        for m in [0, 1, -1, 1_500_000, -1_500_000, 1_547_030_056_123_456] {
            assert_eq!(
                Micros::from_system_time(Micros(m).to_system_time()),
                Micros(m)
            );
        }
    }
}
