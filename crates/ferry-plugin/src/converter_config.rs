//! `key.converter`, `value.converter`, `header.converter` and their settings (`value.converter.schemas.enable`).
//!
//! Kafka Connect's converter classes, by full or simple class name:
//!
//! | class | settings (`<role>.converter.<setting>`) |
//! |---|---|
//! | `org.apache.kafka.connect.json.JsonConverter` | `schemas.enable` (default `true`); `schemas.cache.size`, `decimal.format`, `replace.null.with.default` accepted (no effect: Ferry's schemas have no decimals, defaults or cache) |
//! | `org.apache.kafka.connect.storage.StringConverter` | `converter.encoding` (`UTF-8` only) |
//! | `org.apache.kafka.connect.converters.ByteArrayConverter` | none |
//!
//! `header.converter` accepts `org.apache.kafka.connect.storage.SimpleHeaderConverter` (the default)
//! only. The worker's converters default to `JsonConverter` with `schemas.enable=true`, as in Kafka
//! Connect's `connect-standalone.properties`. A connector that sets `value.converter` uses that class
//! with the connector's own `value.converter.*` settings (the worker's are not inherited), as in Kafka
//! Connect.
//!
//! The runtime reads them from the worker and connector files; a sink that converts (Kafka) gets the
//! resulting [`ConverterSpec`]s.

use crate::{ConfigError, ConverterSpec, Properties, unknown_key_hint};

/// `key.converter`: how record keys become bytes in Kafka.
pub const KEY_CONVERTER: &str = "key.converter";
/// `value.converter`: how record values become bytes in Kafka.
pub const VALUE_CONVERTER: &str = "value.converter";
/// `header.converter`: how header values become bytes in Kafka (`SimpleHeaderConverter` only).
pub const HEADER_CONVERTER: &str = "header.converter";

const JSON_CLASS: &str = ConverterSpec::Json {
    schemas_enable: true,
}
.class_name();
const STRING_CLASS: &str = ConverterSpec::String.class_name();
const BYTE_ARRAY_CLASS: &str = ConverterSpec::ByteArray.class_name();
const SIMPLE_HEADER_CLASS: &str = "org.apache.kafka.connect.storage.SimpleHeaderConverter";

const SCHEMAS_ENABLE: &str = "schemas.enable";
const ENCODING: &str = "converter.encoding";
/// JsonConverter settings that are accepted and have no effect in Ferry.
const JSON_NO_EFFECT: &[&str] = &[
    "schemas.cache.size",
    "decimal.format",
    "replace.null.with.default",
];
/// Every converter setting Ferry knows, for "did you mean" hints.
const ALL_SETTINGS: &[&str] = &[
    SCHEMAS_ENABLE,
    ENCODING,
    "schemas.cache.size",
    "decimal.format",
    "replace.null.with.default",
];

/// The converter of a class name: the full Kafka Connect name or the simple class name.
fn from_class(class: &str) -> Option<ConverterSpec> {
    let simple = |full: &'static str| full.rsplit('.').next().unwrap_or(full);
    let is = |full: &'static str| class == full || class == simple(full);
    if is(JSON_CLASS) {
        Some(ConverterSpec::Json {
            schemas_enable: true,
        })
    } else if is(STRING_CLASS) {
        Some(ConverterSpec::String)
    } else if is(BYTE_ARRAY_CLASS) {
        Some(ConverterSpec::ByteArray)
    } else {
        None
    }
}

/// Whether `key` is a converter key or setting (`value.converter`, `key.converter.schemas.enable`,
/// `header.converter`), handled by [`parse_converters`].
pub fn is_converter_key(key: &str) -> bool {
    key == KEY_CONVERTER
        || key == VALUE_CONVERTER
        || key == HEADER_CONVERTER
        || key.starts_with("key.converter.")
        || key.starts_with("value.converter.")
}

/// Whether `key` is a converter key Ferry knows (`value.converter`, `key.converter.schemas.enable`, …):
/// the values of these are public. A setting under a converter prefix that Ferry does not know is
/// refused, and, since nothing declares it, its value is never shown (it may be a credential, as
/// `value.converter.basic.auth.user.info`).
pub fn is_known_converter_key(key: &str) -> bool {
    if key == KEY_CONVERTER || key == VALUE_CONVERTER || key == HEADER_CONVERTER {
        return true;
    }
    [KEY_CONVERTER, VALUE_CONVERTER].iter().any(|role| {
        key.strip_prefix(role)
            .and_then(|rest| rest.strip_prefix('.'))
            .is_some_and(|setting| ALL_SETTINGS.contains(&setting))
    })
}

/// The converter keys a file sets, in file order (for "has no effect" warnings).
pub fn converter_keys(props: &Properties) -> Vec<&str> {
    props.keys().filter(|k| is_converter_key(k)).collect()
}

/// The key and value converters a file configures: `None` for a role whose class is not set.
///
/// Settings of a role whose class is not set are reported by `orphan_settings` (the worker applies
/// them to the default class; a connector ignores them, as Kafka Connect does). Problems are pushed to
/// `errors`, each naming the key and line.
pub fn parse_converters(
    props: &Properties,
    orphan_settings: OrphanSettings,
    errors: &mut Vec<ConfigError>,
) -> (Option<ConverterSpec>, Option<ConverterSpec>) {
    check_header_converter(props, errors);
    (
        parse_role(props, KEY_CONVERTER, orphan_settings, errors),
        parse_role(props, VALUE_CONVERTER, orphan_settings, errors),
    )
}

/// What to do with `value.converter.*` settings when `value.converter` itself is not set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrphanSettings {
    /// Worker: they configure the default converter (JsonConverter).
    ApplyToDefault,
    /// Connector: the worker's converter is used with the worker's settings; these are ignored with a
    /// WARN (Kafka Connect ignores them too).
    Ignore,
}

fn parse_role(
    props: &Properties,
    role: &str,
    orphans: OrphanSettings,
    errors: &mut Vec<ConfigError>,
) -> Option<ConverterSpec> {
    let prefix = format!("{role}.");
    let settings: Vec<&str> = props.keys().filter(|k| k.starts_with(&prefix)).collect();
    let (class_set, mut spec) = match props.get(role).map(str::trim) {
        None => (false, ConverterSpec::default()),
        Some(class) => match from_class(class) {
            Some(spec) => (true, spec),
            None => {
                errors.push(props.invalid(role,
                    format!(
                        "unknown converter class; accepted: {JSON_CLASS}, {STRING_CLASS}, {BYTE_ARRAY_CLASS} \
                         (or their simple names, e.g. JsonConverter)"
                    ),
                ));
                return None;
            }
        },
    };
    if !class_set && orphans == OrphanSettings::Ignore {
        for key in settings {
            tracing::warn!(
                file = %props.path().display(),
                key = %key,
                "{}: {key} has no effect without {role} in the same file (the worker's {role} is used with \
                 the worker's settings, as in Kafka Connect); ignored",
                props.location(key)
            );
        }
        return None;
    }
    for key in settings {
        apply_setting(props, role, key, &mut spec, errors);
    }
    Some(spec)
}

/// Applies the setting `key` of converter `role` to `spec`: refuses a bad value or an unknown
/// setting, warns about one without effect.
fn apply_setting(
    props: &Properties,
    role: &str,
    key: &str,
    spec: &mut ConverterSpec,
    errors: &mut Vec<ConfigError>,
) {
    let prefix = format!("{role}.");
    let setting = &key[prefix.len()..];
    let value = props.get(key).unwrap_or_default().trim();
    match (setting, &mut *spec) {
        (SCHEMAS_ENABLE, ConverterSpec::Json { schemas_enable }) => match java_bool(value) {
            Some(enabled) => *schemas_enable = enabled,
            None => {
                errors.push(props.invalid(key, "must be true or false (default true)".to_owned()))
            }
        },
        (ENCODING, ConverterSpec::String) => {
            if !matches!(value.to_ascii_uppercase().as_str(), "UTF-8" | "UTF8") {
                errors.push(props.invalid(key,
                    "Ferry's StringConverter writes UTF-8 only; remove the key or set it to UTF-8".to_owned(),
                ));
            }
        }
        (s, ConverterSpec::Json { .. }) if JSON_NO_EFFECT.contains(&s) => tracing::warn!(
            file = %props.path().display(),
            key = %key,
            "{}: {key} has no effect in Ferry (its schemas have no decimals, defaults or schema cache); ignored",
            props.location(key)
        ),
        (s, _) if ALL_SETTINGS.contains(&s) => tracing::warn!(
            file = %props.path().display(),
            key = %key,
            "{}: {key} is not a setting of {} ({role}); ignored",
            props.location(key),
            spec.class_name()
        ),
        (s, _) => errors.push(unknown_setting(props, &prefix, key, s)),
    }
}

/// The error for `key` (setting `setting` after `prefix`), which no converter has, with a hint.
fn unknown_setting(props: &Properties, prefix: &str, key: &str, setting: &str) -> ConfigError {
    let candidates: Vec<String> = ALL_SETTINGS
        .iter()
        .map(|c| format!("{prefix}{c}"))
        .collect();
    let hint = unknown_key_hint(
        key,
        candidates.iter().map(String::as_str),
        &[
            &format!("{prefix}{SCHEMAS_ENABLE}"),
            &format!("{prefix}{ENCODING}"),
        ],
    );
    ConfigError::UnknownKey {
        path: props.path().to_path_buf(),
        key: key.to_owned(),
        line: props.line_of(key),
        hint: format!("{setting:?} is not a converter setting Ferry knows; {hint}"),
    }
}

fn check_header_converter(props: &Properties, errors: &mut Vec<ConfigError>) {
    if let Some(class) = props.get(HEADER_CONVERTER).map(str::trim)
        && class != SIMPLE_HEADER_CLASS
        && class != "SimpleHeaderConverter"
    {
        errors.push(props.invalid(HEADER_CONVERTER,
            format!(
                "Ferry converts headers like {SIMPLE_HEADER_CLASS} only (a string header as its text, any other \
                 value as JSON); remove the key or set it to that class"
            ),
        ));
    }
}

/// Java's `ConfigDef` boolean: `true` or `false`, any case.
pub(crate) fn java_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}
