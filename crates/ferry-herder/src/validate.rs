//! Connector plugins and configuration checks: the same checks as a connector properties file
//! ([`ConnectorConfig::from_properties`], including the connector's own `validate`), reported as Kafka
//! Connect reports them over REST — a `400` listing every error, or a `ConfigInfos` document.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ferry_api::{Config, ConfigKey, HIDDEN, SourceConnector};
use ferry_plugin::DynSinkSpec;

use super::HerderError;
use super::entities::{ConfigInfo, ConfigInfos, ConfigKeyInfo, ConfigValueInfo, PluginInfo};
use ferry_runtime::config::exactly_once::{self, ExactlyOnceSource};
use ferry_runtime::config::{
    CONNECTOR_CLASS, CONNECTOR_KEYS, ConfigError, ConfigProviders, ConnectorConfig, Properties,
    is_framework_key, scrub,
};
use ferry_runtime::transforms::TransformRegistry;

/// A connector plugin: the class names it answers to and how to make one.
pub use ferry_api::ConnectorPlugin as Plugin;

/// Placeholders of a stored task configuration that cannot be resolved; its `Display` is their
/// messages, joined by `; `.
#[derive(Debug, thiserror::Error)]
#[error("{}", messages(errors))]
pub(crate) struct UnresolvedPlaceholders {
    /// Each key whose value cannot be resolved, with the config provider's reason (which names the
    /// key, never a value).
    pub(crate) errors: Vec<(String, String)>,
}

fn messages(errors: &[(String, String)]) -> String {
    let messages: Vec<&str> = errors.iter().map(|(_, m)| m.as_str()).collect();
    messages.join("; ")
}

/// The connector plugins a herder knows, the worker's config providers (placeholders in
/// connector configurations are resolved here, for every herder, when a connector is checked), and
/// the transformations and predicates connectors may use.
#[derive(Clone, Default)]
pub(crate) struct Plugins(
    Vec<Plugin>,
    Arc<ConfigProviders>,
    Arc<TransformRegistry>,
    Option<Arc<dyn DynSinkSpec>>,
    ExactlyOnceSource,
);

impl Plugins {
    pub(crate) fn new(plugins: Vec<Plugin>) -> Self {
        Self(
            plugins,
            Arc::default(),
            Arc::default(),
            None,
            ExactlyOnceSource::default(),
        )
    }

    /// The worker's `exactly.once.source.support`, for the preflight checks of
    /// `exactly.once.support=required` ([`exactly_once::preflight`]).
    pub(crate) fn set_exactly_once(&mut self, worker: ExactlyOnceSource) {
        self.4 = worker;
    }

    /// Uses `registry`'s transformations and predicates.
    pub(crate) fn set_transforms(&mut self, registry: TransformRegistry) {
        self.2 = Arc::new(registry);
    }

    /// The worker's sink: the connector keys it reads itself are accepted and checked by it.
    pub(crate) fn set_sink(&mut self, sink: Arc<dyn DynSinkSpec>) {
        self.3 = Some(sink);
    }

    fn check_config(
        &self,
        props: &Properties,
    ) -> Result<(ConnectorConfig, Box<dyn SourceConnector>), ferry_runtime::config::ConfigErrors>
    {
        let checked = ConnectorConfig::from_properties_with(
            props,
            |c| self.resolve(c),
            &self.2,
            self.3.as_deref(),
        );
        let config = props.to_config();
        let preflight = match &checked {
            Ok((_, connector)) => exactly_once::preflight(self.4, connector.as_ref(), &config),
            Err(_) => config
                .get(CONNECTOR_CLASS)
                .and_then(|class| self.resolve(class.trim()))
                .map(|connector| exactly_once::preflight(self.4, connector.as_ref(), &config))
                .unwrap_or_default(),
        };
        if preflight.is_empty() {
            return checked;
        }
        let mut errors = match checked {
            Ok(_) => ferry_runtime::config::ConfigErrors(Vec::new()),
            Err(errors) => errors,
        };
        errors
            .0
            .extend(preflight.into_iter().map(|(k, m)| props.invalid(&k, m)));
        Err(errors)
    }

    pub(crate) fn set_providers(&mut self, providers: ConfigProviders) {
        self.1 = Arc::new(providers);
    }

    /// Task configurations made from a resolved configuration, with `raw`'s placeholders put back
    /// (what the config store keeps).
    pub(crate) fn unresolve(
        &self,
        raw: &Config,
        resolved: &Config,
        tasks: Vec<Config>,
    ) -> Vec<Config> {
        ConfigProviders::unresolve(raw, resolved, tasks)
    }

    /// A stored task configuration with its placeholders resolved (what the task runs with).
    ///
    /// # Errors
    /// Why a placeholder cannot be resolved (naming the key, never a value).
    pub(crate) fn resolve_task(
        &self,
        task: &Config,
    ) -> Result<(Config, Vec<String>), UnresolvedPlaceholders> {
        self.1
            .resolve(task)
            .map(|r| (r.config, r.secrets))
            .map_err(|errors| UnresolvedPlaceholders { errors })
    }

    /// A new connector of `class` (exact match of any of its names).
    pub(crate) fn resolve(&self, class: &str) -> Option<Box<dyn SourceConnector>> {
        self.0
            .iter()
            .find(|p| p.answers_to(class))
            .map(Plugin::make)
    }

    /// The version of the connector plugin `class` names, if one does.
    pub(crate) fn version_of(&self, class: &str) -> Option<String> {
        self.0
            .iter()
            .find(|p| p.answers_to(class.trim()))
            .map(|p| p.make().version())
    }

    pub(crate) fn infos(&self) -> Vec<PluginInfo> {
        self.0
            .iter()
            .map(|p| PluginInfo {
                class: p.class().to_owned(),
                kind: "source",
                version: p.make().version(),
            })
            .collect()
    }

    /// The transformations and predicates, as `GET /connector-plugins?connectorsOnly=false` lists
    /// them (Kafka Connect lists their version as the worker's).
    pub(crate) fn transform_infos(&self) -> Vec<PluginInfo> {
        let version = env!("CARGO_PKG_VERSION");
        let transformations = self.2.transformations().iter().map(|p| PluginInfo {
            class: p.class().to_owned(),
            kind: "transformation",
            version: version.to_owned(),
        });
        let predicates = self.2.predicates().iter().map(|p| PluginInfo {
            class: p.class().to_owned(),
            kind: "predicate",
            version: version.to_owned(),
        });
        transformations.chain(predicates).collect()
    }

    /// `GET /connector-plugins/{plugin}/config`, as Kafka Connect lists it: a connector's own keys
    /// (typed), then the framework's connector keys it does not define itself; a transformation's or
    /// a predicate's own keys.
    ///
    /// # Errors
    /// 404 when no connector, transformation or predicate answers to `plugin`.
    pub(crate) fn config_keys(&self, plugin: &str) -> Result<Vec<ConfigKeyInfo>, HerderError> {
        let keys = |keys: Vec<ConfigKey>| keys.iter().map(connector_key).collect::<Vec<_>>();
        if let Some(connector) = self.resolve(plugin) {
            let mut definitions = keys(connector.config_keys());
            let own: HashSet<String> = definitions.iter().map(|d| d.name.clone()).collect();
            definitions.extend(
                common_definitions()
                    .into_iter()
                    .filter(|d| !own.contains(&d.name)),
            );
            return Ok(definitions);
        }
        if let Some(t) = self
            .2
            .transformations()
            .iter()
            .find(|t| t.answers_to(plugin))
        {
            return Ok(keys(t.make().config_keys()));
        }
        if let Some(p) = self.2.predicates().iter().find(|p| p.answers_to(plugin)) {
            return Ok(keys(p.make().config_keys()));
        }
        Err(HerderError::not_found(format!("Unknown plugin {plugin}.")))
    }

    /// Kafka Connect's message for an unknown class.
    fn unknown(&self, class: &str) -> HerderError {
        let available: Vec<&str> = self.0.iter().map(Plugin::class).collect();
        HerderError::bad_request(format!(
            "Failed to find any class that implements Connector and which name matches {class}, available \
             connectors are: {}",
            available.join(", ")
        ))
    }
}

/// Checks a connector configuration received over REST (or kept in the connectors file) and makes its
/// connector.
///
/// # Errors
/// `400` with Kafka Connect's messages: no `connector.class`, an unknown class, or the list of every
/// invalid key.
pub(crate) fn check(
    plugins: &Plugins,
    name: &str,
    config: &Config,
) -> Result<(ConnectorConfig, Box<dyn SourceConnector>), HerderError> {
    check_resolved(plugins, name, config).map(|(config, connector, _)| (config, connector))
}

/// A checked configuration (placeholders resolved), its connector, and the resolved values.
pub(crate) type Checked = (ConnectorConfig, Box<dyn SourceConnector>, Vec<String>);

/// [`check`], with the config providers' placeholders resolved: the configuration returned holds
/// the resolved values, listed (as secrets to keep out of messages) in the third element.
///
/// # Errors
/// As [`check`]; also every placeholder that cannot be resolved, naming its key.
pub(crate) fn check_resolved(
    plugins: &Plugins,
    name: &str,
    config: &Config,
) -> Result<Checked, HerderError> {
    let class = connector_class(config)?;
    let Some(connector) = plugins.resolve(class) else {
        return Err(plugins.unknown(class));
    };
    let resolved = plugins.1.resolve(config).map_err(|errors| {
        let messages: Vec<String> = errors.into_iter().map(|(_, m)| m).collect();
        invalid(messages)
    })?;
    let keys = connector.config_keys();
    let secrets = resolved.secrets;
    let props = Properties::from_pairs(format!("connector {name}"), resolved.config);
    match plugins.check_config(&props) {
        Ok((checked, connector)) => Ok((checked, connector, secrets)),
        Err(errors) => Err(invalid(
            errors
                .iter()
                .map(|e| scrub(describe(e, &keys).1, &secrets))
                .collect(),
        )),
    }
}

/// Kafka Connect's `400` for an invalid connector configuration.
fn invalid(messages: Vec<String>) -> HerderError {
    HerderError::bad_request(format!(
        "Connector configuration is invalid and contains the following {} error(s):\n{}\nYou can also \
         find the above list of errors at the endpoint `/connector-plugins/{{connectorType}}/config/validate`",
        messages.len(),
        messages.join("\n")
    ))
}

/// `PUT /connector-plugins/{plugin}/config/validate`.
///
/// # Errors
/// `400` when `connector.class` is missing, does not match `plugin`, or names no known connector.
pub(crate) fn validate(
    plugins: &Plugins,
    plugin: &str,
    config: &Config,
) -> Result<ConfigInfos, HerderError> {
    if let Some(included) = config.get(CONNECTOR_CLASS)
        && !normalized(included).ends_with(normalized(plugin))
    {
        return Err(HerderError::bad_request(format!(
            "Included connector type {included} does not match request type {plugin}"
        )));
    }
    let class = connector_class(config)?;
    let connector = plugins
        .resolve(class.trim())
        .ok_or_else(|| plugins.unknown(class))?;
    let keys = connector.config_keys();
    // Placeholders are resolved as when the connector starts (as Kafka Connect's validation does);
    // one that cannot be is an error of its key, checked further with its placeholder text.
    let (resolved, secrets, mut errors) = match plugins.1.resolve(config) {
        Ok(resolved) => (resolved.config, resolved.secrets, Vec::new()),
        Err(errors) => (
            config.clone(),
            Vec::new(),
            errors.into_iter().map(|(k, m)| (Some(k), m)).collect(),
        ),
    };
    let props = Properties::from_pairs("validate request", resolved.clone());
    match plugins.check_config(&props) {
        Ok(_) => {}
        // A configuration without `name` is reported too: Kafka Connect 4.4's validation does
        // (checked against it by the REST differential test).
        Err(found) => errors.extend(found.iter().map(|e| describe(e, &keys))),
    }
    // The connector's own checks are skipped above while a required key is missing; a validation
    // reports every key's problems at once, as Kafka Connect's does.
    let missing_required = errors
        .iter()
        .any(|(_, m)| m.starts_with("Missing required configuration"));
    if missing_required {
        for issue in connector.validate(&resolved) {
            if !errors
                .iter()
                .any(|(k, _)| k.as_deref() == Some(issue.key.as_str()))
            {
                let error = match keys.iter().find(|k| k.name == issue.key) {
                    Some(key) => props.invalid_secret(key, issue.message),
                    None if is_framework_key(&issue.key) => {
                        props.invalid(&issue.key, issue.message)
                    }
                    None => props.invalid_undeclared(&issue.key, issue.message),
                };
                errors.push(describe(&error, &keys));
            }
        }
    }
    for (_, message) in &mut errors {
        *message = scrub(std::mem::take(message), &secrets);
    }
    Ok(config_infos(
        class,
        config,
        connector.as_ref(),
        &errors,
        &plugins.2,
    ))
}

fn connector_class(config: &Config) -> Result<&str, HerderError> {
    config
        .get(CONNECTOR_CLASS)
        .map(|c| c.trim())
        .ok_or_else(|| {
            HerderError::bad_request(format!(
                "Connector config {} contains no connector type",
                // No class, so no connector declares its keys: only the framework's values are shown.
                java_map(config, &[])
            ))
        })
}

/// Kafka Connect's plugin-name rule: `FooConnector` and `Foo` are the same plugin.
fn normalized(name: &str) -> &str {
    match name.strip_suffix("Connector") {
        Some(stripped) if !stripped.is_empty() => stripped,
        _ => name,
    }
}

/// What messages and REST bodies may show of `key`'s value, decided by the declarations: the
/// connector's ([`ConfigKey::shown`]); the framework's own keys are public; a key nobody declares
/// (refused anyway) never has its value shown. Applying it to a value already shown this way changes
/// nothing.
fn shown(keys: &[ConfigKey], key: &str, value: &str) -> String {
    match keys.iter().find(|k| k.name == key) {
        Some(declared) => declared.shown(value).into_owned(),
        None if is_framework_key(key) => value.to_owned(),
        None => HIDDEN.to_owned(),
    }
}

/// `{k=v, k2=v2}` as Java prints a map, with secret values hidden.
fn java_map(config: &Config, keys: &[ConfigKey]) -> String {
    let entries: Vec<String> = config
        .iter()
        .map(|(k, v)| format!("{k}={}", shown(keys, k, v)))
        .collect();
    format!("{{{}}}", entries.join(", "))
}

/// The key of a problem and Kafka Connect's wording of it.
fn describe(error: &ConfigError, keys: &[ConfigKey]) -> (Option<String>, String) {
    let key = error.key().map(str::to_owned);
    let message = match error {
        ConfigError::Invalid {
            key,
            value,
            message,
            ..
        } => match value {
            Some(value) => format!(
                "Invalid value {} for configuration {key}: {message}",
                shown(keys, key, value)
            ),
            None => format!("Invalid configuration {key}: {message}"),
        },
        ConfigError::Missing { key, hint, .. } => {
            format!("Missing required configuration \"{key}\" which has no default value. {hint}")
        }
        ConfigError::UnknownKey { key, hint, .. } => {
            format!("Unknown configuration \"{key}\" (Ferry refuses keys it does not use): {hint}")
        }
        other => other.to_string(),
    };
    (key, message)
}

/// The framework's connector keys (`name`, `connector.class`, `tasks.max`, converters, `errors.*`…),
/// from their one definition ([`CONNECTOR_KEYS`]).
fn common_definitions() -> Vec<ConfigKeyInfo> {
    CONNECTOR_KEYS
        .iter()
        .map(|k| ConfigKeyInfo {
            name: k.name().to_owned(),
            kind: k.key.config_type().name(),
            required: k.key.required,
            default_value: k.key.default.map(str::to_owned),
            importance: k.key.config_importance().name(),
            documentation: k.key.doc.to_owned(),
            group: Some(k.group),
            order: k.order,
            width: k.width.name(),
            display_name: k.display_name.to_owned(),
            dependents: Vec::new(),
        })
        .collect()
}

fn config_infos(
    class: &str,
    config: &Config,
    connector: &dyn SourceConnector,
    errors: &[(Option<String>, String)],
    registry: &TransformRegistry,
) -> ConfigInfos {
    let mut definitions = common_definitions();
    let keys = connector.config_keys();
    definitions.extend(keys.iter().map(connector_key));
    definitions.extend(chain_definitions(config, registry));
    // Errors by key, looked up once per definition (not a scan of every error per key: a request with
    // many unknown keys would cost their number squared).
    let mut by_key: HashMap<&str, Vec<String>> = HashMap::new();
    for (key, message) in errors {
        if let Some(key) = key {
            by_key.entry(key).or_default().push(message.clone());
        }
    }
    // Keys with errors that no definition covers (unknown keys) get an entry of their own.
    let defined: HashSet<String> = definitions.iter().map(|d| d.name.clone()).collect();
    let mut added: HashSet<&str> = HashSet::new();
    for key in errors.iter().filter_map(|(k, _)| k.as_deref()) {
        if !defined.contains(key) && added.insert(key) {
            definitions.push(plain_key(key, false, None, "Not a key of this connector."));
        }
    }
    let configs: Vec<ConfigInfo> = definitions
        .into_iter()
        .map(|definition| {
            let key_errors = by_key
                .get(definition.name.as_str())
                .cloned()
                .unwrap_or_default();
            let value = config
                .get(&definition.name)
                .map(|v| shown(&keys, &definition.name, v))
                .or_else(|| definition.default_value.clone());
            ConfigInfo {
                value: ConfigValueInfo {
                    name: definition.name.clone(),
                    value,
                    recommended_values: Vec::new(),
                    errors: key_errors,
                    visible: true,
                },
                definition,
            }
        })
        .collect();
    let error_count = configs.iter().map(|c| c.value.errors.len()).sum::<usize>()
        + errors.iter().filter(|(k, _)| k.is_none()).count();
    ConfigInfos {
        name: class.to_owned(),
        error_count,
        groups: vec!["Common".to_owned(), "Error Handling".to_owned()],
        configs,
    }
}

/// The definitions of the listed transforms' and predicates' keys (as Kafka Connect adds them to a
/// validation): `type`, `negate` and `predicate` of each transform, `type` of each predicate, and the
/// keys each declares, all under their alias's prefix.
fn chain_definitions(config: &Config, registry: &TransformRegistry) -> Vec<ConfigKeyInfo> {
    let list = |key: &str| ferry_runtime::transforms::aliases(config.get(key));
    let mut definitions = Vec::new();
    for alias in list("transforms") {
        let prefix = format!("transforms.{alias}.");
        definitions.push(typed_key(
            &format!("{prefix}type"),
            "CLASS",
            true,
            None,
            "Class for the 'transforms' transformation.",
        ));
        definitions.push(typed_key(
            &format!("{prefix}negate"),
            "BOOLEAN",
            false,
            Some("false"),
            "Whether the configured predicate should be negated.",
        ));
        definitions.push(plain_key(
            &format!("{prefix}predicate"),
            false,
            None,
            "The alias of a predicate used to determine whether to apply this transformation.",
        ));
        let class = config.get(&format!("{prefix}type")).map(|c| c.trim());
        if let Some(plugin) =
            class.and_then(|c| registry.transformations().iter().find(|p| p.answers_to(c)))
        {
            definitions.extend(prefixed(&prefix, plugin.make().config_keys()));
        }
    }
    for alias in list("predicates") {
        let prefix = format!("predicates.{alias}.");
        definitions.push(typed_key(
            &format!("{prefix}type"),
            "CLASS",
            true,
            None,
            "Class for the 'predicates' predicate.",
        ));
        let class = config.get(&format!("{prefix}type")).map(|c| c.trim());
        if let Some(plugin) =
            class.and_then(|c| registry.predicates().iter().find(|p| p.answers_to(c)))
        {
            definitions.extend(prefixed(&prefix, plugin.make().config_keys()));
        }
    }
    definitions
}

/// A transform's or predicate's own keys, under its alias's prefix.
fn prefixed(prefix: &str, keys: Vec<ConfigKey>) -> impl Iterator<Item = ConfigKeyInfo> + '_ {
    keys.into_iter().map(move |key| {
        typed_key(
            &format!("{prefix}{}", key.name),
            key.config_type().name(),
            key.required,
            key.default,
            key.doc,
        )
    })
}

fn plain_key(name: &str, required: bool, default: Option<&str>, doc: &str) -> ConfigKeyInfo {
    typed_key(name, "STRING", required, default, doc)
}

/// A connector's own key, with its declared type.
fn connector_key(key: &ConfigKey) -> ConfigKeyInfo {
    ConfigKeyInfo {
        importance: key.config_importance().name(),
        ..typed_key(
            key.name,
            key.config_type().name(),
            key.required,
            key.default,
            key.doc,
        )
    }
}

fn typed_key(
    name: &str,
    kind: &'static str,
    required: bool,
    default: Option<&str>,
    doc: &str,
) -> ConfigKeyInfo {
    ConfigKeyInfo {
        name: name.to_owned(),
        kind,
        required,
        default_value: default.map(str::to_owned),
        importance: if required { "HIGH" } else { "MEDIUM" },
        documentation: doc.to_owned(),
        group: None,
        order: -1,
        width: "NONE",
        display_name: name.to_owned(),
        dependents: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connector whose secret has an ordinary name (`api.key`): only its declaration hides it.
    struct ApiSource;

    impl SourceConnector for ApiSource {
        fn config_keys(&self) -> Vec<ConfigKey> {
            vec![
                ConfigKey::required("api.key", "the service's API key").secret(),
                ConfigKey::optional("region", None, "the service's region"),
            ]
        }

        fn validate(&self, config: &Config) -> Vec<ferry_api::ConfigIssue> {
            config
                .get("api.key")
                .filter(|k| k.len() < 8)
                .map(|_| ferry_api::ConfigIssue {
                    key: "api.key".into(),
                    message: "must be at least 8 characters".into(),
                })
                .into_iter()
                .collect()
        }

        fn task_configs(
            &self,
            _config: &Config,
            _max: usize,
        ) -> Result<Vec<Config>, ferry_api::ConnectError> {
            Ok(Vec::new())
        }

        fn create_task(&self) -> Box<dyn ferry_api::SourceTask> {
            unreachable!("validation makes no task")
        }
    }

    fn api_plugins() -> Plugins {
        Plugins::new(vec![Plugin::new(["ApiSource"], || {
            Box::new(ApiSource) as Box<dyn SourceConnector>
        })])
    }

    #[test]
    fn validate_responses_hide_declared_secrets_and_undeclared_values() {
        let config = Config::from([
            ("connector.class".to_owned(), "ApiSource".to_owned()),
            ("api.key".to_owned(), "hunter2".to_owned()),
            ("region".to_owned(), "eu-west".to_owned()),
            ("endpoint".to_owned(), "https://u:pa55word@host".to_owned()),
        ]);
        let infos = match validate(&api_plugins(), "ApiSource", &config) {
            Ok(infos) => infos,
            Err(e) => panic!("validate refused: {e:?}"),
        };
        let value = |name: &str| {
            infos
                .configs
                .iter()
                .find(|c| c.value.name == name)
                .map(|c| (c.value.value.clone(), c.value.errors.clone()))
        };
        let (api_key, api_key_errors) = value("api.key").unwrap_or_default();
        assert_eq!(api_key.as_deref(), Some(HIDDEN));
        assert_eq!(
            api_key_errors,
            ["Invalid value [hidden] for configuration api.key: must be at least 8 characters"]
        );
        assert_eq!(
            value("region").unwrap_or_default().0.as_deref(),
            Some("eu-west")
        );
        assert_eq!(
            value("endpoint").unwrap_or_default().0.as_deref(),
            Some(HIDDEN)
        );
        let body = format!("{infos:?}");
        assert!(
            !body.contains("hunter2") && !body.contains("pa55word"),
            "{body}"
        );

        // The same through a create's 400.
        let error = match check(&api_plugins(), "api", &config) {
            Ok(_) => panic!("invalid configuration accepted"),
            Err(e) => format!("{e:?} {e}"),
        };
        assert!(
            error.contains("api.key") && !error.contains("hunter2") && !error.contains("pa55word"),
            "{error}"
        );
    }

    #[test]
    fn unknown_converter_settings_are_not_echoed_known_ones_are() {
        // Confluent's schema-registry credentials live under the converter prefix; Ferry does not
        // know that setting, so nothing declares it public.
        let config = Config::from([
            ("connector.class".to_owned(), "ApiSource".to_owned()),
            ("api.key".to_owned(), "long-enough-key".to_owned()),
            ("value.converter".to_owned(), "JsonConverter".to_owned()),
            (
                "value.converter.schemas.enable".to_owned(),
                "maybe".to_owned(),
            ),
            (
                "value.converter.basic.auth.user.info".to_owned(),
                "user:pa55word".to_owned(),
            ),
        ]);
        let infos = match validate(&api_plugins(), "ApiSource", &config) {
            Ok(infos) => infos,
            Err(e) => panic!("validate refused: {e:?}"),
        };
        let body = format!("{infos:?}");
        assert!(!body.contains("pa55word"), "{body}");
        assert!(body.contains("maybe"), "{body}");
    }

    #[test]
    fn values_of_keys_nobody_declares_are_never_echoed() {
        // Ordinary names no guess would hide: without a declaration the value is not shown at all.
        let config = Config::from([
            ("name".to_owned(), "src".to_owned()),
            ("endpoint".to_owned(), "https://u:hunter2@host".to_owned()),
        ]);
        assert_eq!(java_map(&config, &[]), "{endpoint=[hidden], name=src}");
        let error = ConfigError::Invalid {
            path: "rest".into(),
            key: "endpoint".to_owned(),
            line: None,
            value: Some("https://u:hunter2@host".to_owned()),
            message: "unknown".to_owned(),
        };
        assert_eq!(
            describe(&error, &[]).1,
            "Invalid value [hidden] for configuration endpoint: unknown"
        );
    }

    #[test]
    fn invalid_connection_urls_are_reported_without_their_password() {
        let error = ConfigError::Invalid {
            path: "rest".into(),
            key: "connection.url".to_owned(),
            line: None,
            value: Some("jdbc:postgresql://db:5432/app?user=u&password=hunter2".to_owned()),
            message: "bad host".to_owned(),
        };
        let (_, message) = describe(&error, &[]);
        assert!(!message.contains("hunter2"), "{message}");
        assert!(message.contains("connection.url"), "{message}");

        let config = Config::from([(
            "connection.url".to_owned(),
            "postgresql://u:hunter2@db/app".to_owned(),
        )]);
        assert!(
            !java_map(&config, &[]).contains("hunter2"),
            "{}",
            java_map(&config, &[])
        );
    }

    #[test]
    fn keys_a_connector_declares_secret_are_never_shown() {
        let keys = [
            ConfigKey::optional("api.key", None, "an API key").secret(),
            ConfigKey::optional("endpoint", None, "a URL").embeds_secret(ferry_api::Redactor {
                name: "test",
                redact: |v| v.replace("hunter2", "***"),
            }),
        ];
        let config = Config::from([
            ("api.key".to_owned(), "hunter2".to_owned()),
            ("endpoint".to_owned(), "https://u:hunter2@host".to_owned()),
        ]);
        let shown = java_map(&config, &keys);
        assert_eq!(shown, "{api.key=[hidden], endpoint=https://u:***@host}");
        let error = ConfigError::Invalid {
            path: "rest".into(),
            key: "api.key".to_owned(),
            line: None,
            value: Some("hunter2".to_owned()),
            message: "too short".to_owned(),
        };
        assert_eq!(
            describe(&error, &keys).1,
            "Invalid value [hidden] for configuration api.key: too short"
        );
    }
}
