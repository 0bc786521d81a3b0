//! The [`Rules`] a model file produces: an item is recognised by the key
//! templates it matches, validated (entity type, every attribute's type,
//! enums, ULIDs, checks, keys that agree with the attributes), and only then
//! does it imply anything. Bad input changes nothing and blocks nothing.

use aws_sdk_dynamodb::types::AttributeValue;

use super::each::Names;
use super::expr::Val;
use super::model::{Entity, FileModel, Ty, Value};
use super::template::Part;
use super::values::invalid;
pub(super) use super::values::{
    check_str, key_val, read_attr, read_held, stored_int, to_attr, typed_str,
};
use crate::engine::rules::{Aspects, Contribution, Counter, Projection, Rules};
use crate::error::InputError;
use crate::item::{display_key, key_of, AttrError, Item, ItemExt};

/// Key attribute names and their string values.
pub(super) type KeyValues = Vec<(&'static str, String)>;

/// The rules of a loaded model file.
#[derive(Debug, Clone, Copy)]
pub struct FileRules(pub &'static FileModel);

/// A validated writer item: its entity and the values expressions read.
pub struct Record<'m> {
    pub entity: &'m Entity,
    pub(super) vals: Vec<(&'m str, Val)>,
    /// Its `compute:` values the image does not hold (absent): not
    /// computed yet. `vals` holds 0 for each (what a value its job never
    /// wrote is to the job and the history), but no check, projection,
    /// derive or count reads them: the aspects that would wait
    /// ([`Record::waits_for`]).
    pub(super) absent: Vec<&'m str>,
}

impl Record<'_> {
    pub(super) fn get(&self, name: &str) -> Option<&Val> {
        self.vals.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// Sets a value the record holds (a computed value, as a job will
    /// store it).
    pub(super) fn set(&mut self, name: &str, value: Val) {
        if let Some((_, v)) = self.vals.iter_mut().find(|(n, _)| *n == name) {
            *v = value;
        }
        self.absent.retain(|a| *a != name);
    }

    /// The computed values among `names` the record does not hold yet.
    pub(super) fn waits_for<'n>(&self, names: impl IntoIterator<Item = &'n str>) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for n in names {
            if let Some(a) = self.absent.iter().find(|a| **a == n) {
                if !out.contains(a) {
                    out.push(a);
                }
            }
        }
        out
    }
}

#[cfg(test)]
thread_local! {
    /// Items parsed on this thread (tests count what a step costs).
    pub(super) static PARSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// Checks evaluated on this thread.
    pub(super) static CHECKS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Items [`FileModel::parse`] parses while `f` runs on this thread.
#[cfg(test)]
pub(super) fn parses<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = PARSES.with(std::cell::Cell::get);
    let out = f();
    (out, PARSES.with(std::cell::Cell::get) - before)
}

/// Checks evaluated while `f` runs on this thread.
#[cfg(test)]
pub(super) fn checks_run<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = CHECKS.with(std::cell::Cell::get);
    let out = f();
    (out, CHECKS.with(std::cell::Cell::get) - before)
}

/// What an item is.
pub enum Parsed<'m> {
    Writer(Record<'m>),
    /// A processor-owned item: implies nothing.
    Processor(&'m Entity),
}

/// The values `pk`/`sk` bind in entity `e`'s key templates, when they match.
fn key_bound<'k>(e: &Entity, pk: &'k str, sk: &'k str) -> Option<Vec<&'k str>> {
    let mut bound = e.key[0].template.matches(pk)?;
    bound.extend(e.key[1].template.matches(sk)?);
    Some(bound)
}

impl FileModel {
    /// The entity whose key templates an item's keys match, if any.
    fn entity_of_key(&self, key: &Item) -> Option<&Entity> {
        let [pkn, skn] = self.key_names();
        let (Ok(pk), Ok(sk)) = (key.s(pkn), key.s(skn)) else {
            return None;
        };
        self.classify(pk, sk).map(|(e, _)| e)
    }

    pub(super) fn key_display(&self, item: &Item) -> String {
        display_key(&key_of(item, &self.key_names()))
    }

    fn attr_err(&self, entity: &'static str, item: &Item, source: AttrError) -> InputError {
        InputError::Attribute {
            entity,
            key: self.key_display(item),
            source,
        }
    }

    /// A key binder's value as keys hold it: normalised when its format
    /// says so (`${city:city}` of `New York` is `new-york`).
    pub(super) fn key_part(&self, format: Option<&str>, v: String) -> String {
        let norm = format
            .and_then(|f| self.formats.iter().find(|x| x.name == f))
            .and_then(|f| f.normalize);
        match norm {
            Some(n) => n.apply(&v),
            None => v,
        }
    }

    /// The entity whose key templates match `pk`/`sk`, with the bound values.
    pub fn classify<'k>(&self, pk: &'k str, sk: &'k str) -> Option<(&Entity, Vec<&'k str>)> {
        self.classify_fit(pk, sk).map(|(e, bound, _)| (e, bound))
    }

    /// [`FileModel::classify`], and whether the bound values fit the
    /// entity's types: `false` only for an entity told apart by its
    /// values' types when no such entity's fit (the first that matches
    /// is then returned).
    fn classify_fit<'k>(&self, pk: &'k str, sk: &'k str) -> Option<(&Entity, Vec<&'k str>, bool)> {
        let matching = |e: &'_ Entity| key_bound(e, pk, sk);
        let mut entities = self.entities.iter();
        let (first, bound) = entities.find_map(|e| matching(e).map(|b| (e, b)))?;
        // An entity told apart from another only by its values' types
        // (`ORDER#${orderId:uid}` and `ORDER#${orderId:uid}#LINE#${sku}`):
        // the first whose values fit, else the first that matches (whose
        // parse then says which value does not fit, or the entity its
        // item's `type` names does: see [`FileModel::parse_after`]).
        if first.by_type && !self.fits(first, &bound) {
            return Some(
                entities
                    .filter(|e| e.by_type)
                    .find_map(|e| {
                        matching(e)
                            .filter(|b| self.fits(e, b))
                            .map(|b| (e, b, true))
                    })
                    .unwrap_or((first, bound, false)),
            );
        }
        Some((first, bound, true))
    }

    /// The first value `bound` (by `e`'s key templates) holds that its
    /// binder's type refuses: the binder, the value and why.
    fn refused_part<'b, 'k>(
        &self,
        e: &'b Entity,
        bound: &[&'k str],
    ) -> Option<(&'b super::template::Binder, &'k str, String)> {
        e.key
            .iter()
            .flat_map(|k| k.template.binders())
            .zip(bound)
            .find_map(
                |(b, v)| match super::model::binder_check(e, b, v, &self.formats) {
                    Err(AttrError::Invalid { reason, .. }) => Some((b, *v, reason)),
                    _ => None,
                },
            )
    }

    /// An item whose key fits no entity's types, stamped (its `type`) as
    /// writer entity `t` whose key templates match the key: the bad input
    /// of a `t`, naming the key part `t`'s types refuse.
    fn refused_as(&self, t: &str, pk: &str, sk: &str, item: &Item) -> Option<InputError> {
        let e = self.entities.iter().find(|e| e.writer && e.name == t)?;
        let bound = key_bound(e, pk, sk)?;
        let (b, v, reason) = self.refused_part(e, &bound)?;
        let part = AttrError::KeyPart {
            name: b.name.clone(),
            value: v.to_string(),
            reason,
        };
        Some(self.attr_err(e.name, item, part))
    }

    /// Why `pk`/`sk` is not the key of writer entity `t` (an item's `type`
    /// naming another entity than its key's): the key value that does not
    /// fit `t`'s type for it, or that the key has another shape. `None`
    /// when `t` is no writer entity.
    fn not_its_key(&self, t: &str, pk: &str, sk: &str) -> Option<String> {
        let e = self.entities.iter().find(|e| e.writer && e.name == t)?;
        let Some(bound) = key_bound(e, pk, sk) else {
            return Some(format!("its key is not of a `{t}`'s shape"));
        };
        self.refused_part(e, &bound)
            .map(|(b, v, reason)| format!("as a `{t}`, its key's `{}` is `{v}`: {reason}", b.name))
    }

    /// Whether the values a key binds fit their binders' types.
    fn fits(&self, e: &Entity, bound: &[&str]) -> bool {
        e.key
            .iter()
            .flat_map(|k| k.template.binders())
            .zip(bound)
            .all(|(b, v)| super::model::binder_fits(e, b, v, &self.formats))
    }

    /// Classifies and validates a whole item.
    pub fn parse(&self, item: &Item) -> Result<Parsed<'_>, InputError> {
        self.parse_after(item, None)
    }

    /// [`FileModel::parse`] of an item whose `known` record (another image
    /// of it, valid: its old image) is at hand: a check that reads only
    /// values equal in both passed there and is not run again (a check is
    /// a pure function of the values it reads).
    pub(super) fn parse_after(
        &self,
        item: &Item,
        known: Option<&Record<'_>>,
    ) -> Result<Parsed<'_>, InputError> {
        #[cfg(test)]
        PARSES.with(|n| n.set(n.get() + 1));
        let [pkn, skn] = self.key_names();
        let pk = item.s(pkn).map_err(|e| self.attr_err("item", item, e))?;
        let sk = item.s(skn).map_err(|e| self.attr_err("item", item, e))?;
        let (entity, bound, fits) =
            self.classify_fit(pk, sk)
                .ok_or_else(|| InputError::UnknownEntity {
                    key: self.key_display(item),
                })?;
        if !entity.writer {
            return Ok(Parsed::Processor(entity));
        }
        let err = |e: AttrError| self.attr_err(entity.name, item, e);
        if self.writer_type_checked && !entity.foreign {
            let t = item.s(self.entity_type).map_err(err)?;
            if t != entity.name {
                // A key no entity's types fit, read as the first entity
                // that matches it: the entity the item says it is, when
                // its templates match too, says which part it refuses
                // (user14: an activity whose key's `at` is `yesterday`
                // was a `deal` whose `type` does not match).
                if let Some(e) = (!fits).then(|| self.refused_as(t, pk, sk, item)).flatten() {
                    return Err(e);
                }
                let why = self
                    .not_its_key(t, pk, sk)
                    .map(|w| format!("; {w}"))
                    .unwrap_or_default();
                return Err(err(invalid(
                    self.entity_type,
                    format!("does not match the key (expected `{}`){why}", entity.name),
                )));
            }
        }
        let mut vals: Vec<(&str, Val)> = Vec::with_capacity(entity.attrs.len() + bound.len());
        // An optional attribute the item lacks reads as its key holds it
        // ([`read_held`]); one it holds must agree with the key (below).
        let parts = || {
            entity
                .key_binders()
                .map(|(n, _)| n)
                .zip(bound.iter().copied())
        };
        for a in &entity.attrs {
            vals.push((a.name, read_held(item, a, parts()).map_err(err)?));
        }
        // Computed attributes as stored: an int, else 0 (a writer's stray
        // value the compute job brings back); absent, not computed yet (a
        // writer's put replaced the item, or its job has not written it
        // first): held as 0 and listed as absent.
        let mut absent = Vec::new();
        for a in entity.computed() {
            vals.push((a, Val::Int(stored_int(item, a))));
            if !item.contains_key(a) {
                absent.push(a);
            }
        }
        // Names bound only by the key: validated by their format.
        for ((name, format), value) in entity.key_binders().zip(&bound) {
            if entity.attr(name).is_some() || vals.iter().any(|(n, _)| *n == name) {
                // The key's part is still of the binder's format.
                if let Some(Ty::Format(f)) =
                    format.and_then(|f| super::formats::named(f, &self.formats))
                {
                    if let Some(why) = f.reject(value) {
                        return Err(err(invalid(name, why)));
                    }
                }
                continue;
            }
            let ty = format.and_then(|f| super::formats::named(f, &self.formats));
            vals.push((name, typed_str(name, value, ty.as_ref()).map_err(err)?));
        }
        let record = Record {
            entity,
            vals,
            absent,
        };
        // (A known image without a computed value did not run the checks
        // that read it.)
        let known = known.filter(|k| std::ptr::eq(k.entity, entity) && k.absent.is_empty());
        // A check that reads a value not computed yet is not run: the job
        // runs it with the value it writes.
        self.check(&record, item, |c| {
            record
                .waits_for(c.expr.variables.iter().map(String::as_str))
                .is_empty()
                && known.is_none_or(|k| !c.expr.variables.iter().all(|v| k.get(v) == record.get(v)))
        })?;
        // The keys must be the ones built from the attributes.
        let expected: Vec<String> = entity
            .key
            .iter()
            .map(|k| {
                let vals: Vec<String> = k
                    .template
                    .binders()
                    .map(|b| {
                        let v = record.get(&b.name).map(Val::render).unwrap_or_default();
                        self.key_part(b.format.as_deref(), v)
                    })
                    .collect();
                k.template.build(&vals)
            })
            .collect();
        if expected[0] != pk || expected[1] != sk {
            return Err(InputError::Invalid {
                key: self.key_display(item),
                reason: format!(
                    "{}: keys do not match the attributes (expected {pkn}={}, {skn}={})",
                    entity.name, expected[0], expected[1]
                ),
            });
        }
        Ok(Parsed::Writer(record))
    }

    /// Runs the entity's checks that `which` selects on a record of `item`:
    /// the first that fails is the item's bad input.
    pub(super) fn check(
        &self,
        record: &Record<'_>,
        item: &Item,
        which: impl Fn(&super::model::Check) -> bool,
    ) -> Result<(), InputError> {
        let err = |e: AttrError| self.attr_err(record.entity.name, item, e);
        for c in record.entity.checks.iter().filter(|c| which(c)) {
            #[cfg(test)]
            CHECKS.with(|n| n.set(n.get() + 1));
            match self.env.eval(&c.expr, |n| record.get(n)) {
                Ok(Val::Bool(true)) => {}
                Ok(Val::Bool(false)) => return Err(err(invalid(c.attribute, c.message.clone()))),
                // The check's own message first, as when it is false; the
                // cause after it.
                Ok(other) => {
                    return Err(err(invalid(
                        c.attribute,
                        format!(
                            "{} (the check `{}` gave a {}, not a bool)",
                            c.message,
                            c.expr.source,
                            other.kind()
                        ),
                    )))
                }
                Err(e) => {
                    // The evaluator's error names the expression first.
                    let prefix = format!("`{}`: ", c.expr.source);
                    let cause = e.strip_prefix(&prefix).unwrap_or(&e);
                    return Err(err(invalid(
                        c.attribute,
                        format!(
                            "{} (the check `{}` could not be evaluated: {cause})",
                            c.message, c.expr.source
                        ),
                    )));
                }
            }
        }
        Ok(())
    }

    pub(super) fn eval(&self, rec: &impl Names, v: &Value) -> Result<Val, String> {
        self.eval_value(v, |n| rec.value(n))
    }

    /// A value with `lookup` giving each name it reads: one expression
    /// keeps its type, a template renders to a string.
    pub(super) fn eval_value<'a>(
        &self,
        v: &Value,
        lookup: impl Fn(&str) -> Option<&'a Val> + Copy,
    ) -> Result<Val, String> {
        if let [Part::Hole(e, _)] = v.0.as_slice() {
            return self.env.eval(e, lookup);
        }
        let mut out = String::new();
        for p in &v.0 {
            match p {
                Part::Lit(l) => out.push_str(l),
                Part::Hole(e, _) => out.push_str(&self.env.eval(e, lookup)?.render()),
            }
        }
        Ok(Val::Str(out))
    }

    pub(super) fn holds(
        &self,
        rec: &impl Names,
        when: &Option<super::expr::Expr>,
    ) -> Result<bool, String> {
        match when {
            None => Ok(true),
            Some(e) => self.env.eval(e, |n| rec.value(n))?.bool_of(&e.source),
        }
    }

    pub(super) fn bad(&self, rec: &Record, item: &Item, reason: String) -> InputError {
        InputError::Invalid {
            key: self.key_display(item),
            reason: format!("{}: {reason}", rec.entity.name),
        }
    }
}

impl Rules for FileRules {
    fn key_names(&self) -> &'static [&'static str] {
        // Built once per loaded model (see `super::load`).
        self.0.keys
    }

    /// Each aspect is the whole item's answer ([`Aspects::whole`]): an
    /// item one expression fails on is bad input in all of them.
    fn projection(&self, image: &Item) -> Result<Option<Projection>, InputError> {
        self.aspects(image).projection
    }

    /// A number `pad` clamped into a projected key ([`FileModel::clamp_notes`]).
    fn notes(&self, image: &Item) -> Vec<crate::engine::rules::Note> {
        self.0.clamp_notes(image)
    }

    fn derived(&self, image: &Item) -> Result<Vec<Item>, InputError> {
        self.aspects(image).derived
    }

    fn ttl_attribute(&self) -> Option<&'static str> {
        self.0.table.ttl_attribute
    }

    fn contributions(&self, image: &Item) -> Result<Vec<Contribution>, InputError> {
        self.aspects(image).contributions
    }

    /// Every aspect from one parse of the image (validation and checks run
    /// once per record, not once per aspect).
    fn aspects(&self, image: &Item) -> Aspects {
        self.aspects_of(self.0.parse(image).as_ref(), image)
    }

    /// Both images' aspects and the jobs, from one parse of each image.
    fn record(&self, change: &crate::change::Change) -> crate::engine::rules::RecordSays {
        self.record_of(change)
    }

    /// The images differ only in what the processors write onto an item of
    /// its entity (its projection, computed values, counter sums and, on
    /// the history's root, the mirror); a key no entity has: never.
    fn processor_owned_only(&self, old: &Item, new: &Item) -> bool {
        let m = self.0;
        let [pkn, skn] = m.key_names();
        let (Ok(pk), Ok(sk)) = (new.s(pkn), new.s(skn)) else {
            return false;
        };
        let Some((entity, _)) = m.classify(pk, sk) else {
            return false;
        };
        let mirror = m
            .history
            .as_ref()
            .filter(|h| std::ptr::eq(&m.entities[h.root.entity], entity))
            .map(|h| h.mirror);
        let owned = |a: &str| entity.processor_owned().chain(mirror).any(|o| o == a);
        old.keys()
            .chain(new.keys())
            .filter(|a| !owned(a))
            .all(|a| old.get(a) == new.get(a))
    }

    fn counter(&self, image: &Item) -> Option<Counter> {
        let m = self.0;
        let [pkn, skn] = m.key_names();
        let pk = image.s(pkn).ok()?;
        let sk = image.s(skn).ok()?;
        // A located counter's logical key (`unique:`), or an item that
        // carries the identity: the counter of that identity.
        if let Some((e, values)) = super::locate::parse_logical(&m.entities, m.key_names(), image) {
            super::locate::identity(e, &values)?;
            return Some(m.counter_of(e, super::locate::logical_key(m.key_names(), e, &values)));
        }
        let (entity, bound) = m.classify(pk, sk)?;
        entity.counter.as_ref()?;
        if !entity.unique.is_empty() {
            let Ok(Parsed::Writer(rec)) = m.parse(image) else {
                return None;
            };
            let values = entity
                .unique
                .iter()
                .map(|u| rec.get(u).map(Val::render))
                .collect::<Option<Vec<String>>>()?;
            return Some(m.counter_of(
                entity,
                super::locate::logical_key(m.key_names(), entity, &values),
            ));
        }
        // From the key alone: every bound name valid by its type or format.
        for ((name, format), value) in entity.key_binders().zip(&bound) {
            let ty = entity
                .attr(name)
                .map(|a| a.ty.clone())
                .or_else(|| format.and_then(|f| super::formats::named(f, &m.formats)));
            if let Some(ty) = ty {
                check_str(name, value, &ty).ok()?;
            }
        }
        Some(m.counter_of(entity, vec![(pkn, pk.to_string()), (skn, sk.to_string())]))
    }

    /// The ledger listings of the sets' `via` an index: the index keys this
    /// item projects, while its projection holds them (exact and read
    /// consistently, where the GSI itself may lag).
    fn memberships(&self, image: &Item) -> Result<Vec<(String, String)>, InputError> {
        self.aspects(image).memberships
    }

    /// Items of a processor entity declared `shared: true`.
    fn shared(&self, derived_key: &Item) -> bool {
        self.0
            .entity_of_key(derived_key)
            .is_some_and(|e| !e.writer && e.shared)
    }

    /// Items of a processor entity some writer entity derives: `verify`
    /// reports one no source implies.
    fn is_derived(&self, key: &Item) -> bool {
        let m = self.0;
        m.entity_of_key(key).is_some_and(|e| {
            !e.writer
                && m.entities
                    .iter()
                    .flat_map(|w| &w.derive)
                    .any(|d| std::ptr::eq(&m.entities[d.target], e))
        })
    }

    fn shares(&self) -> bool {
        self.0.entities.iter().any(|e| !e.writer && e.shared)
    }

    fn locates(&self) -> bool {
        self.0.entities.iter().any(|e| !e.unique.is_empty())
    }

    /// A `unique:` entity's logical counter key: found through the items
    /// that carry its identity.
    fn locate(&self, counter_key: &Item) -> Option<crate::engine::locate::Locate> {
        let m = self.0;
        let (e, values) = super::locate::parse_logical(&m.entities, m.key_names(), counter_key)?;
        super::locate::identity(e, &values)
    }

    /// Keys no counter entity of the file matches any more.
    fn stale_counter(&self, key: &Item) -> bool {
        let m = self.0;
        if super::locate::parse_logical(&m.entities, m.key_names(), key).is_some() {
            return false;
        }
        !m.is_compute_version(key) && m.entity_of_key(key).is_none_or(|e| e.counter.is_none())
    }

    /// An item no entity matches, stamped (the entity type attribute) as a
    /// counter the processor creates: a counter of an earlier key template.
    /// A writer's item is stamped with a writer entity, never this.
    fn stale_counter_item(&self, item: &Item) -> bool {
        let m = self.0;
        let Ok(stamp) = item.s(m.entity_type) else {
            return false;
        };
        let stamped = m.entities.iter().any(|e| {
            e.name == stamp
                && !e.writer
                && e.counter.as_ref().is_some_and(|c| c.created_by_processor)
        });
        stamped && m.entity_of_key(&key_of(item, &m.key_names())).is_none()
    }

    /// An item no entity matches, stamped with a processor entity some
    /// writer entity derives, or a join set's target entity (ops16 #5):
    /// an item the processor made under an earlier key template.
    fn stale_derived_item(&self, item: &Item) -> bool {
        self.0.stale_derived(item)
    }

    /// An item no entity matches, stamped with a name no writer entity
    /// has (a counter entity removed from the file stamped it, or an
    /// application): the ledger's totals tell which.
    fn removed_counter_item(&self, item: &Item) -> bool {
        let m = self.0;
        let Ok(stamp) = item.s(m.entity_type) else {
            return false;
        };
        !m.entities.iter().any(|e| e.name == stamp && e.writer)
            && m.entity_of_key(&key_of(item, &m.key_names())).is_none()
    }

    /// Every attribute of a processor-created counter of a processor
    /// entity that is none of its key names, its type stamp, the table's
    /// TTL attribute, the entity's declared attributes, its sums or its
    /// projection's attributes.
    fn unowned_attributes(&self, item: &Item) -> Vec<String> {
        let m = self.0;
        let [pkn, skn] = m.key_names();
        let (Ok(pk), Ok(sk)) = (item.s(pkn), item.s(skn)) else {
            return Vec::new();
        };
        let Some((e, _)) = m.classify(pk, sk) else {
            return Vec::new();
        };
        if e.writer || e.foreign || !e.counter.as_ref().is_some_and(|c| c.created_by_processor) {
            return Vec::new();
        }
        let known = |a: &str| {
            a == pkn
                || a == skn
                || a == m.entity_type
                || m.table.ttl_attribute == Some(a)
                || e.attr(a).is_some()
                || e.processor_owned().any(|o| o == a)
        };
        item.keys().filter(|a| !known(a)).cloned().collect()
    }

    /// The jobs a change starts (`sets:`, `once:`, `compute:`).
    fn messages(
        &self,
        change: &crate::change::Change,
    ) -> Result<Vec<crate::engine::rules::OutMessage>, InputError> {
        let images = super::record::Images::of(self.0, change);
        self.messages_of(&images, self.rejected(&images))
    }

    /// Every computed value (`compute:`) against what its rows imply, every
    /// join set's targets and once effect (see [`super::verify_jobs`]).
    fn checks(&self, input: &crate::models::CheckInput<'_>) -> Vec<crate::models::Finding> {
        let mut out = self.0.compute_checks(input);
        out.extend(self.0.job_checks(input));
        out
    }

    fn awaited(&self, change: &crate::change::Change) -> bool {
        self.0.awaited(change)
    }

    fn awaits(&self) -> bool {
        self.0.awaits()
    }

    fn once_queue(&self, queue: &str) -> Option<&'static str> {
        self.0.once_queue(queue)
    }

    fn ignores(&self, keys: &Item) -> bool {
        let m = self.0;
        let [pkn, skn] = m.key_names();
        let (Ok(pk), Ok(sk)) = (keys.s(pkn), keys.s(skn)) else {
            return false;
        };
        m.classify(pk, sk)
            .is_some_and(|(e, _)| !e.writer && e.counter.is_none())
    }
}

impl FileModel {
    /// [`Rules::stale_derived_item`]: an item no entity matches, stamped
    /// with a processor entity some writer entity derives or a join set
    /// writes.
    pub(super) fn stale_derived(&self, item: &Item) -> bool {
        let Ok(stamp) = item.s(self.entity_type) else {
            return false;
        };
        let made = self.entities.iter().any(|e| {
            e.name == stamp
                && !e.writer
                && (self
                    .entities
                    .iter()
                    .flat_map(|w| &w.derive)
                    .any(|d| std::ptr::eq(&self.entities[d.target], e))
                    || self
                        .sets
                        .iter()
                        .any(|s| std::ptr::eq(&self.entities[s.target], e)))
        });
        made && self
            .entity_of_key(&key_of(item, &self.key_names()))
            .is_none()
    }

    pub(super) fn counter_of(&self, entity: &Entity, key: Vec<(&'static str, String)>) -> Counter {
        let def = entity.counter.as_ref();
        Counter {
            key,
            attrs: def.map(|d| d.attrs).unwrap_or(&[]),
            create: def.filter(|d| d.created_by_processor).map(|_| {
                let stamp = (self.entity_type, AttributeValue::S(entity.name.to_string()));
                std::iter::once(stamp).chain(entity.constants()).collect()
            }),
            remove_at_zero: def.is_some_and(|d| d.remove_at_zero),
        }
    }
}
