//! DynamoDB's hard limits, checked before a write is sent.
//!
//! An item whose implied writes cannot exist (a key or index key attribute
//! over its size limit, an item over 400 KB, more writes than a transaction
//! holds) is bad input of its source: known here, before anything is sent,
//! so the shard moves on at once instead of failing the batch on a
//! `ValidationException` no retry can fix (SPEC §2.7).
//!
//! The limits (DynamoDB developer guide, "Service, account, and table
//! quotas"): a partition key value <= 2048 bytes, a sort key value <= 1024
//! bytes, the same for the key attributes of a global secondary index on
//! every item that carries them (and never an empty string there); an item
//! <= 400 KB; a transaction <= 100 actions and 4 MB.

use aws_sdk_dynamodb::types::AttributeValue;

use crate::item::{item_size, value_size, Item, MAX_ITEM_BYTES};
use crate::models::table::TableDef;

/// Bytes of a partition key value (table or index).
pub const MAX_PARTITION_KEY_BYTES: usize = 2048;
/// Bytes of a sort key value (table or index).
pub const MAX_SORT_KEY_BYTES: usize = 1024;
/// Actions of one TransactWriteItems.
pub const MAX_TX_ACTIONS: usize = 100;
/// Bytes of one TransactWriteItems (the items it writes).
pub const MAX_TX_BYTES: usize = 4 * 1024 * 1024;

/// A key attribute of a table or index and the limit of its value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyAttr {
    name: &'static str,
    /// The table's or index's name, for the message.
    of: &'static str,
    max_bytes: usize,
    partition: bool,
}

/// The key attributes of a table and of its global secondary indexes, each
/// with its limit: what every item written into the table must satisfy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyLimits {
    attrs: Vec<KeyAttr>,
}

impl KeyLimits {
    /// The limits of `table`'s keys and index keys.
    pub fn of(table: &TableDef) -> Self {
        let mut attrs = Vec::new();
        let mut add = |name, of, partition| {
            attrs.push(KeyAttr {
                name,
                of,
                max_bytes: if partition {
                    MAX_PARTITION_KEY_BYTES
                } else {
                    MAX_SORT_KEY_BYTES
                },
                partition,
            })
        };
        add(table.pk, "the table", true);
        add(table.sk, "the table", false);
        for g in &table.gsis {
            add(g.pk, g.name, true);
            if let Some(sk) = g.sk {
                add(sk, g.name, false);
            }
        }
        Self { attrs }
    }

    /// Why `item` cannot be written (the first limit it breaks), if it
    /// cannot: a key or index key attribute over its byte limit, empty, or
    /// not a string; the item over 400 KB. Names the attribute and the
    /// limit, never the value.
    pub fn check(&self, item: &Item) -> Result<(), String> {
        self.check_with(item, &[])
    }

    /// [`Self::check`] of `item` with `overlay` applied (each attribute
    /// set to its value, removed where `None`; a later entry of a name
    /// wins), without copying the item: what a projection makes of it.
    pub fn check_with(
        &self,
        item: &Item,
        overlay: &[(&str, Option<AttributeValue>)],
    ) -> Result<(), String> {
        // The overlay's last entry of each name.
        let last = |i: usize| !overlay[i + 1..].iter().any(|(n, _)| *n == overlay[i].0);
        let get = |name: &str| match overlay.iter().rev().find(|(n, _)| *n == name) {
            Some((_, v)) => v.as_ref(),
            None => item.get(name),
        };
        for k in &self.attrs {
            let Some(v) = get(k.name) else { continue };
            let what = if k.partition { "partition" } else { "sort" };
            match v {
                AttributeValue::S(s) if s.is_empty() => {
                    return Err(format!(
                        "`{}` ({what} key of {}) would be empty, which DynamoDB rejects",
                        k.name, k.of
                    ))
                }
                AttributeValue::S(s) if s.len() > k.max_bytes => {
                    return Err(format!(
                    "`{}` ({what} key of {}) would be {} bytes, over DynamoDB's limit of {} bytes",
                    k.name,
                    k.of,
                    s.len(),
                    k.max_bytes
                ))
                }
                AttributeValue::S(_) => {}
                other => {
                    return Err(format!(
                        "`{}` ({what} key of {}) would be of type {}, not a string",
                        k.name,
                        k.of,
                        crate::item::type_name(other)
                    ))
                }
            }
        }
        let mut size = item_size(item);
        for (_, (name, v)) in overlay.iter().enumerate().filter(|(i, _)| last(*i)) {
            if let Some(old) = item.get(*name) {
                size -= name.len() + value_size(old);
            }
            if let Some(v) = v {
                size += name.len() + value_size(v);
            }
        }
        if size > MAX_ITEM_BYTES {
            return Err(format!(
                "the item would be {size} bytes, over DynamoDB's limit of {MAX_ITEM_BYTES} bytes"
            ));
        }
        Ok(())
    }
}

/// Whether a table key (`names`: partition key first, then sort key) can
/// exist in DynamoDB: each value a non-empty string within its byte limit.
/// A key that cannot is never there, so a read of it is not sent
/// (DynamoDB refuses the whole request that holds it).
pub fn key_can_exist(key: &Item, names: &[&str]) -> bool {
    names.iter().enumerate().all(|(i, name)| {
        let max = if i == 0 {
            MAX_PARTITION_KEY_BYTES
        } else {
            MAX_SORT_KEY_BYTES
        };
        matches!(key.get(*name), Some(AttributeValue::S(s)) if !s.is_empty() && s.len() <= max)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::test_support::item;
    use crate::item::{n, s};
    use crate::models::table::Gsi;

    fn table() -> TableDef {
        TableDef {
            name: "t",
            pk: "PK",
            sk: "SK",
            gsis: vec![Gsi {
                name: "GSI1",
                pk: "GSI1PK",
                sk: Some("GSI1SK"),
                projection: Default::default(),
            }],
            ttl_attribute: None,
            stream: true,
        }
    }

    #[test]
    fn keys_and_index_keys_are_held_to_dynamodbs_limits() {
        let l = KeyLimits::of(&table());
        let ok = item(&[
            ("PK", s("p".repeat(2048))),
            ("SK", s("s".repeat(1024))),
            ("GSI1PK", s("g".repeat(2048))),
            ("GSI1SK", s("h".repeat(1024))),
        ]);
        assert_eq!(l.check(&ok), Ok(()));
        let mut long_sk = ok.clone();
        long_sk.insert("GSI1SK".into(), s("h".repeat(1025)));
        let why = l.check(&long_sk).unwrap_err();
        assert!(why.contains("`GSI1SK` (sort key of GSI1)"), "{why}");
        assert!(
            why.contains("1025 bytes") && why.contains("1024 bytes"),
            "{why}"
        );
        assert!(!why.contains("hhh"), "never the value: {why}");
        let mut long_pk = ok.clone();
        long_pk.insert("PK".into(), s("é".repeat(1025)));
        assert!(l.check(&long_pk).unwrap_err().contains("2050 bytes"));
        let mut empty = ok.clone();
        empty.insert("GSI1PK".into(), s(""));
        assert!(l.check(&empty).unwrap_err().contains("empty"));
        let mut number = ok.clone();
        number.insert("GSI1PK".into(), n(1));
        assert!(l.check(&number).unwrap_err().contains("type N"));
        // An index key absent: not indexed (sparse), fine.
        let mut sparse = ok;
        sparse.remove("GSI1SK");
        assert_eq!(l.check(&sparse), Ok(()));
        let big = item(&[
            ("PK", s("p")),
            ("SK", s("s")),
            ("blob", s("x".repeat(MAX_ITEM_BYTES))),
        ]);
        let why = l.check(&big).unwrap_err();
        assert!(
            why.contains(&format!("limit of {MAX_ITEM_BYTES} bytes")),
            "{why}"
        );
    }

    /// An item checked with an overlay (a projection) is judged as the
    /// item the overlay makes of it: keys it sets or removes, and its size
    /// with the values replaced.
    #[test]
    fn an_overlay_is_checked_as_the_item_it_makes() {
        let l = KeyLimits::of(&table());
        let base = item(&[
            ("PK", s("p")),
            ("SK", s("s")),
            ("GSI1PK", n(1)),
            ("blob", s("x".repeat(MAX_ITEM_BYTES - 200))),
        ]);
        let applied = |overlay: &[(&str, Option<AttributeValue>)]| {
            let mut i = base.clone();
            for (a, v) in overlay {
                match v {
                    Some(v) => i.insert(a.to_string(), v.clone()),
                    None => i.remove(*a),
                };
            }
            i
        };
        let cases: Vec<Vec<(&str, Option<AttributeValue>)>> = vec![
            vec![],
            vec![("GSI1PK", None)],
            vec![("GSI1PK", Some(s("g")))],
            vec![
                ("GSI1PK", Some(s("g"))),
                ("GSI1SK", Some(s("h".repeat(1025)))),
            ],
            vec![
                ("GSI1PK", Some(s("g"))),
                ("blob", Some(s("x".repeat(MAX_ITEM_BYTES)))),
            ],
            vec![("GSI1PK", None), ("blob", Some(s("short")))],
            vec![("GSI1PK", None), ("extra", Some(s("y".repeat(300))))],
            vec![
                ("GSI1PK", None),
                ("extra", Some(s("y".repeat(300)))),
                ("extra", None),
            ],
            vec![("GSI1PK", Some(s(""))), ("GSI1PK", None)],
        ];
        for overlay in &cases {
            assert_eq!(
                l.check_with(&base, overlay),
                l.check(&applied(overlay)),
                "{overlay:?}"
            );
        }
    }
}
