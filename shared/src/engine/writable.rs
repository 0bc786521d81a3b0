//! Whether what an item implies can be written at all: DynamoDB's limits
//! ([`crate::limits`]) applied to the item with its projection, each
//! derived item, each counter key, the ledger record of what it implies
//! and the transaction that writes them. An item that fails is bad input
//! of its own (SPEC §2.7): known before anything is sent, nothing written
//! for it. The engine and `verify` both ask here.

use aws_sdk_dynamodb::types::AttributeValue;

use super::derive::{source_key, Implied};
use super::rules::{Contribution, Projection, Rules};
use crate::error::InputError;
use crate::item::{display_key, item_size, key_of, Item, MAX_ITEM_BYTES};
use crate::limits::{KeyLimits, MAX_TX_ACTIONS, MAX_TX_BYTES};

/// What an item implies, as its rules said it (the aspects that met bad
/// input left empty: they keep what was recorded).
pub struct Writes<'a> {
    pub projection: Option<&'a Projection>,
    pub derived: &'a [Item],
    pub contributions: &'a [Contribution],
    pub memberships: usize,
}

/// `Err` (naming the item's key and the limit, never a value) when some
/// write `item` implies cannot exist in DynamoDB.
pub fn check(
    rules: &dyn Rules,
    limits: &KeyLimits,
    processor: &str,
    item: &Item,
    w: &Writes<'_>,
) -> Result<(), InputError> {
    let key_names = rules.key_names();
    let key = key_of(item, key_names);
    let bad = |reason: String| InputError::Invalid {
        key: display_key(&key),
        reason,
    };
    if let Some(p) = w.projection {
        // The item as its projection leaves it, sized without a copy.
        limits
            .check_with(item, &p.attrs)
            .map_err(|r| bad(format!("its projection cannot be written: {r}")))?;
    }
    for d in w.derived {
        limits.check(d).map_err(|r| {
            bad(format!(
                "the derived item {} cannot be written: {r}",
                display_key(&key_of(d, key_names))
            ))
        })?;
    }
    for c in w.contributions {
        limits
            .check(&c.counter.key_item())
            .map_err(|r| bad(format!("the counter it counts into cannot exist: {r}")))?;
    }
    let implied = Implied::from_rules(w.contributions, w.derived, key_names);
    let mut record = source_key(processor, &key);
    record.extend(implied.to_attrs());
    record.insert("src".into(), AttributeValue::M(key.clone()));
    let record_bytes = item_size(&record) + bookkeeping_bytes(&implied);
    if record_bytes > MAX_ITEM_BYTES {
        return Err(bad(format!(
            "recording what it implies takes {record_bytes} bytes, over DynamoDB's item limit of {MAX_ITEM_BYTES} bytes"
        )));
    }
    // Its record, its derived items, one totals update per counter, and at
    // most two ledger writes per index entry, in one transaction.
    let actions = 1 + w.derived.len() + implied.contributions.len() + 2 * w.memberships;
    if actions > MAX_TX_ACTIONS {
        return Err(bad(format!(
            "it implies {actions} writes, over the {MAX_TX_ACTIONS} actions of one DynamoDB transaction"
        )));
    }
    let bytes = record_bytes + w.derived.iter().map(item_size).sum::<usize>();
    if bytes > MAX_TX_BYTES {
        return Err(bad(format!(
            "it implies {bytes} bytes of writes, over the {MAX_TX_BYTES} bytes of one DynamoDB transaction"
        )));
    }
    Ok(())
}

/// The most the engine's bookkeeping adds to a source's ledger record
/// beside what the source implies: its version (`ver`), the stream position
/// met (`q`, up to 40 digits), the mark of a pending state kept beside it
/// (`lx`), a tombstone's `ttl`, and the counters the change still owes
/// (`o`: the counters of the item's old image and of its new one, sized
/// here as if the old image's were as large as these). A record the check
/// passes is then one DynamoDB takes, so an item past the limit is known
/// before anything is sent, by the engine and `verify` alike (a change
/// from an image whose counter keys are far longer can still be refused:
/// then it is bad input at its commit).
fn bookkeeping_bytes(implied: &Implied) -> usize {
    // A number attribute of up to 19 digits (an i64), and its name.
    let number = |name: &str| name.len() + 19usize.div_ceil(2) + 1;
    let owed: usize = implied
        .contributions
        .iter()
        .map(|(id, (key, _))| 1 + id.len() + item_size(key) + 3 + key.len())
        .sum();
    number("ver")
        + ("q".len() + 40)
        + number("lx")
        + number(crate::ledger::TTL)
        + "o".len()
        + 3
        + 2 * owed
}
