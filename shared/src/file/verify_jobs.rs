//! What `verify` checks of a model file's queue jobs, from the table and
//! the ledger as they are: each join set's targets (`sets:`) against what
//! their facts imply, and each `once:` effect made for every source item
//! that asks for it.
//!
//! A join set's rows are the facts' items joined on their shared variables
//! (keys and `also`), and the targets' own items (carrying the variables
//! they were written with): each row is decided as the job decides it
//! ([`crate::engine::joinset::JoinSet::decide_in`]). A target that should
//! not exist is extra, one that differs (but for its `volatile`
//! attributes; a TTL from `now` may only be earlier than a fresh one) is
//! wrong, one that should exist and does not is missing, unless its TTL
//! runs from `now` (it may have expired, and nothing regenerates it until
//! a fact changes). Repairs run the narrowest scope of the row through the
//! set's consumer (its guards), or delete an item no scope reaches.
//!
//! A once effect is missing when its source item satisfies `when` (as a
//! new item would start it), its preconditions hold now, one of its puts is
//! absent and no marker says it was made (a marker of a job skipped for a
//! precondition that failed then is no effect: the required item may have
//! been written after its source); the repair runs its job (its marker
//! makes it at most once, its conditions check the preconditions again).
//! A precondition that fails now is no drift. An effect that happened is not
//! redone: an item of it deleted since (by the application) is not drift.
//! An item of a put whose once key has no marker was made by no effect (a
//! writer's): extra, deleted if unchanged. An effect happens at most once
//! per key: two items of one put for one once key (one written under another date of its key, or forged by a
//! writer) are one too many; the item the key's source asks for stays (else
//! the first by key), each other is extra and goes if unchanged.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::expr::Val;
use super::model::FileModel;
use super::once::OnceSpec;
use super::once_run::{once_key, FileOnce, Vals};
use super::rules::read_attr;
use super::sets::SetSpec;
use super::template::Part;
use crate::change::{Change, ChangeKind, Origin, SequenceNumber};
use crate::engine::joinset::{bind_also, Decision, JoinSet, Vars};
use crate::engine::once::SKIPPED;
use crate::item::{display_key, key_of, Item, ItemExt};
use crate::ledger::item_id;
use crate::models::{CheckInput, Drift, Finding, Repair};

impl FileModel {
    /// Every set's and once effect's findings.
    pub fn job_checks(&'static self, input: &CheckInput<'_>) -> Vec<Finding> {
        if self.sets.is_empty() && self.once.is_empty() {
            return vec![];
        }
        let (table, ledger) = by_id(input, self.keys);
        let mut out = Vec::new();
        for set in &self.sets {
            out.extend(self.set_checks(set, input, &table, &ledger));
        }
        for spec in &self.once {
            out.extend(self.once_checks(spec, input, &table));
        }
        out
    }

    fn set_checks(
        &'static self,
        spec: &'static SetSpec,
        input: &CheckInput<'_>,
        table: &HashMap<String, &Item>,
        ledger: &HashMap<String, &Item>,
    ) -> Vec<Finding> {
        let set = spec.declaration(self);
        let names = self.keys;
        let now = input.now;
        let rows = self.set_rows(&set, input.items);
        let read = |k: &Item| table.get(&item_id(k)).map(|i| (*i).clone());
        let read_ledger = |k: &Item| ledger.get(&item_id(k)).map(|i| (*i).clone());
        let ttl_attr = self.table.ttl_attribute;
        let scopes = set.scopes().unwrap_or_default();
        let repair = |vars: &Vars, item: Option<&Item>| -> Option<Repair> {
            let narrowest = scopes
                .iter()
                .filter(|s| s.bound.iter().all(|v| vars.contains_key(v)))
                .min_by_key(|s| s.steps.len());
            match (narrowest, item) {
                (Some(s), _) => {
                    let bind = s
                        .bound
                        .iter()
                        .map(|v| (v.clone(), vars[v].clone()))
                        .collect();
                    Some(Repair::Job {
                        queue: spec.queue.logical,
                        body: set.start(&s.on, bind),
                    })
                }
                (None, Some(i)) => Some(Repair::DeleteIfUnchanged(i.clone())),
                (None, None) => None,
            }
        };
        let mut out = Vec::new();
        let limits = crate::limits::KeyLimits::of(&self.table);
        input.checked(spec.name, 0);
        // Each target key's rows, decided as the job decides them: the key's
        // decision is theirs merged (the item exists while any row implies it).
        let mut by_key: BTreeMap<String, (Item, Vec<(Vars, Decision)>)> = BTreeMap::new();
        for vars in &rows {
            let Some(key) = set.target.key.key(names, vars) else {
                continue;
            };
            let Some(decision) = set.decide_in("", vars, &read, &read_ledger, now) else {
                continue;
            };
            by_key
                .entry(item_id(&key))
                .or_insert_with(|| (key, Vec::new()))
                .1
                .push((vars.clone(), decision));
        }
        for (key, key_rows) in by_key.values() {
            let ((desired, existing), chosen) = set.merge(key_rows);
            let vars = chosen.as_ref().unwrap_or(&key_rows[0].0);
            input.checked(spec.name, 1);
            let label = display_key(key);
            // A repair never deletes what a row implies: an item is extra
            // only while no row of its key implies it.
            let implied = key_rows.iter().any(|(_, (d, _))| d.is_some());
            // A target that cannot exist in DynamoDB (a key past its limit,
            // past 400 KB): bad input, as its job counts it, not drift.
            if let Some(Err(why)) = desired.as_ref().map(|d| limits.check(&d.item)) {
                input.bad_input(format!(
                    "{}: {label}: its facts imply it, but DynamoDB refuses it: {why} (Invalid)",
                    spec.name
                ));
                continue;
            }
            let finding = match (&desired, &existing) {
                (None, Some(x)) if !implied => {
                    Some((Drift::Extra, "its facts no longer imply it", Some(&x.item)))
                }
                (Some(_), None) if !spec.missing_is_drift(self, vars, &read, now) => None,
                (Some(_), None) => Some((Drift::Missing, "its facts imply it", None)),
                (Some(d), Some(x)) if differs(&set, ttl_attr, &d.item, &x.item) => Some((
                    Drift::Wrong,
                    "its attributes differ from what its facts imply",
                    Some(&x.item),
                )),
                _ => None,
            };
            if let Some((drift, why, item)) = finding {
                // An item its facts do not imply goes (if still as read):
                // the narrowest scope's job need not list it (a forged
                // entry in its author's own timeline is in no follower's).
                let repair = match (&drift, item) {
                    (Drift::Extra, Some(i)) => Some(Repair::DeleteIfUnchanged(i.clone())),
                    _ => repair(vars, item),
                };
                out.push(Finding {
                    kind: spec.name,
                    drift,
                    what: format!("{label}: {why}"),
                    repair,
                });
            }
        }
        out
    }

    /// A join set's rows in `items`: the facts' items joined on their
    /// shared variables (keys and `also`), and the targets' own items with
    /// the variables they carry.
    fn set_rows(&self, set: &JoinSet, items: &[Item]) -> BTreeSet<Vars> {
        let names = self.keys;
        // Each fact's bindings, from its items (key and `also`).
        let mut per_fact: Vec<Vec<Vars>> = Vec::new();
        for f in &set.facts {
            let mut rows = Vec::new();
            for item in items {
                let mut vars = Vars::new();
                if f.key.read(names, item, &mut vars) && bind_also(&f.also, item, &mut vars) {
                    rows.push(vars);
                }
            }
            per_fact.push(rows);
        }
        let mut rows: BTreeSet<Vars> = join(per_fact).into_iter().collect();
        // The targets as they are, with the variables they carry.
        let carried = set.target.carried();
        for item in items {
            let mut vars = Vars::new();
            if !set.target.key.read(names, item, &mut vars) {
                continue;
            }
            let whole = carried.iter().all(|(attr, var)| match item.s(attr) {
                Ok(v) => {
                    vars.insert(var.to_string(), v.to_string());
                    true
                }
                Err(_) => false,
            });
            if whole {
                rows.insert(vars);
            }
        }
        rows
    }

    /// Whether `key` is a key of a join set's target.
    pub fn is_set_target(&self, key: &Item) -> bool {
        self.sets
            .iter()
            .any(|spec| spec.target_key.read(self.keys, key, &mut Vars::new()))
    }

    /// What `explain` says of a join set's target at `key`: each row of
    /// the key, whether it implies the item, and the row whose values the
    /// item carries (the rule the job and `verify` apply), or, when there
    /// is no item, the row that implies it missing. `None`: the key is no
    /// set's target.
    pub fn explain_set_target(
        &'static self,
        key: &Item,
        input: &CheckInput<'_>,
    ) -> Option<Vec<String>> {
        let names = self.keys;
        let spec = self
            .sets
            .iter()
            .find(|spec| spec.target_key.read(names, key, &mut Vars::new()))?;
        let set = spec.declaration(self);
        let (table, ledger) = by_id(input, names);
        let read = |k: &Item| table.get(&item_id(k)).map(|i| (*i).clone());
        let read_ledger = |k: &Item| ledger.get(&item_id(k)).map(|i| (*i).clone());
        let id = item_id(key);
        let carried: Vec<&str> = set.target.carried().into_iter().map(|(_, v)| v).collect();
        let show = |v: &Vars| {
            let mut out: Vec<String> = v.iter().map(|(k, x)| format!("{k}={x}")).collect();
            out.sort();
            out.join(", ")
        };
        let mut decided = Vec::new();
        let mut out = vec![format!("a target of join set `{}`", spec.name)];
        for vars in self.set_rows(&set, input.items) {
            if set
                .target
                .key
                .key(names, &vars)
                .is_none_or(|k| item_id(&k) != id)
            {
                continue;
            }
            let Some(d) = set.decide_in("", &vars, &read, &read_ledger, input.now) else {
                continue;
            };
            out.push(format!(
                "row {}: {}",
                show(&vars),
                if d.0.is_some() {
                    "implies it"
                } else {
                    "does not imply it"
                }
            ));
            decided.push((vars, d));
        }
        let ((desired, existing), chosen) = set.merge(&decided);
        let present = table.contains_key(&id);
        match (chosen, desired) {
            // Missing: what `verify` says of it, and the way back.
            (Some(vars), Some(_)) if !present => out.push(format!(
                "implied by join set `{}`, row {}: missing; `verify --repair` brings it back",
                spec.name,
                show(&vars)
            )),
            (Some(vars), Some(d)) => {
                if !carried.is_empty() {
                    out.push(format!(
                        "carries the values of row {} (several rows may imply one item: it keeps the row it carries while that row implies it, else the least implying row)",
                        show(&vars)
                    ));
                }
                if existing
                    .is_some_and(|x| differs(&set, self.table.ttl_attribute, &d.item, &x.item))
                {
                    out.push(
                        "its attributes differ from what that row implies (verify: wrong)".into(),
                    );
                }
            }
            _ => out.push("no row implies it now (verify reports it as extra if it exists)".into()),
        }
        Some(out)
    }

    fn once_checks(
        &'static self,
        spec: &'static OnceSpec,
        input: &CheckInput<'_>,
        table: &HashMap<String, &Item>,
    ) -> Vec<Finding> {
        let runner = FileOnce { model: self, spec };
        let names = self.keys;
        let mut out = Vec::new();
        input.checked(spec.name, 0);
        // Effects that happened: their markers (at most once, so an item of
        // theirs deleted since is not redone, and not drift). A marker of
        // an effect skipped for a `require` that failed then is no effect:
        // the requirement may hold now (an item written after its source).
        let happened: BTreeSet<String> = input
            .ledger
            .iter()
            .filter(|i| i.s("sk").ok() == Some("ONCE"))
            .filter(|i| i.opt_bool(SKIPPED).ok().flatten() != Some(true))
            .map(|i| item_id(&key_of(i, &["pk", "sk"])))
            .collect();
        let marked = |once_key: &str| {
            happened.contains(&item_id(&crate::engine::once::marker_key(
                spec.name, once_key,
            )))
        };
        // The put each source item asks for, by once key: the one a
        // second item of the same key is an extra beside.
        let mut asked: BTreeMap<(usize, String), String> = BTreeMap::new();
        for item in input.items {
            let change = Change {
                event_id: "verify".into(),
                sequence_number: SequenceNumber::parse("1").expect("a number"),
                kind: ChangeKind::Insert,
                origin: Origin::User,
                keys: key_of(item, names),
                old: None,
                new: Some(item.clone()),
                at: input.now,
            };
            let Ok(messages) = self.once_messages(&change) else {
                continue;
            };
            for m in messages.iter().filter(|m| m.queue == spec.queue.logical) {
                let Ok(plan) = runner.plan_of(&m.body) else {
                    continue;
                };
                input.checked(spec.name, 1);
                for (i, p) in plan.puts.iter().enumerate() {
                    asked.insert((i, plan.once_key.clone()), item_id(&key_of(p, names)));
                }
                let holds = plan
                    .checks
                    .iter()
                    .all(|(g, _)| g.ledger || g.holds(table.get(&item_id(&g.key)).copied()));
                let lost = plan
                    .puts
                    .iter()
                    .find(|p| !table.contains_key(&item_id(&key_of(p, names))));
                if let (true, Some(put), false) = (holds, lost, marked(&plan.once_key)) {
                    out.push(Finding {
                        kind: spec.name,
                        drift: Drift::Missing,
                        what: format!(
                            "{}: asks for once `{}` ({}), whose {} is absent",
                            display_key(&key_of(item, names)),
                            spec.name,
                            plan.once_key,
                            display_key(&key_of(put, names))
                        ),
                        repair: Some(Repair::Job {
                            queue: spec.queue.logical,
                            body: m.body.clone(),
                        }),
                    });
                }
            }
        }
        out.extend(self.once_extras(spec, input, &asked, &marked));
        out
    }

    /// Every once key with more than one item of a put (at most one effect
    /// per key): the item the key's source asks for is kept (else the first
    /// by key), each other is extra, deleted if unchanged. A put is checked
    /// when its item carries every name the once key reads (`with:
    /// { seekerId: seekerId }`, as an attribute or a key name) and no other
    /// put writes its entity.
    fn once_extras(
        &'static self,
        spec: &'static OnceSpec,
        input: &CheckInput<'_>,
        asked: &BTreeMap<(usize, String), String>,
        marked: &dyn Fn(&str) -> bool,
    ) -> Vec<Finding> {
        let names = self.keys;
        let [pkn, skn] = self.key_names();
        let mut out = Vec::new();
        let key_reads: BTreeSet<&str> = spec.key.reads().collect();
        for (i, w) in spec.put.iter().enumerate() {
            if spec.put.iter().filter(|o| o.entity == w.entity).count() > 1 {
                continue;
            }
            let entity = &self.entities[w.entity];
            // Source name -> the put's attribute or key name carrying it.
            let carried: Vec<(&str, &str)> = key_reads
                .iter()
                .filter_map(|v| {
                    w.with.iter().find_map(|(n, val)| match val.0.as_slice() {
                        [Part::Hole(e, _)] if e.source.trim() == *v => Some((*v, n.as_str())),
                        _ => None,
                    })
                })
                .collect();
            if carried.len() != key_reads.len() {
                continue;
            }
            let mut by_key: BTreeMap<String, Vec<&Item>> = BTreeMap::new();
            for item in input.items {
                let (Ok(pk), Ok(sk)) = (item.s(pkn), item.s(skn)) else {
                    continue;
                };
                let Some((e, bound)) = self.classify(pk, sk) else {
                    continue;
                };
                if !std::ptr::eq(e, entity) {
                    continue;
                }
                let binders: Vec<&str> = e
                    .key
                    .iter()
                    .flat_map(|k| k.template.binders().map(|b| b.name.as_str()))
                    .collect();
                let mut vals: Vals = Vec::with_capacity(carried.len());
                for (v, n) in &carried {
                    let from_attr = e.attr(n).and_then(|a| read_attr(item, a).ok());
                    let from_key = || {
                        binders
                            .iter()
                            .position(|b| b == n)
                            .and_then(|p| bound.get(p))
                            .map(|x| Val::Str(x.to_string()))
                    };
                    match from_attr.filter(|x| *x != Val::Null).or_else(from_key) {
                        Some(x) => vals.push((v.to_string(), x)),
                        None => break,
                    }
                }
                if vals.len() != carried.len() {
                    continue;
                }
                if let Ok(k) = once_key(self, spec, &vals) {
                    by_key.entry(k).or_default().push(item);
                }
            }
            for (k, mut items) in by_key {
                // No marker: no effect made it (its marker and its puts
                // are one transaction): a writer's item, gone on repair
                // as a forged derived item is.
                if !marked(&k) {
                    for item in items {
                        out.push(Finding {
                            kind: spec.name,
                            drift: Drift::Extra,
                            what: format!(
                                "{}: a `{}` of once `{}` ({k}) with no marker in the ledger: no effect made it (a writer's item)",
                                display_key(&key_of(item, names)),
                                entity.name,
                                spec.name,
                            ),
                            repair: Some(Repair::DeleteIfUnchanged(item.clone())),
                        });
                    }
                    continue;
                }
                if items.len() < 2 {
                    continue;
                }
                let id = |i: &Item| item_id(&key_of(i, names));
                items.sort_by_key(|i| id(i));
                let kept = asked
                    .get(&(i, k.clone()))
                    .and_then(|want| items.iter().position(|i| id(i) == *want))
                    .unwrap_or(0);
                let keep = display_key(&key_of(items[kept], names));
                for (_, extra) in items.iter().enumerate().filter(|(j, _)| *j != kept) {
                    out.push(Finding {
                        kind: spec.name,
                        drift: Drift::Extra,
                        what: format!(
                            "{}: a second `{}` of once `{}` ({k}) beside {keep}: an effect happens at most once per key",
                            display_key(&key_of(extra, names)),
                            entity.name,
                            spec.name,
                        ),
                        repair: Some(Repair::DeleteIfUnchanged((*extra).clone())),
                    });
                }
            }
        }
        out
    }
}

/// Whether an existing target differs from the one its facts imply: any
/// attribute but the volatile ones; a volatile TTL only when it outlives
/// a fresh one.
fn differs(set: &JoinSet, ttl: Option<&str>, want: &Item, have: &Item) -> bool {
    let attrs: BTreeSet<&String> = want.keys().chain(have.keys()).collect();
    attrs.into_iter().any(|a| {
        let volatile = set.volatile.contains(&a.as_str());
        if volatile && Some(a.as_str()) == ttl {
            let n = |i: &Item| i.opt_i64(a).ok().flatten();
            return match (n(want), n(have)) {
                (Some(w), Some(h)) => h > w,
                (w, h) => w.is_some() != h.is_some(),
            };
        }
        !volatile && !crate::item::same_opt(want.get(a), have.get(a))
    })
}

/// The facts' bindings joined on the variables they share.
fn join(per_fact: Vec<Vec<Vars>>) -> Vec<Vars> {
    let mut facts = per_fact.into_iter();
    let Some(mut rows) = facts.next() else {
        return vec![];
    };
    for next in facts {
        let Some(first) = next.first() else {
            return vec![];
        };
        let shared: Vec<String> = first
            .keys()
            .filter(|k| rows.first().is_some_and(|r| r.contains_key(*k)))
            .cloned()
            .collect();
        let mut by: BTreeMap<Vec<&String>, Vec<&Vars>> = BTreeMap::new();
        for b in &next {
            let k: Option<Vec<&String>> = shared.iter().map(|v| b.get(v)).collect();
            if let Some(k) = k {
                by.entry(k).or_default().push(b);
            }
        }
        let mut joined = Vec::new();
        for r in &rows {
            let k: Option<Vec<&String>> = shared.iter().map(|v| r.get(v)).collect();
            for b in k.and_then(|k| by.get(&k)).into_iter().flatten() {
                let mut m = r.clone();
                m.extend(b.iter().map(|(k, v)| (k.clone(), v.clone())));
                joined.push(m);
            }
        }
        rows = joined;
    }
    rows
}

/// The table's items (keyed by `names`) and the ledger's, each by its
/// item id: what the checks read instead of the table.
type ById<'i> = HashMap<String, &'i Item>;
fn by_id<'i>(input: &CheckInput<'i>, names: &[&str]) -> (ById<'i>, ById<'i>) {
    let table = input
        .items
        .iter()
        .map(|i| (item_id(&key_of(i, names)), i))
        .collect();
    let ledger = input
        .ledger
        .iter()
        .map(|i| {
            let k = key_of(i, &[crate::ledger::PK, crate::ledger::SK]);
            (item_id(&k), i)
        })
        .collect();
    (table, ledger)
}
