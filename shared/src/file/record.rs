//! A stream record's images, each parsed (classified, validated, checked)
//! at most once however many rules ask about them: every aspect of each
//! image and every job the change starts (`sets:`, `once:`, `compute:`)
//! read the same parse ([`FileRules`]' `record`), and the once effects
//! each image asks for are computed once, for its aspects (an effect that
//! cannot be makes the image bad input) and its jobs alike.

use std::cell::OnceCell;

use super::model::FileModel;
use super::once_run::Asked;
use super::rules::{FileRules, Parsed};
use crate::change::{Change, ChangeKind};
use crate::engine::rules::{Aspects, OutMessage, RecordSays};
use crate::error::InputError;
use crate::item::Item;

/// A record's images, parsed on first ask.
pub(super) struct Images<'c, 'm> {
    m: &'m FileModel,
    pub change: &'c Change,
    old: OnceCell<Result<Parsed<'m>, InputError>>,
    new: OnceCell<Result<Parsed<'m>, InputError>>,
    old_once: OnceCell<Result<Asked, InputError>>,
    new_once: OnceCell<Result<Asked, InputError>>,
}

impl<'c, 'm> Images<'c, 'm> {
    pub fn of(m: &'m FileModel, change: &'c Change) -> Self {
        Images {
            m,
            change,
            old: OnceCell::new(),
            new: OnceCell::new(),
            old_once: OnceCell::new(),
            new_once: OnceCell::new(),
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

    /// The once effects the old image asks for
    /// ([`FileModel::once_asked`]), if the record has one.
    pub fn once_old(&self) -> Option<&Result<Asked, InputError>> {
        let (parsed, image) = self.parsed_old().zip(self.old_image())?;
        Some(
            self.old_once
                .get_or_init(|| self.m.once_asked(parsed.as_ref(), image)),
        )
    }

    /// The once effects the new image asks for (none for a remove).
    pub fn once_new(&self) -> Option<&Result<Asked, InputError>> {
        let (parsed, image) = self.parsed_new().zip(self.new_image())?;
        Some(
            self.new_once
                .get_or_init(|| self.m.once_asked(parsed.as_ref(), image)),
        )
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
        let (old, new) = self.images_aspects(&images);
        let rejected = [&old, &new].map(|a| a.as_ref().is_some_and(|a| a.refused().is_some()));
        RecordSays {
            messages: self.messages_of(&images, rejected),
            old,
            new,
        }
    }

    /// The aspects of both images (of the old one, the new one), each with
    /// the once effects it asks for.
    fn images_aspects(&self, images: &Images<'_, '_>) -> (Option<Aspects>, Option<Aspects>) {
        let old = (images.parsed_old().zip(images.old_image()))
            .map(|(p, i)| self.aspects_with(p.as_ref(), i, images.once_old()));
        let new = (images.parsed_new().zip(images.new_image()))
            .map(|(p, i)| self.aspects_with(p.as_ref(), i, images.once_new()));
        (old, new)
    }

    /// Whether the rules reject each image (the old one, the new one) as
    /// bad input: what [`FileModel::once_messages_of`] needs of a change
    /// whose aspects are not asked otherwise. Without once effects: never
    /// asked.
    pub(super) fn rejected(&self, images: &Images<'_, '_>) -> [bool; 2] {
        if self.0.once.is_empty() {
            return [false, false];
        }
        let (old, new) = self.images_aspects(images);
        [old, new].map(|a| a.is_some_and(|a| a.refused().is_some()))
    }

    /// The jobs a change starts (`sets:`, `once:`, `compute:`); `rejected`:
    /// whether the rules reject its old and its new image.
    pub(super) fn messages_of(
        &self,
        images: &Images<'_, '_>,
        rejected: [bool; 2],
    ) -> Result<Vec<OutMessage>, InputError> {
        let m = self.0;
        let mut out = m.set_messages_of(images)?;
        out.extend(m.once_messages_of(images, rejected)?);
        out.extend(m.compute_messages_of(images));
        Ok(out)
    }
}
