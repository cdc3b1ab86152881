//! Hiding secrets in what messages, logs and `Debug` output show.
//!
//! Two rules live here until every key declares its secrecy (`ferry_api::ConfigKey::secret`, issue 12):
//! the name-based guess [`is_secret`] and [`shown_value`], which hides the password in the two
//! connection-string keys Ferry knows. They are in one place so that removing them is one change.

const HIDDEN: &str = "[hidden]";

/// Whether a key's value must never appear in messages or `Debug` output (guessed from its name).
#[doc(hidden)]
pub fn is_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    // `sasl.jaas.config` and `sasl.oauthbearer.config` embed credentials; `ssl.key.pem` is a private key.
    [
        "password",
        "secret",
        "token",
        "credential",
        "jaas",
        "oauthbearer.config",
        "key.pem",
        "private",
    ]
    .iter()
    .any(|word| key.contains(word))
}

/// `value` of `key` as messages may show it: a connection string with its password hidden
/// (`offset.storage.postgres.url`, and PostgresSource's JDBC `connection.url`).
#[doc(hidden)]
pub fn shown_value(key: &str, value: &str) -> String {
    if key == "offset.storage.postgres.url" {
        redact_connection_string(value)
    } else if key == "connection.url" {
        // PostgresSource's JDBC URL may carry `?password=…`, also in the form without `//`.
        redact_jdbc_url(value)
    } else {
        value.to_owned()
    }
}

/// `text` with the password of a URL's user info, and any `password` parameter, hidden.
pub fn redact_connection_string(text: &str) -> String {
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

/// A JDBC URL with its user-info password and `password` parameters hidden.
pub fn redact_jdbc_url(text: &str) -> String {
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
