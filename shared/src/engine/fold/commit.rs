//! An aggregate's durable state in the ledger: loading it, and committing
//! entries, changed parts and the HEAD (guarded by its version) in shared
//! transactions of up to 100 actions.

use super::*;

impl<R: FoldRules + ?Sized> FoldProcessor<R> {
    pub(super) async fn load(&self, aggregate: &str) -> Result<Loaded, ProcessError> {
        let pk = ledger::state_pk(self.name, aggregate);
        let items = self
            .store
            .query_partition(&self.config.ledger_table, ledger::PK, &pk, None)
            .await?;
        self.loaded_from(aggregate, items)
    }

    /// The key of an aggregate's HEAD in the ledger.
    pub(super) fn head_key(&self, aggregate: &str) -> Item {
        ledger::key(ledger::state_pk(self.name, aggregate), "HEAD")
    }

    /// An aggregate's state from its ledger items as read (the HEAD and
    /// part items; none: no state yet).
    pub(super) fn loaded_from(
        &self,
        aggregate: &str,
        items: Vec<Item>,
    ) -> Result<Loaded, ProcessError> {
        let mut loaded = Loaded::default();
        let mut parts = Vec::new();
        let mut inline: Option<Item> = None;
        for item in items {
            let sk = ledger::as_s(item.get(ledger::SK))
                .unwrap_or_default()
                .to_string();
            if sk == "HEAD" {
                let bad = |e| {
                    ProcessError::Permanent(format!("ledger HEAD of {aggregate} is corrupt: {e}"))
                };
                loaded.state.seq = item.i64("seq").map_err(bad)? as u64;
                loaded.version = item.i64("version").map_err(bad)? as u64;
                loaded.state.deleted = item.opt_bool("deleted").map_err(bad)?.unwrap_or(false);
                loaded.state.rejected = item.opt_bool("rejected").map_err(bad)?.unwrap_or(false);
                loaded.last = item
                    .opt_s("last")
                    .map_err(bad)?
                    .and_then(SequenceNumber::parse);
                loaded.epoch = item
                    .opt_s("epoch")
                    .map_err(bad)?
                    .unwrap_or_default()
                    .to_string();
                let adopt_seq = item.opt_i64("adopt").map_err(bad)?;
                let adopt_id = item.opt_s("adoptId").map_err(bad)?;
                if let (Some(seq), Some(id)) = (adopt_seq, adopt_id) {
                    loaded.adopt = Some((seq as u64, id.to_string()));
                    match item.get("adoptSeen") {
                        Some(AttributeValue::Ss(seen)) => {
                            loaded.seen = seen.iter().cloned().collect()
                        }
                        Some(_) => {
                            return Err(bad(crate::item::AttrError::Invalid {
                                name: "adoptSeen".into(),
                                reason: "not a string set".into(),
                            }))
                        }
                        None => {}
                    }
                }
                loaded.unconfirmed = item.opt_i64("ucFrom").map_err(bad)?.map(|f| f as u64);
                loaded.stale_mirror = item.opt_i64("ucStale").map_err(bad)?.map(|m| m as u64);
                loaded.stale_adoption = item.opt_s("ucAdopt").map_err(bad)?.map(str::to_string);
                loaded.left = item.opt_bool("ucLeft").map_err(bad)? == Some(true);
                match item.get(INLINE) {
                    Some(AttributeValue::M(p)) => inline = Some(p.clone()),
                    Some(_) => {
                        return Err(bad(crate::item::AttrError::Invalid {
                            name: INLINE.into(),
                            reason: "not a map".into(),
                        }))
                    }
                    None => {}
                }
            } else if let Some(AttributeValue::M(data)) = item.get("data") {
                parts.push((sk, data.clone()));
            }
        }
        // A deleted root's state holds the members written since (a
        // deletion starts a new epoch; the epoch-less layout's parts of a
        // deleted root are left overs).
        let live = loaded.version > 0 && (!loaded.state.deleted || !loaded.epoch.is_empty());
        if let Some(inline) = inline {
            // Parts in the HEAD: any part item is left over from before.
            loaded.inline = true;
            loaded.garbage = std::mem::take(&mut parts)
                .into_iter()
                .map(|(sk, _)| sk)
                .collect();
            for (name, data) in inline {
                match data {
                    AttributeValue::M(data) if live => {
                        loaded.state.parts.insert(name, data);
                    }
                    AttributeValue::M(_) => {}
                    _ => {
                        return Err(ProcessError::Permanent(format!(
                            "ledger HEAD of {aggregate} is corrupt: part {name} is not a map"
                        )))
                    }
                }
            }
        }
        for (sk, data) in parts {
            match part_name(&sk, &loaded.epoch) {
                Some(name) if live => {
                    loaded.state.parts.insert(name.to_string(), data);
                }
                _ => loaded.garbage.push(sk),
            }
        }
        if loaded.version == 0 {
            loaded.epoch = token();
        }
        if !loaded.inline {
            loaded.persisted_parts = loaded.state.parts.clone();
        }
        Ok(loaded)
    }

    /// The HEAD's write, holding `inline` parts when given.
    pub(super) fn head_put(
        &self,
        aggregate: &str,
        l: &Loaded,
        inline: Option<&BTreeMap<String, Item>>,
    ) -> TransactWriteItem {
        let pk = ledger::state_pk(self.name, aggregate);
        let mut head = ledger::key(&pk, "HEAD");
        head.insert("seq".into(), n(l.state.seq));
        head.insert("version".into(), n(l.version + 1));
        head.insert("deleted".into(), AttributeValue::Bool(l.state.deleted));
        if l.state.rejected {
            head.insert("rejected".into(), AttributeValue::Bool(true));
        }
        if let Some(last) = l.current_last() {
            head.insert("last".into(), s(last.padded()));
        }
        if !l.epoch.is_empty() {
            head.insert("epoch".into(), s(&l.epoch));
        }
        if let Some((seq, id)) = &l.adopt {
            head.insert("adopt".into(), n(seq));
            head.insert("adoptId".into(), s(id));
            if !l.seen.is_empty() {
                let seen = l.seen.iter().cloned().collect();
                head.insert("adoptSeen".into(), AttributeValue::Ss(seen));
            }
        }
        if let Some(from) = l.unconfirmed {
            head.insert("ucFrom".into(), n(from));
            if let Some(stale) = l.stale_mirror {
                head.insert("ucStale".into(), n(stale));
            }
            if let Some(id) = &l.stale_adoption {
                head.insert("ucAdopt".into(), s(id));
            }
            if l.left {
                head.insert("ucLeft".into(), AttributeValue::Bool(true));
            }
        }
        if let Some(parts) = inline {
            let parts = parts
                .iter()
                .map(|(name, data)| (name.clone(), AttributeValue::M(data.clone())))
                .collect();
            head.insert(INLINE.into(), AttributeValue::M(parts));
        }
        let cond = if l.version == 0 {
            ("attribute_not_exists(pk)".to_string(), vec![], vec![])
        } else {
            (
                "version = :v".to_string(),
                vec![],
                vec![(":v", n(l.version))],
            )
        };
        put_action(&self.config.ledger_table, head, Some(cond))
    }

    /// The actions of one aggregate's commit. The entries move into their
    /// puts (a commit that fails forgets the aggregate; one that succeeds
    /// clears them).
    pub(super) fn commit_actions(&self, aggregate: &str, l: &mut Loaded) -> Vec<TransactWriteItem> {
        let mut actions: Vec<TransactWriteItem> = std::mem::take(&mut l.entries)
            .into_iter()
            .map(|e| put_action(&self.config.table, e, None))
            .collect();
        if let Some(entry) = &l.rewrite {
            let id = entry.get("id").cloned().unwrap_or_else(|| s(""));
            actions.push(put_action(
                &self.config.table,
                entry.clone(),
                Some(("#id = :id".into(), vec![("#id", "id")], vec![(":id", id)])),
            ));
        }
        if fits_inline(&l.state.parts) {
            // The parts go in the HEAD; part items left (`persisted_parts`
            // when not `inline`) are deleted once it commits.
            actions.push(self.head_put(aggregate, l, Some(&l.state.parts)));
            return actions;
        }
        actions.push(self.head_put(aggregate, l, None));
        let pk = ledger::state_pk(self.name, aggregate);
        for (name, data) in &l.state.parts {
            if l.persisted_parts.get(name) != Some(data) {
                let mut item = ledger::key(&pk, part_sk(&l.epoch, name));
                item.insert("data".into(), AttributeValue::M(data.clone()));
                actions.push(put_action(&self.config.ledger_table, item, None));
            }
        }
        for name in l
            .persisted_parts
            .keys()
            .filter(|k| !l.state.parts.contains_key(*k))
        {
            let key = ledger::key(&pk, part_sk(&l.epoch, name));
            actions.push(crate::tx::delete(&self.config.ledger_table, key));
        }
        actions
    }

    /// Commits every aggregate of `tx`: entries, changed parts and the HEAD
    /// guarded by its version, in one transaction, with the sequence mirror
    /// of each aggregate whose records of the batch are all folded
    /// ([`Self::mirror_action`]); refused for a mirror's guard alone, it is
    /// sent again without that mirror. On failure nothing took effect; the
    /// aggregates are forgotten so a retry reloads them.
    pub(super) async fn flush(
        &self,
        tx: &mut Tx,
        states: &mut HashMap<String, Loaded>,
    ) -> Result<(), BatchFailure> {
        let aggregates: Vec<String> = std::mem::take(&mut tx.aggregates)
            .into_iter()
            .filter(|a| states.get(a).is_some_and(|l| l.dirty))
            .collect();
        if aggregates.is_empty() {
            return Ok(());
        }
        let mut first = usize::MAX;
        for agg in &aggregates {
            let l = states.get_mut(agg).expect("in tx");
            if l.inline && !fits_inline(&l.state.parts) {
                // The parts outgrow the HEAD: written as items under a new
                // epoch (no item of an older one is ever read as state).
                l.epoch = token();
                l.persisted_parts.clear();
                l.inline = false;
            }
            first = first.min(l.first_pending.unwrap_or(usize::MAX));
        }
        let mut actions = Vec::new();
        let mut mirrors: Vec<(usize, &String)> = Vec::new();
        for agg in &aggregates {
            let l = states.get_mut(agg).expect("in tx");
            actions.extend(self.commit_actions(agg, l));
            if let Some(update) = self.mirror_action(agg, l, tx) {
                mirrors.push((actions.len(), agg));
                actions.push(update);
            }
        }
        // Aggregates whose sequence mirror the transaction refused: sent
        // again without it (nothing to write: the root is gone or ahead).
        let mut refused: Vec<&String> = Vec::new();
        let (result, mirrored) = loop {
            match self.store.transact(&actions).await {
                Err(TxError::ConditionsFailed { failed })
                    if failed
                        .iter()
                        .enumerate()
                        .filter(|(_, f)| **f)
                        .all(|(i, _)| mirrors.iter().any(|(m, _)| *m == i)) =>
                {
                    let dropped = |m: usize| failed.get(m) == Some(&true);
                    refused.extend(
                        mirrors
                            .iter()
                            .filter(|(m, _)| dropped(*m))
                            .map(|(_, agg)| *agg),
                    );
                    // The same actions without the refused mirrors.
                    let mut kept = Vec::with_capacity(actions.len());
                    let mut still = Vec::with_capacity(mirrors.len());
                    let mut mirror = mirrors.iter().peekable();
                    for (i, action) in actions.into_iter().enumerate() {
                        match mirror.next_if(|(m, _)| *m == i) {
                            Some((_, _)) if dropped(i) => continue,
                            Some((_, agg)) => still.push((kept.len(), *agg)),
                            None => {}
                        }
                        kept.push(action);
                    }
                    actions = kept;
                    mirrors = still;
                }
                result => break (result, mirrors),
            }
        };
        match result {
            Ok(()) => {
                let mut garbage = Vec::new();
                let settled: Vec<String> = mirrored
                    .iter()
                    .map(|(_, agg)| *agg)
                    .chain(refused)
                    .cloned()
                    .collect();
                for agg in &settled {
                    let l = states.get_mut(agg).expect("in tx");
                    l.mirror_done = Some(l.state.seq);
                }
                for agg in &aggregates {
                    let l = states.get_mut(agg).expect("in tx");
                    l.version += 1;
                    let pk = ledger::state_pk(self.name, agg);
                    let inline = fits_inline(&l.state.parts);
                    if inline && !l.inline {
                        // Part items the HEAD now replaces.
                        let left: Vec<Item> = l
                            .persisted_parts
                            .keys()
                            .map(|name| ledger::key(&pk, part_sk(&l.epoch, name)))
                            .collect();
                        garbage.extend(left);
                    }
                    l.inline = inline;
                    // Read only while the parts are items (see `Loaded`).
                    l.persisted_parts = if inline {
                        BTreeMap::new()
                    } else {
                        l.state.parts.clone()
                    };
                    l.last = l.pending_last.take().or(l.last.take());
                    l.entries.clear();
                    l.entry_bytes = 0;
                    l.staged = None;
                    l.rewrite = None;
                    l.first_pending = None;
                    l.dirty = false;
                    garbage.extend(l.garbage.drain(..).map(|sk| ledger::key(&pk, sk)));
                }
                if !garbage.is_empty() {
                    if let Err(e) = self
                        .store
                        .delete_keys(&self.config.ledger_table, garbage)
                        .await
                    {
                        // Harmless: parts of other epochs are never read as
                        // state, and the next load collects them again.
                        tracing::warn!(processor = self.name, error = %e, "ledger garbage left for later");
                    }
                }
                Ok(())
            }
            Err(e) => {
                for agg in &aggregates {
                    states.remove(agg);
                }
                let error = match e {
                    TxError::ConditionsFailed { .. } => ProcessError::Conflict(
                        "a state version changed under this processor; retrying from the ledger"
                            .into(),
                    ),
                    TxError::Store(e) => e.into(),
                };
                Err(BatchFailure {
                    index: first,
                    error,
                })
            }
        }
    }

    /// Adds one folded change of `agg` (its next state and entries) to the
    /// transaction, committing what is pending first if it would not fit.
    /// `force`: commit even if the state did not change (the HEAD did).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn stage_commit(
        &self,
        agg: &str,
        index: usize,
        change: &Change,
        next: FoldState,
        entries: Vec<Item>,
        force: bool,
        states: &mut HashMap<String, Loaded>,
        tx: &mut Tx,
    ) -> Result<(), BatchFailure> {
        let Some(l) = states.get(agg) else {
            return Ok(());
        };
        // A root deleted: a new epoch, the old parts become garbage.
        let new_epoch = next.deleted && !l.state.deleted;
        if entries.is_empty() && next == l.state && !new_epoch && !force {
            // Nothing changed (e.g. only processor-owned attributes): no
            // entry, no state write.
            return Ok(());
        }
        let entry_bytes: usize = entries.iter().map(item_size).sum();
        let cost = |l: &Loaded| {
            if new_epoch {
                (2 + l.entries.len() + entries.len(), entry_bytes)
            } else {
                l.cost(&next.parts, entries.len(), entry_bytes)
            }
        };
        let (others_actions, others_bytes) = tx
            .aggregates
            .iter()
            .filter(|a| a.as_str() != agg)
            .filter_map(|a| states.get(a))
            .filter(|o| o.dirty)
            .map(|o| o.staged.unwrap_or_else(|| o.cost(&o.state.parts, 0, 0)))
            .fold((0, 0), |(a, b), (c, d)| (a + c, b + d));
        let (actions, bytes) = cost(l);
        let flushed = (others_actions + actions > MAX_ACTIONS
            || others_bytes + bytes > MAX_TX_BYTES)
            && !tx.aggregates.is_empty();
        if flushed {
            self.flush(tx, states).await?;
        }
        let Some(l) = states.get_mut(agg) else {
            return Ok(());
        };
        if new_epoch {
            let old = std::mem::replace(&mut l.epoch, token());
            if !l.inline {
                let stale: Vec<String> =
                    l.persisted_parts.keys().map(|p| part_sk(&old, p)).collect();
                l.garbage.extend(stale);
            }
            l.persisted_parts.clear();
            l.inline = false;
            l.adopt = None;
            l.seen.clear();
            // Candidates a deletion left stay pending under the new epoch.
            if !next.parts.keys().any(|k| k.starts_with(CANDIDATE)) {
                l.unconfirmed = None;
                l.left = false;
            }
        }
        l.state = next;
        l.entries.extend(entries);
        l.entry_bytes += entry_bytes;
        // What was committed meanwhile is no longer in this commit.
        l.staged = (!flushed).then_some((actions, bytes));
        l.pending_last = Some(change.sequence_number.clone());
        l.first_pending.get_or_insert(index);
        l.dirty = true;
        if !tx.aggregates.iter().any(|a| a == agg) {
            tx.aggregates.push(agg.to_string());
        }
        Ok(())
    }
}
