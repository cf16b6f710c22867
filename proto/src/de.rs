//! Typed values out of JSON, with errors that name the field and the problem.
//!
//! serde's derives describe every request, reply and event; this module is the deserializer
//! they run against. It reads a `serde_json::Value` and reports what went wrong as a
//! [`FieldError`]: which field (a path such as `expect.revision` or `input[1].key`) and what
//! was wrong with it — missing, unknown, null where a value guards something, of the wrong
//! type, or refused by the field's own validator. Those are the messages the protocol has
//! always given (spec §6.1: bad input gets a clear error naming the input and the problem).

use std::fmt;

use serde::de::{self, DeserializeOwned, Expected, IntoDeserializer, Unexpected, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

/// Deserializes `T` from `value`, naming the field of any error.
pub fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, FieldError> {
    T::deserialize(ValueDe(value))
}

/// For a field that guards something: absent is `None`, and a present value must be valid —
/// `null` is an error naming the field, never read as "absent".
///
/// Use with `#[serde(default, deserialize_with = "crate::de::present")]`.
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: de::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// For a collection field where `null` means empty, as absent does.
///
/// Use with `#[serde(default, deserialize_with = "crate::de::null_is_default")]`.
pub fn null_is_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: de::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Where in a value an error is: object keys and array indexes, outermost first.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// What was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// A required field is absent (the field's own name).
    Missing(String),
    /// A field the type does not have.
    Unknown {
        /// The field as given.
        field: String,
        /// The fields the type has.
        expected: Vec<&'static str>,
    },
    /// `null` where a value is required.
    Null {
        /// What a valid value is ("a string").
        wanted: String,
    },
    /// A value of the wrong type or out of range.
    Type {
        /// What a valid value is.
        wanted: String,
        /// What was given, when it helps ("integer `70000`").
        got: Option<String>,
    },
    /// The field's own validator refused the value.
    Refused(String),
}

/// A value that is not what its type says, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    path: Vec<Step>,
    problem: Problem,
}

impl FieldError {
    /// The error of a validator: `message` is shown as it is, after the field's name.
    pub fn refused(message: impl Into<String>) -> FieldError {
        FieldError {
            path: Vec::new(),
            problem: Problem::Refused(message.into()),
        }
    }

    /// What was wrong.
    pub fn problem(&self) -> &Problem {
        &self.problem
    }

    /// The path of the field (`expect.revision`), empty for the value itself.
    pub fn path(&self) -> String {
        let mut out = String::new();
        for step in &self.path {
            match step {
                Step::Key(key) if out.is_empty() => out.push_str(key),
                Step::Key(key) => {
                    out.push('.');
                    out.push_str(key);
                }
                Step::Index(index) => out.push_str(&format!("[{index}]")),
            }
        }
        out
    }

    /// The same error, one level further in: under key `key` of the enclosing object.
    pub fn under_key(mut self, key: &str) -> FieldError {
        self.path.insert(0, Step::Key(key.to_string()));
        self
    }

    fn under(mut self, step: Step) -> FieldError {
        self.path.insert(0, step);
        self
    }

    fn joined(&self, field: &str) -> String {
        let path = self.path();
        if path.is_empty() {
            field.to_string()
        } else {
            format!("{path}.{field}")
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path();
        match &self.problem {
            Problem::Missing(field) => write!(f, "missing field {:?}", self.joined(field)),
            Problem::Unknown { field, expected } => write!(
                f,
                "unknown field {:?} (expected {})",
                self.joined(field),
                expected.join(", ")
            ),
            Problem::Null { wanted } => {
                write!(
                    f,
                    "field {path:?} is null: give {wanted}, or leave the field out"
                )
            }
            Problem::Type { wanted, got } if path.is_empty() => match got {
                Some(got) => write!(f, "expected {wanted}, not {got}"),
                None => write!(f, "expected {wanted}"),
            },
            Problem::Type { wanted, got } => match got {
                Some(got) => write!(f, "field {path:?} must be {wanted}, not {got}"),
                None => write!(f, "field {path:?} must be {wanted}"),
            },
            Problem::Refused(message) if path.is_empty() => f.write_str(message),
            Problem::Refused(message) => write!(f, "field {path:?}: {message}"),
        }
    }
}

impl std::error::Error for FieldError {}

/// serde's name for what it expected, in the protocol's words.
fn wanted(expected: &dyn Expected) -> String {
    let text = expected.to_string();
    match text.as_str() {
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "a non-negative integer".into(),
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "an integer".into(),
        "a boolean" => "true or false".into(),
        "a sequence" => "an array".into(),
        "a map" => "an object".into(),
        other if other.starts_with("struct ") => "an object".into(),
        other => other.to_string(),
    }
}

impl de::Error for FieldError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        FieldError::refused(message.to_string())
    }

    fn invalid_type(unexpected: Unexpected<'_>, expected: &dyn Expected) -> Self {
        let problem = match unexpected {
            Unexpected::Unit | Unexpected::Option => Problem::Null {
                wanted: wanted(expected),
            },
            _ => Problem::Type {
                wanted: wanted(expected),
                got: None,
            },
        };
        FieldError {
            path: Vec::new(),
            problem,
        }
    }

    fn invalid_value(unexpected: Unexpected<'_>, expected: &dyn Expected) -> Self {
        FieldError {
            path: Vec::new(),
            problem: Problem::Type {
                wanted: wanted(expected),
                got: Some(unexpected.to_string()),
            },
        }
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        FieldError::refused(format!("{variant:?} is not one of {}", expected.join(", ")))
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        FieldError {
            path: Vec::new(),
            problem: Problem::Unknown {
                field: field.to_string(),
                expected: expected.to_vec(),
            },
        }
    }

    fn missing_field(field: &'static str) -> Self {
        FieldError {
            path: Vec::new(),
            problem: Problem::Missing(field.to_string()),
        }
    }
}

/// A deserializer over a borrowed JSON value whose errors carry their path.
#[derive(Clone, Copy)]
pub struct ValueDe<'a>(pub &'a Value);

impl<'de> IntoDeserializer<'de, FieldError> for ValueDe<'de> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> de::Deserializer<'de> for ValueDe<'de> {
    type Error = FieldError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    visitor.visit_i64(i)
                } else {
                    visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(items) => visitor.visit_seq(Seq {
                items: items.iter(),
                index: 0,
            }),
            Value::Object(map) => visitor.visit_map(Fields {
                entries: map.iter(),
                current: None,
            }),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, FieldError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, FieldError> {
        match self.0 {
            Value::String(s) => visitor.visit_enum(s.as_str().into_deserializer()),
            Value::Object(map) if map.len() == 1 => {
                let Some((key, value)) = map.iter().next() else {
                    return Err(de::Error::invalid_length(0, &"one key"));
                };
                visitor.visit_enum(Variant { key, value })
            }
            Value::Object(map) => Err(FieldError::refused(format!(
                "must be an object of exactly one key, not {}",
                map.len()
            ))),
            other => Err(<FieldError as de::Error>::invalid_type(
                unexpected(other),
                &visitor,
            )),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

/// What a value is, for an error.
fn unexpected(value: &Value) -> Unexpected<'_> {
    match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => n
            .as_u64()
            .map(Unexpected::Unsigned)
            .or_else(|| n.as_i64().map(Unexpected::Signed))
            .unwrap_or(Unexpected::Float(n.as_f64().unwrap_or(f64::NAN))),
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

struct Seq<'a> {
    items: std::slice::Iter<'a, Value>,
    index: usize,
}

impl<'de> de::SeqAccess<'de> for Seq<'de> {
    type Error = FieldError;

    fn next_element_seed<T: de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, FieldError> {
        let Some(item) = self.items.next() else {
            return Ok(None);
        };
        let index = self.index;
        self.index += 1;
        seed.deserialize(ValueDe(item))
            .map(Some)
            .map_err(|err| err.under(Step::Index(index)))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct Fields<'a> {
    entries: serde_json::map::Iter<'a>,
    current: Option<(&'a String, &'a Value)>,
}

impl<'de> de::MapAccess<'de> for Fields<'de> {
    type Error = FieldError;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, FieldError> {
        let Some(entry) = self.entries.next() else {
            return Ok(None);
        };
        self.current = Some(entry);
        seed.deserialize(de::value::BorrowedStrDeserializer::new(entry.0))
            .map(Some)
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, FieldError> {
        let Some((key, value)) = self.current.take() else {
            return Err(FieldError::refused("a value without its key"));
        };
        seed.deserialize(ValueDe(value))
            .map_err(|err| err.under(Step::Key(key.clone())))
    }
}

struct Variant<'a> {
    key: &'a String,
    value: &'a Value,
}

impl<'de> de::EnumAccess<'de> for Variant<'de> {
    type Error = FieldError;
    type Variant = Self;

    fn variant_seed<V: de::DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Self), FieldError> {
        let variant = seed.deserialize(de::value::BorrowedStrDeserializer::new(self.key))?;
        Ok((variant, self))
    }
}

impl<'de> de::VariantAccess<'de> for Variant<'de> {
    type Error = FieldError;

    fn unit_variant(self) -> Result<(), FieldError> {
        match self.value {
            Value::Null => Ok(()),
            _ => Err(FieldError::refused("takes no value").under(Step::Key(self.key.clone()))),
        }
    }

    fn newtype_variant_seed<T: de::DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, FieldError> {
        seed.deserialize(ValueDe(self.value))
            .map_err(|err| err.under(Step::Key(self.key.clone())))
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, FieldError> {
        de::Deserializer::deserialize_seq(ValueDe(self.value), visitor)
            .map_err(|err| err.under(Step::Key(self.key.clone())))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, FieldError> {
        de::Deserializer::deserialize_map(ValueDe(self.value), visitor)
            .map_err(|err| err.under(Step::Key(self.key.clone())))
    }
}

/// An object's fields, for the few places that take an object whose keys are data.
pub type Object = Map<String, Value>;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        #[serde(default, deserialize_with = "present")]
        revision: Option<u64>,
        name: Option<String>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        session: String,
        inner: Option<Inner>,
        list: Option<Vec<u16>>,
        #[serde(default)]
        flag: Option<bool>,
    }

    fn err(value: Value) -> String {
        from_value::<Outer>(&value).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_field_by_its_path() {
        assert_eq!(err(json!({})), "missing field \"session\"");
        assert_eq!(
            err(json!({"session": 3})),
            "field \"session\" must be a string"
        );
        assert_eq!(
            err(json!({"session": "a", "inner": {"revison": 1}})),
            "unknown field \"inner.revison\" (expected revision, name)"
        );
        assert_eq!(
            err(json!({"session": "a", "inner": {"revision": null}})),
            "field \"inner.revision\" is null: give a non-negative integer, or leave the field out"
        );
        assert_eq!(
            err(json!({"session": "a", "list": [1, 70000]})),
            "field \"list[1]\" must be a non-negative integer, not integer `70000`"
        );
        assert_eq!(
            err(json!({"session": "a", "flag": "yes"})),
            "field \"flag\" must be true or false"
        );
        assert_eq!(
            err(json!({"session": "a", "inner": 5})),
            "field \"inner\" must be an object"
        );
    }

    #[test]
    fn null_is_absent_for_plain_options() {
        let outer: Outer =
            from_value(&json!({"session": "a", "inner": null, "flag": null})).unwrap();
        assert!(outer.inner.is_none() && outer.flag.is_none());
    }
}
