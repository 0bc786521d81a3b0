//! What a compute job reads of its scope's rows: their version, the rows,
//! and for a row that is bad input now its derive record in the ledger.
//!
//! A row that is bad input and never was a valid row of the scope implies
//! nothing (SPEC §5: bad input "does not block later records"): it is no
//! row, the scope is computed without it. Each valid row adds 1 to its
//! scope's version through its derive record, so that record says which:
//! a row whose record holds no contribution to the scope's version is left
//! out (and if it becomes valid later, the derive adds 1: every job that
//! read the version before fails its guard, and the row's record starts
//! the scope's job again). A row whose last valid image was a row of the
//! scope holds the scope (its last valid values are not known here) until
//! it is fixed: what its earlier valid records implied stays.

use super::{ComputeJob, DERIVE};
use crate::engine::derive::{source_key, source_key_pk, total_key, Implied};
use crate::engine::setjob::{Guard, Reads};
use crate::file::compute::VERSION_ATTR;
use crate::file::compute::{row_val, scope_too_large, Compute, MAX_SCOPE_ROWS, SCOPE_TOO_LARGE};
use crate::file::expr::{Prepared, Val};
use crate::file::model::FileModel;
use crate::file::rules::Parsed;
use crate::item::{display_key, key_of, Item};
use crate::ledger::{self, item_id};
use crate::sqs::MessageError;

/// The rows of a scope as read, and the guards that pin them.
pub(in crate::file) struct Facts {
    /// The rows, converted once for every item's evaluation.
    pub(in crate::file) rows: Prepared,
    pub(in crate::file) guards: Vec<Guard>,
}

impl FileModel {
    /// The ledger key of the derive record of a row (of any item).
    pub fn row_record_key(&self, row: &Item) -> Item {
        source_key(DERIVE, &key_of(row, &self.key_names()))
    }

    /// Whether a row that is bad input now still holds the scope whose rows
    /// have the partition key `rpk`: its derive record (`None`: there is
    /// none) holds a contribution to that scope's version (its last valid
    /// image was a row of it). A record that cannot be read holds it too.
    pub(in crate::file) fn bad_row_holds(
        &self,
        c: &Compute,
        rpk: &str,
        record: Option<&Item>,
    ) -> bool {
        let Some(record) = record else {
            return false;
        };
        let id = item_id(&self.version_counter(c, rpk).key_item());
        match Implied::from_record(record) {
            Ok(implied) => implied
                .contributions
                .get(&id)
                .is_some_and(|(_, v)| v.get(VERSION_ATTR).is_some_and(|n| *n != 0)),
            Err(_) => true,
        }
    }

    /// The ledger partition key of the derive record of the item `key`.
    pub(in crate::file) fn row_record_pk(&self, key: &Item) -> String {
        source_key_pk(DERIVE, key)
    }

    /// The record among `records` (ledger items) of the row `key`.
    pub(in crate::file) fn record_of<'a>(
        &self,
        key: &Item,
        records: &'a [Item],
    ) -> Option<&'a Item> {
        let pk = self.row_record_pk(key);
        records
            .iter()
            .find(|r| ledger::as_s(r.get(ledger::PK)) == Some(pk.as_str()))
    }
}

impl ComputeJob {
    /// Reads the version of the scope's rows, then the rows (and the derive
    /// records of those that are bad input, in one more read); `None` when
    /// a row that is bad input still holds the scope (see the module), or
    /// the scope is past what a job can read.
    pub(super) async fn facts(
        &self,
        reads: &Reads,
        rpk: &str,
    ) -> Result<Option<Facts>, MessageError> {
        let m = self.m;
        let c = self.compute();
        let [pkn, skn] = m.key_names();
        let vkey = total_key(DERIVE, &m.version_counter(c, rpk).key_item());
        let version = reads.store.get(&reads.ledger_table, vkey.clone()).await?;
        let mut guards = vec![match version.as_ref().and_then(|v| v.get("ver")) {
            Some(ver) => Guard::equals(vkey, "ver", ver.clone()).in_ledger(),
            None => Guard::absent(vkey).in_ledger(),
        }];
        let items = reads
            .store
            .query_partition(&reads.table, pkn, rpk, Some((skn, &c.sk_prefix)))
            .await?;
        let over = &m.entities[c.over];
        let pin = |guards: &mut Vec<Guard>, item: &Item| {
            let key = key_of(item, &m.key_names());
            for a in c.row_reads.iter().copied() {
                guards.push(Guard::same(key.clone(), a, item.get(a)));
            }
        };
        let mut rows = Vec::with_capacity(items.len());
        let mut bad: Vec<(&Item, String)> = Vec::new();
        for item in &items {
            match m.parse(item) {
                Ok(Parsed::Writer(rec)) if std::ptr::eq(rec.entity, over) => {
                    pin(&mut guards, item);
                    rows.push(row_val(&rec.vals));
                }
                Ok(_) => {}
                Err(e) => bad.push((item, e.to_string())),
            }
        }
        if !bad.is_empty() {
            let keys = bad.iter().map(|(i, _)| m.row_record_key(i)).collect();
            let records = reads.store.batch_get(&reads.ledger_table, keys).await?;
            for (item, reason) in &bad {
                let key = key_of(item, &m.key_names());
                if m.bad_row_holds(c, rpk, m.record_of(&key, &records)) {
                    tracing::warn!(
                        processor = c.name,
                        key = %display_key(&key),
                        reason = %reason,
                        "a row of the scope is bad input after a valid image: not computed until it is fixed (what its valid images implied stays)"
                    );
                    return Ok(None);
                }
                // Never a valid row of the scope: no row. Pinned as read
                // (fixed before the derive takes it, this write is dropped).
                tracing::debug!(
                    processor = c.name,
                    key = %display_key(&key),
                    reason = %reason,
                    "a row of the scope that is bad input and never was valid: computed without it"
                );
                pin(&mut guards, item);
            }
        }
        if rows.len() > MAX_SCOPE_ROWS {
            tracing::warn!(
                processor = c.name,
                scope = %rpk,
                kind = SCOPE_TOO_LARGE,
                reason = %scope_too_large(rows.len()),
                "bad input: not computed until the scope holds at most {MAX_SCOPE_ROWS} rows"
            );
            return Ok(None);
        }
        Ok(Some(Facts {
            rows: Val::List(rows).prepare(),
            guards,
        }))
    }
}
