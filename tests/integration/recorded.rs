//! Outcomes recorded under `tests/fixtures/recorded/`: what the compiled
//! tracker and Pick'Em produced before they retired (SPEC §8.1), which their
//! files must still produce (the same table attribute for attribute, the same writes,
//! the same `verify` findings and repairs).
//!
//! `JOBSTREAM_RECORD=1 cargo test ...` writes the outcomes instead of
//! comparing them: re-record only for an intended change, and review the
//! diff.

use std::collections::BTreeMap;
use std::path::PathBuf;

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::Value;

fn path(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/recorded"))
        .join(format!("{name}.json"))
}

/// Whether this run records instead of comparing.
pub fn recording() -> bool {
    std::env::var_os("JOBSTREAM_RECORD").is_some()
}

/// An attribute value as JSON (`S` a string, `N` a number, maps and lists
/// as such; sets as lists).
pub fn attr_json(v: &AttributeValue) -> Value {
    match v {
        AttributeValue::S(s) => Value::String(s.clone()),
        AttributeValue::N(n) => serde_json::from_str(n).unwrap_or(Value::String(n.clone())),
        AttributeValue::Bool(b) => Value::Bool(*b),
        AttributeValue::Null(_) => Value::Null,
        AttributeValue::M(m) => Value::Object(
            m.iter()
                .collect::<BTreeMap<_, _>>()
                .into_iter()
                .map(|(k, v)| (k.clone(), attr_json(v)))
                .collect(),
        ),
        AttributeValue::L(l) => Value::Array(l.iter().map(attr_json).collect()),
        AttributeValue::Ss(l) => Value::Array(l.iter().cloned().map(Value::String).collect()),
        other => Value::String(format!("{other:?}")),
    }
}

/// A table by key (`PK SK`), each item's attributes as JSON.
pub fn table_json<M>(t: &BTreeMap<(String, String), M>) -> Value
where
    for<'a> &'a M: IntoIterator<Item = (&'a String, &'a AttributeValue)>,
{
    Value::Object(
        t.iter()
            .map(|((pk, sk), attrs)| {
                let item = attrs
                    .into_iter()
                    .map(|(k, v)| (k.clone(), attr_json(v)))
                    .collect();
                (format!("{pk} {sk}"), Value::Object(item))
            })
            .collect(),
    )
}

/// What was recorded as `name`.
pub fn recorded(name: &str) -> Value {
    let p = path(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).expect("recorded json")
}

/// Records `got` as `name` (when [`recording`]) or asserts it equals what
/// was recorded.
pub fn check(name: &str, got: &Value) {
    let p = path(name);
    if recording() {
        let text = serde_json::to_string_pretty(got).expect("json") + "\n";
        std::fs::write(&p, text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        return;
    }
    let want = recorded(name);
    if &want != got {
        if let (Value::Array(w), Value::Array(g)) = (&want, got) {
            for (i, (w, g)) in w.iter().zip(g).enumerate() {
                assert_eq!(g, w, "{name}: entry {i} differs from the recording");
            }
            assert_eq!(g.len(), w.len(), "{name}: entries recorded");
        }
        if let (Value::Object(w), Value::Object(g)) = (&want, got) {
            for (k, v) in w {
                assert_eq!(
                    g.get(k),
                    Some(v),
                    "{name}: `{k}` differs from the recording"
                );
            }
            for k in g.keys() {
                assert!(w.contains_key(k), "{name}: `{k}` was not recorded");
            }
        }
        assert_eq!(got, &want, "{name}: differs from {}", p.display());
    }
}
