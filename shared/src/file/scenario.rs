//! Scenario files for `jobstream demo --model-file` (SPEC §8): the writes an
//! application makes, in order, then the items expected once the processors
//! are done.
//!
//! ```yaml
//! writes:                       # applied in order, one request each
//!   - put: { PK: "ORG#1", SK: "#METADATA", name: Acme, seats: 3 }
//!   - delete: { PK: "ORG#1", SK: "EMP#2" }
//! expect:                       # these items exist with (at least) these attributes
//!   - { PK: "DEPT#1", SK: "EMP#2", orgId: "1", GSI1PK: null }   # null: absent
//! absent:                       # these keys do not exist
//!   - { PK: "DEPT#9", SK: "EMP#2" }
//! ```
//!
//! Values: a string is `S`, an integer or a decimal `N`, `true`/`false`
//! `BOOL`, `null` `NULL`, a list of strings `SS`, another list `L`, a
//! mapping `M`.

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Deserialize;

use crate::item::{display_key, key_of, Item};
use crate::models::{BoxError, Context as _, Harness};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default)]
    pub writes: Vec<Write>,
    #[serde(default)]
    pub expect: Vec<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    pub absent: Vec<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
pub enum Write {
    Put(serde_json::Map<String, serde_json::Value>),
    Delete(serde_json::Map<String, serde_json::Value>),
}

/// A YAML value as a DynamoDB attribute.
pub fn attr(v: &serde_json::Value) -> AttributeValue {
    use serde_json::Value as J;
    match v {
        J::String(s) => AttributeValue::S(s.clone()),
        J::Number(n) => AttributeValue::N(n.to_string()),
        J::Bool(b) => AttributeValue::Bool(*b),
        J::Null => AttributeValue::Null(true),
        J::Array(a) if !a.is_empty() && a.iter().all(|v| v.is_string()) => AttributeValue::Ss(
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
        ),
        J::Array(a) => AttributeValue::L(a.iter().map(attr).collect()),
        J::Object(m) => AttributeValue::M(item(m)),
    }
}

/// A YAML mapping as an item.
pub fn item(m: &serde_json::Map<String, serde_json::Value>) -> Item {
    m.iter().map(|(k, v)| (k.clone(), attr(v))).collect()
}

impl Scenario {
    /// Reads a scenario file; errors name the line and column.
    pub fn read(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_saphyr::from_str(&text).map_err(|e| {
            let (l, c) = e
                .location()
                .map(|l| (l.line(), l.column()))
                .unwrap_or((1, 1));
            let msg = e.without_snippet().to_string();
            format!(
                "{}:{l}:{c}: {}",
                path.display(),
                msg.lines().next().unwrap_or("invalid scenario")
            )
        })
    }
}

/// Plays the writes in order, drains every processor, then returns what
/// differs from `expect` and `absent`.
pub async fn play(
    h: &mut dyn Harness,
    s: &Scenario,
    key_names: &[&str],
) -> Result<Vec<String>, BoxError> {
    let table = h.table().to_string();
    for w in &s.writes {
        match w {
            Write::Put(m) => {
                h.dynamodb()
                    .put_item()
                    .table_name(&table)
                    .set_item(Some(item(m)))
                    .send()
                    .await
                    .context("scenario put")?;
            }
            Write::Delete(m) => {
                h.dynamodb()
                    .delete_item()
                    .table_name(&table)
                    .set_key(Some(key_of(&item(m), key_names)))
                    .send()
                    .await
                    .context("scenario delete")?;
            }
        }
    }
    h.drain().await?;
    let mut diffs = Vec::new();
    for want in s.expect.iter().map(item) {
        let key = key_of(&want, key_names);
        let got = h
            .dynamodb()
            .get_item()
            .table_name(&table)
            .set_key(Some(key.clone()))
            .consistent_read(true)
            .send()
            .await
            .context("scenario read")?
            .item;
        match got {
            None => diffs.push(format!("missing: {}", display_key(&key))),
            Some(got) => {
                for (a, v) in &want {
                    // `null` expects the attribute absent (a sparse index).
                    let absent = matches!(v, AttributeValue::Null(_)) && !got.contains_key(a);
                    if !absent && got.get(a) != Some(v) {
                        diffs.push(format!(
                            "{}: `{a}` is {:?}, expected {v:?}",
                            display_key(&key),
                            got.get(a)
                        ));
                    }
                }
            }
        }
    }
    for gone in s.absent.iter().map(item) {
        let key = key_of(&gone, key_names);
        let got = h
            .dynamodb()
            .get_item()
            .table_name(&table)
            .set_key(Some(key.clone()))
            .consistent_read(true)
            .send()
            .await
            .context("scenario read")?
            .item;
        if got.is_some() {
            diffs.push(format!("present, expected absent: {}", display_key(&key)));
        }
    }
    Ok(diffs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_values_map_to_attributes() {
        let s: Scenario = serde_saphyr::from_str(
            "writes:\n  - put: { PK: a, SK: b, n: 3, ok: true, tags: [a, b], gone: null }\n  - delete: { PK: a, SK: b }\nexpect:\n  - { PK: a, SK: c, count: 2 }\n",
        )
        .unwrap();
        assert_eq!(s.writes.len(), 2);
        let Write::Put(m) = &s.writes[0] else {
            panic!("a put")
        };
        let i = item(m);
        assert_eq!(i["n"], AttributeValue::N("3".into()));
        assert_eq!(i["ok"], AttributeValue::Bool(true));
        assert_eq!(i["tags"], AttributeValue::Ss(vec!["a".into(), "b".into()]));
        assert_eq!(i["gone"], AttributeValue::Null(true));
        assert_eq!(item(&s.expect[0])["count"], AttributeValue::N("2".into()));
    }

    #[test]
    fn unknown_write_kinds_are_errors() {
        assert!(serde_saphyr::from_str::<Scenario>("writes:\n  - upsert: { PK: a }\n").is_err());
    }
}
