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

mod plan;

use std::collections::HashMap;

use aws_sdk_dynamodb::types::TransactWriteItem;
use futures::stream::{self, StreamExt};

use super::derive::{total_key, Deriver};
use super::locate::Located;
use super::rules::{Counter, Note};
use crate::error::{Policy, ProcessError};
use crate::item::Item;
use crate::ledger::item_id;
use crate::limits::MAX_TX_ACTIONS;
use crate::store::TxError;
pub use plan::{is_created, is_synced, kept_from_first_count, Counted, Totals, CREATED, SYNCED};
use plan::{plan_sync, Sync};

const ATTEMPTS: usize = 5;

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
            match r {
                Ok((w, n)) => {
                    writes += w;
                    notes.extend(n);
                }
                Err(e) => {
                    let (_, n) = skip_as_bad_input(Err(e))?;
                    notes.extend(n.into_iter().map(|n| (key.clone(), n)));
                }
            }
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

/// Reads a located counter's totals and item and writes the difference,
/// retrying when the totals moved meanwhile. Its notes name the table item
/// found (a write DynamoDB refuses is bad input of that item: the operator
/// shrinks it, not the identity of the ledger), else its identity.
async fn sync_one(
    deriver: &Deriver,
    counter: &Counter,
    locate: &super::locate::Locate,
    counted: bool,
) -> Result<(usize, Vec<(Item, Note)>), ProcessError> {
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
                    vec![(
                        logical.clone(),
                        Note {
                            metric: crate::metrics::names::BAD_INPUT,
                            reason: super::locate::contested_reason(&keys),
                        },
                    )],
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
            Sync::Bad(note) => return Ok((0, vec![(key, note)])),
            Sync::Write {
                actions,
                item_writes,
                notes,
            } => match deriver.store.transact(actions).await {
                Ok(()) => {
                    let notes = notes.into_iter().map(|n| (key.clone(), n)).collect();
                    return Ok((item_writes, notes));
                }
                // Totals moved, or the writer's item went away meanwhile:
                // read again.
                Err(TxError::ConditionsFailed { .. }) => continue,
                Err(TxError::Store(e)) => {
                    let (_, n) = skip_as_bad_input(Err(e.into()))?;
                    return Ok((0, n.into_iter().map(|n| (key.clone(), n)).collect()));
                }
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
