//! A mapping's settings (the event source mapping's), what it gives up
//! on, and its counters.

use super::*;

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
    pub(super) fn push_undelivered(&self, f: FailedBatch) {
        self.2.fetch_add(1, Ordering::Relaxed);
        self.push(f);
    }
    pub(super) fn push(&self, f: FailedBatch) {
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
    pub(super) invocations: AtomicU64,
    /// Invocations that failed as a whole or in part (error, panic,
    /// timeout, a failed record in the partial batch response).
    pub failed_invocations: AtomicU64,
    /// Records whose batch took effect.
    pub records_processed: AtomicU64,
    /// Records sent to the on-failure destinations (retries exhausted, too
    /// old).
    pub records_given_up: AtomicU64,
    /// Shard reads (GetShardIterator, GetRecords) that failed; each is
    /// logged and retried after a pause doubling up to 10 s.
    pub read_failures: AtomicU64,
    /// DescribeStream calls (shard discovery) that failed; each is logged
    /// and retried after a jittered pause doubling from 1 s (at most 30 s).
    pub describe_failures: AtomicU64,
    /// The leases this process holds (shared with the mapping's renewer
    /// and coordinator): what `jobstream_leases_held`, `held` and the
    /// iterator ages are read from, at the scrape ([`Self::snapshot`]).
    pub(super) live: Arc<Mutex<BTreeMap<String, Arc<Lease>>>>,
    /// The lease duration, with leases (`None`: every shard is read here).
    pub(super) lease_ttl: Option<Duration>,
    /// Leases this process stopped holding (not at a stop), by reason
    /// ([`Self::leases_lost`]).
    pub(super) lease_losses: Mutex<BTreeMap<&'static str, u64>>,
    /// With leases: the shards whose turn has come as the last lease read
    /// showed them ([`Self::shards_by_state`] judges them at the scrape).
    pub(super) shard_view: Mutex<Option<ShardView>>,
    /// When a DynamoDB or DynamoDB Streams call of the mapping last
    /// succeeded, and the last failure.
    pub(super) reach: Reach,
    /// The mapping listed its shards and (with leases) read the lease
    /// table at least once, and has not stopped: it holds leases or
    /// stands by.
    pub ready: std::sync::atomic::AtomicBool,
    /// Per shard held: creation time (epoch ms) of the oldest record not
    /// yet checkpointed; `None` when caught up.
    pub(super) oldest: Mutex<BTreeMap<String, Option<i64>>>,
    pub on_failure: OnFailure,
    /// With `--from-start`: the shards whose replay waits for another
    /// process's lease (held and renewed elsewhere, not yet taken here),
    /// each said once in the log when first seen (spec15 #12: the replay
    /// waited without a word).
    pub(super) replays_waiting: Mutex<BTreeSet<String>>,
}

/// The shards whose turn has come (listed, not completed, parent done),
/// by what this process knows of their leases.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ShardStates {
    /// Held by this process.
    pub held: u64,
    /// Held by another process that renews it.
    pub elsewhere: u64,
    /// Held by another process that has not renewed it for half a lease
    /// duration (as observed here): its holder is likely gone; the lease
    /// is taken over once a whole lease duration passed.
    pub stale: u64,
    /// Released, expired or never taken: nobody reads it.
    pub unheld: u64,
}

impl MappingStats {
    /// With leases, the shards by state (`held`, `elsewhere`, `stale`,
    /// `unheld`), judged now ([`Self::snapshot`]); empty without leases
    /// (every shard is read here) or before the first lease read.
    pub fn shards_by_state(&self) -> Vec<(&'static str, u64)> {
        self.snapshot()
            .shards
            .map_or_else(Vec::new, |s| s.by_state())
    }

    /// Leases lost, by reason: `taken` (the ledger shows another
    /// acquisition), `ran_out` (no renewal or checkpoint succeeded for a
    /// lease duration: this process's ledger writes are failing),
    /// `vanished` (the shard left the stream).
    pub fn leases_lost(&self) -> Vec<(&'static str, u64)> {
        let counted = self
            .lease_losses
            .lock()
            .map(|l| l.clone())
            .unwrap_or_default();
        LOSS_REASONS
            .iter()
            .map(|r| (*r, counted.get(r).copied().unwrap_or(0)))
            .collect()
    }

    pub(super) fn count_loss(&self, reason: &'static str) {
        if let Ok(mut l) = self.lease_losses.lock() {
            *l.entry(reason).or_default() += 1;
        }
    }

    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            reach: Reach::new(),
            ..Self::default()
        }
    }
    pub fn invocations(&self) -> u64 {
        self.invocations.load(Ordering::Relaxed)
    }
    /// With `--from-start`: the shards whose replay waits for another
    /// process to let their lease go.
    pub fn replays_waiting(&self) -> Vec<String> {
        self.replays_waiting
            .lock()
            .map(|w| w.iter().cloned().collect())
            .unwrap_or_default()
    }
    /// Iterator age per shard held (milliseconds): the age, now, of the
    /// oldest record not yet checkpointed, 0 when caught up. It keeps
    /// rising while a shard retries a failing record (as Lambda's
    /// `IteratorAge` does), while a batch is in flight, and while the
    /// shard cannot be read or a read is not answered (from the last read
    /// that answered). Only the shards whose lease this process holds now.
    pub fn iterator_ages(&self) -> BTreeMap<String, i64> {
        self.snapshot().iterator_ages
    }
    /// The largest iterator age of the mapping's shards (ms).
    pub fn iterator_age(&self) -> i64 {
        self.iterator_ages().values().copied().max().unwrap_or(0)
    }
    /// `Some(created)`: the shard's oldest record not yet checkpointed
    /// (`None`: caught up); `None`: the shard is no longer held.
    pub(super) fn set_oldest(&self, shard: &str, oldest: Option<Option<i64>>) {
        if let Ok(mut a) = self.oldest.lock() {
            match oldest {
                Some(v) => a.insert(shard.to_string(), v),
                None => a.remove(shard),
            };
        }
    }
}

impl MappingStats {
    /// The mapping's EMF lines for one status tick (`run --emit-metrics`):
    /// `IteratorAge` of the shards this process holds (none held: no
    /// datapoint, as Lambda reports none without invocations, so a shard
    /// nobody reads is never a standby's 0), `OnFailureUndelivered`, and
    /// with leases `ShardsUnread`: the shards this process sees nobody
    /// reading (`stale` or `unheld` in `jobstream_shards`; none before its
    /// first lease read).
    pub fn emf_lines(&self, timestamp_ms: i64) -> Vec<String> {
        let mut lines = Vec::new();
        let now = self.snapshot();
        if let Some(age) = now.iterator_ages.values().copied().max() {
            lines.push(iterator_age_emf(&self.name, age, timestamp_ms));
        }
        let undelivered = self.on_failure.undelivered();
        lines.push(crate::local::on_failure::undelivered_emf(
            &self.name,
            undelivered,
            timestamp_ms,
        ));
        if let Some(s) = now.shards {
            let unread = s.stale + s.unheld;
            lines.push(emf_line(
                &self.name,
                "ShardsUnread",
                "Count",
                unread,
                timestamp_ms,
            ));
        }
        lines
    }
}

/// `IteratorAge` (milliseconds) of a mapping as one CloudWatch Embedded
/// Metric Format line, named as Lambda's metric.
pub fn iterator_age_emf(mapping: &str, age_ms: i64, timestamp_ms: i64) -> String {
    emf_line(mapping, "IteratorAge", "Milliseconds", age_ms, timestamp_ms)
}

/// One metric `name` of a mapping as one CloudWatch Embedded Metric Format
/// line (namespace `jobstream`, dimension `Processor`).
pub fn emf_line(
    mapping: &str,
    name: &str,
    unit: &str,
    value: impl Into<serde_json::Value>,
    timestamp_ms: i64,
) -> String {
    let mut line = serde_json::json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": "jobstream",
                "Dimensions": [["Processor"]],
                "Metrics": [{"Name": name, "Unit": unit}],
            }]
        },
        "Processor": mapping,
    });
    line[name] = value.into();
    line.to_string()
}
