//! What `verify` and `explain` ask of a `compute:` block: every item whose
//! stored values differ from what the table's rows imply (each repaired by
//! its job), and an item's values as its rows imply them.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;

use super::{scope_of_item, scope_vec, ComputeJob, ComputeMsg, Facts, VERSION};
use crate::engine::derive::SOURCE_SK;
use crate::file::compute::{
    row_val, rows_pk, scope_too_large, sequence_of, Compute, MAX_SCOPE_ROWS, SCOPE_TOO_LARGE,
    SEQUENCE_ATTR,
};
use crate::file::expr::Val;
use crate::file::model::{Entity, FileModel};
use crate::file::rules::{FileRules, Parsed, Record};
use crate::item::{display_key, key_of, Item, ItemExt};
use crate::ledger;

/// Kind of `verify`'s findings of computed values.
pub const COMPUTED_VALUE: &str = "computed value";

impl FileModel {
    /// `verify`: every item of a computing entity whose stored values
    /// differ from what the table's rows imply, each repaired by its job
    /// (through the job's guards). A scope with a row that is bad input
    /// after a valid image is not judged (its values wait for the row, as
    /// the job does); a row never valid is no row.
    pub(in crate::file) fn compute_checks(
        &'static self,
        input: &crate::models::CheckInput<'_>,
    ) -> Vec<crate::models::Finding> {
        let items = input.items;
        let [pkn, skn] = self.key_names();
        let limits = crate::limits::KeyLimits::of(&self.table);
        let mut out = Vec::new();
        for (ei, e) in self.entities.iter().enumerate() {
            let Some(c) = &e.compute else { continue };
            input.checked(COMPUTED_VALUE, 0);
            let over = &self.entities[c.over];
            // The rows of every partition, and its rows that are bad input.
            let mut found: BTreeMap<&str, (Vec<Val>, Vec<Item>)> = BTreeMap::new();
            for i in items {
                let (Ok(pk), Ok(sk)) = (i.s(pkn), i.s(skn)) else {
                    continue;
                };
                if !sk.starts_with(&c.sk_prefix) || over.key[0].template.matches(pk).is_none() {
                    continue;
                }
                let entry = found.entry(pk).or_default();
                match self.row_of(over, i) {
                    Ok(Some(row)) => entry.0.push(row),
                    Ok(None) => {}
                    Err(()) => entry.1.push(key_of(i, &self.key_names())),
                }
            }
            // A row that is bad input holds its scope (`None`: not judged)
            // only if its last valid image was a row of it (its derive
            // record says so), as the job does; one never valid is no row.
            let records: HashMap<&str, &Item> = if found.values().any(|(_, b)| !b.is_empty()) {
                input
                    .ledger
                    .iter()
                    .filter_map(|r| ledger::as_s(r.get(ledger::PK)).map(|pk| (pk, r)))
                    .filter(|(_, r)| ledger::as_s(r.get(ledger::SK)) == Some(SOURCE_SK))
                    .collect()
            } else {
                HashMap::new()
            };
            let rows: BTreeMap<&str, Option<Vec<Val>>> = found
                .into_iter()
                .map(|(pk, (rows, bad))| {
                    let held = bad.iter().any(|k| {
                        let record = records.get(self.row_record_pk(k).as_str()).copied();
                        self.bad_row_holds(c, pk, record)
                    });
                    (pk, (!held).then_some(rows))
                })
                .collect();
            let job = ComputeJob {
                m: self,
                entity: ei,
            };
            for i in items {
                let Some((ce, _, scope, rpk)) = self.compute_scope(i) else {
                    continue;
                };
                if ce != ei {
                    continue;
                }
                let (Ok(pk), Ok(sk)) = (i.s(pkn), i.s(skn)) else {
                    continue;
                };
                let r = match rows.get(rpk.as_str()) {
                    // A row bad input after a valid image: not judged.
                    Some(None) => continue,
                    Some(Some(r)) => r.clone(),
                    None => vec![],
                };
                // Past what a job can read: bad input (the job leaves the
                // values as they are), not drift a repair could fix.
                if r.len() > MAX_SCOPE_ROWS {
                    input.bad_input(format!(
                        "{}: {} not computed over `{}` rows of {pkn}={rpk}: {} ({SCOPE_TOO_LARGE})",
                        display_key(&key_of(i, &self.key_names())),
                        c.values
                            .iter()
                            .map(|(a, _)| *a)
                            .collect::<Vec<_>>()
                            .join(", "),
                        over.name,
                        scope_too_large(r.len()),
                    ));
                    continue;
                }
                // Nothing is written onto an item its rules reject (the job
                // refuses it): it is bad input, its values not judged. One
                // that waits for its values is judged: a value still absent
                // is said so.
                if crate::engine::derive::is_bad_input(&crate::file::rules::FileRules(self), i) {
                    continue;
                }
                let facts = Facts {
                    rows: Val::List(r).prepare(),
                    guards: vec![],
                };
                let Some((mut rec, values)) = job.values(i, &facts) else {
                    continue;
                };
                let shown = display_key(&key_of(i, &self.key_names()));
                // A value that cannot be computed is bad input (the job
                // leaves it as it is); the others are judged.
                let mut want = Vec::with_capacity(values.len());
                for (a, v) in values {
                    match v {
                        Ok(v) => want.push((a, v)),
                        Err(why) => input.bad_input(format!(
                            "{shown}: {a} not computed over `{}` rows of {pkn}={rpk}: {why}: its value is left as it is (the item's other values are computed) (Invalid)",
                            over.name,
                        )),
                    }
                }
                if want.is_empty() {
                    continue;
                }
                input.checked(COMPUTED_VALUE, 1);
                let stored: Vec<String> = want
                    .iter()
                    .filter(|(a, v)| i.get(*a) != Some(&AttributeValue::N(v.to_string())))
                    .map(|(a, v)| {
                        let have = match i.get(*a) {
                            Some(AttributeValue::N(x)) => x.clone(),
                            Some(_) => "not a number".to_string(),
                            None => "absent".to_string(),
                        };
                        format!("{a} is {have}, the rows imply {v}")
                    })
                    .collect();
                if stored.is_empty() {
                    continue;
                }
                // A write DynamoDB refuses (the item with these values and
                // the projection they imply past a limit): bad input, as
                // the job counts it, not drift a repair could fix.
                for (a, v) in &want {
                    rec.set(a, Val::Int(*v));
                }
                if let Err(why) = limits.check(&self.as_computed(i, rec, &want)) {
                    input.bad_input(format!(
                        "{shown}: {} cannot be written: {why}: the job's write of them (with the projection they imply) is refused, they are left as they are (Invalid)",
                        want.iter().map(|(a, _)| *a).collect::<Vec<_>>().join(", "),
                    ));
                    continue;
                }
                out.push(crate::models::Finding {
                    kind: COMPUTED_VALUE,
                    drift: crate::models::Drift::Wrong,
                    what: format!("{shown}: {}", stored.join(", ")),
                    repair: Some(crate::models::Repair::Job {
                        queue: c.queue.logical,
                        body: crate::engine::body::encode(
                            &ComputeMsg::Items {
                                scope,
                                keys: vec![[pk.to_string(), sk.to_string()]],
                            },
                            VERSION,
                        ),
                    }),
                });
            }
        }
        out
    }
}

impl FileModel {
    /// `item` as a job's write of `values` would leave it: the values, the
    /// projection they imply (`rec`: the item's parse holding them) and
    /// the job's sequence raised by one.
    fn as_computed(
        &'static self,
        item: &Item,
        rec: Record<'static>,
        values: &[(&str, i64)],
    ) -> Item {
        let mut after = item.clone();
        for (a, v) in values {
            after.insert(a.to_string(), AttributeValue::N(v.to_string()));
        }
        let parsed = Parsed::Writer(rec);
        if let Ok(Some(p)) = FileRules(self).aspects_of(Ok(&parsed), item).projection {
            for (a, v) in p.attrs {
                match v {
                    Some(v) => after.insert(a.to_string(), v),
                    None => after.remove(a),
                };
            }
        }
        let next = sequence_of(item)
            .and_then(|q| q.checked_add(1))
            .unwrap_or(1);
        after.insert(
            SEQUENCE_ATTR.to_string(),
            AttributeValue::N(next.to_string()),
        );
        after
    }

    /// A row of `over` as its values read it (`Ok(None)`: another item of
    /// the partition; `Err`: bad input, so its scope is not judged).
    fn row_of(&self, over: &Entity, item: &Item) -> Result<Option<Val>, ()> {
        match self.parse(item) {
            Ok(Parsed::Writer(rec)) if std::ptr::eq(rec.entity, over) => {
                Ok(Some(row_val(&rec.vals)))
            }
            Ok(_) => Ok(None),
            Err(_) => Err(()),
        }
    }

    /// The computing entity of an item (its index), the scope its key
    /// binds and the partition key of that scope's rows (`None`: the item's
    /// entity computes nothing).
    fn compute_scope(
        &self,
        item: &Item,
    ) -> Option<(usize, &Compute, BTreeMap<String, String>, String)> {
        let [pkn, skn] = self.key_names();
        let (Ok(pk), Ok(sk)) = (item.s(pkn), item.s(skn)) else {
            return None;
        };
        let (e, _) = self.classify(pk, sk)?;
        let c = e.compute.as_ref()?;
        let ei = self.entities.iter().position(|x| std::ptr::eq(x, e))?;
        let scope = scope_of_item(c, e, pk, sk)?;
        let rpk = rows_pk(&self.entities[c.over], &scope_vec(&scope))?;
        Some((ei, c, scope, rpk))
    }

    /// Where an item's computed values are read from (`explain`): the
    /// partition key of its rows, the literal their sort keys start with and
    /// the rows' entity (`None`: its entity computes nothing).
    pub fn compute_rows(&self, item: &Item) -> Option<(String, &str, &'static str)> {
        let (_, c, _, rpk) = self.compute_scope(item)?;
        Some((rpk, c.sk_prefix.as_str(), self.entities[c.over].name))
    }

    /// The ledger keys of the derive records of the rows of `partition`
    /// (the items read from [`Self::compute_rows`] for `item`) that are
    /// bad input: what [`Self::computed_values`] is given of the ledger.
    pub fn bad_row_record_keys(&self, item: &Item, partition: &[Item]) -> Vec<Item> {
        let Some((_, c, _, _)) = self.compute_scope(item) else {
            return vec![];
        };
        let over = &self.entities[c.over];
        partition
            .iter()
            .filter(|i| self.row_of(over, i).is_err())
            .map(|i| self.row_record_key(i))
            .collect()
    }

    /// Each computed value of `item` as `partition` (the items read from
    /// [`Self::compute_rows`]) implies it, as the job and `verify` compute
    /// it (or why that value cannot be computed: bad input, left as it is);
    /// `Err` says why none is judged (a row bad input after a valid image,
    /// by its derive record among `records`, or the item is bad input).
    pub fn computed_values(
        &'static self,
        item: &Item,
        partition: &[Item],
        records: &[Item],
    ) -> Result<super::Values, String> {
        let Some((entity, c, _, rpk)) = self.compute_scope(item) else {
            return Ok(vec![]);
        };
        let over = &self.entities[c.over];
        let mut rows = Vec::new();
        for i in partition {
            match self.row_of(over, i) {
                Ok(Some(row)) => rows.push(row),
                Ok(None) => {}
                Err(()) => {
                    let key = key_of(i, &self.key_names());
                    if self.bad_row_holds(c, &rpk, self.record_of(&key, records)) {
                        return Err(format!(
                            "a row ({}) is bad input after a valid image: the values wait for it",
                            display_key(&key)
                        ));
                    }
                }
            }
        }
        if rows.len() > MAX_SCOPE_ROWS {
            return Err(format!(
                "{} ({SCOPE_TOO_LARGE})",
                scope_too_large(rows.len())
            ));
        }
        let facts = Facts {
            rows: Val::List(rows).prepare(),
            guards: vec![],
        };
        ComputeJob { m: self, entity }
            .values(item, &facts)
            .map(|(_, values)| values)
            .ok_or_else(|| "the item is bad input: its values are not computed".to_string())
    }
}
