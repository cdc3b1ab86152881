//! `Filter`: drops every record. Meant to be used with a predicate
//! (`transforms.f.predicate=p`), so only the records the predicate selects are dropped.

use ferry_api::transform::{Transformation, TransformationPlugin};
use ferry_api::{Config, ConfigIssue, ConfigKey, ConnectError, SourceRecord};

use crate::PACKAGE;

pub(crate) fn plugins() -> Vec<TransformationPlugin> {
    vec![TransformationPlugin::new(
        [format!("{PACKAGE}.Filter")],
        || Box::new(Filter) as Box<dyn Transformation>,
    )]
}

/// Kafka Connect's `Filter`: no configuration; every record is dropped (its offset is still
/// committed).
struct Filter;

impl Transformation for Filter {
    fn config_keys(&self) -> Vec<ConfigKey> {
        Vec::new()
    }

    fn configure(&mut self, _config: &Config) -> Result<(), Vec<ConfigIssue>> {
        Ok(())
    }

    fn apply(&mut self, _record: SourceRecord) -> Result<Option<SourceRecord>, ConnectError> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_drops_every_record_and_ignores_unknown_keys() {
        let plugin = &plugins()[0];
        assert!(plugin.answers_to("org.apache.kafka.connect.transforms.Filter"));
        let mut filter = plugin.make();
        assert!(filter.config_keys().is_empty());
        let config: Config = [("anything".to_owned(), "x".to_owned())]
            .into_iter()
            .collect();
        filter.configure(&config).unwrap();
        for record in [
            SourceRecord::builder("t").build(),
            SourceRecord::builder("t")
                .value(serde_json::json!({"a": 1}))
                .timestamp(1)
                .build(),
        ] {
            assert_eq!(filter.apply(record).unwrap(), None);
        }
    }
}
