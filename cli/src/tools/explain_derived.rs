//! `jobstream explain` of a derived item: the source items that imply it
//! (by a scan of the table), by which rule, those a bad input now keeps,
//! and how the item as it is differs from what they imply.

use shared::engine::derive::{source_key, Implied};
use shared::file::model::FileModel;
use shared::item::{display_key, key_of, Item};
use shared::ledger::item_id;
use shared::models::Model;

use super::explain::{entity_of, get, show, Explanation, Tables};

pub(super) async fn explain_derived(
    model: &Model,
    file: Option<&FileModel>,
    t: &Tables<'_>,
    key: &Item,
    present: Option<&Item>,
    mut x: Explanation,
) -> anyhow::Result<Explanation> {
    let names = model.rules.key_names();
    let id = item_id(key);
    let mut sources = 0;
    // What the source whose key sorts last implies (a shared item holds
    // its values): compared with the item as it is.
    let mut implied: Option<(String, Item)> = None;
    for src in crate::tools::verify::scan_all(t.client, t.table).await? {
        let Ok(derived) = model.rules.derived(&src) else {
            // A source that is bad input now keeps what its last valid
            // state derived (its ledger record), as verify sees it.
            let sk = key_of(&src, names);
            let Some(record) = get(t, t.ledger, &source_key("derive", &sk)).await? else {
                continue;
            };
            let Ok(rec) = Implied::from_record(&record) else {
                continue;
            };
            if rec
                .derived
                .values()
                .any(|d| item_id(&key_of(d, names)) == id)
            {
                sources += 1;
                x.line(format!(
                    "kept by {} ({}): bad input now, its last valid state derived it (it stays until that item is fixed or deleted)",
                    display_key(&sk),
                    entity_of(file, &sk).unwrap_or("source")
                ));
            }
            continue;
        };
        if let Some(d) = derived.iter().find(|d| item_id(&key_of(d, names)) == id) {
            sources += 1;
            let sk = key_of(&src, names);
            let src_id = item_id(&sk);
            if implied.as_ref().is_none_or(|(last, _)| *last < src_id) {
                implied = Some((src_id, d.clone()));
            }
            let e = entity_of(file, &sk);
            let rule = match (file, e) {
                (Some(f), Some(e)) => {
                    let target = entity_of(file, key).unwrap_or("?");
                    let ent = f.entities.iter().find(|x| x.name == e);
                    let n = ent
                        .map(|en| {
                            en.derive
                                .iter()
                                .filter(|d| f.entities[d.target].name == target)
                                .count()
                        })
                        .unwrap_or(0);
                    format!(
                        "`derive: {target}` of {e}{}",
                        if n > 1 { " (one of several)" } else { "" }
                    )
                }
                _ => "the model's derive rule".into(),
            };
            x.line(format!(
                "implied by {} ({}) through {rule}",
                display_key(&sk),
                e.unwrap_or("source")
            ));
        }
    }
    if sources == 0 {
        x.line("no source item implies it now (verify reports it as drift if it exists)");
    }
    if let Some((_, want)) = implied {
        x.lines.extend(derived_differences(&want, present));
    }
    Ok(x)
}

/// How the derived item as it is differs from what its sources imply
/// (user16 #4: a value edited by hand was not named): each attribute
/// implied and held otherwise, and each held that none implies; none: it
/// agrees.
fn derived_differences(want: &Item, present: Option<&Item>) -> Vec<String> {
    let Some(item) = present else {
        return vec!["missing: its sources imply it (drift: `verify --repair` puts it)".into()];
    };
    let mut out = Vec::new();
    let mut names: Vec<&String> = want.keys().chain(item.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        match (want.get(name), item.get(name)) {
            (Some(w), Some(h)) if shared::item::same_value(w, h) => {}
            (Some(w), h) => out.push(format!(
                "{name}: its sources imply {}, the item holds {} (drift: `verify --repair` rewrites it)",
                show(w),
                h.map_or("nothing".to_string(), show)
            )),
            (None, Some(h)) => out.push(format!(
                "{name}: the item holds {}, which no source implies (drift: `verify --repair` rewrites it)",
                show(h)
            )),
            (None, None) => {}
        }
    }
    if out.is_empty() {
        out.push("its values are what its sources imply".into());
    }
    out
}
