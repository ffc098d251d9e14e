//! The one grammar of policy options: `key=value` pairs set fields of a policy's serde config,
//! by the config's own field names and types, as a TOML file or a Python dict would. There is
//! no parser per config: each value is read as the type its field has (a count, a fraction, a
//! bool, `none` or `off` for an optional field, a variant name, a size such as `16GiB` for a
//! field of bytes), and the config's `Deserialize` checks the rest.
//!
//! Fields not named keep the value they had, so options apply over a preset (`hybrid-lru` is
//! Hibachi's config with one field set). A key the config does not have, or a value its field
//! cannot take, is an error that names the policy, the key and the value.

use serde::de::value::{Error, StrDeserializer};
use serde::de::{DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use serde::{forward_to_deserialize_any, Deserializer, Serialize};

use crate::error::PolicyError;

/// The `key=value` pairs of an option string (`bits=2,ways=8`), for `policy` (which names it in
/// errors); blanks around each are dropped.
pub fn pairs<'a>(policy: &str, options: &'a str) -> Result<Vec<(&'a str, &'a str)>, PolicyError> {
    let mut pairs = Vec::new();
    for pair in options.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| PolicyError::bad(policy, pair, "needs the form key=value"))?;
        pairs.push((key.trim(), value.trim()));
    }
    Ok(pairs)
}

/// `base` with `pairs` set, for `policy` (which names it in errors). Keys may be written with
/// `-` for `_`.
pub fn apply<C: Serialize + DeserializeOwned>(
    policy: &str,
    base: &C,
    pairs: &[(&str, &str)],
) -> Result<C, PolicyError> {
    let fields = match serde_json::to_value(base) {
        Ok(serde_json::Value::Object(fields)) => fields,
        _ => {
            let key = pairs.first().map_or("", |(k, _)| k);
            return Err(crate::error::unknown_key(policy, key));
        }
    };
    let mut texts: Vec<(String, String)> = Vec::new();
    for &(key, value) in pairs {
        let key = key.replace('-', "_");
        if !fields.contains_key(&key) {
            return Err(crate::error::unknown_key(policy, &key));
        }
        // Each value alone first, so an error names the key it came from.
        overlay::<C>(&fields, &[(key.clone(), value.to_string())])
            .map_err(|e| PolicyError::bad(policy, &key, format!("cannot be '{value}' ({e})")))?;
        texts.retain(|(k, _)| *k != key);
        texts.push((key, value.to_string()));
    }
    overlay::<C>(&fields, &texts).map_err(|e| PolicyError::bad(policy, "options", e.to_string()))
}

/// The config from `fields` (its serialized form) with `texts` in place of those fields.
fn overlay<C: DeserializeOwned>(
    fields: &serde_json::Map<String, serde_json::Value>,
    texts: &[(String, String)],
) -> Result<C, Error> {
    let entries = fields
        .iter()
        .map(|(key, value)| match texts.iter().find(|(k, _)| k == key) {
            Some((_, text)) => (key.clone(), Entry::Text(text.clone())),
            None => (key.clone(), Entry::Base(value.clone())),
        })
        .collect();
    C::deserialize(Fields { entries, next: None })
}

/// A field's value: as it was (serialized), or the text an option gave it.
enum Entry {
    Base(serde_json::Value),
    Text(String),
}

/// A config's fields as a map to deserialize from.
struct Fields {
    entries: Vec<(String, Entry)>,
    next: Option<Entry>,
}

impl<'de> Deserializer<'de> for Fields {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(mut self, visitor: V) -> Result<V::Value, Error> {
        self.entries.reverse();
        visitor.visit_map(self)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 u8 u16 u32 u64 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
        ignored_any
    }
}

impl<'de> MapAccess<'de> for Fields {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, entry)) = self.entries.pop() else { return Ok(None) };
        self.next = Some(entry);
        let key: StrDeserializer<Error> = key.as_str().into_deserializer();
        seed.deserialize(key).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        match self.next.take().expect("a value follows its key") {
            Entry::Base(value) => seed.deserialize(value).map_err(serde::de::Error::custom),
            Entry::Text(text) => seed.deserialize(Text(text)),
        }
    }
}

/// An option's value, read as the type its field asks for.
struct Text(String);

macro_rules! parse_as {
    ($($method:ident => $visit:ident: $ty:ty),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            match self.0.trim().parse::<$ty>() {
                Ok(value) => visitor.$visit(value),
                Err(_) => Err(serde::de::Error::invalid_value(
                    serde::de::Unexpected::Str(&self.0),
                    &visitor,
                )),
            }
        }
    )*};
}

impl<'de> Deserializer<'de> for Text {
    type Error = Error;

    /// `true` or `false`, or `on` and `off`.
    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0.trim() {
            "true" | "on" => visitor.visit_bool(true),
            "false" | "off" => visitor.visit_bool(false),
            other => {
                Err(serde::de::Error::custom(format!("'{other}' is not true, false, on or off")))
            }
        }
    }

    /// A field of no fixed type: a bool, a whole number, a number, or the text.
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let text = self.0.trim();
        if let Ok(value) = text.parse::<bool>() {
            return visitor.visit_bool(value);
        }
        if let Ok(value) = text.parse::<u64>() {
            return visitor.visit_u64(value);
        }
        if let Ok(value) = text.parse::<i64>() {
            return visitor.visit_i64(value);
        }
        if let Ok(value) = text.parse::<f64>() {
            return visitor.visit_f64(value);
        }
        visitor.visit_string(self.0)
    }

    parse_as! {
        deserialize_i8 => visit_i8: i8,
        deserialize_i16 => visit_i16: i16,
        deserialize_i32 => visit_i32: i32,
        deserialize_i64 => visit_i64: i64,
        deserialize_u8 => visit_u8: u8,
        deserialize_u16 => visit_u16: u16,
        deserialize_u32 => visit_u32: u32,
        deserialize_f32 => visit_f32: f32,
        deserialize_f64 => visit_f64: f64,
    }

    /// A count, or a size with its unit (`16GiB`) for a field of bytes.
    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let text = self.0.trim();
        match text.parse::<u64>().ok().or_else(|| tiercache_core::parse_size(text).ok()) {
            Some(value) => visitor.visit_u64(value),
            None => {
                Err(serde::de::Error::invalid_value(serde::de::Unexpected::Str(&self.0), &visitor))
            }
        }
    }

    /// `none` or `off` leave an optional field empty.
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0.trim().to_ascii_lowercase().as_str() {
            "none" | "off" => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    /// A variant by name, in any case.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let name = self.0.trim().to_ascii_lowercase();
        let name: serde::de::value::StringDeserializer<Error> = name.into_deserializer();
        visitor.visit_enum(name)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    forward_to_deserialize_any! {
        char str string bytes byte_buf unit unit_struct seq tuple tuple_struct map struct
        identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Order {
        Lru,
        Fifo,
    }

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Sample {
        count: u32,
        ratio: f64,
        on: bool,
        limit: Option<f64>,
        bytes: u64,
        order: Order,
    }

    impl Default for Sample {
        fn default() -> Sample {
            Sample { count: 2, ratio: 0.1, on: true, limit: Some(5.5), bytes: 0, order: Order::Lru }
        }
    }

    #[test]
    fn values_are_read_as_their_fields_types() {
        let pairs = [
            ("count", "7"),
            ("ratio", "0.25"),
            ("on", "false"),
            ("limit", "none"),
            ("bytes", "16KiB"),
            ("order", "FIFO"),
        ];
        let got = apply("sample", &Sample::default(), &pairs).unwrap();
        let want = Sample {
            count: 7,
            ratio: 0.25,
            on: false,
            limit: None,
            bytes: 16384,
            order: Order::Fifo,
        };
        assert_eq!(got, want);
    }

    #[test]
    fn fields_not_named_keep_their_values() {
        let base = Sample { limit: None, count: 9, ..Sample::default() };
        let got = apply("sample", &base, &[("ratio", "0.5")]).unwrap();
        assert_eq!(got, Sample { ratio: 0.5, ..base.clone() });
        let got = apply("sample", &base, &[("limit", "3")]).unwrap();
        assert_eq!(got.limit, Some(3.0));
    }

    #[test]
    fn errors_name_the_policy_the_key_and_the_value() {
        let err = apply("sample", &Sample::default(), &[("count", "two")]).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("sample") && text.contains("count") && text.contains("two"),
            "{text}"
        );
        let err = apply("sample", &Sample::default(), &[("colour", "red")]).unwrap_err();
        assert!(err.to_string().contains("colour"), "{err}");
        let err = apply("sample", &Sample::default(), &[("order", "random")]).unwrap_err();
        assert!(err.to_string().contains("random"), "{err}");
        let err = apply("sample", &Sample::default(), &[("count", "-1")]).unwrap_err();
        assert!(err.to_string().contains("-1"), "{err}");
    }

    #[test]
    fn a_config_without_fields_has_no_keys() {
        let err = apply("lru", &(), &[("p", "3")]).unwrap_err();
        assert!(err.to_string().contains("'p'"), "{err}");
    }
}
