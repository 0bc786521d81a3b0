//! The one place that owns the partial-batch-failure contract.
//!
//! Delivery is at-least-once; processors make effects idempotent. A stream
//! batch is processed in order; at the first failed record processing stops
//! and the response names that record's SequenceNumber, so Lambda resumes
//! there and no later record of the same key takes effect first.

use std::future::Future;

use tracing::Instrument as _;

use aws_lambda_events::event::dynamodb::Event;
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};

use crate::change::{decode, Change, DecodeError};
use crate::error::{InputError, ProcessError};
use crate::metrics::{names, BatchMetrics, Metrics};

/// The first record of a batch that failed, with why.
#[derive(Debug)]
pub struct BatchFailure {
    /// Index into the slice of changes given to the processor.
    pub index: usize,
    pub error: ProcessError,
}

/// A stream processor.
///
/// Delivery contract: at-least-once, in order per item within a shard;
/// redelivery starts at the failed record and may repeat records that already
/// took effect. Effects must be idempotent.
pub trait StreamProcessor: Send + Sync {
    /// Processor name: used in marker keys, logs and metrics.
    fn name(&self) -> &'static str;

    /// Processes `changes` in order. Returns the index of the first change
    /// that did not take effect; every change before it must have taken effect.
    fn process(
        &self,
        changes: &[Change],
        metrics: &mut BatchMetrics,
    ) -> impl Future<Output = Result<(), BatchFailure>> + Send;

    fn metrics(&self) -> &Metrics;
}

/// Why a whole batch fails (the handler returns an error, Lambda retries
/// the batch, bisecting it if configured).
#[derive(Debug, thiserror::Error)]
#[error("whole batch failed deliberately: {0}")]
pub struct WholeBatchFailure(pub DecodeError);

/// Logs bad input: what, where, why. Never the item. At WARN: refused
/// input is expected (a writer's mistake, skipped by design) and counted
/// (`BadInput`, which the stack's alarms watch); ERROR is kept for what
/// needs an operator. Once per record (`event_id`) and processor instance
/// (`reported`, its [`Metrics`]): a retried or bisected batch meets its bad
/// records again, and they are neither counted nor logged again (a DEBUG
/// line says so).
pub fn log_bad_input(
    processor: &str,
    event_id: &str,
    err: &InputError,
    metrics: &mut BatchMetrics,
    reported: &Metrics,
) {
    if !reported.first_report(event_id) {
        tracing::debug!(
            processor,
            event_id,
            kind = err.kind(),
            "bad input already reported: not counted again"
        );
        return;
    }
    metrics.incr(names::BAD_INPUT);
    tracing::warn!(
        processor,
        event_id,
        kind = err.kind(),
        reason = %err,
        "skipping record: bad input"
    );
}

/// Runs one DynamoDB Stream batch through `processor`, in a span naming the
/// processor and the batch's first and last sequence numbers.
pub async fn handle_stream_batch<P: StreamProcessor>(
    processor: &P,
    event: Event,
) -> Result<DynamoDbEventResponse, WholeBatchFailure> {
    let seq = |r: Option<&aws_lambda_events::event::dynamodb::EventRecord>| {
        r.and_then(|r| r.change.sequence_number.clone())
            .unwrap_or_default()
    };
    let span = tracing::info_span!(
        "stream_batch",
        processor = processor.name(),
        records = event.records.len(),
        first_sequence_number = %seq(event.records.first()),
        last_sequence_number = %seq(event.records.last()),
    );
    run_stream_batch(processor, event).instrument(span).await
}

async fn run_stream_batch<P: StreamProcessor>(
    processor: &P,
    event: Event,
) -> Result<DynamoDbEventResponse, WholeBatchFailure> {
    let mut metrics = BatchMetrics::default();
    let mut changes = Vec::with_capacity(event.records.len());
    for record in event.records {
        match decode(record) {
            Ok(c) => changes.push(c),
            Err(e @ DecodeError::NoSequenceNumber { .. }) => {
                tracing::error!(
                    processor = processor.name(),
                    event_id = %e.event_id(),
                    "record without a SequenceNumber cannot be named in a partial batch response: failing the whole batch"
                );
                // Counted once however often the batch comes back.
                if processor.metrics().first_report(e.event_id()) {
                    metrics.incr(names::BAD_INPUT);
                }
                processor.metrics().record(processor.name(), &metrics);
                return Err(WholeBatchFailure(e));
            }
            Err(e) => {
                let event_id = e.event_id().to_owned();
                log_bad_input(
                    processor.name(),
                    &event_id,
                    &InputError::Decode(e),
                    &mut metrics,
                    processor.metrics(),
                )
            }
        }
    }
    let result = processor.process(&changes, &mut metrics).await;
    let response = match result {
        Ok(()) => {
            metrics.0.insert(names::PROCESSED, changes.len() as u64);
            DynamoDbEventResponse::default()
        }
        Err(BatchFailure { index, error }) => {
            let failed = &changes[index];
            tracing::warn!(
                processor = processor.name(),
                event_id = %failed.event_id,
                sequence_number = %failed.sequence_number,
                key = %failed.key_display(),
                error = %error,
                "record failed; reporting it so the batch resumes here"
            );
            metrics.incr(names::FAILED_RECORD);
            metrics.0.insert(names::PROCESSED, index as u64);
            failure_response(failed.sequence_number.as_str())
        }
    };
    processor.metrics().record(processor.name(), &metrics);
    Ok(response)
}

/// A response naming one failed record. The identifier is a parsed
/// SequenceNumber, so it is never empty.
pub fn failure_response(sequence_number: &str) -> DynamoDbEventResponse {
    let mut failure = DynamoDbBatchItemFailure::default();
    failure.item_identifier = Some(sequence_number.to_string());
    let mut response = DynamoDbEventResponse::default();
    response.batch_item_failures.push(failure);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_response_is_an_empty_list() {
        let json = serde_json::to_value(DynamoDbEventResponse::default()).unwrap();
        assert_eq!(json, serde_json::json!({"batchItemFailures": []}));
    }

    #[test]
    fn failure_response_names_the_sequence_number() {
        let json = serde_json::to_value(failure_response("000000000000000000042")).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"batchItemFailures": [{"itemIdentifier": "000000000000000000042"}]})
        );
    }
}
