//! Config providers (KIP-297): `${provider:path:key}` placeholders in connector configuration values,
//! resolved from files, environment variables or directories when a connector starts.
//!
//! Worker keys, as Kafka Connect's: `config.providers=file,env,dir` and, for each name,
//! `config.providers.<name>.class` = `org.apache.kafka.common.config.provider.FileConfigProvider`,
//! `EnvVarConfigProvider` or `DirectoryConfigProvider` (the short names too), with
//! `config.providers.<name>.param.allowlist.pattern` for the environment provider.
//!
//! Stricter than Kafka Connect, which leaves a placeholder it cannot resolve as literal text: an
//! unknown provider, a missing file, key or variable is an error naming the connector key. Resolved
//! values are secrets: errors name the key and the placeholder, never the value.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;

use ferry_api::{Config, HIDDEN};
use ferry_plugin::{ConfigError, Properties};
use regex::Regex;

/// `config.providers`: the provider names.
pub const CONFIG_PROVIDERS: &str = "config.providers";

/// `config.providers`, defined.
pub const CONFIG_PROVIDERS_KEY: ferry_api::ConfigKey = ferry_api::ConfigKey::optional(
    CONFIG_PROVIDERS,
    Some(""),
    "The names of the config providers that resolve `${provider:path:key}` placeholders in \
     connector configurations, each set up with `config.providers.<name>.class` and \
     `config.providers.<name>.param.*`.",
)
.of_type(ferry_api::ConfigType::List)
.importance(ferry_api::Importance::Low);
const PREFIX: &str = "config.providers.";
const JAVA_PACKAGE: &str = "org.apache.kafka.common.config.provider.";

/// Kafka's `ConfigTransformer.DEFAULT_PATTERN`: provider, optional path, key. The key takes whatever
/// follows the first `:` after the path, so a path cannot contain `:` (as in Kafka).
static PLACEHOLDER: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)] // a constant pattern, checked by the tests
    Regex::new(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}").expect("a valid pattern")
});

/// One configured provider.
#[derive(Debug, Clone)]
enum Provider {
    /// `FileConfigProvider`: the value of `key` in the properties file `path`.
    File,
    /// `EnvVarConfigProvider`: the environment variable `key`, if its name matches the allowlist.
    Env { allowlist: Option<Regex> },
    /// `DirectoryConfigProvider`: the content of the file `key` in the directory `path`.
    Dir,
}

/// The worker's config providers (none unless `config.providers` is set).
#[derive(Debug, Clone, Default)]
pub struct ConfigProviders {
    providers: BTreeMap<String, Provider>,
}

impl PartialEq for ConfigProviders {
    fn eq(&self, other: &Self) -> bool {
        self.providers.len() == other.providers.len()
            && self
                .providers
                .iter()
                .zip(&other.providers)
                .all(|((a, pa), (b, pb))| a == b && format!("{pa:?}") == format!("{pb:?}"))
    }
}
impl Eq for ConfigProviders {}

/// A connector configuration with its placeholders resolved.
pub struct Resolved {
    /// The configuration with every placeholder replaced.
    pub config: Config,
    /// The resolved values (secrets), for scrubbing messages.
    pub secrets: Vec<String>,
}

/// Keys only: the values are secrets.
impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolved")
            .field("keys", &self.config.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// Why one placeholder cannot be resolved; the message never holds a resolved value.
#[derive(Debug, thiserror::Error)]
enum LookupError {
    /// The placeholder names a provider the worker does not configure.
    #[error(
        "no config provider {provider:?} is configured (the worker's {CONFIG_PROVIDERS} is {configured:?})"
    )]
    NoProvider {
        provider: String,
        configured: String,
    },
    /// The file (or the directory's file) cannot be read.
    #[error("cannot read {what}: {source}")]
    Read {
        what: String,
        source: std::io::Error,
    },
    /// The file provider's file is not a properties file.
    #[error("{0}")]
    Parse(ConfigError),
    /// The file has no such key.
    #[error("the file {path:?} has no key {key:?}")]
    NoKey { path: String, key: String },
    /// The directory provider's key is not a plain file name.
    #[error("{key:?} is not a file name in the directory {path:?}")]
    NotAFileName { path: String, key: String },
    /// The environment provider was given a path.
    #[error("the environment provider takes no path (write ${{{provider}:{key}}})")]
    EnvWithPath { provider: String, key: String },
    /// The variable is outside the provider's allowlist.
    #[error(
        "the environment variable {key:?} is not allowed by config.providers.{provider}.param.allowlist.pattern"
    )]
    EnvNotAllowed { provider: String, key: String },
    /// The variable is unset, or not UTF-8.
    #[error("the environment variable {key:?} is {}", if *unicode { "not valid UTF-8" } else { "not set" })]
    Env { key: String, unicode: bool },
}

impl ConfigProviders {
    /// Whether `key` is a config provider worker key (`config.providers`, `config.providers.*`).
    pub fn is_key(key: &str) -> bool {
        key == CONFIG_PROVIDERS || key.starts_with(PREFIX)
    }

    /// How the keys are listed in "accepted keys" hints.
    pub const LISTED: &'static [&'static str] = &[CONFIG_PROVIDERS, "config.providers.*"];

    /// Reads the provider keys of a worker file; problems are added to `errors`.
    pub fn from_properties(props: &Properties, errors: &mut Vec<ConfigError>) -> ConfigProviders {
        let mut providers = BTreeMap::new();
        let names: Vec<&str> = props
            .get(CONFIG_PROVIDERS)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        check_unlisted_keys(props, &names, errors);
        for name in names {
            if let Some(provider) = provider(props, name, errors) {
                providers.insert(name.to_owned(), provider);
            }
        }
        ConfigProviders { providers }
    }

    /// Resolves every placeholder of `config`'s values.
    ///
    /// # Errors
    /// `(key, message)` for each key whose placeholder cannot be resolved; messages name the key and
    /// the placeholder, never a resolved value.
    pub fn resolve(&self, config: &Config) -> Result<Resolved, Vec<(String, String)>> {
        let mut resolved = Config::new();
        let mut secrets = Vec::new();
        let mut errors = Vec::new();
        for (key, value) in config {
            let mut out = String::with_capacity(value.len());
            let mut last = 0;
            let mut failed = false;
            for caps in PLACEHOLDER.captures_iter(value) {
                let (Some(whole), Some(provider), Some(name)) =
                    (caps.get(0), caps.get(1), caps.get(4))
                else {
                    continue;
                };
                let path = caps.get(3).map_or("", |m| m.as_str());
                out.push_str(&value[last..whole.start()]);
                last = whole.end();
                match self.lookup(provider.as_str(), path, name.as_str()) {
                    Ok(secret) => {
                        out.push_str(&secret);
                        secrets.push(secret);
                    }
                    Err(reason) => {
                        failed = true;
                        errors.push((
                            key.clone(),
                            format!(
                                "connector configuration key {key:?}: the placeholder {} cannot be resolved: {reason}",
                                whole.as_str()
                            ),
                        ));
                    }
                }
            }
            if !failed {
                out.push_str(&value[last..]);
                resolved.insert(key.clone(), out);
            }
        }
        if errors.is_empty() {
            Ok(Resolved {
                config: resolved,
                secrets,
            })
        } else {
            Err(errors)
        }
    }

    fn lookup(&self, provider: &str, path: &str, key: &str) -> Result<String, LookupError> {
        let Some(found) = self.providers.get(provider) else {
            let configured: Vec<&str> = self.providers.keys().map(String::as_str).collect();
            return Err(LookupError::NoProvider {
                provider: provider.to_owned(),
                configured: configured.join(","),
            });
        };
        match found {
            Provider::File => {
                let props = Properties::load(path).map_err(|e| match e {
                    ConfigError::Io { source, .. } => LookupError::Read {
                        what: format!("the file {path:?}"),
                        source,
                    },
                    // The parse message names the line, not a value.
                    other => LookupError::Parse(other),
                })?;
                props
                    .get(key)
                    .map(str::to_owned)
                    .ok_or_else(|| LookupError::NoKey {
                        path: path.to_owned(),
                        key: key.to_owned(),
                    })
            }
            Provider::Dir => {
                if key.contains('/') || key.contains('\\') || key == ".." || key == "." {
                    return Err(LookupError::NotAFileName {
                        path: path.to_owned(),
                        key: key.to_owned(),
                    });
                }
                let file = Path::new(path).join(key);
                std::fs::read_to_string(&file).map_err(|source| LookupError::Read {
                    what: file.display().to_string(),
                    source,
                })
            }
            Provider::Env { allowlist } => {
                if !path.is_empty() {
                    return Err(LookupError::EnvWithPath {
                        provider: provider.to_owned(),
                        key: key.to_owned(),
                    });
                }
                if allowlist.as_ref().is_some_and(|re| !re.is_match(key)) {
                    return Err(LookupError::EnvNotAllowed {
                        provider: provider.to_owned(),
                        key: key.to_owned(),
                    });
                }
                std::env::var(key).map_err(|e| LookupError::Env {
                    key: key.to_owned(),
                    unicode: matches!(e, std::env::VarError::NotUnicode(_)),
                })
            }
        }
    }

    /// Puts the placeholders back into task configurations made from `resolved` (the resolution of
    /// `raw`), so stored task configurations hold no secret; tasks resolve them again when they
    /// start. As Kafka Connect's `reverseTransform`, a task key that `raw` sets with a placeholder
    /// gets the raw value; beyond it, a resolved value found inside another task value (a connector
    /// deriving `task.files` from `file`) is replaced by its raw text there.
    pub fn unresolve(raw: &Config, resolved: &Config, tasks: Vec<Config>) -> Vec<Config> {
        let mut swaps: Vec<(&str, &str)> = raw
            .iter()
            .filter(|(_, value)| PLACEHOLDER.is_match(value))
            .filter_map(|(key, value)| {
                let secret = resolved.get(key)?;
                (!secret.is_empty()).then_some((secret.as_str(), value.as_str()))
            })
            .collect();
        // Longest first: a value containing a shorter one is replaced whole.
        swaps.sort_by_key(|(secret, _)| std::cmp::Reverse(secret.len()));
        tasks
            .into_iter()
            .map(|mut task| {
                for (key, value) in task.iter_mut() {
                    match raw.get(key) {
                        Some(raw) if PLACEHOLDER.is_match(raw) => value.clone_from(raw),
                        _ => {
                            if swaps.iter().any(|(secret, _)| value.contains(secret)) {
                                *value = swap_once(value, &swaps);
                            }
                        }
                    }
                }
                task
            })
            .collect()
    }

    /// Whether no provider is configured.
    pub fn is_empty(&self) -> bool {
        self.providers.is_empty()
    }
}

/// `value` with each occurrence of a secret replaced by its placeholder, in one pass from the left
/// (longest secret first at each position): a placeholder put in is never searched again, so a short
/// secret (`1`) found inside a longer one's placeholder text cannot corrupt it.
fn swap_once(value: &str, swaps: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(c) = rest.chars().next() {
        match swaps.iter().find(|(secret, _)| rest.starts_with(secret)) {
            Some((secret, placeholder)) => {
                out.push_str(placeholder);
                rest = &rest[secret.len()..];
            }
            None => {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out
}

/// `message` with every (non-empty) resolved value replaced by `[hidden]`.
pub fn scrub(message: String, secrets: &[String]) -> String {
    secrets
        .iter()
        .filter(|s| !s.is_empty())
        .fold(message, |m, s| m.replace(s.as_str(), HIDDEN))
}

/// Reports the `config.providers.*` keys of no listed provider.
fn check_unlisted_keys(props: &Properties, names: &[&str], errors: &mut Vec<ConfigError>) {
    for key in props.keys().filter(|k| k.starts_with(PREFIX)) {
        let rest = &key[PREFIX.len()..];
        let known = names.iter().any(|n| {
            rest.strip_prefix(n)
                .is_some_and(|r| r == ".class" || r.starts_with(".param."))
        });
        if !known {
            errors.push(props.invalid(
                key,
                format!(
                    "not a key of a provider listed in {CONFIG_PROVIDERS} ({}); write \
                     config.providers.<name>.class or config.providers.<name>.param.<param>",
                    names.join(",")
                ),
            ));
        }
    }
}

/// Reads provider `name`: its class, and the parameters that class accepts; `None` when it has
/// no class, or one Ferry does not implement.
fn provider(props: &Properties, name: &str, errors: &mut Vec<ConfigError>) -> Option<Provider> {
    let class_key = format!("{PREFIX}{name}.class");
    let Some(class) = props.get(&class_key).map(str::trim) else {
        errors.push(props.invalid(
            CONFIG_PROVIDERS,
            format!("provider {name:?} has no {class_key}; set it to FileConfigProvider, EnvVarConfigProvider or DirectoryConfigProvider"),
        ));
        return None;
    };
    let param = |p: &str| format!("{PREFIX}{name}.param.{p}");
    let params: Vec<&str> = props.keys().filter(|k| k.starts_with(&param(""))).collect();
    let short = class.strip_prefix(JAVA_PACKAGE).unwrap_or(class);
    let (provider, accepted): (Provider, &[&str]) = match short {
        "FileConfigProvider" => (Provider::File, &[]),
        "DirectoryConfigProvider" => (Provider::Dir, &[]),
        "EnvVarConfigProvider" => {
            let allowlist_key = param("allowlist.pattern");
            let allowlist = match props.get(&allowlist_key) {
                None => None,
                // Java's `matches()`: the whole name.
                Some(pattern) => match Regex::new(&format!("^(?:{pattern})$")) {
                    Ok(re) => Some(re),
                    Err(e) => {
                        errors.push(props.invalid(
                            &allowlist_key,
                            format!("not a valid regular expression: {e}"),
                        ));
                        None
                    }
                },
            };
            (Provider::Env { allowlist }, &["allowlist.pattern"])
        }
        other => {
            errors.push(props.invalid(
                &class_key,
                format!(
                    "{other} is not a config provider Ferry implements; use FileConfigProvider, \
                     EnvVarConfigProvider or DirectoryConfigProvider (of {JAVA_PACKAGE})"
                ),
            ));
            return None;
        }
    };
    for key in params {
        if !accepted.iter().any(|a| param(a) == key) {
            errors.push(props.invalid(
                key,
                format!(
                    "{short} has no such parameter in Ferry (accepted: {}); Kafka Connect's \
                     allowed.paths is not implemented",
                    if accepted.is_empty() {
                        "none".to_owned()
                    } else {
                        accepted.join(", ")
                    }
                ),
            ));
        }
    }
    Some(provider)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn providers(text: &str) -> Result<ConfigProviders, Vec<String>> {
        let props = Properties::parse("worker.properties", text.as_bytes()).unwrap();
        let mut errors = Vec::new();
        let p = ConfigProviders::from_properties(&props, &mut errors);
        if errors.is_empty() {
            Ok(p)
        } else {
            Err(errors.iter().map(|e| e.to_string()).collect())
        }
    }

    fn config(pairs: &[(&str, &str)]) -> Config {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const ALL: &str = "config.providers=file,env,dir\n\
        config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider\n\
        config.providers.env.class=EnvVarConfigProvider\n\
        config.providers.env.param.allowlist.pattern=FERRY_TEST_.*\n\
        config.providers.dir.class=DirectoryConfigProvider\n";

    #[test]
    fn file_env_and_dir_resolve() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secrets.properties");
        std::fs::write(&file, "password=s3cret\n").unwrap();
        std::fs::write(dir.path().join("token"), "tok").unwrap();
        let p = providers(ALL).unwrap();
        let c = config(&[
            ("a", &format!("${{file:{}:password}}", file.display())),
            ("b", &format!("x-${{dir:{}:token}}-y", dir.path().display())),
            ("c", "plain"),
        ]);
        let r = p.resolve(&c).unwrap();
        assert_eq!(r.config["a"], "s3cret");
        assert_eq!(r.config["b"], "x-tok-y");
        assert_eq!(r.config["c"], "plain");
        assert_eq!(r.secrets, ["s3cret", "tok"]);
    }

    #[test]
    fn env_respects_the_allowlist() {
        let p = providers(ALL).unwrap();
        let e = p.resolve(&config(&[("k", "${env:PATH}")])).unwrap_err();
        assert!(
            e[0].1.contains("\"k\"") && e[0].1.contains("allowlist"),
            "{e:?}"
        );
        let e = p
            .resolve(&config(&[("k", "${env:FERRY_TEST_UNSET_VAR}")]))
            .unwrap_err();
        assert!(e[0].1.contains("is not set"), "{e:?}");
        let open =
            providers("config.providers=env\nconfig.providers.env.class=EnvVarConfigProvider\n")
                .unwrap();
        let path = std::env::var("PATH").unwrap();
        assert_eq!(
            open.resolve(&config(&[("k", "${env:PATH}")]))
                .unwrap()
                .config["k"],
            path
        );
    }

    #[test]
    fn unresolvable_placeholders_name_the_key_never_a_value() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.properties");
        std::fs::write(&file, "other=s3cret\n").unwrap();
        let p = providers(ALL).unwrap();
        for (value, why) in [
            (
                format!("${{file:{}:password}}", file.display()),
                "has no key \"password\"",
            ),
            (
                "${file:/nonexistent/x.properties:k}".to_owned(),
                "cannot read the file",
            ),
            (
                "${vault:secret/db:password}".to_owned(),
                "no config provider \"vault\"",
            ),
            (
                format!("${{dir:{}:missing}}", dir.path().display()),
                "cannot read",
            ),
        ] {
            let e = p.resolve(&config(&[("db.password", &value)])).unwrap_err();
            assert_eq!(e[0].0, "db.password");
            assert!(
                e[0].1.contains("\"db.password\"") && e[0].1.contains(why),
                "{value}: {e:?}"
            );
            assert!(!e[0].1.contains("s3cret"));
        }
    }

    #[test]
    fn the_pattern_is_kafkas() {
        let caps = PLACEHOLDER.captures("${file:/a:b/c:key}").unwrap();
        assert_eq!(&caps[1], "file");
        assert_eq!(&caps[3], "/a");
        assert_eq!(&caps[4], "b/c:key");
        let caps = PLACEHOLDER.captures("${env:VAR}").unwrap();
        assert_eq!((&caps[1], caps.get(3), &caps[4]), ("env", None, "VAR"));
        assert!(PLACEHOLDER.captures("$env:VAR}").is_none());
    }

    #[test]
    fn worker_keys_are_checked() {
        let e = providers("config.providers=x\n").unwrap_err();
        assert!(e[0].contains("config.providers.x.class"), "{e:?}");
        let e =
            providers("config.providers=x\nconfig.providers.x.class=com.acme.Vault\n").unwrap_err();
        assert!(e[0].contains("com.acme.Vault"), "{e:?}");
        let e = providers("config.providers=f\nconfig.providers.f.class=FileConfigProvider\nconfig.providers.f.param.allowed.paths=/x\n").unwrap_err();
        assert!(e[0].contains("allowed.paths"), "{e:?}");
        let e = providers("config.providers.g.class=FileConfigProvider\n").unwrap_err();
        assert!(e[0].contains("config.providers.g.class"), "{e:?}");
    }

    #[test]
    fn unresolve_puts_placeholders_back() {
        let raw = config(&[("file", "${file:/p:k}"), ("topic", "t")]);
        let resolved = config(&[("file", "/secret"), ("topic", "t")]);
        let tasks = ConfigProviders::unresolve(
            &raw,
            &resolved,
            vec![config(&[
                ("file", "/secret"),
                ("topic", "t"),
                ("task.files", "[\"/secret\"]"),
            ])],
        );
        assert_eq!(tasks[0]["file"], "${file:/p:k}");
        assert_eq!(tasks[0]["topic"], "t");
        assert_eq!(tasks[0]["task.files"], "[\"${file:/p:k}\"]");
    }

    /// A regression: a short resolved value (`tasks.max` → `1`) was also replaced inside the
    /// placeholder just put back for a longer one whose path contains a `1`.
    #[test]
    fn unresolve_never_rewrites_a_placeholder_it_put_back() {
        let raw = config(&[
            ("file", "${file:/tmp/x1y/s.properties:path}"),
            ("tasks.max", "${file:/tmp/x1y/s.properties:tasks}"),
        ]);
        let resolved = config(&[("file", "/tmp/x1y/in.txt"), ("tasks.max", "1")]);
        let tasks = ConfigProviders::unresolve(
            &raw,
            &resolved,
            vec![config(&[
                ("task.files", "[\"/tmp/x1y/in.txt\"]"),
                ("n", "1"),
            ])],
        );
        assert_eq!(
            tasks[0]["task.files"],
            "[\"${file:/tmp/x1y/s.properties:path}\"]"
        );
        assert_eq!(tasks[0]["n"], "${file:/tmp/x1y/s.properties:tasks}");
    }

    #[test]
    fn scrub_hides_resolved_values() {
        assert_eq!(
            scrub(
                "cannot open /secret/x".into(),
                &["/secret/x".into(), String::new()]
            ),
            format!("cannot open {HIDDEN}")
        );
    }
}
