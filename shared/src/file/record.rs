//! A stream record's images, each parsed (classified, validated, checked)
//! at most once however many rules ask about them: every aspect of each
//! image and every job the change starts (`sets:`, `once:`, `compute:`)
//! read the same parse ([`FileRules`]' `record`).

use std::cell::OnceCell;

use super::model::FileModel;
use super::rules::{FileRules, Parsed};
use crate::change::{Change, ChangeKind};
use crate::engine::rules::{OutMessage, RecordSays};
use crate::error::InputError;
use crate::item::Item;

/// A record's images, parsed on first ask.
pub(super) struct Images<'c, 'm> {
    m: &'m FileModel,
    pub change: &'c Change,
    old: OnceCell<Result<Parsed<'m>, InputError>>,
    new: OnceCell<Result<Parsed<'m>, InputError>>,
}

impl<'c, 'm> Images<'c, 'm> {
    pub fn of(m: &'m FileModel, change: &'c Change) -> Self {
        Images {
            m,
            change,
            old: OnceCell::new(),
            new: OnceCell::new(),
        }
    }

    /// The old image, if the record has one.
    pub fn old_image(&self) -> Option<&'c Item> {
        self.change.old.as_ref()
    }

    /// The new image, unless the change is a remove.
    pub fn new_image(&self) -> Option<&'c Item> {
        self.change
            .new
            .as_ref()
            .filter(|_| self.change.kind != ChangeKind::Remove)
    }

    /// The parse of the old image.
    pub fn parsed_old(&self) -> Option<&Result<Parsed<'m>, InputError>> {
        let image = self.old_image()?;
        Some(self.old.get_or_init(|| self.m.parse(image)))
    }

    /// The parse of the new image (none for a remove).
    pub fn parsed_new(&self) -> Option<&Result<Parsed<'m>, InputError>> {
        let image = self.new_image()?;
        Some(self.new.get_or_init(|| {
            // After a valid old image (parsed already: a record's aspects
            // ask the old image first), only the checks whose values
            // changed are run.
            let known = match self.old.get() {
                Some(Ok(Parsed::Writer(rec))) => Some(rec),
                _ => None,
            };
            self.m.parse_after(image, known)
        }))
    }

    /// Whether the old image is a valid item.
    pub fn old_valid(&self) -> bool {
        self.parsed_old().is_some_and(|p| p.is_ok())
    }
}

impl FileRules {
    /// [`Rules::record`] from one parse of each image.
    pub(super) fn record_of(&self, change: &Change) -> RecordSays {
        let images = Images::of(self.0, change);
        let old = images
            .parsed_old()
            .zip(images.old_image())
            .map(|(p, i)| self.aspects_of(p.as_ref(), i));
        let new = images
            .parsed_new()
            .zip(images.new_image())
            .map(|(p, i)| self.aspects_of(p.as_ref(), i));
        RecordSays {
            old,
            new,
            messages: self.messages_of(&images),
        }
    }

    /// The jobs a change starts (`sets:`, `once:`, `compute:`).
    pub(super) fn messages_of(
        &self,
        images: &Images<'_, '_>,
    ) -> Result<Vec<OutMessage>, InputError> {
        let m = self.0;
        let mut out = m.set_messages_of(images)?;
        out.extend(m.once_messages_of(images)?);
        out.extend(m.compute_messages_of(images));
        Ok(out)
    }
}
