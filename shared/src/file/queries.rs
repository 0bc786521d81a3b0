//! Access patterns declared in a model file (`queries:`, SPEC §8): each a
//! key condition on the table or one of its indexes (never a scan), from
//! typed parameters, with an optional filter, an order and a limit.
//!
//! ```yaml
//! queries:
//!   employees_by_email:
//!     about: "AP4: employees by email, any case"
//!     index: GSI1                      # default: the table
//!     params: { email: string }        # name -> type (as attributes)
//!     key:
//!       GSI1PK: "EMAIL#${lower(email)}"          # partition key: equality
//!       GSI1SK: { begins_with: "EMP#" }          # =, begins_with, between, <, <=, >, >=
//!     filter: "attribute_not_exists(belongsto) OR belongsto = :u"
//!     values: { u: "USER#${user}" }    # filter placeholders computed from params
//!     order: desc                      # asc (default) or desc: by the sort key
//!     limit: 20
//!     attributes: [empId, email]       # the columns printed (default: all)
//! ```
//!
//! Key templates are value templates: `${...}` holds a CEL expression over
//! the parameters. The filter is a DynamoDB filter expression (evaluated by
//! DynamoDB after the key condition, before the items are returned): its
//! attribute names are written plainly (aliased for reserved words such as
//! `status` when run) and its values are `:name` placeholders, each a
//! parameter or a `values:` entry. [`super::query_run`] runs them.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::model::at;
use super::model::{suggest, Entity, Problem, Ty, Value, TYPE_NAMES};
pub use super::query_filter::{parse_filter, Filter};
use super::raw::{AttrSpec, Ordered, Scalar, Spanned};
use super::template::{is_ident, split, Binder, KeyTemplate, Part};
use super::typecheck::{checked, Enums, Readable, T};
use crate::models::table::TableDef;

/// One query as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawQuery {
    pub about: Option<String>,
    /// A GSI of the table; absent: the table itself.
    pub index: Option<Spanned<String>>,
    /// Parameter -> type (`string`, `int`, `bool`, `ulid`, `iso-utc`, or a
    /// list of allowed values).
    #[serde(default)]
    pub params: Ordered<Spanned<AttrSpec>>,
    /// Key attribute of the index -> condition.
    pub key: Spanned<Ordered<Spanned<RawCond>>>,
    pub filter: Option<Spanned<String>>,
    /// Filter placeholders computed from the parameters (templates).
    #[serde(default)]
    pub values: Ordered<Spanned<Scalar>>,
    /// `asc` (default) or `desc`.
    pub order: Option<Spanned<String>>,
    pub limit: Option<Spanned<i64>>,
    pub attributes: Option<Spanned<Vec<Spanned<String>>>>,
}

/// A key condition as written: a scalar (equality) or `{ op: operand }`
/// (`between` takes a list of two).
#[derive(Debug)]
pub struct RawCond {
    pub op: Option<String>,
    pub args: Vec<Scalar>,
}

impl<'de> Deserialize<'de> for RawCond {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Operand(Vec<Scalar>);
        impl<'de> Deserialize<'de> for Operand {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = Operand;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str("a template or a list of two (`between`)")
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<Operand, E> {
                        Ok(Operand(vec![Scalar(v.to_string())]))
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Operand, E> {
                        Ok(Operand(vec![Scalar(v.to_string())]))
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Operand, E> {
                        Ok(Operand(vec![Scalar(v.to_string())]))
                    }
                    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Operand, A::Error> {
                        Vec::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(Operand)
                    }
                }
                d.deserialize_any(V)
            }
        }
        struct Vis;
        impl<'de> Visitor<'de> for Vis {
            type Value = RawCond;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a template (equality) or `{ begins_with: template }` (one of =, begins_with, between, <, <=, >, >=)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawCond, E> {
                Ok(RawCond {
                    op: None,
                    args: vec![Scalar(v.to_string())],
                })
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawCond, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawCond, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawCond, A::Error> {
                let Some((op, Operand(args))) = map.next_entry::<String, Operand>()? else {
                    return Err(de::Error::custom(
                        "an empty condition: `{ begins_with: \"EMP#\" }`",
                    ));
                };
                if map.next_key::<String>()?.is_some() {
                    return Err(de::Error::custom(
                        "one operator per key condition (a range is `between: [low, high]`)",
                    ));
                }
                Ok(RawCond { op: Some(op), args })
            }
        }
        d.deserialize_any(Vis)
    }
}

/// A sort key operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkOp {
    Eq,
    BeginsWith,
    Between,
    Lt,
    Le,
    Gt,
    Ge,
}

pub const SK_OPS: &[&str] = &["=", "begins_with", "between", "<", "<=", ">", ">="];

impl SkOp {
    fn named(s: &str) -> Option<SkOp> {
        Some(match s {
            "=" => SkOp::Eq,
            "begins_with" => SkOp::BeginsWith,
            "between" => SkOp::Between,
            "<" => SkOp::Lt,
            "<=" => SkOp::Le,
            ">" => SkOp::Gt,
            ">=" => SkOp::Ge,
            _ => return None,
        })
    }

    /// The key condition for `#sk` with operands `:sk0` (and `:sk1`).
    pub fn condition(self) -> &'static str {
        match self {
            SkOp::Eq => "#sk = :sk0",
            SkOp::BeginsWith => "begins_with(#sk, :sk0)",
            SkOp::Between => "#sk BETWEEN :sk0 AND :sk1",
            SkOp::Lt => "#sk < :sk0",
            SkOp::Le => "#sk <= :sk0",
            SkOp::Gt => "#sk > :sk0",
            SkOp::Ge => "#sk >= :sk0",
        }
    }
}

/// A parameter and its type.
#[derive(Debug)]
pub struct Param {
    pub name: String,
    pub ty: Ty,
    /// The type as written (for listings).
    pub written: String,
}

/// A compiled query.
#[derive(Debug)]
pub struct Query {
    pub name: String,
    pub about: Option<String>,
    /// The GSI queried; `None`: the table.
    pub index: Option<&'static str>,
    pub params: Vec<Param>,
    /// The partition key attribute and its value.
    pub pk: (&'static str, Value),
    /// The sort key attribute, its operator and operands.
    pub sk: Option<(&'static str, SkOp, Vec<Value>)>,
    pub filter: Option<Filter>,
    pub values: Vec<(String, Value)>,
    pub descending: bool,
    pub limit: Option<usize>,
    /// The attributes printed after the keys (empty: all of them).
    pub attributes: Vec<String>,
}

impl Query {
    /// The key attributes of what it queries: its partition key, and its
    /// sort key unless it is an index keyed by its partition key alone.
    pub fn key_names(&self, table: &TableDef) -> (&'static str, Option<&'static str>) {
        match self
            .index
            .and_then(|i| table.gsis.iter().find(|g| g.name == i))
        {
            Some(g) => (g.pk, g.sk),
            None => (table.pk, Some(table.sk)),
        }
    }

    /// `name type, ...` for listings.
    pub fn signature(&self) -> String {
        self.params
            .iter()
            .map(|p| format!("{}={}", p.name, p.written))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

struct Checker<'a> {
    source: &'a str,
    problems: &'a mut Vec<Problem>,
    /// Named formats (`formats:`): a parameter may be of one.
    formats: &'a [&'static super::formats::Format],
}

impl Checker<'_> {
    fn err(&mut self, pos: (u64, u64), msg: impl Into<String>) {
        self.problems.push(Problem::new(pos.0, pos.1, msg));
    }

    /// Position of the character `offset` inside the scalar at `pos`.
    fn inner(&self, pos: (u64, u64), offset: usize) -> (u64, u64) {
        super::model::inner(self.source, pos, offset)
    }

    /// A template over the parameters; records the names it reads.
    fn template(
        &mut self,
        q: &str,
        text: &str,
        pos: (u64, u64),
        params: &[Param],
        used: &mut Vec<String>,
    ) -> Option<Value> {
        let parts = match split(text) {
            Ok(p) => p,
            Err((off, msg)) => {
                let p = self.inner(pos, off);
                self.err(p, format!("query `{q}`: {msg}"));
                return None;
            }
        };
        let mut out = Vec::new();
        let mut ok = true;
        for part in parts {
            match part {
                Part::Lit(l) => out.push(Part::Lit(l)),
                Part::Hole(src, off) => {
                    let reads = Readable {
                        names: (params.iter())
                            .map(|p| (p.name.as_str(), T::of(Some(&p.ty))))
                            .collect(),
                        says: "a query's templates read its `params`",
                        enums: Enums::of(params.iter().map(|p| (p.name.as_str(), &p.ty))),
                    };
                    match checked(&src, &reads, None) {
                        Err(flaws) => {
                            for f in flaws {
                                let p = self.inner(pos, off + f.offset);
                                self.err(p, format!("query `{q}`: {}", f.message));
                            }
                            ok = false;
                        }
                        Ok(x) => {
                            used.extend(x.variables.iter().cloned());
                            out.push(Part::Hole(x, off));
                        }
                    }
                }
            }
        }
        ok.then_some(Value(out))
    }

    fn params(&mut self, q: &str, raw: &Ordered<Spanned<AttrSpec>>) -> Vec<Param> {
        let mut out = Vec::new();
        for (n, spec) in &raw.0 {
            let (ty, written) = match &spec.value {
                AttrSpec::Named(t) => match super::formats::named(t, self.formats) {
                    Some(Ty::Set) | None => {
                        let names = TYPE_NAMES
                            .iter()
                            .copied()
                            .chain(self.formats.iter().map(|f| f.name))
                            .filter(|t| *t != "set");
                        let hint = suggest(t, names.clone()).unwrap_or_default();
                        self.err(
                            at(spec),
                            format!(
                                "query `{q}`: parameter `{n}`: unknown type `{t}`{hint} (one of {}, or a list of values)",
                                names.collect::<Vec<_>>().join(", ")
                            ),
                        );
                        continue;
                    }
                    Some(ty) => (ty, t.clone()),
                },
                AttrSpec::Enum(v) => match super::model::enum_type(v) {
                    Some(ty) if !v.is_empty() => {
                        let written = match &ty {
                            Ty::Enum(v) => v.join("|"),
                            Ty::IntEnum(v) => {
                                v.iter().map(i64::to_string).collect::<Vec<_>>().join("|")
                            }
                            Ty::BoolEnum(v) => {
                                v.iter().map(bool::to_string).collect::<Vec<_>>().join("|")
                            }
                            _ => String::new(),
                        };
                        (ty, written)
                    }
                    _ => {
                        self.err(
                            at(spec),
                            format!("query `{q}`: parameter `{n}`: an enum needs values, all strings, all integers or all booleans"),
                        );
                        continue;
                    }
                },
            };
            if !is_ident(n) {
                self.err(
                    at(spec),
                    format!("query `{q}`: parameter `{n}`: a name of letters, digits and `_`"),
                );
                continue;
            }
            out.push(Param {
                name: n.clone(),
                ty,
                written,
            });
        }
        out
    }
}

/// A key template made of a value template (holes become binders), to
/// find which entities' items it can address.
fn as_key_template(v: &Value) -> KeyTemplate {
    let mut parts = Vec::new();
    for (i, p) in v.0.iter().enumerate() {
        match p {
            Part::Lit(l) => parts.push(Part::Lit(l.clone())),
            Part::Hole(_, off) => parts.push(Part::Hole(
                Binder {
                    name: format!("q{i}"),
                    format: None,
                },
                *off,
            )),
        }
    }
    KeyTemplate {
        source: String::new(),
        parts,
    }
}

/// Compiles `queries:`; problems go to `problems`.
pub fn compile(
    raw: &Ordered<Spanned<RawQuery>>,
    entities: &[Entity],
    table: &TableDef,
    formats: &[&'static super::formats::Format],
    source: &str,
    problems: &mut Vec<Problem>,
) -> Vec<Query> {
    let mut c = Checker {
        source,
        problems,
        formats,
    };
    let mut out = Vec::new();
    for (name, rq) in &raw.0 {
        if let Some(q) = one(&mut c, name, rq, entities, table) {
            out.push(q);
        }
    }
    out
}

fn one(
    c: &mut Checker<'_>,
    name: &str,
    rq: &Spanned<RawQuery>,
    entities: &[Entity],
    table: &TableDef,
) -> Option<Query> {
    let r = &rq.value;
    let before = c.problems.len();
    if !name
        .chars()
        .all(|ch| ch.is_alphanumeric() || ch == '_' || ch == '-')
    {
        c.err(
            at(rq),
            format!("query `{name}`: a name of letters, digits, `_` and `-`"),
        );
    }
    // An unknown index: its key attributes are unknown, so the key's
    // conditions are not judged; everything else is, so that one
    // `check-model` lists every problem of the query.
    let (index, pk_attr, sk_attr, known) = match &r.index {
        None => (None, table.pk, Some(table.sk), true),
        Some(i) if i.value == "table" => (None, table.pk, Some(table.sk), true),
        Some(i) => match table.gsis.iter().find(|g| g.name == i.value) {
            Some(g) => (Some(g.name), g.pk, g.sk, true),
            None => {
                let hint = suggest(&i.value, table.gsis.iter().map(|g| g.name)).unwrap_or_default();
                let known = if table.gsis.is_empty() {
                    "the table has no GSI".to_string()
                } else {
                    format!(
                        "the table's GSIs: {}",
                        table
                            .gsis
                            .iter()
                            .map(|g| g.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                c.err(
                    at(i),
                    format!("query `{name}`: unknown index `{}`{hint} ({known}; omit `index` to query the table)", i.value),
                );
                (None, "", None, false)
            }
        },
    };
    let params = c.params(name, &r.params);
    let mut used: Vec<String> = Vec::new();
    // The key condition: the partition key's equality is required (a
    // query without it would be a scan).
    let mut pk = None;
    let mut sk = None;
    for (k, cond) in &r.key.value.0 {
        let pos = at(cond);
        if !known {
            // Its templates still use (and check) the parameters.
            for arg in &cond.value.args {
                c.template(name, &arg.0, pos, &params, &mut used);
            }
        } else if k == pk_attr {
            if cond.value.op.as_deref().is_some_and(|o| o != "=") {
                c.err(
                    pos,
                    format!(
                        "query `{name}`: the partition key `{k}` takes equality only (a template)"
                    ),
                );
                continue;
            }
            let [arg] = cond.value.args.as_slice() else {
                c.err(pos, format!("query `{name}`: `{k}`: one template"));
                continue;
            };
            pk = c.template(name, &arg.0, pos, &params, &mut used);
        } else if let Some(skn) = sk_attr.filter(|s| *s == k) {
            let op = match cond.value.op.as_deref() {
                None => SkOp::Eq,
                Some(o) => match SkOp::named(o) {
                    Some(op) => op,
                    None => {
                        let hint = suggest(o, SK_OPS.iter().copied()).unwrap_or_default();
                        c.err(
                            pos,
                            format!(
                                "query `{name}`: `{k}`: unknown operator `{o}`{hint} (one of {})",
                                SK_OPS.join(", ")
                            ),
                        );
                        continue;
                    }
                },
            };
            let want = if op == SkOp::Between { 2 } else { 1 };
            if cond.value.args.len() != want {
                c.err(
                    pos,
                    format!(
                        "query `{name}`: `{k}`: {}",
                        if want == 2 {
                            "`between` takes a list of two templates: [low, high]"
                        } else {
                            "one template"
                        }
                    ),
                );
                continue;
            }
            let vals: Vec<Option<Value>> = cond
                .value
                .args
                .iter()
                .map(|a| c.template(name, &a.0, pos, &params, &mut used))
                .collect();
            if vals.iter().all(Option::is_some) {
                sk = Some((skn, op, vals.into_iter().flatten().collect()));
            }
        } else if let Some(sk_attr) = sk_attr {
            let hint = suggest(k, [pk_attr, sk_attr]).unwrap_or_default();
            c.err(
                pos,
                format!(
                    "query `{name}`: `{k}` is not a key attribute of {}{hint} (its keys: {pk_attr}, {sk_attr}); other conditions go in `filter`",
                    index.map(|i| format!("index {i}")).unwrap_or("the table".into())
                ),
            );
        } else {
            let i = index.unwrap_or_default();
            c.err(
                pos,
                format!(
                    "query `{name}`: index {i} is keyed by its partition key `{pk_attr}` alone: it takes no sort key condition (`{k}`); the key is `{pk_attr}` only, other conditions go in `filter`"
                ),
            );
        }
    }
    if known && !r.key.value.0.iter().any(|(k, _)| k == pk_attr) {
        c.err(
            at(&r.key),
            format!(
                "query `{name}`: the key condition needs the partition key `{pk_attr}` (an equality): without it the query would be a scan"
            ),
        );
    }
    // Served by what the model keeps: some entity's items can have this
    // partition key on the table, or project it onto the index.
    if let Some(v) = &pk {
        let q = as_key_template(v);
        let served = entities.iter().any(|e| match index {
            None => e
                .key
                .iter()
                .find(|k| k.attr == pk_attr)
                .is_some_and(|k| k.template.overlap(&q).is_some()),
            Some(_) => e.project.as_ref().is_some_and(|p| {
                p.attrs
                    .iter()
                    .any(|(a, val)| *a == pk_attr && as_key_template(val).overlap(&q).is_some())
            }),
        });
        if !served {
            let pos = r
                .key
                .value
                .0
                .iter()
                .find(|(k, _)| k == pk_attr)
                .map(|(_, c)| at(c))
                .unwrap_or(at(&r.key));
            c.err(
                pos,
                match index {
                    None => format!("query `{name}`: no entity's `{pk_attr}` template matches this partition key: the query returns nothing"),
                    Some(i) => format!("query `{name}`: no entity projects a `{pk_attr}` this partition key matches: index {i} holds none of its items"),
                },
            );
        }
    }
    // `values:`: filter placeholders from the parameters.
    let mut values = Vec::new();
    for (vn, t) in &r.values.0 {
        if params.iter().any(|p| p.name == *vn) {
            c.err(
                at(t),
                format!("query `{name}`: `{vn}` is a parameter already"),
            );
            continue;
        }
        let text = t.value.0.trim();
        if !text.contains("${")
            && (text.parse::<f64>().is_ok() || text == "true" || text == "false")
        {
            c.err(
                at(t),
                format!("query `{name}`: `values: {vn}` is the string \"{text}\" (a `values:` entry is a template, so text), which no number or boolean attribute equals: write \"${{{text}}}\" for the {}, or \"${{'{text}'}}\" for the string", if text.parse::<f64>().is_ok() { "number" } else { "boolean" }),
            );
            continue;
        }
        if let Some(v) = c.template(name, &t.value.0, at(t), &params, &mut used) {
            values.push((vn.clone(), v));
        }
    }
    let filter = match &r.filter {
        None => None,
        Some(f) => match parse_filter(&f.value) {
            Err((off, msg)) => {
                let p = c.inner(at(f), off);
                c.err(p, format!("query `{name}`: filter: {msg}"));
                None
            }
            Ok(filter) => {
                for (_, a) in &filter.names {
                    if *a == pk_attr || Some(a.as_str()) == sk_attr {
                        c.err(
                            at(f),
                            format!("query `{name}`: filter: `{a}` is a key attribute of what is queried: say it in `key:`"),
                        );
                    }
                }
                for p in &filter.placeholders {
                    if params.iter().any(|x| x.name == *p) {
                        used.push(p.clone());
                    } else if !values.iter().any(|(n, _)| n == p)
                        && !r.values.0.iter().any(|(n, _)| n == p)
                    {
                        let hint = suggest(
                            p,
                            params
                                .iter()
                                .map(|x| x.name.as_str())
                                .chain(r.values.0.iter().map(|(n, _)| n.as_str())),
                        )
                        .unwrap_or_default();
                        let off = f.value.find(&format!(":{p}")).unwrap_or(0);
                        let pos = c.inner(at(f), off);
                        c.err(
                            pos,
                            format!("query `{name}`: filter: `:{p}` is not bound{hint} (a placeholder is a parameter or a `values:` entry)"),
                        );
                    }
                }
                Some(filter)
            }
        },
    };
    for (vn, t) in &r.values.0 {
        if !filter.as_ref().is_some_and(|f| f.placeholders.contains(vn)) {
            c.err(
                at(t),
                format!(
                    "query `{name}`: `values: {vn}` is read by no filter placeholder (`:{vn}`)"
                ),
            );
        }
    }
    for (pn, spec) in &r.params.0 {
        if !used.contains(pn) {
            c.err(
                at(spec),
                format!("query `{name}`: parameter `{pn}` is used nowhere (not in `key`, `filter` or `values`)"),
            );
        }
    }
    let descending = match &r.order {
        None => false,
        Some(o) if o.value == "asc" => false,
        Some(o) if o.value == "desc" => true,
        Some(o) => {
            let hint = suggest(&o.value, ["asc", "desc"]).unwrap_or_default();
            c.err(
                at(o),
                format!("query `{name}`: order `{}`: `asc` or `desc`{hint}", o.value),
            );
            false
        }
    };
    let limit = match &r.limit {
        None => None,
        Some(l) if l.value >= 1 => usize::try_from(l.value).ok(),
        Some(l) => {
            c.err(at(l), format!("query `{name}`: `limit` is at least 1"));
            None
        }
    };
    let attributes = r
        .attributes
        .as_ref()
        .map(|a| a.value.iter().map(|s| s.value.clone()).collect())
        .unwrap_or_default();
    // What it reads from the index's items, against what the index carries.
    if let Some(g) = index.and_then(|i| table.gsis.iter().find(|g| g.name == i)) {
        let f = filter.as_ref().zip(r.filter.as_ref());
        super::query_projection::check(name, g, table, f, r.attributes.as_ref(), c.problems);
    }
    if c.problems.len() > before {
        return None;
    }
    Some(Query {
        name: name.to_string(),
        about: r.about.clone(),
        index,
        params,
        pk: (pk_attr, pk?),
        sk,
        filter,
        values,
        descending,
        limit,
        attributes,
    })
}

#[cfg(test)]
#[path = "queries_tests.rs"]
mod tests;
