//! What a history reads of the names an item's keys bind: an optional
//! attribute the item lacks, and a name only the keys bind (an import's
//! `playlistId_lower`, ElectroDB's padded `position_key`), as the keys
//! hold them, for its descriptions and its members' parts.

use std::borrow::Cow;

use super::history::FileHistory;
use super::model::Entity;
use super::rules::{key_val, to_attr};
use super::values::{fill_from_key, lacks_key_held};
use crate::item::{Item, ItemExt};

impl FileHistory {
    /// Sets on `out` (an image or a part of entity `e`) what its record
    /// reads of the names `bound` gives (each key binder's name, format
    /// and value), where `keep` selects the name: an optional attribute it
    /// lacks, and a name only the key binds (as the key holds it, typed by
    /// its format).
    pub(super) fn fill_key_names(
        &self,
        e: &Entity,
        bound: &[(&str, Option<&str>, &str)],
        out: &mut Item,
        keep: impl Fn(&str) -> bool,
    ) {
        let pairs: Vec<(&str, &str)> = bound.iter().map(|(n, _, v)| (*n, *v)).collect();
        fill_from_key(e, &pairs, out, &keep);
        let mut done: Vec<&str> = Vec::new();
        for (name, format, v) in bound {
            if e.attr(name).is_some() || done.contains(name) || !keep(name) {
                continue;
            }
            done.push(name);
            let typed = key_val(e, name, *format, v, &self.0.formats).ok();
            if let Some(Ok(Some(v))) = typed.map(|t| to_attr(name, t, None)) {
                out.insert(name.to_string(), v);
            }
        }
    }

    /// `item` (an image of entity `e`) as its record reads the names its
    /// keys bind, for the descriptions, which read the image: an optional
    /// attribute it lacks as the keys hold it, and a name only the keys
    /// bind (`playlistId_lower`) as they hold it (before, `null`).
    /// Borrowed unless `reads` names one of them.
    pub(super) fn key_filled<'i, 'r>(
        &self,
        e: &Entity,
        item: &'i Item,
        mut reads: impl Iterator<Item = &'r str>,
    ) -> Cow<'i, Item> {
        let key_only = |n: &str| e.attr(n).is_none() && e.key_binders().any(|(b, _)| b == n);
        if !reads.any(key_only) && !lacks_key_held(e, item) {
            return Cow::Borrowed(item);
        }
        let mut bound: Vec<(&str, Option<&str>, &str)> = Vec::new();
        for k in &e.key {
            let Some(vals) = item
                .opt_s(k.attr)
                .ok()
                .flatten()
                .and_then(|v| k.template.matches(v))
            else {
                return Cow::Borrowed(item);
            };
            let binders = k.template.binders();
            bound.extend(
                binders
                    .zip(vals)
                    .map(|(b, v)| (b.name.as_str(), b.format.as_deref(), v)),
            );
        }
        let mut out = item.clone();
        self.fill_key_names(e, &bound, &mut out, |_| true);
        Cow::Owned(out)
    }
}
