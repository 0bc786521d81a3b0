//! `jobstream explain` of an item a `once:` effect puts (or would put):
//! the effect, its once key, its marker in the ledger and the source item
//! that asks for it, with whether its `when` holds now. Sources are found
//! by a scan of the table, as for a derived item.

use shared::engine::once::{marker_key, SKIPPED};
use shared::file::model::FileModel;
use shared::file::once::OnceSpec;
use shared::item::{display_key, key_of, Item, ItemExt};

use super::explain::{entity_of, get, of, Explanation, Tables};

/// The effects of `specs` that put `key` (`present`: an item has it).
pub(super) async fn explain_once(
    f: &'static FileModel,
    specs: &[&OnceSpec],
    t: &Tables<'_>,
    key: &Item,
    present: bool,
    x: &mut Explanation,
) -> anyhow::Result<()> {
    let names = f.keys;
    let items = crate::tools::verify::scan_all(t.client, t.table).await?;
    for spec in specs {
        let on = f.entities[spec.source].name;
        let mut found = 0;
        let mut markers: Vec<String> = Vec::new();
        for item in &items {
            let Some(asked) = f.once_of_source(spec, item) else {
                continue;
            };
            if !asked.puts.contains(key) {
                continue;
            }
            found += 1;
            let source = key_of(item, names);
            x.line(format!(
                "put by once `{}` (key {}) for {}{}, whose when `{}` {}",
                spec.name,
                asked.once_key,
                display_key(&source),
                of(entity_of(Some(f), &source)),
                spec.when.source,
                match (asked.holds, present) {
                    (true, _) => "holds now",
                    (false, true) => "does not hold now (the effect stays: it happens once)",
                    (false, false) => "does not hold now",
                }
            ));
            if !markers.contains(&asked.once_key) {
                markers.push(asked.once_key.clone());
            }
        }
        if found == 0 {
            x.line(format!(
                "put by once `{}` when `{}` becomes true on a {on}: no {on} item asks for this key now (its source deleted, or its values changed since; an effect that happened stays)",
                spec.name, spec.when.source
            ));
        }
        for once_key in markers {
            let mk = marker_key(spec.name, &once_key);
            let marker = get(t, t.ledger, &mk).await?;
            let state = match marker {
                Some(m) if m.opt_bool(SKIPPED).ok().flatten() == Some(true) => {
                    "skipped: a precondition failed when its job ran; its repair (verify finds it missing once every precondition holds) or the next time `when` becomes true takes it over"
                }
                Some(_) => "present: the effect happened; it happens at most once per key",
                None if present => {
                    "absent: no effect of it made this item (another writer's, or drift: run `jobstream verify`)"
                }
                None => "absent: the effect has not happened",
            };
            x.line(format!(
                "marker: {} in the ledger {} ({state})",
                display_key(&mk),
                t.ledger
            ));
        }
    }
    Ok(())
}

/// The once effect a source is refused by, from the reason its rules give
/// (`<entity>: once `<name>`: why`): its effect cannot be computed.
pub(super) fn refusing_once(f: &FileModel, entity: &str, reason: &str) -> Option<String> {
    let name = reason
        .strip_prefix(entity)?
        .strip_prefix(": once `")?
        .split('`')
        .next()?;
    let spec = f.once.iter().find(|o| o.name == name)?;
    Some(format!(
        "once `{name}` on {entity} (when `{}`, key `{}`): an item whose effect cannot be computed is bad input",
        spec.when.source,
        template_source(&spec.key)
    ))
}

/// A template as the model file writes it (`${seekerId}#${jobId}`).
fn template_source(v: &shared::file::model::Value) -> String {
    use shared::file::template::Part;
    v.0.iter()
        .map(|p| match p {
            Part::Lit(l) => l.clone(),
            Part::Hole(e, _) => format!("${{{}}}", e.source),
        })
        .collect()
}
