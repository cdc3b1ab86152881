//! The REST server's worker keys: `listeners` (with Kafka Connect's deprecated `rest.host.name` /
//! `rest.port` fallbacks), `rest.auth.token`, and where REST-created connectors are kept
//! (`ferry.connectors.file`).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

pub use ferry_plugin::Secret;

use std::sync::Arc;

use ferry_api::{ConfigKey, ConfigType, Importance};
use ferry_plugin::ConfigError;
use ferry_plugin::DynStoreSpec;
use ferry_plugin::Properties;
use ferry_plugin::framework_key::{defines, names};

use super::rest_security::{self, BasicCredentials, REST_BASIC_AUTH_CREDENTIALS_FILE, RestTls};

/// `listeners`: where the REST API listens, `http://HOST:PORT` or `https://HOST:PORT`
/// (comma-separated for several; https needs the `ssl.keystore.*` keys).
/// Default `http://127.0.0.1:8083`: loopback only unless configured.
pub const LISTENERS: &str = "listeners";
/// `rest.host.name` (Kafka Connect, deprecated): the host of the REST listener when `listeners` is not
/// set.
pub const REST_HOST_NAME: &str = "rest.host.name";
/// `rest.port` (Kafka Connect, deprecated): the port of the REST listener when `listeners` is not set.
pub const REST_PORT: &str = "rest.port";
/// `rest.auth.token` (Ferry-only key): when set, every REST request must carry
/// `Authorization: Bearer <token>`.
pub const REST_AUTH_TOKEN: &str = "rest.auth.token";
/// `ferry.connectors.file` (Ferry-only key): the JSON file keeping connectors created or changed over
/// REST. Default `<offset.storage.file.filename>.connectors.json` with `offset.storage=file`,
/// `ferry-connectors.json` in the working directory with a store that is not a file.
pub const CONNECTORS_FILE: &str = "ferry.connectors.file";
/// `rest.read.timeout.ms` (Ferry-only key): a REST connection is closed when it has not sent a
/// complete request head this long after opening or after its last answer (idle and slow clients),
/// or when its request body stalls this long. Default 10 000.
pub const REST_READ_TIMEOUT_MS: &str = "rest.read.timeout.ms";
/// `rest.max.connections` (Ferry-only key): the most REST connections open at once; one more is
/// answered `503` and closed. Default 100.
pub const REST_MAX_CONNECTIONS: &str = "rest.max.connections";

/// `rest.auth.token`, declared secret: its value is never shown.
const AUTH_TOKEN_KEY: ConfigKey = ConfigKey::optional(
    REST_AUTH_TOKEN,
    None,
    "When set (Ferry-only key), every REST request must carry `Authorization: Bearer <token>` \
     (or a Basic user's credentials, with `rest.basic.auth.credentials.file`).",
)
.secret()
.importance(Importance::Medium);

/// The REST server's keys, read the same way by both workers ([`RestConfig::from_properties`]);
/// the HTTPS listener's `ssl.*` keys are listed as one prefix.
pub const REST_KEYS: &[ConfigKey] = &[
    ConfigKey::optional(
        LISTENERS,
        Some("http://127.0.0.1:8083"),
        "Where the REST API listens, `http://HOST:PORT` or `https://HOST:PORT` (comma-separated \
         for several; https needs the `ssl.keystore.*` keys). The default listens on loopback only.",
    )
    .of_type(ConfigType::List)
    .importance(Importance::Low),
    ConfigKey::optional(
        REST_HOST_NAME,
        None,
        "Deprecated (Kafka Connect): the host of the REST listener when `listeners` is not set.",
    )
    .importance(Importance::Low),
    ConfigKey::optional(
        REST_PORT,
        Some("8083"),
        "Deprecated (Kafka Connect): the port of the REST listener when `listeners` is not set.",
    )
    .of_type(ConfigType::Int)
    .importance(Importance::Low),
    AUTH_TOKEN_KEY,
    ConfigKey::optional(
        REST_BASIC_AUTH_CREDENTIALS_FILE,
        None,
        "A Java properties file of `user: password` lines (the file Kafka Connect's \
         `BasicAuthSecurityRestExtension` reads through JAAS): requests may authenticate with \
         `Authorization: Basic …` as one of its users. Read at start.",
    )
    .importance(Importance::Medium),
    ConfigKey::optional(
        REST_READ_TIMEOUT_MS,
        Some("10000"),
        "A REST connection is closed (Ferry-only key) when it has not sent a complete request head \
         this long after opening or after its last answer, or when its request body stalls this long.",
    )
    .of_type(ConfigType::Long)
    .importance(Importance::Low),
    ConfigKey::optional(
        REST_MAX_CONNECTIONS,
        Some("100"),
        "The most REST connections open at once (Ferry-only key); one more is answered `503` and \
         closed.",
    )
    .of_type(ConfigType::Int)
    .importance(Importance::Low),
];

/// `ferry.connectors.file`: only the standalone worker has it (a distributed worker keeps connectors
/// in its config topic).
pub const CONNECTORS_FILE_KEY: ConfigKey = ConfigKey::optional(
    CONNECTORS_FILE,
    None,
    "The JSON file keeping connectors created or changed over REST (Ferry-only key). Default \
     `<offset.storage.file.filename>.connectors.json` with `offset.storage=file`, \
     `ferry-connectors.json` in the working directory with a store that is not a file.",
)
.importance(Importance::Low);

/// The keys whose names stand for the HTTPS listener's TLS keys in "accepted keys" hints.
const LISTED_PREFIXES: &[&str] = &["listeners.https.ssl.*"];

/// The REST keys listed in "accepted keys" hints: the deprecated ones are left out.
pub fn listed_keys() -> impl Iterator<Item = &'static str> {
    names(REST_KEYS)
        .filter(|k| *k != REST_HOST_NAME && *k != REST_PORT)
        .chain(LISTED_PREFIXES.iter().copied())
}

const DEFAULT_HOST: &str = "127.0.0.1";
const DEFAULT_PORT: u16 = 8083;
const DEFAULT_CONNECTORS_FILE: &str = "ferry-connectors.json";
const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_MAX_CONNECTIONS: usize = 100;

/// One REST listener, `http://HOST:PORT` or `https://HOST:PORT`. Port 0 asks the OS for a free port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// The host name or IP address to bind (`0.0.0.0` for `http://:PORT`, as in Kafka Connect).
    pub host: String,
    /// The port.
    pub port: u16,
    /// `https://`: TLS with [`RestConfig::tls`].
    pub https: bool,
}

impl Listener {
    /// A plain HTTP listener.
    pub fn http(host: impl Into<String>, port: u16) -> Self {
        Self {
            host: host.into(),
            port,
            https: false,
        }
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        if self.https { "https" } else { "http" }
    }
}

impl fmt::Display for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = self.scheme();
        if self.host.contains(':') {
            write!(f, "{scheme}://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{scheme}://{}:{}", self.host, self.port)
        }
    }
}

/// The REST server's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestConfig {
    /// `listeners` (default `http://127.0.0.1:8083`).
    pub listeners: Vec<Listener>,
    /// `rest.auth.token`: the bearer token every request must carry; `None`: no authentication.
    pub auth_token: Option<Secret>,
    /// `rest.basic.auth.credentials.file`: the users who may authenticate with HTTP Basic (with
    /// `auth_token` too, either credential is accepted).
    pub basic_auth: Option<BasicCredentials>,
    /// The `ssl.*` (or `listeners.https.ssl.*`) settings, read when a listener is `https://`.
    pub tls: Option<RestTls>,
    /// `rest.read.timeout.ms` (default 10 s): how long a connection may take to send a request head
    /// (counted from opening or from its last answer), and how long its request body may stall.
    pub read_timeout: Duration,
    /// `rest.max.connections` (default 100): the most connections open at once.
    pub max_connections: usize,
}

impl Default for RestConfig {
    fn default() -> Self {
        Self {
            listeners: vec![Listener::http(DEFAULT_HOST, DEFAULT_PORT)],
            auth_token: None,
            basic_auth: None,
            tls: None,
            read_timeout: DEFAULT_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

impl RestConfig {
    /// Whether a worker file key is a REST key: one of [`REST_KEYS`], the HTTPS listener's `ssl.*`
    /// keys and their `listeners.https.` forms.
    pub fn is_key(key: &str) -> bool {
        defines(REST_KEYS, key) || rest_security::is_key(key)
    }

    /// Whether the REST API asks for credentials (`rest.auth.token` or Basic users).
    pub fn authenticates(&self) -> bool {
        self.auth_token.is_some() || self.basic_auth.is_some()
    }

    /// Reads the REST keys of a worker file (standalone or distributed); every problem goes to
    /// `errors`, naming the file, key and line.
    pub fn from_properties(props: &Properties, errors: &mut Vec<ConfigError>) -> RestConfig {
        rest_config(props, errors)
    }
}

/// Reads the REST keys; problems go to `errors`.
pub fn rest_config(props: &Properties, errors: &mut Vec<ConfigError>) -> RestConfig {
    let mut config = RestConfig::default();
    if let Some(listeners) = listeners(props, errors) {
        config.listeners = listeners;
    }
    match props.get(REST_AUTH_TOKEN).map(str::trim) {
        None => {}
        Some("") => errors.push(props.invalid_secret(
            &AUTH_TOKEN_KEY,
            "must not be empty; remove the key to serve the REST API without authentication",
        )),
        Some(token) => config.auth_token = Some(Secret::new(token)),
    }
    match props.get(REST_BASIC_AUTH_CREDENTIALS_FILE).map(str::trim) {
        None => {}
        Some("") => errors.push(props.invalid(
            REST_BASIC_AUTH_CREDENTIALS_FILE,
            "must name a file of `user: password` lines; remove the key to turn Basic authentication off",
        )),
        Some(file) => match BasicCredentials::load(file) {
            Ok(users) => config.basic_auth = Some(users),
            Err(why) => errors.push(props.invalid(REST_BASIC_AUTH_CREDENTIALS_FILE, why.to_string())),
        },
    }
    if config.listeners.iter().any(|l| l.https) {
        config.tls = rest_security::rest_tls(props, errors);
    }
    if let Some(text) = props.get(REST_READ_TIMEOUT_MS) {
        match text.trim().parse::<u64>() {
            Ok(ms) if ms >= 1 => config.read_timeout = Duration::from_millis(ms),
            _ => errors.push(props.invalid(
                REST_READ_TIMEOUT_MS,
                "must be a whole number of milliseconds, 1 or more (default 10000)",
            )),
        }
    }
    if let Some(text) = props.get(REST_MAX_CONNECTIONS) {
        match text.trim().parse::<usize>() {
            Ok(n) if (1..=MAX_CONNECTIONS_LIMIT).contains(&n) => config.max_connections = n,
            _ => errors.push(props.invalid(
                REST_MAX_CONNECTIONS,
                format!("must be a whole number from 1 to {MAX_CONNECTIONS_LIMIT} (default 100)"),
            )),
        }
    }
    config
}

/// Reads `listeners`, or without it the deprecated `rest.host.name` / `rest.port`; `None` when
/// neither is set, or `listeners` is invalid.
fn listeners(props: &Properties, errors: &mut Vec<ConfigError>) -> Option<Vec<Listener>> {
    let deprecated: Vec<&str> = [REST_HOST_NAME, REST_PORT]
        .into_iter()
        .filter(|k| props.get(k).is_some())
        .collect();
    match props.get(LISTENERS) {
        Some(text) => {
            let listeners = match parse_listeners(text) {
                Ok(listeners) => Some(listeners),
                Err(message) => {
                    errors.push(props.invalid(LISTENERS, message.to_string()));
                    None
                }
            };
            for key in deprecated {
                tracing::warn!(
                    key = %key,
                    "{}: {key} is ignored because listeners is set (Kafka Connect ignores it too)",
                    props.location(key)
                );
            }
            listeners
        }
        None if !deprecated.is_empty() => {
            let host = props
                .get(REST_HOST_NAME)
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .unwrap_or(DEFAULT_HOST);
            let port = match props.get(REST_PORT).map(str::trim) {
                None => DEFAULT_PORT,
                Some(text) => text.parse::<u16>().unwrap_or_else(|_| {
                    errors.push(props.invalid(REST_PORT, "must be a port number, 0 to 65535"));
                    DEFAULT_PORT
                }),
            };
            let listeners = vec![Listener::http(host.trim_matches(['[', ']']), port)];
            tracing::warn!(
                "{}: rest.host.name / rest.port are deprecated in Kafka Connect; using them as listeners={} \
                 (set listeners instead)",
                props.location(deprecated[0]),
                listeners[0]
            );
            Some(listeners)
        }
        None => None,
    }
}

/// A semaphore's permits are counted in a `u32`-sized range; far more than any worker should open.
const MAX_CONNECTIONS_LIMIT: usize = 1_000_000;

/// `ferry.connectors.file`, or its default next to the offsets file (or in the working directory).
pub fn connectors_file(
    props: &Properties,
    storage: Option<&Arc<dyn DynStoreSpec>>,
    errors: &mut Vec<ConfigError>,
) -> PathBuf {
    match props.get(CONNECTORS_FILE).map(str::trim) {
        Some("") => {
            errors.push(props.invalid(
                CONNECTORS_FILE,
                "must name a file, e.g. /var/lib/ferry/connectors.json",
            ));
            PathBuf::from(DEFAULT_CONNECTORS_FILE)
        }
        Some(path) => PathBuf::from(path),
        None => storage
            .and_then(|spec| spec.default_connectors_file())
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CONNECTORS_FILE)),
    }
}

/// Parses `http://HOST:PORT[,http://HOST:PORT…]`.
/// Why `listeners` cannot be read; the worker file's error shows it after the key and line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListenerError {
    /// Only separators or blanks.
    #[error("must name at least one listener, e.g. http://127.0.0.1:8083")]
    None,
    /// Not `http://` or `https://`.
    #[error("{0}: a listener is http://HOST:PORT, e.g. http://127.0.0.1:8083")]
    NotHttp(String),
    /// `[v6` without `]`.
    #[error("{0}: an IPv6 address needs a closing ']'")]
    UnclosedIpv6(String),
    /// No `:PORT`; the example matches the host's kind.
    #[error("{text}: the port is missing, e.g. http://{example}:8083")]
    MissingPort {
        /// The listener as written.
        text: String,
        /// `[::1]` or `127.0.0.1`.
        example: &'static str,
    },
    /// A path, user or query in the host part.
    #[error("{0}: a listener is http://HOST:PORT, without path, user or query")]
    NotHostPort(String),
    /// The port is not a `u16`.
    #[error("{0}: the port must be a number from 0 to 65535")]
    BadPort(String),
}

fn parse_listeners(text: &str) -> Result<Vec<Listener>, ListenerError> {
    let listeners: Vec<Listener> = text
        .split(',')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(parse_listener)
        .collect::<Result<_, _>>()?;
    if listeners.is_empty() {
        return Err(ListenerError::None);
    }
    Ok(listeners)
}

fn parse_listener(text: &str) -> Result<Listener, ListenerError> {
    let lower = text.to_ascii_lowercase();
    let (rest, https) = if lower.starts_with("http://") {
        (&text["http://".len()..], false)
    } else if lower.starts_with("https://") {
        (&text["https://".len()..], true)
    } else {
        return Err(ListenerError::NotHttp(text.to_owned()));
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let missing_port = |example| ListenerError::MissingPort {
        text: text.to_owned(),
        example,
    };
    let (host, port) = if let Some(bracketed) = rest.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| ListenerError::UnclosedIpv6(text.to_owned()))?;
        let port = after
            .strip_prefix(':')
            .ok_or_else(|| missing_port("[::1]"))?;
        (host, port)
    } else {
        rest.rsplit_once(':')
            .ok_or_else(|| missing_port("127.0.0.1"))?
    };
    if host.contains(['/', '@', '?', '#']) {
        return Err(ListenerError::NotHostPort(text.to_owned()));
    }
    let port = port
        .parse::<u16>()
        .map_err(|_| ListenerError::BadPort(text.to_owned()))?;
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    Ok(Listener {
        host: host.to_owned(),
        port,
        https,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_parse_as_kafka_connect_writes_them() {
        let one = |t: &str| parse_listeners(t).map(|mut l| l.remove(0));
        assert_eq!(
            one("http://127.0.0.1:8083"),
            Ok(Listener::http("127.0.0.1", 8083))
        );
        assert_eq!(one("HTTP://:0").map(|l| l.host), Ok("0.0.0.0".to_owned()));
        assert_eq!(
            one("http://[::1]:9/").map(|l| l.to_string()),
            Ok("http://[::1]:9".to_owned())
        );
        assert_eq!(
            parse_listeners("http://a:1, http://b:2").map(|l| l.len()),
            Ok(2)
        );
        assert!(one("https://x:1").is_ok_and(|l| l.https && l.to_string() == "https://x:1"));
        assert!(one("http://x").is_err_and(|e| e.to_string().contains("port is missing")));
        assert!(one("x:1").is_err());
        assert!(one("http://x:99999").is_err());
        assert!(parse_listeners(" , ").is_err());
    }

    #[test]
    fn an_empty_auth_token_is_refused_without_showing_its_value() {
        let props = Properties::from_pairs("w", [("rest.auth.token", " \t ")]);
        let mut errors = Vec::new();
        rest_config(&props, &mut errors);
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "w: invalid value [hidden] for \"rest.auth.token\": must not be empty; remove the key to \
              serve the REST API without authentication"
            ]
        );
    }

    fn read(pairs: &[(&str, &str)]) -> (RestConfig, usize) {
        let props = Properties::from_pairs("w", pairs.iter().copied());
        let mut errors = Vec::new();
        let config = rest_config(&props, &mut errors);
        (config, errors.len())
    }

    #[test]
    fn deprecated_host_and_port_are_a_fallback_for_listeners() {
        let (config, errors) = read(&[("rest.port", "9000")]);
        assert_eq!(
            (config.listeners[0].to_string(), errors),
            ("http://127.0.0.1:9000".into(), 0)
        );
        let (config, _) = read(&[("rest.host.name", "0.0.0.0"), ("rest.port", "1")]);
        assert_eq!(config.listeners[0].to_string(), "http://0.0.0.0:1");
        let (config, _) = read(&[("listeners", "http://localhost:2"), ("rest.port", "1")]);
        assert_eq!(config.listeners[0].to_string(), "http://localhost:2");
        assert_eq!(read(&[("rest.port", "x")]).1, 1);
        assert_eq!(read(&[("rest.auth.token", " ")]).1, 1);
        let (config, errors) = read(&[
            ("rest.read.timeout.ms", "250"),
            ("rest.max.connections", "3"),
        ]);
        assert_eq!(
            (config.read_timeout, config.max_connections, errors),
            (Duration::from_millis(250), 3, 0)
        );
        assert_eq!(read(&[("rest.read.timeout.ms", "0")]).1, 1);
        assert_eq!(read(&[("rest.max.connections", "0")]).1, 1);
        assert_eq!(read(&[("rest.max.connections", "many")]).1, 1);
        assert_eq!(read(&[]).0, RestConfig::default());
    }

    #[test]
    fn the_token_never_shows_in_debug() {
        let config = RestConfig {
            auth_token: Some(Secret::new("s3cret")),
            ..RestConfig::default()
        };
        assert!(!format!("{config:?}").contains("s3cret"));
    }
}
