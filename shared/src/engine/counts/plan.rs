//! What one counter item's sync is: the totals as read, what the item
//! should become ([`target`]), and the actions that bring it there with
//! the guard on its totals ([`plan_sync`]). Reading, packing into
//! transactions and retrying are the parent's.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Put, TransactWriteItem, Update as TxUpdate,
};

use crate::engine::derive::{set_remove, total_attr, total_key, Deriver};
use crate::engine::rules::{Counter, Note};
use crate::item::{n, Item, ItemExt};
use crate::tx;

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
    if item.is_some_and(|i| crate::engine::derive::rejects(deriver.rules.as_ref(), i)) {
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

/// What bringing one counter item to its totals takes.
pub(super) enum Sync {
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
pub(super) fn plan_sync(
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
