//! A local DynamoDB Streams event source mapping: discovers a table's stream
//! shards, reads them as Lambda does, invokes the same handler code the
//! Lambdas run, and honours what the deployed mapping honours (SPEC §6.1):
//! batch size, batching window and the 6 MB payload, the partial batch
//! response (checkpoint at the failed record, retry from there), bisect on
//! each function error, retries counted as Lambda counts them, the function
//! timeout (an invocation past it is cancelled and counts as failed), the
//! maximum record age, and an on-failure destination for records given up.
//! Every duration slept or timed is multiplied by
//! [`MappingConfig::time_scale`].
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
//!
//! Files: `config.rs` (the mapping's settings, on-failure records, its
//! counters), `payload.rs` (Lambda's 6 MB payload: a record's size in the
//! event, where a batch ends), `shard.rs` (one shard: lease, buffer, one
//! step of reading and invoking), `coordination.rs` (discovery, leases and balancing across
//! processes), this file (the mapping and the ways to drive it).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
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
    now_ms, CheckpointConfig, Held, LeaseError, LeaseItem, LeaseTable, Observer, Renewed, Taken,
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

mod config;
mod coordination;
mod health;
mod held;
mod payload;
mod shard;
pub use config::*;
use coordination::DescribeFailing;
pub use health::Snapshot;
use health::*;
use held::*;
use payload::*;
use shard::*;

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
    /// The last lease read: what `jobstream_shards` is judged from.
    lease_view: Option<LeaseView>,
    next_discovery: Option<Instant>,
    /// DescribeStream is failing: retried with a growing pause.
    describe: Option<DescribeFailing>,
    last_balance: Option<Instant>,
    rediscover: bool,
    /// The first coordination is done (a live lease under our own owner
    /// string is taken back only then: a restart in place).
    started: bool,
    pub on_failure: OnFailure,
}

/// The lease partition as last read, and which leases were live then.
struct LeaseView {
    by_id: HashMap<String, LeaseItem>,
    live: HashSet<String>,
    at: Instant,
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
        let stats = Arc::new(MappingStats {
            lease_ttl: config.checkpoints.as_ref().map(|c| c.lease_ttl),
            ..MappingStats::new(&config.name)
        });
        let on_failure = stats.on_failure.clone();
        let live = stats.live.clone();
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
            live,
            reset: HashSet::new(),
            marked_latest: HashSet::new(),
            listing: None,
            listed_at: None,
            observer: Observer::default(),
            lease_view: None,
            next_discovery: None,
            describe: None,
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

    /// Fixes where LATEST starts, now: the mapping lists its shards and
    /// takes each shard's LATEST iterator at once, as Lambda's mapping
    /// starts where the stream stood when it was created (lazily, a record
    /// written before the first poll was lost). Without leases only (with
    /// leases the first owner records where LATEST began in the lease
    /// table); a failure leaves the iterators to the first poll.
    pub async fn pin_latest(&mut self) {
        if self.ctx.leases.is_some()
            || self.started
            || self.ctx.config.starting_position != StartingPosition::Latest
        {
            return;
        }
        self.coordinate().await;
        for (id, s) in self.held.iter_mut() {
            if s.iterator.is_some() || s.start != IteratorPosition::Latest {
                continue;
            }
            match self
                .ctx
                .api
                .shard_iterator(&self.ctx.stream_arn, id, &IteratorPosition::Latest)
                .await
            {
                Ok(Some(it)) => s.iterator = Some(it),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(mapping = %self.ctx.name(), shard = %id, error = format!("{e:#}"), "taking the LATEST iterator failed; taken at the first poll");
                }
            }
        }
    }

    /// One round: coordination when due, lease renewal, then one step of
    /// every held shard, concurrently (a slow or failing shard does not
    /// stop the others' steps).
    pub async fn poll_once(&mut self) -> anyhow::Result<Round> {
        self.coordinate().await;
        if let Some(leases) = &self.ctx.leases {
            renew_all(leases, &self.live, true, &self.ctx.stats.reach).await;
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
            round.absorb(Round {
                done: step.done,
                pending: step.pending,
                wait: step.wait,
                least_recent_read: step.read_at,
                unread: usize::from(step.read_at.is_none()),
            });
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
                match leases.release(&id, &lease.held(token)).await {
                    Ok(()) | Err(LeaseError::Lost { .. }) => {}
                    Err(e) => failed = Some(e),
                }
                lease.lose(Loss::Released);
            }
        }
        self.held.clear();
        self.next_discovery = None;
        self.last_balance = None;
        self.ctx.stats.ready.store(false, Ordering::Relaxed);
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
    /// balancing). On stop the whole stop is bounded by `grace`, whatever
    /// DynamoDB does: coordination in flight is dropped (no lease is taken
    /// after the stop began); no new batch starts; batches in flight (and
    /// their checkpoints) finish within the grace less a share kept for the
    /// release, or are abandoned without a checkpoint (their effects are
    /// idempotent); the leases are released within what is left but the
    /// exit's share, and a lease whose release does not finish runs out by
    /// its TTL ([`crate::local::stop::StopPlan`]).
    pub async fn consume(
        &mut self,
        mut stop: watch::Receiver<bool>,
        grace: Duration,
    ) -> anyhow::Result<()> {
        let renewer = self.ctx.leases.clone().map(|leases| {
            let live = self.live.clone();
            let stats = self.ctx.stats.clone();
            let every = leases.lease_ttl() / 3;
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    renew_all(&leases, &live, false, &stats.reach).await;
                }
            })
        });
        let mut tasks = tokio::task::JoinSet::new();
        let mut running: HashSet<String> = HashSet::new();
        loop {
            if *stop.borrow() {
                break;
            }
            // A coordination hung on DynamoDB never delays the stop, nor
            // takes a lease after it (dropped with its calls in flight).
            let mut stopped = stop.clone();
            tokio::select! {
                () = self.coordinate() => {}
                _ = stopped.wait_for(|s| *s) => break,
            }
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
        let plan = crate::local::stop::StopPlan::starting(tokio::time::Instant::now(), grace);
        let (batches_by, release_by) = (plan.work_by, plan.release_by);
        while !tasks.is_empty() {
            match tokio::time::timeout_at(batches_by, tasks.join_next()).await {
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
        match tokio::time::timeout_at(release_by, self.release()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(mapping = %self.name(), error = format!("{e:#}"), "releasing leases failed: they run out by their TTL");
            }
            Err(_) => {
                tracing::warn!(mapping = %self.name(), "shutdown grace over: leases not released run out by their TTL");
                self.abandon_leases();
            }
        }
        Ok(())
    }

    /// At a stop whose release did not finish: this process forgets every
    /// shard and lease (the leases run out by their TTL).
    fn abandon_leases(&mut self) {
        let live: Vec<Arc<Lease>> = self
            .live
            .lock()
            .map(|mut l| std::mem::take(&mut *l).into_values().collect())
            .unwrap_or_default();
        for lease in live {
            lease.lose(Loss::Released);
        }
        self.held.clear();
        self.ctx.stats.ready.store(false, Ordering::Relaxed);
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
mod test_support;

#[cfg(test)]
mod unit_tests;

#[cfg(test)]
mod consumer_tests;

#[cfg(test)]
mod ops_tests;

#[cfg(test)]
mod payload_tests;

#[cfg(test)]
mod lease_tests;

#[cfg(test)]
mod partition_tests;
