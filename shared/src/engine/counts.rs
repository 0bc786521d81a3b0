//! Counters as a registry of contributions.
//!
//! Every item that contributes to a counter has a contribution record in the
//! ledger (`CONTRIB#<processor>#<counter>#<item key>`, value `v`). Settling an
//! item means: read what is recorded, write the item's current contribution
//! (conditioned on the recorded value still being there) and ADD the
//! difference to the counter, in one transaction. So:
//!
//! - redelivery changes nothing (recorded = current, difference 0, no write);
//! - items written before the stream existed, or before jobstream was
//!   deployed, count correctly from their first change (absent = 0), and a
//!   backfill counts them once (it only fills absent records);
//! - a stale backfill never overrides the stream: it only writes where no
//!   record exists, and a REMOVE leaves a zero tombstone (TTL 7 days).

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update as TxUpdate};
use chrono::{DateTime, Utc};

use super::derive::Counter;
use crate::batch::BatchFailure;
use crate::error::ProcessError;
use crate::item::{n, Item, ItemExt};
use crate::ledger;
use crate::store::{Store, TxError};

/// How long a zero tombstone of a removed item is kept.
pub const TOMBSTONE_TTL_SECS: i64 = 7 * 24 * 3600;

/// What an item should contribute to a counter now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The record (in the batch) this comes from, for failure reporting.
    pub index: usize,
    /// The item's key, rendered (`PK=APP#1, SK=APP#1`).
    pub item_key: String,
    pub counter: Counter,
    pub value: i64,
}

/// Live processing overrides what is recorded; a backfill only fills gaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Live,
    FillAbsent,
}

fn counter_id(c: &Counter) -> String {
    let key: Vec<String> = c.key.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{}|{}", key.join(","), c.attr)
}

/// Ledger key of an item's contribution to a counter.
pub fn contribution_key(processor: &str, counter: &Counter, item_key: &str) -> Item {
    ledger::key(
        format!("CONTRIB#{processor}#{}#{item_key}", counter_id(counter)),
        "C",
    )
}

fn counter_key(c: &Counter) -> Item {
    c.key
        .iter()
        .map(|(k, v)| (k.to_string(), AttributeValue::S(v.clone())))
        .collect()
}

/// What settling did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    /// Transaction actions written.
    pub written: usize,
    /// Contributions already recorded as they should be (redelivery).
    pub already: usize,
}

/// Settles `targets` (at most one per (item, counter)). On failure, names
/// the first record whose contribution could not be settled.
pub async fn settle(
    store: &Store,
    table: &str,
    ledger_table: &str,
    processor: &str,
    mut targets: Vec<Target>,
    mode: Mode,
    now: DateTime<Utc>,
) -> Result<Settled, BatchFailure> {
    targets.sort_by_key(|t| t.index);
    let mut settled = Settled::default();
    // Chunks of at most 99 contributions (+ the counters they touch <= 100).
    let mut start = 0;
    while start < targets.len() {
        let mut end = start;
        let mut counters = std::collections::BTreeSet::new();
        while end < targets.len() {
            let mut with = counters.clone();
            with.insert(targets[end].counter.clone());
            if end - start + 1 + with.len() > 100 {
                break;
            }
            counters = with;
            end += 1;
        }
        let chunk = &targets[start..end];
        let first = chunk[0].index;
        let fail = |error: ProcessError| BatchFailure {
            index: first,
            error,
        };
        let mut attempts = 0;
        loop {
            attempts += 1;
            let keys: Vec<Item> = chunk
                .iter()
                .map(|t| contribution_key(processor, &t.counter, &t.item_key))
                .collect();
            let recorded: HashMap<String, i64> = store
                .batch_get(ledger_table, keys)
                .await
                .map_err(|e| fail(e.into()))?
                .into_iter()
                .filter_map(|i| {
                    Some((
                        ledger::as_s(i.get(ledger::PK))?.to_string(),
                        i.i64("v").ok()?,
                    ))
                })
                .collect();
            let mut actions = Vec::new();
            let mut already = 0;
            let mut totals: BTreeMap<&Counter, i64> = BTreeMap::new();
            for t in chunk {
                let key = contribution_key(processor, &t.counter, &t.item_key);
                let pk = ledger::as_s(key.get(ledger::PK))
                    .unwrap_or_default()
                    .to_string();
                let stored = recorded.get(&pk).copied();
                let delta = match (mode, stored) {
                    (Mode::FillAbsent, Some(_)) => continue,
                    (_, None) if t.value == 0 => continue,
                    (_, s) => t.value - s.unwrap_or(0),
                };
                if delta == 0 {
                    already += usize::from(stored.is_some());
                    continue;
                }
                let mut item = key;
                item.insert("v".into(), n(t.value));
                if t.value == 0 {
                    item.insert(ledger::TTL.into(), n(now.timestamp() + TOMBSTONE_TTL_SECS));
                }
                let put = Put::builder().table_name(ledger_table).set_item(Some(item));
                let put = match stored {
                    None => put.condition_expression("attribute_not_exists(pk)"),
                    Some(s) => put
                        .condition_expression("v = :s")
                        .expression_attribute_values(":s", n(s)),
                };
                actions.push(
                    TransactWriteItem::builder()
                        .put(put.build().expect("table and item are set"))
                        .build(),
                );
                *totals.entry(&t.counter).or_insert(0) += delta;
            }
            for (c, d) in totals.iter().filter(|(_, d)| **d != 0) {
                actions.push(
                    TransactWriteItem::builder()
                        .update(
                            TxUpdate::builder()
                                .table_name(table)
                                .set_key(Some(counter_key(c)))
                                .update_expression("ADD #c :d")
                                .expression_attribute_names("#c", c.attr)
                                .expression_attribute_values(":d", n(d))
                                .build()
                                .expect("table, key and expression are set"),
                        )
                        .build(),
                );
            }
            if actions.is_empty() {
                settled.already += already;
                break;
            }
            let n_actions = actions.len();
            match store.transact(actions).await {
                Ok(()) => {
                    settled.written += n_actions;
                    settled.already += already;
                    break;
                }
                // Someone else settled one of these items meanwhile: read again.
                Err(TxError::ConditionsFailed { .. }) if attempts < 4 => continue,
                Err(TxError::ConditionsFailed { .. }) => {
                    return Err(fail(ProcessError::Conflict(
                        "contribution records keep changing".into(),
                    )))
                }
                Err(TxError::Store(e)) => return Err(fail(e.into())),
            }
        }
        start = end;
    }
    Ok(settled)
}
