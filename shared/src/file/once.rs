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
//! source (logged with its key, counted), never a poison message. With two
//! or more values in the once key, none may hold a literal of its template
//! (two effects would share a key): such a source is bad input too.
//!
//! This module reads and checks the block; [`super::once_run`] runs it.

use serde::Deserialize;

use super::expr::Expr;
use super::model::at;
use super::model::leak;
use super::model::{entity_index, suggest, Entity, Problem, Value};
use super::raw::{Ordered, Scalar, Spanned};
use super::template::{split, Part};
use super::typecheck::{checked, Enums, Readable, T};
use crate::models::table::QueueDef;

pub use super::once_run::{plan, FileOnce, MAX_BODY_BYTES, VERSION};

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
    /// The SQS queue's name (default `jobstream-<name>-jobs`; its DLQ
    /// `<name>-dlq`): a table that already has its queues keeps them.
    pub queue_name: Option<Spanned<String>>,
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

struct Compiling<'a> {
    entities: &'a [Entity],
    names: Vec<&'a str>,
    problems: &'a mut Vec<Problem>,
    /// What the once being compiled may not read of its `on` entity.
    unreadable: Unreadable,
}

/// Names of a once's `on` entity that its expressions may not read: the
/// sums jobstream keeps on it and its `compute:` values (written after the
/// records that change them, so a once would fire on a stale or passing
/// value). An expression reading one is told why and what to write instead.
#[derive(Default)]
struct Unreadable {
    entity: &'static str,
    sums: Vec<&'static str>,
    computed: Vec<&'static str>,
    /// Its `int` attributes: what a threshold can be.
    ints: Vec<&'static str>,
}

impl Unreadable {
    fn of(e: &Entity) -> Self {
        let declared = |n: &str| e.attrs.iter().any(|a| a.name == n);
        Unreadable {
            entity: e.name,
            sums: (e.counter.iter())
                .flat_map(|c| c.attrs.iter().copied())
                .filter(|s| !declared(s))
                .collect(),
            computed: e.computed().filter(|c| !declared(c)).collect(),
            ints: (e.attrs.iter())
                .filter(|a| a.ty == super::model::Ty::Int)
                .map(|a| a.name)
                .collect(),
        }
    }

    /// Why `v` (read in `src`) may not be read, and what to write instead;
    /// `None` when it is no sum or computed value of the entity.
    /// `vars`: every name the expression reads (an `int` attribute among
    /// them is the threshold an example names).
    fn why(&self, v: &str, src: &str, vars: &[String]) -> Option<String> {
        let e = self.entity;
        let threshold = vars.iter().find(|n| self.ints.contains(&n.as_str()));
        let reads = "a once effect reads what the application writes on its `on` entity (its declared attributes and key names), never a counter sum or a `compute:` value (they are written after the records that change them)";
        if self.sums.contains(&v) {
            let example = threshold
                .map(|a| format!(", `{e}`'s `count:` adding `{a}: {a}` there"))
                .unwrap_or_default();
            return Some(format!(
                "`{v}` in `{src}` is a sum jobstream keeps on `{e}` (its `counter:`): {reads}. For a marker when a sum reaches a threshold, keep the sum and the threshold in one processor-created counter (the counts of `{v}` into it{example}) and give that counter a `project` with `when: \"{src}\"`: a sparse index of the items past it, which a later change takes back"
            ));
        }
        self.computed.contains(&v).then(|| {
            format!(
                "`{v}` in `{src}` is a value `compute:` writes on `{e}`: {reads}. An effect at a computed threshold is a `derive:` of `{e}` with `when: \"{src}\"`, which a later change of the value takes back"
            )
        })
    }
}

impl Compiling<'_> {
    fn err(&mut self, pos: (u64, u64), msg: impl Into<String>) {
        self.problems.push(Problem::new(pos.0, pos.1, msg));
    }

    fn entity(&mut self, s: &Spanned<String>, once: &str) -> Option<usize> {
        let what = format!("once `{once}`");
        entity_index(self.names.iter().copied(), s, &what)
            .map_err(|p| self.problems.push(p))
            .ok()
    }

    /// One CEL expression over the source's names (`want`: the type its
    /// result must have).
    fn expr(
        &mut self,
        once: &str,
        src: &str,
        pos: (u64, u64),
        scope: &Readable,
        want: Option<(T, &str)>,
        reads: &mut Vec<String>,
    ) -> Option<Expr> {
        // A sum or computed value of the `on` entity: why not, and what
        // instead (one problem each); then the expression's other flaws,
        // those names read as any value.
        let readable = |v: &str| scope.names.iter().any(|(n, _)| *n == v);
        let vars = Expr::compile(src).map(|x| x.variables).unwrap_or_default();
        let blocked: Vec<(&str, String)> = (vars.iter())
            .filter(|v| !readable(v.as_str()))
            .filter_map(|v| Some((v.as_str(), self.unreadable.why(v, src, &vars)?)))
            .collect();
        if !blocked.is_empty() {
            for (_, why) in &blocked {
                self.err(pos, format!("once `{once}`: {why}"));
            }
            let wider = Readable {
                names: (scope.names.iter().copied())
                    .chain(blocked.iter().map(|(v, _)| (*v, T::Dyn)))
                    .collect(),
                says: scope.says,
                enums: Enums {
                    names: scope.enums.names.clone(),
                    images: scope.enums.images,
                },
            };
            if let Err(flaws) = checked(src, &wider, want) {
                for f in flaws {
                    self.err(pos, format!("once `{once}`: {}", f.message));
                }
            }
            return None;
        }
        match checked(src, scope, want) {
            Ok(e) => {
                for v in &e.variables {
                    if !reads.contains(v) {
                        reads.push(v.clone());
                    }
                }
                Some(e)
            }
            Err(flaws) => {
                for f in flaws {
                    self.err(pos, format!("once `{once}`: {}", f.message));
                }
                None
            }
        }
    }

    /// A value: a template of literals and `${...}` expressions, or one
    /// expression (which keeps its type).
    fn value(
        &mut self,
        once: &str,
        s: &Spanned<Scalar>,
        scope: &Readable,
        reads: &mut Vec<String>,
    ) -> Option<Value> {
        let src = s.value.0.trim();
        if !src.contains("${") {
            let e = self.expr(once, src, at(s), scope, None, reads)?;
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
                        Part::Hole(h, off) => out.push(Part::Hole(
                            self.expr(once, &h, at(s), scope, None, reads)?,
                            off,
                        )),
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
        scope: &Readable,
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
                let same = if scope.names.iter().any(|(n, _)| n == b) {
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
        unreadable: Unreadable::default(),
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
    c.unreadable = Unreadable::of(src);
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
    let mut names: Vec<(&str, T)> = (src.attrs.iter())
        .map(|a| (a.name, T::of(Some(&a.ty))))
        .collect();
    for (b, _) in src.binders() {
        if !names.iter().any(|(n, _)| *n == b) {
            names.push((b, T::Dyn));
        }
    }
    let scope = Readable {
        names,
        says: "a once effect reads the attributes and key names of its `on` entity",
        enums: Enums::of(src.attrs.iter().map(|a| (a.name, &a.ty))),
    };
    let mut reads = Vec::new();
    let mut when_reads = Vec::new();
    let when = c.expr(
        name,
        raw.when.value.0.trim(),
        at(&raw.when),
        &scope,
        Some((T::Bool, "a condition (`when:`)")),
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
                let a = match entities[t].known_attr(attr) {
                    Ok(a) => a,
                    Err(why) => {
                        c.err(at(v), format!("once `{name}`: {why}"));
                        continue;
                    }
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
                    format!("once `{name}`: {what} `{}`, {}: a once effect writes `owner: processor` items", te.name, te.kind_words()),
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
                    let constant = te.constants().any(|(n, _)| n == a.name);
                    if !a.optional && !with.iter().any(|(n, _)| n == a.name) && !constant {
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
    let lname = leak(name);
    let written = o.value.queue_name.as_ref();
    let queue = match super::model::job_queue(lname, written.map(|q| q.value.as_str())) {
        Ok(q) => q,
        Err(why) => {
            c.err(written.map_or(at(o), at), format!("once `{name}`: {why}"));
            return None;
        }
    };
    Some(OnceSpec {
        name: lname,
        queue,
        source,
        when: when?,
        key: key?,
        require,
        put,
        delete,
        reads,
    })
}
