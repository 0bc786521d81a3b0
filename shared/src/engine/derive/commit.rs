//! The group's writes: guarded projections, then the ledger commit in
//! transactions of at most 100 actions with the counters' totals.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::{TransactWriteItem, Update as TxUpdate};
use futures::stream::{self, StreamExt};

use super::keys::{total_attr, total_key};
use super::owners::SharedPlan;
use super::plan::KeyPlan;
use super::{Deriver, Note, ToSync};
use crate::error::{InputError, Policy, ProcessError};
use crate::item::{n, Item};
use crate::ledger::item_id;
use crate::limits::{MAX_TX_ACTIONS, MAX_TX_BYTES};
use crate::store::{TxError, Update, Written};
use crate::tx;

pub(super) enum Retry {
    Conflict(usize),
    Failed(usize, ProcessError),
}

/// What [`Deriver::write_projections`] wrote and noted, and the items whose
/// projection DynamoDB rejected.
#[derive(Default)]
pub(super) struct Projected {
    pub(super) written: usize,
    pub(super) notes: Vec<(Item, Note)>,
    pub(super) bad: Vec<(usize, InputError)>,
}

/// What [`Deriver::commit`] wrote, and the sources DynamoDB rejected.
pub(super) struct Committed {
    pub(super) table_writes: usize,
    pub(super) ledger_writes: usize,
    pub(super) bad: Vec<(usize, InputError)>,
}

impl Deriver {
    pub(super) async fn write_projections(
        &self,
        updates: Vec<(usize, Update, Vec<Note>)>,
    ) -> Result<Projected, (usize, ProcessError)> {
        let table = &self.table;
        let results: Vec<(usize, Item, Vec<Note>, Result<Written, _>)> = stream::iter(updates)
            .map(|(i, u, notes)| async move {
                let key = u.key.clone();
                (i, key, notes, self.store.update(table, u).await)
            })
            .buffer_unordered(self.concurrency.max(1))
            .collect()
            .await;
        let mut out = Projected::default();
        let mut first: Option<(usize, ProcessError)> = None;
        for (i, key, notes, r) in results {
            match r.map_err(ProcessError::from) {
                Ok(Written::Applied) => {
                    out.written += 1;
                    out.notes
                        .extend(notes.into_iter().map(|n| (key.clone(), n)));
                }
                // A newer write won; its record fixes the projection.
                Ok(Written::ConditionFailed) => {}
                // No retry can fix it: bad input of this item.
                Err(e) if e.policy() == Policy::Skip => out.bad.push((
                    i,
                    InputError::Invalid {
                        key: crate::item::display_key(&key),
                        reason: format!("DynamoDB rejects its projection ({})", e.code()),
                    },
                )),
                Err(e) => {
                    if first.as_ref().is_none_or(|(f, _)| i < *f) {
                        first = Some((i, e));
                    }
                }
            }
        }
        first.map_or(Ok(out), Err)
    }

    /// Commits plans in transactions of at most 100 actions: each plan's
    /// actions plus one totals update per counter. Returns (table, ledger)
    /// item writes.
    pub(super) async fn commit(
        &self,
        plans: Vec<KeyPlan>,
        to_sync: &mut ToSync<'_>,
        shared: &mut BTreeMap<String, SharedPlan>,
    ) -> Result<Committed, Retry> {
        let mut table_writes = 0;
        let mut ledger_writes = 0;
        let mut bad = Vec::new();
        // Plans before this index go one per transaction: a transaction
        // DynamoDB rejected is split to find the source it cannot take.
        let mut alone_until = 0;
        let mut i = 0;
        while i < plans.len() {
            let mut j = i;
            let mut n_actions = 0;
            let mut n_bytes = 0;
            let mut totals: BTreeMap<String, (Item, BTreeMap<String, i128>)> = BTreeMap::new();
            // Shared derived items of the chunk: a head and an item each.
            let mut heads: BTreeSet<&String> = BTreeSet::new();
            while j < plans.len() {
                let p = &plans[j];
                let new_counters = p.deltas.keys().filter(|k| !totals.contains_key(*k)).count();
                let new_heads: Vec<&String> =
                    p.shared.iter().filter(|d| !heads.contains(d)).collect();
                let head_bytes: usize = new_heads
                    .iter()
                    .filter_map(|d| shared.get(*d))
                    .map(SharedPlan::bytes)
                    .sum();
                if j > i
                    && (j < alone_until
                        || n_actions
                            + p.actions.len()
                            + totals.len()
                            + new_counters
                            + 2 * (heads.len() + new_heads.len())
                            > MAX_TX_ACTIONS
                        || n_bytes + p.bytes + head_bytes > MAX_TX_BYTES)
                {
                    break;
                }
                n_actions += p.actions.len();
                n_bytes += p.bytes + head_bytes;
                heads.extend(new_heads);
                for (id, (key, d)) in &p.deltas {
                    let e = totals
                        .entry(id.clone())
                        .or_insert_with(|| (key.clone(), BTreeMap::new()));
                    for (a, v) in d {
                        *e.1.entry(a.clone()).or_insert(0) += v;
                    }
                }
                j += 1;
            }
            let chunk = &plans[i..j];
            let first = chunk[0].pos;
            let mut actions: Vec<TransactWriteItem> = Vec::new();
            for p in chunk {
                actions.extend(p.actions.iter().cloned());
            }
            // The heads and items of the shared derived items the chunk's
            // owners change, as they are once it commits.
            let positions: BTreeSet<usize> = chunk.iter().map(|p| p.pos).collect();
            let mut steps = Vec::new();
            for (id, plan) in shared.iter() {
                if !plan.touched_by(&positions) {
                    continue;
                }
                if let Some(step) = plan.step(&positions) {
                    actions.extend(step.actions.iter().cloned());
                    steps.push((id.clone(), step));
                }
            }
            let mut n_totals = 0;
            for (key, d) in totals.values() {
                let d: Vec<(&String, &i128)> = d.iter().filter(|(_, v)| **v != 0).collect();
                if d.is_empty() {
                    continue;
                }
                n_totals += 1;
                let mut adds = vec!["ver :one".to_string()];
                let mut upd = TxUpdate::builder()
                    .table_name(&self.ledger_table)
                    .set_key(Some(total_key(self.processor, key)))
                    .expression_attribute_values(":one", n(1));
                for (k, (attr, v)) in d.iter().enumerate() {
                    adds.push(format!("#t{k} :d{k}"));
                    upd = upd
                        .expression_attribute_names(format!("#t{k}"), total_attr(attr))
                        .expression_attribute_values(format!(":d{k}"), n(v));
                }
                upd = upd.update_expression(format!("ADD {}", adds.join(", ")));
                actions.push(tx::update_of(upd));
            }
            let table_actions: usize = chunk
                .iter()
                .map(|p| p.actions.len() - 1 - p.extra_ledger)
                .sum();
            let records: usize = chunk
                .iter()
                .map(|p| usize::from(p.record_written) + p.extra_ledger)
                .sum();
            let step_table: usize = steps.iter().map(|(_, s)| s.table_writes).sum();
            let step_ledger = steps.len();
            match self.store.transact(actions).await {
                Ok(()) => {
                    table_writes += table_actions + step_table;
                    ledger_writes += records + n_totals + step_ledger;
                    for (id, step) in steps {
                        if let Some(plan) = shared.get_mut(&id) {
                            plan.adopt(step.next);
                        }
                    }
                    for p in chunk {
                        for (key, _) in p.deltas.values() {
                            if let Some(c) = self.rules.counter(key) {
                                to_sync.counters.insert(item_id(key), c);
                            }
                        }
                        to_sync.count(self.rules.as_ref(), &p.counted);
                    }
                }
                Err(TxError::ConditionsFailed { .. }) => return Err(Retry::Conflict(first)),
                Err(TxError::Store(e)) => {
                    let e = ProcessError::from(e);
                    if e.policy() == Policy::Retry {
                        return Err(Retry::Failed(first, e));
                    }
                    if chunk.len() > 1 {
                        // Which source? Each alone.
                        alone_until = j;
                        continue;
                    }
                    // No retry can fix it: bad input of this source,
                    // nothing written for it, the shard moves on.
                    let code = e.code();
                    bad.push((
                        first,
                        InputError::Invalid {
                            key: crate::item::display_key(&chunk[0].key),
                            reason: format!(
                                "DynamoDB rejects the writes it implies ({code}); nothing written for it"
                            ),
                        },
                    ));
                }
            }
            i = j;
        }
        Ok(Committed {
            table_writes,
            ledger_writes,
            bad,
        })
    }
}
