//! What a fold does to the model table besides its entries: the sequence
//! mirror on the root, and the cascade when the root goes.

use super::*;

impl<R: FoldRules> FoldProcessor<R> {
    pub(super) fn mirror_update(&self, key: Item, attr: &'static str, seq: u64) -> Update {
        let k0 = self.rules.key_names()[0];
        Update {
            key,
            update_expression: "SET #a = :s".into(),
            condition_expression: Some(
                "attribute_exists(#k0) AND (attribute_not_exists(#a) OR #a < :s)".into(),
            ),
            names: vec![("#a".into(), attr.into()), ("#k0".into(), k0.into())],
            values: vec![(":s".into(), n(seq))],
        }
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
    /// the root's latest image does not already show it.
    pub(super) async fn write_mirrors(
        &self,
        states: &HashMap<String, Loaded>,
        limit: usize,
    ) -> Result<(), BatchFailure> {
        let mut first: Option<BatchFailure> = None;
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
            let want = l.state.seq as i64;
            if l.mirror_seen == Some(Some(want)) {
                continue;
            }
            if !l.advanced || l.base_seq.is_some_and(|b| l.state.seq <= b) {
                // Only replayed records, or no entry added by this batch:
                // the mirror was most likely written when the entries were
                // folded (unless that write was lost).
                match self.store.get(&self.config.table, key.clone()).await {
                    Ok(root) => {
                        let lags = root.is_some_and(|r| {
                            r.opt_i64(attr).ok().flatten().is_none_or(|h| h < want)
                        });
                        if !lags {
                            continue;
                        }
                    }
                    Err(e) => {
                        if first.as_ref().is_none_or(|f| touched < f.index) {
                            first = Some(BatchFailure {
                                index: touched,
                                error: e.into(),
                            });
                        }
                        continue;
                    }
                }
            }
            match self
                .store
                .update(
                    &self.config.table,
                    self.mirror_update(key, attr, l.state.seq),
                )
                .await
            {
                Ok(Written::Applied | Written::ConditionFailed) => {}
                Err(e) => {
                    if first.as_ref().is_none_or(|f| touched < f.index) {
                        first = Some(BatchFailure {
                            index: touched,
                            error: e.into(),
                        });
                    }
                }
            }
        }
        first.map_or(Ok(()), Err)
    }
}
