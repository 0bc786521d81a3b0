//! The ledger's keys: a source's record, a shared derived item's owners,
//! a counter's totals, the members of a ledger index.

use crate::item::Item;
use crate::ledger::{self, item_id};
use crate::store::Store;

/// Ledger key of what a source item implies.
pub fn source_key(processor: &str, item_key: &Item) -> Item {
    ledger::key(source_key_pk(processor, item_key), SOURCE_SK)
}

/// Sort key of a source item's ledger record (beside it, at another sort
/// key, may stand the state it keeps pending: see `reads::PENDING_SK`).
pub const SOURCE_SK: &str = "S";

/// Ledger key of the head of the owners of a derived item several sources
/// may imply (see [`Rules::shared`]): its version, which every change of
/// the set of owners bumps, and the owner whose key sorts last. (Before
/// the owners had an item each, this item held them all, in a map.)
pub fn owners_key(processor: &str, derived_key: &Item) -> Item {
    ledger::key(owners_pk(processor, derived_key), OWNERS_HEAD_SK)
}

/// `pk` of a shared derived item's owners: its head and one item per owner.
pub fn owners_pk(processor: &str, derived_key: &Item) -> String {
    ledger::bounded_pk(&format!("OWN#{processor}#"), &item_id(derived_key))
}

/// Sort key of the head of a shared derived item's owners.
pub const OWNERS_HEAD_SK: &str = "O";

/// Sort key prefix of an owner whose [`item_id`] fits a sort key: its id
/// follows, so the owners sort as their ids do.
pub const OWNER_SK: &str = "R#";

/// Sort key prefix of an owner whose [`item_id`] does not fit a sort key
/// (a key of over ~1,000 bytes): the SHA-256 of its id follows, its id is
/// in the item (`src`), and these owners are read all together when the
/// last-sorting owner is looked for.
pub const OWNER_HASHED_SK: &str = "H#";

/// Ledger key of one owner (a source item, by [`item_id`]) of a shared
/// derived item.
pub fn owner_key(processor: &str, derived_key: &Item, source_id: &str) -> Item {
    ledger::key(owners_pk(processor, derived_key), owner_sk(source_id))
}

/// Sort key of an owner: `R#<source id>` (sorting as the ids do), or
/// `H#~sha256:<hex>` when that would pass DynamoDB's sort key limit.
pub fn owner_sk(source_id: &str) -> String {
    let plain = format!("{OWNER_SK}{source_id}");
    if plain.len() <= ledger::MAX_SK_BYTES {
        plain
    } else {
        ledger::bounded_sk_with(OWNER_HASHED_SK, source_id)
    }
}

/// `pk` of a ledger index (see [`Rules::memberships`]), bounded like every
/// ledger key ([`ledger::bounded_pk`]: an index named after a GSI partition
/// value may take 2,048 bytes of its own).
pub fn index_pk(index: &str) -> String {
    ledger::bounded_pk("IDX#", index)
}

/// Ledger key of one member of a ledger index (the member bounded to a sort
/// key's 1,024 bytes: [`ledger::bounded_sk`]).
pub fn index_key(index: &str, member: &str) -> Item {
    ledger::key(index_pk(index), ledger::bounded_sk(member))
}

/// The ledger item of one member of a ledger index: its key, and the member
/// itself where the key holds its hash.
pub fn index_item(index: &str, member: &str) -> Item {
    let mut item = index_key(index, member);
    if ledger::sk_is_hashed(member) {
        item.insert(ledger::HASHED_VALUE.into(), crate::item::s(member));
    }
    item
}

/// One page of a ledger index's members after `after` (consistent read),
/// and where the next page starts (`None`: this is the last).
pub async fn index_members(
    store: &Store,
    ledger_table: &str,
    index: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<(Vec<String>, Option<String>), crate::error::StoreError> {
    let (items, next) = store
        .query_page(
            ledger_table,
            ledger::PK,
            &index_pk(index),
            ledger::SK,
            after,
            limit,
        )
        .await?;
    let members = items
        .iter()
        .filter_map(|i| ledger::sk_value(i).map(str::to_string))
        .collect();
    Ok((members, next))
}

/// Ledger key of a counter item's totals.
pub fn total_key(processor: &str, counter_key: &Item) -> Item {
    ledger::key(total_pk(processor, counter_key), "T")
}

/// The ledger attribute holding a counter attribute's total.
pub fn total_attr(attr: &str) -> String {
    format!("t_{attr}")
}

/// `pk` of the ledger record of what a source item implies (within
/// DynamoDB's key limit for every legal key: see [`ledger::bounded_pk`]).
pub fn source_key_pk(processor: &str, key: &Item) -> String {
    ledger::bounded_pk(&format!("SRC#{processor}#"), &item_id(key))
}

/// `pk` of a counter item's ledger totals.
pub fn total_pk(processor: &str, counter_key: &Item) -> String {
    ledger::bounded_pk(&format!("TOTAL#{processor}#"), &item_id(counter_key))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The owners of a shared item sort as their source ids do (the
    /// last-sorting one is a descending Query's first), within DynamoDB's
    /// sort key limit; an id too long for it is keyed by its hash apart.
    #[test]
    fn owner_sort_keys_sort_as_the_ids_and_fit() {
        let ids = [
            "PK=S:DEV#d|SK=S:R#000001",
            "PK=S:DEV#d|SK=S:R#000002",
            "PK=S:DEV#d|SK=S:R#0000020",
            "PK=S:DEV#d|SK=S:R#00001",
        ];
        let sks: Vec<String> = ids.iter().map(|i| owner_sk(i)).collect();
        let mut sorted = sks.clone();
        sorted.sort();
        assert_eq!(sks, sorted);
        assert!(sks.iter().all(|s| s.starts_with(OWNER_SK)));
        let fits = format!("PK=S:D|SK=S:{}", "x".repeat(ledger::MAX_SK_BYTES - 14));
        assert_eq!(owner_sk(&fits), format!("{OWNER_SK}{fits}"));
        let long = format!("{fits}x");
        let hashed = owner_sk(&long);
        assert!(hashed.starts_with(OWNER_HASHED_SK), "{hashed}");
        assert!(hashed.len() <= ledger::MAX_SK_BYTES);
        assert_ne!(hashed, owner_sk(&format!("{long}y")));
    }
}
