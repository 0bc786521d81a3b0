//! Running a declared query ([`super::queries`]): its parameters bound and
//! typed ([`bind`]), then one DynamoDB `Query` paged to the end or to the
//! limit ([`run`]); the items as a table ([`render`]) or JSON ([`to_json`]).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::expr::Val;
use super::model::{suggest, FileModel, Value};
use super::queries::{Query, SkOp};
use crate::item::Item;
use crate::models::table::GsiProjection;

/// Why a query could not run. Usage errors (unknown query, parameters) come
/// before any request; `Request` is DynamoDB's answer.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("unknown query `{name}`{hint} (the model's queries: {known})")]
    Unknown {
        name: String,
        hint: String,
        known: String,
    },
    #[error("query `{query}`: missing parameter `{param}` ({ty}): give `{param}=VALUE`")]
    Missing {
        query: String,
        param: String,
        ty: String,
    },
    #[error("query `{query}`: unknown parameter `{param}`{hint} (its parameters: {known})")]
    UnknownParam {
        query: String,
        param: String,
        hint: String,
        known: String,
    },
    #[error("query `{query}`: parameter `{param}` given twice")]
    Twice { query: String, param: String },
    #[error("query `{query}`: `{arg}` is not `param=value`")]
    Syntax { query: String, arg: String },
    #[error("query `{query}`: parameter `{param}`: {reason}")]
    Invalid {
        query: String,
        param: String,
        reason: String,
    },
    #[error("query `{query}`: {what}: {reason}")]
    Eval {
        query: String,
        what: String,
        reason: String,
    },
    #[error("query `{query}` on table {table}: {reason}")]
    Request {
        query: String,
        table: String,
        reason: String,
    },
}

impl QueryError {
    /// Whether the caller asked for something the model does not say
    /// (exit 2), rather than the request failing.
    pub fn is_usage(&self) -> bool {
        !matches!(self, QueryError::Request { .. })
    }
}

/// A query with its parameters bound: what one request sends.
#[derive(Debug, Clone)]
pub struct Bound {
    pub query: String,
    pub index: Option<String>,
    pub key_condition: String,
    pub names: HashMap<String, String>,
    pub values: HashMap<String, AttributeValue>,
    pub filter: Option<String>,
    pub forward: bool,
    pub limit: Option<usize>,
}

/// `name=value` arguments split.
pub fn split_args(query: &str, args: &[String]) -> Result<Vec<(String, String)>, QueryError> {
    args.iter()
        .map(|a| {
            a.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.to_string()))
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| QueryError::Syntax {
                    query: query.to_string(),
                    arg: a.clone(),
                })
        })
        .collect()
}

/// The query called `name`, or an error naming the known ones.
pub fn find<'m>(m: &'m FileModel, name: &str) -> Result<&'m Query, QueryError> {
    m.queries
        .iter()
        .find(|q| q.name == name)
        .ok_or_else(|| QueryError::Unknown {
            name: name.to_string(),
            hint: suggest(name, m.queries.iter().map(|q| q.name.as_str())).unwrap_or_default(),
            known: if m.queries.is_empty() {
                "none".to_string()
            } else {
                m.queries
                    .iter()
                    .map(|q| q.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        })
}

fn to_attr(v: Val) -> AttributeValue {
    match v {
        Val::Str(s) => AttributeValue::S(s),
        Val::Int(i) => AttributeValue::N(i.to_string()),
        Val::Num(n) => AttributeValue::N(n.to_string()),
        Val::Bool(b) => AttributeValue::Bool(b),
        Val::Set(s) => AttributeValue::Ss(s),
        Val::List(l) => AttributeValue::L(l.into_iter().map(to_attr).collect()),
        Val::Map(_) | Val::Null => AttributeValue::Null(true),
    }
}

/// Longest prefix of a rejected parameter value a message shows.
const SHOWN_VALUE_CHARS: usize = 64;

/// Why the value `v` given for a parameter is refused: the value (a prefix
/// of a long one, with its size), then what its type allows.
fn rejected_value(v: &str, e: crate::item::AttrError) -> String {
    let shown = if v.chars().count() > SHOWN_VALUE_CHARS {
        let head: String = v.chars().take(SHOWN_VALUE_CHARS).collect();
        format!("`{head}…` ({} bytes)", v.len())
    } else {
        format!("`{v}`")
    };
    let why = match e {
        crate::item::AttrError::Invalid { reason, .. } => reason,
        other => other.to_string(),
    };
    format!("{shown} is {why}")
}

/// Binds `args` (`param`, `value`) to query `name` of `m`: every parameter
/// given once, typed as declared; the templates evaluated.
pub fn bind(m: &FileModel, name: &str, args: &[(String, String)]) -> Result<Bound, QueryError> {
    let q = find(m, name)?;
    let known = || {
        if q.params.is_empty() {
            "none".to_string()
        } else {
            q.signature()
        }
    };
    let mut vals: Vec<(String, Val)> = Vec::new();
    for (k, v) in args {
        let Some(p) = q.params.iter().find(|p| p.name == *k) else {
            return Err(QueryError::UnknownParam {
                query: q.name.clone(),
                param: k.clone(),
                hint: suggest(k, q.params.iter().map(|p| p.name.as_str())).unwrap_or_default(),
                known: known(),
            });
        };
        if vals.iter().any(|(n, _)| n == k) {
            return Err(QueryError::Twice {
                query: q.name.clone(),
                param: k.clone(),
            });
        }
        // `doc=` would key the request by the template's prefix alone
        // (`DOC#`), another request than the one asked for.
        if v.is_empty() {
            return Err(QueryError::Invalid {
                query: q.name.clone(),
                param: k.clone(),
                reason: format!("an empty value: give `{k}=VALUE` ({})", p.written),
            });
        }
        let val = super::rules::typed_str(k, v, Some(&p.ty)).map_err(|e| QueryError::Invalid {
            query: q.name.clone(),
            param: k.clone(),
            reason: rejected_value(v, e),
        })?;
        vals.push((k.clone(), val));
    }
    if let Some(p) = q
        .params
        .iter()
        .find(|p| !vals.iter().any(|(n, _)| *n == p.name))
    {
        return Err(QueryError::Missing {
            query: q.name.clone(),
            param: p.name.clone(),
            ty: p.written.clone(),
        });
    }
    let eval = |what: &str, v: &Value| -> Result<Val, QueryError> {
        let lookup = |n: &str| vals.iter().find(|(k, _)| k == n).map(|(_, v)| v);
        m.eval_value(v, lookup).map_err(|reason| QueryError::Eval {
            query: q.name.clone(),
            what: what.to_string(),
            reason,
        })
    };
    // Keys are strings (every key a model file writes is a template).
    let key_str = |what: &str, v: &Value| -> Result<AttributeValue, QueryError> {
        Ok(AttributeValue::S(eval(what, v)?.render()))
    };
    let mut names = HashMap::from([("#pk".to_string(), q.pk.0.to_string())]);
    let mut values = HashMap::from([(":pk".to_string(), key_str(q.pk.0, &q.pk.1)?)]);
    let mut key_condition = "#pk = :pk".to_string();
    if let Some((attr, op, operands)) = &q.sk {
        names.insert("#sk".into(), attr.to_string());
        for (i, v) in operands.iter().enumerate() {
            values.insert(format!(":sk{i}"), key_str(attr, v)?);
        }
        key_condition.push_str(" AND ");
        key_condition.push_str(op.condition());
        debug_assert!(*op != SkOp::Between || operands.len() == 2);
    }
    let filter = match &q.filter {
        None => None,
        Some(f) => {
            names.extend(f.names.iter().cloned());
            for p in &f.placeholders {
                let v = match vals.iter().find(|(k, _)| k == p) {
                    Some((_, v)) => v.clone(),
                    None => match q.values.iter().find(|(k, _)| k == p) {
                        Some((k, v)) => eval(k, v)?,
                        None => {
                            return Err(QueryError::Eval {
                                query: q.name.clone(),
                                what: format!(":{p}"),
                                reason: "unbound".into(),
                            })
                        }
                    },
                };
                values.insert(format!(":v_{p}"), to_attr(v));
            }
            Some(f.expression.clone())
        }
    };
    Ok(Bound {
        query: q.name.clone(),
        index: q.index.map(str::to_string),
        key_condition,
        names,
        values,
        filter,
        forward: !q.descending,
        limit: q.limit,
    })
}

/// What a query returned.
#[derive(Debug, Default)]
pub struct Outcome {
    pub items: Vec<Item>,
    /// Requests sent (pages read).
    pub pages: usize,
}

/// Runs a bound query on `table`, page after page (`page_size` items read
/// per request; default: DynamoDB's 1 MB pages) until the end or the limit.
pub async fn run(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    b: &Bound,
    page_size: Option<i32>,
) -> Result<Outcome, QueryError> {
    let mut out = Outcome::default();
    let mut start = None;
    loop {
        let page = client
            .query()
            .table_name(table)
            .set_index_name(b.index.clone())
            .key_condition_expression(&b.key_condition)
            .set_filter_expression(b.filter.clone())
            .set_expression_attribute_names(Some(b.names.clone()))
            .set_expression_attribute_values(Some(b.values.clone()))
            .scan_index_forward(b.forward)
            .set_limit(page_size)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|e| QueryError::Request {
                query: b.query.clone(),
                table: table.to_string(),
                reason: crate::error::sdk_cause(&e),
            })?;
        out.pages += 1;
        out.items.extend(page.items.unwrap_or_default());
        if let Some(l) = b.limit {
            if out.items.len() >= l {
                out.items.truncate(l);
                return Ok(out);
            }
        }
        start = page.last_evaluated_key;
        if start.is_none() {
            return Ok(out);
        }
    }
}

/// One attribute as a table cell.
pub fn cell(v: Option<&AttributeValue>) -> String {
    match v {
        None => "-".into(),
        Some(AttributeValue::S(s)) | Some(AttributeValue::N(s)) => s.clone(),
        Some(AttributeValue::Bool(b)) => b.to_string(),
        Some(AttributeValue::Ss(v)) | Some(AttributeValue::Ns(v)) => v.join(","),
        Some(AttributeValue::Null(_)) => "null".into(),
        Some(other) => serde_json::to_string(&json_of(other)).unwrap_or_else(|_| "?".into()),
    }
}

/// One attribute in a message: JSON (`"bob"`, `12`, `null`, `["a","b"]`),
/// or `absent`.
pub fn shown(v: Option<&AttributeValue>) -> String {
    v.map(|v| serde_json::to_string(&json_of(v)).unwrap_or_else(|_| "?".into()))
        .unwrap_or_else(|| "absent".into())
}

/// The columns of a query's items: the table's keys, the index's keys,
/// then the query's `attributes` (or every other attribute, sorted).
pub fn columns(m: &FileModel, q: &Query, items: &[Item]) -> Vec<String> {
    let mut cols: Vec<String> = vec![m.table.pk.to_string(), m.table.sk.to_string()];
    let (qpk, qsk) = q.key_names(&m.table);
    for k in std::iter::once(qpk).chain(qsk) {
        if !cols.iter().any(|c| c == k) {
            cols.push(k.to_string());
        }
    }
    if q.attributes.is_empty() {
        let mut rest: Vec<&String> = items
            .iter()
            .flat_map(|i| i.keys())
            .filter(|k| !cols.contains(k))
            .collect();
        rest.sort();
        rest.dedup();
        cols.extend(rest.into_iter().cloned());
    } else {
        cols.extend(q.attributes.iter().cloned());
    }
    cols
}

/// What a query's items lack when its index projects less than every
/// attribute: its items are the index's (DynamoDB returns what the index
/// carries, nothing is read from the table), so the answer says so.
/// `check-model` refuses a filter or `attributes` naming what the index
/// does not carry ([`super::query_projection`]). `None`: the table, or an
/// index projecting all.
pub fn projection_note(m: &FileModel, q: &Query) -> Option<String> {
    let g = q
        .index
        .and_then(|i| m.table.gsis.iter().find(|g| g.name == i))?;
    let carries = match &g.projection {
        GsiProjection::All => return None,
        GsiProjection::KeysOnly => "only the keys".to_string(),
        GsiProjection::Include(v) => format!("the keys and {}", v.join(", ")),
    };
    Some(format!(
        "(index {} projects {}: its items carry {carries}; read an item from the table for its other attributes)",
        g.name,
        g.projection.written()
    ))
}

/// The attributes of `expected` (a scenario's `expect:` of query `q`) that
/// the items of `q`'s index never carry, each with why: an expectation on
/// one could only fail, or (`null`, absent) pass whatever the table holds.
pub fn unprojected<'a>(
    m: &FileModel,
    q: &Query,
    expected: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let Some(g) = q
        .index
        .and_then(|i| m.table.gsis.iter().find(|g| g.name == i))
    else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for a in expected {
        let says = format!(
            "`{a}` is expected, but index {} projects {}: its items never carry it",
            g.name,
            g.projection.written()
        );
        if !g.carries(a, m.table.pk, m.table.sk) && !out.contains(&says) {
            out.push(says);
        }
    }
    out
}

/// The items as an aligned table.
pub fn render(m: &FileModel, q: &Query, items: &[Item]) -> String {
    let cols = columns(m, q, items);
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|i| cols.iter().map(|c| cell(i.get(c))).collect())
        .collect();
    let headers: Vec<&str> = cols.iter().map(String::as_str).collect();
    crate::report::render_table(&headers, &rows)
}

fn json_of(v: &AttributeValue) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        AttributeValue::S(s) => J::String(s.clone()),
        AttributeValue::N(n) => n
            .parse::<i64>()
            .map(J::from)
            .ok()
            .or_else(|| n.parse::<f64>().ok().map(J::from))
            .unwrap_or_else(|| J::String(n.clone())),
        AttributeValue::Bool(b) => J::Bool(*b),
        AttributeValue::Null(_) => J::Null,
        AttributeValue::Ss(v) | AttributeValue::Ns(v) => {
            J::Array(v.iter().cloned().map(J::String).collect())
        }
        AttributeValue::L(l) => J::Array(l.iter().map(json_of).collect()),
        AttributeValue::M(m) => J::Object(m.iter().map(|(k, v)| (k.clone(), json_of(v))).collect()),
        _ => J::Null,
    }
}

/// The items as plain JSON (an array of objects).
pub fn to_json(items: &[Item]) -> serde_json::Value {
    serde_json::Value::Array(
        items
            .iter()
            .map(|i| {
                serde_json::Value::Object(i.iter().map(|(k, v)| (k.clone(), json_of(v))).collect())
            })
            .collect(),
    )
}

/// The model's queries, one line each: name, parameters, about.
pub fn listing(m: &FileModel) -> Vec<String> {
    m.queries
        .iter()
        .map(|q| {
            let sig = q.signature();
            let on = match q
                .index
                .and_then(|i| m.table.gsis.iter().find(|g| g.name == i))
            {
                Some(g) if g.projection != GsiProjection::All => {
                    format!("index {}, projects {}", g.name, g.projection.written())
                }
                Some(g) => format!("index {}", g.name),
                None => "table".to_string(),
            };
            format!(
                "{}{}{}  [{on}{}]{}",
                q.name,
                if sig.is_empty() { "" } else { " " },
                sig,
                if q.descending { ", desc" } else { "" },
                q.about
                    .as_ref()
                    .map(|a| format!("  {a}"))
                    .unwrap_or_default()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODEL: &str = r#"
jobstream: 1
table: { name: tbl, pk: PK, sk: SK, gsis: [{ name: GSI1, pk: G1PK, sk: G1SK }] }
entities:
  emp:
    key: { PK: "ORG#${orgId}", SK: "EMP#${empId}" }
    attributes: { email: string, status: [active, inactive] }
    project:
      attributes: { G1PK: "EMAIL#${lower(email)}", G1SK: "EMP#${empId}" }
queries:
  by_email:
    index: GSI1
    params: { email: string }
    key: { G1PK: "EMAIL#${lower(email)}", G1SK: { begins_with: "EMP#" } }
  staff:
    params: { org: ulid, state: [active, inactive] }
    key: { PK: "ORG#${org}", SK: { between: ["EMP#0", "EMP#9"] } }
    filter: "status = :state"
    order: desc
    limit: 2
  above:
    params: { org: ulid }
    key: { PK: "ORG#${org}" }
    filter: "level > :min AND active = :on"
    values: { min: "${1000}", on: "${true}" }
"#;

    fn model() -> FileModel {
        crate::file::compile(MODEL, "t").unwrap_or_else(|p| panic!("{p:#?}"))
    }

    fn args(a: &[(&str, &str)]) -> Vec<(String, String)> {
        a.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn binding_evaluates_templates_and_types_parameters() {
        let m = model();
        let b = bind(&m, "by_email", &args(&[("email", "Bob@X.io")])).unwrap();
        assert_eq!(b.index.as_deref(), Some("GSI1"));
        assert_eq!(b.key_condition, "#pk = :pk AND begins_with(#sk, :sk0)");
        assert_eq!(b.values[":pk"], AttributeValue::S("EMAIL#bob@x.io".into()));
        assert_eq!(b.names["#pk"], "G1PK");
        let org = "01HXAA0000000000000000000A";
        let b = bind(&m, "staff", &args(&[("org", org), ("state", "active")])).unwrap();
        assert_eq!(b.key_condition, "#pk = :pk AND #sk BETWEEN :sk0 AND :sk1");
        assert_eq!(b.filter.as_deref(), Some("#f0 = :v_state"));
        assert_eq!(b.names["#f0"], "status");
        assert_eq!(b.values[":v_state"], AttributeValue::S("active".into()));
        assert!(!b.forward);
        assert_eq!(b.limit, Some(2));
    }

    /// `"${1000}"` in `values:` is the number, sent as one (a literal
    /// template would be the string "1000", which no number equals).
    #[test]
    fn a_values_entry_of_one_expression_keeps_its_type() {
        let m = model();
        let org = "01HXAA0000000000000000000A";
        let b = bind(&m, "above", &args(&[("org", org)])).unwrap();
        assert_eq!(b.values[":v_min"], AttributeValue::N("1000".into()));
        assert_eq!(b.values[":v_on"], AttributeValue::Bool(true));
    }

    #[test]
    fn usage_errors_are_structured() {
        let m = model();
        let e = bind(&m, "by_emial", &[]).unwrap_err();
        assert!(e.is_usage());
        assert!(e.to_string().contains("did you mean `by_email`"), "{e}");
        let e = bind(&m, "staff", &args(&[("org", "01HXAA0000000000000000000A")])).unwrap_err();
        assert!(
            matches!(e, QueryError::Missing { ref param, .. } if param == "state"),
            "{e}"
        );
        let e = bind(&m, "staff", &args(&[("org", "nope"), ("state", "active")])).unwrap_err();
        assert!(e.to_string().contains("not a ULID"), "{e}");
        let e = bind(
            &m,
            "staff",
            &args(&[("org", "01HXAA0000000000000000000A"), ("state", "gone")]),
        )
        .unwrap_err();
        assert!(matches!(e, QueryError::Invalid { .. }), "{e}");
        // User12 finding 9g: an empty value ran the query keyed by the
        // template's prefix.
        let e = bind(&m, "by_email", &args(&[("email", "")])).unwrap_err();
        assert!(matches!(e, QueryError::Invalid { .. }), "{e}");
        assert!(
            e.to_string().contains("an empty value: give `email=VALUE`"),
            "{e}"
        );
        let e = bind(&m, "by_email", &args(&[("emial", "a")])).unwrap_err();
        assert!(e.to_string().contains("did you mean `email`"), "{e}");
        assert!(split_args("q", &["novalue".to_string()]).is_err());
        assert_eq!(
            split_args("q", &["a=b=c".to_string()]).unwrap(),
            [("a".to_string(), "b=c".to_string())]
        );
    }

    /// A bad parameter says which value, what is allowed (the enum, the
    /// type, the format and its pattern), once: never "attribute `status`
    /// has an invalid value" (user8's finding), never more than a prefix of
    /// a long value.
    #[test]
    fn an_invalid_parameter_names_its_value_and_what_is_allowed() {
        let m = crate::file::compile(
            &MODEL.replace(
                "entities:",
                "formats:\n  code: { pattern: \"^[a-z]+$\", max_bytes: 8 }\nentities:",
            )
            .replace(
                "queries:",
                "queries:\n  probe:\n    params: { tag: code, since: iso-utc, n: int }\n    key: { PK: \"ORG#${tag}-${since}-${n}\" }",
            ),
            "t",
        )
        .unwrap_or_else(|p| panic!("{p:#?}"));
        let org = "01HXAA0000000000000000000A";
        let said = |query: &str, given: &[(&str, &str)]| {
            bind(&m, query, &args(given)).unwrap_err().to_string()
        };
        let base = [("tag", "ab"), ("since", "2026-01-01T00:00:00Z"), ("n", "1")];
        let with = |k: &str, v: &'static str| {
            let mut a: Vec<(&str, &str)> = base.to_vec();
            a.iter_mut().find(|(n, _)| *n == k).expect("a parameter").1 = v;
            said("probe", &a)
        };
        assert_eq!(
            said("staff", &[("org", org), ("state", "gone")]),
            "query `staff`: parameter `state`: `gone` is not one of active|inactive"
        );
        assert_eq!(
            said("staff", &[("org", "nope"), ("state", "active")]),
            "query `staff`: parameter `org`: `nope` is not a ULID (26 Crockford base32 characters)"
        );
        assert_eq!(
            with("tag", "A#1"),
            "query `probe`: parameter `tag`: `A#1` is not a `code` (does not match `^[a-z]+$`)"
        );
        assert_eq!(
            with("since", "yesterday"),
            "query `probe`: parameter `since`: `yesterday` is not an ISO-8601 UTC time (YYYY-MM-DDTHH:MM:SS[.f]Z)"
        );
        assert_eq!(
            with("n", "1.5"),
            "query `probe`: parameter `n`: `1.5` is not an integer"
        );
        let long = with(
            "tag",
            "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz",
        );
        assert!(
            long.starts_with("query `probe`: parameter `tag`: `abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijkl…` (78 bytes) is not a `code` (longer than 8 bytes: 78 bytes)"),
            "{long}"
        );
        for e in [
            with("tag", "A#1"),
            said("staff", &[("org", org), ("state", "gone")]),
        ] {
            assert!(!e.contains("attribute"), "{e}");
        }
    }

    #[test]
    fn an_expectation_on_what_the_index_does_not_carry_is_named() {
        let m = crate::file::compile(
            &MODEL.replace(
                "gsis: [{ name: GSI1, pk: G1PK, sk: G1SK }]",
                "gsis: [{ name: GSI1, pk: G1PK, sk: G1SK, project: keys }]",
            ),
            "t",
        )
        .unwrap_or_else(|p| panic!("{p:#?}"));
        let q = find(&m, "by_email").unwrap();
        assert_eq!(
            unprojected(&m, q, ["PK", "G1SK", "email", "email"]),
            ["`email` is expected, but index GSI1 projects keys: its items never carry it"]
        );
        let staff = find(&m, "staff").unwrap();
        assert!(
            unprojected(&m, staff, ["email"]).is_empty(),
            "the table carries all"
        );
    }

    #[test]
    fn listings_name_parameters() {
        let m = model();
        let l = listing(&m);
        assert_eq!(l[0], "by_email email=string  [index GSI1]");
        assert_eq!(l[1], "staff org=ulid state=active|inactive  [table, desc]");
    }
}
