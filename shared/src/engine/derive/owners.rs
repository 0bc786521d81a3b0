//! The owners of a shared derived item ([`super::Rules::shared`]): the
//! item lives while any source implies it and holds what the source whose
//! key ([`item_id`]) sorts last implies.
//!
//! Under the item's owners partition (`OWN#<processor>#<item id>`) the
//! ledger keeps one item per owner (`R#<source id>`, holding what that
//! source implies, so the owners sort as their ids do) and a head (`O`):
//! a version that every change of the owners bumps, in the same
//! transaction as the owners' items and the derived item, conditioned on
//! the version read, and the owner that sorts last. So the bookkeeping
//! grows with the sources (one small item each, no item limit to reach),
//! and whoever commits a change of the set does so on the view it read:
//!
//! - a change of an owner that is not the last-sorting one and does not
//!   become it reads the head and that owner's item (with the group's other
//!   reads) and writes that owner's item and the head;
//! - a change that removes the last-sorting owner reads the last owners
//!   (one Query, descending, as many as the group removes plus one) to find
//!   the next, whose content the derived item then takes.
//!
//! A head written before the owners had an item each holds them all in a
//! map (`s`): such a head is read as it is (its map is every owner, so the
//! last-sorting one is its map's last), and each owner the engine touches
//! moves from the map to an item of its own, in the transaction of its
//! change.
//!
//! A group's changes of one shared item may span several transactions
//! (100 actions each): each transaction that holds some of them bumps the
//! head once and writes the derived item as the owners are after it
//! ([`SharedPlan::step`]), so the item is exact after every commit.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use futures::future::try_join_all;

use super::keys::{
    owner_key, owner_sk, owners_key, owners_pk, OWNERS_HEAD_SK, OWNER_HASHED_SK, OWNER_SK,
};
use super::plan::{derived_write, DerivedWrite};
use super::{Deriver, TOMBSTONE_TTL_SECS};
use crate::error::ProcessError;
use crate::item::{n, same_items, Item, ItemExt};
use crate::ledger;
use crate::tx;

/// Head attribute: the head's layout has an item per owner (without it,
/// a head from before holds them all in [`LEGACY`]).
const ROWS: &str = "rows";
/// Head attribute: the source id of the owner that sorts last.
const TOP: &str = "top";
/// Head attribute of the layout before: source id -> content, every owner.
const LEGACY: &str = "s";
/// Owner attribute: what the owner implies.
const CONTENT: &str = "d";
/// Owner attribute: the owner's source id.
const SOURCE: &str = "src";

/// One source of a group touching a derived item: its position, its id,
/// what it implies now (`None`: no longer implied) and what it recorded.
#[derive(Debug, Clone)]
pub(super) struct Touch {
    pub(super) pos: usize,
    pub(super) src: String,
    pub(super) now: Option<Item>,
    pub(super) was: Option<Item>,
}

/// What the group's reads saw of a shared derived item's owners.
#[derive(Debug, Clone, Default)]
pub(super) struct Owners {
    /// The head's version (0: no head).
    pub(super) ver: i64,
    /// Whether owners may have items of their own (the head is of this
    /// layout); a head from before holds every owner in its map.
    pub(super) rows: bool,
    /// The head's last-sorting owner (heads of the layout with an item per
    /// owner; `None` there: no owner).
    pub(super) top: Option<String>,
    /// The owners a head from before holds in its map (all of them there),
    /// less those moved to items of their own.
    pub(super) legacy: BTreeMap<String, Item>,
    /// The owner items read: those of the group's touching sources, and
    /// the last-sorting ones when the last may go.
    pub(super) items: BTreeMap<String, Item>,
}

impl Deriver {
    /// The owners of the shared derived items among `touched` (by derived
    /// id: its key and the group's sources touching it), reading the head
    /// and the touching sources' owner items together, then, for the items
    /// whose last-sorting owner the group removes (or whose item is missing
    /// while its last owner is untouched), the last owners.
    pub(super) async fn read_owners(
        &self,
        touched: &BTreeMap<String, (Item, Vec<Touch>)>,
        existing: &HashMap<String, Item>,
    ) -> Result<HashMap<String, Owners>, ProcessError> {
        let shared: Vec<(&String, &Item, &Vec<Touch>)> = touched
            .iter()
            .filter(|(_, (k, _))| self.rules.shared(k))
            .map(|(id, (k, t))| (id, k, t))
            .collect();
        if shared.is_empty() {
            return Ok(HashMap::new());
        }
        let mut keys = Vec::new();
        for (_, dkey, touches) in &shared {
            keys.push(owners_key(self.processor, dkey));
            for t in touches.iter() {
                keys.push(owner_key(self.processor, dkey, &t.src));
            }
        }
        let read: HashMap<(String, String), Item> = self
            .store
            .batch_get(&self.ledger_table, keys)
            .await?
            .into_iter()
            .filter_map(|i| {
                let pk = ledger::as_s(i.get(ledger::PK))?.to_string();
                let sk = ledger::as_s(i.get(ledger::SK))?.to_string();
                Some(((pk, sk), i))
            })
            .collect();
        let mut out = HashMap::new();
        let mut last_wanted = Vec::new();
        for (id, dkey, touches) in shared {
            let pk = owners_pk(self.processor, dkey);
            let mut o = match read.get(&(pk.clone(), OWNERS_HEAD_SK.to_string())) {
                Some(head) => head_of(&pk, head)?,
                None => Owners::default(),
            };
            for t in touches {
                if let Some(item) = read.get(&(pk.clone(), owner_sk(&t.src))) {
                    o.items.insert(t.src.clone(), content_of(&pk, item)?);
                }
            }
            let top_goes = touches
                .iter()
                .any(|t| t.now.is_none() && o.top.as_ref() == Some(&t.src));
            let top_unread = o.top.as_ref().is_some_and(|top| {
                !touches.iter().any(|t| &t.src == top) && !o.legacy.contains_key(top)
            }) && !existing.contains_key(id);
            if o.rows && (top_goes || top_unread) {
                let removed = touches.iter().filter(|t| t.now.is_none()).count();
                last_wanted.push((id.clone(), pk, removed + 1));
            }
            out.insert(id.clone(), o);
        }
        let lasts = try_join_all(last_wanted.into_iter().map(|(id, pk, limit)| async move {
            self.last_owners(&pk, limit).await.map(|items| (id, items))
        }))
        .await?;
        for (id, items) in lasts {
            if let Some(o) = out.get_mut(&id) {
                for (src, content) in items {
                    o.items.entry(src).or_insert(content);
                }
            }
        }
        Ok(out)
    }

    /// The `limit` last-sorting owners of the partition `pk`, and every
    /// owner whose id was too long to sort by (those keyed by its hash).
    async fn last_owners(
        &self,
        pk: &str,
        limit: usize,
    ) -> Result<Vec<(String, Item)>, ProcessError> {
        let names = (ledger::PK, pk);
        let (last, hashed) = futures::try_join!(
            self.store
                .query_last(&self.ledger_table, names, (ledger::SK, OWNER_SK), limit),
            self.store.query(
                &self.ledger_table,
                None,
                ledger::PK,
                pk,
                Some(crate::store::SortKey::BeginsWith(
                    ledger::SK.to_string(),
                    OWNER_HASHED_SK.to_string()
                )),
            ),
        )?;
        last.iter()
            .chain(&hashed)
            .map(|i| {
                let src = i.s(SOURCE).map_err(|e| corrupt(pk, &e.to_string()))?;
                Ok((src.to_string(), content_of(pk, i)?))
            })
            .collect()
    }

    /// The owners plan of a shared derived item the group touches: the
    /// owner items each source's own transaction writes (by position), and
    /// the plan of the head and the derived item.
    pub(super) fn plan_owners(
        &self,
        dkey: &Item,
        touches: &[Touch],
        owners: &Owners,
        have: Option<&Item>,
    ) -> (BTreeMap<usize, TransactWriteItem>, SharedPlan) {
        let mut writes = BTreeMap::new();
        let mut changes = BTreeMap::new();
        for t in touches {
            let in_map = owners.legacy.contains_key(&t.src);
            let item = owners.items.get(&t.src);
            match &t.now {
                Some(d) => {
                    if in_map || !item.is_some_and(|i| same_items(i, d)) {
                        let mut row = owner_key(self.processor, dkey, &t.src);
                        row.insert(CONTENT.into(), AttributeValue::M(d.clone()));
                        row.insert(SOURCE.into(), AttributeValue::S(t.src.clone()));
                        writes.insert(t.pos, tx::put(&self.ledger_table, row));
                        changes.insert(t.pos, (t.src.clone(), Some(d.clone())));
                    }
                }
                None => {
                    if item.is_some() {
                        let key = owner_key(self.processor, dkey, &t.src);
                        writes.insert(t.pos, tx::delete(&self.ledger_table, key));
                    }
                    if item.is_some() || in_map {
                        changes.insert(t.pos, (t.src.clone(), None));
                    }
                }
            }
        }
        // Every owner known: the map of a head from before (all of them),
        // the items read, and the last-sorting one (its content unknown
        // unless read: then the derived item holds it already).
        let mut known: BTreeMap<String, Option<Item>> = owners
            .legacy
            .iter()
            .chain(&owners.items)
            .map(|(s, d)| (s.clone(), Some(d.clone())))
            .collect();
        if let Some(top) = &owners.top {
            known.entry(top.clone()).or_insert(None);
        }
        let plan = SharedPlan {
            dkey: dkey.clone(),
            carrier: touches.iter().map(|t| t.pos).min().unwrap_or_default(),
            carried: false,
            changes,
            state: State {
                ver: owners.ver,
                known,
                legacy: owners.legacy.keys().cloned().collect(),
                have: have.cloned(),
            },
            recorded: touches.iter().filter_map(|t| t.was.clone()).collect(),
            processor: self.processor,
            table: self.table.clone(),
            ledger_table: self.ledger_table.clone(),
            now: (self.now)().timestamp(),
            ttl: self.rules.ttl_attribute(),
        };
        (writes, plan)
    }
}

/// A shared derived item's owners and the item, as known.
#[derive(Debug, Clone)]
pub(super) struct State {
    ver: i64,
    /// Owners by source id, with what each implies (`None`: not read; only
    /// the last-sorting owner while untouched).
    known: BTreeMap<String, Option<Item>>,
    /// Owners still in the map of a head from before.
    legacy: BTreeSet<String>,
    /// The derived item.
    have: Option<Item>,
}

/// The plan of a shared derived item's head and the item itself across the
/// transactions of a group (see the module docs).
#[derive(Debug, Clone)]
pub(super) struct SharedPlan {
    dkey: Item,
    /// The first position touching it: the source that carries the item's
    /// write when no owner changes (an item to bring back).
    pub(super) carrier: usize,
    /// Whether the carrier's plan carries it.
    pub(super) carried: bool,
    /// By position: the owner whose item changes, and what it implies now.
    pub(super) changes: BTreeMap<usize, (String, Option<Item>)>,
    state: State,
    /// What the group's sources recorded for the item (no head: an item
    /// recorded before the owners were kept goes only while it is one of
    /// these).
    recorded: Vec<Item>,
    processor: &'static str,
    table: String,
    ledger_table: String,
    now: i64,
    /// The table's TTL attribute (an item past it is never put).
    ttl: Option<&'static str>,
}

/// The actions one transaction adds for a shared derived item, and the
/// state once it commits.
pub(super) struct Step {
    pub(super) actions: Vec<TransactWriteItem>,
    /// Of `actions`, those in the table (the derived item).
    pub(super) table_writes: usize,
    pub(super) next: State,
}

impl SharedPlan {
    /// Whether a transaction holding the plans at `positions` takes part.
    pub(super) fn touched_by(&self, positions: &BTreeSet<usize>) -> bool {
        (self.carried && positions.contains(&self.carrier))
            || self.changes.keys().any(|p| positions.contains(p))
    }

    /// The head and item actions of a transaction holding the plans at
    /// `positions` (their owner items' writes are in their own actions).
    pub(super) fn step(&self, positions: &BTreeSet<usize>) -> Option<Step> {
        let mut next = self.state.clone();
        let mut moved = Vec::new();
        let mut changed = false;
        for (pos, (src, now)) in &self.changes {
            if !positions.contains(pos) {
                continue;
            }
            changed = true;
            if next.legacy.remove(src) {
                moved.push(src.clone());
            }
            match now {
                Some(d) => next.known.insert(src.clone(), Some(d.clone())),
                None => next.known.remove(src),
            };
        }
        let want = match next.known.last_key_value() {
            Some((_, Some(d))) => Some(d.clone()),
            // The last-sorting owner untouched and unread: the item holds
            // it (its absence made the reads read it).
            Some((_, None)) => next.have.clone(),
            // Owners recorded before the head existed cannot be told apart:
            // the item goes only while it is what a source of the group
            // wrote.
            None if self.state.ver == 0
                && !self
                    .recorded
                    .iter()
                    .any(|r| next.have.as_ref().is_some_and(|h| same_items(h, r))) =>
            {
                next.have.clone()
            }
            None => None,
        };
        let mut actions = Vec::new();
        let mut table_writes = 0;
        // The item once the step commits.
        let after = match derived_write(want.as_ref(), next.have.as_ref(), self.ttl, self.now) {
            DerivedWrite::Put(d) => {
                actions.push(tx::put(&self.table, d.clone()));
                table_writes += 1;
                Some(d.clone())
            }
            DerivedWrite::Delete => {
                actions.push(tx::delete(&self.table, self.dkey.clone()));
                table_writes += 1;
                None
            }
            DerivedWrite::Keep => next.have.clone(),
        };
        if !changed && actions.is_empty() {
            return None;
        }
        let head = self.head_write(&next, &moved);
        actions.insert(0, head);
        next.have = after;
        next.ver += 1;
        Some(Step {
            actions,
            table_writes,
            next,
        })
    }

    /// What its head and item weigh in a transaction (bytes, roughly: the
    /// item as it is or as its owners imply, the larger).
    pub(super) fn bytes(&self) -> usize {
        let item = self.state.have.as_ref().map_or(0, crate::item::item_size);
        let owners = self
            .changes
            .values()
            .filter_map(|(_, d)| d.as_ref().map(crate::item::item_size))
            .max()
            .unwrap_or(0);
        item.max(owners) + 2048
    }

    /// Adopts the state after a committed step.
    pub(super) fn adopt(&mut self, next: State) {
        self.state = next;
    }

    /// The head's update: the version read bumped (conditioned on it), the
    /// last-sorting owner, the owners `moved` out of a map from before,
    /// and a TTL while no owner is left (the version outlives concurrent
    /// readers, then the head goes).
    fn head_write(&self, next: &State, moved: &[String]) -> TransactWriteItem {
        let key = owners_key(self.processor, &self.dkey);
        let mut set = vec!["ver = :nv".to_string(), format!("#rows = :rows")];
        let mut remove = Vec::new();
        let mut u = Update::builder()
            .table_name(&self.ledger_table)
            .set_key(Some(key))
            .expression_attribute_names("#rows", ROWS)
            .expression_attribute_names("#top", TOP)
            .expression_attribute_names("#ttl", ledger::TTL)
            .expression_attribute_values(":nv", n(self.state.ver + 1))
            .expression_attribute_values(":rows", AttributeValue::Bool(true));
        match next.known.last_key_value() {
            Some((top, _)) => {
                set.push("#top = :top".into());
                remove.push("#ttl".to_string());
                u = u.expression_attribute_values(":top", AttributeValue::S(top.clone()));
            }
            None => {
                remove.push("#top".into());
                set.push("#ttl = :ttl".into());
                u = u.expression_attribute_values(":ttl", n(self.now + TOMBSTONE_TTL_SECS));
            }
        }
        if !moved.is_empty() {
            u = u.expression_attribute_names("#s", LEGACY);
            if next.legacy.is_empty() {
                remove.push("#s".into());
            } else {
                for (i, src) in moved.iter().enumerate() {
                    remove.push(format!("#s.#m{i}"));
                    u = u.expression_attribute_names(format!("#m{i}"), src.clone());
                }
            }
        }
        let mut expr = format!("SET {}", set.join(", "));
        if !remove.is_empty() {
            expr.push_str(&format!(" REMOVE {}", remove.join(", ")));
        }
        u = u.update_expression(expr);
        u = if self.state.ver == 0 {
            u.condition_expression("attribute_not_exists(pk)")
        } else {
            u.condition_expression("ver = :v")
                .expression_attribute_values(":v", n(self.state.ver))
        };
        tx::update_of(u)
    }
}

fn corrupt(pk: &str, why: &str) -> ProcessError {
    ProcessError::Permanent(format!("ledger owners {pk} are corrupt: {why}"))
}

/// A head as read: its version, last-sorting owner, and the map of a head
/// from before.
fn head_of(pk: &str, head: &Item) -> Result<Owners, ProcessError> {
    let ver = head
        .opt_i64("ver")
        .map_err(|e| corrupt(pk, &e.to_string()))?
        .unwrap_or(1);
    let mut legacy = BTreeMap::new();
    match head.get(LEGACY) {
        None => {}
        Some(AttributeValue::M(m)) => {
            for (src, d) in m {
                let AttributeValue::M(d) = d else {
                    return Err(corrupt(pk, &format!("owner {src} is not a map")));
                };
                legacy.insert(src.clone(), d.clone());
            }
        }
        Some(_) => return Err(corrupt(pk, "its owners are not a map")),
    }
    let top = if head.contains_key(ROWS) {
        head.opt_s(TOP)
            .map_err(|e| corrupt(pk, &e.to_string()))?
            .map(str::to_string)
    } else {
        // A head from before: its map is every owner.
        legacy.keys().next_back().cloned()
    };
    Ok(Owners {
        ver,
        rows: head.contains_key(ROWS),
        top,
        legacy,
        items: BTreeMap::new(),
    })
}

/// What an owner item says its source implies.
fn content_of(pk: &str, item: &Item) -> Result<Item, ProcessError> {
    match item.get(CONTENT) {
        Some(AttributeValue::M(d)) => Ok(d.clone()),
        _ => Err(corrupt(
            pk,
            &format!(
                "owner {} holds no content",
                ledger::as_s(item.get(ledger::SK)).unwrap_or_default()
            ),
        )),
    }
}
