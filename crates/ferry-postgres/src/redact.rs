//! Hiding the password embedded in PostgreSQL connection strings, for keys that declare it
//! (`ferry_api::ConfigKey::embeds_secret`).

use ferry_api::Redactor;

/// A libpq connection string (`postgresql://user:password@host/db`, or `key=value` pairs) with its
/// password hidden.
pub const CONNECTION_STRING_REDACTOR: Redactor = Redactor {
    name: "libpq-connection-string",
    redact: ferry_plugin::redact::redact_connection_string,
};

/// A JDBC URL (`jdbc:postgresql://host/db?password=…`, also without `//`) with its password hidden:
/// PostgresSource's `connection.url`.
pub const JDBC_URL_REDACTOR: Redactor = Redactor {
    name: "jdbc-url",
    redact: ferry_plugin::redact::redact_jdbc_url,
};
