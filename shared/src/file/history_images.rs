//! What a history's descriptions read of an image: `old`, `new`,
//! `changes` and the latest image's attributes by their bare names, each
//! image converted once however many expressions read it.

use aws_sdk_dynamodb::types::AttributeValue;

use super::expr::{Arg, Expr, Prepared, Val};
use super::model::Entity;
use crate::item::Item;

/// An attribute value as expressions read it (lists are not read).
pub(super) fn val(v: &AttributeValue) -> Option<Val> {
    Some(match v {
        AttributeValue::S(s) => Val::Str(s.clone()),
        AttributeValue::N(n) => {
            super::values::nested_number(n).unwrap_or_else(|_| Val::Str(n.clone()))
        }
        AttributeValue::Bool(b) => Val::Bool(*b),
        AttributeValue::Ss(v) => {
            let mut v = v.clone();
            v.sort();
            Val::Set(v)
        }
        AttributeValue::Null(_) => Val::Null,
        AttributeValue::M(m) => Val::Map(
            m.iter()
                .filter_map(|(k, v)| val(v).map(|v| (k.clone(), v)))
                .collect(),
        ),
        _ => return None,
    })
}

/// An image as a map: its attributes, and the entity's declared ones it
/// lacks as `null`.
pub(super) fn image_map(e: &Entity, item: &Item) -> Vec<(String, Val)> {
    let mut out: Vec<(String, Val)> = item
        .iter()
        .filter_map(|(k, v)| val(v).map(|v| (k.clone(), v)))
        .collect();
    for a in &e.attrs {
        if !item.contains_key(a.name) {
            out.push((a.name.to_string(), Val::Null));
        }
    }
    out
}

static NULL: Val = Val::Null;

/// What a description reads: `old` and `new` (the images as maps, each
/// converted once however many expressions read it), `changes`, and the
/// attributes of the latest image by their bare names (the entity's
/// declared ones it lacks are `null`).
pub(super) struct Images<'i> {
    entity: &'i Entity,
    latest: Option<&'i Item>,
    old: Option<&'i Item>,
    new: Option<&'i Item>,
    old_map: std::cell::OnceCell<Prepared>,
    new_map: std::cell::OnceCell<Prepared>,
    changes: Option<Val>,
}

impl<'i> Images<'i> {
    pub(super) fn new(
        entity: &'i Entity,
        old: Option<&'i Item>,
        new: Option<&'i Item>,
        changes: Option<&str>,
    ) -> Self {
        Self {
            entity,
            latest: new.or(old),
            old,
            new,
            old_map: std::cell::OnceCell::new(),
            new_map: std::cell::OnceCell::new(),
            changes: changes.map(|c| Val::Str(c.to_string())),
        }
    }

    pub(super) fn eval(&self, env: &super::expr::Env, x: &Expr) -> Result<Val, String> {
        // The bare names `x` reads, each read once.
        let bare: Vec<(&str, Val)> = x
            .variables
            .iter()
            .filter(|n| match n.as_str() {
                "old" => self.old.is_none(),
                "new" => self.new.is_none(),
                "changes" => self.changes.is_none(),
                _ => true,
            })
            .map(|n| {
                let v = match self.latest {
                    Some(i) => match i.get(n.as_str()) {
                        Some(v) => val(v).unwrap_or(Val::Null),
                        None => Val::Null,
                    },
                    None => Val::Null,
                };
                (n.as_str(), v)
            })
            .collect();
        // `old` and `new` read only through some of their fields (the
        // `updated:` rules' `old.isArchived`): maps of those fields alone,
        // which evaluate the same (an attribute absent from the image and
        // undeclared stays absent, a declared one is `null`); read
        // otherwise, the whole image, converted once.
        let part = |var: &str, image: Option<&Item>| {
            image
                .zip(x.fields_of(var))
                .map(|(i, fields)| prepare_fields(self.entity, i, fields))
        };
        let old_part = part("old", self.old);
        let new_part = part("new", self.new);
        env.eval_with(x, |name| match name {
            "old" if self.old.is_some() => {
                self.old.map(|i| {
                    Arg::Prepared(old_part.as_ref().unwrap_or_else(|| {
                        self.old_map.get_or_init(|| prepare_map(self.entity, i))
                    }))
                })
            }
            "new" if self.new.is_some() => {
                self.new.map(|i| {
                    Arg::Prepared(new_part.as_ref().unwrap_or_else(|| {
                        self.new_map.get_or_init(|| prepare_map(self.entity, i))
                    }))
                })
            }
            "changes" if self.changes.is_some() => self.changes.as_ref().map(Arg::Val),
            _ => Some(Arg::Val(
                bare.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v)
                    .unwrap_or(&NULL),
            )),
        })
    }
}

fn prepare_map(e: &Entity, image: &Item) -> Prepared {
    Val::Map(image_map(e, image)).prepare()
}

/// [`prepare_map`] of the entries `fields` alone: each as [`image_map`]
/// has it (the image's value, `null` for a declared attribute it lacks,
/// else no entry).
fn prepare_fields(e: &Entity, image: &Item, fields: &[String]) -> Prepared {
    let entries = fields
        .iter()
        .filter_map(|f| match image.get(f) {
            Some(v) => val(v).map(|v| (f.clone(), v)),
            None => e
                .attrs
                .iter()
                .any(|a| a.name == f)
                .then(|| (f.clone(), Val::Null)),
        })
        .collect();
    Val::Map(entries).prepare()
}
