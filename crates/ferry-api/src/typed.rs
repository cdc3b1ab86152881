//! Typed partitions and offsets: serde types to and from [`ConnectMap`].
//!
//! The top level must be a struct or a map with string keys; each field must be a Kafka Connect
//! primitive. `Option::None` and unit become null. Unsigned integers become the narrowest signed width
//! that holds every value of their type (`u8` → int16, `u32` → int64); a `u64` above `i64::MAX` is
//! rejected. Enum unit variants become their name as a string; `Vec<u8>` becomes bytes.

use base64::Engine as _;
use serde::de::{self, IntoDeserializer};
use serde::ser::{self, Impossible, Serialize};

use crate::error::ValueError;
use crate::value::{ConnectMap, Value};

pub(crate) fn to_map<T: Serialize + ?Sized>(value: &T) -> Result<ConnectMap, ValueError> {
    value.serialize(MapSerializer).map_err(|e| e.0)
}

pub(crate) fn from_map<T: de::DeserializeOwned>(map: &ConnectMap) -> Result<T, ValueError> {
    T::deserialize(MapDeserializer { map }).map_err(|e| e.0)
}

/// serde's error type wrapping our [`ValueError`].
#[derive(Debug)]
struct SerdeError(ValueError);

impl std::fmt::Display for SerdeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}
impl std::error::Error for SerdeError {}
impl ser::Error for SerdeError {
    fn custom<M: std::fmt::Display>(msg: M) -> Self {
        SerdeError(ValueError::new("", msg.to_string()))
    }
}
impl de::Error for SerdeError {
    fn custom<M: std::fmt::Display>(msg: M) -> Self {
        SerdeError(ValueError::new("", msg.to_string()))
    }
    fn missing_field(field: &'static str) -> Self {
        SerdeError(ValueError::new(field, "missing field"))
    }
}

fn top_level_error(what: &str) -> SerdeError {
    SerdeError(ValueError::new(
        "",
        format!("a partition or offset must be a struct or a map with string keys, not {what}"),
    ))
}

// ---------------------------------------------------------------------------------------------
// Serialization
// ---------------------------------------------------------------------------------------------

struct MapSerializer;

struct FieldsSerializer {
    map: ConnectMap,
    pending_key: Option<String>,
}

impl FieldsSerializer {
    fn put(&mut self, key: String, value: &(impl Serialize + ?Sized)) -> Result<(), SerdeError> {
        let v = value
            .serialize(ValueSerializer)
            .map_err(|e| SerdeError(e.0.with_key(&key)))?;
        self.map.insert(key, v).map_err(SerdeError)
    }
}

macro_rules! reject_top_level {
    ($($method:ident($($arg:ty),*) -> $ret:ty: $what:expr;)*) => {
        $(fn $method(self, $(_: $arg),*) -> Result<$ret, SerdeError> {
            Err(top_level_error($what))
        })*
    };
}

impl ser::Serializer for MapSerializer {
    type Ok = ConnectMap;
    type Error = SerdeError;
    type SerializeSeq = Impossible<ConnectMap, SerdeError>;
    type SerializeTuple = Impossible<ConnectMap, SerdeError>;
    type SerializeTupleStruct = Impossible<ConnectMap, SerdeError>;
    type SerializeTupleVariant = Impossible<ConnectMap, SerdeError>;
    type SerializeMap = FieldsSerializer;
    type SerializeStruct = FieldsSerializer;
    type SerializeStructVariant = Impossible<ConnectMap, SerdeError>;

    reject_top_level! {
        serialize_bool(bool) -> ConnectMap: "a boolean";
        serialize_i8(i8) -> ConnectMap: "an integer";
        serialize_i16(i16) -> ConnectMap: "an integer";
        serialize_i32(i32) -> ConnectMap: "an integer";
        serialize_i64(i64) -> ConnectMap: "an integer";
        serialize_u8(u8) -> ConnectMap: "an integer";
        serialize_u16(u16) -> ConnectMap: "an integer";
        serialize_u32(u32) -> ConnectMap: "an integer";
        serialize_u64(u64) -> ConnectMap: "an integer";
        serialize_f32(f32) -> ConnectMap: "a float";
        serialize_f64(f64) -> ConnectMap: "a float";
        serialize_char(char) -> ConnectMap: "a char";
        serialize_str(&str) -> ConnectMap: "a string";
        serialize_bytes(&[u8]) -> ConnectMap: "bytes";
        serialize_none() -> ConnectMap: "None";
        serialize_unit() -> ConnectMap: "unit";
        serialize_unit_struct(&'static str) -> ConnectMap: "a unit struct";
        serialize_unit_variant(&'static str, u32, &'static str) -> ConnectMap: "an enum variant";
        serialize_seq(Option<usize>) -> Self::SerializeSeq: "a sequence";
        serialize_tuple(usize) -> Self::SerializeTuple: "a tuple";
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct: "a tuple struct";
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Self::SerializeTupleVariant: "an enum variant";
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Self::SerializeStructVariant: "an enum variant";
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<ConnectMap, SerdeError> {
        value.serialize(self)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<ConnectMap, SerdeError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<ConnectMap, SerdeError> {
        Err(top_level_error("an enum variant"))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<FieldsSerializer, SerdeError> {
        Ok(FieldsSerializer {
            map: ConnectMap::new(),
            pending_key: None,
        })
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<FieldsSerializer, SerdeError> {
        self.serialize_map(None)
    }
}

impl ser::SerializeMap for FieldsSerializer {
    type Ok = ConnectMap;
    type Error = SerdeError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), SerdeError> {
        match key.serialize(ValueSerializer)? {
            Value::String(s) => {
                self.pending_key = Some(s);
                Ok(())
            }
            other => Err(SerdeError(ValueError::new(
                other.to_string(),
                format!("map keys must be strings, not {}", other.type_name()),
            ))),
        }
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SerdeError> {
        let key = self
            .pending_key
            .take()
            .ok_or_else(|| SerdeError(ValueError::new("", "map value without a key")))?;
        self.put(key, value)
    }
    fn end(self) -> Result<ConnectMap, SerdeError> {
        Ok(self.map)
    }
}

impl ser::SerializeStruct for FieldsSerializer {
    type Ok = ConnectMap;
    type Error = SerdeError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), SerdeError> {
        self.put(key.to_owned(), value)
    }
    fn end(self) -> Result<ConnectMap, SerdeError> {
        Ok(self.map)
    }
}

/// Serializes one field value. Errors carry an empty key; [`FieldsSerializer::put`] fills it in.
struct ValueSerializer;

fn nested(what: &str) -> SerdeError {
    SerdeError(ValueError::new(
        "",
        format!(
            "{what} is not allowed: values must be null, boolean, integer, float, string or bytes"
        ),
    ))
}

macro_rules! reject_nested {
    ($($method:ident($($arg:ty),*) -> $ret:ty: $what:expr;)*) => {
        $(fn $method(self, $(_: $arg),*) -> Result<$ret, SerdeError> {
            Err(nested($what))
        })*
    };
}

impl ser::Serializer for ValueSerializer {
    type Ok = Value;
    type Error = SerdeError;
    type SerializeSeq = BytesSerializer;
    type SerializeTuple = Impossible<Value, SerdeError>;
    type SerializeTupleStruct = Impossible<Value, SerdeError>;
    type SerializeTupleVariant = Impossible<Value, SerdeError>;
    type SerializeMap = Impossible<Value, SerdeError>;
    type SerializeStruct = Impossible<Value, SerdeError>;
    type SerializeStructVariant = Impossible<Value, SerdeError>;

    fn serialize_bool(self, v: bool) -> Result<Value, SerdeError> {
        Ok(Value::Bool(v))
    }
    fn serialize_i8(self, v: i8) -> Result<Value, SerdeError> {
        Ok(Value::Int8(v))
    }
    fn serialize_i16(self, v: i16) -> Result<Value, SerdeError> {
        Ok(Value::Int16(v))
    }
    fn serialize_i32(self, v: i32) -> Result<Value, SerdeError> {
        Ok(Value::Int32(v))
    }
    fn serialize_i64(self, v: i64) -> Result<Value, SerdeError> {
        Ok(Value::Int64(v))
    }
    fn serialize_u8(self, v: u8) -> Result<Value, SerdeError> {
        Ok(Value::Int16(v.into()))
    }
    fn serialize_u16(self, v: u16) -> Result<Value, SerdeError> {
        Ok(Value::Int32(v.into()))
    }
    fn serialize_u32(self, v: u32) -> Result<Value, SerdeError> {
        Ok(Value::Int64(v.into()))
    }
    fn serialize_u64(self, v: u64) -> Result<Value, SerdeError> {
        i64::try_from(v).map(Value::Int64).map_err(|_| {
            SerdeError(ValueError::new(
                "",
                format!("{v} does not fit a 64-bit signed integer"),
            ))
        })
    }
    fn serialize_f32(self, v: f32) -> Result<Value, SerdeError> {
        Ok(Value::Float32(v))
    }
    fn serialize_f64(self, v: f64) -> Result<Value, SerdeError> {
        Ok(Value::Float64(v))
    }
    fn serialize_char(self, v: char) -> Result<Value, SerdeError> {
        Ok(Value::String(v.to_string()))
    }
    fn serialize_str(self, v: &str) -> Result<Value, SerdeError> {
        Ok(Value::String(v.to_owned()))
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Value, SerdeError> {
        Ok(Value::Bytes(v.to_vec()))
    }
    fn serialize_none(self) -> Result<Value, SerdeError> {
        Ok(Value::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Value, SerdeError> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Value, SerdeError> {
        Ok(Value::Null)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<Value, SerdeError> {
        Ok(Value::Null)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<Value, SerdeError> {
        Ok(Value::String(variant.to_owned()))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<Value, SerdeError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<Value, SerdeError> {
        Err(nested("an enum variant with data"))
    }
    /// serde serializes `Vec<u8>` as a sequence: it becomes bytes; a sequence of anything else is a
    /// list and rejected by [`BytesSerializer`].
    fn serialize_seq(self, len: Option<usize>) -> Result<BytesSerializer, SerdeError> {
        Ok(BytesSerializer(Vec::with_capacity(len.unwrap_or(0))))
    }
    reject_nested! {
        serialize_tuple(usize) -> Self::SerializeTuple: "a tuple";
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct: "a tuple struct";
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Self::SerializeTupleVariant: "an enum variant with data";
        serialize_map(Option<usize>) -> Self::SerializeMap: "a nested map";
        serialize_struct(&'static str, usize) -> Self::SerializeStruct: "a nested struct";
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Self::SerializeStructVariant: "an enum variant with data";
    }
}

/// Collects the elements of a sequence as bytes; only `u8` elements are accepted. (An empty sequence
/// of any type becomes empty bytes: serde gives no element type without an element.)
struct BytesSerializer(Vec<u8>);

impl ser::SerializeSeq for BytesSerializer {
    type Ok = Value;
    type Error = SerdeError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SerdeError> {
        self.0.push(value.serialize(ByteSerializer)?);
        Ok(())
    }
    fn end(self) -> Result<Value, SerdeError> {
        Ok(Value::Bytes(self.0))
    }
}

/// Serializes one element of a byte sequence: a `u8`, or the error for a list.
struct ByteSerializer;

impl ser::Serializer for ByteSerializer {
    type Ok = u8;
    type Error = SerdeError;
    type SerializeSeq = Impossible<u8, SerdeError>;
    type SerializeTuple = Impossible<u8, SerdeError>;
    type SerializeTupleStruct = Impossible<u8, SerdeError>;
    type SerializeTupleVariant = Impossible<u8, SerdeError>;
    type SerializeMap = Impossible<u8, SerdeError>;
    type SerializeStruct = Impossible<u8, SerdeError>;
    type SerializeStructVariant = Impossible<u8, SerdeError>;

    fn serialize_u8(self, v: u8) -> Result<u8, SerdeError> {
        Ok(v)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<u8, SerdeError> {
        Err(nested("a list"))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<u8, SerdeError> {
        Err(nested("a list"))
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<u8, SerdeError> {
        Err(nested("a list"))
    }
    reject_nested! {
        serialize_bool(bool) -> u8: "a list";
        serialize_i8(i8) -> u8: "a list";
        serialize_i16(i16) -> u8: "a list";
        serialize_i32(i32) -> u8: "a list";
        serialize_i64(i64) -> u8: "a list";
        serialize_u16(u16) -> u8: "a list";
        serialize_u32(u32) -> u8: "a list";
        serialize_u64(u64) -> u8: "a list";
        serialize_f32(f32) -> u8: "a list";
        serialize_f64(f64) -> u8: "a list";
        serialize_char(char) -> u8: "a list";
        serialize_str(&str) -> u8: "a list";
        serialize_bytes(&[u8]) -> u8: "a list";
        serialize_none() -> u8: "a list";
        serialize_unit() -> u8: "a list";
        serialize_unit_struct(&'static str) -> u8: "a list";
        serialize_unit_variant(&'static str, u32, &'static str) -> u8: "a list";
        serialize_seq(Option<usize>) -> Self::SerializeSeq: "a list";
        serialize_tuple(usize) -> Self::SerializeTuple: "a list";
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct: "a list";
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Self::SerializeTupleVariant: "a list";
        serialize_map(Option<usize>) -> Self::SerializeMap: "a list";
        serialize_struct(&'static str, usize) -> Self::SerializeStruct: "a list";
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Self::SerializeStructVariant: "a list";
    }
}

// ---------------------------------------------------------------------------------------------
// Deserialization
// ---------------------------------------------------------------------------------------------

struct MapDeserializer<'a> {
    map: &'a ConnectMap,
}

impl<'de> de::Deserializer<'de> for MapDeserializer<'_> {
    type Error = SerdeError;

    fn deserialize_any<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, SerdeError> {
        visitor.visit_map(FieldsAccess {
            iter: self.map.iter(),
            pending: None,
        })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
        unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

struct FieldsAccess<'a, I> {
    iter: I,
    pending: Option<(&'a str, &'a Value)>,
}

impl<'de, 'a, I: Iterator<Item = (&'a str, &'a Value)>> de::MapAccess<'de> for FieldsAccess<'a, I> {
    type Error = SerdeError;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, SerdeError> {
        match self.iter.next() {
            Some((k, v)) => {
                self.pending = Some((k, v));
                seed.deserialize(k.to_owned().into_deserializer()).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, SerdeError> {
        let (key, value) = self
            .pending
            .take()
            .ok_or_else(|| SerdeError(ValueError::new("", "value requested before its key")))?;
        seed.deserialize(ValueDeserializer { value })
            .map_err(|e| SerdeError(e.0.with_key(key)))
    }
}

struct ValueDeserializer<'a> {
    value: &'a Value,
}

impl<'de> de::Deserializer<'de> for ValueDeserializer<'_> {
    type Error = SerdeError;

    fn deserialize_any<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, SerdeError> {
        match self.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(v) => visitor.visit_bool(*v),
            Value::Int8(v) => visitor.visit_i8(*v),
            Value::Int16(v) => visitor.visit_i16(*v),
            Value::Int32(v) => visitor.visit_i32(*v),
            Value::Int64(v) => visitor.visit_i64(*v),
            Value::Float32(v) => visitor.visit_f32(*v),
            Value::Float64(v) => visitor.visit_f64(*v),
            Value::String(v) => visitor.visit_str(v),
            Value::Bytes(v) => visitor.visit_bytes(v),
        }
    }

    fn deserialize_option<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, SerdeError> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    /// `Vec<u8>` asks for a sequence: hand it the bytes one by one. Stored bytes read back as their
    /// base64 string (as in Kafka Connect), so a string is decoded.
    fn deserialize_seq<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, SerdeError> {
        match self.value {
            Value::Bytes(v) => {
                visitor.visit_seq(de::value::SeqDeserializer::new(v.iter().copied()))
            }
            Value::String(s) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .map_err(|e| {
                        SerdeError(ValueError::new(
                            "",
                            format!("expected bytes as a base64 string: {e}"),
                        ))
                    })?;
                visitor.visit_seq(de::value::SeqDeserializer::new(bytes.into_iter()))
            }
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_newtype_struct<V: de::Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, SerdeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: de::Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, SerdeError> {
        match self.value {
            Value::String(s) => visitor.visit_enum(s.as_str().into_deserializer()),
            other => Err(SerdeError(ValueError::new(
                "",
                format!(
                    "expected a variant name as a string, found {}",
                    other.type_name()
                ),
            ))),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct tuple tuple_struct map struct identifier ignored_any
    }
}
