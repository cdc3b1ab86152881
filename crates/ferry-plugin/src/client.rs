//! Kafka client settings passed through to librdkafka (`producer.*` of the worker file).

use std::fmt;

/// `producer.`: settings of the producer that sends records (`producer.linger.ms` → `linger.ms`).
pub const PRODUCER_PREFIX: &str = "producer.";

/// Kafka client settings passed to librdkafka as they are (`linger.ms=5`), in file order.
///
/// `Debug` shows every key but hides the values of secrets: those set with
/// [`ClientOverrides::set_secret`] (the backend declares which of its client's keys are sensitive;
/// nothing is guessed from a key's name).
///
/// Equality compares the settings only, not which are marked secret.
#[derive(Clone, Default)]
pub struct ClientOverrides(Vec<Setting>);

#[derive(Clone)]
struct Setting {
    key: String,
    value: String,
    secret: bool,
}

impl PartialEq for ClientOverrides {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for ClientOverrides {}

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
        self.put(key.into(), value.into(), false);
    }

    /// Sets one setting whose value must never be shown (a password, a private key).
    pub fn set_secret(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.put(key.into(), value.into(), true);
    }

    fn put(&mut self, key: String, value: String, secret: bool) {
        match self.0.iter_mut().find(|s| s.key == key) {
            Some(setting) => {
                setting.value = value;
                setting.secret |= secret;
            }
            None => self.0.push(Setting { key, value, secret }),
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|s| s.key == key)
            .map(|s| s.value.as_str())
    }

    /// Whether the value of `key` must never be shown.
    pub fn is_secret(&self, key: &str) -> bool {
        self.0.iter().any(|s| s.key == key && s.secret)
    }

    /// The settings, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        self.0.iter().map(|s| (s.key.as_str(), s.value.as_str()))
    }

    /// The settings as owned pairs, in order.
    pub fn to_vec(&self) -> Vec<(String, String)> {
        self.0
            .iter()
            .map(|s| (s.key.clone(), s.value.clone()))
            .collect()
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
            .entries(self.0.iter().map(|s| {
                let shown = if s.secret {
                    "[hidden]"
                } else {
                    s.value.as_str()
                };
                (&s.key, shown)
            }))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_secrets_are_hidden_whatever_their_name_and_do_not_change_equality() {
        let mut declared = ClientOverrides::default();
        declared.set("linger.ms", "5");
        declared.set_secret("ssl.key.location", "/etc/keys/client.key");
        let debug = format!("{declared:?}");
        assert!(
            debug.contains("\"linger.ms\": \"5\"") && !debug.contains("client.key"),
            "{debug}"
        );
        assert!(declared.is_secret("ssl.key.location") && !declared.is_secret("linger.ms"));
        let plain = ClientOverrides::from_pairs([
            ("linger.ms", "5"),
            ("ssl.key.location", "/etc/keys/client.key"),
        ]);
        assert_eq!(declared, plain);
    }

    #[test]
    fn secrecy_is_what_the_backend_declares_not_guessed_from_the_name() {
        // `sasl.password` set with `set` is shown: the backend decides (ferry-kafka declares it secret).
        let plain = ClientOverrides::from_pairs([("sasl.password", "visible")]);
        assert!(!plain.is_secret("sasl.password"));
        assert!(format!("{plain:?}").contains("visible"));
    }
}
