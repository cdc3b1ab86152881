//! PostgreSQL column types to Kafka Connect schemas and values, as Debezium maps them.
//!
//! Values arrive as PostgreSQL's text output (pgoutput text tuples, and the snapshot's simple-query
//! rows), with the session pinned to `DateStyle=ISO`, `TimeZone=UTC`, `bytea_output=hex` and
//! `extra_float_digits=3`, so one parser serves both paths.

use base64::Engine;
use ferry_api::{Field, Schema};
use serde_json::Value as Json;

use crate::config::{BinaryMode, CdcConfig, DecimalMode, TimeMode};

/// One captured column: what the catalog and the Relation message say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The column's name.
    pub name: String,
    /// Its type OID.
    pub type_oid: u32,
    /// Its type modifier (-1: none).
    pub typmod: i32,
    /// Whether NULL is allowed.
    pub nullable: bool,
    /// Part of the primary key.
    pub primary_key: bool,
    /// An enum type's labels in their order, comma-separated (`None`: not an enum).
    pub enum_labels: Option<String>,
    /// The column's `DEFAULT` expression as `pg_get_expr` writes it (`0`, `'x'::text`, `now()`).
    pub default_expr: Option<String>,
}

/// Session settings every connection of the source runs with, so text values parse one way.
pub const SESSION_OPTIONS: &str = "-c DateStyle=ISO -c TimeZone=UTC -c bytea_output=hex -c extra_float_digits=3 -c IntervalStyle=iso_8601";

const BOOL: u32 = 16;
const BYTEA: u32 = 17;
const INT8: u32 = 20;
const INT2: u32 = 21;
const INT4: u32 = 23;
const OID: u32 = 26;
const JSON: u32 = 114;
const FLOAT4: u32 = 700;
const FLOAT8: u32 = 701;
const DATE: u32 = 1082;
const TIME: u32 = 1083;
const TIMESTAMP: u32 = 1114;
const TIMESTAMPTZ: u32 = 1184;
const TIMETZ: u32 = 1266;
const NUMERIC: u32 = 1700;
const UUID: u32 = 2950;
const MONEY: u32 = 790;
const INT2_ARRAY: u32 = 1005;
const INT4_ARRAY: u32 = 1007;
const INT8_ARRAY: u32 = 1016;
const OID_ARRAY: u32 = 1028;
/// Arrays Debezium writes as arrays of optional strings: "char", varchar, text, bpchar, inet,
/// cidr, macaddr, macaddr8.
const STRING_ARRAYS: [u32; 8] = [1002, 1015, 1009, 1014, 1041, 651, 1040, 775];
const INTERVAL: u32 = 1186;
const JSONB: u32 = 3802;

/// A numeric column's (precision, scale), `None` when unconstrained.
fn numeric_modifiers(typmod: i32) -> Option<(i32, i32)> {
    if typmod < 4 {
        return None;
    }
    let m = typmod - 4;
    // The scale is an 11-bit signed field (negative scales exist since PostgreSQL 15).
    let scale = ((m & 0x7ff) ^ 0x400) - 0x400;
    Some(((m >> 16) & 0xffff, scale))
}

/// Fractional-second digits of a time or timestamp column (6 when unconstrained).
fn time_precision(typmod: i32) -> i32 {
    if typmod < 0 { 6 } else { typmod }
}

fn debezium(schema: Schema, name: &str) -> Schema {
    schema.named(name).with_version(1)
}

/// The Connect schema of a column (optional when the column is nullable).
pub fn schema(column: &Column, config: &CdcConfig) -> Schema {
    let schema = match column.type_oid {
        BOOL => Schema::boolean(),
        INT2 => Schema::int16(),
        INT4 => Schema::int32(),
        INT8 | OID => Schema::int64(),
        FLOAT4 => Schema::float32(),
        FLOAT8 => Schema::float64(),
        NUMERIC => match config.decimal {
            DecimalMode::Double => Schema::float64(),
            DecimalMode::String => Schema::string(),
            DecimalMode::Precise => match numeric_modifiers(column.typmod) {
                Some((precision, scale)) => Schema::decimal(scale)
                    .with_parameter("connect.decimal.precision", precision.to_string()),
                None => Schema::struct_(
                    "io.debezium.data.VariableScaleDecimal",
                    [
                        Field::new("scale", Schema::int32()),
                        Field::new("value", Schema::bytes()),
                    ],
                )
                .with_version(1)
                .with_doc("Variable scaled decimal"),
            },
        },
        DATE => match config.time {
            TimeMode::Connect => Schema::date(),
            _ => debezium(Schema::int32(), "io.debezium.time.Date"),
        },
        TIME => match config.time {
            TimeMode::Connect => Schema::time(),
            TimeMode::Adaptive if time_precision(column.typmod) <= 3 => {
                debezium(Schema::int32(), "io.debezium.time.Time")
            }
            _ => debezium(Schema::int64(), "io.debezium.time.MicroTime"),
        },
        TIMESTAMP => match config.time {
            TimeMode::Connect => Schema::timestamp(),
            _ if time_precision(column.typmod) <= 3 => {
                debezium(Schema::int64(), "io.debezium.time.Timestamp")
            }
            _ => debezium(Schema::int64(), "io.debezium.time.MicroTimestamp"),
        },
        TIMESTAMPTZ => debezium(Schema::string(), "io.debezium.time.ZonedTimestamp"),
        TIMETZ => debezium(Schema::string(), "io.debezium.time.ZonedTime"),
        JSON | JSONB => debezium(Schema::string(), "io.debezium.data.Json"),
        UUID => debezium(Schema::string(), "io.debezium.data.Uuid"),
        BYTEA => match config.binary {
            BinaryMode::Bytes => Schema::bytes(),
            _ => Schema::string(),
        },
        // Debezium's money.fraction.digits default.
        MONEY => match config.decimal {
            DecimalMode::Double => Schema::float64(),
            DecimalMode::String => Schema::string(),
            DecimalMode::Precise => Schema::decimal(2),
        },
        INT2_ARRAY => Schema::array(Schema::int16().optional()),
        INT4_ARRAY => Schema::array(Schema::int32().optional()),
        INT8_ARRAY | OID_ARRAY => Schema::array(Schema::int64().optional()),
        oid if STRING_ARRAYS.contains(&oid) => Schema::array(Schema::string().optional()),
        // interval.handling.mode=numeric (the only mode implemented).
        INTERVAL => debezium(Schema::int64(), "io.debezium.time.MicroDuration"),
        _ if column.enum_labels.is_some() => Schema::string()
            .named("io.debezium.data.Enum")
            .with_version(1)
            .with_parameter("allowed", column.enum_labels.clone().unwrap_or_default()),
        // text, varchar, bpchar, name, char, and (for now) every type not mapped above: its text.
        _ => Schema::string(),
    };
    let schema = match default_value(column) {
        Some(default) => schema.with_default(default),
        None => schema,
    };
    if column.nullable {
        schema.optional()
    } else {
        schema
    }
}

const TEXT: u32 = 25;
const VARCHAR: u32 = 1043;

/// The column's `DEFAULT` as a schema default, as Debezium reads it, for the literal defaults of
/// integer, boolean, text and varchar columns; `None` for other types and for expressions
/// (`nextval(…)`, `now()`), which Ferry does not evaluate.
pub fn default_value(column: &Column) -> Option<ferry_api::Value> {
    let expr = column.default_expr.as_deref()?.trim();
    // `'…'::type` or a bare literal; a quoted literal may itself contain `::`.
    let literal = match expr.strip_prefix('\'') {
        Some(rest) => {
            let (quoted, cast) = match rest.rfind("'::") {
                Some(end) => (&rest[..end], &rest[end + 3..]),
                None => (rest.strip_suffix('\'')?, ""),
            };
            // Only a plain type name after the literal (no operator, no function).
            if !cast
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == ' ' || c == '_')
            {
                return None;
            }
            // Debezium 3.6 cuts a literal at its first quote: `'it''s'` is its default "it".
            quoted.split('\'').next().unwrap_or_default().to_owned()
        }
        None if expr.contains(['(', ':', ' ']) => return None,
        None => expr.to_owned(),
    };
    match column.type_oid {
        BOOL => match literal.as_str() {
            "true" => Some(ferry_api::Value::Bool(true)),
            "false" => Some(ferry_api::Value::Bool(false)),
            _ => None,
        },
        INT2 => literal.parse::<i16>().ok().map(ferry_api::Value::Int16),
        INT4 => literal.parse::<i32>().ok().map(ferry_api::Value::Int32),
        INT8 => literal.parse::<i64>().ok().map(ferry_api::Value::Int64),
        TEXT | VARCHAR => Some(ferry_api::Value::String(literal)),
        _ => None,
    }
}

/// Converts one non-null text value to its JSON form under `schema` (see [`schema`]).
///
/// # Errors
/// A value that does not parse, or cannot be represented (NaN, infinity), with why.
pub fn value(column: &Column, text: &str, config: &CdcConfig) -> Result<Json, String> {
    Ok(match column.type_oid {
        BOOL => Json::Bool(match text {
            "t" => true,
            "f" => false,
            _ => return Err("not t or f".into()),
        }),
        INT2 | INT4 | INT8 | OID => Json::from(text.parse::<i64>().map_err(|e| e.to_string())?),
        // NaN and the infinities: the strings JsonConverter writes for them (Jackson quotes
        // non-finite numbers), which Ferry's converter takes for a float field.
        FLOAT4 | FLOAT8 if matches!(text, "NaN" | "Infinity" | "-Infinity") => {
            Json::String(text.to_owned())
        }
        FLOAT4 | FLOAT8 => {
            let v: f64 = text.parse().map_err(|_| "not a number".to_owned())?;
            serde_json::Number::from_f64(v)
                .map(Json::Number)
                .ok_or("not a finite number")?
        }
        NUMERIC => match config.decimal {
            DecimalMode::String => Json::String(text.to_owned()),
            DecimalMode::Double => {
                let v: f64 = text.parse().map_err(|_| "not a number".to_owned())?;
                serde_json::Number::from_f64(v)
                    .map(Json::Number)
                    .ok_or("NaN cannot be written as JSON")?
            }
            DecimalMode::Precise => {
                // A VariableScaleDecimal drops the fraction's trailing zeros (Debezium's
                // `stripTrailingZeros`, a negative scale set back to 0).
                let text = match numeric_modifiers(column.typmod) {
                    Some(_) => text,
                    None if text.contains('.') => text.trim_end_matches('0').trim_end_matches('.'),
                    None => text,
                };
                let (unscaled, scale) = unscaled_decimal(text)?;
                let b64 = Json::String(base64::engine::general_purpose::STANDARD.encode(unscaled));
                match numeric_modifiers(column.typmod) {
                    Some(_) => b64,
                    None => serde_json::json!({"scale": scale, "value": b64}),
                }
            }
        },
        DATE => Json::from(days(text)?),
        TIME => {
            let micros = time_micros(text)?;
            match config.time {
                TimeMode::Connect => Json::from(micros / 1000),
                TimeMode::Adaptive if time_precision(column.typmod) <= 3 => {
                    Json::from(micros / 1000)
                }
                _ => Json::from(micros),
            }
        }
        TIMESTAMP => {
            let micros = timestamp_micros(text)?;
            match config.time {
                _ if matches!(config.time, TimeMode::Connect)
                    || time_precision(column.typmod) <= 3 =>
                {
                    Json::from(micros.div_euclid(1000))
                }
                _ => Json::from(micros),
            }
        }
        // Debezium writes PostgreSQL's own words for the infinities.
        TIMESTAMPTZ if text == "infinity" || text == "-infinity" => Json::String(text.to_owned()),
        TIMESTAMPTZ => {
            let (local, offset) = split_offset(text)?;
            let micros = timestamp_micros(local)? - offset;
            // Debezium pads the fraction to the column's precision (`ZonedTimestamp` with a
            // fractional width); precision 0 has none.
            Json::String(iso_utc(micros, time_precision(column.typmod)))
        }
        TIMETZ => {
            let (local, offset) = split_offset(text)?;
            let micros = (time_micros(local)? - offset).rem_euclid(86_400_000_000);
            Json::String(format!("{}Z", clock(micros)))
        }
        BYTEA => {
            let hex = text
                .strip_prefix("\\x")
                .ok_or("bytea is not in hex output form")?;
            let bytes = decode_hex(hex)?;
            match config.binary {
                BinaryMode::Bytes | BinaryMode::Base64 => {
                    Json::String(base64::engine::general_purpose::STANDARD.encode(bytes))
                }
                BinaryMode::Base64UrlSafe => {
                    Json::String(base64::engine::general_purpose::URL_SAFE.encode(bytes))
                }
                BinaryMode::Hex => Json::String(hex.to_owned()),
            }
        }
        MONEY => {
            let number = money_number(text)?;
            match config.decimal {
                DecimalMode::String => Json::String(number),
                DecimalMode::Double => {
                    let v: f64 = number.parse().map_err(|_| "not a number".to_owned())?;
                    serde_json::Number::from_f64(v)
                        .map(Json::Number)
                        .ok_or("not a finite number")?
                }
                DecimalMode::Precise => Json::String(
                    base64::engine::general_purpose::STANDARD.encode(unscaled_decimal(&number)?.0),
                ),
            }
        }
        INTERVAL => Json::from(interval_micros(text)?),
        INT2_ARRAY | INT4_ARRAY | INT8_ARRAY | OID_ARRAY => Json::Array(
            array_elements(text)?
                .into_iter()
                .map(|e| match e {
                    None => Ok(Json::Null),
                    Some(e) => e.parse::<i64>().map(Json::from).map_err(|e| e.to_string()),
                })
                .collect::<Result<_, String>>()?,
        ),
        oid if STRING_ARRAYS.contains(&oid) => Json::Array(
            array_elements(text)?
                .into_iter()
                .map(|e| e.map_or(Json::Null, Json::String))
                .collect(),
        ),
        _ => Json::String(text.to_owned()),
    })
}

/// The elements of a one-dimensional array's text (`{1,NULL,3}`, `{"a b",c}`): `None` for an
/// unquoted NULL. Quoted elements unescape `\"` and `\\`.
fn array_elements(text: &str) -> Result<Vec<Option<String>>, String> {
    // A lower bound other than 1 comes first: `[0:1]={1,2}`.
    let body = text.split_once('=').map_or(text, |(_, b)| b);
    let inner = body
        .strip_prefix('{')
        .and_then(|b| b.strip_suffix('}'))
        .ok_or("not an array")?;
    if inner.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut chars = inner.chars().peekable();
    loop {
        let element = if chars.peek() == Some(&'"') {
            chars.next();
            let mut e = String::new();
            loop {
                match chars.next() {
                    Some('\\') => e.push(chars.next().ok_or("an array ends in an escape")?),
                    Some('"') => break,
                    Some(c) => e.push(c),
                    None => return Err("an unterminated quoted array element".into()),
                }
            }
            Some(e)
        } else {
            let mut e = String::new();
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                if c == '{' {
                    return Err("multi-dimensional arrays are not supported yet".into());
                }
                e.push(c);
                chars.next();
            }
            (e != "NULL").then_some(e)
        };
        out.push(element);
        match chars.next() {
            None => return Ok(out),
            Some(',') => {}
            Some(c) => return Err(format!("{c:?} after an array element")),
        }
    }
}

/// A money text (`$1,234.50`, `-$0.99`, `($5.00)`: by `lc_monetary`) as a plain decimal with two
/// fraction digits, Debezium's `money.fraction.digits` default.
fn money_number(text: &str) -> Result<String, String> {
    let negative = text.contains('-') || text.starts_with('(');
    let kept: String = text
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let (int, frac) = kept.split_once('.').unwrap_or((&kept, ""));
    if int.is_empty() && frac.is_empty() {
        return Err("no digits in a money value".into());
    }
    let frac: String = frac.chars().chain(std::iter::repeat('0')).take(2).collect();
    let int = if int.is_empty() { "0" } else { int };
    Ok(format!("{}{int}.{frac}", if negative { "-" } else { "" }))
}

/// An interval in `IntervalStyle=iso_8601` (`P1Y2M3DT4H5M6.789S`, parts may be negative) as
/// Debezium's `MicroDuration`: a month is 365.25 / 12 days, computed in doubles as Debezium's
/// `MicroDuration.durationMicros` does, so the rounding is the same.
fn interval_micros(text: &str) -> Result<i64, String> {
    let body = text.strip_prefix('P').ok_or("not an ISO 8601 interval")?;
    let (date, time) = body.split_once('T').unwrap_or((body, ""));
    let (mut years, mut months, mut days, mut hours, mut minutes) = (0i64, 0i64, 0i64, 0i64, 0i64);
    let (mut whole_seconds, mut micros) = (0i64, 0i64);
    let mut parts = |part: &str, in_time: bool| -> Result<(), String> {
        let mut rest = part;
        while !rest.is_empty() {
            let end = rest
                .find(|c: char| c.is_ascii_alphabetic())
                .ok_or("an interval part without its unit")?;
            let (number, unit) = (&rest[..end], &rest[end..=end]);
            rest = &rest[end + 1..];
            let int = |n: &str| n.parse::<i64>().map_err(|e| format!("{n:?}: {e}"));
            match (in_time, unit) {
                (false, "Y") => years = int(number)?,
                (false, "M") => months = int(number)?,
                (false, "W") => days += 7 * int(number)?,
                (false, "D") => days += int(number)?,
                (true, "H") => hours = int(number)?,
                (true, "M") => minutes = int(number)?,
                (true, "S") => {
                    let negative = number.starts_with('-');
                    let (w, f) = number.split_once('.').unwrap_or((number, ""));
                    whole_seconds = int(w)?;
                    let f: String = f.chars().chain(std::iter::repeat('0')).take(6).collect();
                    let f = int(&f)?;
                    micros = if negative { -f } else { f };
                }
                _ => return Err(format!("unknown interval unit {unit:?}")),
            }
        }
        Ok(())
    };
    parts(date, false)?;
    parts(time, true)?;
    // PGInterval.getSeconds(): whole seconds plus microseconds / 1e6, as a double.
    #[allow(clippy::cast_precision_loss)]
    let seconds = whole_seconds as f64 + micros as f64 / 1_000_000.0;
    #[allow(clippy::cast_precision_loss)]
    let number_of_days = (years * 12 + months) as f64 * (365.25 / 12.0) + days as f64;
    #[allow(clippy::cast_precision_loss)]
    let number_of_seconds =
        ((number_of_days * 24.0 + hours as f64) * 60.0 + minutes as f64) * 60.0 + seconds;
    // Java's (long) cast: toward zero.
    #[allow(clippy::cast_possible_truncation)]
    Ok((number_of_seconds * 1e6) as i64)
}

/// The value Debezium writes for a NOT NULL column that has no value: a delete's or key change's
/// `before` under `REPLICA IDENTITY DEFAULT` holds only the key columns, and Debezium's value
/// converters put each required column's fallback (zero, the epoch, an empty string) in the rest
/// (`JdbcValueConverters.convertValue`).
pub fn fallback(column: &Column, config: &CdcConfig) -> Json {
    // The column's default first, as Debezium's `convertValue` takes the schema's default.
    if let Some(default) = default_value(column) {
        return match default {
            ferry_api::Value::Bool(b) => Json::Bool(b),
            ferry_api::Value::String(s) => Json::String(s),
            other => other.as_i64().map_or(Json::Null, Json::from),
        };
    }
    let zero_decimal = || Json::String(base64::engine::general_purpose::STANDARD.encode([0u8]));
    match column.type_oid {
        BOOL => Json::Bool(false),
        INT2 | INT4 | INT8 | OID | DATE | TIME | TIMESTAMP | INTERVAL => Json::from(0),
        FLOAT4 | FLOAT8 => Json::from(0.0),
        MONEY => match config.decimal {
            DecimalMode::Double => Json::from(0.0),
            DecimalMode::String => Json::String("0".to_owned()),
            DecimalMode::Precise => zero_decimal(),
        },
        NUMERIC => match config.decimal {
            DecimalMode::Double => Json::from(0.0),
            DecimalMode::String => Json::String("0".to_owned()),
            DecimalMode::Precise => match numeric_modifiers(column.typmod) {
                Some(_) => zero_decimal(),
                None => serde_json::json!({"scale": 0, "value": zero_decimal()}),
            },
        },
        TIMESTAMPTZ => Json::String("1970-01-01T00:00:00Z".to_owned()),
        TIMETZ => Json::String("00:00:00Z".to_owned()),
        INT2_ARRAY | INT4_ARRAY | INT8_ARRAY | OID_ARRAY => Json::Array(Vec::new()),
        oid if STRING_ARRAYS.contains(&oid) => Json::Array(Vec::new()),
        // Text, bytea (empty bytes: an empty base64 or hex string) and every other string.
        _ => Json::String(String::new()),
    }
}

fn decode_hex(hex: &str) -> Result<Vec<u8>, String> {
    let nibble = |b: u8| match b {
        b'0'..=b'9' => Ok(b - b'0'),
        b'a'..=b'f' => Ok(b - b'a' + 10),
        b'A'..=b'F' => Ok(b - b'A' + 10),
        _ => Err("not hex".to_owned()),
    };
    let bytes = hex.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return Err("odd number of hex digits".into());
    }
    bytes
        .chunks(2)
        .map(|pair| Ok((nibble(pair[0])? << 4) | nibble(pair[1])?))
        .collect()
}

/// The unscaled value of a decimal text as big-endian two's-complement bytes (Java's
/// `BigInteger.toByteArray`: the shortest form), and its scale.
pub fn unscaled_decimal(text: &str) -> Result<(Vec<u8>, i32), String> {
    if text == "NaN" || text.contains("Infinity") {
        return Err("NaN and infinity have no Connect Decimal form".into());
    }
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let scale = i32::try_from(frac.len()).map_err(|_| "too many digits".to_owned())?;
    // Magnitude in base 256, big-endian, built digit by digit.
    let mut mag: Vec<u8> = vec![0];
    for c in int.chars().chain(frac.chars()) {
        let d = c
            .to_digit(10)
            .ok_or_else(|| format!("{c:?} is not a digit"))?;
        let mut carry = d;
        for byte in mag.iter_mut().rev() {
            let v = u32::from(*byte) * 10 + carry;
            *byte = (v & 0xff) as u8;
            carry = v >> 8;
        }
        while carry > 0 {
            mag.insert(0, (carry & 0xff) as u8);
            carry >>= 8;
        }
    }
    // Room for the sign bit.
    if mag[0] & 0x80 != 0 {
        mag.insert(0, 0);
    }
    if negative {
        // Two's complement: invert and add one.
        for b in mag.iter_mut() {
            *b = !*b;
        }
        for b in mag.iter_mut().rev() {
            let (v, overflow) = b.overflowing_add(1);
            *b = v;
            if !overflow {
                break;
            }
        }
    }
    // Shortest form: drop redundant sign bytes.
    while mag.len() > 1
        && ((mag[0] == 0 && mag[1] & 0x80 == 0) || (mag[0] == 0xff && mag[1] & 0x80 != 0))
    {
        mag.remove(0);
    }
    Ok((mag, scale))
}

/// Days from 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `YYYY-MM-DD` (ISO DateStyle) to days since the epoch.
fn days(text: &str) -> Result<i64, String> {
    if text.ends_with(" BC") || text.contains("infinity") {
        return Err("BC dates and infinity are not supported yet".into());
    }
    let mut parts = text.splitn(3, '-');
    let mut next = |what: &str| -> Result<i64, String> {
        parts
            .next()
            .and_then(|p| p.parse::<i64>().ok())
            .ok_or_else(|| format!("no {what} in date"))
    };
    let (y, m, d) = (next("year")?, next("month")?, next("day")?);
    Ok(days_from_civil(y, m, d))
}

/// `HH:MM:SS[.ffffff]` to microseconds since midnight.
fn time_micros(text: &str) -> Result<i64, String> {
    let mut parts = text.splitn(3, ':');
    let h: i64 = parts.next().and_then(|p| p.parse().ok()).ok_or("no hour")?;
    let m: i64 = parts
        .next()
        .and_then(|p| p.parse().ok())
        .ok_or("no minute")?;
    let sec = parts.next().ok_or("no second")?;
    let (s, frac) = sec.split_once('.').unwrap_or((sec, ""));
    let s: i64 = s.parse().map_err(|_| "bad second".to_owned())?;
    let mut micros_frac = 0_i64;
    for (i, c) in frac.chars().take(6).enumerate() {
        let d = i64::from(c.to_digit(10).ok_or("bad fraction")?);
        micros_frac += d * 10_i64.pow(5 - i as u32);
    }
    Ok(((h * 60 + m) * 60 + s) * 1_000_000 + micros_frac)
}

/// `YYYY-MM-DD HH:MM:SS[.ffffff]` to microseconds since the epoch.
fn timestamp_micros(text: &str) -> Result<i64, String> {
    let (date, time) = text.split_once(' ').ok_or("no time in timestamp")?;
    Ok(days(date)? * 86_400_000_000 + time_micros(time)?)
}

/// Splits `…+HH[:MM[:SS]]` into the local part and the offset in microseconds.
fn split_offset(text: &str) -> Result<(&str, i64), String> {
    // The time part starts after the date's space (if any); its sign starts the offset.
    let start = text.find(' ').map_or(0, |i| i + 1);
    let pos = text[start..]
        .rfind(['+', '-'])
        .map(|i| i + start)
        .ok_or("no UTC offset")?;
    let (local, offset) = text.split_at(pos);
    let sign = if offset.starts_with('-') { -1 } else { 1 };
    let mut total = 0_i64;
    for (i, part) in offset[1..].split(':').enumerate() {
        let v: i64 = part.parse().map_err(|_| "bad UTC offset".to_owned())?;
        total += v * [3600, 60, 1].get(i).copied().ok_or("bad UTC offset")?;
    }
    Ok((local, sign * total * 1_000_000))
}

/// `HH:MM:SS[.fraction]`, the fraction without trailing zeros (Java's ISO formatter).
fn clock(micros_of_day: i64) -> String {
    let secs = micros_of_day / 1_000_000;
    let frac = micros_of_day % 1_000_000;
    let mut out = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    if frac != 0 {
        let digits = format!("{frac:06}");
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
    out
}

/// ISO-8601 in UTC as Debezium's `ZonedTimestamp` writes a column of `precision` fractional
/// digits: `2024-01-31T12:34:56.789000Z` for precision 6, no fraction for precision 0.
fn iso_utc(micros: i64, precision: i32) -> String {
    let days = micros.div_euclid(86_400_000_000);
    let (y, m, d) = civil_from_days(days);
    let of_day = micros.rem_euclid(86_400_000_000);
    let secs = of_day / 1_000_000;
    let mut out = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    if let Ok(width @ 1..=6) = usize::try_from(precision) {
        let digits = format!("{:06}", of_day % 1_000_000);
        out.push('.');
        out.push_str(digits.get(..width).unwrap_or_default());
    }
    out.push('Z');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_debeziums_micro_durations() {
        // 14 months of 30.4375 days, 3 days, 04:05:06.789 (Debezium wrote 37091106789000).
        assert_eq!(
            interval_micros("P1Y2M3DT4H5M6.789S"),
            Ok(37_091_106_789_000)
        );
        assert_eq!(interval_micros("PT0S"), Ok(0));
        assert_eq!(
            interval_micros("P-1M2DT-0.000001S"),
            Ok(-(2_629_800_000_000 - 172_800_000_000) - 1)
        );
        assert!(interval_micros("1 day").is_err());
    }

    #[test]
    fn arrays_split_into_elements() {
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(
            array_elements("{1,NULL,3}"),
            Ok(vec![some("1"), None, some("3")])
        );
        assert_eq!(
            array_elements(r#"{"a b",c,"NULL","q\"x\\"}"#),
            Ok(vec![some("a b"), some("c"), some("NULL"), some("q\"x\\")])
        );
        assert_eq!(array_elements("{}"), Ok(vec![]));
        assert_eq!(
            array_elements("[0:1]={5,6}"),
            Ok(vec![some("5"), some("6")])
        );
        assert!(array_elements("{{1,2},{3,4}}").is_err());
    }

    #[test]
    fn literal_defaults_become_schema_defaults() {
        let column = |type_oid: u32, expr: &str| Column {
            name: "c".into(),
            type_oid,
            typmod: -1,
            nullable: true,
            primary_key: false,
            enum_labels: None,
            default_expr: Some(expr.into()),
        };
        use ferry_api::Value as V;
        assert_eq!(default_value(&column(INT4, "7")), Some(V::Int32(7)));
        assert_eq!(
            default_value(&column(INT8, "'-1'::integer")),
            Some(V::Int64(-1))
        );
        assert_eq!(default_value(&column(BOOL, "true")), Some(V::Bool(true)));
        assert_eq!(
            default_value(&column(TEXT, "'it''s::x'::text")),
            Some(V::String("it".into()))
        );
        assert_eq!(
            default_value(&column(VARCHAR, "'v'::character varying")),
            Some(V::String("v".into()))
        );
        assert_eq!(default_value(&column(INT4, "nextval('s'::regclass)")), None);
        assert_eq!(default_value(&column(TEXT, "now()")), None);
        assert_eq!(default_value(&column(UUID, "'a'::uuid")), None);
        assert_eq!(
            default_value(&column(TEXT, "('a'::text || 'b'::text)")),
            None
        );
        assert_eq!(default_value(&column(TEXT, "'a'::text || 'b'")), None);
    }

    #[test]
    fn money_is_a_two_digit_decimal_whatever_the_symbol() {
        assert_eq!(money_number("$12.34").as_deref(), Ok("12.34"));
        assert_eq!(money_number("-$1,234.50").as_deref(), Ok("-1234.50"));
        assert_eq!(money_number("($5.5)").as_deref(), Ok("-5.50"));
        assert_eq!(money_number("€7").as_deref(), Ok("7.00"));
        assert!(money_number("$").is_err());
    }

    #[test]
    fn decimals_are_javas_shortest_twos_complement() {
        assert_eq!(unscaled_decimal("1.50"), Ok((vec![0x00, 0x96], 2)));
        assert_eq!(unscaled_decimal("-1.50"), Ok((vec![0xff, 0x6a], 2)));
        assert_eq!(unscaled_decimal("0"), Ok((vec![0], 0)));
        assert_eq!(unscaled_decimal("-128"), Ok((vec![0x80], 0)));
        assert_eq!(unscaled_decimal("127"), Ok((vec![0x7f], 0)));
        assert_eq!(unscaled_decimal("128"), Ok((vec![0x00, 0x80], 0)));
    }

    #[test]
    fn dates_and_times_parse_to_epoch_units() {
        assert_eq!(days("1970-01-01"), Ok(0));
        assert_eq!(days("2024-02-29"), Ok(19_782));
        assert_eq!(days("1969-12-31"), Ok(-1));
        assert_eq!(time_micros("12:34:56.789"), Ok(45_296_789_000));
        assert_eq!(
            timestamp_micros("1970-01-02 00:00:00.000001"),
            Ok(86_400_000_001)
        );
        let (local, offset) = split_offset("2024-01-31 12:00:00.5+05:30").unwrap_or(("", 0));
        assert_eq!((local, offset), ("2024-01-31 12:00:00.5", 19_800_000_000));
        let micros = timestamp_micros("2024-01-31 06:30:00.5").unwrap_or(0);
        assert_eq!(iso_utc(micros, 6), "2024-01-31T06:30:00.500000Z");
        assert_eq!(iso_utc(micros, 1), "2024-01-31T06:30:00.5Z");
        assert_eq!(iso_utc(micros - 500_000, 0), "2024-01-31T06:30:00Z");
    }
}
