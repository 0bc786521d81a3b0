//! The `history:` block of a model file: a numbered history of an aggregate
//! (a root entity and the member entities in its partition), each entry
//! with a snapshot of the aggregate right after its change (SPEC §3). It
//! compiles to [`HistorySpec`] ([`super::history_compile`]), and [`FileHistory`] is the
//! [`FoldRules`] the fold engine runs: sequence mirror, cascade when the
//! root goes, adoption of a live table, restates and the 400 KB limit are
//! the engine's, the rules only say what the file declares.
//!
//! ```yaml
//! history:
//!   root: { entity: order, created: "Order ${id} placed" }
//!   members:
//!     line: { list: lines, fields: [sku, qty], order: [sku] }
//!   entries: { entity: order_entry, digits: 6 }
//!   mirror: historySequence
//! ```

use aws_sdk_dynamodb::types::AttributeValue;
use uuid::Uuid;

use super::expr::{Expr, Val};
use super::history_images::Images;
use super::model::{FileModel, Value};
use super::rules::Parsed;
use super::template::Part;
use super::values::lacks_key_held;
use crate::change::{Change, ChangeKind};
use crate::engine::fold::{
    Adoption, AdoptionRecord, Cascade, CascadeDelete, FoldOutput, FoldRules, FoldState, Restated,
};
use crate::error::InputError;
use crate::item::{display_key, item_size, key_of, n, s, Item, ItemExt, MAX_ITEM_BYTES};
use crate::metrics::names;
use crate::models::EventFilter;

/// Namespace of entry ids: `uuid v5(namespace, eventID)`, so a retry writes
/// the same id (the value the compiled folds use: a model moved from Rust
/// to a file keeps its ids).
pub const ENTRY_ID_NAMESPACE: Uuid = Uuid::from_u128(0x6a0b_5c4e_1f7d_4c1b_9e53_7b1d_2f30_a8c4);

/// Part name of the root in the fold state when its sort key starts with a
/// hole (otherwise [`root_part`]; members are named by their sort key, and
/// `check-model` makes sure no member's sort key is the root's name).
pub const ROOT_PART: &str = "@root";

/// The root's part name in the fold state (kept in the ledger): its sort
/// key's literal prefix without a trailing `#` (`APP#${id}` -> `APP`, the
/// name the compiled history folds' ledgers used, so a deployed stack needs
/// no migration), else [`ROOT_PART`].
pub fn root_part(sk_prefix: Option<&str>) -> String {
    match sk_prefix.map(|p| p.trim_end_matches('#')) {
        Some(p) if !p.is_empty() => p.to_string(),
        _ => ROOT_PART.to_string(),
    }
}

/// The binder of the entries' sort key: the entry's number.
pub const SEQUENCE: &str = "sequence";

// ---------------------------------------------------------------- compiled

/// One snapshot shape (the root's or a member's).
#[derive(Debug)]
pub struct Shape {
    pub entity: usize,
    /// Attributes kept, `NULL` when absent; `None`: all but `excluded`.
    pub fields: Option<Vec<&'static str>>,
    /// Keys and processor-owned attributes (never in a snapshot).
    pub excluded: Vec<&'static str>,
}

#[derive(Debug)]
pub struct Member {
    pub shape: Shape,
    pub list: &'static str,
    pub order: Vec<&'static str>,
    pub added: Option<Value>,
    pub updated: Option<Value>,
    pub removed: Option<Value>,
}

/// A compiled `history:` block.
#[derive(Debug)]
pub struct HistorySpec {
    pub processor: &'static str,
    pub root: Shape,
    /// The root's attributes outside its `fields` that the descriptions
    /// read: kept in the fold state's root part (`NULL` when absent), never
    /// shown in a snapshot, so the sequence mirror's guard
    /// ([`FoldRules::root_guard`]) compares them too. Empty without `fields`
    /// (the part holds every attribute then).
    pub root_read: Vec<&'static str>,
    pub created: Option<Value>,
    pub updated: Vec<(Option<Expr>, Value)>,
    pub labels: Vec<(&'static str, String)>,
    pub members: Vec<Member>,
    pub entries: usize,
    pub digits: usize,
    pub imported: &'static str,
    pub mirror: &'static str,
    /// Deleting the root deletes its members (`cascade:`, default true);
    /// its entries are deleted either way (a re-created root numbers its
    /// own from 1).
    pub cascade: bool,
    /// The root's part name in the fold state ([`root_part`]).
    pub root_part: &'static str,
    /// The entry attributes holding the aggregate's id (the names the
    /// entries' key binds but `sequence`), in the order of its values.
    pub aggregate_attrs: Vec<&'static str>,
    /// How many values of the aggregate's id the partition key binds.
    pub pk_arity: usize,
    /// How many the root's sort key binds: 0 unless the root is keyed under
    /// its owner (`CUST#${customerId}` / `ORDER#${orderId}`), whose
    /// aggregate is the items whose sort keys start with its own.
    pub sk_arity: usize,
    /// What the processor reads of the stream.
    pub filter: Vec<EventFilter>,
    /// The root's attributes whose changes the descriptions tell apart
    /// (what `verify` compares of the latest snapshot); `None`: all.
    pub described: Option<Vec<&'static str>>,
}

// ---------------------------------------------------------------- the fold

/// The fold rules of a loaded model file's `history:` block.
#[derive(Debug, Clone, Copy)]
pub struct FileHistory(pub &'static FileModel);

/// What an item is to the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Root,
    Member(usize),
    Entry,
    Other,
}

/// Absent and `NULL` are the same.
pub(super) fn normalized(v: Option<&AttributeValue>) -> Option<&AttributeValue> {
    match v {
        Some(AttributeValue::Null(_)) | None => None,
        other => other,
    }
}

/// Sort key of one attribute of a member's part: numbers, then strings,
/// then anything else or absent.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum SortVal {
    Num(i128),
    Str(String),
    Other,
}

fn sort_val(v: Option<&AttributeValue>) -> SortVal {
    match v {
        Some(AttributeValue::N(n)) => n
            .parse::<i128>()
            .map(SortVal::Num)
            .unwrap_or_else(|_| SortVal::Str(n.clone())),
        Some(AttributeValue::S(s)) => SortVal::Str(s.clone()),
        _ => SortVal::Other,
    }
}

impl FileHistory {
    pub(super) fn spec(&self) -> &'static HistorySpec {
        self.0.history.as_ref().expect("a model with history")
    }

    pub(super) fn role(&self, pk: &str, sk: &str) -> Role {
        let m = self.0;
        let h = self.spec();
        let Some((e, _)) = m.classify(pk, sk) else {
            return Role::Other;
        };
        let i = m
            .entities
            .iter()
            .position(|x| std::ptr::eq(x, e))
            .unwrap_or(usize::MAX);
        if i == h.root.entity {
            Role::Root
        } else if i == h.entries {
            Role::Entry
        } else {
            h.members
                .iter()
                .position(|mb| mb.shape.entity == i)
                .map(Role::Member)
                .unwrap_or(Role::Other)
        }
    }

    /// An image's role and its aggregate (the partition key's name).
    pub(super) fn classify<'i>(
        &self,
        image: &'i Item,
    ) -> Result<(Role, &'i str, &'i str), InputError> {
        let [pkn, skn] = self.0.key_names();
        let key = || display_key(&key_of(image, &[pkn, skn]));
        let attr = |source| InputError::Attribute {
            entity: "item",
            key: key(),
            source,
        };
        let pk = image.s(pkn).map_err(attr)?;
        let sk = image.s(skn).map_err(attr)?;
        Ok((self.role(pk, sk), pk, sk))
    }

    fn role_of(&self, image: Option<&Item>) -> Role {
        image
            .and_then(|i| self.classify(i).ok())
            .map(|(r, _, _)| r)
            .unwrap_or(Role::Other)
    }

    /// The root entity's name.
    pub(super) fn root_name(&self) -> &'static str {
        self.0.entities[self.spec().root.entity].name
    }

    fn key_text(&self, item: &Item) -> String {
        display_key(&key_of(item, &self.0.key_names()))
    }

    /// Validates a writer item (its entity's types, checks and keys) and
    /// that the history's own writes of it can exist ([`Self::writable`]).
    pub(super) fn validate(&self, item: &Item) -> Result<(), InputError> {
        match self.0.parse(item)? {
            Parsed::Writer(_) => self.writable(item),
            Parsed::Processor(e) => Err(InputError::Invalid {
                key: self.key_text(item),
                reason: format!("history: `{}` is a processor entity", e.name),
            }),
        }
    }

    /// Whether the history's own writes of a writer item fit DynamoDB's
    /// item limit (the limits are each processor's own, SPEC §2.7): a
    /// root with its sequence mirror (at its largest, `digits` nines), and
    /// what the fold state keeps of a root or a member, as the ledger item
    /// that holds it. One that cannot exist is bad input of its record,
    /// known before anything is sent. (The entry never is: its snapshot is
    /// omitted.) Sized only near the limit.
    pub(super) fn writable(&self, item: &Item) -> Result<(), InputError> {
        // What a part's ledger item adds to the attributes it keeps: its
        // key (up to the key limits), a byte per attribute, and the
        // attributes the part lists absent.
        const OVERHEAD: usize = 16 * 1024;
        let size = item_size(item);
        if size + item.len() + OVERHEAD <= MAX_ITEM_BYTES {
            return Ok(());
        }
        let h = self.spec();
        let Ok((role, pk, sk)) = self.classify(item) else {
            return Ok(());
        };
        let Some(aggregate) = self.aggregate_of(pk, sk) else {
            return Ok(());
        };
        let over = |what: String, bytes: usize| {
            let limit = format!("over DynamoDB's limit of {MAX_ITEM_BYTES} bytes");
            InputError::Invalid {
                key: self.key_text(item),
                reason: format!("history: {what} would be {bytes} bytes, {limit}"),
            }
        };
        let (name, part) = match role {
            Role::Root => {
                let attr = |v: &AttributeValue| -> usize {
                    item_size(&[(h.mirror.to_string(), v.clone())].into())
                };
                let largest = n("9".repeat(h.digits.max(1)));
                let mirrored = size - item.get(h.mirror).map_or(0, attr) + attr(&largest);
                if mirrored > MAX_ITEM_BYTES {
                    return Err(over(
                        format!("the item with its sequence mirror `{}`", h.mirror),
                        mirrored,
                    ));
                }
                (h.root_part.to_string(), self.root_kept(item))
            }
            Role::Member(i) => (sk.to_string(), self.member_part(&h.members[i].shape, item)),
            Role::Entry | Role::Other => return Ok(()),
        };
        let bytes = crate::engine::fold::part_item_bytes(h.processor, &aggregate, &name, &part);
        if bytes > MAX_ITEM_BYTES {
            return Err(over(
                "the state the fold keeps of it (its ledger item)".to_string(),
                bytes,
            ));
        }
        Ok(())
    }

    /// What a snapshot keeps of an item of `shape`.
    fn part(&self, shape: &Shape, image: &Item) -> Item {
        match &shape.fields {
            Some(fields) => fields
                .iter()
                .map(|f| {
                    (
                        f.to_string(),
                        image.get(*f).cloned().unwrap_or(AttributeValue::Null(true)),
                    )
                })
                .collect(),
            None => image
                .iter()
                .filter(|(k, _)| !shape.excluded.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    /// What the state keeps of a member: the item as its writer wrote it
    /// (all but the keys and processor-owned attributes) and, with
    /// `fields`, each field and each other declared attribute `NULL` when
    /// absent. Its snapshot shows its `fields` ([`Self::shown`]); the
    /// cascade compares the whole of it ([`Self::member_guard`]), so a
    /// member the writer put again with the same fields but other data is
    /// never taken for the one folded.
    pub(super) fn member_part(&self, shape: &Shape, image: &Item) -> Item {
        let mut part: Item = image
            .iter()
            .filter(|(k, _)| !shape.excluded.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Some(fields) = &shape.fields {
            for f in fields {
                let v = image.get(*f).cloned().unwrap_or(AttributeValue::Null(true));
                part.insert(f.to_string(), v);
            }
            for a in self.declared(shape) {
                part.entry(a.to_string())
                    .or_insert(AttributeValue::Null(true));
            }
        }
        part
    }

    /// What the fold state keeps of the root: its snapshot's part and the
    /// attributes outside it that the descriptions read
    /// ([`HistorySpec::root_read`]).
    pub(super) fn root_kept(&self, image: &Item) -> Item {
        let h = self.spec();
        let mut part = self.part(&h.root, image);
        for a in &h.root_read {
            let v = image.get(*a).cloned().unwrap_or(AttributeValue::Null(true));
            part.insert(a.to_string(), v);
        }
        part
    }

    /// The declared attributes of `shape`'s entity a writer writes (not
    /// the processor's).
    fn declared<'s>(&self, shape: &'s Shape) -> impl Iterator<Item = &'static str> + 's {
        self.0.entities[shape.entity]
            .attrs
            .iter()
            .map(|a| a.name)
            .filter(|a| !shape.excluded.contains(a))
    }

    /// What a member's snapshot shows of its part named `name` (its sort
    /// key): its `fields` (`NULL` when absent), else the whole part; an
    /// optional attribute its sort key binds that the part lacks, as the
    /// key holds it (as its record reads it: a part the library keeps only
    /// in the key names the member too).
    fn shown(&self, shape: &Shape, name: &str, part: &Item) -> Item {
        let mut out = match &shape.fields {
            Some(fields) => fields
                .iter()
                .map(|f| {
                    let v = part.get(*f).cloned();
                    (f.to_string(), v.unwrap_or(AttributeValue::Null(true)))
                })
                .collect(),
            None => part.clone(),
        };
        let e = &self.0.entities[shape.entity];
        let t = &e.key[1].template;
        let key_only = t.binders().any(|b| e.attr(&b.name).is_none());
        if key_only || lacks_key_held(e, &out) {
            if let Some(vals) = t.matches(name) {
                let bound: Vec<(&str, Option<&str>, &str)> = t
                    .binders()
                    .map(|b| (b.name.as_str(), b.format.as_deref()))
                    .zip(vals)
                    .map(|((n, f), v)| (n, f, v))
                    .collect();
                // Without `fields`, the key-only names of the member's own
                // part of its sort key (not its aggregate's).
                let own: Vec<&str> = bound
                    .iter()
                    .skip(self.spec().sk_arity)
                    .map(|(n, _, _)| *n)
                    .collect();
                let shows = |n: &str| match &shape.fields {
                    Some(f) => f.contains(&n),
                    None => e.attr(n).is_some() || own.contains(&n),
                };
                self.fill_key_names(e, &bound, &mut out, shows);
            }
        }
        out
    }

    /// The condition under which the cascade deletes member part `name`
    /// as folded (`part`): every attribute it holds, and every declared
    /// one it lacks absent. (A part folded before parts held the whole
    /// item, only `fields`, is compared as it is: a member changed since
    /// then holds the whole item again.)
    pub(super) fn member_guard(&self, name: &str, part: &Item) -> Item {
        let mut guard = part.clone();
        let Some(i) = self.member_of_part(name) else {
            return guard;
        };
        let shape = &self.spec().members[i].shape;
        if shape.fields.is_none() {
            for a in self.declared(shape) {
                guard
                    .entry(a.to_string())
                    .or_insert(AttributeValue::Null(true));
            }
        }
        guard
    }

    /// The root's image its part `part` stands for, next to its image
    /// `new`: the part's attributes (absent where `NULL`), the keys and
    /// processor-owned ones of `new`, and (a root whose snapshot keeps only
    /// its `fields`) the others as `new` has them.
    fn image_of_part(&self, part: &Item, new: &Item) -> Item {
        let root = &self.spec().root;
        let mut image = new.clone();
        if root.fields.is_none() {
            image.retain(|k, _| root.excluded.contains(&k.as_str()));
        }
        for (k, v) in part {
            match v {
                AttributeValue::Null(_) => image.remove(k),
                v => image.insert(k.clone(), v.clone()),
            };
        }
        image
    }

    /// Whether `old` and `new` of the root differ in processor-owned
    /// attributes only (absent and `NULL` alike).
    pub(super) fn writers_same(&self, old: &Item, new: &Item) -> bool {
        let excluded = &self.spec().root.excluded;
        old.keys()
            .chain(new.keys())
            .filter(|k| !excluded.contains(&k.as_str()))
            .all(|k| normalized(old.get(k)) == normalized(new.get(k)))
    }

    /// Whether `old` and `new` of member `shape` differ in processor-owned
    /// attributes only (absent and `NULL` alike).
    pub(super) fn member_writers_same(&self, shape: &Shape, old: &Item, new: &Item) -> bool {
        old.keys()
            .chain(new.keys())
            .filter(|k| !shape.excluded.contains(&k.as_str()))
            .all(|k| normalized(old.get(k)) == normalized(new.get(k)))
    }

    /// Whether `old` and `new` show the same in a snapshot of `shape`
    /// (absent and `NULL` alike).
    /// (Compared on the images themselves: no part is built.)
    fn same_part(&self, shape: &Shape, old: &Item, new: &Item) -> bool {
        let same = |a: &str| normalized(old.get(a)) == normalized(new.get(a));
        match &shape.fields {
            Some(fields) => fields.iter().all(|f| same(f)),
            None => old
                .keys()
                .chain(new.keys())
                .filter(|k| !shape.excluded.contains(&k.as_str()))
                .all(|k| same(k)),
        }
    }

    /// The member a part name (a member's sort key) belongs to: its index
    /// in the spec's members.
    fn member_of_part(&self, part: &str) -> Option<usize> {
        let m = self.0;
        self.spec().members.iter().position(|mb| {
            m.entities[mb.shape.entity].key[1]
                .template
                .matches(part)
                .is_some()
        })
    }

    /// The snapshot of a state: the root's part, and each member's list
    /// sorted by its `order` (ties in part name order). Each part is matched
    /// to its member and its sort key read once.
    pub fn snapshot(&self, state: &FoldState) -> Item {
        let h = self.spec();
        let mut snap = state.parts.get(h.root_part).cloned().unwrap_or_default();
        for a in &h.root_read {
            snap.remove(*a);
        }
        let mut lists: Vec<Vec<Item>> = vec![Vec::new(); h.members.len()];
        for (name, part) in &state.parts {
            if name.as_str() == h.root_part {
                continue;
            }
            if let Some(i) = self.member_of_part(name) {
                lists[i].push(self.shown(&h.members[i].shape, name, part));
            }
        }
        for (mb, mut parts) in h.members.iter().zip(lists) {
            // Stable: parts of equal sort keys stay in name order.
            parts.sort_by_cached_key(|p| {
                mb.order
                    .iter()
                    .map(|o| sort_val(p.get(*o)))
                    .collect::<Vec<_>>()
            });
            snap.insert(
                mb.list.to_string(),
                AttributeValue::L(parts.into_iter().map(AttributeValue::M).collect()),
            );
        }
        snap
    }

    /// The state a snapshot shows (members named by their sort keys, the
    /// aggregate's own names in them its values `agg_sk`).
    fn state_of_snapshot(&self, snap: &Item, agg_sk: &[String]) -> FoldState {
        let m = self.0;
        let mut state = FoldState::default();
        let mut root = snap.clone();
        for mb in &self.spec().members {
            let Some(AttributeValue::L(list)) = root.remove(mb.list) else {
                continue;
            };
            let t = &m.entities[mb.shape.entity].key[1].template;
            for p in list {
                if let AttributeValue::M(p) = p {
                    let vals: Vec<String> = agg_sk
                        .iter()
                        .cloned()
                        .chain(
                            t.binders()
                                .skip(agg_sk.len())
                                .map(|b| match p.get(&b.name) {
                                    Some(AttributeValue::S(s)) => s.clone(),
                                    Some(AttributeValue::N(n)) => n.clone(),
                                    _ => String::new(),
                                }),
                        )
                        .collect();
                    state.parts.insert(t.build(&vals), p);
                }
            }
        }
        state.parts.insert(self.spec().root_part.to_string(), root);
        state
    }

    /// Evaluates a description.
    fn describe(
        &self,
        v: &Value,
        entity: usize,
        old: Option<&Item>,
        new: Option<&Item>,
        changes: Option<&str>,
        item: &Item,
    ) -> Result<String, InputError> {
        let e = &self.0.entities[entity];
        let (old, new) = (
            old.map(|i| self.key_filled(e, i, v.reads())),
            new.map(|i| self.key_filled(e, i, v.reads())),
        );
        let images = Images::new(e, old.as_deref(), new.as_deref(), changes);
        self.describe_with(v, &images, item)
    }

    /// Evaluates a description over images read once.
    fn describe_with(
        &self,
        v: &Value,
        images: &Images<'_>,
        item: &Item,
    ) -> Result<String, InputError> {
        let mut out = String::new();
        for p in &v.0 {
            match p {
                Part::Lit(l) => out.push_str(l),
                Part::Hole(x, _) => {
                    let got =
                        images
                            .eval(&self.0.env, x)
                            .map_err(|reason| InputError::Invalid {
                                key: self.key_text(item),
                                reason: format!("history: description: {reason}"),
                            })?;
                    out.push_str(&got.render());
                }
            }
        }
        Ok(out)
    }

    /// The labels of the root's attributes that changed, in `labels:` order
    /// (without labels: the names of the snapshot's attributes that changed).
    fn changes(&self, old: &Item, new: &Item) -> String {
        let h = self.spec();
        let changed = |a: &str| normalized(old.get(a)) != normalized(new.get(a));
        if !h.labels.is_empty() {
            return h
                .labels
                .iter()
                .filter(|(a, _)| changed(a))
                .map(|(_, l)| l.as_str())
                .collect::<Vec<_>>()
                .join(", ");
        }
        let (po, pn) = (self.part(&h.root, old), self.part(&h.root, new));
        let mut names: Vec<&String> = po.keys().chain(pn.keys()).collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .filter(|a| normalized(po.get(*a)) != normalized(pn.get(*a)))
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The description of a root update, `None` when no rule holds.
    fn root_updated(&self, old: &Item, new: &Item) -> Result<Option<String>, InputError> {
        let h = self.spec();
        let changes = self.changes(old, new);
        let e = &self.0.entities[h.root.entity];
        let reads = || {
            h.updated.iter().flat_map(|(when, say)| {
                let when = when
                    .iter()
                    .flat_map(|w| w.variables.iter().map(String::as_str));
                when.chain(say.reads())
            })
        };
        let (old, new) = (
            self.key_filled(e, old, reads()),
            self.key_filled(e, new, reads()),
        );
        // Each image converted once, for every rule and the description.
        let images = Images::new(e, Some(&old), Some(&new), Some(&changes));
        for (when, say) in &h.updated {
            let holds = match when {
                None => true,
                // A rule that cannot be evaluated (an old image of another
                // shape) does not hold.
                Some(w) => matches!(images.eval(&self.0.env, w), Ok(Val::Bool(true))),
            };
            if holds {
                return self.describe_with(say, &images, &new).map(Some);
            }
        }
        Ok(None)
    }

    /// Where writers' items carry their entity's name (`writer_type:
    /// checked`), an entry carries its own, so a reader that selects items
    /// by it (a library's `find`) never reads an entry as the root; where
    /// they carry none, neither does an entry (SPEC §3's exact entry).
    /// Every entry also carries the entries entity's constants (a required
    /// one-value enum: `__edb_v__: ["1"]`, so that ElectroDB's ownership
    /// check reads it as its own; import16 #4).
    pub(crate) fn stamp(&self, entry: &mut Item) {
        let e = &self.0.entities[self.spec().entries];
        if self.0.writer_type_checked {
            entry.insert(self.0.entity_type.to_string(), s(e.name));
        }
        for (a, v) in e.constants() {
            entry.insert(a.to_string(), v);
        }
    }

    fn entry(
        &self,
        aggregate: &str,
        seq: u64,
        description: String,
        change: &Change,
        state: &FoldState,
    ) -> (Item, Option<InputError>) {
        let h = self.spec();
        let id = Uuid::new_v5(&ENTRY_ID_NAMESPACE, change.event_id.as_bytes());
        let mut item = self.entry_key(aggregate, seq);
        for (k, v) in h.aggregate_attrs.iter().zip(self.values(aggregate)) {
            item.insert(k.to_string(), s(v));
        }
        for (k, v) in [
            ("id", s(id.to_string())),
            ("sequence", n(seq)),
            ("description", s(description)),
            ("createdAt", s(change.at_iso())),
        ] {
            item.insert(k.to_string(), v);
        }
        self.stamp(&mut item);
        item.insert(
            "snapshot".to_string(),
            AttributeValue::M(self.snapshot(state)),
        );
        let size = item_size(&item);
        if size > MAX_ITEM_BYTES {
            item.remove("snapshot");
            let reason = format!(
                "snapshot omitted: the entry would be {size} bytes, over the 400 KB item limit"
            );
            item.insert("snapshotOmitted".to_string(), s(&reason));
            let key = self.key_text(&item);
            return (item, Some(InputError::Invalid { key, reason }));
        }
        (item, None)
    }
}

// What the fold engine asks of a file's history (`FoldRules`).
#[path = "history_fold.rs"]
mod fold;

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "history_cascade_tests.rs"]
mod cascade_tests;

#[cfg(test)]
#[path = "history_owned_tests.rs"]
mod owned_tests;
