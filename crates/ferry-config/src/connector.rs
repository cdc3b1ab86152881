//! A connector configuration: Kafka Connect's connector properties file.

use std::fmt;

use ferry_api::{Config, ConfigKey, ConfigType, Importance, SourceConnector};

use ferry_plugin::ConverterSpec;
use ferry_plugin::DynSinkSpec;
use ferry_plugin::Properties;
use ferry_plugin::UnknownKeyHints;
use ferry_plugin::converter_config::{self as converter, OrphanSettings};
use ferry_plugin::{ConfigError, ConfigErrors, FrameworkKey, Width};

use ferry_transforms::chain::is_chain_key;
use ferry_transforms::chain::{
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

/// Every key the framework reads for every connector, besides the connector's own keys (and the
/// converter settings `key.converter.*`, `value.converter.*`, and the `transforms.<alias>.*` and
/// `predicates.<alias>.*` keys of the chain), with Kafka Connect's definitions: validation accepts
/// them, `GET /connector-plugins/{p}/config` and the generated reference show them.
pub const CONNECTOR_KEYS: &[FrameworkKey] = &[
    FrameworkKey::new(
        ConfigKey::required(NAME, "Globally unique name to use for this connector; its offsets are stored under it.")
        .of_type(ConfigType::String)
        .importance(Importance::High),
        "Common",
        1,
        Width::Medium,
        "Connector name",
    ),
    FrameworkKey::new(
        ConfigKey::required(CONNECTOR_CLASS, "Name or alias of the class for this connector.")
        .of_type(ConfigType::String)
        .importance(Importance::High),
        "Common",
        2,
        Width::Long,
        "Connector class",
    ),
    FrameworkKey::new(
        ConfigKey::optional(TASKS_MAX, Some("1"), "Maximum number of tasks to use for this connector.")
        .of_type(ConfigType::Int)
        .importance(Importance::High),
        "Common",
        3,
        Width::Short,
        "Tasks max",
    ),
    FrameworkKey::new(
        ConfigKey::optional(converter::KEY_CONVERTER, None, "Converter class used to convert between Kafka Connect format and the serialized form written to Kafka (record keys). Overrides the worker's.")
        .of_type(ConfigType::Class)
        .importance(Importance::Low),
        "Common",
        5,
        Width::Short,
        "Key converter class",
    ),
    FrameworkKey::new(
        ConfigKey::optional(converter::VALUE_CONVERTER, None, "Converter class used to convert between Kafka Connect format and the serialized form written to Kafka (record values). Overrides the worker's.")
        .of_type(ConfigType::Class)
        .importance(Importance::Low),
        "Common",
        6,
        Width::Short,
        "Value converter class",
    ),
    FrameworkKey::new(
        ConfigKey::optional(converter::HEADER_CONVERTER, None, "HeaderConverter class (only SimpleHeaderConverter).")
        .of_type(ConfigType::Class)
        .importance(Importance::Low),
        "Common",
        7,
        Width::Short,
        "Header converter class",
    ),
    FrameworkKey::new(
        ConfigKey::optional(ERRORS_TOLERANCE, Some("none"), "Behavior for tolerating errors during delivery: 'none' fails the task, 'all' skips the record.")
        .of_type(ConfigType::String)
        .importance(Importance::Medium),
        "Error Handling",
        2,
        Width::Short,
        "Error Tolerance",
    ),
    FrameworkKey::new(
        ConfigKey::optional("transforms", Some(""), "Aliases for the transformations to be applied to records.")
        .of_type(ConfigType::List)
        .importance(Importance::Low),
        "Transforms",
        6,
        Width::Long,
        "Transforms",
    ),
    FrameworkKey::new(
        ConfigKey::optional("predicates", Some(""), "Aliases for the predicates used by transformations.")
        .of_type(ConfigType::List)
        .importance(Importance::Low),
        "Predicates",
        7,
        Width::Long,
        "Predicates",
    ),
    FrameworkKey::new(
        ConfigKey::optional(ERRORS_RETRY_TIMEOUT, Some("0"), "The maximum duration in milliseconds that a failed transformation will be reattempted. The default is 0, which means no retries will be attempted. Use -1 for infinite retries.")
        .of_type(ConfigType::Long)
        .importance(Importance::Medium),
        "Error Handling",
        1,
        Width::Medium,
        "Retry Timeout for Errors",
    ),
    FrameworkKey::new(
        ConfigKey::optional(ERRORS_RETRY_DELAY_MAX_MS, Some("60000"), "The maximum duration in milliseconds between consecutive retry attempts.")
        .of_type(ConfigType::Long)
        .importance(Importance::Medium),
        "Error Handling",
        2,
        Width::Medium,
        "Maximum Delay Between Retries for Errors",
    ),
    FrameworkKey::new(
        ConfigKey::optional(ERRORS_LOG_ENABLE, Some("false"), "If true, write each error and the details of the failed operation and problematic record to the Connect application log.")
        .of_type(ConfigType::Boolean)
        .importance(Importance::Medium),
        "Error Handling",
        4,
        Width::Short,
        "Log Errors",
    ),
    FrameworkKey::new(
        ConfigKey::optional(ERRORS_LOG_INCLUDE_MESSAGES, Some("false"), "Whether to include in the log the Connect record that resulted in a failure.")
        .of_type(ConfigType::Boolean)
        .importance(Importance::Medium),
        "Error Handling",
        5,
        Width::Short,
        "Log Error Details",
    ),
    FrameworkKey::new(
        ConfigKey::optional(super::exactly_once::EXACTLY_ONCE_SUPPORT, Some("requested"), "Permitted values are requested, required. If set to \"required\", forces a preflight check for the connector to ensure that it can provide exactly-once semantics with the given configuration. Some connectors may be capable of providing exactly-once semantics but not signal to Connect that they support this; in that case, documentation for the connector should be consulted carefully before creating it, and the value for this property should be set to \"requested\". Additionally, if the value is set to \"required\" but the worker that performs preflight validation does not have exactly-once support enabled for source connectors, requests to create or validate the connector will fail.")
        .of_type(ConfigType::String)
        .importance(Importance::Medium),
        "Exactly Once Support",
        2,
        Width::Short,
        "Exactly once support",
    ),
    FrameworkKey::new(
        ConfigKey::optional(super::exactly_once::TRANSACTION_BOUNDARY, Some("poll"), "Permitted values are: poll, interval, connector. If set to 'poll', a new producer transaction will be started and committed for every batch of records that each task from this connector provides to Connect. If set to 'connector', relies on connector-defined transaction boundaries; note that not all connectors are capable of defining their own transaction boundaries, and in that case, attempts to instantiate a connector with this value will fail. Finally, if set to 'interval', commits transactions only after a user-defined time interval has passed.")
        .of_type(ConfigType::String)
        .importance(Importance::Medium),
        "Exactly Once Support",
        3,
        Width::Short,
        "Transaction Boundary",
    ),
    FrameworkKey::new(
        ConfigKey::optional(super::exactly_once::TRANSACTION_BOUNDARY_INTERVAL_MS, None, "If 'transaction.boundary' is set to 'interval', determines the interval for producer transaction commits by connector tasks. If unset, defaults to the value of the worker-level 'offset.flush.interval.ms' property. It has no effect if a different transaction.boundary is specified.")
        .of_type(ConfigType::Long)
        .importance(Importance::Low),
        "Exactly Once Support",
        4,
        Width::Short,
        "Transaction boundary interval",
    ),
    FrameworkKey::new(
        ConfigKey::optional(crate::OFFSETS_STORAGE_TOPIC, None, "The name of a separate offsets topic to use for this connector. If empty or not specified, the worker’s global offsets topic name will be used. If specified, the offsets topic will be created if it does not already exist on the Kafka cluster targeted by this connector (which may be different from the one used for the worker's global offsets topic if the bootstrap.servers property of the connector's producer has been overridden from the worker's). Only applicable in distributed mode; in standalone mode, setting this property will have no effect.")
        .of_type(ConfigType::String)
        .importance(Importance::Low),
        "offsets.topic",
        1,
        Width::Long,
        "Offsets topic",
    ),
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
    /// `all`; every key a common key ([`CONNECTOR_KEYS`]) or one of the connector's
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

        let name = name(props, &mut errors);
        let class = props.get(CONNECTOR_CLASS).map(str::trim);
        let connector = connector(props, class, resolve, &mut errors);
        let tasks_max = tasks_max(props, &mut errors);
        let errors_tolerance = errors_tolerance(props, &mut errors);
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

/// `name`: set, and a name Kafka Connect accepts.
fn name(props: &Properties, errors: &mut Vec<ConfigError>) -> Option<String> {
    match props.get(NAME) {
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
    }
}

/// `connector.class`: set, and a class `resolve` knows.
fn connector(
    props: &Properties,
    class: Option<&str>,
    resolve: impl Fn(&str) -> Option<Box<dyn SourceConnector>>,
    errors: &mut Vec<ConfigError>,
) -> Option<Box<dyn SourceConnector>> {
    let Some(class) = class else {
        let hint = "set it to the connector to run, e.g. connector.class=FileStreamSource";
        errors.push(missing(props, CONNECTOR_CLASS, hint));
        return None;
    };
    let connector = resolve(class);
    if connector.is_none() {
        let message = "unknown connector class: no connector of this class is built into Ferry \
                       (the name or alias is case-sensitive)";
        errors.push(props.invalid(CONNECTOR_CLASS, message));
    }
    connector
}

/// `tasks.max`: 1 to `i32::MAX`, default 1.
fn tasks_max(props: &Properties, errors: &mut Vec<ConfigError>) -> usize {
    match props.get(TASKS_MAX) {
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
    }
}

/// `errors.tolerance`: `none` (default) or `all`.
fn errors_tolerance(props: &Properties, errors: &mut Vec<ConfigError>) -> ErrorTolerance {
    match props
        .get(ERRORS_TOLERANCE)
        .map(|t| t.trim().to_ascii_lowercase())
        .as_deref()
    {
        None | Some("none") => ErrorTolerance::None,
        Some("all") => ErrorTolerance::All,
        Some(_) => {
            errors.push(props.invalid(ERRORS_TOLERANCE, "accepted values: none (default), all"));
            ErrorTolerance::None
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
    let accepted: Vec<&str> = CONNECTOR_KEYS
        .iter()
        .map(FrameworkKey::name)
        .chain(keys.iter().map(|k| k.name))
        .collect();
    let mut hints = UnknownKeyHints::new(&accepted);
    for key in props
        .keys()
        .filter(|k| !accepted.contains(k) && !converter::is_converter_key(k) && !is_chain_key(k))
        .filter(|k| !sink.is_some_and(|s| s.handles_connector_key(k)))
    {
        if let Some(what) = ferry_plugin::not_implemented_connector_key(key) {
            errors.push(props.not_implemented(key, what));
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

/// Whether `key` is one the framework declares for every connector ([`CONNECTOR_KEYS`], the
/// converter settings Ferry knows): keys whose values are public.
pub fn is_framework_key(key: &str) -> bool {
    CONNECTOR_KEYS.iter().any(|k| k.name() == key)
        || converter::is_known_converter_key(key)
        || is_chain_key(key)
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
