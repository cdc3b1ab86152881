//! Reading `transforms.*` and `predicates.*` from a connector configuration.

use std::sync::Arc;

use ferry_api::Config;
use ferry_api::transform::{PredicatePlugin, TransformationPlugin};

use super::apply::{Chain, ChainError, Step};

/// The transformations and predicates a worker knows: the built-in ones (Kafka Connect's) plus
/// those plugins registered.
#[derive(Clone, Debug)]
pub struct TransformRegistry {
    transformations: Vec<TransformationPlugin>,
    predicates: Vec<PredicatePlugin>,
}

impl Default for TransformRegistry {
    /// The built-in transformations and predicates.
    fn default() -> Self {
        Self {
            transformations: crate::builtin_transformations(),
            predicates: crate::builtin_predicates(),
        }
    }
}

impl TransformRegistry {
    /// Adds plugins' own transformations and predicates (after the built-in ones, so a plugin
    /// cannot shadow a Kafka Connect class name).
    pub fn add(
        &mut self,
        transformations: impl IntoIterator<Item = TransformationPlugin>,
        predicates: impl IntoIterator<Item = PredicatePlugin>,
    ) {
        self.transformations.extend(transformations);
        self.predicates.extend(predicates);
    }

    /// Every transformation plugin.
    pub fn transformations(&self) -> &[TransformationPlugin] {
        &self.transformations
    }

    /// Every predicate plugin.
    pub fn predicates(&self) -> &[PredicatePlugin] {
        &self.predicates
    }

    fn transformation(&self, class: &str) -> Option<&TransformationPlugin> {
        self.transformations.iter().find(|p| p.answers_to(class))
    }

    fn predicate(&self, class: &str) -> Option<&PredicatePlugin> {
        self.predicates.iter().find(|p| p.answers_to(class))
    }
}

/// One transform of a connector's chain, as configured.
#[derive(Clone, Debug)]
pub(super) struct StepSpec {
    pub(super) alias: String,
    pub(super) plugin: TransformationPlugin,
    /// Its own keys, prefix removed (without `type`, `predicate`, `negate`).
    pub(super) config: Config,
    pub(super) predicate: Option<PredicateSpec>,
}

/// The predicate a transform is conditioned on.
#[derive(Clone, Debug)]
pub(super) struct PredicateSpec {
    pub(super) alias: String,
    pub(super) plugin: PredicatePlugin,
    pub(super) config: Config,
    pub(super) negate: bool,
}

/// A connector's transforms, checked: what every task builds its [`Chain`] from. Empty when the
/// connector sets no `transforms`.
#[derive(Clone, Debug, Default)]
pub struct Transforms {
    steps: Arc<Vec<StepSpec>>,
}

/// Most transforms or predicates one connector may list.
const MAX_ALIASES: usize = 100;

fn is_transform_key(key: &str) -> bool {
    key == "transforms" || key.starts_with("transforms.")
}

fn is_predicate_key(key: &str) -> bool {
    key == "predicates" || key.starts_with("predicates.")
}

/// Whether `key` belongs to the transforms or predicates of a connector configuration.
pub fn is_chain_key(key: &str) -> bool {
    is_transform_key(key) || is_predicate_key(key)
}

/// The aliases of a `transforms` / `predicates` list: trimmed, empty entries skipped.
pub fn aliases(list: Option<&String>) -> Vec<String> {
    list.map(|l| {
        l.split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect()
    })
    .unwrap_or_default()
}

/// The keys under `prefix` (removed), except `skip`.
fn own_keys(config: &Config, prefix: &str, skip: &[&str]) -> Config {
    config
        .iter()
        .filter_map(|(k, v)| {
            let own = k.strip_prefix(prefix)?;
            (!skip.contains(&own)).then(|| (own.to_owned(), v.clone()))
        })
        .collect()
}

impl Transforms {
    /// Reads and checks the transforms of a connector configuration: every listed alias has a known
    /// `type` whose `configure` accepts its keys, every predicate referred to is listed and known,
    /// and no key names an alias that is not listed.
    ///
    /// # Errors
    /// One `(key, message)` per problem.
    pub fn parse(
        config: &Config,
        registry: &TransformRegistry,
    ) -> Result<Self, Vec<(String, String)>> {
        let mut issues = Vec::new();
        let transform_aliases = aliases(config.get("transforms"));
        let predicate_aliases = aliases(config.get("predicates"));
        if !check_lists(&transform_aliases, &predicate_aliases, &mut issues) {
            return Err(issues);
        }
        check_unlisted_keys(config, &transform_aliases, &predicate_aliases, &mut issues);
        let predicates = predicates(config, registry, &predicate_aliases, &mut issues);
        let mut steps = Vec::new();
        for alias in &transform_aliases {
            let step = step(
                config,
                registry,
                alias,
                &predicates,
                &predicate_aliases,
                &mut issues,
            );
            steps.extend(step);
        }
        if issues.is_empty() {
            Ok(Self {
                steps: Arc::new(steps),
            })
        } else {
            Err(issues)
        }
    }

    /// Whether the connector transforms nothing.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The aliases, in order.
    pub fn aliases(&self) -> Vec<&str> {
        self.steps.iter().map(|s| s.alias.as_str()).collect()
    }

    /// A task's own chain: new, configured instances.
    ///
    /// # Errors
    /// A transform or predicate refused the configuration it accepted when checked (a plugin whose
    /// `configure` is not deterministic).
    pub fn chain(&self) -> Result<Chain, ChainError> {
        let mut steps = Vec::with_capacity(self.steps.len());
        for spec in self.steps.iter() {
            steps.push(Step::new(spec)?);
        }
        Ok(Chain::new(steps))
    }
}

/// Checks the `transforms` and `predicates` lists: not too long (then `false`: nothing else is
/// checked), no alias twice.
fn check_lists(
    transform_aliases: &[String],
    predicate_aliases: &[String],
    issues: &mut Vec<(String, String)>,
) -> bool {
    for (key, list) in [
        ("transforms", transform_aliases),
        ("predicates", predicate_aliases),
    ] {
        if list.len() > MAX_ALIASES {
            issues.push((
                key.to_owned(),
                format!(
                    "lists {} aliases; at most {MAX_ALIASES} are allowed",
                    list.len()
                ),
            ));
            return false;
        }
        let mut seen = std::collections::BTreeSet::new();
        for alias in list {
            if !seen.insert(alias) {
                issues.push((key.to_owned(), format!("alias {alias:?} is listed twice")));
            }
        }
    }
    true
}

/// Reports the keys of aliases not listed: a typo would otherwise silently configure nothing.
fn check_unlisted_keys(
    config: &Config,
    transform_aliases: &[String],
    predicate_aliases: &[String],
    issues: &mut Vec<(String, String)>,
) {
    for key in config.keys() {
        for (prefix, list, what) in [
            ("transforms.", transform_aliases, "transforms"),
            ("predicates.", predicate_aliases, "predicates"),
        ] {
            let Some(rest) = key.strip_prefix(prefix) else {
                continue;
            };
            if !list.iter().any(|a| {
                rest.strip_prefix(a.as_str())
                    .is_some_and(|r| r.starts_with('.'))
            }) {
                issues.push((
                    key.clone(),
                    format!(
                        "no alias of {what}={} matches this key; add the alias to {what} or remove the key",
                        list.join(",")
                    ),
                ));
            }
        }
    }
}

/// Reads the listed predicates whose class is known and accepts their keys.
fn predicates(
    config: &Config,
    registry: &TransformRegistry,
    predicate_aliases: &[String],
    issues: &mut Vec<(String, String)>,
) -> Vec<PredicateSpec> {
    let mut predicates = Vec::new();
    for alias in predicate_aliases {
        let type_key = format!("predicates.{alias}.type");
        let Some(class) = config.get(&type_key).map(|c| c.trim()) else {
            issues.push((type_key, "missing: the predicate's class, e.g. org.apache.kafka.connect.transforms.predicates.TopicNameMatches".to_owned()));
            continue;
        };
        let Some(plugin) = registry.predicate(class) else {
            issues.push((
                type_key,
                format!(
                    "unknown predicate class {class:?}; known: {}",
                    known(registry.predicates().iter().map(PredicatePlugin::class))
                ),
            ));
            continue;
        };
        let prefix = format!("predicates.{alias}.");
        let own = own_keys(config, &prefix, &["type"]);
        if !accepted(plugin.make().configure(&own), &prefix, issues) {
            continue;
        }
        predicates.push(PredicateSpec {
            alias: alias.clone(),
            plugin: plugin.clone(),
            config: own,
            negate: false,
        });
    }
    predicates
}

/// Reads transform `alias`: its class, its predicate (one of `predicates`, the ones read, among
/// `predicate_aliases`), and its keys, which the class must accept. `None` when it has a problem.
fn step(
    config: &Config,
    registry: &TransformRegistry,
    alias: &str,
    predicates: &[PredicateSpec],
    predicate_aliases: &[String],
    issues: &mut Vec<(String, String)>,
) -> Option<StepSpec> {
    let prefix = format!("transforms.{alias}.");
    let type_key = format!("{prefix}type");
    let Some(class) = config.get(&type_key).map(|c| c.trim()) else {
        issues.push((type_key, "missing: the transformation's class, e.g. org.apache.kafka.connect.transforms.InsertField$Value".to_owned()));
        return None;
    };
    let Some(plugin) = registry.transformation(class) else {
        issues.push((
            type_key,
            format!(
                "unknown transformation class {class:?}; known: {}",
                known(
                    registry
                        .transformations()
                        .iter()
                        .map(TransformationPlugin::class)
                )
            ),
        ));
        return None;
    };
    let predicate = step_predicate(config, &prefix, predicates, predicate_aliases, issues);
    let own = own_keys(config, &prefix, &["type", "predicate", "negate"]);
    if !accepted(plugin.make().configure(&own), &prefix, issues) {
        return None;
    }
    Some(StepSpec {
        alias: alias.to_owned(),
        plugin: plugin.clone(),
        config: own,
        predicate,
    })
}

/// The predicate a transform (its keys under `prefix`) is conditioned on, with its `negate`.
fn step_predicate(
    config: &Config,
    prefix: &str,
    predicates: &[PredicateSpec],
    predicate_aliases: &[String],
    issues: &mut Vec<(String, String)>,
) -> Option<PredicateSpec> {
    let negate_key = format!("{prefix}negate");
    let negate = match config
        .get(&negate_key)
        .map(|v| v.trim().to_ascii_lowercase())
    {
        None => false,
        Some(v) if v == "true" => true,
        Some(v) if v == "false" => false,
        Some(_) => {
            issues.push((negate_key.clone(), "must be true or false".to_owned()));
            false
        }
    };
    let predicate_key = format!("{prefix}predicate");
    match config.get(&predicate_key).map(|p| p.trim()) {
        None | Some("") => {
            if config.contains_key(&negate_key) {
                issues.push((negate_key, "is set, but there is no predicate to negate: set transforms.<alias>.predicate too".to_owned()));
            }
            None
        }
        Some(p) => match predicates.iter().find(|s: &&PredicateSpec| s.alias == p) {
            Some(spec) => Some(PredicateSpec {
                negate,
                ..spec.clone()
            }),
            None => {
                if predicate_aliases.iter().any(|a| a == p) {
                    // Listed, but its own configuration failed (reported above).
                } else {
                    issues.push((
                        predicate_key,
                        format!(
                            "predicate {p:?} is not listed in predicates={}",
                            predicate_aliases.join(",")
                        ),
                    ));
                }
                None
            }
        },
    }
}

/// Whether a transform's or predicate's `configure` accepted its keys; if not, its issues are
/// recorded under their full keys (`prefix` put back).
fn accepted(
    configured: Result<(), Vec<ferry_api::ConfigIssue>>,
    prefix: &str,
    issues: &mut Vec<(String, String)>,
) -> bool {
    match configured {
        Ok(()) => true,
        Err(errors) => {
            issues.extend(
                errors
                    .into_iter()
                    .map(|i| (format!("{prefix}{}", i.key), i.message)),
            );
            false
        }
    }
}

fn known<'a>(classes: impl Iterator<Item = &'a str>) -> String {
    let classes: Vec<&str> = classes.collect();
    if classes.is_empty() {
        "none".to_owned()
    } else {
        classes.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, String)]) -> Result<Transforms, Vec<(String, String)>> {
        let config: Config = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        Transforms::parse(&config, &TransformRegistry::default())
    }

    #[test]
    fn more_aliases_than_the_limit_are_refused_on_the_list_key() {
        let filter = "org.apache.kafka.connect.transforms.Filter".to_owned();
        let at_limit: Vec<String> = (0..MAX_ALIASES).map(|i| format!("t{i}")).collect();
        let types: Vec<(String, String)> = at_limit
            .iter()
            .map(|a| (format!("transforms.{a}.type"), filter.clone()))
            .collect();
        let mut pairs = vec![("transforms", at_limit.join(","))];
        pairs.extend(types.iter().map(|(k, v)| (k.as_str(), v.clone())));
        assert_eq!(
            parse(&pairs).map(|t| t.aliases().len()).ok(),
            Some(MAX_ALIASES)
        );

        let past: Vec<String> = (0..=MAX_ALIASES).map(|i| format!("t{i}")).collect();
        let issues = parse(&[("transforms", past.join(","))]).expect_err("refused");
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].0, "transforms");
        assert!(issues[0].1.contains("at most 100"), "{issues:?}");
    }

    #[test]
    fn a_repeated_alias_and_a_key_of_an_unlisted_alias_are_refused() {
        let hoist = "org.apache.kafka.connect.transforms.HoistField$Value".to_owned();
        let issues = parse(&[
            ("transforms", "a,a".to_owned()),
            ("transforms.a.type", hoist),
            ("transforms.a.field", "line".to_owned()),
            ("transforms.b.field", "typo".to_owned()),
        ])
        .expect_err("refused");
        let keys: Vec<&str> = issues.iter().map(|(k, _)| k.as_str()).collect();
        assert!(keys.contains(&"transforms"), "{issues:?}");
        assert!(keys.contains(&"transforms.b.field"), "{issues:?}");
    }

    #[test]
    fn a_predicate_must_be_listed_and_negate_needs_one() {
        let filter = "org.apache.kafka.connect.transforms.Filter".to_owned();
        let issues = parse(&[
            ("transforms", "drop,keep".to_owned()),
            ("transforms.drop.type", filter.clone()),
            ("transforms.drop.predicate", "missing".to_owned()),
            ("transforms.keep.type", filter),
            ("transforms.keep.negate", "true".to_owned()),
        ])
        .expect_err("refused");
        let keys: Vec<&str> = issues.iter().map(|(k, _)| k.as_str()).collect();
        assert!(keys.contains(&"transforms.drop.predicate"), "{issues:?}");
        assert!(keys.contains(&"transforms.keep.negate"), "{issues:?}");
    }
}
