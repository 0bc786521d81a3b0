//! `verify` of the values `compute:` writes: every item of a computing
//! entity whose stored values differ from what the table's rows imply,
//! each repaired by its job.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::compute_job::{ComputeJob, ComputeMsg, Facts, VERSION};
use super::expr::Val;
use super::model::FileModel;
use super::rules::FileRules;
use crate::item::{display_key, key_of, ItemExt};

/// Kind of `verify`'s findings of computed values.
pub const COMPUTED_VALUE: &str = "computed value";

impl FileModel {
    /// `verify`: every item of a computing entity whose stored values
    /// differ from what the table's rows imply, each repaired by its job
    /// (through the job's guards). A scope with a row that is bad input is
    /// not judged (its values wait for the row, as the job does).
    pub(super) fn compute_checks(
        &'static self,
        input: &crate::models::CheckInput<'_>,
    ) -> Vec<crate::models::Finding> {
        let items = input.items;
        let [pkn, skn] = self.key_names();
        let mut out = Vec::new();
        for (ei, e) in self.entities.iter().enumerate() {
            let Some(c) = &e.compute else { continue };
            input.checked(COMPUTED_VALUE, 0);
            let over = &self.entities[c.over];
            // The rows of every partition, or `None` where one is bad input.
            let mut rows: BTreeMap<&str, Option<Vec<Val>>> = BTreeMap::new();
            for i in items {
                let (Ok(pk), Ok(sk)) = (i.s(pkn), i.s(skn)) else {
                    continue;
                };
                if !sk.starts_with(&c.sk_prefix) || over.key[0].template.matches(pk).is_none() {
                    continue;
                }
                let entry = rows.entry(pk).or_insert_with(|| Some(vec![]));
                match self.row_of(over, i) {
                    Ok(Some(row)) => {
                        if let Some(v) = entry {
                            v.push(row);
                        }
                    }
                    Ok(None) => {}
                    Err(()) => *entry = None,
                }
            }
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
                    // A row that is bad input: not judged.
                    Some(None) => continue,
                    Some(Some(r)) => r.clone(),
                    None => vec![],
                };
                // Nothing is written onto an item its rules reject (the job
                // refuses it): it is bad input, its values not judged.
                if crate::engine::derive::rejects(&FileRules(self), i) {
                    continue;
                }
                let facts = Facts {
                    rows: Val::List(r).prepare(),
                    guards: vec![],
                };
                let Some((_, want)) = job.values(i, &facts) else {
                    continue;
                };
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
                out.push(crate::models::Finding {
                    kind: COMPUTED_VALUE,
                    drift: crate::models::Drift::Wrong,
                    what: format!(
                        "{}: {}",
                        display_key(&key_of(i, &self.key_names())),
                        stored.join(", ")
                    ),
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
