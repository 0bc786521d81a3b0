//! `explain` of a source of a shared derived item: whether its owners list
//! it, and the owner whose values the item holds.

use aws_sdk_dynamodb::types::AttributeValue;
use shared::engine::derive::{owner_key, owners_key};
use shared::item::{display_key, Item};
use shared::ledger::item_id;

use super::explain::{get, Tables};

/// What the owners of a shared derived item say of the source at `source`
/// (listed or not) and which owner sorts last, whose values it holds.
pub(super) async fn owner_line(
    t: &Tables<'_>,
    dkey: &Item,
    source: &Item,
) -> anyhow::Result<String> {
    let src = item_id(source);
    let head = get(t, t.ledger, &owners_key("derive", dkey)).await?;
    let in_map = |h: &Item| match h.get("s") {
        Some(AttributeValue::M(m)) => m.contains_key(&src),
        _ => false,
    };
    let listed = head.as_ref().is_some_and(in_map)
        || get(t, t.ledger, &owner_key("derive", dkey, &src))
            .await?
            .is_some();
    let last = head.as_ref().and_then(|h| match h.get("top") {
        Some(AttributeValue::S(top)) => Some(top.clone()),
        _ => match h.get("s") {
            Some(AttributeValue::M(m)) => m.keys().max().cloned(),
            _ => None,
        },
    });
    let show = |id: &str| {
        shared::ledger::parse_item_id(id).map_or_else(|| id.to_string(), |k| display_key(&k))
    };
    Ok(format!(
        "  shared: {} among its owners; it holds the values of the one whose key sorts last: {}",
        if listed {
            "listed"
        } else {
            "not listed (pending or drift)"
        },
        last.as_deref()
            .map_or_else(|| "none listed".to_string(), show)
    ))
}
