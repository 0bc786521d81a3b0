//! Counter items: their attributes are the ledger totals.
//!
//! Contributions and their totals change atomically in the ledger (see
//! [`super::derive`]). A counter item in the table is then *set* to the
//! totals: one write per counter item per batch however many contributions
//! changed (a burst of likes coalesces into one write), in a transaction with
//! a condition check on the totals' version, so a slower writer holding older
//! totals can never overwrite newer ones.
//!
//! - processor-created counters (`Counter::create` is `Some`) are created on
//!   their first count, stamped, with every attribute present (0 when nothing
//!   counts), and deleted at zero if the model says so. A first count that
//!   moves no total (a count of 0; a follow and its unfollow in one batch)
//!   is a count all the same: the sync is told so ([`Counted`]), creates the
//!   item at 0 if it is absent (conditioned on its absence, never a write
//!   onto one that exists for nothing) and puts the totals that say it
//!   exists (`ver` 1, no sum), so that it comes back from its key alone as
//!   any counted item does;
//! - writer-owned counters (`create` is `None`, e.g. a department's
//!   `headcount`) are never created: their totals wait in the ledger and are
//!   written when the item appears, and written back when a writer's put
//!   drops or changes them;
//! - the counter item's own projection (e.g. a padded sort key of the sum)
//!   is written in the same update, so its stream record is a fixpoint;
//! - a write sets every sum (and the stamps and the projection) from one
//!   reading of the totals, not only what differs from the item as read:
//!   a writer's re-put that drops the sums, or a deletion, landing between
//!   the read and the write never leaves a mix of sums no prefix of the
//!   facts implies. The projection is conditioned on its sources as read.
//!
//! The totals carry `ver` (moved by every commit) and `synced` (the `ver`
//! the counter item was last brought to, set in the same transaction as
//! the counter item's write). `synced != ver` is a counter item that lags:
//! a write lost after the ledger commit (a crash, throttling past the
//! retries). The sources whose change moved the totals list the counter in
//! their record until a reconcile finds it synced (see [`super::derive`]),
//! so the redelivery of the batch makes the write although it finds every
//! source unchanged.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Put, TransactWriteItem, Update as TxUpdate,
};
use futures::stream::{self, StreamExt};

use super::derive::{set_remove, total_attr, total_key, Deriver};
use super::locate::Located;
use super::rules::{Counter, Note};
use crate::error::{Policy, ProcessError};
use crate::item::{n, Item, ItemExt};
use crate::ledger::item_id;
use crate::limits::MAX_TX_ACTIONS;
use crate::store::TxError;
use crate::tx;

const ATTEMPTS: usize = 5;

/// Ledger totals of a counter item, and their version (0 = no totals yet).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    /// Sums of i64 contributions: exact past 64 bits, as DynamoDB adds
    /// them (38 digits).
    pub sums: BTreeMap<String, i128>,
    pub ver: i64,
    /// The `ver` the counter item was last brought to.
    pub synced: i64,
}

/// The totals attribute holding the version the counter item reflects.
pub const SYNCED: &str = "synced";

/// The totals attribute saying that the processor creates their counter
/// item (a counter `created_by: processor`, its item stamped): set with
/// `synced`. Once the counter is gone from a model file, it is what tells
/// the processor's item at that key (`verify --repair` and `backfill`
/// delete it) from an application's, which is never deleted.
pub const CREATED: &str = "created";

/// Whether a totals item says the processor created its counter item.
pub fn is_created(totals: &Item) -> bool {
    matches!(totals.get(CREATED), Some(AttributeValue::Bool(true)))
}

/// Whether a totals item says its counter item reflects it.
pub fn is_synced(totals: &Item) -> bool {
    let ver = totals.opt_i64("ver").ok().flatten().unwrap_or(0);
    let synced = totals.opt_i64(SYNCED).ok().flatten();
    synced == Some(ver)
}

impl Totals {
    /// The totals of a ledger item; a sum DynamoDB holds and an i128 does
    /// not (it refuses to add past 38 digits) is an error, never a wrapped
    /// number or 0.
    fn from_item(item: &Item, counter: &Counter) -> Result<Self, String> {
        let mut sums = BTreeMap::new();
        for a in counter.attrs {
            let v = item
                .opt_i128(&total_attr(a))
                .map_err(|_| format!("the sum of {a} does not fit 38 digits"))?
                .unwrap_or(0);
            sums.insert(a.to_string(), v);
        }
        Ok(Self {
            sums,
            ver: item.opt_i64("ver").ok().flatten().unwrap_or(0),
            synced: item.opt_i64(SYNCED).ok().flatten().unwrap_or(-1),
        })
    }

    fn zero(counter: &Counter) -> Self {
        Self {
            sums: counter.attrs.iter().map(|a| (a.to_string(), 0)).collect(),
            ver: 0,
            synced: 0,
        }
    }
}

/// Ids ([`item_id`] of their keys) of counters something counts into,
/// though their totals may not have moved: their processor-created item
/// exists from the first count on.
pub type Counted = BTreeSet<String>;

/// Whether the processor creates `counter`'s item at its first count and
/// keeps it (a counter `remove_at_zero` is absent at 0).
pub fn kept_from_first_count(counter: &Counter) -> bool {
    counter.create.is_some() && !counter.remove_at_zero
}

/// What the counter item should become.
enum Target {
    Nothing,
    Delete,
    Update {
        /// Every attribute the counter owns on the item: all its sums (from
        /// one reading of the totals), its stamps and its projection, not
        /// only those that differ from the item as read. A writer may have
        /// replaced the item since the read (a re-put that drops the sums,
        /// a deletion of a processor-created one): a write of the few sums
        /// that changed would then leave `tasks = 6` beside `doing = 1` and
        /// no `todo`, which no prefix of the facts implies; the whole set
        /// leaves the sums of one prefix whatever it lands on.
        sets: Vec<(String, AttributeValue)>,
        /// Every attribute the projection says must be absent.
        removes: Vec<String>,
        /// The item's own attributes the projection was computed from (not
        /// its key, not a sum: those the write itself sets), as read
        /// (`None`: absent). The write is conditioned on them (SPEC §2.6):
        /// a projection computed from an item a writer changed since is
        /// not written; the sync reads again.
        sources: Vec<(String, Option<AttributeValue>)>,
        /// Notes of the counter item's own projection, as written.
        notes: Vec<Note>,
    },
}

/// The write that brings `item` (absent: `None`) to `totals`; `counted`:
/// something counts into the counter (see [`Counted`]).
fn target(
    deriver: &Deriver,
    counter: &Counter,
    item: Option<&Item>,
    totals: &Totals,
    counted: bool,
) -> Target {
    let zero = totals.sums.values().all(|v| *v == 0);
    let created = counter.create.is_some();
    // Nothing is written onto an item the rules reject (its bad input is
    // counted where its record is read, once); the sums wait in the ledger.
    if item.is_some_and(|i| super::derive::rejects(deriver.rules.as_ref(), i)) {
        return Target::Nothing;
    }
    match item {
        None if !created => return Target::Nothing,
        // Nothing ever counted into it: nothing to bring back.
        None if totals.ver == 0 && !counted => return Target::Nothing,
        None if zero && counter.remove_at_zero => return Target::Nothing,
        Some(_) if created && zero && counter.remove_at_zero => return Target::Delete,
        _ => {}
    }
    let mut prospective = item.cloned().unwrap_or_else(|| counter.key_item());
    for (a, v) in &totals.sums {
        prospective.insert(a.clone(), n(v));
    }
    let mut stamps = Vec::new();
    for (a, v) in counter.create.iter().flatten() {
        prospective.insert(a.to_string(), v.clone());
        stamps.push(a.to_string());
    }
    let mut removes = Vec::new();
    let mut absent = Vec::new();
    let mut notes = deriver.rules.notes(&prospective);
    let mut projected = Vec::new();
    let mut source_names = Vec::new();
    if let Ok(Some(p)) = deriver.rules.projection(&prospective) {
        source_names = p.sources;
        for (a, v) in p.attrs {
            projected.push(a);
            match v {
                Some(v) => {
                    prospective.insert(a.to_string(), v);
                }
                None => {
                    absent.push(a.to_string());
                    if prospective.remove(a).is_some() {
                        removes.push(a.to_string());
                    }
                }
            }
        }
    }
    // Attributes the rules no longer derive (a sum or a projection
    // attribute removed from the model) on an item the processors own
    // whole: removed with this write.
    for a in item
        .map(|i| deriver.rules.unowned_attributes(i))
        .unwrap_or_default()
    {
        prospective.remove(&a);
        removes.push(a.clone());
        absent.push(a);
    }
    let current = item.cloned().unwrap_or_default();
    let key_names = deriver.rules.key_names();
    let owned = |a: &str| {
        totals.sums.contains_key(a) || stamps.iter().any(|s| s == a) || projected.contains(&a)
    };
    let sources: Vec<(String, Option<AttributeValue>)> = source_names
        .into_iter()
        .filter(|a| !key_names.contains(a) && !totals.sums.contains_key(*a))
        .map(|a| (a.to_string(), current.get(a).cloned()))
        .collect();
    // Whether to write is decided by what differs from the item as read;
    // what to write is everything the counter owns (see `Target::Update`).
    let (sets, whole): (Vec<_>, Vec<_>) = prospective
        .into_iter()
        .filter(|(a, _)| !key_names.contains(&a.as_str()))
        .partition(|(a, v)| current.get(a) != Some(v));
    let whole: Vec<(String, AttributeValue)> = whole
        .into_iter()
        .filter(|(a, _)| owned(a))
        .chain(sets.iter().cloned())
        .collect();
    // A projection's notes concern its write: none when it is unchanged.
    if !sets.iter().any(|(a, _)| projected.contains(&a.as_str())) && removes.is_empty() {
        notes.clear();
    }
    // A counter item that exists and lacks only its creation stamps (one
    // created before the model stamped it: by a compiled model, or an
    // earlier model file) is right: the stamps ride on its next write of a
    // sum, never make a write of their own (a redelivered record writes
    // nothing).
    let stamps_only = item.is_some() && sets.iter().all(|(a, _)| stamps.contains(a));
    if removes.is_empty() && (sets.is_empty() || stamps_only) {
        Target::Nothing
    } else {
        Target::Update {
            sets: whole,
            removes: absent,
            sources,
            notes,
        }
    }
}

/// Sets every given counter item to its ledger totals. Returns the item
/// writes made and the notes of what was written (a sum that does not fit
/// an i64 is noted as bad input and its counter item left as it is).
///
/// Counters at their own key are synced together: their totals and items
/// read in one BatchGetItem each (per 100), their writes packed into
/// transactions of up to 100 actions (each counter's write with the guard
/// on its totals), so a batch that moved a hundred counters costs a few
/// round trips, not three per counter. A counter whose guard fails (its
/// totals moved meanwhile) is read again; the others of its transaction
/// are sent again as they were. Located counters go one by one (their
/// item is found through their identity).
pub async fn sync(
    deriver: &Deriver,
    counters: Vec<Counter>,
) -> Result<(usize, Vec<(Item, Note)>), ProcessError> {
    sync_seen(deriver, counters, &HashMap::new(), &Counted::new()).await
}

/// [`sync`] of counters something counts into (`verify --repair` of a
/// counted item found absent): a processor-created one is created at its
/// totals, 0 where none moved (see [`Counted`]).
pub async fn sync_counted(
    deriver: &Deriver,
    counters: Vec<Counter>,
) -> Result<(usize, Vec<(Item, Note)>), ProcessError> {
    let counted = counters.iter().map(|c| item_id(&c.key_item())).collect();
    sync_seen(deriver, counters, &HashMap::new(), &counted).await
}

/// [`sync`], knowing the latest image of some counter items from the
/// stream batch being processed (by item id): a counter whose totals say
/// it is synced and whose latest image is already what its totals imply
/// is done without reading the item (a change of the item since comes
/// with its own record, in order); any other is read as it is. `counted`:
/// those something counts into (see [`Counted`]).
pub async fn sync_seen(
    deriver: &Deriver,
    counters: Vec<Counter>,
    images: &HashMap<String, &Item>,
    counted: &Counted,
) -> Result<(usize, Vec<(Item, Note)>), ProcessError> {
    let mut seen = std::collections::BTreeSet::new();
    let mut located = Vec::new();
    let mut plain = Vec::new();
    for c in counters {
        if !seen.insert(item_id(&c.key_item())) {
            continue;
        }
        match deriver.rules.locate(&c.key_item()) {
            Some(l) => located.push((c, l)),
            None => plain.push(c),
        }
    }
    let mut writes = 0;
    let mut notes = Vec::new();
    for chunk in located.chunks(100) {
        // Each result carries its counter's key: they complete in any order.
        let futures: Vec<_> = chunk
            .iter()
            .map(|(c, l)| async move {
                let counted = counted.contains(&item_id(&c.key_item()));
                (c.key_item(), sync_one(deriver, c, l, counted).await)
            })
            .collect();
        let results: Vec<_> = stream::iter(futures)
            .buffer_unordered(deriver.concurrency.max(1))
            .collect()
            .await;
        for (key, r) in results {
            let (w, n) = skip_as_bad_input(r)?;
            writes += w;
            notes.extend(n.into_iter().map(|n| (key.clone(), n)));
        }
    }
    let (w, n) = sync_at_keys(deriver, &plain, images, counted).await?;
    writes += w;
    notes.extend(n);
    Ok((writes, notes))
}

/// An error no retry can fix (e.g. the counter's own projection over a key
/// limit) is noted as bad input, never a stall.
fn skip_as_bad_input(
    r: Result<(usize, Vec<Note>), ProcessError>,
) -> Result<(usize, Vec<Note>), ProcessError> {
    match r {
        Err(e) if e.policy() == Policy::Skip => Ok((
            0,
            vec![Note {
                metric: crate::metrics::names::BAD_INPUT,
                reason: format!("DynamoDB rejects the write of this counter ({})", e.code()),
            }],
        )),
        r => r,
    }
}

/// What bringing one counter item to its totals takes.
enum Sync {
    /// The item reflects the totals and they know it.
    Done,
    /// A sum that cannot be read: noted, the item left as it is.
    Bad(Note),
    /// The guard on the totals (first) and the item's write, if any.
    Write {
        actions: Vec<TransactWriteItem>,
        item_writes: usize,
        notes: Vec<Note>,
    },
}

/// The actions that bring the counter item `item` (absent: `None`) at `key`
/// to the totals as read (`None`: no totals item); `counted`: something
/// counts into it (see [`Counted`]).
fn plan_sync(
    deriver: &Deriver,
    counter: &Counter,
    logical: &Item,
    key: &Item,
    item: Option<&Item>,
    totals: Option<&Item>,
    counted: bool,
) -> Sync {
    let totals = match totals {
        Some(t) => match Totals::from_item(t, counter) {
            Ok(t) => t,
            Err(reason) => {
                return Sync::Bad(Note {
                    metric: crate::metrics::names::BAD_INPUT,
                    reason,
                })
            }
        },
        None => Totals::zero(counter),
    };
    let k0 = deriver.rules.key_names()[0];
    let locate = deriver.rules.locate(logical);
    let mut notes = Vec::new();
    let created = counter.create.is_some();
    // A first count that moved no total: the totals are put (`ver` 1), so
    // that they say the item exists, as those a count moved do.
    let first_count = counted && totals.ver == 0 && kept_from_first_count(counter);
    let write = match target(deriver, counter, item, &totals, counted) {
        // The item is right; the totals learn it if they did not know.
        // (Totals written before the `created` mark existed learn it with
        // the next write of their counter, never with a write of its own:
        // a record delivered again writes nothing.)
        Target::Nothing if totals.synced == totals.ver && !first_count => return Sync::Done,
        Target::Nothing => None,
        Target::Delete => Some(tx::delete(&deriver.table, key.clone())),
        Target::Update {
            sets,
            removes,
            sources,
            notes: n,
        } => {
            notes = n;
            let mut upd = TxUpdate::builder()
                .table_name(&deriver.table)
                .set_key(Some(key.clone()));
            let mut set_exprs = Vec::new();
            for (i, (a, v)) in sets.into_iter().enumerate() {
                set_exprs.push(format!("#a{i} = :a{i}"));
                upd = upd
                    .expression_attribute_names(format!("#a{i}"), a)
                    .expression_attribute_values(format!(":a{i}"), v);
            }
            let mut remove_exprs = Vec::new();
            for (i, a) in removes.into_iter().enumerate() {
                remove_exprs.push(format!("#r{i}"));
                upd = upd.expression_attribute_names(format!("#r{i}"), a);
            }
            let mut cond = Vec::new();
            if first_count && item.is_none() {
                // Created at its first count: only where it is still
                // absent (the guard on the totals' absence fails too if a
                // count moved them meanwhile; the sync reads again).
                cond.push("attribute_not_exists(#k0)".to_string());
                upd = upd.expression_attribute_names("#k0", k0);
            }
            if counter.create.is_none() {
                // Never create a writer's item; a located one must
                // still carry the identity it was found by.
                cond.push("attribute_exists(#k0)".to_string());
                upd = upd.expression_attribute_names("#k0", k0);
                for (i, (a, v)) in locate.iter().flat_map(|l| &l.identity).enumerate() {
                    cond.push(format!("#l{i} = :l{i}"));
                    upd = upd
                        .expression_attribute_names(format!("#l{i}"), *a)
                        .expression_attribute_values(format!(":l{i}"), v.clone());
                }
            }
            // The projection's sources still as read.
            for (i, (a, v)) in sources.into_iter().enumerate() {
                upd = upd.expression_attribute_names(format!("#g{i}"), a);
                match v {
                    Some(v) => {
                        cond.push(format!("#g{i} = :g{i}"));
                        upd = upd.expression_attribute_values(format!(":g{i}"), v);
                    }
                    None => cond.push(format!("attribute_not_exists(#g{i})")),
                }
            }
            if !cond.is_empty() {
                upd = upd.condition_expression(cond.join(" AND "));
            }
            Some(tx::update_of(
                upd.update_expression(set_remove(&set_exprs, &remove_exprs)),
            ))
        }
    };
    // The totals, unchanged since read, record that the item reflects
    // them (no totals yet: they must still not exist).
    let guard = if first_count {
        let mut marked = total_key(deriver.processor, logical);
        marked.insert("ver".into(), n(1));
        marked.insert(SYNCED.into(), n(1));
        marked.insert(CREATED.into(), AttributeValue::Bool(true));
        tx::put_of(
            Put::builder()
                .table_name(&deriver.ledger_table)
                .set_item(Some(marked))
                .condition_expression("attribute_not_exists(pk)"),
        )
    } else if totals.ver == 0 {
        tx::check_of(
            ConditionCheck::builder()
                .table_name(&deriver.ledger_table)
                .set_key(Some(total_key(deriver.processor, logical)))
                .condition_expression("attribute_not_exists(pk)"),
        )
    } else {
        let mut upd = TxUpdate::builder()
            .table_name(&deriver.ledger_table)
            .set_key(Some(total_key(deriver.processor, logical)))
            .update_expression(if created {
                "SET #synced = :v, #created = :t"
            } else {
                "SET #synced = :v"
            })
            .condition_expression("ver = :v")
            .expression_attribute_names("#synced", SYNCED)
            .expression_attribute_values(":v", n(totals.ver));
        if created {
            upd = upd
                .expression_attribute_names("#created", CREATED)
                .expression_attribute_values(":t", AttributeValue::Bool(true));
        }
        tx::update_of(upd)
    };
    let item_writes = usize::from(write.is_some());
    let mut actions = vec![guard];
    actions.extend(write);
    Sync::Write {
        actions,
        item_writes,
        notes: if item_writes > 0 { notes } else { vec![] },
    }
}

/// Reads a located counter's totals and item and writes the difference,
/// retrying when the totals moved meanwhile.
async fn sync_one(
    deriver: &Deriver,
    counter: &Counter,
    locate: &super::locate::Locate,
    counted: bool,
) -> Result<(usize, Vec<Note>), ProcessError> {
    let logical = counter.key_item();
    for _ in 0..ATTEMPTS {
        let totals = deriver
            .store
            .get(
                &deriver.ledger_table,
                total_key(deriver.processor, &logical),
            )
            .await?;
        // The counter item, found through its identity.
        let (key, item) = match super::locate::find(deriver, &logical, locate).await? {
            Located::One(key, item) => (key, Some(item)),
            Located::Nowhere => (logical.clone(), None),
            Located::Contested(keys) => {
                return Ok((
                    0,
                    vec![Note {
                        metric: crate::metrics::names::BAD_INPUT,
                        reason: super::locate::contested_reason(&keys),
                    }],
                ))
            }
        };
        match plan_sync(
            deriver,
            counter,
            &logical,
            &key,
            item.as_ref(),
            totals.as_ref(),
            counted,
        ) {
            Sync::Done => return Ok((0, vec![])),
            Sync::Bad(note) => return Ok((0, vec![note])),
            Sync::Write {
                actions,
                item_writes,
                notes,
            } => match deriver.store.transact(actions).await {
                Ok(()) => return Ok((item_writes, notes)),
                // Totals moved, or the writer's item went away meanwhile:
                // read again.
                Err(TxError::ConditionsFailed { .. }) => continue,
                Err(TxError::Store(e)) => return Err(e.into()),
            },
        }
    }
    Err(ProcessError::Conflict(format!(
        "totals of counter {} keep changing",
        item_id(&logical)
    )))
}

/// One counter's planned write, inside a transaction of several.
struct Planned {
    /// Its position among the counters being synced.
    at: usize,
    /// Its key (notes name it).
    key: Item,
    actions: Vec<TransactWriteItem>,
    item_writes: usize,
    notes: Vec<Note>,
}

/// What writing one transaction of planned counters did.
#[derive(Default)]
struct Wrote {
    writes: usize,
    notes: Vec<(Item, Note)>,
    /// The positions of the counters whose guard failed: to be read again.
    reread: Vec<usize>,
}

/// [`sync`] of counters at their own key, read and written together.
async fn sync_at_keys(
    deriver: &Deriver,
    counters: &[Counter],
    images: &HashMap<String, &Item>,
    counted: &Counted,
) -> Result<(usize, Vec<(Item, Note)>), ProcessError> {
    let key_names = deriver.rules.key_names();
    let mut writes = 0;
    let mut notes = Vec::new();
    let mut pending: Vec<&Counter> = counters.iter().collect();
    for _ in 0..ATTEMPTS {
        if pending.is_empty() {
            return Ok((writes, notes));
        }
        let logical: Vec<Item> = pending.iter().map(|c| c.key_item()).collect();
        let totals: HashMap<String, Item> = deriver
            .store
            .batch_get(
                &deriver.ledger_table,
                logical
                    .iter()
                    .map(|k| total_key(deriver.processor, k))
                    .collect(),
            )
            .await?
            .into_iter()
            .filter_map(|t| {
                Some((
                    crate::ledger::as_s(t.get(crate::ledger::PK))?.to_string(),
                    t,
                ))
            })
            .collect();
        let totals_of = |key: &Item| {
            let tkey = total_key(deriver.processor, key);
            crate::ledger::as_s(tkey.get(crate::ledger::PK)).and_then(|pk| totals.get(pk))
        };
        // Done as the stream last showed them: not read.
        let done: Vec<bool> = pending
            .iter()
            .zip(&logical)
            .map(|(c, key)| {
                let id = item_id(key);
                images.get(&id).is_some_and(|image| {
                    let counted = counted.contains(&id);
                    matches!(
                        plan_sync(deriver, c, key, key, Some(image), totals_of(key), counted),
                        Sync::Done
                    )
                })
            })
            .collect();
        let to_read: Vec<Item> = logical
            .iter()
            .zip(&done)
            .filter(|(_, done)| !**done)
            .map(|(k, _)| k.clone())
            .collect();
        let items: HashMap<String, Item> = deriver
            .store
            .batch_get(&deriver.table, to_read)
            .await?
            .into_iter()
            .map(|i| (item_id(&crate::item::key_of(&i, key_names)), i))
            .collect();
        let mut planned = Vec::new();
        for (at, (c, key)) in pending.iter().zip(&logical).enumerate() {
            if done[at] {
                continue;
            }
            match plan_sync(
                deriver,
                c,
                key,
                key,
                items.get(&item_id(key)),
                totals_of(key),
                counted.contains(&item_id(key)),
            ) {
                Sync::Done => {}
                Sync::Bad(note) => notes.push((key.clone(), note)),
                Sync::Write {
                    actions,
                    item_writes,
                    notes,
                } => planned.push(Planned {
                    at,
                    key: key.clone(),
                    actions,
                    item_writes,
                    notes,
                }),
            }
        }
        let mut chunks: Vec<Vec<Planned>> = Vec::new();
        for p in planned {
            match chunks.last_mut() {
                Some(last)
                    if last.iter().map(|p| p.actions.len()).sum::<usize>() + p.actions.len()
                        <= MAX_TX_ACTIONS =>
                {
                    last.push(p)
                }
                _ => chunks.push(vec![p]),
            }
        }
        let futures: Vec<_> = chunks
            .into_iter()
            .map(|chunk| write_counters(deriver, chunk))
            .collect();
        let results: Vec<Result<Wrote, ProcessError>> = stream::iter(futures)
            .buffer_unordered(deriver.concurrency.max(1))
            .collect()
            .await;
        let mut reread = Vec::new();
        for r in results {
            let w = r?;
            writes += w.writes;
            notes.extend(w.notes);
            reread.extend(w.reread);
        }
        reread.sort_unstable();
        pending = reread.into_iter().map(|at| pending[at]).collect();
    }
    match pending.first() {
        None => Ok((writes, notes)),
        Some(c) => Err(ProcessError::Conflict(format!(
            "totals of counter {} keep changing",
            item_id(&c.key_item())
        ))),
    }
}

/// Writes planned counters in one transaction. A cancelled one sends the
/// counters whose guards held again and returns the others to be read
/// again; one DynamoDB rejects is split to find the counter it cannot take
/// (noted as bad input of that counter).
async fn write_counters(deriver: &Deriver, chunk: Vec<Planned>) -> Result<Wrote, ProcessError> {
    let mut out = Wrote::default();
    let mut queue = vec![chunk];
    while let Some(chunk) = queue.pop() {
        if chunk.is_empty() {
            continue;
        }
        let actions: Vec<TransactWriteItem> = chunk
            .iter()
            .flat_map(|p| p.actions.iter().cloned())
            .collect();
        match deriver.store.transact(actions).await {
            Ok(()) => {
                for p in chunk {
                    out.writes += p.item_writes;
                    let key = p.key;
                    out.notes
                        .extend(p.notes.into_iter().map(|n| (key.clone(), n)));
                }
            }
            // Totals moved, or the writer's item went away meanwhile: those
            // counters are read again, the others sent again.
            Err(TxError::ConditionsFailed { failed }) => {
                let mut again = Vec::new();
                let mut at = 0;
                for p in chunk {
                    let n = p.actions.len();
                    if failed[at..(at + n).min(failed.len())].iter().any(|f| *f) {
                        out.reread.push(p.at);
                    } else {
                        again.push(p);
                    }
                    at += n;
                }
                queue.push(again);
            }
            Err(TxError::Store(e)) => {
                let e = ProcessError::from(e);
                if e.policy() != Policy::Skip {
                    return Err(e);
                }
                if chunk.len() > 1 {
                    // Which counter? Each alone.
                    queue.extend(chunk.into_iter().map(|p| vec![p]));
                    continue;
                }
                let (_, n) = skip_as_bad_input(Err(e))?;
                let key = &chunk[0].key;
                out.notes.extend(n.into_iter().map(|n| (key.clone(), n)));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::s;

    #[test]
    fn totals_past_an_i64_are_exact_and_past_38_digits_an_error_not_zero() {
        let counter = Counter {
            key: vec![("PK", "u#1".into()), ("SK", "count".into())],
            attrs: &["a"],
            create: Some(vec![]),
            remove_at_zero: false,
        };
        let mut item: Item = [("pk".to_string(), s("TOTAL#derive#x"))].into();
        item.insert("ver".into(), n(3));
        item.insert(
            total_attr("a"),
            AttributeValue::N("9223372036854775808".into()),
        );
        let t = Totals::from_item(&item, &counter).unwrap();
        assert_eq!(t.sums["a"], 1 << 63);
        item.insert(total_attr("a"), AttributeValue::N("9".repeat(40)));
        assert!(Totals::from_item(&item, &counter).is_err());
        item.insert(total_attr("a"), n(-7));
        let t = Totals::from_item(&item, &counter).unwrap();
        assert_eq!(t.sums["a"], -7);
        assert_eq!((t.ver, t.synced), (3, -1), "never synced");
        item.insert(SYNCED.into(), n(3));
        assert!(is_synced(&item));
    }
}
