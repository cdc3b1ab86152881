//! PostgreSQL result columns as JSON values with Kafka Connect schemas.
//!
//! | PostgreSQL | JSON value | schema |
//! |---|---|---|
//! | `smallint`, `integer`, `bigint`, `oid` | number | `int16`, `int32`, `int64`, `int64` |
//! | `real`, `double precision` | number (NaN and ±infinity: `"NaN"`, `"Infinity"`, `"-Infinity"`, as Jackson writes them) | `float`, `double` |
//! | `numeric` | by `numeric.mapping` ([`super::numeric`]): `Decimal` bytes as base64 (default), or a number | `Decimal`, `int8`…`int64`, `double` |
//! | `date` | days since 1970-01-01 | `Date` |
//! | `time`, `timetz` | ms since midnight (`timetz` at UTC) | `Time` |
//! | `timestamp`, `timestamptz` | by `timestamp.granularity` ([`super::logical`]): ms since the epoch (default); a `timestamp` is a wall-clock time in `db.timezone` ([`super::zone`]) | `Timestamp` |
//! | `boolean`, `bit(1)` | `true` / `false` | `boolean` |
//! | `text`, `varchar`, `char(n)`, `name`, `"char"`, `citext`, enums, `xml` | string | `string` |
//! | `bytea` | base64 string | `bytes` |
//! | `uuid`, `inet`, `cidr`, `macaddr` | string | `string` |
//! | `interval` | ISO-8601 (`P1DT2H`) | `string` |
//! | `json`, `jsonb` | its text, as a string (the JDBC source's PostgreSQL dialect) | `string` |
//! | arrays of the above | array (one dimension in the schema) | `array` |
//!
//! Array elements (which Kafka Connect's JDBC source does not read at all) keep text forms: `numeric`
//! as exact strings (`"12.50"`), dates, times and timestamps as ISO-8601 (`2024-05-01`, `12:00:00`,
//! `12:00:00+02:00`, `2024-05-01T12:00:00.5`, `2024-05-01T12:00:00.5Z` for `timestamptz`); `json`
//! elements are the JSON itself, which no Kafka Connect schema describes: such a record has no schema.
//! | domains | as their base type | |
//!
//! Other types (geometric types, ranges, `money`, bit strings, composite types, …) are left out of
//! the record with a warning, as Kafka Connect's JDBC source skips the columns it cannot map; select
//! them with a cast to `text` in a `query` to keep them.

use std::collections::{HashMap, HashSet};

use base64::Engine as _;
use ferry_api::{Field, Schema};
use serde_json::Value;
use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, Kind, Type};

use super::logical::{Granularity, LogicalError, date_value, time_value, timetz_value};
use super::numeric::{NumericError, NumericKind, NumericMapping};
use super::time::{Micros, date_text, format_time, interval_text, timestamp_text, timetz_text};
use super::zone::{NotLookedUp, Shift, ZoneShifts};

/// A binary value from PostgreSQL that does not decode, or has no form in the type its column maps
/// to.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DecodeError {
    #[error("a binary value is shorter than {0} bytes")]
    Short(usize),
    #[error("text is not UTF-8: {0}")]
    NotUtf8(#[source] std::str::Utf8Error),
    #[error("invalid JSON from the server: {0}")]
    Json(#[source] serde_json::Error),
    #[error("unsupported jsonb format version")]
    JsonbVersion,
    #[error("a macaddr must be 6 bytes")]
    MacAddrLength,
    #[error("a uuid must be 16 bytes")]
    UuidLength,
    #[error("malformed inet value")]
    Inet,
    #[error("negative numeric digit count")]
    NumericDigitCount,
    #[error("unknown numeric sign {0:#x}")]
    NumericSign(u16),
    #[error("negative array dimension count")]
    ArrayDimensionCount,
    #[error("negative array length")]
    ArrayLength,
    #[error("bad array element length")]
    ArrayElementLength,
    #[error("an array element is cut short")]
    ArrayElementCut,
    #[error(transparent)]
    Numeric(#[from] NumericError),
    #[error(transparent)]
    Logical(#[from] LogicalError),
    #[error(transparent)]
    Zone(#[from] NotLookedUp),
}

/// A column of a result row that cannot be read or decoded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ColumnError {
    #[error("cannot read column {index}: {source}")]
    Read {
        index: usize,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("column {name:?}: {source}")]
    Decode {
        name: String,
        #[source]
        source: DecodeError,
    },
}

/// Two columns of a result have the same name (a record field each).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the result has two columns named {0:?}; give them distinct names with AS in the query")]
pub(crate) struct DuplicateColumn(pub(crate) String);

/// An incrementing or timestamp column's value that cannot be a position (offset).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PositionError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("the numeric value {0} is not an integer that fits 64 bits")]
    NotInt64(String),
    #[error("its type is {0}; it must be smallint, integer, bigint or numeric without fraction")]
    IncrementingType(String),
    #[error("its value is infinity or -infinity, which cannot be a position")]
    Infinite,
    #[error(
        "its value is after year 262000, beyond the positions Ferry can store (microseconds \
         since 1970 in 64 bits)"
    )]
    BeyondMicros,
    #[error("its type is {0}; it must be timestamp or timestamptz")]
    TimestampType(String),
}

/// How values are mapped where Kafka Connect's JDBC source offers a choice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ValueMapping {
    /// `numeric.mapping`.
    pub(crate) numeric: NumericMapping,
    /// `timestamp.granularity`.
    pub(crate) granularity: Granularity,
}

/// How one column's binary value becomes JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decoder {
    Int2,
    Int4,
    Int8,
    Oid,
    Float4,
    Float8,
    Numeric,
    Bool,
    Text,
    Char,
    Bytea,
    Uuid,
    Json,
    Jsonb,
    Timestamp,
    TimestampTz,
    Date,
    Time,
    TimeTz,
    Interval,
    Inet,
    MacAddr,
    Array(Box<Decoder>),
    /// A top-level `numeric` column, as `numeric.mapping` says.
    NumericAs(NumericKind),
    /// A top-level `date`: Kafka Connect `Date`.
    LogicalDate,
    /// A top-level `time`: Kafka Connect `Time`.
    LogicalTime,
    /// A top-level `timetz`: Kafka Connect `Time`, at UTC.
    LogicalTimeTz,
    /// A top-level `timestamptz`, as `timestamp.granularity` says.
    LogicalTimestamp(Granularity),
    /// A top-level `timestamp` (without time zone): a wall-clock time in `db.timezone`
    /// ([`super::zone`]), as `timestamp.granularity` says.
    LocalTimestamp(Granularity),
    /// A top-level `json`: its text, as the JDBC source's `getString`.
    JsonText,
    /// A top-level `bit(1)`: a boolean (`PostgreSqlDatabaseDialect`: one bit is `BOOLEAN`).
    Bit1,
    /// A top-level `jsonb`: PostgreSQL's text of it.
    JsonbText,
}

impl Decoder {
    /// The decoder of a result column: its type, type modifier (a `numeric`'s precision and scale)
    /// and the mapping options. Kafka Connect logical types for the column itself; array elements
    /// keep [`Decoder::for_type`]'s text forms.
    pub(crate) fn for_column(ty: &Type, typmod: i32, mapping: ValueMapping) -> Option<Decoder> {
        let logical = match *ty {
            Type::NUMERIC => Decoder::NumericAs(NumericKind::of(typmod, mapping.numeric)),
            Type::DATE => Decoder::LogicalDate,
            Type::TIME => Decoder::LogicalTime,
            Type::TIMETZ => Decoder::LogicalTimeTz,
            Type::TIMESTAMP => Decoder::LocalTimestamp(mapping.granularity),
            Type::TIMESTAMPTZ => Decoder::LogicalTimestamp(mapping.granularity),
            Type::JSON => Decoder::JsonText,
            Type::BIT if typmod == 1 => Decoder::Bit1,
            Type::JSONB => Decoder::JsonbText,
            _ => {
                return match ty.kind() {
                    // A domain's own modifier is not in the result description: unconstrained.
                    Kind::Domain(base) => Decoder::for_column(base, -1, mapping),
                    _ => Decoder::for_type(ty),
                };
            }
        };
        Some(logical)
    }

    /// The decoder of a type; `None` when the type is not supported.
    pub(crate) fn for_type(ty: &Type) -> Option<Decoder> {
        let simple = match *ty {
            Type::INT2 => Decoder::Int2,
            Type::INT4 => Decoder::Int4,
            Type::INT8 => Decoder::Int8,
            Type::OID => Decoder::Oid,
            Type::FLOAT4 => Decoder::Float4,
            Type::FLOAT8 => Decoder::Float8,
            Type::NUMERIC => Decoder::Numeric,
            Type::BOOL => Decoder::Bool,
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN | Type::XML => {
                Decoder::Text
            }
            Type::CHAR => Decoder::Char,
            Type::BYTEA => Decoder::Bytea,
            Type::UUID => Decoder::Uuid,
            Type::JSON => Decoder::Json,
            Type::JSONB => Decoder::Jsonb,
            Type::TIMESTAMP => Decoder::Timestamp,
            Type::TIMESTAMPTZ => Decoder::TimestampTz,
            Type::DATE => Decoder::Date,
            Type::TIME => Decoder::Time,
            Type::TIMETZ => Decoder::TimeTz,
            Type::INTERVAL => Decoder::Interval,
            Type::INET | Type::CIDR => Decoder::Inet,
            Type::MACADDR => Decoder::MacAddr,
            _ => {
                return match ty.kind() {
                    Kind::Enum(_) => Some(Decoder::Text),
                    Kind::Domain(base) => Decoder::for_type(base),
                    Kind::Array(element) => {
                        Decoder::for_type(element).map(|d| Decoder::Array(Box::new(d)))
                    }
                    Kind::Simple if ty.name() == "citext" => Some(Decoder::Text),
                    _ => None,
                };
            }
        };
        Some(simple)
    }

    /// The Kafka Connect schema of the values (optional); `None` for JSON, which has no fixed schema.
    pub(crate) fn schema(&self) -> Option<Schema> {
        let schema = match self {
            Decoder::Int2 => Schema::int16(),
            Decoder::Int4 => Schema::int32(),
            Decoder::Int8 | Decoder::Oid => Schema::int64(),
            Decoder::Float4 => Schema::float32(),
            Decoder::Float8 => Schema::float64(),
            Decoder::Bool | Decoder::Bit1 => Schema::boolean(),
            Decoder::Bytea => Schema::bytes(),
            Decoder::Json | Decoder::Jsonb => return None,
            Decoder::Array(element) => Schema::array(element.schema()?),
            Decoder::NumericAs(kind) => kind.schema(),
            Decoder::LogicalDate => Schema::date(),
            Decoder::LogicalTime | Decoder::LogicalTimeTz => Schema::time(),
            Decoder::LogicalTimestamp(granularity) | Decoder::LocalTimestamp(granularity) => {
                granularity.schema()
            }
            _ => Schema::string(),
        };
        Some(schema.optional())
    }

    /// The `db.timezone` lookup a value of this decoder needs: (binary value, whether it is a
    /// `timestamp` without zone); `None` when it needs none.
    fn zone_key(&self, raw: &[u8]) -> Result<Option<(i64, bool)>, DecodeError> {
        Ok(match self {
            Decoder::LocalTimestamp(_) => Some((Reader(raw).i64()?, true)),
            Decoder::LogicalTimestamp(g) if g.is_iso() => Some((Reader(raw).i64()?, false)),
            _ => None,
        })
    }

    /// Decodes one non-null binary value; `shifts` holds the batch's `db.timezone` offsets.
    fn decode_in(&self, raw: &[u8], shifts: &ZoneShifts) -> Result<Value, DecodeError> {
        match self.zone_key(raw)? {
            Some((pg, local)) => match self {
                // ±infinity have no offset: they keep the JDBC driver's values.
                Decoder::LocalTimestamp(g) | Decoder::LogicalTimestamp(g)
                    if pg == i64::MAX || pg == i64::MIN =>
                {
                    Ok(g.value_in(pg, Shift::default())?)
                }
                Decoder::LocalTimestamp(g) | Decoder::LogicalTimestamp(g) => {
                    Ok(g.value_in(pg, shifts.get(pg, local)?)?)
                }
                _ => self.decode(raw),
            },
            None => self.decode(raw),
        }
    }

    /// Decodes one non-null binary value (timestamps at UTC).
    pub(crate) fn decode(&self, raw: &[u8]) -> Result<Value, DecodeError> {
        let mut r = Reader(raw);
        let value = match self {
            Decoder::Int2 => Value::from(r.i16()?),
            Decoder::Int4 => Value::from(r.i32()?),
            Decoder::Int8 => Value::from(r.i64()?),
            Decoder::Oid => Value::from(r.u32()?),
            Decoder::Float4 => {
                let v = f32::from_bits(r.u32()?);
                // Through its shortest text, so 0.1f32 stays 0.1 (not 0.10000000149011612).
                float_value(f64::from(v), v.is_finite().then(|| v.to_string()))
            }
            Decoder::Float8 => float_value(f64::from_bits(r.u64()?), None),
            Decoder::Numeric => Value::String(numeric_text(raw)?),
            Decoder::Bool => Value::Bool(r.u8()? != 0),
            Decoder::Text => Value::String(utf8(raw)?.to_owned()),
            Decoder::Char => Value::String(char::from(r.u8()?).to_string()),
            Decoder::Bytea => Value::String(base64::engine::general_purpose::STANDARD.encode(raw)),
            Decoder::Uuid => Value::String(uuid_text(raw)?),
            Decoder::Json => json(raw)?,
            Decoder::Jsonb => match raw.split_first() {
                Some((1, rest)) => json(rest)?,
                _ => return Err(DecodeError::JsonbVersion),
            },
            Decoder::Timestamp => Value::String(timestamp_text(r.i64()?, false)),
            Decoder::TimestampTz => Value::String(timestamp_text(r.i64()?, true)),
            Decoder::Date => Value::String(date_text(r.i32()?)),
            Decoder::Time => Value::String(format_time(r.i64()?)),
            Decoder::TimeTz => {
                let micros = r.i64()?;
                Value::String(timetz_text(micros, r.i32()?))
            }
            Decoder::Interval => {
                let micros = r.i64()?;
                let days = r.i32()?;
                Value::String(interval_text(r.i32()?, days, micros))
            }
            Decoder::Inet => Value::String(inet_text(raw)?),
            Decoder::MacAddr => match raw {
                [a, b, c, d, e, f] => {
                    Value::String(format!("{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{f:02x}"))
                }
                _ => return Err(DecodeError::MacAddrLength),
            },
            Decoder::Array(element) => array(element, raw)?,
            Decoder::NumericAs(kind) => kind.value(&numeric_text(raw)?)?,
            Decoder::LogicalDate => date_value(r.i32()?)?,
            Decoder::LogicalTime => time_value(r.i64()?),
            Decoder::LogicalTimeTz => {
                let micros = r.i64()?;
                timetz_value(micros, r.i32()?)
            }
            // At UTC: [`RowShape::value`] moves them by `db.timezone`.
            Decoder::LogicalTimestamp(granularity) | Decoder::LocalTimestamp(granularity) => {
                granularity.value_in(r.i64()?, Shift::default())?
            }
            Decoder::JsonText => Value::String(utf8(raw)?.to_owned()),
            // Bit count, then the bits from the high end of the first byte.
            Decoder::Bit1 => {
                let _bits = r.i32()?;
                Value::Bool(r.u8()? & 0x80 != 0)
            }
            Decoder::JsonbText => match raw.split_first() {
                Some((1, rest)) => Value::String(utf8(rest)?.to_owned()),
                _ => return Err(DecodeError::JsonbVersion),
            },
        };
        Ok(value)
    }
}

/// A float as JSON: a number, or for NaN and ±infinity the strings Jackson writes for them (`"NaN"`,
/// `"Infinity"`, `"-Infinity"`), which is what Kafka Connect's JsonConverter puts in the record.
/// `shortest`: the float's own shortest text (for a float32).
pub(crate) fn float_value(v: f64, shortest: Option<String>) -> Value {
    if v.is_nan() {
        return Value::String("NaN".to_owned());
    }
    if v.is_infinite() {
        return Value::String(if v > 0.0 { "Infinity" } else { "-Infinity" }.to_owned());
    }
    let v = shortest.and_then(|t| t.parse::<f64>().ok()).unwrap_or(v);
    serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
}

fn utf8(raw: &[u8]) -> Result<&str, DecodeError> {
    std::str::from_utf8(raw).map_err(DecodeError::NotUtf8)
}

fn json(raw: &[u8]) -> Result<Value, DecodeError> {
    serde_json::from_slice(raw).map_err(DecodeError::Json)
}

/// Big-endian reads with a clear error on short input.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let (head, rest) = self
            .0
            .split_first_chunk::<N>()
            .ok_or(DecodeError::Short(N))?;
        self.0 = rest;
        Ok(*head)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take::<1>()?[0])
    }
    fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.take()?))
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.take()?))
    }
    fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.take()?))
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.take()?))
    }
    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.take()?))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.take()?))
    }
}

/// PostgreSQL's binary `numeric`: digit count, weight (of the first base-10000 digit), sign, display
/// scale, then the base-10000 digits.
pub(crate) fn numeric_text(raw: &[u8]) -> Result<String, DecodeError> {
    let mut r = Reader(raw);
    let ndigits = usize::try_from(r.i16()?).map_err(|_| DecodeError::NumericDigitCount)?;
    let weight = i64::from(r.i16()?);
    let sign = r.u16()?;
    let dscale = usize::from(r.u16()?);
    match sign {
        0x0000 | 0x4000 => {}
        0xC000 => return Ok("NaN".to_owned()),
        0xD000 => return Ok("Infinity".to_owned()),
        0xF000 => return Ok("-Infinity".to_owned()),
        other => return Err(DecodeError::NumericSign(other)),
    }
    let mut digits = Vec::with_capacity(ndigits);
    for _ in 0..ndigits {
        digits.push(r.i16()?);
    }
    let digit = |i: i64| -> i16 {
        usize::try_from(i)
            .ok()
            .and_then(|i| digits.get(i).copied())
            .unwrap_or(0)
    };
    let mut out = String::new();
    if sign == 0x4000 {
        out.push('-');
    }
    if weight < 0 {
        out.push('0');
    } else {
        out.push_str(&digit(0).to_string());
        for i in 1..=weight {
            out.push_str(&format!("{:04}", digit(i)));
        }
    }
    if dscale > 0 {
        let mut fraction = String::new();
        let mut i = weight + 1;
        while fraction.len() < dscale {
            fraction.push_str(&format!("{:04}", digit(i)));
            i += 1;
        }
        fraction.truncate(dscale);
        out.push('.');
        out.push_str(&fraction);
    }
    if out == "-0" || (out.starts_with("-0.") && out[1..].chars().all(|c| c == '0' || c == '.')) {
        out.remove(0);
    }
    Ok(out)
}

fn uuid_text(raw: &[u8]) -> Result<String, DecodeError> {
    if raw.len() != 16 {
        return Err(DecodeError::UuidLength);
    }
    let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    ))
}

/// `inet`/`cidr`: family, netmask bits, is-cidr flag, address length, address.
fn inet_text(raw: &[u8]) -> Result<String, DecodeError> {
    let mut r = Reader(raw);
    let family = r.u8()?;
    let bits = r.u8()?;
    let is_cidr = r.u8()? != 0;
    let len = r.u8()?;
    let address = r.0;
    let (addr, full) = match (family, len, address) {
        (2, 4, [a, b, c, d]) => (std::net::Ipv4Addr::new(*a, *b, *c, *d).to_string(), 32),
        (3, 16, bytes) if bytes.len() == 16 => {
            let mut octets = [0u8; 16];
            octets.copy_from_slice(bytes);
            (std::net::Ipv6Addr::from(octets).to_string(), 128)
        }
        _ => return Err(DecodeError::Inet),
    };
    Ok(if is_cidr || bits != full {
        format!("{addr}/{bits}")
    } else {
        addr
    })
}

/// An array: dimensions, then the elements in row-major order, as nested JSON arrays.
fn array(element: &Decoder, raw: &[u8]) -> Result<Value, DecodeError> {
    let mut r = Reader(raw);
    let ndim = usize::try_from(r.i32()?).map_err(|_| DecodeError::ArrayDimensionCount)?;
    let _has_nulls = r.i32()?;
    let _element_oid = r.u32()?;
    let mut dims = Vec::with_capacity(ndim);
    for _ in 0..ndim {
        let len = usize::try_from(r.i32()?).map_err(|_| DecodeError::ArrayLength)?;
        let _lower_bound = r.i32()?;
        dims.push(len);
    }
    if dims.is_empty() {
        return Ok(Value::Array(Vec::new()));
    }
    let total: usize = dims.iter().product();
    let mut flat = Vec::with_capacity(total.min(1 << 16));
    for _ in 0..total {
        let len = r.i32()?;
        if len < 0 {
            flat.push(Value::Null);
            continue;
        }
        let len = usize::try_from(len).map_err(|_| DecodeError::ArrayElementLength)?;
        if r.0.len() < len {
            return Err(DecodeError::ArrayElementCut);
        }
        let (bytes, rest) = r.0.split_at(len);
        r.0 = rest;
        flat.push(element.decode(bytes)?);
    }
    // Fold the innermost dimension first: [2][3] → two arrays of three.
    let mut level = flat;
    for &len in dims.iter().skip(1).rev() {
        let mut grouped = Vec::with_capacity(level.len() / len.max(1));
        let mut iter = level.into_iter();
        loop {
            let chunk: Vec<Value> = iter.by_ref().take(len).collect();
            if chunk.is_empty() {
                break;
            }
            grouped.push(Value::Array(chunk));
        }
        level = grouped;
    }
    Ok(Value::Array(level))
}

/// A column's raw binary value, whatever its type (decoded by a [`Decoder`]).
pub(crate) struct Raw<'a>(pub(crate) Option<&'a [u8]>);

impl<'a> FromSql<'a> for Raw<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(Some(raw)))
    }

    fn from_sql_null(_: &Type) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(None))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// The raw value of column `index` of `row`.
pub(crate) fn raw(row: &Row, index: usize) -> Result<Option<&[u8]>, ColumnError> {
    row.try_get::<_, Raw<'_>>(index)
        .map(|r| r.0)
        .map_err(|source| ColumnError::Read { index, source })
}

/// How the rows of one result shape become record values.
#[derive(Debug, Clone)]
pub(crate) struct RowShape {
    /// The column list it was built for: (name, type oid, type modifier: a numeric's scale).
    signature: Vec<(String, u32, i32)>,
    /// (column index, field name, decoder) of the columns in the record.
    columns: Vec<(usize, String, Decoder)>,
    /// The value schema; `None` when a column has no fixed schema (json).
    pub(crate) schema: Option<std::sync::Arc<Schema>>,
    /// Columns left out: (name, type name).
    pub(crate) skipped: Vec<(String, String)>,
}

/// The signature of a result's columns, to know when a [`RowShape`] must be rebuilt.
pub(crate) fn signature(columns: &[tokio_postgres::Column]) -> Vec<(String, u32, i32)> {
    columns
        .iter()
        .map(|c| (c.name().to_owned(), c.type_().oid(), c.type_modifier()))
        .collect()
}

impl RowShape {
    /// Builds the shape of `columns`. `not_null` holds the `NOT NULL` table columns by
    /// (table oid, column number); `name` names the struct schema (the table's name).
    ///
    /// # Errors
    /// Two columns have the same name.
    pub(crate) fn new(
        columns: &[tokio_postgres::Column],
        not_null: &HashMap<(u32, i16), bool>,
        name: Option<&str>,
        mapping: ValueMapping,
    ) -> Result<Self, DuplicateColumn> {
        let mut fields = Vec::new();
        let mut decoders = Vec::new();
        let mut skipped = Vec::new();
        let mut has_schema = true;
        for (index, column) in columns.iter().enumerate() {
            if decoders
                .iter()
                .any(|(_, n, _): &(usize, String, Decoder)| n == column.name())
            {
                return Err(DuplicateColumn(column.name().to_owned()));
            }
            let Some(decoder) =
                Decoder::for_column(column.type_(), column.type_modifier(), mapping)
            else {
                skipped.push((column.name().to_owned(), column.type_().name().to_owned()));
                continue;
            };
            let required = match (column.table_oid(), column.column_id()) {
                (Some(t), Some(c)) => not_null.get(&(t, c)).copied().unwrap_or(false),
                _ => false,
            };
            match decoder.schema() {
                Some(schema) if required => {
                    fields.push(Field::new(column.name(), schema.required()))
                }
                Some(schema) => fields.push(Field::new(column.name(), schema)),
                None => has_schema = false,
            }
            decoders.push((index, column.name().to_owned(), decoder));
        }
        let schema = has_schema.then(|| match name {
            Some(name) => Schema::struct_(name, fields),
            None => Schema::unnamed_struct(fields),
        });
        Ok(Self {
            signature: signature(columns),
            columns: decoders,
            schema: schema.map(std::sync::Arc::new),
            skipped,
        })
    }

    /// Whether this shape was built for `columns`.
    pub(crate) fn fits(&self, columns: &[tokio_postgres::Column]) -> bool {
        self.signature.len() == columns.len()
            && self
                .signature
                .iter()
                .zip(columns)
                .all(|((n, oid, typmod), c)| {
                    n == c.name() && *oid == c.type_().oid() && *typmod == c.type_modifier()
                })
    }

    /// The `db.timezone` lookups the values of `rows` need (see [`ZoneShifts::lookup`]).
    ///
    /// # Errors
    /// A timestamp value is malformed (names the column).
    pub(crate) fn zone_keys(&self, rows: &[Row]) -> Result<HashSet<(i64, bool)>, ColumnError> {
        let mut keys = HashSet::new();
        for row in rows {
            for (index, name, decoder) in &self.columns {
                if let Some(bytes) = raw(row, *index)?
                    && let Some(key) =
                        decoder
                            .zone_key(bytes)
                            .map_err(|source| ColumnError::Decode {
                                name: name.clone(),
                                source,
                            })?
                {
                    keys.insert(key);
                }
            }
        }
        Ok(keys)
    }

    /// The record value of a row: a JSON object of its columns in order; `shifts` holds the
    /// batch's `db.timezone` offsets ([`RowShape::zone_keys`]).
    ///
    /// # Errors
    /// A value cannot be decoded (names the column).
    pub(crate) fn value(&self, row: &Row, shifts: &ZoneShifts) -> Result<Value, ColumnError> {
        let mut object = serde_json::Map::with_capacity(self.columns.len());
        for (index, name, decoder) in &self.columns {
            let value = match raw(row, *index)? {
                None => Value::Null,
                Some(bytes) => {
                    decoder
                        .decode_in(bytes, shifts)
                        .map_err(|source| ColumnError::Decode {
                            name: name.clone(),
                            source,
                        })?
                }
            };
            object.insert(name.clone(), value);
        }
        Ok(Value::Object(object))
    }
}

/// The incrementing value of a row: an integer column, or a `numeric` without fraction.
pub(crate) fn incrementing_value(ty: &Type, raw: &[u8]) -> Result<i64, PositionError> {
    let mut r = Reader(raw);
    match *ty {
        Type::INT2 => Ok(i64::from(r.i16()?)),
        Type::INT4 => Ok(i64::from(r.i32()?)),
        Type::INT8 => Ok(r.i64()?),
        Type::OID => Ok(i64::from(r.u32()?)),
        Type::NUMERIC => {
            let text = numeric_text(raw)?;
            text.parse::<i64>()
                .map_err(|_| PositionError::NotInt64(text))
        }
        _ => match ty.kind() {
            Kind::Domain(base) => incrementing_value(base, raw),
            _ => Err(PositionError::IncrementingType(ty.name().to_owned())),
        },
    }
}

/// The timestamp of a row's timestamp column.
pub(crate) fn timestamp_value(ty: &Type, raw: &[u8]) -> Result<Micros, PositionError> {
    match *ty {
        Type::TIMESTAMP | Type::TIMESTAMPTZ => {
            let pg = Reader(raw).i64()?;
            Micros::from_pg(pg).ok_or(if pg == i64::MAX || pg == i64::MIN {
                PositionError::Infinite
            } else {
                PositionError::BeyondMicros
            })
        }
        _ => match ty.kind() {
            Kind::Domain(base) => timestamp_value(base, raw),
            _ => Err(PositionError::TimestampType(ty.name().to_owned())),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric(ndigits: i16, weight: i16, sign: u16, dscale: u16, digits: &[i16]) -> String {
        let mut raw = Vec::new();
        raw.extend_from_slice(&ndigits.to_be_bytes());
        raw.extend_from_slice(&weight.to_be_bytes());
        raw.extend_from_slice(&sign.to_be_bytes());
        raw.extend_from_slice(&dscale.to_be_bytes());
        for d in digits {
            raw.extend_from_slice(&d.to_be_bytes());
        }
        numeric_text(&raw).unwrap_or_else(|e| e.to_string())
    }

    #[test]
    fn numerics() {
        assert_eq!(numeric(0, 0, 0, 0, &[]), "0");
        assert_eq!(numeric(0, 0, 0, 2, &[]), "0.00");
        assert_eq!(numeric(2, 1, 0, 0, &[1, 2345]), "12345");
        assert_eq!(numeric(2, 0, 0x4000, 2, &[12, 5000]), "-12.50");
        assert_eq!(numeric(1, -1, 0, 4, &[5]), "0.0005");
        assert_eq!(numeric(1, -2, 0, 8, &[5]), "0.00000005");
        assert_eq!(numeric(1, 2, 0, 0, &[7]), "700000000");
        assert_eq!(numeric(0, 0, 0xC000, 0, &[]), "NaN");
        assert_eq!(numeric(0, 0, 0xD000, 0, &[]), "Infinity");
    }

    #[test]
    fn arrays_nest_by_dimension() {
        let mut raw = Vec::new();
        for v in [2i32, 0, 23, 2, 1, 3, 1] {
            raw.extend_from_slice(&v.to_be_bytes());
        }
        for v in 1..=6i32 {
            raw.extend_from_slice(&4i32.to_be_bytes());
            raw.extend_from_slice(&v.to_be_bytes());
        }
        assert_eq!(
            array(&Decoder::Int4, &raw).map_err(|e| e.to_string()),
            Ok(serde_json::json!([[1, 2, 3], [4, 5, 6]]))
        );
    }

    #[test]
    fn other_values() {
        assert_eq!(
            Decoder::Float4
                .decode(&0.1f32.to_bits().to_be_bytes())
                .map_err(|e| e.to_string()),
            Ok(serde_json::json!(0.1))
        );
        assert_eq!(
            Decoder::Float8
                .decode(&f64::NAN.to_bits().to_be_bytes())
                .map_err(|e| e.to_string()),
            Ok(Value::String("NaN".into()))
        );
        assert_eq!(
            Decoder::Float4
                .decode(&f32::NEG_INFINITY.to_bits().to_be_bytes())
                .map_err(|e| e.to_string()),
            Ok(Value::String("-Infinity".into()))
        );
        assert_eq!(
            inet_text(&[2, 24, 1, 4, 10, 0, 0, 0]).map_err(|e| e.to_string()),
            Ok("10.0.0.0/24".to_owned())
        );
        assert_eq!(
            inet_text(&[2, 32, 0, 4, 10, 0, 0, 1]).map_err(|e| e.to_string()),
            Ok("10.0.0.1".to_owned())
        );
    }
}
