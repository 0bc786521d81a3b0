//! The ledger table: idempotency markers and processor state.
//!
//! No stream, TTL attribute `ttl`, keys `pk`/`sk`. A marker is written in the
//! same TransactWriteItems as the effect it guards, with
//! `attribute_not_exists(pk)`, so a redelivered record fails the marker's
//! condition instead of applying its effect twice. Markers outlive the
//! stream's 24 h retention.

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use chrono::{DateTime, Utc};

use crate::item::{n, s, Item};

pub const PK: &str = "pk";
pub const SK: &str = "sk";
pub const TTL: &str = "ttl";

/// How long a marker is kept: past the stream's 24 h retention and Lambda's
/// longest retry window for a record.
pub const MARKER_TTL_SECS: i64 = 48 * 3600;

/// Key of the marker of `event_id` for `processor`.
pub fn marker_key(processor: &str, event_id: &str) -> Item {
    [
        (
            PK.to_string(),
            s(bounded_pk(&format!("MARK#{processor}#"), event_id)),
        ),
        (SK.to_string(), s("MARK")),
    ]
    .into()
}

/// The transaction action that puts a marker, failing if it already exists.
pub fn marker_put(
    ledger_table: &str,
    processor: &str,
    event_id: &str,
    now: DateTime<Utc>,
) -> TransactWriteItem {
    let mut item = marker_key(processor, event_id);
    item.insert(TTL.to_string(), n(now.timestamp() + MARKER_TTL_SECS));
    crate::tx::put_of(
        Put::builder()
            .table_name(ledger_table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)"),
    )
}

/// `pk` of a fold processor's state for one aggregate.
pub fn state_pk(processor: &str, aggregate: &str) -> String {
    bounded_pk(&format!("STATE#{processor}#"), aggregate)
}

/// Bytes a ledger partition key may take: DynamoDB's partition key limit.
pub const MAX_PK_BYTES: usize = crate::limits::MAX_PARTITION_KEY_BYTES;

/// The tag of a hashed id in [`bounded_pk`].
const HASHED: &str = "~sha256:";

/// The ledger partition key `<prefix><id>`, within DynamoDB's 2048 bytes
/// for every legal table key (whose [`item_id`] alone may take ~3,100):
/// the id itself when the whole fits, else `~sha256:` and the SHA-256 of
/// the id in lower-case hex. The hashed form holds no `=`, which the
/// [`item_id`] of every key holds, so an id and a hash never meet, and an
/// id that fits is never hashed (short keys keep their readable records).
///
/// A data format, not a log format: changing it orphans every record keyed
/// by it; the tests pin it.
pub fn bounded_pk(prefix: &str, id: &str) -> String {
    bounded(prefix, id, MAX_PK_BYTES)
}

/// Bytes a ledger sort key may take: DynamoDB's sort key limit.
pub const MAX_SK_BYTES: usize = crate::limits::MAX_SORT_KEY_BYTES;

/// The attribute holding the value a [`bounded_sk`] hashed.
pub const HASHED_VALUE: &str = "v";

/// The ledger sort key of `value`, within DynamoDB's 1,024 bytes for every
/// value: the value itself when it fits, else `~sha256:` and the SHA-256 of
/// the value in lower-case hex (the item then keeps the value in
/// [`HASHED_VALUE`]; [`sk_value`] reads either back). A value that fits is
/// never hashed. A data format (the tests pin it), as [`bounded_pk`].
pub fn bounded_sk(value: &str) -> String {
    bounded("", value, MAX_SK_BYTES)
}

/// The ledger sort key `<prefix><value>`, bounded like [`bounded_sk`]
/// (`<prefix>~sha256:<hex>` where the whole would not fit).
pub fn bounded_sk_with(prefix: &str, value: &str) -> String {
    bounded(prefix, value, MAX_SK_BYTES)
}

/// Whether [`bounded_sk`] hashes `value`.
pub fn sk_is_hashed(value: &str) -> bool {
    value.len() > MAX_SK_BYTES
}

/// The value a ledger item's sort key stands for: [`HASHED_VALUE`] where
/// [`bounded_sk`] hashed it, else the sort key.
pub fn sk_value(item: &Item) -> Option<&str> {
    as_s(item.get(HASHED_VALUE)).or_else(|| as_s(item.get(SK)))
}

fn bounded(prefix: &str, id: &str, max: usize) -> String {
    use sha2::Digest as _;
    if prefix.len() + id.len() <= max {
        return format!("{prefix}{id}");
    }
    let digest = sha2::Sha256::digest(id.as_bytes());
    let mut out = String::with_capacity(prefix.len() + HASHED.len() + 64);
    out.push_str(prefix);
    out.push_str(HASHED);
    for byte in digest.as_slice() {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

pub fn key(pk: impl Into<String>, sk: impl Into<String>) -> Item {
    [(PK.to_string(), s(pk)), (SK.to_string(), s(sk))].into()
}

/// A stable, unambiguous identifier of an item key, used inside ledger keys.
///
/// This is a data format, not a log format: key attributes sorted by name,
/// each written `name=T:value` (T the DynamoDB type tag: `S`, `N`, `B` as
/// lower-case hex), joined by `|`, with `\`, `|` and `=` escaped by `\`.
/// Changing it orphans every record keyed by it; the tests pin it.
pub fn item_id(key: &Item) -> String {
    fn escape(out: &mut String, raw: &str) {
        for ch in raw.chars() {
            if matches!(ch, '\\' | '|' | '=') {
                out.push('\\');
            }
            out.push(ch);
        }
    }
    let mut names: Vec<&String> = key.keys().collect();
    names.sort();
    let mut out = String::new();
    for (i, name) in names.into_iter().enumerate() {
        if i > 0 {
            out.push('|');
        }
        escape(&mut out, name);
        out.push('=');
        match &key[name] {
            AttributeValue::S(v) => {
                out.push_str("S:");
                escape(&mut out, v);
            }
            AttributeValue::N(v) => {
                out.push_str("N:");
                escape(&mut out, v);
            }
            AttributeValue::B(b) => {
                out.push_str("B:");
                for byte in b.as_ref() {
                    out.push_str(&format!("{byte:02x}"));
                }
            }
            other => {
                out.push_str(crate::item::type_name(other));
                out.push_str(":?");
            }
        }
    }
    out
}

/// The key an [`item_id`] was made of (string and number attributes), or
/// `None` when `id` is no such id (e.g. a [`bounded_pk`] hash): `verify`
/// reads the counter key of ledger totals no record refers to any more.
pub fn parse_item_id(id: &str) -> Option<Item> {
    // Unescaped parts: `|` separates attributes, the first `=` a name.
    let mut attrs = vec![(String::new(), None::<String>)];
    let mut chars = id.chars();
    while let Some(ch) = chars.next() {
        let (name, value) = attrs.last_mut()?;
        match (ch, value) {
            ('|', _) => attrs.push((String::new(), None)),
            ('=', value @ None) => *value = Some(String::new()),
            ('\\', Some(v)) => v.push(chars.next()?),
            ('\\', None) => name.push(chars.next()?),
            (_, Some(v)) => v.push(ch),
            (_, None) => name.push(ch),
        }
    }
    let mut key = Item::new();
    for (name, value) in attrs {
        let value = value?;
        let v = if let Some(v) = value.strip_prefix("S:") {
            AttributeValue::S(v.to_string())
        } else {
            AttributeValue::N(value.strip_prefix("N:")?.to_string())
        };
        if name.is_empty() || key.insert(name, v).is_some() {
            return None;
        }
    }
    Some(key)
}

pub fn as_s(v: Option<&AttributeValue>) -> Option<&str> {
    match v {
        Some(AttributeValue::S(s)) => Some(s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ledger_sort_keys_are_bounded_and_read_back() {
        let fits = "s".repeat(MAX_SK_BYTES);
        assert_eq!(bounded_sk(&fits), fits);
        assert!(!sk_is_hashed(&fits));
        let long = format!("{fits}s");
        assert!(sk_is_hashed(&long));
        let sk = bounded_sk(&long);
        // A data format: pinned.
        assert_eq!(
            sk,
            "~sha256:60eda4dab336177a3eebfb74e9fc4429a1079ebd302bc4f00d7b6a3f2e7cd05e"
        );
        assert_eq!(bounded_sk(&long), sk, "stable");
        assert_ne!(bounded_sk(&format!("{long}s")), sk);
        let mut item = key("IDX#i", sk);
        assert_eq!(
            sk_value(&item),
            item.get(SK).and_then(|v| v.as_s().ok()).map(String::as_str)
        );
        item.insert(HASHED_VALUE.into(), s(&long));
        assert_eq!(sk_value(&item), Some(long.as_str()));
    }

    #[test]
    fn once_markers_are_bounded_for_maximal_once_keys() {
        use crate::engine::once::marker_key as once_key;
        let short = once_key("matches", "201#101");
        assert_eq!(as_s(short.get(PK)), Some("ONCE#matches#201#101"));
        let longest = "k".repeat(MAX_PK_BYTES + crate::limits::MAX_SORT_KEY_BYTES);
        let m = once_key("matches", &longest);
        let pk = as_s(m.get(PK)).unwrap();
        assert!(pk.len() <= MAX_PK_BYTES && pk.starts_with("ONCE#matches#~sha256:"));
        assert_eq!(once_key("matches", &longest), m, "stable");
    }

    #[test]
    fn an_item_id_reads_back_as_its_key() {
        let keys: Vec<Item> = vec![
            [
                ("PK".to_string(), s("M#m1")),
                ("SK".to_string(), s("COUNT")),
            ]
            .into(),
            [
                ("pk".to_string(), s(r"a|b=c\d")),
                ("n|=\\".to_string(), n(-12.5)),
            ]
            .into(),
            [("PK".to_string(), s(""))].into(),
        ];
        for key in keys {
            assert_eq!(parse_item_id(&item_id(&key)), Some(key.clone()), "{key:?}");
        }
        // A hashed id (see bounded_pk) and what no key makes.
        let long = "x".repeat(MAX_PK_BYTES);
        let hashed = bounded_pk("TOTAL#derive#", &long);
        let hashed = hashed.strip_prefix("TOTAL#derive#").unwrap();
        assert_eq!(parse_item_id(hashed), None);
        for bad in ["", "PK", "PK=X:1", "PK=S:a|PK=S:b", "=S:a"] {
            assert_eq!(parse_item_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn marker_has_ttl_past_stream_retention_and_a_not_exists_guard() {
        let now = DateTime::from_timestamp(1_000_000, 0).unwrap();
        let put = marker_put("ledger", "derive", "ev-1", now);
        let p = put.put().unwrap();
        assert_eq!(p.condition_expression(), Some("attribute_not_exists(pk)"));
        let item = p.item();
        assert_eq!(item.len(), 3);
        assert_eq!(item["pk"], s("MARK#derive#ev-1"));
        assert_eq!(item["ttl"], n(1_000_000 + 48 * 3600));
    }

    #[test]
    fn ledger_keys_of_a_maximal_legal_key_stay_within_the_limit_and_are_pinned() {
        // The longest legal table key: a 2048-byte partition key and a
        // 1024-byte sort key, each worst-case for escaping.
        let key: Item = [
            ("PK".to_string(), s("|".repeat(2048))),
            ("SK".to_string(), s("=".repeat(1024))),
        ]
        .into();
        let id = item_id(&key);
        assert_eq!(id.len(), 2 * 3072 + "PK=S:|SK=S:".len());
        let pk = bounded_pk("SRC#derive#", &id);
        assert!(pk.len() <= MAX_PK_BYTES, "{}", pk.len());
        assert_eq!(
            pk,
            "SRC#derive#~sha256:492e42c3140f42676ff2cf6dfd13e6a4291071cb37de6f51a11cf49b0362d46d"
        );
        assert_eq!(bounded_pk("SRC#derive#", &id), pk, "stable");
        // A different long key, a different hash.
        let other: Item = [
            ("PK".to_string(), s("|".repeat(2048))),
            ("SK".to_string(), s("=".repeat(1023))),
        ]
        .into();
        assert_ne!(bounded_pk("SRC#derive#", &item_id(&other)), pk);
        // What fits is the id itself, up to exactly the limit.
        assert_eq!(bounded_pk("SRC#derive#", "PK=S:a"), "SRC#derive#PK=S:a");
        let fits = "x".repeat(MAX_PK_BYTES - 4);
        assert_eq!(bounded_pk("TOT#", &fits), format!("TOT#{fits}"));
        assert!(bounded_pk("TOT#", &format!("{fits}x")).starts_with("TOT#~sha256:"));
        // Markers and fold state are bounded the same way.
        let m = marker_key("derive", &format!("backfill:{id}"));
        assert!(as_s(m.get(PK)).unwrap().len() <= MAX_PK_BYTES);
        assert!(state_pk("history", &"a".repeat(3000)).len() <= MAX_PK_BYTES);
    }

    #[test]
    fn item_ids_are_a_pinned_unambiguous_format() {
        let k = |pairs: &[(&str, AttributeValue)]| -> Item {
            pairs
                .iter()
                .map(|(a, v)| (a.to_string(), v.clone()))
                .collect()
        };
        assert_eq!(
            item_id(&k(&[("SK", s("B")), ("PK", s("A#1"))])),
            "PK=S:A#1|SK=S:B"
        );
        // Separators inside values cannot make two keys collide.
        let a = item_id(&k(&[("PK", s("a|SK=S:b"))]));
        let b = item_id(&k(&[("PK", s("a")), ("SK", s("b"))]));
        assert_ne!(a, b);
        assert_eq!(a, "PK=S:a\\|SK\\=S:b");
        // Types are part of the id; binary keys are hex, not lossy.
        assert_ne!(item_id(&k(&[("PK", n(1))])), item_id(&k(&[("PK", s("1"))])));
        let bin = |v: &[u8]| AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(v.to_vec()));
        assert_eq!(item_id(&k(&[("PK", bin(&[0, 255]))])), "PK=B:00ff");
        assert_ne!(
            item_id(&k(&[("PK", bin(&[1]))])),
            item_id(&k(&[("PK", bin(&[2]))]))
        );
    }
}
