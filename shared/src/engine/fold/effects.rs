//! What a fold does to the model table besides its entries: the sequence
//! mirror on the root, and the cascade when the root goes.
//!
//! The mirror is guarded by the root as the fold last saw it (its writer's
//! attributes, [`FoldRules::root_guard`]): a lagging batch never writes its
//! count onto a root changed since, a re-created one above all (an earlier
//! incarnation's count on the new one); the record of that change fixes
//! the mirror when it is folded. Inside a commit the mirror is set exactly
//! (the HEAD's version guard fences it); outside, it is only raised, and set
//! lower (an earlier incarnation's count left on the root) only while the
//! entry after the count is absent and together with the HEAD rewritten
//! under its version guard: a consumer whose state is stale never lowers
//! what a newer one wrote.

use super::*;

/// Sequence mirror writes in flight at once.
const MIRRORS_IN_FLIGHT: usize = 8;

/// A sequence mirror [`FoldProcessor::write_mirrors`] may write: the first
/// record touching the aggregate, its state, the root's key and mirror
/// attribute, the root as folded (the guard), and for a mirror past the
/// count the entry after it (set lower only while that entry is absent).
struct Mirror<'a> {
    touched: usize,
    agg: &'a str,
    l: &'a Loaded,
    key: Item,
    attr: &'static str,
    guard: Item,
    next: Option<Item>,
}

/// The end of the cascade's transaction that starts at `deletes[start]`:
/// up to 98 deletes (beside the HEAD's check and the root's), and no more
/// than [`MAX_TX_BYTES`] of keys and guards (a member's guard is the item
/// as folded). At least one.
fn chunk_end(deletes: &[&CascadeDelete], start: usize) -> usize {
    let mut bytes = 0;
    let mut end = start;
    for d in deletes[start..].iter().take(MAX_ACTIONS - 2) {
        bytes += item_size(&d.key) + d.unchanged.as_ref().map_or(0, item_size);
        if bytes > MAX_TX_BYTES && end > start {
            break;
        }
        end += 1;
    }
    end
}

impl<R: FoldRules + ?Sized> FoldProcessor<R> {
    /// The mirror raised to `seq` while the root holds `guard`
    /// ([`FoldRules::root_guard`]).
    pub(super) fn mirror_update(
        &self,
        key: Item,
        attr: &'static str,
        seq: u64,
        guard: &Item,
    ) -> Update {
        self.mirror_set(key, attr, seq, false, Some(guard))
    }

    /// The mirror raised to `seq`, or set to it (`exact`: only inside a
    /// write fenced by the HEAD's version), while the root exists and,
    /// with `guard`, still holds those attribute values.
    fn mirror_set(
        &self,
        key: Item,
        attr: &'static str,
        seq: u64,
        exact: bool,
        guard: Option<&Item>,
    ) -> Update {
        let k0 = self.rules.key_names()[0];
        let cmp = if exact { "<>" } else { "<" };
        let mut condition =
            format!("attribute_exists(#k0) AND (attribute_not_exists(#a) OR #a {cmp} :s)");
        let mut names = vec![("#a".into(), attr.into()), ("#k0".into(), k0.into())];
        let mut values = vec![(":s".into(), n(seq))];
        if let Some(guard) = guard.filter(|g| !g.is_empty()) {
            let (same, guard_names, guard_values) = unchanged_condition(guard);
            condition = format!("{condition} AND {same}");
            names.extend(guard_names);
            values.extend(guard_values);
        }
        Update {
            key,
            update_expression: "SET #a = :s".into(),
            condition_expression: Some(condition),
            names,
            values,
        }
    }

    /// The sequence mirror's update inside the commit of `agg`'s last
    /// changes of the batch (one write per aggregate per batch, no request
    /// of its own), set exactly (the commit's HEAD guard fences it) while
    /// the root is the one folded: a refusal (the root deleted or changed
    /// since, or already showing it) cancels the transaction, which
    /// [`Self::flush`] sends again without it. `None` when the batch's
    /// records of `agg` are not all folded yet, when this batch neither
    /// added an entry nor created the root (the root is read first, after
    /// the batch), or when the root's latest image already shows the
    /// number.
    pub(super) fn mirror_action(
        &self,
        agg: &str,
        l: &Loaded,
        tx: &Tx,
    ) -> Option<TransactWriteItem> {
        let seq = l.state.seq;
        if !tx.complete.contains(agg)
            || l.state.deleted
            || seq == 0
            || l.mirror_done == Some(seq)
            || l.mirror_seen == Some(Some(seq as i64))
            || !(l.advanced && (l.created || l.base_seq.is_some_and(|b| seq > b)))
        {
            return None;
        }
        let (key, attr) = self.rules.sequence_mirror(agg)?;
        let guard = self.rules.root_guard(&l.state)?;
        Some(
            self.mirror_set(key, attr, seq, true, Some(&guard))
                .transact_item(&self.config.table),
        )
    }

    /// The cascade of `agg`'s removed incarnation, in transactions of up
    /// to 99 deletes, each with a check of the aggregate's HEAD as this
    /// processor holds it in `states` (its version; none: absent): a
    /// consumer whose state is stale (it lags behind another that folded the deletion, the
    /// re-creation and the new incarnation's changes, or it lost its lease
    /// and still runs) deletes nothing, never the new incarnation's entries
    /// 1..k under the same keys; it fails with a conflict, and its batch,
    /// delivered again, finds the deletion folded. A member's delete
    /// refused for its own condition (a later incarnation's member) is
    /// dropped and the rest sent again. No request of its own: the deletes
    /// were sent anyway (BatchWriteItem of 25, a DeleteItem per member
    /// before), now as transactional deletes of 99.
    ///
    /// With `root` (the root's key), the first transaction also checks
    /// that the root is still absent: when it is back (re-created after
    /// the deletion being folded), the members' deletes are not sent but
    /// returned ([`Cascaded::deferred`]): a member the writer deleted and
    /// put again since, with the content the removed incarnation had, is
    /// not told apart by its content, only by its records to come.
    pub(super) async fn cascade(
        &self,
        agg: &str,
        states: &HashMap<String, Loaded>,
        c: &Cascade,
        root: Option<&Item>,
    ) -> Result<Cascaded, ProcessError> {
        let version = states.get(agg).map_or(0, |l| l.version);
        let moved = || {
            ProcessError::Conflict(format!(
                "the state of {agg} moved on under this processor (another consumer folded its root's deletion): its cascade is not run; retrying from the ledger"
            ))
        };
        let fence = self.head_fence(agg, version);
        let mut witness = root
            .filter(|_| c.deletes.iter().any(|d| d.unchanged.is_some()))
            .map(|key| self.root_absent(key));
        let mut out = Cascaded::default();
        let mut deletes: Vec<&CascadeDelete> = c.deletes.iter().collect();
        let mut start = 0;
        'chunks: while start < deletes.len() {
            let end = chunk_end(&deletes, start);
            let mut actions = vec![fence.clone()];
            actions.extend(witness.clone());
            let checks = actions.len();
            actions.extend(deletes[start..end].iter().map(|d| self.cascade_delete(d)));
            while actions.len() > checks {
                match self.store.transact(&actions).await {
                    Ok(()) => {
                        out.deleted += actions.len() - checks;
                        break;
                    }
                    Err(TxError::ConditionsFailed { failed }) => {
                        if failed.first() != Some(&false) || !failed.contains(&true) {
                            return Err(moved());
                        }
                        if checks == 2 && failed.get(1) == Some(&true) {
                            // The root is back: nothing of this transaction
                            // took effect; the members wait, the entries go.
                            out.deferred = deletes
                                .iter()
                                .filter(|d| d.unchanged.is_some())
                                .map(|d| (*d).clone())
                                .collect();
                            deletes.retain(|d| d.unchanged.is_none());
                            witness = None;
                            continue 'chunks;
                        }
                        actions = actions
                            .into_iter()
                            .enumerate()
                            .filter(|(i, _)| failed.get(*i) != Some(&true))
                            .map(|(_, a)| a)
                            .collect();
                    }
                    Err(TxError::Store(e)) => return Err(e.into()),
                }
            }
            // The root was absent when the first transaction deleted: the
            // members the rest delete were the removed incarnation's.
            witness = None;
            start = end;
        }
        Ok(out)
    }

    /// A check that the root at `key` is absent.
    fn root_absent(&self, key: &Item) -> TransactWriteItem {
        let k0 = self.rules.key_names()[0];
        crate::tx::check_of(
            aws_sdk_dynamodb::types::ConditionCheck::builder()
                .table_name(&self.config.table)
                .set_key(Some(key.clone()))
                .condition_expression("attribute_not_exists(#k0)")
                .expression_attribute_names("#k0", k0),
        )
    }

    /// A check that `agg`'s HEAD is still at `version` (0: still absent).
    fn head_fence(&self, agg: &str, version: u64) -> TransactWriteItem {
        let check = aws_sdk_dynamodb::types::ConditionCheck::builder()
            .table_name(&self.config.ledger_table)
            .set_key(Some(self.head_key(agg)))
            .expression_attribute_names("#pk", ledger::PK);
        crate::tx::check_of(if version == 0 {
            check.condition_expression("attribute_not_exists(#pk)")
        } else {
            check
                .condition_expression("attribute_exists(#pk) AND version = :v")
                .expression_attribute_values(":v", n(version))
        })
    }

    /// One delete of a cascade, conditioned on the member as the removed
    /// incarnation had it where it says so.
    fn cascade_delete(&self, d: &CascadeDelete) -> TransactWriteItem {
        let mut del = aws_sdk_dynamodb::types::Delete::builder()
            .table_name(&self.config.table)
            .set_key(Some(d.key.clone()));
        if let Some(expected) = &d.unchanged {
            let (cond, names, values) = unchanged_condition(expected);
            del = del
                .condition_expression(cond)
                .set_expression_attribute_names(placeholders(names))
                .set_expression_attribute_values(placeholders(values));
        }
        crate::tx::delete_of(del)
    }

    /// Writes the sequence mirror of every aggregate the batch touched
    /// whose root does not show it yet and whose commit did not carry it
    /// ([`Self::mirror_action`]): a batch that only replays records or adds
    /// no entry, or whose last records of an aggregate changed nothing. The
    /// roots are read first, 100 per BatchGetItem (strongly consistent, one
    /// read unit each as a GetItem), so a replay writes nothing; a mirror
    /// below the count is raised (guarded by the root as folded,
    /// [`MIRRORS_IN_FLIGHT`] at a time); one above it (an earlier
    /// incarnation's count left on a re-created root, its creation's mirror
    /// lost with a failed batch) is set with the HEAD rewritten under its
    /// version guard, while the entry after the count is absent (read
    /// first, as the roots). A mirror DynamoDB refuses (no retry can fix
    /// it: the root grew past what can hold it since it was folded) is
    /// bad input of the record that touched the aggregate, logged with
    /// the root's key and the refusal, counted, never retried.
    pub(super) async fn write_mirrors(
        &self,
        states: &HashMap<String, Loaded>,
        limit: usize,
        metrics: &mut BatchMetrics,
    ) -> Result<(), BatchFailure> {
        use futures::stream::{self, StreamExt};
        let mut first: Option<BatchFailure> = None;
        let mut fail = |index: usize, error: ProcessError| {
            if first.as_ref().is_none_or(|f| index < f.index) {
                first = Some(BatchFailure { index, error });
            }
        };
        let mut due: Vec<Mirror<'_>> = Vec::new();
        for (agg, l) in states {
            let Some(touched) = l.touched.filter(|t| *t < limit) else {
                continue;
            };
            if l.state.deleted || l.state.seq == 0 || l.dirty {
                continue;
            }
            let Some((key, attr)) = self.rules.sequence_mirror(agg) else {
                continue;
            };
            // No valid root folded (or bad input now): nothing onto it.
            let Some(guard) = self.rules.root_guard(&l.state) else {
                continue;
            };
            if l.mirror_seen == Some(Some(l.state.seq as i64)) || l.mirror_done == Some(l.state.seq)
            {
                continue;
            }
            due.push(Mirror {
                touched,
                agg,
                l,
                key,
                attr,
                guard,
                next: None,
            });
        }
        if due.is_empty() {
            return Ok(());
        }
        let key_names = self.rules.key_names();
        let to_read: Vec<Item> = due.iter().map(|d| d.key.clone()).collect();
        let roots: HashMap<String, Item> =
            match self.store.batch_get(&self.config.table, to_read).await {
                Ok(items) => items
                    .into_iter()
                    .map(|i| (ledger::item_id(&crate::item::key_of(&i, key_names)), i))
                    .collect(),
                Err(e) => {
                    let at = due.iter().map(|d| d.touched).min().unwrap_or(0);
                    fail(at, e.into());
                    return first.map_or(Ok(()), Err);
                }
            };
        // The mirrors that differ from the count; one past it (`next`: the
        // entry after the count) is set lower.
        let mut wrong: Vec<Mirror<'_>> = Vec::new();
        for mut m in due {
            let Some(root) = roots.get(&ledger::item_id(&m.key)) else {
                continue;
            };
            let shown = root.opt_i64(m.attr).ok().flatten();
            let seq = m.l.state.seq as i64;
            if shown != Some(seq) {
                if shown.is_some_and(|h| h > seq) {
                    m.next = Some(self.rules.entry_key(m.agg, m.l.state.seq + 1));
                }
                wrong.push(m);
            }
        }
        // A mirror past the count is set back only while the entry after
        // the count is absent (as `verify --repair` sets it back): entries
        // past the HEAD's count that someone else wrote keep it.
        let next: Vec<Item> = wrong.iter().filter_map(|m| m.next.clone()).collect();
        let present: std::collections::HashSet<String> = if next.is_empty() {
            Default::default()
        } else {
            match self.store.batch_get(&self.config.table, next).await {
                Ok(items) => items
                    .iter()
                    .map(|i| ledger::item_id(&crate::item::key_of(i, key_names)))
                    .collect(),
                Err(e) => {
                    let at = wrong.iter().filter(|m| m.next.is_some()).map(|m| m.touched);
                    fail(at.min().unwrap_or(0), e.into());
                    wrong.retain(|m| m.next.is_none());
                    Default::default()
                }
            }
        };
        let table = &self.config.table;
        let writes: Vec<_> = wrong
            .into_iter()
            .filter(|m| {
                m.next
                    .as_ref()
                    .is_none_or(|n| !present.contains(&ledger::item_id(n)))
            })
            .map(|m| {
                let lower = m.next.is_some();
                let root = crate::item::display_key(&m.key);
                let update = self.mirror_set(m.key, m.attr, m.l.state.seq, lower, Some(&m.guard));
                async move {
                    let written = if lower {
                        self.fenced_mirror(m.agg, m.l, update).await
                    } else {
                        self.store.update(table, update).await.map(|_| ())
                    };
                    (m.touched, root, m.attr, written)
                }
            })
            .collect();
        let written: Vec<(usize, String, &str, Result<(), crate::error::StoreError>)> =
            stream::iter(writes)
                .buffer_unordered(MIRRORS_IN_FLIGHT)
                .collect()
                .await;
        for (touched, root, attr, r) in written {
            match r.map_err(ProcessError::from) {
                Ok(()) => {}
                Err(e) if e.policy() == crate::error::Policy::Skip => {
                    metrics.incr(names::BAD_INPUT);
                    tracing::warn!(processor = self.name, key = %root, error = %e, "skipping record: bad input: DynamoDB refuses the sequence mirror `{attr}` onto this root (never retried)");
                }
                Err(e) => fail(touched, e),
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// `update` (a mirror set lower) in one transaction with `agg`'s HEAD
    /// rewritten as it is, under its version guard: it lands only while
    /// no other consumer has moved the aggregate on (refused: nothing to
    /// do here, the newer state writes its own mirror).
    async fn fenced_mirror(
        &self,
        agg: &str,
        l: &Loaded,
        update: Update,
    ) -> Result<(), crate::error::StoreError> {
        if l.version == 0 {
            return Ok(());
        }
        let mut head = l.clone();
        let mut actions = self.commit_actions(agg, &mut head);
        actions.push(update.transact_item(&self.config.table));
        match self.store.transact(actions).await {
            Ok(()) | Err(TxError::ConditionsFailed { .. }) => Ok(()),
            Err(TxError::Store(e)) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delete(sk: usize, guard_bytes: usize) -> CascadeDelete {
        let key: Item = [
            ("PK".to_string(), s("ORDER#o1")),
            ("SK".to_string(), s(format!("LINE#{sk}"))),
        ]
        .into();
        CascadeDelete {
            key,
            unchanged: Some([("note".to_string(), s("x".repeat(guard_bytes)))].into()),
        }
    }

    /// A cascade's transactions hold up to 98 deletes and no more than
    /// 3.5 MB of keys and guards (a member's guard is the whole item as
    /// folded), and always at least one delete.
    #[test]
    fn a_cascade_is_cut_by_count_and_by_the_size_of_its_guards() {
        let small: Vec<CascadeDelete> = (0..250).map(|i| delete(i, 10)).collect();
        let small: Vec<&CascadeDelete> = small.iter().collect();
        assert_eq!(chunk_end(&small, 0), 98);
        assert_eq!(chunk_end(&small, 196), 250);
        let large: Vec<CascadeDelete> = (0..60).map(|i| delete(i, 300_000)).collect();
        let large: Vec<&CascadeDelete> = large.iter().collect();
        let end = chunk_end(&large, 0);
        assert_eq!(end, 11, "11 guards of 300 KB fit in 3.5 MB, 12 do not");
        let huge = [delete(0, 4_000_000)];
        let huge: Vec<&CascadeDelete> = huge.iter().collect();
        assert_eq!(chunk_end(&huge, 0), 1, "one delete at least");
    }
}
