//! What an earlier version of the rules left in the ledger for a derived
//! item: the owners of a key no shared entity has any more (its key
//! template edited since, its entity removed, or no longer `shared`). The
//! engine reads them no more, so `verify --repair` drops them, guarded.

use aws_sdk_dynamodb::types::{Delete, TransactWriteItem};

use super::keys::OWNERS_HEAD_SK;
use super::Deriver;
use crate::error::StoreError;
use crate::item::{item_size, key_of, Item, ItemExt};
use crate::ledger;
use crate::store::TxError;
use crate::tx;

/// Actions per transaction: DynamoDB's 100, less the item's check.
const CHUNK_ACTIONS: usize = 99;
/// Bytes per transaction, well within DynamoDB's 4 MB.
const CHUNK_BYTES: usize = 2 * 1024 * 1024;

impl Deriver {
    /// Deletes the owners of `dkey` (`records`: its head and owner items,
    /// as read), a derived item no shared entity of the rules has any
    /// more: each record only if still exactly as read (a change of the
    /// owners bumps the head, deleted last), and, when `while_absent`,
    /// only while the item itself does not exist (checked in each
    /// transaction). Returns whether every record went (`false`: a guard
    /// no longer held; what changed stays, for the next `verify`).
    pub async fn drop_stale_owners(
        &self,
        dkey: &Item,
        records: &[Item],
        while_absent: bool,
    ) -> Result<bool, StoreError> {
        let is_head = |r: &Item| r.s(ledger::SK) == Ok(OWNERS_HEAD_SK);
        // The owners first, the head last.
        let ordered = records
            .iter()
            .filter(|r| !is_head(r))
            .chain(records.iter().filter(|r| is_head(r)));
        let mut chunks: Vec<Vec<TransactWriteItem>> = vec![Vec::new()];
        let mut bytes = 0;
        for r in ordered {
            let size = item_size(r);
            let last = chunks.last().expect("one chunk at least");
            if !last.is_empty() && (last.len() == CHUNK_ACTIONS || bytes + size > CHUNK_BYTES) {
                chunks.push(Vec::new());
                bytes = 0;
            }
            bytes += size;
            chunks
                .last_mut()
                .expect("one chunk at least")
                .push(self.delete_unchanged(r));
        }
        for mut actions in chunks.into_iter().filter(|c| !c.is_empty()) {
            if while_absent {
                actions.insert(0, self.absent(dkey));
            }
            match self.store.transact(actions).await {
                Ok(()) => {}
                Err(TxError::ConditionsFailed { .. }) => return Ok(false),
                Err(TxError::Store(e)) => return Err(e),
            }
        }
        Ok(true)
    }

    /// A delete of the ledger record `r` conditioned on its being exactly
    /// as read.
    fn delete_unchanged(&self, r: &Item) -> TransactWriteItem {
        let (cond, names, values) = crate::engine::fold::unchanged_condition(r);
        let mut d = Delete::builder()
            .table_name(&self.ledger_table)
            .set_key(Some(key_of(r, &[ledger::PK, ledger::SK])))
            .condition_expression(cond);
        for (k, v) in names {
            d = d.expression_attribute_names(k, v);
        }
        for (k, v) in values {
            d = d.expression_attribute_values(k, v);
        }
        tx::delete_of(d)
    }

    /// A check that the derived item `dkey` does not exist: a delete of it
    /// conditioned on its absence, which writes nothing (the derive
    /// processor deletes derived items; it checks nothing in the table).
    fn absent(&self, dkey: &Item) -> TransactWriteItem {
        let name = self.rules.key_names()[0];
        tx::delete_of(
            Delete::builder()
                .table_name(&self.table)
                .set_key(Some(key_of(dkey, self.rules.key_names())))
                .condition_expression("attribute_not_exists(#k)")
                .expression_attribute_names("#k", name),
        )
    }
}
