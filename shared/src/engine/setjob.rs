//! Set jobs: queue consumers that keep the set of items of a scope (a post's
//! timeline entries, a job's suggestions, an event's prediction scores)
//! equal to what consistent reads of the facts imply.
//!
//! The rule ([`SetJob::plan`]) reads the facts and says which items should
//! exist and which exist now, each with the facts ([`Guard`]s) it depends
//! on. The engine writes only the difference, and every write that depends
//! on a fact is conditioned on it in the same transaction: a late or
//! duplicated job, or one racing a newer fact, never resurrects what a newer
//! fact removed nor removes what a newer fact created. A failed guard means a
//! newer fact won (its own job fixes the scope): that write is dropped, the
//! others go on.
//!
//! Scopes overlap (a job's suggestions and a seeker's share their pair's)
//! and their jobs run concurrently (a batch's messages, Lambda's
//! invocations), so each write is also conditioned on its target as the
//! plan read it: a put of an item read absent on its absence, a put of an
//! item read otherwise on the attributes it changes being as read, a
//! delete on the item's existence. When that fails, another job wrote the target
//! since: an item now equal to the desired one (the volatile attributes
//! aside), or one already deleted, is left as it is (nothing is written
//! twice, [`Applied::raced`]); a different item is overwritten with what
//! the facts imply, guarded by them alone.
//!
//! Delivery is at-least-once, in any order; a job is idempotent because it
//! re-reads the facts each time.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Delete, Put, TransactWriteItem};
use chrono::{DateTime, Utc};

use super::rules::OutMessage;
use crate::item::{key_of, same_value, Item};
use crate::ledger::item_id;
use crate::metrics::Metrics;
use crate::sqs::{MessageError, MessageProcessor, Outcome};
use crate::store::{placeholders, Store, TxError};

/// A boxed future (rules with reads are trait objects).
pub type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a guard requires of an item.
#[derive(Debug, Clone, PartialEq)]
pub enum Cond {
    Exists,
    Absent,
    /// The item exists and `attr = value`.
    Equals(&'static str, AttributeValue),
    /// The item is absent, or `attr <> value`.
    AbsentOrNot(&'static str, AttributeValue),
    /// The item exists without `attr`.
    Missing(&'static str),
    /// The item exists with these attributes as they were read (`None`:
    /// absent): the target of a put as its job read it.
    Unchanged(Vec<(String, Option<AttributeValue>)>),
}

/// A fact a write depends on: checked in the same transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Guard {
    /// In the ledger table (e.g. a pair marker) rather than the model table.
    pub ledger: bool,
    pub key: Item,
    pub cond: Cond,
}

impl Guard {
    fn on(key: Item, cond: Cond) -> Self {
        Self {
            ledger: false,
            key,
            cond,
        }
    }
    pub fn exists(key: Item) -> Self {
        Self::on(key, Cond::Exists)
    }
    pub fn absent(key: Item) -> Self {
        Self::on(key, Cond::Absent)
    }
    pub fn equals(key: Item, attr: &'static str, value: AttributeValue) -> Self {
        Self::on(key, Cond::Equals(attr, value))
    }
    pub fn absent_or_not(key: Item, attr: &'static str, value: AttributeValue) -> Self {
        Self::on(key, Cond::AbsentOrNot(attr, value))
    }
    /// The item exists and `attr` is as read (`None`: absent).
    pub fn same(key: Item, attr: &'static str, value: Option<&AttributeValue>) -> Self {
        let cond = match value {
            Some(v) => Cond::Equals(attr, v.clone()),
            None => Cond::Missing(attr),
        };
        Self::on(key, cond)
    }
    /// The item exists with `attrs` as read (`None`: absent).
    pub fn unchanged(key: Item, attrs: Vec<(String, Option<AttributeValue>)>) -> Self {
        Self::on(key, Cond::Unchanged(attrs))
    }
    /// The same guard on the ledger table.
    pub fn in_ledger(mut self) -> Self {
        self.ledger = true;
        self
    }

    /// Whether `item` (absent: `None`) satisfies the guard now.
    pub fn holds(&self, item: Option<&Item>) -> bool {
        match (&self.cond, item) {
            (Cond::Exists, i) => i.is_some(),
            (Cond::Absent, i) => i.is_none(),
            (Cond::Equals(a, v), Some(i)) => i.get(*a).is_some_and(|h| same_value(h, v)),
            (Cond::Equals(..), None) => false,
            (Cond::AbsentOrNot(a, v), Some(i)) => !i.get(*a).is_some_and(|h| same_value(h, v)),
            (Cond::AbsentOrNot(..), None) => true,
            (Cond::Missing(a), Some(i)) => !i.contains_key(*a),
            (Cond::Missing(_), None) => false,
            (Cond::Unchanged(attrs), Some(i)) => attrs.iter().all(|(a, v)| match v {
                Some(v) => i.get(a).is_some_and(|h| same_value(h, v)),
                None => !i.contains_key(a),
            }),
            (Cond::Unchanged(_), None) => false,
        }
    }
}

/// A condition expression with its placeholders, numbered from `n`.
pub(crate) struct Expr {
    pub text: String,
    pub names: Vec<(String, String)>,
    pub values: Vec<(String, AttributeValue)>,
}

/// The condition of several guards on one item, ANDed.
pub(crate) fn condition(guards: &[&Guard], key_name: &str) -> Expr {
    let mut parts = Vec::new();
    let mut names = vec![("#k0".to_string(), key_name.to_string())];
    let mut values = Vec::new();
    for (i, g) in guards.iter().enumerate() {
        match &g.cond {
            Cond::Exists => parts.push("attribute_exists(#k0)".to_string()),
            Cond::Absent => parts.push("attribute_not_exists(#k0)".to_string()),
            Cond::Equals(a, v) => {
                parts.push(format!("#g{i} = :g{i}"));
                names.push((format!("#g{i}"), a.to_string()));
                values.push((format!(":g{i}"), v.clone()));
            }
            Cond::AbsentOrNot(a, v) => {
                parts.push(format!("(attribute_not_exists(#k0) OR #g{i} <> :g{i})"));
                names.push((format!("#g{i}"), a.to_string()));
                values.push((format!(":g{i}"), v.clone()));
            }
            Cond::Missing(a) => {
                parts.push(format!(
                    "attribute_exists(#k0) AND attribute_not_exists(#g{i})"
                ));
                names.push((format!("#g{i}"), a.to_string()));
            }
            Cond::Unchanged(attrs) => {
                parts.push("attribute_exists(#k0)".to_string());
                for (j, (a, v)) in attrs.iter().enumerate() {
                    names.push((format!("#g{i}_{j}"), a.clone()));
                    match v {
                        Some(v) => {
                            parts.push(format!("#g{i}_{j} = :g{i}_{j}"));
                            values.push((format!(":g{i}_{j}"), v.clone()));
                        }
                        None => parts.push(format!("attribute_not_exists(#g{i}_{j})")),
                    }
                }
            }
        }
    }
    let text = parts.join(" AND ");
    if !text.contains("#k0") {
        // DynamoDB refuses placeholders the expression does not use.
        names.retain(|(k, _)| k != "#k0");
    }
    Expr {
        text,
        names,
        values,
    }
}

/// The condition check of guards on one item (of the model table, or of
/// the ledger), for a transaction.
pub(crate) fn condition_check(
    guards: &[&Guard],
    table: &str,
    ledger_table: &str,
    key_name: &str,
) -> TransactWriteItem {
    let g = guards[0];
    let (t, kn) = if g.ledger {
        (ledger_table, crate::ledger::PK)
    } else {
        (table, key_name)
    };
    let e = condition(guards, kn);
    crate::tx::check_of(
        ConditionCheck::builder()
            .table_name(t)
            .set_key(Some(g.key.clone()))
            .condition_expression(e.text)
            .set_expression_attribute_names(placeholders(e.names))
            .set_expression_attribute_values(placeholders(e.values)),
    )
}

/// An item of the scope and the facts it depends on.
#[derive(Debug, Clone, PartialEq)]
pub struct Guarded {
    pub item: Item,
    pub guards: Vec<Guard>,
}

/// Processor-owned attributes of an existing item to set (`Some`) or remove
/// (`None`), with the facts they were computed from. The item must exist;
/// the rule includes only what differs from what it read.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardedUpdate {
    pub key: Item,
    pub attrs: Vec<(&'static str, Option<AttributeValue>)>,
    pub guards: Vec<Guard>,
    /// Metrics the update counts when it commits (e.g. `ScoreOverflow`: a
    /// number it stores clamped into a key); nothing when a newer fact wins.
    pub notes: Vec<&'static str>,
}

/// What a set job found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// Items that should exist, each with the facts its existence depends on.
    pub desired: Vec<Guarded>,
    /// Items of the scope that exist now, each with the facts its removal
    /// depends on (used only if it is not desired).
    pub existing: Vec<Guarded>,
    /// Attribute updates of items the scope does not own (e.g. the scores
    /// of writers' predictions).
    pub updates: Vec<GuardedUpdate>,
    /// Jobs to enqueue once the writes are done.
    pub then: Vec<OutMessage>,
    /// Facts of the scope that are bad input: the plan keeps what their
    /// earlier valid states implied; the consumer logs and counts each and
    /// completes (SPEC §2.7).
    pub bad_input: Vec<crate::error::InputError>,
    /// Rows a rule found to be bad input and already logged where found
    /// (key and reason); counted by the consumer, never failing the job.
    pub bad_input_logged: usize,
    /// Jobs to enqueue before the writes: the next page of a large scope,
    /// so that pages are written concurrently (a retry of this job sends
    /// it again: a duplicate page job is harmless).
    pub ahead: Vec<OutMessage>,
}

/// Read access for rules: consistent reads of the model table and ledger.
#[derive(Clone)]
pub struct Reads {
    pub store: Store,
    pub table: String,
    pub ledger_table: String,
    pub now: DateTime<Utc>,
}

/// A set job rule.
pub trait SetJob: Send + Sync {
    /// The consumer's name (logs, metrics).
    fn name(&self) -> &'static str;
    /// The model table's key names (partition key first).
    fn key_names(&self) -> &'static [&'static str];
    /// Attributes that do not make two versions of an item differ (e.g. a
    /// generation time): an existing item equal but for them is kept.
    fn volatile(&self) -> &'static [&'static str] {
        &[]
    }
    /// Reads the facts for the job in `body` and plans the scope. A body that
    /// cannot be read is `MessageError::Permanent`.
    fn plan<'a>(
        &'a self,
        body: &'a str,
        reads: &'a Reads,
    ) -> BoxFut<'a, Result<Plan, MessageError>>;
}

/// One write of the diff.
#[derive(Debug, Clone)]
struct Op {
    write: Write,
    key: Item,
    guards: Vec<Guard>,
    /// The target as the plan read it (for a put: absent, or the
    /// attributes it changes as read; for a delete: existing), checked in
    /// the write's own condition; `None` once a
    /// concurrent write was found different (the facts' guards decide).
    own: Option<Guard>,
    /// The size of the item written or deleted (bytes, as DynamoDB counts
    /// them), for the capacity it is billed.
    size: usize,
    /// Metrics counted when the op commits.
    notes: Vec<&'static str>,
}

/// Transaction chunks of one plan in flight at once. Chunks that share a
/// guarded item (a page's post) can conflict on DynamoDB
/// (`TransactionConflict`, retried with jittered backoff), so the bound is
/// small.
pub const WRITE_CONCURRENCY: usize = 4;

/// Write capacity units of a write of `size` bytes (1 KB units, rounded
/// up, at least 1).
pub fn write_units(size: usize) -> u64 {
    size.div_ceil(1024).max(1) as u64
}

#[derive(Debug, Clone)]
enum Write {
    Put(Item),
    Delete,
    Update(Vec<(&'static str, Option<AttributeValue>)>),
}

/// What applying a plan did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Applied {
    pub puts: usize,
    pub deletes: usize,
    pub updates: usize,
    /// Writes dropped because a guard failed (a newer fact won).
    pub superseded: usize,
    /// Writes found already made by a concurrent job of an overlapping
    /// scope (the item as desired, the volatile attributes aside, or
    /// already deleted): nothing written.
    pub raced: usize,
    /// Write capacity units as AWS bills the committed writes: 2 per KB
    /// per action of a transaction (condition checks included, counted as
    /// 1 KB). Every write of a set job is a transaction action: each is
    /// guarded by the facts it was computed from (SPEC §7).
    pub write_units: u64,
    /// TransactWriteItems actions committed (writes and condition checks).
    pub actions: usize,
    /// The notes of the committed updates ([`GuardedUpdate::notes`]).
    pub noted: crate::metrics::BatchMetrics,
}

impl Applied {
    fn count(&mut self, w: &Write) {
        match w {
            Write::Put(_) => self.puts += 1,
            Write::Delete => self.deletes += 1,
            Write::Update(_) => self.updates += 1,
        }
    }

    pub fn writes(&self) -> usize {
        self.puts + self.deletes + self.updates
    }

    /// Adds what another part of the same plan (or another page) applied.
    pub fn add(&mut self, o: &Applied) {
        self.puts += o.puts;
        self.deletes += o.deletes;
        self.updates += o.updates;
        self.superseded += o.superseded;
        self.raced += o.raced;
        self.write_units += o.write_units;
        self.actions += o.actions;
        for (k, v) in &o.noted.0 {
            *self.noted.0.entry(k).or_default() += v;
        }
    }
}

/// Diffs a plan against what exists and writes the difference, up to
/// [`WRITE_CONCURRENCY`] transactions at once.
pub async fn apply(
    store: &Store,
    table: &str,
    ledger_table: &str,
    key_names: &[&str],
    volatile: &[&str],
    plan: &Plan,
) -> Result<Applied, MessageError> {
    let strip = |i: &Item| without(i, volatile);
    let existing: HashMap<String, &Guarded> = plan
        .existing
        .iter()
        .map(|g| (item_id(&key_of(&g.item, key_names)), g))
        .collect();
    let mut desired_ids = std::collections::HashSet::new();
    let mut ops = Vec::new();
    for d in &plan.desired {
        let key = key_of(&d.item, key_names);
        let id = item_id(&key);
        if !desired_ids.insert(id.clone()) {
            continue;
        }
        let own = match existing.get(&id) {
            Some(e) if crate::item::same_items(&strip(&e.item), &strip(&d.item)) => continue,
            // Read otherwise: put only while the attributes it changes are
            // as read, so that a concurrent job's equal put is not made
            // again.
            Some(e) => Guard::unchanged(key.clone(), changed(&e.item, &d.item, volatile)),
            // Read absent (or not listed): put only while it still is.
            None => Guard::absent(key.clone()),
        };
        ops.push(Op {
            write: Write::Put(d.item.clone()),
            key,
            guards: d.guards.clone(),
            own: Some(own),
            size: crate::item::item_size(&d.item),
            notes: Vec::new(),
        });
    }
    for (id, e) in &existing {
        if !desired_ids.contains(id) {
            let key = key_of(&e.item, key_names);
            ops.push(Op {
                write: Write::Delete,
                own: Some(Guard::exists(key.clone())),
                key,
                guards: e.guards.clone(),
                size: crate::item::item_size(&e.item),
                notes: Vec::new(),
            });
        }
    }
    for u in &plan.updates {
        // An update never creates the item.
        let mut guards = u.guards.clone();
        guards.push(Guard::exists(u.key.clone()));
        ops.push(Op {
            write: Write::Update(u.attrs.clone()),
            key: u.key.clone(),
            guards,
            own: None,
            // The updated item's size is not known: billed as at least 1 KB.
            size: 0,
            notes: u.notes.clone(),
        });
    }
    let mut applied = Applied::default();
    // Transaction chunks, packed up front and written concurrently: every
    // op is in exactly one chunk, and a chunk whose guards fail drops only
    // the ops that own them (see `write_chunk`).
    let mut chunks = Vec::new();
    let mut pending = ops;
    while !pending.is_empty() {
        let mut packed = pack(pending, table, ledger_table, key_names);
        pending = std::mem::take(&mut packed.rest);
        chunks.push(packed);
    }
    use futures::StreamExt as _;
    let mut results = futures::stream::iter(
        chunks
            .into_iter()
            .map(|packed| write_chunk(store, table, ledger_table, key_names, volatile, packed)),
    )
    .buffer_unordered(WRITE_CONCURRENCY);
    while let Some(r) = results.next().await {
        applied.add(&r?);
    }
    Ok(applied)
}

/// The attributes a put of `to` changes on `from` (the volatile ones
/// aside), each as in `from` (`None`: absent there).
fn changed(from: &Item, to: &Item, volatile: &[&str]) -> Vec<(String, Option<AttributeValue>)> {
    let mut names: Vec<&String> = from.keys().chain(to.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|a| !volatile.contains(&a.as_str()))
        .filter(|a| match (from.get(*a), to.get(*a)) {
            (Some(x), Some(y)) => !same_value(x, y),
            (x, y) => x.is_some() != y.is_some(),
        })
        .map(|a| (a.clone(), from.get(a).cloned()))
        .collect()
}

/// `i` without the `volatile` attributes.
fn without(i: &Item, volatile: &[&str]) -> Item {
    i.iter()
        .filter(|(k, _)| !volatile.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Writes one chunk (ops packed into one transaction). A cancelled
/// transaction drops every op that owns (or shares) a failed guard (a
/// newer fact won) and is sent again with the others; an op whose own
/// condition alone failed (its target written since the plan read it) is
/// looked at again ([`recheck`]).
async fn write_chunk(
    store: &Store,
    table: &str,
    ledger_table: &str,
    key_names: &[&str],
    volatile: &[&str],
    packed: Packed,
) -> Result<Applied, MessageError> {
    let mut applied = Applied::default();
    let mut next = Some(packed);
    while let Some(Packed {
        actions,
        owners,
        writes,
        taken,
        rest,
        units,
    }) = next.take()
    {
        debug_assert!(rest.is_empty(), "a chunk fits one transaction");
        let n = actions.len();
        match store.transact(actions).await {
            Ok(()) => {
                for o in &taken {
                    applied.count(&o.write);
                    for note in &o.notes {
                        applied.noted.incr(note);
                    }
                }
                applied.write_units += units;
                applied.actions += n;
            }
            Err(TxError::ConditionsFailed { failed }) => {
                let mut dropped = std::collections::HashSet::new();
                // Ops whose own write failed while it checked the target
                // as read: another job wrote it since (or a guard of the
                // fact on the target's own key failed: told apart below).
                let mut raced = std::collections::HashSet::new();
                for (i, f) in failed.iter().enumerate() {
                    if !*f {
                        continue;
                    }
                    match writes[i] {
                        Some(op) if taken[op].own.is_some() => {
                            raced.insert(op);
                        }
                        _ => dropped.extend(owners[i].iter().copied()),
                    }
                }
                raced.retain(|op| !dropped.contains(op));
                // Each cancelled transaction drops the ops of its failed
                // guards or sets aside the check of their target, so this
                // terminates; without either (no progress), give up and let
                // the message be retried.
                if dropped.is_empty() && raced.is_empty() {
                    return Err(MessageError::Retryable(
                        crate::error::ProcessError::Conflict("guards keep failing".into()),
                    ));
                }
                let mut retry: Vec<Op> = Vec::new();
                for (i, o) in taken.into_iter().enumerate() {
                    if dropped.contains(&i) {
                        continue;
                    }
                    if !raced.contains(&i) {
                        retry.push(o);
                        continue;
                    }
                    match recheck(store, table, volatile, &o).await? {
                        Recheck::Done => applied.raced += 1,
                        Recheck::Superseded => {
                            dropped.insert(i);
                        }
                        Recheck::Again => retry.push(Op { own: None, ..o }),
                    }
                }
                applied.superseded += dropped.len();
                if !retry.is_empty() {
                    next = Some(pack(retry, table, ledger_table, key_names));
                }
            }
            Err(TxError::Store(e)) => return Err(e.into()),
        }
    }
    Ok(applied)
}

/// What an op whose own condition failed comes to once its target is read
/// again.
enum Recheck {
    /// The target is as the op would leave it: nothing to write.
    Done,
    /// The target is as the plan read it: a guard of the facts on the
    /// target's own key failed (a newer fact won).
    Superseded,
    /// Another item is there: written again, guarded by the facts alone.
    Again,
}

/// Reads the target of `op` (whose own condition failed) again: a put
/// whose item is now there (the volatile attributes aside) or a delete
/// whose item is gone is done; a delete whose item is still there lost to
/// a fact; a put whose target differs is sent again without its own
/// condition (its facts decide, as for an item the plan read).
async fn recheck(
    store: &Store,
    table: &str,
    volatile: &[&str],
    op: &Op,
) -> Result<Recheck, MessageError> {
    // BatchGetItem (consistent): the read a queue consumer is granted.
    let now = store.batch_get(table, vec![op.key.clone()]).await?.pop();
    Ok(match (&op.write, now) {
        (Write::Put(want), Some(got))
            if crate::item::same_items(&without(&got, volatile), &without(want, volatile)) =>
        {
            Recheck::Done
        }
        (Write::Put(_), _) => Recheck::Again,
        (_, None) => Recheck::Done,
        (_, Some(_)) => Recheck::Superseded,
    })
}

/// One transaction: its actions, for each action the ops (indexes into
/// `taken`) it belongs to and the op whose write it is, the ops it
/// carries, and the ops left for later.
struct Packed {
    actions: Vec<TransactWriteItem>,
    owners: Vec<Vec<usize>>,
    writes: Vec<Option<usize>>,
    taken: Vec<Op>,
    rest: Vec<Op>,
    /// Write capacity units the transaction is billed (2 per KB per action).
    units: u64,
}

/// Packs ops into one transaction (at most 100 actions, one action per
/// item): each op's write, conditioned on its guards on its own item, and a
/// condition check per other guarded item, shared by the ops that need it.
fn pack(ops: Vec<Op>, table: &str, ledger_table: &str, key_names: &[&str]) -> Packed {
    let mut taken: Vec<Op> = Vec::new();
    let mut rest = Vec::new();
    // item id (with table) -> action index
    let mut slots: BTreeMap<(bool, String), usize> = BTreeMap::new();
    let mut guards_at: Vec<Vec<Guard>> = Vec::new();
    let mut writes: Vec<Option<usize>> = Vec::new();
    let mut owners: Vec<Vec<usize>> = Vec::new();
    for op in ops {
        if !rest.is_empty() {
            rest.push(op);
            continue;
        }
        let own = (false, item_id(&op.key));
        if slots.contains_key(&own) {
            rest.push(op);
            continue;
        }
        // Each guard's item, by id (computed once per guard).
        let guarded: Vec<(bool, String)> = op
            .guards
            .iter()
            .map(|g| (g.ledger, item_id(&g.key)))
            .collect();
        let new_slots = 1 + guarded
            .iter()
            .filter(|k| **k != own && !slots.contains_key(*k))
            .count();
        if slots.len() + new_slots > 100 && !taken.is_empty() {
            rest.push(op);
            continue;
        }
        let idx = taken.len();
        let w = slots.len();
        slots.insert(own.clone(), w);
        guards_at.push(
            op.guards
                .iter()
                .zip(&guarded)
                .filter(|(_, k)| **k == own)
                .map(|(g, _)| g.clone())
                .chain(op.own.clone())
                .collect(),
        );
        writes.push(Some(idx));
        owners.push(vec![idx]);
        for (g, k) in op.guards.iter().zip(guarded).filter(|(_, k)| *k != own) {
            let slot = match slots.get(&k) {
                Some(s) => *s,
                None => {
                    let s = slots.len();
                    slots.insert(k, s);
                    guards_at.push(Vec::new());
                    writes.push(None);
                    owners.push(Vec::new());
                    s
                }
            };
            if !guards_at[slot].contains(g) {
                guards_at[slot].push(g.clone());
            }
            if !owners[slot].contains(&idx) {
                owners[slot].push(idx);
            }
        }
        taken.push(op);
    }
    let mut actions = Vec::with_capacity(writes.len());
    let units = writes
        .iter()
        .map(|w| 2 * w.map_or(1, |i| write_units(taken[i].size)))
        .sum();
    for (slot, w) in writes.iter().enumerate() {
        let refs: Vec<&Guard> = guards_at[slot].iter().collect();
        let Some(op_idx) = w else {
            actions.push(condition_check(&refs, table, ledger_table, key_names[0]));
            continue;
        };
        let op = &taken[*op_idx];
        // The op's own guards (none: an empty condition, no placeholders).
        let Expr {
            text,
            mut names,
            mut values,
        } = condition(&refs, key_names[0]);
        let cond = (!text.is_empty()).then_some(text);
        actions.push(match &op.write {
            Write::Put(item) => crate::tx::put_of(
                Put::builder()
                    .table_name(table)
                    .set_item(Some(item.clone()))
                    .set_condition_expression(cond)
                    .set_expression_attribute_names(placeholders(names))
                    .set_expression_attribute_values(placeholders(values)),
            ),
            Write::Update(attrs) => {
                let mut sets = Vec::new();
                let mut removes = Vec::new();
                for (i, (a, v)) in attrs.iter().enumerate() {
                    names.push((format!("#u{i}"), a.to_string()));
                    match v {
                        Some(v) => {
                            sets.push(format!("#u{i} = :u{i}"));
                            values.push((format!(":u{i}"), v.clone()));
                        }
                        None => removes.push(format!("#u{i}")),
                    }
                }
                crate::tx::update_of(
                    aws_sdk_dynamodb::types::Update::builder()
                        .table_name(table)
                        .set_key(Some(op.key.clone()))
                        .update_expression(super::derive::set_remove(&sets, &removes))
                        .set_condition_expression(cond)
                        .set_expression_attribute_names(placeholders(names))
                        .set_expression_attribute_values(placeholders(values)),
                )
            }
            Write::Delete => crate::tx::delete_of(
                Delete::builder()
                    .table_name(table)
                    .set_key(Some(op.key.clone()))
                    .set_condition_expression(cond)
                    .set_expression_attribute_names(placeholders(names))
                    .set_expression_attribute_values(placeholders(values)),
            ),
        });
    }
    Packed {
        actions,
        owners,
        writes,
        taken,
        rest,
        units,
    }
}

/// The SQS consumer of a [`SetJob`].
pub struct SetJobProcessor {
    job: Arc<dyn SetJob>,
    reads: Reads,
    sqs: Option<aws_sdk_sqs::Client>,
    queues: BTreeMap<String, String>,
    metrics: Metrics,
    now: fn() -> DateTime<Utc>,
}

impl SetJobProcessor {
    pub fn new(
        job: Arc<dyn SetJob>,
        store: Store,
        table: &str,
        ledger_table: &str,
        sqs: Option<aws_sdk_sqs::Client>,
        queues: BTreeMap<String, String>,
    ) -> Self {
        Self {
            job,
            reads: Reads {
                store,
                table: table.to_string(),
                ledger_table: ledger_table.to_string(),
                now: Utc::now(),
            },
            sqs,
            queues,
            metrics: Metrics::default(),
            now: Utc::now,
        }
    }

    pub fn store(&self) -> &Store {
        &self.reads.store
    }

    /// Runs one job body to completion: its next pages are sent ahead to
    /// their queue (the queue consumer's path).
    pub async fn run(&self, body: &str) -> Result<Outcome, MessageError> {
        self.run_one(body, true).await.map(|(o, _)| o)
    }

    /// Runs a job and every page after it in this process, one after the
    /// other (`verify --repair`: a repair does not depend on the queue's
    /// consumers running). Jobs for later (`then`) are still sent.
    pub async fn run_all(&self, body: &str) -> Result<Outcome, MessageError> {
        let mut outcome = Outcome::Duplicate;
        let mut bodies = vec![body.to_string()];
        while let Some(b) = bodies.pop() {
            let (o, ahead) = self.run_one(&b, false).await?;
            if o == Outcome::Applied {
                outcome = Outcome::Applied;
            }
            bodies.extend(ahead.into_iter().map(|m| m.body));
        }
        Ok(outcome)
    }

    /// One job; the pages ahead are sent (`send_ahead`) or returned.
    async fn run_one(
        &self,
        body: &str,
        send_ahead: bool,
    ) -> Result<(Outcome, Vec<OutMessage>), MessageError> {
        let mut reads = self.reads.clone();
        reads.now = (self.now)();
        let mut plan = self.job.plan(body, &reads).await?;
        if !plan.bad_input.is_empty() || plan.bad_input_logged > 0 {
            let mut bad = crate::metrics::BatchMetrics::default();
            for e in &plan.bad_input {
                tracing::warn!(processor = self.job.name(), kind = e.kind(), reason = %e, "bad input in the job's scope: what it implied is kept");
                bad.incr(crate::metrics::names::BAD_INPUT);
            }
            for _ in 0..plan.bad_input_logged {
                bad.incr(crate::metrics::names::BAD_INPUT);
            }
            self.metrics.record(self.job.name(), &bad);
        }
        let ahead = std::mem::take(&mut plan.ahead);
        if send_ahead && !ahead.is_empty() {
            let msgs: Vec<(usize, OutMessage)> = ahead.iter().cloned().map(|m| (0, m)).collect();
            crate::sqs::send_out(self.sqs.as_ref(), &self.queues, &msgs, usize::MAX)
                .await
                .map_err(|f| MessageError::Retryable(f.error))?;
        }
        let ahead = if send_ahead { Vec::new() } else { ahead };
        let applied = apply(
            &reads.store,
            &reads.table,
            &reads.ledger_table,
            self.job.key_names(),
            self.job.volatile(),
            &plan,
        )
        .await?;
        if !applied.noted.0.is_empty() {
            self.metrics.record(self.job.name(), &applied.noted);
        }
        if !plan.then.is_empty() {
            let msgs: Vec<(usize, OutMessage)> = plan.then.into_iter().map(|m| (0, m)).collect();
            crate::sqs::send_out(self.sqs.as_ref(), &self.queues, &msgs, usize::MAX)
                .await
                .map_err(|f| MessageError::Retryable(f.error))?;
        }
        if applied.writes() > 0 {
            tracing::debug!(
                processor = self.job.name(),
                puts = applied.puts,
                deletes = applied.deletes,
                updates = applied.updates,
                write_units = applied.write_units,
                "set job applied"
            );
        }
        if applied.raced > 0 {
            tracing::debug!(
                processor = self.job.name(),
                raced = applied.raced,
                "writes found made by a concurrent job: not made again"
            );
        }
        if applied.superseded > 0 {
            tracing::info!(
                processor = self.job.name(),
                superseded = applied.superseded,
                "writes dropped: a newer fact won"
            );
        }
        let outcome = if applied.writes() == 0 {
            Outcome::Duplicate
        } else {
            Outcome::Applied
        };
        Ok((outcome, ahead))
    }
}

impl MessageProcessor for SetJobProcessor {
    fn name(&self) -> &'static str {
        self.job.name()
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    async fn process(&self, body: &str) -> Result<Outcome, MessageError> {
        self.run(body).await
    }
}

#[cfg(test)]
#[path = "setjob_tests.rs"]
mod tests;
