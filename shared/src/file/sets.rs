//! A model file's `sets:` block: join set jobs (SPEC §8, the mapping is
//! compiled here and run by [`super::sets_run`]; the engine side is
//! described in [`crate::engine::joinset`]).
//!
//! ```yaml
//! sets:
//!   timeline:
//!     entity: timeline                 # the target entity (owner: processor)
//!     bind: { follower: f, postId: p, authorId: a }   # its key names -> set variables
//!     facts:
//!       follow: { entity: follow, bind: { follower: f, followed: a }, via: follower }
//!       post:   { entity: post, bind: { author: a, postId: p } }
//!     unless: {}                       # same shape as facts, existence only
//!     when: [ "f != a" ]
//!     values: { postId: p, authorId: a, createdAt: post.createdAt }
//!     ttl: "epoch(post.createdAt) + 604800"
//!     page: 1000
//!     volatile: []                     # attributes a rewrite ignores (e.g. [ttl] from `now`)
//! ```
//!
//! `via` names an entity whose key lists the fact by another partition (a
//! mirror something must write: a `derive:` of it or a writer entity), or
//! an index of the table (`via: GSI1`) whose keys the fact's entity
//! projects from its key names: the engine then keeps that listing in the
//! ledger ([`crate::engine::rules::Rules::memberships`], index
//! `<set>#<fact>#<index pk>`, members the index sk), exact and read
//! consistently, never the GSI. A value a fact's key name binds that holds
//! a `#` (or is over 1024 bytes) cannot be a set variable: the record is
//! bad input for the set (logged with its key, counted).
//!
//! A key name not under `bind` is a variable of the same name. Expressions
//! read the set's variables (strings), the facts by name (`post.createdAt`,
//! typed by the fact's entity) and `now` (the job's clock, epoch seconds;
//! only here). Every expression is compiled once, at load. Scopes are not
//! declared: they follow from the key templates ([`JoinSet::scopes`]); a
//! set whose changes cannot be listed is a problem of the file. A fact's
//! (or `unless` fact's) entity starts its scope on every change that can
//! alter the set: an insert, a remove, a modify of an attribute the set
//! reads (the `starts:` of the engine, derived, not declared).

use serde::Deserialize;

use super::expr::Expr;
use super::model::at;
use super::model::leak;
use super::model::{suggest, Entity, Problem};
use super::raw::{Ordered, Scalar, Spanned};
use super::sets_facts::{renamed, Compiling};
use crate::engine::joinset::{KeyTemplate, DEFAULT_PAGE};
use crate::models::table::QueueDef;

/// One set as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSet {
    /// The target entity (processor-owned).
    pub entity: Spanned<String>,
    /// The target's key names -> set variables (default: the same name).
    #[serde(default)]
    pub bind: Ordered<Spanned<String>>,
    pub facts: Spanned<Ordered<Spanned<RawFact>>>,
    #[serde(default)]
    pub unless: Ordered<Spanned<RawFact>>,
    #[serde(default)]
    pub when: Vec<Spanned<Scalar>>,
    /// Target attribute -> a set variable, `fact.attr`, or a CEL expression.
    #[serde(default)]
    pub values: Ordered<Spanned<Scalar>>,
    /// Epoch seconds (CEL), written to the table's TTL attribute.
    pub ttl: Option<Spanned<Scalar>>,
    /// Candidates per message.
    pub page: Option<Spanned<u64>>,
    /// Target attributes (or the table's TTL attribute) that do not make
    /// two versions of an item differ (a generation time, a TTL from `now`):
    /// an existing item equal but for them is kept, not rewritten.
    #[serde(default)]
    pub volatile: Vec<Spanned<String>>,
    /// The SQS queue's name (default `jobstream-<name>-jobs`; its DLQ
    /// `<name>-dlq`): a table that already has its queues keeps them.
    pub queue_name: Option<Spanned<String>>,
    /// `verify`: when a target its facts imply is drift if absent (a CEL
    /// condition of the set). Default: always, but for a TTL from `now`
    /// (the target may have expired): never.
    pub missing_when: Option<Spanned<Scalar>>,
}

/// A fact (or `unless` fact) as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFact {
    /// The fact's entity (an `unless` fact may name a `once` instead).
    pub entity: Option<Spanned<String>>,
    /// The entity's key names -> set variables (default: the same name).
    #[serde(default)]
    pub bind: Ordered<Spanned<String>>,
    /// Another entity whose key lists this fact by another partition.
    pub via: Option<Spanned<String>>,
    /// Set variables its item binds besides its key: variable -> an
    /// expression over the entity's attributes (`city: "dashed(city)"`).
    #[serde(default)]
    pub also: Ordered<Spanned<Scalar>>,
    /// (`unless` only) the once effect whose marker excludes the target.
    pub once: Option<Spanned<String>>,
    /// (facts only) a lower bound on one variable of its sort key, an
    /// expression of `now` (`postedAt: "day(now - 30 * 86400)"`): rows
    /// below it are not the fact's, and listing its partition starts there.
    #[serde(default)]
    pub from: Ordered<Spanned<Scalar>>,
}

/// A value or condition of a set, compiled.
#[derive(Debug)]
pub enum SetExpr {
    Var(String),
    Attr { fact: String, attr: String },
    Expr(Expr),
}

#[derive(Debug)]
pub enum SetWhen {
    Distinct(String, String),
    Expr(Expr),
}

/// A fact of a compiled set.
#[derive(Debug)]
pub struct SetFact {
    pub name: String,
    pub entity: usize,
    pub key: KeyTemplate,
    pub via: Option<KeyTemplate>,
    /// `via` an index of the table: (the ledger index's name, the index's
    /// partition and sort key attributes the fact's entity projects).
    pub via_index: Option<(String, &'static str, &'static str)>,
    /// Entity key name -> set variable.
    pub rename: Vec<(String, String)>,
    pub reads: Vec<&'static str>,
    /// Set variables its item binds besides its key, by expression.
    pub also: Vec<(String, Expr)>,
    /// (`unless`) the once effect whose marker excludes: `key.pk` is its
    /// key over the set's variables.
    pub once: Option<String>,
    /// `from:` the variable and its lowest value (an expression of `now`).
    pub from: Option<(String, Expr)>,
}

/// A compiled `sets:` entry.
#[derive(Debug)]
pub struct SetSpec {
    pub name: &'static str,
    pub queue: QueueDef,
    pub target: usize,
    pub target_key: KeyTemplate,
    pub facts: Vec<SetFact>,
    pub unless: Vec<SetFact>,
    pub when: Vec<SetWhen>,
    pub values: Vec<(&'static str, SetExpr)>,
    pub ttl: Option<SetExpr>,
    pub page: usize,
    /// Attributes an existing item may differ in and still be kept.
    pub volatile: &'static [&'static str],
    /// When an absent target its facts imply is drift (`missing_when`).
    pub missing_when: Option<Expr>,
    /// The declared type of each set variable that has one (the key name
    /// it renames: the fact entity's attribute, else the binder's format):
    /// expressions read variables typed, as they read the facts.
    pub var_types: Vec<(String, super::model::Ty)>,
}

/// Compiles the `sets:` block against the compiled entities.
pub fn compile(
    raw: &Ordered<Spanned<RawSet>>,
    raw_once: Option<&Ordered<Spanned<super::once::RawOnce>>>,
    entities: &[Entity],
    table: &crate::models::table::TableDef,
    problems: &mut Vec<Problem>,
) -> Vec<SetSpec> {
    let table_ttl = table.ttl_attribute;
    let mut c = Compiling {
        entities,
        gsis: &table.gsis,
        names: entities.iter().map(|e| e.name).collect(),
        problems: vec![],
    };
    let mut out = Vec::new();
    for (name, s) in &raw.0 {
        if let Some(spec) = one(&mut c, name, s, table_ttl, raw_once) {
            out.push(spec);
        }
    }
    problems.extend(c.problems);
    out
}

fn one(
    c: &mut Compiling,
    name: &str,
    s: &Spanned<RawSet>,
    table_ttl: Option<&'static str>,
    raw_once: Option<&Ordered<Spanned<super::once::RawOnce>>>,
) -> Option<SetSpec> {
    let raw = &s.value;
    let target = c.entity(&raw.entity, name)?;
    if c.entities[target].writer {
        c.err(
            at(&raw.entity),
            format!(
                "set `{name}`: `{}` is {}: a set's items must be `owner: processor`",
                raw.entity.value,
                c.entities[target].kind_words()
            ),
        );
    }
    let trename = c.rename(name, target, &raw.bind);
    let target_key = match renamed(&c.entities[target], &trename) {
        Ok(k) => k,
        Err(e) => {
            c.err(at(&raw.entity), format!("set `{name}`: {e}"));
            return None;
        }
    };
    let mut facts = Vec::new();
    for (fname, f) in &raw.facts.value.0 {
        if let Some(f) = c.fact(name, fname, f) {
            facts.push(f);
        }
    }
    if raw.facts.value.0.is_empty() {
        c.err(at(&raw.facts), format!("set `{name}`: no facts"));
    }
    let mut unless = Vec::new();
    for (fname, f) in &raw.unless.0 {
        if let Some((_, v)) = f.value.from.0.first() {
            c.err(
                at(v),
                format!("set `{name}`: unless `{fname}`: `from` bounds a fact's listing; an `unless` fact is read by its key"),
            );
        }
        let u = match &f.value.once {
            Some(o) => {
                let t = c.entities[target].name;
                c.once_unless(name, fname, f, o, raw_once, t)
            }
            None => c.fact(name, fname, f),
        };
        if let Some(u) = u {
            unless.push(u);
        }
    }
    let mut vars: Vec<String> = Vec::new();
    for f in &facts {
        for v in f
            .key
            .vars()
            .into_iter()
            .chain(f.also.iter().map(|(v, _)| v.as_str()))
        {
            if !vars.iter().any(|x| x == v) {
                vars.push(v.to_string());
            }
        }
    }
    for v in target_key.vars() {
        if !vars.iter().any(|x| x == v) {
            c.err(
                at(&raw.entity),
                format!("set `{name}`: `${{{v}}}` of the target's key is bound by no fact"),
            );
        }
    }
    for u in &unless {
        for v in u
            .key
            .vars()
            .into_iter()
            .chain(u.also.iter().map(|(v, _)| v.as_str()))
        {
            if !vars.iter().any(|x| x == v) {
                c.err(
                    at(&raw.entity),
                    format!(
                        "set `{name}`: `${{{v}}}` of unless `{}` is bound by no fact",
                        u.name
                    ),
                );
            }
        }
    }
    let mut when = Vec::new();
    for w in &raw.when {
        let src = w.value.0.trim();
        if let Some((a, b)) = src.split_once("!=") {
            let (a, b) = (a.trim(), b.trim());
            if vars.iter().any(|v| v == a) && vars.iter().any(|v| v == b) {
                when.push(SetWhen::Distinct(a.to_string(), b.to_string()));
                continue;
            }
        }
        if let Some(SetExpr::Expr(e)) = c.expr(name, w, &vars, &mut facts, false) {
            when.push(SetWhen::Expr(e));
        }
    }
    let tent = &c.entities[target];
    let mut values = Vec::new();
    for (attr, v) in &raw.values.0 {
        let a = match tent.known_attr(attr) {
            Ok(a) => a,
            Err(why) => {
                c.err(at(v), format!("set `{name}`: {why}"));
                continue;
            }
        };
        let an = a.name;
        if let Some(e) = c.expr(name, v, &vars, &mut facts, true) {
            values.push((an, e));
        }
    }
    let tent = &c.entities[target];
    for a in &tent.attrs {
        let constant = tent.constants().any(|(n, _)| n == a.name);
        if !a.optional && !values.iter().any(|(n, _)| *n == a.name) && !constant {
            let msg = format!(
                "set `{name}`: the attribute `{}` of `{}` has no value: add it under `values`",
                a.name, tent.name
            );
            c.err(at(&raw.entity), msg);
        }
    }
    let missing_when = match &raw.missing_when {
        None => None,
        Some(w) => match c.expr(name, w, &vars, &mut facts, false) {
            Some(SetExpr::Expr(e)) => Some(e),
            _ => None,
        },
    };
    let ttl = match &raw.ttl {
        None => None,
        Some(t) if table_ttl.is_none() => {
            c.err(
                at(t),
                format!("set `{name}`: `ttl` needs the table's `ttl` attribute"),
            );
            None
        }
        Some(t) => c.expr(name, t, &vars, &mut facts, false),
    };
    let mut volatile: Vec<&'static str> = Vec::new();
    for v in &raw.volatile {
        let tent = &c.entities[target];
        let known = tent.attr(&v.value).is_some() || table_ttl == Some(v.value.as_str());
        if !known {
            let cands = tent.attrs.iter().map(|a| a.name).chain(table_ttl);
            let hint = suggest(&v.value, cands).unwrap_or_default();
            let msg = format!(
                "set `{name}`: volatile `{}` is not an attribute of `{}` nor the table's ttl{hint}",
                v.value, tent.name
            );
            c.err(at(v), msg);
            continue;
        }
        volatile.push(leak(&v.value));
    }
    let page = match &raw.page {
        None => DEFAULT_PAGE,
        Some(p) if p.value == 0 || p.value > 10_000 => {
            c.err(at(p), format!("set `{name}`: page {}: 1..=10000", p.value));
            DEFAULT_PAGE
        }
        Some(p) => p.value as usize,
    };
    let mut var_types: Vec<(String, super::model::Ty)> = Vec::new();
    for f in facts.iter().chain(&unless).filter(|f| f.once.is_none()) {
        let e = &c.entities[f.entity];
        for (b, format) in e.binders() {
            let var = f
                .rename
                .iter()
                .find(|(k, _)| k == b)
                .map_or(b, |(_, v)| v.as_str());
            let ty = e
                .attr(b)
                .map(|a| a.ty.clone())
                .or_else(|| format.and_then(super::model::Ty::named));
            if let Some(ty) = ty {
                if !var_types.iter().any(|(n, _)| n == var) {
                    var_types.push((var.to_string(), ty));
                }
            }
        }
    }
    let lname = leak(name);
    let written = raw.queue_name.as_ref();
    let queue = match super::model::job_queue(lname, written.map(|q| q.value.as_str())) {
        Ok(q) => q,
        Err(why) => {
            c.err(written.map_or(at(s), at), format!("set `{name}`: {why}"));
            return None;
        }
    };
    let spec = SetSpec {
        missing_when,
        var_types,
        name: lname,
        queue,
        target,
        target_key,
        facts,
        unless,
        when,
        values,
        ttl,
        page,
        volatile: Box::leak(volatile.into_boxed_slice()),
    };
    // Scopes that cannot be listed.
    let draft = spec.declaration_with(None, None);
    if let Err(e) = draft.scopes() {
        c.err(at(s), format!("{e}"));
    }
    Some(spec)
}
