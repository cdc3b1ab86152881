//! Applying the connector's transforms to each polled record, with `errors.retry.*`,
//! `errors.tolerance` and `errors.log.*` as Kafka Connect applies them (its
//! `RetryWithToleranceOperator` around the `TRANSFORMATION` stage).

use std::time::{Duration, Instant};

use ferry_api::SourceRecord;

use super::{Outgoing, TaskRunner};
use crate::transforms::{Chain, StepError};

/// What became of a polled record in the chain.
pub(super) enum Transformed {
    /// The record to send.
    Record(SourceRecord),
    /// Goes nowhere (dropped by a transform, or its error tolerated): the polled record, whose
    /// offset is committed all the same.
    Skipped(SourceRecord),
    /// A retry was cut short by a stop: neither this record nor any later one of the batch is sent.
    Stopping,
    /// The task fails with this reason.
    Failed(String),
}

/// Kafka Connect's first wait between two tries (`RetryWithToleranceOperator`), doubled each time.
const FIRST_RETRY_DELAY: Duration = Duration::from_millis(300);

impl TaskRunner {
    pub(super) async fn transform(
        &mut self,
        chain: &mut Chain,
        record: SourceRecord,
        outgoing: &mut Outgoing,
    ) -> Transformed {
        if chain.is_empty() {
            return Transformed::Record(record);
        }
        let handling = self.settings.error_handling;
        let started = Instant::now();
        let mut delay = FIRST_RETRY_DELAY;
        loop {
            // The chain takes the record by value: the polled one is kept for a retry, and for its
            // offset when the record goes nowhere.
            let error = match chain.apply(record.clone()) {
                Ok(Some(transformed)) => return Transformed::Record(transformed),
                Ok(None) => return Transformed::Skipped(record),
                Err(error) => error,
            };
            self.metrics.record_failure();
            if error.is_retriable() {
                let left = handling
                    .retry_timeout
                    .map(|timeout| timeout.saturating_sub(started.elapsed()));
                if left.is_none_or(|left| !left.is_zero()) {
                    let wait = delay
                        .min(handling.retry_delay_max)
                        .min(left.unwrap_or(Duration::MAX));
                    tracing::debug!(task = %self.name, "{error}; trying again in {} ms (errors.retry.timeout)", wait.as_millis());
                    // What was sent before this record is acknowledged while it waits.
                    if let Err(e) = outgoing.flush().await {
                        return Transformed::Failed(e.to_string());
                    }
                    if !self.sleep_unless_stopped(wait).await {
                        return Transformed::Stopping;
                    }
                    delay = delay.saturating_mul(2);
                    self.metrics.record_retry();
                    continue;
                }
            }
            return self.tolerate(&record, &error);
        }
    }

    /// `errors.tolerance` decides: `all` skips the record, `none` fails the task.
    fn tolerate(&self, record: &SourceRecord, error: &StepError) -> Transformed {
        let handling = self.settings.error_handling;
        if handling.log {
            self.metrics.error_logged();
            // Kafka Connect's LogReporter wording.
            let with = if handling.log_messages {
                format!(
                    ", where source record is = SourceRecord{{topic={}, key={}, value={}, timestamp={}}}",
                    record.topic,
                    shown(record.key.as_ref()),
                    shown(record.value.as_ref()),
                    record
                        .timestamp
                        .map_or("null".to_owned(), |t| t.to_string()),
                )
            } else {
                String::new()
            };
            tracing::error!(
                task = %self.name,
                "Error encountered in task {}. Executing stage 'TRANSFORMATION' with class '{}'{with}: {}",
                self.name,
                error.class,
                error.error
            );
        }
        if self.settings.tolerate_delivery_errors {
            if !handling.log {
                tracing::debug!(task = %self.name, "skipping a record (errors.tolerance=all): {error}");
            }
            self.metrics.record_skipped();
            Transformed::Skipped(record.clone())
        } else {
            self.metrics.record_error();
            Transformed::Failed(format!(
                "Tolerance exceeded in error handler (errors.tolerance=none): {error}"
            ))
        }
    }
}

fn shown(value: Option<&serde_json::Value>) -> String {
    value.map_or("null".to_owned(), ToString::to_string)
}
