//! One shard of a mapping: its buffer and checkpoint, and one
//! step of reading and invoking (shared by `poll_once` and `consume`).

use super::*;

/// A shard this mapping is reading.
pub(super) struct Shard {
    /// `None` while a fresh iterator is needed (at start, after an error).
    pub(super) iterator: Option<String>,
    /// GetRecords returned no next iterator: the shard is closed and read.
    pub(super) ended: bool,
    /// Where a fresh iterator starts when nothing was read yet.
    pub(super) start: IteratorPosition,
    /// The last record taken into the buffer.
    pub(super) read_to: Option<String>,
    /// The last record that took effect.
    pub(super) checkpoint: Option<String>,
    /// Records read and not yet done with, each with its size in the
    /// event.
    pub(super) buffer: VecDeque<Buffered>,
    /// Failed invocations of the records at the front (splits not counted).
    pub(super) attempts: u32,
    /// Invocations that included the record at the front.
    pub(super) invoke_count: u32,
    /// The current batch size (a bisected batch is smaller).
    pub(super) limit: usize,
    pub(super) lease: Option<Arc<Lease>>,
    /// Not before: the next GetRecords (Lambda's rate), the next retry.
    pub(super) next_get: Option<Instant>,
    /// When the last GetRecords that answered began (`drain` waits until
    /// every shard has been read since it went quiet).
    pub(super) read_at: Option<Instant>,
    pub(super) retry_at: Option<Instant>,
    /// When the first buffered record arrived (batching window).
    pub(super) buffered_since: Option<Instant>,
    /// `--starting-position latest` began here (epoch ms): older records
    /// were not ours to process.
    pub(super) skip_before_ms: Option<i64>,
    /// A trim was met: report the records between this checkpoint and the
    /// first record still there.
    pub(super) trimmed_after: Option<Option<String>>,
    /// Reads (GetShardIterator, GetRecords) failed in a row: the next one
    /// waits [`read_retry`] of it.
    pub(super) read_failures: u32,
    /// When the last read that answered began, or the shard was taken
    /// (epoch ms): while reads fail, records written since may wait unread.
    pub(super) answered_ms: i64,
}

/// The longest pause between failing reads of one shard.
pub const READ_RETRY_MAX: Duration = Duration::from_secs(10);

/// The pause before the next read of a shard whose last `failures` reads
/// failed: Lambda's polling interval, doubled at each failure up to
/// [`READ_RETRY_MAX`] (unscaled).
pub(super) fn read_retry(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    GET_RECORDS_INTERVAL
        .saturating_mul(1 << doublings)
        .min(READ_RETRY_MAX)
}

impl Shard {
    pub(super) fn new(start: IteratorPosition, checkpoint: Option<String>, limit: usize) -> Self {
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
            read_failures: 0,
            answered_ms: now_ms(),
        }
    }

    pub(super) fn resume_position(&self) -> IteratorPosition {
        match &self.read_to {
            Some(seq) => IteratorPosition::AfterSequenceNumber(seq.clone()),
            None => self.start.clone(),
        }
    }

    pub(super) fn holds(&self) -> bool {
        self.lease.as_ref().is_none_or(|l| l.holds())
    }

    /// How many records the next batch takes: up to `limit`, within
    /// Lambda's payload (at least one, if any is buffered).
    pub(super) fn batch_len(&self, limit: usize) -> usize {
        records_within_payload(self.buffer.iter().take(limit).map(|b| b.json_bytes))
    }

    /// The record at the front is done with: no attempt, no invocation,
    /// no retry pending, full batches again.
    fn reset_retries(&mut self, batch_size: usize) {
        self.attempts = 0;
        self.invoke_count = 0;
        self.limit = batch_size;
        self.retry_at = None;
    }
}

pub(super) fn seq_of(r: &EventRecord) -> String {
    r.change.sequence_number.clone().unwrap_or_default()
}

pub(super) fn created_ms(r: &EventRecord) -> i64 {
    r.change.approximate_creation_date_time.timestamp_millis()
}

pub(super) fn min_instant(a: Option<Instant>, b: Instant) -> Option<Instant> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// What one step of a shard did.
#[derive(Debug, Default)]
pub(super) struct Step {
    pub(super) done: usize,
    pub(super) pending: usize,
    /// The lease is gone: drop the shard.
    pub(super) lost: bool,
    /// Read to its end and every record done: complete it.
    pub(super) ended: bool,
    /// Nothing more to do before this instant (rate, retry, window).
    pub(super) wait: Option<Instant>,
    /// When the last GetRecords of the shard that answered began (`None`:
    /// never read).
    pub(super) read_at: Option<Instant>,
}

#[derive(Debug, thiserror::Error)]
pub(super) enum StepError {
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
pub(super) struct Ctx<S> {
    pub(super) config: MappingConfig,
    pub(super) api: S,
    pub(super) stream_arn: String,
    pub(super) handler: Handler,
    pub(super) leases: Option<LeaseTable>,
    pub(super) stats: Arc<MappingStats>,
}

impl<S: StreamsApi> Ctx<S> {
    pub(super) fn name(&self) -> &str {
        &self.config.name
    }

    pub(super) fn scaled(&self, d: Duration) -> Duration {
        self.config.scaled(d)
    }

    /// One step of a shard: read if due, give up records past their age,
    /// invoke if a batch is due. Errors are logged and isolated: the shard
    /// retries at its next step, the others go on.
    pub(super) async fn step(&self, id: &str, s: &mut Shard) -> Step {
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
                    let began_ms = now_ms();
                    self.note_reading(id, s);
                    match self.fetch(id, s).await {
                        Ok(()) => {
                            self.stats.reach.succeeded();
                            s.read_at = Some(now);
                            s.answered_ms = began_ms;
                            if s.read_failures > 0 {
                                tracing::info!(mapping = %self.name(), shard = id, failed_reads = s.read_failures, "reading the shard succeeds again");
                                s.read_failures = 0;
                            }
                        }
                        Err(e) => {
                            self.stats.reach.failed(format!("{e:#}"));
                            s.iterator = None;
                            s.read_failures += 1;
                            self.stats.read_failures.fetch_add(1, Ordering::Relaxed);
                            let pause = read_retry(s.read_failures);
                            s.next_get = Some(now + self.scaled(pause));
                            tracing::warn!(mapping = %self.name(), shard = id, error = format!("{e:#}"), failed_reads = s.read_failures, retry_in = ?pause, "reading the shard failed");
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
    /// checkpointed; while its reads fail and none is buffered, the last
    /// read that answered (what was written since may wait unread: the age
    /// grows through an outage instead of saying "caught up").
    /// A shard whose lease is no longer held has no age here (its
    /// holder, if any, reports one).
    pub(super) fn note_oldest(&self, id: &str, s: &Shard) {
        if !s.lease.as_ref().is_none_or(|l| l.held_at(Instant::now())) {
            self.stats.set_oldest(id, None);
            return;
        }
        let oldest = s.buffer.front().map(|b| created_ms(&b.record));
        let unread = (s.read_failures > 0).then_some(s.answered_ms);
        self.stats.set_oldest(id, Some(oldest.or(unread)));
    }

    /// A read is about to be sent: until it answers, what was written
    /// since the last read that answered may wait unread, so the age runs
    /// from then (a read the engine never answers shows as an age that
    /// grows, not as caught up).
    pub(super) fn note_reading(&self, id: &str, s: &Shard) {
        if !s.lease.as_ref().is_none_or(|l| l.held_at(Instant::now())) {
            self.stats.set_oldest(id, None);
            return;
        }
        let oldest = s.buffer.front().map(|b| created_ms(&b.record));
        let since = oldest.map_or(s.answered_ms, |o| o.min(s.answered_ms));
        self.stats.set_oldest(id, Some(Some(since)));
    }

    pub(super) async fn process(
        &self,
        id: &str,
        s: &mut Shard,
        out: &mut Step,
    ) -> Result<(), StepError> {
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
        // Batching window: wait for a full batch (by count or by Lambda's
        // payload) up to the window's end.
        let full = s.buffer.len() >= self.config.batch_size
            || s.batch_len(self.config.batch_size) < s.buffer.len();
        if !s.ended && !full && s.attempts == 0 {
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
    pub(super) async fn fetch(&self, id: &str, s: &mut Shard) -> anyhow::Result<()> {
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
            Buffered::new(r)
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
    pub(super) async fn deliver(&self, f: FailedBatch) -> anyhow::Result<()> {
        match crate::local::on_failure::deliver(&self.config.on_failure, &f).await {
            Ok(()) => self.stats.on_failure.push(f),
            Err(e) => {
                tracing::error!(mapping = %f.mapping, shard = %f.shard_id, start = %f.start_sequence_number, end = %f.end_sequence_number, condition = f.condition.as_str(), error = format!("{e:#}"), "the on-failure destination failed: the batch is kept in memory and listed at exit; processing goes on");
                self.stats.on_failure.push_undelivered(f);
            }
        }
        Ok(())
    }

    pub(super) fn failed_batch(
        &self,
        id: &str,
        condition: Condition,
        reason: String,
    ) -> FailedBatch {
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
    pub(super) async fn report_trimmed(
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
    pub(super) async fn give_up(
        &self,
        id: &str,
        s: &mut Shard,
        n: usize,
        condition: Condition,
        reason: String,
        function_error: Option<String>,
    ) -> Result<(), StepError> {
        let mut f = self.failed_batch(id, condition, reason);
        let first = s.buffer.front().map(|b| &b.record);
        let last = s.buffer.get(n - 1).map(|b| &b.record);
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
        s.reset_retries(self.config.batch_size);
        self.advance(id, s, n).await
    }

    /// Records at the front older than the maximum record age are given up
    /// (Lambda's `RecordAgeExceeded`).
    pub(super) async fn expire_old(&self, id: &str, s: &mut Shard) -> Result<usize, StepError> {
        let Some(max) = self.config.max_record_age else {
            return Ok(0);
        };
        let cutoff = now_ms() - i64::try_from(self.scaled(max).as_millis()).unwrap_or(i64::MAX / 2);
        let n = s
            .buffer
            .iter()
            .take_while(|b| created_ms(&b.record) < cutoff)
            .count();
        if n == 0 {
            return Ok(0);
        }
        let reason = format!("older than the maximum record age ({max:?})");
        self.give_up(id, s, n, Condition::RecordAgeExceeded, reason, None)
            .await?;
        Ok(n)
    }

    /// Invokes the handler with the next batch, as Lambda does: up to the
    /// batch size and within the 6 MB payload, cancelled past the function
    /// timeout (and when the lease is lost), the partial batch response
    /// moves the checkpoint to the failed record, a failing batch is split
    /// on each error, a record that fails past its retries is given up.
    pub(super) async fn invoke(&self, id: &str, s: &mut Shard) -> Result<usize, StepError> {
        let limit = s.batch_len(s.limit.min(self.config.batch_size));
        if limit == 0 {
            return Ok(0);
        }
        if !s.holds() {
            return Err(StepError::Lost);
        }
        let mut event = Event::default();
        event.records = s
            .buffer
            .iter()
            .take(limit)
            .map(|b| b.record.clone())
            .collect();
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
                    let why = lease.loss().and_then(|l| l.reason());
                    tracing::warn!(mapping = %self.name(), shard = id, why, "lease lost during an invocation: cancelled, its batch is not checkpointed");
                    return Err(StepError::Lost);
                }
            },
            None => call.await,
        };
        if !s.holds() {
            // Lost as the invocation ended: nothing after it under the
            // lease (no checkpoint, split or retry).
            tracing::warn!(mapping = %self.name(), shard = id, "lease lost as an invocation ended: its batch is not checkpointed");
            return Err(StepError::Lost);
        }
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
            s.reset_retries(self.config.batch_size);
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
    pub(super) async fn advance(
        &self,
        id: &str,
        s: &mut Shard,
        done: usize,
    ) -> Result<(), StepError> {
        let Some(last) = s.buffer.drain(..done).next_back() else {
            return Ok(());
        };
        if !s.buffer.is_empty() {
            s.buffered_since = Some(Instant::now());
        }
        let seq = seq_of(&last.record);
        s.checkpoint = Some(seq.clone());
        if let (Some(leases), Some(lease)) = (&self.leases, &s.lease) {
            let mut token = lease.token.lock().await;
            match leases.checkpoint(id, &lease.held(*token), Some(&seq)).await {
                Ok(r) => {
                    self.stats.reach.succeeded();
                    lease.renewed(&mut token, r);
                }
                Err(LeaseError::Lost { .. }) => {
                    self.stats.reach.succeeded();
                    tracing::warn!(mapping = %self.name(), shard = id, "checkpoint refused: the ledger shows another acquisition of the lease; the shard stops here");
                    lease.lose(Loss::Taken { by: None });
                    return Err(StepError::Lost);
                }
                Err(e) if !lease.holds() => {
                    self.stats.reach.failed(e.to_string());
                    tracing::warn!(mapping = %self.name(), shard = id, error = %e, "checkpoint failed and the lease ran out; the shard stops here");
                    return Err(StepError::Lost);
                }
                Err(e) => {
                    self.stats.reach.failed(e.to_string());
                    return Err(StepError::Other(e.into()));
                }
            }
        }
        Ok(())
    }
}

/// Why a shard's task ended.
pub(super) enum Exit {
    Stopped,
    Lost,
    Ended,
}

/// A shard's own loop under [`StreamMapping::consume`]: steps until the
/// shard ends, its lease is lost, or `stop` (no new batch after it; the one
/// in flight finishes).
pub(super) async fn shard_loop<S: StreamsApi>(
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
