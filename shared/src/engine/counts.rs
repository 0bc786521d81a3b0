//! Counter items: their attributes are the ledger totals.
//!
//! Contributions and their totals change atomically in the ledger (see
//! [`super::derive`]). A counter item in the table is then *set* to the
//! totals: one write per counter item per batch however many contributions
//! changed (a burst of likes coalesces into one write), in a transaction with
//! a condition check on the totals' version, so a slower writer holding older
//! totals can never overwrite newer ones.
//!
//! - processor-created counters (`Counter::create` is `Some`) are created on
//!   their first write, stamped, with every attribute present (0 when nothing
//!   counts), and deleted at zero if the model says so;
//! - writer-owned counters (`create` is `None`, e.g. a department's
//!   `headcount`) are never created: their totals wait in the ledger and are
//!   written when the item appears, and written back when a writer's put
//!   drops or changes them;
//! - the counter item's own projection (e.g. a padded sort key of the sum)
//!   is written in the same update, so its stream record is a fixpoint.
//!
//! The totals carry `ver` (moved by every commit) and `synced` (the `ver`
//! the counter item was last brought to, set in the same transaction as
//! the counter item's write). `synced != ver` is a counter item that lags:
//! a write lost after the ledger commit (a crash, throttling past the
//! retries). The sources whose change moved the totals list the counter in
//! their record until a reconcile finds it synced (see [`super::derive`]),
//! so the redelivery of the batch makes the write although it finds every
//! source unchanged.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, TransactWriteItem, Update as TxUpdate,
};
use futures::stream::{self, StreamExt};

use super::derive::{set_remove, total_attr, total_key, Deriver};
use super::locate::Located;
use super::rules::{Counter, Note};
use crate::error::{Policy, ProcessError};
use crate::item::{n, Item, ItemExt};
use crate::ledger::item_id;
use crate::store::TxError;

const ATTEMPTS: usize = 5;

/// Ledger totals of a counter item, and their version (0 = no totals yet).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    /// Sums of i64 contributions: exact past 64 bits, as DynamoDB adds
    /// them (38 digits).
    pub sums: BTreeMap<String, i128>,
    pub ver: i64,
    /// The `ver` the counter item was last brought to.
    pub synced: i64,
}

/// The totals attribute holding the version the counter item reflects.
pub const SYNCED: &str = "synced";

/// Whether a totals item says its counter item reflects it.
pub fn is_synced(totals: &Item) -> bool {
    let ver = totals.opt_i64("ver").ok().flatten().unwrap_or(0);
    let synced = totals.opt_i64(SYNCED).ok().flatten();
    synced == Some(ver)
}

impl Totals {
    /// The totals of a ledger item; a sum DynamoDB holds and an i128 does
    /// not (it refuses to add past 38 digits) is an error, never a wrapped
    /// number or 0.
    fn from_item(item: &Item, counter: &Counter) -> Result<Self, String> {
        let mut sums = BTreeMap::new();
        for a in counter.attrs {
            let v = item
                .opt_i128(&total_attr(a))
                .map_err(|_| format!("the sum of {a} does not fit 38 digits"))?
                .unwrap_or(0);
            sums.insert(a.to_string(), v);
        }
        Ok(Self {
            sums,
            ver: item.opt_i64("ver").ok().flatten().unwrap_or(0),
            synced: item.opt_i64(SYNCED).ok().flatten().unwrap_or(-1),
        })
    }

    fn zero(counter: &Counter) -> Self {
        Self {
            sums: counter.attrs.iter().map(|a| (a.to_string(), 0)).collect(),
            ver: 0,
            synced: 0,
        }
    }
}

/// What the counter item should become.
enum Target {
    Nothing,
    Delete,
    Update {
        sets: Vec<(String, AttributeValue)>,
        removes: Vec<String>,
        /// Notes of the counter item's own projection, as written.
        notes: Vec<Note>,
    },
}

/// The write that brings `item` (absent: `None`) to `totals`.
fn target(deriver: &Deriver, counter: &Counter, item: Option<&Item>, totals: &Totals) -> Target {
    let zero = totals.sums.values().all(|v| *v == 0);
    let created = counter.create.is_some();
    // Nothing is written onto an item the rules reject (its bad input is
    // counted where its record is read, once); the sums wait in the ledger.
    if item.is_some_and(|i| super::derive::rejects(deriver.rules.as_ref(), i)) {
        return Target::Nothing;
    }
    match item {
        None if !created => return Target::Nothing,
        // Nothing ever counted into it: nothing to bring back.
        None if totals.ver == 0 => return Target::Nothing,
        None if zero && counter.remove_at_zero => return Target::Nothing,
        Some(_) if created && zero && counter.remove_at_zero => return Target::Delete,
        _ => {}
    }
    let mut prospective = item.cloned().unwrap_or_else(|| counter.key_item());
    for (a, v) in &totals.sums {
        prospective.insert(a.clone(), n(v));
    }
    for (a, v) in counter.create.iter().flatten() {
        prospective.insert(a.to_string(), v.clone());
    }
    let mut removes = Vec::new();
    let mut notes = deriver.rules.notes(&prospective);
    let mut projected = Vec::new();
    if let Ok(Some(p)) = deriver.rules.projection(&prospective) {
        for (a, v) in p.attrs {
            projected.push(a);
            match v {
                Some(v) => {
                    prospective.insert(a.to_string(), v);
                }
                None => {
                    if prospective.remove(a).is_some() {
                        removes.push(a.to_string());
                    }
                }
            }
        }
    }
    let current = item.cloned().unwrap_or_default();
    let key_names = deriver.rules.key_names();
    let sets: Vec<(String, AttributeValue)> = prospective
        .into_iter()
        .filter(|(a, v)| !key_names.contains(&a.as_str()) && current.get(a) != Some(v))
        .collect();
    // A projection's notes concern its write: none when it is unchanged.
    if !sets.iter().any(|(a, _)| projected.contains(&a.as_str())) && removes.is_empty() {
        notes.clear();
    }
    if sets.is_empty() && removes.is_empty() {
        Target::Nothing
    } else {
        Target::Update {
            sets,
            removes,
            notes,
        }
    }
}

/// Sets every given counter item to its ledger totals. Returns the item
/// writes made and the notes of what was written (a sum that does not fit
/// an i64 is noted as bad input and its counter item left as it is).
pub async fn sync(
    deriver: &Deriver,
    counters: Vec<Counter>,
) -> Result<(usize, Vec<(Item, Note)>), ProcessError> {
    let mut writes = 0;
    let mut notes = Vec::new();
    for chunk in counters.chunks(100) {
        let futures: Vec<_> = chunk.iter().map(|c| sync_one(deriver, c)).collect();
        let results: Vec<Result<(usize, Vec<Note>), ProcessError>> = stream::iter(futures)
            .buffer_unordered(deriver.concurrency.max(1))
            .collect()
            .await;
        for (c, r) in chunk.iter().zip(results) {
            let (w, n) = match r {
                Ok(r) => r,
                // No retry can fix it (e.g. the counter's own projection
                // over a key limit): noted as bad input, never a stall.
                Err(e) if e.policy() == Policy::Skip => (
                    0,
                    vec![Note {
                        metric: crate::metrics::names::BAD_INPUT,
                        reason: format!(
                            "DynamoDB rejects the write of this counter ({})",
                            e.code()
                        ),
                    }],
                ),
                Err(e) => return Err(e),
            };
            writes += w;
            notes.extend(n.into_iter().map(|n| (c.key_item(), n)));
        }
    }
    Ok((writes, notes))
}

/// Reads a counter's totals and item and writes the difference, retrying
/// when the totals moved meanwhile.
async fn sync_one(
    deriver: &Deriver,
    counter: &Counter,
) -> Result<(usize, Vec<Note>), ProcessError> {
    let logical = counter.key_item();
    let k0 = deriver.rules.key_names()[0];
    let locate = deriver.rules.locate(&logical);
    for _ in 0..ATTEMPTS {
        let totals = match deriver
            .store
            .get(
                &deriver.ledger_table,
                total_key(deriver.processor, &logical),
            )
            .await?
        {
            Some(t) => match Totals::from_item(&t, counter) {
                Ok(t) => t,
                Err(reason) => {
                    return Ok((
                        0,
                        vec![Note {
                            metric: crate::metrics::names::BAD_INPUT,
                            reason,
                        }],
                    ))
                }
            },
            None => Totals::zero(counter),
        };
        // The counter item: at its key, or found through its identity.
        let (key, item) = match &locate {
            None => (
                logical.clone(),
                deriver.store.get(&deriver.table, logical.clone()).await?,
            ),
            Some(l) => match super::locate::find(deriver, &logical, l).await? {
                Located::One(key, item) => (key, Some(item)),
                Located::Nowhere => (logical.clone(), None),
                Located::Contested(keys) => {
                    return Ok((
                        0,
                        vec![Note {
                            metric: crate::metrics::names::BAD_INPUT,
                            reason: super::locate::contested_reason(&keys),
                        }],
                    ))
                }
            },
        };
        let mut notes = Vec::new();
        let write = match target(deriver, counter, item.as_ref(), &totals) {
            // The item is right; the totals learn it if they did not know.
            Target::Nothing if totals.synced == totals.ver => return Ok((0, vec![])),
            Target::Nothing => None,
            Target::Delete => Some(
                TransactWriteItem::builder()
                    .delete(
                        Delete::builder()
                            .table_name(&deriver.table)
                            .set_key(Some(key.clone()))
                            .build()
                            .expect("table and key are set"),
                    )
                    .build(),
            ),
            Target::Update {
                sets,
                removes,
                notes: n,
            } => {
                notes = n;
                let mut upd = TxUpdate::builder()
                    .table_name(&deriver.table)
                    .set_key(Some(key.clone()));
                let mut set_exprs = Vec::new();
                for (i, (a, v)) in sets.into_iter().enumerate() {
                    set_exprs.push(format!("#a{i} = :a{i}"));
                    upd = upd
                        .expression_attribute_names(format!("#a{i}"), a)
                        .expression_attribute_values(format!(":a{i}"), v);
                }
                let mut remove_exprs = Vec::new();
                for (i, a) in removes.into_iter().enumerate() {
                    remove_exprs.push(format!("#r{i}"));
                    upd = upd.expression_attribute_names(format!("#r{i}"), a);
                }
                if counter.create.is_none() {
                    // Never create a writer's item; a located one must
                    // still carry the identity it was found by.
                    let mut cond = vec!["attribute_exists(#k0)".to_string()];
                    for (i, (a, v)) in locate.iter().flat_map(|l| &l.identity).enumerate() {
                        cond.push(format!("#l{i} = :l{i}"));
                        upd = upd
                            .expression_attribute_names(format!("#l{i}"), *a)
                            .expression_attribute_values(format!(":l{i}"), v.clone());
                    }
                    upd = upd
                        .condition_expression(cond.join(" AND "))
                        .expression_attribute_names("#k0", k0);
                }
                Some(
                    TransactWriteItem::builder()
                        .update(
                            upd.update_expression(set_remove(&set_exprs, &remove_exprs))
                                .build()
                                .expect("table, key and expression are set"),
                        )
                        .build(),
                )
            }
        };
        // The totals, unchanged since read, record that the item reflects
        // them (no totals yet: they must still not exist).
        let guard = if totals.ver == 0 {
            TransactWriteItem::builder()
                .condition_check(
                    ConditionCheck::builder()
                        .table_name(&deriver.ledger_table)
                        .set_key(Some(total_key(deriver.processor, &logical)))
                        .condition_expression("attribute_not_exists(pk)")
                        .build()
                        .expect("table, key and condition are set"),
                )
                .build()
        } else {
            TransactWriteItem::builder()
                .update(
                    TxUpdate::builder()
                        .table_name(&deriver.ledger_table)
                        .set_key(Some(total_key(deriver.processor, &logical)))
                        .update_expression("SET #synced = :v")
                        .condition_expression("ver = :v")
                        .expression_attribute_names("#synced", SYNCED)
                        .expression_attribute_values(":v", n(totals.ver))
                        .build()
                        .expect("table, key and expression are set"),
                )
                .build()
        };
        let item_writes = usize::from(write.is_some());
        let mut actions = vec![guard];
        actions.extend(write);
        match deriver.store.transact(actions).await {
            Ok(()) => return Ok((item_writes, if item_writes > 0 { notes } else { vec![] })),
            // Totals moved, or the writer's item went away meanwhile: read
            // again.
            Err(TxError::ConditionsFailed { .. }) => continue,
            Err(TxError::Store(e)) => return Err(e.into()),
        }
    }
    Err(ProcessError::Conflict(format!(
        "totals of counter {} keep changing",
        item_id(&logical)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::s;

    #[test]
    fn totals_past_an_i64_are_exact_and_past_38_digits_an_error_not_zero() {
        let counter = Counter {
            key: vec![("PK", "u#1".into()), ("SK", "count".into())],
            attrs: &["a"],
            create: Some(vec![]),
            remove_at_zero: false,
        };
        let mut item: Item = [("pk".to_string(), s("TOTAL#derive#x"))].into();
        item.insert("ver".into(), n(3));
        item.insert(
            total_attr("a"),
            AttributeValue::N("9223372036854775808".into()),
        );
        let t = Totals::from_item(&item, &counter).unwrap();
        assert_eq!(t.sums["a"], 1 << 63);
        item.insert(total_attr("a"), AttributeValue::N("9".repeat(40)));
        assert!(Totals::from_item(&item, &counter).is_err());
        item.insert(total_attr("a"), n(-7));
        let t = Totals::from_item(&item, &counter).unwrap();
        assert_eq!(t.sums["a"], -7);
        assert_eq!((t.ver, t.synced), (3, -1), "never synced");
        item.insert(SYNCED.into(), n(3));
        assert!(is_synced(&item));
    }
}
