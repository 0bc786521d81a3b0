//! Running a model file's `sets:` (see [`super::sets`]): the join set each
//! entry declares over the loaded model (its values, conditions, `also`
//! and validation as closures) and the set jobs a change starts.

use std::sync::Arc;

use super::expr::{Expr, Val};
use super::model::FileModel;
use super::record::Images;
use super::rules::{key_val, read_attr, to_attr, typed_str, Parsed};
use super::sets::{SetExpr, SetFact, SetSpec, SetWhen};
use crate::change::ChangeKind;
use crate::engine::joinset::{
    valid_var_value, FactDecl, JoinJob, JoinSet, Row, TargetDecl, UnlessDecl, Value, Vars, When,
};
use crate::engine::rules::OutMessage;
use crate::error::InputError;
use crate::item::{Item, ItemExt};

/// A fact's item as expressions read it (typed by its entity).
fn fact_val(m: &FileModel, entity: usize, item: &Item) -> Result<Val, String> {
    let e = &m.entities[entity];
    let mut out = Vec::with_capacity(e.attrs.len());
    for a in &e.attrs {
        out.push((
            a.name.to_string(),
            read_attr(item, a).map_err(|e| e.to_string())?,
        ));
    }
    Ok(Val::Map(out))
}

fn row_lookup(
    m: &'static FileModel,
    set: &'static SetSpec,
    row: &Row<'_>,
) -> Result<Vec<(String, Val)>, String> {
    let mut env: Vec<(String, Val)> = Vec::with_capacity(row.vars.len() + set.facts.len() + 1);
    for (k, v) in row.vars.iter() {
        let ty = set.var_types.iter().find(|(n, _)| n == k).map(|(_, t)| t);
        env.push((k.clone(), typed_str(k, v, ty).map_err(|e| e.to_string())?));
    }
    for f in &set.facts {
        if let Some(item) = row.facts.get(f.name.as_str()) {
            env.push((f.name.clone(), fact_val(m, f.entity, item)?));
        }
    }
    env.push(("now".to_string(), Val::Int(row.now.timestamp())));
    Ok(env)
}

fn eval(
    m: &'static FileModel,
    set: &'static SetSpec,
    e: &'static Expr,
    row: &Row<'_>,
) -> Result<Val, String> {
    let env = row_lookup(m, set, row)?;
    m.env
        .eval(e, |n| env.iter().find(|(k, _)| k == n).map(|(_, v)| v))
}

fn value(
    m: &'static FileModel,
    set: &'static SetSpec,
    attr: &'static str,
    v: &'static SetExpr,
    ty: Option<&'static super::model::Ty>,
) -> Value {
    match v {
        // A variable into an int, number or bool attribute: typed as declared.
        SetExpr::Var(var)
            if matches!(
                ty,
                Some(super::model::Ty::Int | super::model::Ty::Number | super::model::Ty::Bool)
            ) =>
        {
            Value::Computed(Arc::new(move |row| {
                let raw = row
                    .vars
                    .get(var)
                    .ok_or_else(|| format!("variable `{var}` is unbound"))?;
                let v = typed_str(var, raw, ty).map_err(|e| e.to_string())?;
                to_attr(attr, v, ty)?.ok_or_else(|| format!("`{attr}` has no value"))
            }))
        }
        SetExpr::Var(v) => Value::Var(v.clone()),
        SetExpr::Attr { fact, attr } => Value::Attr {
            fact: fact.clone(),
            attr: attr.clone(),
        },
        SetExpr::Expr(e) => Value::Computed(Arc::new(move |row| {
            let v = eval(m, set, e, row)?;
            to_attr(attr, v, ty)?.ok_or_else(|| format!("`{attr}` has no value"))
        })),
    }
}

impl SetSpec {
    /// Whether a target its facts imply is drift when absent (`verify`):
    /// `missing_when` over the row as read; without it, unless the TTL
    /// runs from `now` (it may have expired, and nothing regenerates it
    /// until a fact changes).
    pub fn missing_is_drift(
        &'static self,
        m: &'static FileModel,
        vars: &Vars,
        read: &dyn Fn(&Item) -> Option<Item>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> bool {
        let Some(e) = &self.missing_when else {
            return !matches!(&self.ttl, Some(SetExpr::Expr(e)) if e.variables.iter().any(|v| v == "now"));
        };
        let items: Vec<(&str, Item)> = self
            .facts
            .iter()
            .filter_map(|f| Some((f.name.as_str(), read(&f.key.key(m.keys, vars)?)?)))
            .collect();
        let facts = items.iter().map(|(n, i)| (*n, i)).collect();
        let row = Row {
            vars,
            facts: &facts,
            now,
        };
        matches!(eval(m, self, e, &row), Ok(Val::Bool(true)))
    }

    /// The join set, its validation and expressions over the loaded model
    /// (`None`: a draft, for checking the scopes at load).
    pub(super) fn declaration_with(
        &self,
        m: Option<&'static FileModel>,
        me: Option<&'static SetSpec>,
    ) -> JoinSet {
        let facts = self
            .facts
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let entity = f.entity;
                FactDecl {
                    also: also_decls(m, me.map(|me| &me.facts[i]), f),
                    name: f.name.clone(),
                    key: f.key.clone(),
                    via: f.via.clone(),
                    via_ledger: f.via_index.as_ref().map(|(ix, _, _)| ix.clone()),
                    valid: match m {
                        Some(m) => Arc::new(move |item: &Item| valid(m, entity, item)),
                        None => Arc::new(|_: &Item| Ok(())),
                    },
                    reads: f.reads.clone(),
                    from: match (m, me) {
                        (Some(m), Some(me)) => me.facts[i].from.as_ref().map(|(var, x)| {
                            crate::engine::joinset::ListFrom {
                                var: var.clone(),
                                start: Arc::new(move |now| from_value(m, x, now)),
                            }
                        }),
                        _ => None,
                    },
                }
            })
            .collect();
        let (values, ttl, when) = match (m, me) {
            (Some(m), Some(me)) => {
                let t = &m.entities[me.target];
                let constants = t
                    .constants()
                    .filter(|(a, _)| !me.values.iter().any(|(n, _)| n == a))
                    .map(|(a, v)| (a.to_string(), Value::Lit(v)));
                let values = me
                    .values
                    .iter()
                    .map(|(a, v)| {
                        let ty = t.attr(a).map(|a| &a.ty);
                        (a.to_string(), value(m, me, a, v, ty))
                    })
                    .chain(constants)
                    .collect();
                let ttl = match (m.table.ttl_attribute, &me.ttl) {
                    (Some(attr), Some(v)) => Some((attr, value(m, me, attr, v, None))),
                    _ => None,
                };
                let when = me
                    .when
                    .iter()
                    .map(|w| match w {
                        SetWhen::Distinct(a, b) => When::Distinct(a.clone(), b.clone()),
                        SetWhen::Expr(e) => {
                            When::Expr(Arc::new(move |row| eval(m, me, e, row)?.bool_of(&e.source)))
                        }
                    })
                    .collect();
                (values, ttl, when)
            }
            // A draft knows the values that carry a variable (scopes).
            _ => {
                let carried = self
                    .values
                    .iter()
                    .filter_map(|(a, v)| match v {
                        SetExpr::Var(x) => Some((a.to_string(), Value::Var(x.clone()))),
                        _ => None,
                    })
                    .collect();
                (carried, None, vec![])
            }
        };
        JoinSet {
            name: self.name,
            queue: self.queue.logical,
            key_names: m.map(|m| m.keys).unwrap_or(&["PK", "SK"]),
            target: TargetDecl {
                key: self.target_key.clone(),
                type_attr: m.map(|m| (m.entity_type, m.entities[self.target].name.to_string())),
                values,
                ttl,
            },
            facts,
            unless: self
                .unless
                .iter()
                .enumerate()
                .map(|(i, u)| UnlessDecl {
                    name: u.name.clone(),
                    key: u.key.clone(),
                    also: also_decls(m, me.map(|me| &me.unless[i]), u),
                    once: u.once.clone(),
                })
                .collect(),
            when,
            volatile: self.volatile,
            page: self.page,
        }
    }

    /// The join set this entry declares, over the loaded model.
    pub fn declaration(&'static self, m: &'static FileModel) -> JoinSet {
        self.declaration_with(Some(m), Some(self))
    }
}

/// A fact's `from:` value at `now`: a string (a key sorts as strings).
fn from_value(
    m: &FileModel,
    x: &Expr,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<String, String> {
    let now = Val::Int(now.timestamp());
    match m.env.eval(x, |n| (n == "now").then_some(&now))? {
        Val::Str(s) => Ok(s),
        other => Err(format!(
            "from `{}` gave a {}, not a string (a key's part)",
            x.source,
            other.kind()
        )),
    }
}

/// An `also` variable's value from a fact's item.
fn also_value(m: &FileModel, x: &Expr, item: &Item) -> Result<String, String> {
    also_value_of(m, x, &m.parse(item))
}

/// [`also_value`] from the item's parse.
fn also_value_of(
    m: &FileModel,
    x: &Expr,
    parsed: &Result<Parsed<'_>, InputError>,
) -> Result<String, String> {
    match parsed.as_ref().map_err(|e| e.to_string())? {
        Parsed::Writer(rec) => Ok(m.env.eval(x, |n| rec.get(n))?.render()),
        Parsed::Processor(_) => Err("not a writer's item".to_string()),
    }
}

/// The engine's `also` of a fact: closures over the loaded model (a
/// draft's never run).
fn also_decls(
    m: Option<&'static FileModel>,
    me: Option<&'static SetFact>,
    f: &SetFact,
) -> Vec<crate::engine::joinset::Also> {
    f.also
        .iter()
        .enumerate()
        .map(|(j, (var, _))| crate::engine::joinset::Also {
            var: var.clone(),
            of: match (m, me) {
                (Some(m), Some(me)) => {
                    let x: &'static Expr = &me.also[j].1;
                    Arc::new(move |item: &Item| also_value(m, x, item))
                }
                _ => Arc::new(|_: &Item| Err("a draft".to_string())),
            },
        })
        .collect()
}

fn valid(m: &FileModel, entity: usize, item: &Item) -> Result<(), String> {
    match m.parse(item).map_err(|e| e.to_string())? {
        Parsed::Writer(r) if std::ptr::eq(r.entity, &m.entities[entity]) => Ok(()),
        Parsed::Processor(e) if std::ptr::eq(e, &m.entities[entity]) => Ok(()),
        _ => Err(format!("not a `{}`", m.entities[entity].name)),
    }
}

fn attrs_equal(a: &Item, b: &Item, reads: &[&str]) -> bool {
    reads
        .iter()
        .all(|r| crate::item::same_opt(a.get(*r), b.get(*r)))
}

impl FileModel {
    /// The set jobs a change starts: for each fact (and `unless` fact) of
    /// the changed item's entity, its scope, unless a modify left what the
    /// set reads unchanged (and the old image was valid).
    pub(super) fn set_messages_of(
        &self,
        images: &Images<'_, '_>,
    ) -> Result<Vec<OutMessage>, InputError> {
        if self.sets.is_empty() {
            return Ok(vec![]);
        }
        let change = images.change;
        let [pkn, skn] = self.key_names();
        let (Ok(pk), Ok(sk)) = (change.keys.s(pkn), change.keys.s(skn)) else {
            return Ok(vec![]);
        };
        let Some((entity, bound)) = self.classify(pk, sk) else {
            // The removal of an item the processor made under an earlier
            // key template (`backfill` or `verify --repair` deleting it,
            // or its TTL: ops16 #5) starts nothing; any other item no
            // entity matches is bad input, as in every other aspect.
            let stale = change.old.as_ref().is_some_and(|o| self.stale_derived(o));
            if change.kind == ChangeKind::Remove && stale {
                return Ok(vec![]);
            }
            return Err(InputError::UnknownEntity {
                key: change.key_display(),
            });
        };
        // Bad input errs in this aspect too (as in every other).
        if let Some(Err(e)) = images.parsed_new() {
            return Err(e.clone());
        }
        let binders: Vec<(String, Option<String>)> = entity
            .key
            .iter()
            .flat_map(|k| {
                k.template
                    .binders()
                    .map(|b| (b.name.clone(), b.format.clone()))
            })
            .collect();
        // A remove carries no image to validate: its key must pass the
        // checks that read only key names (each typed as declared), or it
        // was never a valid item and starts nothing.
        if change.kind == ChangeKind::Remove {
            let mut vals: Vec<(&str, Val)> = Vec::with_capacity(binders.len());
            for ((b, format), v) in binders.iter().zip(&bound) {
                match key_val(entity, b, format.as_deref(), v, &self.formats) {
                    Ok(val) => vals.push((b.as_str(), val)),
                    Err(_) => return Ok(vec![]),
                }
            }
            let key_only = entity.checks.iter().filter(|c| {
                c.expr
                    .variables
                    .iter()
                    .all(|v| binders.iter().any(|(b, _)| b == v))
            });
            for c in key_only {
                let ok = self.env.eval(&c.expr, |n| {
                    vals.iter().find(|(k, _)| *k == n).map(|(_, v)| v)
                });
                if ok != Ok(Val::Bool(true)) {
                    return Ok(vec![]);
                }
            }
        }
        let mut out = Vec::new();
        for set in &self.sets {
            for (f, is_unless) in set
                .facts
                .iter()
                .map(|f| (f, false))
                .chain(set.unless.iter().map(|f| (f, true)))
                .filter(|(f, _)| f.once.is_none())
            {
                if !std::ptr::eq(&self.entities[f.entity], entity) {
                    continue;
                }
                if change.kind != ChangeKind::Remove {
                    let new = images.new_image().ok_or_else(|| InputError::Invalid {
                        key: change.key_display(),
                        reason: "no new image".into(),
                    })?;
                    let old_valid = images.old_image().filter(|_| images.old_valid());
                    if let Some(old) = old_valid {
                        if is_unless || attrs_equal(old, new, &f.reads) {
                            continue;
                        }
                    }
                }
                let mut bind = Vars::new();
                for ((b, _), v) in binders.iter().zip(&bound) {
                    let var = f
                        .rename
                        .iter()
                        .find(|(k, _)| k == b)
                        .map(|(_, v)| v.clone())
                        .unwrap_or_else(|| b.clone());
                    if !valid_var_value(v) {
                        // Never silence: the item is valid for everything
                        // else but cannot join (SPEC §8, `sets:`).
                        return Err(InputError::Invalid {
                            key: change.key_display(),
                            reason: format!(
                                "set `{}`: the key name `{b}` of `{}` holds a `#` (or is over 1024 bytes): a join set's key names cannot, so the item joins nothing",
                                set.name, entity.name
                            ),
                        });
                    }
                    bind.insert(var, v.to_string());
                }
                // `also`: the new image's variables, and the old one's when
                // they differ (a seeker who moved: both cities' scopes).
                let mut binds = Vec::new();
                if f.also.is_empty() {
                    binds.push(bind);
                } else {
                    let also_of = |parsed: &Result<Parsed<'_>, InputError>| -> Option<Vars> {
                        let mut b = bind.clone();
                        for (var, x) in &f.also {
                            let v = also_value_of(self, x, parsed).ok()?;
                            if !valid_var_value(&v) || b.get(var).is_some_and(|o| *o != v) {
                                return None;
                            }
                            b.insert(var.clone(), v);
                        }
                        Some(b)
                    };
                    binds.extend(images.parsed_new().and_then(also_of));
                    if let Some(b) = images.parsed_old().and_then(also_of) {
                        if !binds.contains(&b) {
                            binds.push(b);
                        }
                    }
                }
                for bind in binds {
                    let body = JoinJob {
                        set: set.name.to_string(),
                        scope: f.name.clone(),
                        bind,
                        step: 0,
                        after: None,
                    }
                    .encode();
                    out.push(OutMessage {
                        queue: set.queue.logical,
                        body,
                    });
                }
            }
        }
        Ok(out)
    }
}
