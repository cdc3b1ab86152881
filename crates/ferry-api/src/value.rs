//! The value model of source partitions and source offsets.
//!
//! Kafka Connect allows exactly these value types inside a partition or offset map: null, boolean,
//! int8/16/32/64, float32/64, string and bytes, under string keys. Nested maps, lists and structs are
//! rejected. [`ConnectMap`] keeps insertion order, because the order of fields decides the bytes Kafka
//! Connect writes for a map.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::error::ValueError;

/// One value inside a source-partition or source-offset map.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// JSON `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// An 8-bit integer (Kafka Connect `INT8`).
    Int8(i8),
    /// A 16-bit integer (Kafka Connect `INT16`).
    Int16(i16),
    /// A 32-bit integer (Kafka Connect `INT32`).
    Int32(i32),
    /// A 64-bit integer (Kafka Connect `INT64`). Stored integers always read back as this variant.
    Int64(i64),
    /// A 32-bit float (Kafka Connect `FLOAT32`). Must be finite.
    Float32(f32),
    /// A 64-bit float (Kafka Connect `FLOAT64`). Must be finite. Stored non-integral numbers read back as this.
    Float64(f64),
    /// A UTF-8 string.
    String(String),
    /// Raw bytes. Stored as a base64 string, so they read back as [`Value::String`].
    Bytes(Vec<u8>),
}

impl Value {
    /// The integer held by any integer variant, widened to 64 bits.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::Int8(v) => Some(v.into()),
            Value::Int16(v) => Some(v.into()),
            Value::Int32(v) => Some(v.into()),
            Value::Int64(v) => Some(v),
            _ => None,
        }
    }

    /// The string held by a [`Value::String`].
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The name of the type, as used in error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Int8(_) => "int8",
            Value::Int16(_) => "int16",
            Value::Int32(_) => "int32",
            Value::Int64(_) => "int64",
            Value::Float32(_) => "float32",
            Value::Float64(_) => "float64",
            Value::String(_) => "string",
            Value::Bytes(_) => "bytes",
        }
    }

    /// Checks that a float is finite: JSON has no NaN or infinity, and Kafka Connect would store them
    /// as strings, which read back as a different partition.
    fn check(&self, key: &str) -> Result<(), ValueError> {
        let finite = match *self {
            Value::Float32(v) => v.is_finite(),
            Value::Float64(v) => v.is_finite(),
            _ => true,
        };
        if finite {
            Ok(())
        } else {
            Err(ValueError::new(
                key,
                "NaN and infinite floats cannot be stored in a partition or offset (JSON has no such number)",
            ))
        }
    }
}

macro_rules! value_from {
    ($($t:ty => $variant:ident),* $(,)?) => {
        $(impl From<$t> for Value {
            fn from(v: $t) -> Self {
                Value::$variant(v.into())
            }
        })*
    };
}

value_from!(
    bool => Bool, i8 => Int8, i16 => Int16, i32 => Int32, i64 => Int64, f32 => Float32,
    f64 => Float64, String => String, &str => String, Vec<u8> => Bytes,
);

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// A source-partition or source-offset map: string keys in insertion order, Kafka Connect values.
///
/// Build one by hand with [`ConnectMap::with`], or from any serde type with [`ConnectMap::from_serde`]
/// (the typed way, which keeps `start()` and `poll()` from building two different keys).
///
/// Cloning is cheap (the fields are shared until one of the copies changes), so a connector may build
/// its partition map once and clone it into every record, and the runtime may keep a record's maps
/// without copying them. Setting a field of a clone copies only the values (the names stay shared),
/// so a connector may also keep a template offset and set one field of a clone per record — the
/// cheap way to build an offset per record.
#[derive(Debug, Clone)]
pub struct ConnectMap {
    /// The field names in insertion order, shared by every copy that added no field.
    keys: Arc<Keys>,
    /// The values, in the order of `keys`. Past `keys.len()`: spare room (nulls) for the fields a
    /// map being built adds while no copy shares its values.
    values: Arc<[Value]>,
}

impl Default for ConnectMap {
    fn default() -> Self {
        Self {
            keys: Arc::default(),
            values: Arc::from([]),
        }
    }
}

/// Past this many fields a map's names are indexed; up to it, a linear scan finds a name faster
/// than hashing it (partitions and offsets have a few fields: a file's offset five).
const SCANNED_FIELDS: usize = 8;

/// A map's field names, apart from its values: connectors derive an offset per record from a
/// template, and a copy with one value changed then copies only its values and shares the names.
/// (An `Arc<IndexMap>` copied its entries and its hash table, and touched every key's count: a
/// quarter of FileStreamSource's task thread in the profile.) The values are copied into a `Vec`
/// that becomes the `Arc` (two allocations and a copy): cloning them straight into one `Arc`
/// (`Arc::from(&[Value])`, or an inline `SmallVec` in an `Arc`) measured slower, 159–186 ns
/// against 100–107 ns per copy of a five-field offset.
#[derive(Debug, Clone, Default)]
struct Keys {
    names: Vec<Arc<str>>,
    /// Positions by name, once there are more than [`SCANNED_FIELDS`].
    index: Option<HashMap<Arc<str>, usize>>,
}

impl Keys {
    fn position(&self, key: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(key).copied(),
            None => self.names.iter().position(|name| &**name == key),
        }
    }

    fn push(&mut self, name: Arc<str>) {
        if let Some(index) = &mut self.index {
            index.insert(Arc::clone(&name), self.names.len());
        }
        self.names.push(name);
        if self.index.is_none() && self.names.len() > SCANNED_FIELDS {
            let index = self.names.iter().cloned().zip(0..).collect();
            self.index = Some(index);
        }
    }
}

/// Equal fields, in any order. Clones of one map compare without looking at their fields.
impl PartialEq for ConnectMap {
    fn eq(&self, other: &Self) -> bool {
        self.shares_fields_with(other)
            || (self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v)))
    }
}

/// A source partition: identifies a stream of the external system (a file, a table).
pub type SourcePartition = ConnectMap;
/// A source offset: a position inside one source partition.
pub type SourceOffset = ConnectMap;

impl ConnectMap {
    /// Whether `other` is a clone of this map (they share their fields): a pointer comparison, for
    /// callers that look one map up among a few (`==` compares the fields when they differ).
    pub fn shares_fields_with(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.values, &other.values) && Arc::ptr_eq(&self.keys, &other.keys)
    }

    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a field, builder style. Panics never; an invalid value is reported by [`ConnectMap::insert`].
    ///
    /// # Errors
    /// A non-finite float, naming the key.
    pub fn with(
        mut self,
        key: impl AsRef<str>,
        value: impl Into<Value>,
    ) -> Result<Self, ValueError> {
        self.insert(key, value)?;
        Ok(self)
    }

    /// Inserts or replaces a field. A replaced field keeps its position.
    ///
    /// # Errors
    /// A non-finite float, naming the key.
    pub fn insert(
        &mut self,
        key: impl AsRef<str>,
        value: impl Into<Value>,
    ) -> Result<(), ValueError> {
        let key = key.as_ref();
        let value = value.into();
        value.check(key)?;
        let len = self.len();
        match self.keys.position(key) {
            Some(at) => match Arc::get_mut(&mut self.values) {
                Some(values) => values[at] = value,
                // Shared (a copy of a template): a copy of the values, of their exact size.
                None => {
                    let mut values = self.values[..len].to_vec();
                    values[at] = value;
                    self.values = values.into();
                }
            },
            None => {
                Arc::make_mut(&mut self.keys).push(Arc::from(key));
                match Arc::get_mut(&mut self.values) {
                    Some(values) if values.len() > len => values[len] = value,
                    // Full or shared: room doubles, so a map built field by field copies each
                    // value a bounded number of times.
                    _ => {
                        let room = (len + 1).next_power_of_two().max(4);
                        let mut values = Vec::with_capacity(room);
                        values.extend_from_slice(&self.values[..len]);
                        values.push(value);
                        values.resize(room, Value::Null);
                        self.values = values.into();
                    }
                }
            }
        }
        Ok(())
    }

    /// The value of a field.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.keys.position(key).map(|at| &self.values[at])
    }

    /// The fields in insertion order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            names: self.keys.names.iter(),
            values: self.values[..self.len()].iter(),
        }
    }

    /// The number of fields.
    pub fn len(&self) -> usize {
        self.keys.names.len()
    }

    /// Whether the map has no fields.
    pub fn is_empty(&self) -> bool {
        self.keys.names.is_empty()
    }

    /// Converts a serde value (a struct or a map of primitives) into a map.
    ///
    /// # Errors
    /// A field whose type Kafka Connect does not allow (nested struct, list, map, an out-of-range
    /// unsigned integer, a non-finite float), naming the field.
    pub fn from_serde<T: serde::Serialize + ?Sized>(value: &T) -> Result<Self, ValueError> {
        crate::typed::to_map(value)
    }

    /// Converts the map into a serde type. Integers convert to any width they fit
    /// (an `i32` field reads back from a stored 64-bit integer).
    ///
    /// # Errors
    /// A missing field, or a field whose value does not fit the target type, naming the field.
    pub fn to_serde<T: serde::de::DeserializeOwned>(&self) -> Result<T, ValueError> {
        crate::typed::from_map(self)
    }
}

impl<'a> IntoIterator for &'a ConnectMap {
    type Item = (&'a str, &'a Value);
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// The fields of a [`ConnectMap`] in insertion order.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    names: std::slice::Iter<'a, Arc<str>>,
    values: std::slice::Iter<'a, Value>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a Value);
    fn next(&mut self) -> Option<Self::Item> {
        Some((&**self.names.next()?, self.values.next()?))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.names.size_hint()
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        Some((&**self.names.next_back()?, self.values.next_back()?))
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Int8(v) => write!(f, "{v}"),
            Value::Int16(v) => write!(f, "{v}"),
            Value::Int32(v) => write!(f, "{v}"),
            Value::Int64(v) => write!(f, "{v}"),
            Value::Float32(v) => write!(f, "{v:?}"),
            Value::Float64(v) => write!(f, "{v:?}"),
            Value::String(v) => write!(f, "{v:?}"),
            Value::Bytes(v) => write!(f, "<{} bytes>", v.len()),
        }
    }
}

/// Shows the map as JSON-like text for logs and errors (`{"filename":"/tmp/a.txt"}`).
impl fmt::Display for ConnectMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (k, v)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{k:?}:{v}")?;
        }
        f.write_str("}")
    }
}
