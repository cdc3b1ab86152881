//! Hiding the password embedded in PostgreSQL connection strings, for keys that declare it
//! (`ferry_api::ConfigKey::embeds_secret`).

use ferry_api::{HIDDEN, Redactor};

/// A libpq connection string (`postgresql://user:password@host/db`, or `key=value` pairs) with its
/// password hidden.
pub const CONNECTION_STRING_REDACTOR: Redactor = Redactor {
    name: "libpq-connection-string",
    redact: redact_connection_string,
};

/// A JDBC URL (`jdbc:postgresql://host/db?password=…`, also without `//`) with its password hidden:
/// PostgresSource's `connection.url`.
pub const JDBC_URL_REDACTOR: Redactor = Redactor {
    name: "jdbc-url",
    redact: redact_jdbc_url,
};

/// `text` with the password of a URL's user info, and any `password` parameter, hidden.
pub(crate) fn redact_connection_string(text: &str) -> String {
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
pub(crate) fn value_length(text: &str) -> usize {
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

/// A JDBC URL with its user-info password and `password` parameters hidden.
fn redact_jdbc_url(text: &str) -> String {
    if text.contains("://") {
        return redact_connection_string(text);
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
            assert_eq!(redact_connection_string(url), shown, "{url}");
        }
    }
}
