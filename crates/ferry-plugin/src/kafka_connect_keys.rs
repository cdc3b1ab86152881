//! Kafka Connect settings Ferry knows of but does not implement yet: refused with an error saying so
//! (`ConfigError::NotImplemented`), never as an "unknown" key, so a user moving a Kafka Connect
//! configuration learns it is a missing feature, not a typo.

/// (key or `prefix.`, what it is) for a source connector's configuration.
const CONNECTOR: &[(&str, &str)] = &[
    ("admin.override.", "per-connector client overrides"),
    ("consumer.override.", "per-connector client overrides"),
    (
        "config.action.reload",
        "restarting on a changed config provider value",
    ),
];

/// (key, what it is) for a worker's configuration (standalone and distributed).
const WORKER: &[(&str, &str)] = &[(
    "config.providers.",
    "config provider settings beyond class and allowlist",
)];

fn find(table: &[(&str, &'static str)], key: &str) -> Option<&'static str> {
    table
        .iter()
        .find(|(k, _)| {
            if k.ends_with('.') {
                key.starts_with(k)
            } else {
                key == *k
            }
        })
        .map(|(_, what)| *what)
}

/// What a connector key is, if it is a Kafka Connect setting Ferry does not implement yet.
pub fn not_implemented_connector_key(key: &str) -> Option<&'static str> {
    find(CONNECTOR, key)
}

/// What a worker key is, if it is a Kafka Connect setting Ferry does not implement yet. Call it only
/// for keys the worker did not accept (the config providers' class and allowlist keys are accepted).
pub fn not_implemented_worker_key(key: &str) -> Option<&'static str> {
    find(WORKER, key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_connect_keys_are_named_and_others_are_not() {
        // Implemented: not listed.
        assert_eq!(
            not_implemented_connector_key("transforms.MakeMap.type"),
            None
        );
        assert_eq!(
            not_implemented_connector_key("admin.override.linger.ms"),
            Some("per-connector client overrides")
        );
        // Implemented by the Kafka sink (it reads them itself).
        assert_eq!(
            not_implemented_connector_key("producer.override.linger.ms"),
            None
        );
        assert_eq!(
            not_implemented_connector_key("topic.creation.default.partitions"),
            None
        );
        assert_eq!(not_implemented_connector_key("transformz"), None);
        assert_eq!(not_implemented_connector_key("tasks.max"), None);
        assert_eq!(
            not_implemented_worker_key("exactly.once.source.support"),
            None,
            "implemented in both modes"
        );
        assert_eq!(not_implemented_worker_key("topic.creation.enable"), None);
        assert_eq!(not_implemented_worker_key("colour"), None);
    }
}
