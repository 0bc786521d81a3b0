//! Adoption of an aggregate met without state (its partition read and one
//! adoption entry written, guarded like backfill's import), and the state
//! of an aggregate first seen creating or deleting its root (rolled back
//! from the partition as read; candidate parts until confirmed).

use super::*;

impl<R: FoldRules + ?Sized> FoldProcessor<R> {
    /// Backfill: adopts an aggregate that has no state yet, through the same
    /// guard as the live fold (the HEAD's absence), so running it twice, or
    /// while the stream processor runs, starts the history once.
    pub async fn import(&self, aggregate: &str, dry_run: bool) -> Result<Imported, ProcessError> {
        if self.load(aggregate).await?.version > 0 {
            return Ok(Imported::AlreadyKnown);
        }
        let items =
            aggregate_items(&*self.rules, &self.store, &self.config.table, aggregate).await?;
        let tok = token();
        let adoption = self.rules.adopt(aggregate, &items, (self.now)(), &tok);
        let Adoption::Entry { state, .. } = &adoption else {
            return Ok(Imported::Nothing);
        };
        if dry_run {
            return Ok(Imported::Imported);
        }
        let seq = state.seq;
        // Raised only while the root is the one read (never onto one a
        // writer changed since, a bad one above all).
        let guard = self.rules.root_guard(state);
        if self
            .write_adoption(aggregate, adoption, &tok)
            .await?
            .is_none()
        {
            return Ok(Imported::AlreadyKnown);
        }
        if let (Some((key, attr)), Some(guard)) = (self.rules.sequence_mirror(aggregate), guard) {
            let update = self.mirror_update(key, attr, seq, &guard);
            self.store.update(&self.config.table, update).await?;
        }
        Ok(Imported::Imported)
    }

    /// Writes an adoption: its parts under a new epoch, then, in one
    /// transaction guarded by the HEAD's absence, the HEAD and the adoption
    /// entry. `None` when another adopter (or the live fold) won.
    pub(super) async fn write_adoption(
        &self,
        aggregate: &str,
        adoption: Adoption,
        epoch: &str,
    ) -> Result<Option<Loaded>, ProcessError> {
        let Adoption::Entry { state, entry, id } = adoption else {
            return Ok(None);
        };
        self.put_parts(aggregate, epoch, &state.parts).await?;
        let mut loaded = Loaded {
            adopt: Some((state.seq, id)),
            state,
            epoch: epoch.to_string(),
            ..Loaded::default()
        };
        let k0 = self.rules.key_names()[0];
        let actions = vec![
            self.head_put(aggregate, &loaded, None),
            put_action(
                &self.config.table,
                entry,
                Some((
                    "attribute_not_exists(#k0)".to_string(),
                    vec![("#k0", k0)],
                    vec![],
                )),
            ),
        ];
        match self.store.transact(actions).await {
            Ok(()) => {
                loaded.version = 1;
                loaded.persisted_parts = loaded.state.parts.clone();
                Ok(Some(loaded))
            }
            Err(TxError::ConditionsFailed { .. }) => Ok(None),
            Err(TxError::Store(e)) => Err(e.into()),
        }
    }

    /// Puts parts outside any transaction: they count only once a HEAD
    /// naming their epoch commits.
    pub(super) async fn put_parts(
        &self,
        aggregate: &str,
        epoch: &str,
        parts: &BTreeMap<String, Item>,
    ) -> Result<(), ProcessError> {
        let pk = ledger::state_pk(self.name, aggregate);
        let items = parts
            .iter()
            .map(|(name, data)| {
                let mut item = ledger::key(&pk, part_sk(epoch, name));
                item.insert("data".into(), AttributeValue::M(data.clone()));
                item
            })
            .collect();
        Ok(self
            .store
            .put_items(&self.config.ledger_table, items)
            .await?)
    }

    /// The state of `agg`'s items just before `rest[0]`: the partition as
    /// it is (strongly consistent Query), rolled back by the batch's records
    /// from `rest[0]` on. Read only for an aggregate without state.
    pub(super) async fn state_before(
        &self,
        agg: &str,
        rest: &[&Change],
    ) -> Result<(FoldState, std::collections::BTreeSet<String>), ProcessError> {
        let items = aggregate_items(&*self.rules, &self.store, &self.config.table, agg).await?;
        let mut state = self.rules.table_state(&items);
        let touched = self.roll_back(&mut state, rest);
        Ok((state, touched))
    }

    /// Rolls `state` (items as read, maybe after some of `rest`) back to the
    /// position of `rest[0]`: the first of these records of each item holds
    /// the item as it was there (its old image; none for an INSERT).
    /// Returns the names of the parts these records touch.
    pub(super) fn roll_back(
        &self,
        state: &mut FoldState,
        rest: &[&Change],
    ) -> std::collections::BTreeSet<String> {
        let mut seen = std::collections::HashSet::new();
        let mut touched = std::collections::BTreeSet::new();
        for change in rest {
            if !seen.insert(crate::item::display_key(&change.keys)) {
                continue;
            }
            let gone = restated(change, crate::change::ChangeKind::Remove, None);
            // Errors: not a part of the state (e.g. an entry) or bad input,
            // which the fold reports when it reaches the record itself.
            let held: Vec<String> = state.parts.keys().cloned().collect();
            let _ = self.rules.absorb(state, &gone);
            touched.extend(held.into_iter().filter(|p| !state.parts.contains_key(p)));
            let before: std::collections::BTreeSet<String> = state.parts.keys().cloned().collect();
            if let Some(old) = &change.old {
                let back = restated(change, crate::change::ChangeKind::Modify, Some(old.clone()));
                let _ = self.rules.absorb(state, &back);
                touched.extend(state.parts.keys().filter(|p| !before.contains(*p)).cloned());
            }
        }
        touched
    }

    /// Settles the candidates of `agg` (items read from the table when its
    /// root's creation was first seen, that no record of that batch
    /// placed: they predate the creation, or a change that raced the read
    /// wrote them). A record of a candidate decides it: its old image is the
    /// item at the creation (none: it did not exist). A `fence` record,
    /// after the read (the root showing the sequence mirror the commit wrote
    /// after it, or the root's deletion), confirms every candidate left as
    /// read. A confirmed one joins the state and every entry since the
    /// creation (`correct`: rewritten guarded by their id).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn confirm(
        &self,
        agg: &str,
        index: usize,
        change: &Change,
        correct: bool,
        fence: bool,
        states: &mut HashMap<String, Loaded>,
        tx: &mut Tx,
    ) -> Result<(), BatchFailure> {
        let Some(l) = states.get_mut(agg) else {
            return Ok(());
        };
        let Some(from) = l.unconfirmed else {
            return Ok(());
        };
        let candidates: BTreeMap<String, Item> = l
            .state
            .parts
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(CANDIDATE)?.to_string(), v.clone())))
            .collect();
        let mut settled = Vec::new();
        let mut add = Vec::new();
        if fence {
            for (name, v) in candidates {
                settled.push(name.clone());
                add.push((name, v));
            }
        } else {
            // (Only candidates: a record of another part adds nothing.)
            let names: std::collections::BTreeSet<String> = candidates.keys().cloned().collect();
            let mut probe = FoldState {
                parts: candidates,
                ..FoldState::default()
            };
            let touched = self.roll_back(&mut probe, &[change]);
            for name in touched.into_iter().filter(|n| names.contains(n)) {
                if let Some(v) = probe.parts.get(&name) {
                    add.push((name.clone(), v.clone()));
                }
                settled.push(name);
            }
        }
        if settled.is_empty() {
            return Ok(());
        }
        // (Members that stay are never leftovers, whatever a HEAD of an
        // earlier `cascade: true` says.)
        let left = l.left && self.rules.cascades_members();
        if left && fence && !add.is_empty() {
            // Before the state forgets them: a retry finds them again.
            let gone = std::mem::take(&mut add);
            self.cascade_left(agg, index, gone, states, tx).await?;
        }
        let Some(l) = states.get_mut(agg) else {
            return Ok(());
        };
        for name in &settled {
            l.state.parts.remove(&format!("{CANDIDATE}{name}"));
        }
        if !l.state.parts.keys().any(|k| k.starts_with(CANDIDATE)) {
            l.unconfirmed = None;
            l.stale_mirror = None;
            l.stale_adoption = None;
            l.left = false;
        }
        if left {
            // Carried across a deletion: none joins the state (one its
            // own record settles is the writer's, folded by that record).
            add.clear();
        }
        for (name, v) in &add {
            l.state.parts.insert(name.clone(), v.clone());
        }
        l.dirty = true;
        l.staged = None;
        l.first_pending.get_or_insert(index);
        if !tx.aggregates.iter().any(|a| a == agg) {
            tx.aggregates.push(agg.to_string());
        }
        if !correct || add.is_empty() {
            return Ok(());
        }
        tracing::info!(processor = self.name, aggregate = %agg, parts = add.len(), "items that predate the creation: its entries show them");
        let fix = |e: &Item| {
            let mut out: Option<Item> = None;
            for (name, v) in &add {
                if let Some(f) = self
                    .rules
                    .correct_entry(out.as_ref().unwrap_or(e), name, Some(v))
                {
                    out = Some(f);
                }
            }
            out
        };
        let keys = self.rules.key_names();
        let same = |a: &Item, b: &Item| keys.iter().all(|k| a.get(*k) == b.get(*k));
        let wanted: Vec<Item> = (from..=l.state.seq)
            .map(|seq| self.rules.entry_key(agg, seq))
            .collect();
        let mut missing = Vec::new();
        for key in &wanted {
            match l.entries.iter_mut().find(|e| same(e, key)) {
                Some(e) => {
                    if let Some(fixed) = fix(e) {
                        *e = fixed;
                    }
                }
                None => missing.push(key),
            }
        }
        l.entry_bytes = l.entries.iter().map(item_size).sum();
        l.staged = None;
        let mut committed = Vec::new();
        if !missing.is_empty() {
            // One strongly consistent Query of the partition (the fold's
            // grant has no GetItem on the table).
            let items = aggregate_items(&*self.rules, &self.store, &self.config.table, agg)
                .await
                .map_err(|e| BatchFailure {
                    index,
                    error: e.into(),
                })?;
            for item in items.iter().filter(|i| missing.iter().any(|k| same(i, k))) {
                if let Some(fixed) = fix(item) {
                    let id = fixed.get("id").cloned().unwrap_or_else(|| s(""));
                    committed.push(put_action(
                        &self.config.table,
                        fixed,
                        Some(("#id = :id".into(), vec![("#id", "id")], vec![(":id", id)])),
                    ));
                }
            }
        }
        // Committed entries: rewritten now (the same content on a retry,
        // as the HEAD still names the candidates until the commit).
        for chunk in committed.chunks(25) {
            match self.store.transact(chunk).await {
                Ok(()) | Err(TxError::ConditionsFailed { .. }) => {}
                Err(TxError::Store(e)) => {
                    return Err(BatchFailure {
                        index,
                        error: e.into(),
                    })
                }
            }
        }
        Ok(())
    }

    /// Deletes the candidates `gone` carried across a deletion of `agg`'s
    /// root ([`Loaded::left`]) that a fence proved to predate the stream:
    /// the removed incarnation's members, deleted as its cascade would
    /// have (each guarded by its content as read: one the writer changed
    /// since stays).
    async fn cascade_left(
        &self,
        agg: &str,
        index: usize,
        gone: Vec<(String, Item)>,
        states: &mut HashMap<String, Loaded>,
        tx: &mut Tx,
    ) -> Result<(), BatchFailure> {
        let removed = FoldState {
            parts: gone.into_iter().collect(),
            ..FoldState::default()
        };
        let cascade = self.rules.cascade(agg, &removed);
        self.flush(tx, states).await?;
        let done = self
            .cascade(agg, states, &cascade, None)
            .await
            .map_err(|error| BatchFailure { index, error })?;
        tracing::info!(processor = self.name, aggregate = %agg, deleted = done.deleted, "items a deletion left that prove to predate the stream: deleted as its cascade would have");
        Ok(())
    }

    /// Drops `agg`'s pending adoption at its root's creation, reached
    /// before the adoption's position (premature: a backfill, or the fold
    /// at a member's change, read the root before the consumer reached its
    /// INSERT). The state starts over under a new epoch (the adoption's
    /// parts become garbage): the caller rolls the adoption's state (its
    /// read, and the records folded since) back to the creation, and the
    /// creation's entry 1 replaces the adoption's. An adoption entry
    /// numbered past 1 (entries already in the table) is deleted, guarded
    /// by its id. The mirror the adoption wrote on the root is remembered
    /// ([`Loaded::stale_mirror`]): it is no fence for the parts it read;
    /// the adoption's own record is ([`Loaded::stale_adoption`]). Returns
    /// the parts the records before the creation wrote ([`Loaded::seen`]).
    pub(super) async fn drop_adoption(
        &self,
        agg: &str,
        index: usize,
        states: &mut HashMap<String, Loaded>,
        tx: &mut Tx,
    ) -> Result<std::collections::BTreeSet<String>, BatchFailure> {
        let Some((seq, id)) = states.get(agg).and_then(|l| l.adopt.clone()) else {
            return Ok(Default::default());
        };
        if seq > 1 {
            let delete = CascadeDelete {
                key: self.rules.entry_key(agg, seq),
                unchanged: Some([("id".to_string(), s(&id))].into()),
            };
            self.flush(tx, states).await?;
            self.cascade(
                agg,
                states,
                &Cascade {
                    deletes: vec![delete],
                },
                None,
            )
            .await
            .map_err(|error| BatchFailure { index, error })?;
        }
        let Some(l) = states.get_mut(agg) else {
            return Ok(Default::default());
        };
        tracing::info!(processor = self.name, aggregate = %agg, adoption = seq, "the root's creation is before its adoption's position: the history starts at the creation");
        let old = std::mem::replace(&mut l.epoch, token());
        if !l.inline {
            let stale = l.persisted_parts.keys().map(|p| part_sk(&old, p));
            l.garbage.extend(stale);
        }
        l.persisted_parts.clear();
        l.inline = false;
        l.adopt = None;
        l.rewrite = None;
        l.unconfirmed = None;
        l.left = false;
        l.stale_mirror = Some(seq);
        l.stale_adoption = Some(id);
        l.dirty = true;
        l.staged = None;
        l.first_pending.get_or_insert(index);
        if !tx.aggregates.iter().any(|a| a == agg) {
            tx.aggregates.push(agg.to_string());
        }
        Ok(std::mem::take(&mut l.seen))
    }

    /// Notes, while `agg`'s adoption waits for its position, the part
    /// `change` (a record before it, folded into the state) writes or
    /// removes: its value there is now the fold's own ([`Loaded::seen`]).
    /// True when that is news (the HEAD must keep it, even when the record
    /// changes nothing the adoption read).
    pub(super) fn note_seen(&self, l: &mut Loaded, change: &Change) -> bool {
        let Some(image) = change.new.as_ref().or(change.old.as_ref()) else {
            return false;
        };
        let mut probe = FoldState::default();
        let put = restated(
            change,
            crate::change::ChangeKind::Modify,
            Some(image.clone()),
        );
        if self.rules.absorb(&mut probe, &put).is_err() {
            return false;
        }
        let bytes: usize = l.seen.iter().map(String::len).sum();
        let mut news = false;
        for name in probe.parts.into_keys() {
            if bytes + name.len() <= SEEN_MAX_BYTES {
                news |= l.seen.insert(name);
            }
        }
        news
    }

    /// Adopts `agg` (no HEAD, first change not its root's creation).
    pub(super) async fn adopt_now(&self, agg: &str) -> Result<Loaded, ProcessError> {
        let items = aggregate_items(&*self.rules, &self.store, &self.config.table, agg).await?;
        let tok = token();
        match self.rules.adopt(agg, &items, (self.now)(), &tok) {
            a @ Adoption::Entry { .. } => match self.write_adoption(agg, a, &tok).await? {
                Some(l) => {
                    tracing::info!(processor = self.name, aggregate = %agg, "adopted");
                    Ok(l)
                }
                // Backfill (or another consumer) adopted it meanwhile.
                None => self.load(agg).await,
            },
            Adoption::Rootless(state) => {
                self.put_parts(agg, &tok, &state.parts).await?;
                Ok(Loaded {
                    persisted_parts: state.parts.clone(),
                    state,
                    epoch: tok,
                    dirty: true,
                    ..Loaded::default()
                })
            }
        }
    }

    /// The adoption entry's own record (`rest[0]`, the batch's records of
    /// `agg` from it on): the adoption's position.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn reach_adoption(
        &self,
        agg: &str,
        index: usize,
        change: &Change,
        rest: &[&Change],
        record: AdoptionRecord,
        states: &mut HashMap<String, Loaded>,
        tx: &mut Tx,
    ) -> Result<(), BatchFailure> {
        let l = &states[agg];
        if l.adopt.as_ref() != Some(&(record.sequence, record.id.clone())) {
            if l.unconfirmed.is_some() && l.stale_adoption.as_ref() == Some(&record.id) {
                // A dropped adoption's position: every record between the
                // creation and its read is behind, so the parts it read
                // that none of them settled predate the creation.
                return self
                    .confirm(agg, index, change, true, true, states, tx)
                    .await;
            }
            return Ok(());
        }
        let Some(entry) = &change.new else {
            return Ok(());
        };
        let mut next = l.state.clone();
        let mut rewrite = None;
        match self.rules.restate(entry, &l.state) {
            Restated::Same => {}
            Restated::Rewrite(e) => rewrite = Some(e),
            Restated::RootGone => {
                // The adopted incarnation is gone at its own position:
                // cascaded as a deletion would be (the batch's later
                // records of its members left to them, the root's absence
                // checked unless the batch re-creates it).
                let gone = l.state.clone();
                let deferred = self
                    .cascade_removed(agg, index, &gone, rest, states, tx)
                    .await?;
                next = self.rules.root_removed(&gone);
                next.parts.extend(deferred.iter().map(pending_part));
            }
        }
        let Some(l) = states.get_mut(agg) else {
            return Ok(());
        };
        l.adopt = None;
        l.seen.clear();
        l.rewrite = rewrite.or(l.rewrite.take());
        self.stage_commit(agg, index, change, next, Vec::new(), true, states, tx)
            .await
    }
}

/// `change` (its key, position and origin) as a `kind` change to `new`,
/// without its old image: built without copying its own images.
fn restated(change: &Change, kind: crate::change::ChangeKind, new: Option<Item>) -> Change {
    Change {
        event_id: change.event_id.clone(),
        sequence_number: change.sequence_number.clone(),
        kind,
        origin: change.origin,
        keys: change.keys.clone(),
        old: None,
        new,
        at: change.at,
    }
}
