//! Applying a set job's plan ([`apply`]): the difference between what
//! should exist and what exists, written in transactions of up to 100
//! actions, each write conditioned on its facts and on its target as read,
//! a raced target read again ([`Applied::raced`]).

use super::*;

/// One write of the diff.
#[derive(Debug, Clone)]
pub(super) struct Op {
    pub(super) write: Write,
    pub(super) key: Item,
    pub(super) guards: Vec<Guard>,
    /// The target as the plan read it (for a put: absent, or the
    /// attributes it changes as read; for a delete: existing), checked in
    /// the write's own condition; `None` once a
    /// concurrent write was found different (the facts' guards decide).
    pub(super) own: Option<Guard>,
    /// The size of the item written or deleted (bytes, as DynamoDB counts
    /// them), for the capacity it is billed.
    pub(super) size: usize,
    /// Metrics counted when the op commits.
    pub(super) notes: Vec<&'static str>,
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
pub(super) enum Write {
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
    /// Targets whose write DynamoDB refuses (a `ValidationException`, or a
    /// transaction cancelled by a `ValidationError`: an item past 400 KB, a
    /// key past its limit or empty), found by writing the refused
    /// transaction's ops one by one: each is bad input (its key and why),
    /// nothing written for it; the other ops are written as ever.
    pub refused: Vec<Refused>,
}

/// A target whose write DynamoDB refuses: bad input of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The target's key, as logs show keys.
    pub key: String,
    /// DynamoDB's code and message (never the item).
    pub reason: String,
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
        self.refused.extend(o.refused.iter().cloned());
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
pub(super) fn changed(
    from: &Item,
    to: &Item,
    volatile: &[&str],
) -> Vec<(String, Option<AttributeValue>)> {
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
/// looked at again ([`recheck`]). A transaction DynamoDB refuses (the
/// error policy's `Skip`: no retry can fix it) is split, each op sent
/// alone with its guards, to find the target it cannot take: that one is
/// [`Applied::refused`], the others are written (only after a refusal:
/// the common path sends one transaction per chunk, as before).
async fn write_chunk(
    store: &Store,
    table: &str,
    ledger_table: &str,
    key_names: &[&str],
    volatile: &[&str],
    packed: Packed,
) -> Result<Applied, MessageError> {
    let mut applied = Applied::default();
    // Transactions still to send (more than one only once a refused
    // transaction was split).
    let mut queue = vec![packed];
    while let Some(Packed {
        actions,
        owners,
        writes,
        taken,
        rest,
        units,
    }) = queue.pop()
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
                // The raced ops' targets, read again at once (BatchGetItem,
                // consistent: the read a queue consumer is granted).
                let raced_keys: Vec<Item> = raced.iter().map(|i| taken[*i].key.clone()).collect();
                let now: HashMap<String, Item> = if raced_keys.is_empty() {
                    HashMap::new()
                } else {
                    store
                        .batch_get(table, raced_keys)
                        .await?
                        .into_iter()
                        .map(|i| (item_id(&key_of(&i, key_names)), i))
                        .collect()
                };
                let mut retry: Vec<Op> = Vec::new();
                for (i, o) in taken.into_iter().enumerate() {
                    if dropped.contains(&i) {
                        continue;
                    }
                    if !raced.contains(&i) {
                        retry.push(o);
                        continue;
                    }
                    match recheck(volatile, &o, now.get(&item_id(&o.key))) {
                        Recheck::Done => applied.raced += 1,
                        Recheck::Superseded => {
                            dropped.insert(i);
                        }
                        Recheck::Again => retry.push(Op { own: None, ..o }),
                    }
                }
                applied.superseded += dropped.len();
                if !retry.is_empty() {
                    queue.push(pack(retry, table, ledger_table, key_names));
                }
            }
            Err(TxError::Store(e)) => {
                let e = crate::error::ProcessError::from(e);
                if e.policy() != crate::error::Policy::Skip {
                    return Err(MessageError::Retryable(e));
                }
                if taken.len() > 1 {
                    // Which target? Each op alone (in order), guards kept.
                    for op in taken.into_iter().rev() {
                        queue.push(pack(vec![op], table, ledger_table, key_names));
                    }
                    continue;
                }
                for op in &taken {
                    applied.refused.push(Refused {
                        key: crate::item::display_key(&op.key),
                        reason: format!("DynamoDB refuses its write: {e}"),
                    });
                }
            }
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

/// What `op` (whose own condition failed) comes to, its target read again
/// as `now`: a put whose item is now there (the volatile attributes aside)
/// or a delete whose item is gone is done; a delete whose item is still
/// there lost to a fact; a put whose target differs is sent again without
/// its own condition (its facts decide, as for an item the plan read).
fn recheck(volatile: &[&str], op: &Op, now: Option<&Item>) -> Recheck {
    match (&op.write, now) {
        (Write::Put(want), Some(got))
            if crate::item::same_items(&without(got, volatile), &without(want, volatile)) =>
        {
            Recheck::Done
        }
        (Write::Put(_), _) => Recheck::Again,
        (_, None) => Recheck::Done,
        (_, Some(_)) => Recheck::Superseded,
    }
}

/// One transaction: its actions, for each action the ops (indexes into
/// `taken`) it belongs to and the op whose write it is, the ops it
/// carries, and the ops left for later.
pub(super) struct Packed {
    pub(super) actions: Vec<TransactWriteItem>,
    pub(super) owners: Vec<Vec<usize>>,
    pub(super) writes: Vec<Option<usize>>,
    pub(super) taken: Vec<Op>,
    pub(super) rest: Vec<Op>,
    /// Write capacity units the transaction is billed (2 per KB per action).
    pub(super) units: u64,
}

/// Packs ops into one transaction (at most 100 actions, one action per
/// item): each op's write, conditioned on its guards on its own item, and a
/// condition check per other guarded item, shared by the ops that need it.
pub(super) fn pack(ops: Vec<Op>, table: &str, ledger_table: &str, key_names: &[&str]) -> Packed {
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
                        .update_expression(crate::engine::derive::set_remove(&sets, &removes))
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
