//! Which Kafka client settings are secrets: declared, not guessed from their names.

/// librdkafka's sensitive properties (`_RK_SENSITIVE` in `rdkafka_conf.c`, librdkafka 2.12), and the
/// client keys Java's clients type as PASSWORD that Ferry passes through (`sasl.jaas.config`,
/// `ssl.truststore.password`, which librdkafka rejects but whose values must not be shown anyway).
const SENSITIVE_CLIENT_KEYS: &[&str] = &[
    "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.assertion.private.key.pem",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.config",
    "sasl.password",
    "sasl.username",
    "ssl.ca.pem",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.key.pem",
    "ssl.keystore.password",
    "ssl_key",
    "sasl.jaas.config",
    "ssl.truststore.password",
];

/// Whether the value of the Kafka client setting `key` (without a `producer.` prefix) must never be
/// shown in messages, logs or `Debug` output.
pub fn is_sensitive_client_key(key: &str) -> bool {
    SENSITIVE_CLIENT_KEYS.contains(&key)
}
