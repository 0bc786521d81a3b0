//! `verify`'s counter items: every sum of each counter item against the
//! sums of its sources' contributions, and the attributes the model no
//! longer derives on an item the processors own whole.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use shared::engine::derive::rejects;
use shared::engine::rules::Rules;
use shared::item::{display_key, key_of, Item, ItemExt};
use shared::ledger::item_id;
use shared::models::{Drift, Finding, Repair};

use super::{ExpectedCounter, Report};

/// Checks every counter item of `items` (and every counter `sums`
/// expects) against its expected sums; `counted_by`: per totals key, the
/// counter key and the sources whose records count into it.
pub(super) fn check(
    rules: &dyn Rules,
    items: &[Item],
    by_id: &HashMap<String, &Item>,
    sums: &mut BTreeMap<String, ExpectedCounter>,
    counted_by: &BTreeMap<String, (Item, Vec<Item>)>,
    bad: &BTreeSet<String>,
    report: &mut Report,
) {
    let key_names = rules.key_names();
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
    for (ckey, sources) in counted_by.values() {
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
        let label = display_key(&counter.key_item());
        let repair = Some(Repair::Counter {
            counter: counter.key_item(),
            sources: sources
                .iter()
                .filter_map(|s| by_id.get(s).map(|i| key_of(i, key_names)))
                .collect(),
        });
        let finding = match item {
            None if counter.create.is_some() && !zero => Some((Drift::Missing, "absent".into())),
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
