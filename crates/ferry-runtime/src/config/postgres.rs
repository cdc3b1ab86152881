//! `offset.storage=postgres`: the keys of the PostgreSQL offset store.

use std::fmt;

use super::error::ConfigError;
use super::properties::Properties;

/// `offset.storage.postgres.url` (Ferry-only key): the PostgreSQL server and database holding the
/// offsets table, as a libpq connection string; required with `offset.storage=postgres`.
pub const OFFSET_STORAGE_POSTGRES_URL: &str = "offset.storage.postgres.url";
/// `offset.storage.postgres.table` (Ferry-only key): the offsets table, `table` or `schema.table`
/// (default `ferry_offsets`), created when missing.
pub const OFFSET_STORAGE_POSTGRES_TABLE: &str = "offset.storage.postgres.table";
/// The default `offset.storage.postgres.table`.
pub const DEFAULT_OFFSET_STORAGE_POSTGRES_TABLE: &str = "ferry_offsets";

/// The settings of `offset.storage=postgres`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOffsetStorageSpec {
    /// `offset.storage.postgres.url` (required).
    pub url: PostgresUrl,
    /// `offset.storage.postgres.table` (default `ferry_offsets`).
    pub table: String,
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
        redact(&self.0)
    }
}

impl fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.redacted())
    }
}

const HIDDEN: &str = "[hidden]";

/// `text` with the password of a URL's user info, and any `password` parameter, hidden.
pub(crate) fn redact(text: &str) -> String {
    if let Some(scheme_end) = text.find("://") {
        let (scheme, rest) = text.split_at(scheme_end + 3);
        let (before_query, query) = match rest.find('?') {
            Some(q) => rest.split_at(q),
            None => (rest, ""),
        };
        let authority = match before_query.rfind('@') {
            Some(at) => {
                let (userinfo, host) = before_query.split_at(at);
                match userinfo.split_once(':') {
                    Some((user, _)) => format!("{user}:{HIDDEN}{host}"),
                    None => before_query.to_owned(),
                }
            }
            None => before_query.to_owned(),
        };
        let query = query
            .split('&')
            .map(|param| match param.split_once('=') {
                Some((key, _)) if key.trim_start_matches('?').eq_ignore_ascii_case("password") => {
                    format!("{key}={HIDDEN}")
                }
                _ => param.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("&");
        return format!("{scheme}{authority}{query}");
    }
    redact_key_values(text)
}

/// `key=value` pairs with the value of `password` hidden (a value may be single-quoted with `\`
/// escapes, as libpq allows).
fn redact_key_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let trimmed = rest.trim_start();
        out.push_str(&rest[..rest.len() - trimmed.len()]);
        rest = trimmed;
        let key_len = rest
            .find(|c: char| c == '=' || c.is_whitespace())
            .unwrap_or(rest.len());
        let key = &rest[..key_len];
        out.push_str(key);
        rest = &rest[key_len..];
        let after_space = rest.trim_start();
        let Some(after_eq) = after_space.strip_prefix('=') else {
            continue;
        };
        out.push_str(&rest[..rest.len() - after_space.len()]);
        out.push('=');
        let value_start = after_eq.trim_start();
        out.push_str(&after_eq[..after_eq.len() - value_start.len()]);
        let value_len = value_length(value_start);
        if key == "password" {
            out.push_str(HIDDEN);
        } else {
            out.push_str(&value_start[..value_len]);
        }
        rest = &value_start[value_len..];
    }
    out
}

/// The length of the value at the start of `text`: a quoted value up to its closing quote, else up to
/// whitespace.
fn value_length(text: &str) -> usize {
    if let Some(quoted) = text.strip_prefix('\'') {
        let mut escaped = false;
        for (i, c) in quoted.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '\'' => return i + 2,
                _ => {}
            }
        }
        return text.len();
    }
    text.find(char::is_whitespace).unwrap_or(text.len())
}

/// `value` of `key` as messages may show it: the connection string with its password hidden.
pub(crate) fn shown_value(key: &str, value: &str) -> String {
    if key == OFFSET_STORAGE_POSTGRES_URL {
        redact(value)
    } else if key == "connection.url" {
        // PostgresSource's JDBC URL may carry `?password=…`, also in the form without `//`.
        redact_jdbc(value)
    } else {
        value.to_owned()
    }
}

/// A JDBC URL with its user-info password and `password` parameters hidden.
fn redact_jdbc(text: &str) -> String {
    if text.contains("://") {
        return redact(text);
    }
    let Some((base, query)) = text.split_once('?') else {
        return text.to_owned();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}={HIDDEN}"),
            _ => param.to_owned(),
        })
        .collect();
    format!("{base}?{}", query.join("&"))
}

/// Reads the postgres keys; pushes every problem to `errors`.
pub(crate) fn postgres_storage(
    props: &Properties,
    errors: &mut Vec<ConfigError>,
) -> Option<PostgresOffsetStorageSpec> {
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
            Err(message) => {
                errors.push(ConfigError::Invalid {
                    path: props.path().to_path_buf(),
                    key: OFFSET_STORAGE_POSTGRES_URL.to_owned(),
                    line: props.line_of(OFFSET_STORAGE_POSTGRES_URL),
                    value: Some(shown_value(OFFSET_STORAGE_POSTGRES_URL, url)),
                    message,
                });
                None
            }
        },
    };
    let table = match props.get(OFFSET_STORAGE_POSTGRES_TABLE).map(str::trim) {
        None => Some(DEFAULT_OFFSET_STORAGE_POSTGRES_TABLE.to_owned()),
        Some(table) => match check_table(table) {
            Ok(()) => Some(table.to_owned()),
            Err(message) => {
                errors.push(ConfigError::Invalid {
                    path: props.path().to_path_buf(),
                    key: OFFSET_STORAGE_POSTGRES_TABLE.to_owned(),
                    line: props.line_of(OFFSET_STORAGE_POSTGRES_TABLE),
                    value: Some(table.to_owned()),
                    message,
                });
                None
            }
        },
    };
    Some(PostgresOffsetStorageSpec {
        url: url?,
        table: table?,
    })
}

/// The shape of a libpq connection string (the store parses it fully when it connects).
fn check_url(url: &str) -> Result<(), String> {
    let lower = url.to_ascii_lowercase();
    if url.is_empty() {
        return Err(
            "must name the database, e.g. postgresql://ferry@db.example:5432/ferry".to_owned(),
        );
    }
    if lower.starts_with("jdbc:") {
        return Err(
            "is a JDBC URL; write it as libpq does, without the jdbc: prefix (e.g. \
             postgresql://ferry@db.example:5432/ferry?password=…)"
                .to_owned(),
        );
    }
    if lower.starts_with("postgresql://") || lower.starts_with("postgres://") {
        return Ok(());
    }
    if url.contains("://") {
        return Err(
            "must be a postgresql:// URL (e.g. postgresql://ferry@db.example:5432/ferry) or \
             key=value pairs (host=… user=… dbname=…)"
                .to_owned(),
        );
    }
    if url.contains('=') {
        return Ok(());
    }
    Err(
        "accepted: a URL, postgresql://user[:password]@host[:port]/dbname, or key=value pairs, \
         host=… port=… user=… dbname=…"
            .to_owned(),
    )
}

/// `table` or `schema.table`, each part a lower-case SQL identifier of at most 63 characters.
fn check_table(text: &str) -> Result<(), String> {
    let parts: Vec<&str> = text.split('.').collect();
    if parts.is_empty() || parts.len() > 2 {
        return Err(
            "write table or schema.table, e.g. ferry_offsets or ops.ferry_offsets".to_owned(),
        );
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
            return Err(format!(
                "{part:?} is not a lower-case SQL name: write table or schema.table with 1 to 63 \
                 characters of a-z, 0-9, _ and $ each, starting with a-z or _ (upper case is refused \
                 because PostgreSQL folds unquoted names to lower case)"
            ));
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
            assert_eq!(redact(url), shown, "{url}");
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
        assert!(check_table("ferry_offsets").is_ok());
        assert!(check_table("ops.offsets").is_ok());
        for bad in ["", "a.b.c", "Offsets", "1t", "t-x", "a."] {
            assert!(check_table(bad).is_err(), "{bad}");
        }
    }
}
