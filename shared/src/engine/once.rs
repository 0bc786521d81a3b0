//! Once effects: writes that must happen at most once per key (a match per
//! seeker and job), given preconditions.
//!
//! One transaction holds a permanent marker in the ledger
//! (`ONCE#<consumer>#<key>`, `attribute_not_exists`), a condition check per
//! precondition, and the writes. A duplicate (however late, whatever its
//! body's other fields) fails the marker's condition and ends as
//! [`Outcome::Duplicate`]; a failed precondition ends as a logged
//! [`Outcome::Skipped`] instead of retrying forever, and leaves the marker
//! with `skipped` (what `explain` shows). A skipped marker is no effect
//! made: `verify` calls the effect missing once its preconditions hold
//! (a required item written after the source), and the effect's next job
//! (its repair, or its source changed into `when` again) takes it over.
//!
//! An effect skipped for a required item that may come later (one of
//! [`OncePlan::waits`]: absent, or without the value compared) waits for
//! it: the job notes its body in the ledger under the item's key
//! ([`waiting_entry_key`], with a flag at [`waiting_key`] that the derive
//! reads with its batch), and the derive, on a change that may make the
//! requirement hold (the item created, removed or its compared value
//! changed), sends the waiting jobs again (see
//! `crate::engine::derive::DeriveProcessor`). The note is written before
//! the requirement is read again: an item written meanwhile is either seen
//! by that read (the job runs again at once) or its stream record is
//! processed after the note exists. Notes expire after
//! [`WAIT_TTL_SECS`] (a requirement gone for good leaves nothing lasting)
//! and are not deleted when sent: a job sent again is a duplicate of its
//! marker, or skipped and noted anew.

use std::sync::Arc;

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use chrono::Utc;

use super::setjob::{condition_check, BoxFut, Guard, Reads};
use crate::item::{n, s, Item};
use crate::ledger;
use crate::metrics::Metrics;
use crate::sqs::{MessageError, MessageProcessor, Outcome};
use crate::store::{Store, TxError};
use crate::tx;

/// What a once effect wants.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OncePlan {
    /// The key the effect is unique for (e.g. `<seekerId>#<jobId>`).
    pub once_key: String,
    /// Preconditions, each with the reason logged when it fails.
    pub checks: Vec<(Guard, String)>,
    pub puts: Vec<Item>,
    pub deletes: Vec<Item>,
    /// The positions in `checks` of the preconditions a later write may
    /// make hold (an item of another entity than the source's): when one
    /// fails, the effect waits for its item.
    pub waits: Vec<usize>,
}

/// A once rule.
pub trait Once: Send + Sync {
    fn name(&self) -> &'static str;
    fn key_names(&self) -> &'static [&'static str];
    /// The logical queue of its jobs (where a waiting job is sent again).
    fn queue(&self) -> &'static str;
    /// Decodes the body (bad body: `MessageError::Permanent`) and says what
    /// to do; it may read (consistently) through `reads`.
    fn plan<'a>(
        &'a self,
        body: &'a str,
        reads: &'a Reads,
    ) -> BoxFut<'a, Result<OncePlan, MessageError>>;
}

/// Ledger key of a once marker (bounded like every ledger key:
/// [`ledger::bounded_pk`]).
pub fn marker_key(consumer: &str, once_key: &str) -> Item {
    ledger::key(
        ledger::bounded_pk(&format!("ONCE#{consumer}#"), once_key),
        "ONCE",
    )
}

/// How long an effect waits for a required item (its note's TTL).
pub const WAIT_TTL_SECS: i64 = 7 * 24 * 3600;

/// Sort key of the flag saying some effect waits for an item.
pub const WAITING_SK: &str = "WAIT";

/// Sort key prefix of the effects waiting for an item (bounded:
/// [`ledger::bounded_sk`]).
const WAITING_ENTRY_PREFIX: &str = "ONCE#";

/// The attributes of a waiting effect's note: its job's queue (logical
/// name) and body.
pub const WAITING_QUEUE: &str = "queue";
pub const WAITING_BODY: &str = "body";

fn waiting_pk(required: &Item) -> String {
    ledger::bounded_pk("WAIT#", &ledger::item_id(required))
}

/// Ledger key of the flag that some effect waits for the item at
/// `required` (read by the derive with its batch, one key per item).
pub fn waiting_key(required: &Item) -> Item {
    ledger::key(waiting_pk(required), WAITING_SK)
}

/// Ledger key of the note that once effect `consumer`'s `once_key` waits
/// for the item at `required` (in the flag's partition).
pub fn waiting_entry_key(required: &Item, consumer: &str, once_key: &str) -> Item {
    ledger::key(
        waiting_pk(required),
        ledger::bounded_sk(&format!("{WAITING_ENTRY_PREFIX}{consumer}#{once_key}")),
    )
}

/// How many times a job runs again at once when a requirement it found
/// failing holds by the time its wait is noted.
const ATTEMPTS: usize = 3;

/// The SQS consumer of a [`Once`] rule.
pub struct OnceProcessor {
    rule: Arc<dyn Once>,
    reads: Reads,
    metrics: Metrics,
}

impl OnceProcessor {
    pub fn new(rule: Arc<dyn Once>, store: Store, table: &str, ledger_table: &str) -> Self {
        Self {
            rule,
            reads: Reads {
                store,
                table: table.into(),
                ledger_table: ledger_table.into(),
                now: Utc::now(),
            },
            metrics: Metrics::default(),
        }
    }

    pub fn store(&self) -> &Store {
        &self.reads.store
    }

    fn actions(&self, plan: &OncePlan) -> Vec<TransactWriteItem> {
        let table = &self.reads.table;
        let key0 = self.rule.key_names()[0];
        let mut marker = marker_key(self.rule.name(), &plan.once_key);
        marker.insert("at".into(), s(self.reads.now.to_rfc3339()));
        let mut actions = vec![self.marker_put(marker)];
        for (g, _) in &plan.checks {
            actions.push(condition_check(&[g], table, &self.reads.ledger_table, key0));
        }
        actions.extend(plan.puts.iter().map(|p| tx::put(table, p.clone())));
        actions.extend(plan.deletes.iter().map(|k| tx::delete(table, k.clone())));
        actions
    }
}

impl OnceProcessor {
    /// The put of an effect's marker: where no marker is, or over a
    /// skipped one (never over the marker of an effect made).
    fn marker_put(&self, marker: Item) -> TransactWriteItem {
        tx::put_of(
            Put::builder()
                .table_name(&self.reads.ledger_table)
                .set_item(Some(marker))
                .condition_expression("attribute_not_exists(pk) OR #skipped = :skipped")
                .expression_attribute_names("#skipped", SKIPPED)
                .expression_attribute_values(":skipped", AttributeValue::Bool(true)),
        )
    }

    /// Records a skipped effect: its marker with `skipped`, unless the
    /// effect was made meanwhile (a made marker is never overwritten).
    async fn mark_skipped(&self, plan: &OncePlan) -> Result<(), MessageError> {
        let mut marker = marker_key(self.rule.name(), &plan.once_key);
        marker.insert("at".into(), s(Utc::now().to_rfc3339()));
        marker.insert(SKIPPED.into(), AttributeValue::Bool(true));
        match self
            .reads
            .store
            .transact(vec![self.marker_put(marker)])
            .await
        {
            Ok(()) | Err(TxError::ConditionsFailed { .. }) => Ok(()),
            Err(TxError::Store(e)) => Err(e.into()),
        }
    }
}

impl OnceProcessor {
    /// Notes that the effect waits for the items of `awaited` (each note
    /// and its item's flag in one transaction, TTL [`WAIT_TTL_SECS`]).
    async fn note_waiting(
        &self,
        plan: &OncePlan,
        body: &str,
        awaited: &[&Guard],
    ) -> Result<(), MessageError> {
        let ledger_table = &self.reads.ledger_table;
        let ttl = n(Utc::now().timestamp() + WAIT_TTL_SECS);
        let mut actions = Vec::with_capacity(awaited.len() * 2);
        for g in awaited {
            let mut entry = waiting_entry_key(&g.key, self.rule.name(), &plan.once_key);
            entry.insert(WAITING_QUEUE.into(), s(self.rule.queue()));
            entry.insert(WAITING_BODY.into(), s(body));
            entry.insert(ledger::TTL.into(), ttl.clone());
            let mut flag = waiting_key(&g.key);
            flag.insert(ledger::TTL.into(), ttl.clone());
            actions.push(tx::put(ledger_table, entry));
            actions.push(tx::put(ledger_table, flag));
        }
        match self.reads.store.transact(actions).await {
            Ok(()) => Ok(()),
            // Unconditional puts: nothing to fail but a lost race, retried.
            Err(TxError::ConditionsFailed { .. }) => Err(MessageError::Retryable(
                crate::error::ProcessError::Conflict("a waiting note was not written".into()),
            )),
            Err(TxError::Store(e)) => Err(e.into()),
        }
    }

    /// Whether any of `awaited` holds now (consistent reads): its item was
    /// written while the note was not there yet.
    async fn any_holds(&self, awaited: &[&Guard]) -> Result<bool, MessageError> {
        let keys: Vec<Item> = awaited.iter().map(|g| g.key.clone()).collect();
        let found = self.reads.store.batch_get(&self.reads.table, keys).await?;
        let ids: std::collections::HashMap<String, &Item> = found
            .iter()
            .map(|i| {
                (
                    ledger::item_id(&crate::item::key_of(i, self.rule.key_names())),
                    i,
                )
            })
            .collect();
        Ok(awaited
            .iter()
            .any(|g| g.holds(ids.get(&ledger::item_id(&g.key)).copied())))
    }
}

/// The marker attribute of an effect skipped for a failed precondition.
pub const SKIPPED: &str = "skipped";

impl MessageProcessor for OnceProcessor {
    fn name(&self) -> &'static str {
        self.rule.name()
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    async fn process(&self, body: &str) -> Result<Outcome, MessageError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut reads = self.reads.clone();
            reads.now = Utc::now();
            let plan = self.rule.plan(body, &reads).await?;
            let failed = match self.reads.store.transact(self.actions(&plan)).await {
                Ok(()) => return Ok(Outcome::Applied),
                Err(TxError::ConditionsFailed { failed }) => failed,
                Err(TxError::Store(e)) => return Err(e.into()),
            };
            if failed.first() == Some(&true) {
                return Ok(Outcome::Duplicate);
            }
            let failing: Vec<usize> = (0..plan.checks.len())
                .filter(|i| failed.get(i + 1) == Some(&true))
                .collect();
            let reason = failing
                .first()
                .map(|i| plan.checks[*i].1.clone())
                .unwrap_or_else(|| "a precondition does not hold".into());
            let awaited: Vec<&Guard> = failing
                .iter()
                .filter(|i| plan.waits.contains(i))
                .map(|i| &plan.checks[*i].0)
                .collect();
            if !awaited.is_empty() {
                self.note_waiting(&plan, body, &awaited).await?;
                if attempt < ATTEMPTS && self.any_holds(&awaited).await? {
                    continue;
                }
            }
            self.mark_skipped(&plan).await?;
            return Ok(Outcome::Skipped(reason));
        }
    }
}
