//! The framework's own configuration keys, defined once with their type, default, importance and
//! documentation: the worker keys as [`ConfigKey`]s (the type connectors and backends use for theirs),
//! and the keys every connector takes as [`FrameworkKey`]s, which add what Kafka Connect's
//! `GET /connector-plugins/{p}/config` shows of them (group, order, width, display name).
//!
//! One table per room feeds the parser's list of accepted keys, the REST definitions and the
//! generated reference (`ferry docs reference`), so the three cannot disagree.

use ferry_api::ConfigKey;

/// How wide a key's input field is in a UI: Kafka Connect's `ConfigDef.Width`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// `NONE`.
    None,
    /// `SHORT`.
    Short,
    /// `MEDIUM`.
    Medium,
    /// `LONG`.
    Long,
}

impl Width {
    /// Kafka Connect's name: `NONE`, `SHORT`, `MEDIUM`, `LONG`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::None => "NONE",
            Self::Short => "SHORT",
            Self::Medium => "MEDIUM",
            Self::Long => "LONG",
        }
    }
}

/// A key the framework reads for every connector, with Kafka Connect's display metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameworkKey {
    /// The key: name, type, default, importance, documentation.
    pub key: ConfigKey,
    /// Its group, e.g. `Common`, `Error Handling`.
    pub group: &'static str,
    /// Its place in the group.
    pub order: i32,
    /// Its input width.
    pub width: Width,
    /// Its display name, e.g. `Tasks max`.
    pub display_name: &'static str,
}

impl FrameworkKey {
    /// `key` shown in `group` at `order`, with a width and display name.
    pub const fn new(
        key: ConfigKey,
        group: &'static str,
        order: i32,
        width: Width,
        display_name: &'static str,
    ) -> Self {
        Self {
            key,
            group,
            order,
            width,
            display_name,
        }
    }

    /// The key's name.
    pub const fn name(&self) -> &'static str {
        self.key.name
    }
}

/// Whether `keys` defines `name`.
pub fn defines(keys: &[ConfigKey], name: &str) -> bool {
    keys.iter().any(|k| k.name == name)
}

/// The names of `keys`, in order.
pub fn names(keys: &[ConfigKey]) -> impl Iterator<Item = &'static str> + '_ {
    keys.iter().map(|k| k.name)
}

#[cfg(test)]
mod tests {
    use ferry_api::{ConfigType, Importance};

    use super::*;

    #[test]
    fn a_framework_key_keeps_its_definition_and_display() {
        const KEY: FrameworkKey = FrameworkKey::new(
            ConfigKey::optional("tasks.max", Some("1"), "Maximum number of tasks.")
                .of_type(ConfigType::Int)
                .importance(Importance::High),
            "Common",
            3,
            Width::Short,
            "Tasks max",
        );
        assert_eq!(KEY.name(), "tasks.max");
        assert_eq!(KEY.key.config_type().name(), "INT");
        assert_eq!(KEY.key.config_importance().name(), "HIGH");
        assert_eq!(KEY.width.name(), "SHORT");
        let keys = [KEY.key.clone(), ConfigKey::required("name", "n")];
        assert!(defines(&keys, "name"));
        assert!(!defines(&keys, "nam"));
        assert_eq!(names(&keys).collect::<Vec<_>>(), ["tasks.max", "name"]);
    }
}
