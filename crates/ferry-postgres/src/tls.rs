//! TLS of PostgreSQL connections (the source's `connection.url` and `offset.storage.postgres.url`):
//! libpq's `sslmode`, `sslrootcert`, `sslcert` and `sslkey`, over rustls (ring).
//!
//! As libpq: `disable` is plain text; `allow` and `prefer` (the default) try TLS and fall back to plain
//! text when the server does not offer it (or the handshake fails); `require` encrypts without checking
//! the server's certificate, unless a root certificate is given (`sslrootcert`, or
//! `~/.postgresql/root.crt` exists), then it checks the chain as `verify-ca` does; `verify-ca` checks that
//! the server's certificate chains to `sslrootcert`; `verify-full` also that it names the host connected
//! to. `sslcert` and `sslkey` present a client certificate (PEM, or DER: pgjdbc's `.pk8` keys).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferry_postgres_tls::{AnyCertificate, ChainOnly};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};
use tokio_postgres::Client;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The largest certificate or key file read (a chain of a few certificates is a few KiB).
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// A TLS parameter of a connection string that is invalid or unsupported, or certificate files that
/// cannot be used; in words for a config issue.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsError {
    #[error(
        "sets sslmode={0}; use one of disable, allow, prefer, require, verify-ca, \
         verify-full"
    )]
    SslMode(String),
    #[error(
        "sets sslpassword, but encrypted client keys are not supported; give sslkey an \
         unencrypted key file (openssl pkey -in key.pem -out key-plain.pem) readable only \
         by the worker"
    )]
    SslPassword,
    /// `sslcrl` or `sslcrldir`.
    #[error("sets {0}, but certificate revocation lists are not supported; remove it")]
    Crl(String),
    #[error(transparent)]
    Percent(#[from] PercentError),
    #[error("cannot set up TLS: {0}")]
    Setup(#[source] rustls::Error),
    /// `verify-*` without a root certificate.
    #[error(
        "sets sslmode={mode}, which checks the server's certificate, but names no CA \
         certificate: set sslrootcert=/path/to/ca.pem (the CA that signed the server's \
         certificate; ~/.postgresql/root.crt does not exist), or use sslmode=require to \
         encrypt without checking the certificate"
    )]
    NoRootCert { mode: &'static str },
    /// `sslrootcert=system` with a mode other than `verify-full`.
    #[error(
        "sets sslrootcert=system with sslmode={mode}: the system's CA certificates are \
         used only with sslmode=verify-full (as libpq); use it, or set sslrootcert \
         to a CA file"
    )]
    SystemRootsMode { mode: &'static str },
    #[error(
        "sets sslrootcert=system, but no system CA certificates were found ({}); install the \
         system's CA bundle (Debian: ca-certificates) or set sslrootcert to a CA file",
        joined(errors)
    )]
    NoSystemRoots {
        /// Why the system's certificates could not be loaded (empty: none are installed).
        errors: Vec<rustls_native_certs::Error>,
    },
    #[error(
        "sslrootcert={}: a certificate in it is not a usable CA certificate ({source})",
        root.display()
    )]
    BadCaCert {
        root: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("sslrootcert={}: cannot be used ({source})", root.display())]
    RootUnusable {
        root: PathBuf,
        #[source]
        source: rustls::client::VerifierBuilderError,
    },
    #[error(
        "sslcert={} and sslkey={} cannot be used together ({source}); check that the key \
         is the certificate's",
        cert.display(),
        key.display()
    )]
    ClientAuth {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error(
        "sets sslcert={} without sslkey; set sslkey to the certificate's private key",
        .0.display()
    )]
    CertWithoutKey(PathBuf),
    #[error(
        "sets sslkey={} without sslcert; set sslcert to the client certificate",
        .0.display()
    )]
    KeyWithoutCert(PathBuf),
    /// `key`: the parameter naming the file (`sslrootcert`, `sslcert`, `sslkey`).
    #[error("{key}={}: cannot be read ({source})", path.display())]
    Unreadable {
        key: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{key}={}: is {size} bytes, more than a certificate file ({MAX_FILE_BYTES} bytes at most)",
        path.display()
    )]
    TooLarge {
        key: &'static str,
        path: PathBuf,
        size: u64,
    },
    #[error("{key}={}: is not a PEM certificate file ({source})", path.display())]
    NotPem {
        key: &'static str,
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error(
        "{key}={}: holds no certificate (expected -----BEGIN CERTIFICATE-----)",
        path.display()
    )]
    NoCertificate { key: &'static str, path: PathBuf },
    #[error(
        "sslkey={}: holds no unencrypted private key ({source}); give a PEM key (BEGIN PRIVATE KEY, \
         BEGIN RSA PRIVATE KEY or BEGIN EC PRIVATE KEY) or a PKCS#8 DER key",
        path.display()
    )]
    NoKey {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
}

/// `errors` joined by `; `, or "none installed".
fn joined(errors: &[rustls_native_certs::Error]) -> String {
    if errors.is_empty() {
        "none installed".to_owned()
    } else {
        let why: Vec<String> = errors.iter().map(ToString::to_string).collect();
        why.join("; ")
    }
}

/// A `%XX` escape of a URL parameter that does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PercentError {
    #[error("has an invalid %-escape")]
    InvalidEscape,
    #[error("has %-escapes that are not UTF-8")]
    NotUtf8,
}

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum SslMode {
    /// Plain text only.
    Disable,
    /// libpq tries plain text first; here as `prefer` (TLS first), which reaches the same servers.
    Allow,
    /// TLS when the server offers it, else plain text (libpq's and pgjdbc's default).
    #[default]
    Prefer,
    /// TLS, the certificate unchecked (checked as `verify-ca` when a root certificate is given).
    Require,
    /// TLS, the certificate chaining to `sslrootcert`.
    VerifyCa,
    /// TLS, the certificate chaining to `sslrootcert` and naming the host.
    VerifyFull,
}

impl SslMode {
    /// Parses a `sslmode` value.
    pub(crate) fn parse(value: &str) -> Result<Self, TlsError> {
        Ok(match value {
            "disable" => Self::Disable,
            "allow" => Self::Allow,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            other => return Err(TlsError::SslMode(other.to_owned())),
        })
    }

    /// The `sslmode` value.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Allow => "allow",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }
}

/// How a connection uses TLS: the `ssl*` settings of a connection string.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct TlsOptions {
    /// `sslmode` (default `prefer`).
    pub(crate) mode: SslMode,
    /// `sslrootcert`: the CA certificates (PEM or DER file) the server's certificate must chain to.
    pub(crate) root_cert: Option<PathBuf>,
    /// `sslcert`: the client certificate (and its chain), PEM or DER.
    pub(crate) cert: Option<PathBuf>,
    /// `sslkey`: the client certificate's private key, PEM (PKCS#8, PKCS#1 or SEC1) or PKCS#8 DER.
    pub(crate) key: Option<PathBuf>,
    /// pgjdbc's `sslfactory=org.postgresql.ssl.NonValidatingFactory`: no certificate check at all.
    pub(crate) non_validating: bool,
    /// `sslsni=0`: no server name indication.
    pub(crate) no_sni: bool,
    /// Whether `sslmode` was given (else `sslrootcert=system` makes it `verify-full`).
    pub(crate) mode_given: bool,
}

/// `sslrootcert=system`: the operating system's CA certificates (libpq 16).
const SYSTEM: &str = "system";

/// Whether and how the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verify {
    None,
    Chain,
    Full,
}

impl TlsOptions {
    /// Takes the TLS parameter `key` of a connection string (libpq's names, which pgjdbc shares).
    /// `Ok(false)`: not a TLS parameter.
    ///
    /// # Errors
    /// An invalid or unsupported value, in words for a config issue.
    pub(crate) fn take(&mut self, key: &str, value: &str) -> Result<bool, TlsError> {
        match key {
            "sslmode" => {
                self.mode = SslMode::parse(value)?;
                self.mode_given = true;
            }
            "sslrootcert" => {
                self.root_cert = non_empty(value);
                // libpq: the system's CAs make verify-full the default (and the only mode allowed).
                if value == SYSTEM && !self.mode_given {
                    self.mode = SslMode::VerifyFull;
                }
            }
            "sslcert" => self.cert = non_empty(value),
            "sslkey" => self.key = non_empty(value),
            "sslsni" => self.no_sni = value == "0",
            "sslpassword" => return Err(TlsError::SslPassword),
            "sslcrl" | "sslcrldir" => return Err(TlsError::Crl(key.to_owned())),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Sets `config`'s own `sslmode` (tokio-postgres knows `disable`, `prefer` and `require`; the
    /// certificate checks are the TLS connector's).
    pub(crate) fn apply(&self, config: &mut tokio_postgres::Config) {
        use tokio_postgres::config::SslMode as Pg;
        config.ssl_mode(match self.mode {
            SslMode::Disable => Pg::Disable,
            SslMode::Allow | SslMode::Prefer => Pg::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Pg::Require,
        });
    }

    /// `sslmode=verify-full` (and the root certificate), for messages.
    pub(crate) fn describe(&self) -> String {
        match &self.root_cert {
            Some(root) if self.mode != SslMode::Disable => {
                format!(
                    "sslmode={} with sslrootcert={}",
                    self.mode.name(),
                    root.display()
                )
            }
            _ => format!("sslmode={}", self.mode.name()),
        }
    }

    /// The root certificate file: `sslrootcert`, else `~/.postgresql/root.crt` when it exists (as
    /// libpq).
    fn root_file(&self) -> Option<PathBuf> {
        self.root_cert
            .clone()
            .or_else(|| default_file("root.crt").filter(|p| p.is_file()))
    }

    fn verify(&self, root: Option<&Path>) -> Verify {
        match self.mode {
            SslMode::VerifyFull => Verify::Full,
            SslMode::VerifyCa => Verify::Chain,
            _ if self.non_validating => Verify::None,
            SslMode::Disable => Verify::None,
            SslMode::Allow | SslMode::Prefer | SslMode::Require if root.is_some() => Verify::Chain,
            SslMode::Allow | SslMode::Prefer | SslMode::Require => Verify::None,
        }
    }

    /// The TLS connector: reads the certificate files now (so a renewed certificate is used by the
    /// next connection).
    ///
    /// # Errors
    /// A file that is missing, unreadable or not a certificate or key; `verify-*` without a root
    /// certificate.
    pub(crate) fn connector(&self) -> Result<MakeRustlsConnect, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Setup)?;
        let root = if self.mode == SslMode::Disable {
            None
        } else {
            self.root_file()
        };
        let verify = self.verify(root.as_deref());
        let verifier: Arc<dyn ServerCertVerifier> = match verify {
            Verify::None => Arc::new(AnyCertificate(provider.signature_verification_algorithms)),
            Verify::Chain | Verify::Full => {
                let Some(root) = root.as_deref() else {
                    return Err(TlsError::NoRootCert {
                        mode: self.mode.name(),
                    });
                };
                let mut roots = RootCertStore::empty();
                let certs = if root == Path::new(SYSTEM) {
                    if self.mode != SslMode::VerifyFull {
                        return Err(TlsError::SystemRootsMode {
                            mode: self.mode.name(),
                        });
                    }
                    system_roots()?
                } else {
                    read_certs(root, "sslrootcert")?
                };
                for cert in certs {
                    roots.add(cert).map_err(|source| TlsError::BadCaCert {
                        root: root.to_owned(),
                        source,
                    })?;
                }
                let webpki =
                    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                        .build()
                        .map_err(|source| TlsError::RootUnusable {
                            root: root.to_owned(),
                            source,
                        })?;
                if verify == Verify::Full {
                    webpki
                } else {
                    Arc::new(ChainOnly(webpki))
                }
            }
        };
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let mut config = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                let chain = read_certs(cert, "sslcert")?;
                let key_der = read_key(key)?;
                builder
                    .with_client_auth_cert(chain, key_der)
                    .map_err(|source| TlsError::ClientAuth {
                        cert: cert.clone(),
                        key: key.clone(),
                        source,
                    })?
            }
            (Some(cert), None) => return Err(TlsError::CertWithoutKey(cert.clone())),
            (None, Some(key)) => return Err(TlsError::KeyWithoutCert(key.clone())),
            (None, None) => builder.with_no_client_auth(),
        };
        config.enable_sni = !self.no_sni;
        // As libpq 17: lets a server that checks ALPN (PostgreSQL 17, sslnegotiation=direct) accept
        // the connection; older servers ignore it.
        config.alpn_protocols = vec![b"postgresql".to_vec()];
        Ok(MakeRustlsConnect::new(config))
    }
}

/// The operating system's CA certificates (`sslrootcert=system`).
fn system_roots() -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let found = rustls_native_certs::load_native_certs();
    if found.certs.is_empty() {
        return Err(TlsError::NoSystemRoots {
            errors: found.errors,
        });
    }
    Ok(found.certs)
}

fn non_empty(value: &str) -> Option<PathBuf> {
    (!value.is_empty()).then(|| PathBuf::from(value))
}

/// `~/.postgresql/<name>`, libpq's default place of its TLS files.
fn default_file(name: &str) -> Option<PathBuf> {
    std::env::var_os("HOME").map(|home| Path::new(&home).join(".postgresql").join(name))
}

/// A certificate or key file's bytes.
fn read_file(path: &Path, key: &'static str) -> Result<Vec<u8>, TlsError> {
    let unreadable = |source| TlsError::Unreadable {
        key,
        path: path.to_owned(),
        source,
    };
    let size = std::fs::metadata(path).map_err(unreadable)?.len();
    if size > MAX_FILE_BYTES {
        return Err(TlsError::TooLarge {
            key,
            path: path.to_owned(),
            size,
        });
    }
    std::fs::read(path).map_err(unreadable)
}

fn is_pem(bytes: &[u8]) -> bool {
    bytes.windows(10).any(|w| w == b"-----BEGIN")
}

/// The certificates of a PEM file (all of them) or a DER file (one).
fn read_certs(path: &Path, key: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read_file(path, key)?;
    let certs = if is_pem(&bytes) {
        CertificateDer::pem_slice_iter(&bytes)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| TlsError::NotPem {
                key,
                path: path.to_owned(),
                source,
            })?
    } else {
        vec![CertificateDer::from(bytes)]
    };
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            key,
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

/// The private key of a PEM file, or of a PKCS#8 DER file (pgjdbc's `.pk8`).
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read_file(path, "sslkey")?;
    if is_pem(&bytes) {
        PrivateKeyDer::from_pem_slice(&bytes).map_err(|source| TlsError::NoKey {
            path: path.to_owned(),
            source,
        })
    } else {
        Ok(PrivateKeyDer::Pkcs8(bytes.into()))
    }
}

/// Why connecting failed: the message (with what to do for a TLS failure), and whether trying again
/// may help.
pub(crate) struct ConnectFailure {
    /// What failed and what to do.
    pub(crate) message: String,
    /// The client's error, when there is one (not for a bad certificate file).
    pub(crate) error: Option<tokio_postgres::Error>,
    /// A TLS setting or certificate problem, which retrying does not fix.
    pub(crate) permanent: bool,
}

impl fmt::Display for ConnectFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Connects with `tls`; the connection future must be spawned. With `prefer`/`allow`, a failed TLS
/// handshake is followed by a plain-text attempt, as libpq does.
pub(crate) async fn connect(
    config: &tokio_postgres::Config,
    tls: &TlsOptions,
    chain: fn(&tokio_postgres::Error) -> String,
) -> Result<
    (
        Client,
        impl Future<Output = Result<(), tokio_postgres::Error>> + Send + 'static,
    ),
    ConnectFailure,
> {
    let connector = tls.connector().map_err(|message| ConnectFailure {
        message: format!("TLS settings: {message}"),
        error: None,
        permanent: true,
    })?;
    let mut config = config.clone();
    tls.apply(&mut config);
    let first = config.connect(connector.clone()).await;
    let error = match first {
        Ok((client, connection)) => return Ok((client, connection)),
        Err(e) => e,
    };
    if is_tls_failure(&error) && matches!(tls.mode, SslMode::Prefer | SslMode::Allow) {
        tracing::debug!(
            "PostgreSQL: TLS handshake failed with sslmode={} ({}); trying plain text",
            tls.mode.name(),
            chain(&error)
        );
        config.ssl_mode(tokio_postgres::config::SslMode::Disable);
        if let Ok(ok) = config.connect(connector).await {
            return Ok(ok);
        }
    }
    let permanent = is_tls_failure(&error);
    let mut message = chain(&error);
    if permanent {
        message.push_str("; ");
        message.push_str(&tls_hint(&message, tls));
    }
    Err(ConnectFailure {
        message,
        error: Some(error),
        permanent,
    })
}

/// A failed TLS negotiation (the server refused TLS, or its certificate or the handshake was refused),
/// not a broken network.
pub(crate) fn is_tls_failure(error: &tokio_postgres::Error) -> bool {
    if !error
        .to_string()
        .starts_with("error performing TLS handshake")
    {
        return false;
    }
    match std::error::Error::source(error).and_then(|s| s.downcast_ref::<std::io::Error>()) {
        // rustls reports its own errors inside an I/O error.
        Some(io) => io
            .get_ref()
            .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some()),
        None => true,
    }
}

/// What to do after the TLS failure `text` (the caller names the settings).
fn tls_hint(text: &str, tls: &TlsOptions) -> String {
    let unchecked = if matches!(tls.mode, SslMode::VerifyCa | SslMode::VerifyFull) {
        "or use sslmode=require (without sslrootcert) to encrypt without checking it"
    } else {
        "or remove sslrootcert to encrypt without checking it"
    };
    if text.contains("server does not support TLS") {
        "the server does not accept TLS connections: enable ssl on the server (postgresql.conf \
         ssl=on), or use sslmode=prefer or disable"
            .to_owned()
    } else if text.contains("NotValidForName") || text.contains("not valid for name") {
        "the server's certificate does not name the host connected to: connect with a host name the \
         certificate lists in its subjectAltName, or use sslmode=verify-ca to check only the \
         certificate chain"
            .to_owned()
    } else if text.contains("UnknownIssuer") || text.contains("unknown issuer") {
        format!(
            "the server's certificate is not signed by a CA in sslrootcert: set sslrootcert to the CA \
             certificate that signed the server's certificate, {unchecked}"
        )
    } else if text.contains("Expired") || text.contains("expired") || text.contains("NotValidYet") {
        format!("the server's certificate is not valid now: renew it on the server, {unchecked}")
    } else {
        "the TLS handshake failed: check the server's ssl settings and the sslrootcert, sslcert and \
         sslkey files"
            .to_owned()
    }
}

/// A libpq connection string (URL or `key=value` pairs) without its TLS parameters, and those
/// parameters: tokio-postgres knows neither `sslrootcert`, `sslcert`, `sslkey` nor the `verify-*` modes.
///
/// # Errors
/// An invalid or unsupported TLS parameter.
pub(crate) fn split_libpq(text: &str) -> Result<(String, TlsOptions), TlsError> {
    let mut tls = TlsOptions::default();
    let text = text.trim();
    if text.contains("://") {
        let Some((base, query)) = text.split_once('?') else {
            return Ok((text.to_owned(), tls));
        };
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decoded = percent_decode(value)?;
            if !tls.take(key, &decoded)? {
                kept.push(pair);
            }
        }
        let rest = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return Ok((rest, tls));
    }
    let mut kept = Vec::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        let key_len = rest
            .find(|c: char| c == '=' || c.is_whitespace())
            .unwrap_or(rest.len());
        let key = &rest[..key_len];
        let Some(after_eq) = rest[key_len..].trim_start().strip_prefix('=') else {
            // Not key=value: left for tokio-postgres to report.
            return Ok((text.to_owned(), tls));
        };
        let value_start = after_eq.trim_start();
        let value_len = crate::redact::value_length(value_start);
        let raw = &value_start[..value_len];
        if !tls.take(key, &unquote(raw))? {
            kept.push(format!("{key}={raw}"));
        }
        rest = &value_start[value_len..];
    }
    Ok((kept.join(" "), tls))
}

/// A `key=value` value without its quotes and `\` escapes.
fn unquote(raw: &str) -> String {
    let Some(inner) = raw
        .strip_prefix('\'')
        .map(|r| r.strip_suffix('\'').unwrap_or(r))
    else {
        return raw.to_owned();
    };
    let mut out = String::with_capacity(inner.len());
    let mut escaped = false;
    for c in inner.chars() {
        if escaped || c != '\\' {
            out.push(c);
            escaped = false;
        } else {
            escaped = true;
        }
    }
    out
}

/// Decodes `%XX` escapes of a URL parameter.
pub(crate) fn percent_decode(text: &str) -> Result<String, PercentError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or(PercentError::InvalidEscape)?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| PercentError::NotUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libpq_strings_lose_their_tls_parameters() {
        let split = |text| split_libpq(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let (rest, tls) = split(
            "postgresql://u:p@h:5432/db?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&connect_timeout=3",
        );
        assert_eq!(rest, "postgresql://u:p@h:5432/db?connect_timeout=3");
        assert_eq!(tls.mode, SslMode::VerifyFull);
        assert_eq!(tls.root_cert, Some(PathBuf::from("/etc/ca.pem")));
        let (rest, tls) = split("postgresql://h/db?sslmode=require");
        assert_eq!(rest, "postgresql://h/db");
        assert_eq!(tls.mode, SslMode::Require);
        let (rest, tls) = split(
            "host=h user=u password='a b\\'c' sslmode=verify-ca sslrootcert='/my certs/ca.pem' dbname=x",
        );
        assert_eq!(rest, "host=h user=u password='a b\\'c' dbname=x");
        assert_eq!(tls.mode, SslMode::VerifyCa);
        assert_eq!(tls.root_cert, Some(PathBuf::from("/my certs/ca.pem")));
        let (rest, tls) = split("postgresql://h/db");
        assert_eq!(
            (rest.as_str(), tls.mode),
            ("postgresql://h/db", SslMode::Prefer)
        );
        assert!(split_libpq("host=h sslmode=verify").is_err());
    }

    #[test]
    fn modes_and_keys() {
        let mut tls = TlsOptions::default();
        assert_eq!(tls.mode, SslMode::Prefer);
        assert!(tls.take("sslmode", "verify-full").unwrap_or(false));
        assert_eq!(tls.mode, SslMode::VerifyFull);
        assert!(tls.take("sslrootcert", "/ca.pem").unwrap_or(false));
        assert_eq!(tls.root_cert, Some(PathBuf::from("/ca.pem")));
        assert!(!tls.take("user", "x").unwrap_or(true));
        assert!(tls.take("sslmode", "verify").is_err());
        assert!(tls.take("sslpassword", "x").is_err());
        // sslrootcert=system: verify-full unless sslmode says otherwise, which is then refused.
        let mut tls = TlsOptions::default();
        assert!(tls.take("sslrootcert", "system").unwrap_or(false));
        assert_eq!(tls.mode, SslMode::VerifyFull);
        let mut tls = TlsOptions::default();
        assert!(tls.take("sslmode", "require").unwrap_or(false));
        assert!(tls.take("sslrootcert", "system").unwrap_or(false));
        assert_eq!(tls.mode, SslMode::Require);
        let e = tls
            .connector()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("sslrootcert=system with sslmode=require"), "{e}");
    }

    #[test]
    fn verification_follows_libpq() {
        let root = Some(Path::new("/ca.pem"));
        let with = |mode| TlsOptions {
            mode,
            ..TlsOptions::default()
        };
        assert_eq!(with(SslMode::Require).verify(None), Verify::None);
        assert_eq!(with(SslMode::Require).verify(root), Verify::Chain);
        assert_eq!(with(SslMode::Prefer).verify(root), Verify::Chain);
        assert_eq!(with(SslMode::VerifyCa).verify(root), Verify::Chain);
        assert_eq!(with(SslMode::VerifyFull).verify(root), Verify::Full);
        let nonvalidating = TlsOptions {
            mode: SslMode::Require,
            non_validating: true,
            ..TlsOptions::default()
        };
        assert_eq!(nonvalidating.verify(root), Verify::None);
    }

    #[test]
    fn verify_without_a_root_certificate_is_refused() {
        let tls = TlsOptions {
            mode: SslMode::VerifyFull,
            root_cert: Some(PathBuf::from("/nonexistent/ca.pem")),
            ..TlsOptions::default()
        };
        let e = tls
            .connector()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("sslrootcert=/nonexistent/ca.pem: cannot be read"),
            "{e}"
        );
        let tls = TlsOptions {
            mode: SslMode::Require,
            cert: Some(PathBuf::from("/c.pem")),
            ..TlsOptions::default()
        };
        let e = tls
            .connector()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("without sslkey"), "{e}");
    }
}
