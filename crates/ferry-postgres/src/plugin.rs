//! PostgreSQL as a worker backend: `offset.storage=postgres` ([`PostgresStorePlugin`]), reading its own
//! worker keys; the runtime does not know them.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::redact::redact_connection_string;
use async_trait::async_trait;
use ferry_api::ConfigKey;
use ferry_offsets::{OffsetBackingStore, StoreError};
use ferry_plugin::{ConfigError, DynStoreSpec, OffsetStorePlugin, OpenMode, Properties};

use crate::store::{PostgresOffsetStore, PostgresOffsetStoreConfig};
use crate::tls::TlsError;

/// What is wrong with `offset.storage.postgres.url`, before the store connects.
#[derive(Debug, thiserror::Error)]
enum UrlKeyError {
    #[error("must name the database, e.g. postgresql://ferry@db.example:5432/ferry")]
    Empty,
    #[error(
        "is a JDBC URL; write it as libpq does, without the jdbc: prefix (e.g. \
         postgresql://ferry@db.example:5432/ferry?password=…)"
    )]
    Jdbc,
    /// A URL of another scheme.
    #[error(
        "must be a postgresql:// URL (e.g. postgresql://ferry@db.example:5432/ferry) or \
         key=value pairs (host=… user=… dbname=…)"
    )]
    OtherScheme,
    #[error(
        "accepted: a URL, postgresql://user[:password]@host[:port]/dbname, or key=value pairs, \
         host=… port=… user=… dbname=…"
    )]
    NotConnectionString,
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// What is wrong with `offset.storage.postgres.table`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum TableKeyError {
    #[error("write table or schema.table, e.g. ferry_offsets or ops.ferry_offsets")]
    Shape,
    /// A part that is not a lower-case SQL name.
    #[error(
        "{0:?} is not a lower-case SQL name: write table or schema.table with 1 to 63 \
         characters of a-z, 0-9, _ and $ each, starting with a-z or _ (upper case is refused \
         because PostgreSQL folds unquoted names to lower case)"
    )]
    NotLowerCaseName(String),
}

/// `offset.storage.postgres.url` (Ferry-only key): the PostgreSQL server and database holding the
/// offsets table, as a libpq connection string; required with `offset.storage=postgres`.
pub const OFFSET_STORAGE_POSTGRES_URL: &str = "offset.storage.postgres.url";
/// `offset.storage.postgres.table` (Ferry-only key): the offsets table, `table` or `schema.table`
/// (default `ferry_offsets`), created when missing.
pub const OFFSET_STORAGE_POSTGRES_TABLE: &str = "offset.storage.postgres.table";
/// The default `offset.storage.postgres.table`.
pub const DEFAULT_OFFSET_STORAGE_POSTGRES_TABLE: &str = "ferry_offsets";

/// `offset.storage.postgres.url`, whose password is hidden wherever it is shown.
const URL_KEY: ConfigKey = ConfigKey::required(
    OFFSET_STORAGE_POSTGRES_URL,
    "the database holding the offsets table, e.g. postgresql://ferry@db.example:5432/ferry",
)
.embeds_secret(crate::redact::CONNECTION_STRING_REDACTOR);
/// `offset.storage.postgres.table`.
const TABLE_KEY: ConfigKey = ConfigKey::optional(
    OFFSET_STORAGE_POSTGRES_TABLE,
    Some(DEFAULT_OFFSET_STORAGE_POSTGRES_TABLE),
    "the offsets table, table or schema.table",
);

/// The runtime's offsets-file key, which has no effect with this store.
const OFFSET_STORAGE_FILE: &str = "offset.storage.file.filename";

/// `offset.storage=postgres`: a PostgreSQL table, one row per partition (`offset.storage.postgres.url`,
/// `offset.storage.postgres.table`).
#[derive(Debug, Clone, Copy, Default)]
pub struct PostgresStorePlugin;

impl OffsetStorePlugin for PostgresStorePlugin {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn description(&self) -> &'static str {
        "a PostgreSQL table (offset.storage=postgres)"
    }

    fn hint(&self) -> &'static str {
        "in PostgreSQL with offset.storage=postgres and offset.storage.postgres.url"
    }

    fn accepted(&self) -> &'static str {
        "postgres (offset.storage.postgres.url)"
    }

    fn keys(&self) -> Vec<ConfigKey> {
        vec![URL_KEY, TABLE_KEY]
    }

    fn parse(
        &self,
        props: &Properties,
        _alternatives: &[&'static str],
        errors: &mut Vec<ConfigError>,
    ) -> Option<Arc<dyn DynStoreSpec>> {
        if props.get(OFFSET_STORAGE_FILE).is_some() {
            tracing::warn!(
                file = %props.path().display(),
                key = OFFSET_STORAGE_FILE,
                "{}: {OFFSET_STORAGE_FILE} has no effect with offset.storage=postgres; ignored",
                props.location(OFFSET_STORAGE_FILE)
            );
        }
        postgres_storage(props, errors).map(|spec| Arc::new(spec) as Arc<dyn DynStoreSpec>)
    }
}

/// The settings of `offset.storage=postgres`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresStoreSpec {
    /// `offset.storage.postgres.url` (required).
    pub url: PostgresUrl,
    /// `offset.storage.postgres.table` (default `ferry_offsets`).
    pub table: String,
}

impl fmt::Display for PostgresStoreSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "postgres table {} at {}",
            self.table,
            self.url.redacted()
        )
    }
}

#[async_trait]
impl DynStoreSpec for PostgresStoreSpec {
    fn plugin(&self) -> &'static str {
        "postgres"
    }

    /// The offsets table, created when missing and refused when it has another shape.
    async fn open(&self, _mode: OpenMode) -> Result<Arc<dyn OffsetBackingStore>, StoreError> {
        let config =
            PostgresOffsetStoreConfig::new(self.url.expose()).with_table(self.table.clone());
        Ok(Arc::new(PostgresOffsetStore::open(config).await?))
    }

    fn exclusive(&self) -> bool {
        false
    }

    // One transaction per write.
    fn atomic_batches(&self) -> bool {
        true
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A libpq connection string: a URL (`postgresql://user:password@host:5432/db?…`) or `key=value`
/// pairs (`host=… user=… password=… dbname=…`).
///
/// `Debug` and [`PostgresUrl::redacted`] show it with the password replaced by `[hidden]`.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresUrl(String);

impl PostgresUrl {
    /// The connection string `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self(url.into())
    }

    /// The connection string itself, password included: only for connecting.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The connection string with any password replaced by `[hidden]`, for messages.
    pub fn redacted(&self) -> String {
        redact_connection_string(&self.0)
    }
}

impl fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.redacted())
    }
}

/// Reads the postgres keys; pushes every problem to `errors`.
fn postgres_storage(
    props: &Properties,
    errors: &mut Vec<ConfigError>,
) -> Option<PostgresStoreSpec> {
    let url = match props.get(OFFSET_STORAGE_POSTGRES_URL).map(str::trim) {
        None => {
            errors.push(ConfigError::Missing {
                path: props.path().to_path_buf(),
                key: OFFSET_STORAGE_POSTGRES_URL.to_owned(),
                hint:
                    "offset.storage=postgres needs the database that holds the offsets table, e.g. \
                       offset.storage.postgres.url=postgresql://ferry@db.example:5432/ferry"
                        .to_owned(),
            });
            None
        }
        Some(url) => match check_url(url) {
            Ok(()) => Some(PostgresUrl::new(url)),
            Err(e) => {
                errors.push(ConfigError::Invalid {
                    path: props.path().to_path_buf(),
                    key: OFFSET_STORAGE_POSTGRES_URL.to_owned(),
                    line: props.line_of(OFFSET_STORAGE_POSTGRES_URL),
                    value: Some(URL_KEY.shown(url).into_owned()),
                    message: e.to_string(),
                });
                None
            }
        },
    };
    let table = match props.get(OFFSET_STORAGE_POSTGRES_TABLE).map(str::trim) {
        None => Some(DEFAULT_OFFSET_STORAGE_POSTGRES_TABLE.to_owned()),
        Some(table) => match check_table(table) {
            Ok(()) => Some(table.to_owned()),
            Err(e) => {
                errors.push(ConfigError::Invalid {
                    path: props.path().to_path_buf(),
                    key: OFFSET_STORAGE_POSTGRES_TABLE.to_owned(),
                    line: props.line_of(OFFSET_STORAGE_POSTGRES_TABLE),
                    value: Some(table.to_owned()),
                    message: e.to_string(),
                });
                None
            }
        },
    };
    Some(PostgresStoreSpec {
        url: url?,
        table: table?,
    })
}

/// The shape of a libpq connection string (the store parses it fully when it connects).
fn check_url(url: &str) -> Result<(), UrlKeyError> {
    let lower = url.to_ascii_lowercase();
    if url.is_empty() {
        return Err(UrlKeyError::Empty);
    }
    if lower.starts_with("jdbc:") {
        return Err(UrlKeyError::Jdbc);
    }
    if lower.starts_with("postgresql://") || lower.starts_with("postgres://") {
        // The TLS parameters and certificate files are checked now; the rest when the store connects.
        return check_tls(url);
    }
    if url.contains("://") {
        return Err(UrlKeyError::OtherScheme);
    }
    if url.contains('=') {
        return check_tls(url);
    }
    Err(UrlKeyError::NotConnectionString)
}

/// The TLS parameters of a connection string, and the certificate files they name.
fn check_tls(url: &str) -> Result<(), UrlKeyError> {
    let (_, tls) = crate::tls::split_libpq(url)?;
    tls.connector()?;
    Ok(())
}

/// `table` or `schema.table`, each part a lower-case SQL identifier of at most 63 characters.
fn check_table(text: &str) -> Result<(), TableKeyError> {
    let parts: Vec<&str> = text.split('.').collect();
    if parts.is_empty() || parts.len() > 2 {
        return Err(TableKeyError::Shape);
    }
    for part in parts {
        let first_ok = part
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'_');
        let rest_ok = part
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'$');
        if !first_ok || !rest_ok || part.len() > 63 {
            return Err(TableKeyError::NotLowerCaseName(part.to_owned()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_hidden() {
        for (url, shown) in [
            (
                "postgresql://ferry:s3cret@db:5432/offsets",
                "postgresql://ferry:[hidden]@db:5432/offsets",
            ),
            (
                "postgres://ferry:p@ss@db/offsets?sslmode=disable&password=s3cret",
                "postgres://ferry:[hidden]@db/offsets?sslmode=disable&password=[hidden]",
            ),
            (
                "postgresql://db/offsets?password=s3cret",
                "postgresql://db/offsets?password=[hidden]",
            ),
            (
                "postgresql://ferry@db/offsets",
                "postgresql://ferry@db/offsets",
            ),
            (
                "host=db user=ferry password=s3cret dbname=offsets",
                "host=db user=ferry password=[hidden] dbname=offsets",
            ),
            (
                "host=db password = 's3 c\\'ret' dbname=x",
                "host=db password = [hidden] dbname=x",
            ),
        ] {
            assert_eq!(PostgresUrl::new(url).redacted(), shown, "{url}");
            assert!(!format!("{:?}", PostgresUrl::new(url)).contains("s3"));
        }
    }

    #[test]
    fn url_and_table_shapes() {
        assert!(check_url("postgresql://postgres@127.0.0.1:5432/test").is_ok());
        assert!(check_url("host=127.0.0.1 user=postgres dbname=test").is_ok());
        assert!(check_url("jdbc:postgresql://h/db").is_err());
        assert!(check_url("mysql://h/db").is_err());
        assert!(check_url("db.example").is_err());
        assert!(check_url("postgresql://h/db?sslmode=require").is_ok());
        assert!(check_url("host=h sslmode=disable").is_ok());
        let e = check_url("host=h sslmode=verify-ca sslrootcert=/nonexistent/ca.pem")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("sslrootcert=/nonexistent/ca.pem: cannot be read"),
            "{e}"
        );
        let e = check_url("postgresql://h/db?sslmode=on")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("sslmode=on"), "{e}");
        assert!(check_table("ferry_offsets").is_ok());
        assert!(check_table("ops.offsets").is_ok());
        for bad in ["", "a.b.c", "Offsets", "1t", "t-x", "a."] {
            assert!(check_table(bad).is_err(), "{bad}");
        }
    }
}
