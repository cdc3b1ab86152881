//! `db.timezone` applied to record values, as Kafka Connect's JDBC source does: it reads a
//! `timestamp` (without time zone) with a `Calendar` in `db.timezone`, so a value is the instant of
//! that wall-clock time there, and `*_iso_datetime_string` forms show an instant's wall-clock time
//! in `db.timezone` (`DateTimeUtils.toIsoDateTimeString(timestamp, tz)`).
//!
//! The database converts (one query per batch, as for the offsets in [`super::columns`]), so
//! values, offsets and query bounds use the same zone rules, those of the zone the start checked.
//! Its rules for the times a clock change makes invalid or ambiguous are `GregorianCalendar`'s:
//! a time in a spring-forward gap is taken in the offset before the change (02:30 in New York on
//! 2024-03-10 is 02:30 EST = 03:30 EDT: it moves forward by the gap), and a time in a fall-back
//! overlap in the offset after it (01:30 on 2024-11-03 is 01:30 EST, the later instant) — for DST
//! changes both are "standard time", which `GregorianCalendar.computeTime` assumes.

use std::collections::{HashMap, HashSet};

use ferry_api::ConnectError;

use super::conn::Db;

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// The offsets of a batch's values: (wall-clock µs to subtract to get the instant, µs to add to
/// the instant for its wall-clock time in `db.timezone`).
///
/// Each value is clamped two days inside PostgreSQL's range (4713 BC to 294276 AD) before the
/// database looks its offset up, so `AT TIME ZONE` cannot overflow; the offset is then applied
/// here exactly, over the whole range.
const SHIFTS: &str = "SELECT (extract(epoch FROM w - (i AT TIME ZONE 'UTC')) * 1000000)::bigint, \
     (extract(epoch FROM (i AT TIME ZONE $4) - (i AT TIME ZONE 'UTC')) * 1000000)::bigint \
     FROM (SELECT w, n, CASE WHEN l THEN w AT TIME ZONE $4 ELSE w AT TIME ZONE 'UTC' END AS i \
       FROM (SELECT LEAST(GREATEST('2000-01-01'::timestamp + d * interval '1 day' + m * interval '1 microsecond', \
               '4713-11-26 BC'::timestamp), '294276-12-29'::timestamp) AS w, l, n \
         FROM unnest($1::bigint[], $2::bigint[], $3::bool[]) WITH ORDINALITY AS u(d, m, l, n)) c) s \
     ORDER BY n";

/// How `db.timezone` moves one binary `timestamp`/`timestamptz` value (µs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Shift {
    /// Subtracted from the value for the instant (a `timestamp`'s UTC offset; 0 for `timestamptz`).
    pub(crate) to_instant: i64,
    /// Added to the instant for its wall-clock time in `db.timezone` (ISO strings).
    pub(crate) to_display: i64,
}

/// The shifts of one batch's values, by (binary value, whether it is a `timestamp` without zone).
#[derive(Debug, Default)]
pub(crate) struct ZoneShifts {
    /// `db.timezone` is UTC: nothing moves and nothing is looked up.
    utc: bool,
    shifts: HashMap<(i64, bool), Shift>,
}

/// A value's `db.timezone` offset is missing from its batch's [`ZoneShifts`] (a bug).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("its db.timezone offset was not looked up (a bug in Ferry)")]
pub(crate) struct NotLookedUp;

impl ZoneShifts {
    /// Whether `zone` is UTC itself, which needs no lookup.
    pub(crate) fn is_utc(zone: &str) -> bool {
        zone.trim().eq_ignore_ascii_case("UTC")
    }

    /// The shifts for UTC: none.
    pub(crate) fn utc() -> Self {
        Self {
            utc: true,
            shifts: HashMap::new(),
        }
    }

    /// The shift of `pg` (a `timestamp` when `local`).
    ///
    /// # Errors
    /// The value was not looked up (a bug: every finite value of the batch is).
    pub(crate) fn get(&self, pg: i64, local: bool) -> Result<Shift, NotLookedUp> {
        if self.utc {
            return Ok(Shift::default());
        }
        self.shifts.get(&(pg, local)).copied().ok_or(NotLookedUp)
    }

    /// Looks up the shifts of `values` ((binary value, `timestamp` without zone); ±infinity are
    /// left out: they have no offset) in `zone`, one query for the batch.
    pub(crate) async fn lookup(
        db: &Db,
        zone: &str,
        name: &str,
        values: HashSet<(i64, bool)>,
    ) -> Result<Self, ConnectError> {
        if Self::is_utc(zone) {
            return Ok(Self::utc());
        }
        let values: Vec<(i64, bool)> = values
            .into_iter()
            .filter(|(pg, _)| *pg != i64::MAX && *pg != i64::MIN)
            .collect();
        let mut out = Self::default();
        if values.is_empty() {
            return Ok(out);
        }
        // Days and µs of the day apart: PostgreSQL's interval arithmetic is exact for each.
        let days: Vec<i64> = values
            .iter()
            .map(|(pg, _)| pg.div_euclid(MICROS_PER_DAY))
            .collect();
        let micros: Vec<i64> = values
            .iter()
            .map(|(pg, _)| pg.rem_euclid(MICROS_PER_DAY))
            .collect();
        let local: Vec<bool> = values.iter().map(|(_, l)| *l).collect();
        let rows = db
            .client
            .query(SHIFTS, &[&days, &micros, &local, &zone.to_owned()])
            .await
            .map_err(|e| {
                db.error(
                    &format!("converting {name}'s timestamps to db.timezone"),
                    &e,
                )
            })?;
        if rows.len() != values.len() {
            return Err(ConnectError::fatal(format!(
                "PostgresSource: {name}: converting {} timestamps to db.timezone returned {} values",
                values.len(),
                rows.len()
            )));
        }
        for (key, row) in values.into_iter().zip(&rows) {
            let shift = (|| {
                Ok::<_, tokio_postgres::Error>(Shift {
                    to_instant: row.try_get(0)?,
                    to_display: row.try_get(1)?,
                })
            })()
            .map_err(|e| {
                ConnectError::fatal(format!(
                    "PostgresSource: {name}: a timestamp's offset in db.timezone {zone}: {e}"
                ))
            })?;
            out.shifts.insert(key, shift);
        }
        Ok(out)
    }
}
