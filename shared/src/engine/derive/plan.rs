//! The plan of a group: what each source item implies as it is, the
//! derived items' writes, and the transaction actions of each source.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Put, TransactWriteItem};

use super::implied::{checked_sums, contribution_deltas, projection_update, Implied};
use super::keys::{index_item, index_key, source_key, source_key_pk};
use super::owners::{Owners, SharedPlan, Touch};
use super::reads::{Recorded, OWED, PENDING, PENDING_SK, SEQ, SPILLED};
use super::trail::{Rejected, Trail};
use super::{Counter, Deriver, Hint, Note, TOMBSTONE_TTL_SECS};
use crate::engine::writable::{self, Writes};
use crate::error::InputError;
use crate::item::{item_size, key_of, n, Item, MAX_ITEM_BYTES};
use crate::ledger::{self, item_id};
use crate::store::Update;
use crate::tx;

/// The plan for one source item.
pub(super) struct KeyPlan {
    pub(super) pos: usize,
    /// The record write (put or, when unchanged but derived items must be
    /// written, a condition check) and the derived items' writes.
    pub(super) actions: Vec<TransactWriteItem>,
    pub(super) record_written: bool,
    /// Ledger actions among `actions` besides the head (owner records).
    pub(super) extra_ledger: usize,
    pub(super) deltas: BTreeMap<String, (Item, BTreeMap<String, i128>)>,
    /// Counters it counts into for the first time (see [`Deriver::first_counts`]),
    /// by id: synced, as counted, once its actions commit.
    pub(super) counted: BTreeMap<String, Item>,
    /// The source item's key (for the log when DynamoDB rejects its writes).
    pub(super) key: Item,
    /// What its actions weigh in a transaction (bytes, approximately).
    pub(super) bytes: usize,
    /// Shared derived items whose head and item its transaction writes.
    pub(super) shared: Vec<String>,
}

/// What a transaction action weighs toward the 4 MB of a transaction.
pub(super) fn action_bytes(a: &TransactWriteItem) -> usize {
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
pub(super) struct Carried {
    pub(super) actions: Vec<TransactWriteItem>,
    /// How many of `actions` are ledger writes.
    pub(super) ledger: usize,
    /// Shared derived items whose owners this source changes (or whose
    /// write it carries): their head and item go in its transaction.
    pub(super) shared: Vec<String>,
}

/// The write that brings a derived item to what its sources imply.
#[derive(Debug, PartialEq)]
pub(super) enum DerivedWrite<'a> {
    Put(&'a Item),
    Delete,
    Keep,
}

/// The write that brings a derived item from `have` (the table's) to
/// `want` (what its sources imply). A wanted item whose TTL attribute
/// `ttl` is past at `now` (epoch seconds) is expected no more (DynamoDB
/// deletes it, within days): it is never put, so that a replayed record, a
/// backfill or a repair does not bring back what the TTL sweep took (nor
/// write it expired); another item in its place goes, one as wanted is
/// left to the sweep.
pub(super) fn derived_write<'a>(
    want: Option<&'a Item>,
    have: Option<&Item>,
    ttl: Option<&str>,
    now: i64,
) -> DerivedWrite<'a> {
    let as_wanted = |d: &Item| have.is_some_and(|h| crate::item::same_items(h, d));
    match want {
        Some(d) if as_wanted(d) => DerivedWrite::Keep,
        Some(d) if !crate::item::expired_at(d, ttl, now) => DerivedWrite::Put(d),
        _ if have.is_some() => DerivedWrite::Delete,
        _ => DerivedWrite::Keep,
    }
}

/// What the items of a group imply now (see [`Deriver::assess`]).
#[derive(Default)]
pub(super) struct Assessment {
    /// Projection writes, by position.
    pub(super) updates: Vec<(usize, Update, Vec<Note>)>,
    /// Per item: its position, what it implies, the derived items it implies.
    pub(super) wanted: Vec<(usize, Implied, Vec<Item>)>,
    /// Keys of the derived items to read (implied now, or recorded).
    pub(super) derived_keys: BTreeMap<String, Item>,
    pub(super) bad: Vec<(usize, InputError)>,
    /// Positions whose item was read as none of the batch's images of it
    /// (changed since, or gone since): bad input met there is the record's
    /// that changed it, counted in its own batch.
    pub(super) ahead: BTreeSet<usize>,
    /// Per item (by position): what its record keeps of the stream.
    pub(super) trails: BTreeMap<usize, Trail>,
    /// Per item (by position): the counters it counts into for the first
    /// time (see [`Deriver::first_counts`]).
    pub(super) counted: BTreeMap<usize, BTreeMap<String, Item>>,
}

/// What the group's reads saw, for planning one source item.
#[derive(Clone, Copy)]
pub(super) struct Seen<'a> {
    /// Counters whose items lag their totals, by id.
    pub(super) lagging: &'a BTreeMap<String, Item>,
}

impl Deriver {
    /// What each item of a group implies as it is (absent: nothing), the
    /// projections to write, and the bad input met. An aspect that meets bad
    /// input keeps what was recorded.
    pub(super) fn assess(
        &self,
        group: &[Item],
        base: usize,
        recorded: &HashMap<String, Recorded>,
        current: &HashMap<String, Item>,
        hints: &HashMap<String, Hint<'_>>,
        counters: &mut BTreeMap<String, Counter>,
    ) -> Assessment {
        let key_names = self.rules.key_names();
        let mut out = Assessment::default();
        for (i, key) in group.iter().enumerate() {
            let pos = base + i;
            let rec = recorded.get(&source_key_pk(self.processor, key));
            let (mut contributions, mut derived) = (Some(vec![]), Some(vec![]));
            let mut memberships = Some(vec![]);
            let id = item_id(key);
            if let Some(item) = current.get(&id) {
                let bad_before = out.bad.len();
                // The item as its record's image showed it: what the stream
                // read of that image holds (rules are pure), else asked now.
                let aspects = match hints.get(&id).and_then(|h| h.seen) {
                    Some((image, aspects)) if image == item => aspects.clone(),
                    _ => {
                        out.ahead.insert(pos);
                        self.rules.aspects(item)
                    }
                };
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
                            if let Some(m) = memberships.as_mut() {
                                m.extend(self.self_membership(item));
                            }
                            counters.insert(item_id(&c.key_item()), c);
                        }
                    }
                    Err(e) => {
                        out.bad.push((pos, e));
                        (contributions, derived, memberships) = (None, None, None);
                    }
                }
            } else {
                if hints.get(&id).and_then(|h| h.seen).is_some() {
                    // Gone since the batch's latest image of it: read ahead.
                    out.ahead.insert(pos);
                }
                if let Some(c) = self.rules.counter(key) {
                    // A counter item deleted (by a writer, by TTL) is brought
                    // back from its key alone when its totals say it exists.
                    counters.insert(item_id(&c.key_item()), c);
                }
            }
            let mut implied = Implied::from_rules(
                contributions.as_deref().unwrap_or_default(),
                derived.as_deref().unwrap_or_default(),
                key_names,
            );
            implied.indexed = memberships.iter().flatten().cloned().collect();
            // An aspect the item rejects now keeps what its last valid
            // image in the stream implied (see `trail`).
            let present = current.get(&id);
            let rejected = Rejected {
                contributions: present.is_some() && contributions.is_none(),
                derived: present.is_some() && derived.is_none(),
                indexed: present.is_some() && memberships.is_none(),
            };
            let steps = hints.get(&id).map_or(&[][..], |h| h.steps);
            let trail = self.follow_trail(
                present,
                rejected,
                steps,
                rec.map(|r| (&r.implied, &r.trail)),
                &mut implied,
            );
            out.trails.insert(pos, trail);
            let counted = self.first_counts(rec, &implied, steps);
            if !counted.is_empty() {
                out.counted.insert(pos, counted);
            }
            for d in rec
                .iter()
                .flat_map(|r| r.implied.derived.values())
                .chain(implied.derived.values())
            {
                let k = key_of(d, key_names);
                out.derived_keys.insert(item_id(&k), k);
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
                if let Some(c) = crate::engine::locate::located_key(index)
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

    /// The processor-created counters (kept from their first count on)
    /// that this source counts into now, or that an image of it in the
    /// batch newer than its record counted into, and that its record does
    /// not list: its first counts into them. A count of 0, or a count
    /// undone within the batch (a follow and its unfollow), moves no total;
    /// the sync is told that they are counted all the same, so that their
    /// items exist whatever the batching (SPEC §5: present once counted).
    /// A counter its record lists was counted when the record was written.
    /// Only images the rules accept count (bad input changes nothing); the
    /// images are asked only for counters the item as read does not name.
    pub(super) fn first_counts(
        &self,
        rec: Option<&Recorded>,
        implied: &Implied,
        steps: &[super::Step<'_>],
    ) -> BTreeMap<String, Item> {
        let listed = |id: &str| rec.is_some_and(|r| r.implied.contributions.contains_key(id));
        let kept = |key: &Item| {
            self.rules
                .counter(key)
                .is_some_and(|c| crate::engine::counts::kept_from_first_count(&c))
        };
        let mut out = BTreeMap::new();
        for (id, (key, _)) in &implied.contributions {
            if !listed(id) && kept(key) {
                out.insert(id.clone(), key.clone());
            }
        }
        // Records met before the record was last written are old news.
        let q = rec.and_then(|r| r.trail.seq.as_ref());
        for step in steps.iter().filter(|s| q.is_none_or(|q| s.seq > q)) {
            let Some((image, aspects)) = step.new else {
                continue;
            };
            let Ok(contributions) = &aspects.contributions else {
                continue;
            };
            let others: Vec<Item> = contributions
                .iter()
                .map(|c| c.counter.key_item())
                .filter(|k| {
                    let id = item_id(k);
                    !listed(&id)
                        && !out.contains_key(&id)
                        && !implied.contributions.contains_key(&id)
                })
                .collect();
            if others.is_empty() || self.state_of(image, aspects).contributions.is_none() {
                continue;
            }
            for key in others {
                if kept(&key) {
                    out.insert(item_id(&key), key);
                }
            }
        }
        out
    }

    /// A located counter's item lists itself under its identity (with its
    /// own record): that index entry, when `item` is one.
    pub(super) fn self_membership(&self, item: &Item) -> Option<(String, String)> {
        let c = self.rules.counter(item)?;
        self.rules.locate(&c.key_item())?;
        Some((
            crate::engine::locate::locate_index(&c.key_item()),
            item_id(&key_of(item, self.rules.key_names())),
        ))
    }

    /// The derived items the group's sources touch (implied now or
    /// recorded), by id: the key, and each touching source with what it
    /// implies now (or what is recorded when the rule met bad input: kept
    /// as earlier valid states implied) and what it recorded.
    pub(super) fn touches(
        &self,
        group: &[Item],
        base: usize,
        recorded: &HashMap<String, Recorded>,
        wanted: &[(usize, Implied, Vec<Item>)],
    ) -> BTreeMap<String, (Item, Vec<Touch>)> {
        let key_names = self.rules.key_names();
        let mut touched: BTreeMap<String, (Item, Vec<Touch>)> = BTreeMap::new();
        for (pos, implied, derived) in wanted {
            let key = &group[*pos - base];
            let src = item_id(key);
            let rec = recorded.get(&source_key_pk(self.processor, key));
            let was = |id: &str| rec.and_then(|r| r.implied.derived.get(id)).cloned();
            let mut ids: BTreeSet<String> = implied.derived.keys().cloned().collect();
            ids.extend(rec.iter().flat_map(|r| r.implied.derived.keys().cloned()));
            for id in ids {
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
                    .push(Touch {
                        pos: *pos,
                        src: src.clone(),
                        now,
                        was: was(&id),
                    });
            }
        }
        touched
    }

    /// The writes that bring each derived item the group's sources touch
    /// to what its sources imply:
    ///
    /// - an item one source implies is put when it differs (an edited one
    ///   is brought back) and deleted, whatever its content, when no source
    ///   implies it any more (it is processor-owned) or what it implies is
    ///   past its TTL ([`derived_write`]), carried by the first
    ///   source touching it (by position), so that no transaction writes
    ///   one item twice;
    /// - a shared item ([`Rules::shared`]) takes the content of its
    ///   last-sorting owner, whichever source changed last: each source
    ///   writes its own owner item, and the transactions holding them write
    ///   the head and the item (see [`super::owners`]).
    pub(super) fn plan_derived(
        &self,
        touched: BTreeMap<String, (Item, Vec<Touch>)>,
        existing: &HashMap<String, Item>,
        owners: &HashMap<String, Owners>,
    ) -> (BTreeMap<usize, Carried>, BTreeMap<String, SharedPlan>) {
        let mut out: BTreeMap<usize, Carried> = BTreeMap::new();
        let mut shared = BTreeMap::new();
        let (ttl, now) = (self.rules.ttl_attribute(), (self.now)().timestamp());
        for (id, (dkey, touches)) in touched {
            let have = existing.get(&id);
            if let Some(o) = owners.get(&id) {
                let (writes, mut plan) = self.plan_owners(&dkey, &touches, o, have);
                for (pos, w) in writes {
                    let c = out.entry(pos).or_default();
                    c.actions.push(w);
                    c.ledger += 1;
                }
                for pos in plan.changes.keys() {
                    out.entry(*pos).or_default().shared.push(id.clone());
                }
                if plan.changes.is_empty() && plan.step(&[plan.carrier].into()).is_some() {
                    plan.carried = true;
                    out.entry(plan.carrier).or_default().shared.push(id.clone());
                }
                if plan.carried || !plan.changes.is_empty() {
                    shared.insert(id, plan);
                }
                continue;
            }
            let carrier = touches.iter().map(|t| t.pos).min().unwrap_or_default();
            let want = touches.iter().rev().find_map(|t| t.now.as_ref());
            let action = match derived_write(want, have, ttl, now) {
                DerivedWrite::Put(d) => Some(tx::put(&self.table, d.clone())),
                DerivedWrite::Delete => Some(tx::delete(&self.table, dkey.clone())),
                DerivedWrite::Keep => None,
            };
            if let Some(a) = action {
                out.entry(carrier).or_default().actions.push(a);
            }
        }
        (out, shared)
    }

    /// The transaction actions of one source item, or `None` when nothing
    /// differs from what is recorded and exists.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn plan_key(
        &self,
        pos: usize,
        key: &Item,
        rec: &Recorded,
        (implied, trail): (&Implied, &Trail),
        extra: Carried,
        seen: Seen<'_>,
        hint: Hint,
        counted: BTreeMap<String, Item>,
    ) -> Option<KeyPlan> {
        let mut writes = extra.actions;
        let mut extra_ledger = extra.ledger;
        let shared = extra.shared;
        for (index, member) in implied.indexed.difference(&rec.implied.indexed) {
            writes.push(tx::put(&self.ledger_table, index_item(index, member)));
            extra_ledger += 1;
        }
        for (index, member) in rec.implied.indexed.difference(&implied.indexed) {
            writes.push(tx::delete(&self.ledger_table, index_key(index, member)));
            extra_ledger += 1;
        }
        let deltas = contribution_deltas(implied, &rec.implied);
        // A state pending or no longer pending is written too.
        let changed = *implied != rec.implied || trail.pending != rec.trail.pending;
        let tombstone = rec.ver == 0 && implied.is_empty() && hint.implied_something;
        if !changed && !tombstone && writes.is_empty() && shared.is_empty() {
            return None;
        }
        let src = source_key(self.processor, key);
        let spill_key = || ledger::key(source_key_pk(self.processor, key), PENDING_SK);
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
            // What this change moved or counted first, and what earlier
            // changes still owe.
            let owed: Item = deltas
                .iter()
                .map(|(id, (key, _))| (id.clone(), key.clone()))
                .chain(counted.iter().map(|(id, key)| (id.clone(), key.clone())))
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
            if let Some(q) = &trail.seq {
                item.insert(SEQ.into(), AttributeValue::S(q.as_str().to_string()));
            }
            let mut spilled = false;
            if !trail.pending.is_empty() {
                let pending = trail.pending.to_attr();
                item.insert(PENDING.into(), pending);
                if item_size(&item) > MAX_ITEM_BYTES {
                    // Beside the record: each state alone fits an item.
                    let pending = item.remove(PENDING).expect("inserted above");
                    let ver = n(rec.ver + 1);
                    item.insert(SPILLED.into(), ver.clone());
                    let mut spill = spill_key();
                    spill.insert(PENDING.into(), pending);
                    spill.insert("ver".into(), ver);
                    writes.push(tx::put(&self.ledger_table, spill));
                    extra_ledger += 1;
                    spilled = true;
                }
            }
            if rec.spilled && !spilled {
                writes.push(tx::delete(&self.ledger_table, spill_key()));
                extra_ledger += 1;
            }
            if implied.is_empty() && trail.pending.is_empty() {
                item.insert(
                    ledger::TTL.into(),
                    n((self.now)().timestamp() + TOMBSTONE_TTL_SECS),
                );
            }
            tx::put_of(
                Put::builder()
                    .table_name(&self.ledger_table)
                    .set_item(Some(item))
                    .condition_expression(guard.0)
                    .set_expression_attribute_values(
                        guard.1.map(|v| [(":v".to_string(), v)].into()),
                    ),
            )
        } else {
            tx::check_of(
                ConditionCheck::builder()
                    .table_name(&self.ledger_table)
                    .set_key(Some(src))
                    .condition_expression(guard.0)
                    .set_expression_attribute_values(
                        guard.1.map(|v| [(":v".to_string(), v)].into()),
                    ),
            )
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
            counted,
            key: key.clone(),
            shared,
        })
    }
}
