//! `verify`'s owners of shared derived items: each source implying such an
//! item is listed among its owners in the ledger with what it implies, and
//! nothing else is (an owner missing would let the item lose its
//! last-sorting source unseen).

use std::collections::{BTreeMap, BTreeSet};

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
/// each implies (the owner items, and the map of a head from before), and
/// the partition's records as read.
#[derive(Default)]
struct Listed {
    owners: BTreeMap<String, Item>,
    records: Vec<Item>,
}

fn listed(ledger: &[Item]) -> BTreeMap<String, Listed> {
    let mut out: BTreeMap<String, Listed> = BTreeMap::new();
    for rec in ledger {
        let Ok(pk) = rec.s(shared::ledger::PK) else {
            continue;
        };
        if !pk.starts_with(OWNERS) {
            continue;
        }
        let part = out.entry(pk.to_string()).or_default();
        part.records.push(rec.clone());
        if rec.s(shared::ledger::SK) == Ok(OWNERS_HEAD_SK) {
            if let Some(AttributeValue::M(m)) = rec.get("s") {
                for (src, d) in m {
                    if let AttributeValue::M(d) = d {
                        part.owners.insert(src.clone(), d.clone());
                    }
                }
            }
        } else if let (Ok(src), Some(AttributeValue::M(d))) = (rec.s("src"), rec.get("d")) {
            part.owners.insert(src.to_string(), d.clone());
        }
    }
    out
}

/// The `pk` prefix of the derive processor's owners partitions.
const OWNERS: &str = "OWN#derive#";

/// The `pk`s of the ledger's owners partitions.
pub(super) fn owners_pks(ledger: &[Item]) -> BTreeSet<&str> {
    ledger
        .iter()
        .filter_map(|rec| rec.s(shared::ledger::PK).ok())
        .filter(|pk| pk.starts_with(OWNERS))
        .collect()
}

/// Reports owners missing or wrong (repaired by reconciling their source)
/// and owners listed that no longer imply the item; the owners of a key no
/// shared entity of the model has any more (its key template edited, its
/// entity removed or no longer `shared`) are dropped by the repair.
pub(super) fn check(rules: &dyn Rules, expected: &Expected, ledger: &[Item], report: &mut Report) {
    let mut listed = listed(ledger);
    for (dkey, sources) in expected.values() {
        // No head and no owner at all: an item derived before the engine
        // kept its owners (a compiled model's, or one of an entity made
        // `shared` since), which it tells apart from its sources' records
        // until a change of theirs lists them.
        let Some(part) = listed.remove(&owners_pk("derive", dkey)) else {
            continue;
        };
        let owners = part.owners;
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
            extra(display_key(dkey), src, None, report);
        }
    }
    // Owners of items no source implies any more.
    for (pk, part) in listed {
        let stale = derived_key(rules, &pk, &part.owners).filter(|k| !rules.shared(k));
        let Some(dkey) = stale else {
            for src in part.owners.keys() {
                extra(pk.clone(), src, None, report);
            }
            continue;
        };
        let repair = Repair::StaleOwners {
            item: dkey.clone(),
            sources: part
                .owners
                .keys()
                .filter_map(|s| parse_item_id(s))
                .collect(),
            records: part.records,
        };
        for src in part.owners.keys() {
            extra(display_key(&dkey), src, Some(repair.clone()), report);
        }
    }
}

/// The key of the derived item whose owners are at `pk`: from the `pk`
/// itself, or (one hashed to fit) from what an owner implies.
fn derived_key(rules: &dyn Rules, pk: &str, owners: &BTreeMap<String, Item>) -> Option<Item> {
    pk.strip_prefix(OWNERS)
        .and_then(parse_item_id)
        .or_else(|| owners.values().next().map(|d| key_of(d, rules.key_names())))
}

/// An owner listed that does not imply the item. Of an item the model
/// still shares: no repair (its source's record does not name the item,
/// so reconciling it would not touch it); the item itself is checked
/// against its true last-sorting source. Of a key no shared entity has any
/// more: `stale`, which drops the owners.
fn extra(of: String, src: &str, stale: Option<Repair>, report: &mut Report) {
    let source = parse_item_id(src).map_or_else(|| src.to_string(), |k| display_key(&k));
    let why = if stale.is_some() {
        "no shared entity of the model has this key any more"
    } else {
        "which does not imply it"
    };
    report.found(Finding {
        kind: "ledger",
        drift: Drift::Extra,
        what: format!("owners of {of}: {source} listed, {why}"),
        repair: stale,
    });
}

/// Whether `item`, which no entity of the model matches, is one the
/// processor derived under an earlier version of it: stamped with an
/// entity the model derives ([`Rules::stale_derived_item`]: its key
/// template edited since), or one of an entity removed since, which the
/// ledger tells (a source's record names it, or its owners are kept).
pub(super) fn earlier_derived(
    rules: &dyn Rules,
    item: &Item,
    recorded: &BTreeSet<&str>,
    owner_pks: &BTreeSet<&str>,
) -> bool {
    if rules.stale_derived_item(item) {
        return true;
    }
    let key = key_of(item, rules.key_names());
    rules.removed_counter_item(item)
        && (recorded.contains(item_id(&key).as_str())
            || owner_pks.contains(owners_pk("derive", &key).as_str()))
}

/// The finding of a derived item of an earlier version of the model that
/// no source's record names: deleted if still as read.
pub(super) fn left_behind(key: &Item, item: &Item) -> Finding {
    Finding {
        kind: "derived",
        drift: Drift::Extra,
        what: format!(
            "{}: a derived item of an earlier version of the model (no entity has this key any more)",
            display_key(key)
        ),
        repair: Some(Repair::DeleteIfUnchanged(item.clone())),
    }
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
