//! Kubernetes resource quantities (`"3"`, `"3k"`, `"1Gi"`, `"2e3"`, JSON numbers) read as exact integers.

use serde::de::{Deserializer, Visitor};
use std::fmt;

/// A quantity as it appeared on the wire; `as_int` says whether it is an exact integer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantity(pub String);

impl Quantity {
    /// The exact integer value, or `None` when the quantity is malformed, fractional or overflows.
    pub fn as_int(&self) -> Option<i64> {
        parse_int_quantity(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct QuantityVisitor;
        impl Visitor<'_> for QuantityVisitor {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a Kubernetes quantity (string or number)")
            }
            fn visit_str<E>(self, v: &str) -> Result<Quantity, E> {
                Ok(Quantity(v.to_owned()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Quantity, E> {
                Ok(Quantity(format!("{v}")))
            }
        }
        d.deserialize_any(QuantityVisitor)
    }
}

impl serde::Serialize for Quantity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

fn suffix_scale(suffix: &str) -> Option<(i128, i32)> {
    // (binary multiplier, decimal exponent)
    Some(match suffix {
        "" => (1, 0),
        "Ki" => (1 << 10, 0),
        "Mi" => (1 << 20, 0),
        "Gi" => (1 << 30, 0),
        "Ti" => (1 << 40, 0),
        "Pi" => (1 << 50, 0),
        "Ei" => (1 << 60, 0),
        "n" => (1, -9),
        "u" => (1, -6),
        "m" => (1, -3),
        "k" => (1, 3),
        "M" => (1, 6),
        "G" => (1, 9),
        "T" => (1, 12),
        "P" => (1, 15),
        "E" => (1, 18),
        _ => {
            let exp = suffix.strip_prefix(['e', 'E'])?;
            if exp.is_empty() {
                return None;
            }
            (1, exp.parse::<i32>().ok()?)
        }
    })
}

/// Parses a quantity and returns it only if it is an exact integer that fits in i64.
pub fn parse_int_quantity(text: &str) -> Option<i64> {
    let s = text.trim();
    let (negative, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let number_end = body.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(body.len());
    let (number, suffix) = body.split_at(number_end);
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() {
        return None;
    }
    if !whole.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (binary, mut exponent) = suffix_scale(suffix)?;
    let digits = format!("{whole}{frac}");
    let digits = digits.trim_start_matches('0');
    exponent -= frac.len() as i32;
    if digits.len() > 36 {
        return None;
    }
    let mut mantissa: i128 = if digits.is_empty() { 0 } else { digits.parse().ok()? };
    while exponent > 0 {
        mantissa = mantissa.checked_mul(10)?;
        exponent -= 1;
        if mantissa > i64::MAX as i128 * 10 {
            return None;
        }
    }
    mantissa = mantissa.checked_mul(binary)?;
    while exponent < 0 {
        if mantissa % 10 != 0 {
            return None;
        }
        mantissa /= 10;
        exponent += 1;
    }
    let value = if negative { -mantissa } else { mantissa };
    i64::try_from(value).ok()
}

/// A CPU quantity in millicores (`500m`, `2`, `1.5`).
pub fn cpu_milli(text: &str) -> Option<i64> {
    let t = text.trim();
    if let Some(m) = t.strip_suffix('m') {
        return parse_int_quantity(m);
    }
    if let Ok(f) = t.parse::<f64>() {
        return Some((f * 1000.0).round() as i64);
    }
    parse_int_quantity(t).map(|v| v.saturating_mul(1000))
}

/// A memory quantity in MiB (rounded up).
pub fn memory_mib(text: &str) -> Option<i64> {
    let bytes = parse_int_quantity(text).or_else(|| text.trim().parse::<f64>().ok().map(|f| f.ceil() as i64))?;
    Some((bytes + (1 << 20) - 1) >> 20)
}

#[cfg(test)]
mod tests {
    use super::parse_int_quantity as p;

    #[test]
    fn integers_and_suffixes() {
        assert_eq!(p("3000"), Some(3000));
        assert_eq!(p("3k"), Some(3000));
        assert_eq!(p("1Ki"), Some(1024));
        assert_eq!(p("2Gi"), Some(2 << 30));
        assert_eq!(p("1.5k"), Some(1500));
        assert_eq!(p("2e3"), Some(2000));
        assert_eq!(p("1000m"), Some(1));
        assert_eq!(p("-4"), Some(-4));
        assert_eq!(p("0"), Some(0));
    }

    #[test]
    fn non_integers_are_rejected() {
        assert_eq!(p("1500m"), None);
        assert_eq!(p("0.5"), None);
        assert_eq!(p("abc"), None);
        assert_eq!(p(""), None);
        assert_eq!(p("1X"), None);
        assert_eq!(p("99999999999999999999E"), None);
    }
}
