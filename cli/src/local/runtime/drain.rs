//! Draining a runtime: the stream mappings polled until quiet while the
//! queues' pollers empty their queues (or, for comparisons, one after the
//! other), as tests, demos and benchmarks wait for every effect.

use super::*;
use crate::local::esm::{Quiet, Round};

impl Runtime {
    /// Starts every queue's pollers (their own tasks, as many per queue as
    /// its concurrency); they stop when the returned sender sends `true` or
    /// is dropped.
    pub(super) fn start_queue_pollers(&self, polling: Polling) -> QueuePollers {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let tasks = self
            .queues
            .iter()
            .flat_map(|q| q.spawn_pollers(polling, &stopped))
            .collect();
        QueuePollers { stop, tasks }
    }

    /// Processes the stream and the queues until all are empty (failed
    /// messages included: they come back after the visibility timeout and
    /// end in their DLQ). Gives up after `limit`. The queues are consumed by
    /// their pollers (concurrently, as Lambda's SQS mapping) while this task
    /// polls the stream and watches the queues' depth; the pollers stop
    /// before it returns.
    pub async fn drain_within(&mut self, limit: Duration) -> anyhow::Result<usize> {
        if self.drain_in_phases {
            return self.drain_in_phases_within(limit).await;
        }
        let pollers = self.start_queue_pollers(Polling::Short);
        let deleted_before = self.messages_deleted();
        let streamed = self.drain_streams_and_watch_queues(limit, true).await;
        pollers.stop_by(None).await;
        Ok(streamed? + (self.messages_deleted() - deleted_before))
    }

    /// [`RuntimeOptions::drain_in_phases`]: the streams until quiet (no
    /// queue polled), then the queues until empty, until neither has work.
    async fn drain_in_phases_within(&mut self, limit: Duration) -> anyhow::Result<usize> {
        let started = Instant::now();
        let mut total = 0;
        loop {
            let left = limit.saturating_sub(started.elapsed());
            let streamed = self.drain_streams_and_watch_queues(left, false).await?;
            let deleted_before = self.messages_deleted();
            let pollers = self.start_queue_pollers(Polling::Short);
            let emptied = self.wait_for_empty_queues(started, limit).await;
            pollers.stop_by(None).await;
            emptied?;
            let jobs = self.messages_deleted() - deleted_before;
            total += streamed + jobs;
            if streamed == 0 && jobs == 0 {
                return Ok(total);
            }
        }
    }

    /// Until every queue has no message visible or in flight.
    async fn wait_for_empty_queues(&self, started: Instant, limit: Duration) -> anyhow::Result<()> {
        while self.queues_active().await? {
            if started.elapsed() >= limit {
                anyhow::bail!(
                    "not drained within {limit:?}: {}",
                    self.left_over(&[]).await
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// Whether a queue has a message visible or in flight. Empty (nothing
    /// visible, nothing in flight) means every handler that ran has
    /// finished: its writes precede its deletes, so a stream poll after
    /// this sees them.
    async fn queues_active(&self) -> anyhow::Result<bool> {
        for q in &self.queues {
            let (visible, in_flight) = q.depth().await?;
            if visible > 0 || in_flight > 0 {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Messages the queue mappings have completed (invocations are counted
    /// per batch, so this counts handler successes through the deletes).
    fn messages_deleted(&self) -> usize {
        use std::sync::atomic::Ordering;
        self.queues
            .iter()
            .map(|q| q.stats().deleted.load(Ordering::Relaxed) as usize)
            .sum()
    }

    /// Polls the stream mappings (and, with `watch_queues`, watches the
    /// queues' depth) until quiet: rounds with nothing handled, buffered,
    /// retried or queued, once every shard has been read since the quiet
    /// began ([`Quiet`]). Mappings read out of phase (one's next read due
    /// while the other's is not) never have a round without a wait; a quiet
    /// that waited for one kept the demo at a step for minutes after its
    /// work was done. A drain not settled says every
    /// [`STILL_DRAINING_EVERY`] what it waits for.
    async fn drain_streams_and_watch_queues(
        &mut self,
        limit: Duration,
        watch_queues: bool,
    ) -> anyhow::Result<usize> {
        let started = Instant::now();
        let mut total = 0;
        let mut quiet = Quiet::default();
        // Each stream mapping's records still fetched or waiting for a
        // retry after the last round: what a drain that gives up names.
        let mut pending: Vec<(String, usize)> = Vec::new();
        let mut next_report = started + STILL_DRAINING_EVERY;
        loop {
            if started.elapsed() >= limit {
                anyhow::bail!(
                    "not drained within {limit:?}: {}",
                    self.left_over(&pending).await
                );
            }
            if Instant::now() >= next_report {
                next_report = Instant::now() + STILL_DRAINING_EVERY;
                let left = self.left_over(&pending).await;
                tracing::info!(waited = ?started.elapsed(), "not settled yet: {left}");
            }
            let round_started = Instant::now();
            // Every mapping polls concurrently, as Lambda runs them: one
            // invocation per shard per mapping at a time. The queues are
            // consumed by their own pollers meanwhile.
            let streams =
                futures::future::join_all(self.mappings.iter_mut().map(|m| m.poll_once())).await;
            let mut round = Round::default();
            pending.clear();
            for (m, r) in self.mappings.iter().zip(streams) {
                let r = r?;
                pending.push((m.name().to_string(), r.pending));
                round.absorb(r);
            }
            total += round.done;
            let queued = watch_queues && self.queues_active().await?;
            if quiet.drained(round_started, &round, queued) {
                return Ok(total);
            }
            if queued {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            if let Some(w) = round.wait.filter(|_| round.done == 0) {
                // Nothing could happen before then (Lambda's polling rate,
                // a retry delay, a batching window).
                tokio::time::sleep_until(w.into()).await;
            }
        }
    }

    /// What a drain that gives up still had: each stream mapping's records
    /// fetched or waiting for a retry (`pending`, from its last round), each
    /// queue's messages visible and in flight (a job failing again and
    /// again comes back after each visibility timeout until its DLQ).
    async fn left_over(&self, pending: &[(String, usize)]) -> String {
        let mut left: Vec<String> = pending
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| format!("{name}: {n} record(s) fetched or waiting for a retry"))
            .collect();
        for q in &self.queues {
            if let Ok((visible, in_flight)) = q.depth().await {
                if visible + in_flight > 0 {
                    left.push(format!(
                        "queue {}: {visible} message(s) visible, {in_flight} in flight",
                        q.name
                    ));
                }
            }
        }
        if left.is_empty() {
            "the processors' own writes kept coming".to_string()
        } else {
            left.join("; ")
        }
    }

    /// Processes everything on the stream and the queues, including what
    /// the processors' own writes put there, until nothing is left.
    pub async fn drain(&mut self) -> anyhow::Result<usize> {
        self.drain_within(Duration::from_secs(300)).await
    }
}

/// How often a drain that has not settled says what it still waits for.
const STILL_DRAINING_EVERY: Duration = Duration::from_secs(5);

/// The queue pollers of a drain or a run.
pub(super) struct QueuePollers {
    pub(super) stop: tokio::sync::watch::Sender<bool>,
    pub(super) tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl QueuePollers {
    /// Tells every poller to stop and waits for them: an invocation in
    /// flight finishes with its deletes, by `deadline` if one is given
    /// (`run`'s shutdown grace); past it, the pollers still busy are
    /// aborted, and their messages come back after the visibility timeout
    /// (to be processed again, idempotently, or reach the DLQ).
    pub(super) async fn stop_by(self, deadline: Option<tokio::time::Instant>) {
        let _ = self.stop.send(true);
        for mut t in self.tasks {
            let joined = match deadline {
                Some(d) => match tokio::time::timeout_at(d, &mut t).await {
                    Ok(joined) => joined,
                    Err(_) => {
                        tracing::warn!("shutdown grace over: a queue invocation in flight abandoned; its messages return after the visibility timeout");
                        t.abort();
                        // Returns once the task is dropped (the invocation
                        // with it).
                        let _ = t.await;
                        continue;
                    }
                },
                None => t.await,
            };
            if let Err(e) = joined {
                tracing::error!(error = %e, "a queue poller panicked");
            }
        }
    }
}
