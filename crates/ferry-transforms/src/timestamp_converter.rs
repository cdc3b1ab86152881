//! Kafka Connect's `TimestampConverter` (`org.apache.kafka.connect.transforms.TimestampConverter$Key`
//! / `$Value`): converts a timestamp — the whole key or value, or one field of it — between a
//! string (`format`, a `java.text.SimpleDateFormat` pattern, in UTC), a Unix number
//! (`unix.precision`), and Kafka Connect's Date, Time and Timestamp.
//!
//! With a schema, the source type comes from the schema (Timestamp, Date, Time, else string or
//! int64 as unix) and the schema is replaced by the target's. Without one, a JSON integer is a
//! Unix time and a string is parsed with `format`. A Java `java.util.Date` has no schemaless JSON
//! form, so schemaless Date, Time and Timestamp results are written as epoch milliseconds (of the
//! day's midnight for Date, of 1970-01-01 for Time). Sub-millisecond precision is lost, as in
//! Kafka Connect.

use ferry_api::config::Issues;
use ferry_api::transform::{Transformation, TransformationPlugin};
use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConnectError, DATE_LOGICAL_NAME, Field, Schema, SchemaKind,
    SourceRecord, TIME_LOGICAL_NAME, TIMESTAMP_LOGICAL_NAME,
};
use serde_json::Value;

use crate::types_common::{
    Side, boolean, copy_schema_basics, field_value, java_schema_string, key_and_value_plugins,
    require_map, require_struct, schemaless_class,
};
use crate::types_time::{DatePattern, MILLIS_PER_DAY};

const FIELD: &str = "field";
const TARGET_TYPE: &str = "target.type";
const FORMAT: &str = "format";
const UNIX_PRECISION: &str = "unix.precision";
const REPLACE_NULL_WITH_DEFAULT: &str = "replace.null.with.default";
const PURPOSE: &str = "converting timestamp formats";

pub(crate) fn plugins() -> Vec<TransformationPlugin> {
    key_and_value_plugins("TimestampConverter", |side| {
        Box::new(TimestampConverter::new(side))
    })
}

/// A timestamp representation (`target.type`, or the source's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    String,
    Unix,
    Date,
    Time,
    Timestamp,
}

impl Kind {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "string" => Kind::String,
            "unix" => Kind::Unix,
            "Date" => Kind::Date,
            "Time" => Kind::Time,
            "Timestamp" => Kind::Timestamp,
            _ => return None,
        })
    }

    /// Kafka Connect's `TimestampTranslator.typeSchema`.
    fn schema(self, optional: bool) -> Schema {
        let schema = match self {
            Kind::String => Schema::string(),
            Kind::Unix => Schema::int64(),
            Kind::Date => Schema::date(),
            Kind::Time => Schema::time(),
            Kind::Timestamp => Schema::timestamp(),
        };
        if optional { schema.optional() } else { schema }
    }

    /// Kafka Connect's `timestampTypeFromSchema`.
    fn of_schema(schema: &Schema) -> Result<Self, ConnectError> {
        match schema.name.as_deref() {
            Some(TIMESTAMP_LOGICAL_NAME) => Ok(Kind::Timestamp),
            Some(DATE_LOGICAL_NAME) => Ok(Kind::Date),
            Some(TIME_LOGICAL_NAME) => Ok(Kind::Time),
            _ => match schema.kind {
                SchemaKind::String => Ok(Kind::String),
                SchemaKind::Int64 => Ok(Kind::Unix),
                _ => Err(ConnectError::fatal(format!(
                    "Schema {} does not correspond to a known timestamp type format",
                    java_schema_string(schema)
                ))),
            },
        }
    }
}

/// `unix.precision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Precision {
    Seconds,
    Milliseconds,
    Microseconds,
    Nanoseconds,
}

impl Precision {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "seconds" => Precision::Seconds,
            "milliseconds" => Precision::Milliseconds,
            "microseconds" => Precision::Microseconds,
            "nanoseconds" => Precision::Nanoseconds,
            _ => return None,
        })
    }

    /// Java's `TimeUnit.X.toMillis`: division truncates, multiplication saturates.
    fn unix_to_millis(self, value: i64) -> i64 {
        match self {
            Precision::Seconds => value.saturating_mul(1000),
            Precision::Milliseconds => value,
            Precision::Microseconds => value / 1000,
            Precision::Nanoseconds => value / 1_000_000,
        }
    }

    fn unix_from_millis(self, millis: i64) -> i64 {
        match self {
            Precision::Seconds => millis / 1000,
            Precision::Milliseconds => millis,
            Precision::Microseconds => millis.saturating_mul(1000),
            Precision::Nanoseconds => millis.saturating_mul(1_000_000),
        }
    }
}

#[derive(Debug, Clone)]
struct Settings {
    field: String,
    target: Kind,
    format: Option<DatePattern>,
    precision: Precision,
}

/// `TimestampConverter$Key` / `TimestampConverter$Value`.
struct TimestampConverter {
    side: Side,
    settings: Option<Settings>,
}

impl TimestampConverter {
    fn new(side: Side) -> Self {
        Self {
            side,
            settings: None,
        }
    }
}

impl Settings {
    /// The instant (`java.util.Date`, milliseconds) a non-null timestamp of `kind` stands for.
    /// `schemaful` says whether Date and Time are Kafka Connect's int32 representation.
    fn to_raw(&self, value: &Value, kind: Kind, schemaful: bool) -> Result<i64, ConnectError> {
        let found = || format!("class {}", schemaless_class(value));
        match kind {
            Kind::String => {
                let Value::String(text) = value else {
                    return Err(ConnectError::fatal(format!(
                        "Expected string timestamp to be a String, but found {}",
                        found()
                    )));
                };
                let Some(format) = &self.format else {
                    return Err(ConnectError::fatal(format!(
                        "Could not parse timestamp: value ({text}) is a string but no {FORMAT} is configured; set {FORMAT} to its SimpleDateFormat pattern"
                    )));
                };
                format.parse(text).ok_or_else(|| {
                    ConnectError::fatal(format!(
                        "Could not parse timestamp: value ({text}) does not match pattern ({})",
                        format.pattern()
                    ))
                })
            }
            Kind::Unix => value
                .as_i64()
                .map(|v| self.precision.unix_to_millis(v))
                .ok_or_else(|| {
                    ConnectError::fatal(format!(
                        "Expected Unix timestamp to be a Long, but found {}",
                        found()
                    ))
                }),
            Kind::Date | Kind::Time | Kind::Timestamp => {
                let name = match kind {
                    Kind::Date => "Date",
                    Kind::Time => "Time",
                    _ => "Timestamp",
                };
                let raw = value.as_i64().ok_or_else(|| {
                    ConnectError::fatal(format!(
                        "Expected {name} to be a java.util.Date, but found {}",
                        found()
                    ))
                })?;
                Ok(if kind == Kind::Date && schemaful {
                    raw.saturating_mul(MILLIS_PER_DAY)
                } else {
                    raw
                })
            }
        }
    }

    /// The target representation of an instant.
    fn to_type(&self, millis: i64, schemaful: bool) -> Value {
        match self.target {
            Kind::String => Value::String(
                self.format
                    .as_ref()
                    .map(|f| f.format(millis))
                    .unwrap_or_default(),
            ),
            Kind::Unix => Value::from(self.precision.unix_from_millis(millis)),
            Kind::Timestamp => Value::from(millis),
            Kind::Date => {
                let days = millis.div_euclid(MILLIS_PER_DAY);
                if schemaful {
                    // Kafka Connect's Date.fromLogical: (int) days.
                    Value::from(days as i32)
                } else {
                    Value::from(days * MILLIS_PER_DAY)
                }
            }
            Kind::Time => Value::from(millis.rem_euclid(MILLIS_PER_DAY)),
        }
    }

    /// Kafka Connect's `convertTimestamp`: null stays null; `kind` is inferred when absent.
    fn convert(&self, value: &Value, kind: Option<Kind>) -> Result<Value, ConnectError> {
        if value.is_null() {
            return Ok(Value::Null);
        }
        let schemaful = kind.is_some();
        let kind = match kind {
            Some(kind) => kind,
            None => match value {
                Value::Number(n) if n.is_i64() => Kind::Unix,
                Value::String(_) => Kind::String,
                other => {
                    return Err(ConnectError::fatal(format!(
                        "TimestampConverter does not support class {} objects as timestamps",
                        schemaless_class(other)
                    )));
                }
            },
        };
        let millis = self.to_raw(value, kind, schemaful)?;
        Ok(self.to_type(millis, schemaful))
    }
}

impl Transformation for TimestampConverter {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![
            ConfigKey::optional(
                FIELD,
                Some(""),
                "The field containing the timestamp, or empty if the entire value is a timestamp",
            ),
            ConfigKey::required(
                TARGET_TYPE,
                "The desired timestamp representation: string, unix, Date, Time, or Timestamp",
            ),
            ConfigKey::optional(
                FORMAT,
                Some(""),
                "A SimpleDateFormat-compatible format for the timestamp. Used to generate the output when type=string or used to parse the input if the input is a string. Ferry works in UTC and supports the letters G y M d H k K h m s S E a D u z Z X and quoted literals.",
            ),
            ConfigKey::optional(
                UNIX_PRECISION,
                Some("milliseconds"),
                "The desired Unix precision for the timestamp: seconds, milliseconds, microseconds, or nanoseconds. Used to generate the output when type=unix or used to parse the input if the input is a Long. Note: This SMT will cause precision loss during conversions from, and to, values with sub-millisecond components.",
            ),
            ConfigKey::optional(
                REPLACE_NULL_WITH_DEFAULT,
                Some("true"),
                "Whether to replace fields that have a default value and that are null to the default value. When set to true, the default value is used, otherwise null is used. (Ferry's transforms do not apply schema default values yet: a null stays null.)",
            ),
        ]
    }

    fn configure(&mut self, config: &Config) -> Result<(), Vec<ConfigIssue>> {
        let mut issues = Issues::default();
        let field = config.get(FIELD).map_or("", |f| f.trim()).to_owned();
        let target = match config.get(TARGET_TYPE) {
            None => {
                issues.push(
                    TARGET_TYPE,
                    "Missing required configuration \"target.type\" which has no default value.",
                );
                None
            }
            Some(raw) => {
                let kind = Kind::parse(raw.trim());
                if kind.is_none() {
                    issues.push(
                        TARGET_TYPE,
                        format!(
                            "String must be one of: string, unix, Date, Time, Timestamp (got {:?})",
                            raw.trim()
                        ),
                    );
                }
                kind
            }
        };
        let precision_raw = config
            .get(UNIX_PRECISION)
            .map_or("milliseconds", |p| p.trim());
        let precision = Precision::parse(precision_raw);
        if precision.is_none() {
            issues.push(
                UNIX_PRECISION,
                format!(
                    "String must be one of: nanoseconds, microseconds, milliseconds, seconds (got {precision_raw:?})"
                ),
            );
        }
        boolean(config, REPLACE_NULL_WITH_DEFAULT, true, &mut issues);
        let pattern = config.get(FORMAT).map_or("", |f| f.trim());
        let format = if pattern.is_empty() {
            if target == Some(Kind::String) {
                issues.push(
                    FORMAT,
                    "TimestampConverter requires format option to be specified when using string timestamps",
                );
            }
            None
        } else {
            match DatePattern::compile(pattern) {
                Ok(format) => Some(format),
                Err(reason) => {
                    issues.push(
                        FORMAT,
                        format!(
                            "TimestampConverter requires a SimpleDateFormat-compatible pattern for string timestamps: {pattern} ({reason})"
                        ),
                    );
                    None
                }
            }
        };
        issues.finish(|| ())?;
        if let (Some(target), Some(precision)) = (target, precision) {
            self.settings = Some(Settings {
                field,
                target,
                format,
                precision,
            });
        }
        Ok(())
    }

    fn apply(&mut self, mut record: SourceRecord) -> Result<Option<SourceRecord>, ConnectError> {
        let Some(settings) = &self.settings else {
            return Err(ConnectError::fatal(
                "TimestampConverter transformation used before it was configured",
            ));
        };
        let (value, schema) = self.side.get(&record);
        let value = value.filter(|v| !v.is_null());
        let (new_value, new_schema) = match schema {
            None => match value {
                None => (None, None),
                Some(value) if settings.field.is_empty() => {
                    (Some(settings.convert(value, None)?), None)
                }
                Some(value) => {
                    let mut map = require_map(Some(value), PURPOSE)?.clone();
                    let converted = settings.convert(field_value(&map, &settings.field), None)?;
                    map.insert(settings.field.clone(), converted);
                    (Some(Value::Object(map)), None)
                }
            },
            Some(schema) if settings.field.is_empty() => {
                // The source type is looked up even for a null value, as in Kafka Connect.
                let kind = Kind::of_schema(schema)?;
                let updated = settings.target.schema(schema.optional);
                let converted = match value {
                    Some(value) => Some(settings.convert(value, Some(kind))?),
                    None => None,
                };
                (converted, Some(updated))
            }
            Some(schema) => {
                let SchemaKind::Struct { fields } = &schema.kind else {
                    return Err(ConnectError::fatal("Cannot list fields on non-struct type"));
                };
                let new_fields = fields
                    .iter()
                    .map(|field| {
                        if field.name == settings.field {
                            Field::new(
                                field.name.clone(),
                                settings.target.schema(field.schema.optional),
                            )
                        } else {
                            field.clone()
                        }
                    })
                    .collect();
                let mut updated =
                    copy_schema_basics(schema, SchemaKind::Struct { fields: new_fields });
                updated.optional = schema.optional;
                let converted = match value {
                    None => None,
                    Some(value) => {
                        let object = require_struct(Some(value), schema, PURPOSE)?;
                        let mut out = serde_json::Map::new();
                        for field in fields {
                            let original = field_value(object, &field.name);
                            // Like Kafka Connect, the field's schema must be a timestamp type
                            // even when its value is null.
                            let converted = if field.name == settings.field {
                                settings.convert(original, Some(Kind::of_schema(&field.schema)?))?
                            } else {
                                original.clone()
                            };
                            out.insert(field.name.clone(), converted);
                        }
                        Some(Value::Object(out))
                    }
                };
                (converted, Some(updated))
            }
        };
        self.side.set(&mut record, new_schema, new_value);
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// TimestampConverterTest's instants: 1970-01-02T00:00:01.234Z and its parts.
    const DATE_PLUS_TIME_UNIX: i64 = 86_401_234;
    const DATE: i64 = MILLIS_PER_DAY;
    const TIME: i64 = 1234;
    const STRING_DATE_FMT: &str = "yyyy MM dd HH mm ss SSS z";
    const DATE_PLUS_TIME_STRING: &str = "1970 01 02 00 00 01 234 UTC";

    fn converter(side: Side, pairs: &[(&str, &str)]) -> TimestampConverter {
        let mut xform = TimestampConverter::new(side);
        let config: Config = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        xform.configure(&config).unwrap();
        xform
    }

    fn value_converter(pairs: &[(&str, &str)]) -> TimestampConverter {
        converter(Side::Value, pairs)
    }

    fn issues(pairs: &[(&str, &str)]) -> Vec<ConfigIssue> {
        let config: Config = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        TimestampConverter::new(Side::Value)
            .configure(&config)
            .unwrap_err()
    }

    fn schemaless(value: Option<Value>) -> SourceRecord {
        let mut record = SourceRecord::builder("topic").build();
        record.value = value;
        record
    }

    fn with_schema(schema: Schema, value: Option<Value>) -> SourceRecord {
        let mut record = SourceRecord::builder("topic").value_schema(schema).build();
        record.value = value;
        record
    }

    fn apply(xform: &mut TimestampConverter, record: SourceRecord) -> SourceRecord {
        xform.apply(record).unwrap().unwrap()
    }

    #[test]
    fn plugins_answer_to_kafka_connect_class_names() {
        let names: Vec<String> = plugins().iter().map(|p| p.class().to_owned()).collect();
        assert_eq!(
            names,
            [
                "org.apache.kafka.connect.transforms.TimestampConverter$Key",
                "org.apache.kafka.connect.transforms.TimestampConverter$Value"
            ]
        );
    }

    #[test]
    fn config_errors_name_their_key() {
        assert_eq!(issues(&[])[0].key, TARGET_TYPE);
        let invalid = issues(&[(TARGET_TYPE, "invalid")]);
        assert_eq!(invalid[0].key, TARGET_TYPE);
        assert!(
            invalid[0]
                .message
                .contains("string, unix, Date, Time, Timestamp")
        );
        assert_eq!(
            issues(&[(TARGET_TYPE, "unix"), (UNIX_PRECISION, "invalid")])[0].key,
            UNIX_PRECISION
        );
        let missing = issues(&[(TARGET_TYPE, "string")]);
        assert_eq!(missing[0].key, FORMAT);
        assert_eq!(
            missing[0].message,
            "TimestampConverter requires format option to be specified when using string timestamps"
        );
        let bad = issues(&[(TARGET_TYPE, "string"), (FORMAT, "bad-format")]);
        assert_eq!(bad[0].key, FORMAT);
        assert_eq!(
            bad[0].message,
            "TimestampConverter requires a SimpleDateFormat-compatible pattern for string timestamps: bad-format (Illegal pattern character 'b')"
        );
        value_converter(&[(TARGET_TYPE, "unix"), (UNIX_PRECISION, "seconds")]);
    }

    #[test]
    fn schemaless_timestamp_to_other_types() {
        for (target, expected) in [
            ("Timestamp", json!(DATE_PLUS_TIME_UNIX)),
            ("Date", json!(DATE)),
            ("Time", json!(TIME)),
            ("unix", json!(DATE_PLUS_TIME_UNIX)),
            ("string", json!(DATE_PLUS_TIME_STRING)),
        ] {
            let mut xform = value_converter(&[(TARGET_TYPE, target), (FORMAT, STRING_DATE_FMT)]);
            let out = apply(&mut xform, schemaless(Some(json!(DATE_PLUS_TIME_UNIX))));
            assert_eq!(out.value, Some(expected), "{target}");
            assert_eq!(out.value_schema.as_deref().cloned(), None);
        }
    }

    #[test]
    fn schemaless_string_to_timestamp_and_unix_precisions() {
        let mut xform = value_converter(&[(TARGET_TYPE, "Timestamp"), (FORMAT, STRING_DATE_FMT)]);
        let out = apply(&mut xform, schemaless(Some(json!(DATE_PLUS_TIME_STRING))));
        assert_eq!(out.value, Some(json!(DATE_PLUS_TIME_UNIX)));
        for (precision, expected) in [
            ("microseconds", 86_401_234_000_i64),
            ("nanoseconds", 86_401_234_000_000),
            ("seconds", 86_401),
        ] {
            let mut xform = value_converter(&[
                (TARGET_TYPE, "unix"),
                (UNIX_PRECISION, precision),
                (FORMAT, STRING_DATE_FMT),
            ]);
            let out = apply(&mut xform, schemaless(Some(json!(DATE_PLUS_TIME_STRING))));
            assert_eq!(out.value, Some(json!(expected)), "{precision}");
        }
    }

    #[test]
    fn string_format_round_trips_through_unix_and_timestamp() {
        let fmt = "yyyy-MM-dd HH:mm:ss";
        let mut to_unix = value_converter(&[(TARGET_TYPE, "unix"), (FORMAT, fmt)]);
        let out = apply(
            &mut to_unix,
            with_schema(Schema::string(), Some(json!("2017-01-01 00:00:00"))),
        );
        assert_eq!(out.value, Some(json!(1_483_228_800_000_i64)));
        assert_eq!(out.value_schema.as_deref().cloned(), Some(Schema::int64()));
        let mut to_timestamp = value_converter(&[(TARGET_TYPE, "Timestamp"), (FORMAT, fmt)]);
        let out = apply(&mut to_timestamp, out);
        assert_eq!(out.value, Some(json!(1_483_228_800_000_i64)));
        assert_eq!(
            out.value_schema.as_deref().cloned(),
            Some(Schema::timestamp())
        );
        let mut to_string = value_converter(&[(TARGET_TYPE, "string"), (FORMAT, fmt)]);
        let out = apply(&mut to_string, out);
        assert_eq!(out.value, Some(json!("2017-01-01 00:00:00")));
        assert_eq!(out.value_schema.as_deref().cloned(), Some(Schema::string()));
    }

    #[test]
    fn with_schema_timestamp_to_other_types() {
        for (target, expected, schema) in [
            ("Timestamp", json!(DATE_PLUS_TIME_UNIX), Schema::timestamp()),
            ("Date", json!(1), Schema::date()),
            ("Time", json!(TIME), Schema::time()),
            ("unix", json!(DATE_PLUS_TIME_UNIX), Schema::int64()),
            ("string", json!(DATE_PLUS_TIME_STRING), Schema::string()),
        ] {
            let mut xform = value_converter(&[(TARGET_TYPE, target), (FORMAT, STRING_DATE_FMT)]);
            let out = apply(
                &mut xform,
                with_schema(Schema::timestamp(), Some(json!(DATE_PLUS_TIME_UNIX))),
            );
            assert_eq!(out.value, Some(expected), "{target}");
            assert_eq!(
                out.value_schema.as_deref().cloned(),
                Some(schema),
                "{target}"
            );
        }
    }

    #[test]
    fn with_schema_other_types_to_timestamp() {
        for (schema, value, expected) in [
            (Schema::date(), json!(1), DATE),
            (Schema::time(), json!(TIME), TIME),
            (
                Schema::int64(),
                json!(DATE_PLUS_TIME_UNIX),
                DATE_PLUS_TIME_UNIX,
            ),
            (
                Schema::string(),
                json!(DATE_PLUS_TIME_STRING),
                DATE_PLUS_TIME_UNIX,
            ),
        ] {
            let mut xform =
                value_converter(&[(TARGET_TYPE, "Timestamp"), (FORMAT, STRING_DATE_FMT)]);
            let out = apply(&mut xform, with_schema(schema.clone(), Some(value)));
            assert_eq!(out.value, Some(json!(expected)), "{schema}");
            assert_eq!(
                out.value_schema.as_deref().cloned(),
                Some(Schema::timestamp())
            );
        }
    }

    #[test]
    fn null_values_and_fields_keep_null_and_get_the_optional_target_schema() {
        for target in ["string", "unix", "Date", "Time", "Timestamp"] {
            let kind = Kind::parse(target).unwrap();
            for original in [
                Schema::int64().optional(),
                Schema::time().optional(),
                Schema::date().optional(),
                Schema::string().optional(),
                Schema::timestamp().optional(),
            ] {
                let mut whole =
                    value_converter(&[(TARGET_TYPE, target), (FORMAT, STRING_DATE_FMT)]);
                let out = apply(&mut whole, with_schema(original.clone(), None));
                assert_eq!(out.value, None);
                assert_eq!(
                    out.value_schema.as_deref().cloned(),
                    Some(kind.schema(true))
                );

                let mut field = value_converter(&[
                    (TARGET_TYPE, target),
                    (FORMAT, STRING_DATE_FMT),
                    (FIELD, "ts"),
                ]);
                let struct_schema = Schema::unnamed_struct([
                    Field::new("ts", original.clone()),
                    Field::new("other", Schema::string()),
                ]);
                let expected_schema = Schema::unnamed_struct([
                    Field::new("ts", kind.schema(true)),
                    Field::new("other", Schema::string()),
                ]);
                let out = apply(
                    &mut field,
                    with_schema(
                        struct_schema.clone(),
                        Some(json!({"ts": null, "other": "test"})),
                    ),
                );
                assert_eq!(out.value, Some(json!({"ts": null, "other": "test"})));
                assert_eq!(
                    out.value_schema.as_deref().cloned(),
                    Some(expected_schema.clone())
                );
                let out = apply(&mut field, with_schema(struct_schema.optional(), None));
                assert_eq!(out.value, None);
                assert_eq!(
                    out.value_schema.as_deref().cloned(),
                    Some(expected_schema.optional())
                );
            }
            let mut schemaless_field = value_converter(&[
                (TARGET_TYPE, target),
                (FORMAT, STRING_DATE_FMT),
                (FIELD, "ts"),
            ]);
            assert_eq!(apply(&mut schemaless_field, schemaless(None)).value, None);
        }
    }

    #[test]
    fn field_conversion_schemaless_and_with_schema() {
        let mut xform = value_converter(&[(TARGET_TYPE, "Date"), (FIELD, "ts")]);
        let out = apply(
            &mut xform,
            schemaless(Some(json!({"ts": DATE_PLUS_TIME_UNIX, "other": 1}))),
        );
        assert_eq!(out.value, Some(json!({"ts": DATE, "other": 1})));

        for (precision, ts, expected) in [
            ("milliseconds", DATE_PLUS_TIME_UNIX, DATE_PLUS_TIME_UNIX),
            (
                "microseconds",
                DATE_PLUS_TIME_UNIX * 1000 + 123,
                DATE_PLUS_TIME_UNIX,
            ),
            (
                "nanoseconds",
                (DATE_PLUS_TIME_UNIX * 1000 + 123) * 1000 + 456,
                DATE_PLUS_TIME_UNIX,
            ),
            ("seconds", 86_401, 86_401_000),
        ] {
            let mut xform = value_converter(&[
                (TARGET_TYPE, "Timestamp"),
                (FIELD, "ts"),
                (UNIX_PRECISION, precision),
            ]);
            let schema = Schema::struct_(
                "com.example.Event",
                [
                    Field::new("ts", Schema::int64()),
                    Field::new("other", Schema::string()),
                ],
            );
            let out = apply(
                &mut xform,
                with_schema(schema, Some(json!({"ts": ts, "other": "test"}))),
            );
            assert_eq!(
                out.value,
                Some(json!({"ts": expected, "other": "test"})),
                "{precision}"
            );
            assert_eq!(
                out.value_schema.as_deref().cloned(),
                Some(Schema::struct_(
                    "com.example.Event",
                    [
                        Field::new("ts", Schema::timestamp()),
                        Field::new("other", Schema::string()),
                    ],
                ))
            );
        }
    }

    #[test]
    fn key_variant_converts_the_key_only() {
        let mut xform = converter(Side::Key, &[(TARGET_TYPE, "Timestamp")]);
        let record = SourceRecord::builder("topic")
            .key(json!(DATE_PLUS_TIME_UNIX))
            .value(json!("v"))
            .build();
        let out = apply(&mut xform, record);
        assert_eq!(out.key, Some(json!(DATE_PLUS_TIME_UNIX)));
        assert_eq!(out.key_schema.as_deref().cloned(), None);
        let mut xform = converter(Side::Key, &[(TARGET_TYPE, "Date")]);
        let record = SourceRecord::builder("topic")
            .key_schema(Schema::timestamp())
            .key(json!(DATE_PLUS_TIME_UNIX))
            .value(json!(DATE_PLUS_TIME_UNIX))
            .build();
        let out = apply(&mut xform, record);
        assert_eq!(
            (out.key, out.key_schema.as_deref().cloned()),
            (Some(json!(1)), Some(Schema::date()))
        );
        assert_eq!(out.value, Some(json!(DATE_PLUS_TIME_UNIX)));
    }

    #[test]
    fn negative_instants_floor_to_the_previous_day() {
        let mut xform = value_converter(&[(TARGET_TYPE, "Date")]);
        let out = apply(
            &mut xform,
            with_schema(Schema::timestamp(), Some(json!(-1))),
        );
        assert_eq!(out.value, Some(json!(-1)));
        let mut xform = value_converter(&[(TARGET_TYPE, "Time")]);
        let out = apply(
            &mut xform,
            with_schema(Schema::timestamp(), Some(json!(-1))),
        );
        assert_eq!(out.value, Some(json!(MILLIS_PER_DAY - 1)));
    }

    #[test]
    fn bad_values_fail_with_kafka_connect_messages() {
        let mut xform = value_converter(&[(TARGET_TYPE, "unix"), (FORMAT, "yyyy-MM-dd")]);
        let err = xform
            .apply(schemaless(Some(json!("01/02/2017"))))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Could not parse timestamp: value (01/02/2017) does not match pattern (yyyy-MM-dd)"
        );
        let err = xform.apply(schemaless(Some(json!(1.5)))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "TimestampConverter does not support class java.lang.Double objects as timestamps"
        );
        let err = xform
            .apply(with_schema(Schema::int32(), Some(json!(1))))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Schema Schema{INT32} does not correspond to a known timestamp type format"
        );
        let err = xform
            .apply(with_schema(Schema::int64(), Some(json!("x"))))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Expected Unix timestamp to be a Long, but found class java.lang.String"
        );
        let mut field = value_converter(&[(TARGET_TYPE, "unix"), (FIELD, "ts")]);
        let err = field.apply(schemaless(Some(json!("x")))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Only Map objects supported in absence of schema for [converting timestamp formats], found: java.lang.String"
        );
    }
}
