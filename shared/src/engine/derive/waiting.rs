//! Once effects waiting for an item (see [`crate::engine::once`]): on a
//! record that may make a precondition hold ([`Rules::awaited`]), the
//! derive reads the item's waiting flag (one BatchGetItem for the batch's
//! items, beside the reconcile's reads) and, where one is, the notes under
//! it (one Query per such item), and sends their jobs again with the
//! batch's own jobs. The jobs re-check everything: one whose effect was
//! made is a duplicate of its marker, one still waiting notes itself anew.

use std::collections::{BTreeMap, HashMap};

use super::{DeriveProcessor, OutMessage, Rules};
use crate::batch::BatchFailure;
use crate::change::Change;
use crate::engine::once::{waiting_key, WAITING_BODY, WAITING_QUEUE};
use crate::item::{display_key, key_of, Item, ItemExt};
use crate::ledger::{self, item_id};

/// The records of `changes` that may make a waiting effect's precondition
/// hold: (index in the batch, the item's key), the first record of each
/// item.
pub(super) fn awaited(rules: &dyn Rules, changes: &[Change]) -> Vec<(usize, Item)> {
    let mut seen = BTreeMap::new();
    for (index, change) in changes.iter().enumerate() {
        if rules.awaited(change) {
            seen.entry(item_id(&change.keys))
                .or_insert((index, change.keys.clone()));
        }
    }
    let mut out: Vec<(usize, Item)> = seen.into_values().collect();
    out.sort_by_key(|(index, _)| *index);
    out
}

impl DeriveProcessor {
    /// The jobs waiting for the items of `awaited`, each at the index of
    /// the item's record. A read that fails fails the batch at the first
    /// such record (its retry reads again).
    pub(super) async fn waiting_jobs(
        &self,
        awaited: &[(usize, Item)],
    ) -> Result<Vec<(usize, OutMessage)>, BatchFailure> {
        let Some(first) = awaited.first().map(|(i, _)| *i) else {
            return Ok(vec![]);
        };
        let fail = |e: crate::error::StoreError| BatchFailure {
            index: first,
            error: e.into(),
        };
        let d = &self.deriver;
        let flags: HashMap<String, usize> = awaited
            .iter()
            .map(|(index, key)| (item_id(&waiting_key(key)), *index))
            .collect();
        let keys = awaited.iter().map(|(_, k)| waiting_key(k)).collect();
        let found = d
            .store
            .batch_get(&d.ledger_table, keys)
            .await
            .map_err(fail)?;
        let mut out = Vec::new();
        for flag in found {
            let Some(index) = flags.get(&item_id(&key_of(&flag, &[ledger::PK, ledger::SK]))) else {
                continue;
            };
            let Ok(pk) = flag.s(ledger::PK) else {
                continue;
            };
            let notes = d
                .store
                // The whole partition: an entry's sort key may be hashed
                // (`ledger::bounded_sk`); the flag carries no body.
                .query_partition(&d.ledger_table, ledger::PK, pk, None)
                .await
                .map_err(|e| BatchFailure {
                    index: *index,
                    error: e.into(),
                })?;
            for note in notes {
                let (Ok(queue), Ok(body)) = (note.s(WAITING_QUEUE), note.s(WAITING_BODY)) else {
                    continue;
                };
                match d.rules.once_queue(queue) {
                    Some(queue) => out.push((
                        *index,
                        OutMessage {
                            queue,
                            body: body.to_string(),
                        },
                    )),
                    None => tracing::warn!(
                        processor = d.processor,
                        note = %display_key(&key_of(&note, &[ledger::PK, ledger::SK])),
                        %queue,
                        "a waiting job's queue is no once queue of the model: not sent"
                    ),
                }
            }
        }
        Ok(out)
    }
}
