//! The vocabulary a model's stream rules speak (SPEC §7).
//!
//! Given an item's image, a rule says (pure, no I/O):
//!
//! - [`Projection`]: processor-owned attributes of this item (absent = sparse);
//! - derived items: the set of *other* items this item implies;
//! - [`Contribution`]s: what this item adds to counter items (several
//!   attributes per counter item);
//! - whether this item *is* a counter item ([`Counter`]), so the engine keeps
//!   its attributes equal to the sums even when a writer overwrites it;
//! - whether a counter key is an identity found through the items that
//!   carry it ([`Rules::locate`], see [`super::locate`]): a parent its
//!   sources do not key;
//! - [`OutMessage`]s: jobs a change starts (work that fans out or is heavy).
//!
//! The engine ([`super::derive`]) applies it exactly once, in order and
//! loop-free. Delivery is at-least-once: the engine derives from the item *as
//! it is* (a consistent read), never from a possibly stale record image, so a
//! redelivered or replayed record writes nothing and never moves a derived
//! datum backwards.

use aws_sdk_dynamodb::types::AttributeValue;

use crate::change::Change;
use crate::error::InputError;
use crate::item::Item;

/// Processor-owned attributes an item should carry, computed from its image.
#[derive(Debug, Clone, PartialEq)]
pub struct Projection {
    /// Attribute name and its computed value; `None` means "must be absent"
    /// (sparse indexes).
    pub attrs: Vec<(&'static str, Option<AttributeValue>)>,
    /// The source attributes the values were computed from: the write is
    /// conditioned on them still holding the image's values.
    pub sources: Vec<&'static str>,
}

/// Something a rule's result says beyond its values (e.g. a number clamped
/// into a sort key): the engine logs it (with the item's key) and counts it
/// under `metric`, once per write of what it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub metric: &'static str,
    pub reason: String,
}

/// A counter item: an item whose numeric attributes are sums of
/// contributions of other items.
#[derive(Debug, Clone, PartialEq)]
pub struct Counter {
    /// Key attributes of the counter item, as (name, string value).
    pub key: Vec<(&'static str, String)>,
    /// Every attribute the counter keeps; each is present once the item
    /// exists (0 when nothing counts).
    pub attrs: &'static [&'static str],
    /// `Some(attributes stamped on creation)`: the processor creates the item
    /// (e.g. `type = counts`). `None`: the item is the writer's and is never
    /// created by the processor (its sums wait in the ledger until it exists).
    pub create: Option<Vec<(&'static str, AttributeValue)>>,
    /// Delete the (processor-created) item when every sum is zero.
    pub remove_at_zero: bool,
}

impl Counter {
    /// The counter item's key as an item.
    pub fn key_item(&self) -> Item {
        self.key
            .iter()
            .map(|(k, v)| (k.to_string(), AttributeValue::S(v.clone())))
            .collect()
    }
}

/// What one item adds to one counter item: (attribute, amount) pairs.
#[derive(Debug, Clone, PartialEq)]
pub struct Contribution {
    pub counter: Counter,
    pub values: Vec<(&'static str, i64)>,
}

/// Every aspect of one image the derive processor applies to it, asked at
/// once ([`Rules::aspects`]). An aspect that meets bad input keeps what
/// earlier valid states implied; rules that want an item bad input as a
/// whole (a model file: none of its effects applies when one fails) answer
/// [`Aspects::whole`].
#[derive(Debug, Clone, PartialEq)]
pub struct Aspects {
    pub projection: Result<Option<Projection>, InputError>,
    pub derived: Result<Vec<Item>, InputError>,
    pub contributions: Result<Vec<Contribution>, InputError>,
    pub memberships: Result<Vec<(String, String)>, InputError>,
}

impl Aspects {
    /// All or nothing: the first bad input met (projection, derived,
    /// contributions, memberships, in that order) is every aspect's answer,
    /// so no effect of the item applies while another is refused. An
    /// aspect that waits for a value not computed yet
    /// ([`InputError::waits`]) is no bad input: it waits on its own.
    pub fn whole(self) -> Aspects {
        match self.refused().cloned() {
            None => self,
            Some(e) => Aspects::refused_as(e),
        }
    }

    /// The first bad input of the aspects (projection, derived,
    /// contributions, memberships, in that order), an aspect that only
    /// waits for a value not computed yet aside: `None`, the image is no
    /// bad input.
    pub fn refused(&self) -> Option<&InputError> {
        [
            self.projection.as_ref().err(),
            self.derived.as_ref().err(),
            self.contributions.as_ref().err(),
            self.memberships.as_ref().err(),
        ]
        .into_iter()
        .flatten()
        .find(|e| !e.waits())
    }

    /// Every aspect refused for `e`: an image bad input as a whole.
    pub fn refused_as(e: InputError) -> Aspects {
        Aspects {
            projection: Err(e.clone()),
            derived: Err(e.clone()),
            contributions: Err(e.clone()),
            memberships: Err(e),
        }
    }
}

/// What one stream record says, asked at once ([`Rules::record`]): every
/// aspect of its old and new images and the jobs it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordSays {
    /// [`Rules::aspects`] of the old image (`None`: the record has none).
    pub old: Option<Aspects>,
    /// [`Rules::aspects`] of the new image (`None`: none, or a remove).
    pub new: Option<Aspects>,
    /// [`Rules::messages`] of the change.
    pub messages: Result<Vec<OutMessage>, InputError>,
}

/// An asynchronous job to enqueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutMessage {
    /// Logical queue name, mapped to a URL by configuration.
    pub queue: &'static str,
    pub body: String,
}

/// What a model derives from an item's state. Pure functions: no I/O.
///
/// Each aspect is computed on its own: an aspect that meets bad input keeps
/// what earlier valid states implied (the engine logs and counts it) while
/// the other aspects still apply.
pub trait Rules: Send + Sync {
    /// The table's key attribute names (partition key first).
    fn key_names(&self) -> &'static [&'static str];

    /// Processor-owned attributes this item should carry, or `None`.
    fn projection(&self, _image: &Item) -> Result<Option<Projection>, InputError> {
        Ok(None)
    }

    /// What [`Rules::projection`] of this image notes (pure, like every
    /// rule): the engine logs and counts each note when it writes the
    /// projection, so a clamp is counted once per write, never per read.
    fn notes(&self, _image: &Item) -> Vec<Note> {
        vec![]
    }

    /// The other items this item implies (complete items, keys included).
    /// The engine creates, updates and deletes them so that exactly this set
    /// exists for the item's current state.
    fn derived(&self, _image: &Item) -> Result<Vec<Item>, InputError> {
        Ok(vec![])
    }

    /// What this item, in this state, contributes to counters.
    fn contributions(&self, _image: &Item) -> Result<Vec<Contribution>, InputError> {
        Ok(vec![])
    }

    /// [`Rules::projection`], [`Rules::derived`], [`Rules::contributions`]
    /// and [`Rules::memberships`] of one image, asked at once (the derive
    /// processor's one call per record). The default asks each on its own;
    /// rules that parse and validate an image first (a model file) answer
    /// all four from one parse.
    fn aspects(&self, image: &Item) -> Aspects {
        Aspects {
            projection: self.projection(image),
            derived: self.derived(image),
            contributions: self.contributions(image),
            memberships: self.memberships(image),
        }
    }

    /// Ledger indexes this item belongs to, as (index, member) pairs. The
    /// engine keeps the ledger item `IDX#<index>` / `<member>` exactly while
    /// the item implies it, written in the same transaction as the item's
    /// ledger record, so a set job lists an exact set with a consistent
    /// read ([`crate::engine::derive::index_members`]) where a GSI listing
    /// may lag. Members of one index are distinct per source item.
    fn memberships(&self, _image: &Item) -> Result<Vec<(String, String)>, InputError> {
        Ok(vec![])
    }

    /// Whether the derived item with this key may be implied by several
    /// source items at once (e.g. a lookup keyed by an id that two items
    /// carry while a writer moves one to a new key). The engine then keeps
    /// an owner record in the ledger, so the item lives while any source
    /// implies it. Default: one source at most (the key is a function of
    /// the source's key).
    fn shared(&self, _derived_key: &Item) -> bool {
        false
    }

    /// The table's TTL attribute (epoch seconds), if it has one: a derived
    /// item whose TTL is past is expected no more, so the engine never
    /// writes it (a replay, a backfill or a repair would bring back what
    /// the TTL sweep took). Default: none.
    fn ttl_attribute(&self) -> Option<&'static str> {
        None
    }

    /// Whether this key has the shape of an item [`Rules::derived`]
    /// produces (processor-owned): `verify` reports one that no source
    /// implies, and its repair deletes it.
    fn is_derived(&self, _key: &Item) -> bool {
        false
    }

    /// `Some` when this item is itself a counter item (its sums are kept equal
    /// to the contributions even if a writer overwrites them).
    fn counter(&self, _image: &Item) -> Option<Counter> {
        None
    }

    /// `Some` when this counter key is a logical identity rather than an
    /// item's key (a parent its sources do not key, e.g. an invoice under
    /// its account counted by lines that only carry the invoice id): the
    /// engine finds the counter item through the items that claim the
    /// identity (see [`super::locate`]). [`Rules::counter`] of such an item
    /// gives the logical key; of the logical key, the same counter.
    /// Default: every counter key is its item's key.
    fn locate(&self, _counter_key: &Item) -> Option<super::locate::Locate> {
        None
    }

    /// Whether some derived item of these rules is shared ([`Rules::shared`]):
    /// the derive processor then queries the ledger for its owners (its
    /// grant says so).
    fn shares(&self) -> bool {
        false
    }

    /// Whether some counter of these rules is located ([`Rules::locate`]):
    /// the derive processor then queries the ledger (its grant says so).
    fn locates(&self) -> bool {
        false
    }

    /// Whether no counter of these rules has this key any more (a model
    /// file edited since the engine counted into it): `verify` reports the
    /// ledger totals kept for it, and `--repair` drops them once nothing
    /// counts into them. Default: never (a compiled model's counters,
    /// ledger-only ones included, are its code's).
    fn stale_counter(&self, _key: &Item) -> bool {
        false
    }

    /// Whether this item, which matches nothing of these rules, is a
    /// counter the processor created under an earlier version of them (a
    /// model file whose counter was re-keyed): `verify` reports it when the
    /// ledger holds totals for its key, and `--repair` deletes it if still
    /// unchanged. Never true of an item a writer owns. Default: never.
    fn stale_counter_item(&self, _item: &Item) -> bool {
        false
    }

    /// Whether this item, which matches nothing of these rules, may be a
    /// counter the processor created under a counter entity the rules no
    /// longer have (removed from a model file): stamped, with a name no
    /// writer entity of the rules has. Only the ledger tells: `verify`
    /// reports it, `backfill` and `--repair` delete it if still unchanged,
    /// when its totals say the processor created it
    /// ([`crate::engine::counts::CREATED`]); an application's item, whose
    /// totals never say so, is never deleted. Default: never.
    fn removed_counter_item(&self, _item: &Item) -> bool {
        false
    }

    /// Whether this item, which matches nothing of these rules, is an item
    /// the processor derived under an earlier version of them: stamped
    /// with the type of an entity the rules derive or a join set writes
    /// (whose key template was edited since), which no writer's item is. No source implies it any
    /// more: `verify` reports it, `backfill` and `--repair` delete it if
    /// still unchanged. (One of an entity removed since is stamped with a
    /// name the rules do not have: only the ledger tells, as for
    /// [`Rules::removed_counter_item`].) Default: never.
    fn stale_derived_item(&self, _item: &Item) -> bool {
        false
    }

    /// The attributes of `item`, a counter item the processors own whole
    /// (one they create, of an entity no writer writes), that the rules
    /// no longer derive: a sum or a projection attribute removed from the
    /// model since it was written. Drift: the counter's next write removes
    /// them (its sync, a backfill, a repair). Never an attribute of an
    /// item a writer owns (it may be the application's). Default: none.
    fn unowned_attributes(&self, _item: &Item) -> Vec<String> {
        Vec::new()
    }

    /// Jobs this change starts, enqueued after its other effects. Consumers
    /// must be idempotent: a redelivered record enqueues again.
    fn messages(&self, _change: &Change) -> Result<Vec<OutMessage>, InputError> {
        Ok(vec![])
    }

    /// [`Rules::aspects`] of a record's old and new image (a remove's new
    /// image is not asked) and [`Rules::messages`] of the change, asked at
    /// once (the derive processor's one call per record). The default asks
    /// each on its own; rules that parse and validate an image first (a
    /// model file) parse each image once for all of them.
    fn record(&self, change: &Change) -> RecordSays {
        RecordSays {
            old: change.old.as_ref().map(|i| self.aspects(i)),
            new: change
                .new
                .as_ref()
                .filter(|_| change.kind != crate::change::ChangeKind::Remove)
                .map(|i| self.aspects(i)),
            messages: self.messages(change),
        }
    }

    /// Whether a change may make a once effect's precondition hold that a
    /// skipped job waits for (see [`crate::engine::once`]): the derive
    /// then reads the item's waiting notes and sends their jobs again.
    fn awaited(&self, _change: &Change) -> bool {
        false
    }

    /// Whether any change may be [`Rules::awaited`] (the derive's grant
    /// then lists the ledger's `Query`).
    fn awaits(&self) -> bool {
        false
    }

    /// The logical queue named `queue` a waiting note keeps (`None`: not
    /// a queue of this model's once effects any more).
    fn once_queue(&self, _queue: &str) -> Option<&'static str> {
        None
    }

    /// Whether the engine may skip this record without reading anything
    /// (e.g. the processors' own items that imply nothing). Default: never.
    fn ignores(&self, _keys: &Item) -> bool {
        false
    }

    /// Whether `old` and `new`, two images of one item, differ only in
    /// attributes the processors write onto it (its projection, computed
    /// values, counter sums, a history mirror): a processor's write coming
    /// back, nothing a writer said. Of an item already rejected, such a
    /// record is no new bad input. Default: never (every change is a
    /// writer's).
    fn processor_owned_only(&self, _old: &Item, _new: &Item) -> bool {
        false
    }

    /// `verify`'s checks of what these rules' jobs keep (e.g. values a
    /// model file computes over a partition), beyond the generic
    /// projection and counter checks. Default: none.
    fn checks(&self, _input: &crate::models::CheckInput<'_>) -> Vec<crate::models::Finding> {
        vec![]
    }
}
