//! The REST server's security keys besides `rest.auth.token`: HTTP Basic users
//! (`rest.basic.auth.credentials.file`) and HTTPS listeners (Kafka Connect's `listeners.https.ssl.*`
//! or `ssl.*` keys, PEM only).
//!
//! Both are read once, when the worker starts: a changed credentials file or certificate takes
//! effect at the next start.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferry_plugin::{ConfigError, Properties, Secret};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// `rest.basic.auth.credentials.file` (Ferry's name for the file Kafka Connect's
/// `BasicAuthSecurityRestExtension` reads through JAAS `PropertyFileLoginModule`): a Java properties
/// file of `user: password` (or `user=password`) lines. When set, requests may authenticate with
/// `Authorization: Basic …` as one of its users.
pub const REST_BASIC_AUTH_CREDENTIALS_FILE: &str = "rest.basic.auth.credentials.file";

/// The prefix of the HTTPS listener's own TLS keys (Kafka Connect's): when any key starts with it,
/// only those are read; otherwise the top-level `ssl.*` keys are.
pub const LISTENERS_HTTPS_PREFIX: &str = "listeners.https.";

/// The `ssl.*` keys the HTTPS listener reads.
const READ_TLS_KEYS: &[&str] = &[
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.truststore.password",
    "ssl.client.auth",
];

/// The keys whose values are PEM text, which may hold a private key.
const INLINE_PEM_KEYS: &[&str] = &[
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.truststore.certificates",
];

/// Kafka Connect `ssl.*` keys accepted for the HTTPS listener but not used: rustls chooses the
/// protocol versions (TLS 1.2 and 1.3) and cipher suites, and has no pluggable engines.
const IGNORED_TLS_KEYS: &[&str] = &[
    "ssl.protocol",
    "ssl.enabled.protocols",
    "ssl.cipher.suites",
    "ssl.provider",
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation",
    "ssl.endpoint.identification.algorithm",
    "ssl.engine.factory.class",
];

/// Whether `key` is one of the REST security keys (for the workers' lists of accepted keys).
pub fn is_key(key: &str) -> bool {
    let name = key.strip_prefix(LISTENERS_HTTPS_PREFIX).unwrap_or(key);
    key == REST_BASIC_AUTH_CREDENTIALS_FILE
        || READ_TLS_KEYS.contains(&name)
        || IGNORED_TLS_KEYS.contains(&name)
}

/// The users of `rest.basic.auth.credentials.file`, read when the worker starts (not reloaded).
/// `Debug` shows the file and the number of users, never a password.
#[derive(Clone, PartialEq, Eq)]
pub struct BasicCredentials {
    file: PathBuf,
    users: Vec<(String, Secret)>,
}

impl fmt::Debug for BasicCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BasicCredentials")
            .field("file", &self.file)
            .field("users", &self.users.len())
            .finish()
    }
}

/// A `rest.basic.auth.credentials.file` that cannot serve: the message names the file, never a
/// password.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// The file cannot be read or is not in properties syntax.
    #[error(transparent)]
    Unreadable(#[from] ConfigError),
    /// The file names no user.
    #[error(
        "{}: names no user; write one `user: password` a line (the file Kafka Connect's \
         BasicAuthSecurityRestExtension reads works as is)",
        file.display()
    )]
    NoUser {
        /// The credentials file.
        file: PathBuf,
    },
}

impl BasicCredentials {
    /// Reads a credentials file: Java properties syntax, one `user: password` (or `user=password`)
    /// a line, as JAAS `PropertyFileLoginModule` reads it.
    ///
    /// # Errors
    /// The file cannot be read or parsed, or names no user; the message names the file (never a
    /// password).
    pub fn load(file: impl AsRef<Path>) -> Result<Self, CredentialsError> {
        let props = Properties::load(file.as_ref())?;
        Self::from_properties(&props)
    }

    /// The users of already parsed properties (`props.path()` names the file).
    ///
    /// # Errors
    /// No user, or a user with an empty name.
    pub fn from_properties(props: &Properties) -> Result<Self, CredentialsError> {
        let file = props.path().to_path_buf();
        let users: Vec<(String, Secret)> = props
            .iter()
            .map(|(user, password)| (user.to_owned(), Secret::new(password)))
            .collect();
        if users.is_empty() {
            return Err(CredentialsError::NoUser { file });
        }
        Ok(Self { file, users })
    }

    /// The file the users were read from.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Whether `user` is known with `password`. Every user's password is compared, each in constant
    /// time, so the time taken tells neither which users exist nor how much of a guess was right.
    pub fn check(&self, user: &str, password: &str) -> bool {
        let mut found = false;
        for (name, secret) in &self.users {
            let name_ok = constant_time_eq(name.as_bytes(), user.as_bytes());
            let password_ok = constant_time_eq(secret.expose().as_bytes(), password.as_bytes());
            found |= name_ok & password_ok;
        }
        found
    }
}

/// Compares without an early exit, so the time taken does not tell how much of a guess was right.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, &x) in a.iter().enumerate() {
        diff |= usize::from(x ^ b.get(i % b.len().max(1)).copied().unwrap_or(0));
    }
    diff == 0
}

/// `ssl.client.auth`: whether the HTTPS listener asks clients for a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// `none` (default): no client certificate.
    None,
    /// `requested`: a client certificate is verified when one is presented.
    Requested,
    /// `required`: every client must present a certificate the truststore trusts.
    Required,
}

/// The HTTPS listener's TLS settings, built when the worker file is read: the server side, and the
/// client side used to forward requests to other workers' HTTPS listeners (it trusts the truststore,
/// or without one the listener's own certificate chain, and presents the listener's certificate).
#[derive(Clone)]
pub struct RestTls {
    /// The HTTPS listener's settings.
    pub server: Arc<rustls::ServerConfig>,
    /// The forwarding client's settings.
    pub client: Arc<rustls::ClientConfig>,
    /// Where the keystore and truststore came from, for messages.
    pub description: String,
}

impl fmt::Debug for RestTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.description)
    }
}

impl PartialEq for RestTls {
    fn eq(&self, other: &Self) -> bool {
        self.description == other.description
    }
}

impl Eq for RestTls {}

/// The ring provider, chosen explicitly so no process-wide default is needed.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads the HTTPS listener's keys; `None` with the problems in `errors` when they are incomplete
/// or invalid.
pub fn rest_tls(props: &Properties, errors: &mut Vec<ConfigError>) -> Option<RestTls> {
    let keys = TlsKeys::new(props);
    keys.warn_ignored();
    let before = errors.len();
    // A store that is not PEM: its content is not read (the other messages would only repeat it).
    let keystore_refused = keys.refuse_unless_pem("ssl.keystore.type", errors);
    if keys.refuse_unless_pem("ssl.truststore.type", errors) | keystore_refused {
        return None;
    }
    let keystore = keys.keystore(errors)?;
    let trusted = keys.truststore(errors);
    let client_auth = keys.client_auth(trusted.is_some(), errors);
    let (Some(chain), Some(private_key)) = (keystore.chain, keystore.private_key) else {
        return None;
    };
    if errors.len() > before {
        return None;
    }
    let anchors = trusted.clone().unwrap_or_else(|| chain.clone());
    let roots = keys.trust_roots(anchors, errors)?;
    // Through `keys.invalid`: an inline private key (`ssl.keystore.key`) is never shown.
    let fail = |e: &dyn fmt::Display| keys.invalid(keystore.key_name, e.to_string());
    let server = match server_config(&roots, client_auth, &chain, &private_key) {
        Ok(s) => s,
        Err(e) => {
            errors.push(fail(&e));
            return None;
        }
    };
    let client = match rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map(|b| b.with_root_certificates(roots))
        .and_then(|b| b.with_client_auth_cert(chain, private_key))
    {
        Ok(c) => c,
        Err(e) => {
            errors.push(fail(&e));
            return None;
        }
    };
    Some(RestTls {
        server: Arc::new(server),
        client: Arc::new(client),
        description: keys.describe(&keystore.source, trusted.is_some(), client_auth),
    })
}

/// The HTTPS listener's keys as one prefix reads them: `listeners.https.ssl.*` when any
/// `listeners.https.` key is set, otherwise `ssl.*`.
struct TlsKeys<'a> {
    props: &'a Properties,
    prefix: &'static str,
}

/// The keystore as read: the chain or the key is `None` when it was refused (its error is pushed).
struct Keystore {
    chain: Option<Vec<CertificateDer<'static>>>,
    private_key: Option<PrivateKeyDer<'static>>,
    /// Where the keystore came from, for the description.
    source: String,
    /// The key named by errors about the private key.
    key_name: &'static str,
}

/// A keystore's certificate chain and private key as parsed, or why each was refused.
type ParsedKeystore = (
    Result<Vec<CertificateDer<'static>>, PemError>,
    Result<PrivateKeyDer<'static>, PemError>,
);

/// Why PEM text (a keystore, a truststore) cannot be used; shown after the key that holds it.
#[derive(Debug, thiserror::Error)]
enum PemError {
    /// Not PEM at all.
    #[error("is not valid PEM ({0}); a JKS or PKCS12 store must be converted to PEM")]
    NotPem(rustls::pki_types::pem::Error),
    /// An encrypted private key, which rustls cannot read.
    #[error(
        "holds an encrypted private key, which Ferry cannot read; decrypt it \
         (`openssl pkcs8 -in key.pem -out plain.pem`), keep the file readable only by the worker, \
         and remove ssl.key.password"
    )]
    EncryptedKey,
    /// No private key block.
    #[error(
        "holds no usable private key ({0}); it must be PEM (-----BEGIN PRIVATE KEY-----); a JKS or \
         PKCS12 keystore must be converted to PEM"
    )]
    NoKey(rustls::pki_types::pem::Error),
}

/// Why the keystore's identity cannot serve TLS; shown after the keystore's key.
#[derive(Debug, thiserror::Error)]
enum IdentityError {
    /// rustls refused the settings or the client verifier.
    #[error("{0}")]
    Settings(rustls::Error),
    /// The client certificate verifier cannot be built from the trust roots.
    #[error("{0}")]
    Verifier(rustls::server::VerifierBuilderError),
    /// The key does not match the chain, or is of an unsupported kind.
    #[error("the private key and certificate chain do not make a usable server identity: {0}")]
    Identity(rustls::Error),
}

impl<'a> TlsKeys<'a> {
    /// Chooses the prefix: Kafka Connect's valuesWithPrefixAllOrNothing, the listeners.https. keys
    /// when there are any.
    fn new(props: &'a Properties) -> Self {
        let prefix = if props.keys().any(|k| k.starts_with(LISTENERS_HTTPS_PREFIX)) {
            LISTENERS_HTTPS_PREFIX
        } else {
            ""
        };
        Self { props, prefix }
    }

    /// The full name of the `ssl.*` key `name`.
    fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The value of `name`, trimmed; `None` when unset or blank.
    fn get(&self, name: &str) -> Option<&'a str> {
        self.props
            .get(&self.key(name))
            .map(str::trim)
            .filter(|v| !v.is_empty())
    }

    /// The error for `name`. Inline PEM values (a private key) are never shown in messages.
    fn invalid(&self, name: &str, message: String) -> ConfigError {
        if INLINE_PEM_KEYS.contains(&name) {
            self.props.invalid_undeclared(&self.key(name), message)
        } else {
            self.props.invalid(&self.key(name), message)
        }
    }

    /// Warns about each set key the listener accepts but does not use.
    fn warn_ignored(&self) {
        for name in IGNORED_TLS_KEYS {
            if self.get(name).is_some() {
                tracing::warn!(
                    "{}: {} is ignored by the HTTPS listener (rustls offers TLS 1.2 and 1.3 with its own \
                     cipher suites and always checks host names)",
                    self.props.location(&self.key(name)),
                    self.key(name)
                );
            }
        }
    }

    /// Refuses a store type other than PEM (`name` is `ssl.keystore.type` or
    /// `ssl.truststore.type`) with a hint to convert it; returns whether it refused.
    fn refuse_unless_pem(&self, name: &str, errors: &mut Vec<ConfigError>) -> bool {
        let Some(kind) = self.get(name) else {
            return false;
        };
        let refused = !kind.eq_ignore_ascii_case("PEM");
        if refused {
            errors.push(self.invalid(
                name,
                format!(
                    "{kind} stores are not supported by Ferry's HTTPS listener; use PEM: set {name}=PEM \
                     and convert the store, e.g. `keytool -importkeystore -srckeystore store.jks \
                     -destkeystore store.p12 -deststoretype PKCS12` then `openssl pkcs12 -in store.p12 \
                     -nodes -out store.pem`"
                ),
            ));
        }
        refused
    }

    /// Reads the keystore and checks its private key and certificate chain; `None` when there is
    /// none to read (its location or inline keys are missing, mixed or unreadable).
    fn keystore(&self, errors: &mut Vec<ConfigError>) -> Option<Keystore> {
        let ((chain, private_key), source) = self.keystore_pem(errors)?;
        let (key_name, chain_name) = if self.get("ssl.keystore.location").is_some() {
            ("ssl.keystore.location", "ssl.keystore.location")
        } else {
            ("ssl.keystore.key", "ssl.keystore.certificate.chain")
        };
        if self.get("ssl.key.password").is_some() {
            tracing::warn!(
                "{}: {} is ignored: the HTTPS listener reads unencrypted PEM private keys only",
                self.props.location(&self.key("ssl.key.password")),
                self.key("ssl.key.password")
            );
        }
        let private_key = match private_key {
            Ok(k) => Some(k),
            Err(why) => {
                errors.push(self.invalid(key_name, why.to_string()));
                None
            }
        };
        let chain = match chain {
            Ok(c) if !c.is_empty() => Some(c),
            Ok(_) => {
                errors.push(self.invalid(
                    chain_name,
                    "holds no certificate (-----BEGIN CERTIFICATE-----); a JKS or PKCS12 keystore must be \
                     converted to PEM"
                        .to_owned(),
                ));
                None
            }
            Err(why) => {
                errors.push(self.invalid(chain_name, why.to_string()));
                None
            }
        };
        Some(Keystore {
            chain,
            private_key,
            source,
            key_name,
        })
    }

    /// The keystore's PEM, parsed: one file with the key and the chain, or both inline. Returns the
    /// chain, the key and where they came from.
    fn keystore_pem(&self, errors: &mut Vec<ConfigError>) -> Option<(ParsedKeystore, String)> {
        match (
            self.get("ssl.keystore.location"),
            self.get("ssl.keystore.key"),
            self.get("ssl.keystore.certificate.chain"),
        ) {
            (Some(path), None, None) => match std::fs::read(path) {
                Ok(bytes) => Some((
                    (certificates(&bytes), private_key(&bytes)),
                    format!("keystore {path}"),
                )),
                Err(e) => {
                    errors.push(
                        self.invalid("ssl.keystore.location", format!("cannot read {path}: {e}")),
                    );
                    None
                }
            },
            (None, Some(k), Some(c)) => Some((
                (certificates(c.as_bytes()), private_key(k.as_bytes())),
                format!("keystore {}", self.key("ssl.keystore.key")),
            )),
            (None, None, None) => {
                errors.push(self.invalid(
                    "ssl.keystore.location",
                    "an https:// listener needs a PEM keystore: set ssl.keystore.type=PEM and \
                     ssl.keystore.location (a file with the private key and the certificate chain), or \
                     ssl.keystore.key and ssl.keystore.certificate.chain"
                        .to_owned(),
                ));
                None
            }
            _ => {
                errors.push(
                    self.invalid(
                        "ssl.keystore.location",
                        "set either ssl.keystore.location, or both ssl.keystore.key and \
                     ssl.keystore.certificate.chain"
                            .to_owned(),
                    ),
                );
                None
            }
        }
    }

    /// Reads the truststore: PEM certificates, from a file or inline; `None` when there is none or
    /// it holds no certificate (then its error is pushed).
    fn truststore(&self, errors: &mut Vec<ConfigError>) -> Option<Vec<CertificateDer<'static>>> {
        match (
            self.get("ssl.truststore.location"),
            self.get("ssl.truststore.certificates"),
        ) {
            (Some(path), _) => match std::fs::read(path) {
                Ok(bytes) => match certificates(&bytes) {
                    Ok(c) if !c.is_empty() => Some(c),
                    _ => {
                        errors.push(self.invalid(
                            "ssl.truststore.location",
                            format!(
                                "{path} holds no PEM certificate (-----BEGIN CERTIFICATE-----); a JKS or \
                                 PKCS12 truststore must be converted to PEM"
                            ),
                        ));
                        None
                    }
                },
                Err(e) => {
                    errors.push(self.invalid(
                        "ssl.truststore.location",
                        format!("cannot read {path}: {e}"),
                    ));
                    None
                }
            },
            (None, Some(text)) => match certificates(text.as_bytes()) {
                Ok(c) if !c.is_empty() => Some(c),
                _ => {
                    errors.push(self.invalid(
                        "ssl.truststore.certificates",
                        "holds no PEM certificate".to_owned(),
                    ));
                    None
                }
            },
            (None, None) => None,
        }
    }

    /// Reads `ssl.client.auth`; checking client certificates needs a truststore.
    fn client_auth(&self, has_truststore: bool, errors: &mut Vec<ConfigError>) -> ClientAuth {
        let client_auth = match self
            .get("ssl.client.auth")
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("none") => ClientAuth::None,
            Some("requested") => ClientAuth::Requested,
            Some("required") => ClientAuth::Required,
            Some(_) => {
                errors.push(self.invalid(
                    "ssl.client.auth",
                    "must be one of none, requested, required".to_owned(),
                ));
                ClientAuth::None
            }
        };
        if client_auth != ClientAuth::None && !has_truststore {
            errors.push(self.invalid(
                "ssl.client.auth",
                "checking client certificates needs ssl.truststore.location (the PEM certificates of \
                 the CAs that sign them)"
                    .to_owned(),
            ));
        }
        client_auth
    }

    /// The certificates both sides trust (the truststore's, or the keystore's own chain); `None`
    /// when none of them parses.
    fn trust_roots(
        &self,
        anchors: Vec<CertificateDer<'static>>,
        errors: &mut Vec<ConfigError>,
    ) -> Option<Arc<rustls::RootCertStore>> {
        let mut roots = rustls::RootCertStore::empty();
        let (_, unusable) = roots.add_parsable_certificates(anchors);
        if roots.is_empty() {
            errors.push(self.props.invalid(
                &self.key("ssl.truststore.location"),
                format!("no usable certificate to trust ({unusable} could not be parsed)"),
            ));
            return None;
        }
        Some(Arc::new(roots))
    }

    /// The listener's description: where the keystore and truststore came from, and the client auth.
    fn describe(&self, source: &str, has_truststore: bool, client_auth: ClientAuth) -> String {
        format!(
            "{source} (PEM), {}, ssl.client.auth={}",
            match self.get("ssl.truststore.location") {
                Some(path) => format!("truststore {path}"),
                None if has_truststore => "truststore inline".to_owned(),
                None => "no truststore (forwarding trusts the keystore's own chain)".to_owned(),
            },
            format!("{client_auth:?}").to_ascii_lowercase()
        )
    }
}

/// The HTTPS listener's rustls settings: TLS 1.2 and 1.3, client certificates checked against
/// `roots` as `client_auth` asks, the keystore's identity, HTTP/1.1 over ALPN. The error is the
/// message for the keystore's key.
fn server_config(
    roots: &Arc<rustls::RootCertStore>,
    client_auth: ClientAuth,
    chain: &[CertificateDer<'static>],
    private_key: &PrivateKeyDer<'static>,
) -> Result<rustls::ServerConfig, IdentityError> {
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(IdentityError::Settings)?;
    let builder = match client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                roots.clone(),
                provider(),
            );
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(verifier.build().map_err(IdentityError::Verifier)?)
        }
    };
    let mut server = builder
        .with_single_cert(chain.to_vec(), private_key.clone_key())
        .map_err(IdentityError::Identity)?;
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(server)
}

/// Every `CERTIFICATE` block of PEM text.
fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, PemError> {
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(PemError::NotPem)
}

/// The one private key of PEM text (PKCS#8, PKCS#1 or SEC1, unencrypted).
fn private_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, PemError> {
    if pem
        .windows(b"ENCRYPTED PRIVATE KEY".len())
        .any(|w| w == b"ENCRYPTED PRIVATE KEY")
    {
        return Err(PemError::EncryptedKey);
    }
    PrivateKeyDer::from_pem_slice(pem).map_err(PemError::NoKey)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_java_properties_and_checked_exactly() {
        let props = Properties::parse(
            "creds",
            b"# users\nalice: s3cret\nbob=pa:ss\ncarol pass word\n",
        )
        .expect("parses");
        let creds = BasicCredentials::from_properties(&props).expect("users");
        assert!(creds.check("alice", "s3cret"));
        assert!(creds.check("bob", "pa:ss"));
        assert!(creds.check("carol", "pass word"));
        assert!(!creds.check("alice", "s3cre"));
        assert!(!creds.check("alice", "s3cret "));
        assert!(!creds.check("mallory", "s3cret"));
        assert!(!creds.check("", ""));
        assert!(!format!("{creds:?}").contains("s3cret"));
        let empty = Properties::parse("creds", b"# nobody\n").expect("parses");
        assert!(
            BasicCredentials::from_properties(&empty)
                .is_err_and(|e| e.to_string().contains("names no user"))
        );
    }

    #[test]
    fn tls_keys_are_recognized_with_and_without_the_listener_prefix() {
        assert!(is_key("ssl.keystore.location"));
        assert!(is_key("listeners.https.ssl.keystore.location"));
        assert!(is_key("listeners.https.ssl.cipher.suites"));
        assert!(is_key(REST_BASIC_AUTH_CREDENTIALS_FILE));
        assert!(!is_key("listeners.https.colour"));
        assert!(!is_key("ssl.colour"));
    }

    #[test]
    fn jks_stores_are_refused_with_a_hint_to_use_pem() {
        let props = Properties::from_pairs(
            "w",
            [
                ("ssl.keystore.type", "JKS"),
                ("ssl.keystore.location", "/nonexistent.jks"),
            ],
        );
        let mut errors = Vec::new();
        assert!(rest_tls(&props, &mut errors).is_none());
        let text = errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            text.contains("ssl.keystore.type") && text.contains("use PEM"),
            "{text}"
        );
    }
}
