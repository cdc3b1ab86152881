//! Exactly-once source delivery's settings (Kafka Connect's KIP-618 names and values): the
//! distributed worker's `exactly.once.source.support`, and each connector's `exactly.once.support`,
//! `transaction.boundary` and `transaction.boundary.interval.ms`.

use std::time::Duration;

use ferry_api::{Config, ExactlyOnceSupport, SourceConnector, TransactionBoundaries};

/// Worker key: `disabled` (default), `preparing`, `enabled`.
pub const EXACTLY_ONCE_SOURCE_SUPPORT: &str = "exactly.once.source.support";
/// Connector key: `requested` (default) or `required`.
pub const EXACTLY_ONCE_SUPPORT: &str = "exactly.once.support";
/// Connector key: `poll` (default), `interval`, `connector`.
pub const TRANSACTION_BOUNDARY: &str = "transaction.boundary";
/// Connector key: the interval of `transaction.boundary=interval` (default: the worker's
/// `offset.flush.interval.ms`).
pub const TRANSACTION_BOUNDARY_INTERVAL_MS: &str = "transaction.boundary.interval.ms";

/// `exactly.once.source.support`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExactlyOnceSource {
    /// Every task delivers at least once (its offset commits are still fenced by the broker).
    #[default]
    Disabled,
    /// Kafka Connect's step of a rolling upgrade (workers fence zombie task producers but do not
    /// write transactionally yet): in Ferry, every task already fences its offset commits, so
    /// `preparing` behaves as `disabled`.
    Preparing,
    /// Connectors that can deliver exactly once do (see [`delivery`]).
    Enabled,
}

impl ExactlyOnceSource {
    /// Parses a value, case-insensitively.
    ///
    /// # Errors
    /// The accepted values, for the error message.
    pub fn parse(value: &str) -> Result<Self, &'static str> {
        match value.trim().to_ascii_lowercase().as_str() {
            "disabled" => Ok(Self::Disabled),
            "preparing" => Ok(Self::Preparing),
            "enabled" => Ok(Self::Enabled),
            _ => Err("accepted values: disabled (default), preparing, enabled"),
        }
    }
}

/// Where a connector's transactions end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionBoundary {
    /// One transaction per poll batch.
    Poll,
    /// One transaction per interval (`None`: the worker's `offset.flush.interval.ms`).
    Interval(Option<Duration>),
    /// Where the task says, through its `TransactionContext`.
    Connector,
}

/// A connector's exactly-once settings, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectorExactlyOnce {
    /// `exactly.once.support=required`.
    pub required: bool,
    /// `transaction.boundary`.
    pub boundary: TransactionBoundary,
}

impl ConnectorExactlyOnce {
    /// Reads the keys of `config`.
    ///
    /// # Errors
    /// (key, message) per invalid value.
    pub fn parse(config: &Config) -> Result<Self, Vec<(String, String)>> {
        let mut issues = Vec::new();
        let required = match config
            .get(EXACTLY_ONCE_SUPPORT)
            .map(|v| v.trim().to_ascii_lowercase())
            .as_deref()
        {
            None | Some("requested") => false,
            Some("required") => true,
            Some(_) => {
                issues.push((
                    EXACTLY_ONCE_SUPPORT.to_owned(),
                    "accepted values: requested (default), required".to_owned(),
                ));
                false
            }
        };
        let interval = match config
            .get(TRANSACTION_BOUNDARY_INTERVAL_MS)
            .map(|v| v.trim())
        {
            None | Some("") => None,
            Some(text) => match text.parse::<u64>() {
                Ok(ms) if ms > 0 => Some(Duration::from_millis(ms)),
                _ => {
                    issues.push((
                        TRANSACTION_BOUNDARY_INTERVAL_MS.to_owned(),
                        "must be a positive number of milliseconds".to_owned(),
                    ));
                    None
                }
            },
        };
        let boundary = match config
            .get(TRANSACTION_BOUNDARY)
            .map(|v| v.trim().to_ascii_lowercase())
            .as_deref()
        {
            None | Some("poll") => TransactionBoundary::Poll,
            Some("interval") => TransactionBoundary::Interval(interval),
            Some("connector") => TransactionBoundary::Connector,
            Some(_) => {
                issues.push((
                    TRANSACTION_BOUNDARY.to_owned(),
                    "accepted values: poll (default), interval, connector".to_owned(),
                ));
                TransactionBoundary::Poll
            }
        };
        // KIP-618's connector offsets topic: Kafka Connect refuses an empty name.
        if config
            .get(crate::OFFSETS_STORAGE_TOPIC)
            .is_some_and(|t| t.trim().is_empty())
        {
            issues.push((
                crate::OFFSETS_STORAGE_TOPIC.to_owned(),
                "String must be non-empty (leave it out to use the worker's offsets topic)"
                    .to_owned(),
            ));
        }
        if issues.is_empty() {
            Ok(Self { required, boundary })
        } else {
            Err(issues)
        }
    }
}

/// Kafka Connect's preflight checks of a source connector's configuration (run when a connector is
/// validated, created or reconfigured): `exactly.once.support=required` needs a worker with
/// `exactly.once.source.support=enabled` and a connector that declares support for this
/// configuration. Returns (key, message) per problem, in Kafka Connect's words; a configuration
/// whose exactly-once keys do not parse has its problems reported by [`ConnectorExactlyOnce::parse`].
pub fn preflight(
    worker: ExactlyOnceSource,
    connector: &dyn SourceConnector,
    config: &Config,
) -> Vec<(String, String)> {
    let Ok(settings) = ConnectorExactlyOnce::parse(config) else {
        return Vec::new();
    };
    let mut issues = Vec::new();
    if settings.boundary == TransactionBoundary::Connector
        && connector.can_define_transaction_boundaries(config) != TransactionBoundaries::Supported
    {
        issues.push((
            TRANSACTION_BOUNDARY.to_owned(),
            "The connector does not support connector-defined transaction boundaries with the given \
             configuration. Please reconfigure it to use a different transaction boundary definition."
                .to_owned(),
        ));
    }
    if settings.required {
        if worker != ExactlyOnceSource::Enabled {
            issues.push((
                EXACTLY_ONCE_SUPPORT.to_owned(),
                "This worker does not have exactly-once source support enabled.".to_owned(),
            ));
        }
        match connector.exactly_once_support(config) {
            ExactlyOnceSupport::Supported => {}
            ExactlyOnceSupport::Unsupported => issues.push((
                EXACTLY_ONCE_SUPPORT.to_owned(),
                "The connector does not support exactly-once semantics with the provided configuration."
                    .to_owned(),
            )),
            ExactlyOnceSupport::Unknown => issues.push((
                EXACTLY_ONCE_SUPPORT.to_owned(),
                "The connector does not implement the API required for preflight validation of \
                 exactly-once source support. Please consult the documentation for the connector to \
                 determine whether it supports exactly-once semantics, and then consider reconfiguring \
                 the connector to use the value \"requested\" for this property (which will disable this \
                 preflight check and allow the connector to be created)."
                    .to_owned(),
            )),
        }
    }
    issues
}

/// How one connector's tasks deliver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// At least once.
    AtLeastOnce,
    /// Exactly once, transactions ending at `boundary`.
    ExactlyOnce(TransactionBoundary),
}

/// Why a connector's tasks cannot run with the delivery its configuration asks for: each task
/// fails with this as its trace.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    /// The connector's exactly-once keys are invalid (each key with what is wrong, `; `-joined).
    #[error("{0}")]
    InvalidSettings(String),
    /// `exactly.once.support=required` on a worker without exactly-once enabled.
    #[error(
        "{EXACTLY_ONCE_SUPPORT}=required, but this worker does not have \
         {EXACTLY_ONCE_SOURCE_SUPPORT}=enabled"
    )]
    WorkerDisabled,
    /// `transaction.boundary=connector` for a connector that cannot define boundaries.
    #[error(
        "{TRANSACTION_BOUNDARY}=connector, but the connector does not support connector-defined \
         transaction boundaries with this configuration"
    )]
    BoundariesUnsupported,
    /// `exactly.once.support=required` for a connector that does not declare support.
    #[error(
        "{EXACTLY_ONCE_SUPPORT}=required, but the connector does not declare exactly-once support \
         with this configuration ({0:?})"
    )]
    ConnectorUnsupported(ExactlyOnceSupport),
}

/// The delivery of `connector` with `config` on a worker with `worker` support: exactly once when
/// the worker has it enabled and the connector declares it supported; at least once (with a WARN)
/// when the connector only `requested` it and does not declare support.
///
/// # Errors
/// The connector `required` exactly-once delivery and the worker or the connector cannot give it,
/// or its exactly-once settings are invalid.
pub fn delivery(
    worker: ExactlyOnceSource,
    connector: &dyn SourceConnector,
    config: &Config,
) -> Result<Delivery, DeliveryError> {
    let settings = ConnectorExactlyOnce::parse(config).map_err(|issues| {
        DeliveryError::InvalidSettings(
            issues
                .iter()
                .map(|(k, m)| format!("{k}: {m}"))
                .collect::<Vec<_>>()
                .join("; "),
        )
    })?;
    if worker != ExactlyOnceSource::Enabled {
        if settings.required {
            return Err(DeliveryError::WorkerDisabled);
        }
        return Ok(Delivery::AtLeastOnce);
    }
    if settings.boundary == TransactionBoundary::Connector
        && connector.can_define_transaction_boundaries(config) != TransactionBoundaries::Supported
    {
        return Err(DeliveryError::BoundariesUnsupported);
    }
    match connector.exactly_once_support(config) {
        ExactlyOnceSupport::Supported => Ok(Delivery::ExactlyOnce(settings.boundary)),
        other if settings.required => Err(DeliveryError::ConnectorUnsupported(other)),
        other => {
            tracing::warn!(
                "the connector does not declare exactly-once support with this configuration ({other:?}); \
                 its tasks deliver at least once ({EXACTLY_ONCE_SUPPORT}=requested)"
            );
            Ok(Delivery::AtLeastOnce)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Config {
        let mut c = Config::new();
        for (k, v) in pairs {
            c.insert((*k).to_owned(), (*v).to_owned());
        }
        c
    }

    #[test]
    fn connector_settings_parse_with_kafka_connects_defaults_and_refuse_bad_values() {
        assert_eq!(
            ConnectorExactlyOnce::parse(&Config::new()),
            Ok(ConnectorExactlyOnce {
                required: false,
                boundary: TransactionBoundary::Poll
            })
        );
        assert_eq!(
            ConnectorExactlyOnce::parse(&config(&[
                (EXACTLY_ONCE_SUPPORT, "Required"),
                (TRANSACTION_BOUNDARY, "interval"),
                (TRANSACTION_BOUNDARY_INTERVAL_MS, "250"),
            ])),
            Ok(ConnectorExactlyOnce {
                required: true,
                boundary: TransactionBoundary::Interval(Some(Duration::from_millis(250)))
            })
        );
        assert_eq!(
            ConnectorExactlyOnce::parse(&config(&[(TRANSACTION_BOUNDARY, "Connector")]))
                .map(|s| s.boundary),
            Ok(TransactionBoundary::Connector)
        );
        let issues = ConnectorExactlyOnce::parse(&config(&[
            (EXACTLY_ONCE_SUPPORT, "maybe"),
            (TRANSACTION_BOUNDARY, "whenever"),
            (TRANSACTION_BOUNDARY_INTERVAL_MS, "-1"),
        ]))
        .unwrap_err();
        let keys: Vec<&str> = issues.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            vec![
                EXACTLY_ONCE_SUPPORT,
                TRANSACTION_BOUNDARY_INTERVAL_MS,
                TRANSACTION_BOUNDARY
            ]
        );
        assert_eq!(
            ExactlyOnceSource::parse(" Enabled "),
            Ok(ExactlyOnceSource::Enabled)
        );
        assert!(ExactlyOnceSource::parse("on").is_err());
    }

    /// A task that returns no records (the preflight checks never start one).
    struct NoRecords;

    #[async_trait::async_trait]
    impl ferry_api::SourceTask for NoRecords {
        async fn start(
            &mut self,
            _context: std::sync::Arc<dyn ferry_api::SourceTaskContext>,
        ) -> Result<(), ferry_api::ConnectError> {
            Ok(())
        }
        async fn poll(&mut self) -> Result<Vec<ferry_api::SourceRecord>, ferry_api::ConnectError> {
            Ok(Vec::new())
        }
        async fn stop(&mut self) -> Result<(), ferry_api::ConnectError> {
            Ok(())
        }
    }

    /// Declares exactly-once support when its config says `eos=yes`.
    struct Declares;

    impl SourceConnector for Declares {
        fn config_keys(&self) -> Vec<ferry_api::ConfigKey> {
            Vec::new()
        }
        fn validate(&self, _config: &Config) -> Vec<ferry_api::ConfigIssue> {
            Vec::new()
        }
        fn task_configs(
            &self,
            _config: &Config,
            _max_tasks: usize,
        ) -> Result<Vec<Config>, ferry_api::ConnectError> {
            Ok(Vec::new())
        }
        fn create_task(&self) -> Box<dyn ferry_api::SourceTask> {
            Box::new(NoRecords)
        }
        fn exactly_once_support(&self, config: &Config) -> ExactlyOnceSupport {
            match config.get("eos").map(String::as_str) {
                Some("yes") => ExactlyOnceSupport::Supported,
                _ => ExactlyOnceSupport::Unsupported,
            }
        }
    }

    #[test]
    fn preflight_refuses_required_only_where_it_cannot_be_given() {
        use ExactlyOnceSource::{Disabled, Enabled};
        let required = |eos: &str| config(&[(EXACTLY_ONCE_SUPPORT, "required"), ("eos", eos)]);
        assert_eq!(preflight(Enabled, &Declares, &required("yes")), vec![]);
        let refused = preflight(Enabled, &Declares, &required("no"));
        assert_eq!(
            refused,
            vec![(
                EXACTLY_ONCE_SUPPORT.to_owned(),
                "The connector does not support exactly-once semantics with the provided configuration."
                    .to_owned()
            )]
        );
        let refused = preflight(Disabled, &Declares, &required("yes"));
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(
            refused[0].1.contains("This worker does not have"),
            "{refused:?}"
        );
        // `requested` (the default) is never refused: it falls back to at least once.
        let requested = config(&[(EXACTLY_ONCE_SUPPORT, "requested"), ("eos", "no")]);
        assert_eq!(preflight(Disabled, &Declares, &requested), vec![]);
        assert_eq!(preflight(Enabled, &Declares, &Config::new()), vec![]);
        // Declares defines no transaction boundaries of its own.
        let boundary = preflight(
            Enabled,
            &Declares,
            &config(&[(TRANSACTION_BOUNDARY, "connector"), ("eos", "yes")]),
        );
        assert_eq!(boundary.len(), 1, "{boundary:?}");
        assert_eq!(boundary[0].0, TRANSACTION_BOUNDARY);
        assert!(
            boundary[0]
                .1
                .contains("does not support connector-defined transaction boundaries"),
            "{boundary:?}"
        );
        assert!(
            delivery(
                Enabled,
                &Declares,
                &config(&[(TRANSACTION_BOUNDARY, "connector"), ("eos", "yes")])
            )
            .is_err_and(|e| matches!(e, DeliveryError::BoundariesUnsupported))
        );
    }
}
