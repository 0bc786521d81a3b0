//! Keys computed from numbers: a counter's `project:` (its index keys from
//! its sums, written by the engine in the same update as the sums) and the
//! notes of a number `pad` clamped into a key (logged with the item's key
//! and counted as `ScoreOverflow` when the write that stores it commits).

use super::expr::{recording_clamps, Val};
use super::model::{Entity, FileModel};
use super::rules::{key_val, Parsed, Record};
use super::values::stored_sum;
use crate::engine::rules::Note;
use crate::error::InputError;
use crate::item::{Item, ItemExt};
use crate::metrics::names;

impl FileModel {
    /// What a counter item's expressions read: its key names (typed by
    /// their format) and its sums as stored (an integer, else 0: a
    /// writer's stray value, which the engine brings back to the sum).
    pub(super) fn counter_record<'m>(
        &'m self,
        entity: &'m Entity,
        image: &Item,
    ) -> Result<Record<'m>, InputError> {
        let [pkn, skn] = self.key_names();
        let err = |source| InputError::Attribute {
            entity: entity.name,
            key: self.key_display(image),
            source,
        };
        let pk = image.s(pkn).map_err(err)?;
        let sk = image.s(skn).map_err(err)?;
        let bound = entity.key[0]
            .template
            .matches(pk)
            .zip(entity.key[1].template.matches(sk))
            .map(|(mut a, b)| {
                a.extend(b);
                a
            })
            .ok_or_else(|| InputError::UnknownEntity {
                key: self.key_display(image),
            })?;
        let mut vals: Vec<(&str, Val)> = Vec::new();
        for ((name, format), value) in entity.key_binders().zip(&bound) {
            if vals.iter().any(|(n, _)| *n == name) {
                continue;
            }
            vals.push((
                name,
                key_val(entity, name, format, value, &self.formats).map_err(err)?,
            ));
        }
        for a in entity.counter.iter().flat_map(|c| c.attrs.iter()) {
            vals.push((a, stored_sum(image, a)));
        }
        Ok(Record {
            entity,
            vals,
            absent: vec![],
        })
    }

    /// The numbers `pad` clamps in this item's projection, one note each
    /// (pure: the engine logs and counts a note when it writes the
    /// projection, never when the key is already stored).
    pub(super) fn clamp_notes(&self, image: &Item) -> Vec<Note> {
        // Only `pad` clamps: an item whose projection calls it nowhere has
        // nothing to note (and is not parsed again for it).
        let [pkn, skn] = self.key_names();
        let (Ok(pk), Ok(sk)) = (image.s(pkn), image.s(skn)) else {
            return vec![];
        };
        if !self
            .classify(pk, sk)
            .is_some_and(|(e, _)| pads(e) || counts_into(e))
        {
            return vec![];
        }
        match self.parse(image) {
            Ok(Parsed::Writer(rec)) => self.notes_of(&rec),
            Ok(Parsed::Processor(e)) if e.counter.is_some() && e.project.is_some() => {
                match self.counter_record(e, image) {
                    Ok(rec) => self.notes_of(&rec),
                    Err(_) => vec![],
                }
            }
            _ => vec![],
        }
    }

    /// [`FileModel::clamp_notes`] of an item already parsed.
    pub(super) fn notes_of(&self, rec: &Record<'_>) -> Vec<Note> {
        let e = rec.entity;
        let Some(p) = e.project.as_ref().filter(|_| pads(e) || counts_into(e)) else {
            return vec![];
        };
        if !matches!(self.holds(rec, &p.when), Ok(true)) {
            return vec![];
        }
        let mut out = Vec::new();
        for (name, v) in &p.attrs {
            let (value, clamps) = recording_clamps(|| self.eval(rec, v));
            let value = match value {
                Ok(value) => value,
                // A counter's attribute its sums cannot give is left out
                // (see `projection_of`).
                Err(why) if counts_into(e) => {
                    out.push(Note {
                        metric: names::SCORE_OVERFLOW,
                        reason: format!(
                            "{}.{name}: not computed, left out of the item: {why} (a sum past 64 bits is a `number`, which is compared and copied, never computed)",
                            e.name
                        ),
                    });
                    continue;
                }
                Err(_) => continue,
            };
            for c in clamps {
                out.push(Note {
                    metric: names::SCORE_OVERFLOW,
                    reason: format!(
                        "{}.{name}: {} does not fit {} digits: clamped in the key only ({})",
                        rec.entity.name,
                        c.value,
                        c.width,
                        value.render()
                    ),
                });
            }
        }
        out
    }
}

/// Whether an entity is a counter the processor keeps (its projection
/// may leave out what its sums cannot give).
fn counts_into(e: &Entity) -> bool {
    !e.writer && e.counter.is_some() && e.project.is_some()
}

/// Whether an entity's projection calls `pad` (the only function that
/// clamps).
fn pads(e: &Entity) -> bool {
    e.project.as_ref().is_some_and(|p| {
        p.attrs.iter().any(|(_, v)| {
            v.0.iter().any(|part| {
                matches!(part, super::template::Part::Hole(x, _) if x.functions.iter().any(|f| f == "pad"))
            })
        })
    })
}
