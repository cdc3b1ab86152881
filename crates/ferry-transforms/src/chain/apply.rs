//! The chain one task applies to each record it polled.

use ferry_api::transform::{Predicate, Transformation};
use ferry_api::{ConnectError, SourceRecord};

use super::spec::StepSpec;

/// One configured transform, and the predicate it is conditioned on.
pub(super) struct Step {
    alias: String,
    class: String,
    transform: Box<dyn Transformation>,
    predicate: Option<(Box<dyn Predicate>, bool)>,
}

impl Step {
    pub(super) fn new(spec: &StepSpec) -> Result<Self, ChainError> {
        let mut transform = spec.plugin.make();
        transform
            .configure(&spec.config)
            .map_err(|issues| refused("transform", &spec.alias, &issues))?;
        let predicate = match &spec.predicate {
            None => None,
            Some(p) => {
                let mut predicate = p.plugin.make();
                predicate
                    .configure(&p.config)
                    .map_err(|issues| refused("predicate", &p.alias, &issues))?;
                Some((predicate, p.negate))
            }
        };
        Ok(Self {
            alias: spec.alias.clone(),
            class: spec.plugin.class().to_owned(),
            transform,
            predicate,
        })
    }
}

/// A transform or predicate refused, at a task's start, the configuration it accepted when the
/// connector was checked (a plugin whose `configure` is not deterministic): the task fails.
#[derive(Debug, thiserror::Error)]
#[error("{what} {alias:?} refused its configuration: {}", issues.join("; "))]
pub struct ChainError {
    /// `transform` or `predicate`.
    pub what: &'static str,
    /// Its alias.
    pub alias: String,
    /// What it said, one issue each.
    pub issues: Vec<String>,
}

fn refused(what: &'static str, alias: &str, issues: &[ferry_api::ConfigIssue]) -> ChainError {
    ChainError {
        what,
        alias: alias.to_owned(),
        issues: issues.iter().map(ToString::to_string).collect(),
    }
}

/// A transform failed on a record.
#[derive(Debug, thiserror::Error)]
#[error("transform {alias:?} ({class}) failed: {error}")]
pub struct StepError {
    /// The transform's alias.
    pub alias: String,
    /// Its class.
    pub class: String,
    /// What it reported.
    #[source]
    pub error: ConnectError,
}

impl StepError {
    /// Whether trying again may succeed.
    pub fn is_retriable(&self) -> bool {
        self.error.is_retriable()
    }
}

/// A task's transforms, applied in order (Kafka Connect's `TransformationChain`).
pub struct Chain {
    steps: Vec<Step>,
}

impl Chain {
    pub(super) fn new(steps: Vec<Step>) -> Self {
        Self { steps }
    }

    /// Whether it transforms nothing.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Applies every transform in order; `Ok(None)`: one of them dropped the record. The source
    /// partition and offset are the polled record's whatever a transform did (Kafka Connect's
    /// `newRecord` keeps them): they are what the framework commits.
    ///
    /// # Errors
    /// The first transform that failed.
    pub fn apply(&mut self, record: SourceRecord) -> Result<Option<SourceRecord>, StepError> {
        if self.steps.is_empty() {
            return Ok(Some(record));
        }
        let partition = record.source_partition.clone();
        let offset = record.source_offset.clone();
        let mut record = record;
        for step in &mut self.steps {
            let applies = step
                .predicate
                .as_ref()
                .is_none_or(|(predicate, negate)| predicate.test(&record) != *negate);
            if !applies {
                continue;
            }
            match step.transform.apply(record) {
                Ok(Some(next)) => record = next,
                Ok(None) => return Ok(None),
                Err(error) => {
                    return Err(StepError {
                        alias: step.alias.clone(),
                        class: step.class.clone(),
                        error,
                    });
                }
            }
        }
        record.source_partition = partition;
        record.source_offset = offset;
        Ok(Some(record))
    }
}
