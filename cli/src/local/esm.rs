//! A local DynamoDB Streams event source mapping: discovers a table's stream
//! shards, reads them as Lambda does, invokes the same handler code the
//! Lambdas run, and honours what the deployed mapping honours (SPEC §6.1):
//! batch size and batching window, the partial batch response (checkpoint
//! at the failed record, retry from there), bisect on each function error,
//! retries counted as Lambda counts them, the function timeout (an
//! invocation past it is cancelled and counts as failed), the maximum record
//! age, and an on-failure destination for records given up. Every duration
//! slept or timed is multiplied by [`MappingConfig::time_scale`].
//!
//! Shards: DescribeStream is followed through its pages, on a slow timer and
//! when a shard ends; a shard starts only once its parent is completed (or
//! gone), so records of one key are processed in order across a split; a
//! shard is completed when GetRecords returns no next iterator (never from
//! `EndingSequenceNumber`). Each shard is polled at most 4 times a second
//! (Lambda's rate), shards are processed concurrently (in order within a
//! shard), and one failing shard (or a failing DescribeStream) never holds
//! up the others.
//!
//! Checkpoints: in memory by default; with [`MappingConfig::checkpoints`],
//! durable in the ledger table with a fenced lease per shard
//! ([`crate::local::lease`]), written after a batch's effects. Shards are
//! shared and balanced across processes as the Kinesis Client Library does
//! (free or expired leases first, then stealing from the most loaded owner);
//! leases are renewed beside the work; a shard whose lease is lost stops at
//! once (an invocation in flight is cancelled, its batch not checkpointed)
//! and is never invoked without its lease.
//!
//! Two ways to drive a mapping: [`StreamMapping::poll_once`] (one round of
//! every held shard; tests and `drain`), and [`StreamMapping::consume`]
//! (`jobstream run` / `dev`: a task per shard, a lease renewer, a
//! coordinator, and a graceful handover on stop).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use chrono::{DateTime, Utc};
use lambda_runtime::{Context, LambdaEvent};
use shared::lambda::StreamHandler;
use tokio::sync::watch;

use crate::local::lease::{
    now_ms, CheckpointConfig, LeaseError, LeaseItem, LeaseTable, Observer, Renewed, Taken,
};
use crate::local::on_failure::{Condition, OnFailureConfig};
pub use crate::local::shards::RecordReader;
use crate::local::shards::{
    list_shards, IteratorPosition, SdkStreams, ShardInfo, StreamsApi, Trimmed,
};

/// Lambda polls each shard at most 4 times a second.
pub const GET_RECORDS_INTERVAL: Duration = Duration::from_millis(250);

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
    /// Only records written from the mapping's first start on, in the shards
    /// open then; shards that appear later are read from their start, as
    /// Lambda does. With durable checkpoints the first start is recorded, so
    /// a restart does not skip what was written while it was down.
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
    /// Retries of a failing record before it is given up (Lambda's
    /// `MaximumRetryAttempts`; splitting a batch does not count).
    pub max_retries: u32,
    /// Split a failing batch in two on each error (Lambda's
    /// `BisectBatchOnFunctionError`).
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
    /// The scale of [`Self::function_timeout`] alone; `None`:
    /// [`Self::time_scale`]. The timeout bounds work, which a faster test
    /// clock does not make faster (see
    /// `RuntimeOptions::function_timeout_scale`).
    pub timeout_scale: Option<f64>,
    /// Where shards without a checkpoint start.
    pub starting_position: StartingPosition,
    /// How often DescribeStream looks for new shards (besides right after a
    /// shard completes); scaled too.
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
            timeout_scale: None,
            starting_position: StartingPosition::TrimHorizon,
            discovery_interval: Duration::from_secs(60),
            checkpoints: None,
            on_failure: OnFailureConfig::default(),
        }
    }

    /// `d` as slept or timed: multiplied by [`Self::time_scale`].
    pub fn scaled(&self, d: Duration) -> Duration {
        d.mul_f64(self.time_scale.max(0.0))
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
    pub condition: Condition,
    pub first_arrival: Option<DateTime<Utc>>,
    pub last_arrival: Option<DateTime<Utc>>,
    /// Invocations that included these records.
    pub invoke_count: u32,
    /// `Unhandled` when the last invocation failed as a whole (error, timeout).
    pub function_error: Option<String>,
}

/// The on-failure destination (records given up), as the runtimes read it.
#[derive(Debug, Clone, Default)]
pub struct OnFailure(
    Arc<Mutex<Vec<FailedBatch>>>,
    Arc<AtomicU64>,
    /// Batches the destinations failed to take (kept in the list only).
    Arc<AtomicU64>,
);

impl OnFailure {
    pub fn take(&self) -> Vec<FailedBatch> {
        self.0
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }
    /// Batches given up so far and not taken yet.
    pub fn len(&self) -> usize {
        self.0.lock().map(|v| v.len()).unwrap_or(0)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Losses reported so far (trimmed records, vanished shards), taken or not.
    pub fn losses(&self) -> u64 {
        self.1.load(Ordering::Relaxed)
    }
    /// Batches given up that the on-failure destinations failed to take
    /// (kept in memory, listed at exit; the status line says so).
    pub fn undelivered(&self) -> u64 {
        self.2.load(Ordering::Relaxed)
    }
    fn push_undelivered(&self, f: FailedBatch) {
        self.2.fetch_add(1, Ordering::Relaxed);
        self.push(f);
    }
    fn push(&self, f: FailedBatch) {
        if f.condition.is_loss() {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
        if let Ok(mut v) = self.0.lock() {
            v.push(f);
        }
    }
}

/// What a mapping did, readable while it runs (status line, metrics).
#[derive(Debug, Default)]
pub struct MappingStats {
    pub name: String,
    invocations: AtomicU64,
    /// Invocations that failed as a whole or in part (error, panic,
    /// timeout, a failed record in the partial batch response).
    pub failed_invocations: AtomicU64,
    /// Records whose batch took effect.
    pub records_processed: AtomicU64,
    /// Records sent to the on-failure destinations (retries exhausted, too
    /// old).
    pub records_given_up: AtomicU64,
    /// Shard leases this process holds now.
    pub leases_held: AtomicU64,
    /// The mapping listed its shards and (with leases) read the lease
    /// table at least once, and has not stopped: it holds leases or
    /// stands by.
    pub ready: std::sync::atomic::AtomicBool,
    /// Per shard held: creation time (epoch ms) of the oldest record not
    /// yet checkpointed; `None` when caught up.
    oldest: Mutex<BTreeMap<String, Option<i64>>>,
    pub on_failure: OnFailure,
}

impl MappingStats {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            ..Self::default()
        }
    }
    pub fn invocations(&self) -> u64 {
        self.invocations.load(Ordering::Relaxed)
    }
    /// Iterator age per shard (milliseconds): the age, now, of the oldest
    /// record not yet checkpointed, 0 when caught up. It keeps rising while
    /// a shard retries a failing record (as Lambda's `IteratorAge` does),
    /// and while a batch is in flight.
    pub fn iterator_ages(&self) -> BTreeMap<String, i64> {
        let now = now_ms();
        self.oldest
            .lock()
            .map(|a| {
                a.iter()
                    .map(|(shard, t)| (shard.clone(), t.map_or(0, |t| (now - t).max(0))))
                    .collect()
            })
            .unwrap_or_default()
    }
    /// The largest iterator age of the mapping's shards (ms).
    pub fn iterator_age(&self) -> i64 {
        self.iterator_ages().values().copied().max().unwrap_or(0)
    }
    /// `Some(created)`: the shard's oldest record not yet checkpointed
    /// (`None`: caught up); `None`: the shard is no longer held.
    fn set_oldest(&self, shard: &str, oldest: Option<Option<i64>>) {
        if let Ok(mut a) = self.oldest.lock() {
            match oldest {
                Some(v) => a.insert(shard.to_string(), v),
                None => a.remove(shard),
            };
        }
    }
}

/// `IteratorAge` (milliseconds) of a mapping as one CloudWatch Embedded
/// Metric Format line, named as Lambda's metric.
pub fn iterator_age_emf(mapping: &str, age_ms: i64, timestamp_ms: i64) -> String {
    serde_json::json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": "jobstream",
                "Dimensions": [["Processor"]],
                "Metrics": [{"Name": "IteratorAge", "Unit": "Milliseconds"}],
            }]
        },
        "Processor": mapping,
        "IteratorAge": age_ms,
    })
    .to_string()
}

/// A lease this process holds: the fencing token its writes carry.
#[derive(Debug)]
struct Lease {
    /// The counter as this process last wrote it. Every write under the
    /// lease (renewal, checkpoint, completion, release) holds this lock, so
    /// a renewal and a checkpoint never race on the token.
    token: tokio::sync::Mutex<i64>,
    /// Ours until then, on this process's monotonic clock: a lease duration
    /// after the last successful renewal was sent.
    valid_until: Mutex<Instant>,
    lost: watch::Sender<bool>,
}

impl Lease {
    fn new(t: &Taken) -> Arc<Self> {
        Arc::new(Self {
            token: tokio::sync::Mutex::new(t.token),
            valid_until: Mutex::new(t.valid_until),
            lost: watch::channel(false).0,
        })
    }
    fn valid_until(&self) -> Instant {
        self.valid_until
            .lock()
            .map(|v| *v)
            .unwrap_or_else(|_| Instant::now())
    }
    fn renewed(&self, token: &mut i64, r: Renewed) {
        *token = r.token;
        if let Ok(mut v) = self.valid_until.lock() {
            *v = (*v).max(r.valid_until);
        }
    }
    /// Still ours: not lost, not run out (a renewal that keeps failing lets
    /// it run out, and the shard stops before its next invocation).
    fn holds(&self) -> bool {
        !*self.lost.borrow() && self.valid_until() > Instant::now()
    }
    fn lose(&self) {
        self.lost.send_replace(true);
    }
    /// Resolves when the lease is lost.
    async fn lost(&self) {
        let mut rx = self.lost.subscribe();
        let _ = rx.wait_for(|l| *l).await;
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
    /// Failed invocations of the records at the front (splits not counted).
    attempts: u32,
    /// Invocations that included the record at the front.
    invoke_count: u32,
    /// The current batch size (a bisected batch is smaller).
    limit: usize,
    lease: Option<Arc<Lease>>,
    /// Not before: the next GetRecords (Lambda's rate), the next retry.
    next_get: Option<Instant>,
    /// When the last GetRecords that answered began (`drain` waits until
    /// every shard has been read since it went quiet).
    read_at: Option<Instant>,
    retry_at: Option<Instant>,
    /// When the first buffered record arrived (batching window).
    buffered_since: Option<Instant>,
    /// `--starting-position latest` began here (epoch ms): older records
    /// were not ours to process.
    skip_before_ms: Option<i64>,
    /// A trim was met: report the records between this checkpoint and the
    /// first record still there.
    trimmed_after: Option<Option<String>>,
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
            invoke_count: 0,
            limit,
            lease: None,
            next_get: None,
            read_at: None,
            retry_at: None,
            buffered_since: None,
            skip_before_ms: None,
            trimmed_after: None,
        }
    }

    fn resume_position(&self) -> IteratorPosition {
        match &self.read_to {
            Some(seq) => IteratorPosition::AfterSequenceNumber(seq.clone()),
            None => self.start.clone(),
        }
    }

    fn holds(&self) -> bool {
        self.lease.as_ref().is_none_or(|l| l.holds())
    }
}

fn seq_of(r: &EventRecord) -> String {
    r.change.sequence_number.clone().unwrap_or_default()
}

fn created_ms(r: &EventRecord) -> i64 {
    r.change.approximate_creation_date_time.timestamp_millis()
}

fn min_instant(a: Option<Instant>, b: Instant) -> Option<Instant> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// What one step of a shard did.
#[derive(Debug, Default)]
struct Step {
    done: usize,
    pending: usize,
    /// The lease is gone: drop the shard.
    lost: bool,
    /// Read to its end and every record done: complete it.
    ended: bool,
    /// Nothing more to do before this instant (rate, retry, window).
    wait: Option<Instant>,
    /// When the last GetRecords of the shard that answered began (`None`:
    /// never read).
    read_at: Option<Instant>,
}

#[derive(Debug, thiserror::Error)]
enum StepError {
    #[error("lease lost")]
    Lost,
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl From<LeaseError> for StepError {
    fn from(e: LeaseError) -> Self {
        match e {
            LeaseError::Lost { .. } => Self::Lost,
            e => Self::Other(e.into()),
        }
    }
}

/// What the shards of a mapping share.
struct Ctx<S> {
    config: MappingConfig,
    api: S,
    stream_arn: String,
    handler: Handler,
    leases: Option<LeaseTable>,
    stats: Arc<MappingStats>,
}

impl<S: StreamsApi> Ctx<S> {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn scaled(&self, d: Duration) -> Duration {
        self.config.scaled(d)
    }

    /// One step of a shard: read if due, give up records past their age,
    /// invoke if a batch is due. Errors are logged and isolated: the shard
    /// retries at its next step, the others go on.
    async fn step(&self, id: &str, s: &mut Shard) -> Step {
        let mut out = Step::default();
        if !s.holds() {
            out.lost = true;
            return out;
        }
        let now = Instant::now();
        if !s.ended && s.buffer.len() < self.config.batch_size {
            match s.next_get {
                Some(t) if t > now => out.wait = Some(t),
                _ => {
                    s.next_get = Some(now + self.scaled(GET_RECORDS_INTERVAL));
                    match self.fetch(id, s).await {
                        Ok(()) => s.read_at = Some(now),
                        Err(e) => {
                            s.iterator = None;
                            tracing::warn!(mapping = %self.name(), shard = id, error = format!("{e:#}"), "reading the shard failed; retried at its next poll");
                        }
                    }
                }
            }
        }
        match self.process(id, s, &mut out).await {
            Ok(()) => {}
            Err(StepError::Lost) => {
                out.lost = true;
                return out;
            }
            Err(StepError::Other(e)) => {
                tracing::warn!(mapping = %self.name(), shard = id, error = format!("{e:#}"), "batch not completed; retried at the shard's next poll");
                s.retry_at = Some(
                    Instant::now() + self.scaled(self.config.retry_delay.max(GET_RECORDS_INTERVAL)),
                );
            }
        }
        if let Some(t) = s.retry_at.filter(|_| !s.buffer.is_empty()) {
            out.wait = min_instant(out.wait, t);
        }
        out.pending = s.buffer.len();
        out.ended = s.ended && s.buffer.is_empty();
        out.read_at = s.read_at;
        self.note_oldest(id, s);
        out
    }

    /// The iterator age's reference: the shard's oldest record not yet
    /// checkpointed.
    fn note_oldest(&self, id: &str, s: &Shard) {
        self.stats
            .set_oldest(id, Some(s.buffer.front().map(created_ms)));
    }

    async fn process(&self, id: &str, s: &mut Shard, out: &mut Step) -> Result<(), StepError> {
        out.done += self.expire_old(id, s).await?;
        if s.buffer.is_empty() {
            return Ok(());
        }
        let now = Instant::now();
        if let Some(t) = s.retry_at {
            if t > now {
                return Ok(());
            }
        }
        // Batching window: wait for a full batch up to the window's end.
        if !s.ended && s.buffer.len() < self.config.batch_size && s.attempts == 0 {
            if let Some(since) = s.buffered_since {
                let due = since + self.scaled(self.config.batching_window);
                if due > now {
                    out.wait = min_instant(out.wait, due);
                    return Ok(());
                }
            }
        }
        out.done += self.invoke(id, s).await?;
        Ok(())
    }

    /// Reads the next records of a shard.
    async fn fetch(&self, id: &str, s: &mut Shard) -> anyhow::Result<()> {
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
                        s.trimmed_after = Some(match &position {
                            IteratorPosition::AfterSequenceNumber(seq) => Some(seq.clone()),
                            _ => None,
                        });
                        self.api
                            .shard_iterator(&self.stream_arn, id, &IteratorPosition::TrimHorizon)
                            .await?
                    }
                    other => other?,
                };
                match iterator {
                    Some(it) => it,
                    None => {
                        s.ended = true;
                        return Ok(());
                    }
                }
            }
        };
        let page = match self.api.get_records(&iterator, 1000).await {
            Ok(page) => page,
            Err(e) => {
                s.iterator = None;
                return Err(e);
            }
        };
        if let Some(after) = s.trimmed_after.clone() {
            self.report_trimmed(id, after, page.records.first()).await?;
            s.trimmed_after = None;
        }
        if let Some(last) = page.records.last() {
            s.read_to = Some(seq_of(last));
        }
        let mut records = page.records;
        if let Some(from) = s.skip_before_ms {
            // Written before `latest` began (a second of slack: replaying a
            // record is harmless, skipping one is a loss).
            records.retain(|r| created_ms(r) >= from - 1000);
        }
        if s.buffer.is_empty() && !records.is_empty() {
            s.buffered_since = Some(Instant::now());
        }
        s.buffer.extend(records.into_iter().map(|mut r| {
            r.event_source_arn = Some(self.stream_arn.clone());
            r
        }));
        self.note_oldest(id, s);
        match page.next_iterator {
            Some(next) => s.iterator = Some(next),
            None => {
                s.iterator = None;
                s.ended = true;
            }
        }
        Ok(())
    }

    /// Delivers a failed batch to the destinations (before the checkpoint
    /// passes it). A destination that fails never holds the shard: the
    /// batch is logged with its range, kept in memory (listed at exit,
    /// which then fails) and counted as undelivered (status line, metric),
    /// and processing goes on.
    async fn deliver(&self, f: FailedBatch) -> anyhow::Result<()> {
        match crate::local::on_failure::deliver(&self.config.on_failure, &f).await {
            Ok(()) => self.stats.on_failure.push(f),
            Err(e) => {
                tracing::error!(mapping = %f.mapping, shard = %f.shard_id, start = %f.start_sequence_number, end = %f.end_sequence_number, condition = f.condition.as_str(), error = format!("{e:#}"), "the on-failure destination failed: the batch is kept in memory and listed at exit; processing goes on");
                self.stats.on_failure.push_undelivered(f);
            }
        }
        Ok(())
    }

    fn failed_batch(&self, id: &str, condition: Condition, reason: String) -> FailedBatch {
        FailedBatch {
            mapping: self.name().to_string(),
            stream_arn: self.stream_arn.clone(),
            shard_id: id.to_string(),
            start_sequence_number: String::new(),
            end_sequence_number: String::new(),
            batch_size: 0,
            reason,
            condition,
            first_arrival: None,
            last_arrival: None,
            invoke_count: 0,
            function_error: None,
        }
    }

    /// The records after a shard's checkpoint were trimmed (the consumer was
    /// stopped longer than the stream's retention): they are lost to the
    /// stream. Said loudly, sent to the on-failure destination with the
    /// range, and reading goes on from TRIM_HORIZON; `jobstream backfill`
    /// adopts what was missed.
    async fn report_trimmed(
        &self,
        id: &str,
        after: Option<String>,
        first: Option<&EventRecord>,
    ) -> anyhow::Result<()> {
        let start = after.unwrap_or_default();
        let end = first.map(seq_of).unwrap_or_default();
        let mut f = self.failed_batch(
            id,
            Condition::RecordsTrimmed,
            format!("records after {start} and before {} were trimmed from the stream before they were processed; run `jobstream backfill`", if end.is_empty() { "the shard's end" } else { &end }),
        );
        f.start_sequence_number = start;
        f.end_sequence_number = end;
        tracing::error!(mapping = %f.mapping, shard = %f.shard_id, after = %f.start_sequence_number, before = %f.end_sequence_number, "records trimmed before they were processed: resuming at TRIM_HORIZON");
        self.deliver(f).await
    }

    /// Gives up the first `n` buffered records (destination first, then the
    /// checkpoint moves past them).
    async fn give_up(
        &self,
        id: &str,
        s: &mut Shard,
        n: usize,
        condition: Condition,
        reason: String,
        function_error: Option<String>,
    ) -> Result<(), StepError> {
        let mut f = self.failed_batch(id, condition, reason);
        let first = s.buffer.front();
        let last = s.buffer.get(n - 1);
        f.start_sequence_number = first.map(seq_of).unwrap_or_default();
        f.end_sequence_number = last.map(seq_of).unwrap_or_default();
        f.first_arrival = first.map(|r| r.change.approximate_creation_date_time);
        f.last_arrival = last.map(|r| r.change.approximate_creation_date_time);
        f.batch_size = n;
        f.invoke_count = s.invoke_count;
        f.function_error = function_error;
        tracing::error!(mapping = %f.mapping, shard = %f.shard_id, start = %f.start_sequence_number, end = %f.end_sequence_number, condition = f.condition.as_str(), reason = %f.reason, "records sent to the on-failure destination");
        self.deliver(f).await?;
        self.stats
            .records_given_up
            .fetch_add(n as u64, Ordering::Relaxed);
        s.attempts = 0;
        s.invoke_count = 0;
        s.limit = self.config.batch_size;
        s.retry_at = None;
        self.advance(id, s, n).await
    }

    /// Records at the front older than the maximum record age are given up
    /// (Lambda's `RecordAgeExceeded`).
    async fn expire_old(&self, id: &str, s: &mut Shard) -> Result<usize, StepError> {
        let Some(max) = self.config.max_record_age else {
            return Ok(0);
        };
        let cutoff = now_ms() - i64::try_from(self.scaled(max).as_millis()).unwrap_or(i64::MAX / 2);
        let n = s
            .buffer
            .iter()
            .take_while(|r| created_ms(r) < cutoff)
            .count();
        if n == 0 {
            return Ok(0);
        }
        let reason = format!("older than the maximum record age ({max:?})");
        self.give_up(id, s, n, Condition::RecordAgeExceeded, reason, None)
            .await?;
        Ok(n)
    }

    /// Invokes the handler with the next batch, as Lambda does: cancelled
    /// past the function timeout (and when the lease is lost), the partial
    /// batch response moves the checkpoint to the failed record, a failing
    /// batch is split on each error, a record that fails past its retries is
    /// given up.
    async fn invoke(&self, id: &str, s: &mut Shard) -> Result<usize, StepError> {
        let limit = s.buffer.len().min(s.limit).min(self.config.batch_size);
        if limit == 0 {
            return Ok(0);
        }
        if !s.holds() {
            return Err(StepError::Lost);
        }
        let mut event = Event::default();
        event.records = s.buffer.iter().take(limit).cloned().collect();
        let seqs: Vec<String> = event.records.iter().map(seq_of).collect();
        self.stats.invocations.fetch_add(1, Ordering::Relaxed);
        s.invoke_count += 1;
        let timeout = self.config.function_timeout.mul_f64(
            self.config
                .timeout_scale
                .unwrap_or(self.config.time_scale)
                .max(0.0),
        );
        // A panic in the handler is a function error of this shard's batch
        // (counted, bisected, retried, given up), as in Lambda.
        let call = tokio::time::timeout(
            timeout,
            crate::local::invoke::unwound(|| (self.handler)(event)),
        );
        let outcome = match &s.lease {
            Some(lease) => tokio::select! {
                r = call => r,
                () = lease.lost() => {
                    tracing::warn!(mapping = %self.name(), shard = id, "lease lost during an invocation: cancelled, its batch is not checkpointed");
                    return Err(StepError::Lost);
                }
            },
            None => call.await,
        };
        // How many leading records of the batch are done.
        let (done, failure, function_error) = match outcome {
            Err(_) => (
                0,
                Some(format!(
                    "function timed out after {:?}",
                    self.config.function_timeout
                )),
                Some("Unhandled"),
            ),
            Ok(Err(e)) => (0, Some(format!("function error: {e}")), Some("Unhandled")),
            Ok(Ok(resp)) => match resp.batch_item_failures.first() {
                None => (limit, None, None),
                Some(f) => match f.item_identifier.as_deref().filter(|s| !s.is_empty()) {
                    Some(seq) => match seqs.iter().position(|s| s == seq) {
                        Some(pos) => (pos, Some(format!("record {seq} failed")), None),
                        None => (
                            0,
                            Some(format!("unknown itemIdentifier {seq}: whole batch failed")),
                            None,
                        ),
                    },
                    None => (
                        0,
                        Some("empty itemIdentifier: whole batch failed".to_string()),
                        None,
                    ),
                },
            },
        };
        self.advance(id, s, done).await?;
        self.stats
            .records_processed
            .fetch_add(done as u64, Ordering::Relaxed);
        if failure.is_some() {
            self.stats
                .failed_invocations
                .fetch_add(1, Ordering::Relaxed);
        }
        let Some(reason) = failure else {
            s.attempts = 0;
            s.invoke_count = 0;
            s.limit = self.config.batch_size;
            s.retry_at = None;
            return Ok(done);
        };
        if done > 0 {
            // The checkpoint moved: the failed record starts a new batch.
            s.attempts = 0;
            s.invoke_count = 1;
        }
        let remaining = limit - done;
        if self.config.bisect_on_error && remaining > 1 {
            // Bisect on each error; splitting does not count as a retry.
            s.limit = remaining.div_ceil(2);
            tracing::warn!(mapping = %self.name(), shard = id, %reason, next_batch = s.limit, "batch failed: split in two");
            return Ok(done);
        }
        s.attempts += 1;
        tracing::warn!(mapping = %self.name(), shard = id, attempt = s.attempts, %reason, "batch failed");
        if s.attempts > self.config.max_retries {
            let n = remaining.min(s.limit);
            let reason = format!("{reason} (retries exhausted)");
            self.give_up(
                id,
                s,
                n,
                Condition::RetryAttemptsExhausted,
                reason,
                function_error.map(str::to_string),
            )
            .await?;
            return Ok(done + n);
        }
        s.retry_at = Some(Instant::now() + self.scaled(self.config.retry_delay * s.attempts));
        Ok(done)
    }

    /// Records that the first `done` records of a shard's buffer took
    /// effect: the checkpoint moves (durably and fenced, with leases) past
    /// them.
    async fn advance(&self, id: &str, s: &mut Shard, done: usize) -> Result<(), StepError> {
        let Some(last) = s.buffer.drain(..done).next_back() else {
            return Ok(());
        };
        if !s.buffer.is_empty() {
            s.buffered_since = Some(Instant::now());
        }
        let seq = seq_of(&last);
        s.checkpoint = Some(seq.clone());
        if let (Some(leases), Some(lease)) = (&self.leases, &s.lease) {
            let mut token = lease.token.lock().await;
            match leases.checkpoint(id, *token, Some(&seq)).await {
                Ok(r) => lease.renewed(&mut token, r),
                Err(LeaseError::Lost { .. }) => {
                    tracing::warn!(mapping = %self.name(), shard = id, "checkpoint refused: the lease was taken by another owner; the shard stops here");
                    lease.lose();
                    return Err(StepError::Lost);
                }
                Err(e) => return Err(StepError::Other(e.into())),
            }
        }
        Ok(())
    }
}

/// Why a shard's task ended.
enum Exit {
    Stopped,
    Lost,
    Ended,
}

/// A shard's own loop under [`StreamMapping::consume`]: steps until the
/// shard ends, its lease is lost, or `stop` (no new batch after it; the one
/// in flight finishes).
async fn shard_loop<S: StreamsApi>(
    ctx: Arc<Ctx<S>>,
    id: String,
    mut s: Shard,
    mut stop: watch::Receiver<bool>,
) -> (String, Option<Shard>, Exit) {
    loop {
        if *stop.borrow() {
            return (id, Some(s), Exit::Stopped);
        }
        let step = ctx.step(&id, &mut s).await;
        if step.lost {
            return (id, None, Exit::Lost);
        }
        if step.ended {
            return (id, Some(s), Exit::Ended);
        }
        let ready = !s.buffer.is_empty() && step.wait.is_none();
        if ready {
            continue;
        }
        let until = step
            .wait
            .or(s.next_get)
            .unwrap_or_else(|| Instant::now() + ctx.scaled(GET_RECORDS_INTERVAL));
        let lease = s.lease.clone();
        tokio::select! {
            () = tokio::time::sleep_until(until.into()) => {}
            r = stop.changed() => if r.is_err() { return (id, Some(s), Exit::Stopped) },
            () = async { match &lease { Some(l) => l.lost().await, None => std::future::pending().await } } => {
                return (id, None, Exit::Lost);
            }
        }
    }
}

/// Renews every lease in `live` (only those past a third of their time
/// with `only_due`); a lease another owner took is marked lost.
async fn renew_all(
    leases: &LeaseTable,
    live: &Mutex<BTreeMap<String, Arc<Lease>>>,
    only_due: bool,
) {
    let third = leases.lease_ttl() / 3;
    let now = Instant::now();
    let due: Vec<(String, Arc<Lease>)> = live
        .lock()
        .map(|l| {
            l.iter()
                .filter(|(_, lease)| {
                    !only_due || lease.valid_until().saturating_duration_since(now) < 2 * third
                })
                .map(|(id, lease)| (id.clone(), lease.clone()))
                .collect()
        })
        .unwrap_or_default();
    for (id, lease) in due {
        if *lease.lost.borrow() {
            continue;
        }
        let mut token = lease.token.lock().await;
        match leases.renew(&id, *token).await {
            Ok(r) => lease.renewed(&mut token, r),
            Err(LeaseError::Lost { .. }) => {
                tracing::warn!(shard = %id, owner = leases.owner(), "lease lost: another owner took the shard; stopping it");
                lease.lose();
            }
            Err(e) => {
                tracing::warn!(shard = %id, error = %e, "renewing a lease failed; retried (the shard stops if the lease runs out)");
            }
        }
    }
}

/// One stream → one handler.
pub struct StreamMapping<S: StreamsApi = SdkStreams> {
    ctx: Arc<Ctx<S>>,
    /// Shards completed (by us or, with leases, by anyone).
    finished: HashSet<String>,
    /// Shards we read and whose state is here (not in a running task).
    held: BTreeMap<String, Shard>,
    /// The leases we hold (shared with the renewer).
    live: Arc<Mutex<BTreeMap<String, Arc<Lease>>>>,
    /// Shards whose stored checkpoint `--from-start` has already reset.
    reset: HashSet<String>,
    /// Shards this process marked `latest` at the mapping's first start.
    marked_latest: HashSet<String>,
    listing: Option<Vec<ShardInfo>>,
    /// When the last listing was asked for (this process's clock).
    listed_at: Option<Instant>,
    /// The leases as this process saw them move (expiry is judged here).
    observer: Observer,
    next_discovery: Option<Instant>,
    last_balance: Option<Instant>,
    rediscover: bool,
    /// The first coordination is done (a live lease under our own owner
    /// string is taken back only then: a restart in place).
    started: bool,
    pub on_failure: OnFailure,
}

/// Outcome of one polling round.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    /// Records that completed (succeeded or were sent to the on-failure destination).
    pub done: usize,
    /// Records fetched or still waiting to be retried.
    pub pending: usize,
    /// Some shard has nothing to do before this instant (Lambda's polling
    /// rate, a retry delay, a batching window): a round before it is not
    /// proof of quiet.
    pub wait: Option<Instant>,
    /// The shard read least recently: when its last GetRecords that
    /// answered began (`None`: no shard).
    pub least_recent_read: Option<Instant>,
    /// Shards never read yet.
    pub unread: usize,
}

impl Round {
    /// Adds another mapping's round (as one round of both).
    pub fn absorb(&mut self, other: Round) {
        self.done += other.done;
        self.pending += other.pending;
        self.unread += other.unread;
        if let Some(w) = other.wait {
            self.wait = min_instant(self.wait, w);
        }
        if let Some(t) = other.least_recent_read {
            self.least_recent_read = min_instant(self.least_recent_read, t);
        }
    }
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
        let stats = Arc::new(MappingStats::new(&config.name));
        let on_failure = stats.on_failure.clone();
        Self {
            ctx: Arc::new(Ctx {
                config,
                api,
                stream_arn,
                handler,
                leases,
                stats,
            }),
            finished: HashSet::new(),
            held: BTreeMap::new(),
            live: Arc::default(),
            reset: HashSet::new(),
            marked_latest: HashSet::new(),
            listing: None,
            listed_at: None,
            observer: Observer::default(),
            next_discovery: None,
            last_balance: None,
            rediscover: true,
            started: false,
            on_failure,
        }
    }

    pub fn name(&self) -> &str {
        self.ctx.name()
    }

    /// The configuration it runs with (the parity test compares it with
    /// the deployed template).
    pub fn config(&self) -> &MappingConfig {
        &self.ctx.config
    }

    /// The settings, to adjust before the mapping runs.
    ///
    /// # Panics
    /// While [`Self::consume`] runs (its tasks share the settings).
    pub fn config_mut(&mut self) -> &mut MappingConfig {
        &mut Arc::get_mut(&mut self.ctx)
            .expect("settings change only while the mapping is not running")
            .config
    }

    /// The Streams API the mapping reads through.
    pub fn api(&self) -> &S {
        &self.ctx.api
    }

    /// Invocations, iterator ages, records given up: readable while running.
    pub fn stats(&self) -> Arc<MappingStats> {
        self.ctx.stats.clone()
    }

    /// Invocations made so far.
    pub fn invocations(&self) -> u64 {
        self.ctx.stats.invocations()
    }

    /// Shards this mapping is reading now.
    pub fn shards(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.held.keys().cloned().collect();
        if let Ok(live) = self.live.lock() {
            ids.extend(
                live.keys()
                    .filter(|id| !self.held.contains_key(*id))
                    .cloned(),
            );
        }
        ids.sort();
        ids
    }

    /// The last record of `shard` that took effect, as this mapping knows it.
    pub fn checkpoint(&self, shard: &str) -> Option<String> {
        self.held.get(shard).and_then(|s| s.checkpoint.clone())
    }

    fn discovery_due(&self) -> bool {
        self.rediscover || self.next_discovery.is_none_or(|t| Instant::now() >= t)
    }

    /// How often leases are balanced (a Query of the lease partition).
    fn balance_every(&self) -> Duration {
        let ttl = self
            .ctx
            .leases
            .as_ref()
            .map_or(Duration::MAX, |l| l.lease_ttl() / 3);
        ttl.min(self.ctx.scaled(self.ctx.config.discovery_interval))
    }

    fn balance_due(&self) -> bool {
        self.last_balance
            .is_none_or(|t| t.elapsed() >= self.balance_every())
    }

    /// When the coordinator has something to do next.
    fn next_coordination(&self) -> Instant {
        let now = Instant::now();
        let discovery = self.next_discovery.unwrap_or(now);
        let next = match (&self.ctx.leases, self.last_balance) {
            (Some(_), Some(t)) => discovery.min(t + self.balance_every()),
            (Some(_), None) => now,
            (None, _) => discovery,
        };
        // Never a busy loop, whatever the (scaled) intervals.
        next.max(now + Duration::from_millis(10))
    }

    /// Lists the shards (when due) and starts every one whose turn has come;
    /// with leases, takes and steals its share. Failures are logged: the
    /// shards already held go on.
    async fn coordinate(&mut self) {
        let mut fresh = false;
        if self.discovery_due() {
            self.rediscover = false;
            let interval = self.ctx.scaled(self.ctx.config.discovery_interval);
            let listed_from = Instant::now();
            match list_shards(&self.ctx.api, &self.ctx.stream_arn).await {
                Ok(listing) => {
                    self.listing = Some(listing);
                    self.listed_at = Some(listed_from);
                    fresh = true;
                    self.next_discovery = Some(Instant::now() + interval);
                }
                Err(e) => {
                    tracing::warn!(mapping = %self.name(), error = format!("{e:#}"), "DescribeStream failed; the shards held go on, retried shortly");
                    let retry = self.ctx.scaled(Duration::from_secs(1)).min(interval);
                    self.next_discovery = Some(Instant::now() + retry);
                }
            }
        }
        if self.listing.is_none() {
            return;
        }
        if self.ctx.leases.is_some() {
            if fresh || self.balance_due() {
                self.balance(fresh).await;
                self.last_balance = Some(Instant::now());
            }
        } else {
            self.start_unleased();
            self.ctx.stats.ready.store(true, Ordering::Relaxed);
        }
        self.started = true;
        self.note_leases();
    }

    /// Shards whose turn has come: listed, not completed, parent completed
    /// or gone.
    fn eligible(&self) -> Vec<String> {
        let Some(listing) = &self.listing else {
            return Vec::new();
        };
        let ids: HashSet<&str> = listing.iter().map(|s| s.shard_id.as_str()).collect();
        listing
            .iter()
            .filter(|s| !self.finished.contains(&s.shard_id))
            .filter(|s| {
                s.parent_shard_id
                    .as_deref()
                    .is_none_or(|p| !ids.contains(p) || self.finished.contains(p))
            })
            .map(|s| s.shard_id.clone())
            .collect()
    }

    fn parents(&self) -> HashSet<String> {
        self.listing
            .iter()
            .flatten()
            .filter_map(|s| s.parent_shard_id.clone())
            .collect()
    }

    /// Without leases: every shard whose turn has come is ours.
    fn start_unleased(&mut self) {
        let latest = !self.started && self.ctx.config.starting_position == StartingPosition::Latest;
        let parents = self.parents();
        let limit = self.ctx.config.batch_size;
        loop {
            let mut progressed = false;
            for id in self.eligible() {
                if self.held.contains_key(&id) {
                    continue;
                }
                if latest && parents.contains(&id) {
                    // Closed before we started: LATEST skips it.
                    self.finished.insert(id);
                    progressed = true;
                    continue;
                }
                let start = if latest {
                    IteratorPosition::Latest
                } else {
                    IteratorPosition::TrimHorizon
                };
                self.held.insert(id, Shard::new(start, None, limit));
            }
            if !progressed {
                break;
            }
        }
    }

    /// With leases: reads the lease partition (one Query), drops what was
    /// taken from us, reports vanished shards, then takes free or expired
    /// shards and steals from the most loaded owner until we hold our share
    /// (the shards whose turn has come divided by the live owners, rounded up).
    async fn balance(&mut self, fresh: bool) {
        let Some(leases) = self.ctx.leases.clone() else {
            return;
        };
        let mut items = match leases.list().await {
            Ok(items) => items,
            Err(e) => {
                tracing::warn!(mapping = %self.name(), error = format!("{e:#}"), "reading the leases failed; retried at the next tick");
                return;
            }
        };
        if items.is_empty()
            && !self.started
            && self.ctx.config.starting_position == StartingPosition::Latest
        {
            // The mapping's first start: record where LATEST began.
            let at = now_ms();
            let parents = self.parents();
            for s in self.listing.clone().into_iter().flatten() {
                let closed = parents.contains(&s.shard_id);
                if let Err(e) = leases.mark_latest(&s.shard_id, at, closed).await {
                    tracing::warn!(mapping = %self.name(), shard = %s.shard_id, error = %e, "recording the starting position failed");
                    return;
                }
                if !closed {
                    self.marked_latest.insert(s.shard_id.clone());
                }
            }
            items = match leases.list().await {
                Ok(items) => items,
                Err(_) => return,
            };
        }
        self.ctx.stats.ready.store(true, Ordering::Relaxed);
        let me = leases.owner().to_string();
        let now = Instant::now();
        self.observer.observe(&items, now);
        let ttl = leases.lease_ttl();
        let live_ids: HashSet<String> = items
            .iter()
            .filter(|i| self.observer.live(i, ttl, now))
            .map(|i| i.shard_id.clone())
            .collect();
        let by_id: HashMap<String, LeaseItem> =
            items.into_iter().map(|i| (i.shard_id.clone(), i)).collect();
        // Leases taken from us: stop those shards now. The counter only
        // grows: one above our token is someone else's acquisition; one
        // below is our own renewal after the listing was read. A lease
        // with a write in flight is judged at the next balance.
        if let Ok(live) = self.live.lock() {
            for (id, lease) in live.iter() {
                let Ok(token) = lease.token.try_lock() else {
                    continue;
                };
                let ours = by_id
                    .get(id)
                    .is_some_and(|i| i.owner.as_deref() == Some(&me) && i.counter <= *token);
                if !ours {
                    lease.lose();
                }
            }
        }
        self.drop_lost();
        for item in by_id.values() {
            // `--from-start` reads completed shards again (once each).
            let replay = leases.from_start() && !self.reset.contains(&item.shard_id);
            if item.checkpoint.shard_end && !replay {
                self.finished.insert(item.shard_id.clone());
            }
        }
        if fresh {
            self.let_go_of_vanished(&leases).await;
            self.report_vanished(&leases, &by_id, &live_ids).await;
        }
        let eligible = self.eligible();
        let mine: HashSet<String> = self
            .live
            .lock()
            .map(|l| l.keys().cloned().collect())
            .unwrap_or_default();
        // Live owners and what they hold (another process under our owner
        // string counts as a worker, never as a victim).
        let mut counts: BTreeMap<String, Vec<&LeaseItem>> = BTreeMap::new();
        for id in &eligible {
            if let Some(item) = by_id
                .get(id)
                .filter(|i| live_ids.contains(&i.shard_id) && !mine.contains(id))
            {
                let owner = item.owner.clone().unwrap_or_default();
                counts.entry(owner).or_default().push(item);
            }
        }
        let workers = counts.keys().filter(|o| **o != me).count() + 1;
        let target = eligible.len().div_ceil(workers);
        let mut need = target.saturating_sub(mine.len());
        // Free or expired shards first (a restart in place takes back what
        // its owner string held).
        for id in &eligible {
            if need == 0 {
                break;
            }
            if mine.contains(id) {
                continue;
            }
            let item = by_id.get(id);
            let takeable = item.is_none_or(|i| {
                !live_ids.contains(&i.shard_id)
                    || (!self.started && i.owner.as_deref() == Some(&me))
            });
            if takeable && self.take(&leases, id, item.map(|i| i.counter)).await {
                need -= 1;
            }
        }
        if need == 0 {
            return;
        }
        // Steal from the most loaded owner, as KCL does.
        let victim = counts
            .iter()
            .filter(|(o, _)| **o != me)
            .max_by_key(|(o, held)| (held.len(), std::cmp::Reverse((*o).clone())));
        let Some((victim, held)) = victim else {
            return;
        };
        let steal = if held.len() > target {
            need.min(held.len() - target)
        } else if need > 1 && held.len() == target {
            1
        } else {
            0
        };
        let chosen: Vec<(String, i64)> = held
            .iter()
            .take(steal)
            .map(|i| (i.shard_id.clone(), i.counter))
            .collect();
        for (id, counter) in chosen {
            if self.take(&leases, &id, Some(counter)).await {
                tracing::info!(mapping = %self.name(), shard = %id, from = %victim, "lease stolen to balance the shards");
            }
        }
    }

    /// A shard we hold that left the listing can no longer be read: its
    /// lease is released (its task stops), so the next balance reports it.
    async fn let_go_of_vanished(&mut self, leases: &LeaseTable) {
        let listed: HashSet<&str> = self
            .listing
            .iter()
            .flatten()
            .map(|s| s.shard_id.as_str())
            .collect();
        let gone: Vec<(String, Arc<Lease>)> = self
            .live
            .lock()
            .map(|l| {
                l.iter()
                    .filter(|(id, _)| !listed.contains(id.as_str()))
                    .map(|(id, lease)| (id.clone(), lease.clone()))
                    .collect()
            })
            .unwrap_or_default();
        for (id, lease) in gone {
            lease.lose();
            let token = *lease.token.lock().await;
            if let Err(e) = leases.release(&id, token).await {
                tracing::warn!(mapping = %self.name(), shard = %id, error = %e, "releasing a vanished shard failed");
            }
            self.lost(&id);
            self.rediscover = true; // reported at the next listing
        }
    }

    /// Checkpointed shards that no longer exist in the stream: their unread
    /// records are lost. Each is reported once (by the process whose
    /// compare-and-set wins) and closed.
    async fn report_vanished(
        &mut self,
        leases: &LeaseTable,
        by_id: &HashMap<String, LeaseItem>,
        live_ids: &HashSet<String>,
    ) {
        let listed: HashSet<String> = self
            .listing
            .iter()
            .flatten()
            .map(|s| s.shard_id.clone())
            .collect();
        for item in by_id.values() {
            let gone = !item.checkpoint.shard_end
                && !listed.contains(&item.shard_id)
                && !live_ids.contains(&item.shard_id)
                && self
                    .listed_at
                    .is_some_and(|at| self.observer.unchanged_since(item, at))
                && (item.checkpoint.sequence_number.is_some() || item.counter > 0);
            if !gone {
                continue;
            }
            match leases.mark_vanished(&item.shard_id, item.counter).await {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(mapping = %self.name(), shard = %item.shard_id, error = %e, "closing a vanished shard failed; retried");
                    continue;
                }
            }
            let last = item.checkpoint.sequence_number.clone().unwrap_or_default();
            let mut f = self.ctx.failed_batch(
                &item.shard_id,
                Condition::ShardVanished,
                format!(
                    "records after {} are lost; the shard no longer exists in the stream (run `jobstream backfill`)",
                    if last.is_empty() { "its start" } else { &last }
                ),
            );
            f.start_sequence_number = last;
            tracing::error!(mapping = %f.mapping, shard = %f.shard_id, last_checkpoint = %f.start_sequence_number, "a checkpointed shard vanished from the stream: the records after its checkpoint are lost");
            if let Err(e) = self.ctx.deliver(f.clone()).await {
                tracing::error!(mapping = %f.mapping, shard = %f.shard_id, error = format!("{e:#}"), "the on-failure destination failed; the loss is kept in memory and in the status");
                self.ctx.stats.on_failure.push(f);
            }
            self.finished.insert(item.shard_id.clone());
        }
    }

    /// Takes `id` if its counter is still `seen`; true when it is ours.
    async fn take(&mut self, leases: &LeaseTable, id: &str, seen: Option<i64>) -> bool {
        let reset = leases.from_start() && !self.reset.contains(id);
        let taken = match leases.take(id, seen, reset).await {
            Ok(Some(t)) => t,
            Ok(None) => return false,
            Err(e) => {
                tracing::warn!(mapping = %self.name(), shard = id, error = %e, "taking a lease failed");
                return false;
            }
        };
        if reset {
            self.reset.insert(id.to_string());
        }
        let start = if self.marked_latest.remove(id) {
            IteratorPosition::Latest
        } else {
            IteratorPosition::TrimHorizon
        };
        let checkpoint = if reset {
            None
        } else {
            taken.checkpoint.sequence_number.clone()
        };
        let mut shard = Shard::new(start.clone(), checkpoint, self.ctx.config.batch_size);
        if shard.checkpoint.is_none() && start == IteratorPosition::TrimHorizon && !reset {
            shard.skip_before_ms = taken.latest_from_ms;
        }
        let lease = Lease::new(&taken);
        shard.lease = Some(lease.clone());
        tracing::info!(mapping = %self.name(), shard = id, owner = leases.owner(), token = taken.token, checkpoint = ?shard.checkpoint, "lease taken");
        if let Ok(mut live) = self.live.lock() {
            live.insert(id.to_string(), lease);
        }
        self.held.insert(id.to_string(), shard);
        true
    }

    fn note_leases(&self) {
        let held = self.live.lock().map(|l| l.len()).unwrap_or(0);
        self.ctx
            .stats
            .leases_held
            .store(held as u64, Ordering::Relaxed);
    }

    /// Forgets a shard whose lease is gone.
    fn lost(&mut self, id: &str) {
        tracing::warn!(mapping = %self.name(), shard = id, "lease lost: another owner reads this shard now");
        self.held.remove(id);
        if let Ok(mut live) = self.live.lock() {
            live.remove(id);
        }
        self.ctx.stats.set_oldest(id, None);
        self.note_leases();
    }

    /// Drops every held shard whose lease is lost or ran out.
    fn drop_lost(&mut self) {
        let gone: Vec<String> = self
            .live
            .lock()
            .map(|l| {
                l.iter()
                    .filter(|(_, lease)| !lease.holds())
                    .map(|(id, _)| id.clone())
                    .collect()
            })
            .unwrap_or_default();
        for id in gone {
            self.lost(&id);
        }
    }

    /// Completes a shard read to its end: checkpoint `SHARD_END`, lease
    /// released, its children may start.
    async fn complete(&mut self, id: &str) {
        let Some(s) = self.held.get(id) else {
            return;
        };
        if let (Some(leases), Some(lease)) = (&self.ctx.leases, &s.lease) {
            let token = *lease.token.lock().await;
            let finished = leases.finish(id, token, s.checkpoint.as_deref()).await;
            match finished {
                Ok(()) => {}
                Err(LeaseError::Lost { .. }) => {
                    self.lost(id);
                    return;
                }
                Err(e) => {
                    tracing::warn!(mapping = %self.name(), shard = id, error = %e, "completing the shard failed; retried");
                    return;
                }
            }
        }
        tracing::info!(mapping = %self.name(), shard = id, "shard completed");
        self.held.remove(id);
        if let Ok(mut live) = self.live.lock() {
            live.remove(id);
        }
        self.ctx.stats.set_oldest(id, None);
        self.note_leases();
        self.finished.insert(id.to_string());
        self.rediscover = true;
    }

    /// One round: coordination when due, lease renewal, then one step of
    /// every held shard, concurrently (a slow or failing shard does not
    /// stop the others' steps).
    pub async fn poll_once(&mut self) -> anyhow::Result<Round> {
        self.coordinate().await;
        if let Some(leases) = &self.ctx.leases {
            renew_all(leases, &self.live, true).await;
        }
        self.drop_lost();
        let ctx = &self.ctx;
        let steps = futures::future::join_all(
            self.held
                .iter_mut()
                .map(|(id, s)| async move { (id.clone(), ctx.step(id, s).await) }),
        )
        .await;
        let mut round = Round::default();
        for (id, step) in steps {
            round.done += step.done;
            round.pending += step.pending;
            if let Some(w) = step.wait {
                round.wait = min_instant(round.wait, w);
            }
            match step.read_at {
                Some(t) => {
                    round.least_recent_read = min_instant(round.least_recent_read, t);
                }
                None => round.unread += 1,
            }
            if step.lost {
                self.lost(&id);
            } else if step.ended {
                self.complete(&id).await;
            }
        }
        if self.rediscover {
            // A shard completed: its children may start right away (not
            // read yet).
            let before = self.held.len();
            self.coordinate().await;
            round.unread += self.held.len().saturating_sub(before);
        }
        Ok(round)
    }

    /// Lets every lease go (at shutdown), so another process takes the
    /// shards at once. Checkpoints were written batch by batch.
    pub async fn release(&mut self) -> anyhow::Result<()> {
        let live: Vec<(String, Arc<Lease>)> = self
            .live
            .lock()
            .map(|mut l| std::mem::take(&mut *l).into_iter().collect())
            .unwrap_or_default();
        let mut failed = None;
        if let Some(leases) = &self.ctx.leases {
            for (id, lease) in live {
                let token = *lease.token.lock().await;
                match leases.release(&id, token).await {
                    Ok(()) | Err(LeaseError::Lost { .. }) => {}
                    Err(e) => failed = Some(e),
                }
                lease.lose();
            }
        }
        self.held.clear();
        self.next_discovery = None;
        self.last_balance = None;
        self.ctx.stats.ready.store(false, Ordering::Relaxed);
        self.note_leases();
        match failed {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}

impl<S: StreamsApi + 'static> StreamMapping<S> {
    /// Runs the mapping as a long-lived consumer until `stop` turns true: a
    /// task per shard (each polled at Lambda's rate, in order within the
    /// shard), a lease renewer beside them, and this coordinator (discovery,
    /// balancing). On stop: no new batch starts; batches in flight finish
    /// within `grace` or are abandoned without a checkpoint (their effects
    /// are idempotent); the leases are released.
    pub async fn consume(
        &mut self,
        mut stop: watch::Receiver<bool>,
        grace: Duration,
    ) -> anyhow::Result<()> {
        let renewer = self.ctx.leases.clone().map(|leases| {
            let live = self.live.clone();
            let every = leases.lease_ttl() / 3;
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    renew_all(&leases, &live, false).await;
                }
            })
        });
        let mut tasks = tokio::task::JoinSet::new();
        let mut running: HashSet<String> = HashSet::new();
        loop {
            if *stop.borrow() {
                break;
            }
            self.coordinate().await;
            self.drop_lost();
            let idle: Vec<String> = self
                .held
                .keys()
                .filter(|id| !running.contains(*id))
                .cloned()
                .collect();
            for id in idle {
                if let Some(s) = self.held.remove(&id) {
                    running.insert(id.clone());
                    tasks.spawn(shard_loop(self.ctx.clone(), id, s, stop.clone()));
                }
            }
            let tick = self.next_coordination();
            tokio::select! {
                Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                    self.task_ended(joined, &mut running).await;
                }
                r = stop.changed() => if r.is_err() { break },
                () = tokio::time::sleep_until(tick.into()) => {}
            }
        }
        let deadline = tokio::time::Instant::now() + grace;
        while !tasks.is_empty() {
            match tokio::time::timeout_at(deadline, tasks.join_next()).await {
                Ok(Some(joined)) => self.task_ended(joined, &mut running).await,
                Ok(None) => break,
                Err(_) => {
                    tracing::warn!(mapping = %self.name(), shards = tasks.len(), "shutdown grace over: batches in flight abandoned without a checkpoint");
                    tasks.shutdown().await;
                    break;
                }
            }
        }
        if let Some(r) = renewer {
            r.abort();
        }
        self.release().await
    }

    async fn task_ended(
        &mut self,
        joined: Result<(String, Option<Shard>, Exit), tokio::task::JoinError>,
        running: &mut HashSet<String>,
    ) {
        let (id, shard, exit) = match joined {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(mapping = %self.name(), error = %e, "a shard task failed");
                return;
            }
        };
        running.remove(&id);
        match (exit, shard) {
            (Exit::Lost, _) | (_, None) => self.lost(&id),
            (Exit::Ended, Some(s)) => {
                self.held.insert(id.clone(), s);
                self.complete(&id).await;
            }
            (Exit::Stopped, Some(s)) => {
                self.held.insert(id, s);
            }
        }
    }
}

/// Lets every mapping's leases go (call when `run` stops).
pub async fn release_all<S: StreamsApi>(mappings: &mut [StreamMapping<S>]) {
    for m in mappings {
        if let Err(e) = m.release().await {
            tracing::warn!(mapping = %m.name(), error = %e, "releasing leases failed (they expire on their own)");
        }
    }
}

/// Runs mappings until every one has nothing left: no pending records and
/// no new ones. Returns the number of records completed.
pub async fn drain<S: StreamsApi>(mappings: &mut [StreamMapping<S>]) -> anyhow::Result<usize> {
    let mut total = 0;
    let mut quiet = Quiet::default();
    loop {
        let started = Instant::now();
        let mut round = Round::default();
        for m in mappings.iter_mut() {
            round.absorb(m.poll_once().await?);
        }
        total += round.done;
        if quiet.drained(started, &round, false) {
            return Ok(total);
        }
        if round.done == 0 {
            // Nothing could happen before then (polling rate, retry, window).
            if let Some(w) = round.wait {
                tokio::time::sleep_until(w.into()).await;
            }
        }
    }
}

/// Whether polling rounds prove the streams drained: two rounds in a row
/// with nothing handled, buffered or retried, once every shard has been
/// read since the quiet began and found nothing. (Shards read out of phase
/// put some read off in every round: waiting for a round that reads every
/// shard, as this once did, may never end.)
#[derive(Debug, Default)]
pub struct Quiet {
    rounds: usize,
    since: Option<Instant>,
}

impl Quiet {
    /// Notes a round that began at `started` (`busy`: other work, e.g. a
    /// queue, was active); true once drained.
    pub fn drained(&mut self, started: Instant, round: &Round, busy: bool) -> bool {
        if busy || round.done > 0 || round.pending > 0 {
            self.rounds = 0;
            self.since = None;
            return false;
        }
        let since = *self.since.get_or_insert(started);
        self.rounds += 1;
        let all_read = round.unread == 0 && round.least_recent_read.is_none_or(|t| t >= since);
        self.rounds >= 2 && all_read
    }
}

/// One polling round of every stream mapping; true if there was work.
pub async fn poll_streams<S: StreamsApi>(mappings: &mut [StreamMapping<S>]) -> bool {
    let mut busy = false;
    for m in mappings {
        match m.poll_once().await {
            Ok(r) => busy |= r.done > 0 || r.pending > 0,
            Err(e) => tracing::warn!(mapping = %m.name(), error = %e, "stream poll failed"),
        }
    }
    busy
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
        m.api().write("s", 30);
        m.api().trim_below("s", 25);
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
    async fn drain_ends_when_shards_are_read_out_of_phase() {
        // Two mappings whose shards are read half a polling interval apart:
        // every round then finds one of them waiting for its next read, so
        // no round is without a wait (as 250 shards on a loaded machine).
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (a, b) = (FakeStreams::new(100), FakeStreams::new(100));
        a.add_shard("a", None);
        b.add_shard("b", None);
        let mut ms = [mapping(a, &seen), mapping(b, &seen)];
        ms[0].poll_once().await.unwrap();
        tokio::time::sleep(GET_RECORDS_INTERVAL / 2).await;
        ms[1].poll_once().await.unwrap();
        ms[0].api().write("a", 2);
        ms[1].api().write("b", 3);
        let drained = tokio::time::timeout(Duration::from_secs(20), drain(&mut ms)).await;
        assert_eq!(drained.expect("drain never ended").unwrap(), 5);
        assert_eq!(seen_u64(&seen).len(), 5);
    }

    #[tokio::test]
    async fn a_closed_shard_completes_and_its_successor_is_found_without_waiting_for_the_timer() {
        let api = FakeStreams::new(100);
        api.add_shard("s1", None);
        api.write("s1", 3);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut m = mapping(api, &seen);
        m.config_mut().discovery_interval = Duration::from_secs(3600);
        drain(std::slice::from_mut(&mut m)).await.unwrap();
        assert_eq!(m.shards(), vec!["s1".to_string()]);
        // Rollover: s1 closes, s2 (its child) takes the writes.
        m.api().close("s1");
        m.api().add_shard("s2", Some("s1"));
        m.api().write("s2", 4);
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
        m.config_mut().discovery_interval = Duration::from_millis(300);
        for _ in 0..5 {
            m.poll_once().await.unwrap();
        }
        assert_eq!(*m.api().describe_calls.lock().unwrap(), 1);
        // A shard appearing beside it (no parent) is picked up at the next tick.
        m.api().add_shard("s9", None);
        m.api().write("s9", 2);
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
        m.config_mut().starting_position = StartingPosition::Latest;
        drain(std::slice::from_mut(&mut m)).await.unwrap();
        assert!(seen_u64(&seen).is_empty());
        let new = m.api().write("open", 2);
        m.api().close("open");
        m.api().add_shard("next", Some("open"));
        let next = m.api().write("next", 3);
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

    /// A destination that fails (an unwritable file) never blocks the
    /// shard: the batch is kept in memory, counted as undelivered (status
    /// line, exit code, metric), and the records after it are processed.
    #[tokio::test]
    async fn a_failing_on_failure_destination_never_stops_the_shard_and_is_counted() {
        let api = FakeStreams::new(100);
        api.add_shard("s1", None);
        api.write("s1", 5);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let poison = seq_string(2);
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
        let mut config = MappingConfig::new("test");
        config.retry_delay = Duration::ZERO;
        config.max_retries = 1;
        config.on_failure.file = Some(
            std::env::temp_dir()
                .join(format!("no-such-dir-{}", uuid::Uuid::new_v4()))
                .join("failures.jsonl"),
        );
        let mut m = StreamMapping::with_api(config, api, "arn".into(), handler);
        let done =
            tokio::time::timeout(Duration::from_secs(30), drain(std::slice::from_mut(&mut m)))
                .await
                .expect("the shard is not held by the failing destination")
                .unwrap();
        assert_eq!(done, 5);
        assert_eq!(seen_u64(&seen), vec![1, 3, 4, 5]);
        assert_eq!(m.on_failure.undelivered(), 1);
        let failed = m.on_failure.take();
        assert_eq!(failed.len(), 1, "kept in memory, reported at exit");
        assert_eq!(failed[0].start_sequence_number, seq_string(2));
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

#[cfg(test)]
#[path = "esm_tests.rs"]
mod consumer_tests;

#[cfg(test)]
#[path = "esm_ops_tests.rs"]
mod ops_tests;
