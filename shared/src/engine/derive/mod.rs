//! The derive engine: projections, derived items and counters, from the item
//! *as it is*.
//!
//! A stream record tells the engine *which* item changed; what the item
//! implies is computed from a consistent read of the item now
//! ([`Deriver::reconcile`]), never from the record's image. So:
//!
//! - a redelivered or replayed record (Lambda retry, bisect, a restarted
//!   consumer reading from TRIM_HORIZON) finds everything already as the
//!   current item implies and writes nothing: no derived datum ever moves
//!   backwards, not even for a moment;
//! - a MODIFY that only touched processor-owned attributes (GSI keys,
//!   `historySequence`) with the projection in place costs no read and
//!   no write (its images imply the same: the stream processor skips it);
//!   a counter's own records cost reads and no write (fixpoint);
//! - backfill and `verify --repair` call the very same function;
//! - an aspect the item rejects now (bad input) keeps what its last valid
//!   image in the stream implied, which the batch's records say once the
//!   batch reaches the item as it is (`trail.rs`): the one place images
//!   count, and never to move a state back.
//!
//! What each source item implies (its contributions and its derived items)
//! is recorded in the ledger (`SRC#<processor>#<item id>`, a version `ver`).
//! Every change of it is one transaction: the record, conditioned on the
//! version read, the derived items' puts and deletes, and one update per
//! counter of the ledger totals (`TOTAL#<processor>#<counter id>`). The
//! record is read *before* the item, so whichever of two concurrent writers
//! (the stream consumer and a backfill) commits last read the newer item.
//! Counter items in the table are then set to the ledger totals, once per
//! counter item per batch (see [`super::counts`]).

mod commit;
mod implied;
mod keys;
mod owners;
mod plan;
mod processor;
mod reads;
mod stale;
#[cfg(test)]
mod tests;
mod trail;
mod waiting;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};

pub use super::rules::{Aspects, Contribution, Counter, Note, OutMessage, Projection, Rules};
pub(crate) use implied::set_remove;
pub use implied::{checked_contributions, projection_update, Implied};
pub use keys::{
    index_item, index_key, index_members, index_pk, owner_key, owner_sk, owners_key, owners_pk,
    source_key, source_key_pk, total_attr, total_key, total_pk, OWNERS_HEAD_SK, OWNER_HASHED_SK,
    OWNER_SK, SOURCE_SK,
};
pub use processor::{is_bad_input, rejects, DeriveConfig, DeriveProcessor};
pub use trail::Step;

use crate::error::{InputError, ProcessError};
use crate::item::{key_of, Item};
use crate::ledger::item_id;
use crate::limits::KeyLimits;
use crate::store::Store;
use commit::Retry;
use plan::{Assessment, Seen};

/// How long the empty record of an item that implies nothing any more is
/// kept (so that a stale backfill cannot count a deleted item).
pub const TOMBSTONE_TTL_SECS: i64 = 7 * 24 * 3600;

/// Source items reconciled per group: each table read in one BatchGetItem
/// (its limit: 100 keys), the writes in transactions of up to 100 actions.
const GROUP: usize = 100;

const ATTEMPTS: usize = 5;

/// What a reconcile run did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Reconciled {
    /// Item writes in the model table (projections, derived items, counters).
    pub table_writes: usize,
    /// Item writes in the ledger (records, totals).
    pub ledger_writes: usize,
    /// Source items whose recorded state already matched (nothing to do).
    pub unchanged: usize,
    /// Bad input met, by position in the keys given (logged by the caller).
    pub bad: Vec<(usize, InputError)>,
    /// Positions (in the keys given) whose item was read as none of the
    /// stream's images of it the caller passed (changed or gone since, or
    /// no images: a backfill): bad input met there is the record's that
    /// made the item so (in a stream, counted in that record's own batch).
    pub ahead: BTreeSet<usize>,
    /// Notes of what was written (logged and counted by the caller): by
    /// the key of the item written.
    pub notes: Vec<(Item, Note)>,
}

/// Per-key knowledge from the stream (not needed for correctness: to
/// decide whether an absent item needs a tombstone, and to spare a parse).
#[derive(Debug, Clone, Copy, Default)]
pub struct Hint<'a> {
    /// An image of this item implied something (so its absence must be
    /// recorded even if nothing was recorded before).
    pub implied_something: bool,
    /// The item's latest image in the batch and its aspects: an item read
    /// exactly as that image is not asked again (rules are pure).
    pub seen: Option<(&'a Item, &'a Aspects)>,
    /// The item's records in the batch, in stream order: what an item that
    /// is bad input now keeps comes from them (see [`Step`]).
    pub steps: &'a [Step<'a>],
}

/// The counters a batch syncs after its ledger commits, by id, and those of
/// them something counts into for the first time.
pub(super) struct ToSync<'a> {
    pub(super) counters: &'a mut BTreeMap<String, Counter>,
    pub(super) counted: &'a mut super::counts::Counted,
}

impl ToSync<'_> {
    /// Counters something counts into (by id: their keys), synced as
    /// counted.
    pub(super) fn count(&mut self, rules: &dyn Rules, counted: &BTreeMap<String, Item>) {
        for (id, key) in counted {
            if let Some(c) = rules.counter(key) {
                self.counters.insert(id.clone(), c);
                self.counted.insert(id.clone());
            }
        }
    }
}

/// The engine core shared by the stream processor, backfill and repair.
#[derive(Clone)]
pub struct Deriver {
    pub rules: Arc<dyn Rules>,
    pub store: Store,
    pub table: String,
    pub ledger_table: String,
    pub processor: &'static str,
    /// Projection writes in flight at once.
    pub concurrency: usize,
    pub now: fn() -> DateTime<Utc>,
    /// The table's key and index key limits: what an item implies is
    /// checked against them before anything is written.
    pub limits: KeyLimits,
}

impl Deriver {
    /// Brings everything the given items imply to what their current state
    /// implies: projections, derived items, ledger records and totals, then
    /// the counter items touched. On failure, returns the position (in
    /// `keys`) of the first item that could not be reconciled; items before
    /// it are done.
    pub async fn reconcile(
        &self,
        keys: &[Item],
        hints: &HashMap<String, Hint<'_>>,
    ) -> Result<Reconciled, (Reconciled, usize, ProcessError)> {
        self.reconcile_and_sync(keys, hints, Vec::new()).await
    }

    /// [`Self::reconcile`], and the counter items `also` brought to their
    /// totals with the others (counters whose own records ask nothing else;
    /// a failure of their sync is reported at position 0).
    pub async fn reconcile_and_sync(
        &self,
        keys: &[Item],
        hints: &HashMap<String, Hint<'_>>,
        also: Vec<Counter>,
    ) -> Result<Reconciled, (Reconciled, usize, ProcessError)> {
        let mut out = Reconciled::default();
        let mut counters: BTreeMap<String, Counter> = also
            .into_iter()
            .map(|c| (item_id(&c.key_item()), c))
            .collect();
        // Those something counts into for the first time (see
        // `counts::Counted`).
        let mut counted = super::counts::Counted::new();
        let mut failure: Option<(usize, ProcessError)> = None;
        for (g, group) in keys.chunks(GROUP).enumerate() {
            let base = g * GROUP;
            let mut to_sync = ToSync {
                counters: &mut counters,
                counted: &mut counted,
            };
            if let Err((pos, e)) = self
                .reconcile_group(group, base, hints, &mut out, &mut to_sync)
                .await
            {
                failure = Some((pos, e));
                break;
            }
        }
        // The latest image of each item of the batch, as the stream showed
        // it (a counter already as its totals imply is not read again).
        let seen: HashMap<String, &Item> = hints
            .iter()
            .filter_map(|(id, h)| h.seen.map(|(image, _)| (id.clone(), image)))
            .collect();
        let synced =
            super::counts::sync_seen(self, counters.into_values().collect(), &seen, &counted).await;
        match synced {
            Ok((w, notes)) => {
                out.table_writes += w;
                out.notes.extend(notes);
            }
            // The sums are in the ledger already, and the records of the
            // sources that moved them owe the counters: the batch is retried
            // from its first record (even when a later group failed too:
            // the sources before it must be seen again), and that retry,
            // finding them unchanged, sets the counter items.
            Err(e) => failure = Some((0, e)),
        }
        match failure {
            None => Ok(out),
            Some((pos, e)) => Err((out, pos, e)),
        }
    }

    async fn reconcile_group(
        &self,
        group: &[Item],
        base: usize,
        hints: &HashMap<String, Hint<'_>>,
        out: &mut Reconciled,
        to_sync: &mut ToSync<'_>,
    ) -> Result<(), (usize, ProcessError)> {
        let key_names = self.rules.key_names();
        let fail_at = |pos: usize| move |e: ProcessError| (pos, e);
        let mut attempt = 0;
        loop {
            attempt += 1;
            // 1. What is recorded (read first: see the module docs).
            let src_keys: Vec<Item> = group
                .iter()
                .map(|k| source_key(self.processor, k))
                .collect();
            let recorded = self.read_recorded(src_keys).await.map_err(fail_at(base))?;
            // 2. The items as they are.
            let current: HashMap<String, Item> = self
                .store
                .batch_get(&self.table, group.to_vec())
                .await
                .map_err(|e| (base, e.into()))?
                .into_iter()
                .map(|i| (item_id(&key_of(&i, key_names)), i))
                .collect();
            // 3. What they imply, and the projections to write.
            let Assessment {
                updates,
                wanted,
                derived_keys,
                bad,
                ahead,
                trails,
                counted: mut first_counts,
            } = self.assess(group, base, &recorded, &current, hints, to_sync.counters);
            // Counters a recorded change moved whose items lag the totals:
            // synced by this batch, and carried by any record rewritten.
            let lagging = self
                .owed_lagging(group, base, &recorded, &wanted, to_sync)
                .await
                .map_err(fail_at(base))?;
            // Derived items as they are (to write only what differs).
            let existing: HashMap<String, Item> = if derived_keys.is_empty() {
                HashMap::new()
            } else {
                self.store
                    .batch_get(&self.table, derived_keys.into_values().collect())
                    .await
                    .map_err(|e| (base, e.into()))?
                    .into_iter()
                    .map(|i| (item_id(&key_of(&i, key_names)), i))
                    .collect()
            };
            // Owners of the derived items several sources may imply.
            let touched = self.touches(group, base, &recorded, &wanted);
            let owners = self
                .read_owners(&touched, &existing)
                .await
                .map_err(fail_at(base))?;
            // 4. Projections: distinct items, independent, guarded.
            let proj = self.write_projections(updates).await;
            // 5. Ledger records, derived items and totals.
            let (mut carried, mut shared) = self.plan_derived(touched, &existing, &owners);
            let mut plans = Vec::new();
            let mut unchanged = 0;
            for (pos, implied, _) in &wanted {
                let key = &group[*pos - base];
                let rec = recorded
                    .get(&source_key_pk(self.processor, key))
                    .cloned()
                    .unwrap_or_default();
                let hint = hints.get(&item_id(key)).copied().unwrap_or_default();
                let seen = Seen { lagging: &lagging };
                let extra = carried.remove(pos).unwrap_or_default();
                let trail = trails.get(pos).cloned().unwrap_or_default();
                let counted = first_counts.remove(pos).unwrap_or_default();
                let plan = self.plan_key(
                    *pos,
                    key,
                    &rec,
                    (implied, &trail),
                    extra,
                    seen,
                    hint,
                    counted.clone(),
                );
                match plan {
                    Some(p) => plans.push(p),
                    None => {
                        unchanged += usize::from(rec.ver > 0 && !rec.implied.is_empty());
                        // Counted first by images of the batch alone (the
                        // record unchanged, its stream position too: a
                        // retry meets them again).
                        to_sync.count(self.rules.as_ref(), &counted);
                    }
                }
            }
            let mut bad = bad;
            let committed = match self.commit(plans, to_sync, &mut shared).await {
                Ok(c) => {
                    out.table_writes += c.table_writes;
                    out.ledger_writes += c.ledger_writes;
                    out.unchanged += unchanged;
                    bad.extend(c.bad);
                    Ok(())
                }
                Err(Retry::Conflict(pos)) if attempt < ATTEMPTS => {
                    tracing::debug!(
                        position = pos,
                        "ledger record changed meanwhile; reading again"
                    );
                    continue;
                }
                Err(Retry::Conflict(pos)) => Err((
                    pos,
                    ProcessError::Conflict("ledger records keep changing".into()),
                )),
                Err(Retry::Failed(pos, e)) => Err((pos, e)),
            };
            let projected = proj.map(|p| {
                out.table_writes += p.written;
                out.notes.extend(p.notes);
                bad.extend(p.bad);
            });
            out.ahead.extend(ahead);
            // The group fails at its first item whose write failed, whichever
            // write it was: a projection that failed before a source whose
            // commit failed is retried too, not checkpointed past.
            return match (committed, projected) {
                (Ok(()), Ok(())) => {
                    out.bad.extend(bad);
                    Ok(())
                }
                (Err(a), Err(b)) => Err(if b.0 < a.0 { b } else { a }),
                (Err(f), Ok(())) => Err(f),
                (Ok(()), Err(f)) => {
                    out.bad.extend(bad);
                    Err(f)
                }
            };
        }
    }
}
