//! TLS of both connections (`database.sslmode`, `sslrootcert`, `sslcert`, `sslkey`), with libpq's
//! meanings: `disable` plain; `prefer` TLS when the server offers it, unverified; `require` TLS,
//! unverified; `verify-ca` TLS with a certificate signed by `sslrootcert`; `verify-full` also for
//! this host name. The replication connection gets the same settings through
//! `pgwire-replication`'s `TlsConfig` (which refuses `verify-full` with an IP address as the
//! host: name the server by a DNS name its certificate holds, or use `verify-ca`).

use std::path::PathBuf;
use std::sync::Arc;

use ferry_postgres_tls::{AnyCertificate, ChainOnly};
use pgwire_replication::{SslMode as WireMode, TlsConfig};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

/// `database.sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plain TCP.
    Disable,
    /// TLS if offered, unverified.
    Prefer,
    /// TLS, unverified.
    Require,
    /// TLS, certificate chain verified.
    VerifyCa,
    /// TLS, chain and host name verified.
    VerifyFull,
}

impl SslMode {
    /// Parses Debezium's (libpq's) names.
    pub fn parse(value: &str) -> Option<Self> {
        Some(match value {
            "disable" => Self::Disable,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" | "verify_ca" => Self::VerifyCa,
            "verify-full" | "verify_full" => Self::VerifyFull,
            _ => return None,
        })
    }
}

/// The TLS settings of the connector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tls {
    /// `database.sslmode`
    pub mode: SslMode,
    /// `database.sslrootcert`: PEM CA certificates.
    pub root_cert: Option<PathBuf>,
    /// `database.sslcert`: PEM client certificate.
    pub cert: Option<PathBuf>,
    /// `database.sslkey`: PEM client key.
    pub key: Option<PathBuf>,
}

impl Tls {
    /// The replication connection's settings.
    pub fn wire(&self) -> TlsConfig {
        let mut tls = TlsConfig::disabled();
        tls.mode = match self.mode {
            SslMode::Disable => WireMode::Disable,
            SslMode::Prefer => WireMode::Prefer,
            SslMode::Require => WireMode::Require,
            SslMode::VerifyCa => WireMode::VerifyCa,
            SslMode::VerifyFull => WireMode::VerifyFull,
        };
        tls.ca_pem_path = self.root_cert.clone();
        tls.client_cert_pem_path = self.cert.clone();
        tls.client_key_pem_path = self.key.clone();
        tls
    }

    /// tokio-postgres's mode (verification is the rustls configuration's).
    pub fn postgres_mode(&self) -> tokio_postgres::config::SslMode {
        match self.mode {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            _ => tokio_postgres::config::SslMode::Require,
        }
    }

    /// The rustls configuration of the SQL connection.
    ///
    /// # Errors
    /// A certificate or key file cannot be read, with its path.
    pub fn client_config(&self) -> Result<ClientConfig, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup: {e}"))?;
        let verifier: Arc<dyn ServerCertVerifier> = match self.mode {
            SslMode::Disable | SslMode::Prefer | SslMode::Require => {
                Arc::new(AnyCertificate(provider.signature_verification_algorithms))
            }
            SslMode::VerifyCa | SslMode::VerifyFull => {
                let path = self.root_cert.as_ref().ok_or(
                    "database.sslmode=verify-ca/verify-full needs database.sslrootcert (the CA certificates, PEM)",
                )?;
                let mut roots = RootCertStore::empty();
                for cert in CertificateDer::pem_file_iter(path)
                    .map_err(|e| format!("database.sslrootcert {}: {e}", path.display()))?
                {
                    let cert =
                        cert.map_err(|e| format!("database.sslrootcert {}: {e}", path.display()))?;
                    roots
                        .add(cert)
                        .map_err(|e| format!("database.sslrootcert {}: {e}", path.display()))?;
                }
                let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|e| format!("database.sslrootcert {}: {e}", path.display()))?;
                if self.mode == SslMode::VerifyCa {
                    Arc::new(ChainOnly(webpki))
                } else {
                    webpki
                }
            }
        };
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                let certs = CertificateDer::pem_file_iter(cert)
                    .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| format!("database.sslcert {}: {e}", cert.display()))?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| format!("database.sslkey {}: {e}", key.display()))?;
                builder
                    .with_client_auth_cert(certs, key)
                    .map_err(|e| format!("database.sslcert/sslkey: {e}"))
            }
            (None, None) => Ok(builder.with_no_client_auth()),
            _ => Err("database.sslcert and database.sslkey go together".into()),
        }
    }
}
