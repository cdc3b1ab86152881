//! `date`, `time`, `timetz`, `timestamp` and `timestamptz` as Kafka Connect's JDBC source writes them:
//! the `Date`, `Time` and `Timestamp` logical types, or the form `timestamp.granularity` asks for.
//!
//! - `date`: `Date`, int32 days since 1970-01-01 (±infinity have no `Date` value: an error, as the
//!   JDBC source fails on them too);
//! - `time`: `Time`, int32 milliseconds since midnight (microseconds cut); `timetz` at UTC;
//! - `timestamp`, `timestamptz` (a `timestamp` is a wall-clock time in `db.timezone`, see
//!   [`super::zone`]): by `timestamp.granularity`:
//!   `connect_logical` (default) `Timestamp`, int64 ms since the epoch (±infinity: the JDBC driver's
//!   `PGStatement.DATE_POSITIVE_INFINITY` / `DATE_NEGATIVE_INFINITY`, which the JDBC source writes);
//!   `micros_long` / `nanos_long` int64, `micros_string` / `nanos_string` the same count as a string,
//!   `micros_iso_datetime_string` / `nanos_iso_datetime_string` `yyyy-MM-dd'T'HH:mm:ss.SSSSSS[SSS]`,
//!   the instant's wall-clock time in `db.timezone` (UTC by default). A value these cannot hold (±infinity, nanoseconds beyond 2262) is an error naming the column.
//!
//! All arithmetic is exact over PostgreSQL's whole range (years 4713 BC to 294276 AD).

use ferry_api::Schema;
use serde_json::Value;

use super::time::civil_from_days;
use super::zone::Shift;

/// A date or timestamp value that has no form in the Kafka Connect type or `timestamp.granularity`
/// form its column maps to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LogicalError {
    /// ±infinity in a `timestamp.granularity` other than `connect_logical`.
    #[error(
        "{infinity} has no timestamp.granularity={granularity} form; use connect_logical or exclude it in a query"
    )]
    InfiniteTimestamp {
        /// `infinity` or `-infinity`.
        infinity: &'static str,
        granularity: &'static str,
    },
    /// A timestamp beyond int64 `unit` since 1970.
    #[error(
        "{wall} is beyond what int64 {unit} since 1970 can hold (years 1678 to 2262 for nanoseconds); use \
         timestamp.granularity=connect_logical or a *_string form"
    )]
    TimestampOutOfRange {
        /// The wall-clock time, ISO-8601 with microseconds.
        wall: String,
        unit: &'static str,
    },
    /// ±infinity as a `Date`.
    #[error(
        "{infinity} has no Kafka Connect Date value; exclude it in a query (e.g. NULLIF or a CASE)"
    )]
    InfiniteDate {
        /// `infinity` or `-infinity`.
        infinity: &'static str,
    },
    /// A date beyond int32 days since 1970.
    #[error(
        "the date {days} days after 1970-01-01 is beyond what a Kafka Connect Date (int32 days) can hold"
    )]
    DateOutOfRange { days: i64 },
}

/// `infinity` or `-infinity`, as PostgreSQL writes them.
fn infinity(positive: bool) -> &'static str {
    if positive { "infinity" } else { "-infinity" }
}

/// Microseconds from the Unix epoch to PostgreSQL's epoch (2000-01-01).
const PG_EPOCH_UNIX_MICROS: i128 = 946_684_800_000_000;
/// Days from the Unix epoch to PostgreSQL's epoch.
const PG_EPOCH_UNIX_DAYS: i64 = 10_957;
const MICROS_PER_DAY: i64 = 86_400_000_000;
/// `org.postgresql.PGStatement.DATE_POSITIVE_INFINITY`: the ms the JDBC driver gives `infinity`.
pub(crate) const JDBC_POSITIVE_INFINITY_MS: i64 = 9_223_372_036_825_200_000;
/// `org.postgresql.PGStatement.DATE_NEGATIVE_INFINITY`.
pub(crate) const JDBC_NEGATIVE_INFINITY_MS: i64 = -9_223_372_036_832_400_000;

/// `timestamp.granularity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Granularity {
    #[default]
    ConnectLogical,
    MicrosLong,
    MicrosString,
    MicrosIsoDatetimeString,
    NanosLong,
    NanosString,
    NanosIsoDatetimeString,
}

impl Granularity {
    /// The accepted values, for messages.
    pub(crate) const NAMES: &'static str = "connect_logical, micros_long, micros_string, \
        micros_iso_datetime_string, nanos_long, nanos_string or nanos_iso_datetime_string";

    /// Parses a `timestamp.granularity` value (case-insensitive, as the JDBC source).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        Some(match text.trim().to_ascii_lowercase().as_str() {
            "connect_logical" => Self::ConnectLogical,
            "micros_long" => Self::MicrosLong,
            "micros_string" => Self::MicrosString,
            "micros_iso_datetime_string" => Self::MicrosIsoDatetimeString,
            "nanos_long" => Self::NanosLong,
            "nanos_string" => Self::NanosString,
            "nanos_iso_datetime_string" => Self::NanosIsoDatetimeString,
            _ => return None,
        })
    }

    /// The schema of a timestamp column (required; the caller makes it optional).
    pub(crate) fn schema(self) -> Schema {
        match self {
            Self::ConnectLogical => Schema::timestamp(),
            Self::MicrosLong | Self::NanosLong => Schema::int64(),
            _ => Schema::string(),
        }
    }

    /// The value of a binary `timestamp`/`timestamptz` (µs since 2000-01-01, or i64::MAX/MIN for
    /// ±infinity) at UTC.
    #[cfg(test)]
    pub(crate) fn value(self, pg: i64) -> Result<Value, LogicalError> {
        self.value_in(pg, Shift::default())
    }

    /// The value of a binary `timestamp`/`timestamptz` moved by `shift` (`db.timezone`: the
    /// instant of a `timestamp`'s wall-clock time, and the instant's wall-clock time for ISO
    /// strings). ±infinity are not moved.
    pub(crate) fn value_in(self, pg: i64, shift: Shift) -> Result<Value, LogicalError> {
        if pg == i64::MAX || pg == i64::MIN {
            return match self {
                Self::ConnectLogical => Ok(Value::from(if pg > 0 {
                    JDBC_POSITIVE_INFINITY_MS
                } else {
                    JDBC_NEGATIVE_INFINITY_MS
                })),
                _ => Err(LogicalError::InfiniteTimestamp {
                    infinity: infinity(pg > 0),
                    granularity: self.name(),
                }),
            };
        }
        let micros = i128::from(pg) + PG_EPOCH_UNIX_MICROS - i128::from(shift.to_instant);
        let wall = micros + i128::from(shift.to_display);
        let out_of_range = |unit: &'static str| LogicalError::TimestampOutOfRange {
            wall: iso(wall, 6),
            unit,
        };
        Ok(match self {
            Self::ConnectLogical => {
                let ms = micros.div_euclid(1000);
                Value::from(i64::try_from(ms).map_err(|_| out_of_range("milliseconds"))?)
            }
            Self::MicrosLong => {
                Value::from(i64::try_from(micros).map_err(|_| out_of_range("microseconds"))?)
            }
            Self::NanosLong => {
                Value::from(i64::try_from(micros * 1000).map_err(|_| out_of_range("nanoseconds"))?)
            }
            Self::MicrosString => Value::String(micros.to_string()),
            Self::NanosString => Value::String((micros * 1000).to_string()),
            Self::MicrosIsoDatetimeString => Value::String(iso(wall, 6)),
            Self::NanosIsoDatetimeString => Value::String(iso(wall, 9)),
        })
    }

    /// Whether the form shows a wall-clock time (in `db.timezone`).
    pub(crate) fn is_iso(self) -> bool {
        matches!(
            self,
            Self::MicrosIsoDatetimeString | Self::NanosIsoDatetimeString
        )
    }

    fn name(self) -> &'static str {
        match self {
            Self::ConnectLogical => "connect_logical",
            Self::MicrosLong => "micros_long",
            Self::MicrosString => "micros_string",
            Self::MicrosIsoDatetimeString => "micros_iso_datetime_string",
            Self::NanosLong => "nanos_long",
            Self::NanosString => "nanos_string",
            Self::NanosIsoDatetimeString => "nanos_iso_datetime_string",
        }
    }
}

/// `yyyy-MM-dd'T'HH:mm:ss.` and `digits` fraction digits, as Java's `DateTimeFormatter` writes
/// them: `yyyy` is the year of era (1 BC is 0001) with a `+` beyond four digits.
fn iso(unix_micros: i128, digits: usize) -> String {
    let day_micros = i128::from(MICROS_PER_DAY);
    let days = i64::try_from(unix_micros.div_euclid(day_micros)).unwrap_or(0);
    let of_day = unix_micros.rem_euclid(day_micros);
    let (year, month, day) = civil_from_days(days);
    let year_of_era = if year <= 0 { 1 - year } else { year };
    let year = if year_of_era > 9999 {
        format!("+{year_of_era}")
    } else {
        format!("{year_of_era:04}")
    };
    let seconds = of_day / 1_000_000;
    let fraction = format!("{:06}000", of_day % 1_000_000);
    format!(
        "{year}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{}",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60,
        &fraction[..digits]
    )
}

/// A binary `date` (days since 2000-01-01) as Kafka Connect `Date`: days since 1970-01-01.
pub(crate) fn date_value(pg_days: i32) -> Result<Value, LogicalError> {
    if pg_days == i32::MAX || pg_days == i32::MIN {
        return Err(LogicalError::InfiniteDate {
            infinity: infinity(pg_days > 0),
        });
    }
    let days = i64::from(pg_days) + PG_EPOCH_UNIX_DAYS;
    i32::try_from(days)
        .map(Value::from)
        .map_err(|_| LogicalError::DateOutOfRange { days })
}

/// A binary `time` (µs since midnight) as Kafka Connect `Time`: ms since midnight.
pub(crate) fn time_value(micros_of_day: i64) -> Value {
    Value::from(micros_of_day.div_euclid(1000))
}

/// A binary `timetz` (µs since midnight, zone in seconds west of UTC) as `Time` at UTC.
pub(crate) fn timetz_value(micros_of_day: i64, zone_west_seconds: i32) -> Value {
    let utc = micros_of_day
        .saturating_add(i64::from(zone_west_seconds) * 1_000_000)
        .rem_euclid(MICROS_PER_DAY);
    time_value(utc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// PostgreSQL's binary timestamp of a Unix-epoch microsecond count.
    fn pg(unix_micros: i128) -> i64 {
        i64::try_from(unix_micros - PG_EPOCH_UNIX_MICROS).unwrap_or(0)
    }

    #[test]
    fn timestamps_by_granularity() {
        let t = pg(1_714_564_800_123_456); // 2024-05-01T12:00:00.123456Z
        use Granularity::*;
        assert_eq!(ConnectLogical.value(t), Ok(json!(1_714_564_800_123i64)));
        assert_eq!(MicrosLong.value(t), Ok(json!(1_714_564_800_123_456i64)));
        assert_eq!(NanosLong.value(t), Ok(json!(1_714_564_800_123_456_000i64)));
        assert_eq!(NanosString.value(t), Ok(json!("1714564800123456000")));
        assert_eq!(
            NanosIsoDatetimeString.value(t),
            Ok(json!("2024-05-01T12:00:00.123456000"))
        );
        assert_eq!(
            MicrosIsoDatetimeString.value(t),
            Ok(json!("2024-05-01T12:00:00.123456"))
        );
        // Before 1970 the millisecond is the floor (java.sql.Timestamp.getTime()).
        assert_eq!(ConnectLogical.value(pg(-1_500)), Ok(json!(-2)));
        assert_eq!(
            ConnectLogical.value(i64::MAX),
            Ok(json!(9_223_372_036_825_200_000i64))
        );
        assert_eq!(
            ConnectLogical.value(i64::MIN),
            Ok(json!(-9_223_372_036_832_400_000i64))
        );
        assert!(NanosLong.value(i64::MAX).is_err());
        // The largest finite PostgreSQL timestamp, 294276-12-31 23:59:59.999999: exact, never "infinity".
        let max_pg = pg(9_224_318_015_999_999_999);
        assert_eq!(
            NanosIsoDatetimeString.value(max_pg),
            Ok(json!("+294276-12-31T23:59:59.999999000"))
        );
        assert_eq!(
            ConnectLogical.value(max_pg),
            Ok(json!(9_224_318_015_999_999i64))
        );
        assert!(
            NanosLong
                .value(max_pg)
                .is_err_and(|e| e.to_string().contains("+294276-12-31"))
        );
        assert!(MicrosLong.value(max_pg).is_err());
        // 4713 BC: year of era, as java.time writes "yyyy".
        let min_pg = pg(-210_866_803_200_000_000); // 4714-11-24 BC (proleptic -4713-11-24)
        assert_eq!(
            MicrosIsoDatetimeString.value(min_pg),
            Ok(json!("4714-11-24T00:00:00.000000"))
        );
    }

    #[test]
    fn timestamps_moved_by_db_timezone() {
        use Granularity::*;
        // 2024-01-01 10:00 in New York (UTC-5): the instant 15:00Z, shown as 10:00 again.
        let wall = pg(1_704_103_200_000_000);
        let ny = Shift {
            to_instant: -18_000_000_000,
            to_display: -18_000_000_000,
        };
        assert_eq!(
            ConnectLogical.value_in(wall, ny),
            Ok(json!(1_704_121_200_000i64))
        );
        assert_eq!(
            NanosIsoDatetimeString.value_in(wall, ny),
            Ok(json!("2024-01-01T10:00:00.000000000"))
        );
        // ±infinity do not move; the largest timestamp moves exactly, past PostgreSQL's own range.
        assert_eq!(
            ConnectLogical.value_in(i64::MAX, ny),
            Ok(json!(JDBC_POSITIVE_INFINITY_MS))
        );
        let max_pg = pg(9_224_318_015_999_999_999);
        assert_eq!(
            ConnectLogical.value_in(max_pg, ny),
            Ok(json!(9_224_318_015_999_999i64 + 18_000_000))
        );
        assert_eq!(
            MicrosIsoDatetimeString.value_in(max_pg, ny),
            Ok(json!("+294276-12-31T23:59:59.999999"))
        );
    }

    #[test]
    fn dates_and_times() {
        assert_eq!(date_value(0), Ok(json!(10_957)));
        assert_eq!(date_value(-10_957), Ok(json!(0)));
        assert_eq!(date_value(-10_958), Ok(json!(-1)));
        assert!(date_value(i32::MAX).is_err());
        assert!(date_value(i32::MAX - 1).is_err(), "beyond int32 days");
        assert_eq!(time_value(30_600_500_999), json!(30_600_500));
        assert_eq!(time_value(86_400_000_000), json!(86_400_000));
        // 08:30+05:30 is 03:00 UTC; 01:00+02 is 23:00 UTC.
        assert_eq!(timetz_value(30_600_000_000, -19_800), json!(10_800_000));
        assert_eq!(timetz_value(3_600_000_000, -7_200), json!(82_800_000));
    }
}
