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
    pub created: Option<Value>,
    pub updated: Vec<(Option<Expr>, Value)>,
    pub labels: Vec<(&'static str, String)>,
    pub members: Vec<Member>,
    pub entries: usize,
    pub digits: usize,
    pub imported: &'static str,
    pub mirror: &'static str,
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
fn normalized(v: Option<&AttributeValue>) -> Option<&AttributeValue> {
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

    /// Validates a writer item (its entity's types, checks and keys).
    pub(super) fn validate(&self, item: &Item) -> Result<(), InputError> {
        match self.0.parse(item)? {
            Parsed::Writer(_) => Ok(()),
            Parsed::Processor(e) => Err(InputError::Invalid {
                key: self.key_text(item),
                reason: format!("history: `{}` is a processor entity", e.name),
            }),
        }
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
    fn writers_same(&self, old: &Item, new: &Item) -> bool {
        let excluded = &self.spec().root.excluded;
        old.keys()
            .chain(new.keys())
            .filter(|k| !excluded.contains(&k.as_str()))
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
        let mut lists: Vec<Vec<&Item>> = vec![Vec::new(); h.members.len()];
        for (name, part) in &state.parts {
            if name.as_str() == h.root_part {
                continue;
            }
            if let Some(i) = self.member_of_part(name) {
                lists[i].push(part);
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
                AttributeValue::L(
                    parts
                        .into_iter()
                        .map(|p| AttributeValue::M(p.clone()))
                        .collect(),
                ),
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
        let images = Images::new(&self.0.entities[entity], old, new, changes);
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
        // Each image converted once, for every rule and the description.
        let images = Images::new(e, Some(old), Some(new), Some(&changes));
        for (when, say) in &h.updated {
            let holds = match when {
                None => true,
                // A rule that cannot be evaluated (an old image of another
                // shape) does not hold.
                Some(w) => matches!(images.eval(&self.0.env, w), Ok(Val::Bool(true))),
            };
            if holds {
                return self.describe_with(say, &images, new).map(Some);
            }
        }
        Ok(None)
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

impl FoldRules for FileHistory {
    fn key_names(&self) -> &'static [&'static str] {
        self.0.keys
    }

    fn partition(&self, aggregate: &str) -> (&'static str, String) {
        (self.0.table.pk, self.pk(aggregate))
    }

    fn sort_prefix(&self, aggregate: &str) -> Option<(&'static str, String)> {
        self.root_sk(aggregate).map(|sk| (self.0.table.sk, sk))
    }

    fn is_of(&self, aggregate: &str, item: &Item) -> bool {
        if self.spec().sk_arity == 0 {
            return true;
        }
        self.classify(item)
            .ok()
            .and_then(|(_, pk, sk)| self.aggregate_of(pk, sk))
            .is_some_and(|a| a == aggregate)
    }

    fn aggregate(&self, change: &Change) -> Result<Option<String>, InputError> {
        let image = change.latest_image().unwrap_or(&change.keys);
        let (role, pk, sk) = self.classify(image)?;
        Ok(match role {
            Role::Root | Role::Member(_) => self.aggregate_of(pk, sk),
            Role::Entry | Role::Other => None,
        })
    }

    fn adoption_record(&self, change: &Change) -> Option<AdoptionRecord> {
        // Asked of every record: only an INSERT's image is classified.
        if change.kind != ChangeKind::Insert {
            return None;
        }
        let new = change.new.as_ref()?;
        let (role, pk, sk) = self.classify(new).ok()?;
        let is_adoption = role == Role::Entry
            && new.opt_s("description").ok().flatten() == Some(self.spec().imported);
        is_adoption.then(|| AdoptionRecord {
            aggregate: self.aggregate_of(pk, sk).unwrap_or_default(),
            sequence: new.opt_i64(SEQUENCE).ok().flatten().unwrap_or(0).max(0) as u64,
            id: new
                .opt_s("id")
                .ok()
                .flatten()
                .unwrap_or_default()
                .to_string(),
        })
    }

    fn starts_aggregate(&self, change: &Change) -> bool {
        change.kind == ChangeKind::Insert && self.role_of(change.new.as_ref()) == Role::Root
    }

    fn removes_root(&self, change: &Change) -> bool {
        change.kind == ChangeKind::Remove && self.role_of(change.old.as_ref()) == Role::Root
    }

    fn cascade(&self, aggregate: &str, state: &FoldState) -> Cascade {
        let pk = self.pk(aggregate);
        let [pkn, skn] = self.0.key_names();
        let key =
            |sk: String| -> Item { [(pkn.to_string(), s(&pk)), (skn.to_string(), s(sk))].into() };
        // The removed incarnation's members as it last had them (a member
        // of a later incarnation under the same key differs and stays), and
        // its entries 1..=seq.
        let members = state
            .parts
            .iter()
            .filter(|(name, _)| name.as_str() != self.spec().root_part)
            .map(|(name, part)| CascadeDelete {
                key: key(name.clone()),
                unchanged: Some(part.clone()),
            });
        let entries = (1..=state.seq).map(|seq| CascadeDelete {
            key: self.entry_key(aggregate, seq),
            unchanged: None,
        });
        Cascade {
            deletes: members.chain(entries).collect(),
        }
    }

    fn fold(
        &self,
        aggregate: &str,
        state: &mut FoldState,
        change: &Change,
    ) -> Result<FoldOutput, InputError> {
        let h = self.spec();
        let image = change.latest_image().unwrap_or(&change.keys);
        let (role, _, sk) = self.classify(image)?;
        let description = match (role, change.kind) {
            (Role::Root, ChangeKind::Remove) => {
                // The cascade deleted the members and entries: start afresh.
                *state = FoldState {
                    deleted: true,
                    ..FoldState::default()
                };
                return Ok(FoldOutput::default());
            }
            (Role::Root, kind) => {
                let new = change
                    .new
                    .as_ref()
                    .expect("decoded INSERT/MODIFY has a new image");
                if kind == ChangeKind::Modify
                    && !state.deleted
                    && state.parts.contains_key(h.root_part)
                    && change
                        .old
                        .as_ref()
                        .is_some_and(|old| self.writers_same(old, new))
                {
                    // Only processor-owned attributes changed (a projection,
                    // a mirror): nothing the writer wrote, so nothing to
                    // fold, and a root that is bad input is not counted
                    // again (its own record was).
                    return Ok(FoldOutput::default());
                }
                self.validate(new)?;
                let was_rejected = std::mem::take(&mut state.rejected);
                if state.deleted {
                    // Members written while the root was away (the deleted
                    // incarnation's were cascaded) are the new one's.
                    *state = FoldState {
                        parts: std::mem::take(&mut state.parts),
                        ..FoldState::default()
                    };
                }
                // Valid again after bad input: the change is told from the
                // root as the history last showed it, not from the old
                // image (bad input, never folded).
                let last_valid = state
                    .parts
                    .get(h.root_part)
                    .filter(|_| was_rejected)
                    .map(|part| self.image_of_part(part, new));
                let old = last_valid.as_ref().or(change.old.as_ref());
                state
                    .parts
                    .insert(h.root_part.to_string(), self.part(&h.root, new));
                match (kind, old) {
                    // Nothing a snapshot shows changed (e.g. the mirror this
                    // processor wrote): no entry, whatever the rules say.
                    (ChangeKind::Modify, Some(old)) if self.same_part(&h.root, old, new) => None,
                    (ChangeKind::Modify, Some(old)) => self.root_updated(old, new)?,
                    _ => Some(match &h.created {
                        Some(v) => self.describe(v, h.root.entity, None, Some(new), None, new)?,
                        None => format!("Created {}", self.0.entities[h.root.entity].name),
                    }),
                }
            }
            // A member of a deleted root (the cascade's own removals, or one
            // written before the root comes back) folds into the state
            // without an entry: there is no root (below).
            (Role::Member(i), ChangeKind::Remove) => {
                let mb = &h.members[i];
                let old = change
                    .old
                    .as_ref()
                    .expect("decoded REMOVE has an old image");
                // A member this incarnation does not have (e.g. one of a
                // deleted incarnation, removed by the cascade): no entry.
                if state.parts.remove(sk).is_none() {
                    return Ok(FoldOutput::default());
                }
                Some(match &mb.removed {
                    Some(v) => self.describe(v, mb.shape.entity, Some(old), None, None, old)?,
                    None => format!("Removed {}", self.0.entities[mb.shape.entity].name),
                })
            }
            (Role::Member(i), kind) => {
                let mb = &h.members[i];
                let e = &self.0.entities[mb.shape.entity];
                let new = change
                    .new
                    .as_ref()
                    .expect("decoded INSERT/MODIFY has a new image");
                self.validate(new)?;
                // A MODIFY of a member this incarnation does not have (one
                // of a deleted incarnation overwritten under the same key)
                // adds it.
                let known = state
                    .parts
                    .insert(sk.to_string(), self.part(&mb.shape, new))
                    .is_some();
                match (kind, &change.old) {
                    (ChangeKind::Modify, Some(old)) if known => {
                        let mut watched: Vec<&str> = e.attrs.iter().map(|a| a.name).collect();
                        watched.extend(mb.shape.fields.iter().flatten().copied());
                        let changed = watched
                            .iter()
                            .any(|f| normalized(old.get(*f)) != normalized(new.get(*f)));
                        match (changed, &mb.updated) {
                            (false, _) => None,
                            (true, Some(v)) => Some(self.describe(
                                v,
                                mb.shape.entity,
                                Some(old),
                                Some(new),
                                None,
                                new,
                            )?),
                            (true, None) => Some(format!("Updated {}", e.name)),
                        }
                    }
                    _ => Some(match &mb.added {
                        Some(v) => self.describe(v, mb.shape.entity, None, Some(new), None, new)?,
                        None => format!("Added {}", e.name),
                    }),
                }
            }
            (Role::Entry | Role::Other, _) => return Ok(FoldOutput::default()),
        };
        // Changes of members of a root this processor has never seen fold
        // into the state but write no entry.
        let Some(description) = description.filter(|_| state.parts.contains_key(h.root_part))
        else {
            return Ok(FoldOutput::default());
        };
        state.seq += 1;
        let (item, notice) = self.entry(aggregate, state.seq, description, change, state);
        Ok(FoldOutput {
            entries: vec![item],
            notices: notice
                .map(|n| (names::SNAPSHOT_TOO_LARGE, n))
                .into_iter()
                .collect(),
        })
    }

    fn absorb(&self, state: &mut FoldState, change: &Change) -> Result<(), InputError> {
        let h = self.spec();
        let image = change.latest_image().unwrap_or(&change.keys);
        let (role, _, sk) = self.classify(image)?;
        let (part, shape) = match role {
            Role::Root => (h.root_part.to_string(), &h.root),
            Role::Member(i) => (sk.to_string(), &h.members[i].shape),
            Role::Entry | Role::Other => return Ok(()),
        };
        match &change.new {
            None => {
                state.parts.remove(&part);
            }
            Some(new) => {
                self.validate(new)?;
                state.rejected &= role != Role::Root;
                state.parts.insert(part, self.part(shape, new));
            }
        }
        Ok(())
    }

    fn sequence_mirror(&self, aggregate: &str) -> Option<(Item, &'static str)> {
        let root = &self.0.entities[self.spec().root.entity];
        if let Some(sk) = self.root_sk(aggregate) {
            let key: Item = [
                (root.key[0].attr.to_string(), s(self.pk(aggregate))),
                (root.key[1].attr.to_string(), s(sk)),
            ]
            .into();
            return Some((key, self.spec().mirror));
        }
        let key: Item = root
            .key
            .iter()
            .map(|k| {
                let vals: Vec<&str> = k.template.binders().map(|_| aggregate).collect();
                (k.attr.to_string(), s(k.template.build(&vals)))
            })
            .collect();
        Some((key, self.spec().mirror))
    }

    fn root_guard(&self, state: &FoldState) -> Option<Item> {
        if state.rejected {
            return None;
        }
        let h = self.spec();
        let mut guard = state.parts.get(h.root_part)?.clone();
        if h.root.fields.is_none() {
            // The part holds what the root had; the declared attributes it
            // lacked are guarded absent too: the root's validity is a
            // function of its declared attributes and its entity type, so
            // the guard holds on no item the rules reject (a root that
            // gained an optional attribute of the wrong type, say).
            let e = &self.0.entities[h.root.entity];
            let absent = e
                .attrs
                .iter()
                .map(|a| a.name)
                .chain(self.0.writer_type_checked.then_some(self.0.entity_type))
                .filter(|a| !h.root.excluded.contains(a))
                .collect::<Vec<_>>();
            for a in absent {
                guard
                    .entry(a.to_string())
                    .or_insert(AttributeValue::Null(true));
            }
        }
        Some(guard)
    }

    fn adopt(
        &self,
        aggregate: &str,
        partition: &[Item],
        at: chrono::DateTime<chrono::Utc>,
        token: &str,
    ) -> Adoption {
        let mut state = self.table_state(partition);
        if !state.parts.contains_key(self.spec().root_part) {
            return Adoption::Rootless(state);
        }
        state.seq += 1;
        let change = Change {
            event_id: format!("adopt:{aggregate}:{token}"),
            sequence_number: crate::change::SequenceNumber::parse("0")
                .expect("0 is a sequence number"),
            kind: ChangeKind::Insert,
            origin: crate::change::Origin::User,
            keys: Item::new(),
            old: None,
            new: None,
            at,
        };
        let imported = self.spec().imported.to_string();
        let (entry, _) = self.entry(aggregate, state.seq, imported, &change, &state);
        let id = entry.s("id").unwrap_or_default().to_string();
        Adoption::Entry { state, entry, id }
    }

    fn table_state(&self, partition: &[Item]) -> FoldState {
        let h = self.spec();
        let mut state = FoldState::default();
        for item in partition {
            let Ok((role, _, sk)) = self.classify(item) else {
                continue;
            };
            match role {
                Role::Entry => {
                    let seq = item.opt_i64(SEQUENCE).ok().flatten().unwrap_or(0).max(0) as u64;
                    state.seq = state.seq.max(seq);
                }
                Role::Root if self.validate(item).is_ok() => {
                    state
                        .parts
                        .insert(h.root_part.to_string(), self.part(&h.root, item));
                }
                Role::Member(i) if self.validate(item).is_ok() => {
                    state
                        .parts
                        .insert(sk.to_string(), self.part(&h.members[i].shape, item));
                }
                _ => {}
            }
        }
        state
    }

    fn entry_key(&self, aggregate: &str, seq: u64) -> Item {
        let h = self.spec();
        let e = &self.0.entities[h.entries];
        let [pkn, skn] = self.0.key_names();
        let number = format!("{seq:0w$}", w = h.digits);
        let v = self.values(aggregate);
        let sk_vals: Vec<String> = v[h.pk_arity.min(v.len())..]
            .iter()
            .take(h.sk_arity)
            .cloned()
            .chain(std::iter::once(number))
            .collect();
        [
            (pkn.to_string(), s(self.pk(aggregate))),
            (skn.to_string(), s(e.key[1].template.build(&sk_vals))),
        ]
        .into()
    }

    fn correct_entry(&self, entry: &Item, part: &str, value: Option<&Item>) -> Option<Item> {
        let Some(AttributeValue::M(snap)) = entry.get("snapshot") else {
            // Omitted (over 400 KB): nothing to correct.
            return None;
        };
        let h = self.spec();
        let [pkn, skn] = self.0.key_names();
        let agg_sk = match (entry.opt_s(pkn), entry.opt_s(skn)) {
            (Ok(Some(pk)), Ok(Some(sk))) => self
                .aggregate_of(pk, sk)
                .map(|a| self.values(&a).split_off(h.pk_arity))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let mut state = self.state_of_snapshot(snap, &agg_sk);
        match value {
            Some(v) => state.parts.insert(part.to_string(), v.clone()),
            None => state.parts.remove(part),
        };
        let want = AttributeValue::M(self.snapshot(&state));
        if entry.get("snapshot") == Some(&want) {
            return None;
        }
        let mut fixed = entry.clone();
        fixed.insert("snapshot".to_string(), want);
        (item_size(&fixed) <= MAX_ITEM_BYTES).then_some(fixed)
    }

    fn verify(&self, input: &crate::models::CheckInput<'_>) -> Vec<crate::models::Finding> {
        let (checked, found) = self.check_tallied(input.items);
        for (kind, n) in checked {
            input.checked(kind, n);
        }
        found
    }

    fn restate(&self, entry: &Item, state: &FoldState) -> Restated {
        if !state.parts.contains_key(self.spec().root_part) {
            return Restated::RootGone;
        }
        let want = AttributeValue::M(self.snapshot(state));
        if entry.get("snapshot") == Some(&want) {
            return Restated::Same;
        }
        let mut fixed = entry.clone();
        fixed.remove("snapshotOmitted");
        fixed.insert("snapshot".to_string(), want);
        if item_size(&fixed) > MAX_ITEM_BYTES {
            if entry.contains_key("snapshotOmitted") {
                return Restated::Same;
            }
            fixed.remove("snapshot");
            fixed.insert(
                "snapshotOmitted".to_string(),
                s("snapshot omitted: the entry would exceed the 400 KB item limit"),
            );
        }
        Restated::Rewrite(fixed)
    }
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;
