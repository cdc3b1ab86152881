//! Kafka client settings passed through to librdkafka (`producer.*` of the worker file).

use std::fmt;

use crate::redact::is_secret;

/// `producer.`: settings of the producer that sends records (`producer.linger.ms` → `linger.ms`).
pub const PRODUCER_PREFIX: &str = "producer.";

/// Kafka client settings passed to librdkafka as they are (`linger.ms=5`), in file order.
///
/// `Debug` shows every key but hides the values of secrets (`sasl.password`, `sasl.jaas.config`,
/// `ssl.key.password`, …).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct ClientOverrides(Vec<(String, String)>);

impl ClientOverrides {
    /// Settings from pairs, in order; a later pair of the same key wins.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let mut settings = ClientOverrides::default();
        for (key, value) in pairs {
            settings.set(key, value);
        }
        settings
    }

    /// Sets one setting (replacing an earlier value of the key in place).
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let (key, value) = (key.into(), value.into());
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => self.0.push((key, value)),
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The settings, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The settings as owned pairs, in order.
    pub fn to_vec(&self) -> Vec<(String, String)> {
        self.0.clone()
    }

    /// How many settings there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for ClientOverrides {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(
                self.0
                    .iter()
                    .map(|(k, v)| (k, if is_secret(k) { "[hidden]" } else { v.as_str() })),
            )
            .finish()
    }
}
