//! `numeric` columns as Kafka Connect's JDBC source maps them (`numeric.mapping`), and the bytes of
//! Kafka Connect's `Decimal` logical type.
//!
//! The JDBC source sees a column's precision and scale through PostgreSQL's JDBC driver: from the type
//! modifier, or precision 0 and scale 0 for an unconstrained `numeric`. Its mappings
//! (`GenericDatabaseDialect.addFieldToSchema` and `columnConverterFor`):
//!
//! - `none` (default): `Decimal` with the column's scale (unconstrained: scale 127, as
//!   `PostgreSqlDatabaseDialect.decimalScale`) and parameter `connect.decimal.precision`;
//! - `precision_only`: scale 0 and precision ≤ 18: the smallest of int8 (≤ 2 digits), int16 (≤ 4),
//!   int32 (≤ 9), int64; otherwise `Decimal`;
//! - `best_fit`: precision ≤ 18: integers as above when scale ≤ 0, `float64` when scale > 0; otherwise
//!   `Decimal`;
//! - `best_fit_eager_double`: scale ≤ 0 and precision ≤ 18: integers; scale > 0: `float64`; otherwise
//!   `Decimal`.
//!
//! One deliberate difference: an unconstrained `numeric` (precision 0) is never mapped to int8 by
//! `precision_only`/`best_fit` (the JDBC source does, and then fails or truncates on any value beyond a
//! byte); it stays a `Decimal` (`best_fit_eager_double`: `float64`).

use base64::Engine as _;
use ferry_api::Schema;

/// A `numeric` value that has no form in the type its column maps to (`numeric.mapping`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NumericError {
    #[error(
        "the numeric value {text} is not an integer (numeric.mapping maps this column to int{bits})"
    )]
    NotInteger { text: String, bits: u8 },
    #[error(
        "the numeric value {text} does not fit int{bits} (numeric.mapping); use numeric.mapping=none"
    )]
    IntegerOutOfRange { text: String, bits: u8 },
    #[error("the numeric value {text} is not a number")]
    NotNumber { text: String },
    /// NaN or ±Infinity as a `Decimal`.
    #[error(
        "the numeric value {text} has no Kafka Connect Decimal form (the JDBC source fails on it too); \
         turn it into null in a query (NULLIF(col, 'NaN')), or use numeric.mapping=best_fit_eager_double \
         (a double; NaN written \"NaN\")"
    )]
    NoDecimalForm { text: String },
    #[error(
        "the numeric value {text} has more than {scale} fraction digits, the scale of its Decimal"
    )]
    TooManyFractionDigits { text: String, scale: usize },
    #[error(
        "the numeric value {text} is not a multiple of 10^{cut}, as its scale {scale} requires"
    )]
    NotMultiple {
        text: String,
        cut: usize,
        scale: i32,
    },
}

/// `numeric.mapping`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum NumericMapping {
    #[default]
    None,
    PrecisionOnly,
    BestFit,
    BestFitEagerDouble,
}

impl NumericMapping {
    /// The accepted values, for messages.
    pub(crate) const NAMES: &'static str =
        "none, precision_only, best_fit or best_fit_eager_double";

    /// Parses a `numeric.mapping` value (case-insensitive, as the JDBC source).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "none" => Some(Self::None),
            "precision_only" => Some(Self::PrecisionOnly),
            "best_fit" => Some(Self::BestFit),
            "best_fit_eager_double" => Some(Self::BestFitEagerDouble),
            _ => None,
        }
    }
}

/// The JDBC source's largest precision mapped to an integer type (fits a signed 64-bit integer).
const MAX_INTEGER_PRECISION: i32 = 18;
/// The lowest scale still taken as an integer (Oracle's; the JDBC source applies it everywhere).
const SCALE_LOW: i32 = -84;
/// The scale of a `Decimal` for an unconstrained `numeric`.
const SCALE_HIGH: i32 = 127;

/// How a `numeric` column is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumericKind {
    /// Kafka Connect `Decimal`: `scale` and the `connect.decimal.precision` parameter.
    Decimal {
        scale: i32,
        precision: i32,
    },
    /// int8, int16, int32 or int64 (bits).
    Int(u8),
    Float64,
}

/// The (precision, scale) PostgreSQL's JDBC driver reports for a `numeric` type modifier: (0, 0)
/// when unconstrained (-1).
pub(crate) fn precision_scale(typmod: i32) -> Option<(i32, i32)> {
    if typmod < 4 {
        return None;
    }
    let t = typmod - 4;
    // PostgreSQL 15 keeps the scale as an 11-bit signed number (it may be negative).
    Some(((t >> 16) & 0xffff, ((t & 0x7ff) ^ 1024) - 1024))
}

impl NumericKind {
    /// The mapping of a `numeric` column with type modifier `typmod`.
    pub(crate) fn of(typmod: i32, mapping: NumericMapping) -> Self {
        let Some((precision, scale)) = precision_scale(typmod) else {
            return match mapping {
                NumericMapping::BestFitEagerDouble => NumericKind::Float64,
                _ => NumericKind::Decimal {
                    scale: SCALE_HIGH,
                    precision: 0,
                },
            };
        };
        let int = || {
            NumericKind::Int(match precision {
                p if p > 9 => 64,
                p if p > 4 => 32,
                p if p > 2 => 16,
                _ => 8,
            })
        };
        let integer_scale = (SCALE_LOW..1).contains(&scale);
        let small = precision <= MAX_INTEGER_PRECISION;
        match mapping {
            NumericMapping::PrecisionOnly if scale == 0 && small => int(),
            NumericMapping::BestFit if small && integer_scale => int(),
            NumericMapping::BestFit if small && scale > 0 => NumericKind::Float64,
            NumericMapping::BestFitEagerDouble if integer_scale && small => int(),
            NumericMapping::BestFitEagerDouble if scale > 0 => NumericKind::Float64,
            _ => NumericKind::Decimal { scale, precision },
        }
    }

    /// The Kafka Connect schema (required; the caller makes it optional).
    pub(crate) fn schema(self) -> Schema {
        match self {
            NumericKind::Decimal { scale, precision } => Schema::decimal(scale)
                .with_parameter("connect.decimal.precision", precision.to_string()),
            NumericKind::Int(8) => Schema::int8(),
            NumericKind::Int(16) => Schema::int16(),
            NumericKind::Int(32) => Schema::int32(),
            NumericKind::Int(_) => Schema::int64(),
            NumericKind::Float64 => Schema::float64(),
        }
    }

    /// The JSON value of a `numeric` given as exact text (`"-12.50"`, `"NaN"`, `"Infinity"`).
    pub(crate) fn value(self, text: &str) -> Result<serde_json::Value, NumericError> {
        match self {
            NumericKind::Decimal { scale, .. } => {
                let bytes = decimal_bytes(text, scale)?;
                Ok(serde_json::Value::String(
                    base64::engine::general_purpose::STANDARD.encode(bytes),
                ))
            }
            NumericKind::Int(bits) => {
                let v: i64 = text.parse().map_err(|_| NumericError::NotInteger {
                    text: text.to_owned(),
                    bits,
                })?;
                let max = i64::MAX >> (64 - u32::from(bits));
                if v > max || v < -max - 1 {
                    return Err(NumericError::IntegerOutOfRange {
                        text: text.to_owned(),
                        bits,
                    });
                }
                Ok(serde_json::Value::from(v))
            }
            // Java's Double.parseDouble reads "NaN" and "Infinity" as PostgreSQL writes them.
            NumericKind::Float64 => match text.parse::<f64>() {
                Ok(v) => Ok(super::decode::float_value(v, None)),
                Err(_) => Err(NumericError::NotNumber {
                    text: text.to_owned(),
                }),
            },
        }
    }
}

/// The big-endian two's-complement bytes of `text × 10^scale` (Java's `BigInteger.toByteArray` of the
/// unscaled value), as Kafka Connect's `Decimal.fromLogical` writes a `BigDecimal` of that scale.
///
/// # Errors
/// NaN or ±Infinity (no `Decimal` holds them), or more fraction digits than `scale` that are not zero
/// (the JDBC driver's `setScale` fails the same way).
pub(crate) fn decimal_bytes(text: &str, scale: i32) -> Result<Vec<u8>, NumericError> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if !digits.bytes().all(|b| b.is_ascii_digit() || b == b'.') || digits.is_empty() {
        return Err(NumericError::NoDecimalForm {
            text: text.to_owned(),
        });
    }
    let (int_part, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let mut unscaled: String = int_part.to_owned();
    if scale >= 0 {
        let scale = usize::try_from(scale).unwrap_or(0);
        if fraction.len() > scale {
            let (kept, dropped) = fraction.split_at(scale);
            if dropped.bytes().any(|b| b != b'0') {
                return Err(NumericError::TooManyFractionDigits {
                    text: text.to_owned(),
                    scale,
                });
            }
            unscaled.push_str(kept);
        } else {
            unscaled.push_str(fraction);
            unscaled.extend(std::iter::repeat_n('0', scale - fraction.len()));
        }
    } else {
        // A negative scale: the value must be a multiple of 10^-scale.
        let cut = usize::try_from(-scale).unwrap_or(0);
        let keep = unscaled.len().saturating_sub(cut);
        if fraction.bytes().any(|b| b != b'0') || unscaled[keep..].bytes().any(|b| b != b'0') {
            return Err(NumericError::NotMultiple {
                text: text.to_owned(),
                cut,
                scale,
            });
        }
        unscaled.truncate(keep);
    }
    Ok(twos_complement(negative, &magnitude(&unscaled)))
}

/// The big-endian bytes of a decimal digit string, without leading zeros (empty for zero).
fn magnitude(digits: &str) -> Vec<u8> {
    // Little-endian base-2^32 limbs, fed nine decimal digits at a time.
    let mut limbs: Vec<u32> = Vec::new();
    for chunk in digits.as_bytes().chunks(9) {
        let mut factor: u64 = 1;
        let mut add: u64 = 0;
        for &b in chunk {
            factor *= 10;
            add = add * 10 + u64::from(b - b'0');
        }
        let mut carry = add;
        for limb in &mut limbs {
            let v = u64::from(*limb) * factor + carry;
            *limb = (v & 0xffff_ffff) as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            limbs.push((carry & 0xffff_ffff) as u32);
            if carry >> 32 > 0 {
                limbs.push((carry >> 32) as u32);
            }
        }
    }
    let mut out: Vec<u8> = limbs.iter().rev().flat_map(|l| l.to_be_bytes()).collect();
    let first = out.iter().position(|&b| b != 0).unwrap_or(out.len());
    out.drain(..first);
    out
}

/// Java's `BigInteger.toByteArray`: the shortest two's-complement form (zero: one zero byte).
fn twos_complement(negative: bool, magnitude: &[u8]) -> Vec<u8> {
    if magnitude.is_empty() {
        return vec![0];
    }
    let mut out = magnitude.to_vec();
    if !negative {
        if out[0] & 0x80 != 0 {
            out.insert(0, 0);
        }
        return out;
    }
    for b in &mut out {
        *b = !*b;
    }
    for b in out.iter_mut().rev() {
        let (v, overflow) = b.overflowing_add(1);
        *b = v;
        if !overflow {
            break;
        }
    }
    if out[0] & 0x80 == 0 {
        out.insert(0, 0xff);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(text: &str, scale: i32) -> String {
        decimal_bytes(text, scale)
            .map(|b| base64::engine::general_purpose::STANDARD.encode(b))
            .unwrap_or_else(|e| e.to_string())
    }

    #[test]
    fn decimal_bytes_are_javas_big_integer_bytes() {
        // Kafka's DecimalTest / JsonConverterTest: 1.56 at scale 2 is unscaled 156 = 0x009C.
        assert_eq!(b64("1.56", 2), "AJw=");
        assert_eq!(decimal_bytes("0", 0), Ok(vec![0]));
        assert_eq!(decimal_bytes("0.00", 2), Ok(vec![0]));
        assert_eq!(decimal_bytes("127", 0), Ok(vec![0x7f]));
        assert_eq!(decimal_bytes("128", 0), Ok(vec![0x00, 0x80]));
        assert_eq!(decimal_bytes("-1", 0), Ok(vec![0xff]));
        assert_eq!(decimal_bytes("-128", 0), Ok(vec![0x80]));
        assert_eq!(decimal_bytes("-129", 0), Ok(vec![0xff, 0x7f]));
        assert_eq!(decimal_bytes("-255", 0), Ok(vec![0xff, 0x01]));
        assert_eq!(decimal_bytes("-256", 0), Ok(vec![0xff, 0x00]));
        assert_eq!(decimal_bytes("19.9", 2), Ok(vec![0x07, 0xc6]));
        assert_eq!(
            decimal_bytes("18446744073709551616", 0),
            Ok(vec![0x01, 0, 0, 0, 0, 0, 0, 0, 0])
        );
        assert_eq!(
            decimal_bytes("-9223372036854775808", 0),
            Ok(vec![0x80, 0, 0, 0, 0, 0, 0, 0])
        );
        assert_eq!(decimal_bytes("1200", -2), Ok(vec![12]));
        assert!(decimal_bytes("1250", -2).is_err());
        assert!(decimal_bytes("1.005", 2).is_err());
        assert_eq!(decimal_bytes("1.000", 2), Ok(vec![100]));
        assert!(decimal_bytes("NaN", 2).is_err());
        assert!(decimal_bytes("Infinity", 2).is_err());
    }

    #[test]
    fn mappings_follow_the_jdbc_source() {
        let typmod = |p: i32, s: i32| ((p << 16) | (s & 0x7ff)) + 4;
        use NumericKind::*;
        use NumericMapping as M;
        assert_eq!(
            NumericKind::of(typmod(10, 2), M::None),
            Decimal {
                scale: 2,
                precision: 10
            }
        );
        assert_eq!(
            NumericKind::of(-1, M::None),
            Decimal {
                scale: 127,
                precision: 0
            }
        );
        assert_eq!(NumericKind::of(typmod(2, 0), M::PrecisionOnly), Int(8));
        assert_eq!(NumericKind::of(typmod(4, 0), M::PrecisionOnly), Int(16));
        assert_eq!(NumericKind::of(typmod(9, 0), M::PrecisionOnly), Int(32));
        assert_eq!(NumericKind::of(typmod(18, 0), M::PrecisionOnly), Int(64));
        assert!(matches!(
            NumericKind::of(typmod(19, 0), M::PrecisionOnly),
            Decimal { .. }
        ));
        assert!(matches!(
            NumericKind::of(typmod(10, 2), M::PrecisionOnly),
            Decimal { .. }
        ));
        assert_eq!(NumericKind::of(typmod(10, 2), M::BestFit), Float64);
        assert_eq!(NumericKind::of(typmod(5, -2), M::BestFit), Int(32));
        assert!(matches!(
            NumericKind::of(typmod(20, 2), M::BestFit),
            Decimal { .. }
        ));
        assert!(matches!(NumericKind::of(-1, M::BestFit), Decimal { .. }));
        assert_eq!(
            NumericKind::of(typmod(20, 2), M::BestFitEagerDouble),
            Float64
        );
        assert_eq!(NumericKind::of(-1, M::BestFitEagerDouble), Float64);
        assert_eq!(precision_scale(typmod(5, -2)), Some((5, -2)));
        assert_eq!(Int(8).value("-128"), Ok(serde_json::json!(-128)));
        assert!(Int(8).value("128").is_err());
        assert_eq!(Float64.value("12.50"), Ok(serde_json::json!(12.5)));
        assert_eq!(Float64.value("NaN"), Ok(serde_json::json!("NaN")));
        assert_eq!(
            Float64.value("-Infinity"),
            Ok(serde_json::json!("-Infinity"))
        );
    }
}
