//! `verify` for a model file's `sets:` (SPEC §7: a set job is checkable and
//! repairable without model-specific code): the items a scan of the table
//! implies for each join set against the items there.
//!
//! The candidates are every row the facts join into (each fact's items read
//! back through its key template, joined on their shared variables) and
//! every target item there; each is decided exactly as the set's consumer
//! decides it ([`crate::engine::joinset::JoinSet::decide`]) over the
//! scanned items: a row whose fact is bad input keeps what is there (not
//! drift), a target past its TTL is DynamoDB's to delete (never reported).
//! A finding is repaired by running the job of the first scope that binds
//! the row (its guards included), through the set's consumer.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::FileModel;
use crate::engine::joinset::{JoinJob, JoinSet, KeyTemplate, Vars};
use crate::item::{display_key, Item, ItemExt};
use crate::models::{CheckInput, Drift, Finding, Repair};

/// The variables each item matching `key` binds.
fn rows_of(key: &KeyTemplate, names: &[&str], items: &[Item]) -> Vec<Vars> {
    items
        .iter()
        .filter_map(|i| {
            let mut v = Vars::new();
            key.read(names, i, &mut v).then_some(v)
        })
        .collect()
}

/// The rows of every fact joined on their shared variables.
fn joined(set: &JoinSet, items: &[Item]) -> BTreeSet<Vars> {
    let names = set.key_names;
    let mut rows: Option<Vec<Vars>> = None;
    for f in &set.facts {
        let theirs = rows_of(&f.key, names, items);
        rows = Some(match rows {
            None => theirs,
            Some(ours) => {
                let shared: Vec<&str> = f
                    .key
                    .vars()
                    .into_iter()
                    .filter(|v| ours.first().is_some_and(|r| r.contains_key(*v)))
                    .collect();
                let on = |r: &Vars| -> Vec<String> {
                    shared
                        .iter()
                        .map(|v| r.get(*v).cloned().unwrap_or_default())
                        .collect()
                };
                let mut index: HashMap<Vec<String>, Vec<&Vars>> = HashMap::new();
                for t in &theirs {
                    index.entry(on(t)).or_default().push(t);
                }
                let mut out = Vec::new();
                for r in &ours {
                    for t in index.get(&on(r)).into_iter().flatten() {
                        let mut m = r.clone();
                        m.extend(t.iter().map(|(k, v)| (k.clone(), v.clone())));
                        out.push(m);
                    }
                }
                out
            }
        });
    }
    rows.unwrap_or_default().into_iter().collect()
}

/// The item without the attributes a rewrite ignores.
fn comparable(item: &Item, volatile: &[&str]) -> BTreeMap<String, String> {
    item.iter()
        .filter(|(k, _)| !volatile.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), format!("{v:?}")))
        .collect()
}

impl FileModel {
    /// Every join set's drift: missing, extra and wrong targets.
    pub(super) fn set_checks(&'static self, input: &CheckInput<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        if self.sets.is_empty() {
            return out;
        }
        let [pkn, skn] = self.key_names();
        let by_key: HashMap<(&str, &str), &Item> = input
            .items
            .iter()
            .filter_map(|i| Some(((i.s(pkn).ok()?, i.s(skn).ok()?), i)))
            .collect();
        let read = |key: &Item| -> Option<Item> {
            let (pk, sk) = (key.s(pkn).ok()?, key.s(skn).ok()?);
            by_key.get(&(pk, sk)).map(|i| (*i).clone())
        };
        for spec in &self.sets {
            let set = spec.declaration(self);
            let Ok(scopes) = set.scopes() else { continue };
            let mut candidates = joined(&set, input.items);
            candidates.extend(rows_of(&set.target.key, set.key_names, input.items));
            for vars in candidates {
                let Some(scope) = scopes
                    .iter()
                    .find(|s| s.bound.iter().all(|v| vars.contains_key(v)))
                else {
                    continue;
                };
                let Some((desired, existing)) = set.decide(&scope.on, &vars, &read, input.now)
                else {
                    continue;
                };
                let (drift, key) = match (desired, existing) {
                    (Some(d), None) => (Drift::Missing, d.item),
                    (None, Some(e)) => (Drift::Extra, e.item),
                    (Some(d), Some(e))
                        if comparable(&d.item, set.volatile)
                            != comparable(&e.item, set.volatile) =>
                    {
                        (Drift::Wrong, d.item)
                    }
                    _ => continue,
                };
                let bind: Vars = scope
                    .bound
                    .iter()
                    .filter_map(|v| Some((v.clone(), vars.get(v)?.clone())))
                    .collect();
                let body = JoinJob {
                    set: spec.name.to_string(),
                    scope: scope.on.clone(),
                    bind,
                    step: 0,
                    after: None,
                }
                .encode();
                let key = crate::item::key_of(&key, set.key_names);
                out.push(Finding {
                    kind: spec.name,
                    drift,
                    what: format!("{} {}", spec.name, display_key(&key)),
                    repair: Some(Repair::Job {
                        queue: spec.queue.logical,
                        body,
                    }),
                });
            }
        }
        out
    }
}
