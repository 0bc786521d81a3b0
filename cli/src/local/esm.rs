//! A local DynamoDB Streams event source mapping: discovers a table's stream
//! shards, reads them as Lambda does, invokes the same handler code the
//! Lambdas run, and honours what Lambda honours: batch size, the partial
//! batch response (checkpoint at the failed record, retry from there),
//! bounded retries, bisect on error, and an on-failure destination for
//! records that exhaust their retries.
//!
//! Shards: DescribeStream is followed through its pages; a shard starts only
//! once its parent is completed (or trimmed away), so records of one key are
//! processed in order across a split; a shard is completed when GetRecords
//! returns no next iterator (never from `EndingSequenceNumber`); new shards
//! are discovered on a timer and as soon as a shard completes.
//!
//! Checkpoints: in memory by default; with [`MappingConfig::checkpoints`],
//! durable in the ledger table together with a lease per shard
//! ([`crate::local::lease`]), written after a batch's effects.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use lambda_runtime::{Context, LambdaEvent};
use shared::lambda::StreamHandler;

use crate::local::lease::{Acquired, CheckpointConfig, LeaseError, LeaseTable};
use crate::local::on_failure::OnFailureConfig;
pub use crate::local::shards::RecordReader;
use crate::local::shards::{list_shards, IteratorPosition, SdkStreams, StreamsApi, Trimmed};

/// A handler as Lambda sees it: event in, partial batch response or error out.
/// In process, the event's records are handed over typed (no JSON).
pub type Handler = Arc<
    dyn Fn(
            Event,
        ) -> Pin<
            Box<dyn Future<Output = Result<DynamoDbEventResponse, lambda_runtime::Error>> + Send>,
        > + Send
        + Sync,
>;

/// The Lambda handler of a processor (the same code path as in Lambda).
pub fn handler(processor: Arc<dyn StreamHandler>) -> Handler {
    Arc::new(move |event| {
        let p = processor.clone();
        Box::pin(async move {
            shared::lambda::stream_handler(&*p, LambdaEvent::new(event, Context::default())).await
        })
    })
}

/// Where a mapping starts reading a shard it has no checkpoint for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StartingPosition {
    /// The oldest record still in the stream (what the CDK stack deploys).
    #[default]
    TrimHorizon,
    /// Only records written from now on, in the shards open now; shards
    /// that appear later are read from their start, as Lambda does.
    Latest,
}

impl FromStr for StartingPosition {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "trim-horizon" => Ok(Self::TrimHorizon),
            "latest" => Ok(Self::Latest),
            other => Err(format!(
                "unknown starting position {other:?} (trim-horizon or latest)"
            )),
        }
    }
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
    /// The deployed function timeout: an invocation past it is cancelled
    /// and counts as a failed invocation (SPEC §6.1).
    pub function_timeout: Duration,
    /// Records older than this are given up (the mapping's
    /// `maximumRecordAgeInSeconds`); `None` = no limit (-1).
    pub max_record_age: Option<Duration>,
    /// The mapping's `maximumBatchingWindowInSeconds`.
    pub batching_window: Duration,
    /// Every duration above is multiplied by this before it is slept or
    /// timed (1.0 in production; tests shrink it, never the counts).
    pub time_scale: f64,
    /// Where shards without a checkpoint start.
    pub starting_position: StartingPosition,
    /// How often DescribeStream looks for new shards (besides right after a
    /// shard completes).
    pub discovery_interval: Duration,
    /// Durable checkpoints and shard leases in the ledger table; `None`:
    /// checkpoints in memory, every shard read by this process.
    pub checkpoints: Option<CheckpointConfig>,
    /// Durable on-failure destinations (a JSON-lines file, an SQS queue),
    /// besides [`StreamMapping::on_failure`].
    pub on_failure: OnFailureConfig,
}

impl MappingConfig {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            batch_size: 100,
            max_retries: 3,
            bisect_on_error: true,
            retry_delay: Duration::from_millis(20),
            function_timeout: Duration::from_secs(60),
            max_record_age: None,
            batching_window: Duration::ZERO,
            time_scale: 1.0,
            starting_position: StartingPosition::TrimHorizon,
            discovery_interval: Duration::from_secs(10),
            checkpoints: None,
            on_failure: OnFailureConfig::default(),
        }
    }
}

/// What an on-failure destination receives: which records were given up on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedBatch {
    pub mapping: String,
    pub stream_arn: String,
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

/// A shard this mapping is reading.
struct Shard {
    /// `None` while a fresh iterator is needed (at start, after an error).
    iterator: Option<String>,
    /// GetRecords returned no next iterator: the shard is closed and read.
    ended: bool,
    /// Where a fresh iterator starts when nothing was read yet.
    start: IteratorPosition,
    /// The last record taken into the buffer.
    read_to: Option<String>,
    /// The last record that took effect.
    checkpoint: Option<String>,
    buffer: VecDeque<EventRecord>,
    attempts: u32,
    limit: usize,
    /// When our lease runs out (epoch ms), with durable checkpoints.
    lease_expires_ms: Option<i64>,
}

impl Shard {
    fn new(start: IteratorPosition, checkpoint: Option<String>, limit: usize) -> Self {
        Self {
            iterator: None,
            ended: false,
            start,
            read_to: checkpoint.clone(),
            checkpoint,
            buffer: VecDeque::new(),
            attempts: 0,
            limit,
            lease_expires_ms: None,
        }
    }

    fn resume_position(&self) -> IteratorPosition {
        match &self.read_to {
            Some(seq) => IteratorPosition::AfterSequenceNumber(seq.clone()),
            None => self.start.clone(),
        }
    }
}

fn seq_of(r: &EventRecord) -> String {
    r.change.sequence_number.clone().unwrap_or_default()
}

/// One stream → one handler.
pub struct StreamMapping<S: StreamsApi = SdkStreams> {
    config: MappingConfig,
    api: S,
    stream_arn: String,
    handler: Handler,
    leases: Option<LeaseTable>,
    /// Shards completed (by us or, with leases, by anyone).
    finished: HashSet<String>,
    /// Shards we read (and, with leases, hold).
    held: BTreeMap<String, Shard>,
    /// Shards whose stored checkpoint `--from-start` has already reset.
    reset: HashSet<String>,
    last_discovery: Option<Instant>,
    rediscover: bool,
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
        Self::with_api(
            config,
            SdkStreams {
                client: streams,
                reader,
            },
            stream_arn,
            handler,
        )
    }
}

impl<S: StreamsApi> StreamMapping<S> {
    /// A mapping reading the stream through `api`.
    pub fn with_api(config: MappingConfig, api: S, stream_arn: String, handler: Handler) -> Self {
        let leases = config
            .checkpoints
            .clone()
            .map(|c| LeaseTable::new(c, &config.name, &stream_arn));
        Self {
            config,
            api,
            stream_arn,
            handler,
            leases,
            finished: HashSet::new(),
            held: BTreeMap::new(),
            reset: HashSet::new(),
            last_discovery: None,
            rediscover: true,
            on_failure: OnFailure::default(),
            invocations: 0,
        }
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The configuration it runs with (the parity test compares it with
    /// the deployed template).
    pub fn config(&self) -> &MappingConfig {
        &self.config
    }

    /// Shards this mapping is reading now.
    pub fn shards(&self) -> Vec<String> {
        self.held.keys().cloned().collect()
    }

    /// The last record of `shard` that took effect, as this mapping knows it.
    pub fn checkpoint(&self, shard: &str) -> Option<String> {
        self.held.get(shard).and_then(|s| s.checkpoint.clone())
    }

    fn discovery_due(&self) -> bool {
        self.rediscover
            || self
                .last_discovery
                .is_none_or(|t| t.elapsed() >= self.config.discovery_interval)
    }

    /// Lists the shards and starts every one whose turn has come: not
    /// completed, not read yet, parent completed or gone.
    async fn discover(&mut self) -> anyhow::Result<()> {
        let first = self.last_discovery.is_none();
        let listed = list_shards(&self.api, &self.stream_arn).await?;
        self.last_discovery = Some(Instant::now());
        self.rediscover = false;
        let ids: HashSet<&str> = listed.iter().map(|s| s.shard_id.as_str()).collect();
        let parents: HashSet<&str> = listed
            .iter()
            .filter_map(|s| s.parent_shard_id.as_deref())
            .collect();
        // Completed shards gone from the listing are forgotten.
        self.finished.retain(|id| ids.contains(id.as_str()));
        // Repeat while a pass completes a parent (its children may start).
        loop {
            let mut progressed = false;
            for shard in &listed {
                let id = shard.shard_id.as_str();
                if self.finished.contains(id) || self.held.contains_key(id) {
                    continue;
                }
                if let Some(p) = shard.parent_shard_id.as_deref() {
                    if ids.contains(p) && !self.finished.contains(p) {
                        continue; // the parent first
                    }
                }
                let latest = first && self.config.starting_position == StartingPosition::Latest;
                if latest && parents.contains(id) && self.leases.is_none() {
                    // Closed before we started: LATEST skips it.
                    self.finished.insert(id.to_string());
                    progressed = true;
                    continue;
                }
                let start = if latest {
                    IteratorPosition::Latest
                } else {
                    IteratorPosition::TrimHorizon
                };
                match self.take(id, start, latest && parents.contains(id)).await? {
                    Taken::Started => {}
                    Taken::Finished => {
                        self.finished.insert(id.to_string());
                        progressed = true;
                    }
                    Taken::Elsewhere => {}
                }
            }
            if !progressed {
                break;
            }
        }
        Ok(())
    }

    /// Starts reading `id` (taking its lease, with durable checkpoints).
    async fn take(
        &mut self,
        id: &str,
        start: IteratorPosition,
        closed_before_start: bool,
    ) -> anyhow::Result<Taken> {
        let limit = self.config.batch_size;
        let Some(leases) = &self.leases else {
            self.held
                .insert(id.to_string(), Shard::new(start, None, limit));
            return Ok(Taken::Started);
        };
        let reset = leases.from_start() && !self.reset.contains(id);
        match leases.acquire(id, reset).await? {
            Acquired::Lease {
                checkpoint,
                expires_at_ms,
            } => {
                if reset {
                    self.reset.insert(id.to_string());
                }
                if checkpoint.sequence_number.is_none() && closed_before_start {
                    // LATEST, a shard closed before we started and never
                    // read: nothing of it is ours to process.
                    leases.finish(id, None).await?;
                    return Ok(Taken::Finished);
                }
                let start = if reset {
                    IteratorPosition::TrimHorizon
                } else {
                    start
                };
                let mut shard = Shard::new(start, checkpoint.sequence_number, limit);
                shard.lease_expires_ms = Some(expires_at_ms);
                tracing::info!(mapping = %self.config.name, shard = id, owner = leases.owner(), checkpoint = ?shard.checkpoint, "lease taken");
                self.held.insert(id.to_string(), shard);
                Ok(Taken::Started)
            }
            Acquired::Finished => Ok(Taken::Finished),
            Acquired::Held { owner } => {
                tracing::debug!(mapping = %self.config.name, shard = id, %owner, "shard held by another owner");
                Ok(Taken::Elsewhere)
            }
        }
    }

    /// Drops a shard whose lease another owner took.
    fn lost(&mut self, id: &str) {
        tracing::warn!(mapping = %self.config.name, shard = id, "lease lost: another owner reads this shard now");
        self.held.remove(id);
    }

    /// Renews leases with less than half their time left.
    async fn renew_leases(&mut self) -> anyhow::Result<()> {
        let Some(leases) = self.leases.clone() else {
            return Ok(());
        };
        let due: Vec<String> = self
            .held
            .iter()
            .filter(|(_, s)| {
                s.lease_expires_ms
                    .is_some_and(|e| leases.due_for_renewal(e))
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            match leases.checkpoint(&id, None).await {
                Ok(expires) => {
                    if let Some(s) = self.held.get_mut(&id) {
                        s.lease_expires_ms = Some(expires);
                    }
                }
                Err(LeaseError::Lost { .. }) => self.lost(&id),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// The records after a shard's checkpoint were trimmed (the consumer was
    /// stopped longer than the stream's retention): they are lost to the
    /// stream. Said loudly, sent to the on-failure destination, and reading
    /// goes on from TRIM_HORIZON; `jobstream backfill` adopts what was missed.
    async fn trimmed(&mut self, id: &str, from: &IteratorPosition) -> anyhow::Result<()> {
        let start = match from {
            IteratorPosition::AfterSequenceNumber(s) => s.clone(),
            _ => String::new(),
        };
        let f = FailedBatch {
            mapping: self.config.name.clone(),
            stream_arn: self.stream_arn.clone(),
            shard_id: id.to_string(),
            start_sequence_number: start,
            end_sequence_number: String::new(),
            batch_size: 0,
            reason: "records after the checkpoint were trimmed from the stream before they were processed; run `jobstream backfill`".into(),
        };
        tracing::error!(mapping = %f.mapping, shard = %f.shard_id, after = %f.start_sequence_number, "records trimmed before they were processed: resuming at TRIM_HORIZON");
        crate::local::on_failure::deliver(&self.config.on_failure, &f)
            .await
            .context("on-failure destination")?;
        self.on_failure.push(f);
        Ok(())
    }

    /// Reads the next records of a shard whose buffer has room.
    async fn fetch(&mut self, id: &str) -> anyhow::Result<()> {
        let Some(s) = self.held.get(id) else {
            return Ok(());
        };
        if s.ended || s.buffer.len() >= self.config.batch_size {
            return Ok(());
        }
        let iterator = match s.iterator.clone() {
            Some(it) => it,
            None => {
                let position = s.resume_position();
                let iterator = match self
                    .api
                    .shard_iterator(&self.stream_arn, id, &position)
                    .await
                {
                    Err(e) if e.is::<Trimmed>() => {
                        self.trimmed(id, &position).await?;
                        self.api
                            .shard_iterator(&self.stream_arn, id, &IteratorPosition::TrimHorizon)
                            .await?
                    }
                    other => other?,
                };
                match iterator {
                    Some(it) => it,
                    None => {
                        let s = self.held.get_mut(id).context("shard held")?;
                        s.ended = true;
                        return Ok(());
                    }
                }
            }
        };
        let page = match self.api.get_records(&iterator, 1000).await {
            Ok(page) => page,
            Err(e) => {
                // A fresh iterator next time, from what was read.
                if let Some(s) = self.held.get_mut(id) {
                    s.iterator = None;
                }
                return Err(e);
            }
        };
        let s = self.held.get_mut(id).context("shard held")?;
        if let Some(last) = page.records.last() {
            s.read_to = Some(seq_of(last));
        }
        s.buffer.extend(page.records.into_iter().map(|mut r| {
            r.event_source_arn = Some(self.stream_arn.clone());
            r
        }));
        match page.next_iterator {
            Some(next) => s.iterator = Some(next),
            None => {
                s.iterator = None;
                s.ended = true;
            }
        }
        Ok(())
    }

    /// Completes a shard read to its end: checkpoint `SHARD_END`, lease
    /// released, its children may start.
    async fn complete(&mut self, id: &str) -> anyhow::Result<()> {
        let checkpoint = self.held.get(id).and_then(|s| s.checkpoint.clone());
        if let Some(leases) = &self.leases {
            match leases.finish(id, checkpoint.as_deref()).await {
                Ok(()) => {}
                Err(LeaseError::Lost { .. }) => {
                    self.lost(id);
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            }
        }
        tracing::info!(mapping = %self.config.name, shard = id, "shard completed");
        self.held.remove(id);
        self.finished.insert(id.to_string());
        self.rediscover = true;
        Ok(())
    }

    /// Fetches new records and invokes the handler once per shard with a
    /// pending batch.
    pub async fn poll_once(&mut self) -> anyhow::Result<Round> {
        if self.discovery_due() {
            self.discover().await?;
        }
        self.renew_leases().await?;
        let mut round = Round::default();
        let ids: Vec<String> = self.held.keys().cloned().collect();
        for id in ids {
            self.fetch(&id).await?;
            round.done += self.invoke_shard(&id).await?;
            let Some(s) = self.held.get(&id) else {
                continue;
            };
            if s.ended && s.buffer.is_empty() {
                self.complete(&id).await?;
            } else {
                round.pending += s.buffer.len();
            }
        }
        if self.rediscover {
            // A shard completed: its children may start right away.
            self.discover().await?;
        }
        Ok(round)
    }

    /// Lets every lease go (at shutdown), so another process takes the
    /// shards at once. Checkpoints were written batch by batch.
    pub async fn release(&mut self) -> anyhow::Result<()> {
        if let Some(leases) = &self.leases {
            for id in self.held.keys() {
                match leases.release(id).await {
                    Ok(()) | Err(LeaseError::Lost { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        self.held.clear();
        self.last_discovery = None;
        Ok(())
    }

    /// Records that the first `done` records of a shard's buffer took
    /// effect: the checkpoint moves (durably, with leases) past them.
    async fn advance(&mut self, id: &str, done: usize) -> anyhow::Result<bool> {
        let s = self.held.get_mut(id).context("shard held")?;
        let Some(last) = s.buffer.drain(..done).next_back() else {
            return Ok(true);
        };
        let seq = seq_of(&last);
        s.checkpoint = Some(seq.clone());
        if let Some(leases) = &self.leases {
            match leases.checkpoint(id, Some(&seq)).await {
                Ok(expires) => s.lease_expires_ms = Some(expires),
                Err(LeaseError::Lost { .. }) => {
                    self.lost(id);
                    return Ok(false);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(true)
    }

    async fn invoke_shard(&mut self, id: &str) -> anyhow::Result<usize> {
        let Some(s) = self.held.get(id) else {
            return Ok(0);
        };
        let limit = s.buffer.len().min(s.limit).min(self.config.batch_size);
        if limit == 0 {
            return Ok(0);
        }
        let mut event = Event::default();
        event.records = s.buffer.iter().take(limit).cloned().collect();
        let seqs: Vec<String> = event.records.iter().map(seq_of).collect();
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
        if !self.advance(id, done).await? {
            return Ok(done);
        }
        let s = self.held.get_mut(id).context("shard held")?;
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
                let f = FailedBatch {
                    mapping: self.config.name.clone(),
                    stream_arn: self.stream_arn.clone(),
                    shard_id: id.to_string(),
                    start_sequence_number: s.buffer.front().map(seq_of).unwrap_or_default(),
                    end_sequence_number: s.buffer.get(n - 1).map(seq_of).unwrap_or_default(),
                    batch_size: n,
                    reason,
                };
                tracing::error!(mapping = %f.mapping, shard = %f.shard_id, start = %f.start_sequence_number, end = %f.end_sequence_number, reason = %f.reason, "retries exhausted: records sent to the on-failure destination");
                // Delivered before the checkpoint passes them: if the
                // destination fails, the batch is tried again.
                crate::local::on_failure::deliver(&self.config.on_failure, &f)
                    .await
                    .context("on-failure destination")?;
                self.on_failure.push(f);
                let s = self.held.get_mut(id).context("shard held")?;
                s.attempts = 0;
                s.limit = self.config.batch_size;
                self.advance(id, n).await?;
                return Ok(done + n);
            }
        }
        let delay = self.config.retry_delay * s.attempts;
        tokio::time::sleep(delay).await;
        Ok(done)
    }
}

enum Taken {
    Started,
    Finished,
    Elsewhere,
}

/// Lets every mapping's leases go (call when `run` stops).
pub async fn release_all<S: StreamsApi>(mappings: &mut [StreamMapping<S>]) {
    for m in mappings {
        if let Err(e) = m.release().await {
            tracing::warn!(mapping = %m.config.name, error = %e, "releasing leases failed (they expire on their own)");
        }
    }
}

/// Runs mappings until every one has nothing left: no pending records and
/// no new ones. Returns the number of records completed.
pub async fn drain<S: StreamsApi>(mappings: &mut [StreamMapping<S>]) -> anyhow::Result<usize> {
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
pub async fn poll_streams<S: StreamsApi>(mappings: &mut [StreamMapping<S>]) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::shards::fake::{seq_string, FakeStreams};

    /// A handler that records the sequence numbers it is given, in order,
    /// and fails the record named by `fail` (once per listed attempt).
    fn recording(seen: Arc<Mutex<Vec<String>>>) -> Handler {
        Arc::new(move |event: Event| {
            let seen = seen.clone();
            Box::pin(async move {
                seen.lock()
                    .unwrap()
                    .extend(event.records.iter().map(seq_of));
                Ok(DynamoDbEventResponse::default())
            })
        })
    }

    fn mapping(api: FakeStreams, seen: &Arc<Mutex<Vec<String>>>) -> StreamMapping<FakeStreams> {
        let mut config = MappingConfig::new("test");
        config.batch_size = 10;
        StreamMapping::with_api(config, api, "arn".into(), recording(seen.clone()))
    }

    fn seen_u64(seen: &Arc<Mutex<Vec<String>>>) -> Vec<u64> {
        seen.lock()
            .unwrap()
            .iter()
            .map(|s| s.parse().unwrap())
            .collect()
    }

    #[tokio::test]
    async fn a_checkpoint_trimmed_from_the_stream_resumes_at_trim_horizon_and_says_so() {
        let api = FakeStreams::new(100);
        api.add_shard("s", None);
        api.write("s", 10);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut m = mapping(api, &seen);
        m.poll_once().await.unwrap();
        assert_eq!(seen_u64(&seen), (1..=10).collect::<Vec<u64>>());
        // Away longer than the retention: 30 more written, all below 25 gone.
        m.api.write("s", 30);
        m.api.trim_below("s", 25);
        // The first poll meets the expired iterator; the next ones resume.
        let _ = m.poll_once().await;
        drain(std::slice::from_mut(&mut m)).await.unwrap();
        let mut want: Vec<u64> = (1..=10).collect();
        want.extend(25..=40);
        assert_eq!(seen_u64(&seen), want, "resumed at the trim horizon");
        let failed = m.on_failure.take();
        assert_eq!(failed.len(), 1, "the loss is reported");
        assert!(failed[0].reason.contains("trimmed"));
        assert_eq!(failed[0].start_sequence_number, seq_string(10));
    }

    #[tokio::test]
    async fn a_parent_is_processed_to_its_end_before_either_child() {
        let api = FakeStreams::new(100);
        api.add_shard("parent", None);
        api.write("parent", 25);
        api.close("parent");
        // Children listed (and written) before the parent is read.
        api.add_shard("child-a", Some("parent"));
        api.add_shard("child-b", Some("parent"));
        let a = api.write("child-a", 15);
        let b = api.write("child-b", 12);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut m = mapping(api, &seen);
        let done = drain(std::slice::from_mut(&mut m)).await.unwrap();
        assert_eq!(done, 25 + 15 + 12);
        let order = seen_u64(&seen);
        assert_eq!(order.len(), 52, "each record once");
        let parent_last = order.iter().rposition(|s| *s <= 25).unwrap();
        let first_child = order.iter().position(|s| *s > 25).unwrap();
        assert!(
            parent_last < first_child,
            "parent before children: {order:?}"
        );
        // Within each shard, in order.
        for shard in [&a, &b] {
            let got: Vec<u64> = order
                .iter()
                .copied()
                .filter(|s| shard.contains(s))
                .collect();
            assert_eq!(&got, shard);
        }
        assert!(m.shards().is_empty() || m.shards().iter().all(|s| s.starts_with("child")));
    }

    #[tokio::test]
    async fn every_record_of_250_shards_over_three_pages_is_read() {
        let api = FakeStreams::new(100);
        let mut written = Vec::new();
        for i in 0..250 {
            let id = format!("shard-{i:04}");
            api.add_shard(&id, None);
            written.extend(api.write(&id, 2));
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut m = mapping(api, &seen);
        drain(std::slice::from_mut(&mut m)).await.unwrap();
        let mut got = seen_u64(&seen);
        got.sort_unstable();
        assert_eq!(got, written);
        assert_eq!(m.shards().len(), 250);
    }

    #[tokio::test]
    async fn a_closed_shard_completes_and_its_successor_is_found_without_waiting_for_the_timer() {
        let api = FakeStreams::new(100);
        api.add_shard("s1", None);
        api.write("s1", 3);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut m = mapping(api, &seen);
        m.config.discovery_interval = Duration::from_secs(3600);
        drain(std::slice::from_mut(&mut m)).await.unwrap();
        assert_eq!(m.shards(), vec!["s1".to_string()]);
        // Rollover: s1 closes, s2 (its child) takes the writes.
        m.api.close("s1");
        m.api.add_shard("s2", Some("s1"));
        m.api.write("s2", 4);
        drain(std::slice::from_mut(&mut m)).await.unwrap();
        assert_eq!(seen_u64(&seen), (1..=7).collect::<Vec<_>>());
        assert_eq!(m.shards(), vec!["s2".to_string()]);
    }

    #[tokio::test]
    async fn new_shards_are_discovered_on_the_timer_not_every_round() {
        let api = FakeStreams::new(100);
        api.add_shard("s1", None);
        api.write("s1", 1);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut m = mapping(api, &seen);
        m.config.discovery_interval = Duration::from_millis(300);
        for _ in 0..5 {
            m.poll_once().await.unwrap();
        }
        assert_eq!(*m.api.describe_calls.lock().unwrap(), 1);
        // A shard appearing beside it (no parent) is picked up at the next tick.
        m.api.add_shard("s9", None);
        m.api.write("s9", 2);
        m.poll_once().await.unwrap();
        assert_eq!(seen_u64(&seen), vec![1]);
        tokio::time::sleep(Duration::from_millis(350)).await;
        m.poll_once().await.unwrap();
        assert_eq!(seen_u64(&seen), vec![1, 2, 3]);
    }

    #[tokio::test]
    async fn latest_skips_what_was_there_and_reads_new_shards_from_their_start() {
        let api = FakeStreams::new(100);
        api.add_shard("old", None);
        api.write("old", 5);
        api.close("old");
        api.add_shard("open", Some("old"));
        api.write("open", 5);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut m = mapping(api, &seen);
        m.config.starting_position = StartingPosition::Latest;
        drain(std::slice::from_mut(&mut m)).await.unwrap();
        assert!(seen_u64(&seen).is_empty());
        let new = m.api.write("open", 2);
        m.api.close("open");
        m.api.add_shard("next", Some("open"));
        let next = m.api.write("next", 3);
        drain(std::slice::from_mut(&mut m)).await.unwrap();
        assert_eq!(seen_u64(&seen), [new, next].concat());
    }

    #[tokio::test]
    async fn a_failed_record_is_retried_from_itself_then_sent_to_the_file_destination() {
        let api = FakeStreams::new(100);
        api.add_shard("s1", None);
        api.write("s1", 5);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let poison = seq_string(3);
        let handler: Handler = Arc::new(move |event: Event| {
            let log = log.clone();
            let poison = poison.clone();
            Box::pin(async move {
                let mut seen = log.lock().unwrap();
                for r in &event.records {
                    if seq_of(r) == poison {
                        return Ok(shared::batch::failure_response(&poison));
                    }
                    seen.push(seq_of(r));
                }
                Ok(DynamoDbEventResponse::default())
            })
        });
        let path =
            std::env::temp_dir().join(format!("esm-failures-{}.jsonl", uuid::Uuid::new_v4()));
        let mut config = MappingConfig::new("test");
        config.retry_delay = Duration::ZERO;
        config.max_retries = 1;
        config.on_failure.file = Some(path.clone());
        let mut m = StreamMapping::with_api(config, api, "arn".into(), handler);
        let done = drain(std::slice::from_mut(&mut m)).await.unwrap();
        assert_eq!(done, 5);
        assert_eq!(seen_u64(&seen), vec![1, 2, 4, 5]);
        let failed = m.on_failure.take();
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].start_sequence_number, seq_string(3));
        assert_eq!(failed[0].end_sequence_number, seq_string(3));
        let line = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).ok();
        let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
        assert_eq!(
            v["DDBStreamBatchInfo"]["startSequenceNumber"],
            seq_string(3)
        );
        assert_eq!(v["DDBStreamBatchInfo"]["shardId"], "s1");
        assert_eq!(m.checkpoint("s1"), Some(seq_string(5)));
    }

    #[test]
    fn starting_positions_parse_as_the_flag_spells_them() {
        assert_eq!("trim-horizon".parse(), Ok(StartingPosition::TrimHorizon));
        assert_eq!("TRIM_HORIZON".parse(), Ok(StartingPosition::TrimHorizon));
        assert_eq!("latest".parse(), Ok(StartingPosition::Latest));
        assert!("at-timestamp".parse::<StartingPosition>().is_err());
    }
}
