//! `jobstream explain` of a counter: the sum its sources imply against its
//! value and the ledger's totals (split from `explain.rs` by
//! responsibility).

use std::collections::BTreeMap;

use shared::engine::derive::{source_key, total_attr, total_key, Implied};
use shared::file::model::FileModel;
use shared::item::{display_key, key_of, Item};
use shared::ledger::item_id;
use shared::models::Model;

use super::explain::{amounts, entity_of, get, show, Explanation, Tables};

pub(super) async fn explain_counter(
    model: &Model,
    file: Option<&FileModel>,
    t: &Tables<'_>,
    key: &Item,
    item: Option<&Item>,
    attrs: &[&str],
    mut x: Explanation,
) -> anyhow::Result<Explanation> {
    let names = model.rules.key_names();
    let id = item_id(key);
    // Exact past 64 bits, as DynamoDB adds them.
    let mut sums: BTreeMap<String, i128> = attrs.iter().map(|a| (a.to_string(), 0)).collect();
    for src in crate::tools::verify::scan_all(t.client, t.table).await? {
        let sk = key_of(&src, names);
        // A source that is bad input now keeps what its last valid state
        // counted (as the engine and `verify` count it): the ledger's record.
        let (values, bad): (Vec<(String, i64)>, bool) = match model.rules.contributions(&src) {
            Ok(cs) => (
                cs.iter()
                    .filter(|c| item_id(&c.counter.key_item()) == id)
                    .flat_map(|c| c.values.iter().map(|(a, v)| (a.to_string(), *v)))
                    .collect(),
                false,
            ),
            Err(_) => match get(t, t.ledger, &source_key("derive", &sk)).await? {
                Some(rec) => (
                    Implied::from_record(&rec)
                        .map(|i| {
                            i.contributions
                                .get(&id)
                                .map(|(_, amounts)| amounts.clone().into_iter().collect())
                                .unwrap_or_default()
                        })
                        .unwrap_or_default(),
                    true,
                ),
                None => (vec![], true),
            },
        };
        if values.is_empty() {
            continue;
        }
        let e = entity_of(file, &sk);
        let each = each_of(file, e, entity_of(file, key));
        for (a, v) in &values {
            *sums.entry(a.clone()).or_default() += i128::from(*v);
        }
        x.line(format!(
            "counted by {} ({}) through {}: {}{}",
            display_key(&sk),
            e.unwrap_or("source"),
            match e {
                Some(e) if file.is_some() => format!("`count:` of {e}{each}"),
                _ => "the model's count rule".into(),
            },
            amounts(values.iter().map(|(a, n)| (a, n))),
            if bad {
                " (bad input now: what its last valid state counted)"
            } else {
                ""
            }
        ));
    }
    let totals = get(t, t.ledger, &total_key("derive", key)).await?;
    for (a, sum) in &sums {
        let value = item.and_then(|i| i.get(a.as_str())).map(show);
        let ledger = totals
            .as_ref()
            .and_then(|r| r.get(&total_attr(a)))
            .map(show);
        x.line(format!(
            "{a}: the sources imply {sum}; the item holds {}; the ledger's total is {}",
            value.unwrap_or_else(|| "nothing".into()),
            ledger.unwrap_or_else(|| "not recorded".into())
        ));
    }
    Ok(x)
}

/// ` (each of `tags`)` when source entity `source` counts into entity
/// `counter` once per element of an attribute (`each:`), else nothing.
fn each_of(file: Option<&FileModel>, source: Option<&str>, counter: Option<&str>) -> String {
    let (Some(f), Some(source), Some(counter)) = (file, source, counter) else {
        return String::new();
    };
    let (Some(si), Some(ci)) = (f.entity(source), f.entity(counter)) else {
        return String::new();
    };
    let attrs: Vec<String> = f.entities[si]
        .count
        .iter()
        .filter(|c| c.counter == ci)
        .filter_map(|c| c.each.map(|x| format!("`{}`", x.attr)))
        .collect();
    if attrs.is_empty() {
        String::new()
    } else {
        format!(" (each of {})", attrs.join(", "))
    }
}
