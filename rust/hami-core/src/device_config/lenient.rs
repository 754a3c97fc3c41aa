//! `yaml.v2`'s decoding rules where they differ from YAML 1.2's: any scalar decodes into a
//! string as its text, YAML 1.1's `yes`/`no`/`on`/`off` are booleans, a float with an integer
//! field truncates, and `null` leaves the field at its zero value.

use serde::de::{self, Deserializer, Visitor};
use serde_yaml::Value;
use std::fmt;

/// Drops every `key: null` (`yaml.v2` leaves such a field at its zero value) and every `null` item.
pub fn without_nulls(value: Value) -> Value {
    match value {
        Value::Mapping(map) => {
            Value::Mapping(map.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, without_nulls(v))).collect())
        }
        Value::Sequence(items) => Value::Sequence(items.into_iter().map(without_nulls).collect()),
        Value::Tagged(tagged) => without_nulls(tagged.value),
        other => other,
    }
}

/// The message of a decoding error without serde_yaml's position suffix (the field names it).
pub fn describe(e: &serde_yaml::Error) -> String {
    let message = e.to_string();
    message.split(" at line ").next().unwrap_or(&message).to_owned()
}

/// A string field: any scalar, as its text.
pub fn text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    d.deserialize_any(TextVisitor)
}

/// A list of strings, each any scalar as its text.
pub fn texts<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(serde::Deserialize)]
    struct Item(#[serde(deserialize_with = "text")] String);
    let items: Vec<Item> = serde::Deserialize::deserialize(d)?;
    Ok(items.into_iter().map(|i| i.0).collect())
}

struct TextVisitor;

impl Visitor<'_> for TextVisitor {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_owned())
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
        Ok(v.to_string())
    }
}

/// A boolean field: YAML 1.1's spellings as well as `true`/`false`.
pub fn boolean<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    d.deserialize_any(BoolVisitor)
}

struct BoolVisitor;

impl Visitor<'_> for BoolVisitor {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a boolean (true/false, yes/no, on/off)")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        Ok(v)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        match v {
            "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "true" | "True" | "TRUE" => Ok(true),
            "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "false" | "False" | "FALSE" => Ok(false),
            _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
        }
    }
}

/// A 32-bit integer field (`int32` in HAMi): out of range is an error, a float truncates.
pub fn int32<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    let wide = d.deserialize_any(IntVisitor)?;
    i32::try_from(wide).map_err(|_| de::Error::custom(format!("{wide} does not fit a 32-bit integer")))
}

/// A 64-bit integer field (`int64` in HAMi).
pub fn int64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    d.deserialize_any(IntVisitor)
}

struct IntVisitor;

impl Visitor<'_> for IntVisitor {
    type Value = i64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an integer")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
        Ok(v)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
        i64::try_from(v).map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
        if v.is_finite() && v.abs() < 9.2e18 {
            Ok(v.trunc() as i64)
        } else {
            Err(E::invalid_value(de::Unexpected::Float(v), &self))
        }
    }
}

/// An optional number the device plugin reads (`*float64`, `*uint`, ...): checked for type only.
pub fn number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    d.deserialize_any(NumberVisitor).map(Some)
}

struct NumberVisitor;

impl Visitor<'_> for NumberVisitor {
    type Value = f64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }
}

/// An optional boolean the device plugin reads (`*bool`).
pub fn maybe_boolean<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    boolean(d).map(Some)
}
