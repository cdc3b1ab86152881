//! Java's number semantics where Kafka Connect's output depends on them: `Float.toString` /
//! `Double.toString`, and Kafka Connect's `Decimal` (a `java.math.BigDecimal` held as the
//! unscaled value's big-endian two's-complement bytes) with its `toString`, `longValue` and
//! `doubleValue`.

/// Decimals longer than this many bytes (about 2,400 digits) are refused rather than converted in
/// quadratic time.
const MAX_DECIMAL_BYTES: usize = 1024;

/// A `java.math.BigDecimal`: sign, unscaled magnitude as decimal digits (no leading zeros, `"0"`
/// for zero), scale.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BigDecimal {
    negative: bool,
    digits: String,
    scale: i32,
}

/// A Decimal longer than Ferry converts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("Decimal of {0} bytes is longer than the {MAX_DECIMAL_BYTES} bytes Ferry converts")]
pub(crate) struct DecimalTooLong(pub(crate) usize);

impl BigDecimal {
    /// Decodes Kafka Connect's Decimal representation: the unscaled value's big-endian
    /// two's-complement bytes, and the schema's `scale`.
    ///
    /// # Errors
    /// More than [`MAX_DECIMAL_BYTES`] bytes.
    pub(crate) fn from_twos_complement(bytes: &[u8], scale: i32) -> Result<Self, DecimalTooLong> {
        if bytes.len() > MAX_DECIMAL_BYTES {
            return Err(DecimalTooLong(bytes.len()));
        }
        let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
        let mut magnitude = bytes.to_vec();
        if negative {
            // Two's complement: invert and add one.
            for b in &mut magnitude {
                *b = !*b;
            }
            for b in magnitude.iter_mut().rev() {
                let (sum, carry) = b.overflowing_add(1);
                *b = sum;
                if !carry {
                    break;
                }
            }
        }
        Ok(Self {
            negative,
            digits: to_decimal(&magnitude),
            scale,
        })
    }

    /// `BigDecimal.toString()`: plain notation unless the scale is negative or the number is
    /// smaller than 1e-6, scientific (`1.23E+5`) otherwise.
    pub(crate) fn to_java_string(&self) -> String {
        let sign = if self.negative { "-" } else { "" };
        let digits = &self.digits;
        let len = i64::try_from(digits.len()).unwrap_or(i64::MAX);
        let scale = i64::from(self.scale);
        if scale == 0 {
            return format!("{sign}{digits}");
        }
        let adjusted = -scale + (len - 1);
        if scale > 0 && adjusted >= -6 {
            let point = len - scale;
            return if point > 0 {
                let (int, frac) = digits.split_at(usize::try_from(point).unwrap_or(0));
                format!("{sign}{int}.{frac}")
            } else {
                let zeros = "0".repeat(usize::try_from(-point).unwrap_or(0));
                format!("{sign}0.{zeros}{digits}")
            };
        }
        let (first, rest) = digits.split_at(1);
        let point = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exp_sign = if adjusted >= 0 { "+" } else { "" };
        format!("{sign}{first}{point}E{exp_sign}{adjusted}")
    }

    /// `BigDecimal.longValue()`: the low 64 bits of the value truncated toward zero.
    pub(crate) fn long_value(&self) -> i64 {
        let keep = if self.scale > 0 {
            let scale = usize::try_from(self.scale).unwrap_or(usize::MAX);
            &self.digits[..self.digits.len().saturating_sub(scale)]
        } else {
            self.digits.as_str()
        };
        let mut low: u64 = 0;
        for d in keep.bytes() {
            low = low.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
        }
        // A negative scale multiplies by 10 per step; after 64 steps the low bits are all zero.
        for _ in 0..(-i64::from(self.scale)).clamp(0, 64) {
            low = low.wrapping_mul(10);
        }
        let low = low.cast_signed();
        if self.negative {
            low.wrapping_neg()
        } else {
            low
        }
    }

    /// `BigDecimal.intValue()`: the low 32 bits of [`long_value`](Self::long_value).
    pub(crate) fn int_value(&self) -> i32 {
        self.long_value() as i32
    }

    /// `BigDecimal.doubleValue()` (correctly rounded).
    pub(crate) fn double_value(&self) -> f64 {
        self.scientific().parse().unwrap_or(f64::NAN)
    }

    /// `BigDecimal.floatValue()` (correctly rounded).
    pub(crate) fn float_value(&self) -> f32 {
        self.scientific().parse().unwrap_or(f32::NAN)
    }

    fn scientific(&self) -> String {
        let sign = if self.negative { "-" } else { "" };
        format!("{sign}{}e{}", self.digits, -i64::from(self.scale))
    }
}

/// The decimal digits of a big-endian unsigned magnitude.
fn to_decimal(magnitude: &[u8]) -> String {
    const CHUNK: u64 = 1_000_000_000;
    let mut number: Vec<u8> = magnitude.iter().copied().skip_while(|b| *b == 0).collect();
    let mut chunks: Vec<u64> = Vec::new();
    while !number.is_empty() {
        // Divide by 10^9, keeping the remainder as the next nine digits.
        let mut remainder: u64 = 0;
        let mut quotient = Vec::with_capacity(number.len());
        for &b in &number {
            let current = remainder * 256 + u64::from(b);
            let q = current / CHUNK;
            remainder = current % CHUNK;
            if !(quotient.is_empty() && q == 0) {
                quotient.push(u8::try_from(q).unwrap_or(u8::MAX));
            }
        }
        chunks.push(remainder);
        number = quotient;
    }
    let Some((last, rest)) = chunks.split_last() else {
        return "0".to_owned();
    };
    let mut out = last.to_string();
    for chunk in rest.iter().rev() {
        out.push_str(&format!("{chunk:09}"));
    }
    out
}

/// Java's `Double.toString`.
pub(crate) fn java_double_string(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    java_layout(
        &format!("{value:e}"),
        value == 0.0 || (1e-3..1e7).contains(&value.abs()),
    )
}

/// Java's `Float.toString`.
pub(crate) fn java_float_string(value: f32) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    java_layout(
        &format!("{value:e}"),
        value == 0.0 || (1e-3..1e7).contains(&value.abs()),
    )
}

/// Lays out Rust's shortest `{:e}` form (`-1.2345e3`) the way Java does: plain with at least one
/// fraction digit in [1e-3, 1e7), `d.dddE±n` otherwise.
fn java_layout(scientific: &str, plain: bool) -> String {
    let (sign, body) = match scientific.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", scientific),
    };
    let (mantissa, exp) = body.split_once('e').unwrap_or((body, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let (first, rest) = digits.split_at(1.min(digits.len()));
    if !plain {
        let rest = if rest.is_empty() { "0" } else { rest };
        return format!("{sign}{first}.{rest}E{exp}");
    }
    if exp < 0 {
        let zeros = "0".repeat(usize::try_from(-exp - 1).unwrap_or(0));
        return format!("{sign}0.{zeros}{digits}");
    }
    let int_len = usize::try_from(exp + 1).unwrap_or(0);
    if digits.len() <= int_len {
        let zeros = "0".repeat(int_len - digits.len());
        format!("{sign}{digits}{zeros}.0")
    } else {
        let (int, frac) = digits.split_at(int_len);
        format!("{sign}{int}.{frac}")
    }
}

/// A JSON number for a Java `float`: the shortest decimal that reads back as the same `float`
/// (as Jackson writes it), not the `f64` widening's digits.
pub(crate) fn float32_json(value: f32) -> Option<serde_json::Value> {
    let shortest: f64 = value.to_string().parse().ok()?;
    serde_json::Number::from_f64(shortest).map(serde_json::Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decimal(unscaled: i128, scale: i32) -> BigDecimal {
        let bytes = unscaled.to_be_bytes();
        // Minimal two's complement, as Java's BigInteger.toByteArray writes it.
        let mut start = 0;
        while start < 15
            && ((bytes[start] == 0 && bytes[start + 1] & 0x80 == 0)
                || (bytes[start] == 0xff && bytes[start + 1] & 0x80 != 0))
        {
            start += 1;
        }
        BigDecimal::from_twos_complement(&bytes[start..], scale).unwrap()
    }

    #[test]
    fn decimal_strings_match_big_decimal_to_string() {
        assert_eq!(decimal(42, 0).to_java_string(), "42");
        assert_eq!(decimal(1982, 0).to_java_string(), "1982");
        assert_eq!(decimal(-12345, 2).to_java_string(), "-123.45");
        assert_eq!(decimal(5, 3).to_java_string(), "0.005");
        assert_eq!(decimal(5, 10).to_java_string(), "5E-10");
        assert_eq!(decimal(123, -2).to_java_string(), "1.23E+4");
        assert_eq!(decimal(0, 2).to_java_string(), "0.00");
        assert_eq!(
            decimal(i128::from(i64::MAX) * 1000 + 7, 0).to_java_string(),
            "9223372036854775807007"
        );
        assert_eq!(decimal(-128, 0).to_java_string(), "-128");
    }

    #[test]
    fn decimal_numbers_truncate_and_wrap_like_java() {
        // CastTest.castLogicalToPrimitive: (long) Integer.MAX_VALUE + 1 as an int is MIN_VALUE.
        assert_eq!(decimal(i128::from(i32::MAX) + 1, 0).int_value(), i32::MIN);
        assert_eq!(decimal(-12_345, 2).long_value(), -123);
        assert_eq!(decimal(12_399, 2).long_value(), 123);
        assert_eq!(decimal(7, -2).long_value(), 700);
        assert_eq!(decimal(-12_345, 2).double_value(), -123.45);
        assert_eq!(decimal(1, 1).float_value(), 0.1_f32);
    }

    #[test]
    fn java_float_strings() {
        assert_eq!(java_double_string(42.0), "42.0");
        assert_eq!(java_double_string(-64.0), "-64.0");
        assert_eq!(java_double_string(0.0), "0.0");
        assert_eq!(java_double_string(1.5e-3), "0.0015");
        assert_eq!(java_double_string(1e7), "1.0E7");
        assert_eq!(java_double_string(1.25e-5), "1.25E-5");
        assert_eq!(
            java_double_string(9.223372036854776E18),
            "9.223372036854776E18"
        );
        assert_eq!(java_double_string(1234567.5), "1234567.5");
        assert_eq!(java_float_string(0.1), "0.1");
        assert_eq!(java_float_string(32.0), "32.0");
    }

    #[test]
    fn float32_json_keeps_the_short_form() {
        assert_eq!(float32_json(0.1).unwrap().to_string(), "0.1");
        assert_eq!(float32_json(f32::NAN), None);
    }
}
