//! What an item that is bad input now keeps: what its **last valid image in
//! the stream** implied, whether or not the derive read that state while it
//! was current.
//!
//! The derive reconciles from a consistent read of the item now; an aspect
//! the item's rules reject now keeps a value from the stream instead:
//!
//! - The batch's records of the item, in order, each give a state per
//!   aspect: a valid image its value, a remove nothing (absent implies
//!   nothing), a rejected image none (the state before it stays). Records at
//!   or before the sequence number the source record was last written at
//!   (`q`) are old news (a replay, a redelivery) and give nothing.
//! - When the batch *reaches the item as it is* (its last record of the item
//!   carries exactly the image read), the stream up to now is known: the
//!   last state the batch gives, else the one an earlier batch left pending,
//!   else the record, is what the last valid image implied. It applies.
//! - When the item has moved on past the batch (the derive is behind), the
//!   state the batch gives is only *pending* (`l` in the record): a state the
//!   derive read earlier, ahead of its batch, may be newer than it, so
//!   nothing moves until a batch reaches the item, which brings every
//!   newer record with it.
//! - A valid aspect read now is newer than anything pending: pending goes.
//!
//! So nothing ever moves backwards (an older image is applied only once the
//! batch shows nothing valid came after it), a replay or redelivery changes
//! nothing, and the end state is the same however the records were batched
//! and whenever the derive read the item. Backfill and repair have no
//! images: they keep the record, as before.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::AttributeValue;

use super::implied::{checked_sums, sum_contributions, Implied, Sums};
use super::{Aspects, Deriver};
use crate::change::SequenceNumber;
use crate::engine::rules::Contribution;
use crate::engine::writable::{self, Writes};
use crate::error::InputError;
use crate::item::{key_of, Item};
use crate::ledger::item_id;

/// One stream record of an item in the batch, in stream order.
#[derive(Debug, Clone, Copy)]
pub struct Step<'a> {
    pub seq: &'a SequenceNumber,
    /// The new image and its aspects; `None` for a remove (or a record
    /// without a new image: bad input, which gives no state).
    pub new: Option<(&'a Item, &'a Aspects)>,
    pub removed: bool,
}

/// A value per aspect, each present or not.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct PerAspect {
    pub(super) contributions: Option<Sums>,
    pub(super) derived: Option<BTreeMap<String, Item>>,
    pub(super) indexed: Option<BTreeSet<(String, String)>>,
}

impl PerAspect {
    pub(super) fn is_empty(&self) -> bool {
        self.contributions.is_none() && self.derived.is_none() && self.indexed.is_none()
    }

    /// Every aspect: what an absent item implies (nothing).
    fn absent() -> Self {
        PerAspect {
            contributions: Some(Sums::new()),
            derived: Some(BTreeMap::new()),
            indexed: Some(BTreeSet::new()),
        }
    }

    /// `later`'s aspects over this one's.
    fn then(&mut self, later: PerAspect) {
        if later.contributions.is_some() {
            self.contributions = later.contributions;
        }
        if later.derived.is_some() {
            self.derived = later.derived;
        }
        if later.indexed.is_some() {
            self.indexed = later.indexed;
        }
    }

    /// The ledger attribute (`l`): the aspects present, as a record holds
    /// them.
    pub(super) fn to_attr(&self) -> AttributeValue {
        let implied = Implied {
            contributions: self.contributions.clone().unwrap_or_default(),
            derived: self.derived.clone().unwrap_or_default(),
            indexed: self.indexed.clone().unwrap_or_default(),
        };
        let mut attrs = implied.to_attrs();
        let mut out = Item::new();
        if self.contributions.is_some() {
            out.extend(attrs.remove_entry("c"));
        }
        if self.derived.is_some() {
            out.extend(attrs.remove_entry("d"));
        }
        if self.indexed.is_some() {
            let x = attrs.remove("x").unwrap_or(AttributeValue::L(vec![]));
            out.insert("x".into(), x);
        }
        AttributeValue::M(out)
    }

    /// Read back from a record's `l`.
    pub(super) fn from_attr(attr: Option<&AttributeValue>) -> Result<Self, String> {
        let Some(attr) = attr else {
            return Ok(PerAspect::default());
        };
        let AttributeValue::M(m) = attr else {
            return Err("pending state is not a map".into());
        };
        let implied = Implied::from_record(m)?;
        Ok(PerAspect {
            contributions: m.contains_key("c").then_some(implied.contributions),
            derived: m.contains_key("d").then_some(implied.derived),
            indexed: m.contains_key("x").then_some(implied.indexed),
        })
    }
}

/// What a source record keeps of the stream: the sequence number it was
/// last written at, and the state pending (see the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Trail {
    pub(super) seq: Option<SequenceNumber>,
    pub(super) pending: PerAspect,
}

/// Which aspects the item as it is rejects (`true`: keeps a value from the
/// stream or the record).
#[derive(Debug, Clone, Copy)]
pub(super) struct Rejected {
    pub(super) contributions: bool,
    pub(super) derived: bool,
    pub(super) indexed: bool,
}

impl Deriver {
    /// Why the writes `image` implies (its `aspects` as the rules said
    /// them) cannot exist in DynamoDB (see [`writable::check`]), if they
    /// cannot: a record of such an image is bad input even when the item
    /// has changed since.
    pub(super) fn unwritable(&self, image: &Item, aspects: &Aspects) -> Option<InputError> {
        let key_names = self.rules.key_names();
        let contributions = checked_sums(aspects.contributions.clone(), image, key_names).ok();
        self.unwritable_as(image, aspects, contributions.as_deref())
    }

    /// [`Self::unwritable`], with the contributions' sums checked already.
    fn unwritable_as(
        &self,
        image: &Item,
        aspects: &Aspects,
        contributions: Option<&[Contribution]>,
    ) -> Option<InputError> {
        let writes = Writes {
            projection: aspects.projection.as_ref().ok().and_then(Option::as_ref),
            derived: aspects.derived.as_ref().map_or(&[][..], Vec::as_slice),
            contributions: contributions.unwrap_or_default(),
            memberships: aspects.memberships.as_ref().map_or(0, Vec::len),
        };
        writable::check(
            self.rules.as_ref(),
            &self.limits,
            self.processor,
            image,
            &writes,
        )
        .err()
    }
}

impl Deriver {
    /// The state one valid image gives per aspect (an image whose writes
    /// cannot exist gives none: it is bad input as a whole).
    pub(super) fn state_of(&self, image: &Item, aspects: &Aspects) -> PerAspect {
        let key_names = self.rules.key_names();
        let contributions = checked_sums(aspects.contributions.clone(), image, key_names).ok();
        let derived = aspects.derived.as_ref().ok();
        let memberships = aspects.memberships.as_ref().ok();
        if self
            .unwritable_as(image, aspects, contributions.as_deref())
            .is_some()
        {
            return PerAspect::default();
        }
        PerAspect {
            contributions: contributions.map(|c| sum_contributions(&c).unwrap_or_default()),
            derived: derived.map(|d| {
                d.iter()
                    .map(|d| (item_id(&key_of(d, key_names)), d.clone()))
                    .collect()
            }),
            // As an item read valid lists them (with a located counter's
            // own entry).
            indexed: memberships.map(|m| {
                m.iter()
                    .cloned()
                    .chain(self.self_membership(image))
                    .collect()
            }),
        }
    }

    /// What the aspects the item rejects now keep, and the trail to record:
    /// `implied` holds the item's own aspects (those it rejects are
    /// replaced), `recorded` what the record holds.
    pub(super) fn follow_trail(
        &self,
        item_now: Option<&Item>,
        rejected: Rejected,
        steps: &[Step<'_>],
        recorded: Option<(&Implied, &Trail)>,
        implied: &mut Implied,
    ) -> Trail {
        let (rec_implied, trail) = match recorded {
            Some((i, t)) => (Some(i), t.clone()),
            None => (None, Trail::default()),
        };
        let q = trail.seq.as_ref();
        let fresh = || steps.iter().filter(move |s| q.is_none_or(|q| s.seq > q));
        // Fresh records all come after `q`: the newest of them, if any, is
        // the newest met.
        let newest = fresh().map(|s| s.seq).max().cloned();
        let any_fresh = newest.is_some();
        let seq = newest.or_else(|| trail.seq.clone());
        if !(rejected.contributions || rejected.derived || rejected.indexed) {
            // Every aspect read now (the common case: no image looked at):
            // newer than anything pending.
            return Trail {
                seq,
                pending: PerAspect::default(),
            };
        }
        // The state the batch's new records leave, per aspect.
        let mut last = PerAspect::default();
        for s in fresh() {
            if s.removed {
                last = PerAspect::absent();
            } else if let Some((image, aspects)) = s.new {
                last.then(self.state_of(image, aspects));
            }
        }
        // The batch reaches the item as it is: its last record is the
        // item read (a remove: the item is absent).
        let reaching = any_fresh
            && steps.last().is_some_and(|s| match (s.new, item_now) {
                (Some((image, _)), Some(item)) => image == item,
                _ => s.removed && item_now.is_none(),
            });
        let mut pending = trail.pending;
        macro_rules! aspect {
            ($field:ident, $rejected:expr) => {
                if !$rejected {
                    // Read now: newer than anything pending.
                    pending.$field = None;
                } else {
                    let kept = if reaching {
                        last.$field.take().or(pending.$field.take())
                    } else {
                        if let Some(v) = last.$field.take() {
                            pending.$field = Some(v);
                        }
                        None
                    };
                    implied.$field = kept
                        .or_else(|| rec_implied.map(|r| r.$field.clone()))
                        .unwrap_or_default();
                }
            };
        }
        aspect!(contributions, rejected.contributions);
        aspect!(derived, rejected.derived);
        aspect!(indexed, rejected.indexed);
        Trail { seq, pending }
    }
}
