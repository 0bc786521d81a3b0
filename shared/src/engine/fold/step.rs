//! Folding a batch: records grouped per aggregate in stream order, each
//! folded into its state, commits staged and flushed.

use super::*;

/// The candidate parts of `state` ([`CANDIDATE`]), by their names.
fn candidates_of(state: &FoldState) -> BTreeMap<String, Item> {
    state
        .parts
        .iter()
        .filter(|(name, _)| name.starts_with(CANDIDATE))
        .map(|(name, v)| (name.clone(), v.clone()))
        .collect()
}

/// Partitions queried at once when a batch's states are loaded.
const PREFETCH: usize = 8;

impl<R: FoldRules + ?Sized> FoldProcessor<R> {
    /// Folds one change of `agg` into its state (and the transaction).
    /// `rest`: the batch's records of `agg` from this one on, in order.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn step(
        &self,
        agg: &str,
        index: usize,
        change: &Change,
        rest: &[&Change],
        metrics: &mut BatchMetrics,
        states: &mut HashMap<String, Loaded>,
        tx: &mut Tx,
    ) -> Result<(), BatchFailure> {
        let at = |error| BatchFailure { index, error };
        if !states.contains_key(agg) {
            let l = self.load(agg).await.map_err(at)?;
            states.insert(agg.to_string(), l);
        }
        let (is_root, root_mirror) = match self.rules.sequence_mirror(agg) {
            Some((key, attr)) if key.iter().all(|(k, v)| change.keys.get(k) == Some(v)) => (
                true,
                change
                    .new
                    .as_ref()
                    .map(|img| img.opt_i64(attr).ok().flatten()),
            ),
            _ => (false, None),
        };
        let l = states.get_mut(agg).expect("loaded above");
        l.base_seq.get_or_insert(l.state.seq);
        l.touched = Some(index);
        if l.current_last()
            .is_some_and(|last| change.sequence_number <= *last)
        {
            metrics.incr(names::DUPLICATE);
            tracing::info!(processor = self.name, event_id = %change.event_id, key = %change.key_display(), "already folded; skipping");
            return Ok(());
        }
        l.advanced = true;
        if is_root {
            l.mirror_seen = root_mirror;
        }
        if let Some(record) = self.rules.adoption_record(change) {
            return self
                .reach_adoption(agg, index, change, rest, record, states, tx)
                .await;
        }
        let starts = self.rules.starts_aggregate(change);
        l.created |= starts;
        let removes = self.rules.removes_root(change);
        // The root's creation before a pending adoption's position: the
        // stream holds this history from here, so the adoption (a backfill
        // or a member's change ahead of the consumer) is dropped and the
        // history starts at the creation (user9's FINDINGS #15). A
        // creation that is bad input leaves the adoption as it is.
        let premature = l.adopt.is_some()
            && starts
            && self.rules.absorb(&mut FoldState::default(), change).is_ok();
        let dropped = if premature {
            Some(self.drop_adoption(agg, index, states, tx).await?)
        } else {
            None
        };
        let l = states.get_mut(agg).expect("loaded above");
        // A member written just before its root: the root's creation is
        // still ahead in this batch, so the root the table holds now is not
        // one that predates the stream: nothing to adopt.
        // (Asked only of an aggregate's first record: no scan per record.)
        let unseen = l.version == 0 && !l.dirty;
        let created_later = unseen
            && !starts
            && !removes
            && rest.iter().skip(1).any(|c| self.rules.starts_aggregate(c));
        if premature || (unseen && (starts || removes || created_later)) {
            // First seen creating or deleting its root, or before its
            // creation: the state is the items the table held just before
            // this change (children that predate the stream; the
            // incarnation a deletion removes).
            let (mut state, touched) = match dropped {
                // The dropped adoption's state (its read, the records
                // folded since) rolled back to the creation: the parts
                // those records wrote are known there (user10's finding
                // 2: lines put before their order were left out of its
                // creation's entry for good).
                Some(seen) => {
                    let mut state = FoldState {
                        parts: std::mem::take(&mut l.state.parts),
                        ..FoldState::default()
                    };
                    let mut touched = self.roll_back(&mut state, rest);
                    touched.extend(seen);
                    (state, touched)
                }
                None => self.state_before(agg, rest).await.map_err(at)?,
            };
            if starts {
                // A creation starts the history afresh.
                state.seq = 0;
            }
            // Parts read that no record of this batch placed predate the
            // stream, or were written after the batch's last record (their
            // own records to come): candidates, confirmed later, never
            // members of an incarnation the batch's deletion removes
            // (user14's crm: an activity put after its deal came back was
            // cascaded with the deal's earlier incarnation).
            let pending: Vec<String> = state
                .parts
                .keys()
                .filter(|p| !touched.contains(*p))
                .cloned()
                .collect();
            for name in &pending {
                if let Some(v) = state.parts.remove(name) {
                    state.parts.insert(format!("{CANDIDATE}{name}"), v);
                }
            }
            if !pending.is_empty() {
                l.unconfirmed = Some(1);
                // The parts read are written now under the HEAD's epoch
                // (they count once the HEAD commits), so the commit
                // stays small however many there are.
                self.put_parts(agg, &l.epoch, &state.parts)
                    .await
                    .map_err(at)?;
                l.persisted_parts = state.parts.clone();
            }
            l.state = state;
        } else if unseen {
            let mut adopted = self.adopt_now(agg).await.map_err(at)?;
            adopted.touched = l.touched;
            adopted.mirror_seen = l.mirror_seen;
            adopted.advanced = l.advanced;
            adopted.base_seq = l.base_seq;
            adopted.created = l.created;
            if adopted.dirty {
                adopted.first_pending = Some(index);
                tx.aggregates.push(agg.to_string());
            }
            *l = adopted;
        }
        if l.unconfirmed.is_some() {
            // A record after the read: the root showing the mirror a
            // commit wrote after it (its deletion, on the old image). Not
            // the mirror a dropped adoption wrote: written before the
            // read, it is no sign of a record after it. A deletion alone
            // is none: the read may have followed it (the batch that read
            // holds it), and a candidate whose record is still to come was
            // written after it.
            let shown = if removes {
                change
                    .old
                    .as_ref()
                    .and_then(|img| Some(img.opt_i64(self.rules.sequence_mirror(agg)?.1)))
                    .map(|h| h.ok().flatten())
            } else {
                root_mirror
            };
            let fence = is_root
                && matches!(shown, Some(Some(h)) if l.unconfirmed.is_some_and(|f| h >= f as i64)
                    && l.stale_mirror.is_none_or(|m| h != m as i64));
            self.confirm(agg, index, change, fence && !removes, fence, states, tx)
                .await?;
        }
        let Some(l) = states.get_mut(agg) else {
            return Ok(());
        };
        if l.adopt.is_some() && removes {
            // The adopted incarnation is deleted before the adoption's
            // position (a re-creation may follow): cascade it as it stood
            // here, its adoption entry included; the history starts over.
            // Parts the adoption read that no record folded since placed
            // may have been written after this deletion (their records
            // still ahead of the adoption's position): candidates carried
            // across it, settled by their records or, at the adoption's
            // own record, deleted as the cascade would have.
            let mut before = l.state.clone();
            let touched = self.roll_back(&mut before, rest);
            let adoption = l.adopt.as_ref().map(|(_, id)| id.clone());
            let unknown: BTreeMap<String, Item> = before
                .parts
                .iter()
                .filter(|(name, _)| {
                    !touched.contains(*name)
                        && !l.seen.contains(*name)
                        && !name.starts_with(CANDIDATE)
                        && !name.starts_with(PENDING)
                })
                .map(|(name, v)| (format!("{CANDIDATE}{name}"), v.clone()))
                .collect();
            before
                .parts
                .retain(|name, _| !unknown.contains_key(&format!("{CANDIDATE}{name}")));
            let deferred = self
                .cascade_removed(agg, index, &before, rest, states, tx)
                .await?;
            let output = match self.rules.fold(agg, &mut before, change) {
                Ok(o) => o,
                Err(e) => {
                    log_bad_input(self.name, &change.event_id, &e, metrics, &self.metrics);
                    return Ok(());
                }
            };
            before.parts.extend(deferred.iter().map(pending_part));
            let carried = !unknown.is_empty();
            before.parts.extend(unknown);
            self.stage_commit(agg, index, change, before, output.entries, true, states, tx)
                .await?;
            if let Some(l) = states.get_mut(agg).filter(|_| carried) {
                l.unconfirmed = Some(1);
                // Members that stay are no leftovers: confirmed as usual.
                l.left = self.rules.cascades_members();
                l.stale_adoption = adoption;
            }
            return Ok(());
        }
        if l.adopt.is_some() {
            // Before the adoption's position: part of the adoption entry.
            let mut next = l.state.clone();
            if let Err(e) = self.rules.absorb(&mut next, change) {
                log_bad_input(self.name, &change.event_id, &e, metrics, &self.metrics);
                return self
                    .reject_root(agg, index, change, is_root, states, tx)
                    .await;
            }
            // (Not the root: the creation itself places it.)
            let news = !is_root && self.note_seen(l, change);
            return self
                .stage_commit(agg, index, change, next, Vec::new(), news, states, tx)
                .await;
        }
        let settled = self
            .settle_pending(agg, index, change, starts, rest, states, tx)
            .await?;
        let Some(l) = states.get(agg) else {
            return Ok(());
        };
        let mut deferred = Vec::new();
        // Candidates left at a deletion are no members of the incarnation
        // it removes as far as the fold knows: left in the table, and
        // still candidates (of the next incarnation, if any) after it.
        let candidates = if removes {
            candidates_of(&l.state)
        } else {
            BTreeMap::new()
        };
        if removes && !l.state.deleted {
            let mut removed = l.state.clone();
            removed
                .parts
                .retain(|name, _| !candidates.contains_key(name));
            deferred = self
                .cascade_removed(agg, index, &removed, rest, states, tx)
                .await?;
        }
        let l = &states[agg];
        let mut next = l.state.clone();
        let output = match self.rules.fold(agg, &mut next, change) {
            Ok(o) => o,
            Err(e) => {
                log_bad_input(self.name, &change.event_id, &e, metrics, &self.metrics);
                if settled {
                    let next = states[agg].state.clone();
                    self.stage_commit(agg, index, change, next, Vec::new(), true, states, tx)
                        .await?;
                }
                return self
                    .reject_root(agg, index, change, is_root, states, tx)
                    .await;
            }
        };
        if !candidates.is_empty() {
            if let Some(l) = states.get_mut(agg) {
                // Members that stay are no leftovers: confirmed as usual.
                l.left |= self.rules.cascades_members();
            }
            tracing::info!(processor = self.name, aggregate = %agg, items = candidates.len(), "items read with the partition not known to be the removed incarnation's: left to their own records");
        }
        let force = settled || !deferred.is_empty() || !candidates.is_empty();
        next.parts.extend(deferred.iter().map(pending_part));
        next.parts.extend(candidates);
        for (metric, notice) in &output.notices {
            metrics.incr(metric);
            tracing::warn!(processor = self.name, event_id = %change.event_id, kind = notice.kind(), reason = %notice, "entry written without part of its content");
        }
        self.stage_commit(agg, index, change, next, output.entries, force, states, tx)
            .await
    }

    /// Runs the cascade of the incarnation in `state`, whose root goes at
    /// `rest[0]` (its deletion, or the adoption's position where the root
    /// is gone), after committing what is pending. Every path that deletes
    /// members because the root went comes here: the members a later
    /// record of the batch writes are left to it ([`Self::cascade_of`]),
    /// and unless the batch holds the root's re-creation, the first
    /// transaction checks that the root is still absent: when it is back
    /// (the fold is behind the writer, and a member's records to come tell
    /// whether the writer put it again since) the members' deletes are
    /// returned, to wait in the state as pending parts ([`PENDING`]).
    pub(super) async fn cascade_removed(
        &self,
        agg: &str,
        index: usize,
        state: &FoldState,
        rest: &[&Change],
        states: &mut HashMap<String, Loaded>,
        tx: &mut Tx,
    ) -> Result<Vec<CascadeDelete>, BatchFailure> {
        let cascade = self.cascade_of(agg, state, rest);
        let root = (!rest.iter().skip(1).any(|c| self.rules.starts_aggregate(c)))
            .then(|| self.rules.sequence_mirror(agg).map(|(key, _)| key))
            .flatten();
        self.flush(tx, states).await?;
        let done = self
            .cascade(agg, states, &cascade, root.as_ref())
            .await
            .map_err(|error| BatchFailure { index, error })?;
        tracing::info!(processor = self.name, aggregate = %agg, deleted = done.deleted, deferred = done.deferred.len(), "cascade delete");
        Ok(done.deferred)
    }

    /// The cascade the rules ask for when the root of the incarnation in
    /// `state` goes, less the members a later record of the batch (`rest`
    /// after this one) writes or removes: the writer decided their fate
    /// after the deletion (a member deleted and put again with the content
    /// the removed incarnation had is the writer's latest, not a leftover).
    fn cascade_of(&self, agg: &str, state: &FoldState, rest: &[&Change]) -> Cascade {
        let mut cascade = self.rules.cascade(agg, state);
        let later = written_by(&*self.rules, rest.get(1..).unwrap_or_default());
        cascade
            .deletes
            .retain(|d| d.unchanged.is_none() || !later.contains(&ledger::item_id(&d.key)));
        cascade
    }

    /// Settles the member deletes an earlier deletion of `agg`'s root
    /// deferred ([`PENDING`]): one this record writes or removes (its
    /// writer's data, [`FoldRules::writes_nothing`]) is the writer's
    /// (dropped); at the root's re-creation (`starts`), the rest
    /// are deleted (guarded by the content they had) unless a later record
    /// of the batch writes or removes them. Returns whether the state
    /// changed (removed from it, to be committed).
    #[allow(clippy::too_many_arguments)]
    async fn settle_pending(
        &self,
        agg: &str,
        index: usize,
        change: &Change,
        starts: bool,
        rest: &[&Change],
        states: &mut HashMap<String, Loaded>,
        tx: &mut Tx,
    ) -> Result<bool, BatchFailure> {
        let Some(l) = states.get(agg) else {
            return Ok(false);
        };
        let pending = pending_of(&l.state);
        if pending.is_empty() {
            return Ok(false);
        }
        // A record that changes nothing its writer wrote (a projection)
        // settles nothing: the writer did not decide the member's fate.
        let mine = (!self.rules.writes_nothing(change)).then(|| ledger::item_id(&change.keys));
        let later = if starts {
            written_by(&*self.rules, rest.get(1..).unwrap_or_default())
        } else {
            Default::default()
        };
        let mut settled = Vec::new();
        let mut run = Vec::new();
        for (name, id, d) in pending {
            if mine.as_ref() == Some(&id) {
                settled.push(name);
            } else if starts {
                if !later.contains(&id) {
                    run.push(d);
                }
                settled.push(name);
            }
        }
        if !run.is_empty() {
            self.flush(tx, states).await?;
            let done = self
                .cascade(agg, states, &Cascade { deletes: run }, None)
                .await
                .map_err(|error| BatchFailure { index, error })?;
            tracing::info!(processor = self.name, aggregate = %agg, deleted = done.deleted, "deferred cascade delete at the root's re-creation");
        }
        let Some(l) = states.get_mut(agg) else {
            return Ok(false);
        };
        for name in &settled {
            l.state.parts.remove(name);
        }
        Ok(!settled.is_empty())
    }

    /// After `change` of `agg` was refused as bad input: when it puts or
    /// updates the root, the state records the root as rejected
    /// ([`FoldState::rejected`]: its parts keep the last valid state), so
    /// that no batch writes onto it (its mirror) until a valid change of it
    /// is folded. Committed with the batch's other commits (one HEAD write
    /// for the record, none while the root stays rejected).
    async fn reject_root(
        &self,
        agg: &str,
        index: usize,
        change: &Change,
        is_root: bool,
        states: &mut HashMap<String, Loaded>,
        tx: &mut Tx,
    ) -> Result<(), BatchFailure> {
        let Some(l) = states.get(agg) else {
            return Ok(());
        };
        if !is_root || change.new.is_none() || l.state.rejected {
            return Ok(());
        }
        let mut next = l.state.clone();
        next.rejected = true;
        self.stage_commit(agg, index, change, next, Vec::new(), false, states, tx)
            .await
    }

    /// Loads the state of the batch's aggregates before they are folded:
    /// their HEADs in BatchGetItem calls of 100 (strongly consistent, as a
    /// Query would read them: one read unit each), a HEAD holding its parts
    /// ([`INLINE`]) or none being the whole state; the partition is queried
    /// only where the parts are items, [`PREFETCH`] at a time. An aggregate
    /// whose load fails is loaded again by its first step, which reports
    /// the failure at its record. (Part items of an epoch whose HEAD never
    /// committed, e.g. a lost adoption race, are never read; a Query of the
    /// partition collects them.)
    async fn prefetch<'a>(
        &self,
        aggregates: impl Iterator<Item = &'a str>,
        states: &mut HashMap<String, Loaded>,
    ) {
        use futures::stream::{self, StreamExt};
        let wanted: Vec<&str> = aggregates.filter(|a| !states.contains_key(*a)).collect();
        if wanted.is_empty() {
            return;
        }
        let keys = wanted.iter().map(|a| self.head_key(a)).collect();
        let Ok(heads) = self.store.batch_get(&self.config.ledger_table, keys).await else {
            return;
        };
        let mut heads: HashMap<String, Item> = heads
            .into_iter()
            .filter_map(|h| Some((ledger::as_s(h.get(ledger::PK))?.to_string(), h)))
            .collect();
        let mut query = Vec::new();
        for agg in wanted {
            let head = heads.remove(&ledger::state_pk(self.name, agg));
            let items = match head {
                Some(h) if !h.contains_key(INLINE) => {
                    query.push(agg.to_string());
                    continue;
                }
                h => h.into_iter().collect(),
            };
            if let Ok(l) = self.loaded_from(agg, items) {
                states.insert(agg.to_string(), l);
            }
        }
        let loaded: Vec<(String, Result<Loaded, ProcessError>)> = stream::iter(query)
            .map(|agg: String| async move {
                let l = self.load(&agg).await;
                (agg, l)
            })
            .buffer_unordered(PREFETCH)
            .collect()
            .await;
        for (agg, l) in loaded {
            if let Ok(l) = l {
                states.insert(agg, l);
            }
        }
    }

    /// Folds `changes` but the `refused` ones (bad input DynamoDB refused
    /// the writes of); `alone`: each record's writes committed in a
    /// transaction of their own (to find the one DynamoDB refuses).
    pub(super) async fn run(
        &self,
        changes: &[Change],
        metrics: &mut BatchMetrics,
        states: &mut HashMap<String, Loaded>,
        refused: &std::collections::BTreeSet<usize>,
        alone: bool,
    ) -> Result<(), BatchFailure> {
        // Records of one aggregate stay in stream order; aggregates are
        // folded one after the other, in order of their first record.
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        let mut position: HashMap<String, usize> = HashMap::new();
        for (index, change) in changes.iter().enumerate() {
            if refused.contains(&index) {
                continue;
            }
            let agg = match self.rules.adoption_record(change) {
                Some(r) => r.aggregate,
                None => match self.rules.aggregate(change) {
                    Ok(Some(a)) => a,
                    Ok(None) => continue,
                    Err(e) => {
                        log_bad_input(self.name, &change.event_id, &e, metrics, &self.metrics);
                        continue;
                    }
                },
            };
            let g = *position.entry(agg.clone()).or_insert_with(|| {
                groups.push((agg, Vec::new()));
                groups.len() - 1
            });
            groups[g].1.push(index);
        }
        self.prefetch(groups.iter().map(|(agg, _)| agg.as_str()), states)
            .await;
        let mut tx = Tx::default();
        for (g, (agg, indices)) in groups.iter().enumerate() {
            let records: Vec<&Change> = indices.iter().map(|&i| &changes[i]).collect();
            for (pos, &index) in indices.iter().enumerate() {
                let mut stepped = self
                    .step(
                        agg,
                        index,
                        &changes[index],
                        &records[pos..],
                        metrics,
                        states,
                        &mut tx,
                    )
                    .await;
                if alone && stepped.is_ok() {
                    stepped = self.flush(&mut tx, states).await;
                }
                if let Err(failure) = stepped {
                    // The first record not committed: this one, anything
                    // pending, and every aggregate not reached yet.
                    let pending = states
                        .values()
                        .filter(|l| l.dirty)
                        .filter_map(|l| l.first_pending);
                    let later = groups[g + 1..].iter().map(|(_, ix)| ix[0]);
                    let first = pending
                        .chain(later)
                        .chain([index, failure.index])
                        .min()
                        .expect("non-empty");
                    return Err(BatchFailure {
                        index: first,
                        error: failure.error,
                    });
                }
            }
            tx.complete.insert(agg.clone());
        }
        self.flush(&mut tx, states).await
    }
}
