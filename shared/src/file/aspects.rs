//! What a writer's image implies, aspect by aspect, from its one parse
//! ([`FileRules`]' `aspects`): its projection, its derived items, its
//! contributions to counters and the ledger indexes it belongs to.

use aws_sdk_dynamodb::types::AttributeValue;

use std::collections::BTreeSet;

use super::each::{self, Element, Names};
use super::expr::{Expr, Val};
use super::model::{CountRule, DeriveRule, Each};
use super::rules::{to_attr, FileRules, Parsed, Record};
use crate::engine::rules::{Aspects, Contribution, Projection, Rules};
use crate::error::InputError;
use crate::item::{display_key, key_of, Item};
use crate::ledger::item_id;

/// The names a condition reads (none without one).
fn when(w: &Option<Expr>) -> impl Iterator<Item = &str> {
    w.iter()
        .flat_map(|x| x.variables.iter().map(String::as_str))
}

/// An aspect of a parse: why it waits, if it does, else `of` the parse.
fn unless_waiting<T>(
    waits: Option<InputError>,
    parsed: Result<&Parsed<'_>, &InputError>,
    of: impl FnOnce(&Parsed<'_>) -> Result<T, InputError>,
) -> Result<T, InputError> {
    match waits {
        Some(e) => Err(e),
        None => parsed.map_err(Clone::clone).and_then(of),
    }
}

/// A rule's results once per distinct element of its `each:` attribute
/// (`one` with the element bound): elements whose results share a key (a
/// key format that normalises `Rust` and `rust` alike: one item, one
/// counter) are one, the first element's.
fn per_element<T>(
    rec: &Record<'_>,
    x: &Each,
    elements: &each::Elements,
    key: impl Fn(&T) -> String,
    mut one: impl FnMut(&Element<'_, '_>) -> Result<Option<T>, InputError>,
) -> Result<Vec<T>, InputError> {
    let mut keys = BTreeSet::new();
    let mut out = Vec::new();
    for e in elements.of(x.attr) {
        let el = Element {
            rec,
            name: x.name,
            value: Val::Str(e.clone()),
        };
        if let Some(t) = one(&el)? {
            if keys.insert(key(&t)) {
                out.push(t);
            }
        }
    }
    Ok(out)
}

/// The aspects of an image that wait for a computed value, each with why.
#[derive(Default)]
struct Waiting {
    projection: Option<InputError>,
    derived: Option<InputError>,
    contributions: Option<InputError>,
}

impl FileRules {
    /// Every aspect of an image from its parse ([`Rules::aspects`]). Of a
    /// writer's image only its key is read here (errors name it; a row
    /// counts into its partition's version, a computed item joins its
    /// scope's index): its values are the record's.
    ///
    /// An aspect whose rules read a `compute:` value the image does not
    /// hold yet waits ([`InputError::NotComputed`]): it is not evaluated,
    /// and keeps what the item's last state with its values implied.
    pub(super) fn aspects_of(
        &self,
        parsed: Result<&Parsed<'_>, &InputError>,
        image: &Item,
    ) -> Aspects {
        self.aspects_with(parsed, image, None)
    }

    /// [`Self::aspects_of`] with the once effects the image asks for
    /// ([`super::model::FileModel::once_asked`]), computed already (a
    /// record's images keep them for its jobs) or, `None`, here. An effect
    /// that cannot be computed makes the image bad input as a whole, as an
    /// aspect that fails does (after them: theirs is said first).
    pub(super) fn aspects_with(
        &self,
        parsed: Result<&Parsed<'_>, &InputError>,
        image: &Item,
        once: Option<&Result<super::once_run::Asked, InputError>>,
    ) -> Aspects {
        let aspects = self.aspects_own(parsed, image);
        if aspects.refused().is_some() || self.0.once.is_empty() {
            return aspects;
        }
        let refused = match once {
            Some(asked) => asked.as_ref().err().cloned(),
            None => self.0.once_asked(parsed, image).err(),
        };
        match refused {
            Some(e) => Aspects::refused_as(e),
            None => aspects,
        }
    }

    /// The aspects of the image's own rules (its projection, derives,
    /// counts, ledger memberships), all or nothing.
    fn aspects_own(&self, parsed: Result<&Parsed<'_>, &InputError>, image: &Item) -> Aspects {
        let waits = match parsed {
            Ok(Parsed::Writer(rec)) if !rec.absent.is_empty() => self.waiting(rec, image),
            _ => Waiting::default(),
        };
        let projection = unless_waiting(waits.projection, parsed, |p| self.projection_of(p, image));
        let derived = unless_waiting(waits.derived, parsed, |p| self.derived_of(p, image));
        let contributions = unless_waiting(waits.contributions, parsed, |p| {
            self.contributions_of(p, image)
        });
        let memberships = self.memberships_of(parsed, image, &projection);
        Aspects {
            projection,
            derived,
            contributions,
            memberships,
        }
        .whole()
    }

    /// Which aspects of a record wait for its values not computed yet:
    /// those whose rules read one (a projection's `when` and attributes,
    /// a derive's `when` and `with`, a count's `when`, `with` and `add`).
    /// The ledger memberships wait only where a listing reads a waiting
    /// projection (see [`Self::memberships_of`]): the item's own place in
    /// its compute scope's index is its key's, never a value's.
    fn waiting(&self, rec: &Record<'_>, image: &Item) -> Waiting {
        let e = rec.entity;
        let not_computed = |names: Vec<&str>| {
            (!names.is_empty()).then(|| InputError::NotComputed {
                key: self.0.key_display(image),
                values: names.join(", "),
            })
        };
        let projection = e
            .project
            .iter()
            .flat_map(|p| p.sources.iter().copied())
            .collect::<Vec<_>>();
        let derived = e
            .derive
            .iter()
            .flat_map(|d| {
                let with = d.with.iter().flat_map(|(_, v)| v.reads());
                when(&d.when).chain(with)
            })
            .collect::<Vec<_>>();
        let contributions = e
            .count
            .iter()
            .flat_map(|c| {
                let with = c.with.iter().flat_map(|(_, v)| v.reads());
                let add = c.add.iter().flat_map(|(_, v)| v.reads());
                when(&c.when).chain(with).chain(add)
            })
            .collect::<Vec<_>>();
        Waiting {
            projection: not_computed(rec.waits_for(projection)),
            derived: not_computed(rec.waits_for(derived)),
            contributions: not_computed(rec.waits_for(contributions)),
        }
    }

    pub(super) fn projection_of(
        &self,
        parsed: &Parsed<'_>,
        image: &Item,
    ) -> Result<Option<Projection>, InputError> {
        let m = self.0;
        let counted;
        let rec = match parsed {
            Parsed::Writer(rec) => rec,
            // A counter whose keys come from its sums.
            Parsed::Processor(e) if e.counter.is_some() && e.project.is_some() => {
                counted = m.counter_record(e, image)?;
                &counted
            }
            Parsed::Processor(_) => return Ok(None),
        };
        let Some(p) = &rec.entity.project else {
            return Ok(None);
        };
        let on = m.holds(rec, &p.when).map_err(|e| m.bad(rec, image, e))?;
        // A counter's item is the processor's: a value its sums cannot give
        // (a sum past 64 bits, read as a `number`, in arithmetic) leaves
        // that attribute out, noted ([`FileModel::clamp_notes`]), never the
        // rest of its projection (its sparse key only compares the sum).
        let counter = !rec.entity.writer;
        let mut attrs = Vec::with_capacity(p.attrs.len());
        for (name, v) in &p.attrs {
            let value = if on {
                match m.eval(rec, v).and_then(|v| to_attr(name, v, None)) {
                    Ok(v) => v,
                    Err(_) if counter => None,
                    Err(e) => return Err(m.bad(rec, image, e)),
                }
            } else {
                None
            };
            attrs.push((*name, value));
        }
        Ok(Some(Projection {
            attrs,
            sources: p.sources.clone(),
        }))
    }

    fn derived_of(&self, parsed: &Parsed<'_>, image: &Item) -> Result<Vec<Item>, InputError> {
        let m = self.0;
        let Parsed::Writer(rec) = parsed else {
            return Ok(vec![]);
        };
        let elements = each::elements(rec).map_err(|e| m.bad(rec, image, e))?;
        let mut out = Vec::with_capacity(rec.entity.derive.len());
        for d in &rec.entity.derive {
            match &d.each {
                None => out.extend(self.derived_one(rec, rec, d, image)?),
                Some(x) => out.extend(per_element(
                    rec,
                    x,
                    &elements,
                    |item: &Item| item_id(&key_of(item, &m.key_names())),
                    |el| self.derived_one(el, rec, d, image),
                )?),
            }
        }
        Ok(out)
    }

    /// The item derive `d` implies with `names` (the record `rec`, or one
    /// of its elements), if its `when` holds.
    fn derived_one(
        &self,
        names: &impl Names,
        rec: &Record<'_>,
        d: &DeriveRule,
        image: &Item,
    ) -> Result<Option<Item>, InputError> {
        let m = self.0;
        if !m.holds(names, &d.when).map_err(|e| m.bad(rec, image, e))? {
            return Ok(None);
        }
        let target = &m.entities[d.target];
        let (key, bound) = m
            .key_for(names, target, &d.with)
            .map_err(|e| m.bad(rec, image, e))?;
        let mut item: Item = key
            .into_iter()
            .map(|(k, v)| (k.to_string(), AttributeValue::S(v)))
            .collect();
        for a in &target.attrs {
            if let Some((_, v)) = bound.iter().find(|(n, _)| n == a.name) {
                if let Some(v) =
                    to_attr(a.name, v.clone(), Some(&a.ty)).map_err(|e| m.bad(rec, image, e))?
                {
                    item.insert(a.name.to_string(), v);
                }
            }
        }
        for (a, v) in target.constants() {
            item.entry(a.to_string()).or_insert(v);
        }
        item.insert(
            m.entity_type.to_string(),
            AttributeValue::S(target.name.to_string()),
        );
        Ok(Some(item))
    }

    fn contributions_of(
        &self,
        parsed: &Parsed<'_>,
        image: &Item,
    ) -> Result<Vec<Contribution>, InputError> {
        let m = self.0;
        let Parsed::Writer(rec) = parsed else {
            return Ok(vec![]);
        };
        let elements = each::elements(rec).map_err(|e| m.bad(rec, image, e))?;
        let mut out = Vec::with_capacity(rec.entity.count.len());
        for c in &rec.entity.count {
            match &c.each {
                None => out.extend(self.contribution_one(rec, rec, c, image)?),
                Some(x) => out.extend(per_element(
                    rec,
                    x,
                    &elements,
                    |one: &Contribution| item_id(&one.counter.key_item()),
                    |el| self.contribution_one(el, rec, c, image),
                )?),
            }
        }
        out.extend(m.compute_contributions(rec, image));
        Ok(out)
    }

    /// What count `c` adds with `names` (the record `rec`, or one of its
    /// elements), if its `when` holds.
    fn contribution_one(
        &self,
        names: &impl Names,
        rec: &Record<'_>,
        c: &CountRule,
        image: &Item,
    ) -> Result<Option<Contribution>, InputError> {
        let m = self.0;
        if !m.holds(names, &c.when).map_err(|e| m.bad(rec, image, e))? {
            return Ok(None);
        }
        let target = &m.entities[c.counter];
        let key = if target.unique.is_empty() {
            m.key_for(names, target, &c.with)
                .map_err(|e| m.bad(rec, image, e))?
                .0
        } else {
            m.located_key_for(names, target, &c.with)
                .map_err(|e| m.bad(rec, image, e))?
        };
        let mut values = Vec::with_capacity(c.add.len());
        for (a, v) in &c.add {
            match m.eval(names, v).map_err(|e| m.bad(rec, image, e))? {
                Val::Int(n) => values.push((*a, n)),
                other => {
                    return Err(m.bad(
                        rec,
                        image,
                        format!("`{a}` amount is a {}, not an int", other.kind()),
                    ))
                }
            }
        }
        let counter = m.counter_of(target, key);
        // The counter's own rules must accept the key it computes
        // (`${userId:ulid}` bound to a value that is no ULID): else the
        // source is bad input and no total moves.
        if self.counter(&counter.key_item()).is_none() {
            return Err(m.bad(
                rec,
                image,
                format!(
                    "it counts into {}, a key `{}` rejects",
                    display_key(&counter.key_item()),
                    target.name
                ),
            ));
        }
        Ok(Some(Contribution { counter, values }))
    }

    /// The ledger indexes an item belongs to, from its parse and projection.
    fn memberships_of(
        &self,
        parsed: Result<&Parsed<'_>, &InputError>,
        image: &Item,
        projection: &Result<Option<Projection>, InputError>,
    ) -> Result<Vec<(String, String)>, InputError> {
        let m = self.0;
        let facts: Vec<&super::sets::SetFact> = m
            .sets
            .iter()
            .flat_map(|s| &s.facts)
            .filter(|f| f.via_index.is_some())
            .collect();
        let computes = m.entities.iter().any(|e| e.compute.is_some());
        if facts.is_empty() && !computes {
            return Ok(vec![]);
        }
        let Parsed::Writer(rec) = parsed.map_err(Clone::clone)? else {
            return Ok(vec![]);
        };
        let mut out = m.compute_memberships(rec, image);
        for f in facts {
            let Some((index, pk, sk)) = &f.via_index else {
                continue;
            };
            if !std::ptr::eq(&m.entities[f.entity], rec.entity) {
                continue;
            }
            let Some(p) = projection.clone()? else {
                continue;
            };
            let get = |a: &str| {
                p.attrs
                    .iter()
                    .find(|(n, _)| *n == a)
                    .and_then(|(_, v)| v.as_ref())
                    .and_then(|v| v.as_s().ok())
                    .cloned()
            };
            if let (Some(pv), Some(sv)) = (get(pk), get(sk)) {
                out.push((format!("{index}#{pv}"), sv));
            }
        }
        Ok(out)
    }
}
