//! A model file's `once:` block: effects that happen at most once per key
//! (SPEC §8), run by the engine's [`crate::engine::once`] consumer.
//!
//! ```yaml
//! once:
//!   matches:                         # the consumer, its queue and its marker namespace
//!     on: request                      # the writer entity whose change starts it
//!     when: "status == 'approved'"     # starts when this becomes true
//!     key: "${seekerId}#${jobId}"      # at most one effect per key, ever
//!     require:                         # preconditions, in the same transaction
//!       - { entity: request, with: { employerId: employerId, jobId: jobId, seekerId: seekerId },
//!           equals: { status: "'approved'" }, message: "the request is not approved" }
//!       - { entity: job, with: { city: jobCity, jobId: jobId }, message: "the job is gone" }
//!     put:
//!       - { entity: match, with: { seekerId: seekerId, jobId: jobId, matchedAt: approvedAt } }
//!     delete:
//!       - { entity: suggestion, with: { city: jobCity, jobId: jobId, seekerId: seekerId } }
//! ```
//!
//! A change of an `on` item whose new image is valid and satisfies `when`,
//! while its old image did not (absent, bad input, or `when` false), sends
//! one message (JSON, `version` 1) to the queue `<name>` carrying the values
//! of the source's names the block reads. The consumer computes, from those
//! values only, the once key, the preconditions' keys, the items to put and
//! the keys to delete, and writes them in one transaction with a permanent
//! marker `ONCE#<name>#<key>` in the ledger: a duplicate or a redelivery
//! (however late, whatever the other values) fails the marker and ends as
//! `Duplicate`; a failed precondition ends as a logged `Skipped` with the
//! require's message and the key it names. Every expression is compiled
//! once, at load; the derive step evaluates the whole effect before sending
//! it, so a source whose effect cannot be computed is bad input at the
//! source (logged with its key, counted), never a poison message.

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Deserialize;

use super::expr::{Expr, Val, BUILTINS, CEL_FUNCTIONS};
use super::model::{suggest, Entity, FileModel, Problem, Value};
use super::raw::{Ordered, Scalar, Spanned};
use super::rules::{to_attr, Parsed};
use super::template::{split, Part};
use crate::change::{Change, ChangeKind};
use crate::engine::once::{Once, OncePlan};
use crate::engine::rules::OutMessage;
use crate::engine::setjob::{BoxFut, Guard, Reads};
use crate::error::InputError;
use crate::item::{display_key, Item, ItemExt};
use crate::models::table::QueueDef;
use crate::sqs::MessageError;

/// One `once:` entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOnce {
    /// The writer entity whose changes start the effect.
    pub on: Spanned<String>,
    /// A CEL condition over the source item: the effect starts when it
    /// becomes true.
    pub when: Spanned<Scalar>,
    /// The once key: a value template over the source's names.
    pub key: Spanned<Scalar>,
    #[serde(default)]
    pub require: Vec<Spanned<RawRequire>>,
    #[serde(default)]
    pub put: Vec<Spanned<RawWrite>>,
    #[serde(default)]
    pub delete: Vec<Spanned<RawWrite>>,
}

/// A precondition as written: the item exists (default), is absent, or
/// exists with an attribute equal to a value.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRequire {
    pub entity: Spanned<String>,
    /// The entity's key names -> CEL over the source.
    #[serde(default)]
    pub with: Ordered<Spanned<Scalar>>,
    /// One attribute -> CEL over the source (`"'approved'"`).
    #[serde(default)]
    pub equals: Ordered<Spanned<Scalar>>,
    /// The item must not exist.
    #[serde(default)]
    pub absent: bool,
    /// Logged (with the item's key) when the precondition fails.
    pub message: Option<String>,
}

/// An item to put or a key to delete, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWrite {
    pub entity: Spanned<String>,
    /// Key names (and, for `put`, attributes) -> CEL over the source.
    #[serde(default)]
    pub with: Ordered<Spanned<Scalar>>,
}

/// What a compiled precondition requires.
#[derive(Debug)]
pub enum RequireCond {
    Exists,
    Absent,
    Equals(&'static str, Value),
}

#[derive(Debug)]
pub struct Require {
    pub entity: usize,
    pub with: Vec<(String, Value)>,
    pub cond: RequireCond,
    pub message: String,
}

#[derive(Debug)]
pub struct Write {
    pub entity: usize,
    pub with: Vec<(String, Value)>,
}

/// A compiled `once:` entry.
#[derive(Debug)]
pub struct OnceSpec {
    pub name: &'static str,
    pub queue: QueueDef,
    /// The source (writer) entity.
    pub source: usize,
    pub when: Expr,
    pub key: Value,
    pub require: Vec<Require>,
    pub put: Vec<Write>,
    pub delete: Vec<Write>,
    /// The source's names the effect reads: what a message carries.
    pub reads: Vec<String>,
}

/// The job body version this build reads and writes.
pub const VERSION: u64 = 1;
/// Bodies above this size are refused (and never sent).
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// A once job: the effect's name and the source's values it reads.
#[derive(Debug, serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OnceJob {
    once: String,
    values: serde_json::Map<String, serde_json::Value>,
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn at<T>(s: &Spanned<T>) -> (u64, u64) {
    (s.referenced.line(), s.referenced.column())
}

struct Compiling<'a> {
    entities: &'a [Entity],
    names: Vec<&'a str>,
    problems: &'a mut Vec<Problem>,
}

impl Compiling<'_> {
    fn err(&mut self, pos: (u64, u64), msg: impl Into<String>) {
        self.problems.push(Problem::new(pos.0, pos.1, msg));
    }

    fn entity(&mut self, s: &Spanned<String>, once: &str) -> Option<usize> {
        let i = self.names.iter().position(|n| *n == s.value);
        if i.is_none() {
            let hint = suggest(&s.value, self.names.iter().copied()).unwrap_or_default();
            self.err(
                at(s),
                format!("once `{once}`: unknown entity `{}`{hint}", s.value),
            );
        }
        i
    }

    /// One CEL expression over the source's names.
    fn expr(
        &mut self,
        once: &str,
        src: &str,
        pos: (u64, u64),
        scope: &[&str],
        reads: &mut Vec<String>,
    ) -> Option<Expr> {
        let e = match Expr::compile(src) {
            Ok(e) => e,
            Err(err) => {
                self.err(pos, format!("once `{once}`: `{src}`: {}", err.message));
                return None;
            }
        };
        let mut ok = true;
        for v in &e.variables {
            if scope.contains(&v.as_str()) {
                if !reads.contains(v) {
                    reads.push(v.clone());
                }
                continue;
            }
            let hint = suggest(v, scope.iter().copied()).unwrap_or_default();
            self.err(
                pos,
                format!("once `{once}`: unknown name `{v}` in `{src}`{hint} (a once effect reads the attributes and key names of its `on` entity)"),
            );
            ok = false;
        }
        for f in &e.functions {
            if !BUILTINS.contains(&f.as_str()) && !CEL_FUNCTIONS.contains(&f.as_str()) {
                let hint =
                    suggest(f, BUILTINS.iter().chain(CEL_FUNCTIONS).copied()).unwrap_or_default();
                self.err(pos, format!("once `{once}`: unknown function `{f}`{hint}"));
                ok = false;
            }
        }
        ok.then_some(e)
    }

    /// A value: a template of literals and `${...}` expressions, or one
    /// expression (which keeps its type).
    fn value(
        &mut self,
        once: &str,
        s: &Spanned<Scalar>,
        scope: &[&str],
        reads: &mut Vec<String>,
    ) -> Option<Value> {
        let src = s.value.0.trim();
        if !src.contains("${") {
            let e = self.expr(once, src, at(s), scope, reads)?;
            return Some(Value(vec![Part::Hole(e, 0)]));
        }
        match split(src) {
            Err((_, msg)) => {
                self.err(at(s), format!("once `{once}`: {msg}"));
                None
            }
            Ok(parts) => {
                let mut out = Vec::new();
                for p in parts {
                    match p {
                        Part::Lit(l) => out.push(Part::Lit(l)),
                        Part::Hole(h, off) => {
                            out.push(Part::Hole(self.expr(once, &h, at(s), scope, reads)?, off))
                        }
                    }
                }
                Some(Value(out))
            }
        }
    }

    /// `with` bindings for entity `t`: every key name bound; attributes
    /// only where `attrs` allows.
    #[allow(clippy::too_many_arguments)]
    fn with(
        &mut self,
        once: &str,
        what: &str,
        pos: (u64, u64),
        t: usize,
        with: &Ordered<Spanned<Scalar>>,
        attrs: bool,
        scope: &[&str],
        reads: &mut Vec<String>,
    ) -> Vec<(String, Value)> {
        let entities = self.entities;
        let target = &entities[t];
        let tname = target.name;
        let binders: Vec<String> = target
            .binders()
            .iter()
            .map(|(n, _)| n.to_string())
            .collect();
        let attr_names: Vec<&str> = target.attrs.iter().map(|a| a.name).collect();
        for b in &binders {
            if !with.0.iter().any(|(n, _)| n == b) {
                let same = if scope.contains(&b.as_str()) {
                    format!(" (e.g. `{b}: {b}`)")
                } else {
                    String::new()
                };
                self.err(
                    pos,
                    format!("once `{once}`: {what} `{tname}`: `${{{b}}}` of its key is unbound: add `{b}:` under `with`{same}"),
                );
            }
        }
        let mut out = Vec::new();
        for (n, v) in &with.0 {
            let is_key = binders.contains(n);
            let is_attr = attr_names.contains(&n.as_str());
            if !is_key && (!attrs || !is_attr) {
                let cands: Vec<&str> = binders
                    .iter()
                    .map(String::as_str)
                    .chain(attr_names.iter().copied().filter(|_| attrs))
                    .collect();
                let hint = suggest(n, cands).unwrap_or_default();
                let msg = if attrs {
                    format!("once `{once}`: `{n}` is neither a key name nor an attribute of `{tname}`{hint}")
                } else {
                    format!("once `{once}`: `{n}` is not a key name of `{tname}`{hint} ({what} binds the key only)")
                };
                self.err(at(v), msg);
                continue;
            }
            if let Some(v) = self.value(once, v, scope, reads) {
                out.push((n.clone(), v));
            }
        }
        out
    }
}

/// Compiles the `once:` block; every problem goes to `problems`.
pub fn compile(
    raw: &Ordered<Spanned<RawOnce>>,
    entities: &[Entity],
    set_names: &[&str],
    problems: &mut Vec<Problem>,
) -> Vec<OnceSpec> {
    let mut c = Compiling {
        entities,
        names: entities.iter().map(|e| e.name).collect(),
        problems,
    };
    let mut out = Vec::new();
    for (name, o) in &raw.0 {
        if set_names.contains(&name.as_str()) {
            c.err(
                at(o),
                format!("once `{name}`: a set has the same name: a queue and a consumer each, give one another name"),
            );
            continue;
        }
        if name.is_empty()
            || !name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_')
        {
            c.err(
                at(o),
                format!("once `{name}`: a name of letters, digits, `-` and `_` (it names a queue)"),
            );
            continue;
        }
        if let Some(s) = one(&mut c, name, o) {
            out.push(s);
        }
    }
    out
}

fn one(c: &mut Compiling, name: &str, o: &Spanned<RawOnce>) -> Option<OnceSpec> {
    let raw = &o.value;
    let entities = c.entities;
    let source = c.entity(&raw.on, name)?;
    let src = &entities[source];
    if !src.writer {
        c.err(
            at(&raw.on),
            format!(
                "once `{name}`: `{}` is a processor entity: a once effect starts on changes of a writer entity",
                src.name
            ),
        );
        return None;
    }
    let mut scope: Vec<&str> = src.attrs.iter().map(|a| a.name).collect();
    for (b, _) in src.binders() {
        if !scope.contains(&b) {
            scope.push(b);
        }
    }
    let mut reads = Vec::new();
    let mut when_reads = Vec::new();
    let when = c.expr(
        name,
        raw.when.value.0.trim(),
        at(&raw.when),
        &scope,
        &mut when_reads,
    );
    let key = c.value(name, &raw.key, &scope, &mut reads);
    let mut require = Vec::new();
    for r in &raw.require {
        let Some(t) = c.entity(&r.value.entity, name) else {
            continue;
        };
        let with = c.with(
            name,
            "require",
            at(r),
            t,
            &r.value.with,
            false,
            &scope,
            &mut reads,
        );
        let tname = entities[t].name;
        let cond = match (r.value.absent, r.value.equals.0.as_slice()) {
            (false, []) => RequireCond::Exists,
            (true, []) => RequireCond::Absent,
            (true, _) => {
                c.err(
                    at(r),
                    format!("once `{name}`: require `{tname}`: `absent` and `equals` exclude each other"),
                );
                continue;
            }
            (false, [(attr, v)]) => {
                let Some(a) = entities[t].attr(attr) else {
                    let hint =
                        suggest(attr, entities[t].attrs.iter().map(|a| a.name)).unwrap_or_default();
                    c.err(
                        at(v),
                        format!("once `{name}`: `{attr}` is not an attribute of `{tname}`{hint}"),
                    );
                    continue;
                };
                let an = a.name;
                let Some(v) = c.value(name, v, &scope, &mut reads) else {
                    continue;
                };
                RequireCond::Equals(an, v)
            }
            (false, [_, (_, second), ..]) => {
                c.err(
                    at(second),
                    format!("once `{name}`: require `{tname}`: one attribute under `equals` (a second require of the same item would be a second operation on it in one transaction)"),
                );
                continue;
            }
        };
        let message = r.value.message.clone().unwrap_or_else(|| match &cond {
            RequireCond::Exists => format!("no `{tname}` item"),
            RequireCond::Absent => format!("a `{tname}` item exists"),
            RequireCond::Equals(a, _) => format!("`{tname}`: `{a}` is not as required"),
        });
        require.push(Require {
            entity: t,
            with,
            cond,
            message,
        });
    }
    let mut writes = |list: &[Spanned<RawWrite>], what: &str, attrs: bool| {
        let mut out = Vec::new();
        for w in list {
            let Some(t) = c.entity(&w.value.entity, name) else {
                continue;
            };
            let te = &entities[t];
            if te.writer {
                c.err(
                    at(&w.value.entity),
                    format!("once `{name}`: {what} `{}`, a writer entity: a once effect writes `owner: processor` items", te.name),
                );
                continue;
            }
            let with = c.with(
                name,
                what,
                at(w),
                t,
                &w.value.with,
                attrs,
                &scope,
                &mut reads,
            );
            if attrs {
                for a in &te.attrs {
                    if !a.optional && !with.iter().any(|(n, _)| n == a.name) {
                        let msg = format!(
                            "once `{name}`: put `{}`: its attribute `{}` is unbound: add it under `with`",
                            te.name, a.name
                        );
                        c.err(at(w), msg);
                    }
                }
            }
            out.push(Write { entity: t, with });
        }
        out
    };
    let put = writes(&raw.put, "put", true);
    let delete = writes(&raw.delete, "delete", false);
    if raw.put.is_empty() && raw.delete.is_empty() {
        c.err(
            at(o),
            format!("once `{name}`: it writes nothing: add `put:` or `delete:`"),
        );
    }
    let lname = leak(name.to_string());
    Some(OnceSpec {
        name: lname,
        queue: QueueDef::standard(
            lname,
            leak(format!("jobstream-{name}-jobs")),
            leak(format!("jobstream-{name}-jobs-dlq")),
            lname,
        ),
        source,
        when: when?,
        key: key?,
        require,
        put,
        delete,
        reads,
    })
}

/// A value of the source as a message carries it.
fn to_json(v: &Val) -> serde_json::Value {
    match v {
        Val::Str(s) => s.clone().into(),
        Val::Int(i) => (*i).into(),
        Val::Bool(b) => (*b).into(),
        Val::Set(v) => v.clone().into(),
        Val::List(l) => serde_json::Value::Array(l.iter().map(to_json).collect()),
        Val::Map(_) | Val::Null => serde_json::Value::Null,
    }
}

fn from_json(name: &str, v: &serde_json::Value) -> Result<Val, String> {
    Ok(match v {
        serde_json::Value::String(s) => Val::Str(s.clone()),
        serde_json::Value::Bool(b) => Val::Bool(*b),
        serde_json::Value::Null => Val::Null,
        serde_json::Value::Number(n) => Val::Int(
            n.as_i64()
                .ok_or_else(|| format!("`{name}` is not an integer"))?,
        ),
        serde_json::Value::Array(a) => {
            let mut out = Vec::with_capacity(a.len());
            for x in a {
                out.push(
                    x.as_str()
                        .ok_or_else(|| format!("`{name}` is not a string set"))?
                        .to_string(),
                );
            }
            out.sort();
            out.dedup();
            Val::Set(out)
        }
        serde_json::Value::Object(_) => return Err(format!("`{name}` is a map")),
    })
}

type Vals = Vec<(String, Val)>;

fn eval(m: &FileModel, v: &Value, vals: &Vals) -> Result<Val, String> {
    let look = |n: &str| vals.iter().find(|(k, _)| k == n).map(|(_, v)| v);
    if let [Part::Hole(e, _)] = v.0.as_slice() {
        return m.env.eval(e, look);
    }
    let mut out = String::new();
    for p in &v.0 {
        match p {
            Part::Lit(l) => out.push_str(l),
            Part::Hole(e, _) => out.push_str(&m.env.eval(e, look)?.render()),
        }
    }
    Ok(Val::Str(out))
}

/// The key of entity `t` from `with`, which must read back as that entity;
/// and every value bound.
fn key_of(
    m: &FileModel,
    t: &Entity,
    with: &[(String, Value)],
    vals: &Vals,
) -> Result<(Item, Vals), String> {
    let mut bound: Vals = Vec::with_capacity(with.len());
    for (n, v) in with {
        bound.push((n.clone(), eval(m, v, vals)?));
    }
    let mut key = Item::new();
    for k in &t.key {
        let mut parts = Vec::new();
        for b in k.template.binders() {
            let v = bound
                .iter()
                .find(|(n, _)| *n == b.name)
                .map(|(_, v)| v.render())
                .ok_or_else(|| format!("`{}` is unbound", b.name))?;
            if v.is_empty() {
                return Err(format!("`{}` of {}'s key is empty", b.name, t.name));
            }
            parts.push(v);
        }
        key.insert(
            k.attr.to_string(),
            AttributeValue::S(k.template.build(&parts)),
        );
    }
    let [pkn, skn] = m.key_names();
    let reads_back = match (key.s(pkn), key.s(skn)) {
        (Ok(pk), Ok(sk)) => m.classify(pk, sk).is_some_and(|(e, _)| std::ptr::eq(e, t)),
        _ => false,
    };
    if !reads_back {
        return Err(format!(
            "the key {} built for `{}` is not one of its keys (a value holds a separator of its template?)",
            display_key(&key),
            t.name
        ));
    }
    Ok((key, bound))
}

/// The effect of one job, from the source's values.
pub fn plan(m: &FileModel, spec: &OnceSpec, vals: &Vals) -> Result<OncePlan, String> {
    let once_key = eval(m, &spec.key, vals)?.render();
    if once_key.is_empty() {
        return Err(format!("once `{}`: the key is empty", spec.name));
    }
    let mut plan = OncePlan {
        once_key,
        ..OncePlan::default()
    };
    let mut touched: Vec<Item> = Vec::new();
    let mut touch = |k: &Item| -> Result<(), String> {
        if touched.contains(k) {
            return Err(format!(
                "once `{}`: {} is written or checked twice in one transaction",
                spec.name,
                display_key(k)
            ));
        }
        touched.push(k.clone());
        Ok(())
    };
    for r in &spec.require {
        let t = &m.entities[r.entity];
        let (key, _) = key_of(m, t, &r.with, vals)?;
        touch(&key)?;
        let reason = format!("{} ({})", r.message, display_key(&key));
        let g = match &r.cond {
            RequireCond::Exists => Guard::exists(key),
            RequireCond::Absent => Guard::absent(key),
            RequireCond::Equals(a, v) => {
                let ty = t.attr(a).map(|a| &a.ty);
                let v = to_attr(a, eval(m, v, vals)?, ty)?.ok_or_else(|| {
                    format!("once `{}`: `{a}` has no value to compare", spec.name)
                })?;
                Guard::equals(key, a, v)
            }
        };
        plan.checks.push((g, reason));
    }
    for w in &spec.put {
        let t = &m.entities[w.entity];
        let (mut item, bound) = key_of(m, t, &w.with, vals)?;
        touch(&item)?;
        for a in &t.attrs {
            let v = match bound.iter().find(|(n, _)| n == a.name) {
                Some((_, v)) => to_attr(a.name, v.clone(), Some(&a.ty))?,
                None => None,
            };
            match v {
                Some(v) => {
                    item.insert(a.name.to_string(), v);
                }
                None if a.optional => {}
                None => return Err(format!("`{}` of `{}` has no value", a.name, t.name)),
            }
        }
        item.insert(
            m.entity_type.to_string(),
            AttributeValue::S(t.name.to_string()),
        );
        plan.puts.push(item);
    }
    for w in &spec.delete {
        let (key, _) = key_of(m, &m.entities[w.entity], &w.with, vals)?;
        touch(&key)?;
        plan.deletes.push(key);
    }
    Ok(plan)
}

fn holds(m: &FileModel, e: &Expr, vals: &Vals) -> Result<bool, String> {
    match m
        .env
        .eval(e, |n| vals.iter().find(|(k, _)| k == n).map(|(_, v)| v))?
    {
        Val::Bool(b) => Ok(b),
        other => Err(format!(
            "`{}` gave a {}, not a bool",
            e.source,
            other.kind()
        )),
    }
}

impl FileModel {
    /// The once jobs a change starts: each effect whose `when` the new
    /// image satisfies and the old one did not (absent, bad input, false,
    /// or an effect that could not be computed).
    /// The effect is computed here first: one that cannot be is bad input.
    pub fn once_messages(&self, change: &Change) -> Result<Vec<OutMessage>, InputError> {
        if self.once.is_empty() || change.kind == ChangeKind::Remove {
            return Ok(vec![]);
        }
        let Some(new) = &change.new else {
            return Ok(vec![]);
        };
        let Parsed::Writer(rec) = self.parse(new)? else {
            return Ok(vec![]);
        };
        let bad = |reason: String| InputError::Invalid {
            key: change.key_display(),
            reason,
        };
        let mut out = Vec::new();
        for spec in &self.once {
            if !std::ptr::eq(&self.entities[spec.source], rec.entity) {
                continue;
            }
            let vals_of = |r: &super::rules::Record| -> Vals {
                spec.when
                    .variables
                    .iter()
                    .chain(&spec.reads)
                    .filter_map(|n| r.get(n).map(|v| (n.clone(), v.clone())))
                    .collect()
            };
            let vals = vals_of(&rec);
            if !holds(self, &spec.when, &vals)
                .map_err(|e| bad(format!("once `{}`: {e}", spec.name)))?
            {
                continue;
            }
            let held = match change.old.as_ref().map(|o| self.parse(o)) {
                // An old image whose effect could not be computed was bad
                // input for it (counted, nothing sent): it counts as nothing.
                Some(Ok(Parsed::Writer(old))) if std::ptr::eq(old.entity, rec.entity) => {
                    let old = vals_of(&old);
                    holds(self, &spec.when, &old).unwrap_or(false) && plan(self, spec, &old).is_ok()
                }
                _ => false,
            };
            if held {
                continue;
            }
            plan(self, spec, &vals).map_err(|e| bad(format!("once `{}`: {e}", spec.name)))?;
            let values = spec
                .reads
                .iter()
                .filter_map(|n| vals.iter().find(|(k, _)| k == n))
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect();
            let body = crate::engine::body::encode(
                &OnceJob {
                    once: spec.name.to_string(),
                    values,
                },
                VERSION,
            );
            if body.len() > MAX_BODY_BYTES {
                return Err(bad(format!(
                    "once `{}`: its job is {} bytes, over the {MAX_BODY_BYTES}-byte limit",
                    spec.name,
                    body.len()
                )));
            }
            out.push(OutMessage {
                queue: spec.queue.logical,
                body,
            });
        }
        Ok(out)
    }
}

/// The consumer of one `once:` entry.
#[derive(Debug, Clone, Copy)]
pub struct FileOnce {
    pub model: &'static FileModel,
    pub spec: &'static OnceSpec,
}

fn invalid_message(reason: String) -> MessageError {
    MessageError::Permanent {
        kind: "InvalidMessage",
        reason,
    }
}

impl FileOnce {
    /// The effect of a body (bad body: a permanent failure).
    pub fn plan_of(&self, body: &str) -> Result<OncePlan, MessageError> {
        let job: OnceJob = crate::engine::body::decode(body, VERSION, MAX_BODY_BYTES)?;
        if job.once != self.spec.name {
            return Err(invalid_message(format!(
                "a job of `{}` on the queue of `{}`",
                job.once, self.spec.name
            )));
        }
        let mut vals: Vals = Vec::with_capacity(job.values.len());
        for (k, v) in &job.values {
            if !self.spec.reads.contains(k) {
                return Err(invalid_message(format!("unknown value `{k}`")));
            }
            vals.push((k.clone(), from_json(k, v).map_err(invalid_message)?));
        }
        plan(self.model, self.spec, &vals).map_err(invalid_message)
    }
}

impl Once for FileOnce {
    fn name(&self) -> &'static str {
        self.spec.name
    }

    fn key_names(&self) -> &'static [&'static str] {
        self.model.keys
    }

    fn plan<'a>(
        &'a self,
        body: &'a str,
        _reads: &'a Reads,
    ) -> BoxFut<'a, Result<OncePlan, MessageError>> {
        Box::pin(async move { self.plan_of(body) })
    }
}
