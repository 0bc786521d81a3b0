//! Counters found through another item (SPEC §7, "located counters").
//!
//! A source may count into an item whose key it cannot compute: invoice
//! lines under `INV#<invoiceId>` carry no `accountId`, the invoice sits at
//! `ACCOUNT#<accountId>` / `INV#<invoiceId>`. The rules then give the
//! counter a *logical* key (its identity, e.g. the invoice id) and say so
//! through [`super::rules::Rules::locate`]:
//!
//! - the ledger keeps the totals under the logical key, like any counter's;
//! - every item that claims the identity (the rules' [`Rules::counter`] of
//!   it gives the logical key) is listed in the ledger index
//!   [`locate_index`] of that key, written in the same transaction as the
//!   item's own ledger record (the engine adds the membership itself);
//! - the counter item is the one listed item that exists and still carries
//!   the identity (consistent reads). None: the totals wait in the ledger,
//!   as a writer's counter waits for its item. Several at once (two
//!   invoices claiming one id): bad input, counted and logged with their
//!   keys, nothing is written to either; the totals wait until one is left;
//! - the write onto the located item is conditioned on its identity, so a
//!   concurrent change of it (a re-key, an id edited) retries the sync
//!   instead of writing one identity's totals onto another's item.
//!
//! [`Rules`]: super::rules::Rules
//! [`Rules::counter`]: super::rules::Rules::counter

use aws_sdk_dynamodb::types::AttributeValue;

use super::derive::{index_members, Deriver};
use crate::error::{ProcessError, StoreError};
use crate::item::{display_key, Item};
use crate::ledger::{item_id, parse_item_id};
use crate::store::Store;

/// How a counter with a logical key is found in the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Locate {
    /// The identity: attributes every item that is this counter carries
    /// with exactly these values.
    pub identity: Vec<(&'static str, AttributeValue)>,
}

/// The ledger index listing the items that claim a located counter's
/// identity (members: their keys, as [`item_id`]s).
pub fn locate_index(counter_key: &Item) -> String {
    format!("{PREFIX}{}", item_id(counter_key))
}

const PREFIX: &str = "LOC#";

/// The logical counter key a [`locate_index`] name is of.
pub fn located_key(index: &str) -> Option<Item> {
    parse_item_id(index.strip_prefix(PREFIX)?)
}

/// Where a located counter is.
#[derive(Debug)]
pub enum Located {
    /// The one item that carries the identity: its key and its state.
    One(Item, Item),
    /// No item carries it (yet, or any more): the totals wait.
    Nowhere,
    /// Several items claim it: their keys.
    Contested(Vec<Item>),
}

/// Whether `item` carries the identity.
pub fn carries(item: &Item, locate: &Locate) -> bool {
    locate
        .identity
        .iter()
        .all(|(a, v)| item.get(*a).is_some_and(|have| have == v))
}

/// Finds a located counter's item (consistent reads of the index and of
/// the listed items).
pub async fn find(
    deriver: &Deriver,
    counter_key: &Item,
    locate: &Locate,
) -> Result<Located, ProcessError> {
    let at = Tables {
        store: &deriver.store,
        table: &deriver.table,
        ledger_table: &deriver.ledger_table,
        key_names: deriver.rules.key_names(),
    };
    Ok(find_in(&at, counter_key, locate).await?)
}

/// Where [`find_in`] reads: the model's table and its ledger.
pub struct Tables<'a> {
    pub store: &'a Store,
    pub table: &'a str,
    pub ledger_table: &'a str,
    pub key_names: &'a [&'a str],
}

/// [`find`] in the tables `at` (a tool's reads, no processor of its own).
pub async fn find_in(
    at: &Tables<'_>,
    counter_key: &Item,
    locate: &Locate,
) -> Result<Located, StoreError> {
    let index = locate_index(counter_key);
    let mut members = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let (page, next) =
            index_members(at.store, at.ledger_table, &index, after.as_deref(), 100).await?;
        members.extend(page);
        match next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    let keys: Vec<Item> = members.iter().filter_map(|m| parse_item_id(m)).collect();
    if keys.is_empty() {
        return Ok(Located::Nowhere);
    }
    let mut found: Vec<(Item, Item)> = at
        .store
        .batch_get(at.table, keys)
        .await?
        .into_iter()
        .filter(|i| carries(i, locate))
        .map(|i| (crate::item::key_of(&i, at.key_names), i))
        .collect();
    found.sort_by_key(|(k, _)| item_id(k));
    Ok(match found.len() {
        0 => Located::Nowhere,
        1 => {
            let (k, i) = found.pop().expect("one");
            Located::One(k, i)
        }
        _ => Located::Contested(found.into_iter().map(|(k, _)| k).collect()),
    })
}

/// The reason logged and counted (bad input) for a contested identity.
pub fn contested_reason(keys: &[Item]) -> String {
    let keys: Vec<String> = keys.iter().map(display_key).collect();
    format!(
        "{} items claim the identity of one counter ({}): nothing is written to either; its totals wait in the ledger until one is left",
        keys.len(),
        keys.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::s;

    #[test]
    fn an_index_name_gives_its_counter_key_back() {
        let key: Item = [
            ("PK".to_string(), s("@invoice")),
            ("SK".to_string(), s("a|b=c\\d")),
        ]
        .into();
        assert_eq!(located_key(&locate_index(&key)), Some(key));
        assert_eq!(located_key("IDX#other"), None);
    }

    #[test]
    fn an_item_carries_an_identity_only_with_every_value_equal() {
        let locate = Locate {
            identity: vec![("invoiceId", s("i1"))],
        };
        let mut item: Item = [("invoiceId".to_string(), s("i1"))].into();
        assert!(carries(&item, &locate));
        item.insert("invoiceId".into(), s("i2"));
        assert!(!carries(&item, &locate));
        item.remove("invoiceId");
        assert!(!carries(&item, &locate));
    }
}
