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
use super::model::{entity_index, suggest, Entity, Problem};
use super::raw::{Ordered, Scalar, Spanned};
use super::template::Part as FilePart;
use super::typecheck::{checked, Readable, T};
use crate::engine::joinset::{var_names, KeyTemplate, DEFAULT_PAGE};
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

/// The entity's key as a join set template, its names renamed.
fn renamed(
    e: &Entity,
    rename: &[(String, String)],
) -> Result<KeyTemplate, crate::engine::joinset::DeclError> {
    let text = |i: usize| {
        let mut out = String::new();
        for p in &e.key[i].template.parts {
            match p {
                FilePart::Lit(l) => out.push_str(l),
                FilePart::Hole(b, _) => {
                    let v = rename
                        .iter()
                        .find(|(k, _)| *k == b.name)
                        .map(|(_, v)| v.as_str())
                        .unwrap_or(b.name.as_str());
                    out.push_str(&format!("${{{v}}}"));
                }
            }
        }
        out
    };
    KeyTemplate::parse(&text(0), &text(1))
}

struct Compiling<'a> {
    entities: &'a [Entity],
    gsis: &'a [crate::models::table::Gsi],
    names: Vec<&'a str>,
    problems: Vec<Problem>,
}

impl Compiling<'_> {
    fn err(&mut self, pos: (u64, u64), msg: impl Into<String>) {
        let (l, c) = pos;
        self.problems.push(Problem::new(l, c, msg));
    }

    fn entity(&mut self, s: &Spanned<String>, set: &str) -> Option<usize> {
        let what = format!("set `{set}`");
        entity_index(self.names.iter().copied(), s, &what)
            .map_err(|p| self.problems.push(p))
            .ok()
    }

    fn rename(
        &mut self,
        set: &str,
        e: usize,
        bind: &Ordered<Spanned<String>>,
    ) -> Vec<(String, String)> {
        let ent = &self.entities[e];
        let binders: Vec<String> = ent.binders().iter().map(|(n, _)| n.to_string()).collect();
        let mut out = Vec::new();
        for (k, v) in &bind.0 {
            if !binders.contains(k) {
                let hint = suggest(k, binders.iter().map(String::as_str)).unwrap_or_default();
                let msg = format!(
                    "set `{set}`: `{k}` is not a key name of `{}`{hint}",
                    ent.name
                );
                self.err(at(v), msg);
            }
            out.push((k.clone(), v.value.clone()));
        }
        out
    }

    fn fact(&mut self, set: &str, name: &str, f: &Spanned<RawFact>) -> Option<SetFact> {
        if let Some(o) = &f.value.once {
            self.err(
                at(o),
                format!("set `{set}`: fact `{name}`: `once` names an `unless` fact only"),
            );
        }
        let Some(entity) = &f.value.entity else {
            self.err(
                at(f),
                format!("set `{set}`: fact `{name}` needs an `entity`"),
            );
            return None;
        };
        let e = self.entity(entity, set)?;
        let also = self.also(set, name, e, &f.value.also);
        let also_src: Vec<(String, String)> = also
            .iter()
            .map(|(v, x)| (v.clone(), x.source.trim().to_string()))
            .collect();
        let rename = self.rename(set, e, &f.value.bind);
        let key = match renamed(&self.entities[e], &rename) {
            Ok(k) => k,
            Err(err) => {
                self.err(at(f), format!("set `{set}`: fact `{name}`: {err}"));
                return None;
            }
        };
        let from = self.from(set, name, f, &key);
        let mut via = None;
        let mut via_index = None;
        if let Some(v) = &f.value.via {
            if let Some(g) = self.gsis.iter().find(|g| g.name == v.value) {
                match self.index_listing(&self.entities[e], g, &rename, &also_src) {
                    Ok(k)
                        if key.vars().is_subset(&k.vars())
                            && k.vars().iter().all(|v| {
                                key.vars().contains(v) || also.iter().any(|(a, _)| a == v)
                            }) =>
                    {
                        via = Some(k);
                        via_index = Some((format!("{set}#{name}"), g.pk, g.sk));
                    }
                    Ok(k) => {
                        let msg = format!(
                            "set `{set}`: index `{}` lists `{name}` by the variables {}, the fact's key has {}: its keys must hold the key names (and may hold `also` variables)",
                            v.value,
                            var_names(k.vars()),
                            var_names(key.vars())
                        );
                        self.err(at(v), msg);
                    }
                    Err(why) => self.err(at(v), format!("set `{set}`: via `{}`: {why}", v.value)),
                }
            } else {
                let ve = self.entity(v, set)?;
                let listed = &self.entities[ve];
                let maintained = listed.writer
                    || self
                        .entities
                        .iter()
                        .any(|e| e.derive.iter().any(|d| d.target == ve));
                if !maintained {
                    let fact_entity = self.entities[e].name;
                    let msg = format!(
                        "set `{set}`: fact `{name}` is listed `via: {}`, but nothing writes `{}` items, so the listing stays empty: derive one per `{fact_entity}` (under `{fact_entity}:`, `derive: [{{ entity: {}, with: {{ ... }} }}]`) or list by a writer entity",
                        v.value, listed.name, listed.name
                    );
                    self.err(at(v), msg);
                }
                match renamed(&self.entities[ve], &rename) {
                    Ok(k) if k.vars() == key.vars() => via = Some(k),
                    Ok(k) => {
                        let msg = format!(
                            "set `{set}`: `{}` lists `{name}` by the variables {}, the fact's key has {}: the same key names must bind the same variables",
                            v.value,
                            var_names(k.vars()),
                            var_names(key.vars())
                        );
                        self.err(at(v), msg);
                    }
                    Err(err) => self.err(at(v), format!("set `{set}`: via `{}`: {err}", v.value)),
                }
            }
        }
        let reads = also_reads(&self.entities[e], &also);
        Some(SetFact {
            name: name.to_string(),
            entity: e,
            key,
            via,
            via_index,
            rename,
            reads,
            also,
            once: None,
            from,
        })
    }

    /// `from:` of a fact: one variable of its sort key and an expression
    /// of `now`; not with `via` (the listing it bounds is the fact's own
    /// partition).
    fn from(
        &mut self,
        set: &str,
        name: &str,
        f: &Spanned<RawFact>,
        key: &KeyTemplate,
    ) -> Option<(String, Expr)> {
        let raw = &f.value.from.0;
        let (var, v) = raw.first()?;
        if let Some((_, second)) = raw.get(1) {
            self.err(
                at(second),
                format!("set `{set}`: fact `{name}`: one variable under `from` (a listing starts at one place)"),
            );
            return None;
        }
        if f.value.via.is_some() {
            self.err(
                at(v),
                format!("set `{set}`: fact `{name}`: `from` bounds the listing of the fact's own partition, and `via` lists it elsewhere: drop one"),
            );
            return None;
        }
        let sk_vars: Vec<&str> = key.sk.vars().collect();
        if !sk_vars.contains(&var.as_str()) {
            let hint = suggest(var, sk_vars.iter().copied()).unwrap_or_default();
            self.err(
                at(v),
                format!("set `{set}`: fact `{name}`: from `{var}` is not a variable of its sort key `{}`{hint} (`from` bounds where a listing of the partition starts)", key.sk),
            );
            return None;
        }
        let reads = Readable {
            names: vec![("now", T::Int)],
            says: "it reads `now` only: the job's clock, epoch seconds",
        };
        match checked(v.value.0.trim(), &reads, None) {
            Ok(x) => Some((var.clone(), x)),
            Err(flaws) => {
                for f in flaws {
                    let msg = format!("set `{set}`: fact `{name}`: from `{var}`: {}", f.message);
                    self.err(at(v), msg);
                }
                None
            }
        }
    }

    /// `also:` of a fact: each an expression over its entity's attributes
    /// and key names (a writer entity's: they are parsed to be read).
    fn also(
        &mut self,
        set: &str,
        name: &str,
        e: usize,
        raw: &Ordered<Spanned<Scalar>>,
    ) -> Vec<(String, Expr)> {
        let mut out = Vec::new();
        let ent = &self.entities[e];
        if !raw.0.is_empty() && !ent.writer {
            let (entity, pos) = (ent.name, at(&raw.0[0].1));
            self.err(
                pos,
                format!("set `{set}`: fact `{name}`: `also` reads a writer entity's attributes, and `{entity}` is `owner: processor`"),
            );
            return out;
        }
        let ent = &self.entities[e];
        let reads = Readable {
            names: (ent.attrs.iter())
                .map(|a| (a.name, T::of(Some(&a.ty))))
                .chain(ent.binders().into_iter().map(|(b, _)| (b, T::Dyn)))
                .collect(),
            says: &format!("it reads the attributes and key names of `{}`", ent.name),
        };
        for (var, v) in &raw.0 {
            match checked(v.value.0.trim(), &reads, None) {
                Ok(x) => out.push((var.clone(), x)),
                Err(flaws) => {
                    for f in flaws {
                        let msg =
                            format!("set `{set}`: fact `{name}`: also `{var}`: {}", f.message);
                        self.err(at(v), msg);
                    }
                }
            }
        }
        out
    }

    /// An `unless` fact naming a once effect: its key over the set's
    /// variables (`${seekerId}#${jobId}`, names only).
    fn once_unless(
        &mut self,
        set: &str,
        name: &str,
        f: &Spanned<RawFact>,
        once: &Spanned<String>,
        raw_once: Option<&Ordered<Spanned<super::once::RawOnce>>>,
        target: &str,
    ) -> Option<SetFact> {
        if f.value.entity.is_some() || f.value.via.is_some() || !f.value.also.0.is_empty() {
            self.err(
                at(once),
                format!("set `{set}`: unless `{name}`: `once` stands alone (no `entity`, `via` nor `also`): the marker is keyed by the once's key"),
            );
            return None;
        }
        let known: Vec<&str> =
            raw_once.map_or(vec![], |o| o.0.iter().map(|(n, _)| n.as_str()).collect());
        let Some((_, o)) = raw_once.and_then(|o| o.0.iter().find(|(n, _)| *n == once.value)) else {
            let hint = suggest(&once.value, known.iter().copied()).unwrap_or_default();
            self.err(
                at(once),
                format!(
                    "set `{set}`: unless `{name}`: no once effect `{}`{hint}",
                    once.value
                ),
            );
            return None;
        };
        // Nothing starts the set when the effect happens: it must delete
        // the target itself, in its transaction.
        if !o
            .value
            .delete
            .iter()
            .any(|d| d.value.entity.value == target)
        {
            self.err(
                at(once),
                format!("set `{set}`: unless `{name}`: once `{}` does not delete the set's `{target}`, and nothing else starts the set when it happens: add `delete: [{{ entity: {target}, with: {{ ... }} }}]` to it", once.value),
            );
            return None;
        }
        let src = o.value.key.value.0.as_str();
        let pk = match crate::engine::joinset::Template::parse(src) {
            Ok(t) => t,
            Err(_) => {
                self.err(
                    at(once),
                    format!("set `{set}`: unless `{name}`: the key of once `{}` (`{src}`) must be plain names (`${{seekerId}}#${{jobId}}`) that are variables of the set", once.value),
                );
                return None;
            }
        };
        Some(SetFact {
            name: name.to_string(),
            entity: usize::MAX,
            key: KeyTemplate {
                pk,
                sk: crate::engine::joinset::Template(vec![]),
            },
            via: None,
            via_index: None,
            rename: vec![],
            reads: vec![],
            also: vec![],
            once: Some(once.value.clone()),
            from: None,
        })
    }

    /// The listing of an index of the table by the keys entity `e` projects
    /// into it: both must be templates of its key names (`T#${teamId}`).
    fn index_listing(
        &self,
        e: &Entity,
        g: &crate::models::table::Gsi,
        rename: &[(String, String)],
        also: &[(String, String)],
    ) -> Result<KeyTemplate, String> {
        let binders: Vec<&str> = e.binders().iter().map(|(n, _)| *n).collect();
        let text = |attr: &str| -> Result<String, String> {
            let v = e
                .project
                .as_ref()
                .and_then(|p| p.attrs.iter().find(|(n, _)| *n == attr))
                .map(|(_, v)| v)
                .ok_or_else(|| {
                    format!(
                        "`{}` projects no `{attr}`: project the index's keys (e.g. `{attr}: \"T#${{teamId}}\"`) so that the engine lists it",
                        e.name
                    )
                })?;
            let mut out = String::new();
            for p in &v.0 {
                match p {
                    FilePart::Lit(l) => out.push_str(l),
                    FilePart::Hole(x, _) => {
                        let name = x.source.trim();
                        if let Some((var, _)) = also.iter().find(|(_, src)| src == name) {
                            out.push_str(&format!("${{{var}}}"));
                            continue;
                        }
                        if !binders.contains(&name) {
                            return Err(format!(
                                "`{attr}` of `{}`: `${{{name}}}` is not one of its key names nor an `also` expression of the fact: a listing by an index binds those only",
                                e.name
                            ));
                        }
                        let var = rename
                            .iter()
                            .find(|(k, _)| k == name)
                            .map_or(name, |(_, v)| v.as_str());
                        out.push_str(&format!("${{{var}}}"));
                    }
                }
            }
            Ok(out)
        };
        KeyTemplate::parse(&text(g.pk)?, &text(g.sk)?).map_err(|e| e.to_string())
    }

    /// An expression of the set: every name a variable, a fact or `now`;
    /// every `fact.attr` an attribute of the fact's entity.
    fn expr(
        &mut self,
        set: &str,
        s: &Spanned<Scalar>,
        vars: &[String],
        facts: &mut [SetFact],
        as_value: bool,
    ) -> Option<SetExpr> {
        let src = s.value.0.trim();
        if as_value && vars.iter().any(|v| v == src) {
            return Some(SetExpr::Var(src.to_string()));
        }
        let readable = Readable {
            names: (vars.iter().map(|v| (v.as_str(), T::Dyn)))
                .chain(facts.iter().map(|f| (f.name.as_str(), T::Dyn)))
                .chain([("now", T::Int)])
                .collect(),
            says: "a set expression reads its variables, its facts and `now`",
        };
        let e = match checked(src, &readable, None) {
            Ok(e) => e,
            Err(flaws) => {
                for f in flaws {
                    self.err(at(s), format!("set `{set}`: {}", f.message));
                }
                return None;
            }
        };
        let mut ok = true;
        // `fact.attr`: the attribute must exist; it is read (guarded).
        let mut attr_ref = None;
        for f in facts.iter_mut() {
            let prefix = format!("{}.", f.name);
            let mut from = 0;
            while let Some(i) = src[from..].find(&prefix) {
                let start = from + i;
                from = start + prefix.len();
                let before = src[..start].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.') {
                    continue;
                }
                let attr: String = src[from..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let ent = &self.entities[f.entity];
                match ent.attr(&attr) {
                    Some(a) => {
                        if !f.reads.contains(&a.name) {
                            f.reads.push(a.name);
                        }
                        if src == format!("{prefix}{attr}") {
                            attr_ref = Some((f.name.clone(), attr.clone()));
                        }
                    }
                    None => {
                        let hint =
                            suggest(&attr, ent.attrs.iter().map(|a| a.name)).unwrap_or_default();
                        let msg = format!(
                            "set `{set}`: `{}` has no attribute `{attr}`{hint} (fact `{}`)",
                            ent.name, f.name
                        );
                        self.problems.push(Problem::new(
                            s.referenced.line(),
                            s.referenced.column(),
                            msg,
                        ));
                        ok = false;
                    }
                }
            }
        }
        if !ok {
            return None;
        }
        Some(match attr_ref {
            Some((fact, attr)) if as_value => SetExpr::Attr { fact, attr },
            _ => SetExpr::Expr(e),
        })
    }
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
                "set `{name}`: `{}` is a writer entity: a set's items must be `owner: processor`",
                raw.entity.value
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
        let Some(a) = tent.attr(attr) else {
            let hint = suggest(attr, tent.attrs.iter().map(|a| a.name)).unwrap_or_default();
            let msg = format!(
                "set `{name}`: `{attr}` is not an attribute of `{}`{hint}",
                tent.name
            );
            c.err(at(v), msg);
            continue;
        };
        let an = a.name;
        if let Some(e) = c.expr(name, v, &vars, &mut facts, true) {
            values.push((an, e));
        }
    }
    let tent = &c.entities[target];
    for a in &tent.attrs {
        if !a.optional && !values.iter().any(|(n, _)| *n == a.name) {
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

/// The attributes (not key names) the `also` expressions of a fact read.
fn also_reads(e: &Entity, also: &[(String, Expr)]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for (_, x) in also {
        for n in &x.variables {
            if let Some(a) = e.attr(n) {
                if !out.contains(&a.name) {
                    out.push(a.name);
                }
            }
        }
    }
    out
}
