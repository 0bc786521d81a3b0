//! The SQS side of the partial-batch-failure contract, and enqueueing.
//!
//! Messages are independent (standard queues have no order), so a batch is
//! processed concurrently; the response names the `messageId` of every
//! message that failed. A retryable failure comes back after the visibility
//! timeout. A bad body (SPEC §2.7: retrying cannot help) is logged, counted
//! and skipped: the message completes. A body of another version is the one
//! bad body a retry can help (another deployment of the consumer may read
//! it, during a rollout): logged, counted and reported failed, so that the
//! queue's redrive policy moves it to the DLQ after `maxReceiveCount`
//! receives. None blocks the other messages.

use std::future::Future;

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use futures::stream::{self, StreamExt};
use tracing::Instrument as _;

use crate::batch::BatchFailure;
use crate::engine::rules::OutMessage;
use crate::error::{ProcessError, StoreError};
use crate::metrics::{names, BatchMetrics, Metrics};
use crate::store::Backoff;

/// How a message ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Its effects were applied.
    Applied,
    /// Its effects were already there (redelivery, concurrent duplicate).
    Duplicate,
    /// Nothing to do, for a logged reason (e.g. the job no longer exists).
    Skipped(String),
}

/// Why a message failed.
#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    /// Retrying cannot help (a bad body): logged, counted, skipped.
    #[error("permanent ({kind}): {reason}")]
    Permanent { kind: &'static str, reason: String },
    /// A body of another version than this build reads: another deployment
    /// of the consumer may read it, so it is retried, then dead-lettered.
    #[error("another version ({kind}): {reason}")]
    OtherVersion { kind: &'static str, reason: String },
    #[error(transparent)]
    Retryable(#[from] ProcessError),
}

impl MessageError {
    /// A body its consumer cannot act on (`InvalidMessage`), and why.
    pub fn invalid(reason: impl Into<String>) -> Self {
        MessageError::Permanent {
            kind: "InvalidMessage",
            reason: reason.into(),
        }
    }
}

impl From<StoreError> for MessageError {
    fn from(e: StoreError) -> Self {
        MessageError::Retryable(e.into())
    }
}

/// A queue consumer. Delivery is at-least-once, in any order; effects must
/// be idempotent.
pub trait MessageProcessor: Send + Sync {
    fn name(&self) -> &'static str;
    fn metrics(&self) -> &Metrics;
    fn process(&self, body: &str) -> impl Future<Output = Result<Outcome, MessageError>> + Send;
}

#[derive(Debug, thiserror::Error)]
#[error("whole batch failed deliberately: message without messageId")]
pub struct NoMessageId;

/// Messages processed at once within a batch.
pub const CONCURRENCY: usize = 4;

/// Runs one SQS batch through `processor`.
pub async fn handle_sqs_batch<P: MessageProcessor>(
    processor: &P,
    event: SqsEvent,
) -> Result<SqsBatchResponse, NoMessageId> {
    let name = processor.name();
    if event
        .records
        .iter()
        .any(|m| m.message_id.as_deref().is_none_or(str::is_empty))
    {
        tracing::error!(processor = name, "message without messageId cannot be named in a partial batch response: failing the whole batch");
        return Err(NoMessageId);
    }
    let messages: Vec<(String, String)> = event
        .records
        .into_iter()
        .map(|m| (m.message_id.unwrap_or_default(), m.body.unwrap_or_default()))
        .collect();
    let results: Vec<(String, Result<Outcome, MessageError>)> = stream::iter(messages)
        .map(|(id, body)| {
            let span = tracing::info_span!("sqs_message", processor = name, message_id = %id);
            async move {
                let result = processor.process(&body).await;
                (id, result)
            }
            .instrument(span)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut metrics = BatchMetrics::default();
    let mut response = SqsBatchResponse::default();
    for (message_id, result) in results {
        match result {
            Ok(Outcome::Applied) => metrics.incr(names::PROCESSED),
            Ok(Outcome::Duplicate) => {
                metrics.incr(names::DUPLICATE);
                tracing::info!(processor = name, %message_id, "duplicate: its effect is already there; nothing written");
            }
            Ok(Outcome::Skipped(reason)) => {
                metrics.incr(names::SKIPPED);
                tracing::warn!(processor = name, %message_id, %reason, "message skipped");
            }
            // Refused input: WARN, as a stream's (counted, alarmed on), once
            // per message however often it is received.
            Err(MessageError::Permanent { kind, reason }) => {
                if processor.metrics().first_report(&message_id) {
                    metrics.incr(names::BAD_INPUT);
                    tracing::warn!(processor = name, %message_id, kind, %reason, "skipping message: bad input (retrying cannot help)");
                } else {
                    tracing::debug!(processor = name, %message_id, kind, %reason, "bad message received again (counted at its first receive)");
                }
            }
            Err(MessageError::OtherVersion { kind, reason }) => {
                if processor.metrics().first_report(&message_id) {
                    metrics.incr(names::BAD_INPUT);
                    tracing::warn!(processor = name, %message_id, kind, %reason, "bad message: another version's body, reported failed (another deployment may read it), goes to the DLQ after maxReceiveCount");
                } else {
                    tracing::debug!(processor = name, %message_id, kind, %reason, "bad message received again (counted at its first receive)");
                }
                failed(&mut metrics, &mut response, message_id);
            }
            Err(MessageError::Retryable(err)) => {
                tracing::warn!(processor = name, %message_id, error = %err, "message failed; will be retried");
                failed(&mut metrics, &mut response, message_id);
            }
        }
    }
    processor.metrics().record(name, &metrics);
    Ok(response)
}

/// Reports `message_id` failed: it comes back after the visibility timeout,
/// and reaches the DLQ after `maxReceiveCount` receives.
fn failed(metrics: &mut BatchMetrics, response: &mut SqsBatchResponse, message_id: String) {
    metrics.incr(names::FAILED_RECORD);
    let mut f = BatchItemFailure::default();
    f.item_identifier = message_id;
    response.batch_item_failures.push(f);
}

/// Sends the messages of records before `limit`, in record order, one
/// SendMessageBatch per queue and 10 messages, failed entries retried with
/// `backoff` (the processor's store's, within its call budget). Returns the
/// index of the first record whose message could not be sent (a queue
/// without a configured URL is a permanent failure of its first record).
pub async fn send_out(
    client: Option<&aws_sdk_sqs::Client>,
    backoff: &Backoff,
    queues: &std::collections::BTreeMap<String, String>,
    messages: &[(usize, OutMessage)],
    limit: usize,
) -> Result<(), BatchFailure> {
    let mut by_queue: std::collections::BTreeMap<&str, Vec<(usize, String)>> =
        std::collections::BTreeMap::new();
    for (i, m) in messages.iter().filter(|(i, _)| *i < limit) {
        by_queue
            .entry(m.queue)
            .or_default()
            .push((*i, m.body.clone()));
    }
    let mut first: Option<BatchFailure> = None;
    let mut keep = |f: BatchFailure| {
        if first.as_ref().is_none_or(|x| f.index < x.index) {
            first = Some(f);
        }
    };
    for (queue, items) in by_queue {
        let (Some(client), Some(url)) = (client, queues.get(queue)) else {
            keep(BatchFailure {
                index: items[0].0,
                error: ProcessError::Permanent(format!("no URL configured for queue `{queue}`")),
            });
            continue;
        };
        let bodies: Vec<String> = items.iter().map(|(_, b)| b.clone()).collect();
        if let Err((pos, e)) = send_all(client, backoff, url, &bodies).await {
            keep(BatchFailure {
                index: items[pos].0,
                error: e.into(),
            });
        }
    }
    first.map_or(Ok(()), Err)
}

/// A JSON body as text every SQS takes: characters outside the Basic
/// Multilingual Plane (an emoji in a user's id), which SQS accepts and
/// other implementations refuse, and U+FFFE/U+FFFF, which SQS refuses,
/// written as JSON escapes (`\ud83e\udd80`). Outside a JSON string no
/// such character can stand, so the body reads back as the same JSON
/// value (spec15 #11: a refused body was retried for the call's whole
/// budget and stalled its shard). serde_json escapes the control
/// characters SQS refuses already.
pub fn sqs_text(body: &str) -> std::borrow::Cow<'_, str> {
    let refused = |c: char| u32::from(c) > 0xFFFF || matches!(c, '\u{FFFE}' | '\u{FFFF}');
    if !body.chars().any(refused) {
        return std::borrow::Cow::Borrowed(body);
    }
    let mut out = String::with_capacity(body.len() + 16);
    for c in body.chars() {
        if refused(c) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Sends bodies to a queue with SendMessageBatch (10 per call), retrying
/// failed entries with `backoff` (jittered, within its time budget).
/// Returns the index (in `bodies`) of the first body that could not be
/// sent.
pub async fn send_all(
    client: &aws_sdk_sqs::Client,
    backoff: &Backoff,
    queue_url: &str,
    bodies: &[String],
) -> Result<(), (usize, StoreError)> {
    for (chunk_no, chunk) in bodies.chunks(10).enumerate() {
        let mut pending: Vec<(usize, &String)> = chunk
            .iter()
            .enumerate()
            .map(|(i, b)| (chunk_no * 10 + i, b))
            .collect();
        let mut delays = backoff.delays();
        while !pending.is_empty() {
            let entries: Vec<SendMessageBatchRequestEntry> = pending
                .iter()
                .map(|(i, b)| {
                    SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_body(sqs_text(b))
                        .build()
                        .expect("id and body are set")
                })
                .collect();
            let first = pending[0].0;
            let out = client
                .send_message_batch()
                .queue_url(queue_url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| (first, sqs_error(queue_url, e)))?;
            let failed: Vec<usize> = out
                .failed()
                .iter()
                .filter_map(|f| f.id().parse().ok())
                .collect();
            pending.retain(|(i, _)| failed.contains(i));
            if let Some((i, _)) = pending.first() {
                let Some(delay) = delays.next() else {
                    return Err((
                        *i,
                        StoreError {
                            operation: "SendMessageBatch",
                            table: queue_url.to_string(),
                            code: "BatchEntryFailed".into(),
                            retryable: true,
                            source: format!(
                                "{} messages not accepted after the retries' budget",
                                pending.len()
                            )
                            .into(),
                        },
                    ));
                };
                tokio::time::sleep(delay).await;
            }
        }
    }
    Ok(())
}

fn sqs_error<E, R>(queue: &str, err: aws_sdk_sqs::error::SdkError<E, R>) -> StoreError
where
    E: aws_sdk_sqs::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let code = match &err {
        aws_sdk_sqs::error::SdkError::ServiceError(se) => {
            se.err().code().unwrap_or("Unknown").to_string()
        }
        other => format!("{other:?}").chars().take(40).collect(),
    };
    StoreError {
        operation: "SendMessageBatch",
        table: queue.to_string(),
        code,
        retryable: true,
        source: Box::new(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqs_failure_response_names_message_ids() {
        let mut r = SqsBatchResponse::default();
        let mut f = BatchItemFailure::default();
        f.item_identifier = "m-2".into();
        r.batch_item_failures.push(f);
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            serde_json::json!({"batchItemFailures":[{"itemIdentifier":"m-2"}]})
        );
        assert_eq!(
            serde_json::to_value(SqsBatchResponse::default()).unwrap(),
            serde_json::json!({"batchItemFailures":[]})
        );
    }
}
