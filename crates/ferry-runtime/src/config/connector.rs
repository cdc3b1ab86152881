//! A connector configuration: Kafka Connect's connector properties file.

use std::fmt;

use ferry_api::{Config, SourceConnector};

use ferry_plugin::ConverterSpec;
use ferry_plugin::DynSinkSpec;
use ferry_plugin::Properties;
use ferry_plugin::UnknownKeyHints;
use ferry_plugin::converter_config::{self as converter, OrphanSettings};
use ferry_plugin::{ConfigError, ConfigErrors};

use crate::transforms::spec::is_chain_key;
use crate::transforms::{
    ERRORS_LOG_ENABLE, ERRORS_LOG_INCLUDE_MESSAGES, ERRORS_RETRY_DELAY_MAX_MS,
    ERRORS_RETRY_TIMEOUT, ErrorHandling, TransformRegistry, Transforms,
};

/// `name`: the connector's unique name; offsets are stored under it. Required.
pub const NAME: &str = "name";
/// `connector.class`: which connector to run. Required.
pub const CONNECTOR_CLASS: &str = "connector.class";
/// `tasks.max`: the most tasks the connector may split into (default 1).
pub const TASKS_MAX: &str = "tasks.max";
/// `errors.tolerance`: `none` (default) fails the task on a delivery error; `all` skips the record.
pub const ERRORS_TOLERANCE: &str = "errors.tolerance";

/// The most keys a connector configuration may have (a properties file, a REST request, the
/// connectors file). Real connectors use tens to a few hundred; past this, the configuration is
/// refused before any other check, so an oversized request costs little.
pub const MAX_CONNECTOR_KEYS: usize = 1000;

/// Every key the framework handles for all connectors, besides the connector's own keys (and the
/// converter settings `key.converter.*`, `value.converter.*`).
pub const COMMON_KEYS: &[&str] = &[
    NAME,
    CONNECTOR_CLASS,
    TASKS_MAX,
    ERRORS_TOLERANCE,
    "key.converter",
    "value.converter",
    "header.converter",
    ERRORS_RETRY_TIMEOUT,
    ERRORS_RETRY_DELAY_MAX_MS,
    ERRORS_LOG_ENABLE,
    ERRORS_LOG_INCLUDE_MESSAGES,
    super::exactly_once::EXACTLY_ONCE_SUPPORT,
    super::exactly_once::TRANSACTION_BOUNDARY,
    super::exactly_once::TRANSACTION_BOUNDARY_INTERVAL_MS,
    crate::worker::OFFSETS_STORAGE_TOPIC,
];

/// `errors.tolerance`: what a task does when a record cannot be delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorTolerance {
    /// `none` (default): the task fails.
    #[default]
    None,
    /// `all`: the record is skipped (counted as delivered, its offset may be committed).
    All,
}

/// One connector's configuration, checked against the connector's own keys.
#[derive(Clone)]
pub struct ConnectorConfig {
    /// `name`.
    pub name: String,
    /// `connector.class`, as written (trimmed).
    pub class: String,
    /// `tasks.max` (default 1, at least 1).
    pub tasks_max: usize,
    /// `errors.tolerance` (default `none`).
    pub errors_tolerance: ErrorTolerance,
    /// `key.converter` (+ `key.converter.*`): overrides the worker's; `None` uses the worker's.
    pub key_converter: Option<ConverterSpec>,
    /// `value.converter` (+ `value.converter.*`): overrides the worker's; `None` uses the worker's.
    pub value_converter: Option<ConverterSpec>,
    /// `transforms` and `predicates` (with their `.*` keys), checked.
    pub transforms: Transforms,
    /// `errors.retry.*` and `errors.log.*`.
    pub error_handling: ErrorHandling,
    /// Every key as given in the file, including `name` and `connector.class`; what the connector's
    /// `validate` and `task_configs` receive.
    pub props: Config,
}

/// Shows the keys, never the values of `props` (they may hold passwords).
impl fmt::Debug for ConnectorConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectorConfig")
            .field("name", &self.name)
            .field("class", &self.class)
            .field("tasks_max", &self.tasks_max)
            .field("errors_tolerance", &self.errors_tolerance)
            .field("key_converter", &self.key_converter)
            .field("value_converter", &self.value_converter)
            .field("transforms", &self.transforms.aliases())
            .field("error_handling", &self.error_handling)
            .field("props", &self.props.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ConnectorConfig {
    /// Reads a connector configuration and creates its connector, reporting every problem at once.
    ///
    /// `resolve` maps a `connector.class` to a connector (`None`: unknown class). Checks, in order:
    /// `name` and `connector.class` set; `tasks.max` an integer ≥ 1; `errors.tolerance` `none` or
    /// `all`; every key a common key ([`COMMON_KEYS`]) or one of the connector's
    /// [`config_keys`](SourceConnector::config_keys); the connector's required keys set; then the
    /// connector's own [`validate`](SourceConnector::validate), whose issues carry the file and line.
    /// Keys cannot be checked when the class is unknown, and `validate` runs only once every required
    /// key is set. `key.converter` / `value.converter` (with their `.*` settings) override the worker's
    /// converters for this connector; settings without their class are ignored with a WARN, as Kafka
    /// Connect ignores them.
    ///
    /// # Errors
    /// Every problem found, each naming the file, the key and its line; only
    /// [`ConfigError::TooManyKeys`] past [`MAX_CONNECTOR_KEYS`] keys.
    pub fn from_properties(
        props: &Properties,
        resolve: impl Fn(&str) -> Option<Box<dyn SourceConnector>>,
    ) -> Result<(ConnectorConfig, Box<dyn SourceConnector>), ConfigErrors> {
        Self::from_properties_with(props, resolve, &TransformRegistry::default(), None)
    }

    /// [`from_properties`](Self::from_properties) with the transformations and predicates of
    /// `registry` (the built-in ones and those plugins add), for a worker writing to `sink`: the
    /// connector keys the sink reads itself ([`DynSinkSpec::handles_connector_key`]) are accepted and
    /// checked by it ([`DynSinkSpec::check_connector`], with the worker's settings). Without a sink
    /// they are unknown.
    ///
    /// # Errors
    /// As [`from_properties`](Self::from_properties), and the sink's issues.
    pub fn from_properties_with(
        props: &Properties,
        resolve: impl Fn(&str) -> Option<Box<dyn SourceConnector>>,
        registry: &TransformRegistry,
        sink: Option<&dyn DynSinkSpec>,
    ) -> Result<(ConnectorConfig, Box<dyn SourceConnector>), ConfigErrors> {
        if props.len() > MAX_CONNECTOR_KEYS {
            return Err(ConfigError::TooManyKeys {
                path: props.path().to_path_buf(),
                count: props.len(),
                limit: MAX_CONNECTOR_KEYS,
            }
            .into());
        }
        let mut errors = Vec::new();

        let name = match props.get(NAME) {
            None => {
                errors.push(missing(
                    props,
                    NAME,
                    "set it to the connector's unique name, e.g. name=local-file-source",
                ));
                None
            }
            Some(name) => match check_name(name) {
                Ok(()) => Some(name.to_owned()),
                Err(message) => {
                    errors.push(props.invalid(NAME, message));
                    None
                }
            },
        };

        let class = props.get(CONNECTOR_CLASS).map(str::trim);
        let connector = match class {
            None => {
                let hint = "set it to the connector to run, e.g. connector.class=FileStreamSource";
                errors.push(missing(props, CONNECTOR_CLASS, hint));
                None
            }
            Some(class) => {
                let connector = resolve(class);
                if connector.is_none() {
                    let message = "unknown connector class: no connector of this class is built into Ferry \
                                   (the name or alias is case-sensitive)";
                    errors.push(props.invalid(CONNECTOR_CLASS, message));
                }
                connector
            }
        };

        let tasks_max = match props.get(TASKS_MAX) {
            None => 1,
            Some(text) => match text.trim().parse::<usize>() {
                Ok(n) if n >= 1 && i32::try_from(n).is_ok() => n,
                _ => {
                    errors.push(props.invalid(
                        TASKS_MAX,
                        "must be a whole number from 1 to 2147483647 (default 1)",
                    ));
                    1
                }
            },
        };

        let errors_tolerance = match props
            .get(ERRORS_TOLERANCE)
            .map(|t| t.trim().to_ascii_lowercase())
            .as_deref()
        {
            None | Some("none") => ErrorTolerance::None,
            Some("all") => ErrorTolerance::All,
            Some(_) => {
                errors
                    .push(props.invalid(ERRORS_TOLERANCE, "accepted values: none (default), all"));
                ErrorTolerance::None
            }
        };

        let (key_converter, value_converter) =
            converter::parse_converters(props, OrphanSettings::Ignore, &mut errors);

        let config = props.to_config();
        let transforms = Transforms::parse(&config, registry).unwrap_or_else(|issues| {
            errors.extend(issues.into_iter().map(|(k, m)| props.invalid(&k, m)));
            Transforms::default()
        });
        let error_handling = ErrorHandling::parse(&config).unwrap_or_else(|issues| {
            errors.extend(issues.into_iter().map(|(k, m)| props.invalid(&k, m)));
            ErrorHandling::default()
        });
        if let Err(issues) = super::exactly_once::ConnectorExactlyOnce::parse(&config) {
            errors.extend(issues.into_iter().map(|(k, m)| props.invalid(&k, m)));
        }

        if let Some(connector) = &connector {
            check_connector_keys(props, connector.as_ref(), sink, &mut errors);
        }

        match (name, class, connector) {
            (Some(name), Some(class), Some(connector)) if errors.is_empty() => Ok((
                ConnectorConfig {
                    name,
                    class: class.to_owned(),
                    tasks_max,
                    errors_tolerance,
                    key_converter,
                    value_converter,
                    transforms,
                    error_handling,
                    props: config,
                },
                connector,
            )),
            _ => Err(ConfigErrors::in_file_order(errors)),
        }
    }
}

/// Unknown keys, missing required keys, then (if all required keys are set) the connector's `validate`.
fn check_connector_keys(
    props: &Properties,
    connector: &dyn SourceConnector,
    sink: Option<&dyn DynSinkSpec>,
    errors: &mut Vec<ConfigError>,
) {
    let keys = connector.config_keys();
    let accepted: Vec<&str> = COMMON_KEYS
        .iter()
        .copied()
        .chain(keys.iter().map(|k| k.name))
        .collect();
    let mut hints = UnknownKeyHints::new(&accepted);
    for key in props
        .keys()
        .filter(|k| !accepted.contains(k) && !converter::is_converter_key(k) && !is_chain_key(k))
        .filter(|k| !sink.is_some_and(|s| s.handles_connector_key(k)))
    {
        if let Some(what) = ferry_plugin::not_implemented_connector_key(key) {
            errors.push(ConfigError::NotImplemented {
                path: props.path().to_path_buf(),
                key: key.to_owned(),
                line: props.line_of(key),
                what: what.to_owned(),
            });
            continue;
        }
        errors.push(ConfigError::UnknownKey {
            path: props.path().to_path_buf(),
            key: key.to_owned(),
            line: props.line_of(key),
            hint: hints.hint(key, accepted.iter().copied()),
        });
    }
    if let Some(sink) = sink {
        // The sink's keys are not declared here, so their values stay hidden in messages.
        for issue in sink.check_connector(&props.to_config()) {
            errors.push(props.invalid_undeclared(&issue.key, issue.message));
        }
    }
    let mut all_required_set = true;
    for key in keys
        .iter()
        .filter(|k| k.required && props.get(k.name).is_none())
    {
        all_required_set = false;
        errors.push(missing(props, key.name, key.doc));
    }
    if all_required_set {
        for issue in connector.validate(&props.to_config()) {
            // A declared key shows its value only as its secrecy allows; the framework's own keys are
            // public; a key nobody declares never has its value shown.
            let error = match keys.iter().find(|k| k.name == issue.key) {
                Some(key) => props.invalid_secret(key, issue.message),
                None if is_framework_key(&issue.key) => props.invalid(&issue.key, issue.message),
                None => props.invalid_undeclared(&issue.key, issue.message),
            };
            errors.push(error);
        }
    }
}

/// Whether `key` is one the framework declares for every connector ([`COMMON_KEYS`], the converter
/// settings Ferry knows): keys whose values are public.
pub fn is_framework_key(key: &str) -> bool {
    COMMON_KEYS.contains(&key) || converter::is_known_converter_key(key) || is_chain_key(key)
}

/// Kafka Connect requires a non-empty name without control characters. Surrounding whitespace is
/// refused too: offsets are stored under the exact name, so `"src "` and `"src"` would be two
/// connectors with separate offsets.
fn check_name(name: &str) -> Result<(), &'static str> {
    if name.trim().is_empty() {
        Err("must not be empty")
    } else if name.chars().any(char::is_control) {
        Err("must not contain control characters")
    } else if name.trim() != name {
        Err(
            "has leading or trailing whitespace; offsets are stored under the exact name, so remove it",
        )
    } else {
        Ok(())
    }
}

fn missing(props: &Properties, key: &str, hint: &str) -> ConfigError {
    ConfigError::Missing {
        path: props.path().to_path_buf(),
        key: key.to_owned(),
        hint: hint.to_owned(),
    }
}
