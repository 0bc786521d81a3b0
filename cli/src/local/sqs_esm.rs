//! A local SQS event source mapping: receives from a queue, builds the
//! Lambda SQS event the way Lambda does, invokes the same handler code,
//! deletes what succeeded and leaves what failed to come back after the
//! visibility timeout; the queue's redrive policy moves a message to its
//! DLQ after `maxReceiveCount` receives.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use aws_sdk_sqs::types::{
    BatchResultErrorEntry, ChangeMessageVisibilityBatchRequestEntry,
    DeleteMessageBatchRequestEntry, Message, MessageSystemAttributeName, QueueAttributeName,
};
use backon::BackoffBuilder as _;
use backon::ExponentialBuilder;
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{json, Value};
use shared::lambda::QueueHandler;
use shared::models::table::QueueDef;
use tokio::sync::watch;
use tokio::task::JoinHandle;

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
    /// The queue's visibility timeout.
    pub visibility: Duration,
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
    // A number, as CloudFormation sends it: SQS compares the attributes of
    // a CreateQueue of an existing queue, and "5" is not 5.
    let redrive = json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": def.max_receive_count})
        .to_string();
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
    Ok(Queue {
        url,
        arn,
        dlq_url,
        visibility: Duration::from_secs(visibility.as_secs().max(1)),
    })
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

/// What a queue mapping has done so far (shared by its pollers).
#[derive(Debug, Default)]
pub struct QueueStats {
    /// Handler invocations.
    pub invocations: AtomicU64,
    /// Messages whose delete failed for good (after the retries of entries
    /// the service failed): they come back after the visibility timeout and
    /// are processed again (handlers are idempotent), or end in the DLQ.
    pub delete_failures: AtomicU64,
    /// Entries of DeleteMessageBatch the service failed and a retry deleted.
    pub delete_retries: AtomicU64,
    /// Messages deleted after their handler succeeded.
    pub deleted: AtomicU64,
    /// Invocations that failed as a whole (error, panic, timeout).
    pub failed_invocations: AtomicU64,
    /// Messages whose invocation is running now.
    pub in_flight: AtomicU64,
    /// ReceiveMessage requests sent.
    pub receives: AtomicU64,
    /// ReceiveMessage requests that failed (the queue gone, credentials,
    /// the endpoint unreachable): each is logged with its cause and
    /// retried after a growing pause.
    pub poll_failures: AtomicU64,
    /// Since when every poll of the queue has failed, and the last cause;
    /// `None` while polls succeed.
    failing: std::sync::Mutex<Option<(Instant, String)>>,
    /// When the oldest poll sent since the last answer (success or
    /// failure) was sent: a poll the endpoint never answers (a black hole)
    /// fails only at the end of its call budget (40 s), and is failing
    /// from its start (ops16 #7: `/readyz` stayed ready through 84 s of
    /// unreachable SQS and went 503 after it was back).
    unanswered: std::sync::Mutex<Option<Instant>>,
    /// The pollers' long-poll wait, seconds (0: short polls).
    wait_secs: AtomicU64,
}

/// A poll unanswered this long past its long-poll wait is taken as failing
/// since it was sent.
pub const UNANSWERED_GRACE: Duration = Duration::from_secs(10);

impl QueueStats {
    fn poll_sent(&self) {
        if let Ok(mut u) = self.unanswered.lock() {
            u.get_or_insert_with(Instant::now);
        }
    }

    /// Notes a failed poll: how many in a row have failed now (over every
    /// poller of the queue) is not tracked; the time since the first one
    /// was sent is.
    fn poll_failed(&self, cause: &str) {
        self.poll_failures.fetch_add(1, Ordering::Relaxed);
        let sent = self.unanswered.lock().ok().and_then(|mut u| u.take());
        if let Ok(mut f) = self.failing.lock() {
            let since = f
                .as_ref()
                .map(|(t, _)| *t)
                .or(sent)
                .unwrap_or_else(Instant::now);
            *f = Some((since, cause.to_string()));
        }
    }

    fn poll_succeeded(&self) {
        if let Ok(mut u) = self.unanswered.lock() {
            *u = None;
        }
        if let Ok(mut f) = self.failing.lock() {
            *f = None;
        }
    }

    /// How long every poll has failed or gone unanswered past its
    /// long-poll wait (none succeeding since), and the last failure's
    /// cause; `None` while polls succeed.
    pub fn failing_for(&self) -> Option<(Duration, String)> {
        let wait = Duration::from_secs(self.wait_secs.load(Ordering::Relaxed));
        let failing = self
            .failing
            .lock()
            .ok()
            .and_then(|f| f.as_ref().map(|(t, c)| (t.elapsed(), c.clone())));
        let unanswered = self
            .unanswered
            .lock()
            .ok()
            .and_then(|u| *u)
            .map(|t| t.elapsed())
            .filter(|d| *d > wait + UNANSWERED_GRACE)
            .map(|d| {
                (
                    d,
                    format!("a ReceiveMessage unanswered for {} s", d.as_secs()),
                )
            });
        match (failing, unanswered) {
            (Some((f, cause)), Some((u, _))) => Some((f.max(u), cause)),
            (f, u) => f.or(u),
        }
    }
}

/// How a poller waits for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Polling {
    /// Lambda's way: ReceiveMessage long-polls this many seconds (a stop
    /// lets the wait end, then makes what it brought visible again at
    /// once: SQS would keep a message handed to an abandoned poll
    /// invisible for the visibility timeout).
    Long(i32),
    /// Short polls with a growing pause (up to 100 ms) while the queue is
    /// empty: `drain` uses it, so that a stopped poller never holds a
    /// message it will not process.
    Short,
}

/// One queue -> one handler, invoked by up to `concurrency` pollers at once
/// (Lambda's SQS mapping bounded by its maximum concurrency). Cheap to
/// clone: every clone shares the client, the handler and the stats.
#[derive(Clone)]
pub struct QueueMapping {
    pub name: String,
    client: aws_sdk_sqs::Client,
    pub queue: Queue,
    batch_size: i32,
    /// The function the mapping invokes (tests may wrap it).
    pub handler: SqsHandler,
    /// Concurrent pollers, each receiving, invoking and deleting on its own.
    pub concurrency: usize,
    /// The deployed function timeout (scaled): an invocation past it is
    /// cancelled, a failed invocation.
    pub function_timeout: Duration,
    stats: Arc<QueueStats>,
}

/// Lambda's largest function timeout (until a definition's is set).
pub const MAX_FUNCTION_TIMEOUT: Duration = Duration::from_secs(900);

/// Attempts of the entries of a DeleteMessageBatch the service failed.
pub const DELETE_RETRIES: usize = 3;

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
            concurrency: 1,
            function_timeout: MAX_FUNCTION_TIMEOUT,
            stats: Arc::default(),
        }
    }

    /// Sets the function timeout (the definition's, scaled).
    pub fn with_function_timeout(mut self, timeout: Duration) -> Self {
        self.function_timeout = timeout;
        self
    }

    /// Messages per invocation (the parity test compares it with the
    /// deployed mapping).
    pub fn batch_size(&self) -> u32 {
        self.batch_size as u32
    }

    /// Sets the number of concurrent pollers (at least 1).
    pub fn with_concurrency(mut self, concurrency: u32) -> Self {
        self.concurrency = concurrency.max(1) as usize;
        self
    }

    /// Handler invocations so far.
    pub fn invocations(&self) -> u64 {
        self.stats.invocations.load(Ordering::Relaxed)
    }

    /// What the mapping has done so far.
    pub fn stats(&self) -> &QueueStats {
        &self.stats
    }

    /// The mapping's counters, shared (read by the metrics server).
    pub fn stats_handle(&self) -> Arc<QueueStats> {
        self.stats.clone()
    }

    /// Receives one batch (short poll) and invokes the handler. Returns the
    /// number of messages completed (deleted).
    pub async fn poll_once(&self) -> anyhow::Result<usize> {
        let messages = self.receive(0).await?;
        self.invoke(messages).await
    }

    async fn receive(&self, wait_secs: i32) -> anyhow::Result<Vec<Message>> {
        self.stats.receives.fetch_add(1, Ordering::Relaxed);
        self.stats.poll_sent();
        let out = self
            .client
            .receive_message()
            .queue_url(&self.queue.url)
            .max_number_of_messages(self.batch_size)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .wait_time_seconds(wait_secs)
            .send()
            .await
            .map_err(|e| {
                anyhow::anyhow!("ReceiveMessage failed: {}", shared::error::sdk_cause(&e))
            })?;
        Ok(out.messages.unwrap_or_default())
    }

    /// Invokes the handler with `messages`, as Lambda does, and deletes
    /// what succeeded. An invocation past the function timeout is cancelled
    /// and a panic is caught: both are function errors, so the whole batch
    /// stays in the queue, comes back after the visibility timeout (6 x the
    /// function timeout, so never while its invocation runs) and reaches the
    /// DLQ after `maxReceiveCount` receives.
    async fn invoke(&self, messages: Vec<Message>) -> anyhow::Result<usize> {
        if messages.is_empty() {
            return Ok(0);
        }
        let event = self.event(&messages)?;
        self.stats.invocations.fetch_add(1, Ordering::Relaxed);
        let n = messages.len() as u64;
        self.stats.in_flight.fetch_add(n, Ordering::Relaxed);
        let timeout = self.function_timeout;
        let call = crate::local::invoke::unwound(|| (self.handler)(event));
        let result = tokio::select! {
            r = tokio::time::timeout(timeout, call) => match r {
                Ok(r) => r,
                Err(_) => Err(format!("function timed out after {timeout:?}").into()),
            },
            never = self.keep_invisible(&messages) => match never {},
        };
        self.stats.in_flight.fetch_sub(n, Ordering::Relaxed);
        let failed: Vec<String> = match result {
            Ok(resp) => resp
                .batch_item_failures
                .into_iter()
                .map(|f| f.item_identifier)
                .collect(),
            Err(e) => {
                self.stats
                    .failed_invocations
                    .fetch_add(1, Ordering::Relaxed);
                tracing::warn!(mapping = %self.name, error = %e, "function error: the whole batch returns to the queue");
                messages
                    .iter()
                    .filter_map(|m| m.message_id().map(str::to_string))
                    .collect()
            }
        };
        let done: Vec<&Message> = messages
            .iter()
            .filter(|m| {
                m.message_id()
                    .is_some_and(|id| !failed.iter().any(|f| f == id))
            })
            .collect();
        self.delete(&done).await
    }

    /// Keeps `messages` invisible while their invocation runs (never
    /// returns: dropped when the handler completes or is cut). Deployed,
    /// the visibility timeout is 6 x the function timeout, so the timeout
    /// cuts an invocation long before the first beat (a third of the
    /// visibility) and this never sends anything. It matters only where the
    /// timeout outlives the visibility: tests that scale the visibility but
    /// keep the deployed timeout ([`crate::local::runtime::RuntimeOptions::function_timeout_scale`]),
    /// where a long invocation's messages would otherwise be received
    /// again while it runs. Every third of the visibility timeout their
    /// visibility is extended by one (ChangeMessageVisibilityBatch); a
    /// failure to do so is logged and retried at the next beat.
    async fn keep_invisible(&self, messages: &[Message]) -> std::convert::Infallible {
        let beat = (self.queue.visibility / 3).max(Duration::from_millis(200));
        loop {
            tokio::time::sleep(beat).await;
            let sent = self
                .set_visibility(messages, self.queue.visibility.as_secs() as i32)
                .await;
            match sent {
                Ok(codes) if codes.is_empty() => {}
                Ok(codes) => {
                    tracing::warn!(mapping = %self.name, codes = ?codes, "ChangeMessageVisibilityBatch: entries failed; those messages may be received again while their invocation runs (jobs are idempotent)")
                }
                Err(e) => {
                    tracing::warn!(mapping = %self.name, error = %e, "ChangeMessageVisibilityBatch failed; the messages may be received again while their invocation runs")
                }
            }
        }
    }

    /// The Lambda SQS event of `messages`, as Lambda builds it.
    fn event(&self, messages: &[Message]) -> anyhow::Result<SqsEvent> {
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
        serde_json::from_value(json!({ "Records": records })).context("building the SQS event")
    }

    /// Deletes `done` with DeleteMessageBatch. Entries the service fails
    /// (`SenderFault: false`: its own trouble) are retried with jittered
    /// backoff; what still fails (or was the request's fault) is logged by
    /// message id with the code and reason and counted: such a message
    /// comes back after the visibility timeout and is processed again, which
    /// the handlers' idempotence makes harmless. Returns the messages
    /// deleted.
    async fn delete(&self, done: &[&Message]) -> anyhow::Result<usize> {
        // Entry ids are positions in `done`.
        let mut pending: Vec<usize> = (0..done.len()).collect();
        let mut deleted = 0;
        let mut pauses = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(20))
            .with_max_delay(Duration::from_millis(500))
            .with_max_times(DELETE_RETRIES)
            .with_jitter()
            .build();
        let mut attempt = 0;
        while !pending.is_empty() {
            attempt += 1;
            let entries: Vec<DeleteMessageBatchRequestEntry> = pending
                .iter()
                .map(|&i| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(done[i].receipt_handle().unwrap_or_default())
                        .build()
                        .context("DeleteMessageBatch entry")
                })
                .collect::<anyhow::Result<_>>()?;
            let out = self
                .client
                .delete_message_batch()
                .queue_url(&self.queue.url)
                .set_entries(Some(entries))
                .send()
                .await
                .context("DeleteMessageBatch")?;
            deleted += out.successful().len();
            self.stats
                .deleted
                .fetch_add(out.successful().len() as u64, Ordering::Relaxed);
            if attempt > 1 {
                self.stats
                    .delete_retries
                    .fetch_add(out.successful().len() as u64, Ordering::Relaxed);
            }
            let (retry, give_up) = split_delete_failures(out.failed(), pending.len());
            let pause = if retry.is_empty() {
                None
            } else {
                pauses.next()
            };
            let give_up: Vec<&BatchResultErrorEntry> = match pause {
                Some(_) => give_up,
                None => give_up.into_iter().chain(retry.iter().copied()).collect(),
            };
            for f in &give_up {
                let message_id = f
                    .id()
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| done.get(i))
                    .and_then(|m| m.message_id())
                    .unwrap_or("?");
                tracing::warn!(
                    mapping = %self.name,
                    message_id,
                    code = f.code(),
                    reason = f.message().unwrap_or_default(),
                    sender_fault = f.sender_fault(),
                    "DeleteMessageBatch failed for a processed message: it returns after the visibility timeout and is processed again"
                );
            }
            self.stats
                .delete_failures
                .fetch_add(give_up.len() as u64, Ordering::Relaxed);
            let Some(pause) = pause else { break };
            pending = retry
                .iter()
                .filter_map(|f| f.id().parse::<usize>().ok())
                .filter(|&i| i < done.len())
                .collect();
            tokio::time::sleep(pause).await;
        }
        Ok(deleted)
    }

    /// Starts the mapping's pollers; each receives, invokes and deletes on
    /// its own until `stop` turns true (or its sender is dropped): an idle
    /// poller stops at once, a busy one after its invocation and deletes.
    pub fn spawn_pollers(
        &self,
        polling: Polling,
        stop: &watch::Receiver<bool>,
    ) -> Vec<JoinHandle<()>> {
        let wait = match polling {
            Polling::Long(secs) => u64::try_from(secs).unwrap_or(0),
            Polling::Short => 0,
        };
        self.stats.wait_secs.store(wait, Ordering::Relaxed);
        (0..self.concurrency)
            .map(|_| {
                let m = self.clone();
                let stop = stop.clone();
                tokio::spawn(async move { m.poller(polling, stop).await })
            })
            .collect()
    }

    async fn poller(self, polling: Polling, mut stop: watch::Receiver<bool>) {
        let mut idle = Duration::ZERO;
        let mut failures = 0u32;
        let mut pauses = poll_backoff();
        loop {
            if *stop.borrow_and_update() {
                return;
            }
            if idle > Duration::ZERO {
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = tokio::time::sleep(idle) => {}
                }
            }
            let received = match polling {
                Polling::Short => self.receive(0).await,
                Polling::Long(secs) => {
                    let poll = self.receive(secs);
                    tokio::pin!(poll);
                    tokio::select! {
                        r = &mut poll => r,
                        _ = stop.changed() => {
                            // SQS hands a message to a long poll whose
                            // client went away: invisible for the
                            // visibility timeout, a receive counted. Let
                            // the poll end and give back what it brought.
                            if let Ok(messages) = poll.await {
                                self.give_back(&messages).await;
                            }
                            return;
                        }
                    }
                }
            };
            if received.is_ok() && failures > 0 {
                tracing::info!(queue = %self.name, failed_polls = failures, "queue polls succeed again");
                failures = 0;
                pauses = poll_backoff();
            }
            if received.is_ok() {
                self.stats.poll_succeeded();
            }
            match received {
                Ok(messages) if messages.is_empty() => {
                    idle = match polling {
                        Polling::Long(_) => Duration::ZERO,
                        Polling::Short => (idle * 2).clamp(IDLE_MIN, IDLE_MAX),
                    };
                }
                Ok(messages) => {
                    idle = Duration::ZERO;
                    if let Err(e) = self.invoke(messages).await {
                        tracing::warn!(queue = %self.name, error = %e, "queue poll failed");
                    }
                }
                Err(e) => {
                    failures += 1;
                    let cause = format!("{e:#}");
                    self.stats.poll_failed(&cause);
                    idle = pauses.next().unwrap_or(POLL_RETRY_MAX);
                    tracing::warn!(queue = %self.name, error = %cause, failed_polls = failures, retry_in = ?idle, "queue poll failed");
                }
            }
        }
    }

    /// Sets the visibility timeout of `messages` (one
    /// ChangeMessageVisibilityBatch): the codes of the entries that failed,
    /// or why the request did.
    async fn set_visibility(&self, messages: &[Message], secs: i32) -> Result<Vec<String>, String> {
        let entries = messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .visibility_timeout(secs)
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        self.client
            .change_message_visibility_batch()
            .queue_url(&self.queue.url)
            .set_entries(Some(entries))
            .send()
            .await
            .map(|out| out.failed().iter().map(|f| f.code().to_string()).collect())
            .map_err(|e| shared::error::sdk_cause(&e))
    }

    /// Makes `messages` visible again at once (a stopped poller's): the
    /// next consumer receives them without waiting out the visibility
    /// timeout. A failure is logged: they return after it.
    async fn give_back(&self, messages: &[Message]) {
        if messages.is_empty() {
            return;
        }
        let sent = self
            .set_visibility(messages, 0)
            .await
            .map(|codes| codes.len());
        match sent {
            Ok(0) => {
                tracing::info!(mapping = %self.name, messages = messages.len(), "stopping: messages received after the stop given back")
            }
            Ok(failed) => {
                tracing::warn!(mapping = %self.name, failed, "stopping: some messages could not be given back; they return after the visibility timeout")
            }
            Err(e) => {
                tracing::warn!(mapping = %self.name, error = %e, "stopping: messages could not be given back; they return after the visibility timeout")
            }
        }
    }

    /// (visible, in flight) messages of the queue.
    pub async fn depth(&self) -> anyhow::Result<(u64, u64)> {
        depth(&self.client, &self.queue.url).await
    }
}

const IDLE_MIN: Duration = Duration::from_millis(5);
const IDLE_MAX: Duration = Duration::from_millis(100);
/// The first pause after a failed poll; it doubles (with jitter) up to
/// [`POLL_RETRY_MAX`] while polls keep failing.
const POLL_RETRY_MIN: Duration = Duration::from_millis(500);
/// The longest pause between failing polls of one poller.
pub const POLL_RETRY_MAX: Duration = Duration::from_secs(10);

fn poll_backoff() -> backon::ExponentialBackoff {
    ExponentialBuilder::default()
        .with_min_delay(POLL_RETRY_MIN)
        .with_max_delay(POLL_RETRY_MAX)
        .without_max_times()
        .with_jitter()
        .build()
}

/// Splits the failed entries of a DeleteMessageBatch response into those to
/// retry (the service's fault) and those to give up (the request's fault,
/// e.g. an expired receipt handle). Entries beyond `sent` (a malformed
/// answer) are given up.
fn split_delete_failures(
    failed: &[BatchResultErrorEntry],
    sent: usize,
) -> (Vec<&BatchResultErrorEntry>, Vec<&BatchResultErrorEntry>) {
    failed
        .iter()
        .partition(|f| !f.sender_fault() && f.id().parse::<usize>().is_ok_and(|i| i < sent))
}

#[cfg(test)]
mod tests;
