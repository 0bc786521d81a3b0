//! What a fold does to the model table besides its entries: the sequence
//! mirror on the root, and the cascade when the root goes.

use super::*;

/// Sequence mirror writes in flight at once.
const MIRRORS_IN_FLIGHT: usize = 8;

/// A sequence mirror to write: the first record touching the aggregate, the
/// root's key, the mirror attribute, the entries so far, whether the root
/// is read first, and whether the root was created in the batch (the
/// mirror is then set, not only raised).
type Due = (usize, Item, &'static str, u64, bool, bool);

impl<R: FoldRules + ?Sized> FoldProcessor<R> {
    pub(super) fn mirror_update(&self, key: Item, attr: &'static str, seq: u64) -> Update {
        self.mirror_set(key, attr, seq, false)
    }

    /// The mirror raised to `seq`; or, for an incarnation created in the
    /// batch (`created`), set to it: a lagging batch may have written an
    /// earlier incarnation's count onto the re-created item.
    fn mirror_set(&self, key: Item, attr: &'static str, seq: u64, created: bool) -> Update {
        let k0 = self.rules.key_names()[0];
        let cmp = if created { "<>" } else { "<" };
        Update {
            key,
            update_expression: "SET #a = :s".into(),
            condition_expression: Some(format!(
                "attribute_exists(#k0) AND (attribute_not_exists(#a) OR #a {cmp} :s)"
            )),
            names: vec![("#a".into(), attr.into()), ("#k0".into(), k0.into())],
            values: vec![(":s".into(), n(seq))],
        }
    }

    /// The sequence mirror's update inside the commit of `agg`'s last
    /// changes of the batch (one write per aggregate per batch, no request
    /// of its own), guarded as [`Self::mirror_update`]: a refusal (the root
    /// deleted since, or a mirror already there or ahead) cancels the
    /// transaction, which [`Self::flush`] sends again without it. `None`
    /// when the batch's records of `agg` are not all folded yet, when this
    /// batch added no entry (the root is read first, after the batch), or
    /// when the root's latest image already shows the number.
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
            || !(l.advanced && l.base_seq.is_some_and(|b| seq > b))
        {
            return None;
        }
        let (key, attr) = self.rules.sequence_mirror(agg)?;
        Some(
            self.mirror_set(key, attr, seq, l.created)
                .transact_item(&self.config.table),
        )
    }

    pub(super) async fn cascade(&self, c: &Cascade) -> Result<usize, ProcessError> {
        let mut unconditional = Vec::new();
        let mut deleted = 0;
        for d in &c.deletes {
            match &d.unchanged {
                None => unconditional.push(d.key.clone()),
                Some(expected) => {
                    let (cond, names, values) = unchanged_condition(expected);
                    if self
                        .store
                        .delete_if(&self.config.table, d.key.clone(), cond, names, values)
                        .await?
                        == Written::Applied
                    {
                        deleted += 1;
                    }
                }
            }
        }
        deleted += unconditional.len();
        self.store
            .delete_keys(&self.config.table, unconditional)
            .await?;
        Ok(deleted)
    }

    /// Writes the sequence mirror of every aggregate the batch touched, where
    /// the root's latest image does not already show it and no commit of
    /// the batch carried it ([`Self::mirror_action`]): a batch that only
    /// replays records or adds no entry, or whose last records of an
    /// aggregate changed nothing. Roots that may
    /// already show it are read first, 100 per BatchGetItem (strongly
    /// consistent, one read unit each as a GetItem); the writes go out
    /// [`MIRRORS_IN_FLIGHT`] at a time (distinct items, each guarded).
    pub(super) async fn write_mirrors(
        &self,
        states: &HashMap<String, Loaded>,
        limit: usize,
    ) -> Result<(), BatchFailure> {
        use futures::stream::{self, StreamExt};
        let mut first: Option<BatchFailure> = None;
        let mut fail = |index: usize, error: ProcessError| {
            if first.as_ref().is_none_or(|f| index < f.index) {
                first = Some(BatchFailure { index, error });
            }
        };
        let mut due: Vec<Due> = Vec::new();
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
            if l.mirror_seen == Some(Some(l.state.seq as i64)) || l.mirror_done == Some(l.state.seq)
            {
                continue;
            }
            // Only replayed records, or no entry added by this batch: the
            // mirror was most likely written when the entries were folded
            // (unless that write was lost).
            let check = !l.advanced || l.base_seq.is_some_and(|b| l.state.seq <= b);
            due.push((touched, key, attr, l.state.seq, check, l.created));
        }
        let key_names = self.rules.key_names();
        let to_read: Vec<Item> = due.iter().filter(|d| d.4).map(|d| d.1.clone()).collect();
        let roots: HashMap<String, Item> = if to_read.is_empty() {
            HashMap::new()
        } else {
            match self.store.batch_get(&self.config.table, to_read).await {
                Ok(items) => items
                    .into_iter()
                    .map(|i| (ledger::item_id(&crate::item::key_of(&i, key_names)), i))
                    .collect(),
                Err(e) => {
                    let at = due.iter().filter(|d| d.4).map(|d| d.0).min();
                    fail(at.unwrap_or(0), e.into());
                    due.retain(|d| !d.4);
                    HashMap::new()
                }
            }
        };
        due.retain(|(_, key, attr, seq, check, created)| {
            !check
                || roots.get(&ledger::item_id(key)).is_some_and(|r| {
                    r.opt_i64(attr)
                        .ok()
                        .flatten()
                        .is_none_or(|h| h < *seq as i64 || (*created && h != *seq as i64))
                })
        });
        let table = &self.config.table;
        let writes: Vec<_> = due
            .into_iter()
            .map(|(touched, key, attr, seq, _, created)| {
                let update = self.mirror_set(key, attr, seq, created);
                async move { (touched, self.store.update(table, update).await) }
            })
            .collect();
        let written: Vec<(usize, Result<Written, crate::error::StoreError>)> = stream::iter(writes)
            .buffer_unordered(MIRRORS_IN_FLIGHT)
            .collect()
            .await;
        for (touched, r) in written {
            if let Err(e) = r {
                fail(touched, e.into());
            }
        }
        first.map_or(Ok(()), Err)
    }
}
