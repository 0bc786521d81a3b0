//! `verify`'s owners of shared derived items: each source implying such an
//! item is listed among its owners in the ledger with what it implies, and
//! nothing else is (an owner missing would let the item lose its
//! last-sorting source unseen).

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use shared::engine::derive::{owners_pk, OWNERS_HEAD_SK};
use shared::engine::rules::Rules;
use shared::item::{display_key, key_of, same_items, Item, ItemExt};
use shared::ledger::{item_id, parse_item_id};
use shared::models::{Drift, Finding, Repair};

use super::Report;

/// The sources of each shared derived item, as the items imply: by
/// derived id, its key and, by source id, what the source implies and its
/// key.
pub(super) type Expected = BTreeMap<String, (Item, BTreeMap<String, (Item, Item)>)>;

/// The owners the ledger lists, by owners partition: by source id, what
/// each implies (the owner items, and the map of a head from before).
fn listed(ledger: &[Item]) -> BTreeMap<String, BTreeMap<String, Item>> {
    let mut out: BTreeMap<String, BTreeMap<String, Item>> = BTreeMap::new();
    for rec in ledger {
        let Ok(pk) = rec.s(shared::ledger::PK) else {
            continue;
        };
        if !pk.starts_with("OWN#derive#") {
            continue;
        }
        let owners = out.entry(pk.to_string()).or_default();
        if rec.s(shared::ledger::SK) == Ok(OWNERS_HEAD_SK) {
            if let Some(AttributeValue::M(m)) = rec.get("s") {
                for (src, d) in m {
                    if let AttributeValue::M(d) = d {
                        owners.insert(src.clone(), d.clone());
                    }
                }
            }
        } else if let (Ok(src), Some(AttributeValue::M(d))) = (rec.s("src"), rec.get("d")) {
            owners.insert(src.to_string(), d.clone());
        }
    }
    out
}

/// Reports owners missing or wrong (repaired by reconciling their source)
/// and owners listed that no longer imply the item.
pub(super) fn check(expected: &Expected, ledger: &[Item], report: &mut Report) {
    let mut listed = listed(ledger);
    for (dkey, sources) in expected.values() {
        // No head and no owner at all: an item derived before the engine
        // kept its owners (a compiled model's, or one of an entity made
        // `shared` since), which it tells apart from its sources' records
        // until a change of theirs lists them.
        let Some(owners) = listed.remove(&owners_pk("derive", dkey)) else {
            continue;
        };
        for (src, (d, source)) in sources {
            let drift = match owners.get(src) {
                None => Drift::Missing,
                Some(have) if !same_items(have, d) => Drift::Wrong,
                Some(_) => continue,
            };
            report.found(Finding {
                kind: "ledger",
                drift,
                what: format!(
                    "owners of {}: {} {}",
                    display_key(dkey),
                    display_key(source),
                    if drift == Drift::Missing {
                        "not listed"
                    } else {
                        "listed with other content"
                    }
                ),
                repair: Some(Repair::Reconcile(source.clone())),
            });
        }
        for src in owners.keys().filter(|s| !sources.contains_key(*s)) {
            extra(display_key(dkey), src, report);
        }
    }
    // Owners of items no source implies any more.
    for (pk, owners) in listed {
        for src in owners.keys() {
            extra(pk.clone(), src, report);
        }
    }
}

/// An owner listed that does not imply the item: no repair (its source's
/// record does not name the item, so reconciling it would not touch it);
/// the item itself is checked against its true last-sorting source.
fn extra(of: String, src: &str, report: &mut Report) {
    let source = parse_item_id(src).map_or_else(|| src.to_string(), |k| display_key(&k));
    report.found(Finding {
        kind: "ledger",
        drift: Drift::Extra,
        what: format!("owners of {of}: {source} listed, which does not imply it"),
        repair: None,
    });
}

/// Notes that `source` implies `d`: an item several sources imply (a
/// shared one) holds what the source whose key sorts last implies,
/// whatever order the scan meets them in, and lists every source among its
/// owners.
pub(super) fn imply(
    desired: &mut BTreeMap<String, (Item, Item)>,
    shared_owners: &mut Expected,
    rules: &dyn Rules,
    d: Item,
    source: &Item,
) {
    let dkey = key_of(&d, rules.key_names());
    let id = item_id(&dkey);
    if rules.shared(&dkey) {
        shared_owners
            .entry(id.clone())
            .or_insert_with(|| (dkey, BTreeMap::new()))
            .1
            .insert(item_id(source), (d.clone(), source.clone()));
    }
    match desired.get(&id) {
        Some((_, other)) if item_id(other) > item_id(source) => {}
        _ => {
            desired.insert(id, (d, source.clone()));
        }
    }
}
