//! The derive engine: projections, derived items and counters, from the item
//! *as it is*.
//!
//! A stream record tells the engine *which* item changed; what the item
//! implies is computed from a consistent read of the item now
//! ([`Deriver::reconcile`]), never from the record's image. So:
//!
//! - a redelivered or replayed record (Lambda retry, bisect, a restarted
//!   consumer reading from TRIM_HORIZON) finds everything already as the
//!   current item implies and writes nothing: no derived datum ever moves
//!   backwards, not even for a moment;
//! - a MODIFY that only touched processor-owned attributes (GSI keys,
//!   `historySequence`, counter sums) costs reads and no write (fixpoint);
//! - backfill and `verify --repair` call the very same function.
//!
//! What each source item implies (its contributions and its derived items)
//! is recorded in the ledger (`SRC#<processor>#<item id>`, a version `ver`).
//! Every change of it is one transaction: the record, conditioned on the
//! version read, the derived items' puts and deletes, and one update per
//! counter of the ledger totals (`TOTAL#<processor>#<counter id>`). The
//! record is read *before* the item, so whichever of two concurrent writers
//! (the stream consumer and a backfill) commits last read the newer item.
//! Counter items in the table are then set to the ledger totals, once per
//! counter item per batch (see [`super::counts`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, Put, TransactWriteItem, Update as TxUpdate,
};
use chrono::{DateTime, Utc};
use futures::stream::{self, StreamExt};

pub use super::rules::{Contribution, Counter, Note, OutMessage, Projection, Rules};
use super::writable::{self, Writes};
use crate::batch::{log_bad_input, BatchFailure, StreamProcessor};
use crate::change::{Change, ChangeKind};
use crate::error::{InputError, Policy, ProcessError};
use crate::item::{item_size, key_of, n, Item, ItemExt};
use crate::ledger::{self, item_id};
use crate::limits::{KeyLimits, MAX_TX_ACTIONS, MAX_TX_BYTES};
use crate::metrics::{names, BatchMetrics, Metrics};
use crate::store::{Store, TxError, Update, Written};

/// How long the empty record of an item that implies nothing any more is
/// kept (so that a stale backfill cannot count a deleted item).
pub const TOMBSTONE_TTL_SECS: i64 = 7 * 24 * 3600;

/// Source items reconciled per transaction group.
const GROUP: usize = 25;
const ATTEMPTS: usize = 5;

/// The SET/REMOVE needed to bring `image` to `projection`, or `None` when the
/// image already carries the computed values (the fixpoint).
pub fn projection_update(
    key_names: &[&str],
    image: &Item,
    projection: &Projection,
) -> Option<Update> {
    let mut sets = Vec::new();
    let mut removes = Vec::new();
    let mut names = Vec::new();
    let mut values = Vec::new();
    for (i, (attr, want)) in projection.attrs.iter().enumerate() {
        let have = image.get(*attr);
        if crate::item::same_opt(have, want.as_ref()) {
            continue;
        }
        names.push((format!("#p{i}"), attr.to_string()));
        match want {
            Some(v) => {
                sets.push(format!("#p{i} = :p{i}"));
                values.push((format!(":p{i}"), v.clone()));
            }
            None => removes.push(format!("#p{i}")),
        }
    }
    if sets.is_empty() && removes.is_empty() {
        return None;
    }
    let mut conditions = vec!["attribute_exists(#k0)".to_string()];
    names.push(("#k0".to_string(), key_names[0].to_string()));
    for (i, src) in projection.sources.iter().enumerate() {
        names.push((format!("#s{i}"), src.to_string()));
        match image.get(*src) {
            Some(v) => {
                conditions.push(format!("#s{i} = :s{i}"));
                values.push((format!(":s{i}"), v.clone()));
            }
            None => conditions.push(format!("attribute_not_exists(#s{i})")),
        }
    }
    Some(Update {
        key: key_of(image, key_names),
        update_expression: set_remove(&sets, &removes),
        condition_expression: Some(conditions.join(" AND ")),
        names,
        values,
    })
}

/// `SET a, b REMOVE c` from its parts.
pub(crate) fn set_remove(sets: &[String], removes: &[String]) -> String {
    let mut expr = String::new();
    if !sets.is_empty() {
        expr.push_str("SET ");
        expr.push_str(&sets.join(", "));
    }
    if !removes.is_empty() {
        if !expr.is_empty() {
            expr.push(' ');
        }
        expr.push_str("REMOVE ");
        expr.push_str(&removes.join(", "));
    }
    expr
}

/// What one source item implies, as recorded in the ledger.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Implied {
    /// counter id -> (counter key, attribute -> amount)
    pub contributions: BTreeMap<String, (Item, BTreeMap<String, i64>)>,
    /// derived item id -> the item as this source wrote it
    pub derived: BTreeMap<String, Item>,
    /// Ledger index entries: (index, member).
    pub indexed: BTreeSet<(String, String)>,
}

impl Implied {
    pub fn is_empty(&self) -> bool {
        self.contributions.is_empty() && self.derived.is_empty() && self.indexed.is_empty()
    }

    pub(crate) fn from_rules(
        contributions: &[Contribution],
        derived: &[Item],
        key_names: &[&str],
    ) -> Self {
        let mut out = Implied {
            contributions: sum_contributions(contributions).unwrap_or_default(),
            ..Implied::default()
        };
        for d in derived {
            out.derived
                .insert(item_id(&key_of(d, key_names)), d.clone());
        }
        out
    }

    pub(crate) fn to_attrs(&self) -> Item {
        let contributions = self
            .contributions
            .iter()
            .map(|(id, (key, values))| {
                let values = values.iter().map(|(a, v)| (a.clone(), n(v))).collect();
                let entry: Item = [
                    ("k".to_string(), AttributeValue::M(key.clone())),
                    ("v".to_string(), AttributeValue::M(values)),
                ]
                .into();
                (id.clone(), AttributeValue::M(entry))
            })
            .collect();
        let derived = self
            .derived
            .iter()
            .map(|(id, item)| (id.clone(), AttributeValue::M(item.clone())))
            .collect();
        let mut out: Item = [
            ("c".to_string(), AttributeValue::M(contributions)),
            ("d".to_string(), AttributeValue::M(derived)),
        ]
        .into();
        if !self.indexed.is_empty() {
            let entries = self
                .indexed
                .iter()
                .map(|(i, m)| {
                    AttributeValue::L(vec![
                        AttributeValue::S(i.clone()),
                        AttributeValue::S(m.clone()),
                    ])
                })
                .collect();
            out.insert("x".to_string(), AttributeValue::L(entries));
        }
        out
    }

    /// Reads a ledger record back.
    pub fn from_record(record: &Item) -> Result<Self, String> {
        let mut out = Implied::default();
        if let Some(AttributeValue::M(c)) = record.get("c") {
            for (id, entry) in c {
                let AttributeValue::M(entry) = entry else {
                    return Err(format!("contribution {id} is not a map"));
                };
                let (Some(AttributeValue::M(key)), Some(AttributeValue::M(values))) =
                    (entry.get("k"), entry.get("v"))
                else {
                    return Err(format!("contribution {id} lacks k or v"));
                };
                let mut parsed = BTreeMap::new();
                for attr in values.keys() {
                    let v = values.i64(attr).map_err(|e| e.to_string())?;
                    parsed.insert(attr.clone(), v);
                }
                out.contributions.insert(id.clone(), (key.clone(), parsed));
            }
        }
        if let Some(AttributeValue::L(x)) = record.get("x") {
            for entry in x {
                match entry {
                    AttributeValue::L(pair) => match pair.as_slice() {
                        [AttributeValue::S(i), AttributeValue::S(m)] => {
                            out.indexed.insert((i.clone(), m.clone()));
                        }
                        _ => return Err("index entry is not [index, member]".into()),
                    },
                    _ => return Err("index entry is not a list".into()),
                }
            }
        }
        if let Some(AttributeValue::M(d)) = record.get("d") {
            for (id, key) in d {
                let AttributeValue::M(key) = key else {
                    return Err(format!("derived {id} is not a map"));
                };
                out.derived.insert(id.clone(), key.clone());
            }
        }
        Ok(out)
    }
}

/// Contributions summed per counter and attribute.
type Sums = BTreeMap<String, (Item, BTreeMap<String, i64>)>;

/// One item's contributions summed per counter and attribute; a sum that
/// does not fit an i64 is an error (bad input, never a wrapped number).
fn sum_contributions(contributions: &[Contribution]) -> Result<Sums, String> {
    let mut out: Sums = BTreeMap::new();
    for c in contributions {
        let key = c.counter.key_item();
        let entry = out
            .entry(item_id(&key))
            .or_insert_with(|| (key, BTreeMap::new()));
        for (attr, v) in &c.values {
            let sum = entry.1.entry(attr.to_string()).or_insert(0);
            *sum = sum
                .checked_add(*v)
                .ok_or_else(|| format!("the contributions to {attr} overflow a 64-bit integer"))?;
        }
    }
    Ok(out)
}

/// Ledger key of what a source item implies.
pub fn source_key(processor: &str, item_key: &Item) -> Item {
    ledger::key(source_key_pk(processor, item_key), "S")
}

/// Ledger key of the owners of a derived item several sources may imply
/// (see [`Rules::shared`]).
pub fn owners_key(processor: &str, derived_key: &Item) -> Item {
    ledger::key(
        ledger::bounded_pk(&format!("OWN#{processor}#"), &item_id(derived_key)),
        "O",
    )
}

/// `pk` of a ledger index (see [`Rules::memberships`]), bounded like every
/// ledger key ([`ledger::bounded_pk`]: an index named after a GSI partition
/// value may take 2,048 bytes of its own).
pub fn index_pk(index: &str) -> String {
    ledger::bounded_pk("IDX#", index)
}

/// Ledger key of one member of a ledger index (the member bounded to a sort
/// key's 1,024 bytes: [`ledger::bounded_sk`]).
pub fn index_key(index: &str, member: &str) -> Item {
    ledger::key(index_pk(index), ledger::bounded_sk(member))
}

/// The ledger item of one member of a ledger index: its key, and the member
/// itself where the key holds its hash.
pub fn index_item(index: &str, member: &str) -> Item {
    let mut item = index_key(index, member);
    if ledger::sk_is_hashed(member) {
        item.insert(ledger::HASHED_VALUE.into(), crate::item::s(member));
    }
    item
}

/// One page of a ledger index's members after `after` (consistent read),
/// and where the next page starts (`None`: this is the last).
pub async fn index_members(
    store: &Store,
    ledger_table: &str,
    index: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<(Vec<String>, Option<String>), crate::error::StoreError> {
    let (items, next) = store
        .query_page(
            ledger_table,
            ledger::PK,
            &index_pk(index),
            ledger::SK,
            after,
            limit,
        )
        .await?;
    let members = items
        .iter()
        .filter_map(|i| ledger::sk_value(i).map(str::to_string))
        .collect();
    Ok((members, next))
}

/// Ledger key of a counter item's totals.
pub fn total_key(processor: &str, counter_key: &Item) -> Item {
    ledger::key(total_pk(processor, counter_key), "T")
}

/// The ledger attribute holding a counter attribute's total.
pub fn total_attr(attr: &str) -> String {
    format!("t_{attr}")
}

/// A source item's recorded state: what it implies, the record version,
/// and the counters its changes may still owe a write.
#[derive(Debug, Clone, Default)]
struct Recorded {
    implied: Implied,
    /// 0 = no record.
    ver: i64,
    /// counter id -> counter key: the counters whose totals this source's
    /// last change(s) moved. Each is synced whenever the source is
    /// reconciled and its totals show a counter item that lags, so a
    /// counter write lost after the ledger commit (a crash, throttling past
    /// the retries) is made by the redelivery, which finds the source
    /// itself unchanged.
    owed: BTreeMap<String, Item>,
}

/// The record attribute listing the counters a source's change still owes.
const OWED: &str = "o";

/// What a reconcile run did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Reconciled {
    /// Item writes in the model table (projections, derived items, counters).
    pub table_writes: usize,
    /// Item writes in the ledger (records, totals).
    pub ledger_writes: usize,
    /// Source items whose recorded state already matched (nothing to do).
    pub unchanged: usize,
    /// Bad input met, by position in the keys given (logged by the caller).
    pub bad: Vec<(usize, InputError)>,
    /// Notes of what was written (logged and counted by the caller): by
    /// the key of the item written.
    pub notes: Vec<(Item, Note)>,
}

/// Per-key knowledge from the stream (not needed for correctness, only to
/// decide whether an absent item needs a tombstone).
#[derive(Debug, Clone, Copy, Default)]
pub struct Hint {
    /// An image of this item implied something (so its absence must be
    /// recorded even if nothing was recorded before).
    pub implied_something: bool,
}

/// The engine core shared by the stream processor, backfill and repair.
#[derive(Clone)]
pub struct Deriver {
    pub rules: Arc<dyn Rules>,
    pub store: Store,
    pub table: String,
    pub ledger_table: String,
    pub processor: &'static str,
    /// Projection writes in flight at once.
    pub concurrency: usize,
    pub now: fn() -> DateTime<Utc>,
    /// The table's key and index key limits: what an item implies is
    /// checked against them before anything is written.
    pub limits: KeyLimits,
}

/// The plan for one source item.
struct KeyPlan {
    pos: usize,
    /// The record write (put or, when unchanged but derived items must be
    /// written, a condition check) and the derived items' writes.
    actions: Vec<TransactWriteItem>,
    record_written: bool,
    /// Ledger actions among `actions` besides the head (owner records).
    extra_ledger: usize,
    deltas: BTreeMap<String, (Item, BTreeMap<String, i128>)>,
    /// The source item's key (for the log when DynamoDB rejects its writes).
    key: Item,
    /// What its actions weigh in a transaction (bytes, approximately).
    bytes: usize,
}

/// What a transaction action weighs toward the 4 MB of a transaction.
fn action_bytes(a: &TransactWriteItem) -> usize {
    if let Some(p) = a.put() {
        return item_size(p.item());
    }
    let key = a
        .update()
        .map(|u| u.key())
        .or(a.delete().map(|d| d.key()))
        .or(a.condition_check().map(|c| c.key()));
    key.map_or(0, item_size) + 256
}

/// Writes of derived items (and their owner records) a source carries into
/// its transaction on behalf of its group.
#[derive(Default)]
struct Carried {
    actions: Vec<TransactWriteItem>,
    /// How many of `actions` are ledger writes.
    ledger: usize,
}

/// The owners of a derived item that several sources may imply: who
/// implies it with what content, and the record version (0 = no record).
#[derive(Debug, Clone, Default)]
struct Owners {
    by_source: BTreeMap<String, Item>,
    ver: i64,
}

impl Deriver {
    /// Brings everything the given items imply to what their current state
    /// implies: projections, derived items, ledger records and totals, then
    /// the counter items touched. On failure, returns the position (in
    /// `keys`) of the first item that could not be reconciled; items before
    /// it are done.
    pub async fn reconcile(
        &self,
        keys: &[Item],
        hints: &HashMap<String, Hint>,
    ) -> Result<Reconciled, (Reconciled, usize, ProcessError)> {
        let mut out = Reconciled::default();
        let mut counters: BTreeMap<String, Counter> = BTreeMap::new();
        let mut failure: Option<(usize, ProcessError)> = None;
        for (g, group) in keys.chunks(GROUP).enumerate() {
            let base = g * GROUP;
            if let Err((pos, e)) = self
                .reconcile_group(group, base, hints, &mut out, &mut counters)
                .await
            {
                failure = Some((pos, e));
                break;
            }
        }
        let synced = super::counts::sync(self, counters.into_values().collect()).await;
        match synced {
            Ok((w, notes)) => {
                out.table_writes += w;
                out.notes.extend(notes);
            }
            // The sums are in the ledger already, and the records of the
            // sources that moved them owe the counters: the batch is retried
            // from its first record (even when a later group failed too:
            // the sources before it must be seen again), and that retry,
            // finding them unchanged, sets the counter items.
            Err(e) => failure = Some((0, e)),
        }
        match failure {
            None => Ok(out),
            Some((pos, e)) => Err((out, pos, e)),
        }
    }

    async fn reconcile_group(
        &self,
        group: &[Item],
        base: usize,
        hints: &HashMap<String, Hint>,
        out: &mut Reconciled,
        counters: &mut BTreeMap<String, Counter>,
    ) -> Result<(), (usize, ProcessError)> {
        let key_names = self.rules.key_names();
        let fail_at = |pos: usize| move |e: ProcessError| (pos, e);
        let mut attempt = 0;
        loop {
            attempt += 1;
            // 1. What is recorded (read first: see the module docs).
            let src_keys: Vec<Item> = group
                .iter()
                .map(|k| source_key(self.processor, k))
                .collect();
            let recorded = self.read_recorded(src_keys).await.map_err(fail_at(base))?;
            // Counters a recorded change moved whose items lag the totals:
            // synced by this batch, and carried by any record rewritten.
            let lagging = self.lagging(&recorded).await.map_err(fail_at(base))?;
            for key in lagging.values() {
                if let Some(c) = self.rules.counter(key) {
                    counters.insert(item_id(key), c);
                }
            }
            // 2. The items as they are.
            let current: HashMap<String, Item> = self
                .store
                .batch_get(&self.table, group.to_vec())
                .await
                .map_err(|e| (base, e.into()))?
                .into_iter()
                .map(|i| (item_id(&key_of(&i, key_names)), i))
                .collect();
            // 3. What they imply, and the projections to write.
            let Assessment {
                updates,
                wanted,
                derived_keys,
                bad,
            } = self.assess(group, base, &recorded, &current, counters);
            let group_derived_keys: Vec<Item> = derived_keys.values().cloned().collect();
            // Derived items as they are (to write only what differs).
            let existing: HashMap<String, Item> = if derived_keys.is_empty() {
                HashMap::new()
            } else {
                self.store
                    .batch_get(&self.table, derived_keys.into_values().collect())
                    .await
                    .map_err(|e| (base, e.into()))?
                    .into_iter()
                    .map(|i| (item_id(&key_of(&i, key_names)), i))
                    .collect()
            };
            // Owners of the derived items several sources may imply.
            let owners = self
                .read_owners(&group_derived_keys)
                .await
                .map_err(fail_at(base))?;
            // 4. Projections: distinct items, independent, guarded.
            let proj = self.write_projections(updates).await;
            // 5. Ledger records, derived items and totals.
            let mut carried =
                self.plan_derived(group, base, &recorded, &wanted, &existing, &owners);
            let mut plans = Vec::new();
            let mut unchanged = 0;
            for (pos, implied, _) in &wanted {
                let key = &group[*pos - base];
                let rec = recorded
                    .get(&source_key_pk(self.processor, key))
                    .cloned()
                    .unwrap_or_default();
                let hint = hints.get(&item_id(key)).copied().unwrap_or_default();
                let seen = Seen { lagging: &lagging };
                let extra = carried.remove(pos).unwrap_or_default();
                match self.plan_key(*pos, key, &rec, implied, extra, seen, hint) {
                    Some(p) => plans.push(p),
                    None => unchanged += usize::from(rec.ver > 0 && !rec.implied.is_empty()),
                }
            }
            let mut bad = bad;
            let committed = match self.commit(plans, counters).await {
                Ok(c) => {
                    out.table_writes += c.table_writes;
                    out.ledger_writes += c.ledger_writes;
                    out.unchanged += unchanged;
                    bad.extend(c.bad);
                    Ok(())
                }
                Err(Retry::Conflict(pos)) if attempt < ATTEMPTS => {
                    tracing::debug!(
                        position = pos,
                        "ledger record changed meanwhile; reading again"
                    );
                    continue;
                }
                Err(Retry::Conflict(pos)) => Err((
                    pos,
                    ProcessError::Conflict("ledger records keep changing".into()),
                )),
                Err(Retry::Failed(pos, e)) => Err((pos, e)),
            };
            let projected = proj.map(|p| {
                out.table_writes += p.written;
                out.notes.extend(p.notes);
                bad.extend(p.bad);
            });
            // The group fails at its first item whose write failed, whichever
            // write it was: a projection that failed before a source whose
            // commit failed is retried too, not checkpointed past.
            return match (committed, projected) {
                (Ok(()), Ok(())) => {
                    out.bad.extend(bad);
                    Ok(())
                }
                (Err(a), Err(b)) => Err(if b.0 < a.0 { b } else { a }),
                (Err(f), Ok(())) => Err(f),
                (Ok(()), Err(f)) => {
                    out.bad.extend(bad);
                    Err(f)
                }
            };
        }
    }

    /// What each item of a group implies as it is (absent: nothing), the
    /// projections to write, and the bad input met. An aspect that meets bad
    /// input keeps what was recorded.
    fn assess(
        &self,
        group: &[Item],
        base: usize,
        recorded: &HashMap<String, Recorded>,
        current: &HashMap<String, Item>,
        counters: &mut BTreeMap<String, Counter>,
    ) -> Assessment {
        let key_names = self.rules.key_names();
        let mut out = Assessment::default();
        for (i, key) in group.iter().enumerate() {
            let pos = base + i;
            let rec = recorded.get(&source_key_pk(self.processor, key));
            let (mut contributions, mut derived) = (Some(vec![]), Some(vec![]));
            let mut memberships = Some(vec![]);
            if let Some(item) = current.get(&item_id(key)) {
                let bad_before = out.bad.len();
                let aspects = self.rules.aspects(item);
                let projection = aspects
                    .projection
                    .map_err(|e| out.bad.push((pos, e)))
                    .ok()
                    .flatten();
                derived = aspects.derived.map_err(|e| out.bad.push((pos, e))).ok();
                contributions = checked_sums(aspects.contributions, item, key_names)
                    .map_err(|e| out.bad.push((pos, e)))
                    .ok();
                memberships = aspects.memberships.map_err(|e| out.bad.push((pos, e))).ok();
                // Writes that cannot exist: the whole item is bad input,
                // nothing is written for it, what it implied stays.
                let writes = Writes {
                    projection: projection.as_ref(),
                    derived: derived.as_deref().unwrap_or_default(),
                    contributions: contributions.as_deref().unwrap_or_default(),
                    memberships: memberships.as_deref().map_or(0, <[_]>::len),
                };
                match writable::check(
                    self.rules.as_ref(),
                    &self.limits,
                    self.processor,
                    item,
                    &writes,
                ) {
                    // Nothing is written onto an item some aspect of its
                    // rules rejects (its projection stays as its last valid
                    // state left it; a write would only bring its record
                    // back as bad input again).
                    Ok(()) if out.bad.len() > bad_before => {}
                    Ok(()) => {
                        out.updates.extend(
                            projection
                                .and_then(|p| projection_update(key_names, item, &p))
                                .map(|u| (pos, u, self.rules.notes(item))),
                        );
                        if let Some(c) = self.rules.counter(item) {
                            // A located counter's item lists itself under
                            // its identity (with its own record).
                            if self.rules.locate(&c.key_item()).is_some() {
                                if let Some(m) = memberships.as_mut() {
                                    m.push((
                                        super::locate::locate_index(&c.key_item()),
                                        item_id(&key_of(item, key_names)),
                                    ));
                                }
                            }
                            counters.insert(item_id(&c.key_item()), c);
                        }
                    }
                    Err(e) => {
                        out.bad.push((pos, e));
                        (contributions, derived, memberships) = (None, None, None);
                    }
                }
            } else if let Some(c) = self.rules.counter(key) {
                // A counter item deleted (by a writer, by TTL) is brought
                // back from its key alone when its totals say it exists.
                counters.insert(item_id(&c.key_item()), c);
            }
            let mut implied = Implied::from_rules(
                contributions.as_deref().unwrap_or_default(),
                derived.as_deref().unwrap_or_default(),
                key_names,
            );
            implied.indexed = memberships.iter().flatten().cloned().collect();
            if let Some(r) = rec {
                if contributions.is_none() {
                    implied.contributions = r.implied.contributions.clone();
                }
                if derived.is_none() {
                    implied.derived = r.implied.derived.clone();
                }
                if memberships.is_none() {
                    implied.indexed = r.implied.indexed.clone();
                }
                for (id, d) in &r.implied.derived {
                    out.derived_keys.insert(id.clone(), key_of(d, key_names));
                }
            }
            for d in derived.iter().flatten() {
                let k = key_of(d, key_names);
                let id = item_id(&k);
                out.derived_keys.insert(id, k);
            }
            // An item that stops or starts claiming a located counter's
            // identity moves where its totals go: that counter is synced.
            let was = rec.map(|r| &r.implied.indexed);
            for (index, _) in was
                .into_iter()
                .flatten()
                .filter(|e| !implied.indexed.contains(*e))
                .chain(
                    implied
                        .indexed
                        .iter()
                        .filter(|e| !was.is_some_and(|w| w.contains(*e))),
                )
            {
                if let Some(c) = super::locate::located_key(index)
                    .filter(|k| self.rules.locate(k).is_some())
                    .and_then(|k| self.rules.counter(&k))
                {
                    counters.insert(item_id(&c.key_item()), c);
                }
            }
            out.wanted.push((pos, implied, derived.unwrap_or_default()));
        }
        out
    }

    async fn read_recorded(
        &self,
        keys: Vec<Item>,
    ) -> Result<HashMap<String, Recorded>, ProcessError> {
        let mut out = HashMap::new();
        for item in self.store.batch_get(&self.ledger_table, keys).await? {
            let pk = ledger::as_s(item.get(ledger::PK))
                .unwrap_or_default()
                .to_string();
            let implied = Implied::from_record(&item).map_err(|e| {
                ProcessError::Permanent(format!("ledger record {pk} is corrupt: {e}"))
            })?;
            let ver = item.opt_i64("ver").ok().flatten().unwrap_or(1);
            let mut owed = BTreeMap::new();
            if let Some(AttributeValue::M(o)) = item.get(OWED) {
                for (id, key) in o {
                    if let AttributeValue::M(key) = key {
                        owed.insert(id.clone(), key.clone());
                    }
                }
            }
            out.insert(pk, Recorded { implied, ver, owed });
        }
        Ok(out)
    }

    /// The owner records of the shared derived items among `keys`, by
    /// derived item id.
    async fn read_owners(&self, keys: &[Item]) -> Result<HashMap<String, Owners>, ProcessError> {
        let shared: HashMap<String, String> = keys
            .iter()
            .filter(|k| self.rules.shared(k))
            .map(|k| {
                let pk = ledger::as_s(owners_key(self.processor, k).get(ledger::PK))
                    .unwrap_or_default()
                    .to_string();
                (pk, item_id(k))
            })
            .collect();
        let mut out: HashMap<String, Owners> = shared
            .values()
            .map(|id| (id.clone(), Owners::default()))
            .collect();
        if shared.is_empty() {
            return Ok(out);
        }
        let keys = keys
            .iter()
            .filter(|k| self.rules.shared(k))
            .map(|k| owners_key(self.processor, k))
            .collect();
        for rec in self.store.batch_get(&self.ledger_table, keys).await? {
            let pk = ledger::as_s(rec.get(ledger::PK)).unwrap_or_default();
            let Some(id) = shared.get(pk) else { continue };
            let mut o = Owners {
                by_source: BTreeMap::new(),
                ver: rec.opt_i64("ver").ok().flatten().unwrap_or(1),
            };
            if let Some(AttributeValue::M(m)) = rec.get("s") {
                for (src, item) in m {
                    if let AttributeValue::M(item) = item {
                        o.by_source.insert(src.clone(), item.clone());
                    }
                }
            }
            out.insert(id.clone(), o);
        }
        Ok(out)
    }

    /// The writes that bring each derived item the group's sources touch
    /// (implied now or recorded) to what its sources imply, each carried by
    /// the first of those sources (by position), so that no transaction
    /// writes one item twice:
    ///
    /// - an item some source implies is put when it differs (an edited one
    ///   is brought back); a shared item ([`Rules::shared`]) takes the
    ///   content of its greatest owner, whichever source changed last;
    /// - an item no source implies any more is deleted whatever its content
    ///   (it is processor-owned): the owner record of a shared item says
    ///   whether a source outside the group still implies it.
    fn plan_derived(
        &self,
        group: &[Item],
        base: usize,
        recorded: &HashMap<String, Recorded>,
        wanted: &[(usize, Implied, Vec<Item>)],
        existing: &HashMap<String, Item>,
        owners: &HashMap<String, Owners>,
    ) -> BTreeMap<usize, Carried> {
        let key_names = self.rules.key_names();
        // derived id -> (derived key, [(pos, source id, Some(content now) |
        // None = no longer implied, recorded content)])
        type Touch = (usize, String, Option<Item>, Option<Item>);
        let mut touched: BTreeMap<String, (Item, Vec<Touch>)> = BTreeMap::new();
        for (pos, implied, derived) in wanted {
            let key = &group[*pos - base];
            let src = item_id(key);
            let rec = recorded.get(&source_key_pk(self.processor, key));
            let was = |id: &str| rec.and_then(|r| r.implied.derived.get(id)).cloned();
            let mut ids: BTreeSet<String> = implied.derived.keys().cloned().collect();
            ids.extend(rec.iter().flat_map(|r| r.implied.derived.keys().cloned()));
            for id in ids {
                // Fresh content, or what is recorded when the rule met bad
                // input (kept as earlier valid states implied).
                let now = derived
                    .iter()
                    .find(|d| item_id(&key_of(d, key_names)) == id)
                    .cloned()
                    .or_else(|| implied.derived.get(&id).cloned());
                let dkey = now
                    .as_ref()
                    .or(was(&id).as_ref())
                    .map(|d| key_of(d, key_names))
                    .unwrap_or_default();
                touched
                    .entry(id.clone())
                    .or_insert_with(|| (dkey, Vec::new()))
                    .1
                    .push((*pos, src.clone(), now, was(&id)));
            }
        }
        let mut out: BTreeMap<usize, Carried> = BTreeMap::new();
        for (id, (dkey, touches)) in touched {
            let carrier = touches.iter().map(|t| t.0).min().unwrap_or(base);
            let have = existing.get(&id);
            let mut carried = Carried::default();
            let want: Option<Item> = match owners.get(&id) {
                Some(o) => {
                    let mut by_source = o.by_source.clone();
                    for (_, src, now, _) in &touches {
                        match now {
                            Some(d) => by_source.insert(src.clone(), d.clone()),
                            None => by_source.remove(src),
                        };
                    }
                    if by_source != o.by_source {
                        carried
                            .actions
                            .push(self.owners_write(&dkey, &by_source, o.ver));
                        carried.ledger += 1;
                    }
                    match by_source.values().next_back() {
                        Some(d) => Some(d.clone()),
                        // Owners recorded before this record existed
                        // cannot be told apart: the item goes only while it
                        // is what a source of the group wrote.
                        None if o.ver == 0
                            && !touches
                                .iter()
                                .any(|t| t.3.is_some() && t.3.as_ref() == have) =>
                        {
                            have.cloned()
                        }
                        None => None,
                    }
                }
                None => touches.iter().rev().find_map(|t| t.2.clone()),
            };
            match (want, have) {
                (Some(d), h) if !h.is_some_and(|h| crate::item::same_items(h, &d)) => {
                    carried.actions.push(
                        TransactWriteItem::builder()
                            .put(
                                Put::builder()
                                    .table_name(&self.table)
                                    .set_item(Some(d))
                                    .build()
                                    .expect("table and item are set"),
                            )
                            .build(),
                    )
                }
                (None, Some(_)) => carried.actions.push(
                    TransactWriteItem::builder()
                        .delete(
                            Delete::builder()
                                .table_name(&self.table)
                                .set_key(Some(dkey.clone()))
                                .build()
                                .expect("table and key are set"),
                        )
                        .build(),
                ),
                _ => {}
            }
            if !carried.actions.is_empty() {
                let c = out.entry(carrier).or_default();
                c.actions.extend(carried.actions);
                c.ledger += carried.ledger;
            }
        }
        out
    }

    /// The write of a shared derived item's owner record (deleted when no
    /// source owns it), conditioned on the version read.
    fn owners_write(
        &self,
        dkey: &Item,
        by_source: &BTreeMap<String, Item>,
        ver: i64,
    ) -> TransactWriteItem {
        let key = owners_key(self.processor, dkey);
        let (cond, vals) = if ver == 0 {
            ("attribute_not_exists(pk)", None)
        } else {
            ("ver = :v", Some([(":v".to_string(), n(ver))].into()))
        };
        if by_source.is_empty() {
            return TransactWriteItem::builder()
                .delete(
                    Delete::builder()
                        .table_name(&self.ledger_table)
                        .set_key(Some(key))
                        .condition_expression(cond)
                        .set_expression_attribute_values(vals)
                        .build()
                        .expect("table and key are set"),
                )
                .build();
        }
        let mut item = key;
        item.insert(
            "s".into(),
            AttributeValue::M(
                by_source
                    .iter()
                    .map(|(s, d)| (s.clone(), AttributeValue::M(d.clone())))
                    .collect(),
            ),
        );
        item.insert("ver".into(), n(ver + 1));
        TransactWriteItem::builder()
            .put(
                Put::builder()
                    .table_name(&self.ledger_table)
                    .set_item(Some(item))
                    .condition_expression(cond)
                    .set_expression_attribute_values(vals)
                    .build()
                    .expect("table and item are set"),
            )
            .build()
    }

    /// The counters the recorded changes moved whose items lag their
    /// totals (the totals' `synced` version behind their `ver`).
    async fn lagging(
        &self,
        recorded: &HashMap<String, Recorded>,
    ) -> Result<BTreeMap<String, Item>, ProcessError> {
        let owed: BTreeMap<String, Item> = recorded
            .values()
            .flat_map(|r| r.owed.iter().map(|(id, k)| (id.clone(), k.clone())))
            .collect();
        if owed.is_empty() {
            return Ok(owed);
        }
        let keys = owed
            .values()
            .map(|k| total_key(self.processor, k))
            .collect();
        let in_sync: BTreeSet<String> = self
            .store
            .batch_get(&self.ledger_table, keys)
            .await?
            .into_iter()
            .filter(super::counts::is_synced)
            .filter_map(|t| ledger::as_s(t.get(ledger::PK)).map(str::to_string))
            .collect();
        Ok(owed
            .into_iter()
            .filter(|(_, k)| {
                let pk = total_key(self.processor, k);
                !ledger::as_s(pk.get(ledger::PK)).is_some_and(|pk| in_sync.contains(pk))
            })
            .collect())
    }

    async fn write_projections(
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

    /// The transaction actions of one source item, or `None` when nothing
    /// differs from what is recorded and exists.
    #[allow(clippy::too_many_arguments)]
    fn plan_key(
        &self,
        pos: usize,
        key: &Item,
        rec: &Recorded,
        implied: &Implied,
        extra: Carried,
        seen: Seen<'_>,
        hint: Hint,
    ) -> Option<KeyPlan> {
        let mut writes = extra.actions;
        let mut extra_ledger = extra.ledger;
        for (index, member) in implied.indexed.difference(&rec.implied.indexed) {
            writes.push(
                TransactWriteItem::builder()
                    .put(
                        Put::builder()
                            .table_name(&self.ledger_table)
                            .set_item(Some(index_item(index, member)))
                            .build()
                            .expect("table and item are set"),
                    )
                    .build(),
            );
            extra_ledger += 1;
        }
        for (index, member) in rec.implied.indexed.difference(&implied.indexed) {
            writes.push(
                TransactWriteItem::builder()
                    .delete(
                        Delete::builder()
                            .table_name(&self.ledger_table)
                            .set_key(Some(index_key(index, member)))
                            .build()
                            .expect("table and key are set"),
                    )
                    .build(),
            );
            extra_ledger += 1;
        }
        let deltas = contribution_deltas(implied, &rec.implied);
        let changed = *implied != rec.implied;
        let tombstone = rec.ver == 0 && implied.is_empty() && hint.implied_something;
        if !changed && !tombstone && writes.is_empty() {
            return None;
        }
        let src = source_key(self.processor, key);
        let record_written = changed || tombstone;
        let guard = if rec.ver == 0 {
            ("attribute_not_exists(pk)".to_string(), None)
        } else {
            ("ver = :v".to_string(), Some(n(rec.ver)))
        };
        let head = if record_written {
            let mut item = src;
            item.extend(implied.to_attrs());
            item.insert("src".into(), AttributeValue::M(key.clone()));
            item.insert("ver".into(), n(rec.ver + 1));
            // What this change moved, and what earlier changes still owe.
            let owed: Item = deltas
                .iter()
                .map(|(id, (key, _))| (id.clone(), key.clone()))
                .chain(
                    rec.owed
                        .iter()
                        .filter(|(id, _)| seen.lagging.contains_key(*id))
                        .map(|(id, key)| (id.clone(), key.clone())),
                )
                .map(|(id, key)| (id, AttributeValue::M(key)))
                .collect();
            if !owed.is_empty() {
                item.insert(OWED.into(), AttributeValue::M(owed));
            }
            if implied.is_empty() {
                item.insert(
                    ledger::TTL.into(),
                    n((self.now)().timestamp() + TOMBSTONE_TTL_SECS),
                );
            }
            let put = Put::builder()
                .table_name(&self.ledger_table)
                .set_item(Some(item))
                .condition_expression(guard.0)
                .set_expression_attribute_values(guard.1.map(|v| [(":v".to_string(), v)].into()));
            TransactWriteItem::builder()
                .put(put.build().expect("table and item are set"))
                .build()
        } else {
            let check = ConditionCheck::builder()
                .table_name(&self.ledger_table)
                .set_key(Some(src))
                .condition_expression(guard.0)
                .set_expression_attribute_values(guard.1.map(|v| [(":v".to_string(), v)].into()));
            TransactWriteItem::builder()
                .condition_check(check.build().expect("table, key and condition are set"))
                .build()
        };
        let mut actions = vec![head];
        actions.extend(writes);
        Some(KeyPlan {
            pos,
            bytes: actions.iter().map(action_bytes).sum(),
            actions,
            record_written,
            extra_ledger,
            deltas,
            key: key.clone(),
        })
    }

    /// Commits plans in transactions of at most 100 actions: each plan's
    /// actions plus one totals update per counter. Returns (table, ledger)
    /// item writes.
    async fn commit(
        &self,
        plans: Vec<KeyPlan>,
        counters: &mut BTreeMap<String, Counter>,
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
            while j < plans.len() {
                let p = &plans[j];
                let new_counters = p.deltas.keys().filter(|k| !totals.contains_key(*k)).count();
                if j > i
                    && (j < alone_until
                        || n_actions + p.actions.len() + totals.len() + new_counters
                            > MAX_TX_ACTIONS
                        || n_bytes + p.bytes > MAX_TX_BYTES)
                {
                    break;
                }
                n_actions += p.actions.len();
                n_bytes += p.bytes;
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
                actions.push(
                    TransactWriteItem::builder()
                        .update(upd.build().expect("table, key and expression are set"))
                        .build(),
                );
            }
            let table_actions: usize = chunk
                .iter()
                .map(|p| p.actions.len() - 1 - p.extra_ledger)
                .sum();
            let records: usize = chunk
                .iter()
                .map(|p| usize::from(p.record_written) + p.extra_ledger)
                .sum();
            match self.store.transact(actions).await {
                Ok(()) => {
                    table_writes += table_actions;
                    ledger_writes += records + n_totals;
                    for p in chunk {
                        for (key, _) in p.deltas.values() {
                            if let Some(c) = self.rules.counter(key) {
                                counters.insert(item_id(key), c);
                            }
                        }
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

/// What the items of a group imply now (see [`Deriver::assess`]).
#[derive(Default)]
struct Assessment {
    /// Projection writes, by position.
    updates: Vec<(usize, Update, Vec<Note>)>,
    /// Per item: its position, what it implies, the derived items it implies.
    wanted: Vec<(usize, Implied, Vec<Item>)>,
    /// Keys of the derived items to read (implied now, or recorded).
    derived_keys: BTreeMap<String, Item>,
    bad: Vec<(usize, InputError)>,
}

/// What the group's reads saw, for planning one source item.
#[derive(Clone, Copy)]
struct Seen<'a> {
    /// Counters whose items lag their totals, by id.
    lagging: &'a BTreeMap<String, Item>,
}

enum Retry {
    Conflict(usize),
    Failed(usize, ProcessError),
}

/// What [`Deriver::write_projections`] wrote and noted, and the items whose
/// projection DynamoDB rejected.
#[derive(Default)]
struct Projected {
    written: usize,
    notes: Vec<(Item, Note)>,
    bad: Vec<(usize, InputError)>,
}

/// What [`Deriver::commit`] wrote, and the sources DynamoDB rejected.
struct Committed {
    table_writes: usize,
    ledger_writes: usize,
    bad: Vec<(usize, InputError)>,
}

/// What a record's image says, each aspect computed once: whether it
/// implies anything (contributions or derived items), and the first bad
/// input any aspect meets in it.
fn read_image(rules: &dyn Rules, image: &Item) -> (bool, Option<InputError>) {
    // One call: rules that parse and validate an image first (a model
    // file) answer every aspect from one parse.
    let aspects = rules.aspects(image);
    let derived = aspects.derived;
    let contributions = checked_sums(aspects.contributions, image, rules.key_names());
    let memberships = aspects.memberships;
    let implies = derived.as_ref().is_ok_and(|d| !d.is_empty())
        || contributions.as_ref().is_ok_and(|c| !c.is_empty())
        || memberships.as_ref().is_ok_and(|m| !m.is_empty());
    let bad = aspects
        .projection
        .err()
        .or(derived.err())
        .or(contributions.err())
        .or(memberships.err());
    (implies, bad)
}

/// Whether the rules reject this item (some aspect meets bad input): the
/// processor then writes nothing onto it, counter sums included.
pub fn rejects(rules: &dyn Rules, image: &Item) -> bool {
    read_image(rules, image).1.is_some()
}

/// What an item contributes, checked: the sums fit an i64, else the item is
/// bad input (nothing moves: the ledger totals keep what it contributed
/// before). The engine, `verify` and its repair all read contributions
/// through here.
pub fn checked_contributions(
    rules: &dyn Rules,
    image: &Item,
) -> Result<Vec<Contribution>, InputError> {
    checked_sums(rules.contributions(image), image, rules.key_names())
}

/// `contributions` of `image`, unless their sums overflow (bad input).
fn checked_sums(
    contributions: Result<Vec<Contribution>, InputError>,
    image: &Item,
    key_names: &[&str],
) -> Result<Vec<Contribution>, InputError> {
    let contributions = contributions?;
    sum_contributions(&contributions).map_err(|reason| InputError::Invalid {
        key: crate::item::display_key(&key_of(image, key_names)),
        reason,
    })?;
    Ok(contributions)
}

/// Per counter, what changes from `old` to `new` contributions (non-zero
/// amounts only).
fn contribution_deltas(
    new: &Implied,
    old: &Implied,
) -> BTreeMap<String, (Item, BTreeMap<String, i128>)> {
    let mut deltas = BTreeMap::new();
    let ids: BTreeSet<&String> = new
        .contributions
        .keys()
        .chain(old.contributions.keys())
        .collect();
    for id in ids {
        let new = new.contributions.get(id);
        let old = old.contributions.get(id);
        let key = new.or(old).map(|(k, _)| k.clone()).unwrap_or_default();
        let attrs: BTreeSet<&String> = new
            .iter()
            .chain(old.iter())
            .flat_map(|(_, v)| v.keys())
            .collect();
        let mut d = BTreeMap::new();
        for a in attrs {
            let nv = new.and_then(|(_, v)| v.get(a)).copied().unwrap_or(0);
            let ov = old.and_then(|(_, v)| v.get(a)).copied().unwrap_or(0);
            if nv != ov {
                // (i128: the difference of two i64 always fits.)
                d.insert(a.clone(), i128::from(nv) - i128::from(ov));
            }
        }
        if !d.is_empty() {
            deltas.insert(id.clone(), (key, d));
        }
    }
    deltas
}

/// `pk` of the ledger record of what a source item implies (within
/// DynamoDB's key limit for every legal key: see [`ledger::bounded_pk`]).
pub fn source_key_pk(processor: &str, key: &Item) -> String {
    ledger::bounded_pk(&format!("SRC#{processor}#"), &item_id(key))
}

/// `pk` of a counter item's ledger totals.
pub fn total_pk(processor: &str, counter_key: &Item) -> String {
    ledger::bounded_pk(&format!("TOTAL#{processor}#"), &item_id(counter_key))
}

/// Configuration of a derive processor.
#[derive(Debug, Clone)]
pub struct DeriveConfig {
    pub table: String,
    pub ledger_table: String,
    /// Guarded projection writes in flight at once (distinct items).
    pub concurrency: usize,
    /// Logical queue name -> queue URL, for [`Rules::messages`].
    pub queues: BTreeMap<String, String>,
    /// The table's key and index key limits ([`KeyLimits::of`] its
    /// definition).
    pub limits: KeyLimits,
}

/// The derive stream processor over any [`Rules`].
pub struct DeriveProcessor {
    deriver: Deriver,
    sqs: Option<aws_sdk_sqs::Client>,
    queues: BTreeMap<String, String>,
    metrics: Metrics,
}

impl DeriveProcessor {
    pub fn new(rules: Arc<dyn Rules>, store: Store, config: DeriveConfig) -> Self {
        Self {
            deriver: Deriver {
                rules,
                store,
                table: config.table,
                ledger_table: config.ledger_table,
                processor: "derive",
                concurrency: config.concurrency,
                now: Utc::now,
                limits: config.limits,
            },
            sqs: None,
            queues: config.queues,
            metrics: Metrics::default(),
        }
    }

    /// Enables [`Rules::messages`] through this SQS client.
    pub fn with_sqs(mut self, client: aws_sdk_sqs::Client) -> Self {
        self.sqs = Some(client);
        self
    }

    pub fn store(&self) -> &Store {
        &self.deriver.store
    }

    pub fn deriver(&self) -> &Deriver {
        &self.deriver
    }

    /// Sends the messages of records before `limit`, in record order.
    /// Returns the index of the first record whose message was not sent.
    pub async fn send_messages(
        &self,
        messages: &[(usize, OutMessage)],
        limit: usize,
    ) -> Result<(), BatchFailure> {
        crate::sqs::send_out(self.sqs.as_ref(), &self.queues, messages, limit).await
    }

    /// Backfill of existing items: the same reconcile as the stream, plus
    /// the jobs an INSERT of each item starts. Returns (table writes, ledger
    /// writes, messages).
    pub async fn backfill(
        &self,
        items: &[Item],
        dry_run: bool,
    ) -> Result<(usize, usize, usize), ProcessError> {
        let key_names = self.deriver.rules.key_names();
        let mut messages = Vec::new();
        let mut keys = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let key = key_of(item, key_names);
            if self.deriver.rules.ignores(&key) {
                continue;
            }
            let change = Change::synthetic_insert(key.clone(), item.clone(), (self.deriver.now)());
            match self.deriver.rules.messages(&change) {
                Ok(m) => messages.extend(m.into_iter().map(|m| (i, m))),
                Err(e) => {
                    tracing::warn!(key = %change.key_display(), kind = e.kind(), reason = %e, "backfill: no jobs for item")
                }
            }
            keys.push(key);
        }
        if dry_run {
            return Ok((0, 0, messages.len()));
        }
        let done = self
            .deriver
            .reconcile(&keys, &HashMap::new())
            .await
            .map_err(|(_, _, e)| e)?;
        for (pos, e) in &done.bad {
            tracing::warn!(key = %crate::item::display_key(&keys[*pos]), kind = e.kind(), reason = %e, "backfill: bad input");
        }
        self.send_messages(&messages, usize::MAX)
            .await
            .map_err(|f| f.error)?;
        Ok((done.table_writes, done.ledger_writes, messages.len()))
    }
}

impl StreamProcessor for DeriveProcessor {
    fn name(&self) -> &'static str {
        self.deriver.processor
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    async fn process(
        &self,
        changes: &[Change],
        metrics: &mut BatchMetrics,
    ) -> Result<(), BatchFailure> {
        let rules = &self.deriver.rules;
        let mut keys: Vec<Item> = Vec::new();
        let mut first_index: Vec<usize> = Vec::new();
        let mut position: HashMap<String, usize> = HashMap::new();
        let mut hints: HashMap<String, Hint> = HashMap::new();
        let mut messages: Vec<(usize, OutMessage)> = Vec::new();
        // Bad input is logged and counted once per item per batch.
        let mut bad_keys = BTreeSet::new();
        for (index, change) in changes.iter().enumerate() {
            if rules.ignores(&change.keys) {
                continue;
            }
            match rules.messages(change) {
                Ok(out) => messages.extend(out.into_iter().map(|m| (index, m))),
                Err(e) => {
                    if bad_keys.insert(item_id(&change.keys)) {
                        log_bad_input(self.name(), &change.event_id, &e, metrics);
                    }
                }
            }
            // What the record says is validated too, so that every bad
            // record is logged and counted even if the item has changed (or
            // gone) since; its effects follow the item as it is.
            let id = item_id(&change.keys);
            let new = change
                .new
                .as_ref()
                .filter(|_| change.kind != ChangeKind::Remove);
            let (old_implies, _) = change
                .old
                .as_ref()
                .map_or((false, None), |img| read_image(rules.as_ref(), img));
            let (new_implies, bad) =
                new.map_or((false, None), |img| read_image(rules.as_ref(), img));
            if let Some(e) = bad {
                if bad_keys.insert(id.clone()) {
                    log_bad_input(self.name(), &change.event_id, &e, metrics);
                }
            }
            if old_implies || new_implies {
                hints.entry(id.clone()).or_default().implied_something = true;
            }
            if let std::collections::hash_map::Entry::Vacant(e) = position.entry(id) {
                e.insert(keys.len());
                keys.push(change.keys.clone());
                first_index.push(index);
            }
        }
        let result = self.deriver.reconcile(&keys, &hints).await;
        let (done, failure) = match result {
            Ok(d) => (d, None),
            Err((d, pos, error)) => (
                d,
                Some(BatchFailure {
                    index: first_index[pos],
                    error,
                }),
            ),
        };
        for (pos, e) in &done.bad {
            if bad_keys.insert(item_id(&keys[*pos])) {
                log_bad_input(
                    self.name(),
                    &changes[first_index[*pos]].event_id,
                    e,
                    metrics,
                );
            }
        }
        for _ in 0..done.unchanged {
            metrics.incr(names::DUPLICATE);
        }
        for (key, note) in &done.notes {
            tracing::warn!(processor = self.name(), key = %crate::item::display_key(key), metric = note.metric, reason = %note.reason, "noted");
            metrics.incr(note.metric);
        }
        // Jobs go last (a consumer that runs before our effects landed would
        // see stale state), and are sent for every record before a failure
        // even when a later effect failed.
        let limit = failure.as_ref().map_or(usize::MAX, |f| f.index);
        // Identical jobs of one batch are sent once: a job re-reads the
        // facts, and all of them are in place by now.
        let mut seen = BTreeSet::new();
        messages.retain(|(_, m)| seen.insert((m.queue, m.body.clone())));
        let sent = self.send_messages(&messages, limit).await;
        match (failure, sent) {
            (Some(a), Err(b)) => Err(if b.index < a.index { b } else { a }),
            (Some(f), Ok(())) | (None, Err(f)) => Err(f),
            (None, Ok(())) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::s;

    /// Ledger index keys stay within DynamoDB's key limits for the longest
    /// index name (a GSI partition value of 2,048 bytes) and the longest
    /// member; short ones keep their readable, pinned form.
    #[test]
    fn ledger_index_keys_are_bounded_for_maximal_values() {
        let index = format!(
            "GSI1#{}",
            "p".repeat(crate::limits::MAX_PARTITION_KEY_BYTES)
        );
        for member in [
            "m".repeat(crate::limits::MAX_SORT_KEY_BYTES),
            "m".repeat(crate::limits::MAX_SORT_KEY_BYTES + 1),
            "m".repeat(2 * crate::limits::MAX_PARTITION_KEY_BYTES),
        ] {
            let item = index_item(&index, &member);
            let pk = ledger::as_s(item.get(ledger::PK)).unwrap();
            let sk = ledger::as_s(item.get(ledger::SK)).unwrap();
            assert!(pk.len() <= crate::limits::MAX_PARTITION_KEY_BYTES);
            assert!(sk.len() <= crate::limits::MAX_SORT_KEY_BYTES);
            assert_eq!(pk, index_pk(&index), "readers find the partition");
            assert_eq!(ledger::sk_value(&item), Some(member.as_str()));
            assert_eq!(
                key_of(&item, &[ledger::PK, ledger::SK]),
                index_key(&index, &member)
            );
        }
        assert_eq!(index_pk(&index), index_pk(&index), "stable");
        assert_ne!(index_pk(&index), index_pk(&format!("{index}q")));
        let short = index_item("GSI1#T#1", "U#2");
        assert_eq!(short, ledger::key("IDX#GSI1#T#1", "U#2"));
    }

    fn image(pairs: &[(&str, AttributeValue)]) -> Item {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    fn projection() -> Projection {
        Projection {
            attrs: vec![("G", Some(s("x#1"))), ("H", None)],
            sources: vec!["x", "y"],
        }
    }

    #[test]
    fn no_update_when_image_already_projected() {
        let img = image(&[("PK", s("a")), ("x", s("1")), ("G", s("x#1"))]);
        assert!(projection_update(&["PK", "SK"], &img, &projection()).is_none());
    }

    #[test]
    fn update_sets_removes_and_guards_sources() {
        let img = image(&[
            ("PK", s("a")),
            ("SK", s("b")),
            ("x", s("1")),
            ("H", s("old")),
        ]);
        let u = projection_update(&["PK", "SK"], &img, &projection()).unwrap();
        assert_eq!(u.update_expression, "SET #p0 = :p0 REMOVE #p1");
        assert_eq!(
            u.condition_expression.as_deref(),
            Some("attribute_exists(#k0) AND #s0 = :s0 AND attribute_not_exists(#s1)")
        );
        assert_eq!(u.key.len(), 2);
        assert!(u.values.contains(&(":s0".to_string(), s("1"))));
        assert!(u.values.contains(&(":p0".to_string(), s("x#1"))));
    }

    fn counter(pk: &str) -> Counter {
        Counter {
            key: vec![("PK", pk.to_string()), ("SK", "count".to_string())],
            attrs: &["a", "b"],
            create: Some(vec![]),
            remove_at_zero: false,
        }
    }

    #[test]
    fn sums_that_overflow_an_i64_are_errors_never_wrapped() {
        let c = |v: i64| Contribution {
            counter: counter("u#1"),
            values: vec![("a", v)],
        };
        assert!(sum_contributions(&[c(i64::MAX), c(1)]).is_err());
        assert!(sum_contributions(&[c(i64::MIN), c(-1)]).is_err());
        let ok = sum_contributions(&[c(i64::MAX), c(-1)]).unwrap();
        assert_eq!(ok["PK=S:u#1|SK=S:count"].1["a"], i64::MAX - 1);
        // Deltas between any two i64 sums fit.
        let new = Implied {
            contributions: sum_contributions(&[c(i64::MAX)]).unwrap(),
            ..Implied::default()
        };
        let old = Implied {
            contributions: sum_contributions(&[c(i64::MIN)]).unwrap(),
            ..Implied::default()
        };
        let d = contribution_deltas(&new, &old);
        assert_eq!(
            d["PK=S:u#1|SK=S:count"].1["a"],
            i128::from(i64::MAX) - i128::from(i64::MIN)
        );
    }

    #[test]
    fn implied_round_trips_through_its_ledger_record() {
        let implied = Implied::from_rules(
            &[
                Contribution {
                    counter: counter("u#1"),
                    values: vec![("a", 1), ("b", 2)],
                },
                Contribution {
                    counter: counter("u#1"),
                    values: vec![("a", 3)],
                },
                Contribution {
                    counter: counter("u#2"),
                    values: vec![("b", -1)],
                },
            ],
            &[image(&[("PK", s("d")), ("SK", s("1")), ("x", s("y"))])],
            &["PK", "SK"],
        );
        assert_eq!(implied.contributions.len(), 2);
        let one = &implied.contributions["PK=S:u#1|SK=S:count"].1;
        assert_eq!(one["a"], 4, "contributions to one attribute add up");
        assert_eq!(one["b"], 2);
        assert_eq!(implied.derived.len(), 1);
        assert_eq!(
            implied.derived["PK=S:d|SK=S:1"].len(),
            3,
            "the item as written"
        );
        let back = Implied::from_record(&implied.to_attrs()).unwrap();
        assert_eq!(back, implied);
        assert!(Implied::from_record(&Item::new()).unwrap().is_empty());
    }
}
