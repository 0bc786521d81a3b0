//! Event filters: one Lambda filter pattern per [`EventFilter`], deployed
//! verbatim as a mapping's `FilterCriteria` (through `jobstream tables`) and
//! evaluated locally by [`EventFilter::matches`] with Lambda's matching rules
//! before a record reaches the handler.
//!
//! Matching (as Lambda's event filtering, for the operators it documents):
//! every field a pattern names must match (AND); an array in the pattern
//! lists alternatives (OR); a pattern object recurses into the record's
//! object; a record value that is an array matches if any element does. Leaf
//! rules: a literal (string, number compared numerically, boolean, `null`),
//! `{"prefix"}`, `{"suffix"}`, `{"equals-ignore-case"}`, `{"anything-but"}`
//! (a literal or a list of them; the field must exist), `{"exists"}`,
//! `{"numeric": [op, value, ...]}`. A field the record lacks matches only
//! `{"exists": false}`. Several filters on one mapping are alternatives: a
//! record passes if any matches; no filter = every record.

use serde::Serialize;
use serde_json::{json, Map, Value};

/// One Lambda event filter pattern (the JSON of one `FilterCriteria`
/// `Filters[].Pattern`).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(transparent)]
pub struct EventFilter(pub Value);

/// A condition on a string attribute of a record's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRule {
    Prefix(&'static str),
    Equals(&'static str),
}

impl KeyRule {
    fn rule(self) -> Value {
        match self {
            KeyRule::Prefix(p) => json!({ "prefix": p }),
            KeyRule::Equals(v) => json!(v),
        }
    }
}

impl EventFilter {
    /// Records whose string key attribute `attribute` matches any of `rules`.
    pub fn key(attribute: &str, rules: &[KeyRule]) -> Self {
        let rules: Vec<Value> = rules.iter().map(|r| r.rule()).collect();
        Self(json!({ "dynamodb": { "Keys": { attribute: { "S": rules } } } }))
    }

    /// INSERT records whose key attribute `attribute` starts with `prefix`
    /// and whose new image has the string `field` equal to `value`.
    pub fn insert_with(attribute: &str, prefix: &str, field: &str, value: &str) -> Self {
        Self(json!({
            "eventName": ["INSERT"],
            "dynamodb": {
                "Keys": { attribute: { "S": [{ "prefix": prefix }] } },
                "NewImage": { field: { "S": [value] } },
            }
        }))
    }

    /// Whether `record` (a stream record as Lambda's event JSON has it)
    /// matches this pattern.
    pub fn matches(&self, record: &Value) -> bool {
        match &self.0 {
            Value::Object(p) => object_matches(p, record),
            _ => false,
        }
    }
}

/// Whether `record` passes `filters` (any of them; none = every record).
pub fn passes(filters: &[EventFilter], record: &Value) -> bool {
    filters.is_empty() || filters.iter().any(|f| f.matches(record))
}

fn object_matches(pattern: &Map<String, Value>, value: &Value) -> bool {
    pattern.iter().all(|(k, p)| {
        let field = value.as_object().and_then(|o| o.get(k));
        match p {
            Value::Object(inner) => field.is_some_and(|f| object_matches(inner, f)),
            Value::Array(rules) => rules.iter().any(|r| leaf_matches(r, field)),
            _ => false,
        }
    })
}

/// One rule of a leaf against a field (absent = `None`).
fn leaf_matches(rule: &Value, field: Option<&Value>) -> bool {
    if let Value::Object(op) = rule {
        if let Some(Value::Bool(want)) = op.get("exists") {
            return field.is_some() == *want;
        }
    }
    let Some(field) = field else {
        return false;
    };
    match field {
        Value::Array(items) => items.iter().any(|v| scalar_matches(rule, v)),
        v => scalar_matches(rule, v),
    }
}

fn scalar_matches(rule: &Value, v: &Value) -> bool {
    match rule {
        Value::Object(op) => {
            let Some((name, arg)) = op.iter().next() else {
                return false;
            };
            match (name.as_str(), arg, v) {
                ("prefix", Value::String(p), Value::String(s)) => s.starts_with(p.as_str()),
                ("suffix", Value::String(p), Value::String(s)) => s.ends_with(p.as_str()),
                ("equals-ignore-case", Value::String(p), Value::String(s)) => {
                    s.to_lowercase() == p.to_lowercase()
                }
                ("anything-but", Value::Array(xs), v) => !xs.iter().any(|x| literal_eq(x, v)),
                ("anything-but", x, v) => !literal_eq(x, v),
                ("numeric", Value::Array(ops), v) => numeric(ops, v),
                _ => false,
            }
        }
        literal => literal_eq(literal, v),
    }
}

fn literal_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn numeric(ops: &[Value], v: &Value) -> bool {
    let Some(x) = v.as_f64() else {
        return false;
    };
    ops.chunks(2).all(|c| match c {
        [Value::String(op), Value::Number(n)] => {
            let n = n.as_f64().unwrap_or(f64::NAN);
            match op.as_str() {
                "=" => x == n,
                "<" => x < n,
                "<=" => x <= n,
                ">" => x > n,
                ">=" => x >= n,
                _ => false,
            }
        }
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(event: &str, sk: &str, new: Value) -> Value {
        json!({"eventName": event, "dynamodb": {"Keys": {"PK": {"S": "P"}, "SK": {"S": sk}}, "NewImage": new}})
    }

    #[test]
    fn key_rules_are_alternatives_on_the_sort_key() {
        let f = EventFilter::key("SK", &[KeyRule::Prefix("APP#"), KeyRule::Equals("COUNT")]);
        assert_eq!(
            f.0,
            json!({"dynamodb": {"Keys": {"SK": {"S": [{"prefix": "APP#"}, "COUNT"]}}}})
        );
        assert!(f.matches(&record("INSERT", "APP#1", json!({}))));
        assert!(f.matches(&record("REMOVE", "COUNT", json!({}))));
        assert!(!f.matches(&record("INSERT", "COUNTS", json!({}))));
        assert!(!f.matches(&record("INSERT", "HIST#1", json!({}))));
        assert!(
            !f.matches(&json!({"dynamodb": {"Keys": {"PK": {"S": "P"}}}})),
            "a missing field does not match"
        );
        assert!(
            !f.matches(&json!({"dynamodb": {"Keys": {"SK": {"N": "1"}}}})),
            "another type does not match"
        );
    }

    #[test]
    fn fields_are_and_ed_and_filters_or_ed() {
        let adoption = EventFilter::insert_with("SK", "HIST#", "description", "Imported");
        let entry =
            |event, d: &str| record(event, "HIST#00000001", json!({"description": {"S": d}}));
        assert!(adoption.matches(&entry("INSERT", "Imported")));
        assert!(!adoption.matches(&entry("MODIFY", "Imported")));
        assert!(!adoption.matches(&entry("INSERT", "Updated Notes")));
        assert!(!adoption.matches(&record("INSERT", "HIST#1", json!({}))));
        let keys = EventFilter::key("SK", &[KeyRule::Prefix("APP#")]);
        let both = [keys, adoption];
        assert!(passes(&both, &entry("INSERT", "Imported")));
        assert!(passes(&both, &record("MODIFY", "APP#9", json!({}))));
        assert!(!passes(&both, &entry("INSERT", "Created")));
        assert!(
            passes(&[], &entry("INSERT", "Created")),
            "no filter: every record"
        );
    }

    #[test]
    fn lambda_operators() {
        let r = json!({"a": "Hello", "n": 5, "arr": ["x", "y"], "z": null});
        let m = |p: Value| EventFilter(p).matches(&r);
        assert!(m(json!({"a": [{"suffix": "llo"}]})));
        assert!(m(json!({"a": [{"equals-ignore-case": "hello"}]})));
        assert!(m(json!({"a": [{"anything-but": ["x", "y"]}]})));
        assert!(!m(json!({"a": [{"anything-but": "Hello"}]})));
        assert!(!m(json!({"missing": [{"anything-but": "Hello"}]})));
        assert!(m(json!({"missing": [{"exists": false}]})));
        assert!(!m(json!({"a": [{"exists": false}]})));
        assert!(m(json!({"n": [{"numeric": [">", 1, "<=", 5]}]})));
        assert!(!m(json!({"n": [{"numeric": [">", 5]}]})));
        assert!(m(json!({"n": [5.0]})), "numbers compare numerically");
        assert!(m(json!({"arr": ["y"]})), "any element of an array");
        assert!(m(json!({"z": [null]})));
        assert!(
            !m(json!({"a": {"nested": ["x"]}})),
            "an object pattern needs an object"
        );
    }
}
