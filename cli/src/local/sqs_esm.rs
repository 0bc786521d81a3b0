//! A local SQS event source mapping: receives from a queue, builds the
//! Lambda SQS event the way Lambda does, invokes the same handler code,
//! deletes what succeeded and leaves what failed to come back after the
//! visibility timeout; the queue's redrive policy moves a message to its
//! DLQ after `maxReceiveCount` receives.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageSystemAttributeName, QueueAttributeName,
};
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{json, Value};
use shared::lambda::QueueHandler;
use shared::models::table::QueueDef;

pub type SqsHandler = Arc<
    dyn Fn(
            SqsEvent,
        )
            -> Pin<Box<dyn Future<Output = Result<SqsBatchResponse, lambda_runtime::Error>> + Send>>
        + Send
        + Sync,
>;

/// The Lambda handler of a queue consumer (the same code path as in Lambda).
pub fn sqs_handler(processor: Arc<dyn QueueHandler>) -> SqsHandler {
    Arc::new(move |event| {
        let p = processor.clone();
        Box::pin(async move {
            shared::lambda::sqs_handler(&*p, LambdaEvent::new(event, Context::default())).await
        })
    })
}

/// A created queue pair.
#[derive(Debug, Clone)]
pub struct Queue {
    pub url: String,
    pub arn: String,
    pub dlq_url: String,
}

/// Creates `def`'s queue and DLQ (names prefixed with `prefix`), with the
/// redrive policy and a visibility timeout of `visibility`.
pub async fn create_queue(
    client: &aws_sdk_sqs::Client,
    def: &QueueDef,
    prefix: &str,
    visibility: Duration,
) -> anyhow::Result<Queue> {
    let dlq = client
        .create_queue()
        .queue_name(format!("{prefix}{}", def.dlq_name))
        .attributes(
            QueueAttributeName::MessageRetentionPeriod,
            def.dlq_retention_secs.to_string(),
        )
        .send()
        .await
        .context("CreateQueue (DLQ)")?;
    let dlq_url = dlq.queue_url().context("DLQ URL")?.to_string();
    let dlq_arn = queue_arn(client, &dlq_url).await?;
    let redrive = json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": def.max_receive_count.to_string()}).to_string();
    let q = client
        .create_queue()
        .queue_name(format!("{prefix}{}", def.name))
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            visibility.as_secs().max(1).to_string(),
        )
        .attributes(
            QueueAttributeName::MessageRetentionPeriod,
            def.retention_secs.to_string(),
        )
        .attributes(QueueAttributeName::RedrivePolicy, redrive)
        .send()
        .await
        .context("CreateQueue")?;
    let url = q.queue_url().context("queue URL")?.to_string();
    let arn = queue_arn(client, &url).await?;
    Ok(Queue { url, arn, dlq_url })
}

async fn queue_arn(client: &aws_sdk_sqs::Client, url: &str) -> anyhow::Result<String> {
    let a = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await?;
    a.attributes()
        .and_then(|m| m.get(&QueueAttributeName::QueueArn))
        .cloned()
        .context("QueueArn")
}

/// Messages in a queue: (visible, in flight).
pub async fn depth(client: &aws_sdk_sqs::Client, url: &str) -> anyhow::Result<(u64, u64)> {
    let a = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await?;
    let get = |k: QueueAttributeName| {
        a.attributes()
            .and_then(|m| m.get(&k))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Ok((
        get(QueueAttributeName::ApproximateNumberOfMessages),
        get(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
    ))
}

/// One queue -> one handler.
pub struct QueueMapping {
    pub name: String,
    client: aws_sdk_sqs::Client,
    pub queue: Queue,
    batch_size: i32,
    handler: SqsHandler,
    pub invocations: u64,
}

impl QueueMapping {
    pub fn new(
        name: &str,
        client: aws_sdk_sqs::Client,
        queue: Queue,
        batch_size: u32,
        handler: SqsHandler,
    ) -> Self {
        Self {
            name: name.into(),
            client,
            queue,
            batch_size: batch_size.clamp(1, 10) as i32,
            handler,
            invocations: 0,
        }
    }

    /// Messages per invocation (the parity test compares it with the
    /// deployed mapping).
    pub fn batch_size(&self) -> u32 {
        self.batch_size as u32
    }

    /// Receives one batch and invokes the handler. Returns the number of
    /// messages completed (deleted).
    pub async fn poll_once(&mut self) -> anyhow::Result<usize> {
        let out = self
            .client
            .receive_message()
            .queue_url(&self.queue.url)
            .max_number_of_messages(self.batch_size)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .wait_time_seconds(0)
            .send()
            .await
            .context("ReceiveMessage")?;
        let messages = out.messages();
        if messages.is_empty() {
            return Ok(0);
        }
        let records: Vec<Value> = messages
            .iter()
            .map(|m| {
                let attributes: serde_json::Map<String, Value> = m
                    .attributes()
                    .map(|a| {
                        a.iter()
                            .map(|(k, v)| (k.as_str().to_string(), json!(v)))
                            .collect()
                    })
                    .unwrap_or_default();
                json!({
                    "messageId": m.message_id(),
                    "receiptHandle": m.receipt_handle(),
                    "body": m.body(),
                    "attributes": attributes,
                    "messageAttributes": {},
                    "md5OfBody": m.md5_of_body(),
                    "eventSource": "aws:sqs",
                    "eventSourceARN": self.queue.arn,
                    "awsRegion": "us-east-1",
                })
            })
            .collect();
        let event: SqsEvent = serde_json::from_value(json!({ "Records": records }))
            .context("building the SQS event")?;
        self.invocations += 1;
        let failed: Vec<String> = match (self.handler)(event).await {
            Ok(resp) => resp
                .batch_item_failures
                .into_iter()
                .map(|f| f.item_identifier)
                .collect(),
            Err(e) => {
                tracing::warn!(mapping = %self.name, error = %e, "function error: the whole batch returns to the queue");
                messages
                    .iter()
                    .filter_map(|m| m.message_id().map(str::to_string))
                    .collect()
            }
        };
        let done: Vec<DeleteMessageBatchRequestEntry> = messages
            .iter()
            .filter(|m| {
                m.message_id()
                    .is_some_and(|id| !failed.iter().any(|f| f == id))
            })
            .enumerate()
            .map(|(i, m)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .build()
                    .expect("id and handle are set")
            })
            .collect();
        let n = done.len();
        if n > 0 {
            self.client
                .delete_message_batch()
                .queue_url(&self.queue.url)
                .set_entries(Some(done))
                .send()
                .await
                .context("DeleteMessageBatch")?;
        }
        Ok(n)
    }

    /// (visible, in flight) messages of the queue.
    pub async fn depth(&self) -> anyhow::Result<(u64, u64)> {
        depth(&self.client, &self.queue.url).await
    }
}
