//! A local DynamoDB Streams event source mapping: polls a table's stream
//! shards, builds the Lambda event JSON the way Lambda does, invokes the same
//! handler code the Lambdas run, and honours what Lambda honours: batch size,
//! the partial batch response (checkpoint at the failed record, retry from
//! there), bounded retries, bisect on error, and an on-failure destination
//! for records that exhaust their retries.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use aws_lambda_events::event::dynamodb::Event;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{json, Value};
use shared::batch::StreamProcessor;

/// A handler as Lambda sees it: event in, partial batch response or error out.
pub type Handler = Arc<
    dyn Fn(
            Event,
        ) -> Pin<
            Box<dyn Future<Output = Result<DynamoDbEventResponse, lambda_runtime::Error>> + Send>,
        > + Send
        + Sync,
>;

/// The Lambda handler of a processor (the same code path as in Lambda).
pub fn handler<P: StreamProcessor + 'static>(processor: Arc<P>) -> Handler {
    Arc::new(move |event| {
        let p = processor.clone();
        Box::pin(async move {
            shared::lambda::stream_handler(&*p, LambdaEvent::new(event, Context::default())).await
        })
    })
}

/// Where stream records are read from.
#[derive(Clone)]
pub enum RecordReader {
    /// GetRecords through `aws-sdk-dynamodbstreams` (any endpoint).
    Sdk,
    /// GetRecords on the embedded engine's own API: Dynoxide spells the TTL
    /// `userIdentity` the way the Lambda event does (`type`,
    /// `principalId`), which the SDK's shape (`Type`, `PrincipalId`) drops.
    Embedded(dynoxide::Database),
}

/// Settings of a mapping, mirroring the event source mapping's.
#[derive(Debug, Clone)]
pub struct MappingConfig {
    pub name: String,
    pub batch_size: usize,
    /// Retries of a failing batch before bisecting / giving up.
    pub max_retries: u32,
    pub bisect_on_error: bool,
    pub retry_delay: Duration,
}

impl MappingConfig {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            batch_size: 100,
            max_retries: 3,
            bisect_on_error: true,
            retry_delay: Duration::from_millis(20),
        }
    }
}

/// What an on-failure destination receives: which records were given up on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedBatch {
    pub mapping: String,
    pub shard_id: String,
    pub start_sequence_number: String,
    pub end_sequence_number: String,
    pub batch_size: usize,
    pub reason: String,
}

/// The on-failure destination (records that exhausted their retries).
#[derive(Debug, Clone, Default)]
pub struct OnFailure(Arc<Mutex<Vec<FailedBatch>>>);

impl OnFailure {
    pub fn take(&self) -> Vec<FailedBatch> {
        self.0
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }
    pub fn len(&self) -> usize {
        self.0.lock().map(|v| v.len()).unwrap_or(0)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn push(&self, f: FailedBatch) {
        if let Ok(mut v) = self.0.lock() {
            v.push(f);
        }
    }
}

struct Shard {
    iterator: Option<String>,
    buffer: VecDeque<Value>,
    attempts: u32,
    limit: usize,
}

/// One stream → one handler.
pub struct StreamMapping {
    config: MappingConfig,
    streams: aws_sdk_dynamodbstreams::Client,
    reader: RecordReader,
    stream_arn: String,
    handler: Handler,
    shards: HashMap<String, Shard>,
    pub on_failure: OnFailure,
    /// Invocations made (for tests and the summary).
    pub invocations: u64,
}

/// Outcome of one polling round.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    /// Records that completed (succeeded or were sent to the on-failure destination).
    pub done: usize,
    /// Records fetched or still waiting to be retried.
    pub pending: usize,
}

impl StreamMapping {
    pub fn new(
        config: MappingConfig,
        streams: aws_sdk_dynamodbstreams::Client,
        reader: RecordReader,
        stream_arn: String,
        handler: Handler,
    ) -> Self {
        Self {
            config,
            streams,
            reader,
            stream_arn,
            handler,
            shards: HashMap::new(),
            on_failure: OnFailure::default(),
            invocations: 0,
        }
    }

    async fn refresh_shards(&mut self) -> anyhow::Result<()> {
        let desc = self
            .streams
            .describe_stream()
            .stream_arn(&self.stream_arn)
            .send()
            .await
            .context("DescribeStream")?;
        let shards = desc
            .stream_description()
            .map(|d| d.shards().to_vec())
            .unwrap_or_default();
        for s in shards {
            let Some(id) = s.shard_id() else { continue };
            if self.shards.contains_key(id) {
                continue;
            }
            let it = self
                .streams
                .get_shard_iterator()
                .stream_arn(&self.stream_arn)
                .shard_id(id)
                .shard_iterator_type(ShardIteratorType::TrimHorizon)
                .send()
                .await
                .context("GetShardIterator")?;
            self.shards.insert(
                id.to_string(),
                Shard {
                    iterator: it.shard_iterator().map(str::to_string),
                    buffer: VecDeque::new(),
                    attempts: 0,
                    limit: self.config.batch_size,
                },
            );
        }
        Ok(())
    }

    async fn get_records(&self, iterator: &str) -> anyhow::Result<(Vec<Value>, Option<String>)> {
        match &self.reader {
            RecordReader::Embedded(db) => {
                let db = db.clone();
                let req = dynoxide::actions::get_records::GetRecordsRequest {
                    shard_iterator: iterator.to_string(),
                    limit: Some(1000),
                };
                let out = tokio::task::spawn_blocking(move || db.get_records(req)).await??;
                let records = out
                    .records
                    .iter()
                    .map(serde_json::to_value)
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((records, out.next_shard_iterator))
            }
            RecordReader::Sdk => {
                let out = self
                    .streams
                    .get_records()
                    .shard_iterator(iterator)
                    .limit(1000)
                    .send()
                    .await
                    .context("GetRecords")?;
                let records = out
                    .records()
                    .iter()
                    .map(sdk_record_json)
                    .collect::<anyhow::Result<Vec<_>>>()?;
                Ok((records, out.next_shard_iterator().map(str::to_string)))
            }
        }
    }

    /// Fetches new records and invokes the handler once per shard with a
    /// pending batch.
    pub async fn poll_once(&mut self) -> anyhow::Result<Round> {
        self.refresh_shards().await?;
        let mut round = Round::default();
        let ids: Vec<String> = self.shards.keys().cloned().collect();
        for id in ids {
            let (iterator, buffered) = {
                let s = &self.shards[&id];
                (s.iterator.clone(), s.buffer.len())
            };
            if buffered < self.config.batch_size {
                if let Some(it) = iterator {
                    let (records, next) = self.get_records(&it).await?;
                    let s = self.shards.get_mut(&id).expect("present");
                    s.buffer.extend(records.into_iter().map(|mut r| {
                        r["eventSourceARN"] = json!(self.stream_arn);
                        r
                    }));
                    s.iterator = next;
                }
            }
            round.done += self.invoke_shard(&id).await?;
            round.pending += self.shards[&id].buffer.len();
        }
        Ok(round)
    }

    async fn invoke_shard(&mut self, id: &str) -> anyhow::Result<usize> {
        let (batch, limit) = {
            let s = &self.shards[id];
            let n = s.buffer.len().min(s.limit).min(self.config.batch_size);
            if n == 0 {
                return Ok(0);
            }
            (s.buffer.iter().take(n).cloned().collect::<Vec<_>>(), n)
        };
        let seqs: Vec<String> = batch
            .iter()
            .map(|r| {
                r["dynamodb"]["SequenceNumber"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        let event: Event = serde_json::from_value(json!({ "Records": batch }))
            .context("building the Lambda event")?;
        self.invocations += 1;
        let outcome = (self.handler)(event).await;
        // How many leading records of the batch are done.
        let (done, failure) = match outcome {
            Ok(resp) => match resp.batch_item_failures.first() {
                None => (limit, None),
                Some(f) => match f.item_identifier.as_deref().filter(|s| !s.is_empty()) {
                    Some(seq) => match seqs.iter().position(|s| s == seq) {
                        Some(pos) => (pos, Some(format!("record {seq} failed"))),
                        None => (
                            0,
                            Some(format!("unknown itemIdentifier {seq}: whole batch failed")),
                        ),
                    },
                    None => (
                        0,
                        Some("empty itemIdentifier: whole batch failed".to_string()),
                    ),
                },
            },
            Err(e) => (0, Some(format!("function error: {e}"))),
        };
        let s = self.shards.get_mut(id).expect("present");
        s.buffer.drain(..done);
        let Some(reason) = failure else {
            s.attempts = 0;
            s.limit = self.config.batch_size;
            return Ok(done);
        };
        if done > 0 {
            // Checkpoint moved: the retry starts a new batch at the failed record.
            s.attempts = 0;
        }
        s.attempts += 1;
        tracing::warn!(mapping = %self.config.name, shard = id, attempt = s.attempts, %reason, "batch failed");
        let remaining = limit - done;
        if s.attempts > self.config.max_retries {
            if self.config.bisect_on_error && remaining > 1 {
                s.limit = remaining.div_ceil(2);
                s.attempts = 0;
            } else {
                let n = remaining.min(s.limit);
                let failed: Vec<Value> = s.buffer.drain(..n).collect();
                let seq_of = |r: &Value| {
                    r["dynamodb"]["SequenceNumber"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                };
                let f = FailedBatch {
                    mapping: self.config.name.clone(),
                    shard_id: id.to_string(),
                    start_sequence_number: failed.first().map(seq_of).unwrap_or_default(),
                    end_sequence_number: failed.last().map(seq_of).unwrap_or_default(),
                    batch_size: failed.len(),
                    reason,
                };
                tracing::error!(mapping = %f.mapping, shard = %f.shard_id, start = %f.start_sequence_number, end = %f.end_sequence_number, reason = %f.reason, "retries exhausted: records sent to the on-failure destination");
                self.on_failure.push(f);
                s.attempts = 0;
                s.limit = self.config.batch_size;
                return Ok(done + n);
            }
        }
        tokio::time::sleep(self.config.retry_delay * s.attempts).await;
        Ok(done)
    }
}

/// Builds the Lambda event JSON of one SDK stream record.
fn sdk_record_json(r: &aws_sdk_dynamodbstreams::types::Record) -> anyhow::Result<Value> {
    let d = r.dynamodb().context("record without dynamodb")?;
    let image = |m: Option<&HashMap<String, aws_sdk_dynamodbstreams::types::AttributeValue>>| -> anyhow::Result<Option<Value>> {
        m.map(|m| serde_json::to_value(serde_dynamo::Item::from(m.clone()))).transpose().map_err(Into::into)
    };
    let mut change = json!({
        "Keys": image(d.keys())?,
        "SequenceNumber": d.sequence_number(),
        "SizeBytes": d.size_bytes(),
        "StreamViewType": d.stream_view_type().map(|v| v.as_str()),
        "ApproximateCreationDateTime": d.approximate_creation_date_time().map(|t| t.secs()),
    });
    if let Some(v) = image(d.new_image())? {
        change["NewImage"] = v;
    }
    if let Some(v) = image(d.old_image())? {
        change["OldImage"] = v;
    }
    let mut rec = json!({
        "eventID": r.event_id(),
        "eventName": r.event_name().map(|e| e.as_str()),
        "eventVersion": r.event_version(),
        "eventSource": r.event_source(),
        "awsRegion": r.aws_region(),
        "dynamodb": change,
    });
    if let Some(id) = r.user_identity() {
        rec["userIdentity"] = json!({"type": id.r#type(), "principalId": id.principal_id()});
    }
    Ok(rec)
}

/// Runs mappings until every one has nothing left: no pending records and
/// no new ones. Returns the number of records completed.
pub async fn drain(mappings: &mut [StreamMapping]) -> anyhow::Result<usize> {
    let mut total = 0;
    let mut quiet_rounds = 0;
    while quiet_rounds < 2 {
        let mut active = false;
        for m in mappings.iter_mut() {
            let r = m.poll_once().await?;
            total += r.done;
            active |= r.done > 0 || r.pending > 0;
        }
        quiet_rounds = if active { 0 } else { quiet_rounds + 1 };
    }
    Ok(total)
}

/// One polling round of every stream mapping (errors logged, retried next
/// round); true if there was work.
pub async fn poll_streams(mappings: &mut [StreamMapping]) -> bool {
    let mut busy = false;
    for m in mappings {
        match m.poll_once().await {
            Ok(r) => busy |= r.done > 0 || r.pending > 0,
            Err(e) => tracing::warn!(mapping = %m.config.name, error = %e, "stream poll failed"),
        }
    }
    busy
}

/// Between two polling rounds: no pause after a round that found work,
/// 200 ms after an idle one. Returns true once `stop` has resolved.
pub async fn pause_or_stop(
    busy: bool,
    stop: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
) -> bool {
    let idle = if busy {
        Duration::ZERO
    } else {
        Duration::from_millis(200)
    };
    tokio::select! {
        _ = stop => true,
        _ = tokio::time::sleep(idle) => false,
    }
}

/// The stream ARN of a table.
pub async fn stream_arn(client: &aws_sdk_dynamodb::Client, table: &str) -> anyhow::Result<String> {
    let t = client
        .describe_table()
        .table_name(table)
        .send()
        .await
        .with_context(|| format!("DescribeTable {table}"))?;
    t.table()
        .and_then(|t| t.latest_stream_arn())
        .map(str::to_string)
        .with_context(|| format!("table {table} has no stream"))
}
