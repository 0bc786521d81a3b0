//! The set job of a `compute:` block ([`super::compute`]) and what the
//! stream rules add for it: the ledger-only version of a scope's rows, the
//! ledger index of the scope's items, the jobs a change starts.
//!
//! A job names a scope (the rows' partition key names) and either every
//! item of it (`scope`: listed from the ledger index, paged, the first page
//! inline and the others as `items` jobs) or some items (`items`). It
//! reads, consistently: the items (first: a job's write of an item since
//! then fails this job's guard on it, so the writes of an item land in the
//! order their jobs read the rows), the version of the scope's rows (then:
//! a row added after the rows were read bumps it, once the derive takes
//! it), then the rows. It writes,
//! only where they differ, each item's computed attributes and the
//! projection of the item as it will be (so the stream record of that write
//! is a fixpoint): one write per item whose value changed, each guarded by
//! every fact it read.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use super::compute::{
    job_wrote, rows_pk, sequence_of, version_sk, Compute, SEQUENCE_ATTR, VERSION_ATTR,
};
use super::expr::{Arg, Val};
use super::model::{Entity, FileModel};
use super::record::Images;
use super::rules::{FileRules, Parsed, Record};
use super::template::Binder;
use crate::change::ChangeKind;
use crate::engine::derive::index_members;
use crate::engine::rules::{Contribution, Counter, OutMessage};
use crate::engine::setjob::{BoxFut, Guard, GuardedUpdate, Plan, Reads, SetJob};
use crate::item::{display_key, key_of, same_opt, Item, ItemExt};
use crate::sqs::MessageError;

/// The derive processor (the ledger namespace of its totals).
const DERIVE: &str = "derive";
/// The only message version this build reads and writes.
pub(super) const VERSION: u64 = 1;
/// Bodies above this size are refused.
const MAX_BODY_BYTES: usize = 64 * 1024;

/// A compute job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum ComputeMsg {
    /// The scope's rows changed: every item of the scope.
    Scope { scope: BTreeMap<String, String> },
    /// These items of the scope (keys as [PK, SK]).
    Items {
        scope: BTreeMap<String, String>,
        keys: Vec<[String; 2]>,
    },
}

impl ComputeMsg {
    fn scope(&self) -> &BTreeMap<String, String> {
        match self {
            ComputeMsg::Scope { scope } | ComputeMsg::Items { scope, .. } => scope,
        }
    }
}

/// A `compute:` block's set job.
pub struct ComputeJob {
    pub m: &'static FileModel,
    pub entity: usize,
}

impl ComputeJob {
    fn compute(&self) -> &'static Compute {
        self.m.entities[self.entity]
            .compute
            .as_ref()
            .expect("a compute job is built for an entity with `compute:`")
    }
}

fn message(c: &Compute, msg: &ComputeMsg) -> OutMessage {
    OutMessage {
        queue: c.queue.logical,
        body: crate::engine::body::encode(msg, VERSION),
    }
}

/// The scope of the rows of a row's key (row key name -> value).
fn scope_of_row(c: &Compute, over: &Entity, pk: &str) -> Option<BTreeMap<String, String>> {
    let bound = over.key[0].template.matches(pk)?;
    let names = over.key[0].template.binders();
    Some(scope_from(c, names, &bound, |(row, _)| row))
}

/// The scope of an item of the computing entity (from its key names).
fn scope_of_item(c: &Compute, e: &Entity, pk: &str, sk: &str) -> Option<BTreeMap<String, String>> {
    let mut bound = e.key[0].template.matches(pk)?;
    bound.extend(e.key[1].template.matches(sk)?);
    let names = e.key.iter().flat_map(|k| k.template.binders());
    Some(scope_from(c, names, &bound, |(_, own)| own))
}

/// Each row key name of the scope whose name (`name_of` its pair) a binder
/// of `binders` binds, with the value bound there.
fn scope_from<'a>(
    c: &Compute,
    binders: impl Iterator<Item = &'a Binder>,
    bound: &[&str],
    name_of: impl Fn(&(String, String)) -> &String,
) -> BTreeMap<String, String> {
    let names: Vec<&str> = binders.map(|b| b.name.as_str()).collect();
    c.scope
        .iter()
        .filter_map(|pair| {
            let i = names.iter().position(|n| n == name_of(pair))?;
            Some((pair.0.clone(), bound[i].to_string()))
        })
        .collect()
}

fn scope_vec(scope: &BTreeMap<String, String>) -> Vec<(String, String)> {
    scope.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// The ledger index of a scope's items.
fn index_name(c: &Compute, rows_pk: &str) -> String {
    format!("compute#{}#{rows_pk}", c.name)
}

fn member(pk: &str, sk: &str) -> String {
    serde_json::to_string(&[pk, sk]).unwrap_or_default()
}

impl FileModel {
    /// The ledger-only version counter of the scope whose rows have the
    /// partition key `rows_pk`.
    pub(super) fn version_counter(&self, c: &Compute, rows_pk: &str) -> Counter {
        let [pkn, skn] = self.key_names();
        Counter {
            key: vec![(pkn, rows_pk.to_string()), (skn, version_sk(c))],
            attrs: &[VERSION_ATTR],
            create: None,
            remove_at_zero: false,
        }
    }

    /// What a valid row adds to the versions of the scopes it is a row of.
    pub(super) fn compute_contributions(&self, rec: &Record, item: &Item) -> Vec<Contribution> {
        let [pkn, _] = self.key_names();
        let Ok(pk) = item.s(pkn) else {
            return vec![];
        };
        self.entities
            .iter()
            .filter_map(|e| e.compute.as_ref())
            .filter(|c| std::ptr::eq(&self.entities[c.over], rec.entity))
            .map(|c| Contribution {
                counter: self.version_counter(c, pk),
                values: vec![(VERSION_ATTR, 1)],
            })
            .collect()
    }

    /// A valid item of a computing entity is a member of its scope's index.
    pub(super) fn compute_memberships(&self, rec: &Record, item: &Item) -> Vec<(String, String)> {
        let Some(c) = &rec.entity.compute else {
            return vec![];
        };
        let [pkn, skn] = self.key_names();
        let (Ok(pk), Ok(sk)) = (item.s(pkn), item.s(skn)) else {
            return vec![];
        };
        let Some(rpk) = scope_of_item(c, rec.entity, pk, sk)
            .and_then(|s| rows_pk(&self.entities[c.over], &scope_vec(&s)))
        else {
            return vec![];
        };
        vec![(index_name(c, &rpk), member(pk, sk))]
    }

    /// Whether a counter key is the ledger-only version of a compute scope.
    pub(super) fn is_compute_version(&self, key: &Item) -> bool {
        let [_, skn] = self.key_names();
        let Ok(sk) = key.s(skn) else {
            return false;
        };
        self.entities
            .iter()
            .filter_map(|e| e.compute.as_ref())
            .any(|c| version_sk(c) == sk)
    }

    /// The compute jobs a change starts (bad input starts nothing here),
    /// from the record's images as parsed once.
    pub(super) fn compute_messages_of(&'static self, images: &Images<'_, '_>) -> Vec<OutMessage> {
        let change = images.change;
        let [pkn, skn] = self.key_names();
        let (Ok(pk), Ok(sk)) = (change.keys.s(pkn), change.keys.s(skn)) else {
            return vec![];
        };
        let entity = self.classify(pk, sk).map(|(e, _)| e);
        // A writer's valid item (a processor's item is no row or item here).
        let writer = |p: &Result<Parsed<'_>, _>| matches!(p, Ok(Parsed::Writer(_)));
        let new = images.new_image();
        let mut out = Vec::new();
        for e in &self.entities {
            let Some(c) = &e.compute else { continue };
            // A row (by its key: a row that is bad input, or whose sort key
            // binds nothing, starts its scope too): its scope, unless what
            // the values read is unchanged.
            let over = &self.entities[c.over];
            if sk.starts_with(&c.sk_prefix) && self.partition_holds(over, pk) {
                let old_ok = images.parsed_old().map(writer);
                let new_ok = images.parsed_new().map(writer);
                let same = match (old_ok, new_ok) {
                    (Some(true), Some(true)) => {
                        let (o, n) = (change.old.as_ref(), new);
                        c.row_reads
                            .iter()
                            .all(|a| same_opt(o.and_then(|o| o.get(*a)), n.and_then(|n| n.get(*a))))
                    }
                    (Some(false), Some(false)) => true,
                    _ => false,
                };
                if !same {
                    if let Some(scope) = scope_of_row(c, over, pk) {
                        out.push(message(c, &ComputeMsg::Scope { scope }));
                    }
                }
            }
            // The computing entity's own item.
            if entity.is_some_and(|x| std::ptr::eq(e, x)) {
                let (Some(n), Some(Ok(parsed @ Parsed::Writer(_)))) = (new, images.parsed_new())
                else {
                    continue;
                };
                let old_valid = images.parsed_old().is_some_and(writer);
                let changed =
                    |a: &str| !same_opt(change.old.as_ref().and_then(|o| o.get(a)), n.get(a));
                // An old image the rules reject (an aspect fails on it: a
                // count's `int(...)`, say), or whose projection DynamoDB
                // refuses (an empty index key, say: the job's write of the
                // values with it was refused too), got no values: fixed, it
                // is computed now, whatever changed.
                let old_rejected = || {
                    let parsed = images.parsed_old().and_then(|p| p.as_ref().ok());
                    parsed.zip(change.old.as_ref()).is_some_and(|(p, o)| {
                        match FileRules(self).aspects_of(Ok(p), o).projection {
                            // (Waiting for its values: its put started
                            // the job already.)
                            Err(e) => !e.waits(),
                            Ok(None) => false,
                            Ok(Some(proj)) => {
                                let mut projected = o.clone();
                                for (a, v) in proj.attrs {
                                    match v {
                                        Some(v) => projected.insert(a.to_string(), v),
                                        None => projected.remove(a),
                                    };
                                }
                                crate::limits::KeyLimits::of(&self.table)
                                    .check(&projected)
                                    .is_err()
                            }
                        }
                    })
                };
                // The sequence moved other than by one, the values as they
                // are: a writer's (a job in flight guards the sequence it
                // read and is dropped: its job starts again).
                let sequence_rewritten = || {
                    changed(SEQUENCE_ATTR) && !change.old.as_ref().is_some_and(|o| job_wrote(o, n))
                };
                let start = change.kind == ChangeKind::Insert
                    || !old_valid
                    || c.item_reads.iter().any(|a| changed(a))
                    || (e.computed().any(changed) && self.stray(e, change.old.as_ref(), n, parsed))
                    || sequence_rewritten()
                    || old_rejected();
                if start {
                    if let Some(scope) = scope_of_item(c, e, pk, sk) {
                        out.push(message(
                            c,
                            &ComputeMsg::Items {
                                scope,
                                keys: vec![[pk.to_string(), sk.to_string()]],
                            },
                        ));
                    }
                }
            }
        }
        out
    }

    /// Whether `pk` is a partition key of `over` whose names pass every
    /// check of `over` that reads only them (a scope that can hold rows).
    fn partition_holds(&self, over: &Entity, pk: &str) -> bool {
        let Some(bound) = over.key[0].template.matches(pk) else {
            return false;
        };
        let binders: Vec<(&str, Option<&str>)> = over.key[0]
            .template
            .binders()
            .map(|b| (b.name.as_str(), b.format.as_deref()))
            .collect();
        let mut vals: Vec<(&str, Val)> = Vec::with_capacity(binders.len());
        for ((b, format), v) in binders.iter().zip(&bound) {
            match super::rules::key_val(over, b, *format, v, &self.formats) {
                Ok(val) => vals.push((b, val)),
                Err(_) => return false,
            }
        }
        over.checks
            .iter()
            .filter(|c| {
                c.expr
                    .variables
                    .iter()
                    .all(|v| binders.iter().any(|(b, _)| b == v))
            })
            .all(|c| {
                self.env.eval(&c.expr, |n| {
                    vals.iter().find(|(k, _)| *k == n).map(|(_, v)| v)
                }) == Ok(Val::Bool(true))
            })
    }

    /// Whether a change of a computed value (from `old` to `item`) was
    /// written by someone else than the job: the job writes the values, the
    /// projection they imply and [`SEQUENCE_ATTR`] raised by one together.
    /// So a value that is no int (absent is the job's when it raised the
    /// sequence: a value that cannot be computed is left as it is), a
    /// sequence not raised by exactly one (a writer's put with values of
    /// its own or none, an update of a value, a copy of an older item), or
    /// a projection out of step with the values came from a writer and must
    /// be brought back. (A writer's copy of the values and the sequence as
    /// they are changes no value: no job.)
    fn stray(
        &'static self,
        e: &Entity,
        old: Option<&Item>,
        item: &Item,
        parsed: &Parsed<'_>,
    ) -> bool {
        // A value that is no int is a writer's; an absent one is the job's
        // too when it raised the sequence (a value that cannot be computed
        // is left as it is, absent on an item never computed).
        if e.computed().any(|a| {
            item.get(a)
                .is_some_and(|v| !matches!(v, AttributeValue::N(n) if n.parse::<i64>().is_ok()))
        }) {
            return true;
        }
        if !old.is_some_and(|old| job_wrote(old, item)) {
            return true;
        }
        match FileRules(self).aspects_of(Ok(parsed), item).projection {
            Ok(Some(p)) => crate::engine::derive::projection_update(self.keys, item, &p).is_some(),
            Ok(None) => false,
            // A value the job could not compute, still absent: the
            // projection waits for it (the job wrote none).
            Err(e) => !e.waits(),
        }
    }
}

/// A page's keys are cut so that its body stays under this size.
const PAGE_BODY_BYTES: usize = 48 * 1024;

/// The keys in pages of at most `page` keys whose bodies stay under
/// [`PAGE_BODY_BYTES`] (a key is up to 2 KB: 200 of them would not).
fn pages(keys: Vec<[String; 2]>, page: usize) -> Vec<Vec<[String; 2]>> {
    let mut out = Vec::new();
    let mut current: Vec<[String; 2]> = Vec::new();
    let mut size = 0;
    for k in keys {
        let extra = serde_json::to_string(&k).map_or(0, |j| j.len()) + 1;
        if !current.is_empty() && (current.len() == page || size + extra > PAGE_BODY_BYTES) {
            out.push(std::mem::take(&mut current));
            size = 0;
        }
        size += extra;
        current.push(k);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Each computed value of an item: an int, or why it cannot be computed.
pub type Values = Vec<(&'static str, Result<i64, String>)>;

/// What a computed value that gives `null` most often is, and the guard.
pub const NULL_HINT: &str =
    "`min`/`max` of an empty list are null: guard it, `size(xs) == 0 ? 0 : min(xs)`";

/// The log line and count of a computed value that cannot be computed.
fn value_refused(c: &Compute, key: &Item, a: &str, why: &str) {
    tracing::warn!(
        processor = c.name,
        key = %display_key(key),
        kind = "Invalid",
        reason = %format!("computed `{a}`: {why}"),
        "bad input: this value is left as it is (the item's other values are computed)"
    );
}

impl ComputeJob {
    fn scope_ok(
        &self,
        scope: &BTreeMap<String, String>,
    ) -> Result<Vec<(String, String)>, MessageError> {
        let c = self.compute();
        if scope.len() != c.scope.len() || !c.scope.iter().all(|(k, _)| scope.contains_key(k)) {
            return Err(MessageError::invalid(format!(
                "scope must name exactly {}",
                c.scope
                    .iter()
                    .map(|(k, _)| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        if scope
            .values()
            .any(|v| v.is_empty() || v.contains('#') || v.len() > 1024)
        {
            return Err(MessageError::invalid(
                "a scope value is empty, holds `#` or is over 1024 bytes",
            ));
        }
        Ok(scope_vec(scope))
    }

    /// The item's parse and each value it should carry given the rows:
    /// an int, or why that value cannot be computed (a null, an error, an
    /// overflow: bad input of its own, that value left as it is; the
    /// others are computed all the same). `None`: the item is not one of
    /// the computing entity's (bad input, left as it is).
    pub(super) fn values(&self, item: &Item, facts: &Facts) -> Option<(Record<'static>, Values)> {
        let m = self.m;
        let c = self.compute();
        let e = &m.entities[self.entity];
        let rec = match m.parse(item) {
            Ok(Parsed::Writer(rec)) if std::ptr::eq(rec.entity, e) => rec,
            _ => return None,
        };
        let mut out = Vec::with_capacity(c.values.len());
        for (a, x) in &c.values {
            let v = m.env.eval_with(x, |n| {
                if n == c.rows {
                    Some(Arg::Prepared(&facts.rows))
                } else {
                    rec.get(n).map(Arg::Val)
                }
            });
            out.push((
                *a,
                match v {
                    Ok(Val::Int(i)) => Ok(i),
                    Err(e) => Err(e),
                    Ok(Val::Null) => Err(format!("gave a null, not an int ({NULL_HINT})")),
                    Ok(v) => Err(format!("gave a {}, not an int", v.kind())),
                },
            ));
        }
        Some((rec, out))
    }

    /// The update of one item as read (`None`: already right, or bad input
    /// left as it is) and how many bad inputs it met (logged here, counted
    /// by the consumer). The item is parsed once: the item it will be (its
    /// computed values as the job stores them) is that parse with those
    /// values, and only the checks that read them run again. A value that
    /// cannot be computed is bad input of its own and left as it is; the
    /// others are written.
    fn update(&self, item: &Item, facts: &Facts) -> (Option<GuardedUpdate>, usize) {
        let m = self.m;
        let c = self.compute();
        let key = key_of(item, &m.key_names());
        let Some((mut rec, values)) = self.values(item, facts) else {
            return (None, 0);
        };
        let mut refused = 0;
        let mut ok = Vec::with_capacity(values.len());
        for (a, v) in values {
            match v {
                Ok(v) => ok.push((a, v)),
                Err(why) => {
                    value_refused(c, &key, a, &why);
                    refused = 1;
                }
            }
        }
        for (a, v) in &ok {
            rec.set(a, Val::Int(*v));
        }
        match self.write(item, &key, rec, &ok, facts) {
            Ok(u) => (u, refused),
            // The item as it would be is rejected by its rules (logged):
            // the derive counts such an item where it reads it.
            Err(()) => (None, refused),
        }
    }

    /// The guarded write of `values` (and the projection they imply) onto
    /// `item`, whose parse `rec` holds them (`Ok(None)`: already right;
    /// `Err`: the item as it would be is bad input, logged).
    fn write(
        &self,
        item: &Item,
        key: &Item,
        rec: Record<'static>,
        values: &[(&'static str, i64)],
        facts: &Facts,
    ) -> Result<Option<GuardedUpdate>, ()> {
        let m = self.m;
        let c = self.compute();
        let e = &m.entities[self.entity];
        let key = key.clone();
        let rules = FileRules(m);
        // (A check reading a value this write leaves absent, one it could
        // not compute, waits for it.)
        let reads_computed = |x: &super::model::Check| {
            let vars = || x.expr.variables.iter().map(String::as_str);
            vars().any(|v| e.computed().any(|a| a == v)) && rec.waits_for(vars()).is_empty()
        };
        // What the aspects read of the image besides the record is its key
        // (the item's): the item it will be is not built.
        let checked = m.check(&rec, item, reads_computed);
        let parsed = Parsed::Writer(rec);
        let projection = checked.and_then(|()| rules.aspects_of(Ok(&parsed), item).projection);
        let projection = match projection {
            Ok(p) => p,
            // It reads a value left absent (one that cannot be computed):
            // the values are written without it, which waits.
            Err(err) if err.waits() => None,
            Err(err) => {
                tracing::warn!(processor = c.name, key = %display_key(&key), kind = err.kind(), reason = %err, "bad input");
                return Err(());
            }
        };
        let mut attrs: Vec<(&'static str, Option<AttributeValue>)> = values
            .iter()
            .map(|(a, v)| (*a, Some(AttributeValue::N(v.to_string()))))
            .collect();
        let projected: Vec<&'static str> = projection
            .as_ref()
            .map(|p| p.attrs.iter().map(|(a, _)| *a).collect())
            .unwrap_or_default();
        for (a, v) in projection.into_iter().flat_map(|p| p.attrs) {
            if !attrs.iter().any(|(n, _)| *n == a) {
                attrs.push((a, v));
            }
        }
        attrs.retain(|(a, v)| item.get(*a) != v.as_ref());
        if attrs.is_empty() {
            return Ok(None);
        }
        // The job's mark on its own write: the sequence raised by one (a
        // stored one that is no int, or at its limit, starts again at 1;
        // the stream then takes that write for a writer's once, and the job
        // it starts finds the values right).
        let next = sequence_of(item)
            .and_then(|q| q.checked_add(1))
            .unwrap_or(1);
        attrs.push((SEQUENCE_ATTR, Some(AttributeValue::N(next.to_string()))));
        // A number clamped into a key this write stores: logged, and counted
        // by the consumer when the write commits.
        let mut notes = Vec::new();
        if let (true, Parsed::Writer(rec)) =
            (attrs.iter().any(|(a, _)| projected.contains(a)), &parsed)
        {
            for note in m.notes_of(rec) {
                tracing::warn!(processor = c.name, key = %display_key(&key), metric = note.metric, reason = %note.reason, "noted");
                notes.push(note.metric);
            }
        }
        // The item's attributes read (by the values and by the projection
        // written with them: a writer's change of a booking's `status`
        // since, by a put or an update, drops a projection computed from
        // the old one; that record starts the item's job again), its values
        // and its sequence as read: any job's write since (each raises the
        // sequence), even one that left the values as read, was computed
        // from rows read after this job's read of the item, so this write
        // is dropped (a newer fact won; a writer's change of the sequence
        // alone starts the item's job again, see `compute_messages_of`).
        // A writer's put that keeps every one of them (the sequence and the
        // values absent before and after, say) leaves nothing this write
        // was computed from changed: it writes what a job reading the new
        // image would.
        let mut guards = facts.guards.clone();
        for a in c
            .item_reads
            .iter()
            .copied()
            .chain(e.computed())
            .chain([SEQUENCE_ATTR])
        {
            guards.push(Guard::same(key.clone(), a, item.get(a)));
        }
        Ok(Some(GuardedUpdate {
            key,
            attrs,
            guards,
            notes,
        }))
    }

    async fn compute_items(
        &self,
        reads: &Reads,
        rpk: &str,
        keys: Vec<Item>,
    ) -> Result<(Vec<GuardedUpdate>, usize), MessageError> {
        // The items first, then the rows: a job that wrote an item since
        // this read fails the guard on its values, and one that wrote it
        // before read the rows before this job does. So of two jobs of a
        // scope, the one that read the older rows never lands after the
        // other, even while the derive has not yet taken a row's insert
        // (the scope's version has not moved: both jobs hold it).
        let items = reads.store.batch_get(&reads.table, keys).await?;
        if items.is_empty() {
            return Ok((vec![], 0));
        }
        let Some(facts) = self.facts(reads, rpk).await? else {
            return Ok((vec![], 0));
        };
        let mut by_key: Vec<(String, Item)> = items
            .into_iter()
            .map(|i| (display_key(&key_of(&i, &self.m.key_names())), i))
            .collect();
        by_key.sort_by(|a, b| a.0.cmp(&b.0));
        let mut bad = 0;
        let mut updates = Vec::new();
        for (_, i) in &by_key {
            let (u, refused) = self.update(i, &facts);
            bad += refused;
            updates.extend(u);
        }
        Ok((updates, bad))
    }

    async fn listed(&self, reads: &Reads, rpk: &str) -> Result<Vec<[String; 2]>, MessageError> {
        let index = index_name(self.compute(), rpk);
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let (page, next) = index_members(
                &reads.store,
                &reads.ledger_table,
                &index,
                after.as_deref(),
                1000,
            )
            .await?;
            for mbr in page {
                if let Ok(k) = serde_json::from_str::<[String; 2]>(&mbr) {
                    out.push(k);
                }
            }
            match next {
                Some(n) => after = Some(n),
                None => return Ok(out),
            }
        }
    }
}

impl SetJob for ComputeJob {
    fn name(&self) -> &'static str {
        self.compute().name
    }

    fn key_names(&self) -> &'static [&'static str] {
        self.m.keys
    }

    fn plan<'a>(
        &'a self,
        body: &'a str,
        reads: &'a Reads,
    ) -> BoxFut<'a, Result<Plan, MessageError>> {
        Box::pin(async move {
            let c = self.compute();
            let m = self.m;
            let msg: ComputeMsg = crate::engine::body::decode(body, VERSION, MAX_BODY_BYTES)?;
            let scope = self.scope_ok(msg.scope())?;
            let e = &m.entities[self.entity];
            let rpk = rows_pk(&m.entities[c.over], &scope).ok_or_else(|| {
                MessageError::invalid("the scope does not build the rows' partition key")
            })?;
            let mut plan = Plan::default();
            let keys: Vec<[String; 2]> = match msg {
                ComputeMsg::Items { keys, .. } => {
                    if keys.is_empty() || keys.len() > c.page {
                        return Err(MessageError::invalid(format!(
                            "keys must be 1..={} items",
                            c.page
                        )));
                    }
                    for [pk, sk] in &keys {
                        let ok = m.classify(pk, sk).is_some_and(|(x, _)| std::ptr::eq(x, e))
                            && scope_of_item(c, e, pk, sk).map(|s| scope_vec(&s)).as_ref()
                                == Some(&scope);
                        if !ok {
                            return Err(MessageError::invalid(format!(
                                "a key is not a `{}` of the scope",
                                e.name
                            )));
                        }
                    }
                    keys
                }
                ComputeMsg::Scope { scope: s } => {
                    let all = self.listed(reads, &rpk).await?;
                    let mut pages = pages(all, c.page).into_iter();
                    let first = pages.next().unwrap_or_default();
                    plan.then = pages
                        .map(|keys| {
                            message(
                                c,
                                &ComputeMsg::Items {
                                    scope: s.clone(),
                                    keys,
                                },
                            )
                        })
                        .collect();
                    first
                }
            };
            if !keys.is_empty() {
                let [pkn, skn] = m.key_names();
                let items: Vec<Item> = keys
                    .into_iter()
                    .map(|[pk, sk]| {
                        [
                            (pkn.to_string(), AttributeValue::S(pk)),
                            (skn.to_string(), AttributeValue::S(sk)),
                        ]
                        .into()
                    })
                    .collect();
                (plan.updates, plan.bad_input_logged) =
                    self.compute_items(reads, &rpk, items).await?;
            }
            Ok(plan)
        })
    }
}

#[path = "compute_rows.rs"]
mod rows;
pub(super) use rows::Facts;

#[path = "compute_verify.rs"]
mod verify;
pub use verify::COMPUTED_VALUE;

#[cfg(test)]
#[path = "compute_job_tests.rs"]
mod tests;
