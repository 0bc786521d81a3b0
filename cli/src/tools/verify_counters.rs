//! `verify`'s counter items: every sum of each counter item against the
//! sums of its sources' contributions, and the attributes the model no
//! longer derives on an item the processors own whole. A processor-created
//! counter is kept from its first count on: absent while something counts
//! into it (a count of 0 included) or while its ledger totals say
//! something did, it is missing. A counter item that cannot hold its sums
//! (the item with them past DynamoDB's 400 KB) is bad input, named by the
//! table item's key, not drift a repair could never land.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use shared::engine::counts::kept_from_first_count;
use shared::engine::derive::rejects;
use shared::engine::rules::{Counter, Rules};
use shared::item::{display_key, key_of, n, Item, ItemExt};
use shared::ledger::item_id;
use shared::limits::KeyLimits;
use shared::models::{Drift, Finding, Repair};

use super::{ExpectedCounter, Report};

/// What the ledger says of the counters.
#[derive(Clone, Copy)]
pub(super) struct LedgerSays<'a> {
    /// Per totals key, the counter key and the sources whose records count
    /// into it.
    pub(super) counted_by: &'a BTreeMap<String, (Item, Vec<Item>)>,
    /// The counters whose totals exist (by id: their keys): something
    /// counted into them once.
    pub(super) once_counted: &'a BTreeMap<String, Item>,
}

/// Checks every counter item of `items` (and every counter `sums`
/// expects, or the ledger says was counted into) against its expected
/// sums.
#[allow(clippy::too_many_arguments)]
pub(super) fn check(
    rules: &dyn Rules,
    limits: &KeyLimits,
    items: &[Item],
    by_id: &HashMap<String, &Item>,
    sums: &mut BTreeMap<String, ExpectedCounter>,
    ledger: LedgerSays<'_>,
    bad: &BTreeSet<String>,
    report: &mut Report,
) {
    let key_names = rules.key_names();
    // Counted into once, nothing counts into them now: their items are
    // kept (at 0) all the same.
    for (id, ckey) in ledger.once_counted {
        if let Some(c) = rules.counter(ckey).filter(kept_from_first_count) {
            sums.entry(id.clone())
                .or_insert_with(|| ExpectedCounter::new(c));
        }
    }
    // Counter items: every attribute = the sum over the source items. A
    // located counter (`Rules::locate`) is the one item carrying its
    // identity.
    let mut located: HashMap<String, Vec<&Item>> = HashMap::new();
    for item in items {
        if let Some(c) = rules.counter(item) {
            let id = item_id(&c.key_item());
            if rules.locate(&c.key_item()).is_some() && !rejects(rules, item) {
                located.entry(id.clone()).or_default().push(item);
            }
            sums.entry(id).or_insert_with(|| ExpectedCounter::new(c));
        }
    }
    // A counter's repair reconciles the sources whose records still count
    // into it too (a model edited since they were derived).
    for (ckey, sources) in ledger.counted_by.values() {
        if let Some(e) = sums.get_mut(&item_id(ckey)) {
            e.sources.extend(sources.iter().map(item_id));
        }
    }
    for (
        id,
        ExpectedCounter {
            counter,
            sums: want,
            sources,
        },
    ) in sums.iter()
    {
        report.checked("counter");
        let zero = want.values().all(|v| *v == 0);
        let item = match rules.locate(&counter.key_item()) {
            None => by_id.get(id),
            Some(_) => match located.get(id).map(Vec::as_slice) {
                Some([one]) => Some(one),
                Some(several) if several.len() > 1 => {
                    let keys: Vec<Item> = several.iter().map(|i| key_of(i, key_names)).collect();
                    report.bad_input.push(format!(
                        "{}: {}",
                        display_key(&counter.key_item()),
                        shared::engine::locate::contested_reason(&keys)
                    ));
                    continue;
                }
                _ => None,
            },
        };
        // The table item (a located counter's totals are kept under its
        // identity, which is no item of the table).
        let label = display_key(&item.map_or_else(|| counter.key_item(), |i| key_of(i, key_names)));
        if let Some(i) = item.filter(|i| {
            !rejects(rules, i)
                && !bad.contains(id)
                && !bad.contains(&item_id(&key_of(i, key_names)))
        }) {
            if let Err(reason) = limits.check_with(i, &with_sums(counter, want)) {
                report.bad_input.push(format!(
                    "{label}: cannot hold its counter sums ({}): {reason}",
                    counter.attrs.join(", ")
                ));
                continue;
            }
        }
        let counted = !sources.is_empty() || ledger.once_counted.contains_key(id);
        let repair = Some(Repair::Counter {
            counter: counter.key_item(),
            sources: sources
                .iter()
                .filter_map(|s| by_id.get(s).map(|i| key_of(i, key_names)))
                .collect(),
        });
        let finding = match item {
            None if counter.create.is_some() && !zero => Some((Drift::Missing, "absent".into())),
            None if kept_from_first_count(counter) && counted => Some((
                Drift::Missing,
                "absent, though counted into (every sum 0): the processor keeps it from its first count".into(),
            )),
            None => None,
            // The processor writes nothing onto an item its rules reject,
            // nor onto one whose writes cannot exist (an item near 400 KB
            // cannot hold its sums): reported as bad input by the caller.
            Some(i) if rejects(rules, i) || bad.contains(id) => None,
            Some(_) if counter.create.is_some() && counter.remove_at_zero && zero => {
                Some((Drift::Extra, "nothing counts any more".into()))
            }
            Some(i) => counter
                .attrs
                .iter()
                .find(|a| i.opt_i128(a).ok().flatten() != Some(want.get(**a).copied().unwrap_or(0)))
                .map(|a| {
                    (
                        Drift::Wrong,
                        format!(
                            "{a} {}, the sources sum to {}",
                            match i.opt_i128(a) {
                                Ok(Some(v)) => format!("= {v}"),
                                Ok(None) => "is absent".to_string(),
                                Err(_) => "is not a number".to_string(),
                            },
                            want.get(*a).copied().unwrap_or(0)
                        ),
                    )
                }),
        };
        // Attributes the model no longer derives on an item the
        // processors own whole (a sum removed from the file): the
        // counter's write removes them.
        let finding = finding.or_else(|| {
            let item = item.filter(|i| !rejects(rules, i))?;
            let stale = rules.unowned_attributes(item);
            (!stale.is_empty()).then(|| {
                (
                    Drift::Wrong,
                    format!(
                        "{} no longer derived by the model (a sum or projection attribute removed from it): the counter's write removes {}",
                        stale.join(", "),
                        if stale.len() == 1 { "it" } else { "them" }
                    ),
                )
            })
        });
        if let Some((drift, why)) = finding {
            report.found(Finding {
                kind: "counter",
                drift,
                what: format!("{label}: {why}"),
                repair: repair.clone(),
            });
        }
    }
}

/// What the counter writes onto its item: every sum (as the sources sum
/// them) and its creation stamps.
fn with_sums<'a>(
    counter: &'a Counter,
    want: &BTreeMap<String, i128>,
) -> Vec<(&'a str, Option<AttributeValue>)> {
    counter
        .attrs
        .iter()
        .map(|a| (*a, Some(n(want.get(*a).copied().unwrap_or(0)))))
        .chain(
            counter
                .create
                .iter()
                .flatten()
                .map(|(a, v)| (*a, Some(v.clone()))),
        )
        .collect()
}
