//! A blocking client of a Kafka Connect–compatible REST API (Kafka Connect's or Ferry's): one
//! request at a time, no connection kept between requests (a worker restarting or a proxy closing
//! idle connections cannot fail a later step), Basic or bearer authentication, HTTPS with the
//! system's roots or a CA file of the user's.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::Value;
use ureq::tls::{Certificate, RootCerts, TlsConfig};

use super::MigrateError;

/// The longest wait for one answer: Kafka Connect's own REST request timeout (90 s), so a slow
/// validation or stop is not cut here before the worker itself gives up.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(90);

/// How to reach one end of a move.
#[derive(Debug, Clone, Default)]
pub(crate) struct Endpoint {
    /// `http://host:port` or `https://host:port`, without a trailing slash.
    pub(crate) url: String,
    /// A file holding a bearer token (Ferry's `rest.auth.token`).
    pub(crate) token_file: Option<PathBuf>,
    /// A file holding `user:password` for Basic authentication.
    pub(crate) basic_auth_file: Option<PathBuf>,
    /// PEM certificates to trust for `https://` instead of the system's roots.
    pub(crate) cacert: Option<PathBuf>,
}

/// An answer: its status and body.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) body: String,
}

impl Reply {
    /// The body as JSON (`Null` when it is not JSON).
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// Kafka Connect's error message (`{"error_code":…,"message":…}`), else the body.
    pub(crate) fn message(&self) -> String {
        match self.json()["message"].as_str() {
            Some(message) => message.to_owned(),
            None => self.body.trim().to_owned(),
        }
    }
}

/// One end's REST API.
pub(crate) struct Rest {
    url: String,
    agent: ureq::Agent,
    authorization: Option<String>,
}

impl Rest {
    /// A client of `endpoint`.
    ///
    /// # Errors
    /// A credentials or CA file cannot be read, or holds nothing usable.
    pub(crate) fn new(endpoint: &Endpoint) -> Result<Self, MigrateError> {
        let url = endpoint.url.trim().trim_end_matches('/').to_owned();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(MigrateError::Usage(format!(
                "{url:?} is not a REST URL: give http://host:port or https://host:port"
            )));
        }
        let authorization = match (&endpoint.token_file, &endpoint.basic_auth_file) {
            (Some(_), Some(_)) => {
                return Err(MigrateError::Usage(format!(
                    "{url}: give a token file or a Basic credentials file, not both"
                )));
            }
            (Some(file), None) => Some(format!("Bearer {}", read_secret(file, "token")?)),
            (None, Some(file)) => {
                let credentials = read_secret(file, "Basic credentials")?;
                if !credentials.contains(':') {
                    return Err(MigrateError::Usage(format!(
                        "{}: Basic credentials must read user:password",
                        file.display()
                    )));
                }
                Some(format!("Basic {}", BASE64.encode(credentials.as_bytes())))
            }
            (None, None) => None,
        };
        let mut tls = TlsConfig::builder();
        if let Some(cacert) = &endpoint.cacert {
            tls = tls.root_certs(RootCerts::new_with_certs(&read_certificates(cacert)?));
        }
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .max_idle_connections(0)
            .tls_config(tls.build())
            .build()
            .new_agent();
        Ok(Self {
            url,
            agent,
            authorization,
        })
    }

    /// The base URL.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    pub(crate) fn get(&self, path: &str) -> Result<Reply, MigrateError> {
        self.send("GET", path, None)
    }

    pub(crate) fn put(&self, path: &str, body: Option<&Value>) -> Result<Reply, MigrateError> {
        self.send("PUT", path, body)
    }

    pub(crate) fn post(&self, path: &str, body: &Value) -> Result<Reply, MigrateError> {
        self.send("POST", path, Some(body))
    }

    pub(crate) fn patch(&self, path: &str, body: &Value) -> Result<Reply, MigrateError> {
        self.send("PATCH", path, Some(body))
    }

    pub(crate) fn delete(&self, path: &str) -> Result<Reply, MigrateError> {
        self.send("DELETE", path, None)
    }

    fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Reply, MigrateError> {
        let target = format!("{}{path}", self.url);
        let unreachable = |e: ureq::Error| MigrateError::Unreachable {
            request: format!("{method} {target}"),
            reason: e.to_string(),
        };
        let request = ureq::http::Request::builder()
            .method(method)
            .uri(&target)
            .header("Accept", "application/json");
        let request = match &self.authorization {
            Some(value) => request.header("Authorization", value),
            None => request,
        };
        let built = match body {
            Some(body) => request
                .header("Content-Type", "application/json")
                .body(body.to_string()),
            None => request.body(String::new()),
        }
        .map_err(|e| MigrateError::Usage(format!("{method} {target}: {e}")))?;
        let mut response = self.agent.run(built).map_err(unreachable)?;
        let status = response.status().as_u16();
        let body = response.body_mut().read_to_string().map_err(unreachable)?;
        Ok(Reply { status, body })
    }
}

fn read_secret(file: &Path, what: &str) -> Result<String, MigrateError> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        MigrateError::Usage(format!(
            "cannot read the {what} file {}: {e}",
            file.display()
        ))
    })?;
    let secret = text.trim().to_owned();
    if secret.is_empty() {
        return Err(MigrateError::Usage(format!(
            "the {what} file {} is empty",
            file.display()
        )));
    }
    Ok(secret)
}

fn read_certificates(file: &Path) -> Result<Vec<Certificate<'static>>, MigrateError> {
    let pem = std::fs::read(file).map_err(|e| {
        MigrateError::Usage(format!("cannot read the CA file {}: {e}", file.display()))
    })?;
    let certificates: Vec<Certificate<'static>> = ureq::tls::parse_pem(&pem)
        .filter_map(|item| match item {
            Ok(ureq::tls::PemItem::Certificate(cert)) => Some(cert),
            _ => None,
        })
        .collect();
    if certificates.is_empty() {
        return Err(MigrateError::Usage(format!(
            "the CA file {} holds no PEM certificate",
            file.display()
        )));
    }
    Ok(certificates)
}
