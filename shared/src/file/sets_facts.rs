//! Compiling the facts of a `sets:` entry ([`super::sets`]): each fact's
//! key renamed to the set's variables, its listing (`via` an entity or an
//! index), `also`, `from` and `unless` facts of once effects, and the
//! set's expressions, every problem at its place.

use super::expr::Expr;
use super::model::at;
use super::model::{entity_index, suggest, Entity, Problem};
use super::raw::{Ordered, Scalar, Spanned};
use super::sets::{RawFact, SetExpr, SetFact};
use super::template::Part as FilePart;
use super::typecheck::{checked, Enums, Readable, T};
use crate::engine::joinset::{var_names, KeyTemplate};

/// The entity's key as a join set template, its names renamed.
pub(super) fn renamed(
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

/// A `sets:` block being compiled: the entities and indexes it may name,
/// and every problem found.
pub(super) struct Compiling<'a> {
    pub(super) entities: &'a [Entity],
    pub(super) gsis: &'a [crate::models::table::Gsi],
    pub(super) names: Vec<&'a str>,
    pub(super) problems: Vec<Problem>,
}

impl Compiling<'_> {
    pub(super) fn err(&mut self, pos: (u64, u64), msg: impl Into<String>) {
        let (l, c) = pos;
        self.problems.push(Problem::new(l, c, msg));
    }

    pub(super) fn entity(&mut self, s: &Spanned<String>, set: &str) -> Option<usize> {
        let what = format!("set `{set}`");
        entity_index(self.names.iter().copied(), s, &what)
            .map_err(|p| self.problems.push(p))
            .ok()
    }

    pub(super) fn rename(
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

    pub(super) fn fact(&mut self, set: &str, name: &str, f: &Spanned<RawFact>) -> Option<SetFact> {
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
                        via_index = Some((format!("{set}#{name}"), g.pk, g.sk.unwrap_or_default()));
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
            enums: Enums::default(),
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
            enums: Enums::of(ent.attrs.iter().map(|a| (a.name, &a.ty))),
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
    pub(super) fn once_unless(
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
        let Some(g_sk) = g.sk else {
            return Err(format!(
                "index `{}` is keyed by its partition key `{}` alone: a listing by an index reads both keys (list the fact by an entity, or by an index with a sort key)",
                g.name, g.pk
            ));
        };
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
        KeyTemplate::parse(&text(g.pk)?, &text(g_sk)?).map_err(|e| e.to_string())
    }

    /// An expression of the set: every name a variable, a fact or `now`;
    /// every `fact.attr` an attribute of the fact's entity.
    pub(super) fn expr(
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
            enums: Enums::default(),
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
