//! What a source item implies (its contributions summed per counter, its
//! derived items, its ledger index entries), as the ledger records it, and
//! the projection write that brings an item to what its rules compute.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::AttributeValue;

use super::{Contribution, Projection, Rules};
use crate::error::InputError;
use crate::item::{key_of, n, Item, ItemExt};
use crate::ledger::item_id;
use crate::store::Update;

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
pub(super) type Sums = BTreeMap<String, (Item, BTreeMap<String, i64>)>;

/// One item's contributions summed per counter and attribute; a sum that
/// does not fit an i64 is an error (bad input, never a wrapped number).
pub(super) fn sum_contributions(contributions: &[Contribution]) -> Result<Sums, String> {
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
pub(super) fn checked_sums(
    contributions: Result<Vec<Contribution>, InputError>,
    image: &Item,
    key_names: &[&str],
) -> Result<Vec<Contribution>, InputError> {
    let contributions = contributions?;
    sums_fit(&contributions, image, key_names)?;
    Ok(contributions)
}

/// Whether the sums of `contributions` fit (an overflow is bad input).
pub(super) fn sums_fit(
    contributions: &[Contribution],
    image: &Item,
    key_names: &[&str],
) -> Result<(), InputError> {
    sum_contributions(contributions)
        .map(|_| ())
        .map_err(|reason| InputError::Invalid {
            key: crate::item::display_key(&key_of(image, key_names)),
            reason,
        })
}

/// Per counter, what changes from `old` to `new` contributions (non-zero
/// amounts only).
pub(super) fn contribution_deltas(
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
