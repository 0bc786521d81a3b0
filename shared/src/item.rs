//! Typed access to DynamoDB items (`HashMap<String, AttributeValue>`).
//!
//! Every getter names the attribute and the expected type in its error, so a
//! rule that meets bad input can say *what* was wrong *where* without ever
//! logging the item itself.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

/// One DynamoDB item, as the SDK represents it.
pub type Item = HashMap<String, AttributeValue>;

/// What was wrong with an attribute of an item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttrError {
    #[error("attribute `{0}` is missing")]
    Missing(String),
    #[error("attribute `{name}` has type {found}, expected {expected}")]
    WrongType {
        name: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error("attribute `{name}` has an invalid value: {reason}")]
    Invalid { name: String, reason: String },
    /// A value a key's template binds (`${name}`) that its format or its
    /// attribute's type refuses.
    #[error("key part `{name}` is `{value}`: {reason}")]
    KeyPart {
        name: String,
        value: String,
        reason: String,
    },
}

/// Two values equal as DynamoDB compares them: a set (`SS`, `NS`, `BS`)
/// keeps no order, so `["a", "b"]` and `["b", "a"]` are the same set (a
/// replay or another writer may rewrite one in either order).
pub fn same_value(a: &AttributeValue, b: &AttributeValue) -> bool {
    fn same_set<T: Ord + Clone>(a: &[T], b: &[T]) -> bool {
        let a: std::collections::BTreeSet<&T> = a.iter().collect();
        let b: std::collections::BTreeSet<&T> = b.iter().collect();
        a == b
    }
    fn same_numbers(a: &[String], b: &[String]) -> bool {
        let norm = |v: &[String]| -> std::collections::BTreeSet<String> {
            v.iter()
                .map(|n| {
                    n.parse::<f64>()
                        .map_or_else(|_| n.clone(), |f| f.to_string())
                })
                .collect()
        };
        norm(a) == norm(b)
    }
    match (a, b) {
        (AttributeValue::Ss(x), AttributeValue::Ss(y)) => same_set(x, y),
        (AttributeValue::Ns(x), AttributeValue::Ns(y)) => same_numbers(x, y),
        (AttributeValue::Bs(x), AttributeValue::Bs(y)) => {
            let x: Vec<&[u8]> = x.iter().map(|b| b.as_ref()).collect();
            let y: Vec<&[u8]> = y.iter().map(|b| b.as_ref()).collect();
            same_set(&x, &y)
        }
        (AttributeValue::L(x), AttributeValue::L(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_value(a, b))
        }
        (AttributeValue::M(x), AttributeValue::M(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        }
        _ => a == b,
    }
}

/// Whether `item`'s TTL attribute `ttl` (epoch seconds) is at or before
/// `now`: DynamoDB deletes it within days and nothing expects it any more.
pub fn expired(item: &Item, ttl: Option<&str>, now: chrono::DateTime<chrono::Utc>) -> bool {
    expired_at(item, ttl, now.timestamp())
}

/// [`expired`] at `now` epoch seconds.
pub fn expired_at(item: &Item, ttl: Option<&str>, now: i64) -> bool {
    ttl.is_some_and(|attr| item.opt_i64(attr).ok().flatten().is_some_and(|t| t <= now))
}

/// [`same_value`] of two optional values (both absent: the same).
pub fn same_opt(a: Option<&AttributeValue>, b: Option<&AttributeValue>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => same_value(a, b),
        (None, None) => true,
        _ => false,
    }
}

/// Two items with the same attributes, each [`same_value`].
pub fn same_items(a: &Item, b: &Item) -> bool {
    a.len() == b.len()
        && a.iter()
            .all(|(k, v)| b.get(k).is_some_and(|w| same_value(v, w)))
}

/// The DynamoDB type tag of a value (`S`, `N`, `BOOL`, ...), for error messages.
pub fn type_name(v: &AttributeValue) -> &'static str {
    match v {
        AttributeValue::S(_) => "S",
        AttributeValue::N(_) => "N",
        AttributeValue::Bool(_) => "BOOL",
        AttributeValue::Null(_) => "NULL",
        AttributeValue::M(_) => "M",
        AttributeValue::L(_) => "L",
        AttributeValue::Ss(_) => "SS",
        AttributeValue::Ns(_) => "NS",
        AttributeValue::B(_) => "B",
        AttributeValue::Bs(_) => "BS",
        _ => "unknown",
    }
}

fn wrong(name: &str, expected: &'static str, v: &AttributeValue) -> AttrError {
    AttrError::WrongType {
        name: name.to_string(),
        expected,
        found: type_name(v),
    }
}

/// An optional `N` attribute parsed as `T` (`reason`: why a value is not one).
fn opt_number<T: std::str::FromStr>(
    v: Option<&AttributeValue>,
    name: &str,
    reason: &str,
) -> Result<Option<T>, AttrError> {
    match v {
        None | Some(AttributeValue::Null(_)) => Ok(None),
        Some(AttributeValue::N(n)) => n.parse().map(Some).map_err(|_| AttrError::Invalid {
            name: name.to_string(),
            reason: reason.to_string(),
        }),
        Some(v) => Err(wrong(name, "N", v)),
    }
}

/// Typed getters over an item. `opt_*` treat an absent attribute and a
/// DynamoDB `NULL` alike (the seed's `String | null`).
pub trait ItemExt {
    fn attr(&self, name: &str) -> Option<&AttributeValue>;

    fn s(&self, name: &str) -> Result<&str, AttrError> {
        self.opt_s(name)?
            .ok_or_else(|| AttrError::Missing(name.to_string()))
    }

    fn opt_s(&self, name: &str) -> Result<Option<&str>, AttrError> {
        match self.attr(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::S(s)) => Ok(Some(s)),
            Some(v) => Err(wrong(name, "S", v)),
        }
    }

    fn opt_bool(&self, name: &str) -> Result<Option<bool>, AttrError> {
        match self.attr(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(wrong(name, "BOOL", v)),
        }
    }

    fn opt_i64(&self, name: &str) -> Result<Option<i64>, AttrError> {
        opt_number(self.attr(name), name, "not an integer")
    }

    /// A counter's sum: DynamoDB adds numbers of up to 38 digits, past
    /// what an i64 holds (sums of i64 contributions are i128).
    fn opt_i128(&self, name: &str) -> Result<Option<i128>, AttrError> {
        opt_number(self.attr(name), name, "not an integer of at most 38 digits")
    }

    fn i64(&self, name: &str) -> Result<i64, AttrError> {
        self.opt_i64(name)?
            .ok_or_else(|| AttrError::Missing(name.to_string()))
    }
}

impl ItemExt for Item {
    fn attr(&self, name: &str) -> Option<&AttributeValue> {
        self.get(name)
    }
}

/// `S` value.
pub fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

/// `N` value.
pub fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// The key attributes of `item` (for logs and writes), given the key names.
pub fn key_of(item: &Item, key_names: &[&str]) -> Item {
    key_names
        .iter()
        .filter_map(|k| item.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect()
}

/// Renders a key as `PK=APP#1, SK=APP#1` for logs: only key attributes, never
/// the item body.
pub fn display_key(key: &Item) -> String {
    let mut parts: Vec<String> = key
        .iter()
        .map(|(k, v)| match v {
            AttributeValue::S(s) => format!("{k}={s}"),
            AttributeValue::N(n) => format!("{k}={n}"),
            other => format!("{k}=<{}>", type_name(other)),
        })
        .collect();
    parts.sort();
    parts.join(", ")
}

/// Approximate DynamoDB size of an item in bytes (attribute names plus
/// values, as DynamoDB counts them), used to stay under the 400 KB item and
/// 4 MB transaction limits.
pub fn item_size(item: &Item) -> usize {
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

/// The bytes of one attribute value as [`item_size`] counts them.
pub fn value_size(v: &AttributeValue) -> usize {
    match v {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => n.len().div_ceil(2) + 1,
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::Ss(v) => v.iter().map(String::len).sum(),
        AttributeValue::Ns(v) => v.iter().map(|n| n.len().div_ceil(2) + 1).sum(),
        AttributeValue::Bs(v) => v.iter().map(|b| b.as_ref().len()).sum(),
        AttributeValue::L(l) => 3 + l.iter().map(|v| 1 + value_size(v)).sum::<usize>(),
        AttributeValue::M(m) => {
            3 + m
                .iter()
                .map(|(k, v)| 1 + k.len() + value_size(v))
                .sum::<usize>()
        }
        _ => 0,
    }
}

/// DynamoDB's maximum item size.
pub const MAX_ITEM_BYTES: usize = 400 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getters_name_attribute_and_type() {
        let item: Item = [("a".to_string(), n(3)), ("b".to_string(), s("x"))].into();
        assert_eq!(item.i64("a"), Ok(3));
        assert_eq!(
            item.s("a"),
            Err(AttrError::WrongType {
                name: "a".into(),
                expected: "S",
                found: "N"
            })
        );
        assert_eq!(item.s("zz"), Err(AttrError::Missing("zz".into())));
        assert_eq!(item.opt_s("zz"), Ok(None));
        assert_eq!(item.opt_s("b"), Ok(Some("x")));
    }

    #[test]
    fn null_counts_as_absent_for_optional_values() {
        let item: Item = [("a".to_string(), AttributeValue::Null(true))].into();
        assert_eq!(item.opt_s("a"), Ok(None));
        assert_eq!(item.opt_i64("a"), Ok(None));
        assert!(item.s("a").is_err());
    }

    #[test]
    fn display_key_is_sorted_and_shows_only_keys() {
        let key: Item = [("SK".to_string(), s("B")), ("PK".to_string(), s("A"))].into();
        assert_eq!(display_key(&key), "PK=A, SK=B");
    }

    #[test]
    fn size_grows_with_content() {
        let small: Item = [("a".to_string(), s("x"))].into();
        let big: Item = [("a".to_string(), s("x".repeat(1000)))].into();
        assert_eq!(item_size(&small), 2);
        assert_eq!(item_size(&big), 1001);
    }
}
