//! How a mapping shares a stream's shards: discovery, lease taking and
//! balancing across processes, shards that vanish, end or are lost.

use super::*;

/// The first pause after a failed DescribeStream; it doubles at each
/// failure in a row up to [`DESCRIBE_RETRY_CAP`] (unscaled).
pub const DESCRIBE_RETRY_MIN: Duration = Duration::from_secs(1);
/// The longest pause before jitter; each pause gets up to as much again
/// at random (so a fleet of processes spreads its calls): at most twice
/// this, 30 s.
pub const DESCRIBE_RETRY_CAP: Duration = Duration::from_secs(15);

/// DescribeStream failing: the calls failed in a row, and the backoff of
/// the next one (reset by a success).
#[derive(Debug)]
pub(super) struct DescribeFailing {
    pub(super) failures: u32,
    backoff: backon::ExponentialBackoff,
}

impl DescribeFailing {
    pub(super) fn new() -> Self {
        Self {
            failures: 0,
            backoff: describe_backoff(),
        }
    }

    /// The pause before the next call (unscaled).
    pub(super) fn pause(&mut self) -> Duration {
        self.backoff.next().unwrap_or(DESCRIBE_RETRY_CAP * 2)
    }
}

/// Jittered exponential backoff from [`DESCRIBE_RETRY_MIN`] to
/// [`DESCRIBE_RETRY_CAP`], never ending.
pub(super) fn describe_backoff() -> backon::ExponentialBackoff {
    use backon::BackoffBuilder as _;
    backon::ExponentialBuilder::default()
        .with_min_delay(DESCRIBE_RETRY_MIN)
        .with_max_delay(DESCRIBE_RETRY_CAP)
        .without_max_times()
        .with_jitter()
        .build()
}

impl<S: StreamsApi> StreamMapping<S> {
    /// Due on the timer, or at once when asked for (a shard completed or
    /// vanished), unless DescribeStream is failing: then only after the
    /// pause of its backoff.
    pub(super) fn discovery_due(&self) -> bool {
        (self.rediscover && self.describe.is_none())
            || self.next_discovery.is_none_or(|t| Instant::now() >= t)
    }

    /// How often leases are balanced (a Query of the lease partition).
    pub(super) fn balance_every(&self) -> Duration {
        let ttl = self
            .ctx
            .leases
            .as_ref()
            .map_or(Duration::MAX, |l| l.lease_ttl() / 3);
        ttl.min(self.ctx.scaled(self.ctx.config.discovery_interval))
    }

    pub(super) fn balance_due(&self) -> bool {
        self.last_balance
            .is_none_or(|t| t.elapsed() >= self.balance_every())
    }

    /// When the coordinator has something to do next.
    pub(super) fn next_coordination(&self) -> Instant {
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
    pub(super) async fn coordinate(&mut self) {
        let mut fresh = false;
        if self.discovery_due() {
            self.rediscover = false;
            let interval = self.ctx.scaled(self.ctx.config.discovery_interval);
            let listed_from = Instant::now();
            match list_shards(&self.ctx.api, &self.ctx.stream_arn).await {
                Ok(listing) => {
                    self.ctx.stats.reach.succeeded();
                    if let Some(failing) = self.describe.take() {
                        tracing::info!(mapping = %self.name(), failed_calls = failing.failures, "DescribeStream succeeds again");
                    }
                    self.listing = Some(listing);
                    self.listed_at = Some(listed_from);
                    fresh = true;
                    self.next_discovery = Some(Instant::now() + interval);
                }
                Err(e) => {
                    self.ctx.stats.reach.failed(format!("{e:#}"));
                    let failing = self.describe.get_or_insert_with(DescribeFailing::new);
                    failing.failures += 1;
                    let (failures, pause) = (failing.failures, failing.pause());
                    self.ctx
                        .stats
                        .describe_failures
                        .fetch_add(1, Ordering::Relaxed);
                    let pause = self.ctx.scaled(pause);
                    tracing::warn!(mapping = %self.name(), error = format!("{e:#}"), failed_calls = failures, retry_in = ?pause, "DescribeStream failed; the shards held go on, retried after a growing pause");
                    self.next_discovery = Some(Instant::now() + pause);
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
                self.note_shard_states();
            }
        } else {
            self.start_unleased();
            self.ctx.stats.ready.store(true, Ordering::Relaxed);
        }
        self.started = true;
    }

    /// Shards whose turn has come: listed, not completed, parent completed
    /// or gone.
    pub(super) fn eligible(&self) -> Vec<String> {
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

    pub(super) fn parents(&self) -> HashSet<String> {
        self.listing
            .iter()
            .flatten()
            .filter_map(|s| s.parent_shard_id.clone())
            .collect()
    }

    /// Without leases: every shard whose turn has come is ours.
    pub(super) fn start_unleased(&mut self) {
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
    pub(super) async fn balance(&mut self, fresh: bool) {
        let Some(leases) = self.ctx.leases.clone() else {
            return;
        };
        let mut items = match leases.list().await {
            Ok(items) => {
                self.ctx.stats.reach.succeeded();
                items
            }
            Err(e) => {
                self.ctx.stats.reach.failed(e.to_string());
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
        self.lease_view = Some(LeaseView {
            by_id: by_id.clone(),
            live: live_ids.clone(),
            at: now,
        });
        // Leases taken from us: stop those shards now. The item keeps the
        // id of the acquisition every write under our lease was made
        // under; another acquisition (even under our owner string) changed
        // it. (A counter above our token may be our own write whose
        // answer was lost: not a loss.)
        if let Ok(live) = self.live.lock() {
            for (id, lease) in live.iter() {
                let item = by_id.get(id);
                let ours = item.is_some_and(|i| {
                    i.owner.as_deref() == Some(&me)
                        && i.acquisition.as_deref() == Some(lease.acquisition.as_str())
                });
                if !ours {
                    let by = item.and_then(|i| i.owner.clone());
                    lease.lose(Loss::Taken { by });
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
        self.note_replays_waiting(&leases, &counts, &me);
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
    pub(super) async fn let_go_of_vanished(&mut self, leases: &LeaseTable) {
        let listed: HashSet<&str> = self
            .listing
            .iter()
            .flatten()
            .map(|s| s.shard_id.as_str())
            .collect();
        let gone = leases_where(&self.live, |id, _| !listed.contains(id));
        for (id, lease) in gone {
            lease.lose(Loss::Vanished);
            let token = *lease.token.lock().await;
            if let Err(e) = leases.release(&id, &lease.held(token)).await {
                tracing::warn!(mapping = %self.name(), shard = %id, error = %e, "releasing a vanished shard failed");
            }
            self.lost(&id);
            self.rediscover = true; // reported at the next listing
        }
    }

    /// Checkpointed shards that no longer exist in the stream: their unread
    /// records are lost. Each is reported once (by the process whose
    /// compare-and-set wins) and closed.
    pub(super) async fn report_vanished(
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

    /// With `--from-start`: the shards another live process holds, whose
    /// replay here waits until this process takes them, said once each
    /// (the operator may be waiting for a replay that, with one shard and
    /// the other process running, never comes) and kept for the status;
    /// a shard taken and reset here leaves the list.
    fn note_replays_waiting(
        &self,
        leases: &LeaseTable,
        held_elsewhere: &BTreeMap<String, Vec<&LeaseItem>>,
        me: &str,
    ) {
        if !leases.from_start() {
            return;
        }
        let Ok(mut waiting) = self.ctx.stats.replays_waiting.lock() else {
            return;
        };
        waiting.retain(|id| !self.reset.contains(id));
        for (owner, items) in held_elsewhere.iter().filter(|(o, _)| o.as_str() != me) {
            for item in items.iter().filter(|i| !self.reset.contains(&i.shard_id)) {
                if waiting.insert(item.shard_id.clone()) {
                    tracing::warn!(
                        mapping = %self.name(),
                        shard = %item.shard_id,
                        owner = %owner,
                        "--from-start: another process holds this shard; its replay starts only when this process takes the lease (stop the other consumers for a replay now)"
                    );
                }
            }
        }
    }

    /// Takes `id` if its counter is still `seen`; true when it is ours.
    pub(super) async fn take(&mut self, leases: &LeaseTable, id: &str, seen: Option<i64>) -> bool {
        let reset = leases.from_start() && !self.reset.contains(id);
        let taken = match leases.take(id, seen, reset).await {
            Ok(Some(t)) => t,
            Ok(None) => {
                self.ctx.stats.reach.succeeded();
                return false;
            }
            Err(e) => {
                self.ctx.stats.reach.failed(e.to_string());
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
        self.ctx.stats.reach.succeeded();
        let lease = Lease::new(&taken);
        shard.lease = Some(lease.clone());
        tracing::info!(mapping = %self.name(), shard = id, owner = leases.owner(), token = taken.token, checkpoint = ?shard.checkpoint, "lease taken");
        if let Ok(mut live) = self.live.lock() {
            live.insert(id.to_string(), lease);
        }
        self.held.insert(id.to_string(), shard);
        true
    }

    /// The shards whose turn has come, as the last lease read showed
    /// them (`jobstream_shards`, judged at each scrape against the leases
    /// held then and the age of this read: [`MappingStats::snapshot`]): a
    /// shard nobody holds has no iterator age anywhere, so this is what
    /// sees it.
    pub(super) fn note_shard_states(&self) {
        let (Some(view), Some(leases)) = (&self.lease_view, &self.ctx.leases) else {
            return;
        };
        let me = leases.owner();
        let half = leases.lease_ttl() / 2;
        let shards = self
            .eligible()
            .into_iter()
            .map(|id| {
                let judged = match view
                    .by_id
                    .get(&id)
                    .filter(|i| view.live.contains(&i.shard_id))
                {
                    Some(item) if item.owner.as_deref() == Some(me) => Judged::Ours,
                    Some(item) => {
                        let silent = self.observer.unchanged_for(item, view.at);
                        if silent.is_some_and(|d| d > half) {
                            Judged::Stale
                        } else {
                            Judged::Elsewhere
                        }
                    }
                    None => Judged::Unheld,
                };
                (id, judged)
            })
            .collect();
        if let Ok(mut s) = self.ctx.stats.shard_view.lock() {
            *s = Some(ShardView {
                at: view.at,
                shards,
            });
        }
    }

    /// Forgets a shard whose lease is gone, saying why as far as this
    /// process knows ([`Loss`]).
    pub(super) fn lost(&mut self, id: &str) {
        let loss = self
            .live
            .lock()
            .ok()
            .and_then(|l| l.get(id).and_then(|lease| lease.loss()));
        match loss {
            Some(why) => {
                if let Some(reason) = why.reason() {
                    self.ctx.stats.count_loss(reason);
                }
                tracing::warn!(mapping = %self.name(), shard = id, "{why}");
            }
            None => tracing::warn!(mapping = %self.name(), shard = id, "shard stopped"),
        }
        self.forget(id);
    }

    /// Drops a shard this process no longer reads (its lease, its age).
    fn forget(&mut self, id: &str) {
        self.held.remove(id);
        if let Ok(mut live) = self.live.lock() {
            live.remove(id);
        }
        self.ctx.stats.set_oldest(id, None);
    }

    /// Drops every held shard whose lease is lost or ran out.
    pub(super) fn drop_lost(&mut self) {
        for (id, _) in leases_where(&self.live, |_, lease| !lease.holds()) {
            self.lost(&id);
        }
    }

    /// Completes a shard read to its end: checkpoint `SHARD_END`, lease
    /// released, its children may start.
    pub(super) async fn complete(&mut self, id: &str) {
        let Some(s) = self.held.get(id) else {
            return;
        };
        if let (Some(leases), Some(lease)) = (&self.ctx.leases, &s.lease) {
            let token = *lease.token.lock().await;
            let finished = leases
                .finish(id, &lease.held(token), s.checkpoint.as_deref())
                .await;
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
        self.forget(id);
        self.finished.insert(id.to_string());
        self.rediscover = true;
    }
}
