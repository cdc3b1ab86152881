//! `connection.url`: a PostgreSQL JDBC URL (`jdbc:postgresql://host:port/db?user=…&password=…`) or a
//! libpq URL (`postgresql://…`), turned into a tokio-postgres configuration.
//!
//! Accepted JDBC forms, as the PostgreSQL JDBC driver reads them: `jdbc:postgresql:db`,
//! `jdbc:postgresql:/`, `jdbc:postgresql://host/db`, `jdbc:postgresql://host:port/db`,
//! `jdbc:postgresql://host1:port1,host2:port2/db` and `jdbc:postgresql://[::1]:5432/db`, with the
//! query parameters `user`, `password`, `connectTimeout` (seconds), `ApplicationName`,
//! `currentSchema`, `options` and TLS's `sslmode` (`disable`, `allow`, `prefer` — the default —,
//! `require`, `verify-ca`, `verify-full`), `sslrootcert`, `sslcert`, `sslkey`, `ssl=true` (pgjdbc:
//! `verify-full` unless `sslmode` says otherwise) and `sslfactory=org.postgresql.ssl.NonValidatingFactory`
//! (no certificate check). Other parameters are ignored with a warning at task start. Values are
//! percent-decoded. A libpq URL takes libpq's TLS parameters (see [`crate::tls`]).

use std::fmt;
use std::time::Duration;

use tokio_postgres::config::Host;

use crate::tls::{PercentError, SslMode, TlsError, TlsOptions, percent_decode, split_libpq};

/// What is wrong with `connection.url` (or `connection.user` / `connection.password` beside it), in
/// words fit for a config issue (never containing the password).
#[derive(Debug, thiserror::Error)]
pub(crate) enum UrlError {
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Percent(#[from] PercentError),
    #[error("is not a valid PostgreSQL URL ({0}); use jdbc:postgresql://host:port/database")]
    Libpq(#[source] tokio_postgres::Error),
    /// A JDBC URL of another database.
    #[error(
        "{scheme}: is not supported: Ferry's JDBC source reads PostgreSQL only; use \
         jdbc:postgresql://host:port/database"
    )]
    OtherDatabase { scheme: String },
    #[error(
        "must be a PostgreSQL JDBC URL like jdbc:postgresql://host:port/database (or a libpq URL \
         postgresql://host:port/database)"
    )]
    NotPostgres,
    #[error("names no user: set connection.user (or user=… in the URL)")]
    NoUser,
    #[error("sets user={url} while connection.user is {config}; set the user in one place")]
    UserConflict { url: String, config: String },
    #[error("sets a password different from connection.password; set the password in one place")]
    PasswordConflict,
    #[error("sets {key}={value}, which is not a whole number of seconds")]
    Timeout { key: String, value: String },
    /// `sslfactory=org.postgresql.ssl.NonValidatingFactory` with a `verify-*` mode.
    #[error(
        "sets sslfactory=org.postgresql.ssl.NonValidatingFactory (no certificate check) with \
         sslmode={mode}; use sslmode=require with it, or remove it to check the certificate"
    )]
    NonValidatingMode { mode: &'static str },
    #[error("has an unclosed IPv6 address [{0}")]
    UnclosedIpv6(String),
    #[error("has an invalid port {0:?} (a number from 1 to 65535)")]
    Port(String),
    #[error("has an empty host name")]
    EmptyHost,
}

/// The default port of PostgreSQL.
const DEFAULT_PORT: u16 = 5432;
/// How long a connection attempt may take when the URL does not say (`connectTimeout`): the JDBC
/// driver's default.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how to connect. `Debug` and `Display` show the server and user, never the password.
#[derive(Clone)]
pub(crate) struct ConnectionSpec {
    pub(crate) config: tokio_postgres::Config,
    /// `sslmode` and the certificates.
    pub(crate) tls: TlsOptions,
    /// URL parameters that were ignored, by name.
    pub(crate) ignored: Vec<String>,
}

impl fmt::Debug for ConnectionSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ConnectionSpec({self})")
    }
}

/// `PostgreSQL at 127.0.0.1:5432/test as user postgres`.
impl fmt::Display for ConnectionSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ports = self.config.get_ports();
        let hosts: Vec<String> = self
            .config
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(i, host)| {
                let port = ports
                    .get(i)
                    .or_else(|| ports.first())
                    .copied()
                    .unwrap_or(DEFAULT_PORT);
                match host {
                    Host::Tcp(name) if name.contains(':') => format!("[{name}]:{port}"),
                    Host::Tcp(name) => format!("{name}:{port}"),
                    Host::Unix(path) => format!("{}:{port}", path.display()),
                }
            })
            .collect();
        write!(
            f,
            "PostgreSQL at {}/{} as user {}",
            hosts.join(","),
            self.config.get_dbname().unwrap_or("<default database>"),
            self.config.get_user().unwrap_or("<none>")
        )
    }
}

/// Parses `connection.url` and applies `connection.user` / `connection.password`.
///
/// # Errors
/// What is wrong, in words fit for a config issue (never containing the password).
pub(crate) fn parse_connection(
    url: &str,
    user: Option<&str>,
    password: Option<&str>,
) -> Result<ConnectionSpec, UrlError> {
    let url = url.trim();
    let mut spec = if let Some(rest) = url.strip_prefix("jdbc:postgresql:") {
        parse_jdbc(rest)?
    } else if url.starts_with("postgresql://") || url.starts_with("postgres://") {
        let (rest, tls) = split_libpq(url)?;
        let config = rest
            .parse::<tokio_postgres::Config>()
            .map_err(UrlError::Libpq)?;
        ConnectionSpec {
            config,
            tls,
            ignored: Vec::new(),
        }
    } else if url.starts_with("jdbc:") {
        let scheme = url.split(':').take(2).collect::<Vec<_>>().join(":");
        return Err(UrlError::OtherDatabase { scheme });
    } else {
        return Err(UrlError::NotPostgres);
    };
    merge_credential(&mut spec.config, Credential::User, user)?;
    merge_credential(&mut spec.config, Credential::Password, password)?;
    if spec.config.get_user().is_none() {
        return Err(UrlError::NoUser);
    }
    if spec.config.get_hosts().is_empty() {
        spec.config.host("localhost");
    }
    if spec.config.get_connect_timeout().is_none() {
        spec.config.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
    }
    spec.tls.apply(&mut spec.config);
    // The certificate files are read now, so validation reports a missing or bad one; they are read
    // again at each connection (a renewed certificate is used without a restart).
    spec.tls.connector()?;
    if spec.config.get_application_name().is_none() {
        spec.config.application_name("ferry PostgresSource");
    }
    Ok(spec)
}

#[derive(Clone, Copy)]
enum Credential {
    User,
    Password,
}

/// Sets the user or password from its connector config unless the URL already set a different one.
fn merge_credential(
    config: &mut tokio_postgres::Config,
    which: Credential,
    value: Option<&str>,
) -> Result<(), UrlError> {
    let Some(value) = value else { return Ok(()) };
    match which {
        Credential::User => match config.get_user() {
            Some(existing) if existing != value => Err(UrlError::UserConflict {
                url: existing.to_owned(),
                config: value.to_owned(),
            }),
            _ => {
                config.user(value);
                Ok(())
            }
        },
        Credential::Password => match config.get_password() {
            Some(existing) if existing != value.as_bytes() => Err(UrlError::PasswordConflict),
            _ => {
                config.password(value);
                Ok(())
            }
        },
    }
}

/// Parses what follows `jdbc:postgresql:`.
fn parse_jdbc(rest: &str) -> Result<ConnectionSpec, UrlError> {
    let (location, query) = match rest.split_once('?') {
        Some((l, q)) => (l, Some(q)),
        None => (rest, None),
    };
    let mut config = tokio_postgres::Config::new();
    parse_location(location, &mut config)?;
    let mut tls = TlsOptions::default();
    let ignored = parse_properties(query.unwrap_or(""), &mut config, &mut tls)?;
    if tls.non_validating && matches!(tls.mode, SslMode::VerifyCa | SslMode::VerifyFull) {
        return Err(UrlError::NonValidatingMode {
            mode: tls.mode.name(),
        });
    }
    Ok(ConnectionSpec {
        config,
        tls,
        ignored,
    })
}

/// Parses the hosts (`//host:port,…/database`) or the bare database of the URL into `config`.
fn parse_location(location: &str, config: &mut tokio_postgres::Config) -> Result<(), UrlError> {
    let database = if let Some(authority_and_path) = location.strip_prefix("//") {
        let (authority, path) = match authority_and_path.split_once('/') {
            Some((a, p)) => (a, p),
            None => (authority_and_path, ""),
        };
        for host in authority.split(',').filter(|h| !h.is_empty()) {
            let (name, port) = split_host_port(host)?;
            config.host(name);
            config.port(port);
        }
        path
    } else {
        // jdbc:postgresql:database or jdbc:postgresql:/ — localhost.
        location.trim_start_matches('/')
    };
    let database = percent_decode(database)?;
    if !database.is_empty() {
        config.dbname(database);
    }
    Ok(())
}

/// Applies the URL's properties (`key=value&…`) to `config` and `tls`; returns the keys ignored.
fn parse_properties(
    query: &str,
    config: &mut tokio_postgres::Config,
    tls: &mut TlsOptions,
) -> Result<Vec<String>, UrlError> {
    let mut ignored = Vec::new();
    let (mut ssl, mut mode_set) = (false, false);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decode(value)?;
        match key {
            "user" => {
                config.user(value);
            }
            "password" => {
                config.password(value);
            }
            "ssl" => ssl = value != "false",
            "sslfactory" if value == "org.postgresql.ssl.NonValidatingFactory" => {
                tls.non_validating = true;
            }
            "sslmode" => {
                mode_set = true;
                tls.take(key, &value)?;
            }
            _ if tls.take(key, &value)? => {}
            "connectTimeout" | "loginTimeout" => {
                let seconds: u64 = value.parse().map_err(|_| UrlError::Timeout {
                    key: key.to_owned(),
                    value: value.clone(),
                })?;
                if seconds > 0 {
                    config.connect_timeout(Duration::from_secs(seconds));
                }
            }
            "ApplicationName" => {
                config.application_name(value);
            }
            "currentSchema" => {
                config.options(format!("-c search_path={}", value.replace(' ', "\\ ")));
            }
            "options" => {
                config.options(value);
            }
            other => ignored.push(other.to_owned()),
        }
    }
    // pgjdbc: ssl=true without sslmode is verify-full.
    if ssl && !mode_set {
        tls.mode = SslMode::VerifyFull;
    }
    Ok(ignored)
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`.
fn split_host_port(text: &str) -> Result<(String, u16), UrlError> {
    let (name, port) = if let Some(v6) = text.strip_prefix('[') {
        let (name, after) = v6
            .split_once(']')
            .ok_or_else(|| UrlError::UnclosedIpv6(v6.to_owned()))?;
        (name, after.strip_prefix(':'))
    } else {
        match text.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (text, None),
        }
    };
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => p.parse().map_err(|_| UrlError::Port(p.to_owned()))?,
    };
    if name.is_empty() {
        return Err(UrlError::EmptyHost);
    }
    Ok((percent_decode(name)?, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> ConnectionSpec {
        match parse_connection(url, Some("postgres"), None) {
            Ok(spec) => spec,
            Err(e) => panic!("{url}: {e}"),
        }
    }

    #[test]
    fn jdbc_urls() {
        let spec =
            parse("jdbc:postgresql://127.0.0.1:5433/test?password=s%40cret&connectTimeout=3");
        assert_eq!(spec.config.get_hosts(), &[Host::Tcp("127.0.0.1".into())]);
        assert_eq!(spec.config.get_ports(), &[5433]);
        assert_eq!(spec.config.get_dbname(), Some("test"));
        assert_eq!(spec.config.get_password(), Some(&b"s@cret"[..]));
        assert_eq!(
            spec.config.get_connect_timeout(),
            Some(&Duration::from_secs(3))
        );
        assert_eq!(
            spec.to_string(),
            "PostgreSQL at 127.0.0.1:5433/test as user postgres"
        );
        assert!(!format!("{spec:?}").contains("s@cret"));

        let spec = parse("jdbc:postgresql://db.example/app");
        assert_eq!(spec.config.get_ports(), &[5432]);
        let spec = parse("jdbc:postgresql://a:1,b/app?tcpKeepAlive=true");
        assert_eq!(spec.config.get_ports(), &[1, 5432]);
        assert_eq!(spec.ignored, vec!["tcpKeepAlive".to_owned()]);
        let spec = parse("jdbc:postgresql://[::1]:6000/app");
        assert_eq!(spec.config.get_hosts(), &[Host::Tcp("::1".into())]);
        assert_eq!(
            spec.to_string(),
            "PostgreSQL at [::1]:6000/app as user postgres"
        );
        let spec = parse("jdbc:postgresql:app");
        assert_eq!(spec.config.get_hosts(), &[Host::Tcp("localhost".into())]);
        assert_eq!(spec.config.get_dbname(), Some("app"));
        let spec = parse("postgresql://postgres@localhost:5432/app");
        assert_eq!(spec.config.get_user(), Some("postgres"));
        let e = parse_connection("postgresql://u@localhost/app", Some("other"), None);
        assert!(e.is_err());
    }

    #[test]
    fn tls_parameters() {
        // The URL alone (parse_connection also reads the certificate files, which do not exist here).
        let jdbc = |rest: &str| match parse_jdbc(rest) {
            Ok(spec) => spec.tls,
            Err(e) => panic!("{rest}: {e}"),
        };
        let tls =
            jdbc("//h/db?sslmode=verify-full&sslrootcert=%2Fca.pem&sslcert=/c.pem&sslkey=/k.pk8");
        assert_eq!(tls.mode, SslMode::VerifyFull);
        assert_eq!(
            tls.root_cert.as_deref(),
            Some(std::path::Path::new("/ca.pem"))
        );
        assert_eq!(tls.cert.as_deref(), Some(std::path::Path::new("/c.pem")));
        assert_eq!(tls.key.as_deref(), Some(std::path::Path::new("/k.pk8")));
        assert_eq!(jdbc("//h/db").mode, SslMode::Prefer);
        assert_eq!(jdbc("//h/db?ssl=true").mode, SslMode::VerifyFull);
        assert_eq!(jdbc("//h/db?ssl").mode, SslMode::VerifyFull);
        assert_eq!(
            jdbc("//h/db?ssl=true&sslmode=require").mode,
            SslMode::Require
        );
        assert!(jdbc("//h/db?sslfactory=org.postgresql.ssl.NonValidatingFactory").non_validating);
        // tokio-postgres's own mode: the verify-* modes and require need TLS.
        let spec = parse("jdbc:postgresql://h/db?sslmode=require");
        assert_eq!(
            spec.config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Require
        );
        let spec = parse("jdbc:postgresql://h/db?sslmode=disable");
        assert_eq!(
            spec.config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Disable
        );
        let spec = parse("postgresql://h/db");
        assert_eq!(
            spec.config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Prefer
        );
        // A certificate file that is not there is reported when the URL is read.
        let e = parse_connection(
            "postgresql://h/db?sslmode=verify-ca&sslrootcert=/nonexistent/ca.pem",
            Some("u"),
            None,
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(
            e.contains("sslrootcert=/nonexistent/ca.pem: cannot be read"),
            "{e}"
        );
    }

    #[test]
    fn bad_urls() {
        for (url, fragment) in [
            ("jdbc:mysql://localhost/db", "jdbc:mysql: is not supported"),
            ("http://x", "must be a PostgreSQL JDBC URL"),
            ("jdbc:postgresql://h:99999/db", "invalid port"),
            ("jdbc:postgresql://h/db?sslmode=verify", "sslmode=verify;"),
            (
                "jdbc:postgresql://h/db?sslpassword=x",
                "encrypted client keys",
            ),
            ("jdbc:postgresql://h/db?password=%zz", "%-escape"),
        ] {
            match parse_connection(url, Some("u"), None) {
                Ok(_) => panic!("{url} was accepted"),
                Err(e) => assert!(e.to_string().contains(fragment), "{url}: {e}"),
            }
        }
        let e = parse_connection("jdbc:postgresql://h/db", None, None).err();
        assert!(e.is_some_and(|e| e.to_string().contains("connection.user")));
    }
}
